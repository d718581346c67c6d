//! Tiga's claims under the simulator, each scripted: the fast path's one
//! round trip (§3.1, §3.4), consistent ordering of conflicting transactions
//! that arrive in different orders (Figures 1-2), and the second round of
//! timestamp agreement ruling out timestamp inversion (§3.6, Figure 5).

use meridian_checker::{AnomalyKind, HistoryOp, Model, OpType, check};
use meridian_core::{
    ClusterSpec, Deployment, Key, LatencyMatrix, LeaderPlacement, NodeId, Op, Outcome, ParamValue, Params, Program,
    RegionId, RequestId, Topology,
};
use meridian_protocols::tiga::{Msg, Tiga};
use meridian_sim::{ClockModel, Completion, FaultAction, Sim, SimConfig, Verdict};
use meridian_workload::{completion_mops, invoke_mops};
use std::collections::BTreeMap;
use std::sync::Arc;

const MS: u64 = 1_000_000;

struct Setup {
    shards: u32,
    leaders: LeaderPlacement,
    params: Params,
    offsets_ms: Vec<(&'static str, i64)>,
}

fn sim(seed: u64, setup: Setup) -> Sim<Tiga> {
    let matrix = LatencyMatrix::preset("tiga-gcp").unwrap();
    let spec = ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
        shards: setup.shards,
        replicas_per_shard: 3,
        leaders: setup.leaders,
        client_regions: vec![RegionId(0), RegionId(1), RegionId(2), RegionId(3)],
        clients_per_region: 1,
    };
    let topology = Arc::new(Topology::build(&spec, &[]));
    let mut cfg = SimConfig::ideal(seed, topology.clone(), matrix);
    for (name, ms) in setup.offsets_ms {
        let node = topology.node_by_name(name).expect("node name");
        cfg.clocks[node.index()] = ClockModel { offset_ns: ms * MS as i64, drift_ppm: 0.0 };
    }
    Sim::new(cfg, Deployment { topology, params: setup.params, epsilon_us: 100 }).unwrap()
}

fn node(s: &Sim<Tiga>, name: &str) -> NodeId {
    s.topology().node_by_name(name).unwrap()
}

fn inc(keys: &[u64], tag: u64) -> Program {
    Program::new(
        keys.iter().enumerate().map(|(i, k)| Op::Increment { key: Key(*k), delta: 1, tag: tag + i as u64 }).collect(),
    )
}

/// Records a scripted run as a history the checker can read.
#[derive(Default)]
struct Recorder {
    ops: Vec<HistoryOp>,
    programs: BTreeMap<(NodeId, u64), (Program, u64)>,
    next_process: u64,
}

impl Recorder {
    fn submit(&mut self, s: &mut Sim<Tiga>, client: NodeId, request: u64, program: Program) {
        let process = self.next_process;
        self.next_process += 1;
        self.ops.push(HistoryOp {
            index: self.ops.len() as u64,
            kind: OpType::Invoke,
            process,
            time_ns: s.now_ns(),
            value: invoke_mops(&program),
        });
        self.programs.insert((client, request), (program.clone(), process));
        s.request(client, RequestId(request), program);
    }

    fn complete(&mut self, done: &[Completion]) {
        for c in done {
            let (program, process) = self.programs[&(c.node, c.request.0)].clone();
            let Outcome::Committed { results } = &c.outcome else { panic!("tiga never aborts: {c:?}") };
            self.ops.push(HistoryOp {
                index: self.ops.len() as u64,
                kind: OpType::Ok,
                process,
                time_ns: c.at_ns,
                value: completion_mops(&program, results),
            });
        }
    }
}

fn run_for(s: &mut Sim<Tiga>, rec: &mut Recorder, ms: u64) -> Vec<Completion> {
    s.run_until(s.now_ns() + ms * MS);
    let done = s.take_completions();
    rec.complete(&done);
    done
}

#[test]
fn the_fast_path_commits_in_one_round_trip_to_the_farthest_super_quorum_member_plus_delta() {
    // Colocated leaders in South Carolina; 3 replicas, so the super quorum
    // is every replica; Δ = 10 ms (the default).
    let expected_ms = [("south-carolina", 117.0 + 10.0), ("finland", 231.0), ("brazil", 231.0), ("hong-kong", 319.0)];
    let mut s =
        sim(1, Setup { shards: 3, leaders: LeaderPlacement::Colocated, params: Params::new(), offsets_ms: vec![] });
    s.run_until(2_000 * MS); // a few probes establish the delay estimates
    for (i, (region, want)) in expected_ms.iter().enumerate() {
        let c = node(&s, &format!("client-{region}-0"));
        let start = s.now_ns();
        s.request(c, RequestId(i as u64), inc(&[3 * i as u64, 3 * i as u64 + 1, 3 * i as u64 + 2], 100 * i as u64));
        s.run_until(start + 2_000 * MS);
        let done = s.take_completions();
        assert_eq!(done.len(), 1, "{region}");
        let got = (done[0].at_ns - start) as f64 / MS as f64;
        assert!((got - want).abs() / want < 0.05, "{region}: {got:.1} ms vs analytical {want} ms");
    }
    assert_eq!(s.counters().get("fast_path").copied(), Some(4), "every commit on the fast path: {:?}", s.counters());
    assert_eq!(s.counters().get("slow_path"), None);
}

