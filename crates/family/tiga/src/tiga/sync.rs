//! Log synchronization and the slow path (Tiga §3.7, Appendix E).
//!
//! The leader streams its log (transaction ids and agreed timestamps, in log
//! order) to its followers. A follower makes its log agree — entries the
//! leader placed are moved to the leader's position with the leader's
//! timestamp; its other entries keep their relative order after them —
//! advances its sync-point and reports it. The leader's commit-point is the
//! position `f + 1` servers have synced; followers execute up to it.
//! Coordinators ask followers which transactions they have synced (the
//! batched slow-reply inquiry of Appendix E).
//!
//! `SyncState` (followers' progress, fetched bodies) has private fields;
//! its methods take the server's `Core` and call no other concern. A
//! follower placing the leader's entries changes the queue, the key hashes
//! and the conflict maps, so that step is the server's (`server.rs`), as is
//! executing what became committed.

use super::Tiga;
use super::checkpoint::Folded;
use super::messages::Checkpoint;
use super::messages::{LogSync, Msg, SyncReply, SyncReport, TxnBody};
use super::server::{Core, Status, TxnQueue};
use meridian_core::{Ctx, NodeId, ShardId, TxnId};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// Most entries in one log-sync message.
pub(super) const SYNC_BATCH_MAX: usize = 512;

/// What a leader knows of one follower's log (§3.7).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct Follower {
    /// The position its sync-point reached, as it reported.
    acked: u64,
    /// The position this leader sent up to.
    sent: u64,
    /// Ticks it has been sent more than it acknowledged without progress.
    stalled_ticks: u32,
    /// It reported its sync-point in the current view (a new leader sends
    /// the view's log again to those that did not).
    in_view: bool,
    /// What it last told of its log in a view change (whether it needs
    /// this leader's checkpoint).
    reported: Option<ReportedLog>,
}

/// A replica's log as its view-change message described it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct ReportedLog {
    pub base: u64,
    pub commit_point: u64,
}

/// A leader's log synchronization state: each replica's progress. Indexed
/// by replica.
#[derive(Debug)]
pub(super) struct LogProgress {
    followers: Vec<Follower>,
}

impl LogProgress {
    pub(super) fn new(replicas: u32) -> Self {
        LogProgress { followers: vec![Follower { in_view: true, ..Follower::default() }; replicas as usize] }
    }

    /// A new view's log of `len` entries: every follower has it (the view
    /// change sent it), none acknowledged yet.
    pub(super) fn restart_at(&mut self, len: u64) {
        for f in &mut self.followers {
            *f = Follower { acked: 0, sent: len, stalled_ticks: 0, in_view: false, reported: f.reported };
        }
    }

    fn acknowledged(&mut self, r: usize, sync_point: u64) {
        let f = &mut self.followers[r];
        f.in_view = true;
        if sync_point > f.acked {
            f.acked = sync_point;
            f.stalled_ticks = 0;
        }
    }

    /// One tick of no news from follower `r`: after `resync_after_ticks`
    /// the log is sent again from what it acknowledged.
    fn tick(&mut self, r: usize, resync_after_ticks: u32) {
        let f = &mut self.followers[r];
        if f.acked < f.sent {
            f.stalled_ticks += 1;
            if f.stalled_ticks >= resync_after_ticks {
                f.sent = f.acked;
                f.stalled_ticks = 0;
            }
        }
    }

    /// The position each replica has synced (`me`'s: the length of its log
    /// known durable, `durable_len`), largest first.
    fn synced_descending(&self, me: usize, durable_len: u64) -> Vec<u64> {
        let mut synced: Vec<u64> =
            self.followers.iter().enumerate().map(|(r, f)| if r == me { durable_len } else { f.acked }).collect();
        synced.sort_unstable_by(|a, b| b.cmp(a));
        synced
    }

    /// Replica `r` described its log in a view change.
    pub(super) fn reported(&mut self, r: usize, log: ReportedLog) {
        self.followers[r].reported = Some(log);
    }

    /// Whether replica `r` holds the positions from `base` on without this
    /// leader's checkpoint (its own base or commit-point reaches it).
    pub(super) fn covers(&self, r: usize, base: u64) -> bool {
        self.followers[r].reported.is_some_and(|l| l.base >= base || l.commit_point >= base)
    }

    /// Whether replica `r` reported its sync-point in the current view.
    pub(super) fn in_view(&self, r: usize) -> bool {
        self.followers[r].in_view
    }
}

/// Log synchronization (§3.7): a leader's view of its followers' logs, and
/// a follower's bodies fetched from its leader awaiting their place. Owned
/// by the server; its methods take the server's [`Core`] (view, status, log
/// and points, outbox) and whatever else they read as parameters, and call
/// no other concern.
pub(super) struct SyncState {
    progress: LogProgress,
    /// Follower: bodies fetched from the leader, awaiting their place.
    fetched: Fetched,
}

