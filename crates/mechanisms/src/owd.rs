//! Delay estimates from recent samples, per peer: a percentile of the last
//! few. Tiga (§3.1, §3.8) keeps a coordinator's one-way delays to every
//! server, measured across the two nodes' own, possibly skewed, clocks (what
//! a future timestamp must cover on the receiver's clock), and a server's
//! delays to the other shards' servers, half the round trip on its own clock
//! (the probe mesh its view manager chooses the coordination mode from,
//! which clock error must not sway). STARRY's and K2's choice of a nearby
//! replica, and any protocol that sizes a timeout by measured delays, take
//! the same estimates.

use meridian_core::NodeId;

/// Samples kept per peer.
const OWD_SAMPLES: usize = 16;

/// The recent samples of one peer's delay.
///
/// The samples are also kept sorted, so that an estimate — asked for far
/// more often than a sample arrives (Tiga's coordinator asks for every
/// replica of every shard a transaction touches) — is one index, with no
/// copy or sort per question. Both live in fixed arrays: a full window's new
/// sample replaces its oldest with one shift of the sorted copy.
#[derive(Clone, Debug, Default)]
pub struct Owd {
    /// In arrival order, a ring: `next` is where the next sample goes (the
    /// oldest's place once the window is full).
    samples: [u64; OWD_SAMPLES],
    next: usize,
    len: usize,
    /// The same samples in ascending order (the first `len`).
    sorted: [u64; OWD_SAMPLES],
}

impl Owd {
    pub fn add(&mut self, ns: u64) {
        let len = self.len;
        let into = self.sorted[..len].partition_point(|s| *s < ns);
        if len == OWD_SAMPLES {
            let oldest = self.samples[self.next];
            let out = self.sorted.binary_search(&oldest).expect("every sample is in the sorted copy");
            if oldest < ns {
                // The oldest lies below the new sample's place: what is between
                // moves down into the gap it leaves.
                self.sorted.copy_within(out + 1..into, out);
                self.sorted[into - 1] = ns;
            } else {
                self.sorted.copy_within(into..out, into + 1);
                self.sorted[into] = ns;
            }
        } else {
            self.sorted.copy_within(into..len, into + 1);
            self.sorted[into] = ns;
            self.len += 1;
        }
        self.samples[self.next] = ns;
        self.next = (self.next + 1) % OWD_SAMPLES;
        debug_assert!(self.sorted[..self.len].is_sorted());
    }

    /// The samples' `percentile` (0-100), once there is one.
    pub fn estimate(&self, percentile: f64) -> Option<u64> {
        let s = &self.sorted[..self.len];
        if s.is_empty() {
            return None;
        }
        let i = ((percentile / 100.0) * (s.len() - 1) as f64).round() as usize;
        Some(s[i.min(s.len() - 1)])
    }
}

/// Delay estimates to a set of peers, by node index: node ids are dense,
/// and an estimate is asked for on every submission (a slot, not a search).
#[derive(Clone, Debug, Default)]
pub struct Delays {
    peers: Vec<Option<Owd>>,
}

impl Delays {
    /// Records a sample from clock readings at both ends (a clock behind the
    /// sender's gives no sample).
    pub fn sample(&mut self, peer: NodeId, send_clock_ns: u64, recv_clock_ns: u64) {
        if let Some(ns) = recv_clock_ns.checked_sub(send_clock_ns) {
            self.add(peer, ns);
        }
    }

    pub fn add(&mut self, peer: NodeId, ns: u64) {
        let i = peer.index();
        if i >= self.peers.len() {
            self.peers.resize_with(i + 1, || None);
        }
        self.peers[i].get_or_insert_with(Owd::default).add(ns);
    }

    pub fn estimate(&self, peer: NodeId, percentile: f64) -> Option<u64> {
        self.peers.get(peer.index())?.as_ref()?.estimate(percentile)
    }

    /// Every peer's estimate, in peer order.
    pub fn estimates(&self, percentile: f64) -> Vec<(NodeId, u64)> {
        let sampled = self.peers.iter().enumerate().filter_map(|(i, o)| Some((i, o.as_ref()?)));
        sampled.filter_map(|(i, o)| o.estimate(percentile).map(|e| (NodeId(i as u32), e))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn the_estimate_is_a_percentile_of_the_recent_samples() {
        let mut d = Delays::default();
        for ns in [50, 10, 30, 20, 40] {
            d.add(NodeId(1), ns);
        }
        assert_eq!(d.estimate(NodeId(1), 50.0), Some(30));
        assert_eq!(d.estimate(NodeId(1), 0.0), Some(10));
        assert_eq!(d.estimate(NodeId(1), 100.0), Some(50));
        assert_eq!(d.estimate(NodeId(2), 50.0), None);
        for _ in 0..OWD_SAMPLES {
            d.add(NodeId(1), 7);
        }
        assert_eq!(d.estimate(NodeId(1), 100.0), Some(7), "old samples age out");
        d.sample(NodeId(3), 100, 90);
        assert_eq!(d.estimate(NodeId(3), 50.0), None, "a receiver clock behind the sender's gives no sample");
        assert_eq!(d.estimates(50.0), vec![(NodeId(1), 7)]);
        d.add(NodeId(9), 90);
        d.add(NodeId(0), 5);
        assert_eq!(d.estimates(50.0), vec![(NodeId(0), 5), (NodeId(1), 7), (NodeId(9), 90)], "in peer order");
        assert_eq!(d.estimate(NodeId(4), 50.0), None, "a peer between sampled ones has no estimate");
        assert_eq!(d.estimate(NodeId(10), 50.0), None, "nor one past them");
    }

    #[test]
    fn the_sorted_copy_matches_a_sort_of_the_window() {
        let mut owd = Owd::default();
        let mut window: VecDeque<u64> = VecDeque::new();
        let mut rng = meridian_core::Rng::new(3);
        for _ in 0..500 {
            // Few distinct values, so that equal samples age out too.
            let ns = rng.below(8);
            owd.add(ns);
            if window.len() == OWD_SAMPLES {
                window.pop_front();
            }
            window.push_back(ns);
            let mut sorted: Vec<u64> = window.iter().copied().collect();
            sorted.sort_unstable();
            assert_eq!(&owd.sorted[..owd.len], &sorted[..]);
            for p in [0.0, 37.5, 50.0, 99.0, 100.0] {
                let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
                assert_eq!(owd.estimate(p), Some(sorted[i]));
            }
        }
    }
}
