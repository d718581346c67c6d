//! The node loop: one protocol process driven by real events.
//!
//! The loop owns the process and hands it, one at a time, messages from
//! peers, client requests, due timers and persistence acknowledgements,
//! through core's `Recorder`: the clock is read once per event, and what
//! the handler does is recorded as `Effects` and carried out when it
//! returns (the simulator carries each out at the call instead): appends go
//! to the write-ahead log as one submission (group commit; `on_persisted`
//! follows the fsync), messages go to the transport (self-sends straight
//! back to the loop), outcomes to whoever asked.
//!
//! Local clock = system clock + the node's injected offset; TrueTime is the
//! system clock ± ε; timers run on the monotonic clock. This module must
//! never know which protocol it runs, nor block on a peer.

use crate::config::ClusterConfig;
use crate::frame;
use crate::transport::{self, Inbound, Transport};
use crate::wal::{Recovered, WalCmd, WalWriter};
use meridian_core::{
    Ctx, Deployment, Effect, Effects, EffectsOf, Lsn, NextIds, NodeId, Now, Outcome, Process, Program, Protocol,
    Recorder, RequestId, Rng, TimerId, TrueTime,
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
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    live: HashMap<u64, T>,
}

impl<T> Timers<T> {
    fn new() -> Self {
        Timers { heap: BinaryHeap::new(), live: HashMap::new() }
    }

