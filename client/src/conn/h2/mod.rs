//! HTTP/2 on an open connection, through the `h2` crate (framing, HPACK,
//! flow control, stream states), driven on the connection's own loop.
//!
//! # The poller
//!
//! There is no async runtime: the connection is a
//! [`Source`](crate::event_loop::Source) of its loop
//! like any other, and its futures — the `h2` connection, the streams'
//! responses, bodies and send capacity — are polled by [`Conn::drive_h2`]
//! whenever something may have moved:
//!
//! * readiness of its socket (the transport is seen through
//!   [`AsyncIo`], which keeps no waker — an
//!   edge-triggered socket signals again after a `WouldBlock` — and skips
//!   the system call while the socket has not signalled since);
//! * a wake-up of one of its futures: each stream is polled with a waker of
//!   its own and the `h2` connection with another ([`wake`]), which mark
//!   what was woken and, unless the connection is being driven right then,
//!   wake its [`SourceWaker`], which posts the connection's readiness to its
//!   loop — `h2`'s own wake-ups (a window update for a stream waiting to
//!   send), an upload's source that has data, a body's pipe that has room
//!   again or whose reader has gone;
//! * a new stream, a timeout or a cancel that aborts one.
//!
//! Only the loop's thread polls; wakers only mark and post. Many wake-ups
//! before the loop gets to it cost one turn, and a drive polls the streams
//! that were woken (and the new ones), not every stream of the connection.
//!
//! # Streams
//!
//! Each exchange is one stream. Requests beyond what the server allows at
//! once (`SETTINGS_MAX_CONCURRENT_STREAMS`, or the client's own
//! [limit](crate::ClientBuilder::http2_max_concurrent_streams)) wait here in
//! order; until the server's SETTINGS come, a connection opens 100 at
//! most (the least RFC 9113 §6.5.2 has servers allow), not the unbounded
//! number the protocol allows before them, which a server past its limit
//! would refuse. The connection publishes how many streams it has taken
//! and may take ([`StreamLoad`]), from which the dispatcher picks the connection of
//! an origin with a free stream, or opens another
//! ([`http2_max_connections_per_origin`](crate::ClientBuilder::http2_max_connections_per_origin)).
//! A server that lowers its limit below the streams open, or to 0 (by
//! SETTINGS, with no `GOAWAY`), leaves the requests waiting here no room
//! until more streams end than it said: they go to another connection of
//! the origin if the dispatcher has a place for them, and wait here
//! otherwise ([`Conn::move_waiting_off`]). A limit merely reached keeps
//! them: a stream's end frees room.
//!
//! A stream's timeouts are its exchange's — on the wheel, or on this
//! loop's heap in event-loop mode, moved here when the stream is attached —
//! and an expiry or a cancel aborts that stream alone with
//! `RST_STREAM(CANCEL)`; the connection and its other streams go on. The
//! read timeout measures the stream's own silence (each DATA frame is a
//! read) from the request's end or the response's head, whichever comes
//! first, and pauses while its body's pipe is full. A request waits here,
//! not inside `h2`, until the server's limit lets its stream open: there
//! no timer but its request timeout runs.
//!
//! Response bodies go through the exchange's bounded pipe; the stream's
//! flow-control window is released as bytes enter the pipe, and no more is
//! polled while the pipe is full, so a stream holds at most its pipe's
//! window plus its HTTP/2 window
//! ([`http2_initial_stream_window_size`](crate::ClientBuilder::http2_initial_stream_window_size)).
//! A body dropped by its reader cancels the exchange and resets the
//! stream with `CANCEL` — unless its end has come (the rest, or its
//! trailers, waiting in `h2`'s buffer, are then discarded): the exchange
//! has completed, and the stream, its answer ended, is not reset for it.
//! A response that has no body whatever its head says (an answer to HEAD,
//! a 204, a 304) has none here either: DATA sent all the same is dropped,
//! and the stream's end completes it, even one `h2` reports as an error
//! (a reset of its own, which it counts towards ending the connection:
//! before it would, the connection retires, see [`Http2::taken_resets`]).
//! Request bodies are sent as the server's window allows: a chunk waits for
//! capacity before the next is taken from its source, so a server that stops
//! reading stops the upload's pump too — and, if no window comes for the
//! [write timeout](crate::ClientBuilder::write_timeout) before the
//! response's head, fails the stream ([`WriteStall`]).
//!
//! A 2xx response that comes whole before the request body is all sent
//! (RFC 9113 §8.1 lets a server answer before it has read the request)
//! does not stop the upload: the stream stays, its exchange's end held until the
//! upload's — a stream that left then would have `h2` reset it with
//! `CANCEL`, and the server would get none of the rest. The server stops
//! the upload with `RST_STREAM(NO_ERROR)` (any reset, or the connection's
//! end, does as well): the answer, whole, stands. Meanwhile nothing is
//! left to read, so the read timeout is off; a server that takes no more
//! of the body for the write timeout has the upload stopped with `CANCEL`,
//! its answer standing as for a reset, and so has a reader that drops the
//! body (nobody waits for the upload any more), and so has the request
//! timeout (it bounds the server, which has answered: the exchange
//! completes with that answer, [`Exchange::hold_answer`]). A cancel, the
//! client's closing abort the stream with `CANCEL` as any other, and the
//! upload's own failure fails it ([`Recv::Ended`]). A
//! refusal (any final status but 2xx) come whole stops the upload at once,
//! its stream reset with `CANCEL` and the answer standing, as over
//! HTTP/1.1: the server has said it does not want the rest (and stopping
//! before the answer is whole would lose the answer's body with it).
//!
//! # Failures
//!
//! * `GOAWAY`: the connection takes no new stream and leaves the pool;
//!   streams the server says it never processed (above its last stream id,
//!   exactly: see [`Stream::may_go_again`]) go again on another connection
//!   whatever their method, as do the requests still waiting here — once:
//!   a request the server's departure has sent elsewhere already fails
//!   with the next (a server that sends `GOAWAY` as soon as a connection
//!   opens would otherwise have it open one connection after another);
//!   those at or below it finish, or fail with [`Error::Http2`] naming the
//!   `GOAWAY`'s code if the connection ends under them. With streams left,
//!   a PING follows the `GOAWAY` ([`Http2::probe_departure`]): a server
//!   that will answer none of them (hypercorn) takes it as an error and
//!   closes at once, and they end as on any connection closed under them
//!   (below), rather than when its idle timeout closes it.
//! * The connection's end (an error, or the server closing): its streams
//!   fail, but one whose response had come whole — the rest of its body
//!   in `h2`'s buffer behind a full pipe, or its upload still going
//!   ([`Recv::Ended`]) — completes; the requests waiting here go
//!   elsewhere, once, as for a `GOAWAY`. A keep-alive PING with no answer
//!   fails the streams (but those answered whole, as above) and sends the
//!   waiting requests elsewhere.
//!   A stream with no answer yet on a connection that had served others
//!   (its server may have closed it as idle as the request came) goes
//!   again on a new connection, once, if it may go twice — idempotent,
//!   its body in memory — as a reused HTTP/1.1 connection's request does
//!   ([`Stream::may_go_again_after_close`]).
//! * `RST_STREAM(REFUSED_STREAM)` before any answer: the request goes again,
//!   once.
//! * A request the server never processed (refused, or above a `GOAWAY`'s
//!   last stream id) or never sent that cannot go again — its body is
//!   streamed, or it went once already — fails marked so
//!   ([`Error::is_unprocessed`]): the caller may send it again, whatever
//!   its method, and a retry policy does when its body is in memory.
//! * A reset while the request body is being sent stops the upload (its
//!   source is dropped), and the response side says how the stream ended:
//!   a server may answer before the body is all sent and then reset the
//!   stream with `NO_ERROR` (RFC 9113 §8.1) — that answer, come whole, is
//!   the response, even if the upload's source ends in the very pass that
//!   reads the reset, or never ends at all.
//! * Any other reset or connection error fails the stream with
//!   [`Error::Http2`] naming the error code, or [`Error::Io`].

mod gather;
mod table;
#[cfg(test)]
mod tests;
mod wake;

use super::upload::{Declared, Pulled, Upload};
use super::write_stall::WriteStall;
use super::{Conn, SharedConn, State, StreamLoad, H2_TIMER};
use crate::config::MAX_HTTP2_WINDOW;
use crate::error::{Error, Http2Initiator, Http2Reason};
use crate::event_loop::Readiness;
use crate::event_loop::{LoopContext, SourceWaker};
use crate::exchange::{
    deadline_after, declared_body_length, has_no_body, ConnSlot, Exchange, Head, Pipe, Pushed,
    RequestBody, Waiter,
};
use crate::h1::DecodeError;
use crate::net::{AsyncIo, IoReadiness, Transport};
use bytes::Bytes;
use gather::Gathered;
use h2::client::{Connection, ResponseFuture, SendRequest};
use h2::{RecvStream, SendStream};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use table::StreamTable;
use wake::{Ready, CONNECTION};

/// Passes of one drive at most, before the loop's other work.
const MAX_PASSES: usize = 8;

/// Bytes a pass reads, at most (the turn's budget shared by its passes,
/// which go on while one spends its share): what `h2` decodes in one is
/// buffered, a frame an entry, until the pass's streams take it — and
/// `h2`'s buffer keeps the room it once needed. A server sending 1-byte
/// DATA frames would have a whole turn's 256 KiB decoded at once, some
/// 26 000 entries (16 MiB held in `tests/streamed_body_memory.rs` with a
/// turn's budget per pass, 1.2 MiB with a pass's).
const PASS_READ_BUDGET: usize = super::READ_BUDGET / MAX_PASSES;

/// How often requests held on a connection by a lowered stream limit, with
/// no other place for them, look again (see `Conn::move_waiting_off`):
/// another connection of the origin frees a stream without telling this
/// one.
const HELD_RECHECK: Duration = Duration::from_millis(10);

/// The largest stream id (31 bits); a client's are the odd ones up to it.
const LAST_STREAM_ID: u32 = (1 << 31) - 1;

/// Streams a connection opens at most before the server's SETTINGS say
/// how many it takes: RFC 9113 §6.5.2 recommends that a server allow no
/// fewer, and Go's and hyper's clients assume as many. (`h2`'s own default
/// is no limit: a burst at a connection's start, sent before the server's
/// SETTINGS come, would have the streams past the server's limit refused,
/// and a request whose body is streamed cannot go again.)
const STREAMS_BEFORE_SETTINGS: usize = 100;

/// Streams `h2` resets for the server's protocol errors over a connection's
/// life, at most, before it ends the connection with
/// `GOAWAY(ENHANCE_YOUR_CALM)`, every stream on it failing
/// (`max_local_error_reset_streams`, 1024 by default; never counted down).
/// Kept: it bounds the resets a hostile server has the client queue
/// (RUSTSEC-2024-0003), with frames on streams long closed for instance.
const LOCAL_RESETS_MAX: usize = 1024;

/// Resets of `h2`'s that the client took as answers (see
/// [`Stream::end_bodiless`]), with the streams open that may add one each,
/// past which a connection retires ([`Http2::taken_resets`]): the rest of
/// [`LOCAL_RESETS_MAX`] is left for the server's errors that fail streams.
const TAKEN_RESETS_MAX: usize = LOCAL_RESETS_MAX * 3 / 4;

type Handshake = Pin<
    Box<
        dyn Future<Output = Result<(SendRequest<Bytes>, Connection<AsyncIo, Bytes>), h2::Error>>
            + Send,
    >,
