//! Numbered batch streams: a sender cuts its items into batches by time and
//! size and numbers them; a receiver delivers each origin's batches in
//! number order exactly once, holding early ones, and names the gaps to
//! fetch. Calvin's epochs, SLOG's local logs shipped to every region (§3.2)
//! and their interleaving into a global log, K2's replay and NOC-NOC's
//! primary-backup streams all need this.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One numbered batch of an origin's stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch<T> {
    pub origin: u32,
    /// 0, 1, 2, ... per origin.
    pub seq: u64,
    pub items: Vec<T>,
}

/// Cuts a sender's items into batches: a batch closes when it holds
/// `max_items`, or `max_wait_ns` after its first item (the caller asks at
/// its timer with [`BatchBuilder::due`]).
#[derive(Clone, Debug)]
pub struct BatchBuilder<T> {
    origin: u32,
    next_seq: u64,
    max_items: usize,
    max_wait_ns: u64,
    open: Vec<T>,
    opened_ns: u64,
}

impl<T> BatchBuilder<T> {
    pub fn new(origin: u32, max_items: usize, max_wait_ns: u64) -> BatchBuilder<T> {
        assert!(max_items > 0, "a batch holds at least one item");
        BatchBuilder { origin, next_seq: 0, max_items, max_wait_ns, open: Vec::new(), opened_ns: 0 }
    }

    /// A sender restarting after batches `0..next_seq` were cut (and made
    /// durable) by its earlier life: numbering continues, never repeats.
    pub fn resume(origin: u32, next_seq: u64, max_items: usize, max_wait_ns: u64) -> BatchBuilder<T> {
        BatchBuilder { next_seq, ..BatchBuilder::new(origin, max_items, max_wait_ns) }
    }

    /// The number the next batch will have.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Items in the open batch.
    pub fn open_len(&self) -> usize {
        self.open.len()
    }

    /// Adds an item at `now_ns`; returns the batch it closed, if full.
    pub fn push(&mut self, item: T, now_ns: u64) -> Option<Batch<T>> {
        if self.open.is_empty() {
            self.opened_ns = now_ns;
        }
        self.open.push(item);
        (self.open.len() >= self.max_items).then(|| self.close())
    }

    /// The open batch, if its time is up at `now_ns`.
    pub fn due(&mut self, now_ns: u64) -> Option<Batch<T>> {
        let up = !self.open.is_empty() && now_ns >= self.opened_ns.saturating_add(self.max_wait_ns);
        up.then(|| self.close())
    }

    /// Closes the open batch now, even if empty (an epoch boundary: Calvin
    /// and SLOG send empty batches so receivers know nothing is missing).
    pub fn cut(&mut self) -> Batch<T> {
        self.close()
    }

    /// When the open batch falls due, if one is open.
    pub fn deadline_ns(&self) -> Option<u64> {
        (!self.open.is_empty()).then(|| self.opened_ns.saturating_add(self.max_wait_ns))
    }

    fn close(&mut self) -> Batch<T> {
        let seq = self.next_seq;
        self.next_seq += 1;
        Batch { origin: self.origin, seq, items: std::mem::take(&mut self.open) }
    }
}

/// A receiver of many origins' streams.
#[derive(Clone, Debug)]
pub struct InOrder<T> {
    /// Per origin: the next number to deliver, and batches that came early.
    origins: BTreeMap<u32, (u64, BTreeMap<u64, Batch<T>>)>,
    /// Most early batches held per origin; later ones are dropped (and
    /// fetched again once the gap is filled).
    max_held: usize,
}

impl<T> InOrder<T> {
    pub fn new(max_held: usize) -> InOrder<T> {
        assert!(max_held > 0);
        InOrder { origins: BTreeMap::new(), max_held }
    }

    /// Takes a batch; returns the batches now deliverable, in order (this
    /// one and any held ones it unblocks). Duplicates and batches already
    /// delivered return nothing.
    pub fn accept(&mut self, batch: Batch<T>) -> Vec<Batch<T>> {
        let (next, held) = self.origins.entry(batch.origin).or_insert((0, BTreeMap::new()));
        if batch.seq < *next {
            return Vec::new();
        }
        if batch.seq > *next {
            if held.len() < self.max_held || held.contains_key(&batch.seq) {
                held.entry(batch.seq).or_insert(batch);
            }
            return Vec::new();
        }
        let mut out = vec![batch];
        *next += 1;
        while let Some(b) = held.remove(next) {
            out.push(b);
            *next += 1;
        }
        out
    }

