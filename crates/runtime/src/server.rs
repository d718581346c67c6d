//! `meridian server`: one node of a cluster as an OS process. Opens and
//! recovers the node's write-ahead log, binds its listeners (peer
//! transport; on front-end nodes the client API and the Redis gateway;
//! `/metrics` and `/health`), and runs the protocol named by the cluster
//! file: generic over the protocol, so every protocol runs here without
//! code of its own. Stops cleanly on SIGTERM or SIGINT (what is queued for the log
//! is written first); SIGKILL loses only what was never acknowledged.

use crate::config::ClusterConfig;
use crate::node::{self, NodeInputs, NodeParts, Request};
use crate::transport::{self, Peers, Transport};
use crate::wal::{Wal, WalWriter};
use crate::{api, redis};
use meridian_core::{NodeId, Protocol};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

/// Messages from peers waiting for the node loop.
const INBOX_MESSAGES: usize = 8192;
/// Client requests waiting for the node loop.
const REQUEST_QUEUE: usize = 4096;

/// Runs node `name` of the cluster, which runs protocol `P`, until it is
/// told to stop. Protocol crates put this, instantiated for their
/// protocols, in their entry table.
pub fn serve<P: Protocol>(cfg: ClusterConfig, name: &str) -> Result<(), String> {
    let me = cfg.node(name)?;
    let cfg = Arc::new(cfg);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    if cfg.protocol != P::NAME {
        return Err(format!("{}: the cluster runs `{}`, not `{}`", cfg.file, cfg.protocol, P::NAME));
    }
    rt.block_on(serve_as::<P>(cfg.clone(), me))
}

async fn bind(what: &str, addr: std::net::SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr).await.map_err(|e| format!("cannot listen for {what} on {addr}: {e}"))
}

fn install_metrics() -> Result<PrometheusHandle, String> {
    let latency_s = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0];
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full("meridian_txn_latency_seconds".into()), &latency_s)
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full("meridian_wal_fsync_seconds".into()), &latency_s))
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full("meridian_wal_snapshot_seconds".into()), &latency_s))
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full("meridian_handler_seconds".into()), &latency_s))
        .and_then(|b| {
            let mib = |m: f64| m * 1048576.0;
            b.set_buckets_for_metric(
                Matcher::Full("meridian_wal_snapshot_bytes".into()),
                &[mib(0.1), mib(1.0), mib(4.0), mib(16.0), mib(64.0), mib(256.0)],
            )
        })
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full("meridian_wal_batch_commands".into()),
                &[1.0, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0, 1024.0, 4096.0],
            )
        })
        .map_err(|e| format!("metrics: {e}"))?
        .install_recorder()
        .map_err(|e| format!("metrics: {e}"))
}

async fn serve_as<P: Protocol>(cfg: Arc<ClusterConfig>, me: NodeId) -> Result<(), String> {
    let addrs = cfg.addrs[me.index()].clone();
    let name = cfg.topology.name(me).to_string();
    // The password and certificates first: a node that cannot prove who it
    // is must not start.
    let security = crate::security::node_security(&cfg, me).map_err(|e| e.to_string())?;
    let peer_listener = bind("peers", addrs.peer).await?;
    let metrics_listener = bind("metrics", addrs.metrics).await?;
    let client_listener = match addrs.client {
        Some(a) => Some(bind("clients", a).await?),
        None => None,
    };
    let redis_listener = match addrs.redis {
        Some(a) => Some(bind("the Redis gateway", a).await?),
        None => None,
    };
    let handle = install_metrics()?;

    let wal_dir = cfg.wal_dir(me);
    let (mut wal, recovered) =
        Wal::open(&wal_dir).map_err(|e| format!("write-ahead log {}: {e}", wal_dir.display()))?;
    wal.set_fsync(cfg.fsync);
    let durable = node::decode_recovered::<P>(&recovered)?;
    tracing::info!(
        node = %name,
        protocol = P::NAME,
        records = recovered.records.len(),
        snapshots = recovered.snapshots.len(),
        torn_bytes = recovered.torn_bytes,
        "recovered the write-ahead log"
    );
    let (durable_tx, durable_rx) = watch::channel(0u64);
    let writer = WalWriter::spawn(
        wal,
        Box::new(move |upto, batch| {
            metrics::histogram!("meridian_wal_batch_commands").record(batch as f64);
            durable_tx.send_replace(upto.0);
        }),
    );

    let n = cfg.topology.nodes.len();
    let transport = Transport::start(Peers {
        me,
        cluster: cfg.cluster_id(),
        addrs: cfg.addrs.iter().map(|a| a.peer).collect(),
        delay_ns: (0..n).map(|i| cfg.one_way_ns(me, NodeId(i as u32))).collect(),
        jitter_mean_ns: cfg.wan.as_ref().map_or(0.0, |w| w.jitter_ms * 1e6 * w.scale),
        queue_messages: cfg.queue_messages,
        stale: cfg.stale,
        seed: cfg.seed,
        tls: security.peers.clone(),
    });
    let (peers_tx, peers_rx) = mpsc::channel::<transport::Inbound<P::Msg>>(INBOX_MESSAGES);
    let (requests_tx, requests_rx) = mpsc::channel::<Request>(REQUEST_QUEUE);
    tokio::spawn(transport::accept_peers::<P::Msg>(peer_listener, cfg.cluster_id(), n, peers_tx, security.peers));
    if let Some(l) = client_listener {
        tokio::spawn(api::serve_clients(l, requests_tx.clone(), security.clients.clone()));
    }
    if let Some(l) = redis_listener {
        let topology = Arc::clone(&cfg.topology);
        tokio::spawn(redis::serve(l, requests_tx.clone(), name.clone(), topology, security.clients.clone()));
    }
    drop(requests_tx);
    spawn_metrics(metrics_listener, handle, &cfg, me);
    tracing::info!(
        node = %name,
        peer = %addrs.peer,
        client = ?addrs.client,
        redis = ?addrs.redis,
        metrics = %addrs.metrics,
        peer_tls = cfg.security.tls,
        client_tls = cfg.security.client_tls,
        password = cfg.security.password.is_some(),
        "serving"
    );

    let parts = NodeParts { cfg: cfg.clone(), me, transport, wal: writer, next_lsn: recovered.next_lsn.0 };
    let inputs = NodeInputs { peers: peers_rx, requests: requests_rx, durable: durable_rx };
    let result = node::run::<P>(parts, durable, inputs, stop_signal()).await;
    tracing::info!(node = %name, "stopped");
    result
}

fn spawn_metrics(listener: TcpListener, handle: PrometheusHandle, cfg: &ClusterConfig, me: NodeId) {
    let node = cfg.topology.node(me);
    let health = serde_json::json!({
        "node": node.name,
        "region": cfg.topology.region_name(node.region),
        "protocol": cfg.protocol,
        "pid": std::process::id(),
        "status": "ok",
    })
    .to_string();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    tokio::spawn(crate::http::serve(listener, move |path| match path {
        "/metrics" => Some(("text/plain; version=0.0.4", handle.render())),
        "/health" => Some(("application/json", format!("{health}\n"))),
        _ => None,
    }));
}

async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
