//! Helpers for tests that drive a `tickless::Client`: an event recorder
//! (an `EventListener` that notes every call and the thread it ran on), and
//! polling for a client to settle once its exchanges have ended.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};
use tickless::{ConnectionInfo, EventListener};

/// One listener call.
#[derive(Debug, Clone)]
pub enum Event {
    Resolved(String, Vec<SocketAddr>),
    ConnectAttempt(SocketAddr),
    ConnectSuccess(ConnectionInfo),
    ConnectFailure(SocketAddr, std::io::ErrorKind),
    TlsHandshakeAttempt(ConnectionInfo),
    /// The connection and the ALPN protocol chosen.
    TlsHandshakeSuccess(ConnectionInfo, Option<Vec<u8>>),
    /// The connection and the error's `Display`.
    TlsHandshakeFailure(ConnectionInfo, String),
    ConnectionPooled(ConnectionInfo),
    ConnectionOffered(ConnectionInfo),
    /// A request's head, as it goes on the connection.
    RequestHead(ConnectionInfo),
    RequestSent(ConnectionInfo),
    /// An interim (1xx) head, as it came.
    InterimHead(HeadTold),
    Status(http::StatusCode),
    Headers(http::HeaderMap),
    /// The final head, as it came.
    ResponseHead(HeadTold),
    BodyPart(usize),
    Completed(http::StatusCode),
    /// The error's `Display` and whether it is a timeout.
    Failed(String, bool),
    /// The connection and the protocol it settled on.
    ProtocolNegotiated(ConnectionInfo, http::Version),
    /// An HTTP/2 stream opened, with its id.
    StreamOpened(ConnectionInfo, u32),
    /// The server's GOAWAY, with its error code.
    GoAway(ConnectionInfo, u32),
    /// The status that redirected, from where, to where.
    Redirect(http::StatusCode, String, String),
    /// The attempt that starts, after what delay, and why (its message
    /// with its causes, [`chain_text`]).
    Retry(u32, Duration, String),
    /// The hedged copy sent.
    Hedge(u32),
}

/// A response head as a listener was told it: a `tickless::ResponseHead`'s
/// parts, owned.
#[derive(Debug, Clone)]
pub struct HeadTold {
    pub version: http::Version,
    pub status: http::StatusCode,
    /// The reason phrase as `ResponseHead::reason` gives it.
    pub reason: Vec<u8>,
    pub headers: http::HeaderMap,
}

impl HeadTold {
    fn of(head: &tickless::ResponseHead<'_>) -> HeadTold {
        HeadTold {
            version: head.version(),
            status: head.status(),
            reason: head.reason().to_vec(),
            headers: head.headers().clone(),
        }
    }

    /// `VERSION STATUS REASON [name: value, ...]`, its fields in order (the
    /// reason lossily UTF-8).
    pub fn line(&self) -> String {
        let fields: Vec<String> = self
            .headers
            .iter()
            .map(|(name, value)| format!("{name}: {}", String::from_utf8_lossy(value.as_bytes())))
            .collect();
        format!(
            "{:?} {} {} {fields:?}",
            self.version,
            self.status.as_u16(),
            String::from_utf8_lossy(&self.reason)
        )
    }
}

impl Event {
    /// The name of the listener method that told it, without its `on_`:
    /// `connect_attempt`, `status`, `completed`.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Resolved(..) => "resolved",
            Event::ConnectAttempt(_) => "connect_attempt",
            Event::ConnectSuccess(_) => "connect_success",
            Event::ConnectFailure(..) => "connect_failure",
            Event::TlsHandshakeAttempt(_) => "tls_handshake_attempt",
            Event::TlsHandshakeSuccess(..) => "tls_handshake_success",
            Event::TlsHandshakeFailure(..) => "tls_handshake_failure",
            Event::ConnectionPooled(_) => "connection_pooled",
            Event::ConnectionOffered(_) => "connection_offered",
            Event::RequestHead(_) => "request_head",
            Event::RequestSent(_) => "request_sent",
            Event::InterimHead(_) => "interim_head",
            Event::Status(_) => "status",
            Event::Headers(_) => "headers",
            Event::ResponseHead(_) => "response_head",
            Event::BodyPart(_) => "body_part",
            Event::Completed(_) => "completed",
            Event::Failed(..) => "failed",
            Event::ProtocolNegotiated(..) => "protocol_negotiated",
            Event::StreamOpened(..) => "stream_opened",
            Event::GoAway(..) => "goaway",
            Event::Redirect(..) => "redirect",
            Event::Retry(..) => "retry",
            Event::Hedge(_) => "hedge",
        }
    }
}

