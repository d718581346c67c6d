//! An RA-NOC2 partition: the primary of one shard (NOC-NOC Algorithm 1
//! lines 26-48). It keeps multiple versions per key, `latest` and
//! `pending`, answers every request with its latest safe time
//! (`safe.rs`), answers GETs from the two views a client sends — one
//! round, never waiting (N_R, O_R) — and finishes transactions whose
//! commit never came by asking the other participants (the cooperative
//! termination protocol the paper's implementation takes from RAMP).
//!
//! Acknowledgements of PREPARE and COMMIT, refusals and the termination
//! protocol's answers leave only once what they acknowledge is durable,
//! stamped with the safe time of the durable records at that moment. GETs
//! are answered at once, with the durable safe time too.
//!
//! It must never accept a prepare at or below its safe time, nor report a
//! safe time the durable records do not justify.

use super::Config;
use super::messages::{Get, KeyRead, Msg, PendingTxn, Prepare, Record, Timer};
use super::safe::SafeTime;
use crate::common::events::{partition_timer, start_partition};
use crate::common::outcomes::{Known, Outcomes};
use crate::common::partition::{Base, Core};
use crate::ramp::versions::Lookup;
use crate::ramp::{Held, Ts};
use meridian_core::{Ctx, Env, Key, Lsn, NodeId, Process, Protocol, ShardId, Topology, Value};
use meridian_mechanisms::twopc::Decision;
use std::sync::Arc;

/// The environment a partition acts through.
pub(super) type PartitionCtx<'a> = dyn Env<Msg, Record, Timer> + 'a;

pub struct Partition {
    /// Line 26, `vers`, and line 28, `pending` (with the termination
    /// protocol's bookkeeping).
    pub(super) base: Base<Msg>,
    /// Lines 27, 45-48: `latest` and the latest safe time.
    pub(super) safe: SafeTime,
    pub(super) outcomes: Outcomes,
}

/// What GET returns for one key (Algorithm 1 lines 37-44).
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Found {
        ts: Option<Ts>,
        value: Option<Value>,
    },
    /// A version the read needs was collected.
    Gone,
}

impl Partition {
    pub fn new(topo: Arc<Topology>, _me: NodeId, shard: ShardId, cfg: Config) -> Partition {
        Partition {
            // Refusals are remembered by `outcomes`, not by `Pending`.
            base: Base::new(topo, shard, cfg.common, 1),
            safe: SafeTime::new(),
            outcomes: Outcomes::new(cfg.outcomes_remembered),
        }
    }

    /// The safe time this partition tells (of its durable records).
    pub fn lst(&self) -> Option<Ts> {
        self.safe.reported()
    }

    /// Line 27, `latest`.
    pub fn latest(&self) -> Option<Ts> {
        self.safe.latest()
    }

    /// The newest committed version of `key` (`latest`, tests).
    pub fn last_commit(&self, key: meridian_core::Key) -> Option<Ts> {
        self.base.versions.last_commit(key)
    }

    /// Prepared transactions not committed here.
    pub fn pending(&self) -> usize {
        self.base.pending.len()
    }

    // ---- state changes, shared by the handlers and by replay ----

    /// Lines 30-31: `vers.add(ver)`, `pending.add(ver.ts)`.
    pub(super) fn install(&mut self, p: &Prepare, now_ns: u64) {
        for (key, value) in &p.writes {
            debug_assert_eq!(self.base.topo.shard_of(*key), self.base.shard, "a prepare carries this shard's writes");
            self.base.versions.prepare(*key, p.ts, value.clone(), Arc::from([]));
        }
        let keys: Arc<[Key]> = p.writes.iter().map(|(k, _)| *k).collect();
        self.base.pending.add(p.ts, PendingTxn { keys, participants: p.participants.clone() }, now_ns);
        self.safe.raise(self.base.pending.oldest());
    }

    /// Refuses `ts` for good, durably, and tells `to` once that is durable.
    fn refuse(&mut self, ctx: &mut PartitionCtx<'_>, to: NodeId, ts: Ts, answer: Msg) {
        if !matches!(self.outcomes.lookup(ts), Known::Decided(Decision::Abort)) {
            self.apply_abort(ts);
            self.append(ctx, Record::Aborted { ts });
        }
        self.send_durable(ctx, to, answer);
    }

