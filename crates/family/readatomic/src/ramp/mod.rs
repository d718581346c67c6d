//! `ramp-f` and `ramp-s`: Read Atomic Multi-Partition transactions —
//! Bailis et al., "Scalable Atomic Visibility with RAMP Transactions"
//! (SIGMOD 2014). RAMP-Fast (Algorithm 1) keeps with every version the
//! other keys its transaction wrote and reads in one round unless a
//! first round is fractured; RAMP-Small (Algorithm 2) keeps only
//! timestamps and always reads in two. RAMP-OPW is `ramp-f` with
//! `one_phase_writes`: the client returns after PREPARE and commits in
//! the background, which gives up read-your-writes (its runs are checked
//! at `read-atomic-no-ryw`). Both promise read atomicity with
//! read-your-writes; every run is checked at it.
//!
//! Roles: `partition.rs` (a shard's primary: versions, `lastCommit`,
//! PREPARE, COMMIT, GET, the cooperative termination protocol),
//! `versions.rs` (its versions and their garbage collection),
//! `pending.rs` (its prepared, uncommitted transactions and the
//! termination protocol's bookkeeping), `recovery.rs` (its durable
//! records and checkpoints), `client.rs` (PUT_ALL and GET_ALL, talking to
//! the partitions directly: there is no coordinator), `timestamps.rs`
//! (the client's unique, increasing timestamps), `messages.rs`.
//!
//! Partitions are the shards' primaries (`Topology::initial_leader`: with
//! `leaders = "colocated"`, all in the first server region). The other
//! replicas of a shard are its `Backup`s: each partition ships the versions
//! it commits to them asynchronously (primary-backup replication to a
//! second datacenter, NOC-NOC §5.2 and §7.1; `crate::common::backup`).
//!
//! # Where the paper is in the code
//!
//! | paper | file |
//! |---|---|
//! | Algorithm 1 lines 1-2: `versions`, `lastCommit` | `versions.rs` |
//! | Algorithm 1 lines 3-5 PREPARE, 6-8 COMMIT | `partition.rs` (`on_prepare`, `on_commit`) |
//! | Algorithm 1 lines 9-13 GET by `lastCommit` or by timestamp | `partition.rs` (`on_get`), `versions.rs` |
//! | Algorithm 1 lines 14-21 PUT_ALL: timestamp, sibling metadata, two phases | `client.rs` (`put_all`) |
//! | Algorithm 1 lines 22-33 GET_ALL: first round, `v_latest`, repair round | `client.rs` (`get_all`, `on_first_round`) |
//! | Algorithm 2: RAMP-S's timestamp-only metadata and second round by timestamp set | `client.rs`, `versions.rs` (`among`) |
//! | §4.6 cooperative termination protocol (a writer that stops before COMMIT) | `pending.rs`, `partition.rs` (`on_ctp_tick`) |
//! | garbage collection of overwritten versions | `versions.rs` |
//! | one-phase writes (RAMP-OPW) | `client.rs` (`on_prepared`) |
//! | durability ("stable storage"), restart | `recovery.rs` |
//!
//! # Commit path and analytical latency
//!
//! With `RTT(c, p)` the round trip from the client to the farthest
//! partition a transaction touches:
//!
//! ```text
//! write (RAMP-F, RAMP-S) ≈ 2 · RTT(c, p)      (PREPARE, then COMMIT; each durable first)
//! write (RAMP-OPW)       ≈ RTT(c, p)
//! read  (RAMP-F)         ≈ RTT(c, p)          (2 · RTT when the first round was fractured)
//! read  (RAMP-S)         ≈ 2 · RTT(c, p)
//! ```
//!
//! # Counters
//!
//! See [`COUNTERS`]. Observations: `rounds_per_read`,
//! `metadata_bytes_per_request` (the postcard-encoded metadata — timestamps
//! and sibling keys, not keys read or values — of every GET a client sends
//! and every answer it receives), `metadata_bytes_per_version` (that of
//! each version a GET returns: RAMP-F's grows with the transaction that
//! wrote it, RAMP-S's does not).

pub mod client;
#[cfg(test)]
mod handler_tests;
mod messages;
mod partition;
pub mod pending;
pub mod recovery;
pub mod timestamps;
pub mod versions;

