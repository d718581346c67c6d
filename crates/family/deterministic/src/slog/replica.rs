//! A replica of one shard in one region: it executes its region's global
//! log (SLOG Figure 2, lock manager and execution engine) with
//! deterministic locking, as Calvin does (§3.2: "the only difference ...
//! the metadata associated with that granule must be checked").
//!
//! - A single-home transaction asks for all its locks on this shard at its
//!   place in the log.
//! - A multi-home transaction asks for its locks on the granules assumed
//!   homed at `h` at the place of `h`'s LockOnlyTxn for it (§3.3): its
//!   code runs once every LockOnlyTxn touching this shard holds its
//!   locks. LockOnlyTxns of two multi-home transactions stand in the same
//!   order in every home's local log, so no deadlock forms.
//! - Execution reads each granule's header with its value: a header that
//!   differs from the one the transaction assumed (Figure 2, "execution
//!   engine code called prior to read/write of granule") aborts it. The
//!   headers travel with the reads among the region's participants, so
//!   every participant of every region reaches the same verdict, and the
//!   answering replica tells the client to submit it again.
//!
//! Reads are exchanged among the transaction's participants in the region
//! (Calvin §3.2 phases 3-5): no two-phase commit.

use super::messages::{BatchId, Entry, Header, LogEntry, Msg, Read, Reads, Record, SNAPSHOTS, Since, Timer, Txn};
use super::{Config, Slog};
use crate::sent_reads::SentReads;
use meridian_core::process::CHECKED_MAX;
use meridian_core::{
    CopyState, Ctx, Key, KeyLayout, Lsn, NodeId, Outcome, Process, ReadMode, RegionId, RequestId, Settled, ShardId,
    Topology, TxnId, Value, procedure,
};
use meridian_mechanisms::locks::LockMode;
use meridian_mechanisms::recent::RecentMap;
use meridian_mechanisms::scheduler::{ReadExchange, Scheduler, digest};
use std::collections::BTreeMap;
use std::sync::Arc;

pub use crate::sent_reads::At;

/// A lock request: a transaction's whole set on this shard (`ALL`), or one
/// LockOnlyTxn's (the home region's id).
type Part = (TxnId, u32);
const ALL: u32 = u32::MAX;

/// The scheduler's log order of a place.
fn order_of(at: At) -> u64 {
    (at.0 << 24) | u64::from(at.1)
}

#[derive(Clone, Debug)]
pub(super) struct Running {
    pub txn: Arc<Txn>,
    /// The lock requests admitted so far, and how many the transaction
    /// makes on this shard.
    pub parts: Vec<(Part, At)>,
    pub parts_needed: usize,
    pub parts_ready: usize,
    /// The batch of its last lock request (a remaster's header names it).
    pub batch: BatchId,
    /// Granules whose header was not the one assumed (Figure 6): found at
    /// admission, they abort the transaction.
    pub stale: Vec<(Key, Header, Option<Since>)>,
    /// When its first lock request was admitted (multi-home wait).
    pub admitted_ns: u64,
}

impl Running {
    /// The last place this transaction has on this shard (once all its
    /// parts are in).
    pub fn last_at(&self) -> At {
        self.parts.iter().map(|(_, at)| *at).max().expect("a running transaction has a part")
    }

    pub fn first_at(&self) -> At {
        self.parts.iter().map(|(_, at)| *at).min().expect("a running transaction has a part")
    }
}

