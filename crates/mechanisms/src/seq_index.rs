//! Tables keyed by transaction id, kept per coordinator in sequence order.
//!
//! A coordinator hands out its ids in increasing order (across restarts too:
//! `txnids` puts the epoch in the high bits), and a participant mostly
//! learns of and asks about a coordinator's newest ones. A hash map keyed by
//! id puts every insertion and every "seen it before?" of a fresh id at a
//! random place in a table of everything held — a cache miss each, once the
//! table outgrows the cache. Kept per coordinator in id order, a new id
//! lands at (or a few places before) the end of its coordinator's run, a
//! fresh id is told apart by comparing it with the last, and a look-up
//! gallops back from the end ([`find_seq`]): the lines it reads are the
//! ones the last operations read.
//!
//! Coordinators are indexed by node number (a cluster numbers its nodes
//! densely from 0), up to [`COORDINATORS_MAX`].

use meridian_core::{NodeId, TxnId};
use std::cmp::Ordering;
use std::collections::VecDeque;

/// Coordinator node indexes a table accepts: ids are dense, and one slot
/// per coordinator is kept.
pub const COORDINATORS_MAX: usize = 1 << 20;

/// Where `seq` is in `run` (sorted by `seq_of`), or where it would go. The
/// sequence numbers asked about are mostly among the newest, so the search
/// gallops back from the end before it bisects: a few comparisons where a
/// bisection of the whole run takes a dozen, and on lines just read.
pub fn find_seq<T>(run: &VecDeque<T>, seq: u64, seq_of: impl Fn(&T) -> u64) -> Result<usize, usize> {
    // Every entry from `hi` on is past `seq`; every one before `lo` below it.
    let (mut lo, mut hi, mut step) = (0, run.len(), 1);
    while hi > 0 {
        let probe = hi.saturating_sub(step);
        match seq_of(&run[probe]).cmp(&seq) {
            Ordering::Equal => return Ok(probe),
            Ordering::Less => {
                lo = probe + 1;
                break;
            }
            Ordering::Greater => (hi, step) = (probe, step * 2),
        }
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match seq_of(&run[mid]).cmp(&seq) {
            Ordering::Equal => return Ok(mid),
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
        }
    }
    Err(lo)
}

/// A map from transaction id to `V`, one run per coordinator in sequence
/// order. Iteration (`retain`) goes coordinator by coordinator, each in id
/// order: the same for the same contents, whatever the order of insertion.
#[derive(Clone, Debug)]
pub struct SeqIndex<V> {
    /// By coordinator node index: `(seq, value)` sorted by `seq`.
    by_node: Vec<VecDeque<(u64, V)>>,
    len: usize,
}

impl<V> Default for SeqIndex<V> {
    fn default() -> Self {
        SeqIndex { by_node: Vec::new(), len: 0 }
    }
}

impl<V> SeqIndex<V> {
    pub fn new() -> Self {
        Self::default()
    }

    fn run_mut(&mut self, node: NodeId) -> &mut VecDeque<(u64, V)> {
        let i = node.index();
        assert!(i < COORDINATORS_MAX, "coordinator {node} past the {COORDINATORS_MAX} a table holds");
        if self.by_node.len() <= i {
            self.by_node.resize_with(i + 1, VecDeque::new);
        }
        &mut self.by_node[i]
    }

    /// A fresh id, past its coordinator's last (the common case at a
    /// participant), is answered by `find_seq`'s first comparison.
    pub fn get(&self, id: TxnId) -> Option<&V> {
        let run = self.by_node.get(id.node.index())?;
        find_seq(run, id.seq, |e| e.0).ok().map(|i| &run[i].1)
    }

    pub fn contains(&self, id: TxnId) -> bool {
        self.get(id).is_some()
    }

    /// Sets `id`'s value; the one it replaces, if any. A coordinator's
    /// newest id goes at the end of its run.
    pub fn insert(&mut self, id: TxnId, value: V) -> Option<V> {
        let run = self.run_mut(id.node);
        match find_seq(run, id.seq, |e| e.0) {
            Ok(i) => Some(std::mem::replace(&mut run[i].1, value)),
            Err(i) => {
                run.insert(i, (id.seq, value));
                self.len += 1;
                None
            }
        }
    }

    pub fn remove(&mut self, id: TxnId) -> Option<V> {
        let run = self.by_node.get_mut(id.node.index())?;
        let i = find_seq(run, id.seq, |e| e.0).ok()?;
        let (_, value) = run.remove(i).expect("found");
        self.len -= 1;
        Some(value)
    }

    /// Keeps the entries `keep` says to keep.
    pub fn retain(&mut self, mut keep: impl FnMut(TxnId, &V) -> bool) {
        for (n, run) in self.by_node.iter_mut().enumerate() {
            let node = NodeId(n as u32);
            run.retain(|(seq, v)| keep(TxnId { node, seq: *seq }, v));
        }
        self.len = self.by_node.iter().map(VecDeque::len).sum();
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn id(node: u32, seq: u64) -> TxnId {
        TxnId { node: NodeId(node), seq }
    }

    #[test]
    fn find_seq_finds_every_entry_and_the_place_of_every_absent_one() {
        let run: VecDeque<u64> = (0..300).map(|i| 3 * i + 1).collect();
        for seq in 0..=905 {
            let expected = run.binary_search(&seq);
            assert_eq!(find_seq(&run, seq, |s| *s), expected, "seq {seq}");
        }
        assert_eq!(find_seq(&VecDeque::<u64>::new(), 5, |s| *s), Err(0));
    }

    /// Against a `BTreeMap` on random operations whose ids arrive mostly in
    /// order, as a coordinator's do, with stragglers and removals anywhere.
    #[test]
    fn a_seq_index_holds_what_a_map_by_id_holds_whatever_the_order_of_arrival() {
        let (mut index, mut model) = (SeqIndex::new(), BTreeMap::<TxnId, u64>::new());
        let mut next = [0u64; 4];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let node = (x % 4) as u32;
            let seq = match x >> 8 & 7 {
                0 => (x >> 16) % (next[node as usize] + 1), // a straggler or a repeat
                _ => {
                    next[node as usize] += 1 + (x >> 20) % 3;
                    next[node as usize]
                }
            };
            let key = id(node, seq);
            match x >> 12 & 3 {
                0 => assert_eq!(index.remove(key), model.remove(&key), "step {step}: remove {key:?}"),
                1 if step % 97 == 0 => {
                    index.retain(|id, v| (id.seq + v) % 3 != 0);
                    model.retain(|id, v| (id.seq + *v) % 3 != 0);
                }
                _ => assert_eq!(index.insert(key, step), model.insert(key, step), "step {step}: insert {key:?}"),
            }
            assert_eq!(index.get(key), model.get(&key), "step {step}: get {key:?}");
            assert_eq!(index.len(), model.len());
        }
        for (key, v) in &model {
            assert_eq!(index.get(*key), Some(v));
            assert_eq!(index.insert(*key, v + 1), Some(*v), "a held id's value is replaced");
            assert_eq!(index.get(*key), Some(&(v + 1)));
        }
        assert!(!index.contains(id(2, next[2] + 1)), "a coordinator's next id is not held");
        assert!(!index.contains(id(9, 0)), "nor a coordinator never seen");
        assert_eq!(index.remove(id(9, 0)), None);
    }

    #[test]
    #[should_panic(expected = "past the")]
    fn a_coordinator_number_past_the_bound_is_refused_not_allocated() {
        SeqIndex::new().insert(id(COORDINATORS_MAX as u32, 1), ());
    }
}
