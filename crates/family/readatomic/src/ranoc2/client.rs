//! An RA-NOC2 client (NOC-NOC Algorithm 1 lines 1-24): PREPARE_ALL,
//! COMMIT_ALL and GET_ALL, talking to the partitions directly, with its
//! dual view (`view.rs`).
//!
//! A write-only transaction takes a timestamp above every safe time the
//! client has heard (`crate::ramp`'s durable, increasing timestamps),
//! PREPAREs its versions at every partition it writes and returns once
//! all are durable — one phase on the client's path (O_W) — after adding
//! them to its local safe view (line 9); it then COMMITs in the
//! background (lines 11-14). A partition refuses a prepare at or below its
//! safe time (see `safe.rs`): the client tells the other participants to
//! drop theirs and writes again at a timestamp above the safe time the
//! refusal carried (`write_retries`).
//!
//! A read-only transaction sends, in one round, every partition it reads
//! its keys with the global safe view and each key's local safe view
//! (lines 16-24); each answer carries the partition's latest safe time,
//! which raises `last` (lines 21, 23). No second round is ever sent: a
//! read ends after one round unless a version it needed was collected
//! (`read_restarts`) or a partition stayed silent (`read_resends`).
//!
//! Faults: a partition silent for `retry_ms` gets the round or phase
//! again; after `max_attempts` sends a read aborts (it changed nothing), a
//! write whose prepares are unanswered reports an unknown outcome, and a
//! background commit is left to the partitions' termination protocol.

use super::messages::{ClientState, Get, KeyRead, Msg, Prepare, Record, Timer};
use super::view::View;
use super::{Config, Variant, partition_of};
use crate::common::client::{Phase, WriteTxn, by_shard, last_ack, resend_writes, take_refused, versions};
use crate::common::events::client_timer;
use crate::common::reads::{DualViewClient, ViewReads};
use crate::ramp::client::{Shape, shape};
use crate::ramp::timestamps::TsSource;
use crate::ramp::{GetId, Ts};
use meridian_core::{
    AbortReason, Ctx, Env, Key, Lsn, NodeId, Outcome, Process, Program, Protocol, RequestId, ShardId, Topology,
};
use meridian_mechanisms::encoding::encoded_len;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// The environment a client acts through.
type ClientCtx<'a> = dyn Env<Msg, Record, Timer> + 'a;

/// Requests waiting for a durable timestamp reservation, at most.
const WAITING_MAX: usize = 65_536;

/// The id of a view refresh (a GET with no keys); reads count from 1.
const REFRESH: GetId = GetId { read: Ts(0), step: 0 };

/// A request not started yet: it waits for a durable timestamp
/// reservation. `refusals` carries a write's earlier refusals.
struct Waiting {
    request: RequestId,
    program: Program,
    refusals: u32,
}

/// A write prepared everywhere whose `Record::Local` is not durable yet:
/// it is answered once it is.
struct Answer {
    lsn: Lsn,
    request: RequestId,
    ops: usize,
    /// Phases the write waited for: 1 (RA-NOC2), 2 (RA-NOC).
    phases: u64,
    /// RA-NOC: the floor its `Record::Floor` made durable.
    floor: Option<Ts>,
}

/// RA-NOC: a write committed everywhere that waits until every
/// partition's safe time has passed it (Algorithm 3 lines 15-16).
struct Blocked {
    request: RequestId,
    ops: usize,
    since_ns: u64,
    /// Requests sent so far to the partitions behind to pass it.
    advances: u32,
}

