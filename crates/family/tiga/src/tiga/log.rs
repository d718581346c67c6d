//! A Tiga server's log list (Figure 4): entries in log order, by position,
//! with an index from transaction to position. Positions count from 0 and
//! never move backwards; a follower's unsynced suffix may be replaced when
//! the leader's log says otherwise (§3.7). Positions below `base` are folded
//! into the server's checkpoint (§4): committed, executed, and the same at
//! every server in every later view, so only the suffix is kept.
//!
//! Beside each entry the log keeps this server's last reply for it
//! ([`Replied`]), which moves with the entry: execution up to the
//! commit-point finds it by position, in order, where a map by transaction
//! would miss the caches once per entry, and a fold hands it to the
//! checkpoint's memory with the entry.

use super::messages::LogEntry;
use meridian_core::{OpResult, TxnId};
use meridian_mechanisms::seq_index::SeqIndex;

/// The last fast reply of a logged transaction, for resubmissions.
#[derive(Clone, Debug)]
pub(super) struct Replied {
    pub t: u64,
    /// The hash its fast reply carried; `None` if this server sent none
    /// (an entry it learned from the log or a new leader's replay).
    pub hash: Option<u128>,
    /// The results: a leader's from its execution in this view (in log
    /// order, so final), or else from execution up to the commit-point.
    pub result: Option<Vec<OpResult>>,
    /// The view whose leader executed it, if a leader did.
    pub led_view: Option<u64>,
}

impl Replied {
    /// An entry at `t` this server sent no reply for.
    pub fn none(t: u64) -> Replied {
        Replied { t, hash: None, result: None, led_view: None }
    }
}

#[derive(Clone, Debug, Default)]
pub struct TigaLog {
    base: u64,
    entries: Vec<LogEntry>,
    /// This server's last reply for each entry (`entries[i]`'s is
    /// `replies[i]`), if any.
    replies: Vec<Option<Replied>>,
    /// Entries with a reply.
    replied: usize,
    /// Each held entry's position, per coordinator in id order: a new
    /// entry is indexed at the end of its coordinator's run, and a fresh
    /// submission's "logged already?" (Appendix B's at-most-once check,
    /// on every submission, nearly every one new) is one comparison with
    /// it — where a hash map took a cache miss for each.
    pos: SeqIndex<u64>,
}

impl TigaLog {
    pub fn new() -> TigaLog {
        TigaLog::default()
    }

    /// A log whose positions below `base` are folded, holding `entries`
    /// from `base` on.
    pub fn from_base(base: u64, entries: Vec<LogEntry>) -> TigaLog {
        let n = entries.len();
        let mut log = TigaLog {
            base,
            entries: Vec::with_capacity(n),
            replies: Vec::with_capacity(n),
            replied: 0,
            pos: SeqIndex::new(),
        };
        for e in entries {
            log.push(e);
        }
        log
    }

    /// The first position still held (everything below is folded).
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The next position (folded entries included).
    pub fn len(&self) -> u64 {
        self.base + self.entries.len() as u64
    }

    /// Entries held (folded ones aside).
    pub fn held(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is held (folded ones aside).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, pos: u64) -> Option<&LogEntry> {
        pos.checked_sub(self.base).and_then(|i| self.entries.get(i as usize))
    }

    pub fn position(&self, id: TxnId) -> Option<u64> {
        self.pos.get(id).copied()
    }

    pub fn entry_of(&self, id: TxnId) -> Option<&LogEntry> {
        self.position(id).and_then(|p| self.get(p))
    }

    pub fn push(&mut self, e: LogEntry) -> u64 {
        let p = self.len();
        let before = self.pos.insert(e.body.id, p);
        assert!(before.is_none(), "{} logged twice", e.body.id);
        self.entries.push(e);
        self.replies.push(None);
        p
    }

    /// This server's last reply for a logged transaction.
    pub(super) fn reply(&self, id: TxnId) -> Option<&Replied> {
        let i = self.position(id)? - self.base;
        self.replies[i as usize].as_ref()
    }

