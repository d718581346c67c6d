//! An Eiger partition: the primary of one shard (NOC-NOC Appendix E,
//! Algorithm 6), the side of Eiger's always-commit two-phase commit that
//! Eiger-NOC2 shares with Eiger-PORT. It keeps multiple versions per key,
//! stamps prepares with its Lamport clock (`stamps.rs`), keeps `pending`
//! (`pending.rs`), answers every request with its latest safe time
//! (RA-NOC2's `SafeTime`: the running maximum, told once durable), and
//! answers GETs at once (N_R, O_R) from the client's views.
//!
//! Every participant of a write gets the client's PREPARE directly; a
//! cohort sends its prepare stamp to the coordinator (WRITE_COHORT), the
//! coordinator commits at the largest stamp once every cohort's is in and
//! tells them (WRITE_COORD). The commit never waits for the client (it is
//! asynchronous, Algorithm 2 line 3). Acknowledgements, votes and
//! decisions leave only once what they report is durable.
//!
//! Termination (Eiger's, beyond the pseudocode): a cohort pending for
//! `ctp_ms` sends its vote again, marked late, and the coordinator answers
//! with the decision; a coordinator that never prepared a transaction a
//! late vote names refuses it for good (its client has not returned: it
//! waits for every participant). A coordinator pending for `ctp_ms` asks
//! the cohorts whose votes are missing; one that never prepared it refuses
//! it for good and the coordinator aborts it everywhere.

use super::messages::{Decided, Get, KeyRead, Msg, PendingTxn, Prepare, Record, Timer};
use super::pending::Pending;
use super::stamps::{Stamps, counter};
use super::{Config, Flavor, partition_of};
use meridian_core::{Ctx, Env, Key, Lsn, NodeId, Process, Protocol, ShardId, Topology, TxnId, Value};
use meridian_mechanisms::durable::AfterDurable;
use meridian_mechanisms::mvstore::{Meta, Version, VersionMeta};
use meridian_mechanisms::primary_backup::Ship;
use meridian_readatomic::common::backup::Primary;
use meridian_readatomic::common::events::{PartitionEvents, collect_versions, partition_timer, start_partition};
use meridian_readatomic::common::outcomes::{Known, Outcomes};
use meridian_readatomic::ramp::recovery::Checkpoints;
use meridian_readatomic::ramp::versions::{Lookup, Versions};
use meridian_readatomic::ramp::{Common, Ts};
use meridian_readatomic::ranoc2::safe::SafeTime;
use std::sync::Arc;

/// The environment a partition acts through.
pub(super) type PartitionCtx<'a> = dyn Env<Msg, Record, Timer> + 'a;

pub struct Partition {
    pub(super) topo: Arc<Topology>,
    pub(super) shard: ShardId,
    pub(super) cfg: Config,
    /// Algorithm 6 line 2, `vers`.
    pub(super) versions: Versions,
    /// Line 4, `pending`, with the coordinator's votes.
    pub(super) pending: Pending,
    /// The Lamport clock (lines 29, 31, 34, 41).
    pub(super) stamps: Stamps,
    /// Line 3, `ts_svr`.
    pub(super) safe: SafeTime,
    pub(super) outcomes: Outcomes<Decided>,
    pub(super) out: AfterDurable<(NodeId, Msg)>,
    pub(super) checkpoints: Checkpoints,
    /// Primary-backup replication to the shard's other replicas
    /// (`meridian_readatomic::common::backup`), if it has any.
    pub(super) primary: Primary,
}

/// How Eiger-PORT's read rule answered a key, for its counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Promotion {
    /// Neither of the two below.
    Plain,
    /// The reader's own write beyond the snapshot, promoted before it.
    Promoted,
    /// Another client's version, below the reader's own newer write that
    /// its promotion put before it (Figure 8b).
    PassedOver,
}

/// What GET returns for one key.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Found {
        ts: Option<Ts>,
        value: Option<Value>,
    },
    /// A version the read needs was collected.
    Gone,
}

