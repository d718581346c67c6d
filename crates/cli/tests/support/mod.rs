pub mod clients;
pub mod cluster;
pub mod resp;
