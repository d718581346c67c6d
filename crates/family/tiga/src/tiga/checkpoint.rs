//! Execution up to the commit-point, checkpoints, and the memory of folded
//! transactions (Tiga §4, "Checkpoints to accelerate recovery"; Appendix B's
//! at-most-once execution).
//!
//! Every server executes its log in log order up to the commit-point into
//! `state` (a leader has also executed each entry optimistically, in `store`:
//! the two agree, which is checked). Positions below the commit-point hold
//! the same entries at every server in every later view — a view change
//! keeps part (a) of the rebuilt log in place — so once `checkpoint_entries`
//! executed entries have accumulated past the last checkpoint, a server
//! folds them: the log forgets them and the checkpoint takes the state, the
//! folded entries' key hashes and conflict-map stamps, and a memory of the
//! folded transactions; the durable log is compacted into one snapshot of
//! the server. A new leader restores from a checkpoint and replays the rest;
//! a follower that lags behind what its leader folded installs the leader's.
//!
//! A folded transaction is remembered (its timestamp, hash and results) to
//! answer its coordinator's resubmissions and late announcements from other
//! leaders without executing it twice. It is forgotten once its coordinator's
//! low watermark has passed it — the coordinator will never submit it again,
//! and a stale copy of the submission is recognized by the watermark — and
//! `done_retention` has passed, so that every participant leader has long
//! finished agreeing on it. `DONE_MAX` bounds the memory whatever the load.
//!
//! Nothing here reads a clock other than the server's own, or touches a file:
//! snapshots go through `Env::compact`.

use super::Tiga;
use super::hash::KeyHashes;
use super::log::TigaLog;
use super::messages::{Checkpoint, Done, DoneList, LogEntry, NO_HASH, Record, Snapshot, Stamp};
use super::server::{PState, Replied, Server, Status};
use meridian_core::{Ctx, Key, NodeId, ShardId, Topology, TxnId};
use meridian_mechanisms::cow_map::CowMap;
use meridian_mechanisms::mvstore::MvStore;
use meridian_mechanisms::txnids::epoch_of;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Most folded transactions remembered, whatever their age.
const DONE_MAX: usize = 1 << 20;

/// A server's at-most-once memory (§4): the transactions folded into
/// checkpoints, remembered so that a resubmission is answered rather than
/// executed again, until its coordinator's low watermark passes it and a
/// retention has gone by; and each coordinator's watermark per epoch.
#[derive(Default)]
pub(super) struct Folded {
    done: FxHashMap<TxnId, Arc<Done>>,
    /// The order they were folded in (oldest first), shared with the
    /// checkpoints.
    order: DoneList,
    watermarks: BTreeMap<(NodeId, u64), u64>,
}

impl Folded {
    /// A coordinator's low watermark, per epoch of its identifiers, only
    /// grows. A coordinator reports its current epoch's: one that restarted
    /// leaves the watermark of its old epoch where it was, so an id above it
    /// — in flight when it crashed — is never taken for a finished one.
    pub(super) fn note_watermark(&mut self, coordinator: NodeId, low_watermark: u64) {
        let w = self.watermarks.entry((coordinator, epoch_of(low_watermark))).or_insert(0);
        *w = (*w).max(low_watermark);
    }

    /// An id its coordinator saw commit at every shard (or, past
    /// `ORPHANS_MAX`, gave up): it never submits it again.
    pub(super) fn stale(&self, id: TxnId) -> bool {
        self.watermarks.get(&(id.node, epoch_of(id.seq))).is_some_and(|w| id.seq < *w)
    }

    pub(super) fn get(&self, id: TxnId) -> Option<&Arc<Done>> {
        self.done.get(&id)
    }

    pub(super) fn contains(&self, id: TxnId) -> bool {
        self.done.contains_key(&id)
    }

    /// Every remembered transaction, oldest first, as a checkpoint keeps
    /// them (chunks shared, not copied).
    pub(super) fn list(&self) -> DoneList {
        self.order.clone()
    }

    /// Every remembered transaction, oldest first.
    pub(super) fn in_order(&self) -> impl Iterator<Item = &Arc<Done>> {
        self.order.iter()
    }

