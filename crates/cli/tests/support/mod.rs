pub mod clients;
pub mod cluster;
