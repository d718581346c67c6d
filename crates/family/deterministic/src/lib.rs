//! The deterministic protocols, which agree on an order of transactions
//! before executing them and then execute that order identically in every
//! region, one folder each: `calvin` (a global log of per-region batches).
//! SLOG joins it here.

pub mod calvin;

use meridian_harness::Entry;

/// The protocols of this crate, for the registry.
pub static ENTRIES: &[Entry] = &[Entry::of::<calvin::Calvin>(
    "deterministic ordering and locking: per-region batches in a Paxos-ordered global log (Calvin)",
    calvin::PARAMS,
)];
