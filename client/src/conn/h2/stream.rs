//! [`Stream`]: one exchange on the connection — its request body sent as
//! the server's window allows, its response taken into the exchange's
//! pipe, and how it ends: completed, failed, or given back to go again
//! (see the [module documentation](super) for the rules). The connection
//! opens it and polls it when it is woken ([`Stream::poll`]).

use super::failure::{error_of, goaway_failure, refusal, stream_error};
use super::gather::Gathered;
use super::limits::{protocol_error, BodyCount, FieldCount, InterimCount, TrailerSize};
use super::request::trim_values;
use crate::config::MAX_HTTP2_WINDOW;
use crate::conn::upload::{Declared, Pulled, Upload};
use crate::conn::write_stall::WriteStall;
use crate::error::{Error, Http2Reason};
use crate::exchange::{declared_body_length, has_no_body, Exchange, Head, Pipe, Pushed, Waiter};
use crate::net::IoReadiness;
use bytes::Bytes;
use h2::client::ResponseFuture;
use h2::{RecvStream, SendStream};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// One exchange on the connection.
pub(super) struct Stream {
    pub(super) exchange: Arc<Exchange>,
    /// What it is polled with: marks it in the connection's [`Ready`](super::wake::Ready).
    pub(super) waker: Waker,
    pub(super) send: SendStream<Bytes>,
    pub(super) out: Outgoing,
    pub(super) recv: Recv,
    /// The body's pipe was full: what comes is gathered, its window not
    /// given back, until the pipe has room.
    pub(super) paused: bool,
    /// Body bytes taken from `h2` and not yet in the pipe (see [`Gathered`]).
    pub(super) gathered: Gathered,
    /// Whether the body waits on the server's window.
    pub(super) write_stall: WriteStall,
    /// The last send found the rest of the body waiting on the server's
    /// window (whether or not the write stall counted it then: see
    /// [`Stream::send_body`]).
    pub(super) window_shut: bool,
    /// The response body's bytes so far, against `max_body_bytes`.
    pub(super) body: BodyCount,
    /// The interim (1xx) heads so far, against `max_head_bytes`.
    pub(super) interim: InterimCount,
    /// The fields of each head and of the trailers, against `max_headers`.
    pub(super) fields: FieldCount,
    /// The trailers' bytes, against `max_trailer_bytes`.
    pub(super) trailer_size: TrailerSize,
    /// Opened on a connection that had served a stream already.
    pub(super) reused: bool,
    /// Its answer, one that has no body, found its stream reset by `h2`
    /// for the server's error, a reset `h2` counts (see
    /// [`Stream::end_bodiless`] and
    /// [`Http2::taken_resets`](super::Http2::taken_resets)).
    pub(super) took_reset: bool,
    /// The final answer's status is not 2xx: its upload stops once the
    /// answer is whole (see [`Stream::answered`]).
    pub(super) refused: bool,
}

/// What is left of the request body.
pub(super) enum Outgoing {
    /// In memory.
    Data(Bytes),
    /// Streamed: from its source, held to its declared length, and the
    /// piece taken from it and not yet sent (waiting for flow-control
    /// capacity).
    Streamed(Upload, Declared, Option<Bytes>),
    /// Sent whole (`END_STREAM`).
    Done,
    /// Not sent whole, and never will be: the stream ended first — the
    /// server reset it, having answered or not (RFC 9113 §8.1: a complete
    /// answer, then `RST_STREAM(NO_ERROR)`, asks the client to stop
    /// sending) — and the response says how it ended.
    Stopped,
}

impl Outgoing {
    /// Whether some of the body is still to be sent.
    pub(super) fn is_sending(&self) -> bool {
        matches!(self, Outgoing::Data(_) | Outgoing::Streamed(..))
    }
}

/// How far the response is.
pub(super) enum Recv {
    Head(ResponseFuture),
    Body(RecvStream),
    Trailers(RecvStream),
    /// The response has come whole (its trailers with it, if it had some)
    /// before the request body was all sent: RFC 9113 §8.1 lets a server
    /// answer a request it has not read whole, and that answer is no
    /// reason for the client to stop sending. The exchange completes when
    /// the upload ends, or when the server stops it — `RST_STREAM`
    /// (`NO_ERROR`, as §8.1 has a server do), the connection's end, or no
    /// window for the write timeout: the answer, whole, stands (see
    /// [`Stream::answered`]). The request timeout, should it come first,
    /// stops the upload and the answer stands as well. Its trailers wait in
    /// the exchange ([`Exchange::hold_answer`]), which completes with them.
    /// An answer that has no body keeps its stream's receiving half here
    /// while the upload goes ([`Stream::end_bodiless`]): what comes on it
    /// after the head is dropped, and a reset of `h2`'s own for it counted.
    Ended(Option<RecvStream>),
    /// Between two of the above.
    Moving,
}

