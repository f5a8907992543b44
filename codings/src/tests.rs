//! Tests of the whole module through its public API: parsing, round trips at
//! every split point and output size, chains, limits, policies, and every
//! failure (corrupt, mislabelled, truncated, trailing, oversized windows).
//!
//! Encoded inputs are made by the real encoders (flate2, the `brotli` crate,
//! libzstd); bombs are generated lazily by encoders reading `io::repeat(0)`,
//! so no test holds a large body in memory.

use super::*;
use proptest::prelude::*;
#[allow(unused_imports)]
use std::io::{self, Read, Write};

// ------------------------------------------------------------- helpers ----

/// Output buffer sizes every round trip is tried with.
const OUT_SIZES: [usize; 3] = [1, 7, 64 * 1024];

/// Deterministic test data: text-like runs with repeats, mixed with noise,
/// so every coding has both matches and literals to deal with.
fn sample(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: [&[u8]; 8] = [
        b"content ",
        b"encoding ",
        b"gzip ",
        b"brotli ",
        b"zstd ",
        b"\n",
        b"deflate ",
        b"<p>",
    ];
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let r = next();
        if r % 5 == 0 {
            out.extend_from_slice(&r.to_le_bytes());
        } else {
            out.extend_from_slice(WORDS[(r >> 8) as usize % WORDS.len()]);
        }
    }
    out.truncate(len);
    out
}

/// Feeds `chunks` then finishes, draining through a buffer of `out_size`,
/// checking the contract on every call.
fn drive(
    dec: &mut ContentDecoder,
    chunks: &[&[u8]],
    out_size: usize,
) -> Result<Vec<u8>, DecodeError> {
    let mut out = vec![0u8; out_size];
    let mut decoded = Vec::new();
    for chunk in chunks {
        let mut rest: &[u8] = chunk;
        loop {
            let before = dec.total_out();
            let (consumed, produced) = dec.decode(rest, &mut out)?;
            assert!(consumed <= rest.len() && produced <= out.len());
            assert_eq!(dec.total_out(), before + produced as u64);
            if produced < out.len() {
                assert_eq!(consumed, rest.len(), "input left while output had room");
            }
            decoded.extend_from_slice(&out[..produced]);
            rest = &rest[consumed..];
            if produced < out.len() {
                break;
            }
        }
    }
    loop {
        let (produced, done) = dec.finish(&mut out)?;
        decoded.extend_from_slice(&out[..produced]);
        if done {
            break;
        }
        assert_eq!(produced, out.len(), "not done, yet the output had room");
    }
    assert!(dec.is_finished());
    assert_eq!(dec.total_out(), decoded.len() as u64);
    Ok(decoded)
}

fn decoder(header: &str, config: &DecoderConfig) -> ContentDecoder {
    ContentDecoder::with_config(header, config)
        .expect("supported")
        .expect("not identity")
}

/// Decodes `encoded` as one chunk.
fn decode_one(
    header: &str,
    encoded: &[u8],
    config: &DecoderConfig,
) -> Result<Vec<u8>, DecodeError> {
    drive(&mut decoder(header, config), &[encoded], 64 * 1024)
}

fn decode_default(header: &str, encoded: &[u8]) -> Result<Vec<u8>, DecodeError> {
    decode_one(header, encoded, &DecoderConfig::new())
}

/// Splits `data` at the given sorted cut points.
fn split_at_points<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    for &cut in cuts {
        let cut = cut.clamp(start, data.len());
        chunks.push(&data[start..cut]);
        start = cut;
    }
    chunks.push(&data[start..]);
    chunks
}

#[cfg(feature = "gzip")]
fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[cfg(feature = "deflate")]
fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[cfg(feature = "deflate")]
fn raw_deflate(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[allow(dead_code)]
fn brotli_lgwin(data: &[u8], lgwin: u32) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, lgwin);
        w.write_all(data).unwrap();
    }
    out
}

#[cfg(feature = "brotli")]
fn br(data: &[u8]) -> Vec<u8> {
    brotli_lgwin(data, 22)
}

