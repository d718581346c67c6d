//! What a simulated run is made of: the topology, the latency matrix, the
//! per-node clock, CPU and disk models, the network's misbehaviour and the
//! fault schedule. Built by the experiment layer; the simulator only reads it.

use meridian_core::{LatencyMatrix, NodeId, Topology};
use std::sync::Arc;

/// A node's clock: `wall = true + offset + drift * true + jumps`; its
/// monotonic clock (timers) runs at `1 + drift` and never jumps.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct ClockModel {
    pub offset_ns: i64,
    pub drift_ppm: f64,
}

impl ClockModel {
    /// How far the clock has drifted by true time `now_ns`. Read at every
    /// event: a clock without drift (the common case) skips the float
    /// arithmetic, which gives 0 for it anyway.
    #[inline]
    pub fn drift_ns(&self, now_ns: u64) -> i64 {
        if self.drift_ppm == 0.0 { 0 } else { (now_ns as f64 * self.drift_ppm / 1e6) as i64 }
    }

    /// The true time a local duration of `after_ns` takes: the monotonic
    /// clock runs at 1 + drift, so `after / (1 + drift)`. Without drift it
    /// is `after_ns` itself wherever an `f64` holds it exactly.
    #[inline]
    pub fn true_duration_ns(&self, after_ns: u64) -> u64 {
        if self.drift_ppm == 0.0 && after_ns < 1 << f64::MANTISSA_DIGITS {
            after_ns
        } else {
            (after_ns as f64 / (1.0 + self.drift_ppm / 1e6)) as u64
        }
    }
}

/// Network misbehaviour, all of it seeded.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct NetConfig {
    /// Mean of the exponential extra one-way delay added to every message.
    pub jitter_mean_ns: u64,
    /// Probability a message is dropped.
    pub loss: f64,
    /// Probability a message is delivered twice.
    pub duplicate: f64,
    /// False: each directed link is FIFO (as over TCP), jitter only delays.
    /// True: messages on a link may overtake each other.
    pub reorder: bool,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig { jitter_mean_ns: 0, loss: 0.0, duplicate: 0.0, reorder: false }
    }
}

/// Something the schedule does to the cluster at a given time.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultAction {
    Crash(NodeId),
    /// Restarts a crashed node from its durable records (no-op if it is up).
    Restart(NodeId),
    /// Cuts every link between `nodes` and the rest; cuts accumulate.
    Partition(Vec<NodeId>),
    /// Cuts the link between the two nodes of each pair (both directions)
    /// and no other; accumulates with the other cuts.
    CutLinks(Vec<(NodeId, NodeId)>),
    /// Restores the links of each pair (undoes `CutLinks`); other cuts stay.
    RestoreLinks(Vec<(NodeId, NodeId)>),
    /// Cuts the link from the first node of each pair to the second, one
    /// direction only: the second still reaches the first.
    CutOneWay(Vec<(NodeId, NodeId)>),
    /// Restores the directed links (undoes `CutOneWay`); other cuts stay.
    RestoreOneWay(Vec<(NodeId, NodeId)>),
    /// Removes every cut, link cuts included.
    Heal,
    /// Moves a node's wall clock by the (signed) amount.
    ClockJump(NodeId, i64),
    SetLoss(f64),
    SetDuplicate(f64),
    /// Heals every cut, restarts every crashed node and stops loss and
    /// duplication (the end of a swarm run's fault window).
    HealAll,
}

/// One scheduled fault.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduledFault {
    pub at_ns: u64,
    pub action: FaultAction,
}

