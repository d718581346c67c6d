//! Effects as values: what a handler did, recorded as data.
//!
//! A driver hands a process one [`Recorder`] per event: the event's clock
//! readings ([`Now`], taken once, so a handler never sees time move under
//! it), the node's random stream and identifiers, and an [`Effects`] list
//! that every `Env` call appends to in call order (messages, timers set and
//! cancelled, appends, compactions, CPU charges, counters, observations,
//! completions). When the handler returns, the driver carries the list out:
//! the real runtime on sockets and the write-ahead log, and a test compares
//! it with what the paper says the transition does ([`Hand`] drives one
//! role by hand). The simulator has its own `Env`, which carries each effect
//! out on its virtual network and disk at the call, in the order this list
//! keeps.
//!
//! Order matters and is kept: a CPU charge delays only the messages recorded
//! after it, and the simulator's event sequence (its trace hash) follows
//! the order of sends and timers.

use crate::ids::{Lsn, NodeId, RequestId, Stream, TimerId};
use crate::process::{Env, Process, Protocol};
use crate::program::{Outcome, Program};
use crate::rng::Rng;
use crate::time::TrueTime;
use crate::topology::Topology;
use std::sync::Arc;

/// The clock readings of one event, taken once by its driver before the
/// handler runs (as quinn-proto's `handle_timeout(now)`).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Now {
    /// The node's wall clock (`Env::clock_ns`).
    pub clock_ns: u64,
    /// The node's monotonic clock (`Env::monotonic_ns`).
    pub monotonic_ns: u64,
    /// The TrueTime interval at this event (`Env::truetime`).
    pub truetime: TrueTime,
}

impl Now {
    /// Every clock at `t_ns`, TrueTime exact: for tests.
    pub fn at(t_ns: u64) -> Now {
        Now { clock_ns: t_ns, monotonic_ns: t_ns, truetime: TrueTime { earliest_ns: t_ns, latest_ns: t_ns } }
    }

    /// The same readings `ns` later.
    pub fn advanced(self, ns: u64) -> Now {
        Now {
            clock_ns: self.clock_ns + ns,
            monotonic_ns: self.monotonic_ns + ns,
            truetime: TrueTime { earliest_ns: self.truetime.earliest_ns + ns, latest_ns: self.truetime.latest_ns + ns },
        }
    }
}

/// One thing a handler did, in the order it did it.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect<M, R, T> {
    Send {
        to: NodeId,
        msg: M,
    },
    /// `timer` fires after `after_ns` of the node's monotonic clock.
    SetTimer {
        id: TimerId,
        after_ns: u64,
        timer: T,
    },
    CancelTimer {
        id: TimerId,
    },
    /// `record` appended to `stream` at `lsn`.
    Append {
        stream: Stream,
        lsn: Lsn,
        record: R,
    },
    /// `stream`'s records up to `upto` replaced by `snapshot`.
    Compact {
        stream: Stream,
        upto: Lsn,
        snapshot: R,
    },
    /// CPU time the model should charge (`Env::charge_cpu`).
    ChargeCpu {
        ns: u64,
    },
    /// Keys whose per-key CPU cost the model should charge
    /// (`Env::charge_keys`).
    ChargeKeys {
        keys: u64,
    },
    Count {
        counter: &'static str,
        delta: u64,
    },
    Observe {
        name: &'static str,
        value: u64,
    },
    Complete {
        request: RequestId,
        outcome: Outcome,
    },
}

/// Everything one handler did (or several, until a driver drains it).
#[derive(Clone, Debug)]
pub struct Effects<M, R, T> {
    list: Vec<Effect<M, R, T>>,
    /// Whether the handler read TrueTime (a driver may hold roles the
    /// protocol does not allow it to).
    pub read_truetime: bool,
}

impl<M, R, T> Default for Effects<M, R, T> {
    fn default() -> Self {
        Effects { list: Vec::new(), read_truetime: false }
    }
}

