//! Handlers driven by hand: the effects of one event compared with what
//! NOC-NOC Algorithm 1 says the transition does, and the read path's cases
//! of Figure 5.

use super::messages::{Get, KeyRead, Msg, Prepare, Record, Timer};
use super::{Answer, Node, RaNoc2};
use crate::ramp::{GetId, Held, Ts};
use crate::test_support::{deployment, key_on, partition};
use meridian_core::{
    Deployment, EffectsOf, Hand, Key, NodeId, Now, Op, Outcome, Program, Protocol, RequestId, ShardId, Value,
};
use std::sync::Arc;

const MS: u64 = 1_000_000;

fn hand(d: &Deployment, node: NodeId) -> Hand<RaNoc2> {
    let mut h = Hand::new(RaNoc2::build(d, node).unwrap(), Arc::clone(&d.topology), node, Now::at(0));
    h.start(Vec::new());
    h
}

fn sent(fx: &EffectsOf<RaNoc2>) -> Vec<&Msg> {
    fx.sends().map(|(_, m)| m).collect()
}

/// What `p` sends for `msg`, at once or once its appends are durable.
fn answers(p: &mut Hand<RaNoc2>, from: NodeId, msg: Msg) -> Vec<Msg> {
    let now: Vec<Msg> = sent(&p.message(from, msg)).into_iter().cloned().collect();
    now.into_iter().chain(sent(&p.persist_all()).into_iter().cloned()).collect()
}

/// A prepare at `ts` of `key` (tagged `ts`), for a transaction on shards 0
/// and 1.
fn prepare(ts: u64, key: Key) -> Msg {
    Msg::Prepare(Arc::new(Prepare {
        ts: Ts(ts),
        writes: vec![(key, Value::int(ts, 1))],
        participants: vec![ShardId(0), ShardId(1)],
    }))
}

/// Prepares (and commits, when `commit`) `key` at `ts` on `p`, durably.
fn write(p: &mut Hand<RaNoc2>, client: NodeId, ts: u64, key: Key, commit: bool) {
    p.message(client, prepare(ts, key));
    p.persist_all();
    if commit {
        p.message(client, Msg::Commit { ts: Ts(ts) });
        p.persist_all();
    }
}

fn read(p: &Hand<RaNoc2>, ts_c: Option<u64>, key: Key, ts_p: Option<u64>) -> Answer {
    let Node::Partition(part) = &p.node else { panic!("a partition") };
    part.read(ts_c.map(Ts), KeyRead { key, ts_p: ts_p.map(Ts) })
}

fn found(ts: u64) -> Answer {
    Answer::Found { ts: Some(Ts(ts)), value: Some(Value::int(ts, 1)) }
}

fn lst(p: &Hand<RaNoc2>) -> Option<Ts> {
    let Node::Partition(part) = &p.node else { panic!("a partition") };
    part.lst()
}

/// Figure 5a (lines 20-21): Ann's LSV (her X₃, prepared only) is beyond
/// her GSV: the partition returns her own version.
#[test]
fn figure_5a_beyond_the_gsv_the_read_returns_the_clients_own_prepared_version() {
    let d = deployment();
    let (ann, x) = (d.topology.clients()[0], key_on(&d, 0, 0));
    let mut p = hand(&d, partition(&d, 0));
    write(&mut p, ann, 10, x, true);
    write(&mut p, ann, 30, x, false);
    assert_eq!(read(&p, Some(10), x, Some(30)), found(30), "her own X₃, prepared only");
    assert_eq!(read(&p, Some(10), x, None), found(10), "another client at the same GSV reads X₁");
}

/// Figure 5b (lines 41-43): with the LSV within the GSV, the newest
/// committed version between the two is returned.
#[test]
fn figure_5b_within_the_gsv_the_newest_committed_version_between_the_views_is_returned() {
    let d = deployment();
    let (ann, x) = (d.topology.clients()[0], key_on(&d, 0, 0));
    let mut p = hand(&d, partition(&d, 0));
    write(&mut p, ann, 10, x, true);
    write(&mut p, ann, 20, x, true);
    assert_eq!(read(&p, Some(25), x, Some(10)), found(20), "X₂, committed between LSV 10 and GSV 25");
}

