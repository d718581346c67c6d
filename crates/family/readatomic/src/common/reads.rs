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

use super::client::{Attempts, Resent, ResentRead};
use super::partition_of;
use crate::ramp::client::encoded_len;
use crate::ramp::{GetId, Ts};
use meridian_core::{AbortReason, Env, Key, Outcome, Program, RequestId, ShardId, Topology, Value};
use std::collections::BTreeMap;

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
    pub fn new(request: RequestId, program: Program, now_ns: u64) -> Self {
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

    pub fn program(&self) -> &Program {
        &self.program
    }

    /// A round starts at `step`: what earlier rounds asked and got no
    /// longer counts. Its GETs follow (`ask`), then `send`.
    pub fn begin_round(&mut self, step: u32, now_ns: u64) {
        self.step = step;
        self.rounds += 1;
        self.attempts = Attempts::first(now_ns);
        self.values.clear();
        self.awaiting.clear();
    }

    /// The round asks the partition of `shard` `get`.
    pub fn ask(&mut self, shard: ShardId, get: G) {
        self.awaiting.insert(shard, get);
    }

    /// Sends (again) the round's GETs not answered yet, each wrapped by
    /// `msg`.
    pub fn send<M, R, T>(&self, ctx: &mut dyn Env<M, R, T>, topo: &Topology, msg: impl Fn(G) -> M) {
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

    pub fn check_invariants(&self, max_attempts: u32) {
        assert!(!self.awaiting.is_empty(), "a read in flight waits for a partition");
        assert!(self.rounds <= u64::from(max_attempts), "restarts within their bound");
    }
}

/// NOC-NOC Algorithm 1 lines 21, 23 (Algorithm 5 alike): `shard` answered
/// GET `id` with `values` and its latest safe time `lst` (which the client
/// has learnt already); the read returns once every partition answered.
pub fn on_got<M, R, T, G: ViewGet>(
    ctx: &mut dyn Env<M, R, T>,
    reads: &mut BTreeMap<Ts, ViewRead<G>>,
    shard: ShardId,
    id: GetId,
    values: Vec<Option<Value>>,
    lst: Option<Ts>,
) {
    ctx.observe("read_response_metadata_bytes", encoded_len(&lst) as u64);
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

/// A version read `id` needs was collected: the read, to be sent again at
/// the next step from the view the answer refreshed; `None` when the
/// answer is not its current step's, or when it took `max_attempts`
/// rounds (it aborts: it changed nothing).
pub fn on_gone<M, R, T, G: ViewGet>(
    ctx: &mut dyn Env<M, R, T>,
    reads: &mut BTreeMap<Ts, ViewRead<G>>,
    id: GetId,
    max_attempts: u32,
) -> Option<ViewRead<G>> {
    let r = reads.remove(&id.read).filter(|r| r.step == id.step)?;
    if r.rounds >= u64::from(max_attempts) {
        ctx.count("reads_given_up", 1);
        ctx.complete(r.request, Outcome::Aborted { reason: AbortReason::Timeout });
        return None;
    }
    ctx.count("read_restarts", 1);
    Some(r)
}
