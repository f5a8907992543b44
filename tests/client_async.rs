//! The response future needs no particular runtime: it works under tokio
//! (multi-thread and current-thread), under a hand-written `block_on`, and
//! blocking with `.wait()`.

mod support;

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;
use support::*;
use tickless::timer::ManualClock;
use tickless::{Client, Error};

const WAIT: Duration = Duration::from_secs(5);

fn client() -> Client {
    Client::builder()
        .event_loops(2)
        .request_timeout(Duration::from_secs(20))
        .build()
        .expect("client")
}

fn echo_server() -> TestServer {
    TestServer::respond(|request| ok(&request.target))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_requests_on_tokio_multi_thread() {
    let server = echo_server();
    let client = client();
    let handles: Vec<_> = (0..100)
        .map(|i| {
            let client = client.clone();
            let url = server.url(&format!("/req/{i}"));
            tokio::spawn(async move { client.get(url).send().await })
        })
        .collect();
    for (i, handle) in handles.into_iter().enumerate() {
        let response = handle.await.expect("task").expect("response");
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), format!("/req/{i}"));
    }
    assert_eq!(server.requests().len(), 100);
    assert_settles(&client, WAIT);
    client.close();
}

#[tokio::test]
async fn concurrent_requests_on_tokio_current_thread() {
    let server = echo_server();
    let client = client();
    let a = client.get(server.url("/a")).send();
    let b = client.get(server.url("/b")).send();
    let c = client.post(server.url("/c")).body("x").send();
    let (a, b, c) = tokio::join!(a, b, c);
    assert_eq!(a.unwrap().text().await.unwrap(), "/a");
    assert_eq!(b.unwrap().text().await.unwrap(), "/b");
    assert_eq!(c.unwrap().text().await.unwrap(), "/c");
    // Sequential awaits reuse a pooled connection. Each body is read to
    // its end: its connection is back in the pool before that read is
    // woken (a body dropped unread goes back from its loop a moment later,
    // which the next request could race).
    let accepted = server.connections_accepted();
    for _ in 0..5 {
        let response = client.get(server.url("/again")).send().await.unwrap();
        response.bytes().await.unwrap();
    }
    assert_eq!(server.connections_accepted(), accepted);
    client.close();
}

#[tokio::test]
async fn a_timeout_error_arrives_through_await() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = client();
    let error = client
        .get(server.url("/"))
        .request_timeout(Duration::from_millis(100))
        .send()
        .await
        .unwrap_err();
    assert!(matches!(error, Error::RequestTimeout(_)), "{error:?}");
    client.close();
}

#[tokio::test]
async fn a_future_dropped_by_tokio_timeout_cancels_its_request() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = client();
    let outcome = tokio::time::timeout(
        Duration::from_millis(100),
        client.get(server.url("/")).send(),
    )
    .await;
    assert!(outcome.is_err(), "the server never answers");
    // The future was dropped: its connection is closed, nothing left armed.
    assert!(server.wait_for_open(0, WAIT));
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn block_on_drives_a_request_with_only_a_thread_waker() {
    let server = echo_server();
    let client = client();
    let (result, stats) = block_on_counting(client.get(server.url("/parked")).send());
    assert_eq!(result.unwrap().text().wait().unwrap(), "/parked");
    assert!(
        stats.polls >= 1 && stats.polls <= stats.wakes + 1,
        "{stats:?}"
    );
    // Several at once, joined by hand.
    let futures: Vec<_> = (0..10)
        .map(|i| client.get(server.url(&format!("/{i}"))).send())
        .collect();
    let responses = block_on(async move {
        let mut out = Vec::new();
        for future in futures {
            out.push(future.await);
        }
        out
    });
    for (i, response) in responses.into_iter().enumerate() {
        assert_eq!(response.unwrap().text().wait().unwrap(), format!("/{i}"));
    }
    assert_settles(&client, WAIT);
    client.close();
}

/// A blocking wait for a hedged request (which polls its attempts, parked
/// between polls) in a task spawned on a `LocalSet` inside a
/// multi-threaded runtime: the client's loops are its own, so the wait
/// parks as it is — tokio refuses `block_in_place` there (a panic), which
/// only a wait for loops an executor drives needs.
#[test]
fn a_hedged_wait_in_a_local_set_task_is_no_panic() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = echo_server();
    let client = Client::builder()
        .event_loops(1)
        .request_timeout(Duration::from_secs(20))
        .hedge(tickless::hedge::Policy::after(Duration::from_secs(10)))
        .build()
        .unwrap();
    let url = server.url("/local");
    let local = tokio::task::LocalSet::new();
    let waited = rt.block_on(local.run_until(async move {
        let task =
            tokio::task::spawn_local(async move { client.get(url).send().wait()?.text().wait() });
        task.await
    }));
    assert_eq!(waited.expect("the task panicked").unwrap(), "/local");
}