>;

/// The HTTP/2 side of a connection. See the [module documentation](self).
pub(super) struct Http2 {
    phase: Phase,
    streams: StreamTable,
    /// Requests waiting for a stream, oldest first.
    queue: VecDeque<Arc<Exchange>>,
    /// Streams aborted from outside whose reset has not been given to `h2`
    /// yet: all go at the next drive, which the abort asks for after the
    /// loop's other work (see [`Conn::abort_h2`]). Held, not dropped: a
    /// dropped stream would be reset by `h2` at once, and wake the
    /// connection to write it.
    resets: Vec<Stream>,
    /// Which streams (or the connection) were woken.
    ready: Arc<Ready>,
    /// The connection's own waker (marks [`CONNECTION`]).
    conn_waker: Waker,
    /// The streams' wakers by key, each made once: a stream gets the one of
    /// its key. (A waker kept from the key's last stream may wake the new
    /// one: a spare poll, no harm.)
    wakers: Vec<Waker>,
    /// The keys of the streams a pass polls, kept for its room.
    keys: Vec<usize>,
    /// What the socket's readiness events said (see `AsyncIo`).
    io_ready: Arc<IoReadiness>,
    /// In the pool's shared list: requests to its origin come here.
    shared: bool,
    /// Its streams taken, for the dispatcher's choice of connection.
    load: Arc<StreamLoad>,
    /// The server sent `GOAWAY`: no new stream.
    going_away: bool,
    /// The error code of the server's `GOAWAY`, if it had one: what a
    /// stream it processed and that fails afterwards reports.
    goaway_error: Option<Http2Reason>,
    /// No stream since then (for the idle timeout).
    idle_since: Option<Instant>,
    /// Idle, and the pool has been asked whether a request waiting for
    /// the total limit wants its permit ([`Conn::give_permit_if_wanted`]):
    /// once per idle spell.
    idle_told: bool,
    /// A stream has ended on it: the streams opened from now on are on a
    /// reused connection (see [`Stream::may_go_again_after_close`]).
    served: bool,
    /// Streams `h2` reset for the server's error that the client took as
    /// answers all the same (a 304 declaring a length, ended by an empty
    /// DATA frame: see [`Stream::end_bodiless`]). `h2` counts them towards
    /// [`LOCAL_RESETS_MAX`]: before they and the open streams reach
    /// [`TAKEN_RESETS_MAX`], the connection retires, as one past its time
    /// to live does, rather than have `h2` end it under its streams.
    taken_resets: usize,
    /// The earliest time the upload of a stream answered whole may have
    /// waited on the server's window for its write timeout
    /// ([`Stream::upload_deadline`]): the connection's timer wakes its
    /// sending streams then, each of which looks at its own. (One that has
    /// left, or whose window came meanwhile, costs a spare wake-up.)
    upload_deadline: Option<Instant>,
    /// A keep-alive PING is out since then.
    ping_sent: Option<Instant>,
    /// The server's departure has been probed (see
    /// [`Http2::probe_departure`]): once a connection.
    probed: bool,
    last_ping: Instant,
}

// The connection is boxed whole (`State::H2`): no gain in boxing its phase too.
#[allow(clippy::large_enum_variant)]
enum Phase {
    Handshaking(Handshake),
    Open {
        send: SendRequest<Bytes>,
        conn: Connection<AsyncIo, Bytes>,
        ping: Option<h2::PingPong>,
    },
    Ended,
}

/// One exchange on the connection.
struct Stream {
    exchange: Arc<Exchange>,
    /// What it is polled with: marks it in the connection's [`Ready`].
    waker: Waker,
    send: SendStream<Bytes>,
    out: Outgoing,
    recv: Recv,
    /// The body's pipe was full: what comes is gathered, its window not
    /// given back, until the pipe has room.
    paused: bool,
    /// Body bytes taken from `h2` and not yet in the pipe (see [`Gathered`]).
    gathered: Gathered,
    /// Whether the body waits on the server's window.
    write_stall: WriteStall,
    /// The last send found the rest of the body waiting on the server's
    /// window (whether or not the write stall counted it then: see
    /// [`Stream::send_body`]).
    window_shut: bool,
    /// Answered whole ([`Recv::Ended`]), the upload has waited on the
    /// server's window since then (or since the window last let some go):
    /// the write timeout after it, the upload stops (see
    /// [`Stream::upload_deadline`]).
    upload_stall: Option<Instant>,
    /// The response body's bytes so far, against `max_body_bytes`.
    body: BodyCount,
    /// The interim (1xx) heads so far, against `max_head_bytes`.
    interim: InterimCount,
    /// Opened on a connection that had served a stream already.
    reused: bool,
    /// Ended by a reset of `h2`'s own, taken as its answer's end (see
    /// [`Http2::taken_resets`]).
    took_reset: bool,
    /// The final answer's status is not 2xx: its upload stops once the
    /// answer is whole (see [`Stream::answered`]).
    refused: bool,
}

/// A response body's bytes against the client's limit
/// ([`max_body_bytes`](crate::ClientBuilder::max_body_bytes)), as HTTP/1.1's
/// decoder counts them: the declared `content-length`, and what comes.
struct BodyCount {
    limit: Option<u64>,
    received: u64,
}

impl BodyCount {
    /// Whether `n` more bytes (or a body declared `declared` long) stay
    /// within the limit; counts them.
    fn fits(&mut self, n: usize, declared: Option<u64>) -> bool {
        self.received = self.received.saturating_add(n as u64);
        let Some(limit) = self.limit else {
            return true;
        };
        self.received <= limit && declared.is_none_or(|declared| declared <= limit)
    }

    fn too_large(&self, exchange: &Exchange) -> Error {
        Error::BodyTooLarge {
            remote: exchange.remote_name(),
            limit: self.limit.unwrap_or_default(),
        }
    }
}

/// The interim (1xx) heads of a response against the client's bound on
/// them all, [`max_head_bytes`](crate::h1::Limits::max_head_bytes), as
/// HTTP/1.1's decoder has it: each is bounded by `h2`
/// (`max_header_list_size`), but not their number — a server could send
/// `103 Early Hints` for ever, which no body limit sees, and the stream
/// would wait for its final head until a timeout. A head counts as HTTP/2
/// sizes a header list (RFC 9113 §6.5.2): each field's name and value, and
/// 32 — `:status` too.
struct InterimCount {
    limit: usize,
    received: usize,
}

impl InterimCount {
    /// What RFC 9113 §6.5.2 adds to each field's name and value.
    const FIELD_OVERHEAD: usize = 32;

    /// Whether the interim heads so far and `head` stay within the limit;
    /// counts it.
    fn fits(&mut self, head: &http::Response<()>) -> bool {
        let status = ":status".len() + 3 + Self::FIELD_OVERHEAD;
        let fields = head
            .headers()
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + Self::FIELD_OVERHEAD)
            .fold(status, usize::saturating_add);
        self.received = self.received.saturating_add(fields);
        self.received <= self.limit
    }

    fn too_large(&self, exchange: &Exchange) -> Error {
        Error::Protocol {
            remote: exchange.remote_name(),
            source: DecodeError::InterimResponsesTooLarge { limit: self.limit },
        }
    }
}

/// What is left of the request body.
enum Outgoing {
    /// In memory.
    Data(Bytes),
    /// Streamed: from its source, held to its declared length, and the
    /// piece taken from it and not yet sent (waiting for flow-control
    /// capacity).
    Streamed(Upload, Declared, Option<Bytes>),
    /// Sent whole (`END_STREAM`).
    Done,
    /// Not sent whole, and never will be: the stream ended first — the
    /// server reset it, having answered or not (RFC 9113 §8.1: a complete
    /// answer, then `RST_STREAM(NO_ERROR)`, asks the client to stop
    /// sending) — and the response says how it ended.
    Stopped,
}

impl Outgoing {
    /// Whether some of the body is still to be sent.
    fn is_sending(&self) -> bool {
        matches!(self, Outgoing::Data(_) | Outgoing::Streamed(..))
    }
}

/// How far the response is.
enum Recv {
    Head(ResponseFuture),
    Body(RecvStream),
    /// The rest of a response that has no body by definition (see
    /// [`Stream::end_bodiless`]).
    Bodiless(RecvStream),
    Trailers(RecvStream),
    /// The response has come whole (its trailers with it, if it had some)
    /// before the request body was all sent: RFC 9113 §8.1 lets a server
    /// answer a request it has not read whole, and that answer is no
    /// reason for the client to stop sending. The exchange completes when
    /// the upload ends, or when the server stops it — `RST_STREAM`
    /// (`NO_ERROR`, as §8.1 has a server do), the connection's end, or no
    /// window for the write timeout: the answer, whole, stands (see
    /// [`Stream::answered`]). The request timeout, should it come first,
    /// stops the upload and the answer stands as well. Its trailers wait in
    /// the exchange ([`Exchange::hold_answer`]), which completes with them.
    Ended,
    /// Between two of the above.
    Moving,
}

/// What [`Stream::next_buffered`] found.
enum Buffered {
    Data(Bytes),
    /// The response's end, with its trailers if it had some.
    End(Option<http::HeaderMap>),
    /// Nothing more for now: the rest, or the end, has not come (or the
    /// stream failed).
    NotYet,
}

/// Why a connection takes no more streams.
#[derive(Clone, Copy)]
enum Departure {
    /// The server's GOAWAY, with its code.
    GoAway(h2::Reason),
    /// The server's GOAWAY or the connection's failure, the code unknown.
    Server,
    /// Past its time to live (`connection_ttl`): it finishes its streams.
    Retired,
}

/// What became of a stream after a poll.
enum Polled {
    /// Still going.
    Open,
    /// Ended (completed, failed or given back): it leaves the connection.
    Gone,
}

impl Http2 {
    /// Gives `h2` the resets held back (the next poll of the connection
    /// writes them).
    fn give_resets(&mut self) {
        for mut stream in self.resets.drain(..) {
            stream.send.send_reset(h2::Reason::CANCEL);
        }
    }

    /// How many streams may be open at once: the server's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` ([`STREAMS_BEFORE_SETTINGS`] until
    /// its SETTINGS come), and the client's own limit (`client`).
    fn stream_limit(&self, client: Option<usize>) -> usize {
        let server = match &self.phase {
            Phase::Open { conn, .. } => conn.max_concurrent_send_streams(),
            Phase::Handshaking(_) => STREAMS_BEFORE_SETTINGS,
            Phase::Ended => 0,
        };
        client.map_or(server, |client| client.min(server))
    }

    /// Whether requests wait here with no room short of the server's
    /// changing its mind: its limit lowered (by SETTINGS, with no GOAWAY)
    /// to 0, or below the streams open — not merely reached, when the
    /// streams' ends free room — on a shared connection not going away.
    /// Checked in that order: most drives find nothing waiting.
    fn holds_waiting(&self, client: Option<usize>) -> bool {
        if self.queue.is_empty() || !self.shared || self.going_away {
            return false;
        }
        let limit = self.stream_limit(client);
        matches!(self.phase, Phase::Open { .. }) && (limit == 0 || limit < self.streams.len())
    }

