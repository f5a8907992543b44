//! [`Chunks`]: the chunks a pipe holds, oldest first.

use bytes::Bytes;
use std::collections::VecDeque;

/// A queue of chunks whose first one is kept in place: a body that comes
/// in one piece — most small ones — is queued and taken with no
/// allocation (a `VecDeque` allocates on its first push).
///
/// Invariant: `first` is filled only when the whole queue is empty, so
/// what it holds is older than everything in `rest`: `first`, then `rest`
/// in order, is the order of the pushes.
#[derive(Default)]
pub(crate) struct Chunks {
    first: Option<Bytes>,
    rest: VecDeque<Bytes>,
}

impl Chunks {
    pub(crate) fn push_back(&mut self, chunk: Bytes) {
        if self.is_empty() {
            self.first = Some(chunk);
        } else {
            self.rest.push_back(chunk);
        }
    }

    pub(crate) fn pop_front(&mut self) -> Option<Bytes> {
        self.first.take().or_else(|| self.rest.pop_front())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none() && self.rest.is_empty()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Bytes> {
        self.first.iter().chain(&self.rest)
    }
}

impl FromIterator<Bytes> for Chunks {
    fn from_iter<I: IntoIterator<Item = Bytes>>(chunks: I) -> Chunks {
        let mut queue = Chunks::default();
        for chunk in chunks {
            queue.push_back(chunk);
        }
        queue
    }
}

impl IntoIterator for Chunks {
    type Item = Bytes;
    type IntoIter = std::iter::Chain<
        std::option::IntoIter<Bytes>,
        std::collections::vec_deque::IntoIter<Bytes>,
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Pushes and pops in any order come out as a `VecDeque`'s do.
        #[test]
        fn chunks_keep_the_order_of_a_vec_deque(ops in proptest::collection::vec(any::<Option<u8>>(), 0..64)) {
            let (mut chunks, mut model) = (Chunks::default(), VecDeque::new());
            for op in ops {
                match op {
                    Some(byte) => {
                        chunks.push_back(Bytes::from(vec![byte]));
                        model.push_back(Bytes::from(vec![byte]));
                    }
                    None => prop_assert_eq!(chunks.pop_front(), model.pop_front()),
                }
                prop_assert_eq!(chunks.is_empty(), model.is_empty());
                prop_assert!(chunks.iter().eq(model.iter()));
            }
            prop_assert!(chunks.into_iter().eq(model));
        }
    }

    #[test]
    fn one_chunk_is_queued_without_an_allocation() {
        let mut chunks = Chunks::default();
        chunks.push_back(Bytes::from_static(b"whole"));
        assert_eq!(chunks.rest.capacity(), 0);
        assert_eq!(chunks.pop_front().as_deref(), Some(&b"whole"[..]));
        assert!(chunks.is_empty());
    }
}
