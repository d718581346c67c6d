//! A Tiga server's priority queue `pq` (Figure 4; Algorithm 1): transactions
//! not yet in the log, in timestamp order. Kept beside it, so that releasing
//! by the clock never walks the transactions that are already out: the
//! stamps of those still waiting for their time, and how many transactions
//! awaiting agreement (released at a leader, §3.5) read and write each key —
//! they block conflicting successors until they reach the log.
//!
//! A transaction awaiting agreement has been released, so every later
//! arrival that conflicts with it was re-stamped behind it (§3.2): the keys
//! it blocks need no order.

use super::messages::{Stamp, TxnBody};
use meridian_core::{Key, KeyList, OpResult, TxnId};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::sync::Arc;

/// Where a queued transaction stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PState {
    /// Waiting for the clock (or for conflicting predecessors).
    Waiting,
    /// Leader, detective mode: executed optimistically at its timestamp and
    /// announced it; awaiting agreement (§3.5).
    Executed { hash: u128, result: Vec<OpResult> },
    /// Leader, preventive mode: announced its timestamp; awaiting agreement
    /// before executing (§3.8).
    Notified,
}

#[derive(Clone, Debug)]
pub(super) struct Pending {
    pub body: Arc<TxnBody>,
    pub t: u64,
    pub state: PState,
    pub reads: KeyList,
    pub writes: KeyList,
    /// One-way delay the submission took, reported back for §3.1.
    pub owd_ns: Option<u64>,
    /// When (this server's monotonic clock) its leader last announced it
    /// to the other participant leaders; `None`: not yet.
    pub announced_ns: Option<u64>,
}

impl Pending {
    pub fn stamp(&self) -> Stamp {
        Stamp { t: self.t, id: self.body.id }
    }
}

/// The transactions by id: a lookup by id (the agreement and release paths
/// ask for a queued transaction several times per event) is one hash
/// probe. Release reads only the waiting stamps in timestamp order
/// (`ReleaseIndex`); the rest of the queue is wanted in that order only by
/// a view change (`drain`), a leader's periodic re-announcements and its
/// snapshots (`earliest`), which sort then what they take. Keeping every stamp in an
/// ordered set as well cost 2.4 % of a Tiga run's instructions.
#[derive(Debug, Default)]
pub(super) struct TxnQueue {
    by_id: FxHashMap<TxnId, Pending>,
    index: ReleaseIndex,
}

/// What release by the clock reads of the queue: the stamps still waiting,
/// and the keys of those awaiting agreement.
#[derive(Debug, Default)]
struct ReleaseIndex {
    waiting: Waiting,
    agreeing_reads: FxHashMap<Key, u32>,
    agreeing_writes: FxHashMap<Key, u32>,
}

impl ReleaseIndex {
    fn index(&mut self, p: &Pending, add: bool) {
        if p.state == PState::Waiting {
            if add {
                self.waiting.insert(p.stamp());
            } else {
                self.waiting.remove(&p.stamp());
            }
        } else {
            count(&mut self.agreeing_reads, &p.reads, add);
            count(&mut self.agreeing_writes, &p.writes, add);
        }
    }
}

/// The stamps of the transactions waiting for their time, as a sorted
/// deque. Release takes them from the front in order, and an arrival's
/// stamp lands among the latest few hundred (a server's transactions wait
/// at most about a wide-area one-way delay): a bisection and a short move,
/// where a B-tree set walked and rebalanced nodes, 2.8 % more of a Tiga
/// run's instructions (docs/flat-cost.md).
#[derive(Debug, Default)]
struct Waiting {
    stamps: VecDeque<Stamp>,
}

impl Waiting {
    fn insert(&mut self, s: Stamp) {
        if let Err(i) = self.stamps.binary_search(&s) {
            self.stamps.insert(i, s);
        }
    }

