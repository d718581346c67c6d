//! The messages, durable records and timers of `slog`.

use meridian_core::procedure::Recon;
use meridian_core::{Key, KeyList, NodeId, Outcome, Program, RegionId, RequestId, ShardId, Topology, TxnId, Value};
use meridian_mechanisms::batch_stream::Batch;
use meridian_mechanisms::client_floors::ClientFloors;
use meridian_mechanisms::paxos::{PaxosMsg, PaxosRecord, PaxosTimer};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// A granule's header (SLOG §3.2): the region mastering it when it was
/// last written, and how many times its master has changed. Every key is
/// a granule.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Header {
    pub home: RegionId,
    pub counter: u32,
}

/// Where the remaster that wrote a header stands: its batch (a batch
/// relying on the header is placed after it in every region) and how many
/// of the orderer's batches its home region had reached when it inserted
/// the remaster (a transaction relying on the header joins its own home's
/// local log only after that home reached as many: so every multi-home
/// transaction that locked the granule at its old home before the remaster
/// stands, at the new home, before the transactions relying on it).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Since {
    pub batch: BatchId,
    pub orderer_batches: u64,
}

/// A transaction as the region that received it annotated it
/// (`ReceiveNewTxn`, SLOG Figure 2): every granule with the header its
/// Lookup Master returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Txn {
    pub id: TxnId,
    pub program: Program,
    /// The region whose sequencer received it: it answers a multi-home
    /// transaction's client.
    pub origin: RegionId,
    /// Every key the transaction declares, sorted, with its assumed header.
    pub master_info: Vec<(Key, Header)>,
    /// The assumed home regions, sorted and distinct.
    pub homes: Vec<RegionId>,
    /// Every shard the transaction touches, sorted.
    pub shards: Vec<ShardId>,
    /// A remaster request (§3.4): the one granule of `master_info` moves to
    /// this region (the program is empty).
    pub remaster: Option<RegionId>,
    /// The batches holding the remasters its headers rely on: its batch
    /// is placed after them in every region (see `sequencer.rs`).
    pub deps: Vec<BatchId>,
    /// The orderer's batches its home must have reached before it joins
    /// the local log (see [`Since`]); for a remaster, those its home had
    /// reached when inserting it.
    pub orderer_batches: u64,
    /// The keys and versions a reconnaissance pass found, for a procedure
    /// whose keys depend on its reads (`crate::recon`): granules of the
    /// transaction too.
    pub recon: Option<Arc<Recon>>,
    /// The lowest id its client still waited for when it submitted it
    /// (`meridian_mechanisms::client_floors`): the logs forget the client's
    /// ids below it once it is applied.
    pub client_floor: u64,
}

impl Txn {
    /// Annotates `program` with `lookup`'s headers.
    pub fn new(
        id: TxnId,
        program: Program,
        origin: RegionId,
        topology: &Topology,
        lookup: impl Fn(Key) -> Header,
    ) -> Txn {
        Txn::with_recon(id, program, None, origin, topology, lookup)
    }

    /// Annotates `program` and the keys its reconnaissance found.
    pub fn with_recon(
        id: TxnId,
        program: Program,
        recon: Option<Arc<Recon>>,
        origin: RegionId,
        topology: &Topology,
        lookup: impl Fn(Key) -> Header,
    ) -> Txn {
        let shard_of = |k: Key| topology.shard_of(k);
        let mut shards = program.shards(shard_of);
        shards.extend(recon.iter().flat_map(|r| &r.keys).map(|n| shard_of(n.key)));
        shards.sort_unstable();
        shards.dedup();
        let mut txn = Txn {
            id,
            program,
            origin,
            master_info: Vec::new(),
            homes: Vec::new(),
            shards,
            remaster: None,
            deps: Vec::new(),
            orderer_batches: 0,
            recon,
            client_floor: 0,
        };
        let mut master_info: Vec<(Key, Header)> = Vec::new();
        for s in &txn.shards {
            let (reads, writes) = txn.keys_on(*s, topology);
            master_info.extend(reads.into_iter().chain(writes).map(|k| (k, lookup(k))));
        }
        master_info.sort_unstable();
        master_info.dedup_by_key(|(k, _)| *k);
        txn.homes = master_info.iter().map(|(_, h)| h.home).collect();
        txn.homes.sort_unstable();
        txn.homes.dedup();
        txn.master_info = master_info;
        txn
    }

