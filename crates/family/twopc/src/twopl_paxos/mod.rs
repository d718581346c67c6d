//! `2pl-paxos`: two-phase locking with wound-wait, two-phase commit across
//! shards, every shard a Multi-Paxos group with a leader — the "2PL+Paxos"
//! baseline of the Tiga paper (§5, after Janus's codebase) and the
//! Spanner-like baseline of the others. Promises strict serializability.
//!
//! With `lock_at = "home"` it is instead the SLOG paper's **2PL-coord**
//! (§4): "a traditional distributed 2PL algorithm where the lock manager for
//! a granule is located in its home partition" — NuoDB's chairmanship, with
//! locks instead of its MVCC (see below).
//!
//! Roles: `replica.rs` (shard replica: Paxos member; while leading, the lock
//! table), `coordinator.rs` (client-side coordinator), `recovery.rs`
//! (in-doubt transactions after coordinator or leader failure),
//! `messages.rs`. Concerns: `log.rs` (a participant's log and the state
//! machine applied from it), `participant.rs` (who locks a key, and where),
//! `copies.rs` (a home replica's copies of its shard's other homes).
//!
//! # Commit path and analytical latency
//!
//! A client in region `c` runs each transaction as
//! 1. execute: one round trip to every participant leader `L_s` (lock the
//!    piece's keys with wound-wait, read them);
//! 2. prepare: one round trip to every `L_s`, during which `L_s` replicates
//!    the prepare record to a majority of its group (one round trip from
//!    `L_s` to its `⌈(n+1)/2⌉-1`-th nearest peer, plus an fsync);
//! 3. the outcome is known when every vote is in; the decision is sent
//!    afterwards, off the client's path. A leader acknowledges it only once
//!    its log holds it — a commit applied, an abort logged even where the
//!    transaction never prepared — and refuses a commit its log has no
//!    prepare for: a leader deposed without knowing it confirms nothing, so
//!    a coordinator's watermark never passes a transaction a participant
//!    still holds prepared.
//!
//! With `RTT(a, b)` the round trip between regions and `Q_s` the majority
//! round trip of shard `s`'s leader:
//!
//! ```text
//! latency(c) ≈ max_s RTT(c, L_s) + max_s (RTT(c, L_s) + Q_s) + fsync
//! ```
//!
//! On `tiga-gcp` with leaders co-located in South Carolina (Q = RTT(SC, FI)
//! = 114 ms): South Carolina 0.2 + 114.2 ≈ 114 ms, Finland 114 + 228 =
//! 342 ms, Brazil 117 + 231 = 348 ms, Hong Kong 197 + 311 = 508 ms (plus
//! jitter, queueing and lock waits). `tests/twopl_paxos.rs` holds a run to
//! this formula.
//!
//! # `lock_at = "home"`: SLOG's 2PL-coord
//!
//! Every key is mastered at its home region — the one SLOG starts from,
//! `KeyLayout::home_of`; 2PL-coord never remasters — and a participant is a
//! shard's **home partition**: the shard's keys homed at one region, whose
//! lock table, reads and prepare records live at the shard's replica in
//! that region (`participant.rs`). That replica is the only member of its
//! partition's log: it leads from the start, chooses an entry as soon as
//! its own fsync makes it durable, and votes then — no wide-area message on
//! a transaction's path, as in SLOG-B and NuoDB. Every tick it pushes what
//! it chose to the shard's other replicas, which learn the log in order
//! (Multi-Paxos learners) and apply it to a copy (`copies.rs`): the copies
//! converge, asynchronously, and every simulated run compares them at the
//! end. Two-phase commit across home partitions, wound-wait, bounded
//! retries and cooperative termination are those of `lock_at = "leader"`.
//!
//! The commit path of a client in region `c` whose transaction touches home
//! partitions homed at regions `h`:
//!
//! ```text
//! latency(c) ≈ max_h RTT(c, h)            execute: lock and read at each home
//!            + max_h RTT(c, h) + fsync    prepare: durable at each home alone
//! ```
//!
//! A transaction whose keys are all homed at the client's region commits in
//! `2 × RTT(c, c) + fsync`: on `slog-six-regions` (0.5 ms inside a region)
//! with a 0.1-ms fsync, 1.1 ms, where SLOG's batches take 5 ms and
//! `lock_at = "leader"` at least one wide-area round trip to the leaders. A
//! multi-home one from Virginia homed at Virginia and Ireland takes 2 × 68 +
//! 0.1 = 136.1 ms. Its lock at a home `h` is taken `RTT(c, h)/2` after it
//! starts and released when the decision is applied there, `2 × max_h
//! RTT(c, h) + fsync + RTT(c, h)/2 + fsync` after it starts: every lock of a
//! multi-home transaction is held for about two of its coordinator's widest
//! round trips (136.2 ms in that example), across acquiring the other
//! locks, executing and committing. Conflicting transactions wait behind it
//! for that long, local ones included — the paper's explanation of
//! 2PL-coord's collapse with multi-home transactions under contention (§4.1,
//! Figures 1 and 7). `tests/twopl_paxos.rs` holds runs to both formulas.
//!
//! A home replica that is down serves nothing until it restarts: no other
//! replica takes its mastership (as in SLOG-B), so transactions on its keys
//! abort after `execute_timeout_ms` and retry, and participants prepared
//! with it wait for its answer. Nothing committed is lost: a vote leaves
//! only once the prepare is durable in the home's own log, a decision
//! takes effect only through that log, and a restarted home replica replays
//! it and re-takes the locks of its prepared transactions before it serves
//! again (after `election_timeout_ms`: the one member elects itself). The
//! copies lag by up to a tick and a one-way delay and are never read; they
//! keep the data on every replica, not the home's availability.
//! `lock_at = "home"` needs one replica of each shard in every server
//! region (`replicas_per_shard` = the number of server regions), as SLOG
//! does. docs/2pl-coord.md lists every choice made where the paper is
//! silent.
//!
//! | SLOG paper, §4 (2PL-coord) | here |
//! |---|---|
//! | "the lock manager for a granule is located in its home partition" | `participant.rs` (home partitions), `replica.rs` (their lock tables) |
//! | "all writes and reads to data are controlled by the chairman" | `coordinator.rs` (`server`: each key's home replica) |
//! | low-latency writes: no coordination for data mastered nearby | `mod.rs` `home_replica` (a log of one member), `log.rs` |
//! | the data replicated to every region | `copies.rs`, `meridian_mechanisms::paxos` (learners) |
//! | coordination across homes for multi-home transactions | two-phase commit as `lock_at = "leader"` |
//!
//! # Counters
//!
//! `retries` (attempts restarted after a wound or a lost leader),
//! `wounds`, `lock_leases_expired`, `in_doubt_queries`, `in_doubt_resolved`,
//! `unknown_outcomes`, `stale_leader_decisions` (a commit refused by a leader
//! whose log lacks its prepare: deposed without knowing it),
//! `leader_takeovers` (with `lock_at = "home"`: a home replica leading its
//! log, at start and after each restart), and the Paxos log's
//! `paxos_elections`, `paxos_leader_changes`, `paxos_leader_stepdowns`,
//! `paxos_prepares_ignored`, `paxos_pre_votes`.

