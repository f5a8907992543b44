//! Clocks and timers for tickless.
#![deny(missing_docs)]
