//! [`RequestBuilder`]: one request, built up and sent.

use super::upload::{Upload, UploadKind};
use super::{Client, ResponseFuture};
use crate::error::{Error, InvalidRequest};
use crate::events::{Both, EventListener};
use crate::exchange::{
    Deadlines, Exchange, ExchangeParts, Pipe, PumpedBody, RequestBody, RequestParts, Streamed,
    UploadSource,
};
use crate::h1;
use crate::net::{Origin, Scheme};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONNECTION, EXPECT, TRANSFER_ENCODING};
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request being built. Finish with [`send`](Self::send).
///
/// Invalid input (a bad URI, header or body framing) does not panic: the
/// future returned by `send` resolves at once with
/// [`Error::InvalidRequest`].
#[must_use = "a request does nothing until sent"]
pub struct RequestBuilder {
    client: Client,
    method: http::Method,
    uri: Result<http::Uri, InvalidRequest>,
    headers: http::HeaderMap,
    invalid: Option<InvalidRequest>,
    body: Upload,
    request_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    listener: Option<Arc<dyn EventListener>>,
}

/// A request checked and encoded, ready to become an exchange.
struct Prepared {
    origin: Origin,
    request: RequestParts,
    deadlines: Deadlines,
    listener: Arc<dyn EventListener>,
    /// A `Read` body, and the pipe its pump fills.
    pump: Option<(Box<dyn Read + Send>, Arc<Pipe>)>,
}

impl RequestBuilder {
    pub(super) fn new(
        client: Client,
        method: http::Method,
        uri: Result<http::Uri, InvalidRequest>,
    ) -> Self {
        RequestBuilder {
            client,
            method,
            uri,
            headers: http::HeaderMap::new(),
            invalid: None,
            body: Upload::empty(),
            request_timeout: None,
            read_timeout: None,
            listener: None,
        }
    }

    /// Adds a header (repeat the name to send it several times). A name or
    /// value that is not valid HTTP makes the request fail with
    /// [`InvalidRequest::Header`] when sent.
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName>,
        K::Error: Into<http::Error>,
        V: TryInto<HeaderValue>,
        V::Error: Into<http::Error>,
    {
        match (name.try_into(), value.try_into()) {
            (Ok(name), Ok(value)) => {
                self.headers.append(name, value);
            }
            (Err(e), _) => self.invalid = Some(InvalidRequest::Header(e.into())),
            (_, Err(e)) => self.invalid = Some(InvalidRequest::Header(e.into())),
        }
        self
    }

    /// Adds all of `headers`.
    pub fn headers(mut self, headers: http::HeaderMap) -> Self {
        for (name, value) in headers.iter() {
            self.headers.append(name.clone(), value.clone());
        }
        self
    }

    /// The request body: bytes in memory, or a streamed [`Upload`] (from a
    /// `Read`, a file, an async body). Sent with `Content-Length` when its
    /// length is known, chunked otherwise — or chunked if a
    /// `Transfer-Encoding: chunked` header was set.
    pub fn body(mut self, body: impl Into<Upload>) -> Self {
        self.body = body.into();
        self
    }

    /// Sends `Expect: 100-continue`: the body waits for the server's
    /// `100 Continue` (up to [`ClientBuilder::expect_continue_timeout`](crate::ClientBuilder::expect_continue_timeout)),
    /// so a server that refuses the request answers before it is sent.
    /// The same as setting the header yourself.
    pub fn expect_continue(mut self, expect: bool) -> Self {
        if expect {
            self.headers
                .insert(EXPECT, HeaderValue::from_static("100-continue"));
        } else {
            self.headers.remove(EXPECT);
        }
        self
    }

    /// This request's timeout, instead of the client's. Zero: none for this
    /// request. See [`ClientBuilder::request_timeout`](crate::ClientBuilder::request_timeout).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// This request's read timeout, instead of the client's. Zero: none for
    /// this request. See [`ClientBuilder::read_timeout`](crate::ClientBuilder::read_timeout).
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = Some(timeout);
        self
    }

    /// A listener for this request, told of its events besides the client's.
    pub fn listener(mut self, listener: Arc<dyn EventListener>) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Sends the request. The request deadline is fixed now.
    pub fn send(self) -> ResponseFuture {
        let client = self.client.clone();
        let dispatcher = client.dispatcher();
        let prepared = match self.prepare() {
            Ok(prepared) => prepared,
            Err(error) => return ResponseFuture::failed(Error::InvalidRequest(error)),
        };
        if let Some((reader, pipe)) = prepared.pump {
            if let Err(source) = dispatcher.spawn_pump(reader, pipe) {
                return ResponseFuture::failed(Error::RequestBody {
                    source: source.into(),
                });
            }
        }
        let exchange = Exchange::new(ExchangeParts {
            id: Exchange::next_id(),
            origin: prepared.origin,
            request: prepared.request,
            listener: prepared.listener,
            deadlines: prepared.deadlines,
            body_window: dispatcher.config().body_window,
            body_meter: dispatcher.body_meter().clone(),
            pacing: dispatcher.pacing().clone(),
            clock: dispatcher.clock().clone(),
            wheel: dispatcher.wheel().clone(),
            registry: dispatcher.in_flight().clone(),
        });
        let future = ResponseFuture::new(exchange.clone());
        dispatcher.submit(exchange);
        future
    }

    fn prepare(self) -> Result<Prepared, InvalidRequest> {
        if let Some(invalid) = self.invalid {
            return Err(invalid);
        }
        let uri = self.uri?;
        let origin = Origin::of(&uri)?;
        if origin.scheme == Scheme::Https
            && rustls::pki_types::ServerName::try_from(origin.host.as_str()).is_err()
        {
            return Err(InvalidRequest::ServerName(origin.host));
        }
        let config = self.client.dispatcher().config();
        let mut headers = self.headers;
        if !config.keep_alive {
            add_connection_close(&mut headers);
        }
        let keep_alive = !h1::has_connection_token(&headers, b"close");
        let expect_continue = headers.get_all(EXPECT).iter().any(|v| {
            v.as_bytes()
                .trim_ascii()
                .eq_ignore_ascii_case(b"100-continue")
        });
        let data = match &self.body.kind {
            UploadKind::Bytes(bytes) => bytes.clone(),
            _ => Bytes::new(),
        };
        let window = config.body_window;
        let meter = self.client.dispatcher().body_meter().clone();
        let (head, body, pump) = encode(
            &self.method,
            &uri,
            &headers,
            self.body,
            expect_continue,
            || Arc::new(Pipe::new(window, meter)),
        )?;
        let pick = |own: Option<Duration>, default: Option<Duration>| match own {
            Some(own) => (!own.is_zero()).then_some(own),
            None => default,
        };
        let listener = match self.listener {
            Some(own) => Arc::new(Both(config.listener.clone(), own)),
            None => config.listener.clone(),
        };
        Ok(Prepared {
            origin,
            request: RequestParts {
                method: self.method,
                uri,
                headers,
                data,
                head,
                body,
                keep_alive,
                expect_continue,
            },
            deadlines: Deadlines {
                request_timeout: pick(self.request_timeout, config.request_timeout),
                read_timeout: pick(self.read_timeout, config.read_timeout),
                on_event_loop: config.use_event_loop_timeouts,
            },
            listener,
            pump,
        })
    }
}

