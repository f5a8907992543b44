//! [`Transport`]: the byte stream under a connection — a plain TCP socket,
//! or TLS over one — behind the few non-blocking operations the
//! connection's state machine needs.
//!
//! Everything here is non-blocking and edge-trigger safe: a read or write
//! reports `WouldBlock` only once the socket itself has, so the loop's next
//! readiness event is guaranteed to come. For TLS:
//!
//! * `read` hands out plaintext rustls already holds, and otherwise reads
//!   TLS records from the socket (`read_tls`), decrypts them
//!   (`process_new_packets`) and tries again. A clean end (the server's
//!   `close_notify`) reads as `Ok(0)`; a TCP close without `close_notify`
//!   is an `UnexpectedEof` error — a truncation attack looks exactly like
//!   that, so it is never taken for the end of a body. A TLS alert before
//!   the server's first data (a TLS 1.3 server's refusal of the client's
//!   certificate) is marked as the end of the handshake
//!   ([`late_handshake_failure`]). Plaintext decrypted before a failure
//!   (records a fatal alert follows in the same read) is handed out first;
//!   the failure is the next read's, at once.
//! * `write` gives plaintext to rustls and pushes the TLS records out until
//!   the socket would block; records not yet sent stay in rustls, and
//!   [`Transport::flush`] sends them on the next writable event.
//! * `close` sends `close_notify` (best effort: never waits) and drops the
//!   socket.
//! * The server's records are followed as their bytes go to rustls
//!   ([`RecordCursor`]): the start of a record that has not come whole is
//!   held in rustls where its state does not show it, and counts, as a
//!   byte on a plain socket does, as something nobody asked for
//!   ([`Transport::has_buffered_input`], [`Transport::still_open`]).

#[cfg(feature = "rustls")]
use rustls::ClientConnection;
use std::io::{self, Read, Write};

/// The most plaintext [`Transport::read_spare`] asks TLS for at once (a
/// record is at most 16 KiB): the room offered is zeroed first.
#[cfg(feature = "rustls")]
const TLS_READ_MAX: usize = 32 * 1024;

/// A connection's byte stream.
pub(crate) enum Transport {
    /// Plain TCP.
    Plain(mio::net::TcpStream),
    /// TLS over TCP.
    #[cfg(feature = "rustls")]
    Tls {
        /// The socket, registered on the connection's loop.
        tcp: mio::net::TcpStream,
        /// The TLS state (boxed: it is large).
        tls: Box<ClientConnection>,
        /// Bytes of TLS records the socket took.
        sent: u64,
        /// Whether the server has sent data yet: a TLS alert before that
        /// is the end of its handshake (see [`LateHandshakeFailure`]).
        answered: bool,
        /// Where the server's records stand, as read.
        records: RecordCursor,
    },
}

/// How far a handshake got.
pub(crate) enum Handshake {
    /// Done: the exchange can start.
    Done,
    /// Waiting for the socket (readable or writable).
    Pending,
}

/// Why a handshake failed.
pub(crate) enum HandshakeError {
    /// The TLS layer refused (a certificate, a protocol violation, an alert).
    #[cfg(feature = "rustls")]
    Tls(rustls::Error),
    /// The socket failed, or the server closed it mid-handshake.
    Io(io::Error),
}

/// A TLS alert from a server that has sent no data on the connection
/// yet, inside the `io::Error` a read returns: the end of the handshake,
/// as the server has it. A TLS 1.3 server judges the client's certificate only
/// once the client has finished its side, so its refusal (an alert:
/// `certificate_required`, `bad_certificate`, `unknown_ca`) comes with the
/// first read; the connection reports it as an `Error::Tls`, as TLS 1.2,
/// where it comes within the handshake (see [`late_handshake_failure`]).
#[cfg(feature = "rustls")]
#[derive(Debug)]
struct LateHandshakeFailure(rustls::Error);

#[cfg(feature = "rustls")]
impl std::fmt::Display for LateHandshakeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(feature = "rustls")]
impl std::error::Error for LateHandshakeFailure {}

/// The TLS failure that ended the handshake, if `error` is one a read
/// returned before the server sent any data.
#[cfg(feature = "rustls")]
pub(crate) fn late_handshake_failure(error: &io::Error) -> Option<&rustls::Error> {
    let inner = error.get_ref()?.downcast_ref::<LateHandshakeFailure>()?;
    Some(&inner.0)
}

