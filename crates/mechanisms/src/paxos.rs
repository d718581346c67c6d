//! Multi-Paxos: a replicated log with a stable leader, written once for
//! every protocol that replicates through consensus (2PL+Paxos and the
//! other layered baselines' shard groups, Tiga's view manager, SLOG's
//! per-region and global logs).
//!
//! Classic Multi-Paxos (Lamport, "Paxos Made Simple" §3): a candidate runs
//! phase 1 with a ballot `(round, rank)` for every slot past its commit
//! point, adopts the highest-ballot value of each slot (filling holes with
//! no-ops) and re-proposes them; a leader then runs phase 2 (`Accept` /
//! `Accepted`) per slot, a slot being chosen once a majority accepted it.
//! Acceptors persist promises and accepted values before answering (the
//! answers wait for the host's `on_persisted`). Followers learn the commit
//! point from the leader's `Accept`s and heartbeats and mark a slot chosen
//! when the value they hold was accepted at the leader's ballot; anything
//! else they fetch. Failure detection runs on a periodic tick: a follower
//! that hears nothing from a leader for its (staggered, randomized) timeout
//! starts phase 1. Round 1 is reserved for the preferred member of a fresh
//! group, which leads at once; elections use rounds from 2.
//!
//! **Links that fail one way** (beyond "Paxos Made Simple", as Raft's
//! CheckQuorum and leader stickiness do). A leader whose followers hear it
//! but whose acknowledgements do not reach it would heartbeat forever with
//! nothing chosen, and no follower would time out: a leader that has had a
//! proposal waiting for `STEP_DOWN_ELECTIONS` election timeouts (and at
//! least `STEP_DOWN_ROUND_TRIPS` of the round trips it measured) without a
//! majority choosing any of its slots steps down, so the followers elect
//! another. And a member the leader does not reach would time out and, with
//! a higher ballot, depose a leader the rest still hear, again and again: a
//! member that heard its leader within half an election timeout (a leader:
//! that was idle, or had a slot chosen, that recently) ignores a candidate.
//! And a member timed out asks the others whether they would vote for it
//! (`PreVote`, as Raft's) before it raises its ballot: one that the leader
//! does not reach, or that was cut off and comes back, finds no majority
//! and leaves the promises, and so the leader, alone — when the cut heals
//! it just follows the leader again. None of these rules acts in a run
//! without faults: no proposal waits that long, and candidates appear only
//! when a leader has been silent for a timeout.
//!
//! The component never sends a message that depends on state not yet
//! durable, and it emits [`PaxosEvent::Committed`] strictly in slot order,
//! each slot exactly once per process lifetime (a restarted node replays its
//! durable chosen prefix from slot 1).
//!
//! **Learners** ("Paxos Made Simple" §2.3, learning a chosen value): a group
//! may name nodes that are not members ([`MultiPaxos::with_learners`]); each
//! runs a [`MultiPaxos::learner`] that never votes, runs or answers a
//! candidate. Every tick the leader pushes them the slots chosen since its
//! last push, then its commit point, from which they fetch what they missed
//! (or a snapshot, past the leader's checkpoint). Only chosen values reach a
//! learner, so it holds nothing a later ballot could overwrite. 2pl-paxos's
//! `lock_at = "home"` replicates each home's one-member log to the shard's
//! other copies this way, asynchronously and in order.

use crate::durable::AfterDurable;
use crate::quorum::Quorum;
use meridian_core::{Env, Lsn, NodeId, Stream};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Election timeouts a leader waits with a proposal pending and no slot
/// chosen before it steps down (see the module docs); never fewer ticks
/// than two retransmissions take, so that one lost round of votes does not
/// depose a leader whose timeout is short.
const STEP_DOWN_ELECTIONS: u64 = 1;

/// Round trips (the longest this leader measured) a leader also waits
/// before it steps down.
const STEP_DOWN_ROUND_TRIPS: u64 = 4;

/// Ticks an unacknowledged proposal waits before the leader re-sends it.
const RETRANSMIT_TICKS: u64 = 4;

/// A ballot: rounds are compared first, then the proposer's rank.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize, Default)]
pub struct Ballot {
    pub round: u64,
    pub rank: u32,
}

/// Timing knobs, in ticks of `tick_ns`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PaxosConfig {
    pub tick_ns: u64,
    /// Ticks without hearing the leader before the first candidate runs.
    pub election_ticks: u32,
    /// Extra ticks per step of distance from the preferred leader, so that
    /// the next in line usually wins without a duel.
    pub stagger_ticks: u32,
    /// Random extra ticks, `0..=jitter_ticks`.
    pub jitter_ticks: u32,
    /// Most slots re-sent per tick, and most entries per fetch reply.
    pub batch_max: usize,
    /// Slots between checkpoints the host is asked for (0: never).
    pub compact_every: u64,
}

impl PaxosConfig {
    /// Timings for a group whose members are up to `max_rtt_ns` apart.
    pub fn for_rtt(max_rtt_ns: u64) -> PaxosConfig {
        let tick_ns = (max_rtt_ns / 2).clamp(5_000_000, 100_000_000);
        PaxosConfig { tick_ns, election_ticks: 8, stagger_ticks: 4, jitter_ticks: 3, batch_max: 256, compact_every: 0 }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromisedEntry<V> {
    pub slot: u64,
    pub ballot: Ballot,
    pub value: Option<Arc<V>>,
    /// The acceptor knows this value is chosen.
    pub chosen: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PaxosBody<V, S = ()> {
    Prepare {
        ballot: Ballot,
        from_slot: u64,
    },
    /// Phase 1b. `snapshot` is the acceptor's checkpoint when the candidate
    /// asked for slots it has compacted away.
    Promise {
        ballot: Ballot,
        entries: Vec<PromisedEntry<V>>,
        snapshot: Option<(u64, Arc<S>)>,
    },
    Nack {
        ballot: Ballot,
        promised: Ballot,
    },
    Accept {
        ballot: Ballot,
        slot: u64,
        value: Option<Arc<V>>,
        commit_upto: u64,
    },
    Accepted {
        ballot: Ballot,
        slot: u64,
    },
    Commit {
        ballot: Ballot,
        commit_upto: u64,
    },
    Fetch {
        from_slot: u64,
        to_slot: u64,
    },
    Chosen {
        entries: Vec<(u64, Option<Arc<V>>)>,
    },
    /// The host state after slot `upto`, for a member that lags behind the
    /// sender's compacted log.
    Snapshot {
        upto: u64,
        state: Arc<S>,
    },
    /// Before phase 1: would the member vote for `ballot`? Nothing changes
    /// at the member (Raft's PreVote).
    PreVote {
        ballot: Ballot,
    },
    /// It would: it has not heard a live leader lately. `promised` is its
    /// promise, so the candidate's real ballot outbids it.
    PreVoteGranted {
        ballot: Ballot,
        promised: Ballot,
    },
}

/// A message of group `group`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaxosMsg<V, S = ()> {
    pub group: u32,
    pub body: PaxosBody<V, S>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PaxosRecordBody<V, S = ()> {
    Promised(Ballot),
    Accepted {
        slot: u64,
        ballot: Ballot,
        value: Option<Arc<V>>,
    },
    Chosen {
        slot: u64,
        value: Option<Arc<V>>,
    },
    /// The whole acceptor state as of a compaction. Boxed: one per
    /// compaction, while every slot appends an `Accepted`, and each durable
    /// record takes the size of the largest variant (80 bytes a record on
    /// the simulated disk unboxed, 64 boxed, for 2pl-paxos).
    Checkpoint(Box<PaxosCheckpoint<V, S>>),
}

/// The host's state after slot `upto`, the promise, and every slot after
/// `upto`: the durable record a compaction leaves (encoded as the struct
/// variant it replaces would be).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaxosCheckpoint<V, S = ()> {
    pub promised: Ballot,
    pub upto: u64,
    pub state: Arc<S>,
    pub entries: Vec<PromisedEntry<V>>,
}

/// A durable record of group `group`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaxosRecord<V, S = ()> {
    pub group: u32,
    pub body: PaxosRecordBody<V, S>,
}

/// The periodic tick of group `group`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaxosTimer {
    pub group: u32,
}

/// What the host learns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PaxosEvent<V, S = ()> {
    /// Slot `slot` holds `value` for ever; emitted in slot order (no-op slots
    /// are skipped).
    Committed { slot: u64, value: Arc<V> },
    /// This node leads with `ballot` and every slot before its first new
    /// proposal is committed: it may serve.
    LeaderReady { ballot: Ballot },
    /// This node stopped leading.
    Deposed,
    /// Replace the host's state by `state`, the state after slot `upto`
    /// (a restart from a checkpoint, or a snapshot from a peer); committed
    /// slots after it follow.
    Restore { upto: u64, state: Arc<S> },
}

/// Why a proposal was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotLeader {
    pub hint: Option<NodeId>,
}

#[derive(Clone, Debug)]
struct Slot<V> {
    ballot: Ballot,
    value: Option<Arc<V>>,
    chosen: bool,
}

/// The counters Multi-Paxos emits, for the counter list of every protocol
/// that embeds it (`Protocol::counters`).
pub const COUNTERS: &[meridian_core::CounterDoc] = &[
    meridian_core::CounterDoc { name: "paxos_elections", doc: "phase-1 elections a replica started" },
    meridian_core::CounterDoc {
        name: "paxos_pre_votes",
        doc: "times a replica that stopped hearing its leader asked whether a majority would vote for it, before any phase 1",
    },
    meridian_core::CounterDoc { name: "paxos_leader_changes", doc: "times a replica saw a new leader" },
    meridian_core::CounterDoc {
        name: "paxos_leader_stepdowns",
        doc: "leaders that stepped down after an election timeout with a proposal waiting and nothing chosen",
    },
    meridian_core::CounterDoc {
        name: "paxos_prepares_ignored",
        doc: "candidates' prepares a replica ignored because it had heard a live leader within half an election timeout",
    },
    meridian_core::CounterDoc { name: "paxos_checkpoints", doc: "checkpoints taken (the log compacted behind them)" },
    meridian_core::CounterDoc {
        name: "paxos_snapshots_installed",
        doc: "a lagging replica adopted a peer's checkpoint instead of replaying the log",
    },
];

/// Most slots the log holds past its first: a bound on memory that a
/// message naming a far-off slot cannot break.
const LOG_WINDOW: u64 = 1 << 24;

/// Most chosen slots a leader pushes to its learners per tick: a bound on
/// one message's size. A leader choosing faster than this leaves the rest
/// to the learners' fetches (and falls back on snapshots past its
/// checkpoint); at the default tick of 50 ms it is 80,000 slots a second.
const LEARNER_PUSH_MAX: u64 = 4_096;

/// The log, by slot, from `base` (slots before it are compacted into a
/// checkpoint): O(1) access, appends at the end.
#[derive(Debug)]
struct SlotLog<V> {
    base: u64,
    slots: VecDeque<Option<Slot<V>>>,
}

impl<V> SlotLog<V> {
    fn new() -> Self {
        SlotLog { base: 1, slots: VecDeque::new() }
    }

    fn index(&self, slot: u64) -> Option<usize> {
        (self.base..self.base + LOG_WINDOW).contains(&slot).then(|| (slot - self.base) as usize)
    }

    /// Whether `slot` could be held (not compacted, within the window).
    fn in_window(&self, slot: u64) -> bool {
        self.index(slot).is_some()
    }

