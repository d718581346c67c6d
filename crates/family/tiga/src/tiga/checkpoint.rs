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
//! A folded transaction is remembered in full (its timestamp, hash, results
//! and, multi-shard, its body) to answer its coordinator's resubmissions
//! without executing it twice, until its coordinator's low watermark has
//! passed it: the coordinator will never submit it again (a stale copy of
//! the submission is recognized by the watermark), and it committed at
//! every shard. It then settles: only its timestamp is kept, for late
//! announcements from other leaders and sync inquiries, until
//! `settled_retention` has passed, so that every participant leader has long
//! finished agreeing on it. Memory is thus what is in flight plus a
//! timestamp per transaction of the retention, whatever the run's length;
//! `DONE_MAX` bounds it whatever the load.
//!
//! `Executed` holds all of this with private fields. The server tells it
//! what to execute (the log and the point to execute to), what it folded,
//! and which checkpoint to install; it calls no other concern. Folding the
//! log, snapshots, restarts and adopting another server's checkpoint are
//! sequenced by the server (`server.rs`).
//!
//! Nothing here reads a clock other than the server's own, or touches a file:
//! snapshots go through `Env::compact`.

use super::log::{Replied, ShardLog};
use super::messages::{Checkpoint, Done, DoneList, LogEntry, NO_HASH, Settled, SettledList, Stamp};
use super::{Config, Tiga};
use meridian_core::hint::prefetch;
use meridian_core::{Ctx, Key, NodeId, ShardId, Topology, TxnId};
use meridian_mechanisms::cow_map::CowMap;
use meridian_mechanisms::mvstore::MvStore;
use meridian_mechanisms::seq_index::SeqIndex;
use meridian_mechanisms::txnids::epoch_of;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Most folded transactions remembered, whatever their age.
const DONE_MAX: usize = 1 << 20;

/// A server's at-most-once memory (§4): the transactions folded into
/// checkpoints, remembered in full (results, hash, body) so that a
/// resubmission is answered rather than executed again, until their
/// coordinator's low watermark passes them; then settled — the coordinator
/// never submits them again — and remembered by timestamp alone, for other
/// leaders' late announcements and sync inquiries, until a retention has
/// gone by; and each coordinator's watermark per epoch.
#[derive(Default)]
pub(super) struct Folded {
    /// Per coordinator in id order (`SeqIndex`): a fresh submission's
    /// "folded already?" compares it with each coordinator's newest.
    done: SeqIndex<Arc<Done>>,
    /// The order they were folded in (oldest first, but for ones carried
    /// past a settling), shared with the checkpoints.
    order: DoneList,
    /// Settled transactions' timestamps.
    settled: SeqIndex<u64>,
    /// The order they settled in, shared with the checkpoints.
    settled_order: SettledList,
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

    /// A folded transaction not yet settled, in full.
    pub(super) fn get(&self, id: TxnId) -> Option<&Arc<Done>> {
        self.done.get(id)
    }

    /// The timestamp a remembered transaction committed at.
    pub(super) fn t_of(&self, id: TxnId) -> Option<u64> {
        self.done.get(id).map(|d| d.t).or_else(|| self.settled.get(id).copied())
    }

    pub(super) fn contains(&self, id: TxnId) -> bool {
        self.done.contains(id) || self.settled.contains(id)
    }

    /// Every folded transaction not yet settled, as a checkpoint keeps them
    /// (chunks shared, not copied).
    pub(super) fn list(&self) -> DoneList {
        self.order.clone()
    }

    /// Every settled one, likewise.
    pub(super) fn settled_list(&self) -> SettledList {
        self.settled_order.clone()
    }

