//! The workload driver: clients placed per region that submit transaction
//! programs open-loop (Poisson arrivals at `rate_tps`, at most
//! `max_outstanding` in flight) or closed-loop (`sessions` loops per client,
//! each one transaction at a time, with think time), retry aborted ones as
//! new attempts, record the history and measure latency overall, per region
//! and per transaction type.
//!
//! Sessions: a history `process` is one session. A client owns its
//! sessions (they are never handed to another client) and runs one
//! transaction at a time on each; a session whose transaction ended with an
//! unknown outcome is retired (it may still be running), and the client
//! opens a new one. A client node may host many sessions (`sessions`, or as
//! many as open-loop arrivals keep in flight).
//!
//! Sans-IO like the protocols: it is told the time and the outcomes through
//! [`Clients`] and acts through [`ClientIo`], so the simulator and the real
//! runtime's bench drive it alike. Latency is measured from a request's
//! first attempt to its final outcome; throughput and latency count only
//! requests committed in `[warmup, end)`.

use crate::render::rolled_back;
use crate::{ClientInfo, Generator, TagSource, Txn, completion_mops, invoke_mops, txn_meta};
use hdrhistogram::Histogram;
use meridian_checker::{HistoryOp, OpType};
use meridian_core::{AbortReason, ClientIo, Clients, NodeId, Op, Outcome, Program, RegionId, RequestId, Rng, Topology};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

/// How clients pace their submissions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// Poisson arrivals at `rate_tps` per client; an arrival finding
    /// `max_outstanding` requests in flight is dropped (counted as throttled).
    Open { rate_tps: f64, max_outstanding: usize },
    /// `sessions` loops per client, each one request at a time, the next
    /// `think_ns` after the previous ends.
    Closed { think_ns: u64, sessions: u32 },
}

#[derive(Clone, Debug)]
pub struct DriverConfig {
    pub pacing: Pacing,
    /// Attempts after the first for a request the protocol aborted.
    pub max_retries: u32,
    pub retry_backoff_ns: u64,
    pub warmup_ns: u64,
    /// No request starts at or after `end_ns`.
    pub end_ns: u64,
    pub seed: u64,
    pub record_history: bool,
    /// Judge every committed read's freshness (for protocols below strict
    /// serializability, where reads may be stale).
    pub measure_freshness: bool,
}

/// One request: its program and type, its first attempt, its session.
#[derive(Clone, Debug)]
struct Request {
    program: Program,
    label: &'static str,
    first_invoke_ns: u64,
    /// When the current attempt was invoked.
    invoke_ns: u64,
    retries: u32,
    session: u64,
}

struct Client {
    node: NodeId,
    region: RegionId,
    rng: Rng,
    tags: TagSource,
    generator: Box<dyn Generator + Send>,
    next_request: u64,
    outstanding: BTreeMap<RequestId, Request>,
    /// Retries waiting for their time, by (due, sequence).
    retries: BTreeMap<(u64, u64), Request>,
    next_arrival_ns: u64,
    /// Closed loop: when each idle session loop starts its next request.
    loops_due: BinaryHeap<Reverse<u64>>,
    /// Sessions of this client with nothing in flight.
    idle_sessions: Vec<u64>,
    /// The earliest wake-up asked for and not yet delivered: asking again
    /// for a later time is then unnecessary (each wake-up reschedules).
    wake_pending_ns: Option<u64>,
    up: bool,
}

/// Counts and latency of one transaction type (committed in the window).
#[derive(Clone, Debug)]
pub struct TypeStats {
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    pub latency_us: Histogram<u64>,
    pub latency_us_by_region: BTreeMap<RegionId, Histogram<u64>>,
}

impl TypeStats {
    fn new() -> TypeStats {
        TypeStats {
            committed: 0,
            aborted: 0,
            unknown: 0,
            latency_us: new_histogram(),
            latency_us_by_region: BTreeMap::new(),
        }
    }
}

