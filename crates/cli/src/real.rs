//! Benchmarks against real systems: the experiment file's workload and
//! clients, run by the same driver as in the simulator, against a Meridian
//! cluster's front-end nodes (or etcd, for comparison); the same report
//! and history as `meridian sim`, checked by the same checker.
//!
//! Only the workload, client and run sections of the experiment file apply
//! here; the cluster file says what runs where. This module must never
//! start or stop cluster processes: `meridian cluster` does that.

use crate::report::{BenchFacts, CpuUse, Report, build_report_for};
use crate::runner::{RunFacts, build_driver};
use meridian_checker::HistoryOp;
use meridian_core::{ClusterSpec, Consistency, NodeId, RegionId, Topology};
use meridian_experiment::{ConfigError, Experiment};
use meridian_runtime::ClusterConfig;
use meridian_runtime::bench::{self, Backend, Completion, MeridianBackend, Span};
use meridian_runtime::etcd::EtcdBackend;
use meridian_runtime::security::Credentials;
use std::net::SocketAddr;
use std::time::Instant;
use tokio::sync::mpsc;

/// Why a bench could not run: bad input (exit 2) or a failure (exit 1).
#[derive(Debug)]
pub enum BenchError {
    Input(String),
    Failed(String),
}

impl From<ConfigError> for BenchError {
    fn from(e: ConfigError) -> Self {
        BenchError::Input(e.to_string())
    }
}

/// What a bench run produced.
pub struct BenchOutput {
    pub report: Report,
    pub history: Vec<HistoryOp>,
    /// What was added to every key of the history on the wire (the run's
    /// fresh key range, [`bench::key_offset`]).
    pub key_offset: u64,
}

/// The system under test.
pub enum Target<'a> {
    Meridian(&'a ClusterConfig),
    Etcd(&'a [SocketAddr]),
}

/// The bench clients: the experiment's client regions and counts, on the
/// cluster's regions and shards.
fn bench_topology(exp: &Experiment, cluster: &ClusterConfig) -> Result<Topology, BenchError> {
    let t = &cluster.topology;
    let mut client_regions = Vec::new();
    for (i, name) in exp.clients.regions.iter().enumerate() {
        let region = t.region_by_name(name).ok_or_else(|| {
            exp.error_at(
                &format!("clients.regions[{i}]"),
                format!("region `{name}` is not in cluster {} (regions: {})", cluster.file, t.regions.join(", ")),
            )
        })?;
        client_regions.push(region);
    }
    let spec = ClusterSpec {
        regions: t.regions.clone(),
        server_regions: t.server_regions.clone(),
        shards: t.shards,
        replicas_per_shard: t.replicas_per_shard,
        leaders: t.leaders,
        client_regions,
        clients_per_region: exp.clients.per_region,
    };
    Ok(Topology::build(&spec, &[]))
}

/// Each bench client's front-end: one in its region (round robin), else
/// any.
fn assign_frontends(bench: &Topology, cluster: &ClusterConfig) -> Vec<(NodeId, NodeId)> {
    let fronts = cluster.frontends();
    let mut by_region: std::collections::BTreeMap<RegionId, usize> = Default::default();
    bench
        .clients()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let region = bench.region_of(*c);
            let local: Vec<NodeId> =
                fronts.iter().copied().filter(|f| cluster.topology.region_of(*f) == region).collect();
            let pick = if local.is_empty() {
                fronts[i % fronts.len()]
            } else {
                let k = by_region.entry(region).or_default();
                *k += 1;
                local[(*k - 1) % local.len()]
            };
            (*c, pick)
        })
        .collect()
}

/// Each bench client's front-end address and the credentials it needs
/// (the cluster's password and CA, `meridian_runtime::security`).
fn frontend_links(
    bench: &Topology,
    cluster: &ClusterConfig,
) -> Result<Vec<(NodeId, SocketAddr, Credentials)>, BenchError> {
    let mut creds: std::collections::BTreeMap<NodeId, Credentials> = Default::default();
    let mut links = Vec::new();
    for (client, front) in assign_frontends(bench, cluster) {
        let addr = cluster.addrs[front.index()].client.expect("front-ends serve clients");
        let c = match creds.get(&front) {
            Some(c) => c.clone(),
            None => {
                let c = Credentials::for_frontend(cluster, front)?;
                creds.insert(front, c.clone());
                c
            }
        };
        links.push((client, addr, c));
    }
    Ok(links)
}

