//! [`Pipe`]: a bounded queue of body bytes between the event loop that owns
//! a connection and the other end of a body — the caller reading a
//! response, or a thread reading an upload from a `Read`.
//!
//! # Ground rules
//!
//! * **Bounded.** The writer may go past the window by one chunk, and then
//!   is told the pipe is full: it stops (a loop stops reading the socket;
//!   a pumping thread blocks) until the reader has taken the pipe down to
//!   the low-water mark (half the window). Memory per body is the window
//!   plus a chunk, whatever the body's size.
//! * **Coalesced wake-ups.** A reader waiting on an empty pipe is woken when
//!   the pipe reaches the low-water mark, when the writer [flushes](Pipe::flush)
//!   (a loop does once it has read all the socket had for now), or at the
//!   end; the writer only when the pipe falls to the low-water mark while it
//!   waits on a full one — a cross-thread wake-up per burst of reading or
//!   half a window, not one per chunk.
//! * **Who waits** is a [`Waiter`]: a blocked thread (a condition variable),
//!   a polled task (its `Waker`), or a connection on its loop (woken with
//!   `EventLoop::wake_source`, so no loop thread ever blocks here or runs
//!   the other end's code). Wake-ups happen after the pipe's lock is
//!   released, and so does the drop of a waiter replaced or withdrawn: a
//!   task's waker may hold the last reference to what ends this very pipe
//!   (a task owning the last `Client`, whose close fails the body).
//! * **Collecting.** A reader that wants the body whole (`bytes()`,
//!   `text()`) says so with [`collect`](Pipe::collect): the window no
//!   longer holds, the writer takes back what is buffered and gathers the
//!   rest into one buffer with it, and the reader is woken once, at the end,
//!   for a body in one piece (no copy to join chunks, no wake-up per burst).
//! * **Untouched.** Until the reader first takes, collects or goes, nobody
//!   waits on the bytes: a writer may ask to be woken at that first touch
//!   ([`untouched`](Pipe::untouched)) and meanwhile let bytes wait where
//!   they are cheapest (a loop: in the socket, behind a low-water mark), or
//!   *hold* them here ([`reader`](Pipe::reader)) in the one buffer it
//!   gathers them in, for a reader who will likely collect them: the
//!   writer takes them back ([`unhold`](Pipe::unhold)) to add more to them
//!   in place, or to collect them with the rest without a copy. Held bytes
//!   are the newest, counted as buffered, and the reader's as any chunk
//!   is: a take that finds no chunk takes them — without waiting on the
//!   writer, wherever it runs — and a body that fails keeps them before
//!   its error.
//! * **Gathered.** An upload's pump copies its reads in
//!   ([`push_blocking`](Pipe::push_blocking)): small ones are gathered into
//!   one chunk, held after the others as a connection's held bytes are, so
//!   that the window's bytes cost about themselves whatever the size of
//!   the reads.
//! * **Ending.** The writer ends the pipe with trailers or an error, once;
//!   the reader takes the chunks left, then the end. A reader that goes
//!   away drops what is buffered and tells the writer, whose next push is
//!   refused.

use super::pacing::Spin;
use crate::error::Error;
use crate::event_loop::{Asleep, EventLoop, SourceRef};
use crate::sync::lock;
use bytes::{Bytes, BytesMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};

mod chunks;
pub(crate) use chunks::Chunks;

/// The default window of a body: what the loop reads ahead of its reader.
pub(crate) const DEFAULT_WINDOW: usize = 256 * 1024;

/// The size up to which an upload's small pieces are gathered into one:
/// HTTP/2's default largest frame. A pump's reads, in the pipe
/// ([`Pipe::push_blocking`]); what a connection takes of a source at once
/// (`conn::upload::Declared::next`). A piece that size or larger goes as
/// it is.
pub(crate) const GATHER: usize = 16 * 1024;

/// Unused capacity a body's bytes may keep beyond their own length when
/// handed over (see [`own_size`]).
const SHRINK_SLACK: usize = 4096;

