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
//! SLOG, like Calvin, needs every transaction's keys before ordering it
//! (its implementation uses Calvin's OLLP, §1): a procedure whose keys or
//! writes depend on other shards' reads first gets a reconnaissance pass
//! (`crate::recon`) against its region's replicas and is submitted with
//! the keys and versions it found; if a version changed by its turn,
//! every region aborts it and the client makes a new pass.

use super::messages::{Msg, Record, Timer};
use super::{Config, Slog};
use crate::recon::{self, Next, Reconnaissance};
use crate::submissions::{Due, Submissions};
use meridian_core::procedure::Recon;
use meridian_core::{AbortReason, Ctx, Key, Lsn, NodeId, Outcome, Process, Program, RequestId, Topology, TxnId};
use std::sync::Arc;

pub struct Client {
    topo: Arc<Topology>,
    /// Its region's sequencer group, and the member it submits to (the
    /// group's leader, as far as it knows).
    sequencers: Vec<NodeId>,
    current: usize,
    cfg: Config,
    submissions: Submissions,
    recon: Reconnaissance,
}

impl Client {
    pub fn new(topo: Arc<Topology>, me: NodeId, sequencers: Vec<NodeId>, cfg: Config) -> Client {
        assert!(!sequencers.is_empty(), "a client submits to a sequencer group");
        let submissions = Submissions::new(me, cfg.retry_ns, cfg.client_tick_ns, cfg.max_attempts);
        let recon = Reconnaissance::new(u64::from(cfg.reads_retry_ticks) * cfg.replica_tick_ns, cfg.client_tick_ns);
        Client { topo, sequencers, current: 0, cfg, submissions, recon }
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
        if recon::needed(&program) {
            let next = self.recon.begin(request, program, 0);
            return self.on_pass(ctx, request, next);
        }
        let id = self.submissions.open(request, program.clone(), None);
        ctx.send(self.sequencer(), Msg::Submit { id, program, recon: None, floor: self.submissions.floor() });
    }

    // ---- reconnaissance (OLLP) ----

    /// What a pass needs next: reads from the region's copies, or its
    /// submission.
    fn on_pass(&mut self, ctx: &mut Ctx<'_, Slog>, request: RequestId, next: Option<Next>) {
        match next {
            None | Some(Next::TooLarge) => {
                ctx.count("refused_not_one_shot", 1);
                ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
            }
            Some(Next::Read { keys, attempt }) => self.recon_read(ctx, request, keys, attempt),
            Some(Next::Done { program, recon, attempts }) => {
                match self.submissions.reopen(request, program.clone(), Arc::clone(&recon), attempts) {
                    Ok(id) => ctx.send(
                        self.sequencer(),
                        Msg::Submit { id, program, recon: Some(recon), floor: self.submissions.floor() },
                    ),
                    Err(request) => ctx.complete(request, Outcome::Aborted { reason: AbortReason::Conflict }),
                }
            }
        }
    }

    /// Asks each key's copy in the client's region (after `attempt`
    /// unanswered asks, another region's).
    fn recon_read(&mut self, ctx: &mut Ctx<'_, Slog>, request: RequestId, keys: Vec<Key>, attempt: u32) {
        ctx.count("recon_reads", keys.len() as u64);
        let region = self.topo.region_of(self.sequencers[0]);
        for (replica, keys) in recon::readers(&self.topo, region, keys, attempt) {
            ctx.send(replica, Msg::ReconRead { request, keys });
        }
    }

    /// Every region aborted the transaction for a wrong home, or because a
    /// version its reconnaissance assumed changed: submit it again under a
    /// new identifier, to be annotated afresh (after a new pass).
    fn on_restart(&mut self, ctx: &mut Ctx<'_, Slog>, id: TxnId) {
        if self.submissions.program(id).is_some_and(recon::needed) {
            let Some((request, program, attempts)) = self.submissions.take(id) else { return };
            ctx.count("recon_restarts", 1);
            let next = self.recon.begin(request, program, attempts);
            return self.on_pass(ctx, request, next);
        }
        match self.submissions.renew(id) {
            Some(Ok((id, program))) => {
                ctx.count("restarts", 1);
                ctx.send(self.sequencer(), Msg::Submit { id, program, recon: None, floor: self.submissions.floor() });
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
    fn responders(&self, program: &Program, recon: Option<&Recon>) -> Vec<NodeId> {
        let shard_of = |k| self.topo.shard_of(k);
        let first = program.ops.first().map(|op| op.key());
        let anchor = || program.procedure.as_ref().and_then(|p| p.anchor(0));
        let all = || {
            let mut shards = program.shards(shard_of);
            shards.extend(recon.iter().flat_map(|r| &r.keys).map(|n| shard_of(n.key)));
            shards.into_iter().min().expect("a transaction touches a shard")
        };
        let shard = first.or_else(anchor).map_or_else(all, shard_of);
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
        for (request, keys, attempt) in self.recon.tick() {
            self.recon_read(ctx, request, keys, attempt);
        }
        for due in self.submissions.tick() {
            match due {
                Due::Retry(id, program, recon) => {
                    ctx.count("retries", 1);
                    let responders = self.responders(&program, recon.as_deref());
                    // Every member: the one it submitted to may be down
                    // (the others pass it on, and say who leads).
                    for s in &self.sequencers {
                        ctx.send(
                            *s,
                            Msg::Submit {
                                id,
                                program: program.clone(),
                                recon: recon.clone(),
                                floor: self.submissions.floor(),
                            },
                        );
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
            Msg::ReconValues { request, values } => {
                let next = self.recon.values(request, values);
                if next.is_some() {
                    self.on_pass(ctx, request, next);
                }
            }
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
            | Msg::Truncated { .. }
            | Msg::FetchCheckpoint { .. }
            | Msg::Checkpoint { .. }
            | Msg::Progress { .. }
            | Msg::Reads { .. }
            | Msg::ReadsWanted { .. }
            | Msg::Query { .. }
            | Msg::ReconRead { .. }
            | Msg::RemasterRequest { .. }
            | Msg::Remastered { .. }
            | Msg::RegionDurable { .. } => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Slog>, timer: Timer) {
        match timer {
            Timer::ClientTick => self.on_tick(ctx),
            Timer::Paxos(_) | Timer::Batch | Timer::SequencerTick | Timer::ReplicaTick | Timer::Remaster => {
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
