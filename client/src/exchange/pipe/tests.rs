//! The pipe's rules, one by one: the window, the low-water mark, which
//! pushes wake a reader, collecting, and a reader that goes away. Waiters
//! are tasks whose wakers count their wake-ups.

use super::*;
use crate::exchange::pacing::{Pacing, WaitFor, SPIN_IN_FLIGHT};
use std::sync::atomic::AtomicUsize;
use std::task::Wake;
use std::time::Duration;

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

/// The spin of a reader with no loop to drive: never asked.
fn never_asked(_: u64) -> Spin<'static> {
    unreachable!("a reader with no loop to drive asked for a spin")
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
    let (taken_back, held) = pipe.reclaim();
    assert_eq!(taken_back.iter().count(), 1);
    assert!(held.is_empty());
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

fn held(n: usize) -> BytesMut {
    BytesMut::from(&vec![b'h'; n][..])
}

/// Bytes held in an untouched pipe are counted as buffered and pushed,
/// taken by the reader's first take as a chunk — without any wake of the
/// writer: nobody waits on it for them — and taken back by the writer,
/// where they are, if the reader has not taken them.
#[test]
fn held_bytes_are_the_first_take_s_or_taken_back_where_they_are() {
    let (pipe, meter) = pipe();
    let (writer, waiter) = counted();
    let mut gathered = held(5);
    let at = gathered.as_ptr();
    assert!(matches!(
        pipe.reader(Some(&mut gathered)),
        Reader::Untouched
    ));
    assert!(gathered.is_empty(), "moved into the pipe");
    assert_eq!((meter.load(Ordering::SeqCst), pipe.pushed()), (5, 5));
    let back = pipe.unhold();
    assert_eq!((back.len(), back.as_ptr()), (5, at), "not copied");
    assert_eq!((meter.load(Ordering::SeqCst), pipe.pushed()), (0, 0));
    let mut gathered = back;
    pipe.reader(Some(&mut gathered));
    let (_, reader) = counted();
    assert!(matches!(pipe.take(&reader), Taken::Chunk(c) if c[..] == [b'h'; 5]));
    assert_eq!(woken(&writer), 0);
    assert_eq!((meter.load(Ordering::SeqCst), pipe.pushed()), (0, 5));
    assert!(pipe.unhold().is_empty(), "the reader has them");
    assert!(matches!(pipe.reader(Some(&mut held(1))), Reader::Takes));
    assert_eq!(pipe.push(bytes(1), &waiter), Pushed::Room);
}

/// Held bytes are the newest: the reader takes the chunks pushed before
/// them first. A collect takes them back with those chunks, as they were.
#[test]
fn held_bytes_come_after_the_chunks_and_are_reclaimed_with_them() {
    let (pipe, meter) = pipe();
    let (_, waiter) = counted();
    assert_eq!(pipe.push(bytes(3), &waiter), Pushed::Room);
    pipe.reader(Some(&mut held(5)));
    let (_, reader) = counted();
    assert!(matches!(pipe.take(&reader), Taken::Chunk(c) if c.len() == 3));
    assert!(matches!(pipe.take(&reader), Taken::Chunk(c) if c[..] == [b'h'; 5]));

    let (pipe, _) = self::pipe();
    assert_eq!(pipe.push(bytes(3), &waiter), Pushed::Room);
    let mut gathered = held(5);
    let at = gathered.as_ptr();
    pipe.reader(Some(&mut gathered));
    pipe.collect(false);
    assert!(matches!(pipe.reader(Some(&mut held(1))), Reader::Collects));
    let (chunks, held) = pipe.reclaim();
    assert_eq!(chunks.iter().map(Bytes::len).sum::<usize>(), 3);
    assert_eq!((held.len(), held.as_ptr()), (5, at));
    assert_eq!((meter.load(Ordering::SeqCst), pipe.pushed()), (0, 0));
}

