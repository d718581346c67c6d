//! A server's conflict maps, rMap and wMap (Tiga §3.2, Algorithm 1 lines
//! 1-5 and 14-15): per key, the largest stamp of a released transaction
//! that read it and that wrote it. A later arrival that conflicts with a
//! released transaction at a larger stamp cannot keep its timestamp: a
//! leader re-stamps it past the bound, a follower holds it for the
//! leader's order.

use super::messages::{Checkpoint, Stamp};
use meridian_core::Key;
use rustc_hash::FxHashMap;

#[derive(Clone, Debug, Default)]
pub(super) struct ConflictMaps {
    rmap: FxHashMap<Key, Stamp>,
    wmap: FxHashMap<Key, Stamp>,
}

impl ConflictMaps {
    /// The maps as a checkpoint left them (entries it folded included).
    pub(super) fn from_checkpoint(cp: &Checkpoint) -> Self {
        let copy = |m: &meridian_mechanisms::cow_map::CowMap<Key, Stamp>| m.iter().map(|(k, s)| (*k, *s)).collect();
        ConflictMaps { rmap: copy(&cp.rmap), wmap: copy(&cp.wmap) }
    }

    /// The largest stamp of a released transaction that a transaction
    /// reading `reads` and writing `writes` conflicts with: a write after
    /// any access, or a read after a write.
    pub(super) fn bound(&self, reads: &[Key], writes: &[Key]) -> Option<Stamp> {
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
        let mut m = ConflictMaps::default();
        m.released(stamp(10), &[Key(1)], &[Key(2)]);
        assert_eq!(m.bound(&[Key(1)], &[]), None, "two reads do not conflict");
        assert_eq!(m.bound(&[], &[Key(1)]), Some(stamp(10)), "a write after a read");
        assert_eq!(m.bound(&[Key(2)], &[]), Some(stamp(10)), "a read after a write");
        m.released(stamp(5), &[], &[Key(2)]);
        assert_eq!(m.bound(&[Key(2)], &[]), Some(stamp(10)), "the largest stamp stays");
        assert_eq!(m.len(), 2);
    }
}
