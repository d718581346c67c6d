//! A Tiga server (leader or follower of a shard): the role, its dispatch,
//! and normal processing — conflict detection and timestamp update (§3.2),
//! the priority queue and release by the clock (§3.3, Algorithm 1 lines
//! 1-31), optimistic execution at leaders with revocable multi-version
//! writes (§3.3, §3.5), fast replies carrying the per-key log hash (§3.4,
//! Appendix D).
//!
//! The server's state is split by concern. [`Core`] is what every concern
//! reads: identity, view and status, the log with its sync-point and
//! commit-point (`log::ShardLog`, whose methods keep them in order), and the
//! durable outbox. Each concern is a struct with private fields, owned by
//! the server, whose methods take the `Core` (and anything else they read)
//! as parameters and call no other concern:
//!
//! - `checkpoint::Executed`: execution in log order up to the
//!   commit-point, checkpoints, the last replies and the at-most-once
//!   memory (§4, Appendix B);
//! - `sync::SyncState`: a leader's followers' progress and a follower's
//!   fetched bodies (§3.7);
//! - `agreement::Announcements`: timestamp agreement among leaders (§3.5-3.6);
//! - `recovery::Rebuild`: the new leader's side of a view change
//!   (Algorithm 5).
//!
//! The server's dispatch sequences them, and the transitions that change
//! several at once are here: executing and folding, snapshots and
//! restarts, adopting a checkpoint, a follower placing its leader's
//! entries, entering a view change and installing a view's log (with the
//! one reset of a view's work, `forget_view_work`). The queue, held
//! transactions, conflict maps, key hashes and optimistic store are the
//! role's own.
//!
//! Every change to the log is appended to the durable log before any reply
//! that reports it leaves (`send_durable`): a restarted server keeps what it
//! told others.

use super::agreement::{self, Announced};
use super::checkpoint::Executed;
use super::conflict::ConflictMaps;
use super::hash::KeyHashes;
use super::log::{Replied, ShardLog, TigaLog};
use super::messages::{
    Checkpoint, FastReply, LogEntry, LogSync, LoggedEntries, Mode, Msg, NO_HASH, Record, Snapshot, Stamp, Standing,
    StartView, Submit, Timer, TsNotify, TsVerify, TxnBody, View, ViewChange,
};
pub(super) use super::queue::{PState, Pending, TxnQueue};
use super::reach::PeerReach;
use super::recovery::{self, Finished};
use super::sync::{self, SYNC_BATCH_MAX, SyncState};
use super::{Config, Tiga};
use meridian_core::Process;
use meridian_core::process::CHECKED_MAX;
use meridian_core::{Ctx, Key, KeyList, Lsn, NodeId, OpResult, Program, ShardId, Topology, TxnId};
use meridian_mechanisms::durable::AfterDurable;
use meridian_mechanisms::mvstore::MvStore;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Normal,
    ViewChange,
    Recovering,
}

/// What waits for the appends before it to be durable.
pub(super) enum OnDurable {
    /// A message that may leave only then (a vote, a fast reply).
    Send(NodeId, Msg),
    /// The log of global view `g_view` is `len` long durably: it counts
    /// towards the commit-point while the server is in that view (a leader
    /// that keeps leading after a view change must not count its old log's
    /// length for the new log).
    LogLength { g_view: u64, len: u64 },
}

/// A leader's optimistic execution (§3.3, §3.5): the committed state plus
/// revocable versions of what it executed ahead of agreement, and the
/// versions each transaction installed — revoked if agreement moves it
/// (case 3), kept once it is logged. Followers hold none.
#[derive(Default)]
pub(super) struct Optimistic {
    store: MvStore,
    /// The next version number; past every committed one.
    next_version: u64,
    undo: FxHashMap<TxnId, Vec<(Key, u64)>>,
}

impl Optimistic {
    /// Runs `program`'s piece on `shard` on the latest versions; its writes
    /// become revocable versions of `id`. Returns its results.
    fn execute(&mut self, id: TxnId, program: &Program, shard: ShardId, topo: &Topology) -> Vec<OpResult> {
        let exec = program.execute_piece(shard, |k| topo.shard_of(k), |k| self.store.latest(k).cloned());
        let mut installed = Vec::with_capacity(exec.writes.len());
        for (key, value) in exec.writes {
            let version = self.next_version();
            self.store.install(key, version, value);
            installed.push((key, version));
        }
        let before = self.undo.insert(id, installed);
        assert!(before.is_none(), "{id:?} executed twice without a revoke");
        exec.results
    }

    /// Runs a logged entry's piece on `shard`: its writes are final.
    fn execute_logged(&mut self, program: &Program, shard: ShardId, topo: &Topology) -> Vec<OpResult> {
        let exec = program.execute_piece(shard, |k| topo.shard_of(k), |k| self.store.latest(k).cloned());
        for (key, value) in exec.writes {
            let version = self.next_version();
            self.store.put(key, version, value);
        }
        exec.results
    }

    fn next_version(&mut self) -> u64 {
        let v = self.next_version.max(1);
        self.next_version = v + 1;
        v
    }

    /// Undoes `id`'s optimistic writes.
    fn revoke(&mut self, id: TxnId) {
        for (key, version) in self.undo.remove(&id).unwrap_or_default() {
            self.store.revoke(key, version);
        }
    }

    /// `id` reached the log: its versions stay, its undo record goes.
    fn keep(&mut self, id: TxnId) {
        for (key, version) in self.undo.remove(&id).unwrap_or_default() {
            self.store.gc(key, version);
        }
    }

    /// A new leader's store: `state` (the first `applied` log entries,
    /// versions numbered by log position); optimistic versions come after.
    fn restart_from(&mut self, state: &MvStore, applied: u64) {
        self.store = state.clone();
        self.next_version = self.next_version.max(applied + 1);
    }

    /// A view change drops the executions in progress (the new log rebuilds
    /// the store at the leader).
    pub(super) fn forget_executions(&mut self) {
        self.undo.clear();
    }

    /// A follower keeps no store.
    pub(super) fn drop_store(&mut self) {
        self.store = MvStore::new();
    }

    pub(super) fn executions(&self) -> usize {
        self.undo.len()
    }

    pub(super) fn keys(&self) -> usize {
        self.store.keys()
    }
}

/// A release timer armed for the head of the queue.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct ReleaseTimer {
    /// The clock time it fires at.
    pub at_ns: u64,
    pub id: meridian_core::TimerId,
}

/// What every concern of a server reads and the server alone changes
/// between them: who it is, the view and its status, the log with its
/// points, and the durable outbox. Concerns (execution and checkpoints,
/// log synchronization, agreement, view change) take it as a parameter.
pub(super) struct Core {
    topo: Arc<Topology>,
    shard: ShardId,
    replica: u32,
    n: u32,
    cfg: Config,
    status: Status,
    view: View,
    /// The view's leader of each shard (a replica index), derived from
    /// `view` whenever it changes: asked several times per event, and each
    /// derivation divides.
    leaders: Vec<u32>,
    last_normal_view: u64,
    /// Led in its last normal view, and has neither restarted nor let an
    /// unreleased entry join its log since (`record_own_sync_point`): its
    /// log is synced to its end.
    led: bool,
    /// The log with its sync-point and commit-point, changed only through
    /// `ShardLog`'s methods, which keep them in order.
    log: ShardLog,
    /// Messages that leave once everything appended before them is durable.
    outbox: AfterDurable<OnDurable>,
    /// The length of this server's log known durable (a leader counts
    /// towards the commit-point only with it).
    durable_len: u64,
    /// A new leader whose view's log is not yet known durable at every
    /// participant shard (recovery.rs, round 3): until then it holds its
    /// commit-point, and releases and answers nothing (it admits).
    confirming: bool,
}

impl Core {
    pub fn topo(&self) -> &Topology {
        &self.topo
    }

    pub fn shard(&self) -> ShardId {
        self.shard
    }

    pub fn replica(&self) -> u32 {
        self.replica
    }

    /// Replicas per shard.
    pub fn n(&self) -> u32 {
        self.n
    }

    pub fn cfg(&self) -> &Config {
        &self.cfg
    }

    pub fn status(&self) -> Status {
        self.status
    }

    /// Normal and, at a new leader, past its view's confirmation: it
    /// releases and answers transactions.
    pub fn serving(&self) -> bool {
        self.status == Status::Normal && !self.confirming
    }

    /// A new leader waiting for its view's confirmation (round 3).
    pub fn confirming(&self) -> bool {
        self.confirming
    }

    pub fn view(&self) -> &View {
        &self.view
    }

    pub fn last_normal_view(&self) -> u64 {
        self.last_normal_view
    }

    /// The log and its points; the server changes them (a leader's
    /// commit-point also through `commit_to`).
    pub fn log(&self) -> &ShardLog {
        &self.log
    }

    /// The commit-point rises to `pos` (see [`ShardLog::commit_to`]).
    pub fn commit_to(&mut self, pos: u64) {
        self.log.commit_to(pos);
    }

    /// The replica failures a shard tolerates.
    pub fn f(&self) -> usize {
        self.topo.f() as usize
    }

