//! The deterministic discrete-event simulator.
//!
//! Single-threaded, seeded, virtual time in nanoseconds. Events are ordered
//! by `(time, insertion sequence)`; every random draw comes from a seeded
//! stream (one per node, one for the network), so the same seed and
//! configuration give the same run bit for bit, which the trace hash
//! witnesses. Each node is a single CPU: an event arriving while it is busy
//! waits in its inbox, so load saturates as on real hardware. A crash drops
//! the process, its inbox, timers and unflushed appends; a restart builds a
//! fresh process from its durable records.
//!
//! This module must never read the wall clock or iterate a hash map.

use crate::config::{ClockModel, FaultAction, SimConfig};
use crate::counters::Counters;
use crate::disk::Disk;
use crate::net::Network;
use crate::queue::EventQueue;
use hdrhistogram::Histogram;
use meridian_core::{
    ClientIo, Clients, Deployment, Env, Lsn, NodeId, Outcome, Process, Program, Protocol, RequestId, Rng, Stream,
    TimerId, Topology, TrueTime,
};
use rustc_hash::FxHashSet;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Write;
use std::sync::Arc;

/// Wall clocks start here so that negative offsets never underflow.
pub const EPOCH_NS: u64 = 1_000_000_000_000;

/// What an interceptor decides for a message (scripted tests).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Deliver,
    Drop,
    /// Deliver with this much extra one-way delay.
    Delay(u64),
}

/// Sees every message as it is sent: `(now_ns, from, to, msg)`.
pub type Interceptor<M> = Box<dyn FnMut(u64, NodeId, NodeId, &M) -> Verdict>;

enum Event<P: Protocol> {
    /// `size`: the message's encoded size, when messages are sized.
    Deliver {
        to: NodeId,
        from: NodeId,
        msg: P::Msg,
        size: Size,
    },
    Timer {
        node: NodeId,
        incarnation: u32,
        id: u64,
        tag: P::Timer,
    },
    Flush {
        node: NodeId,
        incarnation: u32,
    },
    Persisted {
        node: NodeId,
        upto: Lsn,
    },
    Request {
        node: NodeId,
        request: RequestId,
        program: Program,
    },
    Ready {
        node: NodeId,
        incarnation: u32,
    },
    Wake {
        client: NodeId,
    },
    Fault(FaultAction),
}

/// `Event::code` of `Ready`, which `Sim::on_ready` also mixes in.
const READY_CODE: u64 = 6;

impl<P: Protocol> Event<P> {
    /// The node whose CPU handles the event, if any.
    fn target(&self) -> Option<NodeId> {
        match self {
            Event::Deliver { to, .. } => Some(*to),
            Event::Timer { node, .. } | Event::Persisted { node, .. } | Event::Request { node, .. } => Some(*node),
            _ => None,
        }
    }

    fn code(&self) -> u64 {
        match self {
            Event::Deliver { .. } => 1,
            Event::Timer { .. } => 2,
            Event::Flush { .. } => 3,
            Event::Persisted { .. } => 4,
            Event::Request { .. } => 5,
            Event::Ready { .. } => READY_CODE,
            Event::Wake { .. } => 7,
            Event::Fault(_) => 8,
        }
    }
}

/// Everything about a node except its process.
struct NodeRt<P: Protocol> {
    up: bool,
    incarnation: u32,
    busy_until_ns: u64,
    inbox: VecDeque<Event<P>>,
    ready_scheduled: bool,
    clock: ClockModel,
    jump_ns: i64,
    rng: Rng,
    timers: FxHashSet<u64>,
    next_timer: u64,
    disk: Disk<P::Record>,
    cpu_ns: u64,
    cpu_ns_per_byte: f64,
    cpu_ns_per_field: f64,
    cpu_ns_per_key: u64,
}

impl<P: Protocol> NodeRt<P> {
    /// What encoding or decoding a message of `size` costs this node.
    #[inline]
    fn cpu_cost_ns(&self, size: Size) -> u64 {
        per_byte_ns(size.bytes, self.cpu_ns_per_byte) + per_byte_ns(size.fields, self.cpu_ns_per_field)
    }
}

/// A completed client request, kept when no driver is attached.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub at_ns: u64,
    pub node: NodeId,
    pub request: RequestId,
    pub outcome: Outcome,
}

