//! Command-line parsing for `tick-lag`, by hand with std only.
//!
//! [`parse`] never panics: every bad input becomes an [`ArgError`] whose
//! message says what was wrong, and `main` exits with code 2 on it.

use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

use crate::instruments::{self, Instrument};

/// Largest `--count` accepted: each timeout costs a few dozen bytes, and a
/// burst larger than this says more about the allocator than about timers.
pub const MAX_COUNT: usize = 1_000_000;
/// Largest deadline accepted, in milliseconds (one hour).
pub const MAX_DEADLINE_MS: u64 = 3_600_000;

/// The usage text printed by `--help`.
pub const USAGE: &str = "\
tick-lag: how late timeouts fire, per timer instrument.

For each deadline D and each instrument, arms one burst of COUNT timeouts,
each due at (clock now at arming) + D, and reports how late they fired
(fire time minus deadline): mean, p50, p99 (nearest rank) and max.
Instruments run one after another, never concurrently. The request options
(--http2, --warm, --under-load) act on the client instruments, chosen by
--end-to-end or by name, --loop-spin-us on those on event loops and
--unpinned on client-event-loop: each is refused when none it acts on runs,
and so is --end-to-end when --instrument chose no client instrument.

USAGE:
    tick-lag [OPTIONS]

OPTIONS:
    --count N              timeouts per burst (default 2000, 1..=1000000)
    --deadline-ms A,B,...  deadlines in milliseconds (default 20,1000); not 0
                           with the client instruments, whose request
                           timeout of zero would be none
    --instrument NAME      run only NAME; repeatable (default: the three
                           timer instruments, or with --end-to-end the
                           three client ones)
    --end-to-end           send COUNT requests at once through the client to
                           a loopback server that never answers, each with
                           request timeout D, and measure when each failed;
                           notes under the table give the kernel's time to
                           open COUNT connections from one thread, and how
                           many event-loop-mode timeouts expired on the
                           wheel (connect not done) rather than a loop
    --http2                with --end-to-end: the requests are HTTP/2 streams
                           (prior knowledge), COUNT of them over four
                           connections, one per server
    --warm                 with --end-to-end (HTTP/1.1): COUNT connections are
                           opened and pooled first (the server answers one
                           request on each, then stays silent), so every
                           request of the burst goes out on a pooled one and
                           its timeout is on a loop from the start
    --under-load           with --end-to-end (HTTP/1.1): while the burst
                           runs, the same client keeps 64 requests in
                           flight to a second server that answers at once
                           (a note gives the load's rate during each burst)
    --loop-spin-us N       event loops (event-loop, client-event-loop) busy-poll
                           the last N µs before a deadline instead of
                           sleeping (default 0: they sleep)
    --unpinned             client-event-loop's event loops are not pinned to
                           CPUs of their own (by default they are, one per
                           CPU; the wheel modes' never are), for comparison
    --format table|csv     output format (default table); in csv mode the
                           machine and date lines go to stderr
    -h, --help             print this help

INSTRUMENTS:
";

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned, human-readable columns.
    Table,
    /// `instrument,deadline_ms,count,mean_us,p50_us,p99_us,max_us`.
    Csv,
}

/// What a run measures and how it prints.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Timeouts per burst.
    pub count: usize,
    /// The deadlines, in the order given.
    pub deadlines: Vec<Duration>,
    /// The instruments, in the order given (duplicates dropped).
    pub instruments: Vec<&'static Instrument>,
    /// Output format.
    pub format: Format,
    /// How long the event loops busy-poll before a deadline.
    pub loop_spin: Duration,
    /// The event loops are left unpinned (`--unpinned`).
    pub unpinned: bool,
    /// End-to-end requests go over HTTP/2 (`--http2`).
    pub http2: bool,
    /// End-to-end requests go out on pooled connections (`--warm`).
    pub warm: bool,
    /// End-to-end bursts run beside a throughput load (`--under-load`).
    pub under_load: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            count: 2000,
            deadlines: vec![Duration::from_millis(20), Duration::from_millis(1000)],
            instruments: instruments::defaults(false),
            format: Format::Table,
            loop_spin: Duration::ZERO,
            unpinned: false,
            http2: false,
            warm: false,
            under_load: false,
        }
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Print [`USAGE`] and exit successfully.
    Help,
    /// Measure.
    Run(Config),
}

