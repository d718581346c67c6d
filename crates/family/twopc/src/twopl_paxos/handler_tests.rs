//! Handler-level tests of 2pl-paxos's roles, driven event by event by
//! core's `Hand`: one event in, the exact effects out, in order. With one
//! replica per shard, Multi-Paxos chooses a command as soon as the leader's
//! own vote is durable (`persist_all`), and every transition of the paper's
//! protocol shows on one node: lock grant and wound-wait, prepare and vote,
//! decision and acknowledgement, in-doubt resolution. With three, the
//! leader's log entries go through its followers (accept, accepted,
//! commit), a follower takes over, and coordinators are redirected.

use super::coordinator::Coordinator;
use super::messages::{
    Cmd, Execute, Executed, LockRead, Msg, Prepare, PrepareRecord, Priority, Record, Refusal, Timer,
};
use super::participant::{LockAt, Participant, Participants};
use super::replica::Replica;
use super::{Config, TwoPlPaxos};
use meridian_core::{
    ClusterSpec, Data, Effect, EffectsOf, Hand, Key, Lsn, NodeId, Now, Op, Outcome, ParamValue, Params, Program,
    RequestId, ShardId, Stream, Topology, TxnId, Value,
};
use meridian_mechanisms::locks::LockMode;
use meridian_mechanisms::paxos::{Ballot, MultiPaxos, PaxosBody, PaxosMsg, PaxosRecord, PaxosRecordBody, PaxosTimer};
use meridian_mechanisms::twopc::{Decision, TxnStatus};
use meridian_mechanisms::txnids::COUNTER_BITS;
use std::sync::Arc;

type Leader = Hand<TwoPlPaxos, Replica>;
type Fx = Effect<Msg, Record, Timer>;

/// Asserts that `fx` is exactly `expected`, effect by effect, in order.
/// Effects are compared through their `Debug` rendering: a message may
/// carry a Paxos checkpoint of the store, which has no equality.
#[track_caller]
fn assert_effects(fx: &EffectsOf<TwoPlPaxos>, expected: &[Fx]) {
    assert_eq!(format!("{:#?}", fx.all()), format!("{expected:#?}"));
}

/// Two shards of `replicas` replicas each; one client region.
fn topology(replicas: u32) -> Arc<Topology> {
    let spec = ClusterSpec::one_region(2, replicas);
    Arc::new(Topology::build(&spec, &[]))
}

fn config() -> Config {
    Config::from_params(&Params::new()).expect("defaults")
}

/// Replica `r` of shard 0, started.
fn replica(topo: &Arc<Topology>, r: usize) -> Leader {
    let cfg = config();
    let members = topo.replicas(ShardId(0)).to_vec();
    let paxos = MultiPaxos::new(0, members.clone(), members[r], 0, cfg.paxos);
    let mut hand = Hand::new(Replica::new(ShardId(0), paxos, cfg), topo.clone(), members[r], Now::at(1_000_000));
    hand.start(Vec::new());
    hand
}

/// Shard 0's preferred replica, leading: a fresh group's preferred member
/// leads at ballot (1, 0) once its promise is durable, without phase 1.
fn leader(topo: &Arc<Topology>) -> Leader {
    let mut hand = replica(topo, 0);
    let fx = hand.persist_all();
    assert_effects(&fx, &[count("paxos_leader_changes"), count("leader_takeovers")]);
    assert!(hand.node.is_leading());
    hand
}

const FIRST: Ballot = Ballot { round: 1, rank: 0 };

fn client(topo: &Topology) -> NodeId {
    topo.clients()[0]
}

fn txn(seq: u64) -> TxnId {
    TxnId { node: NodeId(9), seq }
}

fn int(i: i64) -> Value {
    Value { data: Data::Int(i), tag: 7 }
}

fn prio(t: TxnId, start_ns: u64) -> Priority {
    Priority { start_ns, first: t }
}

/// An execute round 0 taking `mode` locks on `keys` (reading them).
fn execute(t: TxnId, start_ns: u64, keys: &[u64], mode: LockMode) -> Msg {
    let keys = keys.iter().map(|k| LockRead { key: Key(*k), mode, read: true }).collect();
    Msg::Execute(Execute { txn: t, prio: prio(t, start_ns), round: 0, keys })
}

fn prepare(t: TxnId, participants: Participants, writes: &[(u64, i64)]) -> Msg {
    let writes = writes.iter().map(|(k, v)| (Key(*k), int(*v))).collect();
    Msg::Prepare(Prepare { txn: t, participants, writes })
}

fn decide(t: TxnId, decision: Decision) -> Msg {
    Msg::Decide { txn: t, decision, settled_below: 0 }
}

// ---- expected effects ----

fn send(to: NodeId, msg: Msg) -> Fx {
    Effect::Send { to, msg }
}

fn count(counter: &'static str) -> Fx {
    Effect::Count { counter, delta: 1 }
}

/// A round's locks were granted at once (the wait observed is zero).
fn no_wait() -> Fx {
    Effect::Observe { name: "lock_wait_us", value: 0 }
}

fn executed(to: NodeId, t: TxnId, reads: Vec<(u64, Option<Value>)>) -> Fx {
    let reads = reads.into_iter().map(|(k, v)| (Key(k), v)).collect();
    send(to, Msg::Executed(Executed { txn: t, part: Participant(0), round: 0, reads }))
}

fn vote(to: NodeId, t: TxnId, yes: bool) -> Fx {
    send(to, Msg::Vote { txn: t, part: Participant(0), yes })
}

fn decided(to: NodeId, t: TxnId) -> Fx {
    send(to, Msg::Decided { txn: t, part: Participant(0) })
}

fn paxos(to: NodeId, body: PaxosBody<Cmd, super::ReplicaState>) -> Fx {
    send(to, Msg::Paxos(PaxosMsg { group: 0, body }))
}