/// Figure 5c (line 44): no version between the views (the GSV was raised
/// by other keys of the partition): the version at the LSV is returned.
#[test]
fn figure_5c_with_nothing_between_the_views_the_version_at_the_lsv_is_returned() {
    let d = deployment();
    let (ann, x, other) = (d.topology.clients()[0], key_on(&d, 0, 0), key_on(&d, 0, 1));
    let mut p = hand(&d, partition(&d, 0));
    write(&mut p, ann, 10, x, true);
    write(&mut p, ann, 20, other, true);
    assert_eq!(lst(&p), Some(Ts(20)), "the partition's safe time moved on with another key");
    assert_eq!(read(&p, Some(20), x, Some(10)), found(10), "X₁, at the LSV");
}

/// Figure 5d (line 42): the client's own X₂ above its LSV is not fully
/// prepared (still pending): the read skips it and returns X₁.
#[test]
fn figure_5d_a_pending_version_between_the_views_is_skipped() {
    let d = deployment();
    let (ann, x) = (d.topology.clients()[0], key_on(&d, 0, 0));
    let mut p = hand(&d, partition(&d, 0));
    write(&mut p, ann, 10, x, true);
    write(&mut p, ann, 20, x, false);
    assert_eq!(read(&p, Some(25), x, Some(10)), found(10), "X₂ is pending: skipped");
    assert_eq!(lst(&p), Some(Ts(19)), "and the safe time stays below it");
}

#[test]
fn a_prepare_is_acknowledged_once_durable_with_the_latest_safe_time() {
    let d = deployment();
    let (client, x) = (d.topology.clients()[0], key_on(&d, 0, 0));
    let mut p = hand(&d, partition(&d, 0));
    let fx = p.message(client, prepare(10, x));
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Prepared(_))), "lines 30-31, durably");
    assert!(sent(&fx).is_empty(), "no acknowledgement before the append is durable");
    let fx = p.persist_all();
    assert!(matches!(sent(&fx)[..], [Msg::Prepared { ts: Ts(10), lst: Some(Ts(9)) }]), "line 32: LST below 10");
    let fx = p.message(client, Msg::Commit { ts: Ts(10) });
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Committed { ts: Ts(10) })));
    let get = Get { id: GetId { read: Ts(1), step: 0 }, ts_c: None, keys: Vec::new() };
    let fx = p.message(client, Msg::Get(get));
    assert!(
        matches!(sent(&fx)[..], [Msg::Got { lst: Some(Ts(9)), .. }]),
        "a GET is told the safe time of durable records only"
    );
    let fx = p.persist_all();
    assert!(matches!(sent(&fx)[..], [Msg::Committed { ts: Ts(10), lst: Some(Ts(10)) }]), "line 36");
}

#[test]
fn a_prepare_at_or_below_the_safe_time_is_refused_for_good() {
    let d = deployment();
    let (client, x) = (d.topology.clients()[0], key_on(&d, 0, 0));
    let mut p = hand(&d, partition(&d, 0));
    write(&mut p, client, 20, x, true);
    let fx = p.message(client, prepare(15, x));
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Aborted { ts: Ts(15) })), "durably");
    assert_eq!(fx.counted("prepares_refused"), 1);
    let fx = p.persist_all();
    assert!(
        matches!(sent(&fx)[..], [Msg::Refused { ts: Ts(15), lst: Some(Ts(20)) }]),
        "with the safe time to go above"
    );
    assert_eq!(read(&p, Some(20), x, None), found(20), "nothing was installed below the safe time");
    let fx = p.message(partition(&d, 1), Msg::CheckPrepared { ts: Ts(15) });
    assert!(matches!(sent(&fx)[..], [Msg::PrepareState { ts: Ts(15), held: Held::Aborted }]), "asked, it says so");
}

