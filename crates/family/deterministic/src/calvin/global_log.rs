//! The global log (Calvin §3.1; SLOG §4.2): batch identifiers ordered by
//! one Multi-Paxos group whose members are the sequencers, one per region.
//! Only the identifiers go through Paxos; every batch's contents reach the
//! sequencers separately (`sequencer.rs`) and are durable at a majority of
//! them before its identifier is proposed, so an ordered batch can always
//! be fetched while a majority is up.
//!
//! Each sequencer materializes the log: it walks the ordered identifiers in
//! slot order and, once it holds a batch's contents, appends the batch's
//! transactions as the next log position. A batch ordered twice (its
//! sequencer asked again after a lost answer) and a transaction submitted
//! twice (its client retried) are dropped at their second appearance. The
//! walk depends on the ordered identifiers alone, so every sequencer
//! materializes the same positions, and every region executes the same log.

use super::messages::{Batch, BatchId, LogEntry, Txn};
use meridian_core::{Ctx, Mapped, ShardId, TxnId};
use meridian_mechanisms::paxos::{MultiPaxos, PaxosEvent};
use meridian_mechanisms::recent::RecentSet;
use rustc_hash::FxHashSet;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::Calvin;

/// One materialized log position: the transactions of one batch, each
/// with its index in the batch.
type Position = Arc<Vec<(u32, Arc<Txn>)>>;

pub(super) struct GlobalLog {
    pub(super) paxos: MultiPaxos<BatchId>,
    /// Every batch's contents this sequencer holds.
    contents: BTreeMap<BatchId, Arc<Batch>>,
    /// Ordered identifiers not yet materialized (the first waits for its
    /// contents).
    ordered: VecDeque<BatchId>,
    /// The materialized log, position 0 first.
    positions: Vec<Position>,
    seen_batches: FxHashSet<BatchId>,
    seen_txns: RecentSet<TxnId>,
    /// Ids this leader proposed in its current term (proposed once).
    proposed: FxHashSet<BatchId>,
}

/// What materializing found.
#[derive(Default)]
pub(super) struct Materialized {
    /// The new positions, in order.
    pub range: std::ops::Range<u64>,
    /// The batches that took a position or were dropped as repeats.
    pub batches: Vec<BatchId>,
}

impl GlobalLog {
    pub(super) fn new(paxos: MultiPaxos<BatchId>, txns_remembered: usize) -> GlobalLog {
        GlobalLog {
            paxos,
            contents: BTreeMap::new(),
            ordered: VecDeque::new(),
            positions: Vec::new(),
            seen_batches: FxHashSet::default(),
            seen_txns: RecentSet::new(txns_remembered),
            proposed: FxHashSet::default(),
        }
    }

    /// Keeps a batch's contents; false if they were already here.
    pub(super) fn store(&mut self, batch: Arc<Batch>) -> bool {
        if self.contents.contains_key(&batch.id) {
            return false;
        }
        self.contents.insert(batch.id, batch);
        true
    }

    pub(super) fn contents(&self, id: &BatchId) -> Option<&Arc<Batch>> {
        self.contents.get(id)
    }

    /// Whether the batch has taken its position (or been dropped as a repeat).
    pub(super) fn is_ordered(&self, id: &BatchId) -> bool {
        self.seen_batches.contains(id)
    }

    /// Ordered batches whose contents the log waits for (at most `limit`).
    pub(super) fn missing(&self, limit: usize) -> Vec<BatchId> {
        self.ordered.iter().filter(|id| !self.contents.contains_key(id)).take(limit).copied().collect()
    }

    pub(super) fn next_pos(&self) -> u64 {
        self.positions.len() as u64
    }

    /// The global log's leader proposes `id` (once per term).
    pub(super) fn order(&mut self, ctx: &mut Ctx<'_, Calvin>, id: BatchId) {
        if self.is_ordered(&id) || !self.paxos.is_leader() || !self.proposed.insert(id) {
            return;
        }
        let _ = self.paxos.propose(&mut Mapped::new(ctx), id);
    }

    /// Takes the Paxos events: committed identifiers join the walk.
    pub(super) fn take_events(&mut self) {
        for event in self.paxos.drain_events() {
            match event {
                PaxosEvent::Committed { value, .. } => self.ordered.push_back(*value),
                PaxosEvent::LeaderReady { .. } | PaxosEvent::Deposed => self.proposed.clear(),
                PaxosEvent::Restore { .. } => unreachable!("the global log is never compacted"),
            }
        }
    }

    /// Walks the ordered identifiers whose contents are here into new
    /// positions, dropping repeats.
    pub(super) fn materialize(&mut self, ctx: &mut Ctx<'_, Calvin>) -> Materialized {
        let first = self.next_pos();
        let mut batches = Vec::new();
        while let Some(id) = self.ordered.front().copied() {
            let Some(batch) = self.contents.get(&id).cloned() else { break };
            self.ordered.pop_front();
            batches.push(id);
            if !self.seen_batches.insert(id) {
                ctx.count("duplicates_dropped", 1);
                continue;
            }
            let txns = self.fresh_txns(ctx, &batch);
            if !txns.is_empty() {
                self.positions.push(Arc::new(txns));
            }
        }
        Materialized { range: first..self.next_pos(), batches }
    }

    /// The batch's transactions not seen earlier in the log, with their
    /// indexes in the batch.
    fn fresh_txns(&mut self, ctx: &mut Ctx<'_, Calvin>, batch: &Batch) -> Vec<(u32, Arc<Txn>)> {
        let mut txns = Vec::with_capacity(batch.txns.len());
        for (i, txn) in batch.txns.iter().enumerate() {
            if self.seen_txns.insert(txn.id) {
                txns.push((i as u32, Arc::clone(txn)));
            } else {
                ctx.count("duplicates_dropped", 1);
            }
        }
        txns
    }

    /// Position `pos` as `shard` sees it.
    pub(super) fn entry(&self, pos: u64, shard: ShardId) -> Option<LogEntry> {
        let txns = self.positions.get(pos as usize)?;
        let mine = txns.iter().filter(|(_, t)| t.shards.binary_search(&shard).is_ok()).cloned().collect();
        Some(LogEntry { pos, txns: mine })
    }

    pub(super) fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("batch_contents", self.contents.len());
        out("log_positions", self.positions.len());
        out("ordered_unmaterialized", self.ordered.len());
        self.paxos.state_sizes(out);
    }

    pub(super) fn check_invariants(&self) {
        self.paxos.check_invariants();
        for p in self.positions.iter().rev().take(meridian_core::process::CHECKED_MAX) {
            assert!(!p.is_empty(), "a materialized position holds transactions");
            assert!(p.windows(2).all(|w| w[0].0 < w[1].0), "a position keeps its batch's order");
        }
    }
}
