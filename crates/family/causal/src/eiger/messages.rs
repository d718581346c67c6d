//! The messages, durable records and timers of the Eiger protocols.
//!
//! Transaction ids are RAMP's client timestamps (`meridian_readatomic`'s
//! `Ts`: unique per client, increasing across its restarts); versions are
//! numbered by Lamport stamps (`stamps.rs`), also carried as `Ts`.
//! Requests and answers carry a constant number of timestamps whatever the
//! transaction's size (NOC-NOC §6.3: C_R, C_W).

use meridian_core::{Key, ShardId, Value};
use meridian_mechanisms::mvstore::{Meta, MvStore};
use meridian_mechanisms::primary_backup::{BackupRecord, Ship};
pub use meridian_readatomic::common::Timer;
use meridian_readatomic::common::reads::ViewGet;
use meridian_readatomic::ramp::{GetId, Ts};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// NOC-NOC Algorithm 5 lines 13-17: a write transaction's writes on one
/// partition. Every participant gets the coordinator and the participants
/// (Eiger's 2PC variant: the client sends each cohort its prepare
/// directly), and the largest stamp the client has seen, `dep`: the
/// partition's Lamport clock moves past it before stamping the prepare, so
/// that a write is ordered after everything its client read or wrote
/// (Eiger's client-side Lamport clock).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prepare {
    pub txn: Ts,
    pub writes: Vec<(Key, Value)>,
    pub coordinator: ShardId,
    /// The shards the transaction writes, sorted.
    pub participants: Vec<ShardId>,
    pub dep: Option<Ts>,
}

/// Algorithm 5 line 3 (`latestWrite[key]`): a client's newest own write
/// of a key that is fully prepared, at the commit stamp the client
/// mimicked (`t_own`, lines 19-22), with its transaction id. Ordered by
/// `t_own` first.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Own {
    pub t_own: Ts,
    pub txn: Ts,
}

/// One key of a GET (Algorithm 5 lines 8-9): the key and the client's own
/// write of it, if it has one.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRead {
    pub key: Key,
    pub own: Option<Own>,
}

/// A GET (Algorithm 5 line 9, Algorithm 6 line 5): every key of a read on
/// one partition, with the global safe view. Per key: at most three
/// timestamps (GSV, `t_own`, `txnid`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Get {
    pub id: GetId,
    pub gsv: Option<Ts>,
    pub keys: Vec<KeyRead>,
}

impl ViewGet for Get {
    fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.keys.iter().map(|k| k.key)
    }

    /// The metadata it carries, postcard-encoded, as RAMP counts it (not
    /// the keys): the GSV once and each key's own write, if any.
    fn metadata_bytes(&self) -> usize {
        use meridian_mechanisms::encoding::encoded_len;
        encoded_len(&self.gsv) + self.keys.iter().map(|k| encoded_len(&k.own)).sum::<usize>()
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Client → coordinator and cohorts: Algorithm 5 lines 14-17.
    Prepare(Arc<Prepare>),
    /// Partition → client, once durable: Algorithm 6 lines 15, 23, the
    /// prepare stamp and the latest safe time.
    Prepared { txn: Ts, t_prep: Ts, lst: Option<Ts> },
    /// Partition → client: the transaction was aborted by the termination
    /// of a transaction a participant never prepared; it commits nowhere.
    Refused { txn: Ts, lst: Option<Ts> },
    /// Cohort → coordinator: Algorithm 6 line 25, the cohort's prepare
    /// stamp; `late` when sent again after `ctp_ms` without a commit (Eiger
    /// §4.3: a cohort asks the coordinator).
    Vote { txn: Ts, t_prep: Ts, late: bool },
    /// Coordinator → cohort: a transaction pending at the coordinator for
    /// `ctp_ms` without this cohort's vote.
    AskVote { txn: Ts },
    /// Cohort → coordinator: this cohort never prepared the transaction and
    /// refused it for good.
    NoVote { txn: Ts },
    /// Coordinator → cohorts: Algorithm 6 line 19, the commit stamp.
    Commit { txn: Ts, t_com: Ts },
    /// Coordinator → cohorts: the transaction commits nowhere.
    Abort { txn: Ts },
    /// Client → partition: GET.
    Get(Get),
    /// Partition → client: one value per key asked, in order, and the
    /// latest safe time (Algorithm 6 lines 9, 11, 12).
    Got { id: GetId, values: Vec<Option<Value>>, lst: Option<Ts> },
    /// Partition → client: a version the read needs was collected.
    Gone { id: GetId, lst: Option<Ts> },
    /// Client → partition: a view refresh. The partition's clock moves to
    /// the largest stamp the client has seen (`dep`), durably, so that an
    /// idle partition's safe time does not hold every client's GSV back.
    Sync { dep: Option<Ts> },
    /// Partition → client, once durable: the latest safe time.
    Synced { lst: Option<Ts> },
    /// Primary ↔ backup: replication (`meridian_readatomic::common::backup`).
    Ship(Ship),
    /// Client → coordinator and cohorts (Eiger-PORT): a `Prepare` with the
    /// snapshot the client reads at (its global safe view), kept with each
    /// version: the client's own later reads order the version there
    /// (Eiger-PORT's promotion of one's own write).
    PrepareAt { prepare: Arc<Prepare>, snapshot: Option<Ts> },
    /// Coordinator → client (Eiger-PORT), once the commit is durable: the
    /// commit stamp, which ends the write's second phase, and the latest
    /// safe time.
    Committed { txn: Ts, t_com: Ts, lst: Option<Ts> },
}

