//! A RAMP client: PUT_ALL and GET_ALL ("Scalable Atomic Visibility with
//! RAMP Transactions", Algorithm 1 lines 14-33, Algorithm 2), talking to
//! the partitions directly — there is no coordinator.
//!
//! A write-only transaction takes a fresh timestamp (`timestamps.rs`),
//! PREPAREs its versions at every partition it writes and, once all are
//! durable, COMMITs; it returns after the commits (RAMP-F, RAMP-S) or,
//! with `one_phase_writes` (RAMP-OPW), after the prepares, committing in
//! the background. A read-only transaction asks every partition for
//! `lastCommit`; RAMP-F then fetches by timestamp only the keys whose
//! siblings show a newer version (`v_latest`), RAMP-S always sends the set
//! of timestamps it saw in a second round.
//!
//! Faults: a partition silent for `retry_ms` gets the round or phase
//! again (partitions answer repeats); after `max_attempts` sends a read
//! aborts (it changed nothing) and a write reports an unknown outcome —
//! its prepared versions are then finished by the partitions' termination
//! protocol. A partition that refused a prepare (that protocol aborted the
//! transaction first) makes the write's outcome unknown too: it is never
//! reported aborted, so that a refusal forgotten long after and a late
//! prepare could not make a write reported aborted visible. A read told
//! that a version it needs was collected starts again, up to
//! `max_attempts` times.

use super::messages::{Ask, GetId, Item, Msg, Prepare, Record, Timer, Ts};
use super::timestamps::TsSource;
use super::{Config, Variant, partition_of};
use crate::common::client::{
    Attempts, Phase, Resent, ResentRead, WriteTxn, by_shard, last_ack, refused_unknown, resend_reads, resend_writes,
    versions,
};
use crate::common::events::client_timer;
use meridian_core::{
    AbortReason, Ctx, Env, Key, Lsn, NodeId, Op, Outcome, Process, Program, Protocol, RequestId, ShardId, Topology,
};
use meridian_mechanisms::encoding::encoded_len;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// The environment a client acts through (either variant's).
type ClientCtx<'a> = dyn Env<Msg, Record, Timer> + 'a;

/// Requests waiting for a durable timestamp reservation, at most.
pub(crate) const WAITING_MAX: usize = 65_536;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Round {
    First,
    Second,
}

/// One GET sent and not answered: what it asked, and its metadata's size.
struct Sent {
    ask: Ask,
    metadata_bytes: usize,
}

struct ReadTxn {
    request: RequestId,
    program: Program,
    keys: Vec<Key>,
    step: u32,
    round: Round,
    items: BTreeMap<Key, Item>,
    awaiting: BTreeMap<ShardId, Sent>,
    attempts: Attempts,
    restarts: u32,
}

impl Resent for ReadTxn {
    fn attempts(&mut self) -> &mut Attempts {
        &mut self.attempts
    }
}

impl ResentRead for ReadTxn {
    fn request(&self) -> RequestId {
        self.request
    }
}

pub struct Client {
    topo: Arc<Topology>,
    index: u32,
    cfg: Config,
    clock: TsSource,
    reads: BTreeMap<Ts, ReadTxn>,
    writes: BTreeMap<Ts, WriteTxn<Prepare>>,
    waiting: VecDeque<(RequestId, Program)>,
}

/// The metadata a GET carries: the timestamps it asks by (keys are the
/// read itself, not metadata).
pub(crate) fn ask_metadata_bytes(ask: &Ask) -> usize {
    match ask {
        Ask::Latest(_) => 0,
        Ask::Exact(wants) => encoded_len(&wants.iter().map(|(_, ts)| *ts).collect::<Vec<Ts>>()),
        Ask::Among { among, .. } => encoded_len(among),
        Ask::Known(wants) => encoded_len(&wants.iter().map(|(_, ts)| *ts).collect::<Vec<Option<Ts>>>()),
    }
}

/// The metadata of one returned version: its timestamp and RAMP-F's
/// sibling keys.
pub(crate) fn item_metadata_bytes(item: &Item) -> usize {
    encoded_len(&(item.ts, &*item.siblings))
}

/// Records a durable timestamp reservation when less than half of the
/// current one is left (`timestamps.rs`; LORA's client reserves the same).
pub(crate) fn reserve(ctx: &mut ClientCtx<'_>, clock: &mut TsSource) {
    let clock_us = ctx.clock_ns() / 1_000;
    clock.reserve(ctx, clock_us, |upto_us| Record::Reserved { upto_us });
}