    pub fn is_leader(&self) -> bool {
        self.leaders[self.shard.index()] == self.replica
    }

    pub fn leader_node(&self, _ctx: &Ctx<'_, Tiga>, shard: ShardId) -> NodeId {
        self.topo.replicas(shard)[self.leaders[shard.index()] as usize]
    }

    /// Moves to `view`, and derives its leaders.
    fn set_view(&mut self, view: View) {
        self.leaders = view.leaders(self.n);
        self.view = view;
    }

    pub fn vm_members(&self) -> Vec<NodeId> {
        self.topo.service("viewmgr").to_vec()
    }

    /// The keys `T` declares on this shard, as (reads, writes): its
    /// operations' keys and its procedure parts' footprints, which cover
    /// every key those parts may reach through reads (§3.2 detects
    /// conflicts on them).
    pub fn keys_of(&self, body: &TxnBody) -> (KeyList, KeyList) {
        let topo = &self.topo;
        body.program.declared_keys(self.shard, |k| topo.shard_of(k))
    }

    // ---- durability ----

    pub fn persist(&mut self, ctx: &mut Ctx<'_, Tiga>, record: Record) -> Lsn {
        let lsn = ctx.append(record);
        self.outbox.appended(lsn);
        lsn
    }

    /// The log's current length counts towards the commit-point once
    /// everything appended so far is durable.
    pub fn log_length_once_durable(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let (g_view, len) = (self.view.g_view, self.log.len());
        if let Some(now) = self.outbox.after_last(OnDurable::LogLength { g_view, len }) {
            self.on_durable(ctx, now);
        }
    }

    /// The log length known durable.
    pub fn durable_len(&self) -> u64 {
        self.durable_len
    }

    /// A new view's log: nothing of it is known durable yet.
    pub fn forget_durable_len(&mut self) {
        self.durable_len = 0;
    }

    fn on_durable(&mut self, ctx: &mut Ctx<'_, Tiga>, action: OnDurable) {
        match action {
            OnDurable::Send(to, msg) => ctx.send(to, msg),
            OnDurable::LogLength { g_view, len } if g_view == self.view.g_view => {
                self.durable_len = self.durable_len.max(len)
            }
            OnDurable::LogLength { .. } => {}
        }
    }

    /// Sends `msg` once everything appended so far is durable.
    pub fn send_durable(&mut self, ctx: &mut Ctx<'_, Tiga>, to: NodeId, msg: Msg) {
        if let Some(now) = self.outbox.after_last(OnDurable::Send(to, msg)) {
            self.on_durable(ctx, now);
        }
    }

    /// Appends up to `upto` are durable: what waited for them goes.
    fn persisted(&mut self, ctx: &mut Ctx<'_, Tiga>, upto: Lsn) {
        while let Some(freed) = self.outbox.next_freed(upto) {
            self.on_durable(ctx, freed);
        }
    }
}

/// Most resubmissions a confirming leader keeps to answer once its view is
/// confirmed: about what a view change's coordinators have in flight.
const DEFERRED_ANSWERS_MAX: usize = 65_536;

pub struct Server {
    core: Core,
    // §3.2-3.3
    pq: TxnQueue,
    /// Followers: transactions that arrived too late, awaiting the leader's
    /// order (§3.2) — which gives their timestamp too.
    held: BTreeMap<TxnId, Arc<TxnBody>>,
    /// rMap and wMap (§3.2).
    conflicts: ConflictMaps,
    /// The armed release timer.
    release_armed: Option<ReleaseTimer>,
    /// The release pass's list of due transactions, kept between passes so
    /// that a pass allocates none.
    release_scratch: Vec<TxnId>,
    /// A confirming leader: resubmissions of its log's transactions, with
    /// their one-way delays, answered once the view is confirmed (at most
    /// `DEFERRED_ANSWERS_MAX`; their coordinators retry the rest).
    deferred_answers: BTreeMap<TxnId, Option<u64>>,
    hashes: KeyHashes,
    /// Execution in log order, checkpoints and the at-most-once memory
    /// (checkpoint.rs).
    executed: Executed,
    /// Leader: optimistic execution in timestamp order, with revocable
    /// versions (§3.3).
    optimistic: Optimistic,
    /// Leaders: timestamp agreement (agreement.rs).
    announcements: super::agreement::Announcements,
    /// Log synchronization: followers' progress, fetched bodies (sync.rs).
    sync: SyncState,
    // recovery (recovery.rs)
    rebuild: super::recovery::Rebuild,
    /// One-way delays to the other shards' servers (§3.8's probe mesh).
    peer_delays: meridian_mechanisms::owd::Delays,
    /// When it last heard from each replica of its shard (reach.rs).
    reach: PeerReach,
}

impl Server {
    pub fn new(topo: Arc<Topology>, shard: ShardId, replica: u32, view: View, cfg: Config) -> Server {
        let n = topo.replicas_per_shard;
        let leaders = view.leaders(n);
        let led = leaders[shard.index()] == replica;
        let core = Core {
            topo,
            shard,
            replica,
            n,
            cfg,
            status: Status::Normal,
            last_normal_view: view.g_view,
            view,
            leaders,
            led,
            log: ShardLog::new(),
            outbox: AfterDurable::new(),
            durable_len: 0,
            confirming: false,
        };
        Server {
            core,
            pq: TxnQueue::default(),
            held: BTreeMap::new(),
            conflicts: ConflictMaps::new(cfg.conflict_window_ns),
            release_armed: None,
            release_scratch: Vec::new(),
            deferred_answers: BTreeMap::new(),
            hashes: KeyHashes::new(),
            executed: Executed::new(),
            optimistic: Optimistic::default(),
            announcements: Default::default(),
            sync: SyncState::new(n),
            rebuild: Default::default(),
            peer_delays: Default::default(),
            reach: PeerReach::new(n),
        }
    }

    pub fn is_leader(&self) -> bool {
        self.core.is_leader()
    }

    pub fn status(&self) -> Status {
        self.core.status
    }

    pub fn view(&self) -> &View {
        &self.core.view
    }

    pub fn log(&self) -> &TigaLog {
        self.core.log.entries()
    }

    /// The shard's data as executed up to the commit-point.
    pub fn state(&self) -> &MvStore {
        self.executed.state()
    }

    /// Entries executed into [`Server::state`].
    pub fn applied(&self) -> u64 {
        self.executed.applied()
    }

    pub fn checkpoint(&self) -> &Checkpoint {
        self.executed.checkpoint()
    }

    pub fn sync_point(&self) -> u64 {
        self.core.log.sync_point()
    }

    pub fn commit_point(&self) -> u64 {
        self.core.log.commit_point()
    }

    pub fn queued(&self) -> usize {
        self.pq.len() + self.held.len()
    }

    // ---- §3.2: submission, conflict detection, timestamp update ----

    fn on_submit(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, m: Submit) {
        let Submit { body, g_view, t, send_clock_ns, low_watermark, .. } = m;
        if !body.shards.contains(&self.core.shard) || body.coordinator != from || body.id.node != from {
            return;
        }
        self.executed.note_watermark(from, low_watermark);
        if self.core.status != Status::Normal || self.executed.folded().stale(body.id) {
            return; // a stale copy: its coordinator is done with it
        }
        let owd_ns = ctx.clock_ns().checked_sub(send_clock_ns);
        let id = body.id;
        if self.core.log.position(id).is_some() || self.executed.folded().contains(id) {
            // At most once (Appendix B): answer a resubmission from the log
            // — not before the view is confirmed, whose log's results may
            // rest on transactions another shard's loss would still doom.
            if self.core.serving() {
                self.resend_fast_reply(ctx, id, owd_ns);
            } else if self.deferred_answers.len() < DEFERRED_ANSWERS_MAX || self.deferred_answers.contains_key(&id) {
                self.deferred_answers.insert(id, owd_ns);
            }
            return;
        }
        if self.pq.contains(id) || self.held.contains_key(&id) || g_view != self.core.view.g_view {
            // Admitted already, or a copy from another view. Within one
            // view every copy of a transaction carries the same timestamp,
            // which leaders only raise (§3.2) and agree on the largest of
            // (§3.5): so what any follower holds is at or below the agreed
            // timestamp — the premise of step ④ (2) taking the largest
            // recovered one (§4). A copy with a later timestamp, held by a
            // follower that missed the agreed one, could make a view change
            // move a transaction past successors that read its writes.
            return;
        }
        self.admit(ctx, body, t, owd_ns);
        self.release(ctx);
    }

