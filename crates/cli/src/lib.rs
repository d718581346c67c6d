//! The `meridian` command's library: running experiments in the simulator,
//! reports, swarm testing, the demo, and benchmarks against real clusters. `main.rs` only parses arguments and
//! prints.

pub mod demo;
pub mod real;
pub mod report;
pub mod runner;
pub mod swarm;

pub use report::{Report, summary};
pub use runner::{RunOptions, RunOutput, run_experiment};
