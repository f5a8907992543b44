//! [`ResponseFuture`]: the caller's end of an exchange.

use super::{Body, Response};
use crate::error::Error;
use crate::exchange::{Exchange, POLLED_AFTER_COMPLETION, WAITED_AFTER_COMPLETION};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The response to come: it resolves when the response's head has
/// arrived (its status and headers); the body follows, read from the
/// [`Response`].
///
/// A `std::future::Future` that needs no particular runtime: it is woken
/// from the thread that delivers the head or ends the exchange (a loop, the
/// wheel, or a canceller), so it works under tokio, smol or a plain
/// `block_on`. It can also be waited on without an executor with
/// [`wait`](Self::wait).
///
/// Dropping it before it resolves cancels the exchange: its connection is
/// closed and its timeouts are disarmed. Once it has resolved, the exchange
/// belongs to the response's body (see [`Body`] on dropping that).
#[must_use = "a dropped ResponseFuture cancels its request"]
pub struct ResponseFuture {
    inner: Inner,
}

enum Inner {
    Exchange(Arc<Exchange>),
    /// Refused before an exchange existed (invalid input).
    Failed(Option<Error>),
}

impl ResponseFuture {
    pub(crate) fn new(exchange: Arc<Exchange>) -> Self {
        ResponseFuture {
            inner: Inner::Exchange(exchange),
        }
    }

    pub(crate) fn failed(error: Error) -> Self {
        ResponseFuture {
            inner: Inner::Failed(Some(error)),
        }
    }

    /// Blocks the calling thread until the response's head arrives (or the
    /// exchange fails).
    ///
    /// It first yields the processor for up to 50 µs, checking for the
    /// outcome, and only then sleeps: a loopback or LAN response often
    /// arrives within that window, and catching it awake saves a sleep and a
    /// wake-up on both sides (the README says what it was measured to save).
    /// The price is at most 50 µs of processor time per call.
    ///
    /// Do not call it on an event loop's thread (from a listener or a
    /// streaming callback): that loop would stop serving the very
    /// connection being waited for.
    ///
    /// # Panics
    ///
    /// If a poll has already returned the outcome (as polling again would).
    pub fn wait(mut self) -> Result<Response, Error> {
        match &mut self.inner {
            Inner::Exchange(exchange) => exchange
                .wait_head()
                .map(|head| Response::new(head, Body::new(exchange.clone()))),
            Inner::Failed(error) => Err(error.take().expect(WAITED_AFTER_COMPLETION)),
        }
    }

    /// Cancels the exchange: the future resolves with [`Error::Cancelled`]
    /// unless it had already ended or handed out its response (whose body
    /// then owns the exchange). Returns whether this call cancelled it.
    pub fn cancel(&self) -> bool {
        match &self.inner {
            Inner::Exchange(exchange) => !exchange.head_taken() && exchange.cancel(),
            Inner::Failed(_) => false,
        }
    }

    /// Whether the head has arrived or the exchange has failed: the next
    /// poll is ready, and [`wait`](Self::wait) returns at once.
    pub fn is_done(&self) -> bool {
        match &self.inner {
            Inner::Exchange(exchange) => exchange.is_settled(),
            Inner::Failed(_) => true,
        }
    }
}

impl Future for ResponseFuture {
    type Output = Result<Response, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            Inner::Exchange(exchange) => exchange
                .poll_head(cx)
                .map_ok(|head| Response::new(head, Body::new(exchange.clone()))),
            Inner::Failed(error) => Poll::Ready(Err(error.take().expect(POLLED_AFTER_COMPLETION))),
        }
    }
}

impl Drop for ResponseFuture {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl std::fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("done", &self.is_done())
            .finish()
    }
}
