//! The sequencer of one region (Calvin §3.1): it collects its clients'
//! transactions into a batch per epoch (`epoch_ms`), makes the batch
//! durable, replicates its contents to every other sequencer, and once a
//! majority of them hold it durably, asks the global log's leader to order
//! its identifier (`global_log.rs`). It pushes the materialized log to the
//! replicas of its region, and serves any replica's fetch.
//!
//! It keeps what its region may still need, and no more (Calvin §5 replays
//! the input from a checkpoint): a position and the contents of the batch
//! that took it are forgotten once every replica of the region has a
//! durable checkpoint past it (`Readers`, from their fetches), or once
//! `kept_positions_max` later positions exist — a replica that lags further
//! installs another copy's checkpoint (`recovery.rs`). Batches live in a
//! durable stream of their own (`BATCHES`), compacted to the ones kept; the
//! global log's Paxos log is compacted behind a `LogState` checkpoint every
//! `checkpoint_every_slots` slots. A peer that asks for contents this one
//! has forgotten gets its `LogState` instead.

use super::global_log::GlobalLog;
use super::messages::{Batch, BatchId, LogEntry, LogState, Msg, Record, Timer, Txn};
use super::{Calvin, Config};
use crate::readers::Readers;
use meridian_core::procedure::Recon;
use meridian_core::process::CHECKED_MAX;
use meridian_core::{Ctx, Lsn, Mapped, NodeId, Process, Program, RegionId, ShardId, Stream, Topology, TxnId};
use meridian_mechanisms::batch_stream::BatchBuilder;
use meridian_mechanisms::durable::AfterDurable;
use meridian_mechanisms::paxos::MultiPaxos;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most log positions in one `Log` message.
pub const LOG_CHUNK: u64 = 256;

/// The durable stream of the batches a sequencer stores (the main stream
/// holds the global log's Paxos records, compacted on their own).
pub const BATCHES: Stream = Stream(1);

/// Batch records between compactions of the `BATCHES` stream, and at
/// least as many as the batches kept: each compaction writes every kept
/// batch once, so its cost per stored batch stays flat.
const BATCHES_COMPACT_MIN: u64 = 1024;

/// An own batch not yet seen in the global log.
#[derive(Clone, Debug, Default)]
struct Unordered {
    /// Sequencers holding it durably (this one once its append is).
    stored: BTreeSet<NodeId>,
    /// The tick its last store round or order request went out.
    asked_tick: Option<u64>,
}

/// What waits for this sequencer's appends to be durable.
#[derive(Clone, Debug)]
enum Deferred {
    /// An own batch is durable here: spread it.
    Spread(BatchId),
    /// Tell `to` that the batch is stored.
    Ack { to: NodeId, id: BatchId },
}

pub struct Sequencer {
    topo: Arc<Topology>,
    me: NodeId,
    region: RegionId,
    cfg: Config,
    sequencers: Vec<NodeId>,
    /// The replicas this sequencer feeds: every one of its region.
    feeds: Vec<(NodeId, ShardId)>,
    builder: BatchBuilder<Arc<Txn>>,
    unordered: BTreeMap<BatchId, Unordered>,
    durable: AfterDurable<Deferred>,
    ticks: u64,
    pub(super) log: GlobalLog,
    /// The durable checkpoint position of every replica of the region.
    readers: Readers,
    /// Positions before this one went to the region's replicas.
    pushed: u64,
    /// `Batch` records appended since the `BATCHES` stream's last
    /// compaction, and the last one's LSN.
    batch_records: u64,
    batch_lsn: Option<Lsn>,
    /// Per peer, the tick it was last sent this sequencer's `LogState`
    /// (once a tick, however many forgotten batches it asked for).
    states_sent: BTreeMap<NodeId, u64>,
    /// Per other sequencer, the furthest durable checkpoint of each shard
    /// among its region's copies; and this region's, as last announced.
    elsewhere: BTreeMap<NodeId, Vec<(ShardId, u64)>>,
    announced: Vec<(ShardId, u64)>,
}

