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
//! would refuse — or fewer, if another connection of its origin has
//! heard its server allow fewer ([`streams_before_settings`]). The
//! connection publishes how many streams it has taken
//! and may take ([`StreamLoad`]), from which the dispatcher picks the connection of
//! an origin with a free stream, or opens another
//! ([`http2_max_connections_per_origin`](crate::ClientBuilder::http2_max_connections_per_origin)).
//! A server that lowers its limit below the streams open, or to 0 (by
//! SETTINGS, with no `GOAWAY`), leaves the requests waiting here no room
//! until more streams end than it said: they go to another connection of
//! the origin if the dispatcher has a place for them, and wait here
//! otherwise ([`Conn::move_waiting_off`]) — on a spare connection too (one
//! not shared, the origin having its connections by then), whose server
//! may allow no stream from its first SETTINGS. A limit merely reached
//! keeps them: a stream's end frees room.
//!
//! A request whose header section is larger than the server's
//! `SETTINGS_MAX_HEADER_LIST_SIZE` ([`IoReadiness::max_header_list_size`];
//! `h2` sends it all the same, and a server may end the connection for
//! it, every stream on it failing) is not sent: it fails with
//! [`Error::HeadersTooLarge`], and the connection goes on.
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
//! a 204, a 304) has none here either, and is whole at its head, as over
//! HTTP/1.1: the exchange completes there, not at the stream's end, which
//! a server may never send; the stream, unless the server has ended it
//! already, is reset with `CANCEL` as it leaves rather than held open
//! until it does ([`Stream::end_bodiless`] says why), and DATA sent all
//! the same is dropped. A stream `h2` has reset already for the server's
//! error (a 304 declaring a length, ended by an empty DATA frame) is such
//! an answer too, but `h2` counts the reset towards ending the
//! connection: before it would, the connection retires, see
//! [`Http2::taken_resets`]. So does one whose server has sent many empty
//! DATA frames that leave their stream open, which `h2` counts towards
//! ending it too ([`EMPTY_DATA_MAX`]).
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
//!   code of the server's last `GOAWAY` — a graceful one may be followed
//!   by one with an error — if the connection ends under them
//!   ([`Conn::check_goaway`]; after `NO_ERROR`, as on any connection closed
//!   under them, below). With streams left,
//!   a PING follows the `GOAWAY` ([`Http2::probe_departure`]): a server
//!   that will answer none of them (hypercorn) takes it as an error and
//!   closes at once, and they end as on any connection closed under them
//!   (below), rather than when its idle timeout closes it.
//! * The connection's end (an error, or the server closing): its streams
//!   fail, but one whose response had come whole — the rest of its body
//!   in `h2`'s buffer behind a full pipe, or its upload still going
//!   ([`Recv::Ended`]) — completes; the requests waiting here go
//!   elsewhere, once, as for a `GOAWAY`. A keep-alive PING with no answer
//!   fails the streams (but those answered whole, as above) with
//!   [`Error::KeepAliveTimeout`] and sends the waiting requests elsewhere.
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
//!
//! # Layout
//!
//! This module is the connection: [`Http2`] and the methods of [`Conn`]
//! that drive it — its streams opened and polled, requests waiting for
//! one, its departure, its end, its timer. [`stream`] is one exchange's
//! stream (its upload, its response, its end); [`request`] makes its
//! request's HTTP/2 head; [`limits`] bounds its response's bytes;
//! [`failure`] makes the errors it and the waiting requests end with;
//! [`gather`], [`table`] and [`wake`] hold a stream's gathered DATA, the
//! streams by key and exchange, and the wakers that mark them.

mod failure;
mod gather;
mod limits;
mod request;
mod stream;
mod table;
#[cfg(test)]
mod tests;
mod wake;

