//! [`Route`]: how a connection reaches its origin — straight, through an
//! HTTP proxy that forwards requests in absolute form, or through a tunnel
//! (`CONNECT` or SOCKS5) — and so what it can carry: the pool keys
//! connections by route.

use super::proxy::{ProxyScheme, ProxyUrl};
use super::{Origin, Scheme};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// How a connection reaches its origin. Two requests may share a
/// connection exactly when their routes are equal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// A connection to the origin itself.
    Direct(Origin),
    /// A connection to an HTTP proxy that takes plain-HTTP requests in
    /// absolute form, for any origin: one such connection serves them all.
    Forward(Arc<ProxyUrl>),
    /// A tunnel through a proxy to one origin: `CONNECT` through an HTTP
    /// proxy (for `https://`), or SOCKS5 (for both schemes). For
    /// `https://` the TLS handshake is with the origin, inside it.
    Tunnel {
        /// The proxy.
        proxy: Arc<ProxyUrl>,
        /// Where the tunnel goes.
        origin: Origin,
    },
}

impl Route {
    /// The route of a request to `origin` through `proxy`, if any.
    pub(crate) fn new(origin: &Origin, proxy: Option<&Arc<ProxyUrl>>) -> Route {
        match proxy {
            None => Route::Direct(origin.clone()),
            Some(proxy) if proxy.scheme() == ProxyScheme::Http && origin.scheme == Scheme::Http => {
                Route::Forward(proxy.clone())
            }
            Some(proxy) => Route::Tunnel {
                proxy: proxy.clone(),
                origin: origin.clone(),
            },
        }
    }

    /// The host and port the TCP connection goes to: the origin's, or the
    /// proxy's.
    pub(crate) fn first_hop(&self) -> (&str, u16) {
        match self {
            Route::Direct(origin) => (&origin.host, origin.port),
            Route::Forward(proxy) | Route::Tunnel { proxy, .. } => (proxy.host(), proxy.port()),
        }
    }

    /// The proxy, if the route goes through one.
    pub(crate) fn proxy(&self) -> Option<&ProxyUrl> {
        match self {
            Route::Direct(_) => None,
            Route::Forward(proxy) | Route::Tunnel { proxy, .. } => Some(proxy),
        }
    }

    /// The origin TLS is made with over the connection: an `https://`
    /// origin, reached straight or through a tunnel.
    pub(crate) fn tls_origin(&self) -> Option<&Origin> {
        match self {
            Route::Direct(origin) | Route::Tunnel { origin, .. } => {
                (origin.scheme == Scheme::Https).then_some(origin)
            }
            Route::Forward(_) => None,
        }
    }

    /// Whether requests go in absolute form, to a proxy that forwards them.
    pub(crate) fn forwards(&self) -> bool {
        matches!(self, Route::Forward(_))
    }
}

/// A route hashes as the host and port it leads to — the origin's, or a
/// forwarding proxy's — not every field: equal routes lead to the same
/// place, and two writes to the hasher where deriving made five (the
/// variant, the scheme, the host and its end, the port) cost half as
/// much. The pool hashes a request's route twice (to find a connection,
/// then to give it back), some 730 instructions a request with five.
impl Hash for Route {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let (host, port) = match self {
            Route::Direct(origin) | Route::Tunnel { origin, .. } => (&*origin.host, origin.port),
            Route::Forward(proxy) => (proxy.host(), proxy.port()),
        };
        state.write(host.as_bytes());
        state.write_u16(port);
    }
}

impl fmt::Display for Route {
    /// What a connection on it is for, as a message names it: the origin,
    /// or the proxy (without its credentials).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Direct(origin) => write!(f, "{origin}"),
            Route::Forward(proxy) => write!(f, "proxy {proxy}"),
            Route::Tunnel { proxy, origin } => write!(f, "{origin} via proxy {proxy}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(uri: &str) -> Origin {
        Origin::of(&uri.parse().unwrap()).unwrap()
    }

