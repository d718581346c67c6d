//! A replica of one shard (Calvin §3.2): it receives the global log from
//! its region's sequencer in position order, and executes it with
//! deterministic locking — every transaction asks for all its locks at
//! once, in log order (`meridian_mechanisms::scheduler`), so every replica
//! of the shard grants them in the same order and no deadlock forms.
//!
//! A transaction holding its locks runs Calvin's five phases: (1) read-set
//! analysis — the participants are the shards it touches, the *active*
//! ones those it writes (and the answering one); (2) local reads; (3) the
//! local reads go to every active participant of the same copy (the
//! replicas of the other shards in this region); (4) an active participant
//! collects every participant's reads; (5) it runs the program on them and
//! installs its own shard's writes. A passive participant is done after
//! phase 3. No participant votes or waits for a decision: there is no
//! two-phase commit, since every participant reaches the same outcome
//! from the same reads.

use super::messages::{LogEntry, Msg, Reads, Record, Timer, Txn};
use super::{Calvin, Config};
use crate::sent_reads::SentReads;
use meridian_core::process::CHECKED_MAX;
use meridian_core::{
    CopyState, Ctx, Key, Lsn, NodeId, Outcome, Process, RequestId, Settled, ShardId, Topology, TxnId, Value, procedure,
};
use meridian_mechanisms::locks::LockMode;
use meridian_mechanisms::recent::RecentMap;
use meridian_mechanisms::scheduler::{ReadExchange, Scheduler, digest};
use std::collections::BTreeMap;
use std::sync::Arc;

pub use crate::sent_reads::At;

/// The scheduler's log order of a place.
fn order_of(at: At) -> u64 {
    (at.0 << 24) | u64::from(at.1)
}

#[derive(Clone, Debug)]
pub(super) struct Running {
    pub at: At,
    pub txn: Arc<Txn>,
}

/// Where this replica reads the global log from.
#[derive(Clone, Debug)]
pub(super) struct Feed {
    pub sequencers: Vec<NodeId>,
    /// The region's own sequencer, preferred whenever it answers.
    pub home: usize,
    pub source: usize,
    pub next_pos: u64,
    pub held: BTreeMap<u64, LogEntry>,
    /// Ticks since the source last answered.
    pub silent_ticks: u32,
}

pub struct Replica {
    pub(super) topo: Arc<Topology>,
    pub(super) me: NodeId,
    pub(super) shard: ShardId,
    /// The replica index: peers of the same copy share it (and a region).
    pub(super) copy: u32,
    pub(super) cfg: Config,
    pub(super) feed: Feed,
    pub(super) store: BTreeMap<Key, Value>,
    pub(super) scheduler: Scheduler,
    pub(super) running: BTreeMap<TxnId, Running>,
    pub(super) exchange: ReadExchange<Option<Value>>,
    /// Reads this replica sent, to send again on request: while the
    /// region's sequencer keeps their position (`crate::sent_reads`).
    pub(super) sent: SentReads<Reads>,
    /// Outcomes this replica answered with, for clients' queries.
    /// Outcomes of the transactions this copy answers for (`None`: its
    /// reconnaissance no longer held; the client makes a new pass).
    pub(super) outcomes: RecentMap<TxnId, Option<Outcome>>,
    /// Transactions finished since this process started (the end-of-run
    /// comparison tells a copy that works from one that waits).
    pub(super) finished: u64,
    pub(super) recovery: super::recovery::Recovery,
}

impl Replica {
    pub fn new(topo: Arc<Topology>, me: NodeId, shard: ShardId, copy: u32, home: NodeId, cfg: Config) -> Replica {
        let sequencers = topo.service(super::SEQUENCER).to_vec();
        let source = sequencers.iter().position(|s| *s == home).expect("the home sequencer");
        Replica {
            feed: Feed { sequencers, home: source, source, next_pos: 0, held: BTreeMap::new(), silent_ticks: 0 },
            topo,
            me,
            shard,
            copy,
            store: BTreeMap::new(),
            scheduler: Scheduler::new(),
            running: BTreeMap::new(),
            exchange: ReadExchange::new(cfg.early_reads_max),
            sent: SentReads::new(cfg.reads_kept),
            outcomes: RecentMap::new(cfg.outcomes_kept),
            finished: 0,
            recovery: super::recovery::Recovery::default(),
            cfg,
        }
    }

