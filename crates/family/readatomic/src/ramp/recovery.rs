//! A partition's durability and restart ("Scalable Atomic Visibility with
//! RAMP Transactions" assumes stable storage at the partitions: a
//! prepared version must survive, for readers repair towards it).
//!
//! Records: `Prepared` (the versions of one transaction here, appended
//! before the PREPARE is acknowledged), `Committed` and `Aborted` (the
//! same for COMMIT and for the termination protocol's refusals), and,
//! every `checkpoint_records` appends, a `Snapshot` that replaces them
//! all: the versions (after garbage collection), what was collected, the
//! pending transactions and the remembered refusals.
//!
//! A restart applies the snapshot, then the records after it, in order.
//! Every version collected before a crash is either in the snapshot's
//! collected set (collected before the snapshot) or comes back from the
//! snapshot's store or a replayed `Prepared` (collected after it):
//! a version missing after a restart is always one a reader is told is
//! `Gone`. Overwritten versions wait for collection again from the
//! restart on.

use super::messages::{Record, Snapshot};
use super::partition::Partition;
use crate::common::partition::Core;
use meridian_core::Lsn;
use meridian_mechanisms::twopc::Decision;

/// When a checkpoint is due.
pub struct Checkpoints {
    every: u64,
    since: u64,
    last: Option<Lsn>,
}

impl Checkpoints {
    pub fn new(every: u64) -> Checkpoints {
        assert!(every > 0, "checkpoints are taken every so many records");
        Checkpoints { every, since: 0, last: None }
    }

    pub fn appended(&mut self, lsn: Lsn) {
        self.since += 1;
        self.last = Some(lsn);
    }

    /// The LSN a checkpoint should cover, when one is due.
    pub fn due(&mut self) -> Option<Lsn> {
        if self.since < self.every {
            return None;
        }
        self.since = 0;
        self.last
    }
}

impl Partition {
    /// Rebuilds the partition from its durable records.
    pub(super) fn restore(&mut self, durable: Vec<Record>, now_ns: u64) {
        for record in durable {
            match record {
                Record::Snapshot(s) => {
                    self.base.versions.restore(s.store.clone(), &s.collected);
                    self.base.pending.restore(s.pending.clone(), s.aborted.clone(), now_ns);
                    let committed: Vec<_> = s.committed.iter().map(|ts| (*ts, Decision::Commit)).collect();
                    self.committed.restore(&committed, s.committed_forgotten_upto);
                }
                Record::Prepared(p) => {
                    if !self.base.pending.is_aborted(p.ts) {
                        self.install(&p, now_ns);
                    }
                }
                Record::Committed { ts } => {
                    self.apply_commit(ts, now_ns);
                }
                Record::Aborted { ts } => self.apply_abort(ts),
                Record::Reserved { .. } | Record::Known { .. } | Record::KnownState(_) => {
                    unreachable!("a client's record in a partition's log")
                }
                Record::Backup(_) => unreachable!("a backup's record in a partition's log"),
            }
        }
        self.base.versions.requeue_all(now_ns);
    }

    /// The partition's state, for a checkpoint.
    pub(super) fn snapshot(&self) -> Snapshot {
        let (pending, aborted) = self.base.pending.snapshot();
        let (committed, committed_forgotten_upto) = self.committed.snapshot();
        Snapshot {
            store: self.base.versions.store().clone(),
            collected: self.base.versions.collected(),
            pending,
            aborted,
            committed: committed.into_iter().map(|(ts, _)| ts).collect(),
            committed_forgotten_upto,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_is_due_every_so_many_records_and_covers_the_last() {
        let mut c = Checkpoints::new(3);
        c.appended(Lsn(4));
        c.appended(Lsn(5));
        assert_eq!(c.due(), None);
        c.appended(Lsn(9));
        assert_eq!(c.due(), Some(Lsn(9)));
        assert_eq!(c.due(), None, "and not again until three more");
    }
}
