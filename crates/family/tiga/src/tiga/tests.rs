//! Handler-level tests of Tiga's roles, each driven event by event by
//! core's `Hand`: feed one event at a chosen time, compare what the handler
//! did with what the paper says the transition does.

use super::messages::{Msg, Timer, TxnBody};
use super::server::Server;
use super::{Config, Tiga, initial_view};
use meridian_core::{
    ClusterSpec, EffectsOf, Hand, Key, LeaderPlacement, NodeId, Now, Op, Params, Program, RegionId, ShardId, Topology,
    TxnId,
};
use std::sync::Arc;

/// A Tiga server or coordinator driven by hand (core's `Hand`).
type ServerHand = Hand<Tiga, Server>;

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

fn server_hand(topo: &Arc<Topology>, cfg: &Config, replica: u32, clock_ns: u64) -> ServerHand {
    let me = topo.replicas(ShardId(0))[replica as usize];
    let server = Server::new(topo.clone(), ShardId(0), replica, initial_view(topo, cfg), *cfg);
    Hand::new(server, topo.clone(), me, Now::at(clock_ns))
}

fn client_of(topo: &Topology) -> NodeId {
    (0..topo.nodes.len() as u32).map(NodeId).find(|n| topo.is_client(*n)).expect("a client")
}

fn submitted_timestamps(fx: &EffectsOf<Tiga>) -> Vec<(u64, u64)> {
    fx.sends()
        .filter_map(|(_, m)| if let Msg::Submit { g_view, t, .. } = m { Some((*g_view, *t)) } else { None })
        .collect()
}

fn fast_replied(fx: &EffectsOf<Tiga>, seq: u64) -> bool {
    fx.sends().any(|(_, m)| matches!(m, Msg::FastReply { id, result: Some(_), .. } if id.seq == seq))
}

fn release_timer_set(fx: &EffectsOf<Tiga>) -> bool {
    fx.timers_set().any(|(_, _, t)| matches!(t, Timer::Release))
}

#[test]
fn the_leader_releases_each_transaction_when_its_clock_reaches_its_timestamp() {
    // §3.2: a leader holds a transaction until its clock passes the
    // timestamp, then executes it and fast-replies (once its log entry is
    // durable). Two transactions 1 µs apart: the pass that releases the
    // first arms the timer of the second, which is released when it fires.
    let (topo, cfg) = deployment();
    let client = client_of(&topo);
    let mut leader = server_hand(&topo, &cfg, 0, 1_000_000);
    assert!(leader.node.is_leader());
    let t_first = 2_000_000;
    let fx = leader.message(client, submit(client, 1, 7, t_first));
    assert!(release_timer_set(&fx), "held until its timestamp");
    assert!(!fast_replied(&fx, 1), "not before");
    leader.message(client, submit(client, 2, 8, t_first + 1_000));

    leader.set_time_ns(t_first);
    let fx = leader.timer(Timer::Release);
    assert!(release_timer_set(&fx), "the second still waits, with a timer");
    let fx = leader.persist_all();
    assert!(fast_replied(&fx, 1), "the first is released at its timestamp");
    assert!(!fast_replied(&fx, 2), "the second is not yet");

    leader.set_time_ns(t_first + 1_000);
    leader.timer(Timer::Release);
    let fx = leader.persist_all();
    assert!(fast_replied(&fx, 2), "the second is released at its own");
}

#[test]
fn a_follower_admits_only_copies_of_its_own_view() {
    // Step ④ (2) takes the largest recovered timestamp, which is right only
    // if no follower holds a transaction above its agreed timestamp: every
    // copy a server admits in a view carries the one timestamp its
    // coordinator chose in that view.
    let (topo, cfg) = deployment();
    let client = client_of(&topo);
    let mut follower = server_hand(&topo, &cfg, 1, 1_000_000);
    assert!(!follower.node.is_leader());
    let mut replied = |msg: Msg, t: u64| {
        follower.message(client, msg);
        follower.set_time_ns(t + 1);
        follower.timer(Timer::Release);
        let fx = follower.persist_all();
        fx.sends().any(|(_, m)| matches!(m, Msg::FastReply { .. }))
    };
    assert!(!replied(submit_in_view(client, 1, 7, 2_000_000, 2), 2_000_000), "another view");
    assert!(replied(submit_in_view(client, 1, 7, 2_000_000, 1), 2_000_000), "its own view");
}

#[test]
fn a_coordinator_resubmits_at_one_timestamp_per_view() {
    let (topo, cfg) = deployment();
    let client = client_of(&topo);
    let retry_ticks = cfg.retry_ticks;
    let view = initial_view(&topo, &cfg);
    let coordinator = super::coordinator::Coordinator::new(client, topo.clone(), view.clone(), cfg);
    let mut hand: Hand<Tiga, _> = Hand::new(coordinator, topo.clone(), client, Now::at(1_000_000));
    hand.start(Vec::new());
    hand.persist_all();
    let fx = hand.request(meridian_core::RequestId(1), Program::new(vec![Op::Append { key: Key(3), element: 1 }]));
    let first = submitted_timestamps(&fx);
    assert!(!first.is_empty(), "submitted");
    let mut all = first.clone();
    for _ in 0..=retry_ticks {
        hand.advance_ns(50_000_000);
        all.extend(submitted_timestamps(&hand.timer(Timer::CoordinatorTick)));
    }
    assert!(all.len() > first.len(), "resubmitted after retry_ms");
    assert!(all.iter().all(|vt| *vt == first[0]), "one timestamp in view 1: {all:?}");

    let mut next = view;
    next.g_view = 2;
    let after = submitted_timestamps(&hand.message(NodeId(0), Msg::CurrentView(next)));
    assert!(!after.is_empty(), "resubmitted in the new view");
    assert!(after.iter().all(|(v, t)| *v == 2 && *t > first[0].1), "a fresh, later timestamp: {after:?}");
}

#[test]
fn a_follower_asks_for_every_body_a_sync_batch_lacks_at_once() {
    // A follower that missed submissions (during a view change, say) must
    // not crawl back one entry per round trip while the slow path waits.
    let (topo, cfg) = deployment();
    let leader = topo.replicas(ShardId(0))[0];
    let client = client_of(&topo);
    let view = initial_view(&topo, &cfg);
    let mut follower = server_hand(&topo, &cfg, 1, 1_000_000);
    let ids: Vec<TxnId> = (1..=3).map(|seq| TxnId { node: client, seq }).collect();
    let entries = ids.iter().map(|id| (*id, 2_000_000 + id.seq)).collect();
    let sync =
        Msg::LogSync { g_view: view.g_view, l_view: view.l_view(ShardId(0)), from_pos: 0, entries, commit_point: 0 };
    let mut asked: Vec<TxnId> = Vec::new();
    for fx in [follower.message(leader, sync), follower.persist_all()] {
        asked.extend(
            fx.sends()
                .filter_map(|(_, m)| if let Msg::SyncReport { missing, .. } = m { Some(missing.clone()) } else { None })
                .flatten(),
        );
    }
    assert_eq!(asked, ids, "one report names all three");
}

#[test]
fn every_counter_tiga_reports_is_documented_in_its_guide() {
    let guide = include_str!("../../../../../docs/tiga.md");
    for c in <Tiga as meridian_core::Protocol>::counters() {
        assert!(guide.contains(&format!("`{}`", c.name)), "docs/tiga.md does not name `{}`", c.name);
    }
}
