//! Tiga's view manager (§4, Appendix B, Algorithm 4): a small replicated
//! service (`viewmgr-0..2`, one per server region) that detects failed shard
//! leaders from heartbeats and installs global views.
//!
//! The view history is a Multi-Paxos log (the shared `MultiPaxos`; the
//! paper uses Viewstamped Replication, which plays the same part): the
//! Paxos leader proposes `NewView` when a shard leader is silent, reports
//! that it restarted, or reports that it is cut off from its followers and
//! another replica of its shard can take over (`reach.rs`), every member
//! applies committed views in order, and
//! every member answers a server or coordinator that shows an older view
//! with the current one. New leaders follow Algorithm 4 lines 37-49: one
//! replica index for every shard when all those replicas are alive (they
//! share a region), otherwise the region with the most live servers and any
//! live replica elsewhere. With `preventive = "auto"` the mode comes from the
//! servers' probe mesh (§3.8): preventive when every pair of leaders measured
//! one-way delays below `colocation_threshold_ms`, detective otherwise (the
//! leaders' regions decide until measurements exist). When the measurements
//! contradict the current mode for `MODE_PATIENCE_NS`, the view manager
//! starts a view change that only switches the mode.
//!
//! It never touches a server's log: it only decides who leads.

use super::messages::{Mode, Msg, Record, Standing, Timer, View, VmCmd, VmState};
use super::{Config, Tiga};
use meridian_core::Process;
use meridian_core::{Ctx, Mapped, NodeId, ShardId, Topology};
use meridian_mechanisms::paxos::{MultiPaxos, PaxosConfig, PaxosEvent, PaxosRecordBody};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How long measured delays must contradict the current mode before the
/// view manager switches it.
const MODE_PATIENCE_NS: u64 = 3_000_000_000;

/// A server that said it was cut off from its followers is not fit to lead
/// for this many leader timeouts afterwards, even once demoted (when it
/// says it serves again): otherwise two replicas cut off from the rest of
/// their shard would take turns leading it.
const CUT_OFF_MEMORY_TIMEOUTS: u64 = 10;

/// Heartbeat periods without one after which a server's run of heartbeats
/// counts as broken (`Liveness::heard_since_ns` starts again).
const HEARD_GAP_HEARTBEATS: u64 = 3;

/// What the view manager knows of one server.
#[derive(Clone, Debug, Default)]
struct Liveness {
    /// The view manager's clock when it last heard from the server.
    heard_ns: Option<u64>,
    /// Since when it has heard the server without a gap of
    /// `HEARD_GAP_HEARTBEATS` heartbeats.
    heard_since_ns: u64,
    /// When it last heard the server say it was cut off from its followers.
    cut_off_ns: Option<u64>,
    standing: Standing,
    /// Its one-way-delay estimates to other shards' servers.
    delays: Vec<(NodeId, u64)>,
}

/// A view this member proposed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Proposal {
    g_view: u64,
    /// This member's clock when it proposed.
    at_ns: u64,
}

pub struct ViewManager {
    topo: Arc<Topology>,
    cfg: Config,
    paxos: MultiPaxos<VmCmd, VmState>,
    view: View,
    servers: BTreeMap<NodeId, Liveness>,
    /// A proposed view not yet committed.
    proposing: Option<Proposal>,
    /// When this member last became the Paxos leader: failures are judged
    /// only after a full timeout of listening.
    leading_since_ns: Option<u64>,
    /// Since when the measured delays have contradicted the current mode.
    mode_mismatch_since_ns: Option<u64>,
}

impl ViewManager {
    pub fn new(topo: Arc<Topology>, me: NodeId, view: View, cfg: Config) -> ViewManager {
        let members = topo.service("viewmgr").to_vec();
        let max_rtt_ns = 400_000_000;
        let paxos = MultiPaxos::new(u32::MAX, members, me, 0, PaxosConfig::for_rtt(max_rtt_ns));
        ViewManager {
            topo,
            cfg,
            paxos,
            view,
            servers: BTreeMap::new(),
            proposing: None,
            leading_since_ns: None,
            mode_mismatch_since_ns: None,
        }
    }

    pub fn view(&self) -> &View {
        &self.view
    }

