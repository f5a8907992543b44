//! Event loops driven by a tokio runtime's reactor (`Executor::tokio`):
//! the answers are read on the runtime's workers, a timeout still fires
//! on time while every worker is blocked, blocking callers still get their
//! answers, and the loops' threads take the loops back when the runtime
//! shuts down.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::*;
use tickless::event_loop::Executor;
use tickless::timer::ManualClock;
use tickless::{Client, ClientBuilder, Error, EventListener, RequestInfo};

const CEILING: Duration = Duration::from_secs(10);
const WORKER: &str = "executor-test-worker";

/// The calling thread's name.
fn this_thread() -> String {
    thread::current().name().unwrap_or("unnamed").to_owned()
}

/// The names of the threads each status line was read on.
#[derive(Default)]
struct ReadOn(Mutex<Vec<String>>);

impl EventListener for ReadOn {
    fn on_status(&self, _: &RequestInfo, _: http::StatusCode) {
        let name = this_thread();
        self.0.lock().unwrap().push(name);
    }
}

impl ReadOn {
    fn threads(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

fn runtime(workers: usize) -> tokio::runtime::Runtime {
    runtime_named(workers, WORKER)
}

fn runtime_named(workers: usize, name: &str) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name(name)
        .enable_all()
        .build()
        .unwrap()
}

fn driven_by(runtime: &tokio::runtime::Runtime) -> ClientBuilder {
    Client::builder()
        .event_loops(2)
        .executor(Executor::tokio(runtime.handle().clone()))
}

fn echo_server() -> TestServer {
    TestServer::respond(|request| ok(&request.target))
}

/// An echo server, and a client `runtime` drives (if it can) that notes
/// the threads its answers were read on, with `CEILING` for a request
/// timeout: a request left unanswered fails rather than hangs.
fn watched_client(runtime: &tokio::runtime::Runtime) -> (TestServer, Arc<ReadOn>, Client) {
    let read_on = Arc::new(ReadOn::default());
    let client = driven_by(runtime)
        .listener(read_on.clone())
        .request_timeout(CEILING)
        .build()
        .unwrap();
    (echo_server(), read_on, client)
}

/// The text of `path`, awaited inside `runtime`'s `block_on`.
fn awaited(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    server: &TestServer,
    path: &str,
) -> Result<String, Error> {
    runtime.block_on(async {
        let response = client.get(server.url(path)).send().await?;
        response.text().await
    })
}

#[test]
fn the_answers_of_tasks_are_read_on_the_runtimes_workers() {
    let rt = runtime(2);
    let server = echo_server();
    let read_on = Arc::new(ReadOn::default());
    let client = driven_by(&rt).listener(read_on.clone()).build().unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|task| {
                let (client, server) = (client.clone(), server.addr());
                tokio::spawn(async move {
                    for n in 0..8 {
                        let path = format!("/{task}/{n}");
                        let url = format!("http://{server}{path}");
                        let response = client.get(url).send().await?;
                        assert_eq!(response.status(), 200);
                        assert_eq!(response.text().await?, path);
                    }
                    Ok::<(), Error>(())
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
    });
    let threads = read_on.threads();
    assert_eq!(threads.len(), 16 * 8);
    assert!(
        threads.iter().all(|name| name == WORKER),
        "read elsewhere than on the runtime's workers: {threads:?}"
    );
    assert_settles(&client, CEILING);
    client.close();
}

/// Blocks `rt`'s one worker until the test sends on the first channel
/// returned; the second says `true` once it is blocked, then whether the
/// test (not a 60 s limit) let it go.
fn block_the_worker(rt: &tokio::runtime::Runtime) -> (mpsc::Sender<()>, mpsc::Receiver<bool>) {
    let (release, released) = mpsc::channel::<()>();
    let (blocked, is_blocked) = mpsc::channel::<bool>();
    rt.spawn(async move {
        blocked.send(true).unwrap();
        let by_the_test = released.recv_timeout(Duration::from_secs(60)).is_ok();
        blocked.send(by_the_test).unwrap();
    });
    assert!(is_blocked.recv_timeout(CEILING).unwrap());
    (release, is_blocked)
}

#[test]
fn a_timeout_fires_and_its_connection_closes_while_every_worker_is_blocked() {
    let rt = runtime(1);
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = driven_by(&rt)
        .use_event_loop_timeouts(true)
        .build()
        .unwrap();
    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    let future = client.get(server.url("/")).request_timeout(timeout).send();
    // Sent (so the timeout is on the loop's heap), then the one worker,
    // which alone runs the loops' turns, is blocked until the test lets
    // it go.
    assert!(server.wait_for_requests(1, CEILING));
    let (release, is_blocked) = block_the_worker(&rt);
    let fired = eventually(CEILING, || future.is_done());
    let fired_after = started.elapsed();
    // And its connection closed, by the loop's deadline keeper too.
    let closed = server.wait_for_open(0, CEILING);
    release.send(()).unwrap();
    assert!(fired, "no timeout while the worker was blocked");
    assert!(closed, "the timed-out connection stayed open");
    assert!(fired_after >= timeout, "fired early: {fired_after:?}");
    let error = future.wait().unwrap_err();
    assert!(error.is_timeout(), "{error}");
    assert!(
        is_blocked.recv_timeout(CEILING).unwrap(),
        "the worker was let go before the timeout fired"
    );
    client.close();
}

/// The deadline keeper (a thread of the group's while tokio drives the
/// loops) fires one timeout after another: its precise wait, once it has woken,
/// is armed again for the next deadline — here while the one worker that
/// would run the loop's turns is blocked, so the keeper alone fires them.
#[test]
fn the_keeper_fires_a_second_timeout_after_its_first_while_every_worker_is_blocked() {
    let rt = runtime(1);
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = driven_by(&rt)
        .event_loops(1)
        .use_event_loop_timeouts(true)
        .build()
        .unwrap();
    let (first, second) = (Duration::from_millis(300), Duration::from_millis(600));
    let started = Instant::now();
    let futures =
        [first, second].map(|timeout| client.get(server.url("/")).request_timeout(timeout).send());
    // Both sent (their timeouts on the one loop's heap), then the worker
    // blocked.
    assert!(server.wait_for_requests(2, CEILING));
    let (release, is_blocked) = block_the_worker(&rt);
    let fired = eventually(CEILING, || futures.iter().all(|future| future.is_done()));
    let fired_after = started.elapsed();
    release.send(()).unwrap();
    assert!(fired, "the keeper did not fire both timeouts");
    assert!(fired_after >= second, "fired early: {fired_after:?}");
    for future in futures {
        let error = future.wait().unwrap_err();
        assert!(error.is_timeout(), "{error}");
    }
    assert!(
        is_blocked.recv_timeout(CEILING).unwrap(),
        "the worker was let go before the timeouts fired"
    );
    client.close();
}

#[test]
fn on_a_manual_clock_a_timeout_fires_when_the_clock_passes_it() {
    let rt = runtime(2);
    let server = TestServer::start(Behaviour::NeverAnswer);
    let clock = ManualClock::new();
    let client = driven_by(&rt)
        .clock(Arc::new(clock.clone()))
        .use_event_loop_timeouts(true)
        .build()
        .unwrap();
    let timeout = Duration::from_secs(5);
    let future = client.get(server.url("/")).request_timeout(timeout).send();
    assert!(server.wait_for_requests(1, CEILING));
    clock.advance(timeout - Duration::from_nanos(1));
    // A wrongly fired timeout would show itself within this pause.
    thread::sleep(Duration::from_millis(50));
    assert!(!future.is_done(), "fired before its deadline");
    clock.advance(Duration::from_nanos(1));
    assert!(eventually(CEILING, || future.is_done()), "never fired");
    assert!(future.wait().unwrap_err().is_timeout());
    client.close();
}

#[test]
fn a_blocking_caller_waits_for_answers_a_worker_reads() {
    let rt = runtime(2);
    let server = echo_server();
    let read_on = Arc::new(ReadOn::default());
    let client = driven_by(&rt).listener(read_on.clone()).build().unwrap();
    for n in 0..20 {
        let path = format!("/blocking/{n}");
        let response = client.get(server.url(&path)).send().wait().unwrap();
        assert_eq!(response.text().wait().unwrap(), path);
    }
    assert!(read_on.threads().iter().all(|name| name == WORKER));
    client.close();
}

#[test]
fn the_loops_threads_take_the_loops_back_when_the_runtime_shuts_down() {
    let rt = runtime(2);
    let (server, read_on, client) = watched_client(&rt);
    assert_eq!(
        awaited(&rt, &client, &server, "/before").unwrap(),
        "/before"
    );
    rt.shutdown_timeout(CEILING);
    // The pooled connection too: its loop is its thread's again.
    for n in 0..4 {
        let path = format!("/after/{n}");
        let response = client.get(server.url(&path)).send().wait().unwrap();
        assert_eq!(response.text().wait().unwrap(), path);
    }
    let threads = read_on.threads();
    assert_eq!(threads[0], WORKER);
    assert!(
        threads[1..].iter().all(|name| name != WORKER),
        "read on a worker of a runtime shut down: {threads:?}"
    );
    client.close();
}

#[test]
fn a_manual_clock_advanced_while_the_loops_start_is_no_panic() {
    // A loop hears a manual clock's advances from the moment it is built,
    // before its thread is started: an advance then must not ask for that
    // thread's id.
    let rt = runtime(1);
    let clock = ManualClock::new();
    let stop = Arc::new(AtomicBool::new(false));
    let advancer = thread::spawn({
        let (clock, stop) = (clock.clone(), stop.clone());
        move || {
            while !stop.load(Ordering::SeqCst) {
                clock.advance(Duration::from_nanos(1));
            }
        }
    });
    for _ in 0..100 {
        if advancer.is_finished() {
            break;
        }
        let client = driven_by(&rt)
            .event_loops(4)
            .clock(Arc::new(clock.clone()))
            .build()
            .unwrap();
        client.close();
    }
    stop.store(true, Ordering::SeqCst);
    assert!(
        advancer.join().is_ok(),
        "an advance panicked while a loop started"
    );
}

#[test]
fn a_blocking_caller_on_a_worker_gets_its_answer() {
    // The task posts its request, which wakes the loop's task onto this
    // worker (its next-task slot), then blocks the worker waiting for the
    // answer: the loop's task must run elsewhere meanwhile.
    let rt = runtime(2);
    let server = echo_server();
    let client = driven_by(&rt).request_timeout(CEILING).build().unwrap();
    let started = Instant::now();
    let answers = rt.block_on(async {
        let tasks: Vec<_> = (0..4)
            .map(|task| {
                let (client, url) = (client.clone(), server.url(&format!("/{task}")));
                tokio::spawn(async move {
                    let response = client.get(url).send().wait()?;
                    response.text().wait()
                })
            })
            .collect();
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(task.await.unwrap());
        }
        answers
    });
    for (task, answer) in answers.into_iter().enumerate() {
        assert_eq!(answer.unwrap(), format!("/{task}"));
    }
    assert!(started.elapsed() < CEILING, "answered by the timeout only");
    client.close();
}

#[test]
fn a_current_thread_runtime_leaves_the_loops_to_their_threads() {
    // Its tasks run only inside its `block_on`: had it the loops, a
    // blocking wait with nobody in `block_on`, or one inside it, would be
    // answered by the timeout only.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (server, _, client) = watched_client(&rt);
    let get = |path: &str| -> Result<String, Error> {
        let response = client.get(server.url(path)).send().wait()?;
        response.text().wait()
    };
    assert_eq!(get("/nobody-in-block-on").unwrap(), "/nobody-in-block-on");
    let inside = rt.block_on(async { get("/inside-block-on") });
    assert_eq!(inside.unwrap(), "/inside-block-on");
    assert_eq!(
        awaited(&rt, &client, &server, "/awaited").unwrap(),
        "/awaited"
    );
    client.close();
}

#[test]
fn a_blocking_wait_in_a_current_thread_block_on_with_the_runtime_entered_is_no_panic() {
    // Inside a current-thread runtime's `block_on`, the multi-threaded
    // runtime that drives the loops entered (`Handle::enter`, for code
    // that asks for `Handle::current()`): the current handle is then a
    // multi-threaded one's, but the thread is no worker of it, and tokio's
    // `block_in_place` panics there. The wait must wait as any other
    // thread's does. (Answered after a while: a wait that blocks.)
    let rt = runtime(2);
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = TestServer::echo_slow_after(Duration::from_millis(100));
    let client = driven_by(&rt).request_timeout(CEILING).build().unwrap();
    let started = Instant::now();
    let text = current.block_on(async {
        let _entered = rt.enter();
        let response = client.get(server.url("/slow")).send().wait()?;
        response.text().wait()
    });
    assert_eq!(text.unwrap(), "/slow");
    assert!(started.elapsed() < CEILING, "answered by the timeout only");
    client.close();
}

#[test]
fn a_blocking_wait_in_a_local_sets_future_is_no_panic() {
    // A `LocalSet` run inside the multi-threaded runtime's `block_on` (as
    // in a `#[tokio::main]` that runs `!Send` futures): tokio forbids
    // `block_in_place` while it polls, and the thread is no worker anyway.
    let rt = runtime(1);
    let server = TestServer::echo_slow_after(Duration::from_millis(100));
    let client = driven_by(&rt).request_timeout(CEILING).build().unwrap();
    let started = Instant::now();
    let local = tokio::task::LocalSet::new();
    let text = rt.block_on(local.run_until(async {
        let response = client.get(server.url("/slow")).send().wait()?;
        response.text().wait()
    }));
    assert_eq!(text.unwrap(), "/slow");
    assert!(started.elapsed() < CEILING, "answered by the timeout only");
    client.close();
}

#[test]
fn a_blocking_wait_in_a_local_set_task_of_another_runtime_is_no_panic() {
    // The client on a runtime of its own, the wait in a task spawned on a
    // `LocalSet` that another multi-threaded runtime runs (a
    // `#[tokio::main]` running `!Send` tasks): tokio refuses
    // `block_in_place` there, and no task of the runtime that drives the
    // loops can be waiting on this thread anyway.
    let rt = runtime(1);
    let other = runtime_named(1, "other-runtime");
    let server = TestServer::echo_slow_after(Duration::from_millis(100));
    let client = driven_by(&rt).request_timeout(CEILING).build().unwrap();
    let started = Instant::now();
    let url = server.url("/slow");
    let local = tokio::task::LocalSet::new();
    let text = other.block_on(local.run_until(async move {
        let task =
            tokio::task::spawn_local(async move { client.get(url).send().wait()?.text().wait() });
        task.await
    }));
    assert_eq!(text.expect("the task panicked").unwrap(), "/slow");
    assert!(started.elapsed() < CEILING, "answered by the timeout only");
}

#[test]
fn a_runtime_without_io_leaves_the_loops_to_their_threads() {
    // Its reactor cannot watch a loop's poll: the loop's task fails on its
    // first poll (tokio says why, on standard error), and the loops' threads
    // take the loops back.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(WORKER)
        .build()
        .unwrap();
    let (server, read_on, client) = watched_client(&rt);
    assert_eq!(
        awaited(&rt, &client, &server, "/awaited").unwrap(),
        "/awaited"
    );
    let response = client.get(server.url("/waited")).send().wait().unwrap();
    assert_eq!(response.text().wait().unwrap(), "/waited");
    let threads = read_on.threads();
    assert!(
        threads.iter().all(|name| name != WORKER),
        "read on a worker of a runtime without I/O: {threads:?}"
    );
    client.close();
}

/// A timeout whose expiry takes `SLOW_EXPIRY`, holding the turn state that
/// long: a keeper's batch of them holds it for tens of milliseconds.
struct SlowTimeout(mpsc::Sender<()>);

const SLOW_EXPIRY: Duration = Duration::from_millis(1);

impl tickless::event_loop::LoopTimeout for SlowTimeout {
    fn expire(self: Arc<Self>, _: u64, _: &mut tickless::event_loop::LoopContext<'_>) {
        thread::sleep(SLOW_EXPIRY);
        let _ = self.0.send(());
    }
}

/// CPU time the threads named `name` have had so far (Linux's schedstat).
fn cpu_of_threads_named(name: &str) -> Duration {
    // A thread's `comm` is its name cut to 15 bytes.
    let comm = &name[..name.len().min(15)];
    let mut total = Duration::ZERO;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let path = task.path();
        let named =
            std::fs::read_to_string(path.join("comm")).is_ok_and(|found| found.trim_end() == comm);
        let ran = std::fs::read_to_string(path.join("schedstat")).ok();
        let nanos = ran.and_then(|ran| ran.split_whitespace().next()?.parse::<u64>().ok());
        if let (true, Some(nanos)) = (named, nanos) {
            total += Duration::from_nanos(nanos);
        }
    }
    total
}

