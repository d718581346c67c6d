//! Asynchronous primary-backup replication of committed versions: a
//! shard's primary ships every version it commits to the shard's backups
//! in numbered batches, off the clients' path, and a backup keeps each
//! key's newest committed version. NOC-NOC ("Towards Performance-optimal
//! Distributed Transactions") §5.2 and §7.1 replicate each partition this
//! way to a second datacenter, after Eiger-PORT's deployment; reads and
//! writes are served by the primaries.
//!
//! A backup's state is a max-merge of what it is sent (per key, the
//! highest version wins), so batches may arrive late, twice or out of
//! order without harm; the numbering only lets the primary see which
//! batches a backup made durable. Anything a backup may have missed — its
//! primary restarted and forgot the batches in flight, or the backup fell
//! more than `max_unacked_items` behind — is repaired by a resync: the
//! primary sends its whole committed state again, in batches paced by the
//! acknowledgements (at most half of `max_unacked_items` of them in
//! flight), so a state larger than the bound is resynced once, not again
//! at every tick, and the batches in flight stay bounded.
//!
//! `Shipper` is the primary's side, `Mirror` the backup's; the protocol
//! carries [`Ship`] messages and [`BackupRecord`]s in its own enums.

use meridian_core::{Key, NodeId, Value};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// A committed version: `key` at `version` (the protocol's version order:
/// a higher one is newer).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub key: Key,
    pub version: u64,
    pub value: Value,
}

/// A batch's name: the primary's incarnation (`epoch`) and its number.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BatchId {
    pub epoch: u64,
    pub seq: u64,
}

/// The messages between a primary and its backups.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Ship {
    /// Primary → backup: committed versions.
    Batch { id: BatchId, items: Arc<[Item]> },
    /// Backup → primary: the batch is durable at the backup.
    Ack { id: BatchId },
    /// Primary → backup: "answer if you are up" (before a resync).
    Probe,
    /// Backup → primary: the answer to a probe.
    Here,
}

/// A backup's durable records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BackupRecord {
    /// Versions applied.
    Applied(Arc<[Item]>),
    /// Every version held, sorted by key: the records before it folded in.
    State(Arc<[Item]>),
}

/// The primary's bounds and pace.
#[derive(Copy, Clone, Debug)]
pub struct ShipConfig {
    /// Versions per batch.
    pub max_batch_items: usize,
    /// A batch unacknowledged for this long is sent again.
    pub resend_ns: u64,
    /// Batches sent again per backup and tick.
    pub max_resends: usize,
    /// Versions a backup may leave unacknowledged before it is resynced.
    pub max_unacked_items: usize,
}

#[derive(Debug, PartialEq, Eq)]
enum Link {
    /// Every version committed since the last resync is in a batch it
    /// acknowledged or in `unacked`.
    Live,
    /// It may have missed versions: it is probed, and resynced when it
    /// answers.
    Behind,
}

#[derive(Debug)]
struct BackupLink {
    node: NodeId,
    link: Link,
    /// Sent, not acknowledged: the batch and when it was last sent.
    unacked: BTreeMap<u64, (Arc<[Item]>, u64)>,
    unacked_items: usize,
    /// The rest of a resync, not sent yet: the state taken when the backup
    /// answered, in batches (at most one state's worth: a new resync
    /// replaces it).
    resync: VecDeque<Arc<[Item]>>,
}

impl BackupLink {
    fn unack(&mut self, seq: u64) {
        if let Some((items, _)) = self.unacked.remove(&seq) {
            self.unacked_items -= items.len();
        }
    }

    /// Too far behind, or forgotten: probe it and resync it from scratch.
    fn fall_behind(&mut self) {
        self.link = Link::Behind;
        self.unacked.clear();
        self.unacked_items = 0;
        self.resync.clear();
    }
}

/// The primary's side: versions committed since the last batch, and per
/// backup the batches it has not acknowledged.
#[derive(Debug)]
pub struct Shipper {
    cfg: ShipConfig,
    epoch: u64,
    next_seq: u64,
    /// Committed, not yet in a batch.
    open: Vec<Item>,
    backups: Vec<BackupLink>,
}

