//! The shard replica of `2pl-paxos`: a Multi-Paxos member whose log holds
//! prepare, commit and abort commands, and, while it leads, the lock table
//! and the transactions executing under it.
//!
//! Every replica applies the log in order to the same state machine (the
//! store, the prepared transactions, the remembered outcomes: `log.rs`).
//! Only the leader locks: wound-wait over a priority-ordered wait queue,
//! where an older transaction wounds a younger holder that has not started
//! to prepare, and otherwise waits (so nobody ever waits for a younger
//! unprepared transaction and deadlock cannot form). A new leader re-takes
//! the locks of every prepared, undecided transaction from the log before it
//! serves, then resolves the ones left in doubt (recovery.rs).
//!
//! With `lock_at = "home"` (SLOG's 2PL-coord) the replica's own log is its
//! home partition's — the shard's keys homed in its region — in a group of
//! which it is the only member: it leads it from the start and again after
//! every restart, and is never replaced. It locks, reads and prepares those
//! keys alone, a prepare is durable with its own fsync, and the shard's
//! other replicas learn the log afterwards; it learns theirs in turn
//! (`copies.rs`).

use super::copies::Copies;
use super::log::{Applied, Log};
use super::messages::{
    Cmd, Execute, Executed, LockRead, Msg, Prepare, PrepareRecord, Priority, Record, Refusal, ReplicaState, Timer,
};
use super::participant::{LockAt, Participant};
use super::{Config, TwoPlPaxos};
use meridian_core::Process;
use meridian_core::process::{CHECKED_MAX, CopyState, Settled};
use meridian_core::{Ctx, Key, KeyList, Lsn, Mapped, NodeId, ShardId, TxnId, Value};
use meridian_mechanisms::locks::{Acquire, LockMode, LockTable};
use meridian_mechanisms::mvstore::MvStore;
use meridian_mechanisms::paxos::{MultiPaxos, PaxosEvent};
use meridian_mechanisms::recent::RecentSet;
use meridian_mechanisms::scheduler::digest;
use meridian_mechanisms::small_map::SmallMap;
use meridian_mechanisms::twopc::{Decision, TxnStatus};
use rustc_hash::FxHashMap;
use smallvec::{SmallVec, smallvec};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a transaction stands at this leader.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    /// Acquiring locks, `next` is the index of the next lock to take.
    Locking { next: usize },
    /// Holds every lock; the reads were sent.
    Executed,
    /// Its prepare record is in the log pipeline: no longer woundable.
    Preparing,
    /// Its prepare record is applied; waiting for the decision.
    Prepared,
}

/// A transaction's locks at one participant: most take one or two, held
/// inline (the list is copied as its locks are taken).
pub(super) type LockList = SmallVec<[(Key, LockMode); 2]>;

/// Transactions whose locks to take next (a release grants a few).
pub(super) type Work = SmallVec<[TxnId; 4]>;

#[derive(Clone, Debug)]
pub(super) struct Active {
    pub prio: Priority,
    pub coordinator: NodeId,
    /// The execute round in progress (a procedure reads in rounds).
    pub round: u32,
    /// The keys this round reads, once its locks are held.
    pub reads: KeyList,
    /// Every lock asked for, in the order taken; a key appears again when
    /// a later round upgrades it.
    pub locks: LockList,
    pub stage: Stage,
    /// Termination ticks in the current stage at this leader: a lock lease
    /// for unprepared transactions, in-doubt detection for prepared ones.
    pub age_ticks: u32,
    /// When the current round asked for its locks (this leader's clock).
    pub asked_ns: u64,
    /// The version of every key it read, when it read it.
    pub read_versions: SmallMap<Key, Option<u64>>,
}

