//! `lora` under the simulator: the claims NOC-NOC ("Towards
//! Performance-optimal Distributed Transactions", §3.4 Table 1, §7) makes
//! of LORA, the SNOW-optimal read-atomic algorithm — reads finish in
//! exactly one round, writes return after one phase, both carry metadata
//! linear in the transaction's size (where RA-NOC2's is constant) — each
//! run's history checked at read atomicity with read-your-writes, with the
//! counter-example switch that shows the checker catching what reading
//! the known versions prevents.

mod common;

use common::{
    assert_recovered, assert_valid, partition_restart, run, shortened, with_crash, with_params, write_then_read_session,
};
use meridian_checker::{AnomalyKind, Model, check};
use meridian_core::{ParamValue, Params};
use meridian_readatomic::lora::Lora;
use meridian_readatomic::ramp::RampF;

/// Table 1 (O_R, N_R): every read ends after one round of GETs, with
/// writes racing it, and the history is read atomic with read-your-writes.
#[test]
fn reads_finish_in_exactly_one_round_and_stay_read_atomic_with_read_your_writes() {
    let out = run("lora", |t| t);
    assert_valid(&out);
    let r = &out.report;
    assert_eq!(r.consistency, "read-atomic");
    assert!(r.counter("reads") > 200, "{:?}", r.counters);
    assert_eq!(r.counter("read_rounds"), r.counter("reads"), "one round each: {:?}", r.counters);
    assert_eq!(r.counter("read_restarts"), 0);
}

/// Table 1 (O_W, N_W): a write-only transaction returns once its versions
/// are prepared everywhere; the commit runs in the background.
#[test]
fn a_write_only_transaction_returns_after_one_phase() {
    let out = run("lora", |t| t);
    assert_valid(&out);
    let r = &out.report;
    assert!(r.counter("writes") > 200, "{:?}", r.counters);
    assert_eq!(r.counter("write_phases_on_client_path"), r.counter("writes"), "{:?}", r.counters);
    assert!(r.counter("background_commits") > 0, "the commits still happen");
}

/// The largest metadata of one read request, of one answer and of one
/// write request of `protocol`, with transactions of `txn_size` keys.
fn metadata_max(protocol: &str, txn_size: u32) -> (u64, u64, u64) {
    let out = run(protocol, |t| {
        t.replace("txn_size = 3", &format!("txn_size = {txn_size}"))
            .replace("keys = 30", "keys = 1000")
            .replace("duration_s = 2.0", "duration_s = 1.0")
    });
    assert_valid(&out);
    let o = &out.report.observations;
    let max = |name: &str| o.get(name).map_or(0, |s| s.max);
    (max("read_request_metadata_bytes"), max("read_response_metadata_bytes"), max("write_request_metadata_bytes"))
}

/// §1 and Table 1 (not C_R, not C_W): LORA's read requests carry a
/// timestamp per key read, its answers each version's sibling keys and
/// its PREPAREs the transaction's keys — all grow from 4 to 128 keys per
/// transaction, postcard-encoded — where RA-NOC2's read request (two
/// timestamps per key) and answer (one timestamp) stay the same size.
#[test]
fn read_and_write_metadata_grow_with_the_transaction_size_where_ra_noc2_s_stay_constant() {
    let (request_4, answer_4, write_4) = metadata_max("lora", 4);
    let (request_128, answer_128, write_128) = metadata_max("lora", 128);
    assert!(
        request_128 > 10 * request_4,
        "LORA's read requests grow: {request_4} bytes at 4 keys, {request_128} at 128"
    );
    assert!(answer_128 > 10 * answer_4, "LORA's answers grow: {answer_4} bytes at 4 keys, {answer_128} at 128");
    assert!(write_128 > 10 * write_4, "LORA's prepares grow: {write_4} bytes at 4 keys, {write_128} at 128");
    let (noc2_request_4, noc2_answer_4, _) = metadata_max("ra-noc2", 4);
    let (noc2_request_128, noc2_answer_128, _) = metadata_max("ra-noc2", 128);
    assert_eq!(noc2_request_4, noc2_request_128, "RA-NOC2: two timestamps per key at 4 and at 128 keys");
    assert_eq!(noc2_answer_4, noc2_answer_128, "RA-NOC2: one timestamp per answer at 4 and at 128 keys");
    assert!(answer_128 > 100 * noc2_answer_128, "LORA {answer_128} bytes, RA-NOC2 {noc2_answer_128}");
}

