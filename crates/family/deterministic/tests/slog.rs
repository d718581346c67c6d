//! `slog` under the simulator: the claims of SLOG §3 — single-home
//! transactions commit in their home region alone, every region executes
//! its own interleaving of the local logs to the same state (Figures 3 and
//! 4), multi-home transactions are ordered once and locked through one
//! LockOnlyTxn per home — and whole runs checked at strict
//! serializability, with every region's copies compared, deterministic
//! per seed.

use meridian_core::{
    ClusterSpec, Data, Deployment, Key, KeyLayout, LatencyMatrix, LeaderPlacement, NodeId, Op, Outcome, Params,
    Program, Protocol, RegionId, RequestId, ShardId, Topology,
};
use meridian_deterministic::slog::{Node, Slog};
use meridian_experiment::Experiment;
use meridian_harness::runner::{RunOptions, RunOutput, run_sim, run_text_with_faults};
use meridian_sim::{Completion, FaultAction, ScheduledFault, Sim, SimConfig};
use std::sync::Arc;

const MS: u64 = 1_000_000;

/// Three server regions (South Carolina, Finland, Brazil), each a full
/// copy of two shards; clients in each of them.
fn sim(seed: u64) -> Sim<Slog> {
    sim_with(seed, Params::new())
}

/// `sim` with these protocol parameters.
fn sim_with(seed: u64, params: Params) -> Sim<Slog> {
    try_sim(seed, params).unwrap()
}

fn try_sim(seed: u64, params: Params) -> Result<Sim<Slog>, String> {
    let matrix = LatencyMatrix::preset("tiga-gcp").unwrap();
    let spec = ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
        shards: 2,
        replicas_per_shard: 3,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
        clients_per_region: 1,
    };
    let topology = Arc::new(Topology::build(&spec, &Slog::services(&params)));
    let latency = Arc::new(matrix.clone());
    let cfg = SimConfig::ideal(seed, topology.clone(), matrix);
    Sim::new(cfg, Deployment { topology, params, epsilon_us: 100, latency })
}

fn layout(s: &Sim<Slog>) -> KeyLayout {
    s.topology().key_layout()
}

fn node(s: &Sim<Slog>, name: &str) -> NodeId {
    s.topology().node_by_name(name).unwrap()
}

fn client_in(s: &Sim<Slog>, region: usize) -> NodeId {
    let name = format!("client-{}-0", s.topology().region_name(s.topology().server_regions[region]));
    node(s, &name)
}

fn inc(keys: &[Key], tag: u64) -> Program {
    Program::new(
        keys.iter().enumerate().map(|(i, k)| Op::Increment { key: *k, delta: 1, tag: tag + i as u64 }).collect(),
    )
}

fn committed(done: &[Completion]) -> usize {
    done.iter().filter(|c| matches!(c.outcome, Outcome::Committed { .. })).count()
}

fn replica(s: &Sim<Slog>, n: NodeId) -> &meridian_deterministic::slog::Replica {
    match s.process(n) {
        Some(Node::Replica(r)) => r,
        _ => panic!("{} is not a live replica", s.topology().name(n)),
    }
}

fn sequencer(s: &Sim<Slog>, n: NodeId) -> &meridian_deterministic::slog::Sequencer {
    match s.process(n) {
        Some(Node::Sequencer(q)) => q,
        _ => panic!("{} is not a live sequencer", s.topology().name(n)),
    }
}

fn counter_at(s: &Sim<Slog>, n: NodeId, key: Key) -> i64 {
    match replica(s, n).store().get(&key).map(|v| &v.data) {
        Some(Data::Int(i)) => *i,
        _ => 0,
    }
}

/// Every region's copy of every shard holds the same state.
fn assert_regions_agree(s: &Sim<Slog>) {
    for shard in 0..s.topology().shards {
        let replicas = s.topology().replicas(ShardId(shard)).to_vec();
        let first = replica(s, replicas[0]);
        for r in &replicas[1..] {
            assert_eq!(replica(s, *r).store(), first.store(), "{} diverges", s.topology().name(*r));
            assert_eq!(replica(s, *r).headers(), first.headers(), "{} diverges", s.topology().name(*r));
            assert_eq!(replica(s, *r).running(), 0);
        }
    }
}

/// `key`'s counter in every region (asserting they agree).
fn counter(s: &Sim<Slog>, key: Key) -> i64 {
    let values: Vec<i64> =
        s.topology().replicas(s.topology().shard_of(key)).iter().map(|r| counter_at(s, *r, key)).collect();
    assert!(values.windows(2).all(|w| w[0] == w[1]), "{key:?}: {values:?}");
    values[0]
}

