//! A replica's durability and restart (Calvin §5): the global log is the
//! durable input, so a replica needs only its own progress to recover.
//! Every transaction it executes (or, a passive participant, sends reads
//! for) is appended as an `Executed` record with its writes and the reads
//! it sent; every
//! `checkpoint_txns` such records (and at least as many as the store has
//! keys, so a checkpoint's cost per transaction stays flat) the log is
//! folded into one `Checkpoint`: the store, the first position with a
//! transaction not finished, and the later ones already executed.
//!
//! A restarted replica rebuilds its store from these records, asks a
//! sequencer for the log from the checkpoint's position, and replays it:
//! transactions recorded as executed are skipped (their writes are in the
//! store), the others run again under the same locks in the same order,
//! so they read what they read the first time and write the same values.
//! Records are durable in append order, and a transaction finishes only
//! after every conflicting earlier one did: so every transaction that ran
//! before a recorded one and conflicts with it is recorded too, and the
//! ones run again see none of the skipped ones' writes. Peers
//! that lost this replica's reads ask for them again; they are kept in
//! the records.

use super::Calvin;
use super::messages::{Checkpoint, Reads, Record};
use super::replica::{At, Replica};
use meridian_core::{Ctx, Key, Lsn, Outcome, TxnId, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Most sent reads a checkpoint carries (the newest).
const CHECKPOINT_SENT_MAX: usize = 1024;

#[derive(Clone, Debug, Default)]
pub(crate) struct Recovery {
    /// Places executed and recorded at or past the last checkpoint's
    /// position.
    executed: BTreeSet<At>,
    records_since: u64,
    last_lsn: Option<Lsn>,
}

impl Recovery {
    pub(super) fn executed(&self, at: At) -> bool {
        self.executed.contains(&at)
    }

    pub(super) fn executed_len(&self) -> usize {
        self.executed.len()
    }
}

impl Replica {
    /// Notes an executed transaction durably — every one, readers too: a
    /// reader re-run after a later writer's record survived would read
    /// that writer's value.
    pub(super) fn record_executed(
        &mut self,
        ctx: &mut Ctx<'_, Calvin>,
        txn: TxnId,
        at: At,
        writes: Vec<(Key, Value)>,
        sent: Reads,
        outcome: Option<Outcome>,
    ) {
        let lsn = ctx.append(Record::Executed { txn, at, writes, sent, outcome });
        self.recovery.last_lsn = Some(lsn);
        self.recovery.records_since += 1;
        self.recovery.executed.insert(at);
    }

    /// Folds the durable log into a checkpoint when enough was executed.
    pub(super) fn maybe_checkpoint(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        let every = self.cfg.checkpoint_txns.max(self.store.len() as u64);
        let Some(upto) = self.recovery.last_lsn.filter(|_| self.recovery.records_since >= every) else { return };
        let next_pos = self.running.values().map(|r| r.at.0).min().unwrap_or(self.feed.next_pos);
        self.recovery.executed.retain(|at| at.0 >= next_pos);
        let sent = self.sent.newest(CHECKPOINT_SENT_MAX).map(|(id, (at, reads))| (*id, *at, reads.clone())).collect();
        let checkpoint = Checkpoint {
            next_pos,
            store: self.store.clone(),
            executed: self.recovery.executed.iter().copied().collect(),
            sent,
        };
        ctx.compact(upto, Record::Checkpoint(Arc::new(checkpoint)));
        self.recovery.records_since = 0;
        ctx.count("replica_checkpoints", 1);
    }

    /// Rebuilds the store and the executed places from the durable
    /// records (checkpoint first); the log is then fetched from the
    /// checkpoint's position.
    pub(super) fn restart(&mut self, durable: Vec<Record>) {
        for record in durable {
            match record {
                Record::Checkpoint(c) => {
                    self.store = c.store.clone();
                    self.feed.next_pos = c.next_pos;
                    self.recovery.executed = c.executed.iter().copied().collect();
                    for (id, at, reads) in &c.sent {
                        self.sent.insert(*id, (*at, reads.clone()));
                    }
                }
                Record::Executed { txn, at, writes, sent, outcome } => {
                    if let Some(outcome) = outcome {
                        self.outcomes.insert(txn, Some(outcome));
                    }
                    self.store.extend(writes);
                    self.recovery.executed.insert(at);
                    if !sent.is_empty() {
                        self.sent.insert(txn, (at, sent));
                    }
                }
                Record::Paxos(_) | Record::Batch(_) | Record::Epoch(_) => {
                    unreachable!("a sequencer's or client's record at a replica")
                }
            }
        }
    }
}
