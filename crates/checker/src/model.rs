//! Consistency models a history can be checked against, and the anomalies
//! (named as Adya and Elle name them) each model forbids.

use std::fmt;

/// A consistency level a Meridian protocol promises, and what violates it.
///
/// Every model forbids aborted and intermediate reads (G1a, G1b), garbage
/// reads, duplicate list elements and internal inconsistency.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Model {
    /// Serializable in an order that respects real time: additionally no
    /// real-time violations.
    StrictSerializable,
    /// Equivalent to a serial execution of the committed transactions: no
    /// dependency cycles (G0, G1c, G-single, G2) and one order of appends
    /// per list key (incompatible orders).
    Serializable,
    /// Read atomic with read-your-writes: no fractured reads, and sessions
    /// see their own writes (causality violations). Dependency cycles are
    /// allowed.
    ReadAtomic,
    /// Read atomic without read-your-writes: no fractured reads; a session
    /// may miss its own earlier writes (RAMP-OPW: "Scalable Atomic
    /// Visibility with RAMP Transactions" §4.3 notes that one-phase writes
    /// give up read-your-writes). Dependency cycles are allowed.
    ReadAtomicNoRyw,
    /// Transactional causal consistency with convergence: reads see every
    /// write in their causal past and causal order is acyclic (causality
    /// violations), and one version order per key explains every
    /// observation (divergence). Dependency cycles are allowed.
    Causal,
    /// Transactional causal consistency without convergence (what
    /// Eiger-PORT promises: "Performance-Optimal Read-Only Transactions",
    /// and NOC-NOC §6.1): causal order is acyclic and every session's
    /// observations are explained by a version order per key of its own,
    /// consistent with its causal past (causality violations); two
    /// sessions may order concurrent versions differently. Dependency
    /// cycles are allowed.
    CausalNoConvergence,
}

