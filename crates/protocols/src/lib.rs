//! Meridian's protocol registry: every CONTRACT protocol name with what it
//! promises, and the entry tables of the protocol crates this build
//! includes (one cargo feature per family crate: `twopc`, `tiga`, `deterministic`,
//! `readatomic`, `causal`). The
//! protocols themselves live in `crates/family/*`, their shared mechanisms
//! in `meridian-mechanisms`.

pub mod registry;

pub use registry::run_experiment;
