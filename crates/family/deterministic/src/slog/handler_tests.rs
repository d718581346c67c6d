//! Handlers driven by hand: the effects of one event compared with what
//! SLOG's Figure 2 says the transition does.

use super::messages::{
    BatchId, Checkpoint, Entry, Header, LocalBatch, LogEntry, Msg, Record, RegionRecord, Timer, Txn,
};
use super::{Node, Slog};
use meridian_core::{
    ClusterSpec, Deployment, EffectsOf, Hand, Key, KeyLayout, LatencyMatrix, LeaderPlacement, NodeId, Now, Op, Params,
    Program, Protocol, RegionId, ShardId, Topology, TxnId, Value,
};
use meridian_mechanisms::paxos::{Ballot, PaxosBody, PaxosMsg, PaxosRecord, PaxosRecordBody, PaxosTimer};
use std::sync::Arc;

/// Two shards, one replica of each in each of three regions (South
/// Carolina, Finland, Brazil: homes 0, 1, 2), a group of three sequencers
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
    let topology = Arc::new(Topology::build(&spec, &Slog::services(&params)));
    Deployment { topology, params, epsilon_us: 100, latency: Arc::new(matrix) }
}

fn hand(d: &Deployment, name: &str) -> Hand<Slog> {
    let me = d.topology.node_by_name(name).unwrap();
    let node = Slog::build(d, me).unwrap();
    Hand::new(node, Arc::clone(&d.topology), me, Now::at(0))
}

