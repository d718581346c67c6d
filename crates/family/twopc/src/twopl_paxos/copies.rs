//! A replica's copies of its shard's other home partitions (`lock_at =
//! "home"`): each home's log, learned from its home replica as a Multi-Paxos
//! learner (the home pushes what it chose at every tick; the copy fetches
//! what it missed, or a snapshot past the home's checkpoint), applied to a
//! state machine of its own (`Log`). Nothing here serves a transaction:
//! the home replica alone locks, reads and prepares its granules, and its
//! writes reach the other copies asynchronously, in log order — SLOG-B's
//! and NuoDB's replication. The copies keep the data on every replica of
//! the shard, and the end of every simulated run compares them. (Learning
//! the log by slot, rather than as `batch_stream`'s numbered batches, lets
//! a copy fetch any gap from the home's durable log, also after the home
//! restarted, and a snapshot past its checkpoint.)
//!
//! Each copy's durable records go to a stream of its own, so that each
//! checkpoints alone (`Stream(1 + home)`: the replica's own log keeps the
//! main stream).

use super::TwoPlPaxos;
use super::log::Log;
use super::messages::{Cmd, ReplicaState};
use meridian_core::{Ctx, Lsn, Mapped, NodeId};
use meridian_mechanisms::paxos::{PaxosEvent, PaxosMsg, PaxosRecordBody, PaxosTimer};
use std::collections::BTreeMap;

/// The learned logs, by group (the home partition's participant number).
pub(super) struct Copies {
    logs: BTreeMap<u32, Log>,
}

impl Copies {
    /// No copies: `lock_at = "leader"`, where the replica's own log is the
    /// shard's.
    pub(super) fn none() -> Copies {
        Copies { logs: BTreeMap::new() }
    }

    /// Copies of these learners' logs.
    pub(super) fn of(logs: Vec<Log>) -> Copies {
        assert!(logs.iter().all(|l| l.paxos.is_learner()), "a copy learns its log");
        Copies { logs: logs.into_iter().map(|l| (l.group(), l)).collect() }
    }

    pub(super) fn holds(&self, group: u32) -> bool {
        self.logs.contains_key(&group)
    }

    pub(super) fn logs(&self) -> impl Iterator<Item = &Log> {
        self.logs.values()
    }

    /// Starts every copy from its durable records (by group).
    pub(super) fn start(
        &mut self,
        ctx: &mut Ctx<'_, TwoPlPaxos>,
        mut records: BTreeMap<u32, Vec<PaxosRecordBody<Cmd, ReplicaState>>>,
    ) {
        for (group, log) in self.logs.iter_mut() {
            log.paxos.start(&mut Mapped::new(ctx), records.remove(group).unwrap_or_default());
        }
        assert!(records.is_empty(), "records of a log this replica does not hold: {:?}", records.keys());
    }

    pub(super) fn on_message(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, from: NodeId, m: PaxosMsg<Cmd, ReplicaState>) {
        if let Some(log) = self.logs.get_mut(&m.group) {
            log.paxos.on_message(&mut Mapped::new(ctx), from, m);
        }
    }

    pub(super) fn on_timer(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, t: PaxosTimer) {
        let log = self.logs.get_mut(&t.group).expect("a copy's own tick");
        log.paxos.on_timer(&mut Mapped::new(ctx), t);
    }

    pub(super) fn on_persisted(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>, upto: Lsn) {
        for log in self.logs.values_mut() {
            log.paxos.on_persisted(&mut Mapped::new(ctx), upto);
        }
    }

    /// Applies what each copy learned, in its log's order.
    #[inline]
    pub(super) fn drain(&mut self, ctx: &mut Ctx<'_, TwoPlPaxos>) {
        // After every event of every replica: with `lock_at = "leader"`
        // there are no copies, and walking the empty map cost more than
        // this test.
        if self.logs.is_empty() {
            return;
        }
        for log in self.logs.values_mut() {
            while log.has_events() {
                let mut events = log.events();
                for ev in events.drain(..) {
                    match ev {
                        // The home replica acts on what its log says; a copy
                        // only keeps the state.
                        PaxosEvent::Committed { slot, value } => {
                            log.apply_slot(ctx, slot, value);
                        }
                        PaxosEvent::Restore { upto, state } => log.restore(upto, &state),
                        PaxosEvent::LeaderReady { .. } | PaxosEvent::Deposed => {
                            unreachable!("a copy learns its log and never leads it")
                        }
                    }
                }
                log.recycle_events(events);
                log.checkpoint_if_due(ctx);
            }
        }
    }

    /// Every copy learns (never leads) and applied no further than delivered.
    pub(super) fn check_invariants(&self) {
        for (group, log) in &self.logs {
            assert_eq!(*group, log.group(), "a copy filed under another log");
            assert!(log.paxos.is_learner(), "copy {group} is not a learner");
            log.check_invariants();
        }
    }

    /// Entries of the copies' structures, summed over the copies.
    pub(super) fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
        let mut slots = 0;
        let mut awaiting = 0;
        for log in self.logs.values() {
            log.paxos.state_sizes(&mut |name, n| match name {
                "paxos_slots" => slots += n,
                _ => awaiting += n,
            });
        }
        out("copy_store_keys", self.logs.values().map(|l| l.store().keys()).sum());
        out("copy_prepared", self.logs.values().map(Log::prepared_len).sum());
        out("copy_outcomes", self.logs.values().map(Log::outcomes_len).sum());
        out("copy_paxos_slots", slots);
        out("copy_paxos_awaiting_durable", awaiting);
    }
}
