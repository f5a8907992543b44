//! [`Body`]: a response body, read as it arrives — blocking (`Read`),
//! async ([`Body::chunk`], `http_body::Body`), or buffered whole
//! ([`CollectBytes`], [`CollectText`]).

use crate::error::{io_kind, Error, WithCauses};
use crate::exchange::{Chunks, Exchange, Pipe, Taken, Whole};
use crate::policy::decode::Decoding;
use bytes::{Buf, Bytes, BytesMut};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A response body, as it arrives.
///
/// The connection's loop reads the body into a bounded buffer ahead of
/// you (see [`ClientBuilder::body_window`](crate::ClientBuilder::body_window));
/// reading here takes from it, and the loop reads on as room comes. Read
/// it in whichever way suits:
///
/// * blocking, as a [`std::io::Read`] — `std::io::copy(&mut body, &mut file)`;
/// * async, a chunk at a time with [`chunk`](Self::chunk)`.await`, or through
///   [`http_body::Body`] (what hyper and the tower ecosystem take);
/// * whole, with [`Response::bytes`](crate::Response::bytes) or
///   [`Response::text`](crate::Response::text) (each blocking with `.wait()`,
///   or `.await`).
///
/// A body cut short by the server, or one that breaks the framing, is an
/// error where it is read, never a short success — and at every read after
/// it: code that reads on past errors (`lines().filter_map(Result::ok)`)
/// must stop at the first. Read as a `std::io::Read`, its error is an
/// `io::Error` holding the [`Error`] (`get_ref`), of kind `UnexpectedEof`
/// for a body cut short by a close (`Other` for an HTTP/2 stream the server
/// reset: [`Error::Http2`]), `TimedOut` for a timeout, `InvalidData` for one
/// that breaks the framing or its content coding (over HTTP/2 too, where
/// DATA that disagree with the declared `content-length` have the client
/// reset the stream: what came before the offending frame is read first,
/// but `h2` drops that frame whole, as hyper does); a read after the failure
/// fails again with the first's kind, but for a timeout's, which comes
/// again as `Other` so that a loop reading again on `TimedOut` ends (see
/// the `Read` impl). Trailers, if the response had any, are there once the
/// body has ended ([`trailers`](Self::trailers)).
///
/// **Dropping** a body before its end frees what it buffered at once. A
/// body that has arrived whole by then (anything within the window,
/// usually) has already given its connection back to the pool. Otherwise
/// its connection reads on, discarding, what has already arrived, up to
/// 64 KiB more: if the body ends within that (a status-only caller, say,
/// who drops a small response right after its head), the connection goes
/// back to the pool; if not, or if more has yet to come, it is closed at
/// once. Either way the exchange ends, its timers with it, and nothing more
/// of it is delivered.
///
/// A blocking read on a thread that runs the turns of the body's
/// connection's loop (in a listener, or a waker that polls its task
/// inline) fails at once with [`Error::WouldDeadlock`] when it would have
/// to wait: that loop would stop serving the very connection being read.
/// A `Read` or [`Chunk::wait`] refused so leaves the body as it was — read
/// it asynchronously, or later, or on another thread; what has come
/// already is read there as anywhere (see
/// [`EventListener`](crate::EventListener), "Blocking, and calling back
/// into the client").
///
/// ```
/// # let url = tickless_client::doc_support::serve(|_, _, _| {
/// #     tickless_client::doc_support::ok(&"x".repeat(1 << 20))
/// # });
/// let client = tickless_client::Client::new();
/// // As a std::io::Read, into anything that writes (a file, a hasher).
/// let mut response = client.get(&url).send().wait()?;
/// let mut copy = Vec::new();
/// std::io::copy(response.body_mut(), &mut copy)?;
/// assert_eq!(copy.len(), 1 << 20);
/// // A chunk at a time (`.await` in async code).
/// let mut response = client.get(&url).send().wait()?;
/// let mut total = 0;
/// while let Some(chunk) = response.chunk().wait()? {
///     total += chunk.len();
/// }
/// assert_eq!(total, 1 << 20);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Body {
    exchange: Arc<Exchange>,
    /// The decoding of an encoded body (see `ClientBuilder::decompress`),
    /// until the body ends.
    decoding: Option<Box<Decoding>>,
    /// A chunk being read by `Read`: what is left of it.
    current: Bytes,
    /// A body of known length: what is still to be taken from the pipe
    /// (the `http_body` size hint, with `current`).
    untaken: Option<u64>,
    /// The body ended with its head: nothing of it, not even trailers, is
    /// to come (see `Head::body_ended`), and `http_body` is told so
    /// before any read.
    ended_at_head: bool,
    trailers: Option<http::HeaderMap>,
    trailers_given: bool,
    /// The pipe has given its end (the decoder may still hold bytes).
    raw_ended: bool,
    /// The end, decoded, has been handed out (or an error).
    ended: bool,
    /// How it failed, if it did: every read after it fails too — a body
    /// cut short never reads as whole, however it is read again.
    failed: Option<Failure>,
}