#[test]
fn figure_3_single_home_transactions_reach_the_same_state_in_every_region() {
    // Granule A is homed in region 0, B in region 1. T1 and T2 update A
    // (one batch at region 0), T3 and T4 update B (two batches at region 1).
    let mut s = sim(1);
    s.run_until(300 * MS);
    let l = layout(&s);
    let (a, b) = (l.key(0, 0, 0), l.key(1, 1, 0));
    let (c0, c1) = (client_in(&s, 0), client_in(&s, 1));
    s.request(c0, RequestId(1), inc(&[a], 10));
    s.request(c0, RequestId(2), inc(&[a], 20));
    s.request(c1, RequestId(3), inc(&[b], 30));
    s.run_until(s.now_ns() + 12 * MS);
    s.request(c1, RequestId(4), inc(&[b], 40));
    s.run_until(s.now_ns() + 2_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 4);
    assert_eq!((counter(&s, a), counter(&s, b)), (2, 2));
    assert_regions_agree(&s);
    assert_eq!(s.counters().get("single_home"), Some(&4));
    assert_eq!(s.counters().get("multi_home"), None);
    // Each region's global log keeps each local log's order (1-2 after 1-1).
    for region in 0..3 {
        let q = sequencer(
            &s,
            meridian_deterministic::slog::sequencer_in(s.topology(), s.topology().server_regions[region]),
        );
        let mine: Vec<u64> = q.global_log().filter(|id| id.region == 1).map(|id| id.seq).collect();
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "region {region}: {mine:?}");
    }
}

#[test]
fn a_single_home_transaction_commits_in_its_home_region_alone() {
    // SLOG §3.2: no wide-area round trip for a client next to its data's
    // home: batch (≤ 5 ms) + fsync + the reply inside the region.
    let mut s = sim(2);
    s.run_until(300 * MS);
    let l = layout(&s);
    for region in 0..3 {
        let c = client_in(&s, region);
        let start = s.now_ns();
        s.request(c, RequestId(region as u64), inc(&[l.key(0, region, 1), l.key(1, region, 1)], 100));
        s.run_until(start + 1_000 * MS);
        let done = s.take_completions();
        assert_eq!(committed(&done), 1);
        let latency_ms = (done[0].at_ns - start) / MS;
        assert!(latency_ms < 15, "region {region}: {latency_ms} ms");
    }
}

#[test]
fn figure_4_a_multi_home_transaction_locks_through_one_lock_only_txn_per_home() {
    // As Figure 3, but T2 updates A and B: it goes to the orderer, and
    // regions 0 and 1 (its homes) each insert a LockOnlyTxn; region 2
    // inserts none.
    let mut s = sim(3);
    s.run_until(300 * MS);
    let l = layout(&s);
    let (a, b) = (l.key(0, 0, 0), l.key(1, 1, 0));
    let (c0, c1) = (client_in(&s, 0), client_in(&s, 1));
    s.request(c0, RequestId(1), inc(&[a], 10));
    s.request(c0, RequestId(2), inc(&[a, b], 20));
    s.request(c1, RequestId(3), inc(&[b], 30));
    s.run_until(s.now_ns() + 12 * MS);
    s.request(c1, RequestId(4), inc(&[b], 40));
    s.run_until(s.now_ns() + 3_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 4);
    assert_eq!((counter(&s, a), counter(&s, b)), (2, 3));
    assert_regions_agree(&s);
    let counters = s.counters();
    assert_eq!(counters.get("multi_home"), Some(&1));
    assert_eq!(counters.get("single_home"), Some(&3));
    assert_eq!(counters.get("lock_only_txns"), Some(&2), "one per home, none at region 2");
}

#[test]
fn multi_home_transactions_in_opposite_orders_never_deadlock() {
    // Two clients each run transactions over A (home 0) and B (home 1),
    // listing them in opposite orders, many at once: the orderer puts them
    // in one order, so their LockOnlyTxns stand in that order at both homes.
    let mut s = sim(4);
    s.run_until(300 * MS);
    let l = layout(&s);
    let (a, b) = (l.key(0, 0, 7), l.key(1, 1, 7));
    let (c0, c1) = (client_in(&s, 0), client_in(&s, 1));
    for i in 0..20u64 {
        s.request(c0, RequestId(2 * i), inc(&[a, b], 1_000 + 10 * i));
        s.request(c1, RequestId(2 * i + 1), inc(&[b, a], 5_000 + 10 * i));
        s.run_until(s.now_ns() + 3 * MS);
    }
    s.run_until(s.now_ns() + 5_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 40);
    assert_eq!((counter(&s, a), counter(&s, b)), (40, 40));
    assert_regions_agree(&s);
}