/// A read's TLS failure as an `io::Error`: a [`LateHandshakeFailure`] if
/// it is the server's alert before it sent any data (a refusal of the
/// client's certificate is an alert; a record that does not decrypt is
/// not one, and stays an I/O error).
#[cfg(feature = "rustls")]
fn tls_io_error(error: rustls::Error, answered: bool) -> io::Error {
    if answered || !matches!(error, rustls::Error::AlertReceived(_)) {
        io::Error::new(io::ErrorKind::InvalidData, error)
    } else {
        io::Error::new(io::ErrorKind::InvalidData, LateHandshakeFailure(error))
    }
}

impl Transport {
    /// The socket, for registration and connect status.
    pub(crate) fn tcp(&self) -> &mio::net::TcpStream {
        match self {
            Transport::Plain(tcp) => tcp,
            #[cfg(feature = "rustls")]
            Transport::Tls { tcp, .. } => tcp,
        }
    }

    /// The socket, for (de)registration.
    pub(crate) fn tcp_mut(&mut self) -> &mut mio::net::TcpStream {
        match self {
            Transport::Plain(tcp) => tcp,
            #[cfg(feature = "rustls")]
            Transport::Tls { tcp, .. } => tcp,
        }
    }

    #[cfg(feature = "rustls")]
    /// Starts TLS on a connected plain socket, `tls` having taken `early`,
    /// the server's first bytes, already (see [`take_early_records`]). The
    /// handshake is driven by [`handshake`](Self::handshake).
    pub(crate) fn start_tls(self, tls: ClientConnection, early: &[u8]) -> Transport {
        let mut records = RecordCursor::default();
        records.advance(early);
        match self {
            Transport::Plain(tcp) | Transport::Tls { tcp, .. } => Transport::Tls {
                tcp,
                tls: Box::new(tls),
                sent: 0,
                answered: false,
                records,
            },
        }
    }

    /// Drives the TLS handshake as far as the socket allows. A plain
    /// transport has none and is done at once.
    pub(crate) fn handshake(&mut self) -> Result<Handshake, HandshakeError> {
        match self {
            Transport::Plain(_) => Ok(Handshake::Done),
            #[cfg(feature = "rustls")]
            Transport::Tls {
                tcp,
                tls,
                sent,
                records,
                ..
            } => tls_handshake(tcp, tls, sent, records),
        }
    }

    /// The ALPN protocol the server chose, once the handshake is done.
    pub(crate) fn alpn_protocol(&self) -> Option<&[u8]> {
        match self {
            Transport::Plain(_) => None,
            #[cfg(feature = "rustls")]
            Transport::Tls { tls, .. } => tls.alpn_protocol(),
        }
    }

    /// Whether it is plain TCP, not TLS.
    pub(crate) fn is_plain(&self) -> bool {
        matches!(self, Transport::Plain(_))
    }

