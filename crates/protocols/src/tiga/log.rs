//! A Tiga server's log list (Figure 4): entries in log order, by position,
//! with an index from transaction to position. Positions count from 0 and
//! never move backwards; a follower's unsynced suffix may be replaced when
//! the leader's log says otherwise (§3.7).

use super::messages::LogEntry;
use meridian_core::TxnId;
use rustc_hash::FxHashMap;

#[derive(Clone, Debug, Default)]
pub struct TigaLog {
    entries: Vec<LogEntry>,
    pos: FxHashMap<TxnId, u64>,
}

impl TigaLog {
    pub fn new() -> TigaLog {
        TigaLog::default()
    }

    /// Number of entries (the next position).
    pub fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, pos: u64) -> Option<&LogEntry> {
        self.entries.get(pos as usize)
    }

    pub fn position(&self, id: TxnId) -> Option<u64> {
        self.pos.get(&id).copied()
    }

    pub fn entry_of(&self, id: TxnId) -> Option<&LogEntry> {
        self.position(id).and_then(|p| self.get(p))
    }

    pub fn push(&mut self, e: LogEntry) -> u64 {
        assert!(!self.pos.contains_key(&e.body.id), "{} logged twice", e.body.id);
        let p = self.len();
        self.pos.insert(e.body.id, p);
        self.entries.push(e);
        p
    }

    /// Entries from `from` on.
    pub fn suffix(&self, from: u64) -> &[LogEntry] {
        &self.entries[(from as usize).min(self.entries.len())..]
    }

    pub fn all(&self) -> &[LogEntry] {
        &self.entries
    }

    /// Removes the entry at `pos`, shifting the rest down.
    pub fn remove_at(&mut self, pos: u64) -> LogEntry {
        let e = self.entries.remove(pos as usize);
        self.pos.remove(&e.body.id);
        self.reindex_from(pos);
        e
    }

    /// Inserts an entry at `pos`, shifting the rest up.
    pub fn insert_at(&mut self, pos: u64, e: LogEntry) {
        assert!(!self.pos.contains_key(&e.body.id), "{} logged twice", e.body.id);
        self.entries.insert(pos as usize, e);
        self.reindex_from(pos);
    }

    fn reindex_from(&mut self, pos: u64) {
        for (i, e) in self.entries.iter().enumerate().skip(pos as usize) {
            self.pos.insert(e.body.id, i as u64);
        }
    }

    /// Replaces everything from `from` on; returns what was there.
    pub fn replace_suffix(&mut self, from: u64, new: Vec<LogEntry>) -> Vec<LogEntry> {
        assert!(from <= self.len(), "replacing past the end");
        let old: Vec<LogEntry> = self.entries.drain(from as usize..).collect();
        for e in &old {
            self.pos.remove(&e.body.id);
        }
        for e in new {
            self.push(e);
        }
        old
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

    #[test]
    fn suffix_replacement_reindexes() {
        let mut log = TigaLog::new();
        log.push(e(1, 10));
        log.push(e(2, 20));
        log.push(e(3, 30));
        let old = log.replace_suffix(1, vec![e(3, 31), e(2, 20)]);
        assert_eq!(old.len(), 2);
        assert_eq!(log.position(TxnId { node: NodeId(0), seq: 3 }), Some(1));
        assert_eq!(log.entry_of(TxnId { node: NodeId(0), seq: 3 }).unwrap().t, 31);
        assert_eq!(log.len(), 3);
    }
}
