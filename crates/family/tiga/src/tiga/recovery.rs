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
//! (missing ones are added, timestamps are the maximum), hands the log to
//! its followers (`StartView`) and, once every participant's is durable,
//! executes it.
//!
//! Cross-shard verification (step ④) takes three rounds. Round 1: each new
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
//! Round 3 (beyond the paper): each new leader installs its log and hands
//! it to its followers, and tells the others once `f + 1` servers of its
//! shard hold it durably. Until every participant told it so, it holds its
//! commit-point and releases and answers nothing (`Core::confirming`; it
//! admits submissions, released once it is confirmed): otherwise
//! a shard could execute the agreed log while another's was lost with its
//! new leader, and the next view change — rebuilding that shard from its
//! older logs — could drop what the first had executed. Once every shard's
//! log is durable at `f + 1` servers, every later view change starts each
//! shard from it, and the agreed logs stay agreed. So round 1 may still
//! doom a transaction pinned by a shard whose part (a) comes from a newer
//! view than the dooming shard's: that newer view's log never reached
//! `f + 1` servers of the dooming shard, so it was never confirmed and no
//! shard executed anything of it.
//!
//! A restarted server keeps its durable log but not its queue. Every vote
//! it gave was durable before it left — a follower's fast replies and
//! sync-points, a leader's log entries and (detective mode) its optimistic
//! executions — so it helps rebuild a log like any server: with at most `f`
//! servers of a shard down at a time, a shard whose servers all restarted
//! still recovers. The view manager never makes it leader before it
//! rejoined (Algorithm 6: the leader's log replaces its own).
//!
//! Here is the new leader's side (`Rebuild`, private fields, taking the
//! server's `Core` and `Executed` state as parameters and calling no other
//! concern): the step that completes the change returns the new log, and
//! the server installs it. Entering a view change, installing a view's log
//! (`StartView`) and adopting a checkpoint replace the whole server state
//! and are the server's (`server.rs`).

use super::Tiga;
use super::checkpoint::Executed;
use super::messages::{LogEntry, Msg, Stamp, TsVerify, TxnBody, VerifyEntry, VerifyInfo, ViewChange};
use super::server::{Core, Status};
use super::sync::ReportedLog;
use meridian_core::{Ctx, Key, NodeId, ShardId, TxnId};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, BTreeSet};

/// View-change ticks a new leader waits for a checkpoint it asked for
/// before rebuilding without that server.
const FETCH_PATIENCE_TICKS: u32 = 20;
use std::sync::Arc;

/// A server's contribution to a log rebuild: its log from `base` (what it
/// folded lies below) and how far that log agrees with its last leader's
/// (`sync_point`). How far it is known committed goes to the followers'
/// progress (`ReportedLog`): below it every server in every later view
/// holds the same entries.
#[derive(Clone, Debug)]
pub(super) struct Contribution {
    last_normal_view: u64,
    sync_point: u64,
    base: u64,
    log: Arc<Vec<LogEntry>>,
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
    /// The verification round this leader is in (1, 2 or 3), once it
    /// started.
    round: Option<u8>,
    /// Round 3: the length of the installed log that must be durable at
    /// `f + 1` servers of this shard before this leader tells the others.
    confirm_len: Option<u64>,
    /// Verification messages received: (round, shard) → their content.
    inbox: BTreeMap<(u8, ShardId), Arc<VerifyInfo>>,
    /// What this leader sent in each round, per shard, for re-sends.
    sent: BTreeMap<(u8, ShardId), Arc<VerifyInfo>>,
}

/// A view change's side that needs nothing of the server but its core:
/// this server's log and points to the new leader (Algorithm 5 line 15,
/// and Algorithm 6's request for the log).
pub(super) fn send_view_change(core: &mut Core, ctx: &mut Ctx<'_, Tiga>) {
    let leader = core.leader_node(ctx, core.shard());
    let msg = Msg::ViewChange(ViewChange {
        g_view: core.view().g_view,
        l_view: core.view().l_view(core.shard()),
        last_normal_view: core.last_normal_view(),
        sync_point: core.log().sync_point(),
        commit_point: core.log().commit_point(),
        base: core.log().base(),
        log: Arc::new(core.log().all().to_vec()),
    });
    // The new leader sends its own too, through persistence like any.
    core.send_durable(ctx, leader, msg);
}

