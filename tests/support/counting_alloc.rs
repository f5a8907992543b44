//! A global allocator that counts: the system allocator, keeping the
//! number of allocations made and the bytes out now. For the tests and
//! benchmarks that measure memory; a global allocator is the whole
//! process's, so each user is a binary of its own and includes this file
//! by path (`#[path = ".../tests/support/counting_alloc.rs"] mod
//! counting_alloc;`), then installs [`Counting`] with `#[global_allocator]`.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering};

/// The system allocator, counting.
pub struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);
/// The most [`LIVE_BYTES`] has been since [`reset_peak`].
static PEAK_LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    /// Allocations (and reallocations) this thread made so far. Const, of a
    /// type without drop: reading or bumping it never allocates.
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// Allocations (and reallocations) made so far.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Allocations (and reallocations) the calling thread made so far: for a
/// count that other threads (another test's starting, the test harness
/// printing) must not disturb.
pub fn thread_allocations() -> u64 {
    THREAD_ALLOCATIONS.try_with(Cell::get).unwrap_or(0)
}

/// Bytes allocated so far, freed or not: every allocation's size, and what
/// a reallocation grew by. What a copy costs shows here even when it is
/// freed before it could be seen in [`live_bytes`].
pub fn allocated_bytes() -> u64 {
    ALLOCATED_BYTES.load(Ordering::Relaxed)
}

/// Bytes allocated and not yet freed.
pub fn live_bytes() -> isize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

/// The most bytes allocated and not yet freed at once since the last
/// [`reset_peak`] (or the start): what a step's transient copies cost
/// shows here even when they are gone by its end.
pub fn peak_live_bytes() -> isize {
    PEAK_LIVE_BYTES.load(Ordering::Relaxed)
}

/// Starts a new [`peak_live_bytes`] from the bytes live now.
pub fn reset_peak() {
    PEAK_LIVE_BYTES.store(live_bytes(), Ordering::Relaxed);
}

fn counted(ptr: *mut u8, bytes: isize) -> *mut u8 {
    if !ptr.is_null() {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // Not there once the thread's locals are gone, at its very end.
        let _ = THREAD_ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        let live = LIVE_BYTES.fetch_add(bytes, Ordering::Relaxed) + bytes;
        PEAK_LIVE_BYTES.fetch_max(live, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(bytes.max(0) as u64, Ordering::Relaxed);
    }
    ptr
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so it upholds exactly the contract `System` does; the counters
// are lock-free atomics and never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller guarantees `layout` has a non-zero size, as
        // `System.alloc` requires.
        counted(unsafe { System.alloc(layout) }, layout.size() as isize)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`: `layout` has a non-zero size.
        counted(
            unsafe { System.alloc_zeroed(layout) },
            layout.size() as isize,
        )
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr` came from this allocator (so
        // from `System`) with `layout`, and that `new_size` is valid for it.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        counted(new, new_size as isize - layout.size() as isize)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` was allocated by this
        // allocator, that is by `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }
}
