//! The frames of an async upload (`Upload::from_stream`), over HTTP/1.1
//! and HTTP/2: a body always ready with empty frames does not hold its
//! loop from the other connections and timeouts on it.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};
use support::h2_server::*;
use support::*;
use tickless::http_body::{Body, Frame};
use tickless::{Bytes, Client, Error, Upload};

/// Far past anything the tests wait for on a loop that is not held.
const CEILING: Duration = Duration::from_secs(20);

/// An upload always ready with an empty frame, until `stop` is set (then
/// it fails). Counts its polls.
struct EmptyForever {
    stop: Arc<AtomicBool>,
    polls: Arc<AtomicU64>,
}

impl Body for EmptyForever {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        if self.stop.load(Ordering::SeqCst) {
            return Poll::Ready(Some(Err(std::io::Error::other("stopped"))));
        }
        Poll::Ready(Some(Ok(Frame::data(Bytes::new()))))
    }
}

/// Sets its flag when dropped: an [`EmptyForever`] stops even when the
/// test fails, so that its loop (held, before the fix) can be closed.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// On one loop: an upload of empty frames to `spinning_url`, with a
/// request timeout; then a GET to `other_url`, which completes while the
/// upload goes on (its body was polled meanwhile), and the upload's
/// timeout fires (not before its time).
fn empty_frames_leave_the_loop_to_others(
    client: &Client,
    spinning_url: String,
    other_url: String,
    version: &str,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_drop = StopOnDrop(stop.clone());
    let polls = Arc::new(AtomicU64::new(0));
    let timeout = Duration::from_millis(500);
    let started = Instant::now();
    let upload = client
        .post(spinning_url)
        .request_timeout(timeout)
        .body(Upload::from_stream(EmptyForever {
            stop: stop.clone(),
            polls: polls.clone(),
        }))
        .send();
    assert!(
        eventually(CEILING, || polls.load(Ordering::SeqCst) > 0),
        "{version}: the upload's body was never polled"
    );
    let other = client.get(other_url).send();
    let text = within(&format!("{version}: the other request"), CEILING, || {
        other.wait().unwrap().text().wait().unwrap()
    });
    assert_eq!(text, "other", "{version}");
    let error = within(&format!("{version}: the upload's timeout"), CEILING, || {
        upload.wait().unwrap_err()
    });
    assert!(
        matches!(error, Error::RequestTimeout(_)),
        "{version}: {error:?}"
    );
    assert!(started.elapsed() >= timeout, "{version}: fired early");
    client.close();
}

#[test]
fn an_upload_of_empty_frames_leaves_its_loop_to_others_over_http1() {
    let spinning = TestServer::start(Behaviour::NeverAnswer);
    let other = TestServer::respond(|_| ok("other"));
    for event_loop_timeouts in [true, false] {
        let client = Client::builder()
            .event_loops(1)
            .use_event_loop_timeouts(event_loop_timeouts)
            .build()
            .unwrap();
        empty_frames_leave_the_loop_to_others(
            &client,
            spinning.url("/"),
            other.url("/"),
            &format!("HTTP/1.1, loop timeouts {event_loop_timeouts}"),
        );
    }
}

#[test]
fn an_upload_of_empty_frames_leaves_its_loop_to_others_over_http2() {
    // Streams on one connection: the upload never ends (nor is answered),
    // the other is answered at once.
    let server = H2Server::start(|stream| async move {
        let H2Stream {
            request,
            mut respond,
            ..
        } = stream;
        if request.uri().path() == "/other" {
            let response = http::Response::new(());
            let mut body = respond.send_response(response, false).unwrap();
            let _ = body.send_data(Bytes::from_static(b"other"), true);
        } else {
            let mut body = request.into_body();
            while let Some(Ok(_)) = body.data().await {}
        }
    });
    for event_loop_timeouts in [true, false] {
        let client = Client::builder()
            .event_loops(1)
            .http2_prior_knowledge()
            .use_event_loop_timeouts(event_loop_timeouts)
            .build()
            .unwrap();
        empty_frames_leave_the_loop_to_others(
            &client,
            server.url("/spinning"),
            server.url("/other"),
            &format!("HTTP/2, loop timeouts {event_loop_timeouts}"),
        );
    }
}
