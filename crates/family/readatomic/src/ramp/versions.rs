//! A partition's versions ("Scalable Atomic Visibility with RAMP
//! Transactions", Algorithm 1 lines 1-2: `versions` and `lastCommit`) and
//! their garbage collection (§4.5 / §5.3: versions older than the last
//! commit may go once no reader will ask for them).
//!
//! Versions live in the shared multi-version store, numbered by their
//! timestamp, prepared ones as intents: `lastCommit[i]` is the newest
//! committed version of `i` (commits only ever raise it, line 8, and the
//! store's newest committed version is the maximum).
//!
//! Garbage collection is bounded twice: a version overwritten by a newer
//! commit is kept `gc_window_ms` (a reader that saw its sibling, or got
//! its timestamp in a first round, asks for it within a round trip), and
//! at most `superseded_max` overwrites wait at once (beyond, the oldest is
//! collected early). A reader asking for a collected version is told so
//! (`Lookup::Gone`) and starts its read again: `collected` remembers, per
//! key, the newest version dropped, so that RAMP-S's "newest version in
//! the set" is never answered with an older one because the right one was
//! dropped. Prepared versions are never collected.
//!
//! It never decides what is committed: the partition tells it.

use super::messages::{Item, Ts};
use meridian_core::{Key, TxnId, Value};
use meridian_mechanisms::mvstore::{Meta, MvStore, ReadAt, Status, Version};
use meridian_mechanisms::primary_backup::Item as Shipped;
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::Arc;

/// A version overwritten at `at_ns` by the commit of `by`.
#[derive(Copy, Clone, Debug)]
struct Superseded {
    at_ns: u64,
    key: Key,
    by: Ts,
}

/// What a lookup by timestamp found.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup {
    Found(Item),
    /// A version the reader may need was collected: read again.
    Gone,
}

pub struct Versions {
    store: MvStore<Meta>,
    superseded: VecDeque<Superseded>,
    collected: FxHashMap<Key, Ts>,
    window_ns: u64,
    superseded_max: usize,
    /// Versions dropped since `collect` last reported.
    dropped: u64,
    /// With primary-backup replication (`common::backup`): the versions
    /// committed as their key's newest since the primary's last shipping
    /// tick (one tick's commits).
    feed: Option<Vec<Shipped>>,
    /// Keys read, installed, committed or aborted since the owner last took
    /// the count: the per-key work it charges the cost model
    /// (`Env::charge_keys`).
    touched: Cell<u64>,
}

fn item(key: Key, v: Option<&Version<Meta>>) -> Item {
    match v {
        Some(v) => {
            Item { key, ts: Some(Ts(v.version)), value: Some(v.value.clone()), siblings: Arc::clone(&v.meta.siblings) }
        }
        None => Item { key, ts: None, value: None, siblings: Arc::from([]) },
    }
}

impl Versions {
    pub fn new(window_ns: u64, superseded_max: usize) -> Versions {
        assert!(superseded_max > 0, "at least one overwrite may wait for collection");
        Versions {
            store: MvStore::default(),
            superseded: VecDeque::new(),
            collected: FxHashMap::default(),
            window_ns,
            superseded_max,
            dropped: 0,
            feed: None,
            touched: Cell::new(0),
        }
    }

    /// Restores a checkpoint's versions and what was collected before it.
    pub fn restore(&mut self, store: MvStore<Meta>, collected: &[(Key, Ts)]) {
        self.store = store;
        self.collected = collected.iter().copied().collect();
    }

    /// Algorithm 1 line 4: adds a prepared version (with RAMP-F's
    /// `siblings`, `I_tx − {i}`; RAMP-S passes none).
    pub fn prepare(&mut self, key: Key, ts: Ts, value: Value, siblings: Arc<[Key]>) {
        let meta = Meta { status: Status::Prepared, writer: None, siblings, snapshot: None };
        self.touch();
        self.store.install_intent(key, ts.0, value, meta);
    }

    /// Adds a prepared version with its writer and the snapshot the writer
    /// read at (Eiger-PORT, whose reads order a client's own versions
    /// there).
    pub fn prepare_by(&mut self, key: Key, ts: Ts, value: Value, writer: TxnId, snapshot: Option<Ts>) {
        let meta = Meta {
            status: Status::Prepared,
            writer: Some(writer),
            siblings: Arc::from([]),
            snapshot: snapshot.map(|s| s.0),
        };
        self.touch();
        self.store.install_intent(key, ts.0, value, meta);
    }

