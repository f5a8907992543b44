//! What `gzip` and `deflate` share: flate2's inflater, run once.
//!
//! flate2's [`Decompress`] (pure-Rust miniz_oxide backend) does the
//! inflating; `gzip.rs` and `deflate.rs` only frame it. Memory: one
//! miniz_oxide `InflateState` per stream (about 43 KB: the 32 KiB window and
//! the Huffman tables), allocated once.

use super::{Coding, DecodeError};
use flate2::{Decompress, DecompressError, FlushDecompress, Status};

/// The deflate compression method number, in gzip and zlib headers.
pub(super) const CM_DEFLATE: u8 = 8;

/// Runs the inflater once: (consumed, produced, stream ended).
pub(super) fn inflate(
    d: &mut Decompress,
    input: &[u8],
    output: &mut [u8],
    coding: Coding,
) -> Result<(usize, usize, bool), DecodeError> {
    let (in_before, out_before) = (d.total_in(), d.total_out());
    let status = d
        .decompress(input, output, FlushDecompress::None)
        .map_err(|e| inflate_error(coding, &e))?;
    // Both deltas are bounded by the slices' lengths, so they fit in usize.
    let consumed = (d.total_in() - in_before) as usize;
    let produced = (d.total_out() - out_before) as usize;
    Ok((consumed, produced, status == Status::StreamEnd))
}

fn inflate_error(coding: Coding, e: &DecompressError) -> DecodeError {
    let detail = if e.needs_dictionary().is_some() {
        "the stream needs a preset dictionary".to_string()
    } else {
        match e.message() {
            Some(m) => format!("invalid deflate data: {m}"),
            None => "invalid deflate data".to_string(),
        }
    };
    DecodeError::corrupt(coding, detail)
}