/// The transaction that wrote `v` (Eiger-PORT's versions keep it).
fn txn_of(v: &Version<Meta>) -> Option<u64> {
    v.meta.writer.map(|w| w.seq)
}

impl Answer {
    fn of(l: Lookup) -> Answer {
        match l {
            Lookup::Found(item) => Answer::Found { ts: item.ts, value: item.value },
            Lookup::Gone => Answer::Gone,
        }
    }
}

impl Partition {
    pub fn new(topo: Arc<Topology>, shard: ShardId, cfg: Config) -> Partition {
        Partition {
            topo,
            shard,
            versions: Versions::new(cfg.common.gc_window_ns, cfg.common.superseded_max),
            pending: Pending::new(shard, cfg.common.pending_max),
            stamps: Stamps::new(shard),
            safe: SafeTime::new(),
            outcomes: Outcomes::new(cfg.outcomes_remembered),
            out: AfterDurable::new(),
            checkpoints: Checkpoints::new(cfg.common.checkpoint_records),
            primary: Primary::default(),
            cfg,
        }
    }

    /// The latest safe time this partition tells (of its durable records).
    pub fn lst(&self) -> Option<Ts> {
        self.safe.reported()
    }

    /// The newest committed version of `key` (its commit stamp; tests).
    pub fn last_commit(&self, key: meridian_core::Key) -> Option<Ts> {
        self.versions.last_commit(key)
    }

    /// Prepared transactions not committed here.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    // ---- state changes, shared by the handlers and by replay ----

    /// Lines 40-43, as a running maximum: the clock with nothing pending,
    /// just below the oldest prepare stamp otherwise.
    fn raise(&mut self) {
        self.safe.committed(self.stamps.ceiling());
        self.safe.raise(self.pending.oldest());
    }

    /// Lines 30-33: the versions, pending at `t_prep`. Eiger-PORT's keep
    /// their writer and the snapshot it read at (`port_read`).
    pub(super) fn install(&mut self, p: &Prepare, t_prep: Ts, snapshot: Option<Ts>, now_ns: u64) {
        let writer = self.writer_of(p.txn);
        for (key, value) in &p.writes {
            debug_assert_eq!(self.topo.shard_of(*key), self.shard, "a prepare carries this shard's writes");
            match writer {
                Some(writer) => self.versions.prepare_by(*key, t_prep, value.clone(), writer, snapshot),
                None => self.versions.prepare(*key, t_prep, value.clone(), Arc::from([])),
            }
        }
        let keys: Arc<[Key]> = p.writes.iter().map(|(k, _)| *k).collect();
        let txn = PendingTxn { t_prep, keys, coordinator: p.coordinator, participants: p.participants.clone() };
        self.pending.add(p.txn, txn, now_ns);
        self.stamps.advance_to(t_prep);
        self.raise();
    }

    /// Lines 36-43 (COMMIT): the versions move to `t_com` and are
    /// committed; the clock moves to `t_com`. False if `txn` is not
    /// pending here.
    pub(super) fn apply_commit(&mut self, txn: Ts, t_com: Ts, now_ns: u64) -> bool {
        let Some(p) = self.pending.remove(txn) else { return false };
        assert!(t_com >= p.t_prep, "a transaction commits at or above its prepare stamp");
        for key in p.keys.iter() {
            let committed = self.versions.commit_at(*key, p.t_prep, t_com, now_ns);
            debug_assert!(committed, "a pending transaction's versions are prepared here");
        }
        self.outcomes.record(txn, Some(t_com));
        self.stamps.advance_to(t_com);
        self.raise();
        true
    }

    /// The clock moves to counter `c` (a client's refresh).
    pub(super) fn apply_clock(&mut self, c: u64) {
        self.stamps.restore(c);
        self.raise();
    }