/// The first sequencer of a region's group, started: it leads once its
/// first promise is durable.
fn leader(d: &Deployment, name: &str) -> Hand<Slog> {
    let mut h = hand(d, name);
    h.start(Vec::new());
    h.persist_all();
    assert!(matches!(&h.node, Node::Sequencer(s) if s.is_leader()), "{name} leads its group");
    h
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

/// What a sequencer proposed to its region's group in these effects (its
/// own accepts), by slot.
fn proposed(fx: &EffectsOf<Slog>) -> Vec<(u64, RegionRecord)> {
    fx.appends()
        .filter_map(|(_, _, r)| match r {
            Record::Paxos(PaxosRecord { body: PaxosRecordBody::Accepted { slot, value: Some(v), .. }, .. }) => {
                Some((*slot, (**v).clone()))
            }
            _ => None,
        })
        .collect()
}

/// The group chooses the leader's proposals in `slots`: its own vote,
/// once durable, and its second member's. The effects of each step.
fn choose(h: &mut Hand<Slog>, d: &Deployment, slots: &[u64]) -> Vec<EffectsOf<Slog>> {
    let (index, group) = group_of(d, h.me());
    let mut all = vec![h.persist_all()];
    for slot in slots {
        let body = PaxosBody::Accepted { ballot: Ballot { round: 1, rank: 0 }, slot: *slot };
        all.push(h.message(group[1], Msg::Paxos(PaxosMsg { group: index, body })));
    }
    all
}

/// The index of `member`'s region group, and its members.
fn group_of(d: &Deployment, member: NodeId) -> (u32, Vec<NodeId>) {
    let groups = super::groups(&d.topology);
    let index = groups.iter().position(|g| g.contains(&member)).expect("a sequencer");
    (index as u32, groups[index].clone())
}

fn sends(all: &[EffectsOf<Slog>]) -> Vec<(NodeId, Msg)> {
    all.iter().flat_map(|fx| fx.sends().map(|(to, m)| (to, m.clone()))).collect()
}

/// Sends other than the group's own Paxos messages.
fn outside(all: &[EffectsOf<Slog>]) -> Vec<(NodeId, Msg)> {
    sends(all).into_iter().filter(|(_, m)| !matches!(m, Msg::Paxos(_))).collect()
}

#[test]
fn receive_new_txn_sends_a_single_home_transaction_to_its_home_and_a_multi_home_one_to_the_orderer() {
    let d = deployment();
    let l = layout(&d);
    let mut h = leader(&d, "sequencer-brazil");
    let client = d.topology.clients()[0];
    let at_finland = Program::new(vec![inc(l.key(0, 1, 3)), inc(l.key(1, 1, 4))]);
    let fx = h.message(
        client,
        Msg::Submit { id: TxnId { node: client, seq: 1 }, program: at_finland, recon: None, floor: 0 },
    );
    assert!(outside(std::slice::from_ref(&fx)).is_empty(), "its annotation is chosen before it leaves");
    let slots: Vec<u64> = proposed(&fx).iter().map(|(slot, _)| *slot).collect();
    let persisted = h.persist_all();
    assert!(outside(&[persisted]).is_empty(), "one vote of three is not a majority");
    let sent = outside(&choose(&mut h, &d, &slots));
    assert_eq!(sent.len(), 1);
    let (to, Msg::Forward(ts)) = &sent[0] else { panic!("{sent:?}") };
    let [t] = &ts[..] else { panic!("{ts:?}") };
    assert_eq!(*to, sequencer(&d, 1), "Figure 2: shipped to its home region");
    assert_eq!(t.homes, vec![RegionId(1)]);
    assert!(t.master_info.iter().all(|(_, h)| *h == Header { home: RegionId(1), counter: 0 }));
    let both = Program::new(vec![inc(l.key(0, 1, 3)), inc(l.key(0, 2, 3))]);
    let fx =
        h.message(client, Msg::Submit { id: TxnId { node: client, seq: 2 }, program: both, recon: None, floor: 0 });
    let slots: Vec<u64> = proposed(&fx).iter().map(|(slot, _)| *slot).collect();
    let to: Vec<NodeId> = outside(&choose(&mut h, &d, &slots)).into_iter().map(|(to, _)| to).collect();
    assert_eq!(to, vec![sequencer(&d, 0)], "§3.3: every multi-home transaction to the orderer's local log");
}

#[test]
fn annotations_that_arrive_while_one_is_chosen_are_chosen_together_and_leave_in_one_message() {
    let d = deployment();
    let l = layout(&d);
    let mut h = leader(&d, "sequencer-brazil");
    let client = d.topology.clients()[0];
    let submit = |h: &mut Hand<Slog>, seq: u64| {
        let program = Program::new(vec![inc(l.key(0, 1, seq))]);
        h.message(client, Msg::Submit { id: TxnId { node: client, seq }, program, recon: None, floor: 0 })
    };
    let first = proposed(&submit(&mut h, 1));
    assert!(matches!(&first[..], [(_, RegionRecord::Annotated(ts))] if ts.len() == 1), "at once when none waits");
    for seq in [2, 3] {
        assert!(proposed(&submit(&mut h, seq)).is_empty(), "waits for the record in flight");
    }
    assert!(proposed(&submit(&mut h, 2)).is_empty(), "a retry of a waiting one waits with it");
    let chosen = choose(&mut h, &d, &[first[0].0]);
    let sent = outside(&chosen);
    assert!(matches!(&sent[..], [(_, Msg::Forward(ts))] if ts.len() == 1), "{sent:?}");
    let second: Vec<(u64, RegionRecord)> = chosen.iter().flat_map(proposed).collect();
    let [(slot, RegionRecord::Annotated(ts))] = &second[..] else { panic!("{second:?}") };
    let seqs: Vec<u64> = ts.iter().map(|t| t.id.seq).collect();
    assert_eq!(seqs, vec![2, 3], "the two that waited, once each, in one record");
    let sent = outside(&choose(&mut h, &d, &[*slot]));
    let [(to, Msg::Forward(ts))] = &sent[..] else { panic!("{sent:?}") };
    assert_eq!((*to, ts.len()), (sequencer(&d, 1), 2), "one message to their home's group");
}

#[test]
fn a_local_log_batch_is_shipped_once_chosen_and_its_placement_is_chosen_before_the_replicas_see_it() {
    let d = deployment();
    let l = layout(&d);
    let mut h = leader(&d, "sequencer-finland");
    let t = txn(&d, 1, vec![inc(l.key(0, 1, 0))]);
    let fx = h.message(sequencer(&d, 2), Msg::Forward(vec![t]));
    assert_eq!(fx.sends().count() + fx.appends().count(), 0, "waits in the open batch");
    let fx = h.timer(Timer::Batch);
    let batch = proposed(&fx);
    assert!(matches!(batch[..], [(_, RegionRecord::Batch(_))]), "{batch:?}");
    assert!(outside(std::slice::from_ref(&fx)).is_empty(), "not shipped before it is chosen");
    let steps = choose(&mut h, &d, &[batch[0].0]);
    let ships: Vec<NodeId> =
        outside(&steps).into_iter().filter(|(_, m)| matches!(m, Msg::Ship(_))).map(|(to, _)| to).collect();
    assert_eq!(ships, vec![sequencer(&d, 0), sequencer(&d, 2)], "ReceiveBatch at each other region");
    let placed: Vec<(u64, RegionRecord)> = steps.iter().flat_map(proposed).collect();
    assert!(matches!(placed[..], [(_, RegionRecord::Placed(_))]), "placed here: {placed:?}");
    assert!(!outside(&steps).iter().any(|(_, m)| matches!(m, Msg::Log { .. })), "placement not chosen yet");
    let logs: Vec<(NodeId, usize)> = outside(&choose(&mut h, &d, &[placed[0].0]))
        .into_iter()
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
        let mut h = leader(&d, name);
        let fx = h.message(sequencer(&d, 0), Msg::Ship(Arc::clone(&orderer_batch)));
        assert_eq!(fx.counted("lock_only_txns"), u64::from(home), "{name}");
        let fx = h.timer(Timer::Batch);
        let own: Vec<RegionRecord> =
            proposed(&fx).into_iter().map(|(_, r)| r).filter(|r| matches!(r, RegionRecord::Batch(_))).collect();
        if home {
            let RegionRecord::Batch(b) = &own[0] else { unreachable!() };
            assert_eq!(b.items, vec![Entry::LockOnly { txn: Arc::clone(&t), home: RegionId(1) }]);
        } else {
            assert!(own.is_empty(), "Brazil is no home of the transaction: no LockOnlyTxn (Figure 4)");
        }
    }
}

