//! Swarm testing (TigerBeetle's VOPR style): many short simulated runs, each
//! with a fault profile drawn from its seed — crashes and restarts,
//! partitions and heals, loss, duplication, reordering, jitter, clock
//! offsets, drift and jumps. At `heal_s` every fault is healed; the run must
//! then make progress again, and every history must pass the checker at the
//! protocol's promised level. The run is stretched if needed so that it
//! has `SETTLE_S` seconds to recover and `PROGRESS_WINDOW_S` more in which
//! commits are required.

use crate::runner::{RunOptions, run_experiment};
use meridian_checker::to_jsonl;
use meridian_core::{NodeId, Rng, Topology, ms_to_ns};
use meridian_experiment::{ConfigError, Experiment};
use meridian_sim::{FaultAction, ScheduledFault};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The base experiment when `--config` is not given.
pub const BASE: &str = include_str!("swarm.toml");

/// When faults start and stop, as fractions of the base run's duration.
const FAULTS_FROM: f64 = 0.07;
const HEAL_AT: f64 = 0.5;
/// After healing: seconds allowed to recover (elections, in-doubt
/// resolution, timeouts), then seconds in which commits are required.
const SETTLE_S: f64 = 5.0;
const PROGRESS_WINDOW_S: f64 = 10.0;

/// `meridian swarm`'s options, as the command line gives them.
#[derive(Clone, Debug, clap::Args)]
pub struct SwarmOptions {
    #[arg(long)]
    pub protocol: String,
    #[arg(long)]
    pub seeds: u64,
    #[arg(long, default_value_t = 0)]
    pub start: u64,
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Worker threads (by default the machine's cores).
    #[arg(long, default_value_t = default_threads())]
    pub threads: usize,
    /// Write the history of each failing seed into this directory.
    #[arg(long)]
    pub history_dir: Option<PathBuf>,
    /// Log every simulated event of each seed into this directory (slow).
    #[arg(long)]
    pub event_log_dir: Option<PathBuf>,
    /// Also cut single links between servers (a leader that reaches
    /// everyone but some of its followers), from the seed's own stream:
    /// connectivity that partitions of node sets cannot make.
    #[arg(long)]
    pub link_cuts: bool,
    /// Also cut links in one direction only (a node that hears a peer but
    /// is not heard by it), from the seed's own stream.
    #[arg(long)]
    pub one_way_cuts: bool,
}

/// The machine's cores, the default number of swarm threads.
fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The verdict on one seed.
#[derive(Clone, Debug)]
pub struct SeedResult {
    pub seed: u64,
    pub failure: Option<String>,
    pub committed: u64,
    pub faults: usize,
}

/// Loads the base experiment (checked once, before any seed runs).
pub fn base_experiment(opts: &SwarmOptions) -> Result<Experiment, ConfigError> {
    let mut exp = match &opts.config {
        Some(path) => Experiment::load(path)?,
        None => Experiment::from_str(BASE, "<swarm base>")?,
    };
    exp.set_protocol(&opts.protocol);
    if opts.config.is_none() {
        // The built-in deployment's workload, or the one the protocol runs.
        if let Some(info) = crate::registry::find(&opts.protocol) {
            exp.workload = contended_like(meridian_workload::workload_for(info.shapes, &exp.workload), &exp);
        }
    }
    // Fail fast, once, on a workload the protocol cannot run (every seed
    // would fail alike).
    if let Some(info) = crate::registry::find(&opts.protocol).filter(|i| i.implemented) {
        crate::runner::check_shapes(&exp, info.name, info.shapes)?;
    }
    Ok(exp)
}

/// A protocol that runs only read-only and write-only transactions gets
/// RAMP's YCSB on the base file's few keys (its `keys_per_shard` on every
/// shard, transactions of `ops_per_txn` keys, half of them writes), so its
/// histories are as rich in conflicts as the base workload's.
fn contended_like(mut spec: meridian_workload::WorkloadSpec, base: &Experiment) -> meridian_workload::WorkloadSpec {
    if spec.kind != base.workload.kind && spec.kind == meridian_workload::WorkloadKind::RampYcsb {
        let shards = u64::from(base.cluster.shards);
        spec.keys = base.workload.keys_per_shard.map(|k| k * shards);
        spec.txn_size = base.workload.ops_per_txn;
        spec.read_txn_pct = Some(50.0);
    }
    spec
}

/// Runs every seed; results in seed order.
pub fn run_swarm(base: &Experiment, opts: &SwarmOptions, on_done: &(dyn Fn(&SeedResult) + Sync)) -> Vec<SeedResult> {
    let next = AtomicU64::new(opts.start);
    let end = opts.start + opts.seeds;
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..opts.threads.max(1) {
            scope.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= end {
                        break;
                    }
                    let result = run_seed(base, opts, seed);
                    on_done(&result);
                    results.lock().expect("no panics while holding the lock").push(result);
                }
            });
        }
    });
    let mut results = results.into_inner().expect("threads joined");
    results.sort_by_key(|r| r.seed);
    results
}

