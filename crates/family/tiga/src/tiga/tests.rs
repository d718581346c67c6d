//! Unit tests of a Tiga server driven event by event through a hand-held
//! context, for what the simulator cannot show: its clock stands still
//! while a handler runs, a real one does not.

use super::messages::{Msg, Timer, TxnBody};
use super::server::Server;
use super::{Config, initial_view};
use meridian_core::{
    ClusterSpec, Env, Key, LeaderPlacement, Lsn, NodeId, Op, Params, Program, RegionId, Rng, ShardId, TimerId,
    Topology, TrueTime, TxnId,
};
use std::cell::Cell;
use std::sync::Arc;

/// A context whose clock moves on by `step_ns` at every reading.
struct Hand {
    me: NodeId,
    topo: Arc<Topology>,
    clock_ns: Cell<u64>,
    step_ns: u64,
    sent: Vec<(NodeId, Msg)>,
    timers: Vec<(TimerId, Timer)>,
    next_timer: u64,
    next_lsn: u64,
    rng: Rng,
}

impl Env<Msg, super::messages::Record, Timer> for Hand {
    fn me(&self) -> NodeId {
        self.me
    }
    fn topology(&self) -> &Topology {
        &self.topo
    }
    fn clock_ns(&self) -> u64 {
        let now = self.clock_ns.get();
        self.clock_ns.set(now + self.step_ns);
        now
    }
    fn monotonic_ns(&self) -> u64 {
        self.clock_ns.get()
    }
    fn truetime(&mut self) -> TrueTime {
        let now = self.clock_ns.get();
        TrueTime { earliest_ns: now, latest_ns: now }
    }
    fn send(&mut self, to: NodeId, msg: Msg) {
        self.sent.push((to, msg));
    }
    fn set_timer(&mut self, _after_ns: u64, timer: Timer) -> TimerId {
        self.next_timer += 1;
        let id = TimerId(self.next_timer);
        self.timers.push((id, timer));
        id
    }
    fn cancel_timer(&mut self, id: TimerId) {
        self.timers.retain(|(t, _)| *t != id);
    }
    fn append_to(&mut self, _stream: meridian_core::Stream, _record: super::messages::Record) -> Lsn {
        self.next_lsn += 1;
        Lsn(self.next_lsn)
    }
    fn compact_stream(&mut self, _stream: meridian_core::Stream, _upto: Lsn, _snapshot: super::messages::Record) {}
    fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }
    fn count(&mut self, _counter: &'static str, _delta: u64) {}
    fn observe(&mut self, _name: &'static str, _value: u64) {}
    fn complete(&mut self, _request: meridian_core::RequestId, _outcome: meridian_core::Outcome) {}
}

fn deployment() -> (Arc<Topology>, Config) {
    let spec = ClusterSpec {
        regions: vec!["a".into(), "b".into(), "c".into()],
        server_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
        shards: 1,
        replicas_per_shard: 3,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(0)],
        clients_per_region: 1,
    };
    (Arc::new(Topology::build(&spec, &[])), Config::from_params(&Params::new()).expect("defaults"))
}

fn submit(coordinator: NodeId, seq: u64, key: u64, t: u64) -> Msg {
    submit_in_view(coordinator, seq, key, t, 1)
}

fn submit_in_view(coordinator: NodeId, seq: u64, key: u64, t: u64, g_view: u64) -> Msg {
    let body = TxnBody {
        id: TxnId { node: coordinator, seq },
        coordinator,
        program: Program::new(vec![Op::Append { key: Key(key), element: seq }]),
        shards: vec![ShardId(0)],
    };
    Msg::Submit { body: Arc::new(body), g_view, t, send_clock_ns: t.saturating_sub(50), low_watermark: 0 }
}

fn hand(me: NodeId, topo: Arc<Topology>, clock_ns: u64) -> Hand {
    Hand {
        me,
        topo,
        clock_ns: Cell::new(clock_ns),
        step_ns: 0,
        sent: Vec::new(),
        timers: Vec::new(),
        next_timer: 0,
        next_lsn: 0,
        rng: Rng::new(1),
    }
}

fn client_of(topo: &Topology) -> NodeId {
    (0..topo.nodes.len() as u32).map(NodeId).find(|n| topo.is_client(*n)).expect("a client")
}

fn submitted_timestamps(sent: &[(NodeId, Msg)]) -> Vec<(u64, u64)> {
    sent.iter()
        .filter_map(|(_, m)| if let Msg::Submit { g_view, t, .. } = m { Some((*g_view, *t)) } else { None })
        .collect()
}

fn fast_replied(sent: &[(NodeId, Msg)], seq: u64) -> bool {
    sent.iter().any(|(_, m)| matches!(m, Msg::FastReply { id, result: Some(_), .. } if id.seq == seq))
}