    /// The server has sent `GOAWAY` (or its connection is failing) with
    /// streams still open: a PING goes, once a connection. A server that
    /// goes on with the streams its `GOAWAY` names processed answers it,
    /// and nothing changes (with keep-alive PINGs on, an answer that does
    /// not come within their timeout fails the connection, as for any
    /// PING). hypercorn (python-h2) does not: past its `GOAWAY` its
    /// connection sends nothing — the streams at or below the last id it
    /// named stay unanswered — and it closes only when a frame comes (any
    /// is a protocol error to it then) or after its keep-alive timeout
    /// (5 s). Probed, it closes at once, and those streams end as on any
    /// connection closed under them (see [`Stream::may_go_again_after_close`]:
    /// one that may go twice goes again, once; the others fail, not marked
    /// unprocessed) instead of waiting out the server's timeout or their
    /// own. A keep-alive PING out already stands for the probe (`h2` has
    /// one PING out at a time): if the server answered it before its
    /// `GOAWAY`, the next keep-alive PING, an interval later, probes.
    fn probe_departure(&mut self, now: Instant) {
        if self.probed || self.streams.is_empty() {
            return;
        }
        self.probed = true;
        if self.ping_sent.is_none() {
            self.send_ping(now);
        }
    }

    /// Sends a PING (`h2` has one out at a time: none is, the callers
    /// see to it), its answer awaited from `now`.
    fn send_ping(&mut self, now: Instant) {
        if let Phase::Open {
            ping: Some(ping), ..
        } = &mut self.phase
        {
            if ping.send_ping(h2::Ping::opaque()).is_ok() {
                self.ping_sent = Some(now);
                self.last_ping = now;
            }
        }
    }

    /// Whether it is in the pool's shared list.
    pub(super) fn is_shared(&self) -> bool {
        self.shared
    }

    /// The connection closes: with no stream left, the server is told with
    /// a `GOAWAY(NO_ERROR)`, as far as the socket takes it now (RFC 9113
    /// §6.8 — `h2` sends one once nothing can open a stream any more: the
    /// request handle and the PING handle dropped, and the connection
    /// polled).
    pub(super) fn say_goodbye(&mut self) {
        if !self.streams.is_empty() {
            return;
        }
        if let Phase::Open {
            mut conn,
            send,
            ping,
        } = std::mem::replace(&mut self.phase, Phase::Ended)
        {
            drop((send, ping));
            let _ = Pin::new(&mut conn).poll(&mut Context::from_waker(Waker::noop()));
        }
    }
}

impl Conn {
    /// Starts HTTP/2 on this connection — negotiated by ALPN or known in
    /// advance — for `exchange`, attached to it already. `early`: the
    /// server's first bytes, read with a proxy's answer (a server may send
    /// its SETTINGS before the client's preface, RFC 9113 §3.4).
    pub(super) fn begin_h2(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
        early: Vec<u8>,
    ) {
        let Some(transport) = self.transport.take() else {
            return;
        };
        let options = self.env().config.http2;
        let mut builder = h2::client::Builder::new();
        builder
            .enable_push(false)
            .initial_max_send_streams(STREAMS_BEFORE_SETTINGS)
            .initial_window_size(options.initial_stream_window)
            .initial_connection_window_size(options.initial_connection_window)
            .max_frame_size(options.max_frame_size)
            .max_header_list_size(options.max_header_list_size)
            // Set, not left to `h2`'s default: `TAKEN_RESETS_MAX` is
            // measured against it.
            .max_local_error_reset_streams(Some(LOCAL_RESETS_MAX));
        #[cfg(test)]
        if let Some(id) = options.first_stream_id {
            builder.initial_stream_id(id);
        }
        let (io, io_ready) = AsyncIo::new(transport, Bytes::from(early));
        let handshake = builder.handshake::<_, Bytes>(io);
        if let Some(info) = &self.info {
            exchange
                .listener
                .on_protocol_negotiated(info, http::Version::HTTP_2);
        }
        let now = self.now();
        let ready = Ready::new(SourceWaker::new(cx.event_loop(), cx.me()));
        let conn_waker = ready.waker(CONNECTION);
        self.state = State::H2(Box::new(Http2 {
            phase: Phase::Handshaking(Box::pin(handshake)),
            streams: StreamTable::default(),
            queue: VecDeque::from([exchange]),
            resets: Vec::new(),
            ready,
            conn_waker,
            wakers: Vec::new(),
            keys: Vec::new(),
            io_ready,
            shared: false,
            load: Arc::default(),
            going_away: false,
            goaway_error: None,
            idle_since: None,
            idle_told: false,
            served: false,
            taken_resets: 0,
            upload_deadline: None,
            ping_sent: None,
            probed: false,
            last_ping: now,
        }));
        self.drive_h2(cx);
    }

    /// Runs `exchange` on this shared HTTP/2 connection (a task on its
    /// loop, for a request the dispatcher [reserved](StreamLoad::reserve)
    /// a stream for); gives it back, detached, if the connection takes no
    /// more streams.
    pub(super) fn start_on_h2(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
    ) -> Result<(), Arc<Exchange>> {
        let taken = self.take_request(cx, exchange);
        self.publish_load();
        if let State::H2(h2) = &self.state {
            h2.load.arrived();
        }
        taken
    }

    /// [`start_on_h2`](Self::start_on_h2) but for the count.
    fn take_request(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
    ) -> Result<(), Arc<Exchange>> {
        let State::H2(h2) = &self.state else {
            return Err(exchange);
        };
        if h2.going_away || matches!(h2.phase, Phase::Ended) {
            return Err(exchange);
        }
        // Attached and started in one step, on this loop: the timers move
        // here with their absolute deadlines.
        if !exchange.start_on(self.conn_ref(cx)) {
            return Ok(());
        }
        if let Some(info) = &self.info {
            exchange.set_remote(info.remote);
            exchange.listener.on_connection_pooled(info);
        }
        if let State::H2(h2) = &mut self.state {
            h2.queue.push_back(exchange);
            // Not idle from now: its idle timer, due this turn perhaps,
            // must not close it with this request waiting.
            h2.idle_since = None;
            h2.idle_told = false;
        }
        // After the loop's other tasks and events of this turn: requests
        // that come together open their streams in one pass, one write.
        cx.ready_again();
        Ok(())
    }

    /// The loop reports `readiness`: the socket's, or a wake.
    pub(super) fn h2_ready(&mut self, cx: &mut LoopContext<'_>, readiness: Readiness) {
        if let State::H2(h2) = &self.state {
            let closed = readiness.read_closed || readiness.write_closed || readiness.error;
            h2.io_ready
                .set(readiness.readable || closed, readiness.writable || closed);
        }
        self.drive_h2(cx);
    }

    /// Polls everything the connection runs (see the [module
    /// documentation](self)).
    pub(super) fn drive_h2(&mut self, cx: &mut LoopContext<'_>) {
        let State::H2(h2) = &mut self.state else {
            return;
        };
        h2.ready.begin();
        h2.io_ready.refill(PASS_READ_BUDGET);
        let waker = h2.conn_waker.clone();
        let mut task = Context::from_waker(&waker);
        if let Phase::Handshaking(handshake) = &mut h2.phase {
            match handshake.as_mut().poll(&mut task) {
                Poll::Pending => return h2.ready.stop_quietly(),
                Poll::Ready(Ok((send, mut conn))) => {
                    let ping = conn.ping_pong();
                    h2.phase = Phase::Open { send, conn, ping };
                    // Open: the drive polls the streams a read wakes
                    // before it reads again (see `AsyncIo`).
                    h2.io_ready.hold_eof();
                    self.share_h2(cx);
                }
                Poll::Ready(Err(error)) => return self.end_h2(cx, Some(error)),
            }
        }
        if let State::H2(h2) = &mut self.state {
            h2.give_resets();
        }
        // Passes until no mark came meanwhile: each reads what came, opens
        // streams for the requests waiting, polls the streams woken, and
        // sends what they queued (frames, resets, window updates).
        let mut passes = 0;
        loop {
            let mut ended = self.poll_h2_connection(&mut task);
            self.check_goaway(&mut task);
            // The server's SETTINGS may have changed its stream limit: the
            // dispatcher knows before any response of this pass is out.
            self.publish_load();
            if ended.is_none() {
                let mut keys = self.take_keys();
                self.open_streams(cx, &mut task, &mut keys);
                if let State::H2(h2) = &self.state {
                    if h2.ready.take_into(&mut keys) {
                        // `h2` keeps one waker for the send capacity (or the
                        // opening, past the server's stream limit) that
                        // streams wait for, and the connection's polls take
                        // it over: a stream sending its body may have been
                        // given what it waited for with nobody told. Each is
                        // polled when the connection is woken.
                        let marked = keys.len();
                        keys.extend(h2.streams.sending_keys());
                        if keys.len() > marked {
                            keys.sort_unstable();
                            keys.dedup();
                        }
                    }
                }
                self.poll_streams(&keys);
                if let State::H2(h2) = &mut self.state {
                    keys.clear();
                    h2.keys = keys;
                }
                ended = self.poll_h2_connection(&mut task);
                self.check_goaway(&mut task);
            }
            if let Some(result) = ended {
                // Streams learn of the end when polled: all of them once
                // more, then the connection goes.
                self.poll_all_streams();
                return self.end_h2(cx, result.err());
            }
            let State::H2(h2) = &self.state else {
                return;
            };
            // Another pass if marks came meanwhile, or if this one's read
            // budget ran out (more to read, within the turn's).
            let marked = h2.ready.end_pass();
            if !marked && !h2.io_ready.budget_spent() {
                break;
            }
            if !marked {
                // The drive goes on: marks are its own again.
                h2.ready.begin();
            }
            passes += 1;
            if passes == MAX_PASSES {
                // The loop's other work comes first; the rest next turn.
                h2.ready.stop();
                break;
            }
            h2.io_ready.refill(PASS_READ_BUDGET);
        }
        self.move_waiting_off();
        // Not in the pool's shared list (it went away, or another
        // connection to its origin was shared first): it closes once its
        // last stream has ended.
        if let State::H2(h2) = &self.state {
            if !h2.shared && h2.streams.is_empty() && h2.queue.is_empty() {
                return self.close(cx);
            }
        }
        self.publish_load();
        if self.give_permit_if_wanted(cx) {
            return;
        }
        self.arm_h2_timer(cx);
        if let State::H2(h2) = &self.state {
            if h2.io_ready.budget_spent() {
                // More to read, after the loop's timeouts and other sources.
                cx.ready_again();
            }
        }
    }

    /// Tells the dispatcher how many streams are taken (open, or queued
    /// here) and how many may be open at once: the server's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` ([`STREAMS_BEFORE_SETTINGS`]
    /// until its SETTINGS come) and the client's own limit.
    fn publish_load(&self) {
        let State::H2(h2) = &self.state else {
            return;
        };
        let limit = h2.stream_limit(self.env().config.http2.max_concurrent_streams);
        // Ended ones stay queued until they reach the front: not counted
        // as waiting. The queue is empty but at the stream limit, where
        // the count costs a look at each waiting request.
        let waiting = h2.queue.iter().filter(|e| !e.is_done()).count();
        h2.load
            .publish(h2.streams.len() + h2.queue.len(), waiting, limit);
    }

