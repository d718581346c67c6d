//! `calvin` under the simulator: the claims of its module documentation —
//! one global log executed to the same state in every region, reads
//! exchanged instead of two-phase commit, replay after a crash, more than
//! one wide-area round trip per commit — and whole runs checked at strict
//! serializability, deterministic per seed.

use meridian_core::{
    ClusterSpec, Data, Deployment, Key, LatencyMatrix, LeaderPlacement, NodeId, Op, Outcome, Params, Program, Protocol,
    RegionId, RequestId, ShardId, Topology,
};
use meridian_deterministic::calvin::{Calvin, Node};
use meridian_experiment::Experiment;
use meridian_harness::runner::{RunOptions, RunOutput, run_sim, run_text_with_faults};
use meridian_sim::{Completion, FaultAction, ScheduledFault, Sim, SimConfig};
use std::sync::Arc;

const MS: u64 = 1_000_000;

fn sim(seed: u64) -> Sim<Calvin> {
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
    let params = Params::new();
    let topology = Arc::new(Topology::build(&spec, &Calvin::services(&params)));
    let latency = Arc::new(matrix.clone());
    let cfg = SimConfig::ideal(seed, topology.clone(), matrix);
    Sim::new(cfg, Deployment { topology, params, epsilon_us: 100, latency }).unwrap()
}

fn node(s: &Sim<Calvin>, name: &str) -> NodeId {
    s.topology().node_by_name(name).unwrap()
}

fn inc(keys: &[u64], tag: u64) -> Program {
    Program::new(
        keys.iter().enumerate().map(|(i, k)| Op::Increment { key: Key(*k), delta: 1, tag: tag + i as u64 }).collect(),
    )
}

fn committed(done: &[Completion]) -> usize {
    done.iter().filter(|c| matches!(c.outcome, Outcome::Committed { .. })).count()
}

fn replica(s: &Sim<Calvin>, n: NodeId) -> &meridian_deterministic::calvin::Replica {
    match s.process(n) {
        Some(Node::Replica(r)) => r,
        _ => panic!("{} is not a live replica", s.topology().name(n)),
    }
}

fn counter(s: &Sim<Calvin>, n: NodeId, key: Key) -> i64 {
    match replica(s, n).store().get(&key).map(|v| &v.data) {
        Some(Data::Int(i)) => *i,
        _ => 0,
    }
}

/// Every replica of every shard holds the same state.
fn assert_regions_agree(s: &Sim<Calvin>) {
    for shard in 0..s.topology().shards {
        let replicas = s.topology().replicas(ShardId(shard)).to_vec();
        let first = replica(s, replicas[0]).store().clone();
        for r in &replicas[1..] {
            assert_eq!(replica(s, *r).store(), &first, "{} diverges", s.topology().name(*r));
        }
    }
}

/// Every client sends `rounds` increments over keys of all three shards,
/// with overlapping keys so that they conflict.
fn load(s: &mut Sim<Calvin>, rounds: u64) -> u64 {
    let clients: Vec<NodeId> = s.topology().clients().to_vec();
    let mut req = 0;
    for round in 0..rounds {
        for c in &clients {
            let keys = [req % 6, 3 + req % 5, 7 + (req + round) % 3];
            s.request(*c, RequestId(req), inc(&keys, 1_000 * (req + 1)));
            req += 1;
        }
        s.run_until(s.now_ns() + 23 * MS);
    }
    req
}

#[test]
fn every_region_executes_the_global_log_to_the_same_state() {
    let mut s = sim(1);
    s.run_until(300 * MS);
    let n = load(&mut s, 20);
    s.run_until(s.now_ns() + 5_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), n as usize, "every transaction commits: Calvin never aborts");
    assert_regions_agree(&s);
    // Each transaction increments three distinct keys once.
    let total: i64 =
        (0..10).map(|k| counter(&s, s.topology().replicas(s.topology().shard_of(Key(k)))[1], Key(k))).sum();
    assert_eq!(total, 3 * n as i64, "no increment lost or doubled");
}

#[test]
fn a_multi_partition_transaction_exchanges_reads_and_needs_no_two_phase_commit() {
    let mut s = sim(2);
    s.run_until(300 * MS);
    let c = node(&s, "client-finland-0");
    s.request(c, RequestId(1), inc(&[0, 1, 2], 10));
    s.run_until(s.now_ns() + 3_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 1);
    let counters = s.counters();
    assert_eq!(counters.get("multi_partition"), Some(&1));
    // Three participants in each of three regions, each sending its reads
    // to the two others of its region: 18 messages, and no votes.
    assert_eq!(counters.get("reads_sent"), Some(&18));
    assert_regions_agree(&s);
    let Outcome::Committed { results } = &done[0].outcome else { unreachable!() };
    assert_eq!(results.len(), 3, "one result per operation, from the answering replica");
}

