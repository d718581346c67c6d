//! The simulator's model of a WAN, clocks, CPU and disk, checked with a toy
//! echo protocol: each claim of the simulator's documentation is a test.

use meridian_core::{
    AbortReason, ClusterSpec, Ctx, Deployment, LatencyMatrix, LeaderPlacement, Lsn, NodeId, Outcome, Params, Process,
    Program, Protocol, RegionId, RequestId, ShardId, Stream, Topology,
};
use meridian_sim::{ClockModel, FaultAction, Sim, SimConfig, Verdict};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

struct Echo;

#[derive(Clone, Debug, Serialize, Deserialize)]
enum Msg {
    Ping { seq: u64, pad: Vec<u8>, keys: Vec<u64> },
    Pong { seq: u64, pad: Vec<u8>, keys: Vec<u64> },
}

#[derive(Clone, Debug, Default)]
struct EchoNode {
    /// (seq, arrival wall clock) of every ping received.
    pings: Vec<(u64, u64)>,
    recovered: Vec<u64>,
    persisted_upto: u64,
    timer_fired_at: Vec<u64>,
    truetimes: Vec<meridian_core::TrueTime>,
    /// Bytes of padding each ping carries (the `pad_bytes` parameter).
    pad_bytes: usize,
    /// Numbers each ping carries (the `pad_keys` parameter): fields, where
    /// padding is bytes.
    pad_keys: usize,
    /// CPU the echo target charges per ping (the `charge_ns` parameter).
    charge_ns: u64,
    /// Keys the echo target charges per ping (the `charge_keys` parameter).
    charge_keys: u64,
}

impl Protocol for Echo {
    const NAME: &'static str = "echo";
    const CONSISTENCY: meridian_core::Consistency = meridian_core::Consistency::Serializable;
    type Msg = Msg;
    type Record = u64;
    type Timer = u64;
    type Node = EchoNode;

    fn build(deployment: &Deployment, _: NodeId) -> Result<EchoNode, String> {
        let pad_bytes = deployment.params.u64_or("pad_bytes", 0)? as usize;
        let pad_keys = deployment.params.u64_or("pad_keys", 0)? as usize;
        let charge_ns = deployment.params.u64_or("charge_ns", 0)?;
        let charge_keys = deployment.params.u64_or("charge_keys", 0)?;
        Ok(EchoNode { pad_bytes, pad_keys, charge_ns, charge_keys, ..EchoNode::default() })
    }
}

/// Requests ping shard 0's replica 0 (the echo target) with seq = request id;
/// the request completes when the pong comes back.
impl Process<Echo> for EchoNode {
    /// TrueTime intervals it was served are well formed.
    fn check_invariants(&self) {
        for tt in self.truetimes.iter().rev().take(meridian_core::process::CHECKED_MAX) {
            assert!(tt.earliest_ns <= tt.latest_ns, "a TrueTime interval ends before it starts");
        }
    }

