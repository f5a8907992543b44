//! Upload bodies for tests.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tickless::http_body::{Body, Frame};
use tickless::Bytes;

/// An async body that paces itself with tokio's timer, as a throttled
/// upload does (and as one read from `tokio::fs` needs the runtime too):
/// `left` pieces of `tick;`, each after a 5 ms sleep made as it is
/// polled. Polled outside a tokio runtime, tokio panics.
pub struct Throttled {
    left: usize,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Throttled {
    /// `pieces` pieces of `tick;`.
    pub fn new(pieces: usize) -> Throttled {
        Throttled {
            left: pieces,
            sleep: None,
        }
    }
}

impl Body for Throttled {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(Duration::from_millis(5))));
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.sleep = None;
        self.left -= 1;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"tick;")))))
    }
}
