//! The generic code every protocol runs through — the simulated run with
//! its report, and the real server — and the [`Entry`] a protocol crate
//! exports so that code is instantiated inside the protocol's own crate.
//! The `meridian` command finds protocols by name in the entry tables of
//! the protocol crates it was built with; editing one protocol recompiles
//! its crate and the command, not the other protocols.

pub mod report;
pub mod runner;

use meridian_core::{ParamDoc, Protocol, ProtocolInfo};
use meridian_experiment::{ConfigError, Experiment};
use meridian_runtime::ClusterConfig;
use runner::{RunOptions, RunOutput};

/// One runnable protocol: what Meridian knows of it, and the generic
/// drivers instantiated for it.
pub struct Entry {
    pub info: ProtocolInfo,
    /// Runs an experiment in the simulator ([`runner::run_sim`]).
    pub run_sim: for<'a> fn(&Experiment, RunOptions<'a>) -> Result<RunOutput, ConfigError>,
    /// Runs one node of a real cluster until it is told to stop
    /// ([`meridian_runtime::serve`]).
    pub serve: fn(ClusterConfig, &str) -> Result<(), String>,
}

impl Entry {
    /// The entry of protocol `P`.
    pub const fn of<P: Protocol>(summary: &'static str, params: &'static [ParamDoc]) -> Entry {
        Entry {
            info: ProtocolInfo::of::<P>(summary, params),
            run_sim: runner::run_sim::<P>,
            serve: meridian_runtime::serve::<P>,
        }
    }
}
