//! Handlers driven by hand: a LORA client's write and read paths and a
//! partition's GET by known timestamp, compared with what the algorithm
//! (module documentation) says each transition does.

use super::{Lora, Node};
use crate::ramp::{Ask, GetId, Item, KnownState, Msg, Prepare, Record, Ts};
use crate::test_support::{deployment, key_on, partition};
use meridian_core::{
    Deployment, EffectsOf, Hand, Key, NodeId, Now, Op, Outcome, Program, Protocol, RequestId, ShardId, Value,
};
use std::sync::Arc;

const MS: u64 = 1_000_000;

fn hand(d: &Deployment, node: NodeId) -> Hand<Lora> {
    let mut h = Hand::new(Lora::build(d, node).unwrap(), Arc::clone(&d.topology), node, Now::at(0));
    h.start(Vec::new());
    h
}

/// A client whose first timestamp reservation is durable.
fn client(d: &Deployment) -> Hand<Lora> {
    let mut c = hand(d, d.topology.clients()[0]);
    c.persist_all();
    c
}

fn gets(fx: &EffectsOf<Lora>) -> Vec<(NodeId, GetId, Ask)> {
    let get = |(to, m): (NodeId, &Msg)| match m {
        Msg::Get { id, ask } => Some((to, *id, ask.clone())),
        _ => None,
    };
    fx.sends().filter_map(get).collect()
}

fn known_at(c: &Hand<Lora>, key: Key) -> Option<Ts> {
    let Node::Client(client) = &c.node else { panic!("a client") };
    client.known_at(key)
}

fn version(key: Key, ts: u64, siblings: &[Key]) -> Item {
    Item { key, ts: Some(Ts(ts)), value: Some(Value::int(ts, 1)), siblings: Arc::from(siblings) }
}

/// Writes `x` (shard 0) and `y` (shard 1) through `c`, every partition
/// preparing it; the write's timestamp and the effects of the last
/// acknowledgement.
fn write_xy(d: &Deployment, c: &mut Hand<Lora>, request: u64) -> (Ts, EffectsOf<Lora>) {
    let (x, y) = (key_on(d, 0, 0), key_on(d, 1, 0));
    let program = Program::new(vec![
        Op::Write { key: x, value: Value::int(request, 1) },
        Op::Write { key: y, value: Value::int(request, 2) },
    ]);
    let fx = c.request(RequestId(request), program);
    let prepares: Vec<Arc<Prepare>> = fx
        .sends()
        .filter_map(|(_, m)| match m {
            Msg::Prepare(p) => Some(Arc::clone(p)),
            _ => None,
        })
        .collect();
    assert_eq!(prepares.len(), 2, "one PREPARE per partition written");
    assert!(prepares.iter().all(|p| *p.keys == [x, y]), "each version carries the transaction's keys");
    let ts = prepares[0].ts;
    c.message(partition(d, 0), Msg::Prepared { ts });
    (ts, c.message(partition(d, 1), Msg::Prepared { ts }))
}

#[test]
fn a_write_returns_after_its_prepare_phase_once_its_keys_are_known_durably() {
    let d = deployment();
    let mut c = client(&d);
    let (x, y) = (key_on(&d, 0, 0), key_on(&d, 1, 0));
    let (ts, fx) = write_xy(&d, &mut c, 1);
    let commits = fx.sends().filter(|(_, m)| matches!(m, Msg::Commit { .. })).count();
    assert_eq!(commits, 2, "COMMIT leaves for both partitions, in the background");
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Known { ts: t, keys } if *t == ts && keys == &[x, y])));
    assert_eq!(fx.completions().count(), 0, "not answered before its record is durable");
    assert_eq!((known_at(&c, x), known_at(&c, y)), (Some(ts), Some(ts)), "every key written joins `last`");
    let fx = c.persist_all();
    let done: Vec<_> = fx.completions().collect();
    assert!(matches!(done[..], [(RequestId(1), Outcome::Committed { .. })]), "answered after one phase");
    assert_eq!(fx.counted("write_phases_on_client_path"), 1);
    c.message(partition(&d, 0), Msg::Committed { ts });
    let fx = c.message(partition(&d, 1), Msg::Committed { ts });
    assert_eq!(fx.counted("background_commits"), 1);
}

