//! `calvin`: deterministic ordering, then deterministic execution — Thomson
//! et al., "Calvin: Fast Distributed Transactions for Partitioned Database
//! Systems" (SIGMOD 2012), as SLOG (§2, §4.2) describes and measures it.
//! Promises strict serializability.
//!
//! Roles: `sequencer.rs` (one per server region: batches its clients'
//! transactions per epoch and replicates each batch's contents to every
//! sequencer), `global_log.rs` (inside each sequencer: the global log,
//! batch identifiers ordered by one Multi-Paxos group whose members are
//! the sequencers; the log materialized from the contents and pushed to
//! the region's replicas), `replica.rs` (scheduler and executor at every
//! replica of every shard), `recovery.rs` (a replica's durable records,
//! checkpoints and restart), `client.rs` (submission, retries, answers),
//! `messages.rs`.
//!
//! # Where the paper is in the code
//!
//! | paper | file |
//! |---|---|
//! | Calvin §3.1 sequencer: epochs, batches, replication of the input | `sequencer.rs` |
//! | Calvin §3.1 global order of batches (SLOG §4.2: only batch ids in Paxos) | `global_log.rs` |
//! | Calvin §3.2 scheduler: deterministic locking in log order | `replica.rs`, `meridian_mechanisms::scheduler` |
//! | Calvin §3.2 execution phases 1-5: local reads, read exchange, active and passive participants | `replica.rs` |
//! | Calvin §5 checkpoints, replay of the input log after a failure | `recovery.rs` |
//! | Calvin §5 the input kept only until every replica checkpointed past it; a replica far behind recovers from another's | `sequencer.rs` (`truncate`), `global_log.rs` (`LogState`), `recovery.rs` (`install_checkpoint`), `crate::readers`, `crate::catch_up` |
//! | Calvin §3.2.1 OLLP / reconnaissance | not yet: procedures whose keys depend on reads are refused (`client.rs`) |
//!
//! # Commit path and analytical latency
//!
//! A client in region `c` sends its transaction to the nearest sequencer
//! `S` (region `s`). It waits for the epoch to close (`epoch_ms / 2` on
//! average), then `S` makes the batch durable at a majority of the
//! sequencers (`Q_s`, the round trip from `s` to its nearest majority),
//! asks the global log's leader `L` to order its id (`RTT(s, L) / 2`),
//! `L` commits it (`Q_L`), the commit reaches `S` with the next `Accept`
//! or heartbeat (up to `RTT(L, s) / 2` plus one heartbeat), `S` pushes the
//! position to its region's replicas, which exchange reads inside the
//! region and answer the client:
//!
//! ```text
//! latency(c) ≈ RTT(c, s)/2 + epoch/2 + Q_s + RTT(s, L) + Q_L + RTT(s, c)/2 (+ heartbeat)
//! ```
//!
//! more than one wide-area round trip wherever the client is — SLOG's
//! "Calvin > 200 ms" on its six regions.
//!
//! # Counters
//!
//! `batches` (batches cut), `txns_sequenced`, `duplicates_dropped`
//! (repeats of a transaction or a batch in the global log),
//! `multi_partition` and `single_partition` (transactions executed, at the
//! answering replica), `reads_sent`, `reads_wanted`, `reads_gone`,
//! `reads_gone_checkpoints_asked`, `log_fetches`,
//! `batch_fetches`, `replica_checkpoints`, `replayed` (transactions a
//! restarted replica found executed in its durable log),
//! `recon_reads`, `recon_aborts`, `recon_restarts` (reconnaissance, OLLP),
//! `positions_forgotten`, `log_truncated`, `log_states_sent`,
//! `log_states_installed`, `checkpoints_sent`, `checkpoints_installed`
//! (truncation below every replica's checkpoint, and catching up past it),
//! `refused_not_one_shot`, `unknown_outcomes`, `retries`, and the Paxos
//! log's counters. Observations: `batch_size`, `batch_wait_us`.

mod client;
mod global_log;
#[cfg(test)]
mod handler_tests;
mod messages;
mod recovery;
mod replica;
mod sequencer;

pub use client::Client;
pub use messages::{Batch, BatchId, Checkpoint, LogEntry, LogState, Msg, Reads, Record, Timer, Txn};
pub use replica::Replica;
pub use sequencer::Sequencer;

use meridian_core::{
    Consistency, CounterDoc, Deployment, NodeId, ParamDoc, ParamReader, Params, Placement, Program, Protocol, RegionId,
    Role, Rounding, ServiceSpec, Shapes, Topology,
};
use meridian_mechanisms::paxos::{MultiPaxos, PaxosConfig};
use std::sync::Arc;

