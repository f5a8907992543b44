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
//! * Readiness is tracked, as tokio's own sockets do: a read (a write) that
//!   would block clears a flag that only the socket's next readable
//!   (writable) event sets again ([`IoReadiness`]), and while it is clear a
//!   poll returns `Pending` without a system call. The h2 connection polls
//!   its transport several times per turn of the loop; without this each
//!   poll with nothing to read would cost a `recv` that fails. What TLS has
//!   decrypted is read before a `WouldBlock` can come, so none is left behind.
//! * Reads are budgeted: the connection grants a number of bytes per turn
//!   of its loop ([`IoReadiness::refill`]); once they are read, a poll
//!   returns `Pending` without a system call and says so
//!   ([`IoReadiness::budget_spent`]), and the connection asks its loop to
//!   hand it readiness again after the loop's other work. The socket may
//!   still hold bytes, so the readable flag stays set. Without it, a peer
//!   that writes frames the `h2` crate answers by itself (PING, SETTINGS)
//!   as fast as it reads the answers would keep the loop inside one poll,
//!   and every other connection and deadline of that loop waiting.
//! * The socket's end, once the connection is open
//!   ([`IoReadiness::opened`]), is held back from `h2` until the
//!   connection has polled its streams: the read that meets it returns
//!   `Pending` and wakes the connection, and the first poll after the
//!   connection's next poll of its streams
//!   ([`IoReadiness::streams_polled`]) returns it. `h2` has then acted on
//!   every frame read before it, and the streams those frames woke have
//!   been polled: a stream sees its `END_STREAM` while its state still
//!   says so. (Held for one poll of `h2` alone, an end met by a pass's
//!   second poll, after the streams', came with the next pass's first,
//!   before them.) At the end `h2` marks every stream not closed
//!   both ways as failed ("stream closed because of a broken pipe"), which
//!   hides the end of an answer that came whole with the connection's
//!   last bytes while its request's body was still being sent. The end is
//!   a read of 0 bytes, or a read's error, held the same: `h2` fails
//!   those streams on an error as well, and over TLS a server that closes
//!   its socket with no `close_notify` ends the stream with one
//!   (`UnexpectedEof`), as does a reset after the last bytes.
//! * A write that fails once the connection is open (the server reset it,
//!   an upload's bytes unread) is not `h2`'s to see before what the server
//!   sent: `h2` writes before it reads, and would fail every stream with
//!   the answers still in the socket. The error is kept, what is written
//!   from then on dropped, and reads go on to the socket's end — the read
//!   that would block is the end then, with the write's error — held back
//!   as any end.
//! * On a connection that speaks HTTP/2 without asking (prior knowledge),
//!   the first read is looked at: a server that answers the preface with
//!   anything but a `SETTINGS` frame (an HTTP/1.x status line, say), or
//!   closes before sending anything, does not speak HTTP/2, and the
//!   connection finds it said so
//!   ([`IoReadiness::not_http2`]) — `h2` sees only a frame too large or a
//!   broken pipe. The reads after the first are not looked at.
//! * Every read is looked at for the server's `SETTINGS_MAX_HEADER_LIST_SIZE`
//!   ([`IoReadiness::max_header_list_size`]) and its empty DATA frames
//!   ([`IoReadiness::empty_data_frames`]), which `h2` keeps to itself.
//! * Only the loop's thread uses it: the connection owns it, and the flags
//!   are shared with that same connection's code alone.

use super::frame_watch::FrameWatch;
use super::Transport;
use bytes::{Buf, Bytes};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A transport as an async byte stream. See the [module documentation](self).
pub(crate) struct AsyncIo {
    transport: Transport,
    ready: Arc<IoReadiness>,
    /// Bytes of the stream already read off the socket before it was
    /// handed over (what came with a proxy's answer), read first.
    early: Bytes,
    /// Whether the socket's end has been held back from `h2` (see
    /// [`IoReadiness::opened`]), is, or is still to be.
    end_hold: EndHold,
    /// A write failed once the connection was open: writes are dropped
    /// from now on, and reads go on to the socket's end, this error if
    /// nothing else ends them (see the [module documentation](self)).
    write_failed: Option<io::Error>,
    /// The first read is still to be looked at for a server that does not
    /// speak HTTP/2 (see [`IoReadiness::not_http2`]).
    watch_first_read: bool,
    /// Where the server's frames are, for its settings and its empty DATA
    /// frames (see [`IoReadiness::max_header_list_size`] and
    /// [`IoReadiness::empty_data_frames`]).
    frames: FrameWatch,
}