    fn remove(&mut self, s: &Stamp) {
        // Release removes the front: no search then.
        if self.stamps.front() == Some(s) {
            self.stamps.pop_front();
        } else if let Ok(i) = self.stamps.binary_search(s) {
            self.stamps.remove(i);
        }
    }

    fn first(&self) -> Option<&Stamp> {
        self.stamps.front()
    }

    /// The stamps in order.
    fn iter(&self) -> impl Iterator<Item = &Stamp> {
        self.stamps.iter()
    }

    /// The first stamp at or after `from`.
    fn first_from(&self, from: &Stamp) -> Option<&Stamp> {
        self.stamps.get(self.stamps.partition_point(|s| s < from))
    }
}

fn count(map: &mut FxHashMap<Key, u32>, keys: &[Key], up: bool) {
    for k in keys {
        let c = map.entry(*k).or_insert(0);
        if up {
            *c += 1;
        } else {
            assert!(*c > 0, "uncounted key {k:?}");
            *c -= 1;
            if *c == 0 {
                map.remove(k);
            }
        }
    }
}

impl TxnQueue {
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn contains(&self, id: TxnId) -> bool {
        self.by_id.contains_key(&id)
    }

    pub fn get(&self, id: TxnId) -> Option<&Pending> {
        self.by_id.get(&id)
    }

    /// Every queued transaction, in no particular order (the same order
    /// for the same history of inserts and removals): for checks that
    /// look at each alone.
    pub fn values(&self) -> impl Iterator<Item = &Pending> {
        self.by_id.values()
    }

    /// The `max` earliest queued transactions that pass `filter`, in
    /// timestamp order: a selection, then a sort of what it kept.
    pub fn earliest(&self, max: usize, filter: impl Fn(&Pending) -> bool) -> Vec<&Pending> {
        let mut some: Vec<&Pending> = self.by_id.values().filter(|p| filter(p)).collect();
        if some.len() > max && max > 0 {
            some.select_nth_unstable_by_key(max - 1, |p| p.stamp());
        }
        some.truncate(max);
        some.sort_unstable_by_key(|p| p.stamp());
        some
    }

    /// Notes that this leader announced `id` at `at_ns` (monotonic).
    pub fn announced(&mut self, id: TxnId, at_ns: u64) {
        if let Some(p) = self.by_id.get_mut(&id) {
            p.announced_ns = Some(at_ns);
        }
    }

    pub fn insert(&mut self, p: Pending) {
        let id = p.body.id;
        self.index.index(&p, true);
        let old = self.by_id.insert(id, p);
        assert!(old.is_none(), "{id} queued twice");
    }

    pub fn remove(&mut self, id: TxnId) -> Option<Pending> {
        let p = self.by_id.remove(&id)?;
        self.index.index(&p, false);
        Some(p)
    }

    /// A new state, in place: the stamp and so the order stay.
    pub fn set_state(&mut self, id: TxnId, state: PState) {
        let p = self.by_id.get_mut(&id).expect("a queued transaction");
        self.index.index(p, false);
        p.state = state;
        self.index.index(p, true);
    }

    /// Moves a transaction to a later timestamp, waiting again (§3.5 case 3).
    pub fn reposition(&mut self, id: TxnId, t: u64) {
        let mut p = self.remove(id).expect("repositioning a queued transaction");
        assert!(t > p.t, "timestamps only grow");
        p.t = t;
        p.state = PState::Waiting;
        self.insert(p);
    }

    /// Waiting transactions whose timestamp the clock has reached, in order.
    pub fn expired_waiting(&self, now_ns: u64, into: &mut Vec<TxnId>) {
        into.extend(self.index.waiting.iter().take_while(|s| s.t <= now_ns).map(|s| s.id));
    }

    /// The earliest timestamp of a waiting transaction.
    pub fn first_waiting_t(&self) -> Option<u64> {
        self.index.waiting.first().map(|s| s.t)
    }

