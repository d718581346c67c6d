//! An ordered map for a handful of entries — a transaction's shards, the
//! replicas of one shard that answered — as one vector sorted by key.
//!
//! A B-tree map of three entries allocates a node sized for eleven and
//! walks it on every lookup; a coordinator holding one such map per shard
//! and per kind of reply, for every transaction in flight, spends more on
//! the maps than on what they hold. Here the entries share one allocation
//! (none while the map is empty), lookups bisect a few keys, and iteration
//! is in key order, as a B-tree map's, so a protocol that iterates one
//! sends the same messages in the same order. An insertion moves the
//! entries after it: for maps of a few entries up to a few hundred (the
//! keys one transaction reads at a shard), not for tables that grow with a
//! run.

/// A map kept as a vector of `(key, value)` sorted by key, each key once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmallMap<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for SmallMap<K, V> {
    fn default() -> Self {
        SmallMap { entries: Vec::new() }
    }
}

impl<K: Ord, V> SmallMap<K, V> {
    pub fn new() -> Self {
        Self::default()
    }

    fn find(&self, key: &K) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.cmp(key))
    }

    /// Inserts or replaces `key`'s value; the value replaced, if any.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }

    /// `key`'s value, inserted from `make` first if absent (a B-tree map's
    /// `entry(key).or_insert_with(make)`).
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(&key) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (key, make()));
                i
            }
        };
        &mut self.entries[i].1
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.find(key).is_ok()
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + ExactSizeIterator {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + ExactSizeIterator {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

impl<'a, K: Ord, V> IntoIterator for &'a SmallMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

/// The entries by value, in key order.
impl<K, V> IntoIterator for SmallMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

/// Written as a map in key order, as a B-tree map is.
impl<K: serde::Serialize, V: serde::Serialize> serde::Serialize for SmallMap<K, V> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.entries.iter().map(|(k, v)| (k, v)))
    }
}

impl<'de, K: Ord + serde::Deserialize<'de>, V: serde::Deserialize<'de>> serde::Deserialize<'de> for SmallMap<K, V> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<K, V>::deserialize(deserializer)?;
        Ok(SmallMap { entries: map.into_iter().collect() })
    }
}

/// Collects as a B-tree map would: sorted by key, a repeated key keeping
/// its last value.
impl<K: Ord, V> FromIterator<(K, V)> for SmallMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = SmallMap::new();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A small deterministic generator, so the test needs no crate.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *state >> 33
    }

    #[test]
    fn it_answers_and_iterates_as_a_btree_map_does() {
        let mut state = 7;
        let mut small = SmallMap::new();
        let mut tree = BTreeMap::new();
        for step in 0..5_000u64 {
            let key = next(&mut state) % 9;
            match next(&mut state) % 5 {
                0 => assert_eq!(small.remove(&key), tree.remove(&key), "remove {key} at step {step}"),
                1 => {
                    if let (Some(a), Some(b)) = (small.get_mut(&key), tree.get_mut(&key)) {
                        *a += 1;
                        *b += 1;
                    }
                }
                2 => {
                    *small.get_or_insert_with(key, || step) += 1;
                    *tree.entry(key).or_insert_with(|| step) += 1;
                }
                _ => assert_eq!(small.insert(key, step), tree.insert(key, step), "insert {key} at step {step}"),
            }
            assert_eq!(small.get(&key), tree.get(&key));
            assert_eq!(small.contains_key(&key), tree.contains_key(&key));
            assert_eq!(small.len(), tree.len());
            assert!(small.iter().eq(tree.iter()), "same entries in the same order at step {step}");
        }
        assert!(small.keys().eq(tree.keys()));
        assert!(small.values().eq(tree.values()));
        assert!(small.into_iter().eq(tree), "consumed, the entries come in key order");
    }

    #[test]
    fn collecting_sorts_and_keeps_a_repeated_keys_last_value() {
        let pairs = [(3, "c"), (1, "a"), (3, "z"), (2, "b")];
        let small: SmallMap<_, _> = pairs.into_iter().collect();
        let tree: BTreeMap<_, _> = pairs.into_iter().collect();
        assert!(small.iter().eq(tree.iter()));
        let mut small = small;
        for v in small.values_mut() {
            *v = "x";
        }
        assert!(small.values().all(|v| *v == "x"));
        assert!(SmallMap::<u32, u32>::new().is_empty());
    }

    #[test]
    fn it_encodes_as_a_btree_map_does_and_decodes_back() {
        let small: SmallMap<u64, u32> = [(9, 1), (2, 7), (5, 3)].into_iter().collect();
        let tree: BTreeMap<u64, u32> = [(9, 1), (2, 7), (5, 3)].into_iter().collect();
        let bytes = postcard::to_allocvec(&small).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&tree).unwrap());
        assert_eq!(postcard::from_bytes::<SmallMap<u64, u32>>(&bytes).unwrap(), small);
    }
}
