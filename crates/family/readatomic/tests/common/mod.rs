//! What the simulator tests of this crate's protocols share: a small
//! contended `ramp-ycsb` run, its checks, and parameter edits.

#![allow(dead_code)] // each test file uses its own part

use meridian_experiment::Experiment;
use meridian_harness::runner::{RunOptions, RunOutput, run_sim};
use meridian_readatomic::ramp::{RampF, RampS};
use meridian_readatomic::ranoc::RaNoc;
use meridian_readatomic::ranoc2::RaNoc2;

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
name = "ramp-f"
"#;

/// The base run for `protocol`, edited.
pub fn experiment(protocol: &str, edit: impl FnOnce(String) -> String) -> Experiment {
    let text = edit(BASE.replace("name = \"ramp-f\"", &format!("name = \"{protocol}\"")));
    Experiment::from_str(&text, "readatomic.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// The base run for `protocol`, edited, simulated with its history.
pub fn run(protocol: &str, edit: impl FnOnce(String) -> String) -> RunOutput {
    let exp = experiment(protocol, edit);
    let opts = RunOptions { record_history: true, ..Default::default() };
    let out = match protocol {
        "ramp-f" => run_sim::<RampF>(&exp, opts),
        "ramp-s" => run_sim::<RampS>(&exp, opts),
        "ra-noc2" => run_sim::<RaNoc2>(&exp, opts),
        "ra-noc" => run_sim::<RaNoc>(&exp, opts),
        other => panic!("not a read-atomic protocol of this crate: {other}"),
    };
    out.unwrap_or_else(|e| panic!("{e}"))
}

pub fn assert_valid(out: &RunOutput) {
    assert_eq!(out.report.check_valid(), Some(true), "{:?}", out.report.check);
    assert!(out.report.txns.committed > 100, "too little committed: {:?}", out.report.txns);
}

pub fn with_params(params: &str) -> impl FnOnce(String) -> String + '_ {
    move |t| format!("{t}\n[protocol.params]\n{params}\n")
}

/// Appends a crash of `node` at `crash_s` and its restart from its
/// durable state at `restart_s`.
pub fn with_crash(node: &str, crash_s: f64, restart_s: f64) -> impl FnOnce(String) -> String + '_ {
    move |t| {
        format!(
            "{t}\n[[faults]]\nat_s = {crash_s:?}\nkind = \"crash\"\nnode = \"{node}\"\n\n[[faults]]\nat_s = {restart_s:?}\nkind = \"restart\"\nnode = \"{node}\"\n"
        )
    }
}

/// A valid run at `consistency` whose every read took one round, some of
/// them with their session's own write beyond the global safe view.
pub fn assert_one_round_reads(out: &RunOutput, consistency: &str) {
    assert_valid(out);
    let r = &out.report;
    assert_eq!(r.consistency, consistency);
    assert!(r.counter("reads") > 200, "{:?}", r.counters);
    assert_eq!(r.counter("read_rounds"), r.counter("reads"), "one round each: {:?}", r.counters);
    assert!(r.counter("keys_read_from_lsv") > 0, "some reads met their session's own write beyond the GSV");
}

/// The base run's edit that crashes a partition at 0.7 s and restarts it
/// at 1.0 s, with checkpoints, termination and resends fast enough to
/// show in two seconds.
pub fn partition_restart(t: String) -> String {
    let t = with_crash("shard1-replica0", 0.7, 1.0)(t);
    with_params("checkpoint_records = 200\nctp_ms = 100\nretry_ms = 50")(t)
}

/// A valid run of `partition_restart`: checkpoints taken, transactions
/// terminated, commits after the restart.
pub fn assert_recovered(out: &RunOutput) {
    assert_valid(out);
    let r = &out.report;
    assert!(r.counter("checkpoints") > 0, "{:?}", r.counters);
    assert!(r.counter("ctp_runs") > 0, "{:?}", r.counters);
    assert!(r.committed_per_s.last().copied().unwrap_or(0) > 0, "commits after the restart");
}
