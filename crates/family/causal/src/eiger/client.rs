//! An Eiger-NOC2 client (NOC-NOC Algorithm 5, the client side of
//! Algorithm 2): PUT_ALL and GET_ALL, talking to the partitions directly,
//! with its dual view (RA-NOC2's `View`, whose local entries are
//! `latestWrite[key]`, the pair `(t_own, txnid)`).
//!
//! A write-only transaction gets an id (RAMP's durable, increasing client
//! timestamps), sends every participant its writes, the coordinator and
//! the largest stamp the client has seen (`dep`), and collects every
//! participant's prepare stamp and latest safe time (lines 13-18). Once all
//! are in, it mimics the coordinator (Figure 7): `t_own` is the largest
//! stamp (line 19), which becomes `latestWrite` of every key written
//! (lines 20-22), durably; the write returns — one phase on the client's
//! path (O_W). The commit is the partitions' business.
//!
//! A read-only transaction sends, in one round, every partition it reads
//! its keys with the global safe view `min(last)` (line 6) and each key's
//! `latestWrite` (lines 7-9); each answer's latest safe time raises `last`.
//!
//! Eiger-PORT's client (`Flavor::Port`) sends its snapshot with every
//! prepare and waits for the coordinator's `Committed`: `latestWrite`
//! takes the commit stamp, and the write returns after two phases. Its
//! reads are Eiger-NOC2's; the partitions apply PORT's rule.
//!
//! Beyond the pseudocode: a restarted client asks every partition for its
//! safe time before serving (its version vector is not durable, and a
//! session's next read must not go below what it read before the crash,
//! nor its next write below it); local entries every partition's safe time
//! has passed are dropped (bounded by `lsv_max`); a partition silent for
//! `retry_ms` gets the round or prepare again, and after `max_attempts`
//! a read aborts and a write reports an unknown outcome.

use super::messages::{ClientState, Get, KeyRead, Msg, Own, Prepare, Record, Timer};
use super::{Config, Flavor, partition_of};
use meridian_core::{
    AbortReason, Ctx, Env, Key, Lsn, NodeId, Outcome, Process, Program, Protocol, RequestId, ShardId, Topology,
};
use meridian_mechanisms::encoding::encoded_len;
use meridian_readatomic::common::events::client_timer;
use meridian_readatomic::common::reads::{DualViewClient, ViewReads};
use meridian_readatomic::ramp::client::{Shape, shape};
use meridian_readatomic::ramp::timestamps::TsSource;
use meridian_readatomic::ramp::{GetId, Ts};
use meridian_readatomic::ranoc2::View;
use meridian_readatomic::ranoc2::view::Local;
use meridian_readatomic::{Attempts, Due, Resent, Versions, by_shard, due, versions};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

type ClientCtx<'a> = dyn Env<Msg, Record, Timer> + 'a;

/// Requests waiting for a durable id reservation or a restart's view, at
/// most.
const WAITING_MAX: usize = 65_536;

struct WriteTxn {
    request: RequestId,
    ops: usize,
    prepares: BTreeMap<ShardId, Arc<Prepare>>,
    /// Eiger-PORT: the snapshot the client reads at, sent with every
    /// prepare.
    snapshot: Option<Ts>,
    /// The participants whose answer is missing: their `Prepared`, and
    /// for Eiger-PORT's coordinator its `Committed`.
    awaiting: BTreeSet<ShardId>,
    /// Line 19: the largest prepare stamp so far.
    t_own: Option<Ts>,
    attempts: Attempts,
}

impl Resent for WriteTxn {
    fn attempts(&mut self) -> &mut Attempts {
        &mut self.attempts
    }
}

/// `latestWrite[key]` as the client keeps it (RA-NOC2's `View` entry),
/// ordered as its protocol orders a client's own writes. Eiger-NOC2: by
/// the mimicked commit stamp (Algorithm 2 line 35). Eiger-PORT: by
/// transaction id — the order the writes were issued in, and so of the
/// snapshots they stand at in this client's reads — since two sessions of
/// one client may commit in the other order; its entries then leave the
/// view no earlier than Eiger-NOC2's would (the view drops them oldest
/// first, in this order, once every partition's safe time passed them).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Latest {
    own: Own,
    flavor: Flavor,
}

impl Ord for Latest {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        debug_assert_eq!(self.flavor, other.flavor, "one client runs one protocol");
        match self.flavor {
            Flavor::Noc2 => self.own.cmp(&other.own),
            Flavor::Port => (self.own.txn, self.own.t_own).cmp(&(other.own.txn, other.own.t_own)),
        }
    }
}

