//! The request going out: its head, then (after `100 Continue` if it asked)
//! its body — in memory, pumped from a `Read` through a bounded pipe, or
//! polled from an async body on this loop — framed by `Content-Length` or
//! chunked, as the socket takes it.

use crate::conn::upload::{Declared, Pulled, Upload};
use crate::error::Error;
use crate::event_loop::LoopContext;
use crate::exchange::{Exchange, RequestBody, RequestParts};
use crate::net::Transport;
use bytes::Bytes;
use std::collections::VecDeque;
use std::io;

/// How far the request is.
pub(super) enum Sending {
    /// `request.head[written..]` is still to go.
    Head { written: usize },
    /// The head is out; the body waits for `100 Continue`, or the delay.
    Continue,
    /// The body is going out.
    Body(Box<BodyOut>),
    /// Everything is out.
    Done,
    /// The server's final answer came first: before `100 Continue` (the
    /// body is never sent), or a refusal while the request was going out
    /// (the rest is never sent; see [`Sending::answered`]).
    Skipped,
    /// Writing failed: nothing more goes out (an upload's source is let
    /// go), though the answer may still be read.
    Failed,
}

impl Sending {
    /// The request is still going out (after the final answer's head has
    /// come, [`answered`](Self::answered)): an answer that ends now has its
    /// end held for the upload's (`Exchange::hold_answer`), not told yet.
    pub(super) fn goes_on(&self) -> bool {
        matches!(self, Sending::Head { .. } | Sending::Body(_))
    }

    /// The final answer's head has come, with `status`, maybe before the
    /// request is all out. An answer before `100 Continue` skips the body —
    /// whether the head is out (`Continue`) or still going out, for a
    /// request whose body `waits_for_continue` ([`waits_for_continue`]):
    /// the server has said by its final answer that it does not wait for
    /// the body, and the connection, its request cut short, is not reused.
    /// A refusal (any status but 2xx) while the request is still going
    /// out stops it (RFC 9112 §9.5, as curl does): the server has said it
    /// does not want the rest, which goes nowhere useful, and its body's
    /// source is let go (dropped with the body) rather than read on. A
    /// 2xx lets the upload go on: a server may answer while it still
    /// reads the request (an echo, a transform).
    pub(super) fn answered(&mut self, status: http::StatusCode, waits_for_continue: bool) {
        let stops = match self {
            Sending::Continue => true,
            Sending::Head { .. } => waits_for_continue || !status.is_success(),
            Sending::Body(_) => !status.is_success(),
            Sending::Done | Sending::Skipped | Sending::Failed => false,
        };
        if stops {
            *self = Sending::Skipped;
        }
    }
}

/// Whether a body goes after `request`'s head: one in memory not sent
/// with the head, or a streamed one — but for one declared empty
/// (`Content-Length: 0`), which is whole with the head: nothing of it is
/// left to send, or to wait for `100 Continue` for.
pub(super) fn body_follows(request: &RequestParts) -> bool {
    match &request.body {
        RequestBody::InHead => false,
        RequestBody::Held => true,
        RequestBody::Streamed(streamed) => streamed.length != Some(0),
    }
}

/// Whether `request`'s body waits for `100 Continue` (or the delay) after
/// its head.
pub(super) fn waits_for_continue(request: &RequestParts) -> bool {
    request.expect_continue && body_follows(request)
}

/// What a step of sending came to.
pub(super) enum Sent {
    /// All of it is out.
    Done,
    /// The socket takes no more for now: the server has to take some first.
    SocketFull,
    /// The body's source has to come first.
    Waiting,
    /// The budget given to [`BodyOut::send`] is spent, and more is to go:
    /// the loop's other work comes first.
    Spent,
    /// The socket failed.
    Socket(io::Error),
    /// The body's source failed, or gave more or less than its length.
    Body(Error),
}

/// Where the next bytes of the body come from.
enum Source {
    /// Framed already, in memory: queued at once.
    Held,
    Streamed(Upload),
    /// Nothing more: the body has ended.
    None,
}

/// A body being written.
pub(super) struct BodyOut {
    /// Frames ready to go, oldest first, and how much of the first went.
    queue: VecDeque<Bytes>,
    written: usize,
    source: Source,
    /// The declared `Content-Length` (`None`: chunked), and what the
    /// source has given of it.
    declared: Declared,
    ended: bool,
    /// Bytes the transport took, framing included.
    sent: u64,
}

static CRLF: &[u8] = b"\r\n";
static LAST_CHUNK: &[u8] = b"0\r\n\r\n";