#[test]
fn conflicting_transactions_arriving_in_different_orders_commit_on_the_fast_path() {
    // Figures 1-2: T1 from Finland and T2 from Brazil both touch x (shard 0)
    // and y (shard 1); the Finland replicas see T1 first, the Brazil ones
    // T2 first. The future timestamps make every server order them alike.
    let mut s =
        sim(2, Setup { shards: 2, leaders: LeaderPlacement::Colocated, params: Params::new(), offsets_ms: vec![] });
    s.run_until(2_000 * MS);
    let mut rec = Recorder::default();
    let (fi, br) = (node(&s, "client-finland-0"), node(&s, "client-brazil-0"));
    rec.submit(&mut s, fi, 1, inc(&[0, 1], 10));
    rec.submit(&mut s, br, 2, inc(&[0, 1], 20));
    let done = run_for(&mut s, &mut rec, 3_000);
    assert_eq!(done.len(), 2);
    assert_eq!(s.counters().get("fast_path").copied(), Some(2), "{:?}", s.counters());
    assert_eq!(s.counters().get("rollbacks"), None);
    assert!(check(&rec.ops, Model::StrictSerializable).valid);
}

/// Figure 5's schedule, with badly synchronized clocks. Shard 0's servers
/// (leader L1 and its followers) run 5 s ahead; T1's coordinator in Finland
/// jumps 2 s back after its delay estimates were taken, so T1's timestamp is
/// too small: L2 (shard 1's leader) executes T1 at it, while L1, which has
/// already released Ta with a larger timestamp, moves T1 to its own clock.
/// L1's announcement to L2 is slow. T2 (shard 0) queues behind T1 at L1 and
/// commits after it; T3 (shard 1) is submitted after T2 completed, with a
/// timestamp below T1's agreed one. Without the second round L1 releases T1
/// on L2's (smaller) announcement, T2 commits, and L2 — learning T1's
/// agreed timestamp only later — orders T3 before T1: T3 → T1 → T2, against
/// real time T2 → T3.
fn figure_5(second_round: bool) -> (Vec<HistoryOp>, Vec<Completion>) {
    let params =
        Params::new().with("preventive", ParamValue::Bool(false)).with("second_round", ParamValue::Bool(second_round));
    let offsets_ms = vec![("shard0-replica0", 5_000), ("shard0-replica1", 5_000), ("shard0-replica2", 5_000)];
    let mut s = sim(3, Setup { shards: 2, leaders: LeaderPlacement::Colocated, params, offsets_ms });
    let (l1, l2) = (node(&s, "shard0-replica0"), node(&s, "shard1-replica0"));
    let (sc, fi) = (node(&s, "client-south-carolina-0"), node(&s, "client-finland-0"));
    s.set_interceptor(Box::new(move |_, from, to, msg: &Msg| match msg {
        Msg::TsNotify { .. } if from == l1 && to == l2 => Verdict::Delay(20_000 * MS),
        _ => Verdict::Deliver,
    }));
    s.schedule(2_600 * MS, FaultAction::ClockJump(fi, -2_000 * MS as i64));
    s.run_until(2_000 * MS);
    if let Ok(p) = std::env::var("TIGA_EVENT_LOG") {
        s.set_event_log(Box::new(std::fs::File::create(p).unwrap()));
    }
    let mut rec = Recorder::default();
    let (x, y) = (0, 1); // on shard 0 and shard 1
    rec.submit(&mut s, sc, 1, inc(&[x], 10)); // Ta: released at L1 with a large timestamp
    let mut all = run_for(&mut s, &mut rec, 1_000);
    rec.submit(&mut s, fi, 2, inc(&[x, y], 20)); // T1
    all.extend(run_for(&mut s, &mut rec, 300));
    rec.submit(&mut s, sc, 3, inc(&[x], 30)); // T2
    while !all.iter().any(|c: &Completion| c.request.0 == 3) {
        all.extend(run_for(&mut s, &mut rec, 10));
        assert!(s.now_ns() < 60_000 * MS, "T2 never completed");
    }
    rec.submit(&mut s, sc, 4, inc(&[y], 40)); // T3, after T2 completed
    all.extend(run_for(&mut s, &mut rec, 40_000));
    (rec.ops, all)
}

#[test]
fn without_the_second_round_figure_5_inverts_timestamps_and_the_checker_catches_it() {
    let (history, done) = figure_5(false);
    assert_eq!(done.len(), 4, "every transaction commits");
    let report = check(&history, Model::StrictSerializable);
    assert!(!report.valid, "the inversion must be caught: {}", report.summary());
    assert!(report.has(AnomalyKind::RealTime), "{}", report.summary());
    assert!(check(&history, Model::Serializable).valid, "it is serializable, only not strictly");
}

#[test]
fn the_second_round_of_timestamp_agreement_prevents_timestamp_inversion() {
    let (history, done) = figure_5(true);
    assert_eq!(done.len(), 4, "every transaction commits");
    let report = check(&history, Model::StrictSerializable);
    assert!(report.valid, "{}", report.summary());
}
