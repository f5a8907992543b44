//! One hop of a request: what goes out on one exchange — method, URI,
//! headers and body — encoded once, as the exchange to submit.

use super::upload::{FileBody, Upload, UploadKind};
use crate::dispatch::Dispatcher;
use crate::error::{Error, InvalidRequest};
use crate::events::{EventListener, RequestInfo};
use crate::exchange::{
    Deadlines, Exchange, ExchangeParts, Payload, Pipe, PumpedBody, RequestBody, RequestParts,
    Reread, Streamed, UploadSource,
};
use crate::h1;
use crate::net::{Origin, Scheme};
use bytes::Bytes;
use http::header::{
    HeaderName, HeaderValue, CONNECTION, COOKIE, EXPECT, PROXY_AUTHORIZATION, TRANSFER_ENCODING,
};
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The request as the next hop sends it.
pub(crate) struct Hop {
    pub(crate) method: http::Method,
    /// Without userinfo (that became an `Authorization` header).
    pub(crate) uri: http::Uri,
    /// Shared with the exchanges of the hop (HTTP/2 encodes them itself),
    /// and for a request with no headers of its own with the client's other
    /// such requests (`Policies::default_headers`): changed only with
    /// `Arc::make_mut`, which copies them while anyone else holds them.
    pub(crate) headers: Arc<http::HeaderMap>,
    /// The `Cookie` header the client's cookie store gives the hop's URL
    /// (none when the caller set one of their own): sent after `headers`,
    /// and kept out of them — put in, it would copy headers shared with
    /// the client's other requests for every request that has cookies.
    pub(crate) cookie: Option<HeaderValue>,
    pub(crate) body: HopBody,
}

/// A hop's body.
pub(crate) enum HopBody {
    /// In memory (empty for none): it may go again, on the next hop.
    Replayable(Bytes),
    /// A regular file's (or a form's of bytes and regular files), read
    /// again from where it began by each exchange: it may go again too.
    File(FileBody),
    /// Streamed: sent once, by the first hop (`None` once taken) — or put
    /// back, never sent, when a `417` or a redirect answered its `Expect:
    /// 100-continue` (`Attempts::take_back_unsent`): for the hop that
    /// answer leads to, if one goes.
    Streamed(Option<Upload>),
}

impl HopBody {
    pub(crate) fn from_upload(upload: Upload) -> HopBody {
        match upload.kind {
            UploadKind::Bytes(bytes) => HopBody::Replayable(bytes),
            UploadKind::File(file) => HopBody::File(file),
            kind => HopBody::Streamed(Some(Upload { kind })),
        }
    }

    /// Whether the body can go on another hop as it is.
    pub(crate) fn replayable(&self) -> bool {
        matches!(self, HopBody::Replayable(_) | HopBody::File(_))
    }

    /// Whether the body can go whole on the next hop: it can go again, or
    /// it is a stream put back never sent (once).
    pub(crate) fn sendable(&self) -> bool {
        self.replayable() || matches!(self, HopBody::Streamed(Some(_)))
    }

    /// Lets a stream put back never sent go (a reader's pump, its source):
    /// no hop took it.
    pub(crate) fn let_go_unsent(&mut self) {
        if let HopBody::Streamed(upload) = self {
            *upload = None;
        }
    }

    /// The body for one hop: a copy of the bytes (a reference count), the
    /// file (to be read from its start), or the stream, taken.
    fn take(&mut self) -> Upload {
        match self {
            HopBody::Replayable(bytes) => Upload::from(bytes.clone()),
            HopBody::File(file) => Upload {
                kind: UploadKind::File(file.clone()),
            },
            HopBody::Streamed(upload) => upload.take().unwrap_or_else(Upload::empty),
        }
    }
}

/// What every hop of one request shares.
pub(crate) struct HopSettings {
    pub(crate) deadlines: Deadlines,
    pub(crate) listener: Arc<dyn EventListener>,
    /// When the request was sent: its request deadline runs from here, for
    /// every hop.
    pub(crate) submitted: Instant,
    /// The request's id, for its listener ([`RequestInfo::id`]).
    pub(crate) request_id: u64,
    /// Whether its responses are decoded (the request's say over the
    /// client's).
    pub(crate) decompress: bool,
}