    /// Reads plaintext into `buf`. `Ok(0)` is a clean end of stream.
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(tcp) => tcp.read(buf),
            #[cfg(feature = "rustls")]
            Transport::Tls {
                tcp,
                tls,
                sent,
                answered,
                records,
            } => tls_read(tcp, tls, sent, answered, records, buf),
        }
    }

    /// Reads plaintext into the spare capacity of `buf`, at most `max`
    /// bytes, extending `buf` by what was read; `Ok(0)` is a clean end of
    /// stream. A plain socket reads straight into memory never initialised
    /// (nothing to zero first); TLS decrypts into zeroed room.
    pub(crate) fn read_spare(
        &mut self,
        buf: &mut bytes::BytesMut,
        max: usize,
    ) -> io::Result<usize> {
        match self {
            Transport::Plain(tcp) => super::sys::recv_into_spare(tcp, buf, max),
            #[cfg(feature = "rustls")]
            Transport::Tls {
                tcp,
                tls,
                sent,
                answered,
                records,
            } => {
                // A read hands out a record or two: zero no more than that.
                let max = max.min(TLS_READ_MAX);
                let start = buf.len();
                buf.resize(start + max, 0);
                let read = tls_read(tcp, tls, sent, answered, records, &mut buf[start..]);
                buf.truncate(start + *read.as_ref().unwrap_or(&0));
                read
            }
        }
    }

    /// Asks the socket to report readability only once `bytes` have
    /// arrived (1: any byte, the default). Plain TCP only — over TLS the
    /// bytes still to come on the socket are not the plaintext still to
    /// come — so a TLS transport ignores it and returns false.
    pub(crate) fn set_recv_lowat(&self, bytes: usize) -> bool {
        match self {
            Transport::Plain(tcp) => super::sys::set_recv_lowat(tcp, bytes).is_ok(),
            #[cfg(feature = "rustls")]
            Transport::Tls { .. } => false,
        }
    }

    /// Writes plaintext from `buf`; returns how much was taken. For TLS the
    /// records are pushed out until the socket would block; what is left
    /// goes with [`flush`](Self::flush).
    pub(crate) fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(tcp) => tcp.write(buf),
            #[cfg(feature = "rustls")]
            Transport::Tls { tcp, tls, sent, .. } => tls_write(tcp, tls, sent, buf),
        }
    }

    /// Sends TLS records still held back. `Ok(true)` once nothing is left
    /// to send, `Ok(false)` if the socket would block first.
    pub(crate) fn flush(&mut self) -> io::Result<bool> {
        match self {
            Transport::Plain(_) => Ok(true),
            #[cfg(feature = "rustls")]
            Transport::Tls { tcp, tls, sent, .. } => write_tls_until_blocked(tcp, tls, sent),
        }
    }

    /// Bytes of TLS records the socket has taken (none for plain TCP, where
    /// what [`write`](Self::write) returns is what the socket took): the
    /// server's progress, where plaintext rustls takes may wait in it.
    pub(crate) fn records_sent(&self) -> u64 {
        match self {
            Transport::Plain(_) => 0,
            #[cfg(feature = "rustls")]
            Transport::Tls { sent, .. } => *sent,
        }
    }

    /// Whether TLS records wait to be sent.
    pub(crate) fn wants_write(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            #[cfg(feature = "rustls")]
            Transport::Tls { tls, .. } => tls.wants_write(),
        }
    }

    /// Whether decrypted bytes, or records not yet decrypted (the start
    /// of one not yet whole too), wait in the TLS layer (bytes past a
    /// response, which no request asked for).
    pub(crate) fn has_buffered_input(&mut self) -> bool {
        match self {
            Transport::Plain(_) => false,
            #[cfg(feature = "rustls")]
            Transport::Tls { tls, records, .. } => match tls.process_new_packets() {
                Ok(state) => {
                    state.plaintext_bytes_to_read() > 0
                        || state.peer_has_closed()
                        || records.mid_record()
                }
                Err(_) => true,
            },
        }
    }

    /// Whether an idle connection is still usable: the server has neither
    /// closed it nor sent bytes nobody asked for. A peek on the socket; for
    /// TLS, records that did arrive are read and kept if they carry no data
    /// (a TLS 1.3 session ticket arriving late leaves it usable) — whole:
    /// what the rest of a record will carry nobody can say yet.
    pub(crate) fn still_open(&mut self) -> bool {
        let mut byte = [0u8; 1];
        let peeked = match self.tcp().peek(&mut byte) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            Err(_) => return false,
            // The server closed.
            Ok(0) => return false,
            Ok(n) => Some(n),
        };
        match self {
            // Bytes nobody asked for.
            Transport::Plain(_) => peeked.is_none(),
            #[cfg(feature = "rustls")]
            Transport::Tls {
                tcp, tls, records, ..
            } => {
                if peeked.is_some() {
                    loop {
                        match tls.read_tls(&mut Followed::new(&*tcp, records)) {
                            Ok(0) => return false,
                            Ok(_) => {}
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(_) => return false,
                        }
                        if tls.process_new_packets().is_err() {
                            return false;
                        }
                    }
                }
                match tls.process_new_packets() {
                    Ok(state) => {
                        state.plaintext_bytes_to_read() == 0
                            && !state.peer_has_closed()
                            && !records.mid_record()
                    }
                    Err(_) => false,
                }
            }
        }
    }

    /// Resets the stream: the socket closes with an RST (linger zero), and
    /// TLS sends no `close_notify` (the exchange on it was abandoned).
    pub(crate) fn reset(self) {
        let _ = socket2::SockRef::from(self.tcp()).set_linger(Some(std::time::Duration::ZERO));
    }

    /// Closes the stream: for TLS, queues `close_notify` and sends what it
    /// can without waiting. The socket closes when `self` drops.
    pub(crate) fn close(&mut self) {
        #[cfg(feature = "rustls")]
        if let Transport::Tls { tcp, tls, sent, .. } = self {
            tls.send_close_notify();
            let _ = write_tls_until_blocked(tcp, tls, sent);
        }
    }
}