pub use client::Client;
pub use messages::{Ask, GetId, Held, Item, KnownState, Msg, PendingTxn, Prepare, Record, Snapshot, Timer, Ts};
pub use partition::Partition;

use crate::common::backup::{PARAMS as REPLICATION_PARAMS, Replication};
use crate::common::{Built, build_role};
use meridian_core::{Consistency, CounterDoc, Deployment, NodeId, ParamDoc, ParamReader, Params, Protocol, Shapes};

/// Which of the paper's algorithms a deployment runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Variant {
    /// RAMP-Fast, Algorithm 1.
    Fast,
    /// RAMP-Small, Algorithm 2.
    Small,
}

/// The knobs RAMP, RA-NOC2, RA-NOC, LORA and Eiger share (documented in `SHARED_PARAMS`).
#[derive(Clone, Copy, Debug)]
pub struct Common {
    pub client_tick_ns: u64,
    pub retry_ns: u64,
    pub max_attempts: u32,
    pub reserve_ahead_us: u64,
    pub gc_tick_ns: u64,
    pub gc_window_ns: u64,
    pub superseded_max: usize,
    pub ctp_tick_ns: u64,
    pub ctp_ns: u64,
    pub pending_max: usize,
    pub checkpoint_records: u64,
    /// Primary-backup replication (`crate::common::backup`).
    pub replication: Replication,
}

impl Common {
    /// Reads the shared knobs of protocol `name`.
    pub fn read(p: &ParamReader<'_>, name: &str) -> Result<Common, String> {
        let ms = |n: &str| p.ms_ns(n);
        let count = |n: &str| p.count(n, 1..=1_000_000_000);
        let positive = |n: &str| -> Result<u64, String> {
            let v = ms(n)?;
            if v == 0 { Err(format!("{name}: `{n}` must be positive")) } else { Ok(v) }
        };
        Ok(Common {
            client_tick_ns: positive("client_tick_ms")?,
            retry_ns: positive("retry_ms")?,
            max_attempts: count("max_attempts")? as u32,
            reserve_ahead_us: positive("reserve_ahead_ms")? / 1_000,
            gc_tick_ns: positive("gc_tick_ms")?,
            gc_window_ns: ms("gc_window_ms")?,
            superseded_max: count("superseded_max")? as usize,
            ctp_tick_ns: positive("ctp_tick_ms")?,
            ctp_ns: positive("ctp_ms")?,
            pending_max: count("pending_max")? as usize,
            checkpoint_records: count("checkpoint_records")?,
            replication: Replication::read(p, name)?,
        })
    }
}

/// The protocols' knobs (documented in [`PARAMS`]).
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub variant: Variant,
    pub one_phase_writes: bool,
    pub common: Common,
    pub aborted_remembered: usize,
    pub skip_repair: bool,
}

/// The knobs RAMP, RA-NOC2, RA-NOC, LORA and Eiger share (their clients' retries and timestamps,
/// their partitions' garbage collection, termination protocol and checkpoints).
pub const SHARED_PARAMS: [ParamDoc; 17] = [
    ParamDoc { name: "client_tick_ms", default: "20", doc: "resolution of the client's retry deadlines" },
    ParamDoc {
        name: "retry_ms",
        default: "500",
        doc: "a client sends a round or phase again to partitions silent this long",
    },
    ParamDoc {
        name: "max_attempts",
        default: "10",
        doc: "sends of one round or phase (and restarts of one read) before the client gives up",
    },
    ParamDoc {
        name: "reserve_ahead_ms",
        default: "10000",
        doc: "time a client's durable timestamp reservation reaches past its clock",
    },
    ParamDoc { name: "gc_tick_ms", default: "100", doc: "period of a partition's garbage collection" },
    ParamDoc {
        name: "gc_window_ms",
        default: "2000",
        doc: "an overwritten version is kept this long for readers that may ask for it by timestamp",
    },
    ParamDoc {
        name: "superseded_max",
        default: "100000",
        doc: "overwrites a partition lets wait for collection; beyond, the oldest go early",
    },
    ParamDoc { name: "ctp_tick_ms", default: "100", doc: "period of a partition's cooperative termination checks" },
    ParamDoc {
        name: "ctp_ms",
        default: "1000",
        doc: "a transaction prepared and not committed this long is asked about at its other participants (§4.6)",
    },
    ParamDoc {
        name: "pending_max",
        default: "100000",
        doc: "prepared, uncommitted transactions a partition holds; further prepares wait for the client's retry",
    },
    ParamDoc {
        name: "checkpoint_records",
        default: "10000",
        doc: "records a partition appends between checkpoints of its durable log",
    },
    REPLICATION_PARAMS[0],
    REPLICATION_PARAMS[1],
    REPLICATION_PARAMS[2],
    REPLICATION_PARAMS[3],
    REPLICATION_PARAMS[4],
    REPLICATION_PARAMS[5],
];