/// The counter-example: reading the newest committed versions instead of
/// the ones the client knows, without checking them, meets a transaction
/// committed at one partition and not yet at another, and the checker
/// names the fractured reads.
#[test]
fn reading_the_newest_commits_instead_of_the_known_versions_fractures_reads_and_the_checker_catches_it() {
    let out = run("lora", with_params("test_read_latest = true"));
    let verdict = check(&out.history, Model::ReadAtomic);
    assert!(verdict.has(AnomalyKind::FracturedRead), "{}", verdict.summary());
    assert_eq!(out.report.check_valid(), Some(false));
}

/// Table 1 (RA+): a session that writes two fresh keys and reads them
/// back at once, on a network that loses a fifth of the messages, reads
/// its writes although they return after one phase — where RAMP-OPW's
/// one-phase writes, on the same session, are caught without them.
#[test]
fn a_session_reads_its_one_phase_writes_at_once_where_ramp_opw_s_does_not() {
    let (history, writes, phases) = write_then_read_session::<Lora>(Params::new(), false);
    assert!(writes > 100, "{writes}");
    assert_eq!(phases, writes, "one phase per write on the client's path");
    let verdict = check(&history, Model::ReadAtomic);
    assert!(verdict.valid, "{}", verdict.summary());

    let opw = Params::new().with("one_phase_writes", ParamValue::Bool(true));
    let (history, _, _) = write_then_read_session::<RampF>(opw, false);
    assert!(check(&history, Model::ReadAtomic).has(AnomalyKind::Causality), "RAMP-OPW misses its writes");
}

/// Garbage collection drops versions clients still know as their newest:
/// the partition answers with a newer commit, the client checks the read
/// against the versions' siblings and reads again when it is fractured;
/// the history stays read atomic with read-your-writes.
#[test]
fn versions_collected_under_a_read_are_replaced_by_newer_commits_and_reads_stay_atomic() {
    let out = run("lora", with_params("gc_window_ms = 5\ngc_tick_ms = 5"));
    assert_valid(&out);
    let r = &out.report;
    assert!(r.counter("gc_versions") > 0, "{:?}", r.counters);
    assert!(r.counter("versions_replaced") > 0, "{:?}", r.counters);
    assert!(r.counter("keys_learned") > 0, "the replacements teach the clients: {:?}", r.counters);
}

/// A partition crashed mid-run restarts from its checkpoint and log:
/// every acknowledged write is still there (the history stays read atomic
/// with read-your-writes); the termination protocol finishes the writes
/// whose COMMIT the crash lost.
#[test]
fn a_partition_restarted_from_its_log_keeps_every_acknowledged_write() {
    assert_recovered(&run("lora", partition_restart));
}

/// A client crashed between a write and its read restarts from its
/// records: its `last` of its own writes is durable, so its session still
/// reads the write (and its timestamps stay above those it issued before);
/// the same under load, with a client crashed mid-run.
#[test]
fn a_restarted_client_still_reads_its_own_writes() {
    let (history, writes, _) = write_then_read_session::<Lora>(Params::new(), true);
    assert!(writes > 100, "{writes}");
    let verdict = check(&history, Model::ReadAtomic);
    assert!(verdict.valid, "{}", verdict.summary());
    let out = run("lora", with_crash("client-south-carolina-0", 0.8, 0.9));
    assert_valid(&out);
    assert!(out.report.committed_per_s.last().copied().unwrap_or(0) > 0, "commits after the restart");
}

/// The same seed gives the same run.
#[test]
fn runs_are_deterministic_per_seed() {
    assert_eq!(run("lora", shortened).trace_hash, run("lora", shortened).trace_hash);
}
