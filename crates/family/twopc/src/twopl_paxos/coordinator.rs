//! The coordinator of `2pl-paxos`, co-located with each client.
//!
//! A request runs as attempts. Each attempt is interactive two-phase
//! locking with two-phase commit: execute (every participant leader locks
//! the keys of its piece and returns what it read; a procedure that asks
//! for more keys executes again, round after round, until it is done),
//! compute the writes,
//! prepare (each leader makes a prepare record durable through its Paxos
//! group and votes), then decide. The client learns the outcome as soon as
//! the votes decide it; the decision is then sent until acknowledged. An
//! attempt wounded by an older transaction is restarted with the same
//! priority (so it eventually becomes the oldest and cannot starve), at most
//! `max_attempts` times.
//!
//! Its participants are shards, each served by its leader as last heard
//! (redirects and `WhoLeads` find a new one), or with `lock_at = "home"`
//! home partitions, each served by its home replica, always the same one: a
//! home replica that is down or still recovering is waited for (an
//! executing attempt restarts after its backoff; prepares and decisions are
//! sent again at their deadlines).

use super::messages::{self, Executed, LockRead, Msg, Prepare, Priority, Record, Refusal, Timer};
use super::participant::{LockAt, Participant, Participants, home_replica};
use super::{Config, TwoPlPaxos};
use meridian_core::Process;
use meridian_core::process::CHECKED_MAX;
use meridian_core::{
    AbortReason, Ctx, Execution, Key, KeyLayout, Lsn, NodeId, OpResult, Outcome, Program, RequestId, ShardId, Topology,
    TxnId, Value,
};
use meridian_mechanisms::interactive::{
    Attempts, Execute, Progress, Retry, RetryPolicy, RoundKey, round_keys, writes_by_participant,
};
use meridian_mechanisms::locks::LockMode;
use meridian_mechanisms::seq_window::SeqWindow;
use meridian_mechanisms::small_map::SmallMap;
use meridian_mechanisms::twopc::{Decision, Tally, TxnStatus};
use meridian_mechanisms::txnids::EpochGate;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug)]
struct Request {
    program: Program,
    /// Attempts so far, with the wound-wait priority every one keeps.
    attempts: Attempts<Priority>,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Phase {
    Executing,
    Preparing,
    /// Decided; sending the decision until every participant acknowledges.
    Deciding(Decision),
}

#[derive(Debug)]
struct Attempt {
    request: RequestId,
    phase: Phase,
    /// The execute rounds and what they read.
    exec: Execute<Participant>,
    /// Every participant that locked something for this attempt, sorted
    /// (a few: a vector costs less than a B-tree here, and iterates alike).
    participants: Participants,
    writes: SmallMap<Participant, Vec<(Key, Value)>>,
    /// What the execution that computed `writes` returns to the client on
    /// commit.
    results: Vec<OpResult>,
    tally: Option<Tally<Participant>>,
    /// Participants yet to acknowledge the decision, sorted.
    unacked: Participants,
    /// The coordinator tick at which the current phase times out.
    deadline_tick: u64,
    /// Prepare re-sends so far (bounded by the decision timeout).
    prepare_rounds: u32,
    decide_rounds: u32,
    redirects: u32,
}

pub struct Coordinator {
    cfg: Config,
    /// Where keys live: their shards and homes.
    layout: KeyLayout,
    /// Each shard's leader as last heard (`lock_at = "leader"`).
    leader_hint: Vec<NodeId>,
    /// Transaction ids, and the requests that arrived before their epoch
    /// was durable.
    ids: EpochGate<(RequestId, Program)>,
    /// Looked up by id, never iterated.
    requests: FxHashMap<RequestId, Request>,
    /// Iterated in id order (deadlines, the watermark), as an ordered map is.
    attempts: SeqWindow<Attempt>,
    /// Attempts given up on before every participant acknowledged a
    /// decision, with the participants not known to have decided: they hold the
    /// watermark (a participant may still be in doubt and ask the others)
    /// until every one of them answers a query with a decision.
    abandoned: BTreeMap<TxnId, BTreeSet<Participant>>,
    ticks: u64,
    tick_armed: bool,
    /// The timer that queries abandoned attempts runs (while any is left).
    query_armed: bool,
}

/// Abandoned attempts remembered; past it the oldest is dropped (and
/// counted), so a coordinator partitioned for good stays bounded.
const ABANDONED_MAX: usize = 10_000;
/// Coordinator tick periods between queries about abandoned attempts.
const ABANDONED_QUERY_TICKS: u64 = 20;

impl Coordinator {
    pub fn new(me: NodeId, leaders: Vec<NodeId>, layout: KeyLayout, cfg: Config) -> Coordinator {
        assert_eq!(leaders.len(), layout.shards as usize, "a leader per shard");
        let attempts = SeqWindow::new(me, cfg.attempts_span_max);
        Coordinator {
            cfg,
            layout,
            leader_hint: leaders,
            ids: EpochGate::new(me),
            requests: FxHashMap::default(),
            attempts,
            abandoned: BTreeMap::new(),
            ticks: 0,
            tick_armed: false,
            query_armed: false,
        }
    }

