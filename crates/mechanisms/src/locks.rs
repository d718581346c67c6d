//! A lock table: shared and exclusive locks per key, with waiters kept in
//! an order the protocol chooses (arrival for FIFO locking as in Calvin,
//! age for wound-wait as in 2PL). The policy (who waits, who is wounded)
//! belongs to the protocol; the table only records and grants.
//!
//! A waiter is granted only when it is compatible with every holder and with
//! nobody incompatible ahead of it, so the chosen order is respected.

use meridian_core::Key;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum LockMode {
    Shared,
    Exclusive,
}

impl LockMode {
    fn compatible(self, other: LockMode) -> bool {
        self == LockMode::Shared && other == LockMode::Shared
    }
}

#[derive(Clone, Debug)]
struct Entry<T, O> {
    /// Inline for one: most keys have a single holder (an exclusive lock,
    /// or one reader), and an entry comes and goes with every lock.
    holders: SmallVec<[(T, LockMode); 1]>,
    /// Sorted by the order key `O`.
    waiters: Vec<(O, T, LockMode)>,
}

/// The outcome of a lock request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquire<T> {
    Granted,
    /// Not granted; these holders and earlier waiters stand in the way.
    Blocked(Vec<T>),
}

#[derive(Clone, Debug)]
pub struct LockTable<T, O> {
    map: FxHashMap<Key, Entry<T, O>>,
}

impl<T: Copy + Eq, O: Copy + Ord> Default for LockTable<T, O> {
    fn default() -> Self {
        LockTable { map: FxHashMap::default() }
    }
}

