//! The HTTP/2 request of an exchange ([`request_of`]): its head as HTTP/2
//! has it — the `:authority` from the caller's `Host`, connection-specific
//! fields left out but `TE: trailers`, values without the whitespace
//! around them — and its body, in memory or streamed from its source.

use super::limits::{field_size, list_size};
use super::stream::Outgoing;
use crate::conn::upload::{Declared, Upload};
use crate::exchange::{Exchange, RequestBody};

/// `uri`, with the caller's `Host` as its authority if there is one: over
/// HTTP/2 the `:authority` says what `Host` says over HTTP/1.1 (RFC 9113
/// §8.3.1), so a caller's `Host` (a virtual host behind an address) is
/// sent there, as curl does, rather than dropped for the URI's. A value
/// that is not a host and port is left out, the URI's kept: one with
/// userinfo parses as an authority, and `:authority` must not carry it
/// (RFC 9113 §8.3.1). The URI's goes without a port that is its scheme's
/// default (`h`, not `h:80`), as HTTP/1.1's `Host` does.
fn authority_of(uri: &http::Uri, host: Option<&http::HeaderValue>) -> http::Uri {
    let callers = host
        .and_then(|h| http::uri::Authority::try_from(h.as_bytes()).ok())
        .filter(|authority| !authority.as_str().contains('@'));
    let Some(authority) = callers.or_else(|| without_default_port(uri)) else {
        return uri.clone();
    };
    let mut parts = uri.clone().into_parts();
    parts.authority = Some(authority);
    http::Uri::from_parts(parts).unwrap_or_else(|_| uri.clone())
}

/// The authority of `uri` without its port, if that is the scheme's
/// default (80 for http, 443 for https, in any spelling: `:080` too);
/// `None` if it has another port or none. The digits after the last `:`
/// are read only when they are all digits (an IPv6 literal's last group
/// ends with `]`): most authorities have no port, and are not parsed.
fn without_default_port(uri: &http::Uri) -> Option<http::uri::Authority> {
    let authority = uri.authority()?;
    let (_, port) = authority.as_str().rsplit_once(':')?;
    if port.is_empty() || !port.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let default = if uri.scheme() == Some(&http::uri::Scheme::HTTPS) {
        443
    } else {
        80
    };
    if port.parse::<u16>().ok()? != default {
        return None;
    }
    authority.host().parse().ok()
}

/// A request's body before its stream opens ([`request_of`]): a streamed
/// one's source stays with its exchange until then, so that a request
/// whose stream does not open (`send_request` failing as its connection
/// goes away) goes again whole.
pub(super) enum Unopened {
    /// In memory, or none.
    Ready(Outgoing),
    /// Streamed, held to its declared length; its source is taken when the
    /// stream opens ([`opened`](Unopened::opened)).
    Streamed(Declared),
}

impl Unopened {
    /// Whether the head ends the stream: there is no body.
    pub(super) fn ends_stream(&self) -> bool {
        matches!(self, Unopened::Ready(Outgoing::Done))
    }

    /// What the stream just opened for `exchange` sends: a streamed body
    /// from its source, taken now.
    pub(super) fn opened(self, exchange: &Exchange) -> Outgoing {
        match self {
            Unopened::Ready(out) => out,
            // No source left: the exchange ended (a cancel, a timeout on
            // another thread) since `request_of`, its source going after its
            // done flag was set. Nothing is to be sent, not even the end of
            // a body — an empty one ended would be a whole request to the
            // server (a chunked body's declares no length): the stream's
            // first poll finds the exchange done and resets it.
            Unopened::Streamed(declared) => match Upload::take(exchange) {
                Some(upload) => Outgoing::Streamed(upload, declared, None),
                None => Outgoing::Stopped,
            },
        }
    }
}