    /// `txn` commits nowhere: its versions here go and a later prepare of
    /// it is refused.
    pub(super) fn apply_abort(&mut self, txn: Ts) {
        if let Some(p) = self.pending.remove(txn) {
            for key in p.keys.iter() {
                self.versions.abort(*key, p.t_prep);
            }
        }
        self.outcomes.record(txn, None);
        self.raise();
    }

    fn append(&mut self, ctx: &mut PartitionCtx<'_>, record: Record) -> Lsn {
        let lsn = ctx.append(record);
        self.out.appended(lsn);
        self.safe.appended(lsn);
        self.checkpoints.appended(lsn);
        lsn
    }

    /// Sends `msg` once everything appended so far is durable.
    fn send_durable(&mut self, ctx: &mut PartitionCtx<'_>, to: NodeId, msg: Msg) {
        if let Some((to, msg)) = self.out.after_last((to, msg)) {
            ctx.send(to, msg.stamped(self.safe.reported()));
        }
    }

    /// Refuses `txn` for good, durably.
    fn refuse(&mut self, ctx: &mut PartitionCtx<'_>, txn: Ts) {
        if self.outcomes.lookup(txn) != Known::Decided(None) {
            self.apply_abort(txn);
            self.append(ctx, Record::Aborted { txn });
        }
    }

    /// Eiger-PORT: the transaction `txn` as a version's writer — its client
    /// (the client drives Eiger's two-phase commit) and its id.
    fn writer_of(&self, txn: Ts) -> Option<TxnId> {
        if self.cfg.flavor != Flavor::Port {
            return None;
        }
        let client = *self.topo.clients().get(txn.client() as usize)?;
        Some(TxnId { node: client, seq: txn.0 })
    }

    fn node_of(&self, shard: ShardId) -> NodeId {
        partition_of(&self.topo, shard)
    }

    fn shard_of(&self, node: NodeId) -> Option<ShardId> {
        self.topo.replica_of(node).map(|(s, _)| s)
    }

    /// Algorithm 6 lines 5-12 (GET, Eiger-NOC2): the newest committed
    /// version within the GSV (line 6), unless the client's own write is
    /// at or past it (line 7, Figure 8c): then its version, found through
    /// `pending` while it is not committed here (lines 8-9) and at `t_own`
    /// once it is (line 11).
    pub fn read(&self, gsv: Option<Ts>, k: KeyRead) -> Answer {
        let ver = match self.versions.committed_at(k.key, gsv) {
            Lookup::Found(item) => item,
            Lookup::Gone => return Answer::Gone,
        };
        match k.own {
            Some(own) if Some(own.t_own) >= ver.ts => {
                let at = self.pending.get(own.txn).map_or(own.t_own, |p| p.t_prep);
                Answer::of(self.versions.exact(k.key, at))
            }
            _ => Answer::Found { ts: ver.ts, value: ver.value },
        }
    }