    /// Algorithm 1 lines 1-5: accept into the queue, update a late
    /// timestamp at the leader, hold a late one at a follower.
    fn admit(&mut self, ctx: &mut Ctx<'_, Tiga>, body: Arc<TxnBody>, t: u64, owd_ns: Option<u64>) {
        let (reads, writes) = self.core.keys_of(&body);
        let stamp = Stamp { t, id: body.id };
        let bound = self.conflicts.bound(&reads, &writes);
        let mut t = t;
        if bound.is_some_and(|b| b >= stamp) {
            if self.conflicts.key_bound(&reads, &writes).is_none_or(|b| b < stamp) {
                ctx.count("conflict_floor_updates", 1);
            }
            if !self.core.is_leader() {
                self.held.insert(body.id, body);
                return;
            }
            // Only leaders update timestamps: to their clock, and past the
            // conflicting released transaction (clocks may jump back).
            t = ctx.clock_ns().max(bound.expect("checked").t + 1);
            ctx.count("timestamp_updates", 1);
        }
        let multi = body.is_multi_shard();
        let id = body.id;
        let pending = Pending { body, t, state: PState::Waiting, reads, writes, owd_ns, announced_ns: None };
        self.enqueue(pending);
        if multi && self.core.is_leader() {
            // Announced on arrival, not on release: a leader learns every
            // participant's timestamp before its queue blocks on it, so two
            // shards can never each wait for the other's announcement of a
            // transaction the other queues behind its own.
            self.announcements.notify_leaders(&self.core, ctx, &mut self.pq, id, false);
        }
    }

    fn enqueue(&mut self, p: Pending) {
        self.pq.insert(p);
    }

    /// Moves a queued transaction to a later timestamp (§3.5 case 3).
    fn reposition(&mut self, id: TxnId, t: u64) {
        self.pq.reposition(id, t);
    }

    fn dequeue(&mut self, id: TxnId) -> Option<Pending> {
        self.pq.remove(id)
    }

    // ---- §3.3: release by the clock ----

    /// Algorithm 1 lines 6-31: releases every expired transaction with no
    /// conflicting unreleased predecessor, in timestamp order. Those already
    /// released and awaiting agreement block their conflicting successors
    /// through the queue's key counts.
    fn release(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        if !self.core.serving() {
            return;
        }
        let now = ctx.clock_ns();
        // Most passes (one follows every submission) find nothing due yet.
        if self.pq.first_waiting_t().is_some_and(|t| t <= now) {
            self.release_expired(ctx, now);
        }
        self.arm_release(ctx, now);
    }

    /// The release pass proper: every waiting transaction whose timestamp
    /// the clock `now` has reached, in timestamp order, goes unless an
    /// earlier one still waiting conflicts with it.
    fn release_expired(&mut self, ctx: &mut Ctx<'_, Tiga>, now: u64) {
        let mut expired = std::mem::take(&mut self.release_scratch);
        self.pq.expired_waiting(now, &mut expired);
        let mut blocked_r: FxHashSet<Key> = FxHashSet::default();
        let mut blocked_w: FxHashSet<Key> = FxHashSet::default();
        for id in expired.drain(..) {
            let Some(p) = self.pq.get(id).filter(|p| p.state == PState::Waiting) else { continue };
            let conflict = p.reads.iter().any(|k| blocked_w.contains(k))
                || p.writes.iter().any(|k| blocked_w.contains(k) || blocked_r.contains(k))
                || self.pq.blocked_by_agreeing(&p.reads, &p.writes);
            if !conflict {
                if self.core.is_leader() {
                    // How long after its timestamp a transaction is released
                    // (conflicting predecessors, agreement): an observation.
                    ctx.observe("leader_release_lag_us", now.saturating_sub(p.t) / 1_000);
                    self.leader_release(ctx, id);
                } else {
                    self.follower_release(ctx, id);
                }
            }
            // Whatever still waits blocks its conflicting successors.
            if let Some(p) = self.pq.get(id).filter(|p| p.state == PState::Waiting) {
                blocked_r.extend(p.reads.iter().copied());
                blocked_w.extend(p.writes.iter().copied());
            }
        }
        self.release_scratch = expired;
    }

    /// Sets the release timer for the earliest waiting timestamp past
    /// `passed_ns`, the clock reading of the release pass (the event's:
    /// every transaction stamped after it is still waiting).
    fn arm_release(&mut self, ctx: &mut Ctx<'_, Tiga>, passed_ns: u64) {
        let Some(next) = self.pq.next_waiting_after(passed_ns) else { return };
        if let Some(armed) = self.release_armed {
            if armed.at_ns <= next && armed.at_ns > passed_ns {
                return; // an earlier release will re-arm
            }
            ctx.cancel_timer(armed.id);
        }
        let id = ctx.set_timer(next.saturating_sub(ctx.clock_ns()), Timer::Release);
        self.release_armed = Some(ReleaseTimer { at_ns: next, id });
    }

    fn on_release_timer(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        self.release_armed = None;
        self.release(ctx);
    }

    fn follower_release(&mut self, ctx: &mut Ctx<'_, Tiga>, id: TxnId) {
        let p = self.dequeue(id).expect("releasing a queued transaction");
        self.conflicts.released(Stamp { t: p.t, id }, &p.reads, &p.writes);
        let entry = LogEntry { body: p.body.clone(), t: p.t };
        let hash = self.append(ctx, entry, &p.reads, &p.writes);
        self.core.log.set_reply(id, Replied { hash: Some(hash), ..Replied::none(p.t) });
        self.send_fast_reply(ctx, &p.body, p.t, hash, None, p.owd_ns);
    }

    /// A leader releases a waiting transaction: a single-shard one into the
    /// log; a multi-shard one to timestamp agreement (§3.5), executed first
    /// in detective mode (§3.3) and after in preventive mode (§3.8).
    fn leader_release(&mut self, ctx: &mut Ctx<'_, Tiga>, id: TxnId) {
        let p = self.pq.get(id).expect("releasing a queued transaction");
        assert_eq!(p.state, PState::Waiting, "released twice");
        if !p.body.is_multi_shard() {
            return self.execute_and_finalize(ctx, id);
        }
        match self.core.view.mode {
            Mode::Detective => {
                let (hash, result) = self.execute(ctx, id);
                // The optimistic reply is a vote: durable before it leaves,
                // so that a restarted leader still counts in recovery.
                let p = self.pq.get(id).expect("still queued");
                let (body, t, owd_ns) = (p.body.clone(), p.t, p.owd_ns);
                self.core.persist(ctx, Record::Tentative(LogEntry { body: body.clone(), t }));
                self.send_fast_reply(ctx, &body, t, hash, Some(result.clone()), owd_ns);
                self.pq.set_state(id, PState::Executed { hash, result });
            }
            Mode::Preventive => {
                // Algorithm 2 lines 14-16: a released transaction enters the
                // conflict maps at once, before agreement executes it, so a
                // conflicting late arrival is re-stamped behind it rather
                // than queued (and logged) ahead of it below its timestamp.
                let (t, reads, writes) = (p.t, p.reads.clone(), p.writes.clone());
                self.conflicts.released(Stamp { t, id }, &reads, &writes);
                self.pq.set_state(id, PState::Notified);
            }
        }
        self.announcements.notify_leaders(&self.core, ctx, &mut self.pq, id, true);
        self.check_agreement(ctx, id);
    }

    /// Optimistic execution at the leader (§3.3): the piece runs against the
    /// latest versions and its writes become revocable versions. Returns the
    /// fast-reply hash (the log's as if the transaction were appended at its
    /// timestamp) and the results; the caller sends the reply once its vote
    /// is durable.
    fn execute(&mut self, _ctx: &mut Ctx<'_, Tiga>, id: TxnId) -> (u128, Vec<OpResult>) {
        // Fields borrowed apart: the queued transaction's keys serve the
        // conflict maps and the hash without copies.
        let p = self.pq.get(id).expect("executing a queued transaction");
        let results = self.optimistic.execute(id, &p.body.program, self.core.shard, &self.core.topo);
        self.conflicts.released(Stamp { t: p.t, id }, &p.reads, &p.writes);
        let entry = LogEntry { body: p.body.clone(), t: p.t };
        let hash = self.hashes.digest_with(&entry, &p.reads, &p.writes);
        (hash, results)
    }

    /// Executes a transaction that needs no (more) agreement, appends it to
    /// the log and replies: the reply leaves once the entry is durable.
    fn execute_and_finalize(&mut self, ctx: &mut Ctx<'_, Tiga>, id: TxnId) {
        let (hash, result) = self.execute(ctx, id);
        self.finalize(ctx, id, hash, result);
    }

    /// Undoes an optimistic execution (§3.5 case 3); never visible to
    /// clients, since conflicting successors wait behind it.
    fn revoke(&mut self, ctx: &mut Ctx<'_, Tiga>, id: TxnId) {
        self.optimistic.revoke(id);
        ctx.count("rollbacks", 1);
    }

    /// Agreement done (or not needed): the leader releases the transaction
    /// into its log (Algorithm 1 lines 24-25). Unless it replied at its
    /// optimistic execution (detective mode), the fast reply goes out now,
    /// behind the log append.
    fn finalize(&mut self, ctx: &mut Ctx<'_, Tiga>, id: TxnId, hash: u128, result: Vec<OpResult>) {
        let replied = matches!(self.pq.get(id).map(|p| &p.state), Some(PState::Executed { .. }));
        let p = self.dequeue(id).expect("finalizing a queued transaction");
        self.optimistic.keep(id);
        self.announcements.forget(id);
        let entry = LogEntry { body: p.body.clone(), t: p.t };
        self.append(ctx, entry, &p.reads, &p.writes);
        if !replied {
            self.send_fast_reply(ctx, &p.body, p.t, hash, Some(result.clone()), p.owd_ns);
        }
        let led_view = Some(self.core.view.g_view);
        self.core.log.set_reply(id, Replied { t: p.t, hash: Some(hash), result: Some(result), led_view });
        self.core.log.sync_to(self.core.log.len());
        self.core.log_length_once_durable(ctx);
    }

