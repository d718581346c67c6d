//! The simulated wide-area network: one-way delays from the latency matrix,
//! exponential jitter, loss, duplication, optional reordering (links are FIFO
//! otherwise, as TCP is) and partitions: sets of nodes cut off from the rest,
//! single links cut, which lets connectivity stop being transitive (a
//! leader that still reaches the view manager but not its followers), and
//! links cut in one direction only (a node that hears another but is not
//! heard by it).

use crate::config::NetConfig;
use meridian_core::{LatencyMatrix, NodeId, Rng, Topology};
use std::collections::{BTreeMap, BTreeSet};

pub struct Network {
    pub cfg: NetConfig,
    rng: Rng,
    /// One-way delay between the regions of every pair of nodes, ns.
    one_way_ns: Vec<u64>,
    /// Latest delivery time on each directed link, for FIFO links.
    last_delivery_ns: Vec<u64>,
    n: usize,
    cuts: Vec<BTreeSet<NodeId>>,
    /// Links cut in both directions, each as (lower id, higher id), with
    /// the number of cuts not yet restored: windows that overlap on a link
    /// keep it cut until the last of them ends.
    cut_links: LinkCuts,
    /// Links cut in one direction, each as (from, to), counted alike.
    one_way_cuts: LinkCuts,
}

/// Cut links, each with the number of its cuts not yet restored.
#[derive(Default)]
struct LinkCuts(BTreeMap<(NodeId, NodeId), u32>);

impl LinkCuts {
    fn contains(&self, link: &(NodeId, NodeId)) -> bool {
        !self.0.is_empty() && self.0.contains_key(link)
    }

    fn cut(&mut self, link: (NodeId, NodeId)) {
        *self.0.entry(link).or_default() += 1;
    }

    /// Ends one cut of `link` (none if it has none).
    fn restore(&mut self, link: (NodeId, NodeId)) {
        if let Some(n) = self.0.get_mut(&link) {
            *n -= 1;
            if *n == 0 {
                self.0.remove(&link);
            }
        }
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// A link cut in both directions, named by its lower node first.
fn link_key(a: NodeId, b: NodeId) -> (NodeId, NodeId) {
    (a.min(b), a.max(b))
}

/// Where a sent message goes: up to two deliveries (duplication).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub first_ns: Option<u64>,
    pub second_ns: Option<u64>,
}

impl Network {
    pub fn new(cfg: NetConfig, seed: u64, topology: &Topology, matrix: &LatencyMatrix) -> Network {
        let n = topology.nodes.len();
        let mut one_way_ns = vec![0; n * n];
        for a in 0..n {
            for b in 0..n {
                if a != b {
                    let (ra, rb) = (topology.nodes[a].region.index(), topology.nodes[b].region.index());
                    one_way_ns[a * n + b] = matrix.one_way_ns(ra, rb);
                }
            }
        }
        Network {
            cfg,
            rng: Rng::derive(seed, 0x6e65_7477),
            one_way_ns,
            last_delivery_ns: vec![0; n * n],
            n,
            cuts: Vec::new(),
            cut_links: LinkCuts::default(),
            one_way_cuts: LinkCuts::default(),
        }
    }

    /// The base one-way delay between two nodes (no jitter).
    pub fn base_delay_ns(&self, from: NodeId, to: NodeId) -> u64 {
        self.one_way_ns[from.index() * self.n + to.index()]
    }

    /// Whether a message from `from` to `to` is dropped by a cut.
    pub fn is_cut(&self, from: NodeId, to: NodeId) -> bool {
        self.cuts.iter().any(|cut| cut.contains(&from) != cut.contains(&to))
            || self.cut_links.contains(&link_key(from, to))
            || self.one_way_cuts.contains(&(from, to))
    }

    pub fn partition(&mut self, nodes: impl IntoIterator<Item = NodeId>) {
        self.cuts.push(nodes.into_iter().collect());
    }

    /// Cuts each link between the two nodes of a pair, both directions.
    pub fn cut_links(&mut self, links: impl IntoIterator<Item = (NodeId, NodeId)>) {
        for (a, b) in links.into_iter().filter(|(a, b)| a != b) {
            self.cut_links.cut(link_key(a, b));
        }
    }

    /// Ends one `cut_links` cut of each pair's link: a link that another
    /// cut still holds, and other kinds of cut, stay.
    pub fn restore_links(&mut self, links: &[(NodeId, NodeId)]) {
        for (a, b) in links.iter().filter(|(a, b)| a != b) {
            self.cut_links.restore(link_key(*a, *b));
        }
    }

    /// Cuts each link from the first node of a pair to the second: the
    /// second still reaches the first.
    pub fn cut_one_way(&mut self, links: impl IntoIterator<Item = (NodeId, NodeId)>) {
        for link in links.into_iter().filter(|(from, to)| from != to) {
            self.one_way_cuts.cut(link);
        }
    }

    /// Ends one `cut_one_way` cut of each directed link, as `restore_links`.
    pub fn restore_one_way(&mut self, links: &[(NodeId, NodeId)]) {
        for link in links.iter().filter(|(from, to)| from != to) {
            self.one_way_cuts.restore(*link);
        }
    }

