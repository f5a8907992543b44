//! A caller driving its loop (see `EventLoop`, "Who drives a loop"), from
//! the client's side, with loops whose grace is a minute: what must not
//! wait for an idle loop's grace finishes in seconds here, or the test
//! says so. (The review that found these defects had them wait exactly
//! the grace.)

use crate::event_loop::EventLoopGroup;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

const GRACE: Duration = Duration::from_secs(60);
const WITHIN: Duration = Duration::from_secs(10);

/// What a test server answers to a request for a path on its connection.
type Answer = Arc<dyn Fn(&str) -> Vec<u8> + Send + Sync>;

/// In an answer: the server writes what comes before, then waits
/// [`PAUSED`] before it writes the rest.
const PAUSE: &[u8] = b"<pause>";
const PAUSED: Duration = Duration::from_millis(600);

/// A keep-alive HTTP/1.1 server, a thread per connection: the connection
/// of each request, in order, and every stream, to shut one down.
struct Server {
    addr: SocketAddr,
    served: Arc<Mutex<Vec<usize>>>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    /// The connection and path of each request, in order.
    paths: Arc<Mutex<Vec<(usize, String)>>>,
}

fn server(answer: Answer) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let served = Arc::new(Mutex::new(Vec::new()));
    let streams = Arc::new(Mutex::new(Vec::new()));
    let paths = Arc::new(Mutex::new(Vec::new()));
    let (all_served, all_streams, all_paths) = (served.clone(), streams.clone(), paths.clone());
    thread::spawn(move || {
        for (index, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { return };
            all_streams
                .lock()
                .unwrap()
                .push(stream.try_clone().unwrap());
            let (served, answer, paths) = (all_served.clone(), answer.clone(), all_paths.clone());
            thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let end = loop {
                        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break at + 4;
                        }
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end);
                    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
                    served.lock().unwrap().push(index);
                    paths.lock().unwrap().push((index, path.clone()));
                    let answer = answer(&path);
                    // Written up to a pause, then the rest a while later.
                    let (now, later) = match answer.windows(PAUSE.len()).position(|w| w == PAUSE) {
                        Some(at) => (&answer[..at], Some(&answer[at + PAUSE.len()..])),
                        None => (&answer[..], None),
                    };
                    if stream.write_all(now).is_err() {
                        return;
                    }
                    if let Some(later) = later {
                        thread::sleep(PAUSED);
                        if stream.write_all(later).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    Server {
        addr,
        served,
        streams,
        paths,
    }
}

impl Server {
    /// Waits (at most [`WITHIN`]) until a request for `path` has come.
    fn wait_for(&self, path: &str) {
        let give_up = Instant::now() + WITHIN;
        while !self.paths.lock().unwrap().iter().any(|(_, p)| p == path) {
            assert!(Instant::now() < give_up, "no request for {path}");
            thread::sleep(Duration::from_millis(1));
        }
    }
}

fn ok() -> Answer {
    Arc::new(|_| b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec())
}

/// As [`ok`], but a request for `/both` is answered only once a second one
/// has come, so two of them are on two connections at once whatever the
/// threads' timing.
fn ok_once_both_came() -> Answer {
    let both = Arc::new(std::sync::Barrier::new(2));
    let ok = ok();
    Arc::new(move |path| {
        if path == "/both" {
            both.wait();
        }
        ok(path)
    })
}

fn client(loops: usize, grace: Duration) -> (crate::Client, Arc<EventLoopGroup>) {
    let group = Arc::new(
        EventLoopGroup::builder()
            .threads(loops)
            .idle_grace(grace)
            .build()
            .unwrap(),
    );
    let client = crate::Client::builder()
        .event_loop_group(group.clone())
        .build()
        .unwrap();
    (client, group)
}

fn get(client: &crate::Client, url: &str) {
    let response = client.get(url).send().wait().unwrap();
    assert_eq!(&response.bytes().wait().unwrap()[..], b"ok");
}

/// [`get`] on a thread of its own.
fn get_on_a_thread(client: &Arc<crate::Client>, url: String) -> thread::JoinHandle<()> {
    let client = client.clone();
    thread::spawn(move || get(&client, &url))
}

/// Runs `f` on a thread; panics if it has not returned within [`WITHIN`].
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, told) = std::sync::mpsc::channel();
    thread::spawn(move || drop(done.send(f())));
    told.recv_timeout(WITHIN)
        .unwrap_or_else(|_| panic!("{what}: not done after {WITHIN:?}"))
}

