//! The sans-IO contract between protocols and drivers.
//!
//! A protocol is a set of deterministic state machines ([`Process`]), one per
//! node. A process never reads a real clock, opens a socket, spawns a thread
//! or touches a file: it is handed events (start or restart with its durable
//! records, a message, a timer, a persistence acknowledgement, a client
//! request) and acts only through its [`Env`]: its own clock, a TrueTime
//! interval, `send`, timers, a durable log whose appends are acknowledged by a
//! later `on_persisted` event, seeded randomness, counters, and `complete`
//! for client outcomes. The simulator and the real runtime implement `Env`
//! and drive the very same process code.
//!
//! Shared mechanisms (the Paxos log, 2PC, ...) are written against `Env` with
//! their own message, record and timer types; a protocol embeds them through
//! [`Mapped`], which converts those types into the protocol's with `From`.

use crate::ids::{Lsn, NodeId, RegionId, RequestId, ShardId, Stream, TimerId};
use crate::latency::LatencyMatrix;
use crate::params::{ParamDoc, Params};
use crate::program::{Outcome, Program};
use crate::rng::Rng;
use crate::time::TrueTime;
use crate::topology::{ServiceSpec, Topology};
use serde::{Serialize, de::DeserializeOwned};
use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::Arc;

/// What can travel between nodes or into the durable log: cloneable (the
/// network may duplicate), printable, and serializable for the real runtime.
pub trait Message: Clone + Debug + Send + Serialize + DeserializeOwned + 'static {}
impl<T: Clone + Debug + Send + Serialize + DeserializeOwned + 'static> Message for T {}

/// What a timer carries back to its process when it fires.
pub trait TimerTag: Clone + Debug + Send + 'static {}
impl<T: Clone + Debug + Send + 'static> TimerTag for T {}

/// The consistency level a protocol promises; the checker holds every run of
/// the protocol to it.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Consistency {
    StrictSerializable,
    Serializable,
    /// Read atomicity with read-your-writes.
    ReadAtomic,
    /// Read atomicity without read-your-writes: what RAMP-F with one-phase
    /// writes (RAMP-OPW, a parameter of `ramp-f`) promises.
    ReadAtomicNoRyw,
    /// Transactional causal consistency with convergence.
    Causal,
    /// Transactional causal consistency without convergence: sessions may
    /// order concurrent versions differently (what Eiger-PORT promises).
    CausalNoConvergence,
}

impl Consistency {
    pub fn name(self) -> &'static str {
        match self {
            Consistency::StrictSerializable => "strict-serializable",
            Consistency::Serializable => "serializable",
            Consistency::ReadAtomic => "read-atomic",
            Consistency::ReadAtomicNoRyw => "read-atomic-no-ryw",
            Consistency::Causal => "causal",
            Consistency::CausalNoConvergence => "causal-no-convergence",
        }
    }
}