    /// Eiger-PORT's GET ("Performance-Optimal Read-Only Transactions";
    /// NOC-NOC §6.1, Figure 8b) for `reader`: every other client's version
    /// stands at its commit stamp, the reader's own versions at the
    /// snapshot it read at when it wrote them — a promotion before its
    /// later snapshots, alike for every write of one transaction — and the
    /// answer is the highest within the GSV. So the reader's own write
    /// beyond the GSV is returned unless another client's version lies
    /// between the promoted position and the GSV; the backward search from
    /// the GSV skips the reader's own versions, already promoted before
    /// it.
    ///
    /// Which of the reader's own versions count: the one the read names
    /// (the newest the client knows committed: its coordinator told it),
    /// committed here or still pending — NOC-NOC footnote 5: PORT's rule,
    /// on committed versions only, may promote one write of a transaction
    /// and not another — and those committed within the GSV, hence at
    /// every partition. Another write of the client's, in flight on one of
    /// its other sessions, counts nowhere until then: committed at one
    /// partition and not at another, it would be read in part.
    pub fn port_read(&self, gsv: Option<Ts>, k: KeyRead, reader: NodeId) -> (Answer, Promotion) {
        let mut other: Option<&Version<Meta>> = None;
        let mut own: Option<&Version<Meta>> = None;
        for v in self.versions.all(k.key) {
            let by_reader = v.meta.writer.is_some_and(|w| w.node == reader);
            let named = k.own.is_some_and(|o| v.meta.writer.is_some_and(|w| w.seq == o.txn.0));
            let committed = !v.meta.is_intent();
            let within = committed && Some(Ts(v.version)) <= gsv;
            if by_reader && (named || within) {
                let later = own.is_none_or(|o| (v.meta.snapshot, txn_of(v)) > (o.meta.snapshot, txn_of(o)));
                if later && (within || !self.cfg.skip_own_promotion) {
                    own = Some(v);
                }
            } else if !by_reader && within {
                other = Some(v);
            }
        }
        let beyond = |v: &Version<Meta>| Some(Ts(v.version)) > gsv;
        let (found, at, how) = match (own, other) {
            (Some(o), Some(v)) if o.meta.snapshot.map(Ts) < Some(Ts(v.version)) => {
                let how = if o.version > v.version { Promotion::PassedOver } else { Promotion::Plain };
                (Some(v), Some(Ts(v.version)), how)
            }
            (Some(o), _) if beyond(o) => (Some(o), o.meta.snapshot.map(Ts), Promotion::Promoted),
            (Some(o), _) => (Some(o), o.meta.snapshot.map(Ts), Promotion::Plain),
            (None, Some(v)) => (Some(v), Some(Ts(v.version)), Promotion::Plain),
            (None, None) => (None, None, Promotion::Plain),
        };
        // A version collected above the answer's position might have
        // been the answer.
        if self.versions.newest_collected(k.key).is_some_and(|c| Some(c) > at) {
            return (Answer::Gone, Promotion::Plain);
        }
        let answer = Answer::Found { ts: found.map(|v| Ts(v.version)), value: found.map(|v| v.value.clone()) };
        (answer, how)
    }

    /// The coordinator commits once every cohort's stamp is in (lines
    /// 17-20) and tells the cohorts once the commit is durable.
    fn try_commit(&mut self, ctx: &mut PartitionCtx<'_>, txn: Ts, now_ns: u64) {
        let Some(t_com) = self.pending.decision(txn) else { return };
        let participants = self.pending.get(txn).expect("decided while pending").participants.clone();
        self.apply_commit(txn, t_com, now_ns);
        self.append(ctx, Record::Committed { txn, t_com });
        ctx.count("commits", 1);
        self.answer_commit(ctx, txn, t_com);
        let me = self.shard;
        for shard in participants.into_iter().filter(|s| *s != me) {
            let to = self.node_of(shard);
            self.send_durable(ctx, to, Msg::Commit { txn, t_com });
        }
    }

    /// Eiger-PORT: the coordinator tells the client the commit stamp once
    /// the commit is durable (the write's second phase).
    fn answer_commit(&mut self, ctx: &mut PartitionCtx<'_>, txn: Ts, t_com: Ts) {
        if let Some(client) = self.writer_of(txn).map(|w| w.node) {
            self.send_durable(ctx, client, Msg::Committed { txn, t_com, lst: None });
        }
    }

    // ---- handlers ----

