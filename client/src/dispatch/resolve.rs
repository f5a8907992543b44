//! Name resolution, off the event loops: `getaddrinfo` blocks, so it runs on
//! a small pool of resolver threads, started on first use.

use crate::sync::lock;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, ThreadId};

/// How many resolutions may block at once.
const THREADS: usize = 2;

type Job = Box<dyn FnOnce() + Send + 'static>;

#[derive(Default)]
pub(crate) struct Resolver {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    sender: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
    /// The ids of every thread started, kept after `shutdown` takes
    /// `threads` to join them.
    ids: Vec<ThreadId>,
    closed: bool,
}

impl Resolver {
    /// Runs `job` on a resolver thread. Gives the job back if the resolver
    /// is shut down (or no thread could start).
    pub(crate) fn submit(&self, job: Job) -> Result<(), Job> {
        let mut state = lock(&self.state);
        if state.closed {
            return Err(job);
        }
        if state.sender.is_none() {
            let (sender, receiver) = channel::<Job>();
            let receiver = Arc::new(Mutex::new(receiver));
            for index in 0..THREADS {
                let receiver = receiver.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("tickless-resolver-{index}"))
                    .spawn(move || run(&receiver));
                if let Ok(handle) = spawned {
                    state.ids.push(handle.thread().id());
                    state.threads.push(handle);
                }
            }
            if state.threads.is_empty() {
                return Err(job);
            }
            state.sender = Some(sender);
        }
        match state.sender.as_ref().map(|s| s.send(job)) {
            Some(Ok(())) => Ok(()),
            Some(Err(returned)) => Err(returned.0),
            None => unreachable!("the sender was just set"),
        }
    }

    /// Whether `thread` is one of the resolver's threads (which `shutdown`
    /// joins: a close called there must not wait for the close under way).
    pub(crate) fn runs_on(&self, thread: ThreadId) -> bool {
        lock(&self.state).ids.contains(&thread)
    }

    /// Stops taking jobs, lets the threads finish the ones queued, and joins them.
    pub(crate) fn shutdown(&self) {
        let threads = {
            let mut state = lock(&self.state);
            state.closed = true;
            state.sender = None;
            std::mem::take(&mut state.threads)
        };
        let me = std::thread::current().id();
        for thread in threads {
            if thread.thread().id() != me {
                let _ = thread.join();
            }
        }
    }
}

fn run(receiver: &Mutex<Receiver<Job>>) {
    loop {
        let job = lock(receiver).recv();
        match job {
            // A panic (the caller's listener is guarded, so none is
            // expected) must not take a resolver thread with it.
            Ok(job) => drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))),
            Err(_) => return,
        }
    }
}
