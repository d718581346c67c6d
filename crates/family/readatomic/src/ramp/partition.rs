//! A RAMP partition: the primary of one shard ("Scalable Atomic
//! Visibility with RAMP Transactions", Algorithm 1 lines 1-13 and
//! Algorithm 2's server side). It installs prepared versions, raises
//! `lastCommit` on COMMIT, answers GETs by `lastCommit`, by timestamp
//! (RAMP-F) or by timestamp set (RAMP-S), collects overwritten versions,
//! and finishes transactions whose writer went silent between PREPARE and
//! COMMIT (the cooperative termination protocol, §4.6).
//!
//! Acknowledgements of PREPARE and COMMIT, and the termination protocol's
//! answers, leave only once what they acknowledge is durable. GETs are
//! answered at once: a version committed in memory and lost in a crash
//! was prepared durably everywhere first, so a reader repairing towards it
//! still finds its siblings.
//!
//! It must never make a version visible (raise `lastCommit` to it) unless
//! every participant of its transaction prepared it.

use super::messages::{Ask, GetId, Held, Item, Msg, PendingTxn, Prepare, Record, Timer, Ts};
use super::versions::Lookup;
use super::{Config, Variant};
use crate::common::events::{partition_timer, start_partition};
use crate::common::outcomes::{Known, Outcomes};
use crate::common::partition::{Base, Core};
use meridian_core::{Ctx, Env, Key, Lsn, NodeId, Process, Protocol, ShardId, Topology};
use meridian_mechanisms::twopc::Decision;
use std::sync::Arc;

/// The environment a partition acts through (either variant's).
pub(super) type PartitionCtx<'a> = dyn Env<Msg, Record, Timer> + 'a;

pub struct Partition {
    pub(super) base: Base<Msg>,
    pub(super) cfg: Config,
    /// The newest `aborted_remembered` transactions committed here: the
    /// termination protocol's proof that a participant held a transaction
    /// whose versions here were since overwritten and collected.
    pub(super) committed: Outcomes,
}

impl Partition {
    pub fn new(topo: Arc<Topology>, _me: NodeId, shard: ShardId, cfg: Config) -> Partition {
        let committed = Outcomes::new(cfg.aborted_remembered);
        Partition { base: Base::new(topo, shard, cfg.common, cfg.aborted_remembered), cfg, committed }
    }

    /// The versions (for tests and the end-of-run inspection).
    pub fn store(&self) -> &meridian_mechanisms::mvstore::MvStore<meridian_mechanisms::mvstore::Meta> {
        self.base.versions.store()
    }

    /// `lastCommit[key]`.
    pub fn last_commit(&self, key: Key) -> Option<Ts> {
        self.base.versions.last_commit(key)
    }

    /// Prepared transactions not committed here.
    pub fn pending(&self) -> usize {
        self.base.pending.len()
    }

    /// The keys of `keys` on this shard.
    fn mine(&self, keys: &[Key]) -> Vec<Key> {
        keys.iter().copied().filter(|k| self.base.topo.shard_of(*k) == self.base.shard).collect()
    }

    /// Algorithm 1 line 18: RAMP-F's metadata of the version of `key`,
    /// `I_tx − {i}`; RAMP-S keeps none (Algorithm 2).
    fn siblings(&self, keys: &[Key], key: Key) -> Arc<[Key]> {
        match self.cfg.variant {
            Variant::Fast => keys.iter().copied().filter(|k| *k != key).collect(),
            Variant::Small => Arc::from([]),
        }
    }

    // ---- state changes, shared by the handlers and by replay ----

    /// Algorithm 1 line 4: `versions.add(v)` for each write.
    pub(super) fn install(&mut self, p: &Prepare, now_ns: u64) {
        for (key, value) in &p.writes {
            debug_assert_eq!(self.base.topo.shard_of(*key), self.base.shard, "a prepare carries this shard's writes");
            let siblings = self.siblings(&p.keys, *key);
            self.base.versions.prepare(*key, p.ts, value.clone(), siblings);
        }
        let txn = PendingTxn { keys: Arc::clone(&p.keys), participants: p.participants.clone() };
        self.base.pending.add(p.ts, txn, now_ns);
    }

