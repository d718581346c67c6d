//! `2pl-paxos` under the simulator, driven by scripted requests: the claims
//! of its module documentation (latency formula, wound-wait progress,
//! durability of prepared work across leader failure).

use meridian_core::{
    ClusterSpec, Data, Deployment, Key, LatencyMatrix, LeaderPlacement, NodeId, Op, Outcome, Params, Program, RegionId,
    RequestId, ShardId, Topology,
};
use meridian_sim::{Completion, FaultAction, Sim, SimConfig};
use meridian_twopc::twopl_paxos::{Node, TwoPlPaxos};
use std::sync::Arc;

const MS: u64 = 1_000_000;

fn sim(seed: u64) -> Sim<TwoPlPaxos> {
    sim_with(seed, Params::new())
}

fn sim_with(seed: u64, params: Params) -> Sim<TwoPlPaxos> {
    let matrix = LatencyMatrix::preset("tiga-gcp").unwrap();
    let spec = ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
        shards: 3,
        replicas_per_shard: 3,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(0), RegionId(1), RegionId(2), RegionId(3)],
        clients_per_region: 2,
    };
    let topology = Arc::new(Topology::build(&spec, &[]));
    let latency = Arc::new(matrix.clone());
    let mut cfg = SimConfig::ideal(seed, topology.clone(), matrix);
    cfg.fsync_ns = 0;
    Sim::new(cfg, Deployment { topology, params, epsilon_us: 100, latency }).unwrap()
}

fn client(sim: &Sim<TwoPlPaxos>, name: &str) -> NodeId {
    sim.topology().node_by_name(name).unwrap()
}

/// Increments keys 0, 1 and 2 (one per shard) with unique tags.
fn three_shard_increment(tag: u64) -> Program {
    Program::new((0..3).map(|k| Op::Increment { key: Key(k), delta: 1, tag: tag * 10 + k }).collect())
}

fn counter(sim: &Sim<TwoPlPaxos>, key: Key) -> i64 {
    let shard = sim.topology().shard_of(key);
    for r in sim.topology().replicas(shard) {
        if let Some(Node::Replica(rep)) = sim.process(*r) {
            if rep.is_leading() {
                return match rep.store().latest(key).map(|v| &v.data) {
                    Some(Data::Int(i)) => *i,
                    _ => 0,
                };
            }
        }
    }
    panic!("no leader for {key}");
}

fn committed(done: &[Completion]) -> usize {
    done.iter().filter(|c| matches!(c.outcome, Outcome::Committed { .. })).count()
}

#[test]
fn latency_matches_the_analytical_formula_per_region() {
    // execute RTT(c, SC) + prepare RTT(c, SC) + majority RTT(SC, FI) = 114.
    let expected_ms = [("south-carolina", 114.4), ("finland", 342.0), ("brazil", 348.0), ("hong-kong", 508.0)];
    for (i, (region, want)) in expected_ms.iter().enumerate() {
        let mut s = sim(1);
        s.run_until(200 * MS); // leaders are up
        let c = client(&s, &format!("client-{region}-0"));
        let start = s.now_ns();
        s.request(c, RequestId(i as u64), three_shard_increment(i as u64 + 1));
        s.run_until(start + 2000 * MS);
        let done = s.take_completions();
        assert_eq!(committed(&done), 1, "{region}");
        let got = (done[0].at_ns - start) as f64 / MS as f64;
        assert!((got - want).abs() / want < 0.02, "{region}: {got:.1} ms vs analytical {want} ms");
    }
}

