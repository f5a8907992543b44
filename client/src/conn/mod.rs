//! A connection on its loop: connecting, running one exchange at a time,
//! idle in the pool, closed.
//!
//! Everything here runs on the connection's own loop thread, the only thread
//! that touches its socket and codec state. Other threads reach a
//! connection by posting a task to its loop with the connection's slot key
//! and id (the id guards against a slot reused by a later connection).
//!
//! ```text
//!                            ┌──(https)──▶ Handshaking ──(done)──┐
//!                            │                  │                ▼
//!   connect ──▶ Connecting ──(connected)──(http)──────────────▶ Active ──(response, keep-alive)──▶ Idle
//!                  │                            │                │  ▲                               │
//!                  │ (every address failed)     │ (TLS failure)  │  └────(taken from the pool)──────┘
//!                  ▼                            ▼                ▼
//!                closed ◀──────(error, close-delimited, abort, timeout)──
//! ```
//!
//! The socket sits behind a [`Transport`]: plain TCP, or TLS over it. An
//! https connection is attached to its exchange, and the exchange's
//! timeouts re-homed onto this loop, right after the TCP connect, as for
//! http; then it handshakes (driven on readable and writable events alike,
//! until done or the socket would block), so the request deadline bounds the
//! handshake too, besides the handshake timeout (a timer on this loop's
//! heap, like the connect timeout). Closing a TLS connection sends
//! `close_notify` first.

use crate::client::ClientShared;
use crate::error::{Error, TimeoutKind};
use crate::event_loop::{LoopContext, LoopTimeout, LoopTimerKey};
use crate::events::{ConnectionInfo, EventListener};
use crate::exchange::{ConnRef, Exchange};
use crate::h1::{DecodeError, Decoded, ResponseDecoder, ResponseHead};
use crate::origin::{Origin, Scheme};
use crate::pool::{IdleConn, Offered, Served};
use crate::response::Response;
use crate::transport::{Handshake, HandshakeError, Transport};
use rustls::pki_types::ServerName;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

// The imports above also serve the two halves below, which `use super::*`:
// `open` connects (and handshakes), `run` runs exchanges on an open
// connection; this file holds the state, the readiness dispatch and closing.
mod open;
mod run;

pub(crate) use open::connect;
use open::{drive_handshake, on_connect_ready};
pub(crate) use run::start_on_idle;
use run::{on_idle_readable, read_response, write_request};

/// Bytes read per system call; the buffer grows past it only for a large head.
const READ_CHUNK: usize = 16 * 1024;

pub(crate) struct Conn {
    id: u64,
    transport: Option<Transport>,
    origin: Origin,
    client: Arc<ClientShared>,
    remote: Option<SocketAddr>,
    created: Instant,
    info: Option<ConnectionInfo>,
    state: State,
    /// `read_buf[read_pos..read_len]` is received and not yet decoded.
    read_buf: Vec<u8>,
    read_pos: usize,
    read_len: usize,
    /// Whether the active exchange's request is still going out, and how
    /// many of its bytes are.
    sending: bool,
    written: usize,
}

enum State {
    Connecting(Connecting),
    Handshaking(Handshaking),
    Active(Box<Active>),
    Idle,
}

impl State {
    /// The exchange the connection carries now, if any.
    fn exchange(&self) -> Option<&Arc<Exchange>> {
        match self {
            State::Active(active) => Some(&active.exchange),
            State::Connecting(connecting) => Some(&connecting.exchange),
            State::Handshaking(handshaking) => Some(&handshaking.exchange),
            State::Idle => None,
        }
    }
}

struct Connecting {
    exchange: Arc<Exchange>,
    remaining: VecDeque<SocketAddr>,
    timer: Option<LoopTimerKey>,
    last_error: Option<io::Error>,
    timed_out: bool,
}

struct Handshaking {
    exchange: Arc<Exchange>,
    timer: Option<LoopTimerKey>,
}

struct Active {
    exchange: Arc<Exchange>,
    decoder: ResponseDecoder,
    /// Taken from the pool rather than freshly connected.
    reused: bool,
    head: Option<ResponseHead>,
    body: Vec<u8>,
    trailers: Option<http::HeaderMap>,
}

fn get<'c>(cx: &'c mut LoopContext<'_>, key: usize, conn_id: u64) -> Option<&'c mut Conn> {
    cx.conns.get_mut(key).filter(|conn| conn.id == conn_id)
}

