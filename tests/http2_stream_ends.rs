//! How an HTTP/2 stream's end is told, from a server whose frames are
//! written by hand (tests/support/h2_server.rs, `RawH2Server`):
//!
//! * a body dropped after its end has come — the rest of it, or its
//!   trailers, still in `h2`'s buffer behind a full pipe — completes its
//!   exchange, and its stream, ended both ways, is not reset;
//! * a response whose `END_STREAM` comes with trailers is read whole, with
//!   them;
//! * a server that answers before the upload is done and then resets the
//!   stream with `NO_ERROR` (RFC 9113 §8.1) has its answer returned whole,
//!   whether the upload's source ends in the very pass that reads those
//!   frames, later, mid-way, or never; the upload stops there;
//! * a server that answers whole before the upload is done, and does not
//!   reset the stream, gets the rest of the upload: the exchange ends with
//!   it — or, the answer standing, once the server has taken no more of it
//!   for the write timeout, or when the body's reader goes (the stream then
//!   reset with `CANCEL`); that answer stands too when the connection ends
//!   under the upload (a close, its end read with the answer, a connection
//!   error, a keep-alive PING unanswered), even with most of it still
//!   behind a full pipe; a GOAWAY lets the upload go on; a dropped future
//!   ends it with `CANCEL`, freeing its stream, and so does the request
//!   timeout, the answer standing; a refusal (not 2xx) come whole stops
//!   the upload at once, with `CANCEL`;
//! * an answer to HEAD, a 204 or a 304 is whole and empty whatever its
//!   head declares or its DATA carries, and however many a connection
//!   gets (`h2` resets such a 304's stream, and would end the connection
//!   at its 1025th reset); it is whole at its head, though the server
//!   leaves its stream open and says no more (the client resets the
//!   stream with `CANCEL`), and DATA sent on that stream all the same,
//!   with the head or after the reset, harms no other stream;
//! * a listener that cancels its request at an interim (1xx) head frees
//!   the stream there and then, with `CANCEL`, as one that cancels at the
//!   final head does — not a turn of the loop later;
//! * a body that ended with its head says so (`http_body`'s
//!   `is_end_stream`, an exact size hint of 0) before any read; a head
//!   that ends its stream is whole and empty (HEAD's, a 204's declaring a
//!   length, a "trailers-only" one, one after a `103`) or malformed (a
//!   200 declaring bytes it ends without, a `103` ending the stream).
//!
//! To know that the client has read a burst of frames, the server ends it
//! with a PING and waits for the answer: `h2` reads frames in order, so the
//! PING's ACK says that everything before it is in `h2`'s buffers.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;
use support::h2_server::*;
use support::*;
use tickless::http_body::{Body, Frame as BodyFrame};
use tickless::timer::ManualClock;
use tickless::{Bytes, Client, ClientBuilder, Upload};

const CEILING: Duration = Duration::from_secs(20);

/// Response DATA: 4 x 16 KiB, within `h2`'s windows and past a 16 KiB
/// body window, so that most of it waits in `h2`'s buffer.
const PIECE: usize = 16 * 1024;
const PIECES: usize = 4;

/// [`h2c_builder`] with a body window of one [`PIECE`].
fn h2c() -> ClientBuilder {
    h2c_builder(1, CEILING).body_window(PIECE)
}

const PING_PAYLOAD: [u8; 8] = *b"read-all";

/// A PING that, answered, says the client has read every frame before it.
fn ping() -> Vec<u8> {
    frame(PING, 0, 0, &PING_PAYLOAD)
}

/// Reads frames until the answer to [`ping`]; returns those read.
fn until_pong(conn: &mut RawConn) -> Vec<Frame> {
    let mut frames = Vec::new();
    while let Some(frame) = conn.read_frame() {
        let pong = frame.kind == PING && frame.flags & ACK != 0 && frame.payload == PING_PAYLOAD;
        frames.push(frame);
        if pong {
            break;
        }
    }
    frames
}

/// Reads the request's HEADERS (acknowledging the client's SETTINGS) and
/// then frames until one of its DATA; returns the stream id.
fn read_request_and_data(conn: &mut RawConn) -> u32 {
    let id = conn.read_requests(1)[0];
    while let Some(frame) = conn.read_frame() {
        if frame.kind == DATA && frame.stream == id {
            break;
        }
    }
    id
}

/// The response body's DATA frames, the last one ending the stream unless
/// trailers follow.
fn body_frames(id: u32, trailers_follow: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let piece = vec![b'x'; PIECE];
    for i in 0..PIECES {
        let last = i + 1 == PIECES && !trailers_follow;
        out.extend(frame(DATA, if last { END_STREAM } else { 0 }, id, &piece));
    }
    out
}

/// Trailers `x-checksum: abc123` (HPACK: a literal field, new name, not
/// indexed), ending the stream.
fn trailers(id: u32) -> Vec<u8> {
    let mut block = vec![0x00, 10];
    block.extend_from_slice(b"x-checksum");
    block.push(6);
    block.extend_from_slice(b"abc123");
    frame(HEADERS, END_HEADERS | END_STREAM, id, &block)
}

/// The RST_STREAM frames the client sent, by stream.
fn resets(frames: &[Frame]) -> Vec<(u32, u32)> {
    frames
        .iter()
        .filter(|frame| frame.kind == RST_STREAM)
        .map(|frame| {
            let code: [u8; 4] = frame.payload[..4].try_into().unwrap();
            (frame.stream, u32::from_be_bytes(code))
        })
        .collect()
}

/// The frames the client sent on streams (kind, stream), but the empty
/// `END_STREAM` DATA of an upload if `but_an_empty_end`.
fn on_streams(frames: &[Frame], but_an_empty_end: bool) -> Vec<(u8, u32)> {
    let empty_end =
        |frame: &Frame| frame.kind == DATA && frame.flags == END_STREAM && frame.payload.is_empty();
    frames
        .iter()
        .filter(|frame| frame.stream != 0)
        .filter(|frame| !(but_an_empty_end && empty_end(frame)))
        .map(|frame| (frame.kind, frame.stream))
        .collect()
}

/// How the exchange ended, as its listener was told: `Ok(status)` or
/// `Err(error's Display)` — waiting for it, up to the ceiling.
fn ended(recorder: &Recorder) -> Result<u16, String> {
    let ending = || {
        recorder
            .events()
            .into_iter()
            .find_map(|(event, _)| match event {
                Event::Completed(status) => Some(Ok(status.as_u16())),
                Event::Failed(error, _) => Some(Err(error)),
                _ => None,
            })
    };
    assert!(
        recorder.wait_for(CEILING, |_| ending().is_some()),
        "the exchange never ended"
    );
    ending().expect("ended")
}

/// The whole body of a response that must have come (the server's
/// `PIECES` of `PIECE` bytes).
/// Posts 1 MiB from memory to `url` and returns the response, which must
/// have come (see [`answered`]): far past the test servers' 64 KiB
/// window, so the upload is still going when they answer.
fn upload_mib(client: &Client, url: String) -> tickless::Response {
    answered(client.post(url).body(vec![b'u'; 1 << 20]).send().wait())
}

/// The response's body is the test servers' short answer, whole.
fn assert_early_answer(response: tickless::Response) {
    match response.bytes().wait() {
        Ok(body) => assert_eq!(body, "early answer"),
        Err(error) => panic!("the server's answer was lost: {error:?}"),
    }
}

fn assert_whole(response: tickless::Response) {
    match response.bytes().wait() {
        Ok(body) => assert_eq!(body.len(), PIECES * PIECE),
        Err(error) => panic!("the server's answer was lost: {error:?}"),
    }
}

/// The server's side of every test here: reads the first request with
/// `read` (to its id), sends `answer` for it and a PING, and says on the
/// channel once the client has answered the PING (so has read all that
/// came before it). With what the client sent after the PING was
/// answered — and before, if `keep_before_pong`.
fn answering(
    read: fn(&mut RawConn) -> u32,
    answer: impl Fn(u32) -> Vec<u8> + Send + Sync + 'static,
    keep_before_pong: bool,
) -> (RawH2Server, mpsc::Receiver<()>, Arc<Mutex<Vec<Frame>>>) {
    let (told, all_in) = mpsc::channel();
    let told = Mutex::new(told);
    let seen: Arc<Mutex<Vec<Frame>>> = Arc::default();
    let kept = seen.clone();
    let server = RawH2Server::start(move |mut conn| {
        let id = read(&mut conn);
        let mut out = answer(id);
        out.extend(ping());
        conn.send(&out);
        let frames = until_pong(&mut conn);
        if keep_before_pong {
            kept.lock().unwrap().extend(frames);
        }
        let _ = told.lock().unwrap().send(());
        let frames = conn.drain(CEILING);
        kept.lock().unwrap().extend(frames);
    });
    (server, all_in, seen)
}

/// Answers a GET whole: its head, its body (and trailers).
fn answering_whole(
    with_trailers: bool,
) -> (RawH2Server, mpsc::Receiver<()>, Arc<Mutex<Vec<Frame>>>) {
    let answer = move |id| {
        let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
        out.extend(body_frames(id, with_trailers));
        if with_trailers {
            out.extend(trailers(id));
        }
        out
    };
    answering(|conn| conn.read_requests(1)[0], answer, true)
}

/// The response, which must have come: the server's answer, status 200.
fn answered(response: Result<tickless::Response, tickless::Error>) -> tickless::Response {
    let response = match response {
        Ok(response) => response,
        Err(error) => panic!("the server's answer was lost: {error:?}"),
    };
    assert_eq!(response.status(), 200);
    response
}

/// Once the client and server are gone: the client sent nothing on the
/// stream the server closed (`seen`; but an empty end, if
/// `but_an_empty_end`).
fn assert_nothing_sent_after(
    client: Client,
    server: RawH2Server,
    seen: &Mutex<Vec<Frame>>,
    but_an_empty_end: bool,
) {
    client.close();
    drop(server);
    assert_eq!(
        on_streams(&seen.lock().unwrap(), but_an_empty_end),
        [],
        "nothing goes on a stream the server closed"
    );
}

/// Answers an upload whole as soon as its head and some of its body have
/// come, and resets the stream with `NO_ERROR` (RFC 9113 §8.1).
fn answering_mid_upload_then_resetting(
    keep_before_pong: bool,
) -> (RawH2Server, mpsc::Receiver<()>, Arc<Mutex<Vec<Frame>>>) {
    let answer = |id| {
        let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
        out.extend(body_frames(id, false));
        out.extend(rst_stream(id, 0));
        out
    };
    answering(read_request_and_data, answer, keep_before_pong)
}

/// Answers an upload whole as soon as its head and some of its body have
/// come — a short answer, within the body's window: the client has all of
/// it at once — then reads on but never opens its window again (the rest
/// of the upload waits on it), and says on the channel once the client has
/// read the answer, and then the first reset the client sends (stream,
/// code).
fn answering_whole_then_awaiting_a_reset(
) -> (RawH2Server, mpsc::Receiver<()>, mpsc::Receiver<(u32, u32)>) {
    answering_then_awaiting_a_reset(|id| frame(DATA, END_STREAM, id, b"early answer"), Vec::new)
}

/// [`answering_whole_then_awaiting_a_reset`], with `body(id)` as the
/// answer's body, and `then()` sent once the client has read it.
fn answering_then_awaiting_a_reset(
    body: fn(u32) -> Vec<u8>,
    then: fn() -> Vec<u8>,
) -> (RawH2Server, mpsc::Receiver<()>, mpsc::Receiver<(u32, u32)>) {
    answering_with_then_awaiting_a_reset(0x88, body, then)
}