#[test]
fn wound_wait_commits_every_contended_transaction_and_loses_no_increment() {
    let mut s = sim_with(2, Params::new().with("max_attempts", meridian_core::ParamValue::Int(1000)));
    s.run_until(200 * MS);
    let clients: Vec<NodeId> = s.topology().clients().to_vec();
    let mut req = 0;
    for round in 0..5 {
        for c in &clients {
            s.request(*c, RequestId(req), three_shard_increment(1000 + req));
            req += 1;
        }
        s.run_until(s.now_ns() + 37 * MS + round);
    }
    s.run_until(s.now_ns() + 120_000 * MS);
    let done = s.take_completions();
    assert_eq!(done.len(), req as usize, "every request completes");
    assert_eq!(committed(&done), req as usize, "no starvation: the oldest always wins eventually");
    for k in 0..3 {
        assert_eq!(counter(&s, Key(k)), req as i64, "key {k} counts exactly the committed increments");
    }
    assert!(s.counters().get("wounds").copied().unwrap_or(0) > 0, "the schedule was contended");
}

/// Request `r` increments its own key on each shard: `3r`, `3r+1`, `3r+2`.
fn own_keys_increment(r: u64) -> Program {
    Program::new((0..3).map(|s| Op::Increment { key: Key(3 * r + s), delta: 1, tag: 100_000 + 3 * r + s }).collect())
}

/// Every client increments its own keys on the three shards every 50 ms
/// until `end_ns`, then the run drains for `drain_ns`; every request must
/// complete.
fn load_until(s: &mut Sim<TwoPlPaxos>, end_ns: u64, drain_ns: u64) -> Vec<Completion> {
    let clients: Vec<NodeId> = s.topology().clients().to_vec();
    let mut req = 0;
    while s.now_ns() < end_ns {
        for c in &clients {
            s.request(*c, RequestId(req), own_keys_increment(req));
            req += 1;
        }
        s.run_until(s.now_ns() + 50 * MS);
    }
    s.run_until(s.now_ns() + drain_ns);
    let done = s.take_completions();
    assert_eq!(done.len(), req as usize, "every request completes");
    done
}

/// A committed request's three increments are all there, an aborted one's
/// none, an unknown one's all or none.
fn assert_each_all_or_nothing(s: &Sim<TwoPlPaxos>, done: &[Completion]) {
    for c in done {
        let r = c.request.0;
        let values: Vec<i64> = (0..3).map(|k| counter(s, Key(3 * r + k))).collect();
        match c.outcome {
            Outcome::Committed { .. } => assert_eq!(values, vec![1, 1, 1], "request {r} committed"),
            Outcome::Aborted { .. } => assert_eq!(values, vec![0, 0, 0], "request {r} aborted"),
            Outcome::Unknown => {
                assert!(values == vec![0, 0, 0] || values == vec![1, 1, 1], "request {r} torn: {values:?}")
            }
        }
    }
}

#[test]
fn a_crashed_leader_is_replaced_and_every_transaction_stays_atomic() {
    let mut s = sim(3);
    s.run_until(200 * MS);
    let leader = s.topology().initial_leader(ShardId(1));
    s.schedule(2_000 * MS, FaultAction::Crash(leader));
    let done = load_until(&mut s, 8_000 * MS, 40_000 * MS);
    let late = done.iter().filter(|c| c.at_ns > 5_000 * MS && matches!(c.outcome, Outcome::Committed { .. })).count();
    assert!(late > 100, "commits resume after the new leader takes over ({late})");
    assert_each_all_or_nothing(&s, &done);
    assert!(s.counters().get("leader_takeovers").copied().unwrap_or(0) >= 4, "a new leader took over shard 1");
}

