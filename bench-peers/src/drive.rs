//! The loops shared by the clients' drivers: one request after another on
//! the calling thread, and N tokio tasks each doing the same.
//!
//! Every loop runs until the clock passes its end, so each client gets the
//! same time, whatever its speed; the request in progress then finishes and
//! counts. Latency is the wall time of one request, from the call to the
//! last body byte in hand.

use crate::clients::{expect_len, Blocking};
use crate::measure::{ns, Meter, Plan, Sample};
use std::future::Future;
use std::time::Instant;

/// Sequential GETs through `client`: warm-up, then the measured part.
pub fn sequential(
    client: &mut dyn Blocking,
    url: &str,
    expect: usize,
    plan: Plan,
) -> Result<Sample, String> {
    let warm_end = Instant::now() + plan.warmup;
    loop {
        expect_len(client.get(url)?, expect)?;
        if Instant::now() >= warm_end {
            break;
        }
    }
    let mut latencies = Vec::with_capacity(1 << 16);
    let meter = Meter::start();
    let end = Instant::now() + plan.measure;
    loop {
        let t0 = Instant::now();
        let got = client.get(url)?;
        let t1 = Instant::now();
        expect_len(got, expect)?;
        latencies.push(ns(t1 - t0));
        if t1 >= end {
            break;
        }
    }
    let span = meter.stop();
    Ok(Sample {
        span,
        requests: latencies.len() as u64,
        body_bytes: latencies.len() as u64 * expect as u64,
        latencies_ns: latencies,
    })
}

/// `tasks` tokio tasks on `rt`, each GETting with `get` one request after
/// another: a warm-up round, then the measured one. The meter runs on the
/// thread in `block_on`, around the second round only.
pub fn tokio_tasks<F, Fut>(
    rt: &tokio::runtime::Runtime,
    tasks: usize,
    expect: usize,
    plan: Plan,
    get: F,
) -> Result<Sample, String>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<usize, String>> + Send + 'static,
{
    rt.block_on(async move {
        let warm_end = Instant::now() + plan.warmup;
        round(tasks, warm_end, expect, get.clone()).await?;
        let meter = Meter::start();
        let end = Instant::now() + plan.measure;
        let latencies = round(tasks, end, expect, get).await?;
        let span = meter.stop();
        Ok(Sample {
            span,
            requests: latencies.len() as u64,
            body_bytes: latencies.len() as u64 * expect as u64,
            latencies_ns: latencies,
        })
    })
}

async fn round<F, Fut>(
    tasks: usize,
    until: Instant,
    expect: usize,
    get: F,
) -> Result<Vec<u64>, String>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<usize, String>> + Send + 'static,
{
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let get = get.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(1 << 12);
                loop {
                    let t0 = Instant::now();
                    let got = get().await?;
                    let t1 = Instant::now();
                    expect_len(got, expect)?;
                    latencies.push(ns(t1 - t0));
                    if t1 >= until {
                        return Ok::<_, String>(latencies);
                    }
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut first_error = None;
    for handle in handles {
        match handle.await {
            Ok(Ok(latencies)) => all.extend(latencies),
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(format!("task failed: {e}"));
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(all),
    }
}

/// `threads` std threads, each GETting `url` with its own clone of
/// `client` until the clock passes the end: warm-up round, then the measured one.
pub fn threads<C>(
    client: C,
    url: &str,
    threads: usize,
    expect: usize,
    plan: Plan,
) -> Result<Sample, String>
where
    C: Blocking + Clone + Send,
{
    let round = |until: Instant| -> Result<Vec<u64>, String> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let mut client = client.clone();
                    scope.spawn(move || {
                        let mut latencies = Vec::with_capacity(1 << 12);
                        loop {
                            let t0 = Instant::now();
                            let got = client.get(url)?;
                            let t1 = Instant::now();
                            expect_len(got, expect)?;
                            latencies.push(ns(t1 - t0));
                            if t1 >= until {
                                return Ok::<_, String>(latencies);
                            }
                        }
                    })
                })
                .collect();
            let mut all = Vec::new();
            for handle in handles {
                all.extend(
                    handle
                        .join()
                        .map_err(|_| "a thread panicked".to_string())??,
                );
            }
            Ok(all)
        })
    };
    round(Instant::now() + plan.warmup)?;
    let meter = Meter::start();
    let latencies = round(Instant::now() + plan.measure)?;
    let span = meter.stop();
    Ok(Sample {
        span,
        requests: latencies.len() as u64,
        body_bytes: latencies.len() as u64 * expect as u64,
        latencies_ns: latencies,
    })
}