    /// Appends to the log durably and folds the entry into the key hashes;
    /// returns the fast-reply hash for it. `reads` and `writes` are the
    /// entry's declared keys here (`Core::keys_of`).
    fn append(&mut self, ctx: &mut Ctx<'_, Tiga>, entry: LogEntry, reads: &[Key], writes: &[Key]) -> u128 {
        let hash = self.hashes.toggle_digest(&entry, reads, writes);
        let pos = self.core.log.push(entry.clone());
        self.core.persist(ctx, Record::Log { pos, entries: smallvec::smallvec![entry] });
        hash
    }

    /// A fast reply (§3.4) to the transaction's coordinator, once everything
    /// it reports is durable.
    fn send_fast_reply(
        &mut self,
        ctx: &mut Ctx<'_, Tiga>,
        body: &TxnBody,
        t: u64,
        hash: u128,
        result: Option<Vec<OpResult>>,
        owd_ns: Option<u64>,
    ) {
        ctx.count(if self.core.is_leader() { "fast_replies_leader" } else { "fast_replies_follower" }, 1);
        let msg = self.fast_reply(body.id, t, hash, result, owd_ns);
        self.core.send_durable(ctx, body.coordinator, msg);
    }

    /// This server's fast reply (§3.4) for `id` released at `t`.
    fn fast_reply(&self, id: TxnId, t: u64, hash: u128, result: Option<Vec<OpResult>>, owd_ns: Option<u64>) -> Msg {
        let (shard, g_view, l_view) = (self.core.shard, self.core.view.g_view, self.core.view.l_view(self.core.shard));
        Msg::FastReply(Box::new(FastReply { id, shard, g_view, l_view, t, hash, result, owd_ns }))
    }

    fn resend_fast_reply(&mut self, ctx: &mut Ctx<'_, Tiga>, id: TxnId, owd_ns: Option<u64>) {
        let leader = self.core.is_leader();
        let (t, hash, result, coordinator) = if let Some(d) = self.executed.folded().get(id) {
            (d.t, d.hash, d.result.clone().filter(|_| leader), id.node)
        } else {
            let (Some(r), Some(e)) = (self.core.log.reply(id), self.core.log.entry_of(id)) else { return };
            (r.t, r.hash.unwrap_or(NO_HASH), r.result.clone().filter(|_| leader), e.body.coordinator)
        };
        if leader && result.is_none() {
            return; // not executed yet: the reply comes with the execution
        }
        let msg = self.fast_reply(id, t, hash, result, owd_ns);
        self.core.send_durable(ctx, coordinator, msg);
    }

    /// Work every event ends with: push new log entries to followers,
    /// execute what became committed (and checkpoint when due). The
    /// dispatchers run it once after every message, timer and persistence
    /// event, so no handler can forget it.
    fn after_event(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        if self.core.status != Status::Normal {
            return;
        }
        if self.core.is_leader() {
            self.sync.sync_followers(&mut self.core, ctx, self.executed.checkpoint(), false);
            if self.core.confirming {
                self.confirm_view(ctx);
            }
        }
        self.execute_committed(ctx);
    }
}

impl Server {
    /// A new leader rebuilds its optimistic store: the executed state, then
    /// the rest of its log; the results answer resubmissions of the
    /// recovered transactions.
    fn execute_log_from_state(&mut self) {
        self.optimistic.restart_from(self.executed.state(), self.executed.applied());
        let topo = Arc::clone(&self.core.topo);
        for e in self.core.log.suffix(self.executed.applied()).to_vec() {
            let results = self.optimistic.execute_logged(&e.body.program, self.core.shard, &topo);
            let led_view = Some(self.core.view.g_view);
            self.core.log.set_reply(e.body.id, Replied { t: e.t, hash: None, result: Some(results), led_view });
        }
    }

    /// Every `server_tick_ms`: a leader pushes its log and fetches what it
    /// was told of but lacks (§3.7, Appendix B); a follower reports its
    /// sync-point.
    fn on_tick(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        match self.core.status {
            Status::Normal if self.core.is_leader() => {
                self.sync.leader_tick(&mut self.core, ctx, self.executed.checkpoint());
                self.announcements.fetch_unknown(&self.core, ctx);
            }
            Status::Normal => sync::report_sync(&mut self.core, ctx, Vec::new()),
            Status::ViewChange | Status::Recovering => {}
        }
    }

    /// Every `heartbeat_ms`: liveness and delays to the view manager (§4,
    /// §3.8).
    fn on_heartbeat(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let msg = Msg::Heartbeat {
            g_view: self.core.view.g_view,
            standing: self.standing(ctx),
            delays: self.peer_delays.estimates(50.0),
        };
        for vm in self.core.vm_members() {
            ctx.send(vm, msg.clone());
        }
    }

    /// How this server stands for the view manager: restarted, a leader
    /// cut off from its followers (reach.rs), or fit to lead.
    fn standing(&mut self, ctx: &mut Ctx<'_, Tiga>) -> Standing {
        if self.core.status == Status::Recovering {
            return Standing::Recovering;
        }
        let (me, f, g_view) = (self.core.replica as usize, self.core.f(), self.core.view.g_view);
        // Followers repeat a view-change message every `resend_ns`: a
        // timeout shorter than a few of those would misjudge a long change.
        let timeout_ns = self.core.cfg.leader_timeout_ns.max(3 * self.core.cfg.resend_ns);
        if self.core.is_leader() && self.reach.cut_off(me, f, g_view, ctx.monotonic_ns(), timeout_ns) {
            ctx.count("leaders_cut_off", 1);
            return Standing::CutOff;
        }
        Standing::Serving
    }

    /// Every `resend_ns`: what may have been lost and is still awaited —
    /// announcements and the new view's log at a leader, the view change's
    /// messages, a restarted server's question for the view.
    fn on_resend(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        match self.core.status {
            Status::Normal if self.core.is_leader() => {
                self.announcements.renotify(&self.core, ctx, &mut self.pq);
                self.resend_start_view(ctx);
                if self.core.confirming {
                    self.rebuild.resend_confirmation(&self.core, ctx);
                }
            }
            Status::Normal => {}
            Status::ViewChange => self.resend_view_change(ctx),
            Status::Recovering => {
                for vm in self.core.vm_members() {
                    ctx.send(vm, Msg::GetView);
                }
            }
        }
    }

    /// §3.8: delays to every server of the other shards (half the measured
    /// round trip), which the view manager learns from heartbeats.
    fn probe_other_shards(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let send_clock_ns = ctx.clock_ns();
        for s in (0..self.core.topo.shards).map(ShardId).filter(|s| *s != self.core.shard) {
            for peer in self.core.topo.replicas(s).to_vec() {
                ctx.send(peer, Msg::Probe { send_clock_ns, low_watermark: 0 });
            }
        }
    }
}

/// Execution, checkpoints and snapshots (§4): the server sequences its
/// `Executed` state, its log and what is derived from the log.
impl Server {
    /// Executes the log in order up to the commit-point, then checkpoints if
    /// enough has accumulated.
    fn execute_committed(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let upto = self.core.log.commit_point().min(self.core.log.sync_point()).min(self.core.log.len());
        // Runs after every event; most find nothing newly committed.
        if self.executed.applied() < upto {
            let (g_view, shard) = (self.core.view.g_view, self.core.shard);
            self.executed.execute_upto(ctx, &mut self.core.log, upto, g_view, shard, &self.core.topo);
        }
        if self.executed.checkpoint_due(self.core.log.base(), &self.core.cfg) {
            self.take_checkpoint(ctx);
        }
    }

    /// Folds every executed entry into a new checkpoint and compacts the
    /// durable log into a snapshot.
    fn take_checkpoint(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let upto = self.executed.applied();
        let folded = self.core.log.fold_to(upto);
        let now = ctx.clock_ns();
        self.executed.fold(now, folded, self.core.shard, &self.core.topo, self.core.cfg.settled_retention_ns);
        ctx.count("checkpoints", 1);
        self.persist_snapshot(ctx);
    }

    /// Compacts the durable log into one snapshot of this server. The
    /// snapshot stands for every record up to an append made just before
    /// it (after a restart this server knows no earlier LSN, and records it
    /// recovered must not outlive the snapshot), and another append follows
    /// it: replies sent behind that one (through `send_durable`) leave only
    /// once the snapshot is durable.
    fn persist_snapshot(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let covered = self.core.persist(ctx, Record::SyncPoint(self.core.log.sync_point()));
        let tentative: Vec<LogEntry> = self
            .pq
            .earliest(usize::MAX, |p| matches!(p.state, PState::Executed { .. }))
            .into_iter()
            .map(|p| LogEntry { body: p.body.clone(), t: p.t })
            .collect();
        let snap = Snapshot {
            checkpoint: Arc::clone(self.executed.checkpoint()),
            log: self.core.log.all().to_vec(),
            sync_point: self.core.log.sync_point(),
            commit_point: self.core.log.commit_point(),
            view: self.core.view.clone(),
            last_normal_view: self.core.last_normal_view,
            led: self.core.led,
            tentative,
        };
        ctx.compact(covered, Record::Snapshot(Arc::new(snap)));
        self.core.persist(ctx, Record::SyncPoint(self.core.log.sync_point()));
    }

