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
//!
//! Positions are never renumbered: the log keeps positions `base..` and
//! forgets the ones before `base` — with the contents of the batches that
//! took them — once its region's replicas need them no more (`truncate`,
//! `sequencer.rs` decides when). Its state as of a slot (`LogState`) is the
//! Paxos group's checkpoint, and what a sequencer that asks for contents
//! every peer has forgotten adopts instead (`install`).

use super::messages::{Batch, BatchId, LogEntry, LogState, Position, SeenBatches, Txn};
use meridian_core::{Ctx, Mapped, ShardId};
use meridian_mechanisms::client_floors::ClientFloors;
use meridian_mechanisms::paxos::{MultiPaxos, PaxosEvent};
use rustc_hash::FxHashSet;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::Calvin;

pub(super) struct GlobalLog {
    pub(super) paxos: MultiPaxos<BatchId, LogState>,
    /// Every batch's contents this sequencer keeps: those not materialized
    /// yet, and those whose position is kept.
    contents: BTreeMap<BatchId, Arc<Batch>>,
    /// Ordered identifiers not yet materialized (the first waits for its
    /// contents), with their slots.
    ordered: VecDeque<(u64, BatchId)>,
    /// The last slot the log has taken (or an adopted state covered).
    slot: u64,
    /// The first position kept.
    base: u64,
    /// The materialized log, positions `base..`.
    positions: VecDeque<Position>,
    /// Batches materialized, each with the position it took (or, taking
    /// none, the next one), from `base` on: what `truncate` forgets.
    materialized: VecDeque<(u64, BatchId)>,
    seen_batches: SeenBatches,
    seen_txns: ClientFloors<()>,
    /// Ids this leader proposed in its current term (proposed once).
    proposed: FxHashSet<BatchId>,
}

impl GlobalLog {
    pub(super) fn new(paxos: MultiPaxos<BatchId, LogState>, txns_remembered: usize) -> GlobalLog {
        GlobalLog {
            paxos,
            contents: BTreeMap::new(),
            ordered: VecDeque::new(),
            slot: 0,
            base: 0,
            positions: VecDeque::new(),
            materialized: VecDeque::new(),
            seen_batches: SeenBatches::default(),
            seen_txns: ClientFloors::new(txns_remembered),
            proposed: FxHashSet::default(),
        }
    }

    /// Keeps a batch's contents; false if they were already here, or the
    /// batch was materialized and forgotten.
    pub(super) fn store(&mut self, batch: Arc<Batch>) -> bool {
        if self.contents.contains_key(&batch.id) || self.forgotten(&batch.id) {
            return false;
        }
        self.contents.insert(batch.id, batch);
        true
    }

    pub(super) fn contents(&self, id: &BatchId) -> Option<&Arc<Batch>> {
        self.contents.get(id)
    }

    /// How many batches' contents are kept.
    pub(super) fn kept_len(&self) -> usize {
        self.contents.len()
    }

    /// Every batch kept, in id order.
    pub(super) fn kept(&self) -> impl Iterator<Item = &Arc<Batch>> {
        self.contents.values()
    }

    /// Whether the batch has taken its position (or been dropped as a repeat).
    pub(super) fn is_ordered(&self, id: &BatchId) -> bool {
        self.seen_batches.contains(id)
    }

    /// Whether the batch took its position and its contents are forgotten.
    pub(super) fn forgotten(&self, id: &BatchId) -> bool {
        self.is_ordered(id) && !self.contents.contains_key(id)
    }

    /// Ordered batches whose contents the log waits for (at most `limit`).
    pub(super) fn missing(&self, limit: usize) -> Vec<BatchId> {
        let waiting = self.ordered.iter().map(|(_, id)| id);
        waiting.filter(|id| !self.contents.contains_key(id) && !self.is_ordered(id)).take(limit).copied().collect()
    }

    pub(super) fn next_pos(&self) -> u64 {
        self.base + self.positions.len() as u64
    }

    pub(super) fn base(&self) -> u64 {
        self.base
    }

    /// The global log's leader proposes `id` (once per term).
    pub(super) fn order(&mut self, ctx: &mut Ctx<'_, Calvin>, id: BatchId) {
        if self.is_ordered(&id) || !self.paxos.is_leader() || !self.proposed.insert(id) {
            return;
        }
        let _ = self.paxos.propose(&mut Mapped::new(ctx), id);
    }

    /// Takes the Paxos events: committed identifiers join the walk, a
    /// checkpoint (a restart's, or a peer's for a member that lagged behind
    /// the compacted log) is adopted. True if a state was adopted.
    pub(super) fn take_events(&mut self) -> bool {
        let mut adopted = false;
        for event in self.paxos.drain_events() {
            match event {
                PaxosEvent::Committed { slot, value } if slot > self.slot => {
                    self.ordered.push_back((slot, *value));
                    self.slot = slot;
                }
                PaxosEvent::Committed { .. } => {} // covered by an adopted state
                PaxosEvent::LeaderReady { .. } | PaxosEvent::Deposed => self.proposed.clear(),
                PaxosEvent::Restore { state, .. } => adopted |= self.install(&state),
            }
        }
        // No-op slots deliver nothing: the log has taken them too.
        self.slot = self.slot.max(self.paxos.delivered_upto());
        adopted
    }