    /// The watermarks as a checkpoint keeps them.
    pub(super) fn watermark_pairs(&self) -> Vec<(NodeId, u64)> {
        self.watermarks.iter().map(|((n, _), w)| (*n, *w)).collect()
    }

    /// Remembers transactions folded together (one checkpoint's, or a
    /// checkpoint installed from another server). One already remembered
    /// keeps its first memory.
    fn remember(&mut self, folded: impl IntoIterator<Item = Arc<Done>>) {
        let mut chunk = Vec::new();
        for d in folded {
            if let std::collections::hash_map::Entry::Vacant(v) = self.done.entry(d.id) {
                v.insert(Arc::clone(&d));
                chunk.push(d);
            }
        }
        self.order.push_chunk(chunk);
    }

    /// Forgets folded transactions no one can ask about any more (oldest
    /// first): past `retention_ns` and below their coordinator's
    /// watermark, or beyond `DONE_MAX`.
    fn forget(&mut self, now_ns: u64, retention_ns: u64) {
        while let Some(d) = self.order.front() {
            let old = now_ns.saturating_sub(d.folded_ns) >= retention_ns;
            if !(self.order.len() > DONE_MAX || (old && self.stale(d.id))) {
                break;
            }
            let id = d.id;
            self.done.remove(&id);
            self.order.pop_front();
        }
        debug_assert_eq!(self.done.len(), self.order.len(), "every remembered transaction is in the order");
    }

    pub(super) fn len(&self) -> usize {
        self.done.len()
    }

    pub(super) fn watermarks_len(&self) -> usize {
        self.watermarks.len()
    }
}

/// §3.2's rule for a conflict map, on a checkpoint's copy-on-write map:
/// each key keeps the largest stamp that touched it.
fn raise_stamps(map: &mut CowMap<Key, Stamp>, keys: &[Key], stamp: Stamp) {
    for k in keys {
        if map.get(k).is_none_or(|s| *s < stamp) {
            map.insert(*k, stamp);
        }
    }
}

/// What a server executed in log order and folded (§4): the shard's data
/// after the first `applied` log entries, the latest checkpoint, the last
/// reply per logged transaction, and the memory of folded ones. Every server
/// has one; the server tells it what to execute and fold — it reads the log
/// it is given and touches nothing else.
pub(super) struct Executed {
    /// Log entries executed into `state`, in log order, up to the
    /// commit-point (every server, leader included).
    applied: u64,
    /// The shard's data after the first `applied` log entries.
    state: MvStore,
    /// The latest checkpoint: `state` as of the log's base, and more.
    checkpoint: Arc<Checkpoint>,
    /// The last fast reply (and results) of each transaction in the log.
    replied: FxHashMap<TxnId, Replied>,
    /// Folded transactions remembered for at-most-once answers, and each
    /// coordinator's low watermark (Submit and Probe carry it).
    folded: Folded,
}

impl Executed {
    pub(super) fn new() -> Self {
        Executed {
            applied: 0,
            state: MvStore::new(),
            checkpoint: Arc::new(Checkpoint::default()),
            replied: FxHashMap::default(),
            folded: Folded::default(),
        }
    }

    /// Log entries executed into [`Executed::state`].
    pub(super) fn applied(&self) -> u64 {
        self.applied
    }

    /// The shard's data as executed up to [`Executed::applied`].
    pub(super) fn state(&self) -> &MvStore {
        &self.state
    }

    pub(super) fn checkpoint(&self) -> &Arc<Checkpoint> {
        &self.checkpoint
    }

    /// The at-most-once memory (read only: it changes by folding, by
    /// installing a checkpoint, and by watermarks).
    pub(super) fn folded(&self) -> &Folded {
        &self.folded
    }

    /// A coordinator's low watermark arrived (see [`Folded::note_watermark`]).
    pub(super) fn note_watermark(&mut self, coordinator: NodeId, low_watermark: u64) {
        self.folded.note_watermark(coordinator, low_watermark);
    }

    /// The last reply this server knows for a logged transaction.
    pub(super) fn replied(&self, id: TxnId) -> Option<&Replied> {
        self.replied.get(&id)
    }

