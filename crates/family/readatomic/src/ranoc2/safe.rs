//! A partition's latest safe time (NOC-NOC Algorithm 1 lines 27-28 and
//! 45-48): the newest timestamp at or below which every version this
//! partition holds, or will ever hold, is committed. Clients keep the
//! latest one each partition told them (`last`, line 2) and read at the
//! smallest among the partitions of a read (the global safe view).
//!
//! Three departures from the pseudocode, each needed for that meaning to
//! hold when timestamps come from clients and nodes crash:
//!
//! - With transactions pending, the safe time is just below the oldest
//!   (`min(pending) − 1`, not `min(pending)`, line 48): a reader at
//!   `min(pending)` would skip that pending version here and read its
//!   sibling committed elsewhere.
//! - It never goes back (`safe` is the running maximum) and a prepare at or
//!   below it is refused (`Partition::on_prepare`): a client's timestamp
//!   is not ordered with the prepares other clients sent, and a version
//!   prepared below a safe time already told would fracture the reads
//!   made at it.
//! - What leaves in a message is the safe time of the durable prefix of
//!   the log (`reported`): a crash loses the records after it, and a safe
//!   time raised by a commit (or a prepare) the crash lost would be
//!   followed, after the restart, by that transaction pending again below
//!   it. The running maximum over the replayed records is the same value,
//!   so a restarted partition never reports less than it did.
//!
//! It never decides what is pending or committed: the partition passes
//! both in.

use crate::ramp::Ts;
use meridian_core::Lsn;
use std::collections::VecDeque;

pub struct SafeTime {
    /// Algorithm 1 line 27: the highest committed timestamp.
    latest: Option<Ts>,
    /// The running maximum of lines 45-48 over every state so far.
    safe: Option<Ts>,
    /// `safe` after each record not yet durable.
    marks: VecDeque<(Lsn, Option<Ts>)>,
    /// `safe` after the newest durable record.
    durable: Option<Ts>,
}

/// Algorithm 1 lines 45-48, with the safe time just below the oldest
/// pending transaction.
pub fn lst(oldest_pending: Option<Ts>, latest: Option<Ts>) -> Option<Ts> {
    match oldest_pending {
        None => latest,
        Some(p) => p.0.checked_sub(1).map(Ts),
    }
}

impl Default for SafeTime {
    fn default() -> SafeTime {
        SafeTime::new()
    }
}

impl SafeTime {
    pub fn new() -> SafeTime {
        SafeTime { latest: None, safe: None, marks: VecDeque::new(), durable: None }
    }

    /// Restores a checkpoint's (durable by definition).
    pub fn restore(&mut self, latest: Option<Ts>, safe: Option<Ts>) {
        self.latest = latest;
        self.safe = safe;
        self.durable = safe;
        self.marks.clear();
    }

    /// After a restart's replay: every replayed record is durable.
    pub fn restored(&mut self) {
        self.marks.clear();
        self.durable = self.safe;
    }

    pub fn latest(&self) -> Option<Ts> {
        self.latest
    }

    /// The safe time of everything applied, durable or not: a prepare at or
    /// below it is refused.
    pub fn floor(&self) -> Option<Ts> {
        self.safe
    }

    /// The safe time every answer carries: that of the durable records.
    pub fn reported(&self) -> Option<Ts> {
        self.durable
    }

    /// Algorithm 1 line 34: `latest ← max(ts_c, latest)`.
    pub fn committed(&mut self, ts: Ts) {
        self.latest = self.latest.max(Some(ts));
    }

    /// Raises the safe time after a change of `pending` or `latest`.
    pub fn raise(&mut self, oldest_pending: Option<Ts>) {
        let now = lst(oldest_pending, self.latest);
        self.safe = self.safe.max(now);
        debug_assert!(oldest_pending.is_none_or(|p| self.safe < Some(p)), "every pending transaction is above it");
    }

