//! `ra-noc2`: read atomicity with read-your-writes in one round per read
//! and one phase per write — NOC-NOC, "Towards Performance-optimal
//! Distributed Transactions", §4 and Algorithm 1.
//!
//! Partitions keep multiple versions per key and answer every request
//! with their latest safe time (LST): below it, every version they hold
//! is committed. A client keeps the latest LST of each partition (its
//! version vector `last`); a read's global safe view (GSV) is the smallest
//! among the partitions it reads, and the client's own writes, once fully
//! prepared, form its local safe view (LSV). A GET carries the two views
//! (two timestamps per key read, C_R) and the partition returns, without
//! waiting (N_R), the newest committed version between them, or the
//! client's own version at its LSV (Figure 5): one round, always (O_R).
//! A write returns after its prepare phase (O_W) and commits in the
//! background; its requests and answers carry one timestamp each besides
//! the participants (C_W).
//!
//! Roles: `partition.rs` (a shard's primary: versions, `latest`,
//! `pending`, PREPARE, COMMIT, GET, the cooperative termination protocol),
//! `safe.rs` (its latest safe time), `common/outcomes.rs` (what it decided about
//! transactions no longer pending), `recovery.rs` (its durable records and
//! checkpoints), `client.rs` (PREPARE_ALL, COMMIT_ALL, GET_ALL), `view.rs`
//! (the client's dual view), `messages.rs`. Versions, pending transactions
//! and their termination, checkpoints and client timestamps are RAMP's
//! (`crate::ramp`), shared.
//!
//! Partitions are the shards' primaries (`Topology::initial_leader`); the
//! other replicas are their `Backup`s, as for RAMP (NOC-NOC §5.2's
//! primary-backup replication, `crate::common::backup`).
//!
//! # Front ends and shared views
//!
//! The paper's clients are front ends that run many sessions and share one
//! view (§5.2, §5.3). A Meridian client node is such a front end: all the
//! sessions it runs share its `last` and its LSV (read-your-writes holds
//! per session, and reading another session's fully prepared write of the
//! same front end is read atomic). Sharing one view among the client
//! nodes of a region is not done: they are separate processes, each with
//! its own state, and nothing in Meridian's client model lets them share
//! an object; exchanging views by message would be an extra, off-path
//! protocol the paper does not describe.
//!
//! # Beyond the pseudocode
//!
//! - A partition's LST is just below its oldest pending transaction
//!   (line 48 says `min(pending)`), never goes back, is told only once the
//!   records that raised it are durable, and a prepare at or below it is
//!   refused: client timestamps are not ordered with other clients'
//!   prepares (`safe.rs`). A refused write is written again above the LST
//!   the refusal carried (`write_retries`); clients issue timestamps above
//!   every LST they heard, and ahead of their clock by a lead refusals
//!   teach them (a client far from the partitions otherwise arrives below
//!   their safe times every time), so that is rare.
//! - A client's LSV and the floor below which it dropped entries are
//!   durable (`Record::Local`, `Record::Floor`): a write returns after its
//!   prepare phase and one local append, and a restarted client's sessions
//!   still read their writes.
//! - COMMIT's answer raises `last[svr]` to the partition's LST only, not to
//!   the committed timestamp (line 14's `ver.ts`): a partition with an
//!   older transaction pending is not safe up to it.
//! - `prep` (line 3) is kept as the newest own write per key, dropped once
//!   every partition's LST has passed it (`view.rs`).
//! - Garbage collection (RAMP's: an overwritten version is kept
//!   `gc_window_ms`) can drop a version a lagging GSV needs; the partition
//!   says `Gone` and the read is sent again from the refreshed view
//!   (`read_restarts`).
//! - The cooperative termination protocol asks by timestamp alone; a
//!   partition remembers what it decided (`common/outcomes.rs`).
//!
//! # Where the paper is in the code
//!
//! | paper | file |
//! |---|---|
//! | Algorithm 1 lines 2-3: `last`, `prep` | `view.rs` (`View::learn`, `View::prepared`) |
//! | lines 4-10 PREPARE_ALL | `client.rs` (`prepare_all`, `on_prepared`) |
//! | lines 11-15 COMMIT_ALL | `client.rs` (`on_prepared`, `on_committed`) |
//! | lines 16-24 GET_ALL, GSV (17), LSV (19), the two cases (20-23) | `client.rs` (`get_all`, `send_round`), `view.rs` (`gsv`, `lsv`) |
//! | lines 26-28 `vers`, `latest`, `pending` | `partition.rs`, `safe.rs`, `crate::ramp` versions and pending |
//! | lines 29-32 PREPARE | `partition.rs` (`on_prepare`, `install`) |
//! | lines 33-36 COMMIT | `partition.rs` (`on_commit`, `apply_commit`) |
//! | lines 37-44 GET, Figure 5 (a)-(d) | `partition.rs` (`read`, `on_get`) |
//! | lines 45-48 LST | `safe.rs` (`lst`, `SafeTime`) |
//! | §5.2 cooperative termination protocol | `partition.rs` (`on_ctp_tick`, `on_check_prepared`, `on_prepare_state`), `common/outcomes.rs` |
//! | durability, restart | `recovery.rs` |
//!
//! # Commit path and analytical latency
//!
//! With `RTT(c, p)` the round trip from the client to the farthest
//! partition a transaction touches:
//!
//! ```text
//! write ≈ RTT(c, p)      (PREPARE, durable first, and the client's local
//!                         append; COMMIT in the background)
//! read  ≈ RTT(c, p)      (one round, whatever the concurrency)
//! ```
//!
//! # Counters
//!
//! See [`COUNTERS`]. Observations: `rounds_per_read`,
//! `read_request_metadata_bytes` (per key read: the postcard-encoded GSV
//! and LSV it is sent with), `read_response_metadata_bytes` (per answer:
//! the encoded LST), `metadata_bytes_per_request` (RAMP's measure: a GET to
//! one partition and its answer, `Get::metadata_bytes` plus the
//! LST).

