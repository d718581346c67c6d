//! Every protocol name of the CONTRACT, what it promises, and whether this
//! build can run it; the protocol crates' entry tables behind the names.
//!
//! Generic code (the simulator's run, the real server) is instantiated in
//! each protocol's own crate (`meridian_harness::Entry::of`); this module
//! only looks entries up by name, so editing one protocol recompiles its
//! crate, not the others.

use meridian_core::{Consistency, ProtocolInfo};
use meridian_experiment::{ConfigError, Experiment};
use meridian_harness::Entry;
use meridian_harness::runner::{RunOptions, RunOutput};
use std::sync::OnceLock;

use Consistency::*;

/// A CONTRACT name as the catalog has it: implemented by family crate
/// `family` (a cargo feature of this crate), or planned (`family` None).
struct Known {
    family: Option<&'static str>,
    planned: ProtocolInfo,
}

const fn built(family: &'static str, name: &'static str, consistency: Consistency, summary: &'static str) -> Known {
    Known { family: Some(family), planned: ProtocolInfo::planned(name, consistency, summary) }
}

const fn planned(name: &'static str, consistency: Consistency, summary: &'static str) -> Known {
    Known { family: None, planned: ProtocolInfo::planned(name, consistency, summary) }
}

/// Every CONTRACT protocol name, in the CONTRACT's order.
const CATALOG: &[Known] = &[
    built("twopc", "2pl-paxos", StrictSerializable, "two-phase locking + two-phase commit over per-shard Multi-Paxos"),
    planned("occ-paxos", StrictSerializable, "optimistic concurrency control + 2PC over per-shard Multi-Paxos"),
    built("deterministic", "calvin", StrictSerializable, "deterministic ordering and locking (Calvin)"),
    planned("tapir", StrictSerializable, "consolidated inconsistent replication + OCC (TAPIR)"),
    planned("raft-occ", StrictSerializable, "single-leader OCC commit over Raft"),
    built(
        "tiga",
        "tiga",
        StrictSerializable,
        "synchronized-clock consolidated concurrency control and consensus (Tiga)",
    ),
    built("deterministic", "slog", StrictSerializable, "home-region ordering with deterministic execution (SLOG)"),
    planned("k2", StrictSerializable, "TrueTime batching + MVTO with replica reads (K2)"),
    planned("d2pl-ttc", StrictSerializable, "distributed 2PL with TrueTime commit wait (Spanner-like)"),
    planned("mvto-hlc", Serializable, "multi-version timestamp ordering with hybrid logical clocks"),
    planned("starry", StrictSerializable, "semi-leader commit with sequencer reordering (STARRY)"),
    built("readatomic", "ra-noc2", ReadAtomic, "read atomic with one-round reads and one-phase writes (RA-NOC2)"),
    built(
        "readatomic",
        "ra-noc",
        ReadAtomic,
        "read atomic with one-round reads and two-phase blocking writes (RA-NOC)",
    ),
    built(
        "causal",
        "eiger-noc2",
        Causal,
        "transactional causal consistency with one-round reads and one-phase writes (Eiger-NOC2)",
    ),
    built(
        "causal",
        "eiger-port",
        CausalNoConvergence,
        "transactional causal consistency without convergence, one-round reads and two-phase writes (Eiger-PORT)",
    ),
    built("readatomic", "ramp-f", ReadAtomic, "read atomic multi-partition transactions, fast variant (RAMP-F)"),
    built("readatomic", "ramp-s", ReadAtomic, "read atomic multi-partition transactions, small variant (RAMP-S)"),
    built(
        "readatomic",
        "lora",
        ReadAtomic,
        "SNOW-optimal read atomic with one-round reads and one-phase writes, linear metadata (LORA)",
    ),
];

/// The entry tables of the family crates this build includes.
pub fn entries() -> &'static [&'static Entry] {
    static ENTRIES: OnceLock<Vec<&'static Entry>> = OnceLock::new();
    ENTRIES.get_or_init(|| {
        #[allow(unused_mut)]
        let mut all: Vec<&'static Entry> = Vec::new();
        #[cfg(feature = "twopc")]
        all.extend(meridian_twopc::ENTRIES);
        #[cfg(feature = "tiga")]
        all.extend(meridian_tiga::ENTRIES);
        #[cfg(feature = "deterministic")]
        all.extend(meridian_deterministic::ENTRIES);
        #[cfg(feature = "readatomic")]
        all.extend(meridian_readatomic::ENTRIES);
        #[cfg(feature = "causal")]
        all.extend(meridian_causal::ENTRIES);
        all
    })
}