/// Bytes held while others still are (the writer takes them back first,
/// so it never does) go after them, never in their place.
#[test]
fn bytes_held_twice_are_both_kept_in_order() {
    let (pipe, meter) = pipe();
    pipe.reader(Some(&mut held(5)));
    pipe.reader(Some(&mut BytesMut::from(&b"abc"[..])));
    pipe.fail(Error::Cancelled);
    pipe.hold_last(BytesMut::from(&b"de"[..]));
    assert_eq!(meter.load(Ordering::SeqCst), 10);
    let (_, reader) = counted();
    assert!(matches!(pipe.take(&reader), Taken::Chunk(c) if c[..] == b"hhhhhabcde"[..]));
}

/// A push while bytes are held (the writer takes them back first, so it
/// never does) queues them before it: the reader gets them in order.
#[test]
fn a_push_behind_held_bytes_comes_after_them() {
    let (pipe, meter) = pipe();
    let (_, waiter) = counted();
    pipe.reader(Some(&mut held(5)));
    assert_eq!(pipe.push(bytes(3), &waiter), Pushed::Room);
    assert_eq!((meter.load(Ordering::SeqCst), pipe.pushed()), (8, 8));
    let (_, reader) = counted();
    assert!(matches!(pipe.take(&reader), Taken::Chunk(c) if c[..] == [b'h'; 5]));
    assert!(matches!(pipe.take(&reader), Taken::Chunk(c) if c.len() == 3));
    assert_eq!(meter.load(Ordering::SeqCst), 0);
}

/// A failure leaves held bytes before its error; bytes held last, as the
/// connection closes, go there too — but not once the error was taken.
/// A reader that goes drops them.
#[test]
fn held_bytes_go_before_a_failure_the_reader_has_not_taken_and_never_after_it() {
    let (pipe, meter) = pipe();
    pipe.reader(Some(&mut held(5)));
    pipe.fail(Error::Cancelled);
    let gathered = pipe.unhold();
    pipe.hold_last(gathered);
    assert_eq!(meter.load(Ordering::SeqCst), 5);
    let (_, reader) = counted();
    assert!(matches!(pipe.take(&reader), Taken::Chunk(c) if c.len() == 5));
    assert!(matches!(
        pipe.take(&reader),
        Taken::Failed(Error::Cancelled)
    ));
    pipe.hold_last(held(5));
    assert_eq!(
        meter.load(Ordering::SeqCst),
        0,
        "refused once the error was taken"
    );
    assert!(matches!(pipe.take(&reader), Taken::End(None)));

    let (pipe, meter) = self::pipe();
    pipe.reader(Some(&mut held(5)));
    pipe.close_reader();
    assert_eq!(meter.load(Ordering::SeqCst), 0);
    assert!(pipe.unhold().is_empty());
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
        matches!(
            reading.take_blocking(None, &never_asked, || false),
            Some(Taken::End(_))
        )
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
    let held: usize = pipe.reclaim().0.iter().map(Bytes::len).sum();
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

/// A reader's waker whose drop ends the body: as one that holds the last
/// reference to a task owning the last `Client`, whose close fails the
/// exchanges still in flight (and so their pipes).
struct EndsOnDrop(Arc<Pipe>);

impl Wake for EndsOnDrop {
    fn wake(self: Arc<Self>) {}
}

impl Drop for EndsOnDrop {
    fn drop(&mut self) {
        self.0.finish(None);
    }
}

/// Runs `f` on another thread; panics if it has not returned within ten
/// seconds: it deadlocked (a waiter dropped under the pipe's lock, whose
/// drop came back for it).
fn returns<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, on_done) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(f()).unwrap());
    on_done
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{what} deadlocked: a waiter was dropped under the lock"))
}

/// A pipe whose reader's waiter is the last clone of an [`EndsOnDrop`].
fn pipe_awaited_by_one_that_ends_it() -> Arc<Pipe> {
    let pipe = Arc::new(Pipe::new(WINDOW, Arc::new(AtomicUsize::new(0))));
    let first = Waker::from(Arc::new(EndsOnDrop(pipe.clone())));
    assert!(pipe
        .poll_take(&mut Context::from_waker(&first))
        .is_pending());
    pipe
}

