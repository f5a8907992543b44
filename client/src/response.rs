//! [`Response`]: what a successful exchange returns.

use std::net::SocketAddr;

/// A complete HTTP response.
///
/// The body is buffered, unless the request streamed it to a callback
/// ([`RequestBuilder::on_body_chunk`](crate::RequestBuilder::on_body_chunk)),
/// in which case it is empty here.
#[derive(Debug, Clone)]
pub struct Response {
    pub(crate) status: http::StatusCode,
    pub(crate) version: http::Version,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Vec<u8>,
    pub(crate) trailers: Option<http::HeaderMap>,
    pub(crate) remote: SocketAddr,
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