/// The leader's vote for `cmd` in `slot`, appended at `lsn`.
fn logged(lsn: u64, slot: u64, cmd: Cmd) -> Fx {
    let body = PaxosRecordBody::Accepted { slot, ballot: FIRST, value: Some(Arc::new(cmd)) };
    Effect::Append { stream: Stream::MAIN, lsn: Lsn(lsn), record: Record::Paxos(PaxosRecord { group: 0, body }) }
}

/// The LSN the hand's next append gets.
fn next_lsn(hand: &Leader) -> u64 {
    hand.last_lsn().0 + 1
}

fn prepare_cmd(t: TxnId, coordinator: NodeId, participants: Participants, reads: &[u64], writes: &[(u64, i64)]) -> Cmd {
    Cmd::Prepare(Arc::new(PrepareRecord {
        txn: t,
        coordinator,
        participants,
        reads: reads.iter().map(|k| (Key(*k), None)).collect(),
        writes: writes.iter().map(|(k, v)| (Key(*k), int(*v))).collect(),
    }))
}

/// Runs `t` (exclusive on `keys`, writing 5 to each) through execute and a
/// durable prepare, in slot `slot` of a one-replica shard.
fn prepared(hand: &mut Leader, from: NodeId, t: TxnId, keys: &[u64], participants: Participants, slot: u64) {
    hand.message(from, execute(t, 10, keys, LockMode::Exclusive));
    let writes: Vec<(u64, i64)> = keys.iter().map(|k| (*k, 5)).collect();
    let lsn = next_lsn(hand);
    let fx = hand.message(from, prepare(t, participants.clone(), &writes));
    assert_effects(&fx, &[logged(lsn, slot, prepare_cmd(t, from, participants, keys, &writes))]);
    assert_effects(&hand.persist_all(), &[vote(from, t, true)]);
}

// ---- a shard leader (one replica) ----

#[test]
fn a_free_lock_is_granted_at_once_and_the_round_answered() {
    let topo = topology(1);
    let mut hand = leader(&topo);
    let c = client(&topo);
    let fx = hand.message(c, execute(txn(1), 10, &[2, 4], LockMode::Shared));
    assert_effects(&fx, &[no_wait(), executed(c, txn(1), vec![(2, None), (4, None)])]);
}

#[test]
fn an_older_transaction_wounds_a_younger_holder_and_takes_its_lock() {
    // Wound-wait: the younger holder (later start) is aborted and told so;
    // the older requester is granted once the lock is released.
    let topo = topology(1);
    let mut hand = leader(&topo);
    let c = client(&topo);
    let (older, younger) = (txn(1), txn(2));
    let fx = hand.message(c, execute(younger, 20, &[2], LockMode::Exclusive));
    assert_effects(&fx, &[no_wait(), executed(c, younger, vec![(2, None)])]);
    let fx = hand.message(c, execute(older, 10, &[2], LockMode::Exclusive));
    let wounded = Msg::Refused { txn: younger, part: Participant(0), reason: Refusal::Wounded };
    assert_effects(&fx, &[count("wounds"), send(c, wounded), no_wait(), executed(c, older, vec![(2, None)])]);
}

#[test]
fn a_younger_transaction_waits_for_an_older_prepared_holder_and_reads_its_write() {
    let topo = topology(1);
    let mut hand = leader(&topo);
    let c = client(&topo);
    let (older, younger) = (txn(1), txn(2));
    prepared(&mut hand, c, older, &[2], smallvec::smallvec![Participant(0)], 1);
    let fx = hand.message(c, execute(younger, 20, &[2], LockMode::Shared));
    assert_effects(&fx, &[]); // waits: a prepared holder is never wounded, nor is it refused
    let lsn = next_lsn(&hand);
    assert_effects(&hand.message(c, decide(older, Decision::Commit)), &[logged(lsn, 2, Cmd::Commit(older))]);
    let fx = hand.persist_all();
    assert_effects(&fx, &[no_wait(), executed(c, younger, vec![(2, Some(int(5)))]), decided(c, older)]);
}

#[test]
fn a_prepare_is_voted_only_after_its_log_entry_is_durable() {
    // Keys it locked and does not write are reads the record carries (with
    // the version read), so a new leader re-takes those locks too; so are
    // keys it read and writes, so that a stale record is voided.
    let topo = topology(1);
    let mut hand = leader(&topo);
    let c = client(&topo);
    let t = txn(1);
    let keys = vec![
        LockRead { key: Key(2), mode: LockMode::Exclusive, read: true },
        LockRead { key: Key(4), mode: LockMode::Shared, read: true },
    ];
    let fx = hand.message(c, Msg::Execute(Execute { txn: t, prio: prio(t, 10), round: 0, keys }));
    assert_effects(&fx, &[no_wait(), executed(c, t, vec![(2, None), (4, None)])]);
    let lsn = next_lsn(&hand);
    let fx = hand.message(c, prepare(t, smallvec::smallvec![Participant(0)], &[(2, 5)]));
    assert_effects(&fx, &[logged(lsn, 1, prepare_cmd(t, c, smallvec::smallvec![Participant(0)], &[2, 4], &[(2, 5)]))]);
    assert_effects(&hand.persist_all(), &[vote(c, t, true)]);
}

#[test]
fn a_prepare_without_an_execution_here_is_voted_no_at_once() {
    let topo = topology(1);
    let mut hand = leader(&topo);
    let c = client(&topo);
    let fx = hand.message(c, prepare(txn(1), smallvec::smallvec![Participant(0)], &[(2, 5)]));
    assert_effects(&fx, &[vote(c, txn(1), false)]);
}

