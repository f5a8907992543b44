//! First contact: a GET and a POST round trip, sequential reuse, a timeout.

mod support;

use std::time::Duration;
use support::*;

#[test]
fn get_and_post_round_trip_on_one_connection() {
    let server = TestServer::respond(|request| {
        let body = format!(
            "{} {} {}",
            request.method,
            request.target,
            String::from_utf8_lossy(&request.body)
        );
        response(200, &[("X-Echo", "yes")], body.as_bytes())
    });
    let client = tickless::Client::builder().event_loops(2).build().unwrap();
    let response = client.get(server.url("/a?b=c")).send().wait().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-echo"], "yes");
    assert_eq!(response.text().wait().unwrap(), "GET /a?b=c ");
    for i in 0..5 {
        let response = client
            .post(server.url("/p"))
            .header("Content-Type", "text/plain")
            .body(format!("n={i}"))
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.text().wait().unwrap(), format!("POST /p n={i}"));
    }
    assert_eq!(
        server.connections_accepted(),
        1,
        "sequential requests must reuse one connection"
    );
    let stats = client.stats();
    assert_eq!(stats.armed_timers(), 0, "{stats:?}");
    assert_eq!(stats.in_flight, 0);
}

#[test]
fn request_timeout_against_a_server_that_never_answers() {
    let server = TestServer::start(Behaviour::NeverAnswer);
    let client = tickless::Client::builder()
        .wheel_tick(Duration::from_millis(5))
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let error = client
        .get(server.url("/"))
        .request_timeout(Duration::from_millis(100))
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "fired early"
    );
    assert!(
        matches!(error, tickless::Error::RequestTimeout(_)),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "Request timeout to 127.0.0.1/{} after 100 ms",
            server.addr()
        )
    );
    client.close();
}