mod client;
#[cfg(test)]
mod handler_tests;
mod messages;
mod partition;
mod recovery;
pub mod safe;
pub mod view;

pub use client::Client;
pub use messages::{Get, KeyRead, Msg, Prepare, Record, Snapshot, Timer};
pub use partition::{Answer, Partition};
pub use view::View;

use crate::common::{Built, build_role};
use crate::ramp::{Common, with_shared};
use meridian_core::{CounterDoc, Deployment, NodeId, ParamDoc, ParamReader, Params};

/// Which of NOC-NOC's read-atomic algorithms a deployment runs: they share
/// partitions, views and reads, and differ in what ends a write.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Variant {
    /// RA-NOC2 (Algorithm 1): a write returns after its prepare phase; the
    /// client's own writes form its local safe view.
    Noc2,
    /// RA-NOC (Appendix C, Algorithms 3 and 4): a write returns after its
    /// commit phase, once every partition's safe time has passed it; reads
    /// carry the global safe view only.
    Noc,
}

/// The protocol's knobs (documented in [`PARAMS`], RA-NOC's in
/// `crate::ranoc::PARAMS`).
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub variant: Variant,
    pub common: Common,
    pub outcomes_remembered: usize,
    pub lsv_max: usize,
    pub read_beyond_gsv: bool,
    /// RA-NOC, tests only: return after the commit phase, without waiting
    /// for `min(last)` to pass the write.
    pub skip_wait: bool,
}