    /// Requests in progress (for tests and bounds).
    pub fn in_flight(&self) -> usize {
        self.requests.len()
    }

    fn start_attempt(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, request: RequestId) {
        let txn = self.ids.next_id();
        if !self.attempts.has_room_for(txn) {
            // An attempt `attempts_span_max` ids older still runs (timeouts
            // far past their defaults): refuse new work rather than grow.
            self.requests.remove(&request).expect("attempts belong to live requests");
            ctx.count("attempts_refused", 1);
            return ctx.complete(request, Outcome::Aborted { reason: AbortReason::Rejected });
        }
        let req = self.requests.get_mut(&request).expect("attempts belong to live requests");
        req.attempts.begin(|| Priority { start_ns: ctx.clock_ns(), first: txn });
        let keys = lock_reads(round_keys(&req.program, &BTreeMap::new(), true));
        if keys.is_empty() {
            // A procedure that finishes without reading (a rollback known
            // from its input): nothing to lock, nothing to write.
            let req = self.requests.remove(&request).expect("a live request");
            let results = req.program.execute(|_| None).results;
            return ctx.complete(request, Outcome::Committed { results });
        }
        let deadline_tick = self.deadline(ctx, self.cfg.execute_timeout_ns);
        let attempt = Attempt {
            request,
            phase: Phase::Executing,
            exec: Execute::start([]),
            participants: Participants::new(),
            writes: SmallMap::new(),
            results: Vec::new(),
            tally: None,
            unacked: Participants::new(),
            deadline_tick,
            prepare_rounds: 0,
            decide_rounds: 0,
            redirects: 0,
        };
        self.attempts.insert(txn, attempt);
        self.send_round(ctx, txn, keys, true);
    }

    /// The participant that locks `key`.
    fn participant(&self, key: Key) -> Participant {
        self.cfg.lock_at.participant(&self.layout, key)
    }

    /// The replica `part`'s requests go to: its shard's leader as last
    /// heard, or its home replica.
    fn server(&self, topology: &Topology, part: Participant) -> NodeId {
        match self.cfg.lock_at {
            LockAt::Leader => self.leader_hint[part.shard(self.layout.shards).index()],
            LockAt::Home => home_replica(topology, part),
        }
    }

    /// Sends the attempt's first or next round: each participant's keys to
    /// its server.
    fn send_round(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId, keys: Vec<LockRead>, first: bool) {
        let mut by_part: SmallMap<Participant, Vec<LockRead>> = SmallMap::new();
        for k in keys {
            by_part.get_or_insert_with(self.participant(k.key), Vec::new).push(k);
        }
        let a = self.attempts.get_mut(&txn).expect("a live attempt");
        let prio = self.requests[&a.request].attempts.priority().expect("set at the first attempt");
        let parts = by_part.keys().copied();
        let round = if first {
            a.exec = Execute::start(parts);
            0
        } else {
            a.exec.next_round(parts)
        };
        for part in by_part.keys() {
            if let Err(i) = a.participants.binary_search(part) {
                a.participants.insert(i, *part);
            }
        }
        for (part, keys) in by_part {
            let to = self.server(ctx.topology(), part);
            ctx.send(to, Msg::Execute(messages::Execute { txn, prio, round, keys }));
        }
    }

