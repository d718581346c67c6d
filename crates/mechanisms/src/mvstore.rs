//! The multi-version key-value store every protocol's replicas keep.
//!
//! Each key holds versions ordered by a protocol-chosen version number (a
//! log slot, a timestamp). Reads ask for the latest version or the latest
//! at or below a version; protocols that execute optimistically can revoke a
//! version (Tiga §3.5); garbage collection keeps the newest version at or
//! below a watermark and everything above it. An absent key reads as `None`
//! (the initial state of a pre-populated store: counter 0, empty list).
//!
//! Lookups only: nothing here depends on hash-map iteration order, and the
//! snapshot is sorted. A clone (a checkpoint) is cheap and the copying it
//! implies is spread over later writes ([`CowMap`]).

use crate::cow_map::CowMap;
use meridian_core::{Key, Value};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One version of a key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub version: u64,
    pub value: Value,
}

/// A key's versions, oldest first; the single-version case (every key of a
/// single-version protocol) is kept inline, without a heap allocation.
#[derive(Clone, Debug)]
enum Versions {
    One(Version),
    Many(Vec<Version>),
}

impl Versions {
    fn as_slice(&self) -> &[Version] {
        match self {
            Versions::One(v) => std::slice::from_ref(v),
            Versions::Many(vs) => vs,
        }
    }

    fn to_vec_mut(&mut self) -> &mut Vec<Version> {
        if let Versions::One(v) = self {
            let v = std::mem::replace(v, Version { version: 0, value: Value::int(0, 0) });
            *self = Versions::Many(vec![v]);
        }
        match self {
            Versions::Many(vs) => vs,
            Versions::One(_) => unreachable!("converted above"),
        }
    }
}

#[derive(Default, Clone, Debug)]
pub struct MvStore {
    map: CowMap<Key, Versions>,
    versions: usize,
}

impl MvStore {
    pub fn new() -> MvStore {
        MvStore::default()
    }

    fn versions_of(&self, key: Key) -> &[Version] {
        self.map.get(&key).map_or(&[], Versions::as_slice)
    }

    /// The newest version of a key.
    pub fn latest(&self, key: Key) -> Option<&Value> {
        self.versions_of(key).last().map(|v| &v.value)
    }

    /// The newest version numbered at or below `version`.
    pub fn read_at(&self, key: Key, version: u64) -> Option<&Value> {
        let vs = self.versions_of(key);
        let i = vs.partition_point(|v| v.version <= version);
        (i > 0).then(|| &vs[i - 1].value)
    }

    /// The version number of the newest version of a key.
    pub fn latest_version(&self, key: Key) -> Option<u64> {
        self.versions_of(key).last().map(|v| v.version)
    }

    /// Installs a version (replacing one with the same number).
    pub fn install(&mut self, key: Key, version: u64, value: Value) {
        let Some(entry) = self.map.get_mut(&key) else {
            self.map.insert(key, Versions::One(Version { version, value }));
            self.versions += 1;
            return;
        };
        let vs = entry.to_vec_mut();
        let i = vs.partition_point(|v| v.version < version);
        if i < vs.len() && vs[i].version == version {
            vs[i].value = value;
        } else {
            vs.insert(i, Version { version, value });
            self.versions += 1;
        }
    }

    /// Installs a value as the only version of the key (single-version
    /// protocols such as 2PL).
    pub fn put(&mut self, key: Key, version: u64, value: Value) {
        let old = self.map.insert(key, Versions::One(Version { version, value }));
        self.versions = self.versions + 1 - old.map_or(0, |vs| vs.as_slice().len());
    }

    /// Removes one version; true if it existed.
    pub fn revoke(&mut self, key: Key, version: u64) -> bool {
        let Some(entry) = self.map.get_mut(&key) else { return false };
        let vs = entry.to_vec_mut();
        let Ok(i) = vs.binary_search_by_key(&version, |v| v.version) else { return false };
        vs.remove(i);
        self.versions -= 1;
        if vs.is_empty() {
            self.map.remove(&key);
        }
        true
    }

    /// Drops versions of `key` older than the newest one at or below
    /// `watermark` (no reader will ask for them again).
    pub fn gc(&mut self, key: Key, watermark: u64) {
        let Some(Versions::Many(vs)) = self.map.get_mut(&key) else { return };
        let i = vs.partition_point(|v| v.version <= watermark);
        if i > 1 {
            vs.drain(..i - 1);
            self.versions -= i - 1;
        }
    }

    pub fn keys(&self) -> usize {
        self.map.len()
    }

    pub fn versions(&self) -> usize {
        self.versions
    }

    /// Every key's versions, sorted by key (for checkpoints and tests).
    pub fn snapshot(&self) -> Vec<(Key, Vec<Version>)> {
        self.map.sorted().into_iter().map(|(k, v)| (*k, v.as_slice().to_vec())).collect()
    }
}

/// Serialized as its sorted snapshot, so the bytes do not depend on hash
/// order.
impl Serialize for MvStore {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        self.snapshot().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for MvStore {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<MvStore, D::Error> {
        let all: Vec<(Key, Vec<Version>)> = Vec::deserialize(deserializer)?;
        let mut store = MvStore::new();
        for (key, versions) in all {
            for v in versions {
                store.install(key, v.version, v.value);
            }
        }
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(tag: u64) -> Value {
        Value::int(tag, tag as i64)
    }

    #[test]
    fn reads_see_the_newest_version_at_or_below() {
        let mut s = MvStore::new();
        s.install(Key(1), 10, v(1));
        s.install(Key(1), 30, v(3));
        s.install(Key(1), 20, v(2));
        assert_eq!(s.read_at(Key(1), 25), Some(&v(2)));
        assert_eq!(s.read_at(Key(1), 9), None);
        assert_eq!(s.latest(Key(1)), Some(&v(3)));
        assert_eq!(s.latest(Key(2)), None);
        assert_eq!(s.versions(), 3);
    }

    #[test]
    fn revoke_removes_exactly_one_version() {
        let mut s = MvStore::new();
        s.install(Key(1), 10, v(1));
        s.install(Key(1), 20, v(2));
        assert!(s.revoke(Key(1), 20));
        assert!(!s.revoke(Key(1), 20));
        assert_eq!(s.latest(Key(1)), Some(&v(1)));
        assert!(s.revoke(Key(1), 10));
        assert_eq!(s.keys(), 0);
    }

    #[test]
    fn gc_keeps_the_version_readers_at_the_watermark_need() {
        let mut s = MvStore::new();
        for t in [10, 20, 30, 40] {
            s.install(Key(1), t, v(t));
        }
        s.gc(Key(1), 35);
        assert_eq!(s.read_at(Key(1), 35), Some(&v(30)));
        assert_eq!(s.read_at(Key(1), 15), None, "older versions are gone");
        assert_eq!(s.versions(), 2);
    }

    #[test]
    fn put_keeps_a_single_version() {
        let mut s = MvStore::new();
        s.put(Key(1), 1, v(1));
        s.put(Key(1), 2, v(2));
        assert_eq!(s.versions(), 1);
        assert_eq!(s.snapshot(), vec![(Key(1), vec![Version { version: 2, value: v(2) }])]);
    }
}