#[test]
fn a_commit_decision_installs_the_writes_and_is_acknowledged_once_applied() {
    let topo = topology(1);
    let mut hand = leader(&topo);
    let c = client(&topo);
    let t = txn(1);
    prepared(&mut hand, c, t, &[2], smallvec::smallvec![Participant(0)], 1);
    let lsn = next_lsn(&hand);
    let fx = hand.message(c, decide(t, Decision::Commit));
    assert_effects(&fx, &[logged(lsn, 2, Cmd::Commit(t))]); // not acknowledged before it is applied
    assert_effects(&hand.persist_all(), &[decided(c, t)]);
    assert_eq!(hand.node.store().latest(Key(2)), Some(&int(5)));
    assert_eq!(hand.node.prepared_count(), 0, "no longer prepared");
}

#[test]
fn an_abort_decision_releases_the_locks_without_writing() {
    let topo = topology(1);
    let mut hand = leader(&topo);
    let c = client(&topo);
    let t = txn(1);
    prepared(&mut hand, c, t, &[2], smallvec::smallvec![Participant(0)], 1);
    let lsn = next_lsn(&hand);
    assert_effects(&hand.message(c, decide(t, Decision::Abort)), &[logged(lsn, 2, Cmd::Abort(t))]);
    assert_effects(&hand.persist_all(), &[decided(c, t)]);
    assert_eq!(hand.node.store().latest(Key(2)), None, "nothing written");
    let next = txn(2);
    let fx = hand.message(c, execute(next, 30, &[2], LockMode::Exclusive));
    assert_effects(&fx, &[no_wait(), executed(c, next, vec![(2, None)])]); // the lock is free
}

#[test]
fn an_abort_of_a_transaction_never_prepared_here_is_acknowledged_once_logged() {
    // Only the log tells a leader from one deposed without knowing it, whose
    // successor may hold the transaction prepared: the abort is acknowledged
    // once it is chosen, and its locks are free at once.
    let topo = topology(1);
    let mut hand = leader(&topo);
    let c = client(&topo);
    let t = txn(1);
    hand.message(c, execute(t, 10, &[2], LockMode::Exclusive));
    let lsn = next_lsn(&hand);
    assert_effects(&hand.message(c, decide(t, Decision::Abort)), &[logged(lsn, 1, Cmd::Abort(t))]);
    assert_effects(&hand.message(c, decide(t, Decision::Abort)), &[]); // a repeat waits for the same entry
    let other = txn(2);
    let fx = hand.message(c, execute(other, 30, &[2], LockMode::Exclusive));
    assert_effects(&fx, &[no_wait(), executed(c, other, vec![(2, None)])]); // the lock is free
    assert_effects(&hand.persist_all(), &[decided(c, t)]);
    let late = hand.message(c, execute(t, 10, &[2], LockMode::Exclusive));
    assert_effects(&late, &[]); // a late duplicate of its execute is ignored
}

#[test]
fn a_transaction_in_doubt_asks_the_other_participants_and_follows_their_answer() {
    // The coordinator went silent after every shard prepared: after
    // in_doubt_ms of termination ticks the leader asks shard 1, which
    // answers "committed"; the leader commits as the coordinator would.
    let topo = topology(1);
    let cfg = config();
    let mut hand = leader(&topo);
    let c = client(&topo);
    let t = txn(1);
    prepared(&mut hand, c, t, &[2], smallvec::smallvec![Participant(0), Participant(1)], 1);
    let other = topo.replicas(ShardId(1))[0];
    let rearm = |hand: &Leader| Effect::SetTimer {
        id: hand.next_timer_id(),
        after_ns: cfg.termination_tick_ns,
        timer: Timer::Termination,
    };
    for _ in 1..cfg.in_doubt_ticks {
        hand.advance_ns(cfg.termination_tick_ns);
        let expected = [rearm(&hand)];
        assert_effects(&hand.timer(Timer::Termination), &expected); // not in doubt yet
    }
    hand.advance_ns(cfg.termination_tick_ns);
    let expected = [rearm(&hand), count("in_doubt_queries"), send(other, Msg::Query { txn: t })];
    assert_effects(&hand.timer(Timer::Termination), &expected);
    let status = Msg::Status { txn: t, part: Participant(1), status: Some(TxnStatus::Committed) };
    let lsn = next_lsn(&hand);
    assert_effects(&hand.message(other, status), &[count("in_doubt_resolved"), logged(lsn, 2, Cmd::Commit(t))]);
    assert_effects(&hand.persist_all(), &[]); // nobody awaits the acknowledgement
    assert_eq!(hand.node.store().latest(Key(2)), Some(&int(5)), "committed on shard 1's word");
}

#[test]
fn a_query_about_a_transaction_never_seen_aborts_it_durably_before_answering() {
    // Cooperative termination: a leader that never saw the transaction
    // makes its abort durable first, so a late prepare cannot succeed here.
    let topo = topology(1);
    let mut hand = leader(&topo);
    let asker = topo.replicas(ShardId(1))[0];
    let t = txn(1);
    let lsn = next_lsn(&hand);
    assert_effects(&hand.message(asker, Msg::Query { txn: t }), &[logged(lsn, 1, Cmd::Abort(t))]);
    let aborted = Msg::Status { txn: t, part: Participant(0), status: Some(TxnStatus::Aborted) };
    assert_effects(&hand.persist_all(), &[send(asker, aborted.clone())]);
    assert_effects(&hand.message(asker, Msg::Query { txn: t }), &[send(asker, aborted)]); // from its outcomes
    let c = client(&topo);
    assert_effects(
        &hand.message(c, prepare(t, smallvec::smallvec![Participant(0), Participant(1)], &[(2, 5)])),
        &[vote(c, t, false)],
    );
}

// ---- a shard of three replicas ----

/// Shard 0's three replicas; the first leads.
fn shard_of_three(topo: &Arc<Topology>) -> (Leader, Leader, Leader) {
    (leader(topo), replica(topo, 1), replica(topo, 2))
}

