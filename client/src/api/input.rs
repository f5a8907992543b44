//! [`IntoUri`] and [`IntoHeaderName`]: what a request's URI and header
//! names may be given as. A conversion that fails keeps what it was given
//! for its error, which names it; the text is made only then, so a valid
//! input costs what `http`'s own `TryFrom` costs.
//!
//! This is where a request's URI comes in, so where a host written as
//! `http` does not take it — not ASCII, or percent-encoded — is made the
//! name the URL standard reads in it ([`with_url_standard_host`]), which
//! every later use of the host sees; and where the path and query are
//! percent-encoded as a URL parser encodes them ([`with_encoded_target`]
//! for text `http` refused, [`with_url_encoded_target`] for a URI it
//! took), which every later use of them — the request line, `:path`,
//! cookies, a redirect's base — sees; and a userinfo `http` refused, as
//! that parser encodes it ([`with_encoded_userinfo`]), for the
//! credentials it holds to go as written.

use crate::error::{authority_range, shortened, shown_uri, InvalidRequest};
use crate::net::{needs_url_parsing, url_standard_host};
use bytes::Bytes;
use http::header::HeaderName;
use http::uri::PathAndQuery;
use http::Uri;
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use std::borrow::Cow;

/// A request's URI: a `&str`, `String`, `&String`, `&[u8]` or `Vec<u8>`,
/// or an [`http::Uri`], owned or borrowed (what `http::Uri` converts
/// from, but for [`http::uri::Parts`]: use `Uri::from_parts`).
///
/// The host is read as the URL standard reads it, as reqwest reads it:
/// percent-decoded and, if not ASCII, in IDNA's ASCII form —
/// `http://ex%61mple.com/` goes to `example.com`, `http://bücher.example/`
/// to `xn--bcher-kva.example`: the name looked up, sent in `Host` and as
/// the TLS server name (an `http::Uri` holds neither form: text only).
/// A host that parser refuses (`ex%2Fample.com`: a `/` once decoded)
/// fails the request with [`InvalidRequest::Host`].
///
/// The path and query go percent-encoded in UTF-8 as the URL standard
/// encodes them, as reqwest and browsers send them (the `url` crate's
/// sets): a character that is not ASCII, which a request-target cannot
/// hold (RFC 9112 §3.2) and `http` takes, an `http::Uri` too; in the path
/// a space, `"`, `<`, `>`, `` ` ``, `{` and `}`; in the query a space,
/// `"`, `<`, `>` and `'` — `http://a.test/ä b{c}?q='é'` is sent as
/// `/%C3%A4%20b%7Bc%7D?q=%27%C3%A9%27`. A URL with none of those is not
/// looked at again. Nothing else changes: no dot segment is removed, and
/// an escape already there, a `%` alone, a `|`, `^` or `\` (which the URL
/// standard reads as a `/` in a path) are sent as written. Text with a
/// space or a control character at its end, or a control character in
/// its path or query, is not valid (a URL parser would drop them; a
/// paste gone wrong, or an attempt to end the request line). The
/// `#fragment` is never sent.
///
/// A userinfo is read as the URL standard reads it too: one holding what
/// that parser percent-encodes there and `http` refuses — a space, `"`,
/// `<`, `>`, `` ` ``, `{`, `}`, `^`, `|`, `[`, `]`, a character that is
/// not ASCII: a password pasted as it is — is encoded so, and its
/// credentials, percent-decoded, go in `Authorization: Basic` as written
/// (in UTF-8), as reqwest and curl send them.
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
        with_url_encoded_target(self)
    }
}

impl sealed::UriInput for &Uri {
    fn into_uri(self) -> Result<Uri, InvalidRequest> {
        with_url_encoded_target(self.clone())
    }
}

impl sealed::UriInput for &str {
    fn into_uri(self) -> Result<Uri, InvalidRequest> {
        parsed(Uri::try_from(self), self.as_bytes())
    }
}

