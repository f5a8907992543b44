//! [`Response`]: the head of a response, and its [`Body`] to come.

#[cfg(feature = "json")]
use super::body::CollectJson;
use super::body::{Body, Chunk, CollectBytes, CollectText};
use crate::exchange::Head;
use bytes::Bytes;
use std::net::SocketAddr;

/// A response: its status and headers, which have arrived, and its body,
/// which is read as it arrives (see [`Body`]).
///
/// ```
/// # let url = tickless_client::doc_support::serve_text("hello");
/// let client = tickless_client::Client::new();
/// let response = client.get(&url).send().wait()?;
/// assert_eq!(response.status(), 200);
/// assert_eq!(response.headers()["content-type"], "text/plain");
/// assert_eq!(response.url().to_string(), format!("{url}/"));
/// // The body, whole (or streamed: see `Body`).
/// assert_eq!(response.text().wait()?, "hello");
/// # Ok::<(), tickless_client::Error>(())
/// ```
#[derive(Debug)]
pub struct Response {
    status: http::StatusCode,
    version: http::Version,
    headers: http::HeaderMap,
    remote: SocketAddr,
    url: http::Uri,
    /// The exchange that answered (see [`Response::attempt_id`]).
    attempt_id: u64,
    extensions: http::Extensions,
    body: Body,
}

impl Response {
    /// The response of `head`, which the exchange `attempt_id` answered
    /// for the hop to `url`.
    pub(crate) fn new(head: Head, url: http::Uri, attempt_id: u64, body: Body) -> Response {
        let mut extensions = http::Extensions::new();
        if let Some(reason) = head.reason {
            extensions.insert(ReasonPhrase(reason));
        }
        Response {
            status: head.status,
            version: head.version,
            headers: head.headers,
            remote: head.remote,
            url,
            attempt_id,
            extensions,
            body,
        }
    }

    /// The attempt that answered: the
    /// [`RequestInfo::attempt_id`](crate::RequestInfo::attempt_id) the
    /// events of its exchange were told with. Of a hedged request, the copy
    /// (or the first attempt) whose head was taken first (the attempt
    /// waited for first, if both have come); of a retried one, the last
    /// attempt — so that a listener that gathers each attempt's events
    /// (its interim heads, say) can keep those of the answer alone.
    pub fn attempt_id(&self) -> u64 {
        self.attempt_id
    }

    /// The URL that answered: the last hop's, after redirects (without
    /// userinfo).
    pub fn url(&self) -> &http::Uri {
        &self.url
    }

    /// The response itself if its status is not a client or server error
    /// (4xx, 5xx); otherwise [`Error::Status`](crate::Error::Status), and
    /// the body is dropped. A code past 599 (600 to 999, no HTTP status:
    /// some servers' own, as LinkedIn's 999) is taken as a server error,
    /// as RFC 9110 §15 has a client do.
    pub fn error_for_status(self) -> Result<Response, crate::Error> {
        let invalid = self.status.as_u16() > 599;
        if self.status.is_client_error() || self.status.is_server_error() || invalid {
            return Err(crate::Error::Status {
                status: self.status,
                url: self.url,
            });
        }
        Ok(self)
    }

    /// The status code.
    pub fn status(&self) -> http::StatusCode {
        self.status
    }

    /// The HTTP version of the response.
    pub fn version(&self) -> http::Version {
        self.version
    }

    /// The response headers.
    pub fn headers(&self) -> &http::HeaderMap {
        &self.headers
    }

    /// The address of the server that answered.
    pub fn remote_addr(&self) -> SocketAddr {
        self.remote
    }

    /// What the client knows of the response besides its head: a
    /// [`ReasonPhrase`] when an HTTP/1.x server sent one other than the
    /// status's canonical one. Carried into the `http::Response` this
    /// converts to; yours to add to.
    pub fn extensions(&self) -> &http::Extensions {
        &self.extensions
    }

    /// The extensions, to change (see [`extensions`](Self::extensions)).
    pub fn extensions_mut(&mut self) -> &mut http::Extensions {
        &mut self.extensions
    }

