//! [`Captured`]: what a `tracing` subscriber wrote, for a test to read.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// Everything a subscriber wrote to it, or to any of its clones (one per
/// event: `with_writer(move || captured.clone())`).
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// What was written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