impl Sequencer {
    pub fn new(
        topo: Arc<Topology>,
        me: NodeId,
        index: u32,
        paxos: MultiPaxos<BatchId, LogState>,
        cfg: Config,
    ) -> Sequencer {
        let region = topo.region_of(me);
        let sequencers = paxos.members().to_vec();
        let feeds: Vec<(NodeId, ShardId)> = topo
            .all_replicas()
            .filter(|r| topo.region_of(*r) == region)
            .map(|r| (r, topo.replica_of(r).expect("a replica").0))
            .collect();
        Sequencer {
            readers: Readers::new(&feeds),
            pushed: 0,
            batch_records: 0,
            batch_lsn: None,
            states_sent: BTreeMap::new(),
            elsewhere: BTreeMap::new(),
            announced: Vec::new(),
            builder: BatchBuilder::new(index, cfg.batch_txns_max, cfg.epoch_ns),
            log: GlobalLog::new(paxos, cfg.txns_remembered),
            topo,
            me,
            region,
            cfg,
            sequencers,
            feeds,
            unordered: BTreeMap::new(),
            durable: AfterDurable::new(),
            ticks: 0,
        }
    }

    fn index(&self) -> u32 {
        self.sequencers.iter().position(|s| *s == self.me).expect("a member") as u32
    }

    fn majority(&self) -> usize {
        self.sequencers.len() / 2 + 1
    }

    /// The log positions this sequencer has materialized.
    pub fn log_len(&self) -> u64 {
        self.log.next_pos()
    }

    // ---- Calvin §3.1: batching ----

    /// A client's transaction joins the open batch.
    fn on_submit(
        &mut self,
        ctx: &mut Ctx<'_, Calvin>,
        id: TxnId,
        program: Program,
        recon: Option<Arc<Recon>>,
        floor: u64,
    ) {
        let known = super::runnable(&program) || recon.is_some();
        if self.unordered.len() >= self.cfg.pending_batches_max || !known {
            ctx.count("submissions_refused", 1);
            return; // the client retries
        }
        ctx.count("txns_sequenced", 1);
        let mut txn = Txn::with_recon(id, program, recon, self.region, &self.topo);
        txn.client_floor = floor.min(id.seq);
        let txn = Arc::new(txn);
        if let Some(full) = self.builder.push(txn, ctx.monotonic_ns()) {
            self.close_batch(ctx, full.seq, full.items);
        }
    }

    /// The epoch ends: cut the open batch, if it holds anything (an empty
    /// batch is not ordered: nothing is waiting for it).
    fn on_epoch(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        ctx.set_timer(self.cfg.epoch_ns, Timer::Epoch);
        let Some(deadline_ns) = self.builder.deadline_ns() else { return };
        let opened_ns = deadline_ns - self.cfg.epoch_ns;
        ctx.observe("batch_wait_us", ctx.monotonic_ns().saturating_sub(opened_ns) / 1_000);
        let batch = self.builder.cut();
        self.close_batch(ctx, batch.seq, batch.items);
    }

    /// Makes the batch durable here; it spreads once it is.
    fn close_batch(&mut self, ctx: &mut Ctx<'_, Calvin>, seq: u64, txns: Vec<Arc<Txn>>) {
        ctx.count("batches", 1);
        ctx.observe("batch_size", txns.len() as u64);
        let id = BatchId { sequencer: self.index(), seq };
        let batch = Arc::new(Batch { id, txns });
        self.log.store(Arc::clone(&batch));
        self.append_batch(ctx, batch);
        self.unordered.insert(id, Unordered::default());
        if let Some(d) = self.durable.after_last(Deferred::Spread(id)) {
            self.run_deferred(ctx, d);
        }
    }

    fn run_deferred(&mut self, ctx: &mut Ctx<'_, Calvin>, d: Deferred) {
        match d {
            Deferred::Spread(id) => {
                if let Some(u) = self.unordered.get_mut(&id) {
                    u.stored.insert(self.me);
                }
                self.spread(ctx, id);
            }
            Deferred::Ack { to, id } => ctx.send(to, Msg::BatchStored { id }),
        }
    }

    /// Sends an own batch to every sequencer that has not stored it.
    fn spread(&mut self, ctx: &mut Ctx<'_, Calvin>, id: BatchId) {
        let (Some(u), Some(batch)) = (self.unordered.get_mut(&id), self.log.contents(&id)) else { return };
        u.asked_tick = Some(self.ticks);
        for s in self.sequencers.iter().filter(|s| !u.stored.contains(s)) {
            ctx.send(*s, Msg::StoreBatch(Arc::clone(batch)));
        }
        self.ask_order(ctx, id);
    }

    // ---- contents replicated apart from the log (SLOG §4.2) ----

    /// A batch joins the `BATCHES` stream.
    fn append_batch(&mut self, ctx: &mut Ctx<'_, Calvin>, batch: Arc<Batch>) {
        let lsn = ctx.append_to(BATCHES, Record::Batch(batch));
        self.durable.appended(lsn);
        self.batch_lsn = Some(lsn);
        self.batch_records += 1;
    }

