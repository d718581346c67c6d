//! Handlers driven by hand: the effects of one event compared with what
//! NOC-NOC Algorithms 2, 5 and 6 say the transition does, and the orders
//! of Figures 7 and 8.

use super::{EigerNoc2, Node};
use crate::eiger::messages::{KeyRead, Msg, Own, Prepare, Record, Timer};
use crate::eiger::{Answer, Partition};
use meridian_core::{Deployment, Hand, Key, NodeId, Now, Op, Outcome, Program, Protocol, RequestId, ShardId, Value};
use meridian_readatomic::ramp::Ts;
use meridian_readatomic::test_support::{deployment, key_on, partition};
use std::sync::Arc;

const MS: u64 = 1_000_000;

fn hand(d: &Deployment, node: NodeId) -> Hand<EigerNoc2> {
    let mut h = Hand::new(EigerNoc2::build(d, node).unwrap(), Arc::clone(&d.topology), node, Now::at(0));
    h.start(Vec::new());
    h
}

/// What `h` sends for `msg`, at once or once its appends are durable.
fn deliver(h: &mut Hand<EigerNoc2>, from: NodeId, msg: Msg) -> Vec<(NodeId, Msg)> {
    deliver_logged(h, from, msg, &mut Vec::new())
}

/// `deliver`, keeping what `h` appended in `log`.
fn deliver_logged(h: &mut Hand<EigerNoc2>, from: NodeId, msg: Msg, log: &mut Vec<Record>) -> Vec<(NodeId, Msg)> {
    let fx = h.message(from, msg);
    log.extend(fx.appends().map(|(_, _, r)| r.clone()));
    let now: Vec<(NodeId, Msg)> = fx.sends().map(|(to, m)| (to, m.clone())).collect();
    now.into_iter().chain(h.persist_all().sends().map(|(to, m)| (to, m.clone()))).collect()
}

fn part(h: &Hand<EigerNoc2>) -> &Partition {
    let Node::Partition(p) = &h.node else { panic!("a partition") };
    p
}

/// Two partitions (shards 0 and 1) and a client, by hand: messages between
/// them are shuttled until none is left.
struct Cluster {
    d: Deployment,
    parts: Vec<Hand<EigerNoc2>>,
    /// What each partition appended.
    logs: Vec<Vec<Record>>,
}

impl Cluster {
    fn new() -> Cluster {
        let d = deployment();
        let parts = (0..2).map(|s| hand(&d, partition(&d, s))).collect();
        Cluster { d, parts, logs: vec![Vec::new(), Vec::new()] }
    }

    fn index_of(&self, node: NodeId) -> Option<usize> {
        (0..2).find(|s| partition(&self.d, *s as u32) == node)
    }

    /// Delivers `msg` from `from` to `to` and everything it causes between
    /// partitions; returns what reached clients, with its sender.
    fn run(&mut self, from: NodeId, to: NodeId, msg: Msg) -> Vec<(NodeId, Msg)> {
        let mut queue = vec![(from, to, msg)];
        let mut to_clients = Vec::new();
        while let Some((from, to, msg)) = queue.pop() {
            let Some(i) = self.index_of(to) else {
                to_clients.push((from, msg));
                continue;
            };
            for (next, m) in deliver_logged(&mut self.parts[i], from, msg, &mut self.logs[i]) {
                queue.push((to, next, m));
            }
        }
        to_clients
    }

    /// A write transaction `txn` of `writes` by `client`, run to its
    /// commit; the prepare stamps the client heard.
    fn write(&mut self, client: NodeId, txn: u64, writes: &[(Key, u64)], dep: Option<Ts>) -> Vec<Ts> {
        let mut by_shard: std::collections::BTreeMap<ShardId, Vec<(Key, Value)>> = Default::default();
        for (k, tag) in writes {
            by_shard.entry(self.d.topology.shard_of(*k)).or_default().push((*k, Value::int(*tag, 1)));
        }
        let participants: Vec<ShardId> = by_shard.keys().copied().collect();
        let mut stamps = Vec::new();
        for (shard, writes) in by_shard {
            let p =
                Prepare { txn: Ts(txn), writes, coordinator: participants[0], participants: participants.clone(), dep };
            for (_, m) in self.run(client, partition(&self.d, shard.0), Msg::Prepare(Arc::new(p))) {
                if let Msg::Prepared { t_prep, .. } = m {
                    stamps.push(t_prep);
                }
            }
        }
        stamps
    }

    fn read(&self, shard: usize, gsv: Option<Ts>, key: Key, own: Option<Own>) -> Answer {
        part(&self.parts[shard]).read(gsv, KeyRead { key, own })
    }
}