/// The command that reruns one seed.
pub fn reproduce_command(opts: &SwarmOptions, seed: u64) -> String {
    let mut cmd = format!("meridian swarm --protocol {} --seeds 1 --start {seed}", opts.protocol);
    if let Some(c) = &opts.config {
        cmd.push_str(&format!(" --config {}", c.display()));
    }
    if opts.link_cuts {
        cmd.push_str(" --link-cuts");
    }
    if opts.one_way_cuts {
        cmd.push_str(" --one-way-cuts");
    }
    cmd
}

fn run_seed(base: &Experiment, opts: &SwarmOptions, seed: u64) -> SeedResult {
    let mut exp = base.clone();
    let mut rng = Rng::derive(seed, 0x0073_7761_726d);
    randomize_world(&mut exp, &mut rng, seed);
    let fault_window_s = exp.run.duration_s;
    let heal_s = fault_window_s * HEAL_AT;
    // Whatever the base file says, the run lasts long enough to settle and
    // then show progress.
    exp.run.duration_s = exp.run.duration_s.max(heal_s + SETTLE_S + PROGRESS_WINDOW_S);
    exp.run.warmup_s = exp.run.warmup_s.min(exp.run.duration_s / 10.0);
    let duration_s = exp.run.duration_s;
    let plan_rng = Mutex::new(rng);
    let fault_count = Mutex::new(0usize);
    let plan = |t: &Topology| {
        let mut faults = fault_profile(t, &mut plan_rng.lock().expect("single use"), fault_window_s);
        // Each kind of link cut draws from its own stream: the seed's
        // other faults stay what they are without the flag.
        if opts.link_cuts {
            faults.extend(link_cuts(t, &mut Rng::derive(seed, LINK_CUTS_STREAM), fault_window_s, Cut::BothWays));
        }
        if opts.one_way_cuts {
            faults.extend(link_cuts(t, &mut Rng::derive(seed, ONE_WAY_CUTS_STREAM), fault_window_s, Cut::OneWay));
        }
        faults.sort_by_key(|f| f.at_ns);
        *fault_count.lock().expect("single use") = faults.len();
        faults
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let event_log = opts.event_log_dir.as_ref().map(|d| {
            let _ = std::fs::create_dir_all(d);
            d.join(format!("seed-{seed}.events"))
        });
        run_experiment(&exp, RunOptions { record_history: true, extra_faults: Some(&plan), progress: None, event_log })
    }));
    let faults = *fault_count.lock().expect("run finished");
    let out = match outcome {
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            return SeedResult { seed, failure: Some(format!("panicked: {msg}")), committed: 0, faults };
        }
        Ok(Err(e)) => return SeedResult { seed, failure: Some(e.to_string()), committed: 0, faults },
        Ok(Ok(out)) => out,
    };
    let progress_from = (heal_s + SETTLE_S).ceil() as usize;
    let late: u64 =
        out.stats.committed_per_s.iter().skip(progress_from).take(duration_s as usize - progress_from).sum();
    let mut failure = None;
    if let Some(v) = out.report.violations.first() {
        failure = Some(format!("the protocol broke its own declaration: {v}"));
    } else if let Some(audit) = out.report.audit.as_ref().filter(|a| !a.valid) {
        let why = audit.incomplete.clone().unwrap_or_else(|| audit.violations.join("; "));
        failure = Some(format!("final-database audit ({}) failed: {why}", audit.kind));
    } else if out.report.check_valid() != Some(true) {
        let counts = out.report.check.as_ref().and_then(|c| c.get("anomaly_counts")).map(|c| c.to_string());
        failure = Some(format!("history is not {}: {}", out.report.consistency, counts.unwrap_or_default()));
    } else if late == 0 {
        failure = Some(format!("no commits after healing (from {progress_from} s to the end)"));
    }
    if failure.is_some() {
        if let Some(dir) = &opts.history_dir {
            let _ = std::fs::create_dir_all(dir);
            let _ = std::fs::write(dir.join(format!("seed-{seed}.jsonl")), to_jsonl(&out.history));
        }
    }
    SeedResult { seed, failure, committed: out.report.txns.committed, faults }
}