/// A prepare record a deposed leader proposed can be chosen after the next
/// leader's transactions committed over what it read (its slot adopted by
/// a later phase 1) — for a key it read and writes too, an append computed
/// from the list it read. Every replica voids such a record where the log
/// places it: the writes it carries never install, and neither does a
/// commit of it.
#[test]
fn a_prepare_chosen_after_a_commit_overwrote_a_key_it_read_and_writes_is_void_at_every_replica() {
    let topo = topology(3);
    let members = topo.replicas(ShardId(0)).to_vec();
    let mut f = replica(&topo, 1);
    let c = client(&topo);
    let (winner, stale) = (txn(1), txn(2));
    // Both read key 2 at its initial version and write it.
    let chosen = vec![
        (1, Some(Arc::new(prepare_cmd(winner, c, smallvec::smallvec![Participant(0)], &[2], &[(2, 5)])))),
        (2, Some(Arc::new(Cmd::Commit(winner)))),
        (3, Some(Arc::new(prepare_cmd(stale, c, smallvec::smallvec![Participant(0)], &[2], &[(2, 6)])))),
        (4, Some(Arc::new(Cmd::Commit(stale)))),
    ];
    f.message(members[0], Msg::Paxos(PaxosMsg { group: 0, body: PaxosBody::Chosen { entries: chosen } }));
    f.persist_all();
    assert_eq!(f.node.store().latest(Key(2)), Some(&int(5)), "the stale record's write never installs");
    assert_eq!(f.node.prepared_count(), 0, "nothing stays prepared");
}

#[test]
fn a_prepare_is_voted_only_once_a_majority_of_its_shard_accepted_it() {
    let topo = topology(3);
    let members = topo.replicas(ShardId(0)).to_vec();
    let (mut l, mut f, _) = shard_of_three(&topo);
    let c = client(&topo);
    let t = txn(1);
    l.message(c, execute(t, 10, &[2], LockMode::Exclusive));
    // The leader's vote goes to disk while the followers are asked.
    let cmd = prepare_cmd(t, c, smallvec::smallvec![Participant(0)], &[2], &[(2, 5)]);
    let accept = PaxosBody::Accept { ballot: FIRST, slot: 1, value: Some(Arc::new(cmd.clone())), commit_upto: 0 };
    let lsn = next_lsn(&l);
    let fx = l.message(c, prepare(t, smallvec::smallvec![Participant(0)], &[(2, 5)]));
    assert_effects(
        &fx,
        &[logged(lsn, 1, cmd.clone()), paxos(members[1], accept.clone()), paxos(members[2], accept.clone())],
    );
    assert_effects(&l.persist_all(), &[]); // its own vote is not a majority of three
    // A follower answers once the accept is durable.
    let lsn = next_lsn(&f);
    assert_effects(&f.message(members[0], Msg::Paxos(PaxosMsg { group: 0, body: accept })), &[logged(lsn, 1, cmd)]);
    let accepted = PaxosBody::Accepted { ballot: FIRST, slot: 1 };
    assert_effects(&f.persist_all(), &[paxos(members[0], accepted.clone())]);
    // Two of three: chosen, applied, voted.
    let fx = l.message(members[1], Msg::Paxos(PaxosMsg { group: 0, body: accepted }));
    assert_effects(&fx, &[vote(c, t, true)]);
    // The leader's heartbeat carries the commit point; the follower applies.
    let cfg = config();
    let commit = PaxosBody::Commit { ballot: FIRST, commit_upto: 1 };
    let heartbeat = Effect::SetTimer {
        id: l.next_timer_id(),
        after_ns: cfg.paxos.tick_ns,
        timer: Timer::Paxos(PaxosTimer { group: 0 }),
    };
    let fx = l.timer(Timer::Paxos(PaxosTimer { group: 0 }));
    assert_effects(&fx, &[heartbeat, paxos(members[1], commit.clone()), paxos(members[2], commit.clone())]);
    assert_eq!(f.node.prepared_count(), 0);
    assert_effects(&f.message(members[0], Msg::Paxos(PaxosMsg { group: 0, body: commit })), &[]);
    assert_eq!(f.node.prepared_count(), 1, "the follower applied the prepare record");
}

