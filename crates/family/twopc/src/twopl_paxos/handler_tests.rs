//! Handler-level tests of a 2pl-paxos shard leader, driven event by event
//! by core's `Hand`: one event in, the exact messages out. Each shard has
//! one replica here, so Multi-Paxos chooses a command as soon as the
//! leader's own vote is durable (`persist_all`), and every transition of
//! the paper's protocol shows on one node: lock grant and wound-wait,
//! prepare and vote, decision and acknowledgement, in-doubt resolution.

use super::messages::{Execute, Executed, LockRead, Msg, Prepare, Priority, Refusal, Timer};
use super::replica::Replica;
use super::{Config, TwoPlPaxos};
use meridian_core::{
    ClusterSpec, Data, EffectsOf, Hand, Key, LeaderPlacement, NodeId, Now, Params, RegionId, ShardId, Topology, TxnId,
    Value,
};
use meridian_mechanisms::locks::LockMode;
use meridian_mechanisms::paxos::{MultiPaxos, PaxosTimer};
use meridian_mechanisms::twopc::{Decision, TxnStatus};
use std::sync::Arc;

type Leader = Hand<TwoPlPaxos, Replica>;

/// Two shards of one replica each; one client region.
fn topology() -> Arc<Topology> {
    let spec = ClusterSpec {
        regions: vec!["a".into()],
        server_regions: vec![RegionId(0)],
        shards: 2,
        replicas_per_shard: 1,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(0)],
        clients_per_region: 1,
    };
    Arc::new(Topology::build(&spec, &[]))
}

/// Shard 0's replica, started and leading (its election durable).
fn leader(topo: &Arc<Topology>, cfg: Config) -> Leader {
    let me = topo.replicas(ShardId(0))[0];
    let paxos = MultiPaxos::new(0, vec![me], me, 0, cfg.paxos);
    let mut hand = Hand::new(Replica::new(ShardId(0), paxos, cfg), topo.clone(), me, Now::at(1_000_000));
    hand.start(Vec::new());
    for _ in 0..20 {
        if hand.node.is_leading() {
            return hand;
        }
        hand.persist_all();
        hand.advance_ns(cfg.paxos.tick_ns);
        hand.timer(Timer::Paxos(PaxosTimer { group: 0 }));
    }
    panic!("a single replica leads once its own votes are durable");
}

fn config() -> Config {
    Config::from_params(&Params::new()).expect("defaults")
}

fn client(topo: &Topology) -> NodeId {
    topo.clients()[0]
}

fn txn(seq: u64) -> TxnId {
    TxnId { node: NodeId(9), seq }
}

/// An execute round taking `mode` locks on `keys` (reading them).
fn execute(t: TxnId, start_ns: u64, keys: &[u64], mode: LockMode) -> Msg {
    let keys = keys.iter().map(|k| LockRead { key: Key(*k), mode, read: true }).collect();
    Msg::Execute(Execute { txn: t, prio: Priority { start_ns, first: t }, round: 0, keys })
}

fn executed(fx: &EffectsOf<TwoPlPaxos>, t: TxnId) -> bool {
    fx.sends().any(|(_, m)| matches!(m, Msg::Executed(Executed { txn, .. }) if *txn == t))
}

fn vote(fx: &EffectsOf<TwoPlPaxos>, t: TxnId) -> Option<bool> {
    fx.sends().find_map(|(_, m)| match m {
        Msg::Vote { txn, yes, .. } if *txn == t => Some(*yes),
        _ => None,
    })
}

fn int(i: i64) -> Value {
    Value { data: Data::Int(i), tag: 7 }
}

/// Runs `t` (exclusive on `keys`) through execute and a durable prepare.
fn prepared(hand: &mut Leader, from: NodeId, t: TxnId, keys: &[u64], participants: Vec<ShardId>) {
    assert!(executed(&hand.message(from, execute(t, 10, keys, LockMode::Exclusive)), t));
    let writes = keys.iter().map(|k| (Key(*k), int(5))).collect();
    hand.message(from, Msg::Prepare(Prepare { txn: t, participants, writes }));
    assert_eq!(vote(&hand.persist_all(), t), Some(true), "the vote follows the durable prepare");
}

