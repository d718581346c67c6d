//! A set that remembers only its most recent `capacity` members: for
//! duplicate suppression with a bound on memory.
//!
//! Membership only: the hash set is never iterated, so its order cannot
//! reach a run's outcome.

use rustc_hash::FxHashSet;
use std::collections::VecDeque;
use std::hash::Hash;

#[derive(Clone, Debug)]
pub struct RecentSet<T: Hash + Eq + Copy> {
    set: FxHashSet<T>,
    order: VecDeque<T>,
    capacity: usize,
}

impl<T: Hash + Eq + Copy> RecentSet<T> {
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0);
        RecentSet { set: FxHashSet::default(), order: VecDeque::new(), capacity }
    }

    /// Adds a member, forgetting the oldest beyond capacity; false if it was
    /// already there.
    pub fn insert(&mut self, x: T) -> bool {
        if !self.set.insert(x) {
            return false;
        }
        self.order.push_back(x);
        if self.order.len() > self.capacity {
            let old = self.order.pop_front().expect("non-empty");
            self.set.remove(&old);
        }
        true
    }

    pub fn contains(&self, x: &T) -> bool {
        self.set.contains(x)
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_most_recent() {
        let mut r = RecentSet::new(2);
        assert!(r.insert(1));
        assert!(!r.insert(1));
        r.insert(2);
        r.insert(3);
        assert!(!r.contains(&1) && r.contains(&2) && r.contains(&3));
        assert_eq!(r.len(), 2);
    }
}
