//! [`ReadBuf`]: what a connection has received and not yet decoded, and
//! the one loop that reads into it.

use crate::net::Transport;
use bytes::BytesMut;
use std::io;

/// Room a connection reads into at first: enough for most heads and small
/// bodies.
const READ_MIN: usize = 16 * 1024;

/// Room it grows to when reads keep filling it (a large body): fewer system
/// calls per byte. Kept for the life of the connection, idle or not.
const READ_MAX: usize = 64 * 1024;

/// `buf[pos..len]` is received and not yet decoded. Each read offers the
/// socket between half of `want` and `want` bytes of room (more only while
/// a head too large for it is being gathered); a read that fills all the
/// room it was offered doubles `want`, up to [`READ_MAX`].
pub(crate) struct ReadBuf {
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    want: usize,
}

impl Default for ReadBuf {
    fn default() -> ReadBuf {
        ReadBuf {
            buf: Vec::new(),
            pos: 0,
            len: 0,
            want: READ_MIN,
        }
    }
}

/// How one [`ReadBuf::fill`] ended.
#[derive(Debug)]
pub(crate) enum Filled {
    /// Bytes were read (this many); the socket may hold more.
    Data(usize),
    /// The stream ended cleanly.
    Eof,
    /// Nothing to read now; the loop reports when there is.
    WouldBlock,
    /// The stream failed.
    Failed(io::Error),
}

impl ReadBuf {
    /// What is received and not yet consumed.
    pub(crate) fn unread(&self) -> &[u8] {
        &self.buf[self.pos..self.len]
    }

    /// Whether nothing is left unconsumed.
    pub(crate) fn is_empty(&self) -> bool {
        self.pos == self.len
    }

    /// Marks `n` bytes of [`unread`](Self::unread) as decoded.
    pub(crate) fn consume(&mut self, n: usize) {
        self.pos += n;
        debug_assert!(self.pos <= self.len);
        if self.pos == self.len {
            self.pos = 0;
            self.len = 0;
        }
    }

    /// Forgets everything unconsumed.
    pub(crate) fn clear(&mut self) {
        self.pos = 0;
        self.len = 0;
    }

    /// One read from `transport` into the free space (making room first:
    /// decoded bytes are dropped from the front, or the buffer grows).
    pub(crate) fn fill(&mut self, transport: &mut Transport) -> Filled {
        if self.buf.len() - self.len < self.want / 2 {
            self.make_room();
        }
        let room = self.buf.len() - self.len;
        let filled = read_once(transport, &mut self.buf[self.len..]);
        if let Filled::Data(n) = filled {
            self.len += n;
            if n == room && self.want < READ_MAX {
                self.want *= 2;
            }
        }
        filled
    }

    fn make_room(&mut self) {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.len, 0);
            self.len -= self.pos;
            self.pos = 0;
        }
        if self.buf.len() - self.len < self.want / 2 {
            // A head larger than `want` grows the buffer as it comes.
            let grown = self.len + self.want;
            self.buf.resize(grown, 0);
        }
    }
}

/// One read from `transport` into the spare capacity of `buf`, at most
/// `max` bytes (retried if interrupted): `buf` grows by what was read.
pub(crate) fn read_spare_once(transport: &mut Transport, buf: &mut BytesMut, max: usize) -> Filled {
    loop {
        return match transport.read_spare(buf, max) {
            Ok(0) => Filled::Eof,
            Ok(n) => Filled::Data(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Filled::WouldBlock,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Filled::Failed(e),
        };
    }
}

/// One read from `transport` into `buf` (retried if interrupted).
pub(crate) fn read_once(transport: &mut Transport, buf: &mut [u8]) -> Filled {
    loop {
        return match transport.read(buf) {
            Ok(0) => Filled::Eof,
            Ok(n) => Filled::Data(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Filled::WouldBlock,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Filled::Failed(e),
        };
    }
}
