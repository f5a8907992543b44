//! [`ResponseFuture`]: the caller's end of an exchange.

use super::{Body, Response};
use crate::error::Error;
use crate::exchange::{Head, POLLED_AFTER_COMPLETION, WAITED_AFTER_COMPLETION};
use crate::policy::chain::Chain;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The response to come: it resolves when the response's head has
/// arrived (its status and headers); the body follows, read from the
/// [`Response`]. Redirects are followed on the way (each a new exchange,
/// under the one request deadline): the head it resolves with is the last
/// hop's.
///
/// A `std::future::Future` that needs no particular runtime: it is woken
/// from the thread that delivers the head or ends the exchange (a loop, the
/// wheel, or a canceller), so it works under tokio, smol or a plain
/// `block_on`. It can also be waited on without an executor with
/// [`wait`](Self::wait). It is `Send` and `Sync`, whatever the request's
/// body (as hyper's and reqwest's are): it goes into a spawned task, a
/// `Box<dyn Future + Send + Sync>`, or a task that holds a borrow of it
/// across an `.await`. Polled again once it has resolved, it panics, as
/// [`wait`](Self::wait) does then.
///
/// Dropping it before it resolves cancels the exchange: its connection is
/// closed and its timeouts are disarmed. Once it has resolved, the exchange
/// belongs to the response's body (see [`Body`] on dropping that).
///
/// ```
/// # let url = tickless_client::doc_support::serve_text("ok");
/// # let silent = tickless_client::doc_support::silent();
/// use tickless_client::Error;
///
/// let client = tickless_client::Client::new();
/// // Several in flight at once, then waited for (or `.await`ed).
/// let futures: Vec<_> = (0..4).map(|_| client.get(&url).send()).collect();
/// for future in futures {
///     assert_eq!(future.wait()?.status(), 200);
/// }
/// // Cancelled: it resolves with Error::Cancelled, its connection closed.
/// let future = client.get(&silent).send();
/// assert!(future.cancel());
/// assert!(matches!(future.wait(), Err(Error::Cancelled)));
/// # Ok::<(), tickless_client::Error>(())
/// ```
#[must_use = "a dropped ResponseFuture cancels its request"]
pub struct ResponseFuture {
    inner: Inner,
}

enum Inner {
    Chain(Box<Chain>),
    /// Refused before an exchange existed (invalid input), or a chain
    /// that failed: the error, until it is taken.
    Failed(Option<Error>),
}

impl ResponseFuture {
    pub(crate) fn new(chain: Chain) -> Self {
        ResponseFuture {
            inner: Inner::Chain(Box::new(chain)),
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
    /// When the loop of its connection is idle — its thread has just
    /// answered a blocked caller, a sequential client's last request — the
    /// calling thread drives that loop itself until the head comes: the
    /// request is written and the answer read on this thread, with no
    /// hand-off to the loop's and back (see
    /// [`EventLoop`](crate::event_loop::EventLoop), "Who drives a loop").
    /// Otherwise it waits for the loop to deliver the head.
    ///
    /// Either way it may first yield the processor for up to 50 µs,
    /// checking for the outcome, before it sleeps: a loopback or LAN
    /// response often arrives within that window, and catching it awake
    /// saves a sleep and a wake-up (the README says what it was measured to
    /// save). It does so only while the client's recent bodies are small,
    /// few requests are in flight, and recent spins caught their answer; the
    /// price is at most 50 µs of processor time per call.
    ///
    /// On a thread that runs an event loop's turns — a loop's own, or a
    /// caller's driving one, as in a listener, or in a waker that polls
    /// its task inline — it fails at once with [`Error::WouldDeadlock`]
    /// (the request cancelled, as the future is dropped) if the head has
    /// not come and that loop must bring it: the loop would stop serving
    /// the very connection being waited for. Poll the future there
    /// instead, or wait on another thread (see
    /// [`EventListener`](crate::EventListener), "Blocking, and calling
    /// back into the client"). Telling costs a thread that runs no loop
    /// two thread-local reads.
    ///
    /// # Panics
    ///
    /// If a poll has already returned the outcome (as polling again would).
    pub fn wait(mut self) -> Result<Response, Error> {
        let chain = match &mut self.inner {
            Inner::Chain(chain) => chain,
            Inner::Failed(error) => return Err(error.take().expect(WAITED_AFTER_COMPLETION)),
        };
        let head = chain.wait()?;
        response(chain, head)
    }

    /// Cancels the exchange: the future resolves with [`Error::Cancelled`]
    /// unless it had already ended or handed out its response (whose body
    /// then owns the exchange). A head the client would follow — a
    /// redirect, a status its retry policy retries, a `417` — has not
    /// ended it, even come whole: nothing more is sent for it. Returns
    /// whether this call cancelled it.
    pub fn cancel(&self) -> bool {
        match &self.inner {
            Inner::Chain(chain) => chain.cancel(),
            Inner::Failed(_) => false,
        }
    }

    /// Whether the head has arrived or the exchange has failed: the next
    /// poll is ready, and [`wait`](Self::wait) returns at once — unless
    /// that head is one the client follows (a redirect, a status its retry
    /// policy retries, a `417` repeated without `Expect`): then the next
    /// poll sends the next hop and is pending, its waker woken when that
    /// hop is done in turn.
    pub fn is_done(&self) -> bool {
        match &self.inner {
            Inner::Chain(chain) => chain.is_settled(),
            Inner::Failed(_) => true,
        }
    }
}

impl Future for ResponseFuture {
    type Output = Result<Response, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let chain = match &mut self.inner {
            Inner::Chain(chain) => chain,
            Inner::Failed(error) => {
                return Poll::Ready(Err(error.take().expect(POLLED_AFTER_COMPLETION)))
            }
        };
        match chain.poll(cx).map(|head| response(chain, head?)) {
            Poll::Ready(Ok(response)) => Poll::Ready(Ok(response)),
            Poll::Ready(Err(error)) => {
                // The chain is over; a poll after this one panics, as
                // after any outcome.
                self.inner = Inner::Failed(None);
                Poll::Ready(Err(error))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The response of the chain's last hop, whose head this is (or why it
/// is refused: see [`Chain::decoding`]).
fn response(chain: &mut Chain, mut head: Head) -> Result<Response, Error> {
    let decoding = chain.decoding(&mut head)?;
    let length = chain.body_length(&head, decoding.is_some());
    let body = Body::new(chain.current().clone(), decoding, length, head.body_ended);
    chain.body_made();
    chain.head_given(head.status);
    let attempt_id = chain.current().id;
    Ok(Response::new(head, chain.url().clone(), attempt_id, body))
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
