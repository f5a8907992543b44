//! Proxies: which one a request goes through ([`ProxySettings`], from the
//! builder's [`Proxy`] list or the environment), and the sans-IO pieces of
//! talking to one. Nothing here opens a socket, blocks or reads a clock, so
//! all of it runs on a connection's loop.
//!
//! * [`url`] — proxy URLs (`http`, `socks5`, `socks5h`), credentials from
//!   their userinfo, `Proxy-Authorization: Basic`.
//! * [`no_proxy`] — the `NO_PROXY` host matcher.
//! * [`env`](mod@env) — `*_proxy` environment variables, read through a
//!   lookup function.
//! * [`connect`] — the HTTP `CONNECT` request and its answer.
//! * [`socks5`] — the SOCKS5 client handshake (RFC 1928, RFC 1929).

mod connect;
mod env;
mod no_proxy;
mod socks5;
mod url;

pub(crate) use connect::{connect_request, ConnectResponse, InvalidConnectHost};
pub(crate) use socks5::{Progress, Socks5Handshake, Target};
pub(crate) use url::{ProxyScheme, ProxyUrl};

use crate::error::{InvalidRequest, ProxyUrlError};
use crate::net::{Origin, Scheme};
use env::{EnvError, EnvProxies, InvalidVariable};
use no_proxy::NoProxy;
use std::sync::Arc;

/// A proxy for a client's requests, given to
/// [`ClientBuilder::proxy`](crate::ClientBuilder::proxy).
///
/// Its URL is `http://[user:password@]host[:port]` (an HTTP proxy: plain
/// requests go to it in absolute form, `https://` ones through a `CONNECT`
/// tunnel), `socks5://…` (SOCKS5, the client resolves the target's name,
/// and asks the proxy for its addresses one at a time, each on a new
/// connection, while the proxy answers that it cannot reach them) or
/// `socks5h://…` (SOCKS5, the proxy resolves it). A URL without a
/// scheme is an HTTP proxy; without a port, port 80 for `http` and 1080
/// for SOCKS. Credentials in the userinfo are percent-decoded and sent as
/// `Proxy-Authorization: Basic` to an HTTP proxy (a decoded user name with
/// a `:`, or a control character in either, is
/// [`ProxyUrlError::Credentials`]: RFC 7617 §2 makes them invalid), and
/// with RFC 1929 to a SOCKS5 one. A request's own `Proxy-Authorization`
/// goes to a proxy that forwards it, in place of the URL's; through a
/// tunnel (`CONNECT`, SOCKS5) no proxy reads the request, and it is not
/// sent: never to the origin behind a proxy. A request that goes straight
/// (no proxy takes it) sends it as given, as curl and reqwest do. In an
/// upload's trailers it fails the request, whatever the route (see
/// [`Upload::from_stream`](crate::Upload::from_stream)).
///
/// # Examples
///
/// ```no_run
/// use tickless_client::{Client, Proxy};
///
/// let client = Client::builder()
///     .proxy(Proxy::all("http://user:secret@proxy.lan:3128")?.no_proxy("localhost, 10.0.0.0/8"))
///     .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Through a forward proxy on loopback, which adds a `Via` header:
///
/// ```
/// # let origin = tickless_client::doc_support::serve_text("from the origin");
/// # let proxy_url = tickless_client::doc_support::forward_proxy();
/// use tickless_client::{Client, Proxy};
///
/// let client = Client::builder().proxy(Proxy::http(&proxy_url)?).build()?;
/// let response = client.get(&origin).send().wait()?;
/// assert_eq!(response.headers()["via"], "1.1 doc-proxy");
/// assert_eq!(response.text().wait()?, "from the origin");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proxy {
    url: Arc<ProxyUrl>,
    scope: Scope,
}

/// Which requests a proxy takes: those of its targets' scheme, less the
/// hosts it is bypassed for.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Scope {
    targets: Targets,
    bypass: Option<NoProxy>,
}

/// Which requests a [`Proxy`] is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Targets {
    Http,
    Https,
    All,
}

impl Proxy {
    /// A proxy for `http://` requests.
    pub fn http(url: &str) -> Result<Proxy, ProxyUrlError> {
        Proxy::new(url, Targets::Http)
    }

    /// A proxy for `https://` requests.
    pub fn https(url: &str) -> Result<Proxy, ProxyUrlError> {
        Proxy::new(url, Targets::Https)
    }

    /// A proxy for every request.
    pub fn all(url: &str) -> Result<Proxy, ProxyUrlError> {
        Proxy::new(url, Targets::All)
    }

    fn new(url: &str, targets: Targets) -> Result<Proxy, ProxyUrlError> {
        Ok(Proxy {
            url: Arc::new(ProxyUrl::parse(url)?),
            scope: Scope {
                targets,
                bypass: None,
            },
        })
    }

