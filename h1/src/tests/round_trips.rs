//! Responses fed through the decoder's states, byte literals in, parts out.

use super::*;

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
    assert_eq!(d.body_remaining(), Some(5));

    assert_eq!(d.decode(b"hel").unwrap(), (3, Decoded::Body(b"hel")));
    assert_eq!(d.body_remaining(), Some(2));
    assert_eq!(d.decode(b"").unwrap(), (0, Decoded::NeedMore));
    // Bytes after the body are not consumed.
    assert_eq!(d.decode(b"loHTTP").unwrap(), (2, Decoded::Body(b"lo")));
    assert_eq!(
        d.decode(b"HTTP").unwrap(),
        (0, Decoded::Done { keep_alive: true })
    );
    assert!(d.is_done());
    assert_eq!(d.body_remaining(), None);
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
    // No length to tell in advance.
    assert_eq!(d.body_remaining(), None);
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

/// RFC 9112 §6.3 rule 1: a response to HEAD, a 204 or a 304 has no body,
/// whatever its framing fields say — even fields that could frame none.
/// They do not fail it, but the connection is not reused; with a body
/// they stay errors.
#[test]
fn bodiless_responses_with_unsound_framing_fields_end_and_close() {
    let unsound = [
        "Content-Length: 5\r\nContent-Length: 7",
        "Content-Length: 5, 7",
        "Content-Length: abc",
        "Content-Length: 5\r\nTransfer-Encoding: chunked",
    ];
    for fields in unsound {
        for (status, is_head) in [
            ("200 OK", true),
            ("204 No Content", false),
            ("304 Not Modified", false),
        ] {
            let input = format!("HTTP/1.1 {status}\r\n{fields}\r\n\r\n");
            let (head, body, trailers, keep_alive) =
                decode_all(limits(), is_head, input.as_bytes(), false).unwrap();
            assert_eq!(head.status.as_str(), &status[..3], "{input:?}");
            assert_eq!((body, trailers), (Vec::new(), None), "{input:?}");
            assert!(!keep_alive, "{input:?}");
        }
        let with_body = format!("HTTP/1.1 200 OK\r\n{fields}\r\n\r\nhello");
        assert!(
            decode_all(limits(), false, with_body.as_bytes(), true).is_err(),
            "{fields:?}"
        );
    }
    // Sound fields keep the connection, as ever.
    let input = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5, 5\r\n\r\n";
    assert!(decode_all(limits(), false, input, false).unwrap().3);
}

#[test]
fn interim_responses_are_told_each_before_the_final_head() {
    let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n\
HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n\
HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let mut d = ResponseDecoder::new(limits(), false, true);
    let mut at = 0;
    let mut interim = Vec::new();
    let head = loop {
        let (n, decoded) = d.decode(&input[at..]).unwrap();
        at += n;
        match decoded {
            Decoded::Interim(head) => {
                assert!(!d.head_received());
                interim.push(head);
            }
            other => break head_of(other),
        }
    };
    let statuses: Vec<u16> = interim.iter().map(|h| h.status.as_u16()).collect();
    assert_eq!(statuses, [100, 102, 103]);
    assert_eq!(interim[0].version, Version::HTTP_11);
    assert_eq!(interim[2].headers["link"], "</s.css>; rel=preload");
    assert_eq!(head.status, StatusCode::OK);
    assert!(!head.headers.contains_key("link"));
    assert_eq!(d.decode(&input[at..]).unwrap(), (2, Decoded::Body(b"ok")));

    // Interim heads are bounded all together by the head limit, as each is
    // on its own: 103s without end are an error, not read for ever.
    let small = Limits {
        max_head_bytes: 100,
        ..limits()
    };
    let interim = b"HTTP/1.1 102 Processing\r\n\r\n"; // 27 bytes
    let final_head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let three = [&interim[..], interim, interim, final_head].concat();
    assert_eq!(decode_all(small, false, &three, false).unwrap().1, b"ok");
    let four = [&interim[..], interim, interim, interim, final_head].concat();
    assert_eq!(
        decode_all(small, false, &four, false),
        Err(DecodeError::InterimResponsesTooLarge { limit: 100 })
    );
    // Counted across calls too, 100 Continue included.
    let mut d = ResponseDecoder::new(small, false, true);
    let continues = b"HTTP/1.1 100 Continue\r\n\r\n"; // 25 bytes
    for _ in 0..4 {
        let (n, decoded) = d.decode(continues).unwrap();
        assert_eq!(n, 25);
        assert!(matches!(decoded, Decoded::Interim(h) if h.status == StatusCode::CONTINUE));
    }
    assert_eq!(
        d.decode(continues),
        Err(DecodeError::InterimResponsesTooLarge { limit: 100 })
    );

    // An interim head alone is consumed; the final head may come later.
    let mut d = ResponseDecoder::new(limits(), false, true);
    let input = b"HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 2";
    let (n, decoded) = d.decode(input).unwrap();
    assert_eq!(n, 27);
    assert!(matches!(decoded, Decoded::Interim(h) if h.status == StatusCode::PROCESSING));
    assert_eq!(d.decode(&input[27..]).unwrap(), (0, Decoded::NeedMore));
    assert!(!d.head_received());
    assert_eq!(d.eof(), Err(DecodeError::Truncated { stage: Stage::Head }));
}