    fn drain(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        loop {
            let events = self.paxos.drain_events();
            if events.is_empty() {
                return;
            }
            for ev in events {
                match ev {
                    PaxosEvent::Committed { value, .. } => {
                        let VmCmd::NewView(v) = &*value;
                        self.install(ctx, v.clone());
                    }
                    PaxosEvent::LeaderReady { .. } => self.leading_since_ns = Some(ctx.clock_ns()),
                    PaxosEvent::Deposed => self.leading_since_ns = None,
                    PaxosEvent::Restore { state, .. } => {
                        if let Some(v) = state.as_ref().clone().filter(|v| v.g_view > self.view.g_view) {
                            self.view = v;
                        }
                    }
                }
            }
        }
    }

    /// Algorithm 4 lines 24-27 and 33-36: a committed view becomes current
    /// and is announced to every server and coordinator.
    fn install(&mut self, ctx: &mut Ctx<'_, Tiga>, v: View) {
        if v.g_view <= self.view.g_view {
            return; // a duplicate proposal for a view already installed
        }
        self.view = v;
        if self.proposing.is_some_and(|p| p.g_view <= self.view.g_view) {
            self.proposing = None;
        }
        if self.paxos.is_leader() {
            ctx.count("view_changes", 1);
            ctx.count(if self.view.mode == Mode::Preventive { "views_preventive" } else { "views_detective" }, 1);
            let everyone: Vec<NodeId> = self.topo.all_replicas().chain(self.topo.clients().iter().copied()).collect();
            for node in everyone {
                ctx.send(node, Msg::CurrentView(self.view.clone()));
            }
        }
    }

    /// Heard from within the timeout, not restarting, and not cut off from
    /// its followers lately (`CUT_OFF_MEMORY_TIMEOUTS`): fit to lead.
    fn alive(&self, node: NodeId, now: u64) -> bool {
        let memory_ns = CUT_OFF_MEMORY_TIMEOUTS * self.cfg.leader_timeout_ns;
        self.heard(node, now)
            && self.servers.get(&node).is_some_and(|l| {
                l.standing == Standing::Serving && l.cut_off_ns.is_none_or(|c| now.saturating_sub(c) >= memory_ns)
            })
    }

    /// Algorithm 4 line 1, and a leader that reaches this view manager but
    /// not its followers (reach.rs): a silent or restarted leader is
    /// replaced; a cut-off one only by a replica of its shard fit to lead
    /// that this view manager had heard without a gap for two heartbeats
    /// when the leader last said it was cut off. With none, a new view
    /// would name it again; and a follower heard only since a partition
    /// healed may well be heard by the leader too, whose next heartbeat
    /// will say so.
    fn must_replace(&self, shard: ShardId, leader: NodeId, now: u64) -> bool {
        if !self.heard(leader, now) {
            return true;
        }
        let Some(l) = self.servers.get(&leader) else { return true };
        match (l.standing, l.cut_off_ns) {
            (Standing::Serving, _) => false,
            (Standing::Recovering, _) => true,
            (Standing::CutOff, cut_off_ns) => {
                let said_ns = cut_off_ns.expect("a cut-off report is remembered");
                let settled = |m: &NodeId| {
                    self.servers.get(m).is_some_and(|f| f.heard_since_ns + 2 * self.cfg.heartbeat_ns <= said_ns)
                };
                self.topo.replicas(shard).iter().any(|m| *m != leader && self.alive(*m, now) && settled(m))
            }
        }
    }

    /// A heartbeat from `from` at `now`.
    fn heard_from(&mut self, from: NodeId, now: u64, standing: Standing, delays: Vec<(NodeId, u64)>) {
        let gap_ns = HEARD_GAP_HEARTBEATS * self.cfg.heartbeat_ns;
        let before = self.servers.get(&from);
        let heard_since_ns = match before {
            Some(l) if l.heard_ns.is_some_and(|h| now.saturating_sub(h) <= gap_ns) => l.heard_since_ns,
            _ => now,
        };
        let cut_off_ns = if standing == Standing::CutOff { Some(now) } else { before.and_then(|l| l.cut_off_ns) };
        self.servers.insert(from, Liveness { heard_ns: Some(now), heard_since_ns, cut_off_ns, standing, delays });
    }

    /// Heard from within the timeout, restarting or not. A restarted server
    /// keeps every vote it gave (they were durable), so when a shard has no
    /// other server — the whole deployment restarted — it may lead: the
    /// new view's change rebuilds the log from the restarted servers' logs.
    fn heard(&self, node: NodeId, now: u64) -> bool {
        self.servers
            .get(&node)
            .is_some_and(|l| l.heard_ns.is_some_and(|h| now.saturating_sub(h) < self.cfg.leader_timeout_ns))
    }