/// Body bytes, `buf`, handed over to the reader: if much shorter than the
/// buffer they were gathered in — a reservation for the whole of a body
/// of unknown length, from the client's typical bodies — copied into a
/// buffer of their own size: the reader may keep them for long, and
/// should not keep the reservation with them.
pub(crate) fn own_size(buf: BytesMut) -> Bytes {
    if buf.capacity() > 2 * buf.len() + SHRINK_SLACK {
        return Bytes::copy_from_slice(&buf);
    }
    buf.freeze()
}

/// Who waits on one end of a pipe.
pub(crate) enum Waiter {
    /// A thread blocked on the pipe's condition variable: registered under
    /// the pipe's lock just before it waits, so one is notified only when
    /// it is really there (a notify is a syscall even with nobody waiting).
    /// A reader that could not drive the loop of its body's connection is
    /// counted asleep on it (see `EventLoop::sleep_on`) until woken.
    Blocked(Option<Asleep>),
    /// A thread driving this loop while it waits (see
    /// `EventLoop::drive_until`), whose poll a wake-up from elsewhere
    /// interrupts. Before it blocks on the condition variable instead, it
    /// registers again as [`Blocked`](Waiter::Blocked), under the lock.
    Driving(Arc<EventLoop>),
    /// A task polling the pipe.
    Task(Waker),
    /// A connection on its loop.
    Source(Arc<EventLoop>, SourceRef),
}

impl Waiter {
    /// A thread's waiter: driving `home` if it may, else blocked.
    fn thread(home: Option<&Arc<EventLoop>>) -> Waiter {
        home.map_or(Waiter::Blocked(None), |home| Waiter::Driving(home.clone()))
    }

    fn wake(self, cv: &Condvar) {
        match self {
            Waiter::Blocked(asleep) => {
                drop(asleep);
                cv.notify_all();
            }
            Waiter::Driving(event_loop) => event_loop.wake_driver(),
            Waiter::Task(waker) => crate::event_loop::wake_task(waker),
            Waiter::Source(event_loop, source) => event_loop.wake_source(source),
        }
    }

    /// [`wake`](Self::wake), by a reader that blocks on the pipe next and
    /// drives the writer's loop itself if that loop is idle
    /// (`reader_drives`): a connection is then woken for that driver
    /// ([`EventLoop::wake_source_for_driver`]), not the loop's thread —
    /// woken, the thread would take the loop and read the body while the
    /// reader slept on it, a hand-over each way.
    fn wake_by_reader(self, cv: &Condvar, reader_drives: bool) {
        match self {
            Waiter::Source(event_loop, source) if reader_drives => {
                event_loop.wake_source_for_driver(source)
            }
            waiter => waiter.wake(cv),
        }
    }
}

/// How a pipe ends.
enum End {
    Open,
    /// The body is complete, with its trailers (taken by the reader).
    Done(Option<http::HeaderMap>),
    /// The body failed (the error is taken by the reader once).
    Failed(Option<Error>),
}

struct State {
    chunks: Chunks,
    /// The writer's held bytes (see [`Pipe::reader`]), or a pump's small
    /// reads gathered (see [`Pipe::push_blocking`]): newer than every
    /// chunk; empty when there are none.
    held: BytesMut,
    /// The bytes of the chunks and the held bytes.
    buffered: usize,
    end: End,
    reader: Option<Waiter>,
    writer: Option<Waiter>,
    reader_gone: bool,
    /// The reader wants the body whole (see [`Pipe::collect`]).
    collecting: bool,
    /// The reader has taken, collected or gone: until then nobody is
    /// waiting on what the writer holds (see [`Pipe::untouched`]).
    touched: bool,
    /// Woken when the reader first takes or goes.
    on_touch: Option<Waiter>,
    /// Bytes pushed since the pipe was made.
    pushed: u64,
}

impl State {
    /// The reader acts: the first time, what waits for that, to be woken
    /// (or dropped) after the unlock.
    fn first_touch(&mut self) -> Option<Waiter> {
        self.touched = true;
        self.on_touch.take()
    }

    /// Counts `len` more bytes buffered (queued or held), in `meter` too.
    fn add(&mut self, len: usize, meter: &AtomicUsize) {
        self.buffered += len;
        self.pushed += len as u64;
        meter.fetch_add(len, Ordering::Relaxed);
    }