    pub fn shard(&self) -> ShardId {
        self.shard
    }

    /// The shard's state at this replica.
    pub fn store(&self) -> &BTreeMap<Key, Value> {
        &self.store
    }

    /// The next global-log position this replica waits for.
    pub fn next_pos(&self) -> u64 {
        self.feed.next_pos
    }

    /// Transactions admitted and not finished.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// The replica of `shard` in this replica's copy (its region).
    pub(super) fn peer(&self, shard: ShardId) -> NodeId {
        self.topo.replicas(shard)[self.copy as usize]
    }

    // ---- the global log, in order ----

    /// Calvin §3.1: positions from a sequencer; applied in order, early
    /// ones held (up to the bound; the rest are fetched again).
    fn on_log(&mut self, ctx: &mut Ctx<'_, Calvin>, from: NodeId, entries: Vec<LogEntry>) {
        if self.feed.sequencers[self.feed.home] == from {
            self.feed.source = self.feed.home; // back from a failover
        }
        if self.feed.sequencers[self.feed.source] == from {
            self.feed.silent_ticks = 0;
        }
        for e in entries {
            if e.pos == self.feed.next_pos {
                self.apply(ctx, e);
            } else if e.pos > self.feed.next_pos && self.feed.held.len() < self.cfg.held_entries_max {
                self.feed.held.insert(e.pos, e);
            }
        }
        self.apply_held(ctx);
        self.run_ready(ctx);
    }

    /// Applies the held positions now due, and drops those passed.
    pub(super) fn apply_held(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        while let Some(e) = self.feed.held.remove(&self.feed.next_pos) {
            self.apply(ctx, e);
        }
        let next = self.feed.next_pos;
        self.feed.held.retain(|pos, _| *pos >= next);
    }

    /// Calvin §3.2: the position's transactions ask for their locks, in
    /// log order.
    fn apply(&mut self, ctx: &mut Ctx<'_, Calvin>, e: LogEntry) {
        debug_assert_eq!(e.pos, self.feed.next_pos);
        self.feed.next_pos += 1;
        for (index, txn) in e.txns {
            let at = (e.pos, index);
            if self.recovery.executed(at) {
                ctx.count("replayed", 1);
                continue;
            }
            if self.running.contains_key(&txn.id) {
                continue; // a repeat past the log's memory; the first runs
            }
            let locks = self.lock_set(&txn);
            self.scheduler.admit(txn.id, order_of(at), &locks);
            self.running.insert(txn.id, Running { at, txn });
        }
    }

    /// The transaction's keys on this shard: read keys shared, written
    /// keys exclusive (Calvin §3.2 phase 1).
    fn lock_set(&self, txn: &Txn) -> Vec<(Key, LockMode)> {
        let (reads, writes) = txn.keys_on(self.shard, &self.topo);
        let shared = reads.into_iter().map(|k| (k, LockMode::Shared));
        shared.chain(writes.into_iter().map(|k| (k, LockMode::Exclusive))).collect()
    }

    fn run_ready(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        while let Some(id) = self.scheduler.pop_ready() {
            self.start(ctx, id);
        }
    }

    // ---- Calvin §3.2 execution phases ----

    /// Whether `shard` is an active participant of `txn`: it writes, or it
    /// answers the client.
    fn is_active(&self, txn: &Txn, shard: ShardId) -> bool {
        let (_, writes) = txn.keys_on(shard, &self.topo);
        !writes.is_empty() || shard == txn.first_shard(&self.topo)
    }