/// What [`Stream::end_bodiless`] found on a bodiless answer's stream.
#[derive(Default)]
struct Bodiless {
    /// `h2` reset the stream for the server's error (a reset it counts).
    reset_by_h2: bool,
    /// DATA that carried bytes came.
    content: bool,
}

/// What [`Stream::next_buffered`] found.
enum Buffered {
    Data(Bytes),
    /// The response's end, with its trailers if it had some.
    End(Option<http::HeaderMap>),
    /// Nothing more for now: the rest, or the end, has not come (or the
    /// stream failed).
    NotYet,
}

/// What became of a stream after a poll.
pub(super) enum Polled {
    /// Still going.
    Open,
    /// Ended (completed, failed or given back): it leaves the connection.
    Gone,
}

impl Stream {
    /// Moves the stream on: checks it is still wanted, sends what it can of
    /// the body, takes what it can of the response. `goaway_error` and
    /// `io_ready` say why the connection failed, if it did, better than
    /// `h2`'s error would.
    pub(super) fn poll(
        &mut self,
        now: Instant,
        info: Option<&crate::events::ConnectionInfo>,
        retry: &mut Vec<(Arc<Exchange>, bool)>,
        goaway_error: Option<Http2Reason>,
        io_ready: &IoReadiness,
    ) -> Polled {
        // Ended elsewhere (a timeout, a cancel) with its abort on the way.
        if self.exchange.is_done() {
            return self.cancelled();
        }
        let waker = self.waker.clone();
        let mut task = Context::from_waker(&waker);
        let task = &mut task;
        if let Err(error) = self.send_body(task, now, info) {
            let refused = refusal(io_ready, &self.exchange);
            return self.failed(refused.unwrap_or(error));
        }
        match self.receive(task, now, info) {
            Ok(polled) => polled,
            Err(error) => {
                let unprocessed = self.unprocessed(&error);
                if unprocessed && self.may_go_again() {
                    retry.push((self.exchange.clone(), true));
                } else if self.may_go_again_after_close(&error) {
                    // Not to another pooled connection: it may be as stale.
                    retry.push((self.exchange.clone(), false));
                } else {
                    let error = match goaway_error {
                        // The connection dropped after a GOAWAY with an
                        // error: that error is why.
                        Some(reason) if error.reason().is_none() => {
                            goaway_failure(&self.exchange, reason)
                        }
                        _ => refusal(io_ready, &self.exchange).unwrap_or_else(|| {
                            let failure = stream_error(&self.exchange, error, io_ready);
                            if unprocessed {
                                self.exchange.unprocessed(failure)
                            } else {
                                failure
                            }
                        }),
                    };
                    self.exchange.finish_err(error);
                }
                Polled::Gone
            }
        }
    }

    /// Whether the stream failed with `error` the server says it never
    /// processed, before any answer.
    ///
    /// "Never processed" is exact. `REFUSED_STREAM` says so of one stream.
    /// A `GOAWAY` says so of the streams above its last stream id, and `h2`
    /// (0.4, `Streams::recv_go_away`) fails exactly those, at once, with
    /// the frame's own error — remote, `GOAWAY`, its code, whether
    /// `NO_ERROR` or not — and no other stream ever gets that error: the
    /// streams at or below the id go on, and fail, if the connection ends
    /// under them, with an I/O error (`recv_eof`) or a local one, which
    /// [`Stream::poll`] reports with the `GOAWAY`'s code.
    fn unprocessed(&self, error: &h2::Error) -> bool {
        error.is_remote()
            && (error.is_go_away() || error.reason() == Some(h2::Reason::REFUSED_STREAM))
            && matches!(self.recv, Recv::Head(_))
    }

    /// Whether the request of a stream the server never processed goes
    /// again, whatever its method: its body can be sent again, and it has
    /// not gone again already. Otherwise it fails, marked unprocessed.
    fn may_go_again(&self) -> bool {
        self.exchange.request.replayable() && !self.exchange.retried.swap(true, Ordering::AcqRel)
    }

    /// Whether the request of a stream that failed with `error` before any
    /// answer, its connection gone with no word (the socket closed or
    /// failed, no `GOAWAY` that named it unprocessed), goes again on a new
    /// connection: as over HTTP/1.1, where a reused connection's failure
    /// before any byte of the response sends it again, once, if it may go
    /// twice (RFC 9110 §9.2.2: idempotent, its body in memory) — the
    /// server may have closed the connection as idle as the request came.
    /// On a connection that served nothing yet the failure is the
    /// request's own. The server may have processed it: the request is
    /// marked so.
    fn may_go_again_after_close(&self, error: &h2::Error) -> bool {
        let again = self.reused
            && error.is_io()
            && matches!(self.recv, Recv::Head(_))
            && self.exchange.may_retry()
            && !self.exchange.retried.swap(true, Ordering::AcqRel);
        if again {
            self.exchange.maybe_processed.store(true, Ordering::Release);
        }
        again
    }