/// Clients of every region increment keys of every home and both shards,
/// single- and multi-home alike.
fn load(s: &mut Sim<Slog>, rounds: u64) -> u64 {
    let l = layout(s);
    let clients: Vec<NodeId> = s.topology().clients().to_vec();
    let mut req = 0;
    for round in 0..rounds {
        for c in &clients {
            let home = (req % 3) as usize;
            let keys = if req % 4 == 0 {
                vec![l.key(0, home, req % 5), l.key(1, (home + 1) % 3, (req + round) % 4)]
            } else {
                vec![l.key(0, home, req % 5), l.key(1, home, (req + round) % 4)]
            };
            s.request(*c, RequestId(req), inc(&keys, 1_000 * (req + 1)));
            req += 1;
        }
        s.run_until(s.now_ns() + 17 * MS);
    }
    req
}

#[test]
fn a_crashed_replica_replays_its_regions_log_and_rejoins() {
    let mut s = sim(5);
    s.run_until(300 * MS);
    let victim = node(&s, "shard1-replica2");
    s.schedule(s.now_ns() + 100 * MS, FaultAction::Crash(victim));
    s.schedule(s.now_ns() + 1_200 * MS, FaultAction::Restart(victim));
    let n = load(&mut s, 40);
    s.run_until(s.now_ns() + 8_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), n as usize);
    assert_regions_agree(&s);
}

#[test]
fn a_client_whose_home_replica_is_down_hears_its_outcome_from_another_region() {
    // Every region executes the home's local log to the same outcome
    // (§3.2), so while the home region's copy of shard 0 is down, another
    // region's copy answers the client of a single-home transaction.
    let mut s = sim(9);
    s.run_until(300 * MS);
    let victim = node(&s, "shard0-replica0");
    assert_eq!(s.topology().region_of(victim), s.topology().server_regions[0]);
    s.schedule(s.now_ns() + 10 * MS, FaultAction::Crash(victim));
    s.run_until(s.now_ns() + 100 * MS);
    let l = layout(&s);
    let c = client_in(&s, 0);
    for i in 0..4 {
        s.request(c, RequestId(i), inc(&[l.key(0, 0, i), l.key(1, 0, i)], 500 + 10 * i));
    }
    s.run_until(s.now_ns() + 8_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 4, "answered while the home region's replica is down");
    assert_eq!(s.counters().get("single_home"), None, "the answering replica never ran them");
    s.schedule(s.now_ns(), FaultAction::Restart(victim));
    s.run_until(s.now_ns() + 4_000 * MS);
    assert_regions_agree(&s);
    assert_eq!(counter(&s, l.key(0, 0, 0)), 1, "the restarted replica replayed them");
}

#[test]
fn a_crashed_sequencer_restarts_from_its_durable_logs_without_divergence() {
    let mut s = sim(6);
    s.run_until(300 * MS);
    // The orderer's region: multi-home transactions wait for it too.
    let victim = node(&s, "sequencer-south-carolina");
    s.schedule(s.now_ns() + 150 * MS, FaultAction::Crash(victim));
    s.schedule(s.now_ns() + 1_000 * MS, FaultAction::Restart(victim));
    let n = load(&mut s, 40);
    s.run_until(s.now_ns() + 10_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), n as usize, "clients retry what the crash lost");
    assert_regions_agree(&s);
}

#[test]
fn a_regions_paxos_leader_crashes_and_its_group_carries_on_with_no_commit_lost() {
    // SLOG §3.1: the local log is Paxos-replicated inside the region. The
    // orderer region's leading sequencer dies for good under load: the two
    // others elect a leader, which ships what the group had chosen and
    // goes on; clients resubmit what the crash lost.
    let mut s = sim(11);
    s.run_until(300 * MS);
    let victim = node(&s, "sequencer-south-carolina");
    assert!(sequencer(&s, victim).is_leader());
    s.schedule(s.now_ns() + 150 * MS, FaultAction::Crash(victim));
    let n = load(&mut s, 40);
    s.run_until(s.now_ns() + 10_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), n as usize, "every transaction commits");
    assert_eq!(s.counters().get("sequencer_takeovers"), Some(&1), "one member took over");
    let group = meridian_deterministic::slog::group_in(s.topology(), RegionId(0));
    let leaders: Vec<NodeId> = group[1..].iter().copied().filter(|m| sequencer(&s, *m).is_leader()).collect();
    assert_eq!(leaders.len(), 1, "one of the survivors leads");
    assert_regions_agree(&s);
    // The new leader serves the region as the old one did: a single-home
    // transaction near its home still commits without a wide-area trip.
    let l = layout(&s);
    let start = s.now_ns();
    s.request(client_in(&s, 0), RequestId(10_000), inc(&[l.key(0, 0, 1), l.key(1, 0, 1)], 77_000));
    s.run_until(start + 1_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 1);
    assert!((done[0].at_ns - start) / MS < 15, "{} ms", (done[0].at_ns - start) / MS);
}