    /// Notes this server's reply for a logged transaction.
    pub(super) fn set_reply(&mut self, id: TxnId, replied: Replied) {
        let p = self.position(id).unwrap_or_else(|| panic!("a reply for {id}, which is not logged"));
        let slot = &mut self.replies[(p - self.base) as usize];
        self.replied += usize::from(slot.is_none());
        *slot = Some(replied);
    }

    /// The entry at `pos` and its reply, `none` noted first if it has none.
    pub(super) fn entry_and_reply(
        &mut self,
        pos: u64,
        none: impl FnOnce(&LogEntry) -> Replied,
    ) -> Option<(&LogEntry, &mut Replied)> {
        let i = pos.checked_sub(self.base)? as usize;
        let (e, slot) = (self.entries.get(i)?, &mut self.replies[i]);
        if slot.is_none() {
            self.replied += 1;
        }
        Some((e, slot.get_or_insert_with(|| none(e))))
    }

    /// Entries with a reply noted.
    pub(super) fn replies_held(&self) -> usize {
        self.replied
    }

    /// Takes the replies `old` holds for transactions this log holds: a
    /// log that replaces another keeps what was replied for the entries it
    /// keeps, wherever they now stand.
    fn adopt_replies(&mut self, old: &mut TigaLog) {
        for (e, r) in self.entries.iter().zip(&mut self.replies) {
            if let Some(p) = old.position(e.body.id) {
                *r = old.replies[(p - old.base) as usize].take();
            }
        }
        self.replied = self.replies.iter().filter(|r| r.is_some()).count();
    }

    fn check_replies(&self) {
        debug_assert_eq!(self.entries.len(), self.replies.len(), "a reply slot per entry");
        debug_assert!(self.replied <= self.replies.len(), "more replies than entries");
    }

    /// Held entries from `from` on (from the base if `from` is folded).
    pub fn suffix(&self, from: u64) -> &[LogEntry] {
        let i = from.saturating_sub(self.base).min(self.entries.len() as u64);
        &self.entries[i as usize..]
    }

    /// Held entries in `[from, to)`, clamped to what is held.
    pub fn range(&self, from: u64, to: u64) -> &[LogEntry] {
        let lo = from.saturating_sub(self.base).min(self.entries.len() as u64) as usize;
        let hi = to.saturating_sub(self.base).min(self.entries.len() as u64) as usize;
        &self.entries[lo..hi.max(lo)]
    }

    /// Every held entry.
    pub fn all(&self) -> &[LogEntry] {
        &self.entries
    }

    /// Moves the entry at `from` back to `to` (at most `from`) as `e`, the
    /// same transaction (perhaps at another timestamp), shifting those in
    /// between up; returns the entry it replaces. The log is as if the
    /// entry were removed and `e` inserted at `to`, but only the positions
    /// in between are reindexed: a follower placing its leader's order
    /// (§3.7) moves an entry a few places back in an unsynced suffix of
    /// hundreds, each of which a removal and an insertion would reindex
    /// twice.
    pub fn move_back(&mut self, from: u64, to: u64, e: LogEntry) -> LogEntry {
        assert!(to >= self.base, "moving to folded position {to}");
        assert!(to <= from, "moving position {from} forward to {to}");
        let (i, j) = ((to - self.base) as usize, (from - self.base) as usize);
        assert_eq!(self.entries[j].body.id, e.body.id, "moving an entry as another transaction");
        let old = std::mem::replace(&mut self.entries[j], e);
        self.entries[i..=j].rotate_right(1);
        // The same transaction: its reply moves with it.
        self.replies[i..=j].rotate_right(1);
        for (k, moved) in self.entries[i..=j].iter().enumerate() {
            self.pos.insert(moved.body.id, to + k as u64);
        }
        old
    }

    /// Inserts an entry at `pos`, shifting the rest up.
    pub fn insert_at(&mut self, pos: u64, e: LogEntry) {
        assert!(pos >= self.base, "inserting at folded position {pos}");
        assert!(!self.pos.contains(e.body.id), "{} logged twice", e.body.id);
        self.entries.insert((pos - self.base) as usize, e);
        self.replies.insert((pos - self.base) as usize, None);
        self.reindex_from(pos);
    }

    fn reindex_from(&mut self, pos: u64) {
        let skip = (pos - self.base) as usize;
        for (i, e) in self.entries.iter().enumerate().skip(skip) {
            self.pos.insert(e.body.id, self.base + i as u64);
        }
    }