pub struct Replica {
    pub(super) topo: Arc<Topology>,
    pub(super) me: NodeId,
    pub(super) shard: ShardId,
    pub(super) copy: u32,
    pub(super) cfg: Config,
    pub(super) layout: KeyLayout,
    /// Its region's sequencer group, the member it fetches the log from,
    /// and that member's ticks of silence (another is asked after
    /// `failover_ms`).
    pub(super) sequencers: Vec<NodeId>,
    pub(super) source: usize,
    pub(super) silent_ticks: u32,
    pub(super) next_pos: u64,
    /// Per local log, the batches applied (placed before `next_pos`), and
    /// the batch at each position since the last checkpoint's.
    pub(super) applied: BTreeMap<u32, u64>,
    pub(super) batch_at: BTreeMap<u64, BatchId>,
    pub(super) held: BTreeMap<u64, LogEntry>,
    pub(super) store: BTreeMap<Key, Value>,
    /// Headers that differ from the layout's (remastered granules), with
    /// the batch of the remaster that wrote each.
    pub(super) headers: BTreeMap<Key, (Header, Since)>,
    /// Headers as the entries admitted so far leave them (remasters
    /// admitted and not yet run).
    pub(super) order_headers: BTreeMap<Key, (Header, Since)>,
    /// PNUTS's trigger (§3.4), kept by the home region: per granule homed
    /// here, the region its last accesses came from and how many in a row.
    pub(super) streaks: RecentMap<Key, (RegionId, u32)>,
    pub(super) scheduler: Scheduler<Part>,
    pub(super) running: BTreeMap<TxnId, Running>,
    pub(super) exchange: ReadExchange<Read>,
    /// Reads this replica sent, to send again on request.
    /// Kept until every replica of the region is durable past the latest
    /// place any participant read the transaction at
    /// (`crate::sent_reads`).
    pub(super) sent: SentReads<Reads>,
    /// Answers this replica gave (`None`: restart), for clients' queries.
    pub(super) outcomes: RecentMap<TxnId, Option<Outcome>>,
    /// Transactions finished since this process started (the end-of-run
    /// comparison tells a copy that works from one that waits).
    pub(super) finished: u64,
    pub(super) recovery: super::recovery::Recovery,
    /// The experiment's one scheduled remaster (`remaster_at`), if any.
    pub(super) scheduled: Option<super::ScheduledRemaster>,
}

impl Replica {
    pub fn new(topo: Arc<Topology>, me: NodeId, shard: ShardId, copy: u32, cfg: Config) -> Replica {
        let sequencers = super::group_in(&topo, topo.region_of(me));
        Replica {
            layout: topo.key_layout(),
            topo,
            me,
            shard,
            copy,
            sequencers,
            source: 0,
            silent_ticks: 0,
            next_pos: 0,
            applied: BTreeMap::new(),
            batch_at: BTreeMap::new(),
            held: BTreeMap::new(),
            store: BTreeMap::new(),
            headers: BTreeMap::new(),
            order_headers: BTreeMap::new(),
            streaks: RecentMap::new(cfg.outcomes_kept),
            scheduler: Scheduler::new(),
            running: BTreeMap::new(),
            exchange: ReadExchange::new(cfg.early_reads_max),
            sent: SentReads::new(cfg.reads_kept),
            outcomes: RecentMap::new(cfg.outcomes_kept),
            finished: 0,
            recovery: super::recovery::Recovery::default(),
            scheduled: None,
            cfg,
        }
    }

    /// With the experiment's one scheduled remaster (`remaster_at`).
    pub fn with_scheduled_remaster(mut self, scheduled: Option<super::ScheduledRemaster>) -> Replica {
        self.scheduled = scheduled;
        self
    }

    pub fn shard(&self) -> ShardId {
        self.shard
    }

    pub fn region(&self) -> RegionId {
        self.topo.region_of(self.me)
    }

    /// The shard's state at this replica.
    pub fn store(&self) -> &BTreeMap<Key, Value> {
        &self.store
    }

    /// The granule headers that differ from the layout's.
    pub fn headers(&self) -> &BTreeMap<Key, (Header, Since)> {
        &self.headers
    }

    /// The next global-log position this replica waits for.
    pub fn next_pos(&self) -> u64 {
        self.next_pos
    }

    /// Transactions admitted and not finished.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// The header stored with `key` (SLOG §3.2).
    pub fn header(&self, key: Key) -> Header {
        self.headers.get(&key).map_or(Header { home: self.layout.home_of(key), counter: 0 }, |(h, _)| *h)
    }

    /// The sequencer it fetches the log from.
    pub(super) fn sequencer(&self) -> NodeId {
        self.sequencers[self.source]
    }

    /// The replica of `shard` in this replica's copy (its region).
    fn peer(&self, shard: ShardId) -> NodeId {
        self.topo.replicas(shard)[self.copy as usize]
    }

    // ---- the region's global log, in order ----

    fn on_log(&mut self, ctx: &mut Ctx<'_, Slog>, entries: Vec<LogEntry>) {
        for e in entries {
            if e.pos == self.next_pos {
                self.apply(ctx, e);
            } else if e.pos > self.next_pos && self.held.len() < self.cfg.held_entries_max {
                self.held.insert(e.pos, e);
            }
        }
        self.apply_held(ctx);
        self.run_ready(ctx);
    }