/// The same for a request waiting in its host's queue for a connection,
/// which has no loop yet: its wait, too, asks for `block_in_place` only
/// for loops an executor drives.
#[test]
fn a_queued_wait_in_a_local_set_task_is_no_panic() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = TestServer::echo_slow_after(Duration::from_millis(200));
    let client = Client::builder()
        .event_loops(1)
        .request_timeout(Duration::from_secs(20))
        .max_connections_per_host(1)
        .build()
        .unwrap();
    // Holds the host's one connection until its answer.
    let busy = client.get(server.url("/slow")).send();
    assert!(server.wait_for_requests(1, WAIT));
    let url = server.url("/queued");
    let local = tokio::task::LocalSet::new();
    let waited = rt.block_on(local.run_until(async move {
        let task =
            tokio::task::spawn_local(async move { client.get(url).send().wait()?.text().wait() });
        task.await
    }));
    assert_eq!(waited.expect("the task panicked").unwrap(), "/queued");
    assert_eq!(busy.wait().unwrap().status(), 200);
}

/// On a `ManualClock`, advanced only once the first poll has left the
/// future pending: the timeout cannot have fired before that poll (a
/// thread stalled between `send` and its first poll for longer than the
/// timeout would find it ready at once, never woken), so the result comes
/// through a wake.
#[test]
fn block_on_is_woken_by_a_timeout_on_the_wheel() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let clock = ManualClock::new();
    let client = Client::builder()
        .clock(Arc::new(clock.clone()))
        .event_loops(2)
        .request_timeout(Duration::from_secs(20))
        .build()
        .expect("client");
    let future = client
        .get(server.url("/"))
        .request_timeout(Duration::from_millis(100))
        .send();
    let (result, stats) = block_on_counting_after_first_poll(future, || {
        // Armed, so that the advance reaches it.
        assert!(eventually(WAIT, || client.stats().armed_timers() > 0));
        clock.advance(Duration::from_millis(100));
    });
    assert!(
        matches!(result, Err(Error::RequestTimeout(_))),
        "{result:?}"
    );
    assert!(stats.wakes >= 1, "{stats:?}");
    client.close();
}

#[test]
fn block_on_an_invalid_request_is_ready_at_once() {
    let client = client();
    let (result, stats) = block_on_counting(client.get("ftp://nowhere/").send());
    assert!(matches!(result, Err(Error::InvalidRequest(_))));
    assert_eq!(stats.polls, 1);
    client.close();
}

#[test]
fn waiting_on_a_future_already_polled_to_completion_panics_instead_of_hanging() {
    let server = echo_server();
    let client = client();
    let requests = [client.get(server.url("/")), client.get("ftp://nowhere/")];
    for request in requests {
        let mut future = request.send();
        let _ = block_on(&mut future);
        let message = panic_of(|| future.wait().map(|_| ()));
        assert!(message.contains("after it completed"), "{message}");
    }
    client.close();
}

/// The message of the panic `f` ends with; fails if it returns.
fn panic_of<T: std::fmt::Debug>(f: impl FnOnce() -> T) -> String {
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .expect_err("a second outcome, not a panic");
    let message = panic.downcast_ref::<String>().cloned();
    message
        .or_else(|| panic.downcast_ref::<&str>().map(|m| m.to_string()))
        .unwrap_or_default()
}

#[test]
fn a_body_collector_polled_or_waited_for_after_its_outcome_panics_not_empty() {
    // A whole body, then an empty one for the same, would look like a
    // second, empty response: the collectors panic as ResponseFuture does.
    let server = echo_server();
    let client = client();
    let mut bytes = client.get(server.url("/b")).send().wait().unwrap().bytes();
    assert_eq!(block_on(&mut bytes).unwrap(), "/b");
    let mut cx = Context::from_waker(Waker::noop());
    let polled = panic_of(|| Future::poll(Pin::new(&mut bytes), &mut cx).map(|b| b.ok()));
    assert!(polled.contains("after it completed"), "{polled}");

    let mut bytes = client.get(server.url("/w")).send().wait().unwrap().bytes();
    assert_eq!(block_on(&mut bytes).unwrap(), "/w");
    let waited = panic_of(|| bytes.wait().ok());
    assert!(waited.contains("after it completed"), "{waited}");

    let mut text = client.get(server.url("/t")).send().wait().unwrap().text();
    assert_eq!(block_on(&mut text).unwrap(), "/t");
    let polled = panic_of(|| Future::poll(Pin::new(&mut text), &mut cx).map(|t| t.ok()));
    assert!(polled.contains("after it completed"), "{polled}");
    client.close();
}

