//! [`Collected`]: a response body gathered whole on its connection's loop,
//! for a reader that asked for all of it (`bytes()`, `text()`; see
//! `Pipe::collect`). The body is then pushed once, at its end, in one piece.
//!
//! While the rest of a body of known length is still to come and nothing
//! is left undecoded, the connection reads the socket straight into this
//! buffer ([`buf_mut`](Collected::buf_mut)), past its read buffer: each
//! byte is copied once, by the kernel, into memory never zeroed (see
//! `net::sys`), reserved as the bytes come — not from the body's
//! `Content-Length`, which a server may declare far larger than what it
//! sends ([`Collected::read_ahead`]).

use crate::exchange::{own_size, Chunks};
use bytes::{Bytes, BytesMut};

/// The most a collected body reserves ahead of its bytes at first, from
/// its `Content-Length`: a larger body grows as it comes (see
/// [`Collected::read_ahead`]).
pub(super) const COLLECT_AHEAD: u64 = 1024 * 1024;

/// The most a collected body of unknown length (chunked, or read until
/// the close) reserves ahead: what the client's bodies typically are
/// ([`ahead_of_unknown`]), up to this.
pub(super) const UNKNOWN_AHEAD_MAX: u64 = 1024 * 1024;

/// What to reserve for a body of unknown length, from the length of the
/// client's recent bodies (`typical`, a moving average) with a quarter
/// more (an average of bodies all of one length creeps up to it from
/// below): a client fetching like bodies again and again reserves once,
/// rather than grow its buffer by doubling, copying it each time.
pub(super) fn ahead_of_unknown(typical: u64) -> u64 {
    typical.saturating_add(typical / 4).min(UNKNOWN_AHEAD_MAX)
}

/// A body being collected: `buf` holds it so far, with capacity reserved
/// for the rest of a body of known length.
pub(super) struct Collected {
    buf: BytesMut,
}

impl Collected {
    /// Starts with what the pipe held (taken back from it) and what was
    /// gathered since, with capacity for `ahead` more bytes. The gathered
    /// bytes are kept where they are when the pipe held nothing (a body
    /// whose first bytes were deferred): no copy.
    pub(super) fn new(taken_back: Chunks, gathered: BytesMut, ahead: u64) -> Collected {
        let ahead = usize::try_from(ahead.min(COLLECT_AHEAD)).unwrap_or(0);
        if taken_back.is_empty() {
            let mut buf = gathered;
            buf.reserve(ahead);
            return Collected { buf };
        }
        let held: usize = taken_back.iter().map(Bytes::len).sum();
        let mut buf = BytesMut::with_capacity(held + gathered.len() + ahead);
        for chunk in taken_back {
            buf.extend_from_slice(&chunk);
        }
        buf.extend_from_slice(&gathered);
        Collected { buf }
    }

    /// Appends bytes decoded elsewhere (from the read buffer).
    pub(super) fn extend(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The body so far, to read more of it into (its spare capacity).
    pub(super) fn buf_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// How much of a body of `remaining` known bytes one read may take
    /// into [`buf_mut`](Self::buf_mut): what its reservation has room
    /// for while that is worth a read, else as much again as it holds
    /// ([`COLLECT_AHEAD`] at least), so that it grows with what comes — a
    /// server that declares 1 GiB and sends a few bytes costs little more
    /// than they do — and, grown by doubling, is copied (or remapped) a
    /// few times over a large body.
    pub(super) fn read_ahead(&self, remaining: u64) -> usize {
        let spare = self.buf.capacity() - self.buf.len();
        let growth =
            usize::try_from(COLLECT_AHEAD).map_or(usize::MAX, |least| self.buf.len().max(least));
        super::read_room(spare, growth, remaining)
    }

    /// The last `n` bytes of the body so far (the ones just read).
    pub(super) fn tail(&self, n: usize) -> &[u8] {
        &self.buf[self.buf.len() - n..]
    }

    /// The body, in one piece (see [`own_size`]).
    pub(super) fn finish(self) -> Bytes {
        own_size(self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_pipe_held_comes_first_then_copies_and_reads_in_place() {
        let held = [Bytes::from_static(b"ab"), Bytes::from_static(b"cd")]
            .into_iter()
            .collect();
        let mut body = Collected::new(held, BytesMut::from(&b"ef"[..]), 4);
        body.extend(b"gh");
        // As a read in place does: into the spare capacity.
        body.buf_mut().extend_from_slice(b"ijk");
        assert_eq!(body.tail(3), b"ijk");
        body.extend(b"lmnopqrstuvwxyz");
        assert_eq!(&body.finish()[..], b"abcdefghijklmnopqrstuvwxyz");
    }

    #[test]
    fn a_body_of_unknown_length_reserves_a_little_more_than_is_typical() {
        assert_eq!(ahead_of_unknown(0), 0);
        assert_eq!(ahead_of_unknown(65_535), 81_918);
        assert_eq!(ahead_of_unknown(u64::MAX), UNKNOWN_AHEAD_MAX);
    }

    #[test]
    fn a_body_much_shorter_than_its_reservation_keeps_only_its_own_size() {
        let mut short = Collected::new(
            Chunks::default(),
            BytesMut::new(),
            ahead_of_unknown(1 << 20),
        );
        short.extend(b"short");
        let before = short.buf.as_ptr();
        let body = short.finish();
        assert_eq!(&body[..], b"short");
        assert_ne!(body.as_ptr(), before, "copied out of the reservation");

        let mut near = Collected::new(Chunks::default(), BytesMut::new(), ahead_of_unknown(60_000));
        near.extend(&[b'x'; 60_000]);
        let before = near.buf.as_ptr();
        assert_eq!(near.finish().as_ptr(), before, "kept where it was read");
    }

    #[test]
    fn the_length_ahead_is_reserved_not_filled() {
        let body = Collected::new(Chunks::default(), BytesMut::new(), 1 << 20);
        assert!(body.buf.capacity() >= 1 << 20);
        assert!(body.buf.is_empty());
        assert_eq!(body.read_ahead(u64::MAX), 1 << 20);
    }

    #[test]
    fn a_declared_length_is_reserved_as_the_bytes_come() {
        let mut body = Collected::new(Chunks::default(), BytesMut::new(), 1 << 30);
        assert_eq!(body.buf.capacity(), COLLECT_AHEAD as usize, "not 1 GiB");
        assert_eq!(body.read_ahead(1 << 30), COLLECT_AHEAD as usize);
        assert_eq!(body.read_ahead(10), 10, "no more than the rest");
        let left = super::super::MIN_SPARE;
        body.extend(&vec![b'x'; COLLECT_AHEAD as usize - left]);
        assert_eq!(body.read_ahead(1 << 30), left, "what the room has left");
        body.extend(&vec![b'x'; left]);
        assert_eq!(
            body.read_ahead(1 << 30),
            COLLECT_AHEAD as usize,
            "full: as much again as it holds"
        );
        body.extend(&vec![b'x'; 1 << 20]);
        let held = body.buf.len();
        body.buf.reserve(body.read_ahead(1 << 30));
        assert!(
            body.buf.capacity() <= 2 * held,
            "no more reserved than as much again as it holds"
        );
    }
}
