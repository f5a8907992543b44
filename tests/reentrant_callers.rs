//! The caller's code run on the client's own threads — a listener on a
//! loop's thread or the wheel's, a waker that polls its task inline —
//! calling back into the client: sending, cancelling, closing, dropping
//! the last `Client`, waiting. What works is asserted to work; what cannot
//! (a blocking wait on the thread that runs the very loop it waits for) is
//! asserted to fail at once with `Error::WouldDeadlock`, as
//! `EventListener` documents — or, for a `block_on` of the caller's own
//! (polls, which the client cannot refuse), to end by the request
//! timeout.
//! Every test is bounded by a generous ceiling: a hang shows as a failure
//! with a message, never as a stuck test binary.

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};
use support::*;
use tickless::{
    hedge, retry, Client, Error, EventListener, RequestInfo, Resolve, ResolveAnswer, ResponseFuture,
};

const CEILING: Duration = Duration::from_secs(20);

fn ok_server() -> TestServer {
    TestServer::start(Behaviour::Respond(Arc::new(|_| ok("hi"))))
}

fn one_loop_client(request_timeout: Duration) -> Client {
    Client::builder()
        .event_loops(1)
        .request_timeout(request_timeout)
        .build()
        .expect("client")
}

fn is_loop_thread() -> bool {
    thread::current()
        .name()
        .is_some_and(|name| name.starts_with("tickless-loop"))
}

/// What a listener did from inside one of its methods, and where.
#[derive(Debug)]
struct Done<T> {
    value: T,
    on_loop_thread: bool,
    took: Duration,
}

/// Runs `act` from the first `on_status` it is told, once, and keeps
/// what it returned.
struct OnStatus<T> {
    act: Mutex<Option<Box<dyn FnOnce() -> T + Send>>>,
    done: Mutex<Option<Done<T>>>,
}

impl<T: Send + 'static> OnStatus<T> {
    fn new(act: impl FnOnce() -> T + Send + 'static) -> Arc<Self> {
        Arc::new(OnStatus {
            act: Mutex::new(Some(Box::new(act))),
            done: Mutex::new(None),
        })
    }

    fn take(&self) -> Done<T> {
        self.done
            .lock()
            .unwrap()
            .take()
            .expect("on_status was told")
    }
}

impl<T: Send + 'static> EventListener for OnStatus<T> {
    fn on_status(&self, _request: &RequestInfo, _status: http::StatusCode) {
        let Some(act) = self.act.lock().unwrap().take() else {
            return;
        };
        let started = Instant::now();
        let value = act();
        *self.done.lock().unwrap() = Some(Done {
            value,
            on_loop_thread: is_loop_thread(),
            took: started.elapsed(),
        });
    }
}

/// A blocking `wait` from `on_status`, on the loop's thread, for a request
/// that needs that same loop (the client has one, so its new connection
/// goes there): the loop cannot turn while its thread waits, so the wait
/// fails at once with `Error::WouldDeadlock` — with no request timeout,
/// which used to be all that could end it — and the outer request, its
/// `on_status` returned, gets its response.
#[test]
fn a_blocking_wait_in_on_status_on_the_loop_thread_fails_with_would_deadlock() {
    let server = ok_server();
    let client = one_loop_client(Duration::ZERO);
    let url = format!("http://{}/", server.addr());
    // Polled: the loop's thread tells the events (a blocking caller would
    // drive the loop and be told them on its own thread).
    assert_a_wait_in_on_status_is_refused(client, url);
}

/// A blocking caller drives an idle loop itself and is told its events on
/// its own thread: a blocking `wait` from `on_status` there would stop the
/// loop it drives just the same, and fails at once as on the loop's own
/// thread. (Between its drives, the same thread's waits drive the loop and
/// are not refused: the warm-up's.)
#[test]
fn a_blocking_wait_in_on_status_on_a_driving_caller_fails_with_would_deadlock() {
    let server = ok_server();
    let url = format!("http://{}/", server.addr());
    until_driven(|| {
        let client = one_loop_client(Duration::ZERO);
        let inner = waiting_for(&client, &url);
        let outer = after_warm_up(client, url.clone(), inner.clone());
        let inner = inner.take();
        let driven = !inner.on_loop_thread;
        // Told on the loop's thread, it is the case above: refused
        // wherever it was told.
        assert_refused_wherever(inner.value, outer);
        driven
    });
}

/// How many times [`until_driven`] tries.
const TRIES: usize = 5;

/// Runs `scenario` until it says its events were told on a driving
/// caller's thread, [`TRIES`] times at most. A caller keeps an idle loop
/// only while it comes back within the loop's idle grace (a millisecond):
/// one stalled longer between its warm-up and its request (a loaded
/// machine stalls threads by milliseconds) finds the loop taken back by
/// its thread, and is told there. `scenario` asserts what holds in either
/// case; only one told on the driving caller tests that case.
fn until_driven(mut scenario: impl FnMut() -> bool) {
    for _ in 0..TRIES {
        if scenario() {
            return;
        }
    }
    panic!("in {TRIES} tries, the loop's thread took the loop back every time");
}

/// Sends a request with `listener` on `client` (one loop) after three
/// sequential ones, which leave the loop idle for the sending thread to
/// drive; waits for its head, within [`CEILING`].
fn after_warm_up(
    client: Client,
    url: String,
    listener: Arc<dyn EventListener>,
) -> Result<http::StatusCode, Error> {
    within("the outer request", CEILING, move || {
        for _ in 0..3 {
            let response = client.get(&url).send().wait().expect("warm-up");
            response.bytes().wait().expect("warm-up body");
        }
        client
            .get(&url)
            .listener(listener)
            .send()
            .wait()
            .map(|r| r.status())
    })
}

