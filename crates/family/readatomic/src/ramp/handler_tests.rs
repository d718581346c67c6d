//! Handlers driven by hand: the effects of one event compared with what
//! the paper's algorithms say the transition does.

use super::messages::{Ask, GetId, Held, Item, Msg, Prepare, Record, Timer, Ts};
use super::{NodeF, RampF};
use crate::test_support::{deployment, key_on, partition};
use meridian_core::{Deployment, Hand, NodeId, Now, Op, Program, Protocol, RequestId, ShardId, Value};
use std::sync::Arc;

const MS: u64 = 1_000_000;

fn hand(d: &Deployment, node: NodeId) -> Hand<RampF> {
    let mut h = Hand::new(RampF::build(d, node).unwrap(), Arc::clone(&d.topology), node, Now::at(0));
    h.start(Vec::new());
    h
}

/// A transaction at `ts` writing `x` (shard 0) and `y` (shard 1).
fn prepare(d: &Deployment, ts: Ts, shard: u32) -> Arc<Prepare> {
    let (x, y) = (key_on(d, 0, 0), key_on(d, 1, 0));
    let key = if shard == 0 { x } else { y };
    Arc::new(Prepare {
        ts,
        writes: vec![(key, Value::int(ts.0, 1))],
        keys: Arc::from([x, y]),
        participants: vec![ShardId(0), ShardId(1)],
    })
}

fn sent(fx: &meridian_core::EffectsOf<RampF>) -> Vec<&Msg> {
    fx.sends().map(|(_, m)| m).collect()
}

#[test]
fn a_prepare_is_acknowledged_only_once_its_versions_are_durable() {
    let d = deployment();
    let client = d.topology.clients()[0];
    let mut p = hand(&d, partition(&d, 0));
    let fx = p.message(client, Msg::Prepare(prepare(&d, Ts(10), 0)));
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Prepared(_))), "Algorithm 1 line 4, durably");
    assert!(sent(&fx).is_empty(), "no acknowledgement before the append is durable");
    let fx = p.persist_all();
    assert!(matches!(sent(&fx)[..], [Msg::Prepared { ts: Ts(10) }]));
    // A first-round GET does not see a prepared version.
    let x = key_on(&d, 0, 0);
    let id = GetId { read: Ts(11), step: 1 };
    let fx = p.message(client, Msg::Get { id, ask: Ask::Latest(vec![x]) });
    assert!(matches!(sent(&fx)[..], [Msg::Got { items, .. }] if items[0].ts.is_none()));
}

#[test]
fn a_commit_raises_last_commit_and_a_first_round_returns_the_version_with_its_siblings() {
    let d = deployment();
    let client = d.topology.clients()[0];
    let mut p = hand(&d, partition(&d, 0));
    p.message(client, Msg::Prepare(prepare(&d, Ts(10), 0)));
    p.persist_all();
    let fx = p.message(client, Msg::Commit { ts: Ts(10) });
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Committed { ts: Ts(10) })));
    assert!(matches!(sent(&p.persist_all())[..], [Msg::Committed { ts: Ts(10) }]), "acknowledged once durable");
    let (x, y) = (key_on(&d, 0, 0), key_on(&d, 1, 0));
    let fx = p.message(client, Msg::Get { id: GetId { read: Ts(11), step: 1 }, ask: Ask::Latest(vec![x]) });
    let [Msg::Got { items, .. }] = &sent(&fx)[..] else { panic!("one answer") };
    assert_eq!(items[0].ts, Some(Ts(10)), "Algorithm 1 line 11: the version at lastCommit");
    assert_eq!(&*items[0].siblings, &[y], "line 18: md = I_tx − {{i}}");
}

#[test]
fn a_partition_that_never_prepared_a_transaction_refuses_it_for_good_when_asked() {
    let d = deployment();
    let client = d.topology.clients()[0];
    let mut p1 = hand(&d, partition(&d, 1));
    let keys = prepare(&d, Ts(10), 1).keys.clone();
    let fx = p1.message(partition(&d, 0), Msg::CheckPrepared { ts: Ts(10), keys });
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Aborted { ts: Ts(10) })));
    assert!(sent(&fx).is_empty(), "the refusal is durable before it is told");
    let fx = p1.persist_all();
    assert!(matches!(sent(&fx)[..], [Msg::PrepareState { ts: Ts(10), held: Held::Aborted }]));
    let fx = p1.message(client, Msg::Prepare(prepare(&d, Ts(10), 1)));
    assert!(matches!(sent(&fx)[..], [Msg::Refused { ts: Ts(10) }]), "the late prepare is refused");
    assert_eq!(fx.appends().count(), 0, "and installs nothing");
}

