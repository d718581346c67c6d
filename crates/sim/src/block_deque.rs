//! A double-ended queue held in fixed-size blocks, for the longest log a
//! simulation keeps: each node's durable records until a compaction
//! (`disk.rs`).
//!
//! That log grows with the state a checkpoint copies (checkpoints are
//! spaced by it), so over a long run a `VecDeque` holding it doubles again
//! and again, and each doubling copies every record into memory nothing
//! has touched yet: in a 30-s 2PL+Paxos run, about a seventh of the
//! last-level cache misses were such copies (docs/flat-cost.md). Here
//! the queue grows a block at a time and never moves an element; a block
//! emptied at the front is kept and reused at the back, so a log that
//! fills and empties between checkpoints cycles through the same memory.
//! Capacity beyond the elements held is at most a block at each end and
//! the one kept spare, where a doubling buffer holds up to as much again.
//!
//! Positions count from the front, as in `VecDeque`. Only the first and
//! last blocks may be partly full: pushes go to the back, pops come from
//! the front (or, truncating, the back).

use std::collections::VecDeque;

/// Bytes a block aims at: a few pages, so that a small log costs little
/// and a long one is a few hundred blocks.
const BLOCK_BYTES: usize = 1 << 16;

pub struct BlockDeque<T> {
    /// Every block is full but the first (popped at the front) and the
    /// last (pushed at the back); none is empty.
    blocks: VecDeque<VecDeque<T>>,
    len: usize,
    /// An emptied block kept for the next push that needs one.
    spare: Option<VecDeque<T>>,
}

impl<T> BlockDeque<T> {
    /// Elements per block: a power of two, so a position splits into block
    /// and offset by a shift.
    const BLOCK_LEN: usize = {
        let per = BLOCK_BYTES / if size_of::<T>() == 0 { 1 } else { size_of::<T>() };
        if per <= 1 { 1 } else { 1 << (usize::BITS - 1 - per.leading_zeros()) }
    };
    const SHIFT: u32 = Self::BLOCK_LEN.trailing_zeros();

    pub const fn new() -> Self {
        BlockDeque { blocks: VecDeque::new(), len: 0, spare: None }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn push_back(&mut self, value: T) {
        if self.blocks.back().is_none_or(|b| b.len() == Self::BLOCK_LEN) {
            let block = self.spare.take().unwrap_or_else(|| VecDeque::with_capacity(Self::BLOCK_LEN));
            debug_assert!(block.is_empty());
            self.blocks.push_back(block);
        }
        self.blocks.back_mut().expect("a block at the back").push_back(value);
        self.len += 1;
    }

    pub fn pop_front(&mut self) -> Option<T> {
        let first = self.blocks.front_mut()?;
        let value = first.pop_front().expect("no block is empty");
        if first.is_empty() {
            self.retire_front();
        }
        self.len -= 1;
        Some(value)
    }

    pub fn pop_back(&mut self) -> Option<T> {
        let last = self.blocks.back_mut()?;
        let value = last.pop_back().expect("no block is empty");
        if last.is_empty() {
            self.retire_back();
        }
        self.len -= 1;
        Some(value)
    }

    /// The emptied first block goes; it becomes the spare.
    fn retire_front(&mut self) {
        let block = self.blocks.pop_front().expect("the first block");
        self.keep_spare(block);
    }

    /// The emptied last block goes, likewise.
    fn retire_back(&mut self) {
        let block = self.blocks.pop_back().expect("the last block");
        self.keep_spare(block);
    }

    fn keep_spare(&mut self, block: VecDeque<T>) {
        debug_assert!(block.is_empty());
        // Only a block of the standard size is worth keeping (a `VecDeque`
        // may round its capacity up, never down).
        if self.spare.is_none() && block.capacity() >= Self::BLOCK_LEN {
            self.spare = Some(block);
        }
    }

    /// Drops the first `n` elements (all of them if fewer are held), a
    /// whole block at a time where it can.
    pub fn drop_front(&mut self, n: usize) {
        let mut left = n.min(self.len);
        self.len -= left;
        while left > 0 {
            let first = self.blocks.front_mut().expect("elements left to drop");
            if first.len() <= left {
                left -= first.len();
                first.clear();
                self.retire_front();
            } else {
                first.drain(..left);
                left = 0;
            }
        }
    }

    /// Keeps the first `n` elements, dropping the rest.
    pub fn truncate(&mut self, n: usize) {
        while self.len > n {
            let last = self.blocks.back_mut().expect("elements beyond n");
            let drop = (self.len - n).min(last.len());
            last.truncate(last.len() - drop);
            self.len -= drop;
            if last.is_empty() {
                self.retire_back();
            }
        }
    }

    /// Block and offset of position `i` (`i < len`).
    #[inline]
    fn locate(&self, i: usize) -> (usize, usize) {
        debug_assert!(i < self.len);
        // Counted as if the first block were full (its missing elements
        // are the ones popped from its front); within that block, though,
        // `VecDeque` counts from its first element held.
        let j = i + (Self::BLOCK_LEN - self.blocks[0].len());
        let b = j >> Self::SHIFT;
        (b, if b == 0 { i } else { j & (Self::BLOCK_LEN - 1) })
    }

    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        let (b, o) = self.locate(i);
        Some(&self.blocks[b][o])
    }

    #[inline]
    pub fn front(&self) -> Option<&T> {
        self.blocks.front().and_then(|b| b.front())
    }

    #[inline]
    pub fn back(&self) -> Option<&T> {
        self.blocks.back().and_then(|b| b.back())
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        self.blocks.iter().flat_map(|b| b.iter())
    }