/// A worker whose turn finds the turn state held by the keeper waits for
/// it to let go (woken then), rather than yield and look again: spinning,
/// it burnt a third of a core for as long as the keeper's burst lasted
/// (70 ms of 210 here; 0.4 ms waiting).
#[test]
fn a_worker_waits_without_spinning_while_the_keeper_holds_the_loop() {
    const TIMEOUTS: usize = 192;
    // A name of its own: the other tests' workers run beside it.
    const WORKER: &str = "keeper-wait-wkr";
    let rt = runtime_named(1, WORKER);
    let group = tickless::event_loop::EventLoopGroup::builder()
        .threads(1)
        .executor(Executor::tokio(rt.handle().clone()))
        .build()
        .unwrap();
    let event_loop = &group.loops()[0];
    let (expired, expiries) = mpsc::channel();
    let deadline = Instant::now() + Duration::from_millis(100);
    for tag in 0..TIMEOUTS {
        let timeout = Arc::new(SlowTimeout(expired.clone()));
        event_loop.schedule(deadline, timeout, tag as u64).unwrap();
    }
    // The keeper expires them, 64 (64 ms) per hold of the turn state.
    expiries.recv_timeout(CEILING).unwrap();
    let cpu_before = cpu_of_threads_named(WORKER);
    let started = Instant::now();
    // A task for the executor's turn, which finds the state taken.
    let (ran, task_ran) = mpsc::channel();
    event_loop
        .execute(move |_| {
            let _ = ran.send(());
        })
        .unwrap();
    for _ in 1..TIMEOUTS {
        expiries.recv_timeout(CEILING).unwrap();
    }
    task_ran.recv_timeout(CEILING).unwrap();
    let held = started.elapsed();
    let worker_cpu = cpu_of_threads_named(WORKER) - cpu_before;
    group.shutdown();
    assert!(
        worker_cpu < held / 10,
        "the worker spun {worker_cpu:?} of the {held:?} the keeper held the loop"
    );
}