/// Clocks and network behaviour for the whole run.
fn randomize_world(exp: &mut Experiment, rng: &mut Rng, seed: u64) {
    exp.set_seed(seed);
    exp.clock.offset_ms_stddev = [0.0, 1.0, 10.0, 50.0][rng.below(4) as usize];
    exp.clock.drift_ppm = rng.next_f64() * 200.0;
    exp.network.jitter_ms = rng.next_f64() * 20.0;
    exp.network.reorder = rng.chance(0.5);
}

/// The random streams of `--link-cuts` and `--one-way-cuts`, apart from
/// the seed's other draws.
const LINK_CUTS_STREAM: u64 = 0x6c69_6e6b;
const ONE_WAY_CUTS_STREAM: u64 = 0x6f6e_6577;

/// Which directions a window of link cuts drops.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Cut {
    BothWays,
    /// From the first node of each pair to the second, or (half the
    /// windows) the other way round: a replica not heard by some of its
    /// shard, or one that does not hear them.
    OneWay,
}

/// One to three windows of single-link cuts within the fault window, each
/// for 0.2-3.2 s and then restored (other cuts stay): half of them a
/// replica's links to some of its shard's other replicas (a leader that
/// still reaches everyone else), some a shard split in two groups, the rest
/// one link between any two servers or services.
fn link_cuts(t: &Topology, rng: &mut Rng, duration_s: f64, cut: Cut) -> Vec<ScheduledFault> {
    let from_ns = ms_to_ns(duration_s * FAULTS_FROM * 1000.0);
    let heal_ns = ms_to_ns(duration_s * HEAL_AT * 1000.0);
    let servers: Vec<NodeId> = (0..t.nodes.len() as u32).map(NodeId).filter(|n| !t.is_client(*n)).collect();
    let mut faults = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let mut links = draw_links(t, &servers, rng);
        assert!(!links.is_empty(), "a link-cut window cuts something");
        let start = from_ns + rng.below(heal_ns - from_ns);
        let end = start + ms_to_ns(200.0 + rng.next_f64() * 3000.0);
        let (cut_action, restore_action) = match cut {
            Cut::BothWays => (FaultAction::CutLinks(links.clone()), FaultAction::RestoreLinks(links)),
            Cut::OneWay => {
                if rng.chance(0.5) {
                    links = links.into_iter().map(|(a, b)| (b, a)).collect();
                }
                (FaultAction::CutOneWay(links.clone()), FaultAction::RestoreOneWay(links))
            }
        };
        faults.push(ScheduledFault { at_ns: start, action: cut_action });
        faults.push(ScheduledFault { at_ns: end.min(heal_ns), action: restore_action });
    }
    faults
}

/// The links one window cuts (see [`link_cuts`]); never empty.
fn draw_links(t: &Topology, servers: &[NodeId], rng: &mut Rng) -> Vec<(NodeId, NodeId)> {
    let shard = meridian_core::ShardId(rng.below(u64::from(t.shards)) as u32);
    let replicas = t.replicas(shard);
    let n = replicas.len() as u64;
    let roll = rng.next_f64();
    if roll < 0.5 && n > 1 {
        // One replica and a nonempty subset of its shard's others.
        let me = replicas[rng.below(n) as usize];
        let peers: Vec<NodeId> = replicas.iter().copied().filter(|p| *p != me).collect();
        let mut cut: Vec<(NodeId, NodeId)> = peers.iter().filter(|_| rng.chance(0.7)).map(|p| (me, *p)).collect();
        if cut.is_empty() {
            cut.push((me, peers[rng.below(peers.len() as u64) as usize]));
        }
        cut
    } else if roll < 0.8 && n > 1 {
        // The shard split in two nonempty groups.
        let mut side: Vec<bool> = replicas.iter().map(|_| rng.chance(0.5)).collect();
        let first = rng.below(n) as usize;
        side[first] = true;
        let other = (first + 1 + rng.below(n - 1) as usize) % n as usize;
        side[other] = false;
        let group = |inside: bool| replicas.iter().zip(&side).filter(move |(_, s)| **s == inside).map(|(r, _)| *r);
        group(true).flat_map(|a| group(false).map(move |b| (a, b))).collect()
    } else {
        // Any two distinct servers or services.
        let a = rng.below(servers.len() as u64) as usize;
        let b = (a + 1 + rng.below(servers.len() as u64 - 1) as usize) % servers.len();
        vec![(servers[a], servers[b])]
    }
}

