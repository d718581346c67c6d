//! `tiga`: consolidated concurrency control and consensus with synchronized
//! clocks, after "Tiga: Accelerating Geo-Distributed Transactions with
//! Synchronized Clocks". Promises strict serializability.
//!
//! Roles: `coordinator.rs` (§3.1 timestamps, §3.4/§3.7 quorum checks,
//! Appendix E inquiries), `server.rs` (the server's core state and dispatch;
//! §3.2-3.4: queue, release, optimistic execution, fast replies; the
//! transitions that span concerns: restarts, checkpoints adopted, a view's
//! log installed), `vm.rs` (the view manager). The server's concerns, each a
//! struct with private fields taking the server's `Core` as a parameter:
//! `agreement.rs` (§3.5-3.6 timestamp agreement among leaders), `sync.rs`
//! (§3.7 log synchronization, slow path, commit-point), `checkpoint.rs` (§4
//! execution, checkpoints, at-most-once memory), `recovery.rs` (§4, Appendix
//! B: the new leader's view change), `reach.rs` (whether a leader still
//! hears from its followers, told to the view manager). Leaf structures: `hash.rs` (Appendix D
//! per-key incremental hashes), `log.rs` (the log and its points),
//! `queue.rs`, `conflict.rs`, `messages.rs`.
//!
//! # Commit path and analytical latency
//!
//! A coordinator in region `c` stamps `T` with `t = send + max_s OWD(c,
//! SQ_s) + Δ`, where `SQ_s` is the super quorum (`1 + f + ⌈f/2⌉` replicas,
//! leader included) of shard `s` closest to `c`. Every replica releases `T`
//! when its clock passes `t` and replies directly, so on the fast path
//!
//! ```text
//! latency(c) ≈ max_s (OWD(c → farthest of SQ_s) + OWD(farthest of SQ_s → c)) + Δ
//!            = max_s RTT(c, farthest of SQ_s) + Δ          (one wide-area round trip)
//! ```
//!
//! With co-located leaders the preventive mode's agreement costs a LAN
//! round trip. On `tiga-gcp` (3 replicas, so the super quorum is all of
//! them, Δ = 10 ms): South Carolina 117 + 10 = 127 ms (Brazil is farthest),
//! Finland 221 + 10 = 231 ms, Brazil 221 + 10 = 231 ms, Hong Kong 309 + 10 =
//! 319 ms. The slow path adds the leader's log synchronization to a
//! follower and the inquiry (0.5–1 extra WRTT).
//!
//! # Counters
//!
//! `fast_path`, `slow_path` (commits by path), `rollbacks` (revoked
//! optimistic executions), `timestamp_updates` (late arrivals re-stamped by
//! a leader, and agreement moving a leader's timestamp), `view_changes`,
//! `resubmissions`, `timestamp_notifications`, `slow_syncs`,
//! `transactions_fetched`, `unknown_outcomes`, `checkpoints` (taken),
//! `checkpoints_sent` / `checkpoints_installed` (to and at lagging
//! servers), `recovery_dropped` (uncommitted transactions a view change
//! dropped), `replay_mismatches` (must stay 0).

mod agreement;
mod checkpoint;
mod conflict;
mod coordinator;
pub mod hash;
pub mod log;
pub mod messages;
mod queue;
mod reach;
mod recovery;
mod server;
mod sync;
#[cfg(test)]
mod tests;
mod vm;

pub use coordinator::Coordinator;
pub use messages::{LogEntry, Mode, Msg, Record, Stamp, Timer, TxnBody, View};
pub use server::{Server, Status};
pub use vm::ViewManager;

use meridian_core::{
    Consistency, CounterDoc, Deployment, NodeId, ParamDoc, ParamReader, ParamValue, Params, Protocol, Role, Rounding,
    ShardId, Topology,
};
use meridian_mechanisms::cow_map::checkpoint_interval;
use std::sync::Arc;

pub struct Tiga;