    fn on_executed(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, from: NodeId, m: Executed) {
        let Executed { txn, part, round, reads } = m;
        let Some(a) = self.attempts.get_mut(&txn).filter(|a| a.phase == Phase::Executing) else {
            // A late or duplicated execution of an attempt that is over or
            // aborting holds locks there: release them.
            let aborting = self.attempts.get(&txn).is_none_or(|a| a.phase == Phase::Deciding(Decision::Abort));
            if aborting {
                ctx.send(from, self.decide_msg(txn, Decision::Abort));
            }
            return;
        };
        let req = &self.requests[&a.request];
        let exec: Execution = match a.exec.on_reads(&req.program, part, round, reads) {
            Progress::Duplicate | Progress::Waiting => return,
            Progress::TooManyRounds => return self.abort_attempt(ctx, txn, AbortReason::Rejected),
            Progress::NextRound(more) => return self.send_round(ctx, txn, lock_reads(more), false),
            // Every lock is held: the writes are computed from what was read.
            Progress::Done(exec) => exec,
        };
        // Writes on a participant nothing was read from: its server takes
        // their locks in one more round (elsewhere the prepare takes the
        // locks of keys written without being read).
        let (lock_at, layout) = (self.cfg.lock_at, &self.layout);
        let elsewhere: Vec<LockRead> = exec
            .writes
            .iter()
            .filter(|(k, _)| a.participants.binary_search(&lock_at.participant(layout, *k)).is_err())
            .map(|(k, _)| LockRead { key: *k, mode: LockMode::Exclusive, read: false })
            .collect();
        if !elsewhere.is_empty() {
            return self.send_round(ctx, txn, elsewhere, false);
        }
        debug_assert!(a.writes.is_empty(), "writes are computed once, when every lock is held");
        a.writes = writes_by_participant(&exec, |k| lock_at.participant(layout, k));
        a.results = exec.results;
        let participants = a.participants.clone();
        a.phase = Phase::Preparing;
        a.tally = Some(Tally::new(&participants));
        self.reset_deadline(ctx, txn, self.cfg.prepare_retry_ns);
        for part in participants {
            let to = self.server(ctx.topology(), part);
            self.send_prepare(ctx, txn, part, to);
        }
    }

    fn send_prepare(&self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId, part: Participant, to: NodeId) {
        let a = &self.attempts[&txn];
        let participants = a.participants.clone();
        let writes = a.writes.get(&part).cloned().unwrap_or_default();
        ctx.send(to, Msg::Prepare(Prepare { txn, participants, writes }));
    }

    fn on_vote(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId, part: Participant, yes: bool) {
        let Some(a) = self.attempts.get_mut(&txn).filter(|a| a.phase == Phase::Preparing) else {
            return;
        };
        let tally = a.tally.as_mut().expect("preparing attempts tally votes");
        let decided = if yes { tally.yes(part) } else { tally.no(part) };
        match decided {
            Some(Decision::Commit) => self.commit(ctx, txn),
            Some(Decision::Abort) => self.abort_attempt(ctx, txn, AbortReason::Conflict),
            None => {}
        }
    }

    /// Every participant prepared: the transaction is committed.
    fn commit(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId) {
        let a = self.attempts.get_mut(&txn).expect("committing a live attempt");
        let req = self.requests.remove(&a.request).expect("a live request");
        debug_assert_eq!(a.results, req.program.execute(|k| a.exec.reads().get(&k).cloned().flatten()).results);
        ctx.complete(a.request, Outcome::Committed { results: std::mem::take(&mut a.results) });
        if req.attempts.count() > 1 {
            ctx.count("retries", u64::from(req.attempts.count() - 1));
        }
        let participants = a.participants.clone();
        self.decide(ctx, txn, Decision::Commit, participants);
    }

