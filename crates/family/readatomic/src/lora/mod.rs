//! `lora`: SNOW-optimal read atomic transactions — Si Liu, "All in One:
//! Design, Verification, and Implementation of SNOW-Optimal Read Atomic
//! Transactions" (ACM TOSEM 31(3), 2022), as NOC-NOC ("Towards
//! Performance-optimal Distributed Transactions") compares against it
//! (§1 Figure 1, §3.4 Table 1, §7) and as the NOC-NOC authors' artifact
//! implements it beside RA-NOC2 and RAMP-OPW, atop the RAMP codebase.
//!
//! NOC-NOC's Table 1: read atomicity with read-your-writes (RA+), reads
//! in one round (O_R) that never wait (N_R), writes in one phase (O_W)
//! that never wait (N_W) — SNOW-optimal —, but metadata linear in the
//! transaction's size in reads and in writes (not C_R, not C_W).
//!
//! A client (a front end: its sessions share its state) keeps `last`, per
//! key the newest timestamp of a write of it that it knows of
//! (`known.rs`): its own writes once every partition prepared them, and
//! the versions its reads returned with their sibling keys. A read asks
//! each key at exactly `last[k]` and learns from the answers; a write
//! prepares its versions, each with the transaction's keys, and returns
//! once every partition has them, committing in the background.
//! Partitions are RAMP-F's (`crate::ramp`: versions with their sibling
//! keys, one-phase writes as RAMP-OPW's, the cooperative termination
//! protocol, garbage collection, checkpoints), asked by `Ask::Known`.
//!
//! Reads are fresh only as far as a front end has heard (NOC-NOC §7,
//! Figure 6d: 35 % of LORA's reads up to date): a key it never wrote nor
//! met among a version's siblings is read at its initial state.
//!
//! # Where the algorithm is in the code
//!
//! | LORA (the artifact's procedures; NOC-NOC's description) | file |
//! |---|---|
//! | `last`, the client's newest known timestamp per key (`canAdd`: only raised) | `known.rs` |
//! | `prepare_all`: a timestamp, versions with `I_tx`, PREPARE everywhere; `last` raised for every key written | `client.rs` (`put_all`, `on_prepared`), `crate::ramp::client::prepares` |
//! | one-phase writes: return after PREPARE, `commit_all` in the background (O_W, N_W) | `client.rs` (`on_prepared`, `answer_writes`, `on_committed`) |
//! | `get_all`: one GET per partition by `last[k]` (`fetch_by_version`), `last` raised from each version and its siblings (O_R, N_R) | `client.rs` (`get_all`, `asks`, `on_got`, `on_round_done`) |
//! | partitions: PREPARE, COMMIT, GET by exact version | `crate::ramp::partition` (`on_prepare`, `on_commit`, `on_get`), `crate::ramp::versions` (`known`) |
//! | cooperative termination protocol (the artifact's, NOC-NOC §7) | `crate::common::partition`, `crate::ramp::pending` |
//! | garbage collection of overwritten versions | `crate::ramp::versions` |
//! | durability, restart | `client.rs` (`restore`, `Record::Known`), `crate::ramp::recovery` |
//!
//! # Beyond the published algorithm
//!
//! - **`last` is raised once a write is fully prepared**, not when its
//!   PREPAREs leave (the artifact raises it first): a concurrent read of
//!   the same front end would otherwise ask a partition for a version not
//!   there yet.
//! - **`last` of own writes is durable** (`Record::Known`, folded into the
//!   client's checkpoint `Record::KnownState` at every timestamp
//!   reservation): a write returns after its prepare phase and one local
//!   append, and a restarted client's sessions still read their writes.
//!   Learnt entries are not recorded (they are a cache of freshness).
//! - **Collected versions.** The artifact returns nothing for a version
//!   collected, and its note on garbage collection says LORA's reads may
//!   then miss data. Meridian's partition returns the newest committed
//!   version instead (newer: a version goes only once a commit overwrote
//!   it), and the client checks the read for fractures against the
//!   versions' siblings before returning it; a fractured read starts again
//!   at the `last` it learnt (`read_restarts`, at most `max_attempts`
//!   rounds).
//! - **Bounds.** `last` holds at most `known_max` keys: a write whose keys
//!   do not fit is rejected (`writes_rejected`), a lesson that does not fit
//!   is skipped whole (a half-learnt transaction would break the closure
//!   that keeps reads atomic). Rounds and phases are resent after
//!   `retry_ms`, given up after `max_attempts` (RAMP's, shared).
//! - **Replication.** As for RAMP, a shard's other replicas are idle
//!   `Backup`s; a crashed partition is unavailable until it restarts.
//!
//! # Commit path and analytical latency
//!
//! With `RTT(c, p)` the round trip from the client to the farthest
//! partition a transaction touches:
//!
//! ```text
//! write ≈ RTT(c, p)      (PREPARE, durable first, and one local append;
//!                         COMMIT in the background)
//! read  ≈ RTT(c, p)      (one round; one more per restart after a collection)
//! ```
//!
//! # Counters
//!
//! See [`COUNTERS`]. Observations: `rounds_per_read`,
//! `read_request_metadata_bytes` (per GET: the postcard-encoded timestamps
//! it asks by, one per key read there), `read_response_metadata_bytes`
//! (per answer: each version's timestamp and sibling keys),
//! `write_request_metadata_bytes` (per PREPARE: the timestamp, the
//! transaction's keys and its participants).