/// Everything a process can do. Implemented by the simulator and by the
/// real runtime; components see it through [`Mapped`].
pub trait Env<M, R, T> {
    /// This node.
    fn me(&self) -> NodeId;
    fn topology(&self) -> &Topology;
    /// The node's own wall clock in ns: possibly offset, drifting, jumping.
    fn clock_ns(&self) -> u64;
    /// The node's monotonic clock in ns: elapsed local time, drifting with
    /// the node's oscillator but never jumping or going back (what K2's
    /// TTLs, commit waits and epoch timers measure). Its origin is
    /// arbitrary; only differences mean anything.
    fn monotonic_ns(&self) -> u64;
    /// A TrueTime interval that contains the true time (width 2ε). Only
    /// roles the protocol allows ([`Protocol::may_read_truetime`]) may ask;
    /// the simulator fails a run in which another one does.
    fn truetime(&mut self) -> TrueTime;
    /// Sends a message; delivery is not guaranteed (loss, partitions,
    /// crashes) and not ordered unless the network is FIFO.
    fn send(&mut self, to: NodeId, msg: M);
    /// Fires `timer` after `after_ns` of this node's monotonic clock.
    fn set_timer(&mut self, after_ns: u64, timer: T) -> TimerId;
    /// Cancels a pending timer; cancelling a fired or unknown one is a no-op.
    fn cancel_timer(&mut self, id: TimerId);
    /// Appends a record to `stream` of the node's durable log. It is
    /// durable only once `on_persisted` reports an LSN at or past the one
    /// returned (LSNs are one sequence over every stream); a crash before
    /// that loses it.
    fn append_to(&mut self, stream: Stream, record: R) -> Lsn;
    /// Replaces every durable record of `stream` up to `upto` by
    /// `snapshot`, atomically once persisted (a checkpoint); the other
    /// streams' records stay. A restart sees every stream's latest snapshot
    /// first (in stream order), then the remaining records in LSN order; a
    /// protocol tells its streams' records apart by their variants.
    fn compact_stream(&mut self, stream: Stream, upto: Lsn, snapshot: R);
    /// Appends to [`Stream::MAIN`].
    fn append(&mut self, record: R) -> Lsn {
        self.append_to(Stream::MAIN, record)
    }
    /// Compacts [`Stream::MAIN`].
    fn compact(&mut self, upto: Lsn, snapshot: R) {
        self.compact_stream(Stream::MAIN, upto, snapshot)
    }
    /// Charges `ns` of CPU time to this handler, on top of the per-event
    /// and per-byte costs the simulator's model adds by itself: work the
    /// model should see (a sequencer's reordering, a dependency-graph
    /// search). Messages sent after it leave that much later, and the node
    /// starts its next event that much later. The real runtime spends real
    /// CPU instead and ignores it.
    fn charge_cpu(&mut self, _ns: u64) {}
    /// Charges the model's CPU cost per key (`[cpu]`'s `*_ns_per_key` for
    /// this node's role) for `keys` keys the handler looked up in its store,
    /// installed there, or assembled into a transaction's answer: the work
    /// that grows with a transaction's size whatever its messages' count. A
    /// protocol that calls it says so with [`Protocol::CHARGES_KEYS`]. The
    /// real runtime ignores it.
    fn charge_keys(&mut self, _keys: u64) {}
    /// The node's seeded random stream.
    fn rng(&mut self) -> &mut Rng;
    /// Adds to one of the protocol's report counters.
    fn count(&mut self, counter: &'static str, delta: u64);
    /// Records one sample of a protocol-side distribution (a visibility
    /// delay, a batch size, a batch wait); the report gives its
    /// percentiles under `observations`. The name carries the unit
    /// (`batch_wait_us`).
    fn observe(&mut self, name: &'static str, value: u64);
    /// Reports the outcome of a client request made to this node.
    fn complete(&mut self, request: RequestId, outcome: Outcome);
}

/// The context handed to a process of protocol `P`.
pub type Ctx<'a, P> = dyn Env<<P as Protocol>::Msg, <P as Protocol>::Record, <P as Protocol>::Timer> + 'a;

/// The transaction shapes a protocol runs (RAMP, RA-NOC and Eiger run only
/// read-only and write-only transactions; one-shot protocols run
/// procedures only when every part runs where its data lives).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Shapes {
    /// Transactions that both read and write (otherwise read-only and
    /// write-only ones only).
    pub read_write: bool,
    pub procedures: ProcedureSupport,
}

/// Which procedures a protocol runs.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ProcedureSupport {
    None,
    /// Procedures whose every part is anchored (one-shot).
    Anchored,
    /// Any procedure (interactive protocols, or ones exchanging reads).
    Any,
}

impl Shapes {
    /// Every transaction: interactive protocols.
    pub const GENERAL: Shapes = Shapes { read_write: true, procedures: ProcedureSupport::Any };
    /// Read-write transactions and anchored procedures: one-shot protocols.
    pub const ONE_SHOT: Shapes = Shapes { read_write: true, procedures: ProcedureSupport::Anchored };
    /// Read-only and write-only transactions of per-key operations.
    pub const READ_ONLY_WRITE_ONLY: Shapes = Shapes { read_write: false, procedures: ProcedureSupport::None };

    /// Whether a protocol of these shapes runs a workload that needs
    /// `needs`; the error says what it lacks.
    pub fn check(self, needs: Shapes) -> Result<(), String> {
        if needs.read_write && !self.read_write {
            return Err("runs only read-only and write-only transactions, and this workload has read-write ones".into());
        }
        let rank = |p: ProcedureSupport| match p {
            ProcedureSupport::None => 0,
            ProcedureSupport::Anchored => 1,
            ProcedureSupport::Any => 2,
        };
        if rank(needs.procedures) > rank(self.procedures) {
            return Err(match self.procedures {
                ProcedureSupport::None => "runs no procedures, and this workload's transactions are procedures".into(),
                _ => "runs only procedures whose parts run where their data lives, and this workload's do not".into(),
            });
        }
        Ok(())
    }
}

