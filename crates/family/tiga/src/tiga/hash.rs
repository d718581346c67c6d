//! Tiga's incremental log hash with the per-key refinement (Appendix D).
//!
//! Each key keeps the XOR of the hashes of the log entries that declare it;
//! a fast reply for `T` carries the XOR over `T`'s keys of
//! `H(key, key hash)`, so two servers agree exactly when their logs hold
//! the same entries, with the same timestamps, on `T`'s keys (commuting
//! transactions on other keys do not matter). Adding and removing an entry
//! are the same XOR.
//!
//! Entries are hashed on every key they declare, read or written. A
//! declared key can stand for more than itself: a footprint guard covers
//! the rows a procedure reaches through its reads (TPC-C's Stock-Level
//! declares its warehouse's stock guard as written; each New-Order that
//! updates that warehouse's stock declares it as read, so New-Orders do not
//! conflict with each other there). Hashing only writers would leave those
//! New-Orders out of the guard's hash, and a follower lacking one would
//! fast-reply a Stock-Level with the leader's hash although the leader's
//! execution read that New-Order's stock updates.
//!
//! The paper uses SHA-1; the choice is orthogonal to the protocol. Here a
//! reply carries a 128-bit hash built from two independent 64-bit mixers,
//! and each key keeps the XOR of its entries' 64-bit hashes ([`KeyHash`]):
//! a server holds one per key it ever saw, twice (live and in its
//! checkpoint), so their width is most of those maps' memory. Collisions
//! are not adversarial in a simulator; two different sets of entries on a
//! key agree in 64 bits with probability 2^-64 per comparison.

use super::messages::LogEntry;
use meridian_core::{Key, ShardId};
use meridian_mechanisms::cow_map::CowMap;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A 128-bit hash of four words.
fn h128(a: u64, b: u64, c: u64, d: u64) -> u128 {
    let lo = mix64(a ^ mix64(b.wrapping_add(0x9e37_79b9_7f4a_7c15) ^ mix64(c ^ mix64(d))));
    let hi = mix64(d ^ mix64(c.wrapping_add(0x632b_e59b_d9b4_e019) ^ mix64(b ^ mix64(a ^ 0xdead_beef))));
    (u128::from(hi) << 64) | u128::from(lo)
}

/// A key's XOR of the hashes of the entries that declare it.
pub type KeyHash = u64;

/// The hash of one log entry: its transaction id and timestamp.
pub fn entry_hash(e: &LogEntry) -> KeyHash {
    h128(u64::from(e.body.id.node.0), e.body.id.seq, e.t, 0x7469_6761) as u64
}

/// The keys an entry is hashed on: every key it declares at a shard, once,
/// in order — the union of `reads` and `writes` as
/// `Program::declared_keys` gives them (each sorted and distinct, no key in
/// both), merged without a new vector. Servers hold those for every queued
/// transaction, so hashing needs neither to derive them again nor to sort.
fn hashed_keys<'a>(reads: &'a [Key], writes: &'a [Key]) -> impl Iterator<Item = Key> + 'a {
    debug_assert!(reads.is_sorted() && writes.is_sorted(), "declared keys are sorted");
    let (mut r, mut w) = (reads.iter().peekable(), writes.iter().peekable());
    std::iter::from_fn(move || match (r.peek(), w.peek()) {
        (Some(a), Some(b)) => {
            debug_assert_ne!(a, b, "a key both read and written is declared a write");
            if a < b { r.next() } else { w.next() }.copied()
        }
        (Some(_), None) => r.next().copied(),
        (None, _) => w.next().copied(),
    })
}

/// What a fast reply's hash takes from one key whose entries' XOR is `kh`.
fn key_digest(k: Key, kh: KeyHash) -> u128 {
    h128(k.0, kh, 0, 0x006b_6579)
}

/// The per-key hashes of the entries a checkpoint folded. A checkpoint
/// takes the previous one's and toggles only what it folds: the clone
/// shares every chunk (`CowMap`), so a checkpoint costs in proportion to
/// the entries it folds, not to every key the shard ever saw.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FoldedHashes {
    map: CowMap<Key, KeyHash>,
}

impl FoldedHashes {
    /// Adds or removes an entry's contribution, as `KeyHashes::toggle`.
    pub fn toggle(&mut self, e: &LogEntry, shard: ShardId, shard_of: impl Fn(Key) -> ShardId) {
        let (reads, writes) = e.body.program.declared_keys(shard, shard_of);
        self.toggle_declared(e, &reads, &writes);
    }