    /// Algorithm 6 lines 13-15 and 21-23 (WRITE_COORD, WRITE_COHORT) with
    /// PREPARE (lines 28-35): stamp and install the versions, answer the
    /// client with the stamp and the latest safe time once durable; a
    /// cohort sends its stamp to the coordinator (line 25). A repeat is
    /// answered again (after the commit, with the commit stamp, which
    /// leaves the client's maximum unchanged); a transaction aborted here
    /// is refused.
    ///
    /// Eiger-PORT's prepare carries the client's snapshot, kept with the
    /// versions; its coordinator answers a repeat after the commit with
    /// the commit stamp as `Committed`.
    fn on_prepare(
        &mut self,
        ctx: &mut PartitionCtx<'_>,
        from: NodeId,
        p: Arc<Prepare>,
        snapshot: Option<Ts>,
        now_ns: u64,
    ) {
        let txn = p.txn;
        if let Some(held) = self.pending.get(txn) {
            let t_prep = held.t_prep;
            return self.send_durable(ctx, from, Msg::Prepared { txn, t_prep, lst: None });
        }
        match self.outcomes.lookup(txn) {
            Known::Decided(Some(t_com)) if p.coordinator == self.shard && self.cfg.flavor == Flavor::Port => {
                return self.answer_commit(ctx, txn, t_com);
            }
            Known::Decided(Some(t_com)) => {
                return self.send_durable(ctx, from, Msg::Prepared { txn, t_prep: t_com, lst: None });
            }
            Known::Decided(None) => {
                ctx.count("prepares_refused", 1);
                return self.send_durable(ctx, from, Msg::Refused { txn, lst: None });
            }
            Known::Forgotten => return ctx.count("ctp_forgotten", 1),
            Known::Unknown => {}
        }
        if self.pending.is_full() {
            return ctx.count("prepares_shed", 1);
        }
        let t_prep = self.stamps.prepare(p.dep);
        self.install(&p, t_prep, snapshot, now_ns);
        self.append(ctx, Record::Prepared { prepare: Arc::clone(&p), t_prep, snapshot });
        self.send_durable(ctx, from, Msg::Prepared { txn, t_prep, lst: None });
        if p.coordinator == self.shard {
            self.try_commit(ctx, txn, now_ns);
        } else {
            let to = self.node_of(p.coordinator);
            self.send_durable(ctx, to, Msg::Vote { txn, t_prep, late: false });
        }
    }

    /// Line 17 at the coordinator: a cohort's stamp. Asked late about a
    /// transaction already decided, the coordinator tells the decision; one
    /// it never prepared, it refuses for good.
    fn on_vote(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, txn: Ts, t_prep: Ts, late: bool, now_ns: u64) {
        let Some(shard) = self.shard_of(from) else { return };
        if self.pending.contains(txn) {
            self.pending.vote(txn, shard, t_prep);
            return self.try_commit(ctx, txn, now_ns);
        }
        match self.outcomes.lookup(txn) {
            Known::Decided(Some(t_com)) => self.send_durable(ctx, from, Msg::Commit { txn, t_com }),
            Known::Decided(None) => self.send_durable(ctx, from, Msg::Abort { txn }),
            Known::Forgotten => ctx.count("ctp_forgotten", 1),
            Known::Unknown if late => {
                ctx.count("ctp_aborts", 1);
                self.refuse(ctx, txn);
                self.send_durable(ctx, from, Msg::Abort { txn });
            }
            Known::Unknown => self.pending.vote(txn, shard, t_prep),
        }
    }

    /// The coordinator asks for a vote it is missing: a cohort that never
    /// prepared the transaction refuses it for good.
    fn on_ask_vote(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, txn: Ts) {
        if let Some(p) = self.pending.get(txn) {
            let t_prep = p.t_prep;
            return self.send_durable(ctx, from, Msg::Vote { txn, t_prep, late: false });
        }
        match self.outcomes.lookup(txn) {
            // Committed here means the coordinator decided already.
            Known::Decided(Some(_)) => {}
            Known::Decided(None) => self.send_durable(ctx, from, Msg::NoVote { txn }),
            Known::Forgotten => ctx.count("ctp_forgotten", 1),
            Known::Unknown => {
                self.refuse(ctx, txn);
                self.send_durable(ctx, from, Msg::NoVote { txn });
            }
        }
    }