    /// The number of leading elements for which `pred` holds, when it holds
    /// for a prefix and not after (as `slice::partition_point`).
    pub fn partition_point(&self, mut pred: impl FnMut(&T) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.get(mid).expect("mid < len")) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Keeps only the elements for which `keep` holds, in order. Moves
    /// every element kept: for the rare pass, not the common path.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut kept = BlockDeque { blocks: VecDeque::new(), len: 0, spare: self.spare.take() };
        while let Some(v) = self.pop_front() {
            if keep(&v) {
                kept.push_back(v);
            }
        }
        if kept.spare.is_none() {
            kept.spare = self.spare.take();
        }
        *self = kept;
    }

    /// Holds blocks of the standard size only, each non-empty, every one
    /// full but the first and the last, and `len` elements in all.
    pub fn check_invariants(&self) {
        let n = self.blocks.len();
        for (i, b) in self.blocks.iter().enumerate() {
            assert!(!b.is_empty(), "block {i} of {n} is empty");
            assert!(b.len() <= Self::BLOCK_LEN, "block {i} holds {} of {}", b.len(), Self::BLOCK_LEN);
            assert!(i == 0 || i + 1 == n || b.len() == Self::BLOCK_LEN, "inner block {i} is not full");
        }
        assert_eq!(self.blocks.iter().map(VecDeque::len).sum::<usize>(), self.len, "length");
    }
}

impl<T> Default for BlockDeque<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> Clone for BlockDeque<T> {
    fn clone(&self) -> Self {
        self.iter().cloned().collect()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for BlockDeque<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T> FromIterator<T> for BlockDeque<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let mut d = BlockDeque::new();
        d.extend(items);
        d
    }
}

impl<T> Extend<T> for BlockDeque<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        for v in items {
            self.push_back(v);
        }
    }
}

impl<T> std::ops::Index<usize> for BlockDeque<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        let len = self.len;
        self.get(i).unwrap_or_else(|| panic!("position {i} of a deque of {len}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::Rng;

    /// Elements big enough that a block holds only a few, so the tests
    /// cross many block boundaries.
    #[derive(Clone, Debug, PartialEq)]
    struct Big(u64, [u64; 1023]);

    fn big(i: u64) -> Big {
        Big(i, [0; 1023])
    }

    #[test]
    fn any_mix_of_operations_keeps_the_order_a_vecdeque_keeps() {
        let mut rng = Rng::new(5);
        let mut d: BlockDeque<Big> = BlockDeque::new();
        let mut model: VecDeque<u64> = VecDeque::new();
        assert_eq!(BlockDeque::<Big>::BLOCK_LEN, 8);
        let mut next = 0;
        for _ in 0..20_000 {
            match rng.below(10) {
                0..=4 => {
                    d.push_back(big(next));
                    model.push_back(next);
                    next += 1;
                }
                5 | 6 => assert_eq!(d.pop_front().map(|b| b.0), model.pop_front()),
                7 => assert_eq!(d.pop_back().map(|b| b.0), model.pop_back()),
                8 => {
                    let n = rng.below(12) as usize;
                    d.drop_front(n);
                    model.drain(..n.min(model.len()));
                }
                _ => {
                    let n = model.len().saturating_sub(rng.below(5) as usize);
                    d.truncate(n);
                    model.truncate(n);
                }
            }
            d.check_invariants();
            assert_eq!(d.len(), model.len());
            if !model.is_empty() {
                let i = rng.below(model.len() as u64) as usize;
                assert_eq!(d[i].0, model[i], "position {i}");
                assert_eq!(d.front().map(|b| b.0), model.front().copied());
                assert_eq!(d.back().map(|b| b.0), model.back().copied());
            }
        }
        assert!(d.iter().map(|b| b.0).eq(model.iter().copied()));
        assert!(d.iter().rev().map(|b| b.0).eq(model.iter().rev().copied()));
    }

    #[test]
    fn a_log_that_fills_and_empties_reuses_its_blocks_and_moves_no_element() {
        let mut d: BlockDeque<Big> = BlockDeque::new();
        for i in 0..8 {
            d.push_back(big(i));
        }
        let first = d.get(0).expect("held") as *const Big;
        for i in 8..1000 {
            d.push_back(big(i));
        }
        assert_eq!(d.get(0).expect("held") as *const Big, first, "growing moved no element");
        let blocks = d.blocks.len();
        d.drop_front(1000);
        assert!(d.is_empty() && d.blocks.is_empty());
        let spare = d.spare.as_ref().expect("a block kept").as_slices().0.as_ptr();
        d.push_back(big(0));
        assert_eq!(d.blocks[0].as_slices().0.as_ptr(), spare, "the kept block is reused");
        assert_eq!(blocks, 125);
    }

    #[test]
    fn partition_point_and_retain_match_a_slice() {
        let mut d: BlockDeque<u64> = (0..10_000).collect();
        d.drop_front(37);
        assert_eq!(d.partition_point(|v| *v < 5_000), 5_000 - 37);
        assert_eq!(d.partition_point(|_| true), d.len());
        assert_eq!(d.partition_point(|_| false), 0);
        d.retain(|v| v % 3 == 0);
        d.check_invariants();
        assert!(d.iter().copied().eq((37..10_000).filter(|v| v % 3 == 0)));
        let c = d.clone();
        assert!(c.iter().eq(d.iter()));
    }

    #[test]
    fn zero_sized_elements_are_counted() {
        let mut d: BlockDeque<()> = BlockDeque::new();
        d.extend(std::iter::repeat_n((), 100_000));
        assert_eq!(d.len(), 100_000);
        d.truncate(10);
        d.check_invariants();
        assert_eq!(d.pop_back(), Some(()));
        assert_eq!(d.len(), 9);
    }
}
