//! The `meridian` command's library: running experiments in the simulator,
//! reports, swarm testing and the demo. `main.rs` only parses arguments and
//! prints.

pub mod demo;
pub mod report;
pub mod runner;
pub mod swarm;

pub use report::{Report, summary};
pub use runner::{RunOptions, RunOutput, run_experiment};