    /// A cohort refused: the transaction commits nowhere.
    fn on_no_vote(&mut self, ctx: &mut PartitionCtx<'_>, txn: Ts) {
        let Some(p) = self.pending.get(txn) else { return };
        let participants = p.participants.clone();
        ctx.count("ctp_aborts", 1);
        self.apply_abort(txn);
        self.append(ctx, Record::Aborted { txn });
        let me = self.shard;
        for shard in participants.into_iter().filter(|s| *s != me) {
            let to = self.node_of(shard);
            self.send_durable(ctx, to, Msg::Abort { txn });
        }
    }

    /// Lines 26-27 at a cohort: COMMIT at the coordinator's stamp.
    fn on_commit(&mut self, ctx: &mut PartitionCtx<'_>, txn: Ts, t_com: Ts, now_ns: u64) {
        if self.apply_commit(txn, t_com, now_ns) {
            self.append(ctx, Record::Committed { txn, t_com });
        }
    }

    fn on_abort(&mut self, ctx: &mut PartitionCtx<'_>, txn: Ts) {
        if self.pending.contains(txn) {
            self.apply_abort(txn);
            self.append(ctx, Record::Aborted { txn });
        }
    }

    /// GET: each key read (`read`, Eiger-PORT's `port_read`), with the
    /// latest safe time; `Gone` if a version was collected.
    fn on_get(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, g: Get) {
        let lst = self.safe.reported();
        let mut values = Vec::with_capacity(g.keys.len());
        for k in &g.keys {
            let answer = match self.cfg.flavor {
                Flavor::Noc2 => self.read(g.gsv, *k),
                Flavor::Port => {
                    let (answer, how) = self.port_read(g.gsv, *k, from);
                    match how {
                        Promotion::Promoted => ctx.count("promoted_reads", 1),
                        Promotion::PassedOver => ctx.count("own_writes_passed_over", 1),
                        Promotion::Plain => {}
                    }
                    answer
                }
            };
            match answer {
                Answer::Found { value, .. } => values.push(value),
                Answer::Gone => {
                    ctx.count("gone_answers", 1);
                    return ctx.send(from, Msg::Gone { id: g.id, lst });
                }
            }
        }
        ctx.send(from, Msg::Got { id: g.id, values, lst });
    }

    /// A client's view refresh: the clock moves to the client's largest
    /// stamp, durably, and the answer (the latest safe time) leaves once
    /// durable.
    fn on_sync(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, dep: Option<Ts>) {
        if let Some(dep) = dep.filter(|d| counter(*d) > self.stamps.counter()) {
            self.apply_clock(counter(dep));
            self.append(ctx, Record::Clock { c: counter(dep) });
        }
        self.send_durable(ctx, from, Msg::Synced { lst: None });
    }

    /// A backup's acknowledgement or answer to a probe.
    fn on_ship(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, msg: Ship, now_ns: u64) {
        let out = self.primary.on_message(ctx, &self.versions, from, msg, now_ns);
        self.send_shipped(ctx, out);
    }

    fn send_shipped(&mut self, ctx: &mut PartitionCtx<'_>, out: Vec<(NodeId, Ship)>) {
        for (to, s) in out {
            self.send_durable(ctx, to, Msg::Ship(s));
        }
    }
}

/// The start and timers every read-atomic partition shares
/// (`meridian_readatomic::common::events`), with Eiger's handlers.
impl PartitionEvents<Msg, Record> for Partition {
    fn common(&self) -> &Common {
        &self.cfg.common
    }

    fn versions(&self) -> &Versions {
        &self.versions
    }

    /// `recovery.rs`.
    fn restore(&mut self, durable: Vec<Record>, now_ns: u64) {
        Partition::restore(self, durable, now_ns);
    }

    fn on_gc_tick(&mut self, ctx: &mut PartitionCtx<'_>, now_ns: u64) {
        collect_versions(ctx, &mut self.versions, &self.cfg.common, now_ns);
    }