    /// Walks the ordered identifiers whose contents are here into new
    /// positions, dropping repeats (a repeat needs no contents: its batch
    /// was taken before). Returns the batches that took a position or were
    /// dropped as repeats.
    pub(super) fn materialize(&mut self, ctx: &mut Ctx<'_, Calvin>) -> Vec<BatchId> {
        let mut batches = Vec::new();
        while let Some(&(_, id)) = self.ordered.front() {
            if self.seen_batches.contains(&id) {
                self.ordered.pop_front();
                batches.push(id);
                ctx.count("duplicates_dropped", 1);
                continue;
            }
            let Some(batch) = self.contents.get(&id).cloned() else { break };
            self.ordered.pop_front();
            batches.push(id);
            self.seen_batches.insert(id);
            self.materialized.push_back((self.next_pos(), id));
            let txns = self.fresh_txns(ctx, &batch);
            if !txns.is_empty() {
                self.positions.push_back(Arc::new(txns));
            }
        }
        batches
    }

    /// The batch's transactions not seen earlier in the log, with their
    /// indexes in the batch.
    fn fresh_txns(&mut self, ctx: &mut Ctx<'_, Calvin>, batch: &Batch) -> Vec<(u32, Arc<Txn>)> {
        let mut txns = Vec::with_capacity(batch.txns.len());
        for (i, txn) in batch.txns.iter().enumerate() {
            if self.seen_txns.insert(txn.id, ()) {
                txns.push((i as u32, Arc::clone(txn)));
            } else {
                ctx.count("duplicates_dropped", 1);
            }
            self.seen_txns.raise(txn.id.node, txn.client_floor);
        }
        txns
    }

    /// Position `pos` as `shard` sees it (`None`: not materialized, or
    /// forgotten).
    pub(super) fn entry(&self, pos: u64, shard: ShardId) -> Option<LogEntry> {
        let txns = self.positions.get(pos.checked_sub(self.base)? as usize)?;
        let mine = txns.iter().filter(|(_, t)| t.shards.binary_search(&shard).is_ok()).cloned().collect();
        Some(LogEntry { pos, txns: mine })
    }

    /// Forgets the positions before `below` and the contents of the
    /// batches that took them; returns how many positions it forgot.
    pub(super) fn truncate(&mut self, below: u64) -> u64 {
        let below = below.min(self.next_pos());
        let forgotten = below.saturating_sub(self.base);
        for _ in 0..forgotten {
            self.positions.pop_front();
        }
        self.base = self.base.max(below);
        while let Some(&(pos, id)) = self.materialized.front() {
            if pos >= self.base {
                break;
            }
            self.materialized.pop_front();
            self.contents.remove(&id);
        }
        forgotten
    }

    /// The log as of the last slot taken.
    pub(super) fn state(&self) -> LogState {
        LogState {
            slot: self.slot,
            base: self.base,
            positions: self.positions.iter().cloned().collect(),
            ordered: self.ordered.iter().copied().collect(),
            materialized: self.materialized.iter().copied().collect(),
            seen_batches: self.seen_batches.clone(),
            seen_txns: self.seen_txns.clone(),
        }
    }

    /// Adopts a state that has materialized further than this log (a
    /// restart's checkpoint, or a peer's): its positions, what it has
    /// seen, the identifiers it waits for and those taken here after its
    /// slot. Contents it has forgotten are dropped. A state behind this
    /// log still brings the identifiers of the slots this log has not
    /// taken (a Paxos checkpoint's, whose slots are gone): every one it has
    /// not materialized waits in its `ordered`. False if not adopted.
    pub(super) fn install(&mut self, s: &LogState) -> bool {
        let ahead = s.next_pos() > self.next_pos() || (s.next_pos() == self.next_pos() && s.slot > self.slot);
        if !ahead {
            let slot = self.slot;
            self.ordered.extend(s.ordered.iter().copied().filter(|(at, _)| *at > slot));
            self.slot = self.slot.max(s.slot);
            return false;
        }
        let later: Vec<(u64, BatchId)> = self.ordered.iter().copied().filter(|(slot, _)| *slot > s.slot).collect();
        self.ordered = s.ordered.iter().copied().chain(later).collect();
        self.slot = self.slot.max(s.slot);
        self.base = s.base;
        self.positions = s.positions.iter().cloned().collect();
        self.materialized = s.materialized.iter().copied().collect();
        self.seen_batches = s.seen_batches.clone();
        self.seen_txns = s.seen_txns.clone();
        let kept: FxHashSet<BatchId> = self.materialized.iter().map(|(_, id)| *id).collect();
        let seen = &self.seen_batches;
        self.contents.retain(|id, _| !seen.contains(id) || kept.contains(id));
        true
    }

    /// Entries of the state a checkpoint copies.
    pub(super) fn state_entries(&self) -> usize {
        self.positions.len() + self.ordered.len() + self.materialized.len() + self.seen_batches.ahead()
    }

    pub(super) fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("batch_contents", self.contents.len());
        out("log_positions", self.positions.len());
        out("ordered_unmaterialized", self.ordered.len());
        out("batches_materialized", self.materialized.len());
        out("batches_seen_ahead", self.seen_batches.ahead());
        out("txns_remembered", self.seen_txns.len());
        self.paxos.state_sizes(out);
    }

    pub(super) fn check_invariants(&self) {
        self.paxos.check_invariants();
        assert!(self.materialized.front().is_none_or(|(pos, _)| *pos >= self.base), "materialized kept past base");
        assert!(self.materialized.back().is_none_or(|(pos, _)| *pos <= self.next_pos()), "materialized past the log");
        assert!(self.ordered.iter().all(|(slot, _)| *slot <= self.slot), "ordered past the slot taken");
        for p in self.positions.iter().rev().take(meridian_core::process::CHECKED_MAX) {
            assert!(!p.is_empty(), "a materialized position holds transactions");
            assert!(p.windows(2).all(|w| w[0].0 < w[1].0), "a position keeps its batch's order");
        }
        for (_, id) in self.materialized.iter().rev().take(meridian_core::process::CHECKED_MAX) {
            assert!(self.seen_batches.contains(id), "a materialized batch is seen");
        }
    }
}