#[test]
fn a_leader_that_does_not_hear_its_followers_steps_down_and_commits_resume_while_the_cut_lasts() {
    // Shard 1's followers hear their leader but it hears neither of them
    // (links cut one way). Its heartbeats keep them from timing out, so
    // nothing but the leader itself can end this: with proposals waiting
    // and nothing chosen for an election timeout it steps down, and the
    // followers elect one of them; it then asks for pre-votes again and
    // again, and they grant none while they hear their new leader, so it
    // never runs phase 1 (crates/mechanisms/src/paxos.rs, links that fail
    // one way).
    let mut s = sim(4);
    s.run_until(200 * MS);
    let leader = s.topology().initial_leader(ShardId(1));
    let deaf_to: Vec<(NodeId, NodeId)> =
        s.topology().replicas(ShardId(1)).iter().filter(|r| **r != leader).map(|f| (*f, leader)).collect();
    s.schedule(2_000 * MS, FaultAction::CutOneWay(deaf_to));
    let done = load_until(&mut s, 12_000 * MS, 10_000 * MS);
    let late = done.iter().filter(|c| c.at_ns > 8_000 * MS && matches!(c.outcome, Outcome::Committed { .. })).count();
    assert!(late > 100, "commits resume while the cut lasts ({late})");
    let c = s.counters();
    assert!(c.get("paxos_leader_stepdowns").copied().unwrap_or(0) >= 1, "{c:?}");
    assert!(c.get("paxos_pre_votes").copied().unwrap_or(0) >= 2, "the old leader asks again and again: {c:?}");
    assert_eq!(c.get("paxos_elections").copied(), Some(1), "only the new leader ran phase 1: {c:?}");
    assert_each_all_or_nothing(&s, &done);
}

#[test]
fn a_single_shard_transaction_left_in_doubt_commits() {
    // The coordinator's decision never arrives: the only participant is
    // prepared, so cooperative termination must commit (the client was
    // already told it committed).
    let mut s = sim(4);
    s.set_interceptor(Box::new(|_, _, _, msg: &meridian_twopc::twopl_paxos::Msg| match msg {
        meridian_twopc::twopl_paxos::Msg::Decide { .. } => meridian_sim::Verdict::Drop,
        _ => meridian_sim::Verdict::Deliver,
    }));
    s.run_until(200 * MS);
    let c = client(&s, "client-finland-0");
    let program = Program::new(vec![Op::Increment { key: Key(3), delta: 1, tag: 77 }]);
    s.request(c, RequestId(1), program);
    s.run_until(20_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 1);
    assert_eq!(counter(&s, Key(3)), 1, "the in-doubt transaction was committed, not aborted");
    assert!(s.counters()["in_doubt_resolved"] >= 1);
}

#[test]
fn a_restarted_coordinator_never_reuses_transaction_ids() {
    use meridian_twopc::twopl_paxos::{Execute, Msg};
    use std::sync::{Arc, Mutex};
    let mut s = sim(5);
    let seen: Arc<Mutex<Vec<(u64, meridian_core::TxnId)>>> = Arc::default();
    let log = seen.clone();
    s.set_interceptor(Box::new(move |now, _, _, msg: &Msg| {
        if let Msg::Execute(Execute { txn, .. }) = msg {
            log.lock().unwrap().push((now, *txn));
        }
        meridian_sim::Verdict::Deliver
    }));
    let c = client(&s, "client-brazil-0");
    s.run_until(200 * MS);
    for i in 0..5 {
        s.request(c, RequestId(i), own_keys_increment(i));
    }
    s.run_until(3_000 * MS);
    s.crash(c);
    s.restart(c);
    for i in 5..10 {
        s.request(c, RequestId(i), own_keys_increment(i));
    }
    s.run_until(6_000 * MS);
    assert_eq!(committed(&s.take_completions()), 10);
    let seen = seen.lock().unwrap();
    let before: std::collections::BTreeSet<_> = seen.iter().filter(|(t, _)| *t < 3_000 * MS).map(|(_, x)| *x).collect();
    let after: std::collections::BTreeSet<_> = seen.iter().filter(|(t, _)| *t >= 3_000 * MS).map(|(_, x)| *x).collect();
    assert!(!before.is_empty() && !after.is_empty());
    assert!(before.is_disjoint(&after), "ids reused after restart");
}

#[test]
fn locks_of_a_coordinator_that_crashed_before_preparing_are_released_by_their_lease() {
    let mut s = sim(6);
    s.run_until(200 * MS);
    let (a, b) = (client(&s, "client-hong-kong-0"), client(&s, "client-south-carolina-0"));
    let on_key_3 = |tag| Program::new(vec![Op::Increment { key: Key(3), delta: 1, tag }]);
    // A's execute reaches the leader at ~98 ms; A dies before it can prepare.
    s.request(a, RequestId(1), on_key_3(1));
    s.run_until(s.now_ns() + 150 * MS);
    s.crash(a);
    // B is younger, so it waits for A's lock instead of wounding it.
    s.request(b, RequestId(2), on_key_3(2));
    s.run_until(s.now_ns() + 30_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 1, "B commits once A's lease runs out: {done:?}");
    assert_eq!(counter(&s, Key(3)), 1);
    assert!(s.counters()["lock_leases_expired"] >= 1);
}