    /// Sends the decision to every participant until acknowledged.
    fn decide(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId, decision: Decision, parts: Participants) {
        let a = self.attempts.get_mut(&txn).expect("deciding a live attempt");
        a.phase = Phase::Deciding(decision);
        debug_assert!(parts.is_sorted(), "participants are kept sorted");
        a.unacked.clone_from(&parts);
        for part in parts {
            let to = self.server(ctx.topology(), part);
            ctx.send(to, self.decide_msg(txn, decision));
        }
        self.reset_deadline(ctx, txn, self.cfg.decide_retry_ns);
    }

    /// Gives up this attempt: abort it everywhere, then restart the request
    /// or report the abort.
    fn abort_attempt(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId, reason: AbortReason) {
        let request = self.attempts[&txn].request;
        let parts = self.attempts[&txn].participants.clone();
        self.decide(ctx, txn, Decision::Abort, parts);
        let policy = RetryPolicy { max_attempts: self.cfg.max_attempts, backoff_ns: self.cfg.retry_backoff_ns };
        let jitter = |ctx: &mut Ctx<'_, TwoPlPaxos>| ctx.rng().below(policy.backoff_ns.max(1));
        match self.requests[&request].attempts.after_abort(&policy, || jitter(ctx)) {
            Retry::After { backoff_ns } => {
                ctx.set_timer(backoff_ns, Timer::Restart(request));
            }
            Retry::GiveUp => {
                let req = self.requests.remove(&request).expect("a live request");
                ctx.count("retries", u64::from(req.attempts.count() - 1));
                ctx.complete(request, Outcome::Aborted { reason });
            }
        }
    }

    fn on_decided(&mut self, txn: TxnId, part: Participant) {
        let Some(a) = self.attempts.get_mut(&txn) else {
            return;
        };
        if let Ok(i) = a.unacked.binary_search(&part) {
            a.unacked.remove(i);
        }
        if matches!(a.phase, Phase::Deciding(_)) && a.unacked.is_empty() {
            self.attempts.remove(&txn);
        }
    }

    fn on_refused(
        &mut self,
        ctx: &mut Ctx<'_, TwoPlPaxos>,
        from: NodeId,
        txn: TxnId,
        part: Participant,
        reason: Refusal,
    ) {
        let Some(a) = self.attempts.get_mut(&txn) else {
            return;
        };
        match (reason, self.cfg.lock_at) {
            (Refusal::Wounded, _) => {
                if matches!(a.phase, Phase::Executing | Phase::Preparing) {
                    self.abort_attempt(ctx, txn, AbortReason::Conflict);
                }
            }
            (Refusal::NotLeader { hint }, LockAt::Leader) => self.redirect(ctx, from, txn, part, hint),
            // A home replica still recovering its log: it alone serves its
            // granules. Locks taken elsewhere would wait for it, so an
            // executing attempt starts again after its backoff; prepares and
            // decisions go again at their deadlines.
            (Refusal::NotLeader { .. }, LockAt::Home) => {
                if a.phase == Phase::Executing {
                    self.abort_attempt(ctx, txn, AbortReason::Timeout);
                }
            }
        }
    }

