//! The replication tests' world, for every protocol replicated by
//! `meridian_readatomic::common::backup` (this crate's and
//! `meridian-causal`'s, which includes this file): a simulator of three
//! shards, each a partition with a backup in a second datacenter, write
//! load, and the check that backups caught up.

#![allow(dead_code)] // each test file uses its own part

use meridian_core::{
    ClusterSpec, Deployment, Key, LatencyMatrix, LeaderPlacement, NodeId, Op, Outcome, Params, Program, Protocol,
    RegionId, RequestId, ShardId, Topology, Value,
};
use meridian_sim::{Completion, NetConfig, Sim, SimConfig};
use std::sync::Arc;

pub const MS: u64 = 1_000_000;
const KEYS: u64 = 40;

/// Three shards, each a partition in the first region and a backup in
/// the second (the paper's two datacenters, here 60 ms apart in the
/// `tiga-gcp` preset's first two regions); clients in the first region.
pub fn sim<P: Protocol>(seed: u64, net: NetConfig) -> Sim<P> {
    sim_with(seed, net, Params::new())
}

/// The same with the protocol's `params`.
pub fn sim_with<P: Protocol>(seed: u64, net: NetConfig, params: Params) -> Sim<P> {
    let matrix = LatencyMatrix::preset("tiga-gcp").unwrap();
    let spec = ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions: vec![RegionId(0), RegionId(1)],
        shards: 3,
        replicas_per_shard: 2,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(0)],
        clients_per_region: 2,
    };
    let topology = Arc::new(Topology::build(&spec, &[]));
    let latency = Arc::new(matrix.clone());
    let mut cfg = SimConfig::ideal(seed, topology.clone(), matrix);
    cfg.net = net;
    Sim::new(cfg, Deployment { topology, params, epsilon_us: 100, latency }).unwrap()
}

/// A write-only transaction of three keys.
fn write(round: u64, client: u64) -> Program {
    let tag = round * 16 + client * 4;
    Program::new(
        (0..3)
            .map(|i| {
                let key = Key((round * 7 + client * 13 + i * 5) % KEYS);
                Op::Write { key, value: Value::int(tag + i, tag as i64) }
            })
            .collect(),
    )
}

/// Writes from every client, one at a time, for `rounds` rounds of 20 ms.
pub fn load<P: Protocol>(s: &mut Sim<P>, rounds: u64, first_request: u64) -> usize {
    let clients: Vec<NodeId> = s.topology().clients().to_vec();
    let mut done: Vec<Completion> = Vec::new();
    for round in 0..rounds {
        for (i, c) in clients.iter().enumerate() {
            let id = RequestId(first_request + round * clients.len() as u64 + i as u64);
            s.request(*c, id, write(round, i as u64));
        }
        let t = s.now_ns() + 20 * MS;
        s.run_until(t);
        done.extend(s.take_completions());
    }
    done.iter().filter(|c| matches!(c.outcome, Outcome::Committed { .. })).count()
}

/// Every backup holds its primary's newest committed version of every key.
pub fn assert_backups_caught_up<P: Protocol>(
    s: &Sim<P>,
    primary_version: impl Fn(&Sim<P>, NodeId, Key) -> Option<u64>,
    backup_version: impl Fn(&Sim<P>, NodeId, Key) -> Option<u64>,
) {
    assert!(s.violations().is_empty(), "{:?}", s.violations());
    let topo = s.topology();
    let mut held = 0;
    for shard in 0..topo.shards {
        let replicas = topo.replicas(ShardId(shard)).to_vec();
        let (primary, backup) = (replicas[0], replicas[1]);
        assert_eq!(topo.initial_leader(ShardId(shard)), primary, "the primary is the first replica");
        for k in (0..KEYS).map(Key).filter(|k| topo.shard_of(*k) == ShardId(shard)) {
            let want = primary_version(s, primary, k);
            assert_eq!(backup_version(s, backup, k), want, "{} key {k:?}", topo.name(backup));
            held += usize::from(want.is_some());
        }
    }
    assert!(held > KEYS as usize / 2, "most keys were written: {held}");
}

/// The replication's counters after `load` and two quiet seconds, with the
/// backups checked caught up: (`shipped_batches`, `shipped_versions`).
pub fn shipped<P: Protocol>(
    params: Params,
    primary_version: impl Fn(&Sim<P>, NodeId, Key) -> Option<u64>,
    backup_version: impl Fn(&Sim<P>, NodeId, Key) -> Option<u64>,
) -> (u64, u64) {
    let mut s = sim_with::<P>(1, NetConfig::default(), params);
    load(&mut s, 100, 0);
    let t = s.now_ns() + 2_000 * MS;
    s.run_until(t);
    assert_backups_caught_up(&s, primary_version, backup_version);
    let count = |name: &str| s.counters().get(name).copied().unwrap_or(0);
    (count("shipped_batches"), count("shipped_versions"))
}
