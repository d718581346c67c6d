//! The event queue: a binary heap of `(time, sequence)` keys over a slab of
//! events, so that heap moves copy 24 bytes whatever the event holds, and
//! ties break by insertion order (deterministically).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    slab: Vec<Option<E>>,
    free: Vec<u32>,
    seq: u64,
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1 << 12),
            slab: Vec::with_capacity(1 << 12),
            free: Vec::new(),
            seq: 0,
        }
    }

    pub fn push(&mut self, at_ns: u64, event: E) {
        let slot = match self.free.pop() {
            Some(s) => {
                debug_assert!(self.slab[s as usize].is_none());
                self.slab[s as usize] = Some(event);
                s
            }
            None => {
                self.slab.push(Some(event));
                u32::try_from(self.slab.len() - 1).expect("event queue beyond 4G entries")
            }
        };
        self.heap.push(Reverse((at_ns, self.seq, slot)));
        self.seq += 1;
    }

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    pub fn pop(&mut self) -> Option<(u64, E)> {
        let Reverse((t, _, slot)) = self.heap.pop()?;
        let event = self.slab[slot as usize]
            .take()
            .expect("queued slot holds an event");
        self.free.push(slot);
        Some((t, event))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_insertion_order() {
        let mut q = EventQueue::new();
        q.push(5, "c");
        q.push(1, "a");
        q.push(5, "d");
        q.push(1, "b");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(1, "a"), (1, "b"), (5, "c"), (5, "d")]);
        assert!(q.is_empty());
    }

    #[test]
    fn slots_are_reused() {
        let mut q = EventQueue::new();
        for i in 0..10 {
            q.push(i, i);
            q.pop();
        }
        assert_eq!(q.slab.len(), 1);
    }
}