/// Counts and latency of a run (committed requests in the window only).
#[derive(Clone, Debug)]
pub struct DriverStats {
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    pub committed_in_window: u64,
    pub retries: u64,
    pub throttled: u64,
    /// Attempts sent, retries included.
    pub submitted: u64,
    /// New requests started (first attempts).
    pub started: u64,
    /// Latency in µs, all regions.
    pub latency_us: Histogram<u64>,
    pub latency_us_by_region: BTreeMap<RegionId, Histogram<u64>>,
    /// Per transaction type (as the workload names it).
    pub by_type: BTreeMap<&'static str, TypeStats>,
    /// Aborted attempts by reason (every attempt, retried or final).
    pub aborts_by_reason: BTreeMap<&'static str, u64>,
    /// Committed requests per second of true time (index = second).
    pub committed_per_s: Vec<u64>,
    /// Open loop: arrivals the Poisson schedule drew before the end (sent
    /// or throttled).
    pub arrivals: u64,
    /// Open loop: how late each arrival was sent after its scheduled time,
    /// in µs (0 in the simulator; on a real clock it shows a generator that
    /// cannot keep its schedule).
    pub schedule_lag_us: Histogram<u64>,
    /// Sessions opened (history processes).
    pub sessions: u64,
    /// Committed reads judged for freshness, and how many saw the newest
    /// version committed when they were invoked.
    pub reads_judged: u64,
    pub reads_up_to_date: u64,
    /// How long a stale read's version had been superseded, in µs.
    pub staleness_us: Histogram<u64>,
}

impl DriverStats {
    fn new() -> DriverStats {
        DriverStats {
            committed: 0,
            aborted: 0,
            unknown: 0,
            committed_in_window: 0,
            retries: 0,
            throttled: 0,
            submitted: 0,
            started: 0,
            latency_us: new_histogram(),
            latency_us_by_region: BTreeMap::new(),
            by_type: BTreeMap::new(),
            aborts_by_reason: BTreeMap::new(),
            committed_per_s: Vec::new(),
            arrivals: 0,
            schedule_lag_us: new_histogram(),
            sessions: 0,
            reads_judged: 0,
            reads_up_to_date: 0,
            staleness_us: new_histogram(),
        }
    }

