//! Opening a TCP socket: non-blocking from its first system call, with
//! `TCP_NODELAY` and the client's [`SocketOptions`], its connect started.

use std::io;
use std::net::{IpAddr, SocketAddr};

/// What the client sets on every socket it opens (see the builder's
/// `local_address`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SocketOptions {
    /// The source address sockets are bound to before they connect
    /// (`None`: the system picks it).
    pub(crate) local_address: Option<IpAddr>,
}

/// A non-blocking socket whose connect to `addr` has started, set up as
/// `options` say: writability (or an error) on the loop reports how it
/// ended.
pub(crate) fn connect(
    addr: SocketAddr,
    options: &SocketOptions,
) -> io::Result<mio::net::TcpStream> {
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
    if let Some(local) = options.local_address {
        socket.bind(&SocketAddr::new(local, 0).into())?;
    }
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
///
/// A socket connected to itself failed, as refused: a connect to a local
/// port nothing listens on connects so (TCP's simultaneous open) when the
/// system picks that very port as the socket's own — rarely, but a client
/// that polls a local server while it is down meets it. It is no server:
/// the request would be read back as its answer, a protocol error that
/// no retry takes for a connect that failed.
pub(crate) fn connect_result(socket: &mio::net::TcpStream) -> Option<io::Result<()>> {
    match socket.take_error() {
        Ok(Some(error)) | Err(error) => Some(Err(error)),
        Ok(None) => match socket.peer_addr() {
            Ok(peer) if socket.local_addr().is_ok_and(|local| local == peer) => {
                Some(Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "connected to itself: nothing listens at the address",
                )))
            }
            Ok(_) => Some(Ok(())),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => None,
            Err(e) => Some(Err(e)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket bound to the port it connects to on the same address
    /// connects to itself (TCP's simultaneous open), as a connect to a
    /// loopback port nothing listens on does when the system happens to
    /// pick that port as its own: that is no server, and the connect
    /// failed, as refused — not a connection that reads back its own
    /// request.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn a_socket_connected_to_itself_is_a_refused_connect() {
        let socket = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .unwrap();
        socket
            .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        let itself = socket.local_addr().unwrap();
        socket.connect(&itself).unwrap();
        let socket = mio::net::TcpStream::from_std(socket.into());
        assert_eq!(socket.peer_addr().unwrap(), socket.local_addr().unwrap());
        let result = connect_result(&socket).expect("the connect has ended");
        let error = result.expect_err("connected to itself");
        assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused);
    }
}