#[test]
fn a_new_leader_retakes_the_locks_of_prepared_transactions_and_the_old_one_redirects() {
    let topo = topology(3);
    let members = topo.replicas(ShardId(0)).to_vec();
    let cfg = config();
    let (mut l, mut f, _) = shard_of_three(&topo);
    let c = client(&topo);
    let t = txn(1);
    // `t` prepared through the leader and the first follower.
    l.message(c, execute(t, 10, &[2], LockMode::Exclusive));
    let accepts: Vec<Msg> = l
        .message(c, prepare(t, smallvec::smallvec![Participant(0)], &[(2, 5)]))
        .sends()
        .map(|(_, m)| m.clone())
        .collect();
    l.persist_all();
    f.message(members[0], accepts[0].clone());
    let accepted: Vec<Msg> = f.persist_all().sends().map(|(_, m)| m.clone()).collect();
    assert_effects(&l.message(members[1], accepted[0].clone()), &[vote(c, t, true)]);
    let commits: Vec<Msg> = l.timer(Timer::Paxos(PaxosTimer { group: 0 })).sends().map(|(_, m)| m.clone()).collect();
    f.message(members[0], commits[0].clone());
    // The leader falls silent; the follower's election timeout runs out
    // and it asks the others whether they would vote for it.
    let ballot = Ballot { round: 2, rank: 1 };
    let pre_vote = PaxosBody::PreVote { ballot };
    let tick = Timer::Paxos(PaxosTimer { group: 0 });
    let mut asked = false;
    for _ in 0..100 {
        f.advance_ns(cfg.paxos.tick_ns);
        let rearm = Effect::SetTimer { id: f.next_timer_id(), after_ns: cfg.paxos.tick_ns, timer: tick.clone() };
        let fx = f.timer(tick.clone());
        if fx.len() == 1 {
            assert_effects(&fx, &[rearm]); // a quiet tick
            continue;
        }
        let expected =
            [rearm, count("paxos_pre_votes"), paxos(members[0], pre_vote.clone()), paxos(members[2], pre_vote.clone())];
        assert_effects(&fx, &expected);
        asked = true;
        break;
    }
    assert!(asked, "the follower runs for election");
    // The other follower has not heard the leader either: its grant and
    // the follower's own make a majority, and phase 1 starts.
    let granted = PaxosBody::PreVoteGranted { ballot, promised: Ballot { round: 1, rank: 0 } };
    let lsn = next_lsn(&f);
    let fx = f.message(members[2], Msg::Paxos(PaxosMsg { group: 0, body: granted }));
    let promised = Record::Paxos(PaxosRecord { group: 0, body: PaxosRecordBody::Promised(ballot) });
    let prepare_2 = PaxosBody::Prepare { ballot, from_slot: 2 };
    let expected = [
        Effect::Append { stream: Stream::MAIN, lsn: Lsn(lsn), record: promised },
        count("paxos_elections"),
        paxos(members[0], prepare_2.clone()),
        paxos(members[2], prepare_2.clone()),
    ];
    assert_effects(&fx, &expected);
    assert_effects(&f.persist_all(), &[]); // its own promise: one of two needed
    let promise = PaxosBody::Promise { ballot, entries: Vec::new(), snapshot: None };
    let fx = f.message(members[2], Msg::Paxos(PaxosMsg { group: 0, body: promise.clone() }));
    assert_effects(&fx, &[count("paxos_leader_changes"), count("leader_takeovers")]);
    assert!(f.node.is_leading());
    // It re-took the prepared transaction's lock: a newcomer waits for it,
    // while a free key is served.
    assert_effects(&f.message(c, execute(txn(2), 0, &[2], LockMode::Shared)), &[]);
    let fx = f.message(c, execute(txn(3), 30, &[6], LockMode::Exclusive));
    assert_effects(&fx, &[no_wait(), executed(c, txn(3), vec![(6, None)])]);
    // The old leader hears of the higher ballot from the member that
    // promised it (a Nack of its heartbeat), steps down and sends the
    // coordinators of its transactions away. (The candidate's Prepare
    // would not do: a leader idle or with a slot just chosen ignores
    // candidates, as the member that answered it would have while it heard
    // this leader; `crates/mechanisms/src/paxos.rs`.)
    let nack = PaxosBody::Nack { ballot: FIRST, promised: ballot };
    let fx = l.message(members[2], Msg::Paxos(PaxosMsg { group: 0, body: nack }));
    let redirect = Msg::Refused { txn: t, part: Participant(0), reason: Refusal::NotLeader { hint: None } };
    assert_effects(&fx, &[send(c, redirect)]);
    assert!(!l.node.is_leading());
    let fx = l.message(c, execute(txn(4), 40, &[8], LockMode::Exclusive));
    let refused = Msg::Refused { txn: txn(4), part: Participant(0), reason: Refusal::NotLeader { hint: None } };
    assert_effects(&fx, &[send(c, refused)]);
}

/// A leader cut off from its shard while a successor was elected still
/// believes it leads. A coordinator whose leader hint is stale sends it
/// the decision of a transaction the successor prepared: had it answered
/// "decided", the coordinator's watermark would pass the transaction, the
/// successor would retire it while it is still prepared, and the decision
/// reaching the successor later would find it forgotten — its locks held
/// for good (swarm seed 4904951, hot `list-append` with link cuts).
#[test]
fn a_leader_deposed_without_knowing_it_acknowledges_no_decision_of_a_transaction_its_log_lacks() {
    let topo = topology(3);
    let members = topo.replicas(ShardId(0)).to_vec();
    let (mut l, _, _) = shard_of_three(&topo);
    let c = client(&topo);
    assert!(l.node.is_leading(), "it has heard of no successor");
    // A commit proves the transaction prepared in the shard's log, which this
    // leader's lacks: it sends the coordinator to look for the leader.
    let t = txn(1);
    let hint = Some(members[0]); // itself: the coordinator asks every replica who leads
    let refused = Msg::Refused { txn: t, part: Participant(0), reason: Refusal::NotLeader { hint } };
    assert_effects(&l.message(c, decide(t, Decision::Commit)), &[count("stale_leader_decisions"), send(c, refused)]);
    // An abort it first tries to log: the accepts go out, and nothing is
    // acknowledged until a majority has chosen it — never, for a leader
    // the others no longer follow.
    let u = txn(2);
    let fx = l.message(c, decide(u, Decision::Abort));
    assert_eq!(fx.sends().filter(|(_, m)| matches!(m, Msg::Paxos(_))).count(), members.len() - 1, "{fx:?}");
    assert!(!fx.sends().any(|(_, m)| matches!(m, Msg::Decided { .. })), "acknowledged before it was chosen: {fx:?}");
    assert!(!l.persist_all().sends().any(|(_, m)| matches!(m, Msg::Decided { .. })), "its own vote is not a majority");
}

// ---- the coordinator ----

type Client = Hand<TwoPlPaxos, Coordinator>;

/// The client node's coordinator, its identifier epoch durable.
fn coordinator(topo: &Arc<Topology>) -> Client {
    let me = client(topo);
    let leaders = (0..topo.shards).map(|s| topo.initial_leader(ShardId(s))).collect();
    let mut hand = Hand::new(Coordinator::new(me, leaders, topo.key_layout(), config()), topo.clone(), me, Now::at(0));
    hand.start(Vec::new());
    hand.persist_all();
    hand
}

/// Increments key 0 (shard 0) and key 1 (shard 1).
fn two_shard_increment() -> Program {
    Program::new((0..2).map(|k| Op::Increment { key: Key(k), delta: 1, tag: 10 + k }).collect())
}

