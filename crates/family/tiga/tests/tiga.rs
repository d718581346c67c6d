//! Tiga's claims under the simulator, each scripted: the fast path's one
//! round trip (§3.1, §3.4), consistent ordering of conflicting transactions
//! that arrive in different orders (Figures 1-2), the second round of
//! timestamp agreement ruling out timestamp inversion (§3.6, Figure 5), and
//! the super quorum letting a new leader recover the committed order (§3.4).

use meridian_checker::{AnomalyKind, HistoryOp, Model, Mop, OpType, ReadValue, check};
use meridian_core::{
    ClusterSpec, Deployment, Key, LatencyMatrix, LeaderPlacement, NodeId, Op, Outcome, ParamValue, Params, Program,
    RegionId, RequestId, Topology,
};
use meridian_core::{Protocol, ShardId};
use meridian_sim::{ClockModel, Completion, FaultAction, Sim, SimConfig, Verdict};
use meridian_tiga::tiga::messages::{LogSync, Submit, TsNotify, TsVerify};
use meridian_tiga::tiga::{Msg, Node, Tiga};
use meridian_workload::{completion_mops, invoke_mops};
use std::collections::BTreeMap;
use std::sync::Arc;

const MS: u64 = 1_000_000;

struct Setup {
    shards: u32,
    replicas: u32,
    /// Deploy the view manager (needed for leader failures).
    view_manager: bool,
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
        replicas_per_shard: setup.replicas,
        leaders: setup.leaders,
        client_regions: vec![RegionId(0), RegionId(1), RegionId(2), RegionId(3)],
        clients_per_region: 1,
    };
    let services = if setup.view_manager { Tiga::services(&setup.params) } else { Vec::new() };
    let topology = Arc::new(Topology::build(&spec, &services));
    let latency = Arc::new(matrix.clone());
    let mut cfg = SimConfig::ideal(seed, topology.clone(), matrix);
    for (name, ms) in setup.offsets_ms {
        let node = topology.node_by_name(name).expect("node name");
        cfg.clocks[node.index()] = ClockModel { offset_ns: ms * MS as i64, drift_ppm: 0.0 };
    }
    Sim::new(cfg, Deployment { topology, params: setup.params, epsilon_us: 100, latency }).unwrap()
}

fn node(s: &Sim<Tiga>, name: &str) -> NodeId {
    s.topology().node_by_name(name).unwrap()
}

fn inc(keys: &[u64], tag: u64) -> Program {
    Program::new(
        keys.iter().enumerate().map(|(i, k)| Op::Increment { key: Key(*k), delta: 1, tag: tag + i as u64 }).collect(),
    )
}

/// Records a scripted run's invocations and completions as a history the
/// checker can read.
#[derive(Default)]
struct HistoryLog {
    ops: Vec<HistoryOp>,
    programs: BTreeMap<(NodeId, u64), (Program, u64)>,
    next_process: u64,
}

impl HistoryLog {
    fn submit(&mut self, s: &mut Sim<Tiga>, client: NodeId, request: u64, program: Program) {
        let process = self.next_process;
        self.next_process += 1;
        self.ops.push(HistoryOp {
            index: self.ops.len() as u64,
            kind: OpType::Invoke,
            process,
            time_ns: s.now_ns(),
            value: invoke_mops(&program),
            meta: Default::default(),
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
                meta: Default::default(),
            });
        }
    }
}

