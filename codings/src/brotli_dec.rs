//! `br`: brotli-decompressor's streaming decoder, with its ring buffer capped.
//!
//! The stream's first bits declare a window of 2^10 to 2^24 bytes (RFC 7932
//! §9.1); the decoder keeps the last window's worth of output in a ring
//! buffer, which it grows on demand (to the smallest power of two that holds
//! the output so far plus the current metablock, never past the window). A
//! 100 KB response with a 16 MiB window therefore allocates about 128 KiB,
//! while a bomb that declares a 16 MiB window and long metablocks gets the
//! whole 16 MiB at once.
//!
//! The cap is enforced where the memory is taken: the decoder's byte
//! allocator refuses any single allocation larger than the configured window
//! (plus the decoder's fixed 566-byte slack), and brotli-decompressor turns
//! the refused ring buffer into an error, reported as
//! [`DecodeError::WindowTooLarge`]. So a stream that declares a big window
//! but stays small still decodes; one that would really need more is
//! refused before the memory is allocated. (The other allocations, Huffman
//! tables and context maps, are bounded by the format itself; see the module
//! docs for the figures.) Large-window brotli, a non-RFC extension, is
//! rejected (`BrotliState::new_strict`).

use super::stage::Step;
use super::{Coding, DecodeError};
use brotli_decompressor::{
    Allocator, BrotliDecoderErrorCode, BrotliDecompressStream, BrotliResult, BrotliState,
    StandardAlloc,
};

/// The decoder's ring buffer is its window plus this much (566 bytes in
/// brotli-decompressor 6; the cap leaves room to spare).
const RING_SLACK: u64 = 4096;

/// The byte allocator: the standard one, refusing cells over a size.
///
/// brotli-decompressor checks every byte allocation it makes while decoding
/// (ring buffer, context maps, context modes) and fails the stream with an
/// `ALLOC_*` error code when it gets a short cell.
#[derive(Debug, Clone, Copy)]
struct CappedAlloc {
    max_cell: usize,
}

impl Allocator<u8> for CappedAlloc {
    type AllocatedMemory = <StandardAlloc as Allocator<u8>>::AllocatedMemory;

    fn alloc_cell(&mut self, len: usize) -> Self::AllocatedMemory {
        if len > self.max_cell {
            return Self::AllocatedMemory::default();
        }
        StandardAlloc::default().alloc_cell(len)
    }

    fn free_cell(&mut self, data: Self::AllocatedMemory) {
        // Dropping the cell frees it.
        drop(data);
    }
}

type State = BrotliState<CappedAlloc, StandardAlloc, StandardAlloc>;

/// A `br` decoder.
pub(super) struct BrotliDecoder {
    /// `None` once the stream has ended (the state and its ring buffer are
    /// freed right away).
    state: Option<Box<State>>,
    max_window: u64,
}

impl BrotliDecoder {
    /// A decoder whose ring buffer may not exceed `max_window` bytes.
    pub(super) fn new(max_window: u64) -> Self {
        let max_cell = usize::try_from(max_window.saturating_add(RING_SLACK)).unwrap_or(usize::MAX);
        let state = BrotliState::new_strict(
            CappedAlloc { max_cell },
            StandardAlloc::default(),
            StandardAlloc::default(),
        );
        BrotliDecoder {
            state: Some(Box::new(state)),
            max_window,
        }
    }

    pub(super) fn is_complete(&self) -> bool {
        self.state.is_none()
    }

    pub(super) fn step(&mut self, input: &[u8], output: &mut [u8]) -> Result<Step, DecodeError> {
        let Some(state) = self.state.as_mut() else {
            return Ok(Step::after_end(input));
        };
        let mut available_in = input.len();
        let mut input_offset = 0;
        let mut available_out = output.len();
        let mut output_offset = 0;
        let mut total_out = 0;
        let result = BrotliDecompressStream(
            &mut available_in,
            &mut input_offset,
            input,
            &mut available_out,
            &mut output_offset,
            output,
            &mut total_out,
            state,
        );
        match result {
            BrotliResult::ResultSuccess => {
                self.state = None;
                if input_offset < input.len() {
                    Ok(Step::trailing(input_offset, output_offset))
                } else {
                    Ok(Step::new(input_offset, output_offset))
                }
            }
            BrotliResult::NeedsMoreInput | BrotliResult::NeedsMoreOutput => {
                Ok(Step::new(input_offset, output_offset))
            }
            BrotliResult::ResultFailure => Err(self.error()),
        }
    }

    fn error(&self) -> DecodeError {
        let Some(state) = self.state.as_ref() else {
            return DecodeError::corrupt(Coding::Brotli, "decoder failed");
        };
        match state.error_code {
            BrotliDecoderErrorCode::BROTLI_DECODER_ERROR_ALLOC_RING_BUFFER_1
            | BrotliDecoderErrorCode::BROTLI_DECODER_ERROR_ALLOC_RING_BUFFER_2 => {
                DecodeError::WindowTooLarge {
                    coding: Coding::Brotli,
                    window: 1u64 << state.window_bits.min(63),
                    max: self.max_window,
                }
            }
            code => DecodeError::corrupt(Coding::Brotli, error_detail(code)),
        }
    }
}

/// `BROTLI_DECODER_ERROR_FORMAT_PADDING_1` → `format padding 1`.
fn error_detail(code: BrotliDecoderErrorCode) -> String {
    let name = format!("{code:?}");
    let name = name
        .strip_prefix("BROTLI_DECODER_ERROR_")
        .or_else(|| name.strip_prefix("BROTLI_DECODER_"))
        .unwrap_or(&name);
    name.to_ascii_lowercase().replace('_', " ")
}