    /// The body, to read from.
    pub fn body_mut(&mut self) -> &mut Body {
        &mut self.body
    }

    /// Takes the body out.
    pub fn into_body(self) -> Body {
        self.body
    }

    /// The next chunk of the body (see [`Body::chunk`]).
    pub fn chunk(&mut self) -> Chunk<'_> {
        self.body.chunk()
    }

    /// The whole body: `.wait()` blocks for it, `.await` awaits it.
    ///
    /// The body window no longer bounds it (it is all wanted in memory;
    /// [`ClientBuilder::max_body_bytes`](crate::ClientBuilder::max_body_bytes)
    /// does): the connection's loop gathers it in one buffer, a body of
    /// known length read straight into it, and hands it over once, at its
    /// end, without a copy to join chunks.
    pub fn bytes(self) -> CollectBytes {
        CollectBytes::new(self.body)
    }

    /// The whole body as text, decoded from the charset of its
    /// `Content-Type` (UTF-8 if it names none): `.wait()` or `.await`.
    pub fn text(self) -> CollectText {
        CollectText::new(self.body, self.headers.get(http::header::CONTENT_TYPE))
    }

    /// The whole body parsed as JSON into any `Deserialize` type:
    /// `.wait()` or `.await`. A body that is not that JSON is
    /// [`Error::Json`](crate::Error::Json).
    ///
    /// ```no_run
    /// # #[cfg(feature = "json")] {
    /// let client = tickless_client::Client::new();
    /// let ip: serde_json::Value = client.get("http://127.0.0.1:8080/ip").send().wait()?.json().wait()?;
    /// println!("{}", ip["origin"]);
    /// # }
    /// # Ok::<(), tickless_client::Error>(())
    /// ```
    #[cfg(feature = "json")]
    pub fn json<T: serde::de::DeserializeOwned>(self) -> CollectJson<T> {
        CollectJson::new(self.body)
    }

    /// The trailers of the body — a chunked one's over HTTP/1.1, those of a
    /// trailing HEADERS frame over HTTP/2 — once the body has been read to
    /// its end (and if it had any).
    pub fn trailers(&self) -> Option<&http::HeaderMap> {
        self.body.trailers()
    }
}

impl From<Response> for http::Response<Body> {
    fn from(response: Response) -> Self {
        let mut out = http::Response::new(response.body);
        *out.status_mut() = response.status;
        *out.version_mut() = response.version;
        *out.headers_mut() = response.headers;
        *out.extensions_mut() = response.extensions;
        out
    }
}

/// The reason phrase of an HTTP/1.x status line as the server sent it, in
/// a [`Response`]'s [extensions](Response::extensions) — only when it is
/// not the status's canonical one
/// ([`StatusCode::canonical_reason`](http::StatusCode::canonical_reason)),
/// byte for byte: absent, the reason was the canonical one (`200 OK`);
/// present, it is what came instead (`200 Fine Thanks`, an empty one, one
/// in another case, or any reason of a status with no canonical one).
/// HTTP/2 has no reason phrase: its responses never have one. Hyper keeps
/// it the same way.
///
/// ```
/// # let url = tickless_client::doc_support::serve_text("hello");
/// use tickless_client::ReasonPhrase;
///
/// let client = tickless_client::Client::new();
/// let response = client.get(&url).send().wait()?;
/// // What a status line printed as it came reads.
/// let reason = match response.extensions().get::<ReasonPhrase>() {
///     Some(sent) => sent.as_bytes(),
///     None => response.status().canonical_reason().unwrap_or("").as_bytes(),
/// };
/// assert_eq!(reason, b"OK");
/// # Ok::<(), tickless_client::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReasonPhrase(Bytes);

impl ReasonPhrase {
    /// The reason as it came: any bytes a status line may hold (visible
    /// ASCII, spaces and tabs, and obs-text, 0x80-0xFF, which is not
    /// UTF-8); maybe empty.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}