    /// Every folded transaction not yet settled, oldest first.
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
            if self.settled.contains(d.id) || self.done.contains(d.id) {
                continue;
            }
            self.done.insert(d.id, Arc::clone(&d));
            chunk.push(d);
        }
        self.order.push_chunk(chunk);
    }

    /// Remembers settled transactions (an installed checkpoint's).
    fn remember_settled(&mut self, settled: impl IntoIterator<Item = Settled>) {
        let mut chunk = Vec::new();
        for s in settled {
            if self.done.contains(s.id) {
                continue; // settles here in its turn
            }
            if self.settled.insert(s.id, s.t).is_none() {
                chunk.push(s);
            }
        }
        self.settled_order.push_chunk(chunk);
    }

    /// Settles every remembered transaction its coordinator's watermark has
    /// passed; the others are carried, in order, into one chunk. Each
    /// stays in full only while its coordinator may still resubmit it:
    /// seconds, or for one whose coordinator crashed, until `DONE_MAX`.
    fn settle(&mut self, now_ns: u64) {
        let (mut settled, mut carried) = (Vec::new(), Vec::new());
        while let Some(d) = self.order.pop_front() {
            if self.stale(d.id) {
                self.done.remove(d.id);
                self.settled.insert(d.id, d.t);
                settled.push(Settled { id: d.id, t: d.t, settled_ns: now_ns });
            } else {
                carried.push(d);
            }
        }
        self.order.push_chunk(carried);
        self.settled_order.push_chunk(settled);
    }

    /// Forgets settled transactions once `retention_ns` has passed since
    /// they settled (oldest first), and the oldest of any kind beyond
    /// `DONE_MAX`.
    fn forget(&mut self, now_ns: u64, retention_ns: u64) {
        while let Some(s) = self.settled_order.front() {
            let old = now_ns.saturating_sub(s.settled_ns) >= retention_ns;
            if !(old || self.len() > DONE_MAX) {
                break;
            }
            self.settled.remove(s.id);
            self.settled_order.pop_front();
        }
        while self.len() > DONE_MAX {
            let d = self.order.pop_front().expect("more remembered than settled");
            self.done.remove(d.id);
        }
        debug_assert_eq!(self.done.len(), self.order.len(), "every remembered transaction is in the order");
        debug_assert_eq!(self.settled.len(), self.settled_order.len(), "every settled one is in its order");
    }

    pub(super) fn len(&self) -> usize {
        self.done.len() + self.settled.len()
    }

    pub(super) fn watermarks_len(&self) -> usize {
        self.watermarks.len()
    }
}

/// §3.2's rule for a conflict map, on a checkpoint's copy-on-write map:
/// each key keeps the largest stamp that touched it.
fn raise_stamps(map: &mut CowMap<Key, Stamp>, keys: &[Key], stamp: Stamp) {
    for k in keys {
        map.update(*k, |held| Some(held.map_or(stamp, |s| (*s).max(stamp))));
    }
}

/// Entries a fold looks ahead (see [`look_ahead`]).
const FOLD_AHEAD: usize = 8;