impl PartialOrd for Latest {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Local for Latest {
    fn ts(&self) -> Ts {
        self.own.t_own
    }
}

/// A write prepared everywhere whose `Record::Local` is not durable yet.
struct Answer {
    lsn: Lsn,
    request: RequestId,
    ops: usize,
    /// Phases the write waited for (Eiger-NOC2 one, Eiger-PORT two).
    phases: u64,
}

pub struct Client {
    topo: Arc<Topology>,
    index: u32,
    cfg: Config,
    ids: TsSource,
    /// Lines 2-4: `last` and `latestWrite`.
    view: View<Latest>,
    /// The largest stamp this client has seen (safe times and its own
    /// commit stamps): its writes are stamped above it.
    seen: Option<Ts>,
    reads: ViewReads<Get>,
    writes: BTreeMap<Ts, WriteTxn>,
    waiting: VecDeque<(RequestId, Program)>,
    answers: VecDeque<Answer>,
    /// After a restart: the partitions not heard from yet.
    syncing: BTreeSet<ShardId>,
    refreshed_ns: Option<u64>,
}

impl Client {
    pub fn new(topo: Arc<Topology>, index: u32, cfg: Config) -> Client {
        let shards = topo.shards as usize;
        let reads = ViewReads::new(Arc::clone(&topo), cfg.common);
        Client {
            topo,
            index,
            ids: TsSource::start(index, [], cfg.common.reserve_ahead_us),
            view: View::with_entries(shards, cfg.lsv_max),
            seen: None,
            cfg,
            reads,
            writes: BTreeMap::new(),
            waiting: VecDeque::new(),
            answers: VecDeque::new(),
            syncing: BTreeSet::new(),
            refreshed_ns: None,
        }
    }

    /// `latestWrite[key]`: the client's newest own write of `key` it
    /// knows committed (or, Eiger-NOC2, fully prepared), if it keeps one.
    pub fn latest_write(&self, key: Key) -> Option<Own> {
        self.view.lsv(key).map(|l| l.own)
    }

    fn latest(&self, own: Own) -> Latest {
        Latest { own, flavor: self.cfg.flavor }
    }

    fn reserve(&mut self, ctx: &mut ClientCtx<'_>) {
        let clock_us = ctx.clock_ns() / 1_000;
        self.ids.reserve(ctx, clock_us, |upto_us| Record::Reserved { upto_us });
    }

    fn start(&mut self, ctx: &mut ClientCtx<'_>, request: RequestId, program: Program) {
        let Some(shape) = shape(&program) else {
            return ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
        };
        if program.is_empty() {
            return ctx.complete(request, Outcome::Committed { results: Vec::new() });
        }
        let id = match shape {
            Shape::Write if self.view.is_full(program.write_set().len()) => {
                ctx.count("writes_rejected", 1);
                return ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
            }
            Shape::Write => {
                self.reserve(ctx);
                self.ids.next(ctx.clock_ns() / 1_000)
            }
            Shape::Read => None,
        };
        let now_ns = ctx.monotonic_ns();
        match (shape, id) {
            _ if !self.syncing.is_empty() => self.wait(ctx, request, program),
            (Shape::Read, _) => self.get_all(ctx, request, program, now_ns),
            (Shape::Write, Some(txn)) => self.put_all(ctx, txn, request, program, now_ns),
            (Shape::Write, None) => self.wait(ctx, request, program),
        }
    }

    fn wait(&mut self, ctx: &mut ClientCtx<'_>, request: RequestId, program: Program) {
        if self.waiting.len() >= WAITING_MAX {
            return ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
        }
        self.waiting.push_back((request, program));
    }

    fn start_waiting(&mut self, ctx: &mut ClientCtx<'_>) {
        for (request, program) in std::mem::take(&mut self.waiting) {
            self.start(ctx, request, program);
        }
    }

    // ---- PUT_ALL ----

