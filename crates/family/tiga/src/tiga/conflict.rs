//! A server's conflict maps, rMap and wMap (Tiga §3.2, Algorithm 1 lines
//! 1-5 and 14-15): per key, the largest stamp of a released transaction
//! that read it and that wrote it. A later arrival that conflicts with a
//! released transaction at a larger stamp cannot keep its timestamp: a
//! leader re-stamps it past the bound, a follower holds it for the
//! leader's order.
//!
//! The paper keeps a stamp for every key of the store. These maps keep the
//! stamps within `window_ns` of the newest and fold the older ones into a
//! floor per map, which stands for every key's: an arrival stamped above
//! the floor — every arrival but one later than the window — meets exactly
//! the paper's bound, and one below it is treated as conflicting (re-stamped
//! at a leader, held at a follower), which admits a subset of what the
//! paper admits and so keeps every property admission gives. The maps'
//! memory is then the keys written within the window, not every key the
//! run has touched. Only admission reads these maps; a view change's
//! recovery reads the checkpoint's exact per-key stamps (`recovery.rs`).

use super::messages::{Checkpoint, Stamp};
use meridian_core::Key;
use rustc_hash::FxHashMap;

/// Keys the maps hold before they are first pruned. Pruning at twice what
/// the last one kept costs about one look-up per release whatever this is;
/// it only spares maps of a few hundred keys the passes.
const PRUNE_MIN: usize = 256;

#[derive(Clone, Debug)]
pub(super) struct ConflictMaps {
    rmap: FxHashMap<Key, Stamp>,
    wmap: FxHashMap<Key, Stamp>,
    /// The largest stamp pruned from rMap and from wMap: at least every
    /// pruned key's.
    r_floor: Option<Stamp>,
    w_floor: Option<Stamp>,
    /// Stamps older than this behind the newest are pruned (0: never).
    window_ns: u64,
    /// The newest stamp's time in either map.
    newest_t: u64,
    /// Keys held at which the next pruning runs: twice what the last one
    /// left, so each costs about the releases since.
    prune_at: usize,
}

impl ConflictMaps {
    pub(super) fn new(window_ns: u64) -> Self {
        ConflictMaps {
            rmap: FxHashMap::default(),
            wmap: FxHashMap::default(),
            r_floor: None,
            w_floor: None,
            window_ns,
            newest_t: 0,
            prune_at: PRUNE_MIN,
        }
    }

    /// The maps as a checkpoint left them (entries it folded included).
    pub(super) fn from_checkpoint(cp: &Checkpoint, window_ns: u64) -> Self {
        let copy = |m: &meridian_mechanisms::cow_map::CowMap<Key, Stamp>| m.iter().map(|(k, s)| (*k, *s)).collect();
        let mut maps = ConflictMaps { rmap: copy(&cp.rmap), wmap: copy(&cp.wmap), ..ConflictMaps::new(window_ns) };
        maps.newest_t = maps.rmap.values().chain(maps.wmap.values()).map(|s| s.t).max().unwrap_or(0);
        maps.prune_if_due();
        maps
    }

    /// The largest stamp of a released transaction that a transaction
    /// reading `reads` and writing `writes` conflicts with: a write after
    /// any access, or a read after a write — the floors standing for the
    /// pruned keys.
    pub(super) fn bound(&self, reads: &[Key], writes: &[Key]) -> Option<Stamp> {
        let w_floor = self.w_floor.filter(|_| !(reads.is_empty() && writes.is_empty()));
        let r_floor = self.r_floor.filter(|_| !writes.is_empty());
        self.key_bound(reads, writes).max(w_floor).max(r_floor)
    }

    /// [`ConflictMaps::bound`] over the keys' own stamps alone: whether a
    /// floor decided a bound.
    pub(super) fn key_bound(&self, reads: &[Key], writes: &[Key]) -> Option<Stamp> {
        let w = reads.iter().chain(writes).filter_map(|k| self.wmap.get(k));
        let r = writes.iter().filter_map(|k| self.rmap.get(k));
        w.chain(r).copied().max()
    }

    /// A transaction was released at `stamp` (Algorithm 1 lines 14-15).
    pub(super) fn released(&mut self, stamp: Stamp, reads: &[Key], writes: &[Key]) {
        for (keys, map) in [(reads, &mut self.rmap), (writes, &mut self.wmap)] {
            for k in keys {
                let e = map.entry(*k).or_insert(stamp);
                *e = (*e).max(stamp);
            }
        }
        self.newest_t = self.newest_t.max(stamp.t);
        self.prune_if_due();
    }

