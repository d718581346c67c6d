//! What the read-atomic clients share: the write-only transaction's
//! versions grouped by partition, its phases (PREPARE, then COMMIT) and
//! their acknowledgements, and the resends of rounds and phases left
//! unanswered for `retry_ms` — given up after `max_attempts` sends ("Scalable
//! Atomic Visibility with RAMP Transactions" §4.6 and NOC-NOC §5.2 assume a
//! client that retries until its partitions answer; Meridian bounds it).
//!
//! A read given up aborts (it changed nothing, the workload retries it); a
//! write whose request is still open reports an unknown outcome (some
//! partition may have prepared it, and the termination protocol may commit
//! it); a background commit given up is left to that protocol.

use super::{EnvOf, Wire, partition_of};
use crate::ramp::{Common, Ts};
use meridian_core::{AbortReason, Env, Key, Op, Outcome, Program, RequestId, ShardId, Topology, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The sends of a round or phase: when it last left, how many times.
#[derive(Copy, Clone, Debug)]
pub struct Attempts {
    sent_ns: u64,
    sends: u32,
}

impl Attempts {
    /// Sent once, at `now_ns`.
    pub fn first(now_ns: u64) -> Attempts {
        Attempts { sent_ns: now_ns, sends: 1 }
    }

    /// How many times it was sent.
    pub fn sends(&self) -> u32 {
        self.sends
    }

    /// Whether it went unanswered for `retry_ns`.
    fn is_due(&self, now_ns: u64, retry_ns: u64) -> bool {
        self.sent_ns + retry_ns <= now_ns
    }
}

/// A round or phase the retry tick may send again.
pub trait Resent {
    fn attempts(&mut self) -> &mut Attempts;
}

/// What the retry tick does with a transaction in flight.
pub enum Due<T> {
    /// Send it again (it stays in flight, its attempts counted).
    Again,
    /// Sent `max_attempts` times: it leaves the map.
    GiveUp(T),
}

/// The transactions of `map` unanswered for `retry_ms`, in key order
/// (Eiger-NOC2's client uses it too).
pub fn due<K: Ord + Copy, T: Resent>(map: &mut BTreeMap<K, T>, now_ns: u64, common: &Common) -> Vec<(K, Due<T>)> {
    let keys: Vec<K> =
        map.iter_mut().filter_map(|(k, t)| t.attempts().is_due(now_ns, common.retry_ns).then_some(*k)).collect();
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        let t = map.get_mut(&k).expect("listed");
        let a = t.attempts();
        if a.sends >= common.max_attempts {
            out.push((k, Due::GiveUp(map.remove(&k).expect("listed"))));
            continue;
        }
        a.sends += 1;
        a.sent_ns = now_ns;
        out.push((k, Due::Again));
    }
    out
}

/// A read in flight, as the retry tick sees it.
pub(crate) trait ResentRead: Resent {
    fn request(&self) -> RequestId;
}

/// Sends again (`resend`) the rounds of `reads` unanswered for `retry_ms`;
/// aborts those sent `max_attempts` times.
pub(crate) fn resend_reads<M, R, T, K: Ord + Copy, Rd: ResentRead>(
    ctx: &mut dyn Env<M, R, T>,
    reads: &mut BTreeMap<K, Rd>,
    now_ns: u64,
    common: &Common,
    mut resend: impl FnMut(&mut dyn Env<M, R, T>, K, &Rd),
) {
    for (k, due) in due(reads, now_ns, common) {
        match due {
            Due::GiveUp(r) => {
                ctx.count("reads_given_up", 1);
                ctx.complete(r.request(), Outcome::Aborted { reason: AbortReason::Timeout });
            }
            Due::Again => {
                ctx.count("read_resends", 1);
                resend(ctx, k, &reads[&k]);
            }
        }
    }
}

/// Sends again the phases of `writes` unanswered for `retry_ms`; gives up
/// those sent `max_attempts` times (an open request's outcome is unknown).
pub(crate) fn resend_writes<M: Wire>(
    ctx: &mut EnvOf<'_, M>,
    topo: &Topology,
    writes: &mut BTreeMap<Ts, WriteTxn<M::Prepare>>,
    now_ns: u64,
    common: &Common,
) {
    for (ts, due) in due(writes, now_ns, common) {
        match due {
            Due::GiveUp(w) => match w.request {
                Some(request) => {
                    ctx.count("unknown_outcomes", 1);
                    ctx.complete(request, Outcome::Unknown);
                }
                None => ctx.count("background_commits_dropped", 1),
            },
            Due::Again => {
                ctx.count("write_resends", 1);
                writes[&ts].send_phase(ctx, topo, ts);
            }
        }
    }
}

/// `keys` grouped by the shard that holds them, in key order within each.
pub fn by_shard(topo: &Topology, keys: impl IntoIterator<Item = Key>) -> BTreeMap<ShardId, Vec<Key>> {
    let mut out: BTreeMap<ShardId, Vec<Key>> = BTreeMap::new();
    for k in keys {
        out.entry(topo.shard_of(k)).or_default().push(k);
    }
    out
}

