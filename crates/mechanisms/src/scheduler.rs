//! The deterministic scheduler of Calvin ("Calvin: Fast Distributed
//! Transactions for Partitioned Database Systems", §3.2) and SLOG (§3.4):
//! transactions arrive in log order with their whole lock sets, and each
//! asks for every lock at once, in that order. Every replica that reads the
//! same log grants the same locks in the same order, and since no
//! transaction waits for one later in the log, no deadlock can form. A
//! transaction holding all its locks is ready; the ready queue hands them
//! out in the order they became ready.
//!
//! [`ReadExchange`] is the other half of Calvin's execution (§3.2 phases
//! 3-5): each participant reads its local keys and sends the reads to the
//! other participants; a participant executes once it has everyone's.

use super::locks::{Acquire, LockMode, LockTable};
use meridian_core::{Key, ShardId, TxnId};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[derive(Clone, Debug)]
struct Waiting {
    keys: Vec<(Key, LockMode)>,
    missing: usize,
}

/// Locks granted in log order, and the transactions ready to run. A
/// request is named by `I`: a transaction, or one piece of one (SLOG's
/// LockOnlyTxns lock a multi-home transaction's keys at several places of
/// the log, one per home region).
#[derive(Clone, Debug)]
pub struct Scheduler<I = TxnId> {
    locks: LockTable<I, u64>,
    txns: FxHashMap<I, Waiting>,
    ready: VecDeque<I>,
    last_pos: Option<u64>,
}

impl<I: Copy + Eq + std::hash::Hash> Default for Scheduler<I> {
    fn default() -> Self {
        Scheduler { locks: LockTable::default(), txns: FxHashMap::default(), ready: VecDeque::new(), last_pos: None }
    }
}

impl<I: Copy + Eq + std::hash::Hash + std::fmt::Debug> Scheduler<I> {
    pub fn new() -> Scheduler<I> {
        Scheduler::default()
    }

    /// Admits the transaction at log position `pos` (increasing from call
    /// to call) with its lock set; a key named twice takes the stronger
    /// mode. Returns whether it is ready at once.
    pub fn admit(&mut self, id: I, pos: u64, keys: &[(Key, LockMode)]) -> bool {
        assert!(self.last_pos.is_none_or(|p| pos > p), "transactions arrive in log order");
        assert!(!self.txns.contains_key(&id), "admitted twice");
        self.last_pos = Some(pos);
        let mut set: BTreeMap<Key, LockMode> = BTreeMap::new();
        for (k, m) in keys {
            let e = set.entry(*k).or_insert(*m);
            if *m == LockMode::Exclusive {
                *e = LockMode::Exclusive;
            }
        }
        let keys: Vec<(Key, LockMode)> = set.into_iter().collect();
        let mut missing = 0;
        for (k, m) in &keys {
            if let Acquire::Blocked(_) = self.locks.try_acquire(*k, id, *m) {
                self.locks.enqueue(*k, id, *m, pos);
                missing += 1;
            }
        }
        self.txns.insert(id, Waiting { keys, missing });
        if missing == 0 {
            self.ready.push_back(id);
        }
        missing == 0
    }

    /// The next transaction holding all its locks.
    pub fn pop_ready(&mut self) -> Option<I> {
        self.ready.pop_front()
    }

    /// A transaction finished: its locks go to the next in log order.
    pub fn finish(&mut self, id: I) {
        let w = self.txns.remove(&id).expect("finishing an admitted transaction");
        assert_eq!(w.missing, 0, "only a transaction holding all its locks finishes");
        for (k, _) in &w.keys {
            for granted in self.locks.release(*k, id) {
                let g = self.txns.get_mut(&granted).expect("waiters are admitted");
                g.missing -= 1;
                if g.missing == 0 {
                    self.ready.push_back(granted);
                }
            }
        }
    }

    /// Admitted transactions not finished.
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }
}

/// One participant's reads of a transaction.
pub type Reads<V> = Vec<(Key, V)>;

/// Every participant's reads of a transaction, and the latest log
/// position any participant read at.
pub type Exchanged<V> = (Reads<V>, u64);

