//! A read-only transaction of the protocols whose clients keep a dual view
//! — RA-NOC2 and RA-NOC (`crate::ranoc2::View`), Eiger-NOC2 and Eiger-PORT
//! (`meridian-causal`'s `latestWrite`): one round of GETs, each to one
//! partition with the keys it holds, answered by one value per key; a
//! version collected under the read sends the round again at the next step
//! (NOC-NOC Algorithm 1 lines 16-24, Algorithm 5 lines 5-9). What a GET
//! carries (the views) is each protocol's; the bookkeeping of the round,
//! its answers and its end are written here once.
//!
//! It must never change the order of effects the protocols had before it
//! was shared (their trace hashes stay as they were).

use super::client::{Attempts, Resent, ResentRead, resend_reads};
use super::{Timer, partition_of};
use crate::ramp::{Common, GetId, Ts};
use crate::ranoc2::view::{Local, View};
use meridian_core::{AbortReason, Env, Key, NodeId, Outcome, Program, RequestId, ShardId, Topology, Value};
use meridian_mechanisms::encoding::encoded_len;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A GET of a dual-view protocol, as the read's bookkeeping sees it.
pub trait ViewGet: Clone {
    /// The keys it asks, in the order the answer's values come in.
    fn keys(&self) -> impl Iterator<Item = Key> + '_;
    /// The metadata it carries, postcard-encoded, as RAMP counts it.
    fn metadata_bytes(&self) -> usize;
}

/// A read in flight: its round's GETs not answered yet and the values of
/// those answered.
pub struct ViewRead<G> {
    request: RequestId,
    program: Program,
    step: u32,
    values: BTreeMap<Key, Option<Value>>,
    awaiting: BTreeMap<ShardId, G>,
    attempts: Attempts,
    /// Rounds sent so far (one, unless a collection restarted the read).
    rounds: u64,
}

impl<G> Resent for ViewRead<G> {
    fn attempts(&mut self) -> &mut Attempts {
        &mut self.attempts
    }
}

impl<G> ResentRead for ViewRead<G> {
    fn request(&self) -> RequestId {
        self.request
    }
}

impl<G: ViewGet> ViewRead<G> {
    /// A read whose first round is about to leave.
    fn new(request: RequestId, program: Program, now_ns: u64) -> Self {
        ViewRead {
            request,
            program,
            step: 0,
            values: BTreeMap::new(),
            awaiting: BTreeMap::new(),
            attempts: Attempts::first(now_ns),
            rounds: 0,
        }
    }

    fn program(&self) -> &Program {
        &self.program
    }

    /// A round starts at `step`: what earlier rounds asked and got no
    /// longer counts. Its GETs follow (`ask`), then `send`.
    fn begin_round(&mut self, step: u32, now_ns: u64) {
        self.step = step;
        self.rounds += 1;
        self.attempts = Attempts::first(now_ns);
        self.values.clear();
        self.awaiting.clear();
    }

    /// The round asks the partition of `shard` `get`.
    fn ask(&mut self, shard: ShardId, get: G) {
        self.awaiting.insert(shard, get);
    }

    /// Sends (again) the round's GETs not answered yet, each wrapped by
    /// `msg`.
    fn send<M, R, T>(&self, ctx: &mut dyn Env<M, R, T>, topo: &Topology, msg: impl Fn(G) -> M) {
        assert!(!self.awaiting.is_empty(), "a read reads something");
        for (shard, get) in &self.awaiting {
            ctx.send(partition_of(topo, *shard), msg(get.clone()));
        }
    }

    /// The read returns the values its last round got.
    fn finish<M, R, T>(self, ctx: &mut dyn Env<M, R, T>) {
        ctx.count("reads", 1);
        ctx.count("read_rounds", self.rounds);
        ctx.observe("rounds_per_read", self.rounds);
        let results = self.program.ops.iter().map(|op| self.values.get(&op.key()).cloned().flatten()).collect();
        ctx.complete(self.request, Outcome::Committed { results });
    }

    fn check_invariants(&self, max_attempts: u32) {
        assert!(!self.awaiting.is_empty(), "a read in flight waits for a partition");
        // `rounds` counts the first round too: `max_attempts` restarts.
        assert!(self.rounds <= u64::from(max_attempts) + 1, "restarts within their bound");
    }
}

/// A dual-view client's reads in flight, with what resending them needs.
pub struct ViewReads<G> {
    topo: Arc<Topology>,
    common: Common,
    /// The last read's id (reads count from 1; RA-NOC2's view refreshes
    /// use 0).
    next_read: u64,
    reads: BTreeMap<Ts, ViewRead<G>>,
}

impl<G: ViewGet> ViewReads<G> {
    pub fn new(topo: Arc<Topology>, common: Common) -> Self {
        ViewReads { topo, common, next_read: 0, reads: BTreeMap::new() }
    }

    pub fn len(&self) -> usize {
        self.reads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reads.is_empty()
    }

    pub fn check_invariants(&self) {
        for r in self.reads.values().take(meridian_core::process::CHECKED_MAX) {
            r.check_invariants(self.common.max_attempts);
        }
    }
}

/// A client of a dual-view protocol — RA-NOC2's and RA-NOC's
/// (`crate::ranoc2::Client`), Eiger-NOC2's and Eiger-PORT's — as its
/// reads need it. What it supplies differs by paper: how an answer's safe
/// time enters its view (`learn`), and the GETs a round sends from that
/// view (`asks`); the read's handlers are written once here.
pub trait DualViewClient<M, R> {
    type Get: ViewGet;