fn value_at(sim: &Sim<TwoPlPaxos>, key: Key) -> Option<meridian_core::Value> {
    let shard = sim.topology().shard_of(key);
    sim.topology().replicas(shard).iter().find_map(|r| match sim.process(*r) {
        Some(Node::Replica(rep)) if rep.is_leading() => Some(rep.store().latest(key).cloned()),
        _ => None,
    })?
}

/// DESIGN.md "Transactions": written values may depend on any value read.
/// The amount comes from a third key on a third shard, read in the same
/// transaction, so the procedure has one unanchored part that only an
/// interactive protocol can run.
#[test]
fn a_transfer_whose_amount_is_read_from_a_third_key_moves_exactly_that_amount() {
    use meridian_core::procedure::{Procedure, Transfer};
    let mut s = sim(4);
    s.run_until(200 * MS);
    let c = client(&s, "client-south-carolina-0");
    let set = |k: u64, v: i64, tag: u64| {
        Program::new(vec![Op::Write { key: Key(k), value: meridian_core::Value::int(tag, v) }])
    };
    s.request(c, RequestId(0), set(0, 100, 1));
    s.request(c, RequestId(1), set(2, 30, 2));
    s.run_until(s.now_ns() + 2_000 * MS);
    let transfer = Procedure::Transfer(Transfer { from: Key(0), to: Key(1), amount: Key(2), tag: 1_000 });
    s.request(c, RequestId(2), Program::procedure(transfer.clone()));
    s.run_until(s.now_ns() + 3_000 * MS);
    let done = s.take_completions();
    let Outcome::Committed { results } = &done.last().expect("completed").outcome else { panic!("{done:?}") };
    assert_eq!(counter(&s, Key(0)), 70);
    assert_eq!(counter(&s, Key(1)), 30);
    let replay = meridian_core::procedure::replay(&transfer, results).expect("the results replay the transfer");
    assert_eq!(replay.parts[0].writes.len(), 2, "the history learns both writes from the results");
}

/// TPC-C New-Order writes rows whose keys depend on the district's next
/// order id: they are locked in an extra round before the prepare, and
/// concurrent New-Orders of one district take consecutive ids.
#[test]
fn concurrent_new_orders_of_one_district_take_consecutive_order_ids() {
    use meridian_core::procedure::Procedure;
    use meridian_core::tpcc::{LineInput, NewOrder, Scale, TpccKind, TpccTxn};
    let mut s = sim(5);
    s.run_until(200 * MS);
    let scale = Scale { warehouses: 3, customers: 30, items: 100, shards: 3, homes: 3 };
    let clients: Vec<NodeId> = s.topology().clients().to_vec();
    for (i, c) in clients.iter().enumerate() {
        let lines =
            vec![LineInput { item: 1 + i as u32, supply_w: 1, qty: 2 }, LineInput { item: 50, supply_w: 2, qty: 1 }];
        let kind = TpccKind::NewOrder(NewOrder { w: 1, d: 4, c: 1 + i as u32, lines, skip_district_update: false });
        let txn = TpccTxn { scale, tag: (i as u64 + 1) << 20, kind };
        s.request(*c, RequestId(i as u64), Program::procedure(Procedure::Tpcc(txn)));
    }
    s.run_until(s.now_ns() + 60_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), clients.len(), "{done:?}");
    let district = value_at(&s, scale.district(1, 4)).expect("written");
    let Data::Row(row) = &district.data else { panic!("a row") };
    assert_eq!(row[0], 31 + clients.len() as i64, "one id per New-Order");
    for o in 31..31 + clients.len() as u32 {
        assert!(value_at(&s, scale.order(1, 4, o)).is_some(), "order {o} written");
    }
    let stock = value_at(&s, scale.stock(2, 50)).expect("the remote stock was updated");
    let Data::Row(stock) = &stock.data else { panic!("a row") };
    assert_eq!(stock[3], clients.len() as i64, "every remote line counted at warehouse 2");
}