#[test]
fn a_batch_arriving_before_its_predecessor_waits_and_the_gap_is_fetched() {
    let d = deployment();
    let mut h = leader(&d, "sequencer-brazil");
    let later = Arc::new(LocalBatch { origin: 1, seq: 1, items: Vec::new() });
    let fx = h.message(sequencer(&d, 1), Msg::Ship(later));
    assert!(proposed(&fx).is_empty(), "1-2 is not placed before 1-1");
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
    let placed: Vec<u64> = proposed(&fx)
        .into_iter()
        .filter_map(|(_, r)| match r {
            RegionRecord::Placed(b) => Some(b.seq),
            _ => None,
        })
        .collect();
    assert_eq!(placed, vec![0, 1], "both, in their local log's order");
}

#[test]
fn a_sequencer_that_does_not_lead_passes_its_leaders_messages_on_once() {
    // SLOG §3.1: the region's servers hold its logs by Paxos; the others
    // pass what the region must decide to the one that leads.
    let d = deployment();
    let mut h = hand(&d, "sequencer-brazil-1");
    h.start(Vec::new());
    let client = d.topology.clients()[0];
    let submit = Msg::Submit {
        id: TxnId { node: client, seq: 1 },
        program: Program::new(vec![inc(Key(3))]),
        recon: None,
        floor: 0,
    };
    let fx = h.message(client, submit.clone());
    let sent: Vec<(NodeId, bool)> = fx.sends().map(|(to, m)| (to, matches!(m, Msg::Submit { .. }))).collect();
    assert_eq!(sent, vec![(client, false), (sequencer(&d, 2), true)], "to the group's leader, and the client told");
    let told = fx.sends().find_map(|(_, m)| match m {
        Msg::Leader { node } => Some(*node),
        _ => None,
    });
    assert_eq!(told, Some(sequencer(&d, 2)), "the client submits to the leader from now on");
    assert_eq!(fx.counted("relayed"), 1);
    assert!(proposed(&fx).is_empty(), "a member that does not lead decides nothing");
    let (_, group) = group_of(&d, h.me());
    let fx = h.message(group[2], submit);
    assert_eq!(fx.sends().count(), 0, "what a member of the group passed on is not passed on again");
}