    /// Restart: the snapshot's server, before the records that follow it
    /// (its log and points the caller restores with the records).
    fn restore_snapshot(&mut self, snap: &Snapshot) {
        self.executed.install(Arc::clone(&snap.checkpoint));
        self.core.set_view(snap.view.clone());
        self.core.last_normal_view = snap.last_normal_view;
        self.core.led = snap.led;
    }

    /// Takes a checkpoint from another server of the shard that folded past
    /// what this one can execute. The entries this log holds beyond what it
    /// had synced stay, after the checkpoint, as unsynced votes (unless they
    /// are folded in it); everything else is covered by it.
    fn adopt_checkpoint(&mut self, ctx: &mut Ctx<'_, Tiga>, cp: Arc<Checkpoint>) {
        assert!(cp.upto > self.core.log.base(), "adopting an older checkpoint");
        let synced = self.core.log.sync_point();
        // The adopted log is synced up to the checkpoint only, and nothing
        // is committed past what is synced: a commit-point this server had
        // learned beyond it comes back with its leader's next log sync
        // (execution never passed the sync-point anyway).
        let committed = cp.upto;
        self.executed.install(Arc::clone(&cp));
        let old = &self.core.log;
        let keep: Vec<LogEntry> = old
            .all()
            .iter()
            .enumerate()
            .filter(|(i, e)| {
                let pos = old.base() + *i as u64;
                (pos >= synced || pos >= cp.upto) && !self.executed.folded().contains(e.body.id)
            })
            .map(|(_, e)| e.clone())
            .collect();
        self.core.log.reset(TigaLog::from_base(cp.upto, keep), cp.upto, committed);
        self.rebuild_derived();
        ctx.count("checkpoints_installed", 1);
        self.persist_snapshot(ctx);
    }

    /// Key hashes and conflict maps from the checkpoint and the held log
    /// (and, at a leader, what it has released but not logged).
    fn rebuild_derived(&mut self) {
        let cp = Arc::clone(self.executed.checkpoint());
        self.hashes = KeyHashes::from_folded(&cp.hashes);
        self.conflicts = ConflictMaps::from_checkpoint(&cp, self.core.cfg.conflict_window_ns);
        let topo = Arc::clone(&self.core.topo);
        for e in self.core.log.all().to_vec() {
            self.hashes.toggle(&e, self.core.shard, |k| topo.shard_of(k));
            let (reads, writes) = self.core.keys_of(&e.body);
            self.conflicts.released(e.stamp(), &reads, &writes);
        }
    }

    /// A checkpoint arrives: a follower behind its leader's base installs
    /// it; a new leader waiting for it during a view change goes on.
    fn on_checkpoint_state(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, g_view: u64, cp: Arc<Checkpoint>) {
        if g_view != self.core.view.g_view || cp.upto <= self.core.log.base() {
            return;
        }
        if self.core.status == Status::ViewChange && self.core.is_leader() {
            return self.on_fetched_checkpoint(ctx, from, cp);
        }
        let from_leader = from == self.core.leader_node(ctx, self.core.shard);
        if self.core.status == Status::Normal
            && !self.core.is_leader()
            && from_leader
            && cp.upto > self.core.log.sync_point()
        {
            self.adopt_checkpoint(ctx, cp);
            super::sync::report_sync(&mut self.core, ctx, Vec::new());
        }
    }
}

/// View change and rejoin (§4; Algorithms 5 and 6): the transitions that
/// replace the server's state. The new leader's rebuild is
/// `recovery::Rebuild`'s; the server sequences it with the other concerns.
impl Server {
    // ---- Algorithm 5 lines 1-15: a newer view arrives ----

    fn on_current_view(&mut self, ctx: &mut Ctx<'_, Tiga>, view: View) {
        if view.g_view < self.core.view.g_view
            || (view.g_view == self.core.view.g_view && self.core.status != Status::Recovering)
        {
            return;
        }
        if self.core.status == Status::Recovering && view.g_view == self.core.view.g_view {
            // Algorithm 6: still the view it restarted in; ask its leader
            // for the log (a restarted leader is replaced by a new view).
            return recovery::send_view_change(&mut self.core, ctx);
        }
        // A newer view: take part in its change like any server — its
        // durable log holds every vote it gave — or lead it.
        self.enter_view_change(ctx, view);
    }

    fn enter_view_change(&mut self, ctx: &mut Ctx<'_, Tiga>, view: View) {
        if self.core.status == Status::Normal {
            self.record_own_sync_point(ctx);
            self.flush_queue_into_log(ctx);
        }
        self.core.status = Status::ViewChange;
        self.core.confirming = false;
        self.core.set_view(view);
        self.rebuild.restart();
        self.persist_view(ctx);
        recovery::send_view_change(&mut self.core, ctx);
    }

    /// A leader records no sync-point with each append: restarted, its log
    /// counts as synced to its end (`on_start`). Once entries join it
    /// unreleased, past the sync-point — its queue at a view change, its
    /// optimistic executions at a restart — that stops: the sync-point is
    /// recorded and the log no longer counts as the leader's own.
    /// Otherwise a leader restarted after that would report those entries
    /// as synced, and the next view change would keep them in part (a) —
    /// as if committed — at timestamps the other shards may have replaced
    /// meanwhile (one raised it, step ④ (1)), or above entries of theirs.
    fn record_own_sync_point(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        if self.core.led {
            debug_assert_eq!(self.core.log.sync_point(), self.core.log.len(), "a leader's log is synced to its end");
            self.core.persist(ctx, Record::SyncPoint(self.core.log.sync_point()));
            self.core.led = false;
            self.persist_view(ctx);
        }
    }

    /// Appends entries this server holds unreleased (votes it gave) past
    /// the sync-point, durably.
    fn append_unsynced(&mut self, ctx: &mut Ctx<'_, Tiga>, entries: Vec<LogEntry>) {
        assert!(!self.core.led, "a leader's log is synced to its end: record its sync-point first");
        if entries.is_empty() {
            return;
        }
        let pos = self.core.log.len();
        for e in &entries {
            self.core.log.push(e.clone());
        }
        self.core.persist(ctx, Record::Log { pos, entries: LoggedEntries::from_vec(entries) });
    }

    /// Algorithm 5 lines 7-9: the queue's transactions join the log in
    /// timestamp order; optimistic executions are dropped with the store,
    /// which the new log rebuilds.
    fn flush_queue_into_log(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let pending: Vec<LogEntry> = self.pq.drain().into_iter().map(|p| LogEntry { body: p.body, t: p.t }).collect();
        self.forget_view_work();
        self.append_unsynced(ctx, pending);
    }

    /// What a view's leader and followers hold only for that view: the
    /// queue, held and fetched transactions, announcements, optimistic
    /// executions. A view change drops it when it starts and again when
    /// the new view's log is installed: this is the one place it is reset.
    fn forget_view_work(&mut self) {
        self.pq = TxnQueue::default();
        self.held.clear();
        self.sync.forget_fetched();
        self.announcements.clear();
        self.optimistic.forget_executions();
        self.deferred_answers.clear();
    }

    fn persist_view(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let record = Record::View {
            view: self.core.view.clone(),
            last_normal_view: self.core.last_normal_view,
            led: self.core.led,
        };
        self.core.persist(ctx, record);
    }

    /// Every `resend_ns` during a view change (see `Rebuild::resend`).
    fn resend_view_change(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let finished = self.rebuild.resend(&mut self.core, ctx, &self.executed);
        self.finish_view_change(ctx, finished);
    }

    /// Algorithm 5 lines 16-32: a server's log for the new leader.
    fn on_view_change(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, m: ViewChange) {
        let (g_view, reported, c) = recovery::contribution(m);
        if let Some(r) = ctx.topology().replicas(self.core.shard).iter().position(|n| *n == from) {
            self.sync.reported(r, reported);
        }
        if g_view > self.core.view.g_view {
            // The sender knows a newer view than this server: ask for it.
            for vm in self.core.vm_members() {
                ctx.send(vm, Msg::GetView);
            }
            return;
        }
        if g_view < self.core.view.g_view || !self.core.is_leader() {
            return;
        }
        match self.core.status {
            Status::Normal => self.send_start_view(ctx, from),
            Status::Recovering => {}
            Status::ViewChange => {
                let finished = self.rebuild.on_contribution(&self.core, ctx, from, c, &self.executed);
                self.finish_view_change(ctx, finished);
            }
        }
    }