use super::write_stall::WriteStall;
use super::{Conn, SharedConn, State, StreamLoad, H2_TIMER};
use crate::error::{Error, Http2Initiator, Http2Reason, TimeoutKind};
use crate::event_loop::Readiness;
use crate::event_loop::{LoopContext, SourceWaker};
use crate::exchange::{deadline_after, ConnSlot, Exchange};
use crate::net::{AsyncIo, IoReadiness, Transport};
use bytes::Bytes;
use failure::{closed_failure, error_of, goaway_failure, refusal};
use gather::Gathered;
use h2::client::{Connection, SendRequest};
use limits::{BodyCount, FieldCount, InterimCount, TrailerSize};
use request::{header_list_size, request_of};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use stream::{request_sent, Polled, Recv, Stream};
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

/// Streams a new connection opens at most before its server's SETTINGS
/// say how many it takes: [`STREAMS_BEFORE_SETTINGS`], or fewer if the
/// origin's other shared connections may run fewer at once (`shared`,
/// the fewest of theirs), or the one that sent its request on to it could
/// (`heard`: [`Exchange::stream_limit_heard`]) — their server said so, and
/// the same server is most likely behind this one. Otherwise a burst
/// refused past the limit on the first connection (sent before its
/// server's SETTINGS came) would go again to a second one, opened as the
/// first is at its limit, in that one's first flight — past the limit
/// again, refused again, and each request refused twice fails; and so
/// would the requests a `GOAWAY` sends to a new connection, their one
/// move spent. At least 1: on a connection whose server said 0, one goes,
/// and its own server's SETTINGS tell the rest.
fn streams_before_settings(shared: Option<usize>, heard: Option<usize>) -> usize {
    shared
        .into_iter()
        .chain(heard)
        .min()
        .map_or(STREAMS_BEFORE_SETTINGS, |limit| {
            limit.clamp(1, STREAMS_BEFORE_SETTINGS)
        })
}

/// Streams `h2` resets for the server's protocol errors over a connection's
/// life, at most, before it ends the connection with
/// `GOAWAY(ENHANCE_YOUR_CALM)`, every stream on it failing
/// (`max_local_error_reset_streams`, 1024 by default; never counted down).
/// Kept: it bounds the resets a hostile server has the client queue
/// (RUSTSEC-2024-0003), with frames on streams long closed for instance.
const LOCAL_RESETS_MAX: usize = 1024;

/// Streams the client has reset whose late frames `h2` ignores
/// (`max_concurrent_reset_streams`; 50 by default), for a second after
/// each reset (`reset_stream_duration`): RFC 9113 §5.4.2 has an endpoint
/// that resets a stream take the frames already on their way for it, and
/// count them only for flow control. A frame on a reset stream `h2` no
/// longer remembers is taken as the server's error instead: the stream
/// is reset again (`STREAM_CLOSED`) and that reset counts towards
/// [`LOCAL_RESETS_MAX`] — so a burst of cancels or timeouts past the
/// default (a caller dropping many streaming bodies at once) had each
/// frame still on its way count, and a few such bursts ended the
/// connection with `GOAWAY(ENHANCE_YOUR_CALM)`, failing every stream on
/// it. Remembered here: all the streams a connection may have open at
/// once on servers' usual limits (100 to 1000), several times over, for
/// that second. Each is one entry of `h2`'s stream table, a few hundred
/// bytes; a hostile server gains nothing by it — the streams remembered
/// are the client's own resets, and the resets for the server's errors
/// stay bounded by [`LOCAL_RESETS_MAX`].
const RESETS_REMEMBERED: usize = 4 * LOCAL_RESETS_MAX;

/// Resets of `h2`'s that the client took as answers (see
/// [`Stream::end_bodiless`]), with the streams open that may add one each,
/// past which a connection retires ([`Http2::taken_resets`]): the rest of
/// [`LOCAL_RESETS_MAX`] is left for the server's errors that fail streams.
const TAKEN_RESETS_MAX: usize = LOCAL_RESETS_MAX * 3 / 4;

