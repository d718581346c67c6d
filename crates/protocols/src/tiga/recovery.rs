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
//! Cross-shard verification takes two rounds here where Algorithm 5 shows
//! one: a transaction a shard adds (it never saw it) or moves to a larger
//! timestamp is placed after every entry it conflicts with in that shard's
//! log, which may raise its timestamp again; the second round makes every
//! shard agree on that final timestamp. Only uncommitted transactions ever
//! move (a committed one holds its agreed timestamp in every rebuilt log),
//! so no committed result changes.
//!
//! A restarted server keeps its durable log but not its queue. A follower's
//! votes (fast replies, sync-points) were all durable, so it may help
//! rebuild a log; a server that led may not (its optimistic replies were
//! not), so the view manager replaces it and it only takes the new leader's
//! log (Algorithm 6).

use super::Tiga;
use super::messages::{LogEntry, Mode, Msg, Record, TxnBody, View};
use super::server::{PState, Server, Status};
use meridian_core::{Ctx, NodeId, ShardId, TxnId};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The multi-shard entries one leader tells another in verification.
pub(super) type VerifyInfo = Arc<Vec<(Arc<TxnBody>, u64)>>;

/// A server's contribution to a log rebuild.
#[derive(Clone, Debug)]
pub(super) struct Contribution {
    pub last_normal_view: u64,
    pub sync_point: u64,
    pub log: Arc<Vec<LogEntry>>,
}

/// The new leader's progress through a view change.
#[derive(Debug, Default)]
pub(super) struct Rebuild {
    pub quorum: BTreeMap<NodeId, Contribution>,
    /// The rebuilt log, once `f + 1` contributions arrived.
    pub log: Option<Vec<LogEntry>>,
    /// The verification round this leader is in (1 or 2; 0 before).
    pub round: u8,
    /// Verification messages received: (round, shard) → entries.
    pub inbox: BTreeMap<(u8, ShardId), VerifyInfo>,
    /// What this leader sent in each round, per shard, for re-sends.
    pub sent: BTreeMap<(u8, ShardId), VerifyInfo>,
}

impl Server {
    fn f(&self) -> usize {
        ((self.n - 1) / 2) as usize
    }

    pub(super) fn vm_members(&self) -> Vec<NodeId> {
        self.topo.service("viewmgr").to_vec()
    }

    /// Whether this server's durable state misses votes it gave (it led).
    pub(super) fn lost_votes(&self) -> bool {
        self.restarted && (self.led || self.is_leader())
    }

    // ---- Algorithm 5 lines 1-15: a newer view arrives ----

    pub(super) fn on_current_view(&mut self, ctx: &mut Ctx<'_, Tiga>, view: View) {
        if view.g_view < self.view.g_view || (view.g_view == self.view.g_view && self.status != Status::Recovering) {
            return;
        }
        if self.status == Status::Recovering {
            // Algorithm 6: learn the view, then ask its leader for the log.
            self.view = view;
            self.persist_view(ctx);
            self.send_view_change(ctx);
            return;
        }
        self.enter_view_change(ctx, view);
    }

    fn enter_view_change(&mut self, ctx: &mut Ctx<'_, Tiga>, view: View) {
        if self.status == Status::Normal {
            self.flush_queue_into_log(ctx);
        }
        self.status = Status::ViewChange;
        self.view = view;
        self.rebuild = Rebuild::default();
        self.persist_view(ctx);
        self.send_view_change(ctx);
    }

    /// Algorithm 5 lines 7-9: the queue's transactions join the log in
    /// timestamp order; optimistic executions are dropped with the store,
    /// which the new log rebuilds.
    fn flush_queue_into_log(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let pending: Vec<LogEntry> =
            std::mem::take(&mut self.pq).into_values().map(|p| LogEntry { body: p.body, t: p.t }).collect();
        self.stamps.clear();
        self.held.clear();
        self.fetched.clear();
        self.notes.clear();
        self.unknown_notes.clear();
        self.undo.clear();
        if !pending.is_empty() {
            let pos = self.log.len();
            for e in &pending {
                self.log.push(e.clone());
            }
            self.persist(ctx, Record::Log { pos, entries: pending });
        }
    }

    pub(super) fn persist_view(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let record = Record::View { view: self.view.clone(), last_normal_view: self.last_normal_view, led: self.led };
        self.persist(ctx, record);
    }

