//! A replica's side of log truncation, for Calvin and SLOG alike (Calvin
//! §5: the input is replayed from a checkpoint; "a failed node ... can
//! recover from a replica"): which of its checkpoints is durable — the
//! position its log fetches report, below which its sequencers may forget
//! the log (`crate::readers`) — and, once the positions it needs are
//! forgotten, which copy of its shard it asks for a checkpoint next.
//!
//! A checkpoint is appended as a record and the log compacted through it,
//! so its durability is known exactly: its record's LSN persisted.

use meridian_core::{Lsn, NodeId};

#[derive(Clone, Debug, Default)]
pub struct CatchUp {
    /// The position the durable checkpoint resumes from (0: none yet, the
    /// log from its start).
    durable_pos: u64,
    /// A checkpoint appended and not yet durable: its record's LSN and
    /// position.
    appended: Option<(Lsn, u64)>,
    /// The positions this replica needs are forgotten before this one.
    need: Option<u64>,
    /// Asks made since the need arose: one copy a tick, in turn.
    asked: usize,
}

impl CatchUp {
    /// The position this replica's durable checkpoint resumes from.
    pub fn durable_pos(&self) -> u64 {
        self.durable_pos
    }

    /// A restart found a checkpoint at `pos` in the durable log.
    pub fn restored(&mut self, pos: u64) {
        self.durable_pos = self.durable_pos.max(pos);
    }

    /// A checkpoint resuming from `pos` was appended at `lsn`.
    pub fn appended(&mut self, lsn: Lsn, pos: u64) {
        self.appended = Some((lsn, pos));
    }

    /// Appends are durable up to `upto`: so may be the last checkpoint.
    pub fn persisted(&mut self, upto: Lsn) {
        if let Some((_, pos)) = self.appended.filter(|(lsn, _)| *lsn <= upto) {
            self.durable_pos = self.durable_pos.max(pos);
            self.appended = None;
        }
    }

    /// A sequencer forgot the positions before `base`; true if this
    /// replica, at `next_pos`, now needs a checkpoint it did not need.
    pub fn truncated(&mut self, base: u64, next_pos: u64) -> bool {
        if base <= next_pos || self.need.is_some_and(|need| need >= base) {
            return false;
        }
        self.need = Some(base);
        true
    }

    /// The copy to ask for a checkpoint now, and the position it must be
    /// at or past: `copies` in turn (the nearest first), while the need
    /// lasts. None once the log reached it after all.
    pub fn next_ask(&mut self, next_pos: u64, copies: &[NodeId]) -> Option<(NodeId, u64)> {
        let need = self.need?;
        if next_pos >= need {
            self.need = None;
            return None;
        }
        let to = *copies.get(self.asked % copies.len().max(1))?;
        self.asked += 1;
        Some((to, need))
    }

    /// A checkpoint was installed: the need is met.
    pub fn installed(&mut self) {
        self.need = None;
        self.asked = 0;
    }

    pub fn check_invariants(&self, next_pos: u64) {
        assert!(self.durable_pos <= next_pos, "a durable checkpoint past the log applied");
        assert!(self.appended.is_none_or(|(_, pos)| pos >= self.durable_pos), "checkpoints only move forward");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_is_reported_only_once_its_record_is_durable() {
        let mut c = CatchUp::default();
        c.appended(Lsn(5), 40);
        c.persisted(Lsn(4));
        assert_eq!(c.durable_pos(), 0, "appended, not durable");
        c.persisted(Lsn(5));
        assert_eq!(c.durable_pos(), 40);
    }

    #[test]
    fn a_replica_behind_a_truncation_asks_each_copy_in_turn_until_its_log_reaches_the_base() {
        let mut c = CatchUp::default();
        let copies = [NodeId(7), NodeId(8)];
        assert!(!c.truncated(10, 12), "not behind: nothing needed");
        assert_eq!(c.next_ask(12, &copies), None);
        assert!(c.truncated(30, 12));
        assert!(!c.truncated(20, 12), "an older truncation adds nothing");
        assert_eq!(c.next_ask(12, &copies), Some((NodeId(7), 30)));
        assert_eq!(c.next_ask(12, &copies), Some((NodeId(8), 30)));
        assert_eq!(c.next_ask(12, &copies), Some((NodeId(7), 30)));
        assert_eq!(c.next_ask(30, &copies), None, "the log reached it");
        assert_eq!(c.next_ask(12, &copies), None, "and the need is gone");
    }
}