/// The protocol's knobs (documented in [`PARAMS`]).
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Δ, added to every headroom (may be negative).
    pub headroom_delta_ns: i64,
    pub owd_percentile: f64,
    pub default_owd_ns: u64,
    /// §6: stamp against the closest simple quorum instead of a super quorum.
    pub simple_quorum_timestamps: bool,
    /// `None`: the view manager chooses from measured delays.
    pub preventive: Option<bool>,
    /// Leaders closer than this (measured one-way delay) count as
    /// co-located for the preventive mode (§3.8).
    pub colocation_threshold_ns: u64,
    /// Test-only: false disables the second round of timestamp agreement.
    pub second_round: bool,
    /// Test-only: true lets `f + 1` replies (leader included) commit on the
    /// fast path, which §3.4 shows a view change cannot recover.
    pub simple_fast_quorum: bool,
    pub server_tick_ns: u64,
    pub coordinator_tick_ns: u64,
    pub inquiry_after_ticks: u64,
    pub retry_ticks: u64,
    pub max_attempts: u32,
    /// One-way-delay probe period (coordinators and servers, §3.1, §3.8).
    pub probe_interval_ns: u64,
    /// Server ticks a follower's log sync may stall before it is resent.
    pub resync_after_ticks: u32,
    /// Period of resending what a view change or an agreement waits for
    /// (`resync_after_ticks` server ticks).
    pub resend_ns: u64,
    pub fetch_after_ticks: u32,
    /// Servers' heartbeat period to the view manager.
    pub heartbeat_ns: u64,
    /// Silence after which the view manager replaces a leader.
    pub leader_timeout_ns: u64,
    pub vm_tick_ns: u64,
    /// Executed entries past the last checkpoint that trigger the next.
    pub checkpoint_entries: u64,
    /// Keys in the store per entry the next checkpoint waits for at least
    /// (0: none): see [`Config::checkpoint_every`].
    pub checkpoint_keys_per_entry: u64,
    /// How long a settled transaction's timestamp is remembered
    /// (`checkpoint.rs`).
    pub settled_retention_ns: u64,
    /// Conflict stamps further than this behind the newest are folded into
    /// a floor (`conflict.rs`; 0: every key keeps its stamp).
    pub conflict_window_ns: u64,
}

