//! Mechanisms written once and shared by every protocol: quorum counting,
//! the Multi-Paxos log, two-phase commit, the multi-version store and the
//! lock table, and the copy-on-write map that makes checkpoints cheap.

pub mod cow_map;
pub mod locks;
pub mod mvstore;
pub mod paxos;
pub mod quorum;
pub mod recent;
pub mod twopc;
pub mod txnids;
