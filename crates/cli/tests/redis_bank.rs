//! A bank through redis-py with its defaults, on every implemented protocol
//! that runs read-write transactions:
//! a 3 shards × 3 replicas cluster with the tiga-gcp WAN emulated at a
//! fiftieth of its size, concurrent MULTI/EXEC transfers and whole-bank
//! reads (`tests/clients/redis_py_bank.py`) while each shard's leader in
//! turn is killed with SIGKILL and restarted from its write-ahead log. No
//! read may see the total change, every read's balances must be exactly
//! the logged transfers', every acknowledged transfer must be applied once,
//! and transfers must keep being acknowledged through every failover.

mod support;

use meridian_core::{Key, ShardId};
use meridian_protocols::registry;
use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};
use support::clients::{python, redis_py_available, script};
use support::cluster::{Shape, TestCluster, fast_failover};

const ACCOUNTS: u32 = 18;
const TRANSFER_THREADS: u32 = 6;
const READ_THREADS: u32 = 2;
/// Load before the first kill, and each victim's time down and back up.
const SETTLE: Duration = Duration::from_secs(2);
const DOWN: Duration = Duration::from_millis(2500);
const UP: Duration = Duration::from_millis(2500);
/// The script's transfer phase: the three kills and restarts, then a tail
/// with every node up.
const SECONDS: f64 = 20.0;

fn now() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).expect("after 1970").as_secs_f64()
}

/// The script's process, killed if the test ends before it does.
struct Script(Child);

impl Drop for Script {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run_protocol(protocol: &str) {
    let started = Instant::now();
    let mut cluster = TestCluster::start(
        &format!("bank-{protocol}"),
        Shape { protocol, shards: 3, replicas: 3, wan_scale: Some(0.02), params: fast_failover(protocol) },
    );
    // The accounts cover every shard, so every failover is in the way of
    // some transfers and every read.
    let shards: BTreeSet<ShardId> =
        (0..ACCOUNTS).map(|i| cluster.cfg.topology.shard_of(Key::named(format!("bank:acct:{i}").as_bytes()))).collect();
    assert_eq!(shards.len(), 3, "the accounts cover every shard: {shards:?}");

    let (out_path, err_path) = (cluster.dir.join("bank.out"), cluster.dir.join("bank.err"));
    let mut bank = Script(
        Command::new(python())
            .arg(script("redis_py_bank.py"))
            .arg(cluster.redis_addr().port().to_string())
            .args([ACCOUNTS, TRANSFER_THREADS, READ_THREADS].map(|n| n.to_string()))
            .arg(SECONDS.to_string())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out_path).expect("script output"))
            .stderr(std::fs::File::create(&err_path).expect("script errors"))
            .spawn()
            .expect("start the bank"),
    );

    // Each shard's leader in turn dies and comes back from its log; the
    // phases' times are compared with the acknowledgements'.
    std::thread::sleep(SETTLE);
    let mut victims = Vec::new();
    let mut phases = Vec::new();
    for s in 0..3 {
        let victim = cluster.cfg.topology.name(cluster.cfg.topology.initial_leader(ShardId(s))).to_string();
        let down = now();
        cluster.kill(&victim);
        std::thread::sleep(DOWN);
        let up = now();
        cluster.restart(&victim);
        std::thread::sleep(UP);
        phases.push((format!("{victim} (shard {s}'s leader) down"), down, up));
        phases.push((format!("after {victim} restarted"), up, now()));
        victims.push(victim);
    }

    // Bounded: the transfer phase, then the final read (at most 60 s) and
    // any operation's socket timeout; past that the bank hangs.
    let limit = Duration::from_secs_f64(SECONDS) + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = bank.0.try_wait().expect("wait for the bank") {
            break status;
        }
        if started.elapsed() > limit {
            drop(bank);
            panic!(
                "{protocol}: the bank hung; its output:\n{}\n{}\nfront-end log:\n{}",
                std::fs::read_to_string(&out_path).unwrap_or_default(),
                std::fs::read_to_string(&err_path).unwrap_or_default(),
                cluster.log(&cluster.frontend())
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = std::fs::read_to_string(&out_path).unwrap_or_default();
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    let summary = out.lines().find(|l| l.starts_with("bank: ")).unwrap_or("");
    let said: Vec<&str> = out.lines().filter(|l| !l.starts_with("acked-at")).collect();
    assert!(status.success(), "{protocol}: the bank failed ({status}):\n{}\n{err}", said.join("\n"));
    eprintln!("{protocol}: {summary} ({:.0} s)", started.elapsed().as_secs_f64());

    // Progress through every failover: transfers were acknowledged while
    // each leader was down (a shard fails over to another replica, or —
    // Calvin, SLOG — another region's copy answers) and after each came
    // back.
    let acked_at: Vec<f64> = out
        .lines()
        .find_map(|l| l.strip_prefix("acked-at"))
        .expect("acknowledgement times")
        .split_whitespace()
        .map(|t| t.parse().expect("a time"))
        .collect();
    let mut counts = Vec::new();
    for (phase, from, to) in &phases {
        let n = acked_at.iter().filter(|t| (*from..*to).contains(*t)).count();
        assert!(n > 0, "{protocol}: no transfer acknowledged while {phase}: {summary}");
        counts.push(n.to_string());
    }
    eprintln!("{protocol}: acknowledged while down / after restart, by shard: {}", counts.join(" / "));

    for victim in &victims {
        let log = std::fs::read_to_string(cluster.dir.join(format!("{victim}.log"))).unwrap_or_default();
        let recoveries = log.lines().filter(|l| l.contains("recovered the write-ahead log")).count();
        assert_eq!(recoveries, 2, "{victim} started twice:\n{log}");
    }
    cluster.wait_healthy(Duration::from_secs(10));
}

#[test]
fn a_redis_py_bank_keeps_its_total_across_leader_sigkills_on_every_protocol() {
    if !redis_py_available() {
        return;
    }
    // A transfer reads both balances and writes them in one transaction:
    // protocols of read-only and write-only transactions (RAMP, NOC-NOC)
    // refuse it, and promise no bank total anyway (read atomicity allows
    // lost updates).
    for info in registry::implemented_protocols().filter(|p| p.shapes.read_write) {
        run_protocol(info.name);
    }
}
