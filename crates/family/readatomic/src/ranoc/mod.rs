//! `ra-noc`: NOC-NOC's NOCS-optimal read-atomic algorithm — "NOC-NOC:
//! Towards Performance-optimal Distributed Transactions", Appendix C,
//! Algorithms 3 and 4 (RA-NOC). Reads are RA-NOC2's, without the local
//! safe view: one round, never waiting at a partition, one timestamp per
//! key asked and one per answer (N_R, O_R, C_R of §3.2; Table 1). Writes are
//! two-phase and blocking: PREPARE, then COMMIT, on the client's path, and
//! the client returns only once every partition's safe time has passed the
//! write (Algorithm 3 lines 15-16: `while min(last) < ts do block`), which
//! gives read-your-writes without a local view. The paper's point (§1,
//! Figure 1, Appendix D): RA-NOC's reads are as good as RA-NOC2's, its
//! writes are not (N_W and O_W fail).
//!
//! Everything is RA-NOC2's code (`crate::ranoc2`), run with
//! `Variant::Noc`: the partition, its safe time (Algorithm 4's `HST`, with
//! RA-NOC2's departures), its versions and termination protocol, the
//! client's version vector, timestamps, reads and retries. What the
//! variant changes is in `ranoc2/client.rs` (`on_prepared`,
//! `on_committed`, `release`, `poll_behind`, `send_round`) and one
//! partition handler (`ranoc2/partition.rs` `advance`).
//!
//! # Where the paper is in the code
//!
//! | paper | file |
//! |---|---|
//! | Algorithm 3 line 1, `last` | `ranoc2/view.rs` (`View::learn`, `View::floor`) |
//! | lines 2-6 GET_ALL: `ts_c ← min(last)` over the partitions read, one GET per key | `ranoc2/client.rs` (`get_all`, `send_round`: `ts_p` is always none) |
//! | lines 7-11 PUT_ALL, prepare, `last ← max(ts_svr, last)` | `ranoc2/client.rs` (`prepare_all`, `on_prepared`, `learn`) |
//! | lines 12-14 commit on every partition written, on the client's path | `ranoc2/client.rs` (`on_prepared`, `on_committed`) |
//! | lines 15-17 `while min(last) < ts do block`, return | `ranoc2/client.rs` (`release`, `poll_behind`, `answer_writes`) |
//! | Algorithm 4 lines 1-3 `vers`, `latest`, `pending` | `ranoc2/partition.rs`, `ranoc2/safe.rs`, `ramp/versions.rs`, `ramp/pending.rs` |
//! | lines 4-7 PREPARE | `ranoc2/partition.rs` (`on_prepare`, `install`) |
//! | lines 8-11 COMMIT | `ranoc2/partition.rs` (`on_commit`, `apply_commit`) |
//! | lines 12-16 GET below `ts_req`, pending versions skipped | `ranoc2/partition.rs` (`read` with no `ts_p`), `ramp/versions.rs` (`committed_at`) |
//! | lines 17-21 `HST` | `ranoc2/safe.rs` (`lst`, `SafeTime`) |
//!
//! # Beyond the pseudocode
//!
//! RA-NOC2's (docs/ra-noc2.md): a strict, monotonic, durable safe time that
//! refuses prepares at or below it; refused writes written again;
//! `Commit` answers raise `last` to the partition's safe time only; the
//! cooperative termination protocol. And two of its own:
//!
//! - **A blocked writer asks.** A client hears a partition's safe time only
//!   in answers, so a writer whose `min(last)` is behind asks the partitions
//!   behind for theirs at every `client_tick_ms` (`safe_time_polls`).
//! - **An idle partition is asked to pass the write.** Algorithm 4's safe
//!   time rises only with commits: a partition nobody writes would block a
//!   writer for good. A write blocked `retry_ms` asks the partitions behind
//!   to raise their safe time to it (`safe_time_advances_asked`); each
//!   raises it durably, to just below its oldest pending transaction at
//!   most, and refuses later prepares below (`safe_time_advances`). After
//!   `max_attempts` such requests the write is reported unknown.
//! - **The floor is durable before the write returns** (`Record::Floor`):
//!   a restarted client's version vector starts there, so its sessions
//!   still read their writes.
//!
//! # Commit path and analytical latency
//!
//! With `RTT(c, p)` the round trip from the client to the farthest
//! partition a transaction touches, and `RTT(c, all)` to the farthest
//! partition of the deployment:
//!
//! ```text
//! write ≈ 2 · RTT(c, p) + wait      (PREPARE, COMMIT, each durable first; then
//!                                     until every partition's safe time passes
//!                                     the write: at least RTT(c, all) when the
//!                                     partitions the write did not touch must be
//!                                     asked, and a local append)
//! read  ≈ RTT(c, p)                 (one round, whatever the concurrency)
//! ```
//!
//! # Counters
//!
//! See [`COUNTERS`]. Observations: `rounds_per_read`,
//! `read_request_metadata_bytes` (per key read: the postcard-encoded GSV
//! and the absent LSV), `read_response_metadata_bytes` (per answer: the
//! encoded safe time), `write_block_us` (how long each write waited after
//! its commit phase).