    /// Applies the held positions now due, and drops those passed.
    pub(super) fn apply_held(&mut self, ctx: &mut Ctx<'_, Slog>) {
        while let Some(e) = self.held.remove(&self.next_pos) {
            self.apply(ctx, e);
        }
        let next = self.next_pos;
        self.held.retain(|pos, _| *pos >= next);
    }

    /// SLOG Figure 2, lock manager: each entry asks for its locks, in log
    /// order.
    fn apply(&mut self, ctx: &mut Ctx<'_, Slog>, e: LogEntry) {
        debug_assert_eq!(e.pos, self.next_pos);
        self.next_pos += 1;
        if e.batch.region != SNAPSHOTS {
            // What the copy applied: the local logs (a region's own
            // snapshot reads change nothing).
            let applied = self.applied.entry(e.batch.region).or_insert(0);
            assert_eq!(*applied, e.batch.seq, "each local log's batches in order");
            *applied += 1;
            self.batch_at.insert(e.pos, e.batch);
        }
        for (index, entry) in e.entries {
            let at = (e.pos, index);
            let Some(txn) = entry.txn().cloned() else { continue };
            if self.recovery.executed(txn.id) {
                ctx.count("replayed", 1);
                continue;
            }
            let home = entry.lock_home();
            let part: Part = (txn.id, home.map_or(ALL, |h| u32::from(h.0)));
            if self.running.get(&txn.id).is_some_and(|r| r.parts.iter().any(|(p, _)| *p == part)) {
                continue; // a repeat past the sequencers' memory
            }
            let mut locks = self.lock_set(&txn, home);
            let stale = self.check_counters(&txn, &locks, e.batch);
            if !stale.is_empty() {
                locks.clear(); // Figure 6: abort before taking any lock
            }
            self.scheduler.admit(part, order_of(at), &locks);
            let parts_needed = self.parts_needed(&txn, &entry);
            let now_ns = ctx.monotonic_ns();
            let r = self.running.entry(txn.id).or_insert_with(|| Running {
                txn,
                parts: Vec::new(),
                parts_needed,
                parts_ready: 0,
                batch: e.batch,
                stale: Vec::new(),
                admitted_ns: now_ns,
            });
            r.parts.push((part, at));
            r.batch = e.batch;
            r.stale.extend(stale);
        }
    }

    /// SLOG Figure 6, before lock acquisition: the granules whose header —
    /// as every entry before this one in the log leaves it — is not the
    /// one the transaction assumed. Such a part takes no lock, and the
    /// transaction aborts at every participant of every region alike. A
    /// remaster whose header is current moves the granule's log-order
    /// header at once, so the entries after it are checked against it
    /// even before it runs. (A header newer than the log's cannot occur:
    /// a batch relying on a remaster is placed after it, `sequencer.rs`.)
    fn check_counters(
        &mut self,
        txn: &Txn,
        locks: &[(Key, LockMode)],
        batch: BatchId,
    ) -> Vec<(Key, Header, Option<Since>)> {
        let mut stale = Vec::new();
        for (k, _) in locks {
            let assumed = txn.assumed(*k).expect("a locked key is annotated");
            let (current, batch) = self.order_header(*k);
            if current != assumed {
                let waits = self.cfg.remaster_wait;
                debug_assert!(!waits || current.counter >= assumed.counter, "a header newer than the log's");
                stale.push((*k, current, batch));
            }
        }
        if let (Some(to), true) = (txn.remaster, stale.is_empty()) {
            let (k, from) = txn.master_info[0];
            let since = Since { batch, orderer_batches: txn.orderer_batches };
            self.order_headers.insert(k, (Header { home: to, counter: from.counter + 1 }, since));
        }
        stale
    }

    /// A granule's header as the log's entries admitted so far leave it,
    /// with the batch of the remaster that wrote it.
    fn order_header(&self, key: Key) -> (Header, Option<Since>) {
        match self.order_headers.get(&key) {
            Some((h, b)) => (*h, Some(*b)),
            None => (self.header(key), self.headers.get(&key).map(|(_, b)| *b)),
        }
    }

