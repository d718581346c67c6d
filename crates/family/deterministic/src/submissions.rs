//! A deterministic protocol's client-side bookkeeping, shared by Calvin's
//! and SLOG's clients: identifiers unique across the client's restarts
//! (`meridian_mechanisms::txnids`), the requests waiting for an answer,
//! resubmission after `retry_ms` without one (the log drops the repeat),
//! a fresh identifier when the system asks for one (SLOG's restarts), and
//! an unknown outcome after `max_attempts`. The clients keep what differs:
//! where a transaction is sent and who may answer it.

use meridian_core::procedure::Recon;
use meridian_core::process::CHECKED_MAX;
use meridian_core::{Lsn, NodeId, Program, RequestId, TxnId};
use meridian_mechanisms::txnids::EpochGate;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug)]
struct Pending {
    request: RequestId,
    program: Program,
    /// Its reconnaissance, if it needed one (`crate::recon`).
    recon: Option<Arc<Recon>>,
    attempts: u32,
    /// The tick of the last submission.
    sent_tick: u64,
}

/// What a tick asks of the client.
#[derive(Clone, Debug, PartialEq)]
pub enum Due {
    /// Submit `id` again (and ask who may answer it).
    Retry(TxnId, Program, Option<Arc<Recon>>),
    /// Tell `request`'s caller its outcome is unknown.
    GiveUp(RequestId),
}

pub struct Submissions {
    me: NodeId,
    ids: EpochGate<(RequestId, Program)>,
    pending: BTreeMap<TxnId, Pending>,
    ticks: u64,
    retry_ticks: u64,
    max_attempts: u32,
}

impl Submissions {
    pub fn new(me: NodeId, retry_ns: u64, tick_ns: u64, max_attempts: u32) -> Submissions {
        let retry_ticks = retry_ns.div_ceil(tick_ns).max(1);
        Submissions { me, ids: EpochGate::new(me), pending: BTreeMap::new(), ticks: 0, retry_ticks, max_attempts }
    }

    /// Requests waiting for their outcome.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    /// The client's floor (`meridian_mechanisms::client_floors`): the
    /// lowest identifier it still waits for, or the next it will name. It
    /// never submits an identifier below it again.
    pub fn floor(&self) -> u64 {
        self.pending.keys().next().map_or_else(|| self.ids.next_seq(), |id| id.seq)
    }

    /// Requests held until the identifier epoch is durable.
    pub fn held(&self) -> usize {
        self.ids.held()
    }

    /// The client starts: the epoch to record (`recorded_at` its LSN).
    pub fn start(&mut self, recorded_epochs: impl IntoIterator<Item = u64>) -> u64 {
        self.ids.start(recorded_epochs)
    }

    pub fn recorded_at(&mut self, lsn: Lsn) {
        self.ids.recorded_at(lsn);
    }

    /// Requests that may be submitted now that `upto` is durable.
    pub fn persisted(&mut self, upto: Lsn) -> Vec<(RequestId, Program)> {
        self.ids.persisted(upto)
    }

    /// A new request: returned if it may be submitted now, else held.
    pub fn admit(&mut self, request: RequestId, program: Program) -> Option<(RequestId, Program)> {
        self.ids.admit((request, program))
    }

    /// Names a request's first submission (with its reconnaissance, if
    /// it needed one).
    pub fn open(&mut self, request: RequestId, program: Program, recon: Option<Arc<Recon>>) -> TxnId {
        let id = self.ids.next_id();
        self.pending.insert(id, Pending { request, program, recon, attempts: 1, sent_tick: self.ticks });
        id
    }

    /// The request `id` answers, if it still waits.
    pub fn answered(&mut self, id: TxnId) -> Option<RequestId> {
        self.pending.remove(&id).map(|p| p.request)
    }

    /// The system asks for `id` again under a new identifier: the new one
    /// with its program, or the request to give up on.
    pub fn renew(&mut self, id: TxnId) -> Option<Result<(TxnId, Program), RequestId>> {
        let mut p = self.pending.remove(&id)?;
        if p.attempts >= self.max_attempts {
            return Some(Err(p.request));
        }
        p.attempts += 1;
        p.sent_tick = self.ticks;
        let id = self.ids.next_id();
        let program = p.program.clone();
        self.pending.insert(id, p);
        Some(Ok((id, program)))
    }

    /// The program of a submission that waits.
    pub fn program(&self, id: TxnId) -> Option<&Program> {
        self.pending.get(&id).map(|p| &p.program)
    }

