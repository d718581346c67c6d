//! The sequencers of one region: SLOG's `ReceiveNewTxn`,
//! `InsertIntoLocalLog` and `ReceiveBatch` (Figure 2) for the region as a
//! whole, as the paper writes them, run by a group of `sequencer_replicas`
//! sequencers whose Paxos log holds the region's logs (§3.1: "Each region
//! maintains a local input log which is implemented via Paxos across its
//! servers"; §3.2: "A separate Paxos process interleaves batches ... to
//! create that region's view of the global log" — Meridian carries both in
//! one Paxos log, `RegionRecord`).
//!
//! - **The group.** Its Paxos leader does the region's work below; every
//!   change to the logs is a record it proposes and applies at once, and
//!   nothing leaves the region before the record is chosen (durable at a
//!   majority of the group): a batch is shipped, a placement pushed to the
//!   replicas, an annotated transaction forwarded, an SLOG-HA batch
//!   acknowledged only then. The other members apply chosen records in
//!   slot order, serve fetches of batches and log positions, and pass the
//!   leader's messages on to it (`relayed`). A member that loses the lead
//!   rebuilds its state from the chosen records; one that takes it over
//!   resumes from them (`resume`) as a restarted sequencer does: own
//!   batches not yet placed are shipped again, and LockOnlyTxns lost with
//!   the open batch are inserted again.
//! - **ReceiveNewTxn (§3.2)**: a client's transaction is annotated with the
//!   header of every granule it declares, from this region's Lookup Master
//!   (`lookup`, which may be stale: the headers stored with the data are
//!   authoritative), then sent to its home's group (single-home) or to the
//!   multi-home orderer's (multi-home).
//! - **InsertIntoLocalLog**: single-home transactions homed here, the
//!   orderer's multi-home transactions, and this region's LockOnlyTxns join
//!   the open batch of the local log, cut every `batch_ms`; a cut batch is
//!   chosen, then shipped to every other region.
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
//!   placement is chosen before the region's replicas see it, so no member
//!   ever places differently.
//!
//! Other regions' groups are reached through the member each one last
//! announced its tips from (its leader); until a region is heard from, its
//! first member.

use super::messages::{
    BatchId, Entry, LocalBatch, LogEntry, Msg, Record, RegionRecord, SNAPSHOTS, Since, Timer, Txn, batch_id,
};
use super::{Config, Slog};
use meridian_core::procedure::Recon;
use meridian_core::process::CHECKED_MAX;
use meridian_core::{
    Ctx, Key, KeyLayout, Lsn, Mapped, NodeId, Process, Program, ReadMode, RegionId, ShardId, Topology, TxnId,
};
use meridian_mechanisms::batch_stream::{BatchBuilder, InOrder};
use meridian_mechanisms::paxos::{MultiPaxos, PaxosEvent};
use meridian_mechanisms::recent::{RecentMap, RecentSet};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use super::messages::Header;

/// Most log positions in one `Log` message.
pub const LOG_CHUNK: u64 = 256;

/// Most batches of one origin fetched per tick.
const FETCH_MAX: u64 = 16;

/// The transaction an entry of a local log inserts (not a head entry).
fn txn_id(entry: &Entry) -> TxnId {
    entry.txn().expect("a transaction's entry").id
}

/// What a member loses when it loses the lead: the region's logs as it
/// has them (chosen records, and at the leader its own proposals too) and
/// the leader's work in progress. Rebuilt from the chosen records.
struct State {
    builder: BatchBuilder<Entry>,
    /// Transactions in this region's local log (a resubmission is dropped).
    inserted: RecentSet<TxnId>,
    /// Transactions waiting for this region to reach the orderer's batches
    /// the remasters they rely on had seen (`Since`).
    held_back: VecDeque<Entry>,
    /// Multi-home transactions this region inserted a LockOnlyTxn for.
    lock_only: RecentSet<TxnId>,
    /// Annotations of transactions received here, reused on resubmission
    /// so that a retry goes where the first attempt went.
    annotated: RecentMap<TxnId, Arc<Txn>>,
    /// Annotations the leader proposed and has not yet seen chosen: the
    /// transaction leaves then (a retry meanwhile waits for it).
    annotating: BTreeSet<TxnId>,
    /// This region's local log, by number, and how many of its batches
    /// are chosen (the rest are the leader's proposals: none leaves the
    /// group before it is chosen).
    own: Vec<Arc<LocalBatch>>,
    own_chosen: u64,
    /// Own batches shipped by this leader (SLOG-HA: once the pair held them).
    shipped: u64,
    /// SLOG-HA: own batches the pair acknowledged, not yet shipped.
    pair_acked: BTreeSet<u64>,
    /// SLOG-HA: the logs this region is the pair of, their batches held
    /// here (`held_chosen`: how many of them are chosen).
    held_for: BTreeMap<u32, Vec<Arc<LocalBatch>>>,
    held_chosen: BTreeMap<u32, u64>,
    inorder: InOrder<Entry>,
    /// Per local log, batches delivered in order that wait for a batch
    /// they depend on (`Entry::After`) to be placed.
    waiting: BTreeMap<u32, VecDeque<Arc<LocalBatch>>>,
    /// Per local log, the batches placed.
    placed_count: BTreeMap<u32, u64>,
    /// The region's global log: the batch placed at each position, and how
    /// many positions are chosen (the rest are the leader's proposals).
    placed: Vec<Arc<LocalBatch>>,
    placed_at: BTreeMap<BatchId, usize>,
    placed_chosen: u64,
    /// Positions pushed to the replicas (the leader's).
    pushed: u64,
}

