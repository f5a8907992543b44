//! [`Origin`]: scheme, host and port — what a pooled connection can serve.

use crate::error::{shown_uri, InvalidRequest};
use std::fmt;
use std::sync::Arc;

/// The scheme of an origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS.
    Https,
}

/// Where a request goes: connections are pooled per origin.
///
/// Two URIs have the same origin when their schemes, hosts and ports are
/// the same, with host names compared case-insensitively and IP literals by
/// value (RFC 3986 §6.2.2.1): `http://LOCALHOST:8080/` and
/// `http://localhost:8080/` share connections, as do `http://[::1]/` and
/// `http://[0:0::1]/`. The host is kept in that normal form. (A host
/// that is not ASCII or is percent-encoded, which `http::Uri` does not
/// take, was read as the URL standard reads it when the request's text
/// became its URI: `http://bücher.test/` has the host `xn--bcher-kva.test`.)
///
/// A host the system's resolver reads as an IPv4 address though it is not
/// in dotted-decimal form — `127.1`, `2130706433`, `0x7f.0.0.1`,
/// `0177.0.0.1` (`inet_aton`'s forms, which `getaddrinfo` takes as an
/// address, and WHATWG URLs, so reqwest, too) — is that address, in
/// dotted-decimal: the connection goes there, so `no_proxy` blocks and the
/// pool see it as what it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    /// http or https.
    pub scheme: Scheme,
    /// The host, without brackets for IPv6: a DNS name in lower case, or an
    /// IP address as [`IpAddr`](std::net::IpAddr) displays it. Shared: a
    /// request's origin is copied into its route and from the thread's last
    /// one, and a copy costs no allocation.
    pub host: Arc<str>,
    /// The port, the scheme's default if the URI has none.
    pub port: u16,
}

impl Origin {
    /// The origin of an absolute http(s) URI. An error quotes the URI
    /// without its userinfo: a request's credentials become a header
    /// before its origin is asked for, but a password must not reach an
    /// error even where that order is not kept.
    pub fn of(uri: &http::Uri) -> Result<Origin, InvalidRequest> {
        let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
            return Origin::read(uri);
        };
        // An error: the thread is exiting and its kept origin has gone (a
        // request sent from another thread-local's destructor).
        LAST_ORIGIN
            .try_with(|last| {
                let mut last = last.borrow_mut();
                if let Some(last) = last.as_ref().filter(|last| last.is_of(scheme, authority)) {
                    return Ok(last.origin.clone());
                }
                let origin = Origin::read(uri)?;
                *last = Some(LastOrigin {
                    scheme: scheme.as_str().into(),
                    authority: authority.as_str().into(),
                    origin: origin.clone(),
                });
                Ok(origin)
            })
            .unwrap_or_else(|_| Origin::read(uri))
    }

    /// The origin of `uri`, as [`Origin::of`] says, read afresh.
    fn read(uri: &http::Uri) -> Result<Origin, InvalidRequest> {
        #[cfg(test)]
        reads::counted();
        let shown = || shown_uri(&uri.to_string());
        let scheme = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") => Scheme::Http,
            Some(s) if s.eq_ignore_ascii_case("https") => Scheme::Https,
            _ => return Err(InvalidRequest::Scheme(shown())),
        };
        let after_host = after_host(uri);
        // An IPv6 literal followed by anything but `:` and its port:
        // `http` takes `[::1]8080` (a colon forgotten) or `[::1]x:81` for
        // the literal and what follows for nothing, which would go to the
        // scheme's default port — a server the caller never named.
        if !after_host.is_empty() && !after_host.starts_with(':') {
            return Err(InvalidRequest::Host(shown()));
        }
        let host = uri
            .host()
            .and_then(usable_host)
            .ok_or_else(|| InvalidRequest::Host(shown()))?;
        let port = match (uri.port_u16(), after_host.strip_prefix(':')) {
            (Some(port), _) => port,
            // Digits `http` did not take for a port: too large for 16 bits.
            (None, Some(written)) if !written.is_empty() => {
                return Err(InvalidRequest::Port(shown()))
            }
            (None, _) => match scheme {
                Scheme::Http => 80,
                Scheme::Https => 443,
            },
        };
        Ok(Origin {
            scheme,
            host: host.into(),
            port,
        })
    }
}