/// Reads exchanged among a transaction's participants. Each participant's
/// reads come with the log position it read at (SLOG: a multi-home
/// transaction's participants hold different LockOnlyTxns, and the latest
/// one says when every participant is past it).
#[derive(Clone, Debug)]
pub struct ReadExchange<V> {
    /// Transactions this participant waits on: who has not sent yet, the
    /// reads so far, the tick it last asked for them, and the latest
    /// position read at so far.
    waiting: BTreeMap<TxnId, (BTreeSet<ShardId>, Reads<V>, u64, u64)>,
    /// Ticks of [`ReadExchange::overdue`] so far.
    ticks: u64,
    /// Reads that came before this participant scheduled the transaction.
    early: BTreeMap<TxnId, Vec<(ShardId, Reads<V>, u64)>>,
    max_early: usize,
}

impl<V> ReadExchange<V> {
    pub fn new(max_early: usize) -> ReadExchange<V> {
        ReadExchange { waiting: BTreeMap::new(), ticks: 0, early: BTreeMap::new(), max_early }
    }

    /// This participant runs `txn` with `own` reads, read at `pos`, and
    /// needs those of `from` (the other participants); returns every read
    /// if none is missing.
    pub fn expect(&mut self, txn: TxnId, from: &[ShardId], own: Vec<(Key, V)>, pos: u64) -> Option<Exchanged<V>> {
        let mut left: BTreeSet<ShardId> = from.iter().copied().collect();
        let (mut reads, mut latest) = (own, pos);
        for (shard, r, at) in self.early.remove(&txn).unwrap_or_default() {
            if left.remove(&shard) {
                reads.extend(r);
                latest = latest.max(at);
            }
        }
        if left.is_empty() {
            return Some((reads, latest));
        }
        self.waiting.insert(txn, (left, reads, self.ticks, latest));
        None
    }

    /// `shard`'s reads for `txn`; returns every read once complete.
    /// Duplicates are ignored; reads for a transaction not yet expected
    /// are kept (up to the bound: beyond it the sender's re-send is
    /// needed).
    pub fn receive(&mut self, txn: TxnId, shard: ShardId, reads: Vec<(Key, V)>, pos: u64) -> Option<Exchanged<V>> {
        let Some((left, got, _, latest)) = self.waiting.get_mut(&txn) else {
            let fits = self.early.len() < self.max_early || self.early.contains_key(&txn);
            let early = self.early.entry(txn);
            if fits {
                let list = early.or_default();
                if !list.iter().any(|(s, _, _)| *s == shard) {
                    list.push((shard, reads, pos));
                }
            }
            return None;
        };
        if !left.remove(&shard) {
            return None;
        }
        got.extend(reads);
        *latest = (*latest).max(pos);
        if left.is_empty() {
            return self.waiting.remove(&txn).map(|(_, r, _, latest)| (r, latest));
        }
        None
    }

    /// One tick of the participant's timer: the transactions whose reads
    /// have been missing for `retry_ticks` ticks since it began waiting or
    /// last asked (at most `CHECKED_MAX`), each with the participants to
    /// ask again — only those whose reads are still missing.
    pub fn overdue(&mut self, retry_ticks: u64) -> Vec<(TxnId, Vec<ShardId>)> {
        self.ticks += 1;
        let now = self.ticks;
        let mut out = Vec::new();
        for (txn, (left, _, asked, _)) in self.waiting.iter_mut() {
            if out.len() == meridian_core::process::CHECKED_MAX {
                break;
            }
            if now >= *asked + retry_ticks {
                *asked = now;
                out.push((*txn, left.iter().copied().collect()));
            }
        }
        out
    }

    /// Transactions waiting for reads, and early arrivals held.
    pub fn pending(&self) -> (usize, usize) {
        (self.waiting.len(), self.early.len())
    }
}