    /// Phases 2-4: read locally, send the reads to the active
    /// participants, and wait for theirs (an active participant) or finish
    /// (a passive one).
    fn start(&mut self, ctx: &mut Ctx<'_, Calvin>, id: TxnId) {
        let r = self.running.get(&id).expect("a ready transaction is running").clone();
        let own = self.local_reads(&r.txn);
        let others: Vec<ShardId> = r.txn.shards.iter().copied().filter(|s| *s != self.shard).collect();
        for o in others.iter().filter(|o| self.is_active(&r.txn, **o)) {
            ctx.count("reads_sent", 1);
            let msg = Msg::Reads { txn: id, at: r.at, shard: self.shard, reads: own.clone() };
            ctx.send(self.peer(*o), msg);
        }
        let sent = (!others.is_empty()).then(|| Arc::new(own.clone()));
        if let Some(reads) = &sent {
            self.sent.insert(id, r.at, Arc::clone(reads));
        }
        if !self.is_active(&r.txn, self.shard) {
            self.record_executed(ctx, id, r.at, Vec::new(), sent, None);
            return self.finish(id);
        }
        if let Some((all, _)) = self.exchange.expect(id, &others, own, r.at.0) {
            self.execute(ctx, id, all);
        }
    }

    /// Phase 2: the values of the transaction's keys on this shard — its
    /// operations' keys, whatever its parts anchored here read, and every
    /// key its reconnaissance found here.
    fn local_reads(&self, txn: &Txn) -> Reads {
        let shard_of = |k: Key| self.topo.shard_of(k);
        let read = |k: Key| self.store.get(&k).cloned();
        let piece = txn.program.piece(self.shard, shard_of);
        let mut reads: BTreeMap<Key, Option<Value>> = piece.ops.iter().map(|op| (op.key(), read(op.key()))).collect();
        for n in txn.recon.iter().flat_map(|r| &r.keys).filter(|n| shard_of(n.key) == self.shard) {
            reads.insert(n.key, read(n.key));
        }
        if let Some(p) = &piece.procedure {
            for part in &piece.parts {
                let mut memo = procedure::ReadMap::new();
                procedure::run_part(p, *part, &mut memo, read);
                reads.extend(memo);
            }
        }
        reads.into_iter().collect()
    }

    /// A peer's reads (phase 4).
    fn on_reads(&mut self, ctx: &mut Ctx<'_, Calvin>, txn: TxnId, at: At, shard: ShardId, reads: Reads) {
        let passed = at.0 < self.feed.next_pos && !self.running.contains_key(&txn);
        if passed || self.recovery.executed(at) {
            return; // finished here already
        }
        if let Some((all, _)) = self.exchange.receive(txn, shard, reads, at.0) {
            self.execute(ctx, txn, all);
        }
    }

    /// Phase 5: run the program on every participant's reads, install
    /// this shard's writes, answer the client if this replica is the one.
    /// A transaction whose reconnaissance no longer holds on those reads
    /// writes nothing, at every participant alike, and its client makes a
    /// new pass (OLLP).
    fn execute(&mut self, ctx: &mut Ctx<'_, Calvin>, id: TxnId, all: Reads) {
        let r = self.running.get(&id).expect("an executing transaction is running").clone();
        let values: BTreeMap<Key, Option<Value>> = all.into_iter().collect();
        let read = |k: Key| values.get(&k).cloned().flatten();
        let holds = r
            .txn
            .recon
            .as_ref()
            .is_none_or(|recon| r.txn.program.procedure.as_ref().is_some_and(|p| recon.covers(p, read)));
        let mut writes = Vec::new();
        let mut outcome = None;
        if holds {
            let exec = r.txn.program.execute(read);
            writes = exec.writes.into_iter().filter(|(k, _)| self.topo.shard_of(*k) == self.shard).collect();
            outcome = Some(Outcome::Committed { results: exec.results });
        }
        for (k, v) in &writes {
            self.store.insert(*k, v.clone());
        }
        let sent = self.sent.get(id).map(|(_, reads)| Arc::clone(reads));
        let mut reply = None;
        if super::responder(&self.topo, &r.txn) == self.me {
            reply = self.answer(ctx, &r.txn, outcome);
        } else if r.txn.first_shard(&self.topo) == self.shard {
            // Every copy of the first shard keeps the outcome, so a client
            // whose answering replica is down hears it from another region
            // (every region executes the same log to the same results).
            self.outcomes.insert(id, outcome);
        }
        self.record_executed(ctx, id, r.at, writes, sent, reply);
        self.finish(id);
    }

