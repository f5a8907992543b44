//! [`EventListener`]: what an exchange reports as it goes.
//!
//! Every method has an empty default, so a listener implements only what it
//! wants. Methods are called on whichever thread did the work: resolution on
//! a resolver thread, connection and body events on the connection's loop
//! (its thread, or a caller blocked on an exchange there that drives the
//! loop its thread left idle: see
//! [`EventLoop`](crate::event_loop::EventLoop), "Who drives a loop"),
//! completion and failure on the thread that ended the exchange (its loop,
//! the wheel, or the caller's for a cancel) — or, if it ended while one of
//! its events was being told, on the thread telling it, once that event
//! returns (see [`EventListener`], "Order"). That makes them the place to
//! observe *where* things happen, by thread id.

use crate::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::ThreadId;

/// Identifies one connection and the loop that owns it for life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// Unique in the process (connections of clients that share an
    /// [`EventLoopGroup`](crate::event_loop::EventLoopGroup) never share an id).
    /// A `socks5://` connection whose proxy could not reach one of the
    /// origin's addresses connects to the proxy again, under the same id,
    /// to ask for the next: each such socket has its connect events.
    pub id: u64,
    /// Index of the owning loop in the client's [`EventLoopGroup`](crate::event_loop::EventLoopGroup).
    pub loop_index: usize,
    /// Thread id of the owning loop.
    pub loop_thread: ThreadId,
    /// The server's address.
    pub remote: SocketAddr,
}

/// Which request an event is about: an id unique in the process, the same
/// for every hop and attempt of one request, the id of the exchange the
/// event comes from (one attempt of it), and that exchange's method and URI
/// (without userinfo) — so that one client-wide listener can tell
/// concurrent requests apart, and the attempts of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    id: u64,
    attempt_id: u64,
    method: http::Method,
    uri: http::Uri,
}

impl RequestInfo {
    pub(crate) fn new(
        id: u64,
        attempt_id: u64,
        method: http::Method,
        uri: http::Uri,
    ) -> RequestInfo {
        RequestInfo {
            id,
            attempt_id,
            method,
            uri,
        }
    }

    /// The request's id: one per [`send`](crate::RequestBuilder::send),
    /// shared by its redirects, retries and hedged copies.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The id of the exchange the event comes from: one per attempt of the
    /// request — each redirect hop, each retry, each hedged copy, a request
    /// sent again without `Expect` after a `417` — unique in the process,
    /// and the same for every event of that exchange.
    ///
    /// A request the client sends again by itself, as no new exchange,
    /// keeps it: each repeat [`on_retry`](EventListener::on_retry) lists
    /// as no retry but the `417`'s — on a new connection after a pooled
    /// one closed before the answer or, over HTTP/1.1, answered `408
    /// Request Timeout`; over HTTP/2 after `REFUSED_STREAM`, or a
    /// `GOAWAY` that says the stream was not processed. Its events then
    /// start again with the new send: those of the connection it goes on
    /// (a new one's connect, TLS and protocol events; a pooled one's
    /// [`on_connection_pooled`](EventListener::on_connection_pooled)),
    /// then [`on_request_head`](EventListener::on_request_head) (told again for
    /// each send — on a new connection, or over HTTP/2 on a new stream,
    /// maybe of the same connection — before any byte of its answer), and
    /// those of the send given up stay told: the attempt's
    /// [interim heads](EventListener::on_interim_head) may repeat, of both
    /// sends — a `103` before the `408` or the `REFUSED_STREAM`, then the
    /// new send's. A listener that keeps an attempt's interim heads starts
    /// them afresh at each `on_request_head`.
    ///
    /// Hedged copies run side by side, so the events of several attempts of
    /// one request may come interleaved: this tells them apart, and
    /// [`Response::attempt_id`](crate::Response::attempt_id) names the
    /// attempt whose answer the caller got. The events of a request's
    /// policy ([`on_redirect`](EventListener::on_redirect),
    /// [`on_retry`](EventListener::on_retry)) carry the id of the attempt
    /// they follow: the one that answered the redirect, the one that
    /// failed; [`on_hedge`](EventListener::on_hedge) that of the copy sent.
    pub fn attempt_id(&self) -> u64 {
        self.attempt_id
    }

    /// The method of this hop (a redirect may change it).
    pub fn method(&self) -> &http::Method {
        &self.method
    }

