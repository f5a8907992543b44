//! Opening a TCP socket: non-blocking from its first system call, with
//! `TCP_NODELAY` and the client's [`SocketOptions`], its connect started.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// What the client sets on every socket it opens (see the builder's
/// `local_address` and `tcp_keepalive`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SocketOptions {
    /// The source address sockets are bound to before they connect
    /// (`None`: the system picks it).
    pub(crate) local_address: Option<IpAddr>,
    /// TCP keepalive's idle time before the first probe, as
    /// [`keepalive_idle`] leaves it (`None`: keepalive off).
    pub(crate) tcp_keepalive: Option<Duration>,
}

/// The longest idle time before keepalive probes Linux takes
/// (`MAX_TCP_KEEPIDLE`, 32767 s, some 9 hours); a longer one fails the
/// `setsockopt`.
pub(crate) const MAX_TCP_KEEPALIVE: Duration = Duration::from_secs(32767);

/// `idle` as the system takes it: whole seconds, a fraction rounded up
/// (0 s is refused), at most [`MAX_TCP_KEEPALIVE`].
pub(crate) fn keepalive_idle(idle: Duration) -> Duration {
    let secs = idle
        .as_secs()
        .saturating_add(u64::from(idle.subsec_nanos() > 0));
    Duration::from_secs(secs).clamp(Duration::from_secs(1), MAX_TCP_KEEPALIVE)
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
    if let Some(idle) = options.tcp_keepalive {
        socket.set_tcp_keepalive(&socket2::TcpKeepalive::new().with_time(idle))?;
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

    /// `SO_KEEPALIVE` and `TCP_KEEPIDLE` as the socket has them once
    /// connected to a loopback listener with `options`.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn keepalive_of(options: &SocketOptions) -> (bool, Duration) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let socket = connect(listener.local_addr().unwrap(), options).unwrap();
        let _accepted = listener.accept().unwrap();
        let socket = socket2::SockRef::from(&socket);
        (
            socket.keepalive().unwrap(),
            socket.tcp_keepalive_time().unwrap(),
        )
    }

    /// Off by default (the system's idle time stays, unused); on, the idle
    /// time before the first probe is the one set — the largest the
    /// builder lets through too, which the system takes.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn a_socket_has_tcp_keepalive_with_the_idle_time_set() {
        assert!(!keepalive_of(&SocketOptions::default()).0);
        for idle in [Duration::from_secs(37), MAX_TCP_KEEPALIVE] {
            let options = SocketOptions {
                tcp_keepalive: Some(idle),
                ..SocketOptions::default()
            };
            assert_eq!(keepalive_of(&options), (true, idle));
        }
    }

    /// The idle time goes to the system in whole seconds, from 1 s to its
    /// largest: a fraction is rounded up, not down to 0 (which the system
    /// refuses, failing every connect), and a longer one is taken as the
    /// largest (which it would refuse too).
    #[test]
    fn an_idle_time_is_whole_seconds_the_system_takes() {
        let secs = Duration::from_secs;
        for (given, taken) in [
            (Duration::from_millis(1), secs(1)),
            (Duration::from_millis(1500), secs(2)),
            (secs(60), secs(60)),
            (
                MAX_TCP_KEEPALIVE + Duration::from_nanos(1),
                MAX_TCP_KEEPALIVE,
            ),
            (Duration::MAX, MAX_TCP_KEEPALIVE),
        ] {
            assert_eq!(keepalive_idle(given), taken, "{given:?}");
        }
    }
}
