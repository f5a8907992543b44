//! The response decoder: heads, then the body, then done.

use http::HeaderMap;

use super::body::{BodyDecoder, Step};
use super::error::{DecodeError, Stage};
use super::limits::Limits;
use super::response::{framing, parse_head, ResponseHead, Scanned};

/// What one call to [`ResponseDecoder::decode`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// All of the input that can be used has been consumed: read more bytes
    /// and call again with the unconsumed tail plus the new bytes (or call
    /// [`ResponseDecoder::eof`] if the peer closed the connection).
    NeedMore,
    /// The final (non-1xx) response head. Returned once.
    Head(ResponseHead),
    /// An interim (1xx) head, before the final one: `100 Continue` (the
    /// server will read the request body: the answer to `Expect:
    /// 100-continue`), `102 Processing`, `103 Early Hints`… — any number of
    /// them, bounded all together by [`Limits::max_head_bytes`]. Never
    /// `101 Switching Protocols`, which is an error.
    Interim(ResponseHead),
    /// A piece of body data, borrowed from the input; never empty.
    Body(&'a [u8]),
    /// The trailer fields after a chunked body; only returned when non-empty.
    Trailers(HeaderMap),
    /// The response is complete. `keep_alive`: the connection may carry
    /// another request. Bytes left unconsumed in the input belong to no
    /// response (a body longer than declared, an answer nobody asked for):
    /// the response is still whole, but the connection must not be reused.
    Done {
        /// Whether the connection can be reused.
        keep_alive: bool,
    },
}

#[derive(Debug)]
enum State {
    Head,
    Body { body: BodyDecoder, keep_alive: bool },
    Done { keep_alive: bool },
    Failed(DecodeError),
}

/// Decodes one response. Construct one per request.
///
/// Sans-IO: it is fed bytes and says how many it consumed; it never reads,
/// buffers or waits. See the [module documentation](super) for the loop that
/// drives it.
#[derive(Debug)]
pub struct ResponseDecoder {
    limits: Limits,
    is_head: bool,
    request_keep_alive: bool,
    /// The request carried `Upgrade`: a 101 is the switch it asked for.
    upgrade_requested: bool,
    state: State,
    bytes_seen: bool,
    head_received: bool,
    /// Bytes of the interim (1xx) heads so far, bounded in all by
    /// [`Limits::max_head_bytes`].
    interim_bytes: usize,
    /// What of the head in progress was found incomplete.
    head_scanned: Scanned,
}

impl ResponseDecoder {
    /// A decoder for the response to one request. `is_head`: the request was
    /// HEAD (so the response has no body). `request_keep_alive`: false if the
    /// request said `Connection: close` (the response then never allows reuse).
    pub fn new(limits: Limits, is_head: bool, request_keep_alive: bool) -> Self {
        ResponseDecoder {
            limits,
            is_head,
            request_keep_alive,
            upgrade_requested: false,
            state: State::Head,
            bytes_seen: false,
            head_received: false,
            interim_bytes: 0,
            head_scanned: Scanned::default(),
        }
    }

    /// Whether the request asked for an upgrade (it carried `Upgrade`;
    /// false unless said). Either way a `101 Switching Protocols` is an
    /// error — this decoder speaks HTTP/1.1 only — and this says which:
    /// [`DecodeError::UpgradeNotSupported`] for an upgrade asked for,
    /// [`DecodeError::SwitchingProtocols`] for one that was not.
    pub fn upgrade_requested(mut self, requested: bool) -> Self {
        self.upgrade_requested = requested;
        self
    }