/// A plain `block_on`: polls, parks until woken.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}

/// A client of two loops with a [`GRACE`] each, with a connection to
/// `server` (answering [`ok_once_both_came`]) idle on each, both loops
/// left idle.
fn client_idle_on_both_loops(server: &Server) -> Arc<crate::Client> {
    let (client, _group) = client(2, GRACE);
    let client = Arc::new(client);
    // Two connections at once, one on each loop.
    let both: Vec<_> = (0..2)
        .map(|_| get_on_a_thread(&client, format!("http://{}/both", server.addr)))
        .collect();
    for one in both {
        one.join().unwrap();
    }
    assert_eq!(client.stats().open_connections, 2);
    client
}

/// A listener told on the wheel's thread (a request timeout's
/// `on_failed`) sends a request that takes the idle connection of an idle
/// loop and waits for it: it does not drive that loop — its poll would
/// block with the request's timeouts on the wheel, which its wait fires
/// instead — and the loop is woken for the request, not left to its grace.
#[test]
fn a_wait_on_the_wheels_thread_wakes_an_idle_loop_rather_than_drive_it() {
    /// Waits, in the first `on_failed` it is told, for a request to `url`
    /// with a 200 ms request timeout, and tells how that went and where.
    struct WaitsOnFailed {
        client: Mutex<Option<crate::Client>>,
        url: String,
        told: Mutex<Option<std::sync::mpsc::Sender<(crate::Error, bool)>>>,
    }
    impl crate::EventListener for WaitsOnFailed {
        fn on_failed(&self, _request: &crate::RequestInfo, _error: &crate::Error) {
            let Some(client) = self.client.lock().unwrap().take() else {
                return;
            };
            let waited = client
                .get(&self.url)
                .request_timeout(Duration::from_millis(200))
                .send()
                .wait();
            let on_wheel = thread::current()
                .name()
                .is_some_and(|name| name.contains("wheel"));
            if let (Some(told), Err(error)) = (self.told.lock().unwrap().take(), waited) {
                let _ = told.send((error, on_wheel));
            }
        }
    }
    let server = server(Arc::new(|path| {
        if path != "/warm" {
            thread::sleep(2 * GRACE);
        }
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()
    }));
    let (client, _group) = client(1, GRACE);
    let (told, on_told) = std::sync::mpsc::channel();
    let listener = Arc::new(WaitsOnFailed {
        client: Mutex::new(Some(client.clone())),
        url: format!("http://{}/silent", server.addr),
        told: Mutex::new(Some(told)),
    });
    let first = client
        .get(format!("http://{}/first", server.addr))
        .request_timeout(Duration::from_millis(300))
        .listener(listener)
        .send();
    server.wait_for("/first");
    // Answered to this thread, its connection idle: the loop is left idle
    // for its grace, nobody waiting on it.
    get(&client, &format!("http://{}/warm", server.addr));
    let (error, on_wheel) = on_told
        .recv_timeout(WITHIN)
        .expect("the wait on the wheel's thread never ended");
    assert!(on_wheel, "told on the wheel's thread");
    assert!(
        matches!(error, crate::Error::RequestTimeout(_)),
        "{error:?}"
    );
    server.wait_for("/silent");
    drop(first);
    client.close();
}

/// A pooled request whose idle connection turns out closed (its peek, on
/// the loop its caller drives) goes again to the idle connection on the
/// other loop, also left idle: posted from a loop, it wakes that loop's
/// thread rather than wait for a driver who is elsewhere.
#[test]
fn a_request_sent_again_to_another_idle_loop_does_not_wait_for_its_grace() {
    let server = server(ok_once_both_came());
    let client = client_idle_on_both_loops(&server);
    let url = format!("http://{}/", server.addr);
    // ...then one more: its connection is the one reused next.
    get(&client, &url);
    let last = *server.served.lock().unwrap().last().unwrap();
    server.streams.lock().unwrap()[last]
        .shutdown(Shutdown::Both)
        .unwrap();
    // Past the loop's last poll's freshness: the reuse peeks and finds it
    // closed.
    thread::sleep(Duration::from_millis(20));
    within("the request sent again", move || get(&client, &url));
}

