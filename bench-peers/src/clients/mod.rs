//! The clients, one module each. Every call into a client's API is in its
//! module, so an API change (tickless's body is about to become a stream)
//! is made in one place.
//!
//! A module offers what its users do:
//!
//! * `blocking(timeout)`: a [`Blocking`] client for the sequential cases,
//!   with `timeout` set on every request its own way (`None`: no timeout at
//!   all, the client's defaults switched off where it has some; tickless
//!   also says on which of its timers);
//! * `in_flight(...)`: the 64-in-flight case, driven its own way (a window
//!   of futures, tasks on tokio, or threads), warm-up and measurement both;
//! * `lateness(...)`: one burst against a server that never answers, for
//!   the clients whose users can send two thousand requests at once.

pub mod hyper;
pub mod reqwest;
pub mod tickless;
pub mod ureq;

use std::time::Duration;

/// One request at a time, from the calling thread.
pub trait Blocking {
    /// GETs `url`, reads the whole body and returns its length; an error or
    /// a status other than 200 is an `Err`.
    fn get(&mut self, url: &str) -> Result<usize, String>;
}

/// The client under measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Tickless,
    Ureq,
    Hyper,
    Reqwest,
}

pub const ALL_PEERS: [Peer; 4] = [Peer::Tickless, Peer::Ureq, Peer::Hyper, Peer::Reqwest];

impl Peer {
    pub fn name(self) -> &'static str {
        match self {
            Peer::Tickless => "tickless",
            Peer::Ureq => "ureq",
            Peer::Hyper => "hyper",
            Peer::Reqwest => "reqwest",
        }
    }

    pub fn from_name(name: &str) -> Option<Peer> {
        ALL_PEERS.into_iter().find(|p| p.name() == name)
    }

    /// How the sequential cases drive it.
    pub fn blocking_how(self) -> &'static str {
        match self {
            Peer::Tickless => "send().wait()",
            Peer::Ureq => "agent.get().call()",
            Peer::Hyper => "rt.block_on per request",
            Peer::Reqwest => "reqwest::blocking",
        }
    }

    /// How the 64-in-flight case drives it.
    pub fn in_flight_how(self) -> &'static str {
        match self {
            Peer::Tickless => "window of ResponseFutures",
            Peer::Ureq => "64 threads sharing one agent",
            Peer::Hyper => "64 tokio tasks",
            Peer::Reqwest => "64 tokio tasks (async)",
        }
    }

    /// `on_event_loops`: tickless arms the timeouts on its event loops
    /// (the peers have one kind).
    pub fn blocking(
        self,
        timeout: Option<Duration>,
        on_event_loops: bool,
    ) -> Result<Box<dyn Blocking>, String> {
        match self {
            Peer::Tickless => tickless::blocking(timeout, on_event_loops),
            Peer::Ureq => ureq::blocking(timeout),
            Peer::Hyper => hyper::blocking(timeout),
            Peer::Reqwest => reqwest::blocking(timeout),
        }
    }

    pub fn in_flight(
        self,
        url: &str,
        expect: usize,
        window: usize,
        plan: crate::measure::Plan,
    ) -> Result<crate::measure::Sample, String> {
        match self {
            Peer::Tickless => tickless::in_flight(url, expect, window, plan),
            Peer::Ureq => ureq::in_flight(url, expect, window, plan),
            Peer::Hyper => hyper::in_flight(url, expect, window, plan),
            Peer::Reqwest => reqwest::in_flight(url, expect, window, plan),
        }
    }
}

/// Checks a body length against the route's.
pub fn expect_len(got: usize, expect: usize) -> Result<(), String> {
    if got == expect {
        Ok(())
    } else {
        Err(format!("body of {got} bytes, expected {expect}"))
    }
}
