//! What the replicas a sequencer feeds have made durable (Calvin §5: the
//! input log is replayed from a checkpoint after a failure): each one's
//! durable checkpoint position, as its periodic log fetch reports it.
//!
//! A sequencer may forget a log position once a copy of every shard among
//! these replicas has checkpointed past it — for each shard, its most
//! advanced copy: a copy that lags behind installs that one's checkpoint
//! instead of replaying what was forgotten. With one copy of each shard per
//! region (the default) that is every replica's checkpoint, and a replica
//! that is down holds its region's log until it reports again. Calvin
//! sequencers add a bound of their own (`kept_positions_max`): every
//! region executes the same log, so a Calvin replica can also install
//! another region's copy's checkpoint; SLOG's cannot (each region's log
//! interleaves differently).

use meridian_core::{NodeId, ShardId};
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
pub struct Readers {
    /// Per replica fed: its shard, and the position its durable checkpoint
    /// resumes from (0 until it reports).
    copies: BTreeMap<NodeId, (ShardId, u64)>,
    /// Per replica fed: the first position kept it was last told of
    /// (`tell`).
    told: BTreeMap<NodeId, u64>,
}

impl Readers {
    /// The replicas a sequencer feeds, each with its shard.
    pub fn new(feeds: &[(NodeId, ShardId)]) -> Readers {
        Readers { copies: feeds.iter().map(|(node, shard)| (*node, (*shard, 0))).collect(), told: BTreeMap::new() }
    }

    /// A replica reports the position its durable checkpoint resumes from.
    /// Reports only grow (a late, older one is ignored); a node not fed by
    /// this sequencer is ignored.
    pub fn report(&mut self, node: NodeId, durable: u64) {
        if let Some((_, pos)) = self.copies.get_mut(&node) {
            *pos = (*pos).max(durable);
        }
    }

    /// Every position below this one is checkpointed by the most advanced
    /// copy of each shard: none is needed again but by a copy that can
    /// install that one's checkpoint.
    pub fn below(&self) -> u64 {
        self.best().values().copied().min().unwrap_or(0)
    }

    /// Every position below this one is checkpointed by every copy here:
    /// no replica fed here runs a transaction placed before it again.
    pub fn every_copy_below(&self) -> u64 {
        self.copies.values().map(|(_, pos)| *pos).min().unwrap_or(0)
    }

    /// Per shard, the furthest durable checkpoint among its copies here.
    pub fn best(&self) -> BTreeMap<ShardId, u64> {
        let mut best: BTreeMap<ShardId, u64> = BTreeMap::new();
        for (shard, pos) in self.copies.values() {
            let b = best.entry(*shard).or_insert(0);
            *b = (*b).max(*pos);
        }
        best
    }

    /// Whether `node`, fed here, is to be told that the log is forgotten
    /// before `base`: once per advance (a lost telling is made good by the
    /// next; the replica then keeps reads a little longer, no more). Its
    /// sent reads are kept while the log is (`crate::sent_reads`).
    pub fn tell(&mut self, node: NodeId, base: u64) -> bool {
        if base == 0 || !self.copies.contains_key(&node) {
            return false;
        }
        let told = self.told.entry(node).or_insert(0);
        let news = base > *told;
        *told = (*told).max(base);
        news
    }

    /// The position `node` last reported, if it is fed here.
    pub fn reported(&self, node: NodeId) -> Option<u64> {
        self.copies.get(&node).map(|(_, pos)| *pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_is_forgotten_once_the_most_advanced_copy_of_every_shard_passed_it() {
        let (a, b, c) = (NodeId(1), NodeId(2), NodeId(3));
        let mut r = Readers::new(&[(a, ShardId(0)), (b, ShardId(0)), (c, ShardId(1))]);
        assert_eq!(r.below(), 0, "nothing reported: nothing forgotten");
        r.report(a, 40);
        assert_eq!(r.below(), 0, "shard 1's only copy has not reported");
        r.report(c, 25);
        assert_eq!(r.below(), 25, "shard 0's copy a is past 25; b can install a's checkpoint");
        assert_eq!(r.every_copy_below(), 0, "b has not reported");
        assert_eq!(r.best().into_iter().collect::<Vec<_>>(), vec![(ShardId(0), 40), (ShardId(1), 25)]);
        r.report(c, 10);
        assert_eq!(r.reported(c), Some(25), "an older report is ignored");
        r.report(NodeId(9), 100);
        assert_eq!(r.reported(NodeId(9)), None, "a replica fed elsewhere does not count");
    }

    #[test]
    fn a_replica_is_told_each_advance_of_the_forgotten_positions_once() {
        let (a, b) = (NodeId(1), NodeId(2));
        let mut r = Readers::new(&[(a, ShardId(0))]);
        assert!(!r.tell(a, 0), "nothing forgotten: nothing to tell");
        assert!(r.tell(a, 10));
        assert!(!r.tell(a, 10), "told already");
        assert!(!r.tell(a, 7), "an older base is no news");
        assert!(r.tell(a, 12));
        assert!(!r.tell(b, 12), "a replica fed elsewhere is not told");
    }
}