/// A hedged copy, to the idle connection on the other loop, left idle, is
/// posted from the wheel's thread when its delay rings, while the caller
/// drives (or sleeps on) the loop of the stalled first attempt: it wakes
/// that other loop's thread rather than wait for a driver who is
/// elsewhere. The same for a caller that polls.
#[test]
fn a_hedged_copy_to_another_idle_loop_does_not_wait_for_its_grace() {
    for polled in [false, true] {
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(released));
        let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let ok_both = ok_once_both_came();
        let server = server(Arc::new(move |path| {
            if path == "/hedged" && first.swap(false, std::sync::atomic::Ordering::SeqCst) {
                // The first attempt stalls until the test ends.
                let _ = released.lock().unwrap().recv_timeout(GRACE);
            }
            ok_both(path)
        }));
        let client = client_idle_on_both_loops(&server);
        let hedged = format!("http://{}/hedged", server.addr);
        let body = within(
            &format!("the hedged request, polled: {polled}"),
            move || {
                let request = client
                    .get(&hedged)
                    .hedge(crate::hedge::Policy::after(Duration::from_millis(20)));
                let response = if polled {
                    block_on(request.send())
                } else {
                    request.send().wait()
                };
                response.unwrap().bytes().wait().unwrap()
            },
        );
        assert_eq!(&body[..], b"ok", "polled: {polled}");
        drop(release);
    }
}

/// A redirect's next hop, to an idle connection on another idle loop, is
/// submitted from the first hop's loop: it wakes that loop, for a caller
/// that waits and for one that polls.
#[test]
fn a_redirect_to_another_idle_loop_does_not_wait_for_its_grace() {
    for polled in [false, true] {
        let target = server(ok());
        let target_url = format!("http://{}/", target.addr);
        let location = target_url.clone();
        let redirector = server(Arc::new(move |_| {
            format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n")
                .into_bytes()
        }));
        let (client, _group) = client(2, GRACE);
        // The target's connection, idle on a loop left idle.
        get(&client, &target_url);
        let url = format!("http://{}/r", redirector.addr);
        let status = within("the redirected request", move || {
            let response = if polled {
                block_on(client.get(&url).send())
            } else {
                client.get(&url).send().wait()
            };
            response.unwrap().status()
        });
        assert_eq!(status, 200, "polled: {polled}");
    }
}

/// Voluntary context switches so far of the thread named `name` (at most
/// 15 characters: the kernel keeps no more).
fn switches_of(name: &str) -> u64 {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let status = std::fs::read_to_string(path.join("status")).unwrap();
            let line = status
                .lines()
                .find(|l| l.starts_with("voluntary_ctxt_switches"))
                .unwrap();
            return line.split_whitespace().last().unwrap().parse().unwrap();
        }
    }
    panic!("no thread {name}");
}

/// While a caller drives its loop through a slow answer, the loop's thread
/// sleeps until the caller lets go — not a wake-up per grace (1 ms: about
/// 300 over this answer).
#[cfg(target_os = "linux")]
#[test]
fn the_loops_thread_sleeps_while_a_caller_drives_through_a_slow_answer() {
    let server = server(Arc::new(|path| {
        if path == "/slow" {
            thread::sleep(Duration::from_millis(300));
        }
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()
    }));
    let group = EventLoopGroup::builder()
        .threads(1)
        .thread_name("drv")
        .build()
        .unwrap();
    let client = crate::Client::builder()
        .event_loop_group(Arc::new(group))
        .build()
        .unwrap();
    get(&client, &format!("http://{}/", server.addr));
    let before = switches_of("drv-0");
    get(&client, &format!("http://{}/slow", server.addr));
    let woke = switches_of("drv-0") - before;
    assert!(woke < 50, "the loop's thread woke {woke} times");
}