pub const PARAMS: &[ParamDoc] = &with_shared::<20>(&[
    ParamDoc {
        name: "outcomes_remembered",
        default: "65536",
        doc: "commits and refusals a partition remembers for the termination protocol and repeated prepares",
    },
    ParamDoc {
        name: "lsv_max",
        default: "100000",
        doc: "own writes a client keeps in its local safe view; beyond, further writes are refused until some go",
    },
    ParamDoc {
        name: "test_read_beyond_gsv",
        default: "false",
        doc: "tests only: read the newest committed versions, beyond the global safe view, to show the checker catching fractured reads",
    },
]);

/// Every counter `ra-noc2` reports.
pub const COUNTERS: &[CounterDoc] = &[
    CounterDoc { name: "reads", doc: "read-only transactions completed (GET_ALL)" },
    CounterDoc { name: "read_rounds", doc: "rounds of GETs those reads took, all told (one each, restarts apart)" },
    CounterDoc { name: "keys_read_from_lsv", doc: "keys read at the client's own write, beyond its GSV (Figure 5a)" },
    CounterDoc { name: "read_restarts", doc: "reads sent again because a version they needed was collected" },
    CounterDoc { name: "read_resends", doc: "rounds sent again to partitions silent for `retry_ms`" },
    CounterDoc { name: "reads_given_up", doc: "reads aborted after `max_attempts` sends or restarts" },
    CounterDoc { name: "writes", doc: "write-only transactions completed (PREPARE_ALL)" },
    CounterDoc {
        name: "write_phases_on_client_path",
        doc: "phases those writes waited for before returning, all told (one per write)",
    },
    CounterDoc { name: "background_commits", doc: "COMMIT_ALLs every partition acknowledged" },
    CounterDoc { name: "write_resends", doc: "PREPAREs and COMMITs sent again to partitions silent for `retry_ms`" },
    CounterDoc { name: "write_retries", doc: "writes started again at a new timestamp after a refusal" },
    CounterDoc { name: "writes_given_up", doc: "writes aborted after `max_attempts` refusals" },
    CounterDoc { name: "writes_rejected", doc: "writes refused by a client whose local safe view is full" },
    CounterDoc { name: "unknown_outcomes", doc: "writes whose prepares went unanswered `max_attempts` times" },
    CounterDoc {
        name: "background_commits_dropped",
        doc: "commits given up by the client (the termination protocol finishes them)",
    },
    CounterDoc { name: "view_refreshes", doc: "safe-time requests a client sent to drop local versions" },
    CounterDoc {
        name: "prepares_refused",
        doc: "prepares a partition refused (at or below its safe time, or aborted)",
    },
    CounterDoc { name: "ctp_runs", doc: "questions of the cooperative termination protocol sent by partitions" },
    CounterDoc { name: "ctp_commits", doc: "transactions a partition committed through the termination protocol" },
    CounterDoc { name: "ctp_aborts", doc: "transactions a partition aborted through the termination protocol" },
    CounterDoc {
        name: "ctp_forgotten",
        doc: "questions about a transaction decided too long ago to remember, answered `Forgotten`",
    },
    CounterDoc { name: "gc_versions", doc: "overwritten versions partitions collected" },
    CounterDoc { name: "gone_answers", doc: "GETs partitions answered with `Gone` (a version needed was collected)" },
    CounterDoc { name: "prepares_shed", doc: "prepares a partition ignored, holding `pending_max` transactions" },
    CounterDoc { name: "checkpoints", doc: "checkpoints partitions took" },
];

impl Config {
    pub fn from_params(params: &Params, name: &str) -> Result<Config, String> {
        let p = ParamReader::new(params, name, PARAMS)?;
        let count = |n: &str| p.count(n, 1..=1_000_000_000);
        Ok(Config {
            variant: Variant::Noc2,
            common: Common::read(&p, name)?,
            outcomes_remembered: count("outcomes_remembered")? as usize,
            lsv_max: count("lsv_max")? as usize,
            read_beyond_gsv: p.bool("test_read_beyond_gsv")?,
            skip_wait: false,
        })
    }

