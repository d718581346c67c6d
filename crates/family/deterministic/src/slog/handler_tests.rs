//! Handlers driven by hand: the effects of one event compared with what
//! SLOG's Figure 2 says the transition does.

use super::messages::{BatchId, Entry, Header, LocalBatch, LogEntry, Msg, Record, Timer, Txn};
use super::{Node, Slog};
use meridian_core::{
    ClusterSpec, Deployment, Hand, Key, KeyLayout, LatencyMatrix, LeaderPlacement, NodeId, Now, Op, Params, Program,
    Protocol, RegionId, ShardId, Topology, TxnId, Value,
};
use std::sync::Arc;

/// Two shards, one replica of each in each of three regions (South
/// Carolina, Finland, Brazil: homes 0, 1, 2), a sequencer per region.
fn deployment() -> Deployment {
    let matrix = LatencyMatrix::preset("tiga-gcp").unwrap();
    let spec = ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
        shards: 2,
        replicas_per_shard: 3,
        leaders: LeaderPlacement::Colocated,
        client_regions: vec![RegionId(0)],
        clients_per_region: 1,
    };
    let params = Params::new();
    let topology = Arc::new(Topology::build(&spec, &Slog::services(&params)));
    Deployment { topology, params, epsilon_us: 100, latency: Arc::new(matrix) }
}

fn hand(d: &Deployment, name: &str) -> Hand<Slog> {
    let me = d.topology.node_by_name(name).unwrap();
    let node = Slog::build(d, me).unwrap();
    Hand::new(node, Arc::clone(&d.topology), me, Now::at(0))
}

fn layout(d: &Deployment) -> KeyLayout {
    d.topology.key_layout()
}

fn sequencer(d: &Deployment, region: u16) -> NodeId {
    super::sequencer_in(&d.topology, RegionId(region))
}

/// A transaction annotated with the layout's headers, received in region 0.
fn txn(d: &Deployment, seq: u64, ops: Vec<Op>) -> Arc<Txn> {
    let l = layout(d);
    let lookup = |k: Key| Header { home: l.home_of(k), counter: 0 };
    Arc::new(Txn::new(TxnId { node: NodeId(99), seq }, Program::new(ops), RegionId(0), &d.topology, lookup))
}

fn inc(key: Key) -> Op {
    Op::Increment { key, delta: 1, tag: key.0 + 1 }
}

fn replica(h: &Hand<Slog>) -> &super::Replica {
    match &h.node {
        Node::Replica(r) => r,
        _ => panic!("not a replica"),
    }
}

#[test]
fn receive_new_txn_sends_a_single_home_transaction_to_its_home_and_a_multi_home_one_to_the_orderer() {
    let d = deployment();
    let l = layout(&d);
    let mut h = hand(&d, "sequencer-brazil");
    h.start(Vec::new());
    let client = d.topology.clients()[0];
    let at_finland = Program::new(vec![inc(l.key(0, 1, 3)), inc(l.key(1, 1, 4))]);
    let fx = h.message(client, Msg::Submit { id: TxnId { node: client, seq: 1 }, program: at_finland });
    assert_eq!(fx.sends().count(), 0, "its annotation is durable before it leaves");
    let fx = h.persist_all();
    let sent: Vec<(NodeId, &Msg)> = fx.sends().collect();
    assert_eq!(sent.len(), 1);
    let (to, Msg::Forward(t)) = sent[0] else { panic!("{sent:?}") };
    assert_eq!(to, sequencer(&d, 1), "Figure 2: shipped to its home region");
    assert_eq!(t.homes, vec![RegionId(1)]);
    assert!(t.master_info.iter().all(|(_, h)| *h == Header { home: RegionId(1), counter: 0 }));
    let both = Program::new(vec![inc(l.key(0, 1, 3)), inc(l.key(0, 2, 3))]);
    h.message(client, Msg::Submit { id: TxnId { node: client, seq: 2 }, program: both });
    let fx = h.persist_all();
    let to: Vec<NodeId> = fx.sends().map(|(to, _)| to).collect();
    assert_eq!(to, vec![sequencer(&d, 0)], "§3.3: every multi-home transaction to the orderer's local log");
}

