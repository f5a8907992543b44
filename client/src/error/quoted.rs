//! How an error quotes what a caller gave it — a URI, a header name —
//! without a secret it may hold, and not at any length. Here, under
//! `error`, so that every module that makes such an error (`api`, `net`,
//! `policy`) quotes alike without one depending on another.
//!
//! Where a URL's authority lies in text ([`authority_range`]) is here
//! too: quoting finds a userinfo in it, and `api::input` reads the host
//! from it; `error` is below `api` in the order modules depend on.

use std::ops::Range;

/// A URI's text as an error quotes it: without its userinfo, and
/// [shortened].
pub(crate) fn shown_uri(text: &str) -> String {
    shortened(&without_userinfo(text))
}

/// `text` with the userinfo of its authority (`user:password@`) shown as
/// `***@`: an error is printed and logged, and a password must not be.
///
/// After a scheme's `//`, where an authority is certain, it runs to the
/// first `/`: a password typed with a raw `?` or `#` (`user:pa?ss@host`,
/// invalid — a parser ends the authority there) is hidden too, at the
/// cost of hiding the host of a text with an `@` in a query and no path
/// (`http://host?to=me@there` shows as `http://***@there`). Elsewhere it
/// runs to the first `/`, `?` or `#`.
fn without_userinfo(text: &str) -> String {
    let Range { start, end } = authority_range(text);
    let end = if text[..start].ends_with("//") {
        text[start..]
            .find('/')
            .map_or(text.len(), |slash| start + slash)
    } else {
        end
    };
    match text[start..end].rfind('@') {
        Some(at) => format!("{}***{}", &text[..start], &text[start + at..]),
        None => without_stray_credentials(text),
    }
}

/// `text`, whose authority was not where a scheme would put it (a scheme
/// missing its colon: `http//me:pw@host/`), with a `name:password@`
/// hidden all the same: before a query or fragment, the first segment
/// between slashes that has a `:` before an `@` is taken for credentials
/// up to that `@`. A path's `me@there` (no `:`) is left as it is.
fn without_stray_credentials(text: &str) -> String {
    let end = text.find(['?', '#']).unwrap_or(text.len());
    let mut from = 0;
    for segment in text[..end].split('/') {
        if let Some(at) = segment.rfind('@') {
            if segment[..at].contains(':') {
                return format!("{}***{}", &text[..from], &text[from + at..]);
            }
        }
        from += segment.len() + 1;
    }
    text.to_owned()
}

/// Where the authority of a URL in `text` lies, as a byte range, in text
/// that may not parse: what callers quote, or what `http` refused.
///
/// It starts after the slashes that follow a scheme: where `text`'s first
/// `/`, `?` or `#` is a `/` right after a `:`, with no `@` before it — a
/// scheme, valid or not, as in `" http://…"` (pasted with a space),
/// `"http:/…"` (a slash missing), `"http:///…"` (all of them skipped, as
/// the URL standard skips them after `http:` and `https:`) — or at the
/// very start (`//host/x`). Else it starts at the start of `text`
/// (`user:password@host:8080/x`, `127.0.0.1:8080/x`, and a scheme without
/// its slashes, `http:host`, read as a host and port). It ends at
/// the first `/`, `?` or `#` after that, or `text`'s end, as the URL
/// standard ends it: a userinfo's own `@` and `:`, an IPv6 literal's `:`
/// and a port are in it.
pub(crate) fn authority_range(text: &str) -> Range<usize> {
    let first = text.find(['/', '?', '#']).unwrap_or(text.len());
    let (before, rest) = text.split_at(first);
    let scheme_like = before.is_empty() || (before.ends_with(':') && !before.contains('@'));
    let start = if rest.starts_with('/') && scheme_like {
        text.len() - rest.trim_start_matches('/').len()
    } else {
        0
    };
    let end = text[start..]
        .find(['/', '?', '#'])
        .map_or(text.len(), |end| start + end);
    start..end
}

/// Quoted text longer than this is cut in an error's message.
const SHOWN_CHARS: usize = 200;

