//! The shared Multi-Paxos log under the simulator: every replica commits
//! the same value in every slot (safety), an acknowledged value is never
//! lost, and once faults heal the group commits again (liveness). Checked
//! over many seeds with crashes, restarts, partitions, loss, duplication and
//! reordering.

use meridian_core::{
    ClusterSpec, Consistency, Ctx, Deployment, LatencyMatrix, LeaderPlacement, Lsn, Mapped, NodeId, Op, Outcome,
    Params, Process, Program, Protocol, RegionId, RequestId, Rng, ShardId, Topology,
};
use meridian_mechanisms::paxos::{MultiPaxos, PaxosConfig, PaxosEvent, PaxosMsg, PaxosRecord, PaxosTimer};
use meridian_sim::{FaultAction, Sim, SimConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

struct Log;

#[derive(Clone, Debug, Serialize, Deserialize)]
enum Msg {
    Paxos(PaxosMsg<u64, Committed>),
    Propose { value: u64 },
    Done { value: u64 },
}

/// The host state a checkpoint carries: the committed sequence so far.
type Committed = Vec<(u64, u64)>;

impl From<PaxosMsg<u64, Committed>> for Msg {
    fn from(m: PaxosMsg<u64, Committed>) -> Msg {
        Msg::Paxos(m)
    }
}

#[derive(Clone, Debug)]
enum Timer {
    Paxos(PaxosTimer),
}

impl From<PaxosTimer> for Timer {
    fn from(t: PaxosTimer) -> Timer {
        Timer::Paxos(t)
    }
}

enum Node {
    Replica { paxos: Box<MultiPaxos<u64, Committed>>, committed: Vec<(u64, u64)>, waiting: BTreeMap<u64, NodeId> },
    Client { target: usize, replicas: Vec<NodeId>, pending: BTreeMap<u64, RequestId> },
}

impl Protocol for Log {
    const NAME: &'static str = "paxos-log";
    const CONSISTENCY: Consistency = Consistency::StrictSerializable;
    type Msg = Msg;
    type Record = PaxosRecord<u64, Committed>;
    type Timer = Timer;
    type Node = Node;

    fn build(d: &Deployment, node: NodeId) -> Result<Node, String> {
        let replicas = d.topology.replicas(ShardId(0)).to_vec();
        if d.topology.is_client(node) {
            return Ok(Node::Client { target: 0, replicas, pending: BTreeMap::new() });
        }
        // Checkpoints every 16 slots, so compaction, snapshots sent to
        // lagging members and restarts from checkpoints are all exercised.
        let cfg = PaxosConfig {
            tick_ns: 20_000_000,
            election_ticks: 6,
            stagger_ticks: 3,
            jitter_ticks: 3,
            batch_max: 64,
            compact_every: 16,
        };
        let paxos = Box::new(MultiPaxos::new(0, replicas, node, 0, cfg));
        Ok(Node::Replica { paxos, committed: Vec::new(), waiting: BTreeMap::new() })
    }
}

impl Node {
    fn drain(&mut self, ctx: &mut Ctx<'_, Log>) {
        let Node::Replica { paxos, committed, waiting } = self else {
            return;
        };
        for ev in paxos.drain_events() {
            match ev {
                PaxosEvent::Committed { slot, value } => {
                    let value = *value;
                    if let Some((last, _)) = committed.last() {
                        assert!(slot > *last, "slots delivered in order");
                    }
                    committed.push((slot, value));
                    if let Some(client) = waiting.remove(&value) {
                        ctx.send(client, Msg::Done { value });
                    }
                }
                PaxosEvent::Restore { upto, state } => {
                    assert!(state.last().is_none_or(|(s, _)| *s <= upto));
                    *committed = Committed::clone(&state);
                }
                _ => {}
            }
        }
        if paxos.should_compact(0) {
            let upto = committed.last().map_or(0, |(s, _)| *s);
            let state = committed.clone();
            paxos.compact(&mut Mapped::new(ctx), upto.max(paxos_applied(paxos)), state);
        }
    }
}

/// Everything delivered so far has been applied (noop slots included).
fn paxos_applied(paxos: &MultiPaxos<u64, Committed>) -> u64 {
    paxos.delivered_upto()
}

impl Process<Log> for Node {
    /// Multi-Paxos's own invariants, and the applied log in slot order.
    fn check_invariants(&self) {
        match self {
            Node::Replica { paxos, committed, .. } => {
                paxos.check_invariants();
                assert!(committed.windows(2).all(|w| w[0].0 < w[1].0), "applied slots in order");
            }
            Node::Client { target, replicas, .. } => assert!(*target < replicas.len(), "a replica to propose to"),
        }
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_, Log>, durable: Vec<PaxosRecord<u64, Committed>>) {
        if let Node::Replica { paxos, .. } = self {
            paxos.start(&mut Mapped::new(ctx), durable.into_iter().map(|r| r.body));
        }
        self.drain(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, Log>, from: NodeId, msg: Msg) {
        match (&mut *self, msg) {
            (Node::Replica { paxos, .. }, Msg::Paxos(m)) => paxos.on_message(&mut Mapped::new(ctx), from, m),
            (Node::Replica { paxos, waiting, .. }, Msg::Propose { value }) => {
                let proposed = paxos.propose(&mut Mapped::new(ctx), value);
                if proposed.is_ok() {
                    waiting.insert(value, from);
                }
            }
            (Node::Client { pending, .. }, Msg::Done { value }) => {
                if let Some(req) = pending.remove(&value) {
                    ctx.complete(req, Outcome::Committed { results: vec![] });
                }
            }
            _ => {}
        }
        self.drain(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Log>, Timer::Paxos(t): Timer) {
        if let Node::Replica { paxos, .. } = self {
            paxos.on_timer(&mut Mapped::new(ctx), t);
        }
        self.drain(ctx);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, Log>, upto: Lsn) {
        if let Node::Replica { paxos, .. } = self {
            paxos.on_persisted(&mut Mapped::new(ctx), upto);
        }
        self.drain(ctx);
    }

    /// Each request proposes the value `request + 1` (unique) to one replica,
    /// rotating through replicas so proposals also reach followers.
    fn on_request(&mut self, ctx: &mut Ctx<'_, Log>, request: RequestId, _p: Program) {
        if let Node::Client { target, replicas, pending } = self {
            let value = request.0 + 1;
            pending.insert(value, request);
            *target = (*target + 1) % replicas.len();
            for r in replicas.iter() {
                ctx.send(*r, Msg::Propose { value });
            }
        }
    }
}

fn sim(seed: u64, replicas: u32) -> Sim<Log> {
    let matrix = LatencyMatrix::preset("tiga-gcp").unwrap();
    let spec = ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
        shards: 1,
        replicas_per_shard: replicas,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(3)],
        clients_per_region: 1,
    };
    let topology = Arc::new(Topology::build(&spec, &[]));
    let latency = Arc::new(matrix.clone());
    let cfg = SimConfig::ideal(seed, topology.clone(), matrix);
    Sim::new(cfg, Deployment { topology, params: Params::new(), epsilon_us: 100, latency }).unwrap()
}

fn committed(sim: &Sim<Log>, node: NodeId) -> Option<Vec<(u64, u64)>> {
    match sim.process(node)? {
        Node::Replica { committed, .. } => Some(committed.clone()),
        Node::Client { .. } => None,
    }
}

/// Every pair of replicas agrees on every slot both committed.
fn assert_agreement(sim: &Sim<Log>, seed: u64) -> BTreeMap<u64, u64> {
    let mut chosen: BTreeMap<u64, u64> = BTreeMap::new();
    for node in sim.topology().replicas(ShardId(0)).to_vec() {
        for (slot, value) in committed(sim, node).unwrap_or_default() {
            let prev = chosen.insert(slot, value);
            assert!(prev.is_none() || prev == Some(value), "seed {seed}: slot {slot} holds {prev:?} and {value}");
        }
    }
    // (A value may sit in two slots: a duplicated Propose is proposed twice.
    // Deduplication is the host's business, not the log's.)
    chosen
}

fn program() -> Program {
    Program::new(vec![Op::Read { key: meridian_core::Key(0) }])
}

#[test]
fn fault_free_log_commits_every_proposal_once_in_order() {
    let mut s = sim(1, 3);
    let client = s.topology().clients()[0];
    for i in 0..100 {
        s.request(client, RequestId(i), program());
        s.run_until(s.now_ns() + 10_000_000);
    }
    s.run_until(s.now_ns() + 2_000_000_000);
    let done = s.take_completions();
    assert_eq!(done.len(), 100);
    let chosen = assert_agreement(&s, 1);
    assert_eq!(chosen.len(), 100, "no loss, no duplication: one slot per proposal");
    for node in s.topology().replicas(ShardId(0)).to_vec() {
        assert_eq!(committed(&s, node).unwrap().len(), 100, "followers learn every slot");
    }
}

#[test]
fn leader_crash_elects_a_new_leader_and_keeps_committing() {
    let mut s = sim(2, 3);
    let client = s.topology().clients()[0];
    let leader = s.topology().replicas(ShardId(0))[0];
    s.schedule(500_000_000, FaultAction::Crash(leader));
    for i in 0..300 {
        s.request(client, RequestId(i), program());
        s.run_until(s.now_ns() + 10_000_000);
    }
    s.run_until(s.now_ns() + 3_000_000_000);
    let done = s.take_completions();
    let late = done.iter().filter(|c| c.at_ns > 2_500_000_000).count();
    assert!(late > 50, "commits resume after the election ({late} late commits)");
    assert_agreement(&s, 2);
}

#[test]
fn safety_and_liveness_under_random_faults() {
    let mut leader_changes = 0;
    let mut restarts = 0;
    let mut checkpoints = 0;
    let mut installs = 0;
    for seed in 0..40u64 {
        let replicas = if seed % 2 == 0 { 3 } else { 5 };
        let mut s = sim(seed, replicas);
        let mut rng = Rng::new(seed);
        let members = s.topology().replicas(ShardId(0)).to_vec();
        let client = s.topology().clients()[0];
        s.schedule(0, FaultAction::SetLoss(0.05));
        s.schedule(0, FaultAction::SetDuplicate(0.05));
        let mut t = 0;
        for _ in 0..12 {
            t += 100_000_000 + rng.below(300_000_000);
            let victim = members[rng.below(members.len() as u64) as usize];
            let action = match rng.below(4) {
                0 => FaultAction::Crash(victim),
                1 => FaultAction::Restart(victim),
                2 => FaultAction::Partition(vec![victim]),
                _ => FaultAction::Heal,
            };
            s.schedule(t, action);
        }
        let heal_at = t + 1;
        s.schedule(heal_at, FaultAction::HealAll);
        let mut acked = Vec::new();
        let mut req = 0;
        while s.now_ns() < heal_at + 4_000_000_000 {
            s.request(client, RequestId(req), program());
            req += 1;
            s.run_until(s.now_ns() + 20_000_000);
            acked.extend(s.take_completions().into_iter().map(|c| (c.at_ns, c.request.0 + 1)));
        }
        let chosen = assert_agreement(&s, seed);
        let values: std::collections::BTreeSet<u64> = chosen.values().copied().collect();
        for (_, v) in &acked {
            assert!(values.contains(v), "seed {seed}: acknowledged value {v} lost");
        }
        let after_heal = acked.iter().filter(|(at, _)| *at > heal_at + 2_000_000_000).count();
        assert!(after_heal > 10, "seed {seed}: only {after_heal} commits after healing");
        leader_changes += s.counters().get("paxos_leader_changes").copied().unwrap_or(0);
        restarts += s.counters().get("restarts").copied().unwrap_or(0);
        checkpoints += s.counters().get("paxos_checkpoints").copied().unwrap_or(0);
        installs += s.counters().get("paxos_snapshots_installed").copied().unwrap_or(0);
    }
    // The schedule must actually have exercised elections and recovery.
    assert!(leader_changes > 40, "only {leader_changes} leader changes over 40 seeds");
    assert!(restarts > 40, "only {restarts} restarts over 40 seeds");
    assert!(checkpoints > 100, "only {checkpoints} checkpoints over 40 seeds");
    assert!(installs > 0, "no lagging member ever needed a snapshot");
    eprintln!("leader changes {leader_changes}, restarts {restarts}, checkpoints {checkpoints}, installs {installs}");
}

#[test]
fn a_follower_cut_off_and_back_again_leaves_the_leader_leading() {
    // Without pre-votes the cut-off follower would raise its ballot at
    // every timeout, and its first answer to the leader once the cut
    // healed would be a refusal that deposes it.
    let mut s = sim(3, 3);
    let client = s.topology().clients()[0];
    let follower = s.topology().replicas(ShardId(0))[2];
    s.schedule(300_000_000, FaultAction::Partition(vec![follower]));
    s.schedule(2_300_000_000, FaultAction::Heal);
    for i in 0..300 {
        s.request(client, RequestId(i), program());
        s.run_until(s.now_ns() + 10_000_000);
    }
    s.run_until(s.now_ns() + 1_000_000_000);
    let c = s.counters();
    assert!(c.get("paxos_pre_votes").copied().unwrap_or(0) >= 2, "it asked while cut off: {c:?}");
    assert_eq!(c.get("paxos_elections"), None, "no phase 1: {c:?}");
    assert_eq!(c.get("paxos_leader_changes"), Some(&1), "the first leader still leads: {c:?}");
    assert_eq!(s.take_completions().len(), 300, "every proposal committed");
    assert_agreement(&s, 3);
}