    /// The server's limit has dropped below the streams open here, or to
    /// 0 ([`Http2::holds_waiting`]): the requests waiting for a stream
    /// go to another connection of the origin, oldest first, while the
    /// dispatcher has a place for them there — a stream free, the
    /// connection being opened, room for a new one. Waiting here they
    /// would wait for more streams to end than the server said, or for
    /// the server to change its mind, up to their request timeout. Those
    /// with no other place stay (with one connection per origin, all of
    /// them: the server has the last word), and look again every
    /// [`HELD_RECHECK`] where the origin may have another. Nothing of them
    /// was sent, and the move is the client's, not a failure: it does not
    /// use up their one retry.
    fn move_waiting_off(&mut self) {
        let Some(id) = self.info.as_ref().map(|info| info.id) else {
            return;
        };
        let client_limit = self.env().config.http2.max_concurrent_streams;
        loop {
            let State::H2(h2) = &mut self.state else {
                return;
            };
            // Asked before each: the place the last took may have been the
            // only one.
            if !h2.holds_waiting(client_limit) || !self.owner.has_place_besides(&self.route, id) {
                return;
            }
            let Some(exchange) = h2.queue.pop_front() else {
                return;
            };
            self.send_elsewhere(exchange);
        }
    }

    /// The connection's (empty) vector of keys, for a pass to fill and
    /// give back.
    fn take_keys(&mut self) -> Vec<usize> {
        match &mut self.state {
            State::H2(h2) => std::mem::take(&mut h2.keys),
            _ => Vec::new(),
        }
    }

    /// Polls the `h2` connection (reads, writes, settings, pings): `Some`
    /// once it has ended.
    fn poll_h2_connection(&mut self, task: &mut Context<'_>) -> Option<Result<(), h2::Error>> {
        let State::H2(h2) = &mut self.state else {
            return Some(Ok(()));
        };
        let Phase::Open { conn, ping, .. } = &mut h2.phase else {
            return Some(Ok(()));
        };
        if let Some(ping) = ping {
            if h2.ping_sent.is_some() {
                if let Poll::Ready(Ok(_)) = ping.poll_pong(task) {
                    h2.ping_sent = None;
                }
            }
        }
        match Pin::new(conn).poll(task) {
            Poll::Ready(result) => Some(result),
            Poll::Pending => None,
        }
    }

    /// The handshake is done: the connection joins the pool's shared list,
    /// and takes the requests that waited for it.
    fn share_h2(&mut self, cx: &mut LoopContext<'_>) {
        let (Some(info), State::H2(_)) = (self.info.clone(), &self.state) else {
            return;
        };
        self.publish_load();
        let State::H2(h2) = &self.state else {
            return;
        };
        let load = h2.load.clone();
        let shared = SharedConn {
            conn: self.conn_ref(cx),
            id: info.id,
            load,
        };
        // Not shared (the origin has its connections already): it serves
        // what it opened for, and closes.
        let Some(waiters) = self.owner.share(&self.route, shared) else {
            return;
        };
        let conn = self.conn_ref(cx);
        let State::H2(h2) = &mut self.state else {
            return;
        };
        h2.shared = true;
        for waiter in waiters {
            if waiter.start_on(conn.clone()) {
                waiter.set_remote(info.remote);
                waiter.listener.on_connection_pooled(&info);
                h2.queue.push_back(waiter);
            }
        }
        // The waiters it took count at once, not at the end of the pass:
        // the load is never under the truth.
        self.publish_load();
    }

    /// Opens streams for the requests waiting, while the server lets more
    /// in; pushes the keys of those it opened onto `opened`.
    fn open_streams(
        &mut self,
        cx: &mut LoopContext<'_>,
        task: &mut Context<'_>,
        opened: &mut Vec<usize>,
    ) {
        let client_limit = self.env().config.http2.max_concurrent_streams;
        if matches!(&self.state, State::H2(h2) if h2.queue.is_empty()) {
            return;
        }
        let info = self.info.clone();
        let base = self.conn_ref(cx);
        let State::H2(h2) = &mut self.state else {
            return;
        };
        let Phase::Open { send, conn, .. } = &mut h2.phase else {
            return;
        };
        // The server's limit too: past it `h2` takes a request but holds
        // it back unsent, where its read timeout would run and a GOAWAY
        // would not send it elsewhere. Here it waits for a stream.
        let server_limit = conn.max_concurrent_send_streams();
        let limit = client_limit.map_or(server_limit, |client| client.min(server_limit));
        let mut goaway = None;
        let mut ids_spent = false;
        let mut worn = false;
        let mut sent_at = None;
        while let Some(front) = h2.queue.front() {
            if h2.going_away {
                break;
            }
            if front.is_done() {
                h2.queue.pop_front();
                continue;
            }
            if h2.streams.len() >= limit {
                break;
            }
            if h2.taken_resets > 0 && h2.taken_resets + h2.streams.len() >= TAKEN_RESETS_MAX {
                // Each open stream may add one more: the connection takes
                // no new one, and retires (see `taken_resets`).
                worn = true;
                h2.going_away = true;
                break;
            }
            match send.poll_ready(task) {
                Poll::Pending => break,
                Poll::Ready(Err(error)) => {
                    // GOAWAY, or the connection is failing: it takes no
                    // more streams, and gives back what waits (below).
                    goaway = error.reason();
                    h2.going_away = true;
                    break;
                }
                Poll::Ready(Ok(())) => {}
            }
            let Some(exchange) = h2.queue.pop_front() else {
                break;
            };
            // Ended since the check above.
            let Some((request, out)) = request_of(&exchange) else {
                continue;
            };
            let end_of_stream = matches!(out, Outgoing::Done);
            match send.send_request(request, end_of_stream) {
                Ok((response, stream)) => {
                    let id = stream.stream_id().as_u32();
                    if id > LAST_STREAM_ID - 2 {
                        // The last id a client may open (RFC 9113 §5.1.1):
                        // the connection takes no more streams; it retires,
                        // finishing its own, and the requests after it go
                        // to a new one.
                        ids_spent = true;
                        h2.going_away = true;
                    }
                    if let Some(info) = &info {
                        exchange.listener.on_stream_opened(info, id);
                    }
                    let env = &self.owner.env().streams;
                    env.opened.fetch_add(1, Ordering::Relaxed);
                    env.open.fetch_add(1, Ordering::Relaxed);
                    h2.idle_since = None;
                    h2.idle_told = false;
                    let key = h2.streams.next_key();
                    // Slab keys are dense: a new key is the next one.
                    while h2.wakers.len() <= key {
                        let key = h2.wakers.len();
                        h2.wakers.push(h2.ready.waker(key));
                    }
                    let waker = h2.wakers[key].clone();
                    // A dropped body wakes this stream, not the connection.
                    let mut conn = base.clone();
                    conn.waker = Some(waker.clone());
                    exchange.attach(ConnSlot::Ready(conn));
                    if end_of_stream {
                        // One read of the clock for the streams opened together.
                        let now = *sent_at.get_or_insert_with(|| self.owner.env().clock.now());
                        request_sent(&exchange, info.as_ref(), now);
                    }
                    opened.push(key);
                    h2.streams.insert(
                        key,
                        Stream {
                            exchange,
                            waker,
                            send: stream,
                            out,
                            recv: Recv::Head(response),
                            paused: false,
                            gathered: Gathered::default(),
                            write_stall: WriteStall::default(),
                            window_shut: false,
                            upload_stall: None,
                            body: BodyCount {
                                limit: self.owner.env().config.limits.max_body_bytes,
                                received: 0,
                            },
                            interim: InterimCount {
                                limit: self.owner.env().config.limits.max_head_bytes,
                                received: 0,
                            },
                            reused: h2.served,
                            took_reset: false,
                            refused: false,
                        },
                    );
                }
                Err(error) => {
                    if error.is_go_away() || error.is_io() {
                        // Not sent: it goes elsewhere.
                        h2.going_away = true;
                        h2.queue.push_front(exchange);
                        break;
                    }
                    let error = error_of(&exchange, error);
                    exchange.finish_err(error);
                }
            }
        }
        if let Some(reason) = goaway.filter(|r| *r != h2::Reason::NO_ERROR) {
            h2.goaway_error = Some(Http2Reason(reason.into()));
        }
        self.went_away(match goaway {
            _ if ids_spent || worn => Departure::Retired,
            Some(reason) => Departure::GoAway(reason),
            None => Departure::Server,
        });
    }

    /// Looks for the server's `GOAWAY` (it shows first in `poll_ready`,
    /// streams waiting or not), and records its error code.
    fn check_goaway(&mut self, task: &mut Context<'_>) {
        let State::H2(h2) = &mut self.state else {
            return;
        };
        let Phase::Open { send, .. } = &mut h2.phase else {
            return;
        };
        if h2.going_away {
            return;
        }
        let Poll::Ready(Err(error)) = send.poll_ready(task) else {
            return;
        };
        h2.going_away = true;
        let reason = error.reason();
        if let Some(reason) = reason.filter(|r| *r != h2::Reason::NO_ERROR) {
            h2.goaway_error = Some(Http2Reason(reason.into()));
        }
        self.went_away(reason.map_or(Departure::Server, Departure::GoAway));
    }

    /// The connection takes no more streams: it leaves the shared list,
    /// and the requests waiting on it go elsewhere. For the server's
    /// departure, the streams left are probed ([`Http2::probe_departure`]).
    fn went_away(&mut self, why: Departure) {
        let info = self.info.clone();
        let State::H2(h2) = &mut self.state else {
            return;
        };
        if matches!(why, Departure::Retired) {
            h2.going_away = true;
        }
        if !h2.going_away {
            return;
        }
        if !matches!(why, Departure::Retired) {
            h2.probe_departure(self.owner.env().clock.now());
        }
        if h2.shared {
            h2.shared = false;
            let id = info.as_ref().map_or(0, |info| info.id);
            self.owner.unshare(&self.route, id);
            let code = match why {
                Departure::GoAway(reason) => Some(u32::from(reason)),
                Departure::Server => Some(0),
                Departure::Retired => None,
            };
            if let (Some(info), Some(code)) = (&info, code) {
                self.owner
                    .env()
                    .config
                    .listener
                    .on_goaway(info, Http2Reason(code));
            }
        }
        let waiting: Vec<_> = h2.queue.drain(..).collect();
        let io_ready = h2.io_ready.clone();
        for exchange in waiting {
            if let Some(refused) = refusal(&io_ready, &exchange) {
                exchange.finish_err(refused);
                continue;
            }
            match why {
                // The client's own decision: nothing to bound.
                Departure::Retired => self.send_elsewhere(exchange),
                Departure::GoAway(reason) => self.send_elsewhere_once(exchange, |exchange| {
                    not_processed(
                        exchange,
                        goaway_failure(exchange, Http2Reason(reason.into())),
                    )
                }),
                Departure::Server => self.send_elsewhere_once(exchange, closed_failure),
            }
        }
    }

    /// A request that was never sent goes to another connection.
    fn send_elsewhere(&self, exchange: Arc<Exchange>) {
        self.send_to_another(exchange, true);
    }

    /// `exchange` goes to another connection: a pooled one too if
    /// `allow_idle` (not after a close that may have made them as stale).
    fn send_to_another(&self, exchange: Arc<Exchange>, allow_idle: bool) {
        exchange.attach(ConnSlot::None);
        self.owner.redispatch(exchange, allow_idle);
    }

    /// A request that was never sent goes to another connection once, for
    /// the server's departure: a server that sends `GOAWAY` (or closes) as
    /// soon as a connection opens would otherwise have it open connection
    /// after connection until its deadline. Gone once already, it fails
    /// with `error`.
    fn send_elsewhere_once(&self, exchange: Arc<Exchange>, error: impl FnOnce(&Exchange) -> Error) {
        if exchange.retried.swap(true, Ordering::AcqRel) {
            let error = error(&exchange);
            exchange.finish_err(error);
        } else {
            self.send_elsewhere(exchange);
        }
    }

