//! Two-phase commit across replicated shards, written once for every
//! layered protocol (2PL+Paxos, OCC+Paxos, D2PL-TTC, MVTO-HLC).
//!
//! Participants make their prepare records durable through consensus, so a
//! transaction is committed exactly when every participant's prepare is
//! chosen; the coordinator's decision only announces it. A participant left
//! in doubt asks the others (cooperative termination): any abort or commit
//! they know decides; all prepared means commit; a participant's leader that
//! never saw the transaction durably records an abort first and then
//! answers it (so a late prepare there can no longer succeed).
//!
//! Decided outcomes are remembered in a bounded table with a per-coordinator
//! watermark: a question about a forgotten transaction is answered
//! "forgotten", never guessed.

use crate::cow_map::CowMap;
use meridian_core::{NodeId, ShardId, TxnId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What a participant knows of a transaction.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnStatus {
    Prepared,
    Committed,
    Aborted,
    /// Decided long ago and no longer remembered.
    Forgotten,
}

/// The fate of a transaction.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    Commit,
    Abort,
}

/// The coordinator's count of prepare votes, one per participant (a
/// shard, or whatever unit the protocol prepares at: 2pl-paxos's
/// `lock_at = "home"` prepares at each shard's home partitions).
#[derive(Clone, Debug)]
pub struct Tally<P = ShardId> {
    pending: BTreeSet<P>,
    decided: Option<Decision>,
}

impl<P: Copy + Ord> Tally<P> {
    pub fn new(participants: &[P]) -> Tally<P> {
        assert!(!participants.is_empty(), "a transaction has participants");
        Tally { pending: participants.iter().copied().collect(), decided: None }
    }

    /// A yes vote; returns the decision when it completes the tally.
    pub fn yes(&mut self, participant: P) -> Option<Decision> {
        if self.decided.is_some() || !self.pending.remove(&participant) || !self.pending.is_empty() {
            return None;
        }
        self.decided = Some(Decision::Commit);
        self.decided
    }

    /// A no vote decides abort (once).
    pub fn no(&mut self, _participant: P) -> Option<Decision> {
        if self.decided.is_some() {
            return None;
        }
        self.decided = Some(Decision::Abort);
        self.decided
    }

    pub fn pending(&self) -> impl Iterator<Item = P> + '_ {
        self.pending.iter().copied()
    }

    pub fn decided(&self) -> Option<Decision> {
        self.decided
    }
}

/// Cooperative termination: what the answers of the other participants
/// decide, if anything yet (`None` entries have not answered).
pub fn termination_decision(answers: impl IntoIterator<Item = Option<TxnStatus>>) -> Option<Decision> {
    let mut all_prepared = true;
    for answer in answers {
        match answer {
            Some(TxnStatus::Aborted) => return Some(Decision::Abort),
            Some(TxnStatus::Committed) => return Some(Decision::Commit),
            Some(TxnStatus::Prepared) => {}
            Some(TxnStatus::Forgotten) | None => all_prepared = false,
        }
    }
    all_prepared.then_some(Decision::Commit)
}

/// Remembered outcomes, at most `capacity` of them, retired as their
/// coordinators say no participant can still ask about them.
///
/// A coordinator's watermark ([`Outcomes::retire`]) says every transaction
/// it started below it in its current epoch is settled at every
/// participant: the decision is applied everywhere, so nobody is in doubt
/// and a late message about one is answered "forgotten". That keeps the
/// table proportional to the transactions in flight. The capacity is the
/// backstop for coordinators that never say (they crashed, or stopped
/// deciding): the oldest entries go first.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Outcomes {
    map: CowMap<TxnId, Decision>,
    /// Insertion order for the capacity; may hold retired ids (skipped),
    /// at most as many again as `map` (see `compact_order`).
    order: VecDeque<TxnId>,
    /// Per coordinator and epoch: every id at or below is decided (or was
    /// never started), remembered or not.
    forgotten_upto: BTreeMap<(NodeId, u64), u64>,
    capacity: usize,
}

/// Epoch of a sequence number (see `crate::txnids`).
fn epoch(seq: u64) -> u64 {
    crate::txnids::epoch_of(seq)
}