/// What a body that failed keeps of its error for the reads after it: the
/// error itself went to the caller of the read that met it.
struct Failure {
    /// The `io::ErrorKind` every later read fails with: the first error's,
    /// but for the kinds that ask for the same read again (see the `Read`
    /// impl of [`Body`]).
    kind: io::ErrorKind,
    /// The first error with its causes.
    first: String,
}

impl Failure {
    fn of(error: &Error) -> Failure {
        let kind = match io_kind(error) {
            // A caller retries these (`read_to_end` an `Interrupted`, a
            // poll loop a `WouldBlock`, many a `TimedOut`, as a socket
            // with a read timeout invites): told again at once, and for
            // ever, they would have it spin. Nothing more will come.
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => {
                io::ErrorKind::Other
            }
            kind => kind,
        };
        Failure {
            kind,
            first: WithCauses(error).to_string(),
        }
    }
}

impl Body {
    /// `length`: the body's, as it will be read, if its head tells it;
    /// `ended_at_head`: whether it ended with its head — then its length
    /// is 0 as it will be read, decoded or not (an empty body is a whole
    /// one in every coding).
    pub(crate) fn new(
        exchange: Arc<Exchange>,
        decoding: Option<Decoding>,
        length: Option<u64>,
        ended_at_head: bool,
    ) -> Body {
        Body {
            exchange,
            decoding: decoding.map(Box::new),
            current: Bytes::new(),
            untaken: if ended_at_head { Some(0) } else { length },
            ended_at_head,
            trailers: None,
            trailers_given: false,
            raw_ended: false,
            ended: false,
            failed: None,
        }
    }