/// A newer commit of the transaction's key here does not mean this
/// partition held it: its prepare may still be on its way. Answering
/// `Prepared` let the asker commit a transaction whose version here did
/// not exist, and a RAMP-S reader that saw the other version read this
/// key's older one (`meridian swarm --protocol ramp-s --seeds 1 --start
/// 630136`, a fractured read).
#[test]
fn a_newer_commit_of_its_key_does_not_make_a_partition_hold_a_transaction_it_never_prepared() {
    let d = deployment();
    let client = d.topology.clients()[0];
    let mut p1 = hand(&d, partition(&d, 1));
    p1.message(client, Msg::Prepare(prepare(&d, Ts(20), 1)));
    p1.persist_all();
    p1.message(client, Msg::Commit { ts: Ts(20) });
    p1.persist_all();
    let keys = prepare(&d, Ts(10), 1).keys.clone();
    p1.message(partition(&d, 0), Msg::CheckPrepared { ts: Ts(10), keys });
    let fx = p1.persist_all();
    assert!(
        matches!(sent(&fx)[..], [Msg::PrepareState { ts: Ts(10), held: Held::Aborted }]),
        "lastCommit past 10 is no proof that 10 was prepared here: {:?}",
        sent(&fx)
    );
}

/// A transaction committed here and since overwritten and collected is
/// still held: the partition remembers what it committed.
#[test]
fn a_transaction_committed_here_is_held_after_its_version_is_collected() {
    let d = deployment();
    let client = d.topology.clients()[0];
    let mut p1 = hand(&d, partition(&d, 1));
    for ts in [Ts(10), Ts(20)] {
        p1.message(client, Msg::Prepare(prepare(&d, ts, 1)));
        p1.message(client, Msg::Commit { ts });
        p1.persist_all();
    }
    p1.set_time_ns(10_000 * MS);
    let fx = p1.timer(Timer::Gc);
    assert_eq!(fx.counted("gc_versions"), 1, "the overwritten version 10 is collected");
    let keys = prepare(&d, Ts(10), 1).keys.clone();
    let fx = p1.message(partition(&d, 0), Msg::CheckPrepared { ts: Ts(10), keys });
    assert_eq!(fx.appends().count(), 0, "nothing to refuse");
    assert!(matches!(sent(&fx)[..], [Msg::PrepareState { ts: Ts(10), held: Held::Prepared }]), "{:?}", sent(&fx));
}

#[test]
fn a_transaction_left_prepared_is_committed_once_every_participant_holds_it() {
    let d = deployment();
    let client = d.topology.clients()[0];
    let mut p0 = hand(&d, partition(&d, 0));
    p0.message(client, Msg::Prepare(prepare(&d, Ts(10), 0)));
    p0.persist_all();
    // The writer goes silent: no COMMIT. After `ctp_ms` the partition asks.
    p0.set_time_ns(1_000 * MS);
    let fx = p0.timer(Timer::Ctp);
    assert!(matches!(sent(&fx)[..], [Msg::CheckPrepared { ts: Ts(10), .. }]), "§4.6: ask the other participant");
    assert_eq!(fx.counted("ctp_runs"), 1);
    let fx = p0.message(partition(&d, 1), Msg::PrepareState { ts: Ts(10), held: Held::Prepared });
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Committed { ts: Ts(10) })), "every participant holds it");
    let x = key_on(&d, 0, 0);
    match &p0.node {
        NodeF::Partition(p) => assert_eq!(p.last_commit(x), Some(Ts(10))),
        _ => panic!("a partition"),
    }
    let fx = p0.persist_all();
    let to_p1 = fx.sends().any(|(to, m)| to == partition(&d, 1) && matches!(m, Msg::Commit { ts: Ts(10) }));
    assert!(to_p1, "and the other participant is told to commit");
}

#[test]
fn a_ramp_f_client_fetches_only_the_stale_sibling_in_its_second_round() {
    let d = deployment();
    let mut c = hand(&d, d.topology.clients()[0]);
    c.persist_all(); // the timestamp reservation
    let (x, y) = (key_on(&d, 0, 0), key_on(&d, 1, 0));
    let fx = c.request(RequestId(1), Program::new(vec![Op::Read { key: x }, Op::Read { key: y }]));
    let gets: Vec<(NodeId, GetId)> = fx
        .sends()
        .filter_map(|(to, m)| match m {
            Msg::Get { id, ask: Ask::Latest(_) } => Some((to, *id)),
            _ => None,
        })
        .collect();
    assert_eq!(gets.len(), 2, "Algorithm 1 lines 24-25: one GET per partition");
    let id = gets[0].1;
    // x at ts 10 names y as its sibling; y's partition still has nothing
    // committed: the first round is fractured.
    let xs = Item { key: x, ts: Some(Ts(10)), value: Some(Value::int(10, 1)), siblings: Arc::from([y]) };
    let ys = Item { key: y, ts: None, value: None, siblings: Arc::from([]) };
    c.message(partition(&d, 0), Msg::Got { id, items: vec![xs] });
    let fx = c.message(partition(&d, 1), Msg::Got { id, items: vec![ys] });
    let repairs: Vec<(NodeId, &Ask)> = fx
        .sends()
        .filter_map(|(to, m)| match m {
            Msg::Get { ask, .. } => Some((to, ask)),
            _ => None,
        })
        .collect();
    assert_eq!(repairs.len(), 1, "only y's partition is asked again");
    assert_eq!(repairs[0].0, partition(&d, 1));
    assert_eq!(repairs[0].1, &Ask::Exact(vec![(y, Ts(10))]), "lines 30-32: y at v_latest");
    assert_eq!(fx.counted("repair_reads"), 1);
    let second = GetId { read: id.read, step: id.step + 1 };
    let yv = Item { key: y, ts: Some(Ts(10)), value: Some(Value::int(11, 1)), siblings: Arc::from([x]) };
    let fx = c.message(partition(&d, 1), Msg::Got { id: second, items: vec![yv] });
    let done: Vec<_> = fx.completions().collect();
    assert_eq!(done.len(), 1);
    assert!(
        matches!(done[0].1, meridian_core::Outcome::Committed { results } if results[1].as_ref().map(|v| v.tag) == Some(11))
    );
}