mod client;
#[cfg(test)]
mod handler_tests;
pub mod known;

pub use client::{Client, fractured};

use crate::common::build_role;
use crate::ramp::{Backup, Common, Partition, Variant, with_shared};
use meridian_core::{Consistency, CounterDoc, Deployment, NodeId, ParamDoc, ParamReader, Params, Protocol, Shapes};

/// The protocol's knobs (documented in [`PARAMS`]).
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub common: Common,
    pub aborted_remembered: usize,
    pub known_max: usize,
    /// Tests only: read `lastCommit`, with no fracture check.
    pub read_latest: bool,
}

pub const PARAMS: &[ParamDoc] = &with_shared::<20>(&[
    ParamDoc {
        name: "aborted_remembered",
        default: "65536",
        doc: "transactions a partition remembers refusing in the cooperative termination protocol",
    },
    ParamDoc {
        name: "known_max",
        default: "1000000",
        doc: "keys a client keeps a newest known timestamp for; beyond, writes of new keys are refused and reads learn nothing new",
    },
    ParamDoc {
        name: "test_read_latest",
        default: "false",
        doc: "tests only: read the newest committed versions instead of the known ones, unchecked, to show the checker catching fractured reads",
    },
]);

/// Every counter `lora` reports.
pub const COUNTERS: &[CounterDoc] = &[
    CounterDoc { name: "reads", doc: "read-only transactions completed (GET_ALL)" },
    CounterDoc { name: "read_rounds", doc: "rounds of GETs those reads took, all told (one each, restarts apart)" },
    CounterDoc { name: "keys_learned", doc: "entries of `last` a read's answers raised (a version and its siblings)" },
    CounterDoc { name: "read_restarts", doc: "reads sent again because a collected version made them fractured" },
    CounterDoc { name: "read_resends", doc: "rounds sent again to partitions silent for `retry_ms`" },
    CounterDoc { name: "reads_given_up", doc: "reads aborted after `max_attempts` sends or restarts" },
    CounterDoc { name: "writes", doc: "write-only transactions completed (PUT_ALL)" },
    CounterDoc {
        name: "write_phases_on_client_path",
        doc: "phases those writes waited for before returning, all told (one per write)",
    },
    CounterDoc { name: "background_commits", doc: "COMMITs every partition acknowledged" },
    CounterDoc { name: "write_resends", doc: "PREPAREs and COMMITs sent again to partitions silent for `retry_ms`" },
    CounterDoc {
        name: "writes_refused",
        doc: "writes whose prepare a partition refused (aborted by the termination protocol)",
    },
    CounterDoc { name: "writes_rejected", doc: "writes refused by a client whose `last` has no room for their keys" },
    CounterDoc { name: "unknown_outcomes", doc: "writes given up after `max_attempts` (outcome unknown)" },
    CounterDoc {
        name: "background_commits_dropped",
        doc: "commits given up by the client (the termination protocol finishes them)",
    },
    CounterDoc {
        name: "versions_replaced",
        doc: "versions asked for that were collected, answered with the newest committed one",
    },
    CounterDoc { name: "ctp_runs", doc: "questions of the cooperative termination protocol sent by partitions" },
    CounterDoc { name: "ctp_commits", doc: "transactions a partition committed through the termination protocol" },
    CounterDoc {
        name: "ctp_forgotten",
        doc: "questions about a transaction older than every commit a partition remembers, answered `Forgotten`",
    },
    CounterDoc { name: "ctp_aborts", doc: "transactions a partition aborted through the termination protocol" },
    CounterDoc { name: "gc_versions", doc: "overwritten versions partitions collected" },
    CounterDoc { name: "gone_answers", doc: "GETs partitions answered with `Gone` (a version asked for is not there)" },
    CounterDoc { name: "prepares_shed", doc: "prepares a partition ignored, holding `pending_max` transactions" },
    CounterDoc { name: "checkpoints", doc: "checkpoints partitions took" },
];