    /// The keys it reads and writes on `shard`: its declared keys, and its
    /// reconnaissance's.
    pub fn keys_on(&self, shard: ShardId, topology: &Topology) -> (KeyList, KeyList) {
        let shard_of = |k| topology.shard_of(k);
        let (mut reads, mut writes) = self.program.declared_keys(shard, shard_of);
        for n in self.recon.iter().flat_map(|r| &r.keys).filter(|n| shard_of(n.key) == shard) {
            if n.write { writes.push(n.key) } else { reads.push(n.key) }
        }
        (reads, writes)
    }

    /// A remaster request: `key`, now `from`, moves to region `to` (SLOG
    /// §3.4), a single-home transaction at its current home.
    pub fn remaster(id: TxnId, key: Key, from: Header, to: RegionId, topology: &Topology) -> Txn {
        Txn {
            id,
            program: Program::default(),
            origin: from.home,
            master_info: vec![(key, from)],
            homes: vec![from.home],
            shards: vec![topology.shard_of(key)],
            remaster: Some(to),
            deps: Vec::new(),
            orderer_batches: 0,
            recon: None,
            client_floor: 0,
        }
    }

    /// Whether every granule is assumed homed in one region (SLOG §3.2).
    pub fn is_single_home(&self) -> bool {
        self.homes.len() <= 1
    }

    /// The single home, if the transaction is assumed single-home.
    pub fn home(&self) -> Option<RegionId> {
        if self.is_single_home() { self.homes.first().copied() } else { None }
    }

    /// The header the transaction assumes for `key`.
    pub fn assumed(&self, key: Key) -> Option<Header> {
        self.master_info.binary_search_by_key(&key, |(k, _)| *k).ok().map(|i| self.master_info[i].1)
    }

    /// Whether any of the transaction's keys on `shard` is assumed homed at
    /// `home` (`None`: any key on `shard`).
    pub fn touches(&self, topology: &Topology, shard: ShardId, home: Option<RegionId>) -> bool {
        self.master_info.iter().any(|(k, h)| topology.shard_of(*k) == shard && home.is_none_or(|r| h.home == r))
    }

    /// The shard whose replica answers the client: that of the first key
    /// (or the first part's anchor).
    pub fn first_shard(&self, topology: &Topology) -> ShardId {
        let first = self.program.ops.first().map(|op| op.key());
        let anchor = || self.program.procedure.as_ref().and_then(|p| p.anchor(0));
        first.or_else(anchor).map_or(self.shards[0], |k| topology.shard_of(k))
    }
}

/// One entry of a local log (SLOG Figure 2, `InsertIntoLocalLog`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Entry {
    /// An (assumed) single-home transaction, in its home's local log.
    SingleHome(Arc<Txn>),
    /// A multi-home transaction, in the local log of the region that
    /// orders them all (SLOG §3.3, the third option); every region
    /// inserts its LockOnlyTxns when it reaches this entry.
    MultiHome(Arc<Txn>),
    /// A multi-home transaction's locks on the granules assumed homed at
    /// `home`, in `home`'s local log (SLOG §3.3). It carries the code
    /// (footnote 4), so the `MultiHome` entry is not executed itself.
    LockOnly { txn: Arc<Txn>, home: RegionId },
    /// At the head of a batch: it is placed only after this batch of
    /// another local log (a remaster its transactions rely on).
    After(BatchId),
    /// A snapshot read-only transaction (SLOG §3.1), at a position of one
    /// region's global log only: it reads that region's copy as the log's
    /// prefix leaves it — serializable, possibly stale.
    Snapshot(Arc<Txn>),
}

/// The origin of the region-local positions that hold snapshot reads.
pub const SNAPSHOTS: u32 = u32::MAX;

impl Entry {
    pub fn txn(&self) -> Option<&Arc<Txn>> {
        match self {
            Entry::SingleHome(t) | Entry::MultiHome(t) | Entry::LockOnly { txn: t, .. } | Entry::Snapshot(t) => Some(t),
            Entry::After(_) => None,
        }
    }