    /// `toggle` for an entry whose declared keys at the shard the caller
    /// holds (`Program::declared_keys`).
    pub fn toggle_declared(&mut self, e: &LogEntry, reads: &[Key], writes: &[Key]) {
        let h = entry_hash(e);
        for key in hashed_keys(reads, writes) {
            // A key whose XOR comes to 0 leaves the map.
            self.map.update(key, |held| Some(held.copied().unwrap_or(0) ^ h).filter(|x| *x != 0));
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Per-key XORs of the hashes of the entries of a server's log that
/// declare the key (read or written).
#[derive(Clone, Debug, Default)]
pub struct KeyHashes {
    map: FxHashMap<Key, KeyHash>,
}

impl KeyHashes {
    pub fn new() -> KeyHashes {
        KeyHashes::default()
    }

    /// Adds or removes (the same XOR) an entry's contribution on `shard`.
    pub fn toggle(&mut self, e: &LogEntry, shard: ShardId, shard_of: impl Fn(Key) -> ShardId) {
        let (reads, writes) = e.body.program.declared_keys(shard, shard_of);
        self.toggle_declared(e, &reads, &writes);
    }

    /// `toggle` for an entry whose declared keys at the shard the caller
    /// holds (`Core::keys_of`, kept with every queued transaction).
    pub fn toggle_declared(&mut self, e: &LogEntry, reads: &[Key], writes: &[Key]) {
        self.toggle_digest(e, reads, writes);
    }

    /// `toggle_declared`, returning `digest` of the same keys after it: an
    /// append's fast-reply hash, with one look-up per key.
    pub fn toggle_digest(&mut self, e: &LogEntry, reads: &[Key], writes: &[Key]) -> u128 {
        let h = entry_hash(e);
        let mut digest = 0;
        for key in hashed_keys(reads, writes) {
            let slot = self.map.entry(key).or_insert(0);
            *slot ^= h;
            digest ^= key_digest(key, *slot);
            if *slot == 0 {
                self.map.remove(&key);
            }
        }
        digest
    }

    /// The hash a fast reply carries for a transaction touching `keys`,
    /// from the keys alone (any order, repeats allowed): the reference the
    /// tests hold `toggle_digest` and `digest_with` to. Servers hash the
    /// declared keys they already hold and need no sort.
    #[cfg(test)]
    pub fn digest(&self, keys: impl IntoIterator<Item = Key>) -> u128 {
        let mut seen: Vec<Key> = keys.into_iter().collect();
        seen.sort_unstable();
        seen.dedup();
        seen.iter().fold(0u128, |acc, k| acc ^ key_digest(*k, self.map.get(k).copied().unwrap_or(0)))
    }

    /// `digest` of the keys `e` declares (`reads` and `writes`) as if `e`
    /// were toggled in first and out again after: the hash of a leader's
    /// optimistic execution (§3.3), as if appended at its timestamp,
    /// without changing the map twice.
    pub fn digest_with(&self, e: &LogEntry, reads: &[Key], writes: &[Key]) -> u128 {
        self.digest_toggled(reads, writes, entry_hash(e))
    }

    /// Every declared key's hash XOR `h` (an absent key's is 0, as a
    /// toggle that empties a key removes it), digested: the declared keys
    /// are distinct already, and XOR does not care for their order.
    fn digest_toggled(&self, reads: &[Key], writes: &[Key], h: KeyHash) -> u128 {
        hashed_keys(reads, writes).fold(0u128, |acc, k| acc ^ key_digest(k, self.map.get(&k).copied().unwrap_or(0) ^ h))
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The hashes a checkpoint holds, as a live server's.
    pub fn from_folded(folded: &FoldedHashes) -> KeyHashes {
        KeyHashes { map: folded.map.iter().map(|(k, h)| (*k, *h)).collect() }
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tiga::messages::TxnBody;
    use meridian_core::{NodeId, Op, Program, TxnId};
    use std::sync::Arc;

    fn entry(seq: u64, t: u64, keys: &[u64]) -> LogEntry {
        let ops = keys.iter().map(|k| Op::Increment { key: Key(*k), delta: 1, tag: seq * 100 + k }).collect();
        let body = TxnBody {
            id: TxnId { node: NodeId(1), seq },
            coordinator: NodeId(1),
            program: Program::new(ops),
            shards: vec![ShardId(0)],
        };
        LogEntry { body: Arc::new(body), t }
    }

    fn one_shard(_: Key) -> ShardId {
        ShardId(0)
    }

    #[test]
    fn order_of_commuting_entries_does_not_matter_but_timestamps_do() {
        let (a, b) = (entry(1, 10, &[1]), entry(2, 11, &[2]));
        let mut x = KeyHashes::new();
        x.toggle(&a, ShardId(0), one_shard);
        x.toggle(&b, ShardId(0), one_shard);
        let mut y = KeyHashes::new();
        y.toggle(&b, ShardId(0), one_shard);
        y.toggle(&a, ShardId(0), one_shard);
        assert_eq!(x.digest([Key(1), Key(2)]), y.digest([Key(1), Key(2)]));
        let mut z = KeyHashes::new();
        z.toggle(&entry(1, 12, &[1]), ShardId(0), one_shard);
        z.toggle(&b, ShardId(0), one_shard);
        assert_ne!(x.digest([Key(1)]), z.digest([Key(1)]), "a different timestamp on key 1");
        assert_eq!(x.digest([Key(2)]), z.digest([Key(2)]), "key 2 saw the same writers");
    }

    #[test]
    fn an_entry_enters_the_hash_of_keys_it_only_reads() {
        // A footprint guard declared as read (TPC-C's New-Order on its
        // warehouse's stock guard) stands for rows the entry writes: two
        // logs that differ by such an entry must not agree on the guard.
        let body = TxnBody {
            id: TxnId { node: NodeId(1), seq: 9 },
            coordinator: NodeId(1),
            program: Program::new(vec![Op::Read { key: Key(5) }]),
            shards: vec![ShardId(0)],
        };
        let reader = LogEntry { body: Arc::new(body), t: 20 };
        let mut x = KeyHashes::new();
        let without = x.digest([Key(5)]);
        x.toggle(&reader, ShardId(0), one_shard);
        assert_ne!(x.digest([Key(5)]), without);
    }

    #[test]
    fn removing_an_entry_undoes_it() {
        let a = entry(1, 10, &[1, 2]);
        let mut x = KeyHashes::new();
        let empty = x.digest([Key(1), Key(2)]);
        x.toggle(&a, ShardId(0), one_shard);
        assert_ne!(x.digest([Key(1), Key(2)]), empty);
        x.toggle(&a, ShardId(0), one_shard);
        assert_eq!(x.digest([Key(1), Key(2)]), empty);
        assert!(x.is_empty());
    }

    #[test]
    fn hashing_with_the_declared_keys_equals_deriving_them() {
        // Reads and writes on one shard, some keys on another.
        let shard_of = |k: Key| ShardId((k.0 / 100) as u32);
        let body = TxnBody {
            id: TxnId { node: NodeId(1), seq: 5 },
            coordinator: NodeId(1),
            program: Program::new(vec![
                Op::Read { key: Key(7) },
                Op::Increment { key: Key(3), delta: 1, tag: 1 },
                Op::Read { key: Key(3) },
                Op::Read { key: Key(1) },
                Op::Increment { key: Key(105), delta: 1, tag: 2 },
            ]),
            shards: vec![ShardId(0), ShardId(1)],
        };
        let e = LogEntry { body: Arc::new(body), t: 30 };
        let (reads, writes) = e.body.program.declared_keys(ShardId(0), shard_of);
        assert_eq!((&reads[..], &writes[..]), (&[Key(1), Key(7)][..], &[Key(3)][..]));
        let keys = [Key(1), Key(3), Key(7)];
        let mut x = KeyHashes::new();
        x.toggle(&entry(1, 10, &[1, 3]), ShardId(0), shard_of);
        let before = x.digest(keys);
        assert_eq!(x.digest_toggled(&reads, &writes, 0), before);
        let mut y = x.clone();
        y.toggle(&e, ShardId(0), shard_of);
        assert_eq!(x.digest_with(&e, &reads, &writes), y.digest(keys), "as if toggled in");
        assert_eq!(x.digest(keys), before, "and left as it was");
        let mut z = x.clone();
        x.toggle_declared(&e, &reads, &writes);
        assert_eq!(x.map, y.map);
        assert_eq!(z.toggle_digest(&e, &reads, &writes), y.digest(keys), "an append's hash, in the same pass");
        assert_eq!(z.map, y.map);
        assert_eq!(z.toggle_digest(&e, &reads, &writes), before, "toggled out again");
        let mut folded = FoldedHashes::default();
        folded.toggle_declared(&e, &reads, &writes);
        folded.toggle(&e, ShardId(0), shard_of);
        assert!(folded.is_empty(), "the same keys both ways");
    }

    #[test]
    fn a_checkpoint_s_hashes_toggled_on_a_shared_copy_equal_a_live_server_s() {
        let entries: Vec<LogEntry> = (0..200).map(|i| entry(i, 10 + i, &[i % 7, 100 + i % 3])).collect();
        let mut live = KeyHashes::new();
        let mut folded = FoldedHashes::default();
        for (i, e) in entries.iter().enumerate() {
            live.toggle(e, ShardId(0), one_shard);
            let before = folded.clone();
            folded.toggle(e, ShardId(0), one_shard);
            if i == 100 {
                // An earlier checkpoint's copy is untouched by later folds.
                assert_eq!(KeyHashes::from_folded(&before).len(), before.len());
            }
        }
        let keys: Vec<Key> = (0..7).chain(100..103).map(Key).collect();
        let rebuilt = KeyHashes::from_folded(&folded);
        for k in &keys {
            assert_eq!(rebuilt.digest([*k]), live.digest([*k]), "key {k:?}");
        }
        // Toggling every entry again empties both: no zero entries linger.
        for e in &entries {
            folded.toggle(e, ShardId(0), one_shard);
        }
        assert!(folded.is_empty());
    }
}