impl Shipper {
    /// A primary (re)started at incarnation `epoch` shipping to `backups`.
    /// Each starts `Behind`: batches in flight before a restart are
    /// forgotten, so each backup is resynced once it answers.
    pub fn new(cfg: ShipConfig, epoch: u64, backups: Vec<NodeId>) -> Shipper {
        assert!(cfg.max_batch_items > 0 && cfg.max_unacked_items > 0, "bounds are positive");
        let backups = backups
            .into_iter()
            .map(|node| BackupLink {
                node,
                link: Link::Behind,
                unacked: BTreeMap::new(),
                unacked_items: 0,
                resync: VecDeque::new(),
            })
            .collect();
        Shipper { cfg, epoch, next_seq: 0, open: Vec::new(), backups }
    }

    /// Whether there is anyone to ship to (a shard with one replica has
    /// nothing to do).
    pub fn active(&self) -> bool {
        !self.backups.is_empty()
    }

    /// A version committed here (durably, or before a durable append the
    /// batch will be sent after).
    pub fn committed(&mut self, item: Item) {
        if self.active() {
            self.open.push(item);
        }
    }

    /// The tick: the versions committed since the last one, in batches to
    /// every live backup; unacknowledged batches again; probes to backups
    /// behind. Messages to send, in order.
    pub fn tick(&mut self, now_ns: u64) -> Vec<(NodeId, Ship)> {
        let mut out = Vec::new();
        let open = std::mem::take(&mut self.open);
        for chunk in open.chunks(self.cfg.max_batch_items) {
            let items: Arc<[Item]> = Arc::from(chunk);
            let seq = self.next_seq;
            self.next_seq += 1;
            for b in &mut self.backups {
                if b.link == Link::Live {
                    send(&mut out, b, BatchId { epoch: self.epoch, seq }, &items, now_ns);
                }
            }
        }
        for b in &mut self.backups {
            if b.link == Link::Live && b.unacked_items > self.cfg.max_unacked_items {
                // Too far behind to keep what it lacks: resync it later.
                b.fall_behind();
            }
            match b.link {
                Link::Behind => out.push((b.node, Ship::Probe)),
                Link::Live => {
                    let due: Vec<u64> = b
                        .unacked
                        .iter()
                        .filter(|(_, (_, sent))| now_ns.saturating_sub(*sent) >= self.cfg.resend_ns)
                        .map(|(seq, _)| *seq)
                        .take(self.cfg.max_resends)
                        .collect();
                    for seq in due {
                        let entry = b.unacked.get_mut(&seq).expect("listed");
                        entry.1 = now_ns;
                        let id = BatchId { epoch: self.epoch, seq };
                        out.push((b.node, Ship::Batch { id, items: Arc::clone(&entry.0) }));
                    }
                    self.next_seq = pace_resync(&mut out, b, &self.cfg, self.epoch, self.next_seq, now_ns);
                }
            }
        }
        out
    }

    /// A backup's message. A backup behind that answers is resynced:
    /// `state` (called only then) gives every committed version, and the
    /// batches of it are returned to send.
    pub fn on_message(
        &mut self,
        from: NodeId,
        msg: Ship,
        now_ns: u64,
        state: impl FnOnce() -> Vec<Item>,
    ) -> Vec<(NodeId, Ship)> {
        let mut out = Vec::new();
        let Some(b) = self.backups.iter_mut().find(|b| b.node == from) else { return out };
        match msg {
            Ship::Ack { id } if id.epoch == self.epoch => {
                b.unack(id.seq);
                self.next_seq = pace_resync(&mut out, b, &self.cfg, self.epoch, self.next_seq, now_ns);
            }
            Ship::Here if b.link == Link::Behind => {
                b.link = Link::Live;
                b.resync = state().chunks(self.cfg.max_batch_items).map(Arc::from).collect();
                self.next_seq = pace_resync(&mut out, b, &self.cfg, self.epoch, self.next_seq, now_ns);
            }
            _ => {}
        }
        out
    }

    /// Batches of a resync of `backup` not sent yet (tests).
    pub fn resync_pending(&self, backup: NodeId) -> usize {
        self.backups.iter().find(|b| b.node == backup).map_or(0, |b| b.resync.len())
    }

    /// Versions sent to `backup` and not acknowledged (tests, reports).
    pub fn unacked_items(&self, backup: NodeId) -> usize {
        self.backups.iter().find(|b| b.node == backup).map_or(0, |b| b.unacked_items)
    }

