//! `eiger-port` under the simulator: the claims of "Performance-Optimal
//! Read-Only Transactions" as NOC-NOC §6.1 states them — reads finish in
//! exactly one round, writes wait for the commit (two phases on the
//! client's path, against Eiger-NOC2's one) — each run's history checked
//! at `causal-no-convergence`, with the counter-example switch that shows
//! the checker catching a client that misses its own write.

/// The read-atomic protocols' simulator fixture: the same contended
/// `ramp-ycsb` run suits the causal ones.
#[path = "../../readatomic/tests/common/mod.rs"]
mod common;

use common::{
    assert_one_round_reads, assert_recovered, assert_valid, experiment, partition_restart, shortened, with_crash,
    with_params,
};
use meridian_causal::eigernoc2::EigerNoc2;
use meridian_causal::eigerport::EigerPort;
use meridian_checker::{AnomalyKind, Model, check};
use meridian_core::Protocol;
use meridian_harness::runner::{RunOptions, RunOutput, run_sim};

/// The base run of protocol `P`, edited, with its history.
fn run_of<P: Protocol>(edit: impl FnOnce(String) -> String) -> RunOutput {
    let exp = experiment(P::NAME, edit);
    let opts = RunOptions { record_history: true, ..Default::default() };
    run_sim::<P>(&exp, opts).unwrap_or_else(|e| panic!("{e}"))
}

fn run(edit: impl FnOnce(String) -> String) -> RunOutput {
    run_of::<EigerPort>(edit)
}

/// §6.1 (O_R): every read ends after one round of GETs, with writes
/// racing it, and the history is causal, without convergence promised.
#[test]
fn reads_finish_in_exactly_one_round_and_stay_causal_without_convergence() {
    assert_one_round_reads(&run(|t| t), "causal-no-convergence");
}

/// Figure 8b in the simulator: sessions order concurrent versions of a
/// key differently (a session promotes its own write before another's
/// that others read after it), which the `causal` model, with
/// convergence, names as divergences — and nothing else; Eiger-NOC2's
/// histories converge (`reads_finish_in_exactly_one_round_and_stay_causal_and_convergent`).
#[test]
fn sessions_order_concurrent_versions_differently_which_only_convergence_forbids() {
    let out = run(|t| t);
    assert_valid(&out);
    let r = &out.report;
    assert!(r.counter("promoted_reads") > 0, "own writes read beyond the snapshot: {:?}", r.counters);
    assert!(r.counter("own_writes_passed_over") > 0, "Figure 8b's answers: {:?}", r.counters);
    let with_convergence = check(&out.history, Model::Causal);
    assert!(!with_convergence.valid, "{}", with_convergence.summary());
    assert!(
        with_convergence.anomalies.iter().all(|a| a.kind == AnomalyKind::Divergence),
        "{}",
        with_convergence.summary()
    );
}

/// §6.1: Eiger-PORT's write waits for the coordinator's commit — two
/// phases on the client's path — where Eiger-NOC2's returns after the
/// prepares (one), on the same run.
#[test]
fn a_write_takes_two_phases_on_the_clients_path_against_eiger_noc2s_one() {
    let port = run(|t| t);
    let noc2 = run_of::<EigerNoc2>(|t| t);
    assert_valid(&port);
    assert_valid(&noc2);
    let (p, n) = (&port.report, &noc2.report);
    assert!(p.counter("writes") > 200 && n.counter("writes") > 200, "{:?} {:?}", p.counters, n.counters);
    assert_eq!(p.counter("write_phases_on_client_path"), 2 * p.counter("writes"), "{:?}", p.counters);
    assert_eq!(n.counter("write_phases_on_client_path"), n.counter("writes"), "{:?}", n.counters);
}

/// The counter-example: a client's own write beyond its snapshot is not
/// promoted; the client's next reads miss it and the checker names the
/// missing own write (a causality violation).
#[test]
fn without_promoting_ones_own_write_the_checker_catches_the_missing_own_write() {
    let out = run(with_params("test_skip_own_promotion = true"));
    let verdict = check(&out.history, Model::CausalNoConvergence);
    assert!(!verdict.valid, "{}", verdict.summary());
    assert!(verdict.anomalies.iter().any(|a| a.kind == AnomalyKind::Causality), "{}", verdict.summary());
    assert_eq!(out.report.check_valid(), Some(false));
}

/// A partition crashed mid-run restarts from its checkpoint and log: the
/// versions keep their writers and promoted positions, the votes and
/// commits the crash lost are recovered by the termination, and the
/// history stays causal.
#[test]
fn a_partition_restarted_from_its_log_keeps_every_acknowledged_write_and_the_history_causal() {
    assert_recovered(&run(partition_restart));
}

/// A client crashed mid-run restarts with its recorded own writes and
/// serves again once every partition told it its safe time; the history
/// stays causal.
#[test]
fn a_client_restarted_from_its_log_keeps_the_history_causal() {
    let out = run(with_crash("client-south-carolina-0", 0.7, 0.9));
    assert_valid(&out);
    assert!(out.report.committed_per_s.last().copied().unwrap_or(0) > 0, "commits after the restart");
}

/// The same seed gives the same run.
#[test]
fn runs_are_deterministic_per_seed() {
    assert_eq!(run(shortened).trace_hash, run(shortened).trace_hash);
}