    /// Whether a version of `ts` is here, prepared or committed.
    fn holds(&self, ts: Ts, keys: &[Key]) -> bool {
        self.mine(keys).into_iter().any(|k| self.base.versions.holds(k, ts))
    }

    // ---- handlers ----

    /// Algorithm 1 lines 3-5 (PREPARE): install the versions, acknowledge
    /// once durable. A repeat is acknowledged again; a transaction the
    /// termination protocol refused is refused.
    fn on_prepare(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, p: Arc<Prepare>, now_ns: u64) {
        let ts = p.ts;
        if self.base.pending.is_aborted(ts) {
            return ctx.send(from, Msg::Refused { ts });
        }
        let committed_here = matches!(self.committed.lookup(ts), Known::Decided(_));
        if !self.base.pending.contains(ts) && !self.holds(ts, &p.keys) && !committed_here {
            if self.base.pending.is_full() {
                return ctx.count("prepares_shed", 1);
            }
            self.install(&p, now_ns);
            self.append(ctx, Record::Prepared(p));
        }
        self.send_durable(ctx, from, Msg::Prepared { ts });
    }

    /// Algorithm 1 lines 6-8 (COMMIT): commit the versions of `ts`,
    /// acknowledge once durable. A repeat (or a commit the termination
    /// protocol already made) is acknowledged again.
    fn on_commit(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, ts: Ts, now_ns: u64) {
        if self.base.pending.is_aborted(ts) {
            // Never sent: a client commits only what every participant
            // acknowledged, and this one refused it.
            debug_assert!(false, "a commit of a refused transaction");
            return;
        }
        if self.apply_commit(ts, now_ns) {
            self.append(ctx, Record::Committed { ts });
        }
        if self.base.topo.is_client(from) {
            self.send_durable(ctx, from, Msg::Committed { ts });
        }
    }

    /// Algorithm 1 lines 9-13 and Algorithm 2's GET (and LORA's, by the
    /// timestamps its client knows): the versions asked for, or `Gone` if
    /// one was collected.
    fn on_get(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, id: GetId, ask: Ask) {
        let items: Option<Vec<Item>> = match ask {
            Ask::Latest(keys) => Some(keys.into_iter().map(|k| self.base.versions.latest(k)).collect()),
            Ask::Exact(wants) => wants.into_iter().map(|(k, ts)| found(self.base.versions.exact(k, ts))).collect(),
            Ask::Among { keys, among } => {
                keys.into_iter().map(|k| found(self.base.versions.among(k, &among))).collect()
            }
            Ask::Known(wants) => {
                let items: Option<Vec<Item>> =
                    wants.iter().map(|(k, ts)| found(self.base.versions.known(*k, *ts))).collect();
                let replaced = items.iter().flatten().zip(&wants).filter(|(i, (_, ts))| i.ts != *ts).count();
                if replaced > 0 {
                    ctx.count("versions_replaced", replaced as u64);
                }
                items
            }
        };
        match items {
            Some(items) => ctx.send(from, Msg::Got { id, items }),
            None => {
                ctx.count("gone_answers", 1);
                ctx.send(from, Msg::Gone { id });
            }
        }
    }

    /// §4.6, the question: does this participant hold `ts`? One that
    /// never prepared it refuses it for good, durably, before answering.
    fn on_check_prepared(&mut self, ctx: &mut PartitionCtx<'_>, from: NodeId, ts: Ts, keys: Arc<[Key]>) {
        // Only a transaction prepared here counts as held: pending, its
        // versions still here, or remembered committed. A newer commit of
        // one of its keys proves nothing — a prepare may be lost on its
        // way here while later writers commit the key — and answering
        // `Prepared` then let the asker commit a transaction this
        // partition never had, which RAMP-S's second round (by timestamp
        // set, no sibling metadata) returned fractured.
        let held = if self.base.pending.is_aborted(ts) {
            Held::Aborted
        } else if self.base.pending.contains(ts) || self.holds(ts, &keys) {
            Held::Prepared
        } else {
            match self.committed.lookup(ts) {
                Known::Decided(_) => Held::Prepared,
                Known::Forgotten => {
                    ctx.count("ctp_forgotten", 1);
                    Held::Forgotten
                }
                Known::Unknown => {
                    self.base.pending.abort(ts);
                    self.append(ctx, Record::Aborted { ts });
                    Held::Aborted
                }
            }
        };
        self.send_durable(ctx, from, Msg::PrepareState { ts, held });
    }
}

