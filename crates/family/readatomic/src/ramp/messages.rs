//! The messages, durable records and timers of `ramp-f` and `ramp-s`.
//!
//! One set for both variants: RAMP-S's partitions keep no sibling
//! metadata per version and answer its second round from a timestamp set
//! (`Ask::Among`), RAMP-F's answer theirs by exact timestamp
//! (`Ask::Exact`).

pub use crate::common::Timer;
use crate::common::Wire;
use crate::ramp::pending::Question;
use meridian_core::{Key, ShardId, Value};
use meridian_mechanisms::mvstore::{Meta, MvStore};
use meridian_mechanisms::primary_backup::{BackupRecord, Ship};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A RAMP timestamp ("Scalable Atomic Visibility with RAMP Transactions"
/// §4.1: unique per write transaction): microseconds of the writer's clock
/// above the writing client's index, so two clients never share one and a
/// client's are increasing (`timestamps.rs`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ts(pub u64);

impl Ts {
    /// Bits of a timestamp below its time: the client's index (at most
    /// 4,096 clients; the 52 bits above hold real clocks' µs since 1970
    /// until about 2112).
    pub const CLIENT_BITS: u32 = 12;

    pub fn new(time_us: u64, client: u32) -> Ts {
        assert!(client < 1 << Ts::CLIENT_BITS, "client index {client} beyond the timestamp's client bits");
        assert!(time_us < 1 << (64 - Ts::CLIENT_BITS), "time {time_us} µs beyond the timestamp's time bits");
        Ts(time_us << Ts::CLIENT_BITS | u64::from(client))
    }

    pub fn time_us(self) -> u64 {
        self.0 >> Ts::CLIENT_BITS
    }

    /// The index of the client that issued this timestamp.
    pub fn client(self) -> u32 {
        (self.0 & ((1 << Ts::CLIENT_BITS) - 1)) as u32
    }
}

/// Algorithm 1 lines 17-19 (PUT_ALL): a write transaction's versions on
/// one partition, all at timestamp `ts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prepare {
    pub ts: Ts,
    pub writes: Vec<(Key, Value)>,
    /// Every key the transaction writes (`I_tx`, line 16): RAMP-F's
    /// partitions keep `I_tx − {i}` with each version (line 18); RAMP-S's
    /// keep none per version, only with the transaction while it is
    /// pending, for the cooperative termination protocol.
    pub keys: Arc<[Key]>,
    /// The shards of `keys`, sorted: whom the cooperative termination
    /// protocol asks.
    pub participants: Vec<ShardId>,
}

/// Which read of a client, and which round of it (rounds count up across
/// a read's restarts, so a late answer to an earlier round is dropped).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetId {
    pub read: Ts,
    pub step: u32,
}

/// What a GET asks of a partition for each key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ask {
    /// Algorithm 1 lines 24-25 (and Algorithm 2's first round): the
    /// version at `lastCommit`.
    Latest(Vec<Key>),
    /// Algorithm 1 lines 30-32: exactly these versions (RAMP-F's repair).
    Exact(Vec<(Key, Ts)>),
    /// Algorithm 2's second round: for each key, the newest version whose
    /// timestamp is in `among` (sorted, distinct).
    Among { keys: Vec<Key>, among: Vec<Ts> },
    /// LORA's GET (`crate::lora`): for each key, the version at exactly
    /// the timestamp the client knows as its newest (prepared or
    /// committed), the initial state where it knows none, and the newest
    /// committed version where the one asked for was collected.
    Known(Vec<(Key, Option<Ts>)>),
}

/// One key's version as a partition returns it (`None` timestamp: the
/// initial state). `siblings` is RAMP-F's metadata (`md`), empty for
/// RAMP-S.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub key: Key,
    pub ts: Option<Ts>,
    pub value: Option<Value>,
    pub siblings: Arc<[Key]>,
}

