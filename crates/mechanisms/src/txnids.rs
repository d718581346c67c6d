//! Transaction identifiers unique across a coordinator's restarts.
//!
//! A coordinator keeps nothing else durable, so a restarted one would reuse
//! sequence numbers, and participants remember transactions by identifier
//! (their locks, votes and outcomes): a reused identifier would be mistaken
//! for the old transaction. Each start durably records a new epoch, and
//! identifiers are `epoch << 40 | counter`; none is handed out before the
//! epoch is durable (a crash before that reuses the epoch, harmlessly, as
//! nothing carried it).

use meridian_core::{Lsn, NodeId, TxnId};

/// Bits of a sequence number below its epoch.
pub const COUNTER_BITS: u32 = 40;

/// The epoch an identifier's sequence number was handed out in.
pub fn epoch_of(seq: u64) -> u64 {
    seq >> COUNTER_BITS
}

#[derive(Clone, Debug)]
pub struct TxnIds {
    node: NodeId,
    epoch: u64,
    epoch_lsn: Lsn,
    durable: bool,
    counter: u64,
}

impl TxnIds {
    /// Starts from the epochs recorded so far; the caller must append
    /// `epoch()` durably and report the LSN with [`TxnIds::recorded_at`].
    pub fn start(node: NodeId, recorded_epochs: impl IntoIterator<Item = u64>) -> TxnIds {
        let epoch = recorded_epochs.into_iter().max().map_or(1, |e| e + 1);
        assert!(epoch < 1 << (64 - COUNTER_BITS), "epochs exhausted");
        TxnIds { node, epoch, epoch_lsn: Lsn(u64::MAX), durable: false, counter: 0 }
    }

    /// The node the identifiers belong to.
    pub fn next_node(&self) -> NodeId {
        self.node
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn recorded_at(&mut self, lsn: Lsn) {
        self.epoch_lsn = lsn;
    }

    /// Called with every persistence acknowledgement; true when the epoch
    /// has just become durable.
    pub fn persisted(&mut self, upto: Lsn) -> bool {
        if !self.durable && upto >= self.epoch_lsn {
            self.durable = true;
            return true;
        }
        false
    }

    pub fn ready(&self) -> bool {
        self.durable
    }

    /// The sequence number the next identifier will have: every identifier
    /// handed out later is at or above it.
    pub fn next_seq(&self) -> u64 {
        (self.epoch << COUNTER_BITS) | (self.counter + 1)
    }

    /// The next identifier (only once the epoch is durable).
    pub fn next_id(&mut self) -> TxnId {
        assert!(self.durable, "transaction ids before the epoch is durable");
        assert!(self.counter < (1 << COUNTER_BITS) - 1, "counter exhausted in epoch {}", self.epoch);
        self.counter += 1;
        TxnId { node: self.node, seq: (self.epoch << COUNTER_BITS) | self.counter }
    }
}

/// A coordinator's identifiers with the requests that reached it before its
/// epoch was durable: those wait here, since an identifier handed out before
/// then could repeat one of a previous life's, and leave in arrival order
/// the moment the epoch is durable. Both `2pl-paxos` and `tiga` coordinators
/// run on it.
#[derive(Clone, Debug)]
pub struct EpochGate<T> {
    ids: TxnIds,
    held: Vec<T>,
}

impl<T> EpochGate<T> {
    /// A coordinator's gate before it starts (nothing recorded yet).
    pub fn new(node: NodeId) -> Self {
        EpochGate { ids: TxnIds::start(node, []), held: Vec::new() }
    }

    /// A (re)start: the epoch after `recorded_epochs`, which the caller
    /// appends durably and reports with [`EpochGate::recorded_at`].
    #[must_use]
    pub fn start(&mut self, recorded_epochs: impl IntoIterator<Item = u64>) -> u64 {
        self.ids = TxnIds::start(self.ids.next_node(), recorded_epochs);
        self.ids.epoch()
    }

    /// The epoch's record was appended at `lsn`.
    pub fn recorded_at(&mut self, lsn: Lsn) {
        self.ids.recorded_at(lsn);
    }

    /// `request` back if the epoch is durable (serve it now); otherwise it
    /// is held until it is.
    #[must_use]
    pub fn admit(&mut self, request: T) -> Option<T> {
        if self.ids.ready() {
            return Some(request);
        }
        self.held.push(request);
        None
    }

    /// Persistence acknowledged up to `upto`: when that made the epoch
    /// durable, every request held, in arrival order (to serve now).
    #[must_use]
    pub fn persisted(&mut self, upto: Lsn) -> Vec<T> {
        if self.ids.persisted(upto) { std::mem::take(&mut self.held) } else { Vec::new() }
    }

    /// See [`TxnIds::next_seq`].
    pub fn next_seq(&self) -> u64 {
        self.ids.next_seq()
    }

    /// The next identifier (only once the epoch is durable).
    pub fn next_id(&mut self) -> TxnId {
        self.ids.next_id()
    }

    /// Requests held.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Requests wait only while the epoch is not durable.
    pub fn check_invariants(&self) {
        assert!(self.held.is_empty() || !self.ids.ready(), "requests queued behind a durable epoch");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_wait_for_a_durable_epoch_and_leave_in_arrival_order() {
        let mut gate = EpochGate::new(NodeId(3));
        let epoch = gate.start([1, 4]);
        assert_eq!(epoch, 5, "one past every epoch recorded");
        gate.recorded_at(Lsn(7));
        assert_eq!(gate.admit("a"), None, "held: the epoch is not durable");
        assert_eq!(gate.admit("b"), None);
        gate.check_invariants();
        assert!(gate.persisted(Lsn(6)).is_empty(), "an earlier append does not free them");
        assert_eq!(gate.held(), 2);
        assert_eq!(gate.persisted(Lsn(7)), ["a", "b"], "freed in arrival order");
        gate.check_invariants();
        assert_eq!(gate.admit("c"), Some("c"), "served at once once durable");
        assert!(gate.persisted(Lsn(8)).is_empty(), "freed once");
        assert_eq!(epoch_of(gate.next_id().seq), 5);
    }

    #[test]
    fn a_restart_never_reuses_an_identifier() {
        let mut first = TxnIds::start(NodeId(3), []);
        first.recorded_at(Lsn(1));
        assert!(!first.persisted(Lsn(0)));
        assert!(first.persisted(Lsn(1)));
        let a = first.next_id();
        let mut second = TxnIds::start(NodeId(3), [first.epoch()]);
        second.recorded_at(Lsn(2));
        second.persisted(Lsn(2));
        let b = second.next_id();
        assert_ne!(a, b);
        assert!(b.seq > a.seq);
    }

    #[test]
    #[should_panic(expected = "before the epoch is durable")]
    fn no_identifier_before_the_epoch_is_durable() {
        TxnIds::start(NodeId(0), []).next_id();
    }
}