fn run_for(s: &mut Sim<Tiga>, rec: &mut HistoryLog, ms: u64) -> Vec<Completion> {
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
    let mut s = sim(
        1,
        Setup {
            shards: 3,
            replicas: 3,
            view_manager: false,
            leaders: LeaderPlacement::Colocated,
            params: Params::new(),
            offsets_ms: vec![],
        },
    );
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
    let mut s = sim(
        2,
        Setup {
            shards: 2,
            replicas: 3,
            view_manager: false,
            leaders: LeaderPlacement::Colocated,
            params: Params::new(),
            offsets_ms: vec![],
        },
    );
    s.run_until(2_000 * MS);
    let mut rec = HistoryLog::default();
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
    let mut s = sim(
        3,
        Setup { shards: 2, replicas: 3, view_manager: false, leaders: LeaderPlacement::Colocated, params, offsets_ms },
    );
    let (l1, l2) = (node(&s, "shard0-replica0"), node(&s, "shard1-replica0"));
    let (sc, fi) = (node(&s, "client-south-carolina-0"), node(&s, "client-finland-0"));
    s.set_interceptor(Box::new(move |_, from, to, msg: &Msg| match msg {
        Msg::TsNotify(TsNotify { .. }) if from == l1 && to == l2 => Verdict::Delay(20_000 * MS),
        _ => Verdict::Deliver,
    }));
    s.schedule(2_600 * MS, FaultAction::ClockJump(fi, -2_000 * MS as i64));
    s.run_until(2_000 * MS);
    if let Ok(p) = std::env::var("TIGA_EVENT_LOG") {
        s.set_event_log(Box::new(std::fs::File::create(p).unwrap()));
    }
    let mut rec = HistoryLog::default();
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

/// §3.4's example with `f = 2` (five replicas of one shard, the leader
/// `r0`): T2 is stamped just before T1, but reaches the leader and
/// `in_order` followers late (so they log T1, and hold T2 or re-stamp it
/// behind T1) and the others on time (so they log T2, and never get T1).
/// T1 reads `x` empty and commits on the fast path; the leader crashes
/// before syncing anything; the view manager installs `r1`, which rebuilds
/// the log from the first `f + 1` logs to reach it — its own, `r4`'s, then
/// `r3`'s. Afterwards T3 reads `x`. Returns the history and the new
/// leader's log as transaction tags.
fn super_quorum_example(fast_quorum: &str, in_order: &'static [u32]) -> (Vec<HistoryOp>, Vec<u64>) {
    let params = Params::new().with("fast_quorum", ParamValue::Str(fast_quorum.into()));
    let setup = Setup {
        shards: 1,
        replicas: 5,
        view_manager: true,
        leaders: LeaderPlacement::Colocated,
        params,
        offsets_ms: vec![],
    };
    let mut s = sim(4, setup);
    let replicas: Vec<NodeId> = s.topology().replicas(ShardId(0)).to_vec();
    let rank = move |n: NodeId| replicas.iter().position(|r| *r == n).map(|r| r as u32);
    let tag_of = |msg: &Msg| match msg {
        Msg::Submit(Submit { body, .. }) => body.program.ops.iter().find_map(|op| match op {
            Op::Append { element, .. } => Some(*element),
            _ => None,
        }),
        _ => None,
    };
    let leader = node(&s, "shard0-replica0");
    s.set_interceptor(Box::new(move |_, from, to, msg: &Msg| {
        let in_order = rank(to).is_some_and(|r| r == 0 || in_order.contains(&r));
        match (tag_of(msg), msg) {
            (Some(2), _) if in_order => Verdict::Delay(300 * MS), // T2 late here
            (Some(1), _) if rank(to).is_some() && !in_order => Verdict::Drop, // T1 never here
            (_, Msg::LogSync(LogSync { .. })) if from == leader => Verdict::Drop, // nothing synced
            _ => Verdict::Deliver,
        }
    }));
    s.run_until(2_000 * MS); // delay estimates from probes
    if let Ok(p) = std::env::var("TIGA_EVENT_LOG") {
        s.set_event_log(Box::new(std::fs::File::create(p).unwrap()));
    }
    // T2 from Finland, T1 from South Carolina (links are FIFO: T2's delay
    // must not hold T1 back), T3 from Brazil.
    let (sc, fi, br) = (node(&s, "client-south-carolina-0"), node(&s, "client-finland-0"), node(&s, "client-brazil-0"));
    let x = Key(0);
    let mut rec = HistoryLog::default();
    rec.submit(&mut s, fi, 2, Program::new(vec![Op::Append { key: x, element: 2 }]));
    run_for(&mut s, &mut rec, 5);
    rec.submit(&mut s, sc, 1, Program::new(vec![Op::Read { key: x }, Op::Append { key: x, element: 1 }]));
    let mut done = Vec::new();
    while !done.iter().any(|c: &Completion| c.request.0 == 1) {
        done.extend(run_for(&mut s, &mut rec, 5));
        assert!(s.now_ns() < 5_000 * MS, "T1 never committed");
    }
    assert_eq!(s.counters().get("fast_path").copied(), Some(1), "T1 on the fast path: {:?}", s.counters());
    s.crash(leader);
    run_for(&mut s, &mut rec, 8_000); // view change; T2 is resubmitted
    rec.submit(&mut s, br, 3, Program::new(vec![Op::Read { key: x }]));
    run_for(&mut s, &mut rec, 5_000);
    assert!(s.counters().get("view_change_completions").copied().unwrap_or(0) >= 1, "{:?}", s.counters());
    let new_leader = node(&s, "shard0-replica1");
    let Some(Node::Server(server)) = s.process(new_leader) else { panic!("r1 is a server") };
    assert!(server.is_leader(), "the view manager made r1 the leader");
    let tags = server.log().all().iter().filter_map(|e| tag_of_body(&e.body.program)).collect();
    (rec.ops, tags)
}

fn tag_of_body(program: &Program) -> Option<u64> {
    program.ops.iter().find_map(|op| match op {
        Op::Append { element, .. } => Some(*element),
        _ => None,
    })
}

#[test]
fn after_the_leader_fails_the_new_leader_recovers_the_order_a_super_quorum_committed() {
    // T1 logged by the leader and three followers: 1 + f + ⌈f/2⌉ = 4.
    let (history, log) = super_quorum_example("super", &[1, 2, 3]);
    let t1 = log.iter().position(|t| *t == 1).expect("T1 recovered");
    if let Some(t2) = log.iter().position(|t| *t == 2) {
        assert!(t1 < t2, "T1 committed first, so T2 follows it: {log:?}");
    }
    let report = check(&history, Model::StrictSerializable);
    assert!(report.valid, "{}", report.summary());
    assert_eq!(history.iter().filter(|op| op.kind == OpType::Ok).count(), 3, "T1, T2 and T3 commit");
}

#[test]
fn with_a_simple_quorum_fast_path_the_new_leader_recovers_the_other_order_and_the_checker_catches_it() {
    // T1 logged by the leader and two followers only (f + 1 = 3), T2 by the
    // other two: after the leader fails, T2 has as many holders as T1, and
    // the new leader's quorum sees only one of T1's.
    let (history, log) = super_quorum_example("simple", &[1, 2]);
    let t2 = log.iter().position(|t| *t == 2).expect("T2 recovered");
    let t1 = log.iter().position(|t| *t == 1);
    assert!(t1.is_none_or(|t1| t1 > t2), "the committed T1 lost or placed behind T2: {log:?}");
    let report = check(&history, Model::StrictSerializable);
    assert!(!report.valid, "the lost order must be caught: {}", report.summary());
}

// ---- §4 checkpoints ----

fn server<'a>(s: &'a Sim<Tiga>, name: &str) -> &'a meridian_tiga::tiga::Server {
    match s.process(node(s, name)) {
        Some(Node::Server(server)) => server,
        _ => panic!("{name} is a running server"),
    }
}