/// What the first read of a connection that speaks HTTP/2 without asking
/// met instead of the server's frames.
#[derive(Debug)]
pub(crate) enum NotHttp2 {
    /// Bytes that are no `SETTINGS` frame (an HTTP/1.x answer, say): their
    /// first line, at most [`ANSWER_MAX`] bytes of it, lossily decoded.
    Answered(String),
    /// The connection's end, before any byte.
    Closed,
}

/// The most of an answer's first line kept for [`NotHttp2::Answered`].
const ANSWER_MAX: usize = 128;

/// The type of the frame a server's HTTP/2 begins with, `SETTINGS`
/// (RFC 9113 §3.4), the fourth byte of its header.
const SETTINGS_TYPE: u8 = 0x4;

impl NotHttp2 {
    /// What `first`, the first bytes a read of the connection met, says:
    /// `None` if they may begin a `SETTINGS` frame. Too short to show the
    /// frame's type, they are taken for an HTTP/1.x answer if they begin
    /// `HTTP/1.` (no `SETTINGS` frame can: its length, their first three
    /// bytes, would be megabytes), else for HTTP/2.
    fn of_first_bytes(first: &[u8]) -> Option<NotHttp2> {
        const HTTP1: &[u8] = b"HTTP/1.";
        let seen = first.len().min(HTTP1.len());
        let http1 = first[..seen] == HTTP1[..seen];
        let settings = first.get(3).is_none_or(|&kind| kind == SETTINGS_TYPE);
        if !http1 && settings {
            return None;
        }
        let line = first
            .split(|&b| b == b'\r' || b == b'\n')
            .next()
            .unwrap_or_default();
        let line = &line[..line.len().min(ANSWER_MAX)];
        Some(NotHttp2::Answered(
            String::from_utf8_lossy(line).into_owned(),
        ))
    }
}

/// How far the hold of the socket's end is. An end a read meets is held
/// if the connection is open ([`IoReadiness::opened`]) and this is
/// [`NotMet`](EndHold::NotMet): no flag of its own to keep in step.
enum EndHold {
    /// No read has met the end since the connection opened.
    NotMet,
    /// A read met the socket's end (`Ok`: 0 bytes) or an error, and held
    /// it back: the first poll after the connection has polled its streams
    /// returns it.
    Held(io::Result<()>),
    /// Held once and returned: a read that meets it again returns it.
    Given,
}

/// Whether reading and writing may make progress: set by the socket's
/// readiness events, cleared by a `WouldBlock`; and what is left of this
/// turn's read budget.
#[derive(Debug)]
pub(crate) struct IoReadiness {
    readable: AtomicBool,
    writable: AtomicBool,
    budget: AtomicUsize,
    spent: AtomicBool,
    /// The connection is open ([`IoReadiness::opened`]): the socket's end
    /// is held back from `h2` until the streams are polled
    /// ([`AsyncIo::end_hold`] says whether it has been), and a write's
    /// failure waits for the reads (see [`AsyncIo::write_failed`]).
    open: AtomicBool,
    /// The connection has polled its streams since a read met the socket's
    /// end and held it back ([`IoReadiness::streams_polled`]).
    streams_polled: AtomicBool,
    /// A TLS failure that ended the server's side of the handshake (a TLS
    /// 1.3 server refusing the client's certificate), met by a read: `h2`
    /// keeps only the kind and text of an `io::Error`, so the connection
    /// finds it here (see `transport::late_handshake_failure`).
    #[cfg(feature = "rustls")]
    handshake_failure: OnceLock<rustls::Error>,
    /// What the first read met instead of HTTP/2, on a connection that
    /// speaks it without asking (see [`IoReadiness::not_http2`]).
    not_http2: OnceLock<NotHttp2>,
    /// The server's `SETTINGS_MAX_HEADER_LIST_SIZE`, the last one read;
    /// [`NO_LIMIT`] before any (see [`IoReadiness::max_header_list_size`]).
    max_header_list_size: AtomicU64,
    /// The server's empty DATA frames that did not end their stream, so far
    /// (see [`IoReadiness::empty_data_frames`]).
    empty_data_frames: AtomicUsize,
    /// A read met the socket's end as the server's close (see
    /// [`IoReadiness::closed_by_server`]).
    closed_by_server: AtomicBool,
}

