//! A LORA client (a front end: its sessions share one `last` map,
//! `known.rs`), talking to RAMP's partitions directly.
//!
//! - **PUT_ALL.** A fresh timestamp (RAMP's durable, increasing ones), the
//!   versions PREPAREd at every partition written with the transaction's
//!   keys as their metadata (linear in the transaction's size). Once every
//!   partition has made them durable, the keys join `last` at the write's
//!   timestamp, recorded durably on the client (`Record::Known`), and the
//!   write returns — **one phase**, non-blocking; COMMIT goes on in the
//!   background.
//! - **GET_ALL.** One GET per partition read, each key with `last[k]`
//!   (one timestamp per key: linear in the read's size); each partition
//!   answers at once with the version at exactly that timestamp (prepared
//!   or committed; the initial state for a key the client knows nothing
//!   of), and the version's sibling keys (linear in the writer's size) —
//!   **one round**. The answers' versions and siblings raise `last`.
//!
//! Beyond the published algorithm: a version asked for may have been
//! garbage-collected (overwritten by a newer commit `gc_window_ms` ago);
//! the partition then returns the newest committed version, and the
//! client checks the read for fractures (a version whose siblings among
//! the keys read came back older) before returning it. A fractured read
//! starts again at the `last` the answers raised (`read_restarts`), at most
//! `max_attempts` times. Without collections no read is ever fractured
//! (the closure of `known.rs`) and every read takes one round.
//!
//! Faults: unanswered rounds and phases are sent again after `retry_ms`
//! (`crate::common::client`); a write whose prepares go unanswered
//! `max_attempts` times, or that a partition refused (the termination
//! protocol aborted it first), is reported unknown, as RAMP's.

use super::Config;
use super::known::Known;
use crate::common::client::{
    Attempts, Phase, Resent, ResentRead, WriteTxn, by_shard, last_ack, refused_unknown, resend_reads, resend_writes,
};
use crate::common::events::client_timer;
use crate::common::partition_of;
use crate::ramp::client::{
    Handlers, Shape, WAITING_MAX, admit, ask_metadata_bytes, item_metadata_bytes, on_message, prepares, reserve,
};
use crate::ramp::timestamps::TsSource;
use crate::ramp::{Ask, GetId, Item, KnownState, Msg, Prepare, Record, Timer, Ts};
use meridian_core::{
    AbortReason, Ctx, Env, Key, Lsn, NodeId, Outcome, Process, Program, Protocol, RequestId, ShardId, Topology,
};
use meridian_mechanisms::encoding::encoded_len;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

type ClientCtx<'a> = dyn Env<Msg, Record, Timer> + 'a;

struct ReadTxn {
    request: RequestId,
    program: Program,
    keys: Vec<Key>,
    step: u32,
    /// Rounds sent so far (one, unless a collection fractured the read).
    rounds: u32,
    items: BTreeMap<Key, Item>,
    awaiting: BTreeMap<ShardId, Ask>,
    attempts: Attempts,
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

/// A write prepared everywhere whose `Record::Known` is not durable yet:
/// it is answered once it is.
struct Answer {
    lsn: Lsn,
    request: RequestId,
    ops: usize,
}

pub struct Client {
    topo: Arc<Topology>,
    index: u32,
    cfg: Config,
    clock: TsSource,
    known: Known,
    reads: BTreeMap<Ts, ReadTxn>,
    writes: BTreeMap<Ts, WriteTxn<Prepare>>,
    waiting: VecDeque<(RequestId, Program)>,
    answers: VecDeque<Answer>,
}

impl Client {
    pub fn new(topo: Arc<Topology>, _me: NodeId, index: u32, cfg: Config) -> Client {
        Client {
            topo,
            index,
            clock: TsSource::start(index, [], cfg.common.reserve_ahead_us),
            known: Known::new(cfg.known_max),
            cfg,
            reads: BTreeMap::new(),
            writes: BTreeMap::new(),
            waiting: VecDeque::new(),
            answers: VecDeque::new(),
        }
    }

    /// `last[key]`, for tests.
    pub fn known_at(&self, key: Key) -> Option<Ts> {
        self.known.at(key)
    }

