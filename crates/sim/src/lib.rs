//! Meridian's deterministic simulator of a wide-area deployment.
//!
//! It runs the very same sans-IO protocol processes as the real runtime,
//! under virtual time, a latency matrix with jitter, loss, duplication,
//! reordering and partitions, per-node clocks (offset, drift, jumps) and
//! TrueTime, per-node CPU service time, a group-commit disk, and crash /
//! restart faults. Same seed and configuration ⇒ identical run.

pub mod block_deque;
pub mod config;
mod counters;
pub mod disk;
pub mod net;
pub mod queue;
pub mod sim;

pub use config::{ClockModel, FaultAction, NetConfig, ScheduledFault, SimConfig};
pub use sim::{Completion, EPOCH_NS, Interceptor, Sim, Verdict};
