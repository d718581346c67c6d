//! A LORA client's `last` map: per key, the newest timestamp of a
//! transaction that wrote it that the client knows of — its own writes
//! once fully prepared, and the transactions whose versions its reads
//! returned (their sibling keys with them). A read asks each key at
//! exactly this timestamp (the initial state where it knows none), so
//! the map is what keeps reads atomic:
//!
//! - **Closure.** Whenever `last[k] = t` for a transaction `T` that wrote
//!   `k`, every other key `T` wrote has `last ≥ t`: a transaction's keys
//!   are always learnt together (`wrote`, `learn`), and entries only rise.
//!   A read at `last` therefore never returns `T`'s version of one key and
//!   an older version of another key `T` wrote.
//! - **Own writes.** `own ⊆ last`, each entry at or below the key's
//!   `last`: the client's sessions read their writes (read-your-writes).
//!   Only `own` is durable (a learnt entry lost in a crash costs freshness,
//!   not safety).
//!
//! Bounded by `known_max` keys: a write or a lesson that would pass it is
//! refused whole (the write is rejected, the lesson skipped), never
//! half-learnt, which would break the closure.

use crate::ramp::Ts;
use meridian_core::Key;
use std::collections::BTreeMap;

pub struct Known {
    last: BTreeMap<Key, Ts>,
    own: BTreeMap<Key, Ts>,
    max: usize,
}

impl Known {
    pub fn new(max: usize) -> Known {
        assert!(max > 0, "a client knows some keys");
        Known { last: BTreeMap::new(), own: BTreeMap::new(), max }
    }

    /// A restarted client: its own writes, recorded durably.
    pub fn restore(&mut self, own: impl IntoIterator<Item = (Key, Ts)>) {
        for (key, ts) in own {
            raise(&mut self.own, key, ts);
            raise(&mut self.last, key, ts);
        }
        assert!(self.last.len() <= self.max.max(self.own.len()), "a restart restores what was recorded");
    }

    /// `last[key]`: the timestamp a read of `key` asks for.
    pub fn at(&self, key: Key) -> Option<Ts> {
        self.last.get(&key).copied()
    }

    /// Keys known.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Whether `keys` fit with `reserved` more keys to come.
    pub fn fits(&self, keys: &[Key], reserved: usize) -> bool {
        let new = keys.iter().filter(|k| !self.last.contains_key(k)).count();
        self.last.len() + new + reserved <= self.max
    }

    /// The client's write at `ts` of `keys` is fully prepared.
    pub fn wrote(&mut self, ts: Ts, keys: &[Key]) {
        assert!(self.fits(keys, 0), "a write is admitted only if its keys fit");
        for key in keys {
            raise(&mut self.own, *key, ts);
            raise(&mut self.last, *key, ts);
        }
    }

    /// A read returned the version `ts` of `key`, whose transaction also
    /// wrote `siblings`: learnt whole if it fits with `reserved` keys to
    /// come; how many entries rose (0 when skipped).
    pub fn learn(&mut self, ts: Ts, key: Key, siblings: &[Key], reserved: usize) -> u64 {
        let keys: Vec<Key> = std::iter::once(key).chain(siblings.iter().copied()).collect();
        if !self.fits(&keys, reserved) {
            return 0;
        }
        keys.into_iter().map(|k| u64::from(raise(&mut self.last, k, ts))).sum()
    }

    /// The durable part: per key written, the newest own write.
    pub fn own(&self) -> Vec<(Key, Ts)> {
        self.own.iter().map(|(k, ts)| (*k, *ts)).collect()
    }

    pub fn check_invariants(&self) {
        assert!(self.last.len() <= self.max.max(self.own.len()), "known keys within known_max");
        for (key, ts) in self.own.iter().take(meridian_core::process::CHECKED_MAX) {
            let last = self.last.get(key);
            assert!(last.is_some_and(|l| l >= ts), "an own write is known at or past its timestamp");
        }
    }
}

/// `map[key] = max(map[key], ts)`; whether it rose.
fn raise(map: &mut BTreeMap<Key, Ts>, key: Key, ts: Ts) -> bool {
    match map.get_mut(&key) {
        Some(e) if *e >= ts => false,
        Some(e) => {
            *e = ts;
            true
        }
        None => {
            map.insert(key, ts);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_raises_every_key_it_wrote_and_stays_durable() {
        let mut k = Known::new(10);
        k.wrote(Ts(5), &[Key(1), Key(2)]);
        k.wrote(Ts(3), &[Key(2)]);
        assert_eq!(k.at(Key(1)), Some(Ts(5)));
        assert_eq!(k.at(Key(2)), Some(Ts(5)), "never lowered");
        assert_eq!(k.own(), vec![(Key(1), Ts(5)), (Key(2), Ts(5))]);
        k.check_invariants();
    }

    #[test]
    fn a_lesson_raises_the_key_and_its_siblings_together() {
        let mut k = Known::new(10);
        k.wrote(Ts(5), &[Key(1)]);
        assert_eq!(k.learn(Ts(9), Key(1), &[Key(2), Key(3)], 0), 3);
        assert_eq!((k.at(Key(2)), k.at(Key(3))), (Some(Ts(9)), Some(Ts(9))));
        assert_eq!(k.own(), vec![(Key(1), Ts(5))], "a lesson is not an own write");
        assert_eq!(k.learn(Ts(7), Key(2), &[Key(1)], 0), 0, "an older lesson changes nothing");
        k.check_invariants();
    }

    #[test]
    fn a_lesson_that_does_not_fit_is_skipped_whole() {
        let mut k = Known::new(3);
        k.wrote(Ts(5), &[Key(1), Key(2)]);
        assert_eq!(k.learn(Ts(9), Key(1), &[Key(3), Key(4)], 0), 0);
        assert_eq!(k.at(Key(1)), Some(Ts(5)), "the key itself not raised either");
        assert_eq!(k.at(Key(3)), None);
        assert!(!k.fits(&[Key(3)], 1), "room reserved for a write in flight");
        assert!(k.fits(&[Key(3)], 0));
    }

    #[test]
    fn a_restart_brings_back_the_own_writes() {
        let mut k = Known::new(10);
        k.restore([(Key(1), Ts(5)), (Key(1), Ts(8)), (Key(2), Ts(4))]);
        assert_eq!(k.at(Key(1)), Some(Ts(8)));
        assert_eq!(k.len(), 2);
        k.check_invariants();
    }
}
