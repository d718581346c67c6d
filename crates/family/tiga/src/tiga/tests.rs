//! Handler-level tests of Tiga's roles, each driven event by event by
//! core's `Hand`: feed one event at a chosen time, compare what the handler
//! did with what the paper says the transition does.

use super::messages::{FastReply, LogSync, Msg, StartView, Submit, SyncReport, Timer, TsNotify, TxnBody, ViewChange};
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
    (Arc::new(Topology::build(&spec(1), &[])), Config::from_params(&Params::new()).expect("defaults"))
}

/// `shards` shards of three replicas in three regions, one client.
fn spec(shards: u32) -> ClusterSpec {
    ClusterSpec {
        regions: vec!["a".into(), "b".into(), "c".into()],
        server_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
        shards,
        replicas_per_shard: 3,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(0)],
        clients_per_region: 1,
    }
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
    Msg::Submit(Submit { body: Arc::new(body), g_view, t, send_clock_ns: t.saturating_sub(50), low_watermark: 0 })
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
        .filter_map(|(_, m)| if let Msg::Submit(Submit { g_view, t, .. }) = m { Some((*g_view, *t)) } else { None })
        .collect()
}

fn fast_replied(fx: &EffectsOf<Tiga>, seq: u64) -> bool {
    fx.sends().any(|(_, m)| matches!(m, Msg::FastReply(FastReply { id, result: Some(_), .. }) if id.seq == seq))
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
        fx.sends().any(|(_, m)| matches!(m, Msg::FastReply(FastReply { .. })))
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
    let sync = Msg::LogSync(LogSync {
        g_view: view.g_view,
        l_view: view.l_view(ShardId(0)),
        from_pos: 0,
        entries,
        commit_point: 0,
    });
    let mut asked: Vec<TxnId> = Vec::new();
    for fx in [follower.message(leader, sync), follower.persist_all()] {
        asked.extend(
            fx.sends()
                .filter_map(|(_, m)| {
                    if let Msg::SyncReport(SyncReport { missing, .. }) = m { Some(missing.clone()) } else { None }
                })
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

// ---- timestamp agreement among participant leaders (§3.5-3.6) ----

/// Two shards of three replicas, detective mode (optimistic execution).
fn two_shards() -> (Arc<Topology>, Config) {
    let spec = spec(2);
    let params = Params::new().with("preventive", meridian_core::ParamValue::Bool(false));
    (Arc::new(Topology::build(&spec, &[])), Config::from_params(&params).expect("valid"))
}

/// Shard 0's leader and shard 1's leader's node.
fn shard0_leader(topo: &Arc<Topology>, cfg: &Config) -> (ServerHand, NodeId) {
    let me = topo.replicas(ShardId(0))[0];
    let server = Server::new(topo.clone(), ShardId(0), 0, initial_view(topo, cfg), *cfg);
    let hand = Hand::new(server, topo.clone(), me, Now::at(1_000_000));
    assert!(hand.node.is_leader());
    (hand, topo.replicas(ShardId(1))[0])
}

/// A transaction on both shards.
fn two_shard_submit(client: NodeId, seq: u64, t: u64) -> Msg {
    let body = TxnBody {
        id: TxnId { node: client, seq },
        coordinator: client,
        program: Program::new(vec![Op::Append { key: Key(2), element: seq }, Op::Append { key: Key(3), element: seq }]),
        shards: vec![ShardId(0), ShardId(1)],
    };
    Msg::Submit(Submit { body: Arc::new(body), g_view: 1, t, send_clock_ns: t.saturating_sub(50), low_watermark: 0 })
}

fn notes_sent(fx: &EffectsOf<Tiga>, to: NodeId) -> Vec<(u64, bool)> {
    fx.sends()
        .filter(|(n, _)| *n == to)
        .filter_map(
            |(_, m)| if let Msg::TsNotify(TsNotify { t, released, .. }) = m { Some((*t, *released)) } else { None },
        )
        .collect()
}

fn notify(id: TxnId, t: u64, released: bool) -> Msg {
    Msg::TsNotify(TsNotify { id, shard: ShardId(1), g_view: 1, t, released, echo: false })
}

/// The timestamp `seq` was appended to the log at, by this step.
fn logged_at(fx: &EffectsOf<Tiga>, seq: u64) -> Option<u64> {
    fx.appends().find_map(|(_, _, r)| match r {
        super::messages::Record::Log { entries, .. } => entries.iter().find(|e| e.body.id.seq == seq).map(|e| e.t),
        _ => None,
    })
}

fn fast_reply_at(fx: &EffectsOf<Tiga>, seq: u64) -> Option<u64> {
    fx.sends().find_map(|(_, m)| match m {
        Msg::FastReply(FastReply { id, t, result: Some(_), .. }) if id.seq == seq => Some(*t),
        _ => None,
    })
}

#[test]
fn a_leader_announces_its_timestamp_on_arrival_and_again_on_release() {
    let (topo, cfg) = two_shards();
    let client = client_of(&topo);
    let (mut leader, other) = shard0_leader(&topo, &cfg);
    let t = 2_000_000;
    let fx = leader.message(client, two_shard_submit(client, 1, t));
    assert_eq!(notes_sent(&fx, other), [(t, false)], "a proposal on arrival");
    leader.set_time_ns(t);
    let fx = leader.timer(Timer::Release);
    assert_eq!(notes_sent(&fx, other), [(t, true)], "its release");
    assert_eq!(logged_at(&fx, 1), None, "not in the log before agreement");
    let fx = leader.persist_all();
    assert_eq!(fast_reply_at(&fx, 1), Some(t), "detective mode: the optimistic result, once its vote is durable");
}

#[test]
fn equal_timestamps_released_by_every_leader_commit_at_that_timestamp() {
    // Case 1: every participant released T at the same timestamp.
    let (topo, cfg) = two_shards();
    let client = client_of(&topo);
    let (mut leader, other) = shard0_leader(&topo, &cfg);
    let t = 2_000_000;
    leader.message(client, two_shard_submit(client, 1, t));
    leader.set_time_ns(t);
    leader.timer(Timer::Release);
    let id = TxnId { node: client, seq: 1 };
    assert_eq!(logged_at(&leader.message(other, notify(id, t, true)), 1), Some(t), "logged at t");
}

#[test]
fn a_larger_timestamp_from_another_leader_moves_the_transaction_and_revokes_its_execution() {
    // Case 3: this leader executed T at t; shard 1 holds t' > t. T moves to
    // t', its optimistic execution is revoked, and it is released again
    // (and announced again) when the clock reaches t'.
    let (topo, cfg) = two_shards();
    let client = client_of(&topo);
    let (mut leader, other) = shard0_leader(&topo, &cfg);
    let (t, later) = (2_000_000, 2_005_000);
    leader.message(client, two_shard_submit(client, 1, t));
    leader.set_time_ns(t);
    leader.timer(Timer::Release);
    assert_eq!(fast_reply_at(&leader.persist_all(), 1), Some(t), "the optimistic result at t");
    let id = TxnId { node: client, seq: 1 };
    let fx = leader.message(other, notify(id, later, true));
    assert_eq!(fx.counted("rollbacks"), 1, "the optimistic execution is revoked");
    assert_eq!(fx.counted("timestamp_updates"), 1);
    assert_eq!(logged_at(&fx, 1), None, "not before t'");
    leader.set_time_ns(later);
    let fx = leader.timer(Timer::Release);
    assert_eq!(notes_sent(&fx, other), [(later, true)], "released again at t'");
    assert_eq!(logged_at(&fx, 1), Some(later), "logged at the agreed maximum");
    assert_eq!(fast_reply_at(&leader.persist_all(), 1), Some(later), "and answered there");
}

#[test]
fn a_leader_holding_the_maximum_waits_for_the_others_release_at_it() {
    // Case 2: shard 1 proposed less; this leader holds the maximum and
    // logs T only once shard 1 announces releasing it there too.
    let (topo, cfg) = two_shards();
    let client = client_of(&topo);
    let (mut leader, other) = shard0_leader(&topo, &cfg);
    let t = 2_000_000;
    leader.message(client, two_shard_submit(client, 1, t));
    let id = TxnId { node: client, seq: 1 };
    leader.message(other, notify(id, t - 1_000, true));
    leader.set_time_ns(t);
    assert_eq!(logged_at(&leader.timer(Timer::Release), 1), None, "shard 1 has not released it at t yet");
    assert_eq!(logged_at(&leader.message(other, notify(id, t, true)), 1), Some(t));
}

// ---- view change (Algorithm 5) ----

/// The next view of a one-shard deployment: shard 0 led by replica 1.
fn next_view(topo: &Topology, cfg: &Config) -> super::messages::View {
    let mut view = initial_view(topo, cfg);
    view.g_view = 2;
    view.g_vec[0] += 1;
    view
}

fn view_changes_to(fx: &EffectsOf<Tiga>, to: NodeId) -> Vec<u64> {
    fx.sends()
        .filter(|(n, _)| *n == to)
        .filter_map(|(_, m)| if let Msg::ViewChange(ViewChange { g_view, .. }) = m { Some(*g_view) } else { None })
        .collect()
}

#[test]
fn a_server_told_of_a_newer_view_stops_and_sends_its_durable_log_to_the_new_leader() {
    // Algorithm 5 lines 1-15: the queue joins the log, the server leaves
    // the normal status, and its log goes to the new leader once durable.
    let (topo, cfg) = deployment();
    let client = client_of(&topo);
    let mut server = server_hand(&topo, &cfg, 2, 1_000_000);
    server.message(client, submit(client, 1, 7, 2_000_000));
    let new_leader = topo.replicas(ShardId(0))[1];
    let fx = server.message(NodeId(0), Msg::CurrentView(next_view(&topo, &cfg)));
    assert_eq!(server.node.status(), super::server::Status::ViewChange);
    assert!(view_changes_to(&fx, new_leader).is_empty(), "not before its log is durable");
    let fx = server.persist_all();
    assert_eq!(view_changes_to(&fx, new_leader), [2]);
    let log = fx
        .sends()
        .find_map(|(_, m)| if let Msg::ViewChange(ViewChange { log, .. }) = m { Some(log.clone()) } else { None });
    assert_eq!(log.map(|l| l.len()), Some(1), "the queued transaction went into the log it sends");
}

#[test]
fn the_new_leader_starts_the_view_once_a_majority_sent_their_logs() {
    // Algorithm 5 lines 16-32 and 58-63: f + 1 logs (its own included)
    // rebuild the log; the leader is normal again and sends the log to the
    // others.
    let (topo, cfg) = deployment();
    let replicas = topo.replicas(ShardId(0)).to_vec();
    let mut leader = server_hand(&topo, &cfg, 1, 1_000_000);
    let view = next_view(&topo, &cfg);
    leader.message(NodeId(0), Msg::CurrentView(view.clone()));
    let own = leader.persist_all();
    let own_log: Vec<Msg> = own.sends().filter(|(to, _)| *to == replicas[1]).map(|(_, m)| m.clone()).collect();
    assert_eq!(own_log.len(), 1, "its own log, to itself");
    leader.message(replicas[1], own_log[0].clone());
    assert_eq!(leader.node.status(), super::server::Status::ViewChange, "one log is not f + 1");
    let other = Msg::ViewChange(ViewChange {
        g_view: 2,
        l_view: view.l_view(ShardId(0)),
        last_normal_view: 1,
        sync_point: 0,
        commit_point: 0,
        base: 0,
        log: Arc::new(Vec::new()),
    });
    let fx = leader.message(replicas[2], other);
    assert!(
        !fx.sends().any(|(_, m)| matches!(m, Msg::StartView(StartView { .. }))),
        "the rebuilt log is made durable first"
    );
    assert_eq!(leader.node.status(), super::server::Status::Normal, "f + 1 logs rebuild the view");
    let fx = leader.persist_all();
    assert!(leader.node.is_leader());
    let started: Vec<NodeId> = fx
        .sends()
        .filter(|(_, m)| matches!(m, Msg::StartView(StartView { g_view: 2, .. })))
        .map(|(to, _)| to)
        .collect();
    assert!(started.contains(&replicas[0]) && started.contains(&replicas[2]), "the followers get the log: {started:?}");
}

// ---- admission (§3.2) and log synchronization (§3.7) ----

fn fast_reply_t(fx: &EffectsOf<Tiga>, seq: u64) -> Option<u64> {
    fx.sends().find_map(|(_, m)| match m {
        Msg::FastReply(FastReply { id, t, .. }) if id.seq == seq => Some(*t),
        _ => None,
    })
}

#[test]
fn a_late_arrival_conflicting_with_a_released_transaction_is_restamped_behind_it_at_the_leader() {
    // Algorithm 1 lines 1-5: the leader moves T2 past the conflicting T1 it
    // already released (to its clock), rather than break their order.
    let (topo, cfg) = deployment();
    let client = client_of(&topo);
    let mut leader = server_hand(&topo, &cfg, 0, 1_000_000);
    let t1 = 2_000_000;
    leader.message(client, submit(client, 1, 7, t1));
    leader.set_time_ns(t1 + 500);
    leader.timer(Timer::Release);
    assert_eq!(fast_reply_t(&leader.persist_all(), 1), Some(t1), "T1 released at its timestamp");
    let fx = leader.message(client, submit(client, 2, 7, t1 - 1_000));
    assert_eq!(fx.counted("timestamp_updates"), 1);
    leader.timer(Timer::Release);
    let t2 = fast_reply_t(&leader.persist_all(), 2).expect("T2 released once its new timestamp passed");
    assert!(t2 > t1, "re-stamped behind T1: {t2} <= {t1}");
}

#[test]
fn a_follower_holds_a_late_conflicting_arrival_for_the_leaders_order() {
    // Only leaders change timestamps: a follower keeps the late one aside
    // (no fast reply) until the leader's log sync places it.
    let (topo, cfg) = deployment();
    let client = client_of(&topo);
    let leader = topo.replicas(ShardId(0))[0];
    let view = initial_view(&topo, &cfg);
    let mut follower = server_hand(&topo, &cfg, 1, 1_000_000);
    let t1 = 2_000_000;
    follower.message(client, submit(client, 1, 7, t1));
    follower.set_time_ns(t1 + 500);
    follower.timer(Timer::Release);
    assert_eq!(fast_reply_t(&follower.persist_all(), 1), Some(t1));
    follower.message(client, submit(client, 2, 7, t1 - 1_000));
    follower.timer(Timer::Release);
    assert_eq!(fast_reply_t(&follower.persist_all(), 2), None, "held, not released");
    let t2 = t1 + 300;
    let sync = Msg::LogSync(LogSync {
        g_view: view.g_view,
        l_view: view.l_view(ShardId(0)),
        from_pos: 0,
        entries: vec![(TxnId { node: client, seq: 1 }, t1), (TxnId { node: client, seq: 2 }, t2)],
        commit_point: 0,
    });
    let mut reported = Vec::new();
    // Progress is reported every server tick (and bodies asked at once).
    follower.message(leader, sync);
    for fx in [follower.timer(Timer::ServerTick), follower.persist_all()] {
        reported.extend(fx.sends().filter_map(|(to, m)| match m {
            Msg::SyncReport(SyncReport { sync_point, .. }) if to == leader => Some(*sync_point),
            _ => None,
        }));
    }
    assert_eq!(reported.last(), Some(&2), "both entries synced in the leader's order, and reported: {reported:?}");
    assert_eq!(follower.node.commit_point(), 0, "committed only when the leader says so");
}

// ---- the view manager (Algorithm 4) ----

fn view_manager(topo: &Arc<Topology>, cfg: &Config) -> (Hand<Tiga, super::vm::ViewManager>, NodeId) {
    let me = topo.service("viewmgr")[0];
    let vm = super::vm::ViewManager::new(topo.clone(), me, initial_view(topo, cfg), *cfg);
    (Hand::new(vm, topo.clone(), me, Now::at(1_000_000)), me)
}

fn current_views(fx: &EffectsOf<Tiga>) -> Vec<(NodeId, u64)> {
    fx.sends().filter_map(|(to, m)| if let Msg::CurrentView(v) = m { Some((to, v.g_view)) } else { None }).collect()
}

#[test]
fn the_view_manager_tells_the_current_view_to_whoever_asks_or_reports_an_older_one() {
    let topo = Arc::new(Topology::build(&spec(1), &[meridian_core::ServiceSpec::round_robin("viewmgr", 3)]));
    let cfg = Config::from_params(&Params::new()).expect("defaults");
    let (mut vm, _) = view_manager(&topo, &cfg);
    vm.start(Vec::new());
    let server = topo.replicas(ShardId(0))[1];
    assert_eq!(current_views(&vm.message(server, Msg::GetView)), [(server, 1)]);
    let fresh = Msg::Heartbeat { g_view: 1, recovering: false, delays: Vec::new() };
    assert!(current_views(&vm.message(server, fresh)).is_empty(), "a server in the current view hears nothing");
    let stale = Msg::Heartbeat { g_view: 0, recovering: false, delays: Vec::new() };
    assert_eq!(current_views(&vm.message(server, stale)), [(server, 1)], "one behind is told the view");
}

#[test]
fn deadlines_in_ticks_round_up_so_nothing_is_given_up_early() {
    let p = Params::new()
        .with("coordinator_tick_ms", meridian_core::ParamValue::Int(10))
        .with("retry_ms", meridian_core::ParamValue::Int(15))
        .with("inquiry_after_ms", meridian_core::ParamValue::Float(0.5));
    let cfg = Config::from_params(&p).expect("valid");
    assert_eq!(cfg.retry_ticks, 2, "15 ms: two 10 ms ticks cover it");
    assert_eq!(cfg.inquiry_after_ticks, 1, "at least one tick");
    let defaults = Config::from_params(&Params::new()).expect("defaults");
    assert_eq!((defaults.inquiry_after_ticks, defaults.retry_ticks, defaults.fetch_after_ticks), (1, 200, 25));
}