/// Empty DATA frames that do not end their stream that `h2` takes over a
/// connection's life before it ends the connection with
/// `GOAWAY(ENHANCE_YOUR_CALM)`, failing every stream on it
/// (`MAX_RECV_EMPTY_DATA_FRAMES`, not a setting; h2 #935, against a flood
/// of them, which flow control does not bound). A server may send one an
/// answer (a gateway on hyper relaying a chunked body did,
/// smg-project/smg#2488), and every 101st answer failed, with every
/// stream open beside it.
const EMPTY_DATA_MAX: usize = 100;

/// Empty DATA frames ([`IoReadiness::empty_data_frames`]), with the
/// streams open that may bring one each, past which a connection retires
/// ([`worn_out`]): the rest of [`EMPTY_DATA_MAX`] is left for streams
/// that bring more.
const EMPTY_DATA_RETIRE: usize = EMPTY_DATA_MAX * 3 / 4;

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
    /// No new stream: the server sent `GOAWAY`, the connection is failing
    /// ([`Http2::goes_away_for`]), or it retires.
    going_away: bool,
    /// The error code of the server's latest `GOAWAY`, if it had one: what
    /// a stream it processed and that fails afterwards reports.
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
    /// [`TAKEN_RESETS_MAX`], the connection retires ([`worn_out`]).
    taken_resets: usize,
    /// A keep-alive PING is out since then.
    ping_sent: Option<Instant>,
    /// The server's departure has been probed (see
    /// [`Http2::probe_departure`]): once a connection.
    probed: bool,
    last_ping: Instant,
    /// Streams it opens at most before its server's SETTINGS come
    /// ([`streams_before_settings`]).
    before_settings: usize,
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

/// Why a connection takes no more streams.
#[derive(Clone, Copy)]
enum Departure {
    /// The server's GOAWAY, with its code.
    GoAway(h2::Reason),
    /// The connection's failure, no `GOAWAY` of the server's seen: the
    /// server closed it, an I/O error, or an error of `h2`'s own (which
    /// sends the client's `GOAWAY`).
    Server,
    /// Past its time to live (`connection_ttl`): it finishes its streams.
    Retired,
}

/// The code of the server's `GOAWAY` that `error` (from `poll_ready`)
/// shows: only the server's word — not an error of the connection's own
/// (I/O, or one `h2` found, which has a code too and sends its own
/// `GOAWAY`).
fn server_goaway(error: &h2::Error) -> Option<h2::Reason> {
    error
        .reason()
        .filter(|_| error.is_remote() && error.is_go_away())
}

/// The error code of the server's `GOAWAY` ([`server_goaway`]), if it is
/// an error, not `NO_ERROR`.
fn goaway_error_code(error: &h2::Error) -> Option<Http2Reason> {
    let reason = server_goaway(error)?;
    (reason != h2::Reason::NO_ERROR).then(|| Http2Reason(reason.into()))
}

/// The departure `error` (from `poll_ready`) tells: the server's `GOAWAY`
/// with its code, or — an error of the connection's own — its end, no
/// code known.
fn departure_of(error: &h2::Error) -> Departure {
    server_goaway(error).map_or(Departure::Server, Departure::GoAway)
}

/// Whether a connection has taken so much of what `h2` allows over a
/// connection's life — `taken_resets`, resets taken as answers
/// ([`TAKEN_RESETS_MAX`]); `empty_data`, empty DATA frames
/// ([`EMPTY_DATA_RETIRE`]) — that, each of its `open` streams adding one
/// more, it could reach the limit: it takes no new stream then, and
/// retires, as one past its time to live does, rather than have `h2` end
/// it under its streams.
fn worn_out(taken_resets: usize, empty_data: usize, open: usize) -> bool {
    (taken_resets > 0 && taken_resets + open >= TAKEN_RESETS_MAX)
        || (empty_data > 0 && empty_data + open >= EMPTY_DATA_RETIRE)
}

