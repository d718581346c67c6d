//! `slog`: home regions, local logs and deterministic execution — Ren,
//! Li and Abadi, "SLOG: Serializable, Low-latency, Geo-replicated
//! Transactions" (VLDB 2019). Promises strict serializability.
//!
//! Every granule (here: every key) has a home region, named in a header
//! stored with it: `(home, counter)`, initially the key layout's home and
//! 0. Each region orders the transactions that write its own granules in a
//! local log and ships its batches to every region; every region
//! interleaves the local logs into its own global log (each local log in
//! its own order) and executes that with deterministic locking. Single-home
//! transactions commit after their home region alone has ordered and run
//! them — no wide-area round trip when the client is near the home.
//! Multi-home transactions are ordered among themselves by one region's
//! local log and lock their granules through one LockOnlyTxn per home.
//!
//! Roles: `sequencer.rs` (a Paxos group of `sequencer_replicas` per server
//! region: Lookup Master, `ReceiveNewTxn`, the local log, the region's
//! global log), `replica.rs`
//! (lock manager and execution engine at every replica of every shard),
//! `recovery.rs` (a replica's records, checkpoints and restart),
//! `client.rs`, `messages.rs`.
//!
//! # Where the paper is in the code
//!
//! | paper | file |
//! |---|---|
//! | §3.1 local logs shipped in numbered batches; each region's global log | `sequencer.rs` (`batch_stream`) |
//! | §3.1-3.2 local and global logs "implemented via Paxos across its servers" | `sequencer.rs` (`RegionRecord`, `propose`, `resume`, `on_chosen`) |
//! | §3.2, Figure 2 `ReceiveNewTxn`, Lookup Master, (home, counter) headers | `sequencer.rs`, `messages.rs` (`Header`, `Txn`) |
//! | Figure 2 `InsertIntoLocalLog`, `ReceiveBatch` | `sequencer.rs` |
//! | §3.3 multi-home ordering (the third option), LockOnlyTxns | `sequencer.rs` (`insert_lock_onlys`), `replica.rs` |
//! | Figure 2 lock manager; execution engine's header check | `replica.rs` (`meridian_mechanisms::scheduler`) |
//! | §3.4, Figure 6 remastering, counter checks, the PNUTS trigger | `replica.rs` (`check_counters`, `execute_remaster`, `count_accesses`), `sequencer.rs` (`Since`) |
//! | §3.2 SLOG-HA (the local log at the paired region before it runs) | `sequencer.rs` (`on_replicate`, `on_replicated`) |
//! | §3.1 snapshot read-only transactions at one region | `sequencer.rs` (`place_snapshot`), `replica.rs` |
//! | Calvin §5 replay of the input after a crash | `recovery.rs` |
//! | Calvin §5 the input kept only until the region's copies checkpointed past it; a copy far behind recovers from another's | `sequencer.rs` (`forget`, `RegionRecord::Forget`, `GroupState`), `recovery.rs` (`install_checkpoint`), `crate::readers`, `crate::catch_up` |
//!
//! # Commit path and analytical latency
//!
//! A single-home transaction from a client in its home region `h` goes to
//! `h`'s sequencer, waits for the batch to close (`batch_ms / 2` on
//! average), is made durable, placed in `h`'s global log and executed
//! there; `h`'s replica of its first shard answers:
//!
//! ```text
//! single-home ≈ RTT(c, h) + batch/2 + 2 × (RTT inside h + fsync) + (reads exchanged inside h)
//! ```
//!
//! (the batch, then its placement, chosen by `h`'s sequencer group).
//!
//! A multi-home transaction adds the orderer `o` and every home `h_i`:
//! client → origin → `o` (batch), `o`'s batch → each `h_i` (batch), each
//! `h_i`'s LockOnlyTxn batch → the origin region, which answers.
//!
//! # Counters
//!
//! `batches`, `lock_only_txns` (inserted by home regions), `remasters`,
//! `remaster_aborts`, `snapshot_reads`, `single_home`
//! and `multi_home` (committed, at the answering replica),
//! `lookup_misses` (transactions every region aborted for a wrong assumed
//! header), `restarts` (their resubmissions), `duplicates_dropped`,
//! `reads_sent`, `reads_wanted`, `log_fetches`, `batch_fetches`,
//! `replica_checkpoints`, `replayed`, `positions_forgotten`,
//! `batches_forgotten`, `log_truncated`, `checkpoints_sent`,
//! `checkpoints_installed` (truncation below the region's copies'
//! checkpoints, and catching up past it), `submissions_refused`,
//! `refused_not_one_shot`, `retries`, `unknown_outcomes`,
//! `sequencer_takeovers`, `relayed`, `records_skipped`, `log_failovers`
//! (the region groups' failovers), and Multi-Paxos's. Observations:
//! `batch_size`, `batch_wait_us`, `lock_only_wait_us` (a multi-home
//! transaction's wait, at one shard, from its first lock request to its
//! last LockOnlyTxn's locks).

