//! The transactional causal protocols, which run read-only and write-only
//! transactions over partitions that clients talk to directly and that
//! order writes by Lamport clocks: `eigernoc2` (Eiger-NOC2 of "NOC-NOC:
//! Towards Performance-optimal Distributed Transactions", §6, Algorithm 2
//! and Appendix E). What its partitions share with Eiger-PORT's — the
//! partition side of Eiger's always-commit two-phase commit (Appendix E,
//! Algorithm 6), Lamport stamps, durability — lives once in `eiger`;
//! versions, safe times, timestamps and the client's dual view are
//! `meridian_readatomic`'s (RAMP's and RA-NOC2's), shared.

pub mod eiger;
pub mod eigernoc2;

use meridian_harness::Entry;

/// The protocols of this crate, for the registry.
pub static ENTRIES: &[Entry] = &[Entry::of::<eigernoc2::EigerNoc2>(
    "transactional causal consistency with convergence: one-round reads at a dual view, one-phase writes, Lamport clocks (Eiger-NOC2)",
    eigernoc2::PARAMS,
)];