impl Http2 {
    /// `poll_ready` failed with `error`: the server's `GOAWAY` (it shows
    /// the last one read), or the connection is failing. The connection
    /// takes no more streams, and records the error code that `GOAWAY`
    /// names, if it names one ([`goaway_error_code`]), for the streams
    /// that fail afterwards (see `goaway_error`: a `NO_ERROR` leaves what a
    /// `GOAWAY` before it said). Returns the departure `error` tells
    /// ([`departure_of`]) if the connection was not going away already:
    /// [`Conn::went_away`] hears of a departure once, at its first word.
    fn goes_away_for(&mut self, error: &h2::Error) -> Option<Departure> {
        let went_before = std::mem::replace(&mut self.going_away, true);
        if let Some(code) = goaway_error_code(error) {
            self.goaway_error = Some(code);
        }
        (!went_before).then(|| departure_of(error))
    }

    /// Gives `h2` the resets held back (the next poll of the connection
    /// writes them).
    fn give_resets(&mut self) {
        for mut stream in self.resets.drain(..) {
            stream.send.send_reset(h2::Reason::CANCEL);
        }
    }

    /// The most streams it may run at once, as it last counted them
    /// ([`StreamLoad::limit`]).
    pub(super) fn load_limit(&self) -> usize {
        self.load.limit()
    }

    /// How many streams may be open at once: the server's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` ([`streams_before_settings`] until
    /// its SETTINGS come), and the client's own limit (`client`).
    fn stream_limit(&self, client: Option<usize>) -> usize {
        let server = match &self.phase {
            Phase::Open { conn, .. } => conn.max_concurrent_send_streams(),
            Phase::Handshaking(_) => self.before_settings,
            Phase::Ended => 0,
        };
        client.map_or(server, |client| client.min(server))
    }