    /// Replaces everything from `from` on; returns what was there.
    pub fn replace_suffix(&mut self, from: u64, new: Vec<LogEntry>) -> Vec<LogEntry> {
        assert!(from >= self.base, "replacing at {from}, below the base {}", self.base);
        assert!(from <= self.len(), "replacing at {from}, past the end {}", self.len());
        let old: Vec<LogEntry> = self.entries.drain((from - self.base) as usize..).collect();
        let dropped = self.replies.drain(self.entries.len()..).filter(|r| r.is_some()).count();
        self.replied -= dropped;
        for e in &old {
            self.pos.remove(e.body.id);
        }
        for e in new {
            self.push(e);
        }
        self.check_replies();
        old
    }

    /// Folds every position below `upto`: returns those entries, in order,
    /// with their replies.
    pub(super) fn fold_to(&mut self, upto: u64) -> Vec<(LogEntry, Option<Replied>)> {
        assert!(upto >= self.base, "folding to {upto}, below the base {}", self.base);
        assert!(upto <= self.len(), "folding to {upto}, past the end {}", self.len());
        let n = (upto - self.base) as usize;
        let folded: Vec<(LogEntry, Option<Replied>)> = self.entries.drain(..n).zip(self.replies.drain(..n)).collect();
        if 2 * n >= self.pos.len() {
            // Most of the log goes (a fold takes every executed entry): one
            // pass over the index, where a removal per entry would read each
            // entry's body, long out of the cache, for its id, and shift each
            // coordinator's run once per removal.
            self.pos.retain(|_, p| *p >= upto);
        } else {
            for (e, _) in &folded {
                self.pos.remove(e.body.id);
            }
        }
        self.replied -= folded.iter().filter(|(_, r)| r.is_some()).count();
        debug_assert_eq!(self.pos.len(), self.entries.len(), "every entry held, and only those, has a position");
        self.base = upto;
        self.check_replies();
        debug_assert_eq!(self.replied, self.replies.iter().filter(|r| r.is_some()).count(), "replies counted");
        folded
    }
}

/// A server's log with its two points (§3.7): the sync-point (how far the
/// log agrees with its leader's) and the commit-point (how far it is known
/// committed). Every change goes through a method that keeps their order,
/// `base ≤ commit-point ≤ sync-point ≤ length`, and asserts it; entries
/// move only past the sync-point. Reading goes through [`TigaLog`].
#[derive(Debug, Default)]
pub struct ShardLog {
    log: TigaLog,
    sync_point: u64,
    commit_point: u64,
}

impl std::ops::Deref for ShardLog {
    type Target = TigaLog;

    fn deref(&self) -> &TigaLog {
        &self.log
    }
}

impl ShardLog {
    pub fn new() -> ShardLog {
        ShardLog::default()
    }

    pub fn entries(&self) -> &TigaLog {
        &self.log
    }

    pub fn sync_point(&self) -> u64 {
        self.sync_point
    }

    pub fn commit_point(&self) -> u64 {
        self.commit_point
    }

    fn check(&self) {
        assert!(self.log.base() <= self.commit_point, "the commit-point {} below the base", self.commit_point);
        assert!(self.commit_point <= self.sync_point, "committed past the sync-point");
        assert!(self.sync_point <= self.log.len(), "the sync-point past the log's end");
        self.log.check_replies();
    }

    /// Replaces the whole log and both points (a restart, a checkpoint
    /// adopted, a new view's log installed). Replies go with the entries the
    /// new log keeps; the others' are forgotten.
    pub fn reset(&mut self, mut log: TigaLog, sync_point: u64, commit_point: u64) {
        log.adopt_replies(&mut self.log);
        *self = ShardLog { log, sync_point, commit_point };
        self.check();
    }

    /// Notes this server's reply for a logged transaction.
    pub(super) fn set_reply(&mut self, id: TxnId, replied: Replied) {
        self.log.set_reply(id, replied);
    }

    /// The entry at `pos` and its reply, `none` noted first if it has none.
    pub(super) fn entry_and_reply(
        &mut self,
        pos: u64,
        none: impl FnOnce(&LogEntry) -> Replied,
    ) -> Option<(&LogEntry, &mut Replied)> {
        self.log.entry_and_reply(pos, none)
    }

