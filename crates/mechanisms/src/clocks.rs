//! Logical and hybrid clocks, and TrueTime helpers.
//!
//! - [`LamportClock`]: Lamport's logical clock (Eiger's and Eiger-NOC2's
//!   partitions order writes by it; NOC-NOC Algorithm 2).
//! - [`Hlc`]: the hybrid logical clock of Kulkarni et al., "Logical Physical
//!   Clocks" (Figure 5): a timestamp `(l, c)` that stays within the clock
//!   error of physical time, never goes back, and orders every send before
//!   its receipt (MVTO-HLC).
//! - [`commit_wait_ns`] and [`TsAllocator`]: Spanner's commit wait (a
//!   transaction's timestamp is visible only once TrueTime's earliest has
//!   passed it: D2PL-TTC, K2), and timestamps taken from TrueTime in
//!   batches, unique across nodes by a tie-break id (K2's oracles).
//!
//! All are pure: the caller passes the clock reading of its event.

use meridian_core::TrueTime;
use serde::{Deserialize, Serialize};

/// Lamport's logical clock.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LamportClock {
    time: u64,
}

impl LamportClock {
    pub fn new() -> LamportClock {
        LamportClock::default()
    }

    /// The current value (the last one issued or observed).
    pub fn now(&self) -> u64 {
        self.time
    }

    /// A local event or a send: a value above every one seen.
    pub fn tick(&mut self) -> u64 {
        self.time += 1;
        self.time
    }

    /// A receipt carrying `remote`: the clock moves past it.
    pub fn observe(&mut self, remote: u64) -> u64 {
        self.time = self.time.max(remote) + 1;
        self.time
    }

    /// Moves the clock to at least `at` without issuing a value (a write
    /// timestamped elsewhere, applied here).
    pub fn advance_to(&mut self, at: u64) {
        self.time = self.time.max(at);
    }
}

/// A hybrid logical clock timestamp: the largest physical time heard of
/// (`l`, ns) and a counter among events that share it (`c`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct HlcTs {
    pub l: u64,
    pub c: u32,
}

/// A hybrid logical clock (Kulkarni et al., Figure 5).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hlc {
    last: HlcTs,
}

impl Hlc {
    pub fn new() -> Hlc {
        Hlc::default()
    }

    /// The last timestamp issued or observed.
    pub fn last(&self) -> HlcTs {
        self.last
    }

    /// A local event or a send at physical time `pt_ns`.
    pub fn now(&mut self, pt_ns: u64) -> HlcTs {
        let l = self.last.l.max(pt_ns);
        let c = if l == self.last.l { self.last.c.checked_add(1).expect("HLC counter overflow") } else { 0 };
        self.last = HlcTs { l, c };
        self.last
    }

    /// A receipt of `m` at physical time `pt_ns`.
    pub fn observe(&mut self, m: HlcTs, pt_ns: u64) -> HlcTs {
        let l = self.last.l.max(m.l).max(pt_ns);
        let c = match (l == self.last.l, l == m.l) {
            (true, true) => self.last.c.max(m.c),
            (true, false) => self.last.c,
            (false, true) => m.c,
            (false, false) => return self.set(HlcTs { l, c: 0 }),
        };
        self.set(HlcTs { l, c: c.checked_add(1).expect("HLC counter overflow") })
    }

    fn set(&mut self, ts: HlcTs) -> HlcTs {
        debug_assert!(ts > self.last, "an HLC never goes back");
        self.last = ts;
        ts
    }
}

/// How much longer (ns of local time) a commit at `ts_ns` must wait until
/// TrueTime guarantees `ts_ns` has passed everywhere: zero once the
/// interval's earliest bound is past it (Spanner §4.1.2).
pub fn commit_wait_ns(tt: TrueTime, ts_ns: u64) -> u64 {
    (ts_ns + 1).saturating_sub(tt.earliest_ns)
}

/// A timestamp unique across nodes: a time, then the issuing node's id.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct UniqueTs {
    pub t: u64,
    pub node: u32,
}

