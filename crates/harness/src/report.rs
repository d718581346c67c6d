//! The run report of CONTRACT.md (JSON) and its human summary.
//!
//! Throughput and latency count only requests committed after warm-up and
//! before the end of the run; `txns` counts every request's final outcome.

use crate::runner::{Observation, RunFacts};
use hdrhistogram::Histogram;
use meridian_checker::{HistoryOp, Model};
use meridian_core::{Consistency, Protocol, Topology};
use meridian_experiment::Experiment;
use meridian_workload::DriverStats;
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

/// The final-database audit's verdict.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Audit {
    pub kind: String,
    /// Whether every condition was read and held.
    pub valid: bool,
    pub violations: Vec<String>,
    /// Why the audit could not read everything (then not valid).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

impl Audit {
    pub fn of(kind: &str, violations: Vec<String>) -> Audit {
        Audit { kind: kind.into(), valid: violations.is_empty(), violations, incomplete: None }
    }

    pub fn incomplete(why: &str) -> Audit {
        Audit { kind: "tpcc-consistency".into(), valid: false, violations: Vec::new(), incomplete: Some(why.into()) }
    }
}

/// One transaction type's latency.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TypeLatency {
    #[serde(flatten)]
    pub all: Percentiles,
    pub by_region: BTreeMap<String, Percentiles>,
}

/// CPU time spent by role, and per committed transaction.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CpuUse {
    /// `server`, `client`, `service`: ms of CPU time over the run.
    pub busy_ms_by_role: BTreeMap<String, f64>,
    /// Every role's CPU time divided by the transactions committed.
    pub us_per_committed_txn: f64,
    /// Per role, the node that was busy longest: the one a saturated run
    /// is bounded by.
    pub busiest_by_role: BTreeMap<String, Busiest>,
}

/// One node's CPU time over the run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Busiest {
    pub node: String,
    pub busy_ms: f64,
}