#[test]
fn a_local_log_batch_is_shipped_once_durable_and_its_placement_is_durable_before_the_replicas_see_it() {
    let d = deployment();
    let l = layout(&d);
    let mut h = hand(&d, "sequencer-finland");
    h.start(Vec::new());
    let t = txn(&d, 1, vec![inc(l.key(0, 1, 0))]);
    let fx = h.message(sequencer(&d, 2), Msg::Forward(t));
    assert_eq!(fx.sends().count() + fx.appends().count(), 0, "waits in the open batch");
    let fx = h.timer(Timer::Batch);
    assert_eq!(fx.appends().filter(|(_, _, r)| matches!(r, Record::Batch(_))).count(), 1);
    assert_eq!(fx.sends().count(), 0, "not shipped before it is durable");
    let fx = h.persist_all();
    let ships: Vec<NodeId> = fx.sends().filter(|(_, m)| matches!(m, Msg::Ship(_))).map(|(to, _)| to).collect();
    assert_eq!(ships, vec![sequencer(&d, 0), sequencer(&d, 2)], "ReceiveBatch at each other region");
    assert_eq!(fx.appends().filter(|(_, _, r)| matches!(r, Record::Placed(_))).count(), 1, "placed here");
    assert_eq!(fx.sends().filter(|(_, m)| matches!(m, Msg::Log { .. })).count(), 0, "placement not durable yet");
    let fx = h.persist_all();
    let logs: Vec<(NodeId, usize)> = fx
        .sends()
        .filter_map(|(to, m)| match m {
            Msg::Log { entries, .. } => Some((to, entries[0].entries.len())),
            _ => None,
        })
        .collect();
    let finland = |s: u32| d.topology.replicas_in(ShardId(s), RegionId(1))[0];
    assert_eq!(logs, vec![(finland(0), 1), (finland(1), 0)], "each shard sees the entries touching it");
}

#[test]
fn each_home_inserts_its_lock_only_txn_when_it_reaches_the_orderers_multi_home_entry() {
    let d = deployment();
    let l = layout(&d);
    let t = txn(&d, 1, vec![inc(l.key(0, 0, 0)), inc(l.key(1, 1, 0))]);
    let orderer_batch = Arc::new(LocalBatch { origin: 0, seq: 0, items: vec![Entry::MultiHome(Arc::clone(&t))] });
    for (name, home) in [("sequencer-finland", true), ("sequencer-brazil", false)] {
        let mut h = hand(&d, name);
        h.start(Vec::new());
        let fx = h.message(sequencer(&d, 0), Msg::Ship(Arc::clone(&orderer_batch)));
        assert_eq!(fx.counted("lock_only_txns"), u64::from(home), "{name}");
        let fx = h.timer(Timer::Batch);
        let own: Vec<&Record> = fx.appends().map(|(_, _, r)| r).filter(|r| matches!(r, Record::Batch(_))).collect();
        if home {
            let Record::Batch(b) = own[0] else { unreachable!() };
            assert_eq!(b.items, vec![Entry::LockOnly { txn: Arc::clone(&t), home: RegionId(1) }]);
        } else {
            assert!(own.is_empty(), "Brazil is no home of the transaction: no LockOnlyTxn (Figure 4)");
        }
    }
}

#[test]
fn a_batch_arriving_before_its_predecessor_waits_and_the_gap_is_fetched() {
    let d = deployment();
    let mut h = hand(&d, "sequencer-brazil");
    h.start(Vec::new());
    let later = Arc::new(LocalBatch { origin: 1, seq: 1, items: Vec::new() });
    let fx = h.message(sequencer(&d, 1), Msg::Ship(later));
    assert_eq!(fx.appends().count(), 0, "1-2 is not placed before 1-1");
    let fx = h.timer(Timer::SequencerTick);
    let fetches: Vec<(NodeId, BatchId)> = fx
        .sends()
        .filter_map(|(to, m)| match m {
            Msg::FetchBatch { id } => Some((to, *id)),
            _ => None,
        })
        .collect();
    assert_eq!(fetches, vec![(sequencer(&d, 1), BatchId { region: 1, seq: 0 })]);
    let fx = h.message(sequencer(&d, 1), Msg::Ship(Arc::new(LocalBatch { origin: 1, seq: 0, items: Vec::new() })));
    let placed: Vec<u64> = fx
        .appends()
        .filter_map(|(_, _, r)| match r {
            Record::Placed(b) => Some(b.seq),
            _ => None,
        })
        .collect();
    assert_eq!(placed, vec![0, 1], "both, in their local log's order");
}