mod coordinator;
mod copies;
#[cfg(test)]
mod handler_tests;
mod log;
mod messages;
mod participant;
mod recovery;
mod replica;

pub use coordinator::Coordinator;
pub use messages::{
    Cmd, Execute, Executed, LockRead, Msg, Prepare, PrepareRecord, Priority, Record, Refusal, ReplicaState, Timer,
};
pub use participant::{LockAt, Participant};
pub use replica::Replica;

use meridian_core::{
    Consistency, CounterDoc, Deployment, NodeId, ParamDoc, ParamReader, Params, Protocol, Role, Rounding, ShardId,
    Stream, Topology,
};
use meridian_mechanisms::paxos::{MultiPaxos, PaxosConfig};

pub struct TwoPlPaxos;

/// The protocol's knobs (documented in [`PARAMS`]).
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub execute_timeout_ns: u64,
    pub prepare_retry_ns: u64,
    pub decision_timeout_ns: u64,
    pub decide_retry_ns: u64,
    pub max_decide_rounds: u32,
    pub termination_tick_ns: u64,
    pub coordinator_tick_ns: u64,
    pub in_doubt_ticks: u32,
    pub lock_lease_ticks: u32,
    pub max_attempts: u32,
    pub retry_backoff_ns: u64,
    pub max_redirects: u32,
    pub outcomes_kept: usize,
    /// Most ids from a coordinator's oldest running attempt to its newest
    /// (`meridian_mechanisms::seq_window`); past it, requests are refused.
    /// Not a parameter: with the default timeouts an attempt ends within
    /// about 45 s, a span of about 22,000 ids at 500 requests a second.
    pub attempts_span_max: usize,
    pub lock_at: LockAt,
    pub paxos: PaxosConfig,
}