/// The coordinator's first transaction id (epoch 1, counter 1).
fn first_id(topo: &Topology) -> TxnId {
    TxnId { node: client(topo), seq: (1 << COUNTER_BITS) | 1 }
}

fn participants() -> Participants {
    [Participant(0), Participant(1)].into_iter().collect()
}

/// Runs a two-shard increment up to its votes; returns its id.
fn through_prepare(hand: &mut Client, topo: &Topology) -> TxnId {
    let cfg = config();
    let t = first_id(topo);
    let leader = |s: u32| topo.initial_leader(ShardId(s));
    let tick = Effect::SetTimer { id: hand.next_timer_id(), after_ns: cfg.coordinator_tick_ns, timer: Timer::Tick };
    let fx = hand.request(RequestId(1), two_shard_increment());
    let round = |k: u64| {
        let keys = vec![LockRead { key: Key(k), mode: LockMode::Exclusive, read: true }];
        send(leader(k as u32), Msg::Execute(Execute { txn: t, prio: prio(t, 0), round: 0, keys }))
    };
    assert_effects(&fx, &[tick, round(0), round(1)]); // one execute round per shard leader
    let reads =
        |s: u32| Msg::Executed(Executed { txn: t, part: Participant(s), round: 0, reads: vec![(Key(s.into()), None)] });
    assert_effects(&hand.message(leader(0), reads(0)), &[]); // shard 1 has not answered
    let fx = hand.message(leader(1), reads(1));
    let prepare = |s: u32| {
        let writes = vec![(Key(s.into()), Value { data: Data::Int(1), tag: 10 + u64::from(s) })];
        send(leader(s), Msg::Prepare(Prepare { txn: t, participants: participants(), writes }))
    };
    assert_effects(&fx, &[prepare(0), prepare(1)]); // prepare goes out once every read is in
    t
}

fn decide_from(to: NodeId, t: TxnId, decision: Decision) -> Fx {
    send(to, Msg::Decide { txn: t, decision, settled_below: t.seq })
}

#[test]
fn the_coordinator_commits_when_every_participant_votes_yes() {
    let topo = topology(1);
    let mut hand = coordinator(&topo);
    let t = through_prepare(&mut hand, &topo);
    let leader = |s: u32| topo.replicas(ShardId(s))[0];
    assert_effects(&hand.message(leader(0), Msg::Vote { txn: t, part: Participant(0), yes: true }), &[]);
    let fx = hand.message(leader(1), Msg::Vote { txn: t, part: Participant(1), yes: true });
    let results = two_shard_increment().execute(|_| None).results;
    let expected = [
        Effect::Complete { request: RequestId(1), outcome: Outcome::Committed { results } },
        decide_from(leader(0), t, Decision::Commit),
        decide_from(leader(1), t, Decision::Commit),
    ];
    assert_effects(&fx, &expected);
}

#[test]
fn a_coordinator_refuses_requests_while_its_oldest_attempt_is_a_window_of_ids_old() {
    let topo = topology(1);
    let me = client(&topo);
    let leaders = (0..topo.shards).map(|s| topo.initial_leader(ShardId(s))).collect();
    let cfg = Config { attempts_span_max: 2, ..config() };
    let mut hand = Hand::new(Coordinator::new(me, leaders, topo.key_layout(), cfg), topo.clone(), me, Now::at(0));
    hand.start(Vec::new());
    hand.persist_all();
    for r in 1..=2 {
        let fx = hand.request(RequestId(r), two_shard_increment());
        assert_eq!(fx.completions().count(), 0, "request {r} runs");
        assert_eq!(fx.sends().filter(|(_, m)| matches!(m, Msg::Execute(_))).count(), 2, "request {r} runs");
    }
    let fx = hand.request(RequestId(3), two_shard_increment());
    let rejected = Outcome::Aborted { reason: meridian_core::AbortReason::Rejected };
    assert!(fx.completions().eq([(RequestId(3), &rejected)]), "{fx:?}");
    assert_eq!((fx.sends().count(), fx.counted("attempts_refused")), (0, 1));
}