    /// Algorithm 4 line 1: the Paxos leader replaces leaders it has not
    /// heard from for a timeout, or that restarted and lost their state, or
    /// that cannot reach their followers (`must_replace`).
    fn detect_failures(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let now = ctx.clock_ns();
        let Some(since) = self.leading_since_ns.filter(|_| self.paxos.is_leader()) else { return };
        if now.saturating_sub(since) < self.cfg.leader_timeout_ns {
            return;
        }
        if let Some(p) = self.proposing {
            if now.saturating_sub(p.at_ns) < self.cfg.leader_timeout_ns {
                return; // still being decided
            }
        }
        let n = self.topo.replicas_per_shard;
        let failed = (0..self.topo.shards).map(ShardId).any(|s| {
            let leader = self.topo.replicas(s)[self.view.leader_index(s, n) as usize];
            self.must_replace(s, leader, now)
        });
        let next = if failed { self.next_view(now) } else { self.mode_switch(now) };
        let Some(next) = next else { return };
        let g = next.g_view;
        if self.paxos.propose(&mut Mapped::new(ctx), VmCmd::NewView(next)).is_ok() {
            self.proposing = Some(Proposal { g_view: g, at_ns: now });
        }
    }

    /// Algorithm 4 lines 2-8 and 37-49.
    fn next_view(&self, now: u64) -> Option<View> {
        let n = self.topo.replicas_per_shard;
        let shards: Vec<ShardId> = (0..self.topo.shards).map(ShardId).collect();
        // A shard's candidates: its live servers, or else the restarted ones.
        let fit = |s: ShardId, r: u32| {
            let node = self.topo.replicas(s)[r as usize];
            let any_alive = self.topo.replicas(s).iter().any(|m| self.alive(*m, now));
            if any_alive { self.alive(node, now) } else { self.heard(node, now) }
        };
        let new_leaders: Vec<u32> = match (0..n).find(|r| shards.iter().all(|s| fit(*s, *r))) {
            Some(r) => vec![r; shards.len()],
            None => {
                let best = (0..n).max_by_key(|r| (shards.iter().filter(|s| fit(**s, *r)).count(), n - r))?;
                let mut leaders = Vec::with_capacity(shards.len());
                for s in &shards {
                    let r = if fit(*s, best) { best } else { (0..n).find(|r| fit(*s, *r))? };
                    leaders.push(r);
                }
                leaders
            }
        };
        let g_vec: Vec<u64> = shards
            .iter()
            .zip(&new_leaders)
            .map(|(s, r_new)| {
                let old = self.view.l_view(*s);
                let r_old = (old % u64::from(n)) as u32;
                old + u64::from((r_new + n - r_old) % n)
            })
            .collect();
        let leaders: Vec<NodeId> =
            shards.iter().zip(&new_leaders).map(|(s, r)| self.topo.replicas(*s)[*r as usize]).collect();
        Some(View { g_view: self.view.g_view + 1, g_vec, mode: self.mode_for(&leaders) })
    }

    /// §3.8: preventive when the leaders are co-located — by measured
    /// delays once every pair has been measured, by region before — unless
    /// configured.
    fn mode_for(&self, leaders: &[NodeId]) -> Mode {
        let colocated = self
            .measured_colocated(leaders)
            .unwrap_or_else(|| leaders.windows(2).all(|w| self.topo.region_of(w[0]) == self.topo.region_of(w[1])));
        if self.cfg.preventive.unwrap_or(colocated) { Mode::Preventive } else { Mode::Detective }
    }

    /// Whether every pair of leaders measured delays below the threshold
    /// (either direction's report counts); `None` if a pair is unmeasured.
    fn measured_colocated(&self, leaders: &[NodeId]) -> Option<bool> {
        let delay = |a: NodeId, b: NodeId| {
            self.servers.get(&a).and_then(|l| l.delays.iter().find(|(n, _)| *n == b)).map(|(_, d)| *d)
        };
        let mut colocated = true;
        for (i, a) in leaders.iter().enumerate() {
            for b in &leaders[i + 1..] {
                let d = delay(*a, *b).max(delay(*b, *a))?;
                colocated &= d <= self.cfg.colocation_threshold_ns;
            }
        }
        Some(colocated)
    }