#[test]
fn http10_keep_alive_rules() {
    let cases: [(&[u8], bool); 6] = [
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
        // Transfer-Encoding in 1.0: framing not to be trusted (RFC 9112 §6.1).
        (
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\
              Transfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
            false,
        ),
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
fn the_reason_phrase_is_kept_as_sent_only_when_it_is_not_the_canonical_one() {
    let reason = |input: &[u8]| ok(input).0.reason;
    assert_eq!(
        reason(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        None
    );
    assert_eq!(
        reason(b"\r\nHTTP/1.0 404 Not Found\nContent-Length: 0\n\n"),
        None
    );
    for (input, sent) in [
        (&b"HTTP/1.1 200 Fine Thanks\r\n"[..], &b"Fine Thanks"[..]),
        // No reason at all, or an empty one after the SP.
        (b"HTTP/1.1 200\r\n", b""),
        (b"HTTP/1.1 200 \r\n", b""),
        // Case, spaces and tabs as they came; a bare LF; empty lines first.
        (b"HTTP/1.1 200 ok\r\n", b"ok"),
        (b"HTTP/1.1 200  OK \t\r\n", b" OK \t"),
        (b"\nHTTP/1.1 500 Oops\n", b"Oops"),
        // Obs-text, which httparse gives as "".
        (b"HTTP/1.1 200 caf\xe9 \xff\r\n", b"caf\xe9 \xff"),
        // A status with no canonical reason: whatever came, even nothing.
        (b"HTTP/1.1 299 Custom\r\n", b"Custom"),
        (b"HTTP/1.1 299\r\n", b""),
    ] {
        let input = [input, b"Content-Length: 0\r\n\r\n"].concat();
        assert_eq!(
            reason(&input).as_deref(),
            Some(sent),
            "{}",
            String::from_utf8_lossy(&input)
        );
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

/// The fields `parse_head` reads in a `200 OK` head of a field named
/// each of `names` in turn (the `i`th valued `v{i}`), then the lines of
/// `rest` (each ending in CRLF).
fn fields_read(names: &[&str], rest: &str) -> HeaderMap {
    let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
    for (i, name) in names.iter().enumerate() {
        head.extend_from_slice(format!("{name}: v{i}\r\n").as_bytes());
    }
    head.extend_from_slice(rest.as_bytes());
    head.extend_from_slice(b"\r\n");
    let mut scanned = crate::response::Scanned::default();
    let parsed = crate::response::parse_head(&head, &limits(), &mut scanned);
    parsed.unwrap().unwrap().1.headers
}

/// The names a head takes from the thread's last one are the names
/// `HeaderName::from_bytes` makes of what was sent: the same name at a
/// position but in another case, another name there, names not known to
/// `http`, more fields or fewer than last time, a name twice. A head
/// like the last two, byte for byte, takes every name as known.
#[test]
fn names_known_from_the_last_head_are_the_names_sent() {
    let heads: &[&[&str]] = &[
        &["Server", "Date", "Content-Type", "X-Custom", "ETag"],
        &["server", "DATE", "content-type", "x-custom", "etag"],
        &["Server", "Date", "Content-Typo", "X-Custon", "ETag", "Via"],
        &["Date", "Server"],
        &[
            "Date", "Server", "X-Custom", "x-custom", "Vary", "Vary", "A", "B",
        ],
        &[
            "Date", "Server", "X-Custom", "x-custom", "Vary", "Vary", "A", "B",
        ],
        &[],
        &["Server", "Date", "Content-Type", "X-Custom", "ETag"],
    ];
    let parse = |names: &[&str]| fields_read(names, "Content-Length: 0\r\n");
    for names in heads {
        let mut expected = HeaderMap::new();
        for (i, name) in names.iter().enumerate() {
            let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
            expected.append(name, format!("v{i}").parse().unwrap());
        }
        expected.append(http::header::CONTENT_LENGTH, "0".parse().unwrap());
        assert_eq!(parse(names), expected, "{names:?}");
    }
    // A head sent three times in a row: the third takes every name as
    // known (which names are kept, and when, is the next test's).
    let again = heads[3];
    for _ in 0..2 {
        parse(again);
    }
    let known = crate::response::counts::during(&crate::response::counts::KNOWN_NAMES, || {
        parse(again);
    });
    assert_eq!(known, again.len() + 1, "the same head a third time");
}

/// The names kept give way only to a server that sends others in two
/// heads in a row: another server's heads between one's (a loop's thread
/// reads many) leave its names known. Names longer than a server's usual
/// are not kept.
#[test]
fn names_kept_outlive_another_servers_heads_but_not_two_in_a_row() {
    // A thread of its own: the names kept are the thread's.
    std::thread::spawn(|| {
        let known = |names: &[&str]| {
            crate::response::counts::during(&crate::response::counts::KNOWN_NAMES, || {
                fields_read(names, "");
            })
        };
        let one: &[&str] = &["Server", "Date", "X-One"];
        let other: &[&str] = &["Date", "Via", "X-Other"];
        assert_eq!((known(one), known(one)), (0, 3));
        // The other server's head between: one's names stay.
        assert_eq!((known(other), known(one)), (0, 3));
        // Two of the other's in a row: its names are kept from then on.
        assert_eq!((known(other), known(other), known(other)), (0, 0, 3));
        assert_eq!((known(one), known(one), known(one)), (0, 0, 3));
        // A name longer than a server's usual is never kept.
        let long = "X-".to_string() + &"l".repeat(100);
        let long: &[&str] = &[&long];
        assert_eq!((known(long), known(long), known(long)), (0, 0, 0));
    })
    .join()
    .unwrap();
}
