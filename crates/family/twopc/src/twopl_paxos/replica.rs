//! The shard replica of `2pl-paxos`: a Multi-Paxos member whose log holds
//! prepare, commit and abort commands, and, while it leads, the lock table
//! and the transactions executing under it.
//!
//! Every replica applies the log in order to the same state machine (the
//! store, the prepared transactions, the remembered outcomes). Only the
//! leader locks: wound-wait over a priority-ordered wait queue, where an
//! older transaction wounds a younger holder that has not started to
//! prepare, and otherwise waits (so nobody ever waits for a younger
//! unprepared transaction and deadlock cannot form). A new leader re-takes
//! the locks of every prepared, undecided transaction from the log before it
//! serves, then resolves the ones left in doubt (recovery.rs).

use super::messages::{
    Cmd, Execute, Executed, LockRead, Msg, Prepare, PrepareRecord, Priority, Record, Refusal, ReplicaState, Timer,
};
use super::{Config, TwoPlPaxos};
use meridian_core::Process;
use meridian_core::process::CHECKED_MAX;
use meridian_core::{Ctx, Key, Lsn, Mapped, NodeId, ShardId, TxnId, Value};
use meridian_mechanisms::locks::{Acquire, LockMode, LockTable};
use meridian_mechanisms::mvstore::MvStore;
use meridian_mechanisms::paxos::{MultiPaxos, PaxosEvent};
use meridian_mechanisms::recent::RecentSet;
use meridian_mechanisms::twopc::{Decision, Outcomes, TxnStatus};
use rustc_hash::FxHashMap;
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

#[derive(Clone, Debug)]
pub(super) struct Active {
    pub prio: Priority,
    pub coordinator: NodeId,
    /// The execute round in progress (a procedure reads in rounds).
    pub round: u32,
    /// The keys this round reads, once its locks are held.
    pub reads: Vec<Key>,
    /// Every lock asked for, in the order taken; a key appears again when
    /// a later round upgrades it.
    pub locks: Vec<(Key, LockMode)>,
    pub stage: Stage,
    /// Termination ticks in the current stage at this leader: a lock lease
    /// for unprepared transactions, in-doubt detection for prepared ones.
    pub age_ticks: u32,
    /// When the current round asked for its locks (this leader's clock).
    pub asked_ns: u64,
    /// The version of every key it read, when it read it.
    pub read_versions: BTreeMap<Key, Option<u64>>,
}

pub struct Replica {
    pub(super) shard: ShardId,
    pub(super) cfg: Config,
    pub(super) paxos: MultiPaxos<Cmd, ReplicaState>,
    // The replicated state machine.
    pub(super) store: MvStore,
    pub(super) prepared: BTreeMap<TxnId, Arc<PrepareRecord>>,
    /// The keys of `prepared`, for the conflict check of every applied
    /// prepare (derived: rebuilt on restore).
    prepared_keys: PreparedKeys,
    pub(super) outcomes: Outcomes,
    applied_slot: u64,
    // Leader-only state, rebuilt on every LeaderReady.
    pub(super) leading: bool,
    pub(super) locks: LockTable<TxnId, Priority>,
    pub(super) active: FxHashMap<TxnId, Active>,
    /// Transactions this leader aborted or wounded before they prepared: a
    /// late duplicate of their execute request is ignored.
    pub(super) refused: RecentSet<TxnId>,
    /// Coordinators to acknowledge once a decision is applied.
    pub(super) awaiting_decision: BTreeMap<TxnId, NodeId>,
    /// In-doubt transactions: the answers gathered so far, by shard.
    pub(super) in_doubt: BTreeMap<TxnId, BTreeMap<ShardId, TxnStatus>>,
    /// Queries to answer once an abort we proposed for them is applied.
    pub(super) pending_answers: BTreeMap<TxnId, Vec<NodeId>>,
    /// Coordinators' watermarks seen in decisions, not yet proposed.
    pub(super) watermarks: BTreeMap<NodeId, u64>,
}