    /// Lines 37-44 for one key: the version at the LSV when the LSV is
    /// beyond the GSV (lines 20-21, Figure 5a); otherwise the newest
    /// committed version between the two (lines 41-43, Figure 5b), skipping
    /// pending ones (line 42, Figure 5d), or the version at the LSV when
    /// there is none between (line 44, Figure 5c).
    pub fn read(&self, ts_c: Option<Ts>, k: KeyRead) -> Answer {
        let found = |l: Lookup| match l {
            Lookup::Found(item) => Answer::Found { ts: item.ts, value: item.value },
            Lookup::Gone => Answer::Gone,
        };
        match k.ts_p {
            Some(ts_p) if Some(ts_p) > ts_c => found(self.base.versions.exact(k.key, ts_p)),
            ts_p => match self.base.versions.committed_at(k.key, ts_c) {
                Lookup::Found(item) if item.ts > ts_p || ts_p.is_none() => {
                    Answer::Found { ts: item.ts, value: item.value }
                }
                Lookup::Found(_) => found(self.base.versions.exact(k.key, ts_p.expect("checked"))),
                Lookup::Gone => Answer::Gone,
            },
        }
    }

    // ---- handlers ----

    /// Algorithm 1 lines 29-32 (PREPARE): install the versions and answer
    /// with the latest safe time once durable. A repeat (even after the
    /// commit) is acknowledged again; a timestamp at or below the safe time,
    /// or one refused before, is refused for good.
    fn on_prepare(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, p: Arc<Prepare>, now_ns: u64) {
        let ts = p.ts;
        let known = self.outcomes.lookup(ts);
        if self.base.pending.contains(ts) || known == Known::Decided(Decision::Commit) {
            return self.send_durable(ctx, from, Msg::Prepared { ts, lst: None });
        }
        if known != Known::Unknown || Some(ts) <= self.safe.floor() {
            ctx.count("prepares_refused", 1);
            return self.refuse(ctx, from, ts, Msg::Refused { ts, lst: None });
        }
        if self.base.pending.is_full() {
            return ctx.count("prepares_shed", 1);
        }
        self.install(&p, now_ns);
        self.append(ctx, Record::Prepared(p));
        self.send_durable(ctx, from, Msg::Prepared { ts, lst: None });
    }

    /// Algorithm 1 lines 33-36 (COMMIT): commit the versions of `ts` and
    /// answer with the latest safe time once durable. A repeat is
    /// acknowledged again.
    fn on_commit(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, ts: Ts, now_ns: u64) {
        if self.outcomes.lookup(ts) == Known::Decided(Decision::Abort) {
            // Never sent: a commit follows every participant's prepare, and
            // this one refused it.
            debug_assert!(false, "a commit of a refused transaction");
            return;
        }
        if self.apply_commit(ts, now_ns) {
            self.append(ctx, Record::Committed { ts });
        }
        if self.base.topo.is_client(from) {
            self.send_durable(ctx, from, Msg::Committed { ts, lst: None });
        }
    }

    /// A client's abort after a refusal elsewhere: the transaction can
    /// commit nowhere (a participant refused it durably), so its versions
    /// here go now.
    fn on_abort(&mut self, ctx: &mut PartitionCtx<'_>, ts: Ts) {
        if self.base.pending.contains(ts) {
            self.apply_abort(ts);
            self.append(ctx, Record::Aborted { ts });
        }
    }

    /// Algorithm 1 lines 37-44 (GET): each key read from the two views,
    /// with the latest safe time (line 38); `Gone` if a version was
    /// collected.
    fn on_get(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, g: Get) {
        if let (true, Some(to)) = (g.keys.is_empty(), g.ts_c) {
            return self.advance(ctx, from, g, to);
        }
        let lst = self.safe.reported();
        let mut values = Vec::with_capacity(g.keys.len());
        for k in &g.keys {
            match self.read(g.ts_c, *k) {
                Answer::Found { value, .. } => values.push(value),
                Answer::Gone => {
                    ctx.count("gone_answers", 1);
                    return ctx.send(from, Msg::Gone { id: g.id, lst });
                }
            }
        }
        ctx.send(from, Msg::Got { id: g.id, values, lst });
    }

    /// RA-NOC: a writer waits until every partition's safe time has passed
    /// its write (Algorithm 3 line 15); one that waited `retry_ms` asks the
    /// partitions behind to pass it. The safe time rises, durably, to the
    /// time asked (or just below the oldest pending transaction), and the
    /// answer leaves once that is durable. The paper's partitions raise it
    /// only by commits: an idle partition would hold a writer for good.
    fn advance(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, g: Get, to: Ts) {
        if self.safe.advance(to, self.base.pending.oldest()) {
            ctx.count("safe_time_advances", 1);
            self.append(ctx, Record::Advanced { ts: to });
        }
        self.send_durable(ctx, from, Msg::Got { id: g.id, values: Vec::new(), lst: None });
    }