#[test]
fn commit_latency_exceeds_one_wide_area_round_trip_wherever_the_client_is() {
    // The client in South Carolina: batch (≤ 10 ms), store at a majority
    // (SC–FI 114 ms), order at the co-located leader (SC–FI 114 ms): more
    // than one WRTT even where the leader is.
    let mut s = sim(3);
    s.run_until(300 * MS);
    let c = node(&s, "client-south-carolina-0");
    let start = s.now_ns();
    s.request(c, RequestId(1), inc(&[0, 1], 20));
    s.run_until(start + 3_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 1);
    let latency_ms = (done[0].at_ns - start) / MS;
    assert!((228..400).contains(&latency_ms), "latency {latency_ms} ms");
}

#[test]
fn a_crashed_replica_replays_the_log_and_rejoins() {
    let mut s = sim(4);
    s.run_until(300 * MS);
    let victim = node(&s, "shard1-replica2");
    s.schedule(s.now_ns() + 200 * MS, FaultAction::Crash(victim));
    s.schedule(s.now_ns() + 1_500 * MS, FaultAction::Restart(victim));
    let n = load(&mut s, 40);
    s.run_until(s.now_ns() + 8_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), n as usize, "answers come from the live replicas");
    assert_regions_agree(&s);
    assert_eq!(replica(&s, victim).running(), 0, "it caught up");
}

#[test]
fn a_client_whose_regions_replica_is_down_hears_its_outcome_from_another_region() {
    // Every region executes the same global log to the same results, so
    // while South Carolina's copy of shard 0 is down (and its region's
    // transactions on it wait), another region's copy answers the client.
    let mut s = sim(8);
    s.run_until(300 * MS);
    let victim = node(&s, "shard0-replica0");
    assert_eq!(s.topology().region_of(victim), RegionId(0));
    s.schedule(s.now_ns() + 10 * MS, FaultAction::Crash(victim));
    s.run_until(s.now_ns() + 100 * MS);
    let c = node(&s, "client-south-carolina-0");
    let shard0: Vec<u64> = (0..60).filter(|k| s.topology().shard_of(Key(*k)) == ShardId(0)).take(4).collect();
    for (i, k) in shard0.iter().enumerate() {
        s.request(c, RequestId(i as u64), inc(&[*k, k + 1], 500 + 10 * i as u64));
    }
    s.run_until(s.now_ns() + 8_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), shard0.len(), "answered while the region's replica is down");
    assert!(s.counters().get("retries").copied().unwrap_or(0) > 0, "after a retry asked the other regions");
    s.schedule(s.now_ns(), FaultAction::Restart(victim));
    s.run_until(s.now_ns() + 4_000 * MS);
    assert_regions_agree(&s);
    assert_eq!(counter(&s, victim, Key(shard0[0])), 1, "the restarted replica replayed them");
}

#[test]
fn a_crashed_sequencer_is_replaced_as_the_global_logs_leader() {
    let mut s = sim(5);
    s.run_until(300 * MS);
    let leader = node(&s, "sequencer-south-carolina");
    s.schedule(s.now_ns() + 100 * MS, FaultAction::Crash(leader));
    s.run_until(s.now_ns() + 3_000 * MS);
    let c = node(&s, "client-finland-0");
    s.request(c, RequestId(1), inc(&[0, 1, 2], 30));
    s.run_until(s.now_ns() + 4_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 1, "the other two sequencers elect a leader and order the batch");
    s.schedule(s.now_ns(), FaultAction::Restart(leader));
    s.run_until(s.now_ns() + 3_000 * MS);
    assert_regions_agree(&s);
}

fn transfer(from: u64, to: u64, amount: u64, tag: u64) -> Program {
    use meridian_core::procedure::{Procedure, Transfer};
    Program::procedure(Procedure::Transfer(Transfer { from: Key(from), to: Key(to), amount: Key(amount), tag }))
}

/// Keys 0, 1, 2 are on three different shards (key modulo 3).
fn set(key: u64, value: i64, tag: u64) -> Program {
    Program::new(vec![Op::Write { key: Key(key), value: meridian_core::Value::int(tag, value) }])
}