#[test]
fn a_prepare_sent_again_after_its_commit_is_acknowledged_not_refused() {
    let d = deployment();
    let (client, x) = (d.topology.clients()[0], key_on(&d, 0, 0));
    let mut p = hand(&d, partition(&d, 0));
    write(&mut p, client, 10, x, true);
    let got = answers(&mut p, client, prepare(10, x));
    assert!(matches!(got[..], [Msg::Prepared { ts: Ts(10), .. }]), "{got:?}");
}

#[test]
fn a_transaction_left_prepared_is_committed_once_every_participant_holds_it() {
    let d = deployment();
    let (client, x) = (d.topology.clients()[0], key_on(&d, 0, 0));
    let mut p0 = hand(&d, partition(&d, 0));
    write(&mut p0, client, 10, x, false);
    // The writer goes silent: no COMMIT. After `ctp_ms` the partition asks.
    p0.set_time_ns(1_000 * MS);
    let fx = p0.timer(Timer::Ctp);
    assert!(matches!(sent(&fx)[..], [Msg::CheckPrepared { ts: Ts(10) }]), "ask the other participant");
    let fx = p0.message(partition(&d, 1), Msg::PrepareState { ts: Ts(10), held: Held::Prepared });
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Committed { ts: Ts(10) })), "every participant holds it");
    let fx = p0.persist_all();
    let to_p1 = fx.sends().any(|(to, m)| to == partition(&d, 1) && matches!(m, Msg::Commit { ts: Ts(10) }));
    assert!(to_p1, "and the other participant is told to commit");
    assert_eq!(lst(&p0), Some(Ts(10)));
}

#[test]
fn a_partition_that_never_prepared_a_transaction_refuses_it_when_asked() {
    let d = deployment();
    let (client, y) = (d.topology.clients()[0], key_on(&d, 1, 0));
    let mut p1 = hand(&d, partition(&d, 1));
    let fx = p1.message(partition(&d, 0), Msg::CheckPrepared { ts: Ts(10) });
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Aborted { ts: Ts(10) })));
    assert!(sent(&fx).is_empty(), "the refusal is durable before it is told");
    let fx = p1.persist_all();
    assert!(matches!(sent(&fx)[..], [Msg::PrepareState { ts: Ts(10), held: Held::Aborted }]));
    let got = answers(&mut p1, client, prepare(10, y));
    assert!(matches!(got[..], [Msg::Refused { ts: Ts(10), .. }]), "the late prepare is refused: {got:?}");
}

/// A client of `d` whose timestamp reservation is durable, and a key on
/// each of shards 0 and 1.
fn ready_client(d: &Deployment) -> (Hand<RaNoc2>, Key, Key) {
    let mut c = hand(d, d.topology.clients()[0]);
    c.persist_all();
    (c, key_on(d, 0, 0), key_on(d, 1, 0))
}