    /// This server replied for `id` (or, as a new leader, executed it).
    pub(super) fn note_reply(&mut self, id: TxnId, replied: Replied) {
        self.replied.insert(id, replied);
    }

    /// The log was replaced: replies of transactions no longer in it go.
    pub(super) fn keep_replies_in(&mut self, log: &TigaLog) {
        self.replied.retain(|id, _| log.position(*id).is_some());
    }

    pub(super) fn replied_len(&self) -> usize {
        self.replied.len()
    }

    /// Executes `log` in order from [`Executed::applied`] up to `upto` (at
    /// most the commit-point) into the state, in view `g_view`.
    pub(super) fn execute_upto(
        &mut self,
        ctx: &mut Ctx<'_, Tiga>,
        log: &TigaLog,
        upto: u64,
        g_view: u64,
        shard: ShardId,
        topo: &Topology,
    ) {
        while self.applied < upto {
            let e = log.get(self.applied).expect("committed entries are held");
            let piece = e.body.program.piece(shard, |k| topo.shard_of(k));
            let exec = piece.execute(|k| self.state.latest(k).cloned());
            for (key, value) in exec.writes {
                self.state.put(key, self.applied + 1, value);
            }
            let r =
                self.replied.entry(e.body.id).or_insert(Replied { t: e.t, hash: None, result: None, led_view: None });
            // What this view's leader executed sits at the same place in the
            // log: the results must agree. Older ones (an earlier view's
            // optimistic execution, perhaps elsewhere in its order) give way.
            if r.led_view == Some(g_view) && r.result.as_ref().is_some_and(|mine| *mine != exec.results) {
                debug_assert!(false, "{} executed differently in log order", e.body.id);
                ctx.count("replay_mismatches", 1);
            }
            r.result = Some(exec.results);
            self.applied += 1;
        }
    }

    /// Whether `every` executed entries have accumulated past the log's
    /// `base` (the last checkpoint).
    pub(super) fn checkpoint_due(&self, base: u64, every: u64) -> bool {
        self.applied - base >= every
    }

    /// A new checkpoint of everything executed: `folded` are the log's
    /// entries up to [`Executed::applied`] it has just forgotten. Their key
    /// hashes, conflict-map stamps and replies go into the checkpoint; the
    /// memory forgets what no one can ask about any more.
    pub(super) fn fold(
        &mut self,
        now_ns: u64,
        folded: &[LogEntry],
        shard: ShardId,
        topo: &Topology,
        retention_ns: u64,
    ) {
        // The previous checkpoint's maps, shared until written: this one
        // costs in proportion to the entries it folds.
        let prev = Arc::clone(&self.checkpoint);
        let mut hashes = prev.hashes.clone();
        let (mut rmap, mut wmap) = (prev.rmap.clone(), prev.wmap.clone());
        let mut dones = Vec::with_capacity(folded.len());
        for e in folded {
            hashes.toggle(e, shard, |k| topo.shard_of(k));
            let (reads, writes) = e.body.program.declared_keys(shard, |k| topo.shard_of(k));
            raise_stamps(&mut rmap, &reads, e.stamp());
            raise_stamps(&mut wmap, &writes, e.stamp());
            let r =
                self.replied.remove(&e.body.id).unwrap_or(Replied { t: e.t, hash: None, result: None, led_view: None });
            let body = e.body.is_multi_shard().then(|| e.body.clone());
            dones.push(Arc::new(Done {
                id: e.body.id,
                body,
                t: e.t,
                hash: r.hash.unwrap_or(NO_HASH),
                result: r.result,
                folded_ns: now_ns,
            }));
        }
        self.folded.remember(dones);
        self.folded.forget(now_ns, retention_ns);
        self.checkpoint = Arc::new(Checkpoint {
            upto: self.applied,
            state: self.state.clone(),
            hashes,
            rmap,
            wmap,
            done: self.folded.list(),
            watermarks: self.folded.watermark_pairs(),
        });
    }

