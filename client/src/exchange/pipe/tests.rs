//! The pipe's rules, one by one: the window, the low-water mark, which
//! pushes wake a reader, collecting, and a reader that goes away. Waiters
//! are tasks whose wakers count their wake-ups.

use super::*;
use std::sync::atomic::AtomicUsize;
use std::task::Wake;

const WINDOW: usize = 100;

struct Counter(AtomicUsize);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A waiter that counts how often it is woken.
fn counted() -> (Arc<Counter>, impl Fn() -> Waiter) {
    let counter = Arc::new(Counter(AtomicUsize::new(0)));
    let waker = Waker::from(counter.clone());
    (counter, move || Waiter::Task(waker.clone()))
}

fn woken(counter: &Counter) -> usize {
    counter.0.load(Ordering::SeqCst)
}

fn pipe() -> (Pipe, Arc<AtomicUsize>) {
    let meter = Arc::new(AtomicUsize::new(0));
    (Pipe::new(WINDOW, meter.clone()), meter)
}

fn bytes(n: usize) -> Bytes {
    Bytes::from(vec![b'x'; n])
}

#[test]
fn the_writer_is_stopped_at_the_window_and_woken_at_the_low_water_mark() {
    let (pipe, meter) = pipe();
    let (writer, waiter) = counted();
    assert_eq!(pipe.push(bytes(60), &waiter), Pushed::Room);
    assert_eq!(pipe.push(bytes(40), &waiter), Pushed::Full);
    assert_eq!(meter.load(Ordering::SeqCst), 100);
    assert!(!pipe.has_room());
    let (_, reader) = counted();
    // Down to 40: under half the window, the writer may go on.
    assert!(matches!(pipe.take(&reader), Taken::Chunk(c) if c.len() == 60));
    assert_eq!(woken(&writer), 1);
    assert!(pipe.has_room());
    assert!(matches!(pipe.take(&reader), Taken::Chunk(c) if c.len() == 40));
    assert_eq!(woken(&writer), 1, "woken once, not per chunk");
    assert_eq!(meter.load(Ordering::SeqCst), 0);
}

#[test]
fn a_waiting_reader_is_woken_at_the_low_water_mark_or_a_flush_not_per_push() {
    let (pipe, _) = pipe();
    let (reader, waiter) = counted();
    assert!(matches!(pipe.take(&waiter), Taken::Pending));
    let (_, writer) = counted();
    pipe.push(bytes(10), &writer);
    pipe.push(bytes(10), &writer);
    assert_eq!(
        woken(&reader),
        0,
        "below the low-water mark, pushes wait for a flush"
    );
    pipe.flush();
    assert_eq!(woken(&reader), 1);
    pipe.flush();
    assert_eq!(woken(&reader), 1, "a flush wakes only a reader that waits");
    // Taken down to empty, the reader waits again; half a window wakes it.
    while let Taken::Chunk(_) = pipe.take(&waiter) {}
    pipe.push(bytes(49), &writer);
    assert_eq!(woken(&reader), 1);
    pipe.push(bytes(1), &writer);
    assert_eq!(woken(&reader), 2);
}

#[test]
fn a_flush_of_an_empty_pipe_wakes_nobody_and_the_end_always_does() {
    let (pipe, _) = pipe();
    let (reader, waiter) = counted();
    assert!(matches!(pipe.take(&waiter), Taken::Pending));
    pipe.flush();
    assert_eq!(woken(&reader), 0);
    pipe.finish(None);
    assert_eq!(woken(&reader), 1);
    assert!(matches!(pipe.take(&waiter), Taken::End(None)));
}

#[test]
fn a_collecting_reader_lifts_the_window_and_is_woken_once_at_the_end() {
    let (pipe, meter) = pipe();
    let (writer, writer_waiter) = counted();
    assert_eq!(pipe.push(bytes(100), &writer_waiter), Pushed::Full);
    let (reader, reader_waiter) = counted();
    pipe.collect(false);
    assert_eq!(woken(&writer), 1, "a writer stopped at the window goes on");
    assert!(pipe.is_collecting() && pipe.has_room());
    assert!(matches!(pipe.take_whole(&reader_waiter), Whole::Pending));
    // The writer takes back what was buffered, to gather it with the rest.
    let taken_back = pipe.reclaim();
    assert_eq!(taken_back.len(), 1);
    assert_eq!(meter.load(Ordering::SeqCst), 0);
    // The 100 taken back and 400 more, pushed as one.
    assert_eq!(pipe.push(bytes(500), &writer_waiter), Pushed::Room);
    pipe.flush();
    assert_eq!(woken(&reader), 0, "no wake-up before the end");
    pipe.finish(None);
    assert_eq!(woken(&reader), 1);
    match pipe.take_whole(&reader_waiter) {
        Whole::Done(chunks, None) => assert_eq!(chunks.iter().map(Bytes::len).sum::<usize>(), 500),
        _ => panic!("the whole body"),
    }
    assert_eq!(pipe.pushed(), 500, "the bytes taken back count once");
    assert_eq!(meter.load(Ordering::SeqCst), 0);
}