/// What a partition holds of a transaction, for the cooperative
/// termination protocol.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Held {
    /// Prepared, or committed (or overwritten by a later commit): it may
    /// become visible.
    Prepared,
    /// Never prepared here and now refused for good: it never commits.
    Aborted,
    /// Decided here so long ago that the outcome is no longer remembered
    /// (RA-NOC2, past `outcomes_remembered`): this participant will never
    /// prepare it again, nor change what it decided. RAMP never answers it
    /// (it looks the versions up by key).
    Forgotten,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Client → partition: Algorithm 1 line 19.
    Prepare(Arc<Prepare>),
    /// Partition → client: the versions are durable.
    Prepared { ts: Ts },
    /// Partition → client: the cooperative termination protocol aborted
    /// this transaction before its prepare arrived.
    Refused { ts: Ts },
    /// Client (or a partition finishing the cooperative termination
    /// protocol) → partition: Algorithm 1 lines 20-21.
    Commit { ts: Ts },
    /// Partition → client: the commit is durable.
    Committed { ts: Ts },
    /// Client → partition: GET (Algorithm 1 lines 9-13, Algorithm 2).
    Get { id: GetId, ask: Ask },
    /// Partition → client: the versions asked for.
    Got { id: GetId, items: Vec<Item> },
    /// Partition → client: a version asked for was garbage-collected; the
    /// read starts again.
    Gone { id: GetId },
    /// Partition → partition: the cooperative termination protocol's
    /// question, for a transaction prepared and not committed for
    /// `ctp_ms`.
    CheckPrepared { ts: Ts, keys: Arc<[Key]> },
    /// The answer, sent once durable.
    PrepareState { ts: Ts, held: Held },
    /// Primary ↔ backup: replication (`crate::common::backup`).
    Ship(Ship),
}

/// A transaction prepared at a partition and not committed there yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingTxn {
    pub keys: Arc<[Key]>,
    pub participants: Vec<ShardId>,
}

/// A partition's state at a checkpoint.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub store: MvStore<Meta>,
    /// Per key, the newest version garbage collection dropped.
    pub collected: Vec<(Key, Ts)>,
    pub pending: Vec<(Ts, PendingTxn)>,
    pub aborted: Vec<Ts>,
    /// The transactions committed here that are remembered, and the newest
    /// forgotten (`Partition::committed`).
    pub committed: Vec<Ts>,
    pub committed_forgotten_upto: Option<Ts>,
}

/// A durable record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// A partition installed these versions (Algorithm 1 line 4).
    Prepared(Arc<Prepare>),
    /// A partition committed `ts` (Algorithm 1 lines 7-8).
    Committed { ts: Ts },
    /// A partition aborted `ts` in the cooperative termination protocol.
    Aborted { ts: Ts },
    /// A partition's checkpoint: every earlier record folded in.
    Snapshot(Arc<Snapshot>),
    /// A client will issue no timestamp at or above this time (µs) without
    /// recording a later one.
    Reserved { upto_us: u64 },
    /// A backup's record (`crate::common::backup`).
    Backup(BackupRecord),
    /// A LORA client's write at `ts` of `keys` is fully prepared: the
    /// newest timestamps it knows of those keys (`crate::lora`), which must
    /// survive a restart for its sessions to read their writes.
    Known { ts: Ts, keys: Vec<Key> },
    /// A LORA client's checkpoint: every earlier record folded in.
    KnownState(Arc<KnownState>),
}

/// A LORA client's durable state at a checkpoint: its timestamp
/// reservation and, per key it wrote, the timestamp of its newest write.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct KnownState {
    pub reserved_us: u64,
    pub own: Vec<(Key, Ts)>,
}

impl Wire for Msg {
    type Prepare = Prepare;
    type Record = Record;

    fn prepare(p: Arc<Prepare>) -> Msg {
        Msg::Prepare(p)
    }

    fn commit(ts: Ts) -> Msg {
        Msg::Commit { ts }
    }

    /// RAMP's question names the transaction's keys: a participant looks
    /// its versions up by them (`Partition::holds`).
    fn check_prepared(q: &Question) -> Msg {
        Msg::CheckPrepared { ts: q.ts, keys: Arc::clone(&q.keys) }
    }

    fn committed_record(ts: Ts) -> Record {
        Record::Committed { ts }
    }

    fn aborted_record(ts: Ts) -> Record {
        Record::Aborted { ts }
    }

    fn ship(s: Ship) -> Msg {
        Msg::Ship(s)
    }
}