/// The HTTP/2 request of `exchange`, and its body; `None` if the exchange
/// has ended meanwhile (its bytes are gone: nothing of it may go).
pub(super) fn request_of(exchange: &Exchange) -> Option<(http::Request<()>, Unopened)> {
    use http::header;
    let parts = &exchange.request;
    let payload = parts.payload();
    if payload.released {
        return None;
    }
    // Connection-specific fields have no place in HTTP/2 (RFC 9113
    // §8.2.2) — but `TE: trailers`, put back below; `Host` is the
    // `:authority` the URI gives. Nor has a value padded with whitespace
    // (§8.2.1), which goes trimmed.
    let specific = |name: &header::HeaderName| {
        super::super::connection_specific(name) || *name == header::EXPECT
    };
    // A caller's `Host` and `TE` are among these: looked up only if one
    // is there (not in the common case, with no lookup at all).
    let rewritten = parts
        .headers
        .iter()
        .any(|(name, value)| specific(name) || padded(value));
    let host = rewritten
        .then(|| parts.headers.get(header::HOST))
        .flatten()
        .map(trimmed);
    let mut request = http::Request::new(());
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = authority_of(exchange.listener.request().uri(), host.as_ref());
    *request.version_mut() = http::Version::HTTP_2;
    let headers = request.headers_mut();
    if rewritten {
        let named = connection_options(&parts.headers);
        let named = |name: &header::HeaderName| {
            named
                .iter()
                .any(|option| option.eq_ignore_ascii_case(name.as_str().as_bytes()))
        };
        for (name, value) in parts.headers.iter() {
            if !specific(name) && !named(name) {
                headers.append(name.clone(), trimmed(value));
            }
        }
        if asks_for_trailers(&parts.headers) {
            headers.insert(header::TE, http::HeaderValue::from_static("trailers"));
        }
    } else {
        // The common case: all of them, copied whole (no hashing).
        headers.clone_from(&parts.headers);
    }
    if let Some(cookie) = &parts.cookie {
        headers.append(header::COOKIE, cookie.clone());
    }
    let out = match &parts.body {
        RequestBody::Streamed(streamed) => {
            if let Some(length) = streamed.length {
                headers
                    .entry(header::CONTENT_LENGTH)
                    .or_insert_with(|| length.into());
            }
            Unopened::Streamed(Declared::new(streamed.length))
        }
        RequestBody::InHead | RequestBody::Held if payload.data.is_empty() => {
            // `END_STREAM` on the head says it is empty; a POST, PUT or
            // PATCH says so with `content-length: 0` too, as over HTTP/1.1
            // (RFC 9110 §8.6): IIS answers one without it `411`.
            let method = &parts.method;
            if *method == http::Method::POST
                || *method == http::Method::PUT
                || *method == http::Method::PATCH
            {
                headers
                    .entry(header::CONTENT_LENGTH)
                    .or_insert_with(|| http::HeaderValue::from_static("0"));
            }
            Unopened::Ready(Outgoing::Done)
        }
        RequestBody::InHead | RequestBody::Held => {
            headers
                .entry(header::CONTENT_LENGTH)
                .or_insert_with(|| payload.data.len().into());
            Unopened::Ready(Outgoing::Data(payload.data.clone()))
        }
    };
    Some((request, out))
}

/// The size of `request`'s header section as a server's
/// `SETTINGS_MAX_HEADER_LIST_SIZE` counts it (RFC 9113 §6.5.2): each
/// field's name and value, uncompressed, and 32 bytes — its pseudo-header
/// fields too, those `h2` sends for it (`:method`, `:scheme` and
/// `:authority` if the URI has them, `:path`).
pub(super) fn header_list_size(request: &http::Request<()>) -> u64 {
    let uri = request.uri();
    let pseudo = [
        Some((":method", request.method().as_str())),
        uri.scheme_str().map(|scheme| (":scheme", scheme)),
        uri.authority()
            .map(|authority| (":authority", authority.as_str())),
        Some((
            ":path",
            uri.path_and_query().map_or("/", |path| path.as_str()),
        )),
    ];
    let pseudo = pseudo
        .into_iter()
        .flatten()
        .map(|(name, value)| field_size(name, value))
        .fold(0, usize::saturating_add);
    pseudo.saturating_add(list_size(request.headers())) as u64
}

