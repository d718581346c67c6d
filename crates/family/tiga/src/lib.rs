//! Tiga (the paper "Tiga: Accelerating Geo-Distributed Transactions with
//! Synchronized Clocks"): synchronized-clock consolidated concurrency
//! control and consensus. The protocol is in `tiga/` (docs/tiga.md maps
//! the paper's sections to its files).

pub mod tiga;

use meridian_harness::Entry;

/// The protocols of this crate, for the registry.
pub static ENTRIES: &[Entry] = &[Entry::of::<tiga::Tiga>(
    "synchronized-clock consolidated concurrency control and consensus (Tiga)",
    tiga::PARAMS,
)];
