//! Runs one experiment in the simulator: builds the topology and the
//! simulated world from the experiment file, attaches the workload driver,
//! runs to the end of the drain, checks the history at the protocol's
//! promised level and assembles the report.
//!
//! Wall-clock time is read here only to report `wall_s`; nothing the run
//! does depends on it.

use crate::report::{CpuUse, Report, build_report};
use meridian_checker::HistoryOp;
use meridian_core::{
    ClientIo, Clients, Deployment, NodeId, Outcome, Protocol, ProtocolInfo, RequestId, Rng, Role, Topology, ms_to_ns,
    us_to_ns,
};
use meridian_experiment::{ClientMode, ConfigError, Experiment, FaultKind, PartitionTarget};
use meridian_sim::{ClockModel, FaultAction, NetConfig, ScheduledFault, Sim, SimConfig};
use meridian_workload::{Driver, DriverConfig, DriverStats, Pacing};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

/// Extra faults computed from the built topology (the swarm's random
/// profiles).
pub type FaultPlan<'a> = &'a dyn Fn(&Topology) -> Vec<ScheduledFault>;

/// How to run.
#[derive(Default)]
pub struct RunOptions<'a> {
    /// Record (and check) the history. Without it there is no `check`.
    pub record_history: bool,
    pub extra_faults: Option<FaultPlan<'a>>,
    /// Called about every simulated 100 ms with `(now_ns, end_ns)`.
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
    /// Log every event handled to this file (slow; for debugging a seed).
    pub event_log: Option<std::path::PathBuf>,
}

/// What a run produced.
pub struct RunOutput {
    pub report: Report,
    pub history: Vec<HistoryOp>,
    pub stats: DriverStats,
    pub trace_hash: u64,
}

/// Refuses a workload whose transactions the protocol cannot run.
pub fn check_shapes(exp: &Experiment, protocol: &str, shapes: meridian_core::Shapes) -> Result<(), ConfigError> {
    shapes.check(meridian_workload::shapes_needed(&exp.workload)).map_err(|why| {
        exp.error_at("workload.kind", format!("protocol `{protocol}` {why} (workload `{}`)", exp.workload.kind))
    })
}

/// Refuses a per-key CPU cost for a protocol that charges none: its keys
/// would be free where its rivals' are not.
pub fn check_per_key_cost(exp: &Experiment, protocol: &str, charges_keys: bool) -> Result<(), ConfigError> {
    let cpu = &exp.cpu;
    let set = [
        ("cpu.server_ns_per_key", cpu.server_ns_per_key),
        ("cpu.client_ns_per_key", cpu.client_ns_per_key),
        ("cpu.service_ns_per_key", cpu.service_ns_per_key),
    ];
    match set.iter().find(|(_, ns)| *ns > 0.0) {
        Some((field, _)) if !charges_keys => Err(exp.error_at(
            field,
            format!("protocol `{protocol}` does not charge per key; a per-key cost would leave its keys free"),
        )),
        _ => Ok(()),
    }
}

/// A protocol's complaint about its parameters, placed at the parameter it
/// names (`parameter `NAME` ...`) when the file has it.
fn param_error(exp: &Experiment, message: String) -> ConfigError {
    let name = message.split('`').nth(1).unwrap_or("");
    let field = format!("protocol.params.{name}");
    if !name.is_empty() && exp.line_of(&field).is_some() {
        exp.error_at(&field, message)
    } else {
        exp.error_at("protocol.params", message)
    }
}

/// Builds the topology `P` runs on (its services included).
pub fn topology_for<P: Protocol>(exp: &Experiment) -> Result<Topology, ConfigError> {
    let info = ProtocolInfo::of::<P>("", P::params());
    let topology = info.topology(&exp.protocol.params, &exp.cluster_spec()).map_err(|e| param_error(exp, e))?;
    check_shapes(exp, P::NAME, P::SHAPES)?;
    check_per_key_cost(exp, P::NAME, P::CHARGES_KEYS)?;
    exp.check_node_names(&topology)?;
    Ok(topology)
}