    /// How many lock requests the transaction makes on this shard: one if
    /// single-home, one per assumed home of its keys here if multi-home.
    fn parts_needed(&self, txn: &Txn, entry: &Entry) -> usize {
        if matches!(entry, Entry::SingleHome(_) | Entry::Snapshot(_)) {
            return 1;
        }
        let mut homes: Vec<RegionId> =
            txn.master_info.iter().filter(|(k, _)| self.topo.shard_of(*k) == self.shard).map(|(_, h)| h.home).collect();
        homes.sort_unstable();
        homes.dedup();
        homes.len()
    }

    /// The transaction's keys on this shard assumed homed at `home` (all
    /// of them if `None`): read keys shared, written keys exclusive.
    fn lock_set(&self, txn: &Txn, home: Option<RegionId>) -> Vec<(Key, LockMode)> {
        if txn.remaster.is_some() {
            return txn.master_info.iter().map(|(k, _)| (*k, LockMode::Exclusive)).collect();
        }
        let (reads, writes) = txn.keys_on(self.shard, &self.topo);
        let mine = |k: &Key| home.is_none_or(|h| txn.assumed(*k).is_some_and(|a| a.home == h));
        let shared = reads.into_iter().filter(mine).map(|k| (k, LockMode::Shared));
        shared.chain(writes.into_iter().filter(mine).map(|k| (k, LockMode::Exclusive))).collect()
    }

    fn run_ready(&mut self, ctx: &mut Ctx<'_, Slog>) {
        while let Some((id, _)) = self.scheduler.pop_ready() {
            let r = self.running.get_mut(&id).expect("a ready part's transaction is running");
            r.parts_ready += 1;
            if r.parts_ready == r.parts_needed {
                if r.parts_needed > 1 || !r.txn.is_single_home() {
                    ctx.observe("lock_only_wait_us", ctx.monotonic_ns().saturating_sub(r.admitted_ns) / 1_000);
                }
                self.start(ctx, id);
            }
        }
    }

    // ---- execution (Calvin §3.2 phases 2-5, SLOG Figure 2) ----

    /// Sends this shard's reads to every other participant and waits for
    /// theirs. Unlike Calvin, every participant waits, even one that only
    /// reads: a transaction can wait at one shard for a multi-home
    /// transaction whose last LockOnlyTxn is still to come, and a shard
    /// that released its locks meanwhile would let a later transaction
    /// commit, and a client start another, that the waiting one is still to
    /// be ordered after — a real-time violation the swarm found, for a
    /// multi-home transaction (seeds 1012, 1079) and for a single-home one
    /// waiting behind a multi-home one (seed 6285). Figure 2 releases locks
    /// "at end of every transaction".
    fn start(&mut self, ctx: &mut Ctx<'_, Slog>, id: TxnId) {
        let r = self.running.get(&id).expect("a ready transaction is running").clone();
        let at = r.last_at();
        let own = self.local_reads(&r.txn, &r.stale);
        let others: Vec<ShardId> = r.txn.shards.iter().copied().filter(|s| *s != self.shard).collect();
        for o in &others {
            ctx.count("reads_sent", 1);
            ctx.send(self.peer(*o), Msg::Reads { txn: id, at, shard: self.shard, reads: own.clone() });
        }
        if !others.is_empty() {
            // Kept until this shard's last LockOnlyTxn for now (no later
            // than this replica's durable checkpoint, so not dropped while
            // it runs); `execute` knows the latest at any participant.
            self.sent.insert(id, at, Arc::new(own.clone()));
        }
        if let Some((all, latest)) = self.exchange.expect(id, &others, own, at.0) {
            self.execute(ctx, id, all, latest);
        }
    }

    /// The values of the transaction's keys on this shard — or, for a
    /// granule whose header is not the one the transaction assumed, that
    /// header (SLOG Figure 2).
    fn local_reads(&self, txn: &Txn, stale: &[(Key, Header, Option<Since>)]) -> Reads {
        let shard_of = |k: Key| self.topo.shard_of(k);
        let read = |k: Key| self.store.get(&k).cloned();
        let piece = txn.program.piece(self.shard, shard_of);
        let mut reads: BTreeMap<Key, Read> =
            piece.ops.iter().map(|op| (op.key(), Read::Value(read(op.key())))).collect();
        for n in txn.recon.iter().flat_map(|r| &r.keys).filter(|n| shard_of(n.key) == self.shard) {
            reads.insert(n.key, Read::Value(read(n.key)));
        }
        if let Some(p) = &piece.procedure {
            for part in &piece.parts {
                let mut memo = procedure::ReadMap::new();
                procedure::run_part(p, *part, &mut memo, read);
                reads.extend(memo.into_iter().map(|(k, v)| (k, Read::Value(v))));
            }
        }
        for (k, assumed) in txn.master_info.iter().filter(|(k, _)| shard_of(*k) == self.shard) {
            // Figure 2's check during execution: with every lock held (no
            // stale part), the header is the one admission checked.
            debug_assert!(!stale.is_empty() || self.header(*k) == *assumed, "Figure 2's check");
            if txn.remaster.is_some() {
                reads.insert(*k, Read::Value(None));
            }
        }
        for (k, header, batch) in stale {
            reads.insert(*k, Read::WrongHome(*header, *batch));
        }
        reads.into_iter().collect()
    }

