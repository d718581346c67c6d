//! `meridian demo`: every implemented protocol, side by side, on the
//! embedded three-region experiment, as one table.

use crate::registry;
use crate::report::Report;
use crate::runner::{RunOptions, run_experiment};
use meridian_experiment::{ConfigError, Experiment};
use std::fmt::Write;

/// Runs the demo experiment with every implemented protocol.
pub fn run_demo(mut on_protocol: impl FnMut(&str)) -> Result<Vec<Report>, ConfigError> {
    let mut reports = Vec::new();
    for p in registry::implemented_protocols() {
        on_protocol(p.name);
        let mut exp = Experiment::demo();
        exp.set_protocol(p.name);
        // A protocol that cannot run the demo's workload runs the one it
        // can, so that every protocol is in the table.
        exp.workload = meridian_workload::workload_for(p.shapes, &exp.workload);
        reports.push(run_experiment(&exp, RunOptions { record_history: true, ..Default::default() })?.report);
    }
    Ok(reports)
}

/// The results table: one row per protocol, median latency per client
/// region.
pub fn table(reports: &[Report]) -> String {
    let regions: Vec<String> =
        reports.iter().flat_map(|r| r.latency_ms_by_region.keys().cloned()).fold(Vec::new(), |mut acc, r| {
            if !acc.contains(&r) {
                acc.push(r);
            }
            acc
        });
    let mut s = String::new();
    let _ = write!(s, "{:<12} {:<20} {:>9} {:>7} {:>10}", "protocol", "promise", "committed", "aborted", "txn/s");
    for r in &regions {
        let _ = write!(s, " {:>16}", format!("p50 {r}"));
    }
    let _ = writeln!(s, "  check");
    for rep in reports {
        let _ = write!(
            s,
            "{:<12} {:<20} {:>9} {:>7} {:>10.1}",
            rep.protocol, rep.consistency, rep.txns.committed, rep.txns.aborted, rep.throughput_tps
        );
        for r in &regions {
            let p50 = rep.latency_ms_by_region.get(r).map(|p| format!("{:.1} ms", p.p50)).unwrap_or_else(|| "-".into());
            let _ = write!(s, " {:>16}", p50);
        }
        let verdict = match rep.check_valid() {
            Some(true) => "valid",
            Some(false) => "INVALID",
            None => "not checked",
        };
        let _ = writeln!(s, "  {verdict}");
    }
    s
}
