//! A participant's log and the state machine applied from it: the store,
//! the prepared transactions, the remembered outcomes.
//!
//! Every replica of a shard holds its participants' logs: with `lock_at =
//! "leader"` the shard's one Multi-Paxos log, which every replica applies
//! and the leader proposes to; with `lock_at = "home"` one log per home
//! partition, a group of the home replica alone, which the shard's other
//! replicas learn (`copies.rs`). Applying is the same everywhere and
//! depends on the log alone, so copies that applied the same slots hold
//! the same state. What the serving replica does about an applied command
//! (votes, released locks, answers) is its own: `apply` returns what
//! happened (`Applied`) and never sends.

use super::TwoPlPaxos;
use super::messages::{Cmd, PrepareRecord, ReplicaState};
use meridian_core::{Ctx, Key, Mapped, NodeId, TxnId};
use meridian_mechanisms::mvstore::MvStore;
use meridian_mechanisms::paxos::{MultiPaxos, PaxosEvent};
use meridian_mechanisms::scheduler::digest;
use meridian_mechanisms::twopc::{Decision, Outcomes, TxnStatus};
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

/// What applying a log command did, for the serving replica to act on.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Applied {
    /// Nothing to act on: a duplicate, a watermark.
    Nothing,
    /// `txn`'s prepare record took effect: it is prepared here.
    Prepared { txn: TxnId, coordinator: NodeId },
    /// `txn`'s prepare record could not take effect where the log placed it
    /// (see `Log::prepare_holds`): it is aborted here.
    Voided { txn: TxnId, coordinator: NodeId },
    /// `txn` is decided here.
    Decided { txn: TxnId, decision: Decision },
}

pub(super) struct Log {
    pub(super) paxos: MultiPaxos<Cmd, ReplicaState>,
    store: MvStore,
    /// Looked up, inserted and removed once per transaction at every
    /// replica, iterated only in id order (`prepared_records`,
    /// checkpoints): a hash map, sorted where it is iterated.
    prepared: FxHashMap<TxnId, Arc<PrepareRecord>>,
    /// The keys of `prepared`, for the conflict check of every applied
    /// prepare (derived: rebuilt on restore).
    prepared_keys: PreparedKeys,
    outcomes: Outcomes,
    applied_slot: u64,
    /// An empty event list kept for its allocation (`events`).
    spare_events: Vec<PaxosEvent<Cmd, ReplicaState>>,
}

impl Log {
    pub(super) fn new(paxos: MultiPaxos<Cmd, ReplicaState>, outcomes_kept: usize) -> Log {
        Log {
            paxos,
            store: MvStore::new(),
            prepared: FxHashMap::default(),
            prepared_keys: PreparedKeys::default(),
            outcomes: Outcomes::new(outcomes_kept),
            applied_slot: 0,
            spare_events: Vec::new(),
        }
    }

    pub(super) fn group(&self) -> u32 {
        self.paxos.group()
    }

    pub(super) fn store(&self) -> &MvStore {
        &self.store
    }

    pub(super) fn applied_slot(&self) -> u64 {
        self.applied_slot
    }

    pub(super) fn outcomes_len(&self) -> usize {
        self.outcomes.len()
    }

    pub(super) fn prepared_len(&self) -> usize {
        self.prepared.len()
    }

    pub(super) fn prepared_record(&self, txn: TxnId) -> Option<&Arc<PrepareRecord>> {
        self.prepared.get(&txn)
    }

    /// Every prepared, undecided transaction's record, in id order.
    pub(super) fn prepared_records(&self) -> Vec<&Arc<PrepareRecord>> {
        let mut records: Vec<&Arc<PrepareRecord>> = self.prepared.values().collect();
        records.sort_unstable_by_key(|r| r.txn);
        records
    }

    /// The decided outcome (or `Forgotten`), if any.
    pub(super) fn outcome(&self, txn: TxnId) -> Option<TxnStatus> {
        self.outcomes.lookup(txn)
    }

    /// What this log says of `txn`: prepared, decided, or nothing.
    pub(super) fn status(&self, txn: TxnId) -> Option<TxnStatus> {
        if self.prepared.contains_key(&txn) { Some(TxnStatus::Prepared) } else { self.outcomes.lookup(txn) }
    }

    /// Whether Paxos produced events since the last `events`.
    pub(super) fn has_events(&self) -> bool {
        self.paxos.has_events()
    }

    /// The events Paxos produced since the last call; hand the list back
    /// through `recycle_events` once drained, so that no message allocates
    /// one.
    pub(super) fn events(&mut self) -> Vec<PaxosEvent<Cmd, ReplicaState>> {
        let mut events = std::mem::take(&mut self.spare_events);
        self.paxos.swap_events(&mut events);
        events
    }

    pub(super) fn recycle_events(&mut self, events: Vec<PaxosEvent<Cmd, ReplicaState>>) {
        assert!(events.is_empty(), "a recycled event list is drained");
        self.spare_events = events;
    }

    /// Applies the command Paxos committed in `slot` (slots come in order).
    pub(super) fn apply_slot(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, slot: u64, cmd: Arc<Cmd>) -> Applied {
        assert!(slot > self.applied_slot, "slots apply in order");
        self.applied_slot = slot;
        self.apply(ctx, Arc::unwrap_or_clone(cmd))
    }

