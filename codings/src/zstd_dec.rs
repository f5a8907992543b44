//! `zstd`: libzstd's streaming decoder (through the `zstd` crate), behind a
//! frame-header check of our own.
//!
//! A zstd body is one or more frames (RFC 8878 §3.1), each either a
//! Zstandard frame or a skippable frame; all are decoded, as `zstd -d` does.
//! Before a frame reaches libzstd its header (at most 18 bytes) is collected
//! here and inspected:
//!
//! * a magic number that is neither kind of frame is corruption if it is the
//!   first frame, trailing data after a complete one;
//! * the frame's `Window_Size` (from the window descriptor, or the content
//!   size for single-segment frames) must not exceed the configured maximum
//!   (8 MiB by default, the limit RFC 9659 sets for HTTP), else
//!   [`DecodeError::WindowTooLarge`] before libzstd allocates anything.
//!
//! libzstd's own `ZSTD_d_windowLogMax` is set to the same bound (rounded up
//! to a power of two) as a second line. libzstd allocates through the Rust
//! global allocator (the crate's `with-rust-allocator` feature), so its
//! memory shows up in the process's accounting: about 100 KB of context,
//! plus an input buffer of one block (128 KiB) and an output buffer of
//! `min(window, frame content size) + 128 KiB`, allocated at the first frame
//! and kept for the next ones. Legacy (pre-v0.8) frames are not accepted
//! (the crate's `legacy` feature is off), nor are dictionaries.

use super::stage::Step;
use super::{Coding, DecodeError};
use zstd::stream::raw::{DParameter, Decoder, Operation, Status};

/// `0xFD2FB528`, little-endian.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The longest frame header: magic, descriptor, window, 4-byte dictionary
/// id, 8-byte content size.
const MAX_HEADER: usize = 18;

/// What the bytes collected at a frame boundary are.
#[derive(Debug, PartialEq, Eq)]
enum Peek {
    /// Not enough bytes to tell yet.
    Need,
    /// Not the start of a frame.
    NotZstd,
    /// A Zstandard frame header, complete, declaring this window.
    Frame { window: u64 },
    /// A skippable frame (magic `0x184D2A5?`); libzstd skips it.
    Skippable,
}

fn classify(b: &[u8]) -> Peek {
    let zstd_prefix = b.iter().zip(ZSTD_MAGIC).all(|(&x, m)| x == m);
    let skippable_prefix = b.iter().take(4).enumerate().all(|(i, &x)| match i {
        0 => x & 0xf0 == 0x50,
        1 => x == 0x2a,
        2 => x == 0x4d,
        _ => x == 0x18,
    });
    if b.len() < 4 {
        return if zstd_prefix || skippable_prefix {
            Peek::Need
        } else {
            Peek::NotZstd
        };
    }
    if skippable_prefix {
        return Peek::Skippable;
    }
    if !zstd_prefix {
        return Peek::NotZstd;
    }
    let Some(&fhd) = b.get(4) else {
        return Peek::Need;
    };
    // Frame_Header_Descriptor (RFC 8878 §3.1.1.1.1).
    let fcs_flag = fhd >> 6;
    let single_segment = fhd & 0x20 != 0;
    let did_size = [0, 1, 2, 4][usize::from(fhd & 3)];
    let fcs_size = match (fcs_flag, single_segment) {
        (0, false) => 0,
        (0, true) => 1,
        (1, _) => 2,
        (2, _) => 4,
        _ => 8,
    };
    let window_descriptor = usize::from(!single_segment);
    let header_len = 5 + window_descriptor + did_size + fcs_size;
    if b.len() < header_len {
        return Peek::Need;
    }
    let window = if single_segment {
        // Window_Size is Frame_Content_Size (§3.1.1.1.4).
        let at = 5 + did_size;
        let mut le = [0u8; 8];
        le[..fcs_size].copy_from_slice(&b[at..at + fcs_size]);
        let fcs = u64::from_le_bytes(le);
        if fcs_size == 2 {
            fcs + 256
        } else {
            fcs
        }
    } else {
        // Window_Descriptor (§3.1.1.1.2).
        let wd = b[5];
        let base = 1u64 << (10 + u32::from(wd >> 3));
        base + (base / 8) * u64::from(wd & 7)
    };
    Peek::Frame { window }
}

/// A `zstd` decoder.
pub(super) struct ZstdDecoder {
    /// Created at the first frame.
    dctx: Option<Decoder<'static>>,
    max_window: u64,
    /// The header of the next frame, collected at a boundary.
    peek: [u8; MAX_HEADER],
    peek_len: usize,
    /// How much of `peek` libzstd has been given.
    replayed: usize,
    in_frame: bool,
    /// Frames completed.
    frames: u64,
    /// The window of the current frame, for error reports.
    window: u64,
    /// The last call filled the output: libzstd may hold more. libzstd
    /// fails a stream after 16 calls in a row that move nothing, so it is
    /// only called with empty input when this is set, and never with empty
    /// output.
    pending: bool,
}

impl ZstdDecoder {
    /// A decoder refusing frames whose window exceeds `max_window` bytes.
    pub(super) fn new(max_window: u64) -> Self {
        ZstdDecoder {
            dctx: None,
            max_window,
            peek: [0; MAX_HEADER],
            peek_len: 0,
            replayed: 0,
            in_frame: false,
            frames: 0,
            window: 0,
            pending: false,
        }
    }

    pub(super) fn is_complete(&self) -> bool {
        !self.in_frame && self.peek_len == 0 && self.frames > 0
    }

