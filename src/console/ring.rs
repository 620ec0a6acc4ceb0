//! Bounded rings (ARCHITECTURE: "every buffer the UI keeps is a bounded ring"): a `VecDeque`
//! that drops its oldest element when full, so no console buffer grows with run length.

use std::collections::VecDeque;

/// A FIFO of at most `capacity` elements; pushing onto a full ring drops the oldest.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    items: VecDeque<T>,
    capacity: usize,
    /// Elements pushed over the ring's life, including those since dropped.
    pushed: u64,
}

impl<T> Ring<T> {
    /// A ring holding at most `capacity` elements (a capacity of 0 is treated as 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            items: VecDeque::with_capacity(capacity.min(4096)),
            capacity,
            pushed: 0,
        }
    }

    /// Appends `item`, dropping the oldest element when the ring is full.
    pub fn push(&mut self, item: T) {
        if self.items.len() == self.capacity {
            self.items.pop_front();
        }
        self.items.push_back(item);
        self.pushed += 1;
    }

    /// Drops elements from the front while `stale` holds (retention pruning).
    pub fn prune_front(&mut self, mut stale: impl FnMut(&T) -> bool) {
        while self.items.front().is_some_and(&mut stale) {
            self.items.pop_front();
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The maximum number of elements kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Elements ever pushed (kept or dropped).
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Oldest to newest.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.items.iter()
    }

    /// The newest element.
    pub fn last(&self) -> Option<&T> {
        self.items.back()
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_ring_drops_the_oldest_and_counts_every_push() {
        let mut r = Ring::new(3);
        for i in 0..10 {
            r.push(i);
        }
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![7, 8, 9]);
        assert_eq!(r.len(), 3);
        assert_eq!(r.pushed(), 10);
    }

    #[test]
    fn prune_front_removes_only_the_stale_prefix() {
        let mut r = Ring::new(10);
        for i in [1, 2, 9, 3] {
            r.push(i);
        }
        r.prune_front(|&x| x < 5);
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![9, 3]);
    }

    #[test]
    fn zero_capacity_keeps_one() {
        let mut r = Ring::new(0);
        r.push('a');
        r.push('b');
        assert_eq!(r.last(), Some(&'b'));
        assert_eq!(r.capacity(), 1);
    }
}
