//! Meridian's commit protocols, one folder each, and the mechanisms they
//! share (`shared`).

pub mod registry;
pub mod shared;
pub mod tiga;
pub mod twopl_paxos;