/// The ids of the GETs a client sent, with their views.
fn gets(fx: &EffectsOf<RaNoc2>) -> Vec<(NodeId, Get)> {
    fx.sends()
        .filter_map(|(to, m)| match m {
            Msg::Get(g) => Some((to, g.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_write_returns_after_one_phase_and_its_client_then_reads_it_from_its_lsv() {
    let d = deployment();
    let (mut c, x, y) = ready_client(&d);
    let w = Program::new(vec![
        Op::Write { key: x, value: Value::int(1, 1) },
        Op::Write { key: y, value: Value::int(2, 1) },
    ]);
    let fx = c.request(RequestId(1), w);
    let ts = fx
        .sends()
        .find_map(|(_, m)| match m {
            Msg::Prepare(p) => Some(p.ts),
            _ => None,
        })
        .expect("prepares sent");
    assert_eq!(fx.sends().count(), 2, "line 6: one PREPARE per partition");
    c.message(partition(&d, 0), Msg::Prepared { ts, lst: None });
    let fx = c.message(partition(&d, 1), Msg::Prepared { ts, lst: None });
    let commits = fx.sends().filter(|(_, m)| matches!(m, Msg::Commit { ts: t } if *t == ts)).count();
    assert_eq!(commits, 2, "lines 11-13: COMMIT_ALL in the background, at once");
    let local = fx.appends().any(|(_, _, r)| matches!(r, Record::Local { ts: t, keys } if *t == ts && keys.len() == 2));
    assert!(local, "line 9, durably: the LSV survives a restart");
    assert_eq!(fx.completions().count(), 0, "answered once the local version is durable");
    let fx = c.persist_all();
    assert!(matches!(fx.completions().next(), Some((RequestId(1), Outcome::Committed { .. }))), "after one phase");
    assert_eq!(fx.counted("write_phases_on_client_path"), 1);
    // A read right away, the commits unanswered: the GSV knows nothing,
    // the LSV holds the write (line 9), so each key is read at it.
    let fx = c.request(RequestId(2), Program::new(vec![Op::Read { key: x }, Op::Read { key: y }]));
    let gets = gets(&fx);
    assert_eq!(gets.len(), 2, "one round: one GET per partition");
    for (_, g) in &gets {
        assert_eq!(g.ts_c, None, "line 17: nothing is known safe yet");
        assert_eq!(g.keys[0].ts_p, Some(ts), "line 19: its own write");
    }
    assert_eq!(fx.counted("keys_read_from_lsv"), 2);
}

#[test]
fn a_refused_write_is_dropped_everywhere_and_written_again_above_the_safe_time() {
    let d = deployment();
    let (mut c, x, y) = ready_client(&d);
    let w = Program::new(vec![
        Op::Write { key: x, value: Value::int(1, 1) },
        Op::Write { key: y, value: Value::int(2, 1) },
    ]);
    let fx = c.request(RequestId(1), w);
    let ts = fx.sends().find_map(|(_, m)| if let Msg::Prepare(p) = m { Some(p.ts) } else { None }).unwrap();
    c.message(partition(&d, 0), Msg::Prepared { ts, lst: None });
    let safe = Ts::new(ts.time_us() + 5_000, 0);
    let fx = c.message(partition(&d, 1), Msg::Refused { ts, lst: Some(safe) });
    let aborts = fx.sends().filter(|(_, m)| matches!(m, Msg::Abort { ts: t } if *t == ts)).count();
    assert_eq!(aborts, 2, "the participants drop the refused timestamp");
    assert_eq!(fx.counted("write_retries"), 1);
    let again: Vec<Ts> =
        fx.sends().filter_map(|(_, m)| if let Msg::Prepare(p) = m { Some(p.ts) } else { None }).collect();
    assert_eq!(again.len(), 2, "prepared again at both partitions");
    assert!(again.iter().all(|t| *t > safe), "above the safe time the refusal carried");
    assert_eq!(fx.completions().count(), 0, "not answered yet");
}

/// A deployment whose partitions remember one outcome.
fn forgetful() -> Deployment {
    let mut d = deployment();
    d.params = d.params.with("outcomes_remembered", meridian_core::ParamValue::Int(1));
    d
}

/// The termination protocol's question about a transaction decided longer
/// ago than `outcomes_remembered` is answered `Forgotten`, and the asking
/// partition resolves it: it commits and its safe time moves past it
/// (before, nobody answered and the transaction stayed pending, the safe
/// time below it, for good).
#[test]
fn a_question_about_a_forgotten_outcome_is_answered_and_the_asker_resolves_it() {
    let d = forgetful();
    let (client, x, y) = (d.topology.clients()[0], key_on(&d, 0, 0), key_on(&d, 1, 0));
    let (mut p0, mut p1) = (hand(&d, partition(&d, 0)), hand(&d, partition(&d, 1)));
    write(&mut p0, client, 10, x, false);
    // The other participant committed it, then decided two more: it forgot.
    write(&mut p1, client, 10, y, true);
    write(&mut p1, client, 20, y, true);
    write(&mut p1, client, 30, y, true);
    p0.set_time_ns(1_000 * MS);
    let fx = p0.timer(Timer::Ctp);
    assert!(matches!(sent(&fx)[..], [Msg::CheckPrepared { ts: Ts(10) }]));
    let answer = answers(&mut p1, partition(&d, 0), Msg::CheckPrepared { ts: Ts(10) });
    assert!(matches!(answer[..], [Msg::PrepareState { ts: Ts(10), held: Held::Forgotten }]), "{answer:?}");
    assert_eq!(lst(&p0), Some(Ts(9)), "still pending at the asker");
    let fx = p0.message(partition(&d, 1), answer[0].clone());
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Committed { ts: Ts(10) })), "resolved");
    p0.persist_all();
    assert_eq!(lst(&p0), Some(Ts(10)), "the safe time moves past it");
    let Node::Partition(part) = &p0.node else { panic!("a partition") };
    assert_eq!(part.pending(), 0);
}

/// A refusal still wins over a forgotten outcome: one participant that
/// refused the transaction aborts it, whatever the others forgot.
#[test]
fn a_refusal_wins_over_a_forgotten_outcome() {
    let d = forgetful();
    let (client, x) = (d.topology.clients()[0], key_on(&d, 0, 0));
    let mut p0 = hand(&d, partition(&d, 0));
    p0.message(
        client,
        Msg::Prepare(Arc::new(Prepare {
            ts: Ts(10),
            writes: vec![(x, Value::int(10, 1))],
            participants: vec![ShardId(0), ShardId(1)],
        })),
    );
    p0.persist_all();
    p0.set_time_ns(1_000 * MS);
    p0.timer(Timer::Ctp);
    let fx = p0.message(partition(&d, 1), Msg::PrepareState { ts: Ts(10), held: Held::Aborted });
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Aborted { ts: Ts(10) })));
    let fx = p0.message(partition(&d, 1), Msg::PrepareState { ts: Ts(10), held: Held::Forgotten });
    assert!(fx.appends().next().is_none(), "already aborted: nothing more to decide");
}