    /// `from` does not lead `part`'s shard: follow its hint (or ask every
    /// replica).
    fn redirect(
        &mut self,
        ctx: &mut Ctx<'_, TwoPlPaxos>,
        from: NodeId,
        txn: TxnId,
        part: Participant,
        hint: Option<NodeId>,
    ) {
        let shard = part.shard(self.layout.shards);
        let next = match hint {
            Some(h) if h != from => h,
            // No idea, or it names itself without leading: ask them all.
            _ => {
                self.find_leader(ctx, shard);
                self.leader_hint[shard.index()]
            }
        };
        self.leader_hint[shard.index()] = next;
        let Some(a) = self.attempts.get_mut(&txn) else { return };
        a.redirects += 1;
        if a.redirects > self.cfg.max_redirects {
            return; // the phase's deadline takes over
        }
        match a.phase {
            // Locks taken elsewhere would be held by a leader that may
            // no longer lead: restart the attempt cleanly.
            Phase::Executing => self.abort_attempt(ctx, txn, AbortReason::Timeout),
            Phase::Preparing => self.send_prepare(ctx, txn, part, next),
            Phase::Deciding(decision) => ctx.send(next, self.decide_msg(txn, decision)),
        }
    }

    /// The tick number `after_ns` from now; arms the tick if it is idle.
    /// One periodic tick per coordinator, rather than timers per attempt,
    /// keeps timeouts cheap however many transactions are in flight.
    fn deadline(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, after_ns: u64) -> u64 {
        if !self.tick_armed {
            self.tick_armed = true;
            ctx.set_timer(self.cfg.coordinator_tick_ns, Timer::Tick);
        }
        self.ticks + after_ns.div_ceil(self.cfg.coordinator_tick_ns).max(1)
    }

    fn reset_deadline(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId, after_ns: u64) {
        let tick = self.deadline(ctx, after_ns);
        self.attempts.get_mut(&txn).expect("deadlines belong to live attempts").deadline_tick = tick;
    }

    fn on_tick(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>) {
        self.ticks += 1;
        let due: Vec<(TxnId, Phase)> =
            self.attempts.iter().filter(|(_, a)| a.deadline_tick <= self.ticks).map(|(t, a)| (t, a.phase)).collect();
        for (txn, phase) in due {
            match phase {
                Phase::Executing => self.execute_timed_out(ctx, txn),
                Phase::Preparing => self.retry_prepare(ctx, txn),
                Phase::Deciding(_) => self.retry_decide(ctx, txn),
            }
        }
        self.tick_armed = !self.attempts.is_empty();
        if self.tick_armed {
            ctx.set_timer(self.cfg.coordinator_tick_ns, Timer::Tick);
        }
    }

    fn execute_timed_out(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId) {
        let a = &self.attempts[&txn];
        // Shards that did not answer may have lost their leader, or may just
        // be slow (lock waits): ask who leads rather than guess. (A home
        // partition has one server: nobody to ask.)
        let silent: Vec<Participant> = a.exec.waiting().collect();
        if self.cfg.lock_at == LockAt::Leader {
            for part in silent {
                self.find_leader(ctx, part.shard(self.layout.shards));
            }
        }
        self.abort_attempt(ctx, txn, AbortReason::Timeout);
    }

    /// Asks every replica of a shard who leads; the leader answers for
    /// itself (see `Msg::Leader`).
    fn find_leader(&self, ctx: &mut Ctx<'_, TwoPlPaxos>, shard: ShardId) {
        for replica in ctx.topology().replicas(shard).to_vec() {
            ctx.send(replica, Msg::WhoLeads { shard });
        }
    }

    /// Votes are missing: ask every server of the silent participants (the
    /// new leader answers), until the decision timeout says we cannot know.
    fn retry_prepare(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId) {
        let Some(a) = self.attempts.get_mut(&txn).filter(|a| a.phase == Phase::Preparing) else {
            return;
        };
        a.prepare_rounds += 1;
        if u64::from(a.prepare_rounds) * self.cfg.prepare_retry_ns >= self.cfg.decision_timeout_ns {
            // The participants will settle it among themselves.
            let a = self.attempts.remove(&txn).expect("checked");
            self.abandon(ctx, txn, a.participants.iter().copied().collect());
            self.requests.remove(&a.request);
            ctx.count("unknown_outcomes", 1);
            return ctx.complete(a.request, Outcome::Unknown);
        }
        let pending: Vec<Participant> = a.tally.as_ref().expect("preparing").pending().collect();
        self.reset_deadline(ctx, txn, self.cfg.prepare_retry_ns);
        for part in pending {
            for replica in self.cfg.lock_at.servers(ctx.topology(), part) {
                self.send_prepare(ctx, txn, part, replica);
            }
        }
    }

