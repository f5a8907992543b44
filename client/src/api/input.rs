//! [`IntoUri`] and [`IntoHeaderName`]: what a request's URI and header
//! names may be given as. A conversion that fails keeps what it was given
//! for its error, which names it; the text is made only then, so a valid
//! input costs what `http`'s own `TryFrom` costs.

use crate::error::InvalidRequest;
use bytes::Bytes;
use http::header::HeaderName;
use http::Uri;

/// A request's URI: a `&str`, `String`, `&String`, `&[u8]` or `Vec<u8>`,
/// or an [`http::Uri`], owned or borrowed (what `http::Uri` converts
/// from, but for [`http::uri::Parts`]: use `Uri::from_parts`).
///
/// Text that does not parse fails the request with
/// [`InvalidRequest::Uri`], which quotes it, or, when it does not start
/// with a scheme (`127.0.0.1:8080/x`), with [`InvalidRequest::Scheme`].
/// A userinfo in the quoted text is shown as `***`: it may hold a
/// password.
pub trait IntoUri: sealed::UriInput {}

impl<T: sealed::UriInput> IntoUri for T {}

/// A header's name: a `&str`, `String`, `&String`, `&[u8]` or `Vec<u8>`,
/// or an [`http::HeaderName`], owned or borrowed (what
/// `HeaderName` converts from). One that is not a valid name fails the
/// request with [`InvalidRequest::Header`], which quotes it.
pub trait IntoHeaderName: sealed::HeaderNameInput {}

impl<T: sealed::HeaderNameInput> IntoHeaderName for T {}

/// The conversions themselves, out of callers' reach: the set of types may
/// change without breaking them.
pub(crate) mod sealed {
    use crate::error::InvalidRequest;

    pub trait UriInput {
        fn into_uri(self) -> Result<http::Uri, InvalidRequest>;
    }

    pub trait HeaderNameInput {
        fn into_header_name(self) -> Result<http::header::HeaderName, InvalidRequest>;
    }
}

impl sealed::UriInput for Uri {
    fn into_uri(self) -> Result<Uri, InvalidRequest> {
        Ok(self)
    }
}

impl sealed::UriInput for &Uri {
    fn into_uri(self) -> Result<Uri, InvalidRequest> {
        Ok(self.clone())
    }
}

impl sealed::UriInput for &str {
    fn into_uri(self) -> Result<Uri, InvalidRequest> {
        Uri::try_from(self).map_err(|e| invalid_uri(self, e.into()))
    }
}

impl sealed::UriInput for &String {
    fn into_uri(self) -> Result<Uri, InvalidRequest> {
        self.as_str().into_uri()
    }
}

impl sealed::UriInput for &[u8] {
    fn into_uri(self) -> Result<Uri, InvalidRequest> {
        Uri::try_from(self).map_err(|e| invalid_uri(&String::from_utf8_lossy(self), e.into()))
    }
}

impl sealed::UriInput for String {
    fn into_uri(self) -> Result<Uri, InvalidRequest> {
        uri_of_shared(Bytes::from(self))
    }
}

impl sealed::UriInput for Vec<u8> {
    fn into_uri(self) -> Result<Uri, InvalidRequest> {
        uri_of_shared(Bytes::from(self))
    }
}

/// Parses `bytes` in place, as `Uri::try_from(String)` does, keeping them
/// for the error. The clone shares the buffer, and costs no allocation
/// the parser's own slicing of it would not make anyway.
fn uri_of_shared(bytes: Bytes) -> Result<Uri, InvalidRequest> {
    Uri::from_maybe_shared(bytes.clone())
        .map_err(|e| invalid_uri(&String::from_utf8_lossy(&bytes), e.into()))
}

/// The error for `text`, which did not parse as a URI. Text without a
/// scheme is [`InvalidRequest::Scheme`]: that is what is wrong with it,
/// where the parser says only "invalid format".
fn invalid_uri(text: &str, source: http::Error) -> InvalidRequest {
    let shown = shown_uri(text);
    if starts_with_scheme(text) {
        InvalidRequest::Uri { uri: shown, source }
    } else {
        InvalidRequest::Scheme(shown)
    }
}

/// Whether `text` starts with a scheme and `://` (RFC 3986: a letter,
/// then letters, digits, `+`, `-` or `.`).
fn starts_with_scheme(text: &str) -> bool {
    let Some((scheme, _)) = text.split_once("://") else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

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
        None => text.to_owned(),
    }
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

impl sealed::HeaderNameInput for HeaderName {
    fn into_header_name(self) -> Result<HeaderName, InvalidRequest> {
        Ok(self)
    }
}

impl sealed::HeaderNameInput for &HeaderName {
    fn into_header_name(self) -> Result<HeaderName, InvalidRequest> {
        Ok(self.clone())
    }
}

impl sealed::HeaderNameInput for &str {
    fn into_header_name(self) -> Result<HeaderName, InvalidRequest> {
        header_name(self.as_bytes())
    }
}

impl sealed::HeaderNameInput for &String {
    fn into_header_name(self) -> Result<HeaderName, InvalidRequest> {
        header_name(self.as_bytes())
    }
}

impl sealed::HeaderNameInput for String {
    fn into_header_name(self) -> Result<HeaderName, InvalidRequest> {
        header_name(self.as_bytes())
    }
}

impl sealed::HeaderNameInput for &[u8] {
    fn into_header_name(self) -> Result<HeaderName, InvalidRequest> {
        header_name(self)
    }
}

impl sealed::HeaderNameInput for Vec<u8> {
    fn into_header_name(self) -> Result<HeaderName, InvalidRequest> {
        header_name(&self)
    }
}

/// `bytes` as a header name, as `HeaderName`'s `TryFrom` makes it from
/// each of these types.
fn header_name(bytes: &[u8]) -> Result<HeaderName, InvalidRequest> {
    HeaderName::from_bytes(bytes).map_err(|e| InvalidRequest::Header {
        name: shown_name(&String::from_utf8_lossy(bytes)),
        source: e.into(),
    })
}

/// An invalid header name as an error shows it: a whole header line
/// passed as the name (`"Authorization: Bearer …"`) up to its colon, the
/// rest — the value, maybe a secret — as `…`.
fn shown_name(text: &str) -> String {
    match text.split_once(':') {
        Some((name, _)) => shortened(&format!("{name}: …")),
        None => shortened(text),
    }
}

/// Quoted text longer than this is cut in an error's message.
const SHOWN_CHARS: usize = 200;

/// `text`, cut after [`SHOWN_CHARS`] characters (`…` and its length
/// said): a 70 KB URL need not make a 70 KB error message.
fn shortened(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}… ({} bytes in all)", &text[..cut], text.len()),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::sealed::UriInput as _;
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
        ];
        for (text, shown) in cases {
            assert_eq!(without_userinfo(text), shown, "{text}");
        }
    }

    #[test]
    fn text_without_a_scheme_is_a_scheme_error() {
        for text in ["127.0.0.1:8080/x", "host/x?next=http://b/", "1http://a b/"] {
            let error = text.into_uri().unwrap_err();
            assert!(
                matches!(error, InvalidRequest::Scheme(_)),
                "{text}: {error:?}"
            );
        }
        let error = "http://a b/".into_uri().unwrap_err();
        assert!(matches!(error, InvalidRequest::Uri { .. }), "{error:?}");
    }
}