    fn on_start(&mut self, _ctx: &mut Ctx<'_, Echo>, durable: Vec<u64>) {
        self.recovered = durable;
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Echo>, from: NodeId, msg: Msg) {
        match msg {
            Msg::Ping { seq, pad, keys } => {
                self.pings.push((seq, ctx.clock_ns()));
                ctx.charge_cpu(self.charge_ns);
                ctx.charge_keys(self.charge_keys);
                ctx.send(from, Msg::Pong { seq, pad, keys });
            }
            Msg::Pong { seq, .. } => ctx.complete(RequestId(seq), Outcome::Committed { results: vec![] }),
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Echo>, timer: u64) {
        if timer == 0 {
            ctx.complete(RequestId(0), Outcome::Aborted { reason: AbortReason::Timeout });
        }
        self.timer_fired_at.push(timer);
        self.truetimes.push(ctx.truetime());
    }

    fn on_persisted(&mut self, _ctx: &mut Ctx<'_, Echo>, upto: Lsn) {
        self.persisted_upto = upto.0;
    }

    fn on_request(&mut self, ctx: &mut Ctx<'_, Echo>, request: RequestId, program: Program) {
        // A program with ops means "append one record per op" instead: to
        // stream 1 for ids from 2,000,000; from 3,000,000 it compacts
        // stream 1 up to what is durable, with the snapshot 42.
        if !program.ops.is_empty() {
            if request.0 >= 3_000_000 {
                ctx.compact_stream(Stream(1), Lsn(self.persisted_upto), 42);
                return;
            }
            for _ in &program.ops {
                if request.0 >= 2_000_000 {
                    ctx.append_to(Stream(1), request.0);
                } else {
                    ctx.append(request.0);
                }
            }
            return;
        }
        if request.0 >= 1_000_000 {
            ctx.set_timer(request.0, request.0);
            return;
        }
        let target = ctx.topology().replicas(ShardId(0))[0];
        // Five-byte numbers: as many bytes as `pad_bytes = 5 * pad_keys`.
        let keys = vec![1 << 30; self.pad_keys];
        ctx.send(target, Msg::Ping { seq: request.0, pad: vec![0; self.pad_bytes], keys });
    }
}

fn setup(seed: u64, tweak: impl FnOnce(&mut SimConfig)) -> Sim<Echo> {
    setup_with(seed, Params::new(), tweak)
}

fn setup_with(seed: u64, params: Params, tweak: impl FnOnce(&mut SimConfig)) -> Sim<Echo> {
    let matrix = LatencyMatrix::preset("tiga-gcp").unwrap();
    let spec = ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
        shards: 1,
        replicas_per_shard: 3,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(0), RegionId(3)],
        clients_per_region: 1,
    };
    let topology = Arc::new(Topology::build(&spec, &[]));
    let latency = Arc::new(matrix.clone());
    let mut cfg = SimConfig::ideal(seed, topology.clone(), matrix);
    tweak(&mut cfg);
    let deployment = Deployment { topology, params, epsilon_us: 100, latency };
    Sim::new(cfg, deployment).unwrap()
}

fn hong_kong_client(sim: &Sim<Echo>) -> NodeId {
    sim.topology().node_by_name("client-hong-kong-0").unwrap()
}

fn ms(x: u64) -> u64 {
    x * 1_000_000
}

#[test]
fn one_round_trip_takes_the_matrix_rtt() {
    let mut sim = setup(1, |_| {});
    let c = hong_kong_client(&sim);
    sim.request(c, RequestId(1), Program::default());
    sim.run_until(ms(1000));
    let done = sim.take_completions();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].at_ns, ms(197), "HK-SC round trip is 197 ms in tiga-gcp");
}

#[test]
fn same_seed_same_trace_different_seed_different_trace() {
    let run = |seed: u64| {
        let mut sim = setup(seed, |cfg| {
            cfg.net.jitter_mean_ns = ms(5);
            cfg.net.loss = 0.1;
            cfg.net.duplicate = 0.1;
            cfg.net.reorder = true;
        });
        let c = hong_kong_client(&sim);
        for i in 0..200 {
            sim.request(c, RequestId(i), Program::default());
            sim.run_until(sim.now_ns() + ms(3));
        }
        sim.run_until(ms(5_000));
        (sim.trace_hash(), sim.events(), sim.take_completions())
    };
    let (a, b) = (run(7), run(7));
    assert_eq!(a.0, b.0);
    assert_eq!(a.1, b.1);
    assert_eq!(a.2, b.2);
    assert_ne!(run(8).0, a.0);
}

#[test]
fn fifo_links_keep_send_order_under_jitter_and_reordering_links_do_not() {
    let order = |reorder: bool| {
        let mut sim = setup(3, |cfg| {
            cfg.net.jitter_mean_ns = ms(20);
            cfg.net.reorder = reorder;
        });
        let c = hong_kong_client(&sim);
        for i in 0..100 {
            sim.request(c, RequestId(i), Program::default());
        }
        sim.run_until(ms(5_000));
        let target = sim.topology().replicas(ShardId(0))[0];
        sim.process(target).unwrap().pings.iter().map(|(s, _)| *s).collect::<Vec<_>>()
    };
    let fifo = order(false);
    assert_eq!(fifo, (0..100).collect::<Vec<_>>());
    let reordered = order(true);
    assert_eq!(reordered.len(), 100);
    assert_ne!(reordered, fifo, "20 ms jitter on 100 back-to-back messages reorders some");
}