    /// §4, checkpoints in a view change: the checkpoint the new leader
    /// asked for arrives.
    fn on_fetched_checkpoint(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, cp: Arc<Checkpoint>) {
        if !self.rebuild.accept_checkpoint(from) {
            return;
        }
        self.adopt_checkpoint(ctx, cp);
        let finished = self.rebuild.try_rebuild(&self.core, ctx, &self.executed);
        self.finish_view_change(ctx, finished);
    }

    /// Algorithm 5 lines 64-78 (step ④): another new leader's verification.
    fn on_ts_verify(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, m: TsVerify) {
        let finished = self.rebuild.on_ts_verify(&self.core, ctx, from, m, &self.executed);
        self.finish_view_change(ctx, finished);
    }

    /// Step ⑤: the rebuilt log, if the change is done, becomes this
    /// leader's; it hands it to the followers, and executes it once the
    /// view is confirmed (round 3, `confirm_view`).
    fn finish_view_change(&mut self, ctx: &mut Ctx<'_, Tiga>, finished: Finished) {
        let Some(entries) = finished else { return };
        self.install_log(ctx, entries, Vec::new(), true);
        self.core.confirming = true;
        self.rebuild.await_confirmation(self.core.log.len());
        ctx.count("view_change_completions", 1);
        let followers: Vec<NodeId> =
            self.core.topo.replicas(self.core.shard).iter().copied().filter(|n| *n != ctx.me()).collect();
        for node in followers {
            self.send_start_view(ctx, node);
        }
    }

    /// Round 3 (recovery.rs): once `f + 1` servers hold the installed log
    /// durably, the other shards hear it; once they all said the same,
    /// this leader's commit-point may rise; it answers the resubmissions it
    /// kept and releases what it admitted meanwhile.
    fn confirm_view(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let durable_point = self.sync.durable_point(&self.core);
        if self.rebuild.confirm(&self.core, ctx, durable_point) {
            self.core.confirming = false;
            ctx.count("view_confirmations", 1);
            self.sync.advance_commit_point(&mut self.core);
            for (id, owd_ns) in std::mem::take(&mut self.deferred_answers) {
                self.resend_fast_reply(ctx, id, owd_ns);
            }
            self.release(ctx); // what it admitted meanwhile
        }
    }

    /// The log from this leader's base, with its checkpoint unless the
    /// follower said it folded or committed as far (and so holds the same
    /// entries below the base).
    fn send_start_view(&mut self, ctx: &mut Ctx<'_, Tiga>, to: NodeId) {
        let base = self.core.log.base();
        let r = ctx.topology().replicas(self.core.shard).iter().position(|n| *n == to);
        let covered = r.is_some_and(|r| self.sync.covers(r, base));
        let checkpoint = (base > 0 && !covered).then(|| Arc::clone(self.executed.checkpoint()));
        let msg = Msg::StartView(StartView {
            g_view: self.core.view.g_view,
            l_view: self.core.view.l_view(self.core.shard),
            base,
            log: Arc::new(self.core.log.all().to_vec()),
            checkpoint,
        });
        self.core.send_durable(ctx, to, msg);
    }

    /// Algorithm 5 lines 37-43 (and Algorithm 6 lines 36-43). Positions
    /// below the leader's base come from this server's checkpoint and
    /// committed log, or from the leader's checkpoint.
    fn on_start_view(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, m: StartView) {
        let StartView { g_view, l_view, base, log, checkpoint, .. } = m;
        if g_view != self.core.view.g_view || l_view != self.core.view.l_view(self.core.shard) || self.core.is_leader()
        {
            return;
        }
        if from != self.core.leader_node(ctx, self.core.shard) {
            return;
        }
        if self.core.status == Status::Normal {
            return sync::report_sync(&mut self.core, ctx, Vec::new()); // a re-send: acknowledge
        }
        let rejoining_own_view = self.core.status == Status::Recovering && self.core.last_normal_view == g_view;
        if let Some(cp) = checkpoint.filter(|cp| cp.upto > self.core.log.base() && cp.upto == base) {
            self.adopt_checkpoint(ctx, cp);
        }
        let own_base = self.core.log.base();
        let entries: Vec<LogEntry> = if own_base >= base && own_base - base <= log.len() as u64 {
            log[(own_base - base) as usize..].to_vec()
        } else if own_base < base && self.core.log.commit_point() >= base {
            self.core.log.range(own_base, base).iter().chain(log.iter()).cloned().collect()
        } else {
            // It cannot fill the positions below the leader's base: tell the
            // leader (which then sends its checkpoint).
            return recovery::send_view_change(&mut self.core, ctx);
        };
        let votes = if rejoining_own_view { self.own_votes_beyond(&entries) } else { Vec::new() };
        self.install_log(ctx, entries, votes, false);
        sync::report_sync(&mut self.core, ctx, Vec::new());
    }

    /// A follower rejoining the view it restarted in (Algorithm 6) keeps
    /// the votes it gave in that view: the entries past its sync-point
    /// that its leader's log lacks (and that no checkpoint folded, even
    /// one that has forgotten them since). The
    /// paper's rejoin replaces the whole log, for servers that forget
    /// everything in a crash (Appendix B leaves the messages they sent
    /// before it, "stray messages", to crash vectors). Here every vote was
    /// durable before it left, and a coordinator may have counted it in a
    /// fast quorum: dropped, the next view change could find fewer than
    /// `⌈f/2⌉ + 1` holders of a committed transaction and lose it.
    fn own_votes_beyond(&self, leader_log: &[LogEntry]) -> Vec<LogEntry> {
        let in_leader_log: FxHashSet<TxnId> = leader_log.iter().map(|e| e.body.id).collect();
        let log = &self.core.log;
        log.suffix(log.sync_point())
            .iter()
            .filter(|e| !in_leader_log.contains(&e.body.id))
            .filter(|e| !self.executed.folded().contains(e.body.id) && !self.executed.folded().stale(e.body.id))
            .cloned()
            .collect()
    }

    /// Replaces the log (from this server's base) and everything derived
    /// from it with the view's log, synced, followed by this follower's
    /// `votes` past its sync-point; the server is normal in the current
    /// view afterwards, and its durable log is one snapshot of it.
    fn install_log(&mut self, ctx: &mut Ctx<'_, Tiga>, entries: Vec<LogEntry>, votes: Vec<LogEntry>, leading: bool) {
        assert!(!leading || votes.is_empty(), "a leader's log is its own");
        self.forget_view_work();
        let mut log = TigaLog::from_base(self.core.log.base(), entries);
        assert!(self.executed.applied() <= log.len(), "executed past the new log");
        self.assert_executed_in_place(&log);
        let (synced, committed) = (log.len(), self.core.log.commit_point());
        for v in votes {
            log.push(v);
        }
        self.core.log.reset(log, synced, committed);
        self.rebuild_derived();
        self.core.status = Status::Normal;
        self.core.last_normal_view = self.core.view.g_view;
        self.core.led = leading;
        self.sync.restart_at(synced);
        self.core.forget_durable_len();
        self.persist_snapshot(ctx);
        if leading {
            self.execute_log_from_state();
            self.core.log_length_once_durable(ctx);
        } else {
            self.optimistic.drop_store();
        }
    }

    /// Committed entries never move (the view change's promise): every
    /// entry this server executed keeps its position in the installed log.
    fn assert_executed_in_place(&self, installed: &TigaLog) {
        let (base, applied) = (self.core.log.base(), self.executed.applied());
        let old = self.core.log.range(base, applied).iter().map(|e| e.body.id);
        let new = installed.range(base, applied).iter().map(|e| e.body.id);
        if let Some((pos, (was, now))) = old.zip(new).enumerate().find(|(_, (a, b))| a != b) {
            panic!(
                "the installed log moves executed entry {was:?} at position {}: {now:?} is there now",
                base + pos as u64
            );
        }
    }

    /// Leader, every tick: followers that never acknowledged the current
    /// view get its log again.
    fn resend_start_view(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let lagging: Vec<NodeId> = self
            .core
            .topo
            .replicas(self.core.shard)
            .iter()
            .enumerate()
            .filter(|(r, _)| *r as u32 != self.core.replica && !self.sync.in_view(*r))
            .map(|(_, n)| *n)
            .collect();
        for node in lagging {
            self.send_start_view(ctx, node);
        }
    }
}

/// Timestamp agreement (§3.5-3.6): the server applies what
/// `agreement::Announcements` decides to its queue and log.
impl Server {
    /// §3.5-3.6 (Algorithm 2): another participant leader's
    /// announcement; case 3 moves the transaction here, cases 1 and 2 may
    /// release it into the log.
    fn on_notify(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, m: TsNotify) {
        let id = m.id;
        match self.announcements.on_notify(&self.core, ctx, from, m, &self.pq, self.executed.folded()) {
            Announced::Nothing => return,
            Announced::MoveTo { t } => {
                // Case 3: this leader used a smaller timestamp.
                if matches!(self.pq.get(id).map(|p| &p.state), Some(PState::Executed { .. })) {
                    self.revoke(ctx, id);
                }
                self.reposition(id, t);
                ctx.count("timestamp_updates", 1);
            }
            Announced::Check => self.check_agreement(ctx, id),
        }
        // Either way conflicting successors may now be free to go.
        self.release(ctx);
    }