    /// The next chunk of the body, `None` at its end: a future, or block on
    /// it with [`Chunk::wait`].
    pub fn chunk(&mut self) -> Chunk<'_> {
        Chunk { body: self }
    }

    /// The trailers of the body — a chunked one's over HTTP/1.1, those of a
    /// trailing HEADERS frame over HTTP/2 — once the body has ended (and if
    /// it had any).
    pub fn trailers(&self) -> Option<&http::HeaderMap> {
        self.trailers.as_ref()
    }

    /// Whether the end of the body has been read (not an error: a body
    /// that failed has no end).
    pub fn is_end(&self) -> bool {
        self.ended && self.failed.is_none() && self.current.is_empty()
    }

    /// After the end: `None` again, or, if the body failed, an error again.
    fn after_end(&self) -> Result<Option<Bytes>, Error> {
        match &self.failed {
            None => Ok(None),
            Some(failure) => Err(Error::Io {
                remote: self.exchange.remote_name(),
                source: io::Error::new(
                    failure.kind,
                    format!("the body failed earlier: {}", failure.first),
                ),
            }),
        }
    }

    /// The next chunk, `None` at the end: what `Read` left of one first,
    /// then from the pipe (through the decoder, if the body is encoded).
    /// `take` takes from the pipe: polling, or blocking.
    fn next_chunk(
        &mut self,
        mut take: impl FnMut(&Pipe) -> Poll<Taken>,
    ) -> Poll<Result<Option<Bytes>, Error>> {
        if !self.current.is_empty() {
            return Poll::Ready(Ok(Some(std::mem::take(&mut self.current))));
        }
        if self.ended {
            return Poll::Ready(self.after_end());
        }
        loop {
            if let Some(decoding) = &mut self.decoding {
                let decoded = if self.raw_ended {
                    decoding.finish()
                } else {
                    decoding.next()
                };
                match decoded {
                    Ok(Some(chunk)) => return Poll::Ready(Ok(Some(chunk))),
                    Ok(None) if self.raw_ended => {
                        // Decoded to its end: the exchange's completion
                        // may be told.
                        self.exchange.body_checked();
                        return Poll::Ready(self.end(Ok(None)));
                    }
                    Ok(None) => {}
                    Err(error) => {
                        // Nothing more of it will be read: the connection
                        // is let go now (it drains or closes, as at a
                        // drop), not held for a reader that kept the body;
                        // the exchange, if that ends it, fails with `error`.
                        self.exchange.body_failed(&error);
                        return Poll::Ready(self.end(Err(error)));
                    }
                }
            }
            let taken = match take(self.exchange.body()) {
                Poll::Ready(taken) => taken,
                Poll::Pending => return Poll::Pending,
            };
            match taken {
                Taken::Chunk(chunk) => match &mut self.decoding {
                    Some(decoding) => decoding.feed(chunk),
                    None => {
                        if let Some(untaken) = &mut self.untaken {
                            *untaken = untaken.saturating_sub(chunk.len() as u64);
                        }
                        return Poll::Ready(Ok(Some(chunk)));
                    }
                },
                Taken::End(trailers) => {
                    self.trailers = trailers;
                    self.raw_ended = true;
                    if self.decoding.is_none() {
                        return Poll::Ready(self.end(Ok(None)));
                    }
                }
                Taken::Failed(error) => return Poll::Ready(self.end(Err(error))),
                Taken::Pending => unreachable!("only poll_take and take_blocking take"),
            }
        }
    }

    /// The body has ended (or failed): nothing more is read, and its
    /// decoder goes now — its window and output buffer (up to 8 MiB and
    /// more for zstd) are not kept for as long as the response is.
    fn end<T>(&mut self, last: Result<T, Error>) -> Result<T, Error> {
        self.ended = true;
        self.decoding = None;
        if let Err(error) = &last {
            self.failed = Some(Failure::of(error));
        }
        last
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, Error>> {
        let polled = self.next_chunk(|pipe| pipe.poll_take(cx));
        if polled.is_pending() {
            self.exchange.body_pending();
        }
        polled
    }

    /// The next chunk, blocking; [`Error::WouldDeadlock`] if nothing has
    /// come and the wait would stop the loop the calling thread runs —
    /// the body left as it was (not ended), to be read later or elsewhere.
    fn wait_chunk(&mut self) -> Result<Option<Bytes>, Error> {
        let exchange = self.exchange.clone();
        let taken = |_: &Pipe| match exchange.take_body_blocking() {
            Some(taken) => Poll::Ready(taken),
            None => Poll::Pending,
        };
        match self.next_chunk(taken) {
            Poll::Ready(chunk) => chunk,
            Poll::Pending => Err(Error::WouldDeadlock),
        }
    }
}