    fn get(&self, slot: &u64) -> Option<&Slot<V>> {
        self.slots.get(self.index(*slot)?)?.as_ref()
    }

    fn get_mut(&mut self, slot: &u64) -> Option<&mut Slot<V>> {
        let i = self.index(*slot)?;
        self.slots.get_mut(i)?.as_mut()
    }

    /// Stores a slot; false (and nothing stored) outside the window.
    fn insert(&mut self, slot: u64, value: Slot<V>) -> bool {
        let Some(i) = self.index(slot) else { return false };
        if i < self.slots.len() {
            self.slots[i] = Some(value);
        } else {
            // The next slot (the common case) or one past a gap: pushed,
            // not written as `None` and then overwritten.
            self.slots.resize_with(i, || None);
            self.slots.push_back(Some(value));
        }
        true
    }

    /// Occupied slots from `from` to `to` (inclusive) in order.
    fn range(&self, from: u64, to: u64) -> impl Iterator<Item = (u64, &Slot<V>)> {
        let start = from.max(self.base);
        let end = to.min(self.base + self.slots.len() as u64 - 1);
        (start..=end).filter_map(move |slot| self.get(&slot).map(|s| (slot, s)))
    }

    /// Forgets every slot before `base`.
    fn truncate_before(&mut self, base: u64) {
        while self.base < base {
            self.slots.pop_front();
            self.base += 1;
        }
    }
}

/// A leader's votes for its unchosen slots, by slot from `base`, with the
/// tick each was last sent. A leader proposes slots in increasing order,
/// so votes only ever join at the end; a slot leaves when chosen, in any
/// order, and the window drops the gaps that leaves at either end. Every
/// proposal goes in and out once; in a B-tree map that cost about 1,100
/// instructions a slot, 4 % of a 2PL+Paxos run (docs/flat-cost.md).
#[derive(Debug, Default)]
struct Acks {
    base: u64,
    slots: VecDeque<Option<(Quorum, u64)>>,
}

impl Acks {
    /// No slot waits for votes (the window holds no gap at either end).
    fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Votes for `slot`, past every slot already held.
    fn insert(&mut self, slot: u64, votes: (Quorum, u64)) {
        if self.slots.is_empty() {
            self.base = slot;
        }
        let end = self.base + self.slots.len() as u64;
        assert!(slot >= end, "slot {slot} proposed out of order (window ends at {end})");
        self.slots.extend(std::iter::repeat_n(None, (slot - end) as usize));
        self.slots.push_back(Some(votes));
    }

    fn get_mut(&mut self, slot: u64) -> Option<&mut (Quorum, u64)> {
        let i = usize::try_from(slot.checked_sub(self.base)?).ok()?;
        self.slots.get_mut(i)?.as_mut()
    }

    fn remove(&mut self, slot: u64) {
        if let Some(held) = slot.checked_sub(self.base).and_then(|i| self.slots.get_mut(i as usize)) {
            *held = None;
        }
        while self.slots.front().is_some_and(|v| v.is_none()) {
            self.slots.pop_front();
            self.base += 1;
        }
        while self.slots.back().is_some_and(|v| v.is_none()) {
            self.slots.pop_back();
        }
    }

    /// The last slot held (a window never ends in a gap).
    fn last_slot(&self) -> Option<u64> {
        (!self.slots.is_empty()).then(|| self.base + self.slots.len() as u64 - 1)
    }

    /// Held slots in order.
    fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut (Quorum, u64))> {
        let base = self.base;
        self.slots.iter_mut().enumerate().filter_map(move |(i, v)| v.as_mut().map(|v| (base + i as u64, v)))
    }
}

#[derive(Debug)]
enum Role<V> {
    Follower,
    /// `since_tick`: when it started phase 1.
    Candidate {
        ballot: Ballot,
        promises: Quorum,
        merged: BTreeMap<u64, PromisedEntry<V>>,
        since_tick: u64,
    },
    /// `acks` holds, per unchosen slot, its votes and the tick it was last
    /// sent; `heard_tick` is the last tick a majority was known to hear
    /// this leader (a slot chosen) or nothing waited for one;
    /// `round_trip_ticks` the longest a majority took to answer it (its
    /// phase 1, or a slot from proposal to choice), unknown until one did.
    Leader {
        ballot: Ballot,
        next_slot: u64,
        acks: Acks,
        ready: bool,
        recover_upto: u64,
        heard_tick: u64,
        round_trip_ticks: Option<u64>,
    },
}

enum Deferred<V, S> {
    Send(NodeId, PaxosBody<V, S>),
    SelfPromise(Ballot),
    SelfAccept(Ballot, u64),
}

pub type PaxosEnv<'a, V, S = ()> = dyn Env<PaxosMsg<V, S>, PaxosRecord<V, S>, PaxosTimer> + 'a;

/// One member's replica of a Multi-Paxos group (or a learner's copy of
/// its log).
pub struct MultiPaxos<V, S = ()> {
    group: u32,
    members: Vec<NodeId>,
    /// This node's rank among the members (`members.len()` for a learner:
    /// no member's).
    me: usize,
    /// Nodes that learn the chosen log without voting; empty in a plain
    /// group.
    learners: Vec<NodeId>,
    /// This node is a learner: it never votes, runs or leads.
    learning: bool,
    /// The stream of the node's durable log this group's records go to (a
    /// node that holds several groups' logs gives each its own, so that
    /// each compacts alone).
    stream: Stream,
    /// A leader's last slot pushed to its learners.
    pushed_upto: u64,
    preferred: usize,
    cfg: PaxosConfig,
    promised: Ballot,
    /// Highest round seen anywhere, so a new candidate outbids it.
    max_round_seen: u64,
    log: SlotLog<V>,
    commit_upto: u64,
    delivered_upto: u64,
    role: Role<V>,
    leader: Option<usize>,
    /// The commit point the leader last announced.
    leader_commit: u64,
    ticks_since_heard: u32,
    /// The rank of the last leader heard (an `Accept` or a heartbeat, not a
    /// candidate's `Prepare`) and the tick it was heard at.
    leader_heard: Option<(usize, u64)>,
    /// Whether a promise to a candidate restarts the election timeout: only
    /// the first since a leader was heard does (see `on_prepare`).
    wait_for_candidate: bool,
    /// The ballot this member asks pre-votes for, and the grants so far
    /// (its own included); phase 1 follows at a majority.
    pre_vote: Option<(Ballot, Quorum)>,
    timeout_ticks: u32,
    fetch_pending_ticks: u32,
    /// Actions that wait for an append to be durable (votes, own votes).
    durable: AfterDurable<Deferred<V, S>>,
    /// Ticks since start, to age unacknowledged proposals.
    ticks: u64,
    /// The latest checkpoint: the host state after a slot.
    snapshot: Option<(u64, Arc<S>)>,
    events: Vec<PaxosEvent<V, S>>,
}

impl<V: Clone + std::fmt::Debug, S: Clone + std::fmt::Debug> MultiPaxos<V, S> {
    /// A member of `members` (all nodes of the group, in rank order);
    /// `preferred` is the rank that leads first.
    pub fn new(group: u32, members: Vec<NodeId>, me: NodeId, preferred: usize, cfg: PaxosConfig) -> Self {
        let me = members.iter().position(|m| *m == me).expect("a member of its own group");
        Self::build(group, members, me, preferred, cfg)
    }

    /// A learner of group `group`, whose members (`members`, of which it is
    /// not one) name it in [`MultiPaxos::with_learners`]: it applies the
    /// chosen log in slot order as the leader pushes it or as it fetches
    /// it, and never votes, runs for election or answers a candidate.
    pub fn learner(group: u32, members: Vec<NodeId>, me: NodeId, preferred: usize, cfg: PaxosConfig) -> Self {
        assert!(!members.contains(&me), "a learner is not a member");
        let rank = members.len();
        let mut learner = Self::build(group, members, rank, preferred, cfg);
        learner.learning = true;
        learner
    }

    /// Names the group's learners: its leader pushes them every slot
    /// chosen, once a tick, and answers their fetches.
    pub fn with_learners(mut self, learners: Vec<NodeId>) -> Self {
        assert!(learners.iter().all(|l| !self.members.contains(l)), "a learner is not a member");
        self.learners = learners;
        self
    }

    /// Keeps the group's durable records in `stream` of the node's log
    /// (default [`Stream::MAIN`]).
    pub fn on_stream(mut self, stream: Stream) -> Self {
        self.stream = stream;
        self
    }

    fn build(group: u32, members: Vec<NodeId>, me: usize, preferred: usize, cfg: PaxosConfig) -> Self {
        assert!(members.len() <= 64, "a quorum counts at most 64 members");
        assert!(preferred < members.len(), "the preferred leader is a member");
        MultiPaxos {
            group,
            members,
            me,
            learners: Vec::new(),
            learning: false,
            stream: Stream::MAIN,
            pushed_upto: 0,
            preferred,
            cfg,
            promised: Ballot::default(),
            max_round_seen: 0,
            log: SlotLog::new(),
            commit_upto: 0,
            delivered_upto: 0,
            role: Role::Follower,
            leader: Some(preferred),
            leader_commit: 0,
            ticks_since_heard: 0,
            leader_heard: None,
            wait_for_candidate: true,
            pre_vote: None,
            timeout_ticks: 0,
            fetch_pending_ticks: 0,
            durable: AfterDurable::new(),
            ticks: 0,
            snapshot: None,
            events: Vec::new(),
        }
    }

    pub fn group(&self) -> u32 {
        self.group
    }

    pub fn members(&self) -> &[NodeId] {
        &self.members
    }

    /// Whether this node is a learner of the group, not a member.
    pub fn is_learner(&self) -> bool {
        self.learning
    }

    /// Starts (or restarts from durable records): replays the durable chosen
    /// prefix as `Committed` events, and the preferred member of a fresh
    /// group leads at ballot (1, rank) without phase 1 (no lower ballot can
    /// have accepted anything).
    pub fn start(&mut self, env: &mut PaxosEnv<'_, V, S>, durable: impl IntoIterator<Item = PaxosRecordBody<V, S>>) {
        let mut fresh = true;
        for record in durable {
            fresh = false;
            self.replay(record);
        }
        if !fresh {
            // Whoever leads now, it is not known to have been us.
            self.leader = None;
        }
        self.max_round_seen = self.promised.round;
        if let Some((upto, state)) = self.snapshot.clone() {
            self.events.push(PaxosEvent::Restore { upto, state });
        }
        self.advance_commit();
        self.reset_timeout(env);
        env.set_timer(self.cfg.tick_ns, PaxosTimer { group: self.group });
        if fresh && self.me == self.preferred {
            // Round 1 belongs to the preferred member alone (elections start
            // at round 2), so (1, preferred) is the lowest ballot there is and
            // phase 1 has nothing to learn.
            let ballot = Ballot { round: 1, rank: self.me as u32 };
            self.begin_candidacy(env, ballot, false);
        }
    }