/// A listener that, told `on_status`, sends a GET of `url` on `client`
/// and waits for its status.
fn waiting_for(client: &Client, url: &str) -> Arc<OnStatus<Result<http::StatusCode, Error>>> {
    let (client, url) = (client.clone(), url.to_owned());
    OnStatus::new(move || client.get(&url).send().wait().map(|r| r.status()))
}

/// The status of a GET of `url` on `client` with `listener`, polled (so
/// that the loop's thread tells its events), within [`CEILING`].
fn polled_with<T: Send + 'static>(
    client: Client,
    url: String,
    listener: Arc<OnStatus<T>>,
) -> Result<http::StatusCode, Error> {
    within("the outer request", CEILING, move || {
        block_on(client.get(&url).listener(listener).send()).map(|r| r.status())
    })
}

/// A GET of `url` sent and waited on from `on_status` of a polled GET of
/// `url` on `client` is refused on the loop's thread (see
/// [`assert_refused`]).
fn assert_a_wait_in_on_status_is_refused(client: Client, url: String) {
    let inner = waiting_for(&client, &url);
    let outer = polled_with(client, url, inner.clone());
    assert_refused(inner.take(), true, outer);
}

/// The inner wait, told on the loop's thread or not as `on_loop_thread`
/// says, was refused (see [`assert_refused_wherever`]).
fn assert_refused(
    inner: Done<Result<http::StatusCode, Error>>,
    on_loop_thread: bool,
    outer: Result<http::StatusCode, Error>,
) {
    assert_eq!(inner.on_loop_thread, on_loop_thread, "where it was told");
    assert_refused_wherever(inner.value, outer);
}

/// The inner wait was refused with `WouldDeadlock` (its message says what
/// to do instead), and the outer request got its response.
fn assert_refused_wherever(
    inner: Result<http::StatusCode, Error>,
    outer: Result<http::StatusCode, Error>,
) {
    let Err(error) = inner else {
        panic!("the inner wait returned {inner:?}");
    };
    assert!(matches!(error, Error::WouldDeadlock), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("poll the future"), "{message}");
    assert!(message.contains("another thread"), "{message}");
    assert_eq!(outer.expect("the outer request"), http::StatusCode::OK);
}

/// With several loops, a request sent from `on_status` on a loop's thread
/// and waited on there opens its connection on another loop — never on
/// the one whose thread waits — and gets its answer: each of two new
/// connections, which the chooser would otherwise give one loop after
/// the other. The body is read blocking there too.
#[test]
fn a_wait_in_on_status_for_a_new_connection_is_answered_from_another_loop() {
    let server = ok_server();
    let others = [ok_server(), ok_server()];
    let client = Client::builder().event_loops(2).build().expect("client");
    let url = format!("http://{}/", server.addr());
    let urls: Vec<String> = others
        .iter()
        .map(|other| format!("http://{}/", other.addr()))
        .collect();
    let inner = {
        let client = client.clone();
        OnStatus::new(move || {
            urls.iter()
                .map(|url| client.get(url).send().wait()?.text().wait())
                .collect::<Result<Vec<String>, Error>>()
        })
    };
    let outer = polled_with(client, url, inner.clone());
    let done = inner.take();
    assert!(done.on_loop_thread);
    assert_eq!(done.value.expect("the inner requests"), ["hi", "hi"]);
    assert_eq!(outer.expect("the outer request"), http::StatusCode::OK);
}

/// With several loops, a request from `on_status` that takes an idle
/// pooled connection on the loop whose thread waits needs that loop: the
/// wait fails at once, as with one loop.
#[test]
fn a_wait_in_on_status_for_a_pooled_connection_on_the_same_loop_fails() {
    let server = ok_server();
    let pooled = ok_server();
    let client = Client::builder()
        .event_loops(2)
        .request_timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let url = format!("http://{}/", server.addr());
    let pooled_url = format!("http://{}/", pooled.addr());
    let inner = {
        let (client, pooled_url) = (client.clone(), pooled_url.clone());
        OnStatus::new(move || client.get(&pooled_url).send().wait().map(|r| r.status()))
    };
    let listener = inner.clone();
    let outer = within("the outer request", CEILING, move || {
        // This thread's connections share a loop until it polls: the
        // pooled one, then the outer request's.
        let response = client.get(&pooled_url).send().wait().expect("warm-up");
        response.bytes().wait().expect("warm-up body");
        block_on(client.get(&url).listener(listener).send()).map(|r| r.status())
    });
    assert_refused(inner.take(), true, outer);
}

/// With one loop, a request from `on_status` that waits in the pool's
/// queue — the host's one connection is the outer request's — has no loop
/// yet, but every loop it could get is the one whose thread waits: the
/// wait fails at once (the request timeout ended it before).
#[test]
fn a_wait_in_on_status_for_a_queued_request_on_a_single_loop_fails() {
    let server = ok_server();
    let client = Client::builder()
        .event_loops(1)
        .max_connections_per_host(1)
        .request_timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let url = format!("http://{}/", server.addr());
    assert_a_wait_in_on_status_is_refused(client, url);
}

/// A resolver that keeps every lookup unanswered (so that none fails on
/// drop) until the test ends.
#[derive(Default)]
struct Unanswered(Mutex<Vec<ResolveAnswer>>);

impl Resolve for Unanswered {
    fn resolve(&self, _host: &str, _port: u16, answer: ResolveAnswer) {
        self.0.lock().unwrap().push(answer);
    }
}