/// Submits `n` list-append transactions round-robin from the four clients,
/// 10 ms apart, each appending to one key of each shard and reading a
/// third; then runs until every one completed.
fn load(s: &mut Sim<Tiga>, rec: &mut HistoryLog, first: u64, n: u64) {
    let clients: Vec<NodeId> = ["south-carolina", "finland", "brazil", "hong-kong"]
        .iter()
        .map(|r| node(s, &format!("client-{r}-0")))
        .collect();
    for i in first..first + n {
        let ops = vec![
            Op::Append { key: Key(2 * (i % 5)), element: 10_000 + 2 * i },
            Op::Append { key: Key(2 * (i % 3) + 1), element: 10_001 + 2 * i },
            Op::Read { key: Key((i % 7) + 20) },
        ];
        rec.submit(s, clients[(i % 4) as usize], i, Program::new(ops));
        run_for(s, rec, 10);
    }
    let deadline = s.now_ns() + 60_000 * MS;
    while rec.pending() > 0 {
        run_for(s, rec, 100);
        assert!(s.now_ns() < deadline, "{} transactions never completed", rec.pending());
    }
}

impl HistoryLog {
    fn pending(&self) -> usize {
        let invoked = self.ops.iter().filter(|op| op.kind == OpType::Invoke).count();
        invoked - (self.ops.len() - invoked)
    }
}

fn checkpointing(seed: u64, extra: Params) -> Sim<Tiga> {
    let mut params = Params::new().with("checkpoint_entries", ParamValue::Int(20));
    for (k, v) in extra.iter() {
        params = params.with(k, v.clone());
    }
    let setup = Setup {
        shards: 2,
        replicas: 3,
        view_manager: true,
        leaders: LeaderPlacement::Colocated,
        params,
        offsets_ms: vec![],
    };
    let mut s = sim(seed, setup);
    s.run_until(2_000 * MS);
    s
}