impl Msg {
    /// The message with its latest safe time set to `now`, for answers held
    /// until an append is durable.
    pub fn stamped(self, now: Option<Ts>) -> Msg {
        match self {
            Msg::Prepared { txn, t_prep, .. } => Msg::Prepared { txn, t_prep, lst: now },
            Msg::Refused { txn, .. } => Msg::Refused { txn, lst: now },
            Msg::Synced { .. } => Msg::Synced { lst: now },
            Msg::Committed { txn, t_com, .. } => Msg::Committed { txn, t_com, lst: now },
            other => other,
        }
    }
}

/// A transaction prepared at a partition and not committed there: its
/// prepare stamp, its keys here, its coordinator and participants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingTxn {
    pub t_prep: Ts,
    pub keys: Arc<[Key]>,
    pub coordinator: ShardId,
    pub participants: Vec<ShardId>,
}

/// What a partition remembers of a decided transaction: its commit stamp,
/// or `None` (aborted).
pub type Decided = Option<Ts>;

/// A partition's state at a checkpoint.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub store: MvStore<Meta>,
    pub collected: Vec<(Key, Ts)>,
    pub pending: Vec<(Ts, PendingTxn)>,
    /// The Lamport clock's counter.
    pub clock: u64,
    pub safe: Option<Ts>,
    pub decided: Vec<(Ts, Decided)>,
    pub forgotten_upto: Option<Ts>,
}

/// A durable record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// A partition prepared these writes at `t_prep` (Algorithm 6 lines
    /// 29-34), with the snapshot its client read at (Eiger-PORT only).
    Prepared { prepare: Arc<Prepare>, t_prep: Ts, snapshot: Option<Ts> },
    /// A partition committed `txn` at `t_com` (lines 36-43).
    Committed { txn: Ts, t_com: Ts },
    /// A partition aborted or refused `txn` for good.
    Aborted { txn: Ts },
    /// A partition's clock moved to `c` (a client's `Sync`).
    Clock { c: u64 },
    /// A partition's checkpoint: every earlier record folded in.
    Snapshot(Arc<Snapshot>),
    /// A client will issue no transaction id at or above this time (µs).
    Reserved { upto_us: u64 },
    /// A client's write is fully prepared: it joins the local safe view
    /// (Algorithm 5 lines 20-22).
    Local { own: Own, keys: Vec<Key> },
    /// A client's checkpoint: every earlier record folded in.
    ClientState(Arc<ClientState>),
    /// A backup's record (`meridian_readatomic::common::backup`).
    Backup(BackupRecord),
}

/// A client's durable state at a checkpoint.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClientState {
    pub reserved_us: u64,
    pub local: Vec<(Key, Own)>,
}