#[test]
fn a_region_partitioned_away_catches_up_after_the_heal() {
    let mut s = sim(7);
    s.run_until(300 * MS);
    let brazil: Vec<NodeId> = (0..s.topology().nodes.len() as u32)
        .map(NodeId)
        .filter(|n| s.topology().region_name(s.topology().region_of(*n)) == "brazil")
        .collect();
    s.schedule(s.now_ns() + 100 * MS, FaultAction::Partition(brazil));
    s.schedule(s.now_ns() + 2_000 * MS, FaultAction::Heal);
    let n = load(&mut s, 40);
    s.run_until(s.now_ns() + 10_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), n as usize);
    assert_regions_agree(&s);
}

fn transfer(from: Key, to: Key, amount: Key, tag: u64) -> Program {
    use meridian_core::procedure::{Procedure, Transfer};
    Program::procedure(Procedure::Transfer(Transfer { from, to, amount, tag }))
}

#[test]
fn transfers_needing_reconnaissance_commit_single_and_multi_home_and_conserve_the_total() {
    // SLOG uses Calvin's OLLP (§1): a transfer's amount is read on another
    // shard, so a pass finds its keys first; each transfer moves the amount
    // it reads at its turn, and the accounts' sum stays what it was, in
    // every region.
    let mut s = sim(15);
    s.run_until(300 * MS);
    let l = layout(&s);
    let clients: Vec<NodeId> = s.topology().clients().to_vec();
    let account = |i: u64| l.key((i % 2) as u32, (i % 3) as usize, i / 6);
    let amount = |i: u64| l.key(1, (i % 3) as usize, 50 + i % 2);
    let mut req = 0u64;
    for round in 0..20u64 {
        for (c, client) in clients.iter().enumerate() {
            let tag = 10_000 * (req + 1);
            let program = if c == 2 && round % 2 == 0 {
                let value = meridian_core::Value::int(tag, (round % 7) as i64);
                Program::new(vec![Op::Write { key: amount(round / 2), value }])
            } else {
                let from = (req * 5 + round) % 6;
                transfer(account(from), account((from + 1 + req % 5) % 6), amount(req), tag)
            };
            s.request(*client, RequestId(req), program);
            req += 1;
        }
        s.run_until(s.now_ns() + 37 * MS);
    }
    s.run_until(s.now_ns() + 20_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done) as u64, req, "every request commits");
    assert!(s.counters().get("recon_reads").copied().unwrap_or(0) > 0);
    assert_eq!(s.counters().get("recon_aborts"), None, "a transfer's keys never change, whatever its amount");
    assert!(s.counters().get("multi_home").copied().unwrap_or(0) > 0, "some spanned homes");
    assert_regions_agree(&s);
    let total: i64 = (0..6).map(|i| counter(&s, account(i))).sum();
    assert_eq!(total, 0, "money is neither made nor lost");
}

#[test]
fn an_index_changed_after_the_pass_aborts_the_update_in_every_region_and_a_new_pass_follows_it() {
    // The update's key depends on what an index (homed in South Carolina)
    // names; the index is pointed elsewhere between the pass and the
    // update's turn: every region aborts it alike, and the new pass
    // updates the key the index names now, once.
    use meridian_core::procedure::{Indirect, Procedure};
    let mut s = sim(16);
    s.run_until(300 * MS);
    let l = layout(&s);
    let (index, old, new) = (l.key(1, 0, 7), l.key(0, 0, 3), l.key(0, 0, 4));
    let (a, b) = (client_in(&s, 0), client_in(&s, 0));
    let point =
        |k: Key, tag| Program::new(vec![Op::Write { key: index, value: meridian_core::Value::int(tag, k.0 as i64) }]);
    s.request(a, RequestId(1), point(old, 900));
    s.run_until(s.now_ns() + 500 * MS);
    s.request(b, RequestId(2), point(new, 901));
    let update = Program::procedure(Procedure::Indirect(Indirect { index, delta: 7, tag: 1_000 }));
    s.request(a, RequestId(3), update);
    s.run_until(s.now_ns() + 4_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 3, "{done:?}");
    assert_eq!(s.counters().get("recon_aborts"), Some(&1));
    assert_eq!(s.counters().get("recon_restarts"), Some(&1));
    assert_regions_agree(&s);
    assert_eq!((counter(&s, old), counter(&s, new)), (0, 7));
}

const RUN: &str = r#"
[cluster]
preset = "tiga-gcp"
server_regions = ["south-carolina", "finland", "brazil"]
shards = 2
replicas_per_shard = 3
leaders = "colocated"

[clients]
regions = ["south-carolina", "finland", "brazil", "hong-kong"]
per_region = 2
mode = "open"
rate_tps = 15
max_outstanding = 32