impl Model {
    pub const ALL: [Model; 6] = [
        Model::StrictSerializable,
        Model::Serializable,
        Model::ReadAtomic,
        Model::ReadAtomicNoRyw,
        Model::Causal,
        Model::CausalNoConvergence,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Model::StrictSerializable => "strict-serializable",
            Model::Serializable => "serializable",
            Model::ReadAtomic => "read-atomic",
            Model::ReadAtomicNoRyw => "read-atomic-no-ryw",
            Model::Causal => "causal",
            Model::CausalNoConvergence => "causal-no-convergence",
        }
    }

    pub fn from_name(name: &str) -> Option<Model> {
        Model::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether a history showing `kind` violates this model.
    pub fn forbids(self, kind: AnomalyKind) -> bool {
        use AnomalyKind::*;
        match self {
            Model::StrictSerializable => !matches!(kind, FracturedRead | Causality | Divergence),
            Model::Serializable => !matches!(kind, RealTime | FracturedRead | Causality | Divergence),
            Model::ReadAtomic => {
                matches!(kind, G1a | G1b | Internal | GarbageRead | DuplicateElements | FracturedRead | Causality)
            }
            Model::ReadAtomicNoRyw => {
                matches!(kind, G1a | G1b | Internal | GarbageRead | DuplicateElements | FracturedRead)
            }
            Model::Causal => {
                matches!(kind, G1a | G1b | Internal | GarbageRead | DuplicateElements | Causality | Divergence)
            }
            Model::CausalNoConvergence => {
                matches!(kind, G1a | G1b | Internal | GarbageRead | DuplicateElements | Causality)
            }
        }
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A kind of anomaly. The order is the order reports list them in.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum AnomalyKind {
    /// Write cycle: a dependency cycle of write-write edges only.
    G0,
    /// Aborted read: a committed transaction read a write of a failed one.
    G1a,
    /// Intermediate read: a committed transaction read a version another
    /// transaction overwrote itself before committing.
    G1b,
    /// Circular information flow: a cycle of write-write and write-read edges.
    G1c,
    /// A dependency cycle with exactly one read-write (anti-dependency) edge.
    GSingle,
    /// A dependency cycle with two or more anti-dependency edges.
    G2,
    /// A cycle that exists only with real-time order: serializable, but not
    /// in an order consistent with when transactions ran.
    RealTime,
    /// A transaction saw some but not all of another transaction's writes.
    FracturedRead,
    /// A read missed a write that causally precedes it (including the
    /// session's own earlier writes), or causal order is cyclic.
    Causality,
    /// No single version order per key explains every observation.
    Divergence,
    /// A transaction's reads disagree with its own earlier reads and writes.
    Internal,
    /// Two reads of a list key are not prefixes of one order of appends.
    IncompatibleOrder,
    /// A read of a list contains an element more than once.
    DuplicateElements,
    /// A read returned a value no transaction ever wrote.
    GarbageRead,
}

impl AnomalyKind {
    pub const ALL: [AnomalyKind; 14] = [
        AnomalyKind::G0,
        AnomalyKind::G1a,
        AnomalyKind::G1b,
        AnomalyKind::G1c,
        AnomalyKind::GSingle,
        AnomalyKind::G2,
        AnomalyKind::RealTime,
        AnomalyKind::FracturedRead,
        AnomalyKind::Causality,
        AnomalyKind::Divergence,
        AnomalyKind::Internal,
        AnomalyKind::IncompatibleOrder,
        AnomalyKind::DuplicateElements,
        AnomalyKind::GarbageRead,
    ];

    /// The name used in reports (Elle's spelling where Elle has one).
    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::G0 => "G0",
            AnomalyKind::G1a => "G1a",
            AnomalyKind::G1b => "G1b",
            AnomalyKind::G1c => "G1c",
            AnomalyKind::GSingle => "G-single",
            AnomalyKind::G2 => "G2",
            AnomalyKind::RealTime => "real-time-violation",
            AnomalyKind::FracturedRead => "fractured-read",
            AnomalyKind::Causality => "causality-violation",
            AnomalyKind::Divergence => "divergence",
            AnomalyKind::Internal => "internal",
            AnomalyKind::IncompatibleOrder => "incompatible-order",
            AnomalyKind::DuplicateElements => "duplicate-elements",
            AnomalyKind::GarbageRead => "garbage-read",
        }
    }

    pub fn from_name(name: &str) -> Option<AnomalyKind> {
        AnomalyKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Model::ALL {
            assert_eq!(Model::from_name(m.name()), Some(m));
        }
        for k in AnomalyKind::ALL {
            assert_eq!(AnomalyKind::from_name(k.name()), Some(k));
        }
        assert_eq!(Model::from_name("linearizable"), None);
        assert_eq!(AnomalyKind::GSingle.name(), "G-single");
    }

    #[test]
    fn strict_serializable_adds_exactly_real_time_to_serializable() {
        for k in AnomalyKind::ALL {
            let strict = Model::StrictSerializable.forbids(k);
            let ser = Model::Serializable.forbids(k);
            assert_eq!(strict, ser || k == AnomalyKind::RealTime, "{k}");
        }
    }

    #[test]
    fn weak_models_tolerate_serializability_cycles() {
        for m in [Model::ReadAtomic, Model::ReadAtomicNoRyw, Model::Causal] {
            for k in [AnomalyKind::G0, AnomalyKind::G1c, AnomalyKind::GSingle, AnomalyKind::G2, AnomalyKind::RealTime] {
                assert!(!m.forbids(k), "{m} {k}");
            }
            assert!(m.forbids(AnomalyKind::G1a));
        }
        assert!(Model::ReadAtomic.forbids(AnomalyKind::Causality) && Model::Causal.forbids(AnomalyKind::Causality));
        assert!(!Model::ReadAtomicNoRyw.forbids(AnomalyKind::Causality), "sessions may miss their own writes");
        assert!(Model::ReadAtomicNoRyw.forbids(AnomalyKind::FracturedRead));
        assert!(Model::Causal.forbids(AnomalyKind::Divergence));
        assert!(!Model::ReadAtomic.forbids(AnomalyKind::Divergence));
        assert!(Model::ReadAtomic.forbids(AnomalyKind::FracturedRead));
    }
}
