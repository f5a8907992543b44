//! Truncation at every point, and arbitrary splits: the same outcome as
//! the whole input.

use super::*;

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
            with_chunked_head(b"4;a=1\r\nwiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\nX-B: 2\r\n\r\n"),
            None,
        ),
        (with_chunked_head(b"1\r\nx\r\n0\r\n\r\n"), None),
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

use super::test_pieces::split_at_points;

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
