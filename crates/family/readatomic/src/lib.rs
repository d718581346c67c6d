//! The read-atomic protocols, which run read-only and write-only
//! transactions over partitions that clients talk to directly, one folder
//! each: `ramp` (RAMP-F and RAMP-S of "Scalable Atomic Visibility with
//! RAMP Transactions", RAMP-OPW as `ramp-f`'s `one_phase_writes`) and
//! `ranoc2` (RA-NOC2 of "NOC-NOC: Towards Performance-optimal Distributed
//! Transactions", which reuses RAMP's versions, pending transactions,
//! checkpoints and timestamps) and `ranoc` (RA-NOC, the same paper's
//! Appendix C: RA-NOC2's code with two-phase, blocking writes) and `lora`
//! (LORA, the SNOW-optimal algorithm NOC-NOC compares against: RAMP's
//! partitions, a client reading the versions it knows of).

pub mod common;
pub mod ramp;
/// The retry tick every client of these protocols (and Eiger's) runs, and
/// the write's versions they group by partition.
pub use common::client::{Attempts, Due, Resent, Versions, by_shard, due, versions};
pub mod lora;
pub mod ranoc;
pub mod ranoc2;
/// The handler tests' deployment, shared with `meridian-causal`'s.
#[doc(hidden)]
pub mod test_support;

use meridian_harness::Entry;

/// The protocols of this crate, for the registry.
pub static ENTRIES: &[Entry] = &[
    Entry::of::<ramp::RampF>(
        "read atomic multi-partition transactions, sibling metadata and one-round reads without concurrent writes (RAMP-F; RAMP-OPW with `one_phase_writes`)",
        ramp::PARAMS,
    ),
    Entry::of::<ramp::RampS>(
        "read atomic multi-partition transactions, timestamp-only metadata and two-round reads (RAMP-S)",
        ramp::PARAMS,
    ),
    Entry::of::<ranoc2::RaNoc2>(
        "read atomic with read-your-writes: one-round reads at a dual view, one-phase writes, constant metadata (RA-NOC2)",
        ranoc2::PARAMS,
    ),
    Entry::of::<ranoc::RaNoc>(
        "read atomic with read-your-writes: one-round reads at the global safe view, two-phase writes that wait until every safe time passes them (RA-NOC)",
        ranoc::PARAMS,
    ),
    Entry::of::<lora::Lora>(
        "read atomic with read-your-writes: one-round reads of the versions a client knows, one-phase writes, sibling metadata (LORA)",
        lora::PARAMS,
    ),
];
