//! [`RequestBuilder`]: one request, built up and sent.

use super::{Client, ResponseFuture};
use crate::error::{Error, InvalidRequest};
use crate::events::{Both, EventListener};
use crate::exchange::{BodySink, Deadlines, Exchange, ExchangeParts, RequestParts};
use crate::h1::{self, RequestBody};
use crate::net::{Origin, Scheme};
use http::header::{HeaderName, HeaderValue, CONNECTION, TRANSFER_ENCODING};
use std::sync::Arc;
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
    body: Vec<u8>,
    request_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    listener: Option<Arc<dyn EventListener>>,
    body_sink: Option<BodySink>,
}

/// A request checked and encoded, ready to become an exchange.
struct Prepared {
    origin: Origin,
    request: RequestParts,
    deadlines: Deadlines,
    listener: Arc<dyn EventListener>,
    body_sink: Option<BodySink>,
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
            body: Vec::new(),
            request_timeout: None,
            read_timeout: None,
            listener: None,
            body_sink: None,
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

    /// The request body. Sent with `Content-Length`, or chunked if a
    /// `Transfer-Encoding: chunked` header was set.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
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

    /// Streams the response body to `sink` as it arrives instead of
    /// buffering it; the [`Response`](crate::Response) body is then empty.
    /// `sink` runs on the connection's event loop: keep it short (see
    /// [`ClientBuilder::use_event_loop_timeouts`](crate::ClientBuilder::use_event_loop_timeouts)
    /// on running code on a loop).
    pub fn on_body_chunk(mut self, sink: impl FnMut(&[u8]) + Send + 'static) -> Self {
        self.body_sink = Some(Box::new(sink));
        self
    }

    /// Sends the request. The request deadline is fixed now.
    pub fn send(self) -> ResponseFuture {
        let client = self.client.clone();
        let dispatcher = client.dispatcher();
        match self.prepare() {
            Ok(prepared) => {
                let exchange = Exchange::new(ExchangeParts {
                    id: Exchange::next_id(),
                    origin: prepared.origin,
                    request: prepared.request,
                    listener: prepared.listener,
                    body_sink: prepared.body_sink,
                    deadlines: prepared.deadlines,
                    clock: dispatcher.clock().clone(),
                    wheel: dispatcher.wheel().clone(),
                    registry: dispatcher.in_flight().clone(),
                });
                let future = ResponseFuture::new(exchange.clone());
                dispatcher.submit(exchange);
                future
            }
            Err(error) => ResponseFuture::failed(Error::InvalidRequest(error)),
        }
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
        let request = encode(&self.method, &uri, &headers, &self.body)?;
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
                bytes: request,
                keep_alive,
            },
            deadlines: Deadlines {
                request_timeout: pick(self.request_timeout, config.request_timeout),
                read_timeout: pick(self.read_timeout, config.read_timeout),
                on_event_loop: config.use_event_loop_timeouts,
            },
            listener,
            body_sink: self.body_sink,
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

/// Encodes head and body once, at submission.
fn encode(
    method: &http::Method,
    uri: &http::Uri,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<Vec<u8>, InvalidRequest> {
    let chunked = headers
        .get_all(TRANSFER_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.trim().eq_ignore_ascii_case("chunked"));
    let framing = if chunked {
        RequestBody::Chunked
    } else if body.is_empty() {
        RequestBody::Empty
    } else {
        RequestBody::Length(body.len() as u64)
    };
    let mut bytes = Vec::with_capacity(256 + body.len());
    h1::encode_request_head(method, uri, headers, framing, &mut bytes)
        .map_err(InvalidRequest::Encode)?;
    if chunked {
        h1::encode_chunk(body, &mut bytes);
        h1::encode_last_chunk(&mut bytes);
    } else {
        bytes.extend_from_slice(body);
    }
    Ok(bytes)
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
