//! Server failure recovery (Tiga §4; Appendix B, Algorithms 5 and 6): the
//! global view change that replaces failed leaders, and the rejoin of a
//! restarted server.
//!
//! View change, at every server on a newer view from the view manager:
//! stop processing, move the queue into the log in timestamp order, and send
//! log, sync-point and last normal view to the shard's new leader. The new
//! leader, with `f + 1` of them, rebuilds the log — (a) the log of the
//! server with the largest sync-point among those with the latest normal
//! view, up to that sync-point; (b) later entries with a larger timestamp
//! that `⌈f/2⌉ + 1` of the logs hold at the same timestamp — then agrees
//! with the other shards' new leaders on the recovered multi-shard entries
//! (missing ones are added, timestamps are the maximum), executes the log
//! and hands it to its followers (`StartView`).
//!
//! Cross-shard verification (step ④) takes two rounds. Round 1: each new
//! leader sends the others its recovered multi-shard entries (and those it
//! folded recently), marking part (a)'s as pinned: they may have committed,
//! and then at their agreed timestamp, which every participant leader had
//! released them at — so every shard takes a pinned transaction at that
//! timestamp, any other at the largest. If that would put it before a
//! conflicting entry of a shard's part (a), it cannot have committed
//! anywhere (had it, that shard's leader would have released it first, and
//! every view change since would have carried it over), and round 2 tells
//! every participant to drop it — even from part (a), which can come from a
//! log of a view older than the one that dropped it elsewhere. Nothing
//! committed ever moves or disappears; a dropped transaction is resubmitted
//! by its coordinator.
//!
//! A restarted server keeps its durable log but not its queue. Every vote
//! it gave was durable before it left — a follower's fast replies and
//! sync-points, a leader's log entries and (detective mode) its optimistic
//! executions — so it helps rebuild a log like any server: with at most `f`
//! servers of a shard down at a time, a shard whose servers all restarted
//! still recovers. The view manager never makes it leader before it
//! rejoined (Algorithm 6: the leader's log replaces its own).

use super::Tiga;
use super::log::TigaLog;
use super::messages::{
    Checkpoint, LogEntry, Msg, Record, Stamp, StartView, TsVerify, TxnBody, VerifyEntry, VerifyInfo, View, ViewChange,
};
use super::server::{PState, Server, Status};
use meridian_core::{Ctx, Key, NodeId, ShardId, TxnId};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, BTreeSet};

/// View-change ticks a new leader waits for a checkpoint it asked for
/// before rebuilding without that server.
const FETCH_PATIENCE_TICKS: u32 = 20;
use std::sync::Arc;

/// A server's contribution to a log rebuild: its log from `base` (what it
/// folded lies below), how far that log agrees with its last leader's
/// (`sync_point`), and how far it is known committed (`commit_point`, below
/// which every server in every later view holds the same entries).
#[derive(Clone, Debug)]
struct Contribution {
    pub last_normal_view: u64,
    pub sync_point: u64,
    pub commit_point: u64,
    pub base: u64,
    pub log: Arc<Vec<LogEntry>>,
}

impl Contribution {
    /// The entry at log position `pos`, if held.
    fn at(&self, pos: u64) -> Option<&LogEntry> {
        pos.checked_sub(self.base).and_then(|i| self.log.get(i as usize))
    }

    /// Entries at positions in `[from, to)`, clamped to what is held.
    fn range(&self, from: u64, to: u64) -> &[LogEntry] {
        let len = self.log.len() as u64;
        let lo = from.saturating_sub(self.base).min(len) as usize;
        let hi = to.saturating_sub(self.base).min(len) as usize;
        &self.log[lo..hi.max(lo)]
    }
}

/// A checkpoint a new leader asked another server for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Fetching {
    /// The server asked.
    from: NodeId,
    /// View-change ticks waited since.
    waited_ticks: u32,
}

