//! The open streams of one HTTP/2 connection, found by slab key — what a
//! stream's waker marks — and by exchange id — what an abort names, so that
//! a burst of expiries costs one lookup per stream aborted, not a scan of
//! the connection's streams each.

use super::stream::Stream;
use slab::Slab;
use std::collections::HashMap;

#[derive(Default)]
pub(super) struct StreamTable {
    streams: Slab<Stream>,
    /// Exchange id → key, for every stream in `streams`.
    keys: HashMap<u64, usize>,
}

impl StreamTable {
    /// The key the next [`insert`](Self::insert) will use.
    pub(super) fn next_key(&self) -> usize {
        self.streams.vacant_key()
    }

    /// Adds `stream` under `key`, which is [`next_key`](Self::next_key).
    pub(super) fn insert(&mut self, key: usize, stream: Stream) {
        let id = stream.exchange.id;
        let inserted = self.streams.insert(stream);
        debug_assert_eq!(inserted, key, "a key other than the next one");
        self.keys.insert(id, inserted);
    }

    pub(super) fn get_mut(&mut self, key: usize) -> Option<&mut Stream> {
        self.streams.get_mut(key)
    }

    /// Removes the stream of `key` (which must be there).
    pub(super) fn remove(&mut self, key: usize) -> Stream {
        let stream = self.streams.remove(key);
        self.keys.remove(&stream.exchange.id);
        stream
    }

    /// Removes the stream of exchange `id`, if it has one here.
    pub(super) fn remove_exchange(&mut self, id: u64) -> Option<Stream> {
        let key = self.keys.remove(&id)?;
        Some(self.streams.remove(key))
    }

    /// Keeps the streams `keep` says to keep; the others leave. Returns
    /// how many left.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&mut Stream) -> bool) -> usize {
        let (before, keys) = (self.streams.len(), &mut self.keys);
        self.streams.retain(|_, stream| {
            let kept = keep(stream);
            if !kept {
                keys.remove(&stream.exchange.id);
            }
            kept
        });
        before - self.streams.len()
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = usize> + '_ {
        self.streams.iter().map(|(key, _)| key)
    }

    /// The streams with some of their request body still to send.
    pub(super) fn sending_keys(&self) -> impl Iterator<Item = usize> + '_ {
        self.streams
            .iter()
            .filter(|(_, stream)| stream.out.is_sending())
            .map(|(key, _)| key)
    }

    pub(super) fn len(&self) -> usize {
        self.streams.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// Removes every stream.
    pub(super) fn take_all(&mut self) -> Vec<Stream> {
        self.keys.clear();
        self.streams.drain().collect()
    }
}