/// Faults between `FAULTS_FROM` and `HEAL_AT` of the fault window, then
/// heal all.
fn fault_profile(t: &Topology, rng: &mut Rng, duration_s: f64) -> Vec<ScheduledFault> {
    let from_ns = ms_to_ns(duration_s * FAULTS_FROM * 1000.0);
    let heal_ns = ms_to_ns(duration_s * HEAL_AT * 1000.0);
    let at = |rng: &mut Rng| from_ns + rng.below(heal_ns - from_ns);
    let mut faults = vec![
        ScheduledFault { at_ns: from_ns, action: FaultAction::SetLoss(rng.next_f64() * 0.1) },
        ScheduledFault { at_ns: from_ns, action: FaultAction::SetDuplicate(rng.next_f64() * 0.1) },
    ];
    let servers: Vec<NodeId> = (0..t.nodes.len() as u32).map(NodeId).filter(|n| !t.is_client(*n)).collect();
    let everyone: Vec<NodeId> = (0..t.nodes.len() as u32).map(NodeId).collect();
    for _ in 0..rng.below(4) {
        // Mostly servers; now and then a client (its coordinator state dies).
        let pool = if rng.chance(0.8) { &servers } else { &everyone };
        let victim = pool[rng.below(pool.len() as u64) as usize];
        let crash_at = at(rng);
        faults.push(ScheduledFault { at_ns: crash_at, action: FaultAction::Crash(victim) });
        let restart_at = crash_at + ms_to_ns(200.0 + rng.next_f64() * 3000.0);
        faults.push(ScheduledFault { at_ns: restart_at.min(heal_ns), action: FaultAction::Restart(victim) });
    }
    for _ in 0..rng.below(3) {
        let cut: Vec<NodeId> = if rng.chance(0.5) {
            let region = t.server_regions[rng.below(t.server_regions.len() as u64) as usize];
            everyone.iter().copied().filter(|n| t.region_of(*n) == region).collect()
        } else {
            servers.iter().copied().filter(|_| rng.chance(0.3)).collect()
        };
        let start = at(rng);
        faults.push(ScheduledFault { at_ns: start, action: FaultAction::Partition(cut) });
        let end = start + ms_to_ns(200.0 + rng.next_f64() * 3000.0);
        faults.push(ScheduledFault { at_ns: end.min(heal_ns), action: FaultAction::Heal });
    }
    for _ in 0..rng.below(3) {
        let node = everyone[rng.below(everyone.len() as u64) as usize];
        let by_ms = (10.0 + rng.next_f64() * 490.0) * if rng.chance(0.5) { 1.0 } else { -1.0 };
        faults.push(ScheduledFault { at_ns: at(rng), action: FaultAction::ClockJump(node, (by_ms * 1e6) as i64) });
    }
    faults.push(ScheduledFault { at_ns: heal_ns, action: FaultAction::HealAll });
    faults.sort_by_key(|f| f.at_ns);
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology() -> Topology {
        let exp = Experiment::from_str(BASE, "<swarm base>").expect("the base file");
        Topology::build(&exp.cluster_spec(), &[meridian_core::ServiceSpec::round_robin("viewmgr", 3)])
    }

    #[test]
    fn link_cuts_cut_server_links_within_the_fault_window_and_each_window_restores_its_own() {
        let t = topology();
        let (from_ns, heal_ns) = (ms_to_ns(20.0 * FAULTS_FROM * 1000.0), ms_to_ns(20.0 * HEAL_AT * 1000.0));
        let mut within_a_shard = 0;
        for seed in 0..200 {
            let faults = link_cuts(&t, &mut Rng::derive(seed, LINK_CUTS_STREAM), 20.0, Cut::BothWays);
            assert!((2..=6).contains(&faults.len()), "one to three windows");
            for pair in faults.chunks(2) {
                let (FaultAction::CutLinks(links), FaultAction::RestoreLinks(restored)) =
                    (&pair[0].action, &pair[1].action)
                else {
                    panic!("a cut then its restoration: {pair:?}");
                };
                assert_eq!(links, restored, "a window restores what it cut");
                assert!(!links.is_empty());
                assert!(from_ns <= pair[0].at_ns && pair[0].at_ns < pair[1].at_ns && pair[1].at_ns <= heal_ns);
                for (a, b) in links {
                    assert!(a != b && !t.is_client(*a) && !t.is_client(*b), "{a:?}-{b:?}");
                    let shard = |n: &NodeId| t.replica_of(*n).map(|(s, _)| s);
                    within_a_shard += usize::from(shard(a).is_some() && shard(a) == shard(b));
                }
            }
            let again = link_cuts(&t, &mut Rng::derive(seed, LINK_CUTS_STREAM), 20.0, Cut::BothWays);
            assert_eq!(format!("{faults:?}"), format!("{again:?}"), "the seed decides");
        }
        assert!(within_a_shard > 200, "mostly a replica's links to its shard: {within_a_shard}");
    }

    #[test]
    fn one_way_cuts_drop_one_direction_of_the_links_a_two_way_window_would_cut() {
        let t = topology();
        let (mut not_heard, mut not_hearing) = (0, 0);
        for seed in 0..200 {
            let both = link_cuts(&t, &mut Rng::derive(seed, LINK_CUTS_STREAM), 20.0, Cut::BothWays);
            let one = link_cuts(&t, &mut Rng::derive(seed, LINK_CUTS_STREAM), 20.0, Cut::OneWay);
            let again = link_cuts(&t, &mut Rng::derive(seed, LINK_CUTS_STREAM), 20.0, Cut::OneWay);
            assert_eq!(format!("{one:?}"), format!("{again:?}"), "the seed decides");
            assert_eq!(both[0].at_ns, one[0].at_ns, "the first window is drawn alike");
            for pair in one.chunks(2) {
                let (FaultAction::CutOneWay(links), FaultAction::RestoreOneWay(restored)) =
                    (&pair[0].action, &pair[1].action)
                else {
                    panic!("a one-way cut then its restoration: {pair:?}");
                };
                assert_eq!(links, restored, "a window restores what it cut");
                assert!(pair[0].at_ns < pair[1].at_ns);
                for (from, to) in links {
                    assert!(from != to && !t.is_client(*from) && !t.is_client(*to), "{from:?}->{to:?}");
                }
            }
            // The first window, against the same window cut both ways: the
            // same links, each dropped in one direction.
            let (FaultAction::CutLinks(two_way), FaultAction::CutOneWay(one_way)) = (&both[0].action, &one[0].action)
            else {
                panic!("cuts first");
            };
            if one_way == two_way {
                not_heard += 1;
            } else {
                let flipped: Vec<_> = two_way.iter().map(|(a, b)| (*b, *a)).collect();
                assert_eq!(one_way, &flipped, "the other direction of the same links");
                not_hearing += 1;
            }
        }
        assert!(not_heard > 50 && not_hearing > 50, "both directions: {not_heard} and {not_hearing}");
    }

    #[test]
    fn the_command_that_reruns_a_seed_keeps_its_link_cuts_of_either_kind() {
        let mut opts = SwarmOptions {
            protocol: "tiga".into(),
            seeds: 10,
            start: 0,
            config: None,
            threads: 1,
            history_dir: None,
            event_log_dir: None,
            link_cuts: false,
            one_way_cuts: false,
        };
        assert_eq!(reproduce_command(&opts, 7), "meridian swarm --protocol tiga --seeds 1 --start 7");
        opts.link_cuts = true;
        assert_eq!(reproduce_command(&opts, 7), "meridian swarm --protocol tiga --seeds 1 --start 7 --link-cuts");
        opts.one_way_cuts = true;
        assert_eq!(
            reproduce_command(&opts, 7),
            "meridian swarm --protocol tiga --seeds 1 --start 7 --link-cuts --one-way-cuts"
        );
    }
}
