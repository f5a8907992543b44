//! Helpers shared by the unit tests of several modules.

pub(crate) use crate::clock::last_instant;
