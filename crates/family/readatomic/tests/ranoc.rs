//! `ra-noc` under the simulator: the claims NOC-NOC ("Towards
//! Performance-optimal Distributed Transactions", §3.2, Table 1, Appendix C)
//! makes of RA-NOC — NOCS-optimal reads (one round, never blocking,
//! constant metadata) with two-phase, blocking writes — each run's
//! history checked at read atomicity with read-your-writes.

mod common;

use common::{assert_valid, partition_restart, with_params};
use meridian_checker::{AnomalyKind, Model, check};
use meridian_harness::runner::RunOutput;

fn run(edit: impl FnOnce(String) -> String) -> RunOutput {
    common::run("ra-noc", edit)
}

/// §3.2 (O_R, N_R): every read ends after one round of GETs, with writes
/// racing it, and the history is read atomic with read-your-writes — the
/// writes' wait for every safe time gives it without a local view.
#[test]
fn reads_finish_in_exactly_one_round_and_stay_read_atomic_with_read_your_writes() {
    let out = run(|t| t);
    assert_valid(&out);
    let r = &out.report;
    assert_eq!(r.consistency, "read-atomic");
    assert!(r.counter("reads") > 200, "{:?}", r.counters);
    assert_eq!(r.counter("read_rounds"), r.counter("reads"), "one round each: {:?}", r.counters);
}

/// Appendix C (not N_W, not O_W): a write-only transaction waits for two
/// phases on the client's path, then for `min(last)` to pass it; RA-NOC2's
/// on the same run returns after one.
#[test]
fn a_write_takes_two_phases_and_waits_where_ra_noc2_takes_one() {
    let out = run(|t| t);
    assert_valid(&out);
    let r = &out.report;
    assert!(r.counter("writes") > 200, "{:?}", r.counters);
    assert_eq!(r.counter("write_phases_on_client_path"), 2 * r.counter("writes"), "{:?}", r.counters);
    assert!(r.counter("writes_blocked") > 0, "some writes met a partition behind: {:?}", r.counters);
    let noc2 = common::run("ra-noc2", |t| t);
    let w = |o: &RunOutput| o.report.latency_ms_by_type["write-only"].all.p50;
    assert!(w(&out) > w(&noc2), "RA-NOC's writes {} ms at p50, RA-NOC2's {} ms", w(&out), w(&noc2));
}

/// The counter-example: a writer that returns after its commit phase
/// without waiting for `min(last)` to pass its write (Algorithm 3 lines
/// 15-16) lets its session read below its own write — at a safe view a
/// partition with an older write pending still holds back — and the
/// checker names the lost read-your-writes; the same run with the wait is
/// valid.
#[test]
fn without_the_wait_for_every_safe_time_a_session_misses_its_write_and_the_checker_catches_it() {
    let out = run(with_params("test_skip_wait = true"));
    let verdict = check(&out.history, Model::ReadAtomic);
    assert!(verdict.has(AnomalyKind::Causality), "{}", verdict.summary());
    assert_eq!(out.report.check_valid(), Some(false));
}

/// The largest metadata of one key's read request and of one answer, with
/// transactions of `txn_size` keys.
fn read_metadata_max(txn_size: u32) -> (u64, u64) {
    let out = run(|t| {
        t.replace("txn_size = 3", &format!("txn_size = {txn_size}"))
            .replace("keys = 30", "keys = 1000")
            .replace("duration_s = 2.0", "duration_s = 1.0")
    });
    assert_valid(&out);
    let o = &out.report.observations;
    (o["read_request_metadata_bytes"].max, o["read_response_metadata_bytes"].max)
}

/// §3.2 (C_R): a read request carries one timestamp per key (the GSV; the
/// absent LSV is one byte) and an answer one (the safe time), at 4 keys
/// per transaction as at 128.
#[test]
fn read_metadata_is_one_timestamp_each_way_whatever_the_transaction_size() {
    let (request_4, answer_4) = read_metadata_max(4);
    let (request_128, answer_128) = read_metadata_max(128);
    assert_eq!(request_4, request_128, "the same at 4 and at 128 keys");
    assert_eq!(answer_4, answer_128, "the same at 4 and at 128 keys");
    assert!(request_128 <= 11 + 1, "one tagged varint timestamp and an absent one: {request_128} bytes");
    assert!(answer_128 <= 11, "one tagged varint timestamp: {answer_128} bytes");
}

/// A partition crashed mid-run restarts from its checkpoint and log: the
/// writes blocked on it wait (or ask it to pass them once back), every
/// acknowledged write is still there, and the history stays read atomic.
#[test]
fn a_partition_restarted_from_its_log_keeps_every_acknowledged_write() {
    let out = run(partition_restart);
    assert_valid(&out);
    let r = &out.report;
    assert!(r.counter("checkpoints") > 0, "{:?}", r.counters);
    assert!(r.committed_per_s.last().copied().unwrap_or(0) > 0, "commits after the restart");
}

#[test]
fn runs_are_deterministic_per_seed() {
    let a = run(|t| t);
    let b = run(|t| t);
    assert_eq!(a.trace_hash, b.trace_hash);
}