    fn apply(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, cmd: Cmd) -> Applied {
        match cmd {
            Cmd::Prepare(record) => {
                let txn = record.txn;
                if self.outcomes.lookup(txn).is_some() {
                    return Applied::Nothing; // decided (aborted) before its prepare: it stays so
                }
                if self.prepared.contains_key(&txn) {
                    return Applied::Nothing; // prepared already (a re-proposed record)
                }
                let coordinator = record.coordinator;
                if !self.prepare_holds(&record) {
                    // Aborted here, durably and alike at every copy (its
                    // coordinator, if it still waits, hears no).
                    ctx.count("prepares_voided", 1);
                    self.outcomes.record_undecided(txn, Decision::Abort);
                    return Applied::Voided { txn, coordinator };
                }
                self.prepared_keys.add(&record);
                self.prepared.insert(txn, record);
                Applied::Prepared { txn, coordinator }
            }
            Cmd::Commit(txn) => self.apply_decision(txn, Decision::Commit),
            Cmd::Abort(txn) => self.apply_decision(txn, Decision::Abort),
            Cmd::Retire(watermarks) => {
                self.outcomes.retire_all(&watermarks);
                Applied::Nothing
            }
        }
    }

    /// Whether a prepare record may still take effect where the log places
    /// it: what it read is still current (keys it writes included: an
    /// append's value was computed from the list it read), and no prepared,
    /// undecided transaction conflicts with it. A leader only proposes such
    /// records, but one proposed by a leader that was already deposed can
    /// still be chosen later (its slot adopted by the next leader's phase
    /// 1), its locks taken from a table nobody else honoured. Every replica
    /// decides this alike from the log.
    fn prepare_holds(&self, r: &PrepareRecord) -> bool {
        let current = r.reads.iter().all(|(k, version)| self.store.latest_version(*k) == *version);
        current && !self.prepared_keys.conflicts(r)
    }

    fn apply_decision(&mut self, txn: TxnId, decision: Decision) -> Applied {
        if self.outcomes.lookup(txn).is_some() {
            return Applied::Nothing; // a duplicate decision
        }
        let record = self.prepared.remove(&txn);
        if let Some(r) = &record {
            self.prepared_keys.remove(r);
        }
        match (decision, &record) {
            (Decision::Commit, Some(r)) => {
                for (key, value) in &r.writes {
                    self.store.put(*key, self.applied_slot, value.clone());
                }
            }
            (Decision::Commit, None) => {
                panic!("{txn} committed in log {} without a prepare record", self.group())
            }
            (Decision::Abort, _) => {}
        }
        self.outcomes.record_undecided(txn, decision);
        Applied::Decided { txn, decision }
    }

    /// Takes over a checkpoint's state (after a restart, or from a peer when
    /// this replica lagged behind a compacted log).
    pub(super) fn restore(&mut self, upto: u64, state: &ReplicaState) {
        self.store = state.store.clone();
        self.prepared = state.prepared.iter().map(|(txn, r)| (*txn, Arc::clone(r))).collect();
        self.prepared_keys = PreparedKeys::default();
        for r in state.prepared.values() {
            self.prepared_keys.add(r);
        }
        self.outcomes = state.outcomes.clone();
        self.applied_slot = upto;
    }

    /// Checkpoints the state (and compacts the log behind it) when Paxos
    /// says it is due.
    pub(super) fn checkpoint_if_due(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>) {
        if self.paxos.should_compact(self.store.keys() + self.outcomes.len()) {
            let state = ReplicaState {
                store: self.store.clone(),
                prepared: self.prepared.iter().map(|(txn, r)| (*txn, Arc::clone(r))).collect(),
                outcomes: self.outcomes.clone(),
            };
            self.paxos.compact(&mut Mapped::new(ctx), self.applied_slot, state);
        }
    }

    /// A digest of the data this log wrote (for the end-of-run comparison of
    /// copies).
    pub(super) fn data_digest(&self) -> u64 {
        digest(&self.store)
    }

    /// Between events: applied no further than Paxos delivered.
    pub(super) fn check_invariants(&self) {
        self.paxos.check_invariants();
        assert!(self.applied_slot <= self.paxos.delivered_upto(), "applied past what Paxos delivered");
        // A coordinator's watermark says every transaction below it is
        // decided at every participant: one retired while prepared here would
        // never hear its decision, and its locks would be held for good.
        for txn in self.prepared.keys().take(meridian_core::process::CHECKED_MAX) {
            assert_eq!(
                self.outcomes.lookup(*txn),
                None,
                "{txn:?} is prepared in log {} but has an outcome",
                self.group()
            );
        }
    }
}

/// How many prepared, undecided transactions read and write each key.
#[derive(Default, Debug)]
struct PreparedKeys {
    /// key -> (readers, writers)
    map: FxHashMap<Key, (u32, u32)>,
}

impl PreparedKeys {
    fn add(&mut self, r: &PrepareRecord) {
        for (k, _) in &r.reads {
            self.map.entry(*k).or_default().0 += 1;
        }
        for (k, _) in &r.writes {
            self.map.entry(*k).or_default().1 += 1;
        }
    }

    fn remove(&mut self, r: &PrepareRecord) {
        let keys = r.reads.iter().map(|(k, _)| (*k, true)).chain(r.writes.iter().map(|(k, _)| (*k, false)));
        for (k, read) in keys {
            // One probe: the entry found is the one removed.
            let Entry::Occupied(mut e) = self.map.entry(k) else { panic!("prepared key {k} is not counted") };
            let counts = e.get_mut();
            let n = if read { &mut counts.0 } else { &mut counts.1 };
            assert!(*n > 0, "key {k} counted below zero");
            *n -= 1;
            if *counts == (0, 0) {
                e.remove();
            }
        }
    }

    /// Whether `r` conflicts with a counted transaction.
    fn conflicts(&self, r: &PrepareRecord) -> bool {
        let at = |k: &Key| self.map.get(k).copied().unwrap_or_default();
        r.reads.iter().any(|(k, _)| at(k).1 > 0) || r.writes.iter().any(|(k, _)| at(k) != (0, 0))
    }
}