/// A protocol's parameter list: `SHARED_PARAMS` in order, each replaced by
/// the parameter of `own` with its name if there is one (Eiger documents
/// its own `ctp_ms`), then the rest of `own` in order. `N` is their count,
/// checked when the constant is built.
pub const fn with_shared<const N: usize>(own: &[ParamDoc]) -> [ParamDoc; N] {
    let mut out = SHARED_PARAMS[0];
    let mut list = [out; N];
    let mut used = [false; 32];
    assert!(own.len() <= used.len(), "at most 32 parameters of a protocol's own");
    let mut i = 0;
    while i < SHARED_PARAMS.len() {
        out = SHARED_PARAMS[i];
        let mut j = 0;
        while j < own.len() {
            if same_name(own[j].name, out.name) {
                out = own[j];
                used[j] = true;
            }
            j += 1;
        }
        list[i] = out;
        i += 1;
    }
    let mut j = 0;
    while j < own.len() {
        if !used[j] {
            assert!(i < N, "N counts every parameter");
            list[i] = own[j];
            i += 1;
        }
        j += 1;
    }
    assert!(i == N, "N counts every parameter");
    list
}

const fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

pub const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        name: "one_phase_writes",
        default: "false",
        doc: "ramp-f only: RAMP-OPW, the client returns after PREPARE and commits in the background (no read-your-writes)",
    },
    SHARED_PARAMS[0],
    SHARED_PARAMS[1],
    SHARED_PARAMS[2],
    SHARED_PARAMS[3],
    SHARED_PARAMS[4],
    SHARED_PARAMS[5],
    SHARED_PARAMS[6],
    SHARED_PARAMS[7],
    SHARED_PARAMS[8],
    SHARED_PARAMS[9],
    ParamDoc {
        name: "aborted_remembered",
        default: "65536",
        doc: "transactions a partition remembers refusing, and as many it committed, for the cooperative termination protocol",
    },
    SHARED_PARAMS[10],
    SHARED_PARAMS[11],
    SHARED_PARAMS[12],
    SHARED_PARAMS[13],
    SHARED_PARAMS[14],
    SHARED_PARAMS[15],
    SHARED_PARAMS[16],
    ParamDoc {
        name: "test_skip_repair",
        default: "false",
        doc: "ramp-f, tests only: skip the second round (Algorithm 1 lines 30-32) to show the checker catching fractured reads",
    },
];