    /// Polls every stream.
    fn poll_all_streams(&mut self) {
        let State::H2(h2) = &self.state else {
            return;
        };
        let keys: Vec<usize> = h2.streams.keys().collect();
        self.poll_streams(&keys);
    }

    /// Polls the streams `keys` (those gone meanwhile are skipped): their
    /// uploads, their responses.
    fn poll_streams(&mut self, keys: &[usize]) {
        let now = self.now();
        let info = self.info.clone();
        let State::H2(h2) = &mut self.state else {
            return;
        };
        let mut retry = Vec::new();
        let goaway_error = h2.goaway_error;
        for &key in keys {
            let Some(stream) = h2.streams.get_mut(key) else {
                continue;
            };
            let polled = stream.poll(now, info.as_ref(), &mut retry, goaway_error, &h2.io_ready);
            if let Some(deadline) = stream.upload_deadline() {
                h2.upload_deadline = Some(h2.upload_deadline.map_or(deadline, |d| d.min(deadline)));
            }
            if let Polled::Gone = polled {
                h2.served = true;
                h2.taken_resets += usize::from(stream.took_reset);
                h2.streams.remove(key);
                self.owner
                    .env()
                    .streams
                    .open
                    .fetch_sub(1, Ordering::Relaxed);
            }
        }
        if h2.streams.is_empty() && h2.queue.is_empty() && h2.idle_since.is_none() {
            h2.idle_since = Some(now);
        }
        for (exchange, allow_idle) in retry {
            self.send_to_another(exchange, allow_idle);
        }
    }

    /// The exchange `exchange_id` ended from outside (a timeout, a cancel,
    /// the client closing): its stream is reset with `CANCEL`, the others
    /// go on. The reset goes at the connection's next drive, asked for
    /// after the loop's other work: the loop aborts the exchanges a burst
    /// of expiries failed together, in a gap after it (see
    /// `EventLoop::close_aborted`), and their resets share one write.
    pub(super) fn abort_h2(&mut self, cx: &mut LoopContext<'_>, exchange_id: u64) {
        let State::H2(h2) = &mut self.state else {
            return;
        };
        h2.queue.retain(|e| e.id != exchange_id);
        if let Some(stream) = h2.streams.remove_exchange(exchange_id) {
            h2.resets.push(stream);
            self.owner
                .env()
                .streams
                .open
                .fetch_sub(1, Ordering::Relaxed);
            cx.ready_again();
        }
        if h2.streams.is_empty() && h2.queue.is_empty() && h2.idle_since.is_none() {
            h2.idle_since = Some(self.owner.env().clock.now());
        }
        self.publish_load();
        self.give_permit_if_wanted(cx);
    }

    /// A shared connection that has just lost its last stream (its count
    /// of none published) closes if a request waits for the total limit
    /// and could use its permit — as an idle HTTP/1.1 connection would be
    /// closed for it — rather than hold the permit until its idle timeout.
    /// Asked once per idle spell: after that, a request that queues finds
    /// it idle ([`StreamLoad::is_idle`]) and has the dispatcher retire it.
    /// Returns whether it closed.
    fn give_permit_if_wanted(&mut self, cx: &mut LoopContext<'_>) -> bool {
        let State::H2(h2) = &mut self.state else {
            return false;
        };
        if !h2.shared || h2.idle_told || !h2.streams.is_empty() || !h2.queue.is_empty() {
            return false;
        }
        h2.idle_told = true;
        if !self.owner.permit_wanted(&self.route) {
            return false;
        }
        self.close(cx);
        true
    }

    /// The connection has ended (`error`, or the server closed it): every
    /// stream still on it fails, the requests still waiting go elsewhere,
    /// and it closes.
    fn end_h2(&mut self, cx: &mut LoopContext<'_>, error: Option<h2::Error>) {
        let State::H2(h2) = &mut self.state else {
            return;
        };
        h2.phase = Phase::Ended;
        let streams = h2.streams.take_all();
        let waiting: Vec<_> = h2.queue.drain(..).collect();
        let goaway_error = h2.goaway_error;
        let reason = error.as_ref().and_then(h2::Error::reason);
        let remote = error.as_ref().is_some_and(h2::Error::is_remote);
        let io = error.and_then(h2::Error::into_io);
        let io_ready = h2.io_ready.clone();
        self.close(cx);
        let counts = &self.owner.env().streams;
        counts.open.fetch_sub(streams.len(), Ordering::Relaxed);
        let error_for = |exchange: &Exchange| {
            if let Some(refused) = refusal(&io_ready, exchange) {
                return refused;
            }
            match (&io, reason) {
                (_, None) if goaway_error.is_some() => {
                    goaway_failure(exchange, goaway_error.unwrap_or(Http2Reason::NO_ERROR))
                }
                (Some(io), _) => Error::Io {
                    remote: exchange.remote_name(),
                    source: io::Error::new(io.kind(), io.to_string()),
                },
                (None, Some(reason)) => Error::Http2 {
                    remote: exchange.remote_name(),
                    reason: Http2Reason(reason.into()),
                    initiator: if remote {
                        Http2Initiator::Remote
                    } else {
                        Http2Initiator::Local
                    },
                    connection: true,
                    unprocessed: false,
                },
                (None, None) => closed_failure(exchange),
            }
        };
        for mut stream in streams {
            // A response that came whole, some of it still in `h2`'s
            // buffer behind a full pipe, is not lost with the connection.
            if stream.finish_from_buffer() {
                continue;
            }
            stream.exchange.finish_err(error_for(&stream.exchange));
        }
        // Nothing of these was sent.
        for exchange in waiting {
            match refusal(&io_ready, &exchange) {
                Some(refused) => drop(exchange.finish_err(refused)),
                None => self.send_elsewhere_once(exchange, |exchange| {
                    not_processed(exchange, error_for(exchange))
                }),
            }
        }
    }

    /// The connection is given up under its streams (its keep-alive PING
    /// had no answer): those whose answer has come whole — waiting for
    /// their upload's end ([`Recv::Ended`]), or with that end in `h2`'s
    /// buffer behind a full pipe — complete with it and leave, as when the
    /// connection ends ([`Conn::end_h2`]); the others stay, to fail.
    fn complete_whole_answers(&mut self) {
        let State::H2(h2) = &mut self.state else {
            return;
        };
        let left = h2.streams.retain(|stream| !stream.finish_from_buffer());
        self.owner
            .env()
            .streams
            .open
            .fetch_sub(left, Ordering::Relaxed);
    }

    /// Fails every stream and waiting request with `error` and closes (the
    /// loop shuts down, or code run for the connection panicked).
    pub(super) fn fail_h2(&mut self, cx: &mut LoopContext<'_>, error: impl Fn(&Exchange) -> Error) {
        let State::H2(h2) = &mut self.state else {
            return;
        };
        let streams = h2.streams.take_all();
        let waiting: Vec<_> = h2.queue.drain(..).collect();
        self.close(cx);
        let counts = &self.owner.env().streams;
        counts.open.fetch_sub(streams.len(), Ordering::Relaxed);
        for exchange in streams.into_iter().map(|s| s.exchange).chain(waiting) {
            exchange.finish_err(error(&exchange));
        }
    }

    /// Arms the connection's one timer for what it waits for: the next
    /// keep-alive PING or its answer, or the end of its idle time.
    fn arm_h2_timer(&mut self, cx: &mut LoopContext<'_>) {
        let config = &self.env().config;
        let idle_timeout = config.pooled_connection_idle_timeout;
        let options = config.http2;
        let State::H2(h2) = &self.state else {
            return;
        };
        let idle = h2
            .idle_since
            .zip(idle_timeout)
            .and_then(|(since, timeout)| deadline_after(since, timeout));
        let ping = options
            .keep_alive_interval
            .and_then(|interval| match h2.ping_sent {
                Some(sent) => deadline_after(sent, options.keep_alive_timeout),
                None => deadline_after(h2.last_ping, interval),
            });
        let ttl = config
            .connection_ttl
            .filter(|_| !h2.going_away)
            .and_then(|ttl| deadline_after(self.created, ttl));
        // Requests held here by a lowered limit, no other place for them
        // then: looked at again soon, another connection may have freed a
        // stream (see `move_waiting_off`; with one connection per origin,
        // none ever will).
        let held = options.max_connections_per_origin > 1
            && h2.holds_waiting(options.max_concurrent_streams);
        let recheck = held.then(|| self.now() + HELD_RECHECK);
        let next = [idle, ping, ttl, recheck, h2.upload_deadline]
            .into_iter()
            .flatten()
            .min();
        if self.h2_timer_deadline != next {
            self.h2_timer_deadline = next;
            self.arm_timer(cx, H2_TIMER, next);
        }
    }

    /// The dispatcher has taken this connection out of its shared list,
    /// to give its permit to a request waiting for the total limit: with
    /// no stream and no request waiting it closes now, as at the end of
    /// its idle time; else (a request came meanwhile) it takes no more,
    /// sends the waiting ones elsewhere, and closes once its last stream
    /// has ended.
    pub(super) fn retire_h2(&mut self, cx: &mut LoopContext<'_>) {
        let State::H2(h2) = &self.state else {
            return;
        };
        if h2.streams.is_empty() && h2.queue.is_empty() {
            return self.close(cx);
        }
        self.went_away(Departure::Retired);
        self.drive_h2(cx);
    }

    /// The connection's timer is due: an idle connection closes, a PING
    /// goes or its answer is overdue, requests held by a lowered limit
    /// look for another place (the drive below).
    pub(super) fn h2_timer(&mut self, cx: &mut LoopContext<'_>) {
        self.h2_timer_deadline = None;
        let now = self.now();
        let config = &self.env().config;
        let idle_timeout = config.pooled_connection_idle_timeout;
        let options = config.http2;
        let ttl_over = config
            .connection_ttl
            .and_then(|ttl| deadline_after(self.created, ttl))
            .is_some_and(|deadline| now >= deadline);
        let State::H2(h2) = &mut self.state else {
            return;
        };
        let idle_over = h2
            .idle_since
            .zip(idle_timeout)
            .and_then(|(since, timeout)| deadline_after(since, timeout))
            .is_some_and(|deadline| now >= deadline);
        if idle_over && h2.streams.is_empty() && h2.queue.is_empty() {
            // No stream, no request waiting: nothing to fail.
            return self.close(cx);
        }
        if ttl_over && !h2.going_away {
            // It closes once its last stream has ended (the drive below).
            self.went_away(Departure::Retired);
        }
        if let State::H2(h2) = &mut self.state {
            if h2.upload_deadline.is_some_and(|deadline| now >= deadline) {
                // The drive below polls the sending streams (the
                // connection marked), which stop the uploads past their
                // write timeout and give the next deadline.
                h2.upload_deadline = None;
                h2.conn_waker.wake_by_ref();
            }
        }
        let State::H2(h2) = &mut self.state else {
            return;
        };
        if let Some(interval) = options.keep_alive_interval {
            match h2.ping_sent {
                Some(sent) => {
                    if deadline_after(sent, options.keep_alive_timeout).is_some_and(|d| now >= d) {
                        let timeout = options.keep_alive_timeout;
                        // The requests waiting for a stream were never
                        // sent: they go elsewhere; the streams fail, but
                        // those whose answer came whole.
                        self.went_away(Departure::Retired);
                        self.complete_whole_answers();
                        return self.fail_h2(cx, |exchange| Error::Io {
                            remote: exchange.remote_name(),
                            source: io::Error::new(
                                io::ErrorKind::TimedOut,
                                format!(
                                    "the HTTP/2 PING (keep-alive, or the probe after a GOAWAY) had no answer in {} ms",
                                    timeout.as_millis()
                                ),
                            ),
                        });
                    }
                }
                None => {
                    if deadline_after(h2.last_ping, interval).is_some_and(|d| now >= d) {
                        h2.send_ping(now);
                    }
                }
            }
        }
        self.drive_h2(cx);
    }
}