    fn on_reads(&mut self, ctx: &mut Ctx<'_, Slog>, txn: TxnId, at: At, shard: ShardId, reads: Reads) {
        if self.recovery.executed(txn) {
            return; // finished here already
        }
        if let Some((all, latest)) = self.exchange.receive(txn, shard, reads, at.0) {
            self.execute(ctx, txn, all, latest);
        }
    }

    /// Runs the program on every participant's reads and installs this
    /// shard's writes — unless a granule's header was not the one assumed,
    /// or a version its reconnaissance assumed changed: then nothing is
    /// written, in every region alike, and the client is told to submit
    /// the transaction again.
    ///
    /// `latest` is the latest position any participant read at: the
    /// place of the transaction's last LockOnlyTxn in the region's log,
    /// past which no participant runs it, and until which the reads this
    /// replica sent are kept.
    fn execute(&mut self, ctx: &mut Ctx<'_, Slog>, id: TxnId, all: Reads, latest: u64) {
        let r = self.running.get(&id).expect("an executing transaction is running").clone();
        let at = r.last_at();
        let wrong: Vec<(Key, Header, Option<Since>)> = all
            .iter()
            .filter_map(|(k, v)| match v {
                Read::WrongHome(h, b) => Some((*k, *h, *b)),
                Read::Value(_) => None,
            })
            .collect();
        let wrong_home = !wrong.is_empty();
        if let Some(to) = r.txn.remaster {
            return self.execute_remaster(ctx, &r, to, wrong_home);
        }
        let mut writes = Vec::new();
        let mut outcome = None;
        if !wrong_home {
            let values: BTreeMap<Key, Option<Value>> = all
                .into_iter()
                .map(|(k, v)| match v {
                    Read::Value(v) => (k, v),
                    Read::WrongHome(..) => unreachable!("checked above"),
                })
                .collect();
            let read = |k: Key| values.get(&k).cloned().flatten();
            if r.txn
                .recon
                .as_ref()
                .is_none_or(|recon| r.txn.program.procedure.as_ref().is_some_and(|p| recon.covers(p, read)))
            {
                let exec = r.txn.program.execute(read);
                writes = exec.writes.into_iter().filter(|(k, _)| self.topo.shard_of(*k) == self.shard).collect();
                outcome = Some(Outcome::Committed { results: exec.results });
            }
        }
        for (k, v) in &writes {
            self.store.insert(*k, v.clone());
        }
        let sent = self.sent.get(id).map(|(until, reads)| ((latest.max(until.0), 0), Arc::clone(reads)));
        if let Some((until, reads)) = &sent {
            self.sent.insert(id, *until, Arc::clone(reads));
        }
        let mut answer = None;
        let ran = outcome.is_some();
        if super::responder(&self.topo, &r.txn) == self.me {
            answer = Some(self.answer(ctx, &r.txn, &wrong, outcome));
        } else if r.txn.first_shard(&self.topo) == self.shard {
            // Every copy of the first shard keeps the outcome, so a client
            // whose answering replica is down hears it from another
            // region: every region reaches the same outcome (§3.2).
            self.outcomes.insert(id, outcome);
        }
        if ran && r.txn.program.mode != ReadMode::Snapshot {
            self.count_accesses(ctx, &r.txn); // a snapshot read is no access at the home
        }
        self.record_executed(ctx, id, at, writes, None, sent, answer.flatten());
        self.finish(id);
    }