pub struct Replica {
    pub(super) shard: ShardId,
    /// The participant this replica serves while it leads its log: its
    /// shard, or its home partition.
    pub(super) part: Participant,
    pub(super) cfg: Config,
    /// Its own log (the one it may lead) and the state applied from it.
    pub(super) log: Log,
    /// With `lock_at = "home"`: the logs of the shard's other home
    /// partitions, learned.
    copies: Copies,
    // Leader-only state, rebuilt on every LeaderReady.
    pub(super) leading: bool,
    pub(super) locks: LockTable<TxnId, Priority>,
    pub(super) active: FxHashMap<TxnId, Active>,
    /// Transactions this leader aborted or wounded before they prepared: a
    /// late duplicate of their execute request is ignored.
    pub(super) refused: RecentSet<TxnId>,
    /// Coordinators to acknowledge once a decision is applied (looked up,
    /// never iterated: a hash map's order cannot show).
    pub(super) awaiting_decision: FxHashMap<TxnId, NodeId>,
    /// In-doubt transactions: the answers gathered so far, by participant.
    pub(super) in_doubt: BTreeMap<TxnId, BTreeMap<Participant, TxnStatus>>,
    /// Queries to answer once an abort we proposed for them is applied.
    pub(super) pending_answers: BTreeMap<TxnId, Vec<NodeId>>,
    /// Coordinators' watermarks seen in decisions, not yet proposed.
    pub(super) watermarks: BTreeMap<NodeId, u64>,
}

impl Replica {
    /// A replica of `shard` whose own log is `paxos`'s; its participant is
    /// that log's group (the shard's number with `lock_at = "leader"`).
    pub fn new(shard: ShardId, paxos: MultiPaxos<Cmd, ReplicaState>, cfg: Config) -> Replica {
        Replica {
            shard,
            part: Participant(paxos.group()),
            log: Log::new(paxos, cfg.outcomes_kept),
            copies: Copies::none(),
            cfg,
            leading: false,
            locks: LockTable::new(),
            active: FxHashMap::default(),
            refused: RecentSet::new(cfg_refused_kept()),
            awaiting_decision: FxHashMap::default(),
            in_doubt: BTreeMap::new(),
            pending_answers: BTreeMap::new(),
            watermarks: BTreeMap::new(),
        }
    }

    /// With `lock_at = "home"`: learns the logs of the shard's other home
    /// partitions (`MultiPaxos::learner`s, each on a stream of its own).
    pub fn with_copies(mut self, copies: Vec<MultiPaxos<Cmd, ReplicaState>>) -> Replica {
        assert_eq!(self.cfg.lock_at, LockAt::Home, "only home partitions have copies");
        let kept = self.cfg.outcomes_kept;
        self.copies = Copies::of(copies.into_iter().map(|paxos| Log::new(paxos, kept)).collect());
        self
    }

    pub fn is_leading(&self) -> bool {
        self.leading
    }

    /// The participant this replica serves while it leads.
    pub fn participant(&self) -> Participant {
        self.part
    }

    /// The data of its own log.
    pub fn store(&self) -> &MvStore {
        self.log.store()
    }

    /// The data of `part`'s log, its own or a copy's (`lock_at = "home"`).
    pub fn store_of(&self, part: Participant) -> Option<&MvStore> {
        let own = (part == self.part).then(|| self.log.store());
        own.or_else(|| self.copies.logs().find(|l| l.group() == part.0).map(Log::store))
    }

    pub fn applied_slot(&self) -> u64 {
        self.log.applied_slot()
    }

    /// Decided transactions this replica remembers.
    pub fn outcomes_len(&self) -> usize {
        self.log.outcomes_len()
    }

    pub fn prepared_count(&self) -> usize {
        self.log.prepared_len()
    }

    fn refuse_not_leader(&self, ctx: &mut Ctx<'_, TwoPlPaxos>, to: NodeId, txn: TxnId) {
        let hint = self.log.paxos.leader_hint();
        ctx.send(to, Msg::Refused { txn, part: self.part, reason: Refusal::NotLeader { hint } });
    }

    // ---- execute: lock and read ----

