//! [`CountedHeap`]: a [`DeadlineHeap`] that keeps [`TimerCounters`] as it
//! goes, for an event loop whose statistics other threads read.
//!
//! The heap lives behind its owner's lock; the counters are atomics shared
//! through an `Arc`, so a snapshot never takes that lock. Every change to
//! the heap goes through a method here that counts it: the counters cannot
//! drift from what the heap holds.

use crate::heap::{DeadlineHeap, HeapHandle};
use crate::stats::{TimerCounters, TimerStats};
use std::sync::Arc;
use std::time::Instant;

/// A [`DeadlineHeap`] that counts what is armed, fired and cancelled, and
/// how late entries were taken out.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use tickless_timer::CountedHeap;
///
/// let mut heap = CountedHeap::new();
/// let t0 = Instant::now();
/// heap.insert(t0 + Duration::from_millis(10), "a");
/// let b = heap.insert(t0 + Duration::from_millis(20), "b");
/// assert_eq!(heap.cancel(b), Some("b"));
/// assert_eq!(heap.pop_due(t0 + Duration::from_millis(11)).map(|(_, v)| v), Some("a"));
/// let stats = heap.stats();
/// assert_eq!((stats.armed, stats.fired, stats.cancelled), (0, 1, 1));
/// ```
pub struct CountedHeap<T> {
    heap: DeadlineHeap<T>,
    counters: Arc<TimerCounters>,
}

impl<T> Default for CountedHeap<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> CountedHeap<T> {
    /// An empty heap with counters of its own.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty heap with room for `capacity` entries before it allocates.
    pub fn with_capacity(capacity: usize) -> Self {
        CountedHeap {
            heap: DeadlineHeap::with_capacity(capacity),
            counters: Arc::default(),
        }
    }

    /// The counters, to snapshot without the heap ([`TimerCounters::snapshot`]).
    pub fn counters(&self) -> Arc<TimerCounters> {
        self.counters.clone()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> TimerStats {
        self.counters.snapshot()
    }

    /// Number of armed entries.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is armed.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The nearest deadline. O(1).
    #[inline]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.heap.next_deadline()
    }

    /// Arms `value` for `deadline` and counts it. O(log n).
    pub fn insert(&mut self, deadline: Instant, value: T) -> HeapHandle {
        self.counters.armed();
        self.heap.insert(deadline, value)
    }

    /// Disarms an entry (counted as cancelled) and gives its value back.
    pub fn cancel(&mut self, handle: HeapHandle) -> Option<T> {
        let value = self.heap.cancel(handle)?;
        self.counters.cancelled();
        Some(value)
    }

    /// Takes out the nearest entry if it is due at `now`, counted as fired
    /// `now - deadline` late.
    #[inline]
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, T)> {
        let (deadline, value) = self.heap.pop_due(now)?;
        self.counters.fired(now.saturating_duration_since(deadline));
        Some((deadline, value))
    }

    /// Takes out every entry, counted as discarded (they will never fire).
    pub fn drain(&mut self) -> Vec<(Instant, T)> {
        let drained: Vec<_> = self.heap.drain().collect();
        self.counters.discarded(drained.len());
        drained
    }
}
