//! The node loop: one protocol process driven by real events, the runtime's
//! implementation of the `Env` the simulator implements.
//!
//! The loop owns the process and hands it, one at a time, messages from
//! peers, client requests, due timers and persistence acknowledgements.
//! What a handler does through its `Env` is collected and carried out when
//! it returns: appends go to the write-ahead log as one submission (group
//! commit; `on_persisted` follows the fsync), messages go to the transport
//! (self-sends straight back to the loop), outcomes to whoever asked.
//!
//! Local clock = system clock + the node's injected offset; TrueTime is the
//! system clock ± ε; timers run on the monotonic clock. This module must
//! never know which protocol it runs, nor block on a peer.

use crate::config::ClusterConfig;
use crate::frame;
use crate::transport::Transport;
use crate::wal::{Recovered, WalCmd, WalWriter};
use meridian_core::{
    Deployment, Env, Lsn, NodeId, Outcome, Process, Program, Protocol, RequestId, Rng, Stream, TimerId, Topology,
    TrueTime,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// Client requests a node holds at once; past it, new ones are rejected.
pub const MAX_PENDING_REQUESTS: usize = 65_536;
/// Self-addressed messages handled per loop turn (others wait a turn).
const LOCAL_BATCH_MAX: usize = 1024;

/// A client request for this node's coordinator, with where the outcome
/// goes.
pub struct Request {
    pub program: Program,
    pub reply: oneshot::Sender<Outcome>,
}

/// Pending timers on the monotonic clock; cancelled ones are skipped.
struct Timers<T> {
    next_id: u64,
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    live: HashMap<u64, T>,
}

impl<T> Timers<T> {
    fn new() -> Self {
        Timers { next_id: 1, heap: BinaryHeap::new(), live: HashMap::new() }
    }

    fn set(&mut self, after_ns: u64, tag: T) -> TimerId {
        let id = self.next_id;
        self.next_id += 1;
        self.heap.push(Reverse((Instant::now() + Duration::from_nanos(after_ns), id)));
        self.live.insert(id, tag);
        TimerId(id)
    }

    fn cancel(&mut self, id: TimerId) {
        self.live.remove(&id.0);
        // Cancelled entries stay in the heap until due; rebuild when they
        // dominate, so a protocol that re-arms often cannot grow it.
        if self.heap.len() > 1024 && self.heap.len() > 4 * self.live.len() {
            let live = &self.live;
            self.heap.retain(|Reverse((_, id))| live.contains_key(id));
        }
    }

    fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, id))) = self.heap.peek().copied() {
            if self.live.contains_key(&id) {
                return Some(at);
            }
            self.heap.pop();
        }
        None
    }

    /// The next timer due at `now`, if any.
    fn pop_due(&mut self, now: Instant) -> Option<T> {
        while let Some(Reverse((at, id))) = self.heap.peek().copied() {
            if at > now {
                return None;
            }
            self.heap.pop();
            if let Some(tag) = self.live.remove(&id) {
                return Some(tag);
            }
        }
        None
    }
}

/// What handlers asked for, carried out after each one returns.
struct Effects<M> {
    sends: Vec<(NodeId, M)>,
    wal: Vec<WalCmd>,
    completions: Vec<(RequestId, Outcome)>,
    counters: Vec<(&'static str, u64)>,
}

/// The `Env` a process acts through while it handles one event.
struct RtEnv<'a, P: Protocol> {
    me: NodeId,
    topology: &'a Topology,
    offset_ns: i64,
    epsilon_ns: u64,
    timers: &'a mut Timers<P::Timer>,
    next_lsn: &'a mut u64,
    rng: &'a mut Rng,
    fx: &'a mut Effects<P::Msg>,
}

fn system_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