impl<T: Copy + Eq, O: Copy + Ord> LockTable<T, O> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Grants the lock if it is compatible with the holders and no waiter is
    /// queued ahead; a holder asking again (or upgrading as the sole holder)
    /// is granted. Does not queue.
    pub fn try_acquire(&mut self, key: Key, owner: T, mode: LockMode) -> Acquire<T> {
        let entry = self.map.entry(key).or_insert_with(|| Entry { holders: SmallVec::new(), waiters: Vec::new() });
        if let Some(i) = entry.holders.iter().position(|(t, _)| *t == owner) {
            if mode == LockMode::Shared || entry.holders[i].1 == LockMode::Exclusive || entry.holders.len() == 1 {
                if mode == LockMode::Exclusive {
                    entry.holders[i].1 = LockMode::Exclusive;
                }
                return Acquire::Granted;
            }
        }
        let blockers: Vec<T> = entry
            .holders
            .iter()
            .filter(|(t, m)| *t != owner && !m.compatible(mode))
            .map(|(t, _)| *t)
            .chain(entry.waiters.iter().filter(|(_, t, _)| *t != owner).map(|(_, t, _)| *t))
            .collect();
        if blockers.is_empty() {
            entry.holders.push((owner, mode));
            Acquire::Granted
        } else {
            Acquire::Blocked(blockers)
        }
    }

    /// Queues a waiter at its place in the order.
    pub fn enqueue(&mut self, key: Key, owner: T, mode: LockMode, order: O) {
        let entry = self.map.entry(key).or_insert_with(|| Entry { holders: SmallVec::new(), waiters: Vec::new() });
        debug_assert!(!entry.waiters.iter().any(|(_, t, _)| *t == owner), "queued twice");
        let i = entry.waiters.partition_point(|(o, _, _)| *o <= order);
        entry.waiters.insert(i, (order, owner, mode));
    }

    /// Releases `owner`'s lock (or queued request) on `key` and returns the
    /// waiters granted as a result, in order.
    pub fn release(&mut self, key: Key, owner: T) -> Vec<T> {
        let Some(entry) = self.map.get_mut(&key) else {
            return Vec::new();
        };
        entry.holders.retain(|(t, _)| *t != owner);
        entry.waiters.retain(|(_, t, _)| *t != owner);
        let granted = Self::grant_waiters(entry);
        if entry.holders.is_empty() && entry.waiters.is_empty() {
            self.map.remove(&key);
        }
        granted
    }

    /// Grants queued waiters that have become grantable (after a holder was
    /// removed by other means, or a waiter was queued behind compatible
    /// holders), in order.
    pub fn grant(&mut self, key: Key) -> Vec<T> {
        match self.map.get_mut(&key) {
            Some(entry) => Self::grant_waiters(entry),
            None => Vec::new(),
        }
    }

    fn grant_waiters(entry: &mut Entry<T, O>) -> Vec<T> {
        let mut granted = Vec::new();
        while let Some(&(_, owner, mode)) = entry.waiters.first() {
            let compatible = entry.holders.iter().all(|(t, m)| *t == owner || m.compatible(mode));
            if !compatible {
                break;
            }
            entry.waiters.remove(0);
            match entry.holders.iter_mut().find(|(t, _)| *t == owner) {
                Some(h) => h.1 = if mode == LockMode::Exclusive { mode } else { h.1 },
                None => entry.holders.push((owner, mode)),
            }
            granted.push(owner);
        }
        granted
    }

    /// Current holders of a key.
    pub fn holders(&self, key: Key) -> Vec<(T, LockMode)> {
        self.map.get(&key).map(|e| e.holders.to_vec()).unwrap_or_default()
    }

    pub fn holds(&self, key: Key, owner: T) -> bool {
        self.map.get(&key).is_some_and(|e| e.holders.iter().any(|(t, _)| *t == owner))
    }

    /// Checks the table's own invariants on up to `keys_max` keys (every
    /// entry has a holder or a waiter, holders are compatible, waiters are
    /// in order) and hands each owner found there (holder or waiter) to
    /// `owner`, for the host's invariants ("locks are held only by live
    /// transactions"). Bounded so that a check after every event stays cheap.
    pub fn check_invariants(&self, keys_max: usize, mut owner: impl FnMut(Key, T)) {
        for (key, entry) in self.map.iter().take(keys_max) {
            assert!(!entry.holders.is_empty() || !entry.waiters.is_empty(), "an empty lock entry for {key}");
            let exclusive = entry.holders.iter().filter(|(_, m)| *m == LockMode::Exclusive).count();
            assert!(exclusive == 0 || entry.holders.len() == 1, "an exclusive lock on {key} is shared");
            assert!(entry.waiters.windows(2).all(|w| w[0].0 <= w[1].0), "waiters of {key} out of order");
            entry.holders.iter().for_each(|(t, _)| owner(*key, *t));
            entry.waiters.iter().for_each(|(_, t, _)| owner(*key, *t));
        }
    }

    /// Number of keys with holders or waiters.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LockMode::*;

    #[test]
    fn shared_locks_share_exclusive_locks_exclude() {
        let mut t: LockTable<u32, u32> = LockTable::new();
        assert_eq!(t.try_acquire(Key(1), 1, Shared), Acquire::Granted);
        assert_eq!(t.try_acquire(Key(1), 2, Shared), Acquire::Granted);
        assert_eq!(t.try_acquire(Key(1), 3, Exclusive), Acquire::Blocked(vec![1, 2]));
        assert_eq!(t.try_acquire(Key(1), 1, Exclusive), Acquire::Blocked(vec![2]), "no upgrade beside another reader");
        t.release(Key(1), 2);
        assert_eq!(t.try_acquire(Key(1), 1, Exclusive), Acquire::Granted, "sole holder upgrades");
        assert_eq!(t.holders(Key(1)), vec![(1, Exclusive)]);
    }

    #[test]
    fn waiters_are_granted_in_order_and_only_when_compatible() {
        let mut t: LockTable<u32, u32> = LockTable::new();
        t.try_acquire(Key(1), 1, Exclusive);
        t.enqueue(Key(1), 5, Shared, 50);
        t.enqueue(Key(1), 3, Shared, 30);
        t.enqueue(Key(1), 4, Exclusive, 40);
        assert_eq!(t.try_acquire(Key(1), 9, Shared), Acquire::Blocked(vec![1, 3, 4, 5]), "no jumping the queue");
        assert_eq!(t.release(Key(1), 1), vec![3], "3 is first; 4 is exclusive and waits for 3");
        assert_eq!(t.release(Key(1), 3), vec![4]);
        assert_eq!(t.release(Key(1), 4), vec![5]);
        assert_eq!(t.release(Key(1), 5), Vec::<u32>::new());
        assert!(t.is_empty());
    }

    #[test]
    fn releasing_a_waiter_removes_its_request() {
        let mut t: LockTable<u32, u32> = LockTable::new();
        t.try_acquire(Key(1), 1, Exclusive);
        t.enqueue(Key(1), 2, Exclusive, 2);
        t.release(Key(1), 2);
        assert_eq!(t.release(Key(1), 1), Vec::<u32>::new());
        assert!(!t.holds(Key(1), 2));
    }
}