    /// Nothing more of the stream is wanted: it is reset (`CANCEL`) and
    /// leaves the connection.
    fn cancelled(&mut self) -> Polled {
        self.send.send_reset(h2::Reason::CANCEL);
        Polled::Gone
    }

    /// The exchange fails with `error`: the stream is
    /// [cancelled](Self::cancelled) first.
    fn failed(&mut self, error: Error) -> Polled {
        let gone = self.cancelled();
        self.exchange.finish_err(error);
        gone
    }

    /// The response's body passed `max_body_bytes` (or declares it will):
    /// the stream is reset and the exchange fails.
    fn too_large(&mut self) -> Polled {
        self.failed(self.body.too_large(&self.exchange))
    }

    /// The pipe is full: the stream waits for room, its read timeout with
    /// it (a reader that does not read is not the server's silence).
    ///
    /// Paused, the stream still takes what `h2` holds of the body, to
    /// `Gathered`, its window not given back — so `h2` wakes it for each
    /// frame that comes — until there is nothing more, or the body's end
    /// (`END_STREAM`): that end must be seen while the connection lives.
    /// Once it ends, `h2` marks every stream it has not seen closed both
    /// ways as failed ("stream closed because of a broken pipe"), which
    /// hides the end of one still sending its body, and the answer,
    /// whole, was lost. It costs nothing more: `h2` has those bytes in
    /// memory already, and the stream's window (which the server may not
    /// pass) bounds them — in `h2`'s buffer or in `Gathered`, the same.
    fn pause(&mut self) {
        self.paused = true;
        self.exchange.pause_read();
    }

    /// The connection has ended: if the whole response had come — its end
    /// received, some of its body still in `h2`'s buffer behind a full
    /// pipe — the rest goes into the pipe, past its window (it is in
    /// memory already), and the exchange completes (or fails, past the
    /// body limit). Whether it ended the exchange.
    pub(super) fn finish_from_buffer(&mut self) -> bool {
        if let Some(chunk) = self.gathered.take() {
            self.exchange.body().push_last(chunk);
        }
        let mut task = Context::from_waker(Waker::noop());
        loop {
            match self.next_buffered(&mut task) {
                Buffered::Data(data) => {
                    if !self.body.fits(data.len(), None) {
                        // The bytes within the limit first, as in `receive`.
                        self.exchange.body().push_last(within_limit(
                            &self.body,
                            &self.exchange,
                            &data,
                        ));
                        self.exchange
                            .finish_err(self.body.too_large(&self.exchange));
                        return true;
                    }
                    self.exchange.listener.on_body_part(data.len());
                    self.exchange.body().push_last(data);
                }
                Buffered::End(trailers) => {
                    match self.check_trailers(trailers.as_ref()) {
                        Ok(()) => self.exchange.complete(trailers),
                        Err(error) => self.exchange.finish_err(error),
                    };
                    return true;
                }
                Buffered::NotYet => return false,
            }
        }
    }