/// With several loops, a request whose new connection the group placed on
/// a loop — from a caller's thread, before `on_status` on that loop's
/// thread waits for it — while its host name is still being looked up:
/// bound for that loop, it needs it, and the wait fails at once (the
/// connect would have been posted to the loop blocked in the wait).
#[test]
fn a_wait_in_on_status_for_a_request_bound_for_the_same_loop_fails() {
    let server = ok_server();
    let client = Client::builder()
        .event_loops(2)
        .resolver(Arc::new(Unanswered::default()))
        .request_timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let url = format!("http://{}/", server.addr());
    let held_url = format!("http://unanswered.test:{}/", server.addr().port());
    let bound = Arc::new(Mutex::new(None::<ResponseFuture>));
    let inner = {
        let bound = bound.clone();
        OnStatus::new(move || {
            let future = bound.lock().unwrap().take().expect("sent");
            future.wait().map(|r| r.status())
        })
    };
    let listener = inner.clone();
    let outer = within("the outer request", CEILING, move || {
        // This thread's connections share a loop until it polls: the one
        // looked up, then the outer request's.
        *bound.lock().unwrap() = Some(client.get(&held_url).send());
        block_on(client.get(&url).listener(listener).send()).map(|r| r.status())
    });
    assert_refused(inner.take(), true, outer);
}

/// With several loops, a request from `on_status` that takes a stream of
/// the shared HTTP/2 connection on the loop whose thread waits (the outer
/// request's own): bound for that loop before the task that attaches it
/// could run there, it needs it, and the wait fails at once.
#[test]
fn a_wait_in_on_status_for_a_stream_of_a_shared_connection_on_the_same_loop_fails() {
    let server = support::h2_server::H2Server::start(|stream| {
        support::h2_server::answer(stream, 200, b"hi")
    });
    let client = Client::builder()
        .event_loops(2)
        .http2_prior_knowledge()
        .request_timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let url = server.url("/");
    assert_a_wait_in_on_status_is_refused(client, url);
}

/// From `on_status` on a loop's thread, a blocking wait for a request of
/// another client — on a loop of its own — and a blocking read of its
/// body are answered: that loop turns on.
#[test]
fn a_blocking_wait_in_on_status_for_another_clients_request_is_answered() {
    let server = ok_server();
    let client = one_loop_client(Duration::ZERO);
    let other = one_loop_client(Duration::ZERO);
    let url = format!("http://{}/", server.addr());
    let inner = {
        let url = url.clone();
        OnStatus::new(move || other.get(&url).send().wait()?.text().wait())
    };
    let outer = polled_with(client, url, inner.clone());
    let done = inner.take();
    assert!(done.on_loop_thread);
    assert_eq!(done.value.expect("the other client's request"), "hi");
    assert_eq!(outer.expect("the outer request"), http::StatusCode::OK);
}

/// A request of the same loop whose response has come already: from
/// `on_status` on that loop's thread, its blocking `wait` and the blocking
/// read of its body (all come) return it — only a wait that would need
/// the loop is refused.
#[test]
fn a_blocking_wait_in_on_status_for_what_has_come_already_returns_it() {
    let server = ok_server();
    let client = one_loop_client(Duration::ZERO);
    let url = format!("http://{}/", server.addr());
    let first = client.get(&url).send();
    let came = Instant::now();
    while !first.is_done() {
        assert!(came.elapsed() < CEILING, "the first response never came");
        thread::sleep(Duration::from_millis(1));
    }
    let inner = OnStatus::new(move || first.wait()?.text().wait());
    let outer = polled_with(client, url, inner.clone());
    let done = inner.take();
    assert!(done.on_loop_thread);
    assert_eq!(done.value.expect("the first response"), "hi");
    assert_eq!(outer.expect("the outer request"), http::StatusCode::OK);
}

/// From `on_status` on the loop's thread: sending a request (not waiting
/// on it), cancelling another request in flight, and closing the client
/// all return at once, and each request ends as it should.
#[test]
fn send_cancel_and_close_from_on_status_return_at_once() {
    let server = ok_server();
    let stalled = TestServer::start(Behaviour::NeverAnswer);
    let client = one_loop_client(Duration::ZERO);
    let url = format!("http://{}/", server.addr());
    let other = Arc::new(Mutex::new(Some(
        client.get(format!("http://{}/", stalled.addr())).send(),
    )));
    let sent = Arc::new(Mutex::new(None::<ResponseFuture>));
    let act = {
        let (client, url, other, sent) = (client.clone(), url.clone(), other.clone(), sent.clone());
        OnStatus::new(move || {
            *sent.lock().unwrap() = Some(client.get(&url).send());
            let cancelled = other.lock().unwrap().as_ref().expect("sent").cancel();
            client.close();
            cancelled
        })
    };
    let listener = act.clone();
    let outer = within("the outer request", CEILING, move || {
        block_on(client.get(&url).listener(listener).send()).map(|r| r.status())
    });
    let done = act.take();
    assert!(done.on_loop_thread);
    assert!(done.value, "the other request was cancelled");
    assert!(done.took < CEILING / 2, "{:?}", done.took);
    // Closed while its head was being told: the exchange fails.
    assert!(matches!(outer, Err(Error::ClientClosed)), "{outer:?}");
    let sent = sent.lock().unwrap().take().expect("sent");
    let sent = within("the request sent from on_status", CEILING, move || {
        sent.wait().map(|r| r.status())
    });
    assert!(matches!(sent, Err(Error::ClientClosed)), "{sent:?}");
    let other = other.lock().unwrap().take().expect("sent");
    let other = within("the cancelled request", CEILING, move || {
        other.wait().map(|r| r.status())
    });
    assert!(matches!(other, Err(Error::Cancelled)), "{other:?}");
}