/// A request at a client of RAMP's timestamps: a read-only or write-only
/// program to start now at a fresh timestamp; otherwise answered at once
/// (any other program is refused, an empty one committed) or held in
/// `waiting` until a timestamp is durably reserved (refused past
/// `WAITING_MAX`).
pub(crate) fn admit(
    ctx: &mut ClientCtx<'_>,
    clock: &mut TsSource,
    waiting: &mut VecDeque<(RequestId, Program)>,
    request: RequestId,
    program: Program,
) -> Option<(Ts, Shape, Program)> {
    let Some(shape) = shape(&program) else {
        ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
        return None;
    };
    if program.is_empty() {
        ctx.complete(request, Outcome::Committed { results: Vec::new() });
        return None;
    }
    reserve(ctx, clock);
    let Some(ts) = clock.next(ctx.clock_ns() / 1_000) else {
        if waiting.len() >= WAITING_MAX {
            ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
        } else {
            waiting.push_back((request, program));
        }
        return None;
    };
    Some((ts, shape, program))
}

/// Algorithm 1 lines 16-19: a write's versions at `ts`, one PREPARE per
/// partition written, each with `I_tx` and the participants (LORA's
/// client prepares the same).
pub(crate) fn prepares(topo: &Topology, ts: Ts, program: &Program) -> BTreeMap<ShardId, Arc<Prepare>> {
    let v = versions(topo, program);
    v.by_shard
        .into_iter()
        .map(|(shard, writes)| {
            let p = Prepare { ts, writes, keys: Arc::clone(&v.keys), participants: v.participants.clone() };
            (shard, Arc::new(p))
        })
        .collect()
}

/// What a request asks for, if RAMP runs it: only reads, or only blind
/// writes (the paper's read-only and write-only transactions).
pub enum Shape {
    Read,
    Write,
}

pub fn shape(program: &Program) -> Option<Shape> {
    if program.procedure.is_some() {
        return None;
    }
    if program.ops.iter().all(|op| matches!(op, Op::Read { .. })) {
        return Some(Shape::Read);
    }
    program.ops.iter().all(|op| matches!(op, Op::Write { .. })).then_some(Shape::Write)
}

