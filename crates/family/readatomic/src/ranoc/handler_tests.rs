//! RA-NOC's handlers driven by hand: the effects of one event compared with
//! what NOC-NOC Appendix C (Algorithms 3 and 4) says the transition does.
//! The partition is RA-NOC2's (its handlers are tested in
//! `ranoc2/handler_tests.rs`); these cover what the variant changes.

use super::{Node, RaNoc};
use crate::ramp::{GetId, Ts};
use crate::ranoc2::{Get, Msg, Prepare, Record};
use crate::test_support::{deployment, key_on, partition};
use meridian_core::{
    Deployment, EffectsOf, Hand, Key, NodeId, Now, Op, Outcome, Program, Protocol, RequestId, ShardId, Value,
};
use std::sync::Arc;

const MS: u64 = 1_000_000;

fn hand(d: &Deployment, node: NodeId) -> Hand<RaNoc> {
    let mut h = Hand::new(RaNoc::build(d, node).unwrap(), Arc::clone(&d.topology), node, Now::at(0));
    h.start(Vec::new());
    h
}

fn gets(fx: &EffectsOf<RaNoc>) -> Vec<(NodeId, Get)> {
    fx.sends()
        .filter_map(|(to, m)| match m {
            Msg::Get(g) => Some((to, g.clone())),
            _ => None,
        })
        .collect()
}

fn prepared_ts(fx: &EffectsOf<RaNoc>) -> Ts {
    fx.sends().find_map(|(_, m)| if let Msg::Prepare(p) = m { Some(p.ts) } else { None }).expect("prepares sent")
}

fn write_xy(c: &mut Hand<RaNoc>, x: Key, y: Key) -> Ts {
    let w = Program::new(vec![
        Op::Write { key: x, value: Value::int(1, 1) },
        Op::Write { key: y, value: Value::int(2, 1) },
    ]);
    prepared_ts(&c.request(RequestId(1), w))
}

/// A client whose timestamp reservation is durable.
fn client(d: &Deployment) -> Hand<RaNoc> {
    let mut c = hand(d, d.topology.clients()[0]);
    c.persist_all();
    c
}

/// Algorithm 3 lines 2-6: one GET per partition, at `ts_c = min(last)`
/// over the partitions read and no local view; the answers end the read.
#[test]
fn a_read_takes_one_round_at_the_global_safe_view_alone() {
    let d = deployment();
    let mut c = client(&d);
    let (x, y) = (key_on(&d, 0, 0), key_on(&d, 1, 0));
    // The partitions told safe times 40 and 30 (in answers to a refresh).
    let refresh = GetId { read: Ts(0), step: 0 };
    c.message(partition(&d, 0), Msg::Got { id: refresh, values: Vec::new(), lst: Some(Ts(40)) });
    c.message(partition(&d, 1), Msg::Got { id: refresh, values: Vec::new(), lst: Some(Ts(30)) });
    let fx = c.request(RequestId(2), Program::new(vec![Op::Read { key: x }, Op::Read { key: y }]));
    let sent = gets(&fx);
    assert_eq!(sent.len(), 2, "line 4: every partition read, in parallel");
    for (_, g) in &sent {
        assert_eq!(g.ts_c, Some(Ts(30)), "line 3: the smallest safe time of the partitions read");
        assert!(g.keys.iter().all(|k| k.ts_p.is_none()), "no local view");
    }
    c.message(partition(&d, 0), Msg::Got { id: sent[0].1.id, values: vec![Some(Value::int(7, 1))], lst: Some(Ts(41)) });
    let fx = c.message(partition(&d, 1), Msg::Got { id: sent[1].1.id, values: vec![None], lst: Some(Ts(31)) });
    let done = fx.completions().next().expect("answered");
    assert!(matches!(done, (RequestId(2), Outcome::Committed { .. })), "after one round");
    assert_eq!(fx.counted("read_rounds"), 1);
    assert_eq!(gets(&fx).len(), 0, "no second round");
}