#[test]
fn a_read_asks_each_key_at_the_timestamp_known_and_ends_after_one_round() {
    let d = deployment();
    let mut c = client(&d);
    let (x, y, z) = (key_on(&d, 0, 0), key_on(&d, 1, 0), key_on(&d, 1, 1));
    let (ts, _) = write_xy(&d, &mut c, 1);
    c.persist_all();
    let fx = c.request(RequestId(2), Program::new(vec![Op::Read { key: x }, Op::Read { key: y }, Op::Read { key: z }]));
    let asked = gets(&fx);
    assert_eq!(asked.len(), 2, "one GET per partition");
    assert_eq!(asked[0].2, Ask::Known(vec![(x, Some(ts))]), "x at its own write");
    assert_eq!(asked[1].2, Ask::Known(vec![(y, Some(ts)), (z, None)]), "z never heard of: its initial state");
    let id = asked[0].1;
    c.message(partition(&d, 0), Msg::Got { id, items: vec![version(x, ts.0, &[y])] });
    let none = Item { key: z, ts: None, value: None, siblings: Arc::from([]) };
    let fx = c.message(partition(&d, 1), Msg::Got { id, items: vec![version(y, ts.0, &[x]), none] });
    assert_eq!(fx.counted("read_rounds"), 1, "one round");
    assert!(matches!(fx.completions().next(), Some((RequestId(2), Outcome::Committed { .. }))));
}

#[test]
fn a_partition_answers_the_version_asked_prepared_or_committed_and_a_newer_commit_for_one_collected() {
    let d = deployment();
    let writer = d.topology.clients()[0];
    let (x, y) = (key_on(&d, 0, 0), key_on(&d, 1, 0));
    let mut p = hand(&d, partition(&d, 0));
    let prepare = |ts: u64| {
        let p = Prepare {
            ts: Ts(ts),
            writes: vec![(x, Value::int(ts, 1))],
            keys: Arc::from([x, y]),
            participants: vec![ShardId(0), ShardId(1)],
        };
        Msg::Prepare(Arc::new(p))
    };
    for ts in [10, 20] {
        p.message(writer, prepare(ts));
        p.persist_all();
    }
    let ask = |p: &mut Hand<Lora>, ts: u64| {
        let id = GetId { read: Ts(99), step: 1 };
        let fx = p.message(writer, Msg::Get { id, ask: Ask::Known(vec![(x, Some(Ts(ts)))]) });
        let items: Vec<Item> = fx
            .sends()
            .filter_map(|(_, m)| match m {
                Msg::Got { items, .. } => Some(items.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        (items, fx.counted("versions_replaced"))
    };
    assert_eq!(ask(&mut p, 20).0, vec![version(x, 20, &[y])], "a prepared version, exactly, with its sibling");
    for ts in [10, 20] {
        p.message(writer, Msg::Commit { ts: Ts(ts) });
    }
    p.persist_all();
    p.set_time_ns(10_000 * MS);
    p.timer(crate::ramp::Timer::Gc);
    assert_eq!(ask(&mut p, 10), (vec![version(x, 20, &[y])], 1), "10 was collected: the newest commit instead");
}

#[test]
fn a_read_fractured_by_a_replaced_version_starts_again_at_what_it_learnt() {
    let d = deployment();
    let mut c = client(&d);
    let (x, y) = (key_on(&d, 0, 0), key_on(&d, 1, 0));
    let (ts, _) = write_xy(&d, &mut c, 1);
    c.persist_all();
    let fx = c.request(RequestId(2), Program::new(vec![Op::Read { key: x }, Op::Read { key: y }]));
    let id = gets(&fx)[0].1;
    // x's version was collected and replaced by a newer commit that also
    // wrote y; y came back at the client's own, older write.
    let newer = ts.0 + 100;
    c.message(partition(&d, 0), Msg::Got { id, items: vec![version(x, newer, &[y])] });
    let fx = c.message(partition(&d, 1), Msg::Got { id, items: vec![version(y, ts.0, &[x])] });
    assert_eq!(fx.completions().count(), 0, "a fractured read is not returned");
    assert_eq!(fx.counted("read_restarts"), 1);
    let again = gets(&fx);
    assert_eq!(again.len(), 2, "the whole read again");
    assert_eq!(again[1].2, Ask::Known(vec![(y, Some(Ts(newer)))]), "y at the timestamp learnt from x's siblings");
}

#[test]
fn a_restarted_client_still_knows_its_own_writes() {
    let d = deployment();
    let (x, y) = (key_on(&d, 0, 0), key_on(&d, 1, 0));
    let me = d.topology.clients()[0];
    let mut c = Hand::new(Lora::build(&d, me).unwrap(), Arc::clone(&d.topology), me, Now::at(0));
    let state = KnownState { reserved_us: 5_000, own: vec![(x, Ts(7))] };
    c.start(vec![Record::KnownState(Arc::new(state)), Record::Known { ts: Ts(9), keys: vec![y] }]);
    assert_eq!((known_at(&c, x), known_at(&c, y)), (Some(Ts(7)), Some(Ts(9))));
}
