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

#[cfg(test)]
mod tests {
    use super::*;

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
