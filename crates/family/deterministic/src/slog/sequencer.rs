//! The sequencer of one region: SLOG's `ReceiveNewTxn`,
//! `InsertIntoLocalLog` and `ReceiveBatch` (Figure 2) for the region as a
//! whole, as the paper writes them.
//!
//! - **ReceiveNewTxn (§3.2)**: a client's transaction is annotated with the
//!   header of every granule it declares, from this region's Lookup Master
//!   (`lookup`, which may be stale: the headers stored with the data are
//!   authoritative), then sent to its home's sequencer (single-home) or to
//!   the multi-home orderer's (multi-home).
//! - **InsertIntoLocalLog**: single-home transactions homed here, the
//!   orderer's multi-home transactions, and this region's LockOnlyTxns join
//!   the open batch of the local log, cut every `batch_ms`; a cut batch is
//!   made durable, then shipped to every other region.
//! - **Multi-home ordering (§3.3, the third option)**: every multi-home
//!   transaction goes into the local log of one region, the orderer (the
//!   first server region). Each region reaches the orderer's batches in
//!   the same order in its global log, and there inserts a LockOnlyTxn for
//!   each multi-home transaction it is an assumed home of: so LockOnlyTxns
//!   of any two multi-home transactions stand in the same order in every
//!   home's local log, and no two wait for each other.
//! - **ReceiveBatch**: batches of every local log (this region's included)
//!   are placed in the region's global log as they come, each local log's
//!   in its own order (`InOrder`: sequence numbers, gaps fetched from their
//!   origin, a lost last batch found from the origin's periodic `Tip`). The
//!   placement is durable before the region's replicas see it, so a
//!   restarted sequencer never places differently.

use super::messages::{BatchId, Entry, LocalBatch, LogEntry, Msg, Record, SNAPSHOTS, Since, Timer, Txn, batch_id};
use super::{Config, Slog};
use meridian_core::process::CHECKED_MAX;
use meridian_core::{Ctx, Key, KeyLayout, Lsn, NodeId, Process, Program, ReadMode, RegionId, ShardId, Topology, TxnId};
use meridian_mechanisms::batch_stream::{BatchBuilder, InOrder};
use meridian_mechanisms::durable::AfterDurable;
use meridian_mechanisms::recent::{RecentMap, RecentSet};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use super::messages::Header;

/// Most log positions in one `Log` message.
pub const LOG_CHUNK: u64 = 256;

/// Most batches of one origin fetched per tick.
const FETCH_MAX: u64 = 16;

/// What waits for this sequencer's appends to be durable.
#[derive(Clone, Debug)]
enum Deferred {
    /// An own batch is durable: ship it, and place it here.
    Ship(u64),
    /// Global-log positions up to here are durable: push them.
    Push(u64),
    /// SLOG-HA: a paired region's batch is durable here: acknowledge it.
    Hold { to: NodeId, seq: u64 },
    /// A transaction's annotation is durable: send it to its local log.
    Forward(Arc<Txn>),
}

/// The transaction an entry of a local log inserts (not a head entry).
fn txn_id(entry: &Entry) -> TxnId {
    entry.txn().expect("a transaction's entry").id
}