/// Algorithm 3 lines 7-17: PREPARE on every partition written, then COMMIT
/// — both on the client's path — then the client waits until every
/// partition's safe time (`min(last)`) has passed the write, and returns
/// once that floor is durable.
#[test]
fn a_write_takes_two_phases_on_the_client_path_and_waits_for_every_safe_time() {
    let d = deployment();
    let mut c = client(&d);
    let (x, y) = (key_on(&d, 0, 0), key_on(&d, 1, 0));
    let ts = write_xy(&mut c, x, y);
    c.message(partition(&d, 0), Msg::Prepared { ts, lst: None });
    let fx = c.message(partition(&d, 1), Msg::Prepared { ts, lst: None });
    let commits = fx.sends().filter(|(_, m)| matches!(m, Msg::Commit { ts: t } if *t == ts)).count();
    assert_eq!(commits, 2, "lines 12-13: COMMIT on every partition written");
    assert_eq!(fx.completions().count(), 0, "not after the prepare phase");
    assert!(fx.appends().next().is_none(), "no local view");
    // Partition 0 is past the write, partition 1 not yet (another write
    // below is pending there).
    c.message(partition(&d, 0), Msg::Committed { ts, lst: Some(ts) });
    let below = Ts(ts.0 - 1);
    let fx = c.message(partition(&d, 1), Msg::Committed { ts, lst: Some(below) });
    assert_eq!(fx.completions().count(), 0, "line 15: min(last) < ts, it blocks");
    assert_eq!(fx.counted("writes_blocked"), 1);
    let polls = gets(&fx);
    assert_eq!(polls.len(), 1, "the partition behind is asked for its safe time");
    assert_eq!(polls[0].0, partition(&d, 1));
    assert_eq!(polls[0].1.ts_c, None, "asked, not yet pushed");
    let fx = c.message(partition(&d, 1), Msg::Got { id: polls[0].1.id, values: Vec::new(), lst: Some(ts) });
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Floor { ts: t } if *t == ts)), "the floor, durably");
    assert_eq!(fx.completions().count(), 0, "once the floor is durable");
    let fx = c.persist_all();
    assert!(matches!(fx.completions().next(), Some((RequestId(1), Outcome::Committed { .. }))));
    assert_eq!(fx.counted("write_phases_on_client_path"), 2, "two phases");
    // Its session's next read is at a GSV at or past the write.
    let fx = c.request(RequestId(3), Program::new(vec![Op::Read { key: x }]));
    assert!(gets(&fx)[0].1.ts_c >= Some(ts), "read-your-writes from the global view alone");
}

/// A write blocked `retry_ms` behind an idle partition asks it to pass the
/// write; the partition raises its safe time durably (refusing prepares
/// below from then on) and answers with it.
#[test]
fn an_idle_partition_asked_to_pass_a_blocked_write_raises_its_safe_time_durably() {
    let d = deployment();
    let mut c = client(&d);
    let (x, y) = (key_on(&d, 0, 0), key_on(&d, 0, 1));
    // Both keys on partition 0: partition 1 never hears of the write.
    let ts = write_xy(&mut c, x, y);
    c.message(partition(&d, 0), Msg::Prepared { ts, lst: None });
    c.message(partition(&d, 0), Msg::Committed { ts, lst: Some(ts) });
    c.set_time_ns(600 * MS);
    let fx = c.timer(crate::ranoc2::Timer::ClientTick);
    let asks = gets(&fx);
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0].0, partition(&d, 1), "the partition behind");
    assert_eq!(asks[0].1.ts_c, Some(ts), "blocked retry_ms: asked to pass the write");

    let mut p1 = hand(&d, partition(&d, 1));
    let fx = p1.message(c.me(), Msg::Get(asks[0].1.clone()));
    assert!(fx.appends().any(|(_, _, r)| matches!(r, Record::Advanced { ts: t } if *t == ts)));
    assert_eq!(fx.sends().count(), 0, "answered once durable");
    let fx = p1.persist_all();
    let lst = fx.sends().find_map(|(_, m)| if let Msg::Got { lst, .. } = m { Some(*lst) } else { None });
    assert_eq!(lst, Some(Some(ts)), "its safe time is the write's");
    let late = Prepare {
        ts: Ts(ts.0 - 1),
        writes: vec![(key_on(&d, 1, 0), Value::int(3, 1))],
        participants: vec![ShardId(1)],
    };
    let fx = p1.message(c.me(), Msg::Prepare(Arc::new(late)));
    assert_eq!(fx.counted("prepares_refused"), 1, "a prepare below is refused");
    let Node::Partition(part) = &p1.node else { panic!("a partition") };
    assert_eq!(part.lst(), Some(ts));
}

/// A write still blocked after `max_attempts` requests is reported
/// unknown, not committed: its sessions could not be promised to read it.
#[test]
fn a_write_blocked_past_its_attempts_is_reported_unknown() {
    let d = deployment();
    let mut c = client(&d);
    let (x, y) = (key_on(&d, 0, 0), key_on(&d, 0, 1));
    let ts = write_xy(&mut c, x, y);
    c.message(partition(&d, 0), Msg::Prepared { ts, lst: None });
    c.message(partition(&d, 0), Msg::Committed { ts, lst: Some(ts) });
    let mut unknown = 0;
    for tick in 1..=12 {
        c.set_time_ns(tick * 500 * MS + 1);
        let fx = c.timer(crate::ranoc2::Timer::ClientTick);
        unknown += fx.completions().filter(|(_, o)| matches!(o, Outcome::Unknown)).count();
    }
    assert_eq!(unknown, 1, "given up once");
}