mod client;
#[cfg(test)]
mod handler_tests;
mod messages;
mod recovery;
mod replica;
mod sequencer;

pub use client::Client;
pub use messages::{
    BatchId, Checkpoint, Entry, Header, LocalBatch, LogEntry, Msg, Read, Reads, Record, RegionRecord, SNAPSHOTS, Since,
    Timer, Txn,
};
pub use replica::Replica;
pub use sequencer::Sequencer;

use meridian_core::{
    Consistency, CounterDoc, Deployment, Key, NodeId, ParamDoc, ParamReader, Params, Placement, Program, Protocol,
    RegionId, Role, Rounding, ServiceSpec, Shapes, Topology,
};
use meridian_mechanisms::paxos::PaxosConfig;
use std::sync::Arc;

pub struct Slog;

/// The service kind of the sequencers (one per server region).
pub const SEQUENCER: &str = "sequencer";

/// Most entries in one batch: a place is `(pos, index)` with the index in
/// 24 bits.
pub const BATCH_TXNS_MAX: usize = 1 << 20;

/// The protocol's knobs (documented in [`PARAMS`]).
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub batch_ns: u64,
    pub batch_txns_max: usize,
    pub sequencer_tick_ns: u64,
    pub txns_remembered: usize,
    pub held_batches_max: usize,
    pub replica_tick_ns: u64,
    pub reads_retry_ticks: u32,
    pub checkpoint_txns: u64,
    pub reads_kept: usize,
    pub outcomes_kept: usize,
    pub early_reads_max: usize,
    pub held_entries_max: usize,
    pub client_tick_ns: u64,
    pub retry_ns: u64,
    pub max_attempts: u32,
    /// 0: no remastering (`remaster = false`).
    pub remaster_after: u32,
    /// SLOG-HA: each region's local log reaches its paired region durably
    /// before anyone else sees it.
    pub ha: bool,
    /// Test-only when false: transactions relying on a remaster do not
    /// wait for it (Figure 5's race, which makes regions diverge).
    pub remaster_wait: bool,
    /// Sequencers per region: one Paxos group holding the region's local
    /// and global logs (SLOG §3.1).
    pub sequencer_replicas: u32,
    pub paxos: PaxosConfig,
    /// Replica ticks without an answer from its sequencer before it asks
    /// the next one of its region.
    pub failover_ticks: u32,
}

/// Default sequencers per region: a group that survives one member's loss.
const SEQUENCER_REPLICAS: u64 = 3;