    /// Locks a round's keys (wound-wait) and, once they are held, answers
    /// with what they read. Round 0 starts the transaction here; later
    /// rounds add to the locks it holds.
    fn on_execute(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, from: NodeId, m: Execute) {
        let Execute { txn, prio, round, keys } = m;
        if !self.leading {
            return self.refuse_not_leader(ctx, from, txn);
        }
        if self.refused.contains(&txn) || self.log.status(txn).is_some() {
            return; // late or duplicated: the coordinator has moved on
        }
        assert!(!keys.is_empty(), "an execute request names keys");
        let reads: KeyList = keys.iter().filter(|k| k.read).map(|k| k.key).collect();
        let wanted = lock_list(&keys);
        let Some(a) = self.active.get_mut(&txn) else {
            if round > 0 {
                // The locks of earlier rounds were taken by another leader
                // (or lost with this one's term): the attempt cannot go on.
                ctx.send(from, Msg::Refused { txn, part: self.part, reason: Refusal::Wounded });
                return;
            }
            let active = Active {
                prio,
                coordinator: from,
                round,
                reads,
                locks: wanted,
                stage: Stage::Locking { next: 0 },
                age_ticks: 0,
                asked_ns: ctx.clock_ns(),
                read_versions: SmallMap::new(),
            };
            self.active.insert(txn, active);
            return self.acquire(ctx, smallvec![txn]);
        };
        if round < a.round || (round == a.round && a.stage != Stage::Executed) {
            return; // a duplicate of a round answered or in progress
        }
        if round == a.round {
            return self.send_reads(ctx, txn); // its answer was lost
        }
        if a.stage != Stage::Executed || round != a.round + 1 {
            return; // out of order: the coordinator only asks after an answer
        }
        let next = a.locks.len();
        let held = a.locks.clone();
        a.locks.extend(
            wanted
                .into_iter()
                .filter(|(k, m)| !held.iter().any(|(hk, hm)| hk == k && (hm == m || *hm == LockMode::Exclusive))),
        );
        a.round = round;
        a.reads = reads;
        a.stage = Stage::Locking { next };
        a.asked_ns = ctx.clock_ns();
        self.acquire(ctx, smallvec![txn]);
    }

    /// Advances each listed transaction through its lock list, wounding
    /// younger holders and waiting behind older ones; transactions granted
    /// a lock by a release join the work list.
    pub(super) fn acquire(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, mut work: Work) {
        let mut rounds = 0usize;
        while let Some(txn) = work.pop() {
            rounds += 1;
            assert!(rounds < 1_000_000, "lock acquisition does not converge");
            let Some(a) = self.active.get(&txn) else {
                continue;
            };
            let Stage::Locking { mut next } = a.stage else {
                continue;
            };
            let (prio, locks) = (a.prio, a.locks.clone());
            let mut waiting = false;
            while next < locks.len() {
                let (key, mode) = locks[next];
                match self.locks.try_acquire(key, txn, mode) {
                    Acquire::Granted => next += 1,
                    Acquire::Blocked(blockers) => {
                        for b in blockers {
                            if self.woundable_by(b, prio) {
                                work.extend(self.wound(ctx, b));
                            }
                        }
                        if self.locks.try_acquire(key, txn, mode) == Acquire::Granted {
                            next += 1;
                            continue;
                        }
                        self.locks.enqueue(key, txn, mode, prio);
                        work.extend(self.locks.grant(key).into_iter().filter(|g| *g != txn));
                        waiting = !self.locks.holds(key, txn);
                        if !waiting {
                            next += 1;
                            continue;
                        }
                        break;
                    }
                }
            }
            if let Some(a) = self.active.get_mut(&txn) {
                a.stage = if waiting { Stage::Locking { next } } else { Stage::Executed };
                if !waiting {
                    // How long a round waited for its locks: an observation.
                    ctx.observe("lock_wait_us", ctx.clock_ns().saturating_sub(a.asked_ns) / 1_000);
                    self.send_reads(ctx, txn);
                }
            }
        }
    }