impl Stream {
    /// Moves the stream on: checks it is still wanted, sends what it can of
    /// the body, takes what it can of the response. `goaway_error` and
    /// `io_ready` say why the connection failed, if it did, better than
    /// `h2`'s error would.
    fn poll(
        &mut self,
        now: Instant,
        info: Option<&crate::events::ConnectionInfo>,
        retry: &mut Vec<(Arc<Exchange>, bool)>,
        goaway_error: Option<Http2Reason>,
        io_ready: &IoReadiness,
    ) -> Polled {
        // Ended elsewhere (a timeout, a cancel) with its abort on the way.
        if self.exchange.is_done() {
            self.send.send_reset(h2::Reason::CANCEL);
            return Polled::Gone;
        }
        let waker = self.waker.clone();
        let mut task = Context::from_waker(&waker);
        let task = &mut task;
        if let Err(error) = self.send_body(task, now, info) {
            self.send.send_reset(h2::Reason::CANCEL);
            let refused = refusal(io_ready, &self.exchange);
            self.exchange.finish_err(refused.unwrap_or(error));
            return Polled::Gone;
        }
        match self.receive(task, now, info) {
            Ok(polled) => polled,
            Err(error) => {
                let unprocessed = self.unprocessed(&error);
                if unprocessed && self.may_go_again() {
                    retry.push((self.exchange.clone(), true));
                } else if self.may_go_again_after_close(&error) {
                    // Not to another pooled connection: it may be as stale.
                    retry.push((self.exchange.clone(), false));
                } else {
                    let error = match goaway_error {
                        // The connection dropped after a GOAWAY with an
                        // error: that error is why.
                        Some(reason) if error.reason().is_none() => {
                            goaway_failure(&self.exchange, reason)
                        }
                        _ => refusal(io_ready, &self.exchange).unwrap_or_else(|| {
                            let failure = error_of(&self.exchange, error);
                            if unprocessed {
                                not_processed(&self.exchange, failure)
                            } else {
                                failure
                            }
                        }),
                    };
                    self.exchange.finish_err(error);
                }
                Polled::Gone
            }
        }
    }

    /// Whether the stream failed with `error` the server says it never
    /// processed, before any answer.
    ///
    /// "Never processed" is exact. `REFUSED_STREAM` says so of one stream.
    /// A `GOAWAY` says so of the streams above its last stream id, and `h2`
    /// (0.4, `Streams::recv_go_away`) fails exactly those, at once, with
    /// the frame's own error — remote, `GOAWAY`, its code, whether
    /// `NO_ERROR` or not — and no other stream ever gets that error: the
    /// streams at or below the id go on, and fail, if the connection ends
    /// under them, with an I/O error (`recv_eof`) or a local one, which
    /// [`Stream::poll`] reports with the `GOAWAY`'s code.
    fn unprocessed(&self, error: &h2::Error) -> bool {
        error.is_remote()
            && (error.is_go_away() || error.reason() == Some(h2::Reason::REFUSED_STREAM))
            && matches!(self.recv, Recv::Head(_))
    }

    /// Whether the request of a stream the server never processed goes
    /// again, whatever its method: its body can be sent again, and it has
    /// not gone again already. Otherwise it fails, marked unprocessed.
    fn may_go_again(&self) -> bool {
        self.exchange.request.replayable() && !self.exchange.retried.swap(true, Ordering::AcqRel)
    }

    /// Whether the request of a stream that failed with `error` before any
    /// answer, its connection gone with no word (the socket closed or
    /// failed, no `GOAWAY` that named it unprocessed), goes again on a new
    /// connection: as over HTTP/1.1, where a reused connection's failure
    /// before any byte of the response sends it again, once, if it may go
    /// twice (RFC 9110 §9.2.2: idempotent, its body in memory) — the
    /// server may have closed the connection as idle as the request came.
    /// On a connection that served nothing yet the failure is the
    /// request's own. The server may have processed it: the request is
    /// marked so.
    fn may_go_again_after_close(&self, error: &h2::Error) -> bool {
        let again = self.reused
            && error.is_io()
            && matches!(self.recv, Recv::Head(_))
            && self.exchange.may_retry()
            && !self.exchange.retried.swap(true, Ordering::AcqRel);
        if again {
            self.exchange.maybe_processed.store(true, Ordering::Release);
        }
        again
    }

    /// The response's body passed `max_body_bytes` (or declares it will):
    /// the stream is reset and the exchange fails.
    fn too_large(&mut self) -> Polled {
        self.send.send_reset(h2::Reason::CANCEL);
        self.exchange
            .finish_err(self.body.too_large(&self.exchange));
        Polled::Gone
    }

    /// The pipe is full: the stream waits for room, its read timeout with
    /// it (a reader that does not read is not the server's silence).
    ///
    /// Paused, the stream still takes what `h2` holds of the body, to
    /// `Gathered`, its window not given back — so `h2` wakes it for each
    /// frame that comes — until there is nothing more, or the body's end
    /// (`END_STREAM`): that end must be seen while the connection lives.
    /// Once it ends, `h2` marks every stream it has not seen closed both
    /// ways as failed ("stream closed because of a broken pipe"), which
    /// hides the end of one still sending its body, and the answer,
    /// whole, was lost. It costs nothing more: `h2` has those bytes in
    /// memory already, and the stream's window (which the server may not
    /// pass) bounds them — in `h2`'s buffer or in `Gathered`, the same.
    fn pause(&mut self) {
        self.paused = true;
        self.exchange.pause_read();
    }

    /// The connection has ended: if the whole response had come — its end
    /// received, some of its body still in `h2`'s buffer behind a full
    /// pipe — the rest goes into the pipe, past its window (it is in
    /// memory already), and the exchange completes (or fails, past the
    /// body limit). Whether it ended the exchange.
    fn finish_from_buffer(&mut self) -> bool {
        if let Some(chunk) = self.gathered.take() {
            self.exchange.body().push_last(chunk);
        }
        let mut task = Context::from_waker(Waker::noop());
        loop {
            match self.next_buffered(&mut task) {
                Buffered::Data(data) => {
                    if !self.body.fits(data.len(), None) {
                        self.exchange
                            .finish_err(self.body.too_large(&self.exchange));
                        return true;
                    }
                    self.exchange.listener.on_body_part(data.len());
                    self.exchange.body().push_last(data);
                }
                Buffered::End(trailers) => {
                    self.exchange.complete(trailers);
                    return true;
                }
                Buffered::NotYet => return false,
            }
        }
    }