/// Encodes `hop` as a new exchange, for `dispatcher` to submit.
pub(crate) fn exchange_for(
    dispatcher: &Arc<Dispatcher>,
    hop: &mut Hop,
    settings: &HopSettings,
) -> Result<Arc<Exchange>, Error> {
    let origin = Origin::of(&hop.uri)?;
    #[cfg(feature = "rustls")]
    if origin.scheme == Scheme::Https
        && rustls::pki_types::ServerName::try_from(&*origin.host).is_err()
    {
        return Err(InvalidRequest::ServerName(origin.host.to_string()).into());
    }
    #[cfg(not(feature = "rustls"))]
    if origin.scheme == Scheme::Https {
        return Err(InvalidRequest::TlsDisabled(hop.uri.to_string()).into());
    }
    // Each hop has its route: a redirect may leave the proxy's reach
    // (`no_proxy`) or change scheme (forwarded, then tunnelled).
    let route = dispatcher.route_for(&origin)?;
    let config = dispatcher.config();
    // Checked first so that headers an earlier hop's exchange still holds
    // are not copied for nothing.
    let mut asked = Asked::of(&hop.headers);
    if !config.keep_alive && !asked.close {
        add_connection_close(Arc::make_mut(&mut hop.headers));
        // Listed now, by the header it added or extended.
        asked.close = true;
    }
    let keep_alive = !asked.close;
    let expect_continue = asked.expect_continue;
    let window = config.body_window;
    let meter = dispatcher.body_meter().clone();
    // To a proxy that forwards it: the absolute URI, and the proxy's
    // credentials (unless the caller set their own) on this hop alone — a
    // tunnel sends them with its CONNECT instead, never to an origin.
    // Through a tunnel no proxy reads the request: the caller's own
    // `Proxy-Authorization`, a proxy's credential, goes nowhere (kept for
    // the next hop, which may go through a proxy that forwards it).
    let mut headers = hop.headers.clone();
    let (form, proxy_headers) = match route.proxy() {
        Some(proxy) if route.forwards() => {
            let mut headers = http::HeaderMap::clone(&headers);
            if let Some(auth) = proxy.authorization() {
                headers.entry(PROXY_AUTHORIZATION).or_insert(auth);
            }
            (h1::RequestTarget::Absolute, Some(headers))
        }
        Some(_) if headers.contains_key(PROXY_AUTHORIZATION) => {
            Arc::make_mut(&mut headers).remove(PROXY_AUTHORIZATION);
            (h1::RequestTarget::Origin, None)
        }
        _ => (h1::RequestTarget::Origin, None),
    };
    // Every connection this request can go on speaks HTTP/2 (prior
    // knowledge in cleartext, or HTTP/2 only over TLS, not to a proxy that
    // forwards): it needs no HTTP/1.1 head, only its checks.
    let https = origin.scheme == Scheme::Https;
    let h2_only = cfg!(feature = "http2") && config.versions.h2_known(https) && !route.forwards();
    let upload = hop.body.take();
    // Kept unframed for HTTP/2, which frames it itself.
    let data = match &upload.kind {
        UploadKind::Bytes(bytes) => bytes.clone(),
        _ => Bytes::new(),
    };
    let (head, body, held, pump) = encode(
        &hop.method,
        &hop.uri,
        proxy_headers.as_ref().unwrap_or(&headers),
        hop.cookie.as_ref(),
        form,
        upload,
        &asked,
        h2_only,
        || Arc::new(Pipe::new(window, meter)),
    )?;
    // A closed client refuses the exchange as it is submitted (it stays
    // closed): its reader is let go unread, not handed to a pump that
    // would read some of the caller's bytes for nothing.
    if let Some((reader, pipe)) = pump.filter(|_| !dispatcher.is_closed()) {
        let length = match &body {
            RequestBody::Streamed(streamed) => streamed.length,
            _ => None,
        };
        dispatcher
            .spawn_pump(reader, length, pipe)
            .map_err(|source| Error::RequestBody {
                source: source.into(),
            })?;
    }
    let id = Exchange::next_id();
    let exchange = Exchange::new(ExchangeParts {
        id,
        origin,
        route,
        request: RequestParts {
            method: hop.method.clone(),
            headers,
            cookie: hop.cookie.clone(),
            payload: Mutex::new(Payload {
                data,
                head,
                held,
                released: false,
            }),
            body,
            keep_alive,
            expect_continue,
        },
        listener: settings.listener.clone(),
        info: RequestInfo::new(settings.request_id, id, hop.method.clone(), hop.uri.clone()),
        deadlines: settings.deadlines,
        decompress: settings.decompress,
        submitted: settings.submitted,
        body_window: window,
        body_meter: dispatcher.body_meter().clone(),
        pacing: dispatcher.pacing().clone(),
        clock: dispatcher.clock().clone(),
        wheel: dispatcher.wheel().clone(),
        registry: dispatcher.in_flight().clone(),
    });
    Ok(exchange)
}