pub const PARAMS: &[ParamDoc] = &[
    ParamDoc { name: "batch_ms", default: "5", doc: "a region cuts its local-log batch this often (SLOG §3.2)" },
    ParamDoc {
        name: "sequencer_replicas",
        default: "3",
        doc: "sequencers per region: one Paxos group replicating the region's local and global logs (SLOG §3.1); \
              1 makes them durable at a single sequencer",
    },
    ParamDoc { name: "heartbeat_ms", default: "20", doc: "the region group's Paxos heartbeat (and tick) period" },
    ParamDoc {
        name: "election_timeout_ms",
        default: "200",
        doc: "silence from the region group's leader before the next sequencer in line runs for election",
    },
    ParamDoc {
        name: "failover_ms",
        default: "300",
        doc: "a replica asks the next sequencer of its region for the log after this long without an answer",
    },
    ParamDoc { name: "batch_txns_max", default: "10000", doc: "a batch closes early once it holds this many entries" },
    ParamDoc {
        name: "sequencer_tick_ms",
        default: "50",
        doc: "period of a sequencer's tip announcements and fetches of missing batches",
    },
    ParamDoc {
        name: "txns_remembered",
        default: "65536",
        doc: "transaction ids of one client a sequencer keeps, at or above the lowest the client still waits for, to drop a resubmitted transaction's repeat",
    },
    ParamDoc {
        name: "held_batches_max",
        default: "4096",
        doc: "batches of one local log a region holds ahead of a gap (the rest are fetched again)",
    },
    ParamDoc {
        name: "replica_tick_ms",
        default: "100",
        doc: "period of a replica's log fetch, read requests and checkpoints",
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
        name: "checkpoint_every_slots",
        default: "10000",
        doc: "slots of a region group's Paxos log between a sequencer's checkpoints (its chosen logs; the Paxos \
              log compacted behind it); at least as many as the checkpoint's entries",
    },
    ParamDoc {
        name: "reads_kept",
        default: "4096",
        doc: "reads a participant keeps to send again on request however old; older ones while a replica of its \
              region may still run their transaction (until its sequencer says every one is durably past them)",
    },
    ParamDoc { name: "outcomes_kept", default: "65536", doc: "answers an answering replica keeps for queries" },
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
        doc: "a client resubmits (and asks the answering replicas) after this long without an answer",
    },
    ParamDoc {
        name: "max_attempts",
        default: "10",
        doc: "submissions per request (restarts included) before the client reports an unknown outcome",
    },
    ParamDoc { name: "remaster", default: "true", doc: "remaster granules dynamically (SLOG §3.4)" },
    ParamDoc {
        name: "remaster_after",
        default: "3",
        doc: "a granule whose last this many accesses came from one other region is remastered there (PNUTS's rule)",
    },
    ParamDoc {
        name: "remaster_at",
        default: "\"\"",
        doc: "for experiments: \"KEY:REGION:MS\" remasters key KEY to the server region REGION once, MS simulated milliseconds into the run (SLOG Figure 11's one remaster), through the same path as a triggered one",
    },
    ParamDoc {
        name: "ha",
        default: "false",
        doc: "SLOG-HA: a region's local-log batch is durable at its paired region before any region runs it",
    },
    ParamDoc {
        name: "ha_pairs",
        default: "\"\"",
        doc: "SLOG-HA pairs as \"from=to,...\" by region name (the paper's: virginia=ohio, oregon=california, ireland=london); a region not named pairs with its nearest",
    },
    ParamDoc {
        name: "remaster_wait",
        default: "true",
        doc: "for tests only: false lets a transaction relying on a remaster be placed before it (Figure 5's race)",
    },
];