/// `block_on(spawn(wait))` on a runtime of one worker: the task's
/// blocking `wait` is all the worker does until it returns, while the
/// loops' task is woken onto that worker by the request's post.
fn waited_in_a_task(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    url: String,
) -> Result<String, Error> {
    let client = client.clone();
    let task = rt.spawn(async move {
        let response = client.get(url).send().wait()?;
        response.text().wait()
    });
    rt.block_on(task).unwrap()
}

#[test]
fn a_blocking_caller_on_a_worker_gets_its_answer_with_a_hedge_armed() {
    // With a hedge delay armed the wait polls its attempts in turn rather
    // than waiting on one exchange: that wait, too, must let the worker's
    // tasks (the loop's among them) run elsewhere.
    let rt = runtime(1);
    let server = echo_server();
    let client = driven_by(&rt)
        .request_timeout(CEILING)
        .hedge(tickless::hedge::Policy::after(CEILING / 2))
        .build()
        .unwrap();
    assert_eq!(awaited(&rt, &client, &server, "/warm").unwrap(), "/warm");
    for n in 0..4 {
        let path = format!("/hedged/{n}");
        let answer = waited_in_a_task(&rt, &client, server.url(&path));
        assert_eq!(answer.unwrap(), path, "answered by the timeout only");
    }
    client.close();
}

