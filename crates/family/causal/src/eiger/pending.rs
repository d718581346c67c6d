//! A partition's prepared, uncommitted transactions (NOC-NOC Algorithm 6
//! line 4, `pending`), with what Eiger's 2PC variant needs at the
//! coordinator: the cohorts' prepare stamps (line 17), from which the
//! commit stamp is their maximum (line 18).
//!
//! Bounded: `pending_max` transactions (a partition sheds prepares beyond),
//! and as many votes that arrived before their transaction's prepare
//! (the client's prepare to the coordinator and a cohort's vote race; a
//! vote dropped at the bound is sent again by its cohort after `ctp_ms`).

use super::messages::PendingTxn;
use meridian_core::ShardId;
use meridian_readatomic::ramp::Ts;
use std::collections::{BTreeMap, BTreeSet};

struct Entry {
    txn: PendingTxn,
    /// At the coordinator: the cohorts' prepare stamps so far.
    votes: BTreeMap<ShardId, Ts>,
    /// When the transaction was prepared or last asked about.
    asked_ns: u64,
}

/// A transaction pending for `ctp_ms`: whom to ask about it.
pub struct Question {
    pub txn: Ts,
    pub t_prep: Ts,
    /// At a cohort: the coordinator; at the coordinator: the cohorts whose
    /// votes are missing.
    pub ask: Vec<ShardId>,
}

pub struct Pending {
    me: ShardId,
    txns: BTreeMap<Ts, Entry>,
    /// `(t_prep, txn)` of every pending transaction: the oldest bounds the
    /// latest safe time (line 43).
    by_prep: BTreeSet<(Ts, Ts)>,
    early: BTreeMap<Ts, BTreeMap<ShardId, Ts>>,
    max: usize,
}

impl Pending {
    pub fn new(me: ShardId, max: usize) -> Pending {
        assert!(max > 0, "a partition holds at least one pending transaction");
        Pending { me, txns: BTreeMap::new(), by_prep: BTreeSet::new(), early: BTreeMap::new(), max }
    }

    pub fn is_full(&self) -> bool {
        self.txns.len() >= self.max
    }

    pub fn contains(&self, txn: Ts) -> bool {
        self.txns.contains_key(&txn)
    }

    pub fn get(&self, txn: Ts) -> Option<&PendingTxn> {
        self.txns.get(&txn).map(|e| &e.txn)
    }

    /// Line 43: the smallest prepare stamp pending.
    pub fn oldest(&self) -> Option<Ts> {
        self.by_prep.first().map(|(t, _)| *t)
    }

    /// Line 30: `pending[txnid] ← t_pend`; votes that came early join it.
    pub fn add(&mut self, txn: Ts, p: PendingTxn, now_ns: u64) {
        assert!(!self.contains(txn), "a transaction is prepared once");
        self.by_prep.insert((p.t_prep, txn));
        let votes = self.early.remove(&txn).unwrap_or_default();
        self.txns.insert(txn, Entry { txn: p, votes, asked_ns: now_ns });
    }

    /// Line 39: `pending.remove(txnid)`, and any votes kept for it (a
    /// transaction decided without ever being prepared here).
    pub fn remove(&mut self, txn: Ts) -> Option<PendingTxn> {
        self.early.remove(&txn);
        let e = self.txns.remove(&txn)?;
        self.by_prep.remove(&(e.txn.t_prep, txn));
        Some(e.txn)
    }

    /// Line 17, at the coordinator: a cohort's prepare stamp. A vote for a
    /// transaction not prepared here yet is kept for it, within the bound.
    pub fn vote(&mut self, txn: Ts, from: ShardId, t_prep: Ts) {
        match self.txns.get_mut(&txn) {
            Some(e) => {
                e.votes.insert(from, t_prep);
            }
            None if self.early.len() < self.max || self.early.contains_key(&txn) => {
                self.early.entry(txn).or_default().insert(from, t_prep);
            }
            None => {}
        }
    }

    /// Line 18, at the coordinator: the commit stamp, once every cohort
    /// voted — the largest prepare stamp.
    pub fn decision(&self, txn: Ts) -> Option<Ts> {
        let e = self.txns.get(&txn)?;
        debug_assert_eq!(e.txn.coordinator, self.me, "only the coordinator decides");
        let cohorts = e.txn.participants.iter().filter(|s| **s != self.me);
        let mut t_com = e.txn.t_prep;
        for s in cohorts {
            t_com = t_com.max(*e.votes.get(s)?);
        }
        Some(t_com)
    }