#[cfg(test)]
mod handler_tests;

use crate::ramp::with_shared;
use crate::ranoc2::{self, Config};
use meridian_core::{CounterDoc, ParamDoc};

pub const PARAMS: &[ParamDoc] = &with_shared::<19>(&[
    ranoc2::PARAMS[17],
    ParamDoc {
        name: "test_skip_wait",
        default: "false",
        doc: "tests only: return after the commit phase without waiting for every safe time (Algorithm 3 lines 15-16), to show the checker catching the lost read-your-writes",
    },
]);

/// Every counter `ra-noc` reports: RA-NOC2's but those of the local safe
/// view and the background commit, and the blocked writes'.
pub const COUNTERS: &[CounterDoc] = &[
    ranoc2::COUNTERS[0], // reads
    ranoc2::COUNTERS[1], // read_rounds
    ranoc2::COUNTERS[3], // read_restarts
    ranoc2::COUNTERS[4], // read_resends
    ranoc2::COUNTERS[5], // reads_given_up
    ranoc2::COUNTERS[6], // writes
    CounterDoc {
        name: "write_phases_on_client_path",
        doc: "phases those writes waited for before returning, all told (two per write)",
    },
    CounterDoc {
        name: "writes_blocked",
        doc: "writes that waited after their commit phase for `min(last)` to pass them",
    },
    CounterDoc { name: "safe_time_polls", doc: "safe-time requests blocked writers sent to the partitions behind" },
    CounterDoc {
        name: "safe_time_advances_asked",
        doc: "requests to pass a write sent to the partitions behind by writers blocked `retry_ms`",
    },
    CounterDoc { name: "safe_time_advances", doc: "safe times partitions raised at a blocked writer's request" },
    ranoc2::COUNTERS[9],  // write_resends
    ranoc2::COUNTERS[10], // write_retries
    ranoc2::COUNTERS[11], // writes_given_up
    CounterDoc {
        name: "unknown_outcomes",
        doc: "writes whose phases went unanswered, or that stayed blocked, `max_attempts` times",
    },
    ranoc2::COUNTERS[16], // prepares_refused
    ranoc2::COUNTERS[17], // ctp_runs
    ranoc2::COUNTERS[18], // ctp_commits
    ranoc2::COUNTERS[19], // ctp_aborts
    ranoc2::COUNTERS[20], // ctp_forgotten
    ranoc2::COUNTERS[21], // gc_versions
    ranoc2::COUNTERS[22], // gone_answers
    ranoc2::COUNTERS[23], // prepares_shed
    ranoc2::COUNTERS[24], // checkpoints
];

crate::ranoc2::noc_protocol!(RaNoc, "ra-noc", PARAMS, COUNTERS, Config::noc_from_params);

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::{ParamValue, Params};

    #[test]
    fn every_documented_parameter_parses_at_its_default() {
        assert!(Config::noc_from_params(&Params::new(), "ra-noc").is_ok());
        for (name, p) in meridian_core::params::each_default_alone(PARAMS) {
            assert!(Config::noc_from_params(&p, "ra-noc").is_ok(), "{name}");
        }
    }

    #[test]
    fn the_counters_taken_from_ra_noc2_are_the_ones_named() {
        let names: Vec<&str> = COUNTERS.iter().map(|c| c.name).collect();
        for name in ["reads", "read_restarts", "write_retries", "prepares_refused", "ctp_forgotten", "checkpoints"] {
            assert_eq!(names.iter().filter(|n| **n == name).count(), 1, "{name}");
        }
        assert!(!names.contains(&"keys_read_from_lsv") && !names.contains(&"background_commits"));
    }

    #[test]
    fn ra_noc2s_local_view_knobs_are_not_ra_nocs() {
        assert_eq!(ranoc2::PARAMS[17].name, "outcomes_remembered");
        let p = Params::new().with("lsv_max", ParamValue::Int(10));
        assert!(Config::noc_from_params(&p, "ra-noc").unwrap_err().contains("`lsv_max`"));
    }
}