#[test]
fn a_member_that_takes_over_ships_the_chosen_batch_its_predecessor_had_not_placed() {
    // The region's group chose Finland's batch 0; its leader failed
    // before placing it. The member elected next ships it and places it.
    let d = deployment();
    let l = layout(&d);
    let mut h = hand(&d, "sequencer-finland-1");
    h.start(Vec::new());
    let (index, group) = group_of(&d, h.me());
    let t = txn(&d, 1, vec![inc(l.key(0, 1, 0))]);
    let batch = Arc::new(LocalBatch { origin: 1, seq: 0, items: vec![Entry::SingleHome(t)] });
    let first = Ballot { round: 1, rank: 0 };
    let paxos = |body| Msg::Paxos(PaxosMsg { group: index, body });
    let value = Some(Arc::new(RegionRecord::Batch(Arc::clone(&batch))));
    h.message(group[0], paxos(PaxosBody::Accept { ballot: first, slot: 1, value, commit_upto: 0 }));
    h.persist_all();
    let fx = h.message(group[0], paxos(PaxosBody::Commit { ballot: first, commit_upto: 1 }));
    assert!(outside(std::slice::from_ref(&fx)).is_empty(), "a member that does not lead ships nothing");
    // The leader falls silent: this member runs for election, a member
    // that does not hear the leader either granting its pre-vote.
    let mut pre_vote = None;
    for _ in 0..100 {
        let fx = h.timer(Timer::Paxos(PaxosTimer { group: index }));
        pre_vote = pre_vote.or(fx.sends().find_map(|(_, m)| match m {
            Msg::Paxos(PaxosMsg { body: PaxosBody::PreVote { ballot }, .. }) => Some(*ballot),
            _ => None,
        }));
        if pre_vote.is_some() {
            break;
        }
    }
    let asked = pre_vote.expect("an election after the leader's silence");
    let fx = h.message(group[2], paxos(PaxosBody::PreVoteGranted { ballot: asked, promised: first }));
    h.persist_all();
    let prepare = fx.sends().find_map(|(_, m)| match m {
        Msg::Paxos(PaxosMsg { body: PaxosBody::Prepare { ballot, .. }, .. }) => Some(*ballot),
        _ => None,
    });
    let ballot = prepare.expect("phase 1 at a majority of grants");
    let fx = h.message(group[2], paxos(PaxosBody::Promise { ballot, entries: Vec::new(), snapshot: None }));
    let mut steps = vec![fx, h.persist_all()];
    assert_eq!(steps.iter().map(|fx| fx.counted("sequencer_takeovers")).sum::<u64>(), 1);
    let ships: Vec<NodeId> =
        outside(&steps).into_iter().filter(|(_, m)| matches!(m, Msg::Ship(_))).map(|(to, _)| to).collect();
    assert_eq!(ships, vec![sequencer(&d, 0), sequencer(&d, 2)], "the chosen batch goes out");
    steps.push(h.persist_all());
    let placed: Vec<RegionRecord> = steps.iter().flat_map(proposed).map(|(_, r)| r).collect();
    assert_eq!(placed, vec![RegionRecord::Placed(batch)], "and takes its place in the region's global log");
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
    h.start(vec![Record::Executed { txn: t.id, at: (0, 0), writes, header: None, sent: None, outcome: None }]);
    assert_eq!(replica(&h).store().get(&a), Some(&Value::int(9, 9)), "rebuilt from its records");
    let entries =
        vec![LogEntry { pos: 0, batch: BatchId { region: 0, seq: 0 }, entries: vec![(0, Entry::SingleHome(t))] }];
    let fx = h.message(sequencer(&d, 0), Msg::Log { shard: ShardId(0), entries });
    assert_eq!(fx.counted("replayed"), 1);
    assert_eq!(fx.appends().count(), 0, "not executed twice");
}