    /// RA-NOC's knobs (`crate::ranoc::PARAMS`): RA-NOC2's but the local
    /// safe view's, which RA-NOC has not.
    pub fn noc_from_params(params: &Params, name: &str) -> Result<Config, String> {
        let p = ParamReader::new(params, name, crate::ranoc::PARAMS)?;
        let count = |n: &str| p.count(n, 1..=1_000_000_000);
        Ok(Config {
            variant: Variant::Noc,
            common: Common::read(&p, name)?,
            outcomes_remembered: count("outcomes_remembered")? as usize,
            lsv_max: 1,
            read_beyond_gsv: false,
            skip_wait: p.bool("test_skip_wait")?,
        })
    }
}

pub use crate::common::partition_of;

/// A NOC-NOC read-atomic protocol on this folder's roles: its marker type,
/// its node enum, and its `Protocol` impl reading its knobs with `$config`
/// (RA-NOC2 here, RA-NOC in `crate::ranoc`).
macro_rules! noc_protocol {
    ($protocol:ident, $name:literal, $params:expr, $counters:expr, $config:path) => {
        pub struct $protocol;

        meridian_core::roles! {
            #[doc = concat!("A node of an `", $name, "` deployment.")]
            pub enum Node for $protocol {
                Partition($crate::ranoc2::Partition),
                Backup($crate::ramp::Backup),
                Client($crate::ranoc2::Client),
            }
        }

        $crate::replicated!($protocol => $crate::ranoc2::Msg, $crate::ranoc2::Record);

        impl meridian_core::Protocol for $protocol {
            const NAME: &'static str = $name;
            const CONSISTENCY: meridian_core::Consistency = meridian_core::Consistency::ReadAtomic;
            const SHAPES: meridian_core::Shapes = meridian_core::Shapes::READ_ONLY_WRITE_ONLY;
            const CHARGES_KEYS: bool = true;
            type Msg = $crate::ranoc2::Msg;
            type Record = $crate::ranoc2::Record;
            type Timer = $crate::ranoc2::Timer;
            type Node = Node;

            fn params() -> &'static [meridian_core::ParamDoc] {
                $params
            }

            fn counters() -> Vec<meridian_core::CounterDoc> {
                [&$counters[..], &$crate::common::backup::COUNTERS].concat()
            }

            fn build(d: &meridian_core::Deployment, node: meridian_core::NodeId) -> Result<Node, String> {
                let cfg = $config(&d.params, Self::NAME)?;
                let built = $crate::ranoc2::build(d, node, Self::NAME, cfg)?;
                Ok(built.into_node(Node::Partition, Node::Backup, Node::Client))
            }
        }
    };
}
pub(crate) use noc_protocol;

noc_protocol!(RaNoc2, "ra-noc2", PARAMS, COUNTERS, Config::from_params);

/// The role of `node`.
pub(crate) fn build(d: &Deployment, node: NodeId, name: &str, cfg: Config) -> Result<Built<Partition, Client>, String> {
    build_role(
        d,
        node,
        name,
        &cfg.common.replication,
        |topo, shard| Partition::new(topo, node, shard, cfg),
        |topo, index| Client::new(topo, node, index, cfg),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::ParamValue;

    #[test]
    fn every_documented_parameter_parses_at_its_default() {
        assert!(Config::from_params(&Params::new(), "ra-noc2").is_ok());
        for (name, p) in meridian_core::params::each_default_alone(PARAMS) {
            assert!(Config::from_params(&p, "ra-noc2",).is_ok(), "{name}");
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        let p = Params::new().with("retry_ms", ParamValue::Int(0));
        assert!(Config::from_params(&p, "ra-noc2").unwrap_err().contains("`retry_ms`"));
        let p = Params::new().with("one_phase_writes", ParamValue::Bool(true));
        assert!(Config::from_params(&p, "ra-noc2").unwrap_err().contains("`one_phase_writes`"), "RAMP's, not ours");
    }
}
