//! A client's dual view (NOC-NOC §4.1, Algorithm 1 lines 2-3, 17, 19): the
//! version vector `last` — per partition, the latest safe time it told
//! this client — whose minimum over a read's partitions is the global
//! safe view (GSV); and the local safe view (LSV): per key, the newest of
//! this client's own writes of it that are fully prepared.
//!
//! The paper keeps `prep[ts]`, each prepared transaction's write set, and
//! takes per key the newest `ts` whose set holds it (line 19); this keeps
//! that maximum per key directly, which is the same view in less space.
//! An entry is dropped once every partition's safe time is at or past it
//! and the client recorded that floor durably: any later read's GSV is
//! then too — after a restart the version vector starts at the floor —
//! and reading at the GSV returns that write or a newer one. `lsv_max`
//! bounds the entries; a client whose view is more than half full
//! refreshes it (asks every partition behind for its safe time) and
//! refuses further writes while it is full.
//!
//! Generic over what a local entry is ([`Local`]): RA-NOC2's is the
//! write's timestamp; Eiger-NOC2's (NOC-NOC Algorithm 2 line 18,
//! `latestWrite`) is the pair of its mimicked commit timestamp and its
//! transaction id. Entries are ordered by the timestamp first.
//!
//! Every client (front end) keeps one view for all the sessions it runs:
//! the paper's sharing of views between co-located clients (§5.3), within
//! one Meridian client node. Sharing across nodes is not done (see the
//! module documentation of `ra-noc2`).

use crate::ramp::Ts;
use meridian_core::{Key, ShardId};
use std::collections::{BTreeMap, BTreeSet};

/// A local safe view's entry for one key: ordered, and at a timestamp
/// (the one a GSV must reach for the entry to go).
pub trait Local: Copy + Ord + std::fmt::Debug {
    fn ts(&self) -> Ts;
}

impl Local for Ts {
    fn ts(&self) -> Ts {
        *self
    }
}

pub struct View<L: Local = Ts> {
    /// Line 2: per shard (indexed by its number), the latest safe time heard.
    last: Vec<Option<Ts>>,
    /// Line 3, per key: the newest own fully prepared write.
    lsv: BTreeMap<Key, L>,
    /// The same entries ordered by timestamp, for dropping the old ones.
    by_ts: BTreeSet<(L, Key)>,
    lsv_max: usize,
}

impl View<Ts> {
    pub fn new(shards: usize, lsv_max: usize) -> View<Ts> {
        View::with_entries(shards, lsv_max)
    }
}

impl<L: Local> View<L> {
    /// A view whose local entries are `L`s.
    pub fn with_entries(shards: usize, lsv_max: usize) -> View<L> {
        assert!(shards > 0, "a deployment has shards");
        assert!(lsv_max > 0, "a client may hold one local version");
        View { last: vec![None; shards], lsv: BTreeMap::new(), by_ts: BTreeSet::new(), lsv_max }
    }

    /// After a restart: every partition's safe time was at or past `floor`
    /// (durably recorded), and these own writes were fully prepared.
    pub fn restore(&mut self, floor: Option<Ts>, local: impl IntoIterator<Item = (Key, L)>) {
        self.last.iter_mut().for_each(|l| *l = floor);
        for (key, ts) in local {
            self.prepared(ts, [key]);
        }
        self.prune(floor);
    }

    /// Lines 8, 14, 21, 23: `last[svr] ← max(ts_svr, last[svr])`.
    pub fn learn(&mut self, shard: ShardId, lst: Option<Ts>) {
        let l = &mut self.last[shard.0 as usize];
        *l = (*l).max(lst);
    }

    /// The smallest safe time of all partitions: every GSV is at or past it.
    pub fn floor(&self) -> Option<Ts> {
        self.last.iter().copied().min().flatten()
    }

    /// Every own write of the view, oldest first (for a checkpoint).
    pub fn local(&self) -> Vec<(Key, L)> {
        self.by_ts.iter().map(|(ts, key)| (*key, *ts)).collect()
    }

    pub fn last(&self, shard: ShardId) -> Option<Ts> {
        self.last[shard.0 as usize]
    }

    /// Line 17: the global safe view of a read touching `shards`.
    pub fn gsv(&self, shards: impl IntoIterator<Item = ShardId>) -> Option<Ts> {
        shards.into_iter().map(|s| self.last(s)).min().flatten()
    }

    /// Line 19: the local safe view of `key`.
    pub fn lsv(&self, key: Key) -> Option<L> {
        self.lsv.get(&key).copied()
    }

    /// Line 9: a write at `ts` of `keys` is fully prepared.
    pub fn prepared(&mut self, ts: L, keys: impl IntoIterator<Item = Key>) {
        for key in keys {
            // Two sessions of this client may write a key concurrently:
            // the newer write is the view, whichever was prepared last.
            match self.lsv.get(&key).copied() {
                Some(old) if old >= ts => continue,
                Some(old) => {
                    self.by_ts.remove(&(old, key));
                }
                None => {}
            }
            self.lsv.insert(key, ts);
            self.by_ts.insert((ts, key));
        }
    }

    /// Whether a write of `n` more keys would exceed `lsv_max`.
    pub fn is_full(&self, n: usize) -> bool {
        self.lsv.len() + n > self.lsv_max
    }

    /// Local versions held.
    pub fn local_versions(&self) -> usize {
        self.lsv.len()
    }

