//! Code of the caller's that panics on an event loop — a listener, a body
//! callback, a posted task — ends at most its own exchange: the future still
//! resolves, and the loop goes on serving other requests.

mod support;

use std::sync::Arc;
use std::time::Duration;
use support::*;
use tickless::{Client, Error, EventListener};

const WAIT: Duration = Duration::from_secs(10);

struct PanicsOnCompletion;

impl EventListener for PanicsOnCompletion {
    fn on_completed(&self, _status: http::StatusCode) {
        panic!("listener panics");
    }
}

fn client() -> Client {
    Client::builder().event_loops(1).build().unwrap()
}

#[test]
fn a_panicking_listener_still_lets_the_response_through() {
    let server = TestServer::respond(|_| ok("fine"));
    let client = client();
    let future = client
        .get(server.url("/"))
        .listener(Arc::new(PanicsOnCompletion))
        .send();
    assert!(eventually(WAIT, || future.is_done()), "never resolved");
    let response = future.wait().unwrap();
    assert_eq!(response.text(), "fine");
    assert_eq!(
        client.get(server.url("/")).send().wait().unwrap().text(),
        "fine"
    );
    client.close();
}

#[test]
fn a_panicking_body_callback_fails_its_exchange_and_spares_the_loop() {
    let server = TestServer::respond(|_| ok("some body"));
    let client = client();
    let future = client
        .get(server.url("/"))
        .on_body_chunk(|_| panic!("callback panics"))
        .send();
    assert!(eventually(WAIT, || future.is_done()), "never resolved");
    let error = future.wait().unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error:?}");
    assert!(
        server.wait_for_open(0, WAIT),
        "the connection was not closed"
    );
    // The loop is alive: the next request on it succeeds.
    assert_eq!(
        client.get(server.url("/")).send().wait().unwrap().text(),
        "some body"
    );
    assert_settles(&client, WAIT);
    client.close();
}

#[test]
fn a_panicking_task_spares_the_loop() {
    let client = client();
    let event_loop = client.event_loop_group().loops()[0].clone();
    event_loop.execute(|_| panic!("task panics")).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    event_loop.execute(move |_| tx.send(()).unwrap()).unwrap();
    rx.recv_timeout(WAIT)
        .expect("the loop died with the panicking task");
    client.close();
}