pub struct Calvin;

/// The service kind of the sequencers (one per server region).
pub const SEQUENCER: &str = "sequencer";

/// Most transactions in one batch: a position is `(pos, index)` with the
/// index in 24 bits.
pub const BATCH_TXNS_MAX: usize = 1 << 20;

/// The protocol's knobs (documented in [`PARAMS`]).
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub epoch_ns: u64,
    pub batch_txns_max: usize,
    pub sequencer_tick_ns: u64,
    pub order_retry_ticks: u32,
    pub pending_batches_max: usize,
    pub txns_remembered: usize,
    pub replica_tick_ns: u64,
    pub failover_ticks: u32,
    pub reads_retry_ticks: u32,
    pub checkpoint_txns: u64,
    pub kept_positions_max: u64,
    pub reads_kept: usize,
    pub outcomes_kept: usize,
    pub early_reads_max: usize,
    pub held_entries_max: usize,
    pub client_tick_ns: u64,
    pub retry_ns: u64,
    pub max_attempts: u32,
    pub paxos: PaxosConfig,
}

pub const PARAMS: &[ParamDoc] = &[
    ParamDoc { name: "epoch_ms", default: "10", doc: "a sequencer cuts its batch every epoch (Calvin §3.1)" },
    ParamDoc { name: "batch_txns_max", default: "10000", doc: "a batch closes early once it holds this many" },
    ParamDoc {
        name: "sequencer_tick_ms",
        default: "50",
        doc: "period of a sequencer's re-sends (stores, orders) and fetches of missing batches",
    },
    ParamDoc {
        name: "order_retry_ms",
        default: "500",
        doc: "a sequencer asks the global log's leader again to order a batch not seen ordered",
    },
    ParamDoc {
        name: "pending_batches_max",
        default: "1000",
        doc: "own batches a sequencer has not seen ordered; beyond, it stops taking transactions",
    },
    ParamDoc {
        name: "txns_remembered",
        default: "65536",
        doc: "transaction ids of one client the global log keeps, at or above the lowest the client still waits for, to drop a resubmitted transaction's repeat",
    },
    ParamDoc {
        name: "replica_tick_ms",
        default: "100",
        doc: "period of a replica's log fetch, its requests for missing reads and its checkpoints",
    },
    ParamDoc {
        name: "failover_ms",
        default: "1000",
        doc: "a replica whose sequencer has not answered this long fetches the log from the next one",
    },
    ParamDoc {
        name: "reads_retry_ms",
        default: "500",
        doc: "a participant asks again for reads it has waited for this long",
    },
    ParamDoc {
        name: "checkpoint_txns",
        default: "10000",
        doc: "executed transactions between a replica's checkpoints (at least as many as its store has keys)",
    },
    ParamDoc {
        name: "kept_positions_max",
        default: "100000",
        doc: "global-log positions a sequencer keeps at most, even for a replica not checkpointed past them \
              (it then installs another copy's checkpoint; below it, what every replica of the region is past)",
    },
    ParamDoc {
        name: "checkpoint_every_slots",
        default: "10000",
        doc: "global-log Paxos slots between a sequencer's checkpoints (its log state; the Paxos log compacted \
              behind it); at least as many as the state's entries",
    },
    ParamDoc {
        name: "reads_kept",
        default: "4096",
        doc: "reads a participant keeps to send again on request however old; older ones while a replica of its \
              region may still run their transaction (until its sequencer says every one is durably past them)",
    },
    ParamDoc { name: "outcomes_kept", default: "65536", doc: "outcomes an answering replica keeps for queries" },
    ParamDoc {
        name: "early_reads_max",
        default: "65536",
        doc: "transactions whose peers' reads came before the replica reached them",
    },
    ParamDoc {
        name: "held_entries_max",
        default: "4096",
        doc: "log positions a replica holds ahead of a gap (the rest are fetched again)",
    },
    ParamDoc { name: "client_tick_ms", default: "50", doc: "resolution of the client's retry deadlines" },
    ParamDoc {
        name: "retry_ms",
        default: "3000",
        doc: "a client resubmits (and asks the answering replica) after this long without an answer",
    },
    ParamDoc {
        name: "max_attempts",
        default: "10",
        doc: "submissions per request before the client reports an unknown outcome",
    },
    ParamDoc { name: "heartbeat_ms", default: "50", doc: "the global log's Paxos heartbeat (and tick) period" },
    ParamDoc {
        name: "election_timeout_ms",
        default: "1000",
        doc: "silence from the global log's leader before the next sequencer in line runs for election",
    },
];