fn other_shards(core: &Core) -> Vec<ShardId> {
    (0..core.topo().shards).map(ShardId).filter(|s| *s != core.shard()).collect()
}

/// The largest stamp above `e` among the conflicting entries the maps
/// describe, if any.
fn conflict_bound_in(
    core: &Core,
    e: &LogEntry,
    reads_of: &FxHashMap<Key, Stamp>,
    writes_of: &FxHashMap<Key, Stamp>,
) -> Option<Stamp> {
    let (reads, writes) = core.keys_of(&e.body);
    let stamp = e.stamp();
    let w = reads.iter().chain(&writes).filter_map(|k| writes_of.get(k));
    let r = writes.iter().filter_map(|k| reads_of.get(k));
    w.chain(r).copied().filter(|s| *s > stamp).max()
}

/// Whether a conflicting entry of part (a) (or a folded one) lies above
/// `e`.
fn below_part_a(core: &Core, e: &LogEntry, a_reads: &FxHashMap<Key, Stamp>, a_writes: &FxHashMap<Key, Stamp>) -> bool {
    conflict_bound_in(core, e, a_reads, a_writes).is_some()
}

/// The largest stamp reading and writing each key among the entries of
/// `log` in `part` (part (a), or all this shard recovered), the folded
/// entries (`executed`'s checkpoint) included.
fn stamp_bounds(
    core: &Core,
    executed: &Executed,
    log: &[LogEntry],
    part: &FxHashSet<TxnId>,
) -> (FxHashMap<Key, Stamp>, FxHashMap<Key, Stamp>) {
    let mut reads: FxHashMap<Key, Stamp> = executed.checkpoint().rmap.iter().map(|(k, s)| (*k, *s)).collect();
    let mut writes: FxHashMap<Key, Stamp> = executed.checkpoint().wmap.iter().map(|(k, s)| (*k, *s)).collect();
    for e in log.iter().filter(|e| part.contains(&e.body.id)) {
        let (r, w) = core.keys_of(&e.body);
        for (keys, map) in [(r, &mut reads), (w, &mut writes)] {
            for k in keys {
                let s = map.entry(k).or_insert(e.stamp());
                *s = (*s).max(e.stamp());
            }
        }
    }
    (reads, writes)
}

/// The new leader's log, once the view change is done: the server installs
/// it and hands it to the followers.
pub(super) type Finished = Option<Vec<LogEntry>>;

/// The view change at the new leader (Algorithm 5 lines 16-78). Its methods
/// take the server's [`Core`] and its [`Executed`] state (the folded
/// memory, the checkpoint's conflict stamps) as parameters and call no
/// other concern; the one that completes the change returns the new log
/// ([`Finished`]) for the server to install.
impl Rebuild {
    /// A newer view's change begins: nothing collected yet.
    pub(super) fn restart(&mut self) {
        *self = Rebuild::default();
    }

    /// Every `resend_ns` during a view change: whatever this server's part
    /// of it may have lost — a new leader's verification round or its
    /// checkpoint fetch, anyone else's log to the new leader.
    pub(super) fn resend(&mut self, core: &mut Core, ctx: &mut Ctx<'_, Tiga>, executed: &Executed) -> Finished {
        if core.is_leader() && self.round.is_some() {
            self.resend_verify(core, ctx);
            None
        } else if core.is_leader() && self.fetching.is_some() {
            self.refetch_checkpoint(core, ctx, executed)
        } else {
            send_view_change(core, ctx);
            None
        }
    }

    // ---- Algorithm 5 lines 16-32: the new leader collects logs ----

    /// A contribution `c` from `from`, at the new leader during the change.
    pub(super) fn on_contribution(
        &mut self,
        core: &Core,
        ctx: &mut Ctx<'_, Tiga>,
        from: NodeId,
        c: Contribution,
        executed: &Executed,
    ) -> Finished {
        if self.log.is_some() || self.excluded.contains(&from) {
            return None;
        }
        self.quorum.insert(from, c);
        self.try_rebuild(core, ctx, executed)
    }

