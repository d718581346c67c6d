//! The event queue: a binary min-heap of packed keys over a slab of events,
//! and lanes beside it for events that arrive in order.
//!
//! Each key is one `u128`: the event time in the high 64 bits, then a
//! 40-bit insertion sequence (ties break by insertion order,
//! deterministically), then a 24-bit source: the slab slot of the event, or
//! (top bit set) the lane whose first event it is. Heap moves copy 16 bytes
//! whatever the event holds and comparisons are single integer compares —
//! the queue is the simulator's hottest structure (a hand-written 4-ary
//! heap, a radix heap and a calendar queue all measured slower than std's
//! binary heap here).
//!
//! A lane is a FIFO of events whose keys only grow: the deliveries on one
//! directed link, whose times never go backwards on a FIFO network. Only a
//! lane's first event is in the heap, so the heap holds about one event
//! per busy link and per armed timer instead of every message in flight
//! (thousands on a WAN, where a message is in flight for 100 ms), and a
//! pop walks a much shorter heap. An event that
//! would arrive before its lane's last (a network that reorders) goes to
//! the heap like any other. Either way the heap's minimum is the minimum
//! of everything queued — each lane's first event is its least — so events
//! come out in exactly the order one heap of them all would give.

use meridian_core::hint::prefetch;
use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};

const SLOT_BITS: u32 = 24;
const SEQ_BITS: u32 = 40;
/// The source bit that marks a lane, not a slab slot.
const LANE_BIT: u32 = 1 << (SLOT_BITS - 1);
const MAX_SLOTS: usize = LANE_BIT as usize;
const MAX_LANES: usize = LANE_BIT as usize;
/// A key's source bits.
const SOURCE_MASK: u128 = (1 << SLOT_BITS) - 1;

pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<u128>>,
    slab: Vec<Option<E>>,
    free: Vec<u32>,
    /// Each lane's events with their keys, in key order.
    lanes: Vec<VecDeque<(u128, E)>>,
    /// Events held in lanes, and lanes holding any (each has its first
    /// event's key in the heap).
    in_lanes: usize,
    busy_lanes: usize,
    seq: u64,
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1 << 12),
            slab: Vec::with_capacity(1 << 12),
            free: Vec::new(),
            lanes: Vec::new(),
            in_lanes: 0,
            busy_lanes: 0,
            seq: 0,
        }
    }

    /// The key of the next event pushed (its time, then its place in
    /// insertion order); the source bits are left to the caller.
    fn next_key(&mut self, at_ns: u64) -> u128 {
        assert!(self.seq < 1 << SEQ_BITS, "event sequence exhausted");
        let key = (u128::from(at_ns) << 64) | (u128::from(self.seq) << SLOT_BITS);
        self.seq += 1;
        key
    }

    pub fn push(&mut self, at_ns: u64, event: E) {
        let slot = match self.free.pop() {
            Some(s) => {
                debug_assert!(self.slab[s as usize].is_none());
                self.slab[s as usize] = Some(event);
                s
            }
            None => {
                assert!(self.slab.len() < MAX_SLOTS, "more than {MAX_SLOTS} pending events");
                self.slab.push(Some(event));
                (self.slab.len() - 1) as u32
            }
        };
        let key = self.next_key(at_ns) | u128::from(slot);
        self.heap.push(Reverse(key));
    }

    /// Queues an event on `lane`: behind the lane's last event when it is
    /// no earlier, in the heap otherwise. Either way it comes out where
    /// `push` would have put it.
    pub fn push_in_lane(&mut self, lane: usize, at_ns: u64, event: E) {
        assert!(lane < MAX_LANES, "lane {lane} past the {MAX_LANES} a queue holds");
        if self.lanes.len() <= lane {
            self.lanes.resize_with(lane + 1, VecDeque::new);
        }
        let last_ns = self.lanes[lane].back().map(|(key, _)| (key >> 64) as u64);
        if last_ns.is_some_and(|last| at_ns < last) {
            return self.push(at_ns, event);
        }
        let key = self.next_key(at_ns);
        if last_ns.is_none() {
            self.heap.push(Reverse(key | u128::from(LANE_BIT) | lane as u128));
            self.busy_lanes += 1;
        }
        self.lanes[lane].push_back((key, event));
        self.in_lanes += 1;
    }

    /// The time of the earliest event.
    pub fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(|k| (k.0 >> 64) as u64)
    }

    // Inlined into the simulator's one call: left to itself the compiler
    // sometimes keeps it apart, and the event loop pays a call per event.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(u64, E)> {
        let (top, event) = self.take_head()?;
        self.prefetch_head();
        Some(((top >> 64) as u64, event))
    }

    /// Removes the least event: its key and the event.
    #[inline(always)]
    fn take_head(&mut self) -> Option<(u128, E)> {
        let mut head = self.heap.peek_mut()?;
        let top = head.0;
        let source = (top & SOURCE_MASK) as u32;
        let event = if source & LANE_BIT != 0 {
            let lane = &mut self.lanes[(source & !LANE_BIT) as usize];
            let (key, event) = lane.pop_front().expect("a lane in the heap holds an event");
            debug_assert_eq!(key, top & !SOURCE_MASK, "a lane's first event is the one in the heap");
            match lane.front() {
                // The lane's next event takes its place in the heap: one
                // walk down from the top, where a pop and a push would walk
                // down to the bottom and up twice.
                Some((next, _)) => *head = Reverse(next | (top & SOURCE_MASK)),
                None => {
                    PeekMut::pop(head);
                    self.busy_lanes -= 1;
                }
            }
            self.in_lanes -= 1;
            event
        } else {
            PeekMut::pop(head);
            let event = self.slab[source as usize].take().expect("queued slot holds an event");
            self.free.push(source);
            event
        };
        Some((top, event))
    }

    /// Asks the CPU for the next event while the caller handles this one. A
    /// message waits in its lane for its whole flight — thousands of events
    /// on a WAN — so reading it is a miss to memory that otherwise stalls
    /// the next pop; fetched now, it is in cache by then. A hint only: it
    /// changes nothing but timing.
    #[inline(always)]
    fn prefetch_head(&self) {
        let Some(next) = self.heap.peek() else {
            return;
        };
        let source = (next.0 & SOURCE_MASK) as u32;
        if source & LANE_BIT != 0 {
            if let Some(e) = self.lanes[(source & !LANE_BIT) as usize].front() {
                prefetch(e);
            }
        } else if let Some(e) = self.slab.get(source as usize) {
            prefetch(e);
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len() - self.busy_lanes + self.in_lanes
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
    fn events_in_lanes_and_in_the_heap_come_out_as_one_heap_would_give_them() {
        let mut rng = meridian_core::Rng::new(11);
        let mut q = EventQueue::new();
        let mut expected = Vec::new();
        let mut last = [0u64; 4];
        for i in 0..5000u64 {
            // Lanes whose times mostly grow, now and then going back (a
            // reordering network), beside plain pushes.
            let lane = rng.below(5) as usize;
            let at = if lane < 4 {
                let back = rng.chance(0.1);
                let t = if back { last[lane].saturating_sub(rng.below(50)) } else { last[lane] + rng.below(20) };
                last[lane] = last[lane].max(t);
                q.push_in_lane(lane, t, i);
                t
            } else {
                let t = last.iter().min().copied().unwrap_or(0) + rng.below(100);
                q.push(t, i);
                t
            };
            expected.push((at, i));
            if rng.chance(0.4) {
                pops_the_least(&mut q, &mut expected);
                assert_eq!(q.len(), expected.len());
            }
        }
        drains_in_order(&mut q, expected);
        assert!(q.is_empty());
        assert_eq!(q.len(), 0, "nothing counted in a lane or the heap");
    }

    #[test]
    fn a_lane_holds_one_place_in_the_heap_however_many_events_wait_in_it() {
        let mut q = EventQueue::new();
        for t in 0..100 {
            q.push_in_lane(3, 10 + t, t);
        }
        q.push(5, 1000);
        assert_eq!((q.heap.len(), q.len()), (2, 101));
        assert_eq!(q.pop(), Some((5, 1000)));
        assert_eq!(q.pop(), Some((10, 0)));
        assert_eq!(q.heap.len(), 1, "the lane's next event took its place");
        q.push_in_lane(3, 200, 2000);
        assert_eq!(q.heap.len(), 1, "a later event joins the lane");
        q.push_in_lane(3, 20, 3000);
        assert_eq!(q.heap.len(), 2, "an earlier one goes to the heap");
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

    #[test]
    fn matches_a_sorted_order_on_random_input() {
        let mut rng = meridian_core::Rng::new(9);
        let mut q = EventQueue::new();
        let mut expected = Vec::new();
        for i in 0..5000u64 {
            let t = rng.below(1000);
            q.push(t, i);
            expected.push((t, i));
            if rng.chance(0.3) {
                pops_the_least(&mut q, &mut expected);
            }
        }
        drains_in_order(&mut q, expected);
    }

    /// The queue's next event is the least of those expected (by time, then
    /// by insertion, which the values here follow).
    fn pops_the_least(q: &mut EventQueue<u64>, expected: &mut Vec<(u64, u64)>) {
        expected.sort();
        let want = expected.remove(0);
        assert_eq!(q.pop(), Some(want));
    }

    fn drains_in_order(q: &mut EventQueue<u64>, mut expected: Vec<(u64, u64)>) {
        expected.sort();
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, expected);
    }
}
