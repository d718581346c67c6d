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
//!
//! What the region needs no more is forgotten (Calvin §5 replays the input
//! from a checkpoint; nothing in SLOG needs more): the leader proposes a
//! `RegionRecord::Forget` of the global log's positions before the
//! region's copies' durable checkpoints (`Readers`: for each shard its
//! most advanced copy in the region, which a lagging one installs —
//! another region's global log interleaves the local logs differently, so
//! only a copy of the same region will do), and of the batches of the
//! local logs it holds (its own; SLOG-HA, its pairs') that every region
//! has placed (`Progress`, from every region's leader each tick). The
//! group's Paxos log is compacted behind the chosen state (`GroupState`)
//! every `checkpoint_every_slots` slots: a restarted member, or one that
//! lagged behind the compacted log, restores it (`PaxosEvent::Restore`).
//! Bounds: the global log holds the positions since the region's copies'
//! checkpoints (every `checkpoint_txns` transactions; while every copy of a
//! shard in the region is down, everything since its last one); a local
//! log, the batches not yet placed everywhere (a partitioned region holds
//! them until it is back); the transactions inserted and annotated, each
//! client's down to its floor (the lowest id it still waits for, carried by
//! its transactions: `meridian_mechanisms::client_floors`), at most
//! `txns_remembered` per client.

use super::messages::{
    BatchId, Entry, GroupState, LocalBatch, LogEntry, Msg, Record, RegionRecord, SNAPSHOTS, Since, Timer, Txn, Window,
    batch_id,
};
use super::{Config, Slog};
use crate::readers::Readers;
use meridian_core::procedure::Recon;
use meridian_core::process::CHECKED_MAX;
use meridian_core::{
    Ctx, Key, KeyLayout, Lsn, Mapped, NodeId, Process, Program, ReadMode, RegionId, ShardId, Topology, TxnId,
};
use meridian_mechanisms::batch_stream::{BatchBuilder, InOrder};
use meridian_mechanisms::client_floors::ClientFloors;
use meridian_mechanisms::paxos::{MultiPaxos, PaxosEvent};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use super::messages::Header;

/// Most log positions in one `Log` message.
pub const LOG_CHUNK: u64 = 256;

/// Most batches of one origin fetched per tick.
const FETCH_MAX: u64 = 16;

/// Most annotations in one `Annotated` record.
const ANNOTATIONS_PER_RECORD: usize = 1024;

/// The transaction an entry of a local log inserts (not a head entry).
fn txn_id(entry: &Entry) -> TxnId {
    entry.txn().expect("a transaction's entry").id
}

/// The region's logs as a member has them, and the leader's work in
/// progress. At a member that does not lead it is exactly what the chosen
/// records make of the logs; at the leader it holds its own proposals too,
/// and the chosen state is kept beside it (`Sequencer::chosen`), to go back
/// to when it loses the lead and to checkpoint the group's Paxos log.
#[derive(Clone)]
struct State {
    builder: BatchBuilder<Entry>,
    /// Transactions in this region's local log (a resubmission is
    /// dropped), down to their clients' floors.
    inserted: ClientFloors<()>,
    /// Transactions waiting for this region to reach the orderer's batches
    /// the remasters they rely on had seen (`Since`).
    held_back: VecDeque<Entry>,
    /// Multi-home transactions placed whose LockOnlyTxn this region (one of
    /// their homes) has not yet inserted in its local log: what a new
    /// leader inserts again.
    lock_only_due: VecDeque<Arc<Txn>>,
    /// Annotations of transactions received here, reused on resubmission
    /// so that a retry goes where the first attempt went; down to their
    /// clients' floors (a submission below one is dropped).
    annotated: ClientFloors<Arc<Txn>>,
    /// Annotations the leader queued or proposed and has not yet seen
    /// chosen: the transaction leaves then (a retry meanwhile waits for it).
    annotating: BTreeSet<TxnId>,
    /// Annotations waiting for the record in flight to be chosen (the
    /// leader's; at most `ANNOTATIONS_PER_RECORD` before one is proposed
    /// anyway).
    annotation_queue: Vec<Arc<Txn>>,
    /// `Annotated` records the leader proposed and has not seen chosen.
    annotations_in_flight: u32,
    /// This region's local log, by number from the first not forgotten,
    /// and how many of its batches are chosen (the rest are the leader's
    /// proposals: none leaves the group before it is chosen).
    own: Window,
    own_chosen: u64,
    /// Own batches shipped by this leader (SLOG-HA: once the pair held them).
    shipped: u64,
    /// SLOG-HA: own batches the pair acknowledged, not yet shipped.
    pair_acked: BTreeSet<u64>,
    /// SLOG-HA: the logs this region is the pair of, their batches held
    /// here (`held_chosen`: how many of them are chosen).
    held_for: BTreeMap<u32, Window>,
    held_chosen: BTreeMap<u32, u64>,
    inorder: InOrder<Entry>,
    /// Per local log, batches delivered in order that wait for a batch
    /// they depend on (`Entry::After`) to be placed.
    waiting: BTreeMap<u32, VecDeque<Arc<LocalBatch>>>,
    /// Per local log, the batches placed.
    placed_count: BTreeMap<u32, u64>,
    /// The region's global log: the batch placed at each position (from
    /// the first not forgotten), where each kept batch stands, and how many
    /// positions are chosen (the rest are the leader's proposals).
    placed: Window,
    placed_at: BTreeMap<BatchId, u64>,
    placed_chosen: u64,
    /// Positions pushed to the replicas (the leader's).
    pushed: u64,
}