    /// Wound-wait: `b` is wounded by an older requester only while it holds
    /// locks without having started to prepare.
    fn woundable_by(&self, b: TxnId, prio: Priority) -> bool {
        self.active.get(&b).is_some_and(|a| a.prio > prio && matches!(a.stage, Stage::Locking { .. } | Stage::Executed))
    }

    /// Aborts `b` here: releases its locks and tells its coordinator.
    /// Returns the transactions its release granted locks to.
    fn wound(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, b: TxnId) -> Work {
        let a = self.active.remove(&b).expect("woundable transactions are active");
        self.refused.insert(b);
        ctx.count("wounds", 1);
        ctx.send(a.coordinator, Msg::Refused { txn: b, part: self.part, reason: Refusal::Wounded });
        self.release_locks(b, &a.locks)
    }

    pub(super) fn release_locks(&mut self, txn: TxnId, locks: &[(Key, LockMode)]) -> Work {
        let mut granted = Work::new();
        for (key, _) in locks {
            granted.extend(self.locks.release(*key, txn));
        }
        granted
    }

    /// Every lock of the round is held: read its keys and answer.
    fn send_reads(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId) {
        let a = self.active.get_mut(&txn).expect("reads are sent for active transactions");
        let store = self.log.store();
        // One store look-up a key for both its version and its value.
        let mut reads: Vec<(Key, Option<Value>)> = Vec::with_capacity(a.reads.len());
        for k in &a.reads {
            let newest = store.newest(*k);
            a.read_versions.get_or_insert_with(*k, || newest.map(|v| v.version));
            reads.push((*k, newest.map(|v| v.value.clone())));
        }
        ctx.send(a.coordinator, Msg::Executed(Executed { txn, part: self.part, round: a.round, reads }));
    }

    // ---- prepare ----

