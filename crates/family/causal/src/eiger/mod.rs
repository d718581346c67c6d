//! What Eiger-NOC2 shares with Eiger-PORT (NOC-NOC §6.3: "the
//! partition-side procedures for transactional writes ... are largely
//! shared by both algorithms", Appendix E): the partition side of Eiger's
//! always-commit two-phase commit ("Stronger Semantics for Low-Latency
//! Geo-Replicated Storage"), Lamport stamps, the partition's durability,
//! and the messages.
//!
//! Roles: `partition.rs` (a shard's primary: versions, `pending`, the
//! Lamport clock, PREPARE, WRITE_COORD, WRITE_COHORT, COMMIT, GET, the
//! termination of transactions whose commit does not come), `pending.rs`
//! (its pending transactions and the coordinator's votes), `stamps.rs`
//! (its Lamport stamps), `recovery.rs` (its durable records and
//! checkpoints), `client.rs` (PUT_ALL, GET_ALL), `messages.rs`. Versions,
//! the latest safe time, remembered outcomes, checkpoints, client ids and
//! the client's dual view are `meridian_readatomic`'s (RAMP's, RA-NOC2's).
//!
//! Partitions are the shards' primaries (`Topology::initial_leader`); the
//! other replicas are their backups, as for RAMP and RA-NOC2
//! (`meridian_readatomic::common::backup`).
//!
//! What the two protocols do differently is a [`Flavor`] of the same
//! roles: Eiger-PORT's coordinator answers the client with the commit
//! stamp (`Msg::Committed`), its prepares carry the client's snapshot
//! (`Msg::PrepareAt`), kept with each version with its writer, and its
//! GETs follow PORT's read rule (`Partition::port_read`).

pub mod client;
pub mod messages;
pub mod partition;
pub mod pending;
mod recovery;
pub mod stamps;

pub use client::Client;
pub use messages::{Get, KeyRead, Msg, Own, Prepare, Record, Timer};
pub use partition::{Answer, Partition, Promotion};

use meridian_core::{CounterDoc, Deployment, NodeId, ParamDoc, ParamReader, Params, Role, ShardId, Topology};
use meridian_readatomic::ramp::{Backup, Common, Ts, with_shared};
use std::sync::Arc;

/// Which of the two Eiger protocols a node runs: they share the
/// partitions' two-phase commit and differ in what a client waits for and
/// in the read rule at the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Eiger-NOC2 (NOC-NOC Algorithms 2, 5, 6): the client mimics the
    /// commit stamp and returns after one phase; a GET returns the newest
    /// committed version within the GSV, or the client's own newer write.
    Noc2,
    /// Eiger-PORT ("Performance-Optimal Read-Only Transactions", NOC-NOC
    /// §6.1): the coordinator answers the client with the commit stamp
    /// (two phases); each version keeps its writer and the snapshot the
    /// writer read at, where the writer's own reads order it
    /// (`partition.rs` `port_read`).
    Port,
}

/// The knobs of the Eiger protocols (documented in [`NOC2_PARAMS`] and
/// [`PORT_PARAMS`]).
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub flavor: Flavor,
    pub common: Common,
    pub outcomes_remembered: usize,
    pub lsv_max: usize,
    /// Eiger-NOC2, tests only: reads beyond the GSV.
    pub read_beyond_gsv: bool,
    /// Eiger-PORT, tests only: a client's own write beyond its snapshot is
    /// not promoted.
    pub skip_own_promotion: bool,
}

/// The parameters both Eiger protocols read: the shared ones (with their
/// own `ctp_ms`, for their own termination), then `extra` (each one's
/// test-only switch).
const fn eiger_params(extra: ParamDoc) -> [ParamDoc; 20] {
    with_shared(&[
        ParamDoc {
            name: "ctp_ms",
            default: "1000",
            doc: "a transaction prepared and not committed this long is asked about: a cohort asks its coordinator, a coordinator its silent cohorts",
        },
        ParamDoc {
            name: "outcomes_remembered",
            default: "65536",
            doc: "commits (with their stamps) and refusals a partition remembers for repeated prepares and late votes",
        },
        ParamDoc {
            name: "lsv_max",
            default: "100000",
            doc: "own writes a client keeps in its local safe view; beyond, further writes are refused until some go",
        },
        extra,
    ])
}

