//! What the read-atomic partitions share: the cooperative termination
//! protocol's answers ("Scalable Atomic Visibility with RAMP Transactions"
//! §4.6; NOC-NOC §5.2 takes it from RAMP), its questions, garbage
//! collection, and the checkpoint after every event. Each protocol's
//! partition supplies its state changes (`apply_commit`, `apply_abort`),
//! its durable appends and its held answers; the handlers here sequence
//! them the same way for every protocol.

use super::backup::Primary;
use super::events::PartitionEvents;
use super::{EnvOf, Timer, Wire, partition_of};
use crate::ramp::pending::{Pending, Verdict};
use crate::ramp::recovery::Checkpoints;
use crate::ramp::versions::Versions;
use crate::ramp::{Common, Held, Ts};
use meridian_core::{Lsn, NodeId, ShardId, Topology};
use meridian_mechanisms::durable::AfterDurable;
use meridian_mechanisms::primary_backup::Ship;
use std::sync::Arc;

/// The state every read-atomic partition keeps: its versions (RAMP's
/// `versions`, NOC-NOC's `vers`), its pending transactions with the
/// termination protocol's bookkeeping, the answers held until an append is
/// durable, and when a checkpoint is due.
pub(crate) struct Base<M> {
    pub topo: Arc<Topology>,
    pub shard: ShardId,
    pub common: Common,
    pub versions: Versions,
    pub pending: Pending,
    pub out: AfterDurable<(NodeId, M)>,
    pub checkpoints: Checkpoints,
    /// Primary-backup replication to the shard's other replicas, if it
    /// has any (`super::backup`).
    pub primary: Primary,
}

impl<M> Base<M> {
    /// A partition of `shard` holding nothing; it remembers
    /// `aborted_remembered` refusals in `pending`.
    pub fn new(topo: Arc<Topology>, shard: ShardId, common: Common, aborted_remembered: usize) -> Base<M> {
        Base {
            topo,
            shard,
            versions: Versions::new(common.gc_window_ns, common.superseded_max),
            pending: Pending::new(shard, common.pending_max, aborted_remembered),
            out: AfterDurable::new(),
            checkpoints: Checkpoints::new(common.checkpoint_records),
            primary: Primary::default(),
            common,
        }
    }

    /// An append at `lsn`: held answers wait for it, a checkpoint counts it.
    pub fn appended(&mut self, lsn: Lsn) {
        self.out.appended(lsn);
        self.checkpoints.appended(lsn);
    }

    pub fn check_invariants(&self) {
        self.versions.check_invariants();
        self.pending.check_invariants();
        self.out.check_invariants();
        self.primary.check_invariants();
    }
}

/// A read-atomic partition, as the shared handlers drive it.
pub(crate) trait Core {
    type Msg: Wire;