/// A write-only transaction's versions: the last value it writes to each
/// key, grouped by shard in key order, and the shards it writes.
pub struct Versions {
    pub keys: Arc<[Key]>,
    pub participants: Vec<ShardId>,
    pub by_shard: BTreeMap<ShardId, Vec<(Key, Value)>>,
}

pub fn versions(topo: &Topology, program: &Program) -> Versions {
    let mut last: BTreeMap<Key, Value> = BTreeMap::new();
    for op in &program.ops {
        if let Op::Write { key, value } = op {
            last.insert(*key, value.clone());
        }
    }
    let keys: Arc<[Key]> = last.keys().copied().collect();
    let mut by_shard: BTreeMap<ShardId, Vec<(Key, Value)>> = BTreeMap::new();
    for (key, value) in last {
        by_shard.entry(topo.shard_of(key)).or_default().push((key, value));
    }
    Versions { keys, participants: by_shard.keys().copied().collect(), by_shard }
}

/// The write at `ts` when `shard`'s acknowledgement of `phase` was the
/// last it waited for (a repeated or late one is passed over).
pub(crate) fn last_ack<P>(
    writes: &mut BTreeMap<Ts, WriteTxn<P>>,
    shard: ShardId,
    ts: Ts,
    phase: Phase,
) -> Option<&mut WriteTxn<P>> {
    let w = writes.get_mut(&ts)?;
    w.acked(shard, phase).then_some(w)
}

/// A partition refused the write at `ts` for good: it leaves `writes` if
/// it was still in its prepare phase (a refusal after it is late).
pub(crate) fn take_refused<P>(writes: &mut BTreeMap<Ts, WriteTxn<P>>, ts: Ts) -> Option<WriteTxn<P>> {
    if writes.get(&ts).is_none_or(|w| w.phase != Phase::Prepare) {
        return None;
    }
    writes.remove(&ts)
}

/// RAMP's and LORA's answer to a refusal (`take_refused`): the write is
/// reported unknown, never aborted (`crate::ramp::client` says why).
pub(crate) fn refused_unknown<M: Wire>(
    ctx: &mut EnvOf<'_, M>,
    writes: &mut BTreeMap<Ts, WriteTxn<M::Prepare>>,
    ts: Ts,
) {
    let Some(w) = take_refused(writes, ts) else { return };
    ctx.count("writes_refused", 1);
    if let Some(request) = w.request {
        ctx.complete(request, Outcome::Unknown);
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Prepare,
    Commit,
}

/// A write-only transaction in flight: its PREPAREs, the phase it is in
/// and the partitions that have not acknowledged it yet.
pub(crate) struct WriteTxn<P> {
    /// `None` once answered (a commit going on in the background).
    pub request: Option<RequestId>,
    pub program: Program,
    pub phase: Phase,
    pub prepares: BTreeMap<ShardId, Arc<P>>,
    pub awaiting: BTreeSet<ShardId>,
    /// When the first PREPARE left.
    pub started_ns: u64,
    pub attempts: Attempts,
    /// Timestamps refused so far, each written again above (RA-NOC2; RAMP
    /// never writes a refused transaction again).
    pub refusals: u32,
}

impl<P> Resent for WriteTxn<P> {
    fn attempts(&mut self) -> &mut Attempts {
        &mut self.attempts
    }
}

impl<P> WriteTxn<P> {
    /// A transaction whose PREPAREs leave now.
    pub fn new(
        request: RequestId,
        program: Program,
        prepares: BTreeMap<ShardId, Arc<P>>,
        refusals: u32,
        now_ns: u64,
    ) -> Self {
        WriteTxn {
            request: Some(request),
            program,
            phase: Phase::Prepare,
            awaiting: prepares.keys().copied().collect(),
            prepares,
            started_ns: now_ns,
            attempts: Attempts::first(now_ns),
            refusals,
        }
    }

    /// The phase's message to every partition that has not answered it.
    pub fn send_phase<M: Wire<Prepare = P>>(&self, ctx: &mut EnvOf<'_, M>, topo: &Topology, ts: Ts) {
        for shard in &self.awaiting {
            let to = partition_of(topo, *shard);
            match self.phase {
                Phase::Prepare => ctx.send(to, M::prepare(Arc::clone(&self.prepares[shard]))),
                Phase::Commit => ctx.send(to, M::commit(ts)),
            }
        }
    }

    /// `shard` acknowledged `phase`: true when it was the last awaited.
    pub fn acked(&mut self, shard: ShardId, phase: Phase) -> bool {
        self.phase == phase && self.awaiting.remove(&shard) && self.awaiting.is_empty()
    }

    /// Every partition prepared: the COMMITs leave now.
    pub fn start_commit(&mut self, now_ns: u64) {
        debug_assert_eq!(self.phase, Phase::Prepare, "a write commits once");
        self.phase = Phase::Commit;
        self.awaiting = self.prepares.keys().copied().collect();
        self.attempts = Attempts::first(now_ns);
    }

    pub fn check_invariants(&self) {
        assert!(!self.awaiting.is_empty(), "a write in flight waits for a partition");
        assert!(self.awaiting.iter().all(|s| self.prepares.contains_key(s)), "it waits for its participants only");
    }
}