/// [`answering_then_awaiting_a_reset`] with the status of the static
/// HPACK entry `status` (`0x88` 200, `0x8d` 404).
fn answering_with_then_awaiting_a_reset(
    status: u8,
    body: fn(u32) -> Vec<u8>,
    then: fn() -> Vec<u8>,
) -> (RawH2Server, mpsc::Receiver<()>, mpsc::Receiver<(u32, u32)>) {
    let (told, all_in) = mpsc::channel();
    let (reset, reset_seen) = mpsc::channel();
    let told = Mutex::new((told, reset));
    let server = RawH2Server::start(move |mut conn| {
        let id = read_request_and_data(&mut conn);
        let mut out = frame(HEADERS, END_HEADERS, id, &[status]);
        out.extend(body(id));
        out.extend(ping());
        conn.send(&out);
        let _ = until_pong(&mut conn);
        conn.send(&then());
        let (told, reset) = {
            let told = told.lock().unwrap();
            (told.0.clone(), told.1.clone())
        };
        let _ = told.send(());
        while let Some(frame) = conn.read_frame() {
            if let Some(&first) = resets(&[frame]).first() {
                let _ = reset.send(first);
                break;
            }
        }
        conn.drain(CEILING);
    });
    (server, all_in, reset_seen)
}

/// A body dropped when its end (`END_STREAM`, on its last DATA or on its
/// trailers) has come, the rest still in `h2`'s buffer behind a full pipe:
/// the exchange completed — the caller merely did not read it all — and
/// the stream, ended both ways, is not reset.
#[test]
fn a_body_dropped_after_its_end_came_completes_and_its_stream_is_not_reset() {
    for with_trailers in [false, true] {
        let (server, all_in, seen) = answering_whole(with_trailers);
        let recorder = Recorder::new();
        let client = h2c().listener(recorder.clone()).build().unwrap();
        let response = client.get(server.url("/")).send().wait().unwrap();
        assert_eq!(response.status(), 200);
        all_in
            .recv_timeout(CEILING)
            .expect("the client read the frames");
        drop(response);
        assert_eq!(ended(&recorder), Ok(200), "trailers: {with_trailers}");
        client.close();
        drop(server);
        let resets = resets(&seen.lock().unwrap());
        assert_eq!(resets, [], "trailers: {with_trailers}");
    }
}

/// `END_STREAM` on trailers: the body is read whole, then its trailers.
#[test]
fn a_response_ending_with_trailers_is_read_whole_with_them() {
    let (server, all_in, seen) = answering_whole(true);
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    let mut body = Vec::new();
    std::io::Read::read_to_end(response.body_mut(), &mut body).unwrap();
    assert_eq!(body.len(), PIECES * PIECE);
    let trailers = response.trailers().expect("trailers");
    assert_eq!(trailers["x-checksum"], "abc123");
    assert!(response.headers().get("x-checksum").is_none());
    assert_eq!(ended(&recorder), Ok(200));
    client.close();
    drop(server);
    assert_eq!(resets(&seen.lock().unwrap()), []);
}

/// An async upload: `first`, then nothing until `gate.ended` is set, then
/// its end. Pending, it leaves its waker in `gate.waker` if that holds one
/// (if not, its end is found by the next poll, whatever causes it).
struct GatedUpload {
    first: Option<Bytes>,
    gate: Arc<Gate>,
}

#[derive(Default)]
struct Gate {
    ended: AtomicBool,
    waker: Mutex<Option<Waker>>,
    /// The end was taken from it.
    end_taken: AtomicBool,
    /// The client let go of the upload.
    dropped: AtomicBool,
}

impl Drop for GatedUpload {
    fn drop(&mut self) {
        self.gate.dropped.store(true, Ordering::SeqCst);
    }
}

/// A [`GatedUpload`] behind `gate`.
fn gated_upload(gate: &Arc<Gate>) -> Upload {
    Upload::from_stream(GatedUpload {
        first: Some(Bytes::from_static(b"the upload's start")),
        gate: gate.clone(),
    })
}

impl Body for GatedUpload {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<BodyFrame<Bytes>, Self::Error>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(BodyFrame::data(first))));
        }
        if self.gate.ended.load(Ordering::SeqCst) {
            self.gate.end_taken.store(true, Ordering::SeqCst);
            return Poll::Ready(None);
        }
        if let Some(waker) = self.gate.waker.lock().unwrap().as_mut() {
            waker.clone_from(cx.waker());
        }
        Poll::Pending
    }
}

/// RFC 9113 §8.1: a complete answer before the upload is done, then
/// `RST_STREAM(NO_ERROR)`. The upload's source ends meanwhile, unseen:
/// the stream is polled next for the frames, which `h2` has read by then —
/// the upload finds its end with the stream already closed. The answer is
/// the response, whole; nothing more is sent.
#[test]
fn an_answer_reset_with_no_error_as_the_upload_ends_is_returned_whole() {
    let gate = Arc::new(Gate::default());
    let seen: Arc<Mutex<Vec<Frame>>> = Arc::default();
    let (server_gate, kept) = (gate.clone(), seen.clone());
    let server = RawH2Server::start(move |mut conn| {
        let id = read_request_and_data(&mut conn);
        // The client has read what the server sent so far (its SETTINGS'
        // ACK among them): nothing more wakes the stream meanwhile.
        conn.send(&ping());
        let _ = until_pong(&mut conn);
        // The upload's source ends, and no waker is told: the next poll of
        // the stream finds it, which is the one for the frames below.
        server_gate.ended.store(true, Ordering::SeqCst);
        let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
        out.extend(frame(DATA, END_STREAM, id, b"early answer"));
        out.extend(rst_stream(id, 0));
        conn.send(&out);
        let frames = conn.drain(CEILING);
        kept.lock().unwrap().extend(frames);
    });
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    let response = client
        .post(server.url("/"))
        .body(gated_upload(&gate))
        .send()
        .wait();
    let response = answered(response);
    assert_eq!(response.bytes().wait().unwrap(), "early answer");
    assert_eq!(ended(&recorder), Ok(200));
    // Nothing on the stream: no reset of a stream that has ended, nor any
    // of the upload. (But its empty end, if the stream's poll came first
    // after all, as the frames were on their way: then the client told
    // nothing wrong, and this run did not put the ordering to the test.)
    assert_nothing_sent_after(client, server, &seen, true);
}

/// The same answer and reset with the upload mid-way: the response's body
/// waits behind a full pipe while the upload's source goes on; the source
/// ends later. The answer is still the response, whole.
#[test]
fn an_answer_reset_with_no_error_mid_upload_is_returned_whole() {
    let (server, all_in, seen) = answering_mid_upload_then_resetting(true);
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    let gate = Arc::new(Gate {
        waker: Mutex::new(Some(Waker::noop().clone())),
        ..Gate::default()
    });
    let response = client
        .post(server.url("/"))
        .body(gated_upload(&gate))
        .send()
        .wait();
    let response = answered(response);
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    // The upload's source ends now, after the reset, and says so. The body
    // is read once that end is taken: a reader taking the body while the
    // stream's poll for the frames is still under way could let that one
    // poll take it whole, the upload's end never pulled. (A client that
    // stops pulling from a source once its stream is reset never takes
    // it: then the bound passes.)
    gate.ended.store(true, Ordering::SeqCst);
    if let Some(waker) = gate.waker.lock().unwrap().take() {
        waker.wake();
    }
    eventually(Duration::from_secs(2), || {
        gate.end_taken.load(Ordering::SeqCst)
    });
    assert_whole(response);
    assert_eq!(ended(&recorder), Ok(200));
    assert_nothing_sent_after(client, server, &seen, false);
}

/// The same with an upload in memory, larger than the server's window:
/// the rest of it is not sent, and the answer is the response, whole.
#[test]
fn an_answer_reset_with_no_error_mid_upload_in_memory_is_returned_whole() {
    let (server, all_in, seen) = answering_mid_upload_then_resetting(false);
    let client = h2c().build().unwrap();
    // 1 MiB: far past the server's 64 KiB window, which never opens.
    let response = client
        .post(server.url("/"))
        .body(vec![b'u'; 1 << 20])
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 200);
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    assert_whole(response);
    assert_nothing_sent_after(client, server, &seen, false);
}

/// RFC 9113 §8.1: a server may answer whole before it has read the
/// request, and a complete answer is no reason for the client to stop
/// sending. The server (on the `h2` crate) answers at once, then reads the
/// upload — well past its window, so most of it goes after the answer —
/// and counts what came: all of it, in memory or streamed, with its length
/// or without. (The stream leaving with its answer had `h2` reset it with
/// `CANCEL`: the server read a fraction, then the reset.)
#[test]
fn an_answer_whole_before_the_upload_lets_the_upload_go_on_to_its_end() {
    const LENGTH: usize = 1 << 20;
    let (counted, counts) = mpsc::channel::<Result<usize, String>>();
    let counted = Mutex::new(counted);
    let server = H2Server::start(move |mut stream| {
        let counted = counted.lock().unwrap().clone();
        async move {
            let head = http::Response::builder().status(200).body(()).unwrap();
            if let Ok(mut send) = stream.respond.send_response(head, false) {
                let _ = send.send_data(Bytes::from_static(b"early answer"), true);
            }
            let body = stream.request.body_mut();
            let mut received = 0;
            let outcome = loop {
                match body.data().await {
                    Some(Ok(data)) => {
                        received += data.len();
                        let _ = body.flow_control().release_capacity(data.len());
                    }
                    Some(Err(error)) => break Err(format!("after {received} bytes: {error}")),
                    None => break Ok(received),
                }
            };
            let _ = counted.send(outcome);
        }
    });
    let uploads = [
        ("in memory", Upload::from(vec![b'u'; LENGTH])),
        (
            "streamed with its length",
            Upload::from_reader(
                std::io::Read::take(std::io::repeat(b'r'), LENGTH as u64),
                Some(LENGTH as u64),
            ),
        ),
        (
            "streamed",
            Upload::from_reader(
                std::io::Read::take(std::io::repeat(b's'), LENGTH as u64),
                None,
            ),
        ),
    ];
    let client = h2c().build().unwrap();
    for (kind, upload) in uploads {
        let response = client.post(server.url("/")).body(upload).send().wait();
        let response = answered(response);
        match response.bytes().wait() {
            Ok(body) => assert_eq!(body, "early answer", "{kind}"),
            Err(error) => panic!("{kind}: {error:?}"),
        }
        let count = counts.recv_timeout(CEILING).expect("the server counted");
        assert_eq!(count, Ok(LENGTH), "{kind}: the server got the whole upload");
    }
    client.close();
}

/// A complete answer, then `RST_STREAM(NO_ERROR)` (RFC 9113 §8.1), to an
/// upload whose source has nothing more and never will: the answer is the
/// response, whole and without error, and the upload stops there — its
/// source let go, nothing more sent. (An exchange that waited for the
/// upload's end, not seeing the reset, waited until its request timeout.)
#[test]
fn an_answer_reset_with_no_error_stops_an_upload_that_would_never_end() {
    let (server, all_in, seen) = answering_mid_upload_then_resetting(false);
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    // No waker kept: nothing will ever wake the upload.
    let gate = Arc::new(Gate::default());
    let response = client
        .post(server.url("/"))
        .body(gated_upload(&gate))
        .send()
        .wait();
    let response = answered(response);
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    assert_whole(response);
    assert_eq!(ended(&recorder), Ok(200));
    assert!(
        eventually(CEILING, || gate.dropped.load(Ordering::SeqCst)),
        "the upload's source was let go"
    );
    assert!(!gate.end_taken.load(Ordering::SeqCst));
    assert_nothing_sent_after(client, server, &seen, false);
}