/// Runs an experiment file's text with `P`, its history recorded and
/// `faults` scheduled beside the file's own: how a test scripts a crash at
/// a chosen moment. Panics on a bad file (a test's own text).
pub fn run_text_with_faults<P: Protocol>(text: &str, faults: FaultPlan<'_>) -> RunOutput {
    let exp = Experiment::from_str(text, "<test>").expect("a valid experiment");
    let opts = RunOptions { record_history: true, extra_faults: Some(faults), progress: None, event_log: None };
    run_sim::<P>(&exp, opts).expect("a runnable experiment")
}

/// Runs `exp` with protocol `P` in the simulator. Protocol crates put
/// this, instantiated for their protocols, in their entry table.
pub fn run_sim<P: Protocol>(exp: &Experiment, opts: RunOptions<'_>) -> Result<RunOutput, ConfigError> {
    let topology = std::sync::Arc::new(topology_for::<P>(exp)?);
    let mut cfg = sim_config(exp, topology.clone());
    if let Some(plan) = opts.extra_faults {
        cfg.faults.extend(plan(&topology));
        cfg.faults.sort_by_key(|f| f.at_ns);
    }
    let deployment = Deployment {
        topology: topology.clone(),
        params: exp.protocol.params.clone(),
        epsilon_us: exp.clock.epsilon_us as u64,
        latency: std::sync::Arc::new(exp.matrix().clone()),
    };
    let mut sim = Sim::<P>::new(cfg, deployment).map_err(|e| param_error(exp, e))?;
    if let Some(path) = &opts.event_log {
        let file = std::fs::File::create(path)
            .map_err(|e| ConfigError::new(&path.display().to_string(), None, "", format!("cannot write: {e}")))?;
        sim.set_event_log(Box::new(std::io::BufWriter::new(file)));
    }
    let driver = Rc::new(RefCell::new(build_driver(
        exp,
        &topology,
        opts.record_history,
        P::consistency_for(&exp.protocol.params),
    )?));
    sim.set_clients(Box::new(Shared(driver.clone())));

    let wall = Instant::now();
    let (duration_ns, end_ns) = (exp.run.duration_ns(), exp.run.duration_ns() + exp.run.drain_ns());
    let mut progress = opts.progress;
    let mut t = 0;
    let mut state_peaks = std::collections::BTreeMap::new();
    while t < end_ns {
        t = (t + 100_000_000).min(end_ns);
        sim.run_until(t);
        sim.sample_state_sizes(&mut state_peaks);
        if let Some(p) = progress.as_mut() {
            p(t, end_ns);
        }
        if t >= duration_ns && driver.borrow().outstanding() == 0 {
            break; // drained early
        }
    }
    drop(sim.take_clients());
    let unsettled = settle_copies(&mut sim);
    let mut copies = compare_copies(&sim);
    if let Some(c) = copies.as_mut() {
        c.unsettled = unsettled;
    }
    let audit = audit_final_database(exp, &mut sim);
    let wall_s = wall.elapsed().as_secs_f64();
    let mut driver = Rc::try_unwrap(driver).ok().expect("the simulator released the driver").into_inner();
    driver.finish(t);
    let history = driver.take_history();
    let stats = driver.stats().clone();
    let mut report = build_report::<P>(
        exp,
        &topology,
        &stats,
        &history,
        opts.record_history,
        RunFacts {
            simulated_ns: t,
            wall_s,
            events: sim.events(),
            trace_hash: sim.trace_hash(),
            counters: sim.counters().iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            observations: sim.observations().iter().map(|(k, h)| (k.to_string(), Observation::of(h))).collect(),
        },
    );
    report.audit = audit;
    report.violations = sim.violations().to_vec();
    if let Some(c) = &copies {
        report.violations.extend(c.diverged.iter().cloned());
        report.violations.extend(c.unsettled.iter().cloned());
    }
    report.copies = copies;
    report.cpu = Some(CpuUse::of(&topology, sim.cpu_busy_ns(), stats.committed));
    report.state_peaks = state_peaks.into_iter().map(|(k, v)| (k.to_string(), v as u64)).collect();
    Ok(RunOutput { report, history, stats, trace_hash: sim.trace_hash() })
}