/// A transaction that wrote this partition alone, whose writer stopped
/// before COMMIT: nobody is left to ask, every participant holds it, and
/// the termination protocol commits it here (it stayed pending for good,
/// its safe time below it — swarm seed 140142 of `ra-noc`).
#[test]
fn a_transaction_of_one_partition_left_prepared_is_committed_by_it_alone() {
    let d = deployment();
    let (client, x) = (d.topology.clients()[0], key_on(&d, 0, 0));
    let mut p0 = hand(&d, partition(&d, 0));
    let alone = Prepare { ts: Ts(10), writes: vec![(x, Value::int(10, 1))], participants: vec![ShardId(0)] };
    p0.message(client, Msg::Prepare(Arc::new(alone)));
    p0.persist_all();
    assert_eq!(lst(&p0), Some(Ts(9)), "pending");
    p0.set_time_ns(1_000 * MS);
    let fx = p0.timer(Timer::Ctp);
    assert_eq!(fx.sends().count(), 0, "nobody to ask");
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Committed { ts: Ts(10) })), "committed alone");
    p0.persist_all();
    assert_eq!(lst(&p0), Some(Ts(10)));
}

/// Lines 21-24 (`crate::common::reads`, Eiger's reads too): a read returns
/// once the last partition answered, each key with the value its
/// partition gave, in the program's order; a repeated answer is passed
/// over; a version collected under the read sends the round again at the
/// next step, whose answers alone count.
#[test]
fn a_read_returns_each_partitions_values_once_the_last_answers_and_a_collection_reads_again() {
    let d = deployment();
    let (mut c, x, y) = ready_client(&d);
    let (p0, p1) = (partition(&d, 0), partition(&d, 1));
    let fx = c.request(RequestId(1), Program::new(vec![Op::Read { key: y }, Op::Read { key: x }]));
    let first = gets(&fx);
    assert_eq!(first.len(), 2, "one GET per partition");
    let id = first[0].1.id;
    let got = |id, tag: u64| Msg::Got { id, values: vec![Some(Value::int(tag, 1))], lst: None };
    let fx = c.message(p0, got(id, 7));
    assert_eq!(fx.completions().count(), 0, "a partition has not answered");
    let fx = c.message(p0, got(id, 7));
    assert_eq!(fx.completions().count(), 0, "a repeated answer is not the missing one");
    let fx = c.message(p1, Msg::Gone { id, lst: None });
    assert_eq!(fx.counted("read_restarts"), 1);
    let again = gets(&fx);
    assert_eq!(again.len(), 2, "the round again, to every partition");
    let next = again[0].1.id;
    assert_eq!(next.step, id.step + 1, "at the next step");
    let fx = c.message(p1, got(id, 9));
    assert_eq!(fx.completions().count(), 0, "an answer to the earlier step does not count");
    c.message(p0, got(next, 3));
    let fx = c.message(p1, got(next, 4));
    let results = match fx.completions().next() {
        Some((RequestId(1), Outcome::Committed { results })) => results.clone(),
        other => panic!("the read returns: {other:?}"),
    };
    assert_eq!(results, vec![Some(Value::int(4, 1)), Some(Value::int(3, 1))], "y from shard 1, then x from shard 0");
    assert_eq!(fx.counted("read_rounds"), 2);
}