    /// Another sequencer's batch: store it durably, then acknowledge.
    fn on_store_batch(&mut self, ctx: &mut Ctx<'_, Calvin>, from: NodeId, batch: Arc<Batch>) {
        let id = batch.id;
        if self.log.store(Arc::clone(&batch)) {
            self.append_batch(ctx, batch);
        }
        if from == self.me {
            return;
        }
        if let Some(d) = self.durable.after_last(Deferred::Ack { to: from, id }) {
            self.run_deferred(ctx, d);
        }
    }

    fn on_batch_stored(&mut self, ctx: &mut Ctx<'_, Calvin>, from: NodeId, id: BatchId) {
        let Some(u) = self.unordered.get_mut(&id) else { return };
        if u.stored.insert(from) {
            self.ask_order(ctx, id);
        }
    }

    /// Once a majority holds the batch, asks the global log's leader to
    /// order it (this sequencer, if it leads).
    fn ask_order(&mut self, ctx: &mut Ctx<'_, Calvin>, id: BatchId) {
        let majority = self.majority();
        let Some(u) = self.unordered.get_mut(&id) else { return };
        if u.stored.len() < majority || !u.stored.contains(&self.me) {
            return;
        }
        u.asked_tick = Some(self.ticks);
        match self.log.paxos.leader_hint() {
            Some(leader) if leader == self.me => self.log.order(ctx, id),
            Some(leader) => ctx.send(leader, Msg::Order { id }),
            None => {
                for s in self.sequencers.iter().filter(|s| **s != self.me) {
                    ctx.send(*s, Msg::Order { id });
                }
            }
        }
    }

    /// Re-sends what went unanswered: stores and orders of own batches,
    /// and fetches of the contents the log waits for.
    fn on_tick(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        ctx.set_timer(self.cfg.sequencer_tick_ns, Timer::SequencerTick);
        self.ticks += 1;
        self.announce_checkpoints(ctx);
        self.truncate(ctx); // once a tick: what the replicas report moves no faster
        let retry = u64::from(self.cfg.order_retry_ticks);
        let due: Vec<BatchId> = self
            .unordered
            .iter()
            .filter(|(_, u)| u.asked_tick.is_some_and(|t| self.ticks >= t + retry))
            .map(|(id, _)| *id)
            .take(CHECKED_MAX)
            .collect();
        for id in due {
            self.spread(ctx, id);
        }
        if self.ticks % retry == 0 {
            for id in self.log.missing(LOG_CHUNK as usize) {
                ctx.count("batch_fetches", 1);
                for s in self.sequencers.iter().filter(|s| **s != self.me) {
                    ctx.send(*s, Msg::FetchBatch { id });
                }
            }
        }
    }

    // ---- the log, to the replicas ----

    /// Positions `range` to every replica of the region.
    fn push(&self, ctx: &mut Ctx<'_, Calvin>, range: std::ops::Range<u64>) {
        for (node, shard) in &self.feeds {
            let mut from = range.start;
            while from < range.end {
                let to = (from + LOG_CHUNK).min(range.end);
                let entries = self.entries(from..to, *shard);
                ctx.send(*node, Msg::Log { shard: *shard, entries });
                from = to;
            }
        }
    }

    fn entries(&self, range: std::ops::Range<u64>, shard: ShardId) -> Vec<LogEntry> {
        range.filter_map(|pos| self.log.entry(pos, shard)).collect()
    }

    /// A replica asks for positions from `from` on; the answer, even
    /// empty, tells it this sequencer is alive. It reports where its
    /// durable checkpoint resumes; positions it needs that are forgotten
    /// here are answered `Truncated`.
    fn on_fetch_log(&mut self, ctx: &mut Ctx<'_, Calvin>, from_node: NodeId, shard: ShardId, from: u64, durable: u64) {
        self.readers.report(from_node, durable);
        let base = self.log.base();
        // A replica behind `base` is told each time (it must catch up);
        // one past it once per advance (its sent reads before `base` are
        // needed by no peer of the region any more).
        if self.readers.tell(from_node, base) || from < base {
            ctx.send(from_node, Msg::Truncated { shard, base });
        }
        if from < base {
            ctx.count("log_truncated", 1);
            return;
        }
        let to = (from + LOG_CHUNK).min(self.log.next_pos()).max(from);
        let entries = self.entries(from..to, shard);
        ctx.count("log_fetches", entries.len() as u64);
        ctx.send(from_node, Msg::Log { shard, entries });
    }