    fn on_prepare(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, from: NodeId, m: Prepare) {
        let Prepare { txn, participants, writes } = m;
        if !self.leading {
            return self.refuse_not_leader(ctx, from, txn);
        }
        let vote = |yes| Msg::Vote { txn, part: self.part, yes };
        if matches!(self.log.status(txn), Some(TxnStatus::Prepared | TxnStatus::Committed)) {
            return ctx.send(from, vote(true));
        }
        let Some(a) = self.active.get_mut(&txn) else {
            // Never executed under this leader (wounded, aborted, or locked
            // under a deposed one): its reads cannot be trusted.
            return ctx.send(from, vote(false));
        };
        match a.stage {
            Stage::Executed => {}
            Stage::Preparing | Stage::Prepared => return,
            Stage::Locking { .. } => return ctx.send(from, vote(false)),
        }
        // A procedure may write keys it found through its reads (an order
        // numbered by its district) and never locked: their exclusive locks
        // are taken now, at the lock point; one held by another transaction
        // means no.
        for (key, _) in &writes {
            if a.locks.iter().any(|(l, m)| l == key && *m == LockMode::Exclusive) {
                continue;
            }
            if self.locks.try_acquire(*key, txn, LockMode::Exclusive) != Acquire::Granted {
                return ctx.send(from, vote(false));
            }
            a.locks.push((*key, LockMode::Exclusive));
        }
        // Every locked key it does not write is one it read (a new leader
        // re-takes those locks too), and so is every written key it read —
        // an append, an increment: each goes with the version it read, so
        // that a record chosen only after this leader was deposed (its slot
        // adopted by a later leader's phase 1) is voided rather than
        // install values computed from reads another leader's transactions
        // have since overwritten (`Log::prepare_holds`).
        let mut read_keys: KeyList = a
            .locks
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| !writes.iter().any(|(w, _)| w == k) || a.read_versions.contains_key(k))
            .collect();
        read_keys.sort_unstable();
        read_keys.dedup();
        let store = self.log.store();
        let reads = read_keys
            .into_iter()
            .map(|k| (k, a.read_versions.get(&k).copied().unwrap_or_else(|| store.latest_version(k))))
            .collect();
        let record =
            PrepareRecord { txn, coordinator: from, participants, reads, writes: writes.into_iter().collect() };
        a.stage = Stage::Preparing;
        if self.log.paxos.propose(&mut Mapped::new(ctx), Cmd::Prepare(Arc::new(record))).is_err() {
            self.refuse_not_leader(ctx, from, txn);
        }
    }

    // ---- decide ----

    fn on_decide(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, from: NodeId, txn: TxnId, decision: Decision) {
        if !self.leading {
            return self.refuse_not_leader(ctx, from, txn);
        }
        if self.log.outcome(txn).is_some() {
            return ctx.send(from, Msg::Decided { txn, part: self.part });
        }
        let preparing = self.active.get(&txn).is_some_and(|a| a.stage == Stage::Preparing);
        if self.log.prepared_record(txn).is_some() || preparing {
            self.awaiting_decision.insert(txn, from);
            let cmd = match decision {
                Decision::Commit => Cmd::Commit(txn),
                Decision::Abort => Cmd::Abort(txn),
            };
            self.propose(ctx, cmd);
            return;
        }
        if decision == Decision::Commit {
            // A commit means this shard's leader voted yes once the prepare
            // was chosen, and every later leader's log holds it: a leader
            // without it was deposed and has not heard yet. Acknowledging
            // would let the coordinator's watermark pass a transaction its
            // successor still holds prepared.
            ctx.count("stale_leader_decisions", 1);
            return self.refuse_not_leader(ctx, from, txn);
        }
        // Never prepared here: abort it through the log before saying so, as
        // a query about it does. Only the log tells a leader deposed without
        // knowing it from the leader: had it answered at once, the
        // coordinator would count this shard decided while its successor
        // holds the transaction prepared, retire it, and the decision that
        // reaches the successor later would find it forgotten and leave its
        // locks held for good.
        if self.awaiting_decision.insert(txn, from).is_none() {
            self.abort_unprepared(ctx, txn); // a repeated decision waits for the same entry
        }
    }

    /// Aborts a transaction not prepared here through the log: its locks
    /// go now, anything more of it is refused, and the abort, once chosen,
    /// also voids a prepare of it a deposed leader may still get chosen.
    pub(super) fn abort_unprepared(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId) {
        if let Some(a) = self.active.remove(&txn) {
            let granted = self.release_locks(txn, &a.locks);
            self.acquire(ctx, granted);
        }
        self.refused.insert(txn);
        self.propose(ctx, Cmd::Abort(txn));
    }

    pub(super) fn propose(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, cmd: Cmd) {
        // A refusal means leadership was just lost; Deposed follows and the
        // requester retries elsewhere.
        let _ = self.log.paxos.propose(&mut Mapped::new(ctx), cmd);
    }

    // ---- the replicated state machine ----

    /// Applies what the log committed and reacts to leadership changes;
    /// then what the copies learned.
    pub(super) fn drain(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>) {
        // Most messages leave no Paxos event: ask before swapping lists.
        while self.log.has_events() {
            let mut events = self.log.events();
            for ev in events.drain(..) {
                match ev {
                    PaxosEvent::Committed { slot, value } => {
                        let applied = self.log.apply_slot(ctx, slot, value);
                        self.on_applied(ctx, applied);
                    }
                    PaxosEvent::LeaderReady { .. } => self.take_over(ctx),
                    PaxosEvent::Deposed => self.step_down(ctx),
                    PaxosEvent::Restore { upto, state } => {
                        assert!(!self.leading, "a leader never lags behind a checkpoint");
                        self.log.restore(upto, &state);
                    }
                }
            }
            self.log.recycle_events(events);
            self.log.checkpoint_if_due(ctx);
        }
        self.copies.drain(ctx);
    }

    /// What the leader does about an applied command: vote once a prepare
    /// is durable, release locks and answer once a decision is.
    fn on_applied(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, applied: Applied) {
        match applied {
            Applied::Nothing => {}
            Applied::Prepared { txn, coordinator } => {
                let leading = self.leading;
                if let Some(a) = self.active.get_mut(&txn).filter(|_| leading) {
                    a.stage = Stage::Prepared;
                    a.age_ticks = 0;
                    ctx.send(coordinator, Msg::Vote { txn, part: self.part, yes: true });
                }
            }
            Applied::Voided { txn, coordinator } => {
                if self.leading {
                    if let Some(a) = self.active.remove(&txn) {
                        self.refused.insert(txn);
                        let granted = self.release_locks(txn, &a.locks);
                        self.acquire(ctx, granted);
                    }
                    ctx.send(coordinator, Msg::Vote { txn, part: self.part, yes: false });
                }
            }
            Applied::Decided { txn, decision } => self.on_decided(ctx, txn, decision),
        }
    }

    /// A coordinator's watermark, to retire outcomes with at the next
    /// termination tick (one log entry for all coordinators per tick).
    fn note_watermark(&mut self, coordinator: NodeId, below: u64) {
        if self.leading {
            let w = self.watermarks.entry(coordinator).or_default();
            *w = (*w).max(below);
        }
    }

    /// Proposes the watermarks gathered since the last tick.
    pub(super) fn propose_watermarks(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>) {
        if self.leading && !self.watermarks.is_empty() {
            let watermarks = std::mem::take(&mut self.watermarks).into_iter().collect();
            self.propose(ctx, Cmd::Retire(watermarks));
        }
    }

    /// A decision is applied: release its locks, acknowledge it, answer
    /// those who asked.
    fn on_decided(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId, decision: Decision) {
        self.in_doubt.remove(&txn);
        if self.leading {
            if let Some(a) = self.active.remove(&txn) {
                let granted = self.release_locks(txn, &a.locks);
                self.acquire(ctx, granted);
            }
            if let Some(coordinator) = self.awaiting_decision.remove(&txn) {
                ctx.send(coordinator, Msg::Decided { txn, part: self.part });
            }
            let status = if decision == Decision::Commit { TxnStatus::Committed } else { TxnStatus::Aborted };
            for asker in self.pending_answers.remove(&txn).unwrap_or_default() {
                ctx.send(asker, Msg::Status { txn, part: self.part, status: Some(status) });
            }
        }
    }

    /// This replica now leads: re-take the locks of every prepared,
    /// undecided transaction before serving anything.
    fn take_over(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>) {
        self.clear_leader_state();
        self.leading = true;
        ctx.count("leader_takeovers", 1);
        let prepared: Vec<Arc<PrepareRecord>> = self.log.prepared_records().into_iter().cloned().collect();
        for r in prepared {
            let shared = r.reads.iter().map(|(k, _)| LockRead { key: *k, mode: LockMode::Shared, read: false });
            let exclusive = r.writes.iter().map(|(k, _)| LockRead { key: *k, mode: LockMode::Exclusive, read: false });
            let locks = lock_list(&shared.chain(exclusive).collect::<Vec<_>>());
            for (key, mode) in &locks {
                let granted = self.locks.try_acquire(*key, r.txn, *mode);
                assert_eq!(granted, Acquire::Granted, "prepared transactions never conflict");
            }
            let prio = Priority { start_ns: 0, first: r.txn };
            let active = Active {
                prio,
                coordinator: r.coordinator,
                round: 0,
                reads: KeyList::new(),
                locks,
                stage: Stage::Prepared,
                age_ticks: 0,
                asked_ns: 0,
                read_versions: SmallMap::new(),
            };
            self.active.insert(r.txn, active);
        }
    }

    fn step_down(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>) {
        // Tell coordinators of unprepared work to go elsewhere; prepared work
        // survives in the log and the next leader resolves it.
        let hint = self.log.paxos.leader_hint();
        let mut told: Vec<(TxnId, NodeId)> = self.active.iter().map(|(t, a)| (*t, a.coordinator)).collect();
        told.sort_unstable();
        for (txn, coordinator) in told {
            ctx.send(coordinator, Msg::Refused { txn, part: self.part, reason: Refusal::NotLeader { hint } });
        }
        self.clear_leader_state();
    }

    fn clear_leader_state(&mut self) {
        self.leading = false;
        self.locks = LockTable::new();
        self.active.clear();
        self.refused = RecentSet::new(cfg_refused_kept());
        self.awaiting_decision.clear();
        self.in_doubt.clear();
        self.pending_answers.clear();
        self.watermarks.clear();
    }
}