#[test]
fn one_no_vote_aborts_every_participant_and_the_request_retries() {
    let topo = topology(1);
    let mut hand = coordinator(&topo);
    let t = through_prepare(&mut hand, &topo);
    let leader = |s: u32| topo.replicas(ShardId(s))[0];
    let restart_id = hand.next_timer_id();
    let fx = hand.message(leader(1), Msg::Vote { txn: t, part: Participant(1), yes: false });
    // The backoff is drawn: take it from the effect, check its range.
    let (_, backoff_ns, _) = fx.timers_set().next().expect("a restart timer");
    assert!(backoff_ns <= config().retry_backoff_ns * 2, "within the backoff and its jitter");
    let expected = [
        decide_from(leader(0), t, Decision::Abort),
        decide_from(leader(1), t, Decision::Abort),
        Effect::SetTimer { id: restart_id, after_ns: backoff_ns, timer: Timer::Restart(RequestId(1)) },
    ];
    assert_effects(&fx, &expected); // the client waits for the retry
    hand.advance_ns(backoff_ns);
    let retried: Vec<Msg> = hand.timer(Timer::Restart(RequestId(1))).sends().map(|(_, m)| m.clone()).collect();
    let ids: Vec<TxnId> = retried
        .iter()
        .filter_map(|m| match m {
            Msg::Execute(e) => Some(e.txn),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 2, "the request runs again: {retried:?}");
    assert!(ids.iter().all(|id| *id != t), "as a new attempt");
}

#[test]
fn a_not_leader_refusal_sends_the_prepare_to_the_leader_it_names_or_asks_who_leads() {
    let topo = topology(3);
    let mut hand = coordinator(&topo);
    let t = through_prepare(&mut hand, &topo);
    let shard0 = topo.replicas(ShardId(0)).to_vec();
    let writes = vec![(Key(0), Value { data: Data::Int(1), tag: 10 })];
    let prepare_to =
        |to: NodeId| send(to, Msg::Prepare(Prepare { txn: t, participants: participants(), writes: writes.clone() }));
    // The old leader names the new one: the prepare goes there.
    let refused = |hint| Msg::Refused { txn: t, part: Participant(0), reason: Refusal::NotLeader { hint } };
    assert_effects(&hand.message(shard0[0], refused(Some(shard0[1]))), &[prepare_to(shard0[1])]);
    // It knows no leader either: every replica is asked, and the prepare
    // goes to the last one named meanwhile.
    let mut expected: Vec<Fx> = shard0.iter().map(|r| send(*r, Msg::WhoLeads { shard: ShardId(0) })).collect();
    expected.push(prepare_to(shard0[1]));
    assert_effects(&hand.message(shard0[1], refused(None)), &expected);
    // The replica that leads names itself, and is believed.
    let leads = Msg::Leader { shard: ShardId(0), leader: Some(shard0[2]) };
    assert_effects(&hand.message(shard0[2], leads), &[]);
    assert_effects(
        &hand.message(shard0[1], refused(Some(shard0[1]))),
        &[
            send(shard0[0], Msg::WhoLeads { shard: ShardId(0) }),
            send(shard0[1], Msg::WhoLeads { shard: ShardId(0) }),
            send(shard0[2], Msg::WhoLeads { shard: ShardId(0) }),
            prepare_to(shard0[2]),
        ],
    );
}

// ---- lock_at = "home": SLOG's 2PL-coord ----

/// Three regions, each a server region with one replica of each of two
/// shards; one client in the first.
fn home_topology() -> Arc<Topology> {
    Arc::new(Topology::build(&ClusterSpec::every_region(&["a", "b", "c"], 2), &[]))
}

fn home_config() -> Config {
    Config::from_params(&Params::new().with("lock_at", ParamValue::Str("home".into()))).expect("valid")
}

/// Replica `index` of `shard` (its home is region `index`), built as the
/// protocol builds it, not started.
fn home_node(topo: &Arc<Topology>, shard: u32, index: usize) -> Leader {
    let node = topo.replicas(ShardId(shard))[index];
    let replica = super::home_replica(topo, node, ShardId(shard), index, home_config());
    Hand::new(replica, topo.clone(), node, Now::at(1_000_000))
}

/// The same, started fresh and leading its home partition's log.
fn home_leader(topo: &Arc<Topology>, shard: u32, index: usize) -> Leader {
    let mut hand = home_node(topo, shard, index);
    hand.start(Vec::new());
    let fx = hand.persist_all();
    assert_effects(&fx, &[count("paxos_leader_changes"), count("leader_takeovers")]);
    hand
}

/// Shard 1's key homed at region 1: its home partition is participant
/// `1 × 2 + 1 = 3`, served by shard 1's replica 1.
const HOME_KEY: u64 = 2 * 3 + 2 + 1;
const HOME_PART: Participant = Participant(3);

/// Every record appended in `fxs`, in order: what a restart recovers when
/// all of them were made durable (and none compacted).
fn durable(fxs: &[&EffectsOf<TwoPlPaxos>]) -> Vec<Record> {
    fxs.iter().flat_map(|fx| fx.appends().map(|(_, _, r)| r.clone()).collect::<Vec<_>>()).collect()
}

#[test]
fn a_home_replica_prepares_with_its_own_fsync_alone_and_pushes_its_log_to_the_copies_at_its_tick() {
    let topo = home_topology();
    let layout = topo.key_layout();
    assert_eq!(layout.key(1, 1, 1), Key(HOME_KEY));
    let mut home = home_leader(&topo, 1, 1);
    assert_eq!(home.node.participant(), HOME_PART);
    let c = client(&topo);
    let t = txn(1);
    let fx = home.message(c, execute(t, 10, &[HOME_KEY], LockMode::Exclusive));
    let reads = vec![(Key(HOME_KEY), None)];
    assert_effects(&fx, &[no_wait(), send(c, Msg::Executed(Executed { txn: t, part: HOME_PART, round: 0, reads }))]);
    // The prepare record goes to its own log alone: nothing is sent, to any
    // replica, until its own fsync; then the vote.
    let fx = home.message(c, prepare(t, smallvec::smallvec![HOME_PART], &[(HOME_KEY, 5)]));
    assert_eq!(fx.appends().count(), 1, "{fx:?}");
    assert_eq!(fx.sends().count(), 0, "no vote awaited from any other replica: {fx:?}");
    let vote = Msg::Vote { txn: t, part: HOME_PART, yes: true };
    assert_effects(&home.persist_all(), &[send(c, vote)]);
    home.message(c, decide(t, Decision::Commit));
    let decided = Msg::Decided { txn: t, part: HOME_PART };
    assert_effects(&home.persist_all(), &[send(c, decided)]);
    assert_eq!(home.node.store().latest(Key(HOME_KEY)), Some(&int(5)));
    // At its tick the log goes to the shard's other replicas: what was
    // chosen since the last push, then the commit point.
    let tick = Timer::Paxos(PaxosTimer { group: HOME_PART.0 });
    let fx = home.timer(tick);
    let copies: Vec<NodeId> = [0, 2].iter().map(|r| topo.replicas(ShardId(1))[*r]).collect();
    let pushed: Vec<(NodeId, &'static str)> = fx
        .sends()
        .map(|(to, m)| match m {
            Msg::Paxos(PaxosMsg { group, body: PaxosBody::Chosen { entries } }) if *group == 3 => {
                assert_eq!(entries.iter().map(|(slot, _)| *slot).collect::<Vec<_>>(), [1, 2]);
                (to, "chosen")
            }
            Msg::Paxos(PaxosMsg { group: 3, body: PaxosBody::Commit { commit_upto: 2, .. } }) => (to, "commit"),
            other => panic!("{other:?}"),
        })
        .collect();
    let expected = vec![(copies[0], "chosen"), (copies[0], "commit"), (copies[1], "chosen"), (copies[1], "commit")];
    assert_eq!(pushed, expected);
}

#[test]
fn a_copy_applies_a_home_log_pushed_to_it_on_that_homes_stream() {
    let topo = home_topology();
    let mut home = home_leader(&topo, 1, 1);
    let c = client(&topo);
    let t = txn(1);
    home.message(c, execute(t, 10, &[HOME_KEY], LockMode::Exclusive));
    home.message(c, prepare(t, smallvec::smallvec![HOME_PART], &[(HOME_KEY, 5)]));
    home.persist_all();
    home.message(c, decide(t, Decision::Commit));
    home.persist_all();
    let pushed: Vec<Msg> = home.timer(Timer::Paxos(PaxosTimer { group: 3 })).sends().map(|(_, m)| m.clone()).collect();
    // Shard 1's replica in region 0 learns home 1's log.
    let mut copy = home_leader(&topo, 1, 0);
    let from = home.me();
    let lsn = next_lsn(&copy);
    let fx = copy.message(from, pushed[0].clone());
    let streams: Vec<(Stream, Lsn)> = fx.appends().map(|(s, l, _)| (s, l)).collect();
    assert_eq!(streams, [(Stream(2), Lsn(lsn)), (Stream(2), Lsn(lsn + 1))], "home 1's copy: stream 1 + 1");
    assert_eq!(fx.sends().count(), 0, "a copy answers nothing");
    let own = copy.node.participant();
    assert_eq!(copy.node.store_of(HOME_PART).and_then(|s| s.latest(Key(HOME_KEY))), Some(&int(5)));
    assert_eq!(copy.node.store_of(own).and_then(|s| s.latest(Key(HOME_KEY))), None, "not in its own partition");
}

#[test]
fn a_restarted_home_replica_replays_its_log_and_holds_its_prepared_transactions_locks_again() {
    let topo = home_topology();
    let cfg = home_config();
    let mut home = home_node(&topo, 1, 1);
    let started = home.start(Vec::new());
    let promised = home.persist_all();
    let c = client(&topo);
    let t = txn(1);
    home.message(c, execute(t, 10, &[HOME_KEY], LockMode::Exclusive));
    let prepared = home.message(c, prepare(t, smallvec::smallvec![HOME_PART], &[(HOME_KEY, 5)]));
    home.persist_all();
    // It crashes before the decision: a new process gets its durable log.
    let mut back = home_node(&topo, 1, 1);
    back.start(durable(&[&started, &promised, &prepared]));
    let refused = Msg::Refused { txn: txn(2), part: HOME_PART, reason: Refusal::NotLeader { hint: None } };
    let newcomer = execute(txn(2), 20, &[HOME_KEY], LockMode::Shared);
    assert_effects(&back.message(c, newcomer.clone()), &[send(c, refused)]);
    // Its one member elects itself at its election timeout.
    let tick = Timer::Paxos(PaxosTimer { group: HOME_PART.0 });
    for _ in 0..=cfg.paxos.election_ticks + cfg.paxos.jitter_ticks {
        back.advance_ns(cfg.paxos.tick_ns);
        back.timer(tick.clone());
        back.persist_all();
        if back.node.is_leading() {
            break;
        }
    }
    assert!(back.node.is_leading(), "a home replica is never replaced: it leads again");
    assert_eq!(back.node.prepared_count(), 1, "its prepared transaction survived the crash");
    assert_effects(&back.message(c, newcomer), &[]); // waits: the prepared lock was taken again
    back.message(c, decide(t, Decision::Commit));
    let fx = back.persist_all();
    let waited = fx.sends().find_map(|(_, m)| match m {
        Msg::Executed(e) if e.txn == txn(2) => Some(e.reads.clone()),
        _ => None,
    });
    assert_eq!(waited, Some(vec![(Key(HOME_KEY), Some(int(5)))]), "granted once the commit is durable: {fx:?}");
}

#[test]
fn a_home_coordinator_sends_each_key_to_its_home_replica_and_never_asks_who_leads() {
    let topo = home_topology();
    let layout = topo.key_layout();
    let me = client(&topo);
    let leaders = (0..topo.shards).map(|s| topo.initial_leader(ShardId(s))).collect();
    let mut hand =
        Hand::new(Coordinator::new(me, leaders, layout.clone(), home_config()), topo.clone(), me, Now::at(0));
    hand.start(Vec::new());
    hand.persist_all();
    // One shard, two homes: two participants.
    let (k0, k2) = (layout.key(0, 0, 3), layout.key(0, 2, 3));
    let program =
        Program::new(vec![Op::Increment { key: k0, delta: 1, tag: 1 }, Op::Increment { key: k2, delta: 1, tag: 2 }]);
    let fx = hand.request(RequestId(1), program);
    let shard0 = topo.replicas(ShardId(0));
    let to: Vec<(NodeId, Participant)> = fx
        .sends()
        .map(|(to, m)| match m {
            Msg::Execute(e) => (to, LockAt::Home.participant(&layout, e.keys[0].key)),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(to, [(shard0[0], Participant(0)), (shard0[2], Participant(4))], "each key at its home's replica");
    // The home in region c is recovering: the attempt is given up and
    // retried later, and nobody is asked who leads.
    let t = first_id(&topo);
    let refused = Msg::Refused { txn: t, part: Participant(4), reason: Refusal::NotLeader { hint: None } };
    let fx = hand.message(shard0[2], refused);
    assert!(fx.sends().all(|(_, m)| matches!(m, Msg::Decide { decision: Decision::Abort, .. })), "{fx:?}");
    assert_eq!(fx.sends().count(), 2, "the abort goes to both homes");
    assert!(fx.timers_set().any(|(_, _, t)| matches!(t, Timer::Restart(RequestId(1)))), "retried after a backoff");
}
