//! Tests: byte literals fed through the states, malformed input, truncation
//! at every point, arbitrary splits, and request encoding.

use http::{HeaderMap, Method, StatusCode, Uri, Version};
use proptest::prelude::*;

use super::*;

fn limits() -> Limits {
    Limits::default()
}

/// Decodes `bytes` whole (EOF at the end) and expects success.
fn ok(bytes: &[u8]) -> DecodedResponse {
    decode_all(limits(), false, bytes, true).unwrap()
}

/// Decodes `bytes` whole (EOF at the end) and expects an error.
fn err(bytes: &[u8]) -> DecodeError {
    decode_all(limits(), false, bytes, true).unwrap_err()
}

fn err_with(limits: Limits, bytes: &[u8]) -> DecodeError {
    decode_all(limits, false, bytes, true).unwrap_err()
}

fn head_of(decoded: Decoded<'_>) -> ResponseHead {
    match decoded {
        Decoded::Head(h) => h,
        other => panic!("expected a head, got {other:?}"),
    }
}

// ---------------------------------------------------------------- round trips

#[test]
fn content_length_step_by_step() {
    let mut d = ResponseDecoder::new(limits(), false, true);
    assert!(!d.bytes_seen());
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel";
    let (n, decoded) = d.decode(input).unwrap();
    assert_eq!(n, 38);
    let head = head_of(decoded);
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(head.version, Version::HTTP_11);
    assert_eq!(head.headers["content-length"], "5");
    assert!(d.bytes_seen() && d.head_received() && !d.is_done());

    assert_eq!(d.decode(b"hel").unwrap(), (3, Decoded::Body(b"hel")));
    assert_eq!(d.decode(b"").unwrap(), (0, Decoded::NeedMore));
    // Bytes after the body are not consumed.
    assert_eq!(d.decode(b"loHTTP").unwrap(), (2, Decoded::Body(b"lo")));
    assert_eq!(
        d.decode(b"HTTP").unwrap(),
        (0, Decoded::Done { keep_alive: true })
    );
    assert!(d.is_done());
    // Done repeats and consumes nothing.
    assert_eq!(
        d.decode(b"x").unwrap(),
        (0, Decoded::Done { keep_alive: true })
    );
}

#[test]
fn partial_head_is_not_consumed() {
    let mut d = ResponseDecoder::new(limits(), false, true);
    assert_eq!(
        d.decode(b"HTTP/1.1 200 OK\r\nConte").unwrap(),
        (0, Decoded::NeedMore)
    );
    assert!(d.bytes_seen() && !d.head_received());
    let all = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(d.decode(all).unwrap().0, all.len());
    assert_eq!(
        d.decode(b"").unwrap(),
        (0, Decoded::Done { keep_alive: true })
    );
}

#[test]
fn chunked_with_extensions_and_trailers_step_by_step() {
    let mut d = ResponseDecoder::new(limits(), false, true);
    let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let (n, decoded) = d.decode(head).unwrap();
    assert_eq!(n, head.len());
    head_of(decoded);
    // Size line with extensions, then data, in one call.
    assert_eq!(
        d.decode(b"4;a=b;c=\"d\"\r\nwiki").unwrap(),
        (17, Decoded::Body(b"wiki"))
    );
    // CRLF after data and a partial size line are consumed; data is not there yet.
    assert_eq!(d.decode(b"\r\n5 ;x\r").unwrap(), (7, Decoded::NeedMore));
    assert_eq!(d.decode(b"\npedia").unwrap(), (6, Decoded::Body(b"pedia")));
    // Last chunk consumed; trailers incomplete stay unconsumed.
    assert_eq!(
        d.decode(b"\r\n0\r\nExpires: ").unwrap(),
        (5, Decoded::NeedMore)
    );
    let (n, decoded) = d.decode(b"Expires: never\r\nX-A: 1\r\n\r\nNEXT").unwrap();
    assert_eq!(n, 26);
    let Decoded::Trailers(t) = decoded else {
        panic!("expected trailers, got {decoded:?}")
    };
    assert_eq!(t.len(), 2);
    assert_eq!(t["expires"], "never");
    assert_eq!(
        d.decode(b"NEXT").unwrap(),
        (0, Decoded::Done { keep_alive: true })
    );
}