#[test]
fn a_crash_keeps_only_flushed_appends() {
    let mut sim = setup(1, |cfg| cfg.fsync_ns = ms(10));
    let c = hong_kong_client(&sim);
    let two_ops = Program::new(vec![meridian_core::Op::Read { key: meridian_core::Key(1) }; 2]);
    sim.request(c, RequestId(5), two_ops.clone());
    sim.run_until(ms(11));
    assert_eq!(sim.process(c).unwrap().persisted_upto, 2);
    sim.request(c, RequestId(6), two_ops);
    sim.run_until(ms(15));
    sim.crash(c);
    sim.restart(c);
    assert_eq!(sim.process(c).unwrap().recovered, vec![5, 5], "the unflushed appends of request 6 are lost");
}

#[test]
fn compacting_one_stream_keeps_the_other_streams_records_across_a_restart() {
    let mut sim = setup(1, |cfg| cfg.fsync_ns = ms(1));
    let c = hong_kong_client(&sim);
    let one_op = Program::new(vec![meridian_core::Op::Read { key: meridian_core::Key(1) }]);
    for id in [5, 2_000_007, 6, 2_000_008] {
        sim.request(c, RequestId(id), one_op.clone());
        sim.run_until(sim.now_ns() + ms(2));
    }
    sim.request(c, RequestId(3_000_000), one_op);
    sim.run_until(sim.now_ns() + ms(5));
    sim.crash(c);
    sim.restart(c);
    assert_eq!(sim.process(c).unwrap().recovered, vec![42, 5, 6], "stream 1's records gave way to its snapshot");
}

fn round_trip_ns(params: Params, tweak: impl FnOnce(&mut SimConfig)) -> u64 {
    let mut sim = setup_with(1, params, tweak);
    let c = hong_kong_client(&sim);
    sim.request(c, RequestId(1), Program::default());
    sim.run_until(ms(1_000));
    sim.take_completions()[0].at_ns
}

#[test]
fn charged_cpu_delays_what_the_handler_sends_after_it() {
    let base = round_trip_ns(Params::new(), |_| {});
    let charged = round_trip_ns(Params::new().with("charge_ns", meridian_core::ParamValue::Int(5_000_000)), |_| {});
    assert_eq!(charged - base, 5_000_000);
}

#[test]
fn charged_keys_cost_the_roles_per_key_cpu_and_nothing_without_one() {
    let keys = || Params::new().with("charge_keys", meridian_core::ParamValue::Int(128));
    let base = round_trip_ns(Params::new(), |_| {});
    assert_eq!(round_trip_ns(keys(), |_| {}), base, "no per-key cost: keys are free");
    let charged = round_trip_ns(keys(), |cfg| cfg.cpu_ns_per_key = vec![1_500; cfg.topology.nodes.len()]);
    assert_eq!(charged - base, 128 * 1_500, "the echo target's 128 keys at 1.5 µs each");
}

/// A message's structure costs per field (every number it encodes) beside
/// its bytes: a ping and its pong carrying 1,000 numbers cost 1,000 fields
/// at each encoding and decoding, where padding of the same 5,000 bytes
/// costs none.
#[test]
fn numbers_cost_per_field_where_a_blob_of_the_same_bytes_costs_nothing_more() {
    let int = |n: i64| meridian_core::ParamValue::Int(n);
    let per_field = |cfg: &mut SimConfig| cfg.cpu_ns_per_field = vec![100.0; cfg.topology.nodes.len()];
    let base = round_trip_ns(Params::new(), per_field);
    let blob = round_trip_ns(Params::new().with("pad_bytes", int(5_000)), per_field);
    let numbers = round_trip_ns(Params::new().with("pad_keys", int(1_000)), per_field);
    assert_eq!(blob, base, "bytes of a blob are not fields");
    // The ping's encoding and decoding and the pong's encoding come before
    // the completion; the client's decoding of the pong delays only what
    // it does next.
    assert_eq!(numbers - base, 3 * 1_000 * 100, "1,000 fields at 100 ns, three times");
}

