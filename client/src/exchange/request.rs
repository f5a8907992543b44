//! [`RequestParts`]: what an exchange sends — its head, and its body in
//! memory or streamed.

use super::pipe::Pipe;
use crate::error::Error;
use crate::sync::{lock, Unshared};
use bytes::Bytes;
use std::io::Read;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

/// An error from where a streamed request body comes from.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An async request body, polled on the connection's loop (through
/// `get_mut`: the caller's body need not be `Sync`, what holds it is).
pub(crate) type BodyStream =
    Unshared<Pin<Box<dyn http_body::Body<Data = Bytes, Error = BoxError> + Send + 'static>>>;

/// What is sent.
pub(crate) struct RequestParts {
    pub(crate) method: http::Method,
    /// The caller's headers as given, for HTTP/2 (which encodes them
    /// itself, with HPACK; its target is the URI of the exchange's
    /// [`RequestInfo`](crate::events::RequestInfo)).
    pub(crate) headers: Arc<http::HeaderMap>,
    /// The `Cookie` field the client's cookie store gave it, sent after
    /// `headers` (see `policy::hop::Hop::cookie`).
    pub(crate) cookie: Option<http::HeaderValue>,
    /// The bytes it sends, until its exchange ends (see
    /// [`payload`](Self::payload)).
    pub(crate) payload: Mutex<Payload>,
    pub(crate) body: RequestBody,
    /// False if the request asks the server to close the connection.
    pub(crate) keep_alive: bool,
    /// The body waits for `100 Continue` (or the delay) after the head.
    pub(crate) expect_continue: bool,
}

/// The bytes a request sends, in memory. They go when its exchange ends:
/// nothing sends them again then (a retry on a fresh connection, or a
/// stream the server never processed sent again, reuses the exchange
/// before its end; a redirect or a policy's retry builds a new one from
/// the request's own copy), and a caller may hold the response, and with it
/// the exchange, long after — with a large upload, all of it.
#[derive(Default)]
pub(crate) struct Payload {
    /// A body in memory, unframed, for HTTP/2 (empty for none, or a
    /// streamed one).
    pub(crate) data: Bytes,
    /// The head, encoded once at submission — and a small body in memory
    /// after it, sent in the same write. A body that waits for `100
    /// Continue`, or a large one (see `policy::hop::IN_HEAD_MAX`), is
    /// `held` instead, never copied here.
    /// Empty for a request that can only go over HTTP/2 (prior knowledge,
    /// or HTTP/2 only over TLS), which never sends an HTTP/1.1 head.
    pub(crate) head: Vec<u8>,
    /// A body in memory that goes after the head (after `100 Continue`, if
    /// the request waits for it), framed (chunk framing included): the
    /// caller's bytes themselves unless chunked.
    pub(crate) held: Bytes,
    /// The exchange has ended and the bytes are gone: nothing of the
    /// request may be sent now.
    pub(crate) released: bool,
}

/// The body, after the head.
pub(crate) enum RequestBody {
    /// None, or in the head already.
    InHead,
    /// In memory, in [`Payload::held`]: sent after the head — after `100
    /// Continue` if the request waits for it, at once otherwise.
    Held,
    /// Streamed: taken by the connection that sends it (once) — or, never
    /// taken, by the policy for a new exchange, after a `417` or a redirect
    /// that answered its `Expect: 100-continue`
    /// ([`RequestParts::take_unsent`]).
    Streamed(Streamed),
}

/// A body that streams after the head.
pub(crate) struct Streamed {
    /// `Content-Length` if known; chunked otherwise.
    pub(crate) length: Option<u64>,
    pub(crate) source: Mutex<Option<UploadSource>>,
    /// For a body that can be read again from where it began (a regular
    /// file's): a new reader of it from there, for the exchange to send it
    /// again, whole, on a fresh connection ([`RequestParts::rewind`]).
    /// `None`: the body goes once.
    pub(crate) reread: Option<Reread>,
}

/// Makes a new reader of a body from where it began.
pub(crate) type Reread = Box<dyn Fn() -> Box<dyn Read + Send> + Send + Sync>;

/// A streamed body set going again from where it began
/// ([`RequestParts::rewind`]): what its new pump needs.
pub(crate) struct Rewound {
    /// A reader of the body from where it began.
    pub(crate) reader: Box<dyn Read + Send>,
    /// The body's declared length (`None`: chunked).
    pub(crate) length: Option<u64>,
    /// The pipe the pump fills, the exchange's new source's.
    pub(crate) pipe: Arc<Pipe>,
}

/// Where a streamed body comes from.
pub(crate) enum UploadSource {
    /// A `Read` pumped by a thread of its own into a bounded pipe.
    Pumped(PumpedBody),
    /// An async body, polled on the connection's loop.
    Stream(BodyStream),
}

impl RequestParts {
    /// Whether the request can be sent again as it is (a retry on a fresh
    /// connection): a streamed body can be sent once, unless it can be
    /// read again from where it began ([`rewind`](Self::rewind)).
    pub(crate) fn replayable(&self) -> bool {
        match &self.body {
            RequestBody::Streamed(streamed) => streamed.reread.is_some(),
            _ => true,
        }
    }