    /// Algorithm 5 line 15 (and Algorithm 6's request for the log).
    pub(super) fn send_view_change(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let leader = self.leader_node(ctx, self.shard);
        let msg = Msg::ViewChange {
            g_view: self.view.g_view,
            l_view: self.view.l_view(self.shard),
            last_normal_view: self.last_normal_view,
            sync_point: self.sync_point,
            log: Arc::new(self.log.all().to_vec()),
            lost_votes: self.lost_votes(),
        };
        // The new leader sends its own too, through persistence like any.
        self.send_durable(ctx, leader, msg);
    }

    // ---- Algorithm 5 lines 16-32: the new leader collects logs ----

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_view_change(
        &mut self,
        ctx: &mut Ctx<'_, Tiga>,
        from: NodeId,
        g_view: u64,
        last_normal_view: u64,
        sync_point: u64,
        log: Arc<Vec<LogEntry>>,
        lost_votes: bool,
    ) {
        if g_view > self.view.g_view {
            // The sender knows a newer view than this server: ask for it.
            for vm in self.vm_members() {
                ctx.send(vm, Msg::GetView);
            }
            return;
        }
        if g_view < self.view.g_view || !self.is_leader() {
            return;
        }
        match self.status {
            Status::Normal => self.send_start_view(ctx, from),
            Status::Recovering => {}
            Status::ViewChange => {
                if lost_votes || self.rebuild.log.is_some() {
                    return;
                }
                let c = Contribution { last_normal_view, sync_point, log };
                self.rebuild.quorum.insert(from, c);
                if self.rebuild.quorum.len() > self.f() {
                    self.rebuild_log();
                    self.verify_round(ctx, 1);
                }
            }
        }
    }

    /// Algorithm 5 lines 44-63.
    fn rebuild_log(&mut self) {
        let q = &self.rebuild.quorum;
        let lnv = q.values().map(|c| c.last_normal_view).max().expect("f + 1 contributions");
        let best = q.values().filter(|c| c.last_normal_view == lnv).max_by_key(|c| c.sync_point).expect("one has lnv");
        let sp = (best.sync_point as usize).min(best.log.len());
        // Part (a): everything the most advanced server synced.
        let mut log: Vec<LogEntry> = best.log[..sp].to_vec();
        let t_max = log.iter().map(|e| e.t).max().unwrap_or(0);
        // Part (b): other entries ⌈f/2⌉ + 1 logs hold at the same timestamp.
        let need = self.f().div_ceil(2) + 1;
        let mut seen: BTreeMap<(u64, TxnId), (usize, Arc<TxnBody>)> = BTreeMap::new();
        for c in q.values() {
            let mut mine: Vec<(u64, TxnId)> = Vec::new();
            for e in c.log.iter().skip((c.sync_point as usize).min(c.log.len())) {
                mine.push((e.t, e.body.id));
                seen.entry((e.t, e.body.id)).or_insert((0, e.body.clone()));
            }
            mine.sort_unstable();
            mine.dedup();
            for k in mine {
                seen.get_mut(&k).expect("inserted").0 += 1;
            }
        }
        // Count holders among the whole logs, not only their unsynced parts.
        for ((t, id), (count, _)) in seen.iter_mut() {
            *count = q.values().filter(|c| c.log.iter().any(|e| e.body.id == *id && e.t == *t)).count();
        }
        let in_a: rustc_hash::FxHashSet<TxnId> = log.iter().map(|e| e.body.id).collect();
        let mut taken: rustc_hash::FxHashSet<TxnId> = Default::default();
        let mut part_b = Vec::new();
        for ((t, id), (count, body)) in seen {
            if count < need || in_a.contains(&id) || taken.contains(&id) {
                continue;
            }
            // An entry below part (a)'s largest timestamp was committed only
            // if nothing in part (a) it conflicts with lies above it (the
            // leader re-stamps a transaction that arrives behind a
            // conflicting one, so it would sit in part (a) itself); one that
            // does would change a committed result: it is left out.
            let (reads, writes) = self.keys_of(&body);
            let entry = LogEntry { body, t };
            if t <= t_max && log.iter().any(|a| a.t > t && self.conflicts(a, &reads, &writes)) {
                continue;
            }
            taken.insert(id);
            part_b.push(entry);
        }
        log.extend(part_b);
        self.rebuild.log = Some(log);
    }

