//! A server's conflict maps, rMap and wMap (Tiga §3.2, Algorithm 1 lines
//! 1-5 and 14-15): per key, the largest stamp of a released transaction
//! that read it and that wrote it. A later arrival that conflicts with a
//! released transaction at a larger stamp cannot keep its timestamp: a
//! leader re-stamps it past the bound, a follower holds it for the
//! leader's order.

use super::messages::{Checkpoint, Stamp};
use meridian_core::Key;
use rustc_hash::FxHashMap;

/// rMap's and wMap's stamps for one key, kept together: a write is checked
/// against both, so one look-up (one miss to memory, in a large key space)
/// finds both.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct KeyStamps {
    read: Option<Stamp>,
    write: Option<Stamp>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct ConflictMaps {
    map: FxHashMap<Key, KeyStamps>,
}

impl ConflictMaps {
    /// The maps as a checkpoint left them (entries it folded included).
    pub(super) fn from_checkpoint(cp: &Checkpoint) -> Self {
        let mut map: FxHashMap<Key, KeyStamps> = FxHashMap::default();
        for (k, s) in cp.rmap.iter() {
            map.entry(*k).or_default().read = Some(*s);
        }
        for (k, s) in cp.wmap.iter() {
            map.entry(*k).or_default().write = Some(*s);
        }
        ConflictMaps { map }
    }

    /// The largest stamp of a released transaction that a transaction
    /// reading `reads` and writing `writes` conflicts with: a write after
    /// any access, or a read after a write.
    pub(super) fn bound(&self, reads: &[Key], writes: &[Key]) -> Option<Stamp> {
        let r = reads.iter().filter_map(|k| self.map.get(k)?.write);
        let w = writes.iter().filter_map(|k| self.map.get(k)).flat_map(|s| s.read.max(s.write));
        r.chain(w).max()
    }

    /// A transaction was released at `stamp` (Algorithm 1 lines 14-15).
    pub(super) fn released(&mut self, stamp: Stamp, reads: &[Key], writes: &[Key]) {
        let raise = |held: &mut Option<Stamp>| *held = Some(held.map_or(stamp, |s| s.max(stamp)));
        for k in reads {
            raise(&mut self.map.entry(*k).or_default().read);
        }
        for k in writes {
            raise(&mut self.map.entry(*k).or_default().write);
        }
    }

    /// Keys in either map.
    pub(super) fn len(&self) -> usize {
        self.map.len()
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
        m.released(stamp(12), &[Key(2)], &[]);
        assert_eq!(m.bound(&[Key(2)], &[]), Some(stamp(10)), "a read's stamp does not bound a read");
        assert_eq!(m.bound(&[], &[Key(2)]), Some(stamp(12)), "a write is bound by the later read");
        assert_eq!(m.len(), 2);
    }
}
