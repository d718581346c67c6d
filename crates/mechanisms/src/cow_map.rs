//! A hash map whose clone is cheap: [`CHUNKS`] sub-maps behind `Arc`s,
//! each copied on its first write after a clone.
//!
//! Checkpoints clone a replica's whole state (the store, the remembered
//! outcomes) inside a handler. With a plain map that clone costs time in
//! proportion to the state, and every request queued behind the handler
//! waits for it: on a real cluster with a few million keys, hundreds of
//! milliseconds per checkpoint. Here the clone costs `CHUNKS` reference
//! counts, and the copying is spread over the writes that follow, one
//! chunk (1/`CHUNKS` of the map) at a time.
//!
//! Lookups only: iteration order is the chunks' and their hash maps', so
//! anything that leaves the process (serialization) is sorted by key.

use rustc_hash::{FxHashMap, FxHasher};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Sub-maps per map: a write after a clone copies at most 1/CHUNKS of it.
pub const CHUNKS: usize = 256;

#[derive(Clone)]
pub struct CowMap<K, V> {
    chunks: Vec<Arc<FxHashMap<K, V>>>,
    len: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> Default for CowMap<K, V> {
    fn default() -> Self {
        CowMap::new()
    }
}

/// The chunk of a key: its hash mixed again (murmur3's finalizer), since
/// Fx hashes of keys a large stride apart (shifted bench keys) share many
/// bits; a chunk's own table then sees keys whose Fx hashes still differ.
fn chunk_of<K: Hash>(key: &K) -> usize {
    let mut h = FxHasher::default();
    key.hash(&mut h);
    let mut x = h.finish();
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x >> 56) as usize & (CHUNKS - 1)
}

/// Entries a host should let accumulate between checkpoints of a state of
/// `state_entries` entries: `every`, or one per `state_per_entry` entries of
/// the state if that is more (0: `every` alone). A checkpoint costs in
/// proportion to the state, not to what it covers — writes after it copy
/// nearly every chunk of a map it shares, and a durable snapshot holds it
/// all — so spacing checkpoints by the state's size keeps that cost per
/// entry flat as the state grows; the log kept between them grows with the
/// state, not with the run.
pub fn checkpoint_interval(every: u64, state_entries: usize, state_per_entry: u64) -> u64 {
    every.max((state_entries as u64).checked_div(state_per_entry).unwrap_or(0))
}

impl<K: Hash + Eq + Clone, V: Clone> CowMap<K, V> {
    pub fn new() -> CowMap<K, V> {
        CowMap { chunks: (0..CHUNKS).map(|_| Arc::new(FxHashMap::default())).collect(), len: 0 }
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.chunks[chunk_of(key)].get(key)
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// The chunk of `key`, copied first if a clone shares it.
    fn chunk_mut(&mut self, key: &K) -> &mut FxHashMap<K, V> {
        Arc::make_mut(&mut self.chunks[chunk_of(key)])
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let chunk = &mut self.chunks[chunk_of(key)];
        // Look before copying: a miss must not copy a shared chunk. A chunk
        // this map alone holds is looked in once.
        if Arc::get_mut(chunk).is_none() && !chunk.contains_key(key) {
            return None;
        }
        Arc::make_mut(chunk).get_mut(key)
    }

    /// The value of `key`, inserting `make()` first if it is absent, and
    /// whether it was: one look-up where a `get_mut` and an `insert` take
    /// two or three. Always a write: a shared chunk is copied first.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> (&mut V, bool) {
        use std::collections::hash_map::Entry;
        match Arc::make_mut(&mut self.chunks[chunk_of(&key)]).entry(key) {
            Entry::Occupied(held) => (held.into_mut(), false),
            Entry::Vacant(slot) => {
                self.len += 1;
                (slot.insert(make()), true)
            }
        }
    }

    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let old = self.chunk_mut(&key).insert(key, value);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// Sets `key` to what `f` makes of its value (`None`: absent) —
    /// `Some` stores, `None` removes — finding it once where a `get` and an
    /// `insert` would find it twice. Always a write: a shared chunk is
    /// copied first.
    pub fn update(&mut self, key: K, f: impl FnOnce(Option<&V>) -> Option<V>) {
        use std::collections::hash_map::Entry;
        let grew = match self.chunk_mut(&key).entry(key) {
            Entry::Occupied(mut held) => match f(Some(held.get())) {
                Some(v) => {
                    held.insert(v);
                    0
                }
                None => {
                    held.remove();
                    -1
                }
            },
            Entry::Vacant(slot) => match f(None) {
                Some(v) => {
                    slot.insert(v);
                    1
                }
                None => 0,
            },
        };
        self.len = self.len.checked_add_signed(grew).expect("a map's length stays within usize");
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        let chunk = &mut self.chunks[chunk_of(key)];
        if Arc::get_mut(chunk).is_none() && !chunk.contains_key(key) {
            return None;
        }
        let old = Arc::make_mut(chunk).remove(key);
        self.len -= usize::from(old.is_some());
        old
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every entry, in no meaningful order (see the module doc).
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// Every entry sorted by key: the order that leaves the process.
    pub fn sorted(&self) -> Vec<(&K, &V)>
    where
        K: Ord,
    {
        let mut all: Vec<(&K, &V)> = self.iter().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all
    }
}

impl<K: std::fmt::Debug, V> std::fmt::Debug for CowMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CowMap({} entries)", self.len)
    }
}