/// The simulator for protocol `P`.
pub struct Sim<P: Protocol> {
    deployment: Deployment,
    seed: u64,
    epsilon_ns: u64,
    fsync_ns: u64,
    /// Messages are sized (encoded) only when a per-byte cost is set.
    sized: bool,
    /// Simulated CPU time each node has been busy.
    cpu_busy_ns: Vec<u64>,
    net_ns_per_byte: f64,
    now_ns: u64,
    queue: EventQueue<Event<P>>,
    processes: Vec<Option<P::Node>>,
    nodes: Vec<NodeRt<P>>,
    net: Network,
    interceptor: Option<Interceptor<P::Msg>>,
    clients: Option<Box<dyn Clients>>,
    counters: Counters,
    /// `Protocol::counters`: the names a run may count.
    documented_counters: BTreeSet<&'static str>,
    observations: BTreeMap<&'static str, Histogram<u64>>,
    /// Breaches of the protocol's own declarations (a role reading
    /// TrueTime it may not): the run fails.
    violations: Vec<String>,
    completions: Vec<(NodeId, RequestId, Outcome)>,
    unclaimed: Vec<Completion>,
    events: u64,
    trace: u64,
    started: bool,
    event_log: Option<Box<dyn std::io::Write>>,
}

/// A message's size on the wire: its postcard encoding, as the runtime
/// sends it.
fn encoded_size<M: serde::Serialize>(msg: &M) -> Size {
    postcard::serialize_with_flavor(msg, Size::default()).expect("messages encode")
}

/// A message's encoded bytes and fields: every number, length or byte
/// string postcard writes is one field (a key in a sibling set, a
/// timestamp), a lone byte is not (the elements of a `Vec<u8>` value). A
/// field of structure costs a real node more than its bytes alone do
/// (docs/cost-model.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Size {
    pub bytes: u32,
    pub fields: u32,
}

impl postcard::ser_flavors::Flavor for Size {
    type Output = Size;

    #[inline]
    fn try_push(&mut self, _: u8) -> postcard::Result<()> {
        self.bytes = self.bytes.saturating_add(1);
        Ok(())
    }

    #[inline]
    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.bytes = self.bytes.saturating_add(u32::try_from(data.len()).unwrap_or(u32::MAX));
        self.fields = self.fields.saturating_add(1);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Size> {
        Ok(self)
    }
}