/// How many refused transactions a leader remembers: those still above
/// their coordinator's retired watermark (the outcomes answer for the rest)
/// are the few in flight; a late duplicate of one forgotten anyway is
/// answered by its coordinator with an abort.
fn cfg_refused_kept() -> usize {
    4_096
}

/// One lock per key (the strongest asked), in key order.
fn lock_list(keys: &[LockRead]) -> LockList {
    let mut locks = LockList::with_capacity(keys.len());
    for k in keys {
        match locks.iter_mut().find(|(key, _)| *key == k.key) {
            Some(l) if k.mode == LockMode::Exclusive => l.1 = k.mode,
            Some(_) => {}
            None => locks.push((k.key, k.mode)),
        }
    }
    locks.sort_unstable_by_key(|(k, _)| *k);
    locks
}

impl Process<TwoPlPaxos> for Replica {
    /// Between events: the state machine applied no further than Paxos
    /// delivered; leader-only state is empty at a follower; at the leader
    /// every lock is held or awaited by a live transaction, and every
    /// transaction in its prepare stages holds its locks. A home replica is
    /// the only member of its log, and its copies learn the others.
    fn check_invariants(&self) {
        self.log.check_invariants();
        self.copies.check_invariants();
        if self.cfg.lock_at == LockAt::Home {
            assert_eq!(self.log.paxos.members().len(), 1, "a home partition's log has one member");
            assert!(!self.copies.holds(self.part.0), "a replica copies its own log");
        }
        if !self.leading {
            assert!(self.locks.is_empty(), "a follower holds locks");
            assert!(self.active.is_empty(), "a follower has active transactions");
            assert!(self.awaiting_decision.is_empty(), "a follower awaits decisions");
            assert!(self.in_doubt.is_empty(), "a follower resolves in-doubt transactions");
            assert!(self.pending_answers.is_empty(), "a follower owes answers");
            return;
        }
        self.locks.check_invariants(CHECKED_MAX, |key, txn| {
            assert!(self.active.contains_key(&txn), "{txn:?} holds or awaits {key} but is not active");
        });
        for (txn, a) in self.active.iter().take(CHECKED_MAX) {
            match a.stage {
                Stage::Locking { next } => assert!(next <= a.locks.len(), "{txn:?} took more locks than it asked"),
                Stage::Executed | Stage::Preparing | Stage::Prepared => {
                    for (key, _) in &a.locks {
                        assert!(self.locks.holds(*key, *txn), "{txn:?} lost its lock on {key} before its decision");
                    }
                }
            }
        }
    }