/// A whole simulated deployment.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub topology: Arc<Topology>,
    /// Indexed by the topology's region ids (same order as `topology.regions`).
    pub matrix: LatencyMatrix,
    pub net: NetConfig,
    /// One per node.
    pub clocks: Vec<ClockModel>,
    /// TrueTime's ε.
    pub epsilon_ns: u64,
    /// Simulated CPU time each node spends per event it handles.
    pub cpu_ns: Vec<u64>,
    /// CPU time per byte of every message a node sends or receives (its
    /// postcard encoding, as on the wire), one per node; empty: free.
    pub cpu_ns_per_byte: Vec<f64>,
    /// CPU time per key a node's protocol charges (`Env::charge_keys`), one
    /// per node; empty: free.
    pub cpu_ns_per_key: Vec<u64>,
    /// CPU time per field (number, length or byte string) of every message
    /// a node sends or receives, beside its bytes, one per node; empty:
    /// free.
    pub cpu_ns_per_field: Vec<f64>,
    /// Transmission time per byte of a message on every link (8 ns per
    /// byte is 1 Gbit/s); 0: free.
    pub net_ns_per_byte: f64,
    /// Latency of a durable append (group commit: appends made while a flush
    /// is in flight go in the next one).
    pub fsync_ns: u64,
    pub faults: Vec<ScheduledFault>,
}

impl SimConfig {
    /// A fault-free configuration with ideal clocks and free CPU, for tests.
    pub fn ideal(seed: u64, topology: Arc<Topology>, matrix: LatencyMatrix) -> SimConfig {
        let n = topology.nodes.len();
        SimConfig {
            seed,
            topology,
            matrix,
            net: NetConfig::default(),
            clocks: vec![ClockModel::default(); n],
            epsilon_ns: 100_000,
            cpu_ns: vec![0; n],
            cpu_ns_per_byte: Vec::new(),
            cpu_ns_per_key: Vec::new(),
            cpu_ns_per_field: Vec::new(),
            net_ns_per_byte: 0.0,
            fsync_ns: 100_000,
            faults: Vec::new(),
        }
    }

    /// Checks that per-node vectors match the topology and the matrix covers
    /// every region.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.topology.nodes.len();
        let per_byte_ok = (self.cpu_ns_per_byte.is_empty() || self.cpu_ns_per_byte.len() == n)
            && (self.cpu_ns_per_key.is_empty() || self.cpu_ns_per_key.len() == n)
            && (self.cpu_ns_per_field.is_empty() || self.cpu_ns_per_field.len() == n);
        let finite = |x: &f64| x.is_finite() && *x >= 0.0;
        if !self.cpu_ns_per_byte.iter().chain(&self.cpu_ns_per_field).all(finite) || !finite(&self.net_ns_per_byte) {
            return Err("per-byte costs are finite and non-negative".into());
        }
        if self.clocks.len() != n || self.cpu_ns.len() != n || !per_byte_ok {
            return Err(format!(
                "per-node settings cover {} clocks and {} cpus for {n} nodes",
                self.clocks.len(),
                self.cpu_ns.len()
            ));
        }
        if self.matrix.regions != self.topology.regions {
            return Err("latency matrix regions differ from the topology's".into());
        }
        if !(0.0..=1.0).contains(&self.net.loss) || !(0.0..=1.0).contains(&self.net.duplicate) {
            return Err("loss and duplicate are probabilities in [0, 1]".into());
        }
        let mut last = 0;
        for f in &self.faults {
            if f.at_ns < last {
                return Err("faults must be in time order".into());
            }
            last = f.at_ns;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The formulas the shortcuts skip, as the simulator computed them.
    fn drift_by_formula(c: &ClockModel, now_ns: u64) -> i64 {
        (now_ns as f64 * c.drift_ppm / 1e6) as i64
    }

    fn duration_by_formula(c: &ClockModel, after_ns: u64) -> u64 {
        (after_ns as f64 / (1.0 + c.drift_ppm / 1e6)) as u64
    }

    #[test]
    fn a_clock_without_drift_reads_as_the_drift_formula_says() {
        let times = [0, 1, 999, 1 << 40, (1 << 53) - 1, 1 << 53, (1 << 53) + 1, u64::MAX];
        for drift_ppm in [0.0, -0.0, 50.0, -50.0] {
            let c = ClockModel { offset_ns: 0, drift_ppm };
            for t in times {
                assert_eq!(c.drift_ns(t), drift_by_formula(&c, t), "drift {drift_ppm} at {t}");
                assert_eq!(c.true_duration_ns(t), duration_by_formula(&c, t), "duration {t} at drift {drift_ppm}");
            }
        }
    }
}
