//! A partition's durability and restart. Records: `Prepared` (with its
//! stamp, appended before the client, or the coordinator, hears of it),
//! `Committed` (with the commit stamp), `Aborted`, `Clock` (a client's
//! refresh moved the clock), and, every
//! `checkpoint_records` appends, a `Snapshot` replacing them all: the
//! versions, what was collected, the pending transactions, the Lamport
//! clock, the latest safe time and the remembered outcomes.
//!
//! A restart applies the snapshot, then the records after it, in order,
//! through the same state changes as the handlers: the clock is the
//! largest stamp recorded, so no prepare after the restart is stamped at
//! or below one told before it, and the latest safe time is the running
//! maximum over the same states. The coordinator's votes are not durable:
//! its cohorts send them again after `ctp_ms`.

use super::messages::{Record, Snapshot};
use super::partition::Partition;

impl Partition {
    /// Rebuilds the partition from its durable records.
    pub(super) fn restore(&mut self, durable: Vec<Record>, now_ns: u64) {
        for record in durable {
            match record {
                Record::Snapshot(s) => {
                    self.versions.restore(s.store.clone(), &s.collected);
                    self.stamps.restore(s.clock);
                    for (txn, p) in s.pending.iter() {
                        self.pending.add(*txn, p.clone(), now_ns);
                    }
                    self.safe.restore(Some(self.stamps.ceiling()), s.safe);
                    self.outcomes.restore(&s.decided, s.forgotten_upto);
                }
                Record::Prepared { prepare, t_prep, snapshot } => self.install(&prepare, t_prep, snapshot, now_ns),
                Record::Committed { txn, t_com } => {
                    self.apply_commit(txn, t_com, now_ns);
                }
                Record::Aborted { txn } => self.apply_abort(txn),
                Record::Clock { c } => self.apply_clock(c),
                Record::Reserved { .. } | Record::Local { .. } | Record::ClientState(_) => {
                    unreachable!("a client's record in a partition's log")
                }
                Record::Backup(_) => unreachable!("a backup's record in a partition's log"),
            }
        }
        self.safe.restored();
        self.versions.requeue_all(now_ns);
    }

    /// The partition's state, for a checkpoint.
    pub(super) fn snapshot(&self) -> Snapshot {
        let (decided, forgotten_upto) = self.outcomes.snapshot();
        Snapshot {
            store: self.versions.store().clone(),
            collected: self.versions.collected(),
            pending: self.pending.snapshot(),
            clock: self.stamps.counter(),
            safe: self.safe.floor(),
            decided,
            forgotten_upto,
        }
    }
}