impl BodyOut {
    /// The body of `exchange`, ready to go after the head.
    pub(super) fn of(exchange: &Exchange) -> BodyOut {
        let mut out = BodyOut {
            queue: VecDeque::new(),
            written: 0,
            source: Source::None,
            declared: Declared::new(None),
            ended: false,
            sent: 0,
        };
        match &exchange.request.body {
            RequestBody::InHead => out.ended = true,
            RequestBody::Held => {
                let payload = exchange.request.payload();
                // Never empty (`policy::hop` puts an empty body in the
                // head): a frame of nothing would go as a write of
                // nothing, which fails (`write_zero`). Empty only once the
                // exchange has ended meanwhile, its bytes let go
                // (`RequestParts::release`), its abort on its way.
                debug_assert!(
                    !payload.held.is_empty() || payload.released,
                    "an empty body in memory held for after the head"
                );
                out.queue.push_back(payload.held.clone());
                out.source = Source::Held;
                out.ended = true;
            }
            RequestBody::Streamed(streamed) => {
                out.declared = Declared::new(streamed.length);
                // Taken already: the exchange ended meanwhile, its abort
                // on its way.
                out.source = Upload::take(exchange).map_or(Source::None, Source::Streamed);
            }
        }
        out
    }

    /// Writes what it can: queued frames, then more from the source, until
    /// the socket or the source would block, the body is out, or `budget`
    /// bytes have gone in this call with more to go.
    pub(super) fn send(
        &mut self,
        transport: &mut Transport,
        cx: &LoopContext<'_>,
        budget: usize,
    ) -> Sent {
        let start = self.sent;
        loop {
            if let Some(front) = self.queue.front() {
                let spent = usize::try_from(self.sent - start).unwrap_or(usize::MAX);
                let left = budget.saturating_sub(spent);
                if left == 0 {
                    return Sent::Spent;
                }
                // No more than the budget offered to one write either: on
                // loopback a reader as fast as the writer lets a single
                // write take a whole body.
                let end = front.len().min(self.written.saturating_add(left));
                let n = match write_some(transport, &front[self.written..end]) {
                    Ok(n) => n,
                    Err(stopped) => return stopped,
                };
                self.written += n;
                self.sent += n as u64;
                if self.written == front.len() {
                    self.queue.pop_front();
                    self.written = 0;
                }
                continue;
            }
            if self.ended {
                return Sent::Done;
            }
            // Its declared length out: the body is whole on the wire, and
            // the request sent, whether or not the source has said it has
            // ended (it may never), as over HTTP/2.
            if self.declared.whole() {
                self.end();
                continue;
            }
            // What TLS holds goes before the source is asked for more: it
            // may have nothing for a while, and the server is owed these.
            match transport.flush() {
                Ok(true) => {}
                Ok(false) => return Sent::SocketFull,
                Err(e) => return Sent::Socket(e),
            }
            let source = &mut self.source;
            match self.declared.next(|| pull(source, cx)) {
                Pulled::Data(bytes) => self.frame(bytes),
                Pulled::End => self.end(),
                Pulled::Trailers(trailers) => self.end_with(&trailers),
                Pulled::Pending => return Sent::Waiting,
                Pulled::Failed(error) => return Sent::Body(error),
            }
        }
    }

    /// Bytes the transport took so far.
    pub(super) fn sent(&self) -> u64 {
        self.sent
    }

    /// Queues `bytes`, held to the declared length already, as the body's
    /// next piece.
    fn frame(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        if self.declared.length().is_some() {
            self.queue.push_back(bytes);
        } else {
            self.queue
                .push_back(Bytes::from(format!("{:x}\r\n", bytes.len())));
            self.queue.push_back(bytes);
            self.queue.push_back(Bytes::from_static(CRLF));
        }
    }

    /// The source has ended, or has given all of its declared length
    /// (checked already): the last chunk goes, if chunked.
    fn end(&mut self) {
        self.ended = true;
        self.source = Source::None;
        if self.declared.length().is_none() {
            self.queue.push_back(Bytes::from_static(LAST_CHUNK));
        }
    }

    /// The source has ended with `trailers` (held to the declared length
    /// already: chunked, for only a chunked body has room for them): the
    /// last chunk goes with them as its trailer section (RFC 9112 §7.1.2).
    fn end_with(&mut self, trailers: &http::HeaderMap) {
        self.ended = true;
        self.source = Source::None;
        let mut section = Vec::new();
        crate::h1::encode_last_chunk_with(trailers, &mut section);
        self.queue.push_back(Bytes::from(section));
    }
}

/// The next piece of the body from `source`.
fn pull(source: &mut Source, cx: &LoopContext<'_>) -> Pulled {
    match source {
        Source::Held | Source::None => Pulled::End,
        Source::Streamed(upload) => upload.pull(cx),
    }
}

/// The error of a write that took nothing.
fn write_zero() -> io::Error {
    io::Error::new(io::ErrorKind::WriteZero, "the connection took no bytes")
}

/// One write of `bytes` (again if interrupted): how many the socket took,
/// or what stopped it — a full socket, or its failure (a write that takes
/// nothing is one).
pub(super) fn write_some(transport: &mut Transport, bytes: &[u8]) -> Result<usize, Sent> {
    loop {
        return match transport.write(bytes) {
            Ok(0) => Err(Sent::Socket(write_zero())),
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(Sent::SocketFull),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(Sent::Socket(e)),
        };
    }
}