pub struct Sequencer {
    topo: Arc<Topology>,
    me: NodeId,
    region: RegionId,
    index: u32,
    cfg: Config,
    layout: KeyLayout,
    sequencers: Vec<NodeId>,
    orderer: NodeId,
    /// The replicas this sequencer feeds: every one of its region.
    feeds: Vec<(NodeId, ShardId)>,
    /// The Lookup Master's headers that differ from the layout's (§3.2),
    /// with the batch of the remaster that wrote each.
    lookup: BTreeMap<Key, (Header, Since)>,
    /// Annotations of transactions received here, reused on resubmission
    /// so that a retry goes where the first attempt went.
    annotated: RecentMap<TxnId, Arc<Txn>>,
    builder: BatchBuilder<Entry>,
    /// Transactions in this region's local log (a resubmission is dropped).
    inserted: RecentSet<TxnId>,
    /// Transactions waiting for this region to reach the orderer's batches
    /// the remasters they rely on had seen (`Since`).
    held_back: VecDeque<Entry>,
    /// Multi-home transactions this region inserted a LockOnlyTxn for.
    lock_only: RecentSet<TxnId>,
    /// This region's local log, by number.
    own: Vec<Arc<LocalBatch>>,
    /// Own batches durable and shipped (the others may yet be lost).
    shipped: u64,
    /// SLOG-HA: the region this one's local log is replicated to before
    /// anyone sees it, the own batches it acknowledged, and the logs this
    /// region is the pair of (their batches held here).
    pair: Option<NodeId>,
    pair_acked: BTreeSet<u64>,
    paired_for: Vec<u32>,
    /// Every local log's pair, by the origin's index.
    pairs: Vec<Option<NodeId>>,
    held_for: BTreeMap<u32, Vec<Arc<LocalBatch>>>,
    inorder: InOrder<Entry>,
    /// Per local log, batches delivered in order that wait for a batch
    /// they depend on (`Entry::After`) to be placed.
    waiting: BTreeMap<u32, VecDeque<Arc<LocalBatch>>>,
    /// Per local log, the batches placed.
    placed_count: BTreeMap<u32, u64>,
    /// Per origin, the batches it announced.
    tips: BTreeMap<u32, u64>,
    /// The region's global log: the batch placed at each position.
    placed: Vec<Arc<LocalBatch>>,
    placed_at: BTreeMap<BatchId, usize>,
    /// Positions durable and pushed to the replicas.
    pushed: u64,
    durable: AfterDurable<Deferred>,
    ticks: u64,
}

impl Sequencer {
    pub fn new(topo: Arc<Topology>, me: NodeId, cfg: Config) -> Sequencer {
        let region = topo.region_of(me);
        let sequencers = topo.service(super::SEQUENCER).to_vec();
        let index = sequencers.iter().position(|s| *s == me).expect("a sequencer") as u32;
        let feeds = topo
            .all_replicas()
            .filter(|r| topo.region_of(*r) == region)
            .map(|r| (r, topo.replica_of(r).expect("a replica").0))
            .collect();
        Sequencer {
            layout: topo.key_layout(),
            orderer: sequencers[0],
            builder: BatchBuilder::new(index, cfg.batch_txns_max, cfg.batch_ns),
            inserted: RecentSet::new(cfg.txns_remembered),
            lock_only: RecentSet::new(cfg.txns_remembered),
            held_back: VecDeque::new(),
            annotated: RecentMap::new(cfg.txns_remembered),
            inorder: InOrder::new(cfg.held_batches_max),
            waiting: BTreeMap::new(),
            placed_count: BTreeMap::new(),
            topo,
            me,
            region,
            index,
            cfg,
            sequencers,
            feeds,
            lookup: BTreeMap::new(),
            own: Vec::new(),
            shipped: 0,
            pair: None,
            pair_acked: BTreeSet::new(),
            paired_for: Vec::new(),
            pairs: Vec::new(),
            held_for: BTreeMap::new(),
            tips: BTreeMap::new(),
            placed: Vec::new(),
            placed_at: BTreeMap::new(),
            pushed: 0,
            durable: AfterDurable::new(),
            ticks: 0,
        }
    }

    /// SLOG-HA: each local log (by its region's index among the
    /// sequencers) goes to its pair's sequencer before anyone else.
    pub fn with_pairs(mut self, pairs: Vec<Option<NodeId>>) -> Sequencer {
        self.pair = pairs[self.index as usize];
        self.paired_for = (0..pairs.len() as u32).filter(|i| pairs[*i as usize] == Some(self.me)).collect();
        self.pairs = pairs;
        self
    }

    /// The positions of the region's global log placed so far.
    pub fn log_len(&self) -> u64 {
        self.placed.len() as u64
    }