#[test]
fn chunked_without_trailers_ends_without_trailers_event() {
    let (head, body, trailers, keep_alive) = ok(
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n3\r\nabc\r\nA\r\n0123456789\r\n000\r\n\r\n",
    );
    assert_eq!(head.status, 200);
    assert_eq!(body, b"abc0123456789");
    assert_eq!(trailers, None);
    assert!(keep_alive);
}

#[test]
fn close_delimited_ends_at_eof() {
    let mut d = ResponseDecoder::new(limits(), false, true);
    let input = b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\nabc";
    let (n, decoded) = d.decode(input).unwrap();
    head_of(decoded);
    assert_eq!(d.decode(&input[n..]).unwrap(), (3, Decoded::Body(b"abc")));
    assert_eq!(d.decode(b"").unwrap(), (0, Decoded::NeedMore));
    assert_eq!(d.decode(b"def").unwrap(), (3, Decoded::Body(b"def")));
    assert_eq!(d.eof().unwrap(), Decoded::Done { keep_alive: false });
    assert!(d.is_done());
}

#[test]
fn head_request_has_no_body() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nHTTP/1.1";
    let mut d = ResponseDecoder::new(limits(), true, true);
    let (n, decoded) = d.decode(input).unwrap();
    assert_eq!(head_of(decoded).headers["content-length"], "1000");
    assert_eq!(
        d.decode(&input[n..]).unwrap(),
        (0, Decoded::Done { keep_alive: true })
    );
    // Chunked and unknown codings do not matter either.
    let r = decode_all(
        limits(),
        true,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        false,
    );
    assert_eq!(r.unwrap().1, b"");
    // A large Content-Length is not a body over the limit.
    let small = Limits {
        max_body_bytes: Some(10),
        ..limits()
    };
    assert!(decode_all(small, true, input, false).is_ok());
}

#[test]
fn no_content_and_not_modified_have_no_body() {
    for input in [
        &b"HTTP/1.1 204 No Content\r\n\r\nleftover"[..],
        b"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nETag: \"a\"\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    ] {
        let (_, body, trailers, keep_alive) = decode_all(limits(), false, input, false).unwrap();
        assert_eq!(body, b"");
        assert_eq!(trailers, None);
        assert!(keep_alive);
    }
}

#[test]
fn interim_responses_are_skipped() {
    let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n\
HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n\
HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let mut d = ResponseDecoder::new(limits(), false, true);
    let (n, decoded) = d.decode(input).unwrap();
    let head = head_of(decoded);
    assert_eq!(head.status, StatusCode::OK);
    assert!(!head.headers.contains_key("link"));
    assert_eq!(d.decode(&input[n..]).unwrap(), (2, Decoded::Body(b"ok")));

    // An interim head alone is consumed; the final head may come later.
    let mut d = ResponseDecoder::new(limits(), false, true);
    assert_eq!(
        d.decode(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2")
            .unwrap(),
        (25, Decoded::NeedMore)
    );
    assert!(!d.head_received());
    assert_eq!(d.eof(), Err(DecodeError::Truncated { stage: Stage::Head }));
}

#[test]
fn http10_keep_alive_rules() {
    let cases: [(&[u8], bool); 5] = [
        (b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false),
        (
            b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\nx",
            true,
        ),
        (
            b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: Keep-Alive\r\n\r\nx",
            true,
        ),
        // Close-delimited never keeps the connection.
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nx", false),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", true),
    ];
    for (input, expected) in cases {
        let (head, body, _, keep_alive) = ok(input);
        assert_eq!(body, b"x");
        assert_eq!(keep_alive, expected, "{}", String::from_utf8_lossy(input));
        if input.starts_with(b"HTTP/1.0") {
            assert_eq!(head.version, Version::HTTP_10);
        }
    }
}

