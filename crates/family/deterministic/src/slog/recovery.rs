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
use super::messages::{Checkpoint, Header, Msg, Reads, Record, Since};
use super::replica::{At, Replica};
use crate::catch_up::CatchUp;
use meridian_core::{Ctx, Key, Lsn, NodeId, Outcome, TxnId, Value};
use meridian_mechanisms::scheduler::{ReadExchange, Scheduler};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug, Default)]
pub(crate) struct Recovery {
    /// Transactions executed and recorded whose last place here is at or
    /// past the last checkpoint's position.
    executed: BTreeMap<TxnId, At>,
    records_since: u64,
    last_lsn: Option<Lsn>,
    /// The durable checkpoint its fetches report, and the catching up
    /// from another copy's when the positions it needs are forgotten.
    pub(super) catch_up: CatchUp,
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
        sent: Option<(At, Arc<Reads>)>,
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
        if self.recovery.last_lsn.is_none() || self.recovery.records_since < every {
            return;
        }
        let checkpoint = self.checkpoint_now(|_| true);
        let next_pos = checkpoint.next_pos;
        self.recovery.executed.retain(|_, at| at.0 >= next_pos);
        self.batch_at = self.batch_at.split_off(&next_pos);
        self.persist_checkpoint(ctx, Arc::new(checkpoint));
        ctx.count("replica_checkpoints", 1);
    }

    /// Where replay resumes: the first position a running transaction
    /// holds, or the next position.
    pub(super) fn resume_pos(&self) -> u64 {
        self.running.values().map(|r| r.first_at().0).min().unwrap_or(self.next_pos)
    }

    /// The state now: the store and headers after every position before
    /// the first one a running transaction holds (or the next position),
    /// the transactions executed at or after it, and the reads sent that
    /// `keep` selects — every one this replica keeps (`crate::sent_reads`), so
    /// that a restart can send again what it could before: a peer may be
    /// that far behind, and asks in vain for reads no copy of this shard
    /// in its region keeps.
    fn checkpoint_now(&self, keep: impl Fn(At) -> bool) -> Checkpoint {
        let next_pos = self.resume_pos();
        let mut applied = self.applied.clone();
        for b in self.batch_at.range(next_pos..).map(|(_, b)| b) {
            *applied.get_mut(&b.region).expect("applied") -= 1;
        }
        Checkpoint {
            next_pos,
            store: self.store.clone(),
            headers: self.headers.clone(),
            applied,
            executed: self
                .recovery
                .executed
                .iter()
                .filter(|(_, at)| at.0 >= next_pos)
                .map(|(id, at)| (*id, *at))
                .collect(),
            sent: self.sent.checkpoint(keep),
        }
    }

    /// Appends the checkpoint and compacts the log through it: its
    /// record's being durable says the checkpoint is (`CatchUp`).
    fn persist_checkpoint(&mut self, ctx: &mut Ctx<'_, Slog>, checkpoint: Arc<Checkpoint>) {
        let next_pos = checkpoint.next_pos;
        let lsn = ctx.append(Record::Checkpoint(Arc::clone(&checkpoint)));
        ctx.compact(lsn, Record::Checkpoint(checkpoint));
        self.recovery.last_lsn = Some(lsn);
        self.recovery.records_since = 0;
        self.recovery.catch_up.appended(lsn, next_pos);
    }

    /// The region's group forgot the positions before `base`: if this
    /// replica needs them, it catches up from another copy's checkpoint.
    pub(super) fn on_truncated(&mut self, ctx: &mut Ctx<'_, Slog>, base: u64) {
        if self.recovery.catch_up.truncated(base, self.next_pos) {
            self.ask_checkpoint(ctx);
        }
    }

    /// Asks the next copy of this shard in its region (the same global
    /// log: another region's interleaves the local logs differently) for a
    /// checkpoint, while the positions it needs are gone.
    pub(super) fn ask_checkpoint(&mut self, ctx: &mut Ctx<'_, Slog>) {
        let region = self.region();
        let copies: Vec<NodeId> = self
            .topo
            .replicas(self.shard)
            .iter()
            .copied()
            .filter(|r| *r != self.me && self.topo.region_of(*r) == region)
            .collect();
        let Some((to, need)) = self.recovery.catch_up.next_ask(self.next_pos, self.resume_pos(), &copies) else {
            return;
        };
        // The reads from where replay would resume (see Calvin's
        // `ask_checkpoint`).
        ctx.send(to, Msg::FetchCheckpoint { shard: self.shard, from: self.resume_pos(), need });
    }

    /// Another copy of the region lags behind what the group keeps: this
    /// replica's state now, if it is at or past what that copy needs.
    pub(super) fn on_fetch_checkpoint(&mut self, ctx: &mut Ctx<'_, Slog>, to: NodeId, from: u64, need: u64) {
        if self.topo.region_of(to) != self.region() {
            return;
        }
        let checkpoint = self.checkpoint_now(|at| at.0 >= from);
        if checkpoint.next_pos >= need {
            ctx.count("checkpoints_sent", 1);
            ctx.send(to, Msg::Checkpoint { shard: self.shard, checkpoint: Arc::new(checkpoint) });
        }
    }

    /// Installs another copy's checkpoint past this replica's log: what
    /// ran here before it is in its store, what runs after it starts
    /// afresh (the same locks in the same order), and it is made durable
    /// here before this replica reports it.
    pub(super) fn install_checkpoint(&mut self, ctx: &mut Ctx<'_, Slog>, checkpoint: Arc<Checkpoint>) {
        if checkpoint.next_pos <= self.next_pos {
            return;
        }
        self.adopt(&checkpoint);
        self.running.clear();
        self.order_headers.clear();
        self.scheduler = Scheduler::new();
        self.exchange = ReadExchange::new(self.cfg.early_reads_max);
        self.recovery.catch_up.installed();
        // It replaces every earlier record, and with them the reads this
        // replica sent or an earlier installed checkpoint gave it, which
        // peers may still ask for (a restart keeps only what is durable):
        // made durable with every read this replica can send again, not
        // only those the other copy sent from this replica's `from` on.
        let checkpoint = Arc::new(Checkpoint { sent: self.sent.checkpoint(|_| true), ..(*checkpoint).clone() });
        self.persist_checkpoint(ctx, checkpoint);
        ctx.count("checkpoints_installed", 1);
        // A position held while the log was behind may be the checkpoint's
        // next one: it is applied now, not left due.
        self.apply_held(ctx);
        let next = self.next_pos;
        let msg = Msg::FetchLog { shard: self.shard, from: next, durable: self.recovery.catch_up.durable_pos() };
        ctx.send(self.sequencer(), msg);
    }

    /// A checkpoint's state becomes this replica's.
    fn adopt(&mut self, c: &Checkpoint) {
        self.store = c.store.clone();
        self.headers = c.headers.clone();
        self.applied = c.applied.clone();
        self.batch_at.clear();
        self.next_pos = c.next_pos;
        self.recovery.executed = c.executed.iter().copied().collect();
        for (id, until, reads) in &c.sent {
            self.sent.insert(*id, *until, Arc::clone(reads));
        }
    }

    /// Rebuilds the state and the executed transactions from the durable
    /// records (checkpoint first); the log is then fetched from the
    /// checkpoint's position.
    pub(super) fn restart(&mut self, durable: Vec<Record>) {
        for record in durable {
            match record {
                Record::Checkpoint(c) => {
                    self.adopt(&c);
                    self.recovery.catch_up.restored(c.next_pos);
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
                    // An empty read set was sent too: a participant that
                    // lost it asks for it again.
                    if let Some((until, sent)) = sent {
                        self.sent.insert(txn, until, sent);
                    }
                }
                Record::Paxos(_) | Record::Epoch(_) => {
                    unreachable!("a sequencer's or client's record at a replica")
                }
            }
        }
    }
}
