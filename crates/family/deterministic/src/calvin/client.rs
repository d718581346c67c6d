//! The client of `calvin`: it names each transaction (identifiers unique
//! across its restarts, `meridian_mechanisms::txnids`), submits it to the
//! nearest sequencer, and waits for the answering replica — the one in
//! that sequencer's region of the transaction's first shard — after
//! execution. Without an answer for `retry_ms` it submits again (the
//! global log drops the repeat) and asks the answering replica; after
//! `max_attempts` it reports an unknown outcome.
//!
//! Calvin needs every transaction's keys before ordering it (§3.2.1).
//! Procedures whose keys depend on their reads need reconnaissance
//! (OLLP), which is not implemented yet: they are refused
//! (`refused_not_one_shot`).

use super::messages::{Msg, Record, Timer, Txn};
use super::{Calvin, Config};
use meridian_core::process::CHECKED_MAX;
use meridian_core::{AbortReason, Ctx, Lsn, NodeId, Outcome, Process, Program, RequestId, Topology, TxnId};
use meridian_mechanisms::txnids::EpochGate;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug)]
struct Pending {
    request: RequestId,
    program: Program,
    responder: NodeId,
    attempts: u32,
    /// The tick of the last submission.
    sent_tick: u64,
}

pub struct Client {
    topo: Arc<Topology>,
    me: NodeId,
    sequencer: NodeId,
    cfg: Config,
    ids: EpochGate<(RequestId, Program)>,
    pending: BTreeMap<TxnId, Pending>,
    ticks: u64,
}

impl Client {
    pub fn new(topo: Arc<Topology>, me: NodeId, sequencer: NodeId, cfg: Config) -> Client {
        Client { topo, me, sequencer, cfg, ids: EpochGate::new(me), pending: BTreeMap::new(), ticks: 0 }
    }

    /// Requests waiting for their outcome.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    fn retry_ticks(&self) -> u64 {
        self.cfg.retry_ns.div_ceil(self.cfg.client_tick_ns).max(1)
    }

    fn submit(&mut self, ctx: &mut Ctx<'_, Calvin>, request: RequestId, program: Program) {
        if program.is_empty() {
            return ctx.complete(request, Outcome::Committed { results: Vec::new() });
        }
        if !super::runnable(&program) {
            ctx.count("refused_not_one_shot", 1);
            return ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
        }
        let id = self.ids.next_id();
        let region = self.topo.region_of(self.sequencer);
        let responder = super::responder(&self.topo, &Txn::new(id, program.clone(), region, &self.topo));
        ctx.send(self.sequencer, Msg::Submit { id, program: program.clone() });
        self.pending.insert(id, Pending { request, program, responder, attempts: 1, sent_tick: self.ticks });
    }

    fn on_reply(&mut self, ctx: &mut Ctx<'_, Calvin>, id: TxnId, outcome: Outcome) {
        if let Some(p) = self.pending.remove(&id) {
            ctx.complete(p.request, outcome);
        }
    }

    /// Resubmits what went unanswered, and gives up after `max_attempts`.
    fn on_tick(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        ctx.set_timer(self.cfg.client_tick_ns, Timer::ClientTick);
        self.ticks += 1;
        let (now, retry) = (self.ticks, self.retry_ticks());
        let due: Vec<TxnId> = self
            .pending
            .iter()
            .filter(|(_, p)| now >= p.sent_tick + retry)
            .map(|(id, _)| *id)
            .take(CHECKED_MAX)
            .collect();
        for id in due {
            let p = self.pending.get_mut(&id).expect("pending");
            if p.attempts >= self.cfg.max_attempts {
                let p = self.pending.remove(&id).expect("pending");
                ctx.count("unknown_outcomes", 1);
                ctx.complete(p.request, Outcome::Unknown);
                continue;
            }
            p.attempts += 1;
            p.sent_tick = self.ticks;
            ctx.count("retries", 1);
            ctx.send(self.sequencer, Msg::Submit { id, program: p.program.clone() });
            ctx.send(p.responder, Msg::Query { id });
        }
    }
}

impl Process<Calvin> for Client {
    fn on_start(&mut self, ctx: &mut Ctx<'_, Calvin>, durable: Vec<Record>) {
        let epochs = durable.into_iter().filter_map(|r| match r {
            Record::Epoch(e) => Some(e),
            _ => None,
        });
        let epoch = self.ids.start(epochs);
        let lsn = ctx.append(Record::Epoch(epoch));
        self.ids.recorded_at(lsn);
        ctx.set_timer(self.cfg.client_tick_ns, Timer::ClientTick);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, Calvin>, upto: Lsn) {
        for (request, program) in self.ids.persisted(upto) {
            self.submit(ctx, request, program);
        }
    }

    fn on_request(&mut self, ctx: &mut Ctx<'_, Calvin>, request: RequestId, program: Program) {
        if let Some((request, program)) = self.ids.admit((request, program)) {
            self.submit(ctx, request, program);
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Calvin>, _from: NodeId, msg: Msg) {
        match msg {
            Msg::Reply { id, outcome } => self.on_reply(ctx, id, outcome),
            // Messages to sequencers and replicas.
            Msg::Paxos(_)
            | Msg::Submit { .. }
            | Msg::StoreBatch(_)
            | Msg::BatchStored { .. }
            | Msg::Order { .. }
            | Msg::FetchBatch { .. }
            | Msg::Log { .. }
            | Msg::FetchLog { .. }
            | Msg::Reads { .. }
            | Msg::ReadsWanted { .. }
            | Msg::Query { .. } => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Calvin>, timer: Timer) {
        match timer {
            Timer::ClientTick => self.on_tick(ctx),
            Timer::Paxos(_) | Timer::Epoch | Timer::SequencerTick | Timer::ReplicaTick => {
                unreachable!("a sequencer's or replica's timer at a client")
            }
        }
    }

    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("pending", self.pending.len());
        out("queued", self.ids.held());
    }

    fn check_invariants(&self) {
        self.ids.check_invariants();
        for (id, p) in self.pending.iter().take(CHECKED_MAX) {
            assert_eq!(id.node, self.me, "a client's own transactions");
            assert!(p.attempts >= 1 && p.attempts <= self.cfg.max_attempts, "attempts within the bound");
        }
    }
}