    /// Algorithm 5 lines 11-17: a new transaction id, and every
    /// participant's writes sent to it with the coordinator.
    fn put_all(&mut self, ctx: &mut ClientCtx<'_>, txn: Ts, request: RequestId, program: Program, now_ns: u64) {
        let Versions { participants, by_shard, .. } = versions(&self.topo, &program);
        // Spread the coordinators' work over the participants.
        let coordinator = participants[(txn.time_us() % participants.len() as u64) as usize];
        let prepares: BTreeMap<ShardId, Arc<Prepare>> = by_shard
            .into_iter()
            .map(|(shard, writes)| {
                let p = Prepare { txn, writes, coordinator, participants: participants.clone(), dep: self.seen };
                (shard, Arc::new(p))
            })
            .collect();
        let w = WriteTxn {
            request,
            ops: program.ops.len(),
            awaiting: prepares.keys().copied().collect(),
            prepares,
            // Eiger-PORT: the snapshot of this client's reads, where its
            // own later reads will order the write.
            snapshot: self.view.floor(),
            t_own: None,
            attempts: Attempts::first(now_ns),
        };
        self.send_prepares(ctx, &w);
        self.writes.insert(txn, w);
    }

    fn send_prepares(&self, ctx: &mut ClientCtx<'_>, w: &WriteTxn) {
        for shard in &w.awaiting {
            let prepare = Arc::clone(&w.prepares[shard]);
            let msg = match self.cfg.flavor {
                Flavor::Noc2 => Msg::Prepare(prepare),
                Flavor::Port => Msg::PrepareAt { prepare, snapshot: w.snapshot },
            };
            ctx.send(partition_of(&self.topo, *shard), msg);
        }
    }

    /// Lines 18-22 once every participant answered: `t_own` is the largest
    /// prepare stamp — the commit stamp the coordinator will choose
    /// (Figure 7) — and joins `latestWrite` of every key written; the
    /// write returns once that is durable. Eiger-PORT waits for the
    /// coordinator's `Committed` instead; a cohort's answer only stops its
    /// resends.
    fn on_prepared(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, txn: Ts, t_prep: Ts, lst: Option<Ts>) {
        let Some(shard) = self.learn(ctx, from, lst) else { return };
        let flavor = self.cfg.flavor;
        let Some(w) = self.writes.get_mut(&txn) else { return };
        if flavor == Flavor::Port && w.prepares.get(&shard).is_some_and(|p| p.coordinator == shard) {
            return;
        }
        if !w.awaiting.remove(&shard) {
            return;
        }
        w.t_own = w.t_own.max(Some(t_prep));
        if flavor == Flavor::Noc2 && w.awaiting.is_empty() {
            let t_own = w.t_own.expect("every participant answered");
            self.finish_write(ctx, txn, t_own, 1);
        }
    }

    /// Eiger-PORT: the coordinator committed at `t_com` (so every
    /// participant prepared): the write joins `latestWrite` at its commit
    /// stamp and returns once that is durable — after two phases.
    fn on_committed(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, txn: Ts, t_com: Ts, lst: Option<Ts>) {
        self.learn(ctx, from, lst);
        if self.writes.contains_key(&txn) {
            self.finish_write(ctx, txn, t_com, 2);
        }
    }

    /// The write is done on the client's path: its own entry (`t_own`, the
    /// commit stamp) is recorded, and the write returns once durable.
    fn finish_write(&mut self, ctx: &mut ClientCtx<'_>, txn: Ts, t_own: Ts, phases: u64) {
        let w = self.writes.remove(&txn).expect("present");
        let own = Own { t_own, txn };
        let keys: Vec<Key> = w.prepares.values().flat_map(|p| p.writes.iter().map(|(k, _)| *k)).collect();
        self.view.prepared(self.latest(own), keys.iter().copied());
        self.seen = self.seen.max(Some(own.t_own));
        let lsn = ctx.append(Record::Local { own, keys });
        self.answers.push_back(Answer { lsn, request: w.request, ops: w.ops, phases });
    }

    /// The writes whose local entry is durable return.
    fn answer_writes(&mut self, ctx: &mut ClientCtx<'_>, upto: Lsn) {
        while self.answers.front().is_some_and(|a| a.lsn <= upto) {
            let a = self.answers.pop_front().expect("present");
            ctx.count("writes", 1);
            ctx.count("write_phases_on_client_path", a.phases);
            ctx.complete(a.request, Outcome::Committed { results: vec![None; a.ops] });
        }
    }

    /// A participant refused the transaction for good (the termination of
    /// a transaction another participant never prepared): it commits
    /// nowhere.
    fn on_refused(&mut self, ctx: &mut ClientCtx<'_>, from: NodeId, txn: Ts, lst: Option<Ts>) {
        self.learn(ctx, from, lst);
        if let Some(w) = self.writes.remove(&txn) {
            ctx.count("writes_refused", 1);
            ctx.complete(w.request, Outcome::Aborted { reason: AbortReason::Conflict });
        }
    }