    /// The contribution part (a) comes from: the largest sync-point among
    /// the latest normal view's (Algorithm 5 lines 46-48).
    fn best_contribution(&self) -> Option<(NodeId, &Contribution)> {
        let q = &self.quorum;
        let lnv = q.values().map(|c| c.last_normal_view).max()?;
        q.iter()
            .filter(|(_, c)| c.last_normal_view == lnv)
            .max_by_key(|(n, c)| (c.sync_point, std::cmp::Reverse(**n)))
            .map(|(n, c)| (*n, c))
    }

    /// With `f + 1` contributions, rebuilds the log, first fetching the best
    /// server's checkpoint if it folded positions this leader cannot supply.
    pub(super) fn try_rebuild(&mut self, core: &Core, ctx: &mut Ctx<'_, Tiga>, executed: &Executed) -> Finished {
        if self.log.is_some() || self.quorum.len() <= core.f() {
            return None;
        }
        let (best, c) = self.best_contribution().expect("f + 1 contributions");
        if c.base > core.log().base() && core.log().commit_point() < c.base {
            if self.fetching.is_none_or(|f| f.from != best) {
                self.fetching = Some(Fetching { from: best, waited_ticks: 0 });
                ctx.send(best, Msg::FetchCheckpoint { g_view: core.view().g_view });
            }
            return None;
        }
        self.fetching = None;
        self.rebuild_log(core, executed);
        self.verify_round(core, ctx, executed, 1)
    }

    /// The checkpoint asked for arrives from `from`: whether it is the one
    /// awaited (the server then adopts it and calls `try_rebuild`).
    pub(super) fn accept_checkpoint(&mut self, from: NodeId) -> bool {
        if self.log.is_some() || self.fetching.is_none_or(|f| f.from != from) {
            return false;
        }
        self.fetching = None;
        true
    }

    /// Every view-change tick while waiting for a checkpoint: ask again, and
    /// after long silence rebuild without that server.
    fn refetch_checkpoint(&mut self, core: &Core, ctx: &mut Ctx<'_, Tiga>, executed: &Executed) -> Finished {
        let Fetching { from: node, waited_ticks } = self.fetching?;
        if waited_ticks >= FETCH_PATIENCE_TICKS {
            self.fetching = None;
            self.quorum.remove(&node);
            self.excluded.insert(node);
            return self.try_rebuild(core, ctx, executed);
        }
        self.fetching = Some(Fetching { from: node, waited_ticks: waited_ticks + 1 });
        ctx.send(node, Msg::FetchCheckpoint { g_view: core.view().g_view });
        None
    }

    /// Algorithm 5 lines 44-63, on logs that start at their bases. Part (a)
    /// keeps its positions: this leader's own committed entries up to the
    /// best log's base if it folded less, then the best log up to its
    /// sync-point. Part (b): later entries that `⌈f/2⌉ + 1` logs hold at the
    /// same timestamp, unless folded here or placed below a conflicting
    /// part (a) entry (the leader would have re-stamped a transaction that
    /// arrived behind one, so such an entry never committed).
    fn rebuild_log(&mut self, core: &Core, executed: &Executed) {
        let (_, best) = self.best_contribution().expect("f + 1 contributions");
        let best = best.clone();
        let own_base = core.log().base();
        let mut log: Vec<LogEntry> = Vec::new();
        if own_base < best.base {
            debug_assert!(core.log().commit_point() >= best.base, "positions below the best base are committed here");
            log.extend(core.log().range(own_base, best.base).iter().cloned());
        }
        log.extend(best.range(own_base.max(best.base), best.sync_point).iter().cloned());
        let part_a: FxHashSet<TxnId> = log.iter().map(|e| e.body.id).collect();
        let (a_reads, a_writes) = stamp_bounds(core, executed, &log, &part_a);
        let need = core.f().div_ceil(2) + 1;
        let mut holders: BTreeMap<(u64, TxnId), (usize, Arc<TxnBody>)> = BTreeMap::new();
        for c in self.quorum.values() {
            for pos in c.sync_point.max(c.base)..c.base + c.log.len() as u64 {
                let e = c.at(pos).expect("held");
                holders.entry((e.t, e.body.id)).or_insert((0, e.body.clone()));
            }
        }
        // Count holders among the whole logs, not only their unsynced parts.
        for ((t, id), (count, _)) in holders.iter_mut() {
            *count = self.quorum.values().filter(|c| c.log.iter().any(|e| e.body.id == *id && e.t == *t)).count();
        }
        let mut taken: FxHashSet<TxnId> = Default::default();
        for ((t, id), (count, body)) in holders {
            if count < need || part_a.contains(&id) || taken.contains(&id) || executed.folded().contains(id) {
                continue;
            }
            let entry = LogEntry { body, t };
            if below_part_a(core, &entry, &a_reads, &a_writes) {
                continue;
            }
            taken.insert(id);
            log.push(entry);
        }
        self.part_a = part_a;
        self.log = Some(log);
    }