/// The last `Client` dropped from `on_completed`, on the loop's thread:
/// the drop closes the client without waiting for that thread.
#[test]
fn the_last_client_dropped_from_on_completed_closes_it() {
    struct DropsClient(Mutex<Option<Client>>, Mutex<Option<mpsc::Sender<bool>>>);
    impl EventListener for DropsClient {
        fn on_completed(&self, _request: &RequestInfo, _status: http::StatusCode) {
            let client = self.0.lock().unwrap().take();
            drop(client);
            if let Some(told) = self.1.lock().unwrap().take() {
                let _ = told.send(is_loop_thread());
            }
        }
    }
    let server = ok_server();
    let client = one_loop_client(Duration::ZERO);
    let (told, on_told) = mpsc::channel();
    let listener = Arc::new(DropsClient(Mutex::new(None), Mutex::new(Some(told))));
    let url = format!("http://{}/", server.addr());
    let future = client.get(&url).listener(listener.clone()).send();
    *listener.0.lock().unwrap() = Some(client);
    let body = within("the request", CEILING, move || {
        let response = future.wait()?;
        response.text().wait()
    });
    let on_loop_thread = on_told
        .recv_timeout(CEILING)
        .expect("on_completed was told");
    assert!(on_loop_thread);
    assert_eq!(
        body.expect("the response came before the client closed"),
        "hi"
    );
}

/// How an [`InlineTask`] ended: its body, and whether on a loop's thread.
type TaskEnd = (Result<String, Error>, bool);

/// A task whose waker polls it at once, on the waking thread (an executor
/// that runs woken tasks inline): the future is polled again from inside
/// the loop's wake, and is ready there.
struct InlineTask {
    future: Mutex<Option<Pin<Box<ResponseFuture>>>>,
    done: Mutex<Option<mpsc::Sender<TaskEnd>>>,
}

impl InlineTask {
    fn poll_now(self: &Arc<Self>) {
        let waker = Waker::from(self.clone());
        let mut cx = Context::from_waker(&waker);
        let mut slot = self.future.lock().unwrap();
        let Some(future) = slot.as_mut() else {
            return;
        };
        let Poll::Ready(result) = future.as_mut().poll(&mut cx) else {
            return;
        };
        *slot = None;
        drop(slot);
        // The body is read in the same wake: whole, polled once more
        // with this waker's thread blocking (it is small and has come).
        let result = result.and_then(|response| block_on(response.text()));
        if let Some(done) = self.done.lock().unwrap().take() {
            let _ = done.send((result, is_loop_thread()));
        }
    }
}

impl Wake for InlineTask {
    fn wake(self: Arc<Self>) {
        self.poll_now();
    }
}

/// The server's answer must come after the task's first poll has left
/// its waker (that poll is then pending, and the answer wakes the task on
/// the loop's thread): a fixed pause before it is not enough, as a caller
/// stalled between its send and its first poll (a loaded machine stalls
/// threads by milliseconds) would find the head in, and take it on its
/// own thread. Returns what the test calls after that poll, and what the
/// server calls before it answers (it waits for the first, at most
/// [`CEILING`]).
fn first_poll_signal() -> (impl FnOnce(), impl Fn() + Send + Sync + 'static) {
    let (polled, first_poll) = mpsc::channel::<()>();
    let first_poll = Mutex::new(first_poll);
    (
        move || {
            polled
                .send(())
                .expect("the server waits for the first poll")
        },
        move || {
            let _ = first_poll.lock().unwrap().recv_timeout(CEILING);
        },
    )
}

#[test]
fn a_waker_that_polls_its_task_inline_gets_the_response_on_the_loop() {
    let (polled, first_polled) = first_poll_signal();
    let server = TestServer::start(Behaviour::Respond(Arc::new(move |_| {
        first_polled();
        ok("hi")
    })));
    let client = one_loop_client(Duration::ZERO);
    let url = format!("http://{}/", server.addr());
    let (done, on_done) = mpsc::channel();
    let task = Arc::new(InlineTask {
        future: Mutex::new(Some(Box::pin(client.get(&url).send()))),
        done: Mutex::new(Some(done)),
    });
    task.poll_now();
    polled();
    let (body, on_loop_thread) = on_done.recv_timeout(CEILING).expect("the task ended");
    assert_eq!(body.expect("the response"), "hi");
    assert!(on_loop_thread, "woken on the loop's thread");
}

/// `on_failed` of a request timeout runs on the wheel's thread (the
/// default timer mode): while it blocks, no other timeout of the client
/// fires — the one after it fires once it returns, late by as long.
#[test]
fn a_slow_on_failed_on_the_wheel_holds_back_the_next_timeout() {
    struct Blocks(Duration);
    impl EventListener for Blocks {
        fn on_failed(&self, _request: &RequestInfo, _error: &Error) {
            assert!(thread::current()
                .name()
                .is_some_and(|name| name.contains("wheel")));
            thread::sleep(self.0);
        }
    }
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = one_loop_client(Duration::from_millis(100));
    let url = format!("http://{}/", server.addr());
    let block = Duration::from_secs(1);
    let first = client.get(&url).listener(Arc::new(Blocks(block))).send();
    let started = Instant::now();
    let second = client
        .get(&url)
        .request_timeout(Duration::from_millis(300))
        .send();
    let second = within("the second request", CEILING, move || {
        second.wait().map(|_| ())
    });
    assert!(
        matches!(second, Err(Error::RequestTimeout(_))),
        "{second:?}"
    );
    // Due 300 ms after it was sent; the first's on_failed began about
    // 100 ms after and held the wheel for `block`.
    assert!(started.elapsed() >= block, "{:?}", started.elapsed());
    drop(first);
}

/// A server whose head comes once `first_polled` returns (see
/// [`first_poll_signal`]), and its body 200 ms after.
fn late_body_server(first_polled: impl Fn() + Send + Sync + 'static) -> TestServer {
    TestServer::start(Behaviour::Custom(Arc::new(move |mut stream, _| {
        use std::io::Write;
        if read_head(&mut stream).is_none() {
            return;
        }
        first_polled();
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n");
        thread::sleep(Duration::from_millis(200));
        let _ = stream.write_all(b"hi");
        drain(&mut stream);
    })))
}

