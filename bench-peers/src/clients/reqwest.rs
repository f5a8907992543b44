//! reqwest, both of its APIs, built with `default-features = false` and
//! `blocking` (no TLS, no HTTP/2, no system proxy: the cases are plain
//! HTTP/1.1). Proxies are switched off with `no_proxy()` so no environment
//! variable can reroute loopback traffic.
//!
//! * Sequential cases: `reqwest::blocking::Client`, `client.get(url).send()`
//!   then `.bytes()`: what its users write in blocking code. (It runs its
//!   own tokio runtime on a thread of its own and hands each request over.)
//!   Its builder's default 30 s total timeout is switched off
//!   (`.timeout(None)`) for the cases without a timeout.
//! * 64 in flight: the async `reqwest::Client` on a tokio multi-thread
//!   runtime, 64 tasks each sending one request after another.
//! * Timeout case and lateness: `RequestBuilder::timeout(d)` per request.

use super::Blocking;
use crate::lateness::{self, BoxFuture, Ended, MakeRequest};
use crate::measure::{Plan, Sample};
use std::sync::Arc;
use std::time::Duration;

struct Sequential {
    client: reqwest::blocking::Client,
    timeout: Option<Duration>,
}

impl Blocking for Sequential {
    fn get(&mut self, url: &str) -> Result<usize, String> {
        let request = self.client.get(url);
        let request = match self.timeout {
            Some(timeout) => request.timeout(timeout),
            None => request,
        };
        let response = request.send().map_err(|e| format!("reqwest: {e}"))?;
        if response.status() != 200 {
            return Err(format!("reqwest: status {}", response.status()));
        }
        let body = response
            .bytes()
            .map_err(|e| format!("reqwest: body: {e}"))?;
        Ok(body.len())
    }
}

pub fn blocking(timeout: Option<Duration>) -> Result<Box<dyn Blocking>, String> {
    let client = reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(None)
        .build()
        .map_err(|e| format!("reqwest: build: {e}"))?;
    Ok(Box::new(Sequential { client, timeout }))
}

fn async_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| format!("reqwest: build: {e}"))
}

async fn get(client: reqwest::Client, url: Arc<str>) -> Result<usize, String> {
    let response = client
        .get(&*url)
        .send()
        .await
        .map_err(|e| format!("reqwest: {e}"))?;
    if response.status() != 200 {
        return Err(format!("reqwest: status {}", response.status()));
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("reqwest: body: {e}"))?;
    Ok(body.len())
}

pub fn in_flight(url: &str, expect: usize, window: usize, plan: Plan) -> Result<Sample, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("reqwest: runtime: {e}"))?;
    let client = async_client()?;
    let url = Arc::<str>::from(url);
    let sample = crate::drive::tokio_tasks(&rt, window, expect, plan, move || {
        get(client.clone(), url.clone())
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    sample
}

pub fn lateness(url: &str, count: usize, timeout: Duration) -> Result<lateness::Burst, String> {
    let rt = lateness::runtime().map_err(|e| format!("runtime: {e}"))?;
    let client = async_client()?;
    let url = url.to_string();
    let make: MakeRequest = Arc::new(move |_, _| -> BoxFuture {
        let future = client.get(url.as_str()).timeout(timeout).send();
        Box::pin(async move {
            match future.await {
                Err(e) if e.is_timeout() => Ended::Timeout,
                Err(e) => Ended::Error(format!("reqwest: {e}")),
                Ok(_) => Ended::Response,
            }
        })
    });
    let burst = lateness::burst(&rt, count, timeout, make);
    rt.shutdown_timeout(Duration::from_secs(5));
    Ok(burst)
}
