//! The messages, durable records and timers of `calvin`.

use meridian_core::procedure::Recon;
use meridian_core::{Key, KeyList, Outcome, Program, RegionId, RequestId, ShardId, Topology, TxnId, Value};
use meridian_mechanisms::client_floors::ClientFloors;
use meridian_mechanisms::paxos::{PaxosMsg, PaxosRecord, PaxosTimer};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A transaction as the sequencer of region `region` batched it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Txn {
    pub id: TxnId,
    pub program: Program,
    /// The region whose sequencer batched it: its replica of the
    /// transaction's first shard answers the client.
    pub region: RegionId,
    /// Every shard the transaction touches (its participants), sorted.
    pub shards: Vec<ShardId>,
    /// The keys and versions a reconnaissance pass found, for a procedure
    /// whose keys depend on its reads (OLLP, `crate::recon`).
    pub recon: Option<Arc<Recon>>,
    /// The lowest id its client still waited for when it submitted it
    /// (`meridian_mechanisms::client_floors`): the log forgets the client's
    /// ids below it once it materializes it.
    pub client_floor: u64,
}

impl Txn {
    pub fn new(id: TxnId, program: Program, region: RegionId, topology: &Topology) -> Txn {
        Txn::with_recon(id, program, None, region, topology)
    }

    /// A transaction locked on its operations' keys and, with a
    /// reconnaissance, on every key the pass found.
    pub fn with_recon(
        id: TxnId,
        program: Program,
        recon: Option<Arc<Recon>>,
        region: RegionId,
        topology: &Topology,
    ) -> Txn {
        let mut shards = program.shards(|k| topology.shard_of(k));
        if let Some(r) = &recon {
            shards.extend(r.keys.iter().map(|n| topology.shard_of(n.key)));
            shards.sort_unstable();
            shards.dedup();
        }
        Txn { id, program, region, shards, recon, client_floor: 0 }
    }

    /// The keys it reads and writes on `shard` (Calvin §3.2 phase 1): its
    /// declared keys, and its reconnaissance's.
    pub fn keys_on(&self, shard: ShardId, topology: &Topology) -> (KeyList, KeyList) {
        let shard_of = |k| topology.shard_of(k);
        let (mut reads, mut writes) = self.program.declared_keys(shard, shard_of);
        for n in self.recon.iter().flat_map(|r| &r.keys).filter(|n| shard_of(n.key) == shard) {
            if n.write { writes.push(n.key) } else { reads.push(n.key) }
        }
        (reads, writes)
    }

    /// The shard whose replica answers the client: that of the first key
    /// (or the first part's anchor).
    pub fn first_shard(&self, topology: &Topology) -> ShardId {
        let first = self.program.ops.first().map(|op| op.key());
        let anchor = || self.program.procedure.as_ref().and_then(|p| p.anchor(0));
        first.or_else(anchor).map_or(self.shards[0], |k| topology.shard_of(k))
    }
}

/// A batch's name: the sequencer (by its index among the sequencers)
/// and its number there.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BatchId {
    pub sequencer: u32,
    pub seq: u64,
}

/// One epoch's transactions at one sequencer (Calvin §3.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    pub id: BatchId,
    pub txns: Vec<Arc<Txn>>,
}

/// One position of the global log as a shard sees it: the transactions
/// of the batch ordered there that touch the shard, in batch order, each
/// with its index in the batch (the position is `(pos, index)`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub pos: u64,
    pub txns: Vec<(u32, Arc<Txn>)>,
}

/// The reads one participant contributes to a transaction.
pub type Reads = Vec<(Key, Option<Value>)>;

/// One materialized log position: the transactions of one batch, each
/// with its index in the batch.
pub type Position = Arc<Vec<(u32, Arc<Txn>)>>;

/// The batches the global log has taken (or dropped as repeats): per
/// sequencer, every number below a watermark and those above it taken
/// early. It never forgets (a batch ordered again after its contents are
/// gone is dropped without them); what it holds above the watermarks is
/// bounded by the batches ordered while an earlier one of the same
/// sequencer was still being stored at a majority.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenBatches {
    by_sequencer: BTreeMap<u32, (u64, BTreeSet<u64>)>,
}

