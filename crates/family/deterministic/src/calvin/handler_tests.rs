//! Handlers driven by hand: the effects of one event compared with what
//! the paper says the transition does.

use super::messages::{Batch, BatchId, Checkpoint, LogEntry, Msg, Record, Timer, Txn};
use super::{Calvin, Node, SEQUENCER};
use meridian_core::{
    ClusterSpec, Deployment, EffectsOf, Hand, Key, LatencyMatrix, LeaderPlacement, NodeId, Now, Op, Params, Program,
    Protocol, RegionId, ShardId, Topology, TxnId, Value,
};
use std::sync::Arc;

/// Two shards, one replica of each in each of three regions, a sequencer
/// per region.
fn deployment() -> Deployment {
    deployment_with(Params::new())
}

fn deployment_with(params: Params) -> Deployment {
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
    let topology = Arc::new(Topology::build(&spec, &Calvin::services(&params)));
    Deployment { topology, params, epsilon_us: 100, latency: Arc::new(matrix) }
}

fn hand(d: &Deployment, name: &str) -> Hand<Calvin> {
    let me = d.topology.node_by_name(name).unwrap();
    let node = Calvin::build(d, me).unwrap();
    Hand::new(node, Arc::clone(&d.topology), me, Now::at(0))
}

fn txn(d: &Deployment, seq: u64, ops: Vec<Op>) -> Arc<Txn> {
    Arc::new(Txn::new(TxnId { node: NodeId(99), seq }, Program::new(ops), RegionId(0), &d.topology))
}

/// The global log's group of three chooses the leader's `slots`: its own
/// vote, once durable, and one more.
fn choose_slots(h: &mut Hand<Calvin>, d: &Deployment, slots: std::ops::RangeInclusive<u64>) {
    let follower = d.topology.service(SEQUENCER)[1];
    h.persist_all();
    for slot in slots {
        let body = meridian_mechanisms::paxos::PaxosBody::Accepted {
            ballot: meridian_mechanisms::paxos::Ballot { round: 1, rank: 0 },
            slot,
        };
        h.message(follower, Msg::Paxos(meridian_mechanisms::paxos::PaxosMsg { group: 0, body }));
    }
}

fn replica(h: &Hand<Calvin>) -> &super::Replica {
    match &h.node {
        Node::Replica(r) => r,
        _ => panic!("not a replica"),
    }
}

#[test]
fn a_sequencer_cuts_its_batch_at_the_epoch_and_spreads_it_only_once_durable() {
    let d = deployment();
    let mut h = hand(&d, "sequencer-finland");
    h.start(Vec::new());
    let client = d.topology.clients()[0];
    let program = Program::new(vec![Op::Read { key: Key(1) }]);
    let fx = h.message(client, Msg::Submit { id: TxnId { node: client, seq: 1 }, program, recon: None, floor: 0 });
    assert!(
        fx.all().iter().all(|e| !matches!(e, meridian_core::Effect::Send { .. })),
        "nothing leaves before the epoch"
    );
    let fx = h.timer(Timer::Epoch);
    let batches: Vec<_> = fx.appends().filter(|(_, _, r)| matches!(r, Record::Batch(_))).collect();
    assert_eq!(batches.len(), 1, "Calvin §3.1: one batch per epoch, made durable");
    assert_eq!(fx.sends().count(), 0, "not spread before it is durable");
    let fx = h.persist_all();
    let stores: Vec<NodeId> = fx.sends().filter(|(_, m)| matches!(m, Msg::StoreBatch(_))).map(|(to, _)| to).collect();
    let others: Vec<NodeId> = d.topology.service(SEQUENCER).iter().copied().filter(|s| *s != h.me()).collect();
    assert_eq!(stores, others, "its contents go to every other sequencer, apart from the log");
    assert_eq!(
        fx.sends().filter(|(_, m)| matches!(m, Msg::Order { .. })).count(),
        0,
        "ordered once a majority holds it"
    );
    let fx = h.message(others[0], Msg::BatchStored { id: BatchId { sequencer: 1, seq: 0 } });
    let leader = d.topology.service(SEQUENCER)[0];
    let orders: Vec<NodeId> = fx.sends().filter(|(_, m)| matches!(m, Msg::Order { .. })).map(|(to, _)| to).collect();
    assert_eq!(orders, vec![leader], "two of three hold it: the global log's leader orders its id");
}