fn mix(h: u64, x: u64) -> u64 {
    // A 64-bit multiply-xorshift step: cheap, order-sensitive.
    let h = (h ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}

impl<P: Protocol> Sim<P> {
    /// Builds every node's process; errors name the parameter a protocol
    /// rejected.
    pub fn new(cfg: SimConfig, deployment: Deployment) -> Result<Sim<P>, String> {
        cfg.validate()?;
        assert!(Arc::ptr_eq(&cfg.topology, &deployment.topology) || *cfg.topology == *deployment.topology);
        let n = cfg.topology.nodes.len();
        let mut processes = Vec::with_capacity(n);
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            processes.push(Some(P::build(&deployment, NodeId(i as u32))?));
            nodes.push(NodeRt {
                up: true,
                incarnation: 0,
                busy_until_ns: 0,
                inbox: VecDeque::new(),
                ready_scheduled: false,
                clock: cfg.clocks[i],
                jump_ns: 0,
                rng: Rng::derive(cfg.seed, 1 + i as u64),
                timers: FxHashSet::default(),
                next_timer: 1,
                disk: Disk::new(),
                cpu_ns: cfg.cpu_ns[i],
                cpu_ns_per_byte: cfg.cpu_ns_per_byte.get(i).copied().unwrap_or(0.0),
                cpu_ns_per_field: cfg.cpu_ns_per_field.get(i).copied().unwrap_or(0.0),
                cpu_ns_per_key: cfg.cpu_ns_per_key.get(i).copied().unwrap_or(0),
            });
        }
        let mut queue = EventQueue::new();
        for f in &cfg.faults {
            queue.push(f.at_ns, Event::Fault(f.action.clone()));
        }
        Ok(Sim {
            net: Network::new(cfg.net, cfg.seed, &cfg.topology, &cfg.matrix),
            deployment,
            seed: cfg.seed,
            epsilon_ns: cfg.epsilon_ns,
            fsync_ns: cfg.fsync_ns,
            sized: cfg.net_ns_per_byte > 0.0
                || cfg.cpu_ns_per_byte.iter().any(|c| *c > 0.0)
                || cfg.cpu_ns_per_field.iter().any(|c| *c > 0.0),
            cpu_busy_ns: vec![0; cfg.topology.nodes.len()],
            net_ns_per_byte: cfg.net_ns_per_byte,
            now_ns: 0,
            queue,
            processes,
            nodes,
            interceptor: None,
            clients: None,
            counters: Counters::default(),
            documented_counters: P::counters().iter().map(|c| c.name).collect(),
            observations: BTreeMap::new(),
            violations: Vec::new(),
            completions: Vec::new(),
            unclaimed: Vec::new(),
            events: 0,
            trace: cfg.seed,
            started: false,
            event_log: None,
        })
    }

    /// Attaches the workload driver (before the first step).
    pub fn set_clients(&mut self, clients: Box<dyn Clients>) {
        assert!(!self.started, "attach clients before the run starts");
        self.clients = Some(clients);
    }

    /// Takes the driver back (after the run, to read its results).
    pub fn take_clients(&mut self) -> Option<Box<dyn Clients>> {
        self.clients.take()
    }

    pub fn set_interceptor(&mut self, interceptor: Interceptor<P::Msg>) {
        self.interceptor = Some(interceptor);
    }

    pub fn topology(&self) -> &Topology {
        &self.deployment.topology
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Events handled so far (deliveries, timers, persistence
    /// acknowledgements, requests).
    /// Simulated CPU time each node has spent handling events (per event,
    /// per byte, and charged), indexed by node.
    pub fn cpu_busy_ns(&self) -> &[u64] {
        &self.cpu_busy_ns
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    /// An order-sensitive hash of every event handled.
    pub fn trace_hash(&self) -> u64 {
        self.trace
    }

    /// Every counter so far, by name.
    pub fn counters(&self) -> BTreeMap<&'static str, u64> {
        self.counters.by_name()
    }

    /// What the protocol did against its own declarations (see
    /// `Protocol::may_read_truetime`); a run with any has failed.
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// Protocol-side distributions recorded through `Env::observe`.
    pub fn observations(&self) -> &BTreeMap<&'static str, Histogram<u64>> {
        &self.observations
    }

    /// Raises `peaks` to each structure's current size on every node that is
    /// up (`Process::state_sizes`; the largest on any one node).
    pub fn sample_state_sizes(&self, peaks: &mut BTreeMap<&'static str, usize>) {
        for process in self.processes.iter().flatten() {
            process.state_sizes(&mut |structure, entries| {
                let peak = peaks.entry(structure).or_insert(0);
                *peak = (*peak).max(entries);
            });
        }
    }

    /// The process of a node that is up (for assertions in tests).
    pub fn process(&self, node: NodeId) -> Option<&P::Node> {
        self.processes[node.index()].as_ref()
    }

    pub fn is_up(&self, node: NodeId) -> bool {
        self.nodes[node.index()].up
    }

    /// Completions reported while no driver was attached.
    pub fn take_completions(&mut self) -> Vec<Completion> {
        std::mem::take(&mut self.unclaimed)
    }

    /// Schedules a fault (scripted tests; the configured ones are queued at
    /// construction).
    pub fn schedule(&mut self, at_ns: u64, action: FaultAction) {
        assert!(at_ns >= self.now_ns, "scheduling a fault in the past");
        self.queue.push(at_ns, Event::Fault(action));
    }

    /// Hands a client request to a node at the current time.
    pub fn request(&mut self, node: NodeId, request: RequestId, program: Program) {
        self.start();
        self.queue.push(self.now_ns, Event::Request { node, request, program });
    }

    /// The node's wall clock now.
    pub fn clock_of(&self, node: NodeId) -> u64 {
        wall_clock(&self.nodes[node.index()], self.now_ns)
    }

    /// Runs once, before the first event; checked at every step, so the
    /// check is inlined and the work is not.
    #[inline]
    fn start(&mut self) {
        if !self.started {
            self.start_nodes();
        }
    }

    #[cold]
    fn start_nodes(&mut self) {
        self.started = true;
        for i in 0..self.nodes.len() {
            self.handle_start(NodeId(i as u32), Vec::new());
        }
        if let Some(mut clients) = self.clients.take() {
            clients.start(&mut self.client_io());
            self.clients = Some(clients);
        }
    }

    /// Runs every event up to and including `end_ns`, then sets the clock
    /// there.
    pub fn run_until(&mut self, end_ns: u64) {
        self.start();
        while self.queue.peek_time().is_some_and(|t| t <= end_ns) {
            self.step_within(end_ns);
        }
        self.now_ns = self.now_ns.max(end_ns);
    }

    /// Handles the next event; false when the queue is empty.
    pub fn step(&mut self) -> bool {
        self.step_within(0)
    }

    /// Handles the next event, and may go on with a node's inbox up to
    /// `horizon_ns` where that is what the next events would be anyway
    /// (see `on_ready`).
    fn step_within(&mut self, horizon_ns: u64) -> bool {
        self.start();
        let Some((t, event)) = self.queue.pop() else {
            return false;
        };
        debug_assert!(t >= self.now_ns, "time went backwards");
        self.now_ns = t;
        self.trace = mix(self.trace, t ^ (event.code() << 56));
        match event {
            Event::Ready { node, incarnation } => self.on_ready(node, incarnation, horizon_ns),
            Event::Flush { node, incarnation } => self.on_flush(node, incarnation),
            Event::Wake { client } => {
                if let Some(mut clients) = self.clients.take() {
                    clients.on_wake(client, &mut self.client_io());
                    self.clients = Some(clients);
                }
            }
            Event::Fault(action) => self.apply_fault(action),
            ev => self.arrive(ev),
        }
        true
    }

    /// An event for a node's CPU: handle it now, queue it, or drop it.
    #[inline(always)]
    fn arrive(&mut self, event: Event<P>) {
        let node = event.target().expect("arrive() takes node events");
        let rt = &mut self.nodes[node.index()];
        let stale = match &event {
            Event::Timer { incarnation, id, .. } => *incarnation != rt.incarnation || !rt.timers.contains(id),
            _ => false,
        };
        if !rt.up || stale {
            return;
        }
        if rt.busy_until_ns > self.now_ns || !rt.inbox.is_empty() {
            rt.inbox.push_back(event);
            if !rt.ready_scheduled {
                rt.ready_scheduled = true;
                let (at, incarnation) = (rt.busy_until_ns.max(self.now_ns), rt.incarnation);
                self.queue.push(at, Event::Ready { node, incarnation });
            }
            return;
        }
        self.handle(node, event);
    }

    /// The node's CPU is free: it takes the next event from its inbox. When
    /// more wait and the `Ready` that would follow is the queue's next event
    /// (nothing queued before its time; one queued at the same time goes
    /// first) and within `horizon_ns`, the loop runs it in place — the same
    /// order, time and trace as queueing and popping it, without either.
    fn on_ready(&mut self, node: NodeId, incarnation: u32, horizon_ns: u64) {
        loop {
            let rt = &mut self.nodes[node.index()];
            if rt.incarnation != incarnation || !rt.up {
                return;
            }
            rt.ready_scheduled = false;
            let Some(event) = rt.inbox.pop_front() else {
                return;
            };
            self.handle(node, event);
            let rt = &mut self.nodes[node.index()];
            if rt.inbox.is_empty() || !rt.up || rt.incarnation != incarnation {
                return;
            }
            let at = rt.busy_until_ns;
            if at <= horizon_ns && self.queue.peek_time().is_none_or(|t| at < t) {
                debug_assert!(at >= self.now_ns, "time went backwards");
                self.now_ns = at;
                self.trace = mix(self.trace, at ^ (READY_CODE << 56));
                continue;
            }
            rt.ready_scheduled = true;
            self.queue.push(at, Event::Ready { node, incarnation });
            return;
        }
    }

    fn on_flush(&mut self, node: NodeId, incarnation: u32) {
        let rt = &mut self.nodes[node.index()];
        if rt.incarnation != incarnation || !rt.up {
            return;
        }
        let (upto, more) = rt.disk.complete_flush();
        if more && rt.disk.start_flush() {
            self.queue.push(self.now_ns + self.fsync_ns, Event::Flush { node, incarnation });
        }
        self.arrive(Event::Persisted { node, upto });
    }

    /// Runs one event through the node's process.
    fn handle(&mut self, node: NodeId, event: Event<P>) {
        if let Event::Timer { id, .. } = &event {
            // Cancelled while it waited in the inbox.
            if !self.nodes[node.index()].timers.remove(id) {
                return;
            }
        }
        self.events += 1;
        self.trace = mix(self.trace, u64::from(node.0) | (event.code() << 32));
        if self.event_log.is_some() {
            self.log_event(node, &event);
        }
        let mut process = self.processes[node.index()].take().expect("an up node has a process");
        let mut depart_ns = self.now_ns + self.nodes[node.index()].cpu_ns;
        if let Event::Deliver { size, .. } = &event {
            // Decoding costs the receiver too.
            depart_ns += self.nodes[node.index()].cpu_cost_ns(*size);
        }
        let busy_until_ns = self.run_handler(node, &mut process, depart_ns, |process, ctx| match event {
            Event::Deliver { from, msg, .. } => process.on_message(ctx, from, msg),
            Event::Timer { tag, .. } => process.on_timer(ctx, tag),
            Event::Persisted { upto, .. } => process.on_persisted(ctx, upto),
            Event::Request { request, program, .. } => process.on_request(ctx, request, program),
            _ => unreachable!("not a node event"),
        });
        self.processes[node.index()] = Some(process);
        self.cpu_busy_ns[node.index()] += busy_until_ns - self.now_ns;
        let rt = &mut self.nodes[node.index()];
        rt.busy_until_ns = busy_until_ns;
        self.start_flush(node);
        self.flush_completions();
    }

    /// Starts a group-commit flush of what the last handler appended.
    fn start_flush(&mut self, node: NodeId) {
        let rt = &mut self.nodes[node.index()];
        if rt.disk.start_flush() {
            let at = rt.busy_until_ns.max(self.now_ns) + self.fsync_ns;
            self.queue.push(at, Event::Flush { node, incarnation: rt.incarnation });
        }
    }

    /// Writes one line per handled event: time, node, what happened.
    fn log_event(&mut self, node: NodeId, event: &Event<P>) {
        let topo = &self.deployment.topology;
        let what = match event {
            Event::Deliver { from, msg, .. } => format!("from {} {:?}", topo.name(*from), msg),
            Event::Timer { tag, .. } => format!("timer {tag:?}"),
            Event::Persisted { upto, .. } => format!("persisted {}", upto.0),
            Event::Request { request, program, .. } => format!("request {} {:?}", request.0, program.ops),
            _ => return,
        };
        let line = format!("{:>15} {:<20} {}\n", self.now_ns, topo.name(node), what);
        if let Some(out) = self.event_log.as_mut() {
            let _ = out.write_all(line.as_bytes());
        }
    }

    /// Logs every handled event (and faults) to `out` — for debugging a
    /// seed; it slows the run down.
    pub fn set_event_log(&mut self, out: Box<dyn std::io::Write>) {
        self.event_log = Some(out);
    }

    fn handle_start(&mut self, node: NodeId, durable: Vec<P::Record>) {
        let mut process = self.processes[node.index()].take().expect("a starting node has a process");
        let depart_ns = self.now_ns + self.nodes[node.index()].cpu_ns;
        self.run_handler(node, &mut process, depart_ns, |process, ctx| process.on_start(ctx, durable));
        self.processes[node.index()] = Some(process);
        self.start_flush(node);
        self.flush_completions();
    }

    /// Runs one handler of `node` at the current time, carrying out each
    /// effect as the handler makes it ([`SimEnv`]); returns when the node's
    /// CPU work for it ends (`depart_ns` plus what the handler charged and
    /// sent).
    fn run_handler(
        &mut self,
        node: NodeId,
        process: &mut P::Node,
        depart_ns: u64,
        f: impl FnOnce(&mut P::Node, &mut meridian_core::Ctx<'_, P>),
    ) -> u64 {
        let rt = &mut self.nodes[node.index()];
        let (clock_ns, monotonic_ns) = clocks_of(rt, self.now_ns);
        let mut env = SimEnv {
            topology: &self.deployment.topology,
            clock_ns,
            monotonic_ns,
            epsilon_ns: self.epsilon_ns,
            read_truetime: false,
            now_ns: self.now_ns,
            depart_ns,
            node,
            sized: self.sized,
            net_ns_per_byte: self.net_ns_per_byte,
            rt,
            queue: &mut self.queue,
            net: &mut self.net,
            interceptor: &mut self.interceptor,
            counters: &mut self.counters,
            documented_counters: &self.documented_counters,
            violations: &mut self.violations,
            observations: &mut self.observations,
            completions: &mut self.completions,
        };
        f(process, &mut env);
        let (depart_ns, read_truetime) = (env.depart_ns, env.read_truetime);
        if cfg!(debug_assertions) {
            // Tests and debug swarms stop at the event that broke one.
            process.check_invariants();
        }
        if read_truetime {
            self.check_truetime_read(node);
        }
        depart_ns
    }

    /// A role the protocol does not allow to read TrueTime read it: the run
    /// fails (`Protocol::may_read_truetime`).
    fn check_truetime_read(&mut self, node: NodeId) {
        let info = self.deployment.topology.node(node);
        if !P::may_read_truetime(&info.role) && self.violations.len() < VIOLATIONS_MAX {
            let (name, role) = (&info.name, &info.role);
            self.violations.push(format!("{name} ({role:?}) read TrueTime, which {} allows no {role:?} to", P::NAME));
        }
    }

    /// Hands the handler's completions to the driver; checked after every
    /// event, so the check is inlined and the work is not.
    #[inline]
    fn flush_completions(&mut self) {
        if !self.completions.is_empty() {
            self.hand_over_completions();
        }
    }

    fn hand_over_completions(&mut self) {
        let done = std::mem::take(&mut self.completions);
        match self.clients.take() {
            Some(mut clients) => {
                for (node, request, outcome) in done {
                    clients.on_complete(node, request, outcome, &mut self.client_io());
                }
                self.clients = Some(clients);
            }
            None => {
                let at_ns = self.now_ns;
                self.unclaimed.extend(done.into_iter().map(|(node, request, outcome)| Completion {
                    at_ns,
                    node,
                    request,
                    outcome,
                }));
            }
        }
    }

    fn client_io(&mut self) -> SimClientIo<'_, P> {
        SimClientIo { now_ns: self.now_ns, queue: &mut self.queue }
    }

    fn apply_fault(&mut self, action: FaultAction) {
        if let Some(out) = self.event_log.as_mut() {
            let _ = writeln!(out, "{:>15} {:<20} fault {:?}", self.now_ns, "-", action);
        }
        match action {
            FaultAction::Crash(node) => self.crash(node),
            FaultAction::Restart(node) => self.restart(node),
            FaultAction::Partition(nodes) => self.net.partition(nodes),
            FaultAction::CutLinks(links) => self.net.cut_links(links),
            FaultAction::RestoreLinks(links) => self.net.restore_links(&links),
            FaultAction::CutOneWay(links) => self.net.cut_one_way(links),
            FaultAction::RestoreOneWay(links) => self.net.restore_one_way(&links),
            FaultAction::Heal => self.net.heal(),
            FaultAction::ClockJump(node, by_ns) => self.nodes[node.index()].jump_ns += by_ns,
            FaultAction::SetLoss(p) => self.net.cfg.loss = p,
            FaultAction::SetDuplicate(p) => self.net.cfg.duplicate = p,
            FaultAction::HealAll => {
                self.net.heal();
                self.net.cfg.loss = 0.0;
                self.net.cfg.duplicate = 0.0;
                for i in 0..self.nodes.len() {
                    self.restart(NodeId(i as u32));
                }
            }
        }
    }

    /// Crashes a node now: its process, inbox, timers and unflushed appends
    /// are lost.
    pub fn crash(&mut self, node: NodeId) {
        let rt = &mut self.nodes[node.index()];
        if !rt.up {
            return;
        }
        rt.up = false;
        rt.incarnation += 1;
        rt.inbox.clear();
        rt.ready_scheduled = false;
        rt.timers.clear();
        rt.disk.crash();
        self.processes[node.index()] = None;
        self.count_fault("crashes");
        if self.deployment.topology.is_client(node) {
            if let Some(mut clients) = self.clients.take() {
                clients.on_node_down(node, &mut self.client_io());
                self.clients = Some(clients);
            }
        }
    }

    /// Restarts a crashed node from its durable records.
    pub fn restart(&mut self, node: NodeId) {
        if self.nodes[node.index()].up {
            return;
        }
        let process = P::build(&self.deployment, node).expect("a node that built once builds again");
        self.processes[node.index()] = Some(process);
        let rt = &mut self.nodes[node.index()];
        rt.up = true;
        rt.busy_until_ns = self.now_ns;
        let durable = rt.disk.recover();
        self.count_fault("restarts");
        self.handle_start(node, durable);
        if self.deployment.topology.is_client(node) {
            if let Some(mut clients) = self.clients.take() {
                clients.on_node_up(node, &mut self.client_io());
                self.clients = Some(clients);
            }
        }
    }

    fn count_fault(&mut self, name: &'static str) {
        self.counters.add(name, 1);
    }
}

/// Violations kept per run (the first ones say enough).
const VIOLATIONS_MAX: usize = 16;

/// What `bytes` cost at `ns_per_byte`. Unsized messages (0 bytes, the
/// common case) skip the float arithmetic, which gives 0 for them anyway.
#[inline]
fn per_byte_ns(bytes: u32, ns_per_byte: f64) -> u64 {
    if bytes == 0 { 0 } else { (f64::from(bytes) * ns_per_byte) as u64 }
}

fn wall_clock<P: Protocol>(rt: &NodeRt<P>, now_ns: u64) -> u64 {
    let drift = rt.clock.drift_ns(now_ns);
    let wall = EPOCH_NS as i64 + now_ns as i64 + rt.clock.offset_ns + drift + rt.jump_ns;
    wall.max(0) as u64
}

/// The clock readings of a node at true time `now_ns`: its wall clock
/// (offset, drift, jumps) and its monotonic clock (drift only).
fn clocks_of<P: Protocol>(rt: &NodeRt<P>, now_ns: u64) -> (u64, u64) {
    let drift = rt.clock.drift_ns(now_ns);
    let monotonic_ns = (now_ns as i64 + drift).max(0) as u64;
    (wall_clock(rt, now_ns), monotonic_ns)
}

/// The TrueTime interval of `node` at true time `now_ns`: it errs by up to
/// ε either way and always holds the true time. A deterministic draw per
/// event (a hash of the time and the node), made only when a handler reads
/// it: most never do, and the draw divides.
fn truetime_of(node: NodeId, now_ns: u64, epsilon_ns: u64) -> TrueTime {
    let truth = EPOCH_NS + now_ns;
    let e = epsilon_ns;
    let err = if e == 0 { 0 } else { (mix(now_ns, u64::from(node.0)) % (2 * e + 1)) as i64 - e as i64 };
    let est = (truth as i64 + err) as u64;
    TrueTime { earliest_ns: est - e, latest_ns: est + e }
}

/// The `Env` of one handler in the simulator: the event's clock readings and
/// the node's random stream, identifiers, CPU and disk. Each effect is
/// carried out on the virtual network, disk and timers as the handler makes
/// it, in call order — what a list of effects applied after the handler
/// would do (the real runtime's [`meridian_core::Recorder`]), without the
/// list: every event passes here.
struct SimEnv<'a, P: Protocol> {
    topology: &'a Topology,
    /// The event's clock readings (one per event; TrueTime's when read).
    clock_ns: u64,
    monotonic_ns: u64,
    epsilon_ns: u64,
    read_truetime: bool,
    now_ns: u64,
    /// When the handler's CPU work so far ends: what it sends leaves then.
    depart_ns: u64,
    node: NodeId,
    sized: bool,
    net_ns_per_byte: f64,
    rt: &'a mut NodeRt<P>,
    queue: &'a mut EventQueue<Event<P>>,
    net: &'a mut Network,
    interceptor: &'a mut Option<Interceptor<P::Msg>>,
    counters: &'a mut Counters,
    documented_counters: &'a BTreeSet<&'static str>,
    violations: &'a mut Vec<String>,
    observations: &'a mut BTreeMap<&'static str, Histogram<u64>>,
    completions: &'a mut Vec<(NodeId, RequestId, Outcome)>,
}