/// A complete answer to an upload whose server then takes no more of it
/// and says nothing (no reset, its window shut): for the write timeout the
/// upload waits, then it stops — its stream reset with `CANCEL` — and the
/// answer stands, as for a reset (it does not depend on the rest, RFC 9113
/// §8.1), rather than the exchange waiting for its request timeout, or for
/// ever.
#[test]
fn an_upload_the_server_stops_taking_after_its_whole_answer_stops_at_the_write_timeout() {
    let (server, all_in, reset_seen) = answering_whole_then_awaiting_a_reset();
    let recorder = Recorder::new();
    let client = h2c()
        .listener(recorder.clone())
        .write_timeout(Duration::from_millis(1500))
        .build()
        .unwrap();
    // 1 MiB: far past the server's 64 KiB window, which never opens.
    let response = upload_mib(&client, server.url("/"));
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    assert_early_answer(response);
    assert_eq!(ended(&recorder), Ok(200));
    let reset = reset_seen.recv_timeout(CEILING);
    assert_eq!(reset, Ok((1, 8)), "the stream is reset with CANCEL");
    client.close();
}

/// A refusal (404 here) that comes whole before the upload's end stops the
/// upload at once, its stream reset with `CANCEL`, as over HTTP/1.1: the
/// caller has the answer whole, though the upload's source would never
/// end (it was held until the request timeout).
#[test]
fn a_refusal_whole_before_the_upload_ends_stops_the_upload_and_stands() {
    let (server, all_in, reset_seen) = answering_with_then_awaiting_a_reset(
        0x8d,
        |id| frame(DATA, END_STREAM, id, b"no such thing"),
        Vec::new,
    );
    let client = h2c().build().unwrap();
    // No waker kept: nothing will ever wake the upload.
    let gate = Arc::new(Gate::default());
    let response = client
        .post(server.url("/"))
        .body(gated_upload(&gate))
        .send()
        .wait()
        .expect("the server's answer");
    assert_eq!(response.status(), 404);
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    match response.bytes().wait() {
        Ok(body) => assert_eq!(body, "no such thing"),
        Err(error) => panic!("the server's answer was lost: {error:?}"),
    }
    let reset = reset_seen.recv_timeout(CEILING);
    assert_eq!(reset, Ok((1, 8)), "the stream is reset with CANCEL");
    assert!(
        eventually(CEILING, || gate.dropped.load(Ordering::SeqCst)),
        "the upload's source was let go"
    );
    assert!(!gate.end_taken.load(Ordering::SeqCst));
    client.close();
}

/// The same with an answer past the body's window, its reader not reading:
/// the rest of it, its end with it, waits behind the full pipe — the
/// answer is whole all the same, and the upload stops at the write
/// timeout, the exchange complete before its body is read (the stream,
/// paused with its end unseen, waited for the request timeout).
#[test]
fn an_upload_the_server_stops_taking_after_its_whole_answer_behind_a_full_pipe_stops_at_the_write_timeout(
) {
    let (server, all_in, reset_seen) =
        answering_then_awaiting_a_reset(|id| body_frames(id, false), Vec::new);
    let recorder = Recorder::new();
    let client = h2c()
        .listener(recorder.clone())
        .write_timeout(Duration::from_millis(1500))
        .build()
        .unwrap();
    let response = upload_mib(&client, server.url("/"));
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    assert_eq!(ended(&recorder), Ok(200));
    let reset = reset_seen.recv_timeout(CEILING);
    assert_eq!(reset, Ok((1, 8)), "the stream is reset with CANCEL");
    assert_whole(response);
    client.close();
}

/// A whole answer past the body's window, its reader not reading, then a
/// connection error (a DATA frame on stream 0, which `h2` takes for a
/// `PROTOCOL_ERROR`) under its upload: the connection's end, as a close
/// is, and the answer, whole, is the response. (`h2` marks every stream
/// not closed both ways failed at a connection error — and at once: the
/// end of the answer must have been seen before.)
#[test]
fn a_whole_answer_behind_a_full_pipe_stands_when_a_connection_error_ends_its_upload() {
    let (server, all_in, _reset_seen) = answering_then_awaiting_a_reset(
        |id| body_frames(id, false),
        || frame(DATA, 0, 0, b"not on a stream"),
    );
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    let response = upload_mib(&client, server.url("/"));
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    assert_eq!(ended(&recorder), Ok(200));
    assert_whole(response);
    client.close();
}

/// A complete answer to an upload whose server takes no more of it: a
/// reader that drops the body ends the exchange at once, complete (its
/// answer came whole), and the stream is reset with `CANCEL` — nobody
/// waits for the rest of the upload — rather than left to the write
/// timeout.
#[test]
fn a_body_dropped_after_a_whole_answer_ends_the_upload_with_cancel() {
    let (server, all_in, reset_seen) = answering_whole_then_awaiting_a_reset();
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    let response = upload_mib(&client, server.url("/"));
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    drop(response);
    assert_eq!(ended(&recorder), Ok(200));
    let reset = reset_seen.recv_timeout(CEILING);
    assert_eq!(reset, Ok((1, 8)), "the stream is reset with CANCEL");
    client.close();
}

/// A complete answer to an upload whose server takes no more of it, and
/// the client closes: the exchange, waiting for its upload, fails with the
/// close as any other — it does not hold the close up, nor outlive it.
#[test]
fn closing_the_client_ends_an_upload_going_on_after_its_whole_answer() {
    let (server, all_in, _reset_seen) = answering_whole_then_awaiting_a_reset();
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    let response = upload_mib(&client, server.url("/"));
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    client.close();
    match response.bytes().wait() {
        Err(tickless::Error::ClientClosed) => {}
        other => panic!("not the close: {other:?}"),
    }
    assert!(ended(&recorder).is_err(), "the exchange failed");
}

/// A complete answer to an upload, then the server closes the connection
/// (no reset): the upload stops, and the answer, whole, is the response.
/// (An answer within the body's window: for one past it, see the next
/// test.)
#[test]
fn a_whole_answer_stands_when_the_connection_closes_under_its_upload() {
    let server = RawH2Server::start(move |mut conn| {
        let id = read_request_and_data(&mut conn);
        let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
        out.extend(frame(DATA, END_STREAM, id, b"early answer"));
        out.extend(ping());
        conn.send(&out);
        let _ = until_pong(&mut conn);
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
    });
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    let response = client
        .post(server.url("/"))
        .body(vec![b'u'; 1 << 20])
        .send()
        .wait();
    let body = answered(response).bytes().wait();
    match body {
        Ok(body) => assert_eq!(body, "early answer"),
        Err(error) => panic!("the server's answer was lost: {error:?}"),
    }
    assert_eq!(ended(&recorder), Ok(200));
    client.close();
}

/// The same with an answer past the body's window, so that most of it
/// waits behind a full pipe, its reader not reading: the connection closes
/// once the client has read it all, `END_STREAM` with it, and the answer,
/// whole, is still the response — the exchange completes before its body
/// is read. (A stream that left the rest in `h2`'s buffer lost it: `h2`
/// marks every stream of an ended connection closed with an error, which
/// hides the `END_STREAM` of one still sending — "stream closed because
/// of a broken pipe".)
#[test]
fn a_whole_answer_behind_a_full_pipe_stands_when_the_connection_closes_under_its_upload() {
    let server = RawH2Server::start(move |mut conn| {
        let id = read_request_and_data(&mut conn);
        let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
        out.extend(body_frames(id, false));
        out.extend(ping());
        conn.send(&out);
        let _ = until_pong(&mut conn);
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
    });
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    let response = upload_mib(&client, server.url("/"));
    // Not read until the exchange has ended: the connection's end with it.
    assert_eq!(ended(&recorder), Ok(200));
    assert_whole(response);
    client.close();
}

/// A complete answer to an upload whose server takes no more of it, and
/// answers no PING from then on (the keep-alive PINGs before, it does:
/// the answer comes however late): the keep-alive PING's timeout ends the
/// connection, as a close would, and the answer, whole, is still the
/// response (it was lost: the timeout failed every stream, a whole
/// answer's as well).
#[test]
fn a_whole_answer_stands_when_the_keep_alive_ping_ends_the_connection_under_its_upload() {
    let server = RawH2Server::start(move |mut conn| {
        let id = conn.read_requests(1)[0];
        let mut answered = false;
        while let Some(frame) = conn.read_frame() {
            let client_ping = frame.kind == PING && frame.flags & ACK == 0;
            if client_ping && !answered {
                conn.send(&self::frame(PING, ACK, 0, &frame.payload));
            }
            if frame.kind == DATA && frame.stream == id && !answered {
                answered = true;
                conn.send(&frame_head_and_early_answer(id));
            }
        }
    });
    let recorder = Recorder::new();
    let client = h2c()
        .listener(recorder.clone())
        .http2_keep_alive_interval(Duration::from_millis(200))
        .http2_keep_alive_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let response = upload_mib(&client, server.url("/"));
    // Not read until the exchange has ended, with the connection.
    assert_eq!(ended(&recorder), Ok(200));
    // Its stream, completed as the connection was given up, is counted
    // closed with it.
    assert!(
        eventually(CEILING, || client.stats().http2_streams_open == 0),
        "{:?}",
        client.stats()
    );
    assert_early_answer(response);
    client.close();
}

/// A complete answer to an upload and the connection's end (the server's
/// FIN) in one write, so that the client reads them together: the answer,
/// whole, is the response. (It was lost, every time: `h2` read the frames
/// and the end in one poll, and marked the stream — its `END_STREAM` not
/// yet seen by it, its upload going on — closed with an error before it
/// was polled.) A few connections, as the client might read the end apart
/// from the frames.
#[test]
fn a_whole_answer_that_comes_with_the_connections_end_stands_under_its_upload() {
    for _ in 0..5 {
        let server = RawH2Server::start(move |mut conn| {
            let id = read_request_and_data(&mut conn);
            let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
            out.extend(frame(DATA, END_STREAM, id, b"early answer"));
            conn.send(&out);
            // Its FIN, not a reset: what the client sends is read on.
            let _ = conn.stream.shutdown(std::net::Shutdown::Write);
            conn.drain(CEILING);
        });
        let recorder = Recorder::new();
        let client = h2c().listener(recorder.clone()).build().unwrap();
        let response = upload_mib(&client, server.url("/"));
        // Not read until the exchange has ended, with the connection.
        assert_eq!(ended(&recorder), Ok(200));
        assert_early_answer(response);
        client.close();
    }
}

/// The same with the connection's end a reset (the server closes with
/// `SO_LINGER` 0, or with the upload's bytes unread), the upload going
/// on — its windows opened wide, its source endless, so that the client
/// has bytes to write when the reset comes: the write fails first
/// (`h2` writes before it reads), and the answer, in the socket before
/// the reset, is the response all the same. (It was lost, the head with
/// it: the write's failure failed every stream, and the 512 bytes read
/// then for a TLS alert were the answer's.)
#[test]
fn a_whole_answer_that_comes_with_a_connection_reset_stands_under_its_upload() {
    use std::io::{Read, Write};
    // Ten connections: the client may read the answer before its next
    // write, and then a read meets the reset.
    for _ in 0..10 {
        // Not a RawH2Server, which keeps a clone of each socket (the reset
        // goes when the last is closed).
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let mut socket = accept_in_time(&listener);
            socket.set_read_timeout(Some(CEILING)).unwrap();
            // The answer leaves at once, not held (Nagle) behind a window
            // update not yet acknowledged: the reset would drop it.
            socket.set_nodelay(true).unwrap();
            let mut preface = [0u8; 24];
            socket.read_exact(&mut preface).unwrap();
            socket.write_all(&frame(SETTINGS, 0, 0, &[])).unwrap();
            let mut conn = RawConn {
                stream: socket.try_clone().unwrap(),
                index: 0,
            };
            let id = conn.read_requests(1)[0];
            let mut wide = window_update(0, 1 << 30);
            wide.extend(window_update(id, 1 << 30));
            socket.write_all(&wide).unwrap();
            while let Some(frame) = conn.read_frame() {
                if frame.kind == DATA && frame.stream == id {
                    break;
                }
            }
            let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
            out.extend(frame(DATA, END_STREAM, id, b"early answer"));
            socket.write_all(&out).unwrap();
            socket2::SockRef::from(&socket)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
        });
        let recorder = Recorder::new();
        let client = h2c().listener(recorder.clone()).build().unwrap();
        let response = client
            .post(format!("http://127.0.0.1:{port}/"))
            .body(Upload::from_reader(
                std::io::Read::take(std::io::repeat(b'u'), 1 << 40),
                None,
            ))
            .send()
            .wait();
        let response = answered(response);
        assert_eq!(ended(&recorder), Ok(200));
        assert_early_answer(response);
        client.close();
        server.join().unwrap();
    }
}