[workload]
kind = "list-append"
keys_per_shard = 30
ops_per_txn = 3

[run]
duration_s = 8.0
warmup_s = 1.0
seed = 7

[protocol]
name = "slog"
"#;

fn run(text: &str) -> RunOutput {
    let exp = Experiment::from_str(text, "<test>").unwrap();
    let opts = RunOptions { record_history: true, extra_faults: None, progress: None, event_log: None };
    run_sim::<Slog>(&exp, opts).unwrap()
}

#[test]
fn a_contended_list_append_run_is_strictly_serializable_and_its_copies_agree() {
    let out = run(RUN);
    assert_eq!(out.report.check_valid(), Some(true), "{:?}", out.report.check);
    assert!(out.report.txns.committed > 100, "{:?}", out.report.txns);
    let counters = &out.report.counters;
    assert!(counters.get("multi_home").copied().unwrap_or(0) > 0, "{counters:?}");
    assert!(counters.get("single_home").copied().unwrap_or(0) > 0, "{counters:?}");
    let copies = out.report.copies.as_ref().expect("slog's copies are compared");
    assert!(copies.diverged.is_empty() && copies.agreeing == 6, "{copies:?}");
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    assert_eq!(run(RUN).trace_hash, run(RUN).trace_hash);
}

/// Three regions as `sim`, remastering a granule after one access from
/// another region; `remaster_wait` as given.
fn sim_remastering(seed: u64, remaster_wait: bool) -> Sim<Slog> {
    use meridian_core::ParamValue;
    let params =
        Params::new().with("remaster_after", ParamValue::Int(1)).with("remaster_wait", ParamValue::Bool(remaster_wait));
    sim_with(seed, params)
}

/// SLOG Figure 5: granule B, homed in Finland, is remastered to South
/// Carolina after South Carolina's client touches it (T1); the same client
/// then updates B again (T3), now annotated with South Carolina as home.
/// Brazil's sequencer is cut off meanwhile, and after the heal receives
/// South Carolina's batch (T3) before Finland's (the remaster): the two
/// local logs interleave differently there. Returns B in each region.
fn figure_5_schedule(remaster_wait: bool) -> (Vec<i64>, Sim<Slog>) {
    let mut s = sim_remastering(8, remaster_wait);
    s.run_until(300 * MS);
    let l = layout(&s);
    let b = l.key(0, 1, 0);
    let c0 = client_in(&s, 0);
    let brazil = node(&s, "sequencer-brazil");
    let t0 = s.now_ns();
    s.request(c0, RequestId(1), inc(&[b], 10));
    s.schedule(t0 + 20 * MS, FaultAction::Partition(vec![brazil]));
    s.run_until(t0 + 200 * MS);
    s.request(c0, RequestId(3), inc(&[b], 30));
    s.schedule(t0 + 400 * MS, FaultAction::Heal);
    s.run_until(t0 + 4_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 2, "{done:?}");
    assert_eq!(s.counters().get("remasters"), Some(&1));
    let values = s.topology().replicas(s.topology().shard_of(b)).iter().map(|r| counter_at(&s, *r, b)).collect();
    (values, s)
}

#[test]
fn figure_5_a_transaction_relying_on_a_remaster_waits_for_it_and_every_region_ends_identical() {
    let (values, s) = figure_5_schedule(true);
    assert_eq!(values, vec![2, 2, 2]);
    assert_regions_agree(&s);
    let moved = replica(&s, node(&s, "shard0-replica2")).header(layout(&s).key(0, 1, 0));
    assert_eq!((moved.home, moved.counter), (RegionId(0), 1), "Brazil applied the remaster too");
}

#[test]
fn figure_5_without_the_wait_regions_diverge_and_the_state_comparison_catches_it() {
    let (values, s) = figure_5_schedule(false);
    assert_eq!(values, vec![2, 2, 1], "Brazil placed T3 before the remaster and aborted it alone");
    let copies = meridian_harness::runner::compare_copies(&s).expect("slog's copies are compared");
    assert_eq!(copies.diverged.len(), 1, "{copies:?}");
    assert!(copies.diverged[0].contains("shard0-replica2"), "{copies:?}");
}