/// A read fails with an `io::Error` holding the [`Error`], of the kind
/// `io::Error::from` gives it (`TimedOut` for a timeout, `UnexpectedEof`
/// for a body cut short, …).
///
/// **After a failure** every read fails again, at once — never `Ok(0)`,
/// which would make a body cut short look whole (hyper's body ends after
/// its error, and reqwest's blocking `Read`, through `futures`'
/// `IntoAsyncRead`, then reads `Ok(0)`; std's sockets do not remember an
/// error at all). The error is an [`Error::Io`] whose source says `the body
/// failed earlier:` and the first error with its causes, and its kind is
/// the first's (`UnexpectedEof`, `InvalidData`, `ConnectionReset`, …) —
/// but for the kinds that ask for the same read again, `TimedOut`,
/// `WouldBlock` and `Interrupted`, which come again as `Other`: a body's
/// timeout ends its exchange, unlike a socket's read timeout, so a loop
/// that retries a read on `TimedOut` (or `read_to_end`, which retries
/// `Interrupted`) would spin on an error told again at once. Only the read
/// that met the failure says `TimedOut` ([`timeout_kind`](crate::timeout_kind)
/// finds its kind there; a later one's source names it).
impl io::Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        while self.current.is_empty() {
            match self.wait_chunk() {
                Ok(Some(chunk)) => self.current = chunk,
                Ok(None) => return Ok(0),
                Err(error) => return Err(error.into()),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current.advance(n);
        Ok(n)
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        if this.ended && this.current.is_empty() {
            if let Err(error) = this.after_end() {
                return Poll::Ready(Some(Err(error)));
            }
            return Poll::Ready(this.trailer_frame().map(Ok));
        }
        match this.poll_chunk(cx) {
            Poll::Ready(Ok(Some(chunk))) => Poll::Ready(Some(Ok(http_body::Frame::data(chunk)))),
            Poll::Ready(Ok(None)) => Poll::Ready(this.trailer_frame().map(Ok)),
            Poll::Ready(Err(error)) => Poll::Ready(Some(Err(error))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// True once the end has been read, and its trailers; and before any
    /// read for a body that ended with its head — an answer to HEAD, a 204,
    /// a 304, a `Content-Length: 0` over HTTP/1.1, an HTTP/2 `HEADERS`
    /// frame that ended the stream — as hyper says, so that code that
    /// skips an ended body (a proxy forwarding it) need not poll it. But
    /// not for a 2xx that came while the request's body still went out:
    /// its end waits for the upload's (a failed upload fails it), and a
    /// body dropped unpolled would stop the upload.
    fn is_end_stream(&self) -> bool {
        if self.ended_at_head && self.failed.is_none() {
            return true;
        }
        self.is_end() && (self.trailers.is_none() || self.trailers_given)
    }

    /// Exact for a body whose head gave its length (not one being
    /// decoded, unless it ended with its head: 0), and once the body has
    /// ended; otherwise unknown.
    fn size_hint(&self) -> http_body::SizeHint {
        let unread = self.current.len() as u64;
        match (self.ended, self.untaken) {
            (true, _) => http_body::SizeHint::with_exact(unread),
            (false, Some(untaken)) => http_body::SizeHint::with_exact(untaken + unread),
            (false, None) => http_body::SizeHint::default(),
        }
    }
}

impl Body {
    /// The trailers as the last frame, once.
    fn trailer_frame(&mut self) -> Option<http_body::Frame<Bytes>> {
        if self.trailers_given {
            return None;
        }
        self.trailers_given = true;
        self.trailers.clone().map(http_body::Frame::trailers)
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        // The connection drains what is left if it is small and has come
        // (and pools itself), or closes; the exchange ends either way.
        self.exchange.body_dropped();
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body")
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

/// The next chunk of a [`Body`]: a future, or [`wait`](Self::wait) for it.
#[must_use = "a chunk is only read when awaited or waited for"]
pub struct Chunk<'a> {
    body: &'a mut Body,
}

impl std::fmt::Debug for Chunk<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk").field("body", &self.body).finish()
    }
}

impl Chunk<'_> {
    /// Blocks until the next chunk (`None` at the end of the body) — or
    /// fails at once with [`Error::WouldDeadlock`], the body left as it
    /// was, if none has come and the calling thread runs the turns of the
    /// loop that must bring it (see [`Body`]).
    pub fn wait(self) -> Result<Option<Bytes>, Error> {
        self.body.wait_chunk()
    }
}

impl Future for Chunk<'_> {
    type Output = Result<Option<Bytes>, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.body.poll_chunk(cx)
    }
}

/// Gathers a whole body: the pipe is told to [collect](crate::exchange::Pipe::collect)
/// it, so it usually comes as one chunk, taken as it is.
///
/// An encoded body is not collected by its loop: it is decoded chunk by
/// chunk as it is read, in bounded memory up to the decoded whole, each
/// chunk added to one buffer as it comes ([`Decoded`]).
struct Gather {
    body: Body,
    asked: bool,
    /// The decoded body so far (an encoded body).
    decoded: Decoded,
    /// A poll has returned the outcome: there is none left to give.
    completed: bool,
}

/// The panic of a collector polled again after it returned its outcome.
const POLLED_AFTER_COMPLETION: &str =
    "CollectBytes, CollectText or CollectJson polled after it completed";
