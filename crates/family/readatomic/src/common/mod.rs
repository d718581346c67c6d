//! What the read-atomic protocols' roles share, written once: a client's
//! write phases and the resends of its unanswered rounds and phases
//! (`client.rs`), the one-round reads of the clients that keep a dual view
//! (`reads.rs`, RA-NOC2's and Eiger's), the roles' timers and their start
//! and timer dispatch (`events.rs`), a partition's termination protocol, garbage collection
//! and checkpoint handlers (`partition.rs`), and the building of a
//! deployment's roles (below). `ramp` (RAMP-F, RAMP-S; LORA's partitions
//! too), `ranoc2` (RA-NOC2, RA-NOC) and `lora` (LORA's client) keep only
//! what their papers make differ: what a read asks and returns, what a
//! partition answers with, what ends a write.
//!
//! The core never names a protocol's messages: each protocol's `Msg`
//! builds the few it needs through [`Wire`]. It must never change the
//! order of effects a handler had before it was shared (the protocols'
//! trace hashes stay as they were).

pub mod backup;
pub(crate) mod client;
pub mod events;
pub mod outcomes;
pub(crate) mod partition;
pub mod reads;

pub use events::Timer;

use crate::ramp::Ts;
use crate::ramp::pending::Question;
use meridian_core::{Deployment, Env, NodeId, Role, ShardId, Topology};
use std::sync::Arc;

/// The messages, records and timers of one read-atomic protocol, as the
/// shared core builds them.
pub(crate) trait Wire: Sized {
    /// What a client's PREPARE carries to one partition.
    type Prepare;
    type Record;
    /// Client → partition: PREPARE.
    fn prepare(p: Arc<Self::Prepare>) -> Self;
    /// Client or partition → partition: COMMIT.
    fn commit(ts: Ts) -> Self;
    /// Partition → partition: the termination protocol's question.
    fn check_prepared(q: &Question) -> Self;
    /// A partition committed `ts` (durably).
    fn committed_record(ts: Ts) -> Self::Record;
    /// A partition refused or aborted `ts` for good (durably).
    fn aborted_record(ts: Ts) -> Self::Record;
    /// Primary ↔ backup: replication (`backup`).
    fn ship(s: meridian_mechanisms::primary_backup::Ship) -> Self;
}

/// The environment a role of the protocol whose messages are `M` acts
/// through.
pub(crate) type EnvOf<'a, M> = dyn Env<M, <M as Wire>::Record, Timer> + 'a;

/// The partition (primary) of `shard`: clients talk to it directly.
pub fn partition_of(topology: &Topology, shard: ShardId) -> NodeId {
    topology.initial_leader(shard)
}

/// The role a node plays in a read-atomic deployment.
pub(crate) enum Built<P, C> {
    Partition(P),
    /// A shard's replica that is not its partition: a backup.
    Backup(backup::Backup),
    Client(C),
}

impl<P, C> Built<P, C> {
    /// The protocol's node playing this role: `partition`, `backup` and
    /// `client` are its `roles!` enum's variants.
    pub(crate) fn into_node<N>(
        self,
        partition: impl FnOnce(Box<P>) -> N,
        backup: impl FnOnce(Box<backup::Backup>) -> N,
        client: impl FnOnce(Box<C>) -> N,
    ) -> N {
        match self {
            Built::Partition(p) => partition(Box::new(p)),
            Built::Backup(b) => backup(Box::new(b)),
            Built::Client(c) => client(Box::new(c)),
        }
    }
}

/// The role of `node` in protocol `name`: its shard's partition, a backup
/// replicating with `replication`, or a client with its index (clients are told apart in
/// timestamps, so there are at most `1 << Ts::CLIENT_BITS`).
pub(crate) fn build_role<P, C>(
    d: &Deployment,
    node: NodeId,
    name: &str,
    replication: &backup::Replication,
    partition: impl FnOnce(Arc<Topology>, ShardId) -> P,
    client: impl FnOnce(Arc<Topology>, u32) -> C,
) -> Result<Built<P, C>, String> {
    let topo = &d.topology;
    match &topo.node(node).role {
        Role::Replica { shard, .. } if partition_of(topo, *shard) == node => {
            Ok(Built::Partition(partition(Arc::clone(topo), *shard)))
        }
        Role::Replica { .. } => Ok(Built::Backup(backup::Backup::new(replication))),
        Role::Client { .. } if topo.clients().len() > 1 << Ts::CLIENT_BITS => {
            Err(format!("{name} tells clients apart in its timestamps: at most {} clients", 1 << Ts::CLIENT_BITS))
        }
        Role::Client { .. } => {
            let index = topo.clients().iter().position(|c| *c == node).expect("a client is listed");
            Ok(Built::Client(client(Arc::clone(topo), index as u32)))
        }
        Role::Service { kind, .. } => Err(format!("{name} has no `{kind}` service")),
    }
}