    /// A remaster request's turn (§3.4, Figure 6): if the granule's header
    /// is still the one the request saw, its home moves and its counter
    /// grows; otherwise another remaster went first and this one does
    /// nothing — in every region alike.
    fn execute_remaster(&mut self, ctx: &mut Ctx<'_, Slog>, r: &Running, to: RegionId, stale: bool) {
        let (key, from) = r.txn.master_info[0];
        let answering = super::responder(&self.topo, &r.txn) == self.me;
        let mut header = None;
        if stale {
            if answering {
                ctx.count("remaster_aborts", 1);
            }
        } else {
            let new = Header { home: to, counter: from.counter + 1 };
            let since = Since { batch: r.batch, orderer_batches: r.txn.orderer_batches };
            self.headers.insert(key, (new, since));
            if self.order_headers.get(&key).is_some_and(|(h, _)| *h == new) {
                self.order_headers.remove(&key); // no later remaster admitted
            }
            self.streaks.insert(key, (to, 0));
            header = Some((key, new, since));
            if answering {
                ctx.count("remasters", 1);
            }
            // The Lookup Master of this region learns it asynchronously.
            for s in &self.sequencers {
                ctx.send(*s, Msg::Remastered { key, header: new, since });
            }
        }
        self.record_executed(ctx, r.txn.id, r.last_at(), Vec::new(), header, None, None);
        self.finish(r.txn.id);
    }

    /// Whether this replica keeps `key`'s access streaks: the first replica
    /// of its shard in its home region.
    fn keeps(&self, key: Key) -> bool {
        let region = self.region();
        self.topo.shard_of(key) == self.shard
            && self.header(key).home == region
            && self.topo.replicas_in(self.shard, region).first() == Some(&self.me)
    }

    /// The experiment's one remaster (`remaster_at`; SLOG §4.1.1, Figure 11:
    /// "the remaster operation is initiated approximately five seconds into
    /// the experiment"): asked of this region's sequencers like a
    /// triggered one, so it runs the same path (§3.4).
    fn scheduled_remaster(&mut self, ctx: &mut Ctx<'_, Slog>) {
        let Some(s) = self.scheduled else { return };
        let header = self.header(s.key);
        if header.home == self.region() && s.to != header.home {
            ctx.count("remasters_asked", 1);
            ctx.send(self.sequencer(), Msg::RemasterRequest { key: s.key, from: header, to: s.to });
        }
    }

    /// PNUTS's heuristic (§3.4): a granule homed in this region whose last
    /// `remaster_after` accesses all came from one other region is
    /// remastered there. Kept by one replica of the shard in the home region.
    fn count_accesses(&mut self, ctx: &mut Ctx<'_, Slog>, txn: &Txn) {
        let region = self.region();
        let keeper = self.topo.replicas_in(self.shard, region).first() == Some(&self.me);
        if self.cfg.remaster_after == 0 || !keeper {
            return;
        }
        for (k, h) in txn.master_info.iter().filter(|(k, h)| h.home == region && self.topo.shard_of(*k) == self.shard) {
            let streak = match self.streaks.get(k) {
                Some((from, n)) if *from == txn.origin => n + 1,
                _ => 1,
            };
            if txn.origin != region && streak >= self.cfg.remaster_after {
                self.streaks.insert(*k, (txn.origin, 0));
                ctx.send(self.sequencer(), Msg::RemasterRequest { key: *k, from: *h, to: txn.origin });
            } else {
                self.streaks.insert(*k, (txn.origin, streak));
            }
        }
    }

    /// The answering replica tells the client its outcome — or, when the
    /// transaction aborted (`None`: a wrong home, or its reconnaissance no
    /// longer held), to submit it again, and after a lookup miss the
    /// origin's Lookup Master the headers it missed.
    fn answer(
        &mut self,
        ctx: &mut Ctx<'_, Slog>,
        txn: &Txn,
        wrong: &[(Key, Header, Option<Since>)],
        outcome: Option<Outcome>,
    ) -> Option<Outcome> {
        let id = txn.id;
        self.outcomes.insert(id, outcome.clone());
        let Some(outcome) = outcome else {
            if wrong.is_empty() {
                ctx.count("recon_aborts", 1);
            } else {
                ctx.count("lookup_misses", 1);
                self.teach_origin(ctx, txn, wrong);
            }
            ctx.send(id.node, Msg::Restart { id });
            return None;
        };
        let kind = match (txn.program.mode, txn.is_single_home()) {
            (ReadMode::Snapshot, _) => "snapshot_reads",
            (_, true) => "single_home",
            (_, false) => "multi_home",
        };
        ctx.count(kind, 1);
        ctx.send(id.node, Msg::Reply { id, outcome: outcome.clone() });
        Some(outcome)
    }