/// Every counter slog reports.
pub const COUNTERS: &[CounterDoc] = &[
    CounterDoc { name: "batches", doc: "local-log batches cut (SLOG §3.2)" },
    CounterDoc {
        name: "lock_only_txns", doc: "LockOnlyTxns home regions inserted for multi-home transactions (§3.3)"
    },
    CounterDoc { name: "single_home", doc: "single-home transactions committed (at the answering replica)" },
    CounterDoc { name: "multi_home", doc: "multi-home transactions committed (at the answering replica)" },
    CounterDoc {
        name: "snapshot_reads",
        doc: "snapshot read-only transactions served by one region's copy (SLOG §3.1; serializable, not strict)",
    },
    CounterDoc {
        name: "lookup_misses",
        doc: "transactions every region aborted because a granule's header was not the one assumed (§3.2)",
    },
    CounterDoc { name: "restarts", doc: "transactions a client submitted again after a lookup miss" },
    CounterDoc { name: "remasters", doc: "granules whose home moved (§3.4), counted once each" },
    CounterDoc { name: "remasters_asked", doc: "remasters asked by `remaster_at` (the experiment's scheduled one)" },
    CounterDoc {
        name: "remaster_aborts",
        doc: "remaster requests that found the granule's header already changed, and did nothing",
    },
    CounterDoc { name: "duplicates_dropped", doc: "resubmitted transactions a local log already held" },
    CounterDoc { name: "submissions_refused", doc: "transactions a sequencer refused" },
    CounterDoc { name: "reads_sent", doc: "read messages a participant sent to another in its region" },
    CounterDoc { name: "reads_wanted", doc: "requests for reads a participant waited for too long" },
    CounterDoc { name: "log_fetches", doc: "global-log positions a sequencer sent again to a replica that asked" },
    CounterDoc { name: "batch_fetches", doc: "local-log batches a sequencer asked their origin for again" },
    CounterDoc { name: "replica_checkpoints", doc: "checkpoints a replica took (its durable log folded into one)" },
    CounterDoc {
        name: "positions_forgotten",
        doc: "positions of a region's global log its group forgot (a copy of every shard in the region has a \
              durable checkpoint past them)",
    },
    CounterDoc {
        name: "batches_forgotten",
        doc: "batches of a local log (or, SLOG-HA, a paired one) a group forgot: every region placed them",
    },
    CounterDoc {
        name: "log_truncated",
        doc: "log fetches a sequencer answered `Truncated`: the region's group forgot the positions",
    },
    CounterDoc {
        name: "checkpoints_sent",
        doc: "checkpoints a replica sent a copy of its shard in its region that lagged",
    },
    CounterDoc {
        name: "checkpoints_installed",
        doc: "checkpoints a replica installed from another copy, the positions it needed being forgotten",
    },
    CounterDoc { name: "replayed", doc: "log entries a restarted replica found executed in its durable log" },
    CounterDoc {
        name: "refused_not_one_shot",
        doc: "procedures refused because a reconnaissance pass would read more than 4,096 keys",
    },
    CounterDoc { name: "recon_reads", doc: "keys clients read without locks in reconnaissance passes (OLLP)" },
    CounterDoc {
        name: "recon_aborts",
        doc: "transactions every region aborted because a version their reconnaissance assumed had changed",
    },
    CounterDoc { name: "recon_restarts", doc: "new reconnaissance passes clients made after such an abort" },
    CounterDoc { name: "retries", doc: "resubmissions after `retry_ms` without an answer" },
    CounterDoc { name: "unknown_outcomes", doc: "requests whose client was told the outcome is unknown" },
    CounterDoc {
        name: "sequencer_takeovers",
        doc: "sequencers that became their region group's leader after another (a failover)",
    },
    CounterDoc { name: "relayed", doc: "messages a sequencer that does not lead its group passed to its leader" },
    CounterDoc {
        name: "records_skipped",
        doc: "chosen records of a deposed leader that did not follow on from the chosen log, skipped by every member",
    },
    CounterDoc { name: "log_failovers", doc: "times a replica turned to another sequencer of its region for the log" },
];

impl Config {
    pub fn from_params(params: &Params) -> Result<Config, String> {
        let p = ParamReader::new(params, Slog::NAME, PARAMS)?;
        let ms = |name: &str| p.ms_ns(name);
        let count = |name: &str| p.count(name, 1..=1_000_000_000);
        let replica_tick_ns = ms("replica_tick_ms")?;
        let batch_ns = ms("batch_ms")?;
        if batch_ns == 0 {
            return Err("slog: `batch_ms` must be positive".into());
        }
        let heartbeat_ns = ms("heartbeat_ms")?;
        let election_ticks = p.ms_ticks("election_timeout_ms", heartbeat_ns, Rounding::Down, 3..=1 << 20)? as u32;
        Ok(Config {
            batch_ns,
            sequencer_replicas: p.count("sequencer_replicas", 1..=9)? as u32,
            paxos: PaxosConfig {
                tick_ns: heartbeat_ns,
                election_ticks,
                stagger_ticks: election_ticks / 2,
                jitter_ticks: (election_ticks / 4).max(1),
                batch_max: 256,
                compact_every: p.count("checkpoint_every_slots", 1..=1 << 40)?,
            },
            failover_ticks: p.ms_ticks("failover_ms", replica_tick_ns, Rounding::Up, 1..=1 << 20)? as u32,
            batch_txns_max: p.count("batch_txns_max", 1..=BATCH_TXNS_MAX as u64)? as usize,
            sequencer_tick_ns: ms("sequencer_tick_ms")?,
            txns_remembered: count("txns_remembered")? as usize,
            held_batches_max: count("held_batches_max")? as usize,
            replica_tick_ns,
            reads_retry_ticks: p.ms_ticks("reads_retry_ms", replica_tick_ns, Rounding::Up, 1..=1 << 20)? as u32,
            checkpoint_txns: count("checkpoint_txns")?,
            reads_kept: count("reads_kept")? as usize,
            outcomes_kept: count("outcomes_kept")? as usize,
            early_reads_max: count("early_reads_max")? as usize,
            held_entries_max: count("held_entries_max")? as usize,
            client_tick_ns: ms("client_tick_ms")?,
            retry_ns: ms("retry_ms")?,
            max_attempts: count("max_attempts")? as u32,
            remaster_wait: p.bool("remaster_wait")?,
            ha: p.bool("ha")?,
            remaster_after: if p.bool("remaster")? { p.count("remaster_after", 1..=1_000_000)? as u32 } else { 0 },
        })
    }
}