/// A client of RAMP's partitions — RAMP-F's, RAMP-S's, LORA's
/// (`crate::lora::client`): its handlers of their answers, each
/// protocol's own, which [`on_message`] dispatches.
pub(crate) trait Handlers {
    fn on_prepared(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, ts: Ts);
    fn on_committed(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, ts: Ts);
    fn on_refused(&mut self, ctx: &mut ClientCtx<'_>, ts: Ts);
    fn on_got(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, id: GetId, items: Vec<Item>);
    fn on_gone(&mut self, ctx: &mut ClientCtx<'_>, id: GetId);
}

/// A client's `Process::on_message`: the partitions' answers to their
/// handlers; the messages to partitions and backups are not a client's.
pub(crate) fn on_message(c: &mut impl Handlers, ctx: &mut ClientCtx<'_>, from: NodeId, msg: Msg) {
    match msg {
        Msg::Prepared { ts } => c.on_prepared(ctx, from, ts),
        Msg::Committed { ts } => c.on_committed(ctx, from, ts),
        Msg::Refused { ts } => c.on_refused(ctx, ts),
        Msg::Got { id, items } => c.on_got(ctx, from, id, items),
        Msg::Gone { id } => c.on_gone(ctx, id),
        // Messages to partitions.
        Msg::Prepare(_)
        | Msg::Commit { .. }
        | Msg::Get { .. }
        | Msg::CheckPrepared { .. }
        | Msg::PrepareState { .. } => {}
        // Between primaries and backups.
        Msg::Ship(_) => {}
    }
}

impl Client {
    pub fn new(topo: Arc<Topology>, _me: NodeId, index: u32, cfg: Config) -> Client {
        Client {
            topo,
            index,
            clock: TsSource::start(index, [], cfg.common.reserve_ahead_us),
            cfg,
            reads: BTreeMap::new(),
            writes: BTreeMap::new(),
            waiting: VecDeque::new(),
        }
    }

    /// Transactions in flight (reads, writes, RAMP-OPW's background
    /// commits).
    pub fn outstanding(&self) -> usize {
        self.reads.len() + self.writes.len()
    }

    fn reserve(&mut self, ctx: &mut ClientCtx<'_>) {
        reserve(ctx, &mut self.clock);
    }

    /// Starts the request now, or holds it until a timestamp is durably
    /// reserved.
    fn start(&mut self, ctx: &mut ClientCtx<'_>, request: RequestId, program: Program) {
        let Some((ts, shape, program)) = admit(ctx, &mut self.clock, &mut self.waiting, request, program) else {
            return;
        };
        let now_ns = ctx.monotonic_ns();
        match shape {
            Shape::Read => self.get_all(ctx, ts, request, program, now_ns),
            Shape::Write => self.put_all(ctx, ts, request, program, now_ns),
        }
    }

    // ---- PUT_ALL ----

    /// Algorithm 1 lines 14-19: a timestamp, `I_tx`, and the versions
    /// prepared at every partition written.
    fn put_all(&mut self, ctx: &mut ClientCtx<'_>, ts: Ts, request: RequestId, program: Program, now_ns: u64) {
        let prepares = prepares(&self.topo, ts, &program);
        let w = WriteTxn::new(request, program, prepares, 0, now_ns);
        w.send_phase(ctx, &self.topo, ts);
        self.writes.insert(ts, w);
    }

    // ---- GET_ALL ----

    /// Algorithm 1 lines 22-25 (Algorithm 2 alike): the first round asks
    /// every partition for `lastCommit` of its keys.
    fn get_all(&mut self, ctx: &mut ClientCtx<'_>, ts: Ts, request: RequestId, program: Program, now_ns: u64) {
        let keys = program.read_set();
        let mut r = ReadTxn {
            request,
            program,
            keys,
            step: 0,
            round: Round::First,
            items: BTreeMap::new(),
            awaiting: BTreeMap::new(),
            attempts: Attempts::first(now_ns),
            restarts: 0,
        };
        let asks = self.first_round(&r.keys);
        self.send_round(ctx, ts, &mut r, Round::First, asks, now_ns);
        self.reads.insert(ts, r);
    }

    fn first_round(&self, keys: &[Key]) -> BTreeMap<ShardId, Ask> {
        by_shard(&self.topo, keys.iter().copied()).into_iter().map(|(s, keys)| (s, Ask::Latest(keys))).collect()
    }

    fn send_round(
        &self,
        ctx: &mut ClientCtx<'_>,
        read: Ts,
        r: &mut ReadTxn,
        round: Round,
        asks: BTreeMap<ShardId, Ask>,
        now_ns: u64,
    ) {
        assert!(!asks.is_empty(), "a round asks something");
        r.step += 1;
        r.round = round;
        r.attempts = Attempts::first(now_ns);
        r.awaiting = asks
            .into_iter()
            .map(|(shard, ask)| {
                let metadata_bytes = ask_metadata_bytes(&ask);
                (shard, Sent { ask, metadata_bytes })
            })
            .collect();
        resend_round(&self.topo, ctx, read, r);
    }

    fn on_round_done(&mut self, ctx: &mut ClientCtx<'_>, read: Ts, now_ns: u64) {
        let mut r = self.reads.remove(&read).expect("a read in flight");
        let second = match (r.round, self.cfg.variant) {
            (Round::Second, _) => None,
            (Round::First, Variant::Fast) => self.repairs(ctx, &r),
            (Round::First, Variant::Small) => Some(self.second_round_small(&r)),
        };
        match second {
            Some(asks) => {
                self.send_round(ctx, read, &mut r, Round::Second, asks, now_ns);
                self.reads.insert(read, r);
            }
            None => self.finish_read(ctx, r),
        }
    }

    /// Algorithm 1 lines 26-32: `v_latest[i]`, the newest timestamp of a
    /// transaction that wrote `i` among the versions read (their sibling
    /// metadata), and the keys read below it, fetched again by timestamp.
    /// `None` when the first round was not fractured (one round).
    fn repairs(&self, ctx: &mut ClientCtx<'_>, r: &ReadTxn) -> Option<BTreeMap<ShardId, Ask>> {
        let mut v_latest: BTreeMap<Key, Ts> = BTreeMap::new();
        for item in r.items.values() {
            let Some(ts) = item.ts else { continue };
            for sibling in item.siblings.iter().filter(|k| r.keys.binary_search(k).is_ok()) {
                let v = v_latest.entry(*sibling).or_insert(ts);
                *v = (*v).max(ts);
            }
        }
        let stale: Vec<(Key, Ts)> =
            v_latest.into_iter().filter(|(k, latest)| r.items.get(k).is_none_or(|i| i.ts < Some(*latest))).collect();
        if stale.is_empty() || self.cfg.skip_repair {
            return None;
        }
        ctx.count("repair_reads", stale.len() as u64);
        let mut asks: BTreeMap<ShardId, Vec<(Key, Ts)>> = BTreeMap::new();
        for (key, ts) in stale {
            asks.entry(self.topo.shard_of(key)).or_default().push((key, ts));
        }
        Some(asks.into_iter().map(|(s, wants)| (s, Ask::Exact(wants))).collect())
    }

    /// Algorithm 2's second round: every key again, with the set of
    /// timestamps the first round returned.
    fn second_round_small(&self, r: &ReadTxn) -> BTreeMap<ShardId, Ask> {
        let among: BTreeSet<Ts> = r.items.values().filter_map(|i| i.ts).collect();
        let among: Vec<Ts> = among.into_iter().collect();
        let by_shard = by_shard(&self.topo, r.keys.iter().copied());
        by_shard.into_iter().map(|(s, keys)| (s, Ask::Among { keys, among: among.clone() })).collect()
    }

    fn finish_read(&mut self, ctx: &mut ClientCtx<'_>, r: ReadTxn) {
        let rounds = match r.round {
            Round::First => 1,
            Round::Second => 2,
        };
        ctx.count("reads", 1);
        ctx.count("read_rounds", rounds);
        ctx.count(if rounds == 1 { "reads_one_round" } else { "reads_two_rounds" }, 1);
        ctx.observe("rounds_per_read", rounds);
        let value = |key: &Key| r.items.get(key).and_then(|i| i.value.clone());
        let results = r.program.ops.iter().map(|op| value(&op.key())).collect();
        ctx.complete(r.request, Outcome::Committed { results });
    }

    // ---- retries ----

    fn on_tick(&mut self, ctx: &mut ClientCtx<'_>) {
        ctx.set_timer(self.cfg.common.client_tick_ns, Timer::ClientTick);
        let now_ns = ctx.monotonic_ns();
        self.reserve(ctx);
        self.resend_reads(ctx, now_ns);
        self.resend_writes(ctx, now_ns);
    }

    fn resend_reads(&mut self, ctx: &mut ClientCtx<'_>, now_ns: u64) {
        let topo = &self.topo;
        resend_reads(ctx, &mut self.reads, now_ns, &self.cfg.common, |ctx, ts, r| resend_round(topo, ctx, ts, r));
    }

    fn resend_writes(&mut self, ctx: &mut ClientCtx<'_>, now_ns: u64) {
        resend_writes(ctx, &self.topo, &mut self.writes, now_ns, &self.cfg.common);
    }

    /// Requests held for a reservation start once it is durable.
    fn start_waiting(&mut self, ctx: &mut ClientCtx<'_>) {
        let waiting = std::mem::take(&mut self.waiting);
        for (request, program) in waiting {
            self.start(ctx, request, program);
        }
    }
}

/// Sends a read's round again to the partitions that have not answered it.
fn resend_round(topo: &Topology, ctx: &mut ClientCtx<'_>, read: Ts, r: &ReadTxn) {
    let id = GetId { read, step: r.step };
    for (shard, sent) in &r.awaiting {
        ctx.send(partition_of(topo, *shard), Msg::Get { id, ask: sent.ask.clone() });
    }
}

/// RAMP's partitions' answers (`on_message` dispatches them).
impl Handlers for Client {
    /// Algorithm 1 lines 20-21 once every partition prepared: COMMIT
    /// everywhere. RAMP-OPW returns to the client here, after one phase.
    fn on_prepared(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, ts: Ts) {
        let Some(shard) = self.topo.replica_of(from).map(|(s, _)| s) else { return };
        let Some(w) = last_ack(&mut self.writes, shard, ts, Phase::Prepare) else { return };
        w.start_commit(ctx.monotonic_ns());
        if self.cfg.one_phase_writes
            && let Some(request) = w.request.take()
        {
            ctx.count("writes", 1);
            ctx.count("write_phases_on_client_path", 1);
            ctx.complete(request, Outcome::Committed { results: vec![None; w.program.ops.len()] });
        }
        w.send_phase(ctx, &self.topo, ts);
    }

    /// Every partition committed: the write returns (RAMP-F, RAMP-S), or
    /// RAMP-OPW's background commit is done.
    fn on_committed(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, ts: Ts) {
        let Some(shard) = self.topo.replica_of(from).map(|(s, _)| s) else { return };
        if last_ack(&mut self.writes, shard, ts, Phase::Commit).is_none() {
            return;
        }
        let w = self.writes.remove(&ts).expect("present");
        if let Some(request) = w.request {
            ctx.count("writes", 1);
            ctx.count("write_phases_on_client_path", 2);
            ctx.complete(request, Outcome::Committed { results: vec![None; w.program.ops.len()] });
        }
    }

    /// The termination protocol aborted the write at a partition before
    /// its prepare arrived: it never commits, but is reported unknown
    /// (see the module documentation).
    fn on_refused(&mut self, ctx: &mut ClientCtx<'_>, ts: Ts) {
        refused_unknown(ctx, &mut self.writes, ts);
    }

    fn on_got(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, id: GetId, items: Vec<Item>) {
        let Some(shard) = self.topo.replica_of(from).map(|(s, _)| s) else { return };
        let Some(r) = self.reads.get_mut(&id.read).filter(|r| r.step == id.step) else { return };
        let Some(sent) = r.awaiting.remove(&shard) else { return };
        let answer_bytes: usize = items.iter().map(item_metadata_bytes).sum();
        ctx.observe("metadata_bytes_per_request", (sent.metadata_bytes + answer_bytes) as u64);
        for item in items {
            ctx.observe("metadata_bytes_per_version", item_metadata_bytes(&item) as u64);
            r.items.insert(item.key, item);
        }
        if r.awaiting.is_empty() {
            let now_ns = ctx.monotonic_ns();
            self.on_round_done(ctx, id.read, now_ns);
        }
    }

    /// A version the read needs was collected: the read starts again.
    fn on_gone(&mut self, ctx: &mut ClientCtx<'_>, id: GetId) {
        // A late answer to an earlier step is ignored, and the read left in
        // place (removing it first dropped a read that never completed).
        if self.reads.get(&id.read).is_none_or(|r| r.step != id.step) {
            return;
        }
        let mut r = self.reads.remove(&id.read).expect("checked above");
        r.restarts += 1;
        if r.restarts > self.cfg.common.max_attempts {
            ctx.count("reads_given_up", 1);
            return ctx.complete(r.request, Outcome::Aborted { reason: AbortReason::Timeout });
        }
        ctx.count("read_restarts", 1);
        r.items.clear();
        let asks = self.first_round(&r.keys);
        let now_ns = ctx.monotonic_ns();
        self.send_round(ctx, id.read, &mut r, Round::First, asks, now_ns);
        self.reads.insert(id.read, r);
    }
}

impl<P: Protocol<Msg = Msg, Record = Record, Timer = Timer>> Process<P> for Client {
    fn on_start(&mut self, ctx: &mut Ctx<'_, P>, durable: Vec<Record>) {
        let reserved = durable.into_iter().filter_map(|r| match r {
            Record::Reserved { upto_us } => Some(upto_us),
            _ => None,
        });
        self.clock = TsSource::start(self.index, reserved, self.cfg.common.reserve_ahead_us);
        self.reserve(ctx);
        ctx.set_timer(self.cfg.common.client_tick_ns, Timer::ClientTick);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, P>, upto: Lsn) {
        if self.clock.persisted(upto) {
            // Earlier reservations are covered by this one.
            ctx.compact(upto, Record::Reserved { upto_us: self.clock.reserved_us() });
            self.start_waiting(ctx);
        }
    }

    fn on_request(&mut self, ctx: &mut Ctx<'_, P>, request: RequestId, program: Program) {
        // The front end's per-key work: routing each key, assembling its
        // result (the cost model's `*_ns_per_key`).
        ctx.charge_keys(program.ops.len() as u64);
        self.start(ctx, request, program);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, P>, from: NodeId, msg: Msg) {
        on_message(self, ctx, from, msg);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, P>, timer: Timer) {
        client_timer(timer, || self.on_tick(ctx));
    }

    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("reads", self.reads.len());
        out("writes", self.writes.len());
        out("waiting", self.waiting.len());
    }

    fn check_invariants(&self) {
        self.clock.check_invariants();
        assert!(self.waiting.len() <= WAITING_MAX, "requests waiting for a reservation within their bound");
        for r in self.reads.values().take(meridian_core::process::CHECKED_MAX) {
            assert!(!r.awaiting.is_empty(), "a read in flight waits for a partition");
            assert!(r.restarts <= self.cfg.common.max_attempts, "restarts within their bound");
        }
        for w in self.writes.values().take(meridian_core::process::CHECKED_MAX) {
            w.check_invariants();
            assert!(w.request.is_some() || w.phase == Phase::Commit, "only a commit goes on after its answer");
        }
    }
}