/// Every replica of each shard has executed the same log to the same data.
fn assert_replicas_agree(s: &Sim<Tiga>) {
    for shard in 0..2 {
        let names: Vec<String> = (0..3).map(|r| format!("shard{shard}-replica{r}")).collect();
        let leader = names.iter().find(|n| server(s, n).is_leader()).expect("a leader");
        let want = server(s, leader);
        for name in &names {
            let got = server(s, name);
            assert_eq!(got.applied(), want.log().len(), "{name} executed the whole log");
            assert_eq!(got.state().snapshot(), want.state().snapshot(), "{name} and {leader} hold the same data");
        }
    }
}

#[test]
fn servers_fold_their_logs_at_the_commit_point_and_a_restarted_one_resumes_from_its_checkpoint() {
    let mut s = checkpointing(5, Params::new());
    let mut rec = HistoryLog::default();
    load(&mut s, &mut rec, 0, 60);
    let follower = node(&s, "shard0-replica1");
    s.crash(follower);
    load(&mut s, &mut rec, 60, 60);
    s.restart(follower);
    load(&mut s, &mut rec, 120, 60);
    // Again, now that it restarted from a snapshot and took new ones.
    s.crash(follower);
    load(&mut s, &mut rec, 180, 30);
    s.restart(follower);
    load(&mut s, &mut rec, 210, 30);
    run_for(&mut s, &mut rec, 2_000); // commit-points reach every follower
    let c = s.counters().clone();
    assert!(c.get("checkpoints").copied().unwrap_or(0) >= 10, "{c:?}");
    for shard in 0..2 {
        for r in 0..3 {
            let sv = server(&s, &format!("shard{shard}-replica{r}"));
            assert!(sv.checkpoint().upto > 100, "shard{shard}-replica{r} folded its log: {}", sv.checkpoint().upto);
            assert!(sv.log().all().len() < 40, "at most one interval held: {}", sv.log().all().len());
        }
    }
    assert_replicas_agree(&s);
    assert_eq!(c.get("leaders_cut_off"), None, "a leader with one follower left is not cut off");
    let report = check(&rec.ops, Model::StrictSerializable);
    assert!(report.valid, "{}", report.summary());
}

/// Cuts the links between `node` and the other replicas of its shard,
/// and no other: it still reaches the view manager, clients and the other
/// shards.
fn cut_from_its_shard(s: &mut Sim<Tiga>, name: &str) {
    let shard = name.split('-').next().expect("a server name");
    let cut = node(s, name);
    let links: Vec<(NodeId, NodeId)> =
        (0..3).map(|r| node(s, &format!("{shard}-replica{r}"))).filter(|n| *n != cut).map(|n| (cut, n)).collect();
    s.schedule(s.now_ns(), FaultAction::CutLinks(links));
}

/// Which replica leads each of the two shards, as shard 0's replica 2 sees
/// the view.
fn leaders(s: &Sim<Tiga>) -> Vec<u32> {
    let view = server(s, "shard0-replica2").view().clone();
    (0..2).map(|shard| (view.l_view(meridian_core::ShardId(shard)) % 3) as u32).collect()
}

#[test]
fn a_leader_that_reaches_the_view_manager_but_not_its_followers_is_replaced() {
    // Beyond the paper (reach.rs): shard 0's leader keeps heartbeating, so
    // it is never silent, but its log reaches no follower: the fast path
    // still commits, the commit-point and the slow path do not move. It
    // says so, and the view manager replaces it; the partition never heals
    // here.
    let mut s = checkpointing(21, Params::new());
    let mut rec = HistoryLog::default();
    load(&mut s, &mut rec, 0, 20);
    assert_eq!(leaders(&s), [0, 0]);
    cut_from_its_shard(&mut s, "shard0-replica0");
    load(&mut s, &mut rec, 20, 20);
    run_for(&mut s, &mut rec, 3_000);
    load(&mut s, &mut rec, 40, 20);
    assert_ne!(leaders(&s)[0], 0, "shard 0 has a new leader: {:?}", s.counters());
    assert!(s.counters().get("leaders_cut_off").copied().unwrap_or(0) >= 1, "{:?}", s.counters());
    let report = check(&rec.ops, Model::StrictSerializable);
    assert!(report.valid, "{}", report.summary());
}

