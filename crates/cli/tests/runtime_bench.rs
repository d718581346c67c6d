//! `meridian bench` with open-loop clients against a real cluster with the
//! WAN emulated (scaled down): the run ends on time — its duration, then at
//! most its drain, plus a margin for start-up and the check — and reports
//! the offered and sent rates, how late the generator sent its arrivals and
//! its own CPU share.

mod support;

use serde_json::Value as Json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::cluster::{Shape, TestCluster};

const DURATION_S: f64 = 3.0;
const DRAIN_S: f64 = 3.0;
/// Process start, connections, writing and checking the history.
const MARGIN_S: f64 = 20.0;
const CLIENTS: u32 = 16;
const RATE_TPS: f64 = 100.0;

fn experiment() -> String {
    format!(
        r#"
[cluster]
preset = "tiga-gcp"
server_regions = ["south-carolina", "finland", "brazil"]
shards = 1
replicas_per_shard = 3

[clients]
regions = ["south-carolina"]
per_region = {CLIENTS}
mode = "open"
rate_tps = {RATE_TPS}
max_outstanding = 2000
max_retries = 10
retry_backoff_ms = 2.0

[workload]
kind = "ycsb-t"
keys_per_shard = 100000
zipf = 0.0
ops_per_txn = 3
read_ratio = 0.0
shards_per_txn = 1

[run]
duration_s = {DURATION_S}
warmup_s = 0.5
drain_s = {DRAIN_S}
seed = 1

[protocol]
name = "2pl-paxos"
"#
    )
}

#[test]
fn an_open_loop_bench_under_wan_emulation_finishes_on_time_and_reports_its_load() {
    let cluster = TestCluster::start(
        "bench-open",
        Shape { protocol: "2pl-paxos", shards: 1, replicas: 3, wan_scale: Some(0.1), params: Vec::new() },
    );
    let exp = cluster.dir.join("open.toml");
    std::fs::write(&exp, experiment()).expect("write the experiment");
    let report = cluster.dir.join("report.json");
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["bench", "--cluster"])
        .arg(&cluster.file)
        .arg("--config")
        .arg(&exp)
        .arg("--report")
        .arg(&report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start meridian bench");
    let limit = Duration::from_secs_f64(DURATION_S + DRAIN_S + MARGIN_S);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("meridian bench still running after {limit:?} for a {DURATION_S} s run with {DRAIN_S} s of drain");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(status.success(), "bench failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("load: offered 1600.0 txn/s"), "the summary gives the offered rate: {stdout}");
    assert!(stdout.contains("bench CPU"), "the summary gives the bench's CPU share: {stdout}");

    let r: Json = serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
    let offered = r["offered_tps"].as_f64().expect("offered_tps");
    assert_eq!(offered, f64::from(CLIENTS) * RATE_TPS);
    // Poisson arrivals: 4,800 expected in the run, so ±10 % is far outside
    // chance; a generator that cannot keep up shows here too.
    let sent = r["sent_tps"].as_f64().expect("sent_tps");
    assert!((sent - offered).abs() < 0.1 * offered, "sent {sent} txn/s of {offered} offered");
    let bench = &r["bench"];
    assert!(bench["cpu_pct"].as_f64().is_some_and(|c| c > 0.0), "bench CPU share: {bench}");
    assert!(bench["schedule_lag_ms"]["p99"].as_f64().is_some(), "schedule lag: {bench}");
    assert!(bench["on_schedule"].is_boolean(), "{bench}");
    assert_eq!(r["check"]["valid"], Json::Bool(true), "history: {}", r["check"]);
    assert!(r["txns"]["committed"].as_u64().unwrap_or(0) > 1000, "{}", r["txns"]);
    assert_eq!(r["txns"]["unknown"].as_u64(), Some(0), "every transaction finished within the drain");
}