/// The origin a thread read last, and the scheme and authority it read it
/// from. An origin is a function of those two alone, and a thread's
/// requests mostly go where its last one went: reading one afresh (the
/// authority parsed for its host, then twice for its port; the host put in
/// normal form) cost some 1 700 instructions a request, comparing two
/// strings and copying the origin a few hundred. Kept per thread, not per
/// client: it is the same for every client, and needs no lock. The scheme
/// and authority are copies of their own: `http`'s share the buffer of
/// the whole URI they came from, which would keep its path and query (a
/// signed URL's token) alive as long as the thread.
struct LastOrigin {
    scheme: Box<str>,
    authority: Box<str>,
    origin: Origin,
}

impl LastOrigin {
    /// Whether this is the origin of a URI with `scheme` and `authority`:
    /// compared byte for byte (`http`'s own comparisons ignore case, and an
    /// origin need not).
    fn is_of(&self, scheme: &http::uri::Scheme, authority: &http::uri::Authority) -> bool {
        *self.scheme == *scheme.as_str() && *self.authority == *authority.as_str()
    }
}

thread_local! {
    static LAST_ORIGIN: std::cell::RefCell<Option<LastOrigin>> =
        const { std::cell::RefCell::new(None) };
}

/// How many origins this thread read afresh: the tests' measure of what
/// [`LastOrigin`] saves.
#[cfg(test)]
pub(crate) mod reads {
    use std::cell::Cell;

    thread_local!(static READS: Cell<usize> = const { Cell::new(0) });

    pub(super) fn counted() {
        READS.with(|n| n.set(n.get() + 1));
    }

    /// The origins `f` read afresh.
    pub(crate) fn during(f: impl FnOnce()) -> usize {
        let before = READS.with(Cell::get);
        f();
        READS.with(Cell::get) - before
    }
}

/// The URI's `host` in its normal form (see [`normal_host`]), if it is one
/// a connection can go to: not empty, and a bracketed literal only if it is
/// an IPv6 address — not `[]`, an IPvFuture literal (`[v1.x]`) or one with
/// a zone id (`[fe80::1%25eth0]`), which `http` lets through and nothing
/// could connect to (nor send on through a proxy), and no bracket in a name
/// (`a[b]`, which `http` takes as a host too).
fn usable_host(host: &str) -> Option<String> {
    match host.strip_prefix('[') {
        Some(literal) => {
            let ip = literal
                .strip_suffix(']')?
                .parse::<std::net::Ipv6Addr>()
                .ok()?;
            Some(ip.to_string())
        }
        None => (!host.is_empty() && !host.contains(['[', ']'])).then(|| normal_host(host)),
    }
}

/// `host` as [`ClientBuilder::resolve`](crate::ClientBuilder::resolve)
/// overrides are keyed, from the builder's argument and from a request's
/// host alike: an IPv6 literal's brackets taken off, then the form origins
/// compare by ([`normal_host`]: `[2001:DB8:0::1]` is `2001:db8::1`, `127.1`
/// is `127.0.0.1`, a name is in lower case), less one final dot —
/// `example.com.` and `example.com` are one DNS name.
pub(crate) fn override_key(host: &str) -> String {
    let bare = host
        .strip_prefix('[')
        .and_then(|literal| literal.strip_suffix(']'))
        .unwrap_or(host);
    let mut key = normal_host(bare);
    if key.ends_with('.') {
        key.pop();
    }
    key
}

/// `host` in the form origins compare by: an IP address as it displays,
/// anything else in ASCII lower case — and a host that is not ASCII or
/// holds a `%` as the URL standard reads it ([`url_standard_host`]:
/// `bücher.test` is `xn--bcher-kva.test`, `ex%61mple.test` is
/// `example.test`), or as it is if that parser refuses it. A URI's host
/// is never such (`http` takes neither form; a request's text has its
/// host read so in `api::input`): this is for the builder's
/// [`override_key`], given a host as the caller writes it.
fn normal_host(host: &str) -> String {
    if needs_url_parsing(host) {
        if let Some(parsed) = url_standard_host(host) {
            return parsed;
        }
    }
    // An IPv6 literal is the only host with a colon.
    if host.contains(':') {
        if let Ok(ip) = host.parse::<std::net::Ipv6Addr>() {
            return ip.to_string();
        }
    }
    // The URI grammar's IPv4 literal is dotted decimal, as it displays
    // (std reads no other form: no leading zeros)...
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return host.to_owned();
    }
    // ... but the resolver takes other spellings of an address too, which
    // the URI calls names.
    if let Some(ip) = ipv4_in_another_spelling(host) {
        return ip.to_string();
    }
    host.to_ascii_lowercase()
}