impl<P: Protocol> Env<P::Msg, P::Record, P::Timer> for RtEnv<'_, P> {
    fn me(&self) -> NodeId {
        self.me
    }

    fn topology(&self) -> &Topology {
        self.topology
    }

    fn clock_ns(&self) -> u64 {
        (system_ns() as i64).saturating_add(self.offset_ns).max(0) as u64
    }

    fn monotonic_ns(&self) -> u64 {
        static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }

    fn truetime(&mut self) -> TrueTime {
        // The system clock is this machine's true time; injected offsets
        // skew `clock_ns` only, as the simulator's clock model does.
        let now = system_ns();
        TrueTime { earliest_ns: now.saturating_sub(self.epsilon_ns), latest_ns: now + self.epsilon_ns }
    }

    fn send(&mut self, to: NodeId, msg: P::Msg) {
        self.fx.sends.push((to, msg));
    }

    fn set_timer(&mut self, after_ns: u64, timer: P::Timer) -> TimerId {
        self.timers.set(after_ns, timer)
    }

    fn cancel_timer(&mut self, id: TimerId) {
        self.timers.cancel(id);
    }

    fn append_to(&mut self, stream: Stream, record: P::Record) -> Lsn {
        let lsn = Lsn(*self.next_lsn);
        *self.next_lsn += 1;
        let bytes = postcard::to_allocvec(&record).expect("records encode");
        self.fx.wal.push(WalCmd::Append(lsn, stream, bytes));
        lsn
    }

    fn compact_stream(&mut self, stream: Stream, upto: Lsn, snapshot: P::Record) {
        assert!(upto.0 < *self.next_lsn, "compaction past the last appended record");
        // Encoded on the log's snapshot thread, not here.
        let snapshot = Box::new(move || postcard::to_allocvec(&snapshot).expect("records encode"));
        self.fx.wal.push(WalCmd::Compact { stream, upto, snapshot });
    }

    fn rng(&mut self) -> &mut Rng {
        self.rng
    }

    fn observe(&mut self, name: &'static str, value: u64) {
        metrics::histogram!("meridian_observation", "name" => name).record(value as f64);
    }

    fn count(&mut self, counter: &'static str, delta: u64) {
        self.fx.counters.push((counter, delta));
    }

    fn complete(&mut self, request: RequestId, outcome: Outcome) {
        self.fx.completions.push((request, outcome));
    }
}

/// A handler that runs this long holds up every event behind it; it is
/// logged.
const SLOW_HANDLER: std::time::Duration = std::time::Duration::from_millis(20);

/// Decodes the records a restarted node recovers: every stream's snapshot
/// (in stream order), then the records in LSN order.
pub fn decode_recovered<P: Protocol>(rec: &Recovered) -> Result<Vec<P::Record>, String> {
    let snapshots = rec.snapshots.iter().map(|(_, l, b)| (*l, b));
    let records = rec.records.iter().map(|(l, _, b)| (*l, b));
    snapshots
        .chain(records)
        .map(|(lsn, bytes)| {
            frame::decode::<P::Record>(bytes).map_err(|e| {
                format!("write-ahead log record {} does not decode ({e}): written by another version?", lsn.0)
            })
        })
        .collect()
}

/// Everything the loop needs besides its channels.
pub struct NodeParts {
    pub cfg: Arc<ClusterConfig>,
    pub me: NodeId,
    pub transport: Transport,
    pub wal: WalWriter,
    pub next_lsn: u64,
}

/// The loop's channels.
pub struct NodeInputs<M> {
    pub peers: mpsc::Receiver<(NodeId, M)>,
    pub requests: mpsc::Receiver<Request>,
    pub durable: watch::Receiver<u64>,
}

struct Pending {
    reply: oneshot::Sender<Outcome>,
    since: Instant,
}

struct NodeLoop<P: Protocol> {
    parts: NodeParts,
    process: P::Node,
    timers: Timers<P::Timer>,
    rng: Rng,
    fx: Effects<P::Msg>,
    local: VecDeque<P::Msg>,
    pending: HashMap<RequestId, Pending>,
    next_request: u64,
    persisted: u64,
    encode_buf: Vec<u8>,
}

