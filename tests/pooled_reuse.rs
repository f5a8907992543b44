//! Reusing a pooled connection without a peek, only when the loop's word
//! on it is fresh: a connection the server closed while the loop was held
//! up elsewhere is not handed a request that cannot go twice, and the
//! request that finds it closed keeps its place in the pool's queue.

mod support;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;
use support::{accept_in_time, ok, response, HoldingListener, RequestReader};
use tickless::Client;

const WAIT: Duration = Duration::from_secs(20);

/// The origin: its first connection answers one request, then closes
/// when told (`close`; `has_closed` says it has); every later one answers
/// each request with "fresh" — "/younger" only once told so through
/// `answer_younger`, if given (or once the wait for its word ends).
struct Origin {
    addr: SocketAddr,
    close: mpsc::Sender<()>,
    has_closed: mpsc::Receiver<()>,
}

fn origin(answer_younger: Option<mpsc::Receiver<()>>) -> Origin {
    let origin = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = origin.local_addr().unwrap();
    let (close, closing) = mpsc::channel::<()>();
    let (closed, has_closed) = mpsc::channel::<()>();
    thread::spawn(move || {
        let mut first = accept_in_time(&origin);
        RequestReader::new(0).read_request(&mut first).unwrap();
        first.write_all(&ok("ok")).unwrap();
        closing.recv().unwrap();
        drop(first);
        closed.send(()).unwrap();
        let answer_younger = Arc::new(Mutex::new(answer_younger));
        for (index, stream) in origin.incoming().enumerate() {
            let mut stream = stream.unwrap();
            let answer_younger = answer_younger.clone();
            thread::spawn(move || {
                let mut reader = RequestReader::new(index + 1);
                while let Ok(request) = reader.read_request(&mut stream) {
                    if request.target == "/younger" {
                        if let Some(word) = &*answer_younger.lock().unwrap() {
                            let _ = word.recv_timeout(WAIT);
                        }
                    }
                    if stream.write_all(&ok("fresh")).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Origin {
        addr,
        close,
        has_closed,
    }
}

/// Has `client`'s first request to `origin` answered (its connection then
/// idle, its socket drained), then holds the client's one loop in the
/// listener of an answer from a second server until the sender returned
/// is told; the thread returned ends with that answer's text.
fn hold_the_loop_after_a_first_answer(
    client: &Client,
    origin: &Origin,
) -> (thread::JoinHandle<String>, mpsc::Sender<()>) {
    let first = client
        .get(format!("http://{}/a", origin.addr))
        .send()
        .wait()
        .unwrap();
    assert_eq!(first.text().wait().unwrap(), "ok");
    let slow = TcpListener::bind("127.0.0.1:0").unwrap();
    let slow_addr = slow.local_addr().unwrap();
    thread::spawn(move || {
        for (index, stream) in slow.incoming().enumerate() {
            let mut stream = stream.unwrap();
            let _ = RequestReader::new(index).read_request(&mut stream);
            let _ = stream.write_all(&ok("slow"));
            thread::sleep(WAIT);
        }
    });
    let (held, has_entered, release) = held_get(client, slow_addr);
    has_entered.recv_timeout(WAIT).unwrap();
    (held, release)
}

/// Sends a GET to `addr` whose answer's listener holds the client's loop
/// until told: the thread that waits for the answer's text, the receiver
/// told once the loop is held, and the sender that lets it go.
fn held_get(
    client: &Client,
    addr: SocketAddr,
) -> (
    thread::JoinHandle<String>,
    mpsc::Receiver<()>,
    mpsc::Sender<()>,
) {
    let (listener, has_entered, release) = HoldingListener::new(WAIT);
    let request = client
        .get(format!("http://{addr}/"))
        .listener(listener)
        .send();
    let answered = thread::spawn(move || request.wait().unwrap().text().wait().unwrap());
    (answered, has_entered, release)
}

/// Has `origin` close its first, idle connection, then sends a POST to it
/// (it runs once the loop is let go).
fn post_once_the_idle_connection_has_closed(
    client: &Client,
    origin: &Origin,
) -> tickless::ResponseFuture {
    origin.close.send(()).unwrap();
    origin.has_closed.recv_timeout(WAIT).unwrap();
    client
        .post(format!("http://{}/b", origin.addr))
        .body("payload")
        .send()
}

/// An [`origin`] that holds its answer to "/younger" until told through the
/// sender returned, and a client of one loop allowed one connection to it.
fn an_origin_on_one_connection() -> (Origin, Client, mpsc::Sender<()>) {
    let (answer_younger, on_answer_younger) = mpsc::channel::<()>();
    let origin = origin(Some(on_answer_younger));
    let client = Client::builder()
        .event_loops(1)
        .max_connections_per_host(1)
        .build()
        .unwrap();
    (origin, client, answer_younger)
}

/// Sends a younger request to `origin` while the loop is held, behind
/// `older` (sent on a connection the origin has closed) for the host's one
/// connection; lets the loop go (`release`). The older must be answered,
/// on a new connection, while the origin still holds the younger's answer
/// (until `answer_younger` says): behind the younger, it would wait as
/// long as that answer takes. Then the younger is answered.
fn older_answered_ahead_of_a_younger(
    client: &Client,
    origin: &Origin,
    older: tickless::ResponseFuture,
    release: mpsc::Sender<()>,
    answer_younger: mpsc::Sender<()>,
) {
    let younger = client.get(format!("http://{}/younger", origin.addr)).send();
    assert!(support::eventually(WAIT, || client.stats().waiting == 1));
    release.send(()).unwrap();
    let older = support::within("the older request, ahead of the younger", WAIT, move || {
        older.wait().and_then(|response| response.text().wait())
    });
    assert_eq!(
        older.unwrap(),
        "fresh",
        "the older went on a new connection"
    );
    answer_younger.send(()).unwrap();
    assert_eq!(younger.wait().unwrap().text().wait().unwrap(), "fresh");
}

#[test]
fn a_post_never_goes_on_a_connection_closed_while_the_loop_was_held_up() {
    let origin = origin(None);
    let client = Client::builder().event_loops(1).build().unwrap();
    let (held, release) = hold_the_loop_after_a_first_answer(&client, &origin);
    // Meanwhile the origin closes the idle connection, and a POST is sent,
    // to run once the loop is let go.
    let post = post_once_the_idle_connection_has_closed(&client, &origin);
    // Held up well past the 500 µs within which the loop trusts its last
    // poll (a longer hold only makes that poll staler).
    thread::sleep(Duration::from_millis(50));
    release.send(()).unwrap();
    let post = post.wait().and_then(|response| response.text().wait());
    assert_eq!(held.join().unwrap(), "slow");
    assert_eq!(post.unwrap(), "fresh", "the POST went on a new connection");
    client.close();
}

/// A request handed a pooled connection its server closed while the loop
/// was held up finds it closed as it runs (a POST always looks), and goes
/// again — ahead of a request sent after it and queued meanwhile for the
/// host's one connection, not behind it: the permit the closed connection
/// gives back serves the oldest waiter, and the first request is older.
/// Here the younger request's answer is held by the server until the
/// older one has its own: behind it, the older would wait as long as the
/// younger's answer takes.
#[test]
fn a_request_finding_its_pooled_connection_closed_keeps_its_place_ahead_of_a_younger_one() {
    let (origin, client, answer_younger) = an_origin_on_one_connection();
    let (held, release) = hold_the_loop_after_a_first_answer(&client, &origin);
    // Meanwhile the origin closes the idle connection; a POST takes it, to
    // run once the loop is let go, and a younger request queues for the
    // host's one connection.
    let post = post_once_the_idle_connection_has_closed(&client, &origin);
    older_answered_ahead_of_a_younger(&client, &origin, post, release, answer_younger);
    assert_eq!(held.join().unwrap(), "slow");
    client.close();
}

/// A server that answers its one connection's first request with `text`
/// once told through the first sender returned, tells the receiver
/// returned once it has written it, then holds the connection open.
fn answering_when_told(text: &'static str) -> (SocketAddr, mpsc::Sender<()>, mpsc::Receiver<()>) {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let (answer, on_answer) = mpsc::channel::<()>();
    let (written, has_written) = mpsc::channel::<()>();
    thread::spawn(move || {
        let mut stream = accept_in_time(&server);
        let _ = RequestReader::new(0).read_request(&mut stream);
        if on_answer.recv_timeout(WAIT).is_ok() && stream.write_all(&ok(text)).is_ok() {
            let _ = written.send(());
            thread::sleep(WAIT);
        }
    });
    (addr, answer, has_written)
}

/// The same race one step earlier: the loop has polled the server's close
/// of the idle connection, but not yet handled it, when a request takes
/// that connection from the pool (its task on its way to the loop) and a
/// younger one queues for the host's one connection. The close must not
/// give the permit to the younger request ahead of the older one: the
/// older request, finding its connection closed as its task runs, goes
/// again at its place. Arranged with two holds of the client's one loop,
/// in the listeners of answers from two other servers: while the first
/// holds it, the second answer and the close arrive, so that the loop's
/// next poll returns both, the answer first; while the second answer's
/// listener holds it, the two requests are sent.
#[test]
fn a_request_whose_pooled_connection_closes_before_its_task_runs_keeps_its_place() {
    let (origin, client, answer_younger) = an_origin_on_one_connection();
    let first = client.get(format!("http://{}/a", origin.addr)).send();
    assert_eq!(first.wait().unwrap().text().wait().unwrap(), "ok");
    let (second_addr, answer_second, second_written) = answering_when_told("second");
    let (first_addr, answer_first, _) = answering_when_told("first");
    let (second, second_entered, release_second) = held_get(&client, second_addr);
    let (first, first_entered, release_first) = held_get(&client, first_addr);
    assert!(support::eventually(WAIT, || client.stats().in_flight == 2));
    // Both requests are out (each waits for its word): the first answer
    // holds the loop.
    answer_first.send(()).unwrap();
    first_entered.recv_timeout(WAIT).unwrap();
    answer_second.send(()).unwrap();
    second_written.recv_timeout(WAIT).unwrap();
    origin.close.send(()).unwrap();
    origin.has_closed.recv_timeout(WAIT).unwrap();
    // Loopback delivers a write and a close before they return: the
    // second answer is in its socket before the close is in the idle one.
    release_first.send(()).unwrap();
    second_entered.recv_timeout(WAIT).unwrap();
    let older = client.get(format!("http://{}/b", origin.addr)).send();
    older_answered_ahead_of_a_younger(&client, &origin, older, release_second, answer_younger);
    assert_eq!(first.join().unwrap(), "first");
    assert_eq!(second.join().unwrap(), "second");
    client.close();
}

/// A server that closes its connection as it answers, without having said
/// `Connection: close`: its answer and its close come in one readable
/// event (here, held back by a listener on the client's one loop until
/// both are in). The connection must close then, not be pooled: before
/// 2026-12-07 it went to the pool, and — the event that told of the close
/// spent — sat there half-closed, counted open and holding its permit,
/// until a request took it or the idle timeout (60 s by default) evicted
/// it: with many such servers, a socket in `CLOSE_WAIT` each.
#[test]
fn a_connection_closed_with_its_answer_is_closed_not_pooled() {
    let client = Client::builder().event_loops(1).build().unwrap();
    let origin = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin_addr = origin.local_addr().unwrap();
    let (has_request, request_read) = mpsc::channel::<()>();
    let (answer, on_answer) = mpsc::channel::<()>();
    let (closed, has_closed) = mpsc::channel::<()>();
    thread::spawn(move || {
        let mut stream = accept_in_time(&origin);
        RequestReader::new(0).read_request(&mut stream).unwrap();
        has_request.send(()).unwrap();
        on_answer.recv_timeout(WAIT).unwrap();
        stream.write_all(&ok("closing")).unwrap();
        drop(stream);
        closed.send(()).unwrap();
    });
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let holder_addr = holder.local_addr().unwrap();
    thread::spawn(move || {
        let mut stream = accept_in_time(&holder);
        let _ = RequestReader::new(0).read_request(&mut stream);
        let _ = stream.write_all(&response(200, &[("Connection", "close")], b"held"));
    });
    let answered = client.get(format!("http://{origin_addr}/")).send();
    request_read.recv_timeout(WAIT).unwrap();
    let (held, has_entered, release) = held_get(&client, holder_addr);
    has_entered.recv_timeout(WAIT).unwrap();
    answer.send(()).unwrap();
    has_closed.recv_timeout(WAIT).unwrap();
    release.send(()).unwrap();
    assert_eq!(held.join().unwrap(), "held");
    assert_eq!(answered.wait().unwrap().text().wait().unwrap(), "closing");
    assert!(
        support::eventually(WAIT, || client.stats().open_connections == 0),
        "a connection left open: {:?}",
        client.stats()
    );
    client.close();
}

/// A server that answers each request, then closes the connection without
/// having said `Connection: close`: its close arrives microseconds after
/// its answer, after the poll that read the answer — and the client's next
/// request, sent at once, comes within the loop's trust in that poll. A
/// request that may go again is retried on a fresh connection should it
/// meet the close; a POST, which may not, must look first (a peek), or it
/// fails. (Without the peek, many of them did: 117 to 141 of 200, and 82
/// in a later run.) A close still in flight as it looks cannot be seen:
/// some may still meet it — on a loaded machine, whose server thread may
/// be descheduled between its answer and its close, 22 to 31 of 200 did
/// (2026-12-06, beside other tests), so the bound is a quarter, below the
/// peekless counts.
#[test]
fn a_post_right_after_an_answer_is_not_sent_on_the_connection_its_server_has_closed() {
    const ROUNDS: usize = 200;
    let server = support::TestServer::start(support::Behaviour::respond_then_close(|_| ok("x")));
    let client = Client::builder().event_loops(1).build().unwrap();
    let text = |request: tickless::RequestBuilder| request.send().wait()?.text().wait();
    let mut failed = Vec::new();
    for round in 0..ROUNDS {
        assert_eq!(
            text(client.get(server.url("/get"))).unwrap(),
            "x",
            "{round}"
        );
        match text(client.post(server.url("/post")).body("payload")) {
            Ok(answer) => assert_eq!(answer, "x"),
            Err(error) => failed.push(error),
        }
    }
    assert!(
        failed.len() <= ROUNDS / 4,
        "{} of {ROUNDS} POSTs met the close, the first: {:?}",
        failed.len(),
        failed.first()
    );
    client.close();
}