/// Whether the request asks for `100 Continue` before its body.
pub(crate) fn expects_continue(headers: &http::HeaderMap) -> bool {
    headers.get_all(EXPECT).iter().any(asks_100_continue)
}

/// Whether an `Expect` value is `100-continue`.
fn asks_100_continue(value: &HeaderValue) -> bool {
    value
        .as_bytes()
        .trim_ascii()
        .eq_ignore_ascii_case(b"100-continue")
}

/// Whether a `Transfer-Encoding` value is `chunked`.
fn names_chunked(value: &HeaderValue) -> bool {
    value
        .to_str()
        .is_ok_and(|v| v.trim().eq_ignore_ascii_case("chunked"))
}

/// What a hop's headers ask of its exchange, read in one pass over them:
/// a request has few fields, and one lookup by name each (`Connection`,
/// `Expect`, `Transfer-Encoding`) cost more — some 300 instructions a
/// request against a pass over the client's default fields.
#[derive(Debug, Default, PartialEq, Eq)]
struct Asked {
    /// A `Connection` field lists `close` (what
    /// [`has_connection_token`](h1::has_connection_token) says).
    close: bool,
    /// An `Expect` field is `100-continue` ([`expects_continue`]).
    expect_continue: bool,
    /// A `Transfer-Encoding` field is `chunked`: the caller chose chunked
    /// framing.
    chunked: bool,
}

impl Asked {
    fn of(headers: &http::HeaderMap) -> Asked {
        let mut asked = Asked::default();
        for (name, value) in headers {
            if name == CONNECTION {
                asked.close |= h1::lists_token(value, b"close");
            } else if name == EXPECT {
                asked.expect_continue |= asks_100_continue(value);
            } else if name == TRANSFER_ENCODING {
                asked.chunked |= names_chunked(value);
            }
        }
        asked
    }
}