/// What a run gives a protocol to build its nodes from.
#[derive(Clone, Debug)]
pub struct Deployment {
    pub topology: Arc<Topology>,
    pub params: Params,
    /// The TrueTime bound ε served by `Env::truetime`, in µs.
    pub epsilon_us: u64,
    /// The nominal round trips between regions (the preset or the file's
    /// matrix; the run's jitter and faults come on top): protocols choose
    /// by it (the nearest replica, a computing node's region).
    pub latency: Arc<LatencyMatrix>,
}

impl Deployment {
    /// The nominal round trip between two regions, in ms.
    pub fn rtt_ms(&self, a: RegionId, b: RegionId) -> f64 {
        self.latency.rtt_ms(a.index(), b.index())
    }

    /// Of `candidates`, the node nearest to `from` by nominal round trip
    /// (the first of equals).
    pub fn nearest(&self, from: RegionId, candidates: &[NodeId]) -> Option<NodeId> {
        let rtt = |n: &NodeId| self.rtt_ms(from, self.topology.region_of(*n));
        candidates.iter().copied().min_by(|a, b| rtt(a).total_cmp(&rtt(b)))
    }

    /// The replica of `shard` nearest to `from`.
    pub fn nearest_replica(&self, shard: ShardId, from: RegionId) -> NodeId {
        self.nearest(from, self.topology.replicas(shard)).expect("every shard has replicas")
    }
}

/// A commit protocol: its name, promise, types, parameters and how to build
/// the process of each node.
pub trait Protocol: Sized + 'static {
    /// The CONTRACT name (`2pl-paxos`, `tiga`, ...).
    const NAME: &'static str;
    const CONSISTENCY: Consistency;
    type Msg: Message;
    type Record: Message;
    type Timer: TimerTag;
    type Node: Process<Self>;

    /// The transaction shapes the protocol runs.
    const SHAPES: Shapes = Shapes::GENERAL;

    /// What a deployment with these parameters promises: `CONSISTENCY`,
    /// unless a parameter gives something up (RAMP-OPW's one-phase writes
    /// give up read-your-writes). Every run is checked at this level.
    fn consistency_for(_params: &Params) -> Consistency {
        Self::CONSISTENCY
    }

    /// Whether this protocol charges its per-key work through
    /// [`Env::charge_keys`]: a run with a per-key CPU cost is refused for
    /// one that does not, whose keys would be free beside its rivals'.
    const CHARGES_KEYS: bool = false;

    /// Whether nodes of this role may read TrueTime (K2's data nodes have
    /// only unsynchronized clocks: its oracles may, they may not).
    fn may_read_truetime(_role: &crate::topology::Role) -> bool {
        true
    }

    /// The protocol's parameters with defaults and documentation; any other
    /// key in `[protocol.params]` is rejected.
    fn params() -> &'static [ParamDoc] {
        &[]
    }

    /// Every counter the protocol emits through `Env::count` (its shared
    /// mechanisms' included), documented; the simulator fails a run that
    /// counts one not listed.
    fn counters() -> Vec<crate::params::CounterDoc> {
        Vec::new()
    }

    /// Extra service nodes the protocol needs (view manager, sequencer, ...).
    fn services(_params: &Params) -> Vec<ServiceSpec> {
        Vec::new()
    }

    /// Builds the process of one node. Called once per node at the start of a
    /// run and again at every restart (the new process gets its durable
    /// records in `on_start`). Errors name the offending parameter.
    fn build(deployment: &Deployment, node: NodeId) -> Result<Self::Node, String>;
}

