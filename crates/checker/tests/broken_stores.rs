//! End-to-end claims: histories from a correct toy store pass every model,
//! and each deliberately broken store is caught with the anomaly its bug
//! produces (see `support` for the stores and the simulated clients).

mod support;

use meridian_checker::{AnomalyKind, CheckReport, HistoryOp, Model, check, validate};
use support::{
    DivergentReplicas, LaggingReplicas, PiecemealWrites, ReadCommitted, Run, Serial, Snapshot, StaleReplica, Store,
    Uncommitted, Workload, simulate,
};

const SEEDS: [u64; 4] = [1, 2, 3, 4];

fn run(store: &mut dyn Store, workload: Workload, seed: u64) -> Vec<HistoryOp> {
    let h = simulate(store, workload, Run { processes: 5, txns: 300, seed });
    assert_eq!(validate(&h), Ok(()), "the framework must emit well-formed histories");
    h
}

fn correct() -> Serial {
    Serial::new(0.1, 0.05)
}

/// The correct store passes `model` on `workload` for every seed.
fn assert_correct_passes(workload: Workload, model: Model) {
    for seed in SEEDS {
        let r = check(&run(&mut correct(), workload, seed), model);
        assert!(r.valid, "correct store, {workload:?}, seed {seed}:\n{}", r.summary());
    }
}

/// A fresh broken store fails `model` with `kind` for every seed (and the
/// correct store passes on the same workload). Returns the reports.
fn assert_caught<S: Store>(
    make: impl Fn() -> S,
    workload: Workload,
    model: Model,
    kind: AnomalyKind,
) -> Vec<CheckReport> {
    assert_correct_passes(workload, model);
    SEEDS
        .iter()
        .map(|&seed| {
            let r = check(&run(&mut make(), workload, seed), model);
            assert!(!r.valid && r.has(kind), "expected {kind} under {model}, seed {seed}:\n{}", r.summary());
            let example = r.anomalies.iter().find(|a| a.kind == kind);
            assert!(example.is_some_and(|a| !a.txns.is_empty() && !a.explanation.is_empty()));
            r
        })
        .collect()
}

const WORKLOADS: [Workload; 7] = [
    Workload::ListAppend { keys: 3 },
    Workload::Registers { keys: 3 },
    Workload::ReadOrWrite { keys: 3 },
    Workload::WriteSkew { pairs: 2 },
    Workload::CrossFlow { keys: 3 },
    Workload::DoubleWrite { keys: 2, list: false },
    Workload::Mixed { keys: 4 },
];

#[test]
fn correct_store_passes_every_model_on_every_workload() {
    for workload in WORKLOADS {
        for model in Model::ALL {
            assert_correct_passes(workload, model);
        }
    }
}

#[test]
fn correct_store_histories_exercise_failures_and_indeterminate_txns() {
    let r = check(&run(&mut correct(), Workload::ListAppend { keys: 3 }, 1), Model::StrictSerializable);
    assert!(r.valid);
    assert!(r.stats.txns_fail > 0 && r.stats.txns_info > 0, "{:?}", r.stats);
    assert!(r.stats.edges > 300, "{:?}", r.stats);
}

#[test]
fn interleaved_writes_installed_in_conflicting_orders_are_g0() {
    assert_caught(PiecemealWrites::default, Workload::ReadOrWrite { keys: 3 }, Model::Serializable, AnomalyKind::G0);
}

#[test]
fn reading_writes_of_aborted_txns_is_g1a() {
    for model in Model::ALL {
        assert_caught(|| Uncommitted::new(0.3), Workload::ListAppend { keys: 3 }, model, AnomalyKind::G1a);
    }
}

#[test]
fn reading_intermediate_writes_is_g1b() {
    for list in [false, true] {
        assert_caught(
            || Uncommitted::new(0.0),
            Workload::DoubleWrite { keys: 2, list },
            Model::Serializable,
            AnomalyKind::G1b,
        );
    }
}

#[test]
fn dirty_reads_of_each_others_writes_are_g1c() {
    assert_caught(|| Uncommitted::new(0.0), Workload::CrossFlow { keys: 3 }, Model::Serializable, AnomalyKind::G1c);
}

#[test]
fn read_skew_and_lost_updates_under_read_committed_are_g_single() {
    assert_caught(ReadCommitted::default, Workload::Registers { keys: 3 }, Model::Serializable, AnomalyKind::GSingle);
}