#[test]
fn an_empty_epoch_orders_nothing() {
    let d = deployment();
    let mut h = hand(&d, "sequencer-brazil");
    h.start(Vec::new());
    let fx = h.timer(Timer::Epoch);
    assert_eq!(fx.appends().count(), 0);
    assert_eq!(fx.counted("batches"), 0);
}

#[test]
fn a_passive_participant_sends_its_reads_to_the_active_one_and_finishes_at_once() {
    let d = deployment();
    let mut h = hand(&d, "shard1-replica1");
    h.start(Vec::new());
    // Reads key 1 (shard 1) and writes key 2 (shard 0): shard 1 is passive.
    let t = txn(&d, 1, vec![Op::Write { key: Key(2), value: Value::int(5, 5) }, Op::Read { key: Key(1) }]);
    let seq = d.topology.service(SEQUENCER)[1];
    let fx = h.message(seq, Msg::Log { shard: ShardId(1), entries: vec![LogEntry { pos: 0, txns: vec![(0, t)] }] });
    let reads: Vec<NodeId> = fx.sends().filter(|(_, m)| matches!(m, Msg::Reads { .. })).map(|(to, _)| to).collect();
    assert_eq!(reads, vec![d.topology.replicas(ShardId(0))[1]], "to the other shard's replica of the same region");
    assert_eq!(replica(&h).running(), 0, "no vote, no decision to wait for: no two-phase commit");
    assert_eq!(fx.appends().count(), 1, "recorded, so that a restart does not re-read later writes");
}

/// Shard 0's replica in South Carolina, started, and a transaction that
/// increments key 0 (shard 0, the first: it answers) with key 1 (shard 1)
/// read — placed at position 0 of `log_len` positions, the rest empty.
fn active_participant(d: &Deployment, log_len: u64) -> (Hand<Calvin>, TxnId, EffectsOf<Calvin>) {
    let mut h = hand(d, "shard0-replica0");
    h.start(Vec::new());
    let t = txn(d, 2, vec![Op::Increment { key: Key(0), delta: 2, tag: 7 }, Op::Read { key: Key(1) }]);
    let id = t.id;
    let mut first = Some(t);
    let entries =
        (0..log_len).map(|pos| LogEntry { pos, txns: first.take().map(|t| vec![(0, t)]).unwrap_or_default() });
    let fx = h.message(sequencer(d), Msg::Log { shard: ShardId(0), entries: entries.collect() });
    (h, id, fx)
}

fn sequencer(d: &Deployment) -> NodeId {
    d.topology.service(SEQUENCER)[0]
}

#[test]
fn an_active_participant_executes_once_it_has_every_participants_reads() {
    let d = deployment();
    let (mut h, id, fx) = active_participant(&d, 1);
    assert_eq!(fx.completions().count() + fx.sends().filter(|(_, m)| matches!(m, Msg::Reply { .. })).count(), 0);
    assert_eq!(replica(&h).running(), 1, "holds its locks while it waits");
    let peer = d.topology.replicas(ShardId(1))[0];
    let reads = vec![(Key(1), Some(Value::int(3, 40)))];
    let fx = h.message(peer, Msg::Reads { txn: id, at: (0, 0), shard: ShardId(1), reads });
    let replies: Vec<NodeId> = fx.sends().filter(|(_, m)| matches!(m, Msg::Reply { .. })).map(|(to, _)| to).collect();
    assert_eq!(replies, vec![id.node], "the answering replica replies after execution");
    assert_eq!(replica(&h).store().get(&Key(0)), Some(&Value::int(7, 2)), "its own shard's write installed");
    assert_eq!(replica(&h).running(), 0);
}

