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
use std::collections::{BTreeMap, VecDeque};

/// Samples kept per peer.
const OWD_SAMPLES: usize = 16;

/// The recent samples of one peer's delay.
#[derive(Clone, Debug, Default)]
pub struct Owd {
    samples: VecDeque<u64>,
}

impl Owd {
    pub fn add(&mut self, ns: u64) {
        if self.samples.len() == OWD_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(ns);
    }

    /// The samples' `percentile` (0-100), once there is one.
    pub fn estimate(&self, percentile: f64) -> Option<u64> {
        if self.samples.is_empty() {
            return None;
        }
        let mut s: Vec<u64> = self.samples.iter().copied().collect();
        s.sort_unstable();
        let i = ((percentile / 100.0) * (s.len() - 1) as f64).round() as usize;
        Some(s[i.min(s.len() - 1)])
    }
}

/// Delay estimates to a set of peers.
#[derive(Clone, Debug, Default)]
pub struct Delays {
    peers: BTreeMap<NodeId, Owd>,
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
        self.peers.entry(peer).or_default().add(ns);
    }

    pub fn estimate(&self, peer: NodeId, percentile: f64) -> Option<u64> {
        self.peers.get(&peer).and_then(|o| o.estimate(percentile))
    }

    /// Every peer's estimate, in peer order.
    pub fn estimates(&self, percentile: f64) -> Vec<(NodeId, u64)> {
        self.peers.iter().filter_map(|(n, o)| o.estimate(percentile).map(|e| (*n, e))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