    /// The earliest timestamp of a waiting transaction after `now_ns`.
    pub fn next_waiting_after(&self, now_ns: u64) -> Option<u64> {
        // Asked after every release pass, which leaves the earliest waiting
        // stamp past the clock unless a conflict holds it back: then the
        // leftmost stamp answers without a search of the set.
        let first = self.index.waiting.first()?;
        if first.t > now_ns {
            return Some(first.t);
        }
        let from = Stamp { t: now_ns.saturating_add(1), id: TxnId { node: meridian_core::NodeId(0), seq: 0 } };
        self.index.waiting.first_from(&from).map(|s| s.t)
    }

    /// Whether a transaction awaiting agreement holds one of these keys in
    /// a conflicting way.
    pub fn blocked_by_agreeing(&self, reads: &[Key], writes: &[Key]) -> bool {
        reads.iter().any(|k| self.index.agreeing_writes.contains_key(k))
            || writes
                .iter()
                .any(|k| self.index.agreeing_writes.contains_key(k) || self.index.agreeing_reads.contains_key(k))
    }

    /// Empties the queue, returning its transactions in timestamp order.
    pub fn drain(&mut self) -> Vec<Pending> {
        let mut all: Vec<Pending> = std::mem::take(&mut self.by_id).into_values().collect();
        all.sort_unstable_by_key(|p| p.stamp());
        *self = TxnQueue::default();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::{NodeId, Program, ShardId};

    fn p(seq: u64, t: u64, reads: &[u64], writes: &[u64]) -> Pending {
        let body = TxnBody {
            id: TxnId { node: NodeId(1), seq },
            coordinator: NodeId(1),
            program: Program::default(),
            shards: vec![ShardId(0)],
        };
        Pending {
            body: Arc::new(body),
            t,
            state: PState::Waiting,
            reads: reads.iter().map(|k| Key(*k)).collect(),
            writes: writes.iter().map(|k| Key(*k)).collect(),
            owd_ns: None,
            announced_ns: None,
        }
    }

    fn id(seq: u64) -> TxnId {
        TxnId { node: NodeId(1), seq }
    }

    fn expired(q: &TxnQueue, now_ns: u64) -> Vec<TxnId> {
        let mut due = Vec::new();
        q.expired_waiting(now_ns, &mut due);
        due
    }

    #[test]
    fn the_next_waiting_timestamp_is_the_first_past_the_clock() {
        let mut q = TxnQueue::default();
        assert_eq!(q.next_waiting_after(0), None, "nothing waits");
        assert_eq!(q.first_waiting_t(), None);
        q.insert(p(2, 20, &[], &[2]));
        q.insert(p(1, 10, &[], &[1]));
        assert_eq!(q.first_waiting_t(), Some(10), "the earliest, whatever the order of arrival");
        assert_eq!(q.next_waiting_after(5), Some(10), "the earliest is past the clock");
        assert_eq!(q.next_waiting_after(10), Some(20), "one held back at the clock");
        assert_eq!(q.next_waiting_after(25), None, "every one is at or before the clock");
        q.insert(p(3, u64::MAX, &[], &[3]));
        assert_eq!(q.next_waiting_after(u64::MAX), Some(u64::MAX), "the last instant is its own next");
    }

    #[test]
    fn released_transactions_block_conflicting_keys_until_they_leave() {
        let mut q = TxnQueue::default();
        q.insert(p(1, 10, &[1], &[2]));
        q.insert(p(2, 20, &[], &[3]));
        q.insert(p(3, 30, &[], &[]));
        assert_eq!(expired(&q, 20), vec![id(1), id(2)]);
        assert_eq!(q.next_waiting_after(20), Some(30));
        q.set_state(id(1), PState::Notified);
        assert_eq!(expired(&q, 20), vec![id(2)], "no longer waiting");
        let k = |x: u64| [Key(x)];
        assert!(q.blocked_by_agreeing(&k(2), &[]), "a read of its write");
        assert!(q.blocked_by_agreeing(&[], &k(1)), "a write of its read");
        assert!(!q.blocked_by_agreeing(&k(1), &[]), "reads commute");
        q.reposition(id(1), 40);
        assert!(!q.blocked_by_agreeing(&k(2), &[]), "waiting again");
        assert_eq!(q.next_waiting_after(35), Some(40));
        q.set_state(id(2), PState::Notified);
        assert!(q.remove(id(2)).is_some());
        assert!(!q.blocked_by_agreeing(&k(3), &k(3)));
        assert_eq!(q.drain().iter().map(|p| p.t).collect::<Vec<_>>(), vec![30, 40]);
        assert!(q.len() == 0 && !q.contains(id(1)));
    }

    #[test]
    fn transactions_come_out_in_timestamp_order_and_are_found_by_id_after_moving() {
        let mut q = TxnQueue::default();
        for (seq, t) in [(1, 50), (2, 10), (3, 30), (4, 10)] {
            q.insert(p(seq, t, &[], &[seq]));
        }
        let order = |q: &TxnQueue| q.earliest(usize::MAX, |_| true).iter().map(|p| p.body.id.seq).collect::<Vec<_>>();
        assert_eq!(order(&q), vec![2, 4, 3, 1], "by timestamp, then id");
        q.reposition(id(2), 40);
        assert_eq!(order(&q), vec![4, 3, 2, 1]);
        assert_eq!(q.get(id(2)).map(|p| p.t), Some(40));
        q.set_state(id(3), PState::Notified);
        assert_eq!(order(&q), vec![4, 3, 2, 1], "a new state keeps the place");
        assert_eq!(expired(&q, 45), vec![id(4), id(2)]);
        assert!(q.remove(id(3)).is_some() && q.get(id(3)).is_none());
        assert_eq!(q.drain().iter().map(|p| p.body.id.seq).collect::<Vec<_>>(), vec![4, 2, 1]);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn waiting_stamps_keep_a_sorted_sets_order_whatever_the_order_of_arrival_and_removal() {
        let mut rng = meridian_core::Rng::new(5);
        let (mut w, mut set) = (Waiting::default(), std::collections::BTreeSet::new());
        let stamp = |t: u64, seq: u64| Stamp { t, id: TxnId { node: NodeId((seq % 3) as u32), seq } };
        for i in 0..4000u64 {
            let s = stamp(i / 2 + rng.below(300), rng.below(40));
            if rng.chance(0.55) {
                w.insert(s);
                set.insert(s);
            } else {
                // Mostly the front, as release takes them; sometimes any.
                let gone = if rng.chance(0.7) { set.first().copied() } else { Some(s) };
                if let Some(g) = gone {
                    w.remove(&g);
                    set.remove(&g);
                }
            }
            assert_eq!(w.first(), set.first());
            let from = stamp(i / 2 + 150, 0);
            assert_eq!(w.first_from(&from), set.range(from..).next());
        }
        assert!(w.iter().eq(set.iter()), "the same stamps, in the same order");
    }

    #[test]
    fn the_earliest_few_that_pass_a_filter_come_in_timestamp_order() {
        let mut q = TxnQueue::default();
        for (seq, t) in [(1, 50), (2, 10), (3, 30), (4, 10), (5, 20), (6, 40)] {
            q.insert(p(seq, t, &[], &[seq]));
        }
        let seqs = |v: Vec<&Pending>| v.iter().map(|p| p.body.id.seq).collect::<Vec<_>>();
        assert_eq!(seqs(q.earliest(3, |_| true)), vec![2, 4, 5]);
        assert_eq!(seqs(q.earliest(2, |p| p.body.id.seq % 2 == 1)), vec![5, 3], "odd ids only");
        assert_eq!(seqs(q.earliest(10, |p| p.t >= 40)), vec![6, 1], "fewer than asked");
        assert!(q.earliest(0, |_| true).is_empty());
    }
}