fn found(tag: u64) -> Value {
    Value::int(tag, 1)
}

fn value(a: Answer) -> Option<Value> {
    match a {
        Answer::Found { value, .. } => value,
        Answer::Gone => panic!("nothing is collected here"),
    }
}

/// Figure 7 / Example 6.1: Ann writes X and Z; their partitions stamp
/// the prepares with unsynchronized Lamport clocks (X₂, Z₁). The client
/// takes the largest prepare stamp as its own write's (line 19) before any
/// commit, the coordinator commits at that very stamp (line 18), and Z₁
/// is promoted to it: the client's LSV orders its write as the commit
/// will.
#[test]
fn figure_7_the_client_mimics_the_commit_stamp_before_the_commit() {
    let mut c = Cluster::new();
    let ann = c.d.topology.clients()[0];
    let (x, z, other) = (key_on(&c.d, 0, 0), key_on(&c.d, 1, 0), key_on(&c.d, 0, 1));
    c.write(ann, 1 << 12 | 1, &[(other, 1)], None); // X's partition has moved on
    let mut client = hand(&c.d, ann);
    client.persist_all(); // the id reservation
    let w = Program::new(vec![Op::Write { key: x, value: found(2) }, Op::Write { key: z, value: found(3) }]);
    let prepares: Vec<(NodeId, Msg)> = client.request(RequestId(1), w).sends().map(|(t, m)| (t, m.clone())).collect();
    assert_eq!(prepares.len(), 2, "lines 13-17: one PREPARE per participant, sent by the client");
    // Prepare at Z's partition first: its vote waits at the coordinator.
    let mut answers = Vec::new();
    for (to, m) in prepares.into_iter().rev() {
        answers.extend(c.run(ann, to, m));
    }
    let stamps: Vec<Ts> = answers
        .iter()
        .filter_map(|(_, m)| if let Msg::Prepared { t_prep, .. } = m { Some(*t_prep) } else { None })
        .collect();
    assert_eq!(stamps.len(), 2);
    assert_ne!(stamps[0], stamps[1], "unsynchronized clocks, distinct stamps");
    let t_com = *stamps.iter().max().unwrap();
    for (from, m) in answers {
        client.message(from, m);
    }
    let Node::Client(cl) = &client.node else { panic!("a client") };
    let own = cl.latest_write(x).expect("line 22: latestWrite[X]");
    assert_eq!(own.t_own, t_com, "line 19: the largest prepare stamp");
    assert_eq!(cl.latest_write(z), Some(own), "Z promoted to the same stamp");
    let fx = client.persist_all();
    assert!(matches!(fx.completions().next(), Some((RequestId(1), Outcome::Committed { .. }))), "one phase");
    assert_eq!(fx.counted("write_phases_on_client_path"), 1);
    assert!(!fx.sends().any(|(_, m)| matches!(m, Msg::Commit { .. })), "the client sends no COMMIT");
    // The partitions committed at the stamp the client mimicked.
    for shard in 0..2 {
        assert_eq!(part(&c.parts[shard]).pending(), 0, "committed asynchronously");
    }
    let after = Some(Ts(t_com.0 + 1));
    assert_eq!(value(c.read(0, after, x, None)), Some(found(2)));
    assert_eq!(value(c.read(1, Some(Ts(t_com.0 - 1)), z, None)), None, "Z₁ moved up to the commit stamp");
    assert_eq!(value(c.read(1, Some(t_com), z, None)), Some(found(3)));
}