pub struct Client {
    topo: Arc<Topology>,
    index: u32,
    cfg: Config,
    clock: TsSource,
    view: View,
    /// Every timestamp this client issues is at or above this time (µs):
    /// above every safe time it heard.
    above_us: u64,
    /// How far ahead of its clock this client takes timestamps: a client
    /// far from the partitions is refused until its timestamps are still
    /// above their safe times when its prepares arrive. Learnt from
    /// refusals (twice the round trip past the safe time refused at), at
    /// most a quarter of `reserve_ahead_ms`; never lowered.
    lead_us: u64,
    reads: ViewReads<Get>,
    writes: BTreeMap<Ts, WriteTxn<Prepare>>,
    waiting: VecDeque<Waiting>,
    refreshed_ns: Option<u64>,
    /// Writes answered once their local version (RA-NOC2) or the floor
    /// past them (RA-NOC) is durable, in LSN order.
    answers: VecDeque<Answer>,
    /// RA-NOC's writes waiting for every safe time to pass them.
    blocked: BTreeMap<Ts, Blocked>,
    /// The floor durably recorded (`Record::Floor`), and one being recorded.
    floor: Option<Ts>,
    recording_floor: Option<(Lsn, Option<Ts>)>,
}

impl Client {
    pub fn new(topo: Arc<Topology>, _me: NodeId, index: u32, cfg: Config) -> Client {
        let shards = topo.shards as usize;
        let reads = ViewReads::new(Arc::clone(&topo), cfg.common);
        Client {
            topo,
            index,
            clock: TsSource::start(index, [], cfg.common.reserve_ahead_us),
            view: View::new(shards, cfg.lsv_max),
            above_us: 0,
            lead_us: 0,
            cfg,
            reads,
            writes: BTreeMap::new(),
            waiting: VecDeque::new(),
            refreshed_ns: None,
            answers: VecDeque::new(),
            blocked: BTreeMap::new(),
            floor: None,
            recording_floor: None,
        }
    }

    /// The client's dual view (for tests).
    pub fn view(&self) -> &View {
        &self.view
    }

    /// Records the view's floor when it rose (one record at a time): the
    /// local versions below it go once it is durable.
    fn record_floor(&mut self, ctx: &mut ClientCtx<'_>) {
        let floor = self.view.floor();
        if self.recording_floor.is_some() || floor <= self.floor || self.view.local_versions() == 0 {
            return;
        }
        let Some(ts) = floor else { return };
        let lsn = ctx.append(Record::Floor { ts });
        self.recording_floor = Some((lsn, floor));
    }

    /// The time the next timestamp is taken at: the clock, ahead by the
    /// lead refusals taught, and above every safe time heard.
    fn clock_us(&self, ctx: &ClientCtx<'_>) -> u64 {
        (ctx.clock_ns() / 1_000 + self.lead_us).max(self.above_us)
    }

    fn reserve(&mut self, ctx: &mut ClientCtx<'_>) {
        let clock_us = self.clock_us(ctx);
        self.clock.reserve(ctx, clock_us, |upto_us| Record::Reserved { upto_us });
    }

    fn start(&mut self, ctx: &mut ClientCtx<'_>, w: Waiting) {
        let Some(shape) = shape(&w.program) else {
            return ctx.complete(w.request, Outcome::Aborted { reason: AbortReason::Rejected });
        };
        if w.program.is_empty() {
            return ctx.complete(w.request, Outcome::Committed { results: Vec::new() });
        }
        let now_ns = ctx.monotonic_ns();
        match shape {
            Shape::Read => self.get_all(ctx, w.request, w.program, now_ns),
            Shape::Write => {
                let lsv = self.cfg.variant == Variant::Noc2;
                if lsv && self.view.is_full(w.program.write_set().len()) {
                    ctx.count("writes_rejected", 1);
                    return ctx.complete(w.request, Outcome::Aborted { reason: AbortReason::Rejected });
                }
                self.reserve(ctx);
                match self.clock.next(self.clock_us(ctx)) {
                    Some(ts) => self.prepare_all(ctx, ts, w, now_ns),
                    None if self.waiting.len() >= WAITING_MAX => {
                        ctx.complete(w.request, Outcome::Aborted { reason: AbortReason::Rejected })
                    }
                    None => self.waiting.push_back(w),
                }
            }
        }
    }

    // ---- PREPARE_ALL, COMMIT_ALL ----

