//! [`RequestBuilder`]: one request, built up and sent.

use crate::client::{listener_for, Client};
use crate::error::{Error, InvalidRequest};
use crate::events::{EventListener, Guarded};
use crate::exchange::{BodySink, Exchange, RequestParts};
use crate::h1::response::has_token;
use crate::h1::{self, RequestBody};
use crate::origin::{Origin, Scheme};
use crate::timeouts::TimeoutsHolder;
use crate::ResponseFuture;
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

impl RequestBuilder {
    pub(crate) fn new(
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

    /// Adds a header (repeat the name to send it several times).
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName>,
        K::Error: std::fmt::Display,
        V: TryInto<HeaderValue>,
        V::Error: std::fmt::Display,
    {
        match (name.try_into(), value.try_into()) {
            (Ok(name), Ok(value)) => {
                self.headers.append(name, value);
            }
            (Err(e), _) => self.invalid = Some(InvalidRequest::Header(e.to_string())),
            (_, Err(e)) => self.invalid = Some(InvalidRequest::Header(e.to_string())),
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
        let shared = client.shared();
        let submitted = shared.clock.now();
        match self.prepare() {
            Ok((origin, parts, request_timeout, read_timeout, listener, sink)) => {
                let timeouts = TimeoutsHolder::new(
                    submitted,
                    request_timeout,
                    read_timeout,
                    shared.config.use_event_loop_timeouts,
                    shared.wheel.clone(),
                );
                let listener = listener_for(shared, listener);
                let exchange = Arc::new_cyclic(|exchange| {
                    Exchange::new(
                        shared.next_exchange_id(),
                        shared.clone(),
                        origin,
                        parts,
                        Guarded::new(listener, exchange.clone()),
                        sink,
                        timeouts,
                        submitted,
                    )
                });
                let future = ResponseFuture::new(exchange.clone());
                shared.submit(exchange);
                future
            }
            Err(error) => ResponseFuture::failed(Error::InvalidRequest(error)),
        }
    }

    #[allow(clippy::type_complexity)]
    fn prepare(
        self,
    ) -> Result<
        (
            Origin,
            RequestParts,
            Option<Duration>,
            Option<Duration>,
            Option<Arc<dyn EventListener>>,
            Option<BodySink>,
        ),
        InvalidRequest,
    > {
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
        let config = &self.client.shared().config;
        let mut headers = self.headers;
        if !config.keep_alive && !headers.contains_key(CONNECTION) {
            headers.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        let keep_alive = !has_token(&headers, b"close");
        let chunked = headers
            .get_all(TRANSFER_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.trim().eq_ignore_ascii_case("chunked"));
        let framing = if chunked {
            RequestBody::Chunked
        } else if self.body.is_empty() {
            RequestBody::Empty
        } else {
            RequestBody::Length(self.body.len() as u64)
        };
        let mut bytes = Vec::with_capacity(256 + self.body.len());
        h1::encode_request_head(&self.method, &uri, &headers, framing, &mut bytes)
            .map_err(|e| InvalidRequest::Encode(e.to_string()))?;
        if chunked {
            h1::encode_chunk(&self.body, &mut bytes);
            h1::encode_last_chunk(&mut bytes);
        } else {
            bytes.extend_from_slice(&self.body);
        }
        let pick = |own: Option<Duration>, default: Option<Duration>| match own {
            Some(own) => (!own.is_zero()).then_some(own),
            None => default,
        };
        Ok((
            origin,
            RequestParts {
                method: self.method,
                bytes,
                keep_alive,
            },
            pick(self.request_timeout, config.request_timeout),
            pick(self.read_timeout, config.read_timeout),
            self.listener,
            self.body_sink,
        ))
    }
}