    /// Equal routes hash alike (as a key must), and routes that hash
    /// alike but differ (the same host and port by another scheme or
    /// proxy) stay apart as keys.
    #[test]
    fn routes_hash_by_where_they_lead_and_stay_apart_as_keys() {
        use std::hash::BuildHasher;
        let http = Arc::new(ProxyUrl::parse("http://u:p@proxy:3128").unwrap());
        let other = Arc::new(ProxyUrl::parse("http://proxy:3128").unwrap());
        let socks = Arc::new(ProxyUrl::parse("socks5h://socks").unwrap());
        let mut routes = Vec::new();
        for uri in [
            "http://a.example:443/",
            "https://a.example/",
            "http://b.example/",
        ] {
            for proxy in [None, Some(&http), Some(&other), Some(&socks)] {
                routes.push(Route::new(&origin(uri), proxy));
            }
        }
        let hasher = std::collections::hash_map::RandomState::new();
        let mut keyed = std::collections::HashMap::new();
        for (i, route) in routes.iter().enumerate() {
            for again in &routes {
                if route == again {
                    assert_eq!(hasher.hash_one(route), hasher.hash_one(again), "{route}");
                }
            }
            keyed.entry(route.clone()).or_insert(i);
        }
        for (i, route) in routes.iter().enumerate() {
            let first = routes.iter().position(|r| r == route).unwrap();
            assert_eq!(keyed[route], first, "{route} ({i})");
        }
        // Where they lead: a tunnel hashes as its origin does direct, a
        // forwarded request as its proxy.
        let secure = origin("https://a.example/");
        let tunnel = Route::new(&secure, Some(&socks));
        assert!(matches!(tunnel, Route::Tunnel { .. }), "{tunnel}");
        assert_eq!(
            hasher.hash_one(&tunnel),
            hasher.hash_one(Route::Direct(secure.clone()))
        );
        let forward = Route::new(&origin("http://b.example/"), Some(&http));
        assert_eq!(
            hasher.hash_one(&forward),
            hasher.hash_one(Route::Direct(origin("http://proxy:3128/")))
        );
        // Distinct: three origins direct, tunnelled through socks and
        // through the http proxies (https only, two proxies), forwarded
        // by the two http proxies (plain http, one connection each).
        assert_eq!(keyed.len(), 3 + 3 + 2 + 2, "{keyed:?}");
    }

    #[test]
    fn http_proxies_forward_plain_requests_and_tunnel_the_rest() {
        let http = Arc::new(ProxyUrl::parse("http://u:p@proxy:3128").unwrap());
        let socks = Arc::new(ProxyUrl::parse("socks5h://socks").unwrap());
        let plain = origin("http://a.example/");
        let secure = origin("https://a.example/");
        assert_eq!(Route::new(&plain, None), Route::Direct(plain.clone()));
        let forward = Route::new(&plain, Some(&http));
        assert!(forward.forwards());
        assert_eq!(forward.first_hop(), ("proxy", 3128));
        assert_eq!(forward.tls_origin(), None);
        // One forwarding connection serves every plain origin.
        assert_eq!(
            forward,
            Route::new(&origin("http://b.example:81/"), Some(&http))
        );
        assert_eq!(forward.to_string(), "proxy http://***@proxy:3128");
        let tunnel = Route::new(&secure, Some(&http));
        assert!(!tunnel.forwards());
        assert_eq!(tunnel.tls_origin(), Some(&secure));
        assert_ne!(
            tunnel,
            Route::new(&origin("https://b.example/"), Some(&http))
        );
        let through_socks = Route::new(&plain, Some(&socks));
        assert!(matches!(through_socks, Route::Tunnel { .. }));
        assert_eq!(through_socks.first_hop(), ("socks", 1080));
        assert_eq!(through_socks.tls_origin(), None);
        assert_eq!(
            through_socks.to_string(),
            "a.example:80 via proxy socks5h://socks:1080"
        );
    }
}