    /// Holds `bytes` (see [`Pipe::reader`]), counted as buffered, after
    /// any held still — never in their place.
    fn hold(&mut self, bytes: BytesMut, meter: &AtomicUsize) {
        self.add(bytes.len(), meter);
        self.held.unsplit(bytes);
    }

    /// `len` bytes buffered go back to the writer ([`Pipe::reclaim`],
    /// [`Pipe::unhold`]): no longer counted as buffered, nor as pushed —
    /// they will be again, with more.
    fn give_back(&mut self, len: usize, meter: &AtomicUsize) {
        self.buffered -= len;
        self.pushed -= len as u64;
        meter.fetch_sub(len, Ordering::Relaxed);
    }

    /// Copies `bytes`, fewer than [`GATHER`], in after the held bytes,
    /// gathered into one chunk with them up to [`GATHER`] bytes (see
    /// [`Pipe::push_blocking`]): held bytes that `bytes` would take past it
    /// are queued first.
    fn gather(&mut self, bytes: &[u8], meter: &AtomicUsize) {
        if self.held.len() + bytes.len() > GATHER {
            if let Some(held) = self.held_chunk() {
                self.chunks.push_back(held);
            }
        }
        self.add(bytes.len(), meter);
        self.held.extend_from_slice(bytes);
    }

    /// The oldest bytes for the reader: the first chunk, else the held
    /// bytes (at their own size, see [`held_chunk`](Self::held_chunk)).
    /// Still counted as buffered.
    fn next_chunk(&mut self) -> Option<Bytes> {
        self.chunks.pop_front().or_else(|| self.held_chunk())
    }

    /// The held bytes as a chunk for the reader, if any: at their own size
    /// ([`own_size`]) — they are held in a reservation for a whole body.
    fn held_chunk(&mut self) -> Option<Bytes> {
        (!self.held.is_empty()).then(|| own_size(std::mem::take(&mut self.held)))
    }
}

/// What a push found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Taken; there is room for more.
    Room,
    /// Taken, and the pipe is full: stop until the writer's waiter is woken.
    Full,
    /// The reader has gone: nothing more is wanted.
    Refused,
}

/// What a take found.
pub(crate) enum Taken {
    Chunk(Bytes),
    /// The end of the body, with its trailers.
    End(Option<http::HeaderMap>),
    Failed(Error),
    /// Nothing yet: the reader's waiter was registered.
    Pending,
}

/// What a reader collecting the whole body found.
pub(crate) enum Whole {
    /// The body, in the chunks it came in (one, when the writer collected
    /// it), and its trailers.
    Done(Chunks, Option<http::HeaderMap>),
    Failed(Error),
    /// Not ended yet: the reader's waiter was registered.
    Pending,
}

/// A bounded queue of body bytes. See the [module documentation](self).
pub(crate) struct Pipe {
    state: Mutex<State>,
    reader_ready: Condvar,
    writer_ready: Condvar,
    window: usize,
    /// Bytes buffered in every pipe of the client, for its statistics.
    meter: Arc<AtomicUsize>,
}

impl Pipe {
    pub(crate) fn new(window: usize, meter: Arc<AtomicUsize>) -> Pipe {
        Pipe {
            state: Mutex::new(State {
                chunks: Chunks::default(),
                held: BytesMut::new(),
                buffered: 0,
                end: End::Open,
                reader: None,
                writer: None,
                reader_gone: false,
                collecting: false,
                touched: false,
                on_touch: None,
                pushed: 0,
            }),
            reader_ready: Condvar::new(),
            writer_ready: Condvar::new(),
            window: window.max(1),
            meter,
        }
    }

    fn low_water(&self) -> usize {
        self.window / 2
    }

    /// The writer adds `bytes`. When the pipe is then full, `waiter` is
    /// what gets woken once it has room again. A waiting reader is woken
    /// only once the pipe holds the low-water mark: a writer that stops
    /// below it must [`flush`](Self::flush).
    pub(crate) fn push(&self, bytes: Bytes, waiter: impl FnOnce() -> Waiter) -> Pushed {
        self.push_waiting(bytes, Some(waiter))
    }