    /// The entries of its local safe view (RA-NOC2's timestamps, Eiger's
    /// `latestWrite`).
    type Local: Local;

    fn view_reads(&mut self) -> &mut ViewReads<Self::Get>;
    fn view(&mut self) -> &mut View<Self::Local>;
    /// What else a partition's latest safe time `lst` changes at the
    /// client, once it entered the view (`learn`).
    fn learned(&mut self, ctx: &mut dyn Env<M, R, Timer>, shard: ShardId, lst: Option<Ts>);
    /// The GETs of round `id` of a read of `program`, from the view as it
    /// is now, one per partition read.
    fn asks(&self, ctx: &mut dyn Env<M, R, Timer>, id: GetId, program: &Program) -> Vec<(ShardId, Self::Get)>;
    /// A GET as the protocol's message.
    fn get_message(get: Self::Get) -> M;

    /// NOC-NOC Algorithm 1 lines 8, 14, 21, 23 (Algorithm 5 lines 9, 18):
    /// an answer of `from` carried its latest safe time `lst`, and
    /// `last[svr] ← max(lst, last[svr])`. The shard `from` is the partition
    /// of, if it is one.
    fn learn(&mut self, ctx: &mut dyn Env<M, R, Timer>, from: NodeId, lst: Option<Ts>) -> Option<ShardId> {
        let shard = self.view_reads().topo.replica_of(from).map(|(s, _)| s)?;
        self.view().learn(shard, lst);
        self.learned(ctx, shard, lst);
        Some(shard)
    }

    /// NOC-NOC Algorithm 1 lines 16-24 (Algorithm 5 lines 5-9): one round
    /// of GETs, each partition read with its keys and the views.
    fn get_all(&mut self, ctx: &mut dyn Env<M, R, Timer>, request: RequestId, program: Program, now_ns: u64) {
        let reads = self.view_reads();
        reads.next_read += 1;
        let id = GetId { read: Ts(reads.next_read), step: 0 };
        let mut r = ViewRead::new(request, program, now_ns);
        self.send_round(ctx, id, &mut r, now_ns);
        self.view_reads().reads.insert(id.read, r);
    }

    /// The round's GETs, from the view as it is now.
    fn send_round(&mut self, ctx: &mut dyn Env<M, R, Timer>, id: GetId, r: &mut ViewRead<Self::Get>, now_ns: u64) {
        let asks = self.asks(ctx, id, r.program());
        r.begin_round(id.step, now_ns);
        for (shard, get) in asks {
            r.ask(shard, get);
        }
        r.send(ctx, &self.view_reads().topo, Self::get_message);
    }

    /// Lines 21, 23: `from` answered GET `id` with `values` and its latest
    /// safe time `lst`, which enters the view; the read returns once every
    /// partition answered.
    fn on_got(
        &mut self,
        ctx: &mut dyn Env<M, R, Timer>,
        from: NodeId,
        id: GetId,
        values: Vec<Option<Value>>,
        lst: Option<Ts>,
    ) {
        let Some(shard) = self.learn(ctx, from, lst) else { return };
        ctx.observe("read_response_metadata_bytes", encoded_len(&lst) as u64);
        let reads = &mut self.view_reads().reads;
        let Some(r) = reads.get_mut(&id.read).filter(|r| r.step == id.step) else { return };
        let Some(get) = r.awaiting.remove(&shard) else { return };
        ctx.observe("metadata_bytes_per_request", (get.metadata_bytes() + encoded_len(&lst)) as u64);
        debug_assert_eq!(get.keys().count(), values.len(), "one value per key asked");
        for (key, value) in get.keys().zip(values) {
            r.values.insert(key, value);
        }
        if r.awaiting.is_empty() {
            let r = reads.remove(&id.read).expect("present");
            r.finish(ctx);
        }
    }

    /// A version read `id` needs was collected: the read is sent again at
    /// the next step, from the view the answer refreshed, unless the
    /// answer is not its current step's or it restarted `max_attempts` times
    /// (it aborts: it changed nothing).
    fn on_gone(&mut self, ctx: &mut dyn Env<M, R, Timer>, from: NodeId, id: GetId, lst: Option<Ts>) {
        self.learn(ctx, from, lst);
        let reads = self.view_reads();
        // A late answer to an earlier step is ignored, and the read left in
        // place (removing it first dropped a read that never completed).
        if reads.reads.get(&id.read).is_none_or(|r| r.step != id.step) {
            return;
        }
        let mut r = reads.reads.remove(&id.read).expect("checked above");
        // `max_attempts` restarts, as RAMP's and LORA's reads: the first
        // round is not one.
        if r.rounds > u64::from(reads.common.max_attempts) {
            ctx.count("reads_given_up", 1);
            return ctx.complete(r.request, Outcome::Aborted { reason: AbortReason::Timeout });
        }
        ctx.count("read_restarts", 1);
        let now_ns = ctx.monotonic_ns();
        self.send_round(ctx, GetId { step: id.step + 1, ..id }, &mut r, now_ns);
        self.view_reads().reads.insert(id.read, r);
    }

    /// The retry tick: rounds unanswered for `retry_ms` are sent again,
    /// reads sent `max_attempts` times abort.
    fn resend_reads(&mut self, ctx: &mut dyn Env<M, R, Timer>, now_ns: u64) {
        let reads = self.view_reads();
        let topo = &reads.topo;
        resend_reads(ctx, &mut reads.reads, now_ns, &reads.common, |ctx, _, r| r.send(ctx, topo, Self::get_message));
    }
}
