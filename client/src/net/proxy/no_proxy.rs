//! The `NO_PROXY` matcher: which hosts bypass the proxy. CIDR blocks are
//! the `ipnet` crate's.
//!
//! # Rules
//!
//! A list that is `*` alone (blanks around it aside) matches every host.
//! Any other list [`NoProxy::parse`] splits at commas and ASCII whitespace,
//! ignoring empty entries. Each entry is one of:
//!
//! * An IP address (`10.1.2.3`, `::1`, `[::1]`) — matches that address
//!   exactly.
//! * A CIDR block (`10.0.0.0/8`, `::1/128`, `fe80::/10`, `[fe80::]/10`) —
//!   matches addresses inside it; host bits in the entry are ignored
//!   (`10.42.1.1/24` is `10.42.1.0/24`). IPv4 and IPv6 never match each other
//!   (`::ffff:10.0.0.1` is not in `10.0.0.0/8`).
//! * A domain name — matches that host and its subdomains, case-insensitively:
//!   `example.com` matches `example.com` and `a.example.com`, not
//!   `badexample.com`. A leading `.` changes nothing: `.example.com` also
//!   matches `example.com` itself. One trailing `.` is ignored on both sides.
//!   An entry that is not ASCII, or is percent-encoded, is read as a URL's
//!   host is (`bücher.test` is `xn--bcher-kva.test`): the form the
//!   client's hosts are in.
//!
//! [`NoProxy::matches`] takes an origin's host (IPv6 may be bracketed),
//! a name in that ASCII form. An IP literal host is only compared with IP and CIDR entries,
//! a name only with domain entries: nothing is resolved. The client gives
//! it the origin's host ([`Origin`](crate::net::Origin)), where an IPv4
//! address the system would read from another spelling (`127.1`,
//! `2130706433`) is already in dotted-decimal form.
//!
//! # Where curl and reqwest differ, and what this follows
//!
//! * **Leading dot**: curl (it strips one leading dot) and reqwest
//!   (hyper-util's `NoProxy`) agree that `.example.com` matches
//!   `example.com` too; so does this.
//! * **Ports** (`example.com:8080`, `10.0.0.1:80`, `[::1]:8080`): neither
//!   curl nor reqwest understands them; in reqwest such an entry is kept as a
//!   domain that can never equal a host, so it never matches. This follows
//!   reqwest: an entry with a port is dropped and matches nothing (it does
//!   not bypass the proxy on any port). Go's `httpproxy` is the odd one out
//!   with port-specific entries.
//! * **Wildcards**: `*` is one only as the whole list, as curl's (and
//!   its documentation's "a single * character"; curl takes `" * "` for
//!   no wildcard, this for one, its blanks being separators); among
//!   other entries (`foo, *`) it is a name like any other, that matches
//!   a host `*` alone — reqwest takes a `*` anywhere in the list for
//!   every host, which would send straight to the origin what a list
//!   written for curl keeps on the proxy. `*.example.com` is a literal
//!   that matches nothing (both).
//! * **`*` and IP hosts**: curl's `*` matches every host; reqwest only
//!   checks `*` among domain entries, so `*` fails to match IP literal
//!   hosts there. This follows curl (and the documented intent of both).
//! * **Separators**: reqwest splits only at commas (and trims); curl skips
//!   blanks around commas. This also splits at whitespace, so
//!   `"a.com b.com"` is two entries (in reqwest it is one entry that never
//!   matches).
//! * **Trailing dots** (`example.com.`): curl ignores one on the host and on
//!   entries, reqwest compares them literally; this follows curl, so an
//!   absolute name still bypasses the proxy.
//! * **Bracketed IPv6 entries** (`[::1]`): curl documents entries without
//!   brackets and reqwest treats `[::1]` as a domain that never matches; this
//!   accepts both forms.
//! * **Empty host**: matches nothing, not even `*` (as curl).
//! * Entries that are neither valid addresses/CIDR blocks nor plausible
//!   names (a bad prefix length, an unclosed bracket) are dropped, which is
//!   what both effectively do.

use ipnet::IpNet;
use std::net::IpAddr;

/// A parsed `NO_PROXY` list. See the [module documentation](self).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct NoProxy {
    /// The list was `*` alone.
    all: bool,
    /// IP and CIDR entries (an exact address has the full prefix length).
    nets: Vec<IpNet>,
    /// Domain entries: lowercase, without leading or trailing dot.
    domains: Vec<String>,
}

/// What one list entry turned out to be.
enum Entry {
    Net(IpNet),
    Domain(String),
}