    /// A view with the same leaders and the other mode, once measurements
    /// have contradicted the current one for `MODE_PATIENCE_NS`.
    fn mode_switch(&mut self, now: u64) -> Option<View> {
        let n = self.topo.replicas_per_shard;
        let leaders: Vec<NodeId> = (0..self.topo.shards)
            .map(ShardId)
            .map(|s| self.topo.replicas(s)[self.view.leader_index(s, n) as usize])
            .collect();
        let wanted = self.mode_for(&leaders);
        if wanted == self.view.mode || self.measured_colocated(&leaders).is_none() {
            self.mode_mismatch_since_ns = None;
            return None;
        }
        let since = *self.mode_mismatch_since_ns.get_or_insert(now);
        if now.saturating_sub(since) < MODE_PATIENCE_NS {
            return None;
        }
        self.mode_mismatch_since_ns = None;
        Some(View { g_view: self.view.g_view + 1, g_vec: self.view.g_vec.clone(), mode: wanted })
    }
}

impl Process<Tiga> for ViewManager {
    /// Between events: its Paxos log's invariants; a proposal in flight is
    /// for a later view than the current one; the view names a local view
    /// for every shard; only servers are tracked, each with at most one
    /// delay per node.
    fn check_invariants(&self) {
        self.paxos.check_invariants();
        if let Some(Proposal { g_view, .. }) = self.proposing {
            assert!(g_view > self.view.g_view, "proposing view {g_view} at or below the current one");
        }
        assert_eq!(self.view.g_vec.len(), self.topo.shards as usize, "a view without every shard's local view");
        for (node, l) in self.servers.iter().take(meridian_core::process::CHECKED_MAX) {
            assert!(self.topo.replica_of(*node).is_some(), "{node:?} is not a server");
            assert!(l.delays.len() <= self.topo.nodes.len(), "{node:?} reported more delays than nodes");
        }
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Tiga>, durable: Vec<Record>) {
        let records: Vec<PaxosRecordBody<VmCmd, VmState>> = durable
            .into_iter()
            .filter_map(|r| match r {
                Record::Vm(p) => Some(p.body),
                _ => None,
            })
            .collect();
        self.paxos.start(&mut Mapped::new(ctx), records);
        ctx.set_timer(self.cfg.vm_tick_ns, Timer::VmTick);
        self.drain(ctx);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, Tiga>, upto: meridian_core::Lsn) {
        self.paxos.on_persisted(&mut Mapped::new(ctx), upto);
        self.drain(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Tiga>, timer: Timer) {
        match timer {
            Timer::Vm(t) => self.paxos.on_timer(&mut Mapped::new(ctx), t),
            Timer::VmTick => {
                ctx.set_timer(self.cfg.vm_tick_ns, Timer::VmTick);
                self.detect_failures(ctx);
            }
            // Other roles' timers.
            Timer::Release
            | Timer::ServerTick
            | Timer::Heartbeat
            | Timer::Probe
            | Timer::Resend
            | Timer::CoordinatorTick => {}
        }
        self.drain(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Vm(m) => self.paxos.on_message(&mut Mapped::new(ctx), from, m),
            Msg::Heartbeat { g_view, standing, mut delays } => {
                delays.truncate(self.topo.nodes.len());
                self.heard_from(from, ctx.clock_ns(), standing, delays);
                if g_view < self.view.g_view {
                    ctx.send(from, Msg::CurrentView(self.view.clone()));
                }
            }
            Msg::GetView => ctx.send(from, Msg::CurrentView(self.view.clone())),
            // Messages among servers and coordinators.
            Msg::Submit(_)
            | Msg::Probe { .. }
            | Msg::FastReply(_)
            | Msg::ProbeReply { .. }
            | Msg::SyncInquiry { .. }
            | Msg::SyncReply { .. }
            | Msg::TsNotify(_)
            | Msg::FetchTxn { .. }
            | Msg::TxnFound { .. }
            | Msg::LogSync(_)
            | Msg::SyncReport(_)
            | Msg::Bodies { .. }
            | Msg::CheckpointState { .. }
            | Msg::FetchCheckpoint { .. }
            | Msg::CurrentView(_)
            | Msg::ViewChange(_)
            | Msg::TsVerify(_)
            | Msg::StartView(_) => {}
        }
        self.drain(ctx);
    }
}