/// A participant whose piece reads nothing still sends its (empty) reads,
/// and the others wait for them. If that message is lost and the
/// participant restarts, its records must still let it send them again:
/// restored only when nonempty, they left region 1's participants waiting
/// for each other for good (swarm seed 4821081 on `examples/tpcc.toml`).
#[test]
fn a_restarted_participant_sends_again_the_empty_reads_it_sent_before_it_crashed() {
    let d = deployment();
    let mut h = hand(&d, "shard0-replica0");
    let t = TxnId { node: NodeId(99), seq: 7 };
    h.start(vec![Record::Executed {
        txn: t,
        at: (3, 0),
        writes: Vec::new(),
        header: None,
        sent: Some(((3, 0), Arc::new(vec![]))),
        outcome: None,
    }]);
    let peer = d.topology.node_by_name("shard1-replica0").unwrap();
    let fx = h.message(peer, Msg::ReadsWanted { txn: t, shard: ShardId(1) });
    let resent: Vec<_> = fx.sends().filter(|(to, m)| *to == peer && matches!(m, Msg::Reads { .. })).collect();
    assert_eq!(resent.len(), 1, "the lost reads are sent again");
    assert!(matches!(resent[0].1, Msg::Reads { txn, reads, .. } if *txn == t && reads.is_empty()));
}

#[test]
fn a_late_copy_of_a_submission_below_its_clients_floor_is_dropped_once_the_log_forgot_it() {
    let d = deployment();
    let l = layout(&d);
    let mut h = leader(&d, "sequencer-south-carolina");
    let client = d.topology.clients()[0];
    let here = Program::new(vec![inc(l.key(0, 0, 3))]);
    let submit = |seq: u64, floor: u64| Msg::Submit {
        id: TxnId { node: client, seq },
        program: here.clone(),
        recon: None,
        floor,
    };
    let batched = |h: &mut Hand<Slog>| -> Vec<TxnId> {
        let fx = h.timer(Timer::Batch);
        proposed(&fx)
            .into_iter()
            .filter_map(|(_, r)| match r {
                RegionRecord::Batch(b) => Some(b.items.iter().filter_map(Entry::txn).map(|t| t.id).collect::<Vec<_>>()),
                _ => None,
            })
            .flatten()
            .collect()
    };
    let five = TxnId { node: client, seq: 5 };
    h.message(client, submit(5, 5));
    assert_eq!(batched(&mut h), vec![five]);
    let fx = h.message(client, submit(5, 5));
    assert_eq!(fx.counted("duplicates_dropped"), 1, "a repeat while the log keeps it");
    // The client heard 5's outcome: its next submission says it waits
    // for nothing below 6, and the log forgets 5 once that one is in it.
    h.message(client, submit(6, 6));
    assert_eq!(batched(&mut h), vec![TxnId { node: client, seq: 6 }]);
    let mut sizes = std::collections::BTreeMap::new();
    meridian_core::Process::state_sizes(&h.node, &mut |name, n| {
        sizes.insert(name, n);
    });
    assert_eq!((sizes["inserted"], sizes["annotated"]), (1, 1), "only 6 is kept: {sizes:?}");
    let fx = h.message(client, submit(5, 5));
    assert_eq!(fx.counted("duplicates_dropped"), 1, "a late copy below the floor");
    assert!(batched(&mut h).is_empty(), "it runs no second time");
}