impl State {
    fn new(index: u32, cfg: &Config) -> State {
        State {
            builder: BatchBuilder::new(index, cfg.batch_txns_max, cfg.batch_ns),
            inserted: RecentSet::new(cfg.txns_remembered),
            held_back: VecDeque::new(),
            lock_only: RecentSet::new(cfg.txns_remembered),
            annotated: RecentMap::new(cfg.txns_remembered),
            annotating: BTreeSet::new(),
            own: Vec::new(),
            own_chosen: 0,
            shipped: 0,
            pair_acked: BTreeSet::new(),
            held_for: BTreeMap::new(),
            held_chosen: BTreeMap::new(),
            inorder: InOrder::new(cfg.held_batches_max),
            waiting: BTreeMap::new(),
            placed_count: BTreeMap::new(),
            placed: Vec::new(),
            placed_at: BTreeMap::new(),
            placed_chosen: 0,
            pushed: 0,
        }
    }
}

pub struct Sequencer {
    topo: Arc<Topology>,
    me: NodeId,
    region: RegionId,
    /// This region's index among the groups: its local log's origin.
    index: u32,
    cfg: Config,
    layout: KeyLayout,
    /// Per region (by index), the member believed to lead its group.
    leaders: Vec<NodeId>,
    /// The members of this region's group.
    group: Vec<NodeId>,
    /// The replicas this group feeds: every one of its region.
    feeds: Vec<(NodeId, ShardId)>,
    /// The Lookup Master's headers that differ from the layout's (§3.2),
    /// with the batch of the remaster that wrote each.
    lookup: BTreeMap<Key, (Header, Since)>,
    /// SLOG-HA: the region this one's local log is replicated to before
    /// anyone sees it, the logs this region is the pair of, and every
    /// local log's pair (by region index).
    pair: Option<u32>,
    paired_for: Vec<u32>,
    pairs: Vec<Option<u32>>,
    /// Per origin, the batches it announced.
    tips: BTreeMap<u32, u64>,
    paxos: MultiPaxos<RegionRecord>,
    /// Every record chosen, in slot order (what a deposed leader rebuilds
    /// from; kept whole as the logs are, docs/slog.md).
    chosen: Vec<RegionRecord>,
    /// This member leads its group (and its state holds its proposals).
    leading: bool,
    st: State,
    ticks: u64,
}

impl Sequencer {
    pub fn new(topo: Arc<Topology>, me: NodeId, cfg: Config) -> Sequencer {
        let region = topo.region_of(me);
        let groups = super::groups(&topo);
        let index = groups.iter().position(|g| g.contains(&me)).expect("a sequencer") as u32;
        let group = groups[index as usize].clone();
        let feeds = topo
            .all_replicas()
            .filter(|r| topo.region_of(*r) == region)
            .map(|r| (r, topo.replica_of(r).expect("a replica").0))
            .collect();
        let paxos = MultiPaxos::new(index, group.clone(), me, 0, cfg.paxos);
        Sequencer {
            layout: topo.key_layout(),
            leaders: groups.iter().map(|g| g[0]).collect(),
            st: State::new(index, &cfg),
            topo,
            me,
            region,
            index,
            cfg,
            group,
            feeds,
            lookup: BTreeMap::new(),
            pair: None,
            paired_for: Vec::new(),
            pairs: Vec::new(),
            tips: BTreeMap::new(),
            paxos,
            chosen: Vec::new(),
            leading: false,
            ticks: 0,
        }
    }

    /// SLOG-HA: each local log (by its region's index among the groups)
    /// goes to its pair's group before anyone else.
    pub fn with_pairs(mut self, pairs: Vec<Option<u32>>) -> Sequencer {
        self.pair = pairs[self.index as usize];
        self.paired_for = (0..pairs.len() as u32).filter(|i| pairs[*i as usize] == Some(self.index)).collect();
        self.pairs = pairs;
        self
    }

    /// Whether this member leads its region's group.
    pub fn is_leader(&self) -> bool {
        self.leading
    }

    /// The positions of the region's global log placed so far.
    pub fn log_len(&self) -> u64 {
        self.st.placed.len() as u64
    }