impl CpuUse {
    /// From CPU ns per node and the nodes' roles.
    pub fn of(topology: &Topology, ns_by_node: &[u64], committed: u64) -> CpuUse {
        let mut by_role: BTreeMap<String, f64> = BTreeMap::new();
        let mut busiest: BTreeMap<String, Busiest> = BTreeMap::new();
        for (node, ns) in topology.nodes.iter().zip(ns_by_node) {
            let role = match node.role {
                meridian_core::Role::Client { .. } => "client",
                meridian_core::Role::Service { .. } => "service",
                _ => "server",
            };
            let ms = *ns as f64 / 1e6;
            *by_role.entry(role.into()).or_default() += ms;
            let top = busiest.entry(role.into()).or_insert(Busiest { node: node.name.clone(), busy_ms: ms });
            if ms > top.busy_ms {
                *top = Busiest { node: node.name.clone(), busy_ms: ms };
            }
        }
        for b in busiest.values_mut() {
            b.busy_ms = round3(b.busy_ms);
        }
        let total_us: f64 = by_role.values().sum::<f64>() * 1e3;
        let by_role = by_role.into_iter().map(|(r, ms)| (r, round3(ms))).collect();
        CpuUse {
            busy_ms_by_role: by_role,
            us_per_committed_txn: round3(total_us / committed.max(1) as f64),
            busiest_by_role: busiest,
        }
    }
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Txns {
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    pub protocol: String,
    pub consistency: String,
    pub seed: u64,
    pub simulated_s: f64,
    pub wall_s: f64,
    pub events: u64,
    pub events_per_wall_s: f64,
    pub trace_hash: String,
    pub config: String,
    pub workload: String,
    pub nodes: Vec<String>,
    pub txns: Txns,
    pub throughput_tps: f64,
    pub latency_ms: Percentiles,
    pub latency_ms_by_region: BTreeMap<String, Percentiles>,
    /// Final outcomes per transaction type (as the workload names it).
    pub txns_by_type: BTreeMap<String, Txns>,
    /// Latency per transaction type, overall and per region.
    pub latency_ms_by_type: BTreeMap<String, TypeLatency>,
    /// Latency CDF points `[latency_ms, fraction]`, for all transactions
    /// (`all`) and per type: what a CDF plot needs.
    pub latency_cdf_ms: BTreeMap<String, Vec<[f64; 2]>>,
    /// The same per client region.
    pub latency_cdf_ms_by_region: BTreeMap<String, Vec<[f64; 2]>>,
    /// Aborted attempts by reason (`conflict`, `timeout`, `rejected`,
    /// `rollback`), retried or not.
    pub aborts_by_reason: BTreeMap<String, u64>,
    pub counters: BTreeMap<String, u64>,
    /// Below strict serializability: the share of committed reads that saw
    /// the newest version committed when they were invoked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub up_to_date_reads_pct: Option<f64>,
    /// How long stale reads' versions had been superseded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staleness_ms: Option<Percentiles>,
    /// Percentiles of protocol-side distributions (`Env::observe`).
    pub observations: BTreeMap<String, Observation>,
    /// Transactions committed in each second of the run (whole seconds of
    /// completion time, from 0): failover and warm-up show here.
    pub committed_per_s: Vec<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<Json>,
    /// The workload's conditions on the final database (TPC-C's
    /// consistency conditions 1-4), read through the protocol after the
    /// run; a violation fails the run like a checker anomaly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<Audit>,
    /// What the protocol did against its own declarations (a role reading
    /// TrueTime it may not); any fails the run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
    /// Deterministic protocols: every region's copy of each shard compared
    /// at the end of the run; a divergence is also a violation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copies: Option<CopiesCheck>,
    /// Open loop: the rate the experiment asks for (clients × `rate_tps`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered_tps: Option<f64>,
    /// New transactions started per second of the run's duration (open
    /// loop: the offered rate less throttled arrivals, if the generator
    /// keeps its schedule).
    pub sent_tps: f64,
    /// CPU the system spent: simulated in `meridian sim`, the cluster's
    /// processes' own on a real cluster of local processes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuUse>,
    /// The most entries each per-transaction structure held on any one
    /// node (`Process::state_sizes`), sampled every 100 simulated ms: what
    /// must stay flat as a run grows.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub state_peaks: BTreeMap<String, u64>,
    /// How the load generator itself fared on a real cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bench: Option<BenchFacts>,
    /// The real system measured (`meridian bench`): `meridian` or `etcd`;
    /// absent for simulated runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// The end-of-run comparison of the copies of every shard: those that
/// applied the same input (e.g. the same global-log prefix) must be equal.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CopiesCheck {
    /// Replicas in the deployment.
    pub replicas: usize,
    /// Replicas with nothing in flight, whose state was compared.
    pub compared: usize,
    /// Compared replicas that found another copy with the same input
    /// (and so were checked against it).
    pub agreeing: usize,
    pub diverged: Vec<String>,
    /// Live replicas stuck after the clients stopped: still busy, or
    /// quiescent behind their shard's other copies, and without progress
    /// for 10 simulated seconds.
    pub unsettled: Vec<String>,
}

/// The load generator's own figures in `meridian bench`: an open-loop
/// generator that falls behind its schedule measures itself, not the
/// system, so a run says so.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct BenchFacts {
    /// CPU time the bench process used, as a percentage of one core over
    /// the run's wall time.
    pub cpu_pct: f64,
    /// Open loop: how late arrivals were sent after their scheduled time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_lag_ms: Option<Percentiles>,
    /// False when the generator could not keep its schedule (see
    /// [`BenchFacts::on_schedule`]).
    pub on_schedule: bool,
}

/// Lag at the 99th percentile beyond which an open-loop generator is
/// reported as behind its schedule.
pub const SCHEDULE_LAG_P99_MAX_MS: f64 = 5.0;

impl BenchFacts {
    /// The bench's figures from its driver's statistics and CPU use.
    pub fn measure(stats: &DriverStats, open_loop: bool, cpu_ns: u64, wall_s: f64) -> BenchFacts {
        let cpu_pct = round3(100.0 * cpu_ns as f64 / 1e9 / wall_s.max(1e-9));
        let schedule_lag_ms = open_loop.then(|| percentiles(&stats.schedule_lag_us));
        let on_schedule = schedule_lag_ms.as_ref().is_none_or(|l| l.p99 <= SCHEDULE_LAG_P99_MAX_MS);
        BenchFacts { cpu_pct, schedule_lag_ms, on_schedule }
    }
}

impl Report {
    pub fn to_json(&self) -> Json {
        serde_json::to_value(self).expect("a report serializes")
    }

    /// The JSON with `wall_s` and `events_per_wall_s` removed: what must be
    /// identical across runs of the same seed and configuration.
    pub fn deterministic_json(&self) -> Json {
        let mut j = self.to_json();
        if let Some(o) = j.as_object_mut() {
            o.remove("wall_s");
            o.remove("events_per_wall_s");
        }
        j
    }

    /// A counter's total (0 when the run never counted it).
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// The largest size a bounded structure reached (0 when not reported).
    pub fn state_peak(&self, name: &str) -> u64 {
        self.state_peaks.get(name).copied().unwrap_or(0)
    }

