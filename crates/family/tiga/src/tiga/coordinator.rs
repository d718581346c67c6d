//! The Tiga coordinator, co-located with each client (Tiga §3.1, §3.4,
//! §3.7; Algorithm 3; Appendix E).
//!
//! It keeps one-way-delay estimates to every server (from the delays the
//! servers report for its submissions, and from probes), gives each
//! transaction a future timestamp — send time plus the largest estimated
//! delay to the closest super quorum (which must include the leader) of each
//! participating shard, plus the headroom delta Δ — and multicasts it to
//! every replica of those shards. A shard has committed the transaction on
//! the fast path when a super quorum including its leader replied with the
//! leader's timestamp and log hash, on the slow path when the leader and `f`
//! followers that synced it with the leader's timestamp did; the
//! transaction is committed when every shard has, and every leader holds the
//! same timestamp. The results are the leaders'. A transaction that does not
//! commit in time is resubmitted under the same id (servers execute it at
//! most once); Tiga never aborts.

use super::messages::{FastReply, Msg, Record, Submit, SyncReply, Timer, TxnBody, View};
use super::{Config, Tiga};
use meridian_core::Process;
use meridian_core::process::CHECKED_MAX;
use meridian_core::{Ctx, Lsn, NodeId, OpResult, Outcome, Program, RequestId, ShardId, Topology, TxnId};
use meridian_mechanisms::owd::Delays;
use meridian_mechanisms::quorum;
use meridian_mechanisms::small_map::SmallMap;
use meridian_mechanisms::txnids::EpochGate;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Most transactions still driven to completion after their client was
/// told the outcome is unknown; beyond it the oldest is given up.
const ORPHANS_MAX: usize = 1024;

/// Coordinator ticks between two requests for the current view: a burst of
/// replies from a newer view asks once, not once per reply. The member
/// asked moves on at the same pace, so a dead one is skipped.
const VIEW_ASK_GAP_TICKS: u64 = 5;

#[derive(Clone, Debug)]
struct LeaderReply {
    t: u64,
    hash: u128,
    result: Vec<OpResult>,
}

/// A follower's fast reply: the timestamp and log hash it released at.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct FollowerReply {
    t: u64,
    hash: u128,
}

impl FollowerReply {
    /// Whether it matches the leader's reply (§3.4).
    fn matches(&self, l: &LeaderReply) -> bool {
        self.t == l.t && self.hash == l.hash
    }
}

#[derive(Clone, Debug, Default)]
struct ShardReplies {
    leader: Option<LeaderReply>,
    /// Followers' fast replies, per replica.
    fast: SmallMap<u32, FollowerReply>,
    /// Followers that synced it: replica → timestamp in their log.
    synced: SmallMap<u32, u64>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Path {
    Fast,
    Slow,
}

impl ShardReplies {
    /// Whether the shard committed the leader's current reply, and how: a
    /// super quorum (leader included) with the leader's timestamp and hash
    /// (§3.4), or `f` followers synced at the leader's timestamp (§3.7).
    fn committed(&self, super_q: usize, f: usize) -> Option<Path> {
        let l = self.leader.as_ref()?;
        if 1 + self.fast.values().filter(|r| r.matches(l)).count() >= super_q {
            return Some(Path::Fast);
        }
        (self.synced.values().filter(|t| **t == l.t).count() >= f).then_some(Path::Slow)
    }
}

#[derive(Debug)]
struct Pend {
    request: RequestId,
    body: Arc<TxnBody>,
    /// Per shard, in shard order (the body's).
    shards: SmallMap<ShardId, ShardReplies>,
    submitted_tick: u64,
    attempts: u32,
    /// Its client was told the outcome is unknown; it is still resubmitted
    /// until it commits, so that the low watermark passes only transactions
    /// that committed at every shard.
    orphan: bool,
    /// When the fast path should have completed (this coordinator's clock):
    /// past it, the coordinator asks for the slow path.
    fast_due_ns: u64,
    /// Its first submission in the latest view it was submitted in, whose
    /// timestamp every resubmission in the view carries again (see
    /// `submit`).
    stamped: Option<Stamped>,
}

/// The view a transaction was submitted in and the timestamp it carried.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Stamped {
    g_view: u64,
    t: u64,
}