impl Config {
    pub fn from_params(params: &Params, name: &str) -> Result<Config, String> {
        let p = ParamReader::new(params, name, PARAMS)?;
        let count = |n: &str| p.count(n, 1..=1_000_000_000);
        Ok(Config {
            common: Common::read(&p, name)?,
            aborted_remembered: count("aborted_remembered")? as usize,
            known_max: count("known_max")? as usize,
            read_latest: p.bool("test_read_latest")?,
        })
    }

    /// The partitions' knobs: RAMP-F's, with one-phase writes (the client
    /// returns after PREPARE, as RAMP-OPW's) and sibling keys per version.
    fn partition(&self) -> crate::ramp::Config {
        crate::ramp::Config {
            variant: Variant::Fast,
            one_phase_writes: true,
            common: self.common,
            aborted_remembered: self.aborted_remembered,
            skip_repair: false,
        }
    }
}

pub struct Lora;

crate::replicated!(Lora => crate::ramp::Msg, crate::ramp::Record);

meridian_core::roles! {
    /// A node of a `lora` deployment.
    pub enum Node for Lora {
        Partition(Partition),
        Backup(Backup),
        Client(Client),
    }
}

impl Protocol for Lora {
    const NAME: &'static str = "lora";
    const CONSISTENCY: Consistency = Consistency::ReadAtomic;
    const SHAPES: Shapes = Shapes::READ_ONLY_WRITE_ONLY;
    const CHARGES_KEYS: bool = true;
    type Msg = crate::ramp::Msg;
    type Record = crate::ramp::Record;
    type Timer = crate::ramp::Timer;
    type Node = Node;

    fn params() -> &'static [ParamDoc] {
        PARAMS
    }

    fn counters() -> Vec<CounterDoc> {
        [COUNTERS, &crate::common::backup::COUNTERS].concat()
    }

    fn build(d: &Deployment, node: NodeId) -> Result<Node, String> {
        let cfg = Config::from_params(&d.params, Self::NAME)?;
        let built = build_role(
            d,
            node,
            Self::NAME,
            &cfg.common.replication,
            |topo, shard| Partition::new(topo, node, shard, cfg.partition()),
            |topo, index| Client::new(topo, node, index, cfg),
        )?;
        Ok(built.into_node(Node::Partition, Node::Backup, Node::Client))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::ParamValue;

    #[test]
    fn every_documented_parameter_parses_at_its_default() {
        assert!(Config::from_params(&Params::new(), "lora").is_ok());
        for (name, p) in meridian_core::params::each_default_alone(PARAMS) {
            assert!(Config::from_params(&p, "lora").is_ok(), "{name}");
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        let p = Params::new().with("known_max", ParamValue::Int(0));
        assert!(Config::from_params(&p, "lora").unwrap_err().contains("`known_max`"));
        let p = Params::new().with("one_phase_writes", ParamValue::Bool(true));
        assert!(Config::from_params(&p, "lora").unwrap_err().contains("`one_phase_writes`"), "RAMP's, not ours");
    }
}
