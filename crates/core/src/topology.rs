//! Who is where: regions, shards, replicas, leaders, services and clients,
//! with stable node names (`shard0-replica1`, `client-finland-0`,
//! `viewmgr-2`).
//!
//! Replicas of a shard are placed one per server region, in order (replica
//! `r` lives in `server_regions[r % n]`). The initial leader of each shard
//! follows the placement policy: `Colocated` puts every shard's leader at
//! replica 0 (so all leaders share `server_regions[0]`), `Spread` rotates the
//! leader of shard `s` to replica `s % replicas`.

use crate::ids::{Key, NodeId, RegionId, ShardId};
use serde::{Deserialize, Serialize};

/// Where the initial shard leaders go.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum LeaderPlacement {
    Colocated,
    Spread,
}

/// What a node does.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Role {
    /// Replica `replica` of shard `shard`.
    Replica { shard: ShardId, replica: u32 },
    /// A protocol service (view manager, sequencer, oracle, ...): `kind` is
    /// the service name, `index` its member number.
    Service { kind: String, index: u32 },
    /// A client (and the coordinator co-located with it): `index` counts the
    /// clients of its region, `global` all clients.
    Client { index: u32, global: u32 },
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct NodeInfo {
    pub name: String,
    pub region: RegionId,
    pub role: Role,
}

/// A protocol's extra service (a view manager, a sequencer per region, a
/// TrueTime oracle per region) and where its nodes go.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ServiceSpec {
    pub kind: String,
    pub placement: Placement,
}

/// Where a service's nodes are placed, and how they are named.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Placement {
    /// `n` nodes `{kind}-{i}`, round-robin over the server regions from
    /// the first.
    RoundRobin(u32),
    /// One node `{kind}-{region}` in each server region.
    PerServerRegion,
    /// `n` nodes in each server region (a group replicated inside its
    /// region, SLOG's sequencers): `{kind}-{region}`, then
    /// `{kind}-{region}-1` ... `{kind}-{region}-{n-1}`, region by region.
    /// With `n = 1` the same as `PerServerRegion`.
    PerServerRegionEach(u32),
    /// One node `{kind}-{region}` in each client region.
    PerClientRegion,
    /// One node `{kind}-{region}` in every region with servers or clients
    /// (client-only regions included), in region order.
    PerRegion,
    /// One node `{kind}-{region}` in each named region.
    InRegions(Vec<String>),
}

impl ServiceSpec {
    /// `members` nodes round-robin over the server regions.
    pub fn round_robin(kind: &str, members: u32) -> ServiceSpec {
        ServiceSpec { kind: kind.into(), placement: Placement::RoundRobin(members) }
    }

    pub fn new(kind: &str, placement: Placement) -> ServiceSpec {
        ServiceSpec { kind: kind.into(), placement }
    }