#[test]
fn a_procedure_whose_writes_depend_on_another_shards_read_commits_after_a_reconnaissance_pass() {
    // Calvin §3.2.1 (OLLP): the transfer's amount is read on a third
    // shard; a read-only pass finds its keys and versions, then it is
    // ordered and every participant runs it on the exchanged reads.
    let mut s = sim(12);
    s.run_until(300 * MS);
    let c = node(&s, "client-finland-0");
    s.request(c, RequestId(1), set(2, 30, 900));
    s.run_until(s.now_ns() + 1_000 * MS);
    s.request(c, RequestId(2), transfer(0, 1, 2, 1_000));
    s.run_until(s.now_ns() + 2_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 2);
    assert!(s.counters().get("recon_reads").copied().unwrap_or(0) >= 3, "a pass read from, to and amount");
    assert_eq!(s.counters().get("recon_aborts"), None, "nothing changed under it");
    for r in s.topology().replicas(ShardId(0)).to_vec() {
        assert_eq!(counter(&s, r, Key(0)), -30, "every region moved the amount read");
    }
    assert_eq!(counter(&s, s.topology().replicas(ShardId(1))[2], Key(1)), 30);
}

fn through_index(index: u64, delta: i64, tag: u64) -> Program {
    use meridian_core::procedure::{Indirect, Procedure};
    Program::procedure(Procedure::Indirect(Indirect { index: Key(index), delta, tag }))
}

#[test]
fn an_index_changed_after_the_pass_aborts_the_update_at_every_participant_and_a_new_pass_follows_it() {
    // Calvin's OLLP: the update's key depends on what index key 5 names.
    // Its pass sees key 3; the index is pointed at key 4 before the
    // update's turn, so every participant finds it would touch another key
    // and aborts alike; the client's new pass updates key 4, once.
    let mut s = sim(13);
    s.run_until(300 * MS);
    let (a, b) = (node(&s, "client-south-carolina-0"), node(&s, "client-south-carolina-1"));
    s.request(a, RequestId(1), set(5, 3, 900));
    s.run_until(s.now_ns() + 1_000 * MS);
    // Ordered before the update (the same batch, first), after its pass.
    s.request(b, RequestId(2), set(5, 4, 901));
    s.request(a, RequestId(3), through_index(5, 7, 1_000));
    s.run_until(s.now_ns() + 4_000 * MS);
    let done = s.take_completions();
    assert_eq!(committed(&done), 3, "{done:?}");
    assert_eq!(s.counters().get("recon_aborts"), Some(&1), "its answering copy told the client");
    assert_eq!(s.counters().get("recon_restarts"), Some(&1), "one new pass");
    assert_regions_agree(&s);
    for copy in 0..3 {
        let at = |k: u64| counter(&s, s.topology().replicas(s.topology().shard_of(Key(k)))[copy], Key(k));
        assert_eq!((at(3), at(4)), (0, 7), "copy {copy}: the key the index names at the turn, updated once");
    }
}