/// A replica that installs another copy's checkpoint makes it durable in
/// place of every earlier record, the earlier checkpoint it installed
/// among them, with the reads that one gave it for transactions before
/// the new checkpoint's `from`: a peer that had not reached them yet asks
/// for them after this replica restarts (as Calvin's swarm seed 4906721
/// of `examples/calvin-truncation.toml` showed).
#[test]
fn a_replica_installing_a_second_checkpoint_keeps_the_reads_the_first_gave_it() {
    let d = deployment();
    let mut h = hand(&d, "shard1-replica0");
    h.start(Vec::new());
    let copy = d.topology.node_by_name("shard1-replica2").unwrap();
    let t = TxnId { node: NodeId(99), seq: 8 };
    let reads = vec![(Key(1), super::messages::Read::Value(Some(Value::int(3, 40))))];
    let first = Checkpoint { next_pos: 5, sent: vec![(t, (2, 0), Arc::new(reads))], ..Checkpoint::default() };
    h.message(copy, Msg::Checkpoint { shard: ShardId(1), checkpoint: Arc::new(first) });
    // Asked for the reads from position 5 on: it carries none before.
    let second = Checkpoint { next_pos: 8, ..Checkpoint::default() };
    let fx = h.message(copy, Msg::Checkpoint { shard: ShardId(1), checkpoint: Arc::new(second) });
    let (_, _, snapshot) = fx.compactions().last().expect("the installed checkpoint replaces the log");
    let mut restarted = hand(&d, "shard1-replica0");
    restarted.start(vec![snapshot.clone()]);
    let peer = d.topology.node_by_name("shard0-replica0").unwrap();
    let fx = restarted.message(peer, Msg::ReadsWanted { txn: t, shard: ShardId(1) });
    let resent = fx.sends().filter(|(to, m)| *to == peer && matches!(m, Msg::Reads { .. })).count();
    assert_eq!(resent, 1, "the reads the first checkpoint gave it survive the second and a restart");
}

/// A replica's own checkpoint carries every read it keeps to send again,
/// not only the newest 1,024: a peer of its region may be further behind,
/// and if it lost the reads in a crash it asks this replica, restarted
/// meanwhile from its checkpoint, in vain.
#[test]
fn a_restarted_replica_sends_again_every_read_it_kept_before_its_checkpoint() {
    const TXNS: u64 = 1_100;
    let d = deployment_with(Params::new().with("checkpoint_txns", meridian_core::ParamValue::Int(TXNS as i64)));
    let l = layout(&d);
    let mut h = hand(&d, "shard1-replica0");
    h.start(Vec::new());
    let peer = d.topology.node_by_name("shard0-replica0").unwrap();
    // Each reads a key of shard 1 (here) and increments one of shard 0,
    // both homed in South Carolina: one position each, in order.
    let (here, there) = (l.key(1, 0, 0), l.key(0, 0, 0));
    let mut txns = Vec::new();
    for pos in 0..TXNS {
        let t = txn(&d, 100 + pos, vec![Op::Read { key: here }, inc(there)]);
        let batch = BatchId { region: 0, seq: pos };
        let entries = vec![LogEntry { pos, batch, entries: vec![(0, Entry::SingleHome(Arc::clone(&t)))] }];
        let fx = h.message(sequencer(&d, 0), Msg::Log { shard: ShardId(1), entries });
        let at = fx
            .sends()
            .find_map(|(to, m)| match m {
                Msg::Reads { at, .. } if to == peer => Some(*at),
                _ => None,
            })
            .expect("its reads go to shard 0's replica of the region");
        let reads = vec![(there, super::messages::Read::Value(None))];
        h.message(peer, Msg::Reads { txn: t.id, at, shard: ShardId(0), reads });
        txns.push(t);
    }
    assert_eq!(replica(&h).running(), 0, "every transaction ran");
    h.persist_all();
    let fx = h.timer(Timer::ReplicaTick);
    assert_eq!(fx.counted("replica_checkpoints"), 1);
    let (_, _, snapshot) = fx.compactions().last().expect("the checkpoint replaces the log");
    let mut restarted = hand(&d, "shard1-replica0");
    restarted.start(vec![snapshot.clone()]);
    for t in [&txns[0], &txns[TXNS as usize - 1]] {
        let fx = restarted.message(peer, Msg::ReadsWanted { txn: t.id, shard: ShardId(1) });
        let resent = fx.sends().filter(|(to, m)| *to == peer && matches!(m, Msg::Reads { txn, .. } if *txn == t.id));
        assert_eq!(resent.count(), 1, "the reads of {:?} are sent again after the restart", t.id);
    }
}

