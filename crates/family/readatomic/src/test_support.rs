//! What the handler tests of this crate's protocols share: a deployment
//! of two shards with one replica (the partition) each and one client.

use meridian_core::{
    ClusterSpec, Deployment, Key, LatencyMatrix, LeaderPlacement, NodeId, Params, RegionId, ShardId, Topology,
};
use std::sync::Arc;

/// Two shards, one replica (the partition) each, one client.
pub fn deployment() -> Deployment {
    deployment_with_clients(1)
}

/// Two shards, one replica (the partition) each, `clients` clients.
pub fn deployment_with_clients(clients: u32) -> Deployment {
    let matrix = LatencyMatrix::preset("tiga-gcp").unwrap();
    let spec = ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions: vec![RegionId(0)],
        shards: 2,
        replicas_per_shard: 1,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(0)],
        clients_per_region: clients,
    };
    let topology = Arc::new(Topology::build(&spec, &[]));
    Deployment { topology, params: Params::new(), epsilon_us: 100, latency: Arc::new(matrix) }
}

/// The partition of `shard`.
pub fn partition(d: &Deployment, shard: u32) -> NodeId {
    d.topology.initial_leader(ShardId(shard))
}

/// A key on `shard`, the `n`-th.
pub fn key_on(d: &Deployment, shard: u32, n: usize) -> Key {
    (0..).map(Key).filter(|k| d.topology.shard_of(*k).0 == shard).nth(n).unwrap()
}