    /// The answering replica tells the client its outcome, or (`None`) to
    /// make a new reconnaissance pass.
    fn answer(&mut self, ctx: &mut Ctx<'_, Calvin>, txn: &Txn, outcome: Option<Outcome>) -> Option<Outcome> {
        let id = txn.id;
        self.outcomes.insert(id, outcome.clone());
        let Some(outcome) = outcome else {
            ctx.count("recon_aborts", 1);
            ctx.send(id.node, Msg::Restart { id });
            return None;
        };
        let counter = if txn.shards.len() > 1 { "multi_partition" } else { "single_partition" };
        ctx.count(counter, 1);
        ctx.send(id.node, Msg::Reply { id, outcome: outcome.clone() });
        Some(outcome)
    }

    /// A client's reconnaissance pass reads this copy's current values.
    fn on_recon_read(&mut self, ctx: &mut Ctx<'_, Calvin>, from: NodeId, request: RequestId, keys: Vec<Key>) {
        let values = crate::recon::read_values(&self.topo, self.shard, keys, |k| self.store.get(&k).cloned());
        ctx.send(from, Msg::ReconValues { request, values });
    }

    /// Releases the transaction's locks to the next in log order.
    fn finish(&mut self, id: TxnId) {
        self.scheduler.finish(id);
        self.running.remove(&id);
        self.finished += 1;
    }

    // ---- lost messages ----

    /// Sends again the reads a peer lost; if this replica is done with the
    /// transaction — past it, or past it in its records, where replay
    /// skips it — and no longer keeps them (a peer further behind than
    /// `reads_kept`), says so, and the peer catches up from a checkpoint.
    /// Not yet there, it sends them when it gets there.
    fn on_reads_wanted(&mut self, ctx: &mut Ctx<'_, Calvin>, from: NodeId, txn: TxnId, at: At) {
        if let Some((at, reads)) = self.sent.get(txn) {
            ctx.send(from, Msg::Reads { txn, at, shard: self.shard, reads: Reads::clone(reads) });
        } else if at.0 < self.resume_pos() || self.recovery.executed(at) {
            ctx.count("reads_gone", 1);
            ctx.send(from, Msg::ReadsGone { txn, shard: self.shard });
        }
    }

    /// Fetches the log (from the next sequencer when the current one is
    /// silent), and asks again for reads waited on too long.
    fn on_tick(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        ctx.set_timer(self.cfg.replica_tick_ns, Timer::ReplicaTick);
        self.feed.silent_ticks += 1;
        if self.feed.silent_ticks >= self.cfg.failover_ticks {
            self.feed.source = (self.feed.source + 1) % self.feed.sequencers.len();
            self.feed.silent_ticks = 0;
            ctx.count("log_failovers", 1);
        }
        let msg = Msg::FetchLog {
            shard: self.shard,
            from: self.feed.next_pos,
            durable: self.recovery.catch_up.durable_pos(),
        };
        ctx.send(self.feed.sequencers[self.feed.source], msg.clone());
        if self.feed.source != self.feed.home {
            // Another sequencer may lag behind the home one: the home one
            // takes over again as soon as it answers.
            ctx.send(self.feed.sequencers[self.feed.home], msg);
        }
        self.want_reads(ctx);
        self.maybe_checkpoint(ctx);
        self.ask_checkpoint(ctx);
    }

    /// Asks again for reads waited on for `reads_retry_ms` (only the
    /// participants still missing).
    fn want_reads(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        for (id, missing) in self.exchange.overdue(u64::from(self.cfg.reads_retry_ticks)) {
            let Some(at) = self.running.get(&id).map(|r| r.at) else { continue };
            for s in missing {
                ctx.count("reads_wanted", 1);
                ctx.send(self.peer(s), Msg::ReadsWanted { txn: id, at, shard: self.shard });
            }
        }
    }
}