    pub fn heal(&mut self) {
        self.cuts.clear();
        self.cut_links.clear();
        self.one_way_cuts.clear();
    }

    /// Decides the fate of one message sent at `depart_ns`; `extra_ns` is an
    /// interceptor's added delay.
    pub fn route(&mut self, from: NodeId, to: NodeId, depart_ns: u64, extra_ns: u64) -> Route {
        if from != to && (self.is_cut(from, to) || self.rng.chance(self.cfg.loss)) {
            return Route::default();
        }
        let first = self.delivery(from, to, depart_ns, extra_ns);
        let second =
            (from != to && self.rng.chance(self.cfg.duplicate)).then(|| self.delivery(from, to, depart_ns, extra_ns));
        Route { first_ns: Some(first), second_ns: second }
    }

    /// The directed link from one node to another, numbered densely.
    pub fn link(&self, from: NodeId, to: NodeId) -> usize {
        from.index() * self.n + to.index()
    }

    fn delivery(&mut self, from: NodeId, to: NodeId, depart_ns: u64, extra_ns: u64) -> u64 {
        let jitter = if from == to { 0 } else { self.rng.exponential(self.cfg.jitter_mean_ns as f64) as u64 };
        let mut at = depart_ns + self.base_delay_ns(from, to) + jitter + extra_ns;
        let link = self.link(from, to);
        if !self.cfg.reorder {
            at = at.max(self.last_delivery_ns[link]);
            self.last_delivery_ns[link] = at;
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::ClusterSpec;

    fn network() -> Network {
        let matrix = LatencyMatrix::preset("tiga-gcp").unwrap();
        let regions: Vec<&str> = matrix.regions.iter().take(3).map(String::as_str).collect();
        let topology = Topology::build(&ClusterSpec::every_region(&regions, 1), &[]);
        Network::new(NetConfig::default(), 1, &topology, &matrix)
    }

    #[test]
    fn a_cut_link_drops_only_its_own_messages_so_connectivity_need_not_be_transitive() {
        let mut net = network();
        let (a, b, c) = (NodeId(0), NodeId(1), NodeId(2));
        net.cut_links([(b, a), (c, a)]);
        assert!(net.is_cut(a, b) && net.is_cut(b, a) && net.is_cut(a, c), "both directions of each pair");
        assert!(!net.is_cut(b, c), "b and c still talk");
        assert_eq!(net.route(a, b, 0, 0), Route::default(), "dropped");
        assert!(net.route(b, c, 0, 0).first_ns.is_some());
        net.partition([c]);
        net.restore_links(&[(a, b), (a, c)]);
        assert!(!net.is_cut(a, b), "restored");
        assert!(net.is_cut(a, c) && net.is_cut(b, c), "the node-set partition stays");
        net.cut_links([(a, b)]);
        net.heal();
        assert!(!net.is_cut(a, b) && !net.is_cut(a, c), "heal removes link cuts too");
    }

    #[test]
    fn overlapping_cuts_of_one_link_hold_it_until_the_last_of_them_is_restored() {
        let mut net = network();
        let (a, b) = (NodeId(0), NodeId(1));
        net.cut_links([(a, b)]);
        net.cut_links([(b, a)]);
        net.restore_links(&[(a, b)]);
        assert!(net.is_cut(a, b) && net.is_cut(b, a), "the second window still holds it");
        net.restore_links(&[(b, a)]);
        assert!(!net.is_cut(a, b), "both windows ended");
        net.restore_links(&[(a, b)]);
        net.cut_links([(a, b)]);
        assert!(net.is_cut(a, b), "a restore with no cut left does not outlast the next cut");
        net.cut_one_way([(a, b)]);
        net.cut_one_way([(a, b)]);
        net.restore_one_way(&[(a, b)]);
        net.restore_links(&[(a, b)]);
        assert!(net.is_cut(a, b) && !net.is_cut(b, a), "one of the two one-way cuts remains");
        net.restore_one_way(&[(a, b)]);
        assert!(!net.is_cut(a, b));
    }

    #[test]
    fn a_one_way_cut_drops_one_direction_and_heals_with_the_rest() {
        let mut net = network();
        let (a, b, c) = (NodeId(0), NodeId(1), NodeId(2));
        net.cut_one_way([(a, b), (a, c)]);
        assert!(net.is_cut(a, b) && net.is_cut(a, c), "a is not heard");
        assert!(!net.is_cut(b, a) && !net.is_cut(c, a), "a still hears b and c");
        assert_eq!(net.route(a, b, 0, 0), Route::default(), "dropped");
        assert!(net.route(b, a, 0, 0).first_ns.is_some(), "delivered");
        net.cut_links([(a, b)]);
        net.restore_one_way(&[(a, b)]);
        assert!(net.is_cut(a, b) && net.is_cut(b, a), "the two-way cut of the same pair stays");
        assert!(net.is_cut(a, c), "the other one-way cut stays");
        net.heal();
        assert!(!net.is_cut(a, b) && !net.is_cut(a, c), "heal removes one-way cuts too");
    }
}
