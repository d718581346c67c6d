//! Primary-backup replication (NOC-NOC "Towards Performance-optimal
//! Distributed Transactions" §5.2, §7.1): each partition ships what it
//! commits to its backup in a second datacenter, asynchronously. Whatever
//! the network and crashes do, once the writes stop every backup holds
//! each key's newest committed version of its primary.

mod replication;

use meridian_core::{Key, NodeId, ShardId};
use meridian_core::{ParamValue, Params};
use meridian_readatomic::ramp::{NodeF, RampF};
use meridian_readatomic::ranoc2::{Node as Noc2Node, RaNoc2};
use meridian_sim::{NetConfig, Sim};
use replication::{MS, assert_backups_caught_up, load, shipped, sim};

fn ramp_primary(s: &Sim<RampF>, n: NodeId, k: Key) -> Option<u64> {
    match s.process(n) {
        Some(NodeF::Partition(p)) => p.last_commit(k).map(|t| t.0),
        _ => panic!("{} is not a live partition", s.topology().name(n)),
    }
}

fn ramp_backup(s: &Sim<RampF>, n: NodeId, k: Key) -> Option<u64> {
    match s.process(n) {
        Some(NodeF::Backup(b)) => b.version_of(k),
        _ => panic!("{} is not a live backup", s.topology().name(n)),
    }
}

#[test]
fn every_backup_holds_its_primarys_newest_committed_versions_once_writes_stop() {
    let mut s = sim::<RampF>(1, NetConfig::default());
    let committed = load(&mut s, 100, 0);
    assert!(committed > 150, "{committed} writes committed");
    let t = s.now_ns() + 2_000 * MS;
    s.run_until(t);
    assert_backups_caught_up(&s, ramp_primary, ramp_backup);
}

#[test]
fn backups_catch_up_through_loss_duplication_and_reordering() {
    let net = NetConfig { jitter_mean_ns: 2 * MS, loss: 0.1, duplicate: 0.1, reorder: true };
    let mut s = sim::<RampF>(2, net);
    load(&mut s, 100, 0);
    // Quiet network for the tail: lost batches are sent again.
    let t = s.now_ns() + 5_000 * MS;
    s.run_until(t);
    assert_backups_caught_up(&s, ramp_primary, ramp_backup);
}

/// A backup that crashes keeps what it made durable and acknowledged, and
/// is sent again what it had not; a primary that restarts forgot which
/// batches were in flight and resyncs its backup with its whole state.
#[test]
fn a_restarted_backup_or_primary_ends_with_the_backup_caught_up() {
    let mut s = sim::<RampF>(3, NetConfig::default());
    load(&mut s, 40, 0);
    let backup = s.topology().replicas(ShardId(0))[1];
    let primary = s.topology().replicas(ShardId(1))[0];
    s.crash(backup);
    load(&mut s, 40, 10_000);
    s.restart(backup);
    load(&mut s, 20, 20_000);
    s.crash(primary);
    let t = s.now_ns() + 100 * MS;
    s.run_until(t);
    s.restart(primary);
    load(&mut s, 40, 30_000);
    let t = s.now_ns() + 5_000 * MS;
    s.run_until(t);
    assert_backups_caught_up(&s, ramp_primary, ramp_backup);
    assert!(
        s.counters().get("backup_resyncs").is_some_and(|n| *n >= 1),
        "the restarted primary resynced: {:?}",
        s.counters()
    );
}

#[test]
fn ra_noc2_backups_catch_up_too() {
    let net = NetConfig { jitter_mean_ns: MS, loss: 0.05, duplicate: 0.05, reorder: true };
    let mut s = sim::<RaNoc2>(4, net);
    load(&mut s, 100, 0);
    let t = s.now_ns() + 5_000 * MS;
    s.run_until(t);
    let primary = |s: &Sim<RaNoc2>, n: NodeId, k: Key| match s.process(n) {
        Some(Noc2Node::Partition(p)) => p.last_commit(k).map(|t| t.0),
        _ => panic!("not a live partition"),
    };
    let backup = |s: &Sim<RaNoc2>, n: NodeId, k: Key| match s.process(n) {
        Some(Noc2Node::Backup(b)) => b.version_of(k),
        _ => panic!("not a live backup"),
    };
    assert_backups_caught_up(&s, primary, backup);
}

/// The replication's pace and bounds are the deployment's parameters:
/// batches hold at most `ship_batch_max` versions and go every
/// `ship_tick_ms`, and the backups catch up all the same.
#[test]
fn the_shipping_pace_and_batch_bound_are_parameters_and_backups_still_catch_up() {
    let (batches, versions) = shipped::<RampF>(Params::new(), ramp_primary, ramp_backup);
    assert!(batches > 0 && versions >= batches, "{batches} batches of {versions} versions");
    let one = Params::new().with("ship_batch_max", ParamValue::Int(1));
    let (one_batches, one_versions) = shipped::<RampF>(one, ramp_primary, ramp_backup);
    assert_eq!(one_batches, one_versions, "batches of one version each");
    let slow = Params::new().with("ship_tick_ms", ParamValue::Int(100));
    let (slow_batches, slow_versions) = shipped::<RampF>(slow, ramp_primary, ramp_backup);
    assert!(
        slow_batches * 4 < batches && slow_versions > 2 * slow_batches,
        "every 100 ms: {slow_batches} batches of {slow_versions} versions; every 5 ms: {batches} of {versions}"
    );
}