impl SeenBatches {
    /// Takes a batch; false if it was taken before.
    pub fn insert(&mut self, id: BatchId) -> bool {
        let (below, ahead) = self.by_sequencer.entry(id.sequencer).or_default();
        if id.seq < *below || !ahead.insert(id.seq) {
            return false;
        }
        while ahead.remove(below) {
            *below += 1;
        }
        true
    }

    pub fn contains(&self, id: &BatchId) -> bool {
        self.by_sequencer.get(&id.sequencer).is_some_and(|(below, ahead)| id.seq < *below || ahead.contains(&id.seq))
    }

    /// Batches taken ahead of an earlier one of their sequencer.
    pub fn ahead(&self) -> usize {
        self.by_sequencer.values().map(|(_, ahead)| ahead.len()).sum()
    }
}

/// A sequencer's global log as of Paxos slot `slot`: what every identifier
/// ordered up to it made of the log (Calvin §3.1), and what a sequencer
/// needs to go on from there — the checkpoint of the global log's Paxos
/// group, and what a sequencer too far behind its peers adopts instead of
/// the contents they have forgotten (`Msg::LogState`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogState {
    pub slot: u64,
    /// The first position kept; the ones before it are forgotten.
    pub base: u64,
    /// Positions `base..`.
    pub positions: Vec<Position>,
    /// Ordered identifiers not yet materialized (waiting for contents),
    /// with their slots.
    pub ordered: Vec<(u64, BatchId)>,
    /// Batches materialized at or past `base`, each with the position it
    /// took (or, taking none, the next one): their contents are kept.
    pub materialized: Vec<(u64, BatchId)>,
    pub seen_batches: SeenBatches,
    /// Transactions the log took, down to their clients' floors (repeats
    /// are dropped).
    pub seen_txns: ClientFloors<()>,
}

impl LogState {
    /// The position the next materialized batch takes.
    pub fn next_pos(&self) -> u64 {
        self.base + self.positions.len() as u64
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// The global log's Multi-Paxos, among the sequencers.
    Paxos(PaxosMsg<BatchId, LogState>),
    /// Client → its region's sequencer: order this transaction (again, on
    /// a retry; the global log drops repeats), with its reconnaissance if
    /// it needed one.
    /// `floor`: the lowest id the client still waits for.
    Submit { id: TxnId, program: Program, recon: Option<Arc<Recon>>, floor: u64 },
    /// Client → a replica of its region: the current values of `keys`,
    /// read without locks, for a reconnaissance pass (OLLP).
    ReconRead { request: RequestId, keys: Vec<Key> },
    /// Replica → client: the values asked for.
    ReconValues { request: RequestId, values: Reads },
    /// Sequencer → every sequencer: store this batch durably (Calvin §3.1
    /// replication of the input; SLOG §4.2: contents apart from the log).
    StoreBatch(Arc<Batch>),
    /// The batch is durable at the sender.
    BatchStored { id: BatchId },
    /// Sequencer → the global log's leader: order this batch.
    Order { id: BatchId },
    /// A sequencer missing the contents of an ordered batch asks for them.
    FetchBatch { id: BatchId },
    /// Sequencer → the replicas of its region: global log positions, each
    /// filtered to the receiver's shard, in order.
    Log { shard: ShardId, entries: Vec<LogEntry> },
    /// Replica → a sequencer: positions from `from` on, please. `durable`
    /// is the position its durable checkpoint resumes from: the sequencer
    /// may forget what every replica of its region is past (Calvin §5).
    FetchLog { shard: ShardId, from: u64, durable: u64 },
    /// Sequencer → replica: positions before `base` are forgotten here.
    Truncated { shard: ShardId, base: u64 },
    /// Replica → another copy of its shard: a checkpoint at or past `need`,
    /// please (the positions it needs from `from` on are forgotten), with
    /// the reads sent for the transactions from `from` on (the replica's
    /// peers may still wait for them).
    FetchCheckpoint { shard: ShardId, from: u64, need: u64 },
    /// A copy's checkpoint, for one that lags behind what the sequencers
    /// keep (every region executes the same log: any copy's will do).
    Checkpoint { shard: ShardId, checkpoint: Arc<Checkpoint> },
    /// Sequencer → a sequencer that asked for contents this one has
    /// forgotten: its materialized log, to adopt instead.
    LogState(Arc<LogState>),
    /// Sequencer → every sequencer, when it changed: per shard, the
    /// furthest durable checkpoint among its region's copies. A sequencer
    /// forgets positions past its own region's replicas (`kept_positions_max`)
    /// only below what some copy of every shard holds durably.
    Checkpointed { best: Vec<(ShardId, u64)> },
    /// Participant → participants of the same copy: its local reads of a
    /// transaction at global position `at` (Calvin §3.2 phase 3).
    Reads { txn: TxnId, at: (u64, u32), shard: ShardId, reads: Reads },
    /// A participant still waiting for `shard`'s reads asks again; `at`
    /// is the transaction's place (the same in every copy).
    ReadsWanted { txn: TxnId, at: (u64, u32), shard: ShardId },
    /// Responder → client: the outcome.
    Reply { id: TxnId, outcome: Outcome },
    /// Responder → client: a version its reconnaissance assumed had
    /// changed by its turn, and every participant aborted it: make a new
    /// pass and submit it again.
    Restart { id: TxnId },
    /// Client → the responder: the outcome of `id`, if known.
    Query { id: TxnId },
    /// Participant → a participant asking for its reads: it is past the
    /// transaction and no longer keeps them (`reads_kept`); the asker
    /// catches up from another copy's checkpoint.
    ReadsGone { txn: TxnId, shard: ShardId },
}

impl From<PaxosMsg<BatchId, LogState>> for Msg {
    fn from(m: PaxosMsg<BatchId, LogState>) -> Msg {
        Msg::Paxos(m)
    }
}

/// A replica's state as of a checkpoint: the store after every
/// transaction before position `next_pos`, and after those later ones
/// already executed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub next_pos: u64,
    pub store: BTreeMap<Key, Value>,
    pub executed: Vec<(u64, u32)>,
    /// The reads this replica keeps to send again on request (every one:
    /// `crate::sent_reads`), each with its transaction's place, shared
    /// with the ones in its memory.
    pub sent: Vec<(TxnId, (u64, u32), Arc<Reads>)>,
}