    /// The transactions pending for `ctp_ns` since prepared or last asked
    /// about (asked about again `ctp_ns` later).
    pub fn due(&mut self, now_ns: u64, ctp_ns: u64) -> Vec<Question> {
        let mut out = Vec::new();
        for (txn, e) in self.txns.iter_mut() {
            if e.asked_ns.saturating_add(ctp_ns) > now_ns {
                continue;
            }
            e.asked_ns = now_ns;
            let ask = if e.txn.coordinator == self.me {
                let missing = e.txn.participants.iter().filter(|s| **s != self.me && !e.votes.contains_key(s));
                missing.copied().collect()
            } else {
                vec![e.txn.coordinator]
            };
            out.push(Question { txn: *txn, t_prep: e.txn.t_prep, ask });
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    pub fn len(&self) -> usize {
        self.txns.len()
    }

    pub fn early_len(&self) -> usize {
        self.early.len()
    }

    /// For a checkpoint (votes are not durable: cohorts send them again).
    pub fn snapshot(&self) -> Vec<(Ts, PendingTxn)> {
        self.txns.iter().map(|(t, e)| (*t, e.txn.clone())).collect()
    }

    pub fn check_invariants(&self) {
        assert!(self.txns.len() <= self.max, "pending transactions within their bound");
        assert!(self.early.len() <= self.max, "early votes within their bound");
        assert_eq!(self.txns.len(), self.by_prep.len(), "one stamp per pending transaction");
        for (txn, e) in self.txns.iter().take(meridian_core::process::CHECKED_MAX) {
            assert!(self.by_prep.contains(&(e.txn.t_prep, *txn)), "a pending transaction is ordered by its stamp");
            assert!(e.txn.participants.contains(&self.me), "a partition holds only its own transactions");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn txn(t_prep: u64, coordinator: u32) -> PendingTxn {
        PendingTxn {
            t_prep: Ts(t_prep),
            keys: Arc::from([]),
            coordinator: ShardId(coordinator),
            participants: vec![ShardId(0), ShardId(1), ShardId(2)],
        }
    }

    /// Algorithm 6 lines 17-18: the coordinator commits at the largest
    /// prepare stamp, once every cohort's is in — votes that came before
    /// the client's prepare count.
    #[test]
    fn the_commit_stamp_is_the_largest_prepare_stamp_once_every_cohort_voted() {
        let mut p = Pending::new(ShardId(0), 10);
        p.vote(Ts(7), ShardId(1), Ts(30));
        p.add(Ts(7), txn(20, 0), 0);
        assert_eq!(p.decision(Ts(7)), None, "shard 2 has not voted");
        p.vote(Ts(7), ShardId(2), Ts(10));
        assert_eq!(p.decision(Ts(7)), Some(Ts(30)));
        assert_eq!(p.oldest(), Some(Ts(20)));
        assert!(p.remove(Ts(7)).is_some());
        assert_eq!(p.oldest(), None);
        p.vote(Ts(8), ShardId(1), Ts(40));
        assert_eq!(p.early_len(), 1);
        assert!(p.remove(Ts(8)).is_none(), "aborted before it was prepared here");
        assert_eq!(p.early_len(), 0, "its early vote goes with it");
        p.check_invariants();
    }

    #[test]
    fn a_transaction_pending_too_long_is_asked_about_at_its_coordinator_or_missing_cohorts() {
        let mut p = Pending::new(ShardId(0), 10);
        p.add(Ts(1), txn(5, 1), 0);
        p.add(Ts(2), txn(6, 0), 0);
        p.vote(Ts(2), ShardId(2), Ts(9));
        assert!(p.due(50, 100).is_empty());
        let q = p.due(100, 100);
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].ask, vec![ShardId(1)], "a cohort asks its coordinator");
        assert_eq!(q[1].ask, vec![ShardId(1)], "the coordinator asks the cohort that did not vote");
        assert!(p.due(150, 100).is_empty(), "asked again only ctp later");
    }
}