/// Figure 8 / Example 6.2 (Eiger-NOC2, 8a and 8c): Bob wrote X₁ and Z₁,
/// Ann later X_n. At GSV 0 each reads its own writes beyond the GSV (and
/// Ann Bob's Z₀); at GSV n both read X_n, the highest committed version
/// within it, and Z₁: Ann and Bob order X₁ before X_n alike.
#[test]
fn figure_8_eiger_noc2_readers_converge_on_one_order_of_x() {
    let mut c = Cluster::new();
    let (ann, bob) = (c.d.topology.clients()[0], c.d.topology.clients()[0]);
    let (x, z) = (key_on(&c.d, 0, 0), key_on(&c.d, 1, 0));
    let bob_stamps = c.write(bob, 1 << 12 | 1, &[(x, 1), (z, 1)], None);
    let bob_own = Own { t_own: *bob_stamps.iter().max().unwrap(), txn: Ts(1 << 12 | 1) };
    let ann_stamps = c.write(ann, 2 << 12, &[(x, 9)], Some(bob_own.t_own));
    let ann_own = Own { t_own: ann_stamps[0], txn: Ts(2 << 12) };
    assert!(ann_own.t_own > bob_own.t_own, "X_n is stamped after X₁");
    let gsv_0 = None;
    assert_eq!(value(c.read(0, gsv_0, x, Some(bob_own))), Some(found(1)), "8a: Bob's own X₁");
    assert_eq!(value(c.read(1, gsv_0, z, Some(bob_own))), Some(found(1)), "8a: Bob's own Z₁");
    assert_eq!(value(c.read(0, gsv_0, x, Some(ann_own))), Some(found(9)), "8a: Ann's own X_n");
    assert_eq!(value(c.read(1, gsv_0, z, None)), None, "8a: Ann reads Z₀");
    let gsv_n = Some(ann_own.t_own);
    assert_eq!(value(c.read(0, gsv_n, x, Some(bob_own))), Some(found(9)), "8c: Bob reads X_n");
    assert_eq!(value(c.read(1, gsv_n, z, Some(bob_own))), Some(found(1)), "8c: and Z₁");
    assert_eq!(value(c.read(0, gsv_n, x, Some(ann_own))), Some(found(9)), "8c: Ann returns her X_n, no search");
    assert_eq!(value(c.read(1, gsv_n, z, None)), Some(found(1)), "8c: and Z₁");
}

/// Algorithm 6 lines 8-9: the client's own write not yet committed at a
/// partition is found through `pending`, at its prepare stamp; other
/// clients at the same GSV do not see it.
#[test]
fn a_read_finds_its_clients_own_pending_write_through_pending() {
    let d = deployment();
    let (ann, x) = (d.topology.clients()[0], key_on(&d, 0, 0));
    let mut p0 = hand(&d, partition(&d, 0));
    // A cohort of a transaction coordinated by shard 1, which never answers.
    let prep = Prepare {
        txn: Ts(7),
        writes: vec![(x, found(7))],
        coordinator: ShardId(1),
        participants: vec![ShardId(0), ShardId(1)],
        dep: None,
    };
    let sent = deliver(&mut p0, ann, Msg::Prepare(Arc::new(prep)));
    let t_prep = sent.iter().find_map(|(_, m)| if let Msg::Prepared { t_prep, .. } = m { Some(*t_prep) } else { None });
    let t_prep = t_prep.expect("line 23: answered with the prepare stamp");
    assert!(
        sent.iter().any(|(to, m)| *to == partition(&d, 1) && matches!(m, Msg::Vote { late: false, .. })),
        "line 25"
    );
    assert!(part(&p0).lst() < Some(t_prep), "line 43: the safe time stays below the pending stamp");
    let own = Own { t_own: Ts(t_prep.0 + 5), txn: Ts(7) };
    let read = part(&p0).read(part(&p0).lst(), KeyRead { key: x, own: Some(own) });
    assert_eq!(value(read), Some(found(7)), "her own pending X");
    assert_eq!(value(part(&p0).read(part(&p0).lst(), KeyRead { key: x, own: None })), None, "not another client's");
}

/// A cohort pending for `ctp_ms` sends its vote again, late; a coordinator
/// that never prepared the transaction refuses it for good and the cohort
/// aborts; the client's prepare arriving afterwards is refused.
#[test]
fn a_late_vote_for_a_transaction_the_coordinator_never_prepared_aborts_it_everywhere() {
    let d = deployment();
    let (ann, x, y) = (d.topology.clients()[0], key_on(&d, 0, 0), key_on(&d, 1, 0));
    let (mut p0, mut p1) = (hand(&d, partition(&d, 0)), hand(&d, partition(&d, 1)));
    let prep = |key: Key| Prepare {
        txn: Ts(7),
        writes: vec![(key, found(7))],
        coordinator: ShardId(1),
        participants: vec![ShardId(0), ShardId(1)],
        dep: None,
    };
    deliver(&mut p0, ann, Msg::Prepare(Arc::new(prep(x))));
    assert_eq!(part(&p0).pending(), 1);
    p0.advance_ns(1_000 * MS);
    let fx = p0.timer(Timer::Ctp);
    let late: Vec<Msg> = fx.sends().map(|(_, m)| m.clone()).collect();
    assert!(matches!(late[..], [Msg::Vote { late: true, .. }]), "{late:?}");
    assert_eq!(fx.counted("ctp_runs"), 1);
    let answer = deliver(&mut p1, partition(&d, 0), late[0].clone());
    assert!(matches!(answer[..], [(_, Msg::Abort { txn: Ts(7) })]), "{answer:?}");
    assert!(p1.persist_all().appends().next().is_none(), "the refusal was durable before the answer left");
    deliver(&mut p0, partition(&d, 1), answer[0].1.clone());
    assert_eq!(part(&p0).pending(), 0, "aborted at the cohort");
    assert_eq!(value(part(&p0).read(Some(Ts(u64::MAX)), KeyRead { key: x, own: None })), None, "its version went");
    let refused = deliver(&mut p1, ann, Msg::Prepare(Arc::new(prep(y))));
    assert!(matches!(refused[..], [(_, Msg::Refused { .. })]), "{refused:?}");
}