    pub fn check_invariants(&self) {
        for b in &self.backups {
            let n: usize = b.unacked.values().map(|(items, _)| items.len()).sum();
            assert_eq!(n, b.unacked_items, "unacked count of {:?}", b.node);
            assert!(b.link == Link::Live || b.unacked.is_empty(), "a backup behind holds nothing unacked");
            assert!(b.link == Link::Live || b.resync.is_empty(), "a backup behind has no resync under way");
        }
    }
}

/// Sends the next batches of `b`'s resync while fewer than half of
/// `max_unacked_items` are in flight (one batch at least when none is, so a
/// bound below a batch still makes progress); the other half is left to
/// the commits shipped meanwhile. Returns the next sequence number.
fn pace_resync(
    out: &mut Vec<(NodeId, Ship)>,
    b: &mut BackupLink,
    cfg: &ShipConfig,
    epoch: u64,
    mut next_seq: u64,
    now_ns: u64,
) -> u64 {
    while let Some(items) = b.resync.front() {
        if !b.unacked.is_empty() && b.unacked_items + items.len() > cfg.max_unacked_items / 2 {
            break;
        }
        let items = b.resync.pop_front().expect("a front");
        send(out, b, BatchId { epoch, seq: next_seq }, &items, now_ns);
        next_seq += 1;
    }
    next_seq
}

fn send(out: &mut Vec<(NodeId, Ship)>, b: &mut BackupLink, id: BatchId, items: &Arc<[Item]>, now_ns: u64) {
    b.unacked.insert(id.seq, (Arc::clone(items), now_ns));
    b.unacked_items += items.len();
    out.push((b.node, Ship::Batch { id, items: Arc::clone(items) }));
}

/// The backup's side: each key's newest committed version, the records
/// since its last checkpoint, and the acknowledgements waiting for their
/// batch to be durable.
#[derive(Debug, Default)]
pub struct Mirror {
    latest: BTreeMap<Key, (u64, Value)>,
    records_since_checkpoint: usize,
    /// Acknowledgements held until the append at the LSN (`u64`) is
    /// durable.
    held: VecDeque<(u64, NodeId, BatchId)>,
}

/// What a backup does with a batch: append the versions it newly holds
/// (if any) and acknowledge once that append is durable.
#[derive(Debug, PartialEq, Eq)]
pub enum Apply {
    /// Append this record; acknowledge after it (`Mirror::appended`).
    Append(BackupRecord),
    /// Nothing new: acknowledge now (what it holds is durable already —
    /// unless an earlier append is still in flight, see `Mirror::appended`).
    Nothing,
}

impl Mirror {
    pub fn new() -> Mirror {
        Mirror::default()
    }