impl Replica {
    pub fn new(shard: ShardId, paxos: MultiPaxos<Cmd, ReplicaState>, cfg: Config) -> Replica {
        Replica {
            shard,
            outcomes: Outcomes::new(cfg.outcomes_kept),
            cfg,
            paxos,
            store: MvStore::new(),
            prepared: BTreeMap::new(),
            prepared_keys: PreparedKeys::default(),
            applied_slot: 0,
            leading: false,
            locks: LockTable::new(),
            active: FxHashMap::default(),
            refused: RecentSet::new(cfg_refused_kept()),
            awaiting_decision: BTreeMap::new(),
            in_doubt: BTreeMap::new(),
            pending_answers: BTreeMap::new(),
            watermarks: BTreeMap::new(),
        }
    }

    pub fn is_leading(&self) -> bool {
        self.leading
    }

    pub fn store(&self) -> &MvStore {
        &self.store
    }

    pub fn applied_slot(&self) -> u64 {
        self.applied_slot
    }

    /// Decided transactions this replica remembers.
    pub fn outcomes_len(&self) -> usize {
        self.outcomes.len()
    }

    pub fn prepared_count(&self) -> usize {
        self.prepared.len()
    }

    fn refuse_not_leader(&self, ctx: &mut Ctx<'_, TwoPlPaxos>, to: NodeId, txn: TxnId) {
        let hint = self.paxos.leader_hint();
        ctx.send(to, Msg::Refused { txn, shard: self.shard, reason: Refusal::NotLeader { hint } });
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
        if self.refused.contains(&txn) || self.outcomes.lookup(txn).is_some() || self.prepared.contains_key(&txn) {
            return; // late or duplicated: the coordinator has moved on
        }
        assert!(!keys.is_empty(), "an execute request names keys");
        let reads: Vec<Key> = keys.iter().filter(|k| k.read).map(|k| k.key).collect();
        let wanted = lock_list(&keys);
        let Some(a) = self.active.get_mut(&txn) else {
            if round > 0 {
                // The locks of earlier rounds were taken by another leader
                // (or lost with this one's term): the attempt cannot go on.
                ctx.send(from, Msg::Refused { txn, shard: self.shard, reason: Refusal::Wounded });
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
                read_versions: BTreeMap::new(),
            };
            self.active.insert(txn, active);
            return self.acquire(ctx, vec![txn]);
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
        self.acquire(ctx, vec![txn]);
    }

    /// Advances each listed transaction through its lock list, wounding
    /// younger holders and waiting behind older ones; transactions granted
    /// a lock by a release join the work list.
    pub(super) fn acquire(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, mut work: Vec<TxnId>) {
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
    fn wound(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, b: TxnId) -> Vec<TxnId> {
        let a = self.active.remove(&b).expect("woundable transactions are active");
        self.refused.insert(b);
        ctx.count("wounds", 1);
        ctx.send(a.coordinator, Msg::Refused { txn: b, shard: self.shard, reason: Refusal::Wounded });
        self.release_locks(b, &a.locks)
    }

    pub(super) fn release_locks(&mut self, txn: TxnId, locks: &[(Key, LockMode)]) -> Vec<TxnId> {
        let mut granted = Vec::new();
        for (key, _) in locks {
            granted.extend(self.locks.release(*key, txn));
        }
        granted
    }

    /// Every lock of the round is held: read its keys and answer.
    fn send_reads(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId) {
        let a = self.active.get_mut(&txn).expect("reads are sent for active transactions");
        for k in &a.reads {
            a.read_versions.entry(*k).or_insert_with(|| self.store.latest_version(*k));
        }
        let reads: Vec<(Key, Option<Value>)> = a.reads.iter().map(|k| (*k, self.store.latest(*k).cloned())).collect();
        ctx.send(a.coordinator, Msg::Executed(Executed { txn, shard: self.shard, round: a.round, reads }));
    }

    // ---- prepare ----

    fn on_prepare(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, from: NodeId, m: Prepare) {
        let Prepare { txn, participants, writes } = m;
        if !self.leading {
            return self.refuse_not_leader(ctx, from, txn);
        }
        let vote = |yes| Msg::Vote { txn, shard: self.shard, yes };
        if self.prepared.contains_key(&txn) || self.outcomes.lookup(txn) == Some(TxnStatus::Committed) {
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
        // Every locked key it does not write is one it read: a new leader
        // re-takes those locks too.
        let mut read_keys: Vec<Key> =
            a.locks.iter().map(|(k, _)| *k).filter(|k| !writes.iter().any(|(w, _)| w == k)).collect();
        read_keys.sort_unstable();
        read_keys.dedup();
        let store = &self.store;
        let reads = read_keys
            .into_iter()
            .map(|k| (k, a.read_versions.get(&k).copied().unwrap_or_else(|| store.latest_version(k))))
            .collect();
        let record = PrepareRecord { txn, coordinator: from, participants, reads, writes };
        a.stage = Stage::Preparing;
        if self.paxos.propose(&mut Mapped::new(ctx), Cmd::Prepare(Arc::new(record))).is_err() {
            self.refuse_not_leader(ctx, from, txn);
        }
    }

    // ---- decide ----

    fn on_decide(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, from: NodeId, txn: TxnId, decision: Decision) {
        if !self.leading {
            return self.refuse_not_leader(ctx, from, txn);
        }
        if self.outcomes.lookup(txn).is_some() {
            return ctx.send(from, Msg::Decided { txn, shard: self.shard });
        }
        let preparing = self.active.get(&txn).is_some_and(|a| a.stage == Stage::Preparing);
        if self.prepared.contains_key(&txn) || preparing {
            self.awaiting_decision.insert(txn, from);
            let cmd = match decision {
                Decision::Commit => Cmd::Commit(txn),
                Decision::Abort => Cmd::Abort(txn),
            };
            self.propose(ctx, cmd);
            return;
        }
        // Never prepared here: only an abort is possible, and nothing durable
        // needs to say so (a later prepare finds no executed transaction).
        debug_assert_eq!(decision, Decision::Abort, "commit of {txn} that never prepared at {}", self.shard);
        if let Some(a) = self.active.remove(&txn) {
            let granted = self.release_locks(txn, &a.locks);
            self.acquire(ctx, granted);
        }
        self.refused.insert(txn);
        ctx.send(from, Msg::Decided { txn, shard: self.shard });
    }

    pub(super) fn propose(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, cmd: Cmd) {
        // A refusal means leadership was just lost; Deposed follows and the
        // requester retries elsewhere.
        let _ = self.paxos.propose(&mut Mapped::new(ctx), cmd);
    }

    // ---- the replicated state machine ----

    /// Applies what the log committed and reacts to leadership changes.
    pub(super) fn drain(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>) {
        loop {
            let events = self.paxos.drain_events();
            if events.is_empty() {
                return;
            }
            for ev in events {
                match ev {
                    PaxosEvent::Committed { slot, value } => {
                        assert!(slot > self.applied_slot, "slots apply in order");
                        self.applied_slot = slot;
                        self.apply(ctx, std::sync::Arc::unwrap_or_clone(value));
                    }
                    PaxosEvent::LeaderReady { .. } => self.take_over(ctx),
                    PaxosEvent::Deposed => self.step_down(ctx),
                    PaxosEvent::Restore { upto, state } => self.restore(upto, &state),
                }
            }
            if self.paxos.should_compact(self.store.keys() + self.outcomes.len()) {
                let state = ReplicaState {
                    store: self.store.clone(),
                    prepared: self.prepared.clone(),
                    outcomes: self.outcomes.clone(),
                };
                self.paxos.compact(&mut Mapped::new(ctx), self.applied_slot, state);
            }
        }
    }

    /// Takes over a checkpoint's state (after a restart, or from a peer when
    /// this replica lagged behind a compacted log).
    fn restore(&mut self, upto: u64, state: &ReplicaState) {
        assert!(!self.leading, "a leader never lags behind a checkpoint");
        self.store = state.store.clone();
        self.prepared = state.prepared.clone();
        self.prepared_keys = PreparedKeys::default();
        for r in self.prepared.values() {
            self.prepared_keys.add(r);
        }
        self.outcomes = state.outcomes.clone();
        self.applied_slot = upto;
    }

    fn apply(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, cmd: Cmd) {
        match cmd {
            Cmd::Prepare(record) => {
                let txn = record.txn;
                if self.outcomes.lookup(txn).is_some() {
                    return; // decided (aborted) before its prepare: it stays so
                }
                if self.prepared.contains_key(&txn) {
                    return; // prepared already (a re-proposed record)
                }
                if !self.prepare_holds(&record) {
                    return self.void_prepare(ctx, &record);
                }
                let coordinator = record.coordinator;
                self.prepared_keys.add(&record);
                self.prepared.insert(txn, record);
                let leading = self.leading;
                if let Some(a) = self.active.get_mut(&txn).filter(|_| leading) {
                    a.stage = Stage::Prepared;
                    a.age_ticks = 0;
                    ctx.send(coordinator, Msg::Vote { txn, shard: self.shard, yes: true });
                }
            }
            Cmd::Commit(txn) => self.apply_decision(ctx, txn, Decision::Commit),
            Cmd::Abort(txn) => self.apply_decision(ctx, txn, Decision::Abort),
            Cmd::Retire(watermarks) => self.outcomes.retire_all(&watermarks),
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

    /// Whether a prepare record may still take effect where the log places
    /// it: what it read is still current, and no prepared, undecided
    /// transaction conflicts with it. A leader only proposes such records,
    /// but one proposed by a leader that was already deposed can still be
    /// chosen later (its slot adopted by the next leader's phase 1), its
    /// locks taken from a table nobody else honoured. Every replica decides
    /// this alike from the log.
    fn prepare_holds(&self, r: &PrepareRecord) -> bool {
        let current = r.reads.iter().all(|(k, version)| self.store.latest_version(*k) == *version);
        current && !self.prepared_keys.conflicts(r)
    }

    /// A prepare that cannot take effect: the transaction is aborted here,
    /// durably and alike at every replica (its coordinator, if it still
    /// waits, hears no).
    fn void_prepare(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, r: &PrepareRecord) {
        ctx.count("prepares_voided", 1);
        self.outcomes.record(r.txn, Decision::Abort);
        if self.leading {
            if let Some(a) = self.active.remove(&r.txn) {
                self.refused.insert(r.txn);
                let granted = self.release_locks(r.txn, &a.locks);
                self.acquire(ctx, granted);
            }
            ctx.send(r.coordinator, Msg::Vote { txn: r.txn, shard: self.shard, yes: false });
        }
    }

    fn apply_decision(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId, decision: Decision) {
        if self.outcomes.lookup(txn).is_some() {
            return; // a duplicate decision
        }
        let record = self.prepared.remove(&txn);
        if let Some(r) = &record {
            self.prepared_keys.remove(r);
        }
        match (decision, &record) {
            (Decision::Commit, Some(r)) => {
                for (key, value) in &r.writes {
                    self.store.put(*key, self.applied_slot, value.clone());
                }
            }
            (Decision::Commit, None) => {
                panic!("{txn} committed at {} without a prepare record", self.shard)
            }
            (Decision::Abort, _) => {}
        }
        self.outcomes.record(txn, decision);
        self.in_doubt.remove(&txn);
        if self.leading {
            if let Some(a) = self.active.remove(&txn) {
                let granted = self.release_locks(txn, &a.locks);
                self.acquire(ctx, granted);
            }
            if let Some(coordinator) = self.awaiting_decision.remove(&txn) {
                ctx.send(coordinator, Msg::Decided { txn, shard: self.shard });
            }
            let status = if decision == Decision::Commit { TxnStatus::Committed } else { TxnStatus::Aborted };
            for asker in self.pending_answers.remove(&txn).unwrap_or_default() {
                ctx.send(asker, Msg::Status { txn, shard: self.shard, status: Some(status) });
            }
        }
    }

    /// This replica now leads: re-take the locks of every prepared,
    /// undecided transaction before serving anything.
    fn take_over(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>) {
        self.clear_leader_state();
        self.leading = true;
        ctx.count("leader_takeovers", 1);
        let prepared: Vec<Arc<PrepareRecord>> = self.prepared.values().cloned().collect();
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
                reads: Vec::new(),
                locks,
                stage: Stage::Prepared,
                age_ticks: 0,
                asked_ns: 0,
                read_versions: BTreeMap::new(),
            };
            self.active.insert(r.txn, active);
        }
    }

    fn step_down(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>) {
        // Tell coordinators of unprepared work to go elsewhere; prepared work
        // survives in the log and the next leader resolves it.
        let hint = self.paxos.leader_hint();
        let mut told: Vec<(TxnId, NodeId)> = self.active.iter().map(|(t, a)| (*t, a.coordinator)).collect();
        told.sort_unstable();
        for (txn, coordinator) in told {
            ctx.send(coordinator, Msg::Refused { txn, shard: self.shard, reason: Refusal::NotLeader { hint } });
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

/// The locks a piece needs: one per key, exclusive if any op writes it,
/// sorted by key.
/// How many prepared, undecided transactions read and write each key.
#[derive(Default, Debug)]
struct PreparedKeys {
    /// key -> (readers, writers)
    map: FxHashMap<Key, (u32, u32)>,
}

impl PreparedKeys {
    fn add(&mut self, r: &PrepareRecord) {
        for (k, _) in &r.reads {
            self.map.entry(*k).or_default().0 += 1;
        }
        for (k, _) in &r.writes {
            self.map.entry(*k).or_default().1 += 1;
        }
    }

    fn remove(&mut self, r: &PrepareRecord) {
        let keys = r.reads.iter().map(|(k, _)| (*k, true)).chain(r.writes.iter().map(|(k, _)| (*k, false)));
        for (k, read) in keys {
            let e = self.map.get_mut(&k).expect("a prepared key is counted");
            let n = if read { &mut e.0 } else { &mut e.1 };
            assert!(*n > 0, "key {k} counted below zero");
            *n -= 1;
            if *e == (0, 0) {
                self.map.remove(&k);
            }
        }
    }

    /// Whether `r` conflicts with a counted transaction.
    fn conflicts(&self, r: &PrepareRecord) -> bool {
        let at = |k: &Key| self.map.get(k).copied().unwrap_or_default();
        r.reads.iter().any(|(k, _)| at(k).1 > 0) || r.writes.iter().any(|(k, _)| at(k) != (0, 0))
    }
}

/// One lock per key (the strongest asked), in key order.
fn lock_list(keys: &[LockRead]) -> Vec<(Key, LockMode)> {
    let mut locks: Vec<(Key, LockMode)> = Vec::with_capacity(keys.len());
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
    /// transaction in its prepare stages holds its locks.
    fn check_invariants(&self) {
        self.paxos.check_invariants();
        assert!(self.applied_slot <= self.paxos.delivered_upto(), "applied past what Paxos delivered");
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
        out("store_keys", self.store.keys());
        out("prepared", self.prepared.len());
        out("outcomes", self.outcomes.len());
        out("locked_keys", self.locks.len());
        out("active", self.active.len());
        out("refused", self.refused.len());
        out("awaiting_decision", self.awaiting_decision.len());
        out("in_doubt", self.in_doubt.len());
        out("pending_answers", self.pending_answers.len());
        out("watermarks", self.watermarks.len());
        self.paxos.state_sizes(out);
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, durable: Vec<Record>) {
        let records = durable.into_iter().filter_map(|r| match r {
            Record::Paxos(p) => Some(p.body),
            Record::Epoch(_) => None,
        });
        self.paxos.start(&mut Mapped::new(ctx), records);
        ctx.set_timer(self.cfg.termination_tick_ns, Timer::Termination);
        self.drain(ctx);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, upto: Lsn) {
        self.paxos.on_persisted(&mut Mapped::new(ctx), upto);
        self.drain(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, timer: Timer) {
        match timer {
            Timer::Paxos(t) => self.paxos.on_timer(&mut Mapped::new(ctx), t),
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
            Msg::Paxos(m) => self.paxos.on_message(&mut Mapped::new(ctx), from, m),
            Msg::Execute(m) => self.on_execute(ctx, from, m),
            Msg::Prepare(m) => self.on_prepare(ctx, from, m),
            Msg::Decide { txn, decision, settled_below } => {
                self.note_watermark(from, settled_below);
                self.on_decide(ctx, from, txn, decision)
            }
            Msg::Query { txn } => self.on_query(ctx, from, txn),
            Msg::WhoLeads { shard } if shard == self.shard => {
                let leader = if self.leading { Some(ctx.me()) } else { self.paxos.leader_hint() };
                ctx.send(from, Msg::Leader { shard, leader });
            }
            Msg::Status { txn, shard, status } => self.on_status(ctx, txn, shard, status),
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
            lock_list(&ops),
            vec![(Key(1), LockMode::Shared), (Key(2), LockMode::Exclusive), (Key(5), LockMode::Exclusive)]
        );
    }
}