/// A request with a timeout, sent on the open and free connection a first
/// request (awaited on `rt`) left to `client` for `url`'s origin,
/// while `rt`'s one worker is blocked: it is a task for the loop's turn,
/// which that worker would run — the loop's deadline keeper must keep its
/// deadline all the same; the next request is answered.
fn times_out_on_an_open_connection_while_every_worker_is_blocked(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    url: impl Fn(&str) -> String,
) {
    let answered = |path: &str| {
        let response = rt.block_on(client.get(url(path)).send()).unwrap();
        assert_eq!(response.status(), 200);
        rt.block_on(response.bytes()).unwrap();
    };
    answered("/warm");
    let (release, is_blocked) = block_the_worker(rt);
    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    let future = client.get(url("/")).request_timeout(timeout).send();
    let fired = eventually(CEILING, || future.is_done());
    let fired_after = started.elapsed();
    release.send(()).unwrap();
    assert!(fired, "no timeout while the worker was blocked");
    assert!(fired_after >= timeout, "fired early: {fired_after:?}");
    let error = future.wait().unwrap_err();
    assert!(error.is_timeout(), "{error}");
    assert!(
        is_blocked.recv_timeout(CEILING).unwrap(),
        "the worker was let go before the timeout fired"
    );
    // And the connection serves the next request.
    answered("/next");
}