#[test]
fn transfers_whose_amounts_change_under_them_conserve_the_total() {
    // Six accounts on three shards, amounts on two keys that others keep
    // changing: each transfer moves the amount it reads at its turn, and
    // the sum of the accounts stays what it was, in every region.
    let mut s = sim(14);
    s.run_until(300 * MS);
    let clients: Vec<NodeId> = s.topology().clients().to_vec();
    let mut req = 0u64;
    for round in 0..20u64 {
        for (i, c) in clients.iter().enumerate() {
            let tag = 10_000 * (req + 1);
            let program = if i % 4 == 3 {
                set(6 + round % 2, (round * 7 + i as u64) as i64 % 13, tag)
            } else {
                let from = (req * 5 + round) % 6;
                transfer(from, (from + 1 + req % 5) % 6, 6 + (req % 2), tag)
            };
            s.request(*c, RequestId(req), program);
            req += 1;
        }
        s.run_until(s.now_ns() + 29 * MS);
    }
    s.run_until(s.now_ns() + 20_000 * MS);
    let done = s.take_completions();
    assert_eq!(done.len() as u64, req, "every request finished");
    assert!(s.counters().get("recon_reads").copied().unwrap_or(0) > 0);
    assert_eq!(s.counters().get("recon_aborts"), None, "a transfer's keys never change, whatever its amount");
    assert_regions_agree(&s);
    for copy in 0..3 {
        let total: i64 =
            (0..6u64).map(|k| counter(&s, s.topology().replicas(s.topology().shard_of(Key(k)))[copy], Key(k))).sum();
        assert_eq!(total, 0, "copy {copy}: money is neither made nor lost");
    }
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
name = "calvin"
"#;

fn run(text: &str) -> RunOutput {
    let exp = Experiment::from_str(text, "<test>").unwrap();
    let opts = RunOptions { record_history: true, extra_faults: None, progress: None, event_log: None };
    run_sim::<Calvin>(&exp, opts).unwrap()
}

#[test]
fn a_contended_list_append_run_is_strictly_serializable() {
    let out = run(RUN);
    assert_eq!(out.report.check_valid(), Some(true), "{:?}", out.report.check);
    assert!(out.report.txns.committed > 100, "{:?}", out.report.txns);
    assert!(out.report.counters.get("multi_partition").copied().unwrap_or(0) > 0);
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    assert_eq!(run(RUN).trace_hash, run(RUN).trace_hash);
}

/// `RUN` for `duration_s`, with the logs forgotten as soon as allowed
/// (examples/calvin-truncation.toml): replicas checkpoint every 30
/// transactions (their store's 30 keys), sequencers keep at most 64
/// positions past them and checkpoint the global log's Paxos log every 32
/// slots.
fn truncating(duration_s: u64) -> String {
    RUN.replace("duration_s = 8.0", &format!("duration_s = {duration_s}.0\ndrain_s = 12.0"))
        + "[protocol.params]\ncheckpoint_txns = 20\nkept_positions_max = 64\ncheckpoint_every_slots = 32\nreads_kept = 64\n"
}

#[test]
fn a_long_calvin_run_holds_a_bounded_log() {
    let out = run_text_with_faults::<Calvin>(&truncating(40), &|_| Vec::new());
    assert_eq!(out.report.check_valid(), Some(true), "{:?}", out.report.check);
    let forgotten = out.report.counter("positions_forgotten");
    // Every sequencer materializes the whole log; far more positions than
    // any structure below may hold went through each one.
    assert!(forgotten > 3 * 1_000, "{:?}", out.report.counters);
    // Kept: at most `kept_positions_max` (64) past the replicas'
    // checkpoints, which lag by a checkpoint's 30 transactions (a position
    // or more each) and the time to make one durable.
    for structure in ["log_positions", "batch_contents", "batches_materialized"] {
        assert!(out.report.state_peak(structure) < 300, "{structure}: {:?}", out.report.state_peaks);
    }
    // The Paxos log is compacted every 32 slots; its window never fills.
    assert!(out.report.state_peak("paxos_slots") < 300, "{:?}", out.report.state_peaks);
    let copies = out.report.copies.as_ref().expect("calvin's copies are compared");
    assert!(copies.diverged.is_empty() && copies.agreeing == 6, "{copies:?}");
    // A replica keeps the reads it sent while its region is not durably
    // past them, past `reads_kept` (64): a checkpoint's worth or so, not
    // the run's thousands (`reads_sent`, over six replicas).
    assert!(out.report.counter("reads_sent") > 6 * 1_000, "{:?}", out.report.counters);
    assert!(out.report.state_peak("reads_kept") < 300, "{:?}", out.report.state_peaks);
}

#[test]
fn a_replica_behind_every_peers_truncation_point_catches_up_from_a_checkpoint() {
    // South Carolina's copy of shard 0 is down from 3 s to 15 s: meanwhile
    // every sequencer forgets what it would replay (only 64 positions are
    // kept past the other copies' checkpoints), so it comes back to
    // `Truncated` and installs another copy's checkpoint.
    let faults = |t: &Topology| {
        let victim = t.node_by_name("shard0-replica0").unwrap();
        vec![
            ScheduledFault { at_ns: 3_000 * MS, action: FaultAction::Crash(victim) },
            ScheduledFault { at_ns: 15_000 * MS, action: FaultAction::Restart(victim) },
        ]
    };
    let out = run_text_with_faults::<Calvin>(&truncating(25), &faults);
    assert_eq!(out.report.check_valid(), Some(true), "{:?}", out.report.check);
    assert!(out.report.counter("log_truncated") > 0, "{:?}", out.report.counters);
    assert!(out.report.counter("checkpoints_sent") > 0, "{:?}", out.report.counters);
    assert!(out.report.counter("checkpoints_installed") > 0, "{:?}", out.report.counters);
    let copies = out.report.copies.as_ref().expect("calvin's copies are compared");
    assert!(copies.diverged.is_empty() && copies.agreeing == 6, "the restarted copy agrees: {copies:?}");
}