#[test]
fn outcomes_are_retired_by_coordinator_watermarks_so_memory_follows_the_work_in_flight() {
    // 2,000 sequential three-shard transactions from one coordinator: without
    // watermarks every replica would remember all 2,000 outcomes (the table
    // holds a million); with them, those its coordinator settled go.
    let mut s = sim(3);
    s.run_until(200 * MS);
    let c = client(&s, "client-south-carolina-0");
    let txns = 2_000u64;
    for i in 0..txns {
        s.request(c, RequestId(i), three_shard_increment(i + 1));
        let until = s.now_ns() + 400 * MS;
        s.run_until(until);
    }
    s.run_until(s.now_ns() + 2_000 * MS); // a termination tick proposes the last watermarks
    assert_eq!(committed(&s.take_completions()), txns as usize);
    assert_eq!(counter(&s, Key(0)), txns as i64);
    for node in (0..s.topology().nodes.len()).map(|i| NodeId(i as u32)) {
        if let Some(Node::Replica(r)) = s.process(node) {
            assert!(r.outcomes_len() < 100, "{} remembers {} outcomes", s.topology().name(node), r.outcomes_len());
        }
    }
}

// ---- lock_at = "home": the SLOG paper's 2PL-coord (§4) ----

const SLOG_REGIONS: [&str; 6] = ["virginia", "ohio", "oregon", "california", "ireland", "london"];

/// slog-six-regions: every region a server region (one replica of each of
/// 4 shards) with one client; `lock_at = "home"`, fsync 0.1 ms.
fn home_sim(seed: u64) -> Sim<TwoPlPaxos> {
    let matrix = LatencyMatrix::preset("slog-six-regions").unwrap();
    assert_eq!(matrix.regions, SLOG_REGIONS);
    let all: Vec<RegionId> = (0..6).map(RegionId).collect();
    let spec = ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions: all.clone(),
        shards: 4,
        replicas_per_shard: 6,
        leaders: LeaderPlacement::Spread,
        client_regions: all,
        clients_per_region: 1,
    };
    let topology = Arc::new(Topology::build(&spec, &[]));
    let latency = Arc::new(matrix.clone());
    let mut cfg = SimConfig::ideal(seed, topology.clone(), matrix);
    cfg.fsync_ns = FSYNC_NS;
    let params = Params::new().with("lock_at", meridian_core::ParamValue::Str("home".into()));
    Sim::new(cfg, Deployment { topology, params, epsilon_us: 100, latency }).unwrap()
}

const FSYNC_NS: u64 = 100_000;

fn region(name: &str) -> usize {
    SLOG_REGIONS.iter().position(|r| *r == name).unwrap()
}

/// Round trip between two regions of slog-six-regions, in ms.
fn rtt_ms(a: &str, b: &str) -> f64 {
    LatencyMatrix::preset("slog-six-regions").unwrap().rtt_ms(region(a), region(b))
}

/// The module docs' formula: execute and prepare each a round trip to the
/// farthest home `h` of `homes`, plus one fsync there.
fn commit_ms(client: &str, homes: &[&str]) -> f64 {
    let widest = homes.iter().map(|h| rtt_ms(client, h)).fold(0.0, f64::max);
    2.0 * widest + FSYNC_NS as f64 / MS as f64
}

/// Key `n` of `shard` homed at `home`.
fn homed(sim: &Sim<TwoPlPaxos>, shard: u32, home: &str, n: u64) -> Key {
    sim.topology().key_layout().key(shard, region(home), n)
}