    // ---- GET_ALL: `DualViewClient` below; retries, refreshes, restart ----

    fn on_tick(&mut self, ctx: &mut ClientCtx<'_>) {
        ctx.set_timer(self.cfg.common.client_tick_ns, Timer::ClientTick);
        let now_ns = ctx.monotonic_ns();
        self.reserve(ctx);
        self.resend_reads(ctx, now_ns);
        self.resend_writes(ctx, now_ns);
        self.refresh(ctx, now_ns);
    }

    fn resend_writes(&mut self, ctx: &mut ClientCtx<'_>, now_ns: u64) {
        for (txn, again) in due(&mut self.writes, now_ns, &self.cfg.common) {
            match again {
                Due::GiveUp(w) => {
                    ctx.count("unknown_outcomes", 1);
                    ctx.complete(w.request, Outcome::Unknown);
                }
                Due::Again => {
                    ctx.count("write_resends", 1);
                    self.send_prepares(ctx, &self.writes[&txn]);
                }
            }
        }
    }

    /// Asks for safe times (`Sync`, carrying the largest stamp seen): after
    /// a restart, every partition not heard from yet, once per `retry_ms`;
    /// otherwise, every tick, the partitions whose safe time is behind that
    /// stamp — `min(last)` over every partition is each read's GSV, and a
    /// partition the client does not otherwise talk to, or an idle one,
    /// would hold it back for good.
    fn refresh(&mut self, ctx: &mut ClientCtx<'_>, now_ns: u64) {
        let ask: Vec<ShardId> = if !self.syncing.is_empty() {
            if self.refreshed_ns.is_some_and(|t| t + self.cfg.common.retry_ns > now_ns) {
                return;
            }
            self.refreshed_ns = Some(now_ns);
            self.syncing.iter().copied().collect()
        } else {
            let shards = (0..self.topo.shards).map(ShardId);
            shards.filter(|s| self.view.last(*s) < self.seen).collect()
        };
        for shard in ask {
            ctx.count("view_refreshes", 1);
            ctx.send(partition_of(&self.topo, shard), Msg::Sync { dep: self.seen });
        }
    }

    /// A restart: the id reservations and the local entries recorded; the
    /// version vector is asked for again before any request is served.
    fn restore(&mut self, ctx: &mut ClientCtx<'_>, durable: Vec<Record>) {
        let restarted = !durable.is_empty();
        let (mut reserved, mut local) = (Vec::new(), Vec::new());
        for record in durable {
            match record {
                Record::Reserved { upto_us } => reserved.push(upto_us),
                Record::ClientState(s) => {
                    reserved.push(s.reserved_us);
                    local.extend(s.local.iter().copied());
                }
                Record::Local { own, keys } => local.extend(keys.into_iter().map(|k| (k, own))),
                Record::Prepared { .. }
                | Record::Committed { .. }
                | Record::Aborted { .. }
                | Record::Clock { .. }
                | Record::Snapshot(_)
                | Record::Backup(_) => {
                    unreachable!("a partition's or backup's record in a client's log")
                }
            }
        }
        self.ids = TsSource::start(self.index, reserved, self.cfg.common.reserve_ahead_us);
        self.seen = local.iter().map(|(_, o)| o.t_own).max();
        let local: Vec<(Key, Latest)> = local.into_iter().map(|(k, own)| (k, self.latest(own))).collect();
        self.view.restore(None, local);
        if restarted {
            self.syncing = (0..self.topo.shards).map(ShardId).collect();
            let now_ns = ctx.monotonic_ns();
            self.refresh(ctx, now_ns);
        }
    }
}

/// The reads of `meridian_readatomic::common::reads` (RA-NOC2's), from
/// Eiger's view: `last` and `latestWrite`.
impl DualViewClient<Msg, Record> for Client {
    type Get = Get;

    type Local = Latest;

    fn view_reads(&mut self) -> &mut ViewReads<Get> {
        &mut self.reads
    }

    fn view(&mut self) -> &mut View<Latest> {
        &mut self.view
    }

    /// Lines 9, 18, after `last[svr] ← max(ts_svr, last[svr])`: the local
    /// entries every partition has passed go; after a restart, requests
    /// wait until every partition was heard from.
    fn learned(&mut self, ctx: &mut ClientCtx<'_>, shard: ShardId, lst: Option<Ts>) {
        self.seen = self.seen.max(lst);
        self.view.prune(self.view.floor());
        if self.syncing.remove(&shard) && self.syncing.is_empty() {
            self.start_waiting(ctx);
        }
    }

