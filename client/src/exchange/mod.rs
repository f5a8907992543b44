//! [`Exchange`]: one request and its response in flight — its state, its
//! outcome and its timers.
//!
//! An exchange is shared by the caller's future and body, the connection
//! that runs it, and its timer entries (on the wheel or that connection's
//! loop). Any of them may end it; ending is decided once, with a single
//! atomic flag, and the loser of a race (a completion against an expiry, a
//! cancel against either) does nothing.
//!
//! # Two phases
//!
//! The caller's future resolves with the response **head**
//! ([`Exchange::deliver_head`]); the body follows through a bounded
//! [`Pipe`]. The exchange ends when the body has been read off the
//! connection ([`Exchange::complete`]) or fails: an error before the head
//! goes to the future, after it to the body's reader. Its timers run until
//! it ends — the request timeout bounds the body too — except that the read
//! timeout pauses while the pipe is full ([`Exchange::pause_read`]): a
//! reader that does not read is not a silent server.
//!
//! # Where its timeouts live
//!
//! On the client's wheel by default. With
//! [`use_event_loop_timeouts`](crate::ClientBuilder::use_event_loop_timeouts)
//! (which explains the trade-off), on the heap of the loop that owns the
//! exchange's connection, and nowhere else. "Where" is decided in one place,
//! [`Exchange::attach`], from the connection slot it fills:
//!
//! * pooled path: the idle connection is attached ready ([`ConnSlot::Ready`]),
//!   then the timers start there;
//! * connect path: the timers start on the wheel (the deadline also bounds
//!   the pool wait, resolution, the connect, a proxy's handshake and TLS);
//!   the connection being opened is attached as [`ConnSlot::Opening`] — so
//!   ending the exchange aborts the attempt — and, once its TCP connect to
//!   the first hop (the origin, or its proxy) succeeds, attached again as
//!   ready, on its own loop: the timers move there with their absolute
//!   deadlines (a same-thread arm, no wake-up) and bound the proxy's
//!   handshake and TLS from there, so that by the time the connection is
//!   ready to carry the request its timers are on its loop;
//! * an exchange on an HTTP/1 connection holds that connection's standing
//!   entry rather than arm one of its own (see [`Standing`]): on the wheel
//!   in wheel mode, on the connection's loop in event-loop mode; on the
//!   pooled path from the start (in event-loop mode, from the task that
//!   attaches it), on the connect path once the connection is attached
//!   ready;
//! * a connection that fails under a request it will retry is detached
//!   ([`ConnSlot::None`]): its read timeout goes with it, and the request
//!   timeout goes back to the wheel until the next connection is ready.
//!
//! The timers themselves are a [`TimerTable`] (see there for the ground
//! rules: generations, arming under the lock, no arm in a constructor).

pub(crate) mod alarm;
mod listener;
mod outcome;
mod pacing;
mod pipe;
mod registry;
mod request;
pub(crate) mod standing;
mod timers;

pub(crate) use alarm::Alarm;
pub(crate) use listener::Guarded;
pub(crate) use outcome::{Outcome, POLLED_AFTER_COMPLETION, WAITED_AFTER_COMPLETION};
pub(crate) use pacing::Pacing;
use pacing::{Spin, WaitFor};
pub(crate) use pipe::{
    own_size, Chunks, Pipe, Pushed, Reader, Taken, Waiter, Whole, DEFAULT_WINDOW, GATHER,
};
pub(crate) use registry::InFlight;
pub(crate) use request::{
    BodyStream, BoxError, Payload, PumpedBody, RequestBody, RequestParts, Reread, Rewound,
    Streamed, UploadSource,
};
pub(crate) use standing::{Standing, StandingEnv};
pub(crate) use timers::park_for_news;
use timers::{Timer, TimerTable};

use crate::error::{Error, ProxyError, TimeoutKind};
use crate::event_loop::{EventLoop, LoopContext, LoopTimeout, SourceRef, TimeoutScheduler};
use crate::net::{Origin, Route};
use crate::sync::lock;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tickless_timer::{HashedWheelTimer, SharedClock, WheelTask};

/// The connection an exchange runs on: its loop, its place there, and where
/// the timeouts of exchanges on it are armed in event-loop mode.
#[derive(Clone)]
pub(crate) struct ConnRef {
    pub(crate) event_loop: Arc<EventLoop>,
    pub(crate) source: SourceRef,
    /// The loop's scheduler (or a test's double standing in front of it).
    pub(crate) scheduler: Arc<dyn TimeoutScheduler>,
    /// What wakes the connection for this exchange, if not the whole
    /// source (an HTTP/2 stream's own waker).
    pub(crate) waker: Option<std::task::Waker>,
    /// The connection's standing timer entry (HTTP/1: on the wheel, or on
    /// its loop in event-loop mode), which its exchanges hold one after
    /// another rather than arm their own.
    pub(crate) standing: Option<Arc<Standing>>,
}

/// Where an exchange runs: its connection's loop, and the connection (a
/// source of that loop), as far as it has them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Carrier {
    pub(crate) loop_index: Option<usize>,
    pub(crate) conn: Option<SourceRef>,
}

impl Carrier {
    /// Whether it is the connection `conn` of loop `loop_index`.
    pub(crate) fn is(&self, loop_index: usize, conn: SourceRef) -> bool {
        self.loop_index == Some(loop_index) && self.conn == Some(conn)
    }
}

/// Where a hedged copy keeps away from, read now (see
/// [`Exchange::kept_away`]): the connections (and their loops) of the
/// attempts of its request in flight, the attempt it backs up first.
/// Empty for an exchange that is no copy.
#[derive(Debug, Default)]
pub(crate) struct KeptAway {
    carriers: Vec<Carrier>,
}

impl KeptAway {
    /// Whether the connection `conn` of loop `loop_index` is one to keep
    /// away from.
    pub(crate) fn avoids(&self, loop_index: usize, conn: SourceRef) -> bool {
        self.carriers
            .iter()
            .any(|carrier| carrier.is(loop_index, conn))
    }
}

/// What a hedged copy knows of the attempts of its request in flight when
/// it was made (see [`Exchange::back_up`]): the one it backs up, and the
/// copies before it.
struct Backup {
    /// The attempt it backs up: once it runs nowhere, a new connection for
    /// the copy still keeps away from the loop it ended on.
    backed_up: Avoided,
    /// The request's other copies in flight beside it.
    beside: Vec<Avoided>,
}

impl Backup {
    /// Every attempt the copy keeps away from, the one it backs up first.
    fn attempts(&self) -> impl Iterator<Item = &Avoided> {
        std::iter::once(&self.backed_up).chain(&self.beside)
    }
}

/// One attempt a hedged copy keeps away from.
struct Avoided {
    /// The attempt's id.
    id: u64,
    /// The attempt itself, to read where it runs now
    /// ([`Exchange::kept_away`]): it moves when its connection fails under
    /// it, or when one takes it from a queue. Weak: a copy that won
    /// outlives the attempt, which lost, by its whole body.
    attempt: Weak<Exchange>,
    /// The connection that took the attempt from a queue, as that
    /// connection tells the copy before the attempt is attached to it
    /// ([`Exchange::keep_away_from`]). A leaf lock: nothing is taken
    /// while it is held.
    told: Mutex<Option<Carrier>>,
}

/// What [`Avoided::place`] gives for an attempt that runs nowhere, and
/// that no connection took.
#[derive(Clone, Copy)]
enum IfGone {
    /// Nothing: for the request's other copies ([`Backup::beside`]).
    Nothing,
    /// The loop it ended on, if it ran on one (nothing once it is
    /// dropped): for the attempt the copy backs up
    /// ([`Backup::backed_up`]), whose loop a new connection keeps away
    /// from.
    LastLoop,
}

impl Avoided {
    /// Where the attempt is, read now: the connection it runs on or is
    /// being opened for, else the one that took it, else what `if_gone`
    /// says. Called with no lock held (see [`Exchange::kept_away`]).
    fn place(&self, if_gone: IfGone) -> Option<Carrier> {
        let live = self.attempt.upgrade().map(|attempt| attempt.carrier());
        match live.filter(|carrier| carrier.conn.is_some()) {
            Some(live) => Some(live),
            None => {
                let told = *lock(&self.told);
                told.or(match if_gone {
                    IfGone::Nothing => None,
                    IfGone::LastLoop => live,
                })
            }
        }
    }
}

/// What the exchange's connection slot holds.
pub(crate) enum ConnSlot {
    /// No connection: waiting for one, or resolving.
    None,
    /// A connection being opened for it (connecting): aborted if the
    /// exchange ends, but not yet where its timeouts live.
    Opening(ConnRef),
    /// The connection that carries the request: its loop is the timeouts'
    /// home in event-loop mode.
    Ready(ConnRef),
}

impl ConnSlot {
    fn conn(&self) -> Option<&ConnRef> {
        match self {
            ConnSlot::None => None,
            ConnSlot::Opening(conn) | ConnSlot::Ready(conn) => Some(conn),
        }
    }
}