/// Runs the experiment's workload against `target`.
pub fn run_bench(
    exp: &Experiment,
    target: Target<'_>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<BenchOutput, BenchError> {
    let (topology, name, consistency) = match &target {
        Target::Meridian(c) => {
            let info = crate::registry::find(&c.protocol).expect("cluster files name known protocols");
            crate::runner::check_shapes(exp, info.name, info.shapes)?;
            (bench_topology(exp, c)?, c.protocol.clone(), info.promise(&c.params))
        }
        Target::Etcd(_) => {
            (Topology::build(&exp.cluster_spec(), &[]), "etcd".to_string(), Consistency::StrictSerializable)
        }
    };
    let mut driver = build_driver(exp, &topology, true, consistency)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::Failed(e.to_string()))?;
    let (tx, mut rx) = mpsc::unbounded_channel::<Completion>();
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let span = Span {
        duration_ns: exp.run.duration_ns(),
        drain_ns: exp.run.drain_ns(),
        key_offset: bench::key_offset(topology.shards, nonce ^ exp.run.seed),
    };
    let wall = Instant::now();
    let cpu_start_ns = bench::process_cpu_ns();
    let cluster_cpu_start = match &target {
        Target::Meridian(c) => meridian_runtime::cluster::node_cpu_ns(c),
        Target::Etcd(_) => Vec::new(),
    };
    let end_ns = rt.block_on(async {
        let mut backend: Box<dyn Backend> = match &target {
            Target::Meridian(c) => {
                let clients = frontend_links(&topology, c)?;
                let b = MeridianBackend::connect(&clients, tx).await.map_err(|e| {
                    BenchError::Failed(format!(
                        "cannot reach the cluster's front-ends ({e}); is it up? (meridian cluster status)"
                    ))
                })?;
                Box::new(b)
            }
            Target::Etcd(endpoints) => {
                let b = EtcdBackend::new(endpoints, tx);
                b.probe().await.map_err(BenchError::Failed)?;
                Box::new(b)
            }
        };
        Ok::<u64, BenchError>(bench::drive(&mut driver, backend.as_mut(), &mut rx, span, progress).await)
    })?;
    let wall_s = wall.elapsed().as_secs_f64();
    let cpu_ns = bench::process_cpu_ns().saturating_sub(cpu_start_ns);
    let history = driver.take_history();
    let facts = RunFacts {
        simulated_ns: end_ns,
        wall_s,
        events: 0,
        trace_hash: 0,
        counters: Vec::new(),
        observations: Vec::new(),
    };
    let mut report = build_report_for(&name, consistency, exp, &topology, driver.stats(), &history, true, facts);
    if let Target::Meridian(c) = &target {
        // The cluster's own processes, when they run here (`meridian
        // cluster up`): what the simulator's CPU model is calibrated
        // against.
        let end = meridian_runtime::cluster::node_cpu_ns(c);
        let used: Option<Vec<u64>> =
            cluster_cpu_start.iter().zip(&end).map(|(a, b)| Some(b.as_ref()?.saturating_sub((*a)?))).collect();
        if let Some(used) = used.filter(|u| !u.is_empty()) {
            report.cpu = Some(CpuUse::of(&c.topology, &used, report.txns.committed));
        }
    }
    let open_loop = exp.offered_tps(1).is_some();
    report.bench = Some(BenchFacts::measure(driver.stats(), open_loop, cpu_ns, wall_s));
    report.target = Some(match target {
        Target::Meridian(_) => "meridian".into(),
        Target::Etcd(_) => "etcd".into(),
    });
    Ok(BenchOutput { report, history, key_offset: span.key_offset })
}