    /// See `Process::state_sizes`.
    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("store_keys", self.log.store().keys());
        out("prepared", self.log.prepared_len());
        out("outcomes", self.log.outcomes_len());
        out("locked_keys", self.locks.len());
        out("active", self.active.len());
        out("refused", self.refused.len());
        out("awaiting_decision", self.awaiting_decision.len());
        out("in_doubt", self.in_doubt.len());
        out("pending_answers", self.pending_answers.len());
        out("watermarks", self.watermarks.len());
        self.log.paxos.state_sizes(out);
        if self.cfg.lock_at == LockAt::Home {
            self.copies.state_sizes(out);
        }
    }

    /// With `lock_at = "home"`: what every log of the shard applied (its
    /// own and its copies', in group order) and a digest of their data.
    /// Every replica of a shard holds every home partition's log, so copies
    /// that applied the same slots must hold the same data. (With `lock_at =
    /// "leader"` nothing is reported: the runs' traces stay as they were.)
    fn copy_state(&self) -> Option<CopyState> {
        if self.cfg.lock_at != LockAt::Home {
            return None;
        }
        let mut logs: Vec<&Log> = self.copies.logs().chain([&self.log]).collect();
        logs.sort_by_key(|l| l.group());
        let applied: Vec<(u32, u64)> = logs.iter().map(|l| (l.group(), l.applied_slot())).collect();
        let data: Vec<(u32, u64)> = logs.iter().map(|l| (l.group(), l.data_digest())).collect();
        let settled = Some(Settled { applied: digest(&applied), hash: digest(&data) });
        // Never in flight: what it applied is its progress.
        Some(CopyState { shard: self.shard, settled, finished: 0 })
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, durable: Vec<Record>) {
        let own = self.log.group();
        let mut mine = Vec::new();
        let mut copied: BTreeMap<u32, Vec<_>> = BTreeMap::new();
        for r in durable {
            match r {
                Record::Paxos(p) if p.group == own => mine.push(p.body),
                Record::Paxos(p) => copied.entry(p.group).or_default().push(p.body),
                Record::Epoch(_) => {}
            }
        }
        self.log.paxos.start(&mut Mapped::new(ctx), mine);
        self.copies.start(ctx, copied);
        ctx.set_timer(self.cfg.termination_tick_ns, Timer::Termination);
        self.drain(ctx);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, upto: Lsn) {
        self.log.paxos.on_persisted(&mut Mapped::new(ctx), upto);
        self.copies.on_persisted(ctx, upto);
        self.drain(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, timer: Timer) {
        match timer {
            Timer::Paxos(t) if t.group == self.log.group() => self.log.paxos.on_timer(&mut Mapped::new(ctx), t),
            Timer::Paxos(t) => self.copies.on_timer(ctx, t),
            // One period by design, like the coordinator's `Tick`: in-doubt
            // queries and lease expiry are per-transaction deadlines counted
            // in these ticks (`in_doubt_ticks`, `lock_lease_ticks`), and the
            // watermarks gathered meanwhile go out as one log entry per tick.
            Timer::Termination => {
                ctx.set_timer(self.cfg.termination_tick_ns, Timer::Termination);
                self.check_in_doubt(ctx);
                self.propose_watermarks(ctx);
            }
            Timer::Tick | Timer::Restart(_) | Timer::QueryAbandoned => {} // coordinators' timers
        }
        self.drain(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Paxos(m) if m.group == self.log.group() => self.log.paxos.on_message(&mut Mapped::new(ctx), from, m),
            Msg::Paxos(m) => self.copies.on_message(ctx, from, m),
            Msg::Execute(m) => self.on_execute(ctx, from, m),
            Msg::Prepare(m) => self.on_prepare(ctx, from, m),
            Msg::Decide { txn, decision, settled_below } => {
                self.note_watermark(from, settled_below);
                self.on_decide(ctx, from, txn, decision)
            }
            Msg::Query { txn } => self.on_query(ctx, from, txn),
            Msg::WhoLeads { shard } if shard == self.shard => {
                let leader = if self.leading { Some(ctx.me()) } else { self.log.paxos.leader_hint() };
                ctx.send(from, Msg::Leader { shard, leader });
            }
            Msg::Status { txn, part, status } => self.on_status(ctx, txn, part, status),
            Msg::WhoLeads { .. } => {} // about another shard
            // Messages to coordinators.
            Msg::Executed(_) | Msg::Vote { .. } | Msg::Decided { .. } | Msg::Refused { .. } | Msg::Leader { .. } => {}
        }
        self.drain(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_list_takes_the_strongest_mode_per_key_in_key_order() {
        let lr = |key: u64, mode: LockMode| LockRead { key: Key(key), mode, read: true };
        let ops = vec![
            lr(5, LockMode::Shared),
            lr(2, LockMode::Exclusive),
            lr(5, LockMode::Exclusive),
            lr(1, LockMode::Shared),
        ];
        assert_eq!(
            lock_list(&ops).to_vec(),
            vec![(Key(1), LockMode::Shared), (Key(2), LockMode::Exclusive), (Key(5), LockMode::Exclusive)]
        );
    }
}
