//! Timestamp agreement among the participant leaders of a multi-shard
//! transaction (Tiga §3.5-3.6; Algorithm 2 lines 21-28 and 33-57).
//!
//! Each leader announces the timestamp it holds for `T` (after executing it
//! in detective mode, before in preventive mode). The agreed timestamp is
//! the maximum. A leader holding less moves `T` to the agreed timestamp
//! (revoking its execution, case 3) and announces again once `T` reaches
//! the head of its queue at the new timestamp; a leader holding the maximum
//! while others did not (case 2) waits for those second announcements. A
//! leader releases `T` only when every participant has announced the agreed
//! timestamp — so no participant can still commit conflicting transactions
//! below it, which is what rules out timestamp inversion (Figure 5).
//!
//! `Config::second_round` exists only so that tests can show the inversion
//! the second round prevents; it is always on otherwise.

use super::Tiga;
use super::messages::{Msg, TxnBody};
use super::server::{PState, Server};
use meridian_core::{Ctx, NodeId, TxnId};
use std::sync::Arc;

impl Server {
    /// Announces this leader's timestamp for `id` to the other participant
    /// leaders.
    pub(super) fn notify_leaders(&mut self, ctx: &mut Ctx<'_, Tiga>, id: TxnId) {
        let stamp = self.stamps[&id];
        let p = &self.pq[&stamp];
        let (shards, t) = (p.body.shards.clone(), p.t);
        self.notes.entry(id).or_default().insert(self.shard, t);
        for shard in shards.into_iter().filter(|s| *s != self.shard) {
            let to = self.leader_node(ctx, shard);
            let msg = Msg::TsNotify { id, shard: self.shard, g_view: self.view.g_view, t };
            ctx.send(to, msg);
        }
        ctx.count("timestamp_notifications", 1);
    }

    pub(super) fn on_notify(
        &mut self,
        ctx: &mut Ctx<'_, Tiga>,
        from: NodeId,
        id: TxnId,
        shard: meridian_core::ShardId,
        g_view: u64,
        t: u64,
    ) {
        if g_view != self.view.g_view || !self.is_leader() || from != self.leader_node(ctx, shard) {
            return; // another view, or not from that shard's leader
        }
        if self.log.position(id).is_some() {
            return; // already released: a late duplicate
        }
        let note = self.notes.entry(id).or_default().entry(shard).or_insert(t);
        *note = (*note).max(t);
        let Some(stamp) = self.stamps.get(&id).copied() else {
            // Never received from the coordinator: fetch it later if it does
            // not arrive (Appendix B, coordinator failure).
            self.unknown_notes.entry(id).or_insert((from, 0));
            return;
        };
        if t > stamp.t {
            // Case 3: this leader used a smaller timestamp.
            if matches!(self.pq[&stamp].state, PState::Executed { .. }) {
                self.revoke(ctx, id);
            }
            self.reposition(id, t);
            ctx.count("timestamp_updates", 1);
        } else {
            self.check_agreement(ctx, id);
        }
        // Either way conflicting successors may now be free to go.
        self.release(ctx);
        self.after_event(ctx);
    }

    /// Releases `id` if every participant announced the timestamp this
    /// leader holds (cases 1 and 2), executing it first in preventive mode.
    pub(super) fn check_agreement(&mut self, ctx: &mut Ctx<'_, Tiga>, id: TxnId) {
        let Some(stamp) = self.stamps.get(&id).copied() else { return };
        let p = &self.pq[&stamp];
        if p.state == PState::Waiting {
            return;
        }
        let notes = self.notes.get(&id);
        let agreed = |s: &meridian_core::ShardId| notes.and_then(|n| n.get(s)).is_some_and(|nt| *nt == p.t);
        let mut all = p.body.shards.iter().all(agreed);
        if !self.cfg.second_round && !all {
            // Test-only: release as soon as every leader answered with a
            // timestamp no larger than ours (the first round alone).
            all = p.body.shards.iter().all(|s| notes.and_then(|n| n.get(s)).is_some_and(|nt| *nt <= p.t));
        }
        if !all {
            return;
        }
        match p.state.clone() {
            PState::Executed { hash, result } => self.finalize(ctx, id, hash, result),
            PState::Notified => {
                let (hash, result) = self.execute(ctx, id);
                self.finalize(ctx, id, hash, result);
            }
            PState::Waiting => unreachable!("checked above"),
        }
    }

    /// Another leader hands over a transaction this one was notified of but
    /// never received.
    pub(super) fn on_txn_found(&mut self, ctx: &mut Ctx<'_, Tiga>, body: Arc<TxnBody>, t: u64) {
        let id = body.id;
        if !body.shards.contains(&self.shard) || self.log.position(id).is_some() || self.stamps.contains_key(&id) {
            return;
        }
        self.unknown_notes.remove(&id);
        self.held.remove(&id);
        ctx.count("transactions_fetched", 1);
        self.admit(ctx, body, t, None);
        self.release(ctx);
        self.after_event(ctx);
    }

    /// Asks the notifying leader for transactions still unknown after a
    /// while (their coordinator may have failed mid-multicast).
    pub(super) fn fetch_unknown(&mut self, ctx: &mut Ctx<'_, Tiga>) {
        let mut due = Vec::new();
        for (id, (from, ticks)) in self.unknown_notes.iter_mut() {
            *ticks += 1;
            if *ticks % self.cfg.fetch_after_ticks == 0 {
                due.push((*id, *from));
            }
        }
        for (id, from) in due {
            ctx.send(from, Msg::FetchTxn { id });
        }
    }

    pub(super) fn on_fetch_txn(&mut self, ctx: &mut Ctx<'_, Tiga>, from: NodeId, id: TxnId) {
        let found = match self.stamps.get(&id) {
            Some(s) => Some((self.pq[s].body.clone(), self.pq[s].t)),
            None => self.log.entry_of(id).map(|e| (e.body.clone(), e.t)),
        };
        if let Some((body, t)) = found {
            ctx.send(from, Msg::TxnFound { body, t });
        }
    }
}