    /// The writer's last bytes, just before it ends the body: taken even
    /// past the window, with nobody to wake when there is room again.
    pub(crate) fn push_last(&self, bytes: Bytes) {
        self.push_waiting(bytes, None::<fn() -> Waiter>);
    }

    fn push_waiting(&self, bytes: Bytes, waiter: Option<impl FnOnce() -> Waiter>) -> Pushed {
        if bytes.is_empty() {
            return Pushed::Room;
        }
        let queue = |state: &mut State, meter: &AtomicUsize| {
            // Held bytes are older than these: queued first (a writer
            // takes them back before it pushes, to push them in one
            // buffer with these, and there are none).
            if let Some(held) = state.held_chunk() {
                state.chunks.push_back(held);
            }
            state.add(bytes.len(), meter);
            state.chunks.push_back(bytes);
        };
        self.add_waiting(queue, waiter)
    }

    /// A push: `add` adds the bytes to the open pipe's state (and its
    /// meter); then the writer is told whether there is room, and a waiting
    /// reader woken at the low-water mark.
    fn add_waiting(
        &self,
        add: impl FnOnce(&mut State, &AtomicUsize),
        waiter: Option<impl FnOnce() -> Waiter>,
    ) -> Pushed {
        // The writer's waiter replaced, dropped after the unlock.
        let mut replaced = None;
        let (pushed, wake) = {
            let mut state = lock(&self.state);
            if state.reader_gone || !matches!(state.end, End::Open) {
                return Pushed::Refused;
            }
            add(&mut state, &self.meter);
            let pushed = if state.buffered >= self.window && !state.collecting {
                replaced = std::mem::replace(&mut state.writer, waiter.map(|waiter| waiter()));
                Pushed::Full
            } else {
                Pushed::Room
            };
            let wake = if state.buffered >= self.low_water() && !state.collecting {
                state.reader.take()
            } else {
                None
            };
            (pushed, wake)
        };
        drop(replaced);
        if let Some(reader) = wake {
            reader.wake(&self.reader_ready);
        }
        pushed
    }

    /// The writer stops writing for now: a reader waiting on the pipe is
    /// woken for what it holds.
    pub(crate) fn flush(&self) {
        let wake = {
            let mut state = lock(&self.state);
            if state.buffered == 0 || state.collecting {
                return;
            }
            state.reader.take()
        };
        if let Some(reader) = wake {
            reader.wake(&self.reader_ready);
        }
    }

    /// [`push`](Self::push) of a copy of `bytes` from a thread that may
    /// block (an upload's pump): waits while the pipe is full. `Err` once
    /// the reader has gone.
    ///
    /// Small pieces are gathered: copied in after the last ones, into one
    /// chunk of up to [`GATHER`] bytes, which a take takes as it stands
    /// (a reader waiting is not kept waiting for more). The window counts
    /// bytes, so a chunk each would cost their bookkeeping too — an
    /// allocation and a queue slot, some 30 times the bytes for a reader
    /// that gives one byte a read — for every byte the window holds. A
    /// piece of [`GATHER`] bytes or more is a chunk of its own, copied
    /// before the pipe is locked.
    pub(crate) fn push_blocking(&self, bytes: &[u8]) -> Result<(), ()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let waiter = || Waiter::Blocked(None);
        let pushed = if bytes.len() >= GATHER {
            self.push(Bytes::copy_from_slice(bytes), waiter)
        } else {
            let gather = |state: &mut State, meter: &AtomicUsize| state.gather(bytes, meter);
            self.add_waiting(gather, Some(waiter))
        };
        if pushed == Pushed::Refused {
            return Err(());
        }
        // Its next read may block for long.
        self.flush();
        let mut state = lock(&self.state);
        while state.buffered >= self.window && !state.reader_gone {
            state.writer = Some(Waiter::Blocked(None));
            state = self
                .writer_ready
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        if state.reader_gone {
            Err(())
        } else {
            Ok(())
        }
    }

