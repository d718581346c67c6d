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
//! - `tpcc`: TPC-C's five transactions as procedures ([`tpcc`]), with the
//!   audit of its consistency conditions on the final database.
//! - `slog-ycsb`: SLOG's YCSB: hot and cold records, single- and multi-home,
//!   single- and multi-partition transactions ([`slog_ycsb`]).
//! - `ramp-ycsb`: RAMP's and NOC-NOC's read-only and write-only YCSB
//!   ([`ramp_ycsb`]).
//! - `retwis`: STARRY Table 5's Twitter clone mix ([`retwis`]).
//!
//! The module [`render`] turns programs and their results into the history
//! micro-operations of CONTRACT.md; [`TagSource`] hands out the unique
//! written values those histories need.

pub mod driver;
pub mod generate;
pub mod ramp_ycsb;
pub mod render;
pub mod retwis;
pub mod slog_ycsb;
pub mod spec;
pub mod tags;
pub mod tpcc;
pub mod zipf;

pub use driver::{Driver, DriverConfig, DriverStats, Pacing, retag};
pub use generate::generator;
pub use render::{completion_mops, invoke_mops, txn_meta};
pub use spec::{ShardsPerTxn, SpecError, WorkloadKind, WorkloadSpec};
pub use tags::TagSource;
pub use zipf::Zipf;

use meridian_core::{KeyLayout, NodeId, Program, RegionId, Rng};

/// A transaction a generator made: the program and its type, as the
/// workload names it (`new-order`, `read-only`, ...).
#[derive(Clone, Debug, PartialEq)]
pub struct Txn {
    pub program: Program,
    pub label: &'static str,
}

impl Txn {
    pub fn new(program: Program, label: &'static str) -> Txn {
        Txn { program, label }
    }
}

/// What a generator knows of the client it serves and of where keys live.
#[derive(Clone, Debug)]
pub struct ClientInfo {
    pub node: NodeId,
    pub region: RegionId,
    /// The client's index among all clients, and among its region's.
    pub index: u32,
    pub index_in_region: u32,
    pub clients: u32,
    pub layout: KeyLayout,
}

impl ClientInfo {
    /// What every client of `topology` knows, in client order.
    pub fn all(topology: &meridian_core::Topology) -> Vec<ClientInfo> {
        let mut in_region: std::collections::BTreeMap<RegionId, u32> = Default::default();
        let layout = topology.key_layout();
        let count = topology.clients().len() as u32;
        topology
            .clients()
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let region = topology.region_of(*node);
                let k = in_region.entry(region).or_default();
                *k += 1;
                ClientInfo {
                    node: *node,
                    region,
                    index: i as u32,
                    index_in_region: *k - 1,
                    clients: count,
                    layout: layout.clone(),
                }
            })
            .collect()
    }
}

/// The transaction shapes a workload needs from a protocol.
pub fn shapes_needed(spec: &WorkloadSpec) -> meridian_core::Shapes {
    use meridian_core::{ProcedureSupport, Shapes};
    match spec.kind {
        WorkloadKind::RampYcsb => Shapes { read_write: false, procedures: ProcedureSupport::None },
        WorkloadKind::Tpcc => Shapes { read_write: true, procedures: ProcedureSupport::Anchored },
        _ => Shapes { read_write: true, procedures: ProcedureSupport::None },
    }
}

/// `preferred` if a protocol of these shapes runs it, else the workload it
/// can run (RAMP's YCSB for read-only/write-only protocols): what `meridian
/// demo` and `meridian swarm` use so that every protocol takes part.
pub fn workload_for(shapes: meridian_core::Shapes, preferred: &WorkloadSpec) -> WorkloadSpec {
    if shapes.check(shapes_needed(preferred)).is_ok() {
        return preferred.clone();
    }
    WorkloadSpec::new(WorkloadKind::RampYcsb)
}

/// A source of transactions, one per client.
pub trait Generator {
    /// The next transaction: keys and operations drawn from `rng`, written
    /// values and appended elements taken from `tags`.
    fn next(&mut self, rng: &mut Rng, tags: &mut TagSource) -> Txn;
}