    /// A receiver resuming from a checkpoint: `origin`'s batches before
    /// `next_seq` were delivered (held ones before it are dropped).
    pub fn skip_to(&mut self, origin: u32, next_seq: u64) {
        let (next, held) = self.origins.entry(origin).or_insert((0, BTreeMap::new()));
        *next = (*next).max(next_seq);
        let next = *next;
        held.retain(|seq, _| *seq >= next);
    }

    /// The next number each origin's stream waits for.
    pub fn next_seq(&self, origin: u32) -> u64 {
        self.origins.get(&origin).map_or(0, |(n, _)| *n)
    }

    /// Whether batch `seq` of `origin` was delivered or is held.
    pub fn has(&self, origin: u32, seq: u64) -> bool {
        self.origins.get(&origin).is_some_and(|(next, held)| seq < *next || held.contains_key(&seq))
    }

    /// Gaps to fetch: per origin with held batches, the missing numbers
    /// below its highest held one (at most `limit` in all).
    pub fn missing(&self, limit: usize) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        for (origin, (next, held)) in &self.origins {
            let Some(top) = held.keys().next_back() else { continue };
            for seq in *next..*top {
                if out.len() == limit {
                    return out;
                }
                if !held.contains_key(&seq) {
                    out.push((*origin, seq));
                }
            }
        }
        out
    }

    /// Batches held early, over all origins.
    pub fn held(&self) -> usize {
        self.origins.values().map(|(_, h)| h.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_close_by_size_and_by_time_and_are_numbered() {
        let mut b = BatchBuilder::new(3, 2, 1_000);
        assert!(b.push('a', 0).is_none());
        let full = b.push('b', 10).expect("two items fill it");
        assert_eq!(full, Batch { origin: 3, seq: 0, items: vec!['a', 'b'] });
        assert!(b.push('c', 500).is_none());
        assert_eq!(b.deadline_ns(), Some(1_500));
        assert!(b.due(1_499).is_none());
        assert_eq!(b.due(1_500).expect("time is up").seq, 1);
        assert_eq!(b.cut(), Batch { origin: 3, seq: 2, items: vec![] }, "an empty epoch batch");
    }

    #[test]
    fn a_resumed_sender_continues_its_numbering() {
        let mut b = BatchBuilder::resume(1, 7, 4, 1_000);
        assert_eq!((b.next_seq(), b.open_len()), (7, 0));
        b.push('a', 0);
        assert_eq!(b.open_len(), 1);
        assert_eq!(b.cut().seq, 7);
        assert_eq!(b.next_seq(), 8);
    }

    #[test]
    fn each_origin_is_delivered_in_order_exactly_once_whatever_the_arrival_order() {
        let mut r = InOrder::new(16);
        let batch = |origin, seq| Batch { origin, seq, items: vec![seq] };
        assert!(r.accept(batch(1, 2)).is_empty());
        assert!(r.accept(batch(1, 1)).is_empty());
        assert!(r.accept(batch(2, 0)).len() == 1, "origins are independent");
        assert_eq!(r.missing(10), vec![(1, 0)]);
        let out: Vec<u64> = r.accept(batch(1, 0)).iter().map(|b| b.seq).collect();
        assert_eq!(out, vec![0, 1, 2]);
        assert!(r.accept(batch(1, 1)).is_empty(), "a duplicate");
        assert_eq!(r.next_seq(1), 3);
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn a_receiver_resumed_from_a_checkpoint_delivers_from_its_mark_on() {
        let mut r = InOrder::new(4);
        r.accept(Batch { origin: 0, seq: 6, items: vec![6] });
        r.skip_to(0, 5);
        assert_eq!((r.next_seq(0), r.held()), (5, 1));
        assert!(r.accept(Batch { origin: 0, seq: 4, items: vec![4] }).is_empty(), "before the mark: delivered");
        let out: Vec<u64> = r.accept(Batch { origin: 0, seq: 5, items: vec![5] }).iter().map(|b| b.seq).collect();
        assert_eq!(out, vec![5, 6]);
        r.skip_to(0, 3);
        assert_eq!(r.next_seq(0), 7, "a mark behind what was delivered changes nothing");
    }

    #[test]
    fn early_batches_are_held_only_up_to_the_bound() {
        let mut r = InOrder::new(2);
        for seq in 1..=5 {
            r.accept(Batch { origin: 0, seq, items: Vec::<u8>::new() });
        }
        assert_eq!(r.held(), 2);
        assert_eq!(r.missing(10), vec![(0, 0)], "the gap below what is held");
        let out = r.accept(Batch { origin: 0, seq: 0, items: Vec::new() });
        assert_eq!(out.len(), 3, "0, then the held 1 and 2");
        assert_eq!(r.next_seq(0), 3, "3 to 5 come again after a fetch");
    }
}
