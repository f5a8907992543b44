//! A connection that runs out of stream ids: its last stream finishes,
//! and the requests after it go to a new connection — the client's own
//! decision, not the server's departure (which `h2` refusing the next
//! stream would otherwise look like: a `GOAWAY` told to the listener, and
//! a request sent elsewhere once already failing).

use crate::doc_support::serve_h2;
use crate::error::Http2Reason;
use crate::events::{ConnectionInfo, EventListener, RequestInfo};
use crate::Client;
use std::sync::{Arc, Mutex};

/// The connection and id of each stream opened, and the `GOAWAY`s told.
#[derive(Default)]
struct Streams {
    opened: Mutex<Vec<(u64, u32)>>,
    goaways: Mutex<Vec<Http2Reason>>,
}

impl EventListener for Streams {
    fn on_stream_opened(&self, _: &RequestInfo, connection: &ConnectionInfo, stream_id: u32) {
        self.opened.lock().unwrap().push((connection.id, stream_id));
    }

    fn on_goaway(&self, _: &ConnectionInfo, reason: Http2Reason) {
        self.goaways.lock().unwrap().push(reason);
    }
}

#[test]
fn a_connection_out_of_stream_ids_retires_and_the_next_request_opens_another() {
    let url = serve_h2("fine");
    let streams = Arc::new(Streams::default());
    // Three ids left on each connection: 2^31 - 5, - 3 and - 1.
    let first = super::LAST_STREAM_ID - 4;
    let client = Client::builder()
        .http2_prior_knowledge()
        .http2_first_stream_id(first)
        .listener(streams.clone())
        .build()
        .unwrap();
    for _ in 0..5 {
        let response = client.get(&url).send().wait().unwrap();
        assert_eq!(response.text().wait().unwrap(), "fine");
    }
    let opened = streams.opened.lock().unwrap().clone();
    let ids: Vec<u32> = opened.iter().map(|&(_, id)| id).collect();
    assert_eq!(ids, [first, first + 2, first + 4, first, first + 2]);
    let connections: Vec<u64> = opened.iter().map(|&(conn, _)| conn).collect();
    assert_eq!(connections[..3], [connections[0]; 3]);
    assert_eq!(connections[3..], [connections[3]; 2]);
    assert_ne!(connections[0], connections[3]);
    assert_eq!(*streams.goaways.lock().unwrap(), [], "no server went away");
    client.close();
}

/// Only the server's `GOAWAY` gives the code the streams that fail after
/// it report, and the departure the listener is told of (`on_goaway`): an
/// error of the connection's own (`h2`'s, with a code of its own) is not
/// taken for one.
#[test]
fn an_error_of_the_connections_own_is_no_goaway_code() {
    let own = h2::Error::from(h2::Reason::PROTOCOL_ERROR);
    assert!(!own.is_remote() && own.reason().is_some());
    assert_eq!(super::goaway_error_code(&own), None);
    assert!(matches!(
        super::departure_of(&own),
        super::Departure::Server
    ));
}