/// The default `Config::attempts_span_max`.
pub const ATTEMPTS_SPAN_MAX: usize = 1 << 17;

pub const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        name: "execute_timeout_ms",
        default: "3000",
        doc: "coordinator restarts an attempt whose locks are not all granted in time",
    },
    ParamDoc {
        name: "prepare_retry_ms",
        default: "1500",
        doc: "coordinator re-sends a missing prepare to every replica of the shard",
    },
    ParamDoc {
        name: "decision_timeout_ms",
        default: "30000",
        doc: "coordinator reports an unknown outcome after this long without every vote",
    },
    ParamDoc { name: "decide_retry_ms", default: "1000", doc: "coordinator re-sends an unacknowledged decision" },
    ParamDoc {
        name: "max_decide_rounds",
        default: "10",
        doc: "decision re-sends before leaving it to cooperative termination",
    },
    ParamDoc {
        name: "in_doubt_ms",
        default: "3000",
        doc: "a leader asks the other participants about a transaction prepared this long without a decision",
    },
    ParamDoc { name: "termination_tick_ms", default: "500", doc: "how often a leader looks for in-doubt transactions" },
    ParamDoc {
        name: "lock_lease_ms",
        default: "10000",
        doc: "a leader aborts an unprepared transaction that has held or awaited locks this long",
    },
    ParamDoc {
        name: "coordinator_tick_ms",
        default: "50",
        doc: "resolution of the coordinator's timeouts (one periodic tick per coordinator)",
    },
    ParamDoc {
        name: "checkpoint_every_slots",
        default: "10000",
        doc: "log slots between replica checkpoints (state snapshot + log compaction); at least as many as the \
              state has entries (keys and remembered outcomes), so that checkpointing costs the same per slot \
              whatever the state's size",
    },
    ParamDoc {
        name: "max_attempts",
        default: "10",
        doc: "attempts per request (restarts after wounds or leader loss) before reporting an abort",
    },
    ParamDoc {
        name: "retry_backoff_ms",
        default: "5",
        doc: "base backoff before a restart, multiplied by the attempt number, plus jitter",
    },
    ParamDoc { name: "max_redirects", default: "16", doc: "not-leader redirects followed per attempt" },
    ParamDoc {
        name: "outcomes_kept",
        default: "1000000",
        doc: "decided transactions each replica remembers for late questions",
    },
    ParamDoc {
        name: "lock_at",
        default: "\"leader\"",
        doc: "\"leader\": a shard's locks, reads and prepares at its Paxos leader, prepares replicated to a majority \
              (2PL+Paxos); \"home\": a key's at its shard's replica in the key's home region, prepares durable \
              there alone and learned by the shard's other replicas afterwards (the SLOG paper's 2PL-coord; needs \
              one replica of each shard per server region)",
    },
    ParamDoc {
        name: "heartbeat_ms",
        default: "50",
        doc: "Paxos leader heartbeat (and tick) period; with lock_at = \"home\", also how often a home pushes its \
              log to the other copies",
    },
    ParamDoc {
        name: "election_timeout_ms",
        default: "1000",
        doc: "silence from the leader before the next replica in line runs for election",
    },
];

/// Every counter 2pl-paxos reports besides Multi-Paxos's.
pub const COUNTERS: &[CounterDoc] = &[
    CounterDoc { name: "retries", doc: "attempts after a request's first (aborts by wound, timeout or conflict)" },
    CounterDoc { name: "wounds", doc: "younger lock holders aborted by an older transaction (wound-wait)" },
    CounterDoc { name: "unknown_outcomes", doc: "requests whose client was told the outcome is unknown" },
    CounterDoc {
        name: "attempts_refused",
        doc: "requests refused while a coordinator's oldest running attempt is attempts_span_max ids old",
    },
    CounterDoc { name: "abandoned_dropped", doc: "abandoned attempts forgotten past the bound" },
    CounterDoc { name: "lock_leases_expired", doc: "unprepared transactions whose locks outlived their lease" },
    CounterDoc { name: "prepares_voided", doc: "prepare records applied after the transaction was aborted" },
    CounterDoc { name: "leader_takeovers", doc: "replicas that became shard leader and rebuilt the lock table" },
    CounterDoc { name: "in_doubt_queries", doc: "prepared transactions a leader asked the other participants about" },
    CounterDoc { name: "in_doubt_resolved", doc: "in-doubt transactions settled by the termination protocol" },
    CounterDoc {
        name: "stale_leader_decisions",
        doc: "commit decisions refused by a leader whose log lacks the prepare: it was deposed and has not heard",
    },
];