/// Whether `value` starts or ends with whitespace: HTTP/1.1 carries that
/// padding (its server trims it, RFC 9110 §5.5), HTTP/2 forbids it (RFC
/// 9113 §8.2.1) — a server that checks ends the whole connection for it,
/// every stream on it failing.
fn padded(value: &http::HeaderValue) -> bool {
    let bytes = value.as_bytes();
    let space = |byte: Option<&u8>| matches!(byte, Some(b' ' | b'\t'));
    space(bytes.first()) || space(bytes.last())
}

/// `value` without the whitespace around it (not part of a field's value,
/// RFC 9110 §5.5), sensitive if it was: as HTTP/1.1's server reads it. (A
/// value made unchecked that does not parse once trimmed goes as it is.)
fn trimmed(value: &http::HeaderValue) -> http::HeaderValue {
    if !padded(value) {
        return value.clone();
    }
    match http::HeaderValue::from_bytes(value.as_bytes().trim_ascii()) {
        Ok(mut trimmed) => {
            trimmed.set_sensitive(value.is_sensitive());
            trimmed
        }
        Err(_) => value.clone(),
    }
}

/// `fields` (a request's trailers) with no value padded with whitespace,
/// as its head has them: each trimmed ([`trimmed`]).
pub(super) fn trim_values(fields: &mut http::HeaderMap) {
    for value in fields.values_mut() {
        if padded(value) {
            *value = trimmed(value);
        }
    }
}

/// The field names the caller's `Connection` lists: connection-specific
/// too (RFC 9110 §7.6.1), for this hop alone, so off HTTP/2 with the
/// `Connection` that said so (RFC 9113 §8.2.2) — sent without it, a
/// field meant for the next hop only would reach the origin as its own.
fn connection_options(headers: &http::HeaderMap) -> Vec<&[u8]> {
    headers
        .get_all(http::header::CONNECTION)
        .iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|option| !option.is_empty())
        .collect()
}

/// Whether the caller's `TE` lists `trailers`: HTTP/2 keeps that one
/// connection field, saying `trailers` and nothing else (RFC 9113 §8.2.2,
/// and `h2` refuses any other value). gRPC servers want it, and some send
/// trailers only when asked so (hypercorn); over HTTP/1.1 it goes with
/// `Connection: te`.
fn asks_for_trailers(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(http::header::TE)
        .iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b','))
        .filter_map(|coding| coding.split(|&b| b == b';').next())
        .any(|coding| coding.trim_ascii().eq_ignore_ascii_case(b"trailers"))
}

#[cfg(test)]
mod tests {
    use super::{header_list_size, request_of, trimmed, without_default_port, Outgoing};
    use crate::exchange::UploadSource;
    use http::HeaderValue;

    /// RFC 9113 §6.5.2: each field's name and value, and 32 bytes, the
    /// pseudo-fields `h2` sends included.
    #[test]
    fn a_header_list_counts_as_the_rfc_counts_it() {
        let request = http::Request::get("https://a.example/p?q")
            .header("x-one", "12")
            .body(())
            .unwrap();
        let pseudo = (7 + 3 + 32) + (7 + 5 + 32) + (10 + 9 + 32) + (5 + 4 + 32);
        let fields = 5 + 2 + 32;
        assert_eq!(header_list_size(&request), pseudo + fields);
    }

    #[test]
    fn only_the_schemes_default_port_is_left_out() {
        let cut = |uri: &str| {
            without_default_port(&uri.parse().unwrap()).map(|authority| authority.to_string())
        };
        assert_eq!(cut("http://a:80/").as_deref(), Some("a"));
        assert_eq!(cut("http://a:080/").as_deref(), Some("a"));
        assert_eq!(cut("https://a:443/").as_deref(), Some("a"));
        assert_eq!(cut("http://[::1]:80/").as_deref(), Some("[::1]"));
        assert_eq!(cut("https://a:80/"), None);
        assert_eq!(cut("http://a:8080/"), None);
        assert_eq!(cut("http://a/"), None);
        assert_eq!(cut("http://[::80]/"), None);
    }

