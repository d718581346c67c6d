//! `eiger-noc2` under the simulator: the claims of "NOC-NOC: Towards
//! Performance-optimal Distributed Transactions" §6 — reads finish in
//! exactly one round, writes return after one phase, a read request's
//! metadata does not grow with the transaction — each run's history
//! checked at `causal` (causality, read atomicity, convergence), with the
//! counter-example switch that shows the checker catching what the global
//! safe view prevents.

mod common;

use common::{assert_valid, experiment, with_params};
use meridian_causal::eigernoc2::EigerNoc2;
use meridian_checker::{Model, check};
use meridian_harness::runner::{RunOptions, RunOutput, run_sim};

fn run(edit: impl FnOnce(String) -> String) -> RunOutput {
    let exp = experiment("eiger-noc2", edit);
    let opts = RunOptions { record_history: true, ..Default::default() };
    run_sim::<EigerNoc2>(&exp, opts).unwrap_or_else(|e| panic!("{e}"))
}

/// §6.3 (O_R, N_R): every read ends after one round of GETs, with writes
/// racing it, and the history is causal with convergence.
#[test]
fn reads_finish_in_exactly_one_round_and_stay_causal_and_convergent() {
    let out = run(|t| t);
    assert_valid(&out);
    let r = &out.report;
    assert_eq!(r.consistency, "causal");
    assert!(r.counter("reads") > 200, "{:?}", r.counters);
    assert_eq!(r.counter("read_rounds"), r.counter("reads"), "one round each: {:?}", r.counters);
    assert!(r.counter("keys_read_from_lsv") > 0, "some reads met their session's own uncommitted write");
    eprintln!("{:?}", r.counters);
}

/// §6.3 (O_W): a write-only transaction returns once every participant
/// prepared it; the coordinators commit afterwards.
#[test]
fn a_write_returns_after_one_phase() {
    let out = run(|t| t);
    assert_valid(&out);
    let r = &out.report;
    assert!(r.counter("writes") > 200, "{:?}", r.counters);
    assert_eq!(r.counter("write_phases_on_client_path"), r.counter("writes"), "{:?}", r.counters);
    assert!(r.counter("commits") >= r.counter("writes") / 2, "the commits still happen: {:?}", r.counters);
}

/// The counter-example: reads of the newest committed versions — beyond
/// the global safe view — see a session's later write committed at one
/// partition and miss its earlier one still pending at another; the
/// checker names it.
#[test]
fn reading_beyond_the_gsv_breaks_causality_and_the_checker_catches_it() {
    let out = run(with_params("test_read_beyond_gsv = true"));
    let verdict = check(&out.history, Model::Causal);
    assert!(!verdict.valid, "{}", verdict.summary());
    eprintln!("{}", verdict.summary());
    assert_eq!(out.report.check_valid(), Some(false));
}