/// Every counter calvin reports besides Multi-Paxos's.
pub const COUNTERS: &[CounterDoc] = &[
    CounterDoc { name: "batches", doc: "batches cut by sequencers (Calvin §3.1)" },
    CounterDoc { name: "txns_sequenced", doc: "transactions put in a batch (resubmissions included)" },
    CounterDoc {
        name: "duplicates_dropped",
        doc: "repeats of a transaction or a batch the global log dropped (counted at every sequencer)",
    },
    CounterDoc { name: "submissions_refused", doc: "transactions a sequencer refused: too many batches unordered" },
    CounterDoc { name: "single_partition", doc: "transactions executed on one shard (at the answering replica)" },
    CounterDoc {
        name: "multi_partition",
        doc: "transactions that exchanged reads among shards, with no two-phase commit (at the answering replica)",
    },
    CounterDoc { name: "reads_sent", doc: "read messages a participant sent to another (Calvin §3.2 phase 3)" },
    CounterDoc { name: "reads_wanted", doc: "requests for reads a participant waited for too long" },
    CounterDoc {
        name: "reads_gone",
        doc: "requests for reads a participant past the transaction no longer keeps (it says so)",
    },
    CounterDoc {
        name: "reads_gone_checkpoints_asked",
        doc: "transactions whose reads a peer no longer keeps, caught up past from another copy's checkpoint",
    },
    CounterDoc { name: "log_fetches", doc: "global-log positions a sequencer sent again to a replica that asked" },
    CounterDoc { name: "log_failovers", doc: "replicas that turned to another sequencer for the log" },
    CounterDoc { name: "batch_fetches", doc: "contents of an ordered batch a sequencer asked its peers for" },
    CounterDoc { name: "replica_checkpoints", doc: "checkpoints a replica took (its durable log folded into one)" },
    CounterDoc {
        name: "positions_forgotten",
        doc: "global-log positions a sequencer forgot, with their batches' contents (Calvin §5: its region's \
              replicas are checkpointed past them, or `kept_positions_max` later ones exist)",
    },
    CounterDoc {
        name: "log_truncated",
        doc: "log fetches a sequencer answered `Truncated`: the positions are forgotten",
    },
    CounterDoc {
        name: "log_states_sent",
        doc: "log states a sequencer sent a peer that asked for contents it has forgotten",
    },
    CounterDoc { name: "log_states_installed", doc: "log states a sequencer adopted from a peer that was ahead" },
    CounterDoc { name: "checkpoints_sent", doc: "checkpoints a replica sent another copy of its shard that lagged" },
    CounterDoc {
        name: "checkpoints_installed",
        doc: "checkpoints a replica installed from another copy, the positions it needed being forgotten",
    },
    CounterDoc { name: "replayed", doc: "transactions a restarted replica found executed in its durable log" },
    CounterDoc {
        name: "refused_not_one_shot",
        doc: "procedures refused because a reconnaissance pass would read more than 4,096 keys",
    },
    CounterDoc { name: "recon_reads", doc: "keys clients read without locks in reconnaissance passes (OLLP)" },
    CounterDoc {
        name: "recon_aborts",
        doc: "transactions every participant aborted because a version their reconnaissance assumed had changed",
    },
    CounterDoc { name: "recon_restarts", doc: "new reconnaissance passes clients made after such an abort" },
    CounterDoc { name: "retries", doc: "resubmissions after `retry_ms` without an answer" },
    CounterDoc { name: "unknown_outcomes", doc: "requests whose client was told the outcome is unknown" },
];

