//! The report's counters, added to by name on the simulator's hot path.
//!
//! Protocols count by `&'static str` (`Env::count`), a few hundred thousand
//! times in a short run. A map keyed by the name compares strings on every
//! add; here each name's total sits in a slot found through the address
//! and length of the string the protocol passed, one hash probe of two
//! integers. The same name may arrive from several addresses (the compiler
//! need not merge equal literals): each address maps to its name's one
//! slot, so totals are per name exactly as a map by name keeps them.
//!
//! A protocol counts a few names from a few places over and over, so a small
//! direct-mapped cache of recent addresses sits in front of the hash map:
//! an add that hits it costs a compare and an add.
//!
//! Never iterated in hash order: the totals leave only through
//! [`Counters::by_name`], sorted by name.

use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// Entries in the cache of recent addresses (a power of two).
const RECENT: usize = 32;

#[derive(Default)]
pub struct Counters {
    /// The slot of each name, by the address and length of a string that
    /// spelled it.
    by_address: FxHashMap<(usize, usize), usize>,
    /// Recently added addresses and lengths with their slots, each at the
    /// place its address picks; `None` where none has been.
    recent: [Option<((usize, usize), usize)>; RECENT],
    /// The slot of each name counted so far.
    slots: BTreeMap<&'static str, usize>,
    totals: Vec<u64>,
}

impl Counters {
    /// Adds `delta` to `name`'s total (a name counted with 0 is reported
    /// with 0); true when the name was never counted before.
    pub fn add(&mut self, name: &'static str, delta: u64) -> bool {
        let address = (name.as_ptr() as usize, name.len());
        let place = (address.0 ^ (address.0 >> 7) ^ address.1) & (RECENT - 1);
        if let Some((held, slot)) = self.recent[place]
            && held == address
        {
            self.totals[slot] += delta;
            return false;
        }
        if let Some(&slot) = self.by_address.get(&address) {
            self.recent[place] = Some((address, slot));
            self.totals[slot] += delta;
            return false;
        }
        let fresh = !self.slots.contains_key(name);
        let next = self.totals.len();
        let slot = *self.slots.entry(name).or_insert(next);
        if fresh {
            self.totals.push(0);
        }
        self.by_address.insert(address, slot);
        self.recent[place] = Some((address, slot));
        self.totals[slot] += delta;
        fresh
    }

    /// Every name counted, with its total, in name order.
    pub fn by_name(&self) -> BTreeMap<&'static str, u64> {
        self.slots.iter().map(|(name, slot)| (*name, self.totals[*slot])).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_are_per_name_whatever_address_spells_it() {
        let mut c = Counters::default();
        // The same name from two distinct allocations, and a name that is a
        // prefix of another (a merged literal may share its address).
        let a: &'static str = Box::leak(String::from("fast_path").into_boxed_str());
        let b: &'static str = Box::leak(String::from("fast_path").into_boxed_str());
        let long: &'static str = "slow_path_taken";
        let short: &'static str = &long[..9];
        assert!(c.add(a, 2), "first count of the name");
        assert!(!c.add(b, 3), "the same name from elsewhere");
        assert!(c.add(long, 1));
        assert!(c.add(short, 0), "a prefix at the same address is another name");
        assert!(!c.add(a, 1));
        let want: BTreeMap<&str, u64> = [("fast_path", 6), ("slow_path", 0), ("slow_path_taken", 1)].into();
        assert_eq!(c.by_name(), want);
    }

    #[test]
    fn totals_stay_per_name_when_the_cache_of_recent_addresses_collides() {
        // More names than the cache has places, from two addresses each,
        // added in a random order: every total is what a map by name sums.
        let names: Vec<String> = (0..3 * RECENT).map(|i| format!("counter_{i}")).collect();
        let spellings: Vec<&'static str> =
            names.iter().flat_map(|n| [n.clone(), n.clone()]).map(|s| &*Box::leak(s.into_boxed_str())).collect();
        let mut c = Counters::default();
        let mut want: BTreeMap<&str, u64> = BTreeMap::new();
        let mut rng = meridian_core::Rng::new(5);
        for _ in 0..20_000 {
            let name = spellings[rng.below(spellings.len() as u64) as usize];
            let delta = rng.below(4);
            let fresh = !want.contains_key(name);
            assert_eq!(c.add(name, delta), fresh, "{name} counted before: {}", !fresh);
            *want.entry(name).or_default() += delta;
        }
        assert_eq!(c.by_name(), want);
    }
}