const READ_BEYOND_GSV: ParamDoc = ParamDoc {
    name: "test_read_beyond_gsv",
    default: "false",
    doc: "tests only: read the newest committed versions, beyond the global safe view, to show the checker catching what the view prevents",
};

const SKIP_OWN_PROMOTION: ParamDoc = ParamDoc {
    name: "test_skip_own_promotion",
    default: "false",
    doc: "tests only: a client's own write beyond its snapshot is not returned to it, to show the checker catching the missing own write",
};

/// Eiger-NOC2's parameters.
pub const NOC2_PARAMS: &[ParamDoc] = &eiger_params(READ_BEYOND_GSV);

/// Eiger-PORT's parameters.
pub const PORT_PARAMS: &[ParamDoc] = &eiger_params(SKIP_OWN_PROMOTION);

impl Flavor {
    /// Every counter the flavor reports.
    pub fn counters(self) -> Vec<CounterDoc> {
        let own: &[CounterDoc] = match self {
            Flavor::Noc2 => &[],
            Flavor::Port => PORT_COUNTERS,
        };
        COUNTERS.iter().chain(own).chain(&meridian_readatomic::common::backup::COUNTERS).copied().collect()
    }

    pub const fn params(self) -> &'static [ParamDoc] {
        match self {
            Flavor::Noc2 => NOC2_PARAMS,
            Flavor::Port => PORT_PARAMS,
        }
    }
}

impl Config {
    pub fn from_params(params: &Params, name: &str, flavor: Flavor) -> Result<Config, String> {
        let p = ParamReader::new(params, name, flavor.params())?;
        let count = |n: &str| p.count(n, 1..=1_000_000_000);
        Ok(Config {
            flavor,
            common: Common::read(&p, name)?,
            outcomes_remembered: count("outcomes_remembered")? as usize,
            lsv_max: count("lsv_max")? as usize,
            read_beyond_gsv: flavor == Flavor::Noc2 && p.bool(READ_BEYOND_GSV.name)?,
            skip_own_promotion: flavor == Flavor::Port && p.bool(SKIP_OWN_PROMOTION.name)?,
        })
    }
}

/// Every counter the Eiger protocols report.
pub const COUNTERS: &[CounterDoc] = &[
    CounterDoc { name: "reads", doc: "read-only transactions completed (GET_ALL)" },
    CounterDoc { name: "read_rounds", doc: "rounds of GETs those reads took, all told (one each, restarts apart)" },
    CounterDoc { name: "keys_read_from_lsv", doc: "keys read at the client's own write, beyond its GSV" },
    CounterDoc { name: "read_restarts", doc: "reads sent again because a version they needed was collected" },
    CounterDoc { name: "read_resends", doc: "rounds sent again to partitions silent for `retry_ms`" },
    CounterDoc { name: "reads_given_up", doc: "reads aborted after `max_attempts` sends or restarts" },
    CounterDoc { name: "writes", doc: "write-only transactions completed (PUT_ALL)" },
    CounterDoc {
        name: "write_phases_on_client_path",
        doc: "phases those writes waited for before returning, all told (one per write for Eiger-NOC2, two for Eiger-PORT)",
    },
    CounterDoc { name: "write_resends", doc: "PREPAREs sent again to partitions silent for `retry_ms`" },
    CounterDoc { name: "writes_refused", doc: "writes a participant refused (terminated before it prepared them)" },
    CounterDoc { name: "writes_rejected", doc: "writes refused by a client whose local safe view is full" },
    CounterDoc { name: "unknown_outcomes", doc: "writes whose prepares went unanswered `max_attempts` times" },
    CounterDoc { name: "view_refreshes", doc: "safe-time requests (`Sync`) clients sent" },
    CounterDoc { name: "commits", doc: "transactions coordinators committed (asynchronously)" },
    CounterDoc { name: "prepares_refused", doc: "prepares of transactions a partition had aborted" },
    CounterDoc {
        name: "ctp_runs",
        doc: "late votes and vote requests partitions sent for transactions pending `ctp_ms`",
    },
    CounterDoc { name: "ctp_aborts", doc: "transactions aborted because a participant never prepared them" },
    CounterDoc { name: "ctp_forgotten", doc: "questions about a transaction decided too long ago to remember" },
    CounterDoc { name: "gc_versions", doc: "overwritten versions partitions collected" },
    CounterDoc { name: "gone_answers", doc: "GETs partitions answered with `Gone` (a version needed was collected)" },
    CounterDoc { name: "prepares_shed", doc: "prepares a partition ignored, holding `pending_max` transactions" },
    CounterDoc { name: "checkpoints", doc: "checkpoints partitions took" },
];