#[test]
fn bytes_take_their_time_on_the_wire() {
    let pad = || Params::new().with("pad_bytes", meridian_core::ParamValue::Int(10_000));
    let free = round_trip_ns(pad(), |_| {});
    let slow = round_trip_ns(pad(), |cfg| cfg.net_ns_per_byte = 8.0);
    // Two messages of a little over 10,000 bytes at 1 Gbit/s.
    let extra = slow - free;
    assert!((160_000..161_000).contains(&extra), "{extra} ns");
}

/// The cost model sees message size: with the same CPU per byte, pings
/// that carry ten times the metadata keep the echo server busy longer, so
/// the same burst completes later (lower throughput).
#[test]
fn ten_times_the_metadata_per_message_lowers_throughput_under_the_same_cpu() {
    let finish_ms = |pad_bytes: u64| {
        let params = Params::new().with("pad_bytes", meridian_core::ParamValue::Int(pad_bytes as i64));
        let mut sim = setup_with(1, params, |cfg| {
            cfg.cpu_ns = vec![1_000; cfg.topology.nodes.len()];
            cfg.cpu_ns_per_byte = vec![20.0; cfg.topology.nodes.len()];
        });
        let c = hong_kong_client(&sim);
        for seq in 1..=200 {
            sim.request(c, RequestId(seq), Program::default());
        }
        sim.run_until(ms(2_000));
        let done = sim.take_completions();
        assert_eq!(done.len(), 200, "every ping answered");
        done.iter().map(|d| d.at_ns).max().unwrap() as f64 / 1e6
    };
    let (small, large) = (finish_ms(100), finish_ms(1_000));
    // The echo server decodes and re-encodes each ping: 2 x 900 more bytes
    // x 20 ns = 36 µs more per ping, 7.2 ms over the burst (the client's
    // own encoding and decoding add as much again at its end).
    assert!(large - small > 7.0, "10x metadata: the burst ends {small:.1} ms vs {large:.1} ms");
}

#[test]
fn a_busy_cpu_queues_events() {
    let mut sim = setup(1, |cfg| {
        let target = cfg.topology.replicas(ShardId(0))[0];
        cfg.cpu_ns[target.index()] = ms(1);
    });
    let c = sim.topology().node_by_name("client-south-carolina-0").unwrap();
    for i in 0..10 {
        sim.request(c, RequestId(i), Program::default());
    }
    sim.run_until(ms(100));
    let done: Vec<u64> = sim.take_completions().iter().map(|d| d.at_ns).collect();
    assert_eq!(done.len(), 10);
    for w in done.windows(2) {
        assert_eq!(w[1] - w[0], ms(1), "one ms of CPU per ping serializes the replies");
    }
}

#[test]
fn draining_an_inbox_in_place_keeps_the_trace_of_queueing_each_event() {
    // `run_until` handles a busy node's next inbox event in place when its
    // `Ready` would be the next event anyway; `step` always queues it. Both
    // must give the same run.
    let run = |in_place: bool| {
        let mut sim = setup(3, |cfg| {
            let target = cfg.topology.replicas(ShardId(0))[0];
            cfg.cpu_ns[target.index()] = ms(1);
            cfg.net.jitter_mean_ns = ms(2);
        });
        let clients = [hong_kong_client(&sim), sim.topology().node_by_name("client-south-carolina-0").unwrap()];
        for i in 0..40 {
            sim.request(clients[i as usize % 2], RequestId(i), Program::default());
        }
        if in_place {
            sim.run_until(ms(2_000));
        } else {
            while sim.step() {}
        }
        (sim.trace_hash(), sim.events(), sim.take_completions())
    };
    let (queued, in_place) = (run(false), run(true));
    assert_eq!(queued.2.len(), 40);
    assert_eq!(queued, in_place);
}

#[test]
fn partitions_drop_messages_until_healed() {
    let mut sim = setup(1, |_| {});
    let c = hong_kong_client(&sim);
    let target = sim.topology().replicas(ShardId(0))[0];
    sim.schedule(0, FaultAction::Partition(vec![target]));
    sim.request(c, RequestId(1), Program::default());
    sim.run_until(ms(1000));
    assert!(sim.take_completions().is_empty());
    sim.schedule(ms(1000), FaultAction::Heal);
    sim.run_until(ms(1000));
    sim.request(c, RequestId(2), Program::default());
    sim.run_until(ms(2000));
    assert_eq!(sim.take_completions().len(), 1);
}