#[test]
fn a_granule_accessed_three_times_from_another_region_is_remastered_there_and_then_commits_locally() {
    // §3.4, PNUTS's heuristic at its default (3): Finland's client updates
    // a granule homed in South Carolina; after three such accesses it
    // moves to Finland, where the client's next update commits without a
    // wide-area round trip (the first one after the move may miss in the
    // Lookup Master and restart).
    let mut s = sim(9);
    s.run_until(300 * MS);
    let a = layout(&s).key(0, 0, 5);
    let c1 = client_in(&s, 1);
    let mut latencies_ms = Vec::new();
    for i in 0..6u64 {
        let start = s.now_ns();
        s.request(c1, RequestId(i), inc(&[a], 10 * i));
        s.run_until(start + 1_500 * MS);
        let done = s.take_completions();
        assert_eq!(committed(&done), 1);
        latencies_ms.push((done[0].at_ns - start) / MS);
    }
    assert_eq!(s.counters().get("remasters"), Some(&1));
    assert!(latencies_ms[..3].iter().all(|l| *l > 100), "{latencies_ms:?}: homed across the Atlantic");
    assert!(latencies_ms[5] < 15, "{latencies_ms:?}: homed at the client's region");
    assert_eq!(counter(&s, a), 6);
    assert_regions_agree(&s);
    let moved = replica(&s, node(&s, "shard0-replica0")).header(a);
    assert_eq!((moved.home, moved.counter), (RegionId(1), 1));
}

#[test]
fn figure_11_one_scheduled_remaster_moves_its_granule_once_and_its_old_regions_client_follows_it() {
    // SLOG §4.1.1, Figure 11: one record remastered under load at a chosen
    // time (`remaster_at`), with the PNUTS trigger off. South Carolina's
    // client updates its own granule before and after it moves to Finland:
    // after the move its update is annotated with the old home, aborted and
    // resubmitted (a lookup miss) or sent to Finland once its Lookup Master
    // learned, and commits there.
    use meridian_core::ParamValue;
    let a = KeyLayout { shards: 2, homes: vec![RegionId(0), RegionId(1), RegionId(2)] }.key(0, 0, 5);
    let finland = LatencyMatrix::preset("tiga-gcp").unwrap().regions[1].clone();
    let params = Params::new()
        .with("remaster", ParamValue::Bool(false))
        .with("remaster_at", ParamValue::Str(format!("{}:{finland}:1000", a.0)));
    let mut s = sim_with(3, params);
    let c0 = client_in(&s, 0);
    let mut latencies_ms = Vec::new();
    for i in 0..4u64 {
        let start = (300 + 500 * i) * MS;
        s.run_until(start);
        s.request(c0, RequestId(i), inc(&[a], 10 * i));
        s.run_until(start + 450 * MS);
        let done = s.take_completions();
        assert_eq!(committed(&done), 1, "{done:?}");
        latencies_ms.push((done[0].at_ns - start) / MS);
    }
    assert_eq!(s.counters().get("remasters_asked"), Some(&1));
    assert_eq!(s.counters().get("remasters"), Some(&1), "asked once, moved once");
    assert!(latencies_ms[..2].iter().all(|l| *l < 15), "{latencies_ms:?}: homed at the client's region");
    assert!(latencies_ms[3] > 50, "{latencies_ms:?}: homed in Finland now");
    assert_eq!(counter(&s, a), 4);
    assert_regions_agree(&s);
    for r in s.topology().replicas(ShardId(0)).to_vec() {
        let moved = replica(&s, r).header(a);
        assert_eq!((moved.home, moved.counter), (RegionId(1), 1), "at {r:?}");
    }
}

#[test]
fn bad_remaster_at_values_are_refused_naming_the_parameter_and_the_field() {
    use meridian_core::ParamValue;
    for (bad, why) in [
        ("5", "not three fields"),
        ("x:finland:10", "KEY"),
        ("0:atlantis:10", "`atlantis` is not a server region"),
        ("0:finland:-1", "MS"),
    ] {
        let params = Params::new().with("remaster_at", ParamValue::Str(bad.into()));
        let err = try_sim(1, params).err().unwrap_or_else(|| panic!("{bad} accepted"));
        assert!(err.contains("`remaster_at`") && err.contains(why), "{bad}: {err}");
    }
}

