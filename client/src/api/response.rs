//! [`Response`]: what a successful exchange returns.

use crate::exchange::ResponseParts;
use std::net::SocketAddr;

/// A complete HTTP response.
///
/// The body is buffered, unless the request streamed it to a callback
/// ([`RequestBuilder::on_body_chunk`](crate::RequestBuilder::on_body_chunk)),
/// in which case it is empty here.
#[derive(Debug, Clone)]
pub struct Response {
    status: http::StatusCode,
    version: http::Version,
    headers: http::HeaderMap,
    body: Vec<u8>,
    trailers: Option<http::HeaderMap>,
    remote: SocketAddr,
}

impl From<ResponseParts> for Response {
    fn from(parts: ResponseParts) -> Self {
        Response {
            status: parts.status,
            version: parts.version,
            headers: parts.headers,
            body: parts.body,
            trailers: parts.trailers,
            remote: parts.remote,
        }
    }
}

impl Response {
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

    /// The body bytes.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body as text, with invalid UTF-8 replaced.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.body)
    }

    /// The trailers of a chunked body, if it had any.
    pub fn trailers(&self) -> Option<&http::HeaderMap> {
        self.trailers.as_ref()
    }

    /// The address of the server that answered.
    pub fn remote_addr(&self) -> SocketAddr {
        self.remote
    }

    /// Takes the body out.
    pub fn into_body(self) -> Vec<u8> {
        self.body
    }
}

impl From<Response> for http::Response<Vec<u8>> {
    fn from(response: Response) -> Self {
        let mut out = http::Response::new(response.body);
        *out.status_mut() = response.status;
        *out.version_mut() = response.version;
        *out.headers_mut() = response.headers;
        out
    }
}
