//! HTTP/1.1 on an open connection: the request going out ([`send`]), the
//! response coming in — its head delivered to the caller, its body pushed
//! through the exchange's bounded pipe as it is read, reading paused while
//! the pipe is full — and what follows: offered back to the pool, retried
//! once on a fresh connection, or closed with a typed error.

mod collect;
pub(super) mod keep_alive;
mod send;

use super::read_buf::{read_spare_once, Filled};
use super::write_stall::WriteStall;
use super::{Conn, IdleConn, Offered, State, EXPECT_TIMER};
use super::{READ_BUDGET, WRITE_BUDGET};
use crate::error::Error;
use crate::event_loop::LoopContext;
use crate::exchange::{deadline_after, own_size, Exchange, Head, Pushed, Reader, Waiter};
use crate::h1::{DecodeError, Decoded, ResponseDecoder};
use crate::net::Transport;
use bytes::{Bytes, BytesMut};
use collect::Collected;
use send::{BodyOut, Sending, Sent};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Body bytes gathered before they go into the pipe as one chunk (a
/// response of many small chunks costs a push per read, not per chunk).
const GATHER: usize = 64 * 1024;

/// Room left in the gathered bytes' allocation below which a streamed
/// body's next read reserves a new one (see [`Active::in_place`]): what an
/// allocation can waste at most.
const MIN_SPARE: usize = 4 * 1024;

/// How much one read of a body with `remaining` bytes left (if it says)
/// may take into a buffer with `spare` capacity: the spare while it is
/// worth a read ([`MIN_SPARE`]), else `growth`, reserved for it — no more
/// than the body has left.
fn read_room(spare: usize, growth: usize, remaining: u64) -> usize {
    let room = if spare >= MIN_SPARE { spare } else { growth };
    usize::try_from(remaining).map_or(room, |remaining| remaining.min(room))
}

/// A known-length body with less than this left is read through the read
/// buffer, not in place: a read in place is offered exactly what the body
/// lacks, and one that fills it says nothing of whether the socket holds
/// more (see `ReadBuf::drained`) — so the connection, once idle, would be
/// peeked before its next request. A read into the read buffer is offered
/// more, and its short read says the socket is drained; copying these few
/// bytes costs less than that system call. (Against nginx, which sends a
/// small file's head and body in two segments, every such response
/// ended that way.)
const IN_PLACE_MIN: u64 = 4 * 1024;

/// The most a body's mark raises its connection's receive window to.
/// Linux grows a socket's receive buffer to fit a mark (twice it) and
/// clamps the window the server may fill unread to it, and never shrinks
/// either again (`tcp_set_rcvlowat`); it caps a mark at half its largest
/// receive buffer.
const LOWAT_MAX: usize = 1024 * 1024;

/// The most a collected body asks the socket to hold before it reports
/// itself readable, once its connection's window has been raised to
/// [`LOWAT_MAX`] (see `Conn::await_body`). A mark of the whole body would
/// have the reader copy nothing until the server had sent it all, then
/// copy it all while the server idles; a lower one lets the two overlap,
/// at a wake-up per mark. Chosen by measuring 1 MiB bodies against two
/// servers (`docs/performance-log.md`, "The collected body's mark"): nginx's
/// `sendfile` wants a low mark, a server writing the body from memory a
/// high one.
const LOWAT_COLLECTED: usize = 384 * 1024;

/// Below this, the rest of a body is read as it comes.
const LOWAT_MIN: usize = 16 * 1024;

/// The most a failed write makes the connection read at once, past the
/// body's window (see `Conn::write_failure`).
const EARLY_ANSWER_MAX: usize = 8 * 1024 * 1024;

/// What a connection reads on, discarding, after its body's reader has
/// gone — of what has arrived already, never waiting for more: a small
/// remainder is cheaper to drain than a new connection.
const DRAIN: usize = 64 * 1024;

/// Tells `exchange`'s listener of its request's head, written whole on
/// the connection `info`: the bytes written, as they are
/// ([`RequestHead`](crate::events::RequestHead) reads them only if the
/// listener asks).
///
/// The head is taken out of the exchange's payload while it is told, and
/// put back after (a request sent again on a fresh connection writes it
/// again): the payload's lock is not held over the listener's code, which
/// would keep an exchange ended meanwhile from letting its bytes go — on
/// the wheel, or, for a listener that cancels its own request, on this
/// very thread for ever. An exchange that ended meanwhile keeps it no
/// longer: it is freed. With no listener, nothing is taken: nobody is
/// told.
fn tell_request_head(exchange: &Exchange, info: &crate::events::ConnectionInfo) {
    if !exchange.listener.listens() {
        return;
    }
    let head = std::mem::take(&mut exchange.request.payload().head);
    let told = crate::events::RequestHead::http1(&head);
    exchange.listener.on_request_head(info, &told);
    let mut payload = exchange.request.payload();
    if !payload.released {
        payload.head = head;
    }
    // Else `head` is freed here, after the unlock (locals drop in reverse).
}

/// The exchange a connection runs, and how far it got.
pub(super) struct Active {
    pub(super) exchange: Arc<Exchange>,
    decoder: ResponseDecoder,
    /// Taken from the pool rather than freshly connected.
    reused: bool,
    sending: Sending,
    /// Body bytes decoded and not yet in the pipe.
    gathered: BytesMut,
    /// The gathered bytes are held back for an untouched pipe (see
    /// [`Conn::push_gathered`]): in the pipe while `gathered` is empty
    /// (where the reader's first take takes them), else taken back
    /// ([`Active::take_back_held`]) to gather more on, or to collect or end
    /// the body with. So the held bytes are always the newest in the pipe:
    /// nothing is pushed while they are there.
    deferred: bool,
    trailers: Option<http::HeaderMap>,
    /// The pipe was full: reading waits until it has room.
    paused: bool,
    /// The body's reader has gone: the rest is read and discarded, up to
    /// this many more bytes, then the connection is reused (or closed if
    /// the body is longer).
    draining: Option<usize>,
    /// The reader collects the body whole: it is gathered here, with what
    /// the pipe held, and pushed at its end.
    collected: Option<Collected>,
    /// The socket's receive low-water mark now (1, the default, or what
    /// [`Conn::await_body`] set).
    lowat: usize,
    /// Whether the request waits on the server to take more of it.
    write_stall: WriteStall,
    /// The answer came whole (a 2xx, its `keep_alive` here) while the
    /// request was still going out: the upload goes on, and the exchange
    /// ends — the answer's end told, the connection pooled or closed —
    /// only once the request is out (see [`Conn::response_done`]).
    answered_whole: Option<bool>,
    /// The last step of sending left the socket full: the request waits
    /// on the server to take more of it.
    socket_full: bool,
}

impl Active {
    /// The reader has asked for the body whole: takes back what the pipe
    /// holds, to gather it with the rest.
    fn start_collecting(&mut self) {
        let (taken_back, mut gathered) = self.exchange.body().reclaim();
        // The held bytes, older than any gathered since (none while held).
        gathered.unsplit(std::mem::take(&mut self.gathered));
        let ahead = self.decoder.body_remaining().unwrap_or_else(|| {
            // A guess at the whole body, less what is here already.
            let here = taken_back.iter().map(Bytes::len).sum::<usize>() + gathered.len();
            collect::ahead_of_unknown(self.exchange.typical_body()).saturating_sub(here as u64)
        });
        self.collected = Some(Collected::new(taken_back, gathered, ahead));
        self.deferred = false;
        self.paused = false;
    }

    /// The bytes held back in the pipe that its reader has not taken yet
    /// come back, to be gathered on (see [`Active::deferred`]).
    fn take_back_held(&mut self) {
        if self.deferred && self.gathered.is_empty() {
            self.gathered = self.exchange.body().unhold();
        }
    }

    /// The capacity of the gathered bytes' first allocation, at the first
    /// `first` bytes of a body: a body of unknown length that may be
    /// deferred or collected (see [`Conn::push_gathered`]) reserves what
    /// a collect of it would ([`collect::ahead_of_unknown`]: the client's
    /// typical body, and a quarter more), so that it grows without copying
    /// itself and a collect adopts it as it is — but at most twice the
    /// window: a response nobody reads keeps no more than that (the body's
    /// window bounds its memory), and a reservation of up to twice the
    /// window is handed over whole at the window, not copied (`own_size`).
    /// Else — its length known, or its reader taking it as a stream, each
    /// chunk keeping the allocation it was cut from — what came.
    fn first_gather(&self, first: usize, window: usize) -> usize {
        if self.decoder.body_remaining().is_some() {
            return first;
        }
        let typical = collect::ahead_of_unknown(self.exchange.typical_body());
        let most = window.saturating_mul(2);
        let reserved = usize::try_from(typical).map_or(most, |typical| typical.min(most));
        // Asked only when it matters: a lock.
        if reserved <= first || matches!(self.exchange.body().reader(None), Reader::Takes) {
            return first;
        }
        reserved
    }

    /// Where to read the body straight from the socket, past the read
    /// buffer, and how much at most: its length is known, at least
    /// [`IN_PLACE_MIN`] of it is still to come, and it is read (not
    /// drained). Into the collected body
    /// when the reader collects it; else into the bytes gathered for the
    /// pipe's next chunk — either way each byte is copied once, by the
    /// kernel.
    fn in_place(&mut self) -> Option<(&mut BytesMut, usize)> {
        let remaining = self
            .decoder
            .body_remaining()
            .filter(|&n| n >= IN_PLACE_MIN)?;
        if self.draining.is_some() {
            return None;
        }
        if let Some(collected) = &mut self.collected {
            let max = collected.read_ahead(remaining);
            return Some((collected.buf_mut(), max));
        }
        // Into what the gathered bytes' allocation has left while that is
        // worth a read: each chunk pushed keeps its allocation alive, so a
        // read that reserved a fresh one every time would make a body that
        // trickles in small segments hold an allocation per segment. Either
        // way no more than the chunk lacks ([`GATHER`]).
        let room = GATHER.saturating_sub(self.gathered.len());
        let spare = self.gathered.capacity() - self.gathered.len();
        let max = read_room(spare.min(room), room, remaining);
        (max > 0).then_some((&mut self.gathered, max))
    }
}

/// What [`Conn::decode`] left to do.
enum Decodes {
    /// Read more from the socket.
    More,
    /// Stop reading: the exchange ended, the connection closed, or the
    /// body's pipe is full.
    Stop,
}

impl Conn {
    /// Runs `exchange` on this idle connection (the pooled path), after
    /// checking that the server has not closed it meanwhile. If it has,
    /// the exchange goes again (nothing of it was sent), and then the
    /// connection closes: in that order, so that the exchange is at its
    /// place in the pool's queue when the permit the close gives back
    /// serves the oldest waiter — not behind a request sent after it and
    /// queued while this connection was on its way to it. Never gives the
    /// exchange back.
    pub(super) fn start_on_idle(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
    ) -> Result<(), Arc<Exchange>> {
        if !self.still_reusable(cx, &exchange) {
            self.send_to_another(exchange, true);
            self.close(cx);
            return Ok(());
        }
        self.start_on_live(cx, exchange);
        Ok(())
    }

    /// Whether this idle connection is still open for `exchange`: the
    /// server may have closed it since it went idle.
    fn still_reusable(&mut self, cx: &mut LoopContext<'_>, exchange: &Exchange) -> bool {
        // A plain socket whose last read took all it had (`drained` is never
        // true over TLS), with no readable event since and the loop's last
        // complete poll recent (`FRESH_POLL`), is known open without a
        // system call; otherwise a peek tells.
        // No event of that poll is still to come here: an idle connection
        // is reused by a loop task, which runs before the next poll and
        // after every event of the last one, or by itself in its own
        // event. Either way can miss a close still in flight (a peek, one
        // sent in the last half round trip; this, also one that arrived
        // since that poll) — the retry on a fresh connection is for that.
        // A request that may not go twice (a POST) has no such retry: it
        // is always peeked for (and the poll's age, a clock read, not
        // asked). A server that closes right after its answer, without
        // `Connection: close`, has its close arrive after that poll often
        // enough that the next request, sent at once, would meet it.
        let quiet = self.buf.drained() && exchange.may_retry() && cx.polled_recently();
        matches!(self.state, State::Idle)
            && self
                .transport
                .as_mut()
                .is_some_and(|transport| quiet || transport.still_open())
    }

    /// Runs `exchange` on this idle connection, known open.
    fn start_on_live(&mut self, cx: &mut LoopContext<'_>, exchange: Arc<Exchange>) {
        // Attached and started in one step, on this loop: an arm here wakes
        // nothing. An exchange that has ended (a cancel, a timeout), or
        // whose request deadline on this loop has passed, is not attached,
        // and its request not sent: the connection goes back, idle since
        // it last was.
        self.make_standing_for(&exchange, cx.event_loop());
        if !exchange.start_on(self.conn_ref(cx)) {
            let now = self.now();
            return self.offer_idle_or_close(cx, &exchange, now);
        }
        let info = self.info.clone().expect("an idle connection has connected");
        exchange.set_remote(info.remote);
        exchange.listener.on_connection_pooled(&info);
        self.begin_exchange(cx, exchange, true);
    }

    pub(super) fn begin_exchange(
        &mut self,
        cx: &mut LoopContext<'_>,
        exchange: Arc<Exchange>,
        reused: bool,
    ) {
        let limits = self.env().config.limits;
        let is_head = exchange.request.method == http::Method::HEAD;
        let keep_alive = exchange.request.keep_alive;
        // The caller's own `Upgrade` (the client asks for none): a 101 is
        // then the switch it asked for, and its error says upgrades are
        // not supported rather than that none was asked.
        let upgrade = exchange.request.headers.contains_key(http::header::UPGRADE);
        self.state = State::Active(Box::new(Active {
            exchange,
            decoder: ResponseDecoder::new(limits, is_head, keep_alive).upgrade_requested(upgrade),
            reused,
            sending: Sending::Head { written: 0 },
            gathered: BytesMut::new(),
            deferred: false,
            trailers: None,
            paused: false,
            draining: None,
            collected: None,
            lowat: 1,
            write_stall: WriteStall::default(),
            answered_whole: None,
            socket_full: false,
        }));
        // A fresh connection may already hold an answer (a server that
        // speaks as soon as it accepts, or the end of a TLS handshake's
        // records), and the readiness that said so may have come with the
        // connect's: the socket will not signal it again, so look now —
        // before the request goes, to tell such an answer from one to it.
        if !reused {
            self.read_response(cx);
            self.skip_request_if_answered(cx);
        }
        self.write_request(cx);
    }

    /// Bytes came on a fresh connection before any of the request went: the
    /// server spoke first, to a request it had not seen. Its answer is the
    /// exchange's (a refusal as it accepts, say), but the request is not
    /// sent — nothing would read its own answer, the server's second — and
    /// the connection, whose answers would each be one request off, is not
    /// reused (its request is not `Sending::Done`). An answer already whole
    /// waited for the request to go ([`Active::answered_whole`]): it ends
    /// the exchange now.
    fn skip_request_if_answered(&mut self, cx: &mut LoopContext<'_>) {
        let State::Active(active) = &mut self.state else {
            return;
        };
        if !active.decoder.bytes_seen() {
            return;
        }
        active.sending = Sending::Skipped;
        if !self.stop_upload(cx) {
            // The rest of the answer bounds the server's silence from now.
            if let State::Active(active) = &self.state {
                let exchange = active.exchange.clone();
                if !active.paused {
                    exchange.start_read(|| self.now());
                }
            }
        }
    }

    /// Sends what it can of the request: the head, then the body.
    pub(super) fn write_request(&mut self, cx: &mut LoopContext<'_>) {
        // Whether the socket took any of it: the server's progress, for the
        // write timeout.
        let mut took = false;
        loop {
            let (State::Active(active), Some(transport)) =
                (&mut self.state, self.transport.as_mut())
            else {
                return;
            };
            let records_before = transport.records_sent();
            let sent = match &mut active.sending {
                Sending::Head { written } => {
                    let payload = active.exchange.request.payload();
                    // Ended meanwhile (a timeout, a cancel): its abort
                    // resets the connection; nothing more of it goes.
                    if payload.released {
                        return;
                    }
                    let before = *written;
                    let sent = write_all(transport, &payload.head, written);
                    took |= *written > before;
                    sent
                }
                Sending::Body(out) => {
                    let before = out.sent();
                    let sent = out.send(transport, cx, WRITE_BUDGET);
                    took |= out.sent() > before;
                    sent
                }
                Sending::Continue | Sending::Skipped | Sending::Failed => return,
                Sending::Done => {
                    // TLS may still hold records back (an answer to a key
                    // update).
                    if transport.wants_write() {
                        if let Err(e) = transport.flush() {
                            self.write_failure(cx, e);
                        }
                    }
                    return;
                }
            };
            // The request counts as sent once TLS has sent its last record too.
            let sent = match sent {
                Sent::Done => match transport.flush() {
                    Ok(true) => Sent::Done,
                    Ok(false) => Sent::SocketFull,
                    Err(e) => Sent::Socket(e),
                },
                other => other,
            };
            took |= transport.records_sent() > records_before;
            match sent {
                Sent::SocketFull | Sent::Waiting | Sent::Spent => {
                    let waits = matches!(sent, Sent::SocketFull);
                    self.track_write_stall(waits, took);
                    self.stop_upload_if_unread(cx);
                    if matches!(sent, Sent::Spent) {
                        cx.ready_again();
                    }
                    return;
                }
                Sent::Socket(error) => return self.write_failure(cx, error),
                Sent::Body(error) => return self.close_failing(cx, |_| error),
                Sent::Done => {
                    self.track_write_stall(false, took);
                    if self.sent_part(cx) {
                        // Nothing more of it: the connection may carry
                        // another exchange already.
                        return;
                    }
                }
            }
        }
    }

    /// Tells the write stall what a step of sending came to (see
    /// [`WriteStall`]): `waits`, the socket took all it could. Once the
    /// answer's head has come the read timeout bounds the server instead —
    /// unless the answer is whole and its end waits for the upload's
    /// ([`Active::answered_whole`]): then nothing is left to read, and the
    /// write timeout bounds the upload (its expiry lets the answer stand:
    /// `Exchange::hold_answer`).
    fn track_write_stall(&mut self, waits: bool, took: bool) {
        let State::Active(active) = &mut self.state else {
            return;
        };
        active.socket_full = waits;
        let clock = &self.owner.env().clock;
        let waits = waits && (!active.decoder.head_received() || active.answered_whole.is_some());
        active
            .write_stall
            .step(&active.exchange, waits, took, || clock.now());
    }

    /// The head (with a small body in memory), or the body, is out: what
    /// next. Returns true if that ended the exchange (its answer had come
    /// whole).
    fn sent_part(&mut self, cx: &mut LoopContext<'_>) -> bool {
        let expect_delay = self.env().config.expect_continue_timeout;
        let owner = &self.owner;
        let State::Active(active) = &mut self.state else {
            return true;
        };
        let request = &active.exchange.request;
        let head_sent = matches!(active.sending, Sending::Head { .. });
        let waits_for_continue = head_sent && send::waits_for_continue(request);
        let body_follows = head_sent && send::body_follows(request);
        // When the part went, for the timeouts that count from it: read
        // before the listener is told of the head, and only where one
        // does — the wait for `100 Continue` with a delay, or the answer's
        // read timeout once all is sent and no answer has come whole (a
        // client without read timeouts reads no clock here).
        let timed = if waits_for_continue {
            expect_delay.is_some()
        } else {
            // Not while the body's pipe is full (see below).
            !body_follows
                && !active.paused
                && active.exchange.read_timeout().is_some()
                && active.answered_whole.is_none()
        };
        let sent_at = timed.then(|| owner.env().clock.now());
        if let (true, Some(info)) = (head_sent, &self.info) {
            tell_request_head(&active.exchange, info);
        }
        match &active.sending {
            Sending::Head { .. } if waits_for_continue => {
                active.sending = Sending::Continue;
                // No delay: the body goes at once. A delay past the end of
                // time (`Duration::MAX`) is none: the body waits for `100
                // Continue`, or is never sent if a final answer comes first.
                let Some(delay) = expect_delay else {
                    self.continue_body(cx);
                    return false;
                };
                // The client waits on the server from now: its silence is
                // a read timeout, however long the delay (`Duration::MAX`:
                // as long as it takes).
                let now = sent_at.expect("the clock is read for a delay");
                active.exchange.start_read(|| now);
                if let Some(deadline) = deadline_after(now, delay) {
                    self.arm_timer(cx, EXPECT_TIMER, Some(deadline));
                }
            }
            Sending::Head { .. } if body_follows => {
                active.sending = Sending::Body(Box::new(BodyOut::of(&active.exchange)));
            }
            _ => {
                active.sending = Sending::Done;
                let exchange = active.exchange.clone();
                if let Some(info) = &self.info {
                    exchange.listener.on_request_sent(info);
                }
                // The answer came whole while the upload went on: both
                // are done now.
                if let Some(keep_alive) = active.answered_whole {
                    self.response_done(cx, keep_alive);
                    return true;
                }
                // Not while the body's pipe is full: the reader's wait, not
                // the server's silence (taking from it starts the timeout).
                if let (false, Some(at)) = (active.paused, sent_at) {
                    exchange.start_read(|| at);
                }
            }
        }
        false
    }

    /// `100 Continue` came, or the delay passed: the body goes.
    pub(super) fn continue_body(&mut self, cx: &mut LoopContext<'_>) {
        let State::Active(active) = &mut self.state else {
            return;
        };
        if matches!(active.sending, Sending::Continue) {
            self.disarm_timer(cx);
            let State::Active(active) = &mut self.state else {
                return;
            };
            // The client no longer waits on the server but on its own
            // body: the read timeout starts again once the body is out (or
            // at an early answer), not while it goes.
            active.exchange.stop_read();
            active.sending = Sending::Body(Box::new(BodyOut::of(&active.exchange)));
            self.write_request(cx);
        }
    }

    /// Reads and decodes until the socket would block, the exchange ends,
    /// the body's pipe is full, or the read budget is spent (then the loop
    /// hands readiness back after its other work).
    pub(super) fn read_response(&mut self, cx: &mut LoopContext<'_>) {
        if let State::Active(active) = &self.state {
            if active.answered_whole.is_some() {
                return self.read_past_whole_answer(cx);
            }
        }
        self.drain_if_dropped();
        if !self.resume_if_room(cx) {
            return;
        }
        // What a previous read left undecoded (reading paused) goes first.
        if !self.buf.is_empty() && matches!(self.decode(cx), Decodes::Stop) {
            return;
        }
        let mut budget = READ_BUDGET;
        loop {
            let mut in_place = false;
            let filled = match (&mut self.state, self.transport.as_mut()) {
                (_, None) => return,
                (State::Active(active), Some(transport)) if self.buf.is_empty() => {
                    match active.in_place() {
                        Some((buf, max)) => {
                            in_place = true;
                            let filled = read_spare_once(transport, buf, max);
                            self.buf.note(&filled, max, transport.is_plain());
                            filled
                        }
                        None => self.buf.fill(transport),
                    }
                }
                (_, Some(transport)) => self.buf.fill(transport),
            };
            match filled {
                Filled::Data(n) => {
                    if let State::Active(active) = &self.state {
                        active.exchange.mark_read(|| self.now());
                    }
                    let decodes = if in_place {
                        self.decode_in_place(cx, n)
                    } else {
                        self.decode(cx)
                    };
                    if matches!(decodes, Decodes::Stop) {
                        return;
                    }
                    budget = budget.saturating_sub(n);
                    if budget == 0 {
                        self.flush_body();
                        return cx.ready_again();
                    }
                    // A short read of plain TCP took all the socket had (see
                    // `ReadBuf::drained`, never true over TLS): its next
                    // read would say `WouldBlock`, and the socket's next
                    // event says when more has come.
                    if self.buf.drained() {
                        return self.socket_emptied(cx);
                    }
                }
                Filled::Eof => return self.on_eof(cx),
                Filled::WouldBlock => return self.socket_emptied(cx),
                Filled::Failed(e) => return self.io_failure(cx, e),
            }
        }
    }

    /// The socket has nothing more for now: the reader is told what there
    /// is, the socket's low-water mark set, and a body whose reader has
    /// gone drained no further.
    fn socket_emptied(&mut self, cx: &mut LoopContext<'_>) {
        self.flush_body();
        self.await_body(cx);
        self.give_up_draining(cx)
    }

    /// A body of known length with no
    /// read timeout, collected whole or not yet touched by its reader (see
    /// `Pipe::untouched`: nobody waits on it yet): the socket is asked to
    /// report itself readable only once the rest of the body is there (up
    /// to [`LOWAT_COLLECTED`], and for an untouched body to its window; the end
    /// of the stream or an error still report at once), so the loop wakes
    /// once per large piece rather than once per segment — and the server's
    /// sends do not each have to wake it. Plain
    /// TCP only (over TLS the bytes on the socket are not the body's). Not
    /// with a read timeout: bytes held back below the mark would not count
    /// as the server's activity, and the timeout could fire while the
    /// server is sending. Not for a body its reader reads as a stream: it
    /// gets what has arrived as it arrives — its first take wakes the
    /// connection, which then lowers the mark.
    fn await_body(&mut self, cx: &mut LoopContext<'_>) {
        let window = self.env().config.body_window;
        let (State::Active(active), Some(transport)) = (&mut self.state, self.transport.as_ref())
        else {
            return;
        };
        let remaining = active.decoder.body_remaining().unwrap_or(0);
        let collected = active.collected.is_some();
        let untouched = || {
            let waiter = || Waiter::Source(cx.event_loop().clone(), cx.me());
            active.exchange.body().untouched(waiter)
        };
        // A body not yet read: a mark no higher than its window, so that
        // its mark lets the kernel hold no more of a body nobody reads than
        // the pipe would (a mark raises the socket's receive buffer and
        // window to fit it) — but a window a collected body raised before
        // on this connection stays (Linux never lowers it), up to
        // LOWAT_MAX.
        let most = if collected {
            LOWAT_COLLECTED
        } else {
            LOWAT_MAX.min(window)
        };
        // Small rests are not worth a system call.
        let want = if remaining >= LOWAT_MIN as u64
            && transport.is_plain()
            && active.draining.is_none()
            && self.buf.is_empty()
            && active.exchange.read_timeout().is_none()
            && (collected || untouched())
        {
            usize::try_from(remaining.min(most as u64)).unwrap_or(1)
        } else {
            1
        };
        // A collected body raises the window once, so that the server
        // may send past the marks (the mark set next replaces this one).
        if collected && want > 1 && !self.recv_window_raised {
            self.recv_window_raised = true;
            if transport.set_recv_lowat(LOWAT_MAX) {
                active.lowat = LOWAT_MAX;
            }
        }
        if want != active.lowat && transport.set_recv_lowat(want) {
            active.lowat = want;
        }
    }

    /// Reading stops for now: the body's reader is woken for what it has
    /// (the pipe wakes it by itself only at its low-water mark).
    fn flush_body(&self) {
        if let State::Active(active) = &self.state {
            active.exchange.body().flush();
        }
    }

    /// The body's reader has gone: from now on the rest is discarded.
    fn drain_if_dropped(&mut self) {
        let State::Active(active) = &mut self.state else {
            return;
        };
        if active.draining.is_none() && active.exchange.body().reader_gone() {
            active.draining = Some(DRAIN);
            active.paused = false;
            active.gathered.clear();
            active.deferred = false;
            active.collected = None;
        }
    }

    /// Draining, and the rest has not come yet: not worth waiting for.
    fn give_up_draining(&mut self, cx: &mut LoopContext<'_>) {
        let State::Active(active) = &self.state else {
            return;
        };
        if active.draining.is_some() {
            let exchange = active.exchange.clone();
            self.reset(cx);
            exchange.finish_err(exchange.reader_gone_error());
        }
    }

    /// The connection closes mid-body — a failure it met, or an exchange
    /// that ended elsewhere (a timeout, a cancel, the client's close): the
    /// gathered bytes go into the pipe, before the error, for a reader that
    /// takes what came before it
    /// ([`Pipe::hold_last`](crate::exchange::Pipe::hold_last)) — held
    /// bytes it had taken back to gather on (see [`Active::deferred`]),
    /// and those gathered since the last push, which the read that met
    /// the failure may have brought with it (a close-delimited body's
    /// bytes up to `max_body_bytes`, the chunks before the one past it).
    /// Held bytes still in the pipe are there already.
    pub(super) fn hold_last_gathered(&mut self) {
        if let State::Active(active) = &mut self.state {
            active.deferred = false;
            let gathered = std::mem::take(&mut active.gathered);
            active.exchange.body().hold_last(gathered);
        }
    }

    /// Whether reading may go on: not paused, or paused and woken by a
    /// pipe with room again (the read timeout then starts afresh).
    fn resume_if_room(&mut self, cx: &mut LoopContext<'_>) -> bool {
        let State::Active(active) = &mut self.state else {
            return false;
        };
        if !active.paused {
            return true;
        }
        // Woken by the socket, not by the pipe: the window still holds.
        if !active.exchange.body().has_room() {
            return false;
        }
        active.paused = false;
        let exchange = active.exchange.clone();
        exchange.start_read(|| self.now());
        // Still full (a spurious wake): pause again.
        !self.push_gathered(cx)
    }

    /// Feeds the decoder `n` body bytes read straight into the collected
    /// body or the gathered bytes (no more than the body's remaining
    /// length), then goes on as [`decode`](Self::decode) does.
    fn decode_in_place(&mut self, cx: &mut LoopContext<'_>, n: usize) -> Decodes {
        let State::Active(active) = &mut self.state else {
            return Decodes::Stop;
        };
        let just_read = match &active.collected {
            Some(collected) => collected.tail(n),
            None => &active.gathered[active.gathered.len() - n..],
        };
        match active.decoder.decode(just_read) {
            Ok((consumed, Decoded::Body(_))) if consumed == n => {
                active.exchange.listener.on_body_part(n);
            }
            Ok(_) => unreachable!("bytes within a body's length are body"),
            Err(error) => {
                self.protocol_failure(cx, error);
                return Decodes::Stop;
            }
        }
        self.decode(cx)
    }

    /// Feeds what was read to the decoder.
    fn decode(&mut self, cx: &mut LoopContext<'_>) -> Decodes {
        let window = self.env().config.body_window;
        loop {
            let State::Active(active) = &mut self.state else {
                return Decodes::Stop;
            };
            // The caller's code just called (a listener) may have ended the
            // exchange: a cancel, a dropped body, or a timeout meanwhile.
            // Nothing more of this response is delivered.
            if active.exchange.is_done() {
                self.reset(cx);
                return Decodes::Stop;
            }
            let (consumed, decoded) = match active.decoder.decode(self.buf.unread()) {
                Ok(decoded) => decoded,
                Err(error) => {
                    self.protocol_failure(cx, error);
                    return Decodes::Stop;
                }
            };
            match decoded {
                Decoded::NeedMore => {
                    self.buf.consume(consumed);
                    return if self.push_gathered(cx) {
                        Decodes::Stop
                    } else {
                        Decodes::More
                    };
                }
                Decoded::Interim(head) => {
                    self.buf.consume(consumed);
                    // Told as it came, before a body waiting for it goes.
                    // The decoder parsed it whole anyway: to nobody, telling
                    // it costs the call and no more.
                    let goes_on = active.exchange.tell_interim(
                        head.version,
                        head.status,
                        head.reason.as_deref(),
                        &head.headers,
                    );
                    // A `100 Continue` sends the body if it waits for one
                    // (`continue_body` does nothing otherwise); any other
                    // interim head is only told. Not for an exchange the
                    // listener just ended (a cancel, a panic): the loop's
                    // top resets the connection instead.
                    if head.status == http::StatusCode::CONTINUE && goes_on {
                        self.continue_body(cx);
                    }
                }
                Decoded::Head(head) => {
                    // A 408 on a pooled connection is the server giving up
                    // on the connection, not on this request: it timed out
                    // waiting while the connection sat idle, and closes it
                    // (RFC 9110 §15.5.9: the client MAY repeat a request in
                    // transit). Taken as the close before an answer that
                    // usually follows it, as Chromium and Firefox do: told
                    // to nobody, and the request goes again by the same
                    // rule, once, on a new connection — this one is closed
                    // now, whatever the server does with it.
                    if head.status == http::StatusCode::REQUEST_TIMEOUT
                        && self.retry_on_fresh_connection(cx)
                    {
                        return Decodes::Stop;
                    }
                    let State::Active(active) = &mut self.state else {
                        return Decodes::Stop;
                    };
                    let exchange = active.exchange.clone();
                    let waits = send::waits_for_continue(&exchange.request);
                    active.sending.answered(head.status, waits);
                    // An answer before the request is all sent (the body
                    // skipped, or an upload the server may have stopped
                    // reading): from now on the read timeout bounds the
                    // server's silence, as it does once the request is out.
                    if !matches!(active.sending, Sending::Done) {
                        exchange.start_read(|| self.owner.env().clock.now());
                        active.write_stall.end(&exchange);
                    }
                    self.buf.consume(consumed);
                    self.server_keep_alive.heed(&head.headers);
                    let head = Head {
                        status: head.status,
                        version: head.version,
                        headers: head.headers,
                        reason: head.reason,
                        remote: self.remote.expect("an active connection has a remote"),
                        // Just after the head, what remains of a body framed by
                        // length is all of it: the declared length (0 for a
                        // response with no body, which the decoder frames as
                        // such); a body framed otherwise has none.
                        declared_length: active.decoder.body_remaining(),
                        // A body framed by a length of 0 has no trailers;
                        // but while the request goes on, the answer's end
                        // may be held for the upload's (`response_done`),
                        // whose failure would fail it.
                        body_ended: active.decoder.body_remaining() == Some(0)
                            && !active.sending.goes_on(),
                    };
                    if !exchange.deliver_head(head) {
                        self.reset(cx);
                        return Decodes::Stop;
                    }
                }
                Decoded::Body(data) => {
                    active.exchange.listener.on_body_part(data.len());
                    if let Some(left) = &mut active.draining {
                        // Nobody reads it any more: discarded, within bounds.
                        match left.checked_sub(data.len()) {
                            Some(rest) => *left = rest,
                            None => {
                                let exchange = active.exchange.clone();
                                self.reset(cx);
                                exchange.finish_err(exchange.reader_gone_error());
                                return Decodes::Stop;
                            }
                        }
                        self.buf.consume(consumed);
                        continue;
                    }
                    if let Some(collected) = &mut active.collected {
                        collected.extend(data);
                        self.buf.consume(consumed);
                        continue;
                    }
                    // Onto the held bytes, taken back from the pipe.
                    active.take_back_held();
                    if active.gathered.capacity() == 0 {
                        // Allocated at once, without `Vec`'s growth path
                        // (about a hundred instructions a response).
                        let capacity = active.first_gather(data.len(), window);
                        active.gathered = BytesMut::with_capacity(capacity);
                    }
                    active.gathered.extend_from_slice(data);
                    // Held bytes go at the window (see `push_gathered`).
                    let limit = if active.deferred { window } else { GATHER };
                    let full = active.gathered.len() >= limit;
                    self.buf.consume(consumed);
                    if full && self.push_gathered(cx) {
                        return Decodes::Stop;
                    }
                }
                Decoded::Trailers(map) => {
                    active.trailers = Some(map);
                    self.buf.consume(consumed);
                }
                Decoded::Done { keep_alive } => {
                    self.buf.consume(consumed);
                    self.response_done(cx, keep_alive);
                    return Decodes::Stop;
                }
            }
        }
    }

    /// Puts the gathered body bytes into the pipe. Returns true if reading
    /// must stop: the pipe is full (reading pauses, and with it the read
    /// timeout, until the reader makes room). A reader that has gone makes
    /// the connection drain instead (see [`DRAIN`]); one that collects the
    /// body whole makes it gather the rest here, pushed at the end.
    ///
    /// Bytes of a body of unknown length that nobody has touched yet are
    /// held back (*deferred*) in the pipe, up to the window, in the buffer
    /// they were gathered in ([`Pipe::reader`](crate::exchange::Pipe::reader)):
    /// a reader that then collects the body — most do, having just been
    /// given its head, and the head's read brings much of the body with
    /// it — finds them in one buffer with the rest, where pushed they
    /// would be taken back and copied (or joined by the reader). A reader
    /// that takes takes them from the pipe as any chunk, at once, on
    /// whatever thread: nothing waits on the connection for them. Taken
    /// back as more come ([`Active::take_back_held`]), they go on with
    /// them; a failure leaves them in the pipe, before its error. A body
    /// of known length has its own paths (reads in place, a receive mark)
    /// and is pushed as it comes.
    fn push_gathered(&mut self, cx: &mut LoopContext<'_>) -> bool {
        let window = self.env().config.body_window;
        let State::Active(active) = &mut self.state else {
            return true;
        };
        if active.draining.is_some() {
            active.gathered.clear();
            return false;
        }
        if active.collected.is_some() {
            return false;
        }
        let may_hold = !active.gathered.is_empty()
            && active.gathered.len() < window
            && active.decoder.body_remaining().is_none();
        let hold = may_hold.then_some(&mut active.gathered);
        match active.exchange.body().reader(hold) {
            Reader::Collects => {
                active.start_collecting();
                return false;
            }
            Reader::Untouched if may_hold => {
                active.deferred = true;
                return false;
            }
            Reader::Untouched | Reader::Takes => {}
        }
        // Held bytes, if any, stay in the pipe, the reader's: `deferred`
        // stands, for them to be taken back before anything is pushed.
        if active.gathered.is_empty() {
            return active.paused;
        }
        // Gathered bytes include what was held (taken back first).
        active.deferred = false;
        let waiter = || Waiter::Source(cx.event_loop().clone(), cx.me());
        // A body of unknown length may have been gathered into a
        // reservation for a whole body before its reader took (see
        // `Active::first_gather`): the chunk goes at its own size, and the
        // reservation is let go, not cut into more chunks for the reader
        // to keep. (Sized by what came, its allocation goes whole with it.)
        let chunk = if active.decoder.body_remaining().is_none() {
            own_size(std::mem::take(&mut active.gathered))
        } else {
            active.gathered.split().freeze()
        };
        match active.exchange.body().push(chunk, waiter) {
            Pushed::Room => false,
            Pushed::Full => {
                active.paused = true;
                let exchange = active.exchange.clone();
                exchange.pause_read();
                true
            }
            // The body was dropped: what is left is drained.
            Pushed::Refused => {
                active.draining = Some(DRAIN);
                active.paused = false;
                false
            }
        }
    }

    /// The decoder says the response is complete — or, the response
    /// whole before the request ([`Active::answered_whole`]), the request
    /// is out now too. Bytes past it (a body longer than declared, an
    /// answer nobody asked for) do not void the response, which is whole:
    /// it is delivered, and the connection, whose stream cannot be trusted
    /// any more, is closed, never reused.
    ///
    /// A 2xx whole while the upload still goes (its head or body, as
    /// [`Sending::answered`] leaves it) does not stop the upload: the
    /// server may read on (RFC 9112 §9.5 lets only a refusal stop it), and
    /// closing now would cut it short under a server that does. The
    /// answer's bytes are the reader's at once, and nothing is left to
    /// read — the read timeout stops — but its end waits for the
    /// request's, as over HTTP/2: then the exchange completes and the
    /// connection is offered back, its stream clean. A write that fails,
    /// the server's end of the stream (or anything it sends), a server
    /// that takes no more for the write timeout, or a reader that drops the
    /// body stop the upload there, and the answer stands
    /// ([`Conn::stop_upload`]); the upload's own failure fails the
    /// exchange, as before the answer's end.
    fn response_done(&mut self, cx: &mut LoopContext<'_>, keep_alive: bool) {
        let State::Active(active) = &mut self.state else {
            return;
        };
        // The pipe takes the rest even when full: the body has ended. The
        // gathered bytes are taken whole, not split off (a split shares
        // their allocation through a new one).
        // The gathered bytes may be a reservation for the client's typical
        // body (`Active::first_gather`): handed over at their own size.
        active.take_back_held();
        active.deferred = false;
        let rest = match active.collected.take() {
            Some(collected) => collected.finish(),
            None => own_size(std::mem::take(&mut active.gathered)),
        };
        if !rest.is_empty() && active.draining.is_none() {
            active.exchange.body().push_last(rest);
        }
        // Held only while the request goes out, on a clean stream the
        // server has not ended (its end, already read or told, would wake
        // nothing to stop the upload: the answer's end would wait for the
        // write timeout), and for a reader: else nothing waits for the
        // upload, and it stops here. The request's state first: the rest
        // costs a lock (and over TLS a look at rustls) a response.
        // Last, the socket's receive mark back at 1 (if `await_body` raised
        // it): whatever the server sends past the answer must wake the
        // connection to stop the upload. Under a raised mark bytes fewer
        // than it wake nothing, and the last read's word that the socket
        // drained would still stand when the upload's end pools the
        // connection: its next request, taking it without a peek
        // (`still_reusable`), would read them as its answer.
        let held = active.sending.goes_on()
            && self.buf.is_empty()
            && !self.buf.peer_closed()
            && !self
                .transport
                .as_mut()
                .is_some_and(Transport::has_buffered_input)
            && active.draining.is_none()
            && !active.exchange.body().reader_gone()
            && (active.lowat == 1
                || self
                    .transport
                    .as_ref()
                    .is_some_and(|transport| transport.set_recv_lowat(1)));
        if held {
            active.lowat = 1;
            active.answered_whole = Some(keep_alive);
            // The answer is the server's, whole: a timeout now stops the
            // upload and completes the exchange with it rather than failing
            // it (`Exchange::hold_answer`, as over HTTP/2).
            active.exchange.hold_answer(active.trailers.take());
            // A socket full already is a wait on the server from now (no
            // step of sending may come to say so).
            let waits = active.socket_full;
            self.track_write_stall(waits, false);
            // Bytes past the answer that came in the readable event that
            // brought its end, the read that ended it (exactly, in place,
            // or filling the read buffer) leaving them in the socket, wake
            // nothing more: unless that read said the socket drained, it
            // is looked at once now, as at the next event.
            if !self.buf.drained() {
                self.read_past_whole_answer(cx);
            }
            return;
        }
        // A request the server answered before it was fully written leaves
        // the stream mid-request. Over TLS, bytes past the response may
        // still sit in the TLS layer. A server that closed as it answered
        // (its close came with the answer's end, in the same event) takes
        // no more: pooled, the connection would never hear of it again —
        // that event is spent — and sit there half-closed until taken or
        // evicted.
        let reusable = keep_alive
            && self.buf.is_empty()
            && !self.buf.peer_closed()
            && matches!(active.sending, Sending::Done)
            && !self
                .transport
                .as_mut()
                .is_some_and(Transport::has_buffered_input);
        self.complete(cx, reusable);
    }

    /// The socket is readable (or, as the answer's end is held, may hold
    /// more) while the answer, whole, waits for the upload's end: if the
    /// server has closed, failed, or sent what nobody asked for — either
    /// way it takes no more of the request, and the stream cannot be
    /// trusted — the upload stops, the answer standing.
    fn read_past_whole_answer(&mut self, cx: &mut LoopContext<'_>) {
        let Some(transport) = self.transport.as_mut() else {
            return;
        };
        if !matches!(self.buf.fill(transport), Filled::WouldBlock) {
            self.stop_upload(cx);
        }
    }

    /// Stops the upload of an answer that came whole before it
    /// ([`Active::answered_whole`]): the exchange completes with the
    /// answer, and the connection, its request cut short, closes. Returns
    /// whether there was one.
    pub(super) fn stop_upload(&mut self, cx: &mut LoopContext<'_>) -> bool {
        match &self.state {
            State::Active(active) if active.answered_whole.is_some() => {
                self.complete(cx, false);
                true
            }
            _ => false,
        }
    }

    /// After a step of sending: an answer that came whole before the
    /// upload's end ([`Active::answered_whole`]) whose reader has dropped
    /// the body waits for none of the upload: it stops at once.
    fn stop_upload_if_unread(&mut self, cx: &mut LoopContext<'_>) {
        if let State::Active(active) = &self.state {
            if active.answered_whole.is_some() && active.exchange.body().reader_gone() {
                self.stop_upload(cx);
            }
        }
    }

    fn on_eof(&mut self, cx: &mut LoopContext<'_>) {
        let State::Active(active) = &mut self.state else {
            return;
        };
        if !active.decoder.bytes_seen() && self.retry_on_fresh_connection(cx) {
            return;
        }
        let State::Active(active) = &mut self.state else {
            return;
        };
        match active.decoder.eof() {
            // The end of the stream ends a response framed by it.
            Ok(_) => self.response_done(cx, false),
            Err(error) => self.protocol_failure(cx, error),
        }
    }

    /// A reused connection failed before any response byte (or answered
    /// `408 Request Timeout`, its only byte): the server closed it while
    /// idle. A request that may go twice goes again once, on a new
    /// connection — one whose streamed body waited for `100 Continue` too,
    /// none of it gone. Returns whether it did.
    fn retry_on_fresh_connection(&mut self, cx: &mut LoopContext<'_>) -> bool {
        let State::Active(active) = &self.state else {
            return false;
        };
        let exchange = active.exchange.clone();
        if !active.reused
            || !exchange.may_go_again_now()
            || exchange.retried.swap(true, Ordering::AcqRel)
        {
            return false;
        }
        // The server may have processed it before it closed (RFC 9110
        // §9.2.2): nothing can say otherwise later.
        exchange.maybe_processed.store(true, Ordering::Release);
        // Before this connection closes (see `send_to_another`); its read
        // timeout stays with the connection it leaves.
        self.send_to_another(exchange, false);
        self.close(cx);
        true
    }

    /// Writing failed. A server that refuses a request early (a 413 to a
    /// large upload) answers and closes without reading the rest, and its
    /// answer is in the socket when the write fails: RFC 9112 §9.5 asks a
    /// client to watch for it. So nothing more is written, what the socket
    /// holds is read at once (a reset discards it), and unless nothing of
    /// an answer has come the answer goes on as any other — as far as its
    /// body's window lets, the rest as the reader makes room — and its end,
    /// or a read's error, ends the exchange; the connection, its request
    /// cut short, is never reused (`Sending::Failed` is not `Done`). When
    /// nothing arrived, it is the write error at once (and a pooled
    /// connection the server had dropped is retried as for any I/O error).
    fn write_failure(&mut self, cx: &mut LoopContext<'_>, error: io::Error) {
        if self.stop_upload(cx) {
            return;
        }
        let (seen, was_sent) = match &mut self.state {
            State::Active(active) => {
                let was_sent = matches!(active.sending, Sending::Done);
                active.sending = Sending::Failed;
                active.write_stall.end(&active.exchange);
                (active.decoder.bytes_seen(), was_sent)
            }
            _ => return self.close(cx),
        };
        // What the socket holds is taken now, whatever the body's window:
        // the reset that made the write fail may discard it at any moment
        // (or has, past what was read). At most what the kernel held, and
        // never more than `EARLY_ANSWER_MAX` from a server still sending.
        let mut arrived = seen || !self.buf.is_empty();
        let mut taken = 0;
        let mut read_error = None;
        while let Some(transport) = self.transport.as_mut() {
            match self.buf.fill(transport) {
                Filled::Data(n) => {
                    arrived = true;
                    taken += n;
                    if taken >= EARLY_ANSWER_MAX {
                        break;
                    }
                }
                Filled::Failed(e) => {
                    read_error = Some(e);
                    break;
                }
                Filled::Eof | Filled::WouldBlock => break,
            }
        }
        if !arrived {
            // The server's TLS alert says why it closed (a TLS 1.3
            // refusal of the client's certificate) better than the broken
            // pipe the write met.
            let error = read_error.filter(super::ends_handshake).unwrap_or(error);
            return self.io_failure(cx, error);
        }
        // Waiting for the rest of the answer from now, as after a request
        // sent whole: the read timeout starts if it had not (the request
        // was cut short), or afresh if bytes came — unless the body's pipe
        // is full: then the wait is the reader's.
        if let State::Active(active) = &self.state {
            if !active.paused && (taken > 0 || !was_sent) {
                active.exchange.start_read(|| self.now());
            }
        }
        // Read on the loop's next pass, not from within this call: a write
        // may fail inside a read (a `100 Continue` sends the body).
        cx.ready_again();
    }

    fn io_failure(&mut self, cx: &mut LoopContext<'_>, error: io::Error) {
        let State::Active(active) = &self.state else {
            return self.close(cx);
        };
        if !active.decoder.bytes_seen() && self.retry_on_fresh_connection(cx) {
            return;
        }
        self.close_failing(cx, |exchange| {
            super::stream_failure(exchange.remote_name(), error)
        });
    }

    fn protocol_failure(&mut self, cx: &mut LoopContext<'_>, error: DecodeError) {
        self.close_failing(cx, |exchange| {
            let remote = exchange.remote_name();
            match error {
                DecodeError::BodyTooLarge { limit } => Error::BodyTooLarge { remote, limit },
                source => Error::Protocol { remote, source },
            }
        });
    }

    /// The response is read off the connection: hand the connection back
    /// to the pool *before* ending the exchange, so a caller that sends its
    /// next request at once reuses it.
    fn complete(&mut self, cx: &mut LoopContext<'_>, reusable: bool) {
        let State::Active(active) = std::mem::replace(&mut self.state, State::Idle) else {
            return;
        };
        let Active {
            exchange,
            trailers,
            lowat,
            ..
        } = *active;
        self.buf.clear();
        let reusable = reusable
            // Spent by its server (`Keep-Alive` with no requests or idle
            // time left), it closes here: offered, the pool would refuse
            // it — after a `SO_RCVLOWAT` call, an `IdleConn` and its lock.
            && !self.server_keep_alive.spent()
            // The next response's head must wake the loop at its first byte.
            && (lowat == 1
                || self
                    .transport
                    .as_ref()
                    .is_some_and(|transport| transport.set_recv_lowat(1)));
        if reusable {
            self.offer_or_close(cx, &exchange);
        } else {
            self.close(cx);
        }
        exchange.complete(trailers);
    }

    /// Offers the connection, idle from now, to the pool, or closes it if
    /// the pool will not have it; runs a waiter the pool hands back on it.
    pub(super) fn offer_or_close(&mut self, cx: &mut LoopContext<'_>, finished: &Arc<Exchange>) {
        let now = self.now();
        self.idle_since = now;
        self.offer_idle_or_close(cx, finished, now);
    }

    /// [`offer_or_close`](Self::offer_or_close) at `now`, for a
    /// connection idle since [`Conn::idle_since`].
    fn offer_idle_or_close(
        &mut self,
        cx: &mut LoopContext<'_>,
        finished: &Arc<Exchange>,
        now: Instant,
    ) {
        let Some(info) = self.info.clone() else {
            return self.close(cx);
        };
        let idle = IdleConn {
            conn: self.conn_ref(cx),
            info: info.clone(),
            route: self.route.clone(),
            idle_since: self.idle_since,
            created: self.created,
            server_idle_limit: self.server_keep_alive.idle_limit(),
        };
        match self.owner.offer(idle, now) {
            Offered::Kept => finished.listener.on_connection_offered(&info),
            Offered::Serve(waiter) => {
                finished.listener.on_connection_offered(&info);
                if !self.still_reusable(cx, &waiter) {
                    // Closed under it: it goes back where it waited, not
                    // behind younger waiters, and the permit this
                    // connection gives back as it closes serves it.
                    self.owner.requeue(waiter);
                    return self.close(cx);
                }
                // The pooled path for the waiter, on this very loop.
                self.start_on_live(cx, waiter);
            }
            Offered::Refused => self.close(cx),
        }
    }

    pub(super) fn on_idle_readable(&mut self, cx: &mut LoopContext<'_>) {
        let Some(transport) = self.transport.as_mut() else {
            return;
        };
        if transport.still_open() {
            return;
        }
        // Closed by the server (or it sent bytes nobody asked for).
        if let Some(info) = &self.info {
            if !self.owner.remove_idle(&self.route, info.id) {
                // Taken out of the pool meanwhile: by a request whose task
                // is on its way here — it finds the connection closed,
                // asks again, and only then closes it (`start_on_idle`), so
                // that the permit the close gives back serves it ahead of
                // the younger waiters — or by the pool's cleaner or close,
                // whose task closes it.
                return;
            }
        }
        self.close(cx);
    }
}

/// Writes `bytes[*written..]` as far as the socket takes it, at most
/// [`WRITE_BUDGET`] bytes in this call (a small body in memory goes after the
/// head in the same bytes); [`Sent::Spent`] if more is left then.
fn write_all(transport: &mut Transport, bytes: &[u8], written: &mut usize) -> Sent {
    let budget_end = written.saturating_add(WRITE_BUDGET);
    while *written < bytes.len() {
        if *written >= budget_end {
            return Sent::Spent;
        }
        // No more than the budget offered to one write either: on loopback
        // a reader as fast as the writer lets a single write take it all.
        match send::write_some(transport, &bytes[*written..bytes.len().min(budget_end)]) {
            Ok(n) => *written += n,
            Err(stopped) => return stopped,
        }
    }
    Sent::Done
}