/// [`IoReadiness::max_header_list_size`] before the server has said one.
const NO_LIMIT: u64 = u64::MAX;

impl IoReadiness {
    /// The TLS failure that ended the server's side of the handshake, if a
    /// read met one.
    #[cfg(feature = "rustls")]
    pub(crate) fn handshake_failure(&self) -> Option<&rustls::Error> {
        self.handshake_failure.get()
    }

    /// What the first read met instead of the server's HTTP/2 frames, on a
    /// connection that speaks HTTP/2 without asking: an HTTP/1.x answer,
    /// or the connection's end. `None` too once a first byte that may be
    /// HTTP/2's has come, or on a connection that negotiated HTTP/2.
    pub(crate) fn not_http2(&self) -> Option<&NotHttp2> {
        self.not_http2.get()
    }

    /// The largest header section the server accepts, by its
    /// `SETTINGS_MAX_HEADER_LIST_SIZE` (RFC 9113 §6.5.2: each field's name
    /// and value and 32 bytes): the last one it sent, as read off the
    /// socket — about as `h2` acts on the frame that says it. `None` until
    /// it says one (before its `SETTINGS` come, or if they set none).
    pub(crate) fn max_header_list_size(&self) -> Option<u64> {
        let limit = self.max_header_list_size.load(Ordering::Relaxed);
        (limit != NO_LIMIT).then_some(limit)
    }

    /// How many DATA frames the server has sent that carry nothing (their
    /// padding taken off) and do not end their stream, as read off the
    /// socket. `h2` counts them, on the streams it still has, over the
    /// connection's life, and past 100 ends it with
    /// `GOAWAY(ENHANCE_YOUR_CALM)`, every stream on it failing (a guard
    /// against a flood of them, which flow control does not bound); the
    /// connection retires before that (`conn::h2`).
    pub(crate) fn empty_data_frames(&self) -> usize {
        self.empty_data_frames.load(Ordering::Relaxed)
    }

    /// Whether a read met the socket's end as the server's close: 0 bytes
    /// (a TCP FIN; over TLS, after `close_notify`), not an error. `h2`
    /// then fails every stream still open with an I/O error of kind
    /// `BrokenPipe` ("stream closed because of a broken pipe"), which the
    /// connection tells as the close it is (see `failure::stream_error`).
    pub(crate) fn closed_by_server(&self) -> bool {
        self.closed_by_server.load(Ordering::Relaxed)
    }

    /// A turn begins: up to `bytes` may be read in it.
    pub(crate) fn refill(&self, bytes: usize) {
        self.budget.store(bytes, Ordering::Relaxed);
        self.spent.store(false, Ordering::Relaxed);
    }

    /// Whether a read of this turn stopped for the budget: the connection
    /// has more to read once its loop has done its other work.
    pub(crate) fn budget_spent(&self) -> bool {
        self.spent.load(Ordering::Relaxed)
    }

    /// The connection is open: from now on the first read that meets the
    /// socket's end — 0 bytes, or an error — returns `Pending` instead,
    /// waking the connection's task, and the first poll after the
    /// connection's next poll of its streams
    /// ([`IoReadiness::streams_polled`]) returns the end (see the
    /// [module documentation](self)). Not before: a handshake
    /// that waits is polled again only for the socket's next event, which
    /// an end already met does not bring.
    ///
    /// From now on too, a write's failure waits for the reads to reach
    /// the socket's end ([`AsyncIo::write_failed`]).
    pub(crate) fn opened(&self) {
        self.open.store(true, Ordering::Relaxed);
    }

    /// The connection has polled the streams its reads woke: an end held
    /// back since may be given to `h2` (see [`IoReadiness::opened`]).
    pub(crate) fn streams_polled(&self) {
        self.streams_polled.store(true, Ordering::Relaxed);
    }

    /// The socket's readiness event said so.
    pub(crate) fn set(&self, readable: bool, writable: bool) {
        if readable {
            self.readable.store(true, Ordering::Relaxed);
        }
        if writable {
            self.writable.store(true, Ordering::Relaxed);
        }
    }
}