    /// Algorithm 1 lines 7-8: commits the prepared version `ts` of `key`;
    /// `lastCommit` becomes the larger of the two. Whichever version is
    /// now below `lastCommit` waits for collection. False if `ts` was not
    /// prepared here.
    pub fn commit(&mut self, key: Key, ts: Ts, now_ns: u64) -> bool {
        self.commit_at(key, ts, ts, now_ns)
    }

    /// Commits the prepared version `ts` of `key` at `at` (at or above it:
    /// Eiger's commit timestamp is the largest of the participants'
    /// prepare timestamps, NOC-NOC Algorithm 6 lines 18, 37). False if `ts`
    /// was not prepared here.
    pub fn commit_at(&mut self, key: Key, ts: Ts, at: Ts, now_ns: u64) -> bool {
        self.touch();
        if !self.store.commit_intent(key, ts.0, at.0) {
            return false;
        }
        let last = self.last_commit(key).expect("just committed");
        debug_assert!(last >= at, "lastCommit never falls below a commit");
        if let Some(feed) = &mut self.feed
            && last == at
        {
            let value = self.store.read_exact(key, at.0).expect("just committed").value.clone();
            feed.push(Shipped { key, version: at.0, value });
        }
        self.superseded.push_back(Superseded { at_ns: now_ns, key, by: last });
        while self.superseded.len() > self.superseded_max {
            let s = self.superseded.pop_front().expect("over the bound");
            self.collect_below(s.key, s.by);
        }
        true
    }

    /// Drops the prepared version `ts` of `key` (an aborted transaction).
    pub fn abort(&mut self, key: Key, ts: Ts) {
        self.touch();
        self.store.abort_intent(key, ts.0);
    }

    /// `lastCommit[key]`.
    pub fn last_commit(&self, key: Key) -> Option<Ts> {
        self.store.latest_committed(key).map(|v| Ts(v.version))
    }

    /// Whether the version `ts` of `key` is here (prepared or committed).
    pub fn holds(&self, key: Key, ts: Ts) -> bool {
        self.store.read_exact(key, ts.0).is_some()
    }

    /// Algorithm 1 lines 10-11: the version at `lastCommit`.
    pub fn latest(&self, key: Key) -> Item {
        self.touch();
        item(key, self.store.latest_committed(key))
    }

    /// Algorithm 1 lines 12-13: the version `ts` exactly.
    pub fn exact(&self, key: Key, ts: Ts) -> Lookup {
        self.touch();
        match self.store.read_exact(key, ts.0) {
            Some(v) => Lookup::Found(item(key, Some(v))),
            None => Lookup::Gone,
        }
    }

    /// LORA's GET (`crate::lora`): the version `ts` of `key` exactly,
    /// prepared or committed, or the initial state when `ts` is `None`.
    /// When that version was collected — which happens only once a newer
    /// commit overwrote it — the newest committed version instead (the
    /// client checks it against the rest of its read). Gone if neither is
    /// here.
    pub fn known(&self, key: Key, ts: Option<Ts>) -> Lookup {
        self.touch();
        let Some(ts) = ts else { return Lookup::Found(item(key, None)) };
        if let Some(v) = self.store.read_exact(key, ts.0) {
            return Lookup::Found(item(key, Some(v)));
        }
        match self.store.latest_committed(key) {
            Some(v) if Ts(v.version) > ts => Lookup::Found(item(key, Some(v))),
            _ => Lookup::Gone,
        }
    }

    /// NOC-NOC Algorithm 1 lines 40-43 (RA-NOC2's GET at the global safe
    /// view): the newest committed version of `key` at or below `ts`,
    /// prepared ones skipped (line 42); the initial state when `ts` is
    /// `None`. Gone if a version newer than the one found was collected:
    /// only the newest collected is remembered, and the one the reader
    /// needs may lie below it (a reader at an old view after a collection
    /// that dropped versions on both sides of it).
    pub fn committed_at(&self, key: Key, ts: Option<Ts>) -> Lookup {
        self.touch();
        let Some(ts) = ts else { return Lookup::Found(item(key, None)) };
        let found = match self.store.read_committed_at(key, ts.0) {
            ReadAt::Committed(v) => v,
            ReadAt::Intent { committed, .. } => committed,
        };
        let found_ts = found.map(|v| Ts(v.version));
        if self.collected.get(&key).is_some_and(|c| Some(*c) > found_ts) {
            return Lookup::Gone;
        }
        Lookup::Found(item(key, found))
    }