    /// Restart: the durable records in order.
    pub fn restore<'a>(&mut self, records: impl IntoIterator<Item = &'a BackupRecord>) {
        for r in records {
            match r {
                BackupRecord::State(items) => {
                    self.latest.clear();
                    self.merge(items);
                }
                BackupRecord::Applied(items) => {
                    self.merge(items);
                }
            }
        }
    }

    /// Max-merges `items`; the ones that were news.
    fn merge(&mut self, items: &[Item]) -> Vec<Item> {
        let mut news = Vec::new();
        for item in items {
            let newer = self.latest.get(&item.key).is_none_or(|(v, _)| item.version > *v);
            if newer {
                self.latest.insert(item.key, (item.version, item.value.clone()));
                news.push(item.clone());
            }
        }
        news
    }

    /// A batch from the primary: what to append.
    pub fn on_batch(&mut self, items: &[Item]) -> Apply {
        let news = self.merge(items);
        if news.is_empty() {
            return Apply::Nothing;
        }
        self.records_since_checkpoint += 1;
        Apply::Append(BackupRecord::Applied(Arc::from(news)))
    }

    /// The append of a batch's versions (or the last append before a batch
    /// that brought nothing) is at `lsn`: its acknowledgement waits for it.
    pub fn hold_ack(&mut self, lsn: u64, to: NodeId, id: BatchId) {
        debug_assert!(self.held.back().is_none_or(|(at, _, _)| *at <= lsn), "appends are in LSN order");
        self.held.push_back((lsn, to, id));
    }

    /// Everything up to `lsn` is durable: the acknowledgements to send.
    pub fn persisted(&mut self, lsn: u64) -> Vec<(NodeId, Ship)> {
        let mut out = Vec::new();
        while self.held.front().is_some_and(|(at, _, _)| *at <= lsn) {
            let (_, to, id) = self.held.pop_front().expect("checked");
            out.push((to, Ship::Ack { id }));
        }
        out
    }

    /// A checkpoint when `every` records were appended since the last (or
    /// a 64th of the keys held, so that checkpointing costs the same per
    /// record however large the state): the whole state, sorted by key.
    pub fn checkpoint_due(&mut self, every: usize) -> Option<BackupRecord> {
        if self.records_since_checkpoint < every.max(self.latest.len() / 64).max(1) {
            return None;
        }
        self.records_since_checkpoint = 0;
        Some(BackupRecord::State(self.state().into()))
    }

    /// Every version held, sorted by key.
    pub fn state(&self) -> Vec<Item> {
        self.latest.iter().map(|(k, (v, value))| Item { key: *k, version: *v, value: value.clone() }).collect()
    }

    /// The version held of `key`.
    pub fn version_of(&self, key: Key) -> Option<u64> {
        self.latest.get(&key).map(|(v, _)| *v)
    }

    pub fn keys(&self) -> usize {
        self.latest.len()
    }

    pub fn held_acks(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::Rng;

    const P: NodeId = NodeId(0);
    const B: NodeId = NodeId(1);

    fn cfg() -> ShipConfig {
        ShipConfig { max_batch_items: 4, resend_ns: 10, max_resends: 8, max_unacked_items: 64 }
    }

    fn item(key: u64, version: u64) -> Item {
        Item { key: Key(key), version, value: Value::int(version, key as i64) }
    }

    /// A primary and a backup over a network that loses, duplicates and
    /// reorders messages; the backup's appends are durable at once.
    struct World {
        shipper: Shipper,
        mirror: Mirror,
        primary_state: BTreeMap<Key, u64>,
        net: Vec<(NodeId, Ship)>,
        rng: Rng,
        now: u64,
        lsn: u64,
    }

    impl World {
        fn new(seed: u64) -> World {
            World {
                shipper: Shipper::new(cfg(), 1, vec![B]),
                mirror: Mirror::new(),
                primary_state: BTreeMap::new(),
                net: Vec::new(),
                rng: Rng::new(seed),
                now: 0,
                lsn: 0,
            }
        }

        fn commit(&mut self, key: u64, version: u64) {
            let e = self.primary_state.entry(Key(key)).or_insert(0);
            *e = (*e).max(version);
            self.shipper.committed(item(key, version));
        }

        fn state(primary: &BTreeMap<Key, u64>) -> Vec<Item> {
            primary.iter().map(|(k, v)| item(k.0, *v)).collect()
        }

        /// One step: a tick, then every message in flight delivered with
        /// loss, duplication and reordering at rate `bad`.
        fn step(&mut self, bad: f64) {
            self.now += 5;
            let sent = self.shipper.tick(self.now);
            self.net.extend(sent);
            let mut flight = std::mem::take(&mut self.net);
            self.rng.shuffle(&mut flight);
            for (to, msg) in flight {
                if self.rng.chance(bad) {
                    continue;
                }
                let copies = if self.rng.chance(bad) { 2 } else { 1 };
                for _ in 0..copies {
                    self.deliver(to, msg.clone());
                }
            }
        }

        fn deliver(&mut self, to: NodeId, msg: Ship) {
            if to == B {
                match msg {
                    Ship::Batch { id, items } => {
                        if let Apply::Append(_) = self.mirror.on_batch(&items) {
                            self.lsn += 1;
                        }
                        self.mirror.hold_ack(self.lsn, P, id);
                        let acks = self.mirror.persisted(self.lsn);
                        self.net.extend(acks);
                    }
                    Ship::Probe => self.net.push((P, Ship::Here)),
                    _ => unreachable!("a backup hears batches and probes"),
                }
            } else {
                let state = Self::state(&self.primary_state);
                let out = self.shipper.on_message(B, msg, self.now, || state);
                self.net.extend(out);
            }
            self.shipper.check_invariants();
        }

        fn converged(&self) -> bool {
            self.primary_state.iter().all(|(k, v)| self.mirror.version_of(*k) == Some(*v))
                && self.mirror.keys() == self.primary_state.len()
        }
    }

    #[test]
    fn a_backup_converges_on_every_committed_version_through_loss_duplication_and_reordering() {
        for seed in 0..20 {
            let mut w = World::new(seed);
            for round in 0..50u64 {
                for i in 0..3 {
                    let key = w.rng.below(20);
                    w.commit(key, round * 10 + i + 1);
                }
                w.step(0.3);
            }
            for _ in 0..200 {
                w.step(0.0);
            }
            assert!(w.converged(), "seed {seed}: backup {:?}", w.mirror.state());
            assert_eq!(w.shipper.unacked_items(B), 0, "seed {seed}: everything acknowledged");
        }
    }

    #[test]
    fn an_older_version_arriving_late_never_replaces_a_newer_one() {
        let mut m = Mirror::new();
        assert!(matches!(m.on_batch(&[item(1, 5)]), Apply::Append(_)));
        assert_eq!(m.on_batch(&[item(1, 3)]), Apply::Nothing);
        assert_eq!(m.version_of(Key(1)), Some(5));
    }

    #[test]
    fn a_restarted_primary_resyncs_its_backups_with_its_whole_state() {
        let mut w = World::new(7);
        w.commit(1, 1);
        // Probe, answer, resync batch, acknowledgement.
        for _ in 0..4 {
            w.step(0.0);
        }
        assert!(w.converged());
        // Committed, then the primary restarts before shipping it.
        w.commit(2, 2);
        w.shipper = Shipper::new(cfg(), 2, vec![B]);
        for _ in 0..5 {
            w.step(0.0);
        }
        assert!(w.converged(), "the resync brought key 2: {:?}", w.mirror.state());
    }

    #[test]
    fn a_backup_too_far_behind_is_resynced_instead_of_buffered_without_bound() {
        let mut w = World::new(3);
        w.step(0.0);
        w.step(0.0); // live
        for v in 1..=200 {
            w.commit(v % 50, v);
            w.now += 5;
            let _lost = w.shipper.tick(w.now); // the backup is down
            assert!(w.shipper.unacked_items(B) <= cfg().max_unacked_items + cfg().max_batch_items);
        }
        for _ in 0..10 {
            w.step(0.0);
        }
        assert!(w.converged(), "resynced: {:?}", w.mirror.state());
    }

    /// A state many times the unacknowledged bound is resynced once, its
    /// batches sent as the acknowledgements come back, never more than the
    /// bound in flight; it used to be sent whole, put the backup over the
    /// bound at the next tick and be resynced again at every probe answer.
    #[test]
    fn a_resync_larger_than_the_unacked_bound_is_paced_by_acknowledgements_and_sent_once() {
        let mut w = World::new(11);
        for key in 0..1_000 {
            w.commit(key, key + 1);
        }
        let mut resync_batches = 0;
        for _ in 0..400 {
            w.step(0.0);
            let in_flight: usize = w
                .net
                .iter()
                .map(|(_, m)| match m {
                    Ship::Batch { items, .. } => items.len(),
                    _ => 0,
                })
                .sum();
            resync_batches += w.net.iter().filter(|(_, m)| matches!(m, Ship::Batch { .. })).count();
            assert!(in_flight <= cfg().max_unacked_items, "{in_flight} versions in flight");
        }
        assert!(w.converged(), "resynced: {} of 1000 keys", w.mirror.keys());
        assert_eq!(w.shipper.resync_pending(B), 0);
        // The state once in batches of 4, a tick's commits, and nothing more.
        assert!(resync_batches <= 1_000 / 4 + 1, "{resync_batches} batches for one resync");
    }

    #[test]
    fn a_restarted_backup_keeps_what_it_acknowledged() {
        let mut m = Mirror::new();
        let mut log = Vec::new();
        for v in 1..=10u64 {
            if let Apply::Append(r) = m.on_batch(&[item(v % 4, v)]) {
                log.push(r);
            }
            if let Some(cp) = m.checkpoint_due(3) {
                log.clear();
                log.push(cp);
            }
        }
        let mut restarted = Mirror::new();
        restarted.restore(&log);
        assert_eq!(restarted.state(), m.state());
    }

    #[test]
    fn an_acknowledgement_waits_for_its_append_to_be_durable() {
        let mut m = Mirror::new();
        let id = BatchId { epoch: 1, seq: 0 };
        m.hold_ack(4, P, id);
        assert!(m.persisted(3).is_empty());
        assert_eq!(m.persisted(4).len(), 1);
    }
}
