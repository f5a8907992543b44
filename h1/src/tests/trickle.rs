//! Bytes that trickle in: a head or trailer section is parsed again only
//! when a line ends (not on every byte, which is quadratic), and decodes
//! the same — response or error — as when it comes whole.

use super::*;
use crate::response::counts;

use super::test_pieces::split_at_points;

/// `bytes` fed one byte at a time, and how many parses that took.
fn bytewise(limits: Limits, bytes: &[u8]) -> (Result<DecodedResponse, DecodeError>, usize) {
    let pieces: Vec<&[u8]> = bytes.chunks(1).collect();
    let mut result = None;
    let parses = counts::during(&counts::PARSES, || {
        result = Some(decode_pieces(limits, false, &pieces, true))
    });
    (result.unwrap(), parses)
}

/// A head of `fields` lines of `value_len` bytes each, ending a response
/// with an empty body.
fn long_head(fields: usize, value_len: usize) -> Vec<u8> {
    let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..fields {
        head.extend_from_slice(format!("x-{i}: {}\r\n", "v".repeat(value_len)).as_bytes());
    }
    head.extend_from_slice(b"Content-Length: 0\r\n\r\n");
    head
}

#[test]
fn a_head_sent_a_byte_at_a_time_is_parsed_once_per_line() {
    let head = long_head(40, 1000);
    let (decoded, parses) = bytewise(limits(), &head);
    assert_eq!(decoded.unwrap(), ok(&head));
    // 43 lines. The first byte of each line is parsed too (a field one too
    // many is found there): two parses a line, and one at the start.
    assert!(
        parses <= 2 * 43 + 1,
        "{parses} parses for {} bytes",
        head.len()
    );
}

#[test]
fn empty_lines_before_a_head_are_not_parsed_again_and_again() {
    let mut input = vec![b'\n'; 2000];
    input.extend_from_slice(&[b'\r', b'\n'].repeat(1000));
    input.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
    let (decoded, parses) = bytewise(limits(), &input);
    assert_eq!(decoded.unwrap(), ok(&input));
    assert!(parses <= 4, "{parses} parses for {} bytes", input.len());
}

#[test]
fn trailers_sent_a_byte_at_a_time_are_parsed_once_per_line() {
    let mut input = with_chunked_head(b"1\r\nx\r\n0\r\n");
    for i in 0..10 {
        input.extend_from_slice(format!("x-t{i}: {}\r\n", "t".repeat(1000)).as_bytes());
    }
    input.extend_from_slice(b"\r\n");
    let (decoded, parses) = bytewise(limits(), &input);
    let whole = ok(&input);
    assert_eq!(whole.2.as_ref().map(HeaderMap::len), Some(10));
    assert_eq!(decoded.unwrap(), whole);
    // Three head lines, eleven trailer lines: two parses each, and one at
    // the start of each section.
    assert!(
        parses <= 2 * 14 + 2,
        "{parses} parses for {} bytes",
        input.len()
    );
}

#[test]
fn a_field_one_too_many_is_found_the_same_however_it_comes() {
    let limits = Limits {
        max_headers: 2,
        ..limits()
    };
    for (tail, expected) in [
        ("c", DecodeError::Truncated { stage: Stage::Head }),
        ("c: 3", DecodeError::Truncated { stage: Stage::Head }),
        ("c: 3\r\n", DecodeError::TooManyHeaders { limit: 2 }),
    ] {
        let input = format!("HTTP/1.1 200 OK\r\na: 1\r\nb: 2\r\n{tail}");
        let whole = decode_all(limits, false, input.as_bytes(), true);
        assert_eq!(whole, Err(expected), "{tail:?}");
        assert_eq!(bytewise(limits, input.as_bytes()).0, whole, "{tail:?}");
    }
}

#[test]
fn the_shortest_field_lines_fit_however_they_come() {
    // `a:` and a bare LF: three bytes a field, which httparse takes. Room
    // for fields reckoned at four bytes a line was too little for them.
    let mut input = b"HTTP/1.1 200 OK\n".to_vec();
    input.extend_from_slice(&b"a:\n".repeat(60));
    input.extend_from_slice(b"Content-Length: 0\n\n");
    let whole = ok(&input);
    assert_eq!(whole.0.headers.get_all("a").iter().count(), 60);
    assert_eq!(bytewise(limits(), &input).0.unwrap(), whole);
}

/// Small limits, so that inputs from a few pieces reach them.
fn small_limits() -> Limits {
    Limits {
        max_head_bytes: 48,
        max_headers: 2,
        max_body_bytes: Some(16),
        max_trailer_bytes: 24,
    }
}

/// Pieces of head and trailer lines, malformed ones among them: what the
/// skipped parses could be wrong about (a line's first byte, a CR, an
/// empty line, a limit reached mid-line).
fn line_pieces() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(&b"\r\n"[..]),
        Just(&b"\n"[..]),
        Just(&b"\r"[..]),
        Just(&b"HTTP/1.1 200 OK"[..]),
        Just(&b"HTTP/1.1 1"[..]),
        Just(&b"00 Continue"[..]),
        Just(&b"a: b"[..]),
        Just(&b"Content-Length: 1"[..]),
        Just(&b"Transfer-Encoding: chunked"[..]),
        Just(&b"0\r\n"[..]),
        Just(&b" "[..]),
        Just(&b"x"[..]),
        Just(&b":"[..]),
        Just(&b"\x01"[..]),
    ];
    proptest::collection::vec(piece, 0..16).prop_map(|pieces| pieces.concat())
}

proptest! {
    #[test]
    fn trickled_lines_decode_as_whole_ones_do(
        input in line_pieces(),
        points in proptest::collection::vec(any::<usize>(), 0..8),
        small in any::<bool>(),
        eof in any::<bool>(),
    ) {
        let limits = if small { small_limits() } else { limits() };
        let whole = decode_all(limits, false, &input, eof);
        let bytewise: Vec<&[u8]> = input.chunks(1).collect();
        prop_assert_eq!(&decode_pieces(limits, false, &bytewise, eof), &whole);
        let split = split_at_points(&input, &points);
        prop_assert_eq!(&decode_pieces(limits, false, &split, eof), &whole);
    }
}