    /// Feeds the unconsumed input. Returns how many bytes of `input` were
    /// consumed and what was decoded.
    ///
    /// Call repeatedly with the remaining input until it returns
    /// [`Decoded::NeedMore`] (all of `input` that can be used has been
    /// consumed: read more bytes and call again with the unconsumed tail plus
    /// the new bytes) or [`Decoded::Done`]. Each interim 1xx head is
    /// returned ([`Decoded::Interim`]) before the final one: it is parsed
    /// whole anyway, so handing it over costs nothing. Bytes after the end
    /// of the response are never consumed.
    /// After `Done`, every call returns `Done` again and consumes nothing.
    ///
    /// # Errors
    ///
    /// A [`DecodeError`] saying what is malformed or over a [`Limits`] bound.
    /// The decoder then stays failed: later calls return the same error.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Decoded<'a>), DecodeError> {
        if !input.is_empty() {
            self.bytes_seen = true;
        }
        let result = self.decode_inner(input);
        if let Err(e) = &result {
            self.state = State::Failed(e.clone());
        }
        result
    }

    fn decode_inner<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Decoded<'a>), DecodeError> {
        match &mut self.state {
            State::Failed(e) => Err(e.clone()),
            State::Done { keep_alive } => Ok((
                0,
                Decoded::Done {
                    keep_alive: *keep_alive,
                },
            )),
            State::Head => self.decode_head(input),
            State::Body { body, keep_alive } => {
                let keep_alive = *keep_alive;
                match body.decode(input)? {
                    (n, Step::NeedMore) => Ok((n, Decoded::NeedMore)),
                    (n, Step::Data(data)) => Ok((n, Decoded::Body(data))),
                    (n, Step::Trailers(t)) => Ok((n, Decoded::Trailers(t))),
                    (n, Step::End) => {
                        self.state = State::Done { keep_alive };
                        Ok((n, Decoded::Done { keep_alive }))
                    }
                }
            }
        }
    }

    fn decode_head<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Decoded<'a>), DecodeError> {
        let Some((n, head)) = parse_head(input, &self.limits, &mut self.head_scanned)? else {
            return Ok((0, Decoded::NeedMore));
        };
        if head.status == http::StatusCode::SWITCHING_PROTOCOLS {
            return Err(if self.upgrade_requested {
                DecodeError::UpgradeNotSupported
            } else {
                DecodeError::SwitchingProtocols
            });
        }
        if head.status.is_informational() {
            // The state stays `Head`: the final head is yet to come.
            self.count_interim(n)?;
            return Ok((n, Decoded::Interim(head)));
        }
        let (kind, keep_alive) = framing(&head, self.is_head, self.request_keep_alive)?;
        self.state = State::Body {
            body: BodyDecoder::new(kind, self.limits),
            keep_alive,
        };
        self.head_received = true;
        Ok((n, Decoded::Head(head)))
    }

    /// Counts an interim head of `n` bytes against the bound on them all.
    /// Each is bounded by itself, but their number is not: a server could
    /// send `102 Processing` for ever, read without end — no body limit
    /// sees it, and the read timeout never fires while they come.
    fn count_interim(&mut self, n: usize) -> Result<(), DecodeError> {
        self.interim_bytes = self.interim_bytes.saturating_add(n);
        let limit = self.limits.max_head_bytes;
        if self.interim_bytes > limit {
            return Err(DecodeError::InterimResponsesTooLarge { limit });
        }
        Ok(())
    }

    /// The peer closed the connection (EOF); call after feeding everything
    /// it sent. Ends a close-delimited (or already complete) body with
    /// [`Decoded::Done`], whose `keep_alive` is then false.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Truncated`] naming where the response was cut: inside
    /// the head (even before its first byte), a `Content-Length` body, a
    /// chunked body or the trailers. A failed decoder returns its error.
    pub fn eof(&mut self) -> Result<Decoded<'static>, DecodeError> {
        let result = match &self.state {
            State::Failed(e) => Err(e.clone()),
            State::Head => Err(DecodeError::Truncated { stage: Stage::Head }),
            State::Body { body, .. } => body.eof(),
            State::Done { .. } => Ok(()),
        };
        match result {
            Ok(()) => {
                self.state = State::Done { keep_alive: false };
                Ok(Decoded::Done { keep_alive: false })
            }
            Err(e) => {
                self.state = State::Failed(e.clone());
                Err(e)
            }
        }
    }

    /// True once [`Decoded::Done`] was returned (by `decode` or `eof`).
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done { .. })
    }

    /// True once the final (non-1xx) head was returned.
    pub fn head_received(&self) -> bool {
        self.head_received
    }

    /// True once any response byte was given to [`decode`](Self::decode),
    /// consumed or not (a partial head is left unconsumed until complete).
    /// An EOF with no byte seen on a reused connection usually means the
    /// server closed it idle, so the request may be retried.
    pub fn bytes_seen(&self) -> bool {
        self.bytes_seen
    }

    /// The bytes still to come of a body framed by `Content-Length`, while
    /// it is being decoded; `None` before the head, after the end, and for
    /// bodies framed otherwise.
    pub fn body_remaining(&self) -> Option<u64> {
        match &self.state {
            State::Body { body, .. } => body.remaining(),
            _ => None,
        }
    }

    /// Where the decoder is, for reporting input that ended early; `None`
    /// once done or failed.
    pub fn stage(&self) -> Option<Stage> {
        match &self.state {
            State::Head => Some(Stage::Head),
            State::Body { body, .. } => Some(body.stage()),
            State::Done { .. } | State::Failed(_) => None,
        }
    }
}
