//! Cross-check against an independent implementation of Elle's approach:
//! on many list-append histories, from the correct store and from several
//! broken ones, the `adya` crate and this checker must agree on whether
//! each history is serializable and strict serializable.

mod support;

use meridian_checker::{HistoryOp, Model, check, to_jsonl};
use support::{
    DivergentReplicas, LaggingReplicas, PiecemealWrites, ReadCommitted, Run, Serial, Snapshot, StaleReplica, Store,
    Uncommitted, Workload, simulate,
};

const MODELS: [(Model, &str); 2] =
    [(Model::StrictSerializable, "strict-serializable"), (Model::Serializable, "serializable")];

type MakeStore = fn() -> Box<dyn Store>;

/// Stores and list workloads; the correct store appears with several
/// workloads so that valid histories are well represented.
fn cases() -> Vec<(&'static str, MakeStore, Workload)> {
    vec![
        ("serial", || Box::new(Serial::new(0.1, 0.1)), Workload::ListAppend { keys: 3 }),
        ("serial", || Box::new(Serial::new(0.1, 0.1)), Workload::ReadOrWrite { keys: 4 }),
        ("serial", || Box::new(Serial::new(0.0, 0.2)), Workload::CrossFlow { keys: 3 }),
        ("serial", || Box::new(Serial::new(0.1, 0.0)), Workload::DoubleWrite { keys: 2, list: true }),
        ("stale-replica", || Box::new(StaleReplica::new(4)), Workload::ReadOrWrite { keys: 3 }),
        ("stale-replica", || Box::new(StaleReplica::new(30)), Workload::ListAppend { keys: 4 }),
        ("piecemeal-writes", || Box::new(PiecemealWrites::default()), Workload::ReadOrWrite { keys: 4 }),
        ("uncommitted", || Box::new(Uncommitted::new(0.0)), Workload::CrossFlow { keys: 3 }),
        ("aborting-uncommitted", || Box::new(Uncommitted::new(0.3)), Workload::ListAppend { keys: 3 }),
        ("intermediate", || Box::new(Uncommitted::new(0.0)), Workload::DoubleWrite { keys: 2, list: true }),
        ("read-committed", || Box::new(ReadCommitted::default()), Workload::ListAppend { keys: 3 }),
        ("snapshot", || Box::new(Snapshot::default()), Workload::ListAppend { keys: 4 }),
        ("lagging-replicas", || Box::new(LaggingReplicas::new(3, false)), Workload::ListAppend { keys: 3 }),
        ("divergent-replicas", || Box::new(DivergentReplicas::new(2)), Workload::ListAppend { keys: 3 }),
    ]
}

const SEEDS_PER_CASE: u64 = 12;

fn adya_verdict(h: &[HistoryOp], model: &str) -> adya::Valid {
    let parsed = adya::History::from_json(&to_jsonl(h)).expect("adya reads our histories");
    let opts = adya::Opts { models: vec![model.into()], ..Default::default() };
    adya::check(&parsed, adya::Workload::ListAppend, &opts).valid
}

#[test]
fn adya_and_meridian_agree_on_serializability_of_list_append_histories() {
    let mut decided = [0usize; 2];
    let mut undecided = [0usize; 2];
    let mut valid = [0usize; 2];
    let mut invalid = [0usize; 2];
    let mut disagreements = Vec::new();
    for (name, make, workload) in cases() {
        for seed in 0..SEEDS_PER_CASE {
            let run = Run { processes: 4, txns: 120, seed };
            let h = simulate(make().as_mut(), workload, run);
            for (i, (model, adya_model)) in MODELS.into_iter().enumerate() {
                let theirs = match adya_verdict(&h, adya_model) {
                    adya::Valid::True => true,
                    adya::Valid::False => false,
                    adya::Valid::Unknown => {
                        undecided[i] += 1;
                        continue;
                    }
                };
                decided[i] += 1;
                let ours = check(&h, model);
                if ours.valid {
                    valid[i] += 1;
                } else {
                    invalid[i] += 1;
                }
                if ours.valid != theirs {
                    disagreements.push(format!(
                        "{name} {workload:?} seed {seed} {model}: adya says {theirs}, we say:\n{}",
                        ours.summary()
                    ));
                }
            }
        }
    }
    eprintln!("decided {decided:?} undecided {undecided:?} valid {valid:?} invalid {invalid:?}");
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    for (i, (model, _)) in MODELS.into_iter().enumerate() {
        let total = decided[i] + undecided[i];
        assert!(decided[i] * 10 >= total * 9, "{model}: adya decided only {} of {total}", decided[i]);
        assert!(
            valid[i] >= 40 && invalid[i] >= 40,
            "{model}: {} valid and {} invalid histories exercised",
            valid[i],
            invalid[i]
        );
    }
    // The stale replica separates the two models: some histories must be
    // serializable but not strictly so.
    assert!(valid[1] > valid[0], "valid: {valid:?}");
}