    fn prune_if_due(&mut self) {
        if self.window_ns == 0 || self.len() <= self.prune_at {
            return;
        }
        let oldest_kept = self.newest_t.saturating_sub(self.window_ns);
        for (map, floor) in [(&mut self.rmap, &mut self.r_floor), (&mut self.wmap, &mut self.w_floor)] {
            map.retain(|_, s| {
                let keep = s.t >= oldest_kept;
                if !keep {
                    *floor = (*floor).max(Some(*s));
                }
                keep
            });
        }
        self.prune_at = (2 * self.len()).max(PRUNE_MIN);
    }

    /// Keys in either map.
    pub(super) fn len(&self) -> usize {
        self.rmap.len() + self.wmap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::{NodeId, TxnId};

    fn stamp(t: u64) -> Stamp {
        Stamp { t, id: TxnId { node: NodeId(1), seq: t } }
    }

    #[test]
    fn reads_conflict_with_writes_and_writes_with_everything() {
        let mut m = ConflictMaps::new(0);
        m.released(stamp(10), &[Key(1)], &[Key(2)]);
        assert_eq!(m.bound(&[Key(1)], &[]), None, "two reads do not conflict");
        assert_eq!(m.bound(&[], &[Key(1)]), Some(stamp(10)), "a write after a read");
        assert_eq!(m.bound(&[Key(2)], &[]), Some(stamp(10)), "a read after a write");
        m.released(stamp(5), &[], &[Key(2)]);
        assert_eq!(m.bound(&[Key(2)], &[]), Some(stamp(10)), "the largest stamp stays");
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn a_pruned_read_stamp_still_bounds_a_later_write_but_not_a_later_read() {
        // One old write, then reads of many keys (key 1 among the first),
        // enough to prune all but the window's.
        let mut m = ConflictMaps::new(100);
        m.released(stamp(5), &[], &[Key(0)]);
        m.released(stamp(20), &[Key(1)], &[]);
        for t in 1_000..1_000 + 2 * PRUNE_MIN as u64 {
            m.released(stamp(t), &[Key(t)], &[]);
        }
        assert_eq!(m.key_bound(&[Key(1)], &[Key(1)]), None, "key 1's read stamp was pruned");
        // An arrival stamped 30 on key 1: the paper's maps hold key 1's read
        // at 20, so a write there conflicts and a read does not.
        let conflicts = |reads: &[Key], writes: &[Key]| m.bound(reads, writes).is_some_and(|b| b >= stamp(30));
        assert!(conflicts(&[], &[Key(1)]), "a write after the pruned read conflicts (the read floor)");
        assert!(!conflicts(&[Key(1)], &[]), "a read meets only the write floor, 5");
    }

    /// The paper's maps, one stamp per key ever released, beside pruned
    /// ones: within the window every bound is the same, below it a pruned
    /// map's is at least the paper's, and the keys held stay bounded.
    #[test]
    fn pruned_maps_bound_as_the_papers_within_the_window_and_never_below_it() {
        let window = 1_000;
        let (mut paper, mut pruned) = (ConflictMaps::new(0), ConflictMaps::new(window));
        for t in 1..=40_000u64 {
            // Key t, and a key read and written again every 97 releases.
            let (reads, writes) = ([Key(1_000_000 + t % 97)], [Key(t)]);
            paper.released(stamp(t), &reads, &writes);
            pruned.released(stamp(t), &reads, &writes);
        }
        assert_eq!(paper.len(), 40_097);
        // Each pruning keeps the window's 1,000 written keys and the 97 read
        // ones, and the next runs at twice that.
        assert!(pruned.len() <= 2 * 1_098 + 1, "pruned to the window: {} keys", pruned.len());
        // An arrival's fate: kept at its stamp, or re-stamped (held).
        let conflicts = |m: &ConflictMaps, t: u64, reads: &[Key], writes: &[Key]| {
            m.bound(reads, writes).is_some_and(|b| b >= stamp(t))
        };
        for t in [39_200, 39_500, 39_990, 40_001, 45_000] {
            for (reads, writes) in [(vec![Key(t % 97 + 1_000_000)], vec![Key(t)]), (vec![], vec![Key(t - 150)])] {
                let (p, q) = (conflicts(&paper, t, &reads, &writes), conflicts(&pruned, t, &reads, &writes));
                assert_eq!(q, p, "stamp {t}: {reads:?} {writes:?}");
            }
        }
        for old in [1, 500, 30_000] {
            let (reads, writes) = ([Key(old + 7)], [Key(old)]);
            let (p, q) = (paper.bound(&reads, &writes), pruned.bound(&reads, &writes));
            assert!(q >= p, "below the window a pruned bound is never lower: {q:?} < {p:?}");
            assert!(q.is_some_and(|q| q >= stamp(old)), "an arrival stamped {old} is re-stamped or held");
        }
        assert_eq!(pruned.bound(&[], &[]), None, "a transaction with no keys conflicts with nothing");
        assert!(pruned.bound(&[Key(5)], &[]) > pruned.key_bound(&[Key(5)], &[]), "the floor decided this one");
    }
}