    fn base(&self) -> &Base<Self::Msg>;
    fn base_mut(&mut self) -> &mut Base<Self::Msg>;
    /// The partition's state as a checkpoint record.
    fn checkpoint(&self) -> <Self::Msg as Wire>::Record;
    /// A (re)start: the state its durable records rebuild.
    fn restore(&mut self, durable: Vec<<Self::Msg as Wire>::Record>, now_ns: u64);
    /// Commits `ts` here (its versions, `lastCommit` / `latest`); false if
    /// it is not pending here.
    fn apply_commit(&mut self, ts: Ts, now_ns: u64) -> bool;
    /// `ts` never commits: its versions here go, a later prepare is refused.
    fn apply_abort(&mut self, ts: Ts);
    /// Appends `record` (answers sent after it wait until it is durable).
    fn append(&mut self, ctx: &mut EnvOf<'_, Self::Msg>, record: <Self::Msg as Wire>::Record) -> Lsn;
    /// Sends `msg` once everything appended so far is durable.
    fn send_durable(&mut self, ctx: &mut EnvOf<'_, Self::Msg>, to: NodeId, msg: Self::Msg);

    /// §4.6, the answers: commit once every other participant holds `ts`
    /// (and tell them to), abort as soon as one refused it.
    fn on_prepare_state(&mut self, ctx: &mut EnvOf<'_, Self::Msg>, from: NodeId, ts: Ts, held: Held, now_ns: u64) {
        let Some(from_shard) = self.base().topo.replica_of(from).map(|(s, _)| s) else { return };
        match self.base_mut().pending.answer(ts, from_shard, held) {
            Verdict::Abort => {
                ctx.count("ctp_aborts", 1);
                self.apply_abort(ts);
                self.append(ctx, Self::Msg::aborted_record(ts));
            }
            Verdict::Commit { others } => self.commit_by_ctp(ctx, ts, others, now_ns),
            Verdict::Undecided => {}
        }
    }

    /// §4.6: every participant holds `ts`: commit it here, and tell the
    /// others to.
    fn commit_by_ctp(&mut self, ctx: &mut EnvOf<'_, Self::Msg>, ts: Ts, others: Vec<ShardId>, now_ns: u64) {
        ctx.count("ctp_commits", 1);
        self.apply_commit(ts, now_ns);
        self.append(ctx, Self::Msg::committed_record(ts));
        for shard in others {
            let to = partition_of(&self.base().topo, shard);
            self.send_durable(ctx, to, Self::Msg::commit(ts));
        }
    }

    /// Drops the versions overwritten for `gc_window_ms`.
    fn on_gc_tick(&mut self, ctx: &mut EnvOf<'_, Self::Msg>, now_ns: u64) {
        let base = self.base_mut();
        super::events::collect_versions(ctx, &mut base.versions, &base.common, now_ns);
    }

    /// §4.6: asks the other participants of every transaction pending for
    /// `ctp_ms`.
    fn on_ctp_tick(&mut self, ctx: &mut EnvOf<'_, Self::Msg>, now_ns: u64) {
        let common = self.base().common;
        ctx.set_timer(common.ctp_tick_ns, Timer::Ctp);
        for q in self.base_mut().pending.due(now_ns, common.ctp_ns) {
            if q.ask.is_empty() {
                // Nobody left to ask: this partition alone was written (had
                // others been, the last of their answers would have decided
                // it). It holds the transaction, so every participant does:
                // it commits, or it would stay pending for good when its
                // writer stopped before COMMIT (and hold back RA-NOC2's
                // safe time with it).
                self.commit_by_ctp(ctx, q.ts, Vec::new(), now_ns);
                continue;
            }
            for shard in &q.ask {
                ctx.count("ctp_runs", 1);
                let to = partition_of(&self.base().topo, *shard);
                ctx.send(to, Self::Msg::check_prepared(&q));
            }
        }
    }

    /// After a (re)start: replication to the shard's backups, if it has
    /// any (`super::backup::Primary`).
    fn start_shipping(&mut self, ctx: &mut EnvOf<'_, Self::Msg>) {
        let base = self.base_mut();
        base.primary.start(ctx, &base.topo, base.shard, &mut base.versions, &base.common.replication);
    }

    /// The shipping tick: this tick's commits to the backups, once the
    /// records before them are durable.
    fn on_ship_tick(&mut self, ctx: &mut EnvOf<'_, Self::Msg>, now_ns: u64) {
        let base = self.base_mut();
        let out = base.primary.on_tick(ctx, &mut base.versions, &base.common.replication, now_ns);
        self.send_shipped(ctx, out);
    }

    /// A backup's acknowledgement or answer to a probe.
    fn on_ship(&mut self, ctx: &mut EnvOf<'_, Self::Msg>, from: NodeId, msg: Ship, now_ns: u64) {
        let base = self.base_mut();
        let out = base.primary.on_message(ctx, &base.versions, from, msg, now_ns);
        self.send_shipped(ctx, out);
    }

    fn send_shipped(&mut self, ctx: &mut EnvOf<'_, Self::Msg>, out: Vec<(NodeId, Ship)>) {
        for (to, s) in out {
            self.send_durable(ctx, to, Self::Msg::ship(s));
        }
    }

    /// After every event: a checkpoint when one is due.
    fn after_event(&mut self, ctx: &mut EnvOf<'_, Self::Msg>) {
        ctx.charge_keys(self.base().versions.take_touched());
        if let Some(upto) = self.base_mut().checkpoints.due() {
            let snapshot = self.checkpoint();
            ctx.compact(upto, snapshot);
            ctx.count("checkpoints", 1);
        }
    }
}

/// Every read-atomic partition's start and timers (`super::events`) run
/// the handlers above. `Core` is this crate's: only its own partitions
/// (RAMP's, RA-NOC2's) have this impl, whatever its public trait says.
#[allow(private_bounds, private_interfaces)]
impl<C: Core> PartitionEvents<C::Msg, <C::Msg as Wire>::Record> for C {
    fn common(&self) -> &Common {
        &self.base().common
    }

    fn versions(&self) -> &Versions {
        &self.base().versions
    }

    fn restore(&mut self, durable: Vec<<C::Msg as Wire>::Record>, now_ns: u64) {
        Core::restore(self, durable, now_ns);
    }

    fn start_shipping(&mut self, ctx: &mut EnvOf<'_, C::Msg>) {
        Core::start_shipping(self, ctx);
    }

    fn on_gc_tick(&mut self, ctx: &mut EnvOf<'_, C::Msg>, now_ns: u64) {
        Core::on_gc_tick(self, ctx, now_ns);
    }

    fn on_ctp_tick(&mut self, ctx: &mut EnvOf<'_, C::Msg>, now_ns: u64) {
        Core::on_ctp_tick(self, ctx, now_ns);
    }

    fn on_ship_tick(&mut self, ctx: &mut EnvOf<'_, C::Msg>, now_ns: u64) {
        Core::on_ship_tick(self, ctx, now_ns);
    }

    fn after_event(&mut self, ctx: &mut EnvOf<'_, C::Msg>) {
        Core::after_event(self, ctx);
    }
}