impl<P: Protocol> NodeLoop<P> {
    fn handle(&mut self, f: impl FnOnce(&mut P::Node, &mut RtEnv<'_, P>)) {
        let cfg = self.parts.cfg.clone();
        let me = self.parts.me;
        let started = Instant::now();
        {
            let mut env = RtEnv::<P> {
                me,
                topology: &cfg.topology,
                offset_ns: cfg.offset_ns[me.index()],
                epsilon_ns: cfg.epsilon_us * 1_000,
                timers: &mut self.timers,
                next_lsn: &mut self.parts.next_lsn,
                rng: &mut self.rng,
                fx: &mut self.fx,
            };
            f(&mut self.process, &mut env);
        }
        let took = started.elapsed();
        metrics::histogram!("meridian_handler_seconds").record(took.as_secs_f64());
        if took >= SLOW_HANDLER {
            // Every request queued behind it waited as long: worth a line.
            tracing::warn!(took_ms = took.as_millis() as u64, "a protocol handler ran long");
        }
        self.carry_out();
    }

    /// Executes what the last handler asked for.
    fn carry_out(&mut self) {
        if !self.fx.wal.is_empty() {
            metrics::counter!("meridian_wal_appends_total").increment(self.fx.wal.len() as u64);
            self.parts.wal.submit(std::mem::take(&mut self.fx.wal));
        }
        for (to, msg) in std::mem::take(&mut self.fx.sends) {
            if to == self.parts.me {
                self.local.push_back(msg);
                continue;
            }
            self.encode_buf.clear();
            if let Err(e) = frame::encode(&msg, &mut self.encode_buf, frame::MAX_PEER_FRAME_BYTES) {
                // Dropped like a lost message, which every protocol
                // survives; the node itself must not stop.
                tracing::error!(to = to.0, error = %e, "dropping a message too large for the wire");
                metrics::counter!("meridian_net_too_large_total").increment(1);
                continue;
            }
            self.parts.transport.send(to, self.encode_buf.clone());
        }
        for (request, outcome) in std::mem::take(&mut self.fx.completions) {
            self.complete(request, outcome);
        }
        for (name, delta) in self.fx.counters.drain(..) {
            metrics::counter!("meridian_protocol_counter_total", "counter" => name).increment(delta);
        }
    }

    fn complete(&mut self, request: RequestId, outcome: Outcome) {
        let Some(p) = self.pending.remove(&request) else { return };
        let label = match &outcome {
            Outcome::Committed { .. } => "committed",
            Outcome::Aborted { .. } => "aborted",
            Outcome::Unknown => "unknown",
        };
        metrics::counter!("meridian_txns_total", "outcome" => label).increment(1);
        if label == "committed" {
            metrics::histogram!("meridian_txn_latency_seconds").record(p.since.elapsed().as_secs_f64());
        }
        // The asker may have gone away; its outcome is then nobody's.
        let _ = p.reply.send(outcome);
    }

    fn on_request(&mut self, req: Request) {
        if self.pending.len() >= MAX_PENDING_REQUESTS {
            let reason = meridian_core::AbortReason::Rejected;
            let _ = req.reply.send(Outcome::Aborted { reason });
            metrics::counter!("meridian_txns_total", "outcome" => "rejected").increment(1);
            return;
        }
        let id = RequestId(self.next_request);
        self.next_request += 1;
        self.pending.insert(id, Pending { reply: req.reply, since: Instant::now() });
        self.handle(|p, env| p.on_request(env, id, req.program));
    }

    fn fire_due_timers(&mut self) {
        let now = Instant::now();
        while let Some(tag) = self.timers.pop_due(now) {
            self.handle(|p, env| p.on_timer(env, tag));
        }
    }

    fn drain_local(&mut self) {
        let me = self.parts.me;
        for _ in 0..LOCAL_BATCH_MAX {
            let Some(msg) = self.local.pop_front() else { return };
            self.handle(|p, env| p.on_message(env, me, msg));
        }
    }

    fn report_gauges(&self, inbox: usize) {
        metrics::gauge!("meridian_inbox_depth").set(inbox as f64);
        metrics::gauge!("meridian_outgoing_queued").set(self.parts.transport.queued() as f64);
        metrics::gauge!("meridian_pending_requests").set(self.pending.len() as f64);
    }
}

/// Runs the process of `parts.me` until `stop` resolves. `durable` holds
/// the records recovered from the log (snapshot first), empty on a first
/// start.
pub async fn run<P: Protocol>(
    parts: NodeParts,
    durable: Vec<P::Record>,
    mut inputs: NodeInputs<P::Msg>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    let cfg = parts.cfg.clone();
    let deployment = Deployment {
        topology: cfg.topology.clone(),
        params: cfg.params.clone(),
        epsilon_us: cfg.epsilon_us,
        latency: std::sync::Arc::new(cfg.matrix.clone()),
    };
    let process = P::build(&deployment, parts.me)?;
    let boot_ns = system_ns();
    let mut node = NodeLoop::<P> {
        rng: Rng::derive(cfg.seed ^ boot_ns, 1 + u64::from(parts.me.0)),
        parts,
        process,
        timers: Timers::new(),
        fx: Effects { sends: Vec::new(), wal: Vec::new(), completions: Vec::new(), counters: Vec::new() },
        local: VecDeque::new(),
        pending: HashMap::new(),
        next_request: 0,
        persisted: 0,
        encode_buf: Vec::new(),
    };
    node.handle(|p, env| p.on_start(env, durable));
    tokio::pin!(stop);
    let mut turns: u64 = 0;
    loop {
        node.drain_local();
        turns += 1;
        if turns % 64 == 0 {
            node.report_gauges(inputs.peers.len());
        }
        let deadline = node.timers.next_deadline();
        let sleep_until = match deadline {
            _ if !node.local.is_empty() => Instant::now(),
            Some(at) => at,
            None => Instant::now() + Duration::from_secs(3600),
        };
        tokio::select! {
            _ = &mut stop => return Ok(()),
            changed = inputs.durable.changed() => {
                changed.map_err(|_| "the write-ahead log writer stopped".to_string())?;
                let upto = *inputs.durable.borrow_and_update();
                if upto > node.persisted {
                    node.persisted = upto;
                    node.handle(|p, env| p.on_persisted(env, Lsn(upto)));
                }
            }
            Some((from, msg)) = inputs.peers.recv() => node.handle(|p, env| p.on_message(env, from, msg)),
            Some(req) = inputs.requests.recv() => node.on_request(req),
            _ = tokio::time::sleep_until(sleep_until) => {
                node.fire_due_timers();
            }
        }
    }
}