    /// Lines 4-7: a new timestamp and the versions prepared at every
    /// partition written.
    fn prepare_all(&mut self, ctx: &mut ClientCtx<'_>, ts: Ts, w: Waiting, now_ns: u64) {
        let v = versions(&self.topo, &w.program);
        let prepares: BTreeMap<ShardId, Arc<Prepare>> = v
            .by_shard
            .into_iter()
            .map(|(shard, writes)| (shard, Arc::new(Prepare { ts, writes, participants: v.participants.clone() })))
            .collect();
        let txn = WriteTxn::new(w.request, w.program, prepares, w.refusals, now_ns);
        txn.send_phase(ctx, &self.topo, ts);
        self.writes.insert(ts, txn);
    }

    /// Lines 8-10 once every partition prepared: the versions join the
    /// local safe view (line 9) and the write returns — one phase on the
    /// client's path. Lines 11-13: COMMIT_ALL, in the background.
    fn on_prepared(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, ts: Ts, lst: Option<Ts>) {
        let Some(shard) = self.learn(ctx, from, lst) else { return };
        let Some(w) = last_ack(&mut self.writes, shard, ts, Phase::Prepare) else { return };
        w.start_commit(ctx.monotonic_ns());
        if self.cfg.variant == Variant::Noc2 {
            let request = w.request.take().expect("answered once, after the prepare phase");
            let ops = w.program.ops.len();
            let keys: Vec<Key> = w.prepares.values().flat_map(|p| p.writes.iter().map(|(k, _)| *k)).collect();
            self.view.prepared(ts, keys.iter().copied());
            let lsn = ctx.append(Record::Local { ts, keys });
            self.answers.push_back(Answer { lsn, request, ops, phases: 1, floor: None });
        }
        // RA-NOC: Algorithm 3 lines 12-14, the commit phase on the
        // client's path (the request stays open).
        self.writes[&ts].send_phase(ctx, &self.topo, ts);
    }

    /// The writes whose local version is durable return (one phase on the
    /// client's path, and one local append).
    fn answer_writes(&mut self, ctx: &mut ClientCtx<'_>, upto: Lsn) {
        while self.answers.front().is_some_and(|a| a.lsn <= upto) {
            let a = self.answers.pop_front().expect("present");
            self.floor = self.floor.max(a.floor);
            ctx.count("writes", 1);
            ctx.count("write_phases_on_client_path", a.phases);
            ctx.complete(a.request, Outcome::Committed { results: vec![None; a.ops] });
        }
    }

    /// Line 14: every partition committed; the background commit is done.
    fn on_committed(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, ts: Ts, lst: Option<Ts>) {
        let Some(shard) = self.learn(ctx, from, lst) else { return };
        if last_ack(&mut self.writes, shard, ts, Phase::Commit).is_none() {
            return;
        }
        let w = self.writes.remove(&ts).expect("present");
        match w.request {
            None => ctx.count("background_commits", 1),
            Some(request) => {
                // RA-NOC, Algorithm 3 line 15: wait until `min(last)` passes it.
                if self.cfg.skip_wait {
                    // The counter-example: no wait (tests only).
                    ctx.count("writes", 1);
                    ctx.count("write_phases_on_client_path", 2);
                    return ctx.complete(request, Outcome::Committed { results: vec![None; w.program.ops.len()] });
                }
                let b = Blocked { request, ops: w.program.ops.len(), since_ns: ctx.monotonic_ns(), advances: 0 };
                self.blocked.insert(ts, b);
                self.release(ctx);
                if self.blocked.contains_key(&ts) {
                    ctx.count("writes_blocked", 1);
                    self.poll_behind(ctx);
                }
            }
        }
    }

    /// RA-NOC, Algorithm 3 lines 15-17: the writes every partition's safe
    /// time has passed return, once the floor past them is durable (a
    /// restarted client's version vector starts there, so its sessions
    /// still read their writes).
    fn release(&mut self, ctx: &mut ClientCtx<'_>) {
        let floor = self.view.floor();
        let mut released = Vec::new();
        while let Some(entry) = self.blocked.first_entry() {
            if Some(*entry.key()) > floor {
                break;
            }
            released.push(entry.remove());
        }
        let Some(floor_ts) = floor.filter(|_| !released.is_empty()) else { return };
        let lsn = ctx.append(Record::Floor { ts: floor_ts });
        let now_ns = ctx.monotonic_ns();
        for b in released {
            ctx.observe("write_block_us", now_ns.saturating_sub(b.since_ns) / 1_000);
            self.answers.push_back(Answer { lsn, request: b.request, ops: b.ops, phases: 2, floor });
        }
    }

