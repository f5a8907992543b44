//! HTTP `CONNECT` tunnels through an HTTP proxy (RFC 9110 §9.3.6), sans-IO.
//!
//! # Steps
//!
//! 1. [`connect_request`] makes the request head:
//!
//!    ```text
//!    CONNECT host:port HTTP/1.1\r\n
//!    Host: host:port\r\n
//!    [User-Agent: <the request's>\r\n]
//!    [Proxy-Authorization: <value>\r\n]
//!    \r\n
//!    ```
//!
//!    The request target is always authority-form with an explicit port; an
//!    IPv6 host is bracketed (`[2001:db8::1]:443`). The host is validated
//!    (IPv6 literal, or RFC 3986 reg-name/IPv4 characters only), so nothing a
//!    caller passes can inject a header line.
//! 2. The caller writes the buffer to the proxy, then feeds everything it
//!    reads to [`ConnectResponse::parse`] until it returns `Some`:
//!    * `Ok(None)`: the head is incomplete — read more and call again with
//!      the whole buffer (nothing is consumed);
//!    * `Ok(Some((n, ConnectOutcome::Established { .. })))`: a 2xx final
//!      response. The first `n` bytes were the response head(s); everything
//!      after them is already tunnel data and must be kept;
//!    * `Err(ConnectError::ProxyAuthRequired { .. })` for 407, with every
//!      `Proxy-Authenticate` challenge; `Err(ConnectError::Rejected { .. })`
//!      for any other final status, with its reason phrase;
//!    * `Err(..)` for a malformed head or one over the size limit.
//!
//! # Invariants and choices
//!
//! * A 2xx response to CONNECT has no content (RFC 9110 §9.3.6): framing
//!   headers (`Content-Length`, `Transfer-Encoding`) on it are ignored and
//!   the tunnel starts right after the blank line.
//! * Interim 1xx responses (other than 101) before the final response are
//!   skipped, as RFC 9110 §15.2 requires clients to tolerate; their bytes
//!   count against the head limit and are included in the consumed count.
//!   101 is not a valid answer to CONNECT and is reported as `Rejected`.
//! * The head limit ([`MAX_HEAD_LEN`], 16 KiB, covering all heads up to and
//!   including the final blank line) bounds memory and the work of
//!   re-parsing a growing buffer; at most [`MAX_HEADERS`] header fields are
//!   accepted per head.
//! * After an error the response body (if any) is not read: the connection
//!   is not reusable and should be closed.
//! * Never panics, never blocks.

use crate::error::{ProxyError, WithCauses};
use std::fmt::Write as _;
use std::net::Ipv6Addr;

use http::header::HeaderValue;
use http::StatusCode;

/// The default limit on the response head(s), in bytes.
pub(crate) const MAX_HEAD_LEN: usize = 16 * 1024;

/// The most header fields accepted in one response head.
pub(crate) const MAX_HEADERS: usize = 64;

