//! The caller's code reaching back into a client that is closing (from a
//! resolver callback, through a waker that holds the last `Client`), and
//! what a closing loop or a manual clock leaves behind. Each case was a
//! defect a review found, with this test failing before the fix. Every test
//! is bounded by a generous ceiling: a hang shows as a failure with a
//! message, never as a stuck test binary (a deadlocked helper thread is left
//! behind and the process still exits when the harness is done).

mod support;

use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;
use support::*;
use tickless::timer::ManualClock;
use tickless::{Client, Error, EventListener};

const CEILING: Duration = Duration::from_secs(20);

/// Closes the client from `on_resolved`, on a resolver thread, once
/// another thread has begun closing it.
struct CloseOnResolved {
    client: OnceLock<Client>,
    entered: std::sync::Mutex<Option<mpsc::Sender<()>>>,
}

impl EventListener for CloseOnResolved {
    fn on_resolved(&self, _request: &tickless::RequestInfo, _host: &str, _addrs: &[SocketAddr]) {
        if let Some(entered) = self.entered.lock().unwrap().take() {
            let _ = entered.send(());
        }
        let client = self.client.get().expect("set before the request is sent");
        assert!(eventually(CEILING, || client.is_closed()));
        // A call on one of the client's own threads while another thread
        // closes it: documented to return at once.
        client.close();
    }
}

/// `Client::close` from a resolver callback while another thread closes
/// the client: the closing thread joins the resolver threads, and the
/// resolver thread waits for the close to finish (`begin_close` only
/// spares loop and wheel threads), so neither ever returns.
#[test]
fn a_close_from_a_resolver_callback_during_another_close_does_not_deadlock() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = untimed_client();
    let (entered, on_entered) = mpsc::channel();
    let listener = Arc::new(CloseOnResolved {
        client: OnceLock::new(),
        entered: std::sync::Mutex::new(Some(entered)),
    });
    let _ = listener.client.set(client.clone());
    // A host name, so resolution runs on a resolver thread.
    let url = format!("http://localhost:{}/", server.addr().port());
    let future = client.get(url).listener(listener.clone()).send();
    on_entered
        .recv_timeout(CEILING)
        .expect("the host was resolved");
    within("Client::close", CEILING, move || client.close());
    assert!(future.is_done());
}

/// A waker whose last clone holds the last `Client`.
struct OwnsClient(#[allow(dead_code)] Client);

impl Wake for OwnsClient {
    fn wake(self: Arc<Self>) {}
}

struct NoopWake;

impl Wake for NoopWake {
    fn wake(self: Arc<Self>) {}
}

/// Polling a `ResponseFuture` with a new waker drops the one it held while
/// the outcome's lock is held. A waker is the caller's code: here its drop
/// drops the last `Client`, whose close fails the very exchange being
/// polled and delivers its outcome — taking the lock the poll still holds.
#[test]
fn a_waker_replaced_by_a_poll_is_dropped_outside_the_outcome_lock() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let outcome = within("ResponseFuture::poll", CEILING, move || {
        let client = untimed_client();
        let mut future = client.get(server.url("/")).send();
        let first = Waker::from(Arc::new(OwnsClient(client)));
        let pending = std::pin::Pin::new(&mut future).poll(&mut Context::from_waker(&first));
        assert!(pending.is_pending());
        // The future's clone is now the only one, and the last `Client`.
        drop(first);
        let second = Waker::from(Arc::new(NoopWake));
        let _ = std::pin::Pin::new(&mut future).poll(&mut Context::from_waker(&second));
        // The client closed: the outcome is in.
        let outcome = std::pin::Pin::new(&mut future).poll(&mut Context::from_waker(&second));
        drop(server);
        match outcome {
            Poll::Ready(result) => result.map(|r| r.status()),
            Poll::Pending => panic!("the client closed and the future is still pending"),
        }
    });
    assert!(matches!(outcome, Err(Error::ClientClosed)), "{outcome:?}");
}

use std::future::Future;

/// With a manual clock, the loop defers the abort of a timed-out exchange
/// while another deadline is within `ABORT_GAP` of now, expecting the poll
/// to wake for that deadline; but with a manual clock the poll blocks until
/// the clock is advanced again. Here three exchanges time out together and
/// a fourth is due 0.5 ms later: the third connection is never closed (its
/// permit never comes back) until somebody advances the clock.
#[test]
fn with_a_manual_clock_every_timed_out_connection_closes_without_another_advance() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let clock = ManualClock::new();
    let client = Client::builder()
        .clock(Arc::new(clock.clone()))
        .event_loops(1)
        .use_event_loop_timeouts(true)
        .read_timeout(Duration::ZERO)
        .pooled_connection_idle_timeout(Duration::ZERO)
        .connection_ttl(Duration::ZERO)
        .build()
        .unwrap();
    let timing_out: Vec<_> = (0..3)
        .map(|_| {
            client
                .get(server.url("/"))
                .request_timeout(Duration::from_secs(1))
                .send()
        })
        .collect();
    let later = client
        .get(server.url("/"))
        .request_timeout(Duration::from_secs(1) + Duration::from_micros(500))
        .send();
    // Sent: each exchange's request timer is on the loop.
    assert!(server.wait_for_requests(4, CEILING));
    assert!(eventually(CEILING, || client.stats().loops[0].armed == 4));
    clock.advance(Duration::from_secs(1));
    for future in timing_out {
        let error = future.wait().unwrap_err();
        assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    }
    // Only `later`'s connection is left.
    let closed = eventually(Duration::from_secs(5), || {
        client.stats().open_connections == 1
    });
    let stats = client.stats();
    assert!(!later.is_done());
    drop(later);
    client.close();
    assert!(
        closed,
        "a timed-out exchange's connection stays open: {stats:?}"
    );
}