    /// The home whose granules this entry locks (`None`: all of them).
    pub fn lock_home(&self) -> Option<RegionId> {
        match self {
            Entry::LockOnly { home, .. } => Some(*home),
            Entry::SingleHome(_) | Entry::MultiHome(_) | Entry::After(_) | Entry::Snapshot(_) => None,
        }
    }

    /// Whether a replica of `shard` executes anything of this entry.
    pub fn touches(&self, topology: &Topology, shard: ShardId) -> bool {
        match self {
            Entry::SingleHome(t) | Entry::Snapshot(t) => t.shards.binary_search(&shard).is_ok(),
            Entry::MultiHome(_) | Entry::After(_) => false,
            Entry::LockOnly { txn, home } => txn.touches(topology, shard, Some(*home)),
        }
    }
}

/// A batch's name: the region whose local log it belongs to (its index
/// among the sequencers), and its number in that log.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BatchId {
    pub region: u32,
    pub seq: u64,
}

/// One batch of a region's local log (SLOG §3.1): `origin` is the
/// region's index among the sequencers, `seq` its number in that log.
pub type LocalBatch = Batch<Entry>;

/// The name of a local-log batch.
pub fn batch_id(b: &LocalBatch) -> BatchId {
    BatchId { region: b.origin, seq: b.seq }
}

/// One position of a region's global log as a shard sees it: the entries
/// of the local-log batch placed there that touch the shard, each with
/// its index in the batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub pos: u64,
    pub batch: BatchId,
    pub entries: Vec<(u32, Entry)>,
}

/// What a participant read of one key: its value, or the header it found
/// where the transaction assumed another (SLOG Figure 2, "execution
/// engine code called prior to read/write of granule").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Read {
    Value(Option<Value>),
    /// The header found, and where the remaster that wrote it stands.
    WrongHome(Header, Option<Since>),
}

/// The reads one participant contributes to a transaction.
pub type Reads = Vec<(Key, Read)>;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Within a region's sequencer group: its Paxos log.
    Paxos(PaxosMsg<RegionRecord, GroupState>),
    /// Client → its region's sequencer: run this transaction, with its
    /// reconnaissance if it needed one.
    /// `floor`: the lowest id the client still waits for.
    Submit { id: TxnId, program: Program, recon: Option<Arc<Recon>>, floor: u64 },
    /// Client → a replica of its region: the current values of `keys`,
    /// read without locks, for a reconnaissance pass.
    ReconRead { request: RequestId, keys: Vec<Key> },
    /// Replica → client: the values asked for.
    ReconValues { request: RequestId, values: Vec<(Key, Option<Value>)> },
    /// Sequencer → client: the member that leads the group (a member that
    /// does not passed the client's transaction on to it).
    Leader { node: NodeId },
    /// Sequencer → the assumed home's sequencer (single-home) or the
    /// multi-home orderer's: insert these into your local log (the
    /// transactions of one chosen `Annotated` record bound there travel
    /// together).
    Forward(Vec<Arc<Txn>>),
    /// Sequencer → every sequencer: a batch of its local log.
    Ship(Arc<LocalBatch>),
    /// Sequencer → every sequencer: local log `origin` has `next_seq`
    /// batches (lets a receiver find a lost last batch). A region announces
    /// its own log, and (SLOG-HA) the logs it is the pair of.
    Tip { origin: u32, next_seq: u64 },
    /// SLOG-HA: a region's batch, to its paired region before anyone else.
    Replicate(Arc<LocalBatch>),
    /// SLOG-HA: the paired region holds batch `seq` durably.
    Replicated { seq: u64 },
    /// A sequencer missing a batch of another's local log asks for it.
    FetchBatch { id: BatchId },
    /// Sequencer → the replicas of its region: global-log positions, each
    /// filtered to the receiver's shard, in order.
    Log { shard: ShardId, entries: Vec<LogEntry> },
    /// Replica → its sequencer: positions from `from` on, please. `durable`
    /// is the position its durable checkpoint resumes from: the region's
    /// group may forget what a copy of every shard is past (Calvin §5).
    FetchLog { shard: ShardId, from: u64, durable: u64 },
    /// Sequencer → replica: positions before `base` are forgotten.
    Truncated { shard: ShardId, base: u64 },
    /// Replica → another copy of its shard in its region: a checkpoint at or
    /// past `need`, please (the positions it needs from `from` on are
    /// forgotten), with the reads sent for the transactions from `from` on.
    FetchCheckpoint { shard: ShardId, from: u64, need: u64 },
    /// A copy's checkpoint, for one of the same region (the same global
    /// log) that lags behind what the group keeps.
    Checkpoint { shard: ShardId, checkpoint: Arc<Checkpoint> },
    /// Sequencer → every region's: how many batches of each local log its
    /// region's global log has placed (chosen). A local log's batches, and
    /// an SLOG-HA pair's copies of them, are forgotten once every region
    /// has placed them.
    Progress { placed: Vec<(u32, u64)> },
    /// Participant → participants in the same region: its local reads.
    Reads { txn: TxnId, at: (u64, u32), shard: ShardId, reads: Reads },
    /// A participant still waiting for `shard`'s reads asks again.
    ReadsWanted { txn: TxnId, shard: ShardId },
    /// Responder → client: the outcome.
    Reply { id: TxnId, outcome: Outcome },
    /// Responder → client: the transaction assumed a wrong home (or, with
    /// a reconnaissance, a version that changed by its turn) and was
    /// aborted by every region; submit it again (SLOG §3.2), after a new
    /// pass.
    Restart { id: TxnId },
    /// Client → the responder: the outcome of `id`, if known.
    Query { id: TxnId },
    /// The home region's replica → its sequencer: `key`'s last accesses
    /// came from `to`; remaster it there (§3.4, the PNUTS heuristic).
    RemasterRequest { key: Key, from: Header, to: RegionId },
    /// Replica → a sequencer: `key`'s header is now `header`, written by
    /// the remaster in `batch` (the Lookup Master's asynchronous update).
    Remastered { key: Key, header: Header, since: Since },
    /// Sequencer → a replica of its region: every replica of the region
    /// has a durable checkpoint past `below`, so no participant runs a
    /// transaction placed before it again; the reads sent for those are
    /// needed no more (`crate::sent_reads`).
    RegionDurable { below: u64 },
}

