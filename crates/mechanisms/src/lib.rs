//! Mechanisms written once and shared by every protocol: quorum counting,
//! the Multi-Paxos log, two-phase commit, the multi-version store (with
//! per-version metadata and write intents) and the
//! lock table, the copy-on-write map that makes checkpoints cheap, delay
//! estimates, logical, hybrid and TrueTime clocks, version vectors,
//! timestamp-ordering and optimistic validation, numbered batch streams,
//! the deterministic scheduler and read exchange of Calvin and SLOG,
//! strongly connected components, the interactive coordinator's rounds
//! and retries, a value's encoded size (the metadata the cost model
//! measures), an ordered map for a handful of entries, and tables keyed by
//! transaction id: any coordinator's, in its id order (`seq_index`), and a
//! coordinator's own in flight, in a window of ids (`seq_window`).

pub mod batch_stream;
pub mod client_floors;
pub mod clocks;
pub mod cow_map;
pub mod durable;
pub mod encoding;
pub mod graph;
pub mod interactive;
pub mod locks;
pub mod mvstore;
pub mod occ;
pub mod owd;
pub mod paxos;
pub mod primary_backup;
pub mod quorum;
pub mod recent;
pub mod scheduler;
pub mod seq_index;
pub mod seq_window;
pub mod small_map;
pub mod twopc;
pub mod txnids;
pub mod version_vector;
