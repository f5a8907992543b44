//! Opening a TCP socket: non-blocking from its first system call, with
//! `TCP_NODELAY`, its connect started.

use std::io;
use std::net::SocketAddr;

/// A non-blocking socket whose connect to `addr` has started: writability
/// (or an error) on the loop reports how it ended.
pub(crate) fn connect(addr: SocketAddr) -> io::Result<mio::net::TcpStream> {
    // On Linux the socket is created non-blocking (one system call, not
    // three: a burst of connects is bounded by the kernel's work per socket).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM.nonblocking().cloexec(),
        Some(socket2::Protocol::TCP),
    )?;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let socket = {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        socket.set_nonblocking(true)?;
        socket
    };
    socket.set_tcp_nodelay(true)?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        // The connect goes on in the background; writability reports its end.
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(mio::net::TcpStream::from_std(socket.into()))
}

/// How a connect started by [`connect`] ended, once the socket reported
/// writability or an error: `None` while it is still under way (a spurious
/// wake-up), else `Ok` or the error it failed with.
pub(crate) fn connect_result(socket: &mio::net::TcpStream) -> Option<io::Result<()>> {
    match socket.take_error() {
        Ok(Some(error)) | Err(error) => Some(Err(error)),
        Ok(None) => match socket.peer_addr() {
            Ok(_) => Some(Ok(())),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => None,
            Err(e) => Some(Err(e)),
        },
    }
}
