//! A coordinator's own transactions in flight, by id: a window of slots
//! indexed by sequence number.
//!
//! A coordinator hands out its ids in increasing order (`txnids`), starts
//! an attempt on each, and hears about every one several times — each
//! participant's reads, votes and acknowledgements — until it is over,
//! usually within a round trip or two. An ordered map by id gives the order
//! the coordinator's periodic scans need, but every look-up walks its nodes
//! and every insertion and removal shifts values in them (an attempt is a
//! few hundred bytes). Here a slot per id from the oldest live one to the
//! newest holds the value or a hole: a look-up is a subtraction, an
//! insertion a push at the back, a removal leaves a hole that goes once
//! every older one has gone, and iteration is in id order, as the map's.
//! Memory is the span from the oldest live id to the newest, which the
//! coordinator's timeouts bound; a window's `span_max` bounds it again (the
//! holder asks [`SeqWindow::has_room_for`] and refuses work past it).

use meridian_core::{NodeId, TxnId};
use std::collections::VecDeque;

/// Most slots any window spans (from its oldest live id to its newest).
pub const SPAN_MAX: usize = 1 << 24;

/// Values by the ids of one coordinator, inserted in increasing id order.
#[derive(Clone, Debug)]
pub struct SeqWindow<V> {
    node: NodeId,
    span_max: usize,
    /// The sequence number of `slots[0]`.
    base: u64,
    slots: VecDeque<Option<V>>,
    len: usize,
}

impl<V> SeqWindow<V> {
    /// An empty window for the ids of coordinator `node`, spanning at most
    /// `span_max` ids.
    pub fn new(node: NodeId, span_max: usize) -> Self {
        assert!((1..=SPAN_MAX).contains(&span_max), "a window spans 1 to {SPAN_MAX} ids, not {span_max}");
        SeqWindow { node, span_max, base: 0, slots: VecDeque::new(), len: 0 }
    }

    /// Whether `id` (newer than every id held) fits within the span.
    pub fn has_room_for(&self, id: TxnId) -> bool {
        self.slots.is_empty() || id.seq.checked_sub(self.base).is_some_and(|i| i < self.span_max as u64)
    }

    fn slot(&self, id: TxnId) -> Option<usize> {
        let i = id.seq.checked_sub(self.base)?;
        (id.node == self.node && i < self.slots.len() as u64).then_some(i as usize)
    }

    pub fn get(&self, id: &TxnId) -> Option<&V> {
        self.slot(*id).and_then(|i| self.slots[i].as_ref())
    }

    pub fn get_mut(&mut self, id: &TxnId) -> Option<&mut V> {
        self.slot(*id).and_then(|i| self.slots[i].as_mut())
    }

    pub fn contains_key(&self, id: &TxnId) -> bool {
        self.get(id).is_some()
    }

    /// Adds the value of `id`, newer than every id the window holds or held
    /// since it was last empty.
    pub fn insert(&mut self, id: TxnId, value: V) {
        assert_eq!(id.node, self.node, "{id:?} is not an id of coordinator {}", self.node);
        if self.slots.is_empty() {
            self.base = id.seq;
        }
        let next = self.base + self.slots.len() as u64;
        assert!(id.seq >= next, "{id:?} is not newer than the window's ids (next {next})");
        assert!(self.has_room_for(id), "{id:?} would open a window past {} ids", self.span_max);
        let span = (id.seq - self.base) as usize + 1;
        self.slots.resize_with(span - 1, || None);
        self.slots.push_back(Some(value));
        self.len += 1;
    }

    pub fn remove(&mut self, id: &TxnId) -> Option<V> {
        let value = self.slot(*id).and_then(|i| self.slots[i].take())?;
        self.len -= 1;
        while self.slots.front().is_some_and(Option::is_none) {
            self.slots.pop_front();
            self.base += 1;
        }
        Some(value)
    }

    /// The entries in id order.
    pub fn iter(&self) -> impl Iterator<Item = (TxnId, &V)> + '_ {
        let (node, base) = (self.node, self.base);
        self.slots
            .iter()
            .enumerate()
            .filter_map(move |(i, v)| Some((TxnId { node, seq: base + i as u64 }, v.as_ref()?)))
    }

    /// The oldest id held.
    pub fn first_key(&self) -> Option<TxnId> {
        // Holes at the front go as they appear.
        debug_assert!(self.slots.front().is_none_or(Option::is_some));
        (!self.slots.is_empty()).then_some(TxnId { node: self.node, seq: self.base })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots from the oldest id held to the newest (holes included).
    pub fn span(&self) -> usize {
        self.slots.len()
    }
}

