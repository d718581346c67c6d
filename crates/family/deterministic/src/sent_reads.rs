//! The reads a participant sent to its region's peers, kept to send again
//! when one lost them (a cut, a crash), for Calvin and SLOG alike (Calvin
//! §3.2 phase 3; §5: a recovering replica replays the log and its peers
//! must serve the reads again).
//!
//! A peer needs a transaction's reads until it has a durable checkpoint
//! past the transaction's place: before that, a crash makes it run the
//! transaction again. The region's sequencer knows how far every replica
//! of the region is durable, and forgets the log below what they all are
//! past (`crate::readers`): reads at or past the first position it keeps
//! are kept, whatever their number, so they are bounded as the region's
//! log is. Older ones are dropped beyond the newest `kept_min`; a peer
//! still behind them — past which the sequencer forgot the log because
//! another copy of its shard is past them — catches up from that copy's
//! checkpoint (`ReadsGone`, `crate::catch_up`).
//!
//! Each entry is kept by `until`, the place past which no participant runs
//! the transaction: its place in the log (Calvin, whose participants meet
//! at one place), or the place of its last LockOnlyTxn at any participant
//! (SLOG, whose participants hold different LockOnlyTxns of a multi-home
//! transaction). Entries are dropped in the order they were kept, which is
//! nearly `until` order: one whose place is passed may wait behind an
//! earlier-kept one whose place is not, but none is dropped early.

use meridian_core::TxnId;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::sync::Arc;

/// A transaction's place in the region's log: the position and its index
/// in the batch placed there (Calvin and SLOG alike).
pub type At = (u64, u32);

#[derive(Clone, Debug)]
pub struct SentReads<R> {
    /// Each transaction's reads, with the place they are kept until
    /// (looked up only, never iterated).
    kept: FxHashMap<TxnId, (At, Arc<R>)>,
    /// The transactions in the order their reads were kept: their place,
    /// nearly in order (Calvin finishes in log order but for a few), so
    /// the front is the first to drop. A later place for one queues it
    /// again and leaves its earlier entry stale, skipped when it comes to
    /// the front.
    order: VecDeque<(At, TxnId)>,
    /// Reads kept however old: the newest this many.
    kept_min: usize,
    /// The region is durably past every position before this one.
    forgotten_below: u64,
}

impl<R> SentReads<R> {
    pub fn new(kept_min: usize) -> SentReads<R> {
        SentReads { kept: FxHashMap::default(), order: VecDeque::new(), kept_min, forgotten_below: 0 }
    }

    /// The reads sent for `txn`, needed until `until`; replaces what was
    /// kept for it (a later place, once known).
    pub fn insert(&mut self, txn: TxnId, until: At, reads: Arc<R>) {
        if self.kept.insert(txn, (until, reads)).is_none_or(|(old, _)| old != until) {
            self.order.push_back((until, txn));
        }
        self.trim();
    }

    /// The reads kept for `txn`, with the place they are needed until.
    pub fn get(&self, txn: TxnId) -> Option<(At, &Arc<R>)> {
        self.kept.get(&txn).map(|(until, reads)| (*until, reads))
    }

    /// The region is past `base`: every replica of it (Calvin: or another
    /// copy of its shard it can catch up from) has a durable checkpoint
    /// past it, as its sequencer says.
    pub fn past(&mut self, base: u64) {
        if base > self.forgotten_below {
            self.forgotten_below = base;
            self.trim();
        }
    }

    /// Whether `entry` of `order` is the one its transaction is kept by.
    fn live(&self, (until, txn): (At, TxnId)) -> bool {
        self.kept.get(&txn).is_some_and(|(u, _)| *u == until)
    }

    /// Drops the oldest reads the region no longer needs, beyond the
    /// newest `kept_min`, from the front (stale entries on the way).
    fn trim(&mut self) {
        while let Some(&(until, txn)) = self.order.front() {
            if self.live((until, txn)) {
                if self.kept.len() <= self.kept_min || until.0 >= self.forgotten_below {
                    break;
                }
                self.kept.remove(&txn);
            }
            self.order.pop_front();
        }
    }

    /// Every read kept, in the order kept.
    pub fn iter(&self) -> impl Iterator<Item = (TxnId, At, &Arc<R>)> {
        let live = self.order.iter().filter(|e| self.live(**e));
        live.map(|(until, txn)| (*txn, *until, &self.kept[txn].1))
    }

    /// The reads kept whose `until` `keep` selects, shared, as a
    /// checkpoint carries them.
    pub fn checkpoint(&self, keep: impl Fn(At) -> bool) -> Vec<(TxnId, At, Arc<R>)> {
        self.iter().filter(|(_, until, _)| keep(*until)).map(|(id, until, r)| (id, until, Arc::clone(r))).collect()
    }

    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    pub fn check_invariants(&self) {
        assert!(self.kept.len() <= self.order.len(), "every read kept is queued");
        let front = self.order.front().filter(|e| self.live(**e));
        let old = front.is_some_and(|(until, _)| until.0 < self.forgotten_below);
        assert!(!old || self.kept.len() <= self.kept_min, "reads the region is past kept beyond `kept_min`");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::NodeId;

    fn txn(n: u64) -> TxnId {
        TxnId { node: NodeId(9), seq: n }
    }

    #[test]
    fn reads_at_or_past_the_regions_first_kept_position_are_kept_whatever_their_number() {
        let mut s = SentReads::new(2);
        for n in 0..10 {
            s.insert(txn(n), (n, 0), Arc::new(n));
        }
        assert_eq!(s.len(), 10, "the region forgot nothing: every read kept");
        s.past(6);
        let kept: Vec<u64> = s.iter().map(|(t, _, _)| t.seq).collect();
        assert_eq!(kept, vec![6, 7, 8, 9], "below the forgotten positions, dropped beyond the newest two");
        s.past(20);
        let kept: Vec<u64> = s.iter().map(|(t, _, _)| t.seq).collect();
        assert_eq!(kept, vec![8, 9], "the newest `kept_min` stay");
        s.check_invariants();
        assert!(s.get(txn(3)).is_none());
        assert_eq!(s.get(txn(9)).map(|(at, r)| (at, **r)), Some(((9, 0), 9)));
    }

    #[test]
    fn a_later_place_replaces_the_one_a_transaction_was_kept_until() {
        let mut s = SentReads::new(0);
        s.insert(txn(1), (1, 0), Arc::new(1));
        s.insert(txn(1), (7, 2), Arc::new(1));
        assert_eq!(s.len(), 1);
        s.past(5);
        assert_eq!(s.get(txn(1)).map(|(at, _)| at), Some((7, 2)), "needed until its last place, kept");
        s.past(8);
        assert!(s.is_empty(), "past it, dropped");
        s.check_invariants();
    }
}