impl Outcomes {
    pub fn new(capacity: usize) -> Outcomes {
        assert!(capacity > 0);
        Outcomes { map: CowMap::new(), order: VecDeque::new(), forgotten_upto: BTreeMap::new(), capacity }
    }

    pub fn record(&mut self, txn: TxnId, decision: Decision) {
        if self.lookup(txn) == Some(TxnStatus::Forgotten) {
            return; // retired already: it stays forgotten
        }
        self.insert(txn, decision);
    }

    /// `record` for a transaction the caller has just looked up and found
    /// undecided (`lookup` gave `None`): the same, without a second lookup
    /// on a replica's path that applies every decision.
    pub fn record_undecided(&mut self, txn: TxnId, decision: Decision) {
        debug_assert_eq!(self.lookup(txn), None, "{txn} was looked up undecided");
        self.insert(txn, decision);
    }

    fn insert(&mut self, txn: TxnId, decision: Decision) {
        if self.map.insert(txn, decision).is_none() {
            self.order.push_back(txn);
        }
        while self.map.len() > self.capacity {
            let old = self.order.pop_front().expect("every remembered id is in the order");
            if self.map.remove(&old).is_some() {
                self.forget_upto(old.node, old.seq);
            }
        }
        self.compact_order();
    }

    /// Coordinator `node` settled every transaction of its epoch below
    /// `below`: forget them. Earlier epochs are untouched (a restarted
    /// coordinator no longer knows which of them are settled).
    pub fn retire(&mut self, node: NodeId, below: u64) {
        self.retire_all(&[(node, below)]);
    }

    /// `retire` for several coordinators' watermarks, in one pass over the
    /// remembered outcomes rather than one per coordinator: a replica
    /// applies every coordinator's watermark from one log entry per
    /// termination tick, and each pass visits every outcome in flight.
    pub fn retire_all(&mut self, watermarks: &[(NodeId, u64)]) {
        // Each watermark's retired ids: its epoch's, from the first below it.
        let mut retiring: Vec<(NodeId, std::ops::Range<u64>)> = watermarks
            .iter()
            .filter_map(|&(node, below)| {
                let first = below & !((1u64 << crate::txnids::COUNTER_BITS) - 1);
                (below > first + 1).then_some((node, first..below))
            })
            .collect();
        if retiring.is_empty() {
            return;
        }
        // Indexed by coordinator: the pass below asks once per outcome in
        // flight, and a scan of every coordinator's watermark for each
        // grew with the coordinators. `first[n]` is where node n's
        // watermarks start in `retiring` once sorted by node (usually one
        // each; a log entry may repeat a coordinator).
        retiring.sort_unstable_by_key(|(node, _)| *node);
        let slots = retiring.last().map_or(0, |(node, _)| node.index() + 1);
        let mut first = vec![usize::MAX; slots];
        for (i, (node, _)) in retiring.iter().enumerate().rev() {
            first[node.index()] = i;
        }
        let retired = |t: &TxnId| {
            let Some(&i) = first.get(t.node.index()).filter(|i| **i != usize::MAX) else { return false };
            retiring[i..].iter().take_while(|(node, _)| *node == t.node).any(|(_, ids)| ids.contains(&t.seq))
        };
        let map = &mut self.map;
        self.order.retain(|t| {
            let gone = retired(t);
            if gone {
                map.remove(t);
            }
            !gone
        });
        for (node, ids) in &retiring {
            self.forget_upto(*node, ids.end - 1);
        }
        self.compact_order();
    }

    fn forget_upto(&mut self, node: NodeId, seq: u64) {
        let w = self.forgotten_upto.entry((node, epoch(seq))).or_default();
        *w = (*w).max(seq);
    }

    /// Drops retired ids from the order once they are as many as the live.
    fn compact_order(&mut self) {
        if self.order.len() > 2 * self.map.len() + 64 {
            let map = &self.map;
            self.order.retain(|t| map.get(t).is_some());
        }
        debug_assert!(self.order.len() <= 2 * self.map.len() + 65);
    }

    /// `Some(Committed | Aborted | Forgotten)`, or `None` when this
    /// participant never decided the transaction.
    pub fn lookup(&self, txn: TxnId) -> Option<TxnStatus> {
        match self.map.get(&txn) {
            Some(Decision::Commit) => Some(TxnStatus::Committed),
            Some(Decision::Abort) => Some(TxnStatus::Aborted),
            None if self.forgotten_upto.get(&(txn.node, epoch(txn.seq))).is_some_and(|w| txn.seq <= *w) => {
                Some(TxnStatus::Forgotten)
            }
            None => None,
        }
    }

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

