//! A partition's durability and restart. Records: `Prepared` (appended
//! before the PREPARE is acknowledged), `Committed`, `Aborted` (the same
//! for COMMIT, refusals and the termination protocol's aborts), and, every
//! `checkpoint_records` appends, a `Snapshot` replacing them all: the
//! versions, what was collected, the pending transactions, `latest`, the
//! latest safe time and the remembered outcomes.
//!
//! A restart applies the snapshot, then the records after it, in order,
//! through the same state changes as the handlers: the latest safe time is
//! the running maximum over the same states, so it is the one the
//! partition reported before the crash or more (`safe.rs`).

use super::messages::{Record, Snapshot};
use super::partition::Partition;
use crate::common::partition::Core;

impl Partition {
    /// Rebuilds the partition from its durable records.
    pub(super) fn restore(&mut self, durable: Vec<Record>, now_ns: u64) {
        for record in durable {
            match record {
                Record::Snapshot(s) => {
                    self.base.versions.restore(s.store.clone(), &s.collected);
                    self.base.pending.restore(s.pending.clone(), Vec::new(), now_ns);
                    self.safe.restore(s.latest, s.safe);
                    self.outcomes.restore(&s.decided, s.forgotten_upto);
                }
                Record::Prepared(p) => self.install(&p, now_ns),
                Record::Committed { ts } => {
                    self.apply_commit(ts, now_ns);
                }
                Record::Aborted { ts } => self.apply_abort(ts),
                Record::Advanced { ts } => {
                    self.safe.advance(ts, self.base.pending.oldest());
                }
                Record::Reserved { .. } | Record::Local { .. } | Record::Floor { .. } | Record::ClientState(_) => {
                    unreachable!("a client's record in a partition's log")
                }
                Record::Backup(_) => unreachable!("a backup's record in a partition's log"),
            }
        }
        self.safe.restored();
        self.base.versions.requeue_all(now_ns);
    }

    /// The partition's state, for a checkpoint.
    pub(super) fn snapshot(&self) -> Snapshot {
        let (pending, _) = self.base.pending.snapshot();
        let (decided, forgotten_upto) = self.outcomes.snapshot();
        Snapshot {
            store: self.base.versions.store().clone(),
            collected: self.base.versions.collected(),
            pending,
            latest: self.safe.latest(),
            safe: self.safe.floor(),
            decided,
            forgotten_upto,
        }
    }
}
