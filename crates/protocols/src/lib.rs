//! Meridian's commit protocols, one folder each, and the mechanisms they
//! share.

pub mod shared;
