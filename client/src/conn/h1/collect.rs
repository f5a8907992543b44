//! [`Collected`]: a response body gathered whole on its connection's loop,
//! for a reader that asked for all of it (`bytes()`, `text()`; see
//! `Pipe::collect`). The body is then pushed once, at its end, in one piece.
//!
//! While the rest of a body of known length is still to come and nothing
//! is left undecoded, the connection reads the socket straight into this
//! buffer ([`room`](Collected::room)), past its read buffer: each byte is
//! copied once, by the kernel. The room is zeroed once, as it is first
//! offered (safe code cannot read into memory that was never written).

use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;

/// The most a collected body reserves (and zeroes) ahead of its bytes, from
/// its `Content-Length`: a larger body grows by this much at a time.
pub(super) const COLLECT_AHEAD: u64 = 64 * 1024 * 1024;

/// A body being collected: `buf[..filled]` holds it so far; what is past
/// `filled` is zeroed room for reading in place.
pub(super) struct Collected {
    buf: BytesMut,
    filled: usize,
}

impl Collected {
    /// Starts with what the pipe held (taken back from it) and what was
    /// gathered since, with capacity for `ahead` more bytes.
    pub(super) fn new(taken_back: VecDeque<Bytes>, gathered: &[u8], ahead: u64) -> Collected {
        let held: usize = taken_back.iter().map(Bytes::len).sum();
        let ahead = usize::try_from(ahead.min(COLLECT_AHEAD)).unwrap_or(0);
        let mut buf = BytesMut::with_capacity(held + gathered.len() + ahead);
        for chunk in taken_back {
            buf.extend_from_slice(&chunk);
        }
        buf.extend_from_slice(gathered);
        Collected {
            filled: buf.len(),
            buf,
        }
    }

    /// Appends bytes decoded elsewhere (from the read buffer).
    pub(super) fn extend(&mut self, data: &[u8]) {
        let end = self.filled + data.len();
        if end <= self.buf.len() {
            self.buf[self.filled..end].copy_from_slice(data);
        } else {
            self.buf.truncate(self.filled);
            self.buf.extend_from_slice(data);
        }
        self.filled = end;
    }

    /// Room for up to `want` bytes read in place, right after the body so
    /// far (zeroed the first time it is offered).
    pub(super) fn room(&mut self, want: u64) -> &mut [u8] {
        let want = usize::try_from(want.min(COLLECT_AHEAD)).unwrap_or(0);
        let end = self.filled + want;
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        &mut self.buf[self.filled..end]
    }

    /// The `n` bytes just read into [`room`](Self::room), before they are
    /// [kept](Self::keep).
    pub(super) fn just_read(&self, n: usize) -> &[u8] {
        &self.buf[self.filled..self.filled + n]
    }

    /// Keeps the `n` bytes just read in place as part of the body.
    pub(super) fn keep(&mut self, n: usize) {
        self.filled += n;
    }

    /// The body, in one piece.
    pub(super) fn finish(mut self) -> Bytes {
        self.buf.truncate(self.filled);
        self.buf.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_pipe_held_comes_first_then_copies_and_reads_in_place() {
        let held = VecDeque::from([Bytes::from_static(b"ab"), Bytes::from_static(b"cd")]);
        let mut body = Collected::new(held, b"ef", 4);
        body.extend(b"gh");
        let room = body.room(10);
        assert_eq!(room.len(), 10);
        room[..3].copy_from_slice(b"ijk");
        assert_eq!(body.just_read(3), b"ijk");
        body.keep(3);
        // Copied bytes land after the ones read in place, over the room.
        body.extend(b"lmnopqrstuvwxyz");
        assert_eq!(&body.finish()[..], b"abcdefghijklmnopqrstuvwxyz");
    }

    #[test]
    fn room_is_offered_again_where_it_was_left() {
        let mut body = Collected::new(VecDeque::new(), b"", 8);
        body.room(8)[..2].copy_from_slice(b"12");
        body.keep(2);
        let room = body.room(6);
        assert_eq!(room, [0; 6]);
        room[..6].copy_from_slice(b"345678");
        body.keep(6);
        assert_eq!(&body.finish()[..], b"12345678");
    }
}