/// Simulated time the copies may take to catch up after the clients stop.
const SETTLE_NS_MAX: u64 = 30 * 1_000_000_000;

/// Simulated time a copy that has not settled may go without progress (no
/// transaction finished, no new input applied) before it counts as stuck.
const STALL_NS: u64 = 10 * 1_000_000_000;

/// Lets the replicas of a deterministic protocol finish the input they
/// were sent (remote regions lag by the wide-area delay) before they are
/// compared: until every live copy of each shard is quiescent at the same
/// input, or `SETTLE_NS_MAX`. Returns the copies that are stuck, one line
/// each: not settled, and without progress for `STALL_NS`. With every fault
/// healed and no client left, such a copy waits for something that will
/// not come (a lost message nobody sends again) — and copies that never
/// settle would otherwise never be compared. A copy still working through
/// a backlog when the time runs out is only left uncompared.
fn settle_copies<P: Protocol>(sim: &mut Sim<P>) -> Vec<String> {
    let deadline_ns = sim.now_ns() + SETTLE_NS_MAX;
    let mut progress = Progress::default();
    loop {
        let Some(states) = copy_states(sim) else { return Vec::new() };
        let now_ns = sim.now_ns();
        progress.observe(now_ns, &states);
        let unsettled = unsettled(&states);
        let stuck = stuck(&states, &unsettled, &progress, now_ns);
        if unsettled.is_empty() || now_ns >= deadline_ns || stuck.len() == unsettled.len() {
            return stuck;
        }
        sim.run_until(now_ns + 100_000_000);
    }
}

/// Every live replica's `CopyState`, by name; `None` for a protocol whose
/// replicas report none.
fn copy_states<P: Protocol>(sim: &Sim<P>) -> Option<Vec<(String, meridian_core::CopyState)>> {
    let topology = sim.topology();
    let mut states = Vec::new();
    for node in topology.all_replicas().filter(|n| sim.is_up(*n)) {
        let state = sim.process(node).and_then(meridian_core::Process::<P>::copy_state)?;
        states.push((topology.name(node).to_string(), state));
    }
    Some(states)
}

/// When each copy last made progress: its count of finished transactions
/// or the input it applied changed.
#[derive(Default)]
struct Progress {
    last: std::collections::BTreeMap<String, ((u64, Option<u64>), u64)>,
}

impl Progress {
    fn observe(&mut self, now_ns: u64, states: &[(String, meridian_core::CopyState)]) {
        for (name, s) in states {
            let key = (s.finished, s.settled.map(|settled| settled.applied));
            match self.last.get(name) {
                Some((seen, _)) if *seen == key => {}
                _ => {
                    self.last.insert(name.clone(), (key, now_ns));
                }
            }
        }
    }

    /// How long `name` has gone without progress.
    fn idle_ns(&self, name: &str, now_ns: u64) -> u64 {
        self.last.get(name).map_or(0, |(_, since)| now_ns.saturating_sub(*since))
    }
}