#[test]
fn a_request_on_a_pooled_connection_times_out_while_every_worker_is_blocked() {
    let rt = runtime(1);
    let server = echo_server();
    let client = driven_by(&rt)
        .use_event_loop_timeouts(true)
        .build()
        .unwrap();
    times_out_on_an_open_connection_while_every_worker_is_blocked(&rt, &client, |path| {
        server.url(path)
    });
    client.close();
}

#[test]
fn a_request_on_a_shared_http2_connection_times_out_while_every_worker_is_blocked() {
    let rt = runtime(1);
    let server =
        support::h2_server::H2Server::start(|stream| support::h2_server::answer(stream, 200, b""));
    let client = driven_by(&rt)
        .use_event_loop_timeouts(true)
        .http2_prior_knowledge()
        .build()
        .unwrap();
    times_out_on_an_open_connection_while_every_worker_is_blocked(&rt, &client, |path| {
        server.url(path)
    });
    client.close();
}

/// Tells, for each timeout, the loop it was armed on (its tag), when it
/// expired and on which thread.
struct Told(mpsc::Sender<(u64, Instant, String)>);

impl tickless::event_loop::LoopTimeout for Told {
    fn expire(self: Arc<Self>, tag: u64, _: &mut tickless::event_loop::LoopContext<'_>) {
        let thread = this_thread();
        let _ = self.0.send((tag, Instant::now(), thread));
    }
}

/// The names of this process's threads (cut to 15 bytes) that start with
/// `prefix`.
fn threads_named(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|comm| comm.trim_end().to_owned())
        .filter(|comm| comm.starts_with(prefix))
        .collect()
}

fn cpus() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