impl Config {
    pub fn from_params(params: &Params) -> Result<Config, String> {
        let p = ParamReader::new(params, TwoPlPaxos::NAME, PARAMS)?;
        let ms = |name: &str| p.ms_ns(name);
        let count = |name: &str| p.count(name, 1..=1_000_000_000);
        let heartbeat_ns = ms("heartbeat_ms")?;
        // Whole ticks within the duration: a deadline fires no later than
        // asked, give or take the tick.
        let ticks = |name: &str, tick_ns: u64, min_ticks: u64| {
            p.ms_ticks(name, tick_ns, Rounding::Down, min_ticks..=1 << 20).map(|t| t as u32)
        };
        let election_ticks = ticks("election_timeout_ms", heartbeat_ns, 3)?;
        let termination_tick_ns = ms("termination_tick_ms")?;
        Ok(Config {
            execute_timeout_ns: ms("execute_timeout_ms")?,
            prepare_retry_ns: ms("prepare_retry_ms")?,
            decision_timeout_ns: ms("decision_timeout_ms")?,
            decide_retry_ns: ms("decide_retry_ms")?,
            max_decide_rounds: count("max_decide_rounds")? as u32,
            termination_tick_ns,
            coordinator_tick_ns: ms("coordinator_tick_ms")?,
            in_doubt_ticks: ticks("in_doubt_ms", termination_tick_ns, 1)?,
            lock_lease_ticks: ticks("lock_lease_ms", termination_tick_ns, 1)?,
            max_attempts: count("max_attempts")? as u32,
            retry_backoff_ns: ms("retry_backoff_ms")?,
            max_redirects: count("max_redirects")? as u32,
            outcomes_kept: count("outcomes_kept")? as usize,
            attempts_span_max: ATTEMPTS_SPAN_MAX,
            lock_at: if p.choice("lock_at", &["leader", "home"])? == "home" { LockAt::Home } else { LockAt::Leader },
            paxos: PaxosConfig {
                tick_ns: heartbeat_ns,
                election_ticks,
                stagger_ticks: election_ticks / 2,
                jitter_ticks: (election_ticks / 4).max(1),
                batch_max: 256,
                compact_every: count("checkpoint_every_slots")?,
            },
        })
    }
}

meridian_core::roles! {
    /// A node of a `2pl-paxos` deployment.
    pub enum Node for TwoPlPaxos {
        Replica(Replica),
        Client(Coordinator),
    }
}

impl Protocol for TwoPlPaxos {
    const NAME: &'static str = "2pl-paxos";
    const CONSISTENCY: Consistency = Consistency::StrictSerializable;
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

    fn build(d: &Deployment, node: NodeId) -> Result<Node, String> {
        let cfg = Config::from_params(&d.params)?;
        let topo = &d.topology;
        match (&topo.node(node).role, cfg.lock_at) {
            (Role::Replica { shard, .. }, LockAt::Leader) => {
                let members = topo.replicas(*shard).to_vec();
                let preferred = topo.initial_leader_index(*shard) as usize;
                let paxos = MultiPaxos::new(shard.0, members, node, preferred, cfg.paxos);
                Ok(Node::Replica(Box::new(Replica::new(*shard, paxos, cfg))))
            }
            (Role::Replica { shard, replica }, LockAt::Home) => {
                one_replica_per_home(topo)?;
                Ok(Node::Replica(Box::new(home_replica(topo, node, *shard, *replica as usize, cfg))))
            }
            (Role::Client { .. }, _) => {
                let leaders = (0..topo.shards).map(|s| topo.initial_leader(ShardId(s))).collect();
                Ok(Node::Client(Box::new(Coordinator::new(node, leaders, topo.key_layout(), cfg))))
            }
            (Role::Service { kind, .. }, _) => Err(format!("2pl-paxos has no `{kind}` service")),
        }
    }
}

/// `lock_at = "home"` serves each home partition at its shard's replica in
/// its home region: every server region needs one.
fn one_replica_per_home(topo: &Topology) -> Result<(), String> {
    let regions = topo.server_regions.len();
    if topo.replicas_per_shard as usize != regions {
        return Err(format!(
            "`lock_at` = \"home\" needs one replica of each shard per server region: replicas_per_shard = \
             {regions} (the server regions), not {}",
            topo.replicas_per_shard
        ));
    }
    Ok(())
}