    #[test]
    fn a_value_trimmed_keeps_its_sensitivity_and_its_inner_whitespace() {
        let mut secret = HeaderValue::from_static(" \tBearer  t \t");
        secret.set_sensitive(true);
        let trimmed_secret = trimmed(&secret);
        assert_eq!(trimmed_secret, "Bearer  t");
        assert!(trimmed_secret.is_sensitive());
        assert!(!trimmed(&HeaderValue::from_static(" plain ")).is_sensitive());
        assert_eq!(trimmed(&HeaderValue::from_static("a b")), "a b");
        assert_eq!(trimmed(&HeaderValue::from_static("  ")), "");
    }

    /// A POST of a streamed body (`Upload::from_reader`) as an exchange of
    /// `client`, not submitted.
    fn a_streamed_post(client: &crate::Client) -> std::sync::Arc<crate::exchange::Exchange> {
        use crate::policy::hop::{exchange_for, Hop, HopBody, HopSettings};
        let mut hop = Hop {
            method: http::Method::POST,
            uri: "http://127.0.0.1:1/".parse().unwrap(),
            headers: std::sync::Arc::default(),
            cookie: None,
            body: HopBody::from_upload(crate::Upload::from_reader(std::io::empty(), None)),
        };
        let settings = HopSettings {
            deadlines: crate::exchange::Deadlines {
                request_timeout: None,
                read_timeout: None,
                write_timeout: None,
                on_event_loop: false,
            },
            listener: crate::events::nobody_listening(),
            submitted: std::time::Instant::now(),
            request_id: 1,
            decompress: false,
        };
        exchange_for(client.dispatcher(), &mut hop, &settings).unwrap()
    }

    /// A request's streamed body stays with its exchange until its stream
    /// opens: `request_of` leaves it there, for a request whose stream does
    /// not open (`send_request` failing, its connection going away) to go
    /// again whole — not, its body taken, fail with `Error::RequestBody`
    /// though no server saw it. (Only h2 checking the same connection error
    /// in `poll_ready` just before keeps that from the wire.)
    #[test]
    fn a_streamed_body_is_taken_only_when_its_stream_opens() {
        use crate::exchange::Pipe;
        use crate::Client;
        use std::sync::Arc;
        let client = Client::builder().event_loops(1).build().unwrap();
        let exchange = a_streamed_post(&client);
        let pipe = || Arc::new(Pipe::new(1024, Arc::default()));
        let (_request, body) = request_of(&exchange).unwrap();
        assert!(
            matches!(exchange.request.rewind(pipe), Ok(None)),
            "the body is its exchange's still: it would go again whole"
        );
        let out = body.opened(&exchange);
        assert!(
            matches!(&out, Outgoing::Streamed(upload, ..) if matches!(upload.source(), UploadSource::Pumped(_)))
        );
        assert!(
            matches!(
                exchange.request.rewind(pipe),
                Err(crate::Error::RequestBody { .. })
            ),
            "taken by the stream, it goes once"
        );
        client.close();
    }

    /// A streamed body whose source went between `request_of` and the
    /// stream's opening (its exchange ended meanwhile, on another thread)
    /// sends nothing: not an empty body ended, which the server would take
    /// as the whole request.
    #[test]
    fn a_streamed_body_whose_source_went_before_its_stream_opened_sends_nothing() {
        use crate::Client;
        let client = Client::builder().event_loops(1).build().unwrap();
        let exchange = a_streamed_post(&client);
        let (_request, body) = request_of(&exchange).unwrap();
        drop(exchange.request.take_source());
        assert!(matches!(body.opened(&exchange), Outgoing::Stopped));
        client.close();
    }
}
