//! A partition's Lamport stamps (NOC-NOC Algorithm 6 lines 29-34, 41):
//! the partition's Lamport clock (`meridian_mechanisms`' `LamportClock`)
//! above its shard's number, so that two partitions never issue the same
//! stamp. A transaction commits at the largest of its participants'
//! prepare stamps (line 18), which is then unique to it: the proof's
//! Lemma B.6 takes distinct stamps for granted, and a counter alone would
//! give two transactions prepared on different partitions the same one.
//!
//! The clock moves past the client's `dep` before a prepare (a write is
//! ordered after what its client saw) and to a commit stamp when one is
//! applied (line 37: a later prepare here is stamped above it).

use meridian_core::ShardId;
use meridian_mechanisms::clocks::LamportClock;
use meridian_readatomic::ramp::Ts;

/// Bits of a stamp below the clock: the shard (at most 4,096 shards).
pub const SHARD_BITS: u32 = 12;

/// The stamp of counter `c` on `shard`.
pub fn stamp(c: u64, shard: ShardId) -> Ts {
    assert!(shard.0 < 1 << SHARD_BITS, "shard {} beyond a stamp's shard bits", shard.0);
    assert!(c < 1 << (64 - SHARD_BITS), "Lamport counter {c} beyond a stamp's bits");
    Ts(c << SHARD_BITS | u64::from(shard.0))
}

/// The counter of a stamp.
pub fn counter(ts: Ts) -> u64 {
    ts.0 >> SHARD_BITS
}

pub struct Stamps {
    clock: LamportClock,
    shard: ShardId,
}

impl Stamps {
    pub fn new(shard: ShardId) -> Stamps {
        Stamps { clock: LamportClock::new(), shard }
    }

    /// Lines 29-34: a prepare stamp above the clock and above `dep`.
    pub fn prepare(&mut self, dep: Option<Ts>) -> Ts {
        let c = match dep {
            Some(dep) => self.clock.observe(counter(dep)),
            None => self.clock.tick(),
        };
        stamp(c, self.shard)
    }

    /// The clock moves to a stamp applied here (a commit, a replayed
    /// prepare).
    pub fn advance_to(&mut self, ts: Ts) {
        self.clock.advance_to(counter(ts));
    }

    /// Line 41: with nothing pending, everything up to the clock's counter
    /// (whatever the shard bits) is safe: a later prepare here is stamped
    /// above it.
    pub fn ceiling(&self) -> Ts {
        Ts(self.clock.now() << SHARD_BITS | ((1 << SHARD_BITS) - 1))
    }

    pub fn counter(&self) -> u64 {
        self.clock.now()
    }

    /// Restores a checkpoint's counter.
    pub fn restore(&mut self, c: u64) {
        self.clock.advance_to(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_stamps_are_above_the_clock_the_dependency_and_unique_across_partitions() {
        let (mut a, mut b) = (Stamps::new(ShardId(0)), Stamps::new(ShardId(1)));
        let pa = a.prepare(None);
        let pb = b.prepare(None);
        assert_eq!(counter(pa), counter(pb), "two clocks at the same count");
        assert_ne!(pa, pb, "but distinct stamps");
        let after = a.prepare(Some(pb));
        assert!(after > pb, "above the client's dependency");
        assert!(a.ceiling() > after && a.ceiling() < stamp(counter(after) + 1, ShardId(0)));
        b.advance_to(stamp(9, ShardId(0)));
        assert!(b.prepare(None) > stamp(9, ShardId(0)), "a later prepare is above a commit applied");
    }
}