/// The socket as rustls writes its records to it: never raising `SIGPIPE`.
/// A write to a connection its server has reset fails with `EPIPE`, and
/// unless the call says otherwise the kernel also sends the process
/// `SIGPIPE`, which kills a process that has not ignored it (a C program
/// hosting the library, a command-line tool that restores the default so
/// that `| head` ends it). Std's `write` on a socket says otherwise
/// (`send` with `MSG_NOSIGNAL`), as plain connections write; but rustls
/// writes its records gathered (`write_vectored`), which std does with
/// `writev`, which cannot. Here the gathered write is a `sendmsg` with
/// `MSG_NOSIGNAL` too, where std's own writes have it (Linux).
#[cfg(feature = "rustls")]
struct NoSigpipe<'a>(&'a mio::net::TcpStream);

#[cfg(feature = "rustls")]
impl Write for NoSigpipe<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.0).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        send_gathered(self.0, bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `bufs` sent in one `sendmsg` that raises no `SIGPIPE` (see [`NoSigpipe`]).
#[cfg(all(feature = "rustls", any(target_os = "linux", target_os = "android")))]
fn send_gathered(tcp: &mio::net::TcpStream, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    socket2::SockRef::from(tcp).send_vectored_with_flags(bufs, libc::MSG_NOSIGNAL)
}

/// `bufs` written in one call, as std writes them (see [`NoSigpipe`]).
#[cfg(all(
    feature = "rustls",
    not(any(target_os = "linux", target_os = "android"))
))]
fn send_gathered(tcp: &mio::net::TcpStream, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    (&*tcp).write_vectored(bufs)
}

#[cfg(feature = "rustls")]
/// Writes TLS records until none is left (`Ok(true)`) or the socket would
/// block (`Ok(false)`).
fn write_tls_until_blocked(
    tcp: &mut mio::net::TcpStream,
    tls: &mut ClientConnection,
    sent: &mut u64,
) -> io::Result<bool> {
    while tls.wants_write() {
        match tls.write_tls(&mut NoSigpipe(tcp)) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the connection took no bytes",
                ))
            }
            Ok(n) => *sent += n as u64,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// The TLS handshake, as far as the socket allows.
#[cfg(feature = "rustls")]
fn tls_handshake(
    tcp: &mut mio::net::TcpStream,
    tls: &mut ClientConnection,
    sent: &mut u64,
    records: &mut RecordCursor,
) -> Result<Handshake, HandshakeError> {
    loop {
        let mut progressed = false;
        if tls.wants_write() {
            match write_tls_until_blocked(tcp, tls, sent) {
                Ok(true) => progressed = true,
                Ok(false) => {}
                Err(error) => return Err(HandshakeError::Io(error)),
            }
        }
        if !tls.is_handshaking() {
            return Ok(Handshake::Done);
        }
        if tls.wants_read() {
            match tls.read_tls(&mut Followed::new(&*tcp, records)) {
                Ok(0) => {
                    return Err(HandshakeError::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection during the TLS handshake",
                    )))
                }
                Ok(_) => {
                    progressed = true;
                    if let Err(error) = tls.process_new_packets() {
                        // Tell the server why (the alert rustls queued).
                        let _ = write_tls_until_blocked(tcp, tls, sent);
                        return Err(HandshakeError::Tls(error));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => progressed = true,
                Err(e) => return Err(HandshakeError::Io(e)),
            }
        }
        if !progressed {
            return Ok(Handshake::Pending);
        }
    }
}