/// The panic of a collector's `wait` after a poll returned its outcome.
const WAITED_AFTER_COMPLETION: &str =
    "CollectBytes, CollectText or CollectJson waited for after it completed (a poll already returned its outcome)";

impl Gather {
    fn new(body: Body) -> Gather {
        Gather {
            body,
            asked: false,
            decoded: Decoded::None,
            completed: false,
        }
    }

    /// Tells the pipe, once; `false` if the body has ended already.
    /// `blocking`: the caller blocks on the body next, driving its loop
    /// if idle (see [`Pipe::collect`](crate::exchange::Pipe::collect)).
    fn ask(&mut self, blocking: bool) -> bool {
        if !self.asked && !self.body.ended {
            self.asked = true;
            self.body.exchange.body().collect(blocking);
        }
        !self.body.ended
    }

    /// The body had ended: what `Read` left of its last chunk — or its
    /// error again, if it failed.
    fn rest(&mut self) -> Result<Bytes, Error> {
        self.body.after_end()?;
        Ok(std::mem::take(&mut self.body.current))
    }

    /// What the pipe gave, after what the body held already, in one piece.
    fn whole(&mut self, whole: Whole) -> Result<Bytes, Error> {
        let chunks = match whole {
            Whole::Done(chunks, trailers) => {
                self.body.trailers = trailers;
                chunks
            }
            Whole::Failed(error) => return self.body.end(Err(error)),
            Whole::Pending => {
                unreachable!("only poll_take_whole and take_whole_blocking call this")
            }
        };
        self.body.ended = true;
        let held = std::mem::take(&mut self.body.current);
        Ok(join(held, chunks))
    }

    /// The outcome, once: a poll after it panics, as a `ResponseFuture`'s
    /// does, rather than give an empty body for a whole one.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bytes, Error>> {
        assert!(!self.completed, "{POLLED_AFTER_COMPLETION}");
        let polled = self.poll_whole(cx);
        self.completed = polled.is_ready();
        polled
    }

    fn poll_whole(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bytes, Error>> {
        if self.body.decoding.is_some() {
            loop {
                match self.body.poll_chunk(cx) {
                    Poll::Ready(Ok(Some(chunk))) => self.decoded.push(chunk),
                    Poll::Ready(Ok(None)) => return Poll::Ready(Ok(self.decoded.take())),
                    Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                    Poll::Pending => return Poll::Pending,
                }
            }
        }
        if !self.ask(false) {
            return Poll::Ready(self.rest());
        }
        match self.body.exchange.body().poll_take_whole(cx) {
            Poll::Ready(whole) => Poll::Ready(self.whole(whole)),
            Poll::Pending => {
                self.body.exchange.body_pending();
                Poll::Pending
            }
        }
    }

    fn wait(&mut self) -> Result<Bytes, Error> {
        assert!(!self.completed, "{WAITED_AFTER_COMPLETION}");
        if self.body.decoding.is_some() {
            while let Some(chunk) = self.body.wait_chunk()? {
                self.decoded.push(chunk);
            }
            return Ok(self.decoded.take());
        }
        if !self.ask(true) {
            return self.rest();
        }
        match self.body.exchange.take_whole_body_blocking() {
            Some(whole) => self.whole(whole),
            None => Err(Error::WouldDeadlock),
        }
    }
}

/// A decoded body collected whole, as its chunks come: each is copied
/// into one buffer at once and let go, so that at the peak the heap holds
/// the buffer — at most half as much again as the body, see
/// [`push`](Self::push) — and the chunk being added; not every chunk (each
/// may keep its decoder's output buffer, up to twice its bytes) and then a
/// copy of them all, up to three times the body.
enum Decoded {
    None,
    /// One chunk, as it came: a body of one is taken without a copy.
    One(Bytes),
    Many(Vec<u8>),
}