/// The loop reported readiness for connection `key`.
pub(crate) fn ready(cx: &mut LoopContext<'_>, key: usize, event: &mio::event::Event) {
    let Some(conn) = cx.conns.get_mut(key) else {
        return;
    };
    match &conn.state {
        State::Connecting(_) => {
            if event.is_writable() || event.is_error() || event.is_write_closed() {
                on_connect_ready(cx, key);
            }
        }
        // Either readiness may move a handshake on.
        State::Handshaking(_) => drive_handshake(cx, key),
        State::Active(active) => {
            if active.exchange.is_done() {
                // Ended by a timeout or a cancel whose abort is still in the
                // inbox: abort now.
                let id = active.exchange.id;
                abort(cx, key, id);
                return;
            }
            if event.is_writable() {
                write_request(cx, key);
            }
            if cx.conns.contains(key)
                && (event.is_readable() || event.is_read_closed() || event.is_error())
            {
                read_response(cx, key);
            }
        }
        State::Idle => {
            if event.is_readable() || event.is_read_closed() || event.is_error() {
                on_idle_readable(cx, key);
            }
        }
    }
}

/// Ends the exchange with id `exchange_id` on connection `key`, if it is
/// still running there: it failed from outside (a timeout or a cancel).
pub(crate) fn abort(cx: &mut LoopContext<'_>, key: usize, exchange_id: u64) {
    let running = cx
        .conns
        .get(key)
        .and_then(|conn| conn.state.exchange())
        .is_some_and(|exchange| exchange.id == exchange_id);
    if running {
        // An abandoned exchange leaves the stream mid-message: reset it
        // rather than close it gracefully. A reset is final for both ends at
        // once (no FIN handshake, no TIME_WAIT left on this side), and costs
        // the loop less, which matters when a burst of timeouts aborts many
        // connections together.
        if let Some(mut transport) = cx.conns[key].transport.take() {
            let _ = cx.registry.deregister(transport.tcp_mut());
            transport.reset();
        }
        close(cx, key);
    }
}

/// Closes idle connection `key` (evicted by the cleaner, or the client is closing).
pub(crate) fn close_idle(cx: &mut LoopContext<'_>, key: usize, conn_id: u64) {
    if get(cx, key, conn_id).is_some_and(|c| matches!(c.state, State::Idle)) {
        close(cx, key);
    }
}

/// Closes connection `key` and returns its permit, starting a waiter the
/// permit now serves. Does not end the exchange it carried.
fn close(cx: &mut LoopContext<'_>, key: usize) {
    let mut conn = cx.conns.remove(key);
    if let Some(mut transport) = conn.transport.take() {
        // TLS: close_notify, without waiting for the socket.
        transport.close();
        let _ = cx.registry.deregister(transport.tcp_mut());
    }
    let timer = match &mut conn.state {
        State::Connecting(connecting) => connecting.timer.take(),
        State::Handshaking(handshaking) => handshaking.timer.take(),
        _ => None,
    };
    if let Some(timer) = timer {
        cx.event_loop.cancel(timer);
    }
    if let Some(Served(waiter)) = conn.client.pool.release(&conn.origin) {
        conn.client.connect(waiter);
    }
}

/// Closes connection `key` and fails the exchange it carried with the
/// error `error` makes for it.
fn close_failing(cx: &mut LoopContext<'_>, key: usize, error: impl FnOnce(&Exchange) -> Error) {
    let exchange = cx
        .conns
        .get(key)
        .and_then(|conn| conn.state.exchange().cloned());
    close(cx, key);
    if let Some(exchange) = exchange {
        exchange.finish(Err(error(&exchange)));
    }
}

/// Code run for connection `key` panicked (a listener or a body callback):
/// its state cannot be trusted, so it closes, failing its exchange.
pub(crate) fn fail_after_panic(cx: &mut LoopContext<'_>, key: usize) {
    if cx.conns.contains(key) {
        close_failing(cx, key, |exchange| Error::Io {
            remote: exchange.remote_name(),
            source: io::Error::other("a callback panicked on the event loop"),
        });
    }
}

/// The loop is shutting down: close every connection and fail what they carry.
pub(crate) fn close_all(cx: &mut LoopContext<'_>) {
    let keys: Vec<usize> = cx.conns.iter().map(|(key, _)| key).collect();
    for key in keys {
        close_failing(cx, key, |_| Error::ClientClosed);
    }
}