    /// Transactions pending for `ctp_ms`: a cohort sends its vote again,
    /// late; the coordinator asks the cohorts it misses.
    fn on_ctp_tick(&mut self, ctx: &mut PartitionCtx<'_>, now_ns: u64) {
        ctx.set_timer(self.cfg.common.ctp_tick_ns, Timer::Ctp);
        for q in self.pending.due(now_ns, self.cfg.common.ctp_ns) {
            let coordinator = self.pending.get(q.txn).is_some_and(|p| p.coordinator == self.shard);
            for shard in q.ask {
                ctx.count("ctp_runs", 1);
                let msg = match coordinator {
                    true => Msg::AskVote { txn: q.txn },
                    false => Msg::Vote { txn: q.txn, t_prep: q.t_prep, late: true },
                };
                ctx.send(self.node_of(shard), msg);
            }
        }
    }

    /// After a (re)start: replication to the shard's backups, if any.
    fn start_shipping(&mut self, ctx: &mut PartitionCtx<'_>) {
        self.primary.start(ctx, &self.topo, self.shard, &mut self.versions, &self.cfg.common.replication);
    }

    /// The shipping tick: this tick's commits to the backups, once the
    /// records before them are durable.
    fn on_ship_tick(&mut self, ctx: &mut PartitionCtx<'_>, now_ns: u64) {
        let out = self.primary.on_tick(ctx, &mut self.versions, &self.cfg.common.replication, now_ns);
        self.send_shipped(ctx, out);
    }

    /// After every event: a checkpoint when one is due.
    fn after_event(&mut self, ctx: &mut PartitionCtx<'_>) {
        ctx.charge_keys(self.versions.take_touched());
        if let Some(upto) = self.checkpoints.due() {
            let snapshot = self.snapshot();
            ctx.compact(upto, Record::Snapshot(Arc::new(snapshot)));
            ctx.count("checkpoints", 1);
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
            Msg::Prepare(p) => self.on_prepare(ctx, from, p, None, now_ns),
            Msg::PrepareAt { prepare, snapshot } => self.on_prepare(ctx, from, prepare, snapshot, now_ns),
            Msg::Vote { txn, t_prep, late } => self.on_vote(ctx, from, txn, t_prep, late, now_ns),
            Msg::AskVote { txn } => self.on_ask_vote(ctx, from, txn),
            Msg::NoVote { txn } => self.on_no_vote(ctx, txn),
            Msg::Commit { txn, t_com } => self.on_commit(ctx, txn, t_com, now_ns),
            Msg::Abort { txn } => self.on_abort(ctx, txn),
            Msg::Get(g) => self.on_get(ctx, from, g),
            Msg::Sync { dep } => self.on_sync(ctx, from, dep),
            Msg::Ship(s) => self.on_ship(ctx, from, s, now_ns),
            // Answers to clients.
            Msg::Prepared { .. }
            | Msg::Refused { .. }
            | Msg::Got { .. }
            | Msg::Gone { .. }
            | Msg::Synced { .. }
            | Msg::Committed { .. } => {}
        }
        self.after_event(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, P>, timer: Timer) {
        partition_timer(self, ctx, timer);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, P>, upto: Lsn) {
        self.safe.persisted(upto);
        let lst = self.safe.reported();
        while let Some((to, msg)) = self.out.next_freed(upto) {
            ctx.send(to, msg.stamped(lst));
        }
    }

    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("versions", self.versions.versions());
        out("overwrites_waiting", self.versions.waiting());
        out("pending", self.pending.len());
        out("early_votes", self.pending.early_len());
        out("outcomes", self.outcomes.len());
        out("held_replies", self.out.len());
        out("safe_marks", self.safe.marks());
    }

    fn check_invariants(&self) {
        self.versions.check_invariants();
        self.pending.check_invariants();
        self.outcomes.check_invariants();
        self.safe.check_invariants(self.pending.oldest());
        self.out.check_invariants();
        self.primary.check_invariants();
        assert!(self.pending.oldest().is_none_or(|p| p <= self.stamps.ceiling()), "pending stamps were issued here");
    }
}
