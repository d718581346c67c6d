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

pub mod client;
pub mod messages;
pub mod partition;
pub mod pending;
mod recovery;
pub mod stamps;

pub use client::Client;
pub use messages::{Get, KeyRead, Msg, Own, Prepare, Record, Timer};
pub use partition::{Answer, Partition};

use meridian_core::{NodeId, ParamDoc, ParamReader, Params, ShardId, Topology};
use meridian_readatomic::ramp::{Common, SHARED_PARAMS};

/// The knobs of the Eiger protocols (documented in [`PARAMS`]).
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub common: Common,
    pub outcomes_remembered: usize,
    pub lsv_max: usize,
    pub read_beyond_gsv: bool,
}

pub const PARAMS: &[ParamDoc] = &[
    SHARED_PARAMS[0],
    SHARED_PARAMS[1],
    SHARED_PARAMS[2],
    SHARED_PARAMS[3],
    SHARED_PARAMS[4],
    SHARED_PARAMS[5],
    SHARED_PARAMS[6],
    SHARED_PARAMS[7],
    ParamDoc {
        name: "ctp_ms",
        default: "1000",
        doc: "a transaction prepared and not committed this long is asked about: a cohort asks its coordinator, a coordinator its silent cohorts",
    },
    SHARED_PARAMS[9],
    SHARED_PARAMS[10],
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
    ParamDoc {
        name: "test_read_beyond_gsv",
        default: "false",
        doc: "tests only: read the newest committed versions, beyond the global safe view, to show the checker catching what the view prevents",
    },
];

impl Config {
    pub fn from_params(params: &Params, name: &str) -> Result<Config, String> {
        let p = ParamReader::new(params, name, PARAMS)?;
        let count = |n: &str| p.count(n, 1..=1_000_000_000);
        Ok(Config {
            common: Common::read(&p, name)?,
            outcomes_remembered: count("outcomes_remembered")? as usize,
            lsv_max: count("lsv_max")? as usize,
            read_beyond_gsv: p.bool("test_read_beyond_gsv")?,
        })
    }
}

/// The partition (primary) of `shard`.
pub fn partition_of(topology: &Topology, shard: ShardId) -> NodeId {
    topology.initial_leader(shard)
}