#[test]
fn a_leader_whose_followers_do_not_hear_it_is_replaced() {
    // Beyond the paper (reach.rs): the links from shard 0's leader to its
    // followers are cut one way. Their sync reports still reach it, but no
    // log reaches them: the fast path commits, the commit-point,
    // checkpoints and slow path stop, and the log grows. The reports
    // repeat the same sync-point, so the leader counts them as not heard,
    // says it is cut off and is replaced; the cut never heals here.
    let mut s = checkpointing(23, Params::new());
    let mut rec = HistoryLog::default();
    load(&mut s, &mut rec, 0, 20);
    assert_eq!(leaders(&s), [0, 0]);
    let leader = node(&s, "shard0-replica0");
    let not_hearing: Vec<(NodeId, NodeId)> =
        (1..3).map(|r| (leader, node(&s, &format!("shard0-replica{r}")))).collect();
    s.schedule(s.now_ns(), FaultAction::CutOneWay(not_hearing));
    load(&mut s, &mut rec, 20, 20);
    run_for(&mut s, &mut rec, 3_000);
    load(&mut s, &mut rec, 40, 20);
    run_for(&mut s, &mut rec, 1_000);
    assert_ne!(leaders(&s)[0], 0, "shard 0 has a new leader: {:?}", s.counters());
    assert!(s.counters().get("leaders_cut_off").copied().unwrap_or(0) >= 1, "{:?}", s.counters());
    for r in 0..3 {
        let sv = server(&s, &format!("shard0-replica{r}"));
        assert_eq!(sv.commit_point(), sv.log().len(), "shard0-replica{r} commits its whole log again");
    }
    assert_replicas_agree(&s);
    let report = check(&rec.ops, Model::StrictSerializable);
    assert!(report.valid, "{}", report.summary());
}

#[test]
fn a_new_leader_cut_off_from_its_followers_is_replaced_before_it_holds_every_shards_view() {
    // Shard 1's leader crashes and the view manager moves every shard's
    // leadership to replica 1 (Algorithm 4 lines 37-49). Shard 0's replica
    // 1 cannot reach its shard: it never gathers the view's logs, and the
    // view's later rounds wait for every shard (recovery.rs). It heartbeats
    // all along; saying it is cut off gets it replaced, and every shard
    // commits again while the partition lasts.
    let mut s = checkpointing(22, Params::new());
    let mut rec = HistoryLog::default();
    load(&mut s, &mut rec, 0, 20);
    cut_from_its_shard(&mut s, "shard0-replica1");
    s.crash(node(&s, "shard1-replica0"));
    load(&mut s, &mut rec, 20, 40);
    // `load` returns once all 40 completed, and a completion that is not a
    // commit fails the test (`HistoryLog::complete`).
    let committed = rec.ops.iter().filter(|op| op.kind == OpType::Ok).count();
    assert_eq!(committed, 60, "every transaction committed while the partition lasts");
    assert_eq!(leaders(&s), [2, 2], "replica 2 leads both shards: {:?}", s.counters());
    let report = check(&rec.ops, Model::StrictSerializable);
    assert!(report.valid, "{}", report.summary());
}

#[test]
fn a_follower_behind_its_leaders_checkpoint_installs_it_and_catches_up() {
    let mut s = checkpointing(6, Params::new());
    let lagging = node(&s, "shard1-replica2");
    let cut = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let cut_in = cut.clone();
    s.set_interceptor(Box::new(move |_, from, to, _: &Msg| {
        let isolated = cut_in.load(std::sync::atomic::Ordering::Relaxed) && (from == lagging || to == lagging);
        if isolated { Verdict::Drop } else { Verdict::Deliver }
    }));
    let mut rec = HistoryLog::default();
    load(&mut s, &mut rec, 0, 100); // commits on the slow path without it
    cut.store(false, std::sync::atomic::Ordering::Relaxed);
    load(&mut s, &mut rec, 100, 20);
    run_for(&mut s, &mut rec, 2_000);
    let c = s.counters().clone();
    assert!(c.get("checkpoints_installed").copied().unwrap_or(0) >= 1, "{c:?}");
    assert_replicas_agree(&s);
    let report = check(&rec.ops, Model::StrictSerializable);
    assert!(report.valid, "{}", report.summary());
}

