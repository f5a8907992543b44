//! tickless: an HTTP/1.1 client whose deadlines are exact.
#![deny(missing_docs)]

pub use tickless_client as client;
pub use tickless_timer as timer;
