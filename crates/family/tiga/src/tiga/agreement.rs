//! Timestamp agreement among the participant leaders of a multi-shard
//! transaction (Tiga §3.5-3.6; Algorithm 2 lines 21-28 and 33-57).
//!
//! A leader announces the timestamp it holds for `T` twice: as a proposal
//! when `T` enters its queue, and as a release when `T` reaches the head of
//! the queue (after executing it in detective mode, before in preventive
//! mode). The agreed timestamp is the maximum. A leader holding less moves
//! `T` to it (revoking an optimistic execution, case 3) and announces the
//! release again when `T` reaches the head at the new timestamp; a leader
//! holding the maximum (case 2) waits for those second announcements. A
//! leader appends `T` to its log only when every participant announced the
//! release of `T` at the agreed timestamp: each then holds `T` in its
//! conflict maps at that timestamp and can no longer admit a conflicting
//! transaction below it — which is what rules out timestamp inversion
//! (Figure 5).
//!
//! The early proposals go beyond the paper's pseudocode: without them, two
//! leaders that queued two transactions in opposite orders (one of them
//! re-stamped late) would each wait for the other's release announcement of
//! the transaction it queues behind its own, for ever. With them every
//! leader learns the maximum before its queue blocks, and the agreed order
//! is the same everywhere.
//!
//! `Announcements` holds the announcements with private fields; its methods
//! take the server's `Core` and queue and call no other concern. What an
//! announcement asks of the queue (case 3's move, a check of cases 1 and 2)
//! comes back as `Announced`, and the server applies it (`server.rs`).
//!
//! `Config::second_round` exists only so that tests can show the inversion
//! the second round prevents; it is always on otherwise.

use super::Tiga;
use super::checkpoint::Folded;
use super::messages::{Msg, TsNotify};
use super::server::{Core, PState, Pending, Status, TxnQueue};
use meridian_core::{Ctx, NodeId, ShardId, TxnId};
use meridian_mechanisms::small_map::SmallMap;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// Most announcements repeated per tick.
const RENOTIFY_MAX: usize = 256;

/// The latest timestamp a participant announced for a transaction, and
/// whether it announced releasing it there.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub t: u64,
    pub released: bool,
}

/// A transaction another leader announced that this one never received.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Unknown {
    /// The leader that announced it (and is asked for it).
    from: NodeId,
    /// Ticks since, counting towards the next fetch.
    ticks: u32,
}

/// A leader's state of timestamp agreement: what each participant leader
/// announced per transaction (§3.5-3.6), and the transactions announced
/// but never received from their coordinator (Appendix B). A view change
/// forgets it all.
#[derive(Default)]
pub(super) struct Announcements {
    notes: FxHashMap<TxnId, SmallMap<ShardId, Note>>,
    unknown: BTreeMap<TxnId, Unknown>,
}

impl Announcements {
    /// This leader's own release of `id` at `t`.
    fn released_here(&mut self, id: TxnId, shard: ShardId, t: u64) {
        self.notes.entry(id).or_default().insert(shard, Note { t, released: true });
    }

    /// `shard`'s announcement: a later timestamp replaces the one held; at
    /// the same timestamp a release counts once announced.
    fn record(&mut self, id: TxnId, shard: ShardId, t: u64, released: bool) {
        let note = self.notes.entry(id).or_default().get_or_insert_with(shard, || Note { t, released });
        if t > note.t {
            *note = Note { t, released };
        } else if t == note.t {
            note.released |= released;
        }
    }

    fn note(&self, id: TxnId, shard: ShardId) -> Option<Note> {
        self.notes.get(&id).and_then(|n| n.get(&shard)).copied()
    }

    /// `id` reached the log: its announcements are no longer needed.
    pub(super) fn forget(&mut self, id: TxnId) {
        self.notes.remove(&id);
    }

    /// `id` was announced by `from` but never received.
    fn await_body(&mut self, id: TxnId, from: NodeId) {
        self.unknown.entry(id).or_insert(Unknown { from, ticks: 0 });
    }

    pub(super) fn body_arrived(&mut self, id: TxnId) {
        self.unknown.remove(&id);
    }