    /// RA-NOC: asks the partitions whose safe time is below the oldest
    /// blocked write for theirs (lines 15-16 wait for `last` to rise; a
    /// client hears a partition's safe time only in its answers). A write
    /// blocked `retry_ms` more asks them to pass it; one that asked
    /// `max_attempts` times is reported unknown (it is committed, but its
    /// sessions could not be promised to read it).
    fn poll_behind(&mut self, ctx: &mut ClientCtx<'_>) {
        let now_ns = ctx.monotonic_ns();
        let retry_ns = self.cfg.common.retry_ns;
        let Some(mut entry) = self.blocked.first_entry() else { return };
        let ts = *entry.key();
        let b = entry.get_mut();
        let advance = b.since_ns + retry_ns * (u64::from(b.advances) + 1) <= now_ns;
        if advance && b.advances >= self.cfg.common.max_attempts {
            let b = entry.remove();
            ctx.count("unknown_outcomes", 1);
            return ctx.complete(b.request, Outcome::Unknown);
        }
        if advance {
            b.advances += 1;
        }
        let shards = (0..self.topo.shards).map(ShardId).filter(|s| self.view.last(*s) < Some(ts));
        for shard in shards.collect::<Vec<_>>() {
            ctx.count(if advance { "safe_time_advances_asked" } else { "safe_time_polls" }, 1);
            let get = Get { id: REFRESH, ts_c: advance.then_some(ts), keys: Vec::new() };
            ctx.send(partition_of(&self.topo, shard), Msg::Get(get));
        }
    }

    /// A partition refused the timestamp for good: the transaction never
    /// commits at it. The other participants drop their versions, and the
    /// write starts again above the safe time the refusal carried.
    fn on_refused(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, ts: Ts, lst: Option<Ts>) {
        self.learn(ctx, from, lst);
        let Some(w) = take_refused(&mut self.writes, ts) else { return };
        for shard in w.prepares.keys() {
            ctx.send(partition_of(&self.topo, *shard), Msg::Abort { ts });
        }
        // The partition's safe time moves on while the new prepare travels:
        // aim above it by twice the round trip this one took, this time and
        // from now on, so that a client far from the partitions is not
        // refused again and again.
        if let Some(lst) = lst {
            let round_trip_us = ctx.monotonic_ns().saturating_sub(w.started_ns) / 1_000;
            let aim_us = lst.time_us() + 2 * round_trip_us;
            let lead_us = aim_us.saturating_sub(ctx.clock_ns() / 1_000).min(self.cfg.common.reserve_ahead_us / 4);
            self.lead_us = self.lead_us.max(lead_us);
        }
        let request = w.request.expect("in the prepare phase");
        if w.refusals + 1 >= self.cfg.common.max_attempts {
            ctx.count("writes_given_up", 1);
            // Refused durably by a participant: it commits nowhere.
            return ctx.complete(request, Outcome::Aborted { reason: AbortReason::Conflict });
        }
        ctx.count("write_retries", 1);
        self.start(ctx, Waiting { request, program: w.program, refusals: w.refusals + 1 });
    }

    // ---- GET_ALL: `DualViewClient` below; retries and refreshes ----

    fn on_tick(&mut self, ctx: &mut ClientCtx<'_>) {
        ctx.set_timer(self.cfg.common.client_tick_ns, Timer::ClientTick);
        let now_ns = ctx.monotonic_ns();
        self.reserve(ctx);
        self.resend_reads(ctx, now_ns);
        self.resend_writes(ctx, now_ns);
        self.refresh(ctx, now_ns);
        self.poll_behind(ctx);
    }

    fn resend_writes(&mut self, ctx: &mut ClientCtx<'_>, now_ns: u64) {
        resend_writes(ctx, &self.topo, &mut self.writes, now_ns, &self.cfg.common);
    }