    /// Algorithm 5 lines 5-9: one round at `gsv = min(last)`, each key
    /// with its `latestWrite`.
    fn asks(&self, ctx: &mut ClientCtx<'_>, id: GetId, program: &Program) -> Vec<(ShardId, Get)> {
        let gsv = match self.cfg.read_beyond_gsv {
            // Line 6: the minimum over every partition, not only those
            // read — a causal past read elsewhere is below it too.
            false => self.view.floor(),
            // The counter-example: no view at all, the newest commits.
            true => Some(Ts(u64::MAX)),
        };
        let by_shard = by_shard(&self.topo, program.read_set());
        let mut asks = Vec::with_capacity(by_shard.len());
        for (shard, keys) in by_shard {
            let keys: Vec<KeyRead> = keys.into_iter().map(|key| KeyRead { key, own: self.latest_write(key) }).collect();
            for k in &keys {
                ctx.observe("read_request_metadata_bytes", encoded_len(&(gsv, k.own)) as u64);
                if k.own.is_some_and(|o| Some(o.t_own) > gsv) {
                    ctx.count("keys_read_from_lsv", 1);
                }
            }
            asks.push((shard, Get { id, gsv, keys }));
        }
        asks
    }

    fn get_message(get: Get) -> Msg {
        Msg::Get(get)
    }
}

impl<P: Protocol<Msg = Msg, Record = Record, Timer = Timer>> Process<P> for Client {
    fn on_start(&mut self, ctx: &mut Ctx<'_, P>, durable: Vec<Record>) {
        self.restore(ctx, durable);
        self.reserve(ctx);
        ctx.set_timer(self.cfg.common.client_tick_ns, Timer::ClientTick);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, P>, upto: Lsn) {
        self.answer_writes(ctx, upto);
        if self.ids.persisted(upto) {
            // Earlier records are folded into this one.
            let local = self.view.local().into_iter().map(|(k, l)| (k, l.own)).collect();
            let state = ClientState { reserved_us: self.ids.reserved_us(), local };
            ctx.compact(upto, Record::ClientState(Arc::new(state)));
            if self.syncing.is_empty() {
                self.start_waiting(ctx);
            }
        }
    }

    fn on_request(&mut self, ctx: &mut Ctx<'_, P>, request: RequestId, program: Program) {
        // The front end's per-key work: routing each key, assembling its
        // result (the cost model's `*_ns_per_key`).
        ctx.charge_keys(program.ops.len() as u64);
        self.start(ctx, request, program);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, P>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Prepared { txn, t_prep, lst } => self.on_prepared(ctx, from, txn, t_prep, lst),
            Msg::Refused { txn, lst } => self.on_refused(ctx, from, txn, lst),
            Msg::Got { id, values, lst } => self.on_got(ctx, from, id, values, lst),
            Msg::Gone { id, lst } => self.on_gone(ctx, from, id, lst),
            Msg::Synced { lst } => {
                self.learn(ctx, from, lst);
            }
            Msg::Committed { txn, t_com, lst } => self.on_committed(ctx, from, txn, t_com, lst),
            // Messages between partitions, or to them.
            Msg::Prepare(_)
            | Msg::PrepareAt { .. }
            | Msg::Vote { .. }
            | Msg::AskVote { .. }
            | Msg::NoVote { .. }
            | Msg::Commit { .. }
            | Msg::Abort { .. }
            | Msg::Get(_)
            | Msg::Sync { .. } => {}
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
    }

    fn check_invariants(&self) {
        self.ids.check_invariants();
        self.view.check_invariants();
        assert!(self.view.floor() <= self.seen || self.view.floor().is_none(), "the floor is a stamp seen");
        assert!(
            self.answers.iter().zip(self.answers.iter().skip(1)).all(|(a, b)| a.lsn < b.lsn),
            "answers in LSN order"
        );
        assert!(self.waiting.len() <= WAITING_MAX, "waiting requests within their bound");
        self.reads.check_invariants();
        for w in self.writes.values().take(meridian_core::process::CHECKED_MAX) {
            assert!(!w.awaiting.is_empty(), "a write in flight waits for a partition");
            assert!(w.attempts.sends() <= self.cfg.common.max_attempts, "sends within their bound");
            // Eiger-PORT orders the write at its snapshot for this
            // client's later reads: each of them must be at or past it.
            assert!(w.snapshot <= self.view.floor(), "a write's snapshot is at or below every later read's");
        }
    }
}