    /// Starts the request now, or holds it until a timestamp is durably
    /// reserved (reads take one too: it names them, unique across
    /// restarts, so a late answer never meets a later read).
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

    /// Keys of the writes still in their prepare phase: they join `last`
    /// when it ends, so room is kept for them.
    fn reserved_keys(&self) -> usize {
        let keys = |w: &WriteTxn<Prepare>| w.prepares.values().next().map_or(0, |p| p.keys.len());
        self.writes.values().filter(|w| w.phase == Phase::Prepare).map(keys).sum()
    }

    // ---- PUT_ALL ----

    /// PREPARE at every partition written, each version with its
    /// transaction's keys; refused when `last` has no room for the keys.
    fn put_all(&mut self, ctx: &mut ClientCtx<'_>, ts: Ts, request: RequestId, program: Program, now_ns: u64) {
        let prepares = prepares(&self.topo, ts, &program);
        let keys = prepares.values().next().map(|p| Arc::clone(&p.keys)).expect("a write writes a key");
        if !self.known.fits(&keys, self.reserved_keys()) {
            ctx.count("writes_rejected", 1);
            return ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
        }
        for p in prepares.values() {
            ctx.observe("write_request_metadata_bytes", encoded_len(&(p.ts, &*p.keys, &p.participants)) as u64);
        }
        let w = WriteTxn::new(request, program, prepares, 0, now_ns);
        w.send_phase(ctx, &self.topo, ts);
        self.writes.insert(ts, w);
    }

    /// The writes whose `Record::Known` is durable return.
    fn answer_writes(&mut self, ctx: &mut ClientCtx<'_>, upto: Lsn) {
        while self.answers.front().is_some_and(|a| a.lsn <= upto) {
            let a = self.answers.pop_front().expect("present");
            ctx.count("writes", 1);
            ctx.count("write_phases_on_client_path", 1);
            ctx.complete(a.request, Outcome::Committed { results: vec![None; a.ops] });
        }
    }

    // ---- GET_ALL ----

    /// One GET per partition, each key at `last[k]`.
    fn get_all(&mut self, ctx: &mut ClientCtx<'_>, ts: Ts, request: RequestId, program: Program, now_ns: u64) {
        let keys = program.read_set();
        let mut r = ReadTxn {
            request,
            program,
            keys,
            step: 0,
            rounds: 0,
            items: BTreeMap::new(),
            awaiting: BTreeMap::new(),
            attempts: Attempts::first(now_ns),
        };
        self.send_round(ctx, ts, &mut r, now_ns);
        self.reads.insert(ts, r);
    }

    /// What a round asks each partition: every key at `last` (with
    /// `test_read_latest`, at `lastCommit` instead).
    fn asks(&self, keys: &[Key]) -> BTreeMap<ShardId, Ask> {
        let ask = |keys: Vec<Key>| match self.cfg.read_latest {
            true => Ask::Latest(keys),
            false => Ask::Known(keys.into_iter().map(|k| (k, self.known.at(k))).collect()),
        };
        by_shard(&self.topo, keys.iter().copied()).into_iter().map(|(s, keys)| (s, ask(keys))).collect()
    }

    fn send_round(&self, ctx: &mut ClientCtx<'_>, read: Ts, r: &mut ReadTxn, now_ns: u64) {
        r.step += 1;
        r.rounds += 1;
        r.attempts = Attempts::first(now_ns);
        r.items.clear();
        r.awaiting = self.asks(&r.keys);
        assert!(!r.awaiting.is_empty(), "a round asks something");
        for ask in r.awaiting.values() {
            ctx.observe("read_request_metadata_bytes", ask_metadata_bytes(ask) as u64);
        }
        resend_round(&self.topo, ctx, read, r);
    }

    /// Every partition answered: the versions raise `last`; the read
    /// returns unless a collected version made it fractured.
    fn on_round_done(&mut self, ctx: &mut ClientCtx<'_>, read: Ts) {
        let r = self.reads.remove(&read).expect("a read in flight");
        let reserved = self.reserved_keys();
        let mut learned = 0;
        for item in r.items.values() {
            if let Some(ts) = item.ts {
                learned += self.known.learn(ts, item.key, &item.siblings, reserved);
            }
        }
        if learned > 0 {
            ctx.count("keys_learned", learned);
        }
        if !self.cfg.read_latest && fractured(&r.items) {
            return self.restart(ctx, read, r);
        }
        self.finish_read(ctx, r);
    }

