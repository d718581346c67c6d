//! Primary-backup replication of a partition to the other replicas of its
//! shard (NOC-NOC "Towards Performance-optimal Distributed Transactions"
//! §5.2 and §7.1: asynchronous, the primaries serve every read and write;
//! the paper's backups sit in a second datacenter). The mechanism is
//! `meridian_mechanisms::primary_backup`; this file connects it to a
//! partition's versions and gives the backup role.
//!
//! The primary ([`Primary`]) ships each version that becomes the newest committed one
//! of its key, in batches every `ship_tick_ms`, each sent once the commit
//! records before it are durable (a backup never holds a version its
//! primary could lose in a crash). A backup applies them (per key, the
//! highest version wins), appends them durably and acknowledges. What a
//! backup may have missed — its primary restarted, or it fell too far
//! behind — is repaired by a resync of the primary's whole committed state.
//! Nothing reads from a backup: taking over from a failed primary is not
//! part of NOC-NOC's deployment and is not done here.

use super::Timer;
use crate::ramp::versions::Versions;
use meridian_core::{
    CounterDoc, Ctx, Env, Key, Lsn, NodeId, ParamDoc, ParamReader, Process, Protocol, ShardId, Topology,
};
use meridian_mechanisms::primary_backup::{Apply, BackupRecord, Mirror, Ship, ShipConfig, Shipper};
use meridian_mechanisms::primary_backup::{BatchId, Item};

/// The replication's knobs (documented in [`PARAMS`]): how often a primary
/// ships, its batches' bounds, and a backup's checkpoints.
#[derive(Copy, Clone, Debug)]
pub struct Replication {
    pub ship_tick_ns: u64,
    pub ship: ShipConfig,
    pub backup_checkpoint_records: usize,
}

impl Replication {
    /// Reads the replication's knobs of protocol `name`.
    pub fn read(p: &ParamReader<'_>, name: &str) -> Result<Replication, String> {
        let count = |n: &str| p.count(n, 1..=1_000_000_000).map(|v| v as usize);
        let positive_ns = |n: &str| -> Result<u64, String> {
            let v = p.ms_ns(n)?;
            if v == 0 { Err(format!("{name}: `{n}` must be positive")) } else { Ok(v) }
        };
        Ok(Replication {
            ship_tick_ns: positive_ns("ship_tick_ms")?,
            ship: ShipConfig {
                max_batch_items: count("ship_batch_max")?,
                resend_ns: positive_ns("ship_resend_ms")?,
                max_resends: count("ship_resends_max")?,
                max_unacked_items: count("ship_unacked_max")?,
            },
            backup_checkpoint_records: count("backup_checkpoint_records")?,
        })
    }
}

/// The replication's knobs, shared by every protocol that replicates this
/// way. The defaults: a batch every 5 ms of up to 1,024 versions, sent
/// again after a second without acknowledgement (two datacenters' round
/// trip and the backup's fsync, many times over), at most 16 again per
/// tick, up to 100,000 versions unacknowledged per backup before it is
/// resynced, and a backup checkpoint every 1,000 records (at least a 64th
/// of the keys it holds).
pub const PARAMS: [ParamDoc; 6] = [
    ParamDoc { name: "ship_tick_ms", default: "5", doc: "how often a primary ships what it committed to its backups" },
    ParamDoc { name: "ship_batch_max", default: "1024", doc: "versions in one batch shipped to a backup" },
    ParamDoc {
        name: "ship_resend_ms",
        default: "1000",
        doc: "a batch a backup has not acknowledged this long is shipped again",
    },
    ParamDoc { name: "ship_resends_max", default: "16", doc: "batches shipped again to one backup per tick" },
    ParamDoc {
        name: "ship_unacked_max",
        default: "100000",
        doc: "versions a backup may leave unacknowledged before its primary resyncs it with its whole state",
    },
    ParamDoc {
        name: "backup_checkpoint_records",
        default: "1000",
        doc: "records a backup appends between checkpoints of its durable log",
    },
];