/// The same over TLS, the server's end a TCP FIN with no `close_notify`
/// before it (a server that just closes its socket): the client's read
/// meets an error (`UnexpectedEof`), not a clean end, and the answer that
/// came with it, whole, is the response all the same. (It was lost, every
/// time: only a clean end was held back from `h2`, which on the error
/// marked the stream failed before it was polled.)
#[test]
fn a_whole_answer_that_comes_with_a_tls_connections_end_without_close_notify_stands_under_its_upload(
) {
    use std::io::{Read, Write};
    for _ in 0..5 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let socket = accept_in_time(&listener);
            socket.set_read_timeout(Some(CEILING)).unwrap();
            let mut config = (*tls::server_config(&tls::certs().valid)).clone();
            config.alpn_protocols = vec![b"h2".to_vec()];
            let session = rustls::ServerConnection::new(Arc::new(config)).unwrap();
            let mut tls = rustls::StreamOwned::new(session, socket);
            let mut preface = [0u8; 24];
            tls.read_exact(&mut preface).unwrap();
            tls.write_all(&frame(SETTINGS, 0, 0, &[])).unwrap();
            // The request's HEADERS, then one of its DATA.
            let mut id = None;
            while let Some(frame) = read_frame(&mut tls) {
                match frame.kind {
                    HEADERS => id = Some(frame.stream),
                    SETTINGS if frame.flags & ACK == 0 => tls.write_all(&settings_ack()).unwrap(),
                    DATA if Some(frame.stream) == id => break,
                    _ => {}
                }
            }
            let id = id.expect("a request");
            let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
            out.extend(frame(DATA, END_STREAM, id, b"early answer"));
            tls.write_all(&out).unwrap();
            tls.flush().unwrap();
            // The TCP stream's end, no close_notify: the upload read on.
            let _ = tls.sock.shutdown(std::net::Shutdown::Write);
            while read_frame(&mut tls).is_some() {}
        });
        let recorder = Recorder::new();
        let client = Client::builder()
            .event_loops(1)
            .add_root_certificate(&tls::certs().ca_pem)
            .request_timeout(CEILING)
            .listener(recorder.clone())
            .build()
            .unwrap();
        let response = client
            .post(format!("https://127.0.0.1:{port}/"))
            .body(vec![b'u'; 1 << 20])
            .send()
            .wait();
        let response = answered(response);
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(ended(&recorder), Ok(200));
        assert_early_answer(response);
        client.close();
        server.join().unwrap();
    }
}

/// The response future dropped untaken once its answer has come whole, the
/// upload still going: the exchange ends (cancelled) and the stream is
/// reset with `CANCEL` at once — the stream does not stay for the upload.
#[test]
fn a_future_dropped_after_a_whole_answer_ends_the_upload_with_cancel() {
    let (server, all_in, reset_seen) = answering_whole_then_awaiting_a_reset();
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    let future = client
        .post(server.url("/"))
        .body(vec![b'u'; 1 << 20])
        .send();
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    drop(future);
    assert!(ended(&recorder).is_err(), "the exchange was cancelled");
    let reset = reset_seen.recv_timeout(CEILING);
    assert_eq!(reset, Ok((1, 8)), "the stream is reset with CANCEL");
    client.close();
}

const WINDOW_UPDATE: u8 = 0x8;

/// A `WINDOW_UPDATE` of `increment` for `stream` (0: the connection).
fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    frame(WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
}

/// A complete answer, then `GOAWAY(NO_ERROR)` naming the stream processed,
/// while the upload waits on the server's window; the server then opens
/// it and reads the upload to its end: the connection, going away, keeps
/// the stream to the upload's end, and the exchange completes with its
/// answer — the server got the whole upload.
#[test]
fn a_goaway_after_a_whole_answer_lets_the_upload_go_on_to_its_end() {
    const LENGTH: usize = 1 << 20;
    let (counted, counts) = mpsc::channel::<usize>();
    let counted = Mutex::new(counted);
    let server = RawH2Server::start(move |mut conn| {
        let id = conn.read_requests(1)[0];
        let mut received = 0;
        let mut answered = false;
        while let Some(frame) = conn.read_frame() {
            if frame.kind == DATA && frame.stream == id {
                received += frame.payload.len();
                if frame.flags & END_STREAM != 0 {
                    break;
                }
                if !answered {
                    answered = true;
                    let mut out = frame_head_and_early_answer(id);
                    out.extend(goaway(id, 0));
                    out.extend(ping());
                    conn.send(&out);
                }
            }
            let pong =
                frame.kind == PING && frame.flags & ACK != 0 && frame.payload == PING_PAYLOAD;
            if pong {
                // The answer and the GOAWAY read: the rest may come.
                let mut out = window_update(0, LENGTH as u32);
                out.extend(window_update(id, LENGTH as u32));
                conn.send(&out);
            }
        }
        let _ = counted.lock().unwrap().send(received);
        conn.drain(CEILING);
    });
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    let response = client
        .post(server.url("/"))
        .body(vec![b'u'; LENGTH])
        .send()
        .wait();
    let response = answered(response);
    assert_early_answer(response);
    assert_eq!(ended(&recorder), Ok(200));
    let count = counts.recv_timeout(CEILING);
    assert_eq!(count, Ok(LENGTH), "the server got the whole upload");
    client.close();
}

/// A head and a short whole answer on stream `id`.
fn frame_head_and_early_answer(id: u32) -> Vec<u8> {
    let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
    out.extend(frame(DATA, END_STREAM, id, b"early answer"));
    out
}

/// A stream answered whole, its upload waiting on the server's window,
/// counts against the stream limit (the server counts it too, half
/// closed): a second request waits — until the first one's request
/// timeout ends its upload (its stream reset with `CANCEL`, its answer
/// standing), then it goes, on the same connection.
#[test]
fn the_request_timeout_ends_an_upload_after_its_whole_answer_and_frees_its_stream() {
    let (told, all_in) = mpsc::channel();
    let (reset, reset_seen) = mpsc::channel();
    let told = Mutex::new((told, reset));
    let server = RawH2Server::start(move |mut conn| {
        let id = read_request_and_data(&mut conn);
        let mut out = frame_head_and_early_answer(id);
        out.extend(ping());
        conn.send(&out);
        let _ = until_pong(&mut conn);
        let (told, reset) = {
            let told = told.lock().unwrap();
            (told.0.clone(), told.1.clone())
        };
        let _ = told.send(());
        while let Some(frame) = conn.read_frame() {
            if frame.kind == HEADERS {
                // The second request, before the first's stream ended.
                let _ = reset.send((frame.stream, u32::MAX));
                break;
            }
            if let Some(&first) = resets(&[frame]).first() {
                let _ = reset.send(first);
                break;
            }
        }
        // The second request, answered.
        if let Some(&second) = conn.read_requests(1).first() {
            conn.send(&ok_headers(second));
        }
        conn.drain(CEILING);
    });
    let recorder = Recorder::new();
    let client = h2c()
        .listener(recorder.clone())
        .http2_max_concurrent_streams(1)
        .build()
        .unwrap();
    let first = client
        .post(server.url("/"))
        .request_timeout(Duration::from_secs(2))
        .body(vec![b'u'; 1 << 20])
        .send()
        .wait();
    let first = answered(first);
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    let second = client.get(server.url("/second")).send();
    assert_eq!(ended(&recorder), Ok(200), "the answer stands");
    let reset = reset_seen.recv_timeout(CEILING);
    assert_eq!(
        reset,
        Ok((1, 8)),
        "the stream is reset with CANCEL, before the second request goes"
    );
    let second = second.wait().expect("the second request went");
    assert_eq!(second.status(), 200);
    assert_early_answer(first);
    client.close();
}

/// The body of a short answer, then its trailers (ending the stream).
fn early_answer_with_trailers(id: u32) -> Vec<u8> {
    let mut out = frame(DATA, 0, id, b"early answer");
    out.extend(trailers(id));
    out
}

/// The response is [`early_answer_with_trailers`], read whole: its body,
/// then its trailers.
fn assert_early_answer_with_trailers(mut response: tickless::Response) {
    let mut body = Vec::new();
    let read = std::io::Read::read_to_end(response.body_mut(), &mut body);
    assert!(read.is_ok(), "the server's answer was lost: {read:?}");
    assert_eq!(body, b"early answer");
    let trailers = response.trailers().expect("trailers");
    assert_eq!(trailers["x-checksum"], "abc123");
}

/// A complete answer with trailers before the upload's end, then
/// `RST_STREAM(NO_ERROR)` (RFC 9113 §8.1) stops the upload: the answer
/// stands with its trailers, held meanwhile for the upload's end.
#[test]
fn an_answer_with_trailers_whole_before_the_upload_ends_keeps_them() {
    let reset_no_error = || rst_stream(1, 0);
    let (server, all_in, _reset_seen) =
        answering_then_awaiting_a_reset(early_answer_with_trailers, reset_no_error);
    let recorder = Recorder::new();
    let client = h2c().listener(recorder.clone()).build().unwrap();
    let response = upload_mib(&client, server.url("/"));
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    assert_early_answer_with_trailers(response);
    assert_eq!(ended(&recorder), Ok(200));
    client.close();
}

/// What an upload sends before the server opens its windows: the
/// initial windows (RFC 9113 §6.9.2), which the test servers' SETTINGS
/// leave as they are, connection's and stream's.
const FIRST_WINDOW: usize = 65_535;

/// What [`answering_then_taking_the_upload`]'s server opens its windows by,
/// each round.
const OPENED: usize = 1024;

/// An async upload that never ends: piece after piece, as fast as it is
/// taken; `dropped` says when the client lets it go.
struct EndlessUpload(Arc<AtomicBool>);