    fn replay(&mut self, record: PaxosRecordBody<V, S>) {
        match record {
            PaxosRecordBody::Checkpoint(checkpoint) => {
                let PaxosCheckpoint { promised, upto, state, entries } = *checkpoint;
                self.promised = self.promised.max(promised);
                self.adopt_snapshot(upto, state);
                for e in entries {
                    self.log.insert(e.slot, Slot { ballot: e.ballot, value: e.value, chosen: e.chosen });
                }
            }
            PaxosRecordBody::Promised(b) => self.promised = self.promised.max(b),
            PaxosRecordBody::Accepted { slot, ballot, value } => {
                self.promised = self.promised.max(ballot);
                if !self.log.get(&slot).is_some_and(|s| s.chosen) {
                    self.log.insert(slot, Slot { ballot, value, chosen: false });
                }
            }
            PaxosRecordBody::Chosen { slot, value } => {
                self.log.insert(slot, Slot { ballot: Ballot::default(), value, chosen: true });
            }
        }
    }

    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader { ready: true, .. })
    }

    /// The leader this member believes in (itself included).
    pub fn leader_hint(&self) -> Option<NodeId> {
        self.leader.map(|r| self.members[r])
    }

    pub fn commit_upto(&self) -> u64 {
        self.commit_upto
    }

    /// The last slot handed to the host (as `Committed`, or skipped as a
    /// no-op, or covered by a `Restore`).
    pub fn delivered_upto(&self) -> u64 {
        self.delivered_upto
    }

    pub fn ballot(&self) -> Ballot {
        match &self.role {
            Role::Leader { ballot, .. } | Role::Candidate { ballot, .. } => *ballot,
            Role::Follower => self.promised,
        }
    }

    /// Entries held in memory: log slots (the window since the last
    /// checkpoint) and appends awaiting durability.
    pub fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("paxos_slots", self.log.slots.len());
        out("paxos_awaiting_durable", self.durable.len());
    }

    /// What holds between events (`Process::check_invariants`): commits in
    /// order behind the log, a leader's ballot within its promise, and
    /// appends acknowledged in order.
    pub fn check_invariants(&self) {
        assert!(self.delivered_upto <= self.commit_upto, "delivered past the commit point");
        assert!(self.log.base <= self.commit_upto + 1, "slots compacted before they were chosen");
        assert!(self.log.slots.len() as u64 <= LOG_WINDOW, "the log outgrew its window");
        if let Some(slot) = self.log.get(&self.commit_upto) {
            assert!(slot.chosen, "slot {} is committed but not chosen", self.commit_upto);
        }
        for slot in self.log.slots.iter().rev().take(8).flatten() {
            assert!(slot.ballot <= self.promised, "a slot accepted above the promise");
        }
        assert!(!self.learning || matches!(self.role, Role::Follower), "a learner runs or leads");
        assert!(self.pre_vote.is_none() || !matches!(self.role, Role::Leader { .. }), "a leader asks for pre-votes");
        if let Role::Leader { ballot, next_slot, acks, .. } = &self.role {
            assert!(*ballot <= self.promised, "a leader's ballot above its promise");
            assert!(self.pushed_upto <= self.commit_upto, "pushed to learners past the commit point");
            assert!(*next_slot > self.commit_upto, "a leader proposes below its commit point");
            assert!(acks.last_slot().is_none_or(|slot| slot < *next_slot), "votes for an unproposed slot");
            assert!(acks.slots.front().is_none_or(|v| v.is_some()), "the votes' window starts with a gap");
        }
        self.durable.check_invariants();
    }

    /// Whether events wait to be taken (a host polls after every message;
    /// most leave none).
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Takes the events produced so far.
    pub fn drain_events(&mut self) -> Vec<PaxosEvent<V, S>> {
        std::mem::take(&mut self.events)
    }

    /// Moves the events produced so far into `into`, which must be empty,
    /// and keeps `into`'s allocation for the next ones: a host that drains
    /// `into` and hands it back each time allocates no event list per
    /// message (`drain_events` leaves none behind).
    pub fn swap_events(&mut self, into: &mut Vec<PaxosEvent<V, S>>) {
        assert!(into.is_empty(), "events handed back undrained would be lost");
        std::mem::swap(&mut self.events, into);
    }

    /// Proposes a value in the next free slot (ready leaders only).
    pub fn propose(&mut self, env: &mut PaxosEnv<'_, V, S>, value: V) -> Result<u64, NotLeader> {
        let Role::Leader { ballot, next_slot, acks, ready: true, .. } = &mut self.role else {
            return Err(NotLeader { hint: self.leader.map(|r| self.members[r]) });
        };
        let (ballot, slot) = (*ballot, *next_slot);
        *next_slot += 1;
        acks.insert(slot, (Quorum::majority(self.members.len()), self.ticks));
        self.accept_own(env, ballot, slot, Some(Arc::new(value)));
        Ok(slot)
    }

    /// Proposes `value` as leader in `slot` at `ballot`: persist, then count
    /// our own vote; send to the others at once (they persist in parallel).
    fn accept_own(&mut self, env: &mut PaxosEnv<'_, V, S>, ballot: Ballot, slot: u64, value: Option<Arc<V>>) {
        self.log.insert(slot, Slot { ballot, value: value.clone(), chosen: false });
        self.persist(env, PaxosRecordBody::Accepted { slot, ballot, value: value.clone() });
        self.after_durable(env, Deferred::SelfAccept(ballot, slot));
        let body = PaxosBody::Accept { ballot, slot, value, commit_upto: self.commit_upto };
        self.send_others(env, &body);
    }

    pub fn on_persisted(&mut self, env: &mut PaxosEnv<'_, V, S>, upto: Lsn) {
        while let Some(deferred) = self.durable.next_freed(upto) {
            self.run_deferred(env, deferred);
        }
    }

    pub fn on_timer(&mut self, env: &mut PaxosEnv<'_, V, S>, _timer: PaxosTimer) {
        env.set_timer(self.cfg.tick_ns, PaxosTimer { group: self.group });
        self.ticks += 1;
        self.fetch_pending_ticks = self.fetch_pending_ticks.saturating_sub(1);
        if let Role::Leader { ballot, .. } = self.role {
            if self.unheard_leader() {
                // Nothing chosen for long while a slot waits: the followers
                // may hear this leader, but it does not hear them. Stepping
                // down lets them time out and elect one that reaches them.
                env.count("paxos_leader_stepdowns", 1);
                self.step_down_if_leading();
                self.role = Role::Follower;
                self.leader = None;
                self.reset_timeout(env);
                // Run last: its own first candidacy would restart the
                // followers' timeouts (`on_prepare`) and, if they do not
                // hear it, only delay the election they need.
                let n = self.members.len() as u32;
                self.timeout_ticks += self.cfg.election_ticks + n * self.cfg.stagger_ticks;
                return;
            }
            let body = PaxosBody::Commit { ballot, commit_upto: self.commit_upto };
            self.send_others(env, &body);
            self.push_to_learners(env, body);
            self.retransmit(env);
            return;
        }
        self.ticks_since_heard += 1;
        if self.leader_commit > self.commit_upto {
            self.request_missing(env);
        }
        if !self.learning && self.ticks_since_heard >= self.timeout_ticks {
            let ballot = self.next_ballot();
            if self.members.len() == 1 {
                self.begin_candidacy(env, ballot, true);
            } else {
                self.begin_pre_vote(env, ballot);
            }
        }
    }

    pub fn on_message(&mut self, env: &mut PaxosEnv<'_, V, S>, from: NodeId, msg: PaxosMsg<V, S>) {
        debug_assert_eq!(msg.group, self.group);
        let Some(rank) = self.members.iter().position(|m| *m == from) else {
            // A learner asks for what it missed; it says nothing else.
            if let PaxosBody::Fetch { from_slot, to_slot } = msg.body {
                if self.learners.contains(&from) {
                    self.on_fetch(env, from, from_slot, to_slot);
                }
            }
            return;
        };
        if self.learning {
            return self.on_learn(env, rank, msg.body);
        }
        match msg.body {
            PaxosBody::Prepare { ballot, from_slot } => self.on_prepare(env, rank, ballot, from_slot),
            PaxosBody::Promise { ballot, entries, snapshot } => self.on_promise(env, rank, ballot, entries, snapshot),
            PaxosBody::Snapshot { upto, state } => {
                self.install_snapshot(env, upto, state);
                self.fetch_pending_ticks = 0;
                self.check_ready();
            }
            PaxosBody::Nack { ballot, promised } => self.on_nack(env, ballot, promised),
            PaxosBody::Accept { ballot, slot, value, commit_upto } => {
                self.on_accept(env, rank, ballot, slot, value, commit_upto)
            }
            PaxosBody::Accepted { ballot, slot } => self.on_accepted(env, rank, ballot, slot),
            PaxosBody::Commit { ballot, commit_upto } => self.on_commit(env, rank, ballot, commit_upto),
            PaxosBody::Fetch { from_slot, to_slot } => self.on_fetch(env, from, from_slot, to_slot),
            PaxosBody::Chosen { entries } => self.on_chosen(env, entries),
            PaxosBody::PreVote { ballot } => self.on_pre_vote(env, rank, ballot),
            PaxosBody::PreVoteGranted { ballot, promised } => self.on_pre_vote_granted(env, rank, ballot, promised),
        }
    }

    // ---- learners ----

    /// A leader's tick: every learner gets the slots chosen since the last
    /// push (at most [`LEARNER_PUSH_MAX`]), then the commit point `commit`,
    /// from which it fetches anything it missed.
    fn push_to_learners(&mut self, env: &mut PaxosEnv<'_, V, S>, commit: PaxosBody<V, S>) {
        if self.learners.is_empty() {
            return;
        }
        let upto = self.commit_upto.min(self.pushed_upto + LEARNER_PUSH_MAX);
        let entries: Vec<(u64, Option<Arc<V>>)> = self
            .log
            .range(self.pushed_upto + 1, upto)
            .filter(|(_, s)| s.chosen)
            .map(|(slot, s)| (slot, s.value.clone()))
            .collect();
        self.pushed_upto = upto;
        for to in self.learners.clone() {
            if !entries.is_empty() {
                self.send(env, to, PaxosBody::Chosen { entries: entries.clone() });
            }
            self.send(env, to, commit.clone());
        }
    }

    /// A learner hears the leader's commit point, chosen slots and
    /// snapshots; a candidate's or an acceptor's messages are not for it.
    fn on_learn(&mut self, env: &mut PaxosEnv<'_, V, S>, rank: usize, body: PaxosBody<V, S>) {
        match body {
            // A lower ballot is a deposed leader's (or a restarted one's
            // earlier life): its commit point says nothing new.
            PaxosBody::Commit { ballot, commit_upto } if ballot >= self.promised => {
                self.follow(rank, ballot);
                self.learn_commit(env, ballot, commit_upto);
            }
            PaxosBody::Chosen { entries } => self.on_chosen(env, entries),
            PaxosBody::Snapshot { upto, state } => {
                self.install_snapshot(env, upto, state);
                self.fetch_pending_ticks = 0;
            }
            PaxosBody::Commit { .. }
            | PaxosBody::Prepare { .. }
            | PaxosBody::Promise { .. }
            | PaxosBody::Nack { .. }
            | PaxosBody::Accept { .. }
            | PaxosBody::Accepted { .. }
            | PaxosBody::Fetch { .. }
            | PaxosBody::PreVote { .. }
            | PaxosBody::PreVoteGranted { .. } => {}
        }
    }

    // ---- pre-vote ----

    /// A ballot above every one this member has seen.
    fn next_ballot(&self) -> Ballot {
        let round = self.max_round_seen.max(self.promised.round).max(1) + 1;
        Ballot { round, rank: self.me as u32 }
    }

    /// Asks the others whether they would vote for `ballot`, changing
    /// nothing durable: no majority (a member the leader does not reach,
    /// one cut off from the group) leaves its promise, and everyone
    /// else's, where they were. It asks again after another timeout.
    fn begin_pre_vote(&mut self, env: &mut PaxosEnv<'_, V, S>, ballot: Ballot) {
        let mut grants = Quorum::majority(self.members.len());
        let won = grants.add(self.me);
        debug_assert!(!won, "a group of several members needs more than one grant");
        self.pre_vote = Some((ballot, grants));
        self.reset_timeout(env);
        env.count("paxos_pre_votes", 1);
        self.send_others(env, &PaxosBody::PreVote { ballot });
    }

    /// Grants a pre-vote unless this member heard a live leader lately
    /// (`leader_is_live`, the rule `on_prepare` keeps).
    fn on_pre_vote(&mut self, env: &mut PaxosEnv<'_, V, S>, rank: usize, ballot: Ballot) {
        if !self.leader_is_live(rank) {
            let promised = self.promised;
            self.send(env, self.members[rank], PaxosBody::PreVoteGranted { ballot, promised });
        }
    }

    /// At a majority of grants, phase 1, at a ballot above every promise
    /// the grants named.
    fn on_pre_vote_granted(&mut self, env: &mut PaxosEnv<'_, V, S>, rank: usize, ballot: Ballot, promised: Ballot) {
        self.max_round_seen = self.max_round_seen.max(promised.round);
        let Some((asked, grants)) = self.pre_vote.as_mut() else { return };
        if *asked != ballot {
            return;
        }
        if grants.add(rank) {
            self.pre_vote = None;
            let ballot = self.next_ballot();
            self.begin_candidacy(env, ballot, true);
        }
    }

    // ---- phase 1 ----

    /// Promises `ballot` to ourselves and, with `phase1`, asks the others;
    /// without it our own durable promise suffices (the fresh round-1 case).
    fn begin_candidacy(&mut self, env: &mut PaxosEnv<'_, V, S>, ballot: Ballot, phase1: bool) {
        self.step_down_if_leading();
        self.pre_vote = None;
        self.promised = ballot;
        self.max_round_seen = self.max_round_seen.max(ballot.round);
        let from_slot = self.commit_upto + 1;
        let merged = self.entries_from(from_slot).into_iter().map(|e| (e.slot, e)).collect();
        let promises = if phase1 { Quorum::majority(self.members.len()) } else { Quorum::new(1) };
        self.role = Role::Candidate { ballot, promises, merged, since_tick: self.ticks };
        self.leader = None;
        self.reset_timeout(env);
        self.persist(env, PaxosRecordBody::Promised(ballot));
        self.after_durable(env, Deferred::SelfPromise(ballot));
        if phase1 {
            env.count("paxos_elections", 1);
            self.send_others(env, &PaxosBody::Prepare { ballot, from_slot });
        }
    }

    fn on_prepare(&mut self, env: &mut PaxosEnv<'_, V, S>, rank: usize, ballot: Ballot, from_slot: u64) {
        self.max_round_seen = self.max_round_seen.max(ballot.round);
        if ballot > self.promised && self.leader_is_live(rank) {
            // A member the leader does not reach (a link cut one way) would
            // depose it over and over; the rest of the group still hears it.
            env.count("paxos_prepares_ignored", 1);
            return;
        }
        if ballot < self.promised || (ballot == self.promised && rank != ballot.rank as usize) {
            let promised = self.promised;
            self.send(env, self.members[rank], PaxosBody::Nack { ballot, promised });
            return;
        }
        if ballot > self.promised {
            self.step_down_if_leading();
            self.role = Role::Follower;
            self.promised = ballot;
            self.leader = Some(rank);
            self.pre_vote = None;
            // The first candidate since a leader was heard gets a whole
            // timeout to win. One that never does (the others do not hear
            // it) must not keep everyone else from running by asking again.
            if std::mem::take(&mut self.wait_for_candidate) {
                self.ticks_since_heard = 0;
            }
            self.persist(env, PaxosRecordBody::Promised(ballot));
        }
        // Answer once the promise is durable (a duplicate Prepare waits too).
        let entries = self.entries_from(from_slot);
        let snapshot = self.snapshot.clone().filter(|(upto, _)| from_slot <= *upto);
        self.after_durable(env, Deferred::Send(self.members[rank], PaxosBody::Promise { ballot, entries, snapshot }));
    }

    fn on_promise(
        &mut self,
        env: &mut PaxosEnv<'_, V, S>,
        rank: usize,
        ballot: Ballot,
        entries: Vec<PromisedEntry<V>>,
        snapshot: Option<(u64, Arc<S>)>,
    ) {
        if !matches!(&self.role, Role::Candidate { ballot: mine, .. } if *mine == ballot) {
            return;
        }
        // A promiser that compacted past our commit point sends its state:
        // everything up to its checkpoint is chosen.
        if let Some((upto, state)) = snapshot {
            self.install_snapshot(env, upto, state);
        }
        let commit_upto = self.commit_upto;
        let Role::Candidate { promises, merged, .. } = &mut self.role else { unreachable!("checked above") };
        merged.retain(|slot, _| *slot > commit_upto);
        for e in entries.into_iter().filter(|e| e.slot > commit_upto && e.slot < commit_upto + LOG_WINDOW) {
            let better = match merged.get(&e.slot) {
                None => true,
                Some(old) => !old.chosen && (e.chosen || e.ballot > old.ballot),
            };
            if better {
                merged.insert(e.slot, e);
            }
        }
        if promises.add(rank) {
            self.become_leader(env, ballot);
        }
    }

    fn on_nack(&mut self, env: &mut PaxosEnv<'_, V, S>, ballot: Ballot, promised: Ballot) {
        self.max_round_seen = self.max_round_seen.max(promised.round);
        let mine = match &self.role {
            Role::Candidate { ballot, .. } | Role::Leader { ballot, .. } => *ballot,
            Role::Follower => return,
        };
        if mine == ballot && promised > ballot {
            self.step_down_if_leading();
            self.role = Role::Follower;
            self.leader = None;
            self.reset_timeout(env);
        }
    }

    /// Phase 1 succeeded: adopt every recovered slot at our ballot.
    fn become_leader(&mut self, env: &mut PaxosEnv<'_, V, S>, ballot: Ballot) {
        let Role::Candidate { merged, since_tick, promises, .. } = std::mem::replace(&mut self.role, Role::Follower)
        else {
            unreachable!("only candidates become leaders")
        };
        // A candidate that timed out may be asking for pre-votes when its
        // phase 1's late promises make it leader: it needs them no more.
        self.pre_vote = None;
        // Phase 1 measured a round trip to a majority; round 1 skips it.
        let round_trip_ticks = (promises.needed() > 1).then(|| self.ticks - since_tick);
        let recover_upto = merged.keys().next_back().copied().unwrap_or(0).max(self.commit_upto);
        self.role = Role::Leader {
            ballot,
            next_slot: recover_upto + 1,
            acks: Acks::default(),
            ready: false,
            recover_upto,
            heard_tick: self.ticks,
            round_trip_ticks,
        };
        // What learners have is not known: they fetch the chosen prefix, and
        // the pushes go on from here.
        self.pushed_upto = self.commit_upto;
        self.leader = Some(self.me);
        env.count("paxos_leader_changes", 1);
        for slot in self.commit_upto + 1..=recover_upto {
            match merged.get(&slot) {
                Some(e) if e.chosen => self.learn_chosen(env, slot, e.value.clone()),
                other => {
                    let value = other.and_then(|e| e.value.clone());
                    if let Role::Leader { acks, .. } = &mut self.role {
                        acks.insert(slot, (Quorum::majority(self.members.len()), self.ticks));
                    }
                    self.accept_own(env, ballot, slot, value);
                }
            }
        }
        self.advance_commit();
        self.check_ready();
    }

    fn check_ready(&mut self) {
        if let Role::Leader { ballot, ready, recover_upto, .. } = &mut self.role {
            if !*ready && self.commit_upto >= *recover_upto {
                *ready = true;
                self.events.push(PaxosEvent::LeaderReady { ballot: *ballot });
            }
        }
    }

    // ---- phase 2 ----

    fn on_accept(
        &mut self,
        env: &mut PaxosEnv<'_, V, S>,
        rank: usize,
        ballot: Ballot,
        slot: u64,
        value: Option<Arc<V>>,
        commit_upto: u64,
    ) {
        self.max_round_seen = self.max_round_seen.max(ballot.round);
        if ballot < self.promised {
            let promised = self.promised;
            self.send(env, self.members[rank], PaxosBody::Nack { ballot, promised });
            return;
        }
        self.follow(rank, ballot);
        let to = self.members[rank];
        if slot < self.log.base || self.log.get(&slot).is_some_and(|s| s.chosen) {
            // Already chosen here: the leader proposes the same value.
            self.send(env, to, PaxosBody::Accepted { ballot, slot });
        } else if self.log.insert(slot, Slot { ballot, value: value.clone(), chosen: false }) {
            self.persist(env, PaxosRecordBody::Accepted { slot, ballot, value });
            self.after_durable(env, Deferred::Send(to, PaxosBody::Accepted { ballot, slot }));
        }
        self.learn_commit(env, ballot, commit_upto);
    }

    fn on_accepted(&mut self, env: &mut PaxosEnv<'_, V, S>, rank: usize, ballot: Ballot, slot: u64) {
        let Role::Leader { ballot: mine, acks, heard_tick, round_trip_ticks, .. } = &mut self.role else {
            return;
        };
        if *mine != ballot {
            return;
        }
        let Some((q, sent)) = acks.get_mut(slot) else {
            return;
        };
        if q.add(rank) {
            let took = self.ticks - *sent;
            acks.remove(slot);
            *heard_tick = self.ticks;
            *round_trip_ticks = Some(round_trip_ticks.map_or(took, |r| r.max(took)));
            if let Some(s) = self.log.get_mut(&slot) {
                s.chosen = true;
            }
            self.advance_commit();
            self.check_ready();
            let _ = env;
        }
    }

    fn on_commit(&mut self, env: &mut PaxosEnv<'_, V, S>, rank: usize, ballot: Ballot, commit_upto: u64) {
        self.max_round_seen = self.max_round_seen.max(ballot.round);
        if ballot < self.promised {
            let promised = self.promised;
            self.send(env, self.members[rank], PaxosBody::Nack { ballot, promised });
            return;
        }
        self.follow(rank, ballot);
        self.learn_commit(env, ballot, commit_upto);
    }

    /// Hearing a leader at `ballot >= promised`: follow it.
    fn follow(&mut self, rank: usize, ballot: Ballot) {
        if ballot > self.promised {
            // An Accept at a higher ballot implies the promise; its Accepted
            // record makes that durable.
            self.promised = ballot;
        }
        if rank != self.me {
            self.step_down_if_leading();
            if !matches!(self.role, Role::Follower) {
                self.role = Role::Follower;
            }
        }
        self.leader = Some(rank);
        self.ticks_since_heard = 0;
        self.pre_vote = None;
        if rank != self.me {
            self.leader_heard = Some((rank, self.ticks));
            self.wait_for_candidate = true;
        }
    }

    /// The leader of `ballot` says slots up to `upto` are chosen.
    fn learn_commit(&mut self, env: &mut PaxosEnv<'_, V, S>, ballot: Ballot, upto: u64) {
        self.leader_commit = self.leader_commit.max(upto);
        let mut slot = self.commit_upto + 1;
        while slot <= upto {
            match self.log.get_mut(&slot) {
                Some(s) if s.chosen => {}
                Some(s) if s.ballot == ballot => s.chosen = true,
                _ => break,
            }
            slot += 1;
        }
        self.advance_commit();
        if self.commit_upto < upto {
            self.request_missing(env);
        }
    }

    fn request_missing(&mut self, env: &mut PaxosEnv<'_, V, S>) {
        let (Some(leader), 0) = (self.leader, self.fetch_pending_ticks) else {
            return;
        };
        if leader == self.me {
            return;
        }
        let from_slot = self.commit_upto + 1;
        let to_slot = self.leader_commit.min(from_slot + self.cfg.batch_max as u64 - 1);
        self.fetch_pending_ticks = 2;
        self.send(env, self.members[leader], PaxosBody::Fetch { from_slot, to_slot });
    }

    fn on_fetch(&mut self, env: &mut PaxosEnv<'_, V, S>, from: NodeId, from_slot: u64, to_slot: u64) {
        if let Some((upto, state)) = self.snapshot.clone().filter(|(upto, _)| from_slot <= *upto) {
            // Compacted here: the asker gets the state, then fetches on.
            self.send(env, from, PaxosBody::Snapshot { upto, state });
            return;
        }
        let to_slot = to_slot.min(self.commit_upto).min(from_slot.saturating_add(self.cfg.batch_max as u64 - 1));
        if from_slot == 0 || from_slot > to_slot {
            return;
        }
        let entries: Vec<(u64, Option<Arc<V>>)> = self
            .log
            .range(from_slot, to_slot)
            .filter(|(_, s)| s.chosen)
            .map(|(slot, s)| (slot, s.value.clone()))
            .collect();
        if !entries.is_empty() {
            self.send(env, from, PaxosBody::Chosen { entries });
        }
    }

    fn on_chosen(&mut self, env: &mut PaxosEnv<'_, V, S>, entries: Vec<(u64, Option<Arc<V>>)>) {
        let entries: Vec<_> = entries.into_iter().filter(|(slot, _)| self.log.in_window(*slot)).collect();
        for (slot, value) in entries {
            if !self.log.get(&slot).is_some_and(|s| s.chosen) {
                self.learn_chosen(env, slot, value);
            }
        }
        self.fetch_pending_ticks = 0;
        self.advance_commit();
        self.check_ready();
    }

    /// Records a value known to be chosen, durably.
    fn learn_chosen(&mut self, env: &mut PaxosEnv<'_, V, S>, slot: u64, value: Option<Arc<V>>) {
        let ballot = self.log.get(&slot).map(|s| s.ballot).unwrap_or_default();
        self.log.insert(slot, Slot { ballot, value: value.clone(), chosen: true });
        self.persist(env, PaxosRecordBody::Chosen { slot, value });
    }

    /// Moves the commit point over contiguous chosen slots and delivers them.
    fn advance_commit(&mut self) {
        while self.log.get(&(self.commit_upto + 1)).is_some_and(|s| s.chosen) {
            self.commit_upto += 1;
        }
        while self.delivered_upto < self.commit_upto {
            self.delivered_upto += 1;
            let slot = self.delivered_upto;
            if let Some(value) = self.log.get(&slot).and_then(|s| s.value.clone()) {
                self.events.push(PaxosEvent::Committed { slot, value });
            }
        }
    }

    /// Re-sends proposals unacknowledged for `RETRANSMIT_TICKS` ticks (lost
    /// messages, restarted followers), at most `batch_max` slots a tick.
    fn retransmit(&mut self, env: &mut PaxosEnv<'_, V, S>) {
        let now = self.ticks;
        let Role::Leader { ballot, acks, .. } = &mut self.role else {
            return;
        };
        let ballot = *ballot;
        let mut pending = Vec::new();
        for (slot, (q, sent)) in acks.iter_mut() {
            if pending.len() >= self.cfg.batch_max {
                break;
            }
            if now >= *sent + RETRANSMIT_TICKS {
                *sent = now;
                pending.push((slot, *q));
            }
        }
        for (slot, q) in pending {
            let Some(s) = self.log.get(&slot) else {
                continue;
            };
            let body = PaxosBody::Accept { ballot, slot, value: s.value.clone(), commit_upto: self.commit_upto };
            for (rank, to) in self.members.clone().into_iter().enumerate() {
                if rank != self.me && !q.has(rank) {
                    self.send(env, to, body.clone());
                }
            }
        }
    }

    // ---- checkpoints ----

    /// Whether the host, whose state holds `state_entries` entries, should
    /// checkpoint now: every `compact_every` delivered slots, but never
    /// more often than once per `state_entries` slots, so that a
    /// checkpoint's cost (in proportion to the state) is spread over as
    /// many slots and the cost per slot stays flat as the state grows.
    pub fn should_compact(&self, state_entries: usize) -> bool {
        let last = self.snapshot.as_ref().map_or(0, |(upto, _)| *upto);
        let every = crate::cow_map::checkpoint_interval(self.cfg.compact_every, state_entries, 1);
        self.cfg.compact_every > 0 && self.delivered_upto >= last + every
    }

    /// The host's state after slot `upto` (which it has applied): every slot
    /// up to it is dropped from memory and, durably, the node's log is
    /// replaced by one checkpoint record. The node's durable log must hold
    /// only this group's records.
    pub fn compact(&mut self, env: &mut PaxosEnv<'_, V, S>, upto: u64, state: S) {
        assert!(upto <= self.delivered_upto, "checkpoint of slot {upto} beyond the applied {}", self.delivered_upto);
        if self.snapshot.as_ref().is_some_and(|(u, _)| *u >= upto) {
            return;
        }
        self.adopt_snapshot(upto, Arc::new(state));
        self.persist_checkpoint(env);
        env.count("paxos_checkpoints", 1);
    }

    /// Adopts a peer's state if it is ahead of ours.
    fn install_snapshot(&mut self, env: &mut PaxosEnv<'_, V, S>, upto: u64, state: Arc<S>) {
        if upto <= self.commit_upto || upto >= self.commit_upto + LOG_WINDOW {
            return;
        }
        self.adopt_snapshot(upto, state.clone());
        if let Role::Leader { acks, .. } = &mut self.role {
            // Chosen by now: nothing more to wait for (or re-send).
            while acks.base <= upto && !acks.is_empty() {
                let base = acks.base;
                acks.remove(base);
            }
        }
        self.events.push(PaxosEvent::Restore { upto, state });
        self.persist_checkpoint(env);
        self.advance_commit();
        env.count("paxos_snapshots_installed", 1);
    }

    /// Everything up to `upto` is the state `state`; later slots stay.
    fn adopt_snapshot(&mut self, upto: u64, state: Arc<S>) {
        self.log.truncate_before(upto + 1);
        self.commit_upto = self.commit_upto.max(upto);
        if self.delivered_upto < upto {
            // Restarts replay from the checkpoint; peers' snapshots are
            // announced by install_snapshot.
            self.delivered_upto = upto;
        }
        self.snapshot = Some((upto, state));
    }

    fn persist_checkpoint(&mut self, env: &mut PaxosEnv<'_, V, S>) {
        let (upto, state) = self.snapshot.clone().expect("a checkpoint to persist");
        let entries = self.entries_from(upto + 1);
        let body =
            PaxosRecordBody::Checkpoint(Box::new(PaxosCheckpoint { promised: self.promised, upto, state, entries }));
        env.compact_stream(self.stream, self.durable.last_appended(), PaxosRecord { group: self.group, body });
    }

    // ---- helpers ----

    fn entries_from(&self, from_slot: u64) -> Vec<PromisedEntry<V>> {
        self.log
            .range(from_slot, u64::MAX)
            .map(|(slot, s)| PromisedEntry { slot, ballot: s.ballot, value: s.value.clone(), chosen: s.chosen })
            .collect()
    }

    /// A leader with a slot waiting whose last sign of a majority hearing
    /// it is [`STEP_DOWN_ELECTIONS`] election timeouts old. An idle leader
    /// counts as heard (nothing is stuck; its next proposal starts the
    /// clock).
    fn unheard_leader(&mut self) -> bool {
        let now = self.ticks;
        let Role::Leader { acks, heard_tick, round_trip_ticks, .. } = &mut self.role else {
            return false;
        };
        if acks.is_empty() || self.members.len() == 1 {
            // A member alone chooses on its own vote: no one to hear.
            *heard_tick = now;
            return false;
        }
        // An election timeout may be shorter than a wide-area round trip
        // (followers time out on the gaps between heartbeats, not on round
        // trips): the wait is also several of the round trips this leader
        // measured, and with none measured yet it does not step down.
        let Some(round_trip) = *round_trip_ticks else {
            return false;
        };
        let wait_ticks = (STEP_DOWN_ELECTIONS * u64::from(self.cfg.election_ticks))
            .max(2 * RETRANSMIT_TICKS + 1)
            .max(STEP_DOWN_ROUND_TRIPS * round_trip);
        now >= *heard_tick + wait_ticks
    }

    /// Whether this member heard a leader other than candidate `rank`
    /// within half an election timeout (a leader: was idle or had a slot
    /// chosen that recently), so that a candidate is not needed. A follower
    /// of a crashed leader has heard nothing for a whole timeout by the
    /// time any candidate runs. A candidate's `Prepare` is no sign of a
    /// leader: a member that others do not hear must not hold their
    /// promises against one that can win.
    fn leader_is_live(&self, rank: usize) -> bool {
        let lease_ticks = u64::from(self.cfg.election_ticks / 2).max(1);
        match &self.role {
            Role::Leader { heard_tick, .. } => self.ticks < heard_tick + lease_ticks,
            Role::Follower => {
                self.leader_heard.is_some_and(|(leader, at)| leader != rank && self.ticks < at + lease_ticks)
            }
            Role::Candidate { .. } => false,
        }
    }

    fn step_down_if_leading(&mut self) {
        if matches!(self.role, Role::Leader { .. }) {
            self.role = Role::Follower;
            self.events.push(PaxosEvent::Deposed);
        }
    }

    fn reset_timeout(&mut self, env: &mut PaxosEnv<'_, V, S>) {
        let n = self.members.len();
        let distance = (self.me + n - self.preferred) % n;
        let jitter = env.rng().below(u64::from(self.cfg.jitter_ticks) + 1) as u32;
        self.timeout_ticks = self.cfg.election_ticks + distance as u32 * self.cfg.stagger_ticks + jitter;
        self.ticks_since_heard = 0;
    }

    fn persist(&mut self, env: &mut PaxosEnv<'_, V, S>, body: PaxosRecordBody<V, S>) -> Lsn {
        let lsn = env.append_to(self.stream, PaxosRecord { group: self.group, body });
        self.durable.appended(lsn);
        lsn
    }

    /// Runs `deferred` once everything appended so far is durable: at once if
    /// it already is.
    fn after_durable(&mut self, env: &mut PaxosEnv<'_, V, S>, deferred: Deferred<V, S>) {
        if let Some(now) = self.durable.after_last(deferred) {
            self.run_deferred(env, now);
        }
    }

    fn run_deferred(&mut self, env: &mut PaxosEnv<'_, V, S>, deferred: Deferred<V, S>) {
        match deferred {
            Deferred::Send(to, body) => self.send(env, to, body),
            Deferred::SelfPromise(b) => self.on_promise(env, self.me, b, Vec::new(), None),
            Deferred::SelfAccept(b, slot) => self.on_accepted(env, self.me, b, slot),
        }
    }

    fn send(&self, env: &mut PaxosEnv<'_, V, S>, to: NodeId, body: PaxosBody<V, S>) {
        env.send(to, PaxosMsg { group: self.group, body });
    }

    fn send_others(&self, env: &mut PaxosEnv<'_, V, S>, body: &PaxosBody<V, S>) {
        for (rank, to) in self.members.iter().enumerate() {
            if rank != self.me {
                env.send(*to, PaxosMsg { group: self.group, body: body.clone() });
            }
        }
    }
}