/// A command line that cannot be run; the message is for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The program's arguments as [`parse`] takes them, from
/// `std::env::args_os`: one that is not UTF-8 is an [`ArgError`] (exit 2),
/// where `std::env::args` would panic (exit 101).
pub fn unicode(args: impl IntoIterator<Item = OsString>) -> Result<Vec<String>, ArgError> {
    args.into_iter()
        .map(|arg| {
            arg.into_string()
                .map_err(|arg| ArgError(format!("an argument that is not UTF-8: {arg:?}")))
        })
        .collect()
}

/// The usage text followed by the list of instruments.
pub fn usage() -> String {
    let mut text = USAGE.to_owned();
    for instrument in &instruments::ALL {
        text.push_str(&format!(
            "    {:<14} {}\n",
            instrument.name, instrument.description
        ));
    }
    text
}

/// Parses the arguments after the program name.
///
/// Options take their value either as the next argument (`--count 50`) or
/// after `=` (`--count=50`).
pub fn parse<I>(args: I) -> Result<Command, ArgError>
where
    I: IntoIterator,
    I::Item: Into<String>,
{
    let mut config = Config::default();
    let mut chosen: Vec<&'static Instrument> = Vec::new();
    let mut end_to_end = false;
    let mut args = args.into_iter().map(Into::into);
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => {
                (name.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = |option: &str| -> Result<String, ArgError> {
            match inline.clone().or_else(|| args.next()) {
                Some(value) => Ok(value),
                None => Err(ArgError(format!("{option} needs a value"))),
            }
        };
        // A flag that takes no value: one given after `=` is refused.
        let flag = || match inline {
            Some(_) => Err(ArgError(format!("{name} takes no value"))),
            None => Ok(true),
        };
        match name.as_str() {
            "-h" | "--help" => {
                flag()?;
                return Ok(Command::Help);
            }
            "--end-to-end" => end_to_end = flag()?,
            "--http2" => config.http2 = flag()?,
            "--warm" => config.warm = flag()?,
            "--unpinned" => config.unpinned = flag()?,
            "--under-load" => config.under_load = flag()?,
            "--count" => config.count = parse_count(&value("--count")?)?,
            "--deadline-ms" => config.deadlines = parse_deadlines(&value("--deadline-ms")?)?,
            "--instrument" => {
                let wanted = value("--instrument")?;
                let instrument = instruments::find(&wanted).ok_or_else(|| {
                    ArgError(format!(
                        "unknown instrument {wanted:?}; valid names: {}",
                        instruments::names().join(", ")
                    ))
                })?;
                if !chosen.iter().any(|c| c.name == instrument.name) {
                    chosen.push(instrument);
                }
            }
            "--loop-spin-us" => {
                let text = value("--loop-spin-us")?;
                let micros: u64 = text
                    .trim()
                    .parse()
                    .ok()
                    .filter(|&us| us <= 1_000_000)
                    .ok_or_else(|| {
                        ArgError(format!(
                            "--loop-spin-us takes microseconds from 0 to 1000000, not {text:?}"
                        ))
                    })?;
                config.loop_spin = Duration::from_micros(micros);
            }
            "--format" => {
                config.format = match value("--format")?.as_str() {
                    "table" => Format::Table,
                    "csv" => Format::Csv,
                    other => {
                        return Err(ArgError(format!(
                            "unknown format {other:?}; valid formats: table, csv"
                        )))
                    }
                }
            }
            _ if inline.is_none() && !arg.starts_with('-') => {
                return Err(ArgError(format!("unexpected argument {arg:?}")))
            }
            _ => return Err(ArgError(format!("unknown option {name:?}"))),
        }
    }
    config.instruments = if chosen.is_empty() {
        instruments::defaults(end_to_end)
    } else {
        chosen
    };
    // Decided by the instruments that will run, not by `--end-to-end`
    // alone: `--instrument` may pick client instruments without it, or
    // only timer ones with it, and a flag that would change nothing is an
    // error rather than silently ignored.
    let sends_requests = config.instruments.iter().any(|i| i.end_to_end);
    if config.http2 && !sends_requests {
        return Err(ArgError(
            "--http2 is for --end-to-end (the timer instruments send no requests)".to_owned(),
        ));
    }
    if config.warm && (config.http2 || !sends_requests) {
        return Err(ArgError(
            "--warm is for --end-to-end over HTTP/1.1 (HTTP/2 connections are shared already)"
                .to_owned(),
        ));
    }
    if config.under_load && (config.http2 || !sends_requests) {
        return Err(ArgError(
            "--under-load is for --end-to-end over HTTP/1.1 (its load server speaks HTTP/1.1)"
                .to_owned(),
        ));
    }
    if end_to_end && !sends_requests {
        return Err(ArgError(
            "--end-to-end is for the client instruments, and --instrument chose none of them \
             (their names start with client-)"
                .to_owned(),
        ));
    }
    if !config.loop_spin.is_zero() && !config.instruments.iter().any(|i| i.on_loops) {
        return Err(ArgError(
            "--loop-spin-us is for the instruments on event loops (event-loop, \
             client-event-loop); the wheels do not spin"
                .to_owned(),
        ));
    }
    // The client pins its loops by default in event-loop mode alone: on
    // the wheel they are unpinned already, and the timer instruments make
    // no client.
    if config.unpinned
        && !config
            .instruments
            .iter()
            .any(|i| i.end_to_end && i.on_loops)
    {
        return Err(ArgError(
            "--unpinned is for client-event-loop (--end-to-end), the one instrument whose \
             event loops are pinned by default"
                .to_owned(),
        ));
    }
    // The client instruments make D the request timeout, and a zero
    // request timeout is none: their requests would hang on the silent
    // server until the burst's ceiling, and the run measure nothing.
    if sends_requests && config.deadlines.contains(&Duration::ZERO) {
        return Err(ArgError(
            "--deadline-ms 0 is for the timer instruments: the client instruments make the \
             deadline a request timeout, and a zero one disables it"
                .to_owned(),
        ));
    }
    Ok(Command::Run(config))
}

fn parse_count(text: &str) -> Result<usize, ArgError> {
    match text.trim().parse::<usize>() {
        Ok(count) if (1..=MAX_COUNT).contains(&count) => Ok(count),
        _ => Err(ArgError(format!(
            "--count must be a whole number from 1 to {MAX_COUNT}, not {text:?}"
        ))),
    }
}

fn parse_deadlines(text: &str) -> Result<Vec<Duration>, ArgError> {
    let mut deadlines = Vec::new();
    for part in text.split(',') {
        match part.trim().parse::<u64>() {
            Ok(ms) if ms <= MAX_DEADLINE_MS => deadlines.push(Duration::from_millis(ms)),
            _ => {
                return Err(ArgError(format!(
                    "--deadline-ms takes a comma-separated list of whole milliseconds \
                     from 0 to {MAX_DEADLINE_MS}; {part:?} is not one"
                )))
            }
        }
    }
    Ok(deadlines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Config, ArgError> {
        match parse(args.iter().copied())? {
            Command::Run(config) => Ok(config),
            Command::Help => panic!("unexpected help"),
        }
    }

    fn names(config: &Config) -> Vec<&'static str> {
        config.instruments.iter().map(|i| i.name).collect()
    }

    #[test]
    fn defaults() {
        let config = run(&[]).unwrap();
        assert_eq!(config.count, 2000);
        assert_eq!(
            config.deadlines,
            [Duration::from_millis(20), Duration::from_millis(1000)]
        );
        assert_eq!(names(&config), ["wheel-5ms", "wheel-1ms", "event-loop"]);
        assert_eq!(config.format, Format::Table);
    }

    #[test]
    fn every_option_in_both_spellings() {
        let config = run(&[
            "--count",
            "50",
            "--deadline-ms=5,7",
            "--instrument",
            "event-loop",
            "--instrument=wheel-1ms",
            "--instrument",
            "event-loop",
            "--format",
            "csv",
        ])
        .unwrap();
        assert_eq!(config.count, 50);
        assert_eq!(
            config.deadlines,
            [Duration::from_millis(5), Duration::from_millis(7)]
        );
        assert_eq!(names(&config), ["event-loop", "wheel-1ms"]);
        assert_eq!(config.format, Format::Csv);
        assert_eq!(parse(["--help"]), Ok(Command::Help));
        assert_eq!(parse(["--count", "3", "-h"]), Ok(Command::Help));
        // A flag given a value is refused, `--help` as the others.
        assert_eq!(
            parse(["--help=x"]),
            Err(ArgError("--help takes no value".to_owned()))
        );
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for bad in [
            &["--count"][..],
            &["--count", "0"],
            &["--count", "-3"],
            &["--count", "2000000"],
            &["--count", "lots"],
            &["--deadline-ms", ""],
            &["--deadline-ms", "20,,1000"],
            &["--deadline-ms", "1.5"],
            &["--deadline-ms", "99999999999999999999"],
            &["--instrument", "nope"],
            &["--format", "xml"],
            &["--loop-spin-us", "-1"],
            &["--loop-spin-us", "2000000"],
            &["--frobnicate"],
            &["stray"],
        ] {
            assert!(run(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(
            run(&["--loop-spin-us", "2000"]).unwrap().loop_spin,
            Duration::from_micros(2000)
        );
        assert_eq!(run(&[]).unwrap().loop_spin, Duration::ZERO);
        assert!(run(&["--end-to-end", "--unpinned"]).unwrap().unpinned);
        assert!(!run(&[]).unwrap().unpinned);
        // Not silently ignored either: --unpinned acts on the client's
        // event-loop-mode loops alone, --loop-spin-us on event loops.
        for args in [
            &["--unpinned"][..],
            &[
                "--end-to-end",
                "--unpinned",
                "--instrument",
                "client-wheel-5ms",
            ],
            &["--unpinned", "--instrument", "event-loop"],
            &["--loop-spin-us", "100", "--instrument", "wheel-1ms"],
            &[
                "--end-to-end",
                "--loop-spin-us",
                "100",
                "--instrument",
                "client-wheel-1ms",
            ],
        ] {
            let err = run(args).unwrap_err();
            assert!(err.0.contains("is for"), "{args:?}: {err}");
        }
        for args in [
            &["--unpinned", "--instrument", "client-event-loop"][..],
            &["--loop-spin-us", "100", "--instrument", "event-loop"],
            &["--end-to-end", "--loop-spin-us", "100"],
            &["--loop-spin-us", "0", "--instrument", "wheel-5ms"],
        ] {
            assert!(run(args).is_ok(), "{args:?} was refused");
        }
        assert!(run(&["--end-to-end", "--http2"]).unwrap().http2);
        assert!(run(&["--end-to-end", "--warm"]).unwrap().warm);
        assert!(run(&["--warm"]).is_err(), "--warm without --end-to-end");
        assert!(run(&["--end-to-end", "--warm", "--http2"]).is_err());
        assert!(
            run(&["--end-to-end", "--warm", "--under-load"])
                .unwrap()
                .under_load
        );
        assert!(
            run(&["--under-load"]).is_err(),
            "--under-load without --end-to-end"
        );
        assert!(run(&["--end-to-end", "--http2", "--under-load"]).is_err());
        // Not silently ignored: --http2 changes nothing without requests.
        let err = run(&["--http2"]).unwrap_err();
        assert!(err.0.contains("--end-to-end"), "{err}");
        // Nor with only timer instruments chosen, --end-to-end or not; and
        // accepted for a client instrument chosen by name.
        for flag in ["--http2", "--warm", "--under-load"] {
            let args = ["--end-to-end", flag, "--instrument", "wheel-1ms"];
            assert!(run(&args).is_err(), "{args:?} was accepted");
        }
        for flag in ["--http2", "--warm", "--under-load"] {
            let args = ["--instrument", "client-wheel-1ms", flag];
            assert!(run(&args).is_ok(), "{args:?} was refused");
        }
        // --end-to-end itself: refused when it would run no client
        // instrument, accepted beside one chosen by name.
        let err = run(&["--end-to-end", "--instrument", "wheel-1ms"]).unwrap_err();
        assert!(err.0.contains("--end-to-end is for the client"), "{err}");
        let args = ["--end-to-end", "--instrument", "client-event-loop"];
        assert!(run(&args).is_ok(), "{args:?} was refused");
        // A zero deadline is no request timeout: refused for the client
        // instruments, however chosen, and only for them.
        for args in [
            &["--end-to-end", "--deadline-ms", "0"][..],
            &["--instrument", "client-event-loop", "--deadline-ms", "5,0"],
        ] {
            let err = run(args).unwrap_err();
            assert!(err.0.contains("--deadline-ms 0"), "{args:?}: {err}");
        }
        assert_eq!(
            run(&["--deadline-ms", "0"]).unwrap().deadlines,
            [Duration::ZERO]
        );
        // A flag given a value is named as the flag it is.
        let err = run(&["--end-to-end=yes"]).unwrap_err();
        assert_eq!(err.0, "--end-to-end takes no value");
        assert!(!run(&[]).unwrap().http2);
        assert!(run(&["--end-to-end"])
            .unwrap()
            .instruments
            .iter()
            .all(|i| i.end_to_end));
        let err = run(&["--instrument", "nope"]).unwrap_err();
        assert!(err.0.contains("wheel-5ms, wheel-1ms, event-loop"), "{err}");
    }
}