    /// Whether requests wait here with no room short of the server's
    /// changing its mind: its limit lowered (by SETTINGS, with no GOAWAY)
    /// to 0, or below the streams open — not merely reached, when the
    /// streams' ends free room — on a connection not going away, shared
    /// or a spare (whose server may allow no stream from its first
    /// SETTINGS: nobody else comes to a spare, and its request would wait
    /// there for its timeout, for ever without one, though the shared
    /// connection had room). Checked in that order: most drives find
    /// nothing waiting.
    fn holds_waiting(&self, client: Option<usize>) -> bool {
        if self.queue.is_empty() || self.going_away {
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
    /// is a protocol error to it then: it sends `GOAWAY(PROTOCOL_ERROR)`
    /// and closes) or after its keep-alive timeout
    /// (5 s). Probed, it closes at once, and those streams end as on any
    /// connection closed under them (see [`Stream::may_go_again_after_close`]:
    /// one that may go twice goes again, once; the others fail, not marked
    /// unprocessed, naming that `GOAWAY`'s code) instead of waiting out the
    /// server's timeout or their own. A keep-alive PING out already stands for the probe (`h2` has
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
        let before_settings = streams_before_settings(
            self.owner.shared_stream_limit(&self.route),
            exchange.stream_limit_heard(),
        );
        let mut builder = h2::client::Builder::new();
        builder
            .enable_push(false)
            .initial_max_send_streams(before_settings)
            .initial_window_size(options.initial_stream_window)
            .initial_connection_window_size(options.initial_connection_window)
            .max_frame_size(options.max_frame_size)
            .max_header_list_size(options.max_header_list_size)
            // Set, not left to `h2`'s default: `TAKEN_RESETS_MAX` is
            // measured against it.
            .max_local_error_reset_streams(Some(LOCAL_RESETS_MAX))
            .max_concurrent_reset_streams(RESETS_REMEMBERED);
        #[cfg(test)]
        if let Some(id) = options.first_stream_id {
            builder.initial_stream_id(id);
        }
        let prior_knowledge = !negotiated(&transport);
        let (io, io_ready) = AsyncIo::new(transport, Bytes::from(early), prior_knowledge);
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
            ping_sent: None,
            probed: false,
            last_ping: now,
            before_settings,
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
                    h2.io_ready.opened();
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
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` ([`streams_before_settings`]
    /// until its SETTINGS come) and the client's own limit.
    fn publish_load(&self) {
        let State::H2(h2) = &self.state else {
            return;
        };
        let limit = h2.stream_limit(self.env().config.http2.max_concurrent_streams);
        // The queue's length, not a look at each request (called for each
        // request taken, and each pass: a burst queued at the stream limit
        // cost its length squared). A queued request that ends from
        // outside (a timeout, a cancel, the client closing) has its abort
        // on the way to this loop, which takes it out of the queue and
        // publishes again ([`Conn::abort_h2`]): until then it counts, as
        // a request ended since the last count always did.
        let waiting = h2.queue.len();
        h2.load.publish(h2.streams.len() + waiting, waiting, limit);
    }

    /// The server's limit has dropped below the streams open here, or to
    /// 0 ([`Http2::holds_waiting`]): the requests waiting for a stream
    /// go to another connection of the origin, oldest first, while the
    /// dispatcher has a place for them there — a stream free, the
    /// connection being opened, room for a new one. Waiting here they
    /// would wait for more streams to end than the server said, or for
    /// the server to change its mind, up to their request timeout. Those
    /// with no other place stay (on the one shared connection of an origin
    /// allowed one, all of them: the server has the last word), and look
    /// again every [`HELD_RECHECK`] where the origin may have another (a
    /// spare's has: the shared one). Nothing of them
    /// was sent, and the move is the client's, not a failure: it does not
    /// use up their one retry.
    ///
    /// A hedged copy has fewer places than the others: never a connection
    /// where an attempt it keeps away from runs (the one it backs up, on
    /// the shared connection, is why a copy waits on a spare at all), nor
    /// a spare of its own, which the same server may hold as it held this
    /// one (see [`ConnOwner::has_place_besides`](super::ConnOwner::has_place_besides)).
    /// One with no place stays, and those after it are looked at still.
    fn move_waiting_off(&mut self) {
        let Some(id) = self.info.as_ref().map(|info| info.id) else {
            return;
        };
        let client_limit = self.env().config.http2.max_concurrent_streams;
        let mut at = 0;
        loop {
            let State::H2(h2) = &mut self.state else {
                return;
            };
            if !h2.holds_waiting(client_limit) {
                return;
            }
            let Some(exchange) = h2.queue.get(at).cloned() else {
                return;
            };
            // Asked for each: the place the last took may have been the
            // only one.
            if self.owner.has_place_besides(&self.route, id, &exchange) {
                if let State::H2(h2) = &mut self.state {
                    h2.queue.remove(at);
                }
                self.send_elsewhere(exchange);
            } else if exchange.is_backup() {
                at += 1;
            } else {
                return;
            }
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
        let Some(waiters) = self.owner.share(&self.route, shared, self.opener) else {
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
        let mut departure = Departure::Server;
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
            let empty_data = h2.io_ready.empty_data_frames();
            if worn_out(h2.taken_resets, empty_data, h2.streams.len()) {
                // Each open stream may add one more: the connection takes
                // no new one, and retires.
                worn = true;
                h2.going_away = true;
                break;
            }
            match send.poll_ready(task) {
                Poll::Pending => break,
                Poll::Ready(Err(error)) => {
                    // GOAWAY, or the connection is failing: it takes no
                    // more streams, and gives back what waits (below). Not
                    // going away before (the loop's first check).
                    if let Some(why) = h2.goes_away_for(&error) {
                        departure = why;
                    }
                    break;
                }
                Poll::Ready(Ok(())) => {}
            }
            let Some(exchange) = h2.queue.pop_front() else {
                break;
            };
            // Ended since the check above.
            let Some((request, body)) = request_of(&exchange) else {
                continue;
            };
            // Past the server's limit, the request is not sent (`h2` would
            // send it): a server may end the whole connection for it.
            if let Some(limit) = h2.io_ready.max_header_list_size() {
                let size = header_list_size(&request);
                if size > limit {
                    let error = Error::HeadersTooLarge {
                        remote: exchange.remote_name(),
                        size,
                        limit,
                        unprocessed: true,
                    };
                    exchange.finish_err(exchange.unprocessed(error));
                    continue;
                }
            }
            let end_of_stream = body.ends_stream();
            // Told before `send_request`, which takes the request: as
            // it is given to HTTP/2, nothing copied.
            if let Some(info) = &info {
                let head = crate::events::RequestHead::http2(&request);
                exchange.listener.on_request_head(info, &head);
                // The listener's code ran: the exchange may have ended
                // meanwhile (the listener cancelled it, or a timeout on
                // the wheel while it ran). Its caller has been told it
                // failed, and nothing of it may go.
                if exchange.is_done() {
                    continue;
                }
            }
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
                    // Taken now that its stream is open (not before: a
                    // request `send_request` refused goes again whole).
                    let out = body.opened(&exchange);
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
                            body: BodyCount {
                                limit: self.owner.env().config.limits.max_body_bytes,
                                received: 0,
                            },
                            interim: InterimCount {
                                limit: self.owner.env().config.limits.max_head_bytes,
                                received: 0,
                            },
                            fields: FieldCount {
                                limit: self.owner.env().config.limits.max_headers,
                            },
                            trailer_size: TrailerSize {
                                limit: self.owner.env().config.limits.max_trailer_bytes,
                            },
                            reused: h2.served,
                            took_reset: false,
                            refused: false,
                        },
                    );
                }
                Err(error) => {
                    if error.is_go_away() || error.is_io() {
                        // Not sent: it goes elsewhere, whole (a streamed
                        // body's source is taken only as its stream
                        // opens), where its head, told above, is told
                        // again (as `EventListener::on_request_head` says).
                        h2.going_away = true;
                        h2.queue.push_front(exchange);
                        break;
                    }
                    let error = error_of(&exchange, error);
                    exchange.finish_err(error);
                }
            }
        }
        self.went_away(if ids_spent || worn {
            Departure::Retired
        } else {
            departure
        });
    }

    /// Looks for the server's `GOAWAY` (it shows first in `poll_ready`,
    /// streams waiting or not), and records its error code
    /// ([`Http2::goes_away_for`]) — the latest `GOAWAY`'s, checked again
    /// on every pass while the connection goes away: a server may follow
    /// a `GOAWAY(NO_ERROR)` with one carrying an error (RFC 9113 §6.8;
    /// hypercorn does at the next frame that comes, then closes), and `h2`
    /// shows the last it read. Whether the client polled between the two
    /// depends on how the bytes came; the streams' error must not.
    /// So it is checked after every read of the connection: an I/O error
    /// read later (the server's reset after its `GOAWAY`) replaces, in
    /// `h2`, the `GOAWAY` a read before it brought.
    fn check_goaway(&mut self, task: &mut Context<'_>) {
        let State::H2(h2) = &mut self.state else {
            return;
        };
        let Phase::Open { send, .. } = &mut h2.phase else {
            return;
        };
        let Poll::Ready(Err(error)) = send.poll_ready(task) else {
            return;
        };
        if let Some(why) = h2.goes_away_for(&error) {
            self.went_away(why);
        }
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
        }
        // Told of the server's `GOAWAY` only (`on_goaway`): a connection
        // that fails or retires sent none. Shared or not: a spare (never
        // in the shared list) hears its server's `GOAWAY` as well, and
        // the listener is told of it all the same.
        let code = match why {
            Departure::GoAway(reason) => Some(u32::from(reason)),
            Departure::Server | Departure::Retired => None,
        };
        if let (Some(info), Some(code)) = (&info, code) {
            // No exchange's event: a panic of the listener's here is let
            // go, and fails none of the connection's streams.
            let listener = &self.owner.env().config.listener;
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                listener.on_goaway(info, Http2Reason(code));
            }));
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
                    exchange.unprocessed(goaway_failure(exchange, Http2Reason(reason.into())))
                }),
                Departure::Server => self.send_elsewhere_once(exchange, closed_failure),
            }
        }
    }

    /// A request that was never sent goes to another connection.
    fn send_elsewhere(&self, exchange: Arc<Exchange>) {
        self.send_to_another(exchange, true);
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
        // An end the socket held back meanwhile may go to `h2` now.
        h2.io_ready.streams_polled();
        for (exchange, allow_idle) in retry {
            self.send_to_another(exchange, allow_idle);
        }
    }

    /// The exchange `exchange_id` ended from outside (a timeout, a cancel,
    /// the client closing): its stream is reset with `CANCEL`, the others
    /// go on. The reset goes at the connection's next drive, asked for
    /// after the loop's other work: the loop aborts the exchanges a burst
    /// of expiries failed together, in a gap after it (see
    /// `EventLoop::close_aborted`), and their resets share one write. That
    /// drive's ending publishes the load, closes a connection left with
    /// nothing to serve, asks about the permit and arms the timer; a
    /// request taken out of the queue brings no drive, and has them done
    /// here. An exchange found in neither (ended meanwhile on this
    /// connection) changes nothing.
    pub(super) fn abort_h2(&mut self, cx: &mut LoopContext<'_>, exchange_id: u64) {
        let State::H2(h2) = &mut self.state else {
            return;
        };
        // Looked for from the front, and no further than found: requests
        // that queued together with one timeout end in the order they
        // queued, each then the first — a burst of them costs its length,
        // not its length squared (each abort a look at every request).
        if let Some(at) = h2.queue.iter().position(|e| e.id == exchange_id) {
            h2.queue.remove(at);
        } else {
            let Some(stream) = h2.streams.remove_exchange(exchange_id) else {
                return;
            };
            h2.resets.push(stream);
            self.owner
                .env()
                .streams
                .open
                .fetch_sub(1, Ordering::Relaxed);
            cx.ready_again();
            return;
        }
        if h2.streams.is_empty() && h2.queue.is_empty() {
            // Not in the pool's shared list (a spare, or one that went
            // away): nobody else will come to it, and it closes, as the
            // drive closes one whose last stream has ended. Not while its
            // handshake is under way: it is not shared yet, and may be
            // once that is done (else the drive closes it then).
            if !h2.shared && !matches!(h2.phase, Phase::Handshaking(_)) {
                return self.close(cx);
            }
            if h2.idle_since.is_none() {
                h2.idle_since = Some(self.owner.env().clock.now());
            }
        }
        self.publish_load();
        if self.give_permit_if_wanted(cx) {
            return;
        }
        // The timer for what is left: the request taken out may have left
        // the connection idle — its idle timeout to arm — or no request
        // held back any more, for the recheck to wake for.
        self.arm_h2_timer(cx);
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

    /// The connection has ended (`error`, or the server closed it): its
    /// streams end as [`give_up_h2`](Self::give_up_h2) has them, with the
    /// error this end makes for each.
    fn end_h2(&mut self, cx: &mut LoopContext<'_>, error: Option<h2::Error>) {
        let State::H2(h2) = &mut self.state else {
            return;
        };
        h2.phase = Phase::Ended;
        let goaway_error = h2.goaway_error;
        let reason = error.as_ref().and_then(h2::Error::reason);
        let remote = error.as_ref().is_some_and(h2::Error::is_remote);
        let io = error.and_then(h2::Error::into_io);
        let io_ready = h2.io_ready.clone();
        self.give_up_h2(cx, |exchange| {
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
        });
    }

    /// The connection ends under its streams — it failed, the server
    /// closed it, or its keep-alive PING had no answer — and closes. The
    /// streams whose answer has come whole — waiting for their upload's
    /// end ([`Recv::Ended`]), or with that end in `h2`'s buffer behind a
    /// full pipe — complete with it ([`Stream::finish_from_buffer`]); the
    /// others fail with the error `error_for` makes; the requests still
    /// waiting were never sent, and go elsewhere once, as for a `GOAWAY`.
    /// (The client's close and a panic fail every stream, whole or not:
    /// [`fail_h2`](Self::fail_h2).)
    fn give_up_h2(&mut self, cx: &mut LoopContext<'_>, error_for: impl Fn(&Exchange) -> Error) {
        let State::H2(h2) = &mut self.state else {
            return;
        };
        // Before the close: `h2`'s connection, if it lives still (the
        // PING's timeout), marks as it drops every stream not closed both
        // ways failed, which hides the end of one still sending its body
        // (see `Stream::pause`). And while the streams are in the table:
        // should `h2`'s code panic, `Source::panicked` fails those left.
        let whole = h2.streams.retain(|stream| !stream.finish_from_buffer());
        let streams = h2.streams.take_all();
        let waiting: Vec<_> = h2.queue.drain(..).collect();
        let io_ready = h2.io_ready.clone();
        // Told now: they go elsewhere once the connection has closed.
        for exchange in &waiting {
            exchange.hear_stream_limit(h2.load_limit());
        }
        self.close(cx);
        let counts = &self.owner.env().streams;
        counts
            .open
            .fetch_sub(whole + streams.len(), Ordering::Relaxed);
        for stream in streams {
            stream.exchange.finish_err(error_for(&stream.exchange));
        }
        // Nothing of these was sent.
        for exchange in waiting {
            match refusal(&io_ready, &exchange) {
                Some(refused) => drop(exchange.finish_err(refused)),
                None => self.send_elsewhere_once(exchange, |exchange| {
                    exchange.unprocessed(error_for(exchange))
                }),
            }
        }
    }

    /// Fails every stream and waiting request with `error` and closes (the
    /// loop shuts down, or code run for the connection panicked): a stream
    /// whose answer has come whole too — the client's close fails it, as
    /// over HTTP/1.1 ([`Exchange::hold_answer`]).
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
                Some(sent) => options
                    .keep_alive_timeout
                    .and_then(|timeout| deadline_after(sent, timeout)),
                None => deadline_after(h2.last_ping, interval),
            });
        let ttl = config
            .connection_ttl
            .filter(|_| !h2.going_away)
            .and_then(|ttl| deadline_after(self.created, ttl));
        // Requests held here by a lowered limit, no other place for them
        // then: looked at again soon, another connection may have freed a
        // stream (see `move_waiting_off`). A spare always has another (the
        // shared one it was refused beside); a shared connection, with one
        // connection per origin, none that ever will.
        let held = (options.max_connections_per_origin > 1 || !h2.shared)
            && h2.holds_waiting(options.max_concurrent_streams);
        let recheck = held.then(|| self.now() + HELD_RECHECK);
        let next = [idle, ping, ttl, recheck].into_iter().flatten().min();
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
        let State::H2(h2) = &mut self.state else {
            return;
        };
        if let Some(interval) = options.keep_alive_interval {
            match h2.ping_sent {
                Some(sent) => {
                    let overdue = |timeout| deadline_after(sent, timeout).is_some_and(|d| now >= d);
                    if let Some(timeout) = options.keep_alive_timeout.filter(|&t| overdue(t)) {
                        // The requests waiting for a stream were never
                        // sent: they go elsewhere; the streams fail, but
                        // those whose answer came whole.
                        self.went_away(Departure::Retired);
                        return self.give_up_h2(cx, |exchange| {
                            Error::timeout_of(
                                TimeoutKind::KeepAlive,
                                exchange.remote_name(),
                                timeout,
                            )
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

/// Whether an open transport negotiated HTTP/2 by ALPN.
pub(super) fn negotiated(transport: &Transport) -> bool {
    transport.alpn_protocol() == Some(b"h2")
}