#[test]
fn a_failure_reaches_a_collecting_reader() {
    let (pipe, _) = pipe();
    pipe.collect(false);
    let (_, writer) = counted();
    pipe.push(bytes(5), &writer);
    pipe.fail(Error::Cancelled);
    let (_, reader) = counted();
    assert!(matches!(
        pipe.take_whole(&reader),
        Whole::Failed(Error::Cancelled)
    ));
}

#[test]
fn a_reader_that_goes_frees_the_buffer_wakes_the_writer_and_refuses_more() {
    let (pipe, meter) = pipe();
    let (writer, waiter) = counted();
    assert_eq!(pipe.push(bytes(100), &waiter), Pushed::Full);
    pipe.close_reader();
    assert_eq!(woken(&writer), 1);
    assert_eq!(meter.load(Ordering::SeqCst), 0);
    assert!(pipe.reader_gone() && pipe.has_room());
    assert_eq!(pipe.push(bytes(1), &waiter), Pushed::Refused);
}

#[test]
fn what_is_left_in_a_dropped_pipe_leaves_the_meter() {
    let (pipe, meter) = pipe();
    let (_, waiter) = counted();
    pipe.push(bytes(30), &waiter);
    assert_eq!(meter.load(Ordering::SeqCst), 30);
    drop(pipe);
    assert_eq!(meter.load(Ordering::SeqCst), 0);
}

#[test]
fn the_first_take_or_going_wakes_a_writer_waiting_on_an_untouched_pipe_a_collect_does_not() {
    // The first take, even of nothing yet.
    let (pipe, _) = pipe();
    let (writer, waiter) = counted();
    assert!(pipe.untouched(&waiter));
    let (_, reader) = counted();
    assert!(matches!(pipe.take(&reader), Taken::Pending));
    assert_eq!(woken(&writer), 1);
    assert!(!pipe.untouched(&waiter), "touched for good");
    assert!(matches!(pipe.take(&reader), Taken::Pending));
    assert_eq!(woken(&writer), 1, "only the first take");
    // A reader that goes before any take.
    let (pipe, _) = self::pipe();
    let (writer, waiter) = counted();
    assert!(pipe.untouched(&waiter));
    pipe.close_reader();
    assert_eq!(woken(&writer), 1);
    // A collect reads the body as an untouched pipe does: no wake.
    let (pipe, _) = self::pipe();
    let (writer, waiter) = counted();
    assert!(pipe.untouched(&waiter));
    pipe.collect(false);
    assert_eq!(woken(&writer), 0);
    assert!(!pipe.untouched(&waiter));
}

#[test]
fn the_end_of_a_body_a_thread_is_blocked_for_tells_the_loop_a_caller_waits() {
    let (pipe, _) = pipe();
    let pipe = Arc::new(pipe);
    let reading = pipe.clone();
    let reader = std::thread::spawn(move || {
        matches!(reading.take_blocking(None, || false), Some(Taken::End(_)))
    });
    // Until the reader is blocked on the pipe.
    while lock(&pipe.state).reader.is_none() {
        std::thread::yield_now();
    }
    assert!(!crate::event_loop::take_answered_a_waiting_caller());
    pipe.finish(None);
    assert!(
        crate::event_loop::take_answered_a_waiting_caller(),
        "a thread blocked for the end of its body: its next request is likely at once"
    );
    assert!(reader.join().unwrap());
    // A task's reader (an async caller) is not such a caller.
    let (pipe, _) = self::pipe();
    let (_, task) = counted();
    assert!(matches!(pipe.take(&task), Taken::Pending));
    pipe.finish(None);
    assert!(!crate::event_loop::take_answered_a_waiting_caller());
}

/// A body collected after some of it was pushed, as the connection does it
/// (`Active::start_collecting`, then the end): the chunks taken back go into
/// the collected buffer, pushed whole at the end. `pushed()` — the body's
/// length once it has ended, which the client records as its typical body —
/// counts them once. (Found by a review: it counted them twice.)
#[test]
fn pushed_is_the_body_length_for_a_body_collected_late() {
    let (pipe, _) = pipe();
    let (_, writer) = counted();
    assert_eq!(pipe.push(bytes(90), &writer), Pushed::Room);
    pipe.collect(false);
    let held: usize = pipe.reclaim().iter().map(Bytes::len).sum();
    assert_eq!(held, 90);
    pipe.push_last(bytes(held + 10));
    pipe.finish(None);
    let (_, reader) = counted();
    match pipe.take_whole(&reader) {
        Whole::Done(chunks, None) => {
            assert_eq!(chunks.iter().map(Bytes::len).sum::<usize>(), 100)
        }
        _ => panic!("the whole body"),
    }
    assert_eq!(pipe.pushed(), 100, "a 100-byte body");
}