    /// After a lookup miss: the origin's Lookup Master learns the headers
    /// it missed (§3.4).
    fn teach_origin(&mut self, ctx: &mut Ctx<'_, Slog>, txn: &Txn, wrong: &[(Key, Header, Option<Since>)]) {
        let origin = super::group_in(&self.topo, txn.origin);
        for (key, header, since) in wrong {
            for s in since.iter().flat_map(|since| origin.iter().map(move |s| (*s, *since))) {
                ctx.send(s.0, Msg::Remastered { key: *key, header: *header, since: s.1 });
            }
        }
    }

    /// A client's reconnaissance pass reads this copy's current values.
    fn on_recon_read(&mut self, ctx: &mut Ctx<'_, Slog>, from: NodeId, request: RequestId, keys: Vec<Key>) {
        let values = crate::recon::read_values(&self.topo, self.shard, keys, |k| self.store.get(&k).cloned());
        ctx.send(from, Msg::ReconValues { request, values });
    }

    /// Releases the transaction's locks to the next in log order.
    fn finish(&mut self, id: TxnId) {
        let r = self.running.remove(&id).expect("a finishing transaction is running");
        for (part, _) in &r.parts {
            self.scheduler.finish(*part);
        }
        self.finished += 1;
    }

    // ---- lost messages ----

    fn on_reads_wanted(&mut self, ctx: &mut Ctx<'_, Slog>, from: NodeId, txn: TxnId) {
        if let Some((at, reads)) = self.sent.get(txn) {
            ctx.send(from, Msg::Reads { txn, at, shard: self.shard, reads: Reads::clone(reads) });
        }
    }

    fn on_query(&mut self, ctx: &mut Ctx<'_, Slog>, from: NodeId, id: TxnId) {
        match self.outcomes.get(&id) {
            Some(Some(outcome)) => ctx.send(from, Msg::Reply { id, outcome: outcome.clone() }),
            Some(None) => ctx.send(from, Msg::Restart { id }),
            None => {}
        }
    }

    /// Fetches the log (from the next sequencer of the group when this one
    /// is silent), asks again for reads waited on too long, and
    /// checkpoints.
    fn on_tick(&mut self, ctx: &mut Ctx<'_, Slog>) {
        ctx.set_timer(self.cfg.replica_tick_ns, Timer::ReplicaTick);
        self.silent_ticks += 1;
        if self.silent_ticks >= self.cfg.failover_ticks && self.sequencers.len() > 1 {
            self.source = (self.source + 1) % self.sequencers.len();
            self.silent_ticks = 0;
            ctx.count("log_failovers", 1);
        }
        self.fetch_log(ctx);
        self.want_reads(ctx);
        self.maybe_checkpoint(ctx);
        self.ask_checkpoint(ctx);
    }

    /// Positions from the next on, reporting where this replica's durable
    /// checkpoint resumes (the group may forget the log before it).
    fn fetch_log(&mut self, ctx: &mut Ctx<'_, Slog>) {
        let msg =
            Msg::FetchLog { shard: self.shard, from: self.next_pos, durable: self.recovery.catch_up.durable_pos() };
        ctx.send(self.sequencer(), msg);
    }

    /// Asks again for reads waited on for `reads_retry_ms` (only the
    /// participants still missing).
    fn want_reads(&mut self, ctx: &mut Ctx<'_, Slog>) {
        for (id, missing) in self.exchange.overdue(u64::from(self.cfg.reads_retry_ticks)) {
            for s in missing {
                ctx.count("reads_wanted", 1);
                ctx.send(self.peer(s), Msg::ReadsWanted { txn: id, shard: self.shard });
            }
        }
    }
}