    fn finish_read(&mut self, ctx: &mut ClientCtx<'_>, r: ReadTxn) {
        ctx.count("reads", 1);
        ctx.count("read_rounds", u64::from(r.rounds));
        ctx.observe("rounds_per_read", u64::from(r.rounds));
        let value = |key: &Key| r.items.get(key).and_then(|i| i.value.clone());
        let results = r.program.ops.iter().map(|op| value(&op.key())).collect();
        ctx.complete(r.request, Outcome::Committed { results });
    }

    /// The read again, at the `last` its answers raised, or given up after
    /// `max_attempts` restarts (rounds after the first).
    fn restart(&mut self, ctx: &mut ClientCtx<'_>, read: Ts, mut r: ReadTxn) {
        if r.rounds > self.cfg.common.max_attempts {
            ctx.count("reads_given_up", 1);
            return ctx.complete(r.request, Outcome::Aborted { reason: AbortReason::Timeout });
        }
        ctx.count("read_restarts", 1);
        let now_ns = ctx.monotonic_ns();
        self.send_round(ctx, read, &mut r, now_ns);
        self.reads.insert(read, r);
    }

    // ---- retries ----

    fn on_tick(&mut self, ctx: &mut ClientCtx<'_>) {
        ctx.set_timer(self.cfg.common.client_tick_ns, Timer::ClientTick);
        let now_ns = ctx.monotonic_ns();
        reserve(ctx, &mut self.clock);
        let topo = &self.topo;
        resend_reads(ctx, &mut self.reads, now_ns, &self.cfg.common, |ctx, ts, r| resend_round(topo, ctx, ts, r));
        resend_writes(ctx, &self.topo, &mut self.writes, now_ns, &self.cfg.common);
    }

    /// Requests held for a reservation start once it is durable.
    fn start_waiting(&mut self, ctx: &mut ClientCtx<'_>) {
        let waiting = std::mem::take(&mut self.waiting);
        for (request, program) in waiting {
            self.start(ctx, request, program);
        }
    }

    /// A restart: the timestamp reservations and the own writes recorded.
    fn restore(&mut self, durable: Vec<Record>) {
        let (mut reserved, mut own) = (Vec::new(), Vec::new());
        for record in durable {
            match record {
                Record::Reserved { upto_us } => reserved.push(upto_us),
                Record::Known { ts, keys } => own.extend(keys.into_iter().map(|k| (k, ts))),
                Record::KnownState(s) => {
                    reserved.push(s.reserved_us);
                    own.extend(s.own.iter().copied());
                }
                Record::Prepared(_)
                | Record::Committed { .. }
                | Record::Aborted { .. }
                | Record::Snapshot(_)
                | Record::Backup(_) => {
                    unreachable!("a partition's or backup's record in a client's log")
                }
            }
        }
        self.clock = TsSource::start(self.index, reserved, self.cfg.common.reserve_ahead_us);
        self.known.restore(own);
    }
}

/// Whether a version read shows its transaction wrote another key read
/// and that key's version read is older ("Scalable Atomic Visibility with
/// RAMP Transactions" §3's fractured read, RAMP-F's `v_latest` test).
pub fn fractured(items: &BTreeMap<Key, Item>) -> bool {
    let older = |s: &Key, ts: Ts| items.get(s).is_some_and(|o| o.ts < Some(ts));
    items.values().any(|i| i.ts.is_some_and(|ts| i.siblings.iter().any(|s| older(s, ts))))
}

/// Sends a read's round again to the partitions that have not answered it.
fn resend_round(topo: &Topology, ctx: &mut ClientCtx<'_>, read: Ts, r: &ReadTxn) {
    let id = GetId { read, step: r.step };
    for (shard, ask) in &r.awaiting {
        ctx.send(partition_of(topo, *shard), Msg::Get { id, ask: ask.clone() });
    }
}

/// The partitions' answers (`on_message` dispatches them).
impl Handlers for Client {
    /// Every partition prepared: the keys join `last` (durably) and the
    /// write returns once that record is durable — one phase on the
    /// client's path; the COMMITs leave now, in the background.
    fn on_prepared(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, ts: Ts) {
        let Some(shard) = self.topo.replica_of(from).map(|(s, _)| s) else { return };
        let Some(w) = last_ack(&mut self.writes, shard, ts, Phase::Prepare) else { return };
        w.start_commit(ctx.monotonic_ns());
        let request = w.request.take().expect("answered once, after the prepare phase");
        let ops = w.program.ops.len();
        let keys: Vec<Key> = w.prepares.values().next().map(|p| p.keys.to_vec()).expect("a write writes a key");
        self.known.wrote(ts, &keys);
        let lsn = ctx.append(Record::Known { ts, keys });
        self.answers.push_back(Answer { lsn, request, ops });
        self.writes[&ts].send_phase(ctx, &self.topo, ts);
    }