impl Decoded {
    fn push(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        match self {
            Decoded::None => *self = Decoded::One(chunk),
            Decoded::One(first) => {
                let mut joined = Vec::with_capacity(first.len() + chunk.len());
                joined.extend_from_slice(first);
                joined.extend_from_slice(&chunk);
                *self = Decoded::Many(joined);
            }
            Decoded::Many(joined) => {
                if joined.capacity() - joined.len() < chunk.len() {
                    // Grown by half of what it holds, not doubled: its room
                    // to spare is then at most half the body. (A growth
                    // may move the bytes: up to about three times the body
                    // in all, on the reader's thread — large blocks are
                    // remapped rather than copied by most allocators.)
                    joined.reserve_exact(chunk.len().max(joined.len() / 2));
                }
                joined.extend_from_slice(&chunk);
            }
        }
    }

    /// The body collected, in one piece.
    fn take(&mut self) -> Bytes {
        match std::mem::replace(self, Decoded::None) {
            Decoded::None => Bytes::new(),
            Decoded::One(chunk) => chunk,
            Decoded::Many(mut joined) => {
                // Room to spare (up to half the body) would be kept as
                // long as the bytes are: given back, shrunk in place as a
                // rule.
                joined.shrink_to_fit();
                Bytes::from(joined)
            }
        }
    }
}

/// What the body held, then the pipe's chunks, in one: the one non-empty
/// piece as it is (no copy), or all copied once into a buffer of their
/// whole length.
fn join(held: Bytes, chunks: Chunks) -> Bytes {
    let total = held.len() + chunks.iter().map(Bytes::len).sum::<usize>();
    let mut pieces = std::iter::once(held)
        .chain(chunks)
        .filter(|c| !c.is_empty());
    let Some(first) = pieces.next() else {
        return Bytes::new();
    };
    if first.len() == total {
        return first;
    }
    let mut joined = BytesMut::with_capacity(total);
    joined.extend_from_slice(&first);
    for piece in pieces {
        joined.extend_from_slice(&piece);
    }
    joined.freeze()
}

/// The whole body as bytes: a future, or [`wait`](Self::wait) for it.
/// Polled again after it returned its outcome, it panics, as a
/// [`ResponseFuture`](crate::ResponseFuture) does.
#[must_use = "the body is only read when awaited or waited for"]
pub struct CollectBytes {
    gather: Gather,
}

impl std::fmt::Debug for CollectBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectBytes")
            .field("body", &self.gather.body)
            .finish_non_exhaustive()
    }
}

impl CollectBytes {
    pub(crate) fn new(body: Body) -> CollectBytes {
        CollectBytes {
            gather: Gather::new(body),
        }
    }

    /// Blocks until the whole body has arrived — or fails at once with
    /// [`Error::WouldDeadlock`] if it has not and the calling thread runs
    /// the turns of the loop that must bring it (see [`Body`]); the body
    /// goes with the collector then, as a dropped one does.
    ///
    /// # Panics
    ///
    /// If a poll has already returned the outcome (as polling again would).
    pub fn wait(mut self) -> Result<Bytes, Error> {
        self.gather.wait()
    }
}

impl Future for CollectBytes {
    type Output = Result<Bytes, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.gather.poll(cx)
    }
}

/// The whole body as text, decoded from the charset its `Content-Type`
/// names (UTF-8 when it names none), invalid sequences replaced: a future,
/// or [`wait`](Self::wait) for it. Polled again after it returned its
/// outcome, it panics, as a [`ResponseFuture`](crate::ResponseFuture) does.
#[must_use = "the body is only read when awaited or waited for"]
pub struct CollectText {
    gather: Gather,
    encoding: &'static encoding_rs::Encoding,
}

impl std::fmt::Debug for CollectText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectText")
            .field("body", &self.gather.body)
            .field("encoding", &self.encoding.name())
            .finish_non_exhaustive()
    }
}

impl CollectText {
    pub(crate) fn new(body: Body, content_type: Option<&http::HeaderValue>) -> CollectText {
        let encoding = content_type
            .and_then(|value| charset(value.as_bytes()))
            .and_then(encoding_rs::Encoding::for_label)
            .unwrap_or(encoding_rs::UTF_8);
        CollectText {
            gather: Gather::new(body),
            encoding,
        }
    }