impl Process<Calvin> for Replica {
    fn on_start(&mut self, ctx: &mut Ctx<'_, Calvin>, durable: Vec<Record>) {
        self.restart(durable);
        ctx.set_timer(self.cfg.replica_tick_ns, Timer::ReplicaTick);
        let msg = Msg::FetchLog {
            shard: self.shard,
            from: self.feed.next_pos,
            durable: self.recovery.catch_up.durable_pos(),
        };
        ctx.send(self.feed.sequencers[self.feed.source], msg);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Calvin>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Log { shard, entries } if shard == self.shard => self.on_log(ctx, from, entries),
            Msg::Reads { txn, at, shard, reads } => self.on_reads(ctx, txn, at, shard, reads),
            Msg::ReadsWanted { txn, at, .. } => self.on_reads_wanted(ctx, from, txn, at),
            Msg::ReadsGone { txn, shard } => self.on_reads_gone(ctx, from, txn, shard),
            Msg::Query { id } => match self.outcomes.get(&id) {
                Some(Some(outcome)) => ctx.send(from, Msg::Reply { id, outcome: outcome.clone() }),
                Some(None) => ctx.send(from, Msg::Restart { id }),
                None => {}
            },
            Msg::ReconRead { request, keys } => self.on_recon_read(ctx, from, request, keys),
            Msg::Truncated { shard, base } if shard == self.shard => self.on_truncated(ctx, base),
            Msg::FetchCheckpoint { shard, from: pos, need } if shard == self.shard => {
                self.on_fetch_checkpoint(ctx, from, pos, need)
            }
            Msg::Checkpoint { shard, checkpoint } if shard == self.shard => self.install_checkpoint(ctx, checkpoint),
            Msg::Log { .. } | Msg::Truncated { .. } | Msg::FetchCheckpoint { .. } | Msg::Checkpoint { .. } => {} // another shard's
            // Messages to sequencers and clients.
            Msg::LogState(_)
            | Msg::Checkpointed { .. }
            | Msg::Paxos(_)
            | Msg::Submit { .. }
            | Msg::StoreBatch(_)
            | Msg::BatchStored { .. }
            | Msg::Order { .. }
            | Msg::FetchBatch { .. }
            | Msg::FetchLog { .. }
            | Msg::Reply { .. }
            | Msg::Restart { .. }
            | Msg::ReconValues { .. } => {}
        }
        self.run_ready(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Calvin>, timer: Timer) {
        match timer {
            Timer::ReplicaTick => self.on_tick(ctx),
            Timer::Paxos(_) | Timer::Epoch | Timer::SequencerTick | Timer::ClientTick => {
                unreachable!("a sequencer's or client's timer at a replica")
            }
        }
        self.run_ready(ctx);
    }

    fn on_persisted(&mut self, _ctx: &mut Ctx<'_, Calvin>, upto: Lsn) {
        self.recovery.catch_up.persisted(upto);
    }

    fn copy_state(&self) -> Option<CopyState> {
        let settled =
            self.running.is_empty().then(|| Settled { applied: self.feed.next_pos, hash: digest(&self.store) });
        Some(CopyState { shard: self.shard, settled, finished: self.finished })
    }

    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("running", self.running.len());
        out("held_entries", self.feed.held.len());
        let (waiting, early) = self.exchange.pending();
        out("reads_waiting", waiting);
        out("reads_early", early);
        out("reads_kept", self.sent.len());
        out("outcomes", self.outcomes.len());
        out("executed_after_checkpoint", self.recovery.executed_len());
    }

    fn check_invariants(&self) {
        self.recovery.catch_up.check_invariants(self.feed.next_pos);
        self.sent.check_invariants();
        assert_eq!(self.running.len(), self.scheduler.len(), "running = admitted and not finished");
        assert!(self.feed.held.len() <= self.cfg.held_entries_max, "held entries past their bound");
        assert!(self.feed.held.keys().next().is_none_or(|p| *p > self.feed.next_pos), "a held entry is due");
        for (id, r) in self.running.iter().take(CHECKED_MAX) {
            assert!(r.at.0 < self.feed.next_pos, "{id:?} runs ahead of the log");
            assert!(r.txn.shards.contains(&self.shard), "{id:?} does not touch this shard");
        }
        let (waiting, early) = self.exchange.pending();
        assert!(waiting <= self.running.len(), "waiting for reads of a transaction not running");
        assert!(early <= self.cfg.early_reads_max, "early reads past their bound");
    }
}
