//! tickless, driven as its docs show: `client.get(url).send()` gives a
//! `ResponseFuture`, waited on with `.wait()` (blocking) or awaited.
//!
//! Every tickless call of the benchmark is in this file. The body is read
//! whole in [`body_len`] (blocking: `response.bytes().wait()`) and
//! [`read_body`] (async: `response.bytes().await`), as its users read a
//! body they want in memory.
//!
//! Timeouts: the client's defaults (60 s request and read timeouts on its
//! wheel) are switched off for the cases without a timeout, so that no
//! client arms one there; the timeout case sets `.request_timeout(d)` on
//! each request.

use super::{expect_len, Blocking};
use crate::lateness::{self, BoxFuture, Ended, MakeRequest, Slots};
use crate::measure::{ns, Meter, Plan, Sample};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickless::{Client, Error, EventListener, Response, ResponseFuture};

/// A client with no timeout armed by default; the timeouts its requests
/// set are armed on its event loops if `on_event_loops`, else on its wheel.
fn quiet_client(on_event_loops: bool) -> Result<Client, String> {
    Client::builder()
        .use_event_loop_timeouts(on_event_loops)
        .request_timeout(Duration::ZERO)
        .read_timeout(Duration::ZERO)
        .build()
        .map_err(|e| format!("tickless: build: {e}"))
}

/// The body's length, after checking the status. The one place that reads
/// a tickless body (with [`read_body`] for the async side).
fn body_len(response: Response) -> Result<usize, String> {
    if response.status() != 200 {
        return Err(format!("tickless: status {}", response.status()));
    }
    let body = response
        .bytes()
        .wait()
        .map_err(|e| format!("tickless: body: {e}"))?;
    Ok(body.len())
}

/// The async twin of [`body_len`].
async fn read_body(response: Response) -> Result<usize, String> {
    if response.status() != 200 {
        return Err(format!("tickless: status {}", response.status()));
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("tickless: body: {e}"))?;
    Ok(body.len())
}

fn send(client: &Client, url: &str, timeout: Option<Duration>) -> ResponseFuture {
    let request = client.get(url);
    match timeout {
        Some(timeout) => request.request_timeout(timeout),
        None => request,
    }
    .send()
}

struct Sequential {
    client: Client,
    timeout: Option<Duration>,
}

impl Blocking for Sequential {
    fn get(&mut self, url: &str) -> Result<usize, String> {
        let response = send(&self.client, url, self.timeout)
            .wait()
            .map_err(|e| format!("tickless: {e}"))?;
        body_len(response)
    }
}

pub fn blocking(
    timeout: Option<Duration>,
    on_event_loops: bool,
) -> Result<Box<dyn Blocking>, String> {
    Ok(Box::new(Sequential {
        client: quiet_client(on_event_loops)?,
        timeout,
    }))
}

/// A window of `window` `ResponseFuture`s from one thread: submit until the
/// window is full, then wait on the oldest and submit one in its place, as
/// `benches/http.rs` does, until the clock passes `until`; then drains
/// the window. Each latency is from submission to the last body byte in
/// hand, as the other drivers' are (the future resolves at the head).
fn window_until(
    client: &Client,
    url: &str,
    expect: usize,
    window: usize,
    until: Instant,
    latencies: &mut Vec<u64>,
) -> Result<(), String> {
    let mut in_flight: VecDeque<(Instant, ResponseFuture)> = VecDeque::with_capacity(window);
    let mut submitting = true;
    loop {
        while submitting && in_flight.len() < window {
            in_flight.push_back((Instant::now(), send(client, url, None)));
        }
        let Some((sent, future)) = in_flight.pop_front() else {
            return Ok(());
        };
        let response = future.wait().map_err(|e| format!("tickless: {e}"))?;
        let got = body_len(response)?;
        let done = Instant::now();
        expect_len(got, expect)?;
        latencies.push(ns(done - sent));
        if done >= until {
            submitting = false;
        }
    }
}

pub fn in_flight(url: &str, expect: usize, window: usize, plan: Plan) -> Result<Sample, String> {
    let client = quiet_client(false)?;
    let mut warm = Vec::new();
    window_until(
        &client,
        url,
        expect,
        window,
        Instant::now() + plan.warmup,
        &mut warm,
    )?;
    let mut latencies = Vec::with_capacity(1 << 17);
    let meter = Meter::start();
    window_until(
        &client,
        url,
        expect,
        window,
        Instant::now() + plan.measure,
        &mut latencies,
    )?;
    let span = meter.stop();
    client.close();
    Ok(Sample {
        span,
        requests: latencies.len() as u64,
        body_bytes: latencies.len() as u64 * expect as u64,
        latencies_ns: latencies,
    })
}