/// Every counter the RAMP protocols report.
pub const COUNTERS: &[CounterDoc] = &[
    CounterDoc { name: "reads", doc: "read-only transactions completed (GET_ALL)" },
    CounterDoc { name: "read_rounds", doc: "rounds of GETs those reads took, all told" },
    CounterDoc { name: "reads_one_round", doc: "reads done after one round (RAMP-F, first round not fractured)" },
    CounterDoc { name: "reads_two_rounds", doc: "reads that took a second round (RAMP-F's repair; every RAMP-S read)" },
    CounterDoc { name: "repair_reads", doc: "keys RAMP-F fetched again by timestamp (Algorithm 1 lines 30-32)" },
    CounterDoc { name: "read_restarts", doc: "reads started again because a version they needed was collected" },
    CounterDoc { name: "read_resends", doc: "rounds sent again to partitions silent for `retry_ms`" },
    CounterDoc { name: "reads_given_up", doc: "reads aborted after `max_attempts` sends or restarts" },
    CounterDoc { name: "writes", doc: "write-only transactions completed (PUT_ALL)" },
    CounterDoc {
        name: "write_phases_on_client_path",
        doc: "phases those writes waited for before returning, all told (2 per write, 1 with one_phase_writes)",
    },
    CounterDoc { name: "write_resends", doc: "PREPAREs and COMMITs sent again to partitions silent for `retry_ms`" },
    CounterDoc {
        name: "writes_refused",
        doc: "writes whose prepare a partition refused (aborted by the termination protocol)",
    },
    CounterDoc { name: "unknown_outcomes", doc: "writes given up after `max_attempts` (outcome unknown)" },
    CounterDoc {
        name: "background_commits_dropped",
        doc: "RAMP-OPW commits given up by the client (the termination protocol finishes them)",
    },
    CounterDoc { name: "ctp_runs", doc: "questions of the cooperative termination protocol sent by partitions" },
    CounterDoc { name: "ctp_commits", doc: "transactions a partition committed through the termination protocol" },
    CounterDoc {
        name: "ctp_forgotten",
        doc: "questions about a transaction older than every commit a partition remembers, answered `Forgotten`",
    },
    CounterDoc { name: "ctp_aborts", doc: "transactions a partition aborted through the termination protocol" },
    CounterDoc { name: "gc_versions", doc: "overwritten versions partitions collected" },
    CounterDoc {
        name: "gone_answers",
        doc: "GETs partitions answered with `Gone` (a version asked for was collected)",
    },
    CounterDoc { name: "prepares_shed", doc: "prepares a partition ignored, holding `pending_max` transactions" },
    CounterDoc { name: "checkpoints", doc: "checkpoints partitions took" },
];

impl Config {
    pub fn from_params(params: &Params, name: &str, variant: Variant) -> Result<Config, String> {
        let p = ParamReader::new(params, name, PARAMS)?;
        let count = |n: &str| p.count(n, 1..=1_000_000_000);
        let one_phase_writes = p.bool("one_phase_writes")?;
        let skip_repair = p.bool("test_skip_repair")?;
        if variant == Variant::Small && one_phase_writes {
            return Err(format!("{name}: `one_phase_writes` is RAMP-OPW, a parameter of ramp-f"));
        }
        if variant == Variant::Small && skip_repair {
            return Err(format!("{name}: `test_skip_repair` skips RAMP-F's repair round; ramp-s has none"));
        }
        Ok(Config {
            variant,
            one_phase_writes,
            common: Common::read(&p, name)?,
            aborted_remembered: count("aborted_remembered")? as usize,
            skip_repair,
        })
    }
}

pub use crate::common::partition_of;

/// A shard's replica that is not its partition: its backup
/// (`crate::common::backup`).
pub use crate::common::backup::Backup;

pub struct RampF;
pub struct RampS;

crate::replicated!(RampF, RampS => self::Msg, self::Record);

meridian_core::roles! {
    /// A node of a `ramp-f` deployment.
    pub enum NodeF for RampF {
        Partition(Partition),
        Backup(Backup),
        Client(Client),
    }
}

meridian_core::roles! {
    /// A node of a `ramp-s` deployment.
    pub enum NodeS for RampS {
        Partition(Partition),
        Backup(Backup),
        Client(Client),
    }
}

/// The role of `node` for either variant.
fn build(d: &Deployment, node: NodeId, name: &str, variant: Variant) -> Result<Built<Partition, Client>, String> {
    let cfg = Config::from_params(&d.params, name, variant)?;
    build_role(
        d,
        node,
        name,
        &cfg.common.replication,
        |topo, shard| Partition::new(topo, node, shard, cfg),
        |topo, index| Client::new(topo, node, index, cfg),
    )
}

impl Protocol for RampF {
    const NAME: &'static str = "ramp-f";
    const CONSISTENCY: Consistency = Consistency::ReadAtomic;
    const SHAPES: Shapes = Shapes::READ_ONLY_WRITE_ONLY;
    const CHARGES_KEYS: bool = true;
    type Msg = Msg;
    type Record = Record;
    type Timer = Timer;
    type Node = NodeF;

    fn consistency_for(params: &Params) -> Consistency {
        match Config::from_params(params, Self::NAME, Variant::Fast) {
            Ok(cfg) if cfg.one_phase_writes => Consistency::ReadAtomicNoRyw,
            _ => Self::CONSISTENCY,
        }
    }