    /// The checkpoint's state, memory and watermarks become this server's:
    /// everything up to `cp.upto` is executed.
    pub(super) fn install(&mut self, cp: Arc<Checkpoint>) {
        self.state = cp.state.clone();
        self.applied = cp.upto;
        self.folded.remember(cp.done.iter().cloned());
        for (node, w) in &cp.watermarks {
            self.folded.note_watermark(*node, *w);
        }
        self.checkpoint = cp;
    }
}

impl Server {
    /// Executes the log in order up to the commit-point, then checkpoints if
    /// enough has accumulated.
    pub(super) fn execute_committed(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let upto = self.core.log.commit_point().min(self.core.log.sync_point()).min(self.core.log.len());
        self.executed.execute_upto(ctx, &self.core.log, upto, self.core.view.g_view, self.core.shard, &self.core.topo);
        if self.executed.checkpoint_due(self.core.log.base(), self.core.cfg.checkpoint_entries) {
            self.take_checkpoint(ctx);
        }
    }

    /// Folds every executed entry into a new checkpoint and compacts the
    /// durable log into a snapshot.
    fn take_checkpoint(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let upto = self.executed.applied();
        let folded = self.core.log.fold_to(upto);
        let now = ctx.clock_ns();
        self.executed.fold(now, &folded, self.core.shard, &self.core.topo, self.core.cfg.done_retention_ns);
        ctx.count("checkpoints", 1);
        self.persist_snapshot(ctx);
    }

    /// Compacts the durable log into one snapshot of this server. The
    /// snapshot stands for every record up to an append made just before
    /// it (after a restart this server knows no earlier LSN, and records it
    /// recovered must not outlive the snapshot), and another append follows
    /// it: replies sent behind that one (through `send_durable`) leave only
    /// once the snapshot is durable.
    pub(super) fn persist_snapshot(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let covered = self.core.persist(ctx, Record::SyncPoint(self.core.log.sync_point()));
        let tentative: Vec<LogEntry> = self
            .pq
            .values()
            .filter(|p| matches!(p.state, PState::Executed { .. }))
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
    pub(super) fn restore_snapshot(&mut self, snap: &Snapshot) {
        self.executed.install(Arc::clone(&snap.checkpoint));
        self.core.view = snap.view.clone();
        self.core.last_normal_view = snap.last_normal_view;
        self.core.led = snap.led;
    }

    /// Takes a checkpoint from another server of the shard that folded past
    /// what this one can execute. The entries this log holds beyond what it
    /// had synced stay, after the checkpoint, as unsynced votes (unless they
    /// are folded in it); everything else is covered by it.
    pub(super) fn adopt_checkpoint(&mut self, ctx: &mut Ctx<'_, Tiga>, cp: Arc<Checkpoint>) {
        assert!(cp.upto > self.core.log.base(), "adopting an older checkpoint");
        let synced = self.core.log.sync_point();
        let committed = self.core.log.commit_point().max(cp.upto);
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
        self.executed.keep_replies_in(&self.core.log);
        self.rebuild_derived();
        ctx.count("checkpoints_installed", 1);
        self.persist_snapshot(ctx);
    }

    /// Key hashes and conflict maps from the checkpoint and the held log
    /// (and, at a leader, what it has released but not logged).
    pub(super) fn rebuild_derived(&mut self) {
        let cp = Arc::clone(self.executed.checkpoint());
        self.hashes = KeyHashes::from_folded(&cp.hashes);
        self.conflicts = super::conflict::ConflictMaps::from_checkpoint(&cp);
        let topo = Arc::clone(&self.core.topo);
        for e in self.core.log.all().to_vec() {
            self.hashes.toggle(&e, self.core.shard, |k| topo.shard_of(k));
            let (reads, writes) = self.core.keys_of(&e.body);
            self.conflicts.released(e.stamp(), &reads, &writes);
        }
    }

    /// A checkpoint arrives: a follower behind its leader's base installs
    /// it; a new leader waiting for it during a view change goes on.
    pub(super) fn on_checkpoint_state(
        &mut self,
        ctx: &mut Ctx<'_, Tiga>,
        from: NodeId,
        g_view: u64,
        cp: Arc<Checkpoint>,
    ) {
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
