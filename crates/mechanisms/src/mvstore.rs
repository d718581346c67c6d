//! The multi-version key-value store every protocol's replicas keep,
//! generic over what each version carries besides its value.
//!
//! Each key holds versions ordered by a protocol-chosen version number (a
//! log slot, a timestamp). Reads ask for the latest version or the latest
//! at or below a version; protocols that execute optimistically can revoke a
//! version (Tiga §3.5); garbage collection keeps the newest version at or
//! below a watermark and everything above it. An absent key reads as `None`
//! (the initial state of a pre-populated store: counter 0, empty list).
//!
//! Per-version metadata ([`VersionMeta`]) is `()` for the protocols that
//! need none (2pl-paxos, Tiga: it costs nothing). Protocols that keep write
//! intents — a prepared version a reader at a later timestamp must wait on
//! or skip (K2, MVTO-HLC, TAPIR-style prepares) — or per-version metadata
//! such as the writer and its sibling keys (RAMP's and NOC-NOC's
//! read-atomic fetch of a named version) use [`Meta`] or their own type:
//! intents are installed with [`MvStore::install_intent`], committed (at
//! their final version number) or aborted, never returned as committed by
//! [`MvStore::read_committed_at`], and never dropped by garbage collection.
//!
//! Lookups only: nothing here depends on hash-map iteration order, and the
//! snapshot is sorted. A clone (a checkpoint) is cheap and the copying it
//! implies is spread over later writes ([`CowMap`]).

use crate::cow_map::CowMap;
use meridian_core::{Key, TxnId, Value};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt::Debug;
use std::sync::Arc;

/// What a version carries besides its number and value.
pub trait VersionMeta: Clone + Debug + PartialEq + Default + Serialize + DeserializeOwned {
    /// A write intent: prepared, not committed.
    fn is_intent(&self) -> bool {
        false
    }

    /// Marks the version committed.
    fn commit(&mut self) {}
}

impl VersionMeta for () {}

/// Whether a version is committed.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Prepared,
    #[default]
    Committed,
}

/// Ready-made metadata for the protocols with intents and read-atomic
/// fetches: status, the writing transaction, the other keys it wrote, the
/// snapshot its writer had read at.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    pub status: Status,
    pub writer: Option<TxnId>,
    /// The other keys the writer wrote (RAMP's sibling set).
    pub siblings: Arc<[Key]>,
    /// The snapshot its writer read at when it wrote: Eiger-PORT orders a
    /// client's own version there, not at its commit timestamp, in that
    /// client's later reads.
    pub snapshot: Option<u64>,
}

impl VersionMeta for Meta {
    fn is_intent(&self) -> bool {
        self.status == Status::Prepared
    }

    fn commit(&mut self) {
        self.status = Status::Committed;
    }
}

/// One version of a key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version<M = ()> {
    pub version: u64,
    pub value: Value,
    pub meta: M,
}

/// What a read at a timestamp found among committed versions.
#[derive(Debug, PartialEq)]
pub enum ReadAt<'a, M> {
    /// The newest committed version at or below the timestamp (`None`: the
    /// initial state), and no intent between it and the timestamp.
    Committed(Option<&'a Version<M>>),
    /// An intent at or below the timestamp is newer than every committed
    /// version there: the reader must wait for it (or skip it, if its
    /// protocol says so — the committed version below is given).
    Intent { intent: &'a Version<M>, committed: Option<&'a Version<M>> },
}

/// A key's versions, oldest first; the single-version case (every key of a
/// single-version protocol) is kept inline, without a heap allocation.
#[derive(Clone, Debug)]
enum Versions<M> {
    One(Version<M>),
    Many(Vec<Version<M>>),
}

impl<M: VersionMeta> Versions<M> {
    fn as_slice(&self) -> &[Version<M>] {
        match self {
            Versions::One(v) => std::slice::from_ref(v),
            Versions::Many(vs) => vs,
        }
    }