#[test]
fn connection_close() {
    for input in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: Upgrade, CLOSE\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\nConnection: foo\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx",
        b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive, close\r\n\r\nx",
    ] {
        assert!(!ok(input).3, "{}", String::from_utf8_lossy(input));
    }
    // "closed" is not "close".
    assert!(ok(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: closed\r\n\r\nx").3);
    // The request said Connection: close.
    let mut d = ResponseDecoder::new(limits(), false, false);
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    d.decode(input).unwrap();
    assert_eq!(
        d.decode(b"").unwrap().1,
        Decoded::Done { keep_alive: false }
    );
}

#[test]
fn identical_content_lengths_are_one() {
    for input in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length:  02 \r\n\r\nok",
    ] {
        assert_eq!(ok(input).1, b"ok");
    }
}

#[test]
fn lenient_but_valid_forms() {
    // Empty lines before the status line, no reason phrase, bare LF line ends.
    let (head, body, _, _) = ok(b"\r\nHTTP/1.1 404\r\nContent-Length: 1\r\n\r\nx");
    assert_eq!(head.status, StatusCode::NOT_FOUND);
    assert_eq!(body, b"x");
    assert_eq!(ok(b"HTTP/1.1 200 OK\nContent-Length: 1\n\nx").1, b"x");
    // Status codes up to 999 and obs-text in the reason phrase.
    assert_eq!(
        ok(b"HTTP/1.1 999 \xffx\r\nContent-Length: 0\r\n\r\n")
            .0
            .status,
        999
    );
    // Leading zeros in a chunk size, whitespace before an extension.
    let input =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0003 \t;e\r\nabc\r\n0\r\n\r\n";
    assert_eq!(ok(input).1, b"abc");
}

// ----------------------------------------------------------- malformed input

#[test]
fn status_line_errors() {
    use DecodeError::*;
    let cases: [(&[u8], DecodeError); 12] = [
        (b"HTTX/1.1 200 OK\r\n\r\n", InvalidStatusLine),
        (b"garbage\r\n\r\n", InvalidStatusLine),
        (b"HTTP/1.1\r\n\r\n", InvalidStatusLine),
        (b"HTTP/1.1 200 O\x01K\r\n\r\n", InvalidStatusLine),
        (b"HTTP/1.1  200 OK\r\n\r\n", InvalidStatusCode),
        (b"HTTP/2.0 200 OK\r\n\r\n", BadVersion),
        (b"HTTP/1.2 200 OK\r\n\r\n", BadVersion),
        (b"HTTP/1 200 OK\r\n\r\n", BadVersion),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", InvalidStatusCode),
        (b"HTTP/1.1 20 OK\r\n\r\n", InvalidStatusCode),
        (b"HTTP/1.1 1000 OK\r\n\r\n", InvalidStatusCode),
        (b"HTTP/1.1 099 OK\r\n\r\n", InvalidStatusCode),
    ];
    for (input, expected) in cases {
        assert_eq!(err(input), expected, "{}", String::from_utf8_lossy(input));
    }
    assert_eq!(err(b"HTTP/1.1 000 OK\r\n\r\n"), InvalidStatusCode);
    assert_eq!(InvalidStatusLine.to_string(), "invalid status line");
}

#[test]
fn header_errors() {
    use DecodeError::*;
    let cases: [(&[u8], DecodeError); 10] = [
        (b"HTTP/1.1 200 OK\r\nFo o: x\r\n\r\n", InvalidHeaderName),
        (b"HTTP/1.1 200 OK\r\nFoo\x01: x\r\n\r\n", InvalidHeaderName),
        (b"HTTP/1.1 200 OK\r\n: x\r\n\r\n", InvalidHeaderName),
        (b"HTTP/1.1 200 OK\r\nFoo : x\r\n\r\n", InvalidHeaderName),
        (
            b"HTTP/1.1 200 OK\r\nFoo: a\x01b\r\n\r\n",
            InvalidHeaderValue,
        ),
        (b"HTTP/1.1 200 OK\r\nFoo: a\rb\r\n\r\n", InvalidHeaderValue),
        (b"HTTP/1.1 200 OK\r\nFoo: a\x7f\r\n\r\n", InvalidHeaderValue),
        (b"HTTP/1.1 200 OK\r\nFoo\r\n\r\n", HeaderWithoutColon),
        (
            b"HTTP/1.1 200 OK\r\nA: 1\r\nno colon here\r\n\r\n",
            HeaderWithoutColon,
        ),
        (b"HTTP/1.1 200 OK\r\nFoo: a\r\n b\r\n\r\n", ObsFold),
    ];
    for (input, expected) in cases {
        assert_eq!(err(input), expected, "{}", String::from_utf8_lossy(input));
    }
    assert_eq!(err(b"HTTP/1.1 200 OK\r\nFoo: a\r\n\tb\r\n\r\n"), ObsFold);
    assert_eq!(HeaderWithoutColon.to_string(), "header without colon");
}

