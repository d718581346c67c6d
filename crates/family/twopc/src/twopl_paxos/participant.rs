//! Who locks a key, and where: the participants of two-phase commit.
//!
//! With `lock_at = "leader"` (the default) a participant is a shard: its
//! Multi-Paxos group, served by whichever of its replicas leads. With
//! `lock_at = "home"` (the SLOG paper's 2PL-coord, §4: "the lock manager for
//! a granule is located in its home partition") it is a shard's *home
//! partition*: the shard's keys homed at one region (`KeyLayout::home_of`,
//! the homes SLOG starts from; 2PL-coord never remasters), served by the
//! shard's replica in that region alone, whose log is a group of that one
//! replica (the shard's other replicas learn it).
//!
//! Participants are numbered `home × shards + shard`: a shard's participant
//! in leader mode is the shard's own number, so leader mode's messages,
//! records and group ids are those of a protocol without homes.

use meridian_core::{Key, KeyLayout, NodeId, ShardId, Topology};
use serde::{Deserialize, Serialize};

/// A participant of two-phase commit: a shard, or a shard's home partition
/// (see the module documentation).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct Participant(pub u32);

/// A transaction's participants, sorted: a few, held inline in the space a
/// vector's pointer takes, so the copies a coordinator sends in every
/// prepare cost no allocation. Encoded as a vector is.
pub type Participants = smallvec::SmallVec<[Participant; 4]>;

/// Where a key's lock manager lives: the `lock_at` parameter.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LockAt {
    /// At its shard's Paxos leader (2PL+Paxos, Spanner-like).
    Leader,
    /// At its shard's replica in its home region (SLOG's 2PL-coord).
    Home,
}

impl Participant {
    /// A shard's participant with `lock_at = "leader"` (its Paxos group).
    pub fn of_shard(shard: ShardId) -> Participant {
        Participant(shard.0)
    }

    /// The home partition of `shard` at `layout.homes[home]`.
    pub fn home_partition(layout: &KeyLayout, shard: ShardId, home: usize) -> Participant {
        assert!(shard.0 < layout.shards, "{shard} is not a shard of the layout");
        assert!(home < layout.homes.len(), "home {home} is not one of the layout's");
        Participant(home as u32 * layout.shards + shard.0)
    }

    /// The shard the participant's keys are on.
    pub fn shard(self, shards: u32) -> ShardId {
        ShardId(self.0 % shards)
    }

    /// The index of the participant's home among the layout's homes (0 for
    /// a shard's participant with `lock_at = "leader"`).
    pub fn home(self, shards: u32) -> usize {
        (self.0 / shards) as usize
    }
}

impl LockAt {
    /// The participant that locks, reads and prepares `key`.
    pub fn participant(self, layout: &KeyLayout, key: Key) -> Participant {
        let shard = layout.shard_of(key);
        match self {
            LockAt::Leader => Participant::of_shard(shard),
            LockAt::Home => Participant::home_partition(layout, shard, layout.home_index(key)),
        }
    }

    /// The nodes that may serve `p`: every replica of its shard (any may
    /// come to lead it), or its home replica alone (no other takes over).
    pub fn servers(self, topology: &Topology, p: Participant) -> Vec<NodeId> {
        let shard = p.shard(topology.shards);
        match self {
            LockAt::Leader => topology.replicas(shard).to_vec(),
            LockAt::Home => vec![home_replica(topology, p)],
        }
    }
}

/// The replica that serves home partition `p`: its shard's replica in its
/// home region (replica `r` of every shard lives in `server_regions[r]`
/// when there is one replica per server region, which `lock_at = "home"`
/// requires).
pub fn home_replica(topology: &Topology, p: Participant) -> NodeId {
    let home = p.home(topology.shards);
    let replica = topology.replicas(p.shard(topology.shards))[home];
    debug_assert_eq!(topology.region_of(replica), topology.server_regions[home], "one replica per server region");
    replica
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::{ClusterSpec, RegionId};

    /// Three regions, the homes in another order than the regions'.
    fn topology() -> Topology {
        let mut spec = ClusterSpec::every_region(&["a", "b", "c"], 2);
        spec.server_regions = vec![RegionId(2), RegionId(0), RegionId(1)];
        Topology::build(&spec, &[])
    }

    #[test]
    fn a_key_is_locked_at_its_shard_or_at_its_home_partition_served_by_the_replica_in_its_home() {
        let t = topology();
        let layout = t.key_layout();
        for shard in 0..2 {
            for home in 0..3 {
                let key = layout.key(shard, home, 41);
                let p = LockAt::Home.participant(&layout, key);
                assert_eq!((p.shard(2), p.home(2)), (ShardId(shard), home));
                let server = LockAt::Home.servers(&t, p);
                assert_eq!(server.len(), 1, "a home partition has one server");
                assert_eq!(t.region_of(server[0]), layout.home_of(key), "it is in the key's home region");
                assert_eq!(t.shard_of(key), t.replica_of(server[0]).expect("a replica").0);
                let q = LockAt::Leader.participant(&layout, key);
                assert_eq!(q, Participant::of_shard(ShardId(shard)), "leader mode: the shard's own number");
                assert_eq!(LockAt::Leader.servers(&t, q), t.replicas(ShardId(shard)).to_vec());
            }
        }
    }

    #[test]
    fn home_partitions_of_one_shard_are_distinct_participants() {
        let layout = topology().key_layout();
        let all: std::collections::BTreeSet<Participant> = (0..2)
            .flat_map(|s| (0..3).map(move |h| (s, h)))
            .map(|(s, h)| Participant::home_partition(&layout, ShardId(s), h))
            .collect();
        assert_eq!(all.len(), 6);
    }
}