    // ---- Algorithm 5 lines 64-78: agreement across shards ----

    /// Sends this leader's round-`round` verification to every other shard:
    /// its recovered entries involving that shard (round 1), or the ones it
    /// proved uncommitted (round 2).
    fn verify_round(&mut self, core: &Core, ctx: &mut Ctx<'_, Tiga>, executed: &Executed, round: u8) -> Finished {
        assert!(round == 1 || round == 2, "rounds 1 and 2 carry entries; round 3 is `confirm`");
        self.round = Some(round);
        let log = self.log.as_ref().expect("rebuilt");
        for ss in other_shards(core) {
            let involves = |e: &&LogEntry| e.body.shards.contains(&ss);
            let info = if round == 1 {
                let held = log.iter().filter(involves).map(|e| VerifyEntry {
                    body: e.body.clone(),
                    t: e.t,
                    pinned: self.part_a.contains(&e.body.id),
                });
                // Folded ones committed here at their agreed timestamp; a
                // shard that lost one takes it (step ④ (1)).
                let folded = executed.folded().in_order().filter_map(|d| {
                    let body = d.body.as_ref().filter(|b| b.shards.contains(&ss))?;
                    Some(VerifyEntry { body: body.clone(), t: d.t, pinned: true })
                });
                let entries = held.chain(folded).collect();
                VerifyInfo { entries, doomed: Vec::new(), raised: Vec::new() }
            } else {
                let doomed =
                    log.iter().filter(involves).map(|e| e.body.id).filter(|id| self.doomed.contains(id)).collect();
                let raised = log
                    .iter()
                    .filter(involves)
                    .filter_map(|e| self.raised.get(&e.body.id).map(|t| (e.body.id, *t)))
                    .collect();
                VerifyInfo { entries: Vec::new(), doomed, raised }
            };
            self.sent.insert((round, ss), Arc::new(info));
        }
        self.resend_verify(core, ctx);
        self.try_finish_round(core, ctx, executed)
    }

    // ---- Round 3 (beyond the paper): every participant's log durable ----

    /// The installed log, `len` entries long, awaits confirmation.
    pub(super) fn await_confirmation(&mut self, len: u64) {
        assert_eq!(self.round, Some(2), "round 3 follows round 2");
        self.round = Some(3);
        self.confirm_len = Some(len);
    }

    /// A confirming leader whose shard holds `durable_point` entries
    /// durably at `f + 1` servers: tells the other shards' leaders once the
    /// installed log is among them; returns whether every other shard told
    /// this one the same (the view is confirmed).
    pub(super) fn confirm(&mut self, core: &Core, ctx: &mut Ctx<'_, Tiga>, durable_point: u64) -> bool {
        let len = self.confirm_len.expect("awaiting confirmation");
        let others = other_shards(core);
        let told = others.iter().all(|s| self.sent.contains_key(&(3, *s)));
        if !told && durable_point >= len {
            for ss in &others {
                self.sent.insert((3, *ss), Arc::new(VerifyInfo::default()));
            }
            self.resend_verify(core, ctx);
        }
        durable_point >= len && others.iter().all(|s| self.inbox.contains_key(&(3, *s)))
    }

    /// Every `resend_ns` while confirming: round 3's message again, once
    /// sent (the others may have lost it).
    pub(super) fn resend_confirmation(&self, core: &Core, ctx: &mut Ctx<'_, Tiga>) {
        if self.round == Some(3) {
            self.resend_verify(core, ctx);
        }
    }

