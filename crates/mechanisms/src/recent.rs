//! A set that remembers only its most recent `capacity` members: for
//! duplicate suppression with a bound on memory; and a map that keeps only
//! its most recent `capacity` entries (outcomes to answer late questions
//! with, messages to send again on request).
//!
//! A set's insertion order is a [`RecentLog`]:
//! a queue of shared chunks, so a snapshot of it (a Paxos checkpoint of the
//! state that holds the set) costs a reference count per chunk rather than
//! a copy of every member, and survives the set's later insertions and
//! evictions unchanged.
//!
//! Membership only: the hash set is never iterated, so its order cannot
//! reach a run's outcome.

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::VecDeque;
use std::hash::Hash;
use std::sync::Arc;

/// Entries per chunk of a [`RecentLog`]: a snapshot shares every chunk, and
/// the first insertion after it copies at most this many entries (the last
/// chunk's).
pub const LOG_CHUNK: usize = 4096;

/// A queue whose clone is cheap: its entries in shared chunks of
/// [`LOG_CHUNK`], the first one read from `head` on. Serialized as the
/// sequence of its entries, oldest first.
#[derive(Clone, Debug)]
pub struct RecentLog<T> {
    chunks: VecDeque<Arc<Vec<T>>>,
    /// Entries of the first chunk already taken off the front.
    head: usize,
    len: usize,
}

impl<T: Clone> Default for RecentLog<T> {
    fn default() -> Self {
        RecentLog { chunks: VecDeque::new(), head: 0, len: 0 }
    }
}

impl<T: Clone> RecentLog<T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends at the back; a chunk a snapshot shares is copied first (only
    /// the last one is ever written).
    pub fn push_back(&mut self, x: T) {
        match self.chunks.back_mut() {
            Some(last) if last.len() < LOG_CHUNK => Arc::make_mut(last).push(x),
            _ => {
                let mut chunk = Vec::with_capacity(LOG_CHUNK);
                chunk.push(x);
                self.chunks.push_back(Arc::new(chunk));
            }
        }
        self.len += 1;
    }

    /// Takes the oldest entry off the front (shared chunks are only read).
    pub fn pop_front(&mut self) -> Option<T> {
        let front = self.chunks.front()?;
        let x = front[self.head].clone();
        self.head += 1;
        if self.head == front.len() {
            self.chunks.pop_front();
            self.head = 0;
        }
        self.len -= 1;
        Some(x)
    }

    /// The entries, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        let head = self.head;
        self.chunks.iter().enumerate().flat_map(move |(i, c)| c[if i == 0 { head } else { 0 }..].iter())
    }

    /// Asserts the chunks hold `len` entries, each chunk within its bound.
    pub fn check_invariants(&self) {
        let held: usize = self.chunks.iter().map(|c| c.len()).sum();
        assert_eq!(held - self.head, self.len, "a log's length is its chunks' less the head");
        assert!(self.chunks.iter().all(|c| !c.is_empty() && c.len() <= LOG_CHUNK), "chunks within their bound");
        assert!(self.chunks.front().is_none_or(|c| self.head < c.len()), "the head inside the first chunk");
    }
}

impl<T: Clone> FromIterator<T> for RecentLog<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut log = RecentLog::new();
        for x in iter {
            log.push_back(x);
        }
        log
    }
}

impl<T: Clone + Serialize> Serialize for RecentLog<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.len))?;
        for x in self.iter() {
            seq.serialize_element(x)?;
        }
        seq.end()
    }
}

impl<'de, T: Clone + Deserialize<'de>> Deserialize<'de> for RecentLog<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Vec::<T>::deserialize(d)?.into_iter().collect())
    }
}

impl<T: Clone + PartialEq> PartialEq for RecentLog<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl<T: Clone + Eq> Eq for RecentLog<T> {}

#[derive(Clone, Debug)]
pub struct RecentSet<T: Hash + Eq + Copy> {
    set: FxHashSet<T>,
    order: RecentLog<T>,
    capacity: usize,
}

impl<T: Hash + Eq + Copy> RecentSet<T> {
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0);
        RecentSet { set: FxHashSet::default(), order: RecentLog::new(), capacity }
    }

    /// The set as its insertion order left it (`log`), keeping the most
    /// recent `capacity` members.
    pub fn from_log(capacity: usize, mut log: RecentLog<T>) -> Self {
        assert!(capacity > 0);
        while log.len() > capacity {
            log.pop_front();
        }
        let set: FxHashSet<T> = log.iter().copied().collect();
        assert_eq!(set.len(), log.len(), "a set's log holds each member once");
        RecentSet { set, order: log, capacity }
    }

    /// The members, oldest first: a snapshot sharing this set's chunks.
    pub fn log(&self) -> RecentLog<T> {
        self.order.clone()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
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

    #[test]
    fn a_snapshot_of_a_set_survives_its_later_insertions_and_restores_the_same_set() {
        let mut r = RecentSet::new(5_000);
        for x in 0..6_000u64 {
            r.insert(x);
        }
        let snapshot = r.log();
        for x in 6_000..7_000u64 {
            r.insert(x);
        }
        snapshot.check_invariants();
        assert_eq!(snapshot.len(), 5_000);
        assert_eq!(snapshot.iter().copied().collect::<Vec<_>>(), (1_000..6_000).collect::<Vec<u64>>(), "unchanged");
        let restored = RecentSet::from_log(5_000, snapshot);
        assert!(restored.contains(&1_000) && restored.contains(&5_999) && !restored.contains(&6_000));
        let mut again = RecentSet::from_log(5_000, r.log());
        assert!(!again.insert(6_999), "a restored set still knows its members");
        assert!(again.insert(7_000) && !again.contains(&2_000), "and forgets its oldest at capacity");
    }

    #[test]
    fn a_log_shares_its_chunks_with_its_clones_and_serializes_as_its_entries() {
        let log: RecentLog<u32> = (0..(2 * LOG_CHUNK as u32 + 3)).collect();
        let copy = log.clone();
        assert!(Arc::ptr_eq(&log.chunks[0], &copy.chunks[0]), "a clone copies no entry");
        let bytes = postcard::to_allocvec(&log).unwrap();
        let back: RecentLog<u32> = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, log);
        back.check_invariants();
        let mut drained = log;
        while drained.pop_front().is_some() {}
        drained.check_invariants();
        assert!(drained.is_empty() && drained.chunks.is_empty(), "an emptied log holds no chunk");
    }
}