    /// Appends past the sync-point; returns the position.
    pub fn push(&mut self, e: LogEntry) -> u64 {
        self.log.push(e)
    }

    /// The log agrees with its leader's up to `pos`.
    pub fn sync_to(&mut self, pos: u64) {
        assert!(pos >= self.sync_point, "the sync-point moves back from {} to {pos}", self.sync_point);
        self.sync_point = pos;
        self.check();
    }

    /// The commit-point rises to `pos` (if below).
    pub fn commit_to(&mut self, pos: u64) {
        self.commit_point = self.commit_point.max(pos);
        self.check();
    }

    /// Moves the unsynced entry at `from` back to `to`, at or past the
    /// sync-point, as `e` (see [`TigaLog::move_back`]).
    pub fn move_unsynced(&mut self, from: u64, to: u64, e: LogEntry) -> LogEntry {
        assert!(from >= self.sync_point, "removing synced position {from}");
        assert!(to >= self.sync_point, "inserting at synced position {to}");
        self.log.move_back(from, to, e)
    }

    /// Inserts an entry at `pos`, at or past the sync-point.
    pub fn insert_unsynced(&mut self, pos: u64, e: LogEntry) {
        assert!(pos >= self.sync_point, "inserting at synced position {pos}");
        self.log.insert_at(pos, e);
    }