fn increment(keys: &[Key], tag: u64) -> Program {
    Program::new(
        keys.iter().enumerate().map(|(i, k)| Op::Increment { key: *k, delta: 1, tag: tag + i as u64 }).collect(),
    )
}

/// The value of `key` at its home replica.
fn at_home(sim: &Sim<TwoPlPaxos>, key: Key) -> i64 {
    let layout = sim.topology().key_layout();
    let part = meridian_twopc::twopl_paxos::LockAt::Home.participant(&layout, key);
    let home = sim.topology().replicas(layout.shard_of(key))[layout.home_index(key)];
    let Some(Node::Replica(rep)) = sim.process(home) else { panic!("the home replica is up") };
    assert_eq!(rep.participant(), part);
    match rep.store().latest(key).map(|v| &v.data) {
        Some(Data::Int(i)) => *i,
        _ => 0,
    }
}

/// Runs `program` from `client` alone and returns its latency in ms.
fn latency_alone_ms(sim: &mut Sim<TwoPlPaxos>, client: NodeId, id: u64, program: Program) -> f64 {
    let start = sim.now_ns();
    sim.request(client, RequestId(id), program);
    sim.run_until(start + 2_000 * MS);
    let done = sim.take_completions();
    assert_eq!(committed(&done), 1, "{done:?}");
    (done[0].at_ns - start) as f64 / MS as f64
}

#[test]
fn a_transaction_homed_at_its_clients_region_commits_with_no_wide_area_round_trip() {
    // Module docs: latency = max RTT(c, h) for execute + max RTT(c, h) +
    // fsync for the prepare; homed at c: 2 × 0.5 + 0.1 = 1.1 ms, on two
    // shards as on one (both home partitions are in c).
    let mut s = home_sim(1);
    let wide: std::rc::Rc<std::cell::RefCell<Vec<String>>> = Default::default();
    let seen = wide.clone();
    let regions: Vec<RegionId> = s.topology().nodes.iter().map(|n| n.region).collect();
    s.set_interceptor(Box::new(move |_, from, to, msg: &meridian_twopc::twopl_paxos::Msg| {
        let replication = matches!(msg, meridian_twopc::twopl_paxos::Msg::Paxos(_));
        if regions[from.index()] != regions[to.index()] && !replication {
            seen.borrow_mut().push(format!("{msg:?}"));
        }
        meridian_sim::Verdict::Deliver
    }));
    s.run_until(200 * MS);
    for (i, name) in SLOG_REGIONS.iter().enumerate() {
        let c = client(&s, &format!("client-{name}-0"));
        let keys = [homed(&s, 0, name, 7), homed(&s, 1, name, 7), homed(&s, 1, name, 8)];
        let want = commit_ms(name, &[name]);
        let got = latency_alone_ms(&mut s, c, i as u64, increment(&keys, 100 * i as u64));
        assert!((got - want).abs() < 0.01, "{name}: {got:.3} ms vs analytical {want} ms");
        assert!(got < rtt_ms("virginia", "ohio") / 2.0, "{name}: below the shortest wide-area one-way delay");
    }
    assert!(wide.borrow().is_empty(), "only replication crossed regions: {:?}", wide.borrow());
    // The copies learn it afterwards: every replica of shard 1 holds it.
    s.run_until(s.now_ns() + 1_000 * MS);
    let key = homed(&s, 1, "london", 8);
    let part = meridian_twopc::twopl_paxos::LockAt::Home.participant(&s.topology().key_layout(), key);
    for r in s.topology().replicas(ShardId(1)) {
        let Some(Node::Replica(rep)) = s.process(*r) else { panic!() };
        assert!(
            rep.store_of(part).and_then(|st| st.latest(key)).is_some(),
            "{} has London's write",
            s.topology().name(*r)
        );
    }
}