    /// The history check's verdict, failed too by a failed audit.
    pub fn check_valid(&self) -> Option<bool> {
        let history = self.check.as_ref().and_then(|c| c.get("valid")).and_then(Json::as_bool);
        match &self.audit {
            Some(a) if !a.valid => Some(false),
            _ if !self.violations.is_empty() => Some(false),
            _ => history,
        }
    }
}

/// The checker model for a protocol's promise.
pub fn model_for(c: Consistency) -> Model {
    match c {
        Consistency::StrictSerializable => Model::StrictSerializable,
        Consistency::Serializable => Model::Serializable,
        Consistency::ReadAtomic => Model::ReadAtomic,
        Consistency::ReadAtomicNoRyw => Model::ReadAtomicNoRyw,
        Consistency::Causal => Model::Causal,
        Consistency::CausalNoConvergence => Model::CausalNoConvergence,
    }
}

fn percentiles(h: &Histogram<u64>) -> Percentiles {
    let ms = |q: f64| if h.is_empty() { 0.0 } else { round3(h.value_at_quantile(q) as f64 / 1000.0) };
    Percentiles { p50: ms(0.50), p90: ms(0.90), p99: ms(0.99) }
}

/// Quantiles of a latency CDF: every 2 %, then the tail.
const CDF_QUANTILES: [f64; 5] = [0.99, 0.995, 0.999, 0.9999, 1.0];

