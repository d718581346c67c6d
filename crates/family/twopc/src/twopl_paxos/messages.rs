//! The messages, log commands, durable records and timers of `2pl-paxos`.

use super::participant::{Participant, Participants};
use meridian_core::{Key, NodeId, RequestId, ShardId, TxnId, Value};
use meridian_mechanisms::locks::LockMode;
use meridian_mechanisms::mvstore::MvStore;
use meridian_mechanisms::paxos::{PaxosMsg, PaxosRecord, PaxosTimer};
use meridian_mechanisms::twopc::{Decision, Outcomes, TxnStatus};
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Wound-wait priority: the older (smaller) wins. A transaction keeps the
/// priority of its first attempt across restarts, so it cannot starve.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Priority {
    pub start_ns: u64,
    pub first: TxnId,
}

/// A participant's prepare record, in its log (its shard's Paxos log, or
/// its home partition's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrepareRecord {
    pub txn: TxnId,
    pub coordinator: NodeId,
    pub participants: Participants,
    /// Keys it read, each with the version it read (the log slot that wrote
    /// it; `None`: the initial state): those it locked and does not write,
    /// and those it read and writes. Every replica applies the record only
    /// if these are still current (see `Log::prepare_holds`).
    pub reads: PreparedReads,
    /// Values to install on commit; their keys are held exclusively.
    pub writes: PreparedWrites,
}

/// A prepare record's reads and writes, the first of each held in the
/// record. Every replica of the shard reads them when it applies the
/// record and again at its decision, a round trip later, by when the
/// record has left the cache: in one allocation they cost one miss where
/// the record and two vectors cost three (most transactions read and write
/// one key at each participant). Encoded as vectors are.
pub type PreparedReads = SmallVec<[(Key, Option<u64>); 1]>;
pub type PreparedWrites = SmallVec<[(Key, Value); 1]>;

/// A command in a shard's replicated log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cmd {
    /// Shared, so that the log, the messages and the state machine hold
    /// one copy.
    Prepare(Arc<PrepareRecord>),
    Commit(TxnId),
    Abort(TxnId),
    /// Coordinators' watermarks: each settled every transaction of its
    /// epoch below the number given, so their outcomes can go (see
    /// `meridian_mechanisms::twopc::Outcomes::retire`).
    Retire(Vec<(NodeId, u64)>),
}

/// Why a leader refused a request.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// Not the shard's leader (or a home replica still recovering its log);
    /// try `hint`.
    NotLeader { hint: Option<NodeId> },
    /// An older transaction took the lock (wound-wait).
    Wounded,
}

/// A replica's state machine as of a checkpoint (the Paxos log is
/// compacted up to it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReplicaState {
    pub store: MvStore,
    pub prepared: BTreeMap<TxnId, Arc<PrepareRecord>>,
    pub outcomes: Outcomes,
}

/// A key to lock in `mode`, and whether to read it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRead {
    pub key: Key,
    pub mode: LockMode,
    pub read: bool,
}

/// "Leader" below is the replica that serves a participant: its shard's
/// Paxos leader, or with `lock_at = "home"` its home replica (the only
/// member, so the leader, of its home partition's log).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    Paxos(PaxosMsg<Cmd, ReplicaState>),
    /// Coordinator → leader: lock these keys and read those marked. Round
    /// 0 starts the transaction here; a procedure that asks for more keys
    /// sends round 1, 2, ... once the previous round's reads are back, and
    /// the leader adds their locks to those it holds.
    Execute(Execute),
    /// Leader → coordinator: every lock of the round is held; the values
    /// read.
    Executed(Executed),
    /// Coordinator → leader: make the prepare record durable.
    Prepare(Prepare),
    /// Leader → coordinator: the prepare vote.
    Vote {
        txn: TxnId,
        part: Participant,
        yes: bool,
    },
    /// Coordinator → leader: the outcome; and the coordinator's
    /// watermark: every transaction it started in its epoch below
    /// `settled_below` is decided at every participant.
    Decide {
        txn: TxnId,
        decision: Decision,
        settled_below: u64,
    },
    /// Leader → coordinator: the outcome is applied.
    Decided {
        txn: TxnId,
        part: Participant,
    },
    Refused {
        txn: TxnId,
        part: Participant,
        reason: Refusal,
    },
    /// Coordinator → every replica of a shard: who leads? (`lock_at =
    /// "leader"` only: a home partition has one server.)
    WhoLeads {
        shard: ShardId,
    },
    /// The answer: a leading replica names itself; others their belief.
    Leader {
        shard: ShardId,
        leader: Option<NodeId>,
    },
    /// In-doubt participant → the servers of another participant (every
    /// replica of its shard, or its home replica).
    Query {
        txn: TxnId,
    },
    /// The answer, about the answering replica's own participant; `None`:
    /// this replica cannot tell (a follower that never saw the
    /// transaction, or a home replica recovering its log).
    Status {
        txn: TxnId,
        part: Participant,
        status: Option<TxnStatus>,
    },
}

