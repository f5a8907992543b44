//! Proxy settings from environment variables, read through a lookup
//! function so tests (and embedders) can supply any environment.
//!
//! # Variables and precedence
//!
//! | setting    | variables, first set wins      |
//! |------------|--------------------------------|
//! | `http`     | `http_proxy`, `HTTP_PROXY`\*   |
//! | `https`    | `https_proxy`, `HTTPS_PROXY`   |
//! | `all`      | `all_proxy`, `ALL_PROXY`       |
//! | `no_proxy` | `no_proxy`, `NO_PROXY`         |
//!
//! \* **httpoxy**: when `REQUEST_METHOD` is set (to anything) the process is
//! probably a CGI script, where a request's `Proxy:` header arrives as
//! `HTTP_PROXY`; uppercase `HTTP_PROXY` is then ignored (and reported as
//! [`EnvError::IgnoredInCgi`]), while lowercase `http_proxy` is still
//! honoured — unless it holds what `HTTP_PROXY` holds: where variable names
//! ignore case (Windows) the two names are one variable, the request's
//! header, and a value set under both is not told apart from it.
//!
//! * "Set" means present and not blank: an empty value falls through to the
//!   next variable. A value that is not Unicode is set too: it is read with
//!   U+FFFD for what is not UTF-8 (as percent-decoded credentials are), so
//!   a proxy host so spelt is no host, and the requests the variable would
//!   take fail (below); `REQUEST_METHOD` so set makes a CGI program.
//! * Once a variable is chosen its value is used or reported; an invalid
//!   lowercase value does **not** fall back to the uppercase one.
//! * Values are parsed by [`ProxyUrl::parse`] (no scheme means `http://`;
//!   `http`, `socks5`, `socks5h` accepted) and [`NoProxy::parse`].
//! * An invalid value is that setting still, as an [`InvalidVariable`]
//!   naming the variable; the other settings are unaffected.
//!   [`ProxySettings`](super::ProxySettings) fails the requests that
//!   setting would take: it does not send them straight to the origin,
//!   nor through `all`.
//!
//! # Selection
//!
//! [`ProxySettings`](super::ProxySettings) checks `no_proxy` first (a
//! match means "connect directly"), then the target scheme's own setting
//! (`http` for `http`, `https` for `https`), then `all`.
//!
//! # Where curl and reqwest differ, and what this follows
//!
//! * **Case precedence**: curl prefers the lowercase name; reqwest (through
//!   hyper-util) checks the uppercase name first. This follows curl
//!   (lowercase wins), as the project asked.
//! * **CGI**: curl never reads uppercase `HTTP_PROXY` at all (only
//!   `http_proxy`); reqwest/hyper-util ignore *all* proxy variables when
//!   `REQUEST_METHOD` is set. This ignores exactly `HTTP_PROXY` under CGI
//!   (Go's `httpproxy` rule), which is what the project asked for.
//! * **Default port** for `http://` proxies without one: 80 (reqwest), not
//!   curl's 1080 — see [`super::url`].
//! * **NO_PROXY details** (ports, dots, `*`): see [`super::no_proxy`].
//! * **Errors**: reqwest silently ignores values it cannot parse (the
//!   request goes straight, past a proxy that may be the only way out
//!   allowed); curl fails the transfer. This follows curl: the requests
//!   such a value would take fail, naming the variable.

use super::no_proxy::NoProxy;
use super::url::ProxyUrl;
use crate::error::ProxyUrlError;

/// A variable set and not used, as reported: an `HTTP_PROXY` ignored under
/// CGI. (A value that is not a proxy URL is no such report: it is its
/// setting still, an [`InvalidVariable`], which fails the requests it
/// would take and is the one record of it.)
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EnvError {
    /// `HTTP_PROXY` was set in a CGI environment (`REQUEST_METHOD` set) and
    /// was ignored (httpoxy).
    #[error("ignoring HTTP_PROXY because REQUEST_METHOD is set (CGI)")]
    IgnoredInCgi,
}

/// A variable set to a value that is not a usable proxy URL: its setting,
/// which fails the requests it would take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InvalidVariable {
    /// The variable's name, e.g. `"https_proxy"`.
    pub(crate) variable: &'static str,
    /// Why its value was rejected (never contains credentials).
    pub(crate) error: ProxyUrlError,
}