/// Adds the `close` token to the request's `Connection` header (or adds
/// the header): `keep_alive(false)` holds even for a request that names
/// other connection options (`Connection: te`, for `TE: trailers`).
///
/// The caller has found no `close` token there already ([`Asked::close`],
/// what [`has_connection_token`](h1::has_connection_token) says): a
/// request that lists it is sent as it is.
fn add_connection_close(headers: &mut http::HeaderMap) {
    debug_assert!(!h1::has_connection_token(headers, b"close"));
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
/// it waits for `100 Continue` or is larger than [`IN_HEAD_MAX`]), the
/// body to follow, and a `Read` to pump.
type Encoded = (
    Vec<u8>,
    RequestBody,
    Bytes,
    Option<(Box<dyn Read + Send>, Arc<Pipe>)>,
);

/// Encodes the head once, at submission, with the framing the body calls
/// for: `Content-Length` when its length is known (unless the caller asked
/// for chunked), chunked otherwise. For a request that can only go over
/// HTTP/2 (`h2_only`) the head is checked the same way but left empty, and
/// a body in memory is not framed: HTTP/2 sends its own.
#[allow(clippy::too_many_arguments)]
fn encode(
    method: &http::Method,
    uri: &http::Uri,
    headers: &http::HeaderMap,
    cookie: Option<&HeaderValue>,
    form: h1::RequestTarget,
    body: Upload,
    asked: &Asked,
    h2_only: bool,
    pipe: impl FnOnce() -> Arc<Pipe>,
) -> Result<Encoded, InvalidRequest> {
    let Asked {
        expect_continue,
        chunked,
        ..
    } = *asked;
    let length = body.length().filter(|_| !chunked);
    let framing = match length {
        None => h1::RequestBody::Chunked,
        Some(0) if matches!(body.kind, UploadKind::Bytes(_)) => h1::RequestBody::Empty,
        Some(n) => h1::RequestBody::Length(n),
    };
    // The store's `Cookie`, kept out of the hop's headers (see
    // [`Hop::cookie`]), goes after them, written by the encoder from the
    // stack: a `Cookie` is neither `Host` nor a framing field, so nothing
    // of the head's checks depends on it.
    let cookie_field = cookie.map(|cookie| (&COOKIE, cookie));
    let extra: &[(&HeaderName, &HeaderValue)] = cookie_field.as_slice();
    let mut head = if h2_only {
        h1::check_request_head(method, uri, headers, framing).map_err(InvalidRequest::Encode)?;
        Vec::new()
    } else {
        // `name: value` and CRLF per extra field. Allocated at once, not
        // reserved: a first `reserve` goes through `Vec`'s growth path,
        // about 75 instructions more a request.
        let extra_len: usize = extra
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + 4)
            .sum();
        let mut head = Vec::with_capacity(256 + extra_len);
        h1::encode_request_head_with(method, uri, headers, extra, framing, form, &mut head)
            .map_err(InvalidRequest::Encode)?;
        head
    };
    let streamed = |source, reread| {
        RequestBody::Streamed(Streamed {
            length,
            source: Mutex::new(Some(source)),
            reread,
        })
    };
    let held = Bytes::new();
    // A reader's body, and its pump.
    let pumped = |reader: Box<dyn Read + Send>, reread| {
        let pipe = pipe();
        let body = streamed(UploadSource::Pumped(PumpedBody::new(pipe.clone())), reread);
        (body, Some((reader, pipe)))
    };
    Ok(match body.kind {
        // HTTP/2 sends the exchange's unframed copy.
        UploadKind::Bytes(_) if h2_only => (head, RequestBody::InHead, held, None),
        UploadKind::Bytes(bytes) => {
            let framed = frame(bytes, chunked);
            // Waiting for `100 Continue`, or too large to be worth a copy,
            // the body goes after the head from its own bytes.
            if (expect_continue || framed.len() > IN_HEAD_MAX) && !framed.is_empty() {
                (head, RequestBody::Held, framed, None)
            } else {
                head.extend_from_slice(&framed);
                (head, RequestBody::InHead, held, None)
            }
        }
        UploadKind::Reader { reader, .. } => {
            let (body, pump) = pumped(reader.into_inner(), None);
            (head, body, held, pump)
        }
        // Read from its start by this exchange's own reader — and by a new
        // one if the exchange sends it again on a fresh connection.
        UploadKind::File(file) => {
            let reader = Box::new(file.reader());
            let reread: Reread = Box::new(move || Box::new(file.reader()));
            let (body, pump) = pumped(reader, Some(reread));
            (head, body, held, pump)
        }
        UploadKind::Stream { body, .. } => {
            let body = streamed(UploadSource::Stream(body), None);
            (head, body, held, None)
        }
        // Set up by the exchange that never sent it: its pump, if any,
        // runs already.
        UploadKind::Unsent { source, .. } => (head, streamed(source, None), held, None),
    })
}