#[test]
fn a_timestamp_the_clock_reaches_while_a_release_pass_runs_is_still_released() {
    // Two transactions 1 µs apart; the leader's clock moves 10 µs per
    // reading. The pass the first one's timer starts reads the clock before
    // the second's timestamp and arms the next timer after it: the second
    // must still get a timer, or it waits for an arrival that never comes.
    let (topo, cfg) = deployment();
    let leader = topo.replicas(ShardId(0))[0];
    let client = client_of(&topo);
    let mut server = Server::new(topo.clone(), ShardId(0), 0, initial_view(&topo, &cfg), cfg);
    assert!(server.is_leader());
    let mut hand = hand(leader, topo, 1_000_000);
    let t_first = 2_000_000;
    server.on_message(&mut hand, client, submit(client, 1, 7, t_first));
    server.on_message(&mut hand, client, submit(client, 2, 8, t_first + 1_000));
    hand.timers.retain(|(_, t)| matches!(t, Timer::Release));
    assert_eq!(hand.timers.len(), 1, "one release timer, for the first");

    hand.clock_ns.set(t_first);
    hand.step_ns = 10_000;
    hand.timers.clear();
    server.on_timer(&mut hand, Timer::Release);
    // Fire whatever release timer the pass armed, as the clock reaches it.
    for _ in 0..4 {
        if !hand.timers.iter().any(|(_, t)| matches!(t, Timer::Release)) {
            break;
        }
        hand.timers.clear();
        server.on_timer(&mut hand, Timer::Release);
    }
    server.on_persisted(&mut hand, Lsn(u64::MAX));
    assert!(fast_replied(&hand.sent, 1), "the first was released");
    assert!(fast_replied(&hand.sent, 2), "the second was released too");
}

#[test]
fn a_follower_admits_only_copies_of_its_own_view() {
    // Step ④ (2) takes the largest recovered timestamp, which is right only
    // if no follower holds a transaction above its agreed timestamp: every
    // copy a server admits in a view carries the one timestamp its
    // coordinator chose in that view.
    let (topo, cfg) = deployment();
    let follower = topo.replicas(ShardId(0))[1];
    let client = client_of(&topo);
    let mut server = Server::new(topo.clone(), ShardId(0), 1, initial_view(&topo, &cfg), cfg);
    assert!(!server.is_leader());
    let mut hand = hand(follower, topo, 1_000_000);
    let replied = |server: &mut Server, hand: &mut Hand, msg: Msg, t: u64| {
        server.on_message(hand, client, msg);
        hand.clock_ns.set(t + 1);
        server.on_timer(hand, Timer::Release);
        server.on_persisted(hand, Lsn(u64::MAX));
        std::mem::take(&mut hand.sent).iter().any(|(_, m)| matches!(m, Msg::FastReply { .. }))
    };
    assert!(!replied(&mut server, &mut hand, submit_in_view(client, 1, 7, 2_000_000, 2), 2_000_000), "another view");
    assert!(replied(&mut server, &mut hand, submit_in_view(client, 1, 7, 2_000_000, 1), 2_000_000), "its own view");
}

#[test]
fn a_coordinator_resubmits_at_one_timestamp_per_view() {
    let (topo, cfg) = deployment();
    let client = client_of(&topo);
    let retry_ticks = cfg.retry_ticks;
    let view = initial_view(&topo, &cfg);
    let mut coordinator = super::coordinator::Coordinator::new(client, topo.clone(), view.clone(), cfg);
    let mut hand = hand(client, topo, 1_000_000);
    coordinator.on_start(&mut hand, Vec::new());
    coordinator.on_persisted(&mut hand, Lsn(u64::MAX));
    coordinator.on_request(
        &mut hand,
        meridian_core::RequestId(1),
        Program::new(vec![Op::Append { key: Key(3), element: 1 }]),
    );
    let first = submitted_timestamps(&hand.sent);
    assert!(!first.is_empty(), "submitted");
    for _ in 0..=retry_ticks {
        hand.clock_ns.set(hand.clock_ns.get() + 50_000_000);
        coordinator.on_timer(&mut hand, Timer::CoordinatorTick);
    }
    let all = submitted_timestamps(&hand.sent);
    assert!(all.len() > first.len(), "resubmitted after retry_ms");
    assert!(all.iter().all(|vt| *vt == first[0]), "one timestamp in view 1: {all:?}");

    hand.sent.clear();
    let mut next = view;
    next.g_view = 2;
    coordinator.on_message(&mut hand, NodeId(0), Msg::CurrentView(next));
    let after = submitted_timestamps(&hand.sent);
    assert!(!after.is_empty(), "resubmitted in the new view");
    assert!(after.iter().all(|(v, t)| *v == 2 && *t > first[0].1), "a fresh, later timestamp: {after:?}");
}

#[test]
fn a_follower_asks_for_every_body_a_sync_batch_lacks_at_once() {
    // A follower that missed submissions (during a view change, say) must
    // not crawl back one entry per round trip while the slow path waits.
    let (topo, cfg) = deployment();
    let leader = topo.replicas(ShardId(0))[0];
    let follower = topo.replicas(ShardId(0))[1];
    let client = client_of(&topo);
    let view = initial_view(&topo, &cfg);
    let mut server = Server::new(topo.clone(), ShardId(0), 1, view.clone(), cfg);
    let mut hand = hand(follower, topo, 1_000_000);
    let ids: Vec<TxnId> = (1..=3).map(|seq| TxnId { node: client, seq }).collect();
    let entries = ids.iter().map(|id| (*id, 2_000_000 + id.seq)).collect();
    let sync =
        Msg::LogSync { g_view: view.g_view, l_view: view.l_view(ShardId(0)), from_pos: 0, entries, commit_point: 0 };
    server.on_message(&mut hand, leader, sync);
    server.on_persisted(&mut hand, Lsn(u64::MAX));
    let asked: Vec<TxnId> = hand
        .sent
        .iter()
        .filter_map(|(_, m)| if let Msg::SyncReport { missing, .. } = m { Some(missing.clone()) } else { None })
        .flatten()
        .collect();
    assert_eq!(asked, ids, "one report names all three");
}