    /// A view holding more than half its bound in local versions asks the
    /// partitions behind them for their safe times (once per `retry_ms`),
    /// so that the local versions every partition has passed go.
    fn refresh(&mut self, ctx: &mut ClientCtx<'_>, now_ns: u64) {
        if self.view.local_versions() <= self.cfg.lsv_max / 2 {
            return;
        }
        if self.refreshed_ns.is_some_and(|t| t + self.cfg.common.retry_ns > now_ns) {
            return;
        }
        self.refreshed_ns = Some(now_ns);
        for shard in self.view.behind() {
            ctx.count("view_refreshes", 1);
            let get = Get { id: REFRESH, ts_c: None, keys: Vec::new() };
            ctx.send(partition_of(&self.topo, shard), Msg::Get(get));
        }
    }

    /// A restart: the timestamp reservations, the recorded floor and the
    /// own writes recorded above it (`recovery.rs` for partitions).
    fn restore(&mut self, durable: Vec<Record>) {
        let (mut reserved, mut local) = (Vec::new(), Vec::new());
        for record in durable {
            match record {
                Record::Reserved { upto_us } => reserved.push(upto_us),
                Record::ClientState(s) => {
                    reserved.push(s.reserved_us);
                    self.floor = self.floor.max(s.floor);
                    local.extend(s.local.iter().copied());
                }
                Record::Local { ts, keys } => local.extend(keys.into_iter().map(|k| (k, ts))),
                Record::Floor { ts } => self.floor = self.floor.max(Some(ts)),
                Record::Prepared(_)
                | Record::Committed { .. }
                | Record::Aborted { .. }
                | Record::Advanced { .. }
                | Record::Snapshot(_)
                | Record::Backup(_) => {
                    unreachable!("a partition's or backup's record in a client's log")
                }
            }
        }
        self.clock = TsSource::start(self.index, reserved, self.cfg.common.reserve_ahead_us);
        self.view.restore(self.floor, local);
        if let Some(floor) = self.floor {
            self.above_us = floor.time_us() + 1;
        }
    }

    /// Requests held for a reservation start once it is durable.
    fn start_waiting(&mut self, ctx: &mut ClientCtx<'_>) {
        let waiting = std::mem::take(&mut self.waiting);
        for w in waiting {
            self.start(ctx, w);
        }
    }
}

/// The reads of `crate::common::reads`, from RA-NOC2's dual view (RA-NOC's
/// global safe view alone).
impl DualViewClient<Msg, Record> for Client {
    type Get = Get;

    type Local = Ts;

    fn view_reads(&mut self) -> &mut ViewReads<Get> {
        &mut self.reads
    }

    fn view(&mut self) -> &mut View {
        &mut self.view
    }

    /// Lines 8, 14, 21, 23: later timestamps go above a partition's latest
    /// safe time; the floor the view reached is recorded, and RA-NOC's
    /// writes it passed are released.
    fn learned(&mut self, ctx: &mut ClientCtx<'_>, _shard: ShardId, lst: Option<Ts>) {
        if let Some(lst) = lst {
            self.above_us = self.above_us.max(lst.time_us() + 1);
        }
        self.record_floor(ctx);
        self.release(ctx);
    }

    /// Lines 16-23: one round — every partition read gets its keys with the
    /// global safe view `ts_c` (line 17) and each key's local safe view
    /// `ts_p` (line 19).
    fn asks(&self, ctx: &mut ClientCtx<'_>, id: GetId, program: &Program) -> Vec<(ShardId, Get)> {
        let by_shard = by_shard(&self.topo, program.read_set());
        let ts_c = match self.cfg.read_beyond_gsv {
            false => self.view.gsv(by_shard.keys().copied()),
            // The counter-example: no view at all, the newest commits.
            true => Some(Ts(u64::MAX)),
        };
        let mut asks = Vec::with_capacity(by_shard.len());
        for (shard, keys) in by_shard {
            // RA-NOC, Algorithm 3 line 5: the global safe view only.
            let lsv = |key| if self.cfg.variant == Variant::Noc2 { self.view.lsv(key) } else { None };
            let keys: Vec<KeyRead> = keys.into_iter().map(|key| KeyRead { key, ts_p: lsv(key) }).collect();
            for k in &keys {
                ctx.observe("read_request_metadata_bytes", encoded_len(&(ts_c, k.ts_p)) as u64);
                if k.ts_p > ts_c {
                    ctx.count("keys_read_from_lsv", 1);
                }
            }
            asks.push((shard, Get { id, ts_c, keys }));
        }
        asks
    }