impl<M, R, T> Effects<M, R, T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, effect: Effect<M, R, T>) {
        self.list.push(effect);
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Every effect, in the order the handler made them.
    pub fn all(&self) -> &[Effect<M, R, T>] {
        &self.list
    }

    /// Takes every effect out in order, keeping the buffer for the next
    /// event; the TrueTime mark is reset.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Effect<M, R, T>> {
        self.read_truetime = false;
        self.list.drain(..)
    }

    /// The messages sent, in order.
    pub fn sends(&self) -> impl Iterator<Item = (NodeId, &M)> {
        self.list.iter().filter_map(|e| match e {
            Effect::Send { to, msg } => Some((*to, msg)),
            _ => None,
        })
    }

    /// The timers set, in order.
    pub fn timers_set(&self) -> impl Iterator<Item = (TimerId, u64, &T)> {
        self.list.iter().filter_map(|e| match e {
            Effect::SetTimer { id, after_ns, timer } => Some((*id, *after_ns, timer)),
            _ => None,
        })
    }

    /// The timers cancelled, in order.
    pub fn timers_cancelled(&self) -> impl Iterator<Item = TimerId> + '_ {
        self.list.iter().filter_map(|e| match e {
            Effect::CancelTimer { id } => Some(*id),
            _ => None,
        })
    }

    /// The records appended, in order, with their streams and LSNs.
    pub fn appends(&self) -> impl Iterator<Item = (Stream, Lsn, &R)> {
        self.list.iter().filter_map(|e| match e {
            Effect::Append { stream, lsn, record } => Some((*stream, *lsn, record)),
            _ => None,
        })
    }

    /// The compactions, in order.
    pub fn compactions(&self) -> impl Iterator<Item = (Stream, Lsn, &R)> {
        self.list.iter().filter_map(|e| match e {
            Effect::Compact { stream, upto, snapshot } => Some((*stream, *upto, snapshot)),
            _ => None,
        })
    }

    /// The client outcomes reported, in order.
    pub fn completions(&self) -> impl Iterator<Item = (RequestId, &Outcome)> {
        self.list.iter().filter_map(|e| match e {
            Effect::Complete { request, outcome } => Some((*request, outcome)),
            _ => None,
        })
    }

    /// The sum of what was added to `counter`.
    pub fn counted(&self, counter: &str) -> u64 {
        self.list
            .iter()
            .map(|e| match e {
                Effect::Count { counter: c, delta } if *c == counter => *delta,
                _ => 0,
            })
            .sum()
    }
}

/// The next identifiers a node hands out: timer ids and log sequence
/// numbers. A driver keeps one per node (LSNs continue the durable log's).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct NextIds {
    pub timer: u64,
    pub lsn: u64,
}

impl Default for NextIds {
    fn default() -> Self {
        NextIds { timer: 1, lsn: 1 }
    }
}

/// The `Env` of one event: the event's clock readings, the node's random
/// stream and identifiers, and the list its effects go to.
pub struct Recorder<'a, M, R, T> {
    me: NodeId,
    topology: &'a Topology,
    now: Now,
    rng: &'a mut Rng,
    ids: &'a mut NextIds,
    effects: &'a mut Effects<M, R, T>,
}

impl<'a, M, R, T> Recorder<'a, M, R, T> {
    pub fn new(
        me: NodeId,
        topology: &'a Topology,
        now: Now,
        rng: &'a mut Rng,
        ids: &'a mut NextIds,
        effects: &'a mut Effects<M, R, T>,
    ) -> Self {
        Recorder { me, topology, now, rng, ids, effects }
    }
}

