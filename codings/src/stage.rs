//! One decoding stage: a codec plus the policy around it (trailing data,
//! empty input, counting), so that the chain in `mod.rs` only moves bytes.
//!
//! The codecs share one internal contract, [`Step`]:
//!
//! * `step(input, output)` decodes what it can and reports what it consumed
//!   and produced. It buffers partial headers and trailers itself (a few
//!   bytes), so it takes all the input it is given unless the output is
//!   full; it never consumes bytes past the end of a complete stream.
//! * When a stream is complete and the next bytes cannot start another
//!   member or frame, it says so with `trailing`; the stage then applies the
//!   [`TrailingData`] policy.
//! * `is_complete()` is true at a point where the input may end: a whole
//!   stream (all gzip members, zstd frames) has been decoded and flushed.

use super::{Coding, DecodeError, DecoderConfig, TrailingData};

/// What one codec step did.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Step {
    /// Input bytes taken.
    pub consumed: usize,
    /// Output bytes written.
    pub produced: usize,
    /// The stream is complete and `input[consumed..]` (non-empty) is not a
    /// continuation of it.
    pub trailing: bool,
}

// With no coding enabled, nothing builds a step.
#[cfg_attr(
    not(any(
        feature = "gzip",
        feature = "deflate",
        feature = "brotli",
        feature = "zstd"
    )),
    allow(dead_code)
)]
impl Step {
    pub(super) fn new(consumed: usize, produced: usize) -> Self {
        Step {
            consumed,
            produced,
            trailing: false,
        }
    }

    pub(super) fn trailing(consumed: usize, produced: usize) -> Self {
        Step {
            consumed,
            produced,
            trailing: true,
        }
    }

    #[cfg(any(feature = "deflate", feature = "brotli"))]
    /// The step of a codec whose stream has ended: nothing to do, or trailing
    /// data if there is input.
    pub(super) fn after_end(input: &[u8]) -> Self {
        Step {
            consumed: 0,
            produced: 0,
            trailing: !input.is_empty(),
        }
    }
}

/// The codec of a stage, one variant per enabled feature.
enum Codec {
    #[cfg(feature = "gzip")]
    Gzip(super::gzip::GzipDecoder),
    #[cfg(feature = "deflate")]
    Deflate(super::deflate::DeflateDecoder),
    #[cfg(feature = "brotli")]
    Brotli(super::brotli_dec::BrotliDecoder),
    #[cfg(feature = "zstd")]
    Zstd(super::zstd_dec::ZstdDecoder),
}

impl Codec {
    /// The codec for `coding`, or `None` if its feature is off.
    #[allow(unused_variables)] // `config` is unused when only flate codings are on.
    fn new(coding: Coding, config: &DecoderConfig) -> Option<Codec> {
        match coding {
            #[cfg(feature = "gzip")]
            Coding::Gzip => Some(Codec::Gzip(super::gzip::GzipDecoder::new())),
            #[cfg(feature = "deflate")]
            Coding::Deflate => Some(Codec::Deflate(super::deflate::DeflateDecoder::new())),
            #[cfg(feature = "brotli")]
            Coding::Brotli => Some(Codec::Brotli(super::brotli_dec::BrotliDecoder::new(
                config.brotli_window(),
            ))),
            #[cfg(feature = "zstd")]
            Coding::Zstd => Some(Codec::Zstd(super::zstd_dec::ZstdDecoder::new(
                config.zstd_window(),
            ))),
            #[allow(unreachable_patterns)] // reachable only when a feature is off
            _ => None,
        }
    }

    #[allow(unused_variables)] // unused only in a build with no coding at all
    fn step(&mut self, input: &[u8], output: &mut [u8]) -> Result<Step, DecodeError> {
        match *self {
            #[cfg(feature = "gzip")]
            Codec::Gzip(ref mut d) => d.step(input, output),
            #[cfg(feature = "deflate")]
            Codec::Deflate(ref mut d) => d.step(input, output),
            #[cfg(feature = "brotli")]
            Codec::Brotli(ref mut d) => d.step(input, output),
            #[cfg(feature = "zstd")]
            Codec::Zstd(ref mut d) => d.step(input, output),
        }
    }

