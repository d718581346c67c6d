//! The experiment file exactly as written: serde types with every table
//! `deny_unknown_fields` and every optional field an `Option`, so that
//! typing errors come from toml with a span and defaults are applied (and
//! documented) in one place, the resolution step.

use meridian_workload::WorkloadSpec;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExperiment {
    pub cluster: RawCluster,
    pub clients: Option<RawClients>,
    pub workload: Option<WorkloadSpec>,
    pub clock: Option<RawClock>,
    pub network: Option<RawNetwork>,
    pub cpu: Option<RawCpu>,
    pub disk: Option<RawDisk>,
    #[serde(default)]
    pub faults: Vec<RawFault>,
    pub run: Option<RawRun>,
    pub protocol: RawProtocol,
}

#[derive(Copy, Clone, Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RawLeaders {
    Colocated,
    Spread,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    pub preset: Option<String>,
    pub server_regions: Vec<String>,
    pub shards: Option<u32>,
    pub replicas_per_shard: Option<u32>,
    pub leaders: Option<RawLeaders>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RawMode {
    Open,
    Closed,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClients {
    pub regions: Option<Vec<String>>,
    pub per_region: Option<u32>,
    pub mode: Option<RawMode>,
    pub rate_tps: Option<f64>,
    pub max_outstanding: Option<u32>,
    pub think_ms: Option<f64>,
    pub sessions: Option<u32>,
    pub max_retries: Option<u32>,
    pub retry_backoff_ms: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClock {
    pub offset_ms_stddev: Option<f64>,
    pub drift_ppm: Option<f64>,
    pub epsilon_us: Option<f64>,
    pub offset_ms_by_node: Option<BTreeMap<String, f64>>,
    pub offset_ms_by_region: Option<BTreeMap<String, f64>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNetwork {
    pub jitter_ms: Option<f64>,
    pub loss: Option<f64>,
    pub duplicate: Option<f64>,
    pub reorder: Option<bool>,
    pub rtt_ms: Option<BTreeMap<String, f64>>,
    pub local_rtt_ms: Option<f64>,
    pub bandwidth_gbps: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCpu {
    pub server_us_per_msg: Option<f64>,
    pub client_us_per_msg: Option<f64>,
    pub service_us_per_msg: Option<f64>,
    pub server_ns_per_byte: Option<f64>,
    pub client_ns_per_byte: Option<f64>,
    pub service_ns_per_byte: Option<f64>,
    pub server_ns_per_field: Option<f64>,
    pub client_ns_per_field: Option<f64>,
    pub service_ns_per_field: Option<f64>,
    pub server_ns_per_key: Option<f64>,
    pub client_ns_per_key: Option<f64>,
    pub service_ns_per_key: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDisk {
    pub fsync_ms: Option<f64>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RawFaultKind {
    Crash,
    Restart,
    Partition,
    Heal,
    ClockJump,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFault {
    pub at_s: f64,
    pub kind: RawFaultKind,
    pub node: Option<String>,
    pub regions: Option<Vec<String>>,
    pub nodes: Option<Vec<String>>,
    pub links: Option<Vec<Vec<String>>>,
    pub one_way: Option<Vec<Vec<String>>>,
    pub by_ms: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    pub duration_s: Option<f64>,
    pub warmup_s: Option<f64>,
    pub drain_s: Option<f64>,
    pub seed: Option<u64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProtocol {
    pub name: String,
    pub params: Option<BTreeMap<String, toml::Value>>,
}