impl<M, R, T> Env<M, R, T> for Recorder<'_, M, R, T> {
    fn me(&self) -> NodeId {
        self.me
    }
    fn topology(&self) -> &Topology {
        self.topology
    }
    fn clock_ns(&self) -> u64 {
        self.now.clock_ns
    }
    fn monotonic_ns(&self) -> u64 {
        self.now.monotonic_ns
    }
    fn truetime(&mut self) -> TrueTime {
        self.effects.read_truetime = true;
        self.now.truetime
    }
    fn send(&mut self, to: NodeId, msg: M) {
        self.effects.push(Effect::Send { to, msg });
    }
    fn set_timer(&mut self, after_ns: u64, timer: T) -> TimerId {
        let id = TimerId(self.ids.timer);
        self.ids.timer += 1;
        self.effects.push(Effect::SetTimer { id, after_ns, timer });
        id
    }
    fn cancel_timer(&mut self, id: TimerId) {
        self.effects.push(Effect::CancelTimer { id });
    }
    fn append_to(&mut self, stream: Stream, record: R) -> Lsn {
        let lsn = Lsn(self.ids.lsn);
        self.ids.lsn += 1;
        self.effects.push(Effect::Append { stream, lsn, record });
        lsn
    }
    fn compact_stream(&mut self, stream: Stream, upto: Lsn, snapshot: R) {
        assert!(upto.0 < self.ids.lsn, "compaction past the last appended record");
        self.effects.push(Effect::Compact { stream, upto, snapshot });
    }
    fn charge_cpu(&mut self, ns: u64) {
        self.effects.push(Effect::ChargeCpu { ns });
    }
    fn charge_keys(&mut self, keys: u64) {
        if keys > 0 {
            self.effects.push(Effect::ChargeKeys { keys });
        }
    }
    fn rng(&mut self) -> &mut Rng {
        self.rng
    }
    fn count(&mut self, counter: &'static str, delta: u64) {
        self.effects.push(Effect::Count { counter, delta });
    }
    fn observe(&mut self, name: &'static str, value: u64) {
        self.effects.push(Effect::Observe { name, value });
    }
    fn complete(&mut self, request: RequestId, outcome: Outcome) {
        self.effects.push(Effect::Complete { request, outcome });
    }
}

/// The effects of protocol `P`'s handlers.
pub type EffectsOf<P> = Effects<<P as Protocol>::Msg, <P as Protocol>::Record, <P as Protocol>::Timer>;

/// One node of protocol `P` driven by hand — its whole process, or one
/// role (`N`, any [`Process`] of `P`): a test feeds it events at chosen
/// times and compares the effects of each with what the paper says the
/// transition does. Nothing is delivered, fired or persisted unless the
/// test says so.
pub struct Hand<P: Protocol, N: Process<P> = <P as Protocol>::Node> {
    pub node: N,
    me: NodeId,
    topology: Arc<Topology>,
    /// The clock readings the next event sees.
    pub now: Now,
    rng: Rng,
    ids: NextIds,
    _protocol: std::marker::PhantomData<P>,
}

impl<P: Protocol, N: Process<P>> Hand<P, N> {
    /// Drives `node` (built by the test) as node `me`.
    pub fn new(node: N, topology: Arc<Topology>, me: NodeId, now: Now) -> Self {
        let rng = Rng::new(u64::from(me.0) + 1);
        Hand { node, me, topology, now, rng, ids: NextIds::default(), _protocol: std::marker::PhantomData }
    }

    pub fn me(&self) -> NodeId {
        self.me
    }

    /// Moves every clock `ns` forward.
    pub fn advance_ns(&mut self, ns: u64) {
        self.now = self.now.advanced(ns);
    }

    /// Sets every clock to `t_ns` (TrueTime exact).
    pub fn set_time_ns(&mut self, t_ns: u64) {
        self.now = Now::at(t_ns);
    }

    /// The LSN of the last append so far (0 if none).
    pub fn last_lsn(&self) -> Lsn {
        Lsn(self.ids.lsn - 1)
    }