    fn to_vec_mut(&mut self) -> &mut Vec<Version<M>> {
        if let Versions::One(v) = self {
            let placeholder = Version { version: 0, value: Value::int(0, 0), meta: M::default() };
            let v = std::mem::replace(v, placeholder);
            *self = Versions::Many(vec![v]);
        }
        match self {
            Versions::Many(vs) => vs,
            Versions::One(_) => unreachable!("converted above"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct MvStore<M = ()> {
    map: CowMap<Key, Versions<M>>,
    versions: usize,
}

impl<M: Clone> Default for MvStore<M> {
    fn default() -> Self {
        MvStore { map: CowMap::new(), versions: 0 }
    }
}

impl MvStore {
    /// A store whose versions carry no metadata.
    pub fn new() -> MvStore {
        MvStore::default()
    }
}

impl<M: VersionMeta> MvStore<M> {
    /// Every version of a key, oldest first (prepared ones included): for
    /// reads whose rule depends on who wrote each version (Eiger-PORT's).
    pub fn versions_of(&self, key: Key) -> &[Version<M>] {
        self.map.get(&key).map_or(&[], Versions::as_slice)
    }

    /// The newest version of a key, whatever its status: its number and
    /// value in one look-up (a 2PL read sends the value and keeps the
    /// number for its prepare's check).
    pub fn newest(&self, key: Key) -> Option<&Version<M>> {
        self.versions_of(key).last()
    }

    /// The newest version of a key.
    pub fn latest(&self, key: Key) -> Option<&Value> {
        self.newest(key).map(|v| &v.value)
    }

    /// The newest version numbered at or below `version`.
    pub fn read_at(&self, key: Key, version: u64) -> Option<&Value> {
        let vs = self.versions_of(key);
        let i = vs.partition_point(|v| v.version <= version);
        (i > 0).then(|| &vs[i - 1].value)
    }

    /// The version number of the newest version of a key.
    pub fn latest_version(&self, key: Key) -> Option<u64> {
        self.newest(key).map(|v| v.version)
    }

    /// The version numbered exactly `version` (RAMP's second-round fetch
    /// of a version its sibling metadata named).
    pub fn read_exact(&self, key: Key, version: u64) -> Option<&Version<M>> {
        let vs = self.versions_of(key);
        vs.binary_search_by_key(&version, |v| v.version).ok().map(|i| &vs[i])
    }

    /// The newest committed version of a key.
    pub fn latest_committed(&self, key: Key) -> Option<&Version<M>> {
        self.versions_of(key).iter().rev().find(|v| !v.meta.is_intent())
    }

    /// A read at timestamp `ts` that must not see uncommitted writes: the
    /// newest committed version at or below it, unless an intent lies
    /// between that version and `ts`.
    pub fn read_committed_at(&self, key: Key, ts: u64) -> ReadAt<'_, M> {
        let vs = self.versions_of(key);
        let below = &vs[..vs.partition_point(|v| v.version <= ts)];
        let committed = below.iter().rev().find(|v| !v.meta.is_intent());
        match below.last().filter(|v| v.meta.is_intent()) {
            Some(intent) => ReadAt::Intent { intent, committed },
            None => ReadAt::Committed(committed),
        }
    }

    /// Installs a version (replacing one with the same number).
    pub fn install(&mut self, key: Key, version: u64, value: Value) {
        self.install_with(key, version, value, M::default());
    }

    /// Installs a version with its metadata (replacing one with the same
    /// number).
    pub fn install_with(&mut self, key: Key, version: u64, value: Value, meta: M) {
        let mut new = Some(Version { version, value, meta });
        let (entry, inserted) = self.map.get_or_insert_with(key, || Versions::One(new.take().expect("made once")));
        if inserted {
            self.versions += 1;
            return;
        }
        let Version { version, value, meta } = new.expect("not inserted");
        let vs = entry.to_vec_mut();
        let i = vs.partition_point(|v| v.version < version);
        if i < vs.len() && vs[i].version == version {
            vs[i].value = value;
            vs[i].meta = meta;
        } else {
            vs.insert(i, Version { version, value, meta });
            self.versions += 1;
        }
    }

    /// Installs a write intent: `meta` must say it is one.
    pub fn install_intent(&mut self, key: Key, version: u64, value: Value, meta: M) {
        assert!(meta.is_intent(), "an intent's metadata marks it prepared");
        self.install_with(key, version, value, meta);
    }

    /// Commits the intent numbered `version`, moving it to `final_version`
    /// (a commit timestamp may exceed the prepare's). False if there is no
    /// such intent.
    pub fn commit_intent(&mut self, key: Key, version: u64, final_version: u64) -> bool {
        let Some(v) = self.read_exact(key, version).filter(|v| v.meta.is_intent()).cloned() else {
            return false;
        };
        assert!(final_version >= version, "a commit never moves a version back");
        self.revoke(key, version);
        let mut meta = v.meta;
        meta.commit();
        self.install_with(key, final_version, v.value, meta);
        true
    }

    /// Aborts the intent numbered `version`. False if there is no such
    /// intent (a committed version is never aborted).
    pub fn abort_intent(&mut self, key: Key, version: u64) -> bool {
        let intent = self.read_exact(key, version).is_some_and(|v| v.meta.is_intent());
        intent && self.revoke(key, version)
    }

    /// Installs a value as the only version of the key (single-version
    /// protocols such as 2PL).
    pub fn put(&mut self, key: Key, version: u64, value: Value) {
        let meta = M::default();
        let old = self.map.insert(key, Versions::One(Version { version, value, meta }));
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

    /// Drops committed versions of `key` older than the newest committed
    /// one at or below `watermark` (no reader will ask for them again).
    /// Intents stay whatever their number.
    pub fn gc(&mut self, key: Key, watermark: u64) {
        let Some(Versions::Many(vs)) = self.map.get_mut(&key) else { return };
        let upto = vs.partition_point(|v| v.version <= watermark);
        let Some(keep) = vs[..upto].iter().rposition(|v| !v.meta.is_intent()) else { return };
        let before = vs.len();
        let mut i = 0;
        vs.retain(|v| {
            let drop = i < keep && !v.meta.is_intent();
            i += 1;
            !drop
        });
        self.versions -= before - vs.len();
    }

    pub fn keys(&self) -> usize {
        self.map.len()
    }

    pub fn versions(&self) -> usize {
        self.versions
    }

    /// Every key's versions, sorted by key (for checkpoints and tests).
    pub fn snapshot(&self) -> Vec<(Key, Vec<Version<M>>)> {
        self.map.sorted().into_iter().map(|(k, v)| (*k, v.as_slice().to_vec())).collect()
    }
}

/// Serialized as its sorted snapshot, so the bytes do not depend on hash
/// order.
impl<M: VersionMeta> Serialize for MvStore<M> {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        self.snapshot().serialize(serializer)
    }
}

impl<'de, M: VersionMeta> Deserialize<'de> for MvStore<M> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<MvStore<M>, D::Error> {
        let all: Vec<(Key, Vec<Version<M>>)> = Vec::deserialize(deserializer)?;
        let mut store = MvStore::default();
        for (key, versions) in all {
            for v in versions {
                store.install_with(key, v.version, v.value, v.meta);
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
    fn the_newest_version_carries_the_latest_value_and_number_intents_included() {
        let mut s: MvStore<Meta> = MvStore::default();
        assert!(s.newest(Key(1)).is_none());
        s.install_with(Key(1), 10, v(1), Meta::default());
        s.install_with(Key(1), 20, v(2), Meta::default());
        let n = s.newest(Key(1)).expect("two versions");
        assert_eq!((n.version, &n.value), (20, &v(2)));
        assert_eq!((s.latest_version(Key(1)), s.latest(Key(1))), (Some(20), Some(&v(2))));
        s.install_intent(Key(1), 30, v(3), intent(7));
        assert_eq!(s.newest(Key(1)).map(|n| n.version), Some(30), "an intent is the newest version");
        assert_eq!(s.latest_committed(Key(1)).map(|c| c.version), Some(20));
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
        assert_eq!(s.snapshot(), vec![(Key(1), vec![Version { version: 2, value: v(2), meta: () }])]);
    }

    fn intent(writer: u64) -> Meta {
        let writer = Some(TxnId { node: meridian_core::NodeId(1), seq: writer });
        Meta { status: Status::Prepared, writer, siblings: Arc::from([Key(2), Key(3)]), snapshot: None }
    }

    #[test]
    fn a_read_at_a_timestamp_sees_the_newest_committed_version_at_or_below_it() {
        let mut s: MvStore<Meta> = MvStore::default();
        s.install(Key(1), 10, v(1));
        s.install(Key(1), 20, v(2));
        s.install(Key(1), 30, v(3));
        let got = |ts| match s.read_committed_at(Key(1), ts) {
            ReadAt::Committed(c) => c.map(|c| c.version),
            other => panic!("{other:?}"),
        };
        assert_eq!((got(5), got(10), got(25), got(99)), (None, Some(10), Some(20), Some(30)));
    }

    #[test]
    fn a_prepared_version_below_a_read_is_reported_not_returned() {
        let mut s: MvStore<Meta> = MvStore::default();
        s.install(Key(1), 10, v(1));
        s.install_intent(Key(1), 20, v(2), intent(7));
        match s.read_committed_at(Key(1), 25) {
            ReadAt::Intent { intent, committed } => {
                assert_eq!(intent.version, 20);
                assert_eq!(committed.map(|c| c.version), Some(10), "the committed version below is offered");
            }
            other => panic!("an intent below the read must be reported: {other:?}"),
        }
        assert_eq!(s.read_committed_at(Key(1), 15), ReadAt::Committed(s.read_exact(Key(1), 10)));
        assert_eq!(s.latest_committed(Key(1)).map(|c| c.version), Some(10));
    }

    #[test]
    fn a_committed_intent_moves_to_its_commit_timestamp_and_an_aborted_one_is_gone() {
        let mut s: MvStore<Meta> = MvStore::default();
        s.install_intent(Key(1), 20, v(2), intent(7));
        s.install_intent(Key(2), 20, v(9), intent(8));
        assert!(s.commit_intent(Key(1), 20, 26));
        assert!(s.read_exact(Key(1), 20).is_none());
        let c = s.read_exact(Key(1), 26).expect("committed at 26");
        assert_eq!((c.meta.status, c.value.clone()), (Status::Committed, v(2)));
        assert!(!s.commit_intent(Key(1), 26, 30), "a committed version is no intent");
        assert!(!s.abort_intent(Key(1), 26), "a committed version is never aborted");
        assert!(s.abort_intent(Key(2), 20));
        assert_eq!(s.keys(), 1);
        assert_eq!(s.versions(), 1);
    }

    #[test]
    fn gc_keeps_prepared_versions_and_the_newest_committed_below_the_watermark() {
        let mut s: MvStore<Meta> = MvStore::default();
        s.install(Key(1), 10, v(1));
        s.install_intent(Key(1), 15, v(5), intent(7));
        s.install(Key(1), 20, v(2));
        s.install(Key(1), 30, v(3));
        s.install(Key(1), 40, v(4));
        s.gc(Key(1), 35);
        let left: Vec<u64> = s.snapshot()[0].1.iter().map(|v| v.version).collect();
        assert_eq!(left, [15, 30, 40], "the intent stays; 30 serves reads at 35");
        assert_eq!(s.versions(), 3);
    }

    #[test]
    fn an_exact_version_read_finds_a_sibling_named_by_metadata() {
        // RAMP-F: a reader that saw key 1 at 20, written with sibling keys 2
        // and 3, fetches exactly version 20 of those.
        let mut s: MvStore<Meta> = MvStore::default();
        let meta = Meta { status: Status::Committed, ..intent(7) };
        for k in [1, 2, 3] {
            s.install_with(Key(k), 20, v(k), meta.clone());
            s.install(Key(k), 30, v(10 + k));
        }
        let first = s.read_exact(Key(1), 20).expect("version 20");
        for sibling in first.meta.siblings.iter() {
            assert_eq!(s.read_exact(*sibling, 20).map(|v| v.value.clone()), Some(v(sibling.0)));
        }
        assert!(s.read_exact(Key(2), 25).is_none());
    }

    #[test]
    fn a_store_with_metadata_round_trips_through_its_encoding() {
        let mut s: MvStore<Meta> = MvStore::default();
        s.install(Key(1), 10, v(1));
        s.install_intent(Key(1), 20, v(2), intent(7));
        let bytes = postcard::to_allocvec(&s).expect("encode");
        let back: MvStore<Meta> = postcard::from_bytes(&bytes).expect("decode");
        assert_eq!(back.snapshot(), s.snapshot());
        let plain = MvStore::new();
        let empty: MvStore = postcard::from_bytes(&postcard::to_allocvec(&plain).unwrap()).unwrap();
        assert_eq!(empty.keys(), 0);
    }

    #[test]
    fn metadata_free_versions_cost_no_space() {
        assert_eq!(std::mem::size_of::<Version>(), std::mem::size_of::<(u64, Value)>());
    }
}
