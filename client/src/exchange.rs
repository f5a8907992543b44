//! [`Exchange`]: one request and its response in flight.
//!
//! An exchange is shared by the caller's [`ResponseFuture`], the loop that
//! runs it on a connection, and its timeouts (on the wheel or that loop).
//! Any of them may end it; [`Exchange::finish`] decides once, with a single
//! atomic flag, and the loser of a race (a completion against an expiry, a
//! cancel against either) does nothing.
//!
//! [`ResponseFuture`]: crate::ResponseFuture

use crate::client::ClientShared;
use crate::error::{Error, TimeoutKind};
use crate::event_loop::{lock, EventLoop, LoopContext};
use crate::events::{EventListener, Guarded};
use crate::origin::Origin;
use crate::response::Response;
use crate::timeouts::{TimeoutsHolder, READ_TAG, REQUEST_TAG};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The panic of a future polled again after it returned its outcome.
pub(crate) const POLLED_AFTER_COMPLETION: &str = "ResponseFuture polled after it completed";
/// The panic of `wait` on a future already polled to completion.
pub(crate) const WAITED_AFTER_COMPLETION: &str =
    "ResponseFuture::wait after it completed (a poll already returned its outcome)";

/// How long [`Exchange::wait`] yields before it blocks.
const WAIT_SPIN: Duration = Duration::from_micros(50);

/// A callback that receives the body as it arrives, on the connection's loop.
pub type BodySink = Box<dyn FnMut(&[u8]) + Send + 'static>;

/// The connection an exchange runs on: its loop and its slot there.
#[derive(Clone)]
pub(crate) struct ConnRef {
    pub(crate) event_loop: Arc<EventLoop>,
    pub(crate) key: usize,
    pub(crate) conn_id: u64,
}

#[derive(Default)]
struct Outcome {
    result: Option<Result<Response, Error>>,
    waker: Option<Waker>,
    taken: bool,
    /// A thread is blocked in `wait` (saves a futex wake when none is).
    blocked: bool,
}

/// What is sent.
pub(crate) struct RequestParts {
    pub(crate) method: http::Method,
    /// Head and body, encoded once at submission.
    pub(crate) bytes: Vec<u8>,
    /// False if the request asks the server to close the connection.
    pub(crate) keep_alive: bool,
}

pub(crate) struct Exchange {
    pub(crate) id: u64,
    pub(crate) client: Arc<ClientShared>,
    pub(crate) origin: Origin,
    pub(crate) request: RequestParts,
    pub(crate) listener: Guarded,
    pub(crate) body_sink: Mutex<Option<BodySink>>,
    pub(crate) timeouts: TimeoutsHolder,
    /// Set once an idempotent request has been retried on a fresh connection.
    pub(crate) retried: AtomicBool,
    done: AtomicBool,
    /// Set once the outcome is stored (after `done`): what `wait` spins on.
    settled: AtomicBool,
    outcome: Mutex<Outcome>,
    ready: Condvar,
    conn: Mutex<Option<ConnRef>>,
    remote: Mutex<Option<SocketAddr>>,
    /// Time of the last read (or of the request being sent), in nanoseconds
    /// since `submitted`, for the read timeout.
    submitted: Instant,
    last_read: AtomicU64,
}