pub const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        name: "headroom_delta_ms",
        default: "10",
        doc: "Δ added to every transaction's headroom (§3.1); may be negative (Figure 13's sweep)",
    },
    ParamDoc {
        name: "owd_percentile",
        default: "50",
        doc: "percentile of the recent one-way-delay samples used as each server's estimate",
    },
    ParamDoc { name: "default_owd_ms", default: "100", doc: "delay assumed for a server before any sample" },
    ParamDoc {
        name: "timestamp_quorum",
        default: "\"super\"",
        doc: "\"super\": stamp for the closest super quorum (fast path); \"simple\": for the closest simple quorum (§6)",
    },
    ParamDoc {
        name: "preventive",
        default: "\"auto\"",
        doc: "true: agree on timestamps before executing (co-located leaders); false: detective mode; \"auto\": chosen from the leaders' placement",
    },
    ParamDoc {
        name: "colocation_threshold_ms",
        default: "10",
        doc: "with preventive = \"auto\": leaders whose measured one-way delays are all below this are co-located, and the view manager picks the preventive mode (§3.8)",
    },
    ParamDoc {
        name: "second_round",
        default: "true",
        doc: "test-only: false disables agreement's second round, which allows timestamp inversion (§3.6)",
    },
    ParamDoc {
        name: "fast_quorum",
        default: "\"super\"",
        doc: "test-only: \"simple\" accepts f + 1 fast replies, which a leader failure can lose (§3.4's example)",
    },
    ParamDoc {
        name: "server_tick_ms",
        default: "20",
        doc: "servers' period for log-sync heartbeats, re-sends and fetches",
    },
    ParamDoc {
        name: "coordinator_tick_ms",
        default: "10",
        doc: "coordinators' period for slow-path inquiries (Appendix E) and retries",
    },
    ParamDoc {
        name: "inquiry_after_ms",
        default: "10",
        doc: "how long after submitting a coordinator starts asking followers for the slow path",
    },
    ParamDoc {
        name: "retry_ms",
        default: "2000",
        doc: "resubmit (same id; same timestamp within a view) a transaction not committed this long",
    },
    ParamDoc { name: "max_attempts", default: "20", doc: "submissions before the outcome is reported unknown" },
    ParamDoc {
        name: "probe_interval_ms",
        default: "500",
        doc: "period of one-way-delay probes: coordinators' to every server, servers' to the other shards' servers",
    },
    ParamDoc {
        name: "heartbeat_ms",
        default: "100",
        doc: "period of every server's heartbeat to the view manager (§4)",
    },
    ParamDoc {
        name: "leader_timeout_ms",
        default: "1000",
        doc: "heartbeat silence after which the view manager replaces a shard leader (§4, Algorithm 4); also how long a leader hears from fewer than f followers before it asks to be replaced",
    },
    ParamDoc {
        name: "checkpoint_entries",
        default: "8192",
        doc: "executed log entries past the last checkpoint after which a server folds them into a new one (§4)",
    },
    ParamDoc {
        name: "checkpoint_keys_per_entry",
        default: "4",
        doc: "a checkpoint also waits for one executed entry per this many keys in the store (0: never): a fold copies about every chunk of the maps it writes, so this bounds that cost per entry",
    },
    ParamDoc {
        name: "conflict_window_ms",
        default: "3000",
        doc: "rMap and wMap keep each key's stamp while it is within this of the newest and fold older ones into one floor that stands for every key (0: keep every key's, as §3.2 does); an arrival stamped below the floor is re-stamped (leader) or held (follower), counted in conflict_floor_updates",
    },
    ParamDoc {
        name: "fetch_after_ms",
        default: "500",
        doc: "a leader fetches a transaction other leaders announced but it never received",
    },
];

/// Every counter Tiga reports besides Multi-Paxos's (its view manager's).
pub const COUNTERS: &[CounterDoc] = &[
    CounterDoc { name: "fast_path", doc: "commits on the fast path (a super quorum of matching fast replies, §3.4)" },
    CounterDoc { name: "slow_path", doc: "commits that waited for the slow path (log synchronization, §3.7)" },
    CounterDoc { name: "fast_replies_leader", doc: "fast replies sent by shard leaders" },
    CounterDoc { name: "fast_replies_follower", doc: "fast replies sent by followers" },
    CounterDoc { name: "rollbacks", doc: "optimistic executions revoked when agreement moved a timestamp (§3.5)" },
    CounterDoc { name: "timestamp_updates", doc: "late arrivals re-stamped and timestamps moved by agreement" },
    CounterDoc {
        name: "conflict_floor_updates",
        doc: "arrivals re-stamped or held only because their stamp fell below the conflict maps' floor (conflict_window_ms)",
    },
    CounterDoc { name: "timestamp_notifications", doc: "timestamps a leader announced to the other shards' leaders" },
    CounterDoc { name: "transactions_fetched", doc: "bodies a leader fetched after another shard announced them" },
    CounterDoc { name: "slow_syncs", doc: "log entries a follower took in from the leader's log sync" },
    CounterDoc { name: "resubmissions", doc: "coordinator resubmissions (retry_ms, new views)" },
    CounterDoc { name: "unknown_outcomes", doc: "requests whose client was told the outcome is unknown" },
    CounterDoc { name: "orphans_committed", doc: "transactions reported unknown that later committed" },
    CounterDoc { name: "orphans_given_up", doc: "unknown transactions no longer resubmitted past the bound" },
    CounterDoc { name: "refused_not_one_shot", doc: "procedures refused because a part needs another shard's reads" },
    CounterDoc { name: "view_changes", doc: "views the view manager installed (§4)" },
    CounterDoc { name: "views_preventive", doc: "of those, in preventive mode (§3.8)" },
    CounterDoc { name: "views_detective", doc: "of those, in detective mode" },
    CounterDoc { name: "view_change_completions", doc: "view changes a new leader completed (Algorithm 5)" },
    CounterDoc {
        name: "view_confirmations",
        doc: "view changes a new leader confirmed: every participant's new log durable at f + 1 servers (round 3)",
    },
    CounterDoc { name: "verify_messages", doc: "timestamp verification messages of view changes" },
    CounterDoc {
        name: "leaders_cut_off",
        doc: "heartbeats in which a leader told the view manager it had heard from fewer than f of its followers for leader_timeout_ms",
    },
    CounterDoc { name: "recovery_raised", doc: "timestamps raised while rebuilding a view's log" },
    CounterDoc { name: "recovery_dropped", doc: "transactions dropped from a rebuilt log (not committed anywhere)" },
    CounterDoc {
        name: "replay_mismatches",
        doc: "replayed entries whose result differed from the recorded one (must stay 0)",
    },
    CounterDoc { name: "checkpoints", doc: "checkpoints taken (the log folded behind them)" },
    CounterDoc { name: "checkpoints_sent", doc: "checkpoints a leader sent to replicas behind its log's base" },
    CounterDoc { name: "checkpoints_installed", doc: "checkpoints a replica adopted from its leader" },
];