    /// The batch at each position of the region's global log.
    pub fn global_log(&self) -> impl Iterator<Item = BatchId> + '_ {
        self.placed.iter().map(|b| batch_id(b))
    }

    /// The Lookup Master's header for `key` (SLOG §3.2).
    fn lookup(&self, key: Key) -> Header {
        self.lookup.get(&key).map_or(Header { home: self.layout.home_of(key), counter: 0 }, |(h, _)| *h)
    }

    /// Annotates a new transaction (`ReceiveNewTxn`): every granule's
    /// header, and the batches of the remasters those headers rely on.
    fn annotate(&self, id: TxnId, program: Program) -> Txn {
        let mut txn = Txn::new(id, program, self.region, &self.topo, |k| self.lookup(k));
        let mut sinces: BTreeSet<Since> =
            txn.master_info.iter().filter_map(|(k, _)| self.lookup.get(k).map(|(_, s)| *s)).collect();
        if !self.cfg.remaster_wait {
            sinces.clear();
        }
        txn.orderer_batches = sinces.iter().map(|s| s.orderer_batches).max().unwrap_or(0);
        txn.deps = sinces.into_iter().map(|s| s.batch).collect();
        txn
    }

    fn sequencer_in(&self, region: RegionId) -> NodeId {
        super::sequencer_in(&self.topo, region)
    }

    // ---- ReceiveNewTxn (SLOG Figure 2) ----

    fn on_submit(&mut self, ctx: &mut Ctx<'_, Slog>, id: TxnId, program: Program) {
        if !super::runnable(&program) {
            ctx.count("submissions_refused", 1);
            return;
        }
        if program.mode == ReadMode::Snapshot && program.is_read_only() {
            let txn = self.annotate(id, program.clone());
            if txn.is_single_home() {
                return self.place_snapshot(ctx, txn);
            }
            // A snapshot of several homes' granules at one place of this
            // region's log could wait for a multi-home transaction while
            // holding what that one's later LockOnlyTxn needs: it runs as a
            // strict transaction instead.
        }
        if let Some(t) = self.annotated.get(&id) {
            // A retry goes where the first attempt went, as it went: a
            // fresh annotation could send it to another log, and run it twice.
            let t = Arc::clone(t);
            return self.route(ctx, t);
        }
        let txn = Arc::new(self.annotate(id, program));
        self.annotated.insert(id, Arc::clone(&txn));
        if self.destination(&txn) == self.me {
            return self.on_forward(ctx, txn); // durable with its batch
        }
        // Durable before it leaves, so that a restart keeps it (above).
        let lsn = ctx.append(Record::Annotated(Arc::clone(&txn)));
        self.durable.appended(lsn);
        if let Some(d) = self.durable.after_last(Deferred::Forward(txn)) {
            self.run_deferred(ctx, d);
        }
    }

    /// The local log a transaction goes to: its home's, or the orderer's.
    fn destination(&self, txn: &Txn) -> NodeId {
        match txn.home() {
            Some(home) => self.sequencer_in(home),
            None => self.orderer,
        }
    }

    fn route(&mut self, ctx: &mut Ctx<'_, Slog>, txn: Arc<Txn>) {
        let to = self.destination(&txn);
        if to == self.me {
            self.on_forward(ctx, txn);
        } else {
            ctx.send(to, Msg::Forward(txn));
        }
    }

    /// A snapshot read (SLOG §3.1) of one home's granules takes the next
    /// position of this region's global log alone: it needs no local log
    /// and no other region, and reads the region's copy as the log's
    /// prefix leaves it. Its locks are all its home's, taken at one place,
    /// as a single-home transaction's: so it cannot close a cycle of waits.
    fn place_snapshot(&mut self, ctx: &mut Ctx<'_, Slog>, txn: Txn) {
        let seq = self.placed_count.get(&SNAPSHOTS).copied().unwrap_or(0);
        let batch = LocalBatch { origin: SNAPSHOTS, seq, items: vec![Entry::Snapshot(Arc::new(txn))] };
        self.place(ctx, Arc::new(batch));
    }

    // ---- InsertIntoLocalLog (SLOG Figure 2) ----

    /// A transaction for this region's local log: single-home here, or a
    /// multi-home one at the orderer.
    fn on_forward(&mut self, ctx: &mut Ctx<'_, Slog>, txn: Arc<Txn>) {
        let entry = match txn.home() {
            Some(home) if home == self.region => Entry::SingleHome(txn),
            None if self.orderer == self.me => Entry::MultiHome(txn),
            _ => return, // misrouted: never sent so; the client retries
        };
        if !self.inserted.insert(txn_id(&entry)) {
            ctx.count("duplicates_dropped", 1);
            return;
        }
        if entry.txn().is_some_and(|t| t.orderer_batches > self.orderer_placed()) {
            self.held_back.push_back(entry); // see `Since`
            return;
        }
        self.insert(ctx, entry);
    }

    /// Inserts the transactions held back for the orderer's batches this
    /// region has now reached, in the order they came.
    fn release_held_back(&mut self, ctx: &mut Ctx<'_, Slog>) {
        let reached = self.orderer_placed();
        let (due, wait): (VecDeque<Entry>, VecDeque<Entry>) = std::mem::take(&mut self.held_back)
            .into_iter()
            .partition(|e| e.txn().is_some_and(|t| t.orderer_batches <= reached));
        self.held_back = wait;
        for e in due {
            self.insert(ctx, e);
        }
    }

    fn insert(&mut self, ctx: &mut Ctx<'_, Slog>, entry: Entry) {
        if let Some(full) = self.builder.push(entry, ctx.monotonic_ns()) {
            self.close_batch(ctx, full);
        }
    }

    /// The batch period ends: cut the open batch if it holds anything (an
    /// empty one is not shipped: nothing waits for it).
    fn on_batch_timer(&mut self, ctx: &mut Ctx<'_, Slog>) {
        ctx.set_timer(self.cfg.batch_ns, Timer::Batch);
        let Some(deadline_ns) = self.builder.deadline_ns() else { return };
        let opened_ns = deadline_ns - self.cfg.batch_ns;
        ctx.observe("batch_wait_us", ctx.monotonic_ns().saturating_sub(opened_ns) / 1_000);
        let batch = self.builder.cut();
        self.close_batch(ctx, batch);
    }

    /// Makes the batch durable; it is shipped and placed once it is. Its
    /// head names the other logs' batches holding the remasters its
    /// transactions' headers rely on.
    fn close_batch(&mut self, ctx: &mut Ctx<'_, Slog>, mut batch: LocalBatch) {
        let mut deps: BTreeMap<u32, u64> = BTreeMap::new();
        for d in batch.items.iter().filter_map(Entry::txn).flat_map(|t| &t.deps) {
            if d.region != self.index {
                let seq = deps.entry(d.region).or_insert(d.seq);
                *seq = (*seq).max(d.seq);
            }
        }
        let head = deps.into_iter().map(|(region, seq)| Entry::After(BatchId { region, seq }));
        batch.items.splice(0..0, head);
        ctx.count("batches", 1);
        ctx.observe("batch_size", batch.items.len() as u64);
        assert_eq!(batch.seq, self.own.len() as u64, "local-log batches are numbered in order");
        let batch = Arc::new(batch);
        self.own.push(Arc::clone(&batch));
        let lsn = ctx.append(Record::Batch(Arc::clone(&batch)));
        self.durable.appended(lsn);
        if let Some(d) = self.durable.after_last(Deferred::Ship(batch.seq)) {
            self.run_deferred(ctx, d);
        }
    }

    fn run_deferred(&mut self, ctx: &mut Ctx<'_, Slog>, d: Deferred) {
        match d {
            Deferred::Ship(seq) => match self.pair {
                Some(pair) => ctx.send(pair, Msg::Replicate(Arc::clone(&self.own[seq as usize]))),
                None => self.ship(ctx, seq),
            },
            Deferred::Hold { to, seq } => ctx.send(to, Msg::Replicated { seq }),
            Deferred::Push(upto) => self.push(ctx, upto),
            Deferred::Forward(txn) => self.route(ctx, txn),
        }
    }

    /// An own batch goes to every region, this one included.
    fn ship(&mut self, ctx: &mut Ctx<'_, Slog>, seq: u64) {
        let batch = Arc::clone(&self.own[seq as usize]);
        self.shipped = self.shipped.max(seq + 1);
        for s in self.sequencers.iter().filter(|s| **s != self.me) {
            ctx.send(*s, Msg::Ship(Arc::clone(&batch)));
        }
        self.receive_batch(ctx, batch);
    }

    // ---- SLOG-HA: the local log replicated to the paired region ----

    /// A batch of the region this one is the pair of: durable here, then
    /// acknowledged. It also joins this region's global log as any other.
    fn on_replicate(&mut self, ctx: &mut Ctx<'_, Slog>, from: NodeId, batch: Arc<LocalBatch>) {
        let held = self.held_for.entry(batch.origin).or_default();
        if batch.seq == held.len() as u64 {
            held.push(Arc::clone(&batch));
            let lsn = ctx.append(Record::Held(Arc::clone(&batch)));
            self.durable.appended(lsn);
        }
        if batch.seq < held.len() as u64 {
            if let Some(d) = self.durable.after_last(Deferred::Hold { to: from, seq: batch.seq }) {
                self.run_deferred(ctx, d);
            }
        }
        self.on_ship(ctx, batch);
    }

    /// The pair holds own batches: those in order from the first not yet
    /// shipped go out (a client hears of a commit only after its batch is
    /// in two regions, SLOG §3.2's SLOG-HA).
    fn on_replicated(&mut self, ctx: &mut Ctx<'_, Slog>, seq: u64) {
        if seq >= self.shipped && (seq as usize) < self.own.len() {
            self.pair_acked.insert(seq);
        }
        while self.pair_acked.remove(&self.shipped) {
            let next = self.shipped;
            self.ship(ctx, next);
        }
    }

    /// Any holder's copy of a batch: the origin's own, a pair's, or one
    /// placed here.
    fn batch_held(&self, id: BatchId) -> Option<&Arc<LocalBatch>> {
        if id.region == self.index {
            return self.own.get(id.seq as usize).filter(|_| id.seq < self.shipped);
        }
        let held = self.held_for.get(&id.region).and_then(|h| h.get(id.seq as usize));
        held.or_else(|| self.placed_at.get(&id).map(|pos| &self.placed[*pos]))
    }

    // ---- §3.4 dynamic remastering ----

    /// A replica of this home region saw `key`'s last accesses come from
    /// `to`: the remaster request joins this region's local log, as a
    /// single-home transaction at the granule's current home. Requests for
    /// the same granule and counter share an identifier: one is kept.
    fn on_remaster_request(&mut self, ctx: &mut Ctx<'_, Slog>, key: Key, from: Header, to: RegionId) {
        if from.home != self.region || to == self.region {
            return;
        }
        let mut name = key.0.to_le_bytes().to_vec();
        name.extend(from.counter.to_le_bytes());
        let id = TxnId { node: self.me, seq: meridian_core::ids::fnv1a(&name) >> 1 | 1 << 62 };
        let mut txn = Txn::remaster(id, key, from, to, &self.topo);
        txn.deps = self.lookup.get(&key).map(|(_, s)| s.batch).into_iter().collect();
        txn.orderer_batches = self.orderer_placed();
        self.on_forward(ctx, Arc::new(txn));
    }

    /// The Lookup Master's asynchronous update (§3.4).
    fn on_remastered(&mut self, key: Key, header: Header, since: Since) {
        if self.lookup(key).counter < header.counter {
            self.lookup.insert(key, (header, since));
        }
    }

    /// The orderer's batches this region has placed.
    fn orderer_placed(&self) -> u64 {
        self.placed_count.get(&0).copied().unwrap_or(0)
    }

    // ---- ReceiveBatch (SLOG Figure 2): the region's global log ----

    /// A batch of any local log: placed once every earlier batch of its
    /// log is, and every batch its head names.
    fn receive_batch(&mut self, ctx: &mut Ctx<'_, Slog>, batch: Arc<LocalBatch>) {
        for b in self.inorder.accept((*batch).clone()) {
            self.waiting.entry(b.origin).or_default().push_back(Arc::new(b));
        }
        self.place_ready(ctx);
    }

    /// Whether every batch `batch`'s head names is placed here.
    fn deps_placed(&self, batch: &LocalBatch) -> bool {
        batch
            .items
            .iter()
            .map_while(|e| match e {
                Entry::After(id) => Some(*id),
                _ => None,
            })
            .all(|id| self.placed_count.get(&id.region).is_some_and(|n| *n > id.seq))
    }

    /// Places every waiting batch whose dependencies are placed. A batch
    /// depends only on batches cut before it (a remaster executed before
    /// the transaction relying on it was annotated), so this never waits
    /// in a cycle.
    fn place_ready(&mut self, ctx: &mut Ctx<'_, Slog>) {
        loop {
            let ready: Vec<u32> = self
                .waiting
                .iter()
                .filter(|(_, q)| q.front().is_some_and(|b| self.deps_placed(b)))
                .map(|(o, _)| *o)
                .collect();
            if ready.is_empty() {
                return;
            }
            for origin in ready {
                let q = self.waiting.get_mut(&origin).expect("waiting");
                let b = q.pop_front().expect("a front");
                if q.is_empty() {
                    self.waiting.remove(&origin);
                }
                self.place(ctx, b);
            }
        }
    }

    /// Places a batch at the next position of the region's global log and
    /// inserts this region's LockOnlyTxns for the orderer's multi-home
    /// transactions (§3.3: `InsertIntoLocalLog` called at every region in
    /// the orderer's order).
    fn place(&mut self, ctx: &mut Ctx<'_, Slog>, batch: Arc<LocalBatch>) {
        debug_assert!(self.deps_placed(&batch));
        *self.placed_count.entry(batch.origin).or_insert(0) += 1;
        self.placed_at.insert(batch_id(&batch), self.placed.len());
        self.placed.push(Arc::clone(&batch));
        let lsn = ctx.append(Record::Placed(Arc::clone(&batch)));
        self.durable.appended(lsn);
        let upto = self.placed.len() as u64;
        if let Some(d) = self.durable.after(lsn, Deferred::Push(upto)) {
            self.run_deferred(ctx, d);
        }
        if batch.origin == 0 {
            self.insert_lock_onlys(ctx, &batch);
            self.release_held_back(ctx);
        }
    }

    fn insert_lock_onlys(&mut self, ctx: &mut Ctx<'_, Slog>, batch: &LocalBatch) {
        for e in &batch.items {
            let Entry::MultiHome(txn) = e else { continue };
            if txn.homes.binary_search(&self.region).is_ok() && self.lock_only.insert(txn.id) {
                ctx.count("lock_only_txns", 1);
                self.insert(ctx, Entry::LockOnly { txn: Arc::clone(txn), home: self.region });
            }
        }
    }

    fn on_ship(&mut self, ctx: &mut Ctx<'_, Slog>, batch: Arc<LocalBatch>) {
        if batch.seq < self.inorder.next_seq(batch.origin) {
            return; // placed already
        }
        let tip = self.tips.entry(batch.origin).or_insert(0);
        *tip = (*tip).max(batch.seq + 1);
        self.receive_batch(ctx, batch);
    }

    /// Announces this local log's length, and fetches other logs' batches
    /// that a gap or a tip shows missing.
    fn on_tick(&mut self, ctx: &mut Ctx<'_, Slog>) {
        ctx.set_timer(self.cfg.sequencer_tick_ns, Timer::SequencerTick);
        self.ticks += 1;
        let mut tips = vec![(self.index, self.shipped)];
        tips.extend(self.paired_for.iter().map(|o| (*o, self.held_for.get(o).map_or(0, |h| h.len() as u64))));
        for s in self.sequencers.iter().filter(|s| **s != self.me) {
            for (origin, next_seq) in &tips {
                ctx.send(*s, Msg::Tip { origin: *origin, next_seq: *next_seq });
            }
        }
        if let Some(pair) = self.pair {
            for seq in self.shipped..self.own.len() as u64 {
                ctx.send(pair, Msg::Replicate(Arc::clone(&self.own[seq as usize])));
            }
        }
        for (origin, tip) in &self.tips {
            let next = self.inorder.next_seq(*origin);
            for seq in (next..(*tip).min(next + FETCH_MAX)).filter(|s| !self.inorder.has(*origin, *s)) {
                ctx.count("batch_fetches", 1);
                let id = BatchId { region: *origin, seq };
                for holder in self.holders(*origin) {
                    ctx.send(holder, Msg::FetchBatch { id });
                }
            }
        }
    }

    /// Who holds the batches of local log `origin`: its region, and
    /// (SLOG-HA) the region it is replicated to.
    fn holders(&self, origin: u32) -> Vec<NodeId> {
        let pair = self.pairs.get(origin as usize).copied().flatten();
        std::iter::once(self.sequencers[origin as usize]).chain(pair.filter(|p| *p != self.me)).collect()
    }

    fn on_tip(&mut self, origin: u32, next_seq: u64) {
        if origin as usize >= self.sequencers.len() || origin == self.index {
            return;
        }
        let tip = self.tips.entry(origin).or_insert(0);
        *tip = (*tip).max(next_seq);
    }

    // ---- the global log, to the region's replicas ----

    /// Positions `pushed..upto` (durable) to every replica of the region.
    fn push(&mut self, ctx: &mut Ctx<'_, Slog>, upto: u64) {
        let range = self.pushed..upto.max(self.pushed);
        self.pushed = range.end;
        for (node, shard) in &self.feeds {
            let mut from = range.start;
            while from < range.end {
                let to = (from + LOG_CHUNK).min(range.end);
                ctx.send(*node, Msg::Log { shard: *shard, entries: self.entries(from..to, *shard) });
                from = to;
            }
        }
    }

    /// Positions `range` as `shard` sees them.
    fn entries(&self, range: std::ops::Range<u64>, shard: ShardId) -> Vec<LogEntry> {
        range
            .map(|pos| {
                let batch = &self.placed[pos as usize];
                let entries = batch
                    .items
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.touches(&self.topo, shard))
                    .map(|(i, e)| (i as u32, e.clone()))
                    .collect();
                LogEntry { pos, batch: batch_id(batch), entries }
            })
            .collect()
    }

    /// A replica asks for positions from `from` on (only durable ones are
    /// sent); the answer, even empty, tells it this sequencer is alive.
    fn on_fetch_log(&mut self, ctx: &mut Ctx<'_, Slog>, from_node: NodeId, shard: ShardId, from: u64) {
        let to = (from + LOG_CHUNK).min(self.pushed).max(from);
        let entries = self.entries(from..to, shard);
        ctx.count("log_fetches", entries.len() as u64);
        ctx.send(from_node, Msg::Log { shard, entries });
    }

    // ---- restart ----

    /// Rebuilds the local log, the placements and the dedup memory from
    /// the durable records; own batches not yet placed are shipped again,
    /// and LockOnlyTxns lost with the open batch are inserted again (they
    /// are the last ones the orderer's order asked of this region, so
    /// their order among the others is kept).
    fn restart(&mut self, ctx: &mut Ctx<'_, Slog>, durable: Vec<Record>) {
        for record in durable {
            match record {
                Record::Batch(b) => {
                    assert_eq!(b.seq, self.own.len() as u64, "own batches are durable in order");
                    for e in &b.items {
                        match e {
                            Entry::LockOnly { txn, .. } => self.lock_only.insert(txn.id),
                            Entry::SingleHome(t) | Entry::MultiHome(t) => {
                                if t.origin == self.region && t.remaster.is_none() {
                                    self.annotated.insert(t.id, Arc::clone(t));
                                }
                                self.inserted.insert(t.id)
                            }
                            Entry::After(_) | Entry::Snapshot(_) => true,
                        };
                    }
                    self.own.push(b);
                }
                Record::Placed(b) => {
                    if b.origin != SNAPSHOTS {
                        let delivered = self.inorder.accept((*b).clone());
                        assert_eq!(delivered.len(), 1, "placements are durable in each log's order");
                    }
                    *self.placed_count.entry(b.origin).or_insert(0) += 1;
                    self.placed_at.insert(batch_id(&b), self.placed.len());
                    self.placed.push(b);
                }
                Record::Annotated(t) => self.annotated.insert(t.id, t),
                Record::Held(b) => {
                    let held = self.held_for.entry(b.origin).or_default();
                    assert_eq!(b.seq, held.len() as u64, "held batches are durable in order");
                    held.push(b);
                }
                Record::Epoch(_) | Record::Executed { .. } | Record::Checkpoint(_) => {
                    unreachable!("a replica's or client's record at a sequencer")
                }
            }
        }
        self.builder =
            BatchBuilder::resume(self.index, self.own.len() as u64, self.cfg.batch_txns_max, self.cfg.batch_ns);
        self.pushed = self.placed.len() as u64;
        // Durable: every one may go (SLOG-HA: once the pair has it again).
        let unplaced = self.inorder.next_seq(self.index)..self.own.len() as u64;
        self.shipped = unplaced.start;
        for seq in unplaced {
            self.run_deferred(ctx, Deferred::Ship(seq));
        }
        let held: Vec<Arc<LocalBatch>> = self.held_for.values().flatten().cloned().collect();
        for b in held {
            self.receive_batch(ctx, b);
        }
        self.reinsert_lock_onlys(ctx);
    }
}