impl AsyncIo {
    /// Over `transport`, taken as ready both ways (a fresh connection has
    /// not read yet, and may already hold bytes); `early` are the stream's
    /// first bytes, already read off the socket (see `AsyncIo::early`).
    /// `prior_knowledge`: HTTP/2 is spoken without asking, and the first
    /// read looked at for a server that does not speak it
    /// ([`IoReadiness::not_http2`]).
    pub(crate) fn new(
        transport: Transport,
        early: Bytes,
        prior_knowledge: bool,
    ) -> (AsyncIo, Arc<IoReadiness>) {
        let ready = Arc::new(IoReadiness {
            readable: AtomicBool::new(true),
            writable: AtomicBool::new(true),
            budget: AtomicUsize::new(usize::MAX),
            spent: AtomicBool::new(false),
            open: AtomicBool::new(false),
            streams_polled: AtomicBool::new(false),
            #[cfg(feature = "rustls")]
            handshake_failure: OnceLock::new(),
            not_http2: OnceLock::new(),
            max_header_list_size: AtomicU64::new(NO_LIMIT),
            empty_data_frames: AtomicUsize::new(0),
            closed_by_server: AtomicBool::new(false),
        });
        let io = AsyncIo {
            transport,
            ready: ready.clone(),
            early,
            end_hold: EndHold::NotMet,
            write_failed: None,
            watch_first_read: prior_knowledge,
            frames: FrameWatch::default(),
        };
        (io, ready)
    }

    /// The socket's end, `end`, met by a read: held back from `h2` until
    /// the connection has polled its streams, the first time the
    /// connection is open (see [`IoReadiness::opened`]). The wake-up is
    /// not the socket's, which has no more events to give.
    fn end(&mut self, cx: &Context<'_>, end: io::Result<()>) -> Poll<io::Result<()>> {
        if matches!(self.end_hold, EndHold::NotMet) && self.ready.open.load(Ordering::Relaxed) {
            self.end_hold = EndHold::Held(end);
            self.ready.streams_polled.store(false, Ordering::Relaxed);
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(end)
    }

    /// The end held back, if one is and the connection has polled its
    /// streams since: given now.
    fn take_held_end(&mut self) -> Option<io::Result<()>> {
        if !self.ready.streams_polled.load(Ordering::Relaxed) {
            return None;
        }
        match std::mem::replace(&mut self.end_hold, EndHold::Given) {
            EndHold::Held(end) => Some(end),
            other => {
                self.end_hold = other;
                None
            }
        }
    }

    /// A write failed with `error`: once the connection is open, kept for
    /// the reads (see [`AsyncIo::write_failed`]) and `true`; before, or for
    /// no failure (`WouldBlock`, `Interrupted`), `false`.
    fn keep_write_failure(&mut self, error: &io::Error) -> bool {
        let failure = !matches!(
            error.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
        );
        if !failure || !self.ready.open.load(Ordering::Relaxed) {
            return false;
        }
        if self.write_failed.is_none() {
            self.write_failed = Some(io::Error::new(error.kind(), error.to_string()));
        }
        true
    }

    /// Looks at the first read that came to something — `read`, which
    /// put `first` in the buffer — for a server that does not speak HTTP/2
    /// (see [`IoReadiness::not_http2`]); `room`: whether the buffer had
    /// room, so that no bytes is the end.
    fn look_at_first_read(&mut self, read: &Poll<io::Result<()>>, first: &[u8], room: bool) {
        let found = match read {
            Poll::Pending => return,
            Poll::Ready(Ok(())) if first.is_empty() && !room => return,
            Poll::Ready(Ok(())) if !first.is_empty() => NotHttp2::of_first_bytes(first),
            // The end, before any byte.
            Poll::Ready(_) => Some(NotHttp2::Closed),
        };
        self.watch_first_read = false;
        if let Some(found) = found {
            let _ = self.ready.not_http2.set(found);
        }
    }

    /// Keeps a read's TLS failure that ended the handshake (see
    /// [`IoReadiness::handshake_failure`]).
    fn note(&self, error: &io::Error) {
        #[cfg(feature = "rustls")]
        if let Some(tls) = super::late_handshake_failure(error) {
            let _ = self.ready.handshake_failure.set(tls.clone());
        }
        #[cfg(not(feature = "rustls"))]
        let _ = error;
    }
}

/// `Pending` for `WouldBlock`, clearing `flag`; any other result as ready.
fn tracked<T>(flag: &AtomicBool, result: io::Result<T>) -> Poll<io::Result<T>> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            flag.store(false, Ordering::Relaxed);
            Poll::Pending
        }
        other => Poll::Ready(other),
    }
}