/// A loop that shuts down closes its idle connections and gives their
/// permits back, but leaves them in the pool's idle lists: the pool then
/// counts more idle connections than open ones, and hands the next request
/// a connection that is gone (it fails with `ClientClosed` rather than
/// being sent elsewhere).
#[test]
fn an_idle_connection_closed_by_its_loop_shutting_down_leaves_the_pool() {
    let server = TestServer::respond(|_| ok("fine"));
    let group = Arc::new(
        tickless::event_loop::EventLoopGroup::builder()
            .threads(1)
            .build()
            .unwrap(),
    );
    let client = Client::builder()
        .event_loop_group(group.clone())
        .build()
        .unwrap();
    assert_eq!(
        client
            .get(server.url("/"))
            .send()
            .wait()
            .unwrap()
            .text()
            .wait()
            .unwrap(),
        "fine"
    );
    // Offered back before the caller was woken.
    assert_eq!(client.stats().idle_connections, 1);
    // Joins the loop: it has closed everything it hosted.
    group.loops()[0].shutdown();
    let stats = client.stats();
    client.close();
    assert_eq!(stats.open_connections, 0, "{stats:?}");
    assert_eq!(
        stats.idle_connections, 0,
        "a closed connection is still idle in the pool: {stats:?}"
    );
}

/// In `on_status` of the request to `/outer`, on a loop's thread, waits
/// for a request to `url` that its server answers `503`, retried after a
/// backoff far longer than any test; tells the test when that retry is
/// decided, and what the wait ended with.
struct WaitsOutABackoff {
    client: OnceLock<Client>,
    url: String,
    retrying: mpsc::SyncSender<()>,
    waited: mpsc::SyncSender<Result<http::StatusCode, Error>>,
}

impl EventListener for WaitsOutABackoff {
    fn on_status(&self, request: &tickless::RequestInfo, _status: http::StatusCode) {
        if request.uri().path() != "/outer" {
            return;
        }
        let long = Duration::from_secs(600);
        let retried = tickless::retry::Policy::attempts(2)
            .on_status([http::StatusCode::SERVICE_UNAVAILABLE])
            .backoff(long, long)
            .jitter(false);
        let client = self.client.get().expect("the client is set");
        let outcome = client.get(&self.url).retry(retried).send().wait();
        let _ = self
            .waited
            .try_send(outcome.map(|response| response.status()));
    }

    fn on_retry(
        &self,
        _request: &tickless::RequestInfo,
        _attempt: u32,
        _delay: Duration,
        _reason: &Error,
    ) {
        let _ = self.retrying.try_send(());
    }
}

/// `close` while a listener on a loop's thread waits for a request in its
/// retry's backoff — armed on the wheel, or on the other loop: the backoff
/// rings as the client closes, the wait ends with `ClientClosed`, and the
/// close returns, rather than join that loop before it stops the timer
/// the wait needs (it waited out the whole backoff).
#[test]
fn a_close_ends_a_backoff_a_listener_on_a_loop_waits_for() {
    let busy = TestServer::respond(|_| response(503, &[], b"busy"));
    let fine = TestServer::respond(|_| ok("fine"));
    for event_loop_timeouts in [false, true] {
        let (retrying, retry_decided) = mpsc::sync_channel(1);
        let (waited, wait_ended) = mpsc::sync_channel(1);
        let listener = Arc::new(WaitsOutABackoff {
            client: OnceLock::new(),
            url: busy.url("/"),
            retrying,
            waited,
        });
        // Long enough for the backoff to fit (a retry must end before it).
        let client = Client::builder()
            .event_loops(2)
            .request_timeout(Duration::from_secs(3600))
            .use_event_loop_timeouts(event_loop_timeouts)
            .listener(listener.clone())
            .build()
            .unwrap();
        assert!(listener.client.set(client.clone()).is_ok());
        let outer = client.get(fine.url("/outer")).send();
        retry_decided
            .recv_timeout(CEILING)
            .expect("the 503 was never retried");
        let (closed, has_closed) = mpsc::channel();
        let closing = client.clone();
        std::thread::spawn(move || {
            closing.close();
            let _ = closed.send(());
        });
        assert!(
            has_closed.recv_timeout(CEILING).is_ok(),
            "mode {event_loop_timeouts}: close waited for the backoff"
        );
        let outcome = wait_ended.recv_timeout(CEILING).expect("the wait ended");
        assert!(
            matches!(outcome, Err(Error::ClientClosed)),
            "mode {event_loop_timeouts}: {outcome:?}"
        );
        assert!(matches!(outer.wait(), Err(Error::ClientClosed)));
    }
}
