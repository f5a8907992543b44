//! The default [`Resolve`]: `getaddrinfo`, which blocks, on a bounded pool
//! of threads of its own, started on first use.
//!
//! # How slow names are kept from holding up the others
//!
//! * **One lookup per name.** Lookups of a name already being resolved join
//!   it and get its answer (with their own port): a name that takes 30 s
//!   holds one thread however many requests wait for it.
//! * **A thread per name being resolved, up to [`MAX_THREADS`].** A lookup
//!   of a new name starts a thread when every thread is in a lookup, so a slow name never
//!   queues a fast one behind it until [`MAX_THREADS`] different names are
//!   being resolved at once; then new names wait for the first thread free.
//!   Threads are kept once started (idle ones wait for the next name).
//!
//! # Shutdown does not wait for `getaddrinfo`
//!
//! A lookup cannot be interrupted, and one stuck on a DNS server that does
//! not answer takes the system resolver's whole timeout (glibc's default:
//! 5 s per try and server). So shutdown fails every lookup not answered yet, joins the
//! threads that are not in a lookup (they end at once), and lets go of
//! those that are: each ends by itself when its `getaddrinfo` returns,
//! answering no one. Closing a client is then prompt whatever DNS does.
//!
//! Eight threads: a client talks to few distinct hosts at once, a lookup
//! usually takes milliseconds, and eight names that each stall for seconds
//! are a broken resolver configuration, not load; a thread costs a stack
//! reservation, not memory used.

use super::with_port;
use crate::event_loop::without_pinning;
use crate::net::{Lookup, Resolve, ResolveAnswer};
use crate::sync::lock;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{JoinHandle, ThreadId};

/// Most names resolved at once.
pub(crate) const MAX_THREADS: usize = 8;

/// The system's resolver: `getaddrinfo` through `ToSocketAddrs` — but for
/// a localhost name ([`is_localhost`]), whatever the hosts file says.
fn getaddrinfo(host: &str) -> io::Result<Vec<SocketAddr>> {
    if is_localhost(host) {
        return Ok(LOCALHOST.to_vec());
    }
    Ok((host, 0).to_socket_addrs()?.collect())
}

/// The loopback addresses a localhost name resolves to, IPv4's first (the
/// one most servers listen on; one listening on the other alone is
/// reached a refused connect later, at once).
const LOCALHOST: [SocketAddr; 2] = [
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
    SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 0),
];

/// Whether `host` (lowercase, as lookups are keyed) is `localhost` or a
/// name under it, with or without the final dot: loopback, whatever DNS
/// or the hosts file would answer (RFC 6761 §6.3, as curl and browsers
/// resolve it) — so a server listening on `::1` alone is reached by
/// `localhost` on a system whose hosts file names only `127.0.0.1` for it.
fn is_localhost(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    host == "localhost" || host.ends_with(".localhost")
}

/// See the [module documentation](self).
pub(crate) struct ThreadedResolver {
    shared: Arc<Shared>,
}

struct Shared {
    lookup: Box<Lookup>,
    state: Mutex<State>,
    work: Condvar,
}

#[derive(Default)]
struct State {
    /// Names waiting for a thread, oldest first.
    queue: VecDeque<String>,
    /// The lookups waiting for each name queued or being resolved, with
    /// their ports.
    waiting: HashMap<String, Vec<(u16, ResolveAnswer)>>,
    threads: Vec<JoinHandle<()>>,
    /// The ids of every thread started, kept after `shutdown` takes
    /// `threads` to join them.
    ids: Vec<ThreadId>,
    /// The threads inside a lookup. A thread that has its answer is not
    /// busy any more, even while it is still handing the answer out: it
    /// takes the next name right after.
    busy: Vec<ThreadId>,
    closed: bool,
}

impl Default for ThreadedResolver {
    fn default() -> Self {
        ThreadedResolver::with_lookup(Box::new(getaddrinfo))
    }
}

