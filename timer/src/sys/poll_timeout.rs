//! The portable wait: the deadline becomes the poll timeout, which mio rounds
//! up to whole milliseconds (so it never wakes early, only up to 1 ms late).

use std::io;
use std::time::{Duration, Instant};

pub(crate) struct OsWait;

impl OsWait {
    pub(crate) const PRECISE: bool = false;

    pub(crate) fn new(_registry: &mio::Registry, _token: mio::Token) -> io::Result<Self> {
        Ok(OsWait)
    }

    pub(crate) fn arm(
        &mut self,
        deadline: Option<Instant>,
        now: Instant,
    ) -> io::Result<Option<Duration>> {
        Ok(deadline.map(|deadline| deadline.saturating_duration_since(now)))
    }

    pub(crate) fn acknowledge(&mut self) {}
}