    fn decode(&self, bytes: Bytes) -> String {
        // Valid UTF-8 without a byte-order mark is taken as it is, usually
        // without a copy.
        if self.encoding == encoding_rs::UTF_8 && !bytes.starts_with(b"\xEF\xBB\xBF") {
            return match String::from_utf8(Vec::from(bytes)) {
                Ok(text) => text,
                Err(invalid) => self.lossy(invalid.as_bytes()),
            };
        }
        self.lossy(&bytes)
    }

    fn lossy(&self, bytes: &[u8]) -> String {
        let (text, _, _) = self.encoding.decode(bytes);
        text.into_owned()
    }

    /// Blocks until the whole body has arrived — or fails at once with
    /// [`Error::WouldDeadlock`] if it has not and the calling thread runs
    /// the turns of the loop that must bring it (see [`Body`]); the body
    /// goes with the collector then, as a dropped one does.
    ///
    /// # Panics
    ///
    /// If a poll has already returned the outcome (as polling again would).
    pub fn wait(mut self) -> Result<String, Error> {
        let bytes = self.gather.wait()?;
        Ok(self.decode(bytes))
    }
}

impl Future for CollectText {
    type Output = Result<String, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.gather.poll(cx) {
            Poll::Ready(Ok(bytes)) => Poll::Ready(Ok(self.decode(bytes))),
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The `charset` parameter of a `Content-Type` value, unquoted.
fn charset(content_type: &[u8]) -> Option<&[u8]> {
    content_type
        .split(|&b| b == b';')
        .skip(1)
        .find_map(|param| {
            let param = param.trim_ascii();
            let (name, value) = param.split_at(param.iter().position(|&b| b == b'=')?);
            name.trim_ascii()
                .eq_ignore_ascii_case(b"charset")
                .then(|| value[1..].trim_ascii())
                .map(|value| {
                    value
                        .strip_prefix(b"\"")
                        .and_then(|v| v.strip_suffix(b"\""))
                        .unwrap_or(value)
                })
        })
}

/// The whole body parsed as JSON: a future, or [`wait`](Self::wait) for it.
/// Polled again after it returned its outcome, it panics, as a
/// [`ResponseFuture`](crate::ResponseFuture) does.
#[cfg(feature = "json")]
#[must_use = "the body is only read when awaited or waited for"]
pub struct CollectJson<T> {
    bytes: CollectBytes,
    parsed: std::marker::PhantomData<fn() -> T>,
}

#[cfg(feature = "json")]
impl<T> std::fmt::Debug for CollectJson<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectJson")
            .field("body", &self.bytes.gather.body)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "json")]
impl<T: serde::de::DeserializeOwned> CollectJson<T> {
    pub(crate) fn new(body: Body) -> CollectJson<T> {
        CollectJson {
            bytes: CollectBytes::new(body),
            parsed: std::marker::PhantomData,
        }
    }

    /// Blocks until the whole body has arrived, then parses
    /// it — or fails at once with
    /// [`Error::WouldDeadlock`] if it has not and the calling thread runs
    /// the turns of the loop that must bring it (see [`Body`]); the body
    /// goes with the collector then, as a dropped one does.
    ///
    /// # Panics
    ///
    /// If a poll has already returned the outcome (as polling again would).
    pub fn wait(self) -> Result<T, Error> {
        parse_json(&self.bytes.wait()?)
    }
}

#[cfg(feature = "json")]
impl<T: serde::de::DeserializeOwned> Future for CollectJson<T> {
    type Output = Result<T, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.bytes).poll(cx) {
            Poll::Ready(Ok(bytes)) => Poll::Ready(parse_json(&bytes)),
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(feature = "json")]
fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(bytes).map_err(Error::Json)
}

#[cfg(test)]
mod tests {
    use super::charset;

    #[test]
    fn the_charset_parameter_is_found_in_any_form() {
        assert_eq!(
            charset(b"text/plain; charset=iso-8859-1"),
            Some(&b"iso-8859-1"[..])
        );
        assert_eq!(
            charset(b"text/plain;CHARSET=\"UTF-8\""),
            Some(&b"UTF-8"[..])
        );
        assert_eq!(
            charset(b"text/html; q=1; charset = latin1 "),
            Some(&b"latin1"[..])
        );
        assert_eq!(charset(b"text/plain"), None);
        assert_eq!(charset(b"text/plain; format=flowed"), None);
    }
}
