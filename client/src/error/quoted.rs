//! How an error quotes what a caller gave it — a URI, a header name —
//! without a secret it may hold, and not at any length. Here, under
//! `error`, so that every module that makes such an error (`api`, `net`,
//! `policy`) quotes alike without one depending on another.

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
    let start = authority_start(text);
    let rest = &text[start..];
    let ends: &[char] = if text[..start].ends_with("//") {
        &['/']
    } else {
        &['/', '?', '#']
    };
    let authority = rest.split(ends).next().unwrap_or_default();
    match authority.rfind('@') {
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

/// Where `text`'s authority would start: after the slashes that follow
/// its first `:` — a scheme, valid or not, as in `" http://…"` (pasted
/// with a space), `"http:/…"` (a slash missing) — or a leading `//`;
/// else at its start (`user:password@host:8080/x`). Text that does not
/// parse is what this must read, so it does not ask for a valid scheme.
fn authority_start(text: &str) -> usize {
    let first = text.find(['/', '?', '#']).unwrap_or(text.len());
    let (before, rest) = text.split_at(first);
    let scheme_like = before.is_empty() || (before.ends_with(':') && !before.contains('@'));
    if !rest.starts_with('/') || !scheme_like {
        return 0;
    }
    text.len() - rest.trim_start_matches('/').len()
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
}