impl Drop for EndlessUpload {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Body for EndlessUpload {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<BodyFrame<Bytes>, Self::Error>>> {
        static PIECE_OF_UPLOAD: [u8; PIECE] = [b'u'; PIECE];
        let piece = Bytes::from_static(&PIECE_OF_UPLOAD);
        Poll::Ready(Some(Ok(BodyFrame::data(piece))))
    }
}

/// What the server of [`answering_then_taking_the_upload`] saw in a round.
#[derive(Debug, PartialEq)]
enum Taken {
    /// Upload bytes past the windows opened before the round's.
    More,
    /// The client's first reset: its stream, its code.
    Reset(u32, u32),
}

/// Answers an upload whole ([`early_answer_with_trailers`]) as soon as its
/// head and some of its body have come; once the client has read the
/// answer (a PING after it answered), opens the connection's and the
/// stream's windows by [`OPENED`] and reads on, until the upload's bytes
/// pass the windows opened before, or a reset: that is a round, which it
/// tells on the channel. The client sends those bytes only once it has
/// read the windows' update, from a poll of the stream that then takes in
/// what came (a stream's poll sends, then receives, and `h2` writes what
/// it queued after that): after the first round, the stream has taken the
/// answer whole, its upload going on (`Recv::Ended`). `rounds` rounds,
/// each after the first once the test says so on the channel given back;
/// then it reads on, and tells the first reset.
fn answering_then_taking_the_upload(
    rounds: usize,
) -> (RawH2Server, mpsc::Sender<()>, mpsc::Receiver<Taken>) {
    let (go, gone) = mpsc::channel::<()>();
    let (tell, told) = mpsc::channel();
    let steps = Mutex::new((gone, tell));
    let server = RawH2Server::start(move |mut conn| {
        let steps = steps.lock().unwrap();
        let (gone, tell) = (&steps.0, &steps.1);
        let id = conn.read_requests(1)[0];
        let mut taken = 0;
        let mut answered = false;
        let mut started = false;
        let mut rounds_left = rounds;
        // The round under way: upload bytes past this end it.
        let mut round_past = None;
        let mut opened = FIRST_WINDOW;
        while let Some(got) = conn.read_frame() {
            if let Some(&(stream, code)) = resets(std::slice::from_ref(&got)).first() {
                let _ = tell.send(Taken::Reset(stream, code));
                break;
            }
            if got.kind == DATA && got.stream == id {
                taken += got.payload.len();
                if !answered {
                    answered = true;
                    let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
                    out.extend(early_answer_with_trailers(id));
                    out.extend(ping());
                    conn.send(&out);
                }
            }
            let pong = got.kind == PING && got.flags & ACK != 0 && got.payload == PING_PAYLOAD;
            let next_round = if pong && !started {
                started = true;
                true
            } else if round_past.is_some_and(|past| taken > past) {
                round_past = None;
                let _ = tell.send(Taken::More);
                rounds_left > 0 && gone.recv().is_ok()
            } else {
                false
            };
            if next_round && rounds_left > 0 {
                rounds_left -= 1;
                round_past = Some(opened);
                opened += OPENED;
                let mut out = window_update(0, OPENED as u32);
                out.extend(window_update(id, OPENED as u32));
                conn.send(&out);
            }
        }
        conn.drain(CEILING);
    });
    (server, go, told)
}

/// The request timeout of
/// [`the_request_timeout_after_a_whole_answer_stops_the_upload_and_the_answer_stands`],
/// moved by its `ManualClock`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The request timeout comes while the answer is whole and its upload
/// goes on (`Recv::Ended`; an upload whose source never ends, the server
/// taking no more of it, the write timeout off): the upload stops — its
/// stream reset with `CANCEL`, its source let go — and the answer stands:
/// the caller reads it whole, its trailers and end with it, and the
/// exchange completes. Nothing of it is left in flight. (The answer was
/// failed: its reader got the timeout, though the server had answered
/// whole.)
#[test]
fn the_request_timeout_after_a_whole_answer_stops_the_upload_and_the_answer_stands() {
    let (server, _go, taken) = answering_then_taking_the_upload(1);
    let (clock, recorder) = (ManualClock::new(), Recorder::new());
    let (client, response, dropped) = endless_post(&server, &clock, &recorder, |builder| {
        builder.request_timeout(REQUEST_TIMEOUT)
    });
    let round = taken.recv_timeout(CEILING);
    assert_eq!(
        round,
        Ok(Taken::More),
        "the upload goes on after the answer"
    );
    clock.advance(REQUEST_TIMEOUT);
    assert_early_answer_with_trailers(response);
    assert_eq!(ended(&recorder), Ok(200));
    let reset = taken.recv_timeout(CEILING);
    assert_eq!(
        reset,
        Ok(Taken::Reset(1, 8)),
        "the stream is reset with CANCEL"
    );
    assert!(
        eventually(CEILING, || dropped.load(Ordering::SeqCst)),
        "the upload's source was let go"
    );
    let stats = client.stats();
    assert_eq!(stats.in_flight, 0, "{stats:?}");
    assert_eq!(stats.http2_streams_open, 0, "{stats:?}");
    assert_eq!(stats.buffered_body_bytes, 0, "{stats:?}");
    client.close();
}

/// A client on `clock` telling `recorder`, with no write timeout and
/// `configure`'s settings, POSTing an endless upload to `server`, once its
/// answer has come: the client, the response, and the flag the upload sets
/// when it is dropped.
fn endless_post(
    server: &RawH2Server,
    clock: &ManualClock,
    recorder: &Arc<Recorder>,
    configure: impl FnOnce(ClientBuilder) -> ClientBuilder,
) -> (Client, tickless::Response, Arc<AtomicBool>) {
    let builder = h2c()
        .clock(Arc::new(clock.clone()))
        .listener(recorder.clone())
        .write_timeout(Duration::ZERO);
    let client = configure(builder).build().unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let response = client
        .post(server.url("/"))
        .body(Upload::from_stream(EndlessUpload(dropped.clone())))
        .send()
        .wait();
    (client, answered(response), dropped)
}

/// The read timeout of
/// [`the_read_timeout_does_not_stop_an_upload_after_its_whole_answer`],
/// moved by its `ManualClock`.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// The read timeout's period passes, and more, while the answer is whole
/// and its upload goes on (`Recv::Ended`): nothing is left to read, the
/// read timeout is off, and the upload goes on — the server takes more of
/// it — its stream not reset.
#[test]
fn the_read_timeout_does_not_stop_an_upload_after_its_whole_answer() {
    let (server, go, taken) = answering_then_taking_the_upload(2);
    let (clock, recorder) = (ManualClock::new(), Recorder::new());
    let (client, response, dropped) = endless_post(&server, &clock, &recorder, |builder| {
        builder.read_timeout(READ_TIMEOUT)
    });
    let round = taken.recv_timeout(CEILING);
    assert_eq!(
        round,
        Ok(Taken::More),
        "the upload goes on after the answer"
    );
    // The wheel fires what is due on this thread, as the clock moves: a
    // read timeout still running would have ended the exchange by now,
    // whatever its connection's loop has done of the abort yet (the
    // upload's source is let go there, maybe after the next round).
    clock.advance(READ_TIMEOUT * 2);
    assert_eq!(
        client.stats().in_flight,
        1,
        "the read timeout ended the exchange"
    );
    go.send(()).unwrap();
    let round = taken.recv_timeout(CEILING);
    assert_eq!(
        round,
        Ok(Taken::More),
        "the upload goes on past the read timeout"
    );
    assert!(!dropped.load(Ordering::SeqCst));
    client.close();
    drop(response);
}

/// Says whether it was woken.
#[derive(Default)]
struct WokenFlag(AtomicBool);

impl std::task::Wake for WokenFlag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A reader waiting for the body when its last bytes come, with its end,
/// before the upload's end: the answer is whole, but its end is held
/// until the upload's (`Recv::Ended`), so nothing but the bytes themselves
/// can wake the reader — and it is woken for them, a few bytes under the
/// pipe's low-water mark as they are. (It was not: the bytes sat in the
/// pipe, its reader asleep, until the upload's end — here, never.) The
/// upload never ends, nor does the request time out.
#[test]
fn a_waiting_reader_gets_the_last_bytes_of_an_answer_whole_before_the_upload_ends() {
    let (head_read, head_in) = mpsc::channel();
    let (go, gone) = mpsc::channel::<()>();
    let steps = Mutex::new((head_read, gone));
    let server = RawH2Server::start(move |mut conn| {
        let id = read_request_and_data(&mut conn);
        let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
        out.extend(ping());
        conn.send(&out);
        let _ = until_pong(&mut conn);
        {
            let steps = steps.lock().unwrap();
            let _ = steps.0.send(());
            let _ = steps.1.recv_timeout(CEILING);
        }
        conn.send(&frame(DATA, END_STREAM, id, b"early answer"));
        conn.drain(CEILING);
    });
    let client = h2c().request_timeout(Duration::ZERO).build().unwrap();
    // No waker kept: nothing will ever wake the upload, which never ends.
    let gate = Arc::new(Gate::default());
    let response = client
        .post(server.url("/"))
        .body(gated_upload(&gate))
        .send()
        .wait();
    let mut response = answered(response);
    head_in
        .recv_timeout(CEILING)
        .expect("the client read the head");
    let woken = Arc::new(WokenFlag::default());
    let waker = Waker::from(woken.clone());
    let mut task = std::task::Context::from_waker(&waker);
    let body = response.body_mut();
    assert!(
        std::pin::Pin::new(&mut *body)
            .poll_frame(&mut task)
            .is_pending(),
        "no byte of the body has been sent yet"
    );
    go.send(()).unwrap();
    assert!(
        eventually(CEILING, || woken.0.load(Ordering::SeqCst)),
        "the waiting reader was not woken for the answer's last bytes"
    );
    match std::pin::Pin::new(&mut *body).poll_frame(&mut task) {
        Poll::Ready(Some(Ok(frame))) => {
            assert_eq!(
                frame.into_data().ok().as_deref(),
                Some(&b"early answer"[..])
            )
        }
        other => panic!("not the answer's bytes: {other:?}"),
    }
    // The upload goes on.
    assert!(!gate.dropped.load(Ordering::SeqCst));
    client.close();
}

/// A head, one small DATA frame (an event of a stream of them), and then
/// the stream's or the connection's failure, `end`, in one write: the
/// reader gets the frame's bytes, then an error — never the error alone.
fn bytes_then(end: fn(u32) -> Vec<u8>) -> (Vec<u8>, Option<tickless::Error>) {
    let server = RawH2Server::start(move |mut conn| {
        let id = conn.read_requests(1)[0];
        let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
        out.extend(frame(DATA, 0, id, b"event: one\n\n"));
        out.extend(end(id));
        conn.send(&out);
        conn.drain(CEILING);
    });
    let client = h2c().build().unwrap();
    let mut response = client.get(server.url("/events")).send().wait().unwrap();
    let mut got = Vec::new();
    let error = loop {
        match response.chunk().wait() {
            Ok(Some(chunk)) => got.extend_from_slice(&chunk),
            Ok(None) => break None,
            Err(error) => break Some(error),
        }
    };
    client.close();
    (got, error)
}

#[test]
fn the_bytes_before_a_reset_or_a_goaway_reach_the_reader_before_its_error() {
    for (end, name) in [
        ((|id| rst_stream(id, 2)) as fn(u32) -> Vec<u8>, "RST_STREAM"),
        (|_| goaway(0, 2), "GOAWAY"),
    ] {
        let (got, error) = bytes_then(end);
        assert_eq!(got, b"event: one\n\n", "{name}, then {error:?}");
        assert!(error.is_some(), "{name}: the failure is told");
    }
}

/// A header field for a hand-written HEADERS block: literal, new name,
/// not indexed (name and value under 127 bytes).
fn field(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x00, name.len() as u8];
    out.extend_from_slice(name);
    out.push(value.len() as u8);
    out.extend_from_slice(value);
    out
}

/// `:status` `code` (HPACK: a literal field, the static table's name).
fn status(code: &[u8; 3]) -> Vec<u8> {
    let mut out = vec![0x08, 3];
    out.extend_from_slice(code);
    out
}

/// A server's frames for a stream, given its id.
type Answer = fn(u32) -> Vec<u8>;