    /// The URI of this hop, without userinfo.
    pub fn uri(&self) -> &http::Uri {
        &self.uri
    }
}

/// A request's head as the client sent it, for
/// [`EventListener::on_request_head`]: its method, target, version and
/// header fields, in the order they went — the client's own (`Host`,
/// `User-Agent`, the body's framing, `Authorization`, `Cookie`, …) among
/// them, and none it left out (over HTTP/2, the connection-specific
/// fields). Never the credentials of a proxy: a `Proxy-Authorization`
/// field is not shown (the client's, to an HTTP proxy that forwards the
/// request, or one the caller set), and no URL it shows has userinfo.
///
/// It borrows what the connection sends, as it is: reading it is the
/// listener's cost, and telling it costs a listener that does not read it
/// nothing.
#[derive(Clone, Copy)]
pub struct RequestHead<'a>(SentHead<'a>);

/// What a [`RequestHead`] is read from.
#[derive(Clone, Copy)]
enum SentHead<'a> {
    /// HTTP/1.1: the bytes written, from the request line to the empty
    /// line that ends the head (and maybe a body after it, never read).
    Http1(&'a [u8]),
    /// HTTP/2: the request given to the HTTP/2 encoder, which sends its
    /// method, URI and fields as HPACK.
    Http2(&'a http::Request<()>),
}

/// The field a [`RequestHead`] never shows.
const PROXY_AUTHORIZATION: &str = "proxy-authorization";

impl<'a> RequestHead<'a> {
    /// The head written in `bytes`, an HTTP/1.1 request head as the client
    /// encodes it: a request line, a line per field, the empty line —
    /// each ending CRLF — and maybe a body after it.
    pub(crate) fn http1(bytes: &'a [u8]) -> RequestHead<'a> {
        RequestHead(SentHead::Http1(bytes))
    }

    /// The head of `request`, as given to HTTP/2.
    pub(crate) fn http2(request: &'a http::Request<()>) -> RequestHead<'a> {
        RequestHead(SentHead::Http2(request))
    }

    /// HTTP/1.1's request line, and the rest from the first field on.
    fn http1_parts(bytes: &'a [u8]) -> (&'a [u8], &'a [u8]) {
        match bytes.windows(2).position(|pair| pair == b"\r\n") {
            Some(end) => (&bytes[..end], &bytes[end + 2..]),
            None => (bytes, &[]),
        }
    }

    /// HTTP/1.1's request line's method and target (the line is method,
    /// target and version, each after one space).
    fn request_line(bytes: &'a [u8]) -> [&'a str; 2] {
        let line = std::str::from_utf8(Self::http1_parts(bytes).0).unwrap_or("");
        let (method, rest) = line.split_once(' ').unwrap_or((line, ""));
        let (target, _version) = rest.rsplit_once(' ').unwrap_or((rest, ""));
        [method, target]
    }

    /// The method, as sent (`GET`).
    pub fn method(&self) -> &'a str {
        match self.0 {
            SentHead::Http1(bytes) => Self::request_line(bytes)[0],
            SentHead::Http2(request) => request.method().as_str(),
        }
    }

    /// The request-target, as sent: over HTTP/1.1 the path and query
    /// (`/search?q=1`), or, to an HTTP proxy that forwards the request,
    /// the whole URL without userinfo (`http://example.com/search?q=1`);
    /// over HTTP/2 the `:path`.
    pub fn target(&self) -> &'a str {
        match self.0 {
            SentHead::Http1(bytes) => Self::request_line(bytes)[1],
            SentHead::Http2(request) => match request.uri().path_and_query() {
                Some(target) if !target.as_str().is_empty() => target.as_str(),
                _ => "/",
            },
        }
    }

    /// The version it went with: `HTTP_11` (the client writes no other
    /// request line) or `HTTP_2`.
    pub fn version(&self) -> http::Version {
        match self.0 {
            SentHead::Http1(_) => http::Version::HTTP_11,
            SentHead::Http2(_) => http::Version::HTTP_2,
        }
    }

    /// HTTP/2's `:authority` (the host and port, without userinfo), which
    /// says there what `Host` says over HTTP/1.1; `None` over HTTP/1.1,
    /// whose `Host` is among the [`fields`](Self::fields).
    pub fn authority(&self) -> Option<&'a str> {
        match self.0 {
            SentHead::Http1(_) => None,
            SentHead::Http2(request) => request.uri().authority().map(|a| a.as_str()),
        }
    }

    /// The header fields, in the order they went, each name as written
    /// (HTTP/1.1: the client's own `Host`, `Content-Length` and
    /// `Transfer-Encoding` capitalized, the others in lower case; HTTP/2:
    /// all in lower case) with its value's bytes — but
    /// `Proxy-Authorization`.
    pub fn fields(&self) -> RequestFields<'a> {
        RequestFields(match self.0 {
            SentHead::Http1(bytes) => SentFields::Http1(Self::http1_parts(bytes).1),
            SentHead::Http2(request) => SentFields::Http2(request.headers().iter()),
        })
    }
}