#[test]
fn a_replaced_reader_is_dropped_after_the_unlock() {
    let pipe = pipe_awaited_by_one_that_ends_it();
    // Polled by another task: the first waker goes, and its drop ends the
    // body.
    let (counter, _) = counted();
    let reader = pipe.clone();
    let second = Waker::from(counter.clone());
    let pending = returns("a poll with another waker", move || {
        reader
            .poll_take(&mut Context::from_waker(&second))
            .is_pending()
    });
    assert!(pending, "nothing had come when it looked");
    assert_eq!(woken(&counter), 1, "the end woke the new reader");
    assert!(matches!(pipe.take(|| unreachable!()), Taken::End(None)));
}

#[test]
fn a_reader_replaced_while_collecting_is_dropped_after_the_unlock() {
    let pipe = pipe_awaited_by_one_that_ends_it();
    pipe.collect(false);
    let (counter, _) = counted();
    let reader = pipe.clone();
    let second = Waker::from(counter.clone());
    let pending = returns("a poll for the whole body with another waker", move || {
        reader
            .poll_take_whole(&mut Context::from_waker(&second))
            .is_pending()
    });
    assert!(pending, "nothing had come when it looked");
    assert_eq!(woken(&counter), 1, "the end woke the new reader");
}

#[test]
fn the_waiter_of_a_reader_that_goes_is_dropped_after_the_unlock() {
    let pipe = pipe_awaited_by_one_that_ends_it();
    let reader = pipe.clone();
    returns("the reader going", move || reader.close_reader());
    assert!(pipe.reader_gone());
}

#[test]
fn a_replaced_writer_is_dropped_after_the_unlock() {
    let pipe = Arc::new(Pipe::new(WINDOW, Arc::new(AtomicUsize::new(0))));
    let first = Waker::from(Arc::new(EndsOnDrop(pipe.clone())));
    let full = pipe.push(bytes(WINDOW), || Waiter::Task(first.clone()));
    assert_eq!(full, Pushed::Full);
    drop(first);
    // Pushed again while full, by a writer with another waiter: the first
    // goes, and its drop ends the body.
    let writer = pipe.clone();
    let pushed = returns("a push with another waiter", move || {
        let (_, second) = counted();
        writer.push(bytes(1), second)
    });
    assert_eq!(pushed, Pushed::Full);
    assert!(matches!(pipe.take(|| unreachable!()), Taken::Chunk(_)));
}

/// An async reader that turns to blocking reads: its task's waker is
/// replaced by the thread's waiter in `take`, and dropped after the
/// unlock — the sleep that follows (`sleep_until`) replaces only that
/// thread's own waiter, never a task's.
#[test]
fn a_reader_that_turns_from_polls_to_blocking_reads_drops_its_waker_after_the_unlock() {
    let pipe = pipe_awaited_by_one_that_ends_it();
    let reader = pipe.clone();
    let taken = returns("a blocking read after a poll", move || {
        reader.take_blocking(None, &never_asked, || false)
    });
    assert!(matches!(taken, Some(Taken::End(None))), "the end");
}

/// [`a_reader_that_turns_from_polls_to_blocking_reads_drops_its_waker_after_the_unlock`]
/// for a body collected whole.
#[test]
fn a_collecting_reader_that_turns_from_polls_to_blocking_drops_its_waker_after_the_unlock() {
    let pipe = pipe_awaited_by_one_that_ends_it();
    pipe.collect(false);
    let reader = pipe.clone();
    let whole = returns(
        "a blocking wait for the whole body after a poll",
        move || reader.take_whole_blocking(None, &never_asked, || false),
    );
    assert!(
        matches!(whole, Some(Whole::Done(_, None))),
        "the whole body"
    );
}