/// A raw server whose one connection's first request is answered with
/// `answer` alone (no PING after it: see [`answering`]), then read until
/// the client is done with it.
fn answering_alone(answer: Answer) -> RawH2Server {
    RawH2Server::start(move |mut conn| {
        let id = conn.read_requests(1)[0];
        conn.send(&answer(id));
        conn.drain(CEILING);
    })
}

/// A 304 declaring the `content-length` of what it stands for, its stream
/// ended by an empty DATA frame (as hypercorn ends every stream): `h2`
/// resets the stream for the length's mismatch, the client takes it whole.
fn not_modified_ending_with_data(id: u32) -> Vec<u8> {
    let mut block = status(b"304");
    block.extend(field(b"content-length", b"1234"));
    let mut out = frame(HEADERS, END_HEADERS, id, &block);
    out.extend(frame(DATA, END_STREAM, id, b""));
    out
}

/// A `method` request answered by the raw server with `answer`: the
/// status, and the body as the caller reads it.
fn bodiless(method: http::Method, answer: Answer) -> Result<(u16, Vec<u8>), tickless::Error> {
    let server = answering_alone(answer);
    let client = h2c().build().unwrap();
    let outcome = client
        .request(method, server.url("/"))
        .send()
        .wait()
        .and_then(|response| {
            let status = response.status().as_u16();
            Ok((status, response.bytes().wait()?.to_vec()))
        });
    client.close();
    outcome
}

/// An answer to HEAD, a 204 or a 304 has no body, whatever its head
/// declares or its DATA frames carry (as over HTTP/1.1): a 304 may declare
/// the `content-length` of what it stands for (RFC 9113 §8.1.1) and end
/// with an empty DATA frame (hypercorn ends every stream so); a 204 with
/// DATA, or a HEAD's answer with the DATA its length declares, gives an
/// empty body, not those bytes, nor an error after the head.
#[test]
fn an_answer_that_has_no_body_ends_whole_and_empty_whatever_its_data() {
    let cases: [(http::Method, Answer, u16); 3] = [
        (http::Method::GET, not_modified_ending_with_data, 304),
        (
            http::Method::GET,
            |id| {
                let mut out = frame(HEADERS, END_HEADERS, id, &status(b"204"));
                out.extend(frame(DATA, END_STREAM, id, b"abc"));
                out
            },
            204,
        ),
        (
            http::Method::HEAD,
            |id| {
                let mut block = status(b"200");
                block.extend(field(b"content-length", b"5"));
                let mut out = frame(HEADERS, END_HEADERS, id, &block);
                out.extend(frame(DATA, END_STREAM, id, b"hello"));
                out
            },
            200,
        ),
    ];
    for (method, answer, code) in cases {
        let outcome = bodiless(method.clone(), answer);
        match outcome {
            Ok((status, body)) => {
                assert_eq!(status, code, "{method}");
                assert_eq!(body, b"", "{method} answered {code}: no body");
            }
            Err(error) => panic!("{method} answered {code}: {error:?}"),
        }
    }
}

/// A body that ended with its head says so through `http_body` before
/// any read, with an exact size hint of 0, as hyper's does: a `HEADERS`
/// frame that ends the stream (with a `content-length` of 0 or none), an
/// answer to HEAD, a 204 or a 304 (whose streams the server leaves open
/// here). One whose stream goes on does not, until it is read: a
/// `content-length` of 0 with trailers to come, a body in DATA.
#[test]
fn a_body_that_ended_with_its_head_is_at_its_end_before_any_read() {
    let cases: [(http::Method, Answer, bool); 7] = [
        (http::Method::GET, |id| ok_headers(id), true),
        (
            http::Method::GET,
            |id| {
                let mut block = status(b"200");
                block.extend(field(b"content-length", b"0"));
                frame(HEADERS, END_HEADERS | END_STREAM, id, &block)
            },
            true,
        ),
        (
            http::Method::HEAD,
            |id| {
                let mut block = status(b"200");
                block.extend(field(b"content-length", b"5"));
                frame(HEADERS, END_HEADERS, id, &block)
            },
            true,
        ),
        (
            http::Method::GET,
            |id| frame(HEADERS, END_HEADERS, id, &status(b"204")),
            true,
        ),
        (
            http::Method::GET,
            |id| frame(HEADERS, END_HEADERS, id, &status(b"304")),
            true,
        ),
        (
            http::Method::GET,
            |id| {
                let mut block = status(b"200");
                block.extend(field(b"content-length", b"0"));
                let mut out = frame(HEADERS, END_HEADERS, id, &block);
                out.extend(trailers(id));
                out
            },
            false,
        ),
        (
            http::Method::GET,
            |id| {
                let mut out = frame(HEADERS, END_HEADERS, id, &status(b"200"));
                out.extend(frame(DATA, END_STREAM, id, b"abc"));
                out
            },
            false,
        ),
    ];
    for (i, (method, answer, ended)) in cases.into_iter().enumerate() {
        let server = answering_alone(answer);
        let client = h2c().build().unwrap();
        let response = client
            .request(method.clone(), server.url("/"))
            .send()
            .wait()
            .unwrap();
        let mut body = response.into_body();
        assert_eq!(Body::is_end_stream(&body), ended, "case {i}: {method}");
        if ended {
            let hint = Body::size_hint(&body);
            assert_eq!((hint.lower(), hint.upper()), (0, Some(0)), "case {i}");
        }
        // Read all the same, through `http_body`, to its end.
        let mut frames = 0;
        while let Some(frame) = block_on(std::future::poll_fn(|cx| {
            std::pin::Pin::new(&mut body).poll_frame(cx)
        })) {
            frame.unwrap();
            frames += 1;
        }
        assert!(Body::is_end_stream(&body), "case {i}: {method}");
        assert_eq!(frames == 0, ended, "case {i}: {method}");
        client.close();
    }
}

/// A body that ended with its head while the request's body still goes
/// is not at its end before a read when the answer is a 2xx — its end
/// waits for the upload's (`Exchange::hold_answer`): a poll is pending
/// meanwhile, and code that trusts `is_end_stream` (hyper's HTTP/2
/// server, forwarding it) would drop it unpolled, which stops the upload
/// — but is when the answer stops the upload as it comes (a 304: nothing
/// waits for it). Before, each said it had ended.
#[test]
fn a_2xx_that_ends_its_stream_while_the_upload_goes_is_not_at_its_end_before_a_read() {
    let cases: [(&str, Answer, bool); 3] = [
        ("200, END_STREAM", |id| ok_headers(id), false),
        (
            "204",
            |id| frame(HEADERS, END_HEADERS, id, &status(b"204")),
            false,
        ),
        (
            "304",
            |id| frame(HEADERS, END_HEADERS, id, &status(b"304")),
            true,
        ),
    ];
    for (name, answer, ended) in cases {
        let server = answering_alone(answer);
        let client = h2c().build().unwrap();
        let mut response = client
            .put(server.url("/"))
            .body(Upload::from_reader(std::io::repeat(b'u'), None))
            .send()
            .wait()
            .unwrap();
        let body = response.body_mut();
        assert_eq!(Body::is_end_stream(body), ended, "{name}");
        if ended {
            let mut read = Vec::new();
            std::io::Read::read_to_end(body, &mut read).unwrap();
            assert_eq!(read, b"", "{name}");
        } else {
            let mut cx = std::task::Context::from_waker(Waker::noop());
            let polled = std::pin::Pin::new(body).poll_frame(&mut cx);
            assert!(polled.is_pending(), "{name}: {polled:?}");
        }
        client.close();
    }
}

/// DATA frames, each with its flags.
type DataFrames = &'static [(u8, &'static [u8])];

/// A 200 declaring `content-length: 10`, then `frames`, read as a
/// `std::io::Read`: what came before the error, and the error's kind.
fn read_declared_ten(frames: DataFrames) -> (Vec<u8>, std::io::ErrorKind) {
    let server = RawH2Server::start(move |mut conn| {
        let id = conn.read_requests(1)[0];
        let mut block = status(b"200");
        block.extend(field(b"content-length", b"10"));
        let mut out = frame(HEADERS, END_HEADERS, id, &block);
        for (flags, data) in frames {
            out.extend(frame(DATA, *flags, id, data));
        }
        conn.send(&out);
        conn.drain(CEILING);
    });
    let client = h2c().build().unwrap();
    let mut response = client.get(server.url("/")).send().wait().unwrap();
    let mut read = Vec::new();
    let mut piece = [0; 64];
    let kind = loop {
        match std::io::Read::read(response.body_mut(), &mut piece) {
            Ok(0) => panic!("read whole: {read:?}"),
            Ok(n) => read.extend_from_slice(&piece[..n]),
            Err(error) => break error.kind(),
        }
    };
    client.close();
    (read, kind)
}

/// DATA that disagree with the declared `content-length` break the
/// response's framing (RFC 9113 §8.1.1: malformed, a stream error, which
/// `h2` resets with `PROTOCOL_ERROR`): the body fails with `InvalidData`,
/// as `Body` documents for a framing break — not `Other`, the kind of a
/// stream the server reset — whether the DATA fall short of it (the end on
/// an empty DATA frame, or on the short frame itself) or pass it. What came
/// in the frames before the offending one is read first; the offending
/// frame `h2` drops whole (as hyper, on `h2`, does), its bytes never read.
#[test]
fn data_that_disagree_with_the_declared_length_fail_the_body_as_invalid_data() {
    let cases: [(DataFrames, &[u8]); 3] = [
        (&[(0, b"hello"), (END_STREAM, b"")], b"hello"),
        (&[(0, b"hel"), (END_STREAM, b"lo")], b"hel"),
        (&[(0, b"hello"), (0, b"hello, world")], b"hello"),
    ];
    for (frames, before) in cases {
        let (read, kind) = read_declared_ten(frames);
        assert_eq!(kind, std::io::ErrorKind::InvalidData, "{frames:?}");
        // The frames before the offending one, and no byte that was not
        // sent (`h2` drops the offending frame: none of it, here).
        assert!(read.starts_with(before), "{frames:?}: {read:?}");
        assert!(b"hello".starts_with(&read), "{frames:?}: {read:?}");
    }
}

/// Answers with `status` and then DATA for as long as the client takes
/// it, as fast as the windows allow: the stream never ends. Records the
/// client's reset, and returns it.
async fn endless_data(mut stream: H2Stream, status: u16) -> Option<h2::Reason> {
    let head = http::Response::builder().status(status).body(()).unwrap();
    let Ok(mut send) = stream.respond.send_response(head, false) else {
        return None;
    };
    let piece = Bytes::from(vec![b'x'; PIECE]);
    loop {
        send.reserve_capacity(piece.len());
        match std::future::poll_fn(|task| send.poll_capacity(task)).await {
            Some(Ok(0)) => {}
            Some(Ok(n)) => {
                if send.send_data(piece.slice(..n), false).is_err() {
                    return None;
                }
            }
            // Reset, or the connection's end.
            _ => {
                let reset = std::future::poll_fn(|task| send.poll_reset(task)).await;
                if let Ok(reason) = reset {
                    stream.stats.record_reset(reason);
                }
                return reset.ok();
            }
        }
    }
}

