//! Transaction ids remembered per client down to the client's *floor*, for
//! duplicate suppression whose memory follows the clients' outstanding work
//! rather than the run's length.
//!
//! A client's floor is the lowest id it still waits for (or the next id it
//! will name, when it waits for none): every id below it was answered or
//! given up, so the client never submits it again, and a late copy of it
//! still in the network may be dropped. Ids below a client's floor count as
//! seen; only ids at or above it are kept. The floor travels with the
//! client's transactions and is raised where they are applied (a chosen log
//! record, a materialized log position), so every member of a replicated
//! log forgets the same ids at the same point.
//!
//! `per_client_max` caps what a client that never raises its floor can
//! hold: beyond it, that client's oldest id is forgotten (the floor moves up
//! past it). BTreeMaps throughout: no hash order reaches a run.

use meridian_core::{NodeId, TxnId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Window<V> {
    floor: u64,
    ids: BTreeMap<u64, V>,
}

impl<V> Default for Window<V> {
    fn default() -> Self {
        Window { floor: 0, ids: BTreeMap::new() }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientFloors<V> {
    clients: BTreeMap<NodeId, Window<V>>,
    per_client_max: usize,
    len: usize,
}

/// At most [`DEFAULT_PER_CLIENT_MAX`] ids per client.
impl<V> Default for ClientFloors<V> {
    fn default() -> Self {
        ClientFloors::new(DEFAULT_PER_CLIENT_MAX)
    }
}

/// A client's ids kept, unless a protocol says otherwise: far more than any
/// client's outstanding window.
pub const DEFAULT_PER_CLIENT_MAX: usize = 1 << 20;

impl<V> ClientFloors<V> {
    pub fn new(per_client_max: usize) -> Self {
        assert!(per_client_max > 0);
        ClientFloors { clients: BTreeMap::new(), per_client_max, len: 0 }
    }

    /// Whether `id` is below its client's floor (the client waits for it
    /// no more).
    pub fn below_floor(&self, id: TxnId) -> bool {
        self.clients.get(&id.node).is_some_and(|w| id.seq < w.floor)
    }

    /// Whether `id` was seen: kept, or below its client's floor.
    pub fn contains(&self, id: TxnId) -> bool {
        self.below_floor(id) || self.get(id).is_some()
    }

    /// The value kept for `id` (none below the floor).
    pub fn get(&self, id: TxnId) -> Option<&V> {
        self.clients.get(&id.node).and_then(|w| w.ids.get(&id.seq))
    }

    /// Keeps `id` with `v`; false, and nothing changes, if it was seen.
    pub fn insert(&mut self, id: TxnId, v: V) -> bool {
        let w = self.clients.entry(id.node).or_default();
        if id.seq < w.floor || w.ids.contains_key(&id.seq) {
            return false;
        }
        w.ids.insert(id.seq, v);
        self.len += 1;
        if w.ids.len() > self.per_client_max {
            let (oldest, _) = w.ids.pop_first().expect("non-empty");
            w.floor = oldest + 1;
            self.len -= 1;
        }
        true
    }

    /// `client` waits for none of its ids below `floor`: they are forgotten
    /// and count as seen from now on. A floor never goes down.
    pub fn raise(&mut self, client: NodeId, floor: u64) {
        let w = self.clients.entry(client).or_default();
        if floor <= w.floor {
            return;
        }
        w.floor = floor;
        let kept = w.ids.split_off(&floor);
        self.len -= w.ids.len();
        w.ids = kept;
    }

    /// Ids kept, over every client.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn check_invariants(&self) {
        let mut len = 0;
        for w in self.clients.values() {
            assert!(w.ids.len() <= self.per_client_max, "a client's window within its bound");
            assert!(w.ids.keys().next().is_none_or(|s| *s >= w.floor), "nothing kept below a floor");
            len += w.ids.len();
        }
        assert_eq!(len, self.len, "the count of ids kept");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(node: u32, seq: u64) -> TxnId {
        TxnId { node: NodeId(node), seq }
    }

    #[test]
    fn a_repeat_is_dropped_while_kept_and_after_its_client_raised_its_floor_past_it() {
        let mut s = ClientFloors::new(100);
        assert!(s.insert(id(1, 5), ()));
        assert!(!s.insert(id(1, 5), ()), "a repeat while kept");
        s.raise(NodeId(1), 6);
        assert_eq!(s.len(), 0, "forgotten below the floor");
        assert!(s.contains(id(1, 5)) && !s.insert(id(1, 5), ()), "a repeat below the floor");
        assert!(!s.contains(id(2, 5)) && s.insert(id(2, 5), ()), "another client's floor is its own");
        s.check_invariants();
    }

    #[test]
    fn memory_follows_each_clients_outstanding_ids_not_the_ids_ever_seen() {
        let mut s = ClientFloors::new(1000);
        for seq in 1..=100_000u64 {
            assert!(s.insert(id(1, seq), ()));
            // The client waits for at most its last 8 transactions.
            s.raise(NodeId(1), seq.saturating_sub(7));
            assert!(s.len() <= 8);
        }
        s.check_invariants();
    }

    #[test]
    fn a_client_that_never_raises_its_floor_holds_at_most_per_client_max_ids() {
        let mut s = ClientFloors::new(3);
        for seq in 1..=10 {
            s.insert(id(1, seq), seq);
        }
        assert_eq!(s.len(), 3);
        assert_eq!(s.get(id(1, 8)), Some(&8));
        assert!(s.contains(id(1, 2)), "the oldest forgotten count as seen");
        s.raise(NodeId(1), 4);
        assert_eq!(s.len(), 3, "a floor never goes down");
        s.check_invariants();
    }
}