    /// A peer's batch contents, or — forgotten here — this log's state.
    fn on_fetch_batch(&mut self, ctx: &mut Ctx<'_, Calvin>, from: NodeId, id: BatchId) {
        if let Some(batch) = self.log.contents(&id) {
            ctx.send(from, Msg::StoreBatch(Arc::clone(batch)));
        } else if self.log.forgotten(&id) && self.states_sent.insert(from, self.ticks) != Some(self.ticks) {
            ctx.count("log_states_sent", 1);
            ctx.send(from, Msg::LogState(Arc::new(self.log.state())));
        }
    }

    /// A peer's log, for contents it has forgotten: adopted if it is ahead.
    fn on_log_state(&mut self, ctx: &mut Ctx<'_, Calvin>, state: &LogState) {
        if self.log.install(state) {
            ctx.count("log_states_installed", 1);
            self.adopted();
        }
    }

    /// After the log adopted a state: own batches it took are done.
    fn adopted(&mut self) {
        let log = &self.log;
        self.unordered.retain(|id, _| !log.is_ordered(id));
    }

    /// After every event: committed ids join the log, new positions go to
    /// the region's replicas, own batches ordered are done; then the logs are compacted (what the
    /// region no longer needs is forgotten once a tick, `truncate`).
    fn drain(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        if self.log.take_events() {
            self.adopted();
        }
        for id in &self.log.materialize(ctx) {
            self.unordered.remove(id);
        }
        let range = self.pushed.max(self.log.base())..self.log.next_pos();
        self.pushed = range.end.max(range.start);
        if !range.is_empty() {
            self.push(ctx, range);
        }
        self.checkpoint(ctx);
    }

    /// Forgets the positions every replica of the region has a durable
    /// checkpoint past; or, bounding the log, the positions beyond the
    /// `kept_positions_max` latest that some copy of every shard, in any
    /// region, holds durably (a replica behind them installs that copy's
    /// checkpoint).
    fn truncate(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        let next = self.log.next_pos();
        let bound = next.saturating_sub(self.cfg.kept_positions_max).min(self.anywhere_below());
        let below = self.readers.below().max(bound).min(self.pushed);
        if below > self.log.base() {
            ctx.count("positions_forgotten", self.log.truncate(below));
        }
    }

    /// Positions some copy of every shard, in any region, holds in a
    /// durable checkpoint (as the other sequencers last announced theirs).
    fn anywhere_below(&self) -> u64 {
        let mut best = self.readers.best();
        for (shard, pos) in self.elsewhere.values().flatten() {
            let b = best.entry(*shard).or_insert(0);
            *b = (*b).max(*pos);
        }
        best.values().copied().min().unwrap_or(0)
    }

    /// Tells the other sequencers how far this region's copies are
    /// durable, when that changed.
    fn announce_checkpoints(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        let best: Vec<(ShardId, u64)> = self.readers.best().into_iter().collect();
        if best == self.announced {
            return;
        }
        for s in self.sequencers.iter().filter(|s| **s != self.me) {
            ctx.send(*s, Msg::Checkpointed { best: best.clone() });
        }
        self.announced = best;
    }

    /// Compacts the global log's Paxos log behind the log's state, and the
    /// `BATCHES` stream to the batches kept.
    fn checkpoint(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        if self.log.paxos.should_compact(self.log.state_entries()) {
            let (upto, state) = (self.log.paxos.delivered_upto(), self.log.state());
            self.log.paxos.compact(&mut Mapped::new(ctx), upto, state);
        }
        let kept = self.log.kept_len() as u64;
        let Some(upto) = self.batch_lsn.filter(|_| self.batch_records >= BATCHES_COMPACT_MIN.max(kept)) else {
            return;
        };
        let batches = self.log.kept().cloned().collect();
        ctx.compact_stream(BATCHES, upto, Record::Batches { next_own_seq: self.builder.next_seq(), batches });
        self.batch_records = 0;
    }

