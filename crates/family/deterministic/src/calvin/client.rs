//! The client of `calvin`: it names each transaction (identifiers unique
//! across its restarts, `meridian_mechanisms::txnids`), submits it to the
//! nearest sequencer, and waits for the answering replica — the one in
//! that sequencer's region of the transaction's first shard — after
//! execution. Without an answer for `retry_ms` it submits again (the
//! global log drops the repeat) and asks every copy of that shard (every
//! region executes the same log, so another region answers while its own
//! replica is down); after `max_attempts` it reports an unknown outcome.
//!
//! Calvin needs every transaction's keys before ordering it (§3.2.1). A
//! procedure whose keys or writes depend on other shards' reads first gets
//! a reconnaissance pass (OLLP, `crate::recon`) against its region's
//! replicas, and is submitted with the keys and versions the pass found;
//! if a version changed by its turn, every participant aborts it and the
//! client makes a new pass (`recon_restarts`, bounded by `max_attempts`).

use super::messages::{Msg, Record, Timer, Txn};
use super::{Calvin, Config};
use crate::recon::{self, Next, Reconnaissance};
use crate::submissions::{Due, Submissions};
use meridian_core::procedure::Recon;
use meridian_core::{AbortReason, Ctx, Key, Lsn, NodeId, Outcome, Process, Program, RequestId, Topology, TxnId};
use std::sync::Arc;

pub struct Client {
    topo: Arc<Topology>,
    sequencer: NodeId,
    cfg: Config,
    submissions: Submissions,
    recon: Reconnaissance,
}

impl Client {
    pub fn new(topo: Arc<Topology>, me: NodeId, sequencer: NodeId, cfg: Config) -> Client {
        let submissions = Submissions::new(me, cfg.retry_ns, cfg.client_tick_ns, cfg.max_attempts);
        let recon = Reconnaissance::new(u64::from(cfg.reads_retry_ticks) * cfg.replica_tick_ns, cfg.client_tick_ns);
        Client { topo, sequencer, cfg, submissions, recon }
    }

    /// Requests waiting for their outcome.
    pub fn outstanding(&self) -> usize {
        self.submissions.outstanding()
    }

    fn submit(&mut self, ctx: &mut Ctx<'_, Calvin>, request: RequestId, program: Program) {
        if program.is_empty() {
            return ctx.complete(request, Outcome::Committed { results: Vec::new() });
        }
        if recon::needed(&program) {
            let next = self.recon.begin(request, program, 0);
            return self.on_pass(ctx, request, next);
        }
        let id = self.submissions.open(request, program.clone(), None);
        ctx.send(self.sequencer, Msg::Submit { id, program, recon: None, floor: self.submissions.floor() });
    }

    // ---- reconnaissance (OLLP) ----

    /// What a pass needs next: reads from the region's copies, or its
    /// submission.
    fn on_pass(&mut self, ctx: &mut Ctx<'_, Calvin>, request: RequestId, next: Option<Next>) {
        match next {
            None => {
                ctx.count("submissions_refused", 1);
                ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
            }
            Some(Next::Read { keys, attempt }) => self.recon_read(ctx, request, keys, attempt),
            Some(Next::TooLarge) => {
                ctx.count("refused_not_one_shot", 1);
                ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
            }
            Some(Next::Done { program, recon, attempts }) => {
                match self.submissions.reopen(request, program.clone(), Arc::clone(&recon), attempts) {
                    Ok(id) => ctx.send(
                        self.sequencer,
                        Msg::Submit { id, program, recon: Some(recon), floor: self.submissions.floor() },
                    ),
                    Err(request) => {
                        ctx.count("unknown_outcomes", 1);
                        ctx.complete(request, Outcome::Aborted { reason: AbortReason::Conflict });
                    }
                }
            }
        }
    }

    /// Asks each key's copy in the sequencer's region (after `attempt`
    /// unanswered asks, another region's).
    fn recon_read(&mut self, ctx: &mut Ctx<'_, Calvin>, request: RequestId, keys: Vec<Key>, attempt: u32) {
        ctx.count("recon_reads", keys.len() as u64);
        let region = self.topo.region_of(self.sequencer);
        for (replica, keys) in recon::readers(&self.topo, region, keys, attempt) {
            ctx.send(replica, Msg::ReconRead { request, keys });
        }
    }

    /// A pass's last attempt aborted at its turn (a version it assumed
    /// had changed): a new pass.
    fn on_restart(&mut self, ctx: &mut Ctx<'_, Calvin>, id: TxnId) {
        let Some((request, program, attempts)) = self.submissions.take(id) else { return };
        ctx.count("recon_restarts", 1);
        let next = self.recon.begin(request, program, attempts);
        self.on_pass(ctx, request, next);
    }

    /// The replicas that may answer: every copy of the transaction's first
    /// shard (its region's answers first; another region's answers while
    /// that one is down).
    fn responders(&self, id: TxnId, program: Program, recon: Option<Arc<Recon>>) -> Vec<NodeId> {
        let region = self.topo.region_of(self.sequencer);
        let shard = Txn::with_recon(id, program, recon, region, &self.topo).first_shard(&self.topo);
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
        for (request, keys, attempt) in self.recon.tick() {
            self.recon_read(ctx, request, keys, attempt);
        }
        for due in self.submissions.tick() {
            match due {
                Due::Retry(id, program, recon) => {
                    ctx.count("retries", 1);
                    let msg = Msg::Submit {
                        id,
                        program: program.clone(),
                        recon: recon.clone(),
                        floor: self.submissions.floor(),
                    };
                    ctx.send(self.sequencer, msg);
                    for r in self.responders(id, program, recon) {
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
            Msg::Restart { id } => self.on_restart(ctx, id),
            Msg::ReconValues { request, values } => {
                let next = self.recon.values(request, values);
                if next.is_some() {
                    self.on_pass(ctx, request, next);
                }
            }
            // Messages to sequencers and replicas.
            Msg::Paxos(_)
            | Msg::Submit { .. }
            | Msg::StoreBatch(_)
            | Msg::BatchStored { .. }
            | Msg::Order { .. }
            | Msg::FetchBatch { .. }
            | Msg::Log { .. }
            | Msg::FetchLog { .. }
            | Msg::Truncated { .. }
            | Msg::FetchCheckpoint { .. }
            | Msg::Checkpoint { .. }
            | Msg::LogState(_)
            | Msg::Checkpointed { .. }
            | Msg::Reads { .. }
            | Msg::ReadsWanted { .. }
            | Msg::ReadsGone { .. }
            | Msg::Query { .. }
            | Msg::ReconRead { .. } => {}
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
        out("reconnaissance", self.recon.len());
    }

    fn check_invariants(&self) {
        self.submissions.check_invariants();
        self.recon.check_invariants();
    }
}