/// Serialized as its entries sorted by key, so the bytes depend on the
/// contents only.
impl<K: Hash + Eq + Ord + Clone + Serialize, V: Clone + Serialize> Serialize for CowMap<K, V> {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        serializer.collect_seq(self.sorted())
    }
}

impl<'de, K, V> Deserialize<'de> for CowMap<K, V>
where
    K: Hash + Eq + Clone + Deserialize<'de>,
    V: Clone + Deserialize<'de>,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<CowMap<K, V>, D::Error> {
        let entries: Vec<(K, V)> = Vec::deserialize(deserializer)?;
        Ok(entries.into_iter().collect())
    }
}

impl<K: Hash + Eq + Clone, V: Clone> FromIterator<(K, V)> for CowMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        let mut map = CowMap::new();
        for (k, v) in entries {
            map.insert(k, v);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_are_spaced_by_the_state_once_it_outgrows_the_fixed_interval() {
        assert_eq!(checkpoint_interval(100, 50, 1), 100, "a small state: the fixed interval");
        assert_eq!(checkpoint_interval(100, 1_000, 1), 1_000, "one entry per state entry");
        assert_eq!(checkpoint_interval(100, 1_000, 4), 250, "one per four");
        assert_eq!(checkpoint_interval(100, 1_000, 0), 100, "0: the fixed interval alone");
    }

    #[test]
    fn a_clone_is_a_snapshot_that_later_writes_do_not_touch() {
        let mut m: CowMap<u64, u64> = (0..10_000).map(|k| (k, k)).collect();
        let snapshot = m.clone();
        m.insert(5, 500);
        m.remove(&6);
        m.insert(20_000, 1);
        *m.get_mut(&7).expect("present") = 700;
        assert_eq!((snapshot.get(&5), snapshot.get(&6), snapshot.get(&7)), (Some(&5), Some(&6), Some(&7)));
        assert_eq!(snapshot.get(&20_000), None);
        assert_eq!(snapshot.len(), 10_000);
        assert_eq!((m.get(&5), m.get(&6), m.get(&7)), (Some(&500), None, Some(&700)));
        assert_eq!(m.len(), 10_000);
    }

    #[test]
    fn a_write_after_a_clone_copies_one_chunk_only() {
        let mut m: CowMap<u64, u64> = (0..10_000).map(|k| (k, k)).collect();
        let snapshot = m.clone();
        m.insert(1, 2);
        let shared = m.chunks.iter().zip(&snapshot.chunks).filter(|(a, b)| Arc::ptr_eq(a, b)).count();
        assert_eq!(shared, CHUNKS - 1);
        assert_eq!(m.get_mut(&123_456), None);
        assert_eq!(m.remove(&123_456), None);
        let still = m.chunks.iter().zip(&snapshot.chunks).filter(|(a, b)| Arc::ptr_eq(a, b)).count();
        assert_eq!(still, CHUNKS - 1, "a miss copies nothing");
    }

    #[test]
    fn an_update_stores_replaces_or_removes_as_insert_and_remove_would() {
        let mut m: CowMap<u64, u64> = (0..100).map(|k| (k, k)).collect();
        let snapshot = m.clone();
        m.update(5, |v| v.map(|v| v + 1)); // replaces
        m.update(6, |_| None); // removes
        m.update(500, |v| Some(v.copied().unwrap_or(0) + 9)); // stores
        m.update(501, |_| None); // absent stays absent
        assert_eq!((m.get(&5), m.get(&6), m.get(&500), m.get(&501)), (Some(&6), None, Some(&9), None));
        assert_eq!(m.len(), 100, "one removed, one added");
        assert_eq!(
            (snapshot.get(&5), snapshot.get(&6), snapshot.len()),
            (Some(&5), Some(&6), 100),
            "the snapshot keeps"
        );
    }

    #[test]
    fn get_or_insert_with_inserts_once_and_copies_only_the_chunk_it_writes() {
        let mut m: CowMap<u64, u64> = (0..100).map(|k| (k, k)).collect();
        let snapshot = m.clone();
        let (v, inserted) = m.get_or_insert_with(5, || 0);
        assert_eq!((*v, inserted), (5, false), "present: its value, nothing made");
        *v = 50;
        let (v, inserted) = m.get_or_insert_with(500, || 7);
        assert_eq!((*v, inserted), (7, true));
        assert_eq!((m.get(&5), m.get(&500), m.len()), (Some(&50), Some(&7), 101));
        assert_eq!((snapshot.get(&5), snapshot.get(&500), snapshot.len()), (Some(&5), None, 100), "the snapshot keeps");
        let shared = m.chunks.iter().zip(&snapshot.chunks).filter(|(a, b)| Arc::ptr_eq(a, b)).count();
        assert!(shared >= CHUNKS - 2, "only the written chunks were copied");
    }

    #[test]
    fn get_mut_and_remove_on_an_unshared_chunk_find_and_miss_alike() {
        let mut m: CowMap<u64, u64> = (0..100).map(|k| (k, k)).collect();
        assert_eq!(m.get_mut(&1000), None);
        assert_eq!(m.remove(&1000), None);
        *m.get_mut(&3).expect("present") = 30;
        assert_eq!((m.remove(&3), m.remove(&3), m.len()), (Some(30), None, 99));
        let snapshot = m.clone();
        assert_eq!(m.get_mut(&1000), None, "a miss on a shared chunk");
        assert_eq!(m.remove(&1000), None);
        assert_eq!(m.chunks.iter().zip(&snapshot.chunks).filter(|(a, b)| Arc::ptr_eq(a, b)).count(), CHUNKS);
    }

    #[test]
    fn keys_spread_over_the_chunks() {
        let mut m: CowMap<u64, ()> = CowMap::new();
        // Keys a multiple of a large stride apart, as shifted bench keys are.
        for k in 0..(64 * CHUNKS as u64) {
            m.insert(k * (3 << 32), ());
        }
        let fullest = m.chunks.iter().map(|c| c.len()).max().unwrap_or(0);
        assert!(fullest < 4 * 64, "one chunk holds {fullest} of {} keys", m.len());
    }

    #[test]
    fn serialization_is_sorted_and_round_trips() {
        let mut a: CowMap<u64, u64> = CowMap::new();
        let mut b: CowMap<u64, u64> = CowMap::new();
        for k in 0..100 {
            a.insert(k, k * 2);
            b.insert(99 - k, (99 - k) * 2);
        }
        let (ba, bb) = (postcard::to_allocvec(&a).unwrap(), postcard::to_allocvec(&b).unwrap());
        assert_eq!(ba, bb, "the same contents give the same bytes");
        let back: CowMap<u64, u64> = postcard::from_bytes(&ba).unwrap();
        assert_eq!(back.sorted(), a.sorted());
    }
}