    /// The writer ends the body, whole (with its trailers, if any).
    pub(crate) fn finish(&self, trailers: Option<http::HeaderMap>) {
        self.end(End::Done(trailers));
    }

    /// The writer ends the body with `error`.
    pub(crate) fn fail(&self, error: Error) {
        self.end(End::Failed(Some(error)));
    }

    fn end(&self, end: End) {
        // Nothing the writer holds is waited on any more: its first-touch
        // waiter goes (dropped after the unlock), or the reader's first take
        // would wake a connection that has moved on.
        let (wake, _withdrawn) = {
            let mut state = lock(&self.state);
            if !matches!(state.end, End::Open) {
                return;
            }
            state.end = end;
            (state.reader.take(), state.on_touch.take())
        };
        if let Some(reader) = wake {
            // A thread blocked for the end of its body: a sequential caller,
            // whose next request is likely to come at once.
            if matches!(reader, Waiter::Blocked(_) | Waiter::Driving(_)) {
                crate::event_loop::answered_a_waiting_caller();
            }
            reader.wake(&self.reader_ready);
        }
    }

    /// The reader takes the next chunk, or the end; registers `waiter`
    /// when there is nothing yet.
    pub(crate) fn take(&self, waiter: impl FnOnce() -> Waiter) -> Taken {
        self.take_by(waiter, false)
    }

    /// [`take`](Self::take), by a reader that drives the writer's loop if
    /// it finds nothing and waits (`reader_drives`: see
    /// [`Waiter::wake_by_reader`]).
    fn take_by(&self, waiter: impl FnOnce() -> Waiter, reader_drives: bool) -> Taken {
        // The reader's waiter replaced (another task's waker, say), dropped
        // after the unlock.
        let mut replaced = None;
        let (taken, wake, touch) = {
            let mut state = lock(&self.state);
            let touch = state.first_touch();
            if let Some(chunk) = state.next_chunk() {
                state.buffered -= chunk.len();
                self.meter.fetch_sub(chunk.len(), Ordering::Relaxed);
                let room = state.buffered <= self.low_water();
                let wake = if room { state.writer.take() } else { None };
                (Taken::Chunk(chunk), wake, touch)
            } else {
                let taken = match &mut state.end {
                    End::Open => {
                        replaced = state.reader.replace(waiter());
                        Taken::Pending
                    }
                    End::Done(trailers) => Taken::End(trailers.take()),
                    End::Failed(error) => match error.take() {
                        Some(error) => Taken::Failed(error),
                        None => Taken::End(None),
                    },
                };
                (taken, None, touch)
            }
        };
        drop(replaced);
        // Both wake the writer: once is enough. A reader that found nothing
        // waits next, driving the loop if it may; one that took a chunk
        // goes back to its own work, while the writer should read on.
        if let Some(writer) = wake.or(touch) {
            let drives = reader_drives && matches!(taken, Taken::Pending);
            writer.wake_by_reader(&self.writer_ready, drives);
        }
        taken
    }

    /// [`take`](Self::take) for a polled task.
    pub(crate) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Taken> {
        match self.take(|| Waiter::Task(cx.waker().clone())) {
            Taken::Pending => Poll::Pending,
            taken => Poll::Ready(taken),
        }
    }