impl sealed::UriInput for &String {
    fn into_uri(self) -> Result<Uri, InvalidRequest> {
        self.as_str().into_uri()
    }
}

impl sealed::UriInput for &[u8] {
    fn into_uri(self) -> Result<Uri, InvalidRequest> {
        parsed(Uri::try_from(self), self)
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
    parsed(Uri::from_maybe_shared(bytes.clone()), &bytes)
}

/// The request's URI, from what `http`'s parser made of `input`. Text it
/// refused for a host that is not ASCII or is percent-encoded — `http`
/// takes neither, as they are — or for a userinfo, path or query with what
/// a URL parser percent-encodes (a space, `<`, `>`...) is parsed again
/// with its userinfo encoded ([`with_encoded_userinfo`]), that host as the
/// URL standard reads it ([`with_url_standard_host`]) and its path and
/// query encoded ([`with_encoded_target`]); any other refusal is
/// an error that quotes `input`. A URI `http` took has no such host, and
/// is as given unless its path or query holds what a URL parser encodes
/// there that `http` takes ([`with_url_encoded_target`]): one without costs a
/// look at its bytes.
fn parsed(parsed: Result<Uri, http::uri::InvalidUri>, input: &[u8]) -> Result<Uri, InvalidRequest> {
    let error = match parsed {
        Ok(uri) => return with_url_encoded_target(uri),
        Err(error) => error,
    };
    // Bytes that are not UTF-8 hold no host to read and no character to
    // encode: `http`'s error.
    let Ok(text) = std::str::from_utf8(input) else {
        return Err(invalid_uri(&String::from_utf8_lossy(input), error.into()));
    };
    let userinfo_read = with_encoded_userinfo(text);
    let userinfo_read_text = userinfo_read.as_deref().unwrap_or(text);
    let host_read = with_url_standard_host(userinfo_read_text).transpose()?;
    let host_read_text = host_read.as_deref().unwrap_or(userinfo_read_text);
    let Some(read) = with_encoded_target(host_read_text)
        .or(host_read)
        .or(userinfo_read)
    else {
        return Err(invalid_uri(text, error.into()));
    };
    // The rest of the text may be what `http` refused.
    Uri::try_from(read).map_err(|e| invalid_uri(text, e.into()))
}

/// What the URL standard's userinfo percent-encode set encodes and `http`
/// refuses in a userinfo: a space, `"`, `<`, `>`, `` ` ``, `{`, `}`, `^`,
/// `|`, and `[` and `]` (which `http` reads as an IPv6 literal's, and
/// refuses in a userinfo beside a `:`) — besides every byte that is not
/// ASCII, which [`utf8_percent_encode`] always encodes. The rest of that
/// set `http` takes (`;`, `=`), or it ends the authority (`/`, `?`, `#`)
/// or splits it (`:`, `@`); a `\`, which the URL standard reads as the
/// authority's end, and a control character are left errors, as in a
/// path.
const USERINFO: &AsciiSet = &AsciiSet::EMPTY
    .add(b' ')
    .add(b'"')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'^')
    .add(b'|')
    .add(b'[')
    .add(b']');

/// The URL standard's path percent-encode set, as the `url` crate
/// defines it (its `parser::PATH`, private there; the test
/// `the_sets_are_the_url_crates` holds the two together): what a WHATWG
/// URL parser — reqwest's, a browser's — encodes in a path, besides every
/// byte that is not ASCII, which [`utf8_percent_encode`] always encodes.
/// Of it, `http` refuses a space, `<`, `>` and `` ` `` in a path, and takes
/// `"`, `{` and `}`; its `?` and `#` end the path before this is used; its
/// control characters never come to it (see [`encoded_target`]).
const PATH: &AsciiSet = &controls_and(PATH_ADDS);

/// What [`PATH`] adds to the control characters.
const PATH_ADDS: &[u8] = b" \"<>`#?{}";

