//! hyper 1 through hyper-util's legacy client
//! (`hyper_util::client::legacy::Client` over an `HttpConnector`, spawning
//! its connection tasks with `TokioExecutor`) on a tokio multi-thread
//! runtime, as hyper's own client examples and most hyper users set it up.
//! The body is collected with `http_body_util::BodyExt::collect`.
//!
//! * Sequential cases: `rt.block_on(...)` per request, the way a blocking
//!   program calls an async client. The request future runs on the calling
//!   thread; the connection task on a worker.
//! * 64 in flight: 64 tasks spawned on the runtime, each sending one
//!   request after another.
//! * Timeout case and lateness: the request (and its body) wrapped in
//!   `tokio::time::timeout`, as hyper has no timeout of its own.
//!
//! `HttpConnector` leaves `TCP_NODELAY` off by default; it is set here, as
//! every other client here sets it (a GET is one write, so it changes
//! little).

use super::Blocking;
use crate::lateness::{self, BoxFuture, Ended, MakeRequest};
use crate::measure::{Plan, Sample};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Uri;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::time::Duration;

type HyperClient = Client<HttpConnector, Empty<Bytes>>;

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("hyper: runtime: {e}"))
}

fn client() -> HyperClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(connector)
}

/// One GET, the body collected: its length.
async fn get(client: HyperClient, uri: Uri) -> Result<usize, String> {
    let response = client.get(uri).await.map_err(|e| format!("hyper: {e}"))?;
    if response.status() != 200 {
        return Err(format!("hyper: status {}", response.status()));
    }
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("hyper: body: {e}"))?;
    Ok(body.to_bytes().len())
}

async fn get_with(
    client: HyperClient,
    url: &str,
    timeout: Option<Duration>,
) -> Result<usize, String> {
    let uri: Uri = url.parse().map_err(|e| format!("hyper: uri: {e}"))?;
    match timeout {
        Some(timeout) => tokio::time::timeout(timeout, get(client, uri))
            .await
            .map_err(|_| "hyper: timed out".to_string())?,
        None => get(client, uri).await,
    }
}

struct Sequential {
    // The client first: it is dropped before the runtime its tasks run on.
    client: HyperClient,
    rt: tokio::runtime::Runtime,
    timeout: Option<Duration>,
}

impl Blocking for Sequential {
    fn get(&mut self, url: &str) -> Result<usize, String> {
        self.rt
            .block_on(get_with(self.client.clone(), url, self.timeout))
    }
}

pub fn blocking(timeout: Option<Duration>) -> Result<Box<dyn Blocking>, String> {
    Ok(Box::new(Sequential {
        client: client(),
        rt: runtime()?,
        timeout,
    }))
}

pub fn in_flight(url: &str, expect: usize, window: usize, plan: Plan) -> Result<Sample, String> {
    let rt = runtime()?;
    let client = client();
    let url = Arc::<str>::from(url);
    let sample = crate::drive::tokio_tasks(&rt, window, expect, plan, move || {
        let (client, url) = (client.clone(), url.clone());
        async move { get_with(client, &url, None).await }
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    sample
}

pub fn lateness(url: &str, count: usize, timeout: Duration) -> Result<lateness::Burst, String> {
    let rt = lateness::runtime().map_err(|e| format!("runtime: {e}"))?;
    let client = client();
    let uri: Uri = url.parse().map_err(|e| format!("hyper: uri: {e}"))?;
    let make: MakeRequest = Arc::new(move |_, _| -> BoxFuture {
        let future = tokio::time::timeout(timeout, get(client.clone(), uri.clone()));
        Box::pin(async move {
            match future.await {
                Err(_elapsed) => Ended::Timeout,
                Ok(Err(e)) => Ended::Error(e),
                Ok(Ok(_)) => Ended::Response,
            }
        })
    });
    let burst = lateness::burst(&rt, count, timeout, make);
    rt.shutdown_timeout(Duration::from_secs(5));
    Ok(burst)
}