    fn retry_decide(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId) {
        let Some(a) = self.attempts.get_mut(&txn) else {
            return;
        };
        let Phase::Deciding(decision) = a.phase else {
            return;
        };
        a.decide_rounds += 1;
        if a.decide_rounds > self.cfg.max_decide_rounds {
            // Participants still in doubt resolve it by termination.
            let a = self.attempts.remove(&txn).expect("checked");
            self.abandon(ctx, txn, a.unacked.into_iter().collect());
            return;
        }
        let unacked = a.unacked.clone();
        self.reset_deadline(ctx, txn, self.cfg.decide_retry_ns);
        for part in unacked {
            for replica in self.cfg.lock_at.servers(ctx.topology(), part) {
                ctx.send(replica, self.decide_msg(txn, decision));
            }
        }
    }

    // ---- the watermark (outcomes retired at the participants) ----

    /// Every transaction this coordinator started in its epoch below this
    /// number is decided at every participant: neither live nor abandoned.
    fn settled_below(&self) -> u64 {
        let live = self.attempts.first_key().map(|t| t.seq);
        let abandoned = self.abandoned.keys().next().map(|t| t.seq);
        let floor = [live, abandoned].into_iter().flatten().min();
        floor.map_or(self.ids.next_seq(), |s| s.min(self.ids.next_seq()))
    }

    fn decide_msg(&self, txn: TxnId, decision: Decision) -> Msg {
        Msg::Decide { txn, decision, settled_below: self.settled_below() }
    }

    fn abandon(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, txn: TxnId, parts: BTreeSet<Participant>) {
        if parts.is_empty() {
            return;
        }
        self.abandoned.insert(txn, parts);
        if self.abandoned.len() > ABANDONED_MAX {
            self.abandoned.pop_first();
            ctx.count("abandoned_dropped", 1);
        }
        // Queried periodically while any is left.
        if !self.query_armed {
            self.query_armed = true;
            ctx.set_timer(self.query_abandoned_ns(), Timer::QueryAbandoned);
        }
    }

    fn query_abandoned_ns(&self) -> u64 {
        ABANDONED_QUERY_TICKS * self.cfg.coordinator_tick_ns
    }

    /// Asks every server of the participants not known to have decided
    /// each abandoned attempt; a leader that never saw it aborts it first
    /// (see `recovery.rs`), so every participant eventually answers with a
    /// decision.
    fn query_abandoned(&self, ctx: &mut Ctx<'_, TwoPlPaxos>) {
        for (txn, parts) in &self.abandoned {
            for part in parts {
                for replica in self.cfg.lock_at.servers(ctx.topology(), *part) {
                    ctx.send(replica, Msg::Query { txn: *txn });
                }
            }
        }
    }