    /// One tick more for every unknown transaction; those due a fetch now
    /// (every `every_ticks`), with whom to ask.
    fn due_fetches(&mut self, every_ticks: u32) -> Vec<(TxnId, NodeId)> {
        let mut due = Vec::new();
        for (id, u) in self.unknown.iter_mut() {
            u.ticks += 1;
            if u.ticks % every_ticks == 0 {
                due.push((*id, u.from));
            }
        }
        due
    }

    pub(super) fn clear(&mut self) {
        self.notes.clear();
        self.unknown.clear();
    }

    pub(super) fn len(&self) -> usize {
        self.notes.len() + self.unknown.len()
    }
}

/// Whether a queued transaction waits for timestamp agreement.
fn awaiting_agreement(state: &PState) -> bool {
    matches!(state, PState::Executed { .. } | PState::Notified)
}

/// What an announcement asks of the leader that received it (§3.5).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Announced {
    /// Nothing more: another view, a transaction already logged here (an
    /// echo went back), or one never received from its coordinator.
    Nothing,
    /// Case 3: this leader used a smaller timestamp; the transaction moves
    /// to `t` (its optimistic execution, if any, revoked).
    MoveTo { t: u64 },
    /// Cases 1 and 2: the timestamp held here may now be agreed.
    Check,
}

/// Timestamp agreement at a leader (§3.5-3.6). Its methods take the
/// server's [`Core`] and the queue (and the folded memory) as parameters
/// and call no other concern; what an announcement asks of the queue the
/// server does ([`Announced`]).
impl Announcements {
    /// Announces this leader's timestamp for `id` to the other participant
    /// leaders: a proposal, or (`released`) its release at that timestamp.
    pub(super) fn notify_leaders(
        &mut self,
        core: &Core,
        ctx: &mut Ctx<'_, Tiga>,
        pq: &mut TxnQueue,
        id: TxnId,
        released: bool,
    ) {
        let p = pq.get(id).expect("announcing a queued transaction");
        if released {
            self.released_here(id, core.shard(), p.t);
        }
        notify_other_leaders(core, ctx, id, p.t, &p.body.shards, released);
        pq.announced(id, ctx.monotonic_ns());
        ctx.count("timestamp_notifications", 1);
    }

    /// §3.5-3.6 (Algorithm 2): another participant leader's announcement.
    pub(super) fn on_notify(
        &mut self,
        core: &Core,
        ctx: &mut Ctx<'_, Tiga>,
        from: NodeId,
        m: TsNotify,
        pq: &TxnQueue,
        folded: &Folded,
    ) -> Announced {
        let TsNotify { id, shard, g_view, t, released, echo, .. } = m;
        // A confirming leader records announcements too: it releases
        // nothing before its view is confirmed, so they only wait.
        if g_view != core.view().g_view || core.status() != Status::Normal || !core.is_leader() {
            return Announced::Nothing; // another view
        }
        if from != core.leader_node(ctx, shard) {
            return Announced::Nothing; // not from that shard's leader
        }
        let logged = core.log().entry_of(id).map(|e| e.t).or_else(|| folded.t_of(id));
        if let Some(t) = logged {
            // Already released here: the sender may have missed this
            // leader's announcement (lost, or sent before it restarted).
            if !echo {
                let msg = Msg::TsNotify(TsNotify { id, shard: core.shard(), g_view, t, released: true, echo: true });
                ctx.send(from, msg);
            }
            return Announced::Nothing;
        }
        self.record(id, shard, t, released);
        let Some(queued_t) = pq.get(id).map(|p| p.t) else {
            // Never received from the coordinator: fetch it later if it does
            // not arrive (Appendix B, coordinator failure).
            self.await_body(id, from);
            return Announced::Nothing;
        };
        if t > queued_t { Announced::MoveTo { t } } else { Announced::Check }
    }

    /// Whether every participant announced releasing `p` at the timestamp
    /// this leader holds (cases 1 and 2).
    pub(super) fn agreed(&self, p: &Pending, second_round: bool) -> bool {
        let id = p.body.id;
        let note = |s: &ShardId| self.note(id, *s);
        let all = p.body.shards.iter().all(|s| note(s).is_some_and(|n| n.released && n.t == p.t));
        if !second_round && !all {
            // Test-only: release as soon as every leader released it at a
            // timestamp no larger than ours (the first round alone).
            return p.body.shards.iter().all(|s| note(s).is_some_and(|n| n.released && n.t <= p.t));
        }
        all
    }

