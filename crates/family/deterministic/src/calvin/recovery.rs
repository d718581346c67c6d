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
//!
//! A checkpoint is appended as a record and the log compacted through it,
//! so its durability is known exactly (the record's `on_persisted`); from
//! then on the replica's log fetches report its position (`durable`), and
//! the region's sequencer may forget the positions before it
//! (`sequencer.rs`). A replica whose positions are forgotten — restarted
//! after a long outage, or fed by a sequencer that adopted a peer's log —
//! is told so (`Truncated`) and installs another copy's checkpoint instead
//! of replaying (Calvin §5: "a failed node ... can recover from a replica"):
//! every region executes the same global log, so any copy's checkpoint at
//! or past the first position kept will do. It asks one copy a tick, its
//! region's first; the copy sends its state now (the store after every
//! transaction before its first running one, and those later ones it
//! executed), with the reads it sent for the transactions the asker had not
//! reached: its own region's participants may still wait for them, and
//! every copy reads the same values.

use super::Calvin;
use super::messages::{Checkpoint, Msg, Reads, Record};
use super::replica::{At, Replica};
use crate::catch_up::CatchUp;
use meridian_core::{Ctx, Key, Lsn, NodeId, Outcome, ShardId, TxnId, Value};
use meridian_mechanisms::scheduler::{ReadExchange, Scheduler};
use std::collections::BTreeSet;
use std::sync::Arc;