#[test]
fn a_multi_home_transaction_runs_only_once_every_lock_only_txn_holds_its_locks() {
    let d = deployment();
    let l = layout(&d);
    let mut h = hand(&d, "shard0-replica0");
    h.start(Vec::new());
    // Both keys on shard 0: one homed in South Carolina, one in Finland.
    let (a, b) = (l.key(0, 0, 0), l.key(0, 1, 0));
    let t = txn(&d, 1, vec![inc(a), inc(b)]);
    let part = |home: u16| Entry::LockOnly { txn: Arc::clone(&t), home: RegionId(home) };
    let from = sequencer(&d, 0);
    let batch = |region, seq| BatchId { region, seq };
    let entries = vec![LogEntry { pos: 0, batch: batch(0, 0), entries: vec![(0, part(0))] }];
    let fx = h.message(from, Msg::Log { shard: ShardId(0), entries });
    assert_eq!(fx.sends().count() + fx.appends().count(), 0, "its code blocks until Finland's LockOnlyTxn");
    assert_eq!(replica(&h).running(), 1);
    let entries = vec![LogEntry { pos: 1, batch: batch(1, 0), entries: vec![(0, part(1))] }];
    let fx = h.message(from, Msg::Log { shard: ShardId(0), entries });
    let replies: Vec<NodeId> = fx.sends().filter(|(_, m)| matches!(m, Msg::Reply { .. })).map(|(to, _)| to).collect();
    assert_eq!(replies, vec![t.id.node], "executed once both hold their locks; its origin region answers");
    assert_eq!(replica(&h).store().get(&a), Some(&Value::int(a.0 + 1, 1)));
    assert_eq!(replica(&h).running(), 0, "locks released at the end of the transaction");
}

#[test]
fn a_header_other_than_the_one_assumed_aborts_the_transaction_and_restarts_it() {
    let d = deployment();
    let l = layout(&d);
    let mut h = hand(&d, "shard0-replica1"); // Finland: it answers
    h.start(Vec::new());
    let a = l.key(0, 0, 0);
    let lookup = |_| Header { home: RegionId(1), counter: 0 }; // a wrong Lookup Master, say
    let t = Arc::new(Txn::new(
        TxnId { node: NodeId(99), seq: 1 },
        Program::new(vec![inc(a)]),
        RegionId(0),
        &d.topology,
        lookup,
    ));
    let entries =
        vec![LogEntry { pos: 0, batch: BatchId { region: 0, seq: 0 }, entries: vec![(0, Entry::SingleHome(t))] }];
    let fx = h.message(sequencer(&d, 1), Msg::Log { shard: ShardId(0), entries });
    let restarts = fx.sends().filter(|(_, m)| matches!(m, Msg::Restart { .. })).count();
    assert_eq!(restarts, 1, "Figure 2: abort; the client submits it again");
    assert_eq!(fx.counted("lookup_misses"), 1);
    assert_eq!(replica(&h).store().get(&a), None, "nothing written");
}

#[test]
fn a_restarted_replica_skips_what_its_records_say_it_executed() {
    let d = deployment();
    let l = layout(&d);
    let mut h = hand(&d, "shard0-replica0");
    let a = l.key(0, 0, 0);
    let t = txn(&d, 5, vec![Op::Write { key: a, value: Value::int(9, 9) }]);
    let writes = vec![(a, Value::int(9, 9))];
    h.start(vec![Record::Executed { txn: t.id, at: (0, 0), writes, header: None, sent: vec![], outcome: None }]);
    assert_eq!(replica(&h).store().get(&a), Some(&Value::int(9, 9)), "rebuilt from its records");
    let entries =
        vec![LogEntry { pos: 0, batch: BatchId { region: 0, seq: 0 }, entries: vec![(0, Entry::SingleHome(t))] }];
    let fx = h.message(sequencer(&d, 0), Msg::Log { shard: ShardId(0), entries });
    assert_eq!(fx.counted("replayed"), 1);
    assert_eq!(fx.appends().count(), 0, "not executed twice");
}