/// The replica index of `node` in this server's shard, if it is one.
pub(super) fn follower_index(ctx: &Ctx<'_, Tiga>, core: &Core, node: NodeId) -> Option<usize> {
    ctx.topology().replicas(core.shard()).iter().position(|n| *n == node)
}

impl SyncState {
    pub(super) fn new(replicas: u32) -> Self {
        SyncState { progress: LogProgress::new(replicas), fetched: Fetched::default() }
    }

    /// Leader: sends every follower the log entries it has not been sent
    /// (only once durable here); one that lacks entries this leader folded
    /// gets `checkpoint` first. `heartbeat` sends even an empty batch, to
    /// carry the commit-point.
    pub(super) fn sync_followers(
        &mut self,
        core: &mut Core,
        ctx: &mut Ctx<'_, Tiga>,
        checkpoint: &Arc<Checkpoint>,
        heartbeat: bool,
    ) {
        // Runs after every event at a leader: the followers are walked by
        // index rather than collected into a new vector each time.
        let me = core.replica() as usize;
        for r in (0..core.n() as usize).filter(|r| *r != me) {
            let node = ctx.topology().replicas(core.shard())[r];
            if self.progress.followers[r].sent < core.log().base() {
                // It lacks entries this leader folded: the checkpoint
                // stands for them (§4).
                ctx.count("checkpoints_sent", 1);
                let msg = Msg::CheckpointState { g_view: core.view().g_view, checkpoint: Arc::clone(checkpoint) };
                core.send_durable(ctx, node, msg);
                self.progress.followers[r].sent = core.log().base();
            }
            let from_pos = self.progress.followers[r].sent;
            let upto = core.log().len().min(from_pos + SYNC_BATCH_MAX as u64);
            if upto == from_pos && !heartbeat {
                continue;
            }
            let entries: Vec<(TxnId, u64)> =
                core.log().range(from_pos, upto).iter().map(|e| (e.body.id, e.t)).collect();
            self.progress.followers[r].sent = upto;
            let msg = Msg::LogSync(LogSync {
                g_view: core.view().g_view,
                l_view: core.view().l_view(core.shard()),
                from_pos,
                entries,
                commit_point: core.log().commit_point(),
            });
            core.send_durable(ctx, node, msg);
        }
    }

    /// Leader: a follower's progress; send what it misses (from the log or
    /// the queue `pq`). Returns the follower's index if the report shows it
    /// hears this leader (reach.rs): it has the whole log, or more of it
    /// than it last acknowledged. A follower that the leader's messages do
    /// not reach (a link cut one way) reports the same point while the log
    /// grows.
    pub(super) fn on_sync_report(
        &mut self,
        core: &mut Core,
        ctx: &mut Ctx<'_, Tiga>,
        from: NodeId,
        m: SyncReport,
        pq: &TxnQueue,
    ) -> Option<usize> {
        // The server dispatches only reports of its global view: a report
        // of another is of another log, even where this shard's leader did
        // not change (and a new leader's confirmation counts on that).
        let SyncReport { l_view, sync_point, missing, .. } = m;
        if !core.is_leader() || core.status() != Status::Normal || l_view != core.view().l_view(core.shard()) {
            return None;
        }
        let r = follower_index(ctx, core, from)?;
        let follows = sync_point >= core.log().len() || sync_point > self.progress.followers[r].acked;
        self.progress.acknowledged(r, sync_point);
        let bodies: Vec<Arc<TxnBody>> = missing
            .iter()
            .take(SYNC_BATCH_MAX)
            .filter_map(|id| {
                core.log().entry_of(*id).map(|e| e.body.clone()).or_else(|| pq.get(*id).map(|p| p.body.clone()))
            })
            .collect();
        if !bodies.is_empty() {
            ctx.send(from, Msg::Bodies { bodies });
        }
        self.advance_commit_point(core);
        follows.then_some(r)
    }

    /// Leader: the largest position that `f + 1` servers (the leader's
    /// durable log included) have synced.
    pub(super) fn durable_point(&self, core: &Core) -> u64 {
        let synced = self.progress.synced_descending(core.replica() as usize, core.durable_len());
        synced[core.f()].min(core.log().len())
    }

    /// Leader: the commit-point rises to the durable point — not while a
    /// new leader waits for its view's confirmation (recovery.rs, round 3).
    pub(super) fn advance_commit_point(&self, core: &mut Core) {
        if !core.confirming() {
            core.commit_to(self.durable_point(core));
        }
    }