    /// The body's reader has gone. If the response has all come — its end
    /// received, what is left of it in `h2`'s buffer — the exchange has
    /// completed (the caller merely did not read it all): the rest is
    /// discarded, and the stream, its answer ended, is not reset for it —
    /// unless its upload is still going ([`Recv::Ended`]): nobody waits
    /// for that any more, and the stream is reset to stop it. If not,
    /// nothing more is wanted: the stream is reset, and the exchange
    /// cancelled.
    fn reader_gone(&mut self, task: &mut Context<'_>) -> Polled {
        if let (Some(chunk), Recv::Body(body) | Recv::Trailers(body)) =
            (self.gathered.take(), &mut self.recv)
        {
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        loop {
            match self.next_buffered(task) {
                Buffered::Data(data) => self.exchange.listener.on_body_part(data.len()),
                Buffered::End(trailers) => {
                    if self.out.is_sending() {
                        self.send.send_reset(h2::Reason::CANCEL);
                    }
                    self.exchange.complete(trailers);
                    return Polled::Gone;
                }
                Buffered::NotYet => {
                    self.send.send_reset(h2::Reason::CANCEL);
                    self.exchange.finish_err(Error::Cancelled);
                    return Polled::Gone;
                }
            }
        }
    }

    /// The next part of the response body that `h2` holds already, or its
    /// end if that has come, without waiting for more. What it takes out
    /// of `h2`'s buffer gives its window back.
    fn next_buffered(&mut self, task: &mut Context<'_>) -> Buffered {
        loop {
            match &mut self.recv {
                Recv::Body(body) => match body.poll_data(task) {
                    Poll::Ready(Some(Ok(data))) => {
                        let _ = body.flow_control().release_capacity(data.len());
                        return Buffered::Data(data);
                    }
                    Poll::Ready(None) => {
                        if let Recv::Body(body) = std::mem::replace(&mut self.recv, Recv::Moving) {
                            self.recv = Recv::Trailers(body);
                        }
                    }
                    Poll::Ready(Some(Err(_))) | Poll::Pending => return Buffered::NotYet,
                },
                Recv::Trailers(body) => {
                    return match body.poll_trailers(task) {
                        Poll::Ready(Ok(trailers)) => Buffered::End(trailers),
                        Poll::Ready(Err(_)) | Poll::Pending => Buffered::NotYet,
                    };
                }
                // Whole with its head.
                Recv::Bodiless(_) => return Buffered::End(None),
                // Its trailers are the exchange's (`Exchange::hold_answer`).
                Recv::Ended => return Buffered::End(None),
                Recv::Head(_) | Recv::Moving => return Buffered::NotYet,
            }
        }
    }

    /// The stream of a response that has no body whatever its head declares
    /// (an answer to HEAD, a 204, a 304: [`has_no_body`]), as over
    /// HTTP/1.1: what DATA comes all the same is dropped (its window given
    /// back) and the stream's end, however it comes, is the answer's end
    /// (returned true: the exchange completes, once its upload has ended —
    /// see [`Stream::answered`]). Its end may be an error: a 304 may declare the
    /// `content-length` of what it stands for (RFC 9113 §8.1.1), and `h2`
    /// resets such a stream if its `END_STREAM` comes on a DATA frame
    /// rather than on its head (hypercorn ends every stream so), as it
    /// does a HEAD's answer that sends the DATA its length declares: then
    /// `took_reset` is set (`h2` counts such resets: see
    /// [`Http2::taken_resets`]).
    fn end_bodiless(
        exchange: &Exchange,
        body: &mut RecvStream,
        took_reset: &mut bool,
        task: &mut Context<'_>,
        now: Instant,
    ) -> bool {
        loop {
            match body.poll_data(task) {
                Poll::Pending => return false,
                Poll::Ready(Some(Ok(data))) => {
                    exchange.mark_read(now);
                    let _ = body.flow_control().release_capacity(data.len());
                }
                Poll::Ready(end) => {
                    *took_reset = matches!(end, Some(Err(error)) if error.is_library());
                    return true;
                }
            }
        }
    }

    /// Sends what the server's window takes of the request body, and
    /// tells the write stall whether the rest waits on the window (see
    /// [`WriteStall`]) — before the answer's head: after it the read
    /// timeout bounds the server, which may have stopped reading on
    /// purpose — or, once the answer is whole ([`Recv::Ended`]), the
    /// stream's own bound on the upload ([`Stream::upload_deadline`]).
    fn send_body(
        &mut self,
        task: &mut Context<'_>,
        now: Instant,
        info: Option<&crate::events::ConnectionInfo>,
    ) -> Result<(), Error> {
        let (waits, took) = self.send_what_fits(task, now, info)?;
        self.window_shut = waits;
        if matches!(self.recv, Recv::Ended) {
            self.upload_stall = match (waits, took) {
                (false, _) => None,
                (true, true) => Some(now),
                (true, false) => self.upload_stall.or(Some(now)),
            };
        }
        let waits = waits && matches!(self.recv, Recv::Head(_));
        self.write_stall.step(&self.exchange, waits, took, || now);
        Ok(())
    }

    /// When the upload of a stream answered whole ([`Recv::Ended`]) stops
    /// for want of the server's window (see [`upload_deadline`]).
    fn upload_deadline(&self) -> Option<Instant> {
        upload_deadline(self.upload_stall, &self.exchange)
    }

    /// The response has come whole, with `trailers` if it had some. With
    /// the request whole too, the exchange completes: the stream, ended
    /// both ways, leaves. If not, the answer waits for the upload's end
    /// ([`Recv::Ended`]) — rather than the stream's leaving now, which
    /// would have `h2` reset it with `CANCEL` and cut the upload short
    /// (RFC 9113 §8.1: a complete answer is no reason to stop sending).
    /// Nothing is left to read: the read timeout stops, and a reader
    /// waiting for the body is woken for what it has. A server that
    /// takes no more of the body (its window shut) for the write timeout
    /// has the upload stopped there, with `CANCEL`, and the answer stands —
    /// it does not depend on the rest (RFC 9113 §8.1), and a server that
    /// stops reading has said no more than one that resets with
    /// `NO_ERROR` — and so for the request timeout, which stops the upload
    /// with `CANCEL` and completes the exchange with the answer it holds
    /// ([`Exchange::hold_answer`]). A cancel, the client's closing and the
    /// upload's own failure end the exchange as they would before the
    /// answer's end. `Open` then. A refusal ([`Stream::refused`]) stops the
    /// upload here, as over HTTP/1.1 (`Sending::answered`): the server has
    /// said it does not want the rest, and an upload that goes on — or
    /// waits on a source with nothing more to give — would hold the
    /// caller's answer until it ended.
    fn answered(&mut self, trailers: Option<http::HeaderMap>, now: Instant) -> Polled {
        if self.out.is_sending() && self.refused {
            self.send.send_reset(h2::Reason::CANCEL);
            self.out = Outgoing::Stopped;
        }
        if !self.out.is_sending() {
            self.exchange.complete(trailers);
            return Polled::Gone;
        }
        self.recv = Recv::Ended;
        self.exchange.hold_answer(trailers);
        // Its end held, the pipe would wake a waiting reader for the last
        // bytes only at its low-water mark: woken now for what it holds.
        self.exchange.body().flush();
        self.exchange.stop_read();
        self.upload_stall = self.window_shut.then_some(now);
        Polled::Open
    }

    /// [`send_body`](Self::send_body)'s sending: whether the rest waits on
    /// the server's window, and whether the window let some go meanwhile.
    fn send_what_fits(
        &mut self,
        task: &mut Context<'_>,
        now: Instant,
        info: Option<&crate::events::ConnectionInfo>,
    ) -> Result<(bool, bool), Error> {
        let mut took = false;
        loop {
            let piece = match &mut self.out {
                Outgoing::Done | Outgoing::Stopped => return Ok((false, took)),
                Outgoing::Data(data) => data,
                Outgoing::Streamed(upload, declared, pending) => {
                    if pending.as_ref().is_none_or(Bytes::is_empty) {
                        // Its declared length sent: whole, whether or not
                        // the source has said it has ended (it may never).
                        if declared.whole() {
                            self.send_part(task, Bytes::new(), true, now, info)?;
                            return Ok((false, took));
                        }
                        match declared.check(upload.pull_with(task.waker())) {
                            Pulled::Data(data) => *pending = Some(data),
                            Pulled::End => {
                                self.send_part(task, Bytes::new(), true, now, info)?;
                                return Ok((false, took));
                            }
                            Pulled::Pending => return Ok((false, took)),
                            Pulled::Failed(error) => return Err(error),
                        }
                    }
                    pending.as_mut().expect("just filled")
                }
            };
            if piece.is_empty() {
                // In memory, all sent but the end.
                self.send_part(task, Bytes::new(), true, now, info)?;
                return Ok((false, took));
            }
            // `h2` takes the capacity asked for as a `u32`, cut short:
            // a piece of 4 GiB and more would ask for its length modulo
            // 4 GiB — none at all, at exactly 4 GiB left, and the stream
            // would wait for capacity for ever. No window is larger than
            // `MAX_HTTP2_WINDOW`: asking for more gains nothing.
            self.send
                .reserve_capacity(piece.len().min(MAX_HTTP2_WINDOW as usize));
            let capacity = self.send.capacity();
            if capacity == 0 {
                match self.send.poll_capacity(task) {
                    Poll::Ready(Some(Ok(_))) => continue,
                    Poll::Ready(Some(Err(e))) => return Err(error_of(&self.exchange, e)),
                    Poll::Pending => return Ok((true, took)),
                    // The stream has ended: nothing more goes, and its
                    // response says how it ended.
                    Poll::Ready(None) => {
                        self.out = Outgoing::Stopped;
                        return Ok((false, took));
                    }
                }
            }
            let part = piece.split_to(capacity.min(piece.len()));
            took = true;
            let last = piece.is_empty() && matches!(self.out, Outgoing::Data(_));
            let sent = self.send_part(task, part, last, now, info)?;
            if last || !sent {
                return Ok((false, took));
            }
        }
    }

    /// Sends `part` of the body — its last, ending the stream, if `last` —
    /// and returns whether it went. It does not if the stream has ended
    /// under it: the server reset it (maybe after a complete answer), read
    /// by the pass's connection poll before this upload's. Then nothing
    /// more goes, and the response, not this refusal, says how the stream
    /// ended.
    fn send_part(
        &mut self,
        task: &mut Context<'_>,
        part: Bytes,
        last: bool,
        now: Instant,
        info: Option<&crate::events::ConnectionInfo>,
    ) -> Result<bool, Error> {
        if let Err(error) = self.send.send_data(part, last) {
            // Not reset, nor ended otherwise: a refusal of its own.
            if self.send.poll_reset(task).is_pending() {
                return Err(error_of(&self.exchange, error));
            }
            self.out = Outgoing::Stopped;
            return Ok(false);
        }
        if last {
            self.out = Outgoing::Done;
            request_sent(&self.exchange, info, now);
        }
        Ok(true)
    }

    /// Takes what has come of the response: its head, its body into the
    /// pipe while it has room, its trailers.
    fn receive(
        &mut self,
        task: &mut Context<'_>,
        now: Instant,
        info: Option<&crate::events::ConnectionInfo>,
    ) -> Result<Polled, h2::Error> {
        loop {
            match &mut self.recv {
                Recv::Head(response) => {
                    // The interim (1xx) heads first (`h2` holds them, the
                    // final head behind them): dropped, but bounded in all.
                    // Each is the server's word on the stream, and restarts
                    // the read timeout, as a byte does over HTTP/1.1.
                    while let Poll::Ready(Some(interim)) = response.poll_informational(task) {
                        if !self.interim.fits(&interim?) {
                            self.send.send_reset(h2::Reason::CANCEL);
                            self.exchange
                                .finish_err(self.interim.too_large(&self.exchange));
                            return Ok(Polled::Gone);
                        }
                        self.exchange.mark_read(now);
                    }
                    let response = match Pin::new(response).poll(task) {
                        Poll::Pending => return Ok(Polled::Open),
                        Poll::Ready(response) => response?,
                    };
                    self.exchange.mark_read(now);
                    // A head before the request is all sent (the server
                    // answered early, and may have stopped reading it):
                    // from now on the read timeout bounds the server's
                    // silence, as it does once the request is out.
                    if !matches!(self.out, Outgoing::Done) {
                        self.exchange.start_read(now);
                        self.write_stall.end(&self.exchange);
                    }
                    let (parts, body) = response.into_parts();
                    // A HEAD's answer, a 204 or a 304 has no body, whatever
                    // length it declares (as for HTTP/1.1).
                    let declared = declared_body_length(
                        &self.exchange.request.method,
                        parts.status,
                        &parts.headers,
                    );
                    if !self.body.fits(0, declared) {
                        return Ok(self.too_large());
                    }
                    self.refused = !parts.status.is_success();
                    let exchange = &self.exchange;
                    exchange.listener.on_status(parts.status);
                    exchange.listener.on_headers(&parts.headers);
                    let head = Head {
                        status: parts.status,
                        version: http::Version::HTTP_2,
                        headers: parts.headers,
                        reason: None,
                        remote: info.map_or_else(
                            || std::net::SocketAddr::from(([0, 0, 0, 0], 0)),
                            |info| info.remote,
                        ),
                    };
                    if !exchange.deliver_head(head) {
                        self.send.send_reset(h2::Reason::CANCEL);
                        return Ok(Polled::Gone);
                    }
                    self.recv = if has_no_body(&exchange.request.method, parts.status) {
                        Recv::Bodiless(body)
                    } else {
                        Recv::Body(body)
                    };
                }
                Recv::Bodiless(body) => {
                    if !Stream::end_bodiless(&self.exchange, body, &mut self.took_reset, task, now)
                    {
                        return Ok(Polled::Open);
                    }
                    if let Polled::Gone = self.answered(None, now) {
                        return Ok(Polled::Gone);
                    }
                }
                Recv::Body(body) => {
                    let pipe = self.exchange.body();
                    if pipe.reader_gone() {
                        return Ok(self.reader_gone(task));
                    }
                    let paused = self.paused && !pipe.has_room();
                    if self.paused && !paused {
                        self.paused = false;
                        self.exchange.start_read(now);
                    }
                    let data = match body.poll_data(task) {
                        Poll::Pending if paused => return Ok(Polled::Open),
                        Poll::Pending => {
                            match push_chunks(body, pipe, self.gathered.take(), task) {
                                Pushed::Room => {}
                                Pushed::Full => {
                                    // `h2` has nothing more: waiting.
                                    self.pause();
                                    return Ok(Polled::Open);
                                }
                                Pushed::Refused => return Ok(self.reader_gone(task)),
                            }
                            pipe.flush();
                            return Ok(Polled::Open);
                        }
                        Poll::Ready(None) => {
                            if let Recv::Body(body) =
                                std::mem::replace(&mut self.recv, Recv::Moving)
                            {
                                self.recv = Recv::Trailers(body);
                            }
                            continue;
                        }
                        Poll::Ready(Some(Err(error))) => {
                            // What came before the error reaches the reader
                            // before it.
                            push_last(body, pipe, self.gathered.take());
                            return Err(error);
                        }
                        Poll::Ready(Some(Ok(data))) => data,
                    };
                    let n = data.len();
                    if !self.body.fits(n, None) {
                        return Ok(self.too_large());
                    }
                    self.exchange.listener.on_body_part(n);
                    if paused {
                        // Taken all the same, its window not given back:
                        // see `Gathered`.
                        self.gathered.add(data);
                        continue;
                    }
                    self.exchange.mark_read(now);
                    let large = if Gathered::is_small(&data) {
                        self.gathered.add(data);
                        if !self.gathered.is_full() {
                            continue;
                        }
                        None
                    } else {
                        Some(data)
                    };
                    // What is gathered, then a large frame as it came (past
                    // the window if need be: it is in memory already).
                    let chunks = self.gathered.take().into_iter().chain(large);
                    match push_chunks(body, pipe, chunks, task) {
                        Pushed::Room => {}
                        // On to what `h2` holds already, taken paused (its
                        // window not given back): see `Stream::pause`.
                        Pushed::Full => self.pause(),
                        Pushed::Refused => return Ok(self.reader_gone(task)),
                    }
                }
                Recv::Moving => return Ok(Polled::Open),
                Recv::Trailers(body) => {
                    // The body's last bytes, into the pipe past its window if
                    // need be (they are in memory already).
                    push_last(body, self.exchange.body(), self.gathered.take());
                    let trailers = match body.poll_trailers(task) {
                        Poll::Pending => return Ok(Polled::Open),
                        Poll::Ready(trailers) => trailers?,
                    };
                    if let Polled::Gone = self.answered(trailers, now) {
                        return Ok(Polled::Gone);
                    }
                }
                Recv::Ended => {
                    if self.out.is_sending() {
                        if self.exchange.body().reader_gone() {
                            return Ok(self.reader_gone(task));
                        }
                        let deadline = upload_deadline(self.upload_stall, &self.exchange);
                        if deadline.is_some_and(|deadline| now >= deadline) {
                            // The server has taken no more for the write
                            // timeout: the upload stops, the answer stands.
                            self.send.send_reset(h2::Reason::CANCEL);
                            self.out = Outgoing::Stopped;
                        }
                        // The server stops the upload: a reset (RFC 9113
                        // §8.1's `NO_ERROR`, or any other: the answer is
                        // whole already), or the connection's end. Looked
                        // for here, not only by the send: the upload's
                        // source may have nothing to give for a long time.
                        if self.send.poll_reset(task).is_ready() {
                            self.out = Outgoing::Stopped;
                        }
                    }
                    if self.out.is_sending() {
                        return Ok(Polled::Open);
                    }
                    // With the trailers held (`Exchange::hold_answer`).
                    self.exchange.complete(None);
                    return Ok(Polled::Gone);
                }
            }
        }
    }
}

/// Pushes `chunks` of the body into `pipe`, each past its window if need
/// be (they are in memory already), and gives their window back to the
/// server: `Refused` if the reader has gone, else `Full` if the pipe is.
fn push_chunks(
    body: &mut RecvStream,
    pipe: &Pipe,
    chunks: impl IntoIterator<Item = Bytes>,
    task: &Context<'_>,
) -> Pushed {
    let mut pushed = Pushed::Room;
    for chunk in chunks {
        let _ = body.flow_control().release_capacity(chunk.len());
        // Woken through the connection's waker, on its loop.
        match pipe.push(chunk, || Waiter::Task(task.waker().clone())) {
            Pushed::Refused => return Pushed::Refused,
            Pushed::Full => pushed = Pushed::Full,
            Pushed::Room => {}
        }
    }
    pushed
}

/// Pushes the body's last bytes, `chunk`, into `pipe` past its window if
/// need be (nothing more of the body will come), and gives their window
/// back.
fn push_last(body: &mut RecvStream, pipe: &Pipe, chunk: Option<Bytes>) {
    if let Some(chunk) = chunk {
        let _ = body.flow_control().release_capacity(chunk.len());
        pipe.push_last(chunk);
    }
}

/// When the upload of a stream answered whole stops for want of the
/// server's window: the write timeout of `exchange` after `stall`, when it
/// began waiting (or the window last let some go). `None` while it does
/// not wait on the window, or with no write timeout.
fn upload_deadline(stall: Option<Instant>, exchange: &Exchange) -> Option<Instant> {
    deadline_after(stall?, exchange.write_timeout()?)
}

/// The request is out whole: the read timeout starts.
fn request_sent(
    exchange: &Arc<Exchange>,
    info: Option<&crate::events::ConnectionInfo>,
    now: Instant,
) {
    if let Some(info) = info {
        exchange.listener.on_request_sent(info);
    }
    exchange.start_read(now);
}

/// `uri`, with the caller's `Host` as its authority if there is one: over
/// HTTP/2 the `:authority` says what `Host` says over HTTP/1.1 (RFC 9113
/// §8.3.1), so a caller's `Host` (a virtual host behind an address) is
/// sent there, as curl does, rather than dropped for the URI's. A value
/// that is not a host and port is left out, the URI's kept: one with
/// userinfo parses as an authority, and `:authority` must not carry it
/// (RFC 9113 §8.3.1).
fn authority_of(uri: &http::Uri, host: Option<&http::HeaderValue>) -> http::Uri {
    let Some(authority) = host
        .and_then(|h| http::uri::Authority::try_from(h.as_bytes()).ok())
        .filter(|authority| !authority.as_str().contains('@'))
    else {
        return uri.clone();
    };
    let mut parts = uri.clone().into_parts();
    parts.authority = Some(authority);
    http::Uri::from_parts(parts).unwrap_or_else(|_| uri.clone())
}

/// The HTTP/2 request of `exchange`, and its body; `None` if the exchange
/// has ended meanwhile (its bytes are gone: nothing of it may go).
fn request_of(exchange: &Exchange) -> Option<(http::Request<()>, Outgoing)> {
    use http::header;
    let parts = &exchange.request;
    let payload = parts.payload();
    if payload.released {
        return None;
    }
    // Connection-specific fields have no place in HTTP/2 (RFC 9113
    // §8.2.2) — but `TE: trailers`, put back below; `Host` is the
    // `:authority` the URI gives.
    let specific = |name: &header::HeaderName| {
        matches!(
            *name,
            header::CONNECTION
                | header::TRANSFER_ENCODING
                | header::UPGRADE
                | header::HOST
                | header::EXPECT
                | header::TE
        ) || name.as_str() == "keep-alive"
            || name.as_str() == "proxy-connection"
    };
    // A caller's `Host` and `TE` are among these: looked up only if one
    // is there (not in the common case, with no lookup at all).
    let has_specific = parts.headers.keys().any(specific);
    let host = has_specific
        .then(|| parts.headers.get(header::HOST))
        .flatten();
    let mut request = http::Request::new(());
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = authority_of(exchange.listener.request().uri(), host);
    *request.version_mut() = http::Version::HTTP_2;
    let headers = request.headers_mut();
    if has_specific {
        let named = connection_options(&parts.headers);
        let named = |name: &header::HeaderName| {
            named
                .iter()
                .any(|option| option.eq_ignore_ascii_case(name.as_str().as_bytes()))
        };
        for (name, value) in parts.headers.iter() {
            if !specific(name) && !named(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        if asks_for_trailers(&parts.headers) {
            headers.insert(header::TE, http::HeaderValue::from_static("trailers"));
        }
    } else {
        // The common case: all of them, copied whole (no hashing).
        headers.clone_from(&parts.headers);
    }
    let out = match &parts.body {
        RequestBody::Streamed(streamed) => {
            if let Some(length) = streamed.length {
                headers
                    .entry(header::CONTENT_LENGTH)
                    .or_insert_with(|| length.into());
            }
            Outgoing::Streamed(
                Upload::take_bare(exchange),
                Declared::new(streamed.length),
                None,
            )
        }
        RequestBody::InHead | RequestBody::Held if payload.data.is_empty() => Outgoing::Done,
        RequestBody::InHead | RequestBody::Held => {
            headers
                .entry(header::CONTENT_LENGTH)
                .or_insert_with(|| payload.data.len().into());
            Outgoing::Data(payload.data.clone())
        }
    };
    Some((request, out))
}

/// The field names the caller's `Connection` lists: connection-specific
/// too (RFC 9110 §7.6.1), for this hop alone, so off HTTP/2 with the
/// `Connection` that said so (RFC 9113 §8.2.2) — sent without it, a
/// field meant for the next hop only would reach the origin as its own.
fn connection_options(headers: &http::HeaderMap) -> Vec<&[u8]> {
    headers
        .get_all(http::header::CONNECTION)
        .iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|option| !option.is_empty())
        .collect()
}

/// Whether the caller's `TE` lists `trailers`: HTTP/2 keeps that one
/// connection field, saying `trailers` and nothing else (RFC 9113 §8.2.2,
/// and `h2` refuses any other value). gRPC servers want it, and some send
/// trailers only when asked so (hypercorn); over HTTP/1.1 it goes with
/// `Connection: te`.
fn asks_for_trailers(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(http::header::TE)
        .iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b','))
        .filter_map(|coding| coding.split(|&b| b == b';').next())
        .any(|coding| coding.trim_ascii().eq_ignore_ascii_case(b"trailers"))
}