/// The counters of replication, for every protocol that replicates this way.
pub const COUNTERS: [CounterDoc; 5] = [
    CounterDoc {
        name: "shipped_batches",
        doc: "batches of committed versions primaries sent their backups (resends included)",
    },
    CounterDoc { name: "shipped_versions", doc: "versions in those batches" },
    CounterDoc {
        name: "backup_resyncs",
        doc: "backups sent a primary's whole committed state (after the primary restarted, or the backup fell behind)",
    },
    CounterDoc { name: "backup_appends", doc: "batches that brought a backup newer versions, appended to its log" },
    CounterDoc { name: "backup_checkpoints", doc: "checkpoints of a backup's log" },
];

/// A protocol whose messages and records carry the replication's.
pub trait Replicated: Protocol {
    fn ship(s: Ship) -> Self::Msg;
    fn as_ship(m: Self::Msg) -> Option<Ship>;
    fn backup_record(r: BackupRecord) -> Self::Record;
    fn as_backup_record(r: Self::Record) -> Option<BackupRecord>;
}

/// The replicas of `shard` other than its partition: its backups.
fn backups_of(topo: &Topology, shard: ShardId) -> Vec<NodeId> {
    let primary = super::partition_of(topo, shard);
    topo.replicas(shard).iter().copied().filter(|n| *n != primary).collect()
}

/// A partition's side of the replication: it ships the versions it commits
/// to its shard's backups, if it has any. Every partition (RAMP's, RA-NOC2's,
/// Eiger's) drives it from the same events and sends what it returns once
/// the records before it are durable.
#[derive(Debug, Default)]
pub struct Primary {
    ship: Option<Shipper>,
}