#[test]
fn a_multi_home_transaction_takes_two_of_its_widest_round_trips() {
    // Virginia's client, keys homed at Virginia and Ireland: 2 × 68 + 0.1.
    let mut s = home_sim(2);
    s.run_until(200 * MS);
    let c = client(&s, "client-virginia-0");
    let keys = [homed(&s, 0, "virginia", 1), homed(&s, 0, "ireland", 1)];
    let want = commit_ms("virginia", &["virginia", "ireland"]);
    let got = latency_alone_ms(&mut s, c, 1, increment(&keys, 10));
    assert!((got - want).abs() < 0.01, "{got:.3} ms vs analytical {want} ms");
}

#[test]
fn a_multi_home_transaction_holds_its_remote_lock_across_the_wide_area_commit() {
    // SLOG §4.1: "once a transaction acquires a lock on a remote master,
    // this lock is held for the entire duration of transaction processing,
    // including the time to acquire other locks, execute transaction logic,
    // and perform the commit protocol". Ireland's client T locks A, homed in
    // Virginia, 34 ms after it starts; Virginia's client L starts on A at
    // 40 ms, younger, and waits until T's decision is applied in Virginia:
    // 2 × 68 + 0.1 (T's votes) + 34 (the decision) + 0.1 (made durable).
    let mut s = home_sim(3);
    s.run_until(200 * MS);
    let (ireland, virginia) = (client(&s, "client-ireland-0"), client(&s, "client-virginia-0"));
    let a = homed(&s, 2, "virginia", 5);
    let b = homed(&s, 3, "ireland", 5);
    let t0 = s.now_ns();
    s.request(ireland, RequestId(1), increment(&[a, b], 10));
    s.run_until(t0 + 40 * MS);
    s.request(virginia, RequestId(2), increment(&[a], 20));
    s.run_until(t0 + 2_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 2, "{done:?}");
    let at = |r: u64| done.iter().find(|c| c.request == RequestId(r)).unwrap().at_ns;
    let waited_ms = (at(2) - (t0 + 40 * MS)) as f64 / MS as f64;
    let fsync_ms = FSYNC_NS as f64 / MS as f64;
    let wan = rtt_ms("ireland", "virginia");
    let released_ms = 2.0 * wan + fsync_ms + wan / 2.0 + fsync_ms;
    let want = released_ms - 40.0 + rtt_ms("virginia", "virginia") / 2.0 + rtt_ms("virginia", "virginia") + fsync_ms;
    assert!((waited_ms - want).abs() < 0.01, "L waited {waited_ms:.2} ms, analytical {want:.2}");
    assert!(waited_ms > wan, "a local transaction waits more than a wide-area round trip behind a multi-home one");
    assert_eq!(at_home(&s, a), 2, "both increments, T's first");
    // Alone, the same local transaction takes 1.1 ms.
    let alone = latency_alone_ms(&mut s, virginia, 3, increment(&[a], 30));
    assert!((alone - commit_ms("virginia", &["virginia"])).abs() < 0.01, "{alone}");
}