/// A group of `loops` loops `rt` drives, its threads named `name`, left
/// alive for the test's whole run: a failed check then fails the test,
/// rather than hang it in the group's drop, which joins the loops.
fn leaked_group(
    rt: &tokio::runtime::Runtime,
    loops: usize,
    name: &str,
) -> &'static tickless::event_loop::EventLoopGroup {
    let group = tickless::event_loop::EventLoopGroup::builder()
        .threads(loops)
        .thread_name(name)
        .executor(Executor::tokio(rt.handle().clone()))
        .build()
        .unwrap();
    Box::leak(Box::new(group))
}

/// Runs `shutdown` on a thread of its own, and fails if it has not
/// returned within `CEILING`.
fn returns_in_time(what: &str, shutdown: impl FnOnce() + Send + 'static) {
    let (done, returned) = mpsc::channel();
    thread::spawn(move || {
        shutdown();
        let _ = done.send(());
    });
    if returned.recv_timeout(CEILING).is_err() {
        panic!("{what} never returned");
    }
}

/// More loops than CPUs: their deadlines are kept by a keeper a CPU, each
/// keeping several loops — every loop's timeout fires, none early, while
/// the one worker that would run the loops' turns is blocked.
#[test]
fn a_keeper_a_cpu_fires_the_timeouts_of_more_loops_than_cpus_while_every_worker_is_blocked() {
    let rt = runtime(1);
    let loops = cpus() * 2 + 1;
    let group = leaked_group(&rt, loops, "kpr-many");
    // A thread names itself once it runs: the keepers may not have yet.
    let keepers = cpus().min(loops);
    assert!(
        eventually(CEILING, || threads_named("kpr-many-keeper").len()
            == keepers),
        "keepers: {:?}",
        threads_named("kpr-many-keeper")
    );
    let (release, is_blocked) = block_the_worker(&rt);
    let (told, expiries) = mpsc::channel();
    let deadline = Instant::now() + Duration::from_millis(200);
    for (index, event_loop) in group.loops().iter().enumerate() {
        let timeout = Arc::new(Told(told.clone()));
        event_loop
            .schedule(deadline, timeout, index as u64)
            .unwrap();
    }
    let mut fired: Vec<(u64, Instant, String)> = (0..loops)
        .map(|_| {
            expiries
                .recv_timeout(CEILING)
                .expect("a loop's timeout never fired")
        })
        .collect();
    release.send(()).unwrap();
    fired.sort_by_key(|(index, _, _)| *index);
    assert!(fired.iter().map(|(index, _, _)| *index).eq(0..loops as u64));
    for (index, at, thread) in &fired {
        assert!(*at >= deadline, "loop {index}'s timeout fired early");
        assert!(
            thread.starts_with("kpr-many-keeper"),
            "loop {index}'s on {thread}"
        );
    }
    assert!(
        is_blocked.recv_timeout(CEILING).unwrap(),
        "the worker was let go before the timeouts fired"
    );
    returns_in_time("the group's shutdown", || group.shutdown());
    assert!(
        eventually(CEILING, || threads_named("kpr-many").is_empty()),
        "threads left after the shutdown: {:?}",
        threads_named("kpr-many")
    );
}

/// A loop shut down alone is let go by its keeper (its thread ends it,
/// and the shutdown returns), and that keeper goes on keeping the other
/// loops it keeps.
#[test]
fn a_loop_shut_down_alone_ends_and_its_keeper_keeps_the_others() {
    let rt = runtime(1);
    let group = leaked_group(&rt, cpus() * 2, "kpr-alone");
    returns_in_time("the first loop's shutdown", || group.loops()[0].shutdown());
    assert!(group.loops()[0].is_shutting_down());
    // Loop `cpus()` has the first loop's keeper (a keeper keeps every
    // loop whose index is its own modulo their number).
    let (release, is_blocked) = block_the_worker(&rt);
    let (told, expiries) = mpsc::channel();
    let deadline = Instant::now() + Duration::from_millis(100);
    let timeout = Arc::new(Told(told));
    group.loops()[cpus()]
        .schedule(deadline, timeout, 0)
        .unwrap();
    let fired = expiries.recv_timeout(CEILING);
    release.send(()).unwrap();
    let (_, at, thread) =
        fired.expect("the keeper stopped keeping the loop beside the one shut down");
    assert!(at >= deadline, "fired early");
    assert!(thread.starts_with("kpr-alone-keeper"), "fired on {thread}");
    assert!(is_blocked.recv_timeout(CEILING).unwrap());
    returns_in_time("the group's shutdown", || group.shutdown());
}