    // ---- Algorithm 5 lines 64-78: agreement across shards ----

    fn other_shards(&self) -> Vec<ShardId> {
        (0..self.topo.shards).map(ShardId).filter(|s| *s != self.shard).collect()
    }

    /// Sends this leader's round-`round` verification to every other shard.
    fn verify_round(&mut self, ctx: &mut Ctx<'_, Tiga>, round: u8) {
        self.rebuild.round = round;
        let log = self.rebuild.log.as_ref().expect("rebuilt");
        for ss in self.other_shards() {
            let info: Vec<(Arc<TxnBody>, u64)> =
                log.iter().filter(|e| e.body.shards.contains(&ss)).map(|e| (e.body.clone(), e.t)).collect();
            self.rebuild.sent.insert((round, ss), Arc::new(info));
        }
        self.resend_verify(ctx);
        self.try_finish_round(ctx);
    }

    pub(super) fn resend_verify(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let round = self.rebuild.round;
        for ss in self.other_shards() {
            if let Some(info) = self.rebuild.sent.get(&(round, ss)).cloned() {
                let to = self.leader_node(ctx, ss);
                ctx.send(to, Msg::TsVerify { g_view: self.view.g_view, round, shard: self.shard, info });
            }
        }
    }

    pub(super) fn on_ts_verify(
        &mut self,
        ctx: &mut Ctx<'_, Tiga>,
        from: NodeId,
        g_view: u64,
        round: u8,
        shard: ShardId,
        info: VerifyInfo,
    ) {
        if g_view != self.view.g_view || !self.is_leader() || from != self.leader_node(ctx, shard) {
            return;
        }
        if self.status == Status::Normal {
            // This leader finished; the sender still waits for its message.
            if let Some(mine) = self.rebuild.sent.get(&(round, shard)).cloned() {
                ctx.send(from, Msg::TsVerify { g_view, round, shard: self.shard, info: mine });
            }
            return;
        }
        if !(1..=2).contains(&round) {
            return;
        }
        self.rebuild.inbox.insert((round, shard), info);
        if self.status == Status::ViewChange {
            self.try_finish_round(ctx);
        }
    }

    fn try_finish_round(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let round = self.rebuild.round;
        if round == 0 || self.rebuild.log.is_none() {
            return;
        }
        let others = self.other_shards();
        if !others.iter().all(|s| self.rebuild.inbox.contains_key(&(round, *s))) {
            return;
        }
        let infos: Vec<(Arc<TxnBody>, u64)> =
            others.iter().flat_map(|s| self.rebuild.inbox[&(round, *s)].iter().cloned()).collect();
        self.merge_verified(infos, round == 1);
        if round == 1 {
            self.verify_round(ctx, 2);
        } else {
            self.finish_view_change(ctx);
        }
    }

    /// Adds the other shards' entries this log lacks and takes the largest
    /// timestamp of each; in round 1 an added or moved entry goes after
    /// everything it conflicts with here.
    fn merge_verified(&mut self, infos: Vec<(Arc<TxnBody>, u64)>, place_after_conflicts: bool) {
        let mut log = self.rebuild.log.take().expect("rebuilt");
        let mut index: FxHashMap<TxnId, usize> = log.iter().enumerate().map(|(i, e)| (e.body.id, i)).collect();
        let mut changed: Vec<usize> = Vec::new();
        for (body, t) in infos {
            if !body.shards.contains(&self.shard) {
                continue;
            }
            match index.get(&body.id) {
                Some(i) if log[*i].t >= t => {}
                Some(i) => {
                    log[*i].t = t;
                    changed.push(*i);
                }
                None => {
                    index.insert(body.id, log.len());
                    changed.push(log.len());
                    log.push(LogEntry { body, t });
                }
            }
        }
        if place_after_conflicts {
            changed.sort_unstable();
            changed.dedup();
            let fixed: Vec<bool> = (0..log.len()).map(|i| changed.binary_search(&i).is_err()).collect();
            for i in changed {
                let (reads, writes) = self.keys_of(&log[i].body);
                let bound = log
                    .iter()
                    .enumerate()
                    .filter(|(j, e)| fixed[*j] && e.t >= log[i].t && self.conflicts(e, &reads, &writes))
                    .map(|(_, e)| e.t)
                    .max();
                if let Some(b) = bound {
                    log[i].t = b + 1;
                }
            }
        }
        self.rebuild.log = Some(log);
    }

