//! The messages, durable records and timers of `ra-noc2`.
//!
//! Timestamps, GET identifiers and the termination protocol's answers are
//! RAMP's (`crate::ramp`): a timestamp is unique per write transaction
//! and increasing per client. What RA-NOC2 adds is the latest safe time a
//! partition returns with every answer (NOC-NOC Algorithm 1 lines 32, 36,
//! 38) and the two views a GET carries (lines 21, 23).

pub use crate::common::Timer;
use crate::common::Wire;
use crate::common::reads::ViewGet;
use crate::ramp::pending::Question;
use crate::ramp::{GetId, Held, Ts};
use meridian_core::{Key, ShardId, Value};
use meridian_mechanisms::encoding::encoded_len;
use meridian_mechanisms::mvstore::{Meta, MvStore};
use meridian_mechanisms::primary_backup::{BackupRecord, Ship};
use meridian_mechanisms::twopc::Decision;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// NOC-NOC Algorithm 1 lines 5-7: a write transaction's versions on one
/// partition, all at timestamp `ts`. Its metadata is the timestamp and the
/// participants (for the cooperative termination protocol): no sibling
/// keys, whatever the transaction's size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prepare {
    pub ts: Ts,
    pub writes: Vec<(Key, Value)>,
    /// The shards the transaction writes, sorted.
    pub participants: Vec<ShardId>,
}

/// One key of a GET: NOC-NOC Algorithm 1 line 19, the client's local safe
/// view of `key` (`ts_p`, the newest of its own fully prepared writes of
/// it), if it has one.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRead {
    pub key: Key,
    pub ts_p: Option<Ts>,
}

/// A GET (NOC-NOC Algorithm 1 lines 21, 23, 37): every key of the read on
/// one partition, with the global safe view `ts_c` (line 17) and each
/// key's local safe view. Per key read: two timestamps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Get {
    pub id: GetId,
    pub ts_c: Option<Ts>,
    pub keys: Vec<KeyRead>,
}

impl ViewGet for Get {
    fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.keys.iter().map(|k| k.key)
    }

    /// The metadata it carries, postcard-encoded, as RAMP counts it (the
    /// timestamps asked by, not the keys): the global safe view once and
    /// each key's local safe view — constant per key, linear per request
    /// in the keys asked of the partition.
    fn metadata_bytes(&self) -> usize {
        encoded_len(&self.ts_c) + self.keys.iter().map(|k| encoded_len(&k.ts_p)).sum::<usize>()
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    /// Client → partition: Algorithm 1 line 7.
    Prepare(Arc<Prepare>),
    /// Partition → client: the versions are durable; line 32, the latest
    /// safe time.
    Prepared { ts: Ts, lst: Option<Ts> },
    /// Partition → client: the prepare is refused for good (its timestamp
    /// is at or below the latest safe time, or the termination protocol
    /// aborted it first): the client writes again above `lst`.
    Refused { ts: Ts, lst: Option<Ts> },
    /// Client (or a partition finishing the termination protocol) →
    /// partition: Algorithm 1 line 13.
    Commit { ts: Ts },
    /// Partition → client: the commit is durable; line 36.
    Committed { ts: Ts, lst: Option<Ts> },
    /// Client → partitions, after a refusal: the transaction never commits;
    /// its prepared versions go at once rather than after `ctp_ms`.
    Abort { ts: Ts },
    /// Client → partition: GET (Algorithm 1 lines 37-44). With no keys, it
    /// asks only for the latest safe time (a view refresh); RA-NOC's
    /// blocked writer sets `ts_c` to ask the safe time to pass it.
    Get(Get),
    /// Partition → client: one value per key asked, in order, and the
    /// latest safe time (line 38).
    Got { id: GetId, values: Vec<Option<Value>>, lst: Option<Ts> },
    /// Partition → client: a version the read needs was garbage-collected;
    /// the read starts again (with the fresher view `lst` gives).
    Gone { id: GetId, lst: Option<Ts> },
    /// Partition → partition: the cooperative termination protocol's
    /// question about a transaction prepared and not committed for `ctp_ms`.
    CheckPrepared { ts: Ts },
    /// The answer, sent once durable.
    PrepareState { ts: Ts, held: Held },
    /// Primary ↔ backup: replication (`crate::common::backup`).
    Ship(Ship),
}

impl Msg {
    /// The message with its latest safe time set to `now`, for answers held
    /// until an append is durable: they carry the time safe when they leave.
    pub fn stamped(self, now: Option<Ts>) -> Msg {
        match self {
            Msg::Prepared { ts, .. } => Msg::Prepared { ts, lst: now },
            Msg::Refused { ts, .. } => Msg::Refused { ts, lst: now },
            Msg::Committed { ts, .. } => Msg::Committed { ts, lst: now },
            Msg::Got { id, values, .. } => Msg::Got { id, values, lst: now },
            other => other,
        }
    }
}

/// A transaction prepared at a partition and not committed there yet:
/// its keys here and its participants.
pub use crate::ramp::PendingTxn;

/// A partition's state at a checkpoint.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub store: MvStore<Meta>,
    /// Per key, the newest version garbage collection dropped.
    pub collected: Vec<(Key, Ts)>,
    pub pending: Vec<(Ts, PendingTxn)>,
    /// Algorithm 1 line 27, `latest`.
    pub latest: Option<Ts>,
    /// The latest safe time (see `safe.rs`).
    pub safe: Option<Ts>,
    /// Remembered outcomes and the newest forgotten one (`common/outcomes.rs`).
    pub decided: Vec<(Ts, Decision)>,
    pub forgotten_upto: Option<Ts>,
}

/// A durable record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// A partition installed these versions (Algorithm 1 lines 30-31).
    Prepared(Arc<Prepare>),
    /// A partition committed `ts` (Algorithm 1 lines 34-35).
    Committed { ts: Ts },
    /// A partition refused or aborted `ts` for good.
    Aborted { ts: Ts },
    /// A partition's safe time passed `ts` at an RA-NOC writer's request.
    Advanced { ts: Ts },
    /// A partition's checkpoint: every earlier record folded in.
    Snapshot(Arc<Snapshot>),
    /// A client will issue no timestamp at or above this time (µs) without
    /// recording a later one (`crate::ramp`'s timestamps).
    Reserved { upto_us: u64 },
    /// A client's write at `ts` of `keys` is fully prepared: it joins the
    /// local safe view (Algorithm 1 line 9), which must survive a restart
    /// for the client's sessions to read their writes.
    Local { ts: Ts, keys: Vec<Key> },
    /// Every partition told the client a safe time at or past `ts`: after a
    /// restart its version vector starts there, and the local versions at
    /// or below it are no longer needed.
    Floor { ts: Ts },
    /// A client's checkpoint: every earlier record folded in.
    ClientState(Arc<ClientState>),
    /// A backup's record (`crate::common::backup`).
    Backup(BackupRecord),
}

/// A client's durable state at a checkpoint.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClientState {
    pub reserved_us: u64,
    pub floor: Option<Ts>,
    pub local: Vec<(Key, Ts)>,
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

    /// RA-NOC2's question names the timestamp alone (C_W: no sibling keys
    /// anywhere); a participant answers from its outcomes.
    fn check_prepared(q: &Question) -> Msg {
        Msg::CheckPrepared { ts: q.ts }
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
