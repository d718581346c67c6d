//! Every protocol name of the CONTRACT, what it promises, and whether
//! Meridian implements it yet; plus [`with_protocol!`], which turns a name
//! into the protocol type for generic code (the simulator and the runtime
//! are generic over `Protocol`).

use meridian_core::{Consistency, ParamDoc, Protocol, Shapes};

/// A protocol Meridian knows by name.
#[derive(Clone, Copy, Debug)]
pub struct ProtocolInfo {
    pub name: &'static str,
    pub consistency: Consistency,
    /// Implemented and runnable (otherwise planned).
    pub implemented: bool,
    pub summary: &'static str,
    pub params: &'static [ParamDoc],
    /// The transaction shapes it runs (planned: as its paper describes).
    pub shapes: Shapes,
}

const fn planned(name: &'static str, consistency: Consistency, summary: &'static str) -> ProtocolInfo {
    let shapes = match consistency {
        // The read-atomic and causal algorithms of the NOC-NOC paper and
        // their baselines run read-only and write-only transactions.
        ReadAtomic | Causal => Shapes::READ_ONLY_WRITE_ONLY,
        _ => Shapes::GENERAL,
    };
    ProtocolInfo { name, consistency, implemented: false, summary, params: &[], shapes }
}

const fn implemented<P: Protocol>(summary: &'static str, params: &'static [ParamDoc]) -> ProtocolInfo {
    ProtocolInfo { name: P::NAME, consistency: P::CONSISTENCY, implemented: true, summary, params, shapes: P::SHAPES }
}

use Consistency::*;

/// Every CONTRACT protocol name, in the CONTRACT's order.
pub const PROTOCOLS: &[ProtocolInfo] = &[
    implemented::<crate::twopl_paxos::TwoPlPaxos>(
        "two-phase locking (wound-wait) + two-phase commit over per-shard Multi-Paxos",
        crate::twopl_paxos::PARAMS,
    ),
    planned("occ-paxos", StrictSerializable, "optimistic concurrency control + 2PC over per-shard Multi-Paxos"),
    planned("calvin", StrictSerializable, "deterministic ordering and locking (Calvin)"),
    planned("tapir", StrictSerializable, "consolidated inconsistent replication + OCC (TAPIR)"),
    planned("raft-occ", StrictSerializable, "single-leader OCC commit over Raft"),
    implemented::<crate::tiga::Tiga>(
        "synchronized-clock consolidated concurrency control and consensus (Tiga)",
        crate::tiga::PARAMS,
    ),
    planned("slog", StrictSerializable, "home-region ordering with deterministic execution (SLOG)"),
    planned("k2", StrictSerializable, "TrueTime batching + MVTO with replica reads (K2)"),
    planned("d2pl-ttc", StrictSerializable, "distributed 2PL with TrueTime commit wait (Spanner-like)"),
    planned("mvto-hlc", Serializable, "multi-version timestamp ordering with hybrid logical clocks"),
    planned("starry", StrictSerializable, "semi-leader commit with sequencer reordering (STARRY)"),
    planned("ra-noc2", ReadAtomic, "read atomic with one-round reads and one-phase writes (RA-NOC2)"),
    planned("ra-noc", ReadAtomic, "read atomic, NOC-NOC's earlier algorithm (RA-NOC)"),
    planned("eiger-noc2", Causal, "transactional causal consistency (Eiger-NOC2)"),
    planned("eiger-port", Causal, "transactional causal consistency (Eiger-PORT)"),
    planned("ramp-f", ReadAtomic, "read atomic multi-partition transactions, fast variant (RAMP-F)"),
    planned("ramp-s", ReadAtomic, "read atomic multi-partition transactions, small variant (RAMP-S)"),
    planned("lora", ReadAtomic, "SNOW-optimal read-atomic transactions (LORA)"),
];

/// Looks a protocol up by its CONTRACT name.
pub fn find(name: &str) -> Option<&'static ProtocolInfo> {
    PROTOCOLS.iter().find(|p| p.name == name)
}

/// Implemented protocols, in CONTRACT order.
pub fn implemented_protocols() -> impl Iterator<Item = &'static ProtocolInfo> {
    PROTOCOLS.iter().filter(|p| p.implemented)
}

/// Runs `$body` with `$P` bound to the protocol type named `$name`; the
/// whole expression is `Option<_>`, `None` for names not implemented.
#[macro_export]
macro_rules! with_protocol {
    ($name:expr, $P:ident => $body:expr) => {{
        match $name {
            "2pl-paxos" => {
                type $P = $crate::twopl_paxos::TwoPlPaxos;
                Some($body)
            }
            "tiga" => {
                type $P = $crate::tiga::Tiga;
                Some($body)
            }
            _ => None,
        }
    }};
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
        let names: Vec<&str> = PROTOCOLS.iter().map(|p| p.name).collect();
        assert_eq!(names, contract);
    }

    #[test]
    fn every_implemented_protocol_dispatches() {
        for p in implemented_protocols() {
            let name = with_protocol!(p.name, P => <P as Protocol>::NAME);
            assert_eq!(name, Some(p.name));
        }
        assert!(with_protocol!("tiga-not-yet", P => <P as Protocol>::NAME).is_none());
    }
}