/// A response head, as the connection delivers it; the body follows in
/// the exchange's pipe.
pub(crate) struct Head {
    pub(crate) status: http::StatusCode,
    pub(crate) version: http::Version,
    pub(crate) headers: http::HeaderMap,
    /// HTTP/1.x: the reason phrase as sent, when it is not the status's
    /// canonical one (see `tickless_h1::ResponseHead::reason`); HTTP/2 has
    /// none.
    pub(crate) reason: Option<bytes::Bytes>,
    pub(crate) remote: SocketAddr,
    /// The length of the body as the head declares it
    /// ([`declared_body_length`]), as the connection found it framing the
    /// body: asked again of the headers, it cost two more lookups and a
    /// parse of `Content-Length` a response.
    pub(crate) declared_length: Option<u64>,
    /// Whether the body ended with the head, nothing of it (not even
    /// trailers) still to come: a response that [has no body](has_no_body),
    /// one over HTTP/1.1 that declares a length of 0, or one whose HTTP/2
    /// `HEADERS` frame ended the stream. What a reader learns without
    /// reading (`http_body::Body::is_end_stream`). Not one over HTTP/2
    /// that declares a length of 0 and leaves its stream open: trailers
    /// may follow. Nor a 2xx's that came while the request's body still
    /// goes out: its end waits for the upload's
    /// ([`hold_answer`](Exchange::hold_answer)), whose failure fails it.
    pub(crate) body_ended: bool,
}

impl Head {
    /// The head as its exchange's listener is told it.
    fn told(&self) -> crate::events::ResponseHead<'_> {
        crate::events::ResponseHead::new(
            self.version,
            self.status,
            self.reason.as_deref(),
            &self.headers,
        )
    }
}

/// Whether a response has no body, whatever its head declares: an answer
/// to HEAD, an informational answer, 204 or 304.
pub(crate) fn has_no_body(method: &http::Method, status: http::StatusCode) -> bool {
    *method == http::Method::HEAD
        || status.is_informational()
        || status == http::StatusCode::NO_CONTENT
        || status == http::StatusCode::NOT_MODIFIED
}

/// Whether a response is decoded where decompression is on: it has a body
/// (see [`has_no_body`]), a whole one (not a 206: a range of an encoded
/// body is a slice of the encoded bytes, which does not decode alone, and a
/// caller who resumes a download needs them as they are), and a
/// `Content-Encoding`.
pub(crate) fn is_decoded(
    method: &http::Method,
    status: http::StatusCode,
    headers: &http::HeaderMap,
) -> bool {
    !has_no_body(method, status)
        && status != http::StatusCode::PARTIAL_CONTENT
        && headers.contains_key(http::header::CONTENT_ENCODING)
}

/// The length of a response's body as its head tells it before any of it
/// comes: 0 for a response that [has no body](has_no_body); its
/// `Content-Length` without a `Transfer-Encoding`, read as the HTTP/1.1
/// codec frames the body (one value, repeated identical ones too);
/// otherwise unknown.
pub(crate) fn declared_body_length(
    method: &http::Method,
    status: http::StatusCode,
    headers: &http::HeaderMap,
) -> Option<u64> {
    if has_no_body(method, status) {
        return Some(0);
    }
    if headers.contains_key(http::header::TRANSFER_ENCODING) {
        return None;
    }
    crate::h1::content_length(headers).ok().flatten()
}

/// The timeouts an exchange runs under.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadlines {
    /// The configured request timeout (for the error), and its deadline,
    /// fixed at submission.
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) read_timeout: Option<Duration>,
    pub(crate) write_timeout: Option<Duration>,
    /// Arm on the connection's loop once there is one (event-loop mode).
    pub(crate) on_event_loop: bool,
}

/// How long a connection has to try its socket once more, asked when its
/// request's write timeout passed with no progress seen, before the
/// timeout fails the exchange: what a write timeout may fire late, beyond
/// its timer's own lateness.
const WRITE_PROBE_WAIT: Duration = Duration::from_millis(5);

/// Everything [`Exchange::new`] needs.
pub(crate) struct ExchangeParts {
    pub(crate) id: u64,
    pub(crate) origin: Origin,
    /// How it reaches its origin (see [`Exchange::route`]).
    pub(crate) route: Route,
    pub(crate) request: RequestParts,
    pub(crate) listener: Arc<dyn crate::events::EventListener>,
    /// The request this exchange carries a hop or an attempt of.
    pub(crate) info: crate::events::RequestInfo,
    pub(crate) deadlines: Deadlines,
    /// Whether its response is decoded (where [`is_decoded`]).
    pub(crate) decompress: bool,
    /// What the loop reads ahead of the body's reader.
    pub(crate) body_window: usize,
    /// Body bytes buffered by every exchange of the client.
    pub(crate) body_meter: Arc<AtomicUsize>,
    /// The client's recent body sizes.
    pub(crate) pacing: Arc<Pacing>,
    /// When the request was sent: its request deadline runs from here
    /// (for a redirect, from the first hop's submission).
    pub(crate) submitted: Instant,
    pub(crate) clock: SharedClock,
    pub(crate) wheel: HashedWheelTimer,
    pub(crate) registry: Arc<InFlight>,
}

/// How an exchange ends.
enum Ending {
    /// The body was read off the connection, with these trailers.
    Complete(Option<http::HeaderMap>),
    Failed(Error),
}

/// What the exchange's lock guards: where it runs and its timers, together,
/// so the two never drift apart.
struct Link {
    conn: ConnSlot,
    timers: TimerTable,
    /// The loop of the connection that carried the exchange when it ended
    /// (see [`Exchange::after_its_loop`]).
    ended_on: Option<Arc<EventLoop>>,
    /// The loop a task was posted to that attaches it to an idle connection
    /// there, for its caller to drive (see [`Exchange::post_for_driver`]).
    posted_to: Option<Arc<EventLoop>>,
    /// Someone polls the exchange, or waited on it with no loop to drive
    /// (see [`Exchange::mark_awaited`]), or it left a loop its caller may
    /// be asleep on (see [`Link::note_home`]): the loop it is on counts it.
    awaited: bool,
    /// The loop a blocked caller of the exchange would drive, or sleep on,
    /// as it was last: its connection's, or the one its request was posted
    /// to.
    home: Option<Arc<EventLoop>>,
    /// Counted while it waits in the pool's queue for a connection (see
    /// [`Exchange::wait_in_queue`]), until it has one or ends.
    queued: Option<crate::event_loop::Queued>,
    /// The write timeout's period passed with no progress seen, and the
    /// connection was asked to try the socket once more (see
    /// [`WRITE_PROBE_WAIT`]).
    write_probed: bool,
    /// What gives back what it holds while it has no connection (see
    /// [`Exchange::hold`]).
    held: Option<GiveBack>,
    /// The response came whole before the request body was all sent, with
    /// these trailers: its end waits for the upload's, and a timeout
    /// meanwhile completes the exchange with it (see
    /// [`Exchange::hold_answer`]).
    answer: Option<Option<http::HeaderMap>>,
    /// The error the body's reader failed it with as it decoded it: what
    /// the exchange ends with if its connection stops for want of a reader
    /// (see [`Exchange::body_failed`]).
    body_failure: Option<Box<Error>>,
    /// How the completion of an exchange whose response is encoded stands
    /// with its reader's check of the body (see [`Exchange::body_checked`]).
    completion: Completion,
}

/// Whether the completion of an exchange whose response is to be decoded
/// (see [`is_decoded`]) may be told: its reader may still fail the body for
/// its coding — after all of it came, when the exchange completed — and
/// then the exchange is told failed with that error, not completed.
enum Completion {
    /// The reader has not said yet, and the exchange has not completed.
    Unchecked,
    /// The exchange completed with this status: `on_completed` waits for
    /// the reader to say.
    Held(http::StatusCode),
    /// The reader has said: the body decoded to its end, is not decoded,
    /// was let go, or failed (its error in [`Link::body_failure`]). A
    /// completion is told as it comes.
    Checked,
}

/// Gives back something taken for an exchange that has no connection yet
/// — the connection permit it holds while its name is looked up — if the
/// exchange ends before it is taken on.
pub(crate) type GiveBack = Box<dyn FnOnce() + Send>;

impl Link {
    /// Sets `timer` to `deadline`: for the write timeout a new period,
    /// whose probe (see [`WRITE_PROBE_WAIT`]) is still to come.
    fn set_timer(&mut self, timer: Timer, deadline: Option<Instant>) {
        if timer == Timer::Write {
            self.write_probed = false;
        }
        self.timers.set(timer, deadline);
    }

    /// Wakes the connection for this exchange (for HTTP/2, its stream).
    fn wake_conn(&self) {
        if let ConnSlot::Ready(conn) = &self.conn {
            match &conn.waker {
                Some(waker) => waker.wake_by_ref(),
                None => conn.event_loop.wake_source(conn.source),
            }
        }
    }

    /// Fills the connection slot, returning what it held; the loops count
    /// the exchanges on their connections, and those awaited
    /// ([`EventLoop::attach_exchange`]).
    fn set_conn(&mut self, slot: ConnSlot) -> ConnSlot {
        self.queued = None;
        let old = std::mem::replace(&mut self.conn, slot);
        let was = old.conn().map(|conn| &conn.event_loop);
        let is = self.conn.conn().map(|conn| &conn.event_loop);
        let moved = match (was, is) {
            (Some(was), Some(is)) => !Arc::ptr_eq(was, is),
            (was, is) => was.is_some() || is.is_some(),
        };
        if moved {
            if let Some(was) = was {
                was.attach_exchange(false, self.awaited);
            }
            if let Some(is) = is {
                is.attach_exchange(true, self.awaited);
            }
        }
        if let Some(is) = is.filter(|is| !self.is_home(is)).cloned() {
            self.note_home(is);
        }
        old
    }

    /// Whether `event_loop` is the exchange's home (see
    /// [`note_home`](Self::note_home)).
    fn is_home(&self, event_loop: &Arc<EventLoop>) -> bool {
        self.home
            .as_ref()
            .is_some_and(|home| Arc::ptr_eq(home, event_loop))
    }

