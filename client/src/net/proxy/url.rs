//! Proxy URLs: `[scheme://][user[:password]@]host[:port][/...]`, parsed
//! by the `url` crate (WHATWG URL parsing: scheme, userinfo, IPv6 literals,
//! IDNA, port range), with the proxy rules on top:
//!
//! 1. Surrounding whitespace is trimmed; an empty value is an error.
//! 2. A value without `://` is taken as `http://` + value (curl and reqwest
//!    both assume an HTTP proxy then), so `proxy.lan:3128` works.
//! 3. The scheme must be `http`, `socks5` (the client resolves the target)
//!    or `socks5h` (the proxy resolves it); `https` proxies (TLS to the
//!    proxy), `socks4` and anything else are
//!    [`ProxyUrlError::UnsupportedScheme`].
//! 4. Without a port, the scheme's default: **80 for `http`** (reqwest's
//!    choice; curl uses 1080), 1080 for `socks5`/`socks5h`.
//! 5. Userinfo, if any, is percent-decoded into credentials (a missing
//!    password is `""`; bytes that are not UTF-8 become U+FFFD, as in
//!    reqwest). For `http`, which sends them as `Basic`, a decoded user
//!    name with a `:` or a control character in either part is
//!    [`ProxyUrlError::Credentials`] (RFC 7617 §2).
//! 6. Any path, query or fragment is ignored (as reqwest and curl do).
//! 7. The host is read as the URL standard reads an `http` URL's, whatever
//!    the scheme (`socks5` ones are otherwise kept as written):
//!    percent-decoded, an international name in its ASCII form, an IPv4
//!    address in any spelling the standard takes (`127.1`) in dotted
//!    decimal, a name in lower case.
//!
//! `Debug`, `Display` and every error leave the password out.

use crate::basic_auth;
use crate::error::ProxyUrlError;
use http::HeaderValue;
use percent_encoding::percent_decode_str;
use std::borrow::Cow;
use std::fmt;

/// Which protocol to speak to the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ProxyScheme {
    /// `http://`: CONNECT tunnels, or absolute-form requests for `http`
    /// targets.
    Http,
    /// `socks5://`: SOCKS5, the target resolved by the client.
    Socks5,
    /// `socks5h://`: SOCKS5, the target's name resolved by the proxy.
    Socks5h,
}

impl ProxyScheme {
    /// The port used when the URL has none.
    fn default_port(self) -> u16 {
        match self {
            ProxyScheme::Http => 80,
            ProxyScheme::Socks5 | ProxyScheme::Socks5h => 1080,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            ProxyScheme::Http => "http",
            ProxyScheme::Socks5 => "socks5",
            ProxyScheme::Socks5h => "socks5h",
        }
    }
}

/// A parsed proxy URL. See the [module documentation](self).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct ProxyUrl {
    scheme: ProxyScheme,
    /// A DNS name in lower case, or an IP address as it displays.
    host: String,
    port: u16,
    credentials: Option<(String, String)>,
    /// The `Proxy-Authorization` for an `http` proxy: `Basic` from its
    /// credentials, made once here, or the caller's own
    /// ([`with_authorization`](Self::with_authorization)); sent with every
    /// request that goes through it.
    authorization: Option<HeaderValue>,
}