/// Asks for what a fold will read of the entries after the one it folds
/// now (`rest`). It reads entries executed long before, whose bodies and
/// operations have left the cache: it asks for each entry's body
/// `2 * FOLD_AHEAD` entries before it reads it and for its operations
/// `FOLD_AHEAD` before, so that the misses overlap rather than wait one
/// behind another.
fn look_ahead(rest: &[(LogEntry, Option<Replied>)]) {
    if let Some((e, _)) = rest.get(2 * FOLD_AHEAD - 1) {
        prefetch(&*e.body);
    }
    if let Some((e, _)) = rest.get(FOLD_AHEAD - 1) {
        prefetch(e.body.program.ops.as_slice());
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

    /// Executes `log` in order from [`Executed::applied`] up to `upto` (at
    /// most the commit-point) into the state, in view `g_view`, noting each
    /// entry's results beside it in the log.
    pub(super) fn execute_upto(
        &mut self,
        ctx: &mut Ctx<'_, Tiga>,
        log: &mut ShardLog,
        upto: u64,
        g_view: u64,
        shard: ShardId,
        topo: &Topology,
    ) {
        while self.applied < upto {
            let (e, r) = log.entry_and_reply(self.applied, |e| Replied::none(e.t)).expect("committed entries are held");
            let exec = e.body.program.execute_piece(shard, |k| topo.shard_of(k), |k| self.state.latest(k).cloned());
            for (key, value) in exec.writes {
                self.state.put(key, self.applied + 1, value);
            }
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

    /// Whether enough executed entries have accumulated past the log's
    /// `base` (the last checkpoint) for the next ([`Config::checkpoint_every`]).
    pub(super) fn checkpoint_due(&self, base: u64, cfg: &Config) -> bool {
        let since = self.applied - base;
        // Asked after every event: the store's size only once the fixed
        // count is reached.
        since >= cfg.checkpoint_entries && since >= cfg.checkpoint_every(self.state.keys())
    }

    /// A new checkpoint of everything executed: `folded` are the log's
    /// entries up to [`Executed::applied`] it has just forgotten. Their key
    /// hashes, conflict-map stamps and replies go into the checkpoint; the
    /// memory forgets what no one can ask about any more.
    pub(super) fn fold(
        &mut self,
        now_ns: u64,
        folded: Vec<(LogEntry, Option<Replied>)>,
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
        let mut rest = folded.into_iter();
        while let Some((e, reply)) = rest.next() {
            look_ahead(rest.as_slice());
            let (reads, writes) = e.body.program.declared_keys(shard, |k| topo.shard_of(k));
            hashes.toggle_declared(&e, &reads, &writes);
            raise_stamps(&mut rmap, &reads, e.stamp());
            raise_stamps(&mut wmap, &writes, e.stamp());
            let r = reply.unwrap_or(Replied::none(e.t));
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
        self.folded.settle(now_ns);
        self.folded.remember(dones);
        self.folded.forget(now_ns, retention_ns);
        self.checkpoint = Arc::new(Checkpoint {
            upto: self.applied,
            state: self.state.clone(),
            hashes,
            rmap,
            wmap,
            done: self.folded.list(),
            settled: self.folded.settled_list(),
            watermarks: self.folded.watermark_pairs(),
        });
    }

    /// The checkpoint's state, memory and watermarks become this server's:
    /// everything up to `cp.upto` is executed.
    pub(super) fn install(&mut self, cp: Arc<Checkpoint>) {
        self.state = cp.state.clone();
        self.applied = cp.upto;
        self.folded.remember(cp.done.iter().cloned());
        self.folded.remember_settled(cp.settled.iter().copied());
        for (node, w) in &cp.watermarks {
            self.folded.note_watermark(*node, *w);
        }
        self.checkpoint = cp;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(seq: u64) -> TxnId {
        TxnId { node: NodeId(7), seq }
    }

    fn done(seq: u64, t: u64) -> Arc<Done> {
        Arc::new(Done { id: id(seq), body: None, t, hash: 42, result: Some(Vec::new()), folded_ns: 0 })
    }

    #[test]
    fn a_checkpoint_waits_for_one_entry_per_k_keys_once_the_store_outgrows_checkpoint_entries() {
        use meridian_core::{ParamValue, Params, Value};
        let params = Params::new()
            .with("checkpoint_entries", ParamValue::Int(10))
            .with("checkpoint_keys_per_entry", ParamValue::Int(4));
        let cfg = Config::from_params(&params).expect("valid");
        let mut ex = Executed::new();
        let fill = |ex: &mut Executed, keys: std::ops::Range<u64>| {
            for k in keys {
                ex.state.put(Key(k), 1, Value::int(k, 0));
            }
        };
        fill(&mut ex, 0..20);
        ex.applied = 10;
        assert!(ex.checkpoint_due(0, &cfg), "20 keys ask for 5 entries: the 10 of checkpoint_entries rule");
        fill(&mut ex, 20..100);
        assert!(!ex.checkpoint_due(0, &cfg), "100 keys ask for 25 entries");
        ex.applied = 25;
        assert!(ex.checkpoint_due(0, &cfg));
        assert!(!ex.checkpoint_due(1, &cfg), "24 past the last checkpoint");
        let off = Config::from_params(&params.with("checkpoint_keys_per_entry", ParamValue::Int(0))).expect("valid");
        ex.applied = 10;
        assert!(ex.checkpoint_due(0, &off), "0: checkpoint_entries alone");
    }

    #[test]
    fn a_folded_transaction_settles_to_its_timestamp_once_its_coordinator_is_past_it() {
        let mut f = Folded::default();
        f.remember([done(1, 10), done(2, 20)]);
        f.note_watermark(NodeId(7), 2); // past 1, not 2
        f.settle(1_000);
        assert!(f.get(id(1)).is_none(), "settled: results and hash dropped");
        assert_eq!((f.t_of(id(1)), f.contains(id(1))), (Some(10), true), "its timestamp still answers");
        assert_eq!(f.get(id(2)).map(|d| d.hash), Some(42), "not settled: kept in full");
        assert_eq!(f.list().iter().map(|d| d.id).collect::<Vec<_>>(), [id(2)]);
        assert_eq!(f.settled_list().iter().map(|s| (s.id, s.t)).collect::<Vec<_>>(), [(id(1), 10)]);
        // A checkpoint remembering it in full does not bring it back.
        f.remember([done(1, 10)]);
        assert!(f.get(id(1)).is_none());

        // Forgotten once the retention has passed since it settled.
        f.forget(1_000 + 499, 500);
        assert!(f.contains(id(1)));
        f.forget(1_000 + 500, 500);
        assert!(!f.contains(id(1)));
        assert!(f.get(id(2)).is_some(), "one its coordinator may resubmit stays");
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn a_server_installing_a_checkpoint_takes_its_settled_transactions() {
        let mut leader = Folded::default();
        leader.remember([done(1, 10), done(2, 20)]);
        leader.note_watermark(NodeId(7), 2);
        leader.settle(5);
        let mut follower = Folded::default();
        follower.remember(leader.list().iter().cloned());
        follower.remember_settled(leader.settled_list().iter().copied());
        assert_eq!((follower.t_of(id(1)), follower.t_of(id(2))), (Some(10), Some(20)));
        assert!(follower.get(id(1)).is_none() && follower.get(id(2)).is_some());
        assert_eq!(follower.len(), 2);
    }
}
