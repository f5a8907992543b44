//! Malformed input: every kind is a typed error, whatever the split.

use super::*;

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

/// The claim `to_header_map`'s `unsafe` rests on: a value the parser
/// takes, in a head or a trailer section, holds only bytes `HeaderValue`
/// takes. Each byte goes at each offset of a value long enough for
/// httparse's SIMD runs (16 and 32 bytes), amid letters and amid spaces
/// between two letters (a LF before a space would be obs-fold, were it
/// taken: the value would hold the LF). httparse picks its SIMD code by
/// CPU at run time: `scripts/test` runs this also with its SIMD off
/// (`CARGO_CFG_HTTPARSE_DISABLE_SIMD=1`), for the scalar code.
#[test]
fn every_value_byte_httparse_takes_is_one_header_value_takes() {
    let value_bytes_valid = |map: &HeaderMap| {
        map.values()
            .all(|v| http::HeaderValue::from_bytes(v.as_bytes()).is_ok())
    };
    for byte in 0..=u8::MAX {
        for filler in [b'a', b' '] {
            for at in 0..70 {
                let mut value = vec![filler; 70];
                (value[0], value[69]) = (b'a', b'a');
                value[at] = byte;
                let head = [b"HTTP/1.1 200 OK\r\nX: ".as_slice(), &value, b"\r\n\r\n"].concat();
                let mut scanned = crate::response::Scanned::default();
                let parsed = crate::response::parse_head(&head, &limits(), &mut scanned);
                if let Ok(Some((_, head))) = &parsed {
                    assert!(value_bytes_valid(&head.headers), "{byte:#04x} at {at}");
                }
                // Inside the value, httparse takes exactly these bytes:
                // the test does try every byte it takes.
                let inside = filler == b'a' && (1..69).contains(&at);
                let value_byte = matches!(byte, b'\t' | b' '..=0x7e | 0x80..);
                if inside {
                    let taken = matches!(parsed, Ok(Some(_)));
                    assert_eq!(taken, value_byte, "{byte:#04x} at {at}");
                }
                let trailers = [b"X: ".as_slice(), &value, b"\r\n\r\n"].concat();
                let mut scanned = crate::response::Scanned::default();
                let parsed = crate::response::parse_trailers(&trailers, &limits(), &mut scanned);
                if let Ok(Some((_, map))) = &parsed {
                    assert!(value_bytes_valid(map), "{byte:#04x} at {at}");
                }
                if inside {
                    let taken = matches!(parsed, Ok(Some(_)));
                    assert_eq!(taken, value_byte, "trailer: {byte:#04x} at {at}");
                }
            }
        }
    }
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

/// Heads and trailers with more fields than the parser keeps on the stack
/// (32) are parsed again with room for the limit's worth: every field is
/// there, in order, each value its own; one more than the limit is still
/// too many.
#[test]
fn more_fields_than_the_stack_holds() {
    let fields = |n: usize| -> String { (0..n).map(|i| format!("X-{i}: v{i}\r\n")).collect() };
    for n in [31, 32, 33, 40, 100] {
        let input = format!(
            "HTTP/1.1 200 OK\r\n{}Content-Length: 0\r\n\r\n",
            fields(n - 1)
        );
        let (head, ..) = decode_all(limits(), false, input.as_bytes(), false).unwrap();
        assert_eq!(head.headers.len(), n, "{n} fields");
        for (i, (name, value)) in head.headers.iter().take(n - 1).enumerate() {
            assert_eq!(name.as_str(), format!("x-{i}"));
            assert_eq!(value.as_bytes(), format!("v{i}").as_bytes());
        }
    }
    // The default limit is 100 fields.
    let input = format!(
        "HTTP/1.1 200 OK\r\n{}Content-Length: 0\r\n\r\n",
        fields(100)
    );
    assert_eq!(
        decode_all(limits(), false, input.as_bytes(), false).unwrap_err(),
        DecodeError::TooManyHeaders { limit: 100 }
    );
    let trailers = format!(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n{}\r\n",
        fields(40)
    );
    let (_, body, trailers, _) = decode_all(limits(), false, trailers.as_bytes(), false).unwrap();
    assert_eq!(body, b"x");
    let trailers = trailers.expect("trailers");
    assert_eq!(trailers.len(), 40);
    assert_eq!(trailers["x-39"], "v39");
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
        "chunked, gzip",
        "chunked, chunked",
        "",
        // `chunked` defines no parameters: with some it is not read as
        // chunked, nor as a coding the body runs to the close under (that
        // would hand out the chunk framing as body bytes).
        "chunked;x=1",
        "chunked ; x=1",
        "CHUNKED;",
        "gzip, chunked;x=1",
        "chunked;x=1, gzip",
        // Names that are no tokens name no coding: taken as one other
        // than `chunked`, `"chunked"` would frame the body by the close
        // and hand out the chunk framing as body bytes.
        "\"chunked\"",
        "chunked/1.1",
        "chun ked",
        "gzip, \"chunked\"",
        "gzip, ;q=1",
        "g(zip)",
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

/// RFC 9112 §6.3 rule 7: codings that do not end in `chunked` frame the
/// body by the close of the connection, which is then never reused.
#[test]
fn transfer_codings_not_ending_in_chunked_run_until_the_close() {
    for value in ["gzip", "identity", "gzip, deflate", "gzip;q=1", "x-chunked"] {
        let input = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: {value}\r\n\r\nraw bytes");
        let (head, body, _, keep_alive) = ok(input.as_bytes());
        assert_eq!(head.status, StatusCode::OK, "{value:?}");
        assert_eq!(body, b"raw bytes", "{value:?}");
        assert!(!keep_alive, "{value:?}");
        // Without the close, the body is not over.
        let cut = decode_all(limits(), false, input.as_bytes(), false).unwrap_err();
        assert_eq!(
            cut,
            DecodeError::Truncated {
                stage: Stage::CloseDelimitedBody
            },
            "{value:?}"
        );
    }
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
            err(&with_chunked_head(body)),
            expected,
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    // The largest size fits (and is then over any body limit, or truncated).
    assert_eq!(
        err(&with_chunked_head(b"ffffffffffffffff\r\n")),
        Truncated {
            stage: Stage::ChunkedBody
        }
    );
    // Padding in a size line that never ends: zeros before the size,
    // whitespace after it. Up to a kilobyte of it in each line is fine.
    for line in [
        format!("{}1\r\n", "0".repeat(2000)),
        format!("1{}\r\n", " ".repeat(2000)),
    ] {
        assert_eq!(err(&with_chunked_head(line.as_bytes())), InvalidChunkSize);
    }
    let padded = format!("{}1{}\r\nx\r\n", "0".repeat(1000), "\t".repeat(23));
    let fine = with_chunked_head(format!("{}0\r\n\r\n", padded.repeat(100)).as_bytes());
    let (_, body, _, _) = decode_all(limits(), false, &fine, false).unwrap();
    assert_eq!(body, b"x".repeat(100));
    let ext = format!(
        "1;{}\r\nx\r\n",
        "e".repeat(MAX_CHUNK_EXTENSION_BYTES as usize + 1)
    );
    assert_eq!(
        err(&with_chunked_head(ext.as_bytes())),
        ChunkExtensionsTooLarge {
            limit: MAX_CHUNK_EXTENSION_BYTES
        }
    );
}

/// A control byte in a chunk extension other than HTAB is refused, wherever
/// the inputs split the line; HTAB, obs-text and the grammar's own bytes
/// (`;`, `=`, quotes, a backslash) pass.
#[test]
fn chunk_extension_control_bytes() {
    use DecodeError::*;
    let cases: [(&[u8], DecodeError); 6] = [
        (b"5;a\0b\r\nhello\r\n0\r\n\r\n", InvalidChunkExtension),
        (b"5;a=\"x\0\"\r\nhello\r\n0\r\n\r\n", InvalidChunkExtension),
        (b"5;\x1b\r\nhello\r\n0\r\n\r\n", InvalidChunkExtension),
        (b"5;a\x7f\r\nhello\r\n0\r\n\r\n", InvalidChunkExtension),
        // A CR alone ends the line, which must then end with LF.
        (b"5;a\rb\r\nhello\r\n0\r\n\r\n", MissingCrlfAfterChunkSize),
        (b"5;a\n\r\nhello\r\n0\r\n\r\n", MissingCrlfAfterChunkSize),
    ];
    for (body, expected) in cases {
        let bytes = with_chunked_head(body);
        for at in CHUNKED_HEAD.len()..bytes.len() {
            let pieces = [&bytes[..at], &bytes[at..]];
            assert_eq!(
                decode_pieces(limits(), false, &pieces, true).unwrap_err(),
                expected,
                "{} split at {at}",
                String::from_utf8_lossy(body)
            );
        }
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(
            decode_pieces(limits(), false, &bytewise, true).unwrap_err(),
            expected
        );
    }
    let fine = with_chunked_head(b"5 ;\ta = \"q\\\"\xff\" ;b\t\r\nhello\r\n0;c=d\r\n\r\n");
    let bytewise: Vec<&[u8]> = fine.chunks(1).collect();
    let (_, body, _, _) = decode_pieces(limits(), false, &bytewise, true).unwrap();
    assert_eq!(body, b"hello");
}

#[test]
fn trailer_errors() {
    use DecodeError::*;
    let small = Limits {
        max_trailer_bytes: 16,
        ..limits()
    };
    let body = with_chunked_head(b"0\r\nX-Trailer: 0123456789\r\n\r\n");
    assert_eq!(err_with(small, &body), TrailersTooLarge { limit: 16 });
    // Checked while incomplete too.
    let body = with_chunked_head(b"0\r\nX-Trailer: 0123456789");
    assert_eq!(
        decode_all(small, false, &body, false),
        Err(TrailersTooLarge { limit: 16 })
    );
    let fits = with_chunked_head(b"0\r\nX-T: 1\r\n\r\n");
    assert_eq!(
        decode_all(small, false, &fits, false).unwrap().2.unwrap()["x-t"],
        "1"
    );
    assert_eq!(
        err(&with_chunked_head(b"0\r\nX-T 1\r\n\r\n")),
        HeaderWithoutColon
    );
    assert_eq!(
        err(&with_chunked_head(b"0\r\nX-T: 1\r\n 2\r\n\r\n")),
        ObsFold
    );
    assert_eq!(
        err(&with_chunked_head(b"0\r\nX T: 1\r\n\r\n")),
        InvalidHeaderName
    );
    assert_eq!(
        err(&with_chunked_head(b"0\r\nX-T: \x01\r\n\r\n")),
        InvalidHeaderValue
    );
    let few = Limits {
        max_headers: 1,
        ..limits()
    };
    assert_eq!(
        err_with(few, &with_chunked_head(b"0\r\nA: 1\r\nB: 2\r\n\r\n")),
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
    // A declared length over the limit: the head comes (a redirect acts on
    // it), then the body fails at once, before any of it is taken or
    // waited for.
    let mut d = ResponseDecoder::new(small, false, true);
    let head = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n";
    let (used, decoded) = d.decode(head).unwrap();
    assert_eq!(used, head.len());
    assert!(matches!(decoded, Decoded::Head(_)), "{decoded:?}");
    assert_eq!(d.decode(b""), Err(e.clone()));
    assert_eq!(d.decode(b"x"), Err(e.clone()), "the error repeats");
    assert_eq!(d.eof(), Err(e.clone()));
    assert!(decode_all(
        small,
        false,
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        false
    )
    .is_ok());
    // Chunked: fails as soon as the sizes add up to more.
    assert_eq!(err_with(small, &with_chunked_head(b"3\r\nabc\r\n3\r\n")), e);
    assert!(decode_all(
        small,
        false,
        &with_chunked_head(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"),
        false
    )
    .is_ok());
    // Close-delimited.
    assert_eq!(err_with(small, b"HTTP/1.1 200 OK\r\n\r\nhello!"), e);
    assert_eq!(ok(b"HTTP/1.1 200 OK\r\n\r\nhello!").1, b"hello!");
}

/// A close-delimited body past the limit gives every byte up to it, then
/// fails, however its bytes come: the read that crosses the limit gives
/// its part within it — as a chunked body gives the chunks within the
/// limit — not nothing, which would make what a reader gets before the
/// error depend on where the reads happened to split.
#[test]
fn a_close_delimited_body_gives_every_byte_up_to_the_limit_then_fails() {
    let small = Limits {
        max_body_bytes: Some(5),
        ..limits()
    };
    let head = b"HTTP/1.1 200 OK\r\n\r\n";
    let body = b"hello, world";
    for split in 0..=body.len() {
        let mut d = ResponseDecoder::new(small, false, true);
        let (used, decoded) = d.decode(head).unwrap();
        assert_eq!(used, head.len());
        assert!(matches!(decoded, Decoded::Head(_)), "{decoded:?}");
        let mut got = Vec::new();
        let mut failed = None;
        for piece in [&body[..split], &body[split..]] {
            let mut at = 0;
            while failed.is_none() && at < piece.len() {
                match d.decode(&piece[at..]) {
                    Ok((n, Decoded::Body(data))) => {
                        got.extend_from_slice(data);
                        at += n;
                    }
                    Ok(other) => panic!("split at {split}: {other:?}"),
                    Err(error) => failed = Some(error),
                }
            }
        }
        assert_eq!(got, b"hello", "split at {split}");
        assert_eq!(
            failed,
            Some(DecodeError::BodyTooLarge { limit: 5 }),
            "split at {split}"
        );
    }
}

#[test]
fn switching_protocols_is_an_error() {
    assert_eq!(
        err(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"),
        DecodeError::SwitchingProtocols
    );
}

/// A 101 to a request that carried `Upgrade` is the switch it asked
/// for, which the decoder cannot follow: it says so, not that nothing was
/// asked (see above for a request that asked nothing).
#[test]
fn switching_protocols_to_a_requested_upgrade_is_unsupported() {
    let switched = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n";
    let mut decoder = ResponseDecoder::new(limits(), false, true).upgrade_requested(true);
    let error = decoder.decode(switched).unwrap_err();
    assert_eq!(error, DecodeError::UpgradeNotSupported);
    assert!(error.to_string().contains("upgrades are not supported"));
    let mut decoder = ResponseDecoder::new(limits(), false, true).upgrade_requested(false);
    assert_eq!(
        decoder.decode(switched).unwrap_err(),
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

/// Bytes that cannot begin a status line (`HTTP/`) fail at once, before
/// their line ends: a server that speaks something else — an HTTP/2
/// server's SETTINGS frame, a banner with no newline yet — is not waited on
/// for a line end that may never come. The error is the one the whole line
/// would have had. Bytes that may still begin one (empty lines first, a CR
/// that may end one) wait for more.
#[test]
fn bytes_that_cannot_begin_a_status_line_fail_before_their_line_ends() {
    let settings_frame: &[u8] = b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64";
    for input in [
        settings_frame,
        b"hello",
        b"HX",
        b"H\r",
        b"\r\nhttp",
        b"\n\nX",
    ] {
        let mut decoder = ResponseDecoder::new(limits(), false, true);
        assert_eq!(
            decoder.decode(input).err(),
            Some(DecodeError::InvalidStatusLine),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    for input in [
        &b"H"[..],
        b"HTTP",
        b"HTTP/",
        b"HTTP/9",
        b"\r",
        b"\r\n",
        b"\n\r",
        b"\r\nHT",
    ] {
        let mut decoder = ResponseDecoder::new(limits(), false, true);
        assert!(
            matches!(decoder.decode(input), Ok((0, Decoded::NeedMore))),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    // Fed a byte at a time: the byte that rules `HTTP/` out fails it.
    let mut decoder = ResponseDecoder::new(limits(), false, true);
    assert!(matches!(decoder.decode(b"HT"), Ok((0, Decoded::NeedMore))));
    assert_eq!(
        decoder.decode(b"HTX").err(),
        Some(DecodeError::InvalidStatusLine)
    );
}
