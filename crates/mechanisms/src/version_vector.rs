//! Version vectors: one counter per origin (a region, a data center, a
//! replica), compared entry by entry. Causal protocols (Eiger-PORT's and
//! Eiger-NOC2's dependencies, RA-NOC2's client vectors `last`) track what a
//! client or a version has seen with them; two vectors are ordered when one
//! dominates the other and concurrent otherwise.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// A version vector; absent origins count 0.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VersionVector {
    entries: BTreeMap<u32, u64>,
}

impl VersionVector {
    pub fn new() -> VersionVector {
        VersionVector::default()
    }

    pub fn get(&self, origin: u32) -> u64 {
        self.entries.get(&origin).copied().unwrap_or(0)
    }

    /// Raises `origin`'s entry to at least `value`.
    pub fn raise(&mut self, origin: u32, value: u64) {
        if value > 0 {
            let e = self.entries.entry(origin).or_insert(0);
            *e = (*e).max(value);
        }
    }

    /// A new event at `origin`: its entry goes up by one; returns it.
    pub fn increment(&mut self, origin: u32) -> u64 {
        let e = self.entries.entry(origin).or_insert(0);
        *e += 1;
        *e
    }

    /// The entry-wise maximum with `other` (what has seen both).
    pub fn merge(&mut self, other: &VersionVector) {
        for (o, v) in &other.entries {
            self.raise(*o, *v);
        }
    }

    /// Whether every entry is at least `other`'s.
    pub fn dominates(&self, other: &VersionVector) -> bool {
        other.entries.iter().all(|(o, v)| self.get(*o) >= *v)
    }

    /// `Less` if `self` happened before `other`, `Greater` if after,
    /// `Equal` if equal, `None` if concurrent.
    pub fn causal_cmp(&self, other: &VersionVector) -> Option<Ordering> {
        match (self.dominates(other), other.dominates(self)) {
            (true, true) => Some(Ordering::Equal),
            (true, false) => Some(Ordering::Greater),
            (false, true) => Some(Ordering::Less),
            (false, false) => None,
        }
    }

    pub fn concurrent(&self, other: &VersionVector) -> bool {
        self.causal_cmp(other).is_none()
    }

    /// Entries, by origin (absent ones are 0).
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.entries.iter().map(|(o, v)| (*o, *v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vv(pairs: &[(u32, u64)]) -> VersionVector {
        let mut v = VersionVector::new();
        for (o, x) in pairs {
            v.raise(*o, *x);
        }
        v
    }

    #[test]
    fn vectors_order_by_entrywise_dominance_and_are_otherwise_concurrent() {
        let a = vv(&[(1, 2), (2, 1)]);
        let b = vv(&[(1, 3), (2, 1)]);
        let c = vv(&[(1, 1), (2, 5)]);
        assert_eq!(a.causal_cmp(&b), Some(Ordering::Less));
        assert_eq!(b.causal_cmp(&a), Some(Ordering::Greater));
        assert!(b.concurrent(&c) && c.concurrent(&b));
        assert_eq!(a.causal_cmp(&vv(&[(2, 1), (1, 2), (3, 0)])), Some(Ordering::Equal), "absent entries are 0");
    }

    #[test]
    fn a_merge_dominates_both_and_nothing_smaller_does() {
        let (b, c) = (vv(&[(1, 3), (2, 1)]), vv(&[(1, 1), (2, 5)]));
        let mut m = b.clone();
        m.merge(&c);
        assert!(m.dominates(&b) && m.dominates(&c));
        assert_eq!(m, vv(&[(1, 3), (2, 5)]));
        let mut smaller = m.clone();
        smaller.entries.insert(2, 4);
        assert!(!smaller.dominates(&c));
    }

    #[test]
    fn an_increment_makes_a_later_event_at_that_origin() {
        let mut a = vv(&[(1, 2)]);
        let before = a.clone();
        assert_eq!(a.increment(7), 1);
        assert_eq!(before.causal_cmp(&a), Some(Ordering::Less));
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![(1, 2), (7, 1)]);
    }
}