/// The same for a query: the URL standard's special-query percent-encode
/// set (`http` and `https` are special schemes), as the `url` crate
/// defines it (its `parser::SPECIAL_QUERY`). Of it, `http` refuses a
/// space, `"`, `<` and `>` in a query, and takes `'`; its `#` ends the
/// query before this is used.
const SPECIAL_QUERY: &AsciiSet = &controls_and(SPECIAL_QUERY_ADDS);

/// What [`SPECIAL_QUERY`] adds to the control characters.
const SPECIAL_QUERY_ADDS: &[u8] = b" \"#<>'";

/// The control characters and `bytes`.
const fn controls_and(bytes: &[u8]) -> AsciiSet {
    let mut set = CONTROLS.union(AsciiSet::EMPTY);
    let mut at = 0;
    while at < bytes.len() {
        set = set.add(bytes[at]);
        at += 1;
    }
    set
}

/// The bytes that neither [`PATH`] nor [`SPECIAL_QUERY`] encodes and that
/// are no control character: printable ASCII but a space and what the two
/// sets add (`?` among them: it ends the path, and the query keeps it). A
/// target of these alone comes out of [`encoded_target`] as it is.
const PLAIN: [bool; 256] = {
    let mut plain = [false; 256];
    let mut byte = b'!';
    while byte <= b'~' {
        plain[byte as usize] = true;
        byte += 1;
    }
    let mut at = 0;
    while at < PATH_ADDS.len() {
        plain[PATH_ADDS[at] as usize] = false;
        at += 1;
    }
    let mut at = 0;
    while at < SPECIAL_QUERY_ADDS.len() {
        plain[SPECIAL_QUERY_ADDS[at] as usize] = false;
        at += 1;
    }
    plain[b'?' as usize] = true;
    plain
};

/// `target`, a path and query without a fragment, percent-encoded as a
/// WHATWG URL parser encodes them ([`PATH`], [`SPECIAL_QUERY`], and every
/// character that is not ASCII, in UTF-8); borrowed if it holds none of
/// those. `None` if it holds a control character: a URL parser would drop
/// a tab or a line break and encode the others, where a request is not
/// sent with a guess (`http` refuses them, and its error says so).
fn encoded_target(target: &str) -> Option<Cow<'_, str>> {
    // Nearly every target: one look at its bytes.
    if target.bytes().all(|byte| PLAIN[usize::from(byte)]) {
        return Some(Cow::Borrowed(target));
    }
    if target.contains(|c: char| c.is_ascii_control()) {
        return None;
    }
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    };
    let encoded_path: Cow<'_, str> = utf8_percent_encode(path, PATH).into();
    let encoded_query: Option<Cow<'_, str>> =
        query.map(|q| utf8_percent_encode(q, SPECIAL_QUERY).into());
    // Whether anything was encoded is told by the text, not by the `Cow`:
    // one made from a single piece is borrowed, and an escape alone (a
    // query that is just `<`, as `%3C`) is a single piece.
    if encoded_path == path && encoded_query.as_deref() == query {
        return Some(Cow::Borrowed(target));
    }
    Some(Cow::Owned(match encoded_query {
        None => encoded_path.into_owned(),
        Some(query) => format!("{encoded_path}?{query}"),
    }))
}

/// `uri` with its path and query percent-encoded as a WHATWG URL parser
/// encodes them ([`encoded_target`]): `http` takes a character that is
/// not ASCII there, which neither an HTTP/1.1 request line nor HTTP/2's
/// `:path` may carry raw, and a `"`, `{`, `}` in a path or a `'` in a
/// query, which reqwest and browsers send encoded. A URI without any of
/// those — nearly every one — is returned as it is, after a look at its
/// bytes.
pub(crate) fn with_url_encoded_target(uri: Uri) -> Result<Uri, InvalidRequest> {
    let Some(target) = uri.path_and_query() else {
        return Ok(uri);
    };
    // `None` (a control character) is not an answer here: `http` takes none.
    let Some(Cow::Owned(encoded)) = encoded_target(target.as_str()) else {
        return Ok(uri);
    };
    // Only bytes `http` took, and escapes of others: it takes them again.
    let invalid = |source: http::Error| InvalidRequest::Uri {
        uri: shown_uri(&uri.to_string()),
        source,
    };
    let target = PathAndQuery::try_from(encoded).map_err(|e| invalid(e.into()))?;
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(target);
    Uri::from_parts(parts).map_err(|e| invalid(e.into()))
}