/// Records every listener call, with the id of the thread it ran on and
/// the attempt it was told of (none for a connection's `on_goaway`).
#[derive(Default)]
pub struct Recorder {
    events: Mutex<Vec<Told>>,
    /// How long it blocks the thread telling a status or a body part.
    pause: Duration,
}

/// One call a [`Recorder`] noted.
#[derive(Clone)]
struct Told {
    event: Event,
    thread: ThreadId,
    /// [`tickless::RequestInfo::attempt_id`].
    attempt: Option<u64>,
}

impl Recorder {
    pub fn new() -> Arc<Recorder> {
        Arc::new(Recorder::default())
    }

    /// A recorder that blocks its teller for `pause` on each status and
    /// body part: what a slow listener does to the loop that tells it.
    pub fn pausing(pause: Duration) -> Arc<Recorder> {
        Arc::new(Recorder {
            events: Mutex::default(),
            pause,
        })
    }

    fn told(&self) -> std::sync::MutexGuard<'_, Vec<Told>> {
        self.events.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes `event`, told of `request`'s attempt.
    fn push(&self, request: &tickless::RequestInfo, event: Event) {
        self.note(Some(request.attempt_id()), event);
    }

    /// [`push`](Self::push), then blocks for the recorder's pause.
    fn push_and_pause(&self, request: &tickless::RequestInfo, event: Event) {
        self.push(request, event);
        thread::sleep(self.pause);
    }

    fn note(&self, attempt: Option<u64>, event: Event) {
        let thread = thread::current().id();
        self.told().push(Told {
            event,
            thread,
            attempt,
        });
    }

    /// Every call so far, in order, with its thread.
    pub fn events(&self) -> Vec<(Event, ThreadId)> {
        self.told()
            .iter()
            .map(|told| (told.event.clone(), told.thread))
            .collect()
    }

    /// The attempts told of, in the order each was first told of, each
    /// with the [names](Event::name) of its events in order.
    pub fn attempts(&self) -> Vec<(u64, Vec<&'static str>)> {
        let mut attempts: Vec<(u64, Vec<&'static str>)> = Vec::new();
        for told in self.told().iter() {
            let Some(id) = told.attempt else { continue };
            let name = told.event.name();
            match attempts.iter_mut().find(|(seen, _)| *seen == id) {
                Some((_, events)) => events.push(name),
                None => attempts.push((id, vec![name])),
            }
        }
        attempts
    }

    /// The statuses told so far, in order, and whether any retry was told:
    /// what a request sent again by the client itself (no retry) shows.
    pub fn statuses_and_retried(&self) -> (Vec<u16>, bool) {
        let events = self.events();
        let statuses = events
            .iter()
            .filter_map(|(event, _)| match event {
                Event::Status(status) => Some(status.as_u16()),
                _ => None,
            })
            .collect();
        let retried = events
            .iter()
            .any(|(event, _)| matches!(event, Event::Retry(..)));
        (statuses, retried)
    }

    /// The heads told so far and the statuses between them, in order:
    /// `interim LINE` for an interim head, `status CODE`, `final LINE` for
    /// the final head ([`HeadTold::line`]).
    pub fn heads(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter_map(|(event, _)| match event {
                Event::InterimHead(head) => Some(format!("interim {}", head.line())),
                Event::Status(status) => Some(format!("status {}", status.as_u16())),
                Event::ResponseHead(head) => Some(format!("final {}", head.line())),
                _ => None,
            })
            .collect()
    }

    /// The messages of the failures told so far (`on_failed`), in order.
    pub fn failures(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter_map(|(event, _)| match event {
                Event::Failed(message, _) => Some(message),
                _ => None,
            })
            .collect()
    }

    /// How many exchanges were told completed (`on_completed`) so far.
    pub fn completions(&self) -> usize {
        self.count("completed")
    }

    /// How many events [named](Event::name) `name` were told so far.
    pub fn count(&self, name: &str) -> usize {
        let told = self.told();
        told.iter().filter(|told| told.event.name() == name).count()
    }

    /// Forgets what was recorded.
    pub fn clear(&self) {
        self.told().clear();
    }

    /// Blocks until `pred` holds for the events recorded; false on timeout.
    pub fn wait_for(&self, timeout: Duration, pred: impl Fn(&[(Event, ThreadId)]) -> bool) -> bool {
        eventually(timeout, || pred(&self.events()))
    }

    /// The connections made, in the order they connected.
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.events()
            .into_iter()
            .filter_map(|(event, _)| match event {
                Event::ConnectSuccess(info) => Some(info),
                _ => None,
            })
            .collect()
    }

