//! [`AsyncIo`]: a [`Transport`] seen through tokio's `AsyncRead` and
//! `AsyncWrite` traits — the only part of tokio the client uses (no
//! runtime), so that the `h2` crate can run over the client's own sockets.
//!
//! # Ground rules
//!
//! * The socket is non-blocking and registered, edge-triggered, on the loop
//!   that owns the connection. A call that would block returns
//!   `Poll::Pending` **without keeping the waker**: the connection is polled
//!   again on the next readiness of its socket, which is what an
//!   edge-triggered registration promises after a `WouldBlock`. The waker
//!   the future was polled with is only for wake-ups that do not come from
//!   the socket (the h2 crate's own, between streams and the connection).
//! * Only the loop's thread holds it: the connection owns it, and it is
//!   never shared.

use super::Transport;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A transport as an async byte stream. See the [module documentation](self).
pub(crate) struct AsyncIo {
    transport: Transport,
}

impl AsyncIo {
    pub(crate) fn new(transport: Transport) -> AsyncIo {
        AsyncIo { transport }
    }
}

/// `WouldBlock` as `Pending`, any other result as ready.
fn ready<T>(result: io::Result<T>) -> Poll<io::Result<T>> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
        other => Poll::Ready(other),
    }
}

impl AsyncRead for AsyncIo {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let read = this.transport.read(buf.initialize_unfilled());
            return match ready(read) {
                Poll::Ready(Ok(n)) => {
                    buf.advance(n);
                    Poll::Ready(Ok(()))
                }
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            };
        }
    }
}

impl AsyncWrite for AsyncIo {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            match ready(this.transport.write(buf)) {
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().transport.flush() {
            Ok(true) => Poll::Ready(Ok(())),
            Ok(false) => Poll::Pending,
            Err(e) => ready(Err(e)),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // TLS: close_notify, sent as far as the socket takes it.
        let this = self.get_mut();
        this.transport.close();
        Pin::new(this).poll_flush(cx)
    }
}
