//! Swarm seeds that once failed, run again (in a debug build every role's
//! invariants are checked after every event): each names the bug it
//! caught, and must stay clean.

use meridian_cli::swarm::{SwarmOptions, base_experiment, run_swarm};
use std::path::PathBuf;

fn clean(protocol: &str, seed: u64) {
    clean_with(protocol, seed, None, 500);
}

/// `seed` of `protocol`'s swarm on `config` (the default one if `None`)
/// ends valid, with more than `min_committed` transactions committed.
fn clean_with(protocol: &str, seed: u64, config: Option<PathBuf>, min_committed: u64) {
    clean_cut(protocol, seed, config, min_committed, false);
}

/// As `clean_with`; `cuts` adds both kinds of link cut (`--link-cuts
/// --one-way-cuts`).
fn clean_cut(protocol: &str, seed: u64, config: Option<PathBuf>, min_committed: u64, cuts: bool) {
    let shown = config.as_ref().map_or("the default configuration".to_string(), |c| c.display().to_string());
    let opts = SwarmOptions {
        protocol: protocol.to_string(),
        seeds: 1,
        start: seed,
        config,
        threads: 1,
        history_dir: None,
        event_log_dir: None,
        link_cuts: cuts,
        one_way_cuts: cuts,
    };
    let base = base_experiment(&opts).unwrap_or_else(|e| panic!("{e}"));
    let results = run_swarm(&base, &opts, &|_| {});
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].failure, None, "{protocol} seed {seed} on {shown}");
    assert!(results[0].committed > min_committed, "{protocol} seed {seed}: {} committed", results[0].committed);
}

/// A configuration file of the test's own: removed when the test ends,
/// kept when it fails so that the failing seed can be run again on it.
struct TestFile(PathBuf);

impl TestFile {
    fn write(name: &str, text: &str) -> TestFile {
        let path = std::env::temp_dir().join(format!("meridian-swarm-regressions-{}-{name}.toml", std::process::id()));
        std::fs::write(&path, text).expect("written");
        TestFile(path)
    }