    fn get_message(get: Get) -> Msg {
        Msg::Get(get)
    }
}

impl<P: Protocol<Msg = Msg, Record = Record, Timer = Timer>> Process<P> for Client {
    fn on_start(&mut self, ctx: &mut Ctx<'_, P>, durable: Vec<Record>) {
        self.restore(durable);
        self.reserve(ctx);
        ctx.set_timer(self.cfg.common.client_tick_ns, Timer::ClientTick);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, P>, upto: Lsn) {
        self.answer_writes(ctx, upto);
        if let Some((lsn, floor)) = self.recording_floor
            && lsn <= upto
        {
            self.recording_floor = None;
            self.floor = floor;
            self.view.prune(floor);
            self.record_floor(ctx);
        }
        if self.clock.persisted(upto) {
            // Earlier records are folded into this one.
            let state =
                ClientState { reserved_us: self.clock.reserved_us(), floor: self.floor, local: self.view.local() };
            ctx.compact(upto, Record::ClientState(Arc::new(state)));
            self.start_waiting(ctx);
        }
    }

    fn on_request(&mut self, ctx: &mut Ctx<'_, P>, request: RequestId, program: Program) {
        // The front end's per-key work: routing each key, assembling its
        // result (the cost model's `*_ns_per_key`).
        ctx.charge_keys(program.ops.len() as u64);
        self.start(ctx, Waiting { request, program, refusals: 0 });
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, P>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Prepared { ts, lst } => self.on_prepared(ctx, from, ts, lst),
            Msg::Committed { ts, lst } => self.on_committed(ctx, from, ts, lst),
            Msg::Refused { ts, lst } => self.on_refused(ctx, from, ts, lst),
            Msg::Got { id, values, lst } => self.on_got(ctx, from, id, values, lst),
            Msg::Gone { id, lst } => self.on_gone(ctx, from, id, lst),
            // Messages to partitions.
            Msg::Prepare(_)
            | Msg::Commit { .. }
            | Msg::Abort { .. }
            | Msg::Get(_)
            | Msg::CheckPrepared { .. }
            | Msg::PrepareState { .. } => {}
            // Between primaries and backups.
            Msg::Ship(_) => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, P>, timer: Timer) {
        client_timer(timer, || self.on_tick(ctx));
    }

    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("reads", self.reads.len());
        out("writes", self.writes.len());
        out("waiting", self.waiting.len());
        out("local_versions", self.view.local_versions());
        out("answers", self.answers.len());
        out("blocked", self.blocked.len());
    }

    fn check_invariants(&self) {
        self.clock.check_invariants();
        self.view.check_invariants();
        assert!(self.floor <= self.view.floor(), "the recorded floor is one every partition passed");
        assert!(
            self.answers.iter().zip(self.answers.iter().skip(1)).all(|(a, b)| a.lsn <= b.lsn),
            "answers in LSN order"
        );
        let noc2 = self.cfg.variant == Variant::Noc2;
        assert!(!noc2 || self.blocked.is_empty(), "only RA-NOC's writes wait for the safe times");
        assert!(self.waiting.len() <= WAITING_MAX, "requests waiting for a reservation within their bound");
        self.reads.check_invariants();
        for w in self.writes.values().take(meridian_core::process::CHECKED_MAX) {
            w.check_invariants();
            let open = w.phase == Phase::Prepare || !noc2;
            assert!(w.request.is_some() == open, "RA-NOC2 answers once prepared, RA-NOC after its commit phase");
            assert!(w.refusals < self.cfg.common.max_attempts, "refusals within their bound");
        }
    }
}
