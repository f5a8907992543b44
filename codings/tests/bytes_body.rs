//! How the client's body reader drives a [`ContentDecoder`] with
//! `bytes::Bytes` chunks: the chunk is advanced by what was consumed (no
//! copy), decoded bytes are split off a reusable `BytesMut`, and the end of
//! the body is a `finish` loop. Unsupported codings pass the body through.

use bytes::{Buf, Bytes, BytesMut};
use tickless_codings::{ContentDecoder, DecodeError, DecoderConfig, UnsupportedCoding};

/// Size of the decoded chunks handed to the application.
const OUT: usize = 16 * 1024;

/// The body side of a response: undecoded, or through a decoder.
enum Body {
    Plain,
    Decoded {
        decoder: ContentDecoder,
        out: BytesMut,
    },
}

impl Body {
    /// What the client does with the response head: a decoder, pass-through
    /// for identity and for codings it cannot decode.
    fn new(content_encoding: Option<&str>, config: &DecoderConfig) -> Body {
        match content_encoding.map(|v| ContentDecoder::with_config(v, config)) {
            None | Some(Ok(None)) => Body::Plain,
            Some(Ok(Some(decoder))) => Body::Decoded {
                decoder,
                out: BytesMut::new(),
            },
            // Unknown or disabled: hand the body over as it came (keeping the
            // Content-Encoding header so the application knows).
            Some(Err(UnsupportedCoding::Unknown { .. } | UnsupportedCoding::Disabled { .. })) => {
                Body::Plain
            }
            Some(Err(e)) => panic!("the client would fail the response: {e}"),
        }
    }

    /// One chunk from the connection; decoded chunks go to `deliver`.
    fn push(&mut self, mut chunk: Bytes, deliver: &mut Vec<Bytes>) -> Result<(), DecodeError> {
        let (decoder, out) = match self {
            Body::Plain => {
                deliver.push(chunk);
                return Ok(());
            }
            Body::Decoded { decoder, out } => (decoder, out),
        };
        loop {
            out.resize(OUT, 0);
            let (consumed, produced) = decoder.decode(&chunk, out)?;
            chunk.advance(consumed);
            out.truncate(produced);
            if produced > 0 {
                deliver.push(out.split().freeze());
            }
            // Output not full: the whole chunk was taken.
            if produced < OUT {
                debug_assert!(chunk.is_empty());
                return Ok(());
            }
        }
    }

    /// The framing says the body is over.
    fn end(&mut self, deliver: &mut Vec<Bytes>) -> Result<(), DecodeError> {
        let Body::Decoded { decoder, out } = self else {
            return Ok(());
        };
        loop {
            out.resize(OUT, 0);
            let (produced, done) = decoder.finish(out)?;
            out.truncate(produced);
            if produced > 0 {
                deliver.push(out.split().freeze());
            }
            if done {
                return Ok(());
            }
        }
    }
}

fn read_body(
    content_encoding: Option<&str>,
    wire: &[u8],
    chunk: usize,
    config: &DecoderConfig,
) -> Result<Vec<u8>, DecodeError> {
    let wire = Bytes::copy_from_slice(wire);
    let mut body = Body::new(content_encoding, config);
    let mut delivered = Vec::new();
    let mut at = 0;
    while at < wire.len() {
        let end = (at + chunk).min(wire.len());
        body.push(wire.slice(at..end), &mut delivered)?;
        at = end;
    }
    body.end(&mut delivered)?;
    assert!(delivered.iter().all(|b| !b.is_empty() && b.len() <= OUT));
    Ok(delivered.concat())
}

fn text(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| b"abcdefghij\n"[i % 11] ^ (i / 1000) as u8)
        .collect()
}

#[cfg(feature = "gzip")]
#[test]
fn gzip_body_through_bytes_chunks() {
    use std::io::Write;
    let data = text(200_000);
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&data).unwrap();
    let wire = e.finish().unwrap();
    for chunk in [1, 1460, 16 * 1024, wire.len()] {
        let decoded = read_body(Some("gzip"), &wire, chunk, &DecoderConfig::new()).unwrap();
        assert_eq!(decoded, data, "chunk {chunk}");
    }
    // Whole, the chunk goes on past the byte over the limit: the call that
    // hands out the last bytes within it keeps the error, and takes all of
    // the chunk all the same (the loop in `push` asserts it).
    let limited = DecoderConfig::new().max_decoded_bytes(100_000);
    for chunk in [1460, wire.len()] {
        assert_eq!(
            read_body(Some("gzip"), &wire, chunk, &limited),
            Err(DecodeError::TooLarge { limit: 100_000 }),
            "chunk {chunk}"
        );
    }
}

#[cfg(feature = "brotli")]
#[test]
fn brotli_body_through_bytes_chunks() {
    use std::io::Write;
    let data = text(200_000);
    let mut wire = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut wire, 4096, 9, 22);
        w.write_all(&data).unwrap();
    }
    for chunk in [1, 1460, wire.len()] {
        assert_eq!(
            read_body(Some("br"), &wire, chunk, &DecoderConfig::new()).unwrap(),
            data
        );
    }
}

#[test]
fn unknown_and_identity_bodies_pass_through() {
    let data = text(5000);
    for header in [
        None,
        Some("identity"),
        Some(""),
        Some("compress"),
        Some("x-custom"),
    ] {
        assert_eq!(
            read_body(header, &data, 100, &DecoderConfig::new()).unwrap(),
            data
        );
    }
}
