//! `ra-noc2` under the simulator: the claims of "NOC-NOC: Towards
//! Performance-optimal Distributed Transactions" (§4) — reads finish in
//! exactly one round, writes return after one phase, the metadata of a
//! read request is two timestamps per key and of an answer one, whatever
//! the transaction's size — each run's history checked at read atomicity
//! with read-your-writes, with the counter-example switch that shows the
//! checker catching what the global safe view prevents.

mod common;

use common::{assert_one_round_reads, assert_recovered, assert_valid, partition_restart, shortened, with_params};
use meridian_checker::{AnomalyKind, Model, check};
use meridian_harness::runner::RunOutput;

fn run(edit: impl FnOnce(String) -> String) -> RunOutput {
    common::run("ra-noc2", edit)
}

/// §4.3 (O_R, N_R): every read ends after one round of GETs, with writes
/// racing it, and the history is read atomic with read-your-writes.
#[test]
fn reads_finish_in_exactly_one_round_and_stay_read_atomic() {
    let out = run(|t| t);
    assert_one_round_reads(&out, "read-atomic");
    assert_eq!(out.report.counter("read_restarts"), 0);
}

/// §4.3 (O_W): a write-only transaction returns once its versions are
/// prepared; the commit runs in the background.
#[test]
fn a_write_only_transaction_returns_after_one_phase() {
    let out = run(|t| t);
    assert_valid(&out);
    let r = &out.report;
    assert!(r.counter("writes") > 200, "{:?}", r.counters);
    assert_eq!(r.counter("write_phases_on_client_path"), r.counter("writes"), "{:?}", r.counters);
    assert!(r.counter("background_commits") > 0, "the commits still happen");
}

/// The counter-example: a read of the newest committed versions — beyond
/// the global safe view — meets a transaction committed at one partition
/// and still pending at another, and the checker names the fractured
/// reads.
#[test]
fn reading_beyond_the_gsv_fractures_reads_and_the_checker_catches_it() {
    let out = run(with_params("test_read_beyond_gsv = true"));
    let verdict = check(&out.history, Model::ReadAtomic);
    assert!(verdict.has(AnomalyKind::FracturedRead), "{}", verdict.summary());
    assert_eq!(out.report.check_valid(), Some(false));
}

/// The largest metadata of one key's read request and of one answer, with
/// transactions of `txn_size` keys.
fn read_metadata_max(protocol: &str, txn_size: u32) -> (u64, u64) {
    let out = common::run(protocol, |t| {
        t.replace("txn_size = 3", &format!("txn_size = {txn_size}"))
            .replace("keys = 30", "keys = 1000")
            .replace("duration_s = 2.0", "duration_s = 1.0")
    });
    assert_valid(&out);
    let o = &out.report.observations;
    match protocol {
        "ra-noc2" => (o["read_request_metadata_bytes"].max, o["read_response_metadata_bytes"].max),
        _ => (0, o["metadata_bytes_per_version"].max),
    }
}

/// §4.1, §4.3 (C_R): a read request carries two timestamps per key (the
/// GSV and the LSV) and an answer one (the latest safe time), at 4 keys
/// per transaction as at 128 — postcard-encoded; RAMP-F's per-version
/// metadata grows with the transaction.
#[test]
fn a_read_request_carries_two_timestamps_and_an_answer_one_whatever_the_transaction_size() {
    let (request_4, answer_4) = read_metadata_max("ra-noc2", 4);
    let (request_128, answer_128) = read_metadata_max("ra-noc2", 128);
    assert_eq!(request_4, request_128, "two timestamps at 4 and at 128 keys");
    assert_eq!(answer_4, answer_128, "one timestamp at 4 and at 128 keys");
    assert!(request_128 <= 2 * 11, "two tagged varint timestamps: {request_128} bytes");
    assert!(answer_128 <= 11, "one tagged varint timestamp: {answer_128} bytes");
    let (_, ramp_4) = read_metadata_max("ramp-f", 4);
    let (_, ramp_128) = read_metadata_max("ramp-f", 128);
    assert!(ramp_128 > 10 * ramp_4, "RAMP-F's siblings grow: {ramp_4} bytes at 4 keys, {ramp_128} at 128");
}