impl Sequencer {
    /// The LockOnlyTxns the orderer's placed batches asked of this region
    /// after the last one its durable local log holds (they went down with
    /// the open batch), inserted again in the same order.
    fn reinsert_lock_onlys(&mut self, ctx: &mut Ctx<'_, Slog>) {
        let last = self.own.iter().flat_map(|b| &b.items).rev().find_map(|e| match e {
            Entry::LockOnly { txn, .. } => Some(txn.id),
            _ => None,
        });
        let multi_homes: Vec<Arc<Txn>> = self
            .placed
            .iter()
            .filter(|b| b.origin == 0)
            .flat_map(|b| &b.items)
            .filter_map(|e| match e {
                Entry::MultiHome(t) if t.homes.binary_search(&self.region).is_ok() => Some(Arc::clone(t)),
                _ => None,
            })
            .collect();
        let start = last.and_then(|id| multi_homes.iter().position(|t| t.id == id)).map_or(0, |i| i + 1);
        for txn in &multi_homes[start..] {
            if self.lock_only.insert(txn.id) {
                ctx.count("lock_only_txns", 1);
                self.insert(ctx, Entry::LockOnly { txn: Arc::clone(txn), home: self.region });
            }
        }
    }
}

impl Process<Slog> for Sequencer {
    fn on_start(&mut self, ctx: &mut Ctx<'_, Slog>, durable: Vec<Record>) {
        self.restart(ctx, durable);
        ctx.set_timer(self.cfg.batch_ns, Timer::Batch);
        ctx.set_timer(self.cfg.sequencer_tick_ns, Timer::SequencerTick);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Slog>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Submit { id, program } => self.on_submit(ctx, id, program),
            Msg::Forward(txn) => self.on_forward(ctx, txn),
            Msg::Ship(batch) => self.on_ship(ctx, batch),
            Msg::Tip { origin, next_seq } => self.on_tip(origin, next_seq),
            Msg::Replicate(batch) => self.on_replicate(ctx, from, batch),
            Msg::Replicated { seq } => self.on_replicated(ctx, seq),
            Msg::FetchBatch { id } => {
                if let Some(b) = self.batch_held(id) {
                    ctx.send(from, Msg::Ship(Arc::clone(b)));
                }
            }
            Msg::FetchLog { shard, from: pos } => self.on_fetch_log(ctx, from, shard, pos),
            Msg::RemasterRequest { key, from: header, to } => self.on_remaster_request(ctx, key, header, to),
            Msg::Remastered { key, header, since } => self.on_remastered(key, header, since),
            // Messages to replicas and clients.
            Msg::Log { .. }
            | Msg::Reads { .. }
            | Msg::ReadsWanted { .. }
            | Msg::Reply { .. }
            | Msg::Restart { .. }
            | Msg::Query { .. } => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Slog>, timer: Timer) {
        match timer {
            Timer::Batch => self.on_batch_timer(ctx),
            Timer::SequencerTick => self.on_tick(ctx),
            Timer::ReplicaTick | Timer::ClientTick => unreachable!("a replica's or client's timer at a sequencer"),
        }
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, Slog>, upto: Lsn) {
        while let Some(d) = self.durable.next_freed(upto) {
            self.run_deferred(ctx, d);
        }
    }

    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("open_batch", self.builder.open_len());
        out("local_log", self.own.len());
        out("global_log", self.placed.len());
        out("batches_held", self.inorder.held());
        out("batches_waiting", self.waiting.values().map(VecDeque::len).sum());
        out("lookup", self.lookup.len());
        out("held_back", self.held_back.len());
        out("pair_acked", self.pair_acked.len());
        out("awaiting_durable", self.durable.len());
        out("annotated", self.annotated.len());
    }

    fn check_invariants(&self) {
        self.durable.check_invariants();
        assert!(self.builder.open_len() <= self.cfg.batch_txns_max, "a batch past its bound");
        assert!(self.pushed <= self.placed.len() as u64, "pushed past the placed log");
        assert_eq!(self.builder.next_seq(), self.own.len() as u64, "the next batch follows the local log");
        assert!(self.shipped <= self.own.len() as u64, "shipped only what the local log holds");
        for b in self.own.iter().rev().take(CHECKED_MAX) {
            assert_eq!(b.origin, self.index, "the local log holds own batches");
            for e in &b.items {
                match e {
                    Entry::SingleHome(t) => assert_eq!(t.home(), Some(self.region), "single-home here"),
                    Entry::MultiHome(t) => assert!(!t.is_single_home() && self.index == 0, "multi-home at the orderer"),
                    Entry::LockOnly { txn, home } => {
                        assert!(*home == self.region && txn.homes.contains(home), "a LockOnlyTxn of this home")
                    }
                    Entry::After(id) => assert_ne!(id.region, self.index, "dependencies on other logs only"),
                    Entry::Snapshot(_) => panic!("a snapshot read in a local log"),
                }
            }
        }
    }
}