    /// Leader, every tick: re-send to followers that made no progress, and
    /// carry the commit-point.
    pub(super) fn leader_tick(&mut self, core: &mut Core, ctx: &mut Ctx<'_, Tiga>, checkpoint: &Arc<Checkpoint>) {
        for r in 0..core.n() as usize {
            if r as u32 == core.replica() {
                continue;
            }
            self.progress.tick(r, core.cfg().resync_after_ticks);
        }
        self.sync_followers(core, ctx, checkpoint, true);
    }

    /// Follower: bodies it asked for.
    pub(super) fn on_bodies(&mut self, core: &Core, bodies: Vec<Arc<TxnBody>>) {
        for b in bodies.into_iter().take(SYNC_BATCH_MAX) {
            if b.shards.contains(&core.shard()) && core.log().position(b.id).is_none() {
                self.fetched.insert(b.id, b);
            }
        }
    }

    /// Follower: a body fetched from the leader.
    pub(super) fn fetched(&self, id: TxnId) -> Option<&Arc<TxnBody>> {
        self.fetched.get(&id)
    }

    /// Follower: the transaction has its place in the log.
    pub(super) fn placed(&mut self, id: TxnId) {
        self.fetched.remove(&id);
    }

    /// A view change: fetched bodies belong to the old view's leader.
    pub(super) fn forget_fetched(&mut self) {
        self.fetched.clear();
    }

    pub(super) fn fetched_len(&self) -> usize {
        self.fetched.len()
    }

    /// A new view's log of `len` entries (see [`LogProgress::restart_at`]).
    pub(super) fn restart_at(&mut self, len: u64) {
        self.progress.restart_at(len);
    }

    /// Replica `r` described its log in a view change.
    pub(super) fn reported(&mut self, r: usize, log: ReportedLog) {
        self.progress.reported(r, log);
    }

    /// See [`LogProgress::covers`].
    pub(super) fn covers(&self, r: usize, base: u64) -> bool {
        self.progress.covers(r, base)
    }

    /// See [`LogProgress::in_view`].
    pub(super) fn in_view(&self, r: usize) -> bool {
        self.progress.in_view(r)
    }
}

/// Follower: tell the leader how far this log agrees with its own.
pub(super) fn report_sync(core: &mut Core, ctx: &mut Ctx<'_, Tiga>, missing: Vec<TxnId>) {
    let leader = core.leader_node(ctx, core.shard());
    let msg = Msg::SyncReport(SyncReport {
        g_view: core.view().g_view,
        l_view: core.view().l_view(core.shard()),
        sync_point: core.log().sync_point(),
        missing,
    });
    core.send_durable(ctx, leader, msg);
}

/// Follower: answer a coordinator's slow-path inquiry (Appendix E) from the
/// log and the memory of folded transactions.
pub(super) fn on_sync_inquiry(
    core: &mut Core,
    ctx: &mut Ctx<'_, Tiga>,
    from: NodeId,
    shard: ShardId,
    ids: Vec<TxnId>,
    folded: &Folded,
) {
    if shard != core.shard() || core.status() != Status::Normal || core.is_leader() {
        return;
    }
    let synced: Vec<(TxnId, u64)> = ids
        .iter()
        .take(SYNC_BATCH_MAX)
        .filter_map(|id| {
            if let Some(t) = folded.t_of(*id) {
                return Some((*id, t)); // folded: synced long ago
            }
            let pos = core.log().position(*id)?;
            (pos < core.log().sync_point()).then(|| (*id, core.log().get(pos).expect("indexed").t))
        })
        .collect();
    let msg =
        Msg::SyncReply(SyncReply { shard, g_view: core.view().g_view, l_view: core.view().l_view(shard), synced });
    core.send_durable(ctx, from, msg);
}

/// Bodies received for transactions a follower has not placed yet.
pub type Fetched = FxHashMap<TxnId, Arc<TxnBody>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_counts_towards_the_commit_point_with_its_durable_log() {
        let mut p = LogProgress::new(3);
        p.restart_at(0);
        p.acknowledged(1, 8);
        assert_eq!(p.synced_descending(0, 0), [8, 0, 0], "nothing durable at the leader yet");
        assert_eq!(p.synced_descending(0, 10), [10, 8, 0]);
    }

    #[test]
    fn a_follower_that_stalls_is_sent_the_log_again_from_what_it_acknowledged() {
        let mut p = LogProgress::new(3);
        p.restart_at(0);
        p.followers[1].sent = 20;
        p.acknowledged(1, 5);
        for _ in 0..4 {
            p.tick(1, 5);
        }
        assert_eq!(p.followers[1].sent, 20, "not yet");
        p.tick(1, 5);
        assert_eq!((p.followers[1].acked, p.followers[1].sent, p.followers[1].stalled_ticks), (5, 5, 0));
        assert!(p.in_view(1), "it reported in this view");
        assert!(!p.in_view(2), "replica 2 did not");
    }
}
