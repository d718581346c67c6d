//! `eiger-port`: transactional causal consistency without convergence,
//! with one-round reads and two-phase writes — Lu, Sen and Lloyd,
//! "Performance-Optimal Read-Only Transactions" (OSDI 2020), the baseline
//! of "NOC-NOC: Towards Performance-optimal Distributed Transactions" §6.1
//! and Figure 9, whose partition side (Appendix E, Algorithm 6) it shares
//! with Eiger-NOC2.
//!
//! Partitions stamp writes with Lamport clocks and commit each write
//! transaction at the largest of its participants' prepare stamps (Eiger's
//! always-commit 2PC variant, `crate::eiger`); the coordinator answers the
//! client with the commit stamp once the commit is durable: the write
//! returns after two phases on the client's path. A read sends, in one
//! round (O_R), its snapshot — the global safe view `min(last)` over every
//! partition, the minimum of the version stamps (§6.1) — and each key's
//! own latest write. The partition answers with PORT's read rule: another
//! client's version stands at its commit stamp, the reader's own versions
//! at the snapshot the reader had when it wrote them (the "promotion"
//! before its later snapshots), and the highest within the snapshot is
//! returned. A client's own write beyond its snapshot is returned unless
//! another client's version lies between its promoted position and the
//! snapshot; a backward search from the snapshot skips the client's own
//! versions, already promoted before it (Figure 8b). Two clients may then
//! order one key's concurrent versions differently — Ann X_n before X₁,
//! Bob X₁ before X_n — which TCC allows and convergence does not.
//!
//! Every run is checked at `causal-no-convergence` (causality and read
//! atomicity, each session's observations explained by a version order of
//! its own).
//!
//! # Beyond the pseudocode and the paper
//!
//! Everything Eiger-NOC2's module documentation lists under "Beyond the
//! pseudocode" holds here too (unique stamps, writes stamped above the
//! client's past, the GSV over every partition with `Sync` refreshes, the
//! strict durable latest safe time, termination, remembered decisions, the
//! restarted client's resync, garbage collection, idle backups). Besides:
//!
//! - **Promotion respects the transaction** (NOC-NOC footnote 5: PORT's
//!   promotion "cannot ensure that all writes in the same transaction are
//!   promoted at the same time"). PORT's client returns once the
//!   coordinator committed; a cohort may not have the commit yet, and
//!   PORT's partitions read committed versions only, so a read there
//!   misses the client's own write that another partition returns. Here
//!   every version of one transaction keeps the same promoted position
//!   (the snapshot sent with every prepare), and a read names each key's
//!   own latest write (`latestWrite`, as Eiger-NOC2's): the partition
//!   counts it while it is still pending there. All of a transaction's
//!   writes are promoted alike, committed at a partition or not.
//! - **Which own versions count.** A client runs many sessions at once:
//!   one session's write may be committed at one partition and not yet at
//!   another while another session reads. A client's own version counts
//!   for its reads when the read names it (the client knows it committed)
//!   or when it is committed within the snapshot, hence everywhere; until
//!   then it counts for no one's read, not even as another's.
//! - **Own writes are ordered by issue** (transaction id, hence by the
//!   snapshots they stand at), not by commit stamp: two sessions' writes
//!   may commit in the other order. `latestWrite` keeps per key the
//!   completed write issued last (`eiger/client.rs` `Latest`).
//! - **Positions are kept with the versions** (`mvstore::Meta.snapshot`),
//!   so the search needs no recursion over stamp ranges; an own write of
//!   unknown outcome counts once committed within the snapshot.
//! - **Garbage collection**: an answer whose position is below the newest
//!   collected version of its key is `Gone` (the collected one might have
//!   been the answer) and the read starts again (`read_restarts`).
//!
//! # Where the paper is in the code
//!
//! | paper | file |
//! |---|---|
//! | version stamps, snapshot `min(last)` (§6.1; PORT's "read_ts") | `eiger/client.rs` `get_all`, `send_round`, RA-NOC2's `View` |
//! | read rule: promotion, backward search (§6.1, Figure 8b) | `eiger/partition.rs` `port_read` |
//! | a version's writer and promoted position (PORT's client id, "gst") | `eiger/partition.rs` `install`, `writer_of`; `Msg::PrepareAt` |
//! | 2PC variant, client → every participant (§6.1, Algorithm 6 lines 13-35) | `eiger/client.rs` `put_all`; `eiger/partition.rs` `on_prepare`, `on_vote`, `try_commit` |
//! | the coordinator answers the client with the commit stamp | `eiger/partition.rs` `answer_commit`; `eiger/client.rs` `on_committed` |
//! | Lamport stamps, commit at the largest prepare stamp | `eiger/stamps.rs`, `eiger/pending.rs` |
//! | latest safe time (PORT's "lst") | `eiger/partition.rs` `raise`, RA-NOC2's `SafeTime` |
//! | durability, restart | `eiger/recovery.rs`, `eiger/client.rs` `restore` |
//!
//! # Commit path and analytical latency
//!
//! With `RTT(c, p)` the round trip from the client to the farthest
//! partition a transaction touches, and `RTT(p, p')` between its
//! partitions:
//!
//! ```text
//! write ≈ RTT(c, p) + RTT(p, p')   (PREPARE durable at every participant, the
//!                                   cohorts' votes to the coordinator, its
//!                                   COMMIT durable, then the answer; plus the
//!                                   client's local append)
//! read  ≈ RTT(c, p)                (one round, whatever the concurrency)
//! ```
//!
//! Against Eiger-NOC2's `write ≈ RTT(c, p)`: the vote round between
//! partitions and a second fsync, on the client's path.

#[cfg(test)]
mod handler_tests;

crate::eiger_protocol!(
    /// Eiger-PORT ("Performance-Optimal Read-Only Transactions"; NOC-NOC §6.1).
    EigerPort,
    "eiger-port",
    meridian_core::Consistency::CausalNoConvergence,
    crate::eiger::Flavor::Port
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eiger::{Config, Flavor};
    use meridian_core::{ParamValue, Params};

    #[test]
    fn every_documented_parameter_parses_at_its_default() {
        assert!(Config::from_params(&Params::new(), "eiger-port", Flavor::Port).is_ok());
        for (name, p) in meridian_core::params::each_default_alone(PARAMS) {
            assert!(Config::from_params(&p, "eiger-port", Flavor::Port).is_ok(), "{name}");
        }
    }

    #[test]
    fn eiger_noc2_switches_are_not_eiger_ports() {
        let p = Params::new().with("test_read_beyond_gsv", ParamValue::Bool(true));
        let err = Config::from_params(&p, "eiger-port", Flavor::Port).unwrap_err();
        assert!(err.contains("test_read_beyond_gsv"), "{err}");
    }
}
