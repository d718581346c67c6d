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

/// The coordinator's count of prepare votes.
#[derive(Clone, Debug)]
pub struct Tally {
    pending: BTreeSet<ShardId>,
    decided: Option<Decision>,
}

impl Tally {
    pub fn new(participants: &[ShardId]) -> Tally {
        assert!(!participants.is_empty(), "a transaction has participants");
        Tally { pending: participants.iter().copied().collect(), decided: None }
    }

    /// A yes vote; returns the decision when it completes the tally.
    pub fn yes(&mut self, shard: ShardId) -> Option<Decision> {
        if self.decided.is_some() || !self.pending.remove(&shard) || !self.pending.is_empty() {
            return None;
        }
        self.decided = Some(Decision::Commit);
        self.decided
    }

    /// A no vote decides abort (once).
    pub fn no(&mut self, _shard: ShardId) -> Option<Decision> {
        if self.decided.is_some() {
            return None;
        }
        self.decided = Some(Decision::Abort);
        self.decided
    }

    pub fn pending(&self) -> impl Iterator<Item = ShardId> + '_ {
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

/// Remembered outcomes, at most `capacity` of them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Outcomes {
    map: CowMap<TxnId, Decision>,
    order: VecDeque<TxnId>,
    forgotten_upto: BTreeMap<NodeId, u64>,
    capacity: usize,
}

impl Outcomes {
    pub fn new(capacity: usize) -> Outcomes {
        assert!(capacity > 0);
        Outcomes { map: CowMap::new(), order: VecDeque::new(), forgotten_upto: BTreeMap::new(), capacity }
    }

    pub fn record(&mut self, txn: TxnId, decision: Decision) {
        if self.map.insert(txn, decision).is_none() {
            self.order.push_back(txn);
        }
        while self.order.len() > self.capacity {
            let old = self.order.pop_front().expect("non-empty");
            self.map.remove(&old);
            let w = self.forgotten_upto.entry(old.node).or_default();
            *w = (*w).max(old.seq);
        }
    }

    /// `Some(Committed | Aborted | Forgotten)`, or `None` when this
    /// participant never decided the transaction.
    pub fn lookup(&self, txn: TxnId) -> Option<TxnStatus> {
        match self.map.get(&txn) {
            Some(Decision::Commit) => Some(TxnStatus::Committed),
            Some(Decision::Abort) => Some(TxnStatus::Aborted),
            None if self.forgotten_upto.get(&txn.node).is_some_and(|w| txn.seq <= *w) => Some(TxnStatus::Forgotten),
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
}