/// SLOG-HA: Finland's local log is replicated to South Carolina (its
/// nearest region) before anyone runs it. Finland, cut off with only South
/// Carolina's sequencers, commits transactions on its own granules; then it
/// is lost for good. Every transaction its client was told committed is in
/// South Carolina's and Brazil's copies, the same in both.
#[test]
fn slog_ha_survives_the_loss_of_a_region_with_no_acknowledged_commit_lost() {
    use meridian_core::ParamValue;
    let matrix = LatencyMatrix::preset("tiga-gcp").unwrap();
    let spec = ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
        shards: 2,
        replicas_per_shard: 3,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
        clients_per_region: 1,
    };
    let params = Params::new().with("ha", ParamValue::Bool(true)).with("remaster", ParamValue::Bool(false));
    let topology = Arc::new(Topology::build(&spec, &Slog::services(&params)));
    let cfg = SimConfig::ideal(10, topology.clone(), matrix.clone());
    let mut s: Sim<Slog> =
        Sim::new(cfg, Deployment { topology, params, epsilon_us: 100, latency: Arc::new(matrix) }).unwrap();
    s.run_until(300 * MS);
    let l = layout(&s);
    let finland: Vec<NodeId> = (0..s.topology().nodes.len() as u32)
        .map(NodeId)
        .filter(|n| s.topology().region_name(s.topology().region_of(*n)) == "finland")
        .collect();
    // Finland and its pair's sequencer group (South Carolina's).
    let mut island = finland.clone();
    island.extend(meridian_deterministic::slog::group_in(s.topology(), RegionId(0)));
    s.schedule(s.now_ns() + 10 * MS, FaultAction::Partition(island));
    s.run_until(s.now_ns() + 20 * MS);
    let c1 = client_in(&s, 1);
    let keys = [l.key(0, 1, 1), l.key(1, 1, 2)];
    for i in 0..10u64 {
        s.request(c1, RequestId(i), inc(&keys, 100 * i));
        s.run_until(s.now_ns() + 40 * MS);
    }
    s.run_until(s.now_ns() + 500 * MS);
    let done = s.take_completions();
    let acknowledged = committed(&done) as i64;
    assert!(acknowledged >= 8, "Finland commits with its pair alone: {done:?}");
    for n in &finland {
        s.schedule(s.now_ns(), FaultAction::Crash(*n));
    }
    s.schedule(s.now_ns() + 10 * MS, FaultAction::Heal);
    s.run_until(s.now_ns() + 5_000 * MS);
    for k in keys {
        for survivor in ["south-carolina", "brazil"] {
            let shard = s.topology().shard_of(k);
            let region = s.topology().server_regions.iter().copied().find(|r| s.topology().region_name(*r) == survivor);
            let r = s.topology().replicas_in(shard, region.unwrap())[0];
            assert_eq!(counter_at(&s, r, k), acknowledged, "{survivor} holds every acknowledged commit of {k:?}");
        }
    }
}

#[test]
fn a_snapshot_read_is_served_by_its_region_alone_and_may_be_stale() {
    // SLOG §3.1: a snapshot read-only transaction reads the local copy of
    // data mastered elsewhere, without a wide-area round trip; it is
    // serializable, not strict: Brazil may not have Finland's latest batch.
    let mut s = sim(11);
    s.run_until(300 * MS);
    let b = layout(&s).key(0, 1, 3);
    let (c1, c2) = (client_in(&s, 1), client_in(&s, 2));
    s.request(c1, RequestId(1), inc(&[b], 10));
    s.run_until(s.now_ns() + 30 * MS);
    assert_eq!(committed(&s.take_completions()), 1, "committed in Finland");
    let start = s.now_ns();
    let read = |mode| Program::new(vec![Op::Read { key: b }]).with_mode(mode);
    s.request(c2, RequestId(2), read(meridian_core::ReadMode::Snapshot));
    s.run_until(start + 20 * MS);
    let done = s.take_completions();
    assert_eq!(done.len(), 1);
    assert!((done[0].at_ns - start) / MS < 5, "served in Brazil");
    let Outcome::Committed { results } = &done[0].outcome else { panic!("{done:?}") };
    assert_eq!(results[0], None, "Brazil has not yet applied Finland's batch: a stale, consistent snapshot");
    s.request(c2, RequestId(3), read(meridian_core::ReadMode::Strict));
    s.run_until(s.now_ns() + 1_000 * MS);
    let done = s.take_completions();
    let Outcome::Committed { results } = &done[0].outcome else { panic!("{done:?}") };
    assert!(matches!(results[0].as_ref().map(|v| &v.data), Some(Data::Int(1))), "a strict read goes to the home");
    assert_eq!(s.counters().get("snapshot_reads"), Some(&1));
}

#[test]
fn a_run_with_snapshot_reads_checks_them_serializable_and_the_rest_strictly() {
    let text = RUN.replace(
        "kind = \"list-append\"\nkeys_per_shard = 30\nops_per_txn = 3",
        "kind = \"slog-ycsb\"\nkeys_per_shard = 2000\nhot_set = 10\nrecords_per_txn = 4\nmulti_home_pct = 20.0\nmulti_partition_pct = 50.0\nread_ratio = 0.3\nsnapshot_reads = true",
    );
    let out = run(&text);
    assert_eq!(out.report.check_valid(), Some(true), "{:?}", out.report.check);
    assert!(out.report.counters.get("snapshot_reads").copied().unwrap_or(0) > 50, "{:?}", out.report.counters);
    assert!(out.report.latency_ms_by_type.contains_key("snapshot-read"), "reported apart");
}