    /// Hosts that do not go through this proxy, in `NO_PROXY`'s syntax: a
    /// comma (or blank) separated list of host names (each matching
    /// itself and its subdomains; a leading `.` changes nothing), IP
    /// addresses and CIDR blocks (`10.0.0.0/8`, `fe80::/10`); or `*`
    /// alone: every host, IP literals too (as curl, a `*` among other
    /// entries is no wildcard). Names are never resolved to match an
    /// address, and entries with a port match nothing.
    pub fn no_proxy(mut self, hosts: &str) -> Proxy {
        self.scope.bypass = Some(NoProxy::parse(hosts));
        self
    }

    /// `value` as the `Proxy-Authorization` sent to this proxy — on its
    /// `CONNECT` and with each request it forwards — in place of the
    /// `Basic` one its URL's credentials make: a proxy that takes a token
    /// (`Bearer …`), or another scheme, as reqwest's `custom_http_auth`.
    /// Marked sensitive (never shown in `Debug`). For an HTTP proxy; a
    /// SOCKS5 one reads no header, and ignores it. A request's own
    /// `Proxy-Authorization` still goes in its place to a proxy that
    /// forwards the request.
    pub fn custom_http_auth(mut self, value: http::HeaderValue) -> Proxy {
        self.url = Arc::new((*self.url).clone().with_authorization(value));
        self
    }
}

impl Scope {
    /// Whether a request to `origin` goes through this proxy.
    fn serves(&self, origin: &Origin) -> bool {
        let scheme = match self.targets {
            Targets::Http => origin.scheme == Scheme::Http,
            Targets::Https => origin.scheme == Scheme::Https,
            Targets::All => true,
        };
        scheme
            && !self
                .bypass
                .as_ref()
                .is_some_and(|b| b.matches(&origin.host))
    }
}

/// Where a client's requests go through, settled when it is built: the
/// first rule that serves a request takes it, and none serving it means
/// straight to the origin.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProxySettings(Vec<Rule>);

/// One proxy of the settings, or a proxy environment variable whose value
/// is not a proxy URL: the requests it would take fail rather than go
/// straight to their origin (see [`ProxySettings::for_origin`]).
#[derive(Clone, Debug)]
struct Rule {
    scope: Scope,
    proxy: Result<Arc<ProxyUrl>, InvalidVariable>,
}

impl ProxySettings {
    /// The proxies of the builder.
    pub(crate) fn listed(proxies: Vec<Proxy>) -> ProxySettings {
        ProxySettings(
            proxies
                .into_iter()
                .map(|proxy| Rule {
                    scope: proxy.scope,
                    proxy: Ok(proxy.url),
                })
                .collect(),
        )
    }

    /// The proxies that the environment variables `lookup` reads name (see
    /// [`env`](mod@env)). A value that does not parse is kept as such: the
    /// requests it would have sent through a proxy fail, naming the
    /// variable, as curl's do — a proxy the user set may be the only way
    /// out allowed, and going straight would pass it by. (reqwest drops
    /// the setting instead.) `HTTP_PROXY` in a CGI program is no setting at
    /// all (httpoxy): it is told as a `tracing` warning (with the feature
    /// `tracing`), once for each client built, since a proxy the user set
    /// and the client passes by is otherwise silent.
    pub(crate) fn from_env(lookup: &dyn Fn(&str) -> Option<String>) -> ProxySettings {
        let (env, reported) = EnvProxies::from_lookup(lookup);
        // Built once per client, on the thread that builds it: each report
        // is told once for the client, not per request.
        for report in &reported {
            tell(report);
        }
        ProxySettings::of_env(env)
    }

    /// `http_proxy` for `http://` requests, `https_proxy` for `https://`
    /// ones, `all_proxy` for those without their own; `no_proxy` before
    /// each of them.
    fn of_env(env: EnvProxies) -> ProxySettings {
        let settings = [
            (env.http, Targets::Http),
            (env.https, Targets::Https),
            (env.all, Targets::All),
        ];
        ProxySettings(
            settings
                .into_iter()
                .filter_map(|(setting, targets)| {
                    Some(Rule {
                        scope: Scope {
                            targets,
                            bypass: env.no_proxy.clone(),
                        },
                        proxy: setting?.map(Arc::new),
                    })
                })
                .collect(),
        )
    }

    /// The proxy a request to `origin` goes through, if any; an error if
    /// the setting that would take it is an environment variable whose
    /// value is not a proxy URL.
    pub(crate) fn for_origin(
        &self,
        origin: &Origin,
    ) -> Result<Option<&Arc<ProxyUrl>>, InvalidRequest> {
        let Some(rule) = self.0.iter().find(|rule| rule.scope.serves(origin)) else {
            return Ok(None);
        };
        match &rule.proxy {
            Ok(proxy) => Ok(Some(proxy)),
            Err(invalid) => Err(InvalidRequest::ProxyVariable {
                variable: invalid.variable.to_owned(),
                source: invalid.error.clone(),
            }),
        }
    }
}

