//! The client of `calvin`: it names each transaction (identifiers unique
//! across its restarts, `meridian_mechanisms::txnids`), submits it to the
//! nearest sequencer, and waits for the answering replica — the one in
//! that sequencer's region of the transaction's first shard — after
//! execution. Without an answer for `retry_ms` it submits again (the
//! global log drops the repeat) and asks every copy of that shard (every
//! region executes the same log, so another region answers while its own
//! replica is down); after `max_attempts` it reports an unknown outcome.
//!
//! Calvin needs every transaction's keys before ordering it (§3.2.1).
//! Procedures whose keys depend on their reads need reconnaissance
//! (OLLP), which is not implemented yet: they are refused
//! (`refused_not_one_shot`).

use super::messages::{Msg, Record, Timer, Txn};
use super::{Calvin, Config};
use crate::submissions::{Due, Submissions};
use meridian_core::{AbortReason, Ctx, Lsn, NodeId, Outcome, Process, Program, RequestId, Topology, TxnId};
use std::sync::Arc;

pub struct Client {
    topo: Arc<Topology>,
    sequencer: NodeId,
    cfg: Config,
    submissions: Submissions,
}

impl Client {
    pub fn new(topo: Arc<Topology>, me: NodeId, sequencer: NodeId, cfg: Config) -> Client {
        let submissions = Submissions::new(me, cfg.retry_ns, cfg.client_tick_ns, cfg.max_attempts);
        Client { topo, sequencer, cfg, submissions }
    }

    /// Requests waiting for their outcome.
    pub fn outstanding(&self) -> usize {
        self.submissions.outstanding()
    }

    fn submit(&mut self, ctx: &mut Ctx<'_, Calvin>, request: RequestId, program: Program) {
        if program.is_empty() {
            return ctx.complete(request, Outcome::Committed { results: Vec::new() });
        }
        if !super::runnable(&program) {
            ctx.count("refused_not_one_shot", 1);
            return ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
        }
        let id = self.submissions.open(request, program.clone());
        ctx.send(self.sequencer, Msg::Submit { id, program });
    }

    /// The replicas that may answer: every copy of the transaction's first
    /// shard (its region's answers first; another region's answers while
    /// that one is down).
    fn responders(&self, id: TxnId, program: Program) -> Vec<NodeId> {
        let region = self.topo.region_of(self.sequencer);
        let shard = Txn::new(id, program, region, &self.topo).first_shard(&self.topo);
        self.topo.replicas(shard).to_vec()
    }

    fn on_reply(&mut self, ctx: &mut Ctx<'_, Calvin>, id: TxnId, outcome: Outcome) {
        if let Some(request) = self.submissions.answered(id) {
            ctx.complete(request, outcome);
        }
    }

    /// Resubmits what went unanswered (asking who may answer too),
    /// and gives up after `max_attempts`.
    fn on_tick(&mut self, ctx: &mut Ctx<'_, Calvin>) {
        ctx.set_timer(self.cfg.client_tick_ns, Timer::ClientTick);
        for due in self.submissions.tick() {
            match due {
                Due::Retry(id, program) => {
                    ctx.count("retries", 1);
                    ctx.send(self.sequencer, Msg::Submit { id, program: program.clone() });
                    for r in self.responders(id, program) {
                        ctx.send(r, Msg::Query { id });
                    }
                }
                Due::GiveUp(request) => {
                    ctx.count("unknown_outcomes", 1);
                    ctx.complete(request, Outcome::Unknown);
                }
            }
        }
    }
}

impl Process<Calvin> for Client {
    fn on_start(&mut self, ctx: &mut Ctx<'_, Calvin>, durable: Vec<Record>) {
        let epochs = durable.into_iter().filter_map(|r| match r {
            Record::Epoch(e) => Some(e),
            _ => None,
        });
        let epoch = self.submissions.start(epochs);
        let lsn = ctx.append(Record::Epoch(epoch));
        self.submissions.recorded_at(lsn);
        ctx.set_timer(self.cfg.client_tick_ns, Timer::ClientTick);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, Calvin>, upto: Lsn) {
        for (request, program) in self.submissions.persisted(upto) {
            self.submit(ctx, request, program);
        }
    }

    fn on_request(&mut self, ctx: &mut Ctx<'_, Calvin>, request: RequestId, program: Program) {
        if let Some((request, program)) = self.submissions.admit(request, program) {
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
        out("pending", self.submissions.outstanding());
        out("queued", self.submissions.held());
    }

    fn check_invariants(&self) {
        self.submissions.check_invariants();
    }
}