/// `text`, cut after [`SHOWN_CHARS`] characters (`…` and its length
/// said): a 70 KB URL need not make a 70 KB error message.
pub(crate) fn shortened(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}… ({} bytes in all)", &text[..cut], text.len()),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_userinfo_is_hidden_and_nothing_else() {
        let cases = [
            ("http://me:pw@a b/x", "http://***@a b/x"),
            ("http://a b/x?to=me@there", "http://a b/x?to=me@there"),
            ("me:pw@host:8080/x", "***@host:8080/x"),
            ("host/x?next=http://me:pw@b/", "host/x?next=http://me:pw@b/"),
            ("http://a@b@c d/", "http://***@c d/"),
            ("http://a b", "http://a b"),
            // Text that does not start with a valid `scheme://`.
            (" http://me:pw@host/", " http://***@host/"),
            ("http:/me:pw@host/ x", "http:/***@host/ x"),
            ("//me:pw@host/ x", "//***@host/ x"),
            ("\u{e9}://me:pw@host/ x", "\u{e9}://***@host/ x"),
            ("me:pw@host:/x y", "***@host:/x y"),
            ("/x?to=me@there", "/x?to=me@there"),
            // A password with a raw `?` or `#`, which a parser reads as
            // the authority's end.
            ("http://me:pa?ss@host/x", "http://***@host/x"),
            ("http://me:pa#ss@host", "http://***@host"),
            ("//me:p?w@host/ x", "//***@host/ x"),
            // A scheme missing its colon: no authority is found, and a
            // `name:password@` is hidden all the same.
            ("http//me:pw@host/x", "http//***@host/x"),
            ("a//me:secretpw@", "a//***@"),
            ("http//host/x:y@z?q=a:b@c", "http//host/***@z?q=a:b@c"),
            ("http//host/me@there", "http//host/me@there"),
        ];
        for (text, shown) in cases {
            assert_eq!(without_userinfo(text), shown, "{text}");
        }
    }

    #[test]
    fn an_authority_runs_from_a_schemes_slashes_to_a_slash_a_query_or_a_fragment() {
        let cases = [
            ("http://a.test/x", "a.test"),
            ("https://a.test:8443", "a.test:8443"),
            ("http://", ""),
            ("", ""),
            // A userinfo with `@` and `:`: all of it, to the host's port.
            ("http://u:p@ss@a.test:8080/x@y:z", "u:p@ss@a.test:8080"),
            ("http://a@b@c d/", "a@b@c d"),
            ("http://u%40:p%3A@a.test/", "u%40:p%3A@a.test"),
            // IPv6 literals, their `:` and a zone id.
            ("http://[::1]:8080/x", "[::1]:8080"),
            ("http://u:p@[fe80::1%25eth0]/", "u:p@[fe80::1%25eth0]"),
            ("[::1]:8080/x", "[::1]:8080"),
            // No scheme: the authority starts the text.
            ("a.test/x?y", "a.test"),
            ("127.0.0.1:8080/x", "127.0.0.1:8080"),
            ("me:pw@host:8080/x", "me:pw@host:8080"),
            ("me:pw@host:/x y", "me:pw@host:"),
            ("host/x?next=http://b/", "host"),
            // A scheme missing `//`, or its `:`, or with more slashes.
            ("http:/a.test/x", "a.test"),
            ("http:///a.test/x", "a.test"),
            ("http:a.test/x", "http:a.test"),
            ("http//me:pw@host/x", "http"),
            ("//me:pw@host/x", "me:pw@host"),
            // Not a valid scheme, but where one would be.
            (" http://a.test/", "a.test"),
            ("\u{e9}://a.test/", "a.test"),
            // A `?` or `#` before any `/` ends it.
            ("http://a.test?x/y", "a.test"),
            ("http://a.test#f/g", "a.test"),
            ("http://me:pa?ss@host/x", "me:pa"),
            ("a.test?x/y", "a.test"),
            ("?x/y", ""),
        ];
        for (text, authority) in cases {
            assert_eq!(&text[authority_range(text)], authority, "{text}");
        }
    }
}
