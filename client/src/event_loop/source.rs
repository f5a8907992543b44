//! What a loop hosts: [`Source`]s (connections), each in a slot of the
//! loop's slab, and the [`LoopContext`] that tasks, expiries and sources
//! run with.
//!
//! # Ground rules
//!
//! * A source lives in exactly one slot of one loop for its whole life, and
//!   only that loop's thread touches it. Other threads reach it by posting
//!   a task that names it by [`SourceRef`]: the slot key and an id unique
//!   in the process, so a task for a source that has gone never reaches the
//!   source that took its slot — whichever client it belongs to.
//! * While a source runs, it is taken out of its slot (the slot stays
//!   reserved), so it gets `&mut self` and the whole context at once. It
//!   asks to be dropped with [`LoopContext::remove_me`]; the loop drops it
//!   when the call returns.
//! * A source never calls another source directly: it posts a task, or
//!   queues an abort ([`LoopContext::abort_later`]), both run later on the
//!   same thread.

use super::{EventLoop, LoopTimerKey, Rejected};
use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Ids of sources, unique in the process.
static NEXT_SOURCE_ID: AtomicU64 = AtomicU64::new(1);

/// Names one source on its loop: its slot and its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SourceRef {
    pub(crate) key: usize,
    pub(crate) id: u64,
}

/// What the loop reports to a source.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Readiness {
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    pub(crate) read_closed: bool,
    pub(crate) write_closed: bool,
    pub(crate) error: bool,
    /// TCP urgent data came (Linux's `EPOLLPRI`).
    pub(crate) urgent: bool,
    /// Not an event of the OS: the source asked to run again
    /// ([`LoopContext::ready_again`]) after spending its budget, or it was
    /// woken from elsewhere ([`EventLoop::wake_source`]: room in a body's
    /// pipe, data for an upload). It may read and write.
    pub(crate) again: bool,
}

impl Readiness {
    pub(crate) fn of(event: &mio::event::Event) -> Readiness {
        Readiness {
            readable: event.is_readable(),
            writable: event.is_writable(),
            read_closed: event.is_read_closed(),
            write_closed: event.is_write_closed(),
            error: event.is_error(),
            urgent: event.is_priority(),
            again: false,
        }
    }

    /// Whether reading may make progress.
    pub(crate) fn can_read(&self) -> bool {
        self.readable || self.read_closed || self.error || self.urgent || self.again
    }

    /// Whether writing may make progress.
    pub(crate) fn can_write(&self) -> bool {
        self.writable || self.write_closed || self.error || self.again
    }
}

