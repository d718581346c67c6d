//! A replica whose state outgrew a client frame still catches up: a
//! follower that was down while its peers checkpointed a 24 MiB state and
//! compacted their logs receives the checkpoint whole over the wire, and
//! the node that sends it keeps running. (A checkpoint larger than the
//! client API's 16 MiB frame once stopped the sending node.)

mod support;

use meridian_core::Outcome;
use meridian_runtime::Client;
use std::time::{Duration, Instant};
use support::cluster::{Shape, TestCluster};

const BIG_VALUES: usize = 24;
const VALUE_BYTES: usize = 1 << 20;

fn counter(cluster: &TestCluster, node: &str, name: &str) -> u64 {
    let addr = cluster.addr_of(node).metrics;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let (_, body) = rt.block_on(meridian_runtime::http::get(addr, "/metrics")).expect("metrics answer");
    body.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

async fn put_committed(client: &Client, key: &[u8], value: &[u8]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match client.put(key, value).await.expect("front-end reachable") {
            Outcome::Committed { .. } => return,
            other => {
                assert!(tokio::time::Instant::now() < deadline, "no commit: {other:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[test]
fn a_follower_catches_up_from_a_checkpoint_larger_than_a_client_frame() {
    let params = vec!["checkpoint_every_slots = 10".to_string(), "heartbeat_ms = 20".to_string()];
    let mut cluster = TestCluster::start(
        "large-state",
        Shape { protocol: "2pl-paxos", shards: 1, replicas: 3, wan_scale: None, params },
    );
    let lagging = "shard0-replica2";
    cluster.kill(lagging);

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let client = rt.block_on(Client::connect(cluster.client_addr())).expect("connect");
    rt.block_on(async {
        for i in 0..BIG_VALUES {
            let value = vec![b'a' + (i % 26) as u8; VALUE_BYTES];
            put_committed(&client, format!("big-{i}").as_bytes(), &value).await;
        }
        // Enough small writes after them for the next checkpoint.
        for i in 0..200 {
            put_committed(&client, format!("small-{i}").as_bytes(), b"x").await;
        }
    });
    let leader = "shard0-replica0";
    assert!(counter(&cluster, leader, "meridian_protocol_counter_total{counter=\"paxos_checkpoints\"}") >= 1);

    cluster.restart(lagging);
    let installed = "meridian_protocol_counter_total{counter=\"paxos_snapshots_installed\"}";
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cluster.healthy(lagging) || counter(&cluster, lagging, installed) == 0 {
        assert!(Instant::now() < deadline, "{lagging} never installed a checkpoint; log:\n{}", cluster.log(lagging));
        std::thread::sleep(Duration::from_millis(100));
    }
    for node in ["shard0-replica0", "shard0-replica1"] {
        assert!(cluster.healthy_within(node, Duration::from_secs(10)), "{node} stopped; log:\n{}", cluster.log(node));
        assert_eq!(counter(&cluster, node, "meridian_net_too_large_total"), 0, "{node} dropped a message");
    }
    // With the leader gone, the caught-up replica and the other one
    // still hold every big value.
    cluster.kill(leader);
    rt.block_on(async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        for i in [0, BIG_VALUES - 1] {
            let value = loop {
                match client.get(format!("big-{i}").as_bytes()).await.expect("front-end reachable") {
                    Ok(v) => break v,
                    Err(other) => {
                        assert!(tokio::time::Instant::now() < deadline, "no read: {other:?}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            };
            let bytes = value.unwrap_or_else(|| panic!("big-{i} is absent"));
            assert_eq!(bytes.len(), VALUE_BYTES);
            assert!(bytes.iter().all(|b| *b == b'a' + (i % 26) as u8));
        }
    });
}