#[test]
fn head_limits() {
    let small = Limits {
        max_head_bytes: 40,
        ..limits()
    };
    // Checked on buffered input while still incomplete.
    let mut d = ResponseDecoder::new(small, false, true);
    let partial = b"HTTP/1.1 200 OK\r\nX-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    assert_eq!(d.decode(&partial[..40]).unwrap(), (0, Decoded::NeedMore));
    assert_eq!(
        d.decode(partial),
        Err(DecodeError::HeadTooLarge { limit: 40 })
    );
    // And on a complete head.
    let long = b"HTTP/1.1 200 OK\r\nX-Long: aaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    assert_eq!(
        err_with(small, long),
        DecodeError::HeadTooLarge { limit: 40 }
    );
    // Exactly at the limit is fine.
    let exact = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let fits = Limits {
        max_head_bytes: exact.len(),
        ..limits()
    };
    assert!(decode_all(fits, false, exact, false).is_ok());

    let few = Limits {
        max_headers: 2,
        ..limits()
    };
    let three = b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert_eq!(
        err_with(few, three),
        DecodeError::TooManyHeaders { limit: 2 }
    );
    let two = b"HTTP/1.1 200 OK\r\nA: 1\r\nContent-Length: 0\r\n\r\n";
    assert!(decode_all(few, false, two, false).is_ok());

    // No limit to speak of: as many as the head holds, and no huge
    // allocation for the slots (`usize::MAX` of them would not fit).
    let unlimited = Limits {
        max_headers: usize::MAX,
        ..limits()
    };
    assert!(decode_all(unlimited, false, two, false).is_ok());
    let chunked_with_trailers =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nT: 1\r\nU: 2\r\n\r\n";
    assert!(decode_all(unlimited, false, chunked_with_trailers, false).is_ok());
    // Tightly packed fields, exactly as many as the limit: all fit.
    let packed = b"HTTP/1.1 200 OK\r\na:\r\nb:\r\nContent-Length: 0\r\n\r\n";
    let three_fields = Limits {
        max_headers: 3,
        ..limits()
    };
    assert!(decode_all(three_fields, false, packed, false).is_ok());
}