/// The error of a stream that the connection's end took with it after the
/// server's `GOAWAY` with `reason`.
fn goaway_failure(exchange: &Exchange, reason: Http2Reason) -> Error {
    Error::Http2 {
        remote: exchange.remote_name(),
        reason,
        initiator: Http2Initiator::Remote,
        connection: true,
        unprocessed: false,
    }
}

/// `failure`, of a request no server has processed on this connection
/// (never sent, or refused), marked so ([`Error::is_unprocessed`]) —
/// unless an earlier attempt of it may have been processed elsewhere.
fn not_processed(exchange: &Exchange, failure: Error) -> Error {
    failure.with_unprocessed(!exchange.maybe_processed.load(Ordering::Acquire))
}

/// The error of a request on a connection whose server refused the TLS
/// handshake once the client had finished its side (a TLS 1.3 server
/// refusing the client's certificate: see
/// [`IoReadiness::handshake_failure`]), however `h2` told the failure: the
/// same on any connection to that server, so never a reason to send the
/// request elsewhere.
#[cfg(feature = "rustls")]
fn refusal(io_ready: &IoReadiness, exchange: &Exchange) -> Option<Error> {
    let tls = io_ready.handshake_failure()?;
    Some(Error::tls(exchange.remote_name(), tls.clone()))
}

/// Without TLS, no handshake to refuse.
#[cfg(not(feature = "rustls"))]
fn refusal(_: &IoReadiness, _: &Exchange) -> Option<Error> {
    None
}

/// The error of a stream, or of a request gone elsewhere once already,
/// when the server closed the connection with no code.
fn closed_failure(exchange: &Exchange) -> Error {
    Error::Io {
        remote: exchange.remote_name(),
        source: io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the HTTP/2 connection",
        ),
    }
}

/// The client's error for an `h2` error on `exchange`'s stream.
fn error_of(exchange: &Exchange, error: h2::Error) -> Error {
    let remote = exchange.remote_name();
    if let Some(reason) = error.reason() {
        return Error::Http2 {
            remote,
            reason: Http2Reason(reason.into()),
            initiator: if error.is_remote() {
                Http2Initiator::Remote
            } else {
                Http2Initiator::Local
            },
            connection: error.is_go_away(),
            unprocessed: false,
        };
    }
    let source = if error.is_io() {
        error
            .into_io()
            .unwrap_or_else(|| io::Error::other("HTTP/2 I/O error"))
    } else {
        io::Error::other(error.to_string())
    };
    Error::Io { remote, source }
}

/// Whether an open transport negotiated HTTP/2 by ALPN.
pub(super) fn negotiated(transport: &Transport) -> bool {
    transport.alpn_protocol() == Some(b"h2")
}