    fn resend_verify(&self, core: &Core, ctx: &mut Ctx<'_, Tiga>) {
        let Some(round) = self.round else { return };
        for ss in other_shards(core) {
            if let Some(info) = self.sent.get(&(round, ss)).cloned() {
                let to = core.leader_node(ctx, ss);
                ctx.count("verify_messages", 1);
                ctx.send(
                    to,
                    Msg::TsVerify(TsVerify {
                        g_view: core.view().g_view,
                        round,
                        shard: core.shard(),
                        info,
                        echo: false,
                    }),
                );
            }
        }
    }

    pub(super) fn on_ts_verify(
        &mut self,
        core: &Core,
        ctx: &mut Ctx<'_, Tiga>,
        from: NodeId,
        m: TsVerify,
        executed: &Executed,
    ) -> Finished {
        let TsVerify { g_view, round, shard, info, echo, .. } = m;
        if g_view != core.view().g_view || !core.is_leader() || from != core.leader_node(ctx, shard) {
            return None;
        }
        if !(1..=3).contains(&round) {
            return None;
        }
        let serving = core.serving();
        if serving || self.round.is_some_and(|r| round < r) {
            // This leader is past that round; the sender still waits for
            // its message of it (which may have been lost).
            if let Some(mine) = self.sent.get(&(round, shard)).cloned().filter(|_| !echo) {
                ctx.count("verify_messages", 1);
                ctx.send(from, Msg::TsVerify(TsVerify { g_view, round, shard: core.shard(), info: mine, echo: true }));
            }
        }
        if serving || (core.status() == Status::Normal && round < 3) {
            return None;
        }
        // A confirming leader takes round 3's (the server checks it after
        // the event); one still in the change keeps any round's for later.
        self.inbox.insert((round, shard), info);
        if core.status() == Status::ViewChange {
            return self.try_finish_round(core, ctx, executed);
        }
        None
    }

    fn try_finish_round(&mut self, core: &Core, ctx: &mut Ctx<'_, Tiga>, executed: &Executed) -> Finished {
        let round = self.round?;
        self.log.as_ref()?;
        let others = other_shards(core);
        if !others.iter().all(|s| self.inbox.contains_key(&(round, *s))) {
            return None;
        }
        let infos: Vec<Arc<VerifyInfo>> = others.iter().map(|s| self.inbox[&(round, *s)].clone()).collect();
        if round == 1 {
            self.merge_recovered(core, ctx, executed, &infos);
            self.verify_round(core, ctx, executed, 2)
        } else {
            self.drop_doomed(&infos);
            Some(self.finished_log())
        }
    }