/// A durable record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// A sequencer's acceptor state of the global log (its checkpoint
    /// holds the `LogState`).
    Paxos(PaxosRecord<BatchId, LogState>),
    /// A batch stored at a sequencer (its own or another's), in the
    /// sequencer's `BATCHES` stream.
    Batch(Arc<Batch>),
    /// The `BATCHES` stream compacted: every batch the sequencer still
    /// keeps, and the number its next own batch takes.
    Batches { next_own_seq: u64, batches: Vec<Arc<Batch>> },
    /// A client's identifier epoch (`meridian_mechanisms::txnids`).
    Epoch(u64),
    /// A replica executed the transaction at `at`, writing `writes`,
    /// after sending `sent` (its reads, `None` if it had no one to send
    /// them to) to the other participants; the answering replica keeps
    /// the client's `outcome`, for its queries.
    Executed {
        txn: TxnId,
        at: (u64, u32),
        writes: Vec<(Key, Value)>,
        sent: Option<Arc<Reads>>,
        outcome: Option<Outcome>,
    },
    /// A replica's checkpoint: every earlier record of its log folded in
    /// (appended, then made the log's snapshot through it).
    Checkpoint(Arc<Checkpoint>),
}

impl From<PaxosRecord<BatchId, LogState>> for Record {
    fn from(r: PaxosRecord<BatchId, LogState>) -> Record {
        Record::Paxos(r)
    }
}

#[derive(Clone, Debug)]
pub enum Timer {
    Paxos(PaxosTimer),
    /// Sequencer: the epoch ends; cut the batch (Calvin §3.1).
    Epoch,
    /// Sequencer: re-send unacknowledged stores and orders, fetch missing
    /// batches, push the log to lagging replicas.
    SequencerTick,
    /// Replica: fetch missing log positions, ask for missing reads,
    /// checkpoint.
    ReplicaTick,
    /// Client: retry or give up on outstanding requests.
    ClientTick,
}

impl From<PaxosTimer> for Timer {
    fn from(t: PaxosTimer) -> Timer {
        Timer::Paxos(t)
    }
}