/// `text`, which `http` did not parse, with its path and query
/// percent-encoded as a URL parser encodes them ([`encoded_target`]) and
/// without its fragment, for `http` to parse again; `None` if it holds
/// nothing to encode (what `http` refused is something else, and its
/// error says what), has no scheme — it is refused for that — holds a
/// control character in its path or query, or ends with a space or a
/// control character, which a URL parser would strip: that is left an
/// error, not sent encoded.
fn with_encoded_target(text: &str) -> Option<String> {
    if !starts_with_scheme(text) || text.ends_with(|c: char| c <= ' ' || c == '\u{7f}') {
        return None;
    }
    let authority_end = authority_range(text).end;
    let rest = &text[authority_end..];
    let target = rest.split('#').next().unwrap_or_default();
    match encoded_target(target)? {
        Cow::Borrowed(_) => None,
        Cow::Owned(encoded) => Some(format!("{}{encoded}", &text[..authority_end])),
    }
}

/// `text`, which `http` did not parse, with its userinfo percent-encoded
/// as a URL parser encodes it ([`USERINFO`]), for `http` to parse again:
/// a password pasted as it is (`http://u:p^ss@host/`, `http://u:pässw@host/`)
/// is then the one sent, percent-decoded into `Authorization`, as reqwest
/// and curl send it. `None` if there is no userinfo (no `@` in the
/// authority, found as [`with_url_standard_host`] finds it), no scheme, or
/// nothing in it to encode.
fn with_encoded_userinfo(text: &str) -> Option<String> {
    if !starts_with_scheme(text) {
        return None;
    }
    let range = authority_range(text);
    let at = text[range.clone()].rfind('@')?;
    let userinfo = &text[range.start..range.start + at];
    let encoded: Cow<'_, str> = utf8_percent_encode(userinfo, USERINFO).into();
    if encoded == userinfo {
        return None;
    }
    let (before, after) = (&text[..range.start], &text[range.start + at..]);
    Some(format!("{before}{encoded}{after}"))
}

