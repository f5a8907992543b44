//! [`DeadlineHeap`]: the deadlines of one thread, nearest first.
//!
//! # Invariants
//!
//! * `heap` is a 4-ary min-heap of `(deadline, sequence, key)`; ties on the
//!   deadline go to the entry inserted first, so equal deadlines fire in
//!   arming order.
//! * Every armed entry lives in `slots` at `key` and knows its position in
//!   `heap` (`heap_index`), kept exact by every sift. That back-pointer is what
//!   makes cancel O(log n): the entry is found in O(1) and removed in place.
//! * A [`HeapHandle`] carries the entry's sequence number. A slot key is
//!   reused once its entry is gone, so a stale handle (fired or cancelled)
//!   finds a different sequence there and cancels nothing.
//! * Neither `slots` nor `heap` shrinks: once they have grown to the largest
//!   number of entries armed at once, arming and cancelling allocate nothing.

use slab::Slab;
use std::time::Instant;

const ARITY: usize = 4;

/// Identifies one armed entry of a [`DeadlineHeap`], for cancelling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeapHandle {
    key: usize,
    sequence: u64,
}

struct Slot<T> {
    deadline: Instant,
    sequence: u64,
    heap_index: usize,
    value: T,
}

#[derive(Clone, Copy)]
struct HeapItem {
    deadline: Instant,
    sequence: u64,
    key: usize,
}

impl HeapItem {
    #[inline]
    fn before(&self, other: &HeapItem) -> bool {
        (self.deadline, self.sequence) < (other.deadline, other.sequence)
    }
}

/// A queue of deadlines owned by one thread.
///
/// # Contract
///
/// An entry is due only when `now >= deadline`: [`pop_due`](Self::pop_due)
/// never returns an entry early. How late it is returned depends only on how
/// promptly its owner calls `pop_due` after the deadline, which is why an
/// event loop pairs the heap with a precise wait
/// ([`PreciseWait`](crate::PreciseWait)) armed for
/// [`next_deadline`](Self::next_deadline).
///
/// # Cost
///
/// Insert and cancel are O(log n), the nearest deadline O(1). No allocation
/// per insert or cancel once the storage has grown.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use tickless_timer::DeadlineHeap;
///
/// let mut heap = DeadlineHeap::new();
/// let t0 = Instant::now();
/// let late = heap.insert(t0 + Duration::from_millis(20), "late");
/// heap.insert(t0 + Duration::from_millis(10), "early");
/// assert_eq!(heap.cancel(late), Some("late"));
/// assert_eq!(heap.pop_due(t0 + Duration::from_millis(9)), None);
/// assert_eq!(heap.pop_due(t0 + Duration::from_millis(10)).map(|(_, v)| v), Some("early"));
/// ```
pub struct DeadlineHeap<T> {
    slots: Slab<Slot<T>>,
    heap: Vec<HeapItem>,
    next_sequence: u64,
}

impl<T> DeadlineHeap<T> {
    /// An empty heap.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty heap with room for `capacity` entries before it allocates.
    pub fn with_capacity(capacity: usize) -> Self {
        DeadlineHeap {
            slots: Slab::with_capacity(capacity),
            heap: Vec::with_capacity(capacity),
            next_sequence: 0,
        }
    }