/// A digest of a copy's state (or of what it applied), for the end-of-run
/// comparison of copies (`meridian_core::CopyState`): FNV-1a over the
/// value's wire encoding, so equal states hash equal on every node.
pub fn digest<T: serde::Serialize + ?Sized>(value: &T) -> u64 {
    meridian_core::ids::fnv1a(&postcard::to_stdvec(value).expect("a state encodes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::NodeId;

    fn t(seq: u64) -> TxnId {
        TxnId { node: NodeId(1), seq }
    }
    use LockMode::{Exclusive as X, Shared as S};

    fn run_all(s: &mut Scheduler) -> Vec<u64> {
        let mut order = Vec::new();
        while let Some(id) = s.pop_ready() {
            order.push(id.seq);
            s.finish(id);
        }
        order
    }

    #[test]
    fn conflicting_transactions_run_in_log_order_and_readers_share() {
        let mut s = Scheduler::new();
        assert!(s.admit(t(1), 1, &[(Key(1), X)]));
        assert!(!s.admit(t(2), 2, &[(Key(1), S), (Key(2), X)]));
        assert!(!s.admit(t(3), 3, &[(Key(1), S)]), "behind 1; shares with 2 once granted");
        assert!(s.admit(t(4), 4, &[(Key(9), X)]), "no conflict: ready at once");
        assert_eq!(s.pop_ready(), Some(t(1)));
        s.finish(t(1));
        assert_eq!(s.pop_ready(), Some(t(4)));
        s.finish(t(4));
        assert_eq!((s.pop_ready(), s.pop_ready()), (Some(t(2)), Some(t(3))), "two readers at once");
    }

    #[test]
    fn no_deadlock_forms_whatever_the_lock_sets() {
        // Opposite key orders that deadlock under incremental locking.
        let mut s = Scheduler::new();
        for seq in 1..=40 {
            let (a, b) = if seq % 2 == 0 { (Key(1), Key(2)) } else { (Key(2), Key(1)) };
            s.admit(t(seq), seq, &[(a, X), (b, X), (Key(seq % 3), S)]);
        }
        let order = run_all(&mut s);
        assert_eq!(order, (1..=40).collect::<Vec<_>>(), "all run, in log order");
        assert!(s.is_empty());
    }

    #[test]
    fn replicas_reading_the_same_log_ready_the_same_order() {
        let log: Vec<(u64, Vec<(Key, LockMode)>)> = (1..=30)
            .map(|seq| (seq, vec![(Key(seq * 7 % 5), if seq % 3 == 0 { S } else { X }), (Key(seq % 4 + 10), S)]))
            .collect();
        let replay = || {
            let mut s = Scheduler::new();
            for (seq, keys) in &log {
                s.admit(t(*seq), *seq, keys);
            }
            run_all(&mut s)
        };
        assert_eq!(replay(), replay());
    }

    #[test]
    fn a_participant_runs_once_it_has_every_participants_reads_and_knows_the_latest_position_read_at() {
        let mut x: ReadExchange<u64> = ReadExchange::new(8);
        assert!(x.receive(t(1), ShardId(2), vec![(Key(20), 2)], 9).is_none(), "early: kept");
        assert!(x.expect(t(1), &[ShardId(2), ShardId(3)], vec![(Key(10), 1)], 4).is_none());
        assert!(x.receive(t(1), ShardId(2), vec![(Key(20), 2)], 50).is_none(), "a duplicate");
        let (all, latest) = x.receive(t(1), ShardId(3), vec![(Key(30), 3)], 7).expect("complete");
        assert_eq!(all, vec![(Key(10), 1), (Key(20), 2), (Key(30), 3)]);
        assert_eq!(latest, 9, "the early reads' position counts; the duplicate's does not");
        assert_eq!(x.pending(), (0, 0));
    }

    #[test]
    fn a_participant_asks_again_only_for_reads_still_missing_after_the_retry() {
        let mut x: ReadExchange<u64> = ReadExchange::new(8);
        assert!(x.expect(t(1), &[ShardId(2), ShardId(3)], vec![], 0).is_none());
        x.receive(t(1), ShardId(2), vec![], 0);
        assert!(x.overdue(2).is_empty(), "not before the retry");
        assert_eq!(x.overdue(2), vec![(t(1), vec![ShardId(3)])], "only the shard still missing");
        assert!(x.overdue(2).is_empty(), "asked again: the retry starts over");
        x.receive(t(1), ShardId(3), vec![], 0);
        assert!(x.overdue(2).is_empty() && x.overdue(2).is_empty(), "complete: nothing to ask");
    }

    #[test]
    fn early_reads_are_held_only_up_to_the_bound() {
        let mut x: ReadExchange<u64> = ReadExchange::new(1);
        x.receive(t(1), ShardId(2), vec![], 0);
        x.receive(t(2), ShardId(2), vec![], 0);
        assert_eq!(x.pending(), (0, 1));
        assert!(x.expect(t(1), &[ShardId(2)], vec![], 0).is_some(), "the held one completes it");
        assert!(x.expect(t(2), &[ShardId(2)], vec![], 0).is_none(), "the other waits for a re-send");
    }
}