/// Something registered on a loop: a connection. Every method runs on the
/// loop's thread with the source taken out of its slot (see the module
/// documentation).
pub(crate) trait Source: Send + 'static {
    /// Readiness for one of its registrations.
    fn ready(&mut self, cx: &mut LoopContext<'_>, readiness: Readiness);
    /// A timer it armed with [`LoopContext::schedule_timer`] is due.
    fn timer(&mut self, cx: &mut LoopContext<'_>, tag: u64);
    /// The exchange `exchange_id` ended from outside (a timeout, a cancel,
    /// the client closing): abandon it, if it still runs here.
    fn abort(&mut self, cx: &mut LoopContext<'_>, exchange_id: u64);
    /// The loop is shutting down: fail what it carries and close. The loop
    /// drops it afterwards.
    fn shut_down(&mut self, cx: &mut LoopContext<'_>);
    /// Code run for it panicked (a listener, a callback): its state cannot
    /// be trusted, so it fails what it carries and closes. The loop drops
    /// it afterwards.
    fn panicked(&mut self, cx: &mut LoopContext<'_>);
    /// For tasks that reach a source of a known type ([`LoopContext::with_source`]).
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

struct Slot {
    id: u64,
    /// `None` while it runs.
    source: Option<Box<dyn Source>>,
}

/// How recent the loop's last poll must be for a socket's silence since to
/// be taken as the kernel's word (see [`LoopContext::polled_recently`]): an
/// idle connection reused after a longer wait (a loop held up by a slow
/// listener, a burst) peeks first, and an executor's turn polls before it
/// runs posted tasks. Half a millisecond adds little to the time a close is
/// in flight on a network, against a server's idle timeout of seconds; a
/// busy loop's turns fit in it (at 100 µs, 64 requests in flight still
/// peeked for six in ten).
pub(super) const FRESH_POLL: Duration = Duration::from_micros(500);

/// A loop's sources and the work queued for them.
#[derive(Default)]
pub(crate) struct Sources {
    slots: slab::Slab<Slot>,
    /// The source running now, and whether it asked to be removed.
    current: Option<(SourceRef, bool)>,
    /// Exchanges to abort, oldest first, with when each was queued (see
    /// [`LoopContext::abort_later`]).
    pub(super) aborts: VecDeque<(SourceRef, u64, Instant)>,
    /// Sources to run again after the loop's other work.
    pub(super) again: Vec<SourceRef>,
    /// When the last poll returned, if it returned every event the kernel
    /// had (a full batch may have left some behind).
    pub(super) polled_at: Option<Instant>,
}

impl Sources {
    pub(super) fn refs(&self) -> Vec<SourceRef> {
        self.slots
            .iter()
            .map(|(key, slot)| SourceRef { key, id: slot.id })
            .collect()
    }

    /// The source a token names, if it is there.
    pub(super) fn by_token(&self, token: usize) -> Option<SourceRef> {
        let key = token;
        self.slots
            .get(key)
            .map(|slot| SourceRef { key, id: slot.id })
    }
}

/// What a task, an expiry or a source gets on the loop's thread.
pub struct LoopContext<'a> {
    pub(crate) event_loop: &'a Arc<EventLoop>,
    pub(crate) registry: &'a mio::Registry,
    pub(super) sources: &'a mut Sources,
}

impl LoopContext<'_> {
    /// The loop this runs on.
    pub fn event_loop(&self) -> &Arc<EventLoop> {
        self.event_loop
    }

    /// The source running now. Panics outside a source's call.
    pub(crate) fn me(&self) -> SourceRef {
        self.sources.current.expect("called by a running source").0
    }

    /// The token the running source registers its socket with.
    pub(crate) fn token(&self) -> mio::Token {
        mio::Token(self.me().key)
    }

    /// The running source is done: the loop drops it when its call returns.
    pub(crate) fn remove_me(&mut self) {
        if let Some((_, remove)) = &mut self.sources.current {
            *remove = true;
        }
    }

    /// Whether the loop's last poll, which returned all the kernel had,
    /// is at most [`FRESH_POLL`] old: then no socket's news is older than
    /// that.
    pub(crate) fn polled_recently(&self) -> bool {
        self.sources
            .polled_at
            .is_some_and(|at| at.elapsed() <= FRESH_POLL)
    }

    /// The running source has more to do but spent its budget: after the
    /// loop has run due timeouts and the other sources' events, it is
    /// handed [`Readiness`] with `again` set.
    pub(crate) fn ready_again(&mut self) {
        let me = self.me();
        if !self.sources.again.contains(&me) {
            self.sources.again.push(me);
        }
    }

    /// Arms a timer of the running source on this loop's heap: at
    /// `deadline` the loop calls its [`Source::timer`] with `tag`, unless
    /// it has gone by then. Allocates nothing once the heap is warm.
    pub(crate) fn schedule_timer(
        &self,
        deadline: Instant,
        tag: u64,
    ) -> Result<LoopTimerKey, Rejected> {
        self.event_loop
            .schedule_entry(deadline, super::Entry::Source(self.me(), tag))
    }

    /// Aborts exchange `exchange_id` on `source` once the loop has nothing
    /// due: a burst of expiries ends its exchanges (and wakes their callers)
    /// on time, and the sockets, which cost far more to close, close in the
    /// gaps and after the burst, oldest first — or once the abort has waited
    /// too long for a gap (see `EventLoop::close_aborted`).
    pub(crate) fn abort_later(&mut self, source: SourceRef, exchange_id: u64) {
        let queued_at = self.event_loop.clock.now();
        self.sources
            .aborts
            .push_back((source, exchange_id, queued_at));
    }

    /// Hands `source` readiness with `again` set, now (see
    /// [`EventLoop::wake_source`]).
    pub(crate) fn ready_again_now(&mut self, source: SourceRef) {
        let again = Readiness {
            again: true,
            ..Readiness::default()
        };
        self.run_source(source, |s, cx| s.ready(cx, again));
    }

    /// Aborts exchange `exchange_id` on `source` now (a task posted from
    /// another thread: no burst of expiries to keep on time here).
    pub(crate) fn abort_now(&mut self, source: SourceRef, exchange_id: u64) {
        self.run_source(source, |s, cx| s.abort(cx, exchange_id));
    }

    /// Adds a source: `make` builds it as the running source (it may
    /// register sockets with [`token`](Self::token) and do I/O), and the
    /// loop keeps what it returns unless it called
    /// [`remove_me`](Self::remove_me).
    pub(crate) fn add_source(
        &mut self,
        make: impl FnOnce(&mut LoopContext<'_>) -> Box<dyn Source>,
    ) -> SourceRef {
        let id = NEXT_SOURCE_ID.fetch_add(1, Ordering::Relaxed);
        let key = self.sources.slots.insert(Slot { id, source: None });
        let me = SourceRef { key, id };
        let outer = self.sources.current.replace((me, false));
        let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| make(self)));
        match made {
            Ok(source) => self.finish_call(me, source, outer),
            Err(panic) => {
                // Nothing was made: the slot goes, and the panic on to
                // whoever runs this (a task, caught there).
                self.sources.current = outer;
                self.sources.slots.remove(me.key);
                std::panic::resume_unwind(panic);
            }
        }
        me
    }

    /// Runs `f` on the source `source`, if it is still there and of type
    /// `T`. Returns whether it ran.
    pub(crate) fn with_source<T: Source>(
        &mut self,
        source: SourceRef,
        f: impl FnOnce(&mut T, &mut LoopContext<'_>),
    ) -> bool {
        self.run_source(source, |boxed, cx| {
            if let Some(typed) = boxed.as_any_mut().downcast_mut::<T>() {
                f(typed, cx);
                true
            } else {
                false
            }
        })
        .unwrap_or(false)
    }

    /// Runs `f` on `source` taken out of its slot; `None` if it has gone
    /// (or is running already). A panic in `f` closes the source through
    /// [`Source::panicked`] and removes it. The tasks the call wakes are
    /// woken when it ends (see [`task_wakes`](super::task_wakes)).
    pub(super) fn run_source<R>(
        &mut self,
        source: SourceRef,
        f: impl FnOnce(&mut dyn Source, &mut LoopContext<'_>) -> R,
    ) -> Option<R> {
        super::task_wakes::holding(|| self.run_source_now(source, f))
    }

    fn run_source_now<R>(
        &mut self,
        source: SourceRef,
        f: impl FnOnce(&mut dyn Source, &mut LoopContext<'_>) -> R,
    ) -> Option<R> {
        let slot = self
            .sources
            .slots
            .get_mut(source.key)
            .filter(|slot| slot.id == source.id)?;
        let mut boxed = slot.source.take()?;
        let outer = self.sources.current.replace((source, false));
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(boxed.as_mut(), self)));
        let result = match result {
            Ok(result) => Some(result),
            Err(_) => {
                let _ =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| boxed.panicked(self)));
                self.remove_me();
                None
            }
        };
        self.finish_call(source, boxed, outer);
        result
    }

    /// Puts a source back in its slot after a call, or drops it if it asked.
    fn finish_call(
        &mut self,
        me: SourceRef,
        source: Box<dyn Source>,
        outer: Option<(SourceRef, bool)>,
    ) {
        let (_, remove) =
            std::mem::replace(&mut self.sources.current, outer).expect("the running source is set");
        if remove {
            self.sources.slots.remove(me.key);
            drop(source);
        } else {
            self.sources.slots[me.key].source = Some(source);
        }
    }
}
