//! [`RequestBuilder`]: one request, built up and sent.

use super::{Client, IntoHeaderName, ResponseFuture};
use crate::error::shown_uri;
use crate::error::{Error, InvalidRequest};
use crate::events::{Both, EventListener};
use crate::exchange::Deadlines;
use crate::policy::chain::{Chain, Request};
use crate::policy::redirect::Policy;
use crate::policy::upload::Upload;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE, EXPECT};
use std::sync::Arc;
use std::time::Duration;

/// A request being built. Finish with [`send`](Self::send).
///
/// Invalid input (a bad URI, header or body framing) does not panic: the
/// future returned by `send` resolves at once with
/// [`Error::InvalidRequest`].
///
/// ```
/// # let url = tickless_client::doc_support::serve(|method, target, body| {
/// #     let text = format!("{method} {target} {}", String::from_utf8_lossy(body));
/// #     tickless_client::doc_support::ok(&text)
/// # });
/// use std::time::Duration;
///
/// let client = tickless_client::Client::new();
/// let response = client
///     .post(format!("{url}/items"))
///     .query(&[("dry_run", "1")])
///     .header("content-type", "text/plain")
///     .body("a new item")
///     .request_timeout(Duration::from_secs(2)) // this request's own
///     .send()
///     .wait()?;
/// assert_eq!(response.text().wait()?, "POST /items?dry_run=1 a new item");
/// # Ok::<(), tickless_client::Error>(())
/// ```
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
    write_timeout: Option<Duration>,
    listener: Option<Arc<dyn EventListener>>,
    redirect: Option<Policy>,
    decompress: Option<bool>,
    retry: Option<crate::policy::retry::Policy>,
    hedge: Option<crate::policy::hedge::Policy>,
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
            write_timeout: None,
            listener: None,
            redirect: None,
            decompress: None,
            retry: None,
            hedge: None,
        }
    }

    /// Adds a header (repeat the name to send it several times). A name or
    /// value that is not valid HTTP makes the request fail with
    /// [`InvalidRequest::Header`] when sent, which names the header.
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: IntoHeaderName,
        V: TryInto<HeaderValue>,
        V::Error: Into<http::Error>,
    {
        let name = match name.into_header_name() {
            Ok(name) => name,
            Err(invalid) => {
                self.invalid = Some(invalid);
                return self;
            }
        };
        match value.try_into() {
            Ok(value) => {
                self.headers.append(name, value);
            }
            Err(e) => self.invalid = Some(invalid_value(&name, e.into())),
        }
        self
    }

    /// Adds all of `headers`, each name in place of the request's own
    /// fields of that name, with all its values (as `http`'s
    /// `HeaderMap::extend`, [`ClientBuilder::default_headers`](crate::ClientBuilder::default_headers)
    /// and reqwest's `headers` take them): a name set with
    /// [`header`](Self::header) and again here goes once, the map's. The
    /// names it does not give are kept.
    pub fn headers(mut self, headers: http::HeaderMap) -> Self {
        self.headers.extend(headers);
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
    /// The same as setting the header yourself. HTTP/1.1 only: over HTTP/2
    /// the header is not sent, and the body goes at once.
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

    /// This request's write timeout, instead of the client's. Zero: none
    /// for this request. See [`ClientBuilder::write_timeout`](crate::ClientBuilder::write_timeout).
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = Some(timeout);
        self
    }

    /// A listener for this request, told of its events besides the client's.
    pub fn listener(mut self, listener: Arc<dyn EventListener>) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Query parameters, appended to the URI's own: `query(&[("q",
    /// "rust"), ("page", "2")])`, or any `Serialize` struct or map, url-encoded.
    /// A value that cannot be url-encoded fails the request with
    /// [`InvalidRequest::Query`] when sent.
    pub fn query<T: serde::Serialize + ?Sized>(mut self, query: &T) -> Self {
        let encoded = match serde_urlencoded::to_string(query) {
            Ok(encoded) => encoded,
            Err(e) => {
                self.invalid = Some(InvalidRequest::Query(e));
                return self;
            }
        };
        if encoded.is_empty() {
            return self;
        }
        if let Ok(uri) = &self.uri {
            let mut parts = uri.clone().into_parts();
            let path = parts.path_and_query.as_ref().map_or("/", |pq| pq.path());
            let joined = match uri.query() {
                Some(own) if !own.is_empty() => format!("{path}?{own}&{encoded}"),
                _ => format!("{path}?{encoded}"),
            };
            // Names the URI the query would have made.
            let invalid = |source: http::Error| {
                let origin = match (uri.scheme_str(), uri.authority()) {
                    (Some(scheme), Some(authority)) => format!("{scheme}://{authority}"),
                    _ => String::new(),
                };
                InvalidRequest::Uri {
                    uri: shown_uri(&format!("{origin}{joined}")),
                    source,
                }
            };
            self.uri = joined
                .parse()
                .map_err(|e: http::uri::InvalidUri| invalid(e.into()))
                .and_then(|pq| {
                    parts.path_and_query = Some(pq);
                    http::Uri::from_parts(parts).map_err(|e| invalid(e.into()))
                });
        }
        self
    }

    /// A url-encoded form body, from any `Serialize` value, with
    /// `Content-Type: application/x-www-form-urlencoded` unless the request
    /// has a `Content-Type` of its own already (one that names the charset,
    /// say: `application/x-www-form-urlencoded; charset=UTF-8`), as `json`
    /// keeps one and as reqwest does. A value that cannot be url-encoded (a
    /// nested struct, say) fails the request with
    /// [`InvalidRequest::Query`] when sent.
    pub fn form<T: serde::Serialize + ?Sized>(mut self, form: &T) -> Self {
        match serde_urlencoded::to_string(form) {
            Ok(body) => {
                // The caller's says how the server is to read it.
                self.headers
                    .entry(CONTENT_TYPE)
                    .or_insert(HeaderValue::from_static(
                        "application/x-www-form-urlencoded",
                    ));
                self.body = Upload::from(body);
            }
            Err(e) => self.invalid = Some(InvalidRequest::Query(e)),
        }
        self
    }

    /// A JSON body, with `Content-Type: application/json` unless the
    /// request has a `Content-Type` of its own already (a more precise JSON
    /// type, as `application/merge-patch+json`), as reqwest does. A value
    /// that cannot be serialized (a map with keys that are not strings, a
    /// `Serialize` impl that fails) fails the request with
    /// [`InvalidRequest::Json`] when sent.
    #[cfg(feature = "json")]
    pub fn json<T: serde::Serialize + ?Sized>(mut self, json: &T) -> Self {
        match serde_json::to_vec(json) {
            Ok(body) => {
                // Several APIs take more than one JSON type and tell them
                // apart by this header: the caller's says which is sent.
                self.headers
                    .entry(CONTENT_TYPE)
                    .or_insert(HeaderValue::from_static("application/json"));
                self.body = Upload::from(body);
            }
            Err(e) => self.invalid = Some(InvalidRequest::Json(e)),
        }
        self
    }

    /// A `multipart/form-data` body (RFC 7578): `form`'s fields and files,
    /// with `Content-Type: multipart/form-data; boundary=…` naming its
    /// boundary — in place of any `Content-Type` the request had, which
    /// could not name it. See [`multipart::Form`](crate::multipart::Form).
    #[cfg(feature = "multipart")]
    pub fn multipart(mut self, form: crate::multipart::Form) -> Self {
        self.headers.insert(CONTENT_TYPE, form.content_type());
        self.body = form.into_upload();
        self
    }

    /// `Authorization: Basic` for `user` and `password` (RFC 7617). The
    /// header is marked sensitive, and not sent to another origin on a
    /// redirect. What RFC 7617 §2 makes invalid fails the request with
    /// [`InvalidRequest::BasicAuthUser`]: a `user` with a `:` in it (the
    /// server would take what follows it for the password), or a control
    /// character in either part; the password may hold a `:`.
    pub fn basic_auth(mut self, user: &str, password: Option<&str>) -> Self {
        let (user, password) = (user.as_bytes(), password.unwrap_or_default().as_bytes());
        match crate::basic_auth::header(user, password) {
            Some(header) => {
                self.headers.insert(AUTHORIZATION, header);
            }
            None => self.invalid = Some(InvalidRequest::BasicAuthUser),
        }
        self
    }

    /// `Authorization: Bearer <token>` (RFC 6750), marked sensitive. A
    /// token that is not a valid header value fails the request with
    /// [`InvalidRequest::Header`].
    pub fn bearer_auth(mut self, token: &str) -> Self {
        match HeaderValue::try_from(format!("Bearer {token}")) {
            Ok(mut value) => {
                value.set_sensitive(true);
                self.headers.insert(AUTHORIZATION, value);
            }
            Err(e) => self.invalid = Some(invalid_value(&AUTHORIZATION, e.into())),
        }
        self
    }

    /// This request's redirect policy, instead of the client's.
    pub fn redirect(mut self, policy: Policy) -> Self {
        self.redirect = Some(policy);
        self
    }

    /// Whether this response is decompressed (and `Accept-Encoding` sent),
    /// instead of the client's choice.
    pub fn decompress(mut self, decompress: bool) -> Self {
        self.decompress = Some(decompress);
        self
    }

    /// This request's retry policy, instead of the client's (see
    /// [`retry`](crate::retry)).
    pub fn retry(mut self, policy: crate::policy::retry::Policy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// This request's hedging policy, instead of the client's (see
    /// [`hedge`](crate::hedge)).
    pub fn hedge(mut self, policy: crate::policy::hedge::Policy) -> Self {
        self.hedge = Some(policy);
        self
    }

    /// Makes the request fail with `invalid` when sent, unless it fails
    /// with what was found wrong before.
    pub(super) fn invalid(mut self, invalid: InvalidRequest) -> Self {
        self.invalid.get_or_insert(invalid);
        self
    }

    /// Sends the request. The request deadline is fixed now, for every hop
    /// of a redirect chain.
    pub fn send(self) -> ResponseFuture {
        let client = self.client.clone();
        let request = match self.into_request() {
            Ok(request) => request,
            Err(error) => return ResponseFuture::failed(Error::InvalidRequest(error)),
        };
        match Chain::start(client.dispatcher(), client.policies(), request) {
            Ok(chain) => ResponseFuture::new(chain),
            Err(error) => ResponseFuture::failed(error),
        }
    }

    fn into_request(self) -> Result<Request, InvalidRequest> {
        if let Some(invalid) = self.invalid {
            return Err(invalid);
        }
        let config = self.client.dispatcher().config();
        let pick = |own: Option<Duration>, default: Option<Duration>| match own {
            Some(own) => (!own.is_zero()).then_some(own),
            None => default,
        };
        let listener = match self.listener {
            Some(own) => Arc::new(Both(config.listener.clone(), own)),
            None => config.listener.clone(),
        };
        Ok(Request {
            method: self.method,
            uri: self.uri?,
            headers: self.headers,
            body: self.body,
            deadlines: Deadlines {
                request_timeout: pick(self.request_timeout, config.request_timeout),
                read_timeout: pick(self.read_timeout, config.read_timeout),
                write_timeout: pick(self.write_timeout, config.write_timeout),
                on_event_loop: config.use_event_loop_timeouts,
            },
            listener,
            redirect: self.redirect,
            decompress: self.decompress,
            retry: self.retry,
            hedge: self.hedge,
        })
    }
}

impl std::fmt::Debug for RequestBuilder {
    /// What the request was given, its credentials hidden: the URI without
    /// its userinfo (as an error quotes it), and the values of its
    /// `Authorization`, `Proxy-Authorization` and `Cookie` headers, and of
    /// any marked sensitive, shown as `Sensitive`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("RequestBuilder");
        out.field("method", &self.method);
        match &self.uri {
            Ok(uri) => out.field("uri", &shown_uri(&uri.to_string())),
            Err(invalid) => out.field("uri", invalid),
        };
        out.field("headers", &super::ShownHeaders(&self.headers))
            .field("body", &self.body)
            .field("invalid", &self.invalid)
            .field("request_timeout", &self.request_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("redirect", &self.redirect)
            .field("decompress", &self.decompress)
            .field("retry", &self.retry)
            .field("hedge", &self.hedge)
            .finish_non_exhaustive()
    }
}

/// The error for a value that is not valid for the header `name`: named,
/// the value not shown (it may be a secret).
fn invalid_value(name: &HeaderName, source: http::Error) -> InvalidRequest {
    InvalidRequest::Header {
        name: name.as_str().to_owned(),
        source,
    }
}