    /// The thread of the first `on_failed` call, if any.
    pub fn failed_on(&self) -> Option<ThreadId> {
        self.events()
            .into_iter()
            .find_map(|(e, t)| matches!(e, Event::Failed(..)).then_some(t))
    }
}

/// On a manual clock that stands at `response`'s last read, whose read
/// timeout is `period`: advanced a nanosecond short of the period, the
/// timeout has not fired (`recorder` tells no failure, a pause later);
/// advanced by that nanosecond, it fires, and the body's next read fails
/// with it. `case` names the case in messages.
pub fn read_timeout_fires_a_period_after_the_last_read(
    clock: &tickless::timer::ManualClock,
    recorder: &Recorder,
    response: &mut tickless::Response,
    period: Duration,
    case: &str,
) {
    clock.advance(period - Duration::from_nanos(1));
    // A wrongly fired timeout would show itself within this pause.
    thread::sleep(Duration::from_millis(50));
    assert_eq!(
        recorder.failed_on(),
        None,
        "{case}: fired before its deadline"
    );
    clock.advance(Duration::from_nanos(1));
    assert!(
        recorder.wait_for(Duration::from_secs(20), |events| events
            .iter()
            .any(|(e, _)| matches!(e, Event::Failed(_, true)))),
        "{case}: never fired"
    );
    let error = response.chunk().wait().unwrap_err();
    assert!(
        matches!(error, tickless::Error::ReadTimeout(ref t) if t.duration == period),
        "{case}: {error:?}"
    );
}