/// Snapshot reads once took locks on several homes' granules at one place
/// of a region's log, and could wait for a multi-home transaction while
/// holding what its later LockOnlyTxn needed: with SLOG-HA, snapshot reads
/// and granules remastered under load, transactions stalled for good. A
/// snapshot read now spans one home; every transaction of the run finishes
/// and every copy ends quiescent and identical.
#[test]
fn snapshot_reads_remastering_and_slog_ha_together_leave_no_transaction_stalled() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../examples/slog-ha-remastering.toml");
    let exp = Experiment::load(&path).unwrap();
    let opts = RunOptions { record_history: true, extra_faults: None, progress: None, event_log: None };
    let out = run_sim::<Slog>(&exp, opts).unwrap();
    assert_eq!(out.report.check_valid(), Some(true), "{:?}", out.report.check);
    assert_eq!(out.report.txns.unknown, 0, "{:?}", out.report.txns);
    let copies = out.report.copies.as_ref().unwrap();
    assert!(copies.compared == copies.replicas && copies.diverged.is_empty(), "{copies:?}");
    assert!(out.report.counters.get("remasters").copied().unwrap_or(0) > 100, "{:?}", out.report.counters);
    assert!(out.report.counters.get("snapshot_reads").copied().unwrap_or(0) > 100, "{:?}", out.report.counters);
}

/// `RUN` for `duration_s` with `replicas_per_shard` copies, the logs
/// forgotten as soon as allowed: replicas checkpoint every 30 transactions
/// (their store's 30 keys) and the groups' Paxos logs are checkpointed
/// every 32 slots.
fn truncating(duration_s: u64, replicas_per_shard: u32) -> String {
    RUN.replace("duration_s = 8.0", &format!("duration_s = {duration_s}.0\ndrain_s = 12.0"))
        .replace("replicas_per_shard = 3", &format!("replicas_per_shard = {replicas_per_shard}"))
        + "[protocol.params]\ncheckpoint_txns = 20\ncheckpoint_every_slots = 32\nreads_kept = 64\n"
}

#[test]
fn a_long_slog_run_holds_a_bounded_log() {
    let out = run_text_with_faults::<Slog>(&truncating(40, 3), &|_| Vec::new());
    assert_eq!(out.report.check_valid(), Some(true), "{:?}", out.report.check);
    // Each region's global log takes every local log's batches, one a
    // `batch_ms` from each region: far more than any structure below.
    assert!(out.report.counter("positions_forgotten") > 3 * 1_000, "{:?}", out.report.counters);
    assert!(out.report.counter("batches_forgotten") > 1_000, "{:?}", out.report.counters);
    // Kept: the positions since the region's copies' last durable
    // checkpoints (30 transactions apart), and the batches not yet placed
    // in every region (a wide-area delay's worth).
    for structure in ["global_log", "placed_index", "local_log", "paxos_slots"] {
        assert!(out.report.state_peak(structure) < 400, "{structure}: {:?}", out.report.state_peaks);
    }
    let copies = out.report.copies.as_ref().expect("slog's copies are compared");
    assert!(copies.diverged.is_empty() && copies.agreeing == 6, "{copies:?}");
    // A replica keeps the reads it sent while its region is not durably
    // past them, past `reads_kept` (64): a checkpoint's worth or so, not
    // the run's thousands (`reads_sent`, over six replicas).
    assert!(out.report.counter("reads_sent") > 6 * 1_000, "{:?}", out.report.counters);
    assert!(out.report.state_peak("reads_kept") < 300, "{:?}", out.report.state_peaks);
}

#[test]
fn a_replica_behind_every_peers_truncation_point_catches_up_from_a_checkpoint() {
    // Two copies of each shard per region. South Carolina's first copy of
    // shard 0 is down from 3 s to 15 s: the region's group forgets the
    // positions before its other copy's checkpoints meanwhile, so it comes
    // back to `Truncated` and installs that copy's checkpoint (another
    // region's would not do: its global log interleaves differently).
    let faults = |t: &Topology| {
        let victim = t.node_by_name("shard0-replica0").unwrap();
        vec![
            ScheduledFault { at_ns: 3_000 * MS, action: FaultAction::Crash(victim) },
            ScheduledFault { at_ns: 15_000 * MS, action: FaultAction::Restart(victim) },
        ]
    };
    let out = run_text_with_faults::<Slog>(&truncating(25, 6), &faults);
    assert_eq!(out.report.check_valid(), Some(true), "{:?}", out.report.check);
    assert!(out.report.counter("log_truncated") > 0, "{:?}", out.report.counters);
    assert!(out.report.counter("checkpoints_sent") > 0, "{:?}", out.report.counters);
    assert!(out.report.counter("checkpoints_installed") > 0, "{:?}", out.report.counters);
    let copies = out.report.copies.as_ref().expect("slog's copies are compared");
    assert!(copies.diverged.is_empty() && copies.agreeing == 12, "the restarted copy agrees: {copies:?}");
}