    fn path(&self) -> Option<PathBuf> {
        Some(self.0.clone())
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// `examples/list-append.toml` on four keys per shard, written to a file of
/// the test's own: a hot swarm, where most transactions conflict.
fn hot_list_append(name: &str) -> TestFile {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/list-append.toml");
    let text = std::fs::read_to_string(example).expect("the example");
    let hot: Vec<String> = text
        .lines()
        .map(|l| if l.starts_with("keys_per_shard") { "keys_per_shard = 4".to_string() } else { l.to_string() })
        .collect();
    assert!(hot.iter().any(|l| l == "keys_per_shard = 4"), "the example sets keys_per_shard");
    TestFile::write(name, &hot.join("\n"))
}

/// `tiga`: a leader restarted during a view change counted the queue it
/// had moved into its log as synced; the next view change kept that queue
/// in part (a), at timestamps the other shard had raised and committed
/// meanwhile, and dropped an entry the other shard had executed
/// ("executed past the new log").
#[test]
fn tiga_seed_4661761_a_leader_restarted_in_a_view_change_does_not_count_its_queue_as_synced() {
    clean("tiga", 4_661_761);
}

/// `tiga`: a follower that voted for a transaction on the fast path,
/// crashed and rejoined took its leader's log in place of its own and lost
/// the vote; the next view change found one holder of a committed
/// transaction where two were needed, and one shard lost its write.
#[test]
fn tiga_seed_4671029_a_rejoining_follower_keeps_its_fast_path_votes() {
    let config = hot_list_append("tiga-4671029");
    clean_with("tiga", 4_671_029, config.path(), 200);
}

/// `2pl-paxos`: a leader cut off from its shard while a successor was
/// elected still believed it led, and acknowledged a coordinator's commit
/// of a transaction the successor had prepared; the coordinator's
/// watermark passed it, the successor retired it while it was prepared,
/// and the commit that reached the successor later found it forgotten. Its
/// locks were held for good and nothing committed after the heal.
#[test]
fn twopl_paxos_seed_4904951_a_deposed_leader_acknowledges_no_decision_its_log_lacks() {
    let config = hot_list_append("2pl-4904951");
    clean_cut("2pl-paxos", 4_904_951, config.path(), 20, true);
}

/// `calvin`: a replica that installed two other copies' checkpoints in a
/// row made the second durable as it came, with only the reads from its
/// second request's position on; the reads the first had given it, which a
/// slower peer still needed, were gone after its next crash, and the peer
/// waited for them for good.
#[test]
fn calvin_seed_4906721_a_second_installed_checkpoint_keeps_the_reads_the_first_gave() {
    let config = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/calvin-truncation.toml"));
    clean_cut("calvin", 4_906_721, Some(config), 500, true);
}

/// `examples/<example>.toml` with `reads_kept = 64`, written to a file of
/// the test's own: peers fall further behind than the reads a participant
/// keeps by count.
fn reads_kept_64(example: &str, name: &str) -> TestFile {
    let example = format!("{}/../../examples/{example}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(example).expect("the example");
    let last = text.lines().rfind(|l| l.starts_with('['));
    assert_eq!(last, Some("[protocol.params]"), "the params table comes last");
    TestFile::write(name, &format!("{text}\nreads_kept = 64\n"))
}

fn calvin_reads_kept_64(name: &str) -> TestFile {
    reads_kept_64("calvin-truncation", name)
}

/// `calvin`: a participant further behind than the reads its peer keeps
/// asked for them in vain; told they are gone, it gets them from another
/// copy of the peer's shard or catches up from a checkpoint of its own
/// shard past the transaction. In 4935031 the peer's records skipped the
/// transaction (executed past its checkpoint), and it said nothing.
#[test]
fn calvin_seeds_4934098_4934099_and_4935031_a_peer_further_behind_than_reads_kept_catches_up() {
    for seed in [4_934_098, 4_934_099, 4_935_031] {
        clean_cut("calvin", seed, calvin_reads_kept_64(&format!("rk64-{seed}")).path(), 200, false);
    }
}

/// `calvin`: a participant dropped the reads it sent by count, and every
/// copy of its peer shard waited for them (4935545: all three copies of
/// shard 1 missed shard 0's reads of one transaction, and every copy of
/// shard 0 had run 64 past it). Now reads are kept until the region is
/// durably past them, and never dropped while their transaction runs
/// (4935302, which a first version of that failed: two participants behind
/// the positions their sequencer forgot each dropped the reads the other
/// waited for).
#[test]
fn calvin_seeds_4935545_and_4935302_reads_are_kept_while_a_participant_of_the_region_may_need_them() {
    for seed in [4_935_545, 4_935_302] {
        let config = calvin_reads_kept_64(&format!("rk64-{seed}"));
        clean_cut("calvin", seed, config.path(), 200, false);
    }
}

/// `slog`: a participant dropped the reads it sent by count, and a peer of
/// its region further behind waited for them for good. Now they are kept
/// until every replica of the region is durably past the transaction's
/// last LockOnlyTxn.
#[test]
fn slog_seeds_4934000_and_4934001_reads_are_kept_until_the_region_is_durably_past_them() {
    for seed in [4_934_000, 4_934_001] {
        let config = reads_kept_64("slog-truncation", &format!("slog-rk64-{seed}"));
        clean_cut("slog", seed, config.path(), 200, false);
    }
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

/// `tiga`: under step ④ (1)'s rule for a transaction a follower voted for
/// (below), shard 0's new log of one view change was lost with its leader
/// while shard 1 executed the transaction; the next change rebuilt shard 0
/// from older logs and doomed it ("executed past the new log"). Round 3
/// keeps a shard from executing before every participant's log is
/// durable.
#[test]
fn tiga_seed_4665731_a_view_change_lost_at_one_shard_dooms_nothing_the_other_executed() {
    clean("tiga", 4_665_731);
}

/// Shard 0 finished a view change and executed its new log while shard 1's
/// new log was lost with its new leader; the next change rebuilt shard 1
/// from older logs and doomed 38 transactions, 25 of which shard 0 had
/// executed (793 list elements twice). A new leader now waits for every
/// participant's log to be durable before it executes (round 3).
#[test]
fn tiga_seed_4668748_no_shard_executes_a_view_changes_log_before_every_participant_holds_its_own() {
    clean("tiga", 4_668_748);
}

/// `tiga`: a follower of shard 0 had released a two-shard transaction T
/// that shard 0's old leader had agreed on and that shard 1 had executed,
/// when a partition cut both old leaders off; shard 0's view change lacked
/// T (one holder of two needed) and placed it after a conflicting entry it
/// had recovered, past a successor shard 1 had committed after reading T.
/// With more than ⌊f/2⌋ of a shard's logs holding T, T keeps its timestamp.
#[test]
fn tiga_seed_4666065_a_transaction_a_follower_voted_for_keeps_its_timestamp() {
    clean("tiga", 4_666_065);
}