impl Exchange {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u64,
        client: Arc<ClientShared>,
        origin: Origin,
        request: RequestParts,
        listener: Guarded,
        body_sink: Option<BodySink>,
        timeouts: TimeoutsHolder,
        submitted: Instant,
    ) -> Exchange {
        Exchange {
            id,
            client,
            origin,
            request,
            listener,
            body_sink: Mutex::new(body_sink),
            timeouts,
            retried: AtomicBool::new(false),
            done: AtomicBool::new(false),
            settled: AtomicBool::new(false),
            outcome: Mutex::new(Outcome::default()),
            ready: Condvar::new(),
            conn: Mutex::new(None),
            remote: Mutex::new(None),
            submitted,
            last_read: AtomicU64::new(0),
        }
    }

    /// Whether the method may be sent twice without harm (RFC 9110 §9.2.2).
    pub(crate) fn is_idempotent(&self) -> bool {
        self.request.method.is_idempotent()
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Whether the outcome is stored (a little after `is_done`: the
    /// listener is told in between), so a poll now is ready.
    pub(crate) fn is_settled(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }

    /// The remote for messages: `host/ip:port` once connected, `host:port` before.
    pub(crate) fn remote_name(&self) -> String {
        match *lock(&self.remote) {
            Some(addr) => format!("{}/{}", self.origin.host, addr),
            None => self.origin.to_string(),
        }
    }

    pub(crate) fn set_remote(&self, addr: SocketAddr) {
        *lock(&self.remote) = Some(addr);
    }

    /// Publishes the connection the exchange runs on.
    pub(crate) fn attach(&self, conn: ConnRef) {
        *lock(&self.conn) = Some(conn);
    }

    pub(crate) fn detach(&self) {
        *lock(&self.conn) = None;
    }

    /// Records activity for the read timeout.
    pub(crate) fn mark_read(&self, now: Instant) {
        let nanos = now.saturating_duration_since(self.submitted).as_nanos();
        self.last_read
            .store(nanos.min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    fn last_read(&self) -> Instant {
        self.submitted + Duration::from_nanos(self.last_read.load(Ordering::Relaxed))
    }

    /// Ends the exchange with `result`, unless it has already ended. Returns
    /// whether this call ended it. Runs on the calling thread: disarms the
    /// timeouts, tells the listener, wakes the future.
    pub(crate) fn finish(&self, result: Result<Response, Error>) -> bool {
        if self.done.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.timeouts.cancel();
        // Guarded: a listener that panics here changes nothing, the
        // exchange has already ended.
        match &result {
            Ok(response) => self.listener.on_completed(response.status),
            Err(error) => self.listener.on_failed(error),
        }
        self.client.unregister(self.id);
        let (waker, blocked) = {
            let mut outcome = lock(&self.outcome);
            outcome.result = Some(result);
            (outcome.waker.take(), outcome.blocked)
        };
        self.settled.store(true, Ordering::Release);
        if blocked {
            self.ready.notify_all();
        }
        if let Some(waker) = waker {
            waker.wake();
        }
        true
    }

    /// Ends the exchange with `error` from outside its connection's code (a
    /// timeout, a cancel, the client closing) and closes the connection it
    /// was using, which cannot be reused mid-exchange. `cx` is the loop the
    /// caller runs on, if any.
    pub(crate) fn fail_and_abort(
        self: &Arc<Self>,
        error: Error,
        cx: Option<&mut LoopContext<'_>>,
    ) -> bool {
        if !self.finish(Err(error)) {
            return false;
        }
        let conn = lock(&self.conn).clone();
        if let Some(conn) = conn {
            match cx {
                Some(cx) if Arc::ptr_eq(cx.event_loop, &conn.event_loop) => {
                    cx.aborts.push((conn.key, self.id));
                }
                _ => {
                    let id = self.id;
                    // A loop that is shutting down closes the connection itself.
                    let _ = conn
                        .event_loop
                        .execute(move |cx| crate::conn::abort(cx, conn.key, id));
                }
            }
        }
        true
    }

    /// A timeout armed by [`TimeoutsHolder`] fired, on the wheel (`cx` is
    /// `None`) or on the connection's loop.
    pub(crate) fn timeout_fired(self: &Arc<Self>, tag: u32, cx: Option<&mut LoopContext<'_>>) {
        if self.is_done() {
            return;
        }
        match tag {
            REQUEST_TAG => {
                self.timeouts.request_expired();
                let duration = self.timeouts.request_timeout.unwrap_or_default();
                let error = Error::timeout_of(TimeoutKind::Request, self.remote_name(), duration);
                self.fail_and_abort(error, cx);
            }
            READ_TAG => {
                let now = self.client.clock.now();
                if self.timeouts.read_expired(self, now, self.last_read()) {
                    let duration = self.timeouts.read_timeout.unwrap_or_default();
                    let error = Error::timeout_of(TimeoutKind::Read, self.remote_name(), duration);
                    self.fail_and_abort(error, cx);
                }
            }
            _ => {}
        }
    }

    /// The caller cancelled (or dropped the future).
    pub(crate) fn cancel(self: &Arc<Self>) -> bool {
        self.fail_and_abort(Error::Cancelled, None)
    }

    pub(crate) fn poll_outcome(&self, cx: &mut Context<'_>) -> Poll<Result<Response, Error>> {
        let mut outcome = lock(&self.outcome);
        if let Some(result) = outcome.result.take() {
            outcome.taken = true;
            return Poll::Ready(result);
        }
        assert!(!outcome.taken, "{POLLED_AFTER_COMPLETION}");
        match &outcome.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => outcome.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    pub(crate) fn wait(&self) -> Result<Response, Error> {
        // A loopback or LAN answer often comes back within tens of
        // microseconds: yield for a short while before blocking, which
        // spares both sides a futex sleep and wake-up.
        let spin_until = Instant::now() + WAIT_SPIN;
        while !self.settled.load(Ordering::Acquire) && Instant::now() < spin_until {
            std::thread::yield_now();
        }
        let mut outcome = lock(&self.outcome);
        loop {
            if let Some(result) = outcome.result.take() {
                outcome.taken = true;
                return result;
            }
            // Polled to completion before: nothing will ever come.
            assert!(!outcome.taken, "{WAITED_AFTER_COMPLETION}");
            outcome.blocked = true;
            outcome = self
                .ready
                .wait(outcome)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}