/// Timestamps from TrueTime for one node: each at or after the interval's
/// latest bound (so no node can have observed a later time yet), strictly
/// increasing on this node, and unique across nodes by the node id.
#[derive(Clone, Debug)]
pub struct TsAllocator {
    node: u32,
    last: u64,
}

impl TsAllocator {
    pub fn new(node: u32) -> TsAllocator {
        TsAllocator { node, last: 0 }
    }

    /// The next timestamp.
    pub fn next(&mut self, tt: TrueTime) -> UniqueTs {
        self.last = tt.latest_ns.max(self.last + 1);
        UniqueTs { t: self.last, node: self.node }
    }

    /// `n` consecutive timestamps for one batch (K2 hands an oracle's batch
    /// to its data nodes), all after `tt.latest_ns`.
    pub fn batch(&mut self, tt: TrueTime, n: u32) -> Vec<UniqueTs> {
        (0..n).map(|_| self.next(tt)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lamport_clock_orders_a_receipt_after_its_send() {
        let (mut a, mut b) = (LamportClock::new(), LamportClock::new());
        for _ in 0..5 {
            a.tick();
        }
        let sent = a.tick();
        let received = b.observe(sent);
        assert!(received > sent);
        assert!(b.tick() > received, "and every later event after it");
        b.advance_to(3);
        assert_eq!(b.now(), received + 1, "advancing never moves it back");
    }

    #[test]
    fn an_hlc_never_goes_back_even_when_physical_time_does() {
        let mut h = Hlc::new();
        let mut last = HlcTs::default();
        for pt in [100, 100, 90, 120, 50, 120, 121] {
            let ts = h.now(pt);
            assert!(ts > last, "{ts:?} after {last:?}");
            assert!(ts.l >= pt, "l is at least physical time");
            last = ts;
        }
    }

    #[test]
    fn an_hlc_orders_a_receipt_after_its_send_within_the_clock_error() {
        // Node a's clock runs 40 ns ahead of b's.
        let (mut a, mut b) = (Hlc::new(), Hlc::new());
        let sent = a.now(1_040);
        let received = b.observe(sent, 1_000);
        assert!(received > sent);
        assert_eq!(received.l, 1_040, "l is the largest physical time heard of");
        assert!(received.l - 1_000 <= 40, "and within the clock error of b's own");
        let later = b.now(1_010);
        assert!(later > received && later.l == 1_040 && later.c == received.c + 1);
        let caught_up = b.now(1_050);
        assert_eq!(caught_up, HlcTs { l: 1_050, c: 0 }, "the counter resets when physical time passes l");
    }

    #[test]
    fn commit_wait_ends_once_truetime_earliest_passes_the_timestamp() {
        let tt = |earliest_ns, latest_ns| TrueTime { earliest_ns, latest_ns };
        assert_eq!(commit_wait_ns(tt(90, 110), 110), 21);
        assert_eq!(commit_wait_ns(tt(110, 130), 110), 1);
        assert_eq!(commit_wait_ns(tt(111, 131), 110), 0);
    }

    #[test]
    fn allocated_timestamps_follow_truetime_latest_and_are_unique_across_nodes() {
        let tt = TrueTime { earliest_ns: 90, latest_ns: 110 };
        let (mut a, mut b) = (TsAllocator::new(1), TsAllocator::new(2));
        let batch = a.batch(tt, 3);
        assert_eq!(batch.iter().map(|t| t.t).collect::<Vec<_>>(), vec![110, 111, 112]);
        assert!(batch.iter().all(|t| t.t >= tt.latest_ns));
        let other = b.next(tt);
        assert!(!batch.contains(&other), "the node id breaks the tie at 110");
        let earlier = a.next(TrueTime { earliest_ns: 0, latest_ns: 5 });
        assert_eq!(earlier.t, 113, "strictly increasing on a node even if TrueTime reads earlier");
    }
}
