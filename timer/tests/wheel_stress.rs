//! The hashed wheel on the real clock under threads arming and cancelling
//! while its worker fires, and stopped while they arm. Only facts that hold
//! in any interleaving are asserted (no timing): every entry armed meets
//! exactly one fate (fired, cancelled by a `cancel` that returned `true`,
//! told it was stopped, or handed back by the stop), an arm that failed
//! meets none, and nothing fires before its deadline.
//!
//! Small wheels of 1 ms ticks, so that deadlines up to a few hundred
//! milliseconds away wrap round them many times; some entries, when they
//! fire on the worker, cancel another entry (racing its arming thread's
//! own cancel) or arm a child due at once or soon (into a bucket the
//! worker is about to visit or has just visited).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};
use tickless_timer::{HashedWheelTimer, WheelTask, WheelTimeout};

const THREADS: u64 = 4;
/// Tags `0..CHILDREN` are armed by the threads; `CHILDREN + tag` is the
/// child the entry `tag` arms when it fires.
const CHILDREN: u64 = 1 << 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Fired(Instant),
    Cancelled,
    Stopped,
    HandedBack,
}

/// The entries' shared task: it records each entry's fate.
struct Recorder {
    wheel: OnceLock<HashedWheelTimer>,
    /// Each armed entry's handle and deadline, by tag (set once armed).
    armed: Mutex<HashMap<u64, (WheelTimeout, Instant)>>,
    fates: Mutex<HashMap<u64, Vec<Fate>>>,
    /// Set once the stop has returned: boxed tasks run now were handed back.
    handing_back: AtomicBool,
}

impl Recorder {
    fn new(wheel: &HashedWheelTimer) -> Arc<Self> {
        let recorder = Arc::new(Recorder {
            wheel: OnceLock::new(),
            armed: Mutex::new(HashMap::new()),
            fates: Mutex::new(HashMap::new()),
            handing_back: AtomicBool::new(false),
        });
        let _ = recorder.wheel.set(wheel.clone());
        recorder
    }

    fn record(&self, tag: u64, fate: Fate) {
        self.fates
            .lock()
            .unwrap()
            .entry(tag)
            .or_default()
            .push(fate);
    }

    /// Arms `tag` (boxed if `boxed`); whether the wheel took it.
    fn arm(self: &Arc<Self>, tag: u64, deadline: Instant, boxed: bool) -> bool {
        let wheel = self.wheel.get().unwrap();
        let armed = if boxed {
            let recorder = self.clone();
            wheel.arm(deadline, move || recorder.ran(tag))
        } else {
            wheel.arm_task(deadline, self.clone(), tag)
        };
        match armed {
            Ok(handle) => {
                self.armed.lock().unwrap().insert(tag, (handle, deadline));
                true
            }
            Err(_) => false,
        }
    }

    /// Cancels `tag` if it has been armed (and its handle stored).
    fn cancel(&self, tag: u64) {
        let handle = self.armed.lock().unwrap().get(&tag).map(|(h, _)| h.clone());
        if let Some(handle) = handle {
            if handle.cancel() {
                self.record(tag, Fate::Cancelled);
            }
        }
    }

    fn ran(self: &Arc<Self>, tag: u64) {
        if self.handing_back.load(Ordering::SeqCst) {
            self.record(tag, Fate::HandedBack);
            return;
        }
        self.record(tag, Fate::Fired(Instant::now()));
        if tag >= CHILDREN {
            return;
        }
        if tag % 7 == 0 {
            // Races the arming thread, which may cancel the same entry.
            self.cancel(tag + 1);
        }
        if tag % 11 == 0 {
            let soon = Duration::from_micros(tag % 3 * 700);
            self.arm(CHILDREN + tag, Instant::now() + soon, tag % 2 == 0);
        }
    }

    /// Asserts every armed entry met exactly one fate, an entry never
    /// armed none, and none fired early.
    fn assert_fates(&self) {
        let armed = self.armed.lock().unwrap();
        let fates = self.fates.lock().unwrap();
        for (tag, (_, deadline)) in armed.iter() {
            let fate = fates.get(tag).map(Vec::as_slice).unwrap_or_default();
            assert_eq!(fate.len(), 1, "entry {tag:#x} met {fate:?}");
            if let Fate::Fired(at) = fate[0] {
                assert!(at >= *deadline, "entry {tag:#x} fired early");
            }
        }
        for tag in fates.keys() {
            assert!(
                armed.contains_key(tag),
                "entry {tag:#x} never armed met a fate"
            );
        }
    }
}