/// An answer to HEAD, or a 204, is whole with its head whatever DATA
/// follows it (as over HTTP/1.1, where the bytes after such a head end the
/// connection, not the answer): a server that streams DATA after it for
/// ever has the stream reset, not its DATA read and its window given back
/// until the request's timeout. (Before, the empty body came only at the
/// stream's end: here, at the request timeout, as its error.)
#[test]
fn an_answer_that_has_no_body_is_whole_at_its_head_whatever_data_follows_for_ever() {
    let resets = Arc::new(Mutex::new(Vec::new()));
    let server = H2Server::start({
        let resets = resets.clone();
        move |stream| {
            let resets = resets.clone();
            async move {
                let method = stream.request.method().clone();
                let status = if method == http::Method::HEAD {
                    200
                } else {
                    204
                };
                let reset = endless_data(stream, status).await;
                resets.lock().unwrap().push((method, reset));
            }
        }
    });
    let client = h2c().build().unwrap();
    for (method, code) in [(http::Method::HEAD, 200), (http::Method::GET, 204)] {
        let response = client
            .request(method.clone(), server.url("/"))
            .send()
            .wait()
            .unwrap();
        assert_eq!(response.status(), code, "{method}");
        let body = response.bytes().wait();
        assert_eq!(body.unwrap(), "", "{method} answered {code}: no body");
    }
    // Each stream reset once: the 204's by the client at its head
    // (`CANCEL`); the HEAD's so too if its head came alone, or by `h2`
    // (`PROTOCOL_ERROR`) if its first DATA came with it — `h2` rejects a
    // HEAD's DATA that carries a byte — which the server's threads decide.
    let both = eventually(CEILING, || resets.lock().unwrap().len() == 2);
    let resets = resets.lock().unwrap().clone();
    assert!(both, "{resets:?}");
    for (method, reset) in resets {
        let allowed: &[h2::Reason] = if method == http::Method::HEAD {
            &[h2::Reason::CANCEL, h2::Reason::PROTOCOL_ERROR]
        } else {
            &[h2::Reason::CANCEL]
        };
        let reset = reset.unwrap_or_else(|| panic!("{method}: not reset"));
        assert!(allowed.contains(&reset), "{method}: {reset:?}");
    }
    assert_eq!(
        server.stats.resets().len(),
        2,
        "{:?}",
        server.stats.resets()
    );
    client.close();
}

/// Reads frames until the client resets stream `id`; returns its code
/// (`None` if the connection ended, or went quiet for [`CEILING`], first).
fn until_reset_of(conn: &mut RawConn, id: u32) -> Option<u32> {
    let _ = conn.stream.set_read_timeout(Some(CEILING));
    while let Some(frame) = conn.read_frame() {
        if frame.kind == RST_STREAM && frame.stream == id {
            return resets(&[frame]).first().map(|&(_, code)| code);
        }
    }
    None
}