    /// Re-announces the timestamps of transactions still awaiting
    /// agreement (announcements may be lost): each one this leader last
    /// announced `resend_ns` ago or more, by its monotonic clock. A
    /// transaction queued less than `resend_ns` (most, fault-free) is
    /// announced only on arrival and on release.
    pub(super) fn renotify(&self, core: &Core, ctx: &mut Ctx<'_, Tiga>, pq: &mut TxnQueue) {
        let now_ns = ctx.monotonic_ns();
        // A drifting node's timer and monotonic clock both round down, so
        // the pass after a repeat can read a nanosecond short of
        // `resend_ns`: 1 % slack keeps repeats one pass apart.
        let due_after_ns = core.cfg().resend_ns - core.cfg().resend_ns / 100;
        let due = |p: &Pending| {
            p.body.is_multi_shard() && p.announced_ns.is_none_or(|at| now_ns.saturating_sub(at) >= due_after_ns)
        };
        let ids: Vec<TxnId> = pq.earliest(RENOTIFY_MAX, due).iter().map(|p| p.body.id).collect();
        for id in ids {
            let p = pq.get(id).expect("selected from the queue");
            notify_other_leaders(core, ctx, id, p.t, &p.body.shards, awaiting_agreement(&p.state));
            pq.announced(id, now_ns);
        }
    }

    /// Asks the notifying leader for transactions still unknown after a
    /// while (their coordinator may have failed mid-multicast).
    pub(super) fn fetch_unknown(&mut self, core: &Core, ctx: &mut Ctx<'_, Tiga>) {
        for (id, from) in self.due_fetches(core.cfg().fetch_after_ticks) {
            ctx.send(from, Msg::FetchTxn { id });
        }
    }
}

/// Only a transaction still awaiting agreement here is handed over: one
/// this leader logged had every participant's announcement, so the asker
/// holds it too (or folded it) and the question is stale.
pub(super) fn on_fetch_txn(ctx: &mut Ctx<'_, Tiga>, from: NodeId, id: TxnId, pq: &TxnQueue) {
    if let Some(p) = pq.get(id) {
        ctx.send(from, Msg::TxnFound { body: p.body.clone(), t: p.t });
    }
}

/// §3.6: tells the leaders of a transaction's other shards the timestamp
/// this leader holds for it (and whether it has released it).
fn notify_other_leaders(core: &Core, ctx: &mut Ctx<'_, Tiga>, id: TxnId, t: u64, shards: &[ShardId], released: bool) {
    for shard in shards.iter().copied().filter(|s| *s != core.shard()) {
        let to = core.leader_node(ctx, shard);
        let note = TsNotify { id, shard: core.shard(), g_view: core.view().g_view, t, released, echo: false };
        ctx.send(to, Msg::TsNotify(note));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(seq: u64) -> TxnId {
        TxnId { node: NodeId(9), seq }
    }

    #[test]
    fn a_later_announcement_replaces_an_earlier_one_and_a_release_at_the_same_timestamp_counts() {
        let mut a = Announcements::default();
        a.record(id(1), ShardId(1), 10, false);
        a.record(id(1), ShardId(1), 5, true);
        assert_eq!(a.note(id(1), ShardId(1)), Some(Note { t: 10, released: false }), "an older one is ignored");
        a.record(id(1), ShardId(1), 10, true);
        assert_eq!(a.note(id(1), ShardId(1)), Some(Note { t: 10, released: true }));
        a.record(id(1), ShardId(1), 12, false);
        assert_eq!(a.note(id(1), ShardId(1)), Some(Note { t: 12, released: false }), "a move is a new proposal");
        a.forget(id(1));
        assert_eq!(a.note(id(1), ShardId(1)), None);
    }

    #[test]
    fn an_unknown_transaction_is_fetched_every_k_ticks_until_it_arrives() {
        let mut a = Announcements::default();
        a.await_body(id(1), NodeId(3));
        assert!(a.due_fetches(2).is_empty());
        assert_eq!(a.due_fetches(2), [(id(1), NodeId(3))]);
        assert!(a.due_fetches(2).is_empty());
        a.body_arrived(id(1));
        assert!(a.due_fetches(1).is_empty());
        assert_eq!(a.len(), 0);
    }
}
