//! The transactional causal protocols, which run read-only and write-only
//! transactions over partitions that clients talk to directly and that
//! order writes by Lamport clocks: `eigernoc2` (Eiger-NOC2 of "NOC-NOC:
//! Towards Performance-optimal Distributed Transactions", §6, Algorithm 2
//! and Appendix E) and `eigerport` (Eiger-PORT of "Performance-Optimal
//! Read-Only Transactions", NOC-NOC §6.1). What their partitions share — the
//! partition side of Eiger's always-commit two-phase commit (Appendix E,
//! Algorithm 6), Lamport stamps, durability — lives once in `eiger`;
//! versions, safe times, timestamps and the client's dual view are
//! `meridian_readatomic`'s (RAMP's and RA-NOC2's), shared.

pub mod eiger;
pub mod eigernoc2;
pub mod eigerport;

use meridian_harness::Entry;

/// The protocols of this crate, for the registry.
pub static ENTRIES: &[Entry] = &[
    Entry::of::<eigernoc2::EigerNoc2>(
        "transactional causal consistency with convergence: one-round reads at a dual view, one-phase writes, Lamport clocks (Eiger-NOC2)",
        eigernoc2::PARAMS,
    ),
    Entry::of::<eigerport::EigerPort>(
        "transactional causal consistency without convergence: one-round reads that promote one's own writes, two-phase writes, Lamport clocks (Eiger-PORT)",
        eigerport::PARAMS,
    ),
];
