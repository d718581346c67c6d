//! Counting votes from the members of a group, once each.
//!
//! Members are identified by their index in the group (at most 64), so a
//! quorum is a bit set: duplicated messages cannot count twice.

/// Distinct votes towards a threshold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quorum {
    votes: u64,
    needed: u32,
}

impl Quorum {
    pub fn new(needed: usize) -> Quorum {
        assert!((1..=64).contains(&needed), "a quorum needs 1..=64 votes, not {needed}");
        Quorum { votes: 0, needed: needed as u32 }
    }

    /// A majority of `n` members.
    pub fn majority(n: usize) -> Quorum {
        Quorum::new(n / 2 + 1)
    }

    /// Records a vote; true exactly when this vote reaches the threshold.
    pub fn add(&mut self, member: usize) -> bool {
        assert!(member < 64, "member index {member} beyond 64");
        let before = self.reached();
        self.votes |= 1 << member;
        !before && self.reached()
    }

    pub fn has(&self, member: usize) -> bool {
        member < 64 && self.votes & (1 << member) != 0
    }

    pub fn count(&self) -> usize {
        self.votes.count_ones() as usize
    }

    pub fn reached(&self) -> bool {
        self.votes.count_ones() >= self.needed
    }

    pub fn needed(&self) -> usize {
        self.needed as usize
    }
}

/// Size of a majority of `n`.
pub fn majority(n: usize) -> usize {
    n / 2 + 1
}

/// Size of a Fast-Paxos-style super quorum with `f` tolerated failures:
/// `1 + f + ⌈f/2⌉` (Tiga §3.4).
pub fn super_quorum(f: usize) -> usize {
    1 + f + f.div_ceil(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_votes_count_once_and_reached_fires_once() {
        let mut q = Quorum::majority(3);
        assert!(!q.add(0));
        assert!(!q.add(0), "a duplicate does not count");
        assert!(q.add(2));
        assert!(!q.add(1), "reached only fires on the vote that crosses");
        assert!(q.reached());
        assert_eq!(q.count(), 3);
        assert!(q.has(1) && !q.has(5));
    }

    #[test]
    fn super_quorum_sizes_follow_the_formula() {
        assert_eq!(super_quorum(1), 3);
        assert_eq!(super_quorum(2), 4);
        assert_eq!(super_quorum(3), 6);
        assert_eq!(majority(5), 3);
    }
}
