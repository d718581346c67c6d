//! Transaction generators for Meridian's benchmarks (DESIGN.md "Transactions").
//!
//! A workload is described by a [`WorkloadSpec`] (the `[workload]` section of
//! an experiment file) and turned into a [`Generator`] that every client
//! calls for its next transaction [`Program`]. Generators draw all of their
//! randomness from the caller's seeded [`Rng`], so the same seed yields the
//! same programs on every protocol and every run.
//!
//! Implemented kinds:
//! - `microbench`: Tiga's MicroBench (§5.1): each transaction increments
//!   three keys on three distinct shards, keys drawn by Zipf per shard.
//! - `ycsb-t`: YCSB+T style transactions of reads and read-modify-write
//!   increments (increments, not blind writes, so that a history checker can
//!   recover each key's version order).
//! - `list-append`: Elle's list-append over a small key space: appends of
//!   unique elements and reads of whole lists, for consistency checking.
//!
//! The module [`render`] turns programs and their results into the history
//! micro-operations of CONTRACT.md; [`TagSource`] hands out the unique
//! written values those histories need.

pub mod driver;
pub mod generate;
pub mod render;
pub mod spec;
pub mod tags;
pub mod zipf;

pub use driver::{Driver, DriverConfig, DriverStats, Pacing, retag};
pub use generate::generator;
pub use render::{completion_mops, invoke_mops};
pub use spec::{ShardsPerTxn, SpecError, WorkloadKind, WorkloadSpec};
pub use tags::TagSource;
pub use zipf::Zipf;

use meridian_core::{Program, Rng};

/// A source of transaction programs, one per client.
pub trait Generator {
    /// The next transaction: keys and operations drawn from `rng`, written
    /// values and appended elements taken from `tags`.
    fn next(&mut self, rng: &mut Rng, tags: &mut TagSource) -> Program;
}
