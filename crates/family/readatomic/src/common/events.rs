//! The timers of the read-atomic and transactional causal protocols, and
//! the start and timer events of their roles, written once: a partition
//! restores what it made durable, arms its collection and termination
//! ticks and starts replicating to its backups; each of its ticks does
//! its duty and, as every event, ends with the checkpoint due
//! (`ramp`, `ranoc2`, `meridian-causal`'s `eiger` partitions); a client's
//! one timer is its retry tick.
//!
//! It must never change the order of effects the roles had before it was
//! shared (the protocols' trace hashes stay as they were).

use crate::ramp::Common;
use crate::ramp::versions::Versions;
use meridian_core::Env;

/// The timers of every protocol of this family and of Eiger's.
#[derive(Clone, Debug)]
pub enum Timer {
    /// Partition: drop versions superseded for `gc_window_ms`.
    Gc,
    /// Partition: run the termination protocol on transactions prepared
    /// and not committed for `ctp_ms`.
    Ctp,
    /// Client: re-send unanswered rounds and phases, give up after
    /// `max_attempts`, refresh its view (RA-NOC2, RA-NOC, Eiger).
    ClientTick,
    /// Partition: ship this tick's commits to the backups.
    Ship,
}

/// A partition's restart and periodic duties, each protocol's own.
pub trait PartitionEvents<M, R> {
    /// Its knobs (the ticks' periods).
    fn common(&self) -> &Common;
    /// Its versions (what it charges the cost model per key).
    fn versions(&self) -> &Versions;
    /// A (re)start: the state its durable records rebuild.
    fn restore(&mut self, durable: Vec<R>, now_ns: u64);
    /// After a (re)start: replication to the shard's backups, if any.
    fn start_shipping(&mut self, ctx: &mut dyn Env<M, R, Timer>);
    fn on_gc_tick(&mut self, ctx: &mut dyn Env<M, R, Timer>, now_ns: u64);
    fn on_ctp_tick(&mut self, ctx: &mut dyn Env<M, R, Timer>, now_ns: u64);
    fn on_ship_tick(&mut self, ctx: &mut dyn Env<M, R, Timer>, now_ns: u64);
    /// After every event: a checkpoint when one is due.
    fn after_event(&mut self, ctx: &mut dyn Env<M, R, Timer>);
}

/// A partition's `Process::on_start`.
pub fn start_partition<M, R>(p: &mut impl PartitionEvents<M, R>, ctx: &mut dyn Env<M, R, Timer>, durable: Vec<R>) {
    let now_ns = ctx.monotonic_ns();
    p.restore(durable, now_ns);
    // Replaying the log installs and commits keys: the restart pays for
    // them, not the first event after it.
    ctx.charge_keys(p.versions().take_touched());
    ctx.set_timer(p.common().gc_tick_ns, Timer::Gc);
    ctx.set_timer(p.common().ctp_tick_ns, Timer::Ctp);
    p.start_shipping(ctx);
}

/// A partition's collection tick (every partition's `on_gc_tick`): drops
/// the versions overwritten for `gc_window_ms`, and comes again.
pub fn collect_versions<M, R>(ctx: &mut dyn Env<M, R, Timer>, versions: &mut Versions, common: &Common, now_ns: u64) {
    ctx.set_timer(common.gc_tick_ns, Timer::Gc);
    let dropped = versions.collect(now_ns);
    if dropped > 0 {
        ctx.count("gc_versions", dropped);
    }
}

/// A partition's `Process::on_timer`.
pub fn partition_timer<M, R>(p: &mut impl PartitionEvents<M, R>, ctx: &mut dyn Env<M, R, Timer>, timer: Timer) {
    let now_ns = ctx.monotonic_ns();
    match timer {
        Timer::Gc => p.on_gc_tick(ctx, now_ns),
        Timer::Ctp => p.on_ctp_tick(ctx, now_ns),
        Timer::Ship => p.on_ship_tick(ctx, now_ns),
        Timer::ClientTick => unreachable!("a client's timer at a partition"),
    }
    p.after_event(ctx);
}

/// A client's `Process::on_timer`: its one timer is its retry tick.
pub fn client_timer(timer: Timer, on_tick: impl FnOnce()) {
    match timer {
        Timer::ClientTick => on_tick(),
        Timer::Gc | Timer::Ctp | Timer::Ship => unreachable!("a partition's timer at a client"),
    }
}