    /// The exchange's home — the loop a blocked caller drives or sleeps on
    /// (counted there: `EventLoop::sleep_on`) — is now `home`, which it
    /// [was not](Self::is_home) (checked first: the common case, the loop
    /// it was posted to, clones nothing). If it had another (a retry, a
    /// request sent again to another loop's connection), the exchange is
    /// awaited from now on: the new home does not know of a caller asleep
    /// on the old one.
    fn note_home(&mut self, home: Arc<EventLoop>) {
        if self.home.is_some() {
            self.set_awaited();
        }
        self.home = Some(home);
    }

    /// Marks the exchange awaited (see [`Exchange::mark_awaited`]), counted
    /// on the loop of its connection, if any.
    fn set_awaited(&mut self) {
        if self.awaited {
            return;
        }
        self.awaited = true;
        if let Some(conn) = self.conn.conn() {
            conn.event_loop.await_exchange();
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.set_conn(ConnSlot::None);
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        // A completion held for a reader that never came (the head was
        // never taken, nor its body made): nothing will check the body.
        let link = self
            .link
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Completion::Held(status) =
            std::mem::replace(&mut link.completion, Completion::Checked)
        {
            self.listener.on_completed(status);
        }
    }
}

/// Where a request stands among the pool's waiters — its sequence number
/// in the pool's queues, the pool's to read — kept in its [`PlaceCell`]:
/// stamped at its first ask, or that of the hop or attempt it follows (see
/// [`Exchange::follows`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueuePlace {
    pub(crate) seq: u64,
}

/// A request's [`QueuePlace`] once it has one: stamped by the pool, under
/// its lock, the first time the request asks it — every request for an
/// HTTP/1.1 connection or a new one does (one sent on a shared HTTP/2
/// connection does not), so an atomic rather than a `OnceLock`, whose
/// first set is a call into std's `Once` — or given before its
/// submission by the hop or attempt it follows ([`Exchange::follows`]). Sequence
/// numbers start at 1: 0 is none.
#[derive(Debug, Default)]
pub(crate) struct PlaceCell(AtomicU64);

impl PlaceCell {
    /// The place, if it has one.
    pub(crate) fn get(&self) -> Option<QueuePlace> {
        let seq = self.0.load(Ordering::Acquire);
        (seq != 0).then_some(QueuePlace { seq })
    }

    /// The place, stamped by `stamp` if it had none (a stamp is never 0).
    pub(crate) fn get_or_stamp(&self, stamp: impl FnOnce() -> QueuePlace) -> QueuePlace {
        self.get().unwrap_or_else(|| {
            let place = stamp();
            debug_assert_ne!(place.seq, 0, "0 is no place");
            self.0.store(place.seq, Ordering::Release);
            place
        })
    }

    /// Takes `previous`'s place, if it has one (see [`Exchange::follows`]).
    pub(crate) fn follow(&self, previous: &PlaceCell) {
        if let Some(place) = previous.get() {
            self.get_or_stamp(|| place);
        }
    }
}

/// One request and its response in flight. See the [module documentation](self).
pub(crate) struct Exchange {
    pub(crate) id: u64,
    pub(crate) origin: Origin,
    /// How it reaches its origin (straight or through a proxy): what the
    /// pool matches it with connections by.
    route: Route,
    pub(crate) request: RequestParts,
    pub(crate) listener: Guarded,
    /// Set once the request has gone again on another connection: an
    /// idempotent one after a pooled HTTP/1.1 connection failed under it,
    /// any one the server said it never processed over HTTP/2.
    pub(crate) retried: AtomicBool,
    /// Its request's place among the pool's waiters (see
    /// [`follows`](Self::follows)).
    pub(crate) place: PlaceCell,
    /// Set once an attempt of it may have been processed by a server that
    /// failed before answering (a pooled HTTP/1.1 connection): no later
    /// failure can then say the request was never processed.
    pub(crate) maybe_processed: AtomicBool,
    /// The fewest streams an HTTP/2 connection that sent it on to another
    /// could run at once (its server's limit, as it last counted); 0 if
    /// none did. See [`hear_stream_limit`](Self::hear_stream_limit).
    streams_heard: AtomicUsize,
    deadlines: Deadlines,
    clock: SharedClock,
    wheel: HashedWheelTimer,
    done: AtomicBool,
    outcome: Outcome<Result<Head, Error>>,
    body: Pipe,
    pacing: Arc<Pacing>,
    /// The status of the head delivered, for the listener at the end: 0
    /// until then (a status is 100 to 999). An atomic rather than a
    /// `OnceLock`, whose set costs a call into `Once` a request.
    status: AtomicU16,
    /// Whether its response is decoded where [`is_decoded`] (the request's
    /// say over the client's).
    decompress: bool,
    /// The head delivered is to be decoded (see [`is_decoded`]): its
    /// completion is told once its reader has checked the body
    /// ([`Link::completion`]).
    encoded: AtomicBool,
    link: Mutex<Link>,
    remote: Mutex<Option<SocketAddr>>,
    /// Time of the last read (or of the request being sent), in nanoseconds
    /// since `submitted`, for the read timeout.
    submitted: Instant,
    last_read: AtomicU64,
    /// Likewise, the last time the server took some of the request while
    /// it waited on the server, for the write timeout.
    last_written: AtomicU64,
    registry: Arc<InFlight>,
    registry_key: AtomicUsize,
    /// Rung when [`Timer::Hedge`] is due (see [`arm_hedge`](Self::arm_hedge)).
    hedge_alarm: Mutex<Option<Arc<Alarm>>>,
    /// The attempts a hedged copy keeps away from (see
    /// [`back_up`](Self::back_up)): their connections, and a new one for
    /// it from the loop of the one it backs up.
    backs_up: OnceLock<Backup>,
    /// [`Link::awaited`], read without the lock once set.
    awaited: AtomicBool,
}

/// The instant `timeout` after `start`; `None` past the end of time, which
/// is no deadline at all (a caller's `Duration::MAX` means "never").
pub(crate) fn deadline_after(start: Instant, timeout: Duration) -> Option<Instant> {
    start.checked_add(timeout)
}