    fn t(node: u32, seq: u64) -> TxnId {
        TxnId { node: NodeId(node), seq }
    }

    #[test]
    fn commit_needs_every_yes_and_one_no_aborts() {
        let mut tally = Tally::new(&[ShardId(0), ShardId(1)]);
        assert_eq!(tally.yes(ShardId(0)), None);
        assert_eq!(tally.yes(ShardId(0)), None, "a duplicate vote changes nothing");
        assert_eq!(tally.yes(ShardId(1)), Some(Decision::Commit));
        assert_eq!(tally.no(ShardId(1)), None, "decided once");
        let mut tally = Tally::new(&[ShardId(0), ShardId(1)]);
        assert_eq!(tally.no(ShardId(1)), Some(Decision::Abort));
        assert_eq!(tally.yes(ShardId(0)), None);
    }

    #[test]
    fn termination_decides_only_on_certain_knowledge() {
        use TxnStatus::*;
        assert_eq!(termination_decision([Some(Prepared), Some(Aborted)]), Some(Decision::Abort));
        assert_eq!(termination_decision([Some(Prepared), Some(Committed)]), Some(Decision::Commit));
        assert_eq!(termination_decision([Some(Prepared), Some(Prepared)]), Some(Decision::Commit));
        assert_eq!(termination_decision([Some(Prepared), None]), None);
        assert_eq!(termination_decision([Some(Forgotten)]), None, "forgotten is not a vote");
    }

    #[test]
    fn outcomes_forget_the_oldest_and_say_so() {
        let mut o = Outcomes::new(2);
        o.record(t(1, 1), Decision::Commit);
        o.record(t(1, 2), Decision::Abort);
        o.record(t(2, 7), Decision::Commit);
        assert_eq!(o.len(), 2);
        assert_eq!(o.lookup(t(1, 1)), Some(TxnStatus::Forgotten));
        assert_eq!(o.lookup(t(1, 2)), Some(TxnStatus::Aborted));
        assert_eq!(o.lookup(t(1, 3)), None, "never seen, newer than the watermark");
        assert_eq!(o.lookup(t(2, 7)), Some(TxnStatus::Committed));
    }

    #[test]
    fn recording_an_undecided_outcome_without_a_lookup_keeps_what_record_keeps() {
        let (mut checked, mut unchecked) = (Outcomes::new(2), Outcomes::new(2));
        for (i, seq) in [1, 2, 3].into_iter().enumerate() {
            let d = if i % 2 == 0 { Decision::Commit } else { Decision::Abort };
            checked.record(t(1, seq), d);
            unchecked.record_undecided(t(1, seq), d);
        }
        for seq in 0..=4 {
            assert_eq!(checked.lookup(t(1, seq)), unchecked.lookup(t(1, seq)), "id {seq}");
        }
        assert_eq!(unchecked.lookup(t(1, 1)), Some(TxnStatus::Forgotten), "the capacity forgets alike");
    }

    const EPOCH: u64 = 1 << crate::txnids::COUNTER_BITS;

    #[test]
    fn a_coordinator_watermark_retires_its_settled_outcomes_and_no_others() {
        let mut o = Outcomes::new(1_000);
        let old_epoch = t(1, EPOCH + 5);
        o.record(old_epoch, Decision::Commit);
        for seq in 1..=10 {
            o.record(t(1, 2 * EPOCH + seq), Decision::Commit);
            o.record(t(2, 2 * EPOCH + seq), Decision::Abort);
        }
        o.retire(NodeId(1), 2 * EPOCH + 8);
        assert_eq!(o.len(), 1 + 3 + 10, "ids 1..=7 of node 1's epoch 2 are gone");
        assert_eq!(o.lookup(t(1, 2 * EPOCH + 7)), Some(TxnStatus::Forgotten));
        assert_eq!(o.lookup(t(1, 2 * EPOCH + 8)), Some(TxnStatus::Committed));
        assert_eq!(o.lookup(t(2, 2 * EPOCH + 1)), Some(TxnStatus::Aborted), "another coordinator's stay");
        assert_eq!(o.lookup(old_epoch), Some(TxnStatus::Committed), "an earlier epoch's stay");
        assert_eq!(o.lookup(t(1, EPOCH + 6)), None, "an earlier epoch's unseen ids are not forgotten");
        o.record(t(1, 2 * EPOCH + 3), Decision::Abort);
        assert_eq!(o.lookup(t(1, 2 * EPOCH + 3)), Some(TxnStatus::Forgotten), "a retired id is not remembered again");
    }