/// The same inline wake, with a body that comes 200 ms after its head,
/// polled to its end by a `block_on` of the caller's own (the client
/// sees only polls, which it cannot refuse): the thread parks on the
/// loop's thread, from inside the wake, the body is never read (the loop
/// that would read it is the one parked), and the request timeout ends it
/// — what `Body` and `EventListener` ("Blocking") warn of.
#[test]
fn a_body_read_blocking_inside_a_wake_on_the_loop_is_ended_only_by_the_timeout() {
    let (polled, first_polled) = first_poll_signal();
    let server = late_body_server(first_polled);
    let timeout = Duration::from_secs(1);
    let client = one_loop_client(timeout);
    let url = format!("http://{}/", server.addr());
    let (done, on_done) = mpsc::channel();
    let task = Arc::new(InlineTask {
        future: Mutex::new(Some(Box::pin(client.get(&url).send()))),
        done: Mutex::new(Some(done)),
    });
    let started = Instant::now();
    task.poll_now();
    polled();
    let (body, on_loop_thread) = on_done.recv_timeout(CEILING).expect("the task ended");
    assert!(on_loop_thread, "woken on the loop's thread");
    assert!(matches!(body, Err(Error::RequestTimeout(_))), "{body:?}");
    assert!(started.elapsed() >= timeout, "{:?}", started.elapsed());
}

/// How an [`InlineReader`] ended: its first blocking read on the loop's
/// thread (how many bytes), whether that was on a loop's thread, and the
/// body read after it on another thread (none after a read of it whole,
/// which takes the body).
type ReaderEnd = (Result<usize, Error>, bool, Option<Result<String, Error>>);

/// A task whose waker polls its response's future inline, as
/// [`InlineTask`]'s does, then reads the body with a blocking `Read` in
/// the same wake, on the waking thread; what it could not read there is
/// read on a thread of its own.
struct InlineReader {
    future: Mutex<Option<Pin<Box<ResponseFuture>>>>,
    done: Mutex<Option<mpsc::Sender<ReaderEnd>>>,
    /// Read whole (`bytes().wait()`), rather than with `Read`.
    whole: bool,
}

impl InlineReader {
    fn poll_now(self: &Arc<Self>) {
        use std::io::Read;
        let waker = Waker::from(self.clone());
        let mut cx = Context::from_waker(&waker);
        let mut slot = self.future.lock().unwrap();
        let Some(future) = slot.as_mut() else {
            return;
        };
        let Poll::Ready(result) = future.as_mut().poll(&mut cx) else {
            return;
        };
        *slot = None;
        drop(slot);
        let Some(done) = self.done.lock().unwrap().take() else {
            return;
        };
        let mut response = result.expect("the head");
        let on_loop_thread = is_loop_thread();
        if self.whole {
            let first = response.bytes().wait().map(|bytes| bytes.len());
            let _ = done.send((first, on_loop_thread, None));
            return;
        }
        let mut buf = [0u8; 16];
        let first = response
            .body_mut()
            .read(&mut buf)
            .map_err(|error| match error.into_inner() {
                Some(inner) => *inner.downcast::<Error>().expect("a tickless error"),
                None => panic!("an io::Error with no source"),
            });
        // The rest, elsewhere: a refused read left the body as it was.
        thread::spawn(move || {
            let rest = response.text().wait();
            let _ = done.send((first, on_loop_thread, Some(rest)));
        });
    }
}

impl Wake for InlineReader {
    fn wake(self: Arc<Self>) {
        self.poll_now();
    }
}

/// The same inline wake, the body (200 ms after its head) read with a
/// blocking `Read` on the loop's thread, from inside the wake: the read
/// needs the loop whose thread it is on, and fails at once with
/// `WouldDeadlock` — no request timeout, which used to be all that could
/// end it — leaving the body as it was: read on another thread, it is
/// whole. Read whole (`bytes().wait()`) there, it fails the same way.
#[test]
fn a_body_read_blocking_inside_a_wake_on_the_loop_fails_with_would_deadlock() {
    for whole in [false, true] {
        let (polled, first_polled) = first_poll_signal();
        let server = late_body_server(first_polled);
        let client = one_loop_client(Duration::ZERO);
        let url = format!("http://{}/", server.addr());
        let (done, on_done) = mpsc::channel();
        let task = Arc::new(InlineReader {
            future: Mutex::new(Some(Box::pin(client.get(&url).send()))),
            done: Mutex::new(Some(done)),
            whole,
        });
        task.poll_now();
        polled();
        let (first, on_loop_thread, rest) = on_done.recv_timeout(CEILING).expect("the task ended");
        assert!(on_loop_thread, "woken on the loop's thread");
        assert!(matches!(first, Err(Error::WouldDeadlock)), "{first:?}");
        if let Some(rest) = rest {
            assert_eq!(rest.expect("the body, read elsewhere"), "hi");
        }
    }
}

/// From `on_failed` of a request timeout, on the wheel's thread: closing
/// the client, then dropping its last `Client`, return — `close` stops
/// the wheel without joining the thread it is called on — and the other
/// request in flight ends with `ClientClosed`.
#[test]
fn close_and_the_last_client_dropped_from_on_failed_on_the_wheel_return() {
    struct ClosesOnFailed(Mutex<Option<Client>>, Mutex<Option<mpsc::Sender<bool>>>);
    impl EventListener for ClosesOnFailed {
        fn on_failed(&self, _request: &RequestInfo, _error: &Error) {
            let Some(client) = self.0.lock().unwrap().take() else {
                return;
            };
            client.close();
            drop(client);
            if let Some(told) = self.1.lock().unwrap().take() {
                let on_wheel = thread::current()
                    .name()
                    .is_some_and(|name| name.contains("wheel"));
                let _ = told.send(on_wheel);
            }
        }
    }
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = one_loop_client(Duration::ZERO);
    let url = format!("http://{}/", server.addr());
    let (told, on_told) = mpsc::channel();
    let listener = Arc::new(ClosesOnFailed(Mutex::new(None), Mutex::new(Some(told))));
    let other = client.get(&url).send();
    let timed = client
        .get(&url)
        .request_timeout(Duration::from_millis(100))
        .listener(listener.clone())
        .send();
    *listener.0.lock().unwrap() = Some(client);
    let on_wheel = on_told.recv_timeout(CEILING).expect("on_failed returned");
    assert!(on_wheel, "told on the wheel's thread");
    let timed = within("the timed-out request", CEILING, move || {
        timed.wait().map(|_| ())
    });
    assert!(matches!(timed, Err(Error::RequestTimeout(_))), "{timed:?}");
    let other = within("the other request", CEILING, move || {
        other.wait().map(|_| ())
    });
    assert!(matches!(other, Err(Error::ClientClosed)), "{other:?}");
}

