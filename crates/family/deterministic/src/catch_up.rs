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
    /// A transaction this replica runs before this position waits for
    /// reads its peer no longer keeps (`reads_gone`): only a checkpoint
    /// at or past it lets it go on.
    gone: Option<u64>,
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

    /// A peer no longer keeps the reads a transaction this replica runs
    /// at `pos` waits for; true if that adds a need (a checkpoint past
    /// `pos`).
    pub fn reads_gone(&mut self, pos: u64) -> bool {
        if self.gone.is_some_and(|gone| gone > pos) {
            return false;
        }
        self.gone = Some(pos + 1);
        true
    }

    /// The copy to ask for a checkpoint now, and the position it must be
    /// at or past: `copies` in turn (the nearest first), while a need
    /// lasts — the log's, until it reaches `next_pos`; a transaction's
    /// gone reads, until none before them runs (`resume_pos`). None once
    /// both are met after all.
    pub fn next_ask(&mut self, next_pos: u64, resume_pos: u64, copies: &[NodeId]) -> Option<(NodeId, u64)> {
        self.need = self.need.filter(|need| next_pos < *need);
        self.gone = self.gone.filter(|gone| resume_pos < *gone);
        let need = self.need.max(self.gone)?;
        let to = *copies.get(self.asked % copies.len().max(1))?;
        self.asked += 1;
        Some((to, need))
    }

    /// Whether a copy's checkpoint resuming from `pos` is worth
    /// installing at a replica whose log is applied up to `next_pos` and
    /// whose first running transaction is at `resume_pos`: past its log,
    /// or far enough for reads that are gone and still waited for (even
    /// behind its log).
    pub fn wants(&self, pos: u64, next_pos: u64, resume_pos: u64) -> bool {
        pos > next_pos || self.gone.is_some_and(|gone| pos >= gone && resume_pos < gone)
    }

    /// A checkpoint was installed: the needs are met.
    pub fn installed(&mut self) {
        self.need = None;
        self.gone = None;
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
        assert_eq!(c.next_ask(12, 12, &copies), None);
        assert!(c.truncated(30, 12));
        assert!(!c.truncated(20, 12), "an older truncation adds nothing");
        assert_eq!(c.next_ask(12, 12, &copies), Some((NodeId(7), 30)));
        assert_eq!(c.next_ask(12, 12, &copies), Some((NodeId(8), 30)));
        assert_eq!(c.next_ask(12, 12, &copies), Some((NodeId(7), 30)));
        assert_eq!(c.next_ask(30, 12, &copies), None, "the log reached it");
        assert_eq!(c.next_ask(12, 12, &copies), None, "and the need is gone");
    }

    #[test]
    fn a_replica_whose_peer_lost_the_reads_it_waits_for_asks_for_a_checkpoint_past_them_even_behind_its_log() {
        let mut c = CatchUp::default();
        let copies = [NodeId(7)];
        assert!(c.reads_gone(40));
        assert!(!c.reads_gone(35), "an earlier transaction's gone reads add nothing");
        assert_eq!(c.next_ask(90, 40, &copies), Some((NodeId(7), 41)), "the log is past it; the transaction is not");
        assert!(c.wants(41, 90, 40) && !c.wants(40, 90, 40), "a checkpoint past the transaction, behind the log");
        assert!(c.wants(91, 90, 40), "one past the log always");
        assert!(!c.wants(41, 90, 41), "the transaction finished after all");
        assert_eq!(c.next_ask(90, 41, &copies), None);
        assert!(!c.wants(41, 90, 40), "the need is gone");
        assert!(c.reads_gone(50));
        c.installed();
        assert_eq!(c.next_ask(90, 45, &copies), None, "installed: no need left");
    }
}