#[test]
fn write_skew_under_snapshot_isolation_is_g2_and_nothing_weaker() {
    let workload = Workload::WriteSkew { pairs: 2 };
    for r in assert_caught(Snapshot::default, workload, Model::Serializable, AnomalyKind::G2) {
        // Snapshot isolation forbids every cycle but those with two
        // adjacent anti-dependencies.
        for k in [AnomalyKind::G0, AnomalyKind::G1c, AnomalyKind::GSingle] {
            assert!(!r.has(k), "{}", r.summary());
        }
    }
    // And it is read atomic and causal.
    for seed in SEEDS {
        for model in [Model::ReadAtomic, Model::Causal] {
            let r = check(&run(&mut Snapshot::default(), workload, seed), model);
            assert!(r.valid, "{model}, seed {seed}:\n{}", r.summary());
        }
    }
}

#[test]
fn stale_reads_after_completed_writes_are_serializable_but_real_time_violations() {
    let workload = Workload::Registers { keys: 3 };
    assert_caught(|| StaleReplica::new(5), workload, Model::StrictSerializable, AnomalyKind::RealTime);
    for seed in SEEDS {
        let r = check(&run(&mut StaleReplica::new(5), workload, seed), Model::Serializable);
        assert!(r.valid, "seed {seed}:\n{}", r.summary());
    }
}

#[test]
fn non_atomic_visibility_of_multi_key_writes_is_a_fractured_read() {
    assert_caught(
        PiecemealWrites::default,
        Workload::ReadOrWrite { keys: 3 },
        Model::ReadAtomic,
        AnomalyKind::FracturedRead,
    );
}

#[test]
fn sessions_missing_their_own_writes_are_causality_violations() {
    let workload = Workload::ListAppend { keys: 3 };
    for model in [Model::Causal, Model::ReadAtomic] {
        let reports = assert_caught(|| LaggingReplicas::new(3, false), workload, model, AnomalyKind::Causality);
        let own = reports
            .iter()
            .flat_map(|r| &r.anomalies)
            .any(|a| a.kind == AnomalyKind::Causality && a.explanation.contains("read-your-writes"));
        assert!(own, "{model}: no read-your-writes example");
    }
}

#[test]
fn seeing_an_effect_without_its_cause_is_a_causality_violation() {
    // Sticky sessions read their own writes, so read atomicity holds; keys
    // replicate independently, so causality does not.
    let workload = Workload::CrossFlow { keys: 3 };
    let reports = assert_caught(|| LaggingReplicas::new(3, true), workload, Model::Causal, AnomalyKind::Causality);
    for r in &reports {
        let cross_session = r.anomalies.iter().any(|a| {
            a.kind == AnomalyKind::Causality
                && a.explanation.contains("which causally precedes it")
                && a.txns[0].process != a.txns[1].process
        });
        assert!(cross_session, "{}", r.summary());
    }
    for seed in SEEDS {
        let r = check(&run(&mut LaggingReplicas::new(3, true), workload, seed), Model::ReadAtomic);
        assert!(r.valid, "seed {seed}:\n{}", r.summary());
    }
}

#[test]
fn replicas_ordering_concurrent_appends_differently_diverge() {
    assert_caught(
        || DivergentReplicas::new(3),
        Workload::ListAppend { keys: 2 },
        Model::Causal,
        AnomalyKind::Divergence,
    );
}

#[test]
fn simulation_and_checking_are_deterministic() {
    let workload = Workload::Registers { keys: 3 };
    let a = run(&mut ReadCommitted::default(), workload, 7);
    let b = run(&mut ReadCommitted::default(), workload, 7);
    assert_eq!(a, b);
    for model in Model::ALL {
        let (x, y) = (check(&a, model), check(&b, model));
        assert_eq!(x.to_json(), y.to_json());
        assert_eq!(x.summary(), y.summary());
    }
    assert_ne!(a, run(&mut ReadCommitted::default(), workload, 8));
}

#[test]
fn a_fifty_thousand_txn_valid_history_checks_clean_under_every_model() {
    let h = simulate(
        &mut Serial::new(0.05, 0.02),
        Workload::Mixed { keys: 2_000 },
        Run { processes: 20, txns: 50_000, seed: 42 },
    );
    for model in Model::ALL {
        let r = check(&h, model);
        assert!(r.valid, "{model}:\n{}", r.summary());
        assert_eq!(r.stats.txns_ok + r.stats.txns_fail + r.stats.txns_info, 50_000);
        assert!(r.stats.txns_ok > 45_000 && r.stats.edges > 0, "{:?}", r.stats);
    }
}