/// The new leader's progress through a view change.
#[derive(Debug, Default)]
pub(super) struct Rebuild {
    quorum: BTreeMap<NodeId, Contribution>,
    /// Servers whose checkpoint this leader asked for and did not get: not
    /// counted again in this view change.
    excluded: BTreeSet<NodeId>,
    /// The checkpoint this leader waits for, if any.
    fetching: Option<Fetching>,
    /// The rebuilt log, from this leader's base, once `f + 1` contributions
    /// arrived.
    log: Option<Vec<LogEntry>>,
    /// The transactions of part (a) of the rebuilt log.
    part_a: FxHashSet<TxnId>,
    /// Transactions this leader proved uncommitted in round 1.
    doomed: BTreeSet<TxnId>,
    /// Transactions this leader lacked and placed later in round 1, with
    /// the timestamp that puts them after what it recovered.
    raised: BTreeMap<TxnId, u64>,
    /// The verification round this leader is in (1 or 2), once it started.
    round: Option<u8>,
    /// Verification messages received: (round, shard) → their content.
    inbox: BTreeMap<(u8, ShardId), Arc<VerifyInfo>>,
    /// What this leader sent in each round, per shard, for re-sends.
    sent: BTreeMap<(u8, ShardId), Arc<VerifyInfo>>,
}

impl Server {
    // ---- Algorithm 5 lines 1-15: a newer view arrives ----

    pub(super) fn on_current_view(&mut self, ctx: &mut Ctx<'_, Tiga>, view: View) {
        if view.g_view < self.core.view.g_view
            || (view.g_view == self.core.view.g_view && self.core.status != Status::Recovering)
        {
            return;
        }
        if self.core.status == Status::Recovering && view.g_view == self.core.view.g_view {
            // Algorithm 6: still the view it restarted in; ask its leader
            // for the log (a restarted leader is replaced by a new view).
            return self.send_view_change(ctx);
        }
        // A newer view: take part in its change like any server — its
        // durable log holds every vote it gave — or lead it.
        self.enter_view_change(ctx, view);
    }

    fn enter_view_change(&mut self, ctx: &mut Ctx<'_, Tiga>, view: View) {
        if self.core.status == Status::Normal {
            self.flush_queue_into_log(ctx);
        }
        self.core.status = Status::ViewChange;
        self.core.view = view;
        self.rebuild = Rebuild::default();
        self.persist_view(ctx);
        self.send_view_change(ctx);
    }

    /// Algorithm 5 lines 7-9: the queue's transactions join the log in
    /// timestamp order; optimistic executions are dropped with the store,
    /// which the new log rebuilds.
    fn flush_queue_into_log(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let pending: Vec<LogEntry> = self.pq.drain().into_iter().map(|p| LogEntry { body: p.body, t: p.t }).collect();
        self.forget_view_work();
        if !pending.is_empty() {
            let pos = self.core.log.len();
            for e in &pending {
                self.core.log.push(e.clone());
            }
            self.core.persist(ctx, Record::Log { pos, entries: pending });
        }
    }

    /// What a view's leader and followers hold only for that view: held
    /// and fetched transactions, announcements, optimistic executions. A
    /// view change drops it (the one place it is reset).
    fn forget_view_work(&mut self) {
        self.held.clear();
        self.sync.forget_fetched();
        self.announcements.clear();
        self.optimistic.forget_executions();
    }

    pub(super) fn persist_view(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let record = Record::View {
            view: self.core.view.clone(),
            last_normal_view: self.core.last_normal_view,
            led: self.core.led,
        };
        self.core.persist(ctx, record);
    }

    /// Algorithm 5 line 15 (and Algorithm 6's request for the log).
    /// Every `resend_ns` during a view change: whatever this server's part
    /// of it may have lost — a new leader's verification round or its
    /// checkpoint fetch, anyone else's log to the new leader.
    pub(super) fn resend_view_change(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        if self.core.is_leader() && self.rebuild.round.is_some() {
            self.resend_verify(ctx);
        } else if self.core.is_leader() && self.rebuild.fetching.is_some() {
            self.refetch_checkpoint(ctx);
        } else {
            self.send_view_change(ctx);
        }
    }

    pub(super) fn send_view_change(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let leader = self.core.leader_node(ctx, self.core.shard);
        let msg = Msg::ViewChange(ViewChange {
            g_view: self.core.view.g_view,
            l_view: self.core.view.l_view(self.core.shard),
            last_normal_view: self.core.last_normal_view,
            sync_point: self.core.log.sync_point(),
            commit_point: self.core.log.commit_point(),
            base: self.core.log.base(),
            log: Arc::new(self.core.log.all().to_vec()),
        });
        // The new leader sends its own too, through persistence like any.
        self.core.send_durable(ctx, leader, msg);
    }