/// Everything that can go wrong establishing a CONNECT tunnel.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The proxy wants (other) credentials: status 407.
    #[error("proxy authentication required (HTTP {status})")]
    ProxyAuthRequired {
        /// Always 407.
        status: StatusCode,
        /// The `Proxy-Authenticate` challenges, in order (possibly none).
        proxy_authenticate: Vec<HeaderValue>,
    },
    /// The proxy refused the tunnel with a non-2xx, non-407 final status.
    #[error("proxy refused CONNECT: HTTP {} {reason}", status.as_u16())]
    Rejected {
        /// The response status.
        status: StatusCode,
        /// The reason phrase as sent (may be empty), as text: bytes that
        /// are not UTF-8 read as Latin-1, one character each.
        reason: String,
    },
    /// The response head(s) exceed the size limit.
    #[error("proxy response head exceeds {limit} bytes")]
    HeadTooLarge {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// The response head has more than [`MAX_HEADERS`] fields.
    #[error("proxy response has more than {MAX_HEADERS} header fields")]
    TooManyHeaders,
    /// The response is not a valid HTTP/1.x response head (what the
    /// parser said: the source).
    #[error("malformed proxy response")]
    Malformed(#[source] httparse::Error),
    /// The status code is outside 100..=999.
    #[error("malformed proxy response: invalid status code {0}")]
    InvalidStatus(u16),
}

impl ConnectError {
    /// The error a request gets when its `CONNECT` to `target` failed
    /// this way.
    pub(crate) fn into_proxy_error(self, target: String) -> ProxyError {
        match self {
            ConnectError::ProxyAuthRequired {
                proxy_authenticate, ..
            } => ProxyError::AuthenticationRequired {
                target,
                challenges: proxy_authenticate
                    .iter()
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                    .collect(),
            },
            ConnectError::Rejected { status, reason } => ProxyError::ConnectRefused {
                target,
                status,
                reason,
            },
            // `MalformedAnswer` says "malformed" itself: the text is what
            // is wrong, the parser's reason alone, not this error's
            // "malformed proxy response" before it too.
            ConnectError::Malformed(parser) => ProxyError::MalformedAnswer(parser.to_string()),
            ConnectError::InvalidStatus(code) => {
                ProxyError::MalformedAnswer(format!("invalid status code {code}"))
            }
            // With its cause: the answer is text, a chain no more.
            other => ProxyError::MalformedAnswer(WithCauses(&other).to_string()),
        }
    }
}

/// The host of a tunnel's target is not a valid `CONNECT` authority (see
/// [`connect_request`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct InvalidConnectHost;

/// The `CONNECT host:port HTTP/1.1` request head of a tunnel, with the
/// `User-Agent` of the request it opens for and the proxy's credentials as
/// `Proxy-Authorization`:
///
/// * `host` is a URI host: a name, an IPv4 literal, or an IPv6 literal with
///   or without brackets, validated so that nothing can end the line early
///   (its only failure);
/// * `proxy_auth` is `ProxyUrl::basic_auth`'s, `Basic` and base64 in a
///   `HeaderValue` built checked, which holds no CR or LF — so it is not
///   checked again;
/// * `user_agent` is a request's header value, which `http` built checked
///   too. curl and reqwest send theirs with a CONNECT: a proxy may refuse
///   a tunnel to a client that does not say what it is.
pub(crate) fn connect_request(
    host: &str,
    port: u16,
    proxy_auth: Option<&HeaderValue>,
    user_agent: Option<&HeaderValue>,
) -> Result<Vec<u8>, InvalidConnectHost> {
    let authority = connect_authority(host, port)?;
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"CONNECT ");
    out.extend_from_slice(authority.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(authority.as_bytes());
    out.extend_from_slice(b"\r\n");
    if let Some(value) = user_agent {
        out.extend_from_slice(b"User-Agent: ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if let Some(value) = proxy_auth {
        out.extend_from_slice(b"Proxy-Authorization: ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Ok(out)
}

/// `host:port`, bracketing IPv6, after validating the host.
fn connect_authority(host: &str, port: u16) -> Result<String, InvalidConnectHost> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let mut authority = String::with_capacity(bare.len() + 8);
    if bare.contains(':') {
        let ip: Ipv6Addr = bare.parse().map_err(|_| InvalidConnectHost)?;
        let _ = write!(authority, "[{ip}]:{port}");
    } else {
        let valid = !bare.is_empty()
            && bare.len() == host.len()
            && bare.bytes().all(|b| {
                b.is_ascii_alphanumeric()
                    || matches!(
                        b,
                        b'-' | b'.'
                            | b'_'
                            | b'~'
                            | b'%'
                            | b'!'
                            | b'$'
                            | b'&'
                            | b'\''
                            | b'('
                            | b')'
                            | b'*'
                            | b'+'
                            | b','
                            | b';'
                            | b'='
                    )
            });
        if !valid {
            return Err(InvalidConnectHost);
        }
        let _ = write!(authority, "{bare}:{port}");
    }
    Ok(authority)
}

/// The result of a successful CONNECT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ConnectOutcome {
    /// A 2xx final response: the tunnel is open.
    Established {
        /// The 2xx status the proxy sent (normally 200).
        status: StatusCode,
    },
}

/// Reader for the proxy's answer to a CONNECT request.
///
/// Stateless: call [`parse`](Self::parse) with the whole receive buffer
/// each time more bytes arrive.
#[derive(Debug)]
pub(crate) struct ConnectResponse {
    _private: (),
}

impl ConnectResponse {
    /// Parses the response head(s) at the start of `input` with the default
    /// [`MAX_HEAD_LEN`] limit. See the [module docs](self) for the results.
    pub(crate) fn parse(input: &[u8]) -> Result<Option<(usize, ConnectOutcome)>, ConnectError> {
        Self::parse_with_limit(input, MAX_HEAD_LEN)
    }

    /// Like [`parse`](Self::parse), with a custom limit on the total length
    /// of the response head(s).
    pub(crate) fn parse_with_limit(
        input: &[u8],
        max_head_len: usize,
    ) -> Result<Option<(usize, ConnectOutcome)>, ConnectError> {
        let window = &input[..input.len().min(max_head_len)];
        let mut offset = 0;
        loop {
            let rest = window.get(offset..).unwrap_or(&[]);
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut headers);
            let head_len = match response.parse(rest) {
                Ok(httparse::Status::Complete(n)) => n,
                Ok(httparse::Status::Partial) => {
                    return if input.len() >= max_head_len {
                        Err(ConnectError::HeadTooLarge {
                            limit: max_head_len,
                        })
                    } else {
                        Ok(None)
                    };
                }
                Err(httparse::Error::TooManyHeaders) => return Err(ConnectError::TooManyHeaders),
                Err(e) => return Err(ConnectError::Malformed(e)),
            };
            offset += head_len;
            // Complete responses always carry a code.
            let code = response.code.unwrap_or(0);
            let status =
                StatusCode::from_u16(code).map_err(|_| ConnectError::InvalidStatus(code))?;
            if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
                continue;
            }
            if status.is_success() {
                return Ok(Some((offset, ConnectOutcome::Established { status })));
            }
            if status == StatusCode::PROXY_AUTHENTICATION_REQUIRED {
                let proxy_authenticate = response
                    .headers
                    .iter()
                    .filter(|h| h.name.eq_ignore_ascii_case("proxy-authenticate"))
                    .filter_map(|h| HeaderValue::from_bytes(h.value).ok())
                    .collect();
                return Err(ConnectError::ProxyAuthRequired {
                    status,
                    proxy_authenticate,
                });
            }
            // httparse gives a reason with obs-text as "": the bytes are
            // taken from the status line itself, as for any response.
            return Err(ConnectError::Rejected {
                status,
                reason: reason_text(tickless_h1::reason_phrase(rest)),
            });
        }
    }
}

