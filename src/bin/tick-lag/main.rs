//! `tick-lag`: how late timeouts fire, per timer instrument.
//!
//! For each deadline and each instrument it arms one burst of timeouts, each
//! recording only its own lag (fire time minus deadline), and prints the
//! mean, p50, p99 and max lag per instrument and deadline. It reproduces the
//! "Measured" table that motivated tickless: a wheel rounds every deadline up
//! to its tick, an event loop that derives its wait from its nearest deadline
//! does not.
//!
//! Modules: [`args`] parses the command line, [`instruments`] holds the
//! timers under test and the lag recorder, [`summary`] the statistics,
//! [`report`] the table and CSV output, [`machine`] the machine and date lines.
//!
//! Exit codes: 0 on success, 1 if a burst could not run or not every timeout
//! fired before its ceiling, 2 on a bad command line.

mod args;
mod instruments;
mod machine;
mod report;
mod summary;

use args::{Command, Config, Format};
use instruments::{Burst, Split};
use report::Row;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use summary::Summary;

fn main() -> ExitCode {
    let config = match args::unicode(std::env::args_os().skip(1)).and_then(args::parse) {
        Ok(Command::Run(config)) => config,
        Ok(Command::Help) => {
            return if emit(&args::usage()) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
        Err(err) => {
            tell(&format!(
                "tick-lag: {err}\nTry 'tick-lag --help' for the options.\n"
            ));
            return ExitCode::from(2);
        }
    };
    run(&config)
}

fn run(config: &Config) -> ExitCode {
    let preamble = format!(
        "tick-lag: {} timeouts armed as one burst per instrument; lag = fire time - deadline\n\
         {}\n\
         date: {} (UTC)\n",
        config.count,
        machine::describe(),
        machine::today_utc()
    );
    match config.format {
        Format::Table => {
            if !emit(&format!("{preamble}\n")) {
                return ExitCode::FAILURE;
            }
        }
        // stderr: stdout stays pure CSV.
        Format::Csv => tell(&preamble),
    }

    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut failed = false;
    if config.instruments.iter().any(|i| i.end_to_end) {
        instruments::prepare_end_to_end(config.count);
        if config.warm {
            notes.push(format!(
                "warm: {} connections opened and pooled before each burst, one request each",
                config.count
            ));
        } else if config.http2 {
            // A few connections: the kernel's connect floor does not apply.
            notes.push(format!(
                "http2: {} requests as HTTP/2 streams (prior knowledge) over {} connections",
                config.count,
                instruments::H2_SERVERS
            ));
        } else {
            match instruments::connect_floor(config.count) {
                Ok(took) => notes.push(floor_note(config.count, took)),
                Err(err) => tell(&format!(
                    "tick-lag: the connect floor could not be measured: {}\n",
                    tickless::WithCauses(&err)
                )),
            }
        }
    }
    // One burst at a time, so the instruments never disturb each other.
    for &deadline in &config.deadlines {
        for instrument in &config.instruments {
            let burst = Burst {
                count: config.count,
                deadline,
                loop_spin: config.loop_spin,
                unpinned: config.unpinned,
                http2: config.http2,
                warm: config.warm,
                under_load: config.under_load,
            };
            match (instrument.run)(&burst) {
                Ok(fired) => {
                    // Requests that failed otherwise have no timeout left
                    // to fire: told with the cause, not as stragglers.
                    let mut timed = fired.armed;
                    if let Some(failures) = &fired.failed {
                        tell(&format!(
                            "tick-lag: {} at {} ms: {} of {} requests failed otherwise than \
                             by their timeout, the first: {}\n",
                            instrument.name,
                            deadline.as_millis(),
                            failures.count,
                            fired.armed,
                            failures.first
                        ));
                        timed = timed.saturating_sub(failures.count);
                        failed = true;
                    }
                    if fired.lags_ns.len() != timed {
                        tell(&format!(
                            "tick-lag: {} at {} ms: only {} of {} timeouts fired within {} s\n",
                            instrument.name,
                            deadline.as_millis(),
                            fired.lags_ns.len(),
                            timed,
                            burst.ceiling().as_secs()
                        ));
                        failed = true;
                    }
                    if let Some(split) = &fired.split {
                        notes.push(split_note(instrument.name, deadline, split));
                    }
                    if let Some(rate) = fired.load_rate {
                        notes.push(format!(
                            "{} at {} ms: under load, {} requests in flight on the same client, \
                             {rate:.0} answered per second during the burst",
                            instrument.name,
                            deadline.as_millis(),
                            instruments::LOAD_IN_FLIGHT
                        ));
                    }
                    rows.push(Row {
                        instrument: instrument.name,
                        deadline,
                        summary: Summary::of(&fired.lags_ns),
                    });
                }
                Err(err) => {
                    tell(&format!(
                        "tick-lag: {} at {} ms failed: {}\n",
                        instrument.name,
                        deadline.as_millis(),
                        tickless::WithCauses(&err)
                    ));
                    failed = true;
                }
            }
        }
    }

    let output = match config.format {
        Format::Table => report::table(&rows) + &report::notes(&notes),
        Format::Csv => {
            tell(&report::notes(&notes));
            report::csv(&rows)
        }
    };
    if !emit(&output) || failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Where an event-loop-mode burst expired, and how late those on the loops were.
fn split_note(instrument: &str, deadline: Duration, split: &Split) -> String {
    let on_loops = match Summary::of(&split.on_loops_ns) {
        Some(s) => format!(
            "; the {} on their loop: p50 {}, p99 {}",
            s.count,
            report::lag_cell(s.p50 as f64),
            report::lag_cell(s.p99 as f64)
        ),
        None => String::new(),
    };
    format!(
        "{instrument} at {} ms: {} expired on the wheel, their connect not done by the deadline{on_loops}",
        deadline.as_millis(),
        split.on_wheel
    )
}

/// What the kernel alone took to open the burst's connections.
fn floor_note(count: usize, took: Duration) -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!(
        "kernel floor: {count} loopback connects and request writes from one thread took {:.1} ms \
         ({:.1} µs each), so a burst needs at least {:.1} ms of all {cores} cores",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e6 / count.max(1) as f64,
        took.as_secs_f64() * 1e3 / cores as f64,
    )
}

/// Writes `text` to stderr, come what may: where it has gone (`tick-lag
/// 2>&1 | head -1`) there is no one to tell, and the exit status must
/// still say what happened — `eprint!` would panic instead (exit 101).
fn tell(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Writes `text` to stdout; false if it could not (a closed pipe, as in
/// `| head`, which `print!` would turn into a panic).
fn emit(text: &str) -> bool {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .is_ok()
}

#[cfg(test)]
mod tests {
    use std::io;
    use tickless::WithCauses;

    #[test]
    fn a_failure_is_told_with_its_causes() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let refused_text = refused.to_string();
        let failed = io::Error::other(tickless::Error::Connect {
            remote: "127.0.0.1/127.0.0.1:1".into(),
            source: refused,
        });
        assert_eq!(
            WithCauses(&failed).to_string(),
            format!("connect to 127.0.0.1/127.0.0.1:1 failed: {refused_text}")
        );
    }
}