impl Primary {
    /// After a (re)start: a fresh incarnation number (acknowledgements of
    /// batches an earlier incarnation sent are not taken for this one's),
    /// every backup to be resynced, and `versions` feeding it from now on
    /// (not the ones replayed at restart: the resync carries those).
    pub fn start<M, R>(
        &mut self,
        env: &mut (dyn Env<M, R, Timer> + '_),
        topo: &Topology,
        shard: ShardId,
        versions: &mut Versions,
        cfg: &Replication,
    ) {
        let backups = backups_of(topo, shard);
        if backups.is_empty() {
            return; // one replica: nothing to ship, and no draw from the random stream
        }
        let (random, clock_ns) = (env.rng().next_u64(), env.clock_ns());
        versions.ship_commits(true);
        self.ship = Some(Shipper::new(cfg.ship, clock_ns ^ random, backups));
        env.set_timer(cfg.ship_tick_ns, Timer::Ship);
    }

    /// The shipping tick: what was committed since the last one into
    /// batches, and what to send.
    pub fn on_tick<M, R>(
        &mut self,
        env: &mut (dyn Env<M, R, Timer> + '_),
        versions: &mut Versions,
        cfg: &Replication,
        now_ns: u64,
    ) -> Vec<(NodeId, Ship)> {
        env.set_timer(cfg.ship_tick_ns, Timer::Ship);
        let Some(ship) = &mut self.ship else { return Vec::new() };
        for item in versions.take_committed() {
            ship.committed(item);
        }
        let out = ship.tick(now_ns);
        count_shipped(env, &out);
        out
    }

    /// A backup's acknowledgement or answer to a probe: what to send back
    /// (a resync when a backup behind answers a probe).
    pub fn on_message<M, R>(
        &mut self,
        env: &mut (dyn Env<M, R, Timer> + '_),
        versions: &Versions,
        from: NodeId,
        msg: Ship,
        now_ns: u64,
    ) -> Vec<(NodeId, Ship)> {
        let Some(ship) = &mut self.ship else { return Vec::new() };
        let out = ship.on_message(from, msg, now_ns, || versions.committed_state());
        if !out.is_empty() {
            env.count("backup_resyncs", 1);
        }
        count_shipped(env, &out);
        out
    }

    pub fn check_invariants(&self) {
        if let Some(ship) = &self.ship {
            ship.check_invariants();
        }
    }
}

/// Counts what a primary sends its backups.
fn count_shipped<M, R>(env: &mut (dyn Env<M, R, Timer> + '_), out: &[(NodeId, Ship)]) {
    for (_, s) in out {
        if let Ship::Batch { items, .. } = s {
            env.count("shipped_batches", 1);
            env.count("shipped_versions", items.len() as u64);
        }
    }
}

/// A shard's replica other than its partition: it holds each key's newest
/// committed version its primary shipped, durably, and serves nothing.
#[derive(Debug)]
pub struct Backup {
    mirror: Mirror,
    last_appended: Lsn,
    durable: Lsn,
    checkpoint_records: usize,
}

impl Backup {
    /// A backup holding nothing yet, checkpointing every
    /// `backup_checkpoint_records` appends.
    pub fn new(cfg: &Replication) -> Backup {
        Backup {
            mirror: Mirror::default(),
            last_appended: Lsn::default(),
            durable: Lsn::default(),
            checkpoint_records: cfg.backup_checkpoint_records,
        }
    }

    /// The version held of `key` (tests).
    pub fn version_of(&self, key: Key) -> Option<u64> {
        self.mirror.version_of(key)
    }

    /// Keys held.
    pub fn keys(&self) -> usize {
        self.mirror.keys()
    }

    fn on_batch<P: Replicated>(&mut self, ctx: &mut Ctx<'_, P>, from: NodeId, id: BatchId, items: &[Item]) {
        ctx.charge_keys(items.len() as u64);
        if let Apply::Append(record) = self.mirror.on_batch(items) {
            ctx.count("backup_appends", 1);
            self.last_appended = ctx.append(P::backup_record(record));
            if let Some(state) = self.mirror.checkpoint_due(self.checkpoint_records) {
                ctx.compact(self.last_appended, P::backup_record(state));
                ctx.count("backup_checkpoints", 1);
            }
        }
        // Acknowledged once its versions (or, if it brought none, every
        // version this backup holds) are durable.
        self.mirror.hold_ack(self.last_appended.0, from, id);
        self.send_acks::<P>(ctx);
    }

    fn send_acks<P: Replicated>(&mut self, ctx: &mut Ctx<'_, P>) {
        for (to, s) in self.mirror.persisted(self.durable.0) {
            ctx.send(to, P::ship(s));
        }
    }
}

impl<P: Replicated> Process<P> for Backup {
    fn on_start(&mut self, _ctx: &mut Ctx<'_, P>, durable: Vec<P::Record>) {
        let records: Vec<BackupRecord> = durable.into_iter().filter_map(P::as_backup_record).collect();
        self.mirror.restore(&records);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, P>, from: NodeId, msg: P::Msg) {
        match P::as_ship(msg) {
            Some(Ship::Batch { id, items }) => self.on_batch::<P>(ctx, from, id, &items),
            Some(Ship::Probe) => ctx.send(from, P::ship(Ship::Here)),
            // Only a backup's own messages, or another protocol message
            // sent to the primary's address before it became known.
            Some(Ship::Ack { .. } | Ship::Here) | None => {}
        }
    }

    fn on_timer(&mut self, _ctx: &mut Ctx<'_, P>, _timer: P::Timer) {}

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, P>, upto: Lsn) {
        self.durable = self.durable.max(upto);
        self.send_acks::<P>(ctx);
    }

    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("backup_keys", self.mirror.keys());
        out("backup_held_acks", self.mirror.held_acks());
    }

    fn check_invariants(&self) {
        assert!(self.durable <= self.last_appended, "durable past the last append");
    }
}

/// Implements [`Replicated`] for protocol types whose `Msg` and `Record`
/// (paths) carry `Ship(..)` and `Backup(..)` variants.
#[macro_export]
macro_rules! replicated {
    ($($p:ty),+ => $msg:path, $record:path) => {
        const _: () = {
            use $msg as ShipMsg;
            use $record as ShipRecord;
            use meridian_mechanisms::primary_backup::{BackupRecord, Ship};
            $(
            impl $crate::common::backup::Replicated for $p {
                fn ship(s: Ship) -> ShipMsg {
                    ShipMsg::Ship(s)
                }
                fn as_ship(m: ShipMsg) -> Option<Ship> {
                    match m {
                        ShipMsg::Ship(s) => Some(s),
                        _ => None,
                    }
                }
                fn backup_record(r: BackupRecord) -> ShipRecord {
                    ShipRecord::Backup(r)
                }
                fn as_backup_record(r: ShipRecord) -> Option<BackupRecord> {
                    match r {
                        ShipRecord::Backup(b) => Some(b),
                        _ => None,
                    }
                }
            }
            )+
        };
    };
}