impl EventListener for Recorder {
    fn on_resolved(&self, request: &tickless::RequestInfo, host: &str, addrs: &[SocketAddr]) {
        self.push(request, Event::Resolved(host.to_owned(), addrs.to_vec()));
    }
    fn on_connect_attempt(&self, request: &tickless::RequestInfo, remote: SocketAddr) {
        self.push(request, Event::ConnectAttempt(remote));
    }
    fn on_connect_success(&self, request: &tickless::RequestInfo, connection: &ConnectionInfo) {
        self.push(request, Event::ConnectSuccess(connection.clone()));
    }
    fn on_connect_failure(
        &self,
        request: &tickless::RequestInfo,
        remote: SocketAddr,
        error: &std::io::Error,
    ) {
        self.push(request, Event::ConnectFailure(remote, error.kind()));
    }
    fn on_tls_handshake_attempt(
        &self,
        request: &tickless::RequestInfo,
        connection: &ConnectionInfo,
    ) {
        self.push(request, Event::TlsHandshakeAttempt(connection.clone()));
    }
    fn on_tls_handshake_success(
        &self,
        request: &tickless::RequestInfo,
        connection: &ConnectionInfo,
        alpn: Option<&[u8]>,
    ) {
        self.push(
            request,
            Event::TlsHandshakeSuccess(connection.clone(), alpn.map(<[u8]>::to_vec)),
        );
    }
    fn on_tls_handshake_failure(
        &self,
        request: &tickless::RequestInfo,
        connection: &ConnectionInfo,
        error: &tickless::Error,
    ) {
        self.push(
            request,
            Event::TlsHandshakeFailure(connection.clone(), error.to_string()),
        );
    }
    fn on_connection_pooled(&self, request: &tickless::RequestInfo, connection: &ConnectionInfo) {
        self.push(request, Event::ConnectionPooled(connection.clone()));
    }
    fn on_connection_offered(&self, request: &tickless::RequestInfo, connection: &ConnectionInfo) {
        self.push(request, Event::ConnectionOffered(connection.clone()));
    }
    fn on_protocol_negotiated(
        &self,
        request: &tickless::RequestInfo,
        connection: &ConnectionInfo,
        version: http::Version,
    ) {
        self.push(
            request,
            Event::ProtocolNegotiated(connection.clone(), version),
        );
    }
    fn on_stream_opened(
        &self,
        request: &tickless::RequestInfo,
        connection: &ConnectionInfo,
        stream_id: u32,
    ) {
        self.push(request, Event::StreamOpened(connection.clone(), stream_id));
    }
    fn on_goaway(&self, connection: &ConnectionInfo, reason: tickless::Http2Reason) {
        self.note(None, Event::GoAway(connection.clone(), reason.0));
    }
    fn on_request_head(
        &self,
        request: &tickless::RequestInfo,
        connection: &ConnectionInfo,
        _head: &tickless::RequestHead<'_>,
    ) {
        self.push(request, Event::RequestHead(connection.clone()));
    }
    fn on_request_sent(&self, request: &tickless::RequestInfo, connection: &ConnectionInfo) {
        self.push(request, Event::RequestSent(connection.clone()));
    }
    fn on_interim_head(&self, request: &tickless::RequestInfo, head: &tickless::ResponseHead<'_>) {
        self.push(request, Event::InterimHead(HeadTold::of(head)));
    }
    fn on_status(&self, request: &tickless::RequestInfo, status: http::StatusCode) {
        self.push_and_pause(request, Event::Status(status));
    }
    fn on_headers(&self, request: &tickless::RequestInfo, headers: &http::HeaderMap) {
        self.push(request, Event::Headers(headers.clone()));
    }
    fn on_response_head(&self, request: &tickless::RequestInfo, head: &tickless::ResponseHead<'_>) {
        self.push(request, Event::ResponseHead(HeadTold::of(head)));
    }
    fn on_body_part(&self, request: &tickless::RequestInfo, len: usize) {
        self.push_and_pause(request, Event::BodyPart(len));
    }
    fn on_completed(&self, request: &tickless::RequestInfo, status: http::StatusCode) {
        self.push(request, Event::Completed(status));
    }
    fn on_failed(&self, request: &tickless::RequestInfo, error: &tickless::Error) {
        self.push(
            request,
            Event::Failed(error.to_string(), error.is_timeout()),
        );
    }
    fn on_redirect(
        &self,
        request: &tickless::RequestInfo,
        status: http::StatusCode,
        from: &http::Uri,
        to: &http::Uri,
    ) {
        self.push(
            request,
            Event::Redirect(status, from.to_string(), to.to_string()),
        );
    }
    fn on_retry(
        &self,
        request: &tickless::RequestInfo,
        attempt: u32,
        delay: Duration,
        reason: &tickless::Error,
    ) {
        self.push(request, Event::Retry(attempt, delay, chain_text(reason)));
    }
    fn on_hedge(&self, request: &tickless::RequestInfo, copy: u32) {
        self.push(request, Event::Hedge(copy));
    }
}