    /// [`take`](Self::take) for a thread that may block: waits for a chunk
    /// or the end — driving `home`, the loop of the writer, while that loop
    /// is idle, else asleep on it (see [`sleep_until`](Self::sleep_until)).
    /// Its polls yield for the spin `spin` gives, asked with the bytes
    /// pushed so far once a wait is needed (see `Pacing`: a spin spares a
    /// sleep for each piece a faster reader would otherwise wait for, and
    /// costs CPU where the server's writes share the reader's cores).
    ///
    /// `None`, with nothing taken and no waiter left, if there is nothing
    /// yet and `stalls` says the wait would never end (the thread runs the
    /// writer's loop): asked only then, so a chunk there costs nothing more.
    pub(crate) fn take_blocking<'a>(
        &self,
        home: Option<&Arc<EventLoop>>,
        spin: &dyn Fn(u64) -> Spin<'a>,
        stalls: impl Fn() -> bool,
    ) -> Option<Taken> {
        loop {
            match self.take_by(|| Waiter::thread(home), home.is_some()) {
                Taken::Pending => {}
                taken => return Some(taken),
            }
            if stalls() {
                self.withdraw_reader();
                return None;
            }
            self.wait_for(home, spin, |state| {
                state.buffered > 0 || !matches!(state.end, End::Open)
            });
        }
    }

    /// The blocking reader will not wait after all (see
    /// [`take_blocking`](Self::take_blocking)): the waiter it registered
    /// goes (dropped after the unlock), so nothing wakes a thread that is
    /// not there.
    fn withdraw_reader(&self) {
        let withdrawn = lock(&self.state).reader.take();
        drop(withdrawn);
    }

    /// A blocking reader waits until `news`: driving `home` while that loop
    /// is idle, yielding for the spin `spin` gives (asked with the bytes
    /// pushed so far, once the loop is the reader's to drive) before its
    /// polls block, else asleep on it (see
    /// [`sleep_until`](Self::sleep_until)).
    fn wait_for<'a>(
        &self,
        home: Option<&Arc<EventLoop>>,
        spin: &dyn Fn(u64) -> Spin<'a>,
        news: fn(&State) -> bool,
    ) {
        let drove = home.and_then(|home| {
            let mut ready = || news(&lock(&self.state));
            // The spin asked, and when it started: only for a drive.
            let mut asked = None;
            let drove = home.drive_until(&mut ready, || {
                let spin = spin(lock(&self.state).pushed);
                asked = Some((spin, spin.start()));
                spin.time()
            });
            if let Some((spin, started)) = asked {
                spin.record(started, drove);
            }
            drove
        });
        if drove.is_none() {
            self.sleep_until(home, news);
        }
    }

    /// The blocking reader sleeps until `news`, counted asleep on `home`
    /// (see `EventLoop::sleep_on`) — or not at all, if `home` is idle now:
    /// it drives it instead.
    fn sleep_until(&self, home: Option<&Arc<EventLoop>>, news: fn(&State) -> bool) {
        let mut state = lock(&self.state);
        while !news(&state) {
            // Counted once per sleep (a spurious wake-up keeps its count).
            if !matches!(state.reader, Some(Waiter::Blocked(_))) {
                let asleep = match home.map(|home| home.sleep_on()) {
                    Some(None) => break,
                    Some(asleep) => asleep,
                    None => None,
                };
                // Dropped under the lock, what this replaces is this
                // thread's own waiter (`take` or `take_whole` registered it
                // before the wait, dropping a task's waker it replaced
                // after the unlock), or nothing (the writer took it): never
                // a task's waker, whose drop may come back for this lock.
                debug_assert!(!matches!(
                    state.reader,
                    Some(Waiter::Task(_) | Waiter::Source(..))
                ));
                state.reader = Some(Waiter::Blocked(asleep));
            }
            // Without `home` the exchange has ended (its pipe with it: no
            // wait) or this thread fires a wheel's entry (no loop waited
            // for): none of the client's loops to name.
            state = super::timers::wait_for_news(
                &self.state,
                &self.reader_ready,
                state,
                home.map(|home| &**home),
                &[],
            );
        }
        // Its count, if it was not woken by the writer (who takes it).
        if matches!(state.reader, Some(Waiter::Blocked(_))) {
            state.reader = None;
        }
    }

    /// Whether the reader has gone (its body was dropped).
    pub(crate) fn reader_gone(&self) -> bool {
        lock(&self.state).reader_gone
    }

    /// Whether a writer that stopped on a full pipe may go on: the pipe is
    /// below its window (or its reader has gone, and pushes are refused).
    pub(crate) fn has_room(&self) -> bool {
        let state = lock(&self.state);
        state.buffered < self.window || state.reader_gone || state.collecting
    }

    /// The reader wants the body whole: from now on it waits for the end
    /// ([`take_whole`](Self::take_whole)), and the window no longer holds —
    /// a writer waiting for room is woken.
    ///
    /// A writer waiting for the first touch is not woken: a collected body
    /// is read as an untouched one is (see [`untouched`](Self::untouched)).
    ///
    /// `blocking`: the reader blocks on the pipe next, and drives the
    /// writer's loop itself if that loop is idle — an idle loop is not
    /// woken for the writer then ([`EventLoop::execute_for_driver`]):
    /// woken, its thread would take the loop and read the body while the
    /// reader slept on it, a hand-over each way.
    pub(crate) fn collect(&self, blocking: bool) {
        let (wake, _withdrawn) = {
            let mut state = lock(&self.state);
            state.collecting = true;
            (state.writer.take(), state.first_touch())
        };
        if let Some(writer) = wake {
            writer.wake_by_reader(&self.writer_ready, blocking);
        }
    }

    /// Bytes pushed so far: the whole body's length once it has ended.
    pub(crate) fn pushed(&self) -> u64 {
        lock(&self.state).pushed
    }

    /// Whether the reader [collects](Self::collect) the body.
    #[cfg(test)]
    pub(crate) fn is_collecting(&self) -> bool {
        lock(&self.state).collecting
    }

    /// The writer takes back what is buffered, to put it in front of the
    /// rest of a body being collected: the chunks, oldest first, and the
    /// bytes it held (newer), as they were. They are no longer counted as
    /// pushed: they will be again, with the rest.
    pub(crate) fn reclaim(&self) -> (Chunks, BytesMut) {
        let mut state = lock(&self.state);
        let buffered = state.buffered;
        state.give_back(buffered, &self.meter);
        (
            std::mem::take(&mut state.chunks),
            std::mem::take(&mut state.held),
        )
    }

    /// The writer takes back the bytes it held (see [`reader`](Self::reader))
    /// and the reader has not taken, to add more to them where they are:
    /// no longer counted as pushed, as [`reclaim`](Self::reclaim)'s.
    /// Empty if it holds none.
    pub(crate) fn unhold(&self) -> BytesMut {
        let mut state = lock(&self.state);
        let held = std::mem::take(&mut state.held);
        state.give_back(held.len(), &self.meter);
        held
    }

    /// The collecting reader takes the body once it has ended; registers
    /// `waiter` until then.
    pub(crate) fn take_whole(&self, waiter: impl FnOnce() -> Waiter) -> Whole {
        let mut state = lock(&self.state);
        let end = match &mut state.end {
            End::Open => {
                // The waiter replaced goes after the unlock.
                let replaced = state.reader.replace(waiter());
                drop(state);
                drop(replaced);
                return Whole::Pending;
            }
            End::Done(trailers) => Ok(trailers.take()),
            End::Failed(error) => error.take().map_or(Ok(None), Err),
        };
        // The pipe's own queue, moved out (no allocation): it is over.
        // Held bytes, which a writer takes back before it ends the body,
        // would come last.
        let mut chunks = std::mem::take(&mut state.chunks);
        if let Some(held) = state.held_chunk() {
            chunks.push_back(held);
        }
        self.meter.fetch_sub(state.buffered, Ordering::Relaxed);
        state.buffered = 0;
        drop(state);
        match end {
            Ok(trailers) => Whole::Done(chunks, trailers),
            Err(error) => Whole::Failed(error),
        }
    }

    /// [`take_whole`](Self::take_whole) for a polled task.
    pub(crate) fn poll_take_whole(&self, cx: &mut Context<'_>) -> Poll<Whole> {
        match self.take_whole(|| Waiter::Task(cx.waker().clone())) {
            Whole::Pending => Poll::Pending,
            whole => Poll::Ready(whole),
        }
    }

    /// [`take_whole`](Self::take_whole) for a thread that may block,
    /// driving `home` as [`take_blocking`](Self::take_blocking) does, and
    /// `None` as it is when the body has not ended and `stalls`.
    pub(crate) fn take_whole_blocking<'a>(
        &self,
        home: Option<&Arc<EventLoop>>,
        spin: &dyn Fn(u64) -> Spin<'a>,
        stalls: impl Fn() -> bool,
    ) -> Option<Whole> {
        loop {
            match self.take_whole(|| Waiter::thread(home)) {
                Whole::Pending => {}
                whole => return Some(whole),
            }
            if stalls() {
                self.withdraw_reader();
                return None;
            }
            self.wait_for(home, spin, |state| !matches!(state.end, End::Open));
        }
    }

    /// The reader has gone: what is buffered is dropped (after the unlock),
    /// and the writer is told.
    pub(crate) fn close_reader(&self) {
        let (dropped, wake, touch, reader) = {
            let mut state = lock(&self.state);
            state.reader_gone = true;
            let reader = state.reader.take();
            self.meter.fetch_sub(state.buffered, Ordering::Relaxed);
            state.buffered = 0;
            let touch = state.first_touch();
            (
                (
                    std::mem::take(&mut state.chunks),
                    std::mem::take(&mut state.held),
                ),
                state.writer.take(),
                touch,
                reader,
            )
        };
        drop((dropped, reader));
        // Both wake the writer: once is enough.
        if let Some(writer) = wake.or(touch) {
            writer.wake(&self.writer_ready);
        }
    }

    /// The writer's last bytes, taken back from those it held
    /// ([`unhold`](Self::unhold)) to gather more on, as its body ends
    /// elsewhere — its connection closes on a failure, or after a
    /// timeout, a cancel or the client's close ended the body first: held
    /// again, whatever the reader's stand and the window, and even once
    /// the body has failed, as long as the reader has not taken the error
    /// yet — they came before it, and the reader gets them first.
    pub(crate) fn hold_last(&self, bytes: BytesMut) {
        let wake = {
            let mut state = lock(&self.state);
            let before_end = matches!(state.end, End::Open | End::Failed(Some(_)));
            if bytes.is_empty() || state.reader_gone || !before_end {
                return;
            }
            // None still held: the writer took them back to gather these on.
            state.hold(bytes, &self.meter);
            state.reader.take()
        };
        if let Some(reader) = wake {
            reader.wake(&self.reader_ready);
        }
    }

    /// Whether the reader has not yet taken, collected or gone — so nobody
    /// waits on the bytes the writer holds, and a loop may let them pile
    /// up in the socket (a receive low-water mark) rather than wake for
    /// each segment. If so, `waiter` is woken at the reader's first take
    /// or its going (not at a collect, which reads the same way) — made
    /// once: the pipe's writer is one connection, which asks again at each
    /// pause of its reading.
    pub(crate) fn untouched(&self, waiter: impl FnOnce() -> Waiter) -> bool {
        let mut state = lock(&self.state);
        if state.collecting || state.touched {
            return false;
        }
        if state.on_touch.is_none() {
            state.on_touch = Some(waiter());
        }
        true
    }

    /// How the reader stands, under one lock: it collects the body, has
    /// not touched it yet, or takes it chunk by chunk (or has gone).
    ///
    /// Untouched, the bytes the writer would push now, `hold`, if given,
    /// are held here instead (moved, leaving `hold` empty; counted as
    /// buffered and pushed): the reader's first take takes them, unless
    /// the writer takes them back first ([`unhold`](Self::unhold),
    /// [`reclaim`](Self::reclaim)) — as it does before it pushes anything,
    /// to push them in one buffer with what follows (a push would queue
    /// them first, at their own size), or holds more.
    pub(crate) fn reader(&self, hold: Option<&mut BytesMut>) -> Reader {
        let mut state = lock(&self.state);
        // A collect touches the pipe too: asked first.
        if state.collecting {
            return Reader::Collects;
        }
        if state.touched {
            return Reader::Takes;
        }
        if let Some(hold) = hold {
            // None still held: the writer takes them back before it
            // gathers more.
            state.hold(std::mem::take(hold), &self.meter);
        }
        Reader::Untouched
    }
}

/// How a pipe's reader stands (see [`Pipe::reader`]).
pub(crate) enum Reader {
    /// It wants the body whole ([`Pipe::collect`]).
    Collects,
    /// It has not taken, collected or gone yet.
    Untouched,
    /// It has taken from the pipe, or gone.
    Takes,
}

impl Drop for Pipe {
    fn drop(&mut self) {
        let state = self
            .state
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.meter.fetch_sub(state.buffered, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