impl std::fmt::Debug for RequestHead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fields: Vec<_> = self
            .fields()
            .map(|(name, value)| (name, String::from_utf8_lossy(value)))
            .collect();
        f.debug_struct("RequestHead")
            .field("method", &self.method())
            .field("target", &self.target())
            .field("version", &self.version())
            .field("authority", &self.authority())
            .field("fields", &fields)
            .finish()
    }
}

/// The header fields of a [`RequestHead`] ([`RequestHead::fields`]): each
/// name and its value's bytes.
pub struct RequestFields<'a>(SentFields<'a>);

/// What [`RequestFields`] reads.
enum SentFields<'a> {
    /// HTTP/1.1: the field lines left, each ending CRLF, then the empty
    /// line (and maybe a body, never read).
    Http1(&'a [u8]),
    Http2(http::header::Iter<'a, http::HeaderValue>),
}

impl<'a> Iterator for RequestFields<'a> {
    type Item = (&'a str, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (name, value) = match &mut self.0 {
                SentFields::Http1(rest) => {
                    let (line, after) = RequestHead::http1_parts(rest);
                    // The empty line: the head has ended.
                    if line.is_empty() {
                        *rest = &[];
                        return None;
                    }
                    *rest = after;
                    let colon = line.iter().position(|&b| b == b':').unwrap_or(line.len());
                    // A name is a token (ASCII); the client writes `name: value`.
                    let name = std::str::from_utf8(&line[..colon]).unwrap_or("");
                    let value = line.get(colon + 1..).unwrap_or(&[]).trim_ascii_start();
                    (name, value)
                }
                SentFields::Http2(fields) => {
                    let (name, value) = fields.next()?;
                    (name.as_str(), value.as_bytes())
                }
            };
            if !name.eq_ignore_ascii_case(PROXY_AUTHORIZATION) {
                return Some((name, value));
            }
        }
    }
}

impl std::fmt::Debug for RequestFields<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestFields").finish_non_exhaustive()
    }
}

/// A response's head as it came, for [`EventListener::on_response_head`]
/// (or an interim one, for [`EventListener::on_interim_head`]): its
/// version, status, reason phrase and headers.
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead<'a> {
    version: http::Version,
    status: http::StatusCode,
    /// HTTP/1.x: the reason phrase as sent, when it is not the status's
    /// canonical one.
    reason: Option<&'a [u8]>,
    headers: &'a http::HeaderMap,
}

impl<'a> ResponseHead<'a> {
    pub(crate) fn new(
        version: http::Version,
        status: http::StatusCode,
        reason: Option<&'a [u8]>,
        headers: &'a http::HeaderMap,
    ) -> ResponseHead<'a> {
        ResponseHead {
            version,
            status,
            reason,
            headers,
        }
    }

    /// The version of the status line (`HTTP_10`, `HTTP_11`), or `HTTP_2`.
    pub fn version(&self) -> http::Version {
        self.version
    }

    /// The status.
    pub fn status(&self) -> http::StatusCode {
        self.status
    }

    /// The reason phrase as the server sent it, byte for byte (it may hold
    /// bytes that are not UTF-8, obs-text), maybe empty; empty over HTTP/2,
    /// which has none. What [`ReasonPhrase`](crate::ReasonPhrase) holds, or
    /// else the canonical phrase.
    pub fn reason(&self) -> &'a [u8] {
        match (self.reason, self.version) {
            (Some(sent), _) => sent,
            (None, http::Version::HTTP_2) => b"",
            (None, _) => self.status.canonical_reason().unwrap_or("").as_bytes(),
        }
    }

    /// The header fields, as an [`http::HeaderMap`] holds them: each
    /// name's values together, in the order they came — so a name repeated
    /// with others between (`A: 1`, `B: 2`, `A: 3`) does not keep the
    /// lines' order, which the map does not record.
    pub fn headers(&self) -> &'a http::HeaderMap {
        self.headers
    }
}