    /// The shards whose safe time is below the oldest local version (a
    /// refresh asks them).
    pub fn behind(&self) -> Vec<ShardId> {
        let Some((oldest, _)) = self.by_ts.first() else { return Vec::new() };
        let shards = 0..self.last.len() as u32;
        shards.map(ShardId).filter(|s| self.last(*s) < Some(oldest.ts())).collect()
    }

    /// Drops the local versions at or below `floor`, a safe time every
    /// partition has passed (durably recorded: a restarted client starts
    /// its version vector there).
    pub fn prune(&mut self, floor: Option<Ts>) {
        debug_assert!(floor <= self.floor(), "every partition is past the floor");
        while let Some((ts, key)) = self.by_ts.first().copied() {
            if Some(ts.ts()) > floor {
                break;
            }
            self.by_ts.pop_first();
            self.lsv.remove(&key);
        }
    }

    pub fn check_invariants(&self) {
        assert_eq!(self.lsv.len(), self.by_ts.len(), "one ordered entry per local version");
        for (key, ts) in self.lsv.iter().take(meridian_core::process::CHECKED_MAX) {
            assert!(self.by_ts.contains(&(*ts, *key)), "a local version is ordered");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ShardId = ShardId(0);
    const B: ShardId = ShardId(1);
    const X: Key = Key(1); // on A, written with Z
    const Z: Key = Key(2); // on B
    const Y: Key = Key(3); // on A, written with W
    const W: Key = Key(4); // on B

    /// NOC-NOC Figure 4 / Example 4.1: Ann's GSV is the minimum of the
    /// partitions' safe times, 1, although she knows of Z₂ on B; her LSV
    /// includes her own X₂ (prepared only) and Z₂ once both are prepared.
    /// Bob's LSV holds his Z₀ (fully prepared); his Y₃ is not in it while
    /// its sibling W₃ is not prepared, and he never sees Ann's writes in
    /// his LSV.
    #[test]
    fn figure_4_the_gsv_is_the_minimum_safe_time_and_the_lsv_only_ones_own_fully_prepared_writes() {
        let mut ann = View::new(2, 100);
        ann.learn(A, Some(Ts(1)));
        ann.learn(B, Some(Ts(2)));
        assert_eq!(ann.gsv([A, B]), Some(Ts(1)), "min(last) over the partitions read");
        assert_eq!(ann.gsv([B]), Some(Ts(2)), "a read of B alone reads at B's");
        ann.prepared(Ts(2), [X, Z]);
        assert_eq!((ann.lsv(X), ann.lsv(Z)), (Some(Ts(2)), Some(Ts(2))), "Ann's LSV is ahead of her GSV");
        assert!(Some(Ts(2)) > ann.gsv([A, B]));

        let mut bob = View::new(2, 100);
        bob.learn(A, Some(Ts(1)));
        bob.learn(B, Some(Ts(1)));
        bob.prepared(Ts(0), [X, Z]);
        // Z₀ is at 0, at or below every safe time Bob knows: his GSV
        // already holds it, and the entry may go.
        assert!(bob.lsv(Z) < bob.gsv([A, B]), "Bob's LSV is behind his GSV");
        bob.prune(bob.floor());
        assert_eq!(bob.lsv(Z), None);
        assert_eq!(bob.gsv([A, B]), Some(Ts(1)));
        // Y₃ is not in Bob's LSV until W₃ is prepared too (`prepared` is
        // called only once every partition acknowledged).
        assert_eq!(bob.lsv(Y), None);
        assert_eq!(bob.lsv(W), None);
        assert_eq!(bob.lsv(X), None, "Ann's X₂ is never in Bob's LSV");
    }

    #[test]
    fn a_local_version_stays_until_every_partition_is_past_it() {
        let mut v = View::new(2, 100);
        v.prepared(Ts(10), [X]);
        v.learn(A, Some(Ts(20)));
        assert_eq!(v.floor(), None, "B is still behind: a read of X with B would read below 10");
        assert_eq!(v.behind(), vec![B]);
        v.learn(B, Some(Ts(10)));
        assert_eq!(v.floor(), Some(Ts(10)), "every GSV is at 10 or past");
        v.prune(v.floor());
        assert_eq!(v.lsv(X), None);
        assert!(v.behind().is_empty());
        v.check_invariants();
    }

    #[test]
    fn a_restarted_view_starts_at_its_recorded_floor_with_its_recorded_writes() {
        let mut v = View::new(2, 100);
        v.restore(Some(Ts(10)), [(X, Ts(5)), (Y, Ts(12))]);
        assert_eq!(v.gsv([A, B]), Some(Ts(10)));
        assert_eq!(v.lsv(X), None, "below the floor: the GSV holds it");
        assert_eq!(v.lsv(Y), Some(Ts(12)));
        v.check_invariants();
    }

    #[test]
    fn a_view_is_full_at_its_bound() {
        let mut v = View::new(1, 2);
        v.prepared(Ts(1), [X]);
        assert!(!v.is_full(1));
        assert!(v.is_full(2));
        v.prepared(Ts(3), [X]);
        v.prepared(Ts(2), [X]);
        assert_eq!(v.local_versions(), 1, "one entry per key");
        assert_eq!(v.lsv(X), Some(Ts(3)), "the newest, whichever was prepared last");
    }
}