impl NoProxy {
    /// Parses a `NO_PROXY` value. Never fails: entries that cannot match
    /// anything are dropped (see the [module documentation](self)).
    pub(crate) fn parse(list: &str) -> NoProxy {
        let mut no_proxy = NoProxy::default();
        if list.trim_matches(|c: char| c.is_ascii_whitespace()) == "*" {
            no_proxy.all = true;
            return no_proxy;
        }
        let entries = list
            .split(|c: char| c == ',' || c.is_ascii_whitespace())
            .filter(|e| !e.is_empty());
        for entry in entries {
            match parse_entry(entry) {
                Some(Entry::Net(net)) => no_proxy.nets.push(net),
                Some(Entry::Domain(d)) => no_proxy.domains.push(d),
                None => {}
            }
        }
        no_proxy
    }

    /// Whether requests to `host` should bypass the proxy. `host` is an
    /// origin's host (`Origin::host`), without port: a name in the ASCII
    /// form a URL's host is read in — the form the entries are kept in —
    /// or an address; an IPv6 literal may be bracketed.
    pub(crate) fn matches(&self, host: &str) -> bool {
        if host.is_empty() {
            return false;
        }
        if self.all {
            return true;
        }
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return self.nets.iter().any(|net| net.contains(&ip));
        }
        if bare.len() != host.len() {
            // Bracketed but not an address (e.g. an IPv6 zone id).
            return false;
        }
        let name = host.strip_suffix('.').unwrap_or(host).as_bytes();
        self.domains
            .iter()
            .any(|d| domain_matches(name, d.as_bytes()))
    }

    /// Whether the list has no usable entries (matches nothing).
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        !self.all && self.nets.is_empty() && self.domains.is_empty()
    }
}

/// `name` equals `domain` or ends with `.domain`, ignoring ASCII case.
fn domain_matches(name: &[u8], domain: &[u8]) -> bool {
    match name.len().checked_sub(domain.len()) {
        Some(0) => name.eq_ignore_ascii_case(domain),
        Some(start) => name[start - 1] == b'.' && name[start..].eq_ignore_ascii_case(domain),
        None => false,
    }
}

/// Classifies one non-empty entry; `None` for entries that match nothing.
fn parse_entry(entry: &str) -> Option<Entry> {
    // Bracketed IPv6: "[addr]", "[addr]/len", "[addr/len]"; "[addr]:port"
    // has a port and is dropped.
    if let Some(inner) = entry.strip_prefix('[') {
        let (inside, after) = inner.split_once(']')?;
        let parsed = if after.is_empty() {
            parse_net(inside)
        } else if after.starts_with('/') && !inside.contains('/') {
            parse_net(&format!("{inside}{after}"))
        } else {
            // "[addr]:port" (a port: dropped, as reqwest) or junk.
            None
        };
        return parsed
            .filter(|net| matches!(net, IpNet::V6(_)))
            .map(Entry::Net);
    }
    if let Some(net) = parse_net(entry) {
        return Some(Entry::Net(net));
    }
    if entry.contains(['/', ':']) {
        // A bad block, or "host:port" / "v4:port": never matches (as reqwest).
        return None;
    }
    let domain = entry.strip_suffix('.').unwrap_or(entry);
    let domain = domain.strip_prefix('.').unwrap_or(domain);
    if domain.is_empty() {
        return None;
    }
    // The host it is matched with is a URL's, read in its ASCII form
    // (`bücher.test` is `xn--bcher-kva.test`): so is a name written
    // otherwise; one the URL standard refuses names no host.
    if crate::net::needs_url_parsing(domain) {
        return crate::net::url_standard_host(domain).map(Entry::Domain);
    }
    Some(Entry::Domain(domain.to_ascii_lowercase()))
}

