//! The cases, in the order each round runs them.

use crate::server::{BIG_LEN, CHUNKED_LEN, SMALL_BODY};
use std::time::Duration;

/// The per-request timeout of the timeout case: long enough never to fire.
pub const CASE_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// 1. 13-byte GETs, one after another, blocking API, no timeout.
    Small,
    /// 5. Case 1 with a per-request timeout; run right after it, so that
    ///    the two see the same state of the machine.
    SmallTimeout,
    /// 5b. Case 5 with tickless's timeouts on its event loops
    ///     (`use_event_loop_timeouts`); tickless only (the peers have one
    ///     kind of timeout).
    SmallLoopTimeout,
    /// 2. 13-byte GETs, 64 in flight.
    InFlight,
    /// 2b. Case 2 with tickless driven as hyper and reqwest are: 64 tokio
    ///     tasks on a 2-worker runtime, each awaiting its `ResponseFuture`
    ///     and body; tickless only (the peers' case 2 is already this), set
    ///     beside hyper's case 2 of the same rounds.
    InFlightTasks,
    /// 3. 1 MiB (Content-Length) GETs, one after another.
    Big,
    /// 4. 64 KiB chunked GETs, one after another.
    Chunked,
}

pub const ALL_CASES: [Case; 7] = [
    Case::Small,
    Case::SmallTimeout,
    Case::SmallLoopTimeout,
    Case::InFlight,
    Case::InFlightTasks,
    Case::Big,
    Case::Chunked,
];

impl Case {
    pub fn name(self) -> &'static str {
        match self {
            Case::Small => "13b-seq",
            Case::SmallTimeout => "13b-seq-timeout",
            Case::SmallLoopTimeout => "13b-seq-loop-timeout",
            Case::InFlight => "13b-64-in-flight",
            Case::InFlightTasks => "13b-64-tasks",
            Case::Big => "1mib-seq",
            Case::Chunked => "64k-chunked-seq",
        }
    }

    pub fn from_name(name: &str) -> Option<Case> {
        ALL_CASES.into_iter().find(|c| c.name() == name)
    }

    pub fn path(self) -> &'static str {
        match self {
            Case::Small
            | Case::SmallTimeout
            | Case::SmallLoopTimeout
            | Case::InFlight
            | Case::InFlightTasks => "/small",
            Case::Big => "/1mib",
            Case::Chunked => "/64k-chunked",
        }
    }

    pub fn body_len(self) -> usize {
        match self {
            Case::Small
            | Case::SmallTimeout
            | Case::SmallLoopTimeout
            | Case::InFlight
            | Case::InFlightTasks => SMALL_BODY.len(),
            Case::Big => BIG_LEN,
            Case::Chunked => CHUNKED_LEN,
        }
    }

    /// Whether MB/s is the figure that matters.
    pub fn is_body(self) -> bool {
        matches!(self, Case::Big | Case::Chunked)
    }

    /// The per-request timeout the case sets.
    pub fn timeout(self) -> Option<Duration> {
        matches!(self, Case::SmallTimeout | Case::SmallLoopTimeout).then_some(CASE_TIMEOUT)
    }

    /// Whether tickless arms the case's timeouts on its event loops.
    pub fn on_event_loops(self) -> bool {
        self == Case::SmallLoopTimeout
    }

    /// Whether every client runs the case (else tickless alone).
    pub fn for_every_client(self) -> bool {
        !matches!(self, Case::SmallLoopTimeout | Case::InFlightTasks)
    }
}