    fn params() -> &'static [ParamDoc] {
        PARAMS
    }

    fn counters() -> Vec<CounterDoc> {
        [COUNTERS, &crate::common::backup::COUNTERS].concat()
    }

    fn build(d: &Deployment, node: NodeId) -> Result<NodeF, String> {
        Ok(build(d, node, Self::NAME, Variant::Fast)?.into_node(NodeF::Partition, NodeF::Backup, NodeF::Client))
    }
}

impl Protocol for RampS {
    const NAME: &'static str = "ramp-s";
    const CONSISTENCY: Consistency = Consistency::ReadAtomic;
    const SHAPES: Shapes = Shapes::READ_ONLY_WRITE_ONLY;
    const CHARGES_KEYS: bool = true;
    type Msg = Msg;
    type Record = Record;
    type Timer = Timer;
    type Node = NodeS;

    fn params() -> &'static [ParamDoc] {
        PARAMS
    }

    fn counters() -> Vec<CounterDoc> {
        [COUNTERS, &crate::common::backup::COUNTERS].concat()
    }

    fn build(d: &Deployment, node: NodeId) -> Result<NodeS, String> {
        Ok(build(d, node, Self::NAME, Variant::Small)?.into_node(NodeS::Partition, NodeS::Backup, NodeS::Client))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::ParamValue;

    const OWN_CTP_MS: ParamDoc = ParamDoc { name: "ctp_ms", default: "7", doc: "a protocol's own" };
    const EXTRA: ParamDoc = ParamDoc { name: "extra", default: "1", doc: "a protocol's own" };

    #[test]
    fn a_protocols_parameters_are_the_shared_ones_in_order_its_own_in_place_or_after() {
        let names = |list: &[ParamDoc]| list.iter().map(|p| p.name).collect::<Vec<_>>();
        let list = with_shared::<18>(&[EXTRA, OWN_CTP_MS]);
        let shared = names(&SHARED_PARAMS);
        assert_eq!(names(&list[..17]), shared, "the shared ones first, in their order");
        assert_eq!(list[8].default, "7", "an own parameter of a shared name replaces it in place");
        assert_eq!(list[17].name, "extra", "the others follow");
    }

    #[test]
    #[should_panic(expected = "N counts every parameter")]
    fn a_miscounted_parameter_list_is_refused() {
        with_shared::<19>(&[EXTRA]);
    }

    #[test]
    fn every_documented_parameter_parses_at_its_default() {
        for variant in [Variant::Fast, Variant::Small] {
            assert!(Config::from_params(&Params::new(), "ramp", variant).is_ok());
            for (name, p) in meridian_core::params::each_default_alone(PARAMS) {
                assert!(Config::from_params(&p, "ramp", variant).is_ok(), "{name}");
            }
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        let p = Params::new().with("retry_ms", ParamValue::Int(0));
        assert!(Config::from_params(&p, "ramp-f", Variant::Fast).unwrap_err().contains("`retry_ms`"));
        let p = Params::new().with("one_phase_writes", ParamValue::Bool(true));
        assert!(Config::from_params(&p, "ramp-s", Variant::Small).unwrap_err().contains("`one_phase_writes`"));
        let p = Params::new().with("ship_tick_ms", ParamValue::Int(0));
        assert!(Config::from_params(&p, "ramp-f", Variant::Fast).unwrap_err().contains("`ship_tick_ms`"));
        let p = Params::new().with("ship_batch_max", ParamValue::Int(0));
        assert!(Config::from_params(&p, "ramp-f", Variant::Fast).unwrap_err().contains("`ship_batch_max`"));
        let p = Params::new().with("no_such_ms", ParamValue::Int(1));
        assert!(Config::from_params(&p, "ramp-f", Variant::Fast).unwrap_err().contains("`no_such_ms`"));
    }

    #[test]
    fn one_phase_writes_lower_the_promise_to_read_atomic_without_read_your_writes() {
        assert_eq!(RampF::consistency_for(&Params::new()), Consistency::ReadAtomic);
        let opw = Params::new().with("one_phase_writes", ParamValue::Bool(true));
        assert_eq!(RampF::consistency_for(&opw), Consistency::ReadAtomicNoRyw);
        assert_eq!(RampS::consistency_for(&Params::new()), Consistency::ReadAtomic);
    }
}