impl Config {
    /// Executed entries past the last checkpoint that trigger the next, for
    /// a store of `keys` keys: `checkpoint_entries`, or one entry per
    /// `checkpoint_keys_per_entry` keys if that is more
    /// (`cow_map::checkpoint_interval`). A fold copies about every chunk of
    /// the store, key hashes and conflict stamps it shares with the previous
    /// checkpoint, so folding at least keys / k entries at a time keeps that
    /// copy at about k keys' worth per entry as the store grows.
    pub fn checkpoint_every(&self, keys: usize) -> u64 {
        checkpoint_interval(self.checkpoint_entries, keys, self.checkpoint_keys_per_entry)
    }

    pub fn from_params(params: &Params) -> Result<Config, String> {
        let p = ParamReader::new(params, Tiga::NAME, PARAMS)?;
        let ms = |name: &str| p.ms_ns(name);
        let delta_ms = p.f64_in("headroom_delta_ms", -86_400_000.0..=86_400_000.0)?;
        let percentile = p.f64_in("owd_percentile", 0.0..=100.0)?;
        let simple = p.choice("timestamp_quorum", &["super", "simple"])? == "simple";
        let simple_fast_quorum = p.choice("fast_quorum", &["super", "simple"])? == "simple";
        let preventive = match p.value("preventive") {
            None => None,
            Some(ParamValue::Bool(b)) => Some(*b),
            Some(ParamValue::Str(s)) if s == "auto" => None,
            Some(other) => return Err(format!("parameter `preventive` must be true, false or \"auto\", got {other}")),
        };
        let max_attempts = p.count("max_attempts", 1..=1_000_000)?;
        let checkpoint_entries = p.count("checkpoint_entries", 1..=1 << 30)?;
        let checkpoint_keys_per_entry = p.count("checkpoint_keys_per_entry", 0..=1 << 30)?;
        let server_tick_ns = ms("server_tick_ms")?;
        let coordinator_tick_ns = ms("coordinator_tick_ms")?;
        // Ticks enough to cover the duration: nothing is given up early.
        let ticks = |name: &str, tick_ns: u64| p.ms_ticks(name, tick_ns, Rounding::Up, 1..=1 << 30);
        Ok(Config {
            headroom_delta_ns: (delta_ms * 1e6).round() as i64,
            owd_percentile: percentile,
            default_owd_ns: ms("default_owd_ms")?,
            simple_quorum_timestamps: simple,
            preventive,
            colocation_threshold_ns: ms("colocation_threshold_ms")?,
            second_round: p.bool("second_round")?,
            simple_fast_quorum,
            server_tick_ns,
            coordinator_tick_ns,
            inquiry_after_ticks: ticks("inquiry_after_ms", coordinator_tick_ns)?,
            retry_ticks: ticks("retry_ms", coordinator_tick_ns)?,
            max_attempts: max_attempts as u32,
            probe_interval_ns: ms("probe_interval_ms")?,
            resync_after_ticks: 5,
            resend_ns: 5 * server_tick_ns,
            fetch_after_ticks: ticks("fetch_after_ms", server_tick_ns)? as u32,
            heartbeat_ns: ms("heartbeat_ms")?,
            leader_timeout_ns: ms("leader_timeout_ms")?,
            vm_tick_ns: 50_000_000,
            checkpoint_entries,
            checkpoint_keys_per_entry,
            // Its coordinator resubmits no more (its watermark passed it):
            // this is the margin for announcements still in flight between
            // leaders.
            settled_retention_ns: 10_000_000_000,
            conflict_window_ns: meridian_core::time::ms_to_ns(p.f64_in("conflict_window_ms", 0.0..=86_400_000.0)?),
        })
    }
}