/// Coordinator → leader: lock these keys and read those marked. Round
/// 0 starts the transaction here; a procedure that asks for more keys
/// sends round 1, 2, ... once the previous round's reads are back, and
/// the leader adds their locks to those it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execute {
    pub txn: TxnId,
    pub prio: Priority,
    pub round: u32,
    pub keys: Vec<LockRead>,
}

/// Leader → coordinator: every lock of the round is held; the values
/// read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Executed {
    pub txn: TxnId,
    pub part: Participant,
    pub round: u32,
    pub reads: Vec<(Key, Option<Value>)>,
}

/// Coordinator → leader: make the prepare record durable (the writes are
/// this participant's; `participants` are every participant of the
/// transaction, for cooperative termination).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prepare {
    pub txn: TxnId,
    pub participants: Participants,
    pub writes: Vec<(Key, Value)>,
}

impl From<PaxosMsg<Cmd, ReplicaState>> for Msg {
    fn from(m: PaxosMsg<Cmd, ReplicaState>) -> Msg {
        Msg::Paxos(m)
    }
}

/// A durable record: a replica's Paxos acceptor state, or a coordinator's
/// epoch (see `meridian_mechanisms::txnids`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    Paxos(PaxosRecord<Cmd, ReplicaState>),
    Epoch(u64),
}

impl From<PaxosRecord<Cmd, ReplicaState>> for Record {
    fn from(r: PaxosRecord<Cmd, ReplicaState>) -> Record {
        Record::Paxos(r)
    }
}

#[derive(Clone, Debug)]
pub enum Timer {
    Paxos(PaxosTimer),
    /// A leader's periodic check of its in-doubt transactions.
    Termination,
    /// Coordinator: the periodic tick that drives every attempt's deadline
    /// (execute timeout, prepare and decision re-sends).
    Tick,
    /// Coordinator: start the next attempt of a request.
    Restart(RequestId),
    /// Coordinator: ask about abandoned attempts again.
    QueryAbandoned,
}

impl From<PaxosTimer> for Timer {
    fn from(t: PaxosTimer) -> Timer {
        Timer::Paxos(t)
    }
}

#[cfg(test)]
mod record_tests {
    use super::*;

    /// The record as it was, with vectors: what a write-ahead log written
    /// before holds.
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct PrepareRecordWithVecs {
        txn: TxnId,
        coordinator: NodeId,
        participants: Vec<Participant>,
        reads: Vec<(Key, Option<u64>)>,
        writes: Vec<(Key, Value)>,
    }

    fn record(reads: &[(u64, Option<u64>)], writes: &[u64]) -> PrepareRecord {
        PrepareRecord {
            txn: TxnId { node: NodeId(4), seq: 9 },
            coordinator: NodeId(4),
            participants: [Participant(0), Participant(2)].into_iter().collect(),
            reads: reads.iter().map(|(k, v)| (Key(*k), *v)).collect(),
            writes: writes.iter().map(|k| (Key(*k), Value::int(*k, 7))).collect(),
        }
    }

    #[test]
    fn a_prepare_record_encodes_as_the_one_with_vectors_it_replaced() {
        for r in
            [record(&[(1, Some(3))], &[1]), record(&[(1, None), (5, Some(2)), (8, None)], &[5, 8]), record(&[], &[])]
        {
            let old = PrepareRecordWithVecs {
                txn: r.txn,
                coordinator: r.coordinator,
                participants: r.participants.to_vec(),
                reads: r.reads.to_vec(),
                writes: r.writes.to_vec(),
            };
            let bytes = postcard::to_allocvec(&r).expect("encodes");
            assert_eq!(bytes, postcard::to_allocvec(&old).expect("encodes"), "the same bytes");
            let back: PrepareRecord = postcard::from_bytes(&bytes).expect("decodes");
            assert_eq!(back, r);
        }
    }

    #[test]
    fn a_prepare_of_one_key_holds_its_read_and_write_in_the_record() {
        let one = record(&[(1, Some(3))], &[1]);
        assert!(!one.reads.spilled() && !one.writes.spilled(), "no allocation beside the record");
        let more = record(&[(1, None), (2, None)], &[1, 2]);
        assert!(more.reads.spilled() && more.writes.spilled(), "more keys go to the heap, as a vector's");
    }
}
