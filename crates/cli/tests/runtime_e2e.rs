//! End to end on real processes: every implemented protocol as a 3 shards ×
//! 3 replicas cluster of `meridian server` processes on loopback, with the
//! tiga-gcp WAN emulated at a fiftieth of its size; a bounded list-append
//! load through the benchmark driver while the first shard's leader is
//! killed with SIGKILL and restarted from its write-ahead log. The recorded
//! history must satisfy the protocol's promise, every acknowledged append
//! must be in the final lists (and no failed one), and the restarted
//! replica must have rejoined: with another replica of its shard killed,
//! the shard still commits. Then every server and service is killed at
//! once and restarted: nothing acknowledged is lost and commits resume.
//! The same runs once more for `2pl-paxos` with `lock_at = "home"` (SLOG's
//! 2PL-coord), whose killed replica is the home of the keys it serves.

mod support;

use meridian_checker::{Mop, OpType};
use meridian_core::{Data, Key, Op, Outcome, Program};
use meridian_experiment::Experiment;
use meridian_protocols::registry;
use meridian_runtime::Client;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use support::cluster::{Shape, TestCluster, fast_failover};

const WORKLOAD: &str = r#"
[cluster]
preset = "tiga-gcp"
server_regions = ["south-carolina", "finland", "brazil"]
shards = 3
replicas_per_shard = 3

[clients]
regions = ["south-carolina"]
per_region = 4
mode = "closed"
think_ms = 2.0
max_retries = 3
retry_backoff_ms = 5.0

[workload]
kind = "list-append"
keys_per_shard = 4
ops_per_txn = 3
read_ratio = 0.4
shards_per_txn = [1, 3]

[run]
duration_s = 6.0
warmup_s = 0.0
drain_s = 6.0
seed = 7

[protocol]
name = "2pl-paxos"
"#;

/// Elements of committed and of failed appends, by key, from the history.
fn appends(history: &[meridian_checker::HistoryOp]) -> (BTreeMap<u64, BTreeSet<u64>>, BTreeSet<u64>) {
    let mut committed: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let mut failed = BTreeSet::new();
    for op in history {
        for mop in &op.value {
            if let Mop::Append { key, element } = mop {
                match op.kind {
                    OpType::Ok => {
                        committed.entry(*key).or_default().insert(*element);
                    }
                    OpType::Fail => {
                        failed.insert(*element);
                    }
                    _ => {}
                }
            }
        }
    }
    (committed, failed)
}