impl WheelTask for Recorder {
    fn fire(self: Arc<Self>, tag: u64) {
        self.ran(tag);
    }

    fn stopped(self: Arc<Self>, tag: u64) {
        self.record(tag, Fate::Stopped);
    }
}

/// A small xorshift generator: deterministic per thread, no dependency.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// Arms `count` entries from `thread` (tags `thread << 20 ..`), due
/// within 0-200 ms, and cancels some at once and some a few arms later;
/// stops early if the wheel rejects an arm (it was stopped).
fn arm_and_cancel(recorder: &Arc<Recorder>, thread: u64, count: u64) {
    let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ (thread + 1));
    for i in 0..count {
        let tag = thread << 20 | i;
        let micros = match random.below(4) {
            0 => random.below(2_000),
            1 => random.below(20_000),
            _ => random.below(200_000),
        };
        let deadline = Instant::now() + Duration::from_micros(micros);
        if !recorder.arm(tag, deadline, random.below(4) == 0) {
            return;
        }
        match random.below(6) {
            0 => recorder.cancel(tag),
            1 if i >= 5 => recorder.cancel(tag - 5),
            _ => {}
        }
        if i % 64 == 0 {
            // Let the worker in between bursts on a 2-core machine.
            thread::yield_now();
        }
    }
}

/// Waits (up to a generous ceiling, not asserted on) for nothing armed.
fn wait_until_idle(wheel: &HashedWheelTimer) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while wheel.stats().armed > 0 && Instant::now() < give_up {
        thread::sleep(Duration::from_millis(5));
    }
}

/// Stops the wheel (which joins its worker: nothing fires after) and runs
/// the boxed tasks it hands back, which record that fate.
fn stop_and_hand_back(wheel: &HashedWheelTimer, recorder: &Recorder) {
    let handed_back = wheel.stop();
    recorder.handing_back.store(true, Ordering::SeqCst);
    for task in handed_back {
        task();
    }
}

#[test]
fn every_entry_armed_among_racing_threads_meets_exactly_one_fate() {
    for size in [1, 16, 64] {
        let wheel = HashedWheelTimer::builder()
            .tick(Duration::from_millis(1))
            .wheel_size(size)
            .build()
            .unwrap();
        let recorder = Recorder::new(&wheel);
        let threads: Vec<_> = (0..THREADS)
            .map(|thread| {
                let recorder = recorder.clone();
                thread::spawn(move || arm_and_cancel(&recorder, thread, 1_500))
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        wait_until_idle(&wheel);
        // (A child armed by the last task may still be there: the armed
        // count drops before a task runs. It is stopped, its one fate.)
        stop_and_hand_back(&wheel, &recorder);
        assert_eq!(wheel.stats().armed, 0, "wheel of {size}");
        recorder.assert_fates();
        let fates = recorder.fates.lock().unwrap();
        let count =
            |wanted: fn(&Fate) -> bool| fates.values().filter(|fate| wanted(&fate[0])).count();
        let fired = count(|fate| matches!(fate, Fate::Fired(_)));
        let cancelled = count(|fate| *fate == Fate::Cancelled);
        // Not a timing assertion: the test would prove little without both.
        assert!(
            fired > 0 && cancelled > 0,
            "{fired} fired, {cancelled} cancelled"
        );
    }
}

#[test]
fn a_stop_racing_arms_cancels_and_fires_settles_every_entry_once() {
    for size in [1, 64] {
        let wheel = HashedWheelTimer::builder()
            .tick(Duration::from_millis(1))
            .wheel_size(size)
            .build()
            .unwrap();
        let recorder = Recorder::new(&wheel);
        let started = Arc::new(Barrier::new(THREADS as usize + 1));
        let threads: Vec<_> = (0..THREADS)
            .map(|thread| {
                let (recorder, started) = (recorder.clone(), started.clone());
                thread::spawn(move || {
                    started.wait();
                    // Far more than fits before the stop: they meet it.
                    arm_and_cancel(&recorder, thread, 1 << 20);
                })
            })
            .collect();
        started.wait();
        // Once some have fired, so the stop meets the worker mid-way too.
        let give_up = Instant::now() + Duration::from_secs(60);
        while wheel.stats().fired < 50 && Instant::now() < give_up {
            thread::yield_now();
        }
        stop_and_hand_back(&wheel, &recorder);
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(wheel.stats().armed, 0, "wheel of {size}");
        recorder.assert_fates();
    }
}