    /// The body's reader has gone. If the response has all come — its end
    /// received, what is left of it in `h2`'s buffer — the exchange has
    /// completed (the caller merely did not read it all): the rest is
    /// discarded, and the stream, its answer ended, is not reset for it —
    /// unless its upload is still going ([`Recv::Ended`]): nobody waits
    /// for that any more, and the stream is reset to stop it. If not,
    /// nothing more is wanted: the stream is reset, and the exchange
    /// cancelled.
    fn reader_gone(&mut self, task: &mut Context<'_>) -> Polled {
        if let (Some(chunk), Recv::Body(body) | Recv::Trailers(body)) =
            (self.gathered.take(), &mut self.recv)
        {
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        loop {
            match self.next_buffered(task) {
                Buffered::Data(data) => self.exchange.listener.on_body_part(data.len()),
                Buffered::End(trailers) => {
                    if self.out.is_sending() {
                        self.send.send_reset(h2::Reason::CANCEL);
                    }
                    self.exchange.complete(trailers);
                    return Polled::Gone;
                }
                Buffered::NotYet => return self.failed(self.exchange.reader_gone_error()),
            }
        }
    }

    /// Whether the response's `trailers`, if it had some, are within
    /// `max_headers` ([`FieldCount`]) and `max_trailer_bytes`
    /// ([`TrailerSize`]); if not, the exchange's error.
    fn check_trailers(&self, trailers: Option<&http::HeaderMap>) -> Result<(), Error> {
        trailers.map_or(Ok(()), |trailers| {
            self.fields.check(trailers, &self.exchange)?;
            self.trailer_size.check(trailers, &self.exchange)
        })
    }

    /// The next part of the response body that `h2` holds already, or its
    /// end if that has come, without waiting for more. What it takes out
    /// of `h2`'s buffer gives its window back.
    fn next_buffered(&mut self, task: &mut Context<'_>) -> Buffered {
        loop {
            match &mut self.recv {
                Recv::Body(body) => match body.poll_data(task) {
                    Poll::Ready(Some(Ok(data))) => {
                        let _ = body.flow_control().release_capacity(data.len());
                        return Buffered::Data(data);
                    }
                    Poll::Ready(None) => {
                        if let Recv::Body(body) = std::mem::replace(&mut self.recv, Recv::Moving) {
                            self.recv = Recv::Trailers(body);
                        }
                    }
                    Poll::Ready(Some(Err(_))) | Poll::Pending => return Buffered::NotYet,
                },
                Recv::Trailers(body) => {
                    return match body.poll_trailers(task) {
                        Poll::Ready(Ok(trailers)) => Buffered::End(trailers),
                        Poll::Ready(Err(_)) | Poll::Pending => Buffered::NotYet,
                    };
                }
                // Its trailers are the exchange's (`Exchange::hold_answer`).
                Recv::Ended(_) => return Buffered::End(None),
                Recv::Head(_) | Recv::Moving => return Buffered::NotYet,
            }
        }
    }

    /// The stream of an answer that has no body whatever its head declares
    /// (an answer to HEAD, a 204, a 304: [`has_no_body`]) ends at its
    /// head, as such an answer does over HTTP/1.1 (RFC 9110 §6.4.1; over
    /// HTTP/2 its DATA carry no content either, RFC 9113 §8.1.1): the
    /// exchange completes there, with an empty body (once its upload has
    /// ended: see [`Stream::answered`]) — not at the stream's end, which a
    /// server may never send (HEADERS without `END_STREAM`, then silence):
    /// waiting for it would hold the answer until the request timeout.
    ///
    /// What `h2` holds already of the stream is taken here, its DATA
    /// dropped (and its window given back), to see whether the stream has
    /// ended. One that has not is reset with `CANCEL` as it leaves (`h2`
    /// resets a stream whose handles are dropped before it is closed both
    /// ways), rather than held open, its slot of the server's concurrency
    /// limit with it, until the server ends it: nothing more of it is
    /// wanted, and no timer of the exchange, whole, bounds the wait. (hyper,
    /// which hands every answer over at its head, resets such a stream so,
    /// through `h2`, when the caller drops the body: unread, for a HEAD's
    /// answer, as reading it would wait for the stream's end.)
    /// DATA that comes after the stream has left is `h2`'s to drop: it
    /// ignores a stream it has reset, or whose body's handle is gone, giving
    /// the connection's window back. While the request's upload goes on,
    /// the stream stays, and so does its receiving half ([`Recv::Ended`]),
    /// taken from again here each time the stream is polled: `h2` checks a
    /// declared length on DATA whether or not anyone receives it, and a
    /// reset it makes for that after the head must be counted as one made
    /// with it is. Its end may have come as an error: a 304 may declare
    /// the `content-length` of what it stands for (RFC 9113 §8.1.1), and
    /// `h2` resets such a stream if its `END_STREAM` comes on a DATA frame
    /// rather than on its head (hypercorn ends every stream so), as it
    /// does a HEAD's answer whose DATA carries a byte: told as
    /// [`Bodiless::reset_by_h2`], `h2` having counted that reset (see
    /// [`Http2::taken_resets`](super::Http2::taken_resets)).
    ///
    /// DATA that carries bytes makes the answer malformed (RFC 9113
    /// §8.1.1), a stream error: an upload that still goes is stopped then
    /// ([`Stream::malformed_content`]) — or a server could send DATA for as
    /// long as it ran, each piece's window given back here.
    fn end_bodiless(body: &mut RecvStream, task: &mut Context<'_>) -> Bodiless {
        let mut found = Bodiless::default();
        loop {
            match body.poll_data(task) {
                Poll::Ready(Some(Ok(data))) => {
                    found.content |= !data.is_empty();
                    let _ = body.flow_control().release_capacity(data.len());
                }
                Poll::Ready(Some(Err(error))) => {
                    found.reset_by_h2 = error.is_library();
                    return found;
                }
                Poll::Ready(None) | Poll::Pending => return found,
            }
        }
    }

    /// A bodiless answer's stream carried content (see
    /// [`Stream::end_bodiless`]): an upload that still goes stops, the
    /// stream reset with `PROTOCOL_ERROR`, and the answer stands.
    fn malformed_content(&mut self) {
        if self.out.is_sending() {
            self.send.send_reset(h2::Reason::PROTOCOL_ERROR);
            self.out = Outgoing::Stopped;
        }
    }

    /// Sends what the server's window takes of the request body, and
    /// tells the write stall whether the rest waits on the window (see
    /// [`WriteStall`]) — before the answer's head: after it the read
    /// timeout bounds the server, which may have stopped reading on
    /// purpose — and again once the answer is whole ([`Recv::Ended`]),
    /// whose end waits for the upload's.
    fn send_body(
        &mut self,
        task: &mut Context<'_>,
        now: Instant,
        info: Option<&crate::events::ConnectionInfo>,
    ) -> Result<(), Error> {
        let (waits, took) = self.send_what_fits(task, now, info)?;
        self.window_shut = waits;
        // Before the answer's head, and once the answer is whole and waits
        // for the upload (nothing is left to read then, and the write
        // timeout's expiry lets the answer stand: `Exchange::hold_answer`);
        // in between the read timeout bounds the server.
        let waits = waits && matches!(self.recv, Recv::Head(_) | Recv::Ended(_));
        self.write_stall.step(&self.exchange, waits, took, || now);
        Ok(())
    }

    /// The response has come whole, with `trailers` if it had some. With
    /// the request whole too, the exchange completes: the stream, ended
    /// both ways, leaves. If not, the answer waits for the upload's end
    /// ([`Recv::Ended`]) — rather than the stream's leaving now, which
    /// would have `h2` reset it with `CANCEL` and cut the upload short
    /// (RFC 9113 §8.1: a complete answer is no reason to stop sending).
    /// Nothing is left to read: the read timeout stops, and a reader
    /// waiting for the body is woken for what it has. A server that
    /// takes no more of the body (its window shut) for the write timeout
    /// has the upload stopped there, with `CANCEL`, and the answer stands —
    /// it does not depend on the rest (RFC 9113 §8.1), and a server that
    /// stops reading has said no more than one that resets with
    /// `NO_ERROR` — and so for the request timeout, which stops the upload
    /// with `CANCEL` and completes the exchange with the answer it holds
    /// ([`Exchange::hold_answer`]). A cancel, the client's closing and the
    /// upload's own failure end the exchange as they would before the
    /// answer's end. `Open` then. A refusal ([`Stream::refused`]) stops the
    /// upload here, as over HTTP/1.1 (`Sending::answered`): the server has
    /// said it does not want the rest, and an upload that goes on — or
    /// waits on a source with nothing more to give — would hold the
    /// caller's answer until it ended.
    fn answered(&mut self, trailers: Option<http::HeaderMap>, now: Instant) -> Polled {
        if self.out.is_sending() && self.refused {
            self.send.send_reset(h2::Reason::CANCEL);
            self.out = Outgoing::Stopped;
        }
        if !self.out.is_sending() {
            self.exchange.complete(trailers);
            return Polled::Gone;
        }
        self.recv = Recv::Ended(None);
        self.exchange.hold_answer(trailers);
        // A window shut already is a wait on the server from now.
        let waits = self.window_shut;
        self.write_stall.step(&self.exchange, waits, false, || now);
        Polled::Open
    }

    /// [`send_body`](Self::send_body)'s sending: whether the rest waits on
    /// the server's window, and whether the window let some go meanwhile.
    fn send_what_fits(
        &mut self,
        task: &mut Context<'_>,
        now: Instant,
        info: Option<&crate::events::ConnectionInfo>,
    ) -> Result<(bool, bool), Error> {
        let mut took = false;
        loop {
            let piece = match &mut self.out {
                Outgoing::Done | Outgoing::Stopped => return Ok((false, took)),
                Outgoing::Data(data) => data,
                Outgoing::Streamed(upload, declared, pending) => {
                    if pending.as_ref().is_none_or(Bytes::is_empty) {
                        // Its declared length sent: whole, whether or not
                        // the source has said it has ended (it may never).
                        if declared.whole() {
                            self.send_part(task, Bytes::new(), true, now, info)?;
                            return Ok((false, took));
                        }
                        match declared.next(|| upload.pull_with(task.waker())) {
                            Pulled::Data(data) => *pending = Some(data),
                            Pulled::End => {
                                self.send_part(task, Bytes::new(), true, now, info)?;
                                return Ok((false, took));
                            }
                            Pulled::Trailers(trailers) => {
                                self.send_trailers(task, trailers, now, info)?;
                                return Ok((false, took));
                            }
                            Pulled::Pending => return Ok((false, took)),
                            Pulled::Failed(error) => return Err(error),
                        }
                    }
                    pending.as_mut().expect("just filled")
                }
            };
            if piece.is_empty() {
                // In memory, all sent but the end.
                self.send_part(task, Bytes::new(), true, now, info)?;
                return Ok((false, took));
            }
            // `h2` takes the capacity asked for as a `u32`, cut short:
            // a piece of 4 GiB and more would ask for its length modulo
            // 4 GiB — none at all, at exactly 4 GiB left, and the stream
            // would wait for capacity for ever. No window is larger than
            // `MAX_HTTP2_WINDOW`: asking for more gains nothing.
            self.send
                .reserve_capacity(piece.len().min(MAX_HTTP2_WINDOW as usize));
            let capacity = self.send.capacity();
            if capacity == 0 {
                match self.send.poll_capacity(task) {
                    Poll::Ready(Some(Ok(_))) => continue,
                    Poll::Ready(Some(Err(e))) => return Err(error_of(&self.exchange, e)),
                    Poll::Pending => return Ok((true, took)),
                    // The stream has ended: nothing more goes, and its
                    // response says how it ended.
                    Poll::Ready(None) => {
                        self.out = Outgoing::Stopped;
                        return Ok((false, took));
                    }
                }
            }
            let part = piece.split_to(capacity.min(piece.len()));
            took = true;
            let last = piece.is_empty() && matches!(self.out, Outgoing::Data(_));
            let sent = self.send_part(task, part, last, now, info)?;
            if last || !sent {
                return Ok((false, took));
            }
        }
    }

    /// Sends `part` of the body — its last, ending the stream, if `last` —
    /// and returns whether it went. It does not if the stream has ended
    /// under it: the server reset it (maybe after a complete answer), read
    /// by the pass's connection poll before this upload's. Then nothing
    /// more goes, and the response, not this refusal, says how the stream
    /// ended.
    fn send_part(
        &mut self,
        task: &mut Context<'_>,
        part: Bytes,
        last: bool,
        now: Instant,
        info: Option<&crate::events::ConnectionInfo>,
    ) -> Result<bool, Error> {
        if let Err(error) = self.send.send_data(part, last) {
            // Not reset, nor ended otherwise: a refusal of its own.
            if self.send.poll_reset(task).is_pending() {
                return Err(error_of(&self.exchange, error));
            }
            self.out = Outgoing::Stopped;
            return Ok(false);
        }
        if last {
            self.out = Outgoing::Done;
            request_sent(&self.exchange, info, now);
        }
        Ok(true)
    }

    /// Ends the upload with `trailers`, a trailing HEADERS frame (their
    /// values trimmed, as the head's) — as [`send_part`](Self::send_part)
    /// sends its last part, and refused as it is.
    fn send_trailers(
        &mut self,
        task: &mut Context<'_>,
        mut trailers: http::HeaderMap,
        now: Instant,
        info: Option<&crate::events::ConnectionInfo>,
    ) -> Result<(), Error> {
        trim_values(&mut trailers);
        if let Err(error) = self.send.send_trailers(trailers) {
            if self.send.poll_reset(task).is_pending() {
                return Err(error_of(&self.exchange, error));
            }
            self.out = Outgoing::Stopped;
            return Ok(());
        }
        self.out = Outgoing::Done;
        request_sent(&self.exchange, info, now);
        Ok(())
    }

    /// Takes what has come of the response: its head, its body into the
    /// pipe while it has room, its trailers.
    fn receive(
        &mut self,
        task: &mut Context<'_>,
        now: Instant,
        info: Option<&crate::events::ConnectionInfo>,
    ) -> Result<Polled, h2::Error> {
        loop {
            match &mut self.recv {
                Recv::Head(response) => {
                    // The interim (1xx) heads first (`h2` holds them, the
                    // final head behind them): told to the listener, then
                    // dropped, but bounded in all. Each is the server's
                    // word on the stream, and restarts the read timeout,
                    // as a byte does over HTTP/1.1. A listener that ends
                    // the exchange as it is told (a cancel, a panic) frees
                    // the stream there, as at the final head below. A 101
                    // fails it ([`switching_protocols`]).
                    while let Poll::Ready(Some(interim)) = response.poll_informational(task) {
                        let interim = interim?;
                        if interim.status() == http::StatusCode::SWITCHING_PROTOCOLS {
                            return Ok(self.failed(switching_protocols(&self.exchange)));
                        }
                        if let Err(error) = self.fields.check(interim.headers(), &self.exchange) {
                            return Ok(self.failed(error));
                        }
                        if !self.interim.fits(&interim) {
                            return Ok(self.failed(self.interim.too_large(&self.exchange)));
                        }
                        self.exchange.mark_read(|| now);
                        let goes_on = self.exchange.tell_interim(
                            http::Version::HTTP_2,
                            interim.status(),
                            None,
                            interim.headers(),
                        );
                        if !goes_on {
                            return Ok(self.cancelled());
                        }
                    }
                    let response = match Pin::new(response).poll(task) {
                        Poll::Pending => return Ok(Polled::Open),
                        Poll::Ready(response) => response?,
                    };
                    self.exchange.mark_read(|| now);
                    // A head before the request is all sent (the server
                    // answered early, and may have stopped reading it):
                    // from now on the read timeout bounds the server's
                    // silence, as it does once the request is out.
                    if !matches!(self.out, Outgoing::Done) {
                        self.exchange.start_read(|| now);
                        self.write_stall.end(&self.exchange);
                    }
                    let (parts, mut body) = response.into_parts();
                    if let Err(error) = self.fields.check(&parts.headers, &self.exchange) {
                        return Ok(self.failed(error));
                    }
                    // A HEAD's answer, a 204 or a 304 has no body, whatever
                    // length it declares (as for HTTP/1.1).
                    let declared = declared_body_length(
                        &self.exchange.request.method,
                        parts.status,
                        &parts.headers,
                    );
                    // A body declared over the limit fails once the head is
                    // delivered (a redirect or a caller acts on it).
                    let over_limit = !self.body.fits(0, declared);
                    self.refused = !parts.status.is_success();
                    let exchange = &self.exchange;
                    let bodiless = has_no_body(&exchange.request.method, parts.status);
                    // A 2xx whose upload goes on has its end held for the
                    // upload's, whose failure fails it (`answered`).
                    let end_held = self.out.is_sending() && !self.refused;
                    let head = Head {
                        status: parts.status,
                        version: http::Version::HTTP_2,
                        headers: parts.headers,
                        reason: None,
                        remote: info.map_or_else(
                            || std::net::SocketAddr::from(([0, 0, 0, 0], 0)),
                            |info| info.remote,
                        ),
                        declared_length: declared,
                        // Known ended now: an answer with no body, or one
                        // whose stream `h2` has seen end with nothing of it
                        // left to take (`END_STREAM` on its `HEADERS`) —
                        // unless its end is held.
                        body_ended: (bodiless || body.is_end_stream()) && !end_held,
                    };
                    if !exchange.deliver_head(head) {
                        return Ok(self.cancelled());
                    }
                    if over_limit {
                        return Ok(self.too_large());
                    }
                    if !bodiless {
                        self.recv = Recv::Body(body);
                        continue;
                    }
                    // Whole at its head (see `Stream::end_bodiless`).
                    let found = Stream::end_bodiless(&mut body, task);
                    self.took_reset = found.reset_by_h2;
                    if found.content {
                        self.malformed_content();
                    }
                    if let Polled::Gone = self.answered(None, now) {
                        return Ok(Polled::Gone);
                    }
                    self.recv = Recv::Ended(Some(body));
                }
                Recv::Body(body) => {
                    let pipe = self.exchange.body();
                    if pipe.reader_gone() {
                        return Ok(self.reader_gone(task));
                    }
                    let paused = self.paused && !pipe.has_room();
                    if self.paused && !paused {
                        self.paused = false;
                        self.exchange.start_read(|| now);
                    }
                    let data = match body.poll_data(task) {
                        Poll::Pending if paused => return Ok(Polled::Open),
                        Poll::Pending => {
                            match push_chunks(body, pipe, self.gathered.take(), task) {
                                Pushed::Room => {}
                                Pushed::Full => {
                                    // `h2` has nothing more: waiting.
                                    self.pause();
                                    return Ok(Polled::Open);
                                }
                                Pushed::Refused => return Ok(self.reader_gone(task)),
                            }
                            pipe.flush();
                            return Ok(Polled::Open);
                        }
                        Poll::Ready(None) => {
                            if let Recv::Body(body) =
                                std::mem::replace(&mut self.recv, Recv::Moving)
                            {
                                self.recv = Recv::Trailers(body);
                            }
                            continue;
                        }
                        Poll::Ready(Some(Err(error))) => {
                            // What came before the error reaches the reader
                            // before it.
                            push_last(body, pipe, self.gathered.take());
                            return Err(error);
                        }
                        Poll::Ready(Some(Ok(data))) => data,
                    };
                    let n = data.len();
                    if !self.body.fits(n, None) {
                        // Every byte up to the limit reaches the reader
                        // before the error, as over HTTP/1.1 for a body
                        // read to the close: what is gathered, and the
                        // part of this frame within the limit.
                        let within = within_limit(&self.body, &self.exchange, &data);
                        push_last(body, pipe, self.gathered.take());
                        push_last(body, pipe, Some(within));
                        return Ok(self.too_large());
                    }
                    self.exchange.listener.on_body_part(n);
                    if paused {
                        // Taken all the same, its window not given back:
                        // see `Gathered`.
                        self.gathered.add(data);
                        continue;
                    }
                    self.exchange.mark_read(|| now);
                    let large = if Gathered::is_small(&data) {
                        self.gathered.add(data);
                        if !self.gathered.is_full() {
                            continue;
                        }
                        None
                    } else {
                        Some(data)
                    };
                    // What is gathered, then a large frame as it came (past
                    // the window if need be: it is in memory already).
                    let chunks = self.gathered.take().into_iter().chain(large);
                    match push_chunks(body, pipe, chunks, task) {
                        Pushed::Room => {}
                        // On to what `h2` holds already, taken paused (its
                        // window not given back): see `Stream::pause`.
                        Pushed::Full => self.pause(),
                        Pushed::Refused => return Ok(self.reader_gone(task)),
                    }
                }
                Recv::Moving => return Ok(Polled::Open),
                Recv::Trailers(body) => {
                    // The body's last bytes, into the pipe past its window if
                    // need be (they are in memory already).
                    push_last(body, self.exchange.body(), self.gathered.take());
                    let trailers = match body.poll_trailers(task) {
                        Poll::Pending => return Ok(Polled::Open),
                        Poll::Ready(trailers) => trailers?,
                    };
                    if let Err(error) = self.check_trailers(trailers.as_ref()) {
                        return Ok(self.failed(error));
                    }
                    if let Polled::Gone = self.answered(trailers, now) {
                        return Ok(Polled::Gone);
                    }
                }
                Recv::Ended(bodiless) => {
                    if let Some(body) = bodiless {
                        let found = Stream::end_bodiless(body, task);
                        self.took_reset |= found.reset_by_h2;
                        if found.content {
                            self.malformed_content();
                        }
                    }
                    if self.out.is_sending() {
                        if self.exchange.body().reader_gone() {
                            return Ok(self.reader_gone(task));
                        }
                        // The server stops the upload: a reset (RFC 9113
                        // §8.1's `NO_ERROR`, or any other: the answer is
                        // whole already), or the connection's end. Looked
                        // for here, not only by the send: the upload's
                        // source may have nothing to give for a long time.
                        if self.send.poll_reset(task).is_ready() {
                            self.out = Outgoing::Stopped;
                        }
                    }
                    if self.out.is_sending() {
                        return Ok(Polled::Open);
                    }
                    // With the trailers held (`Exchange::hold_answer`).
                    self.exchange.complete(None);
                    return Ok(Polled::Gone);
                }
            }
        }
    }
}

/// A `101 Switching Protocols` over HTTP/2, which has none (RFC 9113
/// §8.6; `h2` hands it over as an interim head): the request fails as
/// over HTTP/1.1, where one that asked for no upgrade does — over HTTP/2
/// none is asked, `Upgrade` being a connection's field — rather than
/// wait for a final head from a server that may think it has switched.
/// The part of `data`, a frame that takes the body past
/// `max_body_bytes` (`count`), within the limit, told to `exchange`'s
/// listener: what a reader gets before the error.
fn within_limit(count: &BodyCount, exchange: &Exchange, data: &Bytes) -> Bytes {
    let within = data.slice(..count.within(data.len()));
    exchange.listener.on_body_part(within.len());
    within
}

fn switching_protocols(exchange: &Exchange) -> Error {
    protocol_error(exchange, crate::h1::DecodeError::SwitchingProtocols)
}

/// Pushes `chunks` of the body into `pipe`, each past its window if need
/// be (they are in memory already), and gives their window back to the
/// server: `Refused` if the reader has gone, else `Full` if the pipe is.
fn push_chunks(
    body: &mut RecvStream,
    pipe: &Pipe,
    chunks: impl IntoIterator<Item = Bytes>,
    task: &Context<'_>,
) -> Pushed {
    let mut pushed = Pushed::Room;
    for chunk in chunks {
        let _ = body.flow_control().release_capacity(chunk.len());
        // Woken through the connection's waker, on its loop.
        match pipe.push(chunk, || Waiter::Task(task.waker().clone())) {
            Pushed::Refused => return Pushed::Refused,
            Pushed::Full => pushed = Pushed::Full,
            Pushed::Room => {}
        }
    }
    pushed
}

/// Pushes the body's last bytes, `chunk`, into `pipe` past its window if
/// need be (nothing more of the body will come), and gives their window
/// back.
fn push_last(body: &mut RecvStream, pipe: &Pipe, chunk: Option<Bytes>) {
    if let Some(chunk) = chunk {
        let _ = body.flow_control().release_capacity(chunk.len());
        pipe.push_last(chunk);
    }
}

/// The request is out whole: the read timeout starts.
pub(super) fn request_sent(
    exchange: &Arc<Exchange>,
    info: Option<&crate::events::ConnectionInfo>,
    now: Instant,
) {
    if let Some(info) = info {
        exchange.listener.on_request_sent(info);
    }
    exchange.start_read(|| now);
}