    /// Releases `id` into the log if every participant announced the
    /// timestamp this leader holds (cases 1 and 2), executing it first in
    /// preventive mode.
    fn check_agreement(&mut self, ctx: &mut Ctx<'_, Tiga>, id: TxnId) {
        let Some(p) = self.pq.get(id) else { return };
        if p.state == PState::Waiting || !self.announcements.agreed(p, self.core.cfg.second_round) {
            return;
        }
        match p.state.clone() {
            PState::Executed { hash, result } => self.finalize(ctx, id, hash, result),
            PState::Notified => self.execute_and_finalize(ctx, id),
            PState::Waiting => unreachable!("checked above"),
        }
    }

    /// Appendix B (coordinator failure): another leader hands over a
    /// transaction this one was notified of but never received; or this
    /// shard's leader passes on one it fetched so.
    fn on_txn_found(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, body: Arc<TxnBody>, t: u64) {
        let id = body.id;
        let known = self.core.log.position(id).is_some() || self.executed.folded().contains(id) || self.pq.contains(id);
        if !body.shards.contains(&self.core.shard) || known || self.core.status != Status::Normal {
            return;
        }
        if !self.core.is_leader() && from != self.core.leader_node(ctx, self.core.shard) {
            return;
        }
        self.announcements.body_arrived(id);
        self.held.remove(&id);
        ctx.count("transactions_fetched", 1);
        self.admit(ctx, body.clone(), t, None);
        if self.core.is_leader() {
            // Its coordinator's copies reached no server of this shard but
            // this leader, which is about to announce it: the followers
            // hold it too, at this leader's timestamp (at or below the
            // agreed one), so that a view change that loses this leader
            // still finds it here (§4 step ③ (b)) rather than taking it
            // for one no leader here ever ordered (recovery.rs).
            if let Some(t_here) = self.pq.get(id).map(|p| p.t) {
                let me = ctx.me();
                for node in ctx.topology().replicas(self.core.shard).to_vec() {
                    if node != me {
                        ctx.send(node, Msg::TxnFound { body: body.clone(), t: t_here });
                    }
                }
            }
        }
        self.release(ctx);
    }
}

/// Log synchronization at a follower (§3.7): placing the leader's entries
/// changes the queue, the held transactions, the key hashes and the
/// conflict maps, which are the server's.
impl Server {
    /// Follower: make the log agree with the leader's from `from_pos` on;
    /// returns the ids whose bodies it lacks (the server executes what
    /// became committed, then asks for them at once).
    fn on_log_sync(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, m: LogSync) -> Vec<TxnId> {
        let LogSync { l_view, from_pos, entries, commit_point, .. } = m;
        if self.core.status != Status::Normal
            || self.core.is_leader()
            || l_view != self.core.view.l_view(self.core.shard)
        {
            return Vec::new();
        }
        if from != self.core.leader_node(ctx, self.core.shard) {
            return Vec::new();
        }
        let mut missing = Vec::new();
        if from_pos <= self.core.log.sync_point() {
            let skip = (self.core.log.sync_point() - from_pos) as usize;
            let wanted: Vec<(TxnId, u64)> = entries.into_iter().skip(skip).collect();
            missing = self.adopt(ctx, wanted);
        }
        let synced = self.core.log.sync_point();
        self.core.log.commit_to(commit_point.min(synced));
        missing
    }

    /// Makes the log agree with the leader's entries from the sync-point on
    /// (as far as their bodies are known); returns the ids whose bodies this
    /// follower lacks. In the common case each entry is already in place
    /// and only the sync-point moves.
    fn adopt(&mut self, ctx: &mut Ctx<'_, Tiga>, wanted: Vec<(TxnId, u64)>) -> Vec<TxnId> {
        let start = self.core.log.sync_point();
        let mut changed_from = u64::MAX;
        let mut missing = Vec::new();
        let mut wanted = wanted.into_iter();
        for (id, t) in wanted.by_ref() {
            let pos = self.core.log.sync_point();
            if self.core.log.get(pos).is_some_and(|e| e.body.id == id && e.t == t) {
                self.core.log.sync_to(pos + 1);
                continue;
            }
            let Some(body) = self.find_body(id) else {
                missing.push(id);
                break; // later entries must wait: positions are contiguous
            };
            self.place(pos, LogEntry { body, t });
            changed_from = changed_from.min(pos);
            self.core.log.sync_to(pos + 1);
        }
        // Ask for every body the rest of the batch lacks at once: one
        // round trip instead of one per missing entry (a follower that
        // missed submissions during a view change otherwise crawls back
        // one entry per round trip while the slow path waits on it).
        missing.extend(wanted.map(|(id, _)| id).filter(|id| self.find_body(*id).is_none()).take(SYNC_BATCH_MAX));
        if changed_from != u64::MAX {
            let suffix = self.core.log.suffix(changed_from).to_vec();
            self.core.persist(ctx, Record::Log { pos: changed_from, entries: LoggedEntries::from_vec(suffix) });
        }
        if self.core.log.sync_point() > start {
            self.core.persist(ctx, Record::SyncPoint(self.core.log.sync_point()));
            ctx.count("slow_syncs", self.core.log.sync_point() - start);
        }
        missing
    }

    /// Puts the leader's entry at `pos`: taken from later in this log (with
    /// the leader's timestamp) or from the queue, hashes and conflict maps
    /// following.
    fn place(&mut self, pos: u64, entry: LogEntry) {
        let topo = Arc::clone(&self.core.topo);
        let shard_of = |k| topo.shard_of(k);
        let at = self.core.log.position(entry.body.id);
        if let Some(q) = at {
            debug_assert!(q >= pos, "synced entries do not move");
            let old = self.core.log.get(q).expect("indexed entries are held");
            self.hashes.toggle(old, self.core.shard, shard_of);
        }
        self.forget_pending(entry.body.id);
        let (reads, writes) = self.core.keys_of(&entry.body);
        self.hashes.toggle_declared(&entry, &reads, &writes);
        self.conflicts.released(entry.stamp(), &reads, &writes);
        match at {
            Some(q) => {
                self.core.log.move_unsynced(q, pos, entry);
            }
            None => self.core.log.insert_unsynced(pos, entry),
        }
    }

    fn find_body(&self, id: TxnId) -> Option<Arc<TxnBody>> {
        if let Some(e) = self.core.log.entry_of(id) {
            return Some(e.body.clone());
        }
        if let Some(p) = self.pq.get(id) {
            return Some(p.body.clone());
        }
        self.held.get(&id).cloned().or_else(|| self.sync.fetched(id).cloned())
    }

    /// The transaction is placed by the leader: it no longer waits here.
    fn forget_pending(&mut self, id: TxnId) {
        self.dequeue(id);
        self.held.remove(&id);
        self.sync.placed(id);
    }
}

impl Process<Tiga> for Server {
    /// Between events: the log's points in order (`base ≤ applied ≤
    /// commit-point ≤ sync-point ≤ length`), the queue holds only
    /// transactions not yet in the log, only a leader has an optimistic
    /// store, optimistic executions or agreement in progress, only a
    /// follower holds late arrivals, and messages wait only for appends not
    /// yet durable. Each check is bounded (`CHECKED_MAX` entries) or O(1).
    fn check_invariants(&self) {
        let applied = self.executed.applied();
        assert!(self.core.log.base() <= applied, "entries folded before they were applied");
        assert!(applied <= self.core.log.commit_point(), "applied past the commit-point");
        assert!(self.core.log.commit_point() <= self.core.log.sync_point(), "committed past the sync-point");
        assert!(self.core.log.sync_point() <= self.core.log.len(), "the sync-point past the log's end");
        assert_eq!(self.core.leaders, self.core.view.leaders(self.core.n), "leaders of another view");
        for p in self.pq.values().take(CHECKED_MAX) {
            assert!(self.core.log.position(p.body.id).is_none(), "{:?} is both queued and in the log", p.body.id);
        }
        // The newest entries, which the per-coordinator index (`SeqIndex`)
        // places last, are found where they stand.
        let log = self.core.log.entries();
        for (i, e) in log.all().iter().enumerate().rev().take(CHECKED_MAX) {
            assert_eq!(log.position(e.body.id), Some(log.base() + i as u64), "{:?} logged but not found", e.body.id);
        }
        if self.core.status == Status::Normal && !self.core.is_leader() {
            // Leader-only state: a view change clears it, and a follower
            // never builds it.
            assert_eq!(self.optimistic.executions(), 0, "a follower holds optimistic executions");
            assert_eq!(self.optimistic.keys(), 0, "a follower holds an optimistic store");
            assert_eq!(self.announcements.len(), 0, "a follower takes part in timestamp agreement");
            assert!(self.pq.values().take(CHECKED_MAX).all(|p| p.state == PState::Waiting), "a follower released one");
        }
        if self.core.status == Status::Normal && self.core.is_leader() {
            // Only followers hold late arrivals for their leader's order.
            assert!(self.held.is_empty(), "a leader holds transactions for another's order");
        }
        if self.core.confirming {
            // A new leader releases nothing before its view is confirmed.
            assert!(self.core.status == Status::Normal && self.core.is_leader(), "confirming outside a new view");
            assert!(
                self.pq.values().take(CHECKED_MAX).all(|p| p.state == PState::Waiting),
                "a confirming leader released one"
            );
        }
        self.core.outbox.check_invariants();
    }

