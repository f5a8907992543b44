//! The crate's only `unsafe` code, two system calls the standard library
//! and socket2 do not offer: a socket read into memory that was never
//! initialised (`Read::read_buf` is unstable, and a `&mut [u8]` over
//! uninitialised bytes is undefined behaviour even if nothing reads it),
//! and the socket's receive low-water mark (`SO_RCVLOWAT`).
//!
//! Why it is worth it: a body of known length read straight into the
//! buffer the caller gets would otherwise have to be zeroed first — a
//! `memset` of the whole body, about a third of what the copy out of the
//! kernel costs (`docs/performance-log.md`, "Bodies", has the profile).
#![allow(unsafe_code)]

use bytes::BytesMut;
use std::io;

/// Reads once from `tcp` into the spare capacity of `buf` (at most `max`
/// bytes; the capacity is reserved first), and extends `buf` by what was
/// read. Returns that count: `Ok(0)` is the end of the stream.
#[cfg(unix)]
pub(crate) fn recv_into_spare(
    tcp: &mio::net::TcpStream,
    buf: &mut BytesMut,
    max: usize,
) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    buf.reserve(max);
    let spare = buf.spare_capacity_mut();
    let len = spare.len().min(max);
    // SAFETY: `spare` is writable memory owned by `buf`, at least `len`
    // bytes long, and nothing else refers to it during the call; `recv`
    // writes at most `len` bytes there and reads none. The descriptor is
    // the open socket `tcp` borrows.
    let n = unsafe { libc::recv(tcp.as_raw_fd(), spare.as_mut_ptr().cast(), len, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    // SAFETY: the kernel wrote `n <= len` bytes at the start of the spare
    // capacity: they are initialised, and within the allocation.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// [`recv_into_spare`] where there is no `recv` to call: the room is zeroed
/// first, then read into — no more than [`ZEROED_READ_MAX`] a read, so that
/// a large `max` (a collected body's whole rest) is not zeroed again for
/// every read.
#[cfg(not(unix))]
pub(crate) fn recv_into_spare(
    tcp: &mio::net::TcpStream,
    buf: &mut BytesMut,
    max: usize,
) -> io::Result<usize> {
    use std::io::Read;
    let start = buf.len();
    buf.resize(start + max.min(ZEROED_READ_MAX), 0);
    let read = (&*tcp).read(&mut buf[start..]);
    buf.truncate(start + *read.as_ref().unwrap_or(&0));
    read
}

/// The most [`recv_into_spare`] zeroes and reads at once where it must zero.
#[cfg(not(unix))]
const ZEROED_READ_MAX: usize = 256 * 1024;

/// Sets `SO_RCVLOWAT`: the socket reports itself readable (to epoll) only
/// once `bytes` are queued, or at its end or an error. Linux only (other
/// systems do not honour it for poll readiness); elsewhere a no-op.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn set_recv_lowat(tcp: &mio::net::TcpStream, bytes: usize) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: `value` is a live c_int for the duration of the call, and the
    // length passed is its size; the descriptor is the open socket `tcp`
    // borrows. setsockopt only reads the option value.
    let result = unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// [`set_recv_lowat`] where readiness ignores it: nothing to do.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn set_recv_lowat(_tcp: &mio::net::TcpStream, _bytes: usize) -> io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_append_to_what_the_buffer_holds() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut server = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (client, _) = listener.accept().unwrap();
        let client = mio::net::TcpStream::from_std(client);
        server.write_all(b"hello, world").unwrap();
        drop(server);
        let mut buf = BytesMut::from(&b">>"[..]);
        let mut got = 0;
        // At most 5 bytes a read, until the end of the stream.
        loop {
            match recv_into_spare(&client, &mut buf, 5) {
                Ok(0) => break,
                Ok(n) => {
                    assert!(n <= 5);
                    got += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, 12);
        assert_eq!(&buf[..], b">>hello, world");
    }
}