/// The largest body in memory copied into the head, framed: up to it the
/// head and body go in one write (a small POST costs one `write` and one
/// segment, not two); past it the body is sent after the head from its own
/// bytes (as a body held for `100 Continue` is), never copied — a copy
/// would double the body's memory at its peak and pass over all of it. At
/// 64 KiB the copy is still small beside the second `write` it saves; a
/// head and body past `WRITE_BUDGET` (256 KiB) take several writes anyway;
/// and the head's buffer stays under glibc's first `mmap` threshold (128
/// KiB), past which an allocation is a fresh mapping, its pages faulted in
/// one by one.
const IN_HEAD_MAX: usize = 64 * 1024;

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
    #[cfg(not(feature = "rustls"))]
    fn without_tls_an_https_request_is_refused_as_invalid() {
        let client = crate::Client::builder().event_loops(1).build().unwrap();
        let error = client.get("https://localhost/").send().wait().unwrap_err();
        assert!(
            matches!(error, Error::InvalidRequest(InvalidRequest::TlsDisabled(_))),
            "{error:?}"
        );
        client.close();
    }

    /// One pass over the fields says what a lookup of each by name says:
    /// any of several values, in any case, amid other fields and tokens.
    #[test]
    fn what_a_hops_headers_ask_is_what_their_lookups_say() {
        let by_lookup = |headers: &http::HeaderMap| Asked {
            close: h1::has_connection_token(headers, b"close"),
            expect_continue: expects_continue(headers),
            chunked: headers
                .get_all(TRANSFER_ENCODING)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .any(|v| v.trim().eq_ignore_ascii_case("chunked")),
        };
        let fields: &[&[(&str, &[u8])]] = &[
            &[],
            &[("accept", b"*/*"), ("user-agent", b"t")],
            &[("connection", b"close")],
            &[("connection", b"keep-alive"), ("connection", b"te, Close ")],
            &[("connection", b"te"), ("connection", b"keep-alive")],
            &[("connection", b"close"), ("connection", b"te")],
            &[("connection", b"closed, close-ish")],
            &[("expect", b" 100-Continue\t")],
            &[("expect", b"200-ok"), ("expect", b"100-continue")],
            &[("expect", b"100-continue, x")],
            &[
                ("transfer-encoding", b"gzip"),
                ("transfer-encoding", b" CHUNKED"),
            ],
            &[("transfer-encoding", b"gzip, chunked")],
            &[("transfer-encoding", b"chunked\xff")],
            &[
                ("transfer-encoding", b"chunked"),
                ("accept", b"*/*"),
                ("expect", b"100-continue"),
                ("connection", b"upgrade"),
                ("connection", b"close"),
                ("upgrade", b"x"),
            ],
        ];
        let mut asked_any = Asked::default();
        for fields in fields {
            let mut headers = http::HeaderMap::new();
            for &(name, value) in *fields {
                headers.append(
                    HeaderName::from_static(name),
                    HeaderValue::from_bytes(value).unwrap(),
                );
            }
            let asked = Asked::of(&headers);
            assert_eq!(asked, by_lookup(&headers), "{headers:?}");
            asked_any.close |= asked.close;
            asked_any.expect_continue |= asked.expect_continue;
            asked_any.chunked |= asked.chunked;
        }
        let all = Asked {
            close: true,
            expect_continue: true,
            chunked: true,
        };
        assert_eq!(asked_any, all, "each is asked somewhere");
    }

    #[test]
    fn a_request_that_can_only_go_over_http2_is_checked_as_for_http1_but_not_encoded() {
        let uri: http::Uri = "http://a.test/x".parse().unwrap();
        let pipe = || Arc::new(Pipe::new(1024, Arc::default()));
        let encoded = |headers: &http::HeaderMap, h2_only| {
            let body = Upload::from("hello");
            let (method, form) = (http::Method::POST, h1::RequestTarget::Origin);
            let asked = Asked::of(headers);
            encode(
                &method, &uri, headers, None, form, body, &asked, h2_only, pipe,
            )
        };
        let none = http::HeaderMap::new();
        let (head, body, held, pump) = encoded(&none, true).unwrap();
        assert!(head.is_empty() && held.is_empty());
        assert!(matches!(body, RequestBody::InHead) && pump.is_none());
        let (head, _, _, _) = encoded(&none, false).unwrap();
        assert!(head.ends_with(b"Content-Length: 5\r\n\r\nhello"));
        // The same refusal either way.
        let mut conflicting = http::HeaderMap::new();
        conflicting.insert(http::header::CONTENT_LENGTH, HeaderValue::from_static("4"));
        for h2_only in [true, false] {
            assert!(matches!(
                encoded(&conflicting, h2_only),
                Err(InvalidRequest::Encode(
                    h1::EncodeError::ConflictingContentLength
                ))
            ));
        }
    }

    /// The store's `Cookie`, kept out of the hop's headers, is written by
    /// the encoder after them, with its framing header after it: before
    /// the empty line, and before a body in the head.
    #[test]
    fn the_stores_cookie_goes_after_the_hops_headers() {
        let uri: http::Uri = "http://a.test/x".parse().unwrap();
        let pipe = || Arc::new(Pipe::new(1024, Arc::default()));
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::ACCEPT, HeaderValue::from_static("*/*"));
        let cookie = HeaderValue::from_static("a=1; b=2");
        let (method, form) = (http::Method::POST, h1::RequestTarget::Origin);
        let body = Upload::from("hello");
        let (head, _, _, _) = encode(
            &method,
            &uri,
            &headers,
            Some(&cookie),
            form,
            body,
            &Asked::of(&headers),
            false,
            pipe,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "POST /x HTTP/1.1\r\nHost: a.test\r\naccept: */*\r\ncookie: a=1; b=2\r\n\
             Content-Length: 5\r\n\r\nhello"
        );
    }

    #[test]
    fn a_body_in_memory_up_to_the_limit_goes_in_the_head_and_a_larger_one_is_not_copied() {
        let uri: http::Uri = "http://a.test/x".parse().unwrap();
        let pipe = || Arc::new(Pipe::new(1024, Arc::default()));
        let encoded = |headers: &http::HeaderMap, body: Bytes| {
            let (method, form) = (http::Method::POST, h1::RequestTarget::Origin);
            let body = Upload::from(body);
            let asked = Asked::of(headers);
            encode(
                &method, &uri, headers, None, form, body, &asked, false, pipe,
            )
            .unwrap()
        };
        let none = http::HeaderMap::new();
        let mut chunked = http::HeaderMap::new();
        chunked.insert(TRANSFER_ENCODING, HeaderValue::from_static("chunked"));

        // Up to the limit: one buffer, one write.
        let small = Bytes::from(vec![b's'; IN_HEAD_MAX]);
        let (head, body, held, _) = encoded(&none, small.clone());
        assert!(matches!(body, RequestBody::InHead) && held.is_empty());
        assert!(head.ends_with(&small));

        // Past it: the head alone, and the caller's own bytes after it.
        let large = Bytes::from(vec![b'l'; IN_HEAD_MAX + 1]);
        let (head, body, held, _) = encoded(&none, large.clone());
        assert!(matches!(body, RequestBody::Held));
        assert!(head.ends_with(b"\r\n\r\n") && head.len() < 256);
        assert_eq!(held.as_ptr(), large.as_ptr(), "the body was copied");
        assert_eq!(held.len(), large.len());

        // Chunked, framed once, after the head.
        let (head, body, held, _) = encoded(&chunked, large.clone());
        assert!(matches!(body, RequestBody::Held));
        assert!(head.ends_with(b"\r\n\r\n") && head.len() < 256);
        let size_line = format!("{:x}\r\n", large.len());
        assert!(held.starts_with(size_line.as_bytes()));
        assert!(held.ends_with(b"\r\n0\r\n\r\n"));
        assert_eq!(held.len(), size_line.len() + large.len() + 7);
    }

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
        // Said already, the request is left as it is: by the caller (see
        // `tests/client_pool.rs`, keep_alive_off_leaves_the_close_a_request_has).
    }
}
