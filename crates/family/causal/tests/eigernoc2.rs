//! `eiger-noc2` under the simulator: the claims of "NOC-NOC: Towards
//! Performance-optimal Distributed Transactions" §6 — reads finish in
//! exactly one round, writes return after one phase, a read request's
//! metadata does not grow with the transaction — each run's history
//! checked at `causal` (causality, read atomicity, convergence), with the
//! counter-example switch that shows the checker catching what the global
//! safe view prevents.

/// The read-atomic protocols' simulator fixture: the same contended
/// `ramp-ycsb` run suits the causal ones.
#[path = "../../readatomic/tests/common/mod.rs"]
mod common;

use common::{
    assert_one_round_reads, assert_recovered, assert_valid, experiment, partition_restart, shortened, with_crash,
    with_params,
};
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
    assert_one_round_reads(&run(|t| t), "causal");
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
    assert_eq!(out.report.check_valid(), Some(false));
}

/// The largest metadata of one key's read request, with transactions of
/// `txn_size` keys.
fn read_request_metadata_max(txn_size: u32) -> u64 {
    let out = run(|t| {
        t.replace("txn_size = 3", &format!("txn_size = {txn_size}"))
            .replace("keys = 30", "keys = 1000")
            .replace("duration_s = 2.0", "duration_s = 1.0")
    });
    assert_valid(&out);
    out.report.observations["read_request_metadata_bytes"].max
}

/// §6.3 (C_R): a key's read request carries the GSV and the client's own
/// latest write of it (its stamp and transaction id) — postcard-encoded,
/// the same at 4 keys per transaction as at 128.
#[test]
fn a_read_request_carries_constant_metadata_whatever_the_transaction_size() {
    let at_4 = read_request_metadata_max(4);
    let at_128 = read_request_metadata_max(128);
    assert_eq!(at_4, at_128, "at 4 and at 128 keys");
    assert!(at_128 <= 3 * 11, "three tagged varint timestamps at most: {at_128} bytes");
}

/// A partition crashed mid-run restarts from its checkpoint and log: every
/// acknowledged write is still there, its clock and safe time are at
/// least what it told, the votes and commits the crash lost are recovered
/// by the termination (late votes, vote requests), and the history stays
/// causal and convergent.
#[test]
fn a_partition_restarted_from_its_log_keeps_every_acknowledged_write_and_its_safe_time() {
    assert_recovered(&run(partition_restart));
}

/// A client crashed mid-run restarts with its recorded own writes (its
/// sessions are served again once every partition told it its safe time:
/// `restarted_client_serves_nothing_before_every_partition_told_its_safe_time`
/// in the handler tests), and the history stays causal and convergent.
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