    /// Folds every position below `upto` (at most the commit-point): returns
    /// those entries, in order, with their replies.
    pub(super) fn fold_to(&mut self, upto: u64) -> Vec<(LogEntry, Option<Replied>)> {
        assert!(upto <= self.commit_point, "folding past the commit-point");
        let folded = self.log.fold_to(upto);
        self.check();
        folded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tiga::messages::TxnBody;
    use meridian_core::{NodeId, Program, ShardId};
    use std::sync::Arc;

    fn e(seq: u64, t: u64) -> LogEntry {
        let body = TxnBody {
            id: TxnId { node: NodeId(0), seq },
            coordinator: NodeId(0),
            program: Program::default(),
            shards: vec![ShardId(0)],
        };
        LogEntry { body: Arc::new(body), t }
    }

    fn id(seq: u64) -> TxnId {
        TxnId { node: NodeId(0), seq }
    }

    #[test]
    fn suffix_replacement_reindexes() {
        let mut log = TigaLog::new();
        log.push(e(1, 10));
        log.push(e(2, 20));
        log.push(e(3, 30));
        let old = log.replace_suffix(1, vec![e(3, 31), e(2, 20)]);
        assert_eq!(old.len(), 2);
        assert_eq!(log.position(id(3)), Some(1));
        assert_eq!(log.entry_of(id(3)).unwrap().t, 31);
        assert_eq!(log.len(), 3);
    }

    #[test]
    fn folding_keeps_positions_and_forgets_the_prefix() {
        let mut log = TigaLog::new();
        for s in 1..=4 {
            log.push(e(s, 10 * s));
        }
        let folded = log.fold_to(2);
        assert_eq!(folded.iter().map(|(x, _)| x.body.id.seq).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!((log.base(), log.len()), (2, 4));
        assert_eq!(log.position(id(1)), None, "folded entries are not indexed");
        assert_eq!(log.position(id(3)), Some(2));
        assert!(log.get(1).is_none());
        assert_eq!(log.get(3).unwrap().body.id, id(4));
        assert_eq!(log.suffix(0).len(), 2, "a folded start reads from the base");
        assert_eq!(log.range(1, 3).len(), 1);
        log.insert_at(2, e(9, 25));
        assert_eq!(log.position(id(3)), Some(3));
        let old = log.move_back(4, 2, e(4, 45));
        assert_eq!((old.body.id, old.t), (id(4), 40));
        let order: Vec<(u64, u64)> = log.all().iter().map(|x| (x.body.id.seq, x.t)).collect();
        assert_eq!(order, vec![(4, 45), (9, 25), (3, 30)], "as if removed and inserted");
        for (seq, pos) in [(4, 2), (9, 3), (3, 4)] {
            assert_eq!(log.position(id(seq)), Some(pos));
        }
        assert_eq!(log.push(e(5, 50)), 5);
        let rebuilt = TigaLog::from_base(2, log.all().to_vec());
        assert_eq!(rebuilt.position(id(5)), Some(5));
    }

    #[test]
    fn folding_a_few_entries_or_most_of_the_log_leaves_exactly_the_held_ones_indexed() {
        let mut log = TigaLog::new();
        for s in 1..=20 {
            log.push(e(s, 10 * s));
        }
        let check = |log: &TigaLog| {
            for s in 1..=20 {
                let expected = (s > log.base()).then(|| s - 1);
                assert_eq!(log.position(id(s)), expected, "txn {s} with the base at {}", log.base());
            }
        };
        assert_eq!(log.fold_to(1).len(), 1, "one of twenty: removed one by one");
        check(&log);
        assert_eq!(log.fold_to(15).len(), 14, "most of the rest: one pass over the table");
        check(&log);
        assert_eq!(log.fold_to(20).len(), 5);
        check(&log);
    }

    fn reply(t: u64) -> Replied {
        Replied { t, hash: Some(u128::from(t)), result: None, led_view: None }
    }

    /// A reply belongs to its transaction, wherever the log moves it: a
    /// resubmission is answered with the hash this server replied with.
    #[test]
    fn a_reply_moves_with_its_entry_and_leaves_with_it() {
        let mut log = TigaLog::new();
        for s in 1..=4 {
            log.push(e(s, 10 * s));
        }
        log.set_reply(id(2), reply(20));
        log.set_reply(id(4), reply(40));
        assert_eq!(log.replies_held(), 2);
        log.move_back(3, 1, e(4, 41));
        log.insert_at(1, e(9, 5));
        assert_eq!(log.reply(id(4)).map(|r| r.t), Some(40), "moved back with its entry");
        assert_eq!(log.reply(id(2)).map(|r| r.t), Some(20), "shifted up with its entry");
        assert!(log.reply(id(9)).is_none() && log.reply(id(1)).is_none());
        let (first, r) = log.entry_and_reply(0, |e| reply(e.t + 1)).expect("held");
        assert_eq!((first.body.id, r.t), (id(1), 11), "a missing reply is noted first");
        assert_eq!(log.replies_held(), 3);
        // Positions: 1, 9, 4, 2, 3.
        let folded = log.fold_to(3);
        let ids: Vec<(u64, Option<u64>)> =
            folded.iter().map(|(e, r)| (e.body.id.seq, r.as_ref().map(|r| r.t))).collect();
        assert_eq!(ids, vec![(1, Some(11)), (9, None), (4, Some(40))], "folded with their replies");
        assert_eq!(log.replies_held(), 1);
        let mut shard = ShardLog::new();
        shard.reset(log.clone(), 5, 3);
        let kept = TigaLog::from_base(3, vec![e(3, 30), e(2, 20), e(7, 70)]);
        shard.reset(kept, 3, 3);
        assert_eq!(shard.reply(id(2)).map(|r| r.t), Some(20), "a new log keeps the replies of the entries it keeps");
        assert_eq!(shard.replies_held(), 1);
        log.replace_suffix(3, vec![e(8, 80)]);
        assert_eq!((log.replies_held(), log.reply(id(2)).is_none()), (0, true), "replaced entries take theirs along");
    }

    #[test]
    fn the_points_keep_their_order() {
        let mut log = ShardLog::new();
        log.push(e(1, 10));
        log.push(e(2, 20));
        log.sync_to(2);
        log.commit_to(1);
        log.commit_to(0);
        assert_eq!((log.commit_point(), log.sync_point()), (1, 2), "the commit-point only rises");
        assert_eq!(log.fold_to(1).len(), 1);
        assert_eq!(log.base(), 1);
    }

    #[test]
    #[should_panic(expected = "committed past the sync-point")]
    fn committing_past_the_sync_point_is_refused() {
        let mut log = ShardLog::new();
        log.push(e(1, 10));
        log.commit_to(1);
    }

    #[test]
    #[should_panic(expected = "the sync-point past the log's end")]
    fn syncing_past_the_end_is_refused() {
        let mut log = ShardLog::new();
        log.sync_to(1);
    }
}
