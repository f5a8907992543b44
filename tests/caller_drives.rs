//! A caller blocked on an exchange drives the exchange's loop while the
//! loop's thread has left it idle (see `EventLoop`, "Who drives a loop"):
//! a sequential caller's requests run on its own thread, every byte still
//! arrives, and nothing else on the loop — async requests beside it, a
//! body read by a poll — waits on it.

mod support;

use std::io::Read;
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use support::h2_server::{answer, H2Server};
use support::*;

const CEILING: Duration = Duration::from_secs(30);

fn one_loop_client(recorder: &Arc<Recorder>) -> tickless::Client {
    tickless::Client::builder()
        .event_loops(1)
        .listener(recorder.clone())
        .build()
        .expect("client")
}

/// Runs `round` [`ROUNDS`] times, up to [`TRIES`] times over, until most
/// of a try's requests were sent from this thread (`recorder`'s
/// `RequestSent` events): fails if no try had most sent here.
fn most_sent_from_the_callers_thread(recorder: &Recorder, mut round: impl FnMut(usize)) {
    let me = thread::current().id();
    let mut sent_here_per_try = Vec::new();
    for _ in 0..TRIES {
        let events_before = recorder.events().len();
        for index in 0..ROUNDS {
            round(index);
        }
        let sent_here = recorder.events()[events_before..]
            .iter()
            .filter(|(e, on)| matches!(e, Event::RequestSent(_)) && *on == me)
            .count();
        sent_here_per_try.push(sent_here);
        if sent_here >= ROUNDS / 2 {
            return;
        }
    }
    panic!("{sent_here_per_try:?} of {ROUNDS} requests sent from the caller's thread, per try");
}

/// Sequential requests a try of [`most_sent_from_the_callers_thread`] makes.
const ROUNDS: usize = 60;
/// Tries of [`most_sent_from_the_callers_thread`].
const TRIES: usize = 5;

/// The caller's requests after the first are sent from its own thread
/// (it drives the loop), and their bodies — whole, streamed through the
/// reader, a chunk at a time — arrive byte-exact. "Most" rather than
/// "all": a caller stalled by the machine between its release of the loop
/// and its next drive, when the loop's thread looks (once per grace, 1 ms),
/// finds the loop taken back by its thread, and that request goes the
/// loop's way. A machine busy enough to do that to half the rounds of a
/// try (a 3 ms sleep of the caller's between rounds does it to all) has
/// the try run again, on the same connection: every body of every try is
/// checked, and one try of the few must have most of its requests sent
/// from the caller's thread — a caller that never drives fails them all.
#[test]
fn a_sequential_callers_requests_are_driven_by_the_caller() {
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let served = body.clone();
    let server = TestServer::respond(move |_| response(200, &[], &served));
    let recorder = Recorder::new();
    let client = one_loop_client(&recorder);
    most_sent_from_the_callers_thread(&recorder, |round| {
        let mut response = client.get(server.url("/")).send().wait().unwrap();
        let got = match round % 3 {
            0 => response.bytes().wait().unwrap().to_vec(),
            1 => {
                let mut all = Vec::new();
                response.body_mut().read_to_end(&mut all).unwrap();
                all
            }
            _ => {
                let mut all = Vec::new();
                while let Some(chunk) = response.chunk().wait().unwrap() {
                    all.extend_from_slice(&chunk);
                }
                all
            }
        };
        assert!(
            got == body,
            "round {round}: {} bytes, not the body",
            got.len()
        );
    });
    assert_eq!(server.connections_accepted(), 1);
    client.close();
}

/// The same over one HTTP/2 connection: a request for a stream of a
/// shared connection does not wake the idle loop's thread either (it did:
/// the thread took the loop back for each request, and the caller slept
/// on a condition variable for its answer — two futex wake-ups and two
/// switches a request), so the caller sends it when it drives. "Most", and
/// tries, as above.
#[test]
fn a_sequential_callers_http2_requests_are_driven_by_the_caller() {
    let server = H2Server::start(|stream| answer(stream, 200, b"over h2"));
    let recorder = Recorder::new();
    let client = tickless::Client::builder()
        .event_loops(1)
        .http2_prior_knowledge()
        .listener(recorder.clone())
        .build()
        .expect("client");
    most_sent_from_the_callers_thread(&recorder, |_| {
        let response = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(response.text().wait().unwrap(), "over h2");
    });
    client.close();
}

/// Async requests on the loop a blocking caller keeps driving, and a body
/// read by polls after a head waited for: each completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polled_requests_beside_a_driving_caller_all_complete() {
    let server = TestServer::respond(|_| ok("beside"));
    let recorder = Recorder::new();
    let client = one_loop_client(&recorder);
    let blocking = {
        let (client, url) = (client.clone(), server.url("/"));
        thread::spawn(move || {
            for _ in 0..300 {
                let response = client.get(&url).send().wait().unwrap();
                assert_eq!(response.text().wait().unwrap(), "beside");
            }
        })
    };
    let polled = (0..50).map(|_| {
        let (client, url) = (client.clone(), server.url("/"));
        tokio::spawn(async move {
            for _ in 0..6 {
                let response = client.get(&url).send().await.unwrap();
                assert_eq!(response.text().await.unwrap(), "beside");
            }
        })
    });
    let polled: Vec<_> = polled.collect();
    tokio::time::timeout(CEILING, async {
        for task in polled {
            task.await.unwrap();
        }
    })
    .await
    .expect("the polled requests completed");
    // A head waited for, its body then polled.
    let response = {
        let (client, url) = (client.clone(), server.url("/"));
        tokio::task::spawn_blocking(move || client.get(url).send().wait().unwrap())
            .await
            .unwrap()
    };
    let text = tokio::time::timeout(CEILING, response.text()).await;
    assert_eq!(text.expect("the polled body completed").unwrap(), "beside");
    let joined = tokio::task::spawn_blocking(move || blocking.join()).await;
    joined.unwrap().unwrap();
    client.close();
}

/// A request timeout on a server that stalls, waited for by a caller that
/// drives the loop (the second request, on the pooled connection): it
/// fails with the timeout, not before it, in both timeout modes.
#[test]
fn a_driving_caller_still_gets_its_request_timeout_in_both_modes() {
    for event_loop_timeouts in [false, true] {
        let server = TestServer::start(Behaviour::custom(|mut stream, index| {
            use std::io::Write;
            let mut reader = RequestReader::new(index);
            if reader.read_request(&mut stream).is_ok() {
                let _ = stream.write_all(&ok("first"));
            }
            let _ = reader.read_request(&mut stream);
            thread::sleep(Duration::from_secs(1));
        }));
        let client = tickless::Client::builder()
            .event_loops(1)
            .use_event_loop_timeouts(event_loop_timeouts)
            .build()
            .unwrap();
        let first = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(first.text().wait().unwrap(), "first");
        let timeout = Duration::from_millis(100);
        let started = std::time::Instant::now();
        let error = client
            .get(server.url("/"))
            .request_timeout(timeout)
            .send()
            .wait()
            .and_then(|r| r.bytes().wait())
            .unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(error, tickless::Error::RequestTimeout(_)),
            "mode {event_loop_timeouts}: {error:?}"
        );
        assert!(
            took >= timeout,
            "mode {event_loop_timeouts}: after {took:?}"
        );
        assert!(took < CEILING, "mode {event_loop_timeouts}: after {took:?}");
        client.close();
    }
}