/// A repeated PREPARE after the commit is answered with the commit stamp
/// (the client's mimicked maximum stays the commit stamp).
#[test]
fn a_prepare_repeated_after_the_commit_is_answered_with_the_commit_stamp() {
    let mut c = Cluster::new();
    let ann = c.d.topology.clients()[0];
    let (x, z) = (key_on(&c.d, 0, 0), key_on(&c.d, 1, 0));
    c.write(ann, 1 << 12, &[(key_on(&c.d, 1, 1), 1)], None);
    c.write(ann, 1 << 12, &[(key_on(&c.d, 1, 1), 1)], None); // a repeat: nothing new
    let stamps = c.write(ann, 2 << 12, &[(x, 2), (z, 2)], None);
    let t_com = *stamps.iter().max().unwrap();
    let again = c.write(ann, 2 << 12, &[(x, 2), (z, 2)], None);
    assert!(again.iter().all(|t| *t == t_com), "{again:?} after committing at {t_com:?}");
}

/// A restarted partition's clock is at least every stamp it issued and its
/// safe time what it told: a prepare after the restart is stamped above
/// every one before.
#[test]
fn a_restarted_partition_stamps_above_every_stamp_it_issued() {
    let mut c = Cluster::new();
    let ann = c.d.topology.clients()[0];
    let x = key_on(&c.d, 0, 0);
    let mut last = Ts(0);
    for i in 1..=3 {
        last = c.write(ann, i << 12, &[(x, i)], None)[0];
    }
    let sync = c.run(ann, partition(&c.d, 0), Msg::Sync { dep: Some(Ts(last.0 + (40 << 12))) });
    let Some((_, Msg::Synced { lst: told })) = sync.first().cloned() else { panic!("{sync:?}") };
    assert!(told > Some(Ts(last.0 + (40 << 12))), "an idle partition's clock moves to the client's stamp");
    let mut restarted = Hand::new(
        EigerNoc2::build(&c.d, partition(&c.d, 0)).unwrap(),
        Arc::clone(&c.d.topology),
        partition(&c.d, 0),
        Now::at(0),
    );
    restarted.start(c.logs[0].clone());
    assert_eq!(part(&restarted).lst(), told, "the safe time it told");
    c.parts[0] = restarted;
    let after = c.write(ann, 9 << 12, &[(x, 9)], None)[0];
    assert!(Some(after) > told, "stamped above everything told");
}

/// A restarted client asks every partition for its safe time and serves
/// nothing before all answered: its version vector is not durable, and a
/// session's read must not go below what it read before the crash. Its
/// recorded own write is still in its view.
#[test]
fn restarted_client_serves_nothing_before_every_partition_told_its_safe_time() {
    let d = deployment();
    let (ann, x) = (d.topology.clients()[0], key_on(&d, 0, 0));
    let own = Own { t_own: Ts(50 << 12), txn: Ts(1 << 12) };
    let mut c = Hand::new(EigerNoc2::build(&d, ann).unwrap(), Arc::clone(&d.topology), ann, Now::at(0));
    let fx = c.start(vec![Record::Reserved { upto_us: 1 << 40 }, Record::Local { own, keys: vec![x] }]);
    let syncs = fx.sends().filter(|(_, m)| matches!(m, Msg::Sync { dep: Some(t) } if *t == own.t_own)).count();
    assert_eq!(syncs, 2, "every partition is asked, with the largest stamp recorded");
    let fx = c.request(RequestId(1), Program::new(vec![Op::Read { key: x }]));
    assert_eq!(fx.sends().count(), 0, "the read waits");
    c.message(partition(&d, 0), Msg::Synced { lst: Some(Ts(60 << 12)) });
    let fx = c.message(partition(&d, 1), Msg::Synced { lst: Some(Ts(40 << 12)) });
    let gets: Vec<&Msg> = fx.sends().map(|(_, m)| m).collect();
    let [Msg::Get(g)] = gets[..] else { panic!("{gets:?}") };
    assert_eq!(g.gsv, Some(Ts(40 << 12)), "line 6: min(last), over every partition");
    assert_eq!(g.keys[0].own, Some(own), "its own write, recorded before the crash");
}
