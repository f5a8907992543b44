//! `bench-peers`: tickless against ureq, hyper and reqwest, in one run.
//!
//! `cargo run --release --manifest-path bench-peers/Cargo.toml -- [options]`;
//! see README.md beside Cargo.toml for what each case measures and how each
//! client is driven, and `--help` for the options.
//!
//! Modules: [`server`] the built-in loopback servers, [`cases`] the cases,
//! [`clients`] one module per client (every call into a client's API is
//! there), [`drive`] the request loops they share, [`measure`] clocks and
//! counters, [`lateness`] the timeout bursts, [`report`] the output.

mod cases;
mod clients;
mod drive;
mod lateness;
mod measure;
mod report;
mod server;
#[path = "../../examples/common/unicode_args.rs"]
mod unicode_args;

use cases::{Case, ALL_CASES};
use clients::{Peer, ALL_PEERS};
use measure::Plan;
use report::{LagRow, Row, Run};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const USAGE: &str = "\
bench-peers: tickless against ureq, hyper and reqwest, interleaved in one run.

USAGE:
    cargo run --release --manifest-path bench-peers/Cargo.toml -- [OPTIONS]

OPTIONS:
    --url URL            base URL of a server with the routes /small, /1mib,
                         /64k-chunked (and /never for --lateness), e.g.
                         http://127.0.0.1:8080 for nginx; default: start the
                         built-in loopback server (its CPU is then measured
                         and subtracted)
    --runs N             rounds of every case and client, interleaved (default 3)
    --seconds S          measured time of each run (default 2)
    --warmup-ms N        warm-up of each run, not measured (default 300)
    --window N           requests in flight in 13b-64-in-flight and 13b-64-tasks
                         (default 64)
    --case NAME          only this case; repeatable (13b-seq, 13b-seq-timeout,
                         13b-seq-loop-timeout (tickless alone),
                         13b-64-in-flight, 13b-64-tasks (tickless alone),
                         1mib-seq, 64k-chunked-seq)
    --client NAME        only this client; repeatable (tickless, ureq, hyper,
                         reqwest)
    --lateness           also run the timeout-lateness bursts after the cases
    --lateness-only      run only the lateness bursts
    --lateness-count N   requests per burst (default 2000)
    --deadline-ms A,B    per-request timeouts of the bursts (default 20,1000)
    --format table|csv   output format (default table); in csv the header
                         lines start with '#'
    -h, --help           print this help
";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Table,
    Csv,
}

struct Options {
    url: Option<String>,
    runs: usize,
    plan: Plan,
    window: usize,
    cases: Vec<Case>,
    peers: Vec<Peer>,
    cases_on: bool,
    lateness: bool,
    lateness_count: usize,
    deadlines: Vec<Duration>,
    format: Format,
}