    // ---- Algorithm 5 lines 16-32: the new leader collects logs ----

    pub(super) fn on_view_change(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, m: ViewChange) {
        let ViewChange { g_view, last_normal_view, sync_point, commit_point, base, log, .. } = m;
        let c = Contribution { last_normal_view, sync_point, commit_point, base, log };
        if let Some(r) = ctx.topology().replicas(self.core.shard).iter().position(|n| *n == from) {
            self.sync.reported(r, super::sync::ReportedLog { base: c.base, commit_point: c.commit_point });
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
                if self.rebuild.log.is_some() || self.rebuild.excluded.contains(&from) {
                    return;
                }
                self.rebuild.quorum.insert(from, c);
                self.try_rebuild(ctx);
            }
        }
    }

    /// The contribution part (a) comes from: the largest sync-point among
    /// the latest normal view's (Algorithm 5 lines 46-48).
    fn best_contribution(&self) -> Option<(NodeId, &Contribution)> {
        let q = &self.rebuild.quorum;
        let lnv = q.values().map(|c| c.last_normal_view).max()?;
        q.iter()
            .filter(|(_, c)| c.last_normal_view == lnv)
            .max_by_key(|(n, c)| (c.sync_point, std::cmp::Reverse(**n)))
            .map(|(n, c)| (*n, c))
    }

    /// With `f + 1` contributions, rebuilds the log, first fetching the best
    /// server's checkpoint if it folded positions this leader cannot supply.
    fn try_rebuild(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        if self.rebuild.log.is_some() || self.rebuild.quorum.len() <= self.core.f() {
            return;
        }
        let (best, c) = self.best_contribution().expect("f + 1 contributions");
        if c.base > self.core.log.base() && self.core.log.commit_point() < c.base {
            if self.rebuild.fetching.is_none_or(|f| f.from != best) {
                self.rebuild.fetching = Some(Fetching { from: best, waited_ticks: 0 });
                ctx.send(best, Msg::FetchCheckpoint { g_view: self.core.view.g_view });
            }
            return;
        }
        self.rebuild.fetching = None;
        self.rebuild_log();
        self.verify_round(ctx, 1);
    }

    /// The checkpoint asked for arrives.
    pub(super) fn on_fetched_checkpoint(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, cp: Arc<Checkpoint>) {
        if self.rebuild.log.is_some() || self.rebuild.fetching.is_none_or(|f| f.from != from) {
            return;
        }
        self.rebuild.fetching = None;
        self.adopt_checkpoint(ctx, cp);
        self.try_rebuild(ctx);
    }

    /// Every view-change tick while waiting for a checkpoint: ask again, and
    /// after long silence rebuild without that server.
    fn refetch_checkpoint(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let Some(Fetching { from: node, waited_ticks }) = self.rebuild.fetching else { return };
        if waited_ticks >= FETCH_PATIENCE_TICKS {
            self.rebuild.fetching = None;
            self.rebuild.quorum.remove(&node);
            self.rebuild.excluded.insert(node);
            return self.try_rebuild(ctx);
        }
        self.rebuild.fetching = Some(Fetching { from: node, waited_ticks: waited_ticks + 1 });
        ctx.send(node, Msg::FetchCheckpoint { g_view: self.core.view.g_view });
    }

    /// Algorithm 5 lines 44-63, on logs that start at their bases. Part (a)
    /// keeps its positions: this leader's own committed entries up to the
    /// best log's base if it folded less, then the best log up to its
    /// sync-point. Part (b): later entries that `⌈f/2⌉ + 1` logs hold at the
    /// same timestamp, unless folded here or placed below a conflicting
    /// part (a) entry (the leader would have re-stamped a transaction that
    /// arrived behind one, so such an entry never committed).
    fn rebuild_log(&mut self) {
        let (_, best) = self.best_contribution().expect("f + 1 contributions");
        let best = best.clone();
        let own_base = self.core.log.base();
        let mut log: Vec<LogEntry> = Vec::new();
        if own_base < best.base {
            debug_assert!(
                self.core.log.commit_point() >= best.base,
                "positions below the best base are committed here"
            );
            log.extend(self.core.log.range(own_base, best.base).iter().cloned());
        }
        log.extend(best.range(own_base.max(best.base), best.sync_point).iter().cloned());
        let part_a: FxHashSet<TxnId> = log.iter().map(|e| e.body.id).collect();
        let (a_reads, a_writes) = self.stamp_bounds(&log, &part_a);
        let need = self.core.f().div_ceil(2) + 1;
        let mut holders: BTreeMap<(u64, TxnId), (usize, Arc<TxnBody>)> = BTreeMap::new();
        for c in self.rebuild.quorum.values() {
            for pos in c.sync_point.max(c.base)..c.base + c.log.len() as u64 {
                let e = c.at(pos).expect("held");
                holders.entry((e.t, e.body.id)).or_insert((0, e.body.clone()));
            }
        }
        // Count holders among the whole logs, not only their unsynced parts.
        for ((t, id), (count, _)) in holders.iter_mut() {
            *count =
                self.rebuild.quorum.values().filter(|c| c.log.iter().any(|e| e.body.id == *id && e.t == *t)).count();
        }
        let mut taken: FxHashSet<TxnId> = Default::default();
        for ((t, id), (count, body)) in holders {
            if count < need || part_a.contains(&id) || taken.contains(&id) || self.executed.folded().contains(id) {
                continue;
            }
            let entry = LogEntry { body, t };
            if self.below_part_a(&entry, &a_reads, &a_writes) {
                continue;
            }
            taken.insert(id);
            log.push(entry);
        }
        self.rebuild.part_a = part_a;
        self.rebuild.log = Some(log);
    }

    /// The largest stamp above `e` among the conflicting entries the maps
    /// describe, if any.
    fn conflict_bound_in(
        &self,
        e: &LogEntry,
        reads_of: &FxHashMap<Key, Stamp>,
        writes_of: &FxHashMap<Key, Stamp>,
    ) -> Option<Stamp> {
        let (reads, writes) = self.core.keys_of(&e.body);
        let stamp = e.stamp();
        let w = reads.iter().chain(&writes).filter_map(|k| writes_of.get(k));
        let r = writes.iter().filter_map(|k| reads_of.get(k));
        w.chain(r).copied().filter(|s| *s > stamp).max()
    }

    /// Whether a conflicting entry of part (a) (or a folded one) lies above
    /// `e`.
    fn below_part_a(&self, e: &LogEntry, a_reads: &FxHashMap<Key, Stamp>, a_writes: &FxHashMap<Key, Stamp>) -> bool {
        self.conflict_bound_in(e, a_reads, a_writes).is_some()
    }

    // ---- Algorithm 5 lines 64-78: agreement across shards ----

    fn other_shards(&self) -> Vec<ShardId> {
        (0..self.core.topo.shards).map(ShardId).filter(|s| *s != self.core.shard).collect()
    }

    /// Sends this leader's round-`round` verification to every other shard:
    /// its recovered entries involving that shard (round 1), or the ones it
    /// proved uncommitted (round 2).
    fn verify_round(&mut self, ctx: &mut Ctx<'_, Tiga>, round: u8) {
        assert!(round == 1 || round == 2, "verification has two rounds");
        self.rebuild.round = Some(round);
        let log = self.rebuild.log.as_ref().expect("rebuilt");
        for ss in self.other_shards() {
            let involves = |e: &&LogEntry| e.body.shards.contains(&ss);
            let info = if round == 1 {
                let held = log.iter().filter(involves).map(|e| VerifyEntry {
                    body: e.body.clone(),
                    t: e.t,
                    pinned: self.rebuild.part_a.contains(&e.body.id),
                });
                // Folded ones committed here at their agreed timestamp; a
                // shard that lost one takes it (step ④ (1)).
                let folded = self.executed.folded().in_order().filter_map(|d| {
                    let body = d.body.as_ref().filter(|b| b.shards.contains(&ss))?;
                    Some(VerifyEntry { body: body.clone(), t: d.t, pinned: true })
                });
                let entries = held.chain(folded).collect();
                VerifyInfo { entries, doomed: Vec::new(), raised: Vec::new() }
            } else {
                let doomed = log
                    .iter()
                    .filter(involves)
                    .map(|e| e.body.id)
                    .filter(|id| self.rebuild.doomed.contains(id))
                    .collect();
                let raised = log
                    .iter()
                    .filter(involves)
                    .filter_map(|e| self.rebuild.raised.get(&e.body.id).map(|t| (e.body.id, *t)))
                    .collect();
                VerifyInfo { entries: Vec::new(), doomed, raised }
            };
            self.rebuild.sent.insert((round, ss), Arc::new(info));
        }
        self.resend_verify(ctx);
        self.try_finish_round(ctx);
    }

    fn resend_verify(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let Some(round) = self.rebuild.round else { return };
        for ss in self.other_shards() {
            if let Some(info) = self.rebuild.sent.get(&(round, ss)).cloned() {
                let to = self.core.leader_node(ctx, ss);
                ctx.count("verify_messages", 1);
                ctx.send(
                    to,
                    Msg::TsVerify(TsVerify {
                        g_view: self.core.view.g_view,
                        round,
                        shard: self.core.shard,
                        info,
                        echo: false,
                    }),
                );
            }
        }
    }

    pub(super) fn on_ts_verify(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, m: TsVerify) {
        let TsVerify { g_view, round, shard, info, echo, .. } = m;
        if g_view != self.core.view.g_view || !self.core.is_leader() || from != self.core.leader_node(ctx, shard) {
            return;
        }
        if !(1..=2).contains(&round) {
            return;
        }
        if self.core.status == Status::Normal || self.rebuild.round.is_some_and(|r| round < r) {
            // This leader is past that round; the sender still waits for
            // its message of it (which may have been lost).
            if let Some(mine) = self.rebuild.sent.get(&(round, shard)).cloned().filter(|_| !echo) {
                ctx.count("verify_messages", 1);
                ctx.send(
                    from,
                    Msg::TsVerify(TsVerify { g_view, round, shard: self.core.shard, info: mine, echo: true }),
                );
            }
            if self.core.status == Status::Normal {
                return;
            }
        }
        self.rebuild.inbox.insert((round, shard), info);
        if self.core.status == Status::ViewChange {
            self.try_finish_round(ctx);
        }
    }

    fn try_finish_round(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let Some(round) = self.rebuild.round else { return };
        if self.rebuild.log.is_none() {
            return;
        }
        let others = self.other_shards();
        if !others.iter().all(|s| self.rebuild.inbox.contains_key(&(round, *s))) {
            return;
        }
        let infos: Vec<Arc<VerifyInfo>> = others.iter().map(|s| self.rebuild.inbox[&(round, *s)].clone()).collect();
        if round == 1 {
            self.merge_recovered(ctx, &infos);
            self.verify_round(ctx, 2);
        } else {
            self.drop_doomed(&infos);
            self.finish_view_change(ctx);
        }
    }

    /// Round 1 (step ④ (1) and (2)): adds the other shards' entries this log
    /// lacks and gives each transaction its pinned timestamp, or else the
    /// largest; then dooms the moved or added ones that would precede a
    /// conflicting entry of part (a) here.
    fn merge_recovered(&mut self, ctx: &mut Ctx<'_, Tiga>, infos: &[Arc<VerifyInfo>]) {
        let mut log = self.rebuild.log.take().expect("rebuilt");
        let own: FxHashSet<TxnId> = log.iter().map(|e| e.body.id).collect();
        let (own_reads, own_writes) = self.stamp_bounds(&log, &own);
        let mut index: FxHashMap<TxnId, usize> = log.iter().enumerate().map(|(i, e)| (e.body.id, i)).collect();
        // id → (largest timestamp, pinned timestamp if any)
        let mut best: BTreeMap<TxnId, (u64, Option<u64>)> = BTreeMap::new();
        for e in infos.iter().flat_map(|i| i.entries.iter()) {
            if !e.body.shards.contains(&self.core.shard) || self.executed.folded().contains(e.body.id) {
                continue; // not ours, or folded here (committed, at its agreed timestamp)
            }
            if !index.contains_key(&e.body.id) && self.executed.folded().stale(e.body.id) {
                // Its coordinator saw it commit at every shard, so this one
                // folded it and has forgotten it since.
                continue;
            }
            if let std::collections::hash_map::Entry::Vacant(slot) = index.entry(e.body.id) {
                slot.insert(log.len());
                log.push(LogEntry { body: e.body.clone(), t: e.t });
            }
            let b = best.entry(e.body.id).or_insert((0, None));
            b.0 = b.0.max(e.t);
            if e.pinned {
                b.1 = Some(b.1.map_or(e.t, |p| p.max(e.t)));
            }
        }
        let (a_reads, a_writes) = self.stamp_bounds(&log, &self.rebuild.part_a);
        for (id, (t_max, pinned_t)) in best {
            let i = index[&id];
            let own_pin = self.rebuild.part_a.contains(&id).then_some(log[i].t);
            let t = match (own_pin, pinned_t) {
                (Some(own), _) => own.max(pinned_t.unwrap_or(0)),
                (None, Some(p)) => p,
                (None, None) => t_max.max(log[i].t),
            };
            log[i].t = t;
            if own_pin.is_some() {
                continue; // in place here, with what it conflicts with
            }
            // Even a transaction another shard pinned: had it committed, a
            // conflicting entry synced here above its timestamp would have
            // seen it (its leader released it there first, and every view
            // change since carried it over). A pin can come from a log of an
            // older view than the one that dropped it here.
            if self.below_part_a(&log[i], &a_reads, &a_writes) {
                self.rebuild.doomed.insert(id);
                ctx.count("recovery_dropped", 1);
                continue;
            }
            // Step ④ (1) for a transaction this shard lacks and no shard
            // pinned. Either this shard's old leader ordered it, announced
            // its timestamp and was lost before any follower here held it
            // — then nothing this shard recovered above it was released
            // before it, and it keeps its place — or no leader here ever
            // ordered it: then no timestamp was agreed, no participant
            // released a conflicting successor after it, and entries this
            // shard recovered above it may have committed without it. The
            // logs cannot tell the two apart; placing it after this shard's
            // conflicting entries is right in the second case and in the
            // first unless another shard committed a successor of it in
            // between (docs/tiga.md, "Recovery beyond the paper").
            if !own.contains(&id) && pinned_t.is_none() {
                if let Some(bound) = self.conflict_bound_in(&log[i], &own_reads, &own_writes) {
                    let t = bound.t + 1;
                    log[i].t = t;
                    self.rebuild.raised.insert(id, t);
                    ctx.count("recovery_raised", 1);
                }
            }
        }
        self.rebuild.log = Some(log);
    }

    /// The largest stamp reading and writing each key among the entries of
    /// `log` in `part` (part (a), or all this shard recovered), the folded
    /// entries included.
    fn stamp_bounds(
        &self,
        log: &[LogEntry],
        part: &FxHashSet<TxnId>,
    ) -> (FxHashMap<Key, Stamp>, FxHashMap<Key, Stamp>) {
        let mut reads: FxHashMap<Key, Stamp> = self.executed.checkpoint().rmap.iter().map(|(k, s)| (*k, *s)).collect();
        let mut writes: FxHashMap<Key, Stamp> = self.executed.checkpoint().wmap.iter().map(|(k, s)| (*k, *s)).collect();
        for e in log.iter().filter(|e| part.contains(&e.body.id)) {
            let (r, w) = self.core.keys_of(&e.body);
            for (keys, map) in [(r, &mut reads), (w, &mut writes)] {
                for k in keys {
                    let s = map.entry(k).or_insert(e.stamp());
                    *s = (*s).max(e.stamp());
                }
            }
        }
        (reads, writes)
    }

    /// Round 2: every participant drops what any of them doomed.
    fn drop_doomed(&mut self, infos: &[Arc<VerifyInfo>]) {
        let mut doomed = std::mem::take(&mut self.rebuild.doomed);
        doomed.extend(infos.iter().flat_map(|i| i.doomed.iter().copied()));
        let mut raised = std::mem::take(&mut self.rebuild.raised);
        for (id, t) in infos.iter().flat_map(|i| i.raised.iter().copied()) {
            let r = raised.entry(id).or_insert(t);
            *r = (*r).max(t);
        }
        let log = self.rebuild.log.as_mut().expect("rebuilt");
        for e in log.iter_mut() {
            if let Some(t) = raised.get(&e.body.id) {
                debug_assert!(!self.rebuild.part_a.contains(&e.body.id), "raised only when no shard pinned it");
                e.t = e.t.max(*t);
            }
        }
        // Dropped from part (a) too: it lies past every commit-point (it
        // never committed), so no folded position moves.
        log.retain(|e| !doomed.contains(&e.body.id));
        let part_a = &mut self.rebuild.part_a;
        part_a.retain(|id| !doomed.contains(id));
    }

    /// Algorithm 5 line 78 and step ⑤: the rebuilt log becomes this
    /// leader's — part (a) in place, the rest in timestamp order — and it
    /// executes it and hands it to the followers.
    fn finish_view_change(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let log = self.rebuild.log.take().expect("rebuilt");
        let part_a = &self.rebuild.part_a;
        let kept_a = log.iter().take_while(|e| part_a.contains(&e.body.id)).count();
        debug_assert!(log[kept_a..].iter().all(|e| !part_a.contains(&e.body.id)), "part (a) comes first");
        let (a, rest) = log.split_at(kept_a);
        let mut rest = rest.to_vec();
        rest.sort_by_key(|e| e.stamp());
        let entries: Vec<LogEntry> = a.iter().cloned().chain(rest).collect();
        self.install_log(ctx, entries, true);
        ctx.count("view_change_completions", 1);
        let followers: Vec<NodeId> =
            self.core.topo.replicas(self.core.shard).iter().copied().filter(|n| *n != ctx.me()).collect();
        for node in followers {
            self.send_start_view(ctx, node);
        }
    }

    /// The log from this leader's base, with its checkpoint unless the
    /// follower said it folded or committed as far (and so holds the same
    /// entries below the base).
    pub(super) fn send_start_view(&mut self, ctx: &mut Ctx<'_, Tiga>, to: NodeId) {
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
    pub(super) fn on_start_view(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, m: StartView) {
        let StartView { g_view, l_view, base, log, checkpoint, .. } = m;
        if g_view != self.core.view.g_view || l_view != self.core.view.l_view(self.core.shard) || self.core.is_leader()
        {
            return;
        }
        if from != self.core.leader_node(ctx, self.core.shard) {
            return;
        }
        if self.core.status == Status::Normal {
            return super::sync::report_sync(&mut self.core, ctx, Vec::new()); // a re-send: acknowledge
        }
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
            return self.send_view_change(ctx);
        };
        self.install_log(ctx, entries, false);
        super::sync::report_sync(&mut self.core, ctx, Vec::new());
    }

    /// Replaces the log (from this server's base) and everything derived
    /// from it; the server is normal in the current view afterwards, and
    /// its durable log is one snapshot of it.
    fn install_log(&mut self, ctx: &mut Ctx<'_, Tiga>, entries: Vec<LogEntry>, leading: bool) {
        self.pq = Default::default();
        self.forget_view_work();
        let log = TigaLog::from_base(self.core.log.base(), entries);
        assert!(self.executed.applied() <= log.len(), "executed past the new log");
        let (len, committed) = (log.len(), self.core.log.commit_point());
        self.core.log.reset(log, len, committed);
        self.executed.keep_replies_in(&self.core.log);
        self.rebuild_derived();
        self.core.status = Status::Normal;
        self.core.last_normal_view = self.core.view.g_view;
        self.core.led = leading;
        let len = self.core.log.len();
        self.sync.restart_at(len);
        self.core.forget_durable_len();
        self.persist_snapshot(ctx);
        if leading {
            self.execute_log_from_state();
            self.core.log_length_once_durable(ctx);
        } else {
            self.optimistic.drop_store();
        }
    }

    /// Leader, every tick: followers that never acknowledged the current
    /// view get its log again.
    pub(super) fn resend_start_view(&mut self, ctx: &mut Ctx<'_, Tiga>) {
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

    /// Whether a queued transaction waits for timestamp agreement.
    pub(super) fn awaiting_agreement(state: &PState) -> bool {
        matches!(state, PState::Executed { .. } | PState::Notified)
    }
}