    /// Round 1 (step ④ (1) and (2)): adds the other shards' entries this log
    /// lacks and gives each transaction its pinned timestamp, or else the
    /// largest; then dooms the moved or added ones that would precede a
    /// conflicting entry of part (a) here.
    fn merge_recovered(
        &mut self,
        core: &Core,
        ctx: &mut Ctx<'_, Tiga>,
        executed: &Executed,
        infos: &[Arc<VerifyInfo>],
    ) {
        let mut log = self.log.take().expect("rebuilt");
        let own: FxHashSet<TxnId> = log.iter().map(|e| e.body.id).collect();
        let (own_reads, own_writes) = stamp_bounds(core, executed, &log, &own);
        let mut index: FxHashMap<TxnId, usize> = log.iter().enumerate().map(|(i, e)| (e.body.id, i)).collect();
        // id → (largest timestamp, pinned timestamp if any)
        let mut best: BTreeMap<TxnId, (u64, Option<u64>)> = BTreeMap::new();
        for e in infos.iter().flat_map(|i| i.entries.iter()) {
            if !e.body.shards.contains(&core.shard()) || executed.folded().contains(e.body.id) {
                continue; // not ours, or folded here (committed, at its agreed timestamp)
            }
            if !index.contains_key(&e.body.id) && executed.folded().stale(e.body.id) {
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
        let (a_reads, a_writes) = stamp_bounds(core, executed, &log, &self.part_a);
        let lacking = best.iter().filter(|(id, (_, pin))| !own.contains(id) && pin.is_none());
        let voters = self.voters_at_or_below(lacking.map(|(id, (t_max, _))| (*id, *t_max)).collect());
        for (id, (t_max, pinned_t)) in best {
            let i = index[&id];
            let own_pin = self.part_a.contains(&id).then_some(log[i].t);
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
            // older view than the one that dropped it here, or of a newer one
            // that was never confirmed (round 3, module docs).
            if below_part_a(core, &log[i], &a_reads, &a_writes) {
                self.doomed.insert(id);
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
            // between (docs/tiga.md, "Beyond the pseudocode").
            //
            // Unless more than ⌊f/2⌋ logs of this shard's latest normal view
            // hold it at or below that timestamp (followers released it
            // there). Then no conflicting entry above it that this shard
            // recovered outside part (a) can have committed without it: that
            // entry's fast path needed `f + ⌈f/2⌉ + 1` replies whose hash
            // left it out, and a follower holding it released it first, so
            // its hash covers it — at most ⌊f/2⌋ such followers, fewer than
            // counted. (Committed on the slow path, the entry would be in
            // part (a), and this transaction doomed above.) So it keeps its
            // timestamp, which is right in both cases.
            let voted = voters.get(&id).copied().unwrap_or(0);
            if !own.contains(&id) && pinned_t.is_none() && voted <= core.f() / 2 {
                if let Some(bound) = conflict_bound_in(core, &log[i], &own_reads, &own_writes) {
                    let t = bound.t + 1;
                    log[i].t = t;
                    self.raised.insert(id, t);
                    ctx.count("recovery_raised", 1);
                }
            }
        }
        self.log = Some(log);
    }

    /// For each `(id, t)`, how many contributions of the latest normal view
    /// hold `id` at a timestamp at or below `t`.
    fn voters_at_or_below(&self, wanted: FxHashMap<TxnId, u64>) -> FxHashMap<TxnId, usize> {
        let mut voters: FxHashMap<TxnId, usize> = FxHashMap::default();
        let Some(lnv) = self.quorum.values().map(|c| c.last_normal_view).max() else { return voters };
        if wanted.is_empty() {
            return voters;
        }
        for c in self.quorum.values().filter(|c| c.last_normal_view == lnv) {
            for e in c.log.iter() {
                if wanted.get(&e.body.id).is_some_and(|t| e.t <= *t) {
                    *voters.entry(e.body.id).or_default() += 1;
                }
            }
        }
        voters
    }

    /// Round 2: every participant drops what any of them doomed.
    fn drop_doomed(&mut self, infos: &[Arc<VerifyInfo>]) {
        let mut doomed = std::mem::take(&mut self.doomed);
        doomed.extend(infos.iter().flat_map(|i| i.doomed.iter().copied()));
        let mut raised = std::mem::take(&mut self.raised);
        for (id, t) in infos.iter().flat_map(|i| i.raised.iter().copied()) {
            let r = raised.entry(id).or_insert(t);
            *r = (*r).max(t);
        }
        let log = self.log.as_mut().expect("rebuilt");
        for e in log.iter_mut() {
            if let Some(t) = raised.get(&e.body.id) {
                debug_assert!(!self.part_a.contains(&e.body.id), "raised only when no shard pinned it");
                e.t = e.t.max(*t);
            }
        }
        // Dropped from part (a) too: it lies past every commit-point (it
        // never committed), so no folded position moves.
        log.retain(|e| !doomed.contains(&e.body.id));
        self.part_a.retain(|id| !doomed.contains(id));
    }

    /// Algorithm 5 line 78 and step ⑤: the rebuilt log becomes this
    /// leader's — part (a) in place, the rest in timestamp order.
    fn finished_log(&mut self) -> Vec<LogEntry> {
        let log = self.log.take().expect("rebuilt");
        let part_a = &self.part_a;
        let kept_a = log.iter().take_while(|e| part_a.contains(&e.body.id)).count();
        debug_assert!(log[kept_a..].iter().all(|e| !part_a.contains(&e.body.id)), "part (a) comes first");
        let (a, rest) = log.split_at(kept_a);
        let mut rest = rest.to_vec();
        rest.sort_by_key(|e| e.stamp());
        a.iter().cloned().chain(rest).collect()
    }
}

/// A `ViewChange` message as a contribution to a log rebuild.
pub(super) fn contribution(m: ViewChange) -> (u64, ReportedLog, Contribution) {
    let ViewChange { g_view, last_normal_view, sync_point, commit_point, base, log, .. } = m;
    let c = Contribution { last_normal_view, sync_point, base, log };
    (g_view, ReportedLog { base, commit_point }, c)
}