    /// Algorithm 2's second-round GET: the newest version of `key` whose
    /// timestamp is in `among` (sorted), or the initial state if none is.
    /// Gone if a version in `among` newer than that one was collected.
    pub fn among(&self, key: Key, among: &[Ts]) -> Lookup {
        debug_assert!(among.windows(2).all(|w| w[0] < w[1]), "the set is sorted and distinct");
        self.touch();
        let found = among.iter().rev().find_map(|ts| self.store.read_exact(key, ts.0));
        let found_ts = found.map(|v| Ts(v.version));
        let dropped_above =
            self.collected.get(&key).is_some_and(|c| among.iter().any(|t| Some(*t) > found_ts && t <= c));
        if dropped_above {
            return Lookup::Gone;
        }
        Lookup::Found(item(key, found))
    }

    /// Collects the versions overwritten `gc_window_ms` ago or more;
    /// returns how many versions were dropped since the last call (the
    /// oldest overwrites beyond `superseded_max` go as they come).
    pub fn collect(&mut self, now_ns: u64) -> u64 {
        while let Some(s) = self.superseded.front().copied() {
            if s.at_ns.saturating_add(self.window_ns) > now_ns {
                break;
            }
            self.superseded.pop_front();
            self.collect_below(s.key, s.by);
        }
        std::mem::take(&mut self.dropped)
    }

    /// Drops the committed versions of `key` older than `by`, remembering
    /// the newest dropped.
    fn collect_below(&mut self, key: Key, by: Ts) {
        let Some(below) = by.0.checked_sub(1) else { return };
        let newest_dropped = match self.store.read_committed_at(key, below) {
            ReadAt::Committed(v) => v,
            ReadAt::Intent { committed, .. } => committed,
        };
        let Some(newest_dropped) = newest_dropped.map(|v| Ts(v.version)) else { return };
        let before = self.store.versions();
        self.store.gc(key, by.0);
        self.dropped += (before - self.store.versions()) as u64;
        let c = self.collected.entry(key).or_insert(newest_dropped);
        *c = (*c).max(newest_dropped);
    }

    /// After a restart: every key with more than its last commit waits
    /// for collection again (the queue is not durable).
    pub fn requeue_all(&mut self, now_ns: u64) {
        self.superseded.clear();
        for (key, versions) in self.store.snapshot() {
            if versions.len() > 1
                && let Some(by) = self.last_commit(key)
            {
                self.superseded.push_back(Superseded { at_ns: now_ns, key, by });
            }
        }
    }

    /// Every version of `key` still here, oldest first, prepared ones
    /// included.
    pub fn all(&self, key: Key) -> &[Version<Meta>] {
        self.touch();
        self.store.versions_of(key)
    }

    fn touch(&self) {
        self.touched.set(self.touched.get() + 1);
    }

    /// The keys read, installed, committed or aborted since the last call:
    /// what the owner charges the cost model (`Env::charge_keys`).
    pub fn take_touched(&self) -> u64 {
        self.touched.replace(0)
    }

    /// The newest version of `key` collected, if any: a reader that needs
    /// a version at or below it cannot be answered.
    pub fn newest_collected(&self, key: Key) -> Option<Ts> {
        self.collected.get(&key).copied()
    }

    pub fn store(&self) -> &MvStore<Meta> {
        &self.store
    }

    /// Primary-backup replication: from now on (`on`), every commit that
    /// becomes its key's newest is kept for `take_committed`.
    pub fn ship_commits(&mut self, on: bool) {
        self.feed = on.then(Vec::new);
    }