    /// See `Process::state_sizes`.
    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("store_keys", self.optimistic.keys());
        out("executed_keys", self.executed.state().keys());
        out("queue", self.pq.len());
        out("held", self.held.len());
        out("fetched", self.sync.fetched_len());
        out("conflict_keys", self.conflicts.len());
        out("log_entries", self.core.log.held());
        out("key_hashes", self.hashes.len());
        out("replied", self.core.log.replies_held());
        out("done", self.executed.folded().len());
        out("watermarks", self.executed.folded().watermarks_len());
        out("undo", self.optimistic.executions());
        out("notes", self.announcements.len());
        out("outbox", self.core.outbox.len());
        out("deferred_answers", self.deferred_answers.len());
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, Tiga>, upto: Lsn) {
        self.core.persisted(ctx, upto);
        if self.core.is_leader() {
            self.sync.advance_commit_point(&mut self.core);
        }
        self.after_event(ctx);
    }

    /// Start or restart. A restarted server rebuilds its log, hashes and
    /// conflict maps from its durable records and stays `Recovering` until
    /// the view manager told it the current view and that view's leader
    /// gave it the log (Algorithm 6).
    fn on_start(&mut self, ctx: &mut Ctx<'_, Tiga>, durable: Vec<Record>) {
        ctx.set_timer(self.core.cfg.server_tick_ns, Timer::ServerTick);
        ctx.set_timer(self.core.cfg.heartbeat_ns, Timer::Heartbeat);
        ctx.set_timer(self.core.cfg.probe_interval_ns, Timer::Probe);
        ctx.set_timer(self.core.cfg.resend_ns, Timer::Resend);
        if durable.is_empty() {
            return;
        }
        let mut log = TigaLog::new();
        let (mut synced, mut committed) = (0, 0);
        // Optimistic executions this server replied to as a leader, since
        // the last view change (which moved its queue into the log).
        let mut tentative: BTreeMap<TxnId, LogEntry> = BTreeMap::new();
        for record in durable {
            match record {
                Record::Snapshot(snap) => {
                    self.restore_snapshot(&snap);
                    log = TigaLog::from_base(snap.checkpoint.upto, snap.log.clone());
                    synced = snap.sync_point;
                    committed = snap.commit_point.max(snap.checkpoint.upto);
                    tentative = snap.tentative.iter().map(|e| (e.body.id, e.clone())).collect();
                }
                Record::Log { pos, entries } => {
                    if pos <= log.len() {
                        // Positions below the base are folded already.
                        let skip = log.base().saturating_sub(pos) as usize;
                        let entries = entries.into_iter().skip(skip).collect();
                        log.replace_suffix(pos.max(log.base()), entries);
                    }
                }
                Record::SyncPoint(p) => synced = p,
                Record::View { view, last_normal_view, led } => {
                    // A newer view's change moved the votes into the log
                    // before this record; one of the same view only
                    // clears `led` (`record_own_sync_point`), and the log
                    // record holding the votes may not have reached the disk.
                    if view.g_view != self.core.view.g_view {
                        tentative.clear();
                    }
                    self.core.set_view(view);
                    self.core.last_normal_view = last_normal_view;
                    self.core.led = led;
                }
                Record::Tentative(e) => {
                    tentative.insert(e.body.id, e);
                }
                Record::Vm(_) | Record::Epoch(_) => {}
            }
        }
        // A leader's log is its own, until unreleased entries join it
        // (`record_own_sync_point`).
        let synced = if self.core.led { log.len() } else { synced.clamp(log.base(), log.len()) };
        // Nothing is committed past the sync-point; a commit-point recorded
        // beyond it is learned again from the leader.
        self.core.log.reset(log, synced, committed.min(synced));
        self.rebuild_derived();
        self.record_own_sync_point(ctx);
        // Its votes for them count in the next view change, as if its queue
        // had been moved into the log (Algorithm 5 lines 7-9), past the
        // sync-point; logged, since the next view it records forgets
        // `Tentative` records.
        let mut votes: Vec<LogEntry> =
            tentative.into_values().filter(|e| self.core.log.position(e.body.id).is_none()).collect();
        votes.sort_by_key(|e| e.stamp());
        self.append_unsynced(ctx, votes);
        self.core.status = Status::Recovering;
        for vm in self.core.vm_members() {
            ctx.send(vm, Msg::GetView);
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Tiga>, timer: Timer) {
        self.on_timer_event(ctx, timer);
        self.after_event(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, msg: Msg) {
        self.on_message_event(ctx, from, msg);
        self.after_event(ctx);
    }
}

impl Server {
    fn on_timer_event(&mut self, ctx: &mut Ctx<'_, Tiga>, timer: Timer) {
        match timer {
            Timer::Release => self.on_release_timer(ctx),
            Timer::ServerTick => {
                ctx.set_timer(self.core.cfg.server_tick_ns, Timer::ServerTick);
                self.on_tick(ctx);
            }
            Timer::Heartbeat => {
                ctx.set_timer(self.core.cfg.heartbeat_ns, Timer::Heartbeat);
                self.on_heartbeat(ctx);
            }
            Timer::Probe => {
                ctx.set_timer(self.core.cfg.probe_interval_ns, Timer::Probe);
                self.probe_other_shards(ctx);
            }
            Timer::Resend => {
                ctx.set_timer(self.core.cfg.resend_ns, Timer::Resend);
                self.on_resend(ctx);
            }
            Timer::CoordinatorTick | Timer::VmTick | Timer::Vm(_) => {} // other roles' timers
        }
    }

    fn on_message_event(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, msg: Msg) {
        if matches!(msg, Msg::ViewChange(_)) {
            // A replica of this shard changing views reaches this server.
            if let Some(r) = sync::follower_index(ctx, &self.core, from) {
                self.reach.heard(r, ctx.monotonic_ns());
            }
        }
        match msg {
            Msg::Submit(m) => self.on_submit(ctx, from, m),
            Msg::Probe { send_clock_ns, low_watermark } => {
                if self.core.topo.is_client(from) {
                    self.executed.note_watermark(from, low_watermark);
                }
                ctx.send(from, Msg::ProbeReply { send_clock_ns, recv_clock_ns: ctx.clock_ns() });
            }
            Msg::ProbeReply { send_clock_ns, .. } => {
                // Half the round trip, on this server's clock alone: whether
                // leaders are co-located must not depend on clock error.
                if let Some(rtt_ns) = ctx.clock_ns().checked_sub(send_clock_ns) {
                    self.peer_delays.add(from, rtt_ns / 2);
                }
            }
            Msg::TsNotify(m) => self.on_notify(ctx, from, m),
            Msg::FetchTxn { id } => agreement::on_fetch_txn(ctx, from, id, &self.pq),
            Msg::TxnFound { body, t } => self.on_txn_found(ctx, from, body, t),
            Msg::LogSync(m) if m.g_view == self.core.view.g_view => {
                let missing = self.on_log_sync(ctx, from, m);
                if !missing.is_empty() {
                    // Progress is reported every tick; bodies are asked for
                    // at once, after executing what became committed.
                    self.execute_committed(ctx);
                    sync::report_sync(&mut self.core, ctx, missing);
                }
            }
            Msg::SyncReport(m) if m.g_view == self.core.view.g_view => {
                // In a normal view a follower reaches its leader, and hears
                // it, when its report shows it following the log.
                if let Some(r) = self.sync.on_sync_report(&mut self.core, ctx, from, m, &self.pq) {
                    self.reach.heard(r, ctx.monotonic_ns());
                }
            }
            Msg::Bodies { bodies } => self.sync.on_bodies(&self.core, bodies),
            Msg::CheckpointState { g_view, checkpoint } => self.on_checkpoint_state(ctx, from, g_view, checkpoint),
            Msg::FetchCheckpoint { .. } => ctx.send(
                from,
                Msg::CheckpointState {
                    g_view: self.core.view.g_view,
                    checkpoint: Arc::clone(self.executed.checkpoint()),
                },
            ),
            Msg::SyncInquiry { shard, ids } => {
                sync::on_sync_inquiry(&mut self.core, ctx, from, shard, ids, self.executed.folded())
            }
            Msg::CurrentView(view) => self.on_current_view(ctx, view),
            Msg::ViewChange(m) => self.on_view_change(ctx, from, m),
            Msg::TsVerify(m) => self.on_ts_verify(ctx, from, m),
            Msg::StartView(m) => self.on_start_view(ctx, from, m),
            // Log synchronization of another view.
            Msg::LogSync(_) | Msg::SyncReport(_) => {}
            // Messages to coordinators and the view manager.
            Msg::FastReply(_) | Msg::SyncReply { .. } | Msg::Vm(_) | Msg::Heartbeat { .. } | Msg::GetView => {}
        }
    }
}