/// A `Gone` for an earlier step arriving after the read moved on leaves the
/// read in place: it completes once the current step's answers are in.
#[test]
fn a_late_gone_for_an_earlier_round_leaves_the_read_to_complete() {
    let d = deployment();
    let (mut c, x, y) = ready_client(&d);
    let (p0, p1) = (partition(&d, 0), partition(&d, 1));
    let fx = c.request(RequestId(1), Program::new(vec![Op::Read { key: y }, Op::Read { key: x }]));
    let id = gets(&fx)[0].1.id;
    let fx = c.message(p1, Msg::Gone { id, lst: None });
    let next = gets(&fx)[0].1.id;
    assert_eq!(next.step, id.step + 1);
    let fx = c.message(p0, Msg::Gone { id, lst: None });
    assert_eq!(fx.counted("read_restarts"), 0, "a late Gone of the earlier step restarts nothing");
    let got = |tag: u64| Msg::Got { id: next, values: vec![Some(Value::int(tag, 1))], lst: None };
    c.message(p0, got(3));
    let fx = c.message(p1, got(4));
    assert!(
        matches!(fx.completions().next(), Some((RequestId(1), Outcome::Committed { .. }))),
        "the read completes at its current step"
    );
}

/// `max_attempts` (10 by default) counts a read's restarts, as RAMP's and
/// LORA's do: the tenth `Gone` still sends the round again, the eleventh
/// gives the read up.
#[test]
fn a_read_restarts_max_attempts_times_then_gives_up() {
    let d = deployment();
    let (mut c, x, _) = ready_client(&d);
    let p0 = partition(&d, 0);
    let fx = c.request(RequestId(1), Program::new(vec![Op::Read { key: x }]));
    let mut id = gets(&fx)[0].1.id;
    for restart in 1..=10 {
        let fx = c.message(p0, Msg::Gone { id, lst: None });
        assert_eq!(fx.counted("read_restarts"), 1, "restart {restart}");
        id = gets(&fx)[0].1.id;
    }
    let fx = c.message(p0, Msg::Gone { id, lst: None });
    assert_eq!(fx.counted("reads_given_up"), 1);
    assert!(matches!(fx.completions().next(), Some((RequestId(1), Outcome::Aborted { .. }))));
}
