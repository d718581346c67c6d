//! Resolving in-doubt transactions after coordinator or leader failure
//! (cooperative termination, see `meridian_mechanisms::twopc`).
//!
//! A leader holding a prepared transaction without a decision for
//! `in_doubt_ticks` termination ticks asks every server of every other
//! participant (every replica of its shard, or with `lock_at = "home"` its
//! home replica). Replicas answer from their applied log; a leader that
//! never saw the transaction first makes an abort durable in its log (so a
//! late prepare can no longer succeed there) and answers once it is
//! applied. The asker decides when the answers do (any abort or commit, or
//! all prepared) and logs the decision like a coordinator's. A home replica
//! that is down answers nothing until it is back: the participants that
//! prepared wait for it (no other replica takes its place).

use super::TwoPlPaxos;
use super::messages::{Cmd, Msg, Refusal};
use super::participant::Participant;
use super::replica::{Replica, Stage};
use meridian_core::{Ctx, NodeId, TxnId};
use meridian_mechanisms::twopc::{Decision, TxnStatus, termination_decision};

impl Replica {
    /// Called every termination tick: query for transactions long in doubt,
    /// and take back the locks of unprepared transactions whose lease ran
    /// out (their coordinator vanished, or the answer that would have
    /// released them was lost).
    pub(super) fn check_in_doubt(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>) {
        if !self.leading {
            return;
        }
        let mut due: Vec<TxnId> = Vec::new();
        let mut expired: Vec<TxnId> = Vec::new();
        for (txn, a) in self.active.iter_mut() {
            a.age_ticks += 1;
            match a.stage {
                Stage::Prepared => {
                    let over = a.age_ticks.saturating_sub(self.cfg.in_doubt_ticks);
                    if a.age_ticks >= self.cfg.in_doubt_ticks && over % self.cfg.in_doubt_ticks == 0 {
                        due.push(*txn);
                    }
                }
                Stage::Locking { .. } | Stage::Executed if a.age_ticks >= self.cfg.lock_lease_ticks => {
                    expired.push(*txn);
                }
                // Unprepared, within its lease.
                Stage::Locking { .. } | Stage::Executed => {}
                // Its prepare is being made durable: neither in doubt nor
                // leased any more (the log applies or voids it).
                Stage::Preparing => {}
            }
        }
        due.sort_unstable();
        expired.sort_unstable();
        for txn in due {
            self.query_participants(ctx, txn);
        }
        for txn in expired {
            self.expire(ctx, txn);
        }
    }

    /// An unprepared transaction's lease ran out: abort it here (always
    /// safe before a prepare; a late prepare will be refused). Expiring an
    /// earlier one of the same tick may have granted locks whose new holder
    /// wounded this one: then it is gone already.
    fn expire(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId) {
        let Some(a) = self.active.remove(&txn) else { return };
        debug_assert!(matches!(a.stage, Stage::Locking { .. } | Stage::Executed), "only unprepared leases expire");
        self.refused.insert(txn);
        ctx.count("lock_leases_expired", 1);
        ctx.send(a.coordinator, Msg::Refused { txn, part: self.part, reason: Refusal::Wounded });
        let granted = self.release_locks(txn, &a.locks);
        self.acquire(ctx, granted);
    }

    fn query_participants(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId) {
        let Some(record) = self.log.prepared_record(txn) else {
            return;
        };
        let others: Vec<Participant> = record.participants.iter().copied().filter(|p| *p != self.part).collect();
        self.in_doubt.entry(txn).or_default();
        ctx.count("in_doubt_queries", 1);
        if others.is_empty() {
            // The only participant, and prepared: every participant prepared,
            // so the transaction committed (its coordinator may have said so
            // to the client already).
            ctx.count("in_doubt_resolved", 1);
            self.in_doubt.remove(&txn);
            self.propose(ctx, Cmd::Commit(txn));
            return;
        }
        for part in others {
            for replica in self.cfg.lock_at.servers(ctx.topology(), part) {
                ctx.send(replica, Msg::Query { txn });
            }
        }
    }

    pub(super) fn on_query(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, from: NodeId, txn: TxnId) {
        if let Some(status) = self.log.status(txn) {
            return ctx.send(from, Msg::Status { txn, part: self.part, status: Some(status) });
        }
        if !self.leading {
            return ctx.send(from, Msg::Status { txn, part: self.part, status: None });
        }
        match self.active.get(&txn).map(|a| a.stage) {
            // Its prepare is in flight here: the asker will ask again.
            Some(Stage::Preparing) => {}
            // Never seen, or unprepared here: abort it first.
            None | Some(Stage::Locking { .. } | Stage::Executed | Stage::Prepared) => {
                self.pending_answers.entry(txn).or_default().push(from);
                self.abort_unprepared(ctx, txn);
            }
        }
    }

    pub(super) fn on_status(
        &mut self,
        ctx: &mut Ctx<'_, TwoPlPaxos>,
        txn: TxnId,
        part: Participant,
        status: Option<TxnStatus>,
    ) {
        if !self.leading || self.log.prepared_record(txn).is_none() {
            return;
        }
        let Some(answers) = self.in_doubt.get_mut(&txn) else {
            return;
        };
        match (status, answers.get(&part)) {
            (None | Some(TxnStatus::Forgotten), _) => {}
            // A decided answer outranks a prepared one from another replica.
            (Some(s), Some(TxnStatus::Prepared) | None) => {
                answers.insert(part, s);
            }
            (Some(_), Some(_)) => {}
        }
        let participants = &self.log.prepared_record(txn).expect("checked above").participants;
        let decision =
            termination_decision(participants.iter().filter(|p| **p != self.part).map(|p| answers.get(p).copied()));
        if let Some(decision) = decision {
            self.in_doubt.remove(&txn);
            ctx.count("in_doubt_resolved", 1);
            let cmd = if decision == Decision::Commit { Cmd::Commit(txn) } else { Cmd::Abort(txn) };
            self.propose(ctx, cmd);
        }
    }
}