fn cdf(h: &Histogram<u64>) -> Vec<[f64; 2]> {
    if h.is_empty() {
        return Vec::new();
    }
    let qs = (0..50).map(|i| f64::from(i) / 50.0).chain(CDF_QUANTILES);
    qs.map(|q| [round3(h.value_at_quantile(q) as f64 / 1000.0), q]).collect()
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub fn build_report<P: Protocol>(
    exp: &Experiment,
    topology: &Topology,
    stats: &DriverStats,
    history: &[HistoryOp],
    checked: bool,
    facts: RunFacts,
) -> Report {
    build_report_for(P::NAME, P::consistency_for(&exp.protocol.params), exp, topology, stats, history, checked, facts)
}

/// [`build_report`] for a system named at run time (a protocol, or a peer
/// such as etcd measured for comparison).
#[allow(clippy::too_many_arguments)]
pub fn build_report_for(
    name: &str,
    consistency: Consistency,
    exp: &Experiment,
    topology: &Topology,
    stats: &DriverStats,
    history: &[HistoryOp],
    checked: bool,
    facts: RunFacts,
) -> Report {
    let window_s = (exp.run.duration_s - exp.run.warmup_s).max(1e-9);
    let mut counters: BTreeMap<String, u64> = facts.counters.into_iter().collect();
    *counters.entry("retries".into()).or_default() += stats.retries;
    counters.insert("client_retries".into(), stats.retries);
    counters.insert("throttled".into(), stats.throttled);
    let check = checked.then(|| meridian_checker::check(history, model_for(consistency)).to_json());
    Report {
        protocol: name.to_string(),
        consistency: consistency.name().to_string(),
        seed: exp.run.seed,
        simulated_s: round3(facts.simulated_ns as f64 / 1e9),
        wall_s: round3(facts.wall_s),
        events: facts.events,
        events_per_wall_s: (facts.events as f64 / facts.wall_s.max(1e-9)).round(),
        trace_hash: format!("{:016x}", facts.trace_hash),
        config: exp.file.clone(),
        workload: exp.workload.kind.name().to_string(),
        nodes: topology.nodes.iter().map(|n| n.name.clone()).collect(),
        txns: Txns { committed: stats.committed, aborted: stats.aborted, unknown: stats.unknown },
        throughput_tps: round3(stats.committed_in_window as f64 / window_s),
        latency_ms: percentiles(&stats.latency_us),
        latency_ms_by_region: stats
            .latency_us_by_region
            .iter()
            .map(|(r, h)| (topology.region_name(*r).to_string(), percentiles(h)))
            .collect(),
        txns_by_type: stats
            .by_type
            .iter()
            .map(|(t, s)| (t.to_string(), Txns { committed: s.committed, aborted: s.aborted, unknown: s.unknown }))
            .collect(),
        latency_ms_by_type: stats
            .by_type
            .iter()
            .map(|(t, s)| {
                let by_region = s
                    .latency_us_by_region
                    .iter()
                    .map(|(r, h)| (topology.region_name(*r).to_string(), percentiles(h)))
                    .collect();
                (t.to_string(), TypeLatency { all: percentiles(&s.latency_us), by_region })
            })
            .collect(),
        latency_cdf_ms: std::iter::once(("all".to_string(), cdf(&stats.latency_us)))
            .chain(stats.by_type.iter().map(|(t, s)| (t.to_string(), cdf(&s.latency_us))))
            .collect(),
        latency_cdf_ms_by_region: stats
            .latency_us_by_region
            .iter()
            .map(|(r, h)| (topology.region_name(*r).to_string(), cdf(h)))
            .collect(),
        aborts_by_reason: stats.aborts_by_reason.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
        counters,
        observations: facts.observations.into_iter().collect(),
        up_to_date_reads_pct: (stats.reads_judged > 0)
            .then(|| round3(100.0 * stats.reads_up_to_date as f64 / stats.reads_judged as f64)),
        staleness_ms: (stats.reads_judged > 0).then(|| percentiles(&stats.staleness_us)),
        committed_per_s: stats.committed_per_s.clone(),
        check,
        audit: None,
        violations: Vec::new(),
        copies: None,
        offered_tps: exp.offered_tps(topology.clients().len()).map(round3),
        sent_tps: round3(stats.started as f64 / exp.run.duration_s.max(1e-9)),
        cpu: None,
        state_peaks: BTreeMap::new(),
        bench: None,
        target: None,
    }
}

/// The human summary printed by `meridian sim`.
pub fn summary(r: &Report) -> String {
    let mut s = String::new();
    if let Some(target) = &r.target {
        let system = if *target == r.protocol { target.clone() } else { format!("{} ({target})", r.protocol) };
        let _ = writeln!(s, "{system} on {} (seed {}): {:.1} s on a real cluster", r.config, r.seed, r.wall_s);
    } else {
        let _ = writeln!(
            s,
            "{} on {} (seed {}): {:.1} s simulated in {:.1} s wall, {} events ({:.2} M/s)",
            r.protocol,
            r.config,
            r.seed,
            r.simulated_s,
            r.wall_s,
            r.events,
            r.events_per_wall_s / 1e6
        );
    }
    let _ = writeln!(
        s,
        "txns: {} committed, {} aborted, {} unknown; throughput {:.1} txn/s after warm-up",
        r.txns.committed, r.txns.aborted, r.txns.unknown, r.throughput_tps
    );
    let total = (r.txns.committed + r.txns.aborted + r.txns.unknown).max(1) as f64;
    let _ = writeln!(
        s,
        "commit rate {:.2}%, abort rate {:.2}%",
        100.0 * r.txns.committed as f64 / total,
        100.0 * r.txns.aborted as f64 / total
    );
    load_summary(&mut s, r);
    let _ = writeln!(s, "{:<18}{:>10}{:>10}{:>10}", "latency (ms)", "p50", "p90", "p99");
    let row = |s: &mut String, name: &str, p: &Percentiles| {
        let _ = writeln!(s, "  {:<16}{:>10.1}{:>10.1}{:>10.1}", name, p.p50, p.p90, p.p99);
    };
    row(&mut s, "all", &r.latency_ms);
    for (region, p) in &r.latency_ms_by_region {
        row(&mut s, region, p);
    }
    if r.txns_by_type.len() > 1 {
        type_table(&mut s, r);
    }
    if let (Some(pct), Some(st)) = (r.up_to_date_reads_pct, &r.staleness_ms) {
        let _ = writeln!(s, "reads: {pct:.2}% up to date; stale ones lagged p50 {:.1} / p99 {:.1} ms", st.p50, st.p99);
    }
    let aborts: Vec<String> = r.aborts_by_reason.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if !aborts.is_empty() {
        let _ = writeln!(s, "aborted attempts: {}", aborts.join(" "));
    }
    let counters: Vec<String> = r.counters.iter().filter(|(_, v)| **v > 0).map(|(k, v)| format!("{k}={v}")).collect();
    if !counters.is_empty() {
        let _ = writeln!(s, "counters: {}", counters.join(" "));
    }
    if let Some(cpu) = &r.cpu {
        let roles: Vec<String> = cpu.busy_ms_by_role.iter().map(|(k, v)| format!("{k} {v:.0} ms")).collect();
        let _ = writeln!(s, "cpu: {:.1} µs per committed transaction ({})", cpu.us_per_committed_txn, roles.join(", "));
        let top: Vec<String> =
            cpu.busiest_by_role.iter().map(|(k, b)| format!("{k} {} {:.0} ms", b.node, b.busy_ms)).collect();
        let _ = writeln!(s, "busiest: {}", top.join(", "));
    }
    if let Some(c) = &r.copies {
        let verdict = match (c.diverged.is_empty(), c.unsettled.is_empty()) {
            (false, _) => "DIVERGED",
            (true, false) => "DID NOT SETTLE",
            (true, true) => "identical",
        };
        let _ = writeln!(
            s,
            "copies: {verdict} ({} of {} replicas quiescent, {} compared with a copy that applied the same input)",
            c.compared, c.replicas, c.agreeing
        );
    }
    for v in &r.violations {
        let _ = writeln!(s, "VIOLATION: {v}");
    }
    if let Some(a) = &r.audit {
        match (&a.incomplete, a.valid) {
            (Some(why), _) => {
                let _ = writeln!(s, "audit ({}): INCOMPLETE: {why}", a.kind);
            }
            (None, true) => {
                let _ = writeln!(s, "audit ({}): every condition holds", a.kind);
            }
            (None, false) => {
                let _ = writeln!(s, "audit ({}): VIOLATED", a.kind);
                for v in &a.violations {
                    let _ = writeln!(s, "  {v}");
                }
            }
        }
    }
    match &r.check {
        Some(c) => {
            let valid = c.get("valid").and_then(Json::as_bool).unwrap_or(false);
            let model = c.get("model").and_then(Json::as_str).unwrap_or("?");
            if valid {
                let _ = writeln!(s, "check ({model}): valid");
            } else {
                let counts = c.get("anomaly_counts").map(|v| v.to_string()).unwrap_or_default();
                let _ = writeln!(s, "check ({model}): INVALID {counts}");
            }
        }
        None => {
            let _ = writeln!(s, "check: not run (no history recorded)");
        }
    }
    s
}

/// Per transaction type: outcomes and latency.
fn type_table(s: &mut String, r: &Report) {
    let _ = writeln!(
        s,
        "{:<18}{:>10}{:>9}{:>9}{:>10}{:>10}{:>10}",
        "by type", "committed", "aborted", "unknown", "p50", "p90", "p99"
    );
    for (t, n) in &r.txns_by_type {
        let p = r.latency_ms_by_type.get(t).map(|l| &l.all);
        let ms = |f: fn(&Percentiles) -> f64| p.map_or(0.0, f);
        let _ = writeln!(
            s,
            "  {:<16}{:>10}{:>9}{:>9}{:>10.1}{:>10.1}{:>10.1}",
            t,
            n.committed,
            n.aborted,
            n.unknown,
            ms(|p| p.p50),
            ms(|p| p.p90),
            ms(|p| p.p99)
        );
    }
}

/// The offered and achieved load, and on a real cluster the generator's own
/// lag and CPU share, with a warning when it fell behind.
fn load_summary(s: &mut String, r: &Report) {
    let throttled = r.counters.get("throttled").copied().unwrap_or(0);
    match r.offered_tps {
        Some(offered) => {
            let _ = write!(s, "load: offered {offered:.1} txn/s, sent {:.1} txn/s, {throttled} throttled", r.sent_tps);
        }
        None => {
            let _ = write!(s, "load: closed loop, sent {:.1} txn/s", r.sent_tps);
        }
    }
    if let Some(b) = &r.bench {
        if let Some(lag) = &b.schedule_lag_ms {
            let _ = write!(s, "; sent late by p50 {:.1} / p99 {:.1} ms", lag.p50, lag.p99);
        }
        let _ = write!(s, "; bench CPU {:.0}% of a core", b.cpu_pct);
    }
    let _ = writeln!(s);
    if r.bench.as_ref().is_some_and(|b| !b.on_schedule) {
        let _ = writeln!(
            s,
            "WARNING: the load generator fell behind its schedule (p99 lag above {SCHEDULE_LAG_P99_MAX_MS} ms): \
             the latencies include its own delay; use fewer clients per bench process or a lower rate"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::topology::{ClusterSpec, Topology};

    #[test]
    fn the_busiest_node_of_each_role_is_named_with_its_cpu_time() {
        // Two shards of two replicas and one client: nodes 0-3 serve, 4 is the client.
        let topo = Topology::build(&ClusterSpec::one_region(2, 2), &[]);
        let cpu = CpuUse::of(&topo, &[1_000_000, 3_000_000, 2_000_000, 500_000, 4_000_000], 10);
        assert_eq!(cpu.busy_ms_by_role["server"], 6.5);
        assert_eq!(cpu.busiest_by_role["server"], Busiest { node: topo.nodes[1].name.clone(), busy_ms: 3.0 });
        assert_eq!(cpu.busiest_by_role["client"].busy_ms, 4.0);
        assert_eq!(cpu.us_per_committed_txn, 1050.0);
    }
}
