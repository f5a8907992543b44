//! Linux: a timerfd on `CLOCK_MONOTONIC`, armed at an absolute time and
//! registered with mio like any socket.

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

pub(crate) struct OsWait {
    fd: OwnedFd,
    /// The deadline the timerfd is set to, so an unchanged deadline costs no
    /// system call.
    armed: Option<Instant>,
}

impl OsWait {
    pub(crate) const PRECISE: bool = true;

    pub(crate) fn new(registry: &Registry, token: Token) -> io::Result<Self> {
        // SAFETY: timerfd_create takes no pointers; a negative result is an error.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        registry.register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)?;
        Ok(OsWait { fd, armed: None })
    }

    /// Inlined into the loop's turn for its common case, a deadline no
    /// earlier than the one armed: no system call, nothing to do.
    #[inline]
    pub(crate) fn arm(
        &mut self,
        deadline: Option<Instant>,
        _now: Instant,
    ) -> io::Result<Option<Duration>> {
        // Re-armed only for an earlier deadline. A timer left armed for a
        // later one (or for nothing, once its entry was cancelled) costs at
        // most one spurious wake-up, after which the loop arms it again; a
        // system call on every arm and cancel would cost every exchange.
        match (deadline, self.armed) {
            (Some(wanted), Some(armed)) if wanted < armed => self.set(wanted)?,
            (Some(wanted), None) => self.set(wanted)?,
            _ => {}
        }
        // The timerfd wakes the poll; it may block until then.
        Ok(None)
    }

    /// Sets the timerfd to `deadline`.
    fn set(&mut self, deadline: Instant) -> io::Result<()> {
        let value = monotonic_timespec(deadline)?;
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: `spec` is a valid itimerspec that outlives the call; a
        // null old-value pointer is allowed.
        let result = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if result < 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed = Some(deadline);
        Ok(())
    }

    pub(crate) fn acknowledge(&mut self) {
        let mut expirations = [0u8; 8];
        // SAFETY: the buffer is 8 writable bytes, what a timerfd read needs.
        // EAGAIN (nothing expired: a spurious readiness) is fine to ignore.
        let _ = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                expirations.as_mut_ptr().cast(),
                expirations.len(),
            )
        };
        // The timer is spent; the loop arms it again for the next deadline.
        self.armed = None;
    }
}

/// Converts an `Instant` to an absolute `CLOCK_MONOTONIC` time.
///
/// `Instant` is `CLOCK_MONOTONIC` on Linux but does not expose its value, so
/// the distance to the deadline is taken from an `Instant` read *before* the
/// raw clock. The raw reading is therefore at or after that `Instant`, and
/// the result at or after the true deadline: never early, late by the few
/// nanoseconds between the two reads.
// time_t and c_long are i64 on 64-bit targets and i32 on some 32-bit ones.
#[allow(clippy::useless_conversion)]
fn monotonic_timespec(deadline: Instant) -> io::Result<libc::timespec> {
    let before = Instant::now();
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let remaining = deadline.saturating_duration_since(before);
    // Saturating: a deadline near the end of time becomes the last time
    // the timer can hold, which is as good as never.
    let remaining_secs = i64::try_from(remaining.as_secs()).unwrap_or(i64::MAX);
    let mut sec = i64::from(now.tv_sec).saturating_add(remaining_secs);
    let mut nsec = i64::from(now.tv_nsec) + i64::from(remaining.subsec_nanos());
    if nsec >= 1_000_000_000 {
        sec = sec.saturating_add(1);
        nsec -= 1_000_000_000;
    }
    // An absolute time of zero would disarm; a past deadline needs any time
    // already reached instead, which `now` (non-zero) is.
    Ok(libc::timespec {
        tv_sec: libc::time_t::try_from(sec).unwrap_or(libc::time_t::MAX),
        tv_nsec: nsec as libc::c_long,
    })
}
