//! An HTTP/2 server for the rustdoc examples: cleartext with prior
//! knowledge, on the `h2` crate's server side and no runtime. Each
//! connection is one future polled on its own thread — at once, and again
//! every millisecond while it is pending — over a non-blocking socket. That
//! costs a doc server nothing that matters and needs no reactor.

use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// An HTTP/2 server on `127.0.0.1` (prior knowledge, no TLS) that answers
/// every stream with `200` and `text`; returns its base URL,
/// `http://127.0.0.1:PORT`, for a client built with
/// `http2_prior_knowledge()`. Its threads live as long as the process.
pub fn serve_h2(text: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                if stream.set_nonblocking(true).is_ok() {
                    let _ = poll_to_end(answer_streams(Socket(stream), text));
                }
            });
        }
    });
    url
}

/// Answers each stream of one connection as it is accepted, until the
/// client goes away.
async fn answer_streams(socket: Socket, text: &'static str) -> Result<(), h2::Error> {
    let mut connection = h2::server::handshake(socket).await?;
    while let Some(stream) = connection.accept().await {
        let (_request, mut respond) = stream?;
        let head = http::Response::builder()
            .header(http::header::CONTENT_TYPE, "text/plain")
            .body(())
            .expect("a valid head");
        let mut body = respond.send_response(head, false)?;
        body.send_data(Bytes::from_static(text.as_bytes()), true)?;
    }
    Ok(())
}

/// Polls `future` until it is ready, sleeping a millisecond between polls
/// (its socket registers no waker).
fn poll_to_end<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A non-blocking socket through tokio's I/O traits: `WouldBlock` is
/// `Pending`, and [`poll_to_end`] polls again.
struct Socket(TcpStream);

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.0.read(buf.initialize_unfilled()) {
            Ok(n) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
            Err(err) => Poll::Ready(Err(err)),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.0.write(bytes) {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
            written => Poll::Ready(written),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.0.shutdown(Shutdown::Write))
    }
}