    /// Restart: the batches stored before the crash, the global log's
    /// acceptor state; own batches not yet ordered are spread again.
    fn restart(&mut self, ctx: &mut Ctx<'_, Calvin>, durable: Vec<Record>) {
        let mut paxos_records = Vec::new();
        let mut next_seq = 0;
        let index = self.index();
        let mut batches = Vec::new();
        for record in durable {
            match record {
                Record::Paxos(r) => paxos_records.push(r.body),
                Record::Batch(b) => batches.push(b),
                Record::Batches { next_own_seq, batches: kept } => {
                    next_seq = next_seq.max(next_own_seq);
                    batches.extend(kept);
                }
                Record::Epoch(_) | Record::Executed { .. } | Record::Checkpoint(_) => {
                    unreachable!("a replica's or client's record at a sequencer")
                }
            }
        }
        for b in batches {
            if b.id.sequencer == index {
                next_seq = next_seq.max(b.id.seq + 1);
                self.unordered.insert(b.id, Unordered::default());
            }
            self.log.store(b);
        }
        self.builder = BatchBuilder::resume(index, next_seq, self.cfg.batch_txns_max, self.cfg.epoch_ns);
        self.log.paxos.start(&mut Mapped::new(ctx), paxos_records);
        self.drain(ctx);
        self.adopted();
        let me = self.me;
        for u in self.unordered.values_mut() {
            u.stored.insert(me);
            u.asked_tick = Some(0);
        }
    }
}

impl Process<Calvin> for Sequencer {
    fn on_start(&mut self, ctx: &mut Ctx<'_, Calvin>, durable: Vec<Record>) {
        self.restart(ctx, durable);
        ctx.set_timer(self.cfg.epoch_ns, Timer::Epoch);
        ctx.set_timer(self.cfg.sequencer_tick_ns, Timer::SequencerTick);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Calvin>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Paxos(m) => self.log.paxos.on_message(&mut Mapped::new(ctx), from, m),
            Msg::Submit { id, program, recon, floor } => self.on_submit(ctx, id, program, recon, floor),
            Msg::StoreBatch(batch) => self.on_store_batch(ctx, from, batch),
            Msg::BatchStored { id } => self.on_batch_stored(ctx, from, id),
            Msg::Order { id } => self.log.order(ctx, id),
            Msg::FetchBatch { id } => self.on_fetch_batch(ctx, from, id),
            Msg::FetchLog { shard, from: pos, durable } => self.on_fetch_log(ctx, from, shard, pos, durable),
            Msg::LogState(state) => self.on_log_state(ctx, &state),
            Msg::Checkpointed { best } => {
                if self.sequencers.contains(&from) {
                    self.elsewhere.insert(from, best);
                }
            }
            // Messages to replicas and clients.
            Msg::Log { .. }
            | Msg::Truncated { .. }
            | Msg::FetchCheckpoint { .. }
            | Msg::Checkpoint { .. }
            | Msg::Reads { .. }
            | Msg::ReadsWanted { .. }
            | Msg::ReadsGone { .. }
            | Msg::Reply { .. }
            | Msg::Restart { .. }
            | Msg::Query { .. }
            | Msg::ReconRead { .. }
            | Msg::ReconValues { .. } => {}
        }
        self.drain(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Calvin>, timer: Timer) {
        match timer {
            Timer::Paxos(t) => self.log.paxos.on_timer(&mut Mapped::new(ctx), t),
            Timer::Epoch => self.on_epoch(ctx),
            Timer::SequencerTick => self.on_tick(ctx),
            Timer::ReplicaTick | Timer::ClientTick => unreachable!("a replica's or client's timer at a sequencer"),
        }
        self.drain(ctx);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, Calvin>, upto: Lsn) {
        self.log.paxos.on_persisted(&mut Mapped::new(ctx), upto);
        while let Some(d) = self.durable.next_freed(upto) {
            self.run_deferred(ctx, d);
        }
        self.drain(ctx);
    }

    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("unordered_batches", self.unordered.len());
        out("open_batch", self.builder.open_len());
        out("awaiting_durable", self.durable.len());
        self.log.state_sizes(out);
    }

    fn check_invariants(&self) {
        self.log.check_invariants();
        self.durable.check_invariants();
        assert!(self.pushed <= self.log.next_pos(), "pushed a position not materialized");
        assert!(self.log.base() <= self.pushed, "forgot a position before pushing it");
        assert!(self.builder.open_len() <= self.cfg.batch_txns_max, "a batch past its bound");
        assert!(self.unordered.len() <= self.cfg.pending_batches_max, "unordered batches past their bound");
        for (id, u) in self.unordered.iter().take(CHECKED_MAX) {
            assert_eq!(id.sequencer, self.index(), "only own batches wait to be ordered");
            assert!(!self.log.is_ordered(id), "an ordered batch still waits");
            assert!(u.stored.len() <= self.sequencers.len());
        }
    }
}