#[test]
fn is_done_means_the_next_poll_is_ready() {
    struct SlowToHear;
    impl tickless::EventListener for SlowToHear {
        fn on_completed(&self, _request: &tickless::RequestInfo, _status: http::StatusCode) {
            // The exchange has ended; the outcome is stored after this.
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let server = echo_server();
    let client = client();
    let mut future = client
        .get(server.url("/"))
        .listener(Arc::new(SlowToHear))
        .send();
    assert!(eventually(Duration::from_secs(10), || future.is_done()));
    let mut cx = Context::from_waker(Waker::noop());
    let polled = Future::poll(Pin::new(&mut future), &mut cx);
    assert!(polled.is_ready(), "is_done() said so, the poll was pending");
    client.close();
}

/// A body dropped before its end ends its exchange at once: the
/// connection closes (the next request opens another), nothing is left
/// armed, and the body is read no further.
#[test]
fn a_body_dropped_halfway_closes_its_connection_and_disarms_its_timers() {
    let (first_sent, on_first_sent) = std::sync::mpsc::channel::<()>();
    let first_sent = Mutex::new(first_sent);
    let server = TestServer::start(Behaviour::custom(move |mut stream, index| {
        let mut reader = RequestReader::new(index);
        if reader.read_request(&mut stream).is_err() {
            return;
        }
        if index == 0 {
            // A head, the first chunk, then nothing until the client hangs up.
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n");
            let _ = first_sent.lock().unwrap().send(());
            drain(&mut stream);
        } else {
            let _ = stream.write_all(&ok("second"));
            drain(&mut stream);
        }
    }));
    let client = client();
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    on_first_sent.recv_timeout(WAIT).unwrap();
    assert_eq!(
        response.chunk().wait().unwrap().as_deref(),
        Some(&b"first"[..])
    );
    drop(response);
    assert!(server.wait_for_open(0, WAIT), "the connection stayed open");
    assert_settles(&client, WAIT);
    let next = client.get(server.url("/")).send().wait().unwrap();
    assert_eq!(next.text().wait().unwrap(), "second");
    assert_eq!(server.connections_accepted(), 2);
    client.close();
}

#[test]
fn wait_from_many_threads() {
    let server = echo_server();
    let client = client();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let client = &client;
                let server = &server;
                scope.spawn(move || {
                    for i in 0..10 {
                        let path = format!("/t{t}/{i}");
                        let response = client.get(server.url(&path)).send().wait().unwrap();
                        assert_eq!(response.text().wait().unwrap(), path);
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
    });
    assert_eq!(server.requests().len(), 80);
    assert!(server.connections_accepted() <= 8);
    assert_settles(&client, WAIT);
    client.close();
}

/// A response future is `Sync`, as hyper's and reqwest's are: code that
/// boxes its futures as `Send + Sync` (warp's `boxed`, a `Box<dyn Future +
/// Send + Sync>` in a service), or that holds a borrow of one across an
/// `.await` in a spawned task (its `is_done`, its `cancel`), takes it —
/// whatever its body, a reader's or a stream's. The body, the collectors
/// and the upload are `Sync` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_future_is_sync_whatever_its_body() {
    fn send_sync<T: Send + Sync + Unpin>(value: T) -> T {
        value
    }
    let server =
        TestServer::respond(|request| ok(&format!("{} {}", request.target, request.body.len())));
    let client = client();
    let from_reader = tickless::Upload::from_reader(std::io::Cursor::new(b"read".to_vec()), None);
    let from_stream = tickless::Upload::from_stream(support::bodies::Throttled::new(2));
    let boxed: Pin<Box<dyn Future<Output = Result<tickless::Response, Error>> + Send + Sync>> =
        Box::pin(
            client
                .post(server.url("/reader"))
                .body(send_sync(from_reader))
                .send(),
        );
    let response = send_sync(boxed.await.unwrap());
    assert_eq!(send_sync(response.text()).await.unwrap(), "/reader 4");
    // A borrow held across an await in a spawned task.
    let url = server.url("/stream");
    let task = tokio::spawn(async move {
        let future = client.post(url).body(from_stream).send();
        let watched = &future;
        while !watched.is_done() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        future.await
    });
    let response = task.await.unwrap().unwrap();
    assert_eq!(
        send_sync(response.into_body())
            .chunk()
            .await
            .unwrap()
            .as_deref(),
        Some(&b"/stream 10"[..])
    );
}