impl State {
    fn new(index: u32, cfg: &Config) -> State {
        State {
            builder: BatchBuilder::new(index, cfg.batch_txns_max, cfg.batch_ns),
            inserted: ClientFloors::new(cfg.txns_remembered),
            held_back: VecDeque::new(),
            lock_only_due: VecDeque::new(),
            annotated: ClientFloors::new(cfg.txns_remembered),
            annotating: BTreeSet::new(),
            annotation_queue: Vec::new(),
            annotations_in_flight: 0,
            own: Window::default(),
            own_chosen: 0,
            shipped: 0,
            pair_acked: BTreeSet::new(),
            held_for: BTreeMap::new(),
            held_chosen: BTreeMap::new(),
            inorder: InOrder::new(cfg.held_batches_max),
            waiting: BTreeMap::new(),
            placed_count: BTreeMap::new(),
            placed: Window::default(),
            placed_at: BTreeMap::new(),
            placed_chosen: 0,
            pushed: 0,
        }
    }

    /// The state a checkpoint of the group's log left (every count
    /// chosen): what a restarted member, or one that lagged behind the
    /// compacted log, goes on from.
    fn restore(g: &GroupState, index: u32, cfg: &Config) -> State {
        let mut st = State::new(index, cfg);
        st.inserted = g.inserted.clone();
        st.annotated = g.annotated.clone();
        st.lock_only_due = g.lock_only_due.iter().cloned().collect();
        st.own = g.own.clone();
        st.own_chosen = st.own.next();
        st.held_for = g.held.clone();
        st.held_chosen = g.held.iter().map(|(o, w)| (*o, w.next())).collect();
        st.placed_count = g.placed_count.clone();
        for (origin, n) in g.placed_count.iter().filter(|(o, _)| **o != SNAPSHOTS) {
            st.inorder.skip_to(*origin, *n);
        }
        st.placed = g.placed.clone();
        st.placed_at = (st.placed.base..).zip(&st.placed.batches).map(|(pos, b)| (batch_id(b), pos)).collect();
        st.placed_chosen = st.placed.next();
        st.pushed = st.placed_chosen;
        st
    }

    /// The chosen state as a checkpoint holds it (at a member that does
    /// not lead, or the leader's `chosen`).
    fn checkpoint(&self) -> GroupState {
        debug_assert_eq!(self.placed_chosen, self.placed.next(), "a checkpoint of chosen records only");
        GroupState {
            inserted: self.inserted.clone(),
            annotated: self.annotated.clone(),
            own: self.own.clone(),
            held: self.held_for.clone(),
            placed_count: self.placed_count.clone(),
            placed: self.placed.clone(),
            lock_only_due: self.lock_only_due.iter().cloned().collect(),
        }
    }

    /// Entries a checkpoint copies (its transaction sets share their
    /// chunks and are not counted).
    fn checkpoint_entries(&self) -> usize {
        let (positions, batches) = self.kept();
        positions + batches + self.lock_only_due.len()
    }

    /// The global log's positions kept, and the local logs' batches.
    fn kept(&self) -> (usize, usize) {
        let held: usize = self.held_for.values().map(|w| w.batches.len()).sum();
        (self.placed.batches.len(), self.own.batches.len() + held)
    }