#[test]
fn a_free_lock_is_granted_at_once_and_the_round_answered() {
    let topo = topology();
    let mut hand = leader(&topo, config());
    let fx = hand.message(client(&topo), execute(txn(1), 10, &[2, 4], LockMode::Shared));
    let reads: Vec<_> = fx
        .sends()
        .filter_map(|(to, m)| match m {
            Msg::Executed(Executed { reads, .. }) if to == client(&topo) => Some(reads.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(reads, [vec![(Key(2), None), (Key(4), None)]], "both keys read, neither written yet");
    assert!(fx.appends().next().is_none(), "executing logs nothing");
}

#[test]
fn an_older_transaction_wounds_a_younger_holder_and_takes_its_lock() {
    // Wound-wait: the younger holder (later start) is aborted and told so;
    // the older requester is granted once the lock is released.
    let topo = topology();
    let mut hand = leader(&topo, config());
    let c = client(&topo);
    let (older, younger) = (txn(1), txn(2));
    assert!(executed(&hand.message(c, execute(younger, 20, &[2], LockMode::Exclusive)), younger));
    let fx = hand.message(c, execute(older, 10, &[2], LockMode::Exclusive));
    assert!(
        fx.sends().any(|(_, m)| matches!(m, Msg::Refused { txn, reason: Refusal::Wounded, .. } if *txn == younger)),
        "the younger holder is wounded"
    );
    assert!(executed(&fx, older), "the older one gets the lock");
    assert_eq!(fx.counted("wounds"), 1);
}

#[test]
fn a_younger_transaction_waits_for_an_older_holder() {
    let topo = topology();
    let mut hand = leader(&topo, config());
    let c = client(&topo);
    let (older, younger) = (txn(1), txn(2));
    prepared(&mut hand, c, older, &[2], vec![ShardId(0)]);
    let fx = hand.message(c, execute(younger, 20, &[2], LockMode::Shared));
    assert!(!executed(&fx, younger), "waits: a prepared holder is never wounded");
    assert!(fx.sends().next().is_none(), "and is not refused either");
    hand.message(c, Msg::Decide { txn: older, decision: Decision::Commit, settled_below: 0 });
    let fx = hand.persist_all();
    let reads = fx.sends().find_map(|(_, m)| match m {
        Msg::Executed(Executed { txn, reads, .. }) if *txn == younger => Some(reads.clone()),
        _ => None,
    });
    assert_eq!(reads, Some(vec![(Key(2), Some(int(5)))]), "granted after the commit, reading its write");
}

#[test]
fn the_vote_waits_until_the_prepare_is_chosen_in_the_shard_log() {
    let topo = topology();
    let mut hand = leader(&topo, config());
    let c = client(&topo);
    let t = txn(1);
    assert!(executed(&hand.message(c, execute(t, 10, &[2], LockMode::Exclusive)), t));
    let fx = hand
        .message(c, Msg::Prepare(Prepare { txn: t, participants: vec![ShardId(0)], writes: vec![(Key(2), int(5))] }));
    assert_eq!(vote(&fx, t), None, "no vote before the prepare record is durable");
    assert!(fx.appends().next().is_some(), "the prepare record goes to the log");
    assert_eq!(vote(&hand.persist_all(), t), Some(true));
}

#[test]
fn a_commit_decision_installs_the_writes_and_is_acknowledged_once_applied() {
    let topo = topology();
    let mut hand = leader(&topo, config());
    let c = client(&topo);
    let t = txn(1);
    prepared(&mut hand, c, t, &[2], vec![ShardId(0)]);
    let fx = hand.message(c, Msg::Decide { txn: t, decision: Decision::Commit, settled_below: 0 });
    assert!(!fx.sends().any(|(_, m)| matches!(m, Msg::Decided { .. })), "not before the decision is applied");
    let fx = hand.persist_all();
    assert!(fx.sends().any(|(to, m)| to == c && matches!(m, Msg::Decided { txn, .. } if *txn == t)));
    assert_eq!(hand.node.store().latest(Key(2)), Some(&int(5)));
    assert!(hand.node.prepared_count() == 0, "no longer prepared");
}

#[test]
fn an_abort_decision_releases_the_locks_without_writing() {
    let topo = topology();
    let mut hand = leader(&topo, config());
    let c = client(&topo);
    let t = txn(1);
    prepared(&mut hand, c, t, &[2], vec![ShardId(0)]);
    hand.message(c, Msg::Decide { txn: t, decision: Decision::Abort, settled_below: 0 });
    hand.persist_all();
    assert_eq!(hand.node.store().latest(Key(2)), None, "nothing written");
    let next = txn(2);
    assert!(executed(&hand.message(c, execute(next, 30, &[2], LockMode::Exclusive)), next), "the lock is free");
}

#[test]
fn a_transaction_in_doubt_asks_the_other_participants_and_follows_their_answer() {
    // The coordinator went silent after every shard prepared: after
    // in_doubt_ms of termination ticks the leader asks shard 1, which
    // answers "committed"; the leader commits as the coordinator would.
    let topo = topology();
    let cfg = config();
    let mut hand = leader(&topo, cfg);
    let c = client(&topo);
    let t = txn(1);
    prepared(&mut hand, c, t, &[2], vec![ShardId(0), ShardId(1)]);
    let other = topo.replicas(ShardId(1))[0];
    let mut asked = false;
    for _ in 0..cfg.in_doubt_ticks {
        hand.advance_ns(cfg.termination_tick_ns);
        let fx = hand.timer(Timer::Termination);
        asked |= fx.sends().any(|(to, m)| to == other && matches!(m, Msg::Query { txn } if *txn == t));
    }
    assert!(asked, "shard 1 is asked after in_doubt_ms");
    assert_eq!(hand.node.store().latest(Key(2)), None, "still undecided");
    let status = Msg::Status { txn: t, shard: ShardId(1), status: Some(TxnStatus::Committed) };
    hand.message(other, status);
    hand.persist_all();
    assert_eq!(hand.node.store().latest(Key(2)), Some(&int(5)), "committed on shard 1's word");
}

// ---- the coordinator ----

type Client = Hand<TwoPlPaxos, super::coordinator::Coordinator>;

/// The client node's coordinator, its identifier epoch durable.
fn coordinator(topo: &Arc<Topology>) -> Client {
    let me = client(topo);
    let leaders = (0..topo.shards).map(|s| topo.initial_leader(ShardId(s))).collect();
    let mut hand = Hand::new(super::coordinator::Coordinator::new(me, leaders, config()), topo.clone(), me, Now::at(0));
    hand.start(Vec::new());
    hand.persist_all();
    hand
}

/// Increments key 0 (shard 0) and key 1 (shard 1).
fn two_shard_increment() -> meridian_core::Program {
    let ops = (0..2).map(|k| meridian_core::Op::Increment { key: Key(k), delta: 1, tag: 10 + k }).collect();
    meridian_core::Program::new(ops)
}

/// The attempt's id and the shards its execute round went to.
fn executes(fx: &EffectsOf<TwoPlPaxos>) -> Vec<(TxnId, NodeId, Vec<LockRead>)> {
    fx.sends()
        .filter_map(|(to, m)| match m {
            Msg::Execute(Execute { txn, keys, .. }) => Some((*txn, to, keys.clone())),
            _ => None,
        })
        .collect()
}

/// Runs a two-shard increment up to its votes; returns its id.
fn through_prepare(hand: &mut Client, topo: &Topology) -> TxnId {
    let fx = hand.request(meridian_core::RequestId(1), two_shard_increment());
    let rounds = executes(&fx);
    assert_eq!(rounds.len(), 2, "one execute round per shard leader");
    assert!(rounds.iter().all(|(_, _, keys)| keys.iter().all(|k| k.mode == LockMode::Exclusive && k.read)));
    let t = rounds[0].0;
    let mut prepares = Vec::new();
    for s in 0..2u32 {
        let leader = topo.replicas(ShardId(s))[0];
        let reads = vec![(Key(u64::from(s)), None)];
        let fx = hand.message(leader, Msg::Executed(Executed { txn: t, shard: ShardId(s), round: 0, reads }));
        prepares.extend(fx.sends().filter_map(|(to, m)| match m {
            Msg::Prepare(Prepare { writes, .. }) => Some((to, writes.clone())),
            _ => None,
        }));
    }
    assert_eq!(prepares.len(), 2, "prepare goes out once every read is in");
    assert!(prepares.iter().all(|(_, w)| w.len() == 1 && w[0].1.data == Data::Int(1)), "{prepares:?}");
    t
}

fn decisions(fx: &EffectsOf<TwoPlPaxos>, t: TxnId) -> Vec<Decision> {
    fx.sends()
        .filter_map(|(_, m)| match m {
            Msg::Decide { txn, decision, .. } if *txn == t => Some(*decision),
            _ => None,
        })
        .collect()
}

#[test]
fn the_coordinator_commits_when_every_participant_votes_yes() {
    let topo = topology();
    let mut hand = coordinator(&topo);
    let t = through_prepare(&mut hand, &topo);
    let leader = |s: u32| topo.replicas(ShardId(s))[0];
    let fx = hand.message(leader(0), Msg::Vote { txn: t, shard: ShardId(0), yes: true });
    assert!(decisions(&fx, t).is_empty(), "one vote is not all");
    let fx = hand.message(leader(1), Msg::Vote { txn: t, shard: ShardId(1), yes: true });
    assert_eq!(decisions(&fx, t), [Decision::Commit, Decision::Commit]);
    let outcome = fx.completions().map(|(r, o)| (r, o.clone())).collect::<Vec<_>>();
    assert!(matches!(outcome.as_slice(), [(_, meridian_core::Outcome::Committed { .. })]), "{outcome:?}");
}

#[test]
fn one_no_vote_aborts_every_participant_and_the_request_retries() {
    let topo = topology();
    let mut hand = coordinator(&topo);
    let t = through_prepare(&mut hand, &topo);
    let fx = hand.message(topo.replicas(ShardId(1))[0], Msg::Vote { txn: t, shard: ShardId(1), yes: false });
    assert_eq!(decisions(&fx, t), [Decision::Abort, Decision::Abort]);
    assert!(fx.completions().next().is_none(), "the client waits for the retry");
    let restart: Vec<(u64, Timer)> = fx
        .timers_set()
        .filter(|(_, _, t)| matches!(t, Timer::Restart(_)))
        .map(|(_, after_ns, t)| (after_ns, t.clone()))
        .collect();
    assert_eq!(restart.len(), 1, "one restart, after a backoff");
    assert!(restart[0].0 <= config().retry_backoff_ns * 2, "within the backoff and its jitter");
    hand.advance_ns(restart[0].0);
    let retried = executes(&hand.timer(restart[0].1.clone()));
    assert!(!retried.is_empty(), "the request runs again");
    assert!(retried.iter().all(|(id, _, _)| *id != t), "as a new attempt");
}
