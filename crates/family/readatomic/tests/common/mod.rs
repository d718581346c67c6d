//! What the simulator tests of this crate's protocols share: a small
//! contended `ramp-ycsb` run, its checks, and parameter edits.

#![allow(dead_code)] // each test file uses its own part

use meridian_checker::{HistoryOp, parse_jsonl};
use meridian_core::{
    ClusterSpec, Deployment, Key, LatencyMatrix, LeaderPlacement, Op, Outcome, Params, Program, Protocol, RegionId,
    RequestId, Topology, Value,
};
use meridian_experiment::Experiment;
use meridian_harness::runner::{RunOptions, RunOutput, run_sim};
use meridian_readatomic::lora::Lora;
use meridian_readatomic::ramp::{RampF, RampS};
use meridian_readatomic::ranoc::RaNoc;
use meridian_readatomic::ranoc2::RaNoc2;
use meridian_sim::{Sim, SimConfig};
use std::sync::Arc;

const MS: u64 = 1_000_000;

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
        "lora" => run_sim::<Lora>(&exp, opts),
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

/// The base run's edit that runs it for half a second.
pub fn shortened(t: String) -> String {
    t.replace("duration_s = 2.0", "duration_s = 0.5")
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

/// One session of protocol `P` in the simulator writing two fresh keys (one per
/// partition) and reading them back at once, 200 times, on a network that
/// loses a fifth of the messages (with `restart_client`, the client
/// crashes and restarts between every tenth write and its read); its
/// history in Elle's JSON lines, and
/// the client's counters.
pub fn write_then_read_session<P: Protocol>(params: Params, restart_client: bool) -> (Vec<HistoryOp>, u64, u64) {
    let matrix = LatencyMatrix::preset("tiga-gcp").unwrap();
    let spec = ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions: vec![RegionId(0)],
        shards: 2,
        replicas_per_shard: 1,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(0)],
        clients_per_region: 1,
    };
    let topology = Arc::new(Topology::build(&spec, &[]));
    let mut cfg = SimConfig::ideal(7, topology.clone(), matrix.clone());
    cfg.net.loss = 0.2;
    let d = Deployment { topology: topology.clone(), params, epsilon_us: 100, latency: Arc::new(matrix) };
    let mut sim = Sim::<P>::new(cfg, d).unwrap();
    let client = topology.clients()[0];
    let on = |shard: u32| {
        let t = Arc::clone(&topology);
        (0..).map(Key).filter(move |k| t.shard_of(*k).0 == shard)
    };
    let (mut a, mut b) = (on(0), on(1));
    let mut lines = Vec::new();
    let mut index = 0;
    let mut line = |kind: &str, mops: String| {
        lines.push(format!(r#"{{"index":{index},"type":"{kind}","process":1,"value":[{mops}]}}"#));
        index += 1;
    };
    let mut now = 100 * MS;
    sim.run_until(now);
    for i in 0..200u64 {
        let (x, y) = (a.next().unwrap(), b.next().unwrap());
        let (tx, ty) = (1 + 2 * i, 2 + 2 * i);
        let write = Program::new(vec![
            Op::Write { key: x, value: Value::int(tx, 0) },
            Op::Write { key: y, value: Value::int(ty, 0) },
        ]);
        let mops = format!(r#"["w",{},{tx}],["w",{},{ty}]"#, x.0, y.0);
        line("invoke", mops.clone());
        sim.request(client, RequestId(2 * i), write);
        let Some(done) = run_until_done(&mut sim, &mut now, RequestId(2 * i)) else {
            panic!("write {i} never finished")
        };
        if !matches!(done, Outcome::Committed { .. }) {
            line("info", mops);
            continue;
        }
        line("ok", mops);
        if restart_client && i % 10 == 0 {
            sim.crash(client);
            sim.restart(client);
        }
        let read = Program::new(vec![Op::Read { key: x }, Op::Read { key: y }]);
        line("invoke", format!(r#"["r",{},null],["r",{},null]"#, x.0, y.0));
        sim.request(client, RequestId(2 * i + 1), read);
        match run_until_done(&mut sim, &mut now, RequestId(2 * i + 1)) {
            Some(Outcome::Committed { results }) => {
                let tag = |v: &Option<Value>| v.as_ref().map_or("null".to_string(), |v| v.tag.to_string());
                line("ok", format!(r#"["r",{},{}],["r",{},{}]"#, x.0, tag(&results[0]), y.0, tag(&results[1])));
            }
            _ => line("fail", format!(r#"["r",{},null],["r",{},null]"#, x.0, y.0)),
        }
    }
    let counters = sim.counters();
    let get = |name: &str| counters.get(name).copied().unwrap_or(0);
    let (writes, phases) = (get("writes"), get("write_phases_on_client_path"));
    (parse_jsonl(&lines.join("\n")).unwrap(), writes, phases)
}

/// Runs until `request` completes (every request ends within
/// `max_attempts` resends).
fn run_until_done<P: Protocol>(sim: &mut Sim<P>, now: &mut u64, request: RequestId) -> Option<Outcome> {
    for _ in 0..200_000 {
        *now += MS / 10;
        sim.run_until(*now);
        if let Some(c) = sim.take_completions().into_iter().find(|c| c.request == request) {
            return Some(c.outcome);
        }
    }
    None
}