/// RAMP's own measure of read metadata (`metadata_bytes_per_request`: a GET
/// to one partition and its answer, keys and values left out), on the same
/// 128-key transactions: RA-NOC2's is its two timestamps per key asked and
/// one per answer, so it grows only with the keys asked of a partition,
/// while RAMP-F's answers carry every version's sibling keys — a whole
/// transaction's keys per version returned.
#[test]
fn per_request_metadata_in_ramps_measure_is_two_timestamps_per_key_where_ramp_f_carries_siblings() {
    let at_128 = |protocol| {
        let out = common::run(protocol, |t| {
            t.replace("txn_size = 3", "txn_size = 128")
                .replace("keys = 30", "keys = 1000")
                .replace("duration_s = 2.0", "duration_s = 1.0")
        });
        assert_valid(&out);
        out.report.observations["metadata_bytes_per_request"].clone()
    };
    let (noc2, ramp) = (at_128("ra-noc2"), at_128("ramp-f"));
    // A GET asks at most the 128 keys of one transaction: a GSV, an LSV per
    // key and an LST, each a tagged varint of at most 11 bytes.
    assert!(noc2.max <= (1 + 128 + 1) * 11, "RA-NOC2 at most {} bytes", noc2.max);
    assert!(noc2.mean > 0.0, "observed: {noc2:?}");
    assert!(ramp.mean > 4.0 * noc2.mean, "RAMP-F {:.0} bytes per request, RA-NOC2 {:.0}", ramp.mean, noc2.mean);
}

/// A partition crashed mid-run restarts from its checkpoint and log:
/// every acknowledged write is still there and the safe time it told
/// before the crash still holds (the history stays read atomic with
/// read-your-writes); the termination protocol finishes the writes whose
/// COMMIT the crash lost.
#[test]
fn a_partition_restarted_from_its_log_keeps_every_acknowledged_write_and_its_safe_time() {
    assert_recovered(&run(partition_restart));
}

/// The same seed gives the same run.
#[test]
fn runs_are_deterministic_per_seed() {
    assert_eq!(run(shortened).trace_hash, run(shortened).trace_hash);
}

/// Server CPU per committed transaction (µs) of the base run with `keys`
/// keys per transaction over 1,000 keys, with `server_ns_per_key`.
fn server_us_per_txn(keys: u32, server_ns_per_key: u32) -> f64 {
    let out = run(|t| {
        let t = t.replace("keys = 30", "keys = 1000").replace("txn_size = 3", &format!("txn_size = {keys}"));
        format!("{t}\n[cpu]\nserver_ns_per_key = {server_ns_per_key}.0\n")
    });
    assert_valid(&out);
    let cpu = out.report.cpu.as_ref().expect("the report says what the CPU did");
    cpu.busy_ms_by_role["server"] * 1e3 / out.report.txns.committed as f64
}

/// The cost model's per-key CPU (docs/cost-model.md): a partition charges
/// every key it looks up, installs or commits. Half the transactions
/// read (one lookup a key), half write (an install and a commit a key),
/// so 20 more keys a transaction cost about 30 keys' worth more at the
/// partitions; without a per-key cost they cost only their bytes.
#[test]
fn with_a_per_key_cost_each_key_a_partition_touches_costs_it_cpu() {
    let free = server_us_per_txn(24, 0) - server_us_per_txn(4, 0);
    let charged = server_us_per_txn(24, 10_000) - server_us_per_txn(4, 10_000);
    let per_key_us = (charged - free) / 20.0 / 10.0;
    assert!((1.2..1.8).contains(&per_key_us), "{per_key_us:.2} keys touched per key of a transaction");
    assert!(free < 100.0, "without a per-key cost, 20 more keys cost {free:.1} µs");
}