    /// The batch at each position of the region's global log.
    pub fn global_log(&self) -> impl Iterator<Item = BatchId> + '_ {
        self.st.placed.iter().map(|b| batch_id(b))
    }

    /// The Lookup Master's header for `key` (SLOG §3.2).
    fn lookup(&self, key: Key) -> Header {
        self.lookup.get(&key).map_or(Header { home: self.layout.home_of(key), counter: 0 }, |(h, _)| *h)
    }

    /// Annotates a new transaction (`ReceiveNewTxn`): every granule's
    /// header, and the batches of the remasters those headers rely on.
    fn annotate(&self, id: TxnId, program: Program, recon: Option<Arc<Recon>>) -> Txn {
        let mut txn = Txn::with_recon(id, program, recon, self.region, &self.topo, |k| self.lookup(k));
        let mut sinces: BTreeSet<Since> =
            txn.master_info.iter().filter_map(|(k, _)| self.lookup.get(k).map(|(_, s)| *s)).collect();
        if !self.cfg.remaster_wait {
            sinces.clear();
        }
        txn.orderer_batches = sinces.iter().map(|s| s.orderer_batches).max().unwrap_or(0);
        txn.deps = sinces.into_iter().map(|s| s.batch).collect();
        txn
    }

    /// The index of `region`'s group (every server region has one).
    fn index_of(&self, region: RegionId) -> u32 {
        let at = self.leaders.iter().position(|l| self.topo.region_of(*l) == region);
        at.expect("a server region has a sequencer group") as u32
    }

    // ---- the region's group ----

    /// The leader proposes `record` and applies it at once (its next
    /// decisions build on it); the others apply it once chosen. Nothing
    /// is applied if this member no longer leads.
    fn propose(&mut self, ctx: &mut Ctx<'_, Slog>, record: RegionRecord) -> bool {
        debug_assert!(self.leading, "only the leader proposes");
        if self.paxos.propose(&mut Mapped::new(ctx), record.clone()).is_err() {
            return false;
        }
        self.apply(&record);
        true
    }

    /// Whether a chosen record follows on from the chosen records before
    /// it. A leader's records always do; but a deposed leader's pipelined
    /// proposals can be chosen with a gap (an earlier slot became a no-op
    /// under its successor), and every member skips those alike: its
    /// batches come again, and its successor places them.
    fn applies(&self, record: &RegionRecord) -> bool {
        let st = &self.st;
        match record {
            RegionRecord::Batch(b) => b.seq == st.own.len() as u64,
            RegionRecord::Placed(b) => {
                b.origin == SNAPSHOTS || (st.inorder.next_seq(b.origin) == b.seq && self.deps_placed(b))
            }
            RegionRecord::Held(b) => b.seq == st.held_for.get(&b.origin).map_or(0, Vec::len) as u64,
            RegionRecord::Annotated(_) => true,
        }
    }

    /// A record joins this member's logs (a chosen one that `applies`, or
    /// the leader's proposal).
    fn apply(&mut self, record: &RegionRecord) {
        let st = &mut self.st;
        match record {
            RegionRecord::Batch(b) => {
                assert_eq!(b.seq, st.own.len() as u64, "own batches are chosen in order");
                for e in &b.items {
                    match e {
                        Entry::LockOnly { txn, .. } => st.lock_only.insert(txn.id),
                        Entry::SingleHome(t) | Entry::MultiHome(t) => {
                            if t.origin == self.region && t.remaster.is_none() {
                                st.annotated.insert(t.id, Arc::clone(t));
                            }
                            st.inserted.insert(t.id)
                        }
                        Entry::After(_) | Entry::Snapshot(_) => true,
                    };
                }
                st.own.push(Arc::clone(b));
            }
            RegionRecord::Placed(b) => {
                // The leader delivered it in order already; a follower
                // learns each log's order from the placements alone.
                if b.origin != SNAPSHOTS && st.inorder.next_seq(b.origin) == b.seq {
                    let delivered = st.inorder.accept((**b).clone());
                    assert_eq!(delivered.len(), 1, "a follower holds no batch out of order");
                }
                assert!(b.origin == SNAPSHOTS || st.inorder.next_seq(b.origin) > b.seq, "placed in order");
                *st.placed_count.entry(b.origin).or_insert(0) += 1;
                st.placed_at.insert(batch_id(b), st.placed.len());
                st.placed.push(Arc::clone(b));
            }
            RegionRecord::Annotated(t) => st.annotated.insert(t.id, Arc::clone(t)),
            RegionRecord::Held(b) => {
                let held = st.held_for.entry(b.origin).or_default();
                assert_eq!(b.seq, held.len() as u64, "held batches are chosen in order");
                held.push(Arc::clone(b));
            }
        }
    }

    /// What every member counts of a chosen record.
    fn note_chosen(&mut self, record: &RegionRecord) {
        match record {
            RegionRecord::Placed(_) => self.st.placed_chosen += 1,
            RegionRecord::Held(b) => *self.st.held_chosen.entry(b.origin).or_insert(0) += 1,
            RegionRecord::Batch(_) => self.st.own_chosen += 1,
            RegionRecord::Annotated(_) => {}
        }
        assert!(self.st.placed_chosen <= self.st.placed.len() as u64, "chosen past the placed log");
    }

    /// What the leader does once its record is chosen: only now may the
    /// region's decision be seen outside the group.
    fn act(&mut self, ctx: &mut Ctx<'_, Slog>, record: &RegionRecord) {
        match record {
            RegionRecord::Batch(b) => self.replicate_or_ship(ctx, b.seq),
            RegionRecord::Placed(_) => self.push(ctx, self.st.placed_chosen),
            RegionRecord::Annotated(t) => {
                self.st.annotating.remove(&t.id);
                self.route(ctx, Arc::clone(t));
            }
            RegionRecord::Held(b) => self.ack_held(ctx, b.origin, b.seq),
        }
    }

    /// After every event: what the group's Paxos log decided.
    fn drain(&mut self, ctx: &mut Ctx<'_, Slog>) {
        for event in self.paxos.drain_events() {
            match event {
                PaxosEvent::Committed { value, .. } => {
                    let record = (*value).clone();
                    if self.leading {
                        self.note_chosen(&record);
                        self.act(ctx, &record);
                    } else if !self.apply_chosen(&record) {
                        ctx.count("records_skipped", 1);
                    }
                    self.chosen.push(record);
                }
                PaxosEvent::LeaderReady { ballot } => {
                    if ballot.round > 1 {
                        ctx.count("sequencer_takeovers", 1);
                    }
                    self.leading = true;
                    self.resume(ctx);
                }
                PaxosEvent::Deposed => {
                    self.leading = false;
                    self.rebuild();
                }
                PaxosEvent::Restore { .. } => unreachable!("a region group's log is never compacted"),
            }
        }
    }

    /// A chosen record at a member that does not lead: applied if it
    /// follows on (`applies`).
    fn apply_chosen(&mut self, record: &RegionRecord) -> bool {
        if !self.applies(record) {
            return false;
        }
        self.apply(record);
        self.note_chosen(record);
        true
    }

    /// A deposed leader's state is the chosen records' (its proposals may
    /// not be chosen, and its open batch is lost: clients retry).
    fn rebuild(&mut self) {
        self.st = State::new(self.index, &self.cfg);
        for record in self.chosen.clone() {
            self.apply_chosen(&record);
        }
    }

    /// A new leader (or a restarted one) takes the region's work up where
    /// the chosen records leave it: own batches not yet placed go out again
    /// (SLOG-HA: once the pair has them again), the pair's held batches
    /// are placed, and the LockOnlyTxns lost with an open batch are
    /// inserted again.
    fn resume(&mut self, ctx: &mut Ctx<'_, Slog>) {
        let own = self.st.own.len() as u64;
        self.st.builder = BatchBuilder::resume(self.index, own, self.cfg.batch_txns_max, self.cfg.batch_ns);
        self.st.pushed = self.st.placed_chosen;
        let unplaced = self.st.inorder.next_seq(self.index)..own;
        self.st.shipped = unplaced.start;
        for seq in unplaced {
            self.replicate_or_ship(ctx, seq);
        }
        let held: Vec<Arc<LocalBatch>> = self.st.held_for.values().flatten().cloned().collect();
        for b in held {
            self.receive_batch(ctx, b);
        }
        self.reinsert_lock_onlys(ctx);
    }

    /// A message for the leader reached another member: passed on (once:
    /// a member never passes on what a member of its group sent).
    fn relay(&mut self, ctx: &mut Ctx<'_, Slog>, from: NodeId, msg: Msg) {
        let leader = self.paxos.leader_hint().filter(|l| *l != self.me);
        if let Some(leader) = leader.filter(|_| !self.group.contains(&from)) {
            ctx.count("relayed", 1);
            if matches!(msg, Msg::Submit { .. }) {
                ctx.send(from, Msg::Leader { node: leader }); // submit there next time
            }
            ctx.send(leader, msg);
        }
    }

    // ---- ReceiveNewTxn (SLOG Figure 2) ----

    fn on_submit(&mut self, ctx: &mut Ctx<'_, Slog>, id: TxnId, program: Program, recon: Option<Arc<Recon>>) {
        if !super::runnable(&program) && recon.is_none() {
            ctx.count("submissions_refused", 1);
            return;
        }
        if program.mode == ReadMode::Snapshot && program.is_read_only() {
            let txn = self.annotate(id, program.clone(), recon.clone());
            if txn.is_single_home() {
                return self.place_snapshot(ctx, txn);
            }
            // A snapshot of several homes' granules at one place of this
            // region's log could wait for a multi-home transaction while
            // holding what that one's later LockOnlyTxn needs: it runs as a
            // strict transaction instead.
        }
        if let Some(t) = self.st.annotated.get(&id) {
            // A retry goes where the first attempt went, as it went: a
            // fresh annotation could send it to another log, and run it
            // twice. One whose annotation is not chosen yet goes then.
            let t = Arc::clone(t);
            if !self.st.annotating.contains(&id) {
                self.route(ctx, t);
            }
            return;
        }
        let txn = Arc::new(self.annotate(id, program, recon));
        if self.destination(&txn) == self.index {
            self.st.annotated.insert(id, Arc::clone(&txn));
            return self.on_forward(ctx, txn); // chosen with its batch
        }
        // Chosen before it leaves, so that a failover keeps it (above);
        // it is routed then (`act`).
        if self.propose(ctx, RegionRecord::Annotated(txn)) {
            self.st.annotating.insert(id);
        }
    }

    /// The local log a transaction goes to (a group's index): its home's,
    /// or the orderer's.
    fn destination(&self, txn: &Txn) -> u32 {
        txn.home().map_or(0, |home| self.index_of(home))
    }

    fn route(&mut self, ctx: &mut Ctx<'_, Slog>, txn: Arc<Txn>) {
        let to = self.destination(&txn);
        if to == self.index {
            self.on_forward(ctx, txn);
        } else {
            ctx.send(self.leaders[to as usize], Msg::Forward(txn));
        }
    }

    /// A snapshot read (SLOG §3.1) of one home's granules takes the next
    /// position of this region's global log alone: it needs no local log
    /// and no other region, and reads the region's copy as the log's
    /// prefix leaves it. Its locks are all its home's, taken at one place,
    /// as a single-home transaction's: so it cannot close a cycle of waits.
    fn place_snapshot(&mut self, ctx: &mut Ctx<'_, Slog>, txn: Txn) {
        let seq = self.st.placed_count.get(&SNAPSHOTS).copied().unwrap_or(0);
        let batch = LocalBatch { origin: SNAPSHOTS, seq, items: vec![Entry::Snapshot(Arc::new(txn))] };
        self.place(ctx, Arc::new(batch));
    }

    // ---- InsertIntoLocalLog (SLOG Figure 2) ----

    /// A transaction for this region's local log: single-home here, or a
    /// multi-home one at the orderer.
    fn on_forward(&mut self, ctx: &mut Ctx<'_, Slog>, txn: Arc<Txn>) {
        let entry = match txn.home() {
            Some(home) if home == self.region => Entry::SingleHome(txn),
            None if self.index == 0 => Entry::MultiHome(txn),
            _ => return, // misrouted: never sent so; the client retries
        };
        if !self.st.inserted.insert(txn_id(&entry)) {
            ctx.count("duplicates_dropped", 1);
            return;
        }
        if entry.txn().is_some_and(|t| t.orderer_batches > self.orderer_placed()) {
            self.st.held_back.push_back(entry); // see `Since`
            return;
        }
        self.insert(ctx, entry);
    }

    /// Inserts the transactions held back for the orderer's batches this
    /// region has now reached, in the order they came.
    fn release_held_back(&mut self, ctx: &mut Ctx<'_, Slog>) {
        let reached = self.orderer_placed();
        let (due, wait): (VecDeque<Entry>, VecDeque<Entry>) = std::mem::take(&mut self.st.held_back)
            .into_iter()
            .partition(|e| e.txn().is_some_and(|t| t.orderer_batches <= reached));
        self.st.held_back = wait;
        for e in due {
            self.insert(ctx, e);
        }
    }

    fn insert(&mut self, ctx: &mut Ctx<'_, Slog>, entry: Entry) {
        if let Some(full) = self.st.builder.push(entry, ctx.monotonic_ns()) {
            self.close_batch(ctx, full);
        }
    }

    /// The batch period ends: the leader cuts the open batch if it holds
    /// anything (an empty one is not shipped: nothing waits for it).
    fn on_batch_timer(&mut self, ctx: &mut Ctx<'_, Slog>) {
        ctx.set_timer(self.cfg.batch_ns, Timer::Batch);
        let Some(deadline_ns) = self.st.builder.deadline_ns() else { return };
        let opened_ns = deadline_ns - self.cfg.batch_ns;
        ctx.observe("batch_wait_us", ctx.monotonic_ns().saturating_sub(opened_ns) / 1_000);
        let batch = self.st.builder.cut();
        self.close_batch(ctx, batch);
    }

    /// Proposes the batch to the region's group; it is shipped and placed
    /// once chosen. Its head names the other logs' batches holding the
    /// remasters its transactions' headers rely on.
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
        assert_eq!(batch.seq, self.st.own.len() as u64, "local-log batches are numbered in order");
        self.propose(ctx, RegionRecord::Batch(Arc::new(batch)));
    }

    /// A chosen own batch goes to the pair first (SLOG-HA), or out.
    fn replicate_or_ship(&mut self, ctx: &mut Ctx<'_, Slog>, seq: u64) {
        match self.pair {
            Some(pair) => ctx.send(self.leaders[pair as usize], Msg::Replicate(Arc::clone(&self.st.own[seq as usize]))),
            None => self.ship(ctx, seq),
        }
    }

    /// An own batch goes to every region, this one included.
    fn ship(&mut self, ctx: &mut Ctx<'_, Slog>, seq: u64) {
        let batch = Arc::clone(&self.st.own[seq as usize]);
        self.st.shipped = self.st.shipped.max(seq + 1);
        for (i, leader) in self.leaders.iter().enumerate() {
            if i as u32 != self.index {
                ctx.send(*leader, Msg::Ship(Arc::clone(&batch)));
            }
        }
        self.receive_batch(ctx, batch);
    }

    // ---- SLOG-HA: the local log replicated to the paired region ----

    /// A batch of the region this one is the pair of: chosen here, then
    /// acknowledged. It also joins this region's global log as any other.
    fn on_replicate(&mut self, ctx: &mut Ctx<'_, Slog>, batch: Arc<LocalBatch>) {
        if !self.paired_for.contains(&batch.origin) {
            return;
        }
        let held = self.st.held_for.get(&batch.origin).map_or(0, Vec::len) as u64;
        if batch.seq == held {
            self.propose(ctx, RegionRecord::Held(Arc::clone(&batch)));
        }
        if batch.seq < self.st.held_chosen.get(&batch.origin).copied().unwrap_or(0) {
            self.ack_held(ctx, batch.origin, batch.seq);
        }
        self.on_ship(ctx, batch);
    }

    fn ack_held(&mut self, ctx: &mut Ctx<'_, Slog>, origin: u32, seq: u64) {
        ctx.send(self.leaders[origin as usize], Msg::Replicated { seq });
    }

    /// The pair holds own batches: those in order from the first not yet
    /// shipped go out (a client hears of a commit only after its batch is
    /// in two regions, SLOG §3.2's SLOG-HA).
    fn on_replicated(&mut self, ctx: &mut Ctx<'_, Slog>, seq: u64) {
        if seq >= self.st.shipped && seq < self.st.own_chosen {
            self.st.pair_acked.insert(seq);
        }
        while self.st.pair_acked.remove(&self.st.shipped) {
            let next = self.st.shipped;
            self.ship(ctx, next);
        }
    }

    /// Any holder's copy of a batch: the origin's own (once out), a
    /// pair's, or one placed here.
    fn batch_held(&self, id: BatchId) -> Option<&Arc<LocalBatch>> {
        if id.region == self.index {
            let out = self.st.shipped.max(self.st.placed_count.get(&self.index).copied().unwrap_or(0));
            return self.st.own.get(id.seq as usize).filter(|_| id.seq < out);
        }
        let held = self.st.held_for.get(&id.region).and_then(|h| h.get(id.seq as usize));
        held.or_else(|| self.st.placed_at.get(&id).map(|pos| &self.st.placed[*pos]))
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
        let id = TxnId { node: self.group[0], seq: meridian_core::ids::fnv1a(&name) >> 1 | 1 << 62 };
        let mut txn = Txn::remaster(id, key, from, to, &self.topo);
        txn.deps = self.lookup.get(&key).map(|(_, s)| s.batch).into_iter().collect();
        txn.orderer_batches = self.orderer_placed();
        self.on_forward(ctx, Arc::new(txn));
    }

    /// The Lookup Master's asynchronous update (§3.4), at every member.
    fn on_remastered(&mut self, key: Key, header: Header, since: Since) {
        if self.lookup(key).counter < header.counter {
            self.lookup.insert(key, (header, since));
        }
    }

    /// The orderer's batches this region has placed.
    fn orderer_placed(&self) -> u64 {
        self.st.placed_count.get(&0).copied().unwrap_or(0)
    }

    // ---- ReceiveBatch (SLOG Figure 2): the region's global log ----

    /// A batch of any local log: placed once every earlier batch of its
    /// log is, and every batch its head names.
    fn receive_batch(&mut self, ctx: &mut Ctx<'_, Slog>, batch: Arc<LocalBatch>) {
        for b in self.st.inorder.accept((*batch).clone()) {
            self.st.waiting.entry(b.origin).or_default().push_back(Arc::new(b));
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
            .all(|id| self.st.placed_count.get(&id.region).is_some_and(|n| *n > id.seq))
    }

    /// Places every waiting batch whose dependencies are placed. A batch
    /// depends only on batches cut before it (a remaster executed before
    /// the transaction relying on it was annotated), so this never waits
    /// in a cycle.
    fn place_ready(&mut self, ctx: &mut Ctx<'_, Slog>) {
        while self.leading {
            let ready: Vec<u32> = self
                .st
                .waiting
                .iter()
                .filter(|(_, q)| q.front().is_some_and(|b| self.deps_placed(b)))
                .map(|(o, _)| *o)
                .collect();
            if ready.is_empty() {
                return;
            }
            for origin in ready {
                let q = self.st.waiting.get_mut(&origin).expect("waiting");
                let b = q.pop_front().expect("a front");
                if q.is_empty() {
                    self.st.waiting.remove(&origin);
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
        if !self.propose(ctx, RegionRecord::Placed(Arc::clone(&batch))) {
            return;
        }
        if batch.origin == 0 {
            self.insert_lock_onlys(ctx, &batch);
            self.release_held_back(ctx);
        }
    }

    fn insert_lock_onlys(&mut self, ctx: &mut Ctx<'_, Slog>, batch: &LocalBatch) {
        for e in &batch.items {
            let Entry::MultiHome(txn) = e else { continue };
            if txn.homes.binary_search(&self.region).is_ok() && self.st.lock_only.insert(txn.id) {
                ctx.count("lock_only_txns", 1);
                self.insert(ctx, Entry::LockOnly { txn: Arc::clone(txn), home: self.region });
            }
        }
    }

    fn on_ship(&mut self, ctx: &mut Ctx<'_, Slog>, batch: Arc<LocalBatch>) {
        if batch.origin as usize >= self.leaders.len() || batch.seq < self.st.inorder.next_seq(batch.origin) {
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
        if !self.leading {
            return;
        }
        let mut tips = vec![(self.index, self.st.shipped)];
        tips.extend(self.paired_for.iter().map(|o| (*o, self.st.held_chosen.get(o).copied().unwrap_or(0))));
        for (i, leader) in self.leaders.iter().enumerate() {
            if i as u32 == self.index {
                continue;
            }
            for (origin, next_seq) in &tips {
                ctx.send(*leader, Msg::Tip { origin: *origin, next_seq: *next_seq });
            }
        }
        if let Some(pair) = self.pair {
            for seq in self.st.shipped..self.st.own_chosen {
                ctx.send(self.leaders[pair as usize], Msg::Replicate(Arc::clone(&self.st.own[seq as usize])));
            }
        }
        for (origin, tip) in &self.tips {
            let next = self.st.inorder.next_seq(*origin);
            for seq in (next..(*tip).min(next + FETCH_MAX)).filter(|s| !self.st.inorder.has(*origin, *s)) {
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
        let pair = self.pairs.get(origin as usize).copied().flatten().filter(|p| *p != self.index);
        std::iter::once(origin).chain(pair).map(|i| self.leaders[i as usize]).collect()
    }

    fn on_tip(&mut self, origin: u32, next_seq: u64) {
        if origin as usize >= self.leaders.len() || origin == self.index {
            return;
        }
        let tip = self.tips.entry(origin).or_insert(0);
        *tip = (*tip).max(next_seq);
    }

    /// Notes who leads the group `from` belongs to (its tips say so).
    fn heard_leader(&mut self, from: NodeId) {
        let region = self.topo.region_of(from);
        if region != self.region && self.topo.service(super::SEQUENCER).contains(&from) {
            let i = self.index_of(region);
            self.leaders[i as usize] = from;
        }
    }

    // ---- the global log, to the region's replicas ----

    /// Positions `pushed..upto` (chosen) to every replica of the region.
    fn push(&mut self, ctx: &mut Ctx<'_, Slog>, upto: u64) {
        let range = self.st.pushed..upto.max(self.st.pushed);
        self.st.pushed = range.end;
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
                let batch = &self.st.placed[pos as usize];
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

    /// A replica asks for positions from `from` on; any member answers with
    /// chosen ones, and the answer, even empty, tells the replica this
    /// member is alive.
    fn on_fetch_log(&mut self, ctx: &mut Ctx<'_, Slog>, from_node: NodeId, shard: ShardId, from: u64) {
        let to = (from + LOG_CHUNK).min(self.st.placed_chosen).max(from);
        let entries = self.entries(from..to, shard);
        ctx.count("log_fetches", entries.len() as u64);
        ctx.send(from_node, Msg::Log { shard, entries });
    }

    // ---- restart ----

    /// The LockOnlyTxns the orderer's placed batches asked of this region
    /// after the last one its local log holds (they went down with the
    /// open batch), inserted again in the same order.
    fn reinsert_lock_onlys(&mut self, ctx: &mut Ctx<'_, Slog>) {
        let last = self.st.own.iter().flat_map(|b| &b.items).rev().find_map(|e| match e {
            Entry::LockOnly { txn, .. } => Some(txn.id),
            _ => None,
        });
        let multi_homes: Vec<Arc<Txn>> = self
            .st
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
            if self.st.lock_only.insert(txn.id) {
                ctx.count("lock_only_txns", 1);
                self.insert(ctx, Entry::LockOnly { txn: Arc::clone(txn), home: self.region });
            }
        }
    }

    /// A message only the leader acts on: acted on, or passed on to it.
    fn for_leader(&mut self, ctx: &mut Ctx<'_, Slog>, from: NodeId, msg: Msg) {
        if !self.leading {
            return self.relay(ctx, from, msg);
        }
        match msg {
            Msg::Submit { id, program, recon } => self.on_submit(ctx, id, program, recon),
            Msg::Forward(txn) => self.on_forward(ctx, txn),
            Msg::Ship(batch) => self.on_ship(ctx, batch),
            Msg::Tip { origin, next_seq } => self.on_tip(origin, next_seq),
            Msg::Replicate(batch) => self.on_replicate(ctx, batch),
            Msg::Replicated { seq } => self.on_replicated(ctx, seq),
            Msg::RemasterRequest { key, from: header, to } => self.on_remaster_request(ctx, key, header, to),
            other => unreachable!("not a leader's message: {other:?}"),
        }
    }
}

impl Process<Slog> for Sequencer {
    fn on_start(&mut self, ctx: &mut Ctx<'_, Slog>, durable: Vec<Record>) {
        let records = durable.into_iter().map(|r| match r {
            Record::Paxos(p) => p.body,
            Record::Epoch(_) | Record::Executed { .. } | Record::Checkpoint(_) => {
                unreachable!("a replica's or client's record at a sequencer")
            }
        });
        self.paxos.start(&mut Mapped::new(ctx), records);
        self.drain(ctx);
        ctx.set_timer(self.cfg.batch_ns, Timer::Batch);
        ctx.set_timer(self.cfg.sequencer_tick_ns, Timer::SequencerTick);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Slog>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Paxos(m) => self.paxos.on_message(&mut Mapped::new(ctx), from, m),
            Msg::Tip { .. } => {
                self.heard_leader(from);
                self.for_leader(ctx, from, msg);
            }
            Msg::Submit { .. }
            | Msg::Forward(_)
            | Msg::Ship(_)
            | Msg::Replicate(_)
            | Msg::Replicated { .. }
            | Msg::RemasterRequest { .. } => self.for_leader(ctx, from, msg),
            Msg::FetchBatch { id } => {
                if let Some(b) = self.batch_held(id) {
                    ctx.send(from, Msg::Ship(Arc::clone(b)));
                }
            }
            Msg::FetchLog { shard, from: pos } => self.on_fetch_log(ctx, from, shard, pos),
            Msg::Remastered { key, header, since } => self.on_remastered(key, header, since),
            // Messages to replicas and clients.
            Msg::Log { .. }
            | Msg::Reads { .. }
            | Msg::ReadsWanted { .. }
            | Msg::Reply { .. }
            | Msg::Restart { .. }
            | Msg::Leader { .. }
            | Msg::Query { .. }
            | Msg::ReconRead { .. }
            | Msg::ReconValues { .. } => {}
        }
        self.drain(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Slog>, timer: Timer) {
        match timer {
            Timer::Paxos(t) => self.paxos.on_timer(&mut Mapped::new(ctx), t),
            Timer::Batch => self.on_batch_timer(ctx),
            Timer::SequencerTick => self.on_tick(ctx),
            Timer::ReplicaTick | Timer::ClientTick | Timer::Remaster => {
                unreachable!("a replica's or client's timer at a sequencer")
            }
        }
        self.drain(ctx);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, Slog>, upto: Lsn) {
        self.paxos.on_persisted(&mut Mapped::new(ctx), upto);
        self.drain(ctx);
    }

    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("open_batch", self.st.builder.open_len());
        out("local_log", self.st.own.len());
        out("global_log", self.st.placed.len());
        out("chosen_records", self.chosen.len());
        out("batches_held", self.st.inorder.held());
        out("batches_waiting", self.st.waiting.values().map(VecDeque::len).sum());
        out("lookup", self.lookup.len());
        out("held_back", self.st.held_back.len());
        out("pair_acked", self.st.pair_acked.len());
        out("annotated", self.st.annotated.len());
        self.paxos.state_sizes(out);
    }

    fn check_invariants(&self) {
        self.paxos.check_invariants();
        let st = &self.st;
        assert!(st.builder.open_len() <= self.cfg.batch_txns_max, "a batch past its bound");
        assert!(st.pushed <= st.placed_chosen, "pushed a placement not chosen");
        assert!(st.placed_chosen <= st.placed.len() as u64, "chosen past the placed log");
        assert!(st.shipped <= st.own_chosen, "shipped only chosen batches");
        assert!(st.own_chosen <= st.own.len() as u64, "chosen past the local log");
        if self.leading {
            assert_eq!(st.builder.next_seq(), st.own.len() as u64, "the next batch follows the local log");
        } else {
            assert_eq!(st.builder.open_len(), 0, "only the leader batches");
            assert_eq!(st.placed_chosen, st.placed.len() as u64, "a follower holds chosen placements only");
            assert_eq!(st.own_chosen, st.own.len() as u64, "a follower holds chosen batches only");
        }
        for b in st.own.iter().rev().take(CHECKED_MAX) {
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
