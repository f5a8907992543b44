//! HTTP Basic credentials (RFC 7617), for an origin (`Authorization`,
//! from a URI's userinfo or `RequestBuilder::basic_auth`) and for an HTTP
//! proxy (`Proxy-Authorization`, from its URL's userinfo): which ones may
//! be sent, and their header value.

use base64::Engine;
use http::HeaderValue;

/// `Basic base64(user:password)`, marked sensitive (its `Debug` prints
/// `Sensitive`) — or `None` for credentials that cannot be sent (see
/// [`usable`]).
pub(crate) fn header(user: &[u8], password: &[u8]) -> Option<HeaderValue> {
    if !usable(user, password) {
        return None;
    }
    let mut pair = Vec::with_capacity(user.len() + 1 + password.len());
    pair.extend_from_slice(user);
    pair.push(b':');
    pair.extend_from_slice(password);
    let mut value = String::from("Basic ");
    base64::engine::general_purpose::STANDARD.encode_string(pair, &mut value);
    let mut header =
        HeaderValue::try_from(value).expect("`Basic ` and base64 make a valid header value");
    header.set_sensitive(true);
    Some(header)
}

/// Whether `user` and `password` can be sent as Basic credentials: RFC
/// 7617 §2 makes a user-id with a `:` invalid (the server takes the first
/// `:` for the end of the name), and forbids control characters (CTL:
/// 0x00-0x1F and 0x7F) in either.
fn usable(user: &[u8], password: &[u8]) -> bool {
    let control = |byte: &u8| byte.is_ascii_control();
    !user.contains(&b':') && !user.iter().any(control) && !password.iter().any(control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_rfc_7617s() {
        let value = header(b"Aladdin", b"open sesame").unwrap();
        assert_eq!(value, "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        assert!(value.is_sensitive());
        assert_eq!(header(b"", b"").unwrap(), "Basic Og==");
        assert_eq!(
            header("test".as_bytes(), "123£".as_bytes()).unwrap(),
            "Basic dGVzdDoxMjPCow=="
        );
    }

    #[test]
    fn a_colon_in_the_name_or_a_control_character_is_unusable() {
        assert!(header(b"alice", b"p:w").is_some());
        assert!(header(b"", b"").is_some());
        for (user, password) in [
            (&b"al:ice"[..], &b""[..]),
            (b"al\r\nice", b""),
            (b"alice\0", b"pw"),
            (b"alice", b"p\nw"),
            (b"alice", b"pw\x7f"),
        ] {
            assert!(header(user, password).is_none(), "{user:?} {password:?}");
        }
    }
}
