//! The typed, validated sections of an experiment, with every default
//! applied. Field names follow the experiment file (CONTRACT.md).

use meridian_core::{LeaderPlacement, Params, time};
use std::collections::BTreeMap;

/// `[cluster]`: where servers run and how data is split.
#[derive(Clone, PartialEq, Debug)]
pub struct Cluster {
    /// The latency preset, or `None` when `[network] rtt_ms` gives the matrix.
    pub preset: Option<String>,
    /// Regions hosting replicas; replica `r` of every shard lives in
    /// `server_regions[r % len]`.
    pub server_regions: Vec<String>,
    pub shards: u32,
    pub replicas_per_shard: u32,
    pub leaders: LeaderPlacement,
}

/// How clients submit transactions.
#[derive(Clone, PartialEq, Debug)]
pub enum ClientMode {
    /// Each client starts `rate_tps` transactions per second, with never
    /// more than `max_outstanding` at once.
    Open { rate_tps: f64, max_outstanding: u32 },
    /// Each client runs `sessions` loops, each one transaction at a time,
    /// pausing `think_ms` between them.
    Closed { think_ms: f64, sessions: u32 },
}

/// `[clients]`.
#[derive(Clone, PartialEq, Debug)]
pub struct Clients {
    pub regions: Vec<String>,
    pub per_region: u32,
    pub mode: ClientMode,
    /// Times an aborted transaction is retried (each retry a new attempt).
    pub max_retries: u32,
    /// Pause before a retry.
    pub retry_backoff_ms: f64,
}

impl Clients {
    /// Number of client nodes.
    pub fn total(&self) -> u32 {
        self.per_region.saturating_mul(self.regions.len() as u32)
    }
}

/// `[clock]`: how far node clocks are from true time.
#[derive(Clone, PartialEq, Debug)]
pub struct Clock {
    /// Each node's fixed offset is drawn from N(0, stddev).
    pub offset_ms_stddev: f64,
    /// Each node's drift is drawn uniformly in ±drift_ppm.
    pub drift_ppm: f64,
    /// TrueTime's uncertainty bound ε.
    pub epsilon_us: f64,
    /// Fixed offsets by node name (override the draw and the region's).
    pub offset_ms_by_node: BTreeMap<String, f64>,
    /// Fixed offsets for every node of a region (override the draw).
    pub offset_ms_by_region: BTreeMap<String, f64>,
}

/// `[network]`: misbehaviour on top of the latency matrix.
#[derive(Clone, PartialEq, Debug)]
pub struct Network {
    /// Mean of the exponential extra one-way delay.
    pub jitter_ms: f64,
    /// Probability a message is dropped.
    pub loss: f64,
    /// Probability a message is delivered twice.
    pub duplicate: f64,
    /// Whether messages on one link may overtake each other.
    pub reorder: bool,
    /// The explicit round-trip matrix as written (`"a-b" = ms`), if any.
    pub rtt_ms: Option<BTreeMap<String, f64>>,
    /// Round trip inside a region, when given (default 0.2 ms for an
    /// explicit matrix; a preset's own value otherwise).
    pub local_rtt_ms: Option<f64>,
    /// Every link's bandwidth: a message's encoded bytes take their time
    /// on the wire; 0 is unlimited.
    pub bandwidth_gbps: f64,
}

/// `[cpu]`: simulated CPU time per handled event, per role, per byte
/// and per field of every message sent or received (its encoding; fields 0
/// unless set), and per key a protocol charges (`Env::charge_keys`; 0
/// unless set).
#[derive(Clone, PartialEq, Debug)]
pub struct Cpu {
    pub server_us_per_msg: f64,
    pub client_us_per_msg: f64,
    /// Service nodes (view managers, sequencers, oracles).
    pub service_us_per_msg: f64,
    pub server_ns_per_byte: f64,
    pub client_ns_per_byte: f64,
    pub service_ns_per_byte: f64,
    pub server_ns_per_field: f64,
    pub client_ns_per_field: f64,
    pub service_ns_per_field: f64,
    pub server_ns_per_key: f64,
    pub client_ns_per_key: f64,
    pub service_ns_per_key: f64,
}

/// `[disk]`.
#[derive(Clone, PartialEq, Debug)]
pub struct Disk {
    /// Latency of a durable append.
    pub fsync_ms: f64,
}

/// Which part of the cluster a partition cuts off.
#[derive(Clone, PartialEq, Debug)]
pub enum PartitionTarget {
    /// Every node of these regions, cut off from the rest.
    Regions(Vec<String>),
    /// These nodes, cut off from the rest.
    Nodes(Vec<String>),
    /// The link between the two nodes of each pair, and no other: the
    /// nodes still reach everyone else (connectivity stops being
    /// transitive).
    Links(Vec<(String, String)>),
    /// The link from the first node of each pair to the second, one
    /// direction only: the second still reaches the first.
    OneWay(Vec<(String, String)>),
}

/// What a scheduled fault does.
#[derive(Clone, PartialEq, Debug)]
pub enum FaultKind {
    Crash {
        node: String,
    },
    /// Restarts a crashed node from its durable state.
    Restart {
        node: String,
    },
    Partition(PartitionTarget),
    /// Removes every cut.
    Heal,
    /// Moves a node's wall clock by `by_ms` (negative jumps back).
    ClockJump {
        node: String,
        by_ms: f64,
    },
}

/// One `[[faults]]` entry.
#[derive(Clone, PartialEq, Debug)]
pub struct Fault {
    /// Simulated seconds from the start of the run.
    pub at_s: f64,
    pub kind: FaultKind,
    /// Line of its `[[faults]]` header.
    pub line: usize,
}

impl Fault {
    /// The node names this fault refers to.
    pub fn node_names(&self) -> Vec<&str> {
        match &self.kind {
            FaultKind::Crash { node } | FaultKind::Restart { node } | FaultKind::ClockJump { node, .. } => {
                vec![node.as_str()]
            }
            FaultKind::Partition(PartitionTarget::Nodes(nodes)) => nodes.iter().map(String::as_str).collect(),
            FaultKind::Partition(PartitionTarget::Links(links) | PartitionTarget::OneWay(links)) => {
                links.iter().flat_map(|(a, b)| [a.as_str(), b.as_str()]).collect()
            }
            FaultKind::Partition(PartitionTarget::Regions(_)) | FaultKind::Heal => Vec::new(),
        }
    }

    /// When it happens, in nanoseconds of simulated time.
    pub fn at_ns(&self) -> u64 {
        time::ms_to_ns(self.at_s * 1000.0)
    }
}

/// `[run]`.
#[derive(Clone, PartialEq, Debug)]
pub struct Run {
    /// Simulated seconds during which transactions start.
    pub duration_s: f64,
    /// Leading seconds left out of throughput and latency.
    pub warmup_s: f64,
    /// Seconds after `duration_s` for outstanding transactions to finish.
    pub drain_s: f64,
    pub seed: u64,
}

impl Run {
    pub fn duration_ns(&self) -> u64 {
        time::ms_to_ns(self.duration_s * 1000.0)
    }

    pub fn warmup_ns(&self) -> u64 {
        time::ms_to_ns(self.warmup_s * 1000.0)
    }

    pub fn drain_ns(&self) -> u64 {
        time::ms_to_ns(self.drain_s * 1000.0)
    }
}

/// `[protocol]`.
#[derive(Clone, PartialEq, Debug)]
pub struct Protocol {
    /// The protocol's name; the caller checks that it exists.
    pub name: String,
    /// `[protocol.params]`; the protocol checks its own knobs.
    pub params: Params,
}