/// Whether `host`, a name or an IPv4 address (not a bracketed literal),
/// may be another name once the URL standard has read it: it is not
/// ASCII, or holds a percent-encoded octet. Any other is read as it is,
/// at no cost: lower case and [`ipv4_in_another_spelling`] are what the
/// URL standard's parser would change in it.
pub(crate) fn needs_url_parsing(host: &str) -> bool {
    !host.is_ascii() || host.contains('%')
}

/// `host`, a name or an IPv4 address (not a bracketed literal), as the
/// URL standard's host parser reads it (the `url` crate's, as reqwest
/// does): percent-decoded, then mapped by IDNA (UTS #46)
/// to its ASCII form — lower case, each label that is not ASCII in
/// punycode (`Bücher.test` is `xn--bcher-kva.test`) — and an address in
/// any of its spellings in dotted decimal. That is the name a resolver,
/// the `Host` header and a certificate know it by. `None` if the parser
/// refuses it: a forbidden character once decoded (`ex%2Fample`, a
/// space, `%` itself), a code point IDNA disallows.
pub(crate) fn url_standard_host(host: &str) -> Option<String> {
    match url::Host::parse(host).ok()? {
        url::Host::Domain(name) => Some(name),
        url::Host::Ipv4(ip) => Some(ip.to_string()),
        // Only a bracketed literal parses as one: not given here.
        url::Host::Ipv6(_) => None,
    }
}

/// `host` as an IPv4 address if it spells one in a form both the system's
/// resolver (`inet_aton`) and WHATWG URLs read as one (`127.1`,
/// `2130706433`, `0x7f.0.0.1`, `0177.0.0.1`), read by the `url` crate's
/// host parser; `None` for a name. WHATWG reads more than `inet_aton`
/// does — an empty part (`127.0.0.1.`, `1.2.3.`) or a bare `0x` — which
/// the system would look up as a name and fail: those stay names here
/// too. Only a host made of what such an address is made of goes to the
/// parser: the common name costs no parse.
fn ipv4_in_another_spelling(host: &str) -> Option<std::net::Ipv4Addr> {
    let spells_a_number = |b: u8| b.is_ascii_hexdigit() || matches!(b, b'.' | b'x' | b'X');
    if !host.bytes().all(spells_a_number) || !host.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    let read_alike = |part: &str| !part.is_empty() && !part.eq_ignore_ascii_case("0x");
    if !host.split('.').all(read_alike) {
        return None;
    }
    match url::Host::parse(host) {
        Ok(url::Host::Ipv4(ip)) => Some(ip),
        _ => None,
    }
}

