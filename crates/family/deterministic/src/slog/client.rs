//! The client of `slog`: it names each transaction (identifiers unique
//! across its restarts, `meridian_mechanisms::txnids`), submits it to its
//! region's sequencer (the nearest), and waits for the answering replica —
//! the home region's (single-home) or its own region's (multi-home)
//! replica of the transaction's first shard. A transaction that assumed a
//! wrong home is aborted by every region and comes back as `Restart`: the
//! client submits it again under a new identifier, and the sequencer
//! annotates it afresh (SLOG §3.2). Without an answer for `retry_ms` it
//! submits again (the local log drops the repeat) and asks every replica
//! of the first shard; after `max_attempts` it reports an unknown outcome.
//!
//! SLOG, like Calvin, needs every transaction's keys before ordering it:
//! procedures whose keys depend on their reads are refused
//! (`refused_not_one_shot`).

use super::messages::{Msg, Record, Timer};
use super::{Config, Slog};
use meridian_core::process::CHECKED_MAX;
use meridian_core::{AbortReason, Ctx, Lsn, NodeId, Outcome, Process, Program, RequestId, Topology, TxnId};
use meridian_mechanisms::txnids::EpochGate;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug)]
struct Pending {
    request: RequestId,
    program: Program,
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

    fn submit(&mut self, ctx: &mut Ctx<'_, Slog>, request: RequestId, program: Program) {
        if program.is_empty() {
            return ctx.complete(request, Outcome::Committed { results: Vec::new() });
        }
        if !super::runnable(&program) {
            ctx.count("refused_not_one_shot", 1);
            return ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
        }
        let id = self.ids.next_id();
        ctx.send(self.sequencer, Msg::Submit { id, program: program.clone() });
        self.pending.insert(id, Pending { request, program, attempts: 1, sent_tick: self.ticks });
    }

    /// Every region aborted the transaction for a wrong home: submit it
    /// again under a new identifier, to be annotated afresh.
    fn on_restart(&mut self, ctx: &mut Ctx<'_, Slog>, id: TxnId) {
        let Some(mut p) = self.pending.remove(&id) else { return };
        if p.attempts >= self.cfg.max_attempts {
            ctx.count("unknown_outcomes", 1);
            return ctx.complete(p.request, Outcome::Unknown);
        }
        ctx.count("restarts", 1);
        p.attempts += 1;
        p.sent_tick = self.ticks;
        let id = self.ids.next_id();
        ctx.send(self.sequencer, Msg::Submit { id, program: p.program.clone() });
        self.pending.insert(id, p);
    }

    /// The replicas that may answer `program`: its first shard's.
    fn responders(&self, program: &Program) -> Vec<NodeId> {
        let shard_of = |k| self.topo.shard_of(k);
        let first = program.ops.first().map(|op| op.key());
        let anchor = || program.procedure.as_ref().and_then(|p| p.anchor(0));
        let shard = first.or_else(anchor).map_or_else(|| program.shards(shard_of)[0], shard_of);
        self.topo.replicas(shard).to_vec()
    }

    fn on_reply(&mut self, ctx: &mut Ctx<'_, Slog>, id: TxnId, outcome: Outcome) {
        if let Some(p) = self.pending.remove(&id) {
            ctx.complete(p.request, outcome);
        }
    }

    /// Resubmits what went unanswered, and gives up after `max_attempts`.
    fn on_tick(&mut self, ctx: &mut Ctx<'_, Slog>) {
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
            let program = p.program.clone();
            for r in self.responders(&program) {
                ctx.send(r, Msg::Query { id });
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
        let epoch = self.ids.start(epochs);
        let lsn = ctx.append(Record::Epoch(epoch));
        self.ids.recorded_at(lsn);
        ctx.set_timer(self.cfg.client_tick_ns, Timer::ClientTick);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, Slog>, upto: Lsn) {
        for (request, program) in self.ids.persisted(upto) {
            self.submit(ctx, request, program);
        }
    }

    fn on_request(&mut self, ctx: &mut Ctx<'_, Slog>, request: RequestId, program: Program) {
        if let Some((request, program)) = self.ids.admit((request, program)) {
            self.submit(ctx, request, program);
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Slog>, _from: NodeId, msg: Msg) {
        match msg {
            Msg::Reply { id, outcome } => self.on_reply(ctx, id, outcome),
            Msg::Restart { id } => self.on_restart(ctx, id),
            // Messages to sequencers and replicas.
            Msg::Submit { .. }
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
            Timer::Batch | Timer::SequencerTick | Timer::ReplicaTick => {
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