impl ProxyUrl {
    /// Parses a proxy URL (a builder argument or an environment value).
    pub(crate) fn parse(value: &str) -> Result<ProxyUrl, ProxyUrlError> {
        let value = value.trim();
        if value.is_empty() {
            return Err(ProxyUrlError::Empty);
        }
        let value = match value.contains("://") {
            true => Cow::Borrowed(value),
            false => Cow::Owned(format!("http://{value}")),
        };
        let url = url::Url::parse(&value).map_err(|e| ProxyUrlError::Invalid {
            reason: e.to_string(),
        })?;
        let scheme = match url.scheme() {
            "http" => ProxyScheme::Http,
            "socks5" => ProxyScheme::Socks5,
            "socks5h" => ProxyScheme::Socks5h,
            other => return Err(ProxyUrlError::UnsupportedScheme(other.to_owned())),
        };
        let host = match url.host() {
            // `socks5` is not a scheme the URL standard knows, so its host
            // is "opaque": kept as written, percent-encoding and all. It is
            // read here as the standard reads `http`'s (for which this
            // changes nothing): percent-decoded, an international name in
            // its ASCII form, an IPv4 address in any spelling the standard
            // takes (`127.1`) in dotted decimal — so that a SOCKS proxy's
            // host means what the same host of an HTTP proxy means.
            Some(url::Host::Domain(name)) if !name.is_empty() => {
                crate::net::url_standard_host(name).ok_or_else(|| ProxyUrlError::Invalid {
                    reason: format!("invalid host {name:?}"),
                })?
            }
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            _ => return Err(ProxyUrlError::MissingHost),
        };
        let credentials = (!url.username().is_empty() || url.password().is_some()).then(|| {
            let decode = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
            (decode(url.username()), decode(url.password().unwrap_or("")))
        });
        // Decoded, a `%3A` in the name would move where the proxy splits
        // name from password: refused here rather than sending other
        // credentials than the URL's. SOCKS5 sends each with its length.
        let authorization = match (scheme, &credentials) {
            (ProxyScheme::Http, Some((user, password))) => {
                let header = basic_auth::header(user.as_bytes(), password.as_bytes());
                Some(header.ok_or(ProxyUrlError::Credentials)?)
            }
            _ => None,
        };
        Ok(ProxyUrl {
            scheme,
            host,
            port: url.port().unwrap_or(scheme.default_port()),
            credentials,
            authorization,
        })
    }

    /// The protocol to speak to the proxy.
    pub(crate) fn scheme(&self) -> ProxyScheme {
        self.scheme
    }

    /// The proxy host: a name, or an IP literal without brackets.
    pub(crate) fn host(&self) -> &str {
        &self.host
    }

    /// The proxy port (the scheme's default when the URL had none).
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// `host:port`, with an IPv6 host in brackets.
    pub(crate) fn authority(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }

    /// The percent-decoded `(user, password)` of the URL, if any.
    pub(crate) fn credentials(&self) -> Option<(&str, &str)> {
        self.credentials
            .as_ref()
            .map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// The `Proxy-Authorization` for an HTTP proxy, marked sensitive:
    /// `Basic …` (RFC 7617) from its credentials, or the one given to
    /// [`with_authorization`](Self::with_authorization); `None` for SOCKS
    /// (which authenticates in its own handshake) or without either.
    pub(crate) fn authorization(&self) -> Option<HeaderValue> {
        self.authorization.clone()
    }

    /// The proxy, its `Proxy-Authorization` `value` (marked sensitive) in
    /// place of the `Basic` one of its URL's credentials — for an HTTP
    /// proxy; a SOCKS one reads no header, and is left as it was.
    pub(crate) fn with_authorization(mut self, mut value: HeaderValue) -> ProxyUrl {
        if self.scheme == ProxyScheme::Http {
            value.set_sensitive(true);
            self.authorization = Some(value);
        }
        self
    }
}

impl fmt::Display for ProxyUrl {
    /// `scheme://[***@]host:port`: the credentials are never shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hidden = if self.credentials.is_some() {
            "***@"
        } else {
            ""
        };
        write!(f, "{}://{hidden}{}", self.scheme.as_str(), self.authority())
    }
}

impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProxyUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(s: &str) -> ProxyUrl {
        ProxyUrl::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn schemes_and_default_ports() {
        let p = parse("http://proxy.lan");
        assert_eq!(
            (p.scheme(), p.host(), p.port()),
            (ProxyScheme::Http, "proxy.lan", 80)
        );
        let p = parse("socks5://proxy.lan");
        assert_eq!((p.scheme(), p.port()), (ProxyScheme::Socks5, 1080));
        let p = parse("socks5h://proxy.lan");
        assert_eq!((p.scheme(), p.port()), (ProxyScheme::Socks5h, 1080));
        let p = parse("SOCKS5H://Proxy.Lan:1234/");
        assert_eq!(
            (p.scheme(), p.host(), p.port()),
            (ProxyScheme::Socks5h, "proxy.lan", 1234)
        );
        assert_eq!(parse("HTTP://h:8080").port(), 8080);
        assert_eq!(
            parse("http://h:").port(),
            80,
            "an empty port is the default"
        );
        assert_eq!(parse("http://h:0").port(), 0);
        assert_eq!(parse("http://h:65535").port(), 65535);
        assert_eq!(parse("http://h:0080").port(), 80);
        assert_eq!(parse("socks5://127.0.0.1:9050").host(), "127.0.0.1");
    }

    #[test]
    fn no_scheme_means_http() {
        let p = parse("proxy.lan:3128");
        assert_eq!(
            (p.scheme(), p.host(), p.port()),
            (ProxyScheme::Http, "proxy.lan", 3128)
        );
        let p = parse("  proxy.lan  ");
        assert_eq!((p.scheme(), p.port()), (ProxyScheme::Http, 80));
        let p = parse("u:p@127.0.0.1:8887");
        assert_eq!(p.credentials(), Some(("u", "p")));
        assert_eq!(p.host(), "127.0.0.1");
        assert_eq!(parse("[::1]:3128").host(), "::1");
    }

    #[test]
    fn credentials_are_percent_decoded() {
        let p = parse("http://us%40er:p%3Ass@host:1/");
        assert_eq!(p.credentials(), Some(("us@er", "p:ss")));
        assert_eq!(
            p.authorization().unwrap(),
            basic_auth::header(b"us@er", b"p:ss").unwrap()
        );
        assert!(p.authorization().unwrap().is_sensitive());
        let p = parse("socks5://alice:s3cret@host");
        assert_eq!(p.credentials(), Some(("alice", "s3cret")));
        assert_eq!(
            p.authorization(),
            None,
            "SOCKS authenticates in its handshake"
        );
        assert_eq!(parse("http://host").credentials(), None);
        assert_eq!(parse("http://user@host").credentials(), Some(("user", "")));
        assert_eq!(parse("http://:pw@host").credentials(), Some(("", "pw")));
        assert_eq!(
            parse("http://%FF:x@host").credentials(),
            Some(("\u{FFFD}", "x"))
        );
    }

    /// RFC 7617 §2: a user-id with a `:` is invalid (the proxy takes the
    /// first `:` for the end of the name), and neither part may hold a
    /// control character. An `http://` proxy URL whose decoded userinfo
    /// breaks either rule is refused, rather than sending other
    /// credentials than it says; SOCKS5 (RFC 1929) sends each part with its
    /// length, and takes any byte.
    #[test]
    fn http_proxy_credentials_unusable_as_basic_are_refused() {
        for input in [
            "http://u%3Ax:p@h:1",
            "u%3A@h:1",
            "http://u%0D%0A:p@h",
            "http://u:p%00@h",
            "http://u:p%0D%0AX-Injected:%20y@h",
            "http://u:%7F@h",
        ] {
            assert_eq!(
                ProxyUrl::parse(input),
                Err(ProxyUrlError::Credentials),
                "{input:?}"
            );
        }
        assert_eq!(
            parse("socks5://u%3Ax:p%0D@h").credentials(),
            Some(("u:x", "p\r"))
        );
        assert_eq!(
            parse("http://u:x%3Ay@h").authorization().unwrap(),
            basic_auth::header(b"u", b"x:y").unwrap()
        );
    }

    /// A SOCKS proxy's host (opaque to the URL standard) is read as an
    /// HTTP proxy's is: the same host, whatever its spelling — not a name
    /// with `%` in it for the resolver, nor an address spelled `127.1`
    /// that the resolver is asked for.
    #[test]
    fn socks_hosts_are_read_as_http_hosts_are() {
        for (written, host) in [
            ("Proxy.LAN", "proxy.lan"),
            ("127.1", "127.0.0.1"),
            ("0x7f.0.0.1", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("my%2Dproxy", "my-proxy"),
            ("b%C3%BCcher.example", "xn--bcher-kva.example"),
            ("bücher.example", "xn--bcher-kva.example"),
            ("[0:0::1]", "::1"),
        ] {
            for scheme in ["http", "socks5", "socks5h"] {
                let url = format!("{scheme}://{written}:1");
                assert_eq!(parse(&url).host(), host, "{url}");
            }
        }
        // What an HTTP proxy's host may not be, a SOCKS proxy's may not be.
        for written in ["xn--a", "a%00b", "1.2.3.256"] {
            for scheme in ["http", "socks5", "socks5h"] {
                let url = format!("{scheme}://{written}:1");
                assert!(ProxyUrl::parse(&url).is_err(), "{url}");
            }
        }
    }

    #[test]
    fn ipv6_hosts() {
        let p = parse("http://[2001:db8::1]:8080");
        assert_eq!(p.host(), "2001:db8::1");
        assert_eq!(p.authority(), "[2001:db8::1]:8080");
        assert_eq!(parse("socks5://[::1]").authority(), "[::1]:1080");
        assert_eq!(parse("http://[0:0::1]").host(), "::1");
    }

    #[test]
    fn path_query_fragment_are_ignored() {
        let p = parse("http://h:1/some/path?q=1#frag");
        assert_eq!((p.host(), p.port()), ("h", 1));
    }

    #[test]
    fn errors() {
        use ProxyUrlError::*;
        assert_eq!(ProxyUrl::parse(""), Err(Empty));
        assert_eq!(ProxyUrl::parse("   "), Err(Empty));
        for (input, scheme) in [
            ("https://proxy.lan", "https"),
            ("socks4://proxy.lan", "socks4"),
            ("SOCKS4A://proxy.lan", "socks4a"),
            ("ftp://proxy.lan", "ftp"),
        ] {
            assert_eq!(
                ProxyUrl::parse(input),
                Err(UnsupportedScheme(scheme.into())),
                "{input}"
            );
        }
        for input in [
            "http://h:99999",
            "http://h:-1",
            "http://h:abc",
            "http://[fe80::1%25eth0]:1",
            "http://[v1.x]",
            "http://[::1]x",
            "http://",
            "http:// h",
            "http://:8080",
            "http://u:p@",
            "socks5://",
            "socks5://:1080",
            "://h",
        ] {
            assert!(ProxyUrl::parse(input).is_err(), "{input:?}");
        }
    }

    #[test]
    fn nothing_shows_the_password() {
        let p = parse("http://user:hunter2@h:1");
        assert_eq!(p.to_string(), "http://***@h:1");
        assert!(!format!("{p:?}").contains("hunter2"));
        assert_eq!(parse("socks5h://[::1]:9").to_string(), "socks5h://[::1]:9");
        for bad in [
            "http://user:hunter2@h:99999",
            "https://user:hunter2@h",
            "http://user:hunter2@[::1",
        ] {
            let err = ProxyUrl::parse(bad).unwrap_err();
            assert!(!err.to_string().contains("hunter2"), "{err}");
            assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
        }
    }

    proptest! {
        #[test]
        fn garbage_never_panics(s in "\\PC{0,64}") {
            if let Ok(p) = ProxyUrl::parse(&s) {
                prop_assert!(!p.host().is_empty());
                let _ = p.to_string();
            }
        }

        #[test]
        fn host_port_round_trip(host in "[a-z][a-z0-9-]{0,20}(\\.[a-z]{2,5})?", port: u16,
                                scheme in prop_oneof![Just("http"), Just("socks5"), Just("socks5h")]) {
            // `xn--` begins an encoded international name: random letters
            // after it are not one, and are rightly refused.
            prop_assume!(!host.starts_with("xn--"));
            let p = parse(&format!("{scheme}://{host}:{port}"));
            prop_assert_eq!(p.host(), host.as_str());
            prop_assert_eq!(p.port(), port);
            prop_assert_eq!(p.scheme().as_str(), scheme);
            prop_assert_eq!(parse(&p.to_string()), p);
        }
    }
}