/// Handler-level tests of one member of a three-member group, driven by
/// hand through core's `Recorder`: one event in, the exact effects out
/// (records appended, messages sent, timers set, counters) and the events
/// the host learns.
#[cfg(test)]
mod handler_tests {
    use super::*;
    use meridian_core::{
        ClusterSpec, Effect, Effects, NextIds, Now, Recorder, Rng, ShardId, Stream, TimerId, Topology,
    };

    type V = u64;
    type Fx = Effects<PaxosMsg<V>, PaxosRecord<V>, PaxosTimer>;
    type Fxs = Vec<Effect<PaxosMsg<V>, PaxosRecord<V>, PaxosTimer>>;

    const TICK_NS: u64 = 10_000_000;

    fn config() -> PaxosConfig {
        PaxosConfig {
            tick_ns: TICK_NS,
            election_ticks: 3,
            stagger_ticks: 2,
            jitter_ticks: 1,
            batch_max: 16,
            compact_every: 0,
        }
    }

    /// One shard of three replicas: the group's members.
    fn topology() -> Arc<Topology> {
        let spec = ClusterSpec::one_region(1, 3);
        Arc::new(Topology::build(&spec, &[]))
    }

    /// One member driven by hand.
    struct Member {
        paxos: MultiPaxos<V>,
        topology: Arc<Topology>,
        me: NodeId,
        rng: Rng,
        ids: NextIds,
    }