/// What a wait in `on_failed` on the wheel's thread came to: its outcome
/// (the body's text, read there too), how long it took from the send,
/// and whether it ran on the wheel's thread.
type WaitedOnWheel = (Result<String, Error>, Duration, bool);

/// From `on_failed` of the first request timeout it is told, sends a
/// request to `url` with these request and read timeouts and these hedge
/// and retry policies and waits for it, body and all, on that thread —
/// the wheel's, where both timeouts are armed (the default timer mode).
struct WaitsOnFailed {
    client: Mutex<Option<Client>>,
    url: String,
    timeouts: (Duration, Duration),
    policies: (hedge::Policy, retry::Policy),
    told: Mutex<Option<mpsc::Sender<WaitedOnWheel>>>,
}

impl EventListener for WaitsOnFailed {
    fn on_failed(&self, _request: &RequestInfo, _error: &Error) {
        let Some(client) = self.client.lock().unwrap().take() else {
            return;
        };
        let sent = Instant::now();
        let outcome = client
            .get(&self.url)
            .request_timeout(self.timeouts.0)
            .read_timeout(self.timeouts.1)
            .hedge(self.policies.0.clone())
            .retry(self.policies.1.clone())
            .send()
            .wait()
            .and_then(|response| response.text().wait());
        let on_wheel = thread::current()
            .name()
            .is_some_and(|name| name.contains("wheel"));
        if let Some(told) = self.told.lock().unwrap().take() {
            let _ = told.send((outcome, sent.elapsed(), on_wheel));
        }
    }
}

/// What a wait on the wheel's thread, from `on_failed`, for a request to
/// `url` with these request and read timeouts and these hedge and retry
/// policies came to.
fn waited_on_the_wheel(
    url: String,
    timeouts: (Duration, Duration),
    policies: (hedge::Policy, retry::Policy),
) -> WaitedOnWheel {
    let silent = TestServer::start(Behaviour::NeverAnswer);
    let client = one_loop_client(Duration::ZERO);
    let (told, on_told) = mpsc::channel();
    let listener = Arc::new(WaitsOnFailed {
        client: Mutex::new(Some(client.clone())),
        url,
        timeouts,
        policies,
        told: Mutex::new(Some(told)),
    });
    let first = client
        .get(silent.url("/first"))
        .request_timeout(Duration::from_millis(50))
        .listener(listener)
        .send();
    let waited = on_told
        .recv_timeout(CEILING)
        .expect("the wait on the wheel's thread never ended");
    drop(first);
    client.close();
    waited
}

/// A request sent and waited for in `on_failed`, on the wheel's thread,
/// to a server that never answers, ends at its own request timeout: the
/// wait fires the wheel's timeouts due meanwhile itself — that request's
/// among them, which would otherwise wait for it, for ever.
#[test]
fn a_wait_on_the_wheel_for_a_silent_server_ends_at_its_own_timeout() {
    let silent = TestServer::start(Behaviour::NeverAnswer);
    let timeout = Duration::from_millis(200);
    let (outcome, took, on_wheel) = waited_on_the_wheel(
        silent.url("/second"),
        (timeout, CEILING),
        Default::default(),
    );
    assert!(on_wheel, "told on the wheel's thread");
    assert!(
        matches!(outcome, Err(Error::RequestTimeout(_))),
        "{outcome:?}"
    );
    assert!(took >= timeout, "early: {took:?}");
}

/// The same for a body read there: a server that sends a head and part
/// of its body, then nothing, fails it at its read timeout (the request
/// timeout far off).
#[test]
fn a_body_read_on_the_wheel_from_a_stalled_server_ends_at_its_read_timeout() {
    let stalls = TestServer::start(Behaviour::Custom(Arc::new(|mut stream, _| {
        use std::io::Write;
        if read_head(&mut stream).is_none() {
            return;
        }
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhi");
        drain(&mut stream);
    })));
    let timeout = Duration::from_millis(200);
    let (outcome, took, on_wheel) = waited_on_the_wheel(
        stalls.url("/stalls"),
        (CEILING, timeout),
        Default::default(),
    );
    assert!(on_wheel, "told on the wheel's thread");
    assert!(matches!(outcome, Err(Error::ReadTimeout(_))), "{outcome:?}");
    assert!(took >= timeout, "early: {took:?}");
}

/// The same for a hedged request, whose wait watches its attempts in turn
/// (the first, then its copy, each to the silent server): it ends at its
/// request timeout too, its copy sent on the way.
#[test]
fn a_hedged_wait_on_the_wheel_for_a_silent_server_ends_at_its_own_timeout() {
    let silent = TestServer::start(Behaviour::NeverAnswer);
    let timeout = Duration::from_millis(200);
    let hedge = hedge::Policy::after(Duration::from_millis(50));
    let policies = (hedge, retry::Policy::none());
    let (outcome, took, on_wheel) =
        waited_on_the_wheel(silent.url("/hedged"), (timeout, CEILING), policies);
    assert!(on_wheel, "told on the wheel's thread");
    assert!(
        outcome.as_ref().is_err_and(Error::is_timeout),
        "{outcome:?}"
    );
    assert!(took >= timeout, "early: {took:?}");
    // The first attempt's connection, and its copy's.
    assert!(
        silent.wait_for_accepted(2, CEILING),
        "the copy was not sent"
    );
}