/// Records when the exchange ended: `on_failed` runs on the thread that
/// ends it, just before the future is woken (what `tick-lag` measures).
struct EndListener {
    slots: Arc<Slots>,
    index: usize,
    deadline: Instant,
}

impl EventListener for EndListener {
    fn on_failed(&self, _request: &tickless::RequestInfo, error: &Error) {
        if error.is_timeout() {
            self.slots.record(self.index, self.deadline);
        }
    }
}

/// Where a lateness burst's timeouts are armed.
#[derive(Clone, Copy)]
pub enum Timeouts {
    /// The default mode: the wheel, at its default tick.
    Wheel,
    /// `use_event_loop_timeouts(true)`, with that mode's defaults.
    Loops,
    /// The same, with the loops driven by the burst's tokio runtime
    /// (`Executor::tokio`): their threads keep the deadlines.
    LoopsOnTokio,
}

/// One burst, its timeouts armed as `mode` says; `.request_timeout(d)` on
/// each request.
pub fn lateness(
    url: &str,
    count: usize,
    timeout: Duration,
    mode: Timeouts,
) -> Result<lateness::Burst, String> {
    let rt = lateness::runtime().map_err(|e| format!("runtime: {e}"))?;
    let mut builder = Client::builder()
        .read_timeout(Duration::ZERO)
        .use_event_loop_timeouts(!matches!(mode, Timeouts::Wheel));
    if matches!(mode, Timeouts::LoopsOnTokio) {
        builder = builder.executor(tickless::event_loop::Executor::tokio(rt.handle().clone()));
    }
    let client = builder
        .build()
        .map_err(|e| format!("tickless: build: {e}"))?;
    let ended = Slots::new(count);
    let make: MakeRequest = {
        let (client, ended, url) = (client.clone(), ended.clone(), url.to_string());
        Arc::new(move |index, deadline| -> BoxFuture {
            let listener = Arc::new(EndListener {
                slots: ended.clone(),
                index,
                deadline,
            });
            let future = client
                .get(url.as_str())
                .request_timeout(timeout)
                .listener(listener)
                .send();
            Box::pin(async move {
                match future.await {
                    Err(e) if e.is_timeout() => Ended::Timeout,
                    Err(e) => Ended::Error(format!("tickless: {e}")),
                    Ok(response) => {
                        let _ = read_body(response).await;
                        Ended::Response
                    }
                }
            })
        })
    };
    let mut burst = lateness::burst(&rt, count, timeout, make);
    burst.ended_lags_ns = Some(ended.lags());
    client.close();
    rt.shutdown_timeout(Duration::from_secs(5));
    Ok(burst)
}

/// The 64-in-flight case driven as an async user on tokio drives it, and
/// as hyper and reqwest are driven here: `window` tasks on a 2-worker
/// runtime (the same as theirs), each awaiting its `ResponseFuture` and
/// its body, one request after another.
pub fn in_flight_tasks(
    url: &str,
    expect: usize,
    window: usize,
    plan: Plan,
) -> Result<Sample, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tickless: runtime: {e}"))?;
    let client = Client::builder()
        .request_timeout(Duration::ZERO)
        .read_timeout(Duration::ZERO)
        .executor(tickless::event_loop::Executor::tokio(rt.handle().clone()))
        .build()
        .map_err(|e| format!("tickless: build: {e}"))?;
    let url = Arc::<str>::from(url);
    let tasks_client = client.clone();
    let sample = crate::drive::tokio_tasks(&rt, window, expect, plan, move || {
        let (client, url) = (tasks_client.clone(), url.clone());
        async move {
            let response = send(&client, &url, None)
                .await
                .map_err(|e| format!("tickless: {e}"))?;
            read_body(response).await
        }
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    client.close();
    sample
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A window's latency runs to the last body byte, as every other
    /// driver's does: a server that sends the head at once and the body
    /// 100 ms later gives a latency of at least 100 ms.
    #[test]
    fn window_latency_includes_the_body() {
        const BODY_DELAY: Duration = Duration::from_millis(100);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = stream.read(&mut buf).unwrap();
                assert!(n > 0, "the client closed before its request");
                head.extend_from_slice(&buf[..n]);
            }
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n")
                .unwrap();
            std::thread::sleep(BODY_DELAY);
            stream.write_all(b"Hello, world!").unwrap();
            // Hold the connection until the client is done with it.
            let _ = stream.read(&mut buf);
        });
        let client = quiet_client(false).unwrap();
        let mut latencies = Vec::new();
        // `until` already passed: one request, then the window drains.
        window_until(&client, &url, 13, 1, Instant::now(), &mut latencies).unwrap();
        client.close();
        server.join().unwrap();
        assert_eq!(latencies.len(), 1);
        assert!(
            latencies[0] >= ns(BODY_DELAY),
            "latency {} ns ends before the body came",
            latencies[0]
        );
    }
}
