//! tickless: an HTTP/1.1 client whose deadlines are exact.
//!
//! A 20 ms request timeout fires at 20 ms, not at the next tick of a shared
//! wheel: with [`ClientBuilder::use_event_loop_timeouts`], request and read
//! timeouts are armed on the event loop that owns the connection.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! let client = tickless::Client::builder()
//!     .request_timeout(Duration::from_millis(20))
//!     .use_event_loop_timeouts(true)
//!     .build()?;
//! match client.get("http://127.0.0.1:8080/").send().wait() {
//!     Ok(response) => println!("{}", response.status()),
//!     Err(error) if error.is_timeout() => eprintln!("{error}"),
//!     Err(error) => return Err(error.into()),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! This crate re-exports [`tickless_client`] at its root, and the timer
//! crate as [`timer`].
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub use tickless_client::*;
pub use tickless_timer as timer;