    /// The bytes it sends; [`released`](Payload::released) once its
    /// exchange has ended.
    pub(crate) fn payload(&self) -> MutexGuard<'_, Payload> {
        lock(&self.payload)
    }

    /// Its exchange has ended: the bytes go.
    pub(crate) fn release(&self) {
        let released = std::mem::replace(
            &mut *lock(&self.payload),
            Payload {
                released: true,
                ..Payload::default()
            },
        );
        // Freed here, after the unlock.
        drop(released);
    }

    /// Takes the streamed body's source, for the connection that sends it.
    pub(crate) fn take_source(&self) -> Option<UploadSource> {
        match &self.body {
            RequestBody::Streamed(streamed) => crate::sync::lock(&streamed.source).take(),
            _ => None,
        }
    }

    /// Sets the streamed body going again from where it began, for the
    /// request to go again on a fresh connection, if a connection took its
    /// source (a source no connection took goes as it is) and it can be
    /// read again ([`Streamed::reread`]): a new source, pumped into `pipe`,
    /// and what its pump needs. `Ok(None)` if there is nothing to rewind.
    ///
    /// # Errors
    ///
    /// [`Error::RequestBody`] if a connection took a body that goes once:
    /// it cannot go again, and the request, sent again without it, would
    /// go with no body (or one short of its length).
    pub(crate) fn rewind(
        &self,
        pipe: impl FnOnce() -> Arc<Pipe>,
    ) -> Result<Option<Rewound>, Error> {
        let RequestBody::Streamed(streamed) = &self.body else {
            return Ok(None);
        };
        let mut source = lock(&streamed.source);
        if source.is_some() {
            return Ok(None);
        }
        let Some(reread) = streamed.reread.as_ref() else {
            return Err(Error::RequestBody {
                source: "the request body was taken to be sent once and cannot be sent again"
                    .into(),
            });
        };
        let pipe = pipe();
        *source = Some(UploadSource::Pumped(PumpedBody::new(pipe.clone())));
        Ok(Some(Rewound {
            reader: reread(),
            length: streamed.length,
            pipe,
        }))
    }

    /// Whether a streamed body's source is still here, no connection
    /// having taken it ([`take_unsent`](Self::take_unsent) would have it).
    pub(crate) fn holds_unsent(&self) -> bool {
        match &self.body {
            RequestBody::Streamed(streamed) => crate::sync::lock(&streamed.source).is_some(),
            _ => false,
        }
    }

    /// Takes the streamed body's source if no connection took it — not a
    /// byte of it went, nor was read out of its pipe — with its declared
    /// length (`None`: chunked), for another exchange to send it whole.
    /// Left to its exchange after its end only when a `417` or a redirect
    /// answered the `Expect: 100-continue` it waited for
    /// (`Exchange::take_unsent_body`).
    pub(crate) fn take_unsent(&self) -> Option<(UploadSource, Option<u64>)> {
        match &self.body {
            RequestBody::Streamed(streamed) => {
                let source = crate::sync::lock(&streamed.source).take()?;
                Some((source, streamed.length))
            }
            _ => None,
        }
    }
}

/// The reading end of a pumped body's pipe. Whoever holds it last — the
/// request, until a connection takes the body; then the connection sending
/// it — lets the pump go when dropping it, so a pump never blocks on a body
/// nobody will send.
pub(crate) struct PumpedBody(Arc<Pipe>);

impl PumpedBody {
    pub(crate) fn new(pipe: Arc<Pipe>) -> PumpedBody {
        PumpedBody(pipe)
    }

    pub(crate) fn pipe(&self) -> &Pipe {
        &self.0
    }
}

impl Drop for PumpedBody {
    fn drop(&mut self) {
        self.0.close_reader();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streamed(reread: Option<Reread>) -> RequestParts {
        let pipe = || Arc::new(Pipe::new(1024, Arc::default()));
        RequestParts {
            method: http::Method::POST,
            headers: Arc::default(),
            cookie: None,
            payload: Mutex::default(),
            body: RequestBody::Streamed(Streamed {
                length: None,
                source: Mutex::new(Some(UploadSource::Pumped(PumpedBody::new(pipe())))),
                reread,
            }),
            keep_alive: true,
            expect_continue: false,
        }
    }

    /// A body that goes once, taken by a connection (over HTTP/2 once its
    /// stream opened), cannot go again: sent again, the request fails with `Error::RequestBody` — not sent with no body,
    /// which a new connection, finding no source, would do (chunked, its
    /// end at once). A body not taken goes as it is; a file's is rewound.
    #[test]
    fn a_taken_body_that_goes_once_cannot_be_rewound() {
        let pipe = || Arc::new(Pipe::new(1024, Arc::default()));
        let once = streamed(None);
        assert!(matches!(once.rewind(pipe), Ok(None)), "untaken: as it is");
        assert!(once.take_source().is_some());
        assert!(matches!(
            once.rewind(pipe),
            Err(crate::Error::RequestBody { .. })
        ));

        let reread: Reread = Box::new(|| Box::new(std::io::empty()));
        let file = streamed(Some(reread));
        assert!(file.take_source().is_some());
        assert!(matches!(file.rewind(pipe), Ok(Some(_))));
        assert!(file.take_source().is_some(), "a new source, pumped");
    }
}