/// With more loops than CPUs too, every loop's thread takes its loop back
/// when the runtime shuts down: requests on every loop are answered after.
#[test]
fn more_loops_than_cpus_are_taken_back_by_their_threads_when_the_runtime_shuts_down() {
    let rt = runtime(2);
    let loops = cpus() * 2 + 1;
    let server = echo_server();
    let read_on = Arc::new(ReadOn::default());
    let client = driven_by(&rt)
        .event_loops(loops)
        .listener(read_on.clone())
        .request_timeout(CEILING)
        .build()
        .unwrap();
    assert_eq!(
        awaited(&rt, &client, &server, "/before").unwrap(),
        "/before"
    );
    rt.shutdown_timeout(CEILING);
    // A connection on every loop, each from a thread of its own (a
    // blocking thread's connections share a loop).
    let threads: Vec<_> = (0..loops * 2)
        .map(|n| {
            let (client, url) = (client.clone(), server.url(&format!("/after/{n}")));
            thread::spawn(move || client.get(url).send().wait().and_then(|r| r.text().wait()))
        })
        .collect();
    for (n, thread) in threads.into_iter().enumerate() {
        assert_eq!(thread.join().unwrap().unwrap(), format!("/after/{n}"));
    }
    let read = read_on.threads();
    assert!(
        read[1..].iter().all(|name| name != WORKER),
        "read on a worker of a runtime shut down: {read:?}"
    );
    client.close();
}

/// Shuts down, when it expires, a loop of the group other than its own,
/// then tells that the shutdown returned.
struct ShutsDown {
    group: &'static tickless::event_loop::EventLoopGroup,
    other: usize,
    returned: mpsc::Sender<String>,
}

impl tickless::event_loop::LoopTimeout for ShutsDown {
    fn expire(self: Arc<Self>, _: u64, _: &mut tickless::event_loop::LoopContext<'_>) {
        self.group.loops()[self.other].shutdown();
        let thread = this_thread();
        let _ = self.returned.send(thread);
    }
}

/// A timeout expired by a keeper (a listener there, say, that closes its
/// client) shuts down another loop that keeper keeps: the shutdown
/// returns — that loop's thread, which takes it only once its keeper lets
/// it go, is not joined from the keeper — and the loop ends once the
/// expiry is over, as the loop of the timeout would.
#[test]
fn a_loop_shut_down_from_its_own_keeper_ends_and_the_shutdown_returns() {
    let rt = runtime(1);
    let group = leaked_group(&rt, cpus() * 2, "kpr-self");
    // Loop `cpus()` has the first loop's keeper.
    let other = cpus();
    let (returned, shut_down) = mpsc::channel();
    let timeout = Arc::new(ShutsDown {
        group,
        other,
        returned,
    });
    group.loops()[0]
        .schedule(Instant::now() + Duration::from_millis(50), timeout, 0)
        .unwrap();
    let thread = shut_down
        .recv_timeout(CEILING)
        .expect("the shutdown from the loop's own keeper never returned");
    assert!(thread.starts_with("kpr-self-keeper"), "expired on {thread}");
    assert!(group.loops()[other].is_shutting_down());
    // Its thread has ended it: a second shutdown joins it.
    returns_in_time("the loop's second shutdown", move || {
        group.loops()[other].shutdown()
    });
    returns_in_time("the group's shutdown", || group.shutdown());
}

/// Closes its client when a request fails, then tells on which thread,
/// once the close has returned.
struct ClosesOnFailure {
    client: Mutex<Option<Client>>,
    closed: mpsc::Sender<String>,
}

impl EventListener for ClosesOnFailure {
    fn on_failed(&self, _: &RequestInfo, _: &Error) {
        let Some(client) = self.client.lock().unwrap().take() else {
            return;
        };
        client.close();
        let thread = this_thread();
        let _ = self.closed.send(thread);
    }
}

/// A listener told of a timeout on a deadline keeper closes its client,
/// whose loops include others that keeper keeps: the close returns, and
/// every loop's thread ends.
#[test]
fn a_listener_on_a_keeper_closes_its_client_with_several_loops_a_keeper() {
    let rt = runtime(1);
    let server = TestServer::start(Behaviour::NeverAnswer);
    let (closed, has_closed) = mpsc::channel();
    let listener = Arc::new(ClosesOnFailure {
        client: Mutex::new(None),
        closed,
    });
    let group = tickless::event_loop::EventLoopGroup::builder()
        .threads(cpus() * 2)
        .thread_name("kpr-close")
        .executor(Executor::tokio(rt.handle().clone()))
        .build()
        .unwrap();
    let client = driven_by(&rt)
        .event_loop_group(Arc::new(group))
        .use_event_loop_timeouts(true)
        .listener(listener.clone())
        .build()
        .unwrap();
    *listener.client.lock().unwrap() = Some(client.clone());
    let future = client
        .get(server.url("/"))
        .request_timeout(Duration::from_millis(100))
        .send();
    let thread = has_closed
        .recv_timeout(CEILING)
        .expect("the close from the keeper's listener never returned");
    assert!(thread.starts_with("kpr-close-keeper"), "told on {thread}");
    assert!(future.wait().unwrap_err().is_timeout());
    assert!(
        eventually(CEILING, || threads_named("kpr-close").is_empty()),
        "threads left after the close: {:?}",
        threads_named("kpr-close")
    );
    // The close is over: a later one returns at once.
    client.close();
}