/// An answer to HEAD, a 204 or a 304 is whole at its head, as over
/// HTTP/1.1, though the server leaves its stream open (HEADERS without
/// `END_STREAM`) and says no more: the exchange completes there, with an
/// empty body, not at the request timeout; and the stream, of which
/// nothing more is wanted, is reset with `CANCEL` rather than held open
/// (its slot with it) until the server ends it. (Before, the answer waited
/// for the stream's end: here, the request timeout, as its error.)
#[test]
fn an_answer_that_has_no_body_is_whole_at_its_head_though_its_stream_stays_open() {
    let cases: [(http::Method, &'static [u8; 3]); 3] = [
        (http::Method::HEAD, b"200"),
        (http::Method::GET, b"204"),
        (http::Method::GET, b"304"),
    ];
    for (method, code) in cases {
        let (reset, reset_seen) = mpsc::channel();
        let server = RawH2Server::start(move |mut conn| {
            let id = conn.read_requests(1)[0];
            conn.send(&frame(HEADERS, END_HEADERS, id, &status(code)));
            let _ = reset.send(until_reset_of(&mut conn, id));
            conn.drain(CEILING);
        });
        // A request timeout well past the test's other waits: the answer
        // comes before it, or is held for the stream's end.
        let client = h2c_builder(1, Duration::from_secs(30))
            .body_window(PIECE)
            .build()
            .unwrap();
        let code = std::str::from_utf8(code).unwrap();
        let outcome = client
            .request(method.clone(), server.url("/"))
            .send()
            .wait()
            .and_then(|response| Ok((response.status(), response.bytes().wait()?)));
        if let Err(error) = &outcome {
            assert!(
                !error.is_timeout(),
                "{method} answered {code}: held until the request timeout: {error:?}"
            );
        }
        let (status, body) = outcome.unwrap();
        assert_eq!(status.as_str(), code, "{method}");
        assert_eq!(body, "", "{method} answered {code}: no body");
        let reset = reset_seen.recv_timeout(CEILING).unwrap();
        assert_eq!(reset, Some(0x8), "{method} answered {code}: CANCEL");
        client.close();
    }
}

/// DATA that a server sends all the same on the open stream of an answer
/// that has no body (here a 204) — with its head, or after the client has
/// reset the stream — is no body's, and leaves the connection's other
/// streams as they were: one opened before it gets its own body whole,
/// and the connection serves the next request.
#[test]
fn data_on_the_open_stream_of_an_answer_that_has_no_body_is_dropped_and_harms_no_other_stream() {
    let (held_seen, held_came) = mpsc::channel();
    let server = RawH2Server::start(move |mut conn| {
        let held = conn.read_requests(1)[0];
        let _ = held_seen.send(());
        // DATA with the head.
        let with = conn.read_requests(1)[0];
        let mut answer = frame(HEADERS, END_HEADERS, with, &status(b"204"));
        answer.extend(frame(DATA, 0, with, &[b'x'; PIECE]));
        conn.send(&answer);
        // DATA after the client's reset, the last ending the stream.
        let after = conn.read_requests(1)[0];
        conn.send(&frame(HEADERS, END_HEADERS, after, &status(b"204")));
        assert_eq!(until_reset_of(&mut conn, after), Some(0x8));
        conn.send(&frame(DATA, 0, after, &[b'y'; PIECE]));
        conn.send(&frame(DATA, END_STREAM, after, b"yyy"));
        // The stream opened before them.
        let mut answer = frame(HEADERS, END_HEADERS, held, &status(b"200"));
        answer.extend(frame(DATA, END_STREAM, held, b"hello"));
        conn.send(&answer);
        conn.answer_all();
    });
    let client = h2c().build().unwrap();
    let held = client.get(server.url("/held")).send();
    held_came.recv_timeout(CEILING).unwrap();
    for path in ["/with", "/after"] {
        let response = client.get(server.url(path)).send().wait().unwrap();
        assert_eq!(response.status(), 204, "{path}");
        let body = response.bytes().wait().unwrap();
        assert_eq!(body, "", "{path}: no body");
    }
    let held = held.wait().unwrap();
    assert_eq!(held.status(), 200);
    assert_eq!(held.bytes().wait().unwrap(), "hello");
    let next = client.get(server.url("/next")).send().wait().unwrap();
    assert_eq!(next.status(), 200);
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    client.close();
}

/// `h2` counts every stream it resets for a server's protocol error
/// against a limit per connection (`max_local_error_reset_streams`, 1024,
/// never counted down), past which it ends the connection with
/// `GOAWAY(ENHANCE_YOUR_CALM)`, failing every stream on it. The 304s of
/// [`not_modified_ending_with_data`] are such resets, yet answers the
/// client takes: a connection that gets many of them (a cache revalidating
/// against hypercorn) retires before that, its open streams finishing,
/// and the requests after go to a new connection.
#[test]
fn many_bodiless_answers_that_h2_resets_fail_no_stream_open_beside_them() {
    const ANSWERS: usize = 1100;
    let (seen, held_seen) = mpsc::channel();
    let server = RawH2Server::start(move |mut conn| {
        if conn.index > 0 {
            while let Some(&id) = conn.read_requests(1).first() {
                conn.send(&not_modified_ending_with_data(id));
            }
            return;
        }
        let held = conn.read_requests(1)[0];
        let _ = seen.send(());
        // 304s until the client takes its requests elsewhere (or closes).
        let _ = conn
            .stream
            .set_read_timeout(Some(Duration::from_millis(500)));
        while let Some(&id) = conn.read_requests(1).first() {
            conn.send(&not_modified_ending_with_data(id));
        }
        conn.send(&ok_headers(held));
        conn.drain(CEILING);
    });
    let client = h2c().build().unwrap();
    let held = client.get(server.url("/held")).send();
    held_seen.recv_timeout(CEILING).unwrap();
    let statuses: Vec<_> = (0..ANSWERS)
        .map(|_| {
            let response = client.get(server.url("/cached")).send().wait()?;
            let status = response.status().as_u16();
            Ok::<_, tickless::Error>((status, response.bytes().wait()?))
        })
        .collect();
    match held.wait() {
        Ok(response) => assert_eq!(response.status(), 200),
        Err(error) => panic!("the stream held open beside the 304s: {error:?}"),
    }
    for (i, answer) in statuses.into_iter().enumerate() {
        let (status, body) = answer.unwrap();
        assert_eq!((status, &body[..]), (304, &b""[..]), "answer {i}");
    }
    // The first connection retired once, well before h2's limit.
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    client.close();
}

/// The same for answers that come while their request's upload still
/// goes (a PUT answered 204 before its body is all sent): the stream stays
/// open for the upload, and the server ends it after the head — by an
/// empty DATA frame against the `content-length` the 204 declared — which
/// `h2` resets it for (`PROTOCOL_ERROR`), counting the reset, though
/// nobody receives on the stream any more. The client counts it too: the
/// connection retires before `h2`'s limit, and the stream held open
/// beside them is answered. (Counted only at the head, the client let the
/// connection run into the limit: at its 1025th reset `h2` ended it with
/// `GOAWAY(ENHANCE_YOUR_CALM)`, failing the held stream and the PUT.)
#[test]
fn bodiless_answers_h2_resets_after_their_head_mid_upload_are_counted_as_well() {
    const ANSWERS: usize = 1100;
    let (seen, held_seen) = mpsc::channel();
    let (answered, has_answered) = mpsc::channel::<()>();
    let has_answered = Arc::new(Mutex::new(has_answered));
    let server = RawH2Server::start(move |mut conn| {
        let held = if conn.index == 0 {
            let held = conn.read_requests(1)[0];
            let _ = seen.send(());
            // Answers until the client takes its requests elsewhere.
            let _ = conn
                .stream
                .set_read_timeout(Some(Duration::from_millis(500)));
            Some(held)
        } else {
            None
        };
        let mut next = std::collections::VecDeque::new();
        while let Some(id) = next
            .pop_front()
            .or_else(|| conn.read_requests(1).first().copied())
        {
            let mut block = status(b"204");
            block.extend(field(b"content-length", b"1234"));
            conn.send(&frame(HEADERS, END_HEADERS, id, &block));
            // The client has the head: the stream is open for the upload.
            if has_answered.lock().unwrap().recv_timeout(CEILING).is_err() {
                return;
            }
            conn.send(&frame(DATA, END_STREAM, id, b""));
            while let Some(frame) = conn.read_frame() {
                if frame.kind == HEADERS {
                    next.push_back(frame.stream);
                }
                if frame.kind == RST_STREAM && frame.stream == id {
                    break;
                }
            }
        }
        if let Some(held) = held {
            conn.send(&ok_headers(held));
            conn.drain(CEILING);
        }
    });
    let client = h2c().build().unwrap();
    let held = client.get(server.url("/held")).send();
    held_seen.recv_timeout(CEILING).unwrap();
    // Held, as a caller may: one let go would have its stream reset
    // (`CANCEL`) before the server ends it.
    let mut kept = Vec::new();
    for i in 0..ANSWERS {
        let dropped = Arc::new(AtomicBool::new(false));
        let response = client
            .put(server.url("/up"))
            .body(Upload::from_stream(EndlessUpload(dropped)))
            .send()
            .wait()
            .unwrap_or_else(|error| panic!("answer {i}: {error}"));
        assert_eq!(response.status(), 204, "answer {i}");
        answered.send(()).unwrap();
        kept.push(response);
    }
    match held.wait() {
        Ok(response) => assert_eq!(response.status(), 200),
        Err(error) => panic!("the stream held open beside the 204s: {error:?}"),
    }
    // The first connection retired once, well before h2's limit.
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    client.close();
}

/// Content on the stream of an answer that has no body — DATA after a
/// 204's head, while the request's upload still goes — makes the answer
/// malformed (RFC 9113 §8.1.1): the client resets the stream with
/// `PROTOCOL_ERROR`, stopping the upload, and the 204 stands, empty. (It
/// took the DATA and gave its window back for as long as the upload ran:
/// 8 MiB in a reviewer's run, and on.)
#[test]
fn content_on_a_bodiless_answers_stream_mid_upload_resets_it() {
    let (told, reset) = mpsc::channel();
    let server = RawH2Server::start(move |mut conn| {
        let id = conn.read_requests(1)[0];
        conn.send(&frame(HEADERS, END_HEADERS, id, &status(b"204")));
        conn.send(&frame(DATA, 0, id, &[b'd'; 1000]));
        let _ = conn.stream.set_read_timeout(Some(CEILING));
        while let Some(frame) = conn.read_frame() {
            if frame.kind == RST_STREAM && frame.stream == id {
                let _ = told.send(u32::from_be_bytes(frame.payload[..4].try_into().unwrap()));
                return;
            }
        }
    });
    let client = h2c().build().unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let response = client
        .put(server.url("/up"))
        .body(Upload::from_stream(EndlessUpload(dropped.clone())))
        .send()
        .wait()
        .unwrap();
    assert_eq!(response.status(), 204);
    assert_eq!(response.bytes().wait().unwrap(), "");
    const PROTOCOL_ERROR: u32 = 1;
    assert_eq!(reset.recv_timeout(CEILING), Ok(PROTOCOL_ERROR));
    assert!(
        eventually(CEILING, || dropped.load(Ordering::SeqCst)),
        "the upload goes on"
    );
    client.close();
}

/// The keep-alive interval and timeout of [`dead_after_answering`]'s
/// client, moved by its `ManualClock`.
const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// Reads the first request with `read` (to its id), sends `answer` for it,
/// and, once the client has read it, goes dead: reads on (its window shut:
/// an upload waits), answering nothing, PINGs included. The client sends
/// the request `send` makes with a `ManualClock` moving its keep-alive
/// PING's interval and then its timeout (the write timeout off: nothing
/// else ends an upload), and returns the response — to be read after the
/// connection has been given up (with the client, and the server, to
/// drop after it).
fn dead_after_answering(
    read: fn(&mut RawConn) -> u32,
    answer: impl Fn(u32) -> Vec<u8> + Send + Sync + 'static,
    send: impl FnOnce(&Client, String) -> tickless::ResponseFuture,
) -> (tickless::Response, Arc<Recorder>, Client, RawH2Server) {
    let (told, all_in) = mpsc::channel();
    let (pinged, ping_seen) = mpsc::channel();
    let told = Mutex::new((told, pinged));
    let server = RawH2Server::start(move |mut conn| {
        let id = read(&mut conn);
        let mut out = answer(id);
        out.extend(ping());
        conn.send(&out);
        let _ = until_pong(&mut conn);
        let (told, pinged) = {
            let told = told.lock().unwrap();
            (told.0.clone(), told.1.clone())
        };
        let _ = told.send(());
        while let Some(frame) = conn.read_frame() {
            if frame.kind == PING && frame.flags & ACK == 0 {
                let _ = pinged.send(());
            }
        }
    });
    let clock = ManualClock::new();
    let recorder = Recorder::new();
    let client = h2c()
        .clock(Arc::new(clock.clone()))
        .listener(recorder.clone())
        .write_timeout(Duration::ZERO)
        .http2_keep_alive_interval(KEEP_ALIVE)
        .http2_keep_alive_timeout(KEEP_ALIVE)
        .build()
        .unwrap();
    let response = answered(send(&client, server.url("/")).wait());
    all_in
        .recv_timeout(CEILING)
        .expect("the client read the frames");
    clock.advance(KEEP_ALIVE);
    ping_seen
        .recv_timeout(CEILING)
        .expect("the client sent its keep-alive PING");
    clock.advance(KEEP_ALIVE);
    (response, recorder, client, server)
}

/// A response come whole, most of its body in `h2`'s buffer behind a full
/// pipe (its reader has not read yet), then the server goes dead: the
/// keep-alive PING's timeout gives the connection up, and the response,
/// whole, stands, as when the connection closes (it was lost: the reader
/// got the pipe's 16 KiB, then the PING's timeout).
#[test]
fn a_body_received_whole_stands_when_the_keep_alive_ping_goes_unanswered() {
    let answer = |id| {
        let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
        out.extend(body_frames(id, false));
        out
    };
    let get = |client: &Client, url: String| client.get(url).send();
    let (response, recorder, client, _server) =
        dead_after_answering(|conn| conn.read_requests(1)[0], answer, get);
    assert_whole(response);
    assert_eq!(ended(&recorder), Ok(200));
    client.close();
}

/// Cancels its request's future (put in once the request is sent) at the
/// first interim head.
#[derive(Default)]
struct CancelsAtInterim(Mutex<Option<tickless::ResponseFuture>>);

impl tickless::EventListener for CancelsAtInterim {
    fn on_interim_head(&self, _: &tickless::RequestInfo, _: &tickless::ResponseHead<'_>) {
        if let Some(future) = &*self.0.lock().unwrap() {
            future.cancel();
        }
    }
}

/// The client's HTTP/2 streams open as its request's head is told.
struct StreamsOpenAtHead {
    client: Client,
    open: Mutex<Option<usize>>,
}

impl tickless::EventListener for StreamsOpenAtHead {
    fn on_response_head(&self, _: &tickless::RequestInfo, _: &tickless::ResponseHead<'_>) {
        *self.open.lock().unwrap() = Some(self.client.stats().http2_streams_open);
    }
}

/// A listener cancels its request (A) at a `103 Early Hints`: the stream
/// is reset with `CANCEL` and leaves the connection in the very poll that
/// told the `103`, as it does when a listener cancels at the final head —
/// not held for the abort the cancel posts to the loop, a turn later. The
/// server writes A's `103` and the whole answer to B (asked after A, on
/// the same connection) at once: the client reads both in one pass and
/// polls A's stream, opened first, before B's, on the loop's thread — so
/// B's head is told with A's stream gone, one stream open (B's), where
/// the posted abort, which runs after that pass, would have left two.
#[test]
fn a_cancel_at_an_interim_head_frees_the_stream_in_the_same_poll() {
    let (a_read, a_in) = mpsc::channel();
    let (reset, reset_seen) = mpsc::channel();
    let told = Mutex::new((a_read, reset));
    let server = RawH2Server::start(move |mut conn| {
        let a = conn.read_requests(1)[0];
        let _ = told.lock().unwrap().0.send(());
        let b = conn.read_requests(1)[0];
        let mut out = early_hints(a);
        out.extend(ok_headers(b));
        conn.send(&out);
        while let Some(frame) = conn.read_frame() {
            if frame.kind == RST_STREAM && frame.stream == a {
                let _ = told.lock().unwrap().1.send(resets(&[frame]));
                break;
            }
        }
        conn.drain(CEILING);
    });
    let client = h2c().build().unwrap();
    let cancels = Arc::new(CancelsAtInterim::default());
    let a = client
        .get(server.url("/a"))
        .listener(cancels.clone())
        .send();
    *cancels.0.lock().unwrap() = Some(a);
    a_in.recv_timeout(CEILING).expect("the server read A");
    let at_head = Arc::new(StreamsOpenAtHead {
        client: client.clone(),
        open: Mutex::new(None),
    });
    let b = client
        .get(server.url("/b"))
        .listener(at_head.clone())
        .send()
        .wait()
        .unwrap();
    assert_eq!(b.status(), 200);
    assert_eq!(
        *at_head.open.lock().unwrap(),
        Some(1),
        "A's stream left at its cancel, before B's head was told"
    );
    assert_eq!(
        reset_seen.recv_timeout(CEILING),
        Ok(vec![(1, 8)]),
        "A's stream is reset with CANCEL"
    );
    let a = cancels.0.lock().unwrap().take().expect("A's future");
    assert!(matches!(a.wait(), Err(tickless::Error::Cancelled)));
    client.close();
}

/// A head that ends its stream (`END_STREAM` on its `HEADERS`), in the
/// forms a server sends: whole and empty at its head — an answer to HEAD
/// or a 204 declaring `content-length: 5` (RFC 9113 §8.1.1 exempts them),
/// a gRPC-style "trailers-only" answer (its fields in the head: there are
/// no trailers), a final head after a `103` — or malformed, its stream
/// reset by the client with `PROTOCOL_ERROR` as `h2` finds it (a 200
/// declaring 5 bytes it ends without, a `103` that ends the stream),
/// the connection going on.
#[test]
fn heads_that_end_their_stream_are_whole_and_empty_or_malformed() {
    fn ending(code: &[u8; 3], length: Option<&[u8]>) -> impl Fn(u32) -> Vec<u8> {
        let mut block = status(code);
        if let Some(length) = length {
            block.extend(field(b"content-length", length));
        }
        move |id| frame(HEADERS, END_HEADERS | END_STREAM, id, &block)
    }
    let whole: [(&str, http::Method, Answer); 4] = [
        ("HEAD", http::Method::HEAD, |id| {
            ending(b"200", Some(b"5"))(id)
        }),
        ("204", http::Method::GET, |id| {
            ending(b"204", Some(b"5"))(id)
        }),
        ("trailers-only", http::Method::GET, |id| {
            let mut block = status(b"200");
            block.extend(field(b"grpc-status", b"0"));
            frame(HEADERS, END_HEADERS | END_STREAM, id, &block)
        }),
        ("103, then 200", http::Method::GET, |id| {
            let mut out = frame(HEADERS, END_HEADERS, id, &status(b"103"));
            out.extend(ending(b"200", None)(id));
            out
        }),
    ];
    for (name, method, answer) in whole {
        let server = answering_alone(answer);
        let client = h2c().build().unwrap();
        let mut response = client
            .request(method, server.url("/"))
            .send()
            .wait()
            .unwrap();
        assert!(Body::is_end_stream(response.body_mut()), "{name}");
        let mut read = Vec::new();
        std::io::Read::read_to_end(response.body_mut(), &mut read).unwrap();
        assert_eq!(read, b"", "{name}");
        assert!(response.body_mut().trailers().is_none(), "{name}");
        if name == "trailers-only" {
            assert_eq!(response.headers()["grpc-status"], "0");
        }
        client.close();
    }
    let malformed: [(&str, Answer); 2] = [
        ("200 declaring 5 bytes", |id| ending(b"200", Some(b"5"))(id)),
        ("103 ending the stream", |id| ending(b"103", None)(id)),
    ];
    for (name, answer) in malformed {
        let server = RawH2Server::start(move |mut conn| {
            let ids = conn.read_requests(1);
            conn.send(&answer(ids[0]));
            conn.answer_all();
        });
        let client = h2c().build().unwrap();
        let error = client.get(server.url("/")).send().wait().unwrap_err();
        assert!(
            matches!(
                error,
                tickless::Error::Http2 {
                    reason: tickless::Http2Reason::PROTOCOL_ERROR,
                    initiator: tickless::Http2Initiator::Local,
                    connection: false,
                    ..
                }
            ),
            "{name}: {error:?}"
        );
        let next = client.get(server.url("/next")).send().wait().unwrap();
        assert_eq!(next.status(), 200, "{name}");
        assert_eq!(server.connections.load(Ordering::SeqCst), 1, "{name}");
        client.close();
    }
}