impl Core for Partition {
    type Msg = Msg;

    fn base(&self) -> &Base<Msg> {
        &self.base
    }

    fn base_mut(&mut self) -> &mut Base<Msg> {
        &mut self.base
    }

    fn checkpoint(&self) -> Record {
        Record::Snapshot(Arc::new(self.snapshot()))
    }

    /// `recovery.rs`.
    fn restore(&mut self, durable: Vec<Record>, now_ns: u64) {
        Partition::restore(self, durable, now_ns);
    }

    /// Algorithm 1 lines 7-8: every version of `ts` here is committed and
    /// `lastCommit` raised to it. False if `ts` is not pending here.
    fn apply_commit(&mut self, ts: Ts, now_ns: u64) -> bool {
        let Some(txn) = self.base.pending.remove(ts) else { return false };
        for key in self.mine(&txn.keys) {
            let committed = self.base.versions.commit(key, ts, now_ns);
            debug_assert!(committed, "a pending transaction's versions are prepared here");
        }
        self.committed.record(ts, Decision::Commit);
        true
    }

    /// The termination protocol refused `ts`: its versions here go, and
    /// a prepare arriving later is refused.
    fn apply_abort(&mut self, ts: Ts) {
        if let Some(txn) = self.base.pending.abort(ts) {
            for key in self.mine(&txn.keys) {
                self.base.versions.abort(key, ts);
            }
        }
    }

    fn append(&mut self, ctx: &mut PartitionCtx<'_>, record: Record) -> Lsn {
        let lsn = ctx.append(record);
        self.base.appended(lsn);
        lsn
    }

    /// Sends `msg` once everything appended so far is durable.
    fn send_durable(&mut self, ctx: &mut PartitionCtx<'_>, to: NodeId, msg: Msg) {
        if let Some((to, msg)) = self.base.out.after_last((to, msg)) {
            ctx.send(to, msg);
        }
    }
}

fn found(l: Lookup) -> Option<Item> {
    match l {
        Lookup::Found(item) => Some(item),
        Lookup::Gone => None,
    }
}

impl<P: Protocol<Msg = Msg, Record = Record, Timer = Timer>> Process<P> for Partition {
    fn on_start(&mut self, ctx: &mut Ctx<'_, P>, durable: Vec<Record>) {
        start_partition(self, ctx, durable);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_, P>, from: NodeId, msg: Msg) {
        let now_ns = ctx.monotonic_ns();
        match msg {
            Msg::Prepare(p) => self.on_prepare(ctx, from, p, now_ns),
            Msg::Commit { ts } => self.on_commit(ctx, from, ts, now_ns),
            Msg::Get { id, ask } => self.on_get(ctx, from, id, ask),
            Msg::CheckPrepared { ts, keys } => self.on_check_prepared(ctx, from, ts, keys),
            Msg::PrepareState { ts, held } => self.on_prepare_state(ctx, from, ts, held, now_ns),
            Msg::Ship(s) => self.on_ship(ctx, from, s, now_ns),
            // A partition's own acknowledgements of a commit it forwarded.
            Msg::Committed { .. } => {}
            // Answers to clients.
            Msg::Prepared { .. } | Msg::Refused { .. } | Msg::Got { .. } | Msg::Gone { .. } => {}
        }
        self.after_event(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, P>, timer: Timer) {
        partition_timer(self, ctx, timer);
    }

    fn on_persisted(&mut self, ctx: &mut Ctx<'_, P>, upto: Lsn) {
        while let Some((to, msg)) = self.base.out.next_freed(upto) {
            ctx.send(to, msg);
        }
    }

    fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        out("versions", self.base.versions.versions());
        out("overwrites_waiting", self.base.versions.waiting());
        out("pending", self.base.pending.len());
        out("aborted", self.base.pending.aborted_len());
        out("held_replies", self.base.out.len());
    }

    fn check_invariants(&self) {
        self.base.check_invariants();
    }
}