    /// The regions of the service's nodes, with each node's name; an
    /// error names a region the deployment does not have.
    pub fn place(&self, spec: &ClusterSpec) -> Result<Vec<(String, RegionId)>, String> {
        let named = |r: RegionId| (format!("{}-{}", self.kind, spec.regions[r.index()]), r);
        let regions: Vec<RegionId> = match &self.placement {
            Placement::RoundRobin(n) => {
                let n_server = spec.server_regions.len() as u32;
                return Ok((0..*n)
                    .map(|i| (format!("{}-{i}", self.kind), spec.server_regions[(i % n_server) as usize]))
                    .collect());
            }
            Placement::PerServerRegion => spec.server_regions.clone(),
            Placement::PerServerRegionEach(n) => {
                let name = |r: RegionId, i: u32| match i {
                    0 => named(r).0,
                    _ => format!("{}-{}-{i}", self.kind, spec.regions[r.index()]),
                };
                return Ok(spec.server_regions.iter().flat_map(|r| (0..*n).map(move |i| (name(*r, i), *r))).collect());
            }
            Placement::PerClientRegion => spec.client_regions.clone(),
            Placement::PerRegion => {
                let mut all: Vec<RegionId> = spec.server_regions.iter().chain(&spec.client_regions).copied().collect();
                all.sort_unstable();
                all.dedup();
                all
            }
            Placement::InRegions(names) => names
                .iter()
                .map(|name| {
                    spec.regions.iter().position(|r| r == name).map(|i| RegionId(i as u16)).ok_or_else(|| {
                        format!(
                            "service `{}`: unknown region `{name}` (regions: {})",
                            self.kind,
                            spec.regions.join(", ")
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(regions.into_iter().map(named).collect())
    }
}

/// The shape a topology is built from (the `[cluster]` and `[clients]`
/// sections of an experiment file, with region names resolved).
#[derive(Clone, PartialEq, Debug)]
pub struct ClusterSpec {
    pub regions: Vec<String>,
    pub server_regions: Vec<RegionId>,
    pub shards: u32,
    pub replicas_per_shard: u32,
    pub leaders: LeaderPlacement,
    pub client_regions: Vec<RegionId>,
    pub clients_per_region: u32,
}

impl ClusterSpec {
    /// Every server and one client in a single region named `a`: the
    /// deployment handler tests and small models build.
    pub fn one_region(shards: u32, replicas_per_shard: u32) -> ClusterSpec {
        ClusterSpec {
            regions: vec!["a".into()],
            server_regions: vec![RegionId(0)],
            shards,
            replicas_per_shard,
            leaders: LeaderPlacement::Colocated,
            client_regions: vec![RegionId(0)],
            clients_per_region: 1,
        }
    }

    /// Every one of `regions` a server region holding one replica of each
    /// of `shards` shards (every region a home), leaders co-located, one
    /// client in the first region: the multi-region deployment handler
    /// tests build.
    pub fn every_region(regions: &[&str], shards: u32) -> ClusterSpec {
        let n = regions.len() as u16;
        ClusterSpec {
            regions: regions.iter().map(|r| r.to_string()).collect(),
            server_regions: (0..n).map(RegionId).collect(),
            shards,
            replicas_per_shard: u32::from(n),
            leaders: LeaderPlacement::Colocated,
            client_regions: vec![RegionId(0)],
            clients_per_region: 1,
        }
    }
}

/// Where keys live: key `k` is on shard `k % shards`, and its home region
/// (the region that masters it, in protocols with home regions, and the one
/// workloads place single-home transactions in) is
/// `homes[(k / shards) % homes.len()]`. Deterministic, so every node and
/// every generator agrees.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct KeyLayout {
    pub shards: u32,
    /// The regions keys are homed in (the server regions).
    pub homes: Vec<RegionId>,
}

impl KeyLayout {
    pub fn shard_of(&self, key: Key) -> ShardId {
        ShardId((key.0 % u64::from(self.shards)) as u32)
    }

    /// The index of `key`'s home among [`KeyLayout::homes`].
    pub fn home_index(&self, key: Key) -> usize {
        ((key.0 / u64::from(self.shards)) % self.homes.len() as u64) as usize
    }

    pub fn home_of(&self, key: Key) -> RegionId {
        self.homes[self.home_index(key)]
    }

    /// The `n`-th key on `shard` homed at `homes[home]`.
    pub fn key(&self, shard: u32, home: usize, n: u64) -> Key {
        debug_assert!(shard < self.shards && home < self.homes.len());
        Key((n * self.homes.len() as u64 + home as u64) * u64::from(self.shards) + u64::from(shard))
    }
}

/// The whole deployment, fixed for a run.
#[derive(Clone, PartialEq, Debug)]
pub struct Topology {
    pub regions: Vec<String>,
    pub server_regions: Vec<RegionId>,
    pub nodes: Vec<NodeInfo>,
    pub shards: u32,
    pub replicas_per_shard: u32,
    pub leaders: LeaderPlacement,
    /// `replicas[s][r]` is replica `r` of shard `s`.
    replicas: Vec<Vec<NodeId>>,
    clients: Vec<NodeId>,
    services: Vec<(String, Vec<NodeId>)>,
}

impl Topology {
    pub fn build(spec: &ClusterSpec, services: &[ServiceSpec]) -> Topology {
        assert!(spec.shards > 0 && spec.replicas_per_shard > 0, "empty cluster");
        assert!(!spec.server_regions.is_empty(), "no server regions");
        let mut nodes = Vec::new();
        let mut replicas = Vec::new();
        let n_server = spec.server_regions.len() as u32;
        for s in 0..spec.shards {
            let mut members = Vec::new();
            for r in 0..spec.replicas_per_shard {
                members.push(NodeId(nodes.len() as u32));
                nodes.push(NodeInfo {
                    name: format!("shard{s}-replica{r}"),
                    region: spec.server_regions[(r % n_server) as usize],
                    role: Role::Replica { shard: ShardId(s), replica: r },
                });
            }
            replicas.push(members);
        }
        let mut service_nodes = Vec::new();
        for svc in services {
            let placed = svc.place(spec).unwrap_or_else(|e| panic!("{e}"));
            let mut members = Vec::new();
            for (i, (name, region)) in placed.into_iter().enumerate() {
                members.push(NodeId(nodes.len() as u32));
                nodes.push(NodeInfo { name, region, role: Role::Service { kind: svc.kind.clone(), index: i as u32 } });
            }
            service_nodes.push((svc.kind.clone(), members));
        }
        let mut clients = Vec::new();
        for region in &spec.client_regions {
            for i in 0..spec.clients_per_region {
                clients.push(NodeId(nodes.len() as u32));
                nodes.push(NodeInfo {
                    name: format!("client-{}-{i}", spec.regions[region.index()]),
                    region: *region,
                    role: Role::Client { index: i, global: clients.len() as u32 - 1 },
                });
            }
        }
        Topology {
            regions: spec.regions.clone(),
            server_regions: spec.server_regions.clone(),
            nodes,
            shards: spec.shards,
            replicas_per_shard: spec.replicas_per_shard,
            leaders: spec.leaders,
            replicas,
            clients,
            services: service_nodes,
        }
    }

    pub fn shard_of(&self, key: Key) -> ShardId {
        ShardId((key.0 % u64::from(self.shards)) as u32)
    }

    pub fn node(&self, id: NodeId) -> &NodeInfo {
        &self.nodes[id.index()]
    }

    pub fn name(&self, id: NodeId) -> &str {
        &self.nodes[id.index()].name
    }

    /// The replicas of `shard` in `region` (several when a shard has more
    /// replicas than there are server regions).
    pub fn replicas_in(&self, shard: ShardId, region: RegionId) -> Vec<NodeId> {
        self.replicas(shard).iter().copied().filter(|n| self.region_of(*n) == region).collect()
    }

    /// Where keys live (see [`KeyLayout`]).
    pub fn key_layout(&self) -> KeyLayout {
        KeyLayout { shards: self.shards, homes: self.server_regions.clone() }
    }

    pub fn region_of(&self, id: NodeId) -> RegionId {
        self.nodes[id.index()].region
    }

    pub fn region_name(&self, region: RegionId) -> &str {
        &self.regions[region.index()]
    }

    pub fn node_by_name(&self, name: &str) -> Option<NodeId> {
        self.nodes.iter().position(|n| n.name == name).map(|i| NodeId(i as u32))
    }

    pub fn region_by_name(&self, name: &str) -> Option<RegionId> {
        self.regions.iter().position(|r| r == name).map(|i| RegionId(i as u16))
    }

    /// The replicas of a shard, by replica index.
    pub fn replicas(&self, shard: ShardId) -> &[NodeId] {
        &self.replicas[shard.index()]
    }

    /// The replica index of the shard's leader when the run starts.
    pub fn initial_leader_index(&self, shard: ShardId) -> u32 {
        match self.leaders {
            LeaderPlacement::Colocated => 0,
            LeaderPlacement::Spread => shard.0 % self.replicas_per_shard,
        }
    }

    pub fn initial_leader(&self, shard: ShardId) -> NodeId {
        self.replicas(shard)[self.initial_leader_index(shard) as usize]
    }

    /// Every node that is a replica of some shard.
    pub fn all_replicas(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.replicas.iter().flatten().copied()
    }

    pub fn clients(&self) -> &[NodeId] {
        &self.clients
    }

    /// The members of a protocol service, or an empty slice.
    pub fn service(&self, kind: &str) -> &[NodeId] {
        self.services.iter().find(|(k, _)| k == kind).map(|(_, m)| m.as_slice()).unwrap_or(&[])
    }

    /// Shard and replica index of a replica node.
    pub fn replica_of(&self, id: NodeId) -> Option<(ShardId, u32)> {
        match self.nodes[id.index()].role {
            Role::Replica { shard, replica } => Some((shard, replica)),
            _ => None,
        }
    }

    pub fn is_client(&self, id: NodeId) -> bool {
        matches!(self.nodes[id.index()].role, Role::Client { .. })
    }

    /// Largest number of simultaneous replica failures a shard tolerates.
    pub fn f(&self) -> u32 {
        (self.replicas_per_shard - 1) / 2
    }

    /// Size of a majority of a shard's replicas.
    pub fn majority(&self) -> usize {
        self.replicas_per_shard as usize / 2 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_key_is_on_its_shard_and_home() {
        let layout = KeyLayout { shards: 3, homes: vec![RegionId(2), RegionId(0)] };
        for shard in 0..3 {
            for home in 0..2 {
                for n in [0, 1, 77] {
                    let k = layout.key(shard, home, n);
                    assert_eq!(layout.shard_of(k), ShardId(shard));
                    assert_eq!(layout.home_index(k), home);
                }
            }
        }
        assert_eq!(layout.home_of(layout.key(1, 1, 5)), RegionId(0));
    }

    fn spec(leaders: LeaderPlacement) -> ClusterSpec {
        ClusterSpec {
            regions: vec!["a".into(), "b".into(), "c".into(), "d".into()],
            server_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
            shards: 3,
            replicas_per_shard: 3,
            leaders,
            client_regions: vec![RegionId(0), RegionId(3)],
            clients_per_region: 2,
        }
    }

    /// K2 puts a TrueTime oracle in every region, client-only ones too;
    /// SLOG a sequencer in every server region.
    #[test]
    fn a_service_per_region_includes_client_only_regions_and_is_named_by_region() {
        let svc = [
            ServiceSpec::new("oracle", Placement::PerRegion),
            ServiceSpec::new("sequencer", Placement::PerServerRegion),
            ServiceSpec::new("gate", Placement::InRegions(vec!["d".into()])),
        ];
        let t = Topology::build(&spec(LeaderPlacement::Colocated), &svc);
        let names: Vec<&str> = t.service("oracle").iter().map(|n| t.name(*n)).collect();
        assert_eq!(names, ["oracle-a", "oracle-b", "oracle-c", "oracle-d"]);
        assert_eq!(t.region_of(t.service("oracle")[3]), RegionId(3), "the client-only region has one");
        assert_eq!(t.service("sequencer").len(), 3);
        assert_eq!(t.name(t.service("gate")[0]), "gate-d");
        let bad = ServiceSpec::new("gate", Placement::InRegions(vec!["mars".into()]));
        assert!(bad.place(&spec(LeaderPlacement::Colocated)).unwrap_err().contains("unknown region `mars`"));
    }

    /// SLOG replicates each region's sequencer inside the region.
    #[test]
    fn a_group_per_server_region_keeps_the_single_nodes_name_for_its_first_member() {
        let svc = [ServiceSpec::new("sequencer", Placement::PerServerRegionEach(3))];
        let t = Topology::build(&spec(LeaderPlacement::Colocated), &svc);
        let names: Vec<&str> = t.service("sequencer").iter().map(|n| t.name(*n)).collect();
        let expected = ["a", "a-1", "a-2", "b", "b-1", "b-2", "c", "c-1", "c-2"].map(|s| format!("sequencer-{s}"));
        assert_eq!(names, expected);
        let regions: Vec<u16> = t.service("sequencer").iter().map(|n| t.region_of(*n).0).collect();
        assert_eq!(regions, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
        let one = Topology::build(
            &spec(LeaderPlacement::Colocated),
            &[ServiceSpec::new("s", Placement::PerServerRegionEach(1))],
        );
        let single =
            Topology::build(&spec(LeaderPlacement::Colocated), &[ServiceSpec::new("s", Placement::PerServerRegion)]);
        assert_eq!(one.nodes, single.nodes, "a group of one is the single node");
    }

    #[test]
    fn names_and_placement_are_stable() {
        let svc = [ServiceSpec::round_robin("viewmgr", 3)];
        let t = Topology::build(&spec(LeaderPlacement::Colocated), &svc);
        assert_eq!(t.nodes.len(), 9 + 3 + 4);
        assert_eq!(t.name(NodeId(0)), "shard0-replica0");
        assert_eq!(t.name(NodeId(5)), "shard1-replica2");
        assert_eq!(t.region_of(NodeId(5)), RegionId(2));
        assert_eq!(t.name(NodeId(9)), "viewmgr-0");
        assert_eq!(t.service("viewmgr").len(), 3);
        assert_eq!(t.name(t.clients()[3]), "client-d-1");
        assert_eq!(t.node_by_name("client-a-1"), Some(t.clients()[1]));
        assert_eq!(t.node_by_name("nope"), None);
        assert_eq!(t.replica_of(NodeId(4)), Some((ShardId(1), 1)));
        assert!(t.is_client(t.clients()[0]));
        assert_eq!(t.f(), 1);
        assert_eq!(t.majority(), 2);
    }

    #[test]
    fn colocated_leaders_share_region_spread_leaders_rotate() {
        let t = Topology::build(&spec(LeaderPlacement::Colocated), &[]);
        let regions: Vec<_> = (0..3).map(|s| t.region_of(t.initial_leader(ShardId(s)))).collect();
        assert_eq!(regions, vec![RegionId(0); 3]);
        let t = Topology::build(&spec(LeaderPlacement::Spread), &[]);
        let regions: Vec<_> = (0..3).map(|s| t.region_of(t.initial_leader(ShardId(s)))).collect();
        assert_eq!(regions, vec![RegionId(0), RegionId(1), RegionId(2)]);
    }

    #[test]
    fn keys_map_to_shards_by_modulo() {
        let t = Topology::build(&spec(LeaderPlacement::Colocated), &[]);
        assert_eq!(t.shard_of(Key(7)), ShardId(1));
        assert_eq!(t.shard_of(Key(9)), ShardId(0));
    }
}