/// Ids of exchanges, unique in the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Exchange {
    /// A new id for an exchange.
    pub(crate) fn next_id() -> u64 {
        NEXT_ID.fetch_add(1, Ordering::Relaxed)
    }

    /// A new exchange: its request deadline is fixed here, from when its
    /// request was sent. Nothing is armed until [`start`](Self::start).
    pub(crate) fn new(parts: ExchangeParts) -> Arc<Exchange> {
        let submitted = parts.submitted;
        let request_deadline = parts
            .deadlines
            .request_timeout
            .and_then(|timeout| deadline_after(submitted, timeout));
        let timers = TimerTable::new(request_deadline);
        Arc::new_cyclic(|weak| Exchange {
            id: parts.id,
            origin: parts.origin,
            route: parts.route,
            request: parts.request,
            listener: Guarded::new(parts.listener, parts.info, weak.clone()),
            retried: AtomicBool::new(false),
            place: PlaceCell::default(),
            maybe_processed: AtomicBool::new(false),
            streams_heard: AtomicUsize::new(0),
            deadlines: parts.deadlines,
            clock: parts.clock,
            wheel: parts.wheel,
            done: AtomicBool::new(false),
            outcome: Outcome::default(),
            body: Pipe::new(parts.body_window, parts.body_meter),
            pacing: parts.pacing,
            status: AtomicU16::new(0),
            decompress: parts.decompress,
            encoded: AtomicBool::new(false),
            link: Mutex::new(Link {
                conn: ConnSlot::None,
                timers,
                ended_on: None,
                posted_to: None,
                awaited: false,
                home: None,
                queued: None,
                write_probed: false,
                held: None,
                answer: None,
                body_failure: None,
                completion: Completion::Unchecked,
            }),
            remote: Mutex::new(None),
            submitted,
            last_read: AtomicU64::new(0),
            last_written: AtomicU64::new(0),
            registry: parts.registry,
            registry_key: AtomicUsize::new(registry::UNREGISTERED),
            hedge_alarm: Mutex::new(None),
            backs_up: OnceLock::new(),
            awaited: AtomicBool::new(false),
        })
    }

    /// Registers the exchange as in flight (before it is dispatched, so a
    /// client closing meanwhile finds it).
    pub(crate) fn register(self: &Arc<Self>) {
        let key = self.registry.insert(self.clone());
        self.registry_key.store(key, Ordering::SeqCst);
        // Ended before it was registered (a redirect's next hop cancelled
        // while it waited for a loop): `end` found no key to remove.
        if self.done.load(Ordering::SeqCst) {
            self.registry.remove(key, self.id);
        }
    }

    /// Whether the request may go again on a fresh connection: its method
    /// may be sent twice without harm (RFC 9110 §9.2.2), and its body can be.
    pub(crate) fn may_retry(&self) -> bool {
        self.request.method.is_idempotent() && self.request.replayable()
    }

    /// Whether the request may go again on a fresh connection now, its
    /// connection having failed before any answer: as [`may_retry`](Self::may_retry)
    /// says, or its method may be sent twice and its streamed body is all
    /// still here — it waited for `100 Continue`, and no connection took
    /// its source, so it can go whole.
    pub(crate) fn may_go_again_now(&self) -> bool {
        self.request.method.is_idempotent()
            && (self.request.replayable() || self.request.holds_unsent())
    }

    /// An HTTP/2 connection that could run `limit` streams at once sends
    /// it to another (never sent, refused, or past a `GOAWAY`): the
    /// connection it opens, if it opens one, opens no more than that many
    /// before its own server's SETTINGS come — that server is most likely
    /// the same. A limit of 0 is not kept (a connection that never heard
    /// its server counts 0).
    pub(crate) fn hear_stream_limit(&self, limit: usize) {
        if limit > 0 {
            let _ = self
                .streams_heard
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |heard| {
                    Some(if heard == 0 { limit } else { heard.min(limit) })
                });
        }
    }

    /// The limit [`hear_stream_limit`](Self::hear_stream_limit) kept, if any.
    pub(crate) fn stream_limit_heard(&self) -> Option<usize> {
        Some(self.streams_heard.load(Ordering::Acquire)).filter(|&limit| limit > 0)
    }

    /// Whether its timers include one every request of its kind arms: a
    /// request or a read timeout (a write timeout waits for a full socket).
    pub(crate) fn arms_a_timeout(&self) -> bool {
        self.deadlines.request_timeout.is_some() || self.deadlines.read_timeout.is_some()
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Whether the outcome is stored (a little after `is_done`: the
    /// listener is told in between, after any of its events being told
    /// then), so a poll now is ready.
    pub(crate) fn is_settled(&self) -> bool {
        self.outcome.is_settled()
    }

    /// Whether the exchange failed before its head was taken (the failure
    /// is stored, not yet handed out).
    pub(crate) fn failed_untaken(&self) -> bool {
        self.outcome.holds(Result::is_err)
    }

    /// Whether the exchange failed before its head was taken with an error
    /// `test` accepts (the failure stays stored, for the caller to take).
    pub(crate) fn failed_untaken_with(&self, test: impl FnOnce(&Error) -> bool) -> bool {
        self.outcome
            .holds(|outcome| outcome.as_ref().err().is_some_and(test))
    }

    /// Whether the exchange's head has come, not yet taken, and `test`
    /// accepts it (the head stays stored, for the caller to take).
    pub(crate) fn head_untaken_with(&self, test: impl FnOnce(&Head) -> bool) -> bool {
        self.outcome
            .holds(|outcome| outcome.as_ref().is_ok_and(test))
    }

    /// Whether the caller has taken the head: the future is spent, and the
    /// exchange now belongs to the body.
    pub(crate) fn head_taken(&self) -> bool {
        self.outcome.is_taken()
    }

    /// The response body's pipe: the connection writes, the caller reads.
    pub(crate) fn body(&self) -> &Pipe {
        &self.body
    }

    /// How long this client's response bodies have lately been (a moving
    /// average): what a body of unknown length is likely to need.
    pub(crate) fn typical_body(&self) -> u64 {
        self.pacing.typical_body()
    }

    /// How the exchange reaches its origin: what the pool matches it with
    /// connections by.
    pub(crate) fn route(&self) -> &Route {
        &self.route
    }

    /// The remote for messages: `host/ip:port` once connected, `host:port`
    /// before; through a proxy, `host:port via proxy URL (ip:port)`.
    pub(crate) fn remote_name(&self) -> String {
        let addr = *lock(&self.remote);
        match (self.route().proxy(), addr) {
            (None, Some(addr)) => format!("{}/{}", self.origin.host, addr),
            (None, None) => self.origin.to_string(),
            (Some(proxy), Some(addr)) => format!("{} via proxy {proxy} ({addr})", self.origin),
            (Some(proxy), None) => format!("{} via proxy {proxy}", self.origin),
        }
    }

    pub(crate) fn set_remote(&self, addr: SocketAddr) {
        *lock(&self.remote) = Some(addr);
    }

    /// The read timeout it runs under, if any.
    pub(crate) fn read_timeout(&self) -> Option<std::time::Duration> {
        self.deadlines.read_timeout
    }

    /// Records activity for the read timeout, at `now` — read only if the
    /// exchange has one: a client without read timeouts reads no clock
    /// for them.
    pub(crate) fn mark_read(&self, now: impl FnOnce() -> Instant) {
        if self.deadlines.read_timeout.is_some() {
            self.mark(&self.last_read, now());
        }
    }

    fn last_read(&self) -> Instant {
        self.marked(&self.last_read)
    }

    /// Records the server taking some of the request, for the write
    /// timeout.
    pub(crate) fn mark_written(&self, now: Instant) {
        self.mark(&self.last_written, now);
    }

    fn last_written(&self) -> Instant {
        self.marked(&self.last_written)
    }

    fn mark(&self, last: &AtomicU64, now: Instant) {
        let nanos = now.saturating_duration_since(self.submitted).as_nanos();
        last.store(nanos.min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    fn marked(&self, last: &AtomicU64) -> Instant {
        self.submitted + Duration::from_nanos(last.load(Ordering::Relaxed))
    }

    /// Starts the timers (idempotent): on the wheel, or on the home loop if
    /// a ready connection is attached in event-loop mode.
    pub(crate) fn start(self: &Arc<Self>) {
        self.change(|link| link.timers.start());
    }

    /// Starts the timers on the wheel holding `standing`, the standing
    /// entry of the idle connection it is about to run on (see
    /// [`Standing`]): the pooled path of wheel mode, on the submitting
    /// thread, so that the connection's attach moves nothing.
    pub(crate) fn start_holding(self: &Arc<Self>, standing: Option<Arc<Standing>>) {
        self.change(|link| {
            link.timers.set_home(None, standing);
            link.timers.start();
        });
    }

    /// Starts the timers on the loop of `conn`, holding its standing entry
    /// there if it has one, from the thread that posts the task that
    /// attaches `conn` (a pooled path of event-loop mode) rather than in
    /// that task: for a loop whose turns wait for a free worker of an
    /// executor ([`EventLoop::keeps_deadlines_apart`]), which may not come
    /// before the request deadline, while the loop's thread expires what
    /// falls due on its heap. The task's own start then moves nothing.
    pub(crate) fn start_on_loop_of(self: &Arc<Self>, conn: &ConnRef) {
        let home = Some(conn.scheduler.clone());
        self.change(|link| {
            link.timers.set_home(home, conn.standing.clone());
            link.timers.start();
        });
    }

    /// Fills the connection slot, and moves the timers where they belong
    /// for it (see the [module documentation](self)). Detaching
    /// ([`ConnSlot::None`]) also stops the read and write timers: silence
    /// and stalls are measured on a connection.
    pub(crate) fn attach(self: &Arc<Self>, slot: ConnSlot) {
        let home = match &slot {
            ConnSlot::Ready(conn) if self.deadlines.on_event_loop => Some(conn.scheduler.clone()),
            _ => None,
        };
        let standing = match &slot {
            ConnSlot::Ready(conn) => conn.standing.clone(),
            _ => None,
        };
        self.change(|link| {
            if matches!(slot, ConnSlot::None) {
                link.timers.set(Timer::Read, None);
                link.timers.set(Timer::Write, None);
            }
            link.timers.set_home(home, standing);
            link.set_conn(slot);
        });
    }

    /// Attaches a ready connection and starts the timers, in one step (the
    /// pooled path, on the connection's loop). Returns false if the
    /// exchange has ended (then nothing is attached, and nothing may be
    /// sent: its end found no connection to abort) — or, with its timeouts
    /// on the loop, if its request deadline has passed already (its task
    /// waited in a busy loop's inbox): the timers start, so the loop
    /// expires it after this task, but nothing is attached and nothing is
    /// sent. On the wheel, that deadline has fired there already, or fires
    /// within the wheel's tick.
    #[must_use]
    pub(crate) fn start_on(self: &Arc<Self>, conn: ConnRef) -> bool {
        let on_event_loop = self.deadlines.on_event_loop;
        let home = on_event_loop.then(|| conn.scheduler.clone());
        let standing = conn.standing.clone();
        let mut attached = false;
        self.change(|link| {
            link.timers.set_home(home, standing);
            link.timers.start();
            // The clock is read only for a request deadline on the loop.
            let past_due = on_event_loop
                && link
                    .timers
                    .get(Timer::Request)
                    .is_some_and(|deadline| deadline <= self.clock.now());
            if past_due {
                return;
            }
            link.set_conn(ConnSlot::Ready(conn));
            attached = true;
        });
        attached
    }

    /// Whether the head delivered is to be decoded: decompression is on
    /// for the request and [`is_decoded`] says so of the head.
    pub(crate) fn is_encoded(&self) -> bool {
        self.encoded.load(Ordering::Acquire)
    }

    /// The body's reader has gone: the connection is told at once (it
    /// drains or closes), rather than at its next read. Nothing more of the
    /// body will be checked ([`body_checked`](Self::body_checked)).
    pub(crate) fn body_dropped(&self) {
        self.body_checked();
        self.body.close_reader();
        if self.is_done() {
            return;
        }
        lock(&self.link).wake_conn();
    }

    /// `failure`, one that says none of the request reached a server (a
    /// stream HTTP/2 refused or never sent, a proxy's failure before its
    /// tunnel was up), marked so ([`Error::is_unprocessed`]) — unless an
    /// earlier attempt of it may have been processed elsewhere
    /// ([`maybe_processed`](Self::maybe_processed)).
    pub(crate) fn unprocessed(&self, failure: Error) -> Error {
        failure.with_unprocessed(!self.maybe_processed.load(Ordering::Acquire))
    }

    /// `source`, a failure of the route's proxy before its tunnel was up,
    /// as the request's error: nothing of it went to the origin
    /// ([`unprocessed`](Self::unprocessed)).
    pub(crate) fn proxy_failure(&self, source: ProxyError) -> Error {
        self.unprocessed(Error::Proxy {
            proxy: self
                .route
                .proxy()
                .map(ToString::to_string)
                .unwrap_or_default(),
            target: self.origin.to_string(),
            source,
            unprocessed: true,
        })
    }

    /// The error of an [`http2_only`](crate::ClientBuilder::http2_only)
    /// request whose server negotiated no `h2` over TLS — it refused the
    /// handshake for it (`handshake_refused`), or negotiated no protocol:
    /// nothing of the request was sent ([`unprocessed`](Self::unprocessed)).
    pub(crate) fn http2_not_negotiated(&self, handshake_refused: bool) -> Error {
        self.unprocessed(Error::Http2NotNegotiated {
            remote: self.remote_name(),
            handshake_refused,
            unprocessed: true,
        })
    }

    /// The response failed for its coding (`error`: its body, as its
    /// reader decoded it, does not decode or passed `max_body_bytes`; its
    /// head stacks more codings than are decoded) and its body is read no
    /// more: as at a drop, the connection is told at once (it drains or
    /// closes), and if that ends the exchange, it ends with that error, the
    /// caller's — not as cancelled ([`reader_gone_error`](Self::reader_gone_error)).
    pub(crate) fn body_failed(&self, error: &Error) {
        if let Some(copy) = error.copy_of_decoding_failure() {
            lock(&self.link).body_failure = Some(Box::new(copy));
        }
        self.body_dropped();
    }

    /// The body's reader has checked the body for its coding — decoded it
    /// to its end, failed it ([`body_failed`](Self::body_failed)), let it
    /// go, or found it is not to be decoded — so that the completion of
    /// an exchange whose response is encoded may be told: held until now,
    /// it is told here, on the reader's thread, as a failure with the
    /// reader's error if it failed the body; else as it comes. So a body
    /// that does not decode is told failed even when all of it had come
    /// before its reader looked. Does nothing for a response not to be
    /// decoded (see [`is_decoded`]), whose completion is told as it comes.
    pub(crate) fn body_checked(&self) {
        if !self.is_encoded() {
            return;
        }
        let mut link = lock(&self.link);
        let Completion::Held(status) = std::mem::replace(&mut link.completion, Completion::Checked)
        else {
            return;
        };
        let failure = link.body_failure.take();
        drop(link);
        self.tell_completion(status, failure);
    }

    /// Tells the listener how an exchange that completed with `status`
    /// ended for its caller: failed with the reader's `failure` of its
    /// body, if there is one; else completed.
    fn tell_completion(&self, status: http::StatusCode, failure: Option<Box<Error>>) {
        match failure {
            Some(failure) => self.listener.on_failed(&failure),
            None => self.listener.on_completed(status),
        }
    }

    /// What the exchange ends with when its connection stops reading a
    /// body whose reader has gone: the reader's failure, if it failed the
    /// body ([`body_failed`](Self::body_failed)); else it was dropped, and
    /// the request is cancelled.
    pub(crate) fn reader_gone_error(&self) -> Error {
        self.readers_end().unwrap_or(Error::Cancelled)
    }

    /// How the body's reader ended the body, if it has: with the error it
    /// failed it with ([`body_failed`](Self::body_failed)), a copy — the
    /// failure stays, for whichever end comes first ([`end`](Self::end)
    /// tells it in place of any other failure) —, or, let go, as a cancel
    /// ([`reader_gone_error`](Self::reader_gone_error)).
    fn readers_end(&self) -> Option<Error> {
        if !self.body.reader_gone() {
            return None;
        }
        let failure = lock(&self.link)
            .body_failure
            .as_ref()
            .and_then(|failure| failure.copy_of_decoding_failure());
        Some(failure.unwrap_or(Error::Cancelled))
    }

    /// Rings `alarm` at `deadline` (unless the exchange has ended by then):
    /// the hedge delay of a hedged request, one of the exchange's named
    /// timers — on the wheel until its connection is ready, then on that
    /// connection's loop in event-loop mode, like its timeouts. Armed
    /// again (a copy that held the next delay failed), it replaces the
    /// alarm and the deadline.
    pub(crate) fn arm_hedge(self: &Arc<Self>, deadline: Instant, alarm: Arc<Alarm>) {
        // The alarm replaced holds a caller's waker: dropped after the
        // unlock (see `crate::sync`).
        let replaced = lock(&self.hedge_alarm).replace(alarm);
        drop(replaced);
        self.change(|link| link.timers.set(Timer::Hedge, Some(deadline)));
    }

    /// Something is taken for this exchange while it has no connection:
    /// `give_back` is called if it ends first — at once if it has ended
    /// already (then false: nothing is to be done for it).
    pub(crate) fn hold(&self, give_back: GiveBack) -> bool {
        {
            let mut link = lock(&self.link);
            if !self.is_done() {
                link.held = Some(give_back);
                return true;
            }
        }
        give_back();
        false
    }

    /// Takes back what [`hold`](Self::hold) gave it, to go on with it —
    /// or to give it back itself; `None` if the exchange ended meanwhile
    /// and gave it back.
    pub(crate) fn unhold(&self) -> Option<GiveBack> {
        lock(&self.link).held.take()
    }

    /// Where this exchange runs (or its connection is being opened), or
    /// ran when it ended: its connection's loop, and the connection while
    /// it has one; nothing yet while it waits for a connection.
    fn carrier(&self) -> Carrier {
        let link = lock(&self.link);
        match &link.conn {
            ConnSlot::Ready(conn) | ConnSlot::Opening(conn) => Carrier {
                loop_index: Some(conn.event_loop.index()),
                conn: Some(conn.source),
            },
            ConnSlot::None => Carrier {
                loop_index: link.ended_on.as_ref().map(|event_loop| event_loop.index()),
                conn: None,
            },
        }
    }

    /// This exchange is a hedged copy of `attempt`, made while `beside`
    /// (the request's other copies) are in flight too: it goes on another
    /// connection than any of theirs (over HTTP/2, one with a stream free
    /// or its own: never one they run on or wait for — a copy beside
    /// another would race nothing the other does not), and a new
    /// connection for it on another loop than the attempt's, where there
    /// is one (before it is submitted). Where they run is read when the
    /// copy is routed ([`kept_away`](Self::kept_away)), not now: they may
    /// move meanwhile. One with no connection yet (queued, or resolving)
    /// has none to keep away from: a connection that takes it, and finds
    /// the copy among those it would take too, tells the copy by its id
    /// (see [`backs_up_any`](Self::backs_up_any) and
    /// [`keep_away_from`](Self::keep_away_from)). A copy made later keeps
    /// away from this one in turn; this one does not learn of it.
    pub(crate) fn back_up<'a>(
        &self,
        attempt: &'a Arc<Exchange>,
        beside: impl IntoIterator<Item = &'a Arc<Exchange>>,
    ) {
        let avoided = |attempt: &Arc<Exchange>| Avoided {
            id: attempt.id,
            attempt: Arc::downgrade(attempt),
            told: Mutex::new(None),
        };
        let _ = self.backs_up.set(Backup {
            backed_up: avoided(attempt),
            beside: beside.into_iter().map(avoided).collect(),
        });
    }

    /// Whether this is a hedged copy that keeps away from an attempt whose
    /// id passes `test` (false for an exchange that is no copy).
    pub(crate) fn backs_up_any(&self, test: impl Fn(u64) -> bool) -> bool {
        self.backs_up
            .get()
            .is_some_and(|backup| backup.attempts().any(|avoided| test(avoided.id)))
    }

    /// The attempts whose ids pass `taken`, of those this hedged copy keeps
    /// away from, are taken by the connection `conn` of loop `loop_index`,
    /// not attached to it yet: the copy keeps away from it while they have
    /// no other connection. Nothing for an exchange that is no copy.
    pub(crate) fn keep_away_from(
        &self,
        loop_index: usize,
        conn: SourceRef,
        taken: impl Fn(u64) -> bool,
    ) {
        let Some(backup) = self.backs_up.get() else {
            return;
        };
        for avoided in backup.attempts().filter(|avoided| taken(avoided.id)) {
            *lock(&avoided.told) = Some(Carrier {
                loop_index: Some(loop_index),
                conn: Some(conn),
            });
        }
    }

    /// Whether it is a hedged copy (see [`back_up`](Self::back_up)).
    pub(crate) fn is_backup(&self) -> bool {
        self.backs_up.get().is_some()
    }

    /// Where this hedged copy keeps away from, read now: for each attempt
    /// it keeps away from, the connection (and its loop) the attempt runs
    /// on, or is being opened for — else the one that
    /// [took it](Self::keep_away_from); and for the attempt it backs up,
    /// else the loop it ended on. Empty for an exchange that is no copy.
    ///
    /// Called with no lock held: it takes the attempts' locks, and an
    /// attempt it holds for the read may be the last reference to it, whose
    /// drop runs the caller's code (see [`crate::sync`]). Routing reads it
    /// before it takes the dispatcher's locks, and matches connections
    /// with [`KeptAway::avoids`].
    pub(crate) fn kept_away(&self) -> KeptAway {
        let Some(backup) = self.backs_up.get() else {
            return KeptAway::default();
        };
        let backed_up = backup.backed_up.place(IfGone::LastLoop);
        let beside = backup
            .beside
            .iter()
            .map(|avoided| avoided.place(IfGone::Nothing));
        KeptAway {
            carriers: std::iter::once(backed_up).chain(beside).flatten().collect(),
        }
    }

    /// The loop a new connection for it keeps away from: that of the
    /// attempt it backs up (see [`kept_away`](Self::kept_away); called
    /// with no lock held).
    pub(crate) fn avoided_loop(&self) -> Option<usize> {
        let backup = self.backs_up.get()?;
        backup.backed_up.place(IfGone::LastLoop)?.loop_index
    }

    /// Clears the hedge delay (the head has come: no copy is wanted).
    pub(crate) fn disarm_hedge(self: &Arc<Self>) {
        if lock(&self.hedge_alarm).is_some() {
            self.change(|link| link.timers.set(Timer::Hedge, None));
        }
    }

    /// The loop of the connection that carries the exchange, or carried it
    /// when it ended.
    pub(crate) fn last_loop(&self) -> Option<Arc<EventLoop>> {
        let link = lock(&self.link);
        match &link.conn {
            ConnSlot::Ready(conn) => Some(conn.event_loop.clone()),
            ConnSlot::None | ConnSlot::Opening(_) => link.ended_on.clone(),
        }
    }

    /// This exchange goes where `previous` was answered with a redirect
    /// (the next hop) or a 417 (the repeat without the `Expect`), or where
    /// `previous` failed or was answered with a status the retry policy
    /// retries (the retry): it takes its request's place among the pool's
    /// waiters, ahead of the requests sent after it. (Not yet submitted:
    /// it has none of its own.)
    pub(crate) fn follows(&self, previous: &Exchange) {
        self.place.follow(&previous.place);
    }

    /// Runs `task` on the loop of the connection that carries this
    /// exchange, after what that loop is doing now — so that, if the
    /// exchange has completed there, its connection is back in the pool
    /// when `task` runs — or here, at once, if it has no connection or the
    /// loop refuses (it is shutting down). The next hop of a redirect is
    /// submitted this way, to reuse the connection of the last.
    pub(crate) fn after_its_loop(&self, task: impl FnOnce() + Send + 'static) {
        let Some(event_loop) = self.last_loop() else {
            return task();
        };
        // Shared with the loop's task, so that a refused task still runs.
        let task = Arc::new(Mutex::new(Some(task)));
        let queued = task.clone();
        let posted = event_loop.execute(move |_| {
            if let Some(task) = lock(&queued).take() {
                task();
            }
        });
        if posted.is_err() {
            if let Some(task) = lock(&task).take() {
                task();
            }
        }
    }

    /// The body's pipe is full: the read timeout stops until it has room
    /// again (then [`start_read`](Self::start_read) starts it afresh).
    pub(crate) fn pause_read(self: &Arc<Self>) {
        self.change(|link| link.timers.set(Timer::Read, None));
    }

    /// The request was just written, or the body's pipe has room again: the
    /// read timeout starts, a full period from `now` (read only if there is
    /// one, as for [`mark_read`](Self::mark_read)).
    pub(crate) fn start_read(self: &Arc<Self>, now: impl FnOnce() -> Instant) {
        let Some(read_timeout) = self.deadlines.read_timeout else {
            return;
        };
        let now = now();
        self.mark(&self.last_read, now);
        let deadline = deadline_after(now, read_timeout);
        self.change(|link| link.timers.set(Timer::Read, deadline));
    }

    /// The connection stops waiting on the server to speak — a request
    /// that waited for `100 Continue` sends its body — and the read timeout
    /// with it, until [`start_read`](Self::start_read) starts it again.
    pub(crate) fn stop_read(self: &Arc<Self>) {
        self.change(|link| link.timers.set(Timer::Read, None));
    }

    /// The request waits on the server — its socket full, or its HTTP/2
    /// window spent — from `now`: the write timeout starts, a full period
    /// from `now`. The connection calls it once per wait, marks what the
    /// server takes meanwhile ([`mark_written`](Self::mark_written)), and
    /// ends the wait with [`stop_write`](Self::stop_write).
    pub(crate) fn start_write(self: &Arc<Self>, now: Instant) {
        let Some(write_timeout) = self.deadlines.write_timeout else {
            return;
        };
        self.mark_written(now);
        let deadline = deadline_after(now, write_timeout);
        self.change(|link| link.set_timer(Timer::Write, deadline));
    }

    /// The request no longer waits on the server: the write timeout stops.
    pub(crate) fn stop_write(self: &Arc<Self>) {
        if self.deadlines.write_timeout.is_some() {
            self.change(|link| link.set_timer(Timer::Write, None));
        }
    }

    /// Changes what the lock guards with `f`, unless the exchange has ended,
    /// and brings the timer entry in line; then — unlocked — cancels the
    /// entry that was replaced, fires the entry if it is due already on a
    /// manual clock's wheel, and ends the exchange if the wheel refused to
    /// arm.
    fn change(self: &Arc<Self>, f: impl FnOnce(&mut Link)) {
        let changed = {
            let mut link = lock(&self.link);
            if link.timers.is_ended() {
                return;
            }
            f(&mut link);
            link.timers.sync(self, &self.wheel)
        };
        if let Some(armed) = changed.cancel {
            armed.cancel();
        }
        if changed.due_on_manual_clock {
            timers::fire_due_on_manual_clock(&self.wheel);
        }
        if changed.refused {
            // The wheel stops when its client closes, or when a caller-given
            // timer was stopped elsewhere.
            self.fail(Error::ClientClosed, None);
        }
    }

    /// The connection read an interim (1xx) head, over either protocol:
    /// the listener is told of it as it came (`reason` as sent over
    /// HTTP/1.x, `None` over HTTP/2, which has none). Nothing else changes:
    /// the final head is still to come. Returns false if the exchange has
    /// ended, as [`deliver_head`](Self::deliver_head) does: a listener may
    /// end it here (a cancel, a panic), and so may a timeout meanwhile —
    /// the connection then stops reading its response at once, rather
    /// than wait for the abort the end posts to its loop.
    pub(crate) fn tell_interim(
        &self,
        version: http::Version,
        status: http::StatusCode,
        reason: Option<&[u8]>,
        headers: &http::HeaderMap,
    ) -> bool {
        self.listener
            .on_interim_head(&crate::events::ResponseHead::new(
                version, status, reason, headers,
            ));
        !self.is_done()
    }

    /// The connection delivers the response head: the listener is told of
    /// it (status, fields, the whole head — its code may end the
    /// exchange), and the caller's future resolves with it. Returns false
    /// if the exchange has ended already (the head then goes nowhere).
    pub(crate) fn deliver_head(&self, head: Head) -> bool {
        self.listener.on_status(head.status);
        self.listener.on_headers(&head.headers);
        self.listener.on_response_head(&head.told());
        if self.is_done() {
            return false;
        }
        if self.decompress && is_decoded(&self.request.method, head.status, &head.headers) {
            self.encoded.store(true, Ordering::Release);
        }
        let _ = self.status.compare_exchange(
            0,
            head.status.as_u16(),
            Ordering::Release,
            Ordering::Relaxed,
        );
        self.outcome.deliver(Ok(head)).is_ok()
    }

    /// The status of the head delivered, if one was.
    fn delivered_status(&self) -> Option<http::StatusCode> {
        http::StatusCode::from_u16(self.status.load(Ordering::Acquire)).ok()
    }

    /// Whether the answer to the request's `Expect: 100-continue` is one
    /// its policy may send the request again for, body and all: a `417
    /// Expectation Failed` (repeated without the `Expect`) or a redirect
    /// (any 3xx: the policy tells which it follows with the body — a `307`,
    /// a `308`, a `301` or `302` to all but a POST — and lets the others'
    /// go). A streamed body no
    /// connection took then — none of it went: it waited for `100
    /// Continue` — outlives the exchange, for that policy (see
    /// [`take_unsent_body`](Self::take_unsent_body)).
    fn keeps_unsent_body(&self) -> bool {
        self.request.expect_continue
            && self.delivered_status().is_some_and(|status| {
                status == http::StatusCode::EXPECTATION_FAILED || status.is_redirection()
            })
    }

    /// The streamed body the exchange kept for its answer
    /// ([`keeps_unsent_body`](Self::keeps_unsent_body)), none of it sent,
    /// with its declared length (`None`: chunked): for the request's policy
    /// to send whole on another exchange, or let go. `None` after any other
    /// answer — a 2xx's upload may be going on.
    pub(crate) fn take_unsent_body(&self) -> Option<(UploadSource, Option<u64>)> {
        if !self.keeps_unsent_body() {
            return None;
        }
        self.request.take_unsent()
    }

    /// The body has been read off the connection, whole (its bytes may still
    /// wait in the pipe for the reader): the exchange ends. Returns whether
    /// this call ended it. An answer held ([`hold_answer`](Self::hold_answer))
    /// completes with its own trailers: `trailers` are `None` then.
    pub(crate) fn complete(&self, trailers: Option<http::HeaderMap>) -> bool {
        self.end(Ending::Complete(trailers), false).is_some()
    }

    /// The connection failed the exchange (it closes itself). Returns
    /// whether this call ended it.
    pub(crate) fn finish_err(&self, error: Error) -> bool {
        self.end(Ending::Failed(error), false).is_some()
    }

    /// The response has come whole, with `trailers`, before the request
    /// body was all sent (a 2xx whose upload goes on, over HTTP/1.1 or an
    /// HTTP/2 stream: RFC 9113 §8.1 and RFC 9112 §9.5 let a server answer a
    /// request it has not read whole): its end
    /// is held until the upload's, and the connection
    /// [completes](Self::complete) it then. Nothing is left to read: the
    /// read timeout stops, and a reader waiting for the body is woken for
    /// what it has (the pipe would wake it for the last bytes only at its
    /// low-water mark). A timeout meanwhile (the request's, or the write
    /// timeout bounding the upload) stops the upload but completes the
    /// exchange with this answer rather than failing it: the server has
    /// answered, whole, and the timeout bounds only the upload now. A
    /// cancel, the client's closing and the upload's own failure still
    /// fail it.
    pub(crate) fn hold_answer(self: &Arc<Self>, trailers: Option<http::HeaderMap>) {
        lock(&self.link).answer = Some(trailers);
        self.body().flush();
        self.stop_read();
    }

    /// Ends the exchange, unless it has already ended; returns the
    /// connection it was attached to. Runs on the calling thread: disarms
    /// the timers, [tells the end](Self::tell_end) (or leaves it to the
    /// thread telling one of the exchange's events now) and lets a pump go.
    /// A failure of a body whose reader has ended it — its connection
    /// told, not yet stopped reading it — ends with the reader's end, the
    /// first ([`readers_end`](Self::readers_end)), whoever fails it: a
    /// timeout, a cancel, the client's close, the connection itself. With
    /// an answer held ([`hold_answer`](Self::hold_answer)), a completion
    /// completes with it, and so does a failure if `answer_stands`.
    fn end(&self, ending: Ending, answer_stands: bool) -> Option<Option<ConnRef>> {
        // SeqCst, with `register`: of an exchange ended while it was being
        // registered, one of the two sees the other and removes it.
        if self.done.swap(true, Ordering::SeqCst) {
            return None;
        }
        let ending = match ending {
            Ending::Failed(error) => Ending::Failed(self.readers_end().unwrap_or(error)),
            complete @ Ending::Complete(_) => complete,
        };
        let (armed, conn, held, answer) = {
            let mut link = lock(&self.link);
            let conn = link.set_conn(ConnSlot::None);
            if let ConnSlot::Ready(carrier) = &conn {
                link.ended_on = Some(carrier.event_loop.clone());
            }
            let answer = link.answer.take();
            (link.timers.end(), conn, link.held.take(), answer)
        };
        let ending = match (ending, answer) {
            (Ending::Failed(_), Some(trailers)) if answer_stands => Ending::Complete(trailers),
            (Ending::Complete(_), Some(trailers)) => Ending::Complete(trailers),
            (ending, _) => ending,
        };
        if let Some(armed) = armed {
            armed.cancel();
        }
        if let Some(give_back) = held {
            give_back();
        }
        self.registry
            .remove(self.registry_key.load(Ordering::SeqCst), self.id);
        // Now, unless an event of the exchange is being told (its loop is
        // in `on_status`, say, as a timeout ends it on the wheel): then by
        // that event's teller, once it returns, so that it is the last
        // event told (see `listener`).
        if let Some(ending) = self.listener.end(ending) {
            self.tell_end(ending);
        }
        // A body no connection took is not sent now: its pump goes — unless
        // a `417` or a redirect answered the `Expect: 100-continue` it
        // waited for: then none of it went, and its request's policy takes
        // it from here as it looks at that answer (sent again, or let go).
        // A body in memory, and the head, are not sent again.
        if !self.keeps_unsent_body() {
            drop(self.request.take_source());
        }
        self.request.release();
        Some(conn.conn().cloned())
    }

    /// Tells how the exchange ended: the listener, then the caller —
    /// through the future before the head, the body after it.
    fn tell_end(&self, ending: Ending) {
        // Guarded: a listener that panics here changes nothing, the
        // exchange has already ended.
        match ending {
            Ending::Complete(trailers) => {
                if let Some(status) = self.delivered_status() {
                    self.tell_completed(status);
                }
                self.pacing.record(self.body.pushed());
                self.body.finish(trailers);
            }
            Ending::Failed(error) => {
                self.listener.on_failed(&error);
                if let Err(Err(error)) = self.outcome.deliver(Err(error)) {
                    self.body.fail(error);
                }
            }
        }
    }

    /// The exchange completed with `status`: told now — unless its
    /// response is encoded and its reader has not checked the body yet,
    /// which tells it then ([`body_checked`](Self::body_checked)).
    fn tell_completed(&self, status: http::StatusCode) {
        if !self.is_encoded() {
            return self.listener.on_completed(status);
        }
        let mut link = lock(&self.link);
        if matches!(link.completion, Completion::Unchecked) {
            link.completion = Completion::Held(status);
            return;
        }
        let failure = link.body_failure.take();
        drop(link);
        self.tell_completion(status, failure);
    }

    /// Ends the exchange with `error` from outside its connection's code (a
    /// timeout, a cancel, the client closing) and aborts it on the
    /// connection it was using, which cannot be reused mid-exchange. `cx`
    /// is the loop the caller runs on, if any: on the connection's own loop
    /// the abort waits for a gap between expiries.
    pub(crate) fn fail(&self, error: Error, cx: Option<&mut LoopContext<'_>>) -> bool {
        self.end_and_abort(error, false, cx)
    }

    /// [`fail`](Self::fail), but an answer held whole
    /// ([`hold_answer`](Self::hold_answer)) stands if `answer_stands`: the
    /// exchange completes with it, and the connection stops its upload.
    fn end_and_abort(
        &self,
        error: Error,
        answer_stands: bool,
        cx: Option<&mut LoopContext<'_>>,
    ) -> bool {
        let Some(conn) = self.end(Ending::Failed(error), answer_stands) else {
            return false;
        };
        if let Some(conn) = conn {
            match cx {
                Some(cx) if Arc::ptr_eq(cx.event_loop(), &conn.event_loop) => {
                    cx.abort_later(conn.source, self.id);
                }
                _ => {
                    let (source, id) = (conn.source, self.id);
                    // A loop that is shutting down closes the connection itself.
                    let _ = conn.event_loop.execute(move |cx| cx.abort_now(source, id));
                }
            }
        }
        true
    }

    /// The caller cancelled (or dropped the future).
    pub(crate) fn cancel(&self) -> bool {
        self.fail(Error::Cancelled, None)
    }

    /// The entry of generation `tag` expired, on the wheel (`cx` is `None`)
    /// or on the connection's loop.
    fn expired(self: &Arc<Self>, tag: u64, cx: Option<&mut LoopContext<'_>>) {
        let now = self.clock.now();
        let mut failure = None;
        let mut hedge_due = false;
        self.change(|link| {
            let Some(due) = link.timers.expired(timers::generation_of(tag), now) else {
                return;
            };
            if due.hedge {
                hedge_due = true;
                link.timers.set(Timer::Hedge, None);
            }
            if due.request {
                failure = Some(TimeoutKind::Request);
            }
            // Stalled for the whole period, or active since: then the timer
            // moves to the end of the period after the last activity.
            let stalls = [
                (due.read, Timer::Read, TimeoutKind::Read),
                (due.write, Timer::Write, TimeoutKind::Write),
            ];
            for (due, timer, kind) in stalls {
                if !due || failure.is_some() {
                    continue;
                }
                match self.stall_deadline(kind) {
                    Some(stalled_until) if now < stalled_until => {
                        link.set_timer(timer, Some(stalled_until));
                    }
                    // A socket tells of room only once a share of its
                    // buffer is free, which a server reading slowly may
                    // take longer than the timeout to free: before the
                    // write timeout fails, the connection tries the socket
                    // once more (any room is the server's progress).
                    Some(_) if timer == Timer::Write && !link.write_probed => {
                        link.write_probed = true;
                        link.timers
                            .set(timer, deadline_after(now, WRITE_PROBE_WAIT));
                        link.wake_conn();
                    }
                    Some(_) => failure = Some(kind),
                    None => link.timers.set(timer, None),
                }
            }
            if failure.is_some() {
                // Nothing to arm again: the exchange ends just after.
                for timer in Timer::ALL {
                    link.timers.set(timer, None);
                }
            }
        });
        if hedge_due {
            let alarm = lock(&self.hedge_alarm).clone();
            if let Some(alarm) = alarm {
                alarm.ring();
            }
        }
        if let Some(kind) = failure {
            #[cfg(feature = "tracing")]
            self.trace_expiry(kind, now, cx.is_some());
            let duration = match kind {
                TimeoutKind::Read => self.deadlines.read_timeout,
                TimeoutKind::Write => self.deadlines.write_timeout,
                _ => self.deadlines.request_timeout,
            };
            let error = Error::timeout_of(kind, self.remote_name(), duration.unwrap_or_default());
            // A timeout bounds the server; an answer come whole meanwhile
            // is the server's, and stands (see `hold_answer`).
            self.end_and_abort(error, true, cx);
        }
    }

    /// When the read (or write) stall of `kind` ends the exchange: a
    /// period after the last activity it bounds.
    fn stall_deadline(&self, kind: TimeoutKind) -> Option<Instant> {
        let (timeout, last) = match kind {
            TimeoutKind::Write => (self.deadlines.write_timeout, self.last_written()),
            _ => (self.deadlines.read_timeout, self.last_read()),
        };
        deadline_after(last, timeout?)
    }

    /// A `tracing` event for a timeout that fired: its kind, where it ran
    /// (the wheel, or the loop's thread) and how late, against the request
    /// deadline or the end of the read or write timeout's period.
    #[cfg(feature = "tracing")]
    fn trace_expiry(&self, kind: TimeoutKind, now: Instant, on_loop: bool) {
        let deadline = match kind {
            TimeoutKind::Read | TimeoutKind::Write => self.stall_deadline(kind),
            _ => self
                .deadlines
                .request_timeout
                .and_then(|timeout| deadline_after(self.submitted, timeout)),
        };
        let late = deadline.map(|deadline| now.saturating_duration_since(deadline));
        let thread = std::thread::current();
        // `attempt_id`, as the listener events name this exchange (the
        // event is not in the request's span: it joins them by this).
        tracing::debug!(
            attempt_id = self.id,
            ?kind,
            ran_on = if on_loop { "loop" } else { "wheel" },
            thread = thread.name().unwrap_or(""),
            late_us = late.map(|late| late.as_micros() as u64),
            "timeout fired"
        );
    }

    /// The scheduler of the entry of generation `tag` stopped (a caller's
    /// wheel stopped, a loop shut down) with it armed: nothing else would end
    /// the exchange.
    fn scheduler_stopped(self: &Arc<Self>, tag: u64) {
        let live = lock(&self.link).timers.stopped(timers::generation_of(tag));
        if live {
            self.fail(Error::ClientClosed, None);
        }
    }

    pub(crate) fn poll_head(&self, cx: &mut Context<'_>) -> Poll<Result<Head, Error>> {
        let polled = self.outcome.poll(cx);
        if polled.is_pending() {
            crate::event_loop::polled_here();
            // Polled, not waited: the exchange is awaited (see
            // `mark_awaited`, here under the lock taken anyway), and nobody
            // drives the loop its request was posted to for a driver, which
            // must not wait for its grace.
            let posted_to = {
                let mut link = lock(&self.link);
                let posted_to = link.posted_to.take();
                self.mark_awaited_holding(link);
                posted_to
            };
            if let Some(event_loop) = posted_to {
                event_loop.wake_if_idle();
            }
        }
        polled
    }

    /// Blocks for the head, driving the exchange's loop while it is idle
    /// (see `EventLoop::drive_until`), else as [`Outcome::wait`] does —
    /// until that loop is left idle (then it drives it). `loops`: the
    /// client's, any of which the exchange may go to while it has no
    /// connection.
    pub(crate) fn wait_head(&self, loops: &[Arc<EventLoop>]) -> Result<Head, Error> {
        let spin = self.pacing.spin(WaitFor::Head, self.registry.len(), 0);
        loop {
            let home = self.blocking_home();
            if let Some(home) = &home {
                let started = spin.start();
                spin.record(started, self.outcome.drive(home, spin.time()));
            }
            if let Some(head) = self.outcome.wait(spin.time(), home.as_ref(), loops) {
                return head;
            }
        }
    }

    /// A poll of the body found nothing yet: the exchange is awaited (see
    /// [`mark_awaited`](Self::mark_awaited)) — a loop its caller drove,
    /// for the head or a chunk, and left idle is taken back by its thread,
    /// since a poll does not drive.
    pub(crate) fn body_pending(&self) {
        crate::event_loop::polled_here();
        self.mark_awaited();
    }

    /// The reader blocks for the next chunk of the body (see
    /// [`Pipe::take_blocking`]); `None`, at once, if nothing has come and
    /// the wait would [stall](Self::stalls_here) the loop the calling
    /// thread runs.
    pub(crate) fn take_body_blocking(&self) -> Option<Taken> {
        let home = self.blocking_home();
        self.body
            .take_blocking(home.as_ref(), &|so_far| self.body_spin(so_far), || {
                self.stalls_here()
            })
    }

    /// The spin of a blocking wait for more of the body, `so_far` bytes of
    /// which have come (see [`Pacing::spin`]).
    fn body_spin(&self, so_far: u64) -> Spin<'_> {
        self.pacing.spin(WaitFor::Body, self.registry.len(), so_far)
    }

    /// The reader blocks for the whole body (see
    /// [`Pipe::take_whole_blocking`]); `None` as for
    /// [`take_body_blocking`](Self::take_body_blocking).
    pub(crate) fn take_whole_body_blocking(&self) -> Option<Whole> {
        let home = self.blocking_home();
        self.body
            .take_whole_blocking(home.as_ref(), &|so_far| self.body_spin(so_far), || {
                self.stalls_here()
            })
    }

    /// Its request is posted to `event_loop` for an idle connection there
    /// (the pooled path) or a stream of a shared HTTP/2 connection there:
    /// that loop is not woken for it if idle, since
    /// this exchange's caller is expected to drive it — by waiting — or
    /// else a poll of its future wakes it (see [`poll_head`](Self::poll_head)).
    pub(crate) fn post_for_driver(
        &self,
        event_loop: &Arc<EventLoop>,
        task: crate::event_loop::LoopTask,
    ) -> Result<(), crate::event_loop::Rejected> {
        let awaited = {
            let mut link = lock(&self.link);
            link.posted_to = Some(event_loop.clone());
            if !link.is_home(event_loop) {
                link.note_home(event_loop.clone());
            }
            link.awaited
        };
        // Posted from a loop (a redispatch, a redirect's next hop): the
        // caller may be blocked elsewhere already, or polled before this.
        // Awaited already (polled, or its caller asleep with no loop to
        // drive — a request that waited for a connection being opened,
        // sent on by another thread): nobody will drive for it.
        if awaited || crate::event_loop::on_any_loop() {
            return event_loop.execute_boxed(task);
        }
        event_loop.execute_for_driver(task)
    }

    /// A new connection for it is to be opened on `event_loop` (chosen by
    /// the group), or it goes on a shared connection there: that loop is
    /// its home from now on, before the task that attaches it runs there —
    /// what a blocking wait looks at to refuse waiting on the loop its
    /// thread runs (see [`stalls_here`](Self::stalls_here)).
    pub(crate) fn bound_for(&self, event_loop: &Arc<EventLoop>) {
        let mut link = lock(&self.link);
        if !link.is_home(event_loop) {
            link.note_home(event_loop.clone());
        }
    }

    /// Whether a blocking wait for this exchange, on the calling thread,
    /// would wait for the loop that thread runs (see
    /// [`EventLoop::stalls_here`]): its home — its connection's loop, the
    /// loop its request was posted or bound to. Only when the thread runs
    /// some loop does this look further than two thread-local reads (the
    /// lock, the home), so a blocking caller's wait costs no more.
    pub(crate) fn stalls_here(&self) -> bool {
        if !crate::event_loop::on_any_loop() {
            return false;
        }
        let link = lock(&self.link);
        let conn = link.conn.conn().map(|conn| &conn.event_loop);
        conn.or(link.home.as_ref())
            .is_some_and(|home| home.stalls_here())
    }

    /// The loop a blocked caller of this exchange would drive, or sleep on:
    /// its connection's, or the one its request was posted to. With none
    /// (a request waiting for its connection), the exchange is
    /// [awaited](Self::mark_awaited): the loop it goes to must not leave
    /// its news for a driver.
    ///
    /// None either on a thread firing a wheel's entry (a listener told
    /// there): driving a loop, its poll would block with the timeouts on
    /// that wheel, which its wait fires instead (see [`timers::firing`]).
    /// The exchange is awaited then, as when polled, and the loop its
    /// request was posted to for a driver is woken.
    fn blocking_home(&self) -> Option<Arc<EventLoop>> {
        // Under one lock: a post between the look and the mark would find
        // the exchange not awaited, and not wake the loop it goes to.
        let mut link = lock(&self.link);
        if timers::firing_a_wheel() {
            let posted_to = link.posted_to.take();
            self.mark_awaited_holding(link);
            if let Some(event_loop) = posted_to {
                event_loop.wake_if_idle();
            }
            return None;
        }
        let conn = link.conn.conn().map(|conn| &conn.event_loop);
        let home = conn.or(link.posted_to.as_ref()).cloned();
        if home.is_none() && !link.awaited {
            self.mark_awaited_holding(link);
        }
        home
    }

    /// The exchange waits in its pool's queue for a connection: `queued`
    /// keeps the group's loops from being left idle (one of them may hold
    /// the busy connection it waits for) until it has a connection or
    /// ends — also if that came first.
    pub(crate) fn wait_in_queue(&self, queued: crate::event_loop::Queued) {
        let mut link = lock(&self.link);
        if matches!(link.conn, ConnSlot::None) && !self.is_done() {
            link.queued = Some(queued);
        }
    }

    /// Someone waits on the exchange without driving its loop: a task
    /// polled it (and waits for its waker), or a thread blocks on it with
    /// no loop to drive. From now on the loop it is on is never left idle
    /// while it is there (see [`EventLoop::await_exchange`]). Once: one
    /// atomic load after that.
    fn mark_awaited(&self) {
        if self.awaited.load(Ordering::Relaxed) {
            return;
        }
        self.mark_awaited_holding(lock(&self.link));
    }

    /// [`mark_awaited`](Self::mark_awaited) past its atomic load, for a
    /// caller that holds the exchange's lock (`link`) already — to read
    /// something with the mark, or to decide it: the mark is made under
    /// that lock, and the atomic set once it is released.
    fn mark_awaited_holding(&self, mut link: MutexGuard<'_, Link>) {
        link.set_awaited();
        drop(link);
        self.awaited.store(true, Ordering::Relaxed);
    }
}

impl LoopTimeout for Exchange {
    fn expire(self: Arc<Self>, tag: u64, cx: &mut LoopContext<'_>) {
        self.expired(tag, Some(cx));
    }

    fn stopped(self: Arc<Self>, tag: u64) {
        self.scheduler_stopped(tag);
    }
}

impl WheelTask for Exchange {
    fn fire(self: Arc<Self>, tag: u64) {
        timers::firing(&self.wheel, || self.expired(tag, None));
    }

    fn stopped(self: Arc<Self>, tag: u64) {
        self.scheduler_stopped(tag);
    }
}
