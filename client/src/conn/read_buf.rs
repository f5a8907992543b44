//! [`ReadBuf`]: what a connection has received and not yet decoded, and
//! the one loop that reads into it.

use crate::net::Transport;
use std::io;

/// Bytes read per system call; the buffer grows past it only for a large head.
const READ_CHUNK: usize = 16 * 1024;

/// `buf[pos..len]` is received and not yet decoded.
#[derive(Default)]
pub(crate) struct ReadBuf {
    buf: Vec<u8>,
    pos: usize,
    len: usize,
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
        if self.len == self.buf.len() {
            self.make_room();
        }
        loop {
            return match transport.read(&mut self.buf[self.len..]) {
                Ok(0) => Filled::Eof,
                Ok(n) => {
                    self.len += n;
                    Filled::Data(n)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Filled::WouldBlock,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => Filled::Failed(e),
            };
        }
    }

    fn make_room(&mut self) {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.len, 0);
            self.len -= self.pos;
            self.pos = 0;
        }
        if self.len == self.buf.len() {
            let grown = (self.buf.len() * 2).max(READ_CHUNK);
            self.buf.resize(grown, 0);
        }
    }
}