/// Replica `index` of `shard` with `lock_at = "home"`: the only member of
/// its home partition's log, which the shard's other replicas learn; a
/// learner of theirs, each on a stream of its own.
fn home_replica(topo: &Topology, node: NodeId, shard: ShardId, index: usize, cfg: Config) -> Replica {
    let layout = topo.key_layout();
    let replicas = topo.replicas(shard);
    let others: Vec<NodeId> = replicas.iter().copied().filter(|r| *r != node).collect();
    let own = Participant::home_partition(&layout, shard, index);
    let paxos = MultiPaxos::new(own.0, vec![node], node, 0, cfg.paxos).with_learners(others);
    let copies = (0..replicas.len())
        .filter(|home| *home != index)
        .map(|home| {
            let group = Participant::home_partition(&layout, shard, home).0;
            let stream = Stream(1 + home as u16);
            MultiPaxos::learner(group, vec![replicas[home]], node, 0, cfg.paxos).on_stream(stream)
        })
        .collect();
    Replica::new(shard, paxos, cfg).with_copies(copies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::ParamValue;

    #[test]
    fn every_documented_parameter_parses_at_its_default() {
        // Reading a parameter also asserts (in debug builds) that it is
        // documented, so this covers both directions.
        assert!(Config::from_params(&Params::new()).is_ok());
        for (name, p) in meridian_core::params::each_default_alone(PARAMS) {
            assert!(Config::from_params(&p).is_ok(), "{name}");
        }
    }

    #[test]
    fn deadlines_in_ticks_round_down_to_whole_ticks() {
        let p = Params::new()
            .with("termination_tick_ms", ParamValue::Int(500))
            .with("in_doubt_ms", ParamValue::Int(1_250))
            .with("lock_lease_ms", ParamValue::Int(100))
            .with("heartbeat_ms", ParamValue::Int(40))
            .with("election_timeout_ms", ParamValue::Int(1_000));
        let cfg = Config::from_params(&p).expect("valid");
        assert_eq!(cfg.in_doubt_ticks, 2, "1250 ms: two whole 500 ms ticks");
        assert_eq!(cfg.lock_lease_ticks, 1, "at least one tick");
        assert_eq!(cfg.paxos.election_ticks, 25);
        let defaults = Config::from_params(&Params::new()).expect("defaults");
        assert_eq!((defaults.in_doubt_ticks, defaults.lock_lease_ticks, defaults.paxos.election_ticks), (6, 20, 20));
    }

    #[test]
    fn bad_parameters_are_named() {
        let p = Params::new().with("in_doubt_ms", ParamValue::Float(-1.0));
        assert!(Config::from_params(&p).unwrap_err().contains("`in_doubt_ms`"));
        let p = Params::new().with("max_attempts", ParamValue::Int(0));
        assert!(Config::from_params(&p).unwrap_err().contains("`max_attempts`"));
        let p = Params::new().with("no_such_ms", ParamValue::Int(1));
        assert!(Config::from_params(&p).unwrap_err().contains("`no_such_ms`"));
        let p = Params::new().with("lock_at", ParamValue::Str("chairman".into()));
        assert!(Config::from_params(&p).unwrap_err().contains("`lock_at`"));
    }

    #[test]
    fn lock_at_home_is_refused_without_one_replica_of_each_shard_per_server_region() {
        use meridian_core::{ClusterSpec, LatencyMatrix};
        let params = Params::new().with("lock_at", ParamValue::Str("home".into()));
        let deployment = |replicas: u32| {
            let mut spec = ClusterSpec::every_region(&["a", "b", "c"], 2);
            spec.replicas_per_shard = replicas;
            let topology = std::sync::Arc::new(Topology::build(&spec, &[]));
            let pairs = [("a", "b", 10.0), ("a", "c", 10.0), ("b", "c", 10.0)];
            let latency = std::sync::Arc::new(LatencyMatrix::from_pairs(&["a", "b", "c"], &pairs, 0.2).unwrap());
            Deployment { topology, params: params.clone(), epsilon_us: 100, latency }
        };
        let replica = NodeId(0);
        for replicas in [2, 4] {
            let Err(e) = TwoPlPaxos::build(&deployment(replicas), replica) else { panic!("{replicas} replicas built") };
            assert!(e.contains("`lock_at`") && e.contains("replicas_per_shard = 3"), "{e}");
        }
        assert!(TwoPlPaxos::build(&deployment(3), replica).is_ok());
    }
}