impl ThreadedResolver {
    /// A resolver doing its lookups with `lookup` (tests give a double).
    pub(crate) fn with_lookup(lookup: Box<Lookup>) -> Self {
        ThreadedResolver {
            shared: Arc::new(Shared {
                lookup,
                state: Mutex::default(),
                work: Condvar::new(),
            }),
        }
    }

    /// Whether `thread` is one of the resolver's threads (which `shutdown`
    /// joins: a close called there must not wait for the close under way).
    pub(crate) fn runs_on(&self, thread: ThreadId) -> bool {
        lock(&self.shared.state).ids.contains(&thread)
    }

    /// Stops taking lookups, fails every lookup not answered yet, and
    /// joins the threads not inside a lookup; those inside one end when it
    /// returns (see the [module documentation](self)).
    pub(crate) fn shutdown(&self) {
        let (threads, dropped) = {
            let mut state = lock(&self.shared.state);
            state.closed = true;
            state.queue.clear();
            let queued: Vec<_> = state.waiting.drain().collect();
            // Decided under the lock: a thread not busy now takes no
            // other name, and sees `closed` as soon as it looks. A busy
            // one's handle is dropped: it is let go.
            let joinable: Vec<_> = std::mem::take(&mut state.threads)
                .into_iter()
                .filter(|t| !state.busy.contains(&t.thread().id()))
                .collect();
            (joinable, queued)
        };
        self.shared.work.notify_all();
        // Their answers fail as they drop, outside the lock.
        drop(dropped);
        let me = std::thread::current().id();
        for thread in threads {
            if thread.thread().id() != me {
                let _ = thread.join();
            }
        }
    }
}

impl Resolve for ThreadedResolver {
    fn resolve(&self, host: &str, port: u16, answer: ResolveAnswer) {
        let mut state = lock(&self.shared.state);
        if state.closed {
            drop(state);
            return answer.failed(io::Error::other("the client is closed"));
        }
        let host = host.to_ascii_lowercase();
        if let Some(joined) = state.waiting.get_mut(&host) {
            joined.push((port, answer));
            return;
        }
        state.waiting.insert(host.clone(), vec![(port, answer)]);
        state.queue.push_back(host);
        let free = state.threads.len() - state.busy.len();
        if state.queue.len() > free && state.threads.len() < MAX_THREADS {
            let shared = self.shared.clone();
            let builder = std::thread::Builder::new()
                .name(format!("tickless-resolver-{}", state.threads.len()));
            let spawned = without_pinning(|| builder.spawn(move || shared.run()));
            if let Ok(handle) = spawned {
                state.ids.push(handle.thread().id());
                state.threads.push(handle);
            }
        }
        if state.threads.is_empty() {
            // No thread could start: fail what waits, outside the lock.
            let failed = std::mem::take(&mut state.waiting);
            state.queue.clear();
            drop(state);
            drop(failed);
            return;
        }
        drop(state);
        self.shared.work.notify_one();
    }
}