/// Observes exchanges. All methods default to doing nothing; each is
/// given the [`RequestInfo`] of the request it is about.
///
/// ```
/// # let url = tickless_client::doc_support::serve_text("ok");
/// use std::sync::{Arc, Mutex};
/// use tickless_client::{EventListener, RequestInfo};
///
/// #[derive(Default)]
/// struct Statuses(Mutex<Vec<u16>>);
///
/// impl EventListener for Statuses {
///     fn on_status(&self, request: &RequestInfo, status: http::StatusCode) {
///         assert_eq!(request.uri().path(), "/");
///         self.0.lock().unwrap().push(status.as_u16());
///     }
/// }
///
/// let statuses = Arc::new(Statuses::default());
/// let client = tickless_client::Client::builder()
///     .listener(statuses.clone())
///     .build()?;
/// client.get(&url).send().wait()?;
/// assert_eq!(*statuses.0.lock().unwrap(), [200]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Order
///
/// Of one exchange (a hop, an attempt, a hedged copy), the events come in
/// the order the work is done — connect before the request's head before
/// request sent before status before headers before the response's head
/// before body parts, an interim head between the request's head and
/// status (a `100 Continue` before request sent: it lets the body go) —
/// and then exactly one of
/// [`on_completed`](Self::on_completed) and [`on_failed`](Self::on_failed),
/// after which nothing of its progress is told. Its request's policy
/// tells of the exchange that follows ([`on_redirect`](Self::on_redirect),
/// [`on_retry`](Self::on_retry)) as soon as it decides on it, which may be
/// before the end of the one it leaves: a redirect whose body is still
/// coming is told, then that body is cancelled (`on_failed`, the request
/// cancelled). The order of one exchange's own events holds when the exchange is ended on another thread than the one telling
/// its events: a request timeout on the wheel, or a cancel, while its loop
/// is in `on_status`. The exchange ends at once (its connection is
/// aborted, its timers stop), but `on_failed` is told — and after it the
/// caller, through the future or the body — once `on_status` returns, on
/// that thread; `on_headers` and the body parts are not told. So a slow
/// method delays, by as long as it runs, the failure of the exchange it
/// was told of.
///
/// A method that panics ends its exchange, if it has not ended yet, with
/// [`Error::Io`] ("an event listener panicked"), and closes the connection
/// the exchange was using; the thread that called it (a loop, the wheel, a
/// resolver) goes on. That [`on_failed`](Self::on_failed) is the last call
/// about the exchange (no `on_headers` after a panic in `on_status`, say).
/// A panic in [`on_completed`](Self::on_completed) or
/// [`on_failed`](Self::on_failed) changes nothing: the exchange has ended.
/// A request's own [listener](crate::RequestBuilder::listener) is told
/// every event the client's is, after it, also one the client's panicked
/// on (and the other way round).
///
/// # Blocking, and calling back into the client
///
/// A method runs on a thread the client needs for other work: a loop's
/// (its own thread, or a caller's that is driving the loop for a blocking
/// wait — see [`EventLoop`](crate::event_loop::EventLoop), "Who drives a
/// loop"), the wheel's, or a resolver's — or, for the end of an exchange
/// whose response is to be decoded, the caller's thread that read its body to
/// its end or let it go (see [`on_completed`](Self::on_completed)). While
/// it runs, that thread does nothing else: a loop serves none of its connections, and the wheel
/// (the default timer mode) fires no timeout of the client.
///
/// From a method, sending a request, cancelling or dropping any request's
/// future, [`Client::close`](crate::Client::close) and dropping the last
/// `Client` return at once, and do what they do anywhere else.
///
/// Blocking on the client there is another matter. A
/// [`ResponseFuture::wait`](crate::ResponseFuture::wait) or a blocking read
/// of a [`Body`](crate::Body), on a loop's thread or a driving caller's,
/// for what that very loop must bring — the exchange's connection is on
/// it, or its request was sent to a connection there, or the client has
/// that one loop — could only wait: the loop serves nothing while its
/// thread waits. So such a wait fails at once with
/// [`Error::WouldDeadlock`], rather than wait for a timeout of the request
/// (or forever, with none). Poll the future, or read the body
/// asynchronously, from a task (the loop wakes it when the answer comes),
/// or hand the wait to a thread of your own (a channel, a spawned task)
/// and return. What works there:
///
/// * a wait for an exchange of another loop — another client's, or of the
///   same client's group: with several loops, **a new connection opened
///   from a loop's thread never goes on that loop** (see
///   [`EventLoopGroup`](crate::event_loop::EventLoopGroup)), so a request
///   sent from a method and waited on there is answered, unless it takes
///   an idle pooled connection, or a stream of an HTTP/2 connection, on
///   that same loop (then it is refused);
/// * a wait for what has come already — a head, the bytes of a body
///   that have arrived, its end — returns it;
/// * anything on a caller's thread outside a method: its blocking wait
///   drives the loop itself.
///
/// Not refused, because the client cannot tell: with several loops, a
/// request that waits for a connection (the host's limit reached, or one
/// being opened for another request) may get it from the loop whose
/// thread waits, and a `block_on` of the caller's own, which only polls,
/// parks the loop's thread all the same — either ends only by a timeout.
/// On the wheel's thread (a timeout's `on_failed`, in the default timer
/// mode) a wait is answered, and fires the wheel's timeouts as they fall
/// due meanwhile, about as late as the wheel would — the awaited
/// request's own among them; those due with the one being told wait for
/// it to return, and a `block_on` of the caller's own there, which only
/// polls, holds them all. The same holds for a [`Waker`](std::task::Waker)
/// that polls its task inline when woken: the task runs on the loop's
/// thread, where polling is fine and blocking is not.
#[allow(unused_variables)]
pub trait EventListener: Send + Sync + 'static {
    /// The host name resolved to `addrs`.
    fn on_resolved(&self, request: &RequestInfo, host: &str, addrs: &[SocketAddr]) {}
    /// A TCP connect to `remote` is starting.
    fn on_connect_attempt(&self, request: &RequestInfo, remote: SocketAddr) {}
    /// A TCP connect succeeded; the connection is pinned to its loop.
    fn on_connect_success(&self, request: &RequestInfo, connection: &ConnectionInfo) {}
    /// A TCP connect to `remote` failed, or took longer than the
    /// [connect timeout](crate::ClientBuilder::connect_timeout) (`error`'s
    /// kind is then `TimedOut`).
    fn on_connect_failure(
        &self,
        request: &RequestInfo,
        remote: SocketAddr,
        error: &std::io::Error,
    ) {
    }
    /// A TLS handshake is starting on a freshly connected socket.
    fn on_tls_handshake_attempt(&self, request: &RequestInfo, connection: &ConnectionInfo) {}
    /// The TLS handshake succeeded; `alpn_protocol` is the protocol the
    /// server chose (`http/1.1`), or `None` if it does not do ALPN.
    fn on_tls_handshake_success(
        &self,
        request: &RequestInfo,
        connection: &ConnectionInfo,
        alpn_protocol: Option<&[u8]>,
    ) {
    }
    /// The TLS handshake failed with `error` (usually [`Error::Tls`], or
    /// [`Error::Connect`] if the socket failed or closed, or
    /// [`Error::HandshakeTimeout`], or [`Error::Http2NotNegotiated`] if the
    /// server refused an [`http2_only`](crate::ClientBuilder::http2_only)
    /// client's offer of `h2` alone). A handshake ended by the request
    /// timeout or a cancel reports no failure here, only `on_failed`.
    fn on_tls_handshake_failure(
        &self,
        request: &RequestInfo,
        connection: &ConnectionInfo,
        error: &Error,
    ) {
    }
    /// An idle pooled connection was taken for this exchange.
    fn on_connection_pooled(&self, request: &RequestInfo, connection: &ConnectionInfo) {}
    /// A new connection settled its protocol for life (`HTTP/2` by ALPN or
    /// prior knowledge, else `HTTP/1.1`); told to the exchange it opened for.
    fn on_protocol_negotiated(
        &self,
        request: &RequestInfo,
        connection: &ConnectionInfo,
        version: http::Version,
    ) {
    }
    /// The exchange's HTTP/2 stream opened, with this stream id.
    fn on_stream_opened(&self, request: &RequestInfo, connection: &ConnectionInfo, stream_id: u32) {
    }
    /// The server sent `GOAWAY` on an HTTP/2 connection, which takes no new
    /// stream from then on. Told to the client's listener only, and without
    /// a [`RequestInfo`]: it is a connection's event, no request's. A panic
    /// here is let go: it ends no exchange.
    fn on_goaway(&self, connection: &ConnectionInfo, reason: crate::error::Http2Reason) {}
    /// The connection went back to the pool, before the exchange's future is woken.
    fn on_connection_offered(&self, request: &RequestInfo, connection: &ConnectionInfo) {}
    /// The request's head went to the connection, as [`RequestHead`] shows
    /// it: over HTTP/1.1 once it is written whole, before its body; over
    /// HTTP/2 as its `HEADERS` are given to the connection to send, just
    /// before its stream opens (then
    /// [`on_stream_opened`](Self::on_stream_opened)). Told again for each
    /// connection it goes on (a request sent again on a new one). An
    /// HTTP/1.1 head the server answered before it was all written (and
    /// the rest of which is not sent) is not told.
    ///
    /// Over HTTP/2, a head told may yet not go: if the request ends while
    /// this is told (cancelled from here, or its timeout), nothing of it
    /// is sent; if the connection turns it down as it is given (a `GOAWAY`
    /// just read, or the connection failing), no stream opens there, and
    /// the request goes on another connection, where its head is told
    /// again. Only [`on_stream_opened`](Self::on_stream_opened) says the
    /// head went.
    fn on_request_head(
        &self,
        request: &RequestInfo,
        connection: &ConnectionInfo,
        head: &RequestHead<'_>,
    ) {
    }
    /// The whole request was written.
    fn on_request_sent(&self, request: &RequestInfo, connection: &ConnectionInfo) {}
    /// The status line arrived.
    fn on_status(&self, request: &RequestInfo, status: http::StatusCode) {}
    /// The response headers arrived.
    fn on_headers(&self, request: &RequestInfo, headers: &http::HeaderMap) {}
    /// The response's head, whole — its version, status, reason phrase
    /// and headers — told after [`on_headers`](Self::on_headers). Once
    /// per response: an interim head before it is told to
    /// [`on_interim_head`](Self::on_interim_head) instead.
    fn on_response_head(&self, request: &RequestInfo, head: &ResponseHead<'_>) {}
    /// An interim (1xx) response's head — `100 Continue` (the answer to
    /// `Expect: 100-continue`), `102 Processing`, `103 Early Hints` — as
    /// it came, before the final response's
    /// [`on_status`](Self::on_status): any number of them, most often none.
    /// No status, headers or body of the final response are in it; the
    /// final head is [`on_response_head`](Self::on_response_head)'s.
    fn on_interim_head(&self, request: &RequestInfo, head: &ResponseHead<'_>) {}
    /// `len` bytes of body arrived.
    fn on_body_part(&self, request: &RequestInfo, len: usize) {}
    /// The exchange ended with a response. For a response to be decoded
    /// (a `Content-Encoding` on a body, with decompression on: not an
    /// answer to HEAD, nor a 1xx, 204, 206 or 304), told once the body has
    /// also been checked for its coding — its reader decoded it to its
    /// end, let it go, or it is not decoded after all (a coding this build
    /// does not know) — on the thread that did that, if the body had all
    /// come before: a body that does not decode is told failed instead
    /// (see [`on_failed`](Self::on_failed)).
    fn on_completed(&self, request: &RequestInfo, status: http::StatusCode) {}
    /// The exchange ended with `error`. One whose body the client let go
    /// unread before it had come (dropped, a redirect's) ends as
    /// [`Error::Cancelled`]; one the client failed for its coding (its
    /// body as its reader decoded it: [`Error::Decode`],
    /// [`Error::BodyTooLarge`]; or [`Error::TooManyCodings`]), with that
    /// error, the caller's — also when all of its body had come before its
    /// reader failed it (on the reader's thread, then). Either holds when
    /// a timeout, a cancel, the client's close or a failure of the
    /// connection comes after the reader's end but before the connection
    /// stopped reading the body: the reader's end came first, and is the
    /// one told.
    fn on_failed(&self, request: &RequestInfo, error: &Error) {}
    /// A redirect is followed: `from` answered `status`, and the request
    /// goes on to `to` (a new exchange, whose events follow), both without
    /// userinfo (credentials in a `Location` become a header). Called on the
    /// thread that waits for or polls the response. A `Location` refused
    /// before it becomes an exchange (its URL cannot be a request) is not
    /// followed, nor told here: the caller has the error.
    ///
    /// `request` is the hop's attempt that answered `status`:
    /// [`request.attempt_id()`](RequestInfo::attempt_id) is that
    /// attempt's (of a hedged hop, the copy or first attempt whose head was
    /// taken), its method and URI the hop's; the new hop's events carry a
    /// new id.
    fn on_redirect(
        &self,
        request: &RequestInfo,
        status: http::StatusCode,
        from: &http::Uri,
        to: &http::Uri,
    ) {
    }
    /// Attempt `attempt` (2 for the first retry) starts after `delay`,
    /// because the one before failed with `reason` (a status retried is an
    /// [`Error::Status`]). Called on the thread that waits for or polls the
    /// response.
    ///
    /// `request` is the attempt whose failure is `reason`:
    /// [`request.attempt_id()`](RequestInfo::attempt_id) is that attempt's
    /// id; `attempt` counts the one to come, whose events carry a new id.
    ///
    /// Told of a [retry policy](crate::retry::Policy)'s retries only. The
    /// client also sends a request again by itself, at once, in cases that
    /// are no retries — no attempt counted, no
    /// [retry budget](crate::ClientBuilder::retry_budget) spent, nothing
    /// told here:
    ///
    /// * a `417 Expectation Failed` to `Expect: 100-continue` (HTTP/1.1),
    ///   repeated once without it (see
    ///   [`expect_continue_timeout`](crate::ClientBuilder::expect_continue_timeout)):
    ///   the 417's exchange is told as any other ([`on_status`](Self::on_status)
    ///   with 417, then its end), and the repeat's events follow as a new
    ///   exchange's — possibly before the 417's end, as a redirect's do;
    /// * a request on a pooled connection that the server closed before
    ///   answering — over HTTP/1.1 before any byte of a response, over
    ///   HTTP/2 before the final head, interim (1xx) heads come or not —
    ///   or, over HTTP/1.1, answered `408 Request Timeout` on (it timed
    ///   the idle connection out; interim heads may come before it), sent
    ///   again once on a new connection if it may go twice (idempotent,
    ///   its body in memory): the 408 is not told, and the exchange's
    ///   events go on with the new connection's;
    /// * over HTTP/2, a request the server refused or never processed
    ///   (`REFUSED_STREAM`, above a `GOAWAY`'s last stream id) before its
    ///   final head, interim heads come or not, sent again once, on any
    ///   connection that takes it (after `REFUSED_STREAM`, maybe the same).
    ///
    /// The interim heads told of a send given up are no part of the
    /// answer: the new send's events start again — with those of the
    /// connection it goes on, then [`on_request_head`](Self::on_request_head)
    /// — under the same [attempt id](RequestInfo::attempt_id).
    fn on_retry(
        &self,
        request: &RequestInfo,
        attempt: u32,
        delay: std::time::Duration,
        reason: &Error,
    ) {
    }
    /// Hedged copy number `copy` (from 1) of the request is sent, the
    /// attempts before it having not answered. Called on the thread that
    /// waits for or polls the response.
    ///
    /// `request` is the copy: [`request.attempt_id()`](RequestInfo::attempt_id)
    /// is the id its own events carry (and
    /// [`Response::attempt_id`](crate::Response::attempt_id), if it
    /// answers), not that of the attempts it backs up.
    fn on_hedge(&self, request: &RequestInfo, copy: u32) {}
}

/// The listener that listens to nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopListener;

impl EventListener for NoopListener {}

/// The listener of a client given none: one [`NoopListener`] for the
/// process, so that an exchange can tell it has no listener ([`listens`]).
fn nobody() -> &'static Arc<dyn EventListener> {
    static NOBODY: std::sync::OnceLock<Arc<dyn EventListener>> = std::sync::OnceLock::new();
    NOBODY.get_or_init(|| Arc::new(NoopListener))
}