#[derive(Clone, Debug, Default)]
pub(crate) struct Recovery {
    /// Places executed and recorded at or past the last checkpoint's
    /// position.
    executed: BTreeSet<At>,
    records_since: u64,
    last_lsn: Option<Lsn>,
    /// The durable checkpoint its fetches report, and the catching up
    /// from another copy's when the positions it needs are forgotten.
    pub(super) catch_up: CatchUp,
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
        sent: Option<Arc<Reads>>,
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
        if self.recovery.last_lsn.is_none() || self.recovery.records_since < every {
            return;
        }
        let checkpoint = self.checkpoint_now(|_| true);
        let next_pos = checkpoint.next_pos;
        self.recovery.executed.retain(|at| at.0 >= next_pos);
        self.persist_checkpoint(ctx, Arc::new(checkpoint));
        ctx.count("replica_checkpoints", 1);
    }

    /// Where replay resumes: the first position a running transaction
    /// holds, or the next position.
    pub(super) fn resume_pos(&self) -> u64 {
        self.running.values().map(|r| r.at.0).min().unwrap_or(self.feed.next_pos)
    }

    /// The state now: the store after every transaction before the first
    /// one running (or the next position), the later ones executed, and
    /// the reads sent that `keep` selects — every one this replica keeps
    /// (`crate::sent_reads`), so that a restart can send again what it
    /// could before: a peer may be that far behind, and asks in vain for
    /// reads no copy of this shard in its region keeps.
    fn checkpoint_now(&self, keep: impl Fn(At) -> bool) -> Checkpoint {
        let next_pos = self.resume_pos();
        Checkpoint {
            next_pos,
            store: self.store.clone(),
            executed: self.recovery.executed.iter().copied().filter(|at| at.0 >= next_pos).collect(),
            sent: self.sent.checkpoint(keep),
        }
    }

    /// Appends the checkpoint and compacts the log through it: a restart
    /// finds it either as the log's snapshot or as its last record before
    /// the later ones (the runtime writes snapshots aside), and its record
    /// being durable says the checkpoint is.
    fn persist_checkpoint(&mut self, ctx: &mut Ctx<'_, Calvin>, checkpoint: Arc<Checkpoint>) {
        let next_pos = checkpoint.next_pos;
        let lsn = ctx.append(Record::Checkpoint(Arc::clone(&checkpoint)));
        ctx.compact(lsn, Record::Checkpoint(checkpoint));
        self.recovery.last_lsn = Some(lsn);
        self.recovery.records_since = 0;
        self.recovery.catch_up.appended(lsn, next_pos);
    }

    /// The region's sequencer forgot the positions before `base`: if this
    /// replica needs them, it catches up from another copy's checkpoint.
    pub(super) fn on_truncated(&mut self, ctx: &mut Ctx<'_, Calvin>, base: u64) {
        // Every replica of the region, or another copy of each shard they
        // can catch up from, is durable past `base` (any region's
        // sequencer: each forgets only what some copy of every shard is
        // past): the reads sent before it are needed no more — but for
        // those of transactions still running here, which a peer stuck
        // with this replica waits for (swarm seed 4935302 with
        // `reads_kept = 64`: two participants, both behind `base`, each
        // dropped the reads the other waited for).
        self.sent.past(base.min(self.resume_pos()));
        if self.recovery.catch_up.truncated(base, self.feed.next_pos) {
            self.ask_checkpoint(ctx);
        }
    }

    /// A peer no longer keeps the reads a transaction running here waits
    /// for. Every region executes the same log, so the other copies of
    /// the peer's shard read the same values: they are asked, in case one
    /// still keeps them. And another copy of this shard that ran the
    /// transaction has a checkpoint past it (it executed it with those
    /// reads): that one lets this replica go on whatever the others keep.
    pub(super) fn on_reads_gone(&mut self, ctx: &mut Ctx<'_, Calvin>, from: NodeId, txn: TxnId, shard: ShardId) {
        let Some(at) = self.running.get(&txn).map(|r| r.at) else { return };
        if from == self.peer(shard) {
            // Only the peer's answer fans out: another copy's does not.
            for copy in self.topo.replicas(shard).iter().copied().filter(|c| *c != from) {
                ctx.send(copy, Msg::ReadsWanted { txn, at, shard: self.shard });
            }
        }
        if self.recovery.catch_up.reads_gone(at.0) {
            ctx.count("reads_gone_checkpoints_asked", 1);
            self.ask_checkpoint(ctx);
        }
    }

    /// Asks the next copy of this shard (its region's first, then the
    /// others) for a checkpoint, while the positions it needs are gone.
    pub(super) fn ask_checkpoint(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        let region = self.topo.region_of(self.me);
        let mut copies: Vec<NodeId> =
            self.topo.replicas(self.shard).iter().copied().filter(|r| *r != self.me).collect();
        copies.sort_by_key(|r| self.topo.region_of(*r) != region);
        let Some((to, need)) = self.recovery.catch_up.next_ask(self.feed.next_pos, self.resume_pos(), &copies) else {
            return;
        };
        // The reads from where replay would resume, not from the next
        // position: a transaction admitted but not finished here is dropped
        // when the checkpoint is installed, and its peers may still wait
        // for reads only the checkpoint's copy can give.
        ctx.send(to, Msg::FetchCheckpoint { shard: self.shard, from: self.resume_pos(), need });
    }

    /// Another copy lags behind what the sequencers keep: this replica's
    /// state now, if it is at or past what that copy needs.
    pub(super) fn on_fetch_checkpoint(&mut self, ctx: &mut Ctx<'_, Calvin>, to: NodeId, from: u64, need: u64) {
        let checkpoint = self.checkpoint_now(|at| at.0 >= from);
        if checkpoint.next_pos >= need {
            ctx.count("checkpoints_sent", 1);
            ctx.send(to, Msg::Checkpoint { shard: self.shard, checkpoint: Arc::new(checkpoint) });
        }
    }

    /// Installs another copy's checkpoint past this replica's log: what
    /// ran here before it is in its store, what runs after it starts
    /// afresh (the same locks in the same order), and it is durable here
    /// before this replica reports it.
    pub(super) fn install_checkpoint(&mut self, ctx: &mut Ctx<'_, Calvin>, checkpoint: Arc<Checkpoint>) {
        if !self.recovery.catch_up.wants(checkpoint.next_pos, self.feed.next_pos, self.resume_pos()) {
            return;
        }
        self.store = checkpoint.store.clone();
        self.feed.next_pos = checkpoint.next_pos;
        let next = self.feed.next_pos;
        self.recovery.executed = checkpoint.executed.iter().copied().collect();
        for (id, at, reads) in &checkpoint.sent {
            self.sent.insert(*id, *at, Arc::clone(reads));
        }
        self.running.clear();
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
        self.apply_held(ctx);
        let msg = Msg::FetchLog { shard: self.shard, from: next, durable: self.recovery.catch_up.durable_pos() };
        ctx.send(self.feed.sequencers[self.feed.source], msg);
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
                    self.recovery.catch_up.restored(c.next_pos);
                    self.recovery.executed = c.executed.iter().copied().collect();
                    for (id, at, reads) in &c.sent {
                        self.sent.insert(*id, *at, Arc::clone(reads));
                    }
                }
                Record::Executed { txn, at, writes, sent, outcome } => {
                    if let Some(outcome) = outcome {
                        self.outcomes.insert(txn, Some(outcome));
                    }
                    self.store.extend(writes);
                    self.recovery.executed.insert(at);
                    // An empty read set was sent too: a participant that
                    // lost it asks for it again.
                    if let Some(sent) = sent {
                        self.sent.insert(txn, at, sent);
                    }
                }
                Record::Paxos(_) | Record::Batch(_) | Record::Batches { .. } | Record::Epoch(_) => {
                    unreachable!("a sequencer's or client's record at a replica")
                }
            }
        }
    }
}