#[test]
fn timers_run_on_the_drifting_monotonic_clock_and_ignore_jumps() {
    let mut sim = setup(1, |cfg| {
        for c in cfg.clocks.iter_mut() {
            *c = ClockModel { offset_ns: ms(50) as i64, drift_ppm: 1000.0 };
        }
    });
    let c = hong_kong_client(&sim);
    let wall0 = sim.clock_of(c);
    assert_eq!(wall0, meridian_sim::EPOCH_NS + ms(50), "offset applies to the wall clock");
    sim.schedule(ms(10), FaultAction::ClockJump(c, ms(500) as i64));
    sim.request(c, RequestId(1_001_000_000), Program::default());
    sim.run_until(ms(999));
    assert!(sim.process(c).unwrap().timer_fired_at.is_empty());
    sim.run_until(ms(1000));
    assert_eq!(sim.process(c).unwrap().timer_fired_at.len(), 1, "1.001 s local at +1000 ppm is 1 s true");
    let wall = sim.clock_of(c);
    assert_eq!(wall, meridian_sim::EPOCH_NS + ms(1000) + ms(50) + ms(1) + ms(500));
}

#[test]
fn interceptors_can_drop_and_delay_messages() {
    let mut sim = setup(1, |_| {});
    let c = hong_kong_client(&sim);
    sim.set_interceptor(Box::new(|_, _, _, msg: &Msg| match msg {
        Msg::Ping { seq: 1, .. } => Verdict::Drop,
        Msg::Ping { .. } => Verdict::Delay(3_000_000),
        Msg::Pong { .. } => Verdict::Deliver,
    }));
    sim.request(c, RequestId(1), Program::default());
    sim.request(c, RequestId(2), Program::default());
    sim.run_until(ms(1000));
    let done = sim.take_completions();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].at_ns, ms(200));
}

#[test]
fn truetime_always_contains_true_time() {
    let mut sim = setup(1, |cfg| cfg.epsilon_ns = 1_000);
    let c = hong_kong_client(&sim);
    let mut fired_at = Vec::new();
    for i in 0..200u64 {
        let after = 1_000_000 + i * 7_919;
        sim.request(c, RequestId(after), Program::default());
        fired_at.push(sim.now_ns() + after);
        sim.run_until(sim.now_ns() + 2_000_000);
    }
    sim.run_until(sim.now_ns() + 10_000_000);
    let tts = &sim.process(c).unwrap().truetimes;
    assert_eq!(tts.len(), 200);
    let mut widths = std::collections::BTreeSet::new();
    for (tt, at) in tts.iter().zip(&fired_at) {
        let truth = meridian_sim::EPOCH_NS + at;
        assert!(tt.earliest_ns <= truth && truth <= tt.latest_ns, "{tt:?} misses {truth}");
        assert_eq!(tt.width_ns(), 2_000, "width is 2ε");
        widths.insert(truth - tt.earliest_ns);
    }
    assert!(widths.len() > 10, "the estimate's error varies");
}

/// A K2-like toy: only client nodes may read TrueTime (K2's data nodes have
/// unsynchronized clocks); a request to any node reads TrueTime and the
/// monotonic clock there.
struct Clocks;

#[derive(Clone, Debug, Default)]
struct ClocksNode {
    monotonic: Vec<u64>,
    wall: Vec<u64>,
}

impl Protocol for Clocks {
    const NAME: &'static str = "clocks";
    const CONSISTENCY: meridian_core::Consistency = meridian_core::Consistency::Serializable;
    type Msg = ();
    type Record = u64;
    type Timer = u64;
    type Node = ClocksNode;

    fn may_read_truetime(role: &meridian_core::Role) -> bool {
        matches!(role, meridian_core::Role::Client { .. })
    }

    fn counters() -> Vec<meridian_core::CounterDoc> {
        vec![meridian_core::CounterDoc { name: "clock_reads", doc: "requests that read the clocks" }]
    }

    fn build(_: &Deployment, _: NodeId) -> Result<ClocksNode, String> {
        Ok(ClocksNode::default())
    }
}

