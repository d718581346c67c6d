//! `meridian demo`: every implemented protocol, side by side, on the
//! embedded three-region experiment: one table, a terminal chart of median
//! latency per region, a sentence per protocol on what its latency means,
//! and the same HTML report as `meridian experiment`.

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

/// Width of the longest bar of the terminal chart, in characters.
const CHART_WIDTH: usize = 40;

/// Median latency per client region, one bar per protocol, scaled to the
/// slowest.
pub fn chart(reports: &[Report]) -> String {
    let mut regions: Vec<&String> = reports.iter().flat_map(|r| r.latency_ms_by_region.keys()).collect();
    regions.sort();
    regions.dedup();
    let max =
        reports.iter().flat_map(|r| r.latency_ms_by_region.values().map(|p| p.p50)).fold(0.0f64, f64::max).max(1e-9);
    let name_width = reports.iter().map(|r| r.protocol.len()).max().unwrap_or(0);
    let mut s = String::from("p50 latency by client region (ms)\n");
    for region in regions {
        let _ = writeln!(s, "{region}");
        for rep in reports {
            let Some(p) = rep.latency_ms_by_region.get(region) else { continue };
            let cells = ((p.p50 / max) * CHART_WIDTH as f64).round() as usize;
            let _ =
                writeln!(s, "  {:<name_width$} {:<CHART_WIDTH$} {:.1}", rep.protocol, "#".repeat(cells.max(1)), p.p50);
        }
    }
    s
}

/// What each protocol's latency means, in one sentence: how many
/// wide-area round trips it commits in.
pub fn meaning(protocol: &str) -> String {
    match protocol {
        "2pl-paxos" => "2pl-paxos: a client's round trip to the shard leaders to lock and execute, another for \
            two-phase commit, and a Paxos round trip from the leaders to a majority for each phase's record: \
            two or three wide-area round trips, fewer next to the leaders."
            .into(),
        "tiga" => "tiga: one wide-area round trip from any region on the fast path (a super-quorum of replicas \
            agrees on a future timestamp), plus the headroom Δ; 1.5-2 round trips on the slow path."
            .into(),
        "calvin" => "calvin: the epoch's batch wait, a round trip to a majority of the regions' sequencers for \
            the batch, and the global log's Paxos round at its leader's region: more than one wide-area round \
            trip from every region, least next to the log's leader."
            .into(),
        "slog" => "slog: a single-home transaction commits in its home region alone (the batch wait, the local \
            log made durable, execution there): no wide-area round trip for a client next to its data's home; a \
            multi-home one waits for the orderer's region and every home's LockOnlyTxn."
            .into(),
        other => match registry::find(other) {
            Some(info) => format!("{other}: {}", info.summary),
            None => other.to_string(),
        },
    }
}

/// The demo's reports as a one-sweep experiment (`protocol.name` swept)
/// with its HTML report, written into `dir`.
pub fn write_report(reports: &[Report], dir: &std::path::Path) -> Result<std::path::PathBuf, String> {
    let names: Vec<String> = reports.iter().map(|r| format!("{:?}", r.protocol)).collect();
    let text = format!("{}\n[sweep]\n\"protocol.name\" = [{}]\n", Experiment::demo_text(), names.join(", "));
    let sweep =
        meridian_experiment::Sweep::from_str(&text, meridian_experiment::DEMO_FILE).map_err(|e| e.to_string())?;
    let points: Vec<_> = sweep.points().zip(reports).map(|(p, r)| (p, r.to_json())).collect();
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let outputs = meridian_report::Outputs {
        sweep: &sweep,
        points: &points,
        deployment: crate::experiment::deployment(&Experiment::demo()),
        reproduce: "meridian demo".into(),
    };
    meridian_report::write(dir, &outputs)?;
    Ok(dir.join("report.html"))
}