#[cfg(feature = "zstd")]
fn zstd_frame(data: &[u8]) -> Vec<u8> {
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    e.include_checksum(true).unwrap();
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// One way of encoding a body, under the header that announces it.
#[derive(Clone, Copy)]
struct Case {
    header: &'static str,
    name: &'static str,
    encode: fn(&[u8]) -> Vec<u8>,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every enabled coding, each way it can arrive.
#[allow(clippy::vec_init_then_push)]
fn cases() -> Vec<Case> {
    #[allow(unused_mut)]
    let mut cases = Vec::new();
    #[cfg(feature = "gzip")]
    cases.extend([
        Case {
            header: "gzip",
            name: "gzip",
            encode: gzip,
        },
        Case {
            header: "x-gzip",
            name: "x-gzip",
            encode: gzip,
        },
    ]);
    #[cfg(feature = "deflate")]
    cases.extend([
        Case {
            header: "deflate",
            name: "deflate (zlib)",
            encode: zlib,
        },
        Case {
            header: "deflate",
            name: "deflate (raw)",
            encode: raw_deflate,
        },
    ]);
    #[cfg(feature = "brotli")]
    cases.push(Case {
        header: "br",
        name: "br",
        encode: br,
    });
    #[cfg(feature = "zstd")]
    cases.push(Case {
        header: "zstd",
        name: "zstd",
        encode: zstd_frame,
    });
    cases
}

/// A bomb: `len` zero bytes, encoded lazily by a reading encoder.
#[allow(dead_code)]
fn bomb(coding: Coding, len: u64) -> Box<dyn Read> {
    let zeros = io::repeat(0).take(len);
    match coding {
        #[cfg(feature = "gzip")]
        Coding::Gzip => Box::new(flate2::read::GzEncoder::new(
            zeros,
            flate2::Compression::best(),
        )),
        #[cfg(feature = "deflate")]
        Coding::Deflate => Box::new(flate2::read::ZlibEncoder::new(
            zeros,
            flate2::Compression::best(),
        )),
        Coding::Brotli => Box::new(brotli::CompressorReader::new(zeros, 4096, 5, 20)),
        #[cfg(feature = "zstd")]
        Coding::Zstd => {
            let mut e = zstd::stream::read::Encoder::new(zeros, 3).unwrap();
            e.window_log(20).unwrap();
            Box::new(e)
        }
        #[allow(unreachable_patterns)]
        _ => unreachable!("coding not enabled"),
    }
}

/// Streams `source` through `dec` in 4 KiB pieces until an error or the end.
#[allow(dead_code)]
fn drive_reader(dec: &mut ContentDecoder, mut source: impl Read) -> Result<u64, DecodeError> {
    let mut input = vec![0u8; 4096];
    let mut out = vec![0u8; 32 * 1024];
    loop {
        let n = source.read(&mut input).unwrap();
        if n == 0 {
            break;
        }
        let mut rest = &input[..n];
        loop {
            let (c, p) = dec.decode(rest, &mut out)?;
            rest = &rest[c..];
            if p < out.len() {
                break;
            }
        }
    }
    while !dec.finish(&mut out)?.1 {}
    Ok(dec.total_out())
}

// ------------------------------------------------------------- parsing ----

#[test]
fn identity_and_absent_mean_no_decoder() {
    for value in [
        "",
        "identity",
        "IDENTITY",
        " identity , identity ",
        ",",
        " , ,",
    ] {
        assert!(ContentDecoder::new(value).unwrap().is_none(), "{value:?}");
    }
    let none: [&[u8]; 0] = [];
    assert!(
        ContentDecoder::from_header_values(none, &DecoderConfig::new())
            .unwrap()
            .is_none()
    );
}

#[test]
fn tokens_are_case_insensitive_with_aliases() {
    assert_eq!(Coding::from_token("GZip"), Some(Coding::Gzip));
    assert_eq!(Coding::from_token("X-GZIP"), Some(Coding::Gzip));
    assert_eq!(Coding::from_token(" br\t"), Some(Coding::Brotli));
    assert_eq!(Coding::from_token("Deflate"), Some(Coding::Deflate));
    assert_eq!(Coding::from_token("ZSTD"), Some(Coding::Zstd));
    assert_eq!(Coding::from_token("identity"), None);
    assert_eq!(Coding::from_token("compress"), None);
    assert_eq!(Coding::from_token("x-compress"), None);
    assert_eq!(Coding::from_token("gzip;q=1"), None);
    for c in Coding::ALL {
        assert_eq!(Coding::from_token(c.token()), Some(c));
        assert_eq!(c.to_string(), c.token());
    }
}

#[test]
fn unknown_codings_are_refused_whole() {
    for value in [
        "compress",
        "compress, gzip",
        "x-foo",
        "gzip;q=1",
        "gzip gzip",
        "foo,,br",
    ] {
        match ContentDecoder::new(value) {
            Err(UnsupportedCoding::Unknown { .. }) => {}
            other => panic!("{value:?}: {other:?}"),
        }
    }
    let err =
        ContentDecoder::from_header_values([&b"\xff\xfe"[..]], &DecoderConfig::new()).unwrap_err();
    assert!(matches!(err, UnsupportedCoding::Unknown { .. }));
    let long = "x".repeat(1000);
    match ContentDecoder::new(&long) {
        Err(UnsupportedCoding::Unknown { coding }) => assert_eq!(coding.len(), 64),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        UnsupportedCoding::Unknown {
            coding: "compress".into()
        }
        .to_string(),
        "unknown content coding \"compress\""
    );
}

#[test]
fn disabled_codings_are_refused() {
    for coding in Coding::ALL.into_iter().filter(|c| !c.is_enabled()) {
        assert_eq!(
            ContentDecoder::new(coding.token()).unwrap_err(),
            UnsupportedCoding::Disabled { coding }
        );
    }
}

#[test]
fn accept_encoding_lists_enabled_codings() {
    let expected: Vec<&str> = Coding::ALL
        .iter()
        .filter(|c| c.is_enabled())
        .map(|c| c.token())
        .collect();
    if expected.is_empty() {
        assert_eq!(accept_encoding(), "identity");
    } else {
        assert_eq!(accept_encoding(), expected.join(", "));
    }
}

#[cfg(feature = "gzip")]
#[test]
fn codings_keep_header_order_across_field_lines() {
    let d = ContentDecoder::new(" identity, GZIP ,gzip ")
        .unwrap()
        .unwrap();
    assert_eq!(d.codings(), [Coding::Gzip, Coding::Gzip]);
    let lines: [&[u8]; 3] = [b"gzip", b"", b"identity, x-gzip"];
    let d = ContentDecoder::from_header_values(lines, &DecoderConfig::new())
        .unwrap()
        .unwrap();
    assert_eq!(d.codings(), [Coding::Gzip, Coding::Gzip]);
}

#[cfg(feature = "gzip")]
#[test]
fn too_many_codings_are_refused() {
    let four = "gzip, gzip, gzip, gzip";
    assert_eq!(
        ContentDecoder::new(four).unwrap().unwrap().codings().len(),
        MAX_CODINGS
    );
    assert_eq!(
        ContentDecoder::new("gzip, gzip, identity, gzip, gzip, gzip, gzip").unwrap_err(),
        UnsupportedCoding::TooMany { count: 6 }
    );
}

// --------------------------------------------------------- round trips ----

#[test]
fn empty_body_is_an_empty_stream() {
    for case in cases() {
        let mut dec = decoder(case.header, &DecoderConfig::new());
        assert_eq!(drive(&mut dec, &[], 7).unwrap(), b"", "{case:?}");
        let mut dec = decoder(case.header, &DecoderConfig::new());
        assert_eq!(drive(&mut dec, &[b"", b""], 1).unwrap(), b"", "{case:?}");
        assert_eq!(dec.total_in(), 0);
    }
}

#[test]
fn encoded_empty_payload_decodes_to_nothing() {
    for case in cases() {
        let encoded = (case.encode)(b"");
        assert!(!encoded.is_empty());
        for out in OUT_SIZES {
            let mut dec = decoder(case.header, &DecoderConfig::new());
            let chunks: Vec<&[u8]> = encoded.chunks(1).collect();
            assert_eq!(drive(&mut dec, &chunks, out).unwrap(), b"", "{case:?}");
            assert_eq!(dec.total_in(), encoded.len() as u64);
        }
    }
}

#[test]
fn round_trip_at_every_split_point() {
    let data = sample(700, 7);
    for case in cases() {
        let encoded = (case.encode)(&data);
        for out in OUT_SIZES {
            for cut in 0..=encoded.len() {
                let chunks = [&encoded[..cut], &encoded[cut..]];
                let mut dec = decoder(case.header, &DecoderConfig::new());
                let decoded = drive(&mut dec, &chunks, out)
                    .unwrap_or_else(|e| panic!("{case:?} cut {cut} out {out}: {e}"));
                assert_eq!(decoded, data, "{case:?} cut {cut} out {out}");
                assert_eq!(dec.total_in(), encoded.len() as u64);
            }
        }
    }
}

#[test]
fn round_trip_one_byte_at_a_time() {
    let data = sample(5000, 11);
    for case in cases() {
        let encoded = (case.encode)(&data);
        let chunks: Vec<&[u8]> = encoded.chunks(1).collect();
        for out in OUT_SIZES {
            let mut dec = decoder(case.header, &DecoderConfig::new());
            assert_eq!(
                drive(&mut dec, &chunks, out).unwrap(),
                data,
                "{case:?} out {out}"
            );
        }
    }
}

#[test]
fn round_trip_incompressible_and_large() {
    // Noise (stored blocks, raw literals) and a body larger than the
    // windows and link buffers.
    let mut noise = vec![0u8; 200_000];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for b in noise.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let big = sample(600_000, 3);
    for case in cases() {
        for data in [&noise, &big] {
            let encoded = (case.encode)(data);
            for out in [7, 64 * 1024] {
                let mut dec = decoder(case.header, &DecoderConfig::new());
                let chunks: Vec<&[u8]> = encoded.chunks(1000).collect();
                assert_eq!(&drive(&mut dec, &chunks, out).unwrap(), data, "{case:?}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Larger bodies, random splits, output buffers of 1, 7, 64 KiB or
    /// anything in between.
    #[test]
    fn round_trip_random_splits(
        len in 0usize..100_000,
        seed in any::<u64>(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
        out in prop_oneof![Just(1usize), Just(7), Just(64 * 1024), 1usize..5000],
    ) {
        let data = sample(len, seed);
        for case in cases() {
            let encoded = (case.encode)(&data);
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(encoded.len() + 1)).collect();
            points.sort_unstable();
            let chunks = split_at_points(&encoded, &points);
            let mut dec = decoder(case.header, &DecoderConfig::new());
            let decoded = drive(&mut dec, &chunks, out);
            prop_assert_eq!(decoded.as_deref(), Ok(&data[..]), "{:?}", case);
        }
    }

    /// Arbitrary bytes never panic, whatever the coding, splits and output.
    #[test]
    fn garbage_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..2000),
        chunk in 1usize..300,
        out in 1usize..3000,
    ) {
        for case in cases() {
            let mut dec = decoder(case.header, &DecoderConfig::new().max_decoded_bytes(1 << 20));
            let chunks: Vec<&[u8]> = bytes.chunks(chunk).collect();
            let _ = drive(&mut dec, &chunks, out);
        }
    }

    /// A corrupted byte anywhere never panics, and in a checksummed stream
    /// never yields wrong data: either an error, or (a header field nobody
    /// checks) the right body. (Brotli and raw deflate have no checksum.)
    #[test]
    fn corruption_is_detected_or_harmless(
        seed in any::<u64>(),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let data = sample(3000, seed);
        for case in cases() {
            let mut encoded = (case.encode)(&data);
            let i = at.index(encoded.len());
            encoded[i] ^= flip;
            let checksummed = case.name != "deflate (raw)" && case.name != "br";
            if let (Ok(decoded), true) = (decode_default(case.header, &encoded), checksummed) {
                prop_assert_eq!(decoded, data.clone(), "{:?} byte {}", case, i);
            }
        }
    }
}

#[test]
fn empty_output_makes_no_progress_but_breaks_nothing() {
    let data = sample(3000, 14);
    for case in cases() {
        let encoded = (case.encode)(&data);
        let mut dec = decoder(case.header, &DecoderConfig::new());
        let (consumed, produced) = dec.decode(&encoded, &mut []).unwrap();
        assert_eq!(produced, 0);
        assert_eq!(dec.finish(&mut []), Ok((0, false)));
        let rest = &encoded[consumed..];
        assert_eq!(drive(&mut dec, &[rest], 7).unwrap(), data, "{case:?}");
    }
}

#[test]
fn idle_calls_are_harmless() {
    // Draining with no new input, again and again (libzstd fails a stream
    // after 16 calls in a row that move nothing, if it is called at all).
    let data = sample(20_000, 15);
    for case in cases() {
        let encoded = (case.encode)(&data);
        let (head, tail) = encoded.split_at(encoded.len() / 2);
        for out_size in [1, 64 * 1024] {
            let mut out = vec![0u8; out_size];
            let mut dec = decoder(case.header, &DecoderConfig::new());
            let mut decoded = Vec::new();
            for part in [head, tail] {
                let mut rest = part;
                while !rest.is_empty() {
                    let (c, p) = dec.decode(rest, &mut out).unwrap();
                    decoded.extend_from_slice(&out[..p]);
                    rest = &rest[c..];
                }
                for _ in 0..50 {
                    let (c, p) = dec.decode(&[], &mut out).unwrap();
                    assert_eq!(c, 0);
                    decoded.extend_from_slice(&out[..p]);
                }
            }
            loop {
                let (p, done) = dec.finish(&mut out).unwrap();
                decoded.extend_from_slice(&out[..p]);
                if done {
                    break;
                }
            }
            assert_eq!(decoded, data, "{case:?} out {out_size}");
            for _ in 0..50 {
                assert_eq!(dec.finish(&mut out), Ok((0, true)));
            }
        }
    }
}

#[test]
fn decoder_is_send() {
    // It moves with its connection between event-loop threads.
    fn assert_send<T: Send>() {}
    assert_send::<ContentDecoder>();
    assert_send::<DecodeError>();
}

#[test]
fn accessors() {
    for case in cases() {
        let config = DecoderConfig::new().max_decoded_bytes(123);
        let mut dec = decoder(case.header, &config);
        assert_eq!(dec.limit(), Some(123));
        assert_eq!(dec.codings(), [Coding::from_token(case.header).unwrap()]);
        assert!(!dec.is_finished());
        let encoded = (case.encode)(b"abc");
        assert_eq!(drive(&mut dec, &[&encoded], 64).unwrap(), b"abc");
        assert_eq!((dec.total_in(), dec.total_out()), (encoded.len() as u64, 3));
        let debug = format!("{dec:?}");
        assert!(
            debug.contains("ContentDecoder") && debug.contains("total_out: 3"),
            "{debug}"
        );
        assert_eq!(
            ContentDecoder::new(case.header).unwrap().unwrap().limit(),
            None
        );
    }
}

// -------------------------------------------------- failures and policy ----

/// Plain bodies a misconfigured server might label as encoded.
const PLAIN_BODIES: [&[u8]; 6] = [
    b"<!DOCTYPE html>\n<html><head><title>Hello</title></head><body>Hi</body></html>\n",
    br#"{"id":1,"name":"tickless","tags":["http","mio"],"ok":true}"#,
    b"Hello, world!\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    b"\x00\x00\x00\x00\x00\x00\x00\x00",
    b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor \
      incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud \
      exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat.",
];

#[test]
fn plain_text_labelled_encoded_is_an_error() {
    for case in cases() {
        for body in PLAIN_BODIES {
            for out in [1, 64 * 1024] {
                let mut dec = decoder(case.header, &DecoderConfig::new());
                let chunks: Vec<&[u8]> = body.chunks(5).collect();
                let result = drive(&mut dec, &chunks, out);
                assert!(result.is_err(), "{case:?} accepted {body:?}");
                // gzip and zstd have magic numbers: refused before any output.
                if case.header.contains("gzip") || case.header == "zstd" {
                    assert!(
                        matches!(result, Err(DecodeError::Corrupt { .. })),
                        "{case:?}: {result:?}"
                    );
                    assert_eq!(dec.total_out(), 0);
                }
            }
        }
    }
}

#[test]
fn every_strict_prefix_is_truncated() {
    let data = sample(1500, 5);
    for case in cases() {
        let encoded = (case.encode)(&data);
        for len in 1..encoded.len() {
            for out in [1, 64 * 1024] {
                let mut dec = decoder(case.header, &DecoderConfig::new());
                let result = drive(&mut dec, &[&encoded[..len]], out);
                match result {
                    Err(DecodeError::Truncated { coding }) => {
                        assert_eq!(Some(coding), Coding::from_token(case.header));
                    }
                    other => panic!("{case:?} prefix {len}: {other:?}"),
                }
                // Final: the same error again.
                assert!(matches!(
                    dec.finish(&mut [0; 8]),
                    Err(DecodeError::Truncated { .. })
                ));
            }
        }
    }
}

#[test]
fn trailing_data_is_rejected_or_ignored() {
    let data = sample(2000, 9);
    for case in cases() {
        let encoded = (case.encode)(&data);
        for junk in [
            &b"garbage"[..],
            b"\0",
            b"\r\n",
            b"\x1f",
            b"\x28\xb5\x2f\x00",
        ] {
            // Junk that starts like another member/frame is a truncated one.
            let starts_member = (case.header.contains("gzip") && junk == b"\x1f")
                || (case.header == "zstd" && junk.starts_with(b"\x28\xb5\x2f"));
            for split in [false, true] {
                let mut whole = encoded.clone();
                whole.extend_from_slice(junk);
                let chunks: Vec<&[u8]> = if split {
                    vec![&encoded, junk]
                } else {
                    vec![&whole]
                };
                let mut dec = decoder(case.header, &DecoderConfig::new());
                let result = drive(&mut dec, &chunks, 7);
                let coding = Coding::from_token(case.header).unwrap();
                if starts_member && junk.len() < 4 {
                    assert_eq!(result, Err(DecodeError::Truncated { coding }), "{case:?}");
                } else {
                    assert_eq!(
                        result,
                        Err(DecodeError::TrailingData { coding }),
                        "{case:?} {junk:?}"
                    );
                }
                let ignore = DecoderConfig::new().trailing_data(TrailingData::Ignore);
                let mut dec = decoder(case.header, &ignore);
                let result = drive(&mut dec, &chunks, 7);
                if starts_member && junk.len() < 4 {
                    assert_eq!(result, Err(DecodeError::Truncated { coding }), "{case:?}");
                } else {
                    assert_eq!(result.as_deref(), Ok(&data[..]), "{case:?} {junk:?}");
                }
            }
        }
    }
}

#[test]
fn input_after_finish_is_trailing_data() {
    let data = sample(100, 1);
    for case in cases() {
        let encoded = (case.encode)(&data);
        let mut dec = decoder(case.header, &DecoderConfig::new());
        assert_eq!(drive(&mut dec, &[&encoded], 64).unwrap(), data);
        assert_eq!(dec.finish(&mut [0; 4]), Ok((0, true)));
        assert_eq!(dec.decode(&[], &mut [0; 4]), Ok((0, 0)));
        // Even a whole new stream.
        assert!(matches!(
            dec.decode(&encoded, &mut [0; 4]),
            Err(DecodeError::TrailingData { .. })
        ));

        let ignore = DecoderConfig::new().trailing_data(TrailingData::Ignore);
        let mut dec = decoder(case.header, &ignore);
        assert_eq!(drive(&mut dec, &[&encoded], 64).unwrap(), data);
        assert_eq!(dec.decode(&encoded, &mut [0; 4]), Ok((encoded.len(), 0)));
    }
}

#[test]
fn errors_are_final() {
    for case in cases() {
        let mut dec = decoder(case.header, &DecoderConfig::new());
        let first = drive(&mut dec, &[b"\xff\xff\xff\xff not encoded at all"], 64).unwrap_err();
        assert_eq!(dec.decode(b"more", &mut [0; 64]), Err(first.clone()));
        assert_eq!(dec.decode(&[], &mut [0; 64]), Err(first.clone()));
        assert_eq!(dec.finish(&mut [0; 64]), Err(first.clone()));
        assert!(!first.to_string().is_empty());
    }
}

#[test]
fn limit_is_exact() {
    let data = sample(10_000, 2);
    let n = data.len() as u64;
    for case in cases() {
        let encoded = (case.encode)(&data);
        for out in OUT_SIZES {
            let chunks: Vec<&[u8]> = encoded.chunks(100).collect();
            let at = DecoderConfig::new().max_decoded_bytes(n);
            let mut dec = decoder(case.header, &at);
            assert_eq!(drive(&mut dec, &chunks, out).unwrap(), data, "{case:?}");

            let under = DecoderConfig::new().max_decoded_bytes(n - 1);
            let mut dec = decoder(case.header, &under);
            let result = drive(&mut dec, &chunks, out);
            assert_eq!(
                result,
                Err(DecodeError::TooLarge { limit: n - 1 }),
                "{case:?} {out}"
            );
            assert!(dec.total_out() < n);
        }
        let zero = DecoderConfig::new().max_decoded_bytes(0);
        assert_eq!(
            decode_one(case.header, &encoded, &zero),
            Err(DecodeError::TooLarge { limit: 0 })
        );
        assert_eq!(
            decode_one(case.header, &(case.encode)(b""), &zero),
            Ok(vec![])
        );
    }
}

/// Past the limit in a call that hands out bytes, the error waits for the
/// next call (invariant 4), and the call takes all of its input all the
/// same (invariant 2; `drive` asserts it): a caller that reads output not
/// full as "the chunk is taken" is left with no tail. Limits in the middle
/// of a stream, where the input goes on past the byte over the limit; the
/// input in small pieces and whole.
#[test]
fn a_call_that_keeps_the_limit_error_takes_all_of_its_input() {
    let data = sample(10_000, 2);
    for case in cases() {
        let encoded = (case.encode)(&data);
        for limit in [1, 5000] {
            for piece in [13, encoded.len()] {
                for out in [7, 64 * 1024] {
                    let chunks: Vec<&[u8]> = encoded.chunks(piece).collect();
                    let config = DecoderConfig::new().max_decoded_bytes(limit);
                    let mut dec = decoder(case.header, &config);
                    assert_eq!(
                        drive(&mut dec, &chunks, out),
                        Err(DecodeError::TooLarge { limit }),
                        "{case:?} limit {limit} piece {piece} out {out}"
                    );
                    assert_eq!(dec.total_out(), limit, "{case:?}");
                }
            }
        }
    }
}

#[test]
fn bomb_stops_at_the_limit() {
    const LIMIT: u64 = 1 << 20;
    for coding in Coding::ALL.into_iter().filter(|c| c.is_enabled()) {
        let config = DecoderConfig::new().max_decoded_bytes(LIMIT);
        let mut dec = decoder(coding.token(), &config);
        let result = drive_reader(&mut dec, bomb(coding, 1 << 30));
        assert_eq!(
            result,
            Err(DecodeError::TooLarge { limit: LIMIT }),
            "{coding}"
        );
        // Exactly the limit came out, from a small part of the input.
        assert_eq!(dec.total_out(), LIMIT, "{coding}");
        assert!(dec.total_in() < 64 * 1024, "{coding}: {}", dec.total_in());
    }
}

// ------------------------------------------------------------- chains ----

#[test]
fn stacked_codings_decode_in_reverse() {
    let data = sample(20_000, 4);
    for outer in cases() {
        for inner in cases() {
            // Applied `inner` first, then `outer`: header lists inner first.
            let encoded = (outer.encode)(&(inner.encode)(&data));
            let header = format!("{}, {}", inner.header, outer.header);
            for out in OUT_SIZES {
                for chunk in [1, 333, encoded.len().max(1)] {
                    if chunk == 1 && out != 7 {
                        continue; // keep the one-byte runs few
                    }
                    let chunks: Vec<&[u8]> = encoded.chunks(chunk).collect();
                    let mut dec = decoder(&header, &DecoderConfig::new());
                    let decoded = drive(&mut dec, &chunks, out)
                        .unwrap_or_else(|e| panic!("{header} ({inner:?} then {outer:?}): {e}"));
                    assert_eq!(decoded, data, "{header}");
                }
            }
        }
    }
}

#[test]
fn chain_of_four() {
    let all = cases();
    if all.is_empty() {
        return;
    }
    let picks: Vec<Case> = (0..MAX_CODINGS).map(|i| all[i % all.len()]).collect();
    let data = sample(50_000, 8);
    let mut encoded = data.clone();
    for case in &picks {
        encoded = (case.encode)(&encoded);
    }
    let header = picks
        .iter()
        .map(|c| c.header)
        .collect::<Vec<_>>()
        .join(", ");
    for out in [7, 64 * 1024] {
        let chunks: Vec<&[u8]> = encoded.chunks(1000).collect();
        let mut dec = decoder(&header, &DecoderConfig::new());
        assert_eq!(drive(&mut dec, &chunks, out).unwrap(), data, "{header}");
    }
}

#[test]
fn chain_failures_name_the_stage() {
    let data = sample(5000, 6);
    for outer in cases() {
        for inner in cases() {
            let header = format!("{}, {}", inner.header, outer.header);
            let inner_coding = Coding::from_token(inner.header).unwrap();
            let outer_coding = Coding::from_token(outer.header).unwrap();
            // The inner stream cut short, inside a complete outer stream.
            let inner_bytes = (inner.encode)(&data);
            let cut = (outer.encode)(&inner_bytes[..inner_bytes.len() - 1]);
            let result = decode_default(&header, &cut);
            assert_eq!(
                result,
                Err(DecodeError::Truncated {
                    coding: inner_coding
                }),
                "{header}"
            );
            // The outer stream cut short.
            let whole = (outer.encode)(&inner_bytes);
            let result = decode_default(&header, &whole[..whole.len() - 1]);
            assert_eq!(
                result,
                Err(DecodeError::Truncated {
                    coding: outer_coding
                }),
                "{header}"
            );
            // Junk after the inner stream.
            let mut junk = inner_bytes.clone();
            junk.extend_from_slice(b"junk");
            let result = decode_default(&header, &(outer.encode)(&junk));
            assert_eq!(
                result,
                Err(DecodeError::TrailingData {
                    coding: inner_coding
                }),
                "{header}"
            );
        }
    }
}

#[test]
fn chain_limit_stops_inner_bomb() {
    const LIMIT: u64 = 256 * 1024;
    for inner in Coding::ALL.into_iter().filter(|c| c.is_enabled()) {
        let Some(outer) = cases().first().copied() else {
            return;
        };
        // Small enough to wrap in memory: 64 MiB of zeros, twice encoded.
        let mut inner_bytes = Vec::new();
        bomb(inner, 64 << 20).read_to_end(&mut inner_bytes).unwrap();
        let encoded = (outer.encode)(&inner_bytes);
        let header = format!("{}, {}", inner.token(), outer.header);
        let config = DecoderConfig::new().max_decoded_bytes(LIMIT);
        let mut dec = decoder(&header, &config);
        let result = drive(&mut dec, &[&encoded], 4096);
        assert_eq!(
            result,
            Err(DecodeError::TooLarge { limit: LIMIT }),
            "{header}"
        );
        assert_eq!(dec.total_out(), LIMIT);
    }
}

/// Decodes `encoded`, all of it given at once, as a body reader does that
/// calls again without more input only when the output filled up or the
/// decoder kept an error ([`ContentDecoder::error`]). Returns whether the
/// input ran out with an error kept (the reader then calls again at once,
/// and gets it), and checks that no error is left behind otherwise: a
/// reader that waited for input a stream may not send for long would not
/// hear of it until then.
fn ends_input_with_an_error_kept(header: &str, encoded: &[u8], config: &DecoderConfig) -> bool {
    let mut dec = decoder(header, config);
    let mut out = vec![0u8; 32 * 1024];
    let mut input = encoded;
    let mut kept = false;
    loop {
        match dec.decode(input, &mut out) {
            Ok((consumed, produced)) => {
                input = &input[consumed..];
                kept = dec.error().is_some();
                if input.is_empty() && produced < out.len() && !kept {
                    break;
                }
            }
            Err(e) => {
                assert_eq!(dec.error(), Some(&e), "{header}");
                return kept;
            }
        }
    }
    assert_eq!(
        dec.decode(&[], &mut out),
        Ok((0, 0)),
        "{header}: an error was left behind in the decoder"
    );
    false
}

#[test]
fn an_error_kept_for_the_next_call_is_told_before_it() {
    // Past the limit in the last coding: the bytes within it come out,
    // the error is kept.
    const LIMIT: u64 = 1000;
    let config = DecoderConfig::new().max_decoded_bytes(LIMIT);
    for case in cases() {
        let encoded = (case.encode)(&vec![b'a'; 20_000]);
        assert!(
            ends_input_with_an_error_kept(case.header, &encoded, &config),
            "{case:?}"
        );
        // At exactly the limit, nothing is kept.
        let encoded = (case.encode)(&vec![b'a'; LIMIT as usize]);
        assert!(!ends_input_with_an_error_kept(
            case.header,
            &encoded,
            &config
        ));
    }
}

#[cfg(all(feature = "gzip", feature = "deflate"))]
#[test]
fn an_error_kept_by_an_inner_stage_of_a_chain_is_told_before_the_next_call() {
    // `deflate, gzip` around bytes stored in a zlib stream a little longer
    // than the limit: the inner stage's output (the zlib stream) passes its
    // own bound (the limit and a little slack) in its last bytes, while the
    // decoded output is still below the limit, and the error is kept —
    // told by `error()` though the total is not at the limit. Lengths
    // around that crossing, so that the input runs out just as it is met.
    const LIMIT: u64 = 100_000;
    let config = DecoderConfig::new().max_decoded_bytes(LIMIT);
    let mut kept = 0;
    for len in 104_150..104_200 {
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::none());
        zlib.write_all(&vec![b'a'; len]).unwrap();
        let inner = zlib.finish().unwrap();
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(&inner).unwrap();
        let encoded = gzip.finish().unwrap();
        if ends_input_with_an_error_kept("deflate, gzip", &encoded, &config) {
            kept += 1;
        }
    }
    assert!(kept > 0, "no length ran out of input as the limit was met");
}

// -------------------------------------------------------------- gzip ----

#[cfg(feature = "gzip")]
mod gzip_tests {
    use super::*;
    use flate2::{Crc, GzBuilder};

    /// A member with every optional header field, built by flate2.
    fn fancy_member(data: &[u8]) -> Vec<u8> {
        let mut e = GzBuilder::new()
            .filename(&b"a-rather-long-file-name.txt"[..])
            .comment(&b"a comment"[..])
            .extra(vec![7u8; 300])
            .mtime(1_700_000_000)
            .write(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// A member with FHCRC set, built by hand.
    fn member_with_header_crc(data: &[u8], corrupt_crc: bool) -> Vec<u8> {
        let mut out = vec![0x1f, 0x8b, 8, 0x02 | 0x08, 0, 0, 0, 0, 0, 255];
        out.extend_from_slice(b"name\0");
        let mut crc = Crc::new();
        crc.update(&out);
        let hcrc = (crc.sum() & 0xffff) as u16 ^ u16::from(corrupt_crc);
        out.extend_from_slice(&hcrc.to_le_bytes());
        out.extend_from_slice(&raw(data));
        let mut body_crc = Crc::new();
        body_crc.update(data);
        out.extend_from_slice(&body_crc.sum().to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out
    }

    fn raw(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn optional_header_fields_at_every_split() {
        let data = sample(400, 12);
        for member in [fancy_member(&data), member_with_header_crc(&data, false)] {
            for cut in 0..=member.len() {
                for out in [1, 4096] {
                    let mut dec = decoder("gzip", &DecoderConfig::new());
                    let decoded = drive(&mut dec, &[&member[..cut], &member[cut..]], out).unwrap();
                    assert_eq!(decoded, data);
                }
            }
        }
    }

    #[test]
    fn header_crc_is_checked() {
        let member = member_with_header_crc(b"abc", true);
        assert!(matches!(
            decode_default("gzip", &member),
            Err(DecodeError::Corrupt { ref detail, .. }) if detail.contains("header CRC")
        ));
    }

    #[test]
    fn all_members_are_decoded() {
        let (a, b, c) = (sample(3000, 1), sample(10, 2), sample(70_000, 3));
        let mut stream = gzip(&a);
        stream.extend(gzip(b""));
        stream.extend(fancy_member(&b));
        stream.extend(member_with_header_crc(&c, false));
        let expected = [a, b, c].concat();
        for chunk in [1, 17, stream.len()] {
            for out in OUT_SIZES {
                let chunks: Vec<&[u8]> = stream.chunks(chunk).collect();
                let mut dec = decoder("gzip", &DecoderConfig::new());
                assert_eq!(drive(&mut dec, &chunks, out).unwrap(), expected);
            }
        }
    }

    #[test]
    fn a_broken_later_member_is_an_error() {
        let mut stream = gzip(b"first");
        let mut second = gzip(b"second");
        let n = second.len();
        second[n - 8] ^= 1; // its CRC
        stream.extend(second);
        assert!(matches!(
            decode_default("gzip", &stream),
            Err(DecodeError::Corrupt { ref detail, .. }) if detail.contains("CRC")
        ));
        // Magic right, method wrong: a broken member, not trailing data.
        let mut stream = gzip(b"first");
        stream.extend_from_slice(&[0x1f, 0x8b, 7, 0, 0, 0, 0, 0, 0, 0]);
        assert!(matches!(
            decode_default("gzip", &stream),
            Err(DecodeError::Corrupt { .. })
        ));
    }

    #[test]
    fn trailer_is_checked() {
        let data = sample(1000, 4);
        let good = gzip(&data);
        let n = good.len();
        for (byte, what) in [(n - 8, "CRC-32"), (n - 1, "length")] {
            let mut bad = good.clone();
            bad[byte] ^= 0x40;
            match decode_default("gzip", &bad) {
                Err(DecodeError::Corrupt { coding, detail }) => {
                    assert_eq!(coding, Coding::Gzip);
                    assert!(detail.contains(what), "{detail}");
                }
                other => panic!("{what}: {other:?}"),
            }
        }
    }

    #[test]
    fn header_errors() {
        for (bytes, what) in [
            (&b"\x1f\x8c\x08\x00"[..], "magic"),
            (b"\x1f\x8b\x07\x00", "method"),
            (b"\x1f\x8b\x08\x20", "reserved"),
        ] {
            match decode_default("gzip", bytes) {
                Err(DecodeError::Corrupt { detail, .. }) => {
                    assert!(detail.contains(what), "{detail}")
                }
                other => panic!("{what}: {other:?}"),
            }
        }
    }

    #[test]
    fn corrupt_deflate_data_mid_stream() {
        let data = sample(50_000, 13);
        let mut bad = gzip(&data);
        let mid = bad.len() / 2;
        for b in &mut bad[mid..mid + 16] {
            *b = 0xff;
        }
        let mut dec = decoder("gzip", &DecoderConfig::new());
        let chunks: Vec<&[u8]> = bad.chunks(512).collect();
        assert!(matches!(
            drive(&mut dec, &chunks, 1024),
            Err(DecodeError::Corrupt { .. })
        ));
    }

    #[test]
    fn huge_name_field_is_skipped_not_stored() {
        // A 1 MiB FNAME: consumed as it comes, never kept.
        let mut member = vec![0x1f, 0x8b, 8, 0x08, 0, 0, 0, 0, 0, 255];
        member.extend(std::iter::repeat_n(b'n', 1 << 20));
        member.push(0);
        member.extend_from_slice(&gzip(b"payload")[10..]);
        let chunks: Vec<&[u8]> = member.chunks(4096).collect();
        let mut dec = decoder("gzip", &DecoderConfig::new());
        assert_eq!(drive(&mut dec, &chunks, 64).unwrap(), b"payload");
    }
}

// ------------------------------------------------------------ deflate ----

#[cfg(feature = "deflate")]
mod deflate_tests {
    use super::*;

    #[test]
    fn zlib_and_raw_are_both_accepted() {
        let data = sample(3000, 21);
        for encoded in [zlib(&data), raw_deflate(&data)] {
            assert_eq!(decode_default("deflate", &encoded).unwrap(), data);
        }
        // The smallest streams: an empty final fixed block, raw and wrapped.
        assert_eq!(decode_default("deflate", &[0x03, 0x00]).unwrap(), b"");
        assert_eq!(
            decode_default("deflate", &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]).unwrap(),
            b""
        );
    }

    #[test]
    fn every_zlib_window_and_level_header() {
        // zlib headers with each compression level byte (and window sizes
        // from flate2's encoder) are recognised as zlib.
        let data = sample(2000, 22);
        for level in 0..=9 {
            let mut e =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
            e.write_all(&data).unwrap();
            let encoded = e.finish().unwrap();
            assert_eq!(
                decode_default("deflate", &encoded).unwrap(),
                data,
                "level {level}"
            );
        }
    }

    #[test]
    fn zlib_checksum_is_checked() {
        let data = sample(3000, 23);
        let mut bad = zlib(&data);
        let n = bad.len();
        bad[n - 1] ^= 1;
        assert!(matches!(
            decode_default("deflate", &bad),
            Err(DecodeError::Corrupt {
                coding: Coding::Deflate,
                ..
            })
        ));
    }

    #[test]
    fn preset_dictionary_is_refused() {
        // CMF 0x78, FLG 0x20 (FDICT): a valid header asking for a dictionary.
        let stream = [0x78, 0x20, 0, 0, 0, 1, 0x03, 0x00];
        assert!(matches!(
            decode_default("deflate", &stream),
            Err(DecodeError::Corrupt {
                coding: Coding::Deflate,
                ..
            })
        ));
    }

    #[test]
    fn single_byte_body_is_truncated() {
        for byte in [0x78u8, 0x03, 0x00] {
            assert_eq!(
                decode_default("deflate", &[byte]),
                Err(DecodeError::Truncated {
                    coding: Coding::Deflate
                })
            );
        }
    }
}

// ------------------------------------------------------------- brotli ----

#[cfg(feature = "brotli")]
mod brotli_tests {
    use super::*;

    #[test]
    fn every_window_size_decodes() {
        let data = sample(300_000, 31);
        for lgwin in [10, 16, 18, 22, 24] {
            let encoded = brotli_lgwin(&data, lgwin);
            let chunks: Vec<&[u8]> = encoded.chunks(4096).collect();
            let mut dec = decoder("br", &DecoderConfig::new());
            assert_eq!(
                drive(&mut dec, &chunks, 7777).unwrap(),
                data,
                "lgwin {lgwin}"
            );
        }
    }

    #[test]
    fn large_declared_window_with_small_output_decodes_under_a_small_cap() {
        let data = sample(100_000, 32);
        let encoded = brotli_lgwin(&data, 24);
        let config = DecoderConfig::new().max_window_bytes(256 * 1024);
        assert_eq!(decode_one("br", &encoded, &config).unwrap(), data);
    }

    #[test]
    fn ring_buffer_over_the_cap_is_refused() {
        let data = sample(3 << 20, 33);
        let encoded = brotli_lgwin(&data, 22);
        let config = DecoderConfig::new().max_window_bytes(1 << 20);
        assert_eq!(
            decode_one("br", &encoded, &config),
            Err(DecodeError::WindowTooLarge {
                coding: Coding::Brotli,
                window: 4 << 20,
                max: 1 << 20
            })
        );
        // The same stream under the default cap is fine.
        assert_eq!(decode_default("br", &encoded).unwrap(), data);
    }

    #[test]
    fn large_window_brotli_is_not_rfc7932() {
        // WBITS code 0x11: the large-window extension's marker.
        let mut stream = vec![0x11u8, 0x30];
        stream.extend_from_slice(&[0; 8]);
        assert!(matches!(
            decode_default("br", &stream),
            Err(DecodeError::Corrupt {
                coding: Coding::Brotli,
                ..
            })
        ));
    }

    #[test]
    fn corrupt_data_mid_stream() {
        let data = sample(200_000, 34);
        let mut bad = br(&data);
        let mid = bad.len() / 2;
        for b in &mut bad[mid..mid + 64] {
            *b = 0xa5;
        }
        let result = decode_default("br", &bad);
        assert!(result.is_err() && result != Ok(data));
    }
}

// --------------------------------------------------------------- zstd ----

#[cfg(feature = "zstd")]
mod zstd_tests {
    use super::*;

    fn frame_with_window_log(data: &[u8], log: u32) -> Vec<u8> {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        e.window_log(log).unwrap();
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn skippable(payload: &[u8], magic_low: u8) -> Vec<u8> {
        let mut out = vec![0x50 | (magic_low & 0x0f), 0x2a, 0x4d, 0x18];
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn frames_and_skippable_frames_are_all_decoded() {
        let (a, b) = (sample(5000, 41), sample(300_000, 42));
        let mut stream = skippable(b"metadata", 0);
        stream.extend(zstd_frame(&a));
        stream.extend(skippable(&[], 0xf));
        stream.extend(zstd::bulk::compress(&b, 1).unwrap()); // single segment
        stream.extend(skippable(&[9; 100], 3));
        let expected = [a, b].concat();
        for chunk in [1, 1000, stream.len()] {
            for out in [7, 64 * 1024] {
                if chunk == 1 && out == 7 {
                    continue; // slow in debug builds, and covered elsewhere
                }
                let chunks: Vec<&[u8]> = stream.chunks(chunk).collect();
                let mut dec = decoder("zstd", &DecoderConfig::new());
                assert_eq!(drive(&mut dec, &chunks, out).unwrap(), expected);
            }
        }
        // Only skippable frames: a valid, empty body.
        assert_eq!(decode_default("zstd", &skippable(b"x", 1)).unwrap(), b"");
    }

    #[test]
    fn window_over_8_mib_is_refused_by_default() {
        let data = sample(1000, 43);
        let big = frame_with_window_log(&data, 24);
        assert_eq!(
            decode_default("zstd", &big),
            Err(DecodeError::WindowTooLarge {
                coding: Coding::Zstd,
                window: 16 << 20,
                max: 8 << 20
            })
        );
        let ok = frame_with_window_log(&data, 23);
        assert_eq!(decode_default("zstd", &ok).unwrap(), data);
        let wide = DecoderConfig::new().max_window_bytes(16 << 20);
        assert_eq!(decode_one("zstd", &big, &wide).unwrap(), data);
        let narrow = DecoderConfig::new().max_window_bytes(1 << 20);
        assert!(matches!(
            decode_one("zstd", &ok, &narrow),
            Err(DecodeError::WindowTooLarge { window, .. }) if window == 8 << 20
        ));
    }

    #[test]
    fn single_segment_window_is_the_content_size() {
        // A single-segment frame header declaring 9 MiB of content: refused
        // from the header alone, before libzstd sees it.
        let mut header = vec![0x28, 0xb5, 0x2f, 0xfd, 0xa0];
        header.extend_from_slice(&(9u32 << 20).to_le_bytes());
        for cut in 0..header.len() {
            let mut dec = decoder("zstd", &DecoderConfig::new());
            let result = drive(&mut dec, &[&header[..cut], &header[cut..]], 64);
            assert_eq!(
                result,
                Err(DecodeError::WindowTooLarge {
                    coding: Coding::Zstd,
                    window: 9 << 20,
                    max: 8 << 20
                })
            );
        }
        // A real one just under the limit decodes.
        let data = vec![b'z'; 7 << 20];
        let mut c = zstd::bulk::Compressor::new(1).unwrap();
        c.set_parameter(zstd::stream::raw::CParameter::WindowLog(23))
            .unwrap();
        let frame = c.compress(&data).unwrap();
        assert_eq!(frame[4] & 0x20, 0x20, "single segment");
        assert_eq!(decode_default("zstd", &frame).unwrap(), data);
    }

    #[test]
    fn checksum_is_checked() {
        let data = sample(10_000, 44);
        let mut bad = zstd_frame(&data);
        let n = bad.len();
        bad[n - 1] ^= 1;
        assert!(matches!(
            decode_default("zstd", &bad),
            Err(DecodeError::Corrupt {
                coding: Coding::Zstd,
                ..
            })
        ));
    }

    #[test]
    fn legacy_frames_are_refused() {
        // A v0.7 legacy magic: not a frame this build decodes.
        assert!(matches!(
            decode_default("zstd", &[0x27, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0]),
            Err(DecodeError::Corrupt { .. })
        ));
    }
}
