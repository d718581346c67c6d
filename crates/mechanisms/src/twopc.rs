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

use crate::seq_index::{COORDINATORS_MAX, find_seq};
use crate::small_map::SmallMap;
use meridian_core::{NodeId, ShardId, TxnId};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

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
    /// A few participants: a sorted vector, not a B-tree.
    pending: SmallMap<P, ()>,
    decided: Option<Decision>,
}

impl<P: Copy + Ord> Tally<P> {
    pub fn new(participants: &[P]) -> Tally<P> {
        assert!(!participants.is_empty(), "a transaction has participants");
        Tally { pending: participants.iter().map(|p| (*p, ())).collect(), decided: None }
    }

    /// A yes vote; returns the decision when it completes the tally.
    pub fn yes(&mut self, participant: P) -> Option<Decision> {
        if self.decided.is_some() || self.pending.remove(&participant).is_none() || !self.pending.is_empty() {
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
        self.pending.keys().copied()
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
///
/// Outcomes are kept per coordinator in sequence order: a watermark
/// retires a range of one coordinator's entries in one piece, where a
/// table of every outcome keyed by id needed a pass over all of them, and
/// a replica applies every coordinator's watermark on each termination
/// tick.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Outcomes {
    /// By coordinator node index.
    by_node: Vec<Remembered>,
    /// Outcomes remembered, over every coordinator.
    len: usize,
    capacity: usize,
    /// The next insertion's place in insertion order (the capacity evicts
    /// by it).
    next_stamp: u64,
}

/// One coordinator's remembered outcomes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Remembered {
    /// `(seq, decision, stamp)` sorted by sequence number; the stamp is the
    /// entry's place in insertion order.
    decided: VecDeque<(u64, Decision, u64)>,
    /// Per epoch: every id at or below is decided (or was never started),
    /// remembered or not.
    forgotten_upto: SmallMap<u64, u64>,
}

impl Remembered {
    /// Where `seq` is, or would go, in `decided`. The ids asked about are
    /// mostly among the newest (a prepare or decision being applied):
    /// `find_seq` gallops back from the end.
    fn find(&self, seq: u64) -> Result<usize, usize> {
        find_seq(&self.decided, seq, |e| e.0)
    }
}

/// Epoch of a sequence number (see `crate::txnids`).
fn epoch(seq: u64) -> u64 {
    crate::txnids::epoch_of(seq)
}

impl Outcomes {
    pub fn new(capacity: usize) -> Outcomes {
        assert!(capacity > 0);
        Outcomes { by_node: Vec::new(), len: 0, capacity, next_stamp: 0 }
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

    fn remembered_mut(&mut self, node: NodeId) -> &mut Remembered {
        let i = node.index();
        assert!(i < COORDINATORS_MAX, "coordinator {node} past the {COORDINATORS_MAX} the table holds");
        if self.by_node.len() <= i {
            self.by_node.resize_with(i + 1, Remembered::default);
        }
        &mut self.by_node[i]
    }

    fn insert(&mut self, txn: TxnId, decision: Decision) {
        let stamp = self.next_stamp;
        let r = self.remembered_mut(txn.node);
        match r.find(txn.seq) {
            Ok(i) => r.decided[i].1 = decision,
            Err(i) => {
                r.decided.insert(i, (txn.seq, decision, stamp));
                self.len += 1;
                self.next_stamp += 1;
            }
        }
        while self.len > self.capacity {
            self.evict_oldest();
        }
    }

    /// Forgets the oldest remembered outcome: of the coordinators' lowest
    /// ids, the one recorded first (each coordinator's outcomes leave in
    /// sequence order, so its forgotten watermark never passes one still
    /// remembered).
    fn evict_oldest(&mut self) {
        let node = (0..self.by_node.len())
            .filter_map(|n| self.by_node[n].decided.front().map(|e| (e.2, n)))
            .min()
            .map(|(_, n)| n)
            .expect("a table over its capacity remembers something");
        let (seq, _, _) = self.by_node[node].decided.pop_front().expect("chosen for its first entry");
        self.len -= 1;
        self.forget_upto(NodeId(node as u32), seq);
    }

    /// Coordinator `node` settled every transaction of its epoch below
    /// `below`: forget them. Earlier epochs are untouched (a restarted
    /// coordinator no longer knows which of them are settled).
    pub fn retire(&mut self, node: NodeId, below: u64) {
        self.retire_all(&[(node, below)]);
    }

    /// `retire` for several coordinators' watermarks (a replica applies
    /// every coordinator's from one log entry per termination tick). Each
    /// retires one range of its coordinator's ids: their epoch's, from the
    /// first below the watermark.
    pub fn retire_all(&mut self, watermarks: &[(NodeId, u64)]) {
        for &(node, below) in watermarks {
            let first = below & !((1u64 << crate::txnids::COUNTER_BITS) - 1);
            if below <= first + 1 {
                continue; // the epoch's start: nothing below it
            }
            let r = self.remembered_mut(node);
            let from = r.find(first).unwrap_or_else(|i| i);
            let to = r.find(below).unwrap_or_else(|i| i);
            r.decided.drain(from..to);
            self.len -= to - from;
            self.forget_upto(node, below - 1);
        }
    }

    fn forget_upto(&mut self, node: NodeId, seq: u64) {
        let w = self.remembered_mut(node).forgotten_upto.get_or_insert_with(epoch(seq), || 0);
        *w = (*w).max(seq);
    }

    /// `Some(Committed | Aborted | Forgotten)`, or `None` when this
    /// participant never decided the transaction.
    pub fn lookup(&self, txn: TxnId) -> Option<TxnStatus> {
        let r = self.by_node.get(txn.node.index())?;
        match r.find(txn.seq) {
            Ok(i) => Some(match r.decided[i].1 {
                Decision::Commit => TxnStatus::Committed,
                Decision::Abort => TxnStatus::Aborted,
            }),
            Err(_) => {
                r.forgotten_upto.get(&epoch(txn.seq)).is_some_and(|w| txn.seq <= *w).then_some(TxnStatus::Forgotten)
            }
        }
    }

    pub fn len(&self) -> usize {
        debug_assert_eq!(self.len, self.by_node.iter().map(|r| r.decided.len()).sum::<usize>());
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

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
    fn a_tally_waits_for_each_participant_once_and_lists_them_in_order() {
        let mut tally = Tally::new(&[ShardId(2), ShardId(0), ShardId(2), ShardId(1)]);
        assert!(tally.pending().eq([ShardId(0), ShardId(1), ShardId(2)]), "sorted, each once");
        assert_eq!(tally.yes(ShardId(1)), None);
        assert_eq!(tally.yes(ShardId(7)), None, "a vote from outside the tally counts for nothing");
        assert!(tally.pending().eq([ShardId(0), ShardId(2)]));
        assert_eq!(tally.yes(ShardId(2)), None);
        assert_eq!(tally.yes(ShardId(0)), Some(Decision::Commit));
        assert_eq!(tally.pending().count(), 0);
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
        assert_eq!(all.by_node, each.by_node);
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
        assert_eq!(all.by_node, each.by_node);
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
        }
    }

    /// The table as plainly as it can be said: every outcome keyed by id
    /// with its insertion stamp, and the forgotten watermarks.
    #[derive(Default)]
    struct Model {
        decided: BTreeMap<TxnId, (Decision, u64)>,
        forgotten: BTreeMap<(NodeId, u64), u64>,
        stamp: u64,
    }

    impl Model {
        fn lookup(&self, txn: TxnId) -> Option<TxnStatus> {
            match self.decided.get(&txn) {
                Some((Decision::Commit, _)) => Some(TxnStatus::Committed),
                Some((Decision::Abort, _)) => Some(TxnStatus::Aborted),
                None => self
                    .forgotten
                    .get(&(txn.node, epoch(txn.seq)))
                    .is_some_and(|w| txn.seq <= *w)
                    .then_some(TxnStatus::Forgotten),
            }
        }

        fn forget(&mut self, node: NodeId, seq: u64) {
            let w = self.forgotten.entry((node, epoch(seq))).or_default();
            *w = (*w).max(seq);
        }

        fn record(&mut self, txn: TxnId, d: Decision, capacity: usize) {
            if self.lookup(txn) == Some(TxnStatus::Forgotten) {
                return;
            }
            match self.decided.get_mut(&txn) {
                Some(e) => e.0 = d,
                None => {
                    self.decided.insert(txn, (d, self.stamp));
                    self.stamp += 1;
                }
            }
            while self.decided.len() > capacity {
                // Each coordinator's lowest id; of those, the first recorded.
                let mut lowest: BTreeMap<NodeId, (TxnId, u64)> = BTreeMap::new();
                for (t, (_, stamp)) in &self.decided {
                    lowest.entry(t.node).or_insert((*t, *stamp));
                }
                let (t, _) = lowest.values().min_by_key(|(_, stamp)| *stamp).copied().unwrap();
                self.decided.remove(&t);
                self.forget(t.node, t.seq);
            }
        }

        fn retire(&mut self, node: NodeId, below: u64) {
            let first = below & !(EPOCH - 1);
            if below <= first + 1 {
                return;
            }
            self.decided.retain(|t, _| t.node != node || !(first..below).contains(&t.seq));
            self.forget(node, below - 1);
        }
    }

    #[test]
    fn it_answers_as_a_plain_table_of_every_outcome_does() {
        // Ids decided out of order, repeated decisions, watermarks of
        // several epochs and a capacity small enough to evict often.
        let mut state = 11u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let capacity = 12;
        let (mut table, mut model) = (Outcomes::new(capacity), Model::default());
        for step in 0..20_000 {
            let node = (next() % 4) as u32;
            let seq = (1 + next() % 2) * EPOCH + 1 + next() % 40;
            let txn = t(node, seq);
            match next() % 6 {
                0 => {
                    table.retire(NodeId(node), seq);
                    model.retire(NodeId(node), seq);
                }
                1 if table.lookup(txn).is_none() => {
                    table.record_undecided(txn, Decision::Abort);
                    model.record(txn, Decision::Abort, capacity);
                }
                n => {
                    let d = if n % 2 == 0 { Decision::Commit } else { Decision::Abort };
                    table.record(txn, d);
                    model.record(txn, d, capacity);
                }
            }
            assert_eq!(table.len(), model.decided.len(), "step {step}");
            for probe in [txn, t(node, seq + 1), t(node, seq.saturating_sub(1)), t((node + 1) % 4, seq)] {
                assert_eq!(table.lookup(probe), model.lookup(probe), "{probe} at step {step}");
            }
        }
    }
}