/// `error`'s message and each of its causes, `: `-separated, as `anyhow`'s
/// `{:#}` shows it: what the tests assert a message by, since each error's
/// `Display` says its own level only and leaves its cause to `source()`.
pub fn chain_text(error: &(dyn std::error::Error + 'static)) -> String {
    tickless::WithCauses(error).to_string()
}

/// A client with two loops and a [`Recorder`] as its listener, the set-up
/// most event and lifecycle tests share.
pub fn recorded_client() -> (tickless::Client, Arc<Recorder>) {
    let recorder = Recorder::new();
    let client = tickless::Client::builder()
        .event_loops(2)
        .listener(recorder.clone())
        .build()
        .expect("client");
    (client, recorder)
}

/// A builder of a client that speaks HTTP/2 in cleartext by prior
/// knowledge (to the servers of `h2_server`), on `event_loops` loops, each
/// request bounded by `request_timeout`: the test's ceiling, so that an
/// exchange that hangs fails the test rather than the run.
pub fn h2c_builder(event_loops: usize, request_timeout: Duration) -> tickless::ClientBuilder {
    tickless::Client::builder()
        .event_loops(event_loops)
        .http2_prior_knowledge()
        .request_timeout(request_timeout)
}

/// A client with one loop and no request or read timeout: an exchange that
/// nothing else ends hangs, and the test's own ceiling says so.
pub fn untimed_client() -> tickless::Client {
    tickless::Client::builder()
        .event_loops(1)
        .request_timeout(Duration::ZERO)
        .read_timeout(Duration::ZERO)
        .build()
        .expect("client")
}

/// GETs `url` with `client` and reads the whole body; both must succeed.
pub fn get_bytes(client: &tickless::Client, url: &str) -> tickless::Bytes {
    client
        .get(url)
        .send()
        .wait()
        .unwrap()
        .bytes()
        .wait()
        .unwrap()
}

/// Polls `cond` (every millisecond) until it holds; false after `timeout`.
/// For state that has no blocking wait, such as client statistics updated
/// by a task posted to a loop.
pub fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// Waits (up to `timeout`) until `client` has no exchange in flight and no
/// exchange timeout armed; panics with its last statistics otherwise.
pub fn assert_settles(client: &tickless::Client, timeout: Duration) {
    if !eventually(timeout, || {
        let stats = client.stats();
        stats.in_flight == 0 && stats.armed_timers() == 0
    }) {
        panic!(
            "client did not settle within {timeout:?}: {:?}",
            client.stats()
        );
    }
}

/// Closes `client` with `futures` in flight: every one ends with
/// `ClientClosed`, and nothing is left in flight or armed.
pub fn assert_close_ends(client: &tickless::Client, futures: Vec<tickless::ResponseFuture>) {
    client.close();
    for future in futures {
        let error = future.wait().err();
        assert!(
            matches!(error, Some(tickless::Error::ClientClosed)),
            "{error:?}"
        );
    }
    let stats = client.stats();
    assert_eq!(stats.armed_timers(), 0);
    assert_eq!(stats.in_flight, 0);
}

/// `elapsed` is at least `deadline` (a timeout never fires early) and less
/// than `deadline + ceiling` (generous, for a loaded machine).
pub fn assert_on_time(elapsed: Duration, deadline: Duration, ceiling: Duration) {
    assert!(
        elapsed >= deadline,
        "fired early: {elapsed:?} < {deadline:?}"
    );
    assert!(
        elapsed < deadline + ceiling,
        "fired far too late: {elapsed:?} for {deadline:?}"
    );
}

/// Sends `request`, which must fail — its head or its body — on time for
/// `deadline` (see [`assert_on_time`]); returns its error.
pub fn fails_on_time(
    request: tickless::RequestBuilder,
    deadline: Duration,
    ceiling: Duration,
) -> tickless::Error {
    let started = Instant::now();
    let error = request
        .send()
        .wait()
        .and_then(|r| r.bytes().wait())
        .unwrap_err();
    assert_on_time(started.elapsed(), deadline, ceiling);
    error
}

/// Holds the loop inside the turn that reads a response's status line:
/// says so on `entered`, then waits (at most `wait`) to be let go.
pub struct HoldingListener {
    entered: Mutex<std::sync::mpsc::Sender<()>>,
    release: Mutex<std::sync::mpsc::Receiver<()>>,
    wait: Duration,
}

impl HoldingListener {
    /// The listener; the receiver told when the loop is held, and the
    /// sender that lets it go.
    pub fn new(
        wait: Duration,
    ) -> (
        Arc<HoldingListener>,
        std::sync::mpsc::Receiver<()>,
        std::sync::mpsc::Sender<()>,
    ) {
        let (entered, has_entered) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel();
        let listener = HoldingListener {
            entered: Mutex::new(entered),
            release: Mutex::new(released),
            wait,
        };
        (Arc::new(listener), has_entered, release)
    }
}

impl EventListener for HoldingListener {
    fn on_status(&self, _request: &tickless::RequestInfo, _status: http::StatusCode) {
        let _ = self.entered.lock().unwrap().send(());
        let _ = self.release.lock().unwrap().recv_timeout(self.wait);
    }
}

/// Runs `f` on a thread of its own; panics with `what` if it has not
/// returned within `ceiling` (a deadlock), and passes its panic on.
pub fn within<T: Send + 'static>(
    what: &str,
    ceiling: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, finished) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(f());
    });
    match finished.recv_timeout(ceiling) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: still blocked after {ceiling:?}")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

/// Waits on `futures` in the order they were sent, each to a `200` whose
/// body reads `body(index)`; `what` names the case in a failure. (Requests
/// sent together and waited on in order: none may be left waiting on one
/// sent after it.)
pub fn each_answered_in_order(
    what: &str,
    futures: Vec<tickless::ResponseFuture>,
    body: impl Fn(usize) -> String,
) {
    for (index, future) in futures.into_iter().enumerate() {
        let response = future
            .wait()
            .unwrap_or_else(|error| panic!("{what}, request {index}: {error:?}"));
        assert_eq!(response.status(), 200, "{what}, request {index}");
        let text = response.text().wait().unwrap();
        assert_eq!(text, body(index), "{what}, request {index}");
    }
}