/// The listener of a client given none (see [`listens`]).
pub(crate) fn nobody_listening() -> Arc<dyn EventListener> {
    nobody().clone()
}

/// Whether `listener` is anyone's: false for the client's listener when
/// it was given none ([`nobody_listening`]) and its request none either.
/// An event that costs something to tell besides the call — the HTTP/1.1
/// request head, taken out of its exchange's payload and put back — is
/// not told to nobody, so that a client without a listener pays nothing
/// for it.
pub(crate) fn listens(listener: &Arc<dyn EventListener>) -> bool {
    !Arc::ptr_eq(listener, nobody())
}

/// Tells two listeners (the client's and the request's) the same thing.
pub(crate) struct Both(pub Arc<dyn EventListener>, pub Arc<dyn EventListener>);

/// Tells `first`, then `second` — also if `first` panics, whose panic goes
/// on up once `second` has been told (to the exchange's guard, which
/// catches it): a listener that panics keeps no event from the other, not
/// even the end of the exchange, which its panic cannot change.
fn tell_both(first: impl FnOnce(), second: impl FnOnce()) {
    let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(first));
    second();
    if let Err(panic) = first {
        std::panic::resume_unwind(panic);
    }
}

/// Calls `$forward!` with the list of every method of [`EventListener`],
/// so that the types that pass every call on ([`Both`] here, the guard of
/// an exchange's listener in `exchange`) are written once, from one list.
/// The list has two parts: `progress`, what the code running an exchange
/// tells as it goes (never after its end), and `ending`, its end and what
/// its request's policy tells after it.
macro_rules! for_each_listener_method {
    ($forward:ident) => {
        $forward! {
            progress {
                on_resolved(host: &str, addrs: &[std::net::SocketAddr]);
                on_connect_attempt(remote: std::net::SocketAddr);
                on_connect_success(connection: &$crate::events::ConnectionInfo);
                on_connect_failure(remote: std::net::SocketAddr, error: &std::io::Error);
                on_tls_handshake_attempt(connection: &$crate::events::ConnectionInfo);
                on_tls_handshake_success(connection: &$crate::events::ConnectionInfo, alpn_protocol: Option<&[u8]>);
                on_tls_handshake_failure(connection: &$crate::events::ConnectionInfo, error: &$crate::error::Error);
                on_connection_pooled(connection: &$crate::events::ConnectionInfo);
                on_protocol_negotiated(connection: &$crate::events::ConnectionInfo, version: http::Version);
                on_stream_opened(connection: &$crate::events::ConnectionInfo, stream_id: u32);
                on_connection_offered(connection: &$crate::events::ConnectionInfo);
                on_request_head(connection: &$crate::events::ConnectionInfo, head: &$crate::events::RequestHead<'_>);
                on_request_sent(connection: &$crate::events::ConnectionInfo);
                on_status(status: http::StatusCode);
                on_headers(headers: &http::HeaderMap);
                on_response_head(head: &$crate::events::ResponseHead<'_>);
                on_interim_head(head: &$crate::events::ResponseHead<'_>);
                on_body_part(len: usize);
            }
            ending {
                on_completed(status: http::StatusCode);
                on_failed(error: &$crate::error::Error);
                on_redirect(status: http::StatusCode, from: &http::Uri, to: &http::Uri);
                on_retry(attempt: u32, delay: std::time::Duration, reason: &$crate::error::Error);
                on_hedge(copy: u32);
            }
        }
    };
}
pub(crate) use for_each_listener_method;

macro_rules! both {
    (
        progress { $($progress:ident($($parg:ident: $pty:ty),*);)* }
        ending { $($ending:ident($($earg:ident: $ety:ty),*);)* }
    ) => {
        impl EventListener for Both {
            $(fn $progress(&self, request: &RequestInfo, $($parg: $pty),*) {
                tell_both(
                    || self.0.$progress(request, $($parg),*),
                    || self.1.$progress(request, $($parg),*),
                );
            })*
            $(fn $ending(&self, request: &RequestInfo, $($earg: $ety),*) {
                tell_both(
                    || self.0.$ending(request, $($earg),*),
                    || self.1.$ending(request, $($earg),*),
                );
            })*

            fn on_goaway(&self, connection: &ConnectionInfo, reason: crate::error::Http2Reason) {
                tell_both(
                    || self.0.on_goaway(connection, reason),
                    || self.1.on_goaway(connection, reason),
                );
            }
        }
    };
}

for_each_listener_method!(both);
