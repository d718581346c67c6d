//! The messages, durable records and timers of `calvin`.

use meridian_core::procedure::Recon;
use meridian_core::{Key, Outcome, Program, RegionId, RequestId, ShardId, Topology, TxnId, Value};
use meridian_mechanisms::paxos::{PaxosMsg, PaxosRecord, PaxosTimer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
        Txn { id, program, region, shards, recon }
    }

    /// The keys it reads and writes on `shard` (Calvin §3.2 phase 1): its
    /// declared keys, and its reconnaissance's.
    pub fn keys_on(&self, shard: ShardId, topology: &Topology) -> (Vec<Key>, Vec<Key>) {
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

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// The global log's Multi-Paxos, among the sequencers.
    Paxos(PaxosMsg<BatchId>),
    /// Client → its region's sequencer: order this transaction (again, on
    /// a retry; the global log drops repeats), with its reconnaissance if
    /// it needed one.
    Submit { id: TxnId, program: Program, recon: Option<Arc<Recon>> },
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
    /// Replica → a sequencer: positions from `from` on, please.
    FetchLog { shard: ShardId, from: u64 },
    /// Participant → participants of the same copy: its local reads of a
    /// transaction at global position `at` (Calvin §3.2 phase 3).
    Reads { txn: TxnId, at: (u64, u32), shard: ShardId, reads: Reads },
    /// A participant still waiting for `shard`'s reads asks again.
    ReadsWanted { txn: TxnId, shard: ShardId },
    /// Responder → client: the outcome.
    Reply { id: TxnId, outcome: Outcome },
    /// Responder → client: a version its reconnaissance assumed had
    /// changed by its turn, and every participant aborted it: make a new
    /// pass and submit it again.
    Restart { id: TxnId },
    /// Client → the responder: the outcome of `id`, if known.
    Query { id: TxnId },
}

impl From<PaxosMsg<BatchId>> for Msg {
    fn from(m: PaxosMsg<BatchId>) -> Msg {
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
    /// The latest reads this replica sent, to send again on request.
    pub sent: Vec<(TxnId, (u64, u32), Reads)>,
}

/// A durable record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// A sequencer's acceptor state of the global log.
    Paxos(PaxosRecord<BatchId>),
    /// A batch stored at a sequencer (its own or another's).
    Batch(Arc<Batch>),
    /// A client's identifier epoch (`meridian_mechanisms::txnids`).
    Epoch(u64),
    /// A replica executed the transaction at `at`, writing `writes`,
    /// after sending `sent` (its reads) to the other participants; the
    /// answering replica keeps the client's `outcome`, for its queries.
    Executed { txn: TxnId, at: (u64, u32), writes: Vec<(Key, Value)>, sent: Reads, outcome: Option<Outcome> },
    /// A replica's checkpoint: every earlier record of its log folded in.
    Checkpoint(Arc<Checkpoint>),
}

impl From<PaxosRecord<BatchId>> for Record {
    fn from(r: PaxosRecord<BatchId>) -> Record {
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