    /// Number of armed entries.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is armed.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The nearest deadline, if any entry is armed. O(1).
    #[inline]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.heap.first().map(|item| item.deadline)
    }

    /// Arms `value` for `deadline`. O(log n).
    pub fn insert(&mut self, deadline: Instant, value: T) -> HeapHandle {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let heap_index = self.heap.len();
        let key = self.slots.insert(Slot {
            deadline,
            sequence,
            heap_index,
            value,
        });
        self.heap.push(HeapItem {
            deadline,
            sequence,
            key,
        });
        // The only entry is the root already (the common case of a loop
        // with one exchange in flight): no call.
        if heap_index > 0 {
            self.sift_up(heap_index);
        }
        HeapHandle { key, sequence }
    }

    /// The deadline of an armed entry, or `None` once it fired or was cancelled.
    pub fn deadline_of(&self, handle: HeapHandle) -> Option<Instant> {
        self.slots
            .get(handle.key)
            .filter(|slot| slot.sequence == handle.sequence)
            .map(|slot| slot.deadline)
    }

    /// Disarms an entry and gives its value back, or `None` if it already
    /// fired or was cancelled. O(log n).
    pub fn cancel(&mut self, handle: HeapHandle) -> Option<T> {
        let slot = self.slots.get(handle.key)?;
        if slot.sequence != handle.sequence {
            return None;
        }
        let index = slot.heap_index;
        Some(self.remove_at(index))
    }

    /// Removes and returns the nearest entry if it is due at `now`
    /// (`deadline <= now`), with its deadline. Call it in a loop to drain
    /// everything due.
    #[inline]
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, T)> {
        let first = self.heap.first()?;
        if first.deadline > now {
            return None;
        }
        let deadline = first.deadline;
        Some((deadline, self.remove_at(0)))
    }

    /// Removes every entry, nearest first, whether due or not.
    pub fn drain(&mut self) -> impl Iterator<Item = (Instant, T)> + '_ {
        std::iter::from_fn(move || {
            let deadline = self.next_deadline()?;
            Some((deadline, self.remove_at(0)))
        })
    }

    fn remove_at(&mut self, index: usize) -> T {
        let removed = self.heap.swap_remove(index);
        if index < self.heap.len() {
            self.place(index);
            // The item moved into `index` came from the bottom; it may belong
            // above or below its new place, never both.
            let moved_up = self.sift_up(index);
            if !moved_up {
                self.sift_down(index);
            }
        }
        self.slots.remove(removed.key).value
    }

    /// Records in the slot where its heap item now stands.
    #[inline]
    fn place(&mut self, index: usize) {
        let key = self.heap[index].key;
        self.slots[key].heap_index = index;
    }

    /// Returns whether the item moved.
    #[inline]
    fn sift_up(&mut self, mut index: usize) -> bool {
        let start = index;
        let item = self.heap[index];
        while index > 0 {
            let parent = (index - 1) / ARITY;
            if !item.before(&self.heap[parent]) {
                break;
            }
            self.heap[index] = self.heap[parent];
            self.place(index);
            index = parent;
        }
        // Unmoved, the item and its slot's back-pointer are already right
        // (every caller places it first): arming the only entry, or one
        // later than the rest, writes nothing more.
        if index == start {
            return false;
        }
        self.heap[index] = item;
        self.place(index);
        true
    }

    fn sift_down(&mut self, mut index: usize) {
        let item = self.heap[index];
        let len = self.heap.len();
        loop {
            let first_child = index * ARITY + 1;
            if first_child >= len {
                break;
            }
            let last_child = (first_child + ARITY).min(len);
            let mut best = first_child;
            for child in first_child + 1..last_child {
                if self.heap[child].before(&self.heap[best]) {
                    best = child;
                }
            }
            if !self.heap[best].before(&item) {
                break;
            }
            self.heap[index] = self.heap[best];
            self.place(index);
            index = best;
        }
        self.heap[index] = item;
        self.place(index);
    }
}

impl<T> Default for DeadlineHeap<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> std::fmt::Debug for DeadlineHeap<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadlineHeap")
            .field("len", &self.len())
            .field("next_deadline", &self.next_deadline())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    #[test]
    fn equal_deadlines_fire_in_arming_order() {
        let mut heap = DeadlineHeap::new();
        let t = Instant::now();
        for i in 0..10 {
            heap.insert(t, i);
        }
        let order: Vec<_> = std::iter::from_fn(|| heap.pop_due(t).map(|(_, v)| v)).collect();
        assert_eq!(order, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn stale_handle_cancels_nothing() {
        let mut heap = DeadlineHeap::new();
        let t = Instant::now();
        let first = heap.insert(t, 1);
        assert_eq!(heap.pop_due(t).map(|(_, v)| v), Some(1));
        let second = heap.insert(t, 2); // reuses the slot key
        assert_eq!(heap.cancel(first), None);
        assert_eq!(heap.deadline_of(second), Some(t));
        assert_eq!(heap.cancel(second), Some(2));
        assert!(heap.is_empty());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16),
        Cancel(usize),
        Advance(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u16..500).prop_map(Op::Insert),
            2 => any::<usize>().prop_map(Op::Cancel),
            2 => (0u16..200).prop_map(Op::Advance),
        ]
    }

    proptest! {
        /// Against a model (an ordered map): nothing fires early, nothing
        /// cancelled fires, everything due fires exactly once, in order.
        #[test]
        fn behaves_like_an_ordered_map(ops in proptest::collection::vec(op(), 1..300)) {
            let origin = Instant::now();
            let mut now = origin;
            let mut heap = DeadlineHeap::new();
            let mut model: BTreeMap<(Instant, u64), u32> = BTreeMap::new();
            let mut handles: Vec<(HeapHandle, Instant, u64)> = Vec::new();
            let mut next_id = 0u32;
            let mut sequence = 0u64;
            for op in ops {
                match op {
                    Op::Insert(ms) => {
                        let deadline = now + Duration::from_millis(ms.into());
                        let handle = heap.insert(deadline, next_id);
                        model.insert((deadline, sequence), next_id);
                        handles.push((handle, deadline, sequence));
                        next_id += 1;
                        sequence += 1;
                    }
                    Op::Cancel(pick) if !handles.is_empty() => {
                        let (handle, deadline, seq) = handles[pick % handles.len()];
                        prop_assert_eq!(heap.cancel(handle), model.remove(&(deadline, seq)));
                    }
                    Op::Cancel(_) => {}
                    Op::Advance(ms) => {
                        now += Duration::from_millis(ms.into());
                        while let Some((deadline, id)) = heap.pop_due(now) {
                            prop_assert!(deadline <= now, "fired early");
                            let (&key, &expected) = model.iter().next().expect("fired twice or after cancel");
                            prop_assert_eq!((key.0, expected), (deadline, id));
                            model.remove(&key);
                        }
                        prop_assert!(model.keys().next().is_none_or(|k| k.0 > now), "due entry not fired");
                    }
                }
                prop_assert_eq!(heap.len(), model.len());
                prop_assert_eq!(heap.next_deadline(), model.keys().next().map(|k| k.0));
            }
        }
    }
}