/// [`Transport::read`] over TLS; `answered`: whether the server has sent
/// data yet.
#[cfg(feature = "rustls")]
fn tls_read(
    tcp: &mut mio::net::TcpStream,
    tls: &mut ClientConnection,
    sent: &mut u64,
    answered: &mut bool,
    records: &mut RecordCursor,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut first_pass = true;
    loop {
        match tls.reader().read(buf) {
            // Ok(0): the server's close_notify. UnexpectedEof: the TCP
            // stream ended without one.
            Ok(n) => {
                *answered |= n > 0;
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the TLS connection without close_notify",
                ))
            }
            Err(e) => return Err(e),
        }
        // Nothing decrypted is waiting. A failure met in records read
        // before, behind plaintext that has now been handed out, is this
        // read's (rustls keeps it: every call returns it again); it must
        // not wait for the socket, which may never be readable again.
        // Only a failure from an earlier read can be kept so: on the
        // passes after the first, the records just read were processed
        // below, and a failure there returned or was followed by
        // plaintext (then returned above).
        if std::mem::take(&mut first_pass) {
            if let Err(error) = tls.process_new_packets() {
                return Err(tls_io_error(error, *answered));
            }
        }
        // Read more records (a zero-length read makes the reader report
        // the end on the next turn).
        match tls.read_tls(&mut Followed::new(&*tcp, records)) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        if let Err(error) = tls.process_new_packets() {
            let _ = write_tls_until_blocked(tcp, tls, sent);
            // The records before the failing one did decrypt, and were
            // authenticated: their plaintext (a whole response, maybe) is
            // handed out first, on the next turn, and the failure with the
            // read after it.
            if !has_plaintext(tls) {
                return Err(tls_io_error(error, *answered));
            }
            continue;
        }
        // Records to send (an answer to a key update, or an upload's that
        // a failed write left): best effort now, the rest on the next
        // writable event. A write's failure is for the writer to meet, not
        // this read: a server that answered and closed (a 413 to an
        // upload, RFC 9112 §9.5) has its answer decrypted here.
        if tls.wants_write() {
            let _ = write_tls_until_blocked(tcp, tls, sent);
        }
    }
}

/// Whether decrypted bytes wait in `tls` to be read (also after a failure,
/// which rustls' state then reports instead of how many).
#[cfg(feature = "rustls")]
fn has_plaintext(tls: &mut ClientConnection) -> bool {
    use std::io::BufRead;
    tls.reader().fill_buf().is_ok_and(|bytes| !bytes.is_empty())
}

/// Where the server's stream of TLS records stands, followed byte by byte
/// as it goes to rustls: whether a record has begun that has not come
/// whole. rustls keeps such a start where nothing in its state shows it
/// (it counts plaintext, which a record has only once it is whole).
#[cfg(feature = "rustls")]
#[derive(Debug, Default)]
pub(crate) struct RecordCursor {
    /// Bytes of the current record's 5-byte header seen; 0 between records
    /// and in a record's body.
    header_seen: u8,
    /// The high byte of the current record's length (its header's fourth).
    length_high: u8,
    /// Bytes of the current record's body still to come.
    body_left: usize,
}

#[cfg(feature = "rustls")]
impl RecordCursor {
    /// The record header's length: `type`, `version` (2), `length` (2).
    const HEADER: u8 = 5;

    /// `bytes`, the next of the server's stream, have gone to rustls.
    fn advance(&mut self, mut bytes: &[u8]) {
        while let Some((&byte, rest)) = bytes.split_first() {
            if self.body_left > 0 {
                let taken = self.body_left.min(bytes.len());
                self.body_left -= taken;
                bytes = &bytes[taken..];
                continue;
            }
            bytes = rest;
            self.header_seen += 1;
            match self.header_seen {
                4 => self.length_high = byte,
                Self::HEADER => {
                    self.header_seen = 0;
                    self.body_left = usize::from(u16::from_be_bytes([self.length_high, byte]));
                }
                _ => {}
            }
        }
    }

    /// Whether a record has begun and not come whole.
    fn mid_record(&self) -> bool {
        self.header_seen > 0 || self.body_left > 0
    }
}

/// A reader of the server's stream (the socket) whose bytes `records`
/// follows: what rustls reads records from.
#[cfg(feature = "rustls")]
struct Followed<'a, R> {
    from: R,
    records: &'a mut RecordCursor,
}

#[cfg(feature = "rustls")]
impl<'a, R: Read> Followed<'a, R> {
    fn new(from: R, records: &'a mut RecordCursor) -> Self {
        Followed { from, records }
    }
}