impl<V> std::ops::Index<&TxnId> for SeqWindow<V> {
    type Output = V;

    fn index(&self, id: &TxnId) -> &V {
        self.get(id).unwrap_or_else(|| panic!("{id:?} is not in the window"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::Rng;
    use std::collections::BTreeMap;

    fn id(seq: u64) -> TxnId {
        TxnId { node: NodeId(3), seq }
    }

    #[test]
    fn a_window_holds_what_an_ordered_map_holds_and_iterates_it_alike() {
        let mut rng = Rng::new(7);
        let (mut window, mut map) = (SeqWindow::new(NodeId(3), 1 << 10), BTreeMap::new());
        let mut next = 1u64 << 40; // an epoch in the high bits
        for _ in 0..20_000 {
            match rng.below(10) {
                0..=3 => {
                    next += 1 + u64::from(rng.below(10) == 0); // an id now and then skipped
                    window.insert(id(next), next);
                    map.insert(id(next), next);
                }
                4..=7 => {
                    // Mostly one of the oldest, as attempts end in about the order they began.
                    let k = map.keys().nth(rng.below(map.len().min(8) as u64 + 1) as usize).copied();
                    let k = k.unwrap_or(id(next + 5));
                    assert_eq!(window.remove(&k), map.remove(&k), "remove {k:?}");
                }
                _ => {
                    let k = id(next.saturating_sub(rng.below(40)));
                    assert_eq!(window.get(&k), map.get(&k), "get {k:?}");
                    if let Some(v) = window.get_mut(&k) {
                        *v += 0;
                    }
                }
            }
            assert_eq!(window.len(), map.len());
            assert_eq!(window.first_key(), map.keys().next().copied());
        }
        let in_order: Vec<(TxnId, u64)> = window.iter().map(|(k, v)| (k, *v)).collect();
        assert_eq!(in_order, map.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn holes_go_once_every_older_id_has_gone() {
        let mut w = SeqWindow::new(NodeId(3), 8);
        for seq in 10..15 {
            w.insert(id(seq), seq);
        }
        assert_eq!(w.remove(&id(12)), Some(12));
        assert_eq!(w.span(), 5, "a hole in the middle stays");
        assert_eq!(w.remove(&id(10)), Some(10));
        assert_eq!((w.span(), w.first_key()), (4, Some(id(11))));
        assert_eq!(w.remove(&id(11)), Some(11));
        assert_eq!((w.span(), w.first_key()), (2, Some(id(13))), "the hole at 12 went with 11");
        assert_eq!(w.remove(&id(13)), Some(13));
        assert_eq!(w.remove(&id(14)), Some(14));
        assert!(w.is_empty() && w.span() == 0 && w.first_key().is_none());
        w.insert(id(100), 100);
        assert_eq!((w.span(), w.first_key()), (1, Some(id(100))), "an empty window starts again anywhere");
    }

    #[test]
    fn ids_of_another_coordinator_or_outside_the_window_are_absent() {
        let mut w = SeqWindow::new(NodeId(3), 8);
        w.insert(id(5), ());
        assert!(w.contains_key(&id(5)));
        assert!(!w.contains_key(&TxnId { node: NodeId(4), seq: 5 }));
        assert!(!w.contains_key(&id(4)) && !w.contains_key(&id(6)) && !w.contains_key(&id(u64::MAX)));
        assert_eq!(w.remove(&id(4)), None);
    }

    #[test]
    #[should_panic(expected = "is not newer than the window's ids")]
    fn an_id_older_than_the_newest_is_refused() {
        let mut w = SeqWindow::new(NodeId(3), 8);
        w.insert(id(5), ());
        w.insert(id(5), ());
    }

    #[test]
    fn the_room_left_is_counted_from_the_oldest_id_held() {
        let mut w = SeqWindow::new(NodeId(3), 4);
        assert!(w.has_room_for(id(1_000)), "an empty window takes any id");
        w.insert(id(10), ());
        assert!(w.has_room_for(id(13)) && !w.has_room_for(id(14)), "ids 10 to 13 fill it");
        w.insert(id(13), ());
        w.remove(&id(10));
        assert!(w.has_room_for(id(16)) && !w.has_room_for(id(17)), "the oldest id held is now 13");
    }

    #[test]
    #[should_panic(expected = "would open a window past 4 ids")]
    fn a_span_past_the_bound_is_refused_not_allocated() {
        let mut w = SeqWindow::new(NodeId(3), 4);
        w.insert(id(1), ());
        w.insert(id(5), ());
    }
}