impl Shared {
    /// A resolver thread: takes the oldest name waiting, resolves it, and
    /// answers every lookup that joined it — until shutdown.
    fn run(&self) {
        let me = std::thread::current().id();
        loop {
            let host = {
                let mut state = lock(&self.state);
                loop {
                    if state.closed {
                        return;
                    }
                    if let Some(host) = state.queue.pop_front() {
                        state.busy.push(me);
                        break host;
                    }
                    state = self
                        .work
                        .wait(state)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            };
            let lookup =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.lookup)(&host)));
            let result = lookup.unwrap_or_else(|_| Err(io::Error::other("the lookup panicked")));
            let answers = {
                let mut state = lock(&self.state);
                state.busy.retain(|&thread| thread != me);
                state.waiting.remove(&host).unwrap_or_default()
            };
            // Outside the lock: an answer runs the client's code (and the
            // caller's listener), which may resolve again.
            for (port, answer) in answers {
                match &result {
                    Ok(addrs) => answer.addresses(addrs.iter().map(|a| with_port(*a, port))),
                    Err(error) => answer.failed(io::Error::new(error.kind(), error.to_string())),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn localhost_names_are_the_loopback_addresses_whatever_the_hosts_file() {
        for name in ["localhost", "localhost.", "app.localhost", "a.b.localhost."] {
            assert_eq!(getaddrinfo(name).unwrap(), LOCALHOST, "{name}");
        }
        for name in ["localhost.test", "notlocalhost", "localhostx", "local"] {
            assert!(!is_localhost(name), "{name}");
        }
    }

    /// A lookup double: names starting with `slow` block until released;
    /// every other name resolves at once to 127.0.0.1. Counts its calls.
    struct Double {
        released: Mutex<bool>,
        release: Condvar,
        calls: AtomicUsize,
    }

    impl Double {
        fn new() -> Arc<Double> {
            Arc::new(Double {
                released: Mutex::new(false),
                release: Condvar::new(),
                calls: AtomicUsize::new(0),
            })
        }

        fn lookup(self: &Arc<Self>) -> Box<Lookup> {
            let me = self.clone();
            Box::new(move |host| {
                me.calls.fetch_add(1, Ordering::SeqCst);
                if host.starts_with("slow") {
                    let mut released = lock(&me.released);
                    while !*released {
                        released = me.release.wait(released).unwrap();
                    }
                }
                Ok(vec![SocketAddr::from(([127, 0, 0, 1], 0))])
            })
        }

        fn release(&self) {
            *lock(&self.released) = true;
            self.release.notify_all();
        }
    }

    type Answers = mpsc::Receiver<(String, io::Result<Vec<SocketAddr>>)>;

    fn ask(resolver: &ThreadedResolver, host: &str, port: u16) -> Answers {
        let (send, answers) = mpsc::channel();
        let name = host.to_owned();
        resolver.resolve(
            host,
            port,
            ResolveAnswer::new(move |result| {
                let _ = send.send((name, result));
            }),
        );
        answers
    }

    const PROMPTLY: Duration = Duration::from_secs(10);

    #[test]
    fn many_lookups_of_a_slow_name_hold_one_thread_and_no_other_name() {
        let double = Double::new();
        let resolver = ThreadedResolver::with_lookup(double.lookup());
        let slow: Vec<Answers> = (0..50).map(|i| ask(&resolver, "slow.example", i)).collect();
        // Far more lookups than threads wait for the slow name: another
        // name is still answered at once.
        for i in 0..20 {
            let (_, fast) = ask(&resolver, "fast.example", 8000 + i)
                .recv_timeout(PROMPTLY)
                .expect("a fast name is not held up by a slow one");
            assert_eq!(
                fast.unwrap(),
                vec![SocketAddr::from(([127, 0, 0, 1], 8000 + i))]
            );
        }
        assert!(
            slow[0].try_recv().is_err(),
            "the slow name is still resolving"
        );
        double.release();
        for (port, answers) in slow.iter().enumerate() {
            let (host, result) = answers.recv_timeout(PROMPTLY).unwrap();
            assert_eq!(host, "slow.example");
            assert_eq!(
                result.unwrap()[0].port(),
                port as u16,
                "each with its own port"
            );
        }
        // The 50 lookups of the slow name were one call.
        assert_eq!(double.calls.load(Ordering::SeqCst), 1 + 20);
        assert!(lock(&resolver.shared.state).threads.len() <= 2);
        resolver.shutdown();
    }

    #[test]
    fn an_answer_keeps_the_scope_id_of_a_link_local_address() {
        let link_local = |port| {
            SocketAddr::V6(std::net::SocketAddrV6::new(
                "fe80::1".parse().unwrap(),
                port,
                0,
                7,
            ))
        };
        let resolver = ThreadedResolver::with_lookup(Box::new(move |_| Ok(vec![link_local(0)])));
        let (_, addrs) = ask(&resolver, "printer.local", 631)
            .recv_timeout(PROMPTLY)
            .unwrap();
        assert_eq!(addrs.unwrap(), vec![link_local(631)]);
        resolver.shutdown();
    }

    #[test]
    fn the_pool_is_bounded_and_new_names_wait_for_a_free_thread() {
        let double = Double::new();
        let resolver = ThreadedResolver::with_lookup(double.lookup());
        let slow: Vec<Answers> = (0..MAX_THREADS)
            .map(|i| ask(&resolver, &format!("slow-{i}.example"), 80))
            .collect();
        let fast = ask(&resolver, "fast.example", 80);
        // Every thread is in a slow lookup: the new name waits its turn.
        assert!(fast.recv_timeout(Duration::from_millis(200)).is_err());
        assert_eq!(lock(&resolver.shared.state).threads.len(), MAX_THREADS);
        double.release();
        assert!(fast.recv_timeout(PROMPTLY).unwrap().1.is_ok());
        for answers in slow {
            assert!(answers.recv_timeout(PROMPTLY).unwrap().1.is_ok());
        }
        resolver.shutdown();
    }

    #[test]
    fn shutdown_does_not_wait_for_a_lookup_stuck_in_the_system() {
        let double = Double::new();
        let resolver = ThreadedResolver::with_lookup(double.lookup());
        let stuck = ask(&resolver, "slow.example", 80);
        let fast = ask(&resolver, "fast.example", 80);
        assert!(fast.recv_timeout(PROMPTLY).unwrap().1.is_ok());
        let in_lookup = || lock(&resolver.shared.state).busy.len() == 1;
        let deadline = std::time::Instant::now() + PROMPTLY;
        while !in_lookup() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(in_lookup(), "the slow lookup has begun");
        // The system's timeout, as it were: the lookup returns after 3 s
        // unless let go sooner.
        let (let_go, system_timeout) = mpsc::channel::<()>();
        let timeout = {
            let double = double.clone();
            std::thread::spawn(move || {
                let _ = system_timeout.recv_timeout(Duration::from_secs(3));
                double.release();
            })
        };
        let started = std::time::Instant::now();
        resolver.shutdown();
        let took = started.elapsed();
        // The lookup was still stuck: shutdown did not wait for it (a
        // generous bound, well under the 3 s).
        assert!(took < Duration::from_secs(1), "{took:?}");
        assert!(stuck.try_recv().unwrap().1.is_err(), "failed at shutdown");
        // Let go, the stuck thread ends by itself, answering no one.
        let _ = let_go.send(());
        timeout.join().unwrap();
        let deadline = std::time::Instant::now() + PROMPTLY;
        while !lock(&resolver.shared.state).busy.is_empty() {
            assert!(std::time::Instant::now() < deadline, "the thread ends");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(stuck.try_recv().is_err(), "answered once");
    }

    #[test]
    fn shutdown_fails_every_lookup_unanswered_and_later_ones() {
        let double = Double::new();
        let resolver = ThreadedResolver::with_lookup(double.lookup());
        let slow: Vec<Answers> = (0..MAX_THREADS)
            .map(|i| ask(&resolver, &format!("slow-{i}.example"), 80))
            .collect();
        let queued = ask(&resolver, "queued.example", 80);
        // Lets the threads out of their lookups once shutdown has begun:
        // once the resolver is closed, not after a fixed time (a caller
        // stalled that long before its shutdown would see the lookups
        // answered).
        let releaser = {
            let (double, shared) = (double.clone(), resolver.shared.clone());
            std::thread::spawn(move || {
                while !lock(&shared.state).closed {
                    std::thread::sleep(Duration::from_millis(1));
                }
                double.release();
            })
        };
        resolver.shutdown();
        releaser.join().unwrap();
        assert!(queued.recv_timeout(PROMPTLY).unwrap().1.is_err());
        assert!(ask(&resolver, "late.example", 80)
            .recv_timeout(PROMPTLY)
            .unwrap()
            .1
            .is_err());
        for answers in slow {
            assert!(answers.recv_timeout(PROMPTLY).unwrap().1.is_err());
        }
    }
}
