//! Swarm seeds that once failed, run again (in a debug build every role's
//! invariants are checked after every event): each names the bug it
//! caught, and must stay clean.

use meridian_cli::swarm::{SwarmOptions, base_experiment, run_swarm};

fn clean(protocol: &str, seed: u64) {
    let opts = SwarmOptions {
        protocol: protocol.to_string(),
        seeds: 1,
        start: seed,
        config: None,
        threads: 1,
        history_dir: None,
        event_log_dir: None,
    };
    let base = base_experiment(&opts).unwrap_or_else(|e| panic!("{e}"));
    let results = run_swarm(&base, &opts, &|_| {});
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].failure, None, "{protocol} seed {seed}");
    assert!(results[0].committed > 500, "{protocol} seed {seed}: {} committed", results[0].committed);
}

/// `ra-noc2`: a client crashed and restarted lost its local safe view and
/// version vector, and its sessions read the initial state of keys they
/// had written (read-your-writes).
#[test]
fn ra_noc2_seed_120004_a_restarted_client_still_reads_its_own_writes() {
    clean("ra-noc2", 120_004);
}

/// `ra-noc2`: a read delayed by lost messages reached a partition whose
/// garbage collection had dropped every version of a key at or below the
/// read's GSV, and newer ones too; it was answered with the initial state
/// instead of `Gone` (read-your-writes and fractured reads).
#[test]
fn ra_noc2_seed_120030_a_read_below_a_collected_version_is_told_gone() {
    clean("ra-noc2", 120_030);
}

/// `ra-noc`: a write of one shard whose client stopped between PREPARE and
/// COMMIT stayed pending for good (the termination protocol had nobody to
/// ask), holding that partition's safe time below it: after healing, every
/// read met `Gone` and every write stayed blocked (no progress).
#[test]
fn ra_noc_seed_140142_a_transaction_of_one_partition_is_finished_by_it() {
    clean("ra-noc", 140_142);
}
