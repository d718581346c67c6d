//! TPC-C end to end in the simulator: both protocols run the five
//! transactions on a small deployment, their histories are strictly
//! serializable and TPC-C's consistency conditions 1-4 hold on the final
//! database read through the protocol; a New-Order that skips the district
//! update (a test-only switch) breaks condition 2, and the run fails.

use meridian_cli::runner::{RunOptions, run_experiment};
use meridian_experiment::Experiment;

const SMALL: &str = r#"
[cluster]
preset = "tiga-gcp"
server_regions = ["south-carolina", "finland", "brazil"]
shards = 2
replicas_per_shard = 3

[clients]
regions = ["south-carolina", "finland"]
per_region = 2
mode = "open"
rate_tps = 10
max_outstanding = 20
max_retries = 10

[workload]
kind = "tpcc"
warehouses = 4
customers_per_district = 60
items = 500
remote_item_pct = 10.0

[run]
duration_s = 6.0
warmup_s = 1.0
drain_s = 6.0
seed = 3

[protocol]
name = "2pl-paxos"
"#;

fn run(protocol: &str, broken: bool) -> meridian_cli::report::Report {
    let mut exp = Experiment::from_str(SMALL, "tpcc-small.toml").unwrap_or_else(|e| panic!("{e}"));
    exp.set_protocol(protocol);
    exp.workload.broken_new_order = broken;
    run_experiment(&exp, RunOptions { record_history: true, ..Default::default() }).expect("runs").report
}

#[test]
fn both_protocols_keep_the_tpcc_consistency_conditions_and_strict_serializability() {
    for protocol in ["2pl-paxos", "tiga"] {
        let r = run(protocol, false);
        let audit = r.audit.clone().expect("tpcc runs are audited");
        assert!(audit.valid, "{protocol}: {audit:?}");
        assert_eq!(r.check_valid(), Some(true), "{protocol}: {:?}", r.check);
        for t in ["new-order", "payment", "order-status", "delivery", "stock-level"] {
            assert!(
                r.txns_by_type.get(t).is_some_and(|n| n.committed > 0),
                "{protocol}: no {t} committed: {:?}",
                r.txns_by_type
            );
        }
        assert!(r.latency_ms_by_type["new-order"].all.p50 > 0.0);
    }
}

#[test]
fn a_new_order_that_skips_the_district_update_fails_the_run() {
    for protocol in ["2pl-paxos", "tiga"] {
        let r = run(protocol, true);
        let audit = r.audit.clone().expect("audited");
        assert!(!audit.valid, "{protocol}: the broken New-Order went unnoticed");
        assert!(audit.violations.iter().any(|v| v.starts_with("condition 2")), "{protocol}: {audit:?}");
        assert_eq!(r.check_valid(), Some(false), "a failed audit fails the run");
    }
}