/// A replica's state as of a checkpoint: the store and headers after every
/// transaction before position `next_pos`, and after those later ones
/// already executed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub next_pos: u64,
    pub store: BTreeMap<Key, Value>,
    pub headers: BTreeMap<Key, (Header, Since)>,
    /// Per local log, the batches before `next_pos` (what the copy applied).
    pub applied: BTreeMap<u32, u64>,
    pub executed: Vec<(TxnId, (u64, u32))>,
    /// The reads this replica keeps to send again on request (every one:
    /// `crate::sent_reads`), each with the place it is kept until, shared
    /// with the ones in its memory.
    pub sent: Vec<(TxnId, (u64, u32), Arc<Reads>)>,
}

/// A record of a region's sequencer group, chosen by the group's Paxos
/// log (SLOG §3.1: "Each region maintains a local input log which is
/// implemented via Paxos across its servers"; §3.2: "A separate Paxos
/// process interleaves batches ... to create that region's view of the
/// global log" — one Paxos log carries both here). Every member applies
/// them in slot order, so any one of them can take over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegionRecord {
    /// A batch of this region's local log.
    Batch(Arc<LocalBatch>),
    /// The annotations of transactions received here, chosen before they
    /// leave for other regions' local logs; those that arrive while one
    /// such record is being chosen share the next (one Paxos round for
    /// many under load).
    Annotated(Vec<Arc<Txn>>),
    /// SLOG-HA: a batch of the region this one is the pair of, held here
    /// before its origin lets anyone else see it.
    Held(Arc<LocalBatch>),
    /// This batch (of any local log) takes the next position of the
    /// region's global log.
    Placed(Arc<LocalBatch>),
    /// What the region needs no more: the global log's positions before
    /// `placed_below` (a copy of every shard in the region has a durable
    /// checkpoint past them), and the batches of the local log before
    /// `own_below` and of each paired log before its mark (every region
    /// has placed them). Positions and numbers are never reused.
    Forget { placed_below: u64, own_below: u64, held_below: Vec<(u32, u64)> },
}