    fn of_type(&mut self, label: &'static str) -> &mut TypeStats {
        self.by_type.entry(label).or_insert_with(TypeStats::new)
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

pub struct Driver {
    cfg: DriverConfig,
    clients: Vec<Client>,
    /// Client index by node index.
    by_node: Vec<Option<usize>>,
    history: Vec<HistoryOp>,
    next_session: u64,
    retry_seq: u64,
    labels: BTreeMap<&'static str, Arc<str>>,
    freshness: Freshness,
    stats: DriverStats,
}

/// Committed versions kept per key for judging freshness.
const VERSIONS_PER_KEY: usize = 64;

/// What clients saw committed, per key: the versions (tags) in the order
/// their writers completed, with completion times. A read is up to date
/// when it saw the newest version completed before it was invoked;
/// otherwise it lagged by the time since its version was superseded.
/// Completion times stand for commit times (a writer commits before its
/// client hears so), and only values clients wrote count: the measure
/// needs no protocol-side version stamp.
#[derive(Default)]
struct Freshness {
    versions: rustc_hash::FxHashMap<u64, std::collections::VecDeque<(u64, u64)>>,
}

impl Freshness {
    /// `Some(lag_ns)` for a stale read of `tag` (0: the initial state)
    /// invoked at `invoke_ns`; `None` when up to date.
    fn judge(&self, key: u64, tag: u64, invoke_ns: u64) -> Option<u64> {
        let versions = self.versions.get(&key)?;
        let before = versions.iter().rposition(|(t, _)| *t < invoke_ns)?;
        if versions[before].1 == tag {
            return None;
        }
        match versions.iter().position(|(_, v)| *v == tag) {
            // An older version: superseded when the next one completed.
            Some(i) if i < before => Some(invoke_ns - versions[i + 1].0),
            // A newer one (its writer completed after the read began).
            Some(_) => None,
            // The initial state, or a version too old to be kept.
            None if tag == 0 || versions.len() == VERSIONS_PER_KEY => Some(invoke_ns - versions[0].0),
            // A version whose writer has not completed yet.
            None => None,
        }
    }

    fn committed(&mut self, key: u64, tag: u64, at_ns: u64) {
        let versions = self.versions.entry(key).or_default();
        if versions.len() == VERSIONS_PER_KEY {
            versions.pop_front();
        }
        versions.push_back((at_ns, tag));
    }
}

impl Driver {
    /// A driver for every client of the topology; `generator` builds each
    /// client's workload generator.
    pub fn new(
        cfg: DriverConfig,
        topology: &Topology,
        mut generator: impl FnMut(&ClientInfo) -> Box<dyn Generator + Send>,
    ) -> Driver {
        match cfg.pacing {
            Pacing::Open { rate_tps, max_outstanding } => {
                assert!(rate_tps > 0.0 && max_outstanding > 0, "open-loop clients need a rate and room");
            }
            Pacing::Closed { sessions, .. } => assert!(sessions > 0, "closed-loop clients need a session"),
        }
        let mut by_node = vec![None; topology.nodes.len()];
        let clients = ClientInfo::all(topology)
            .into_iter()
            .enumerate()
            .map(|(i, info)| {
                by_node[info.node.index()] = Some(i);
                Client {
                    node: info.node,
                    region: info.region,
                    rng: Rng::derive(cfg.seed, 0x636c_0000 + i as u64),
                    tags: TagSource::new(i as u32),
                    generator: generator(&info),
                    next_request: 0,
                    outstanding: BTreeMap::new(),
                    retries: BTreeMap::new(),
                    next_arrival_ns: 0,
                    loops_due: BinaryHeap::new(),
                    idle_sessions: Vec::new(),
                    wake_pending_ns: None,
                    up: true,
                }
            })
            .collect();
        Driver {
            cfg,
            clients,
            by_node,
            history: Vec::new(),
            next_session: 0,
            retry_seq: 0,
            labels: BTreeMap::new(),
            freshness: Freshness::default(),
            stats: DriverStats::new(),
        }
    }

    pub fn stats(&self) -> &DriverStats {
        &self.stats
    }

    pub fn history(&self) -> &[HistoryOp] {
        &self.history
    }

    pub fn take_history(&mut self) -> Vec<HistoryOp> {
        std::mem::take(&mut self.history)
    }

    /// Requests still in flight.
    pub fn outstanding(&self) -> usize {
        self.clients.iter().map(|c| c.outstanding.len()).sum()
    }

    /// Ends the run at `now_ns`: every request still in flight has an
    /// unknown outcome.
    pub fn finish(&mut self, now_ns: u64) {
        for i in 0..self.clients.len() {
            let pending: Vec<Request> = std::mem::take(&mut self.clients[i].outstanding).into_values().collect();
            for r in pending {
                self.final_unknown(&r, now_ns);
            }
        }
    }

    /// Records one history line; `value` is only rendered when recording.
    fn record(&mut self, kind: OpType, r: &Request, time_ns: u64, value: impl FnOnce() -> Vec<meridian_checker::Mop>) {
        if self.cfg.record_history {
            let label = Arc::clone(self.labels.entry(r.label).or_insert_with(|| Arc::from(r.label)));
            let meta = txn_meta(&r.program, &label);
            let index = self.history.len() as u64;
            self.history.push(HistoryOp { index, kind, process: r.session, time_ns, value: value(), meta });
        }
    }

    /// An idle session of client `ci`, or a new one.
    fn take_session(&mut self, ci: usize) -> u64 {
        self.clients[ci].idle_sessions.pop().unwrap_or_else(|| {
            self.next_session += 1;
            self.stats.sessions += 1;
            self.next_session - 1
        })
    }

    /// Submits an attempt of `r` on its session.
    fn submit(&mut self, ci: usize, io: &mut dyn ClientIo, r: Request) {
        let now = io.now_ns();
        self.record(OpType::Invoke, &r, now, || invoke_mops(&r.program));
        let r = Request { invoke_ns: now, ..r };
        let c = &mut self.clients[ci];
        let request = RequestId(c.next_request);
        c.next_request += 1;
        io.submit(c.node, request, r.program.clone());
        c.outstanding.insert(request, r);
        self.stats.submitted += 1;
    }

    fn new_request(&mut self, ci: usize, io: &mut dyn ClientIo) {
        let c = &mut self.clients[ci];
        let Txn { program, label } = c.generator.next(&mut c.rng, &mut c.tags);
        let now = io.now_ns();
        self.stats.started += 1;
        let session = self.take_session(ci);
        self.submit(ci, io, Request { program, label, first_invoke_ns: now, invoke_ns: now, retries: 0, session });
    }

    /// Handles arrivals, loops and retries due now, then asks for the next
    /// wake-up.
    fn wake(&mut self, ci: usize, io: &mut dyn ClientIo) {
        let now = io.now_ns();
        if !self.clients[ci].up {
            return;
        }
        while let Some((&(due, seq), _)) = self.clients[ci].retries.first_key_value() {
            if due > now {
                break;
            }
            let r = self.clients[ci].retries.remove(&(due, seq)).expect("present");
            self.submit(ci, io, r);
        }
        match self.cfg.pacing {
            Pacing::Open { rate_tps, max_outstanding } => self.open_arrivals(ci, io, rate_tps, max_outstanding),
            Pacing::Closed { .. } => {
                while let Some(Reverse(due)) = self.clients[ci].loops_due.peek().copied() {
                    if due > now || now >= self.cfg.end_ns {
                        break;
                    }
                    self.clients[ci].loops_due.pop();
                    self.new_request(ci, io);
                }
            }
        }
        self.schedule_wake(ci, io);
    }

    /// Every arrival scheduled before the end is due once its time has
    /// come, even if the wake-up came late (a real clock): the loop then
    /// catches up, and each arrival advances the schedule, so no wake-up is
    /// ever asked for in the past.
    fn open_arrivals(&mut self, ci: usize, io: &mut dyn ClientIo, rate_tps: f64, max_outstanding: usize) {
        let now = io.now_ns();
        loop {
            let due_ns = self.clients[ci].next_arrival_ns;
            if due_ns > now || due_ns >= self.cfg.end_ns {
                break;
            }
            self.stats.arrivals += 1;
            let c = &self.clients[ci];
            if c.outstanding.len() < max_outstanding {
                self.stats.schedule_lag_us.saturating_record((now - due_ns) / 1_000);
                self.new_request(ci, io);
            } else {
                self.stats.throttled += 1;
            }
            let c = &mut self.clients[ci];
            let gap_ns = c.rng.exponential(1e9 / rate_tps).max(1.0) as u64;
            c.next_arrival_ns += gap_ns;
        }
    }

    fn schedule_wake(&mut self, ci: usize, io: &mut dyn ClientIo) {
        let c = &self.clients[ci];
        let mut next = c.retries.keys().next().map(|(due, _)| *due);
        let mut consider = |at: u64| next = Some(next.map_or(at, |n| n.min(at)));
        match self.cfg.pacing {
            Pacing::Open { .. } if c.next_arrival_ns < self.cfg.end_ns => consider(c.next_arrival_ns),
            Pacing::Closed { .. } => {
                if let Some(Reverse(due)) = c.loops_due.peek().filter(|d| d.0 < self.cfg.end_ns) {
                    consider(*due);
                }
            }
            Pacing::Open { .. } => {}
        }
        if let Some(at) = next {
            self.request_wake(ci, at, io);
        }
    }

    /// Asks for a wake-up at `at` unless an earlier one is pending.
    fn request_wake(&mut self, ci: usize, at: u64, io: &mut dyn ClientIo) {
        let c = &mut self.clients[ci];
        if c.wake_pending_ns.is_some_and(|w| w <= at) {
            return;
        }
        c.wake_pending_ns = Some(at);
        io.wake_at(c.node, at);
    }

    fn complete(&mut self, ci: usize, request: RequestId, outcome: Outcome, io: &mut dyn ClientIo) {
        let now = io.now_ns();
        let Some(r) = self.clients[ci].outstanding.remove(&request) else { return };
        match outcome {
            Outcome::Committed { results } if rolled_back(&r.program, &results) => {
                self.final_abort(ci, io, r, AbortReason::Rollback);
            }
            Outcome::Committed { results } => {
                if self.cfg.measure_freshness {
                    self.judge_freshness(&r, &results, now);
                }
                self.record(OpType::Ok, &r, now, || completion_mops(&r.program, &results));
                self.count_commit(ci, &r, now);
                self.clients[ci].idle_sessions.push(r.session);
                self.next_closed(ci, io);
            }
            Outcome::Aborted { reason } if reason == AbortReason::Rollback => self.final_abort(ci, io, r, reason),
            Outcome::Aborted { reason } => {
                if r.retries < self.cfg.max_retries && now < self.cfg.end_ns {
                    self.count_abort_reason(reason);
                    self.record(OpType::Fail, &r, now, || invoke_mops(&r.program));
                    self.stats.retries += 1;
                    let c = &mut self.clients[ci];
                    let backoff = self.cfg.retry_backoff_ns * u64::from(r.retries + 1);
                    let due = now + backoff + c.rng.below(self.cfg.retry_backoff_ns.max(1));
                    let program = retag(&r.program, &mut c.tags);
                    self.retry_seq += 1;
                    c.retries.insert((due, self.retry_seq), Request { program, retries: r.retries + 1, ..r });
                    self.schedule_wake(ci, io);
                } else {
                    self.final_abort(ci, io, r, reason);
                }
            }
            Outcome::Unknown => {
                self.final_unknown(&r, now);
                self.next_closed(ci, io);
            }
        }
    }

    /// The request ends aborted: its session is free again.
    fn final_abort(&mut self, ci: usize, io: &mut dyn ClientIo, r: Request, reason: AbortReason) {
        let now = io.now_ns();
        self.count_abort_reason(reason);
        self.record(OpType::Fail, &r, now, || invoke_mops(&r.program));
        self.stats.aborted += 1;
        self.stats.of_type(r.label).aborted += 1;
        self.clients[ci].idle_sessions.push(r.session);
        self.next_closed(ci, io);
    }

    /// The request ends without a known outcome: its session is retired
    /// (the transaction may still be running on it).
    fn final_unknown(&mut self, r: &Request, now: u64) {
        self.record(OpType::Info, r, now, || invoke_mops(&r.program));
        self.stats.unknown += 1;
        self.stats.of_type(r.label).unknown += 1;
    }

    /// Judges every read of a committed transaction, then records its
    /// writes as the newest versions of their keys.
    fn judge_freshness(&mut self, r: &Request, results: &[meridian_core::OpResult], now: u64) {
        use meridian_checker::{Mop, ReadValue};
        let mops = completion_mops(&r.program, results);
        for m in &mops {
            if let Mop::Read { key, value } = m {
                let tag = match value {
                    ReadValue::Nil => 0,
                    ReadValue::Register(t) => *t,
                    ReadValue::List(l) => l.last().copied().unwrap_or(0),
                };
                self.stats.reads_judged += 1;
                match self.freshness.judge(*key, tag, r.invoke_ns) {
                    None => self.stats.reads_up_to_date += 1,
                    Some(lag_ns) => self.stats.staleness_us.saturating_record(lag_ns / 1_000),
                }
            }
        }
        for m in mops {
            match m {
                Mop::Write { key, value } => self.freshness.committed(key, value, now),
                Mop::Append { key, element } => self.freshness.committed(key, element, now),
                Mop::Read { .. } => {}
            }
        }
    }

    fn count_abort_reason(&mut self, reason: AbortReason) {
        *self.stats.aborts_by_reason.entry(reason.name()).or_default() += 1;
    }

    fn count_commit(&mut self, ci: usize, r: &Request, now: u64) {
        self.stats.committed += 1;
        self.stats.of_type(r.label).committed += 1;
        let second = (now / 1_000_000_000) as usize;
        if self.stats.committed_per_s.len() <= second {
            self.stats.committed_per_s.resize(second + 1, 0);
        }
        self.stats.committed_per_s[second] += 1;
        if now < self.cfg.warmup_ns || now >= self.cfg.end_ns {
            return;
        }
        self.stats.committed_in_window += 1;
        let latency_us = ((now - r.first_invoke_ns) / 1_000).max(1);
        let region = self.clients[ci].region;
        self.stats.latency_us.saturating_record(latency_us);
        self.stats.latency_us_by_region.entry(region).or_insert_with(new_histogram).saturating_record(latency_us);
        let t = self.stats.of_type(r.label);
        t.latency_us.saturating_record(latency_us);
        t.latency_us_by_region.entry(region).or_insert_with(new_histogram).saturating_record(latency_us);
    }

    /// Closed loop: the session loop starts its next request after think
    /// time.
    fn next_closed(&mut self, ci: usize, io: &mut dyn ClientIo) {
        if let Pacing::Closed { think_ns, .. } = self.cfg.pacing {
            let at = io.now_ns() + think_ns;
            if at < self.cfg.end_ns && self.clients[ci].up {
                self.clients[ci].loops_due.push(Reverse(at));
                self.request_wake(ci, at, io);
            }
        }
    }
}

/// The same program with fresh tags: every attempt writes unique values.
pub fn retag(program: &Program, tags: &mut TagSource) -> Program {
    let ops = program
        .ops
        .iter()
        .map(|op| match op {
            Op::Read { key } => Op::Read { key: *key },
            Op::Write { key, value } => {
                let mut value = value.clone();
                value.tag = tags.next();
                Op::Write { key: *key, value }
            }
            Op::Increment { key, delta, .. } => Op::Increment { key: *key, delta: *delta, tag: tags.next() },
            Op::Append { key, .. } => Op::Append { key: *key, element: tags.next() },
        })
        .collect();
    let procedure = program.procedure.as_ref().map(|p| Arc::new(p.with_tags(tags.block(p.tag_block().1))));
    Program { ops, procedure, mode: program.mode }
}

impl Clients for Driver {
    fn start(&mut self, io: &mut dyn ClientIo) {
        let now = io.now_ns();
        for ci in 0..self.clients.len() {
            match self.cfg.pacing {
                Pacing::Open { rate_tps, .. } => {
                    let c = &mut self.clients[ci];
                    c.next_arrival_ns = now + c.rng.exponential(1e9 / rate_tps) as u64;
                }
                Pacing::Closed { sessions, .. } => {
                    // Stagger the first submissions by up to a millisecond.
                    let c = &mut self.clients[ci];
                    for _ in 0..sessions {
                        let at = now + c.rng.below(1_000_000);
                        c.loops_due.push(Reverse(at));
                    }
                }
            }
            self.schedule_wake(ci, io);
        }
    }

    fn on_wake(&mut self, client: NodeId, io: &mut dyn ClientIo) {
        let Some(ci) = self.by_node[client.index()] else { return };
        if self.clients[ci].wake_pending_ns.is_some_and(|w| w <= io.now_ns()) {
            self.clients[ci].wake_pending_ns = None;
        }
        self.wake(ci, io);
    }

    fn on_complete(&mut self, client: NodeId, request: RequestId, outcome: Outcome, io: &mut dyn ClientIo) {
        if let Some(ci) = self.by_node[client.index()] {
            self.complete(ci, request, outcome, io);
        }
    }

    fn on_node_down(&mut self, node: NodeId, io: &mut dyn ClientIo) {
        let Some(ci) = self.by_node[node.index()] else { return };
        self.clients[ci].up = false;
        let now = io.now_ns();
        let pending: Vec<Request> = std::mem::take(&mut self.clients[ci].outstanding).into_values().collect();
        for r in pending {
            self.final_unknown(&r, now);
        }
        // Retries waiting never started: their sessions are idle again.
        let waiting: Vec<Request> = std::mem::take(&mut self.clients[ci].retries).into_values().collect();
        let c = &mut self.clients[ci];
        c.idle_sessions.extend(waiting.into_iter().map(|r| r.session));
        c.loops_due.clear();
    }

    fn on_node_up(&mut self, node: NodeId, io: &mut dyn ClientIo) {
        let Some(ci) = self.by_node[node.index()] else { return };
        let now = io.now_ns();
        let c = &mut self.clients[ci];
        c.up = true;
        c.next_arrival_ns = c.next_arrival_ns.max(now);
        if let Pacing::Closed { sessions, .. } = self.cfg.pacing {
            c.loops_due.clear();
            for _ in 0..sessions {
                c.loops_due.push(Reverse(now));
            }
        }
        self.schedule_wake(ci, io);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::{ClusterSpec, Key};

    /// Records what the driver asks of its host.
    struct Host {
        now_ns: u64,
        submitted: u64,
        wakes: Vec<u64>,
    }

    impl ClientIo for Host {
        fn now_ns(&self) -> u64 {
            self.now_ns
        }
        fn submit(&mut self, _client: NodeId, _request: RequestId, _program: Program) {
            self.submitted += 1;
        }
        fn wake_at(&mut self, _client: NodeId, at_ns: u64) {
            self.wakes.push(at_ns);
        }
    }

    struct OneRead;
    impl Generator for OneRead {
        fn next(&mut self, _rng: &mut Rng, _tags: &mut TagSource) -> Txn {
            Txn::new(Program::new(vec![Op::Read { key: Key(1) }]), "read-only")
        }
    }

    fn one_client_driver(pacing: Pacing, end_ns: u64) -> (Driver, NodeId) {
        let spec = ClusterSpec::one_region(1, 1);
        let topology = Topology::build(&spec, &[]);
        let cfg = DriverConfig {
            pacing,
            max_retries: 0,
            retry_backoff_ns: 1_000_000,
            warmup_ns: 0,
            end_ns,
            seed: 3,
            record_history: false,
            measure_freshness: false,
        };
        let client = topology.clients()[0];
        (Driver::new(cfg, &topology, |_| Box::new(OneRead)), client)
    }

    /// On a real clock a wake-up comes late. The bench once hung when an
    /// arrival scheduled before the end was woken for after it: the driver
    /// asked again for the same past instant forever.
    #[test]
    fn an_open_loop_wake_up_that_comes_after_the_end_asks_for_nothing_more() {
        let end_ns = 1_000_000_000;
        let pacing = Pacing::Open { rate_tps: 1000.0, max_outstanding: 1_000_000 };
        let (mut driver, client) = one_client_driver(pacing, end_ns);
        let mut host = Host { now_ns: 0, submitted: 0, wakes: Vec::new() };
        driver.start(&mut host);
        // Run on schedule until the last wake-up before the end...
        while let Some(at) = host.wakes.pop() {
            if at + 2_000_000 >= end_ns {
                // ...and deliver that one 5 ms late, past the end.
                host.now_ns = end_ns + 5_000_000;
                driver.on_wake(client, &mut host);
                break;
            }
            host.now_ns = at;
            driver.on_wake(client, &mut host);
        }
        assert!(host.wakes.iter().all(|at| *at > host.now_ns), "asked for a wake-up in the past: {:?}", host.wakes);
        let before = host.submitted;
        driver.on_wake(client, &mut host);
        assert_eq!(host.submitted, before, "nothing starts after the end");
        assert!(host.wakes.iter().all(|at| *at > host.now_ns));
        let stats = driver.stats();
        assert_eq!(stats.arrivals, stats.started, "every arrival before the end was sent");
        assert!(stats.started > 900, "about a thousand arrivals in a second, got {}", stats.started);
    }

    /// A generator that falls behind catches up: every arrival due is sent
    /// at once, and how late it was is measured.
    #[test]
    fn a_late_open_loop_generator_sends_what_was_due_and_measures_its_lag() {
        let pacing = Pacing::Open { rate_tps: 1000.0, max_outstanding: 1_000_000 };
        let (mut driver, client) = one_client_driver(pacing, 10_000_000_000);
        let mut host = Host { now_ns: 0, submitted: 0, wakes: Vec::new() };
        driver.start(&mut host);
        host.now_ns = 100_000_000; // 100 ms of arrivals overdue
        driver.on_wake(client, &mut host);
        let stats = driver.stats();
        assert!((60..=140).contains(&stats.started), "about 100 arrivals were due, {} sent", stats.started);
        assert!(stats.schedule_lag_us.max() >= 50_000, "the earliest was sent tens of ms late");
        assert!(host.wakes.last().is_some_and(|at| *at > host.now_ns), "the next wake-up is in the future");
    }

    #[test]
    fn a_read_of_a_superseded_version_lags_by_the_time_since_it_was_superseded() {
        let mut f = Freshness::default();
        f.committed(7, 100, 10_000_000);
        f.committed(7, 200, 20_000_000);
        assert_eq!(f.judge(7, 200, 30_000_000), None, "the newest version is up to date");
        assert_eq!(f.judge(7, 100, 30_000_000), Some(10_000_000), "superseded 10 ms before the read began");
        assert_eq!(f.judge(7, 100, 15_000_000), None, "the newest when that read began");
        assert_eq!(f.judge(7, 0, 30_000_000), Some(20_000_000), "the initial state, superseded at the first write");
        assert_eq!(f.judge(7, 300, 30_000_000), None, "a version whose writer completes later");
        assert_eq!(f.judge(8, 0, 30_000_000), None, "a key nobody wrote");
    }
}