impl Process<Slog> for Replica {
    fn on_start(&mut self, ctx: &mut Ctx<'_, Slog>, durable: Vec<Record>) {
        let first_start = durable.is_empty();
        self.restart(durable);
        if let Some(at) = self.scheduled.filter(|s| first_start && self.keeps(s.key)) {
            ctx.set_timer(at.at_ns, Timer::Remaster);
        }
        ctx.set_timer(self.cfg.replica_tick_ns, Timer::ReplicaTick);
        self.fetch_log(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Slog>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Log { shard, entries } if shard == self.shard => {
                if from == self.sequencer() {
                    self.silent_ticks = 0;
                }
                self.on_log(ctx, entries)
            }
            Msg::Reads { txn, at, shard, reads } => self.on_reads(ctx, txn, at, shard, reads),
            Msg::ReadsWanted { txn, .. } => self.on_reads_wanted(ctx, from, txn),
            Msg::Query { id } => self.on_query(ctx, from, id),
            Msg::ReconRead { request, keys } => self.on_recon_read(ctx, from, request, keys),
            Msg::Truncated { shard, base } if shard == self.shard => self.on_truncated(ctx, base),
            // Never past a transaction still running here (below is no
            // later than this replica's durable checkpoint, so it is not).
            Msg::RegionDurable { below } => self.sent.past(below.min(self.resume_pos())),
            Msg::FetchCheckpoint { shard, from: pos, need } if shard == self.shard => {
                self.on_fetch_checkpoint(ctx, from, pos, need)
            }
            Msg::Checkpoint { shard, checkpoint } if shard == self.shard => self.install_checkpoint(ctx, checkpoint),
            // Another shard's.
            Msg::Log { .. } | Msg::Truncated { .. } | Msg::FetchCheckpoint { .. } | Msg::Checkpoint { .. } => {}
            // Messages to sequencers and clients.
            Msg::Progress { .. }
            | Msg::Paxos(_)
            | Msg::Leader { .. }
            | Msg::ReconValues { .. }
            | Msg::Submit { .. }
            | Msg::Forward(_)
            | Msg::Ship(_)
            | Msg::Tip { .. }
            | Msg::Replicate(_)
            | Msg::Replicated { .. }
            | Msg::FetchBatch { .. }
            | Msg::FetchLog { .. }
            | Msg::Reply { .. }
            | Msg::Restart { .. }
            | Msg::RemasterRequest { .. }
            | Msg::Remastered { .. } => {}
        }
        self.run_ready(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Slog>, timer: Timer) {
        match timer {
            Timer::ReplicaTick => self.on_tick(ctx),
            Timer::Remaster => self.scheduled_remaster(ctx),
            Timer::Paxos(_) | Timer::Batch | Timer::SequencerTick | Timer::ClientTick => {
                unreachable!("a sequencer's or client's timer at a replica")
            }
        }
        self.run_ready(ctx);
    }

    fn on_persisted(&mut self, _ctx: &mut Ctx<'_, Slog>, upto: Lsn) {
        self.recovery.catch_up.persisted(upto);
    }

    fn copy_state(&self) -> Option<CopyState> {
        let settled = self
            .running
            .is_empty()
            .then(|| Settled { applied: digest(&self.applied), hash: digest(&(&self.store, &self.headers)) });
        Some(CopyState { shard: self.shard, settled, finished: self.finished })
    }

    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("running", self.running.len());
        out("held_entries", self.held.len());
        let (waiting, early) = self.exchange.pending();
        out("reads_waiting", waiting);
        out("reads_early", early);
        out("reads_kept", self.sent.len());
        out("outcomes", self.outcomes.len());
        out("executed_after_checkpoint", self.recovery.executed_len());
        out("access_streaks", self.streaks.len());
        out("remasters_admitted", self.order_headers.len());
    }

    fn check_invariants(&self) {
        self.recovery.catch_up.check_invariants(self.next_pos);
        let parts: usize = self.running.values().map(|r| r.parts.len()).sum();
        assert_eq!(parts, self.scheduler.len(), "admitted parts = the running transactions' parts");
        assert!(self.held.len() <= self.cfg.held_entries_max, "held entries past their bound");
        assert!(self.held.keys().next().is_none_or(|p| *p > self.next_pos), "a held entry is due");
        for (id, r) in self.running.iter().take(CHECKED_MAX) {
            assert!(r.first_at().0 < self.next_pos, "{id:?} runs ahead of the log");
            assert!(r.txn.shards.contains(&self.shard), "{id:?} does not touch this shard");
            assert!(r.parts_ready <= r.parts.len() && r.parts.len() <= r.parts_needed, "{id:?}: parts");
        }
        let (waiting, early) = self.exchange.pending();
        assert!(waiting <= self.running.len(), "waiting for reads of a transaction not running");
        assert!(early <= self.cfg.early_reads_max, "early reads past their bound");
    }
}