    /// A transaction whose reconnaissance no longer held at its turn (it
    /// aborted everywhere): its request, program and attempts so far, for
    /// a new pass; `None` if it no longer waits.
    pub fn take(&mut self, id: TxnId) -> Option<(RequestId, Program, u32)> {
        self.pending.remove(&id).map(|p| (p.request, p.program, p.attempts))
    }

    /// A request whose new pass is done: submitted again under a new
    /// identifier, as its attempt `attempts + 1`; `Err` (give up) once it
    /// has made `max_attempts`.
    pub fn reopen(
        &mut self,
        request: RequestId,
        program: Program,
        recon: Arc<Recon>,
        attempts: u32,
    ) -> Result<TxnId, RequestId> {
        if attempts >= self.max_attempts {
            return Err(request);
        }
        let id = self.ids.next_id();
        let pending = Pending { request, program, recon: Some(recon), attempts: attempts + 1, sent_tick: self.ticks };
        self.pending.insert(id, pending);
        Ok(id)
    }

    /// One tick: what waited `retry_ms` is submitted again, or given up
    /// after `max_attempts` (at most `CHECKED_MAX` per tick).
    pub fn tick(&mut self) -> Vec<Due> {
        self.ticks += 1;
        let (now, retry) = (self.ticks, self.retry_ticks);
        let due: Vec<TxnId> = self
            .pending
            .iter()
            .filter(|(_, p)| now >= p.sent_tick + retry)
            .map(|(id, _)| *id)
            .take(CHECKED_MAX)
            .collect();
        let mut out = Vec::with_capacity(due.len());
        for id in due {
            let p = self.pending.get_mut(&id).expect("pending");
            if p.attempts >= self.max_attempts {
                let p = self.pending.remove(&id).expect("pending");
                out.push(Due::GiveUp(p.request));
                continue;
            }
            p.attempts += 1;
            p.sent_tick = now;
            out.push(Due::Retry(id, p.program.clone(), p.recon.clone()));
        }
        out
    }

    pub fn check_invariants(&self) {
        self.ids.check_invariants();
        for (id, p) in self.pending.iter().take(CHECKED_MAX) {
            assert_eq!(id.node, self.me, "a client's own transactions");
            assert!(p.attempts >= 1 && p.attempts <= self.max_attempts, "attempts within the bound");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::{Key, Op};

    fn started() -> Submissions {
        let mut s = Submissions::new(NodeId(3), 300, 100, 2);
        s.start(Vec::new());
        s.recorded_at(Lsn(1));
        s.persisted(Lsn(1));
        s
    }

    fn program() -> Program {
        Program::new(vec![Op::Read { key: Key(1) }])
    }

    #[test]
    fn a_request_is_submitted_again_only_after_retry_ms_then_given_up_after_max_attempts() {
        let mut s = started();
        let id = s.open(RequestId(7), program(), None);
        assert!(s.tick().is_empty() && s.tick().is_empty(), "not before retry_ms");
        assert_eq!(s.tick(), vec![Due::Retry(id, program(), None)]);
        assert!(s.tick().is_empty() && s.tick().is_empty());
        assert_eq!(s.tick(), vec![Due::GiveUp(RequestId(7))], "two attempts in all");
        assert_eq!(s.outstanding(), 0);
    }

    #[test]
    fn the_floor_is_the_oldest_identifier_still_waited_for_and_never_falls() {
        let mut s = started();
        let a = s.open(RequestId(1), program(), None);
        let b = s.open(RequestId(2), program(), None);
        assert_eq!(s.floor(), a.seq);
        s.answered(a);
        assert_eq!(s.floor(), b.seq, "an answered one no longer holds it");
        s.answered(b);
        assert!(s.floor() > b.seq, "with none waiting, the next identifier");
        let c = s.open(RequestId(3), program(), None);
        assert_eq!(s.floor(), c.seq);
    }

    #[test]
    fn a_renewed_request_keeps_its_caller_under_a_new_identifier_and_its_attempts_count() {
        let mut s = started();
        let id = s.open(RequestId(7), program(), None);
        let Some(Ok((renewed, _))) = s.renew(id) else { panic!() };
        assert_ne!(renewed, id);
        assert_eq!(s.answered(id), None, "the old identifier answers nothing");
        assert_eq!(s.renew(renewed), Some(Err(RequestId(7))), "the second renewal exceeds max_attempts");
    }
}