    impl Member {
        /// Member `rank` of the group, started fresh (rank 0 is preferred).
        fn start(topology: &Arc<Topology>, rank: usize) -> (Member, Fx) {
            let members = topology.replicas(ShardId(0)).to_vec();
            let me = members[rank];
            Member::of(topology, me, MultiPaxos::new(0, members, me, 0, config()))
        }

        /// Node `me` running `paxos` (a member or a learner), started fresh.
        fn of(topology: &Arc<Topology>, me: NodeId, paxos: MultiPaxos<V>) -> (Member, Fx) {
            let rng = Rng::new(u64::from(me.0) + 1);
            let mut m = Member { paxos, topology: topology.clone(), me, rng, ids: NextIds::default() };
            let fx = m.step(|p, env| p.start(env, Vec::new()));
            (m, fx)
        }

        /// Runs one handler; the invariants must hold after it.
        fn step(&mut self, f: impl FnOnce(&mut MultiPaxos<V>, &mut PaxosEnv<'_, V>)) -> Fx {
            let mut fx = Fx::new();
            let mut rec = Recorder::new(self.me, &self.topology, Now::at(0), &mut self.rng, &mut self.ids, &mut fx);
            f(&mut self.paxos, &mut rec);
            self.paxos.check_invariants();
            fx
        }

        fn message(&mut self, from: NodeId, body: PaxosBody<V>) -> Fx {
            let group = self.paxos.group();
            self.step(|p, env| p.on_message(env, from, PaxosMsg { group, body }))
        }

        fn tick(&mut self) -> Fx {
            let group = self.paxos.group();
            self.step(|p, env| p.on_timer(env, PaxosTimer { group }))
        }

        /// Everything appended so far is durable.
        fn persist_all(&mut self) -> Fx {
            let upto = Lsn(self.ids.lsn - 1);
            self.step(|p, env| p.on_persisted(env, upto))
        }

        /// The LSN the next append gets.
        fn next_lsn(&self) -> Lsn {
            Lsn(self.ids.lsn)
        }

        /// The id the next timer gets.
        fn next_timer(&self) -> TimerId {
            TimerId(self.ids.timer)
        }
    }