    fn is_complete(&self) -> bool {
        match *self {
            #[cfg(feature = "gzip")]
            Codec::Gzip(ref d) => d.is_complete(),
            #[cfg(feature = "deflate")]
            Codec::Deflate(ref d) => d.is_complete(),
            #[cfg(feature = "brotli")]
            Codec::Brotli(ref d) => d.is_complete(),
            #[cfg(feature = "zstd")]
            Codec::Zstd(ref d) => d.is_complete(),
        }
    }
}

/// A codec with its policy and counters.
///
/// The codec is made with the stage's first byte, not with the stage (see
/// "Memory" in the crate docs): a response's head, which makes the
/// decoder, is read long before its body, which may never be.
pub(super) struct Stage {
    coding: Coding,
    /// `None` until the first byte.
    codec: Option<Codec>,
    /// The windows the codec is made with, and the trailing-data policy.
    config: DecoderConfig,
    /// Trailing data was seen under [`TrailingData::Ignore`]: everything from
    /// here on is discarded.
    ignoring: bool,
    /// Whether any input byte reached the codec (a stage that got none is an
    /// empty body, which is complete).
    received: bool,
    /// Bytes this stage has produced.
    pub(super) produced: u64,
}

impl Stage {
    /// The stage for `coding`, or `None` if its feature is off.
    pub(super) fn new(coding: Coding, config: &DecoderConfig) -> Option<Stage> {
        coding.is_enabled().then_some(Stage {
            coding,
            codec: None,
            config: *config,
            ignoring: false,
            received: false,
            produced: 0,
        })
    }

    pub(super) fn coding(&self) -> Coding {
        self.coding
    }

    /// Decodes as much of `input` into `output` as possible: returns only
    /// when the output is full or no more progress can be made.
    pub(super) fn run(
        &mut self,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(usize, usize), DecodeError> {
        if self.ignoring {
            return Ok((input.len(), 0));
        }
        if self.codec.is_none() && input.is_empty() {
            // No byte yet, and none now: nothing to decode, no codec to make.
            return Ok((0, 0));
        }
        let (coding, config) = (self.coding, &self.config);
        let codec = self.codec.get_or_insert_with(|| {
            Codec::new(coding, config).expect("a stage is made only for an enabled coding")
        });
        let (mut consumed, mut produced) = (0, 0);
        loop {
            let step = codec.step(&input[consumed..], &mut output[produced..])?;
            consumed += step.consumed;
            produced += step.produced;
            if step.consumed > 0 {
                self.received = true;
            }
            if step.trailing {
                self.produced += produced as u64;
                return self.trailing(input.len(), consumed, produced);
            }
            if step.consumed == 0 && step.produced == 0 {
                break;
            }
        }
        self.produced += produced as u64;
        Ok((consumed, produced))
    }

    /// Applies the trailing-data policy to `input[consumed..]`.
    fn trailing(
        &mut self,
        input_len: usize,
        consumed: usize,
        produced: usize,
    ) -> Result<(usize, usize), DecodeError> {
        match self.config.trailing {
            TrailingData::Reject => Err(DecodeError::TrailingData {
                coding: self.coding,
            }),
            TrailingData::Ignore => {
                self.ignoring = true;
                debug_assert!(consumed <= input_len);
                Ok((input_len, produced))
            }
        }
    }

    /// Treats `input` as arriving after the end of the body (the decoder was
    /// already finished): trailing data, whatever the codec would make of it.
    pub(super) fn after_finish(&mut self, input: &[u8]) -> Result<(usize, usize), DecodeError> {
        if input.is_empty() || self.ignoring {
            return Ok((input.len(), 0));
        }
        self.trailing(input.len(), 0, 0)
    }

    /// Whether the input may end here: a complete stream, or no input at all
    /// (an empty body, accepted for every coding as curl and browsers do).
    pub(super) fn is_complete(&self) -> bool {
        // A byte received made the codec.
        self.ignoring || !self.received || self.codec.as_ref().is_some_and(Codec::is_complete)
    }
}