/// When the first request fails, sends `requests` more from there, one at
/// a time, each waited for (a blocking wait), and tells what each ended
/// with.
struct RequestsOnFailure {
    client: Mutex<Option<Client>>,
    url: String,
    requests: usize,
    ended: mpsc::Sender<(String, Result<String, Error>)>,
}

impl EventListener for RequestsOnFailure {
    fn on_failed(&self, _: &RequestInfo, _: &Error) {
        let Some(client) = self.client.lock().unwrap().take() else {
            return;
        };
        let thread = this_thread();
        for _ in 0..self.requests {
            let ended = client
                .get(&self.url)
                .request_timeout(Duration::from_millis(100))
                .send()
                .wait()
                .and_then(|response| response.text().wait());
            let _ = self.ended.send((thread.clone(), ended));
        }
    }
}

/// A listener told of a timeout on a deadline keeper sends requests and
/// waits for each: their connections go on loops whose deadlines another
/// keeper keeps — this one, waiting, expires nothing — so each request's
/// timeout fires. With one CPU there is no other keeper: each wait is
/// refused, rather than never end.
#[test]
fn a_listener_on_a_keeper_that_waits_for_its_requests_gets_their_timeouts() {
    let rt = runtime(2);
    let server = TestServer::start(Behaviour::NeverAnswer);
    let loops = cpus() * 2;
    let (ended, has_ended) = mpsc::channel();
    let listener = Arc::new(RequestsOnFailure {
        client: Mutex::new(None),
        url: server.url("/again"),
        requests: loops,
        ended,
    });
    let client = driven_by(&rt)
        .event_loops(loops)
        .use_event_loop_timeouts(true)
        .listener(listener.clone())
        .build()
        .unwrap();
    *listener.client.lock().unwrap() = Some(client.clone());
    let first = client
        .get(server.url("/"))
        .request_timeout(Duration::from_millis(100))
        .send();
    for n in 0..loops {
        let (thread, ended) = has_ended
            .recv_timeout(CEILING)
            .unwrap_or_else(|_| panic!("request {n} from the listener never ended"));
        assert!(
            thread.starts_with("tickless-loop-keeper"),
            "told on {thread}"
        );
        let error = ended.expect_err("answered by a server that never answers");
        match cpus() {
            1 => assert!(
                matches!(error, Error::WouldDeadlock),
                "request {n}: {error}"
            ),
            _ => assert!(error.is_timeout(), "request {n}: {error}"),
        }
    }
    assert!(first.wait().unwrap_err().is_timeout());
    client.close();
}

/// A keeper asleep for one loop's far deadline is woken by a nearer one
/// armed on another loop it keeps, and fires it — before the far one,
/// while the one worker that would run the loops' turns is blocked.
#[test]
fn a_keeper_waiting_for_one_loops_deadline_fires_a_nearer_one_armed_on_another() {
    let rt = runtime(1);
    let group = leaked_group(&rt, cpus() * 2, "kpr-near");
    let (release, is_blocked) = block_the_worker(&rt);
    let (told, expiries) = mpsc::channel();
    let far = Instant::now() + Duration::from_secs(600);
    let far_key = group.loops()[0]
        .schedule(far, Arc::new(Told(told.clone())), 0)
        .unwrap();
    // The keeper has gone back to sleep, for the far deadline.
    thread::sleep(Duration::from_millis(50));
    // Loop `cpus()` has the first loop's keeper.
    let near = Instant::now() + Duration::from_millis(100);
    group.loops()[cpus()]
        .schedule(near, Arc::new(Told(told)), 1)
        .unwrap();
    let fired = expiries.recv_timeout(CEILING);
    release.send(()).unwrap();
    let (tag, at, thread) = fired.expect("the nearer deadline never fired");
    assert_eq!(tag, 1, "the far deadline fired first");
    assert!(at >= near, "fired early");
    assert!(thread.starts_with("kpr-near-keeper"), "fired on {thread}");
    assert!(is_blocked.recv_timeout(CEILING).unwrap());
    assert!(group.loops()[0].cancel(far_key));
    returns_in_time("the group's shutdown", || group.shutdown());
}
