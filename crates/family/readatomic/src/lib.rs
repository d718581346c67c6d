//! The read-atomic protocols, which run read-only and write-only
//! transactions over partitions that clients talk to directly, one folder
//! each: `ramp` (RAMP-F and RAMP-S of "Scalable Atomic Visibility with
//! RAMP Transactions", RAMP-OPW as `ramp-f`'s `one_phase_writes`). The
//! NOC-NOC paper's RA-NOC2 and RA-NOC, and LORA, belong here too.

pub mod ramp;

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
];