/// A replica that asks another copy for a checkpoint drops the
/// transactions it runs when it installs it; their peers may still wait
/// for its reads, which only the other copy can give. So it asks for the
/// reads from the first place a running transaction holds, not from its
/// next position (swarm seed 4 of `examples/calvin-truncation.toml` waited
/// for good).
#[test]
fn a_replica_asking_for_a_checkpoint_asks_for_the_reads_of_the_transactions_it_still_runs() {
    let d = deployment();
    let (mut h, _, _) = active_participant(&d, 4);
    assert_eq!((replica(&h).running(), replica(&h).next_pos()), (1, 4), "waits for shard 1's reads");
    let fx = h.message(sequencer(&d), Msg::Truncated { shard: ShardId(0), base: 10 });
    let asked: Vec<(u64, u64)> = fx
        .sends()
        .filter_map(|(_, m)| match m {
            Msg::FetchCheckpoint { from, need, .. } => Some((*from, *need)),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec![(0, 10)], "the reads from position 0, a checkpoint at 10 or later");
}

/// A replica that installs another copy's checkpoint makes it durable in
/// place of every earlier record, the earlier checkpoint it installed
/// among them, with the reads that one gave it for transactions before
/// the new checkpoint's `from`: a peer that had not reached them yet asks
/// for them after this replica restarts (swarm seed 4906721 of
/// `examples/calvin-truncation.toml` waited for good).
#[test]
fn a_replica_installing_a_second_checkpoint_keeps_the_reads_the_first_gave_it() {
    let d = deployment();
    let mut h = hand(&d, "shard1-replica0");
    h.start(Vec::new());
    let copy = d.topology.node_by_name("shard1-replica2").unwrap();
    let t = TxnId { node: NodeId(99), seq: 8 };
    let reads = vec![(Key(1), Some(Value::int(3, 40)))];
    let first = Checkpoint { next_pos: 5, sent: vec![(t, (2, 0), Arc::new(reads))], ..Checkpoint::default() };
    h.message(copy, Msg::Checkpoint { shard: ShardId(1), checkpoint: Arc::new(first) });
    // Asked for the reads from position 5 on: it carries none before.
    let second = Checkpoint { next_pos: 8, ..Checkpoint::default() };
    let fx = h.message(copy, Msg::Checkpoint { shard: ShardId(1), checkpoint: Arc::new(second) });
    let (_, _, snapshot) = fx.compactions().last().expect("the installed checkpoint replaces the log");
    let mut restarted = hand(&d, "shard1-replica0");
    restarted.start(vec![snapshot.clone()]);
    let peer = d.topology.node_by_name("shard0-replica0").unwrap();
    let fx = restarted.message(peer, Msg::ReadsWanted { txn: t, at: (2, 0), shard: ShardId(1) });
    let resent: Vec<_> = fx.sends().filter(|(to, m)| *to == peer && matches!(m, Msg::Reads { .. })).collect();
    assert_eq!(resent.len(), 1, "the reads the first checkpoint gave it survive the second and a restart");
}

/// A replica's own checkpoint carries every read it keeps to send again,
/// not only the newest 1,024: a peer of its region may be further behind
/// (it was the active participant of those transactions, this replica a
/// passive one that ran ahead), and if it lost the reads in a crash it
/// asks this replica, restarted meanwhile from its checkpoint, in vain.
#[test]
fn a_restarted_replica_sends_again_every_read_it_kept_before_its_checkpoint() {
    const TXNS: u64 = 1_100;
    let d = deployment_with(Params::new().with("checkpoint_txns", meridian_core::ParamValue::Int(TXNS as i64)));
    let mut h = hand(&d, "shard1-replica0");
    h.start(Vec::new());
    // Each reads key 1 (shard 1, here) and writes key 2 (shard 0): shard 1
    // is passive, so it sends its reads and goes on at once.
    let txns: Vec<Arc<Txn>> = (0..TXNS)
        .map(|seq| {
            txn(&d, 100 + seq, vec![Op::Write { key: Key(2), value: Value::int(5, 5) }, Op::Read { key: Key(1) }])
        })
        .collect();
    let entries = txns.iter().enumerate().map(|(pos, t)| LogEntry { pos: pos as u64, txns: vec![(0, Arc::clone(t))] });
    h.message(d.topology.service(SEQUENCER)[0], Msg::Log { shard: ShardId(1), entries: entries.collect() });
    assert_eq!(replica(&h).next_pos(), TXNS, "every transaction ran");
    h.persist_all();
    let fx = h.timer(Timer::ReplicaTick);
    assert_eq!(fx.counted("replica_checkpoints"), 1);
    let (_, _, snapshot) = fx.compactions().last().expect("the checkpoint replaces the log");
    let mut restarted = hand(&d, "shard1-replica0");
    restarted.start(vec![snapshot.clone()]);
    let peer = d.topology.node_by_name("shard0-replica0").unwrap();
    for pos in [0, TXNS - 1] {
        let t = &txns[pos as usize];
        let fx = restarted.message(peer, Msg::ReadsWanted { txn: t.id, at: (pos, 0), shard: ShardId(1) });
        let resent = fx.sends().filter(|(to, m)| *to == peer && matches!(m, Msg::Reads { txn, .. } if *txn == t.id));
        assert_eq!(resent.count(), 1, "the reads of {:?} are sent again after the restart", t.id);
    }
}

/// A participant keeps the reads it sent while its region's sequencer
/// keeps their position, past `reads_kept` (swarm seed 4935545 with
/// `reads_kept = 64`: every copy of a shard waited for reads every copy of
/// its peer shard had dropped). Once they are dropped, asked for them it
/// says so when it is past the transaction, and stays silent while it has
/// not reached it (it sends them when it does).
#[test]
fn a_participant_keeps_the_reads_its_region_still_needs_and_says_those_it_dropped_are_gone() {
    let d = deployment_with(Params::new().with("reads_kept", meridian_core::ParamValue::Int(2)));
    let mut h = hand(&d, "shard1-replica0");
    h.start(Vec::new());
    // Passive here (reads key 1, writes key 2 on shard 0): it sends its
    // reads and goes on; three of them, so the first is forgotten.
    let txns: Vec<Arc<Txn>> = (0..3)
        .map(|seq| {
            txn(&d, 200 + seq, vec![Op::Write { key: Key(2), value: Value::int(5, 5) }, Op::Read { key: Key(1) }])
        })
        .collect();
    let entries = txns.iter().enumerate().map(|(pos, t)| LogEntry { pos: pos as u64, txns: vec![(0, Arc::clone(t))] });
    h.message(sequencer(&d), Msg::Log { shard: ShardId(1), entries: entries.collect() });
    let peer = d.topology.node_by_name("shard0-replica0").unwrap();
    let ask = |h: &mut Hand<Calvin>, txn: TxnId, pos: u64| {
        let fx = h.message(peer, Msg::ReadsWanted { txn, at: (pos, 0), shard: ShardId(0) });
        fx.sends().map(|(_, m)| m.clone()).collect::<Vec<Msg>>()
    };
    let kept = ask(&mut h, txns[0].id, 0);
    assert!(matches!(kept.as_slice(), [Msg::Reads { .. }]), "past `reads_kept`, but position 0 is kept: sent again");
    h.message(sequencer(&d), Msg::Truncated { shard: ShardId(1), base: 1 });
    let gone = ask(&mut h, txns[0].id, 0);
    assert!(matches!(gone.as_slice(), [Msg::ReadsGone { txn, shard }] if *txn == txns[0].id && *shard == ShardId(1)));
    assert!(matches!(ask(&mut h, txns[2].id, 2).as_slice(), [Msg::Reads { .. }]), "kept: sent again");
    let later = TxnId { node: NodeId(99), seq: 300 };
    assert!(ask(&mut h, later, 7).is_empty(), "not reached yet: it sends them when it gets there");
}

/// A replica restarted from a checkpoint skips, in replay, the
/// transactions past the checkpoint's position it had executed: asked for
/// reads of one it no longer keeps, it says they are gone too (swarm seed
/// 4935031 with `reads_kept = 64`: two participants of a region each
/// waited for the other's reads of such a transaction).
#[test]
fn a_replica_whose_records_skip_a_transaction_says_the_reads_it_no_longer_keeps_are_gone() {
    let d = deployment();
    let mut h = hand(&d, "shard1-replica0");
    let checkpoint = Checkpoint { next_pos: 3, executed: vec![(5, 0)], ..Checkpoint::default() };
    h.start(vec![Record::Checkpoint(Arc::new(checkpoint))]);
    let peer = d.topology.node_by_name("shard0-replica0").unwrap();
    let (skipped, ahead) = (TxnId { node: NodeId(99), seq: 5 }, TxnId { node: NodeId(99), seq: 6 });
    let fx = h.message(peer, Msg::ReadsWanted { txn: skipped, at: (5, 0), shard: ShardId(0) });
    assert!(fx.sends().any(|(to, m)| to == peer && matches!(m, Msg::ReadsGone { txn, .. } if *txn == skipped)));
    let fx = h.message(peer, Msg::ReadsWanted { txn: ahead, at: (6, 0), shard: ShardId(0) });
    assert_eq!(fx.sends().count(), 0, "one it will run: it sends the reads when it does");
}

/// A participant told that the reads it waits for are gone asks the other
/// copies of that shard (every region reads the same values) and another
/// copy of its own shard for a checkpoint past the transaction — and
/// installs one that is past it even though it is behind its log.
#[test]
fn a_participant_whose_peer_lost_its_reads_asks_the_other_copies_and_installs_a_checkpoint_past_the_transaction() {
    let d = deployment();
    let (mut h, id, _) = active_participant(&d, 4);
    assert_eq!((replica(&h).running(), replica(&h).next_pos()), (1, 4), "waits for shard 1's reads at position 0");
    let peer = d.topology.replicas(ShardId(1))[0];
    let fx = h.message(peer, Msg::ReadsGone { txn: id, shard: ShardId(1) });
    let mut wanted: Vec<NodeId> =
        fx.sends().filter(|(_, m)| matches!(m, Msg::ReadsWanted { .. })).map(|(to, _)| to).collect();
    wanted.sort();
    assert_eq!(wanted, d.topology.replicas(ShardId(1))[1..].to_vec(), "the peer shard's other copies");
    let asked: Vec<(NodeId, u64, u64)> = fx
        .sends()
        .filter_map(|(to, m)| match m {
            Msg::FetchCheckpoint { from, need, .. } => Some((to, *from, *need)),
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 1);
    let (copy, from, need) = asked[0];
    assert_eq!((from, need), (0, 1), "a checkpoint past position 0, with the reads from there");
    assert!(d.topology.replicas(ShardId(0)).contains(&copy) && copy != h.me());
    assert_eq!(fx.counted("reads_gone_checkpoints_asked"), 1);
    let checkpoint = Checkpoint { next_pos: 2, ..Checkpoint::default() };
    let fx = h.message(copy, Msg::Checkpoint { shard: ShardId(0), checkpoint: Arc::new(checkpoint) });
    assert_eq!(fx.counted("checkpoints_installed"), 1, "past the transaction, though behind the log");
    assert_eq!((replica(&h).running(), replica(&h).next_pos()), (0, 2), "it goes on from the checkpoint");
}

#[test]
fn a_reconnaissance_that_no_longer_covers_the_keys_writes_nothing_and_sends_the_client_back_for_a_new_pass() {
    // OLLP: an update through index key 1 (shard 1); the pass saw it name
    // key 2 (shard 0, here), but at the transaction's turn it names key 4.
    use meridian_core::procedure::{Indirect, Need, Procedure, Recon};
    let d = deployment();
    let mut h = hand(&d, "shard0-replica0");
    h.start(Vec::new());
    let program = Program::procedure(Procedure::Indirect(Indirect { index: Key(1), delta: 3, tag: 70 }));
    let recon = Recon { keys: vec![Need::read(Key(1)), Need::write(Key(2))], assumed: vec![(Key(1), 5), (Key(2), 0)] };
    let id = TxnId { node: NodeId(99), seq: 3 };
    let t = Arc::new(Txn::with_recon(id, program, Some(Arc::new(recon)), RegionId(0), &d.topology));
    assert_eq!(t.shards, vec![ShardId(0), ShardId(1)], "its participants are the pass's keys' shards");
    let seq = d.topology.service(SEQUENCER)[0];
    h.message(seq, Msg::Log { shard: ShardId(0), entries: vec![LogEntry { pos: 0, txns: vec![(0, t)] }] });
    let peer = d.topology.replicas(ShardId(1))[0];
    let reads = vec![(Key(1), Some(Value::int(6, 4)))];
    let fx = h.message(peer, Msg::Reads { txn: id, at: (0, 0), shard: ShardId(1), reads });
    let sent: Vec<(NodeId, bool)> = fx.sends().map(|(to, m)| (to, matches!(m, Msg::Restart { .. }))).collect();
    assert_eq!(sent, vec![(id.node, true)], "the client makes a new pass");
    assert_eq!(fx.counted("recon_aborts"), 1);
    assert_eq!(replica(&h).store().get(&Key(2)), None, "nothing written");
    assert_eq!(replica(&h).running(), 0, "its locks released");
}

#[test]
fn conflicting_transactions_run_in_log_order() {
    let d = deployment();
    let mut h = hand(&d, "shard0-replica2");
    h.start(Vec::new());
    let first = txn(&d, 3, vec![Op::Write { key: Key(0), value: Value::int(1, 1) }]);
    let second = txn(&d, 4, vec![Op::Increment { key: Key(0), delta: 1, tag: 2 }]);
    let seq = d.topology.service(SEQUENCER)[2];
    let entries = vec![LogEntry { pos: 0, txns: vec![(0, first)] }, LogEntry { pos: 1, txns: vec![(0, second)] }];
    h.message(seq, Msg::Log { shard: ShardId(0), entries });
    assert_eq!(replica(&h).store().get(&Key(0)), Some(&Value::int(2, 2)), "the increment saw the write");
}

#[test]
fn a_restarted_replica_skips_what_its_records_say_it_executed() {
    let d = deployment();
    let mut h = hand(&d, "shard0-replica0");
    let t = txn(&d, 5, vec![Op::Write { key: Key(0), value: Value::int(9, 9) }]);
    let writes = vec![(Key(0), Value::int(9, 9))];
    let record = Record::Executed { txn: t.id, at: (0, 0), writes, sent: None, outcome: None };
    h.start(vec![record]);
    assert_eq!(replica(&h).store().get(&Key(0)), Some(&Value::int(9, 9)), "rebuilt from its records");
    let seq = d.topology.service(SEQUENCER)[0];
    let fx = h.message(seq, Msg::Log { shard: ShardId(0), entries: vec![LogEntry { pos: 0, txns: vec![(0, t)] }] });
    assert_eq!(fx.counted("replayed"), 1);
    assert_eq!(fx.appends().count(), 0, "not executed twice");
    assert_eq!(replica(&h).next_pos(), 1);
}

/// A participant whose piece reads nothing still sends its (empty) reads
/// to the active ones, which wait for them: after a restart its records
/// must let it send them again when one asks (they were restored only
/// when nonempty, and the asking participant waited for good).
#[test]
fn a_restarted_participant_sends_again_the_empty_reads_it_sent_before_it_crashed() {
    let d = deployment();
    let mut h = hand(&d, "shard0-replica0");
    let t = TxnId { node: NodeId(99), seq: 7 };
    h.start(vec![Record::Executed {
        txn: t,
        at: (3, 0),
        writes: Vec::new(),
        sent: Some(Arc::new(vec![])),
        outcome: None,
    }]);
    let peer = d.topology.node_by_name("shard1-replica0").unwrap();
    let fx = h.message(peer, Msg::ReadsWanted { txn: t, at: (3, 0), shard: ShardId(1) });
    let resent: Vec<_> = fx.sends().filter(|(to, m)| *to == peer && matches!(m, Msg::Reads { .. })).collect();
    assert_eq!(resent.len(), 1, "the lost reads are sent again");
    assert!(matches!(resent[0].1, Msg::Reads { txn, reads, .. } if *txn == t && reads.is_empty()));
}

#[test]
fn the_global_log_drops_a_resubmitted_transaction_and_a_batch_ordered_twice() {
    let d = deployment();
    let mut h = hand(&d, "sequencer-south-carolina");
    h.start(Vec::new());
    h.persist_all(); // the preferred member leads the fresh group
    let t = txn(&d, 6, vec![Op::Read { key: Key(0) }]);
    let a = Arc::new(Batch { id: BatchId { sequencer: 1, seq: 0 }, txns: vec![Arc::clone(&t)] });
    let b = Arc::new(Batch { id: BatchId { sequencer: 2, seq: 0 }, txns: vec![t] });
    let Node::Sequencer(s) = &mut h.node else { panic!() };
    s.log.store(a);
    s.log.store(b);
    h.step(|n, ctx| {
        let Node::Sequencer(s) = n else { panic!() };
        s.log.order(ctx, BatchId { sequencer: 1, seq: 0 });
        s.log.order(ctx, BatchId { sequencer: 2, seq: 0 });
    });
    choose_slots(&mut h, &d, 1..=4);
    let Node::Sequencer(s) = &h.node else { panic!() };
    assert_eq!(s.log_len(), 1, "the second batch held only the repeat: no position");
}

#[test]
fn a_client_resubmits_only_after_retry_ms_without_an_answer() {
    let d = deployment();
    let name = d.topology.name(d.topology.clients()[0]).to_string();
    let mut h = hand(&d, &name);
    h.start(Vec::new());
    h.persist_all(); // its identifier epoch is durable
    let fx = h.request(meridian_core::RequestId(1), Program::new(vec![Op::Read { key: Key(0) }]));
    assert_eq!(fx.sends().filter(|(_, m)| matches!(m, Msg::Submit { .. })).count(), 1);
    let ticks = super::Config::from_params(&Params::new()).map(|c| c.retry_ns / c.client_tick_ns).unwrap();
    for _ in 1..ticks {
        let fx = h.timer(Timer::ClientTick);
        assert_eq!(fx.counted("retries"), 0, "no resubmission before retry_ms");
    }
    let fx = h.timer(Timer::ClientTick);
    assert_eq!(fx.counted("retries"), 1);
    let kinds: Vec<bool> = fx.sends().map(|(_, m)| matches!(m, Msg::Submit { .. })).collect();
    assert_eq!(kinds, vec![true, false, false, false], "resubmitted, and every copy of the first shard asked");
    let asked: Vec<NodeId> = fx.sends().filter(|(_, m)| matches!(m, Msg::Query { .. })).map(|(to, _)| to).collect();
    assert_eq!(asked, d.topology.replicas(d.topology.shard_of(Key(0))).to_vec());
}

#[test]
fn the_global_log_forgets_a_clients_transactions_below_its_floor_and_drops_a_late_copy_of_one() {
    let d = deployment();
    let mut h = hand(&d, "sequencer-south-carolina");
    h.start(Vec::new());
    h.persist_all();
    let with_floor = |seq: u64, floor: u64| {
        let mut t = (*txn(&d, seq, vec![Op::Read { key: Key(0) }])).clone();
        t.client_floor = floor;
        Arc::new(t)
    };
    // The client heard 5's outcome before submitting 6; a late copy of 5
    // reaches another region's sequencer after that.
    let batches = [(1, with_floor(5, 5)), (2, with_floor(6, 6)), (3, with_floor(5, 5))];
    let Node::Sequencer(s) = &mut h.node else { panic!() };
    for (sequencer, t) in &batches {
        s.log.store(Arc::new(Batch { id: BatchId { sequencer: *sequencer, seq: 0 }, txns: vec![Arc::clone(t)] }));
    }
    h.step(|n, ctx| {
        let Node::Sequencer(s) = n else { panic!() };
        for (sequencer, _) in &batches {
            s.log.order(ctx, BatchId { sequencer: *sequencer, seq: 0 });
        }
    });
    choose_slots(&mut h, &d, 1..=6);
    let Node::Sequencer(s) = &h.node else { panic!() };
    assert_eq!(s.log_len(), 2, "the late copy of 5 takes no position");
    let mut remembered = 0;
    meridian_core::Process::state_sizes(&h.node, &mut |name, n| {
        if name == "txns_remembered" {
            remembered = n;
        }
    });
    assert_eq!(remembered, 1, "only 6 is kept");
}

/// A participant keeps the reads of the transactions it still runs
/// whatever its region's sequencer forgot (with `kept_positions_max` it
/// forgets what another region's copies are past): a peer stuck behind
/// with it waits for them (swarm seed 4935302 with `reads_kept = 64`: two
/// participants behind the forgotten positions each dropped the reads the
/// other waited for, and neither was done to say so).
#[test]
fn a_participant_keeps_the_reads_of_the_transactions_it_still_runs_whatever_its_region_forgot() {
    let d = deployment_with(Params::new().with("reads_kept", meridian_core::ParamValue::Int(1)));
    let mut h = hand(&d, "shard0-replica0");
    h.start(Vec::new());
    // Both write on both shards: every participant is active and waits.
    let inc = |key| Op::Increment { key: Key(key), delta: 1, tag: 7 };
    let txns: Vec<Arc<Txn>> = (0..2).map(|n| txn(&d, 10 + n, vec![inc(2 * n), inc(2 * n + 1)])).collect();
    let entries = txns.iter().enumerate().map(|(pos, t)| LogEntry { pos: pos as u64, txns: vec![(0, Arc::clone(t))] });
    h.message(sequencer(&d), Msg::Log { shard: ShardId(0), entries: entries.collect() });
    assert_eq!(replica(&h).running(), 2, "both wait for shard 1's reads");
    h.message(sequencer(&d), Msg::Truncated { shard: ShardId(0), base: 5 });
    let peer = d.topology.replicas(ShardId(1))[0];
    for (pos, t) in txns.iter().enumerate() {
        let fx = h.message(peer, Msg::ReadsWanted { txn: t.id, at: (pos as u64, 0), shard: ShardId(1) });
        let resent = fx.sends().filter(|(to, m)| *to == peer && matches!(m, Msg::Reads { txn, .. } if *txn == t.id));
        assert_eq!(resent.count(), 1, "{:?} runs here: its reads are kept past `reads_kept`", t.id);
    }
}