/// What follows the host in the URI's authority: `""`, or `:` and the
/// port as written (`http` drops one that does not fit in a `u16`) — or,
/// after an IPv6 literal, whatever `http` let through there (`8080` in
/// `[::1]8080`).
fn after_host(uri: &http::Uri) -> &str {
    let Some(authority) = uri.authority().map(http::uri::Authority::as_str) else {
        return "";
    };
    let host_and_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, rest)| rest);
    match host_and_port.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once(']').map_or("", |(_, rest)| rest),
        None => host_and_port
            .find(':')
            .map_or("", |colon| &host_and_port[colon..]),
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An override's host, as the builder is given it, has the key the
    /// request's host has, as its origin normalizes it.
    #[test]
    fn an_override_key_is_the_origins_host_without_its_final_dot() {
        let host_of = |uri: &str| Origin::of(&uri.parse().unwrap()).unwrap().host;
        for (given, uri) in [
            ("Example.COM", "http://eXample.com/"),
            ("example.com.", "http://example.com/"),
            ("example.com", "http://EXAMPLE.com./"),
            ("[2001:DB8:0::1]", "http://[2001:db8::1]/"),
            ("2001:0db8::1", "http://[2001:DB8::0:1]:8080/"),
            ("[::ffff:127.0.0.1]", "http://[::ffff:7f00:1]/"),
            ("127.1", "http://127.0.0.1/"),
            ("0x7f.0.0.1", "http://2130706433/"),
            // As the request's text has its host read (`api::input`).
            ("Bücher.Test.", "http://xn--bcher-kva.test/"),
            ("ex%61mple.test", "http://example.test/"),
            ("%31%32%37.1", "http://127.0.0.1/"),
        ] {
            let key = override_key(given);
            assert_eq!(key, override_key(&host_of(uri)), "{given} for {uri}");
            assert!(!key.ends_with('.') && !key.starts_with('['), "{key}");
        }
        assert_eq!(override_key("[2001:DB8:0::1]"), "2001:db8::1");
        assert_eq!(override_key("Example.COM."), "example.com");
        assert_eq!(override_key("BÜCHER.test"), "xn--bcher-kva.test");
        // Refused by the URL standard: as it is, in lower case.
        assert_eq!(override_key("Ex%2Fample.test"), "ex%2fample.test");
        assert_ne!(override_key("example.com"), override_key("example.org"));
        assert_ne!(override_key("[::1]"), override_key("[::2]"));
    }

    /// Each error quotes the URI, but not a password in it.
    #[test]
    fn an_origins_error_quotes_the_uri_without_its_userinfo() {
        for (uri, shown) in [
            ("ftp://me:secret@a.test/x", "ftp://***@a.test/x"),
            ("http://me:secret@[v1.x]/x", "http://***@[v1.x]/x"),
            (
                "http://me:secret@a.test:65536/x",
                "http://***@a.test:65536/x",
            ),
        ] {
            let error = Origin::of(&uri.parse().unwrap()).unwrap_err();
            let quoted = match &error {
                InvalidRequest::Scheme(quoted)
                | InvalidRequest::Host(quoted)
                | InvalidRequest::Port(quoted) => quoted,
                other => panic!("{uri}: {other:?}"),
            };
            assert_eq!(quoted, shown, "{uri}");
            assert!(!error.to_string().contains("secret"), "{error}");
        }
        // Without a userinfo, the URI as it displays.
        let error = Origin::of(&"http://[]/x".parse().unwrap()).unwrap_err();
        assert!(
            matches!(&error, InvalidRequest::Host(q) if q == "http://[]/x"),
            "{error:?}"
        );
    }

    /// A thread's last origin is read once, and serves a URI with the same
    /// scheme and authority, byte for byte, alone: a URI that differs in
    /// either, if only in case, is read afresh, and has its own origin.
    #[test]
    fn the_last_origin_serves_the_same_scheme_and_authority_alone() {
        let of = |s: &str| Origin::of(&s.parse().unwrap());
        let first = of("http://A.example:8080/x").unwrap();
        let again = reads::during(|| {
            assert_eq!(of("http://A.example:8080/y?q").unwrap(), first);
            assert_eq!(of("HTTP://A.example:8080/").unwrap(), first);
        });
        assert_eq!(again, 0, "the same scheme and authority");
        let sequence = [
            ("https://A.example:8080/", "a.example:8080", Scheme::Https),
            ("http://A.example:8080/", "a.example:8080", Scheme::Http),
            ("http://a.example:8080/", "a.example:8080", Scheme::Http),
            ("http://a.example/", "a.example:80", Scheme::Http),
            ("http://u@a.example/", "a.example:80", Scheme::Http),
            ("https://u@a.example/", "a.example:443", Scheme::Https),
            ("https://u@a.example:70000/", "", Scheme::Https),
            ("https://u@a.example:70000/", "", Scheme::Https),
            ("https://u@a.example/", "a.example:443", Scheme::Https),
            ("http://[::1]/", "[::1]:80", Scheme::Http),
            ("http://[0::1]/", "[::1]:80", Scheme::Http),
        ];
        let reads = reads::during(|| {
            for (uri, shown, scheme) in sequence {
                match of(uri) {
                    Ok(origin) => {
                        assert_eq!(
                            (origin.to_string().as_str(), origin.scheme),
                            (shown, scheme)
                        );
                    }
                    Err(error) => assert!(shown.is_empty(), "{uri}: {error}"),
                }
            }
        });
        // Each URI is read but the one after the errors: an error is not
        // kept (read twice), nor does it replace the last origin (that of
        // the URI before them, then served again).
        assert_eq!(reads, sequence.len() - 1);
    }

    #[test]
    fn origins_of_uris() {
        let of = |s: &str| Origin::of(&s.parse().unwrap());
        assert_eq!(of("http://a.example/x").unwrap().port, 80);
        assert_eq!(of("https://a.example/x").unwrap().port, 443);
        assert_eq!(of("http://[::1]:8080/").unwrap().to_string(), "[::1]:8080");
        assert!(matches!(of("ftp://a/"), Err(InvalidRequest::Scheme(_))));
        // No host a connection could go to: empty brackets, a bracket in a
        // name, an IPvFuture literal, an IPv6 zone id, brackets around
        // what is not an IPv6 address.
        for uri in [
            "http://[]/",
            "https://a[b]/",
            "http://[v1.x:y]/",
            "http://[fe80::1%25eth0]/",
            "http://[127.0.0.1]/",
            "http://[a.example]/",
            // What follows an IPv6 literal but a port after its colon: a
            // port whose colon was forgotten, anything else.
            "http://[::1]8080/",
            "https://u:p@[::1]443/",
            "http://[::1]x:8080/",
        ] {
            // Each one `http` takes as a URI with that host.
            let parsed: http::Uri = uri.parse().unwrap();
            assert!(
                matches!(Origin::of(&parsed), Err(InvalidRequest::Host(_))),
                "{uri}: {:?}",
                Origin::of(&parsed)
            );
        }
        assert!(matches!(of("/relative"), Err(InvalidRequest::Scheme(_))));
        assert_eq!(of("http://a.example:65535/").unwrap().port, 65535);
        assert_eq!(of("http://user:pw@a.example/").unwrap().port, 80);
        assert_eq!(of("http://a.example:/").unwrap().port, 80);
        // Hosts compare case-insensitively, IP literals by value.
        assert_eq!(
            of("http://A.Example/").unwrap(),
            of("http://a.example:80/").unwrap()
        );
        assert_eq!(
            of("HTTP://[0:0::1]/").unwrap(),
            of("http://[::1]/").unwrap()
        );
        assert_eq!(
            &*of("http://[::FFFF:7f00:1]/").unwrap().host,
            "::ffff:127.0.0.1"
        );
        assert_ne!(
            of("http://a.example/").unwrap(),
            of("https://a.example/").unwrap()
        );
        // IPv4 in any spelling the system's resolver and WHATWG URLs both
        // read is its address.
        for (spelled, address) in [
            ("127.1", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("0x7F.1", "127.0.0.1"),
            ("0177.0.0.1", "127.0.0.1"),
            ("010.1", "8.0.0.1"),
            ("00000000000000000000127.1", "87.0.0.1"),
            ("1.16777215", "1.255.255.255"),
            ("4294967295", "255.255.255.255"),
            ("0", "0.0.0.0"),
            ("10.0.0.1", "10.0.0.1"),
        ] {
            let url = format!("http://{spelled}/");
            assert_eq!(&*of(&url).unwrap().host, address, "{spelled}");
        }
        // Not an address: a name.
        for name in [
            "1.2.3.4.5",
            "4294967296",
            "0x100000000",
            "1.16777216",
            "256.1",
            "08",
            "1..1",
            // What WHATWG reads as an address and inet_aton does not.
            "0x",
            "0x.1",
            "1.2.3.",
            "127.0.0.1.",
            "127.1.",
            "123abc",
            "1.2.3.4a",
            "0x1g",
        ] {
            let url = format!("http://{name}/");
            assert_eq!(*of(&url).unwrap().host, name.to_ascii_lowercase(), "{name}");
        }
        for out_of_range in [
            "http://a.example:65536/",
            "https://[::1]:99999/",
            "http://user:pw@a.example:70000/",
        ] {
            assert!(
                matches!(of(out_of_range), Err(InvalidRequest::Port(_))),
                "{out_of_range}"
            );
        }
    }
}
