//! The `meridian` command's library: running experiments and sweeps in the simulator,
//! reports, swarm testing, the demo, and benchmarks against real clusters. `main.rs` only parses arguments and
//! prints.

pub mod demo;
pub mod experiment;
pub mod real;
pub mod swarm;

pub use meridian_harness::report;
pub use meridian_harness::report::{Report, summary};
pub use meridian_protocols::registry;

/// Running experiments in the simulator (`meridian_harness::runner`), by
/// protocol name through the registry.
pub mod runner {
    pub use meridian_harness::runner::*;
    pub use meridian_protocols::run_experiment;
}
pub use runner::{RunOptions, RunOutput, run_experiment};