    /// The versions committed as their key's newest since the last call.
    pub fn take_committed(&mut self) -> Vec<Shipped> {
        self.feed.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Every key's newest committed version, sorted by key (a backup's
    /// resync).
    pub fn committed_state(&self) -> Vec<Shipped> {
        self.store
            .snapshot()
            .into_iter()
            .filter_map(|(key, _)| {
                let v = self.store.latest_committed(key)?;
                Some(Shipped { key, version: v.version, value: v.value.clone() })
            })
            .collect()
    }

    /// What was collected, sorted by key (for a checkpoint).
    pub fn collected(&self) -> Vec<(Key, Ts)> {
        let mut all: Vec<(Key, Ts)> = self.collected.iter().map(|(k, t)| (*k, *t)).collect();
        all.sort_unstable();
        all
    }

    pub fn versions(&self) -> usize {
        self.store.versions()
    }

    pub fn waiting(&self) -> usize {
        self.superseded.len()
    }

    pub fn check_invariants(&self) {
        assert!(self.superseded.len() <= self.superseded_max, "overwrites waiting within their bound");
        for s in self.superseded.iter().take(meridian_core::process::CHECKED_MAX) {
            assert!(self.last_commit(s.key).is_some_and(|l| l >= s.by), "an overwrite is below lastCommit");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(tag: u64) -> Value {
        Value::int(tag, tag as i64)
    }

    const K: Key = Key(7);

    fn committed(vs: &mut Versions, ts: u64, at_ns: u64) {
        vs.prepare(K, Ts(ts), v(ts), Arc::from([]));
        assert!(vs.commit(K, Ts(ts), at_ns));
    }

    #[test]
    fn last_commit_is_the_largest_committed_timestamp_whatever_the_commit_order() {
        let mut vs = Versions::new(1_000, 100);
        committed(&mut vs, 20, 0);
        committed(&mut vs, 10, 0);
        assert_eq!(vs.last_commit(K), Some(Ts(20)), "line 8: max(lastCommit, ts)");
        vs.prepare(K, Ts(30), v(30), Arc::from([]));
        assert_eq!(vs.latest(K).ts, Some(Ts(20)), "a prepared version is not read in a first round");
        assert!(matches!(vs.exact(K, Ts(30)), Lookup::Found(i) if i.ts == Some(Ts(30))), "but fetched by timestamp");
    }

    #[test]
    fn overwritten_versions_go_after_the_window_and_a_later_ask_is_told_so() {
        let mut vs = Versions::new(1_000, 100);
        committed(&mut vs, 10, 0);
        committed(&mut vs, 20, 500);
        assert_eq!(vs.collect(1_400), 0, "t=10 overwritten at 500: kept until 1500");
        assert!(matches!(vs.exact(K, Ts(10)), Lookup::Found(_)));
        assert_eq!(vs.collect(1_500), 1);
        assert_eq!(vs.exact(K, Ts(10)), Lookup::Gone);
        assert_eq!(vs.latest(K).ts, Some(Ts(20)), "the last commit stays");
        assert_eq!(vs.among(K, &[Ts(10), Ts(15)]), Lookup::Gone, "RAMP-S must not fall back below a dropped one");
        assert!(matches!(vs.among(K, &[Ts(10), Ts(20)]), Lookup::Found(i) if i.ts == Some(Ts(20))));
        assert!(matches!(vs.among(Key(8), &[Ts(10)]), Lookup::Found(i) if i.ts.is_none()), "never written");
        committed(&mut vs, 30, 600);
        assert_eq!(vs.collect(2_600), 1, "t=20 overwritten at 600");
        assert_eq!(vs.committed_at(K, Some(Ts(25))), Lookup::Gone, "the version at or below 25 was collected");
        assert_eq!(vs.committed_at(K, Some(Ts(5))), Lookup::Gone, "below every version left: unknowable");
        assert!(matches!(vs.committed_at(K, Some(Ts(35))), Lookup::Found(i) if i.ts == Some(Ts(30))));
    }

    #[test]
    fn too_many_waiting_overwrites_are_collected_early() {
        let mut vs = Versions::new(1_000_000, 2);
        for ts in 1..=5 {
            committed(&mut vs, ts * 10, 0);
        }
        assert_eq!(vs.waiting(), 2);
        assert_eq!(vs.exact(K, Ts(10)), Lookup::Gone);
        assert!(matches!(vs.exact(K, Ts(50)), Lookup::Found(_)));
    }

    #[test]
    fn prepared_versions_below_the_last_commit_are_never_collected() {
        let mut vs = Versions::new(0, 100);
        vs.prepare(K, Ts(5), v(5), Arc::from([]));
        committed(&mut vs, 10, 0);
        committed(&mut vs, 20, 0);
        vs.collect(1);
        assert!(vs.holds(K, Ts(5)), "a pending write's version stays until it commits or aborts");
        assert!(!vs.holds(K, Ts(10)));
    }
}