    fn send(to: NodeId, body: PaxosBody<V>) -> Effect<PaxosMsg<V>, PaxosRecord<V>, PaxosTimer> {
        Effect::Send { to, msg: PaxosMsg { group: 0, body } }
    }

    fn append(lsn: Lsn, body: PaxosRecordBody<V>) -> Effect<PaxosMsg<V>, PaxosRecord<V>, PaxosTimer> {
        Effect::Append { stream: Stream::MAIN, lsn, record: PaxosRecord { group: 0, body } }
    }

    fn tick_set(id: TimerId) -> Effect<PaxosMsg<V>, PaxosRecord<V>, PaxosTimer> {
        Effect::SetTimer { id, after_ns: TICK_NS, timer: PaxosTimer { group: 0 } }
    }

    fn count(counter: &'static str) -> Effect<PaxosMsg<V>, PaxosRecord<V>, PaxosTimer> {
        Effect::Count { counter, delta: 1 }
    }

    const FIRST: Ballot = Ballot { round: 1, rank: 0 };

    /// The preferred member of a fresh group, leading at (1, 0).
    fn leader(topo: &Arc<Topology>) -> Member {
        let (mut m, _) = Member::start(topo, 0);
        m.persist_all();
        assert_eq!(m.paxos.drain_events(), [PaxosEvent::LeaderReady { ballot: FIRST }]);
        m
    }

    fn follower(topo: &Arc<Topology>, rank: usize) -> Member {
        let (mut m, _) = Member::start(topo, rank);
        assert!(m.paxos.drain_events().is_empty());
        m
    }

    #[test]
    fn a_leaders_votes_join_in_slot_order_leave_in_any_and_hold_no_gap_at_either_end() {
        let mut acks = Acks::default();
        let votes = |tick| (Quorum::majority(3), tick);
        for slot in [5, 6, 7, 9] {
            acks.insert(slot, votes(slot));
        }
        assert_eq!(acks.last_slot(), Some(9));
        assert!(acks.get_mut(8).is_none() && acks.get_mut(4).is_none() && acks.get_mut(10).is_none());
        acks.remove(6);
        assert_eq!(acks.iter_mut().map(|(slot, _)| slot).collect::<Vec<_>>(), [5, 7, 9]);
        acks.remove(5);
        assert_eq!((acks.base, acks.slots.len()), (7, 3), "the gaps at the front went with slot 5");
        acks.remove(9);
        assert_eq!(acks.last_slot(), Some(7), "the gap at the end went with slot 9");
        acks.remove(9);
        acks.remove(3);
        assert_eq!(acks.get_mut(7).map(|v| v.1), Some(7), "removing what is not held changes nothing");
        acks.remove(7);
        assert_eq!(acks.last_slot(), None);
        acks.insert(100, votes(1));
        assert_eq!((acks.base, acks.last_slot()), (100, Some(100)), "an empty window starts at its next slot");
    }

    #[test]
    fn the_log_holds_each_slot_where_it_was_stored_in_order_with_gaps_or_rewritten() {
        let slot = |round| Slot { ballot: Ballot { round, rank: 0 }, value: Some(Arc::new(round)), chosen: false };
        let round_at = |log: &SlotLog<u64>, s: u64| log.get(&s).map(|x| x.ballot.round);
        let mut log = SlotLog::new();
        assert!(log.insert(1, slot(1)) && log.insert(2, slot(2)), "slots in order");
        assert!(log.insert(5, slot(5)), "past a gap");
        assert!(log.insert(3, slot(3)), "into the gap");
        assert!(log.insert(2, slot(20)), "rewritten");
        let held: Vec<_> = (0..7).map(|s| round_at(&log, s)).collect();
        assert_eq!(held, [None, Some(1), Some(20), Some(3), None, Some(5), None]);
        log.truncate_before(3);
        assert!(!log.insert(2, slot(2)), "below the window");
        assert!(!log.insert(3 + LOG_WINDOW, slot(9)), "past the window");
        assert!(log.insert(6, slot(6)));
        assert_eq!(log.range(0, 10).map(|(s, x)| (s, x.ballot.round)).collect::<Vec<_>>(), [(3, 3), (5, 5), (6, 6)]);
    }

    #[test]
    #[should_panic(expected = "proposed out of order")]
    fn a_leader_never_holds_votes_for_a_slot_below_one_it_proposed_later() {
        let mut acks = Acks::default();
        acks.insert(5, (Quorum::majority(3), 0));
        acks.insert(4, (Quorum::majority(3), 0));
    }

    #[test]
    fn the_preferred_member_of_a_fresh_group_leads_once_its_promise_is_durable() {
        let topo = topology();
        let (mut m, fx) = Member::start(&topo, 0);
        assert_eq!(fx.all(), [tick_set(TimerId(1)), append(Lsn(1), PaxosRecordBody::Promised(FIRST))]);
        assert!(!m.paxos.is_leader(), "not before its promise is durable");
        assert_eq!(m.persist_all().all(), [count("paxos_leader_changes")], "no phase 1: round 1 is its alone");
        assert_eq!(m.paxos.drain_events(), [PaxosEvent::LeaderReady { ballot: FIRST }]);
        assert!(m.paxos.is_leader());
    }

    #[test]
    fn a_proposal_is_accepted_durably_everywhere_and_chosen_at_a_majority() {
        let topo = topology();
        let members = topo.replicas(ShardId(0)).to_vec();
        let mut l = leader(&topo);
        let mut f = follower(&topo, 1);
        // Leader: its own vote goes to disk while the Accepts go out.
        let lsn = l.next_lsn();
        let fx = l.step(|p, env| assert_eq!(p.propose(env, 7), Ok(1)));
        let accept = PaxosBody::Accept { ballot: FIRST, slot: 1, value: Some(Arc::new(7)), commit_upto: 0 };
        let expected: Fxs = vec![
            append(lsn, PaxosRecordBody::Accepted { slot: 1, ballot: FIRST, value: Some(Arc::new(7)) }),
            send(members[1], accept.clone()),
            send(members[2], accept.clone()),
        ];
        assert_eq!(fx.all(), expected);
        // Follower: Accepted only once the accept is durable.
        let flsn = f.next_lsn();
        let fx = f.message(members[0], accept);
        assert_eq!(
            fx.all(),
            [append(flsn, PaxosRecordBody::Accepted { slot: 1, ballot: FIRST, value: Some(Arc::new(7)) })]
        );
        let accepted = PaxosBody::Accepted { ballot: FIRST, slot: 1 };
        assert_eq!(f.persist_all().all(), [send(members[0], accepted.clone())]);
        // Leader: one follower's vote is not a majority without its own.
        assert!(l.message(members[1], accepted).is_empty());
        assert!(l.paxos.drain_events().is_empty(), "not chosen: the leader's own vote is not durable");
        assert!(l.persist_all().is_empty());
        assert_eq!(l.paxos.drain_events(), [PaxosEvent::Committed { slot: 1, value: Arc::new(7) }]);
        assert_eq!(l.paxos.commit_upto(), 1);
    }