/// Adds the `close` token to the request's `Connection` header (or adds
/// the header): `keep_alive(false)` holds even for a request that names
/// other connection options (`Connection: te`, for `TE: trailers`).
fn add_connection_close(headers: &mut http::HeaderMap) {
    if h1::has_connection_token(headers, b"close") {
        return;
    }
    let mut tokens: Vec<&[u8]> = headers
        .get_all(CONNECTION)
        .iter()
        .map(HeaderValue::as_bytes)
        .filter(|value| !value.trim_ascii().is_empty())
        .collect();
    tokens.push(b"close");
    let joined = tokens.join(&b", "[..]);
    // Every part was a valid header value, and so is their join.
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        headers.insert(CONNECTION, value);
    }
}

/// A request encoded: its head (with a body in memory after it, unless
/// it waits for `100 Continue`), the body to follow, and a `Read` to pump.
type Encoded = (
    Vec<u8>,
    RequestBody,
    Option<(Box<dyn Read + Send>, Arc<Pipe>)>,
);

/// Encodes the head once, at submission, with the framing the body calls
/// for: `Content-Length` when its length is known (unless the caller asked
/// for chunked), chunked otherwise.
fn encode(
    method: &http::Method,
    uri: &http::Uri,
    headers: &http::HeaderMap,
    body: Upload,
    expect_continue: bool,
    pipe: impl FnOnce() -> Arc<Pipe>,
) -> Result<Encoded, InvalidRequest> {
    let chunked = headers
        .get_all(TRANSFER_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.trim().eq_ignore_ascii_case("chunked"));
    let length = body.length().filter(|_| !chunked);
    let framing = match length {
        None => h1::RequestBody::Chunked,
        Some(0) if matches!(body.kind, UploadKind::Bytes(_)) => h1::RequestBody::Empty,
        Some(n) => h1::RequestBody::Length(n),
    };
    let mut head = Vec::with_capacity(256);
    h1::encode_request_head(method, uri, headers, framing, &mut head)
        .map_err(InvalidRequest::Encode)?;
    let streamed = |source| {
        RequestBody::Streamed(Streamed {
            length,
            source: Mutex::new(Some(source)),
        })
    };
    Ok(match body.kind {
        UploadKind::Bytes(bytes) => {
            let framed = frame(bytes, chunked);
            if expect_continue && !framed.is_empty() {
                (head, RequestBody::Held(framed), None)
            } else {
                head.extend_from_slice(&framed);
                (head, RequestBody::InHead, None)
            }
        }
        UploadKind::Reader { reader, .. } => {
            let pipe = pipe();
            let body = streamed(UploadSource::Pumped(PumpedBody::new(pipe.clone())));
            (head, body, Some((reader, pipe)))
        }
        UploadKind::Stream { body, .. } => (head, streamed(UploadSource::Stream(body)), None),
    })
}

/// A body in memory, framed as it goes on the wire.
fn frame(body: Bytes, chunked: bool) -> Bytes {
    if !chunked {
        return body;
    }
    let mut framed = Vec::with_capacity(body.len() + 16);
    h1::encode_chunk(&body, &mut framed);
    h1::encode_last_chunk(&mut framed);
    Bytes::from(framed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_alive_off_adds_close_to_the_connection_header_there_is() {
        let mut headers = http::HeaderMap::new();
        headers.insert(CONNECTION, HeaderValue::from_static("te"));
        add_connection_close(&mut headers);
        assert_eq!(headers[CONNECTION], "te, close");
        assert!(h1::has_connection_token(&headers, b"close"));
        assert!(h1::has_connection_token(&headers, b"te"));
        let mut none = http::HeaderMap::new();
        add_connection_close(&mut none);
        assert_eq!(none[CONNECTION], "close");
        // Said already: left as it is.
        let mut said = http::HeaderMap::new();
        said.insert(CONNECTION, HeaderValue::from_static("Close"));
        add_connection_close(&mut said);
        assert_eq!(said[CONNECTION], "Close");
    }
}