/// Runs `program` until it commits (bounded), returning its results.
async fn commit(client: &Client, program: &Program, within: Duration) -> Vec<Option<meridian_core::Value>> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match client.run(program.clone()).await.expect("front-end reachable") {
            Outcome::Committed { results } => return results,
            other => {
                assert!(tokio::time::Instant::now() < deadline, "no commit within {within:?}: last {other:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// An append of `element` to `key`, or, for a protocol that runs only
/// write-only transactions (RAMP), a blind write tagged `element`.
fn one_write(read_write: bool, key: Key, element: u64) -> Program {
    if read_write {
        return Program::new(vec![Op::Append { key, element }]);
    }
    Program::new(vec![Op::Write { key, value: meridian_core::Value::int(element, 0) }])
}

fn run_protocol(protocol: &str, params: Vec<String>) {
    let mut cluster =
        TestCluster::start(protocol, Shape { protocol, shards: 3, replicas: 3, wan_scale: Some(0.02), params });
    let mut exp = Experiment::from_str(WORKLOAD, "e2e.toml").unwrap_or_else(|e| panic!("{e}"));
    exp.set_protocol(protocol);
    // A protocol that cannot run list-append runs the workload it can; the
    // acknowledged-append checks below then have nothing to check.
    exp.workload = meridian_workload::workload_for(registry::find(protocol).expect("registered").shapes, &exp.workload);
    let cfg = cluster.cfg.clone();
    let bench = std::thread::spawn(move || {
        meridian_cli::real::run_bench(&exp, meridian_cli::real::Target::Meridian(&cfg), &mut |_, _| {})
            .map_err(|e| format!("{e:?}"))
    });
    // The first shard's leader dies mid-load and comes back from its log.
    let victim = cluster.cfg.topology.name(cluster.cfg.topology.initial_leader(meridian_core::ShardId(0))).to_string();
    std::thread::sleep(Duration::from_millis(1500));
    cluster.kill(&victim);
    std::thread::sleep(Duration::from_millis(1500));
    cluster.restart(&victim);
    let out = bench.join().expect("bench thread").unwrap_or_else(|e| panic!("{e}"));
    cluster.wait_healthy(Duration::from_secs(10));

    eprint!("{}", meridian_cli::summary(&out.report));
    let log = std::fs::read_to_string(cluster.dir.join(format!("{victim}.log"))).unwrap_or_default();
    let recoveries: Vec<&str> = log.lines().filter(|l| l.contains("recovered the write-ahead log")).collect();
    assert_eq!(recoveries.len(), 2, "{victim} started twice:\n{log}");
    // Found: records, or a snapshot alone when a compaction just preceded
    // the kill.
    let count = |field: &str| {
        let at = recoveries[1].find(&format!(" {field}=")).map(|i| i + field.len() + 2);
        at.and_then(|i| recoveries[1][i..].split(' ').next()?.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {field} in {}", recoveries[1]))
    };
    assert!(count("records") + count("snapshots") > 0, "the restart found its log: {}", recoveries[1]);
    let check = out.report.check.clone().expect("history checked");
    assert_eq!(out.report.check_valid(), Some(true), "{protocol}: history invalid: {check}");
    assert!(out.report.txns.committed > 20, "{protocol}: too little committed: {:?}", out.report.txns);

    let (committed, failed) = appends(&out.history);
    let keys: Vec<u64> = committed.keys().copied().collect();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = rt.block_on(Client::connect(cluster.client_addr())).expect("connect");
    let read_all = Program::new(keys.iter().map(|k| Op::Read { key: Key(k + out.key_offset) }).collect());
    let still_there = |results: &[Option<meridian_core::Value>], when: &str| {
        for (key, value) in keys.iter().zip(results) {
            let list: BTreeSet<u64> = match value.as_ref().map(|v| &v.data) {
                Some(Data::List(l)) => l.iter().copied().collect(),
                _ => BTreeSet::new(),
            };
            let missing: Vec<_> = committed[key].difference(&list).collect();
            assert!(missing.is_empty(), "{protocol}: acknowledged appends lost on key {key} {when}: {missing:?}");
            let ghosts: Vec<_> = list.intersection(&failed).collect();
            assert!(ghosts.is_empty(), "{protocol}: failed appends visible on key {key} {when}: {ghosts:?}");
        }
    };
    still_there(&rt.block_on(commit(&client, &read_all, Duration::from_secs(10))), "after the run");

    // The restarted replica rejoined: without another member of its shard,
    // the shard still reaches a majority.
    let shard0 = cluster.cfg.topology.replicas(meridian_core::ShardId(0)).to_vec();
    let other = shard0.iter().map(|n| cluster.cfg.topology.name(*n).to_string()).find(|n| *n != victim).unwrap();
    cluster.kill(&other);
    let key = (0..).map(Key).find(|k| cluster.cfg.topology.shard_of(*k).0 == 0).unwrap();
    let read_write = registry::find(protocol).expect("registered").shapes.read_write;
    rt.block_on(commit(&client, &one_write(read_write, key, u64::MAX - 1), Duration::from_secs(15)));

    // Every server and service dies at once (SIGKILL) and restarts from its
    // log alone: no live node can hand it state. Every acknowledged append
    // is still there and new ones commit.
    let topo = cluster.cfg.topology.clone();
    let servers: Vec<String> = (0..topo.nodes.len() as u32)
        .map(meridian_core::NodeId)
        .filter(|n| !topo.is_client(*n))
        .map(|n| topo.name(n).to_string())
        .filter(|n| *n != other)
        .collect();
    for name in &servers {
        cluster.kill(name);
    }
    for name in servers.iter().chain([&other]) {
        cluster.restart(name);
    }
    still_there(&rt.block_on(commit(&client, &read_all, Duration::from_secs(30))), "after a whole restart");
    rt.block_on(commit(&client, &one_write(read_write, key, u64::MAX - 2), Duration::from_secs(15)));
}

#[test]
fn every_protocol_keeps_acknowledged_commits_across_a_leader_sigkill() {
    for info in registry::implemented_protocols() {
        let name = info.name;
        assert!(registry::entry(name).is_some(), "{name} is listed runnable but has no entry");
        run_protocol(name, fast_failover(name));
    }
}

/// SLOG's 2PL-coord, `2pl-paxos` with `lock_at = "home"`: every key is
/// served by its shard's replica in its home region alone, whose log is its
/// own. The killed replica is the home of shard 0's first keys: it comes
/// back from its own write-ahead log, with every commit it acknowledged;
/// the shard's other homes go on meanwhile.
#[test]
fn two_pl_coord_keeps_acknowledged_commits_across_a_home_replica_sigkill() {
    let mut params = fast_failover("2pl-paxos");
    params.push("lock_at = \"home\"".into());
    run_protocol("2pl-paxos", params);
}