/// A position held while the log was behind may be the very next one of a
/// checkpoint this replica installs: it is applied then, not left due
/// (debug swarm seeds 4945600, 4945617, 4945624 and 4945630 of
/// `examples/slog-truncation.toml` with both kinds of link cut stopped on
/// the invariant; release builds applied it at the next log message).
#[test]
fn a_replica_installing_a_checkpoint_applies_the_held_position_it_resumes_from() {
    let d = deployment();
    let l = layout(&d);
    let mut h = hand(&d, "shard1-replica0");
    h.start(Vec::new());
    let t = txn(&d, 9, vec![inc(l.key(1, 0, 0))]);
    let batch = BatchId { region: 0, seq: 5 };
    let entries = vec![LogEntry { pos: 5, batch, entries: vec![(0, Entry::SingleHome(t))] }];
    h.message(sequencer(&d, 0), Msg::Log { shard: ShardId(1), entries });
    assert_eq!(replica(&h).next_pos(), 0, "ahead of the log: held");
    let checkpoint = Checkpoint { next_pos: 5, applied: [(0, 5)].into_iter().collect(), ..Checkpoint::default() };
    let copy = d.topology.node_by_name("shard1-replica1").unwrap();
    h.message(copy, Msg::Checkpoint { shard: ShardId(1), checkpoint: Arc::new(checkpoint) });
    assert_eq!(replica(&h).next_pos(), 6, "the held position 5 applied on top of the checkpoint");
}