/// The sequencer groups, one per server region in server-region order
/// (a local log's origin is its region's index here).
pub fn groups(topo: &Topology) -> Vec<Vec<NodeId>> {
    let sequencers = topo.service(SEQUENCER);
    let group = |r: &RegionId| sequencers.iter().copied().filter(|s| topo.region_of(*s) == *r).collect::<Vec<_>>();
    topo.server_regions.iter().map(group).filter(|g| !g.is_empty()).collect()
}

/// The sequencer group of `region` (every server region has one; another
/// region's is the first's).
pub fn group_in(topo: &Topology, region: RegionId) -> Vec<NodeId> {
    let groups = groups(topo);
    let at = groups.iter().position(|g| topo.region_of(g[0]) == region);
    groups[at.unwrap_or(0)].clone()
}

/// The first sequencer of `region`'s group: its leader unless it failed.
pub fn sequencer_in(topo: &Topology, region: RegionId) -> NodeId {
    group_in(topo, region)[0]
}

/// SLOG-HA's pairs: each region's paired region, by index among the
/// sequencer groups (`None` without `ha`): the one `ha_pairs` names, or
/// the nearest other server region.
pub fn ha_pairs(d: &Deployment, cfg: &Config) -> Result<Vec<Option<u32>>, String> {
    let topo = &d.topology;
    let regions: Vec<RegionId> = groups(topo).iter().map(|g| topo.region_of(g[0])).collect();
    if !cfg.ha {
        return Ok(vec![None; regions.len()]);
    }
    let named = d.params.str_or("ha_pairs", "")?;
    let region = |name: &str| {
        let r = topo.server_regions.iter().copied().find(|r| topo.region_name(*r) == name.trim());
        r.ok_or_else(|| format!("slog: `ha_pairs` names `{}`, not a server region", name.trim()))
    };
    let mut chosen: Vec<(RegionId, RegionId)> = Vec::new();
    for pair in named.split(',').filter(|p| !p.trim().is_empty()) {
        let (from, to) = pair.split_once('=').ok_or_else(|| format!("slog: `ha_pairs`: `{pair}` is not `from=to`"))?;
        chosen.push((region(from)?, region(to)?));
    }
    let pairs = regions.iter().map(|from| {
        let to = chosen.iter().find(|(f, _)| f == from).map(|(_, t)| *t).or_else(|| {
            let others = regions.iter().copied().filter(|r| r != from);
            others.min_by(|a, b| {
                d.latency.rtt_ms(from.index(), a.index()).total_cmp(&d.latency.rtt_ms(from.index(), b.index()))
            })
        });
        to.filter(|t| t != from).and_then(|t| regions.iter().position(|r| *r == t)).map(|i| i as u32)
    });
    Ok(pairs.collect())
}

/// The experiment's one remaster (`remaster_at`): `key` moves to `to`
/// `at_ns` into the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduledRemaster {
    pub key: Key,
    pub to: RegionId,
    pub at_ns: u64,
}

