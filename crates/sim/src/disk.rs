//! A node's simulated durable log with group commit.
//!
//! Appends wait in `pending` until a flush covering them completes (one flush
//! in flight at a time; appends made meanwhile go in the next). Only flushed
//! records survive a crash. A compaction replaces the durable prefix by a
//! snapshot once flushed.

use meridian_core::Lsn;
use std::collections::VecDeque;

enum Pending<R> {
    Append(Lsn, R),
    Compact { upto: Lsn, snapshot: R },
}

pub struct Disk<R> {
    snapshot: Option<R>,
    durable: VecDeque<(Lsn, R)>,
    pending: Vec<Pending<R>>,
    next_lsn: u64,
    /// LSN the in-flight flush will cover, if one is in flight.
    flushing_upto: Option<Lsn>,
    /// How many pending entries the in-flight flush covers.
    flushing_len: usize,
    /// Highest LSN ever made durable: LSNs continue after it on restart.
    durable_upto: u64,
}

impl<R: Clone> Disk<R> {
    pub fn new() -> Disk<R> {
        Disk {
            snapshot: None,
            durable: VecDeque::new(),
            pending: Vec::new(),
            next_lsn: 1,
            flushing_upto: None,
            flushing_len: 0,
            durable_upto: 0,
        }
    }

    /// Queues a record; returns its LSN and whether no flush is in flight.
    pub fn append(&mut self, record: R) -> (Lsn, bool) {
        let lsn = Lsn(self.next_lsn);
        self.next_lsn += 1;
        self.pending.push(Pending::Append(lsn, record));
        (lsn, self.flushing_upto.is_none())
    }

    /// Queues a compaction; returns whether a flush must be started.
    pub fn compact(&mut self, upto: Lsn, snapshot: R) -> bool {
        assert!(upto.0 < self.next_lsn, "compaction past the last appended record");
        self.pending.push(Pending::Compact { upto, snapshot });
        self.flushing_upto.is_none()
    }

    /// Starts a flush of everything pending; false if there is nothing to do
    /// or one is already in flight.
    pub fn start_flush(&mut self) -> bool {
        if self.flushing_upto.is_some() || self.pending.is_empty() {
            return false;
        }
        self.flushing_upto = Some(Lsn(self.next_lsn - 1));
        self.flushing_len = self.pending.len();
        true
    }

    /// The in-flight flush completed: its records are durable. Returns the LSN
    /// now durable, and whether more is pending (another flush is due).
    pub fn complete_flush(&mut self) -> (Lsn, bool) {
        let upto = self.flushing_upto.take().expect("a flush was in flight");
        for entry in self.pending.drain(..self.flushing_len) {
            match entry {
                Pending::Append(lsn, r) => self.durable.push_back((lsn, r)),
                Pending::Compact { upto, snapshot } => {
                    while self.durable.front().is_some_and(|(l, _)| *l <= upto) {
                        self.durable.pop_front();
                    }
                    self.snapshot = Some(snapshot);
                }
            }
        }
        self.flushing_len = 0;
        self.durable_upto = upto.0;
        (upto, !self.pending.is_empty())
    }

    /// A crash: everything not flushed is gone (including an in-flight flush).
    pub fn crash(&mut self) {
        self.pending.clear();
        self.flushing_upto = None;
        self.flushing_len = 0;
        self.next_lsn = self.durable_upto + 1;
    }

    /// The durable records a restarted node recovers: snapshot first.
    pub fn recover(&self) -> Vec<R> {
        self.snapshot.iter().cloned().chain(self.durable.iter().map(|(_, r)| r.clone())).collect()
    }

    pub fn durable_len(&self) -> usize {
        self.durable.len()
    }
}

impl<R: Clone> Default for Disk<R> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_flushed_records_survive_a_crash() {
        let mut d = Disk::new();
        let (l1, start) = d.append("a");
        assert!(start && d.start_flush());
        let (l2, start) = d.append("b");
        assert!(!start, "a flush is in flight: b waits for the next one");
        assert_eq!((l1, l2), (Lsn(1), Lsn(2)));
        let (upto, more) = d.complete_flush();
        assert_eq!(upto, Lsn(1));
        assert!(more);
        d.crash();
        assert_eq!(d.recover(), vec!["a"]);
        let (l3, _) = d.append("c");
        assert_eq!(l3, Lsn(2), "LSNs continue after the last durable record");
    }

    #[test]
    fn compaction_replaces_the_prefix_once_flushed() {
        let mut d = Disk::new();
        for r in ["a", "b", "c"] {
            d.append(r);
        }
        d.start_flush();
        d.complete_flush();
        d.compact(Lsn(2), "snap");
        assert_eq!(d.recover(), vec!["a", "b", "c"], "not flushed yet");
        d.start_flush();
        d.complete_flush();
        assert_eq!(d.recover(), vec!["snap", "c"]);
        d.crash();
        assert_eq!(d.append("d").0, Lsn(4));
    }
}