    /// The termination protocol's question: does this participant hold
    /// `ts`? One that never decided it and does not hold it refuses it for
    /// good, durably, before answering; one that forgot it says so (it
    /// decided long ago and will never prepare it again), and the asker
    /// resolves it (`Pending::answer`).
    fn on_check_prepared(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, ts: Ts) {
        let answer = |held| Msg::PrepareState { ts, held };
        match self.outcomes.lookup(ts) {
            _ if self.base.pending.contains(ts) => self.send_durable(ctx, from, answer(Held::Prepared)),
            Known::Decided(Decision::Commit) => self.send_durable(ctx, from, answer(Held::Prepared)),
            Known::Decided(Decision::Abort) => self.send_durable(ctx, from, answer(Held::Aborted)),
            Known::Forgotten => {
                ctx.count("ctp_forgotten", 1);
                self.send_durable(ctx, from, answer(Held::Forgotten));
            }
            Known::Unknown => self.refuse(ctx, from, ts, answer(Held::Aborted)),
        }
    }
}

impl Core for Partition {
    type Msg = Msg;

    fn base(&self) -> &Base<Msg> {
        &self.base
    }

    fn base_mut(&mut self) -> &mut Base<Msg> {
        &mut self.base
    }

    fn checkpoint(&self) -> Record {
        Record::Snapshot(Arc::new(self.snapshot()))
    }

    /// `recovery.rs`.
    fn restore(&mut self, durable: Vec<Record>, now_ns: u64) {
        Partition::restore(self, durable, now_ns);
    }

    /// Lines 34-35: `latest ← max(ts, latest)`, `pending.remove(ts)`.
    /// False if `ts` is not pending here.
    fn apply_commit(&mut self, ts: Ts, now_ns: u64) -> bool {
        let Some(txn) = self.base.pending.remove(ts) else { return false };
        for key in txn.keys.iter() {
            let committed = self.base.versions.commit(*key, ts, now_ns);
            debug_assert!(committed, "a pending transaction's versions are prepared here");
        }
        self.outcomes.record(ts, Decision::Commit);
        self.safe.committed(ts);
        self.safe.raise(self.base.pending.oldest());
        true
    }

    /// `ts` never commits: its versions here go, a later prepare of it is
    /// refused, and the termination protocol answers `Aborted`.
    fn apply_abort(&mut self, ts: Ts) {
        if let Some(txn) = self.base.pending.remove(ts) {
            for key in txn.keys.iter() {
                self.base.versions.abort(*key, ts);
            }
        }
        self.outcomes.record(ts, Decision::Abort);
        self.safe.raise(self.base.pending.oldest());
    }

    fn append(&mut self, ctx: &mut PartitionCtx<'_>, record: Record) -> Lsn {
        let lsn = ctx.append(record);
        self.safe.appended(lsn);
        self.base.appended(lsn);
        lsn
    }

    /// Sends `msg` once everything appended so far is durable.
    fn send_durable(&mut self, ctx: &mut PartitionCtx<'_>, to: NodeId, msg: Msg) {
        if let Some((to, msg)) = self.base.out.after_last((to, msg)) {
            ctx.send(to, msg.stamped(self.safe.reported()));
        }
    }
}

impl<P: Protocol<Msg = Msg, Record = Record, Timer = Timer>> Process<P> for Partition {
    fn on_start(&mut self, ctx: &mut Ctx<'_, P>, durable: Vec<Record>) {
        start_partition(self, ctx, durable);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, P>, from: NodeId, msg: Msg) {
        let now_ns = ctx.monotonic_ns();
        match msg {
            Msg::Prepare(p) => self.on_prepare(ctx, from, p, now_ns),
            Msg::Commit { ts } => self.on_commit(ctx, from, ts, now_ns),
            Msg::Abort { ts } => self.on_abort(ctx, ts),
            Msg::Get(g) => self.on_get(ctx, from, g),
            Msg::CheckPrepared { ts } => self.on_check_prepared(ctx, from, ts),
            Msg::PrepareState { ts, held } => self.on_prepare_state(ctx, from, ts, held, now_ns),
            Msg::Ship(s) => self.on_ship(ctx, from, s, now_ns),
            // A partition's own acknowledgements of a commit it forwarded.
            Msg::Committed { .. } => {}
            // Answers to clients.
            Msg::Prepared { .. } | Msg::Refused { .. } | Msg::Got { .. } | Msg::Gone { .. } => {}
        }
        self.after_event(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, P>, timer: Timer) {
        partition_timer(self, ctx, timer);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, P>, upto: Lsn) {
        self.safe.persisted(upto);
        let lst = self.safe.reported();
        while let Some((to, msg)) = self.base.out.next_freed(upto) {
            ctx.send(to, msg.stamped(lst));
        }
    }

    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("versions", self.base.versions.versions());
        out("overwrites_waiting", self.base.versions.waiting());
        out("pending", self.base.pending.len());
        out("outcomes", self.outcomes.len());
        out("held_replies", self.base.out.len());
        out("safe_marks", self.safe.marks());
    }

    fn check_invariants(&self) {
        self.base.check_invariants();
        self.outcomes.check_invariants();
        self.safe.check_invariants(self.base.pending.oldest());
    }
}