    /// RA-NOC's request to pass `to` (a client whose write waits for every
    /// safe time to reach it, Algorithm 3 line 15): the safe time rises to
    /// `to`, or just below the oldest pending transaction. Later prepares
    /// at or below it are refused, so it is safe once durable. True if it
    /// rose.
    pub fn advance(&mut self, to: Ts, oldest_pending: Option<Ts>) -> bool {
        let cap = match oldest_pending {
            Some(p) if p <= to => p.0.checked_sub(1).map(Ts),
            _ => Some(to),
        };
        let before = self.safe;
        self.safe = self.safe.max(cap);
        self.safe > before
    }

    /// A record changing the state was appended at `lsn`.
    pub fn appended(&mut self, lsn: Lsn) {
        debug_assert!(self.marks.back().is_none_or(|(l, _)| *l < lsn), "appends are in order");
        self.marks.push_back((lsn, self.safe));
    }

    /// Records up to `upto` are durable: their safe time may be told.
    pub fn persisted(&mut self, upto: Lsn) {
        while let Some((lsn, safe)) = self.marks.front().copied() {
            if lsn > upto {
                break;
            }
            self.marks.pop_front();
            self.durable = self.durable.max(safe);
        }
    }

    /// Records not yet durable (each holds one mark).
    pub fn marks(&self) -> usize {
        self.marks.len()
    }

    pub fn check_invariants(&self, oldest_pending: Option<Ts>) {
        assert!(self.durable <= self.safe, "what is told was applied");
        assert!(oldest_pending.is_none_or(|p| self.safe < Some(p)), "every pending transaction is above the safe time");
        assert!(
            self.latest <= self.safe || oldest_pending.is_some(),
            "with nothing pending, the latest commit is safe"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_safe_time_is_latest_without_pending_and_just_below_the_oldest_pending_otherwise() {
        assert_eq!(lst(None, None), None);
        assert_eq!(lst(None, Some(Ts(7))), Some(Ts(7)), "line 47");
        assert_eq!(lst(Some(Ts(5)), Some(Ts(7))), Some(Ts(4)), "line 48, just below");
        assert_eq!(lst(Some(Ts(0)), None), None);
    }

    #[test]
    fn a_safe_time_is_told_only_once_the_records_that_raised_it_are_durable() {
        let mut s = SafeTime::new();
        s.committed(Ts(10));
        s.raise(None);
        s.appended(Lsn(1));
        assert_eq!(s.floor(), Some(Ts(10)), "applied at once");
        assert_eq!(s.reported(), None, "not yet durable");
        s.raise(Some(Ts(20)));
        s.appended(Lsn(2));
        assert_eq!(s.floor(), Some(Ts(19)), "a pending transaction at 20: everything below is committed");
        s.persisted(Lsn(1));
        assert_eq!(s.reported(), Some(Ts(10)));
        s.persisted(Lsn(2));
        assert_eq!(s.reported(), Some(Ts(19)));
        assert_eq!(s.marks(), 0);
    }

    #[test]
    fn an_advance_stops_just_below_the_oldest_pending_transaction() {
        let mut s = SafeTime::new();
        s.committed(Ts(10));
        s.raise(None);
        assert!(s.advance(Ts(30), None), "nothing pending: up to the time asked");
        assert_eq!(s.floor(), Some(Ts(30)));
        assert!(s.advance(Ts(50), Some(Ts(40))), "a transaction pending at 40");
        assert_eq!(s.floor(), Some(Ts(39)));
        assert!(!s.advance(Ts(20), None), "it never goes back");
    }

    #[test]
    fn the_safe_time_never_goes_back_when_a_pending_transaction_is_aborted() {
        let mut s = SafeTime::new();
        s.committed(Ts(10));
        s.raise(Some(Ts(20)));
        assert_eq!(s.floor(), Some(Ts(19)));
        s.raise(None); // the transaction at 20 aborted: latest is still 10
        assert_eq!(s.floor(), Some(Ts(19)), "a prepare at 15 must still be refused");
    }
}