#[test]
fn a_resubmission_of_a_folded_transaction_is_answered_from_memory_and_never_executed_twice() {
    // Appendix B's at-most-once execution, across a checkpoint: T's replies
    // are lost until every server has folded it; its coordinator resubmits.
    let mut s = checkpointing(7, Params::new().with("retry_ms", ParamValue::Int(3_000)));
    let coordinator = node(&s, "client-finland-0");
    let start = s.now_ns();
    s.set_interceptor(Box::new(move |now, _, to, msg: &Msg| match msg {
        Msg::FastReply(_) | Msg::SyncReply { .. } if to == coordinator && now < start + 2_500 * MS => Verdict::Drop,
        _ => Verdict::Deliver,
    }));
    let mut rec = HistoryLog::default();
    let t = Program::new(vec![Op::Append { key: Key(0), element: 7 }, Op::Append { key: Key(1), element: 8 }]);
    rec.submit(&mut s, coordinator, 999, t);
    load(&mut s, &mut rec, 0, 100); // T's entries fold everywhere meanwhile
    for shard in 0..2 {
        let sv = server(&s, &format!("shard{shard}-replica0"));
        assert!(sv.checkpoint().upto > 30, "shard {shard} folded past T");
    }
    run_for(&mut s, &mut rec, 5_000);
    assert_eq!(rec.pending(), 0, "T committed after its resubmission");
    assert!(s.counters().get("resubmissions").copied().unwrap_or(0) >= 1, "{:?}", s.counters());
    let report = check(&rec.ops, Model::StrictSerializable);
    assert!(report.valid, "{}", report.summary());
    rec.submit(&mut s, coordinator, 1_000, Program::new(vec![Op::Read { key: Key(0) }, Op::Read { key: Key(1) }]));
    run_for(&mut s, &mut rec, 2_000);
    let last = rec.ops.last().expect("the read completed");
    for (key, element) in [(0, 7), (1, 8)] {
        let list = last.value.iter().find_map(|m| match m {
            Mop::Read { key: k, value: ReadValue::List(l) } if *k == key => Some(l.clone()),
            _ => None,
        });
        let list = list.unwrap_or_else(|| panic!("a list read of {key}: {:?}", last.value));
        assert_eq!(list.iter().filter(|e| **e == element).count(), 1, "T appended once to {key}: {list:?}");
    }
}

#[test]
fn a_deployment_whose_every_server_restarts_recovers_from_their_durable_logs() {
    // Every server and view-manager member crashes at once and restarts:
    // all restarted, none can take its log from a live leader, so the view
    // manager makes restarted servers lead and the view change rebuilds
    // each shard's log from their durable logs (every vote was durable).
    let mut s = checkpointing(8, Params::new());
    let mut rec = HistoryLog::default();
    load(&mut s, &mut rec, 0, 80);
    let everyone: Vec<NodeId> =
        (0..s.topology().nodes.len() as u32).map(NodeId).filter(|n| !s.topology().is_client(*n)).collect();
    for n in &everyone {
        s.crash(*n);
    }
    run_for(&mut s, &mut rec, 500);
    for n in &everyone {
        s.restart(*n);
    }
    load(&mut s, &mut rec, 80, 80);
    run_for(&mut s, &mut rec, 2_000);
    assert!(s.counters().get("view_change_completions").copied().unwrap_or(0) >= 2, "{:?}", s.counters());
    assert_replicas_agree(&s);
    assert_verification_ended(&mut s, &mut rec, 1);
}

#[test]
fn cross_shard_verification_ends_with_the_view_change_even_when_a_message_of_it_is_late() {
    // Step ④: the first round-2 message from shard 0's new leader to shard
    // 1's is held back, so shard 1's leader re-sends its own and shard 0's
    // — already done — answers each re-send. The late message and the
    // answers then reach a leader that is done too. Answers are never
    // answered, so nothing keeps bouncing between leaders afterwards.
    let mut s = checkpointing(12, Params::new());
    let shard_of = |s: &Sim<Tiga>, shard: u32| -> Vec<NodeId> {
        (0..3).map(|r| node(s, &format!("shard{shard}-replica{r}"))).collect()
    };
    let (shard0, shard1) = (shard_of(&s, 0), shard_of(&s, 1));
    let mut held = false;
    s.set_interceptor(Box::new(move |_, from, to, msg: &Msg| match msg {
        Msg::TsVerify(TsVerify { round: 2, .. }) if !held && shard0.contains(&from) && shard1.contains(&to) => {
            held = true;
            Verdict::Delay(400 * MS)
        }
        _ => Verdict::Deliver,
    }));
    let mut rec = HistoryLog::default();
    load(&mut s, &mut rec, 0, 40);
    s.crash(node(&s, "shard0-replica0"));
    run_for(&mut s, &mut rec, 3_000);
    load(&mut s, &mut rec, 40, 40);
    // More than the 8 first-round and second-round messages: re-sends.
    assert_verification_ended(&mut s, &mut rec, 9);
    assert_eq!(s.counters().get("leaders_cut_off"), None, "the new leaders heard their followers");
}

