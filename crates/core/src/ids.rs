//! Identifiers shared by every layer: nodes, regions, shards, keys, requests,
//! transactions, log positions and timers.
//!
//! All of them are small `Copy` newtypes so that they are cheap to put in
//! messages and cannot be mixed up with each other.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A node of the deployment: an index into [`crate::Topology::nodes`].
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// A region (data center): an index into [`crate::Topology::regions`].
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct RegionId(pub u16);

/// A shard (partition) of the key space.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct ShardId(pub u32);

/// A key. The key space is 64-bit; [`crate::Topology::shard_of`] maps a key to
/// its shard by `key % shards`, so generators that want a key on shard `s`
/// build it as `rank * shards + s`. Keys named by byte strings (Redis keys)
/// live in the top half ([`Key::named`]).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct Key(pub u64);

/// A client request, unique per client node (the client's sequence number).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct RequestId(pub u64);

/// A transaction: the coordinating node and a sequence number unique on that
/// node. Every attempt of a client transaction is a new `TxnId`.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct TxnId {
    pub node: NodeId,
    pub seq: u64,
}

/// A position in a node's durable log. LSNs start at 1 and grow by one per
/// append, across restarts (a restarted node continues after its last durable
/// record).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize, Default)]
pub struct Lsn(pub u64);

/// A named durable stream of a node's log. A node may keep several — its
/// Paxos log and records of its own (K2's recorders), or two Paxos groups'
/// logs (SLOG-HA) — and compacts each on its own (`Env::compact_stream`);
/// LSNs are one sequence over all of them. A protocol names its streams as
/// constants; [`Stream::MAIN`] is the one `Env::append` and `Env::compact`
/// use.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize, Default)]
pub struct Stream(pub u16);

impl Stream {
    pub const MAIN: Stream = Stream(0);
}

/// A timer handle returned by `set_timer`, used to cancel it.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct TimerId(pub u64);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard{}", self.0)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "k{}", self.0)
    }
}

impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t{}.{}", self.node.0, self.seq)
    }
}

impl Key {
    /// Keys of the named key space have this bit set; workload keys (and
    /// any key a program names by number) stay below it, so the two spaces
    /// never meet.
    pub const NAMED_BIT: u64 = 1 << 63;

    /// Where a key named by a byte string (a Redis key, a `meridian client`
    /// key) lives: its name's 64-bit FNV-1a hash with [`Key::NAMED_BIT`]
    /// set. Only placement: distinct names may share a key, and the value
    /// stored there holds each name's entry apart
    /// ([`crate::program::Data::Named`]), so a name is never identified by
    /// its hash alone.
    pub fn named(name: &[u8]) -> Key {
        Key(fnv1a(name) | Key::NAMED_BIT)
    }

    pub fn is_named(self) -> bool {
        self.0 & Key::NAMED_BIT != 0
    }
}

/// 64-bit FNV-1a: a cheap, stable hash of bytes (placement, identities).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl ShardId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl RegionId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