    /// Every partition committed: the background commit is done.
    fn on_committed(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, ts: Ts) {
        let Some(shard) = self.topo.replica_of(from).map(|(s, _)| s) else { return };
        if last_ack(&mut self.writes, shard, ts, Phase::Commit).is_some() {
            self.writes.remove(&ts);
            ctx.count("background_commits", 1);
        }
    }

    /// The termination protocol aborted the write at a partition before
    /// its prepare arrived: it never commits, and is reported unknown (as
    /// RAMP's, `crate::ramp::client`).
    fn on_refused(&mut self, ctx: &mut ClientCtx<'_>, ts: Ts) {
        refused_unknown(ctx, &mut self.writes, ts);
    }

    fn on_got(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, id: GetId, items: Vec<Item>) {
        let Some(shard) = self.topo.replica_of(from).map(|(s, _)| s) else { return };
        let Some(r) = self.reads.get_mut(&id.read).filter(|r| r.step == id.step) else { return };
        if r.awaiting.remove(&shard).is_none() {
            return;
        }
        ctx.observe("read_response_metadata_bytes", items.iter().map(item_metadata_bytes).sum::<usize>() as u64);
        for item in items {
            r.items.insert(item.key, item);
        }
        if r.awaiting.is_empty() {
            self.on_round_done(ctx, id.read);
        }
    }

    /// A version asked for is neither here nor replaced by a newer commit
    /// (never expected: see `Versions::known`): the read starts again.
    fn on_gone(&mut self, ctx: &mut ClientCtx<'_>, id: GetId) {
        let Some(r) = self.reads.remove(&id.read) else { return };
        if r.step != id.step {
            self.reads.insert(id.read, r);
            return;
        }
        self.restart(ctx, id.read, r);
    }
}

impl<P: Protocol<Msg = Msg, Record = Record, Timer = Timer>> Process<P> for Client {
    fn on_start(&mut self, ctx: &mut Ctx<'_, P>, durable: Vec<Record>) {
        self.restore(durable);
        reserve(ctx, &mut self.clock);
        ctx.set_timer(self.cfg.common.client_tick_ns, Timer::ClientTick);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, P>, upto: Lsn) {
        self.answer_writes(ctx, upto);
        if self.clock.persisted(upto) {
            // Earlier records are folded into this one.
            let state = KnownState { reserved_us: self.clock.reserved_us(), own: self.known.own() };
            ctx.compact(upto, Record::KnownState(Arc::new(state)));
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
        out("answers", self.answers.len());
        out("known_keys", self.known.len());
    }

    fn check_invariants(&self) {
        self.clock.check_invariants();
        self.known.check_invariants();
        assert!(self.waiting.len() <= WAITING_MAX, "requests waiting for a reservation within their bound");
        for r in self.reads.values().take(meridian_core::process::CHECKED_MAX) {
            assert!(!r.awaiting.is_empty(), "a read in flight waits for a partition");
            assert!(r.rounds <= self.cfg.common.max_attempts + 1, "rounds within their bound");
        }
        for w in self.writes.values().take(meridian_core::process::CHECKED_MAX) {
            w.check_invariants();
            assert!(w.request.is_some() || w.phase == Phase::Commit, "only a commit goes on after its answer");
        }
        let lsns = self.answers.iter().map(|a| a.lsn);
        assert!(lsns.clone().zip(lsns.skip(1)).all(|(a, b)| a < b), "answers wait in the order of their records");
    }
}