/// Step ④'s verification sent at least `at_least` messages and then ended
/// with the view change: leaders back in Normal never bounce its messages
/// between them. The history stays strictly serializable.
fn assert_verification_ended(s: &mut Sim<Tiga>, rec: &mut HistoryLog, at_least: u64) {
    let verify = |s: &Sim<Tiga>| s.counters().get("verify_messages").copied().unwrap_or(0);
    let settled = verify(s);
    assert!(settled >= at_least, "the view change verified across shards: {:?}", s.counters());
    run_for(s, rec, 5_000);
    assert_eq!(verify(s), settled, "verification messages after the view change completed");
    let report = check(&rec.ops, Model::StrictSerializable);
    assert!(report.valid, "{}", report.summary());
}

/// TPC-C under Tiga: each New-Order is the home warehouse's part (which
/// numbers the order from the district and writes the rows that number
/// names) and one part per remote supplying warehouse, each executed where
/// its warehouse lives. Concurrent New-Orders of one district, submitted
/// from every region, take consecutive order ids on every replica, and the
/// history the procedures' results replay is strictly serializable.
#[test]
fn new_orders_run_as_one_shot_parts_and_every_replica_agrees_on_the_order_ids() {
    use meridian_core::procedure::Procedure;
    use meridian_core::tpcc::{LineInput, NewOrder, Scale, TpccKind, TpccTxn};
    let mut s = checkpointing(11, Params::new());
    let mut rec = HistoryLog::default();
    let scale = Scale { warehouses: 2, customers: 30, items: 100, shards: 2, homes: 3 };
    let clients: Vec<NodeId> = s.topology().clients().to_vec();
    let n = 24u64;
    for i in 0..n {
        let lines =
            vec![LineInput { item: 1 + i as u32, supply_w: 1, qty: 1 }, LineInput { item: 77, supply_w: 2, qty: 2 }];
        let kind = TpccKind::NewOrder(NewOrder { w: 1, d: 2, c: 1 + i as u32, lines, skip_district_update: false });
        let program = Program::procedure(Procedure::Tpcc(TpccTxn { scale, tag: (i + 1) << 24, kind }));
        rec.submit(&mut s, clients[(i % 4) as usize], i, program);
        run_for(&mut s, &mut rec, 7);
    }
    while rec.pending() > 0 {
        run_for(&mut s, &mut rec, 100);
    }
    run_for(&mut s, &mut rec, 2_000);
    assert_replicas_agree(&s);
    let leader = (0..3).map(|r| format!("shard0-replica{r}")).find(|n| server(&s, n).is_leader()).expect("a leader");
    let district = server(&s, &leader).state().latest(scale.district(1, 2)).cloned().expect("written");
    let meridian_core::Data::Row(row) = district.data else { panic!("a row") };
    assert_eq!(row[0], 31 + n as i64, "one order id per New-Order");
    let report = check(&rec.ops, Model::StrictSerializable);
    assert!(report.valid, "{}", report.summary());
    assert!(
        rec.ops.iter().any(|op| op.kind == OpType::Ok && op.value.len() > 4),
        "the history lists replayed operations"
    );
}

/// A procedure whose part needs reads from other shards cannot run one
/// shot: Tiga refuses it rather than execute it without them.
#[test]
fn a_procedure_that_needs_other_shards_reads_is_refused() {
    use meridian_core::procedure::{Procedure, Transfer};
    let mut s = checkpointing(12, Params::new());
    let c = s.topology().clients()[0];
    let transfer = Procedure::Transfer(Transfer { from: Key(0), to: Key(1), amount: Key(2), tag: 500 });
    s.request(c, RequestId(1), Program::procedure(transfer));
    s.run_until(s.now_ns() + 1_000 * MS);
    let done = s.take_completions();
    assert!(matches!(done[0].outcome, Outcome::Aborted { reason: meridian_core::AbortReason::Rejected }), "{done:?}");
}
