//! Primary-backup replication of Eiger-NOC2's partitions (NOC-NOC
//! "Towards Performance-optimal Distributed Transactions" §7.1, after
//! Eiger-PORT's deployment): the read-atomic protocols' replication
//! (`meridian_readatomic::common::backup`) on Eiger's versions, checked as
//! there — once writes stop, every backup holds its primary's newest
//! committed version of every key, through loss, duplication, reordering
//! and restarts.

#[path = "../../readatomic/tests/replication/mod.rs"]
mod replication;

use meridian_causal::eigernoc2::{EigerNoc2, Node};
use meridian_core::{Key, NodeId, ShardId};
use meridian_core::{ParamValue, Params};
use meridian_sim::{NetConfig, Sim};
use replication::{MS, assert_backups_caught_up, load, shipped, sim};

fn primary_version(s: &Sim<EigerNoc2>, n: NodeId, k: Key) -> Option<u64> {
    match s.process(n) {
        Some(Node::Partition(p)) => p.last_commit(k).map(|t| t.0),
        _ => panic!("not a live partition"),
    }
}

fn backup_version(s: &Sim<EigerNoc2>, n: NodeId, k: Key) -> Option<u64> {
    match s.process(n) {
        Some(Node::Backup(b)) => b.version_of(k),
        _ => panic!("not a live backup"),
    }
}

#[test]
fn eiger_noc2_backups_catch_up_through_loss_duplication_reordering_and_restarts() {
    let net = NetConfig { jitter_mean_ns: MS, loss: 0.05, duplicate: 0.05, reorder: true };
    let mut s = sim::<EigerNoc2>(5, net);
    load(&mut s, 60, 0);
    let backup = s.topology().replicas(ShardId(0))[1];
    let primary = s.topology().replicas(ShardId(2))[0];
    s.crash(backup);
    s.crash(primary);
    load(&mut s, 20, 10_000);
    s.restart(backup);
    s.restart(primary);
    load(&mut s, 60, 20_000);
    let t = s.now_ns() + 5_000 * MS;
    s.run_until(t);
    assert_backups_caught_up(&s, primary_version, backup_version);
    assert!(s.counters().get("backup_resyncs").is_some_and(|n| *n >= 1), "{:?}", s.counters());
}

/// Eiger's partitions replicate through the same shared primary, with the
/// same parameters: batches of one version when `ship_batch_max` is 1.
#[test]
fn eiger_noc2_ships_by_the_shared_replication_parameters() {
    let one = Params::new().with("ship_batch_max", ParamValue::Int(1));
    let (batches, versions) = shipped::<EigerNoc2>(one, primary_version, backup_version);
    assert!(batches > 0, "nothing shipped");
    assert_eq!(batches, versions, "batches of one version each");
}
