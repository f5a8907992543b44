//! [`Gathered`]: a response body's DATA taken from `h2` and not yet in the
//! exchange's pipe.
//!
//! `h2` keeps each DATA frame it has received and not handed out as an
//! entry of its own, and the pipe each chunk pushed into it as one: a
//! server sending its body in 1-byte frames, as far as the windows let it,
//! made 64 KiB windows (the pipe's and the stream's) cost 19 MiB, about
//! 150 bytes a frame (`tests/streamed_body_memory.rs`). So a stream takes what `h2` holds
//! even while its pipe is full (copying it here, its window not given
//! back), and frames smaller than [`SMALL`] are copied together into one
//! chunk. A frame alone, or a large one while the pipe has room, goes into
//! the pipe as it came (no copy: the common case, a body in full frames or
//! in one small frame).

use bytes::{Bytes, BytesMut};

/// Frames smaller than this are copied together with their neighbours.
const SMALL: usize = 4096;

/// A gathered chunk goes to the pipe once it is this long.
const CHUNK: usize = 16 * 1024;

/// Bytes taken from `h2`, in order, not yet pushed into the pipe.
#[derive(Default)]
pub(super) struct Gathered {
    /// The first frame, as it came, while it is alone.
    first: Option<Bytes>,
    /// The frames copied together, once a second came.
    copied: BytesMut,
}

impl Gathered {
    /// Adds `data` (after what is here).
    pub(super) fn add(&mut self, data: Bytes) {
        if self.is_empty() {
            self.first = Some(data);
            return;
        }
        if let Some(first) = self.first.take() {
            self.copied.extend_from_slice(&first);
        }
        self.copied.extend_from_slice(&data);
    }

    /// Whether `data` goes into the pipe through here, copied with its
    /// neighbours: it is small. (A large one goes as it came, after what
    /// is here.)
    pub(super) fn is_small(data: &Bytes) -> bool {
        data.len() < SMALL
    }

    /// Whether what is here is a chunk worth pushing now.
    pub(super) fn is_full(&self) -> bool {
        self.len() >= CHUNK
    }

    /// What is here, as one chunk; `None` if nothing is.
    pub(super) fn take(&mut self) -> Option<Bytes> {
        match self.first.take() {
            Some(first) => Some(first),
            None if self.copied.is_empty() => None,
            None => Some(self.copied.split().freeze()),
        }
    }

    /// Bytes here.
    pub(super) fn len(&self) -> usize {
        self.first.as_ref().map_or(0, Bytes::len) + self.copied.len()
    }

    /// Whether nothing is here.
    pub(super) fn is_empty(&self) -> bool {
        self.first.is_none() && self.copied.is_empty()
    }
}
