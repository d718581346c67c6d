//! A set that remembers only its most recent `capacity` members: for
//! duplicate suppression with a bound on memory; and a map that keeps only
//! its most recent `capacity` entries (outcomes to answer late questions
//! with, messages to send again on request).
//!
//! Membership only: the hash set is never iterated, so its order cannot
//! reach a run's outcome.

use rustc_hash::{FxHashMap, FxHashSet};
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

/// A map that keeps only its most recent `capacity` insertions.
///
/// Lookups only: the hash map is never iterated, except through
/// [`RecentMap::newest`], which follows insertion order.
#[derive(Clone, Debug)]
pub struct RecentMap<K: Hash + Eq + Copy, V> {
    map: FxHashMap<K, V>,
    order: VecDeque<K>,
    capacity: usize,
}

impl<K: Hash + Eq + Copy, V> RecentMap<K, V> {
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0);
        RecentMap { map: FxHashMap::default(), order: VecDeque::new(), capacity }
    }

    /// Inserts (or replaces) an entry, forgetting the oldest beyond capacity.
    pub fn insert(&mut self, k: K, v: V) {
        if self.map.insert(k, v).is_some() {
            return;
        }
        self.order.push_back(k);
        if self.order.len() > self.capacity {
            let old = self.order.pop_front().expect("non-empty");
            self.map.remove(&old);
        }
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The `n` most recent entries, oldest first.
    pub fn newest(&self, n: usize) -> impl Iterator<Item = (&K, &V)> {
        let skip = self.order.len().saturating_sub(n);
        self.order.iter().skip(skip).map(|k| (k, &self.map[k]))
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

    #[test]
    fn a_recent_map_keeps_only_the_most_recent_entries_in_order() {
        let mut m = RecentMap::new(2);
        m.insert(1, 'a');
        m.insert(2, 'b');
        m.insert(2, 'c');
        m.insert(3, 'd');
        assert_eq!((m.get(&1), m.get(&2), m.get(&3)), (None, Some(&'c'), Some(&'d')));
        assert_eq!(m.len(), 2);
        assert_eq!(m.newest(1).collect::<Vec<_>>(), vec![(&3, &'d')]);
        assert_eq!(m.newest(5).map(|(k, _)| *k).collect::<Vec<_>>(), vec![2, 3]);
    }
}
