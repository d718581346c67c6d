//! The client of `slog`: it names each transaction (identifiers unique
//! across its restarts, `meridian_mechanisms::txnids`), submits it to its
//! region's sequencer group (the nearest; any member passes it on to the
//! group's leader), and waits for the answering replica —
//! the home region's (single-home) or its own region's (multi-home)
//! replica of the transaction's first shard. A transaction that assumed a
//! wrong home is aborted by every region and comes back as `Restart`: the
//! client submits it again under a new identifier, and the sequencer
//! annotates it afresh (SLOG §3.2). Without an answer for `retry_ms` it
//! submits again to every member of the group (the local log drops the
//! repeat; a member that does not lead names the one that does, where the
//! client submits from then on) and asks every replica of the first shard;
//! after `max_attempts` it reports an unknown outcome.
//!
//! SLOG, like Calvin, needs every transaction's keys before ordering it:
//! procedures whose keys depend on their reads are refused
//! (`refused_not_one_shot`).

use super::messages::{Msg, Record, Timer};
use super::{Config, Slog};
use crate::submissions::{Due, Submissions};
use meridian_core::{AbortReason, Ctx, Lsn, NodeId, Outcome, Process, Program, RequestId, Topology, TxnId};
use std::sync::Arc;

pub struct Client {
    topo: Arc<Topology>,
    /// Its region's sequencer group, and the member it submits to (the
    /// group's leader, as far as it knows).
    sequencers: Vec<NodeId>,
    current: usize,
    cfg: Config,
    submissions: Submissions,
}

impl Client {
    pub fn new(topo: Arc<Topology>, me: NodeId, sequencers: Vec<NodeId>, cfg: Config) -> Client {
        assert!(!sequencers.is_empty(), "a client submits to a sequencer group");
        let submissions = Submissions::new(me, cfg.retry_ns, cfg.client_tick_ns, cfg.max_attempts);
        Client { topo, sequencers, current: 0, cfg, submissions }
    }

    fn sequencer(&self) -> NodeId {
        self.sequencers[self.current]
    }

    /// Requests waiting for their outcome.
    pub fn outstanding(&self) -> usize {
        self.submissions.outstanding()
    }

    fn submit(&mut self, ctx: &mut Ctx<'_, Slog>, request: RequestId, program: Program) {
        if program.is_empty() {
            return ctx.complete(request, Outcome::Committed { results: Vec::new() });
        }
        if !super::runnable(&program) {
            ctx.count("refused_not_one_shot", 1);
            return ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
        }
        let id = self.submissions.open(request, program.clone());
        ctx.send(self.sequencer(), Msg::Submit { id, program });
    }

    /// Every region aborted the transaction for a wrong home: submit it
    /// again under a new identifier, to be annotated afresh.
    fn on_restart(&mut self, ctx: &mut Ctx<'_, Slog>, id: TxnId) {
        match self.submissions.renew(id) {
            Some(Ok((id, program))) => {
                ctx.count("restarts", 1);
                ctx.send(self.sequencer(), Msg::Submit { id, program });
            }
            Some(Err(request)) => {
                ctx.count("unknown_outcomes", 1);
                ctx.complete(request, Outcome::Unknown);
            }
            None => {}
        }
    }

    /// The replicas that may answer `program`: its first shard's (the home
    /// region's or the origin's, which the client does not know).
    fn responders(&self, program: &Program) -> Vec<NodeId> {
        let shard_of = |k| self.topo.shard_of(k);
        let first = program.ops.first().map(|op| op.key());
        let anchor = || program.procedure.as_ref().and_then(|p| p.anchor(0));
        let shard = first.or_else(anchor).map_or_else(|| program.shards(shard_of)[0], shard_of);
        self.topo.replicas(shard).to_vec()
    }

    fn on_reply(&mut self, ctx: &mut Ctx<'_, Slog>, id: TxnId, outcome: Outcome) {
        if let Some(request) = self.submissions.answered(id) {
            ctx.complete(request, outcome);
        }
    }

    /// Resubmits what went unanswered (asking who may answer too), and
    /// gives up after `max_attempts`.
    fn on_tick(&mut self, ctx: &mut Ctx<'_, Slog>) {
        ctx.set_timer(self.cfg.client_tick_ns, Timer::ClientTick);
        for due in self.submissions.tick() {
            match due {
                Due::Retry(id, program) => {
                    ctx.count("retries", 1);
                    let responders = self.responders(&program);
                    // Every member: the one it submitted to may be down
                    // (the others pass it on, and say who leads).
                    for s in &self.sequencers {
                        ctx.send(*s, Msg::Submit { id, program: program.clone() });
                    }
                    for r in responders {
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

impl Process<Slog> for Client {
    fn on_start(&mut self, ctx: &mut Ctx<'_, Slog>, durable: Vec<Record>) {
        let epochs = durable.into_iter().filter_map(|r| match r {
            Record::Epoch(e) => Some(e),
            _ => None,
        });
        let epoch = self.submissions.start(epochs);
        let lsn = ctx.append(Record::Epoch(epoch));
        self.submissions.recorded_at(lsn);
        ctx.set_timer(self.cfg.client_tick_ns, Timer::ClientTick);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, Slog>, upto: Lsn) {
        for (request, program) in self.submissions.persisted(upto) {
            self.submit(ctx, request, program);
        }
    }

    fn on_request(&mut self, ctx: &mut Ctx<'_, Slog>, request: RequestId, program: Program) {
        if let Some((request, program)) = self.submissions.admit(request, program) {
            self.submit(ctx, request, program);
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Slog>, _from: NodeId, msg: Msg) {
        match msg {
            Msg::Reply { id, outcome } => self.on_reply(ctx, id, outcome),
            Msg::Restart { id } => self.on_restart(ctx, id),
            Msg::Leader { node } => {
                if let Some(i) = self.sequencers.iter().position(|s| *s == node) {
                    self.current = i;
                }
            }
            // Messages to sequencers and replicas.
            Msg::Paxos(_)
            | Msg::Submit { .. }
            | Msg::Forward(_)
            | Msg::Ship(_)
            | Msg::Tip { .. }
            | Msg::Replicate(_)
            | Msg::Replicated { .. }
            | Msg::FetchBatch { .. }
            | Msg::Log { .. }
            | Msg::FetchLog { .. }
            | Msg::Reads { .. }
            | Msg::ReadsWanted { .. }
            | Msg::Query { .. }
            | Msg::RemasterRequest { .. }
            | Msg::Remastered { .. } => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Slog>, timer: Timer) {
        match timer {
            Timer::ClientTick => self.on_tick(ctx),
            Timer::Paxos(_) | Timer::Batch | Timer::SequencerTick | Timer::ReplicaTick => {
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