/// Parses `addr` or `addr/len` (host bits allowed: `10.42.1.1/24` is the
/// block `10.42.1.0/24`).
fn parse_net(text: &str) -> Option<IpNet> {
    match text.parse::<IpAddr>() {
        Ok(ip) => Some(IpNet::from(ip)),
        Err(_) => text.parse::<IpNet>().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn domain_and_subdomains() {
        let np = NoProxy::parse("example.com");
        assert!(np.matches("example.com"));
        assert!(np.matches("a.example.com"));
        assert!(np.matches("a.b.example.com"));
        assert!(!np.matches("badexample.com"));
        assert!(!np.matches("example.com.evil"));
        assert!(!np.matches("example.co"));
        assert!(!np.matches("com"));
        assert!(!np.matches(""));
    }

    #[test]
    fn leading_dot_also_matches_the_domain_itself() {
        let np = NoProxy::parse(".example.com");
        assert!(np.matches("example.com"));
        assert!(np.matches("www.example.com"));
        assert!(!np.matches("nonexample.com"));
    }

    #[test]
    fn case_insensitive() {
        let np = NoProxy::parse("Example.COM");
        assert!(np.matches("EXAMPLE.com"));
        assert!(np.matches("Www.Example.Com"));
    }

    #[test]
    fn trailing_dots_ignored() {
        let np = NoProxy::parse("example.com.");
        assert!(np.matches("example.com"));
        assert!(np.matches("a.example.com."));
        let np = NoProxy::parse("example.com");
        assert!(np.matches("example.com."));
        assert!(!np.matches("badexample.com."));
        assert!(NoProxy::parse(".").is_empty());
        assert!(NoProxy::parse("..").is_empty());
    }

    #[test]
    fn wildcard_matches_everything_including_ips() {
        let np = NoProxy::parse("*");
        for host in [
            "a",
            "example.com",
            "10.0.0.1",
            "[::1]",
            "::1",
            "[fe80::1%25x]",
        ] {
            assert!(np.matches(host), "{host}");
        }
        assert!(!np.matches(""));
        assert!(
            NoProxy::parse(" *\t").matches("bar"),
            "blanks around it aside"
        );
        // A `*` among other entries is no wildcard (as curl's): it names
        // a host `*` alone.
        for list in ["foo, *", "*,foo", "* foo", "*, *"] {
            let np = NoProxy::parse(list);
            assert!(!np.matches("bar"), "{list:?}");
            assert!(!np.matches("10.0.0.1"), "{list:?}");
        }
        assert!(NoProxy::parse("foo, *").matches("foo"));
        // Only a lone "*" is a wildcard.
        let np = NoProxy::parse("*.example.com, ex*");
        assert!(!np.matches("a.example.com"));
        assert!(!np.matches("example.com"));
        assert!(!np.matches("example"));
    }

    #[test]
    fn separators() {
        let np = NoProxy::parse(" a.com,b.com ,\tc.com\nd.com  e.com,,, ");
        for host in ["a.com", "b.com", "c.com", "d.com", "e.com"] {
            assert!(np.matches(host), "{host}");
        }
        assert!(!np.matches("f.com"));
        assert!(NoProxy::parse("").is_empty());
        assert!(NoProxy::parse(" , ,").is_empty());
        assert!(!NoProxy::parse("").matches("a.com"));
    }

    #[test]
    fn exact_ips() {
        let np = NoProxy::parse("10.124.7.8, ::1, [2001:db8::5]");
        assert!(np.matches("10.124.7.8"));
        assert!(!np.matches("10.124.7.7"));
        assert!(np.matches("[::1]"));
        assert!(np.matches("::1"));
        assert!(np.matches("[0:0::1]"), "compared as addresses, not text");
        assert!(np.matches("[2001:db8::5]"));
        assert!(!np.matches("[::2]"));
        // A name never matches an IP entry (no resolution).
        assert!(!NoProxy::parse("127.0.0.1").matches("localhost"));
        assert!(!NoProxy::parse("localhost").matches("127.0.0.1"));
    }

    #[test]
    fn cidr_blocks() {
        let np = NoProxy::parse("10.0.0.0/8, 192.168.1.77/24, ::1/128, fe80::/10, [2001:db8::]/32");
        assert!(np.matches("10.0.0.0"));
        assert!(np.matches("10.255.255.255"));
        assert!(!np.matches("11.0.0.1"));
        assert!(np.matches("192.168.1.1"));
        assert!(!np.matches("192.168.2.1"));
        assert!(np.matches("[::1]"));
        assert!(!np.matches("[::2]"));
        assert!(np.matches("[fe80::1]"));
        assert!(np.matches("[febf:ffff::1]"));
        assert!(!np.matches("[fec0::1]"));
        assert!(np.matches("[2001:db8:ffff::1]"));
        assert!(!np.matches("[2001:db9::1]"));
        // Families never cross.
        assert!(!np.matches("[::ffff:10.0.0.1]"));
        assert!(!NoProxy::parse("::/0").matches("10.0.0.1"));
        assert!(!NoProxy::parse("0.0.0.0/0").matches("[::1]"));
    }

    #[test]
    fn zero_and_full_prefixes() {
        let np = NoProxy::parse("0.0.0.0/0");
        assert!(np.matches("1.2.3.4"));
        assert!(np.matches("255.255.255.255"));
        assert!(NoProxy::parse("::/0").matches("[ffff::1]"));
        let np = NoProxy::parse("1.2.3.4/32");
        assert!(np.matches("1.2.3.4"));
        assert!(!np.matches("1.2.3.5"));
        let np = NoProxy::parse("1.2.3.4/31");
        assert!(np.matches("1.2.3.5"));
        assert!(!np.matches("1.2.3.6"));
        let np = NoProxy::parse("[::1/127]");
        assert!(np.matches("[::0]"));
    }

    #[test]
    fn invalid_cidr_entries_are_dropped() {
        for entry in [
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "10.0.0.0/-8",
            "10.0.0.0/0008",
            "10.0.0/8",
            "host/8",
            "10.0.0.0/8/8",
            "[10.0.0.0]/8",
            "[::1",
            "[::1]x",
            "[host]",
        ] {
            let np = NoProxy::parse(entry);
            assert!(np.is_empty(), "{entry:?} should be dropped: {np:?}");
        }
    }

    #[test]
    fn entries_with_ports_match_nothing() {
        let np = NoProxy::parse("example.com:8080, 10.0.0.1:80, [::1]:8080");
        assert!(np.is_empty());
        assert!(!np.matches("example.com"));
        assert!(!np.matches("10.0.0.1"));
        assert!(!np.matches("[::1]"));
        // Other entries still work.
        assert!(NoProxy::parse("a:1, b").matches("b"));
    }

    #[test]
    fn odd_hosts() {
        let np = NoProxy::parse("example.com, ::1");
        assert!(!np.matches("[example.com]"));
        assert!(!np.matches("[::1"));
        assert!(!np.matches("."));
        assert!(!np.matches("[fe80::1%25eth0]"));
        // A name is matched in its ASCII form (`Origin::host`'s: é.com is
        // xn--9ca.com), the entry written either way.
        assert_eq!(
            crate::net::url_standard_host("a.é.com").unwrap(),
            "a.xn--9ca.com"
        );
        assert!(NoProxy::parse("é.com").matches("a.xn--9ca.com"));
    }

    #[test]
    fn hyper_util_examples() {
        // The cases from hyper-util's own NoProxy tests, which this follows.
        let np = NoProxy::parse(".foo.bar, bar.baz,10.42.1.1/24,::1,10.124.7.8,2001::/17");
        for host in [
            "hyper.rs",
            "notfoo.bar",
            "notbar.baz",
            "10.43.1.1",
            "10.124.7.7",
            "[ffff:db8:a0b:12f0::1]",
            "[2005:db8:a0b:12f0::1]",
        ] {
            assert!(!np.matches(host), "{host}");
        }
        for host in [
            "hello.foo.bar",
            "bar.baz",
            "foo.bar.baz",
            "foo.bar",
            "10.42.1.100",
            "[::1]",
            "[2001:db8:a0b:12f0::1]",
            "10.124.7.8",
        ] {
            assert!(np.matches(host), "{host}");
        }
    }

    proptest! {
        #[test]
        fn garbage_never_panics(list in "\\PC{0,64}", host in "\\PC{0,32}") {
            let np = NoProxy::parse(&list);
            let _ = np.matches(&host);
        }

        #[test]
        fn cidr_agrees_with_integer_math(net: u32, prefix in 0u8..=32, ip: u32) {
            let entry = format!("{}/{prefix}", std::net::Ipv4Addr::from(net));
            let np = NoProxy::parse(&entry);
            let m = if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) };
            let expected = (net & m) == (ip & m);
            prop_assert_eq!(np.matches(&std::net::Ipv4Addr::from(ip).to_string()), expected);
        }

        #[test]
        fn cidr6_agrees_with_integer_math(net: u128, prefix in 0u8..=128, ip: u128) {
            let entry = format!("{}/{prefix}", std::net::Ipv6Addr::from(net));
            let np = NoProxy::parse(&entry);
            let m = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix) };
            let expected = (net & m) == (ip & m);
            prop_assert_eq!(np.matches(&format!("[{}]", std::net::Ipv6Addr::from(ip))), expected);
        }

        #[test]
        fn subdomains_always_match(label in "[a-z0-9-]{1,10}", domain in "[a-z0-9-]{1,10}\\.[a-z]{2,5}") {
            let np = NoProxy::parse(&domain);
            let sub = format!("{label}.{domain}");
            let glued = format!("{label}{domain}");
            prop_assert!(np.matches(&domain));
            prop_assert!(np.matches(&sub));
            prop_assert!(np.matches(&sub.to_ascii_uppercase()));
            prop_assert!(!np.matches(&glued));
        }
    }
}