/// A `Gone` answering an earlier step of a read that has moved on (its
/// second round is out) is ignored: the read stays, and its second round's
/// answer completes it.
#[test]
fn a_late_gone_for_an_earlier_round_leaves_the_read_to_complete() {
    let d = deployment();
    let mut c = hand(&d, d.topology.clients()[0]);
    c.persist_all(); // the timestamp reservation
    let (x, y) = (key_on(&d, 0, 0), key_on(&d, 1, 0));
    let fx = c.request(RequestId(1), Program::new(vec![Op::Read { key: x }, Op::Read { key: y }]));
    let id = fx
        .sends()
        .find_map(|(_, m)| match m {
            Msg::Get { id, .. } => Some(*id),
            _ => None,
        })
        .expect("a first round");
    let xs = Item { key: x, ts: Some(Ts(10)), value: Some(Value::int(10, 1)), siblings: Arc::from([y]) };
    let ys = Item { key: y, ts: None, value: None, siblings: Arc::from([]) };
    c.message(partition(&d, 0), Msg::Got { id, items: vec![xs] });
    c.message(partition(&d, 1), Msg::Got { id, items: vec![ys] }); // fractured: a second round
    let fx = c.message(partition(&d, 0), Msg::Gone { id });
    assert_eq!(fx.completions().count(), 0, "a stale Gone neither completes nor restarts the read");
    assert_eq!(fx.counted("read_restarts"), 0);
    let second = GetId { read: id.read, step: id.step + 1 };
    let yv = Item { key: y, ts: Some(Ts(10)), value: Some(Value::int(11, 1)), siblings: Arc::from([x]) };
    let fx = c.message(partition(&d, 1), Msg::Got { id: second, items: vec![yv] });
    assert_eq!(fx.completions().count(), 1, "the read completes with its second round");
}

/// A partition restarted from its log pays the cost model for the keys
/// its replay installs and commits at the restart, not at its first event
/// after it.
#[test]
fn a_restart_is_charged_for_the_keys_its_replay_touches() {
    let d = deployment();
    let client = d.topology.clients()[0];
    let node = partition(&d, 0);
    let mut p = hand(&d, node);
    let mut log = Vec::new();
    let fx = p.message(client, Msg::Prepare(prepare(&d, Ts(10), 0)));
    log.extend(fx.appends().map(|(_, _, r)| r.clone()));
    p.persist_all();
    let fx = p.message(client, Msg::Commit { ts: Ts(10) });
    log.extend(fx.appends().map(|(_, _, r)| r.clone()));
    assert_eq!(log.len(), 2, "a prepare and a commit record");
    let mut restarted = Hand::new(RampF::build(&d, node).unwrap(), Arc::clone(&d.topology), node, Now::at(0));
    let fx = restarted.start(log);
    let charged: u64 = fx
        .all()
        .iter()
        .map(|e| match e {
            meridian_core::Effect::ChargeKeys { keys } => *keys,
            _ => 0,
        })
        .sum();
    assert!(charged >= 2, "the replayed install and commit are charged at the restart: {charged} keys");
}

#[test]
fn metadata_is_measured_as_its_encoding_is_long() {
    use super::client::item_metadata_bytes;
    use meridian_mechanisms::encoding::encoded_len;
    let d = deployment();
    let many: Vec<meridian_core::Key> = (0..300u32).map(|i| key_on(&d, i % 2, i as usize)).collect();
    for siblings in [Vec::new(), vec![key_on(&d, 0, 0)], many] {
        let item =
            Item { key: key_on(&d, 0, 0), ts: Some(Ts(u64::MAX - 3)), value: None, siblings: Arc::from(siblings) };
        let encoded = postcard::to_allocvec(&(item.ts, &*item.siblings)).expect("encodes");
        assert_eq!(item_metadata_bytes(&item), encoded.len());
        assert_eq!(encoded_len(&item), postcard::to_allocvec(&item).expect("encodes").len());
    }
}
