//! Optimistic and timestamp-ordering validation.
//!
//! - [`TsTable`]: per-key read and write timestamps for timestamp ordering
//!   (Bernstein and Goodman's basic T/O, which MVTO-HLC and K2's MVTO
//!   refine): a read at `ts` must not come after a later write installed,
//!   a write at `ts` must not precede a later read; a write older than the
//!   newest installed write is obsolete and skipped (Thomas's write rule)
//!   instead of aborting.
//! - [`reads_still_valid`]: backward validation of an optimistic
//!   transaction (OCC-Paxos, TAPIR, Raft-OCC): every version it read is
//!   still the newest.
//!
//! Timestamps are opaque ordered values (`u64` here: HLC or TrueTime
//! timestamps pack into one).

use meridian_core::Key;
use rustc_hash::FxHashMap;

/// What a timestamp-ordered write may do.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WriteCheck {
    /// Install it.
    Apply,
    /// A later write is already installed and no read came in between:
    /// the write is obsolete and skipped (Thomas's write rule).
    Skip,
    /// A later read already saw the value this write would overwrite.
    Abort,
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct Stamps {
    read_ts: u64,
    write_ts: u64,
}

/// Per-key largest read and write timestamps.
#[derive(Clone, Debug, Default)]
pub struct TsTable {
    keys: FxHashMap<Key, Stamps>,
}

impl TsTable {
    pub fn new() -> TsTable {
        TsTable::default()
    }

    /// A read of `key` at `ts`: refused if a later write is installed;
    /// otherwise recorded.
    pub fn read(&mut self, key: Key, ts: u64) -> bool {
        let s = self.keys.entry(key).or_default();
        if ts < s.write_ts {
            return false;
        }
        s.read_ts = s.read_ts.max(ts);
        true
    }

    /// What a write of `key` at `ts` may do; `Apply` records it.
    pub fn write(&mut self, key: Key, ts: u64) -> WriteCheck {
        let s = self.keys.entry(key).or_default();
        if ts < s.read_ts {
            return WriteCheck::Abort;
        }
        if ts < s.write_ts {
            return WriteCheck::Skip;
        }
        s.write_ts = ts;
        WriteCheck::Apply
    }

    /// The checks of a whole write set, all or nothing: `Abort` if any key
    /// aborts (nothing recorded), else each key's `Apply` or `Skip`.
    pub fn write_all(&mut self, keys: &[Key], ts: u64) -> Result<Vec<WriteCheck>, Key> {
        if let Some(k) = keys.iter().find(|k| self.keys.get(k).is_some_and(|s| ts < s.read_ts)) {
            return Err(*k);
        }
        Ok(keys.iter().map(|k| self.write(*k, ts)).collect())
    }

    pub fn read_ts(&self, key: Key) -> u64 {
        self.keys.get(&key).map_or(0, |s| s.read_ts)
    }

    pub fn write_ts(&self, key: Key) -> u64 {
        self.keys.get(&key).map_or(0, |s| s.write_ts)
    }

    /// Forgets keys whose stamps are all at or below `below` (a watermark
    /// no transaction is older than), bounding the table.
    pub fn forget_below(&mut self, below: u64) {
        self.keys.retain(|_, s| s.read_ts > below || s.write_ts > below);
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Backward validation: every `(key, version)` read is still the newest
/// version of its key (`current`); a version is whatever identifies one (a
/// tag, a timestamp; `None` for an absent key).
pub fn reads_still_valid<V: PartialEq>(reads: &[(Key, V)], current: impl Fn(Key) -> V) -> bool {
    reads.iter().all(|(k, v)| current(*k) == *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_after_a_later_write_is_refused_and_a_write_before_a_later_read_aborts() {
        let mut t = TsTable::new();
        assert_eq!(t.write(Key(1), 10), WriteCheck::Apply);
        assert!(!t.read(Key(1), 5), "the value a read at 5 should see is gone");
        assert!(t.read(Key(1), 20));
        assert_eq!(t.write(Key(1), 15), WriteCheck::Abort, "the read at 20 saw the value at 10");
        assert_eq!(t.write(Key(1), 25), WriteCheck::Apply);
    }

    #[test]
    fn an_obsolete_write_no_read_saw_is_skipped_by_thomas_rule() {
        let mut t = TsTable::new();
        assert_eq!(t.write(Key(2), 30), WriteCheck::Apply);
        assert_eq!(t.write(Key(2), 20), WriteCheck::Skip);
        assert_eq!(t.write_ts(Key(2)), 30, "the later write stays");
    }

    #[test]
    fn a_write_set_aborts_as_a_whole_and_records_nothing() {
        let mut t = TsTable::new();
        assert!(t.read(Key(3), 50));
        assert_eq!(t.write_all(&[Key(4), Key(3)], 40), Err(Key(3)));
        assert_eq!(t.write_ts(Key(4)), 0, "nothing recorded for the other key");
        assert_eq!(t.write_all(&[Key(4), Key(3)], 60), Ok(vec![WriteCheck::Apply, WriteCheck::Apply]));
    }

    #[test]
    fn forgetting_below_a_watermark_keeps_what_later_checks_need() {
        let mut t = TsTable::new();
        t.write(Key(1), 10);
        t.read(Key(2), 100);
        t.forget_below(50);
        assert_eq!(t.len(), 1);
        assert_eq!(t.write(Key(2), 60), WriteCheck::Abort, "the read at 100 is remembered");
    }

    #[test]
    fn backward_validation_fails_when_a_read_version_was_overwritten() {
        let current = |k: Key| if k == Key(1) { Some(7u64) } else { None };
        assert!(reads_still_valid(&[(Key(1), Some(7)), (Key(2), None)], current));
        assert!(!reads_still_valid(&[(Key(1), Some(6))], current));
    }
}