/// A reason phrase's bytes as text: as UTF-8 if they are that, else each
/// byte as the character of its Latin-1 code (obs-text, 0x80-0xFF, is what
/// HTTP/1.1 once read as ISO-8859-1) — so a reason that was sent is never
/// shown empty, and no byte of it is lost.
fn reason_text(reason: &[u8]) -> String {
    match std::str::from_utf8(reason) {
        Ok(text) => text.to_owned(),
        Err(_) => reason.iter().copied().map(char::from).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode(host: &str, port: u16, auth: Option<&HeaderValue>) -> String {
        String::from_utf8(connect_request(host, port, auth, None).unwrap()).unwrap()
    }

    #[test]
    fn encodes_minimal_request() {
        assert_eq!(
            encode("example.com", 443, None),
            "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"
        );
    }

    #[test]
    fn encodes_the_user_agent_and_the_credentials() {
        let agent = HeaderValue::from_static("tickless/1");
        let auth = HeaderValue::from_static("Basic dTpw");
        let request = connect_request("a.example", 443, Some(&auth), Some(&agent)).unwrap();
        assert_eq!(
            String::from_utf8(request).unwrap(),
            "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\
             User-Agent: tickless/1\r\nProxy-Authorization: Basic dTpw\r\n\r\n"
        );
    }

    #[test]
    fn encodes_ipv6_in_brackets() {
        let expected = "CONNECT [2001:db8::1]:8443 HTTP/1.1\r\nHost: [2001:db8::1]:8443\r\n\r\n";
        assert_eq!(encode("2001:db8::1", 8443, None), expected);
        assert_eq!(encode("[2001:db8::1]", 8443, None), expected);
        assert_eq!(
            encode("10.0.0.1", 80, None),
            "CONNECT 10.0.0.1:80 HTTP/1.1\r\nHost: 10.0.0.1:80\r\n\r\n"
        );
    }

    #[test]
    fn encodes_auth() {
        let auth = HeaderValue::from_static("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        assert_eq!(
            encode("example.com", 443, Some(&auth)),
            "CONNECT example.com:443 HTTP/1.1\r\n\
             Host: example.com:443\r\n\
             Proxy-Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n\
             \r\n"
        );
    }

    #[test]
    fn rejects_hosts_that_could_inject() {
        for host in [
            "",
            "[]",
            "exa mple.com",
            "example.com\r\nX-Evil: 1",
            "example.com:80",
            "[example.com]",
            "[::1",
            "::1]",
            "1::2::3",
            "a/b",
            "a@b",
            "[fe80::1%25eth0]",
            "é.example",
        ] {
            assert_eq!(
                connect_request(host, 1, None, None),
                Err(InvalidConnectHost),
                "{host:?}"
            );
        }
    }

    #[test]
    fn established_leaves_tunnel_bytes() {
        let input = b"HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x01";
        let (n, outcome) = ConnectResponse::parse(input).unwrap().unwrap();
        assert_eq!(&input[n..], b"\x16\x03\x01");
        assert_eq!(
            outcome,
            ConnectOutcome::Established {
                status: StatusCode::OK
            }
        );
        let input = b"HTTP/1.0 200 OK\r\nProxy-Agent: squid\r\n\r\n";
        assert_eq!(
            ConnectResponse::parse(input).unwrap().unwrap().0,
            input.len()
        );
    }

    #[test]
    fn any_2xx_is_established_and_body_headers_are_ignored() {
        let input = b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\
                      Transfer-Encoding: chunked\r\n\r\nhello";
        let (n, outcome) = ConnectResponse::parse(input).unwrap().unwrap();
        assert_eq!(&input[n..], b"hello", "the 'body' is tunnel data");
        assert_eq!(
            outcome,
            ConnectOutcome::Established {
                status: StatusCode::NO_CONTENT
            }
        );
    }

    #[test]
    fn every_truncation_is_none() {
        let responses: [&[u8]; 4] = [
            b"HTTP/1.1 200 Connection established\r\nVia: 1.1 p\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
            b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n",
            b"HTTP/1.1 503 Service Unavailable\r\n\r\n",
        ];
        for response in responses {
            let full = ConnectResponse::parse(response);
            assert!(!matches!(full, Ok(None)));
            for cut in 0..response.len() {
                assert_eq!(
                    ConnectResponse::parse(&response[..cut]),
                    Ok(None),
                    "cut {cut} of {:?}",
                    String::from_utf8_lossy(response)
                );
            }
        }
    }

    #[test]
    fn interim_responses_are_skipped() {
        let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n\
                      HTTP/1.1 200 OK\r\n\r\nTLS";
        let (n, _) = ConnectResponse::parse(input).unwrap().unwrap();
        assert_eq!(&input[n..], b"TLS");
        // 101 is not an interim response to CONNECT.
        let input = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n";
        assert_eq!(
            ConnectResponse::parse(input),
            Err(ConnectError::Rejected {
                status: StatusCode::SWITCHING_PROTOCOLS,
                reason: "Switching Protocols".into()
            })
        );
    }

    #[test]
    fn proxy_auth_required_carries_challenges() {
        let input = b"HTTP/1.1 407 Proxy Authentication Required\r\n\
                      Proxy-Authenticate: Negotiate\r\n\
                      Content-Length: 0\r\n\
                      proxy-authenticate: Basic realm=\"corp\"\r\n\r\n";
        assert_eq!(
            ConnectResponse::parse(input),
            Err(ConnectError::ProxyAuthRequired {
                status: StatusCode::PROXY_AUTHENTICATION_REQUIRED,
                proxy_authenticate: vec![
                    HeaderValue::from_static("Negotiate"),
                    HeaderValue::from_static("Basic realm=\"corp\""),
                ],
            })
        );
        let input = b"HTTP/1.1 407 \r\n\r\n";
        let err = ConnectResponse::parse(input).unwrap_err();
        assert_eq!(
            err,
            ConnectError::ProxyAuthRequired {
                status: StatusCode::PROXY_AUTHENTICATION_REQUIRED,
                proxy_authenticate: vec![],
            }
        );
        assert_eq!(
            err.to_string(),
            "proxy authentication required (HTTP 407 Proxy Authentication Required)"
        );
    }

    #[test]
    fn other_statuses_are_rejections_with_reason() {
        for (input, code, reason) in [
            (&b"HTTP/1.1 403 Forbidden\r\n\r\n"[..], 403, "Forbidden"),
            (
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad",
                502,
                "Bad Gateway",
            ),
            (b"HTTP/1.1 404 \r\n\r\n", 404, ""),
            (b"HTTP/1.0 301 Moved\r\nLocation: x\r\n\r\n", 301, "Moved"),
            (b"HTTP/1.1 999 Odd\r\n\r\n", 999, "Odd"),
            // obs-text (httparse gives such a reason as ""), read as
            // Latin-1; the same reason in UTF-8 as it is; after an interim
            // head, the final one's.
            (
                b"HTTP/1.1 403 Interdit \xe9\r\n\r\n",
                403,
                "Interdit \u{e9}",
            ),
            (
                b"HTTP/1.1 403 Interdit \xc3\xa9\r\n\r\n",
                403,
                "Interdit \u{e9}",
            ),
            (
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 403 \xabNon\xbb\r\n\r\n",
                403,
                "\u{ab}Non\u{bb}",
            ),
        ] {
            let err = ConnectResponse::parse(input).unwrap_err();
            assert_eq!(
                err,
                ConnectError::Rejected {
                    status: StatusCode::from_u16(code).unwrap(),
                    reason: reason.into()
                }
            );
        }
        assert_eq!(
            ConnectResponse::parse(b"HTTP/1.1 403 Forbidden\r\n\r\n")
                .unwrap_err()
                .to_string(),
            "proxy refused CONNECT: HTTP 403 Forbidden"
        );
    }

    #[test]
    fn malformed_heads() {
        for input in [
            &b"SSH-2.0-OpenSSH\r\n\r\n"[..],
            b"HTTP/2 200\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
            b"\x05\x00",
        ] {
            assert!(
                matches!(
                    ConnectResponse::parse(input),
                    Err(ConnectError::Malformed(_))
                ),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
        assert_eq!(
            ConnectResponse::parse(b"HTTP/1.1 099 Low\r\n\r\n"),
            Err(ConnectError::InvalidStatus(99))
        );
    }

    #[test]
    fn a_malformed_answer_says_the_parsers_reason_once() {
        let error = ConnectResponse::parse(b"HTTP/2 200\r\n\r\n").unwrap_err();
        let ConnectError::Malformed(parser) = &error else {
            panic!("{error:?}");
        };
        let reason = parser.to_string();
        // The parser's error is the source, not in the message too.
        assert_eq!(error.to_string(), "malformed proxy response");
        let source = std::error::Error::source(&error).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some(reason.as_str()));
        // The request's error holds it as text, after its own "malformed":
        // the parser's reason, and "malformed" once.
        let proxy_error = error.into_proxy_error("example.com:443".into());
        match &proxy_error {
            ProxyError::MalformedAnswer(text) => assert_eq!(text, &reason),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            proxy_error.to_string(),
            format!("the proxy's answer to CONNECT is malformed: {reason}")
        );
        // So is a status code out of range.
        let error = ConnectResponse::parse(b"HTTP/1.1 099 Low\r\n\r\n").unwrap_err();
        let text = error.into_proxy_error("example.com:443".into()).to_string();
        assert_eq!(
            text,
            "the proxy's answer to CONNECT is malformed: invalid status code 99"
        );
    }

    #[test]
    fn head_size_limit() {
        let mut input = b"HTTP/1.1 200 OK\r\nX-Pad: ".to_vec();
        input.resize(MAX_HEAD_LEN, b'a');
        assert_eq!(
            ConnectResponse::parse(&input),
            Err(ConnectError::HeadTooLarge {
                limit: MAX_HEAD_LEN
            })
        );
        // Just under the limit is still fine, and a head exactly at the limit
        // is accepted.
        let head = b"HTTP/1.1 200 OK\r\n\r\n";
        assert_eq!(ConnectResponse::parse(&head[..head.len() - 1]), Ok(None));
        assert!(ConnectResponse::parse_with_limit(head, head.len())
            .unwrap()
            .is_some());
        assert_eq!(
            ConnectResponse::parse_with_limit(head, head.len() - 1),
            Err(ConnectError::HeadTooLarge {
                limit: head.len() - 1
            })
        );
        // Tunnel bytes after a small head do not count against the limit.
        let mut input = head.to_vec();
        input.extend(std::iter::repeat_n(0u8, 2 * MAX_HEAD_LEN));
        assert_eq!(
            ConnectResponse::parse(&input).unwrap().unwrap().0,
            head.len()
        );
        // Interim heads count.
        let interim = b"HTTP/1.1 100 Continue\r\n\r\n";
        let mut input = interim.to_vec();
        input.extend_from_slice(head);
        assert_eq!(
            ConnectResponse::parse_with_limit(&input, input.len() - 1),
            Err(ConnectError::HeadTooLarge {
                limit: input.len() - 1
            })
        );
    }

    #[test]
    fn too_many_headers() {
        let mut input = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            input.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        input.extend_from_slice(b"\r\n");
        assert_eq!(
            ConnectResponse::parse(&input),
            Err(ConnectError::TooManyHeaders)
        );
    }

    proptest! {
        #[test]
        fn garbage_never_panics(input in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(Some((n, _))) = ConnectResponse::parse(&input) {
                prop_assert!(n <= input.len());
            }
        }

        #[test]
        fn http_like_garbage_never_panics(
            status in 0u16..1200,
            reason in "[ -~]{0,20}",
            headers in proptest::collection::vec(("[!-9;-~]{1,8}", "[ -~]{0,16}"), 0..6),
            tail in proptest::collection::vec(any::<u8>(), 0..32),
        ) {
            let mut input = format!("HTTP/1.1 {status:03} {reason}\r\n");
            for (name, value) in &headers {
                input.push_str(&format!("{name}: {value}\r\n"));
            }
            input.push_str("\r\n");
            let head_len = input.len();
            let mut bytes = input.into_bytes();
            bytes.extend_from_slice(&tail);
            if let Ok(Some((n, ConnectOutcome::Established { status: s }))) = ConnectResponse::parse(&bytes) {
                prop_assert!(s.is_success());
                prop_assert_eq!(n, head_len);
            }
            for cut in 0..head_len.min(bytes.len()) {
                let r = ConnectResponse::parse(&bytes[..cut]);
                prop_assert!(!matches!(r, Ok(Some(_))), "complete at {}", cut);
            }
        }

        #[test]
        fn any_valid_host_encodes_one_line(host in "[a-zA-Z0-9._~-]{1,64}", port: u16) {
            let text = String::from_utf8(connect_request(&host, port, None, None).unwrap()).unwrap();
            prop_assert_eq!(text.matches("\r\n").count(), 3);
            let expected_start = format!("CONNECT {host}:{port} HTTP/1.1\r\n");
            prop_assert!(text.starts_with(&expected_start));
        }
    }
}