impl AsyncRead for AsyncIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let (before, room) = (buf.filled().len(), buf.remaining() > 0);
        let read = this.read(cx, buf);
        let new = &buf.filled()[before..];
        if let Some(limit) = this.frames.read(new) {
            let limit = u64::from(limit);
            this.ready
                .max_header_list_size
                .store(limit, Ordering::Relaxed);
        }
        this.ready
            .empty_data_frames
            .store(this.frames.empty_data_frames(), Ordering::Relaxed);
        if this.watch_first_read {
            this.look_at_first_read(&read, new, room);
        }
        read
    }
}

impl AsyncIo {
    /// [`AsyncRead::poll_read`], but for the look at the first read.
    fn read(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if let Some(end) = self.take_held_end() {
            // The end met by an earlier poll, held back until the streams
            // were polled: now it comes (and, asked again, the transport
            // says it again).
            return Poll::Ready(end);
        }
        if matches!(self.end_hold, EndHold::Held(_)) {
            // Held still: the streams the reads before it woke are polled
            // first, then the connection again.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if self.early.has_remaining() {
            // Already here: no socket to ask, and no readiness to wait for.
            let n = self.early.len().min(buf.remaining());
            buf.put_slice(&self.early[..n]);
            self.early.advance(n);
            return Poll::Ready(Ok(()));
        }
        // After a write's failure the socket is read to its end, whatever
        // its readiness says (its last event may have come already).
        if !self.ready.readable.load(Ordering::Relaxed) && self.write_failed.is_none() {
            return Poll::Pending;
        }
        let budget = self.ready.budget.load(Ordering::Relaxed);
        if budget == 0 {
            self.ready.spent.store(true, Ordering::Relaxed);
            return Poll::Pending;
        }
        loop {
            let unfilled = buf.initialize_unfilled();
            let room = !unfilled.is_empty();
            let read = self.transport.read(unfilled);
            return match tracked(&self.ready.readable, read) {
                // The socket's end (see the module documentation).
                Poll::Ready(Ok(0)) if room => {
                    self.ready.closed_by_server.store(true, Ordering::Relaxed);
                    self.end(cx, Ok(()))
                }
                Poll::Ready(Ok(n)) => {
                    buf.advance(n);
                    self.ready
                        .budget
                        .store(budget.saturating_sub(n), Ordering::Relaxed);
                    Poll::Ready(Ok(()))
                }
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Poll::Ready(Err(e)) => {
                    self.note(&e);
                    // An end too (a TLS stream's with no `close_notify`, a
                    // reset).
                    self.end(cx, Err(e))
                }
                Poll::Pending => match &self.write_failed {
                    // All read that came before the write failed: the end.
                    Some(e) => {
                        let e = io::Error::new(e.kind(), e.to_string());
                        self.end(cx, Err(e))
                    }
                    None => Poll::Pending,
                },
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
        if this.write_failed.is_some() {
            // Dropped: the connection is over (see `write_failed`).
            return Poll::Ready(Ok(buf.len()));
        }
        if !this.ready.writable.load(Ordering::Relaxed) {
            return Poll::Pending;
        }
        loop {
            match tracked(&this.ready.writable, this.transport.write(buf)) {
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Poll::Ready(Err(e)) if this.keep_write_failure(&e) => {
                    // Read on first: the server's last frames, and why it
                    // closed (a TLS alert), are in the socket.
                    return Poll::Ready(Ok(buf.len()));
                }
                Poll::Ready(Err(e)) => {
                    // The server may have said why before it closed (a TLS
                    // alert): the connection is over, so read it now.
                    if let Err(why) = this.transport.read(&mut [0; 512]) {
                        this.note(&why);
                    }
                    return Poll::Ready(Err(e));
                }
                other => return other,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.write_failed.is_some() || !this.transport.wants_write() {
            return Poll::Ready(Ok(()));
        }
        if !this.ready.writable.load(Ordering::Relaxed) {
            return Poll::Pending;
        }
        match this.transport.flush() {
            Ok(true) => Poll::Ready(Ok(())),
            Ok(false) => {
                this.ready.writable.store(false, Ordering::Relaxed);
                Poll::Pending
            }
            Err(e) if this.keep_write_failure(&e) => Poll::Ready(Ok(())),
            Err(e) => tracked(&this.ready.writable, Err(e)),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // TLS: close_notify, sent as far as the socket takes it.
        let this = self.get_mut();
        this.transport.close();
        Pin::new(this).poll_flush(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::{AsyncIo, NotHttp2, Transport};
    use bytes::Bytes;
    use std::io::Write;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};
    use tokio::io::{AsyncRead, ReadBuf};

    /// The socket's end, met by a read of `h2`'s that came after the
    /// connection polled its streams (a pass's second poll of `h2`), is
    /// held back until the connection has polled them again — those the
    /// bytes read before the end woke — not for one poll of `h2` alone:
    /// the next pass begins with one, and a stream whose answer came
    /// whole with the connection's last bytes, its upload still going,
    /// was failed there with the end, its answer lost (about once in a
    /// hundred runs of a test under load).
    #[test]
    fn the_sockets_end_is_held_until_the_streams_have_been_polled() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        server.write_all(b"the last frames").unwrap();
        drop(server);
        client.set_nonblocking(true).unwrap();
        let mut client = mio::net::TcpStream::from_std(client);
        // Both in the client's socket before the first read: its close,
        // which follows the bytes, has come (on a loaded machine loopback
        // delivery may lag the server's close).
        let mut poll = mio::Poll::new().unwrap();
        let token = mio::Token(0);
        poll.registry()
            .register(&mut client, token, mio::Interest::READABLE)
            .unwrap();
        let mut events = mio::Events::with_capacity(4);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !events.iter().any(mio::event::Event::is_read_closed) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(!left.is_zero(), "the server's close never came");
            poll.poll(&mut events, Some(left)).unwrap();
        }
        poll.registry().deregister(&mut client).unwrap();
        let transport = Transport::Plain(client);
        let (mut io, ready) = AsyncIo::new(transport, Bytes::new(), false);
        ready.opened();
        let mut cx = Context::from_waker(Waker::noop());
        let mut read = |io: &mut AsyncIo| {
            let mut bytes = [0u8; 64];
            let mut buf = ReadBuf::new(&mut bytes);
            match Pin::new(io).poll_read(&mut cx, &mut buf) {
                Poll::Ready(result) => Poll::Ready(result.map(|()| buf.filled().to_vec())),
                Poll::Pending => Poll::Pending,
            }
        };
        let Poll::Ready(Ok(bytes)) = read(&mut io) else {
            panic!("the bytes were not read");
        };
        assert_eq!(bytes, b"the last frames");
        assert!(read(&mut io).is_pending(), "the end is held back");
        assert!(
            read(&mut io).is_pending(),
            "the end is held back until the streams are polled"
        );
        ready.streams_polled();
        assert!(matches!(read(&mut io), Poll::Ready(Ok(ref end)) if end.is_empty()));
    }

    /// An HTTP/1.x answer is known by its first bytes, however few came,
    /// and anything else that is no `SETTINGS` frame (Python's
    /// `http.server` answers the preface as HTTP/0.9, with no status
    /// line); a `SETTINGS` frame's header is not taken for one.
    #[test]
    fn first_bytes_tell_an_answer_from_http2_frames() {
        let status = |first: &[u8]| match NotHttp2::of_first_bytes(first) {
            Some(NotHttp2::Answered(line)) => Some(line),
            _ => None,
        };
        let answer = b"HTTP/1.1 505 HTTP Version Not Supported\r\nServer: x\r\n\r\n";
        assert_eq!(
            status(answer).as_deref(),
            Some("HTTP/1.1 505 HTTP Version Not Supported")
        );
        assert_eq!(status(b"HTT").as_deref(), Some("HTT"));
        assert_eq!(status(&[0, 0, 18, 4, 0, 0, 0, 0, 0]), None);
        assert_eq!(status(&[0, 0, 18]), None);
        assert_eq!(
            status(b"<!DOCTYPE HTML>\n<html>").as_deref(),
            Some("<!DOCTYPE HTML>")
        );
        let long = [b"HTTP/1.0 200 ".as_slice(), &[b'x'; 300]].concat();
        assert_eq!(status(&long).map(|line| line.len()), Some(128));
    }
}