impl Config {
    pub fn from_params(params: &Params) -> Result<Config, String> {
        let p = ParamReader::new(params, Calvin::NAME, PARAMS)?;
        let ms = |name: &str| p.ms_ns(name);
        let count = |name: &str| p.count(name, 1..=1_000_000_000);
        let ticks = |name: &str, tick_ns: u64| p.ms_ticks(name, tick_ns, Rounding::Up, 1..=1 << 20).map(|t| t as u32);
        let heartbeat_ns = ms("heartbeat_ms")?;
        let election_ticks = p.ms_ticks("election_timeout_ms", heartbeat_ns, Rounding::Down, 3..=1 << 20)? as u32;
        let sequencer_tick_ns = ms("sequencer_tick_ms")?;
        let replica_tick_ns = ms("replica_tick_ms")?;
        let epoch_ns = ms("epoch_ms")?;
        if epoch_ns == 0 {
            return Err("calvin: `epoch_ms` must be positive".into());
        }
        Ok(Config {
            epoch_ns,
            batch_txns_max: p.count("batch_txns_max", 1..=BATCH_TXNS_MAX as u64)? as usize,
            sequencer_tick_ns,
            order_retry_ticks: ticks("order_retry_ms", sequencer_tick_ns)?,
            pending_batches_max: count("pending_batches_max")? as usize,
            txns_remembered: count("txns_remembered")? as usize,
            replica_tick_ns,
            failover_ticks: ticks("failover_ms", replica_tick_ns)?,
            reads_retry_ticks: ticks("reads_retry_ms", replica_tick_ns)?,
            checkpoint_txns: count("checkpoint_txns")?,
            kept_positions_max: count("kept_positions_max")?,
            reads_kept: count("reads_kept")? as usize,
            outcomes_kept: count("outcomes_kept")? as usize,
            early_reads_max: count("early_reads_max")? as usize,
            held_entries_max: count("held_entries_max")? as usize,
            client_tick_ns: ms("client_tick_ms")?,
            retry_ns: ms("retry_ms")?,
            max_attempts: count("max_attempts")? as u32,
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

/// The sequencer of `region`, or the nearest one to it.
pub fn sequencer_for(d: &Deployment, region: RegionId) -> NodeId {
    let sequencers = d.topology.service(SEQUENCER);
    d.nearest(region, sequencers).expect("calvin places a sequencer in every server region")
}

/// The replica that answers the client of a transaction batched in
/// `region`: the one in `region` of the transaction's first shard.
pub fn responder(topology: &Topology, txn: &Txn) -> NodeId {
    let shard = txn.first_shard(topology);
    topology.replicas_in(shard, txn.region).first().copied().unwrap_or(topology.replicas(shard)[0])
}

/// Whether the program can be ordered as it is: its keys must be known
/// before it is (Calvin §3.2.1); the others need reconnaissance first.
pub fn runnable(program: &Program) -> bool {
    program.is_one_shot()
}

meridian_core::roles! {
    /// A node of a `calvin` deployment.
    pub enum Node for Calvin {
        Replica(Replica),
        Sequencer(Sequencer),
        Client(Client),
    }
}

impl Protocol for Calvin {
    const NAME: &'static str = "calvin";
    const CONSISTENCY: Consistency = Consistency::StrictSerializable;
    const SHAPES: Shapes = Shapes::ONE_SHOT;
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

    fn services(_params: &Params) -> Vec<ServiceSpec> {
        vec![ServiceSpec::new(SEQUENCER, Placement::PerServerRegion)]
    }

    fn build(d: &Deployment, node: NodeId) -> Result<Node, String> {
        let cfg = Config::from_params(&d.params)?;
        let topo = &d.topology;
        let sequencers = topo.service(SEQUENCER).to_vec();
        if sequencers.is_empty() {
            return Err("calvin needs its sequencers (`Calvin::services`) in the topology".into());
        }
        match &topo.node(node).role {
            Role::Replica { shard, replica } => {
                let home = sequencer_for(d, topo.region_of(node));
                Ok(Node::Replica(Box::new(Replica::new(Arc::clone(topo), node, *shard, *replica, home, cfg))))
            }
            Role::Service { kind, index } if kind == SEQUENCER => {
                let paxos = MultiPaxos::new(0, sequencers, node, 0, cfg.paxos);
                Ok(Node::Sequencer(Box::new(Sequencer::new(Arc::clone(topo), node, *index, paxos, cfg))))
            }
            Role::Client { .. } => {
                let sequencer = sequencer_for(d, topo.region_of(node));
                Ok(Node::Client(Box::new(Client::new(Arc::clone(topo), node, sequencer, cfg))))
            }
            Role::Service { kind, .. } => Err(format!("calvin has no `{kind}` service")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::ParamValue;

    #[test]
    fn every_documented_parameter_parses_at_its_default() {
        assert!(Config::from_params(&Params::new()).is_ok());
        for (name, p) in meridian_core::params::each_default_alone(PARAMS) {
            assert!(Config::from_params(&p).is_ok(), "{name}");
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        let p = Params::new().with("epoch_ms", ParamValue::Int(0));
        assert!(Config::from_params(&p).unwrap_err().contains("`epoch_ms`"));
        let p = Params::new().with("no_such_ms", ParamValue::Int(1));
        assert!(Config::from_params(&p).unwrap_err().contains("`no_such_ms`"));
    }
}