/// The view every node starts in: the topology's initial leaders, in
/// preventive mode when they share a region (unless configured).
pub fn initial_view(topo: &Topology, cfg: &Config) -> View {
    let g_vec: Vec<u64> = (0..topo.shards).map(|s| u64::from(topo.initial_leader_index(ShardId(s)))).collect();
    let leader_regions: Vec<_> = (0..topo.shards).map(|s| topo.region_of(topo.initial_leader(ShardId(s)))).collect();
    let colocated = leader_regions.windows(2).all(|w| w[0] == w[1]);
    let preventive = cfg.preventive.unwrap_or(colocated);
    View { g_view: 1, g_vec, mode: if preventive { messages::Mode::Preventive } else { messages::Mode::Detective } }
}

meridian_core::roles! {
    /// A node of a `tiga` deployment.
    pub enum Node for Tiga {
        Server(Server),
        Coordinator(Coordinator),
        ViewManager(ViewManager),
    }
}

impl Protocol for Tiga {
    const NAME: &'static str = "tiga";
    const CONSISTENCY: Consistency = Consistency::StrictSerializable;
    /// One shot (§2): every shard runs its piece where it lives, so a
    /// procedure must be made of anchored parts (TPC-C's are).
    const SHAPES: meridian_core::Shapes = meridian_core::Shapes::ONE_SHOT;
    type Msg = Msg;
    type Record = Record;
    type Timer = Timer;
    type Node = Node;

    fn params() -> &'static [ParamDoc] {
        PARAMS
    }

    fn counters() -> Vec<CounterDoc> {
        [COUNTERS, meridian_mechanisms::paxos::COUNTERS].concat()
    }

    /// The view manager (§4): three replicas, one per server region.
    fn services(_params: &Params) -> Vec<meridian_core::ServiceSpec> {
        vec![meridian_core::ServiceSpec::round_robin("viewmgr", 3)]
    }

    fn build(d: &Deployment, node: NodeId) -> Result<Node, String> {
        let cfg = Config::from_params(&d.params)?;
        let topo = &d.topology;
        let view = initial_view(topo, &cfg);
        match &topo.node(node).role {
            Role::Replica { shard, replica } => {
                Ok(Node::Server(Box::new(Server::new(Arc::clone(topo), *shard, *replica, view, cfg))))
            }
            Role::Client { .. } => Ok(Node::Coordinator(Box::new(Coordinator::new(node, Arc::clone(topo), view, cfg)))),
            Role::Service { kind, .. } if kind == "viewmgr" => {
                Ok(Node::ViewManager(Box::new(ViewManager::new(Arc::clone(topo), node, view, cfg))))
            }
            Role::Service { kind, .. } => Err(format!("tiga has no `{kind}` service")),
        }
    }
}

#[cfg(test)]
mod param_tests {
    use super::*;

    #[test]
    fn every_documented_parameter_parses_at_its_default() {
        assert!(Config::from_params(&Params::new()).is_ok());
        for (name, p) in meridian_core::params::each_default_alone(PARAMS) {
            assert!(Config::from_params(&p).is_ok(), "{name}");
        }
    }
}