    fn held_next(&self, origin: u32) -> u64 {
        self.held_for.get(&origin).map_or(0, Window::next)
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

    /// Whether a chosen record follows on from the chosen records before
    /// it. A leader's records always do; but a deposed leader's pipelined
    /// proposals can be chosen with a gap (an earlier slot became a no-op
    /// under its successor), or after its successor's records (a later
    /// leader's phase 1 found them accepted at the deposed leader alone,
    /// in slots its predecessor never reached), and every member skips
    /// those alike: its batches come again, and its successor places them.
    fn applies(&self, record: &RegionRecord) -> bool {
        match record {
            RegionRecord::Batch(b) => b.seq == self.own.next() && self.batch_follows_on(b),
            RegionRecord::Placed(b) => {
                b.origin == SNAPSHOTS || (self.inorder.next_seq(b.origin) == b.seq && self.deps_placed(b))
            }
            RegionRecord::Held(b) => b.seq == self.held_next(b.origin),
            // Each annotation joins unless its transaction has one (`apply`).
            RegionRecord::Annotated(_) => true,
            RegionRecord::Forget { .. } => true,
        }
    }

    /// Whether a batch of this region's local log was cut from the chosen
    /// log before it: its LockOnlyTxns are the next ones the orderer's
    /// placed batches ask of this region, in the orderer's order (§3.3),
    /// and none of its transactions is in the local log already. A batch
    /// a deposed leader cut from a history its successor replaced can
    /// carry the next number and still fail both (swarm seed 95130: it
    /// held a LockOnlyTxn whose predecessors in the orderer's order the
    /// successor's batches had not inserted; inserted later, they stood
    /// after it, and two multi-home transactions waited for each other in
    /// every region).
    fn batch_follows_on(&self, b: &LocalBatch) -> bool {
        let mut due = self.lock_only_due.iter();
        b.items.iter().all(|e| match e {
            Entry::LockOnly { txn, .. } => due.next().is_some_and(|d| d.id == txn.id),
            Entry::SingleHome(t) | Entry::MultiHome(t) => !self.inserted.contains(t.id),
            Entry::After(_) | Entry::Snapshot(_) => true,
        })
    }

    /// A record joins the logs of the member of `region` (a chosen one
    /// that `applies`, or the leader's proposal).
    fn apply(&mut self, record: &RegionRecord, region: RegionId) {
        match record {
            RegionRecord::Batch(b) => self.apply_batch(b, region),
            RegionRecord::Placed(b) => self.apply_placed(b, region),
            RegionRecord::Annotated(ts) => {
                // A deposed leader's annotation of a transaction its
                // successor annotated already would send a retry to another
                // log: the first one chosen stays.
                for t in ts {
                    if !self.annotated.contains(t.id) {
                        self.annotated.insert(t.id, Arc::clone(t));
                        self.annotated.raise(t.id.node, t.client_floor);
                    }
                }
            }
            RegionRecord::Held(b) => {
                let held = self.held_for.entry(b.origin).or_default();
                assert_eq!(b.seq, held.next(), "held batches are chosen in order");
                held.push(Arc::clone(b));
            }
            RegionRecord::Forget { placed_below, own_below, held_below } => {
                self.forget(*placed_below, *own_below, held_below)
            }
        }
    }

    fn apply_batch(&mut self, b: &Arc<LocalBatch>, region: RegionId) {
        assert_eq!(b.seq, self.own.next(), "own batches are chosen in order");
        for e in &b.items {
            match e {
                Entry::LockOnly { txn, .. } => {
                    let due = self.lock_only_due.pop_front().expect("a LockOnlyTxn is due");
                    assert_eq!(due.id, txn.id, "LockOnlyTxns in the orderer's order");
                }
                Entry::SingleHome(t) | Entry::MultiHome(t) => {
                    if t.origin == region && t.remaster.is_none() {
                        self.annotated.insert(t.id, Arc::clone(t));
                        self.annotated.raise(t.id.node, t.client_floor);
                    }
                    self.inserted.insert(t.id, ());
                    self.inserted.raise(t.id.node, t.client_floor);
                }
                Entry::After(_) | Entry::Snapshot(_) => {}
            }
        }
        self.own.push(Arc::clone(b));
    }

    fn apply_placed(&mut self, b: &Arc<LocalBatch>, region: RegionId) {
        // The leader delivered it in order already; a follower learns each
        // log's order from the placements alone.
        if b.origin != SNAPSHOTS && self.inorder.next_seq(b.origin) == b.seq {
            let delivered = self.inorder.accept((**b).clone());
            assert_eq!(delivered.len(), 1, "a follower holds no batch out of order");
        }
        assert!(b.origin == SNAPSHOTS || self.inorder.next_seq(b.origin) > b.seq, "placed in order");
        *self.placed_count.entry(b.origin).or_insert(0) += 1;
        self.placed_at.insert(batch_id(b), self.placed.next());
        self.placed.push(Arc::clone(b));
        if b.origin == 0 {
            for e in &b.items {
                let Entry::MultiHome(t) = e else { continue };
                if t.homes.binary_search(&region).is_ok() {
                    self.lock_only_due.push_back(Arc::clone(t));
                }
            }
        }
    }

    /// Forgets what a `Forget` record says the region needs no more.
    fn forget(&mut self, placed_below: u64, own_below: u64, held_below: &[(u32, u64)]) {
        for b in self.placed.forget_below(placed_below.min(self.placed_chosen)) {
            self.placed_at.remove(&batch_id(&b));
        }
        self.own.forget_below(own_below.min(self.own_chosen));
        for (origin, below) in held_below {
            let chosen = self.held_chosen.get(origin).copied().unwrap_or(0);
            if let Some(w) = self.held_for.get_mut(origin) {
                w.forget_below((*below).min(chosen));
            }
        }
    }

    /// What every member counts of a chosen record.
    fn note_chosen(&mut self, record: &RegionRecord) {
        match record {
            RegionRecord::Placed(_) => self.placed_chosen += 1,
            RegionRecord::Held(b) => *self.held_chosen.entry(b.origin).or_insert(0) += 1,
            RegionRecord::Batch(_) => self.own_chosen += 1,
            RegionRecord::Annotated(_) | RegionRecord::Forget { .. } => {}
        }
        assert!(self.placed_chosen <= self.placed.next(), "chosen past the placed log");
    }

    /// A chosen record at a member that does not lead (or the leader's
    /// `chosen`): applied if it follows on.
    fn apply_chosen(&mut self, record: &RegionRecord, region: RegionId) -> bool {
        if !self.applies(record) {
            return false;
        }
        self.apply(record, region);
        self.note_chosen(record);
        true
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
    paxos: MultiPaxos<RegionRecord, GroupState>,
    /// The leader's chosen state (its `st` holds its proposals too): what
    /// it goes back to when it loses the lead, and what its checkpoints
    /// hold. `None` at a member that does not lead, whose `st` is it.
    chosen: Option<Box<State>>,
    /// This member leads its group (and its state holds its proposals).
    leading: bool,
    st: State,
    ticks: u64,
    /// The durable checkpoint position of every replica of the region.
    readers: Readers,
    /// Per other region (by index), how many batches of each local log it
    /// has placed, as it last said (`Progress`).
    progress: BTreeMap<u32, BTreeMap<u32, u64>>,
    /// The tick the leader last proposed a `Forget` (once a tick at most).
    forget_proposed: Option<u64>,
}

impl Sequencer {
    pub fn new(topo: Arc<Topology>, me: NodeId, cfg: Config) -> Sequencer {
        let region = topo.region_of(me);
        let groups = super::groups(&topo);
        let index = groups.iter().position(|g| g.contains(&me)).expect("a sequencer") as u32;
        let group = groups[index as usize].clone();
        let feeds: Vec<(NodeId, ShardId)> = topo
            .all_replicas()
            .filter(|r| topo.region_of(*r) == region)
            .map(|r| (r, topo.replica_of(r).expect("a replica").0))
            .collect();
        let paxos = MultiPaxos::new(index, group.clone(), me, 0, cfg.paxos);
        Sequencer {
            readers: Readers::new(&feeds),
            progress: BTreeMap::new(),
            forget_proposed: None,
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
            chosen: None,
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
        self.st.placed.next()
    }

    /// The first position of the region's global log still kept.
    pub fn log_base(&self) -> u64 {
        self.st.placed.base
    }

    /// The batch at each position of the region's global log still kept.
    pub fn global_log(&self) -> impl Iterator<Item = BatchId> + '_ {
        self.st.placed.batches.iter().map(|b| batch_id(b))
    }

    /// The first batch of this region's local log still kept.
    pub fn local_log_base(&self) -> u64 {
        self.st.own.base
    }

    /// The Lookup Master's header for `key` (SLOG §3.2).
    fn lookup(&self, key: Key) -> Header {
        self.lookup.get(&key).map_or(Header { home: self.layout.home_of(key), counter: 0 }, |(h, _)| *h)
    }

    /// Annotates a new transaction (`ReceiveNewTxn`): every granule's
    /// header, and the batches of the remasters those headers rely on.
    fn annotate(&self, id: TxnId, program: Program, recon: Option<Arc<Recon>>, floor: u64) -> Txn {
        let mut txn = Txn::with_recon(id, program, recon, self.region, &self.topo, |k| self.lookup(k));
        txn.client_floor = floor.min(id.seq);
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
        self.st.apply(&record, self.region);
        true
    }

    /// What the leader does once its record is chosen: only now may the
    /// region's decision be seen outside the group.
    fn act(&mut self, ctx: &mut Ctx<'_, Slog>, record: &RegionRecord) {
        match record {
            RegionRecord::Batch(b) => self.replicate_or_ship(ctx, b.seq),
            RegionRecord::Placed(_) => self.push(ctx, self.st.placed_chosen),
            RegionRecord::Annotated(ts) => {
                for t in ts {
                    self.st.annotating.remove(&t.id);
                }
                self.route_all(ctx, ts);
                self.st.annotations_in_flight = self.st.annotations_in_flight.saturating_sub(1);
                self.propose_annotations(ctx);
            }
            RegionRecord::Held(b) => self.ack_held(ctx, b.origin, b.seq),
            RegionRecord::Forget { .. } => {}
        }
    }

    /// After every event: what the group's Paxos log decided; then the
    /// group's Paxos log is compacted behind the chosen state, and the
    /// leader proposes to forget what the region needs no more.
    fn drain(&mut self, ctx: &mut Ctx<'_, Slog>) {
        for event in self.paxos.drain_events() {
            match event {
                PaxosEvent::Committed { value, .. } => self.on_chosen(ctx, &value),
                PaxosEvent::LeaderReady { ballot } => {
                    if ballot.round > 1 {
                        ctx.count("sequencer_takeovers", 1);
                    }
                    self.leading = true;
                    self.chosen = Some(Box::new(self.st.clone()));
                    self.resume(ctx);
                }
                PaxosEvent::Deposed => {
                    self.leading = false;
                    // Its proposals may not be chosen, and its open batch
                    // is lost: clients retry.
                    if let Some(chosen) = self.chosen.take() {
                        self.st = *chosen;
                    }
                }
                PaxosEvent::Restore { state, .. } => self.restore(ctx, &state),
            }
        }
        self.checkpoint(ctx);
        self.forget(ctx);
    }

    /// A chosen record: the leader's own proposal (applied already) now
    /// acted on, and joining its chosen state; at another member, applied
    /// if it follows on.
    fn on_chosen(&mut self, ctx: &mut Ctx<'_, Slog>, record: &RegionRecord) {
        if let Some(chosen) = self.chosen.as_mut() {
            let kept = chosen.kept();
            let applied = chosen.apply_chosen(record, self.region);
            debug_assert!(applied, "a leader's records follow on");
            if matches!(record, RegionRecord::Forget { .. }) {
                let (positions, batches) = (kept.0 - chosen.kept().0, kept.1 - chosen.kept().1);
                ctx.count("positions_forgotten", positions as u64);
                ctx.count("batches_forgotten", batches as u64);
            }
            self.st.note_chosen(record);
            self.act(ctx, record);
        } else if !self.st.apply_chosen(record, self.region) {
            ctx.count("records_skipped", 1);
        }
    }

    /// A checkpoint of the group's log (a restart's, or a peer's for a
    /// member that lagged behind the compacted log): the chosen state.
    fn restore(&mut self, ctx: &mut Ctx<'_, Slog>, state: &GroupState) {
        self.st = State::restore(state, self.index, &self.cfg);
        if self.leading {
            self.chosen = Some(Box::new(self.st.clone()));
            self.resume(ctx);
        }
    }

    /// The chosen state, as a checkpoint holds it.
    fn chosen_state(&self) -> &State {
        self.chosen.as_deref().unwrap_or(&self.st)
    }

    /// Compacts the group's Paxos log behind the chosen state, every
    /// `checkpoint_every_slots` slots (and no more often than the state has
    /// entries).
    fn checkpoint(&mut self, ctx: &mut Ctx<'_, Slog>) {
        if self.paxos.should_compact(self.chosen_state().checkpoint_entries()) {
            let (upto, state) = (self.paxos.delivered_upto(), self.chosen_state().checkpoint());
            self.paxos.compact(&mut Mapped::new(ctx), upto, state);
        }
    }

    /// The leader proposes to forget, once a tick at most, the global
    /// log's positions before the region's copies' durable checkpoints
    /// (`Readers`: for each shard its most advanced copy here, which a
    /// lagging one installs), and the batches of the local logs it holds
    /// (its own, SLOG-HA its pairs') that every region has placed.
    fn forget(&mut self, ctx: &mut Ctx<'_, Slog>) {
        if !self.leading || self.forget_proposed == Some(self.ticks) {
            return;
        }
        let chosen = self.chosen_state();
        let placed_below = self.readers.below().min(chosen.placed_chosen);
        let own_below = self.placed_everywhere(self.index).min(chosen.own_chosen);
        let held_below: Vec<(u32, u64)> = chosen
            .held_for
            .iter()
            .map(|(o, w)| (*o, self.placed_everywhere(*o).min(w.next())))
            .filter(|(o, below)| *below > chosen.held_for[o].base)
            .collect();
        if placed_below > chosen.placed.base || own_below > chosen.own.base || !held_below.is_empty() {
            self.forget_proposed = Some(self.ticks);
            self.propose(ctx, RegionRecord::Forget { placed_below, own_below, held_below });
        }
    }

    /// How many batches of local log `origin` every region has placed (as
    /// each last said; this one's chosen count).
    fn placed_everywhere(&self, origin: u32) -> u64 {
        let here = self.chosen_state().placed_count.get(&origin).copied().unwrap_or(0);
        let others = (0..self.leaders.len() as u32).filter(|i| *i != self.index);
        others.map(|i| self.progress.get(&i).and_then(|p| p.get(&origin)).copied().unwrap_or(0)).fold(here, u64::min)
    }

    /// A new leader (or a restarted one) takes the region's work up where
    /// the chosen records leave it: own batches not yet placed go out again
    /// (SLOG-HA: once the pair has them again), the pair's held batches
    /// are placed, and the LockOnlyTxns lost with an open batch are
    /// inserted again.
    fn resume(&mut self, ctx: &mut Ctx<'_, Slog>) {
        let own = self.st.own.next();
        self.st.builder = BatchBuilder::resume(self.index, own, self.cfg.batch_txns_max, self.cfg.batch_ns);
        self.st.pushed = self.st.placed_chosen;
        // First the LockOnlyTxns of the orderer's batches placed already:
        // those of the batches placed below come after them, in the
        // orderer's order (§3.3; swarm seed 90188 found them inverted, two
        // multi-home transactions then waiting for each other).
        self.reinsert_lock_onlys(ctx);
        let unplaced = self.st.inorder.next_seq(self.index)..own;
        self.st.shipped = unplaced.start;
        for seq in unplaced {
            self.replicate_or_ship(ctx, seq);
        }
        let held: Vec<Arc<LocalBatch>> = self.st.held_for.values().flat_map(|w| w.batches.iter()).cloned().collect();
        for b in held {
            self.receive_batch(ctx, b);
        }
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

    fn on_submit(
        &mut self,
        ctx: &mut Ctx<'_, Slog>,
        id: TxnId,
        program: Program,
        recon: Option<Arc<Recon>>,
        floor: u64,
    ) {
        if !super::runnable(&program) && recon.is_none() {
            ctx.count("submissions_refused", 1);
            return;
        }
        if self.st.annotated.below_floor(id) {
            // A late copy of a submission its client waits for no more.
            ctx.count("duplicates_dropped", 1);
            return;
        }
        if program.mode == ReadMode::Snapshot && program.is_read_only() {
            let txn = self.annotate(id, program.clone(), recon.clone(), floor);
            if txn.is_single_home() {
                return self.place_snapshot(ctx, txn);
            }
            // A snapshot of several homes' granules at one place of this
            // region's log could wait for a multi-home transaction while
            // holding what that one's later LockOnlyTxn needs: it runs as a
            // strict transaction instead.
        }
        if self.st.annotating.contains(&id) {
            return; // it leaves once its annotation is chosen
        }
        if let Some(t) = self.st.annotated.get(id) {
            // A retry goes where the first attempt went, as it went: a
            // fresh annotation could send it to another log, and run it
            // twice. One whose annotation is not chosen yet goes then.
            let t = Arc::clone(t);
            if !self.st.annotating.contains(&id) {
                self.route(ctx, t);
            }
            return;
        }
        let txn = Arc::new(self.annotate(id, program, recon, floor));
        if self.destination(&txn) == self.index {
            self.st.annotated.insert(id, Arc::clone(&txn));
            return self.on_forward(ctx, txn); // chosen with its batch
        }
        // Chosen before it leaves, so that a failover keeps it (above);
        // it is routed then (`act`).
        self.st.annotating.insert(id);
        self.st.annotation_queue.push(txn);
        self.propose_annotations(ctx);
    }

    /// Proposes the queued annotations as one record when none is in
    /// flight (or the queue is full): at low load each goes at once, under
    /// load one Paxos round of the group chooses many, as the paper's
    /// batching does for everything its sequencers log.
    fn propose_annotations(&mut self, ctx: &mut Ctx<'_, Slog>) {
        let queued = self.st.annotation_queue.len();
        if queued == 0 || (self.st.annotations_in_flight > 0 && queued < ANNOTATIONS_PER_RECORD) {
            return;
        }
        let group = std::mem::take(&mut self.st.annotation_queue);
        ctx.observe("annotations_per_record", group.len() as u64);
        let ids: Vec<TxnId> = group.iter().map(|t| t.id).collect();
        if self.propose(ctx, RegionRecord::Annotated(group)) {
            self.st.annotations_in_flight += 1;
        } else {
            // No longer leading: the clients retry at the new leader.
            for id in ids {
                self.st.annotating.remove(&id);
            }
        }
    }

    /// The local log a transaction goes to (a group's index): its home's,
    /// or the orderer's.
    fn destination(&self, txn: &Txn) -> u32 {
        txn.home().map_or(0, |home| self.index_of(home))
    }

    fn route(&mut self, ctx: &mut Ctx<'_, Slog>, txn: Arc<Txn>) {
        self.route_all(ctx, std::slice::from_ref(&txn));
    }

    /// Sends transactions to their local logs, one message per region.
    fn route_all(&mut self, ctx: &mut Ctx<'_, Slog>, txns: &[Arc<Txn>]) {
        let mut by_log: BTreeMap<u32, Vec<Arc<Txn>>> = BTreeMap::new();
        for t in txns {
            by_log.entry(self.destination(t)).or_default().push(Arc::clone(t));
        }
        for (to, txns) in by_log {
            if to == self.index {
                self.on_forward_all(ctx, txns);
            } else {
                ctx.send(self.leaders[to as usize], Msg::Forward(txns));
            }
        }
    }

    fn on_forward_all(&mut self, ctx: &mut Ctx<'_, Slog>, txns: Vec<Arc<Txn>>) {
        for t in txns {
            self.on_forward(ctx, t);
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
        if !self.st.inserted.insert(txn_id(&entry), ()) {
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
        assert_eq!(batch.seq, self.st.own.next(), "local-log batches are numbered in order");
        self.propose(ctx, RegionRecord::Batch(Arc::new(batch)));
    }

    /// A chosen own batch goes to the pair first (SLOG-HA), or out.
    fn replicate_or_ship(&mut self, ctx: &mut Ctx<'_, Slog>, seq: u64) {
        match self.pair {
            Some(pair) => ctx.send(self.leaders[pair as usize], Msg::Replicate(Arc::clone(self.own_batch(seq)))),
            None => self.ship(ctx, seq),
        }
    }

    /// Own batch `seq`: kept until every region has placed it, and only
    /// those not yet placed everywhere are shipped or replicated.
    fn own_batch(&self, seq: u64) -> &Arc<LocalBatch> {
        self.st.own.get(seq).expect("an own batch not placed everywhere is kept")
    }

    /// An own batch goes to every region, this one included.
    fn ship(&mut self, ctx: &mut Ctx<'_, Slog>, seq: u64) {
        let batch = Arc::clone(self.own_batch(seq));
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
        let held = self.st.held_next(batch.origin);
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
            return self.st.own.get(id.seq).filter(|_| id.seq < out);
        }
        let held = self.st.held_for.get(&id.region).and_then(|h| h.get(id.seq));
        held.or_else(|| self.st.placed_at.get(&id).and_then(|pos| self.st.placed.get(*pos)))
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
        self.st.deps_placed(batch)
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
            if txn.homes.binary_search(&self.region).is_ok() {
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
        let placed: Vec<(u32, u64)> = self.chosen_state().placed_count.iter().map(|(o, n)| (*o, *n)).collect();
        let mut tips = vec![(self.index, self.st.shipped)];
        tips.extend(self.paired_for.iter().map(|o| (*o, self.st.held_chosen.get(o).copied().unwrap_or(0))));
        for (i, leader) in self.leaders.iter().enumerate() {
            if i as u32 == self.index {
                continue;
            }
            ctx.send(*leader, Msg::Progress { placed: placed.clone() });
            for (origin, next_seq) in &tips {
                ctx.send(*leader, Msg::Tip { origin: *origin, next_seq: *next_seq });
            }
        }
        if let Some(pair) = self.pair {
            for seq in self.st.shipped..self.st.own_chosen {
                ctx.send(self.leaders[pair as usize], Msg::Replicate(Arc::clone(self.own_batch(seq))));
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
                let batch = self.st.placed.get(pos).expect("a kept position");
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
    /// member is alive. It reports where its durable checkpoint resumes;
    /// positions it needs that are forgotten are answered `Truncated`.
    fn on_fetch_log(&mut self, ctx: &mut Ctx<'_, Slog>, from_node: NodeId, shard: ShardId, from: u64, durable: u64) {
        self.readers.report(from_node, durable);
        // Every copy, not each shard's most advanced one: SLOG's replicas
        // have no other remedy for reads their peers dropped.
        let below = self.readers.every_copy_below();
        if self.readers.tell(from_node, below) {
            ctx.send(from_node, Msg::RegionDurable { below });
        }
        if from < self.st.placed.base {
            ctx.count("log_truncated", 1);
            ctx.send(from_node, Msg::Truncated { shard, base: self.st.placed.base });
            return;
        }
        let to = (from + LOG_CHUNK).min(self.st.placed_chosen).max(from);
        let entries = self.entries(from..to, shard);
        ctx.count("log_fetches", entries.len() as u64);
        ctx.send(from_node, Msg::Log { shard, entries });
    }

    /// Another region's leader says how many batches of each local log it
    /// has placed.
    fn on_progress(&mut self, from: NodeId, placed: Vec<(u32, u64)>) {
        let region = self.topo.region_of(from);
        if region == self.region || !self.topo.service(super::SEQUENCER).contains(&from) {
            return;
        }
        let i = self.index_of(region);
        let known = self.progress.entry(i).or_default();
        for (origin, n) in placed {
            let k = known.entry(origin).or_insert(0);
            *k = (*k).max(n);
        }
    }

    // ---- restart ----

    /// The LockOnlyTxns the orderer's placed batches asked of this region
    /// that no chosen batch of its local log holds (they went down with
    /// the open batch), inserted again in the same order.
    fn reinsert_lock_onlys(&mut self, ctx: &mut Ctx<'_, Slog>) {
        let due: Vec<Arc<Txn>> = self.st.lock_only_due.iter().cloned().collect();
        for txn in due {
            ctx.count("lock_only_txns", 1);
            self.insert(ctx, Entry::LockOnly { txn, home: self.region });
        }
    }

    /// A message only the leader acts on: acted on, or passed on to it.
    fn for_leader(&mut self, ctx: &mut Ctx<'_, Slog>, from: NodeId, msg: Msg) {
        if !self.leading {
            return self.relay(ctx, from, msg);
        }
        match msg {
            Msg::Submit { id, program, recon, floor } => self.on_submit(ctx, id, program, recon, floor),
            Msg::Forward(txns) => self.on_forward_all(ctx, txns),
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
            Msg::FetchLog { shard, from: pos, durable } => self.on_fetch_log(ctx, from, shard, pos, durable),
            Msg::Progress { placed } => self.on_progress(from, placed),
            Msg::Remastered { key, header, since } => self.on_remastered(key, header, since),
            // Messages to replicas and clients.
            Msg::Log { .. }
            | Msg::Truncated { .. }
            | Msg::FetchCheckpoint { .. }
            | Msg::Checkpoint { .. }
            | Msg::Reads { .. }
            | Msg::ReadsWanted { .. }
            | Msg::Reply { .. }
            | Msg::Restart { .. }
            | Msg::Leader { .. }
            | Msg::Query { .. }
            | Msg::ReconRead { .. }
            | Msg::ReconValues { .. }
            | Msg::RegionDurable { .. } => {}
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
        out("local_log", self.st.own.batches.len());
        out("global_log", self.st.placed.batches.len());
        out("placed_index", self.st.placed_at.len());
        out("held_for_pairs", self.st.held_for.values().map(|w| w.batches.len()).sum());
        out("lock_only_due", self.st.lock_only_due.len());
        out("inserted", self.st.inserted.len());
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
        st.inserted.check_invariants();
        st.annotated.check_invariants();
        assert!(st.annotation_queue.len() <= ANNOTATIONS_PER_RECORD, "annotations queued past their bound");
        assert!(st.annotation_queue.iter().all(|t| st.annotating.contains(&t.id)), "a queued annotation is pending");
        if !self.leading {
            assert!(st.annotation_queue.is_empty() && st.annotations_in_flight == 0, "only the leader annotates");
        }
        assert!(st.builder.open_len() <= self.cfg.batch_txns_max, "a batch past its bound");
        assert!(st.pushed <= st.placed_chosen, "pushed a placement not chosen");
        assert!(st.placed_chosen <= st.placed.next(), "chosen past the placed log");
        assert!(st.shipped <= st.own_chosen, "shipped only chosen batches");
        assert!(st.own_chosen <= st.own.next(), "chosen past the local log");
        assert_eq!(st.placed_at.len(), st.placed.batches.len(), "every kept position indexed");
        if self.leading {
            assert_eq!(st.builder.next_seq(), st.own.next(), "the next batch follows the local log");
        } else {
            assert_eq!(st.builder.open_len(), 0, "only the leader batches");
            assert_eq!(st.placed_chosen, st.placed.next(), "a follower holds chosen placements only");
            assert_eq!(st.own_chosen, st.own.next(), "a follower holds chosen batches only");
            assert!(self.chosen.is_none(), "a follower's state is the chosen one");
        }
        for b in st.own.batches.iter().rev().take(CHECKED_MAX) {
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
