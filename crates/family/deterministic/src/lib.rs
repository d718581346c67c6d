//! The deterministic protocols, which agree on an order of transactions
//! before executing them and then execute that order identically in every
//! region, one folder each: `calvin` (a global log of per-region batches)
//! and `slog` (per-region local logs, interleaved by every region).

pub mod calvin;
pub mod catch_up;
pub mod readers;
pub mod recon;
pub mod sent_reads;
pub mod slog;
pub mod submissions;

use meridian_harness::Entry;

/// The protocols of this crate, for the registry.
pub static ENTRIES: &[Entry] = &[
    Entry::of::<calvin::Calvin>(
        "deterministic ordering and locking: per-region batches in a Paxos-ordered global log (Calvin)",
        calvin::PARAMS,
    ),
    Entry::of::<slog::Slog>(
        "home regions: per-region local logs interleaved into each region's global log, deterministic execution (SLOG)",
        slog::PARAMS,
    ),
];