    /// The identifier the next timer set gets (for exact effect lists).
    pub fn next_timer_id(&self) -> TimerId {
        TimerId(self.ids.timer)
    }

    /// Runs one handler, checks the node's invariants after it (as the
    /// simulator does), and returns what it did.
    pub fn step(&mut self, f: impl FnOnce(&mut N, &mut crate::process::Ctx<'_, P>)) -> EffectsOf<P> {
        let mut effects = Effects::new();
        let mut rec = Recorder::new(self.me, &self.topology, self.now, &mut self.rng, &mut self.ids, &mut effects);
        f(&mut self.node, &mut rec);
        self.node.check_invariants();
        effects
    }

    pub fn start(&mut self, durable: Vec<P::Record>) -> EffectsOf<P> {
        self.step(|n, ctx| n.on_start(ctx, durable))
    }

    pub fn message(&mut self, from: NodeId, msg: P::Msg) -> EffectsOf<P> {
        self.step(|n, ctx| n.on_message(ctx, from, msg))
    }

    pub fn timer(&mut self, timer: P::Timer) -> EffectsOf<P> {
        self.step(|n, ctx| n.on_timer(ctx, timer))
    }

    /// Everything appended so far is durable.
    pub fn persist_all(&mut self) -> EffectsOf<P> {
        let upto = self.last_lsn();
        self.step(|n, ctx| n.on_persisted(ctx, upto))
    }

    pub fn request(&mut self, request: RequestId, program: Program) -> EffectsOf<P> {
        self.step(|n, ctx| n.on_request(ctx, request, program))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Fx = Effects<u32, String, u8>;

    fn topology() -> Topology {
        let spec = crate::topology::ClusterSpec::one_region(1, 1);
        Topology::build(&spec, &[])
    }

    #[test]
    fn a_recorder_keeps_effects_in_call_order_and_one_clock_reading_per_event() {
        let topology = topology();
        let (mut rng, mut ids, mut fx) = (Rng::new(1), NextIds::default(), Fx::new());
        let now = Now::at(5_000);
        let mut rec = Recorder::new(NodeId(0), &topology, now, &mut rng, &mut ids, &mut fx);
        let first = rec.clock_ns();
        rec.send(NodeId(1), 7);
        rec.charge_cpu(300);
        let timer = rec.set_timer(1_000, 3);
        let lsn = rec.append("a".to_string());
        rec.cancel_timer(timer);
        rec.compact(lsn, "snap".to_string());
        assert_eq!(rec.clock_ns(), first, "the clock does not move inside a handler");
        assert_eq!(rec.truetime(), now.truetime);
        assert_eq!(
            fx.all(),
            &[
                Effect::Send { to: NodeId(1), msg: 7 },
                Effect::ChargeCpu { ns: 300 },
                Effect::SetTimer { id: TimerId(1), after_ns: 1_000, timer: 3 },
                Effect::Append { stream: Stream::MAIN, lsn: Lsn(1), record: "a".to_string() },
                Effect::CancelTimer { id: TimerId(1) },
                Effect::Compact { stream: Stream::MAIN, upto: Lsn(1), snapshot: "snap".to_string() },
            ]
        );
        assert!(fx.read_truetime);
        assert_eq!(ids, NextIds { timer: 2, lsn: 2 }, "identifiers continue at the next event");
        let drained: Vec<_> = fx.drain().collect();
        assert_eq!(drained.len(), 6);
        assert!(fx.is_empty() && !fx.read_truetime);
    }

    #[test]
    #[should_panic(expected = "compaction past the last appended record")]
    fn compacting_past_the_last_append_is_refused() {
        let topology = topology();
        let (mut rng, mut ids, mut fx) = (Rng::new(1), NextIds::default(), Fx::new());
        let mut rec = Recorder::new(NodeId(0), &topology, Now::at(0), &mut rng, &mut ids, &mut fx);
        rec.compact(Lsn(1), "snap".to_string());
    }
}