/// One node's state machine.
pub trait Process<P: Protocol> {
    /// The node starts: `durable` is empty on the first start and holds the
    /// records persisted before a crash on a restart (snapshot first).
    fn on_start(&mut self, ctx: &mut Ctx<'_, P>, durable: Vec<P::Record>);
    fn on_message(&mut self, ctx: &mut Ctx<'_, P>, from: NodeId, msg: P::Msg);
    fn on_timer(&mut self, ctx: &mut Ctx<'_, P>, timer: P::Timer);
    /// Every record appended with an LSN `<= upto` is now durable.
    fn on_persisted(&mut self, _ctx: &mut Ctx<'_, P>, _upto: Lsn) {}
    /// A client asks this node (a client/coordinator node) to run a
    /// transaction; the process answers once with `Env::complete`.
    fn on_request(&mut self, ctx: &mut Ctx<'_, P>, request: RequestId, _program: Program) {
        ctx.complete(request, Outcome::Aborted { reason: crate::program::AbortReason::Rejected });
    }
    /// The number of entries in each structure whose size follows the
    /// transactions (outcome tables, logs, locks, attempts), by name: what a
    /// long run's memory is made of. The runtime exports them as gauges,
    /// the simulator reports their peaks; each must stay bounded by the data
    /// and the work in flight.
    fn state_sizes(&self, _out: &mut dyn FnMut(&'static str, usize)) {}
    /// A replica of a protocol whose copies execute the same input
    /// deterministically (Calvin, SLOG) reports its shard and, when it has
    /// no transaction in flight, what it applied and a hash of its state;
    /// the end of every simulated run compares the copies (`CopyState`).
    fn copy_state(&self) -> Option<CopyState> {
        None
    }
    /// Asserts what must hold between any two events (the role's
    /// invariants: log positions in order, leader-only state empty at
    /// followers, locks held only by live transactions). The simulator calls
    /// it after every event in debug builds, so tests and debug swarms
    /// catch a broken invariant at the event that broke it. Every role
    /// states its own: there is no default.
    fn check_invariants(&self);
}

/// One replica's state for the end-of-run comparison of copies: every copy
/// of `shard` that applied the same input (`applied`, a digest naming it)
/// must hold the same state (`hash`), or the regions diverged. `settled`
/// is `None` while the replica has transactions in flight. `finished`
/// counts the transactions it finished since it started: a copy in
/// flight whose count stays put is waiting, not working.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyState {
    pub shard: crate::ShardId,
    pub settled: Option<Settled>,
    pub finished: u64,
}

/// What a quiescent copy applied, and its state's hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settled {
    pub applied: u64,
    pub hash: u64,
}

/// Entries of one structure an invariant check visits at most per event
/// (`Process::check_invariants`): checks run after every simulated event,
/// so each must stay cheap whatever the state's size.
pub const CHECKED_MAX: usize = 64;

/// Declares a protocol's node type: an enum with one variant per role, each
/// role a [`Process`] of the protocol, and the `Process` impl that hands
/// every event to the node's role.
///
/// ```ignore
/// meridian_core::roles! {
///     /// A node of a `tiga` deployment.
///     pub enum Node for Tiga {
///         Server(Server),
///         Coordinator(Coordinator),
///         ViewManager(ViewManager),
///     }
/// }
/// ```
///
/// Each variant holds its role boxed (roles differ much in size).
#[macro_export]
macro_rules! roles {
    (
        $(#[$meta:meta])*
        $vis:vis enum $node:ident for $protocol:ty {
            $( $(#[$vmeta:meta])* $variant:ident($role:ty) ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $node {
            $( $(#[$vmeta])* $variant(Box<$role>) ),+
        }

        impl $crate::Process<$protocol> for $node {
            fn on_start(
                &mut self,
                ctx: &mut $crate::Ctx<'_, $protocol>,
                durable: Vec<<$protocol as $crate::Protocol>::Record>,
            ) {
                match self { $( $node::$variant(r) => $crate::Process::<$protocol>::on_start(&mut **r, ctx, durable) ),+ }
            }
            fn on_message(
                &mut self,
                ctx: &mut $crate::Ctx<'_, $protocol>,
                from: $crate::NodeId,
                msg: <$protocol as $crate::Protocol>::Msg,
            ) {
                match self { $( $node::$variant(r) => $crate::Process::<$protocol>::on_message(&mut **r, ctx, from, msg) ),+ }
            }
            fn on_timer(&mut self, ctx: &mut $crate::Ctx<'_, $protocol>, timer: <$protocol as $crate::Protocol>::Timer) {
                match self { $( $node::$variant(r) => $crate::Process::<$protocol>::on_timer(&mut **r, ctx, timer) ),+ }
            }
            fn on_persisted(&mut self, ctx: &mut $crate::Ctx<'_, $protocol>, upto: $crate::Lsn) {
                match self { $( $node::$variant(r) => $crate::Process::<$protocol>::on_persisted(&mut **r, ctx, upto) ),+ }
            }
            fn on_request(&mut self, ctx: &mut $crate::Ctx<'_, $protocol>, request: $crate::RequestId, program: $crate::Program) {
                match self { $( $node::$variant(r) => $crate::Process::<$protocol>::on_request(&mut **r, ctx, request, program) ),+ }
            }
            fn state_sizes(&self, out: &mut dyn FnMut(&'static str, usize)) {
                match self { $( $node::$variant(r) => $crate::Process::<$protocol>::state_sizes(&**r, out) ),+ }
            }
            fn copy_state(&self) -> Option<$crate::CopyState> {
                match self { $( $node::$variant(r) => $crate::Process::<$protocol>::copy_state(&**r) ),+ }
            }
            fn check_invariants(&self) {
                match self { $( $node::$variant(r) => $crate::Process::<$protocol>::check_invariants(&**r) ),+ }
            }
        }
    };
}

/// An `Env` for a component with its own message, record and timer types
/// (`M2`, `R2`, `T2`), converting them into the host's with `From`.
pub struct Mapped<'a, M, R, T> {
    inner: &'a mut dyn Env<M, R, T>,
    _types: PhantomData<(M, R, T)>,
}

impl<'a, M, R, T> Mapped<'a, M, R, T> {
    pub fn new(inner: &'a mut dyn Env<M, R, T>) -> Self {
        Mapped { inner, _types: PhantomData }
    }
}

impl<M, R, T, M2, R2, T2> Env<M2, R2, T2> for Mapped<'_, M, R, T>
where
    M: From<M2>,
    R: From<R2>,
    T: From<T2>,
{
    fn me(&self) -> NodeId {
        self.inner.me()
    }
    fn topology(&self) -> &Topology {
        self.inner.topology()
    }
    fn clock_ns(&self) -> u64 {
        self.inner.clock_ns()
    }
    fn monotonic_ns(&self) -> u64 {
        self.inner.monotonic_ns()
    }
    fn truetime(&mut self) -> TrueTime {
        self.inner.truetime()
    }
    fn send(&mut self, to: NodeId, msg: M2) {
        self.inner.send(to, M::from(msg))
    }
    fn set_timer(&mut self, after_ns: u64, timer: T2) -> TimerId {
        self.inner.set_timer(after_ns, T::from(timer))
    }
    fn cancel_timer(&mut self, id: TimerId) {
        self.inner.cancel_timer(id)
    }
    fn append_to(&mut self, stream: Stream, record: R2) -> Lsn {
        self.inner.append_to(stream, R::from(record))
    }
    fn compact_stream(&mut self, stream: Stream, upto: Lsn, snapshot: R2) {
        self.inner.compact_stream(stream, upto, R::from(snapshot))
    }
    fn charge_cpu(&mut self, ns: u64) {
        self.inner.charge_cpu(ns)
    }
    fn charge_keys(&mut self, keys: u64) {
        self.inner.charge_keys(keys)
    }
    fn rng(&mut self) -> &mut Rng {
        self.inner.rng()
    }
    fn count(&mut self, counter: &'static str, delta: u64) {
        self.inner.count(counter, delta)
    }
    fn observe(&mut self, name: &'static str, value: u64) {
        self.inner.observe(name, value)
    }
    fn complete(&mut self, request: RequestId, outcome: Outcome) {
        self.inner.complete(request, outcome)
    }
}

#[cfg(test)]
mod deployment_tests {
    use super::*;
    use crate::topology::{ClusterSpec, LeaderPlacement};

    /// STARRY's computing nodes and K2's replica reads choose the nearest
    /// replica by the nominal matrix.
    #[test]
    fn the_nearest_replica_is_chosen_by_nominal_round_trip() {
        let latency = Arc::new(LatencyMatrix::preset("tiga-gcp").expect("preset"));
        let spec = ClusterSpec {
            regions: latency.regions.clone(),
            server_regions: vec![RegionId(0), RegionId(1), RegionId(2)],
            shards: 2,
            replicas_per_shard: 3,
            leaders: LeaderPlacement::Colocated,
            client_regions: vec![RegionId(3)],
            clients_per_region: 1,
        };
        let topology = Arc::new(Topology::build(&spec, &[]));
        let d = Deployment { topology: topology.clone(), params: Params::new(), epsilon_us: 100, latency };
        let hong_kong = RegionId(3);
        // Hong Kong: South Carolina 197 ms, Finland 251, Brazil 309.
        let nearest = d.nearest_replica(ShardId(1), hong_kong);
        assert_eq!(topology.region_of(nearest), RegionId(0));
        assert_eq!(topology.replicas_in(ShardId(1), RegionId(2)), vec![nearest_in(&topology, 1, 2)]);
        assert!(d.rtt_ms(RegionId(0), RegionId(1)) > 100.0);
    }

    fn nearest_in(t: &Topology, shard: u32, replica: usize) -> NodeId {
        t.replicas(ShardId(shard))[replica]
    }
}