    /// Arms timer `id` (numbered by the handler's recorder) to fire
    /// `after_ns` after the event that set it.
    fn set(&mut self, event_at: Instant, id: TimerId, after_ns: u64, tag: T) {
        self.heap.push(Reverse((event_at + Duration::from_nanos(after_ns), id.0)));
        self.live.insert(id.0, tag);
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

fn system_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The monotonic clock's origin: the first reading in this process.
fn monotonic_origin() -> Instant {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// What leaves a node after its handler's appends are submitted.
enum Out<M> {
    Send(NodeId, M),
    Complete(RequestId, Outcome),
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
    pub peers: mpsc::Receiver<Inbound<M>>,
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
    ids: NextIds,
    effects: EffectsOf<P>,
    /// A handler's messages and outcomes, held until its appends are
    /// submitted (kept for its allocation).
    outbox: Vec<Out<P::Msg>>,
    local: VecDeque<P::Msg>,
    pending: HashMap<RequestId, Pending>,
    next_request: u64,
    persisted: u64,
    encode_buf: Vec<u8>,
}

impl<P: Protocol> NodeLoop<P> {
    /// The clock readings of an event handled now, taken once: local clock
    /// = system clock + the node's injected offset; TrueTime = the system
    /// clock ± ε (injected offsets skew the local clock only, as the
    /// simulator's clock model does); the monotonic clock = time since the
    /// process's first reading.
    fn now(&self, at: Instant) -> Now {
        let cfg = &self.parts.cfg;
        let system = system_ns();
        let epsilon_ns = cfg.epsilon_us * 1_000;
        Now {
            clock_ns: (system as i64).saturating_add(cfg.offset_ns[self.parts.me.index()]).max(0) as u64,
            monotonic_ns: at.saturating_duration_since(monotonic_origin()).as_nanos() as u64,
            truetime: TrueTime { earliest_ns: system.saturating_sub(epsilon_ns), latest_ns: system + epsilon_ns },
        }
    }

    /// Runs one handler with the clock read once, then carries out its
    /// effects.
    fn handle(&mut self, f: impl FnOnce(&mut P::Node, &mut Ctx<'_, P>)) {
        let cfg = self.parts.cfg.clone();
        let started = Instant::now();
        let now = self.now(started);
        let mut effects = std::mem::take(&mut self.effects);
        f(
            &mut self.process,
            &mut Recorder::new(self.parts.me, &cfg.topology, now, &mut self.rng, &mut self.ids, &mut effects),
        );
        let took = started.elapsed();
        metrics::histogram!("meridian_handler_seconds").record(took.as_secs_f64());
        if took >= SLOW_HANDLER {
            // Every request queued behind it waited as long: worth a line.
            tracing::warn!(took_ms = took.as_millis() as u64, "a protocol handler ran long");
        }
        self.carry_out(started, &mut effects);
        self.effects = effects;
    }

    /// Executes what the last handler asked for: its appends go to the log
    /// as one submission (group commit; the fsync starts first), then its
    /// messages and outcomes leave in the order it made them. A message
    /// that must wait for durability is held by the protocol, not here.
    fn carry_out(&mut self, event_at: Instant, effects: &mut EffectsOf<P>) {
        let mut wal = Vec::new();
        let mut outbox = std::mem::take(&mut self.outbox);
        for effect in effects.drain() {
            match effect {
                Effect::Send { to, msg } => outbox.push(Out::Send(to, msg)),
                Effect::Complete { request, outcome } => outbox.push(Out::Complete(request, outcome)),
                Effect::SetTimer { id, after_ns, timer } => self.timers.set(event_at, id, after_ns, timer),
                Effect::CancelTimer { id } => self.timers.cancel(id),
                Effect::Append { stream, lsn, record } => {
                    let bytes = postcard::to_allocvec(&record).expect("records encode");
                    wal.push(WalCmd::Append(lsn, stream, bytes));
                }
                Effect::Compact { stream, upto, snapshot } => {
                    // Encoded on the log's snapshot thread, not here.
                    let snapshot = Box::new(move || postcard::to_allocvec(&snapshot).expect("records encode"));
                    wal.push(WalCmd::Compact { stream, upto, snapshot });
                }
                // The real runtime spends real CPU instead.
                Effect::ChargeCpu { .. } | Effect::ChargeKeys { .. } => {}
                Effect::Count { counter, delta } => {
                    metrics::counter!("meridian_protocol_counter_total", "counter" => counter).increment(delta);
                }
                Effect::Observe { name, value } => {
                    metrics::histogram!("meridian_observation", "name" => name).record(value as f64);
                }
            }
        }
        if !wal.is_empty() {
            metrics::counter!("meridian_wal_appends_total").increment(wal.len() as u64);
            self.parts.wal.submit(wal);
        }
        for out in outbox.drain(..) {
            match out {
                Out::Send(to, msg) => self.send(to, msg),
                Out::Complete(request, outcome) => self.complete(request, outcome),
            }
        }
        self.outbox = outbox;
    }

    fn send(&mut self, to: NodeId, msg: P::Msg) {
        if to == self.parts.me {
            self.local.push_back(msg);
            return;
        }
        self.encode_buf.clear();
        if let Err(e) = frame::encode(&msg, &mut self.encode_buf, frame::MAX_PEER_FRAME_BYTES) {
            // Dropped like a lost message, which every protocol survives;
            // the node itself must not stop.
            tracing::error!(to = to.0, error = %e, "dropping a message too large for the wire");
            metrics::counter!("meridian_net_too_large_total").increment(1);
            return;
        }
        self.parts.transport.send(to, self.encode_buf.clone());
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
        self.process.state_sizes(&mut |structure, entries| {
            metrics::gauge!("meridian_state_entries", "structure" => structure).set(entries as f64);
        });
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
    let next_lsn = parts.next_lsn;
    let mut node = NodeLoop::<P> {
        rng: Rng::derive(cfg.seed ^ boot_ns, 1 + u64::from(parts.me.0)),
        parts,
        process,
        timers: Timers::new(),
        ids: NextIds { timer: 1, lsn: next_lsn },
        effects: Effects::new(),
        outbox: Vec::new(),
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
            Some(Inbound { from, msg, arrived }) = inputs.peers.recv() => {
                if transport::is_stale(arrived, node.parts.cfg.stale) {
                    transport::count_stale();
                } else {
                    node.handle(|p, env| p.on_message(env, from, msg));
                }
            }
            Some(req) = inputs.requests.recv() => node.on_request(req),
            _ = tokio::time::sleep_until(sleep_until) => {
                node.fire_due_timers();
            }
        }
    }
}
