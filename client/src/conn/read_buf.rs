//! [`ReadBuf`]: what a connection has received and not yet decoded, and
//! the one loop that reads into it.

use crate::net::Transport;
use bytes::BytesMut;
use std::io;

/// Room a connection reads into at first: enough for most heads and small
/// bodies.
const READ_MIN: usize = 16 * 1024;

/// Whether a short read may say the socket is drained: only where urgent
/// data is reported (Linux; see `conn::open`'s interest), so that a read
/// cut short at it is told apart.
const SHORT_READS_SAY_DRAINED: bool = cfg!(any(target_os = "linux", target_os = "android"));

/// Room it grows to when reads keep filling it (a large body): fewer system
/// calls per byte. Kept for the life of the connection, idle or not.
const READ_MAX: usize = 64 * 1024;

/// `buf[pos..len]` is received and not yet decoded. Each read offers the
/// socket between half of `want` and `want` bytes of room (more only while
/// a head too large for it is being gathered); a read that fills all the
/// room it was offered doubles `want`, up to [`READ_MAX`].
///
/// It also keeps what the reads said about the socket ([`drained`]): a
/// read that returned `WouldBlock`, or fewer bytes than it was offered,
/// took everything the socket had (tokio reads readiness the same way),
/// until an event says more has come — or that the peer closed, which a
/// short read does not show (the end comes with the next read) and which
/// nothing undoes; or that TCP urgent data came, at which a read stops
/// short with in-band bytes still queued behind it: from then on only
/// `WouldBlock` says the socket is drained — as it always does on systems
/// that do not report urgent data (anything but Linux).
///
/// [`drained`]: Self::drained
pub(crate) struct ReadBuf {
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    want: usize,
    /// The last read took all the socket had.
    drained: bool,
    /// An event or a read said the peer closed, or the socket failed.
    closed: bool,
    /// An event said TCP urgent data came: short reads prove nothing.
    urgent: bool,
}

impl Default for ReadBuf {
    fn default() -> ReadBuf {
        ReadBuf {
            buf: Vec::new(),
            pos: 0,
            len: 0,
            want: READ_MIN,
            drained: false,
            closed: false,
            urgent: false,
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

    /// Whether, as far as the kernel has said, the socket holds nothing
    /// and the peer has not closed: the last read took all there was (it
    /// said `WouldBlock`, or — see [`SHORT_READS_SAY_DRAINED`] — returned
    /// less than it was offered), and no event said otherwise since. Never
    /// over TLS: a read there is of plaintext rustls may already hold, and
    /// says nothing about the socket.
    pub(crate) fn drained(&self) -> bool {
        self.drained && !self.closed
    }

    /// Whether the peer has closed (or the socket failed), as an event or
    /// a read has said: no more will come.
    pub(crate) fn peer_closed(&self) -> bool {
        self.closed
    }

    /// A readable event for the socket: more may have come, and if it
    /// says so, the peer closed or sent urgent data.
    pub(crate) fn on_readable(&mut self, peer_closed: bool, urgent: bool) {
        self.drained = false;
        self.closed |= peer_closed;
        self.urgent |= urgent;
    }

    /// One read from `transport` into the free space (making room first:
    /// decoded bytes are dropped from the front, or the buffer grows).
    pub(crate) fn fill(&mut self, transport: &mut Transport) -> Filled {
        if self.buf.len() - self.len < self.want / 2 {
            self.make_room();
        }
        let room = self.buf.len() - self.len;
        let (start, end) = (self.len, self.buf.len());
        let filled = self.read_into(transport, start, end);
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

    /// One read into `buf[start..end]`, noted.
    fn read_into(&mut self, transport: &mut Transport, start: usize, end: usize) -> Filled {
        let filled = read_once(transport, &mut self.buf[start..end]);
        self.note(&filled, end - start, transport.is_plain());
        filled
    }

    /// What a read of `offered` bytes of room said about the socket (for a
    /// read into another buffer: a body read in place), if the socket is
    /// read directly (`plain`: not through TLS).
    pub(crate) fn note(&mut self, filled: &Filled, offered: usize, plain: bool) {
        // A read that met the stream's end (or its failure) says the peer
        // closed as surely as an event would.
        self.closed |= matches!(filled, Filled::Eof | Filled::Failed(_));
        self.drained = plain
            && match filled {
                Filled::Data(n) => SHORT_READS_SAY_DRAINED && *n < offered && !self.urgent,
                Filled::WouldBlock => true,
                Filled::Eof | Filled::Failed(_) => false,
            };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn failed() -> Filled {
        Filled::Failed(io::Error::other("reset"))
    }

    #[test]
    fn a_short_read_or_would_block_drains_the_socket_and_a_full_read_does_not() {
        let mut buf = ReadBuf::default();
        assert!(!buf.drained(), "nothing known before the first read");
        buf.note(&Filled::Data(10), 16, true);
        assert_eq!(
            buf.drained(),
            SHORT_READS_SAY_DRAINED,
            "a short read took all there was"
        );
        buf.note(&Filled::Data(16), 16, true);
        assert!(!buf.drained(), "a full read may have left more");
        buf.note(&Filled::WouldBlock, 16, true);
        assert!(buf.drained());
        buf.note(&Filled::Eof, 16, true);
        assert!(!buf.drained(), "the end of the stream is not silence");
        buf.note(&failed(), 16, true);
        assert!(!buf.drained());
        // Over TLS a read is of plaintext: it says nothing of the socket.
        buf.note(&Filled::WouldBlock, 16, false);
        assert!(!buf.drained(), "never over TLS");
        buf.note(&Filled::Data(10), 16, false);
        assert!(!buf.drained(), "never over TLS");
    }

    #[test]
    fn a_readable_event_undoes_drained_and_a_close_is_for_good() {
        let mut buf = ReadBuf::default();
        buf.note(&Filled::WouldBlock, 16, true);
        buf.on_readable(false, false);
        assert!(!buf.drained(), "more may have come");
        buf.note(&Filled::Data(3), 16, true);
        assert_eq!(buf.drained(), SHORT_READS_SAY_DRAINED);
        // Data and the peer's FIN in one event: the short read that takes
        // the data leaves the end for the next read.
        buf.on_readable(true, false);
        buf.note(&Filled::Data(3), 16, true);
        assert!(!buf.drained(), "the peer closed");
        buf.note(&Filled::WouldBlock, 16, true);
        assert!(!buf.drained(), "nothing undoes a close");
    }

    #[test]
    fn after_urgent_data_only_would_block_drains_the_socket() {
        let mut buf = ReadBuf::default();
        buf.on_readable(false, true);
        // A read stops short at the urgent mark, bytes still behind it.
        buf.note(&Filled::Data(3), 16, true);
        assert!(!buf.drained(), "a short read at the urgent mark");
        buf.on_readable(false, false);
        buf.note(&Filled::Data(3), 16, true);
        assert!(!buf.drained(), "for the rest of the connection");
        buf.note(&Filled::WouldBlock, 16, true);
        assert!(buf.drained());
    }
}
