//! The protocols that commit with two-phase commit over per-shard
//! Multi-Paxos groups, one folder each: `2pl-paxos` (two-phase locking,
//! wound-wait). The family's other members (`occ-paxos`, `d2pl-ttc`) join
//! it here.

pub mod twopl_paxos;

use meridian_harness::Entry;

/// The protocols of this crate, for the registry.
pub static ENTRIES: &[Entry] = &[Entry::of::<twopl_paxos::TwoPlPaxos>(
    "two-phase locking (wound-wait) + two-phase commit over per-shard Multi-Paxos",
    twopl_paxos::PARAMS,
)];