/// A blocking reader asks for its spin only once the loop is its to
/// drive: asked before (as it was), a reader that then slept — its loop
/// run by the loop's thread — counted a spin it never ran toward the
/// probes that tell whether spins pay. (Found by a review.)
#[test]
fn a_blocking_reader_asks_for_its_spin_only_when_it_drives_its_loop() {
    // Its thread takes an idle loop back only after a minute.
    let group = crate::event_loop::EventLoopGroup::builder()
        .threads(1)
        .idle_grace(Duration::from_secs(60))
        .build()
        .unwrap();
    let home = group.loops()[0].clone();
    let pacing = Pacing::default();
    // Reads one chunk, pushed by another thread once the reader waits as
    // `waits` says; returns how many times the spin was asked.
    let read_one = |waits: fn(&Waiter) -> bool| {
        let pipe = Arc::new(pipe().0);
        let pusher = {
            let pipe = pipe.clone();
            std::thread::spawn(move || {
                let give_up = std::time::Instant::now() + Duration::from_secs(10);
                while !lock(&pipe.state).reader.as_ref().is_some_and(waits) {
                    // Pushed all the same, so that the reader returns and
                    // the test fails on what it asked rather than hangs.
                    if std::time::Instant::now() > give_up {
                        break;
                    }
                    std::thread::yield_now();
                }
                pipe.push_last(bytes(10));
                pipe.flush();
            })
        };
        let asked = AtomicUsize::new(0);
        let spin = |_| {
            asked.fetch_add(1, Ordering::SeqCst);
            // More in flight than waits spin for: no spin.
            pacing.spin(WaitFor::Body, SPIN_IN_FLIGHT + 1, 0)
        };
        let taken = pipe.take_blocking(Some(&home), &spin, || false);
        assert!(matches!(taken, Some(Taken::Chunk(chunk)) if chunk.len() == 10));
        pusher.join().unwrap();
        asked.load(Ordering::SeqCst)
    };
    // The loop's thread runs it: the reader sleeps, and asks nothing.
    let asleep = |waiter: &Waiter| matches!(waiter, Waiter::Blocked(_));
    assert_eq!(read_one(asleep), 0, "a reader that could not drive");
    // Left idle: the reader drives it, and asks once.
    home.leave_idle();
    let driving = |waiter: &Waiter| matches!(waiter, Waiter::Driving(_));
    assert_eq!(read_one(driving), 1, "a reader that drove");
}

/// A pump's small reads go gathered into chunks of up to `GATHER` bytes,
/// a large one as it is, all in order; a take takes what is gathered so
/// far, without waiting for more.
#[test]
fn a_pumps_small_reads_are_gathered_and_large_ones_go_whole_in_order() {
    let meter = Arc::new(AtomicUsize::new(0));
    let pipe = Pipe::new(1 << 20, meter.clone());
    let (_, reader) = counted();
    pipe.push_blocking(b"a").unwrap();
    pipe.push_blocking(b"b").unwrap();
    assert!(matches!(pipe.take(&reader), Taken::Chunk(c) if c[..] == b"ab"[..]));
    let mut sent = Vec::new();
    let mut push = |piece: Vec<u8>| {
        pipe.push_blocking(&piece).unwrap();
        sent.extend_from_slice(&piece);
    };
    for byte in 0..(3 * GATHER / 2) {
        push(vec![byte as u8]);
    }
    push(vec![b'L'; GATHER]);
    push(vec![b'm'; GATHER - 1]);
    push(vec![b'n'; 2]);
    assert_eq!(meter.load(Ordering::SeqCst), sent.len());
    pipe.finish(None);
    let mut taken = Vec::new();
    let mut chunks = 0;
    while let Taken::Chunk(chunk) = pipe.take(&reader) {
        assert!(chunk.len() <= GATHER);
        taken.extend_from_slice(&chunk);
        chunks += 1;
    }
    assert_eq!(taken, sent);
    // 1.5 GATHER of single bytes in two, the large one, then two more.
    assert_eq!(chunks, 5);
    assert_eq!(meter.load(Ordering::SeqCst), 0);
}