impl<P: Protocol> Env<P::Msg, P::Record, P::Timer> for SimEnv<'_, P> {
    fn me(&self) -> NodeId {
        self.node
    }

    fn topology(&self) -> &Topology {
        self.topology
    }

    fn clock_ns(&self) -> u64 {
        self.clock_ns
    }

    fn monotonic_ns(&self) -> u64 {
        self.monotonic_ns
    }

    fn truetime(&mut self) -> TrueTime {
        self.read_truetime = true;
        truetime_of(self.node, self.now_ns, self.epsilon_ns)
    }

    fn send(&mut self, to: NodeId, msg: P::Msg) {
        let mut extra_ns = 0;
        if let Some(intercept) = self.interceptor.as_mut() {
            match intercept(self.now_ns, self.node, to, &msg) {
                Verdict::Deliver => {}
                Verdict::Drop => return,
                Verdict::Delay(ns) => extra_ns = ns,
            }
        }
        let size = if self.sized { encoded_size(&msg) } else { Size::default() };
        // Encoding costs the sender's CPU, in sending order; the bytes then
        // take their time on the wire.
        self.depart_ns += self.rt.cpu_cost_ns(size);
        let wire_ns = per_byte_ns(size.bytes, self.net_ns_per_byte);
        let route = self.net.route(self.node, to, self.depart_ns, extra_ns + wire_ns);
        // A link's deliveries queue in its own lane (times on a FIFO link
        // never go backwards; `EventQueue::push_in_lane`).
        let lane = self.net.link(self.node, to);
        if let Some(at) = route.second_ns {
            self.queue.push_in_lane(lane, at, Event::Deliver { to, from: self.node, msg: msg.clone(), size });
        }
        if let Some(at) = route.first_ns {
            self.queue.push_in_lane(lane, at, Event::Deliver { to, from: self.node, msg, size });
        }
    }

    fn set_timer(&mut self, after_ns: u64, timer: P::Timer) -> TimerId {
        let id = self.rt.next_timer;
        self.rt.next_timer += 1;
        self.rt.timers.insert(id);
        let true_after = self.rt.clock.true_duration_ns(after_ns);
        let ev = Event::Timer { node: self.node, incarnation: self.rt.incarnation, id, tag: timer };
        self.queue.push(self.now_ns + true_after, ev);
        TimerId(id)
    }

    fn cancel_timer(&mut self, id: TimerId) {
        self.rt.timers.remove(&id.0);
    }

    fn append_to(&mut self, stream: Stream, record: P::Record) -> Lsn {
        // The flush starts when the handler returns, so that every append
        // of one event shares one fsync.
        self.rt.disk.append(stream, record).0
    }

    fn compact_stream(&mut self, stream: Stream, upto: Lsn, snapshot: P::Record) {
        assert!(upto < self.rt.disk.next_lsn(), "compaction past the last appended record");
        self.rt.disk.compact(stream, upto, snapshot);
    }

    fn charge_cpu(&mut self, ns: u64) {
        self.depart_ns = self.depart_ns.saturating_add(ns);
    }

    fn charge_keys(&mut self, keys: u64) {
        self.depart_ns = self.depart_ns.saturating_add(keys.saturating_mul(self.rt.cpu_ns_per_key));
    }

    fn rng(&mut self) -> &mut Rng {
        &mut self.rt.rng
    }

    /// Adds to a report counter; the first use of one the protocol does
    /// not document (`Protocol::counters`) fails the run.
    fn count(&mut self, counter: &'static str, delta: u64) {
        let fresh = self.counters.add(counter, delta);
        if fresh && !self.documented_counters.contains(counter) && self.violations.len() < VIOLATIONS_MAX {
            self.violations.push(format!("counter `{counter}` is not among {}'s documented counters", P::NAME));
        }
    }

    fn observe(&mut self, name: &'static str, value: u64) {
        let h = self
            .observations
            .entry(name)
            .or_insert_with(|| Histogram::new_with_bounds(1, u64::MAX / 2, 3).expect("valid histogram bounds"));
        h.saturating_record(value);
    }

    fn complete(&mut self, request: RequestId, outcome: Outcome) {
        self.completions.push((self.node, request, outcome));
    }
}

struct SimClientIo<'a, P: Protocol> {
    now_ns: u64,
    queue: &'a mut EventQueue<Event<P>>,
}

impl<P: Protocol> ClientIo for SimClientIo<'_, P> {
    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn submit(&mut self, client: NodeId, request: RequestId, program: Program) {
        self.queue.push(self.now_ns, Event::Request { node: client, request, program });
    }

    fn wake_at(&mut self, client: NodeId, at_ns: u64) {
        self.queue.push(at_ns.max(self.now_ns), Event::Wake { client });
    }
}
