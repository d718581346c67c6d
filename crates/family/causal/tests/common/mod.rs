//! What the simulator tests of this crate's protocols share: a small
//! contended `ramp-ycsb` run (read-only and write-only transactions), its
//! checks, and parameter edits.

#![allow(dead_code)] // each test file uses its own part

use meridian_experiment::Experiment;
use meridian_harness::runner::RunOutput;

/// Three partitions and sixteen closed-loop sessions in one region, on 30
/// keys, messages delayed by a millisecond of jitter on average: reads
/// race writes of the keys they read.
pub const BASE: &str = r#"
[cluster]
preset = "tiga-gcp"
server_regions = ["south-carolina"]
shards = 3
replicas_per_shard = 1

[clients]
regions = ["south-carolina"]
per_region = 4
mode = "closed"
sessions = 4
think_ms = 2.0

[workload]
kind = "ramp-ycsb"
keys = 30
zipf = 0.5
txn_size = 3
read_txn_pct = 50

[network]
jitter_ms = 1.0

[run]
duration_s = 2.0
warmup_s = 0.2
seed = 1

[protocol]
name = "eiger-noc2"
"#;

/// The base run for `protocol`, edited.
pub fn experiment(protocol: &str, edit: impl FnOnce(String) -> String) -> Experiment {
    let text = edit(BASE.replace("name = \"eiger-noc2\"", &format!("name = \"{protocol}\"")));
    Experiment::from_str(&text, "causal.toml").unwrap_or_else(|e| panic!("{e}"))
}

pub fn assert_valid(out: &RunOutput) {
    assert_eq!(out.report.check_valid(), Some(true), "{:?}", out.report.check);
    assert!(out.report.txns.committed > 100, "too little committed: {:?}", out.report.txns);
}

pub fn with_params(params: &str) -> impl FnOnce(String) -> String + '_ {
    move |t| format!("{t}\n[protocol.params]\n{params}\n")
}
