//! Prints the client's statistics every second while a load runs: the
//! wheel's and each loop's timers (armed, fired, cancelled, how late they
//! fired) and the pool, in the stable text form of `ClientStats`'s
//! `Display`. The load is `--threads` threads sending GETs one after another
//! to a loopback server the example starts, each with a 20 ms request
//! timeout on the connection's loop; one in a hundred asks for `/slow`
//! (answered after a second), so timeouts fire.
//!
//! ```sh
//! cargo run --release --example stats -- --seconds 10 --threads 8
//! ```

#[path = "common/echo_server.rs"]
mod echo_server;

#[path = "common/unicode_args.rs"]
mod unicode_args;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tickless::WithCauses;

const USAGE: &str = "usage: stats [--seconds N] [--threads N]";

fn main() -> ExitCode {
    let (mut seconds, mut threads) = (5u64, 4usize);
    let mut args = unicode_args::or_exit("stats", USAGE);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u64>().ok());
        match (arg.as_str(), value) {
            ("--seconds", Some(n)) => seconds = n,
            ("--threads", Some(n)) => threads = n as usize,
            _ => {
                eprintln!("stats: bad argument {arg:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    match run(seconds, threads) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("stats: {}", WithCauses(&*error));
            ExitCode::from(1)
        }
    }
}

fn run(seconds: u64, threads: usize) -> Result<(), Box<dyn std::error::Error>> {
    let server = echo_server::start()?;
    let client = tickless::Client::builder()
        .event_loops(2)
        .use_event_loop_timeouts(true)
        .request_timeout(Duration::from_millis(20))
        .build()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (answered, timed_out) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let load: Vec<_> = (0..threads)
        .map(|t| {
            let (client, stop) = (client.clone(), stop.clone());
            let (answered, timed_out) = (answered.clone(), timed_out.clone());
            let base = format!("http://{}", server.addr);
            std::thread::spawn(move || {
                // Thread 0's first request is a slow one: a timeout fires
                // in the first second whatever the machine's speed.
                let mut n = t;
                while !stop.load(Ordering::Relaxed) {
                    let path = if n % 100 == 0 { "slow" } else { "fast" };
                    n += threads;
                    match client.get(format!("{base}/{path}")).send().wait() {
                        Ok(response) => {
                            let _ = response.bytes().wait();
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) if error.is_timeout() => {
                            timed_out.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => {}
                    }
                }
            })
        })
        .collect();
    for second in 1..=seconds {
        std::thread::sleep(Duration::from_secs(1));
        println!(
            "# after {second} s: {} answered, {} timed out",
            answered.load(Ordering::Relaxed),
            timed_out.load(Ordering::Relaxed)
        );
        print!("{}", client.stats());
    }
    stop.store(true, Ordering::Relaxed);
    for thread in load {
        let _ = thread.join();
    }
    client.close();
    println!(
        "# {} connections opened",
        server.opened.load(Ordering::Relaxed)
    );
    Ok(())
}