/// The same for a retried request, whose wait polls through its backoffs
/// (each an entry of the wheel): a server that answers `503` every time
/// is retried twice, and the last answer is the outcome.
#[test]
fn a_retried_wait_on_the_wheel_ends_with_its_last_answer() {
    let unavailable = TestServer::respond(|_| response(503, &[], b"busy"));
    let retry = retry::Policy::attempts(3).on_status([http::StatusCode::SERVICE_UNAVAILABLE]);
    let policies = (hedge::Policy::none(), retry);
    let (outcome, _, on_wheel) =
        waited_on_the_wheel(unavailable.url("/retried"), (CEILING, CEILING), policies);
    assert!(on_wheel, "told on the wheel's thread");
    assert_eq!(outcome.unwrap(), "busy");
    assert_eq!(unavailable.requests().len(), 3);
}

/// The event whose listener method drops the request's own future.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DropAt {
    RequestHead,
    Status,
}

/// A listener that drops its request's own future from the method for
/// [`DropAt`], on the loop's thread, and keeps what it is told from then
/// on (that method's event first), up to `on_failed`, which it signals.
struct DropsItself {
    at: DropAt,
    future: Mutex<Option<ResponseFuture>>,
    /// Events from the drop on; before it, nothing.
    told: Mutex<Vec<String>>,
    ended: Mutex<Option<mpsc::Sender<()>>>,
}

impl DropsItself {
    /// Drops the future if `at` is the event this listener drops it at,
    /// and keeps `event` from then on. The future is dropped with no lock
    /// of `told` held: what the drop calls back is told as any event is.
    fn told(&self, at: DropAt, event: impl FnOnce() -> String) {
        if at == self.at {
            let future = self.future.lock().unwrap().take();
            drop(future);
            self.told.lock().unwrap().push(event());
        } else {
            self.told_after(event);
        }
    }

    /// Keeps `event` if the future has been dropped (something is kept).
    fn told_after(&self, event: impl FnOnce() -> String) {
        let mut told = self.told.lock().unwrap();
        if !told.is_empty() {
            told.push(event());
        }
    }
}

impl EventListener for DropsItself {
    fn on_request_head(
        &self,
        _request: &RequestInfo,
        _connection: &tickless::ConnectionInfo,
        head: &tickless::RequestHead<'_>,
    ) {
        self.told(DropAt::RequestHead, || {
            format!("head {} {}", head.method(), head.target())
        });
    }
    fn on_request_sent(&self, _request: &RequestInfo, _connection: &tickless::ConnectionInfo) {
        self.told_after(|| "sent".into());
    }
    fn on_status(&self, _request: &RequestInfo, _status: http::StatusCode) {
        self.told(DropAt::Status, || "status".into());
    }
    fn on_headers(&self, _request: &RequestInfo, _headers: &http::HeaderMap) {
        self.told_after(|| "headers".into());
    }
    fn on_completed(&self, _request: &RequestInfo, _status: http::StatusCode) {
        self.told_after(|| "completed".into());
    }
    fn on_failed(&self, _request: &RequestInfo, error: &Error) {
        self.told_after(|| format!("failed {error:?}"));
        if let Some(ended) = self.ended.lock().unwrap().take() {
            let _ = ended.send(());
        }
    }
}

/// Sends `request` (of `client`) with a [`DropsItself`] dropping it at
/// `at`, waits for `on_failed`, runs `then`, and returns what the listener
/// was told from the drop on, once `client` has closed: the close joins
/// every thread of the client, so every event that could follow the end
/// has been told by then — and none may.
fn told_when_dropped_at<T>(
    at: DropAt,
    client: &Client,
    request: tickless::RequestBuilder,
    then: impl FnOnce() -> T,
) -> (Vec<String>, T) {
    let (ended, on_ended) = mpsc::channel();
    let listener = Arc::new(DropsItself {
        at,
        future: Mutex::new(None),
        told: Mutex::new(Vec::new()),
        ended: Mutex::new(Some(ended)),
    });
    // Locked while it is sent: the method that drops it finds the future
    // in place.
    let mut held = listener.future.lock().unwrap();
    *held = Some(request.listener(listener.clone()).send());
    drop(held);
    on_ended.recv_timeout(CEILING).expect("on_failed was told");
    let then = then();
    // Nothing is told after the end, up to the close and after it.
    client.close();
    let told = listener.told.lock().unwrap().clone();
    (told, then)
}

/// A request's own future dropped from its `on_status`, on the loop's
/// thread: the drop cancels the exchange being told, and `on_failed`
/// (cancelled) follows once `on_status` returns, with nothing after it.
#[test]
fn a_request_dropped_from_its_own_on_status_is_told_cancelled() {
    let server = ok_server();
    let client = one_loop_client(Duration::ZERO);
    let url = format!("http://{}/", server.addr());
    let (told, ()) = told_when_dropped_at(DropAt::Status, &client, client.get(&url), || ());
    assert_eq!(told, ["status", "failed Cancelled"]);
}