    fn conflicts(&self, e: &LogEntry, reads: &[meridian_core::Key], writes: &[meridian_core::Key]) -> bool {
        let (r2, w2) = self.keys_of(&e.body);
        writes.iter().any(|k| r2.contains(k) || w2.contains(k)) || reads.iter().any(|k| w2.contains(k))
    }

    /// Algorithm 5 line 78 and step ⑤: the log in timestamp order becomes
    /// this leader's; it executes it and hands it to the followers.
    fn finish_view_change(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let mut log = self.rebuild.log.take().expect("rebuilt");
        log.sort_by_key(|e| e.stamp());
        self.install_log(ctx, log, true);
        ctx.count("view_change_completions", 1);
        let followers: Vec<NodeId> =
            self.topo.replicas(self.shard).iter().copied().filter(|n| *n != ctx.me()).collect();
        for node in followers {
            self.send_start_view(ctx, node);
        }
    }

    pub(super) fn send_start_view(&mut self, ctx: &mut Ctx<'_, Tiga>, to: NodeId) {
        let msg = Msg::StartView {
            g_view: self.view.g_view,
            l_view: self.view.l_view(self.shard),
            log: Arc::new(self.log.all().to_vec()),
        };
        self.send_durable(ctx, to, msg);
    }

    /// Algorithm 5 lines 37-43 (and Algorithm 6 lines 36-43).
    pub(super) fn on_start_view(
        &mut self,
        ctx: &mut Ctx<'_, Tiga>,
        from: NodeId,
        g_view: u64,
        l_view: u64,
        log: Arc<Vec<LogEntry>>,
    ) {
        if g_view != self.view.g_view || l_view != self.view.l_view(self.shard) || self.is_leader() {
            return;
        }
        if from != self.leader_node(ctx, self.shard) {
            return;
        }
        if self.status == Status::Normal {
            return self.report_sync(ctx, Vec::new()); // a re-send: acknowledge
        }
        self.install_log(ctx, log.to_vec(), false);
        self.report_sync(ctx, Vec::new());
    }

    /// Replaces the log and everything derived from it; the server is
    /// normal in the current view afterwards.
    fn install_log(&mut self, ctx: &mut Ctx<'_, Tiga>, entries: Vec<LogEntry>, leading: bool) {
        self.pq.clear();
        self.stamps.clear();
        self.held.clear();
        self.fetched.clear();
        self.notes.clear();
        self.unknown_notes.clear();
        self.undo.clear();
        self.replied.clear();
        self.rmap.clear();
        self.wmap.clear();
        self.hashes = super::hash::KeyHashes::new();
        self.log = super::log::TigaLog::new();
        let topo = Arc::clone(&self.topo);
        for e in &entries {
            self.hashes.toggle(e, self.shard, |k| topo.shard_of(k));
            let (reads, writes) = self.keys_of(&e.body);
            self.note_released(e.stamp(), &reads, &writes);
            self.log.push(e.clone());
        }
        self.persist(ctx, Record::Log { pos: 0, entries });
        self.sync_point = self.log.len();
        self.persist(ctx, Record::SyncPoint(self.sync_point));
        self.commit_point = 0;
        self.status = Status::Normal;
        self.restarted = false;
        self.last_normal_view = self.view.g_view;
        self.led = leading;
        self.persist_view(ctx);
        let len = self.log.len();
        self.peer_acked = vec![0; self.n as usize];
        self.peer_sent = vec![len; self.n as usize];
        self.peer_stalled = vec![0; self.n as usize];
        self.peer_in_view = vec![false; self.n as usize];
        if leading {
            self.execute_log_from_scratch();
            self.leader_log_durable = 0;
            let lsn = self.last_lsn;
            self.len_at_lsn.push_back((lsn, len));
        } else {
            self.store = crate::shared::mvstore::MvStore::new();
            self.applied = 0;
        }
        debug_assert!(self.view.mode == Mode::Preventive || self.view.mode == Mode::Detective);
    }

    /// Leader, every tick: followers that never acknowledged the current
    /// view get its log again.
    pub(super) fn resend_start_view(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let lagging: Vec<NodeId> = self
            .topo
            .replicas(self.shard)
            .iter()
            .enumerate()
            .filter(|(r, _)| *r as u32 != self.replica && !self.peer_in_view[*r])
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