#[cfg(feature = "rustls")]
impl<R: Read> Read for Followed<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.from.read(buf)?;
        self.records.advance(&buf[..n]);
        Ok(n)
    }
}

/// Gives `tls` the server's records that came before TLS started on the
/// socket (the bytes after a proxy's answer to CONNECT, read with it),
/// decrypting them: all of them, as many as there are. One `read_tls`
/// takes no more than rustls' buffer accepts at once (4 KiB while it is
/// empty), so it is called until none is left, the records processed
/// between calls to make room. A tunnel whose request went out slowly
/// reads on while it waits, so what it read past the answer may be far
/// longer.
#[cfg(feature = "rustls")]
pub(crate) fn take_early_records(
    tls: &mut ClientConnection,
    mut records: &[u8],
) -> Result<(), rustls::Error> {
    while !records.is_empty() {
        match tls.read_tls(&mut records) {
            // Bytes after the server's close_notify, which are ignored.
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(error) => return Err(rustls::Error::General(error.to_string())),
        }
        tls.process_new_packets()?;
    }
    Ok(())
}

/// [`Transport::write`] over TLS.
#[cfg(feature = "rustls")]
fn tls_write(
    tcp: &mut mio::net::TcpStream,
    tls: &mut ClientConnection,
    sent: &mut u64,
    buf: &[u8],
) -> io::Result<usize> {
    // Twice at most: a full buffer that went out entirely has room for
    // the second try.
    for _ in 0..2 {
        // rustls takes what fits its buffer limit (0 when full).
        let taken = tls.writer().write(buf)?;
        let all_out = write_tls_until_blocked(tcp, tls, sent)?;
        if taken > 0 || buf.is_empty() {
            return Ok(taken);
        }
        if !all_out {
            return Err(io::ErrorKind::WouldBlock.into());
        }
    }
    Err(io::Error::new(
        io::ErrorKind::WriteZero,
        "the TLS layer took no bytes",
    ))
}

#[cfg(all(test, feature = "rustls"))]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn client_connection() -> ClientConnection {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        ClientConnection::new(Arc::new(config), "example.com".try_into().unwrap()).unwrap()
    }

    /// Early records longer than one `read_tls` takes are taken whole: a
    /// handshake record of 5,000 bytes that is no handshake message fails
    /// (cut after 4 KiB it would wait, incomplete, for bytes that never
    /// come: the rest was dropped). Bytes rustls needs more of pass.
    #[test]
    fn early_records_are_taken_whole_however_long() {
        let record = |len: u16, fill: u8| {
            let mut record = vec![0x16, 0x03, 0x03];
            record.extend_from_slice(&len.to_be_bytes());
            record.resize(record.len() + usize::from(len), fill);
            record
        };
        // Handshake type 0xff, of length 0xffffff: over any limit.
        let bad = record(5000, 0xff);
        assert!(bad.len() > 4096);
        let error = take_early_records(&mut client_connection(), &bad).unwrap_err();
        assert!(
            matches!(error, rustls::Error::InvalidMessage(_)),
            "{error:?}"
        );
        // The same record cut short: nothing to judge yet.
        take_early_records(&mut client_connection(), &bad[..3000]).unwrap();
        take_early_records(&mut client_connection(), &[]).unwrap();
    }

    /// A stream of records, however it is cut, is between records exactly
    /// where one ends (an empty one too), and mid-record anywhere else.
    #[test]
    fn the_cursor_is_mid_record_anywhere_but_at_a_records_end() {
        let record = |len: u16| {
            let mut record = vec![0x17, 0x03, 0x03];
            record.extend_from_slice(&len.to_be_bytes());
            record.resize(record.len() + usize::from(len), 0xaa);
            record
        };
        let records = [record(300), record(0), record(1), record(0x4005)];
        let ends: Vec<usize> = records
            .iter()
            .scan(0, |end, record| {
                *end += record.len();
                Some(*end)
            })
            .collect();
        let stream = records.concat();
        for step in [1, 2, 3, 5, 7, 4096] {
            let mut cursor = RecordCursor::default();
            let mut at = 0;
            for piece in stream.chunks(step) {
                cursor.advance(piece);
                at += piece.len();
                assert_eq!(cursor.mid_record(), !ends.contains(&at), "{at} by {step}");
            }
        }
    }
}
