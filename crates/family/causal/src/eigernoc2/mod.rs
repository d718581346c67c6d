//! `eiger-noc2`: transactional causal consistency with convergence in one
//! round per read and one phase per write — NOC-NOC, "Towards
//! Performance-optimal Distributed Transactions", §6, Algorithm 2 and
//! Appendix E (Algorithms 5 and 6).
//!
//! Partitions stamp writes with Lamport clocks and commit each write
//! transaction at the largest of its participants' prepare stamps (Eiger's
//! always-commit 2PC variant, asynchronous here: `crate::eiger`). A client
//! collects the prepare stamps and mimics that choice (Figure 7): the
//! write returns after one phase (O_W), and its versions join the client's
//! local safe view at the stamp they will commit at. A read sends, in one
//! round (O_R, N_R), the global safe view `min(last)` and each key's own
//! latest write; the partition returns the highest committed version
//! within the GSV, or the client's own write when it is at or past it
//! (Figure 8c): every client orders every key's versions by their commit
//! stamps, the same order (convergence).
//!
//! Every run is checked at `causal` (causality and read atomicity — the
//! TCC of the paper's Appendix B — and convergence).
//!
//! # Beyond the pseudocode
//!
//! The pseudocode assumes no failures, a client whose Lamport clock is
//! implicit, and partitions that are never idle. Here:
//!
//! - **Stamps are unique** (`eiger/stamps.rs`): the Lamport counter above
//!   the shard's number. With counters alone, two transactions prepared on
//!   different partitions could commit at the same stamp (Lemma B.6 takes
//!   distinct ones for granted).
//! - **A write is stamped above its client's past**: a prepare carries the
//!   largest stamp the client has seen (`dep`: safe times, own commit
//!   stamps) and the partition's clock moves past it (Eiger's client-side
//!   Lamport clock): otherwise a session's write could be stamped below a
//!   version it read, or below its own earlier write on another partition.
//! - **The GSV is the minimum over every partition** (line 6, `min(last)`,
//!   not only those the read touches, unlike RA-NOC2): a causal past read
//!   at one partition must be visible at the others. A client refreshes,
//!   every tick, the partitions whose safe time is behind the largest stamp
//!   it has seen (`Sync`), and a partition moves its clock to that stamp
//!   durably: an idle partition's clock would otherwise hold every GSV back.
//! - **The latest safe time is strict, monotonic and durable** (RA-NOC2's
//!   `SafeTime`): just below the oldest prepare stamp pending (line 43),
//!   the running maximum, told only once the records behind it are
//!   durable; records carry the stamps, so a restarted partition's clock
//!   is at least every stamp it told.
//! - **Termination.** A cohort pending for `ctp_ms` sends its vote again,
//!   marked late, and the coordinator answers with its decision; a
//!   coordinator that never prepared the transaction refuses it for good
//!   (its client has not returned). A coordinator missing votes for
//!   `ctp_ms` asks those cohorts; one that never prepared it refuses it
//!   for good and the coordinator aborts it everywhere. Decisions are
//!   remembered (`outcomes_remembered`) with their commit stamps: a
//!   repeated prepare after the commit is answered with the commit stamp,
//!   which leaves the client's mimicked maximum unchanged.
//! - **A restarted client asks every partition for its safe time before
//!   serving** (its version vector is not durable; the partitions' are):
//!   a session's next read is then at a GSV no lower than before the
//!   crash, and its next write stamped above what it saw. Its local
//!   entries are durable (`Record::Local`), written before the write
//!   returns; an entry goes once every partition's safe time has passed it
//!   (bounded by `lsv_max`).
//! - **Garbage collection** is RAMP's; a GET below a collected version is
//!   told `Gone` and read again (`read_restarts`).
//! - **Replication**: the other replicas of a shard are its partition's
//!   backups, shipped every version it commits asynchronously (NOC-NOC
//!   §5.2, §7.1; `meridian_readatomic::common::backup`); a crashed
//!   partition is unavailable until it restarts from its log.
//!
//! # Where the paper is in the code
//!
//! | paper | file |
//! |---|---|
//! | Algorithm 5 lines 2-4 (`last`, `latestWrite`, `gsv`) | `eiger/client.rs`, RA-NOC2's `View` with `Own` entries |
//! | lines 5-10 GET_ALL | `eiger/client.rs` `get_all`, `send_round`, `on_got` |
//! | lines 11-23 PUT_ALL, Figure 7 | `eiger/client.rs` `put_all`, `on_prepared` |
//! | Algorithm 6 lines 2-4 (`vers`, `ts_svr`, `pending`) | `eiger/partition.rs`, `eiger/pending.rs`, RA-NOC2's `SafeTime` |
//! | lines 5-12 GET, Figure 8c | `eiger/partition.rs` `read`, `on_get` |
//! | lines 13-20 WRITE_COORD | `eiger/partition.rs` `on_prepare`, `on_vote`, `try_commit` |
//! | lines 21-27 WRITE_COHORT | `eiger/partition.rs` `on_prepare`, `on_commit` |
//! | lines 28-35 PREPARE | `eiger/partition.rs` `install`, `eiger/stamps.rs` |
//! | lines 36-43 COMMIT | `eiger/partition.rs` `apply_commit`, `raise` |
//! | durability, restart | `eiger/recovery.rs`, `eiger/client.rs` `restore` |
//!
//! # Commit path and analytical latency
//!
//! With `RTT(c, p)` the round trip from the client to the farthest
//! partition a transaction touches:
//!
//! ```text
//! write ≈ RTT(c, p)     (PREPARE, durable first, and the client's local append;
//!                        the votes and COMMIT run between partitions after)
//! read  ≈ RTT(c, p)     (one round, whatever the concurrency)
//! ```

#[cfg(test)]
mod handler_tests;

crate::eiger_protocol!(
    /// Eiger-NOC2 (NOC-NOC §6, Algorithm 2, Appendix E).
    EigerNoc2,
    "eiger-noc2",
    meridian_core::Consistency::Causal,
    crate::eiger::Flavor::Noc2
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eiger::{Config, Flavor};
    use meridian_core::{ParamValue, Params};

    #[test]
    fn every_documented_parameter_parses_at_its_default() {
        assert!(Config::from_params(&Params::new(), "eiger-noc2", Flavor::Noc2).is_ok());
        for (name, p) in meridian_core::params::each_default_alone(PARAMS) {
            assert!(Config::from_params(&p, "eiger-noc2", Flavor::Noc2).is_ok(), "{name}");
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        let p = Params::new().with("retry_ms", ParamValue::Int(0));
        assert!(Config::from_params(&p, "eiger-noc2", Flavor::Noc2).unwrap_err().contains("`retry_ms`"));
    }
}