pub struct Coordinator {
    me: NodeId,
    cfg: Config,
    topo: Arc<Topology>,
    /// Transaction ids, and the requests that arrived before their epoch
    /// was durable.
    ids: EpochGate<(RequestId, Program)>,
    view: View,
    /// `view`'s leader of each shard (`View::leaders`), asked per reply.
    leaders: Vec<u32>,
    owd: Delays,
    pending: BTreeMap<TxnId, Pend>,
    ticks: u64,
    /// The tick the view manager was last asked for the view.
    view_asked_tick: Option<u64>,
    /// The smallest id given up past `ORPHANS_MAX`: the watermark stays
    /// below it, since it may have committed at some shards only.
    given_up_floor: Option<u64>,
}

impl Coordinator {
    pub fn new(me: NodeId, topo: Arc<Topology>, view: View, cfg: Config) -> Coordinator {
        let leaders = view.leaders(topo.replicas_per_shard);
        Coordinator {
            me,
            cfg,
            topo,
            ids: EpochGate::new(me),
            leaders,
            view,
            owd: Delays::default(),
            pending: BTreeMap::new(),
            ticks: 0,
            view_asked_tick: None,
            given_up_floor: None,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// The current delay estimate to a server (for tests and reports).
    pub fn owd_estimate_ns(&self, server: NodeId) -> Option<u64> {
        self.owd.estimate(server, self.cfg.owd_percentile)
    }

    /// §3.1: a future timestamp, multicast to every replica of every shard.
    fn submit(&mut self, ctx: &mut Ctx<'_, Tiga>, id: TxnId) {
        let p = self.pending.get_mut(&id).expect("submitting a pending transaction");
        p.attempts += 1;
        p.submitted_tick = self.ticks;
        let body = p.body.clone();
        let now = ctx.clock_ns();
        // One timestamp per view: servers admit only copies of their own
        // view, and all of them at this timestamp (`Server::on_submit`).
        // A new view may have dropped the transaction; a fresh timestamp
        // then places it after what that view recovered.
        let g_view = self.view.g_view;
        let first_t = p.stamped.filter(|s| s.g_view == g_view).map(|s| s.t);
        let t = first_t.unwrap_or_else(|| now.saturating_add_signed(self.headroom_ns(&body.shards)));
        // Replies from the farthest super-quorum member are due about one
        // delay after t; allow a margin before concluding the fast path failed.
        let back = self.farthest_reply_ns(&body.shards);
        let due = t.max(now) + back + back / 4 + self.cfg.coordinator_tick_ns;
        // A resubmission must not postpone the slow path: the first
        // submission's replies may be all that ever arrive.
        let p = self.pending.get_mut(&id).expect("checked");
        p.stamped = Some(Stamped { g_view, t });
        p.fast_due_ns = if p.attempts == 1 { due } else { p.fast_due_ns.min(due) };
        let low_watermark = self.low_watermark();
        for shard in &body.shards {
            for replica in self.topo.replicas(*shard).to_vec() {
                ctx.send(
                    replica,
                    Msg::Submit(Submit { body: body.clone(), g_view, t, send_clock_ns: now, low_watermark }),
                );
            }
        }
    }

    /// The largest estimated delay to each shard's closest super quorum
    /// (leader included), plus Δ.
    fn headroom_ns(&self, shards: &[ShardId]) -> i64 {
        let n = self.topo.replicas_per_shard;
        let f = self.topo.f() as usize;
        let q = if self.cfg.simple_quorum_timestamps { f + 1 } else { quorum::super_quorum(f) }.min(n as usize);
        let default = self.cfg.default_owd_ns;
        let mut worst = 0u64;
        for shard in shards {
            let replicas = self.topo.replicas(*shard);
            let leader = self.leaders[shard.index()] as usize;
            let est = |node: NodeId| self.owd_estimate_ns(node).unwrap_or(default);
            let mut others: Vec<u64> =
                replicas.iter().enumerate().filter(|(r, _)| *r != leader).map(|(_, node)| est(*node)).collect();
            others.sort_unstable();
            let mut need = est(replicas[leader]);
            if q > 1 {
                need = need.max(others[q - 2]);
            }
            worst = worst.max(need);
        }
        worst as i64 + self.cfg.headroom_delta_ns
    }

    /// The largest estimated delay from any replica of `shards` back here.
    fn farthest_reply_ns(&self, shards: &[ShardId]) -> u64 {
        let default = self.cfg.default_owd_ns;
        shards
            .iter()
            .flat_map(|s| self.topo.replicas(*s).iter())
            .map(|n| self.owd_estimate_ns(*n).unwrap_or(default))
            .max()
            .unwrap_or(default)
    }

    /// Asks one view-manager member (in turn) for the current view, at most
    /// once every `VIEW_ASK_GAP_TICKS`.
    fn ask_view(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        if self.view_asked_tick.is_some_and(|t| self.ticks < t + VIEW_ASK_GAP_TICKS) {
            return;
        }
        self.view_asked_tick = Some(self.ticks);
        let members = self.topo.service("viewmgr");
        if !members.is_empty() {
            let to = members[(self.ticks / VIEW_ASK_GAP_TICKS) as usize % members.len()];
            ctx.send(to, Msg::GetView);
        }
    }

    fn view_matches(&self, g_view: u64, shard: ShardId, l_view: u64) -> bool {
        g_view == self.view.g_view && shard.index() < self.view.g_vec.len() && l_view == self.view.l_view(shard)
    }

    fn replica_index(&self, shard: ShardId, node: NodeId) -> Option<u32> {
        self.topo.replicas(shard).iter().position(|n| *n == node).map(|r| r as u32)
    }

    fn on_fast_reply(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, m: FastReply) {
        let FastReply { id, shard, t, hash, result, .. } = m;
        let Some(r) = self.replica_index(shard, from) else { return };
        let leader = self.leaders[shard.index()];
        let Some(s) = self.pending.get_mut(&id).and_then(|p| p.shards.get_mut(&shard)) else { return };
        if r == leader {
            // A re-execution at a larger (agreed) timestamp supersedes.
            let Some(result) = result else { return };
            if s.leader.as_ref().is_none_or(|l| t >= l.t) {
                s.leader = Some(LeaderReply { t, hash, result });
            }
        } else {
            s.fast.insert(r, FollowerReply { t, hash });
        }
        self.try_commit(ctx, id);
    }

    fn on_sync_reply(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, m: SyncReply) {
        let SyncReply { shard, synced, .. } = m;
        let Some(r) = self.replica_index(shard, from) else { return };
        for (id, t) in synced {
            if let Some(s) = self.pending.get_mut(&id).and_then(|p| p.shards.get_mut(&shard)) {
                s.synced.insert(r, t);
                self.try_commit(ctx, id);
            }
        }
    }

    /// §3.4 and §3.7: committed when every shard committed on the fast or
    /// the slow path and every leader holds the same timestamp.
    fn try_commit(&mut self, ctx: &mut Ctx<'_, Tiga>, id: TxnId) {
        let Some(p) = self.pending.get(&id) else { return };
        let (super_q, f) = self.quorums();
        let mut all_fast = true;
        let mut agreed_t = None;
        for s in p.shards.values() {
            let Some(l) = &s.leader else { return };
            if agreed_t.is_some_and(|t| t != l.t) {
                return; // leaders disagree: wait for agreement's re-execution
            }
            agreed_t = Some(l.t);
            match s.committed(super_q, f) {
                None => return,
                Some(path) => all_fast &= path == Path::Fast,
            }
        }
        let p = self.pending.remove(&id).expect("checked");
        ctx.count(if all_fast { "fast_path" } else { "slow_path" }, 1);
        if p.attempts > 1 {
            ctx.count("resubmissions", u64::from(p.attempts - 1));
        }
        if p.orphan {
            ctx.count("orphans_committed", 1);
            return; // its client already heard "unknown"
        }
        let results = self.assemble(&p);
        ctx.complete(p.request, Outcome::Committed { results });
    }

    /// The fast-path super quorum and `f` for this deployment.
    fn quorums(&self) -> (usize, usize) {
        let n = self.topo.replicas_per_shard as usize;
        let f = self.topo.f() as usize;
        let fast = if self.cfg.simple_fast_quorum { f + 1 } else { quorum::super_quorum(f) };
        (fast.min(n), f)
    }

    /// The whole program's results from the leaders' pieces: the
    /// operations' by position, then the procedure's parts' in part order
    /// (each piece holds its parts' reads one after another).
    fn assemble(&self, p: &Pend) -> Vec<OpResult> {
        let program = &p.body.program;
        let mut results = vec![None; program.ops.len()];
        let mut parts: BTreeMap<u32, Vec<OpResult>> = BTreeMap::new();
        let shard_of = |k| self.topo.shard_of(k);
        for (shard, s) in &p.shards {
            let leader = s.leader.as_ref().expect("committed shards have a leader reply");
            // The piece's operations' results, then its parts' reads.
            let mut here = leader.result.iter();
            for (pos, r) in program.positions_on(*shard, shard_of).zip(&mut here) {
                results[pos] = r.clone();
            }
            let mut tail = here.cloned();
            if let Some(proc) = &program.procedure {
                for part in program.parts_on(*shard, shard_of) {
                    let mut memo = meridian_core::ReadMap::new();
                    let run = meridian_core::procedure::run_part(proc, part, &mut memo, |_| tail.next().flatten());
                    parts.insert(part, run.reads.into_iter().map(|(_, v)| v).collect());
                }
            }
        }
        results.extend(parts.into_values().flatten());
        results
    }

    /// Appendix E: for transactions whose fast path failed on a shard (a
    /// follower's reply disagrees with the leader's, or the replies are
    /// overdue), ask that shard's followers — one batched message each —
    /// which they have synced. With simple-quorum timestamps the fast path
    /// is not expected, so the slow path is asked for at once.
    fn inquire(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let now = ctx.clock_ns();
        let (super_q, f) = self.quorums();
        let mut asks: BTreeMap<ShardId, Vec<TxnId>> = BTreeMap::new();
        for (id, p) in &self.pending {
            if self.ticks < p.submitted_tick + self.cfg.inquiry_after_ticks {
                continue;
            }
            let overdue = now >= p.fast_due_ns || self.cfg.simple_quorum_timestamps;
            for (shard, s) in &p.shards {
                let Some(l) = &s.leader else { continue };
                // Most pending transactions are neither overdue nor
                // disagreed with: the quorum count is left for the rest.
                let disagrees = || s.fast.values().any(|r| !r.matches(l));
                if !(overdue || disagrees()) {
                    continue;
                }
                if s.committed(super_q, f).is_some() {
                    continue; // this shard is done; others are awaited
                }
                asks.entry(*shard).or_default().push(*id);
            }
        }
        for (shard, ids) in asks {
            let leader = self.leaders[shard.index()] as usize;
            for (r, node) in self.topo.replicas(shard).to_vec().into_iter().enumerate() {
                if r != leader {
                    ctx.send(node, Msg::SyncInquiry { shard, ids: ids.clone() });
                }
            }
        }
    }

    /// Resubmits (same id; same timestamp within a view) what has not committed in time;
    /// after `max_attempts` the outcome is reported unknown (it may still
    /// commit: Tiga never aborts) and the transaction is still driven to
    /// completion in the background (Appendix B's recovery coordinator).
    fn resubmit_stalled(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let stalled: Vec<TxnId> = self
            .pending
            .iter()
            .filter(|(_, p)| self.ticks >= p.submitted_tick + self.cfg.retry_ticks)
            .map(|(id, _)| *id)
            .collect();
        for id in stalled {
            let p = self.pending.get_mut(&id).expect("listed");
            if p.attempts >= self.cfg.max_attempts && !p.orphan {
                p.orphan = true;
                ctx.count("unknown_outcomes", 1);
                ctx.complete(p.request, Outcome::Unknown);
                self.bound_orphans(ctx);
            }
            if self.pending.contains_key(&id) {
                // A stalled transaction may mean a new view.
                self.ask_view(ctx);
                self.submit(ctx, id);
            }
        }
    }

    /// Gives up the oldest orphans beyond `ORPHANS_MAX`.
    fn bound_orphans(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let orphans: Vec<TxnId> = self.pending.iter().filter(|(_, p)| p.orphan).map(|(id, _)| *id).collect();
        for id in orphans.iter().take(orphans.len().saturating_sub(ORPHANS_MAX)) {
            self.pending.remove(id);
            self.given_up_floor = Some(self.given_up_floor.map_or(id.seq, |f| f.min(id.seq)));
            ctx.count("orphans_given_up", 1);
        }
    }

    fn probe_all(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let now = ctx.clock_ns();
        let low_watermark = self.low_watermark();
        for node in self.topo.all_replicas().collect::<Vec<_>>() {
            ctx.send(node, Msg::Probe { send_clock_ns: now, low_watermark });
        }
    }

    /// No id below this is ever submitted again, and every earlier one of
    /// this epoch committed at all its shards (servers may forget them,
    /// Appendix B).
    fn low_watermark(&self) -> u64 {
        let pending = self.pending.keys().next().map_or_else(|| self.ids.next_seq(), |id| id.seq);
        self.given_up_floor.map_or(pending, |f| f.min(pending))
    }

    /// A new view: replies of the old one no longer count; resubmit.
    fn adopt_view(&mut self, ctx: &mut Ctx<'_, Tiga>, view: View) {
        self.leaders = view.leaders(self.topo.replicas_per_shard);
        self.view = view;
        let ids: Vec<TxnId> = self.pending.keys().copied().collect();
        for id in ids {
            let p = self.pending.get_mut(&id).expect("listed");
            for s in p.shards.values_mut() {
                *s = ShardReplies::default();
            }
            self.submit(ctx, id);
        }
    }
}

impl Process<Tiga> for Coordinator {
    /// Between events: requests wait only until the epoch is durable
    /// (`EpochGate`); a pending transaction was submitted to exactly its
    /// shards, at one timestamp per view, and is not committed (a commit
    /// completes it at once); follower replies never come from the leader's
    /// replica.
    fn check_invariants(&self) {
        self.ids.check_invariants();
        let n = self.topo.replicas_per_shard;
        assert_eq!(self.leaders, self.view.leaders(n), "leaders of another view");
        let (super_q, f) = self.quorums();
        for (id, p) in self.pending.iter().take(CHECKED_MAX) {
            assert_eq!(p.body.id, *id, "a pending transaction under another's id");
            assert!(p.shards.keys().eq(p.body.shards.iter()), "{id:?} tracks replies of shards it is not on");
            assert!(p.attempts >= 1, "{id:?} was never submitted");
            assert!(
                p.stamped.is_some_and(|s| s.g_view <= self.view.g_view),
                "{id:?} unstamped or stamped in a future view"
            );
            let mut leader_ts = p.shards.values().map(|s| s.leader.as_ref().map(|l| l.t));
            let first = leader_ts.next().flatten();
            let agreed = first.is_some() && leader_ts.all(|t| t == first);
            let all_committed = p.shards.values().all(|s| s.committed(super_q, f).is_some());
            assert!(!(agreed && all_committed), "{id:?} committed at every shard but still pending");
            for (shard, s) in &p.shards {
                let leader = self.leaders[shard.index()];
                assert!(!s.fast.contains_key(&leader), "{id:?}: a follower reply from {shard:?}'s leader");
                assert!(s.fast.keys().chain(s.synced.keys()).all(|r| *r < n), "{id:?}: a reply from no replica");
            }
        }
    }

    /// See `Process::state_sizes`.
    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("pending", self.pending.len());
        out("queued", self.ids.held());
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Tiga>, durable: Vec<Record>) {
        let epochs = durable.into_iter().filter_map(|r| match r {
            Record::Epoch(e) => Some(e),
            _ => None,
        });
        let epoch = self.ids.start(epochs);
        let lsn = ctx.append(Record::Epoch(epoch));
        self.ids.recorded_at(lsn);
        ctx.set_timer(self.cfg.coordinator_tick_ns, Timer::CoordinatorTick);
        ctx.set_timer(self.cfg.probe_interval_ns, Timer::Probe);
        self.probe_all(ctx);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, Tiga>, upto: Lsn) {
        for (request, program) in self.ids.persisted(upto) {
            self.on_request(ctx, request, program);
        }
    }

    fn on_request(&mut self, ctx: &mut Ctx<'_, Tiga>, request: RequestId, program: Program) {
        let Some((request, program)) = self.ids.admit((request, program)) else {
            return;
        };
        if program.is_empty() {
            return ctx.complete(request, Outcome::Committed { results: Vec::new() });
        }
        if !program.is_one_shot() {
            // Tiga executes each shard's piece where it lives, without the
            // other shards' reads: a part that needs them cannot run.
            ctx.count("refused_not_one_shot", 1);
            return ctx.complete(request, Outcome::Aborted { reason: meridian_core::AbortReason::Rejected });
        }
        let topo = self.topo.clone();
        let shards = program.shards(|k| topo.shard_of(k));
        let id = self.ids.next_id();
        let body = Arc::new(TxnBody { id, coordinator: self.me, program, shards: shards.clone() });
        let replies = shards.iter().map(|s| (*s, ShardReplies::default())).collect();
        let pend = Pend {
            request,
            body,
            shards: replies,
            submitted_tick: self.ticks,
            attempts: 0,
            orphan: false,
            fast_due_ns: 0,
            stamped: None,
        };
        self.pending.insert(id, pend);
        self.submit(ctx, id);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, msg: Msg) {
        match msg {
            Msg::FastReply(m) => {
                if let Some(ns) = m.owd_ns {
                    self.owd.add(from, ns);
                }
                if self.view_matches(m.g_view, m.shard, m.l_view) {
                    self.on_fast_reply(ctx, from, *m);
                } else if m.g_view > self.view.g_view {
                    self.ask_view(ctx);
                }
            }
            Msg::SyncReply(m) if m.g_view > self.view.g_view => self.ask_view(ctx),
            Msg::SyncReply(m) if self.view_matches(m.g_view, m.shard, m.l_view) => self.on_sync_reply(ctx, from, m),
            Msg::ProbeReply { send_clock_ns, recv_clock_ns } => self.owd.sample(from, send_clock_ns, recv_clock_ns),
            Msg::CurrentView(view) if view.g_view > self.view.g_view => self.adopt_view(ctx, view),
            // Replies of an older view, and a view already known.
            Msg::SyncReply(_) | Msg::CurrentView(_) => {}
            // Messages between servers and to the view manager.
            Msg::Submit(_)
            | Msg::Probe { .. }
            | Msg::SyncInquiry { .. }
            | Msg::TsNotify(_)
            | Msg::FetchTxn { .. }
            | Msg::TxnFound { .. }
            | Msg::LogSync(_)
            | Msg::SyncReport(_)
            | Msg::Bodies { .. }
            | Msg::CheckpointState { .. }
            | Msg::FetchCheckpoint { .. }
            | Msg::Vm(_)
            | Msg::Heartbeat { .. }
            | Msg::GetView
            | Msg::ViewChange(_)
            | Msg::TsVerify(_)
            | Msg::StartView(_) => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Tiga>, timer: Timer) {
        match timer {
            Timer::CoordinatorTick => {
                ctx.set_timer(self.cfg.coordinator_tick_ns, Timer::CoordinatorTick);
                self.ticks += 1;
                self.inquire(ctx);
                self.resubmit_stalled(ctx);
            }
            Timer::Probe => {
                ctx.set_timer(self.cfg.probe_interval_ns, Timer::Probe);
                self.probe_all(ctx);
            }
            // Other roles' timers.
            Timer::Release | Timer::ServerTick | Timer::Heartbeat | Timer::Resend | Timer::VmTick | Timer::Vm(_) => {}
        }
    }
}