/// Tells of a variable the environment set and the client does not use.
/// Its message names the variable, never its value (which may hold
/// credentials).
#[cfg(feature = "tracing")]
fn tell(report: &EnvError) {
    tracing::warn!(%report, "proxy environment variable ignored");
}

/// Without `tracing` there is no one to tell.
#[cfg(not(feature = "tracing"))]
fn tell(_report: &EnvError) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(uri: &str) -> Origin {
        Origin::of(&uri.parse().unwrap()).unwrap()
    }

    fn chosen(settings: &ProxySettings, uri: &str) -> Option<String> {
        settings
            .for_origin(&origin(uri))
            .unwrap()
            .map(|p| p.to_string())
    }

    #[test]
    fn the_first_listed_proxy_that_serves_the_request_wins() {
        let settings = ProxySettings::listed(vec![
            Proxy::http("http://plain:1").unwrap(),
            Proxy::https("socks5h://secure:2").unwrap(),
            Proxy::all("http://other:3")
                .unwrap()
                .no_proxy("localhost, 10.0.0.0/8"),
        ]);
        assert_eq!(
            chosen(&settings, "http://a.example/").unwrap(),
            "http://plain:1"
        );
        assert_eq!(
            chosen(&settings, "https://a.example/").unwrap(),
            "socks5h://secure:2"
        );
        let only_all = ProxySettings::listed(vec![Proxy::all("http://other:3")
            .unwrap()
            .no_proxy("localhost, 10.0.0.0/8")]);
        assert_eq!(chosen(&only_all, "https://x/").unwrap(), "http://other:3");
        assert_eq!(chosen(&only_all, "http://LOCALHOST:8080/"), None);
        assert_eq!(chosen(&only_all, "http://api.localhost/"), None);
        assert_eq!(chosen(&only_all, "http://10.1.2.3/"), None);
        assert_eq!(
            chosen(&only_all, "http://11.1.2.3/").unwrap(),
            "http://other:3"
        );
        assert_eq!(
            chosen(&ProxySettings::listed(Vec::new()), "http://x/"),
            None
        );
    }

    #[test]
    fn the_environment_is_read_through_its_lookup() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            ProxySettings::from_env(&move |name| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            })
        };
        let settings = env(&[
            ("http_proxy", "proxy:3128"),
            ("no_proxy", "[::1], .internal"),
        ]);
        assert_eq!(chosen(&settings, "http://a/").unwrap(), "http://proxy:3128");
        assert_eq!(chosen(&settings, "https://a/"), None);
        assert_eq!(chosen(&settings, "http://[::1]:8080/"), None);
        assert_eq!(chosen(&settings, "http://b.internal/"), None);
        let cgi = env(&[("REQUEST_METHOD", "GET"), ("HTTP_PROXY", "http://attacker")]);
        assert_eq!(chosen(&cgi, "http://a/"), None);
    }

    /// A variable set to what is not a proxy URL fails the requests it
    /// would take, naming itself, rather than send them straight: not
    /// those it does not take (another scheme's, or a host `no_proxy`
    /// lets go straight), and `all_proxy` does not fill in for it.
    #[test]
    fn an_unusable_variable_fails_the_requests_it_would_take() {
        let settings = ProxySettings::from_env(&|name| match name {
            "HTTPS_PROXY" => Some("http://[bad".into()),
            "http_proxy" => Some("ftp://x".into()),
            "all_proxy" => Some("socks5h://all:1".into()),
            "no_proxy" => Some("direct.example".into()),
            _ => None,
        });
        let failure = |uri| settings.for_origin(&origin(uri)).unwrap_err();
        let https = failure("https://a.example/");
        assert!(
            matches!(
                &https,
                InvalidRequest::ProxyVariable {
                    variable,
                    source: ProxyUrlError::Invalid { .. },
                } if variable == "HTTPS_PROXY"
            ),
            "{https:?}"
        );
        assert_eq!(
            https.to_string(),
            "the proxy environment variable HTTPS_PROXY is not a usable proxy URL"
        );
        assert!(matches!(
            failure("http://a.example/"),
            InvalidRequest::ProxyVariable {
                variable,
                source: ProxyUrlError::UnsupportedScheme(_),
            } if variable == "http_proxy"
        ));
        assert_eq!(chosen(&settings, "https://direct.example/"), None);
        assert_eq!(chosen(&settings, "http://sub.direct.example/"), None);
    }
}