    fn on_status(&mut self, txn: TxnId, part: Participant, status: TxnStatus) {
        let Some(parts) = self.abandoned.get_mut(&txn) else { return };
        if status != TxnStatus::Prepared {
            parts.remove(&part);
        }
        if parts.is_empty() {
            self.abandoned.remove(&txn);
        }
    }
}

/// A round's keys as lock requests: written keys exclusively.
fn lock_reads(keys: Vec<RoundKey>) -> Vec<LockRead> {
    let mode = |k: &RoundKey| if k.write { LockMode::Exclusive } else { LockMode::Shared };
    keys.iter().map(|k| LockRead { key: k.key, mode: mode(k), read: k.read }).collect()
}

impl Process<TwoPlPaxos> for Coordinator {
    /// Between events: requests wait only until the epoch is durable
    /// (`EpochGate`); an attempt still executing or preparing serves a request
    /// in progress; a decision is owed only to participants, in bounded
    /// rounds; the abandoned attempts stay within their bound.
    fn check_invariants(&self) {
        self.ids.check_invariants();
        assert!(self.abandoned.len() <= ABANDONED_MAX, "abandoned attempts past their bound");
        for (txn, a) in self.attempts.iter().take(CHECKED_MAX) {
            let distinct_sorted = |parts: &[Participant]| parts.windows(2).all(|w| w[0] < w[1]);
            assert!(distinct_sorted(&a.participants), "{txn:?}'s participants are not a sorted set");
            assert!(distinct_sorted(&a.unacked), "{txn:?}'s unacknowledged participants are not a sorted set");
            match a.phase {
                Phase::Executing | Phase::Preparing => {
                    assert!(self.requests.contains_key(&a.request), "{txn:?} runs for no request");
                }
                Phase::Deciding(_) => {
                    assert!(
                        a.unacked.iter().all(|p| a.participants.binary_search(p).is_ok()),
                        "{txn:?} owes a decision to a non-participant"
                    );
                    assert!(a.decide_rounds <= self.cfg.max_decide_rounds, "{txn:?} decided past its rounds");
                }
            }
        }
    }

    /// See `Process::state_sizes`.
    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("requests", self.requests.len());
        out("attempts", self.attempts.len());
        out("abandoned", self.abandoned.len());
        out("queued", self.ids.held());
    }

    /// A (re)start: a new durable epoch keeps transaction ids unique.
    fn on_start(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, durable: Vec<Record>) {
        let epochs = durable.into_iter().filter_map(|r| match r {
            Record::Epoch(e) => Some(e),
            Record::Paxos(_) => None,
        });
        let epoch = self.ids.start(epochs);
        let lsn = ctx.append(Record::Epoch(epoch));
        self.ids.recorded_at(lsn);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, upto: Lsn) {
        for (request, program) in self.ids.persisted(upto) {
            self.on_request(ctx, request, program);
        }
    }

    fn on_request(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, request: RequestId, program: Program) {
        let Some((request, program)) = self.ids.admit((request, program)) else {
            return;
        };
        if program.is_empty() {
            return ctx.complete(request, Outcome::Committed { results: Vec::new() });
        }
        self.requests.insert(request, Request { program, attempts: Attempts::default() });
        self.start_attempt(ctx, request);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Executed(m) => self.on_executed(ctx, from, m),
            Msg::Vote { txn, part, yes } => self.on_vote(ctx, txn, part, yes),
            Msg::Decided { txn, part } => self.on_decided(txn, part),
            Msg::Status { txn, part, status: Some(status) } => self.on_status(txn, part, status),
            Msg::Refused { txn, part, reason } => self.on_refused(ctx, from, txn, part, reason),
            // Only a replica that leads names itself: believe those claims.
            Msg::Leader { shard, leader: Some(leader) } if leader == from => {
                self.leader_hint[shard.index()] = leader;
            }
            // A replica that knows no leader, or names another: the next
            // redirect or timeout finds it.
            Msg::Leader { .. } | Msg::Status { status: None, .. } => {}
            // Messages among replicas.
            Msg::Paxos(_)
            | Msg::Execute(_)
            | Msg::Prepare(_)
            | Msg::Decide { .. }
            | Msg::WhoLeads { .. }
            | Msg::Query { .. } => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, timer: Timer) {
        match timer {
            Timer::Tick => self.on_tick(ctx),
            Timer::Restart(request) if self.requests.contains_key(&request) => self.start_attempt(ctx, request),
            // Its request finished meanwhile.
            Timer::Restart(_) => {}
            Timer::QueryAbandoned => {
                self.query_abandoned(ctx);
                self.query_armed = !self.abandoned.is_empty();
                if self.query_armed {
                    ctx.set_timer(self.query_abandoned_ns(), Timer::QueryAbandoned);
                }
            }
            // Replicas' timers.
            Timer::Paxos(_) | Timer::Termination => {}
        }
    }
}