/// A request's own future dropped from its `on_request_head`, on the
/// loop's thread, while the head it is told is the exchange's own bytes:
/// the drop cancels the exchange, which lets those bytes go — and must
/// not wait for the listener to return them (it would wait on its own
/// thread for ever). `on_failed` (cancelled) follows, and nothing else.
#[test]
fn a_request_dropped_from_its_own_on_request_head_is_told_cancelled() {
    let server = ok_server();
    let url = format!("http://{}/head", server.addr());
    // All on a thread of its own, bounded: a loop that hung in the cancel
    // would hang the client's drop too.
    let (told, next) = within("the request cancelled in its head", CEILING, move || {
        let client = one_loop_client(Duration::ZERO);
        // The loop goes on: another request on it is answered.
        told_when_dropped_at(
            DropAt::RequestHead,
            &client,
            client.post(&url).body("x"),
            || client.get(&url).send().wait().map(|r| r.status()),
        )
    });
    assert_eq!(told, ["head POST /head", "failed Cancelled"]);
    assert_eq!(next.unwrap(), 200);
}

/// The same over HTTP/2, where the head is told as its `HEADERS` are
/// given to the connection: the request cancelled meanwhile is not sent
/// (its caller was told it failed) — the server never sees its stream.
/// The next request, on the same connection, is the first it sees: the
/// server takes a connection's streams in order, so by the time it has
/// answered that one it would have counted the other.
#[test]
fn an_http2_request_dropped_from_its_own_on_request_head_is_never_sent() {
    use support::h2_server::{answer, H2Server};
    let server = H2Server::start(|stream| answer(stream, 200, b"hi"));
    let url = server.url("/head");
    let (told, next) = within("the stream cancelled in its head", CEILING, move || {
        let client = Client::builder()
            .event_loops(1)
            .http2_prior_knowledge()
            .build()
            .expect("client");
        // A GET: its `HEADERS` would end the stream, the request whole.
        told_when_dropped_at(DropAt::RequestHead, &client, client.get(&url), || {
            client.get(&url).send().wait().map(|r| r.status())
        })
    });
    assert_eq!(told, ["head GET /head", "failed Cancelled"]);
    assert_eq!(next.unwrap(), 200);
    assert_eq!(server.stats.connections.load(Ordering::SeqCst), 1);
    assert_eq!(
        server.stats.streams.load(Ordering::SeqCst),
        1,
        "the cancelled request's stream reached the server"
    );
}

/// `Client::close` from `on_status` on a caller's thread that is driving
/// the loop (the loop's own thread asleep, to be woken to end it): the
/// close returns, and the request it was told of ends with `ClientClosed`.
#[test]
fn close_from_on_status_on_a_driving_caller_returns() {
    let server = ok_server();
    let url = format!("http://{}/", server.addr());
    until_driven(|| {
        let client = one_loop_client(Duration::ZERO);
        let act = {
            let client = client.clone();
            OnStatus::new(move || client.close())
        };
        let outer = after_warm_up(client, url.clone(), act.clone());
        assert!(matches!(outer, Err(Error::ClientClosed)), "{outer:?}");
        !act.take().on_loop_thread
    });
}

/// A server that answers `/held` with a chunked head and a first chunk of
/// [`HELD`] bytes, then the end once `go` is set (or, after [`CEILING`],
/// closes); anything else with `hi`.
fn first_chunk_then_waits(go: Arc<std::sync::atomic::AtomicBool>) -> TestServer {
    TestServer::start(Behaviour::custom(move |mut stream, _| {
        use std::io::Write;
        while let Some(head) = read_head(&mut stream) {
            if !head.starts_with("GET /held ") {
                if stream.write_all(&ok("hi")).is_err() {
                    return;
                }
                continue;
            }
            let mut wire =
                format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{HELD:x}\r\n")
                    .into_bytes();
            wire.extend_from_slice(&[b'h'; HELD]);
            wire.extend_from_slice(b"\r\n");
            if stream.write_all(&wire).is_err()
                || !eventually(CEILING, || go.load(Ordering::SeqCst))
                || stream.write_all(b"0\r\n\r\n").is_err()
            {
                return;
            }
        }
    }))
}

const HELD: usize = 1000;

/// A body's first bytes, come with its head while nobody read it yet, are
/// there for a blocking read on the loop's own thread (from `on_status` of
/// another request, polled): it gets them at once, as it gets any bytes
/// that have come — only a read that would have to wait is refused with
/// `WouldDeadlock` — and the rest of the body is read elsewhere after.
#[test]
fn a_blocking_read_on_the_loop_thread_gets_the_bytes_that_came_with_the_head() {
    use std::io::Read;
    let go = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = first_chunk_then_waits(go.clone());
    let client = one_loop_client(Duration::ZERO);
    let response = client
        .get(format!("http://{}/held", server.addr()))
        .send()
        .wait()
        .expect("the held body's head");
    // The first chunk has come (counted as buffered) before anyone reads.
    assert!(
        eventually(CEILING, || client.stats().buffered_body_bytes >= HELD),
        "the first chunk never came"
    );
    let shared = Arc::new(Mutex::new(Some(response)));
    let reads = shared.clone();
    let inner = OnStatus::new(move || {
        let mut response = reads.lock().unwrap().take().expect("the held body");
        let mut got = vec![0; 2 * HELD];
        let read = response
            .body_mut()
            .read(&mut got)
            .map(|n| got[..n].to_vec());
        *reads.lock().unwrap() = Some(response);
        read.map_err(|e| e.to_string())
    });
    let outer = polled_with(
        client.clone(),
        format!("http://{}/", server.addr()),
        inner.clone(),
    );
    assert_eq!(outer.expect("the outer request"), http::StatusCode::OK);
    let inner = inner.take();
    assert!(inner.on_loop_thread, "told on the loop's thread");
    let got = inner.value.expect("the bytes that had come");
    assert_eq!(got, [b'h'; HELD]);
    go.store(true, Ordering::SeqCst);
    let mut response = shared.lock().unwrap().take().expect("the held body");
    let mut rest = Vec::new();
    response
        .body_mut()
        .read_to_end(&mut rest)
        .expect("the rest");
    assert!(rest.is_empty(), "{} bytes more", rest.len());
    client.close();
}
