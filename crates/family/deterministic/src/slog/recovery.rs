//! A replica's durability and restart, as Calvin's (§5): the region's
//! global log is the durable input (at its sequencer), so a replica keeps
//! only its progress. Every transaction it finishes is appended as an
//! `Executed` record (its writes, the reads it sent, the answer it gave);
//! every `checkpoint_txns` records (at least as many as the store has
//! keys) the log is folded into a `Checkpoint`: the store and headers, the
//! first position a running transaction holds a lock request at, and the
//! transactions executed that have places at or after it.
//!
//! A restarted replica rebuilds its state, fetches its region's log from
//! the checkpoint's position and replays it: entries of executed
//! transactions are skipped, the others run again under the same locks in
//! the same order and read what they read the first time (records are
//! durable in append order, and a transaction finishes only after every
//! conflicting earlier one).

use super::Slog;
use super::messages::{Checkpoint, Header, Reads, Record, Since};
use super::replica::{At, Replica};
use meridian_core::{Ctx, Key, Lsn, Outcome, TxnId, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Most sent reads a checkpoint carries (the newest).
const CHECKPOINT_SENT_MAX: usize = 1024;

#[derive(Clone, Debug, Default)]
pub(crate) struct Recovery {
    /// Transactions executed and recorded whose last place here is at or
    /// past the last checkpoint's position.
    executed: BTreeMap<TxnId, At>,
    records_since: u64,
    last_lsn: Option<Lsn>,
}

impl Recovery {
    pub(super) fn executed(&self, txn: TxnId) -> bool {
        self.executed.contains_key(&txn)
    }

    pub(super) fn executed_len(&self) -> usize {
        self.executed.len()
    }
}

impl Replica {
    /// Notes a finished transaction durably (readers too, as in Calvin).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_executed(
        &mut self,
        ctx: &mut Ctx<'_, Slog>,
        txn: TxnId,
        at: At,
        writes: Vec<(Key, Value)>,
        header: Option<(Key, Header, Since)>,
        sent: Reads,
        outcome: Option<Outcome>,
    ) {
        let lsn = ctx.append(Record::Executed { txn, at, writes, header, sent, outcome });
        self.recovery.last_lsn = Some(lsn);
        self.recovery.records_since += 1;
        self.recovery.executed.insert(txn, at);
    }

    /// Folds the durable log into a checkpoint when enough was executed.
    pub(super) fn maybe_checkpoint(&mut self, ctx: &mut Ctx<'_, Slog>) {
        let every = self.cfg.checkpoint_txns.max(self.store.len() as u64);
        let Some(upto) = self.recovery.last_lsn.filter(|_| self.recovery.records_since >= every) else { return };
        let next_pos = self.running.values().map(|r| r.first_at().0).min().unwrap_or(self.next_pos);
        self.recovery.executed.retain(|_, at| at.0 >= next_pos);
        self.batch_at = self.batch_at.split_off(&next_pos);
        let mut applied = self.applied.clone();
        for b in self.batch_at.values() {
            *applied.get_mut(&b.region).expect("applied") -= 1;
        }
        let sent = self.sent.newest(CHECKPOINT_SENT_MAX).map(|(id, (at, reads))| (*id, *at, reads.clone())).collect();
        let checkpoint = Checkpoint {
            next_pos,
            store: self.store.clone(),
            headers: self.headers.clone(),
            applied,
            executed: self.recovery.executed.iter().map(|(id, at)| (*id, *at)).collect(),
            sent,
        };
        ctx.compact(upto, Record::Checkpoint(Arc::new(checkpoint)));
        self.recovery.records_since = 0;
        ctx.count("replica_checkpoints", 1);
    }

    /// Rebuilds the state and the executed transactions from the durable
    /// records (checkpoint first); the log is then fetched from the
    /// checkpoint's position.
    pub(super) fn restart(&mut self, durable: Vec<Record>) {
        for record in durable {
            match record {
                Record::Checkpoint(c) => {
                    self.store = c.store.clone();
                    self.headers = c.headers.clone();
                    self.applied = c.applied.clone();
                    self.next_pos = c.next_pos;
                    self.recovery.executed = c.executed.iter().copied().collect();
                    for (id, at, reads) in &c.sent {
                        self.sent.insert(*id, (*at, reads.clone()));
                    }
                }
                Record::Executed { txn, at, writes, header, sent, outcome } => {
                    if let Some((key, h, since)) = header {
                        self.headers.insert(key, (h, since));
                    }
                    if let Some(outcome) = outcome {
                        self.outcomes.insert(txn, Some(outcome));
                    }
                    self.store.extend(writes);
                    self.recovery.executed.insert(txn, at);
                    if !sent.is_empty() {
                        self.sent.insert(txn, (at, sent));
                    }
                }
                Record::Paxos(_) | Record::Epoch(_) => {
                    unreachable!("a sequencer's or client's record at a replica")
                }
            }
        }
    }
}