    pub(super) fn step(&mut self, input: &[u8], output: &mut [u8]) -> Result<Step, DecodeError> {
        if output.is_empty() || (input.is_empty() && !self.pending) {
            return Ok(Step::default());
        }
        let mut consumed = 0;
        if !self.in_frame {
            loop {
                match classify(&self.peek[..self.peek_len]) {
                    Peek::Need => {
                        let Some(&b) = input.get(consumed) else {
                            return Ok(Step::new(consumed, 0));
                        };
                        self.peek[self.peek_len] = b;
                        self.peek_len += 1;
                        consumed += 1;
                    }
                    Peek::NotZstd if self.frames == 0 => {
                        return Err(DecodeError::corrupt(
                            Coding::Zstd,
                            "not a zstd frame (bad magic number)",
                        ))
                    }
                    Peek::NotZstd => {
                        self.peek_len = 0;
                        return Ok(Step::trailing(consumed, 0));
                    }
                    Peek::Frame { window } => {
                        if window > self.max_window {
                            return Err(DecodeError::WindowTooLarge {
                                coding: Coding::Zstd,
                                window,
                                max: self.max_window,
                            });
                        }
                        self.window = window;
                        break;
                    }
                    Peek::Skippable => break,
                }
            }
            self.in_frame = true;
            self.replayed = 0;
        }

        let dctx = match self.dctx {
            Some(ref mut d) => d,
            None => self.dctx.insert(new_dctx(self.max_window)?),
        };
        let mut produced = 0;
        // The collected header first, then the input.
        if self.replayed < self.peek_len {
            let status = dctx
                .run_on_buffers(&self.peek[self.replayed..self.peek_len], output)
                .map_err(|e| zstd_error(&e, self.window, self.max_window))?;
            self.replayed += status.bytes_read;
            produced += status.bytes_written;
            self.pending = produced == output.len();
            if status.remaining == 0 {
                self.end_frame();
                return Ok(Step::new(consumed, produced));
            }
            if self.replayed < self.peek_len {
                return Ok(Step::new(consumed, produced));
            }
        }
        let Status {
            remaining,
            bytes_read,
            bytes_written,
        } = dctx
            .run_on_buffers(&input[consumed..], &mut output[produced..])
            .map_err(|e| zstd_error(&e, self.window, self.max_window))?;
        consumed += bytes_read;
        produced += bytes_written;
        self.pending = produced == output.len();
        if remaining == 0 {
            self.end_frame();
        }
        Ok(Step::new(consumed, produced))
    }

    /// A frame is decoded and flushed: back to a boundary, keeping any
    /// collected bytes libzstd did not take (the start of the next frame).
    fn end_frame(&mut self) {
        self.frames += 1;
        self.in_frame = false;
        self.peek.copy_within(self.replayed..self.peek_len, 0);
        self.peek_len -= self.replayed;
        self.replayed = 0;
    }
}

fn new_dctx(max_window: u64) -> Result<Decoder<'static>, DecodeError> {
    let setup = || {
        let mut d = Decoder::new()?;
        // log2 of the window, rounded up, within what libzstd accepts
        // (10..=31 on 64-bit targets).
        let log = 64 - max_window.saturating_sub(1).leading_zeros();
        d.set_parameter(DParameter::WindowLogMax(log.clamp(10, 31)))?;
        Ok::<_, std::io::Error>(d)
    };
    setup().map_err(|e| DecodeError::corrupt(Coding::Zstd, format!("decoder setup failed: {e}")))
}

fn zstd_error(e: &std::io::Error, window: u64, max: u64) -> DecodeError {
    let message = e.to_string();
    // libzstd's name for frameParameter_windowTooLarge; our own header check
    // normally catches this first.
    if message.contains("too much memory") {
        DecodeError::WindowTooLarge {
            coding: Coding::Zstd,
            window,
            max,
        }
    } else {
        DecodeError::corrupt(Coding::Zstd, message)
    }
}

#[cfg(test)]
mod tests {
    use super::{classify, Peek};

    #[test]
    fn classify_headers() {
        assert_eq!(classify(&[]), Peek::Need);
        assert_eq!(classify(&[0x28, 0xb5]), Peek::Need);
        assert_eq!(classify(&[0x28, 0x00]), Peek::NotZstd);
        assert_eq!(classify(b"hello"), Peek::NotZstd);
        assert_eq!(classify(&[0x5a, 0x2a, 0x4d, 0x18]), Peek::Skippable);
        assert_eq!(classify(&[0x5a, 0x2a, 0x4d, 0x19]), Peek::NotZstd);
        // Window descriptor 0x58: exponent 11, mantissa 0 → 2 MiB.
        assert_eq!(
            classify(&[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58]),
            Peek::Frame { window: 2 << 20 }
        );
        // Mantissa 7 of 1 KiB: 1 KiB + 7/8 KiB.
        assert_eq!(
            classify(&[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x07]),
            Peek::Frame { window: 1024 + 896 }
        );
        // Single segment, 2-byte content size 0x0100 + 256.
        assert_eq!(
            classify(&[0x28, 0xb5, 0x2f, 0xfd, 0x60, 0x00, 0x01]),
            Peek::Frame { window: 512 }
        );
        assert_eq!(classify(&[0x28, 0xb5, 0x2f, 0xfd, 0x60, 0x00]), Peek::Need);
        // Single segment, 8-byte content size, 4-byte dictionary id.
        let mut h = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe3, 1, 2, 3, 4];
        h.extend_from_slice(&(1u64 << 40).to_le_bytes());
        assert_eq!(h.len(), 17);
        assert_eq!(classify(&h), Peek::Frame { window: 1 << 40 });
    }
}
