//! Meridian's real runtime: the sans-IO protocols as a multi-process
//! cluster. Each node is an OS process (`meridian server`) that drives its
//! protocol process with real events — TCP messages through a delay
//! injector that emulates the WAN, timers on the monotonic clock, a
//! write-ahead log with group commit and fsync — exactly as the simulator
//! drives it with simulated ones. Front-end nodes also serve the client API
//! and a Redis gateway; every node serves Prometheus metrics.
//!
//! Nothing here is specific to a protocol: [`serve`] is generic over it,
//! and each protocol crate's entry table instantiates it.

pub mod api;
pub mod bench;
pub mod client;
pub mod cluster;
pub mod config;
pub mod etcd;
pub mod expr;
pub mod frame;
pub mod http;
pub mod node;
pub mod redis;
pub mod security;
pub mod server;
pub mod transport;
pub mod wal;

pub use client::Client;
pub use config::ClusterConfig;
pub use server::serve;
