//! The one OS-specific piece of tickless: waking an event loop at a deadline.
//!
//! Each platform provides `OsWait` with:
//!
//! * `new(registry, token)`: register whatever wakes the poll with `token`;
//! * `arm(deadline, now)`: make the next poll wake at `deadline` (or not at
//!   all for `None`), returning the timeout to pass to `Poll::poll`;
//! * `acknowledge()`: consume the wake-up once `token` is ready;
//! * `PRECISE`: whether the wait is finer than mio's whole milliseconds.
//!
//! Linux uses a timerfd set to an absolute `CLOCK_MONOTONIC` time. Everywhere
//! else the poll timeout itself carries the deadline.
//!
//! Why not the poll timeout everywhere: mio rounds it up to whole
//! milliseconds, and the kernel adds a slack of max(timer slack,
//! timeout/1000) to an epoll timeout, so a 1 s wait wakes at least a
//! millisecond late; a timerfd's lateness does not grow with the wait (the
//! README's `tick-lag` table shows both, as measured).

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::OsWait;

#[cfg(not(target_os = "linux"))]
mod poll_timeout;
#[cfg(not(target_os = "linux"))]
pub(crate) use poll_timeout::OsWait;