/// A participant keeps the reads it sent until every replica of its
/// region has a durable checkpoint past the transaction's last
/// LockOnlyTxn at any participant, whatever `reads_kept` says (with
/// `reads_kept = 64`, 56 of 60 swarm seeds of `examples/slog-truncation.toml`
/// from 4,934,000 stopped: a peer further behind waited for reads dropped
/// by count). Its own LockOnlyTxn may come long before the peer's.
#[test]
fn a_participant_keeps_its_reads_until_its_region_is_durable_past_the_transactions_last_lock_only_txn() {
    let d = deployment_with(Params::new().with("reads_kept", meridian_core::ParamValue::Int(1)));
    let l = layout(&d);
    let mut h = hand(&d, "shard1-replica0");
    h.start(Vec::new());
    let peer = d.topology.node_by_name("shard0-replica0").unwrap();
    let (here, there) = (l.key(1, 0, 0), l.key(0, 0, 0));
    let from = sequencer(&d, 0);
    // Multi-home: its key here is homed in South Carolina (position 0
    // here), its key at the peer in Finland (position 5 there).
    let multi = txn(&d, 1, vec![inc(here), inc(l.key(0, 1, 0))]);
    let part = Entry::LockOnly { txn: Arc::clone(&multi), home: RegionId(0) };
    let entries = vec![LogEntry { pos: 0, batch: BatchId { region: 0, seq: 0 }, entries: vec![(0, part)] }];
    h.message(from, Msg::Log { shard: ShardId(1), entries });
    let read = |k| vec![(k, super::messages::Read::Value(None))];
    h.message(peer, Msg::Reads { txn: multi.id, at: (5, 0), shard: ShardId(0), reads: read(l.key(0, 1, 0)) });
    // Two more, each at its own position, read here and written there.
    let mut singles = Vec::new();
    for pos in 1..3 {
        let t = txn(&d, 10 + pos, vec![Op::Read { key: here }, inc(there)]);
        let batch = BatchId { region: 0, seq: pos };
        let entries = vec![LogEntry { pos, batch, entries: vec![(0, Entry::SingleHome(Arc::clone(&t)))] }];
        h.message(from, Msg::Log { shard: ShardId(1), entries });
        h.message(peer, Msg::Reads { txn: t.id, at: (pos, 0), shard: ShardId(0), reads: read(there) });
        singles.push(t);
    }
    assert_eq!(replica(&h).running(), 0, "all three ran");
    let ask = |h: &mut Hand<Slog>, txn: TxnId| {
        let fx = h.message(peer, Msg::ReadsWanted { txn, shard: ShardId(1) });
        fx.sends().filter(|(to, m)| *to == peer && matches!(m, Msg::Reads { .. })).map(|(_, m)| m.clone()).collect()
    };
    for t in [&multi, &singles[0], &singles[1]] {
        let resent: Vec<Msg> = ask(&mut h, t.id);
        assert_eq!(resent.len(), 1, "past `reads_kept`, the region still needs {:?}: kept", t.id);
    }
    h.message(from, Msg::RegionDurable { below: 3 });
    let resent: Vec<Msg> = ask(&mut h, multi.id);
    assert!(
        matches!(resent.as_slice(), [Msg::Reads { at: (5, 0), .. }]),
        "placed at 0 here but at 5 at the peer: kept until the region is past 5"
    );
    // The log goes on (a replica is never told of a position it has not
    // reached: the region is durable past no more than it is).
    let empty = (3..7).map(|pos| LogEntry { pos, batch: BatchId { region: 0, seq: pos }, entries: Vec::new() });
    h.message(from, Msg::Log { shard: ShardId(1), entries: empty.collect() });
    h.message(from, Msg::RegionDurable { below: 6 });
    assert!(ask(&mut h, multi.id).is_empty(), "the region is past 5: dropped");
    assert!(ask(&mut h, singles[0].id).is_empty(), "and position 1, beyond `reads_kept`");
    assert_eq!(ask(&mut h, singles[1].id).len(), 1, "the newest `reads_kept` stay");
}

/// A sequencer tells a replica of its region how far every replica of the
/// region is durable, once per advance.
#[test]
fn a_sequencer_tells_a_replica_once_how_far_every_replica_of_its_region_is_durable() {
    let d = deployment();
    let from = sequencer(&d, 0);
    let mut h = hand(&d, d.topology.name(from));
    h.start(Vec::new());
    let replicas: Vec<(NodeId, ShardId)> = (0..2)
        .flat_map(|s| d.topology.replicas_in(ShardId(s), RegionId(0)).into_iter().map(move |r| (r, ShardId(s))))
        .collect();
    let told = |fx: &EffectsOf<Slog>| {
        fx.sends().filter_map(|(_, m)| if let Msg::RegionDurable { below } = m { Some(*below) } else { None }).collect()
    };
    let mut last = Vec::new();
    for (i, (r, shard)) in replicas.iter().enumerate() {
        let fx = h.message(*r, Msg::FetchLog { shard: *shard, from: 0, durable: 4 + i as u64 });
        last = told(&fx);
        assert!(i + 1 == replicas.len() || last.is_empty(), "not before every replica reported");
    }
    assert_eq!(last, vec![4], "once every replica reported: the least of their positions");
    let fetch = |h: &mut Hand<Slog>| h.message(replicas[0].0, Msg::FetchLog { shard: ShardId(0), from: 0, durable: 4 });
    assert_eq!(told(&fetch(&mut h)), vec![4], "the first replica at its next fetch");
    assert!(told(&fetch(&mut h)).is_empty(), "then not again");
}