    #[test]
    fn retiring_several_watermarks_at_once_equals_retiring_each() {
        let mut each = Outcomes::new(1_000);
        for node in 1..=3 {
            each.record(t(node, EPOCH + 1), Decision::Commit);
            for seq in 1..=20 {
                each.record(t(node, 2 * EPOCH + seq), if seq % 3 == 0 { Decision::Abort } else { Decision::Commit });
            }
        }
        let mut all = each.clone();
        // Node 3's watermark sits at its epoch's start: nothing to retire.
        let watermarks = [(NodeId(1), 2 * EPOCH + 8), (NodeId(2), 2 * EPOCH + 15), (NodeId(3), 2 * EPOCH + 1)];
        for (node, below) in watermarks {
            each.retire(node, below);
        }
        all.retire_all(&watermarks);
        assert_eq!(all.len(), each.len());
        assert_eq!(all.order, each.order);
        assert_eq!(all.forgotten_upto, each.forgotten_upto);
        for node in 1..=3 {
            for seq in (EPOCH..EPOCH + 3).chain(2 * EPOCH..2 * EPOCH + 22) {
                assert_eq!(all.lookup(t(node, seq)), each.lookup(t(node, seq)), "node {node} seq {seq}");
            }
        }
        assert_eq!(all.lookup(t(2, 2 * EPOCH + 14)), Some(TxnStatus::Forgotten));
    }

    #[test]
    fn watermarks_out_of_node_order_or_repeating_a_coordinator_retire_as_each_alone_would() {
        let mut each = Outcomes::new(1_000);
        for node in [0, 2, 5, 9] {
            for epoch in 1..=2 {
                for seq in 1..=12 {
                    each.record(t(node, epoch * EPOCH + seq), Decision::Commit);
                }
            }
        }
        let mut all = each.clone();
        // Node 5 twice (two epochs of its ids in one entry), node 2 absent,
        // node 0 (the table's first slot) last.
        let watermarks =
            [(NodeId(9), 2 * EPOCH + 4), (NodeId(5), EPOCH + 7), (NodeId(5), 2 * EPOCH + 10), (NodeId(0), EPOCH + 3)];
        for (node, below) in watermarks {
            each.retire(node, below);
        }
        all.retire_all(&watermarks);
        assert_eq!(all.order, each.order);
        assert_eq!(all.forgotten_upto, each.forgotten_upto);
        for node in [0, 2, 5, 9] {
            for seq in (EPOCH..EPOCH + 14).chain(2 * EPOCH..2 * EPOCH + 14) {
                assert_eq!(all.lookup(t(node, seq)), each.lookup(t(node, seq)), "node {node} seq {seq}");
            }
        }
        assert_eq!(all.lookup(t(5, EPOCH + 6)), Some(TxnStatus::Forgotten), "node 5's first watermark counted");
        assert_eq!(all.lookup(t(5, 2 * EPOCH + 9)), Some(TxnStatus::Forgotten), "and its second");
        assert_eq!(
            all.lookup(t(2, 2 * EPOCH + 1)),
            Some(TxnStatus::Committed),
            "a node with no watermark keeps its own"
        );
    }

    #[test]
    fn outcomes_stay_bounded_by_the_transactions_in_flight_when_watermarks_advance() {
        let mut o = Outcomes::new(1_000_000);
        for seq in 1..=100_000u64 {
            o.record(t(1, EPOCH + seq), Decision::Commit);
            if seq % 100 == 0 {
                o.retire(NodeId(1), EPOCH + seq - 50);
            }
            assert!(o.len() <= 150, "{} remembered at {seq}", o.len());
            assert!(o.order.len() <= 2 * o.len() + 65);
        }
    }
}