/// Parses `remaster_at` ("KEY:REGION:MS"; empty: none).
pub fn scheduled_remaster(d: &Deployment) -> Result<Option<ScheduledRemaster>, String> {
    let text = d.params.str_or("remaster_at", "")?.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let bad = |why: &str| format!("slog: `remaster_at` = \"{text}\": {why} (expected \"KEY:REGION:MS\")");
    let [key, region, ms] = text.split(':').collect::<Vec<_>>()[..] else {
        return Err(bad("not three fields"));
    };
    let key = key.trim().parse::<u64>().map_err(|_| bad("KEY is not a key number"))?;
    let topo = &d.topology;
    let to = topo.server_regions.iter().copied().find(|r| topo.region_name(*r) == region.trim());
    let to = to.ok_or_else(|| bad(&format!("`{}` is not a server region", region.trim())))?;
    let ms = ms.trim().parse::<f64>().ok().filter(|ms| ms.is_finite() && *ms >= 0.0 && *ms <= 1e9);
    let at_ns = (ms.ok_or_else(|| bad("MS is not a time in milliseconds"))? * 1e6) as u64;
    Ok(Some(ScheduledRemaster { key: Key(key), to, at_ns }))
}

/// The replica that answers the client: the home region's (single-home)
/// or the origin region's (multi-home, and snapshot reads) replica of the
/// first shard.
pub fn responder(topology: &Topology, txn: &Txn) -> NodeId {
    let shard = txn.first_shard(topology);
    let snapshot = txn.program.mode == meridian_core::ReadMode::Snapshot && txn.program.is_read_only();
    let region = if snapshot { txn.origin } else { txn.home().unwrap_or(txn.origin) };
    topology.replicas_in(shard, region).first().copied().unwrap_or(topology.replicas(shard)[0])
}

/// Whether the program can be ordered as it is: its keys must be known
/// before it is (SLOG §3.2, as in Calvin); the others need reconnaissance
/// first (`crate::recon`).
pub fn runnable(program: &Program) -> bool {
    program.is_one_shot()
}

meridian_core::roles! {
    /// A node of a `slog` deployment.
    pub enum Node for Slog {
        Replica(Replica),
        Sequencer(Sequencer),
        Client(Client),
    }
}

impl Protocol for Slog {
    const NAME: &'static str = "slog";
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

    /// A group of `sequencer_replicas` sequencers in each server region (a
    /// bad value is refused by `build`, with its name).
    fn services(params: &Params) -> Vec<ServiceSpec> {
        let n = params.u64_or("sequencer_replicas", SEQUENCER_REPLICAS).unwrap_or(SEQUENCER_REPLICAS).clamp(1, 9);
        vec![ServiceSpec::new(SEQUENCER, Placement::PerServerRegionEach(n as u32))]
    }

    fn build(d: &Deployment, node: NodeId) -> Result<Node, String> {
        let cfg = Config::from_params(&d.params)?;
        let topo = &d.topology;
        if topo.service(SEQUENCER).is_empty() {
            return Err("slog needs its sequencers (`Slog::services`) in the topology".into());
        }
        match &topo.node(node).role {
            Role::Replica { shard, replica } => {
                let replica = Replica::new(Arc::clone(topo), node, *shard, *replica, cfg);
                Ok(Node::Replica(Box::new(replica.with_scheduled_remaster(scheduled_remaster(d)?))))
            }
            Role::Service { kind, .. } if kind == SEQUENCER => {
                let pairs = ha_pairs(d, &cfg)?;
                Ok(Node::Sequencer(Box::new(Sequencer::new(Arc::clone(topo), node, cfg).with_pairs(pairs))))
            }
            Role::Client { .. } => {
                let nearest = d.nearest(topo.region_of(node), topo.service(SEQUENCER)).expect("a sequencer");
                let group = group_in(topo, topo.region_of(nearest));
                Ok(Node::Client(Box::new(Client::new(Arc::clone(topo), node, group, cfg))))
            }
            Role::Service { kind, .. } => Err(format!("slog has no `{kind}` service")),
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
        let p = Params::new().with("batch_ms", ParamValue::Int(0));
        assert!(Config::from_params(&p).unwrap_err().contains("`batch_ms`"));
        let p = Params::new().with("no_such_ms", ParamValue::Int(1));
        assert!(Config::from_params(&p).unwrap_err().contains("`no_such_ms`"));
    }
}