/// `text`, which `http` did not parse, with its host as the URL standard
/// reads it (see [`url_standard_host`]) if that may differ from what was
/// written — `http://bücher.test/` is `http://xn--bcher-kva.test/`,
/// `http://ex%61mple.test/` is `http://example.test/` — for `http` to
/// parse again. Every later use of the host — the origin connections are
/// pooled by, the resolver, `Host`, the TLS server name, cookies — reads
/// it from the URI, so all see that one name. The userinfo, port and rest
/// stay as written. `Err` (quoting `text`, its userinfo hidden) if the URL
/// standard refuses that host; `None` if the host is plain ASCII, or
/// there is none to read: what `http` refused is something else, and its
/// error says what.
///
/// The authority is found as the URL standard finds it
/// ([`authority_range`]): after the scheme's slashes, up to the first `/`,
/// `?` or `#`; its host after the last `@` (a userinfo's own `@` is
/// percent-encoded), up to a `:`. A bracketed IPv6 literal is left to
/// `http` (its zone id's `%25` too).
fn with_url_standard_host(text: &str) -> Option<Result<String, InvalidRequest>> {
    if !starts_with_scheme(text) {
        return None;
    }
    let range = authority_range(text);
    let start = range.start;
    let authority = &text[range];
    let host_start = start + authority.rfind('@').map_or(0, |at| at + 1);
    let host_and_port = &text[host_start..start + authority.len()];
    let host = host_and_port.split(':').next().unwrap_or_default();
    if !needs_url_parsing(host) || host.starts_with('[') {
        return None;
    }
    let Some(read) = url_standard_host(host) else {
        return Some(Err(InvalidRequest::Host(shown_uri(text))));
    };
    let after_host = &text[host_start + host.len()..];
    Some(Ok(format!("{}{read}{after_host}", &text[..host_start])))
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

#[cfg(test)]
mod tests {
    use super::sealed::UriInput as _;
    use super::*;

    /// Each input type, converted.
    fn converted(text: &str) -> [Result<Uri, InvalidRequest>; 5] {
        [
            text.into_uri(),
            text.to_owned().into_uri(),
            text.as_bytes().into_uri(),
            text.as_bytes().to_vec().into_uri(),
            (&text.to_owned()).into_uri(),
        ]
    }

    #[test]
    fn a_host_is_read_as_the_url_standard_reads_it_and_the_rest_goes_as_written() {
        for (given, read) in [
            (
                "http://ex%61mple.test/a/../b?x=%41",
                "http://example.test/a/../b?x=%41",
            ),
            ("http://EX%41MPLE.Test:8080", "http://example.test:8080/"),
            (
                "http://u%40:p@ex%61mple.test/",
                "http://u%40:p@example.test/",
            ),
            ("http://%31%32%37.1/", "http://127.0.0.1/"),
            ("http://bücher.test/", "http://xn--bcher-kva.test/"),
            (
                "https://BÜCHER.test:8443/x?q",
                "https://xn--bcher-kva.test:8443/x?q",
            ),
            ("http://u:pw@bücher.test", "http://u:pw@xn--bcher-kva.test/"),
            ("http://a@b@bücher.test/", "http://a@b@xn--bcher-kva.test/"),
            ("http://bücher.test?q=1", "http://xn--bcher-kva.test/?q=1"),
            ("http://bü%63her.test/", "http://xn--bcher-kva.test/"),
            ("http://例え.テスト/", "http://xn--r8jz45g.xn--zckzah/"),
            // As written: a host with nothing to read (its case too), an
            // IPv6 literal, a host `http` takes as it is.
            ("http://A.Test/x", "http://A.Test/x"),
            ("http://[::1]:8080/", "http://[::1]:8080/"),
            ("http://[fe80::1%25eth0]/", "http://[fe80::1%25eth0]/"),
            ("http://xn--bcher-kva.test/", "http://xn--bcher-kva.test/"),
        ] {
            for uri in converted(given) {
                assert_eq!(uri.unwrap().to_string(), read, "{given}");
            }
        }
        // `http` takes neither form of host: the text is what needs reading.
        assert!(Uri::try_from("http://ex%61mple.test/").is_err());
        assert!(Uri::try_from("http://bücher.test/").is_err());
    }

    #[test]
    fn a_host_the_url_standard_refuses_is_a_host_error_that_shows_no_password() {
        for given in [
            "http://ex%2Fample.test/",
            "http://ex%20ample.test/",
            "http://ex%25ample.test/",
            "http://ex%ZZample.test/",
            "http://\u{FFFD}.test/",
            "http://u:secret@b\u{FC} cher.test/",
            "http://u:secret@ex%3Aample.test/",
        ] {
            for error in converted(given) {
                let error = error.unwrap_err();
                let InvalidRequest::Host(shown) = &error else {
                    panic!("{given}: {error:?}");
                };
                assert_eq!(*shown, shown_uri(given));
                assert!(!error.to_string().contains("secret"), "{error}");
            }
        }
    }

    /// A userinfo is percent-encoded where it holds what a URL parser
    /// encodes there and `http` refuses, and left as written elsewhere; a
    /// control character or a `\\` in it stays an error, as in a path.
    #[test]
    fn a_userinfo_is_percent_encoded_where_http_refuses_it() {
        for (given, read) in [
            (
                "http://u:p^s s{|}\"<>`\u{e4}@a.test/x",
                "http://u:p%5Es%20s%7B%7C%7D%22%3C%3E%60%C3%A4@a.test/x",
            ),
            (
                "http://j\u{f6}@b\u{fc}cher.test/\u{e4}",
                "http://j%C3%B6@xn--bcher-kva.test/%C3%A4",
            ),
            ("http://a b@c@a.test/", "http://a%20b@c@a.test/"),
            // Brackets too; an escape and a `%` alone as written — and
            // text `http` takes, whole.
            (
                "http://u:p%41;=[x]!$%^@a.test/",
                "http://u:p%41;=%5Bx%5D!$%%5E@a.test/",
            ),
            ("http://u:p[x]@a.test/", "http://u:p[x]@a.test/"),
        ] {
            for uri in converted(given) {
                assert_eq!(uri.unwrap().to_string(), read, "{given}");
            }
        }
        for given in ["http://u:p\u{1}^@a.test/", "http://u:p\\^@a.test/"] {
            for error in converted(given) {
                let error = error.unwrap_err();
                let InvalidRequest::Uri { uri, .. } = &error else {
                    panic!("{given:?}: {error:?}");
                };
                assert_eq!(*uri, shown_uri(given));
            }
        }
    }

    /// What is wrong with text whose host is not ASCII may be elsewhere:
    /// the error is `http`'s, and quotes the text as given. (A space in
    /// the path is encoded: see
    /// `a_path_and_query_are_percent_encoded_as_a_url_parser_encodes_them`.)
    #[test]
    fn text_with_a_host_that_is_not_ascii_fails_as_any_other_for_the_rest() {
        for given in [
            "http://bücher.test/a\tb",
            "http://bücher.test/\u{1}",
            "http://bücher.test/a b ",
        ] {
            for error in converted(given) {
                let error = error.unwrap_err();
                let InvalidRequest::Uri { uri, .. } = &error else {
                    panic!("{given}: {error:?}");
                };
                assert_eq!(uri, given);
            }
        }
        let error = "bücher.test/x".into_uri().unwrap_err();
        assert!(matches!(error, InvalidRequest::Scheme(_)), "{error:?}");
        // Latin-1, not UTF-8: no host to read.
        let error = b"http://b\xfccher.test/"[..].into_uri().unwrap_err();
        assert!(matches!(error, InvalidRequest::Uri { .. }), "{error:?}");
    }

    #[test]
    fn a_path_and_query_are_percent_encoded_as_a_url_parser_encodes_them() {
        for (given, read) in [
            (
                "http://a.test/\u{e4}?q=\u{e9}",
                "http://a.test/%C3%A4?q=%C3%A9",
            ),
            ("http://a.test/\u{e4}#fr\u{e4}g", "http://a.test/%C3%A4"),
            ("http://a.test?\u{e4}", "http://a.test/?%C3%A4"),
            ("http://a.test/?\u{e4}", "http://a.test/?%C3%A4"),
            (
                "http://a.test/a b<c>`d`\"?q=a b\"<c>`d`",
                "http://a.test/a%20b%3Cc%3E%60d%60%22?q=a%20b%22%3Cc%3E`d`",
            ),
            // What `http` takes and a URL parser encodes, in text `http`
            // refuses or takes.
            (
                "http://a.test/\u{e4} b{c}?q='\u{e9}'",
                "http://a.test/%C3%A4%20b%7Bc%7D?q=%27%C3%A9%27",
            ),
            (
                "http://a.test/{\"a\"}?{\"'\"}",
                "http://a.test/%7B%22a%22%7D?{%22%27%22}",
            ),
            (
                "http://b\u{fc}cher.test/{}?'",
                "http://xn--bcher-kva.test/%7B%7D?%27",
            ),
            ("http://a.test/a b#c d", "http://a.test/a%20b"),
            // With the host read as the URL standard reads it.
            (
                "http://u:p@b\u{fc}cher.test:8080/\u{e4} b?\u{e9}",
                "http://u:p@xn--bcher-kva.test:8080/%C3%A4%20b?%C3%A9",
            ),
            ("http://ex%61mple.test/a b", "http://example.test/a%20b"),
            // The rest as written: dot segments, escapes, a `\`, `|`, `^`,
            // a `%` alone.
            (
                "http://a.test/a/../{\"%41\"}\\|^\u{e4}?'%41'&\u{e9}|^\\%",
                "http://a.test/a/../%7B%22%41%22%7D\\|^%C3%A4?%27%41%27&%C3%A9|^\\%",
            ),
            ("http://a.test/a/../b?c=%41#d", "http://a.test/a/../b?c=%41"),
        ] {
            for uri in converted(given) {
                assert_eq!(uri.unwrap().to_string(), read, "{given}");
            }
        }
        // An `http::Uri` too: `http` takes a character that is not ASCII,
        // and a `"`, `{`, `}` in a path, a `'` in a query.
        for (given, read) in [
            ("http://a.test/\u{e4}?\u{e9}", "http://a.test/%C3%A4?%C3%A9"),
            (
                "http://a.test/{\"a\"}?'b'",
                "http://a.test/%7B%22a%22%7D?%27b%27",
            ),
        ] {
            let uri = Uri::try_from(given).unwrap();
            assert_eq!(uri.to_string(), given);
            for converted in [(&uri).into_uri(), uri.clone().into_uri()] {
                assert_eq!(converted.unwrap(), read, "{given}");
            }
        }
        // One with nothing to encode is the same `Uri`.
        let uri = Uri::try_from("http://a.test/a/../%41|^\\?`{|}^\\%").unwrap();
        assert_eq!(uri.clone().into_uri().unwrap(), uri);
    }

    /// [`PATH`] and [`SPECIAL_QUERY`] encode what the `url` crate's own
    /// sets encode (`url` does not export them): each printable ASCII
    /// character, and some that are not ASCII, in a path and in a query,
    /// come out of [`encoded_target`] as they come out of `url::Url`. A `/`,
    /// `?`, `#` in a path, a `#` in a query, end or split them, and a `\`
    /// in a path is a `/` to `url`: those are left out.
    #[test]
    fn the_sets_are_the_url_crates() {
        let characters = (b' '..=b'~')
            .map(char::from)
            .chain(['\u{e4}', '\u{a0}', '\u{1f600}']);
        for c in characters {
            if !matches!(c, '/' | '?' | '#' | '\\') {
                let url = url::Url::parse(&format!("http://a.test/x{c}y")).unwrap();
                let target = format!("/x{c}y");
                let encoded = encoded_target(&target).unwrap();
                assert_eq!(encoded, url.path(), "{c:?} in a path");
            }
            if c != '#' {
                let url = url::Url::parse(&format!("http://a.test/?x{c}y")).unwrap();
                let target = format!("/?x{c}y");
                let encoded = encoded_target(&target).unwrap();
                let query = url.query().unwrap();
                assert_eq!(encoded, format!("/?{query}"), "{c:?} in a query");
            }
        }
    }

    /// A query that is one character to encode and nothing else goes
    /// encoded, as any other: `percent-encoding` gives such a one as a
    /// single borrowed piece (`%3C`), which is no sign that nothing was
    /// encoded.
    #[test]
    fn a_query_of_one_character_to_encode_is_encoded() {
        for (given, read) in [
            ("http://a.test/?<", "http://a.test/?%3C"),
            ("http://a.test/?>", "http://a.test/?%3E"),
            ("http://a.test?\"", "http://a.test/?%22"),
            // Text `http` takes.
            ("http://a.test/?'", "http://a.test/?%27"),
            ("http://a.test/{", "http://a.test/%7B"),
            ("http://a.test/? #f", "http://a.test/?%20"),
            (
                "http://b\u{fc}cher.test/?<",
                "http://xn--bcher-kva.test/?%3C",
            ),
        ] {
            for uri in converted(given) {
                assert_eq!(uri.unwrap().to_string(), read, "{given}");
            }
        }
    }

    proptest::proptest! {
        /// Text of an `http` URL whose path and query hold any mix of what
        /// is encoded and what is not (no control character) is a URI: its
        /// target ASCII, and read again — as text or as an `http::Uri` —
        /// the same (nothing encoded twice: a `%` is never encoded).
        #[test]
        fn any_path_and_query_is_encoded_once(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "/", "?", "#", "%", "%C3%A4", "%4", "a", "..", "=", "&", " ", "<", ">",
                    "`", "\"", "'", "{", "}", "\\", "^", "|", "\u{e4}", "\u{1f600}",
                ]),
                0..12,
            ),
        ) {
            // Ended with a letter: a space at the end is refused (see
            // `a_control_character_or_a_space_at_the_end_is_an_invalid_uri`).
            let text = format!("http://a.test/{}a", pieces.concat());
            let uri = text.as_str().into_uri();
            proptest::prop_assert!(uri.is_ok(), "{:?}: {:?}", text, uri);
            let uri = uri.unwrap();
            let target = uri.path_and_query().map_or("", |target| target.as_str());
            proptest::prop_assert!(target.is_ascii(), "{:?}: {}", text, uri);
            let shown = uri.to_string();
            let again = shown.as_str().into_uri().map(|again| again.to_string()).ok();
            proptest::prop_assert_eq!(again.as_deref(), Some(shown.as_str()));
            proptest::prop_assert_eq!(uri.clone().into_uri().ok(), Some(uri));
        }
    }

    /// A control character is not encoded, where a URL parser would drop
    /// a tab or a line break and encode the others: the request is not
    /// sent with a guess. Nor is a space at the text's end, which a URL
    /// parser would drop. Bytes that are not UTF-8 are not read at all.
    #[test]
    fn a_control_character_or_a_space_at_the_end_is_an_invalid_uri() {
        for given in [
            "http://a.test/a b\r\nX: y",
            "http://a.test/\u{e4}\n",
            "http://a.test/\u{e4}?\u{7f}",
            "http://a.test/\u{e4} ",
            "http://a.test/\u{e4}? ",
            "http://a b/\u{e4}",
        ] {
            for error in converted(given) {
                let error = error.unwrap_err();
                let InvalidRequest::Uri { uri, .. } = &error else {
                    panic!("{given:?}: {error:?}");
                };
                assert_eq!(uri, given);
            }
        }
        let error = b"http://a.test/\xe4 b"[..].into_uri().unwrap_err();
        assert!(matches!(error, InvalidRequest::Uri { .. }), "{error:?}");
        let error = "a.test/\u{e4} b".into_uri().unwrap_err();
        assert!(matches!(error, InvalidRequest::Scheme(_)), "{error:?}");
    }

    /// After `http:` the URL standard skips any number of slashes, and
    /// so does [`authority_range`]: the host of `http:///host/` is read as
    /// that standard reads it. `http` takes no such text all the same (its
    /// authority is empty).
    #[test]
    fn a_host_after_more_than_two_slashes_is_read_and_the_text_still_refused() {
        for error in converted("http:///ex%2Fample.test/") {
            let error = error.unwrap_err();
            assert!(matches!(error, InvalidRequest::Host(_)), "{error:?}");
        }
        for given in ["http:///b\u{fc}cher.test/", "http:///a b", "http:///"] {
            for error in converted(given) {
                let error = error.unwrap_err();
                assert!(
                    matches!(error, InvalidRequest::Uri { .. }),
                    "{given}: {error:?}"
                );
            }
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