fn parse_args() -> Result<Option<Options>, String> {
    let mut o = Options {
        url: None,
        runs: 3,
        plan: Plan {
            warmup: Duration::from_millis(300),
            measure: Duration::from_secs(2),
        },
        window: 64,
        cases: Vec::new(),
        peers: Vec::new(),
        cases_on: true,
        lateness: false,
        lateness_count: 2000,
        deadlines: vec![Duration::from_millis(20), Duration::from_millis(1000)],
        format: Format::Table,
    };
    let mut args = unicode_args::or_exit("bench-peers", USAGE);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_string(), Some(value.into())),
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        let positive = |v: String| {
            v.parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{flag}: not a positive number: {v}"))
        };
        match flag.as_str() {
            "--url" => o.url = Some(value()?.trim_end_matches('/').to_string()),
            "--runs" => o.runs = positive(value()?)? as usize,
            "--seconds" => {
                let v = value()?;
                let s: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| *s > 0.0 && *s <= 600.0)
                    .ok_or_else(|| format!("--seconds: not in (0, 600]: {v}"))?;
                o.plan.measure = Duration::from_secs_f64(s);
            }
            "--warmup-ms" => {
                let v = value()?;
                let ms: u64 = v.parse().map_err(|_| format!("--warmup-ms: {v}"))?;
                o.plan.warmup = Duration::from_millis(ms);
            }
            "--window" => o.window = positive(value()?)?.min(4096) as usize,
            "--case" => {
                let name = value()?;
                let case = Case::from_name(&name).ok_or_else(|| {
                    let names: Vec<_> = ALL_CASES.iter().map(|c| c.name()).collect();
                    format!("unknown case {name}; one of: {}", names.join(", "))
                })?;
                if !o.cases.contains(&case) {
                    o.cases.push(case);
                }
            }
            "--client" => {
                let name = value()?;
                let peer = Peer::from_name(&name).ok_or_else(|| {
                    let names: Vec<_> = ALL_PEERS.iter().map(|p| p.name()).collect();
                    format!("unknown client {name}; one of: {}", names.join(", "))
                })?;
                if !o.peers.contains(&peer) {
                    o.peers.push(peer);
                }
            }
            "--lateness" => o.lateness = true,
            "--lateness-only" => {
                o.lateness = true;
                o.cases_on = false;
            }
            "--lateness-count" => o.lateness_count = positive(value()?)?.min(60_000) as usize,
            "--deadline-ms" => {
                o.deadlines = value()?
                    .split(',')
                    .map(|ms| {
                        ms.trim()
                            .parse::<u64>()
                            .ok()
                            .filter(|&ms| ms > 0 && ms <= 60_000)
                            .map(Duration::from_millis)
                            .ok_or_else(|| format!("--deadline-ms: not in 1..=60000: {ms}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--format" => {
                o.format = match value()?.as_str() {
                    "table" => Format::Table,
                    "csv" => Format::Csv,
                    other => return Err(format!("unknown format {other}")),
                }
            }
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if o.cases.is_empty() {
        o.cases = ALL_CASES.to_vec();
    } else {
        // Keep the run order of ALL_CASES whatever the order given.
        o.cases = ALL_CASES
            .into_iter()
            .filter(|c| o.cases.contains(c))
            .collect();
    }
    if o.peers.is_empty() {
        o.peers = ALL_PEERS.to_vec();
    }
    Ok(Some(o))
}

fn main() -> ExitCode {
    let options = match parse_args() {
        Ok(Some(options)) => options,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("bench-peers: {error}\nTry --help.");
            return ExitCode::from(2);
        }
    };
    let prefix = if options.format == Format::Csv {
        "# "
    } else {
        ""
    };
    for (key, value) in machine() {
        println!("{prefix}{key:<8} {value}");
    }
    println!("{prefix}versions {}", env!("PEER_VERSIONS"));

    let mut failed = false;
    if options.cases_on {
        failed |= !run_cases(&options, prefix);
    }
    if options.lateness {
        failed |= !run_lateness(&options, prefix);
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The cases, interleaved; prints the table. False if a run failed.
fn run_cases(o: &Options, prefix: &str) -> bool {
    let mut builtin = match &o.url {
        Some(_) => None,
        None => match server::Server::start() {
            Ok(server) => Some(server),
            Err(e) => {
                eprintln!("bench-peers: start the server: {e}");
                return false;
            }
        },
    };
    let base = match (&o.url, &builtin) {
        (Some(url), _) => url.clone(),
        (None, Some(server)) => format!("http://{}", server.addr()),
        (None, None) => unreachable!(),
    };
    println!(
        "{prefix}server   {}",
        match &o.url {
            Some(url) => format!("{url} (external: its CPU is not measured nor subtracted)"),
            None => format!("built-in at {base} (its threads' CPU measured and subtracted)"),
        }
    );
    println!(
        "{prefix}runs     {} per case and client, interleaved; {:.1} s measured after {} ms warm-up each",
        o.runs,
        o.plan.measure.as_secs_f64(),
        o.plan.warmup.as_millis()
    );
    println!("{prefix}");

    let mut rows: Vec<Row> = Vec::new();
    for &case in &o.cases {
        for &peer in &o.peers {
            if !case.for_every_client() && peer != Peer::Tickless {
                continue;
            }
            rows.push(Row {
                case,
                peer,
                runs: Vec::new(),
                failed: 0,
            });
        }
    }
    let mut ok = true;
    for round in 0..o.runs {
        for row in rows.iter_mut() {
            let (case, peer) = (row.case, row.peer);
            let url = format!("{base}{}", case.path());
            eprint!(
                "run {}/{} {:<17} {:<9}",
                round + 1,
                o.runs,
                case.name(),
                peer.name()
            );
            let sample = match case {
                Case::InFlight => peer.in_flight(&url, case.body_len(), o.window, o.plan),
                Case::InFlightTasks => {
                    clients::tickless::in_flight_tasks(&url, case.body_len(), o.window, o.plan)
                }
                _ => peer
                    .blocking(case.timeout(), case.on_event_loops())
                    .and_then(|mut client| {
                        drive::sequential(&mut *client, &url, case.body_len(), o.plan)
                    }),
            };
            // The client is gone: the server's threads can be reaped.
            let server = builtin.as_ref().map(server::Server::reap);
            match sample {
                Ok(sample) => {
                    let run = Run { sample, server };
                    eprintln!(
                        "{:>10.0} req/s  {:>7.2} client CPU us/req  {:>3} conns",
                        run.req_per_s(),
                        run.client_cpu_us(),
                        run.connections().map_or("-".to_string(), |c| c.to_string())
                    );
                    row.runs.push(run);
                }
                Err(e) => {
                    eprintln!("FAILED: {e}");
                    row.failed += 1;
                    ok = false;
                }
            }
        }
    }
    if let Some(server) = builtin.as_mut() {
        server.stop();
    }
    match o.format {
        Format::Table => print!("{}", report::table(&rows)),
        Format::Csv => print!("{}", report::csv(&rows)),
    }
    println!("{prefix}");
    for line in report::timeout_cost(&rows) {
        println!("{prefix}{line}");
    }
    println!(
        "{prefix}cpu_us_per_req: process user+sys (getrusage RUSAGE_SELF) over the measured part; \
server_cpu_us: the built-in server's threads (RUSAGE_THREAD) per request answered; \
client_cpu_us = cpu - server; client_csw_per_req likewise; conns: connections the server accepted in the run"
    );
    ok
}

/// The lateness bursts; prints their table. False if a burst failed.
fn run_lateness(o: &Options, prefix: &str) -> bool {
    lateness::prepare(o.lateness_count.saturating_mul(2).saturating_add(256));
    println!("{prefix}");
    println!(
        "{prefix}lateness: {} requests at once to a server that never answers, per client and timeout; \
lag = when the request's future resolved minus its deadline (the clock read in its task just before \
the request, plus the timeout); every client on a fresh 2-worker tokio runtime, one task per request",
        o.lateness_count
    );
    if o.peers.contains(&Peer::Ureq) {
        println!(
            "{prefix}ureq: not in the bursts (blocking only: a burst would be {} threads)",
            o.lateness_count
        );
    }
    println!("{prefix}");
    type Runner = fn(&str, usize, Duration) -> Result<lateness::Burst, String>;
    use clients::tickless::Timeouts;
    let tickless_wheel: Runner = |u, n, d| clients::tickless::lateness(u, n, d, Timeouts::Wheel);
    let tickless_loop: Runner = |u, n, d| clients::tickless::lateness(u, n, d, Timeouts::Loops);
    let tickless_tokio: Runner =
        |u, n, d| clients::tickless::lateness(u, n, d, Timeouts::LoopsOnTokio);
    let all: [(Peer, &str, Runner); 5] = [
        (
            Peer::Reqwest,
            "reqwest .timeout()",
            clients::reqwest::lateness,
        ),
        (
            Peer::Hyper,
            "hyper in tokio::time::timeout",
            clients::hyper::lateness,
        ),
        (Peer::Tickless, "tickless wheel (default)", tickless_wheel),
        (
            Peer::Tickless,
            "tickless use_event_loop_timeouts",
            tickless_loop,
        ),
        (
            Peer::Tickless,
            "tickless the same, loops on tokio",
            tickless_tokio,
        ),
    ];
    let mut rows = Vec::new();
    let mut ok = true;
    for &deadline in &o.deadlines {
        for (_, name, runner) in all.iter().filter(|(p, _, _)| o.peers.contains(p)) {
            eprint!("burst {:>5} ms {name:<34}", deadline.as_millis());
            let silent = match &o.url {
                Some(_) => None,
                None => match server::SilentServer::start() {
                    Ok(s) => Some(s),
                    Err(e) => {
                        eprintln!("FAILED: silent server: {e}");
                        ok = false;
                        continue;
                    }
                },
            };
            let url = match (&o.url, &silent) {
                (Some(url), _) => format!("{url}/never"),
                (None, Some(s)) => format!("http://{}/never", s.addr()),
                (None, None) => unreachable!(),
            };
            let result = runner(&url, o.lateness_count, deadline);
            if let Some(silent) = silent {
                silent.stop();
            }
            match result {
                Ok(mut burst) => {
                    eprintln!(
                        "{} timed out, {} other, {} unresolved",
                        burst.timeouts, burst.others, burst.unresolved
                    );
                    if let Some(e) = &burst.first_other {
                        eprintln!("  first other outcome: {e}");
                    }
                    if burst.timeouts != burst.armed {
                        ok = false;
                    }
                    let ended = burst.ended_lags_ns.take();
                    let lags = burst.lags_ns.clone();
                    let client = name.to_string();
                    if let Some(ended) = ended {
                        rows.push(LagRow {
                            client: client.clone(),
                            measured_at: "exchange end (listener)",
                            deadline,
                            burst: lateness::Burst {
                                armed: burst.armed,
                                timeouts: burst.timeouts,
                                others: burst.others,
                                unresolved: burst.unresolved,
                                ..lateness::Burst::default()
                            },
                            lags_ns: ended,
                        });
                    }
                    rows.push(LagRow {
                        client,
                        measured_at: "future resolved (task)",
                        deadline,
                        burst,
                        lags_ns: lags,
                    });
                }
                Err(e) => {
                    eprintln!("FAILED: {e}");
                    ok = false;
                }
            }
        }
    }
    match o.format {
        Format::Table => print!("{}", report::lag_table(&rows)),
        Format::Csv => print!("{}", report::lag_csv(&rows)),
    }
    println!(
        "{prefix}\"exchange end\" is tickless's own report of the failure (an EventListener, as tick-lag \
--end-to-end measures); \"future resolved\" adds the wake-up of the task on tokio"
    );
    ok
}

fn machine() -> Vec<(&'static str, String)> {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    let available = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = read("/proc/loadavg");
    vec![
        ("date", utc_now()),
        ("cores", format!("{available} available")),
        ("cpu", model),
        (
            "kernel",
            format!(
                "{} {}",
                read("/proc/sys/kernel/ostype").trim(),
                read("/proc/sys/kernel/osrelease").trim()
            ),
        ),
        (
            "load",
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" "),
        ),
    ]
}

/// The current time in UTC, `YYYY-MM-DD HH:MM:SS UTC`.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
