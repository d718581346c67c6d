//! Handler-level tests of Tiga's roles, each driven event by event by
//! core's `Hand`: feed one event at a chosen time, compare what the handler
//! did with what the paper says the transition does.

use super::messages::{
    FastReply, LogSync, Msg, Standing, StartView, Submit, SyncReport, Timer, TsNotify, TxnBody, ViewChange,
};
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
    fx.sends().any(|(_, m)| matches!(m, Msg::FastReply(r) if r.id.seq == seq && r.result.is_some()))
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
        fx.sends().any(|(_, m)| matches!(m, Msg::FastReply(_)))
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
        Msg::FastReply(r) if r.id.seq == seq && r.result.is_some() => Some(r.t),
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
fn a_leader_repeats_an_announcement_only_resend_ns_after_it_last_sent_it_by_its_monotonic_clock() {
    let (topo, cfg) = two_shards();
    let client = client_of(&topo);
    let (mut leader, other) = shard0_leader(&topo, &cfg);
    let t = 5_000_000_000; // far ahead: the transaction stays queued
    let fx = leader.message(client, two_shard_submit(client, 1, t));
    assert_eq!(notes_sent(&fx, other), [(t, false)], "a proposal on arrival");
    leader.advance_ns(cfg.resend_ns / 2);
    let fx = leader.timer(Timer::Resend);
    assert_eq!(notes_sent(&fx, other), [], "announced less than resend_ns ago: not repeated");
    leader.advance_ns(cfg.resend_ns / 2);
    let fx = leader.timer(Timer::Resend);
    assert_eq!(notes_sent(&fx, other), [(t, false)], "repeated once resend_ns has passed");
    let fx = leader.timer(Timer::Resend);
    assert_eq!(notes_sent(&fx, other), [], "and not again until resend_ns passes once more");
    // A drifting node's next pass can come a nanosecond short of resend_ns
    // by its monotonic clock: still the next repeat.
    leader.advance_ns(cfg.resend_ns - 1);
    let fx = leader.timer(Timer::Resend);
    assert_eq!(notes_sent(&fx, other), [(t, false)], "one pass later, whatever the rounding");
    // The wall clock jumps back; the monotonic clock still moves on, and
    // the repeat is not held up by the jump.
    leader.advance_ns(cfg.resend_ns);
    leader.now.clock_ns -= cfg.resend_ns * 3 / 2;
    let fx = leader.timer(Timer::Resend);
    assert_eq!(notes_sent(&fx, other), [(t, false)], "repeated by elapsed monotonic time, whatever the wall clock did");
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
        Msg::FastReply(r) if r.id.seq == seq => Some(r.t),
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
fn conflict_maps_pruned_to_their_window_restamp_only_arrivals_below_the_floor() {
    // §3.2's maps keep a stamp per key; Meridian's keep those within
    // `conflict_window_ms` of the newest and a floor for the rest. An
    // arrival above the floor on a key never written keeps its timestamp,
    // as the paper's maps would let it; one below the floor is re-stamped.
    let (topo, _) = deployment();
    let params = Params::new().with("conflict_window_ms", meridian_core::ParamValue::Float(1.0));
    let cfg = Config::from_params(&params).expect("valid");
    let client = client_of(&topo);
    let t0 = 2_000_000;
    let mut leader = server_hand(&topo, &cfg, 0, t0 - 100_000);
    let n = 6_000u64;
    for i in 0..n {
        leader.message(client, submit(client, i + 1, 1_000 + i, t0 + i * 1_000));
    }
    let newest = t0 + (n - 1) * 1_000;
    leader.set_time_ns(newest + 1_000);
    leader.timer(Timer::Release);
    leader.persist_all();
    let mut keys = None;
    meridian_core::Process::state_sizes(&leader.node, &mut |name, v| {
        if name == "conflict_keys" {
            keys = Some(v);
        }
    });
    let keys = keys.expect("reported");
    assert!(keys < 5_000, "the maps were pruned to about the window: {keys} keys for {n} released");

    // 0.5 ms behind the newest: within the window, a key never written.
    let fx = leader.message(client, submit(client, n + 1, 99_999, newest - 500_000));
    assert_eq!((fx.counted("timestamp_updates"), fx.counted("conflict_floor_updates")), (0, 0), "kept");
    // 4 ms behind: below the floor, although its key was never written.
    let fx = leader.message(client, submit(client, n + 2, 99_998, t0 + 1_000));
    assert_eq!((fx.counted("timestamp_updates"), fx.counted("conflict_floor_updates")), (1, 1), "re-stamped");
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
    let fresh = Msg::Heartbeat { g_view: 1, standing: Standing::Serving, delays: Vec::new() };
    assert!(current_views(&vm.message(server, fresh)).is_empty(), "a server in the current view hears nothing");
    let stale = Msg::Heartbeat { g_view: 0, standing: Standing::Serving, delays: Vec::new() };
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

// ---- exact effects ----

type Fx = meridian_core::Effect<Msg, super::messages::Record, Timer>;

/// Asserts that `fx` is exactly `expected`, effect by effect, in order.
/// Effects are compared through their `Debug` rendering: messages carry
/// transaction bodies and checkpoints, which have no equality.
#[track_caller]
fn assert_effects(fx: &EffectsOf<Tiga>, expected: &[Fx]) {
    assert_eq!(format!("{:#?}", fx.all()), format!("{expected:#?}"));
}

fn send(to: NodeId, msg: Msg) -> Fx {
    Fx::Send { to, msg }
}

fn count(counter: &'static str) -> Fx {
    Fx::Count { counter, delta: 1 }
}

/// A one-shard deployment with the view manager's three members.
fn deployment_with_vm() -> (Arc<Topology>, Config) {
    let services = [meridian_core::ServiceSpec::round_robin("viewmgr", 3)];
    (Arc::new(Topology::build(&spec(1), &services)), Config::from_params(&Params::new()).expect("defaults"))
}

fn body(client: NodeId, seq: u64, key: u64) -> Arc<TxnBody> {
    Arc::new(TxnBody {
        id: TxnId { node: client, seq },
        coordinator: client,
        program: Program::new(vec![Op::Append { key: Key(key), element: seq }]),
        shards: vec![ShardId(0)],
    })
}

fn entry(client: NodeId, seq: u64, key: u64, t: u64) -> super::messages::LogEntry {
    super::messages::LogEntry { body: body(client, seq, key), t }
}

// ---- the coordinator: fast and slow paths (§3.4, §3.7, Appendix E) ----

type CoordinatorHand = Hand<Tiga, super::coordinator::Coordinator>;

/// A started coordinator whose epoch is durable, and the id and timestamp
/// of the one-shard read it submitted as request 1.
fn coordinator_with_a_read(topo: &Arc<Topology>, cfg: &Config) -> (CoordinatorHand, TxnId, u64) {
    let client = client_of(topo);
    let coordinator = super::coordinator::Coordinator::new(client, topo.clone(), initial_view(topo, cfg), *cfg);
    let mut hand: CoordinatorHand = Hand::new(coordinator, topo.clone(), client, Now::at(1_000_000));
    hand.start(Vec::new());
    hand.persist_all();
    let fx = hand.request(meridian_core::RequestId(1), Program::new(vec![Op::Read { key: Key(3) }]));
    let submitted: Vec<(NodeId, TxnId, u64)> = fx
        .sends()
        .filter_map(|(to, m)| if let Msg::Submit(Submit { body, t, .. }) = m { Some((to, body.id, *t)) } else { None })
        .collect();
    let replicas = topo.replicas(ShardId(0));
    assert_eq!(submitted.iter().map(|(to, _, _)| *to).collect::<Vec<_>>(), replicas, "to every replica");
    let (_, id, t) = submitted[0];
    assert!(submitted.iter().all(|(_, i, ts)| (*i, *ts) == (id, t)), "one id, one timestamp");
    (hand, id, t)
}

fn fast(id: TxnId, t: u64, hash: u128, result: Option<Vec<meridian_core::OpResult>>) -> Msg {
    Msg::FastReply(Box::new(FastReply { id, shard: ShardId(0), g_view: 1, l_view: 0, t, hash, result, owd_ns: None }))
}

fn synced(id: TxnId, t: u64) -> Msg {
    Msg::SyncReply(super::messages::SyncReply { shard: ShardId(0), g_view: 1, l_view: 0, synced: vec![(id, t)] })
}

fn committed(results: Vec<meridian_core::OpResult>) -> Fx {
    Fx::Complete { request: meridian_core::RequestId(1), outcome: meridian_core::Outcome::Committed { results } }
}

#[test]
fn a_coordinator_commits_on_a_super_quorum_of_matching_fast_replies() {
    // §3.4: with f = 1 the super quorum is all three replicas, the leader
    // included; the client gets the leader's results, the followers' hash
    // and timestamp only have to match it.
    let (topo, cfg) = deployment();
    let (mut c, id, t) = coordinator_with_a_read(&topo, &cfg);
    let replicas = topo.replicas(ShardId(0)).to_vec();
    let read = vec![Some(meridian_core::Value::int(9, 42))];
    assert_effects(&c.message(replicas[1], fast(id, t, 0xA, None)), &[]);
    assert_effects(&c.message(replicas[0], fast(id, t, 0xA, Some(read.clone()))), &[]);
    let fx = c.message(replicas[2], fast(id, t, 0xA, None));
    assert_effects(&fx, &[count("fast_path"), committed(read)]);
    assert_eq!(c.node.in_flight(), 0);
}

#[test]
fn a_mismatched_hash_keeps_a_coordinator_off_the_fast_path_and_asks_the_followers() {
    // §3.4: a follower whose log hash differs from the leader's may have
    // released a different history: no fast commit, and (Appendix E) the
    // next tick asks the followers which they have synced.
    let (topo, cfg) = deployment();
    let (mut c, id, t) = coordinator_with_a_read(&topo, &cfg);
    let replicas = topo.replicas(ShardId(0)).to_vec();
    c.message(replicas[0], fast(id, t, 0xA, Some(vec![None])));
    c.message(replicas[1], fast(id, t, 0xA, None));
    assert_effects(&c.message(replicas[2], fast(id, t, 0xB, None)), &[]);
    assert_eq!(c.node.in_flight(), 1, "not committed");
    c.advance_ns(cfg.coordinator_tick_ns);
    let tick = c.next_timer_id();
    let ask = Msg::SyncInquiry { shard: ShardId(0), ids: vec![id] };
    assert_effects(
        &c.timer(Timer::CoordinatorTick),
        &[
            Fx::SetTimer { id: tick, after_ns: cfg.coordinator_tick_ns, timer: Timer::CoordinatorTick },
            send(replicas[1], ask.clone()),
            send(replicas[2], ask),
        ],
    );
}

#[test]
fn a_coordinator_commits_on_the_slow_path_with_the_leaders_reply_and_f_synced_followers() {
    // §3.7: the leader's reply and f followers that synced the transaction
    // at the leader's timestamp; a follower synced at another timestamp
    // does not count.
    let (topo, cfg) = deployment();
    let (mut c, id, t) = coordinator_with_a_read(&topo, &cfg);
    let replicas = topo.replicas(ShardId(0)).to_vec();
    let read = vec![Some(meridian_core::Value::int(9, 42))];
    assert_effects(&c.message(replicas[1], synced(id, t)), &[]);
    assert_eq!(c.node.in_flight(), 1, "no commit without the leader's reply");
    let (mut other, other_id, other_t) = coordinator_with_a_read(&topo, &cfg);
    other.message(replicas[0], fast(other_id, other_t + 5, 0xA, Some(read.clone())));
    assert_effects(&other.message(replicas[2], synced(other_id, other_t)), &[]);
    assert_eq!(other.node.in_flight(), 1, "synced at another timestamp than the leader's");
    let fx = c.message(replicas[0], fast(id, t, 0xA, Some(read.clone())));
    assert_effects(&fx, &[count("slow_path"), committed(read)]);
}

// ---- the view manager: failure detection (Algorithm 4) ----

type VmHand = Hand<Tiga, super::vm::ViewManager>;

/// Delivers the members' messages to each other (each step made durable
/// before its messages leave) until none is left; returns what they sent
/// to anyone else, in order, with the sender.
fn pump(vms: &mut [VmHand], first: Vec<(usize, EffectsOf<Tiga>)>) -> Vec<(usize, NodeId, Msg)> {
    let members: Vec<NodeId> = vms.iter().map(|h| h.me()).collect();
    let mut queue: std::collections::VecDeque<(usize, NodeId, Msg)> = Default::default();
    let mut out = Vec::new();
    let mut collect = |from: usize, fx: &EffectsOf<Tiga>, queue: &mut std::collections::VecDeque<_>| {
        for (to, m) in fx.sends() {
            if members.contains(&to) {
                queue.push_back((from, to, m.clone()));
            } else {
                out.push((from, to, m.clone()));
            }
        }
    };
    for (from, fx) in first {
        collect(from, &fx, &mut queue);
        let durable = vms[from].persist_all();
        collect(from, &durable, &mut queue);
    }
    let mut steps = 0;
    while let Some((from, to, m)) = queue.pop_front() {
        steps += 1;
        assert!(steps < 1_000, "the view manager's members keep talking");
        let i = members.iter().position(|n| *n == to).expect("a member");
        let fx = vms[i].message(members[from], m);
        collect(i, &fx, &mut queue);
        let durable = vms[i].persist_all();
        collect(i, &durable, &mut queue);
    }
    out
}

fn set_all_ns(vms: &mut [VmHand], t: u64) {
    for vm in vms.iter_mut() {
        vm.set_time_ns(t);
    }
}

fn heartbeat() -> Msg {
    Msg::Heartbeat { g_view: 1, standing: Standing::Serving, delays: Vec::new() }
}

/// The view manager's three members, started at `t0` and settled.
fn view_managers(topo: &Arc<Topology>, cfg: &Config, t0: u64) -> Vec<VmHand> {
    let view = initial_view(topo, cfg);
    let mut vms: Vec<VmHand> = topo
        .service("viewmgr")
        .iter()
        .map(|m| {
            Hand::new(super::vm::ViewManager::new(topo.clone(), *m, view.clone(), *cfg), topo.clone(), *m, Now::at(t0))
        })
        .collect();
    let started: Vec<(usize, EffectsOf<Tiga>)> = (0..3).map(|i| (i, vms[i].start(Vec::new()))).collect();
    assert!(pump(&mut vms, started).is_empty(), "nothing to tell before any view changes");
    vms
}

/// View 2 of a one-shard deployment, led by replica 1, told to every
/// server and client by the member that proposed it.
fn view_2_told(topo: &Topology, cfg: &Config) -> Vec<(usize, NodeId, Msg)> {
    let next = super::messages::View { g_view: 2, g_vec: vec![1], mode: initial_view(topo, cfg).mode };
    let everyone: Vec<NodeId> = topo.all_replicas().chain(topo.clients().iter().copied()).collect();
    everyone.iter().map(|n| (0, *n, Msg::CurrentView(next.clone()))).collect()
}

#[test]
fn the_view_manager_replaces_a_leader_silent_past_the_timeout_and_tells_everyone() {
    // Algorithm 4 lines 1-8 and 24-36: the Paxos leader among the members
    // proposes a view whose shard leader is a live replica once the old
    // leader was silent for `leader_timeout_ms`; once a majority accepted
    // it, it installs it and tells every server and client.
    let (topo, cfg) = deployment_with_vm();
    let t0 = 1_000_000;
    let mut vms = view_managers(&topo, &cfg, t0);
    let replicas = topo.replicas(ShardId(0)).to_vec();
    let timeout = cfg.leader_timeout_ns;
    // Everyone is heard at t0; only the followers later on.
    for r in &replicas {
        vms[0].message(*r, heartbeat());
    }
    set_all_ns(&mut vms, t0 + timeout / 2);
    for r in &replicas[1..] {
        vms[0].message(*r, heartbeat());
    }
    set_all_ns(&mut vms, t0 + timeout - 1);
    let tick = vms[0].timer(Timer::VmTick);
    assert!(pump(&mut vms, vec![(0, tick)]).is_empty(), "the leader was heard within the timeout");
    set_all_ns(&mut vms, t0 + timeout);
    let tick = vms[0].timer(Timer::VmTick);
    let told = pump(&mut vms, vec![(0, tick)]);
    let expected = view_2_told(&topo, &cfg);
    assert_eq!(format!("{told:?}"), format!("{expected:?}"), "replica 1 leads view 2; everyone is told");
    let Msg::CurrentView(next) = &expected[0].2 else { unreachable!() };
    assert_eq!(vms[0].node.view(), next, "the member that proposed it installed it");
}

#[test]
fn the_view_manager_replaces_a_leader_cut_off_from_its_followers_only_by_a_replica_it_hears_from() {
    // Beyond the paper (reach.rs): the leader still heartbeats but says it
    // has not heard from f of its followers. With no other replica fit to
    // lead, a new view would name it again, so none is made; a follower
    // heard only since the leader's report (a partition just healed) does
    // not count yet; one heard for two heartbeats before it takes over.
    let (topo, cfg) = deployment_with_vm();
    let t0 = 1_000_000;
    let mut vms = view_managers(&topo, &cfg, t0);
    let replicas = topo.replicas(ShardId(0)).to_vec();
    let hb = |g_view: u64, standing: Standing| Msg::Heartbeat { g_view, standing, delays: Vec::new() };
    let mut t = t0 + cfg.leader_timeout_ns;
    set_all_ns(&mut vms, t);
    vms[0].message(replicas[0], hb(1, Standing::CutOff));
    vms[0].message(replicas[2], hb(1, Standing::Recovering));
    let tick = vms[0].timer(Timer::VmTick);
    assert!(pump(&mut vms, vec![(0, tick)]).is_empty(), "no follower fit to lead: the leader stays");
    vms[0].message(replicas[1], heartbeat());
    vms[0].message(replicas[0], hb(1, Standing::CutOff));
    let tick = vms[0].timer(Timer::VmTick);
    assert!(pump(&mut vms, vec![(0, tick)]).is_empty(), "replica 1 is heard only since the leader's report");
    for _ in 0..2 {
        t += cfg.heartbeat_ns;
        set_all_ns(&mut vms, t);
        vms[0].message(replicas[1], heartbeat());
        vms[0].message(replicas[2], hb(1, Standing::Recovering));
    }
    vms[0].message(replicas[0], hb(1, Standing::CutOff));
    let tick = vms[0].timer(Timer::VmTick);
    let told = pump(&mut vms, vec![(0, tick)]);
    let expected = view_2_told(&topo, &cfg);
    assert_eq!(format!("{told:?}"), format!("{expected:?}"), "replica 1, heard all along, leads view 2");

    // Replica 1 is cut off too (say the shard split {0, 1} | {2}). Replica
    // 0, demoted, serves again, but said it was cut off a moment ago: it is
    // not fit to lead, or the two would take turns. Replica 2, once it
    // serves, takes over.
    for _ in 0..3 {
        t += cfg.heartbeat_ns;
        set_all_ns(&mut vms, t);
        vms[0].message(replicas[0], hb(2, Standing::Serving));
        vms[0].message(replicas[1], hb(2, Standing::CutOff));
        vms[0].message(replicas[2], hb(2, Standing::Recovering));
    }
    let tick = vms[0].timer(Timer::VmTick);
    assert!(pump(&mut vms, vec![(0, tick)]).is_empty(), "replica 0 was cut off lately; replica 2 restarted");
    for _ in 0..3 {
        t += cfg.heartbeat_ns;
        set_all_ns(&mut vms, t);
        vms[0].message(replicas[0], hb(2, Standing::Serving));
        vms[0].message(replicas[2], hb(2, Standing::Serving));
        vms[0].message(replicas[1], hb(2, Standing::CutOff));
    }
    let tick = vms[0].timer(Timer::VmTick);
    let told = pump(&mut vms, vec![(0, tick)]);
    let views: Vec<String> = told
        .iter()
        .filter_map(
            |(_, _, m)| if let Msg::CurrentView(v) = m { Some(format!("{}:{:?}", v.g_view, v.g_vec)) } else { None },
        )
        .collect();
    assert!(!views.is_empty() && views.iter().all(|v| v == "3:[2]"), "replica 2 leads view 3: {views:?}");
}

// ---- a follower joins the new view (Algorithm 5 lines 37-43) ----

#[test]
fn a_follower_installs_the_new_leaders_log_from_start_view_and_reports_it_synced() {
    let (topo, cfg) = deployment();
    let client = client_of(&topo);
    let replicas = topo.replicas(ShardId(0)).to_vec();
    let mut follower = server_hand(&topo, &cfg, 2, 1_000_000);
    // Its own log holds a transaction the new view did not keep.
    follower.message(client, submit(client, 3, 9, 1_500_000));
    let view = next_view(&topo, &cfg);
    follower.message(NodeId(0), Msg::CurrentView(view.clone()));
    follower.persist_all();
    let log = vec![entry(client, 1, 7, 2_000_000), entry(client, 2, 8, 2_001_000)];
    let start = |from_log: Vec<super::messages::LogEntry>| {
        Msg::StartView(StartView { g_view: 2, l_view: 1, base: 0, log: Arc::new(from_log), checkpoint: None })
    };
    assert_effects(&follower.message(replicas[0], start(log.clone())), &[]);
    assert_eq!(follower.node.status(), super::server::Status::ViewChange, "only the new leader's StartView counts");
    let fx = follower.message(replicas[1], start(log.clone()));
    assert_eq!(follower.node.status(), super::server::Status::Normal);
    assert_eq!(follower.node.log().all(), log.as_slice(), "the new leader's log replaced its own");
    assert_eq!(follower.node.sync_point(), 2);
    assert_eq!(fx.sends().count(), 0, "the report waits for the installed log to be durable");
    let report = Msg::SyncReport(SyncReport { g_view: 2, l_view: 1, sync_point: 2, missing: Vec::new() });
    assert_effects(&follower.persist_all(), &[send(replicas[1], report)]);
}

// ---- a restarted server rejoins (Algorithm 6) ----

#[test]
fn a_restarted_server_stays_recovering_until_its_leader_gives_it_the_log() {
    let (topo, cfg) = deployment_with_vm();
    let client = client_of(&topo);
    let replicas = topo.replicas(ShardId(0)).to_vec();
    let view = initial_view(&topo, &cfg);
    let mut server = server_hand(&topo, &cfg, 2, 1_000_000);
    let first = entry(client, 1, 7, 900_000);
    let durable = vec![
        super::messages::Record::Log { pos: 0, entries: smallvec::smallvec![first.clone()] },
        super::messages::Record::SyncPoint(1),
    ];
    let fx = server.start(durable);
    assert_eq!(server.node.status(), super::server::Status::Recovering);
    let timer = |id: u64, after_ns: u64, timer: Timer| Fx::SetTimer { id: meridian_core::TimerId(id), after_ns, timer };
    let mut expected = vec![
        timer(1, cfg.server_tick_ns, Timer::ServerTick),
        timer(2, cfg.heartbeat_ns, Timer::Heartbeat),
        timer(3, cfg.probe_interval_ns, Timer::Probe),
        timer(4, cfg.resend_ns, Timer::Resend),
    ];
    expected.extend(topo.service("viewmgr").iter().map(|vm| send(*vm, Msg::GetView)));
    assert_effects(&fx, &expected);
    assert_eq!(server.node.log().all(), std::slice::from_ref(&first), "its durable log is back");
    assert!(fast_reply_t(&server.message(client, submit(client, 2, 8, 1_100_000)), 2).is_none());
    server.set_time_ns(1_200_000);
    server.timer(Timer::Release);
    assert_eq!(server.persist_all().sends().count(), 0, "a recovering server admits nothing");
    // Still view 1: it asks the view's leader for the log.
    let fx = server.message(topo.service("viewmgr")[0], Msg::CurrentView(view.clone()));
    let asked = ViewChange {
        g_view: 1,
        l_view: 0,
        last_normal_view: 1,
        sync_point: 1,
        commit_point: 0,
        base: 0,
        log: Arc::new(vec![first.clone()]),
    };
    assert_effects(&fx, &[send(replicas[0], Msg::ViewChange(asked))]);
    assert_eq!(server.node.status(), super::server::Status::Recovering);
    let log = vec![first, entry(client, 3, 9, 1_000_000)];
    let start = StartView { g_view: 1, l_view: 0, base: 0, log: Arc::new(log.clone()), checkpoint: None };
    server.message(replicas[0], Msg::StartView(start));
    assert_eq!(server.node.status(), super::server::Status::Normal, "rejoined");
    assert_eq!(server.node.log().all(), log.as_slice());
    let report = Msg::SyncReport(SyncReport { g_view: 1, l_view: 0, sync_point: 2, missing: Vec::new() });
    assert_effects(&server.persist_all(), &[send(replicas[0], report)]);
}

/// What a server's effects left on its disk, compactions applied: the
/// records a restart gives it back.
#[derive(Default)]
struct Disk(Vec<(meridian_core::Lsn, super::messages::Record)>);

impl Disk {
    fn keep(&mut self, fx: EffectsOf<Tiga>) -> EffectsOf<Tiga> {
        for e in fx.all() {
            match e {
                meridian_core::Effect::Append { lsn, record, .. } => self.0.push((*lsn, record.clone())),
                meridian_core::Effect::Compact { upto, snapshot, .. } => {
                    self.0.retain(|(lsn, _)| lsn > upto);
                    self.0.insert(0, (*upto, snapshot.clone()));
                }
                _ => {}
            }
        }
        fx
    }

    fn records(&self) -> Vec<super::messages::Record> {
        self.0.iter().map(|(_, r)| r.clone()).collect()
    }
}

/// `replica` of shard 0 started again from `disk`, in view 1; what it
/// records at start goes to `disk` too.
fn restarted(topo: &Arc<Topology>, cfg: &Config, replica: u32, clock_ns: u64, disk: &mut Disk) -> ServerHand {
    let mut server = server_hand(topo, cfg, replica, clock_ns);
    disk.keep(server.start(disk.records()));
    assert_eq!(server.node.status(), super::server::Status::Recovering);
    server
}

/// When [`released_first`] releases transaction 1.
const FIRST_T: u64 = 2_000_000;

/// `replica` of shard 0 in view 1 after it admitted transaction 1 (key 7)
/// and released it at [`FIRST_T`], what it appended kept on `disk`.
fn released_first(topo: &Arc<Topology>, cfg: &Config, replica: u32, disk: &mut Disk) -> ServerHand {
    let client = client_of(topo);
    let mut server = server_hand(topo, cfg, replica, 1_000_000);
    disk.keep(server.message(client, submit(client, 1, 7, FIRST_T)));
    server.set_time_ns(FIRST_T);
    disk.keep(server.timer(Timer::Release));
    server
}

#[test]
fn a_leader_restarted_during_a_view_change_counts_its_queue_past_its_sync_point() {
    // Algorithm 5 lines 7-9: the queue joins the log unreleased. A leader's
    // log is synced to its end only until then; restarted, it must not
    // report its queue as synced, or the next view change keeps it in part
    // (a) as if committed, at timestamps other shards may have replaced.
    let (topo, cfg) = deployment_with_vm();
    let client = client_of(&topo);
    let mut disk = Disk::default();
    let mut leader = released_first(&topo, &cfg, 0, &mut disk);
    disk.keep(leader.message(client, submit(client, 2, 8, 5_000_000)));
    disk.keep(leader.persist_all());
    assert_eq!((leader.node.log().len(), leader.node.sync_point()), (1, 1), "released: its own log");
    disk.keep(leader.message(NodeId(0), Msg::CurrentView(next_view(&topo, &cfg))));
    disk.keep(leader.persist_all());
    assert_eq!((leader.node.log().len(), leader.node.sync_point()), (2, 1), "the queue joined past the sync-point");
    for restart in 1..=2 {
        let mut back = restarted(&topo, &cfg, 0, 3_000_000, &mut disk);
        disk.keep(back.persist_all());
        assert_eq!(back.node.log().len(), 2, "restart {restart}: its durable log is back, queue included");
        assert_eq!(back.node.sync_point(), 1, "restart {restart}: synced only as far as it had released");
    }
}

#[test]
fn a_leader_restarted_twice_counts_its_optimistic_executions_past_its_sync_point_both_times() {
    // Detective mode: an optimistic execution's reply is a vote, recorded
    // as `Tentative`. The first restart puts it in the log past the
    // sync-point; a second restart must not count it as synced.
    let (topo, cfg) = two_shards();
    let client = client_of(&topo);
    let mut disk = Disk::default();
    let (mut leader, _) = shard0_leader(&topo, &cfg);
    let t = 2_000_000;
    disk.keep(leader.message(client, submit(client, 1, 4, t)));
    disk.keep(leader.message(client, two_shard_submit(client, 2, t + 1_000)));
    leader.set_time_ns(t + 1_000);
    disk.keep(leader.timer(Timer::Release));
    let fx = disk.keep(leader.persist_all());
    assert_eq!(fast_reply_at(&fx, 2), Some(t + 1_000), "executed optimistically and answered");
    assert_eq!((leader.node.log().len(), leader.node.sync_point()), (1, 1), "only the one-shard entry is logged");
    for restart in 1..=2 {
        let before = disk.0.len();
        let mut back = restarted(&topo, &cfg, 0, 3_000_000, &mut disk);
        disk.keep(back.persist_all());
        assert_eq!(back.node.log().len(), 2, "restart {restart}: its vote is in the log");
        assert_eq!(back.node.sync_point(), 1, "restart {restart}: and past the sync-point");
        if restart == 1 {
            // A write-ahead log keeps a prefix of what one handler appended:
            // torn before the record logging the vote, it is still counted.
            let mut torn = Disk(disk.0[..disk.0.len() - 1].to_vec());
            assert!(disk.0.len() > before, "the restart recorded something");
            assert!(matches!(disk.0.last(), Some((_, super::messages::Record::Log { .. }))), "the vote, last");
            let back = restarted(&topo, &cfg, 0, 3_000_000, &mut torn);
            assert_eq!((back.node.log().len(), back.node.sync_point()), (2, 1), "a torn restart keeps the vote");
        }
    }
}

#[test]
fn a_follower_rejoining_its_view_keeps_the_votes_its_leader_has_not_synced() {
    // Algorithm 6 replaces a rejoining server's log with its leader's. A
    // follower's fast reply is a vote a coordinator may count in a super
    // quorum; it was durable before the crash and must still be in its log
    // for the next view change, past the sync-point, after the leader's
    // entries.
    let (topo, cfg) = deployment_with_vm();
    let client = client_of(&topo);
    let replicas = topo.replicas(ShardId(0)).to_vec();
    let mut disk = Disk::default();
    let mut follower = released_first(&topo, &cfg, 2, &mut disk);
    let t = FIRST_T;
    let fx = disk.keep(follower.persist_all());
    assert_eq!(fast_reply_t(&fx, 1), Some(t), "it voted for T at t");
    assert_eq!((follower.node.log().len(), follower.node.sync_point()), (1, 0));
    let mut back = restarted(&topo, &cfg, 2, 3_000_000, &mut disk);
    back.message(topo.service("viewmgr")[0], Msg::CurrentView(initial_view(&topo, &cfg)));
    let leaders = vec![entry(client, 3, 9, 1_500_000)];
    let start = StartView { g_view: 1, l_view: 0, base: 0, log: Arc::new(leaders.clone()), checkpoint: None };
    back.message(replicas[0], Msg::StartView(start));
    assert_eq!(back.node.status(), super::server::Status::Normal, "rejoined");
    let voted = entry(client, 1, 7, t);
    assert_eq!(back.node.log().all(), [leaders[0].clone(), voted].as_slice(), "its vote follows the leader's log");
    let report = Msg::SyncReport(SyncReport { g_view: 1, l_view: 0, sync_point: 1, missing: Vec::new() });
    assert_effects(&back.persist_all(), &[send(replicas[0], report)]);
}

// ---- checkpoints (§4) ----

#[test]
fn a_leader_checkpoints_after_checkpoint_entries_and_sends_it_to_a_follower_that_lags_behind_it() {
    let topo = Arc::new(Topology::build(&spec(1), &[]));
    let params = Params::new().with("checkpoint_entries", meridian_core::ParamValue::Int(2));
    let cfg = Config::from_params(&params).expect("valid");
    let client = client_of(&topo);
    let replicas = topo.replicas(ShardId(0)).to_vec();
    let mut leader = server_hand(&topo, &cfg, 0, 1_000_000);
    let t = 2_000_000;
    leader.message(client, submit(client, 1, 7, t));
    leader.message(client, submit(client, 2, 8, t + 1_000));
    leader.set_time_ns(t + 1_000);
    leader.timer(Timer::Release);
    leader.persist_all();
    assert_eq!(leader.node.log().len(), 2);
    // Replica 1 synced both: with the leader's durable log, f + 1 = 2.
    let report = |sync_point| Msg::SyncReport(SyncReport { g_view: 1, l_view: 0, sync_point, missing: Vec::new() });
    let fx = leader.message(replicas[1], report(2));
    assert_eq!(leader.node.commit_point(), 2);
    assert_eq!(fx.counted("checkpoints"), 1, "two executed entries: a checkpoint");
    assert_eq!(fx.compactions().count(), 1, "the durable log is compacted into a snapshot");
    assert_eq!((leader.node.checkpoint().upto, leader.node.log().base()), (2, 2));
    leader.persist_all();
    // Replica 2 never acknowledged: after `resync_after_ticks` ticks it is
    // sent again from 0, which the leader folded, so it gets the checkpoint.
    let mut sent = Vec::new();
    for _ in 0..cfg.resync_after_ticks {
        let fx = leader.timer(Timer::ServerTick);
        sent.extend(fx.sends().filter_map(|(to, m)| match m {
            Msg::CheckpointState { g_view, checkpoint } => Some((to, *g_view, checkpoint.clone())),
            _ => None,
        }));
    }
    assert_eq!(sent.len(), 1, "once: {sent:?}");
    let (to, g_view, checkpoint) = sent.pop().expect("one");
    assert_eq!((to, g_view, checkpoint.upto), (replicas[2], 1, 2));
    let mut follower = server_hand(&topo, &cfg, 2, t + 2_000);
    let fx = follower.message(replicas[0], Msg::CheckpointState { g_view, checkpoint });
    assert_eq!(fx.counted("checkpoints_installed"), 1);
    assert_eq!((follower.node.sync_point(), follower.node.commit_point(), follower.node.applied()), (2, 2, 2));
    assert_eq!(format!("{:?}", follower.node.state()), format!("{:?}", leader.node.state()), "the leader's data");
    assert_effects(&follower.persist_all(), &[send(replicas[0], report(2))]);
}

// ---- step ④: verification across shards (Algorithm 5 lines 64-78) ----

/// Replica 1 of `shard`, which leads it in view 2 of a two-shard
/// deployment, after the view manager told it view 2 and its own log went
/// to itself.
fn new_leader_of(topo: &Arc<Topology>, cfg: &Config, shard: ShardId, view: &super::messages::View) -> ServerHand {
    let me = topo.replicas(shard)[1];
    let server = Server::new(topo.clone(), shard, 1, initial_view(topo, cfg), *cfg);
    let mut hand = Hand::new(server, topo.clone(), me, Now::at(3_000_000));
    hand.message(NodeId(0), Msg::CurrentView(view.clone()));
    let own: Vec<Msg> = hand.persist_all().sends().filter(|(to, _)| *to == me).map(|(_, m)| m.clone()).collect();
    assert_eq!(own.len(), 1, "its own log, to itself");
    hand.message(me, own[0].clone());
    assert!(hand.node.is_leader());
    hand
}

fn verifies(fx: &EffectsOf<Tiga>) -> Vec<(NodeId, Msg)> {
    fx.sends().filter(|(_, m)| matches!(m, Msg::TsVerify(_))).map(|(to, m)| (to, m.clone())).collect()
}

fn verify(round: u8, shard: u32, info: Arc<super::messages::VerifyInfo>) -> Msg {
    Msg::TsVerify(super::messages::TsVerify { g_view: 2, round, shard: ShardId(shard), info, echo: false })
}

/// Round 3 of view 2 from `shard`'s new leader: its log is durable.
fn round3(shard: u32) -> Msg {
    verify(3, shard, Arc::new(super::messages::VerifyInfo::default()))
}

/// A follower's report of its sync-point.
fn sync_ack(g_view: u64, l_view: u64, sync_point: u64) -> Msg {
    Msg::SyncReport(SyncReport { g_view, l_view, sync_point, missing: Vec::new() })
}

/// Two new leaders of view 2 through step ④'s first two rounds: shard 0's
/// recovered T in part (a) (synced, so perhaps committed at t); shard 1's
/// lost it. Both new logs hold T at t, and each leader hands its log to its
/// followers once durable. Returns the topology, both leaders and T's entry.
fn new_leaders_past_round_2() -> (Arc<Topology>, ServerHand, ServerHand, super::messages::LogEntry) {
    let (topo, cfg) = two_shards();
    let client = client_of(&topo);
    let mut view = initial_view(&topo, &cfg);
    view.g_view = 2;
    view.g_vec = vec![1, 1];
    let mut s0 = new_leader_of(&topo, &cfg, ShardId(0), &view);
    let mut s1 = new_leader_of(&topo, &cfg, ShardId(1), &view);
    let (l0, l1) = (s0.me(), s1.me());
    let Msg::Submit(Submit { body, .. }) = two_shard_submit(client, 1, 2_000_000) else { unreachable!() };
    let t = 2_000_000;
    let contribution = |log: Vec<super::messages::LogEntry>| {
        let sync_point = log.len() as u64;
        Msg::ViewChange(ViewChange {
            g_view: 2,
            l_view: 1,
            last_normal_view: 1,
            sync_point,
            commit_point: 0,
            base: 0,
            log: Arc::new(log),
        })
    };
    let t_entry = super::messages::LogEntry { body: body.clone(), t };
    let round1_from_0 = verifies(&s0.message(topo.replicas(ShardId(0))[2], contribution(vec![t_entry.clone()])));
    let round1_from_1 = verifies(&s1.message(topo.replicas(ShardId(1))[2], contribution(Vec::new())));
    let info = |entries: Vec<super::messages::VerifyEntry>| {
        Arc::new(super::messages::VerifyInfo { entries, doomed: Vec::new(), raised: Vec::new() })
    };
    let pinned = super::messages::VerifyEntry { body: body.clone(), t, pinned: true };
    assert_eq!(format!("{round1_from_0:?}"), format!("{:?}", [(l1, verify(1, 0, info(vec![pinned])))]));
    assert_eq!(format!("{round1_from_1:?}"), format!("{:?}", [(l0, verify(1, 1, info(Vec::new())))]));
    // Round 1 crosses: each goes on to round 2, nothing doomed or raised.
    let round2_from_0 = verifies(&s0.message(l1, round1_from_1[0].1.clone()));
    let round2_from_1 = verifies(&s1.message(l0, round1_from_0[0].1.clone()));
    assert_eq!(format!("{round2_from_0:?}"), format!("{:?}", [(l1, verify(2, 0, info(Vec::new())))]));
    assert_eq!(format!("{round2_from_1:?}"), format!("{:?}", [(l0, verify(2, 1, info(Vec::new())))]));
    assert_eq!(s0.node.status(), super::server::Status::ViewChange, "not before round 2");
    // Round 2 crosses: both are done.
    for (hand, from, msg) in [(&mut s0, l1, &round2_from_1[0].1), (&mut s1, l0, &round2_from_0[0].1)] {
        let fx = hand.message(from, msg.clone());
        assert_eq!(fx.counted("view_change_completions"), 1);
        assert_eq!(hand.node.status(), super::server::Status::Normal);
        assert_eq!(hand.node.log().all(), std::slice::from_ref(&t_entry), "T at its pinned timestamp");
        let shard = hand.node.log().all()[0].body.shards[if from == l1 { 0 } else { 1 }];
        let followers: Vec<NodeId> = [0, 2].iter().map(|r| topo.replicas(shard)[*r]).collect();
        let started: Vec<NodeId> = hand
            .persist_all()
            .sends()
            .filter(|(_, m)| matches!(m, Msg::StartView(StartView { g_view: 2, base: 0, .. })))
            .map(|(to, _)| to)
            .collect();
        assert_eq!(started, followers, "the new log goes to both followers once durable");
    }
    (topo, s0, s1, t_entry)
}

#[test]
fn a_transaction_one_new_leader_recovered_joins_the_other_shards_log_at_its_pinned_timestamp() {
    // Step ④ (1) and (2): the helper checks both new logs hold T at t.
    let (_, s0, s1, t_entry) = new_leaders_past_round_2();
    assert_eq!(s0.node.log().all(), s1.node.log().all());
    assert_eq!(s0.node.log().all(), std::slice::from_ref(&t_entry));
}

#[test]
fn a_new_leader_executes_its_recovered_log_only_once_every_participant_holds_its_own_durably() {
    // Round 3: had shard 0 executed T while shard 1's new log was lost with
    // its new leader, the next view change could rebuild shard 1 without T
    // and drop what shard 0 executed. So a new leader holds its
    // commit-point, and serves no transaction, until its own log is
    // durable at f + 1 servers and every other shard said the same.
    let (topo, mut s0, mut s1, _) = new_leaders_past_round_2();
    let (l0, l1) = (s0.me(), s1.me());
    let ack = |g_view| sync_ack(g_view, 1, 1);
    let follower0 = topo.replicas(ShardId(0))[0];
    // A report of the old view's log does not count; the new view's does.
    assert!(verifies(&s0.message(follower0, ack(1))).is_empty(), "an old view's report");
    let told = verifies(&s0.message(follower0, ack(2)));
    assert_eq!(format!("{told:?}"), format!("{:?}", [(l1, round3(0))]), "durable at f + 1: shard 1 hears it");
    assert_eq!((s0.node.commit_point(), s0.node.applied()), (0, 0), "held until shard 1's log is durable too");
    // Meanwhile it admits a new transaction but releases nothing, and
    // keeps T's resubmission to answer later: T's result may rest on a
    // recovered entry another shard's loss would still doom.
    let client = client_of(&topo);
    let fx = s0.message(client, submit_in_view(client, 9, 7, 3_000_000, 2));
    assert!(!fast_replied(&fx, 9) && s0.node.queued() == 1, "admitted, not released");
    let fx = s0.message(client, two_shard_submit(client, 1, 2_000_000));
    assert!(!fast_replied(&fx, 1) && !fast_replied(&s0.persist_all(), 1), "no answer before confirmation");
    // Shard 1's round 3 arrives before its own log is durable: it keeps it
    // and tells shard 0 only once its follower acknowledged.
    assert!(verifies(&s1.message(l0, round3(0))).is_empty());
    assert_eq!(s1.node.commit_point(), 0);
    let fx = s1.message(topo.replicas(ShardId(1))[2], ack(2));
    assert_eq!((fx.counted("view_confirmations"), s1.node.commit_point(), s1.node.applied()), (1, 1, 1));
    let fx = s0.message(l1, verifies(&fx)[0].1.clone());
    assert_eq!((fx.counted("view_confirmations"), s0.node.commit_point(), s0.node.applied()), (1, 1, 1));
    let durable = s0.persist_all();
    assert!(fast_replied(&fx, 1) || fast_replied(&durable, 1), "T's resubmission answered once confirmed");
    assert!(fast_replied(&fx, 9) || fast_replied(&durable, 9), "and what it admitted released");
}

/// Step ④ (1) at shard 0 for a transaction T shard 1 recovered unpinned
/// at `t` and shard 0 lacks, while shard 0 recovered a conflicting
/// single-shard S above `t` outside part (a). Replica 2 of shard 0 released
/// T before S if `voter`. Returns the round-2 raises shard 0's new leader
/// sends and T's timestamp in its finished log.
fn lacking_transaction_at_shard_0(voter: bool) -> (Vec<(TxnId, u64)>, Option<u64>) {
    let (topo, cfg) = two_shards();
    let client = client_of(&topo);
    let mut view = initial_view(&topo, &cfg);
    view.g_view = 2;
    view.g_vec = vec![1, 1];
    let t = 2_000_000;
    let Msg::Submit(Submit { body: txn, .. }) = two_shard_submit(client, 1, t) else { unreachable!() };
    let key = txn.program.ops.iter().map(|op| op.key()).find(|k| topo.shard_of(*k) == ShardId(0)).expect("a key");
    let s_body = Arc::new(TxnBody {
        id: TxnId { node: client, seq: 2 },
        coordinator: client,
        program: Program::new(vec![Op::Append { key, element: 2 }]),
        shards: vec![ShardId(0)],
    });
    let t_s = t + 10_000;
    let s = super::messages::LogEntry { body: s_body.clone(), t: t_s };
    // Shard 0's new leader released S as a follower of view 1.
    let me = topo.replicas(ShardId(0))[1];
    let server = Server::new(topo.clone(), ShardId(0), 1, initial_view(&topo, &cfg), cfg);
    let mut leader = Hand::new(server, topo.clone(), me, Now::at(1_000_000));
    let submit_s = Submit { body: s_body, g_view: 1, t: t_s, send_clock_ns: t_s - 50, low_watermark: 0 };
    leader.message(client, Msg::Submit(submit_s));
    leader.set_time_ns(t_s);
    leader.timer(Timer::Release);
    leader.persist_all();
    assert_eq!(leader.node.log().all(), std::slice::from_ref(&s), "S released, unsynced");
    leader.message(NodeId(0), Msg::CurrentView(view.clone()));
    let own: Vec<Msg> = leader.persist_all().sends().filter(|(to, _)| *to == me).map(|(_, m)| m.clone()).collect();
    leader.message(me, own[0].clone());
    let t_entry = super::messages::LogEntry { body: txn.clone(), t };
    let replica2_log = if voter { vec![t_entry, s] } else { vec![s] };
    let contribution = ViewChange {
        g_view: 2,
        l_view: 1,
        last_normal_view: 1,
        sync_point: 0,
        commit_point: 0,
        base: 0,
        log: Arc::new(replica2_log),
    };
    leader.message(topo.replicas(ShardId(0))[2], Msg::ViewChange(contribution));
    let l1 = topo.replicas(ShardId(1))[1];
    let verify = |round: u8, entries: Vec<super::messages::VerifyEntry>| {
        let info = Arc::new(super::messages::VerifyInfo { entries, doomed: Vec::new(), raised: Vec::new() });
        Msg::TsVerify(super::messages::TsVerify { g_view: 2, round, shard: ShardId(1), info, echo: false })
    };
    let unpinned = super::messages::VerifyEntry { body: txn.clone(), t, pinned: false };
    let round2 = verifies(&leader.message(l1, verify(1, vec![unpinned])));
    let raised = match round2.as_slice() {
        [(to, Msg::TsVerify(v))] if *to == l1 && v.round == 2 => v.info.raised.clone(),
        other => panic!("one round-2 message to shard 1's leader: {other:?}"),
    };
    leader.message(l1, verify(2, Vec::new()));
    assert_eq!(leader.node.status(), super::server::Status::Normal, "the view change is done");
    (raised, leader.node.log().all().iter().find(|e| e.body.id == txn.id).map(|e| e.t))
}

#[test]
fn a_transaction_a_shard_lacks_keeps_its_timestamp_when_more_than_half_f_of_its_logs_hold_it() {
    // Step ④ (1): S cannot have fast-committed without T, since a follower
    // that released T first could not match the leader's hash; so T keeps
    // its timestamp (had shard 0's old leader agreed on it, shard 1 may
    // have committed successors that read T). With no such follower, S may
    // have committed without T, and T goes after it.
    let t = 2_000_000;
    let (raised, at) = lacking_transaction_at_shard_0(true);
    assert_eq!((raised, at), (Vec::new(), Some(t)), "a follower held T: it keeps t");
    let (raised, at) = lacking_transaction_at_shard_0(false);
    assert_eq!(raised.iter().map(|(_, t)| *t).collect::<Vec<_>>(), [t + 10_001], "raised just above S");
    assert_eq!(at, Some(t + 10_001));
}

#[test]
fn a_deposed_leader_keeps_no_leader_state_once_it_follows_the_new_view() {
    // A view change drops the optimistic store, executions and
    // announcements with the old view; a follower in the new view holds
    // none of them (the invariants `Hand` checks after every step).
    let (topo, cfg) = deployment();
    let client = client_of(&topo);
    let replicas = topo.replicas(ShardId(0)).to_vec();
    let mut old = server_hand(&topo, &cfg, 0, 1_000_000);
    let t = 2_000_000;
    old.message(client, submit(client, 1, 7, t));
    old.set_time_ns(t);
    old.timer(Timer::Release);
    assert_eq!(fast_reply_t(&old.persist_all(), 1), Some(t), "executed as leader");
    old.message(NodeId(0), Msg::CurrentView(next_view(&topo, &cfg)));
    old.persist_all();
    let log = vec![entry(client, 1, 7, t)];
    let start = StartView { g_view: 2, l_view: 1, base: 0, log: Arc::new(log.clone()), checkpoint: None };
    old.message(replicas[1], Msg::StartView(start));
    assert_eq!(old.node.status(), super::server::Status::Normal);
    assert!(!old.node.is_leader());
    assert_eq!(old.node.log().all(), log.as_slice());
}

#[test]
fn a_lost_round_3_is_echoed_by_the_leader_that_confirmed_and_a_newer_view_ends_confirmation() {
    let (topo, mut s0, mut s1, _) = new_leaders_past_round_2();
    let (l0, l1) = (s0.me(), s1.me());
    let told = verifies(&s0.message(topo.replicas(ShardId(0))[0], sync_ack(2, 1, 1)));
    assert_eq!(told.len(), 1, "shard 0's round 3, lost on the way");
    let fx = s1.message(topo.replicas(ShardId(1))[2], sync_ack(2, 1, 1));
    assert_eq!(fx.counted("view_confirmations"), 0, "shard 1 still waits for shard 0's");
    let fx = s0.message(l1, verifies(&fx)[0].1.clone());
    assert_eq!(fx.counted("view_confirmations"), 1);
    // Shard 1 repeats its round 3 every resend_ns; the confirmed leader
    // answers with its own, marked an echo (never answered in turn).
    let resent = verifies(&s1.timer(Timer::Resend));
    assert_eq!(format!("{resent:?}"), format!("{:?}", [(l0, round3(1))]));
    let echo = verifies(&s0.message(l1, resent[0].1.clone()));
    assert!(matches!(&echo[..], [(to, Msg::TsVerify(m))] if *to == l1 && m.round == 3 && m.echo));
    let fx = s1.message(l0, echo[0].1.clone());
    assert_eq!((fx.counted("view_confirmations"), s1.node.commit_point()), (1, 1));
    assert!(verifies(&s1.message(l0, echo[0].1.clone())).is_empty(), "an echo is not answered");
    // A newer view while confirming: the change starts over (the invariants
    // `Hand` checks after every step hold no confirming server outside a
    // new view), and nothing of view 2's log is committed.
    let (_, mut s0, _, _) = new_leaders_past_round_2();
    let mut view3 = s0.node.view().clone();
    view3.g_view = 3;
    s0.message(NodeId(0), Msg::CurrentView(view3));
    assert_eq!((s0.node.status(), s0.node.commit_point()), (super::server::Status::ViewChange, 0));
}

#[test]
fn a_leader_kept_across_a_view_change_counts_only_its_new_log_durable_towards_confirming_it() {
    // The old view's log, two entries long, becomes durable after the new
    // view's one-entry log is installed: that must not count for the new
    // log, or round 3 would go out with the new log at f servers only.
    let (topo, cfg) = deployment();
    let client = client_of(&topo);
    let replicas = topo.replicas(ShardId(0)).to_vec();
    let mut leader = server_hand(&topo, &cfg, 0, 1_000_000);
    let x = entry(client, 1, 7, 2_000_000);
    leader.message(client, submit(client, 1, 7, 2_000_000));
    leader.set_time_ns(2_000_000);
    leader.timer(Timer::Release);
    leader.persist_all();
    leader.message(client, submit(client, 2, 8, 2_000_001));
    leader.set_time_ns(2_000_001);
    leader.timer(Timer::Release);
    let old_log_lsn = leader.last_lsn();
    assert_eq!(leader.node.log().len(), 2, "the second entry not yet durable");
    let mut view2 = initial_view(&topo, &cfg);
    view2.g_view = 2;
    leader.message(NodeId(0), Msg::CurrentView(view2));
    let contribution = Msg::ViewChange(ViewChange {
        g_view: 2,
        l_view: leader.node.view().l_view(ShardId(0)),
        last_normal_view: 1,
        sync_point: 1,
        commit_point: 0,
        base: 0,
        log: Arc::new(vec![x.clone()]),
    });
    leader.message(replicas[1], contribution.clone());
    leader.message(replicas[2], contribution);
    assert!(leader.node.is_leader());
    assert_eq!(leader.node.log().all(), std::slice::from_ref(&x), "the new view's log, from the followers");
    leader.step(|n, ctx| meridian_core::process::Process::on_persisted(n, ctx, old_log_lsn));
    let l_view = leader.node.view().l_view(ShardId(0));
    let fx = leader.message(replicas[1], sync_ack(2, l_view, 1));
    assert_eq!((fx.counted("view_confirmations"), leader.node.commit_point()), (0, 0), "one durable copy only");
    let fx = leader.persist_all();
    assert_eq!((fx.counted("view_confirmations"), leader.node.commit_point()), (1, 1), "two, with its own");
}