/// Eiger-PORT's own counters, besides [`COUNTERS`].
pub const PORT_COUNTERS: &[CounterDoc] = &[
    CounterDoc {
        name: "promoted_reads",
        doc: "keys answered with the reader's own write beyond its snapshot, promoted before it",
    },
    CounterDoc {
        name: "own_writes_passed_over",
        doc: "keys answered with another client's version below the reader's own newer write, which its promotion put before that version (Figure 8b)",
    },
];

/// Declares an Eiger protocol — its type, `PARAMS`, its
/// `roles!` node and its `Protocol` impl — whose nodes are this module's
/// (partitions, backups, clients) running `$flavor`.
#[macro_export]
macro_rules! eiger_protocol {
    ($(#[$meta:meta])* $ty:ident, $name:literal, $consistency:expr, $flavor:expr) => {
        pub const PARAMS: &[meridian_core::ParamDoc] = $flavor.params();


        $(#[$meta])*
        pub struct $ty;

        meridian_readatomic::replicated!($ty => $crate::eiger::Msg, $crate::eiger::Record);

        meridian_core::roles! {
            #[doc = concat!("A node of an `", $name, "` deployment.")]
            pub enum Node for $ty {
                Partition($crate::eiger::Partition),
                Backup(meridian_readatomic::ramp::Backup),
                Client($crate::eiger::Client),
            }
        }

        impl meridian_core::Protocol for $ty {
            const NAME: &'static str = $name;
            const CONSISTENCY: meridian_core::Consistency = $consistency;
            const SHAPES: meridian_core::Shapes = meridian_core::Shapes::READ_ONLY_WRITE_ONLY;
            const CHARGES_KEYS: bool = true;
            type Msg = $crate::eiger::Msg;
            type Record = $crate::eiger::Record;
            type Timer = $crate::eiger::Timer;
            type Node = Node;

            fn params() -> &'static [meridian_core::ParamDoc] {
                PARAMS
            }

            fn counters() -> Vec<meridian_core::CounterDoc> {
                $flavor.counters()
            }

            fn build(d: &meridian_core::Deployment, node: meridian_core::NodeId) -> Result<Node, String> {
                use $crate::eiger::Built;
                Ok(match $crate::eiger::build(d, node, $name, $flavor)? {
                    Built::Partition(p) => Node::Partition(p),
                    Built::Backup(b) => Node::Backup(b),
                    Built::Client(c) => Node::Client(c),
                })
            }
        }
    };
}

/// What a node of an Eiger deployment runs; each protocol puts it in its
/// own `roles!` node.
pub enum Built {
    Partition(Box<Partition>),
    Backup(Box<Backup>),
    Client(Box<Client>),
}

/// Builds `node` of an Eiger deployment of protocol `name`.
pub fn build(d: &Deployment, node: NodeId, name: &str, flavor: Flavor) -> Result<Built, String> {
    let cfg = Config::from_params(&d.params, name, flavor)?;
    let topo = &d.topology;
    match &topo.node(node).role {
        Role::Replica { shard, .. } if partition_of(topo, *shard) == node => {
            Ok(Built::Partition(Box::new(Partition::new(Arc::clone(topo), *shard, cfg))))
        }
        Role::Replica { .. } => Ok(Built::Backup(Box::new(Backup::new(&cfg.common.replication)))),
        Role::Client { .. } if topo.clients().len() > 1 << Ts::CLIENT_BITS => {
            Err(format!("{name} tells clients apart in its transaction ids: at most {} clients", 1 << Ts::CLIENT_BITS))
        }
        Role::Client { .. } => {
            let index = topo.clients().iter().position(|c| *c == node).expect("a client is listed");
            Ok(Built::Client(Box::new(Client::new(Arc::clone(topo), index as u32, cfg))))
        }
        Role::Service { kind, .. } => Err(format!("{name} has no `{kind}` service")),
    }
}

/// The partition (primary) of `shard`.
pub fn partition_of(topology: &Topology, shard: ShardId) -> NodeId {
    topology.initial_leader(shard)
}
