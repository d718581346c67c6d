//! The messages, log commands, durable records and timers of `2pl-paxos`.

use super::participant::Participant;
use meridian_core::{Key, NodeId, RequestId, ShardId, TxnId, Value};
use meridian_mechanisms::locks::LockMode;
use meridian_mechanisms::mvstore::MvStore;
use meridian_mechanisms::paxos::{PaxosMsg, PaxosRecord, PaxosTimer};
use meridian_mechanisms::twopc::{Decision, Outcomes, TxnStatus};
use serde::{Deserialize, Serialize};
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
    pub participants: Vec<Participant>,
    /// Keys it read, each with the version it read (the log slot that wrote
    /// it; `None`: the initial state): those it locked and does not write,
    /// and those it read and writes. Every replica applies the record only
    /// if these are still current (see `Log::prepare_holds`).
    pub reads: Vec<(Key, Option<u64>)>,
    /// Values to install on commit; their keys are held exclusively.
    pub writes: Vec<(Key, Value)>,
}

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
    pub participants: Vec<Participant>,
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