/// After a mix of requests from three threads — pooled, fresh, queued, redirected,
/// on a connection the server closes, timed out, dropped unanswered,
/// polled, hedged — in both timeout modes, no loop counts an exchange
/// attached or awaited, a thread asleep on it or a request waiting for a
/// connection (a count left over would keep a loop from being left idle
/// for its caller).
#[test]
fn every_exchange_a_loop_counted_leaves_it() {
    let target = server(ok());
    let location = format!("http://{}/", target.addr);
    let mixed = server(Arc::new(move |path| match path {
        "/r" => format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n")
            .into_bytes(),
        "/slow" => {
            thread::sleep(Duration::from_millis(200));
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()
        }
        "/close" => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".to_vec(),
        _ => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(),
    }));
    for event_loop_timeouts in [false, true] {
        let group = Arc::new(EventLoopGroup::builder().threads(2).build().unwrap());
        let client = Arc::new(
            crate::Client::builder()
                .event_loop_group(group.clone())
                .use_event_loop_timeouts(event_loop_timeouts)
                .hedge(crate::hedge::Policy::after(Duration::from_millis(5)))
                // Some wait for a connection.
                .max_connections_per_host(2)
                .build()
                .unwrap(),
        );
        let base = format!("http://{}", mixed.addr);
        let workers: Vec<_> = (0..3)
            .map(|worker| {
                let (client, base) = (client.clone(), base.clone());
                thread::spawn(move || {
                    for i in 0..40 {
                        let path = ["/", "/r", "/close", "/slow", "/"][(i + worker) % 5];
                        let url = format!("{base}{path}");
                        match i % 4 {
                            0 => drop(
                                client
                                    .get(&url)
                                    .send()
                                    .wait()
                                    .and_then(|r| r.bytes().wait()),
                            ),
                            1 => drop(block_on(async {
                                client.get(&url).send().await?.bytes().await
                            })),
                            2 => {
                                let timeout = Duration::from_millis(50);
                                drop(client.get(&url).request_timeout(timeout).send().wait());
                            }
                            _ => {
                                let future = client.get(&url).send();
                                thread::sleep(Duration::from_micros(300));
                                drop(future);
                            }
                        }
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        let give_up = Instant::now() + WITHIN;
        loop {
            let counts: Vec<_> = group.loops().iter().map(|l| l.attached_now()).collect();
            if counts.iter().all(|&count| count == [0; 4]) {
                break;
            }
            assert!(
                Instant::now() < give_up,
                "timeouts on loops {event_loop_timeouts}: attached left {counts:?}"
            );
            thread::sleep(Duration::from_millis(10));
        }
        client.close();
    }
}

/// Someone else waiting on an exchange of a loop a caller drives keeps the
/// loop from being left idle when that caller lets go: a thread asleep on
/// its head or on its body (it could not drive the loop: the caller did),
/// or a task polling it. The caller's own answer comes after 300 ms; the
/// other's head or body 600 ms after its request, when nobody drives the
/// loop any more — its thread must be reading it then, not sleeping out a
/// minute's grace.
#[test]
fn a_caller_leaves_its_loop_to_the_thread_while_someone_else_waits_on_it() {
    let both = ok_once_both_came();
    let server = server(Arc::new(move |path| {
        let answer: &[u8] = match path {
            "/hold" => {
                thread::sleep(Duration::from_millis(300));
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
            }
            "/late-head" => b"<pause>HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            "/late-body" => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n<pause>ok",
            _ => return both(path),
        };
        answer.to_vec()
    }));
    for (path, polled) in [
        ("/late-head", false),
        ("/late-body", false),
        ("/late-head", true),
    ] {
        let (client, _group) = client(1, GRACE);
        let client = Arc::new(client);
        let base = format!("http://{}", server.addr);
        // Two pooled connections on the one loop, left idle by its thread
        // for this one, the caller.
        let other = get_on_a_thread(&client, format!("{base}/both"));
        get(&client, &format!("{base}/both"));
        other.join().unwrap();
        get(&client, &format!("{base}/"));
        // The caller drives the loop for 300 ms; meanwhile, another thread
        // asks on the other connection and waits, asleep or polling.
        let caller = get_on_a_thread(&client, format!("{base}/hold"));
        server.wait_for("/hold");
        let (client, url) = (client.clone(), format!("{base}{path}"));
        within(&format!("{path}, polled: {polled}"), move || {
            let future = client.get(&url).send();
            let response = match polled {
                true => block_on(future).unwrap(),
                false => future.wait().unwrap(),
            };
            assert_eq!(&response.bytes().wait().unwrap()[..], b"ok");
        });
        caller.join().unwrap();
    }
}

/// A thread waiting in turn on a window of its own exchanges, on
/// connections that all share its loop, drives that loop itself: nobody
/// else waits on the loop, so each release leaves it idle with the
/// window's other exchanges on it, and the heads are read on the caller's
/// thread — not on the loop's, as they would be if the exchanges left on
/// the loop made every release hand it back.
#[test]
fn a_window_of_one_threads_exchanges_is_read_by_that_thread() {
    /// Heads read on the thread `caller`, and on other threads.
    struct ReadOn {
        caller: thread::ThreadId,
        counts: Mutex<[usize; 2]>,
    }
    impl crate::EventListener for ReadOn {
        fn on_status(&self, _: &crate::RequestInfo, _: http::StatusCode) {
            let elsewhere = thread::current().id() != self.caller;
            self.counts.lock().unwrap()[usize::from(elsewhere)] += 1;
        }
    }
    let server = server(ok());
    let read_on = Arc::new(ReadOn {
        caller: thread::current().id(),
        counts: Mutex::new([0; 2]),
    });
    let group = EventLoopGroup::builder()
        .threads(2)
        .idle_grace(GRACE)
        .build()
        .unwrap();
    let client = crate::Client::builder()
        .event_loop_group(Arc::new(group))
        .listener(read_on.clone())
        .build()
        .unwrap();
    let url = format!("http://{}/", server.addr);
    let window = |requests: usize| {
        let mut in_flight = std::collections::VecDeque::new();
        for i in 0..requests + 8 {
            if in_flight.len() == 8 || i >= requests {
                let future: crate::ResponseFuture = in_flight.pop_front().unwrap();
                let body = future.wait().unwrap().bytes().wait().unwrap();
                assert_eq!(&body[..], b"ok");
            }
            if i < requests {
                in_flight.push_back(client.get(&url).send());
            }
        }
    };
    // Eight connections, on this thread's loop.
    window(64);
    *read_on.counts.lock().unwrap() = [0; 2];
    window(400);
    let [here, elsewhere] = *read_on.counts.lock().unwrap();
    assert!(
        here >= 300,
        "{here} heads read on the caller's thread, {elsewhere} elsewhere"
    );
}

/// A pooled request whose idle connection on loop A turns out closed goes
/// again to an idle connection on loop B (posted from A, where its caller
/// drives): it comes to B awaited (its caller may sleep on A, not B), so
/// when another caller that drove B lets go, B's thread takes B back and
/// reads its answer — rather than leave it for B's grace while its caller
/// drives A. (Found by review: the request's new home went unnoticed.)
#[test]
fn a_request_sent_again_to_another_loop_is_read_when_another_caller_lets_go() {
    let three = Arc::new(std::sync::Barrier::new(3));
    let server = server(Arc::new(move |path| {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec();
        match path {
            "/a" | "/b1" | "/b2" => {
                three.wait();
                // Back to the pool in this order: /b1's, /a's, /b2's (top).
                let after = match path {
                    "/b1" => 0,
                    "/a" => 300,
                    _ => 600,
                };
                thread::sleep(Duration::from_millis(after));
                ok
            }
            "/hold" => {
                thread::sleep(Duration::from_millis(500));
                ok
            }
            "/late" => b"<pause>HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(),
            _ => ok,
        }
    }));
    let (client, _group) = client(2, GRACE);
    let client = Arc::new(client);
    let base = format!("http://{}", server.addr);
    // Thread a: one connection, on its loop; thread b: two, on the other.
    let a = get_on_a_thread(&client, format!("{base}/a"));
    let b = {
        let (client, base) = (client.clone(), base.clone());
        thread::spawn(move || {
            let first = client.get(format!("{base}/b1")).send();
            let second = client.get(format!("{base}/b2")).send();
            for future in [first, second] {
                let body = future.wait().unwrap().bytes().wait().unwrap();
                assert_eq!(&body[..], b"ok");
            }
        })
    };
    a.join().unwrap();
    b.join().unwrap();
    assert_eq!(client.stats().open_connections, 3);
    // The server closes /a's connection, idle on a loop left idle.
    let conn_of = |wanted: &str| {
        let paths = server.paths.lock().unwrap();
        paths
            .iter()
            .find(|(_, path)| path == wanted)
            .map(|&(conn, _)| conn)
    };
    server.streams.lock().unwrap()[conn_of("/a").unwrap()]
        .shutdown(Shutdown::Both)
        .unwrap();
    thread::sleep(Duration::from_millis(200));
    // Another caller takes /b2's connection (the pool's top) and drives
    // its loop for 500 ms.
    let other = get_on_a_thread(&client, format!("{base}/hold"));
    server.wait_for("/hold");
    // This one takes /a's connection (closed: sent again, to /b1's); its
    // head comes 600 ms after it, once the other has let go of loop B.
    let (client2, url) = (client.clone(), format!("{base}/late"));
    within("the request sent again", move || get(&client2, &url));
    other.join().unwrap();
    // It went as described (margins of 200-300 ms on each step).
    assert_eq!(conn_of("/hold"), conn_of("/b2"));
    assert_eq!(conn_of("/late"), conn_of("/b1"));
}

/// With one connection per host, a request waits in the pool for the
/// connection of a response whose head has come and whose body is still
/// to come — the head read by its caller driving the loop, or by the
/// loop's thread (taken back by a task posted to it): while the request
/// waits, no loop of the group is left idle, so the body is read, the
/// connection freed and the request served — not after the loop's grace.
/// (Found by review.)
#[test]
fn a_request_waiting_for_a_connection_a_loop_left_idle_holds_is_served() {
    let server = server(Arc::new(|path| match path {
        "/late-body" => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n<pause>ok".to_vec(),
        _ => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(),
    }));
    for thread_reads_the_head in [false, true] {
        let group = Arc::new(
            EventLoopGroup::builder()
                .threads(1)
                .idle_grace(GRACE)
                .build()
                .unwrap(),
        );
        let client = crate::Client::builder()
            .event_loop_group(group.clone())
            .max_connections_per_host(1)
            .build()
            .unwrap();
        let base = format!("http://{}", server.addr);
        within(
            &format!("thread reads the head: {thread_reads_the_head}"),
            move || {
                get(&client, &format!("{base}/"));
                if thread_reads_the_head {
                    group.loops()[0].execute(|_| {}).unwrap();
                    thread::sleep(Duration::from_millis(50));
                }
                let held = client
                    .get(format!("{base}/late-body"))
                    .send()
                    .wait()
                    .unwrap();
                get(&client, &format!("{base}/"));
                assert_eq!(&held.bytes().wait().unwrap()[..], b"ok");
            },
        );
    }
}

/// A thread's new connections go to its loop also when they need a lookup
/// (a host name, resolved on the resolver's thread): each thread's on one
/// loop, the two threads' on the two loops. (Found by review: the loop was
/// chosen on the resolver's thread.)
#[test]
fn a_threads_connections_to_a_host_name_share_its_loop() {
    /// The loop each connection was opened on, in order: the one whose
    /// turn ran the connect (its thread's, or a caller driving it).
    struct OpenedOn(Arc<EventLoopGroup>, Mutex<Vec<usize>>);
    impl crate::EventListener for OpenedOn {
        fn on_connect_success(&self, _: &crate::RequestInfo, _: &crate::ConnectionInfo) {
            let on = self.0.loops().iter().position(|l| l.in_loop());
            self.1
                .lock()
                .unwrap()
                .push(on.expect("a connect runs on a loop"));
        }
    }
    let server = server(Arc::new(|_| {
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".to_vec()
    }));
    let group = Arc::new(EventLoopGroup::builder().threads(2).build().unwrap());
    let opened_on = Arc::new(OpenedOn(group.clone(), Mutex::new(Vec::new())));
    let client = Arc::new(
        crate::Client::builder()
            .event_loop_group(group)
            .listener(opened_on.clone())
            .build()
            .unwrap(),
    );
    let url = format!("http://localhost:{}/", server.addr.port());
    let mut loops = Vec::new();
    for _ in 0..2 {
        let (client, url, opened_on) = (client.clone(), url.clone(), opened_on.clone());
        thread::spawn(move || {
            for _ in 0..4 {
                get(&client, &url);
            }
        })
        .join()
        .unwrap();
        let opened = std::mem::take(&mut *opened_on.1.lock().unwrap());
        assert_eq!(opened.len(), 4, "{opened:?}");
        assert!(opened.iter().all(|&on| on == opened[0]), "{opened:?}");
        loops.push(opened[0]);
    }
    assert_ne!(loops[0], loops[1]);
}