#[test]
fn content_length_errors() {
    use DecodeError::*;
    for value in [
        "abc",
        "-1",
        "+5",
        "5 5",
        "",
        "5,",
        "0x5",
        "18446744073709551616",
    ] {
        let input = format!("HTTP/1.1 200 OK\r\nContent-Length: {value}\r\n\r\n");
        assert_eq!(err(input.as_bytes()), InvalidContentLength, "{value:?}");
    }
    let e = err(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello");
    assert_eq!(
        e,
        ConflictingContentLength {
            first: 5,
            second: 6
        }
    );
    assert_eq!(e.to_string(), "conflicting Content-Length values 5 and 6");
    assert_eq!(
        err(b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello"),
        ConflictingContentLength {
            first: 5,
            second: 6
        }
    );
    assert_eq!(
        err(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
        ContentLengthWithTransferEncoding
    );
    assert_eq!(
        err(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"),
        ContentLengthWithTransferEncoding
    );
}

#[test]
fn transfer_coding_errors() {
    for value in [
        "gzip, chunked",
        "gzip",
        "chunked, gzip",
        "identity",
        "chunked, chunked",
        "",
    ] {
        let input = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: {value}\r\n\r\n");
        assert!(
            matches!(err(input.as_bytes()), DecodeError::UnknownTransferCoding(_)),
            "{value:?}"
        );
    }
    let e =
        err(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(
        e,
        DecodeError::UnknownTransferCoding("gzip, chunked".into())
    );
}

const CHUNKED_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

fn chunked(body: &[u8]) -> Vec<u8> {
    [CHUNKED_HEAD, body].concat()
}

#[test]
fn chunk_errors() {
    use DecodeError::*;
    let cases: [(&[u8], DecodeError); 11] = [
        (b"zz\r\n", InvalidChunkSize),
        (b"\r\n", InvalidChunkSize),
        (b";ext\r\n", InvalidChunkSize),
        (b" 5\r\n", InvalidChunkSize),
        (b"5 5\r\nhello\r\n", InvalidChunkSize),
        (b"fffffffffffffffff\r\n", ChunkSizeOverflow),
        (b"5\nhello\r\n", MissingCrlfAfterChunkSize),
        (b"5\rxhello\r\n", MissingCrlfAfterChunkSize),
        (b"5;e\nhello\r\n", MissingCrlfAfterChunkSize),
        (b"5\r\nhelloX\r\n0\r\n\r\n", MissingCrlfAfterChunkData),
        (b"5\r\nhello\rX0\r\n\r\n", MissingCrlfAfterChunkData),
    ];
    for (body, expected) in cases {
        assert_eq!(
            err(&chunked(body)),
            expected,
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    // The largest size fits (and is then over any body limit, or truncated).
    assert_eq!(
        err(&chunked(b"ffffffffffffffff\r\n")),
        Truncated {
            stage: Stage::ChunkedBody
        }
    );
    let ext = format!(
        "1;{}\r\nx\r\n",
        "e".repeat(MAX_CHUNK_EXTENSION_BYTES as usize + 1)
    );
    assert_eq!(
        err(&chunked(ext.as_bytes())),
        ChunkExtensionsTooLarge {
            limit: MAX_CHUNK_EXTENSION_BYTES
        }
    );
}

#[test]
fn trailer_errors() {
    use DecodeError::*;
    let small = Limits {
        max_trailer_bytes: 16,
        ..limits()
    };
    let body = chunked(b"0\r\nX-Trailer: 0123456789\r\n\r\n");
    assert_eq!(err_with(small, &body), TrailersTooLarge { limit: 16 });
    // Checked while incomplete too.
    let body = chunked(b"0\r\nX-Trailer: 0123456789");
    assert_eq!(
        decode_all(small, false, &body, false),
        Err(TrailersTooLarge { limit: 16 })
    );
    let fits = chunked(b"0\r\nX-T: 1\r\n\r\n");
    assert_eq!(
        decode_all(small, false, &fits, false).unwrap().2.unwrap()["x-t"],
        "1"
    );
    assert_eq!(err(&chunked(b"0\r\nX-T 1\r\n\r\n")), HeaderWithoutColon);
    assert_eq!(err(&chunked(b"0\r\nX-T: 1\r\n 2\r\n\r\n")), ObsFold);
    assert_eq!(err(&chunked(b"0\r\nX T: 1\r\n\r\n")), InvalidHeaderName);
    assert_eq!(err(&chunked(b"0\r\nX-T: \x01\r\n\r\n")), InvalidHeaderValue);
    let few = Limits {
        max_headers: 1,
        ..limits()
    };
    assert_eq!(
        err_with(few, &chunked(b"0\r\nA: 1\r\nB: 2\r\n\r\n")),
        TooManyHeaders { limit: 1 }
    );
}

#[test]
fn body_limits() {
    let small = Limits {
        max_body_bytes: Some(5),
        ..limits()
    };
    let e = DecodeError::BodyTooLarge { limit: 5 };
    // A declared length over the limit fails at the head.
    let mut d = ResponseDecoder::new(small, false, true);
    assert_eq!(
        d.decode(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n"),
        Err(e.clone())
    );
    assert_eq!(d.decode(b""), Err(e.clone()), "the error repeats");
    assert_eq!(d.eof(), Err(e.clone()));
    assert!(decode_all(
        small,
        false,
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        false
    )
    .is_ok());
    // Chunked: fails as soon as the sizes add up to more.
    assert_eq!(err_with(small, &chunked(b"3\r\nabc\r\n3\r\n")), e);
    assert!(decode_all(
        small,
        false,
        &chunked(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"),
        false
    )
    .is_ok());
    // Close-delimited.
    assert_eq!(err_with(small, b"HTTP/1.1 200 OK\r\n\r\nhello!"), e);
    assert_eq!(ok(b"HTTP/1.1 200 OK\r\n\r\nhello!").1, b"hello!");
}

#[test]
fn switching_protocols_is_an_error() {
    assert_eq!(
        err(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"),
        DecodeError::SwitchingProtocols
    );
}

#[test]
fn truncated_stages() {
    use Stage::*;
    let cases: [(&[u8], Stage); 6] = [
        (b"", Head),
        (b"HTTP/1.1 200 OK\r\n", Head),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhell",
            LengthBody,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
            ChunkedBody,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r",
            ChunkedBody,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: 1\r\n",
            Trailers,
        ),
    ];
    for (input, stage) in cases {
        let e = err(input);
        assert_eq!(e, DecodeError::Truncated { stage });
        assert!(
            e.to_string().starts_with("connection closed inside "),
            "{e}"
        );
    }
    assert_eq!(
        decode_all(limits(), false, b"HTTP/1.1 200 OK\r\n\r\nab", false),
        Err(DecodeError::Truncated {
            stage: CloseDelimitedBody
        })
    );
}

// ------------------------------------------------------- truncation everywhere

/// Valid samples: (bytes, close-delimited head length if close-delimited).
fn samples() -> Vec<(Vec<u8>, Option<usize>)> {
    let close_head = b"HTTP/1.1 200 OK\r\nServer: t\r\n\r\n";
    vec![
        (b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world".to_vec(), None),
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nabc".to_vec(),
            None,
        ),
        (
            chunked(b"4;a=1\r\nwiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\nX-B: 2\r\n\r\n"),
            None,
        ),
        (chunked(b"1\r\nx\r\n0\r\n\r\n"), None),
        ([&close_head[..], b"close-delimited body"].concat(), Some(close_head.len())),
    ]
}

#[test]
fn truncation_at_every_point() {
    for (sample, close_head) in samples() {
        let full = decode_all(limits(), false, &sample, true).unwrap();
        for k in 0..sample.len() {
            let prefix = &sample[..k];
            let result = decode_all(limits(), false, prefix, true);
            match close_head {
                Some(head_len) if k >= head_len => {
                    let (head, body, trailers, keep_alive) = result.unwrap();
                    assert_eq!(head, full.0);
                    assert_eq!(body, &sample[head_len..k]);
                    assert_eq!(trailers, None);
                    assert!(!keep_alive);
                }
                _ => assert!(
                    matches!(result, Err(DecodeError::Truncated { .. })),
                    "prefix {k} of {:?}: {result:?}",
                    String::from_utf8_lossy(&sample)
                ),
            }
        }
    }
}

// ------------------------------------------------------------ property tests

#[path = "test_pieces.rs"]
mod test_pieces;
use test_pieces::split_at_points;

/// A chunked response built with the encoder, with optional trailers.
fn chunked_response(chunks: &[Vec<u8>], trailer: Option<&str>) -> Vec<u8> {
    let mut out = CHUNKED_HEAD.to_vec();
    for c in chunks {
        encode_chunk(c, &mut out);
    }
    match trailer {
        None => encode_last_chunk(&mut out),
        Some(t) => out.extend_from_slice(format!("0\r\nX-T: {t}\r\n\r\n").as_bytes()),
    }
    out
}

proptest! {
    #[test]
    fn any_split_decodes_the_same(
        which in 0usize..5,
        points in proptest::collection::vec(any::<usize>(), 0..12),
        eof in any::<bool>(),
    ) {
        let (sample, close_head) = samples().swap_remove(which);
        let eof = eof || close_head.is_some();
        let whole = decode_all(limits(), false, &sample, eof).unwrap();
        let pieces = split_at_points(&sample, &points);
        let split = decode_pieces(limits(), false, &pieces, eof).unwrap();
        prop_assert_eq!(whole, split);
    }

    #[test]
    fn any_split_of_generated_chunked_decodes_the_same(
        chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..6),
        trailer in proptest::option::of("[a-z]{1,8}"),
        points in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let bytes = chunked_response(&chunks, trailer.as_deref());
        let whole = decode_all(limits(), false, &bytes, false).unwrap();
        prop_assert_eq!(&whole.1, &chunks.concat());
        prop_assert_eq!(whole.2.as_ref().map(|t| t["x-t"].to_str().unwrap().to_owned()), trailer);
        let split = decode_pieces(limits(), false, &split_at_points(&bytes, &points), false).unwrap();
        prop_assert_eq!(whole, split);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        prefix in 0usize..4,
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
        points in proptest::collection::vec(any::<usize>(), 0..8),
        is_head in any::<bool>(),
        eof in any::<bool>(),
        small in any::<bool>(),
    ) {
        let prefixes: [&[u8]; 4] = [
            b"",
            b"HTTP/1.1 200 OK\r\n",
            CHUNKED_HEAD,
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
        ];
        let input = [prefixes[prefix], &bytes].concat();
        let limits = if small {
            Limits { max_head_bytes: 64, max_headers: 3, max_body_bytes: Some(16), max_trailer_bytes: 16 }
        } else {
            limits()
        };
        let whole = decode_all(limits, is_head, &input, eof);
        let split = decode_pieces(limits, is_head, &split_at_points(&input, &points), eof);
        // Valid input decodes the same however it is split.
        if let (Ok(whole), Ok(split)) = (&whole, &split) {
            prop_assert_eq!(whole, split);
        }
    }
}

// ---------------------------------------------------------- request encoding

fn encode(
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: RequestBody,
) -> Result<String, EncodeError> {
    let uri: Uri = uri.parse().unwrap();
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    let mut out = b"prefix:".to_vec();
    let result = encode_request_head(&method, &uri, &map, body, &mut out);
    let out = String::from_utf8(out).unwrap();
    let written = out.strip_prefix("prefix:").unwrap().to_owned();
    match result {
        Ok(()) => Ok(written),
        Err(e) => {
            assert_eq!(written, "", "nothing is written on error");
            Err(e)
        }
    }
}

#[test]
fn encodes_get_with_query() {
    assert_eq!(
        encode(
            Method::GET,
            "http://example.com/a/b?x=1&y",
            &[("accept", "*/*")],
            RequestBody::Empty
        )
        .unwrap(),
        "GET /a/b?x=1&y HTTP/1.1\r\nHost: example.com\r\naccept: */*\r\n\r\n"
    );
    assert_eq!(
        encode(
            Method::GET,
            "https://example.com:8443",
            &[],
            RequestBody::Empty
        )
        .unwrap(),
        "GET / HTTP/1.1\r\nHost: example.com:8443\r\n\r\n"
    );
    assert_eq!(
        encode(Method::GET, "http://example.com?q", &[], RequestBody::Empty).unwrap(),
        "GET /?q HTTP/1.1\r\nHost: example.com\r\n\r\n"
    );
    assert_eq!(
        encode(
            Method::GET,
            "http://user:pw@[::1]:8080/",
            &[],
            RequestBody::Empty
        )
        .unwrap(),
        "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"
    );
    // No Content-Length for a bodiless GET or DELETE.
    assert_eq!(
        encode(Method::DELETE, "http://h/x", &[], RequestBody::Empty).unwrap(),
        "DELETE /x HTTP/1.1\r\nHost: h\r\n\r\n"
    );
}

#[test]
fn encodes_post_with_length() {
    assert_eq!(
        encode(
            Method::POST,
            "http://h/submit",
            &[("content-type", "text/plain")],
            RequestBody::Length(5)
        )
        .unwrap(),
        "POST /submit HTTP/1.1\r\nHost: h\r\ncontent-type: text/plain\r\nContent-Length: 5\r\n\r\n"
    );
    for method in [Method::POST, Method::PUT, Method::PATCH] {
        let head = encode(method.clone(), "http://h/", &[], RequestBody::Empty).unwrap();
        assert_eq!(
            head,
            format!("{method} / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")
        );
    }
    // A matching caller header is kept and not repeated.
    assert_eq!(
        encode(
            Method::PUT,
            "http://h/",
            &[("content-length", "5")],
            RequestBody::Length(5)
        )
        .unwrap(),
        "PUT / HTTP/1.1\r\nHost: h\r\ncontent-length: 5\r\n\r\n"
    );
}

#[test]
fn encodes_chunked() {
    assert_eq!(
        encode(Method::POST, "http://h/up", &[], RequestBody::Chunked).unwrap(),
        "POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    assert_eq!(
        encode(
            Method::POST,
            "http://h/up",
            &[("transfer-encoding", "chunked")],
            RequestBody::Chunked
        )
        .unwrap(),
        "POST /up HTTP/1.1\r\nHost: h\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    let mut out = Vec::new();
    encode_chunk(b"hello", &mut out);
    encode_chunk(b"", &mut out);
    encode_chunk(&[b'x'; 26], &mut out);
    encode_last_chunk(&mut out);
    let expected = [&b"5\r\nhello\r\n1a\r\n"[..], &[b'x'; 26], b"\r\n0\r\n\r\n"].concat();
    assert_eq!(out, expected);
    let mut out = Vec::new();
    encode_chunk(b"", &mut out);
    assert!(out.is_empty());
}

#[test]
fn host_header_present_or_absent() {
    assert_eq!(
        encode(
            Method::GET,
            "http://example.com/",
            &[("host", "other.example")],
            RequestBody::Empty
        )
        .unwrap(),
        "GET / HTTP/1.1\r\nhost: other.example\r\n\r\n"
    );
    assert_eq!(
        encode(Method::GET, "http://example.com/", &[], RequestBody::Empty).unwrap(),
        "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"
    );
}

/// Header (name, value) pairs for a request.
type Headers<'a> = &'a [(&'a str, &'a str)];

#[test]
fn framing_conflicts() {
    use EncodeError::*;
    let cases: [(Headers<'_>, RequestBody, EncodeError); 10] = [
        (
            &[("content-length", "6")],
            RequestBody::Length(5),
            ConflictingContentLength,
        ),
        (
            &[("content-length", "5"), ("content-length", "6")],
            RequestBody::Length(5),
            ConflictingContentLength,
        ),
        (
            &[("content-length", "3")],
            RequestBody::Empty,
            ConflictingContentLength,
        ),
        (
            &[("content-length", "3")],
            RequestBody::Chunked,
            ConflictingContentLength,
        ),
        (
            &[("transfer-encoding", "chunked")],
            RequestBody::Length(5),
            ConflictingTransferEncoding,
        ),
        (
            &[("transfer-encoding", "chunked")],
            RequestBody::Empty,
            ConflictingTransferEncoding,
        ),
        (
            &[("transfer-encoding", "gzip, chunked")],
            RequestBody::Chunked,
            ConflictingTransferEncoding,
        ),
        (
            &[
                ("transfer-encoding", "chunked"),
                ("transfer-encoding", "chunked"),
            ],
            RequestBody::Chunked,
            ConflictingTransferEncoding,
        ),
        (
            &[("host", "a.example"), ("host", "b.example")],
            RequestBody::Empty,
            DuplicateHost,
        ),
        (
            &[("host", "a.example"), ("host", "a.example")],
            RequestBody::Length(1),
            DuplicateHost,
        ),
    ];
    for (headers, body, expected) in cases {
        assert_eq!(
            encode(Method::POST, "http://h/", headers, body),
            Err(expected),
            "{headers:?} {body:?}"
        );
    }
}

#[test]
fn invalid_uris() {
    for uri in ["/relative", "ftp://h/file", "example.com:80", "*"] {
        assert_eq!(
            encode(Method::GET, uri, &[], RequestBody::Empty),
            Err(EncodeError::InvalidUri),
            "{uri}"
        );
    }
}

#[test]
fn request_and_response_exchange() {
    // The decoder reads a response the way a client loop does, after the encoder wrote a request.
    let mut out = Vec::new();
    let uri: Uri = "http://h/".parse().unwrap();
    encode_request_head(
        &Method::HEAD,
        &uri,
        &HeaderMap::new(),
        RequestBody::Empty,
        &mut out,
    )
    .unwrap();
    assert_eq!(out, b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n");
    let (head, body, _, keep_alive) = decode_all(
        limits(),
        true,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        false,
    )
    .unwrap();
    assert_eq!(head.status, 200);
    assert!(body.is_empty() && keep_alive);
}