/// One proxy setting read from the environment: absent, a proxy, or a
/// value that is not one.
pub(crate) type Setting = Option<Result<ProxyUrl, InvalidVariable>>;

/// Proxy settings read from an environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct EnvProxies {
    /// For `http` (and `ws`) targets: `http_proxy` / `HTTP_PROXY`.
    pub(crate) http: Setting,
    /// For `https` (and `wss`) targets: `https_proxy` / `HTTPS_PROXY`.
    pub(crate) https: Setting,
    /// For any target without its own setting: `all_proxy` / `ALL_PROXY`.
    pub(crate) all: Setting,
    /// Hosts that bypass the proxies: `no_proxy` / `NO_PROXY`.
    pub(crate) no_proxy: Option<NoProxy>,
}

impl EnvProxies {
    /// Reads the settings through `lookup` (name → value, `None` if unset).
    ///
    /// Returns the settings and the problems found; see the
    /// [module docs](self) for the rules.
    pub(crate) fn from_lookup(
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> (EnvProxies, Vec<EnvError>) {
        let mut errors = Vec::new();
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let is_cgi = lookup("REQUEST_METHOD").is_some();

        let read_url = |names: &[&'static str]| -> Setting {
            let (variable, value) = names.iter().find_map(|&n| get(n).map(|v| (n, v)))?;
            Some(ProxyUrl::parse(&value).map_err(|error| InvalidVariable { variable, error }))
        };

        let http = if is_cgi {
            let header = get("HTTP_PROXY");
            if header.is_some() {
                errors.push(EnvError::IgnoredInCgi);
            }
            match header.is_some() && get("http_proxy") == header {
                true => None,
                false => read_url(&["http_proxy"]),
            }
        } else {
            read_url(&["http_proxy", "HTTP_PROXY"])
        };
        let https = read_url(&["https_proxy", "HTTPS_PROXY"]);
        let all = read_url(&["all_proxy", "ALL_PROXY"]);
        let no_proxy = get("no_proxy")
            .or_else(|| get("NO_PROXY"))
            .map(|v| NoProxy::parse(&v));

        (
            EnvProxies {
                http,
                https,
                all,
                no_proxy,
            },
            errors,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::url::ProxyScheme;
    use super::*;
    use std::collections::HashMap;

    fn read(vars: &[(&str, &str)]) -> (EnvProxies, Vec<EnvError>) {
        let env: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        EnvProxies::from_lookup(&move |k| env.get(k).cloned())
    }

    /// The host of the proxy a request to `scheme://host/` goes through.
    fn via(p: &EnvProxies, scheme: &str, host: &str) -> Option<String> {
        let uri = format!("{scheme}://{host}/").parse().unwrap();
        let origin = crate::net::Origin::of(&uri).unwrap();
        super::super::ProxySettings::of_env(p.clone())
            .for_origin(&origin)
            .unwrap()
            .map(|url| url.host().to_owned())
    }

    fn url(s: &str) -> Setting {
        Some(Ok(ProxyUrl::parse(s).unwrap()))
    }

    #[test]
    fn empty_environment() {
        let (p, errors) = read(&[]);
        assert_eq!(p, EnvProxies::default());
        assert!(errors.is_empty());
        assert_eq!(via(&p, "https", "example.com"), None);
    }

    #[test]
    fn reads_every_variable() {
        let (p, errors) = read(&[
            ("http_proxy", "http://h:1"),
            ("https_proxy", "socks5h://s:2"),
            ("all_proxy", "socks5://a"),
            ("no_proxy", "localhost,10.0.0.0/8"),
        ]);
        assert!(errors.is_empty());
        assert_eq!(p.http, url("http://h:1"));
        assert_eq!(p.https, url("socks5h://s:2"));
        assert_eq!(p.all, url("socks5://a:1080"));
        assert_eq!(p.no_proxy, Some(NoProxy::parse("localhost,10.0.0.0/8")));
        let (p, _) = read(&[
            ("HTTP_PROXY", "http://H:1"),
            ("HTTPS_PROXY", "http://S:2"),
            ("ALL_PROXY", "http://A:3"),
            ("NO_PROXY", "n.example"),
        ]);
        assert_eq!(p.http, url("http://H:1"));
        assert_eq!(p.https, url("http://S:2"));
        assert_eq!(p.all, url("http://A:3"));
        assert_eq!(p.no_proxy, Some(NoProxy::parse("n.example")));
    }

    #[test]
    fn lowercase_wins() {
        let (p, errors) = read(&[
            ("http_proxy", "http://lower:1"),
            ("HTTP_PROXY", "http://upper:1"),
            ("https_proxy", "http://lower:2"),
            ("HTTPS_PROXY", "http://upper:2"),
            ("all_proxy", "http://lower:3"),
            ("ALL_PROXY", "http://upper:3"),
            ("no_proxy", "lower.example"),
            ("NO_PROXY", "upper.example"),
        ]);
        assert!(errors.is_empty());
        assert_eq!(p.http.unwrap().unwrap().host(), "lower");
        assert_eq!(p.https.unwrap().unwrap().host(), "lower");
        assert_eq!(p.all.unwrap().unwrap().host(), "lower");
        let np = p.no_proxy.unwrap();
        assert!(np.matches("lower.example"));
        assert!(!np.matches("upper.example"));
    }

    #[test]
    fn blank_values_fall_through() {
        let (p, errors) = read(&[
            ("https_proxy", ""),
            ("HTTPS_PROXY", "http://upper:2"),
            ("all_proxy", "  "),
            ("no_proxy", ""),
            ("NO_PROXY", "x.example"),
        ]);
        assert!(errors.is_empty());
        assert_eq!(p.https.unwrap().unwrap().host(), "upper");
        assert_eq!(p.all, None);
        assert!(p.no_proxy.unwrap().matches("x.example"));
        let (p, _) = read(&[("no_proxy", " ")]);
        assert_eq!(p.no_proxy, None);
    }

    #[test]
    fn httpoxy_uppercase_http_proxy_ignored_under_cgi() {
        let (p, errors) = read(&[
            ("REQUEST_METHOD", "GET"),
            ("HTTP_PROXY", "http://attacker:1"),
        ]);
        assert_eq!(p.http, None);
        assert_eq!(errors, vec![EnvError::IgnoredInCgi]);
        assert_eq!(via(&p, "http", "example.com"), None);
        // Lowercase is still honoured; other uppercase variables too.
        let (p, errors) = read(&[
            ("REQUEST_METHOD", ""),
            ("HTTP_PROXY", "http://attacker:1"),
            ("http_proxy", "http://good:1"),
            ("HTTPS_PROXY", "http://s:2"),
        ]);
        assert_eq!(p.http.unwrap().unwrap().host(), "good");
        assert_eq!(p.https.unwrap().unwrap().host(), "s");
        assert_eq!(errors, vec![EnvError::IgnoredInCgi]);
        // ALL_PROXY still applies to http targets under CGI.
        let (p, _) = read(&[
            ("REQUEST_METHOD", "POST"),
            ("HTTP_PROXY", "http://attacker:1"),
            ("ALL_PROXY", "socks5://all"),
        ]);
        assert_eq!(via(&p, "http", "x").unwrap(), "all");
        // Without REQUEST_METHOD, HTTP_PROXY is used.
        let (p, errors) = read(&[("HTTP_PROXY", "http://h:1")]);
        assert_eq!(p.http.unwrap().unwrap().host(), "h");
        assert!(errors.is_empty());
    }

    #[test]
    fn httpoxy_where_variable_names_ignore_case() {
        // Windows: `http_proxy` reads the variable `HTTP_PROXY`, which in a
        // CGI program is the request's `Proxy:` header.
        let vars = [
            ("REQUEST_METHOD", "GET"),
            ("HTTP_PROXY", "http://attacker:1"),
        ];
        let any_case = |name: &str| {
            vars.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.to_string())
        };
        let (p, errors) = EnvProxies::from_lookup(&any_case);
        assert_eq!(p.http, None);
        assert_eq!(errors, vec![EnvError::IgnoredInCgi]);
        assert_eq!(via(&p, "http", "example.com"), None);
        // Outside CGI the same environment names the proxy.
        let (p, errors) = EnvProxies::from_lookup(&|name| match name {
            "REQUEST_METHOD" | "request_method" => None,
            name => any_case(name),
        });
        assert_eq!(p.http.unwrap().unwrap().host(), "attacker");
        assert!(errors.is_empty());
    }

    #[test]
    fn scheme_less_values_are_http() {
        let (p, _) = read(&[("https_proxy", "proxy.corp:3128")]);
        let https = p.https.unwrap().unwrap();
        assert_eq!(https.scheme(), ProxyScheme::Http);
        assert_eq!((https.host(), https.port()), ("proxy.corp", 3128));
    }

    #[test]
    fn invalid_values_are_reported_per_variable() {
        let (p, errors) = read(&[
            ("http_proxy", "https://tls-proxy:443"),
            ("HTTP_PROXY", "http://fallback:1"),
            ("HTTPS_PROXY", "http://h:99999"),
            ("all_proxy", "socks5://ok"),
        ]);
        // Each is its setting still, and no fallback to HTTP_PROXY.
        let invalid = |variable, error| Some(Err(InvalidVariable { variable, error }));
        assert_eq!(
            p.http,
            invalid(
                "http_proxy",
                ProxyUrlError::UnsupportedScheme("https".into())
            )
        );
        assert_eq!(
            p.https,
            invalid(
                "HTTPS_PROXY",
                ProxyUrlError::Invalid {
                    reason: "invalid port number".into()
                }
            )
        );
        assert_eq!(p.all.clone().unwrap().unwrap().host(), "ok");
        // The settings are their one record: nothing else reports them.
        assert!(errors.is_empty(), "{errors:?}");
        // An invalid scheme-specific value is not passed over for `all`:
        // the request it would take fails (see `ProxySettings::for_origin`),
        // naming the variable, its source saying why.
        let settings = super::super::ProxySettings::of_env(p.clone());
        let failure = |uri: &str| {
            let origin = crate::net::Origin::of(&uri.parse().unwrap()).unwrap();
            let error = settings.for_origin(&origin).unwrap_err();
            let source = std::error::Error::source(&error).map(ToString::to_string);
            (error.to_string(), source)
        };
        assert_eq!(
            failure("http://x/"),
            (
                "the proxy environment variable http_proxy is not a usable proxy URL".to_string(),
                Some(
                    "unsupported proxy scheme \"https\" (supported: http, socks5, socks5h)".into()
                )
            )
        );
        assert_eq!(
            failure("https://x/"),
            (
                "the proxy environment variable HTTPS_PROXY is not a usable proxy URL".to_string(),
                Some(
                    ProxyUrlError::Invalid {
                        reason: "invalid port number".into()
                    }
                    .to_string()
                )
            )
        );
    }

    #[test]
    fn credentials_from_env_are_decoded() {
        let (p, _) = read(&[("http_proxy", "http://us%40er:p%3Ass@host:1/")]);
        assert_eq!(
            p.http.unwrap().unwrap().credentials(),
            Some(("us@er", "p:ss"))
        );
    }

    #[test]
    fn for_scheme_order() {
        let (p, _) = read(&[
            ("http_proxy", "http://h"),
            ("https_proxy", "http://s"),
            ("all_proxy", "socks5h://a"),
            ("no_proxy", "internal.corp, 10.0.0.0/8, ::1"),
        ]);
        assert_eq!(via(&p, "http", "example.com").unwrap(), "h");
        assert_eq!(via(&p, "HTTP", "example.com").unwrap(), "h");
        assert_eq!(via(&p, "https", "example.com").unwrap(), "s");
        // no_proxy is checked first, for every scheme.
        for scheme in ["http", "https"] {
            assert_eq!(via(&p, scheme, "a.internal.corp"), None);
            assert_eq!(via(&p, scheme, "10.1.2.3"), None);
            assert_eq!(via(&p, scheme, "[::1]"), None);
        }
        // `all` fills in for a missing scheme setting.
        let (p, _) = read(&[("http_proxy", "http://h"), ("ALL_PROXY", "socks5://a")]);
        assert_eq!(via(&p, "https", "example.com").unwrap(), "a");
        // no_proxy "*" disables everything.
        let (p, _) = read(&[("all_proxy", "socks5://a"), ("NO_PROXY", "*")]);
        assert_eq!(via(&p, "https", "example.com"), None);
        assert_eq!(via(&p, "http", "127.0.0.1"), None);
    }

    #[test]
    fn lookup_is_the_only_source() {
        // Whatever the real environment holds, a lookup that returns nothing
        // gives nothing.
        let (p, errors) = EnvProxies::from_lookup(&|_| None);
        assert_eq!(p, EnvProxies::default());
        assert!(errors.is_empty());
    }
}