#[test]
fn a_crashed_and_restarted_home_replica_recovers_its_prepared_transactions_and_every_copy_converges() {
    // Virginia's client commits T on keys homed at Virginia and Ireland.
    // Ireland's home replica votes (its prepare durable at 102.1 ms) and
    // crashes at 120 ms, before the decision reaches it (170.1 ms). The
    // client was told T committed (136.1 ms). A restarted replica replays
    // its log: T is prepared again, its lock held; the coordinator's
    // re-sent decision commits it. Ireland's client L, meanwhile on the same
    // key, commits after it and reads T's write. Every copy of both shards
    // then holds the same data.
    let mut s = home_sim(4);
    s.run_until(200 * MS);
    let (virginia, ireland) = (client(&s, "client-virginia-0"), client(&s, "client-ireland-0"));
    let a = homed(&s, 1, "virginia", 9);
    let b = homed(&s, 2, "ireland", 9);
    let home_b = s.topology().replicas(ShardId(2))[region("ireland")];
    let t0 = s.now_ns();
    s.request(virginia, RequestId(1), increment(&[a, b], 10));
    s.schedule(t0 + 120 * MS, FaultAction::Crash(home_b));
    s.run_until(t0 + 150 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 1, "T committed before the decision reached Ireland: {done:?}");
    s.schedule(t0 + 600 * MS, FaultAction::Restart(home_b));
    // Its log's only member elects itself after its election timeout; the
    // coordinator's next decision comes at 1,136 ms, 2,136 ms, ...
    let leading = |s: &Sim<TwoPlPaxos>| matches!(s.process(home_b), Some(Node::Replica(r)) if r.is_leading());
    while !leading(&s) {
        assert!(s.now_ns() < t0 + 2_000 * MS, "Ireland's replica leads its log again");
        s.run_until(s.now_ns() + MS);
    }
    let Some(Node::Replica(rep)) = s.process(home_b) else { panic!("restarted") };
    assert_eq!(rep.prepared_count(), 1, "T is prepared again from Ireland's own log, not yet decided");
    s.request(ireland, RequestId(2), increment(&[b], 20));
    s.run_until(t0 + 20_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 1, "L commits once Ireland serves again: {done:?}");
    assert_eq!((at_home(&s, a), at_home(&s, b)), (1, 2), "T's writes survived, L's came after them");
    assert!(s.counters().get("leader_takeovers").copied().unwrap_or(0) > 24, "Ireland's replica led again");
    s.run_until(s.now_ns() + 2_000 * MS);
    let copies = meridian_harness::runner::compare_copies(&s).expect("home partitions' copies are compared");
    assert!(copies.diverged.is_empty(), "{copies:?}");
    assert_eq!((copies.compared, copies.agreeing), (24, 24), "every replica applied every home's log: {copies:?}");
}

fn run_file(name: &str, home: bool, seed: u64) -> meridian_harness::runner::RunOutput {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../examples").join(name);
    let mut exp = meridian_experiment::Experiment::load(&path).unwrap();
    if home {
        exp.protocol.params.set("lock_at", meridian_core::ParamValue::Str("home".into()));
    }
    exp.set_seed(seed);
    let opts = meridian_harness::runner::RunOptions {
        record_history: true,
        extra_faults: None,
        progress: None,
        event_log: None,
    };
    meridian_harness::runner::run_sim::<TwoPlPaxos>(&exp, opts).unwrap()
}

/// Checked strictly serializable, and every replica's copies identical.
fn assert_valid_and_converged(out: &meridian_harness::runner::RunOutput) {
    assert_eq!(out.report.check_valid(), Some(true), "{:?}", out.report.check);
    let copies = out.report.copies.as_ref().expect("home partitions' copies are compared");
    assert!(copies.diverged.is_empty(), "{copies:?}");
    assert_eq!(copies.agreeing, copies.replicas, "{copies:?}");
}

#[test]
fn a_contended_list_append_run_with_lock_at_home_is_strictly_serializable_and_its_copies_agree() {
    let out = run_file("list-append.toml", true, 1);
    assert_valid_and_converged(&out);
    assert!(out.report.txns.committed > 40, "{:?}", out.report.txns);
    assert!(out.report.counters.get("wounds").copied().unwrap_or(0) > 0, "contended: {:?}", out.report.counters);
}

#[test]
fn contended_multi_home_slog_ycsb_with_lock_at_home_is_strictly_serializable_and_its_copies_agree() {
    let out = run_file("2pl-coord.toml", false, 1);
    assert_valid_and_converged(&out);
    assert!(out.report.txns_by_type["multi-home"].committed > 100, "{:?}", out.report.txns_by_type);
    assert!(out.report.counters.get("wounds").copied().unwrap_or(0) > 0, "contended: {:?}", out.report.counters);
}

#[test]
fn the_same_seed_gives_the_same_trace_with_lock_at_home() {
    let (one, again, other) = (
        run_file("2pl-coord.toml", false, 5),
        run_file("2pl-coord.toml", false, 5),
        run_file("2pl-coord.toml", false, 6),
    );
    assert_eq!(one.trace_hash, again.trace_hash);
    assert_eq!(one.report.txns.committed, again.report.txns.committed);
    assert_ne!(one.trace_hash, other.trace_hash, "another seed, another run");
}