/// The entry of the runnable protocol `name`.
pub fn entry(name: &str) -> Option<&'static Entry> {
    entries().iter().copied().find(|e| e.info.name == name)
}

/// Every CONTRACT protocol, in CONTRACT order: a built protocol's own
/// information, otherwise the catalog's (`implemented` false).
pub fn protocols() -> &'static [ProtocolInfo] {
    static ALL: OnceLock<Vec<ProtocolInfo>> = OnceLock::new();
    ALL.get_or_init(|| CATALOG.iter().map(|k| entry(k.planned.name).map_or(k.planned, |e| e.info)).collect())
}

/// Looks a protocol up by its CONTRACT name.
pub fn find(name: &str) -> Option<&'static ProtocolInfo> {
    protocols().iter().find(|p| p.name == name)
}

/// The family crate (cargo feature) that implements `name`, if one does;
/// for protocols implemented but left out of this build.
pub fn family_of(name: &str) -> Option<&'static str> {
    CATALOG.iter().find(|k| k.planned.name == name).and_then(|k| k.family)
}

/// Runnable protocols, in CONTRACT order.
pub fn implemented_protocols() -> impl Iterator<Item = &'static ProtocolInfo> {
    protocols().iter().filter(|p| p.implemented)
}

/// What a configuration loader needs to build any runnable protocol's
/// topology.
pub fn runnable() -> &'static [ProtocolInfo] {
    static RUNNABLE: OnceLock<Vec<ProtocolInfo>> = OnceLock::new();
    RUNNABLE.get_or_init(|| implemented_protocols().copied().collect())
}

/// Why `name` cannot run in this build.
pub fn not_runnable(name: &str) -> String {
    let implemented: Vec<&str> = implemented_protocols().map(|p| p.name).collect();
    let implemented = implemented.join(", ");
    match (find(name), family_of(name)) {
        (Some(_), Some(family)) => {
            format!("protocol `{name}` is not in this build (rebuild with `--features {family}`; built: {implemented})")
        }
        (Some(_), None) => format!("protocol `{name}` is not implemented yet (implemented: {implemented})"),
        (None, _) => format!("unknown protocol `{name}` (implemented: {implemented})"),
    }
}

/// Runs `exp` in the simulator with the protocol it names. Errors are the
/// experiment file's (unknown protocol, bad parameter, unknown node).
pub fn run_experiment(exp: &Experiment, opts: RunOptions<'_>) -> Result<RunOutput, ConfigError> {
    let name = exp.protocol.name.as_str();
    match entry(name) {
        Some(e) => (e.run_sim)(exp, opts),
        None => Err(exp.error_at("protocol.name", not_runnable(name))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contract_name_is_listed_once() {
        let contract = [
            "2pl-paxos",
            "occ-paxos",
            "calvin",
            "tapir",
            "raft-occ",
            "tiga",
            "slog",
            "k2",
            "d2pl-ttc",
            "mvto-hlc",
            "starry",
            "ra-noc2",
            "ra-noc",
            "eiger-noc2",
            "eiger-port",
            "ramp-f",
            "ramp-s",
            "lora",
        ];
        let names: Vec<&str> = protocols().iter().map(|p| p.name).collect();
        assert_eq!(names, contract);
    }

    #[test]
    fn every_entry_is_a_catalog_name_of_its_family_and_keeps_its_promise() {
        for e in entries() {
            let known = CATALOG.iter().find(|k| k.planned.name == e.info.name).expect("a CONTRACT name");
            assert!(known.family.is_some(), "{} is built but the catalog calls it planned", e.info.name);
            assert_eq!(known.planned.consistency, e.info.consistency, "{}", e.info.name);
            assert!(e.info.implemented);
            assert_eq!(find(e.info.name).map(|p| p.name), Some(e.info.name));
        }
        assert!(entry("tiga-not-yet").is_none());
        assert!(not_runnable("k2").contains("not implemented yet"));
        assert!(not_runnable("nope").contains("unknown protocol"));
    }

    #[cfg(all(
        feature = "twopc",
        feature = "tiga",
        feature = "deterministic",
        feature = "readatomic",
        feature = "causal"
    ))]
    #[test]
    fn the_default_build_runs_every_written_protocol() {
        let names: Vec<&str> = implemented_protocols().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "2pl-paxos",
                "calvin",
                "tiga",
                "slog",
                "ra-noc2",
                "ra-noc",
                "eiger-noc2",
                "eiger-port",
                "ramp-f",
                "ramp-s",
                "lora"
            ]
        );
    }
}