    #[test]
    fn a_follower_learns_a_choice_from_the_leaders_commit_point() {
        let topo = topology();
        let members = topo.replicas(ShardId(0)).to_vec();
        let mut l = leader(&topo);
        let mut f = follower(&topo, 1);
        l.step(|p, env| assert_eq!(p.propose(env, 7), Ok(1)));
        let accept = PaxosBody::Accept { ballot: FIRST, slot: 1, value: Some(Arc::new(7)), commit_upto: 0 };
        f.message(members[0], accept);
        f.persist_all();
        l.persist_all();
        l.message(members[1], PaxosBody::Accepted { ballot: FIRST, slot: 1 });
        assert_eq!(l.paxos.commit_upto(), 1);
        // The leader's tick announces its commit point to every follower.
        let timer = l.next_timer();
        let commit = PaxosBody::Commit { ballot: FIRST, commit_upto: 1 };
        let expected: Fxs = vec![tick_set(timer), send(members[1], commit.clone()), send(members[2], commit.clone())];
        assert_eq!(l.tick().all(), expected);
        assert!(f.message(members[0], commit).is_empty(), "the follower holds the value at that ballot");
        assert_eq!(f.paxos.drain_events(), [PaxosEvent::Committed { slot: 1, value: Arc::new(7) }]);
    }

    #[test]
    fn a_silent_leader_is_replaced_after_a_pre_vote_through_phase_1_at_a_higher_round() {
        let topo = topology();
        let members = topo.replicas(ShardId(0)).to_vec();
        let mut c = follower(&topo, 1);
        let mut other = follower(&topo, 2);
        // Ticks without hearing the leader, until the timeout: it asks
        // whether the others would vote for it, and changes nothing yet.
        let (fx, timer) = loop {
            let timer = c.next_timer();
            let fx = c.tick();
            if fx.len() > 1 {
                break (fx, timer);
            }
            assert_eq!(fx.all(), [tick_set(timer)], "a quiet tick only re-arms");
        };
        let ballot = Ballot { round: 2, rank: 1 };
        let pre_vote = PaxosBody::PreVote { ballot };
        let expected: Fxs = vec![
            tick_set(timer),
            count("paxos_pre_votes"),
            send(members[0], pre_vote.clone()),
            send(members[2], pre_vote.clone()),
        ];
        assert_eq!(fx.all(), expected);
        // A member that has not heard the leader either grants it, and
        // changes nothing either.
        let granted = PaxosBody::PreVoteGranted { ballot, promised: Ballot::default() };
        assert_eq!(other.message(members[1], pre_vote).all(), [send(members[1], granted.clone())]);
        // Its own grant and one other make a majority: phase 1.
        let lsn = c.next_lsn();
        let prepare = PaxosBody::Prepare { ballot, from_slot: 1 };
        let expected: Fxs = vec![
            append(lsn, PaxosRecordBody::Promised(ballot)),
            count("paxos_elections"),
            send(members[0], prepare.clone()),
            send(members[2], prepare.clone()),
        ];
        assert_eq!(c.message(members[2], granted).all(), expected);
        // A member promises once its promise is durable.
        let olsn = other.next_lsn();
        assert_eq!(other.message(members[1], prepare).all(), [append(olsn, PaxosRecordBody::Promised(ballot))]);
        let promise = PaxosBody::Promise { ballot, entries: Vec::new(), snapshot: None };
        assert_eq!(other.persist_all().all(), [send(members[1], promise.clone())]);
        // The candidate's own promise and one other make a majority.
        assert!(c.persist_all().is_empty());
        assert_eq!(c.message(members[2], promise).all(), [count("paxos_leader_changes")]);
        assert_eq!(c.paxos.drain_events(), [PaxosEvent::LeaderReady { ballot }]);
        assert_eq!(c.paxos.leader_hint(), Some(members[1]));
    }

    #[test]
    fn a_higher_ballot_deposes_the_leader_and_its_proposals_are_refused() {
        let topo = topology();
        let members = topo.replicas(ShardId(0)).to_vec();
        let mut l = leader(&topo);
        let mut f = follower(&topo, 1);
        let higher = Ballot { round: 2, rank: 2 };
        // A follower that promised a higher ballot refuses the old leader's Accept...
        f.message(members[2], PaxosBody::Prepare { ballot: higher, from_slot: 1 });
        f.persist_all();
        let accept = PaxosBody::Accept { ballot: FIRST, slot: 1, value: Some(Arc::new(7)), commit_upto: 0 };
        let nack = PaxosBody::Nack { ballot: FIRST, promised: higher };
        assert_eq!(f.message(members[0], accept).all(), [send(members[0], nack.clone())]);
        // ...and the refusal deposes it.
        l.step(|p, env| assert_eq!(p.propose(env, 7), Ok(1)));
        assert!(l.message(members[1], nack).is_empty());
        assert_eq!(l.paxos.drain_events(), [PaxosEvent::Deposed]);
        assert!(!l.paxos.is_leader());
        let refused = l.step(|p, env| assert_eq!(p.propose(env, 8), Err(NotLeader { hint: None })));
        assert!(refused.is_empty(), "a refused proposal does nothing");
        // A Prepare at a higher ballot deposes a leader directly once it has
        // had no sign of a majority for half an election timeout (here a
        // proposal no follower acknowledged for a tick), and it promises
        // once the promise is durable.
        let mut l = leader(&topo);
        l.step(|p, env| assert_eq!(p.propose(env, 7), Ok(1)));
        l.tick();
        let lsn = l.next_lsn();
        let fx = l.message(members[2], PaxosBody::Prepare { ballot: higher, from_slot: 1 });
        assert_eq!(fx.all(), [append(lsn, PaxosRecordBody::Promised(higher))]);
        assert_eq!(l.paxos.drain_events(), [PaxosEvent::Deposed]);
        assert_eq!(l.paxos.leader_hint(), Some(members[2]));
        let entry = PromisedEntry { slot: 1, ballot: FIRST, value: Some(Arc::new(7)), chosen: false };
        let promise = PaxosBody::Promise { ballot: higher, entries: vec![entry], snapshot: None };
        assert_eq!(l.persist_all().all(), [send(members[2], promise)]);
    }

    /// Ticks `m` until it runs for election (asks for pre-votes); returns
    /// the ticks it took.
    fn ticks_to_candidacy(m: &mut Member) -> u32 {
        for ticks in 1..=50 {
            if m.tick().all().iter().any(|e| *e == count("paxos_pre_votes")) {
                return ticks;
            }
        }
        panic!("no candidacy in 50 ticks");
    }

    #[test]
    fn a_member_no_majority_would_vote_for_never_raises_its_ballot_and_follows_the_leader_again() {
        let topo = topology();
        let members = topo.replicas(ShardId(0)).to_vec();
        // Cut off from the group (the leader does not reach it): it times
        // out again and again, and asks; nobody answers.
        let mut f = follower(&topo, 1);
        f.message(members[0], PaxosBody::Commit { ballot: FIRST, commit_upto: 0 });
        let mut asked = 0;
        for _ in 0..10 * config().election_ticks {
            let fx = f.tick();
            assert!(fx.appends().next().is_none(), "no promise, no record: {fx:?}");
            asked += usize::from(fx.all().contains(&count("paxos_pre_votes")));
        }
        assert!(asked >= 2, "asked {asked} times");
        assert_eq!(f.paxos.ballot(), FIRST, "its ballot stays where the leader's is");
        // The cut heals: the leader's heartbeat is followed, not refused.
        let fx = f.message(members[0], PaxosBody::Commit { ballot: FIRST, commit_upto: 0 });
        assert!(fx.is_empty(), "no Nack deposes the leader: {fx:?}");
        assert_eq!(f.paxos.leader_hint(), Some(members[0]));
    }

    #[test]
    fn a_member_that_heard_its_leader_lately_grants_no_pre_vote() {
        let topo = topology();
        let members = topo.replicas(ShardId(0)).to_vec();
        let pre_vote = PaxosBody::PreVote { ballot: Ballot { round: 2, rank: 2 } };
        let mut f = follower(&topo, 1);
        f.message(members[0], PaxosBody::Commit { ballot: FIRST, commit_upto: 0 });
        assert!(f.message(members[2], pre_vote.clone()).is_empty(), "the leader is live");
        let mut l = leader(&topo);
        assert!(l.message(members[2], pre_vote.clone()).is_empty(), "the leader itself is live");
        // Half a timeout without the leader: it grants, naming its promise.
        for _ in 0..config().election_ticks / 2 {
            f.tick();
        }
        let granted = PaxosBody::PreVoteGranted { ballot: Ballot { round: 2, rank: 2 }, promised: FIRST };
        assert_eq!(f.message(members[2], pre_vote).all(), [send(members[2], granted)]);
    }

    #[test]
    fn a_candidates_phase_1_ballot_outbids_every_promise_its_grants_named() {
        let topo = topology();
        let members = topo.replicas(ShardId(0)).to_vec();
        let mut c = follower(&topo, 1);
        ticks_to_candidacy(&mut c);
        let asked = Ballot { round: 2, rank: 1 };
        let higher = Ballot { round: 5, rank: 2 };
        let fx = c.message(members[2], PaxosBody::PreVoteGranted { ballot: asked, promised: higher });
        let prepare = PaxosBody::Prepare { ballot: Ballot { round: 6, rank: 1 }, from_slot: 1 };
        assert!(fx.all().contains(&send(members[0], prepare)), "{fx:?}");
        // A grant for a ballot it no longer asks for counts for nothing.
        let mut d = follower(&topo, 1);
        ticks_to_candidacy(&mut d);
        let stale = PaxosBody::PreVoteGranted { ballot: Ballot { round: 9, rank: 1 }, promised: FIRST };
        assert!(d.message(members[2], stale).is_empty());
    }

    #[test]
    fn a_leader_with_a_proposal_no_majority_acknowledges_for_an_election_timeout_steps_down() {
        let topo = topology();
        let members = topo.replicas(ShardId(0)).to_vec();
        // Idle, a leader has nothing to prove and keeps leading.
        let mut l = leader(&topo);
        for _ in 0..10 * config().election_ticks {
            l.tick();
        }
        assert!(l.paxos.is_leader(), "an idle leader stays");
        // A proposal that a majority chooses within the timeout keeps it.
        l.step(|p, env| assert_eq!(p.propose(env, 7), Ok(1)));
        l.persist_all();
        for _ in 0..config().election_ticks - 1 {
            l.tick();
        }
        l.message(members[1], PaxosBody::Accepted { ballot: FIRST, slot: 1 });
        assert_eq!(l.paxos.drain_events(), [PaxosEvent::Committed { slot: 1, value: Arc::new(7) }]);
        for _ in 0..config().election_ticks - 1 {
            l.tick();
        }
        assert!(l.paxos.is_leader(), "chosen in time");
        // One that waits a whole election timeout with nothing chosen: the
        // followers may hear this leader, but it does not hear them. (This
        // group's timeout is short: the wait is two retransmissions.)
        l.step(|p, env| assert_eq!(p.propose(env, 8), Ok(2)));
        let wait_ticks = 2 * RETRANSMIT_TICKS + 1;
        assert!(wait_ticks > u64::from(config().election_ticks));
        for _ in 0..wait_ticks - 1 {
            assert!(!l.tick().all().contains(&count("paxos_leader_stepdowns")));
        }
        let timer = l.next_timer();
        assert_eq!(l.tick().all(), [tick_set(timer), count("paxos_leader_stepdowns")], "no heartbeat");
        assert_eq!(l.paxos.drain_events(), [PaxosEvent::Deposed]);
        assert!(!l.paxos.is_leader());
        assert_eq!(l.paxos.leader_hint(), None);
        // It runs for election after any other member would: its own
        // candidacy first would only restart their timeouts.
        let c = config();
        let longest_timeout = c.election_ticks + 2 * c.stagger_ticks + c.jitter_ticks;
        assert!(ticks_to_candidacy(&mut l) > longest_timeout);
    }