impl Process<Clocks> for ClocksNode {
    /// Its monotonic clock never went back.
    fn check_invariants(&self) {
        if let [.., before, last] = self.monotonic.as_slice() {
            assert!(before <= last, "the monotonic clock went back");
        }
    }

    fn on_start(&mut self, _: &mut Ctx<'_, Clocks>, _: Vec<u64>) {}
    fn on_message(&mut self, _: &mut Ctx<'_, Clocks>, _: NodeId, _: ()) {}
    fn on_timer(&mut self, _: &mut Ctx<'_, Clocks>, _: u64) {}
    fn on_request(&mut self, ctx: &mut Ctx<'_, Clocks>, request: RequestId, program: Program) {
        let _ = ctx.truetime();
        ctx.count("clock_reads", 1);
        if !program.ops.is_empty() {
            ctx.count("undocumented_reads", 1);
        }
        self.monotonic.push(ctx.monotonic_ns());
        self.wall.push(ctx.clock_ns());
        ctx.complete(request, Outcome::Committed { results: vec![] });
    }
}

fn clocks_sim() -> Sim<Clocks> {
    let matrix = LatencyMatrix::preset("tiga-gcp").unwrap();
    let spec = ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions: vec![RegionId(0)],
        shards: 1,
        replicas_per_shard: 1,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(0)],
        clients_per_region: 1,
    };
    let topology = Arc::new(Topology::build(&spec, &[]));
    let latency = Arc::new(matrix.clone());
    let mut cfg = SimConfig::ideal(1, topology.clone(), matrix);
    cfg.clocks[0] = ClockModel { offset_ns: 0, drift_ppm: 100.0 };
    Sim::new(cfg, Deployment { topology, params: Params::new(), epsilon_us: 100, latency }).unwrap()
}

#[test]
fn a_role_that_reads_truetime_it_may_not_is_named_and_fails_the_run() {
    let mut sim = clocks_sim();
    let client = sim.topology().clients()[0];
    sim.request(client, RequestId(1), Program::default());
    sim.run_until(ms(10));
    assert!(sim.violations().is_empty(), "clients may read TrueTime: {:?}", sim.violations());
    let replica = sim.topology().replicas(ShardId(0))[0];
    sim.request(replica, RequestId(2), Program::default());
    sim.run_until(ms(20));
    let v = sim.violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].starts_with("shard0-replica0") && v[0].contains("read TrueTime") && v[0].contains("clocks"), "{v:?}");
}

#[test]
fn a_counter_the_protocol_does_not_document_is_named_and_fails_the_run() {
    let mut sim = clocks_sim();
    let client = sim.topology().clients()[0];
    sim.request(client, RequestId(1), Program::default());
    sim.run_until(ms(10));
    assert!(sim.violations().is_empty(), "clock_reads is documented: {:?}", sim.violations());
    assert_eq!(sim.counters().get("clock_reads"), Some(&1));
    let read = Program::new(vec![meridian_core::Op::Read { key: meridian_core::Key(1) }]);
    for i in 2..4 {
        sim.request(client, RequestId(i), read.clone());
    }
    sim.run_until(ms(20));
    assert_eq!(sim.violations(), ["counter `undocumented_reads` is not among clocks's documented counters"]);
}

#[test]
fn the_monotonic_clock_drifts_but_never_jumps() {
    let mut sim = clocks_sim();
    let replica = sim.topology().replicas(ShardId(0))[0];
    sim.request(replica, RequestId(1), Program::default());
    sim.run_until(ms(1_000));
    sim.schedule(ms(1_000), FaultAction::ClockJump(replica, -(ms(500) as i64)));
    sim.run_until(ms(1_001));
    sim.request(replica, RequestId(2), Program::default());
    sim.run_until(ms(2_000));
    let node = sim.process(replica).expect("up");
    let wall = node.wall[1] - node.wall[0];
    assert!(wall < ms(600), "the wall clock jumped back half a second: {wall} ns");
    let elapsed = node.monotonic[1] - node.monotonic[0];
    let expect = (ms(1_001) as f64 * (1.0 + 100e-6)) as u64;
    assert!(elapsed.abs_diff(expect) < ms(2), "{elapsed} ns elapsed, about {expect} expected (100 ppm fast)");
}