/// Consecutive batches of a log from number (or position) `base` on; the
/// ones before it are forgotten.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub base: u64,
    pub batches: VecDeque<Arc<LocalBatch>>,
}

impl Window {
    /// The number the next batch takes.
    pub fn next(&self) -> u64 {
        self.base + self.batches.len() as u64
    }

    /// Batch `n`, unless forgotten or not there yet.
    pub fn get(&self, n: u64) -> Option<&Arc<LocalBatch>> {
        self.batches.get(n.checked_sub(self.base)? as usize)
    }

    pub fn push(&mut self, batch: Arc<LocalBatch>) {
        self.batches.push_back(batch);
    }

    /// Forgets the batches before `below` (at most up to the last one);
    /// returns them.
    pub fn forget_below(&mut self, below: u64) -> Vec<Arc<LocalBatch>> {
        let mut gone = Vec::new();
        while self.base < below {
            let Some(b) = self.batches.pop_front() else { break };
            gone.push(b);
            self.base += 1;
        }
        gone
    }
}

/// A region's group's state as its chosen records leave it (SLOG §3.1-3.2:
/// the local and global logs, and what the leader needs to take over): the
/// checkpoint of the group's Paxos log, which a restarted member or one
/// that lagged behind the compacted log adopts, and from which a new
/// leader resumes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupState {
    /// Transactions in the region's local log, down to their clients'
    /// floors.
    pub inserted: ClientFloors<()>,
    /// Annotations of transactions received here, down to their clients'
    /// floors.
    pub annotated: ClientFloors<Arc<Txn>>,
    /// The region's local log, and (SLOG-HA) the paired logs it holds.
    pub own: Window,
    pub held: BTreeMap<u32, Window>,
    /// Per local log, the batches placed; and the region's global log.
    pub placed_count: BTreeMap<u32, u64>,
    pub placed: Window,
    /// Multi-home transactions placed whose LockOnlyTxn this region (a
    /// home) has not yet inserted in a chosen batch.
    pub lock_only_due: Vec<Arc<Txn>>,
}

/// A durable record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// A sequencer's acceptor state in its region's group (its checkpoint
    /// holds the `GroupState`).
    Paxos(PaxosRecord<RegionRecord, GroupState>),
    /// A client's identifier epoch (`meridian_mechanisms::txnids`).
    Epoch(u64),
    /// A replica executed the transaction at `at`, writing `writes`,
    /// after sending `sent` (its reads, `None` if it had no one to send
    /// them to) to the other participants — with the latest place any
    /// participant read it at, until which they are kept; the answering replica keeps
    /// the client's `outcome`, for its queries. A remaster also writes its
    /// granule's header.
    Executed {
        txn: TxnId,
        at: (u64, u32),
        writes: Vec<(Key, Value)>,
        header: Option<(Key, Header, Since)>,
        sent: Option<((u64, u32), Arc<Reads>)>,
        outcome: Option<Outcome>,
    },
    /// A replica's checkpoint: every earlier record of its log folded in
    /// (appended, then made the log's snapshot through it).
    Checkpoint(Arc<Checkpoint>),
}

impl From<PaxosRecord<RegionRecord, GroupState>> for Record {
    fn from(r: PaxosRecord<RegionRecord, GroupState>) -> Record {
        Record::Paxos(r)
    }
}

impl From<PaxosMsg<RegionRecord, GroupState>> for Msg {
    fn from(m: PaxosMsg<RegionRecord, GroupState>) -> Msg {
        Msg::Paxos(m)
    }
}

impl From<PaxosTimer> for Timer {
    fn from(t: PaxosTimer) -> Timer {
        Timer::Paxos(t)
    }
}

#[derive(Clone, Debug)]
pub enum Timer {
    /// Sequencer: its region group's Paxos tick.
    Paxos(PaxosTimer),
    /// Sequencer: the batch period ends; cut the local-log batch.
    Batch,
    /// Sequencer: announce the tip, fetch missing batches.
    SequencerTick,
    /// Replica: fetch missing log positions, ask for missing reads,
    /// checkpoint.
    ReplicaTick,
    /// Client: retry or give up on outstanding requests.
    ClientTick,
    /// Replica: the experiment's one scheduled remaster is due
    /// (`remaster_at`).
    Remaster,
}