    #[test]
    fn a_sole_member_never_steps_down_however_long_its_own_vote_takes() {
        let (topo, nodes) = trio();
        let mut m = sole_member(&topo, &nodes);
        m.step(|p, env| assert_eq!(p.propose(env, 7), Ok(1)));
        for _ in 0..10 * config().election_ticks {
            assert!(!m.tick().all().contains(&count("paxos_leader_stepdowns")));
        }
        m.persist_all();
        assert_eq!(m.paxos.drain_events(), [PaxosEvent::Committed { slot: 1, value: Arc::new(7) }]);
        assert!(m.paxos.is_leader());
    }

    #[test]
    fn a_member_that_heard_its_leader_within_half_a_timeout_ignores_a_candidate() {
        let topo = topology();
        let members = topo.replicas(ShardId(0)).to_vec();
        let higher = Ballot { round: 2, rank: 2 };
        let prepare = PaxosBody::Prepare { ballot: higher, from_slot: 1 };
        // A follower that just heard the leader's heartbeat.
        let mut f = follower(&topo, 1);
        f.message(members[0], PaxosBody::Commit { ballot: FIRST, commit_upto: 0 });
        assert_eq!(f.message(members[2], prepare.clone()).all(), [count("paxos_prepares_ignored")]);
        assert_eq!(f.paxos.ballot(), FIRST, "no promise");
        // Half a timeout later the leader may be gone: it promises.
        for _ in 0..config().election_ticks / 2 {
            f.tick();
        }
        let lsn = f.next_lsn();
        assert_eq!(f.message(members[2], prepare.clone()).all(), [append(lsn, PaxosRecordBody::Promised(higher))]);
        // A leader idle, or with a slot just chosen, ignores it too.
        let mut l = leader(&topo);
        assert_eq!(l.message(members[2], prepare).all(), [count("paxos_prepares_ignored")]);
        assert!(l.paxos.is_leader());
    }

    #[test]
    fn only_the_first_candidate_since_a_leader_was_heard_restarts_a_members_timeout() {
        let topo = topology();
        let members = topo.replicas(ShardId(0)).to_vec();
        let prepare = |round| PaxosBody::Prepare { ballot: Ballot { round, rank: 0 }, from_slot: 1 };
        // Member 2 (rank 2: the longest timeout), on its own.
        let mut alone = follower(&topo, 2);
        let timeout = ticks_to_candidacy(&mut alone);
        // A candidate the others never hear from again: its first Prepare
        // gives it a whole timeout, its next ones do not.
        let mut f = follower(&topo, 2);
        f.message(members[0], prepare(2));
        f.persist_all();
        for _ in 0..timeout - 2 {
            f.tick();
        }
        f.message(members[0], prepare(3));
        f.persist_all();
        let ticks = ticks_to_candidacy(&mut f);
        assert!(ticks <= 2 + config().jitter_ticks, "ran {ticks} ticks after the second Prepare");
        // Hearing a leader gives the next candidate its whole timeout again.
        let mut g = follower(&topo, 2);
        g.message(members[0], prepare(2));
        g.message(members[0], PaxosBody::Commit { ballot: Ballot { round: 2, rank: 0 }, commit_upto: 0 });
        for _ in 0..config().election_ticks / 2 {
            g.tick();
        }
        g.message(members[1], PaxosBody::Prepare { ballot: Ballot { round: 3, rank: 1 }, from_slot: 1 });
        let ticks = ticks_to_candidacy(&mut g);
        assert!(ticks >= timeout - config().jitter_ticks, "waited only {ticks} ticks");
    }

    // ---- learners ("Paxos Made Simple" §2.3): a group of one member whose
    // log two other nodes learn ----

    const GROUP: u32 = 5;
    const STREAM: Stream = Stream(3);

    /// Three nodes: the group's only member, and its two learners.
    fn trio() -> (Arc<Topology>, Vec<NodeId>) {
        let topo = topology();
        let nodes = topo.replicas(ShardId(0)).to_vec();
        (topo, nodes)
    }

    /// The member, leading (a group of one chooses on its own durable vote).
    fn sole_member(topo: &Arc<Topology>, nodes: &[NodeId]) -> Member {
        let paxos = MultiPaxos::new(GROUP, vec![nodes[0]], nodes[0], 0, config())
            .with_learners(nodes[1..].to_vec())
            .on_stream(STREAM);
        let (mut m, _) = Member::of(topo, nodes[0], paxos);
        m.persist_all();
        assert_eq!(m.paxos.drain_events(), [PaxosEvent::LeaderReady { ballot: FIRST }]);
        m
    }

    fn learner(topo: &Arc<Topology>, nodes: &[NodeId], i: usize) -> Member {
        Member::of(topo, nodes[i], MultiPaxos::learner(GROUP, vec![nodes[0]], nodes[i], 0, config())).0
    }

    fn sent(fx: &Fx) -> Vec<(NodeId, PaxosBody<V>)> {
        fx.sends().map(|(to, m)| (to, m.body.clone())).collect()
    }

    #[test]
    fn a_sole_member_chooses_on_its_own_durable_vote_and_pushes_the_choice_to_its_learners_at_its_tick() {
        let (topo, nodes) = trio();
        let mut m = sole_member(&topo, &nodes);
        let fx = m.step(|p, env| assert_eq!(p.propose(env, 7), Ok(1)));
        assert!(sent(&fx).is_empty(), "nothing leaves before the tick: no vote is awaited from anyone");
        assert!(fx.all().iter().all(|e| matches!(e, Effect::Append { stream: STREAM, .. })), "on its own stream");
        m.persist_all();
        assert_eq!(m.paxos.drain_events(), [PaxosEvent::Committed { slot: 1, value: Arc::new(7) }]);
        let chosen = PaxosBody::Chosen { entries: vec![(1, Some(Arc::new(7)))] };
        let commit = PaxosBody::Commit { ballot: FIRST, commit_upto: 1 };
        let expected = vec![
            (nodes[1], chosen.clone()),
            (nodes[1], commit.clone()),
            (nodes[2], chosen.clone()),
            (nodes[2], commit.clone()),
        ];
        assert_eq!(sent(&m.tick()), expected);
        assert_eq!(sent(&m.tick()), vec![(nodes[1], commit.clone()), (nodes[2], commit)], "pushed once");
        // The learner applies what it is pushed, durably, and says nothing.
        let mut l = learner(&topo, &nodes, 1);
        let fx = l.message(nodes[0], chosen);
        assert!(sent(&fx).is_empty());
        assert!(matches!(fx.all(), [Effect::Append { .. }]), "the choice is made durable");
        assert_eq!(l.paxos.drain_events(), [PaxosEvent::Committed { slot: 1, value: Arc::new(7) }]);
    }

    #[test]
    fn a_learner_that_missed_a_push_fetches_it_from_the_leader() {
        let (topo, nodes) = trio();
        let mut m = sole_member(&topo, &nodes);
        for v in [7, 8] {
            m.step(|p, env| {
                p.propose(env, v).expect("leading");
            });
        }
        m.persist_all();
        m.paxos.drain_events();
        let mut l = learner(&topo, &nodes, 2);
        // The push was lost; the commit point shows the gap.
        let fx = l.message(nodes[0], PaxosBody::Commit { ballot: FIRST, commit_upto: 2 });
        let fetch = PaxosBody::Fetch { from_slot: 1, to_slot: 2 };
        assert_eq!(fx.all(), [Effect::Send { to: nodes[0], msg: PaxosMsg { group: GROUP, body: fetch.clone() } }]);
        let chosen = PaxosBody::Chosen { entries: vec![(1, Some(Arc::new(7))), (2, Some(Arc::new(8)))] };
        assert_eq!(
            m.message(nodes[2], fetch.clone()).all(),
            [Effect::Send { to: nodes[2], msg: PaxosMsg { group: GROUP, body: chosen.clone() } }]
        );
        l.message(nodes[0], chosen);
        assert_eq!(l.paxos.commit_upto(), 2);
        // Only learners and members are answered.
        assert!(m.message(NodeId(99), fetch).is_empty());
    }

    #[test]
    fn a_learner_never_votes_never_runs_and_ignores_a_deposed_leaders_commit_point() {
        let (topo, nodes) = trio();
        let mut l = learner(&topo, &nodes, 1);
        let higher = Ballot { round: 3, rank: 0 };
        l.message(nodes[0], PaxosBody::Commit { ballot: higher, commit_upto: 0 });
        for _ in 0..20 {
            let fx = l.tick();
            assert!(sent(&fx).is_empty(), "no election, however long the silence");
        }
        let accept = PaxosBody::Accept { ballot: higher, slot: 1, value: Some(Arc::new(7)), commit_upto: 0 };
        assert!(l.message(nodes[0], accept).is_empty(), "no vote");
        assert!(l.message(nodes[0], PaxosBody::Prepare { ballot: higher, from_slot: 1 }).is_empty(), "no promise");
        let stale = PaxosBody::Commit { ballot: FIRST, commit_upto: 9 };
        assert!(l.message(nodes[0], stale).is_empty(), "no fetch for a deposed ballot's commit point");
        assert!(!l.paxos.is_leader());
    }
}

#[cfg(test)]
mod record_tests {
    use super::*;

    /// The record shape before the checkpoint was boxed: a write-ahead log
    /// written by a server of that build reads back the same.
    #[derive(Serialize)]
    enum UnboxedRecordBody {
        #[allow(dead_code)]
        Promised(Ballot),
        #[allow(dead_code)]
        Accepted {
            slot: u64,
            ballot: Ballot,
            value: Option<Arc<u64>>,
        },
        #[allow(dead_code)]
        Chosen {
            slot: u64,
            value: Option<Arc<u64>>,
        },
        Checkpoint {
            promised: Ballot,
            upto: u64,
            state: Arc<u64>,
            entries: Vec<PromisedEntry<u64>>,
        },
    }

    #[test]
    fn a_boxed_checkpoint_record_encodes_as_the_struct_variant_it_replaced() {
        let promised = Ballot { round: 4, rank: 2 };
        let entries = vec![PromisedEntry { slot: 8, ballot: promised, value: Some(Arc::new(5)), chosen: true }];
        let unboxed =
            UnboxedRecordBody::Checkpoint { promised, upto: 7, state: Arc::new(99), entries: entries.clone() };
        let boxed: PaxosRecordBody<u64, u64> =
            PaxosRecordBody::Checkpoint(Box::new(PaxosCheckpoint { promised, upto: 7, state: Arc::new(99), entries }));
        let bytes = postcard::to_allocvec(&boxed).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&unboxed).unwrap());
        assert_eq!(postcard::from_bytes::<PaxosRecordBody<u64, u64>>(&bytes).unwrap(), boxed);
    }

    #[test]
    fn a_durable_record_takes_an_accepts_size_not_a_checkpoints() {
        let accepted = size_of::<u64>() + size_of::<Ballot>() + size_of::<Option<Arc<u64>>>();
        assert!(size_of::<PaxosRecordBody<u64, u64>>() <= accepted + 8, "an accept and its tag");
    }
}