/// Of the named copies' states, those (by index) that are busy, or
/// quiescent at an input other than the one most of their shard's
/// quiescent copies applied, with what they are.
fn unsettled(states: &[(String, meridian_core::CopyState)]) -> Vec<(usize, &'static str)> {
    let mut inputs: std::collections::BTreeMap<(u32, u64), usize> = Default::default();
    for (_, s) in states {
        if let Some(settled) = s.settled {
            *inputs.entry((s.shard.0, settled.applied)).or_default() += 1;
        }
    }
    let common = |shard: u32| {
        inputs.iter().filter(|((s, _), _)| *s == shard).max_by_key(|(_, n)| **n).map(|((_, applied), _)| *applied)
    };
    let mut out = Vec::new();
    for (i, (_, s)) in states.iter().enumerate() {
        match s.settled {
            None => out.push((i, "has transactions in flight")),
            Some(settled) if common(s.shard.0) != Some(settled.applied) => {
                out.push((i, "is quiescent at other input than its shard's other copies"))
            }
            Some(_) => {}
        }
    }
    out
}

/// The unsettled copies without progress for `STALL_NS`, one line each.
fn stuck(
    states: &[(String, meridian_core::CopyState)],
    unsettled: &[(usize, &'static str)],
    progress: &Progress,
    now_ns: u64,
) -> Vec<String> {
    let mut out = Vec::new();
    for (i, what) in unsettled {
        let (name, s) = &states[*i];
        if progress.idle_ns(name, now_ns) >= STALL_NS {
            out.push(format!(
                "copies did not settle: {name} of shard {} {what}, with no progress for {} s after the clients stopped",
                s.shard.0,
                STALL_NS / 1_000_000_000
            ));
        }
    }
    out
}

/// The end-of-run comparison of copies (`Process::copy_state`): replicas
/// of one shard that applied the same input must hold the same state. Not
/// reported for protocols whose replicas report nothing.
pub fn compare_copies<P: Protocol>(sim: &Sim<P>) -> Option<crate::report::CopiesCheck> {
    let topology = sim.topology();
    let mut groups: std::collections::BTreeMap<(u32, u64), Vec<(NodeId, u64)>> = Default::default();
    let mut reporting = 0;
    for node in topology.all_replicas() {
        let Some(state) = sim.process(node).and_then(meridian_core::Process::<P>::copy_state) else { continue };
        reporting += 1;
        if let Some(s) = state.settled {
            groups.entry((state.shard.0, s.applied)).or_default().push((node, s.hash));
        }
    }
    if reporting == 0 {
        return None;
    }
    let compared: usize = groups.values().map(Vec::len).sum();
    let mut diverged = Vec::new();
    for ((shard, _), copies) in &groups {
        let (first, hash) = copies[0];
        for (node, h) in &copies[1..] {
            if *h != hash {
                diverged.push(format!(
                    "copies diverged: {} and {} of shard {shard} applied the same input and hold different states",
                    topology.name(first),
                    topology.name(*node)
                ));
            }
        }
    }
    let agreeing = groups.values().filter(|g| g.len() > 1).map(Vec::len).sum();
    Some(crate::report::CopiesCheck {
        replicas: topology.all_replicas().count(),
        compared,
        agreeing,
        diverged,
        unsettled: Vec::new(),
    })
}

/// Simulated time the final-database audit may take, at most.
const AUDIT_NS_MAX: u64 = 120 * 1_000_000_000;
/// Attempts per audit transaction (aborts and unknown outcomes retry).
const AUDIT_ATTEMPTS_MAX: u32 = 20;

/// The workload's consistency conditions on the final database, read
/// through the protocol from a live client node after the run (TPC-C's
/// conditions 1-4; other workloads have none).
fn audit_final_database<P: Protocol>(exp: &Experiment, sim: &mut Sim<P>) -> Option<crate::report::Audit> {
    if exp.workload.kind != meridian_workload::WorkloadKind::Tpcc {
        return None;
    }
    let topology = sim.topology().clone();
    let mut audit =
        meridian_workload::tpcc::Audit::new(&exp.workload, topology.shards, topology.server_regions.len() as u32);
    let Some(client) = topology.clients().iter().copied().find(|c| sim.is_up(*c)) else {
        return Some(crate::report::Audit::incomplete("no client node is up to read the final database"));
    };
    let deadline_ns = sim.now_ns() + AUDIT_NS_MAX;
    let mut next_id = 1u64 << 60;
    let mut results: Vec<Vec<meridian_core::OpResult>> = Vec::new();
    while let Some(programs) = audit.next(&results) {
        results = vec![Vec::new(); programs.len()];
        let mut open: std::collections::BTreeMap<RequestId, (usize, u32)> = Default::default();
        for (i, p) in programs.iter().enumerate() {
            sim.request(client, RequestId(next_id), p.clone());
            open.insert(RequestId(next_id), (i, 1));
            next_id += 1;
        }
        while !open.is_empty() {
            if sim.now_ns() >= deadline_ns {
                return Some(crate::report::Audit::incomplete("the final database could not be read in time"));
            }
            sim.run_until(sim.now_ns() + 100_000_000);
            for c in sim.take_completions() {
                let Some((i, attempts)) = open.remove(&c.request) else { continue };
                match c.outcome {
                    Outcome::Committed { results: r } => results[i] = r,
                    _ if attempts < AUDIT_ATTEMPTS_MAX => {
                        sim.request(client, RequestId(next_id), programs[i].clone());
                        open.insert(RequestId(next_id), (i, attempts + 1));
                        next_id += 1;
                    }
                    _ => return Some(crate::report::Audit::incomplete("an audit read kept failing")),
                }
            }
        }
    }
    Some(crate::report::Audit::of("tpcc-consistency", audit.violations().to_vec()))
}

/// A protocol-side distribution's summary (`Env::observe`), in the unit
/// its name carries.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
pub struct Observation {
    pub count: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

impl Observation {
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Observation {
        Observation {
            count: h.len(),
            mean: (h.mean() * 1000.0).round() / 1000.0,
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
        }
    }
}

/// Facts of a finished run for the report.
pub struct RunFacts {
    pub simulated_ns: u64,
    pub wall_s: f64,
    pub events: u64,
    pub trace_hash: u64,
    pub counters: Vec<(String, u64)>,
    pub observations: Vec<(String, Observation)>,
}

/// The simulated world of an experiment.
pub fn sim_config(exp: &Experiment, topology: std::sync::Arc<Topology>) -> SimConfig {
    let n = topology.nodes.len();
    let mut rng = Rng::derive(exp.run.seed, 0x636c_6f63);
    let clocks = (0..n)
        .map(|i| {
            let node = &topology.nodes[i];
            let drawn = rng.normal(0.0, exp.clock.offset_ms_stddev);
            let drift_ppm = (rng.next_f64() * 2.0 - 1.0) * exp.clock.drift_ppm;
            let region = topology.region_name(node.region);
            let offset_ms = exp
                .clock
                .offset_ms_by_node
                .get(&node.name)
                .or_else(|| exp.clock.offset_ms_by_region.get(region))
                .copied()
                .unwrap_or(drawn);
            ClockModel { offset_ns: (offset_ms * 1e6).round() as i64, drift_ppm }
        })
        .collect();
    let cpu = &exp.cpu;
    let per_role = |node: &meridian_core::topology::NodeInfo| match node.role {
        Role::Client { .. } => {
            (cpu.client_us_per_msg, cpu.client_ns_per_byte, cpu.client_ns_per_key, cpu.client_ns_per_field)
        }
        Role::Service { .. } => {
            (cpu.service_us_per_msg, cpu.service_ns_per_byte, cpu.service_ns_per_key, cpu.service_ns_per_field)
        }
        _ => (cpu.server_us_per_msg, cpu.server_ns_per_byte, cpu.server_ns_per_key, cpu.server_ns_per_field),
    };
    let cpu_ns = topology.nodes.iter().map(|node| us_to_ns(per_role(node).0)).collect();
    let cpu_ns_per_byte = topology.nodes.iter().map(|node| per_role(node).1).collect();
    let cpu_ns_per_key = topology.nodes.iter().map(|node| per_role(node).2.round() as u64).collect();
    let cpu_ns_per_field = topology.nodes.iter().map(|node| per_role(node).3).collect();
    let net_ns_per_byte = if exp.network.bandwidth_gbps > 0.0 { 8.0 / exp.network.bandwidth_gbps } else { 0.0 };
    let faults = exp
        .faults
        .iter()
        .flat_map(|f| {
            fault_actions(&topology, &f.kind).into_iter().map(|action| ScheduledFault { at_ns: f.at_ns(), action })
        })
        .collect();
    SimConfig {
        seed: exp.run.seed,
        matrix: exp.matrix().clone(),
        topology,
        net: NetConfig {
            jitter_mean_ns: ms_to_ns(exp.network.jitter_ms),
            loss: exp.network.loss,
            duplicate: exp.network.duplicate,
            reorder: exp.network.reorder,
        },
        clocks,
        epsilon_ns: us_to_ns(exp.clock.epsilon_us),
        cpu_ns,
        cpu_ns_per_byte,
        cpu_ns_per_key,
        cpu_ns_per_field,
        net_ns_per_byte,
        fsync_ns: ms_to_ns(exp.disk.fsync_ms),
        faults,
    }
}

/// Node names were checked against the topology before this is called.
fn fault_actions(topology: &Topology, kind: &FaultKind) -> Vec<FaultAction> {
    let node = |name: &str| topology.node_by_name(name).expect("fault node names are checked");
    match kind {
        FaultKind::Crash { node: n } => vec![FaultAction::Crash(node(n))],
        FaultKind::Restart { node: n } => vec![FaultAction::Restart(node(n))],
        FaultKind::Heal => vec![FaultAction::Heal],
        FaultKind::ClockJump { node: n, by_ms } => vec![FaultAction::ClockJump(node(n), (by_ms * 1e6).round() as i64)],
        FaultKind::Partition(PartitionTarget::Nodes(names)) => {
            vec![FaultAction::Partition(names.iter().map(|n| node(n)).collect())]
        }
        FaultKind::Partition(PartitionTarget::Links(links)) => {
            vec![FaultAction::CutLinks(links.iter().map(|(a, b)| (node(a), node(b))).collect())]
        }
        FaultKind::Partition(PartitionTarget::OneWay(links)) => {
            vec![FaultAction::CutOneWay(links.iter().map(|(from, to)| (node(from), node(to))).collect())]
        }
        FaultKind::Partition(PartitionTarget::Regions(regions)) => {
            let cut: Vec<NodeId> = (0..topology.nodes.len() as u32)
                .map(NodeId)
                .filter(|id| regions.iter().any(|r| r == topology.region_name(topology.region_of(*id))))
                .collect();
            vec![FaultAction::Partition(cut)]
        }
    }
}

/// The workload driver of an experiment for the clients of `topology`.
/// The workload driver of `exp` for a protocol promising `consistency`
/// (below strict serializability, reads are judged for freshness).
pub fn build_driver(
    exp: &Experiment,
    topology: &Topology,
    record_history: bool,
    consistency: meridian_core::Consistency,
) -> Result<Driver, ConfigError> {
    exp.workload.validate(topology.shards).map_err(|e| exp.error_at("workload", e))?;
    let pacing = match exp.clients.mode {
        ClientMode::Open { rate_tps, max_outstanding } => {
            Pacing::Open { rate_tps, max_outstanding: max_outstanding as usize }
        }
        ClientMode::Closed { think_ms, sessions } => Pacing::Closed { think_ns: ms_to_ns(think_ms), sessions },
    };
    let cfg = DriverConfig {
        pacing,
        max_retries: exp.clients.max_retries,
        retry_backoff_ns: ms_to_ns(exp.clients.retry_backoff_ms),
        warmup_ns: exp.run.warmup_ns(),
        end_ns: exp.run.duration_ns(),
        seed: exp.run.seed,
        record_history,
        measure_freshness: consistency != meridian_core::Consistency::StrictSerializable,
    };
    let spec = exp.workload.clone();
    // Validated above, so building a generator cannot fail.
    Ok(Driver::new(cfg, topology, |client| meridian_workload::generator(&spec, client).expect("validated workload")))
}

/// Lets the simulator own a handle to a driver the runner still reads.
struct Shared(Rc<RefCell<Driver>>);

impl Clients for Shared {
    fn start(&mut self, io: &mut dyn ClientIo) {
        self.0.borrow_mut().start(io)
    }
    fn on_wake(&mut self, client: NodeId, io: &mut dyn ClientIo) {
        self.0.borrow_mut().on_wake(client, io)
    }
    fn on_complete(&mut self, client: NodeId, request: RequestId, outcome: Outcome, io: &mut dyn ClientIo) {
        self.0.borrow_mut().on_complete(client, request, outcome, io)
    }
    fn on_node_down(&mut self, node: NodeId, io: &mut dyn ClientIo) {
        self.0.borrow_mut().on_node_down(node, io)
    }
    fn on_node_up(&mut self, node: NodeId, io: &mut dyn ClientIo) {
        self.0.borrow_mut().on_node_up(node, io)
    }
}

#[cfg(test)]
mod tests {
    use super::{Progress, STALL_NS, stuck, unsettled};
    use meridian_core::{CopyState, Settled, ShardId};

    fn copy(name: &str, shard: u32, settled: Option<(u64, u64)>, finished: u64) -> (String, CopyState) {
        let settled = settled.map(|(applied, hash)| Settled { applied, hash });
        (name.to_string(), CopyState { shard: ShardId(shard), settled, finished })
    }

    #[test]
    fn copies_quiescent_at_their_shards_common_input_have_settled() {
        let states = [copy("a", 0, Some((7, 1)), 3), copy("b", 0, Some((7, 1)), 3), copy("c", 1, Some((3, 2)), 1)];
        assert!(unsettled(&states).is_empty());
    }

    #[test]
    fn a_busy_copy_and_one_quiescent_at_other_input_have_not_settled() {
        let states = [
            copy("a", 0, Some((7, 1)), 3),
            copy("b", 0, Some((7, 1)), 3),
            copy("c", 0, Some((5, 1)), 2),
            copy("d", 1, None, 4),
            copy("e", 1, Some((3, 2)), 4),
        ];
        let found = unsettled(&states);
        assert_eq!(found.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![2, 3], "{found:?}");
        assert!(found[0].1.contains("other input") && found[1].1.contains("in flight"), "{found:?}");
    }

    #[test]
    fn an_unsettled_copy_is_stuck_only_after_it_made_no_progress_for_the_stall_time() {
        let mut progress = Progress::default();
        let busy = |finished| [copy("a", 0, Some((7, 1)), 3), copy("b", 0, None, finished)];
        progress.observe(0, &busy(10));
        // Working through a backlog: it finishes transactions.
        let later = busy(11);
        progress.observe(STALL_NS - 1, &later);
        progress.observe(STALL_NS + 5, &later);
        assert!(stuck(&later, &unsettled(&later), &progress, STALL_NS + 5).is_empty(), "it made progress lately");
        // Waiting: nothing changes for the stall time.
        let at = 2 * STALL_NS;
        progress.observe(at, &later);
        let found = stuck(&later, &unsettled(&later), &progress, at);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("b of shard 0 has transactions in flight"), "{found:?}");
        // Settled copies are never stuck, however long they were quiet.
        let settled = [copy("a", 0, Some((7, 1)), 3), copy("b", 0, Some((7, 1)), 12)];
        progress.observe(3 * STALL_NS, &settled);
        assert!(stuck(&settled, &unsettled(&settled), &progress, 5 * STALL_NS).is_empty());
    }
}
