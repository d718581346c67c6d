//! The sequencer of one region (Calvin §3.1): it collects its clients'
//! transactions into a batch per epoch (`epoch_ms`), makes the batch
//! durable, replicates its contents to every other sequencer, and once a
//! majority of them hold it durably, asks the global log's leader to order
//! its identifier (`global_log.rs`). It pushes the materialized log to the
//! replicas of its region, and serves any replica's fetch.

use super::global_log::GlobalLog;
use super::messages::{Batch, BatchId, LogEntry, Msg, Record, Timer, Txn};
use super::{Calvin, Config};
use meridian_core::procedure::Recon;
use meridian_core::process::CHECKED_MAX;
use meridian_core::{Ctx, Lsn, Mapped, NodeId, Process, Program, RegionId, ShardId, Topology, TxnId};
use meridian_mechanisms::batch_stream::BatchBuilder;
use meridian_mechanisms::durable::AfterDurable;
use meridian_mechanisms::paxos::MultiPaxos;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most log positions in one `Log` message.
pub const LOG_CHUNK: u64 = 256;

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
}

impl Sequencer {
    pub fn new(topo: Arc<Topology>, me: NodeId, index: u32, paxos: MultiPaxos<BatchId>, cfg: Config) -> Sequencer {
        let region = topo.region_of(me);
        let sequencers = paxos.members().to_vec();
        let feeds = topo
            .all_replicas()
            .filter(|r| topo.region_of(*r) == region)
            .map(|r| (r, topo.replica_of(r).expect("a replica").0))
            .collect();
        Sequencer {
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
    fn on_submit(&mut self, ctx: &mut Ctx<'_, Calvin>, id: TxnId, program: Program, recon: Option<Arc<Recon>>) {
        let known = super::runnable(&program) || recon.is_some();
        if self.unordered.len() >= self.cfg.pending_batches_max || !known {
            ctx.count("submissions_refused", 1);
            return; // the client retries
        }
        ctx.count("txns_sequenced", 1);
        let txn = Arc::new(Txn::with_recon(id, program, recon, self.region, &self.topo));
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
        let lsn = ctx.append(Record::Batch(batch));
        self.durable.appended(lsn);
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

    /// Another sequencer's batch: store it durably, then acknowledge.
    fn on_store_batch(&mut self, ctx: &mut Ctx<'_, Calvin>, from: NodeId, batch: Arc<Batch>) {
        let id = batch.id;
        if self.log.store(Arc::clone(&batch)) {
            let lsn = ctx.append(Record::Batch(batch));
            self.durable.appended(lsn);
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
    /// empty, tells it this sequencer is alive.
    fn on_fetch_log(&mut self, ctx: &mut Ctx<'_, Calvin>, from_node: NodeId, shard: ShardId, from: u64) {
        let to = (from + LOG_CHUNK).min(self.log.next_pos()).max(from);
        let entries = self.entries(from..to, shard);
        ctx.count("log_fetches", entries.len() as u64);
        ctx.send(from_node, Msg::Log { shard, entries });
    }

    /// After every event: committed ids join the log, new positions go to
    /// the region's replicas, own batches ordered are done.
    fn drain(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        self.log.take_events();
        let m = self.log.materialize(ctx);
        for id in &m.batches {
            self.unordered.remove(id);
        }
        if !m.range.is_empty() {
            self.push(ctx, m.range);
        }
    }

    /// Restart: the batches stored before the crash, the global log's
    /// acceptor state; own batches not yet ordered are spread again.
    fn restart(&mut self, ctx: &mut Ctx<'_, Calvin>, durable: Vec<Record>) {
        let mut paxos_records = Vec::new();
        let mut next_seq = 0;
        let index = self.index();
        for record in durable {
            match record {
                Record::Paxos(r) => paxos_records.push(r.body),
                Record::Batch(b) => {
                    if b.id.sequencer == index {
                        next_seq = next_seq.max(b.id.seq + 1);
                        self.unordered.insert(b.id, Unordered::default());
                    }
                    self.log.store(b);
                }
                Record::Epoch(_) | Record::Executed { .. } | Record::Checkpoint(_) => {
                    unreachable!("a replica's or client's record at a sequencer")
                }
            }
        }
        self.builder = BatchBuilder::resume(index, next_seq, self.cfg.batch_txns_max, self.cfg.epoch_ns);
        self.log.paxos.start(&mut Mapped::new(ctx), paxos_records);
        self.drain(ctx);
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
            Msg::Submit { id, program, recon } => self.on_submit(ctx, id, program, recon),
            Msg::StoreBatch(batch) => self.on_store_batch(ctx, from, batch),
            Msg::BatchStored { id } => self.on_batch_stored(ctx, from, id),
            Msg::Order { id } => self.log.order(ctx, id),
            Msg::FetchBatch { id } => {
                if let Some(batch) = self.log.contents(&id) {
                    ctx.send(from, Msg::StoreBatch(Arc::clone(batch)));
                }
            }
            Msg::FetchLog { shard, from: pos } => self.on_fetch_log(ctx, from, shard, pos),
            // Messages to replicas and clients.
            Msg::Log { .. }
            | Msg::Reads { .. }
            | Msg::ReadsWanted { .. }
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
        assert!(self.builder.open_len() <= self.cfg.batch_txns_max, "a batch past its bound");
        assert!(self.unordered.len() <= self.cfg.pending_batches_max, "unordered batches past their bound");
        for (id, u) in self.unordered.iter().take(CHECKED_MAX) {
            assert_eq!(id.sequencer, self.index(), "only own batches wait to be ordered");
            assert!(!self.log.is_ordered(id), "an ordered batch still waits");
            assert!(u.stored.len() <= self.sequencers.len());
        }
    }
}
