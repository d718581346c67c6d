//! From the file as written ([`crate::raw`]) to the typed sections of
//! [`crate::model`]: defaults applied, values range-checked, region names
//! resolved. Every error names its field and line through [`Ctx`].
//!
//! Defaults (also documented in the example files):
//! `[cluster]` shards 1, replicas_per_shard = number of server regions,
//! leaders "colocated"; `[clients]` regions = server regions, per_region 1,
//! mode "closed", think_ms 0, max_outstanding 100 (open), max_retries 5,
//! retry_backoff_ms 5; `[clock]` all 0 but epsilon_us 100; `[network]` all
//! 0 / false, local_rtt_ms 0.2 for an explicit matrix; `[cpu]` 19 µs per
//! server (and service) event, 13 per client event, 3 ns per byte of every
//! message (calibrated against the real runtime, docs/cost-model.md); `[disk]` fsync_ms 0.1; `[run]`
//! duration_s 10, warmup_s a tenth of the duration, drain_s 5, seed 1.

use crate::error::ConfigError;
use crate::locate::{Locator, join};
use crate::model::*;
use crate::raw::*;
use meridian_core::{LatencyMatrix, LeaderPlacement, ParamValue, Params};
use meridian_workload::WorkloadSpec;
use std::collections::BTreeMap;

/// Most replica or client nodes one experiment may ask for.
pub const MAX_NODES: u64 = 100_000;
/// Sessions per closed-loop client, at most.
pub const MAX_SESSIONS: u32 = 100_000;
/// Longest run, in simulated seconds.
pub const MAX_DURATION_S: f64 = 1_000_000.0;

/// The largest magnitude of any number in the file (times in ms or µs,
/// rates, offsets): large enough for any experiment, small enough that
/// nanosecond arithmetic cannot overflow.
pub const MAX_MAGNITUDE: f64 = 1e9;

/// The largest clock drift: 10% (a drifting clock still moves forward).
pub const MAX_DRIFT_PPM: f64 = 100_000.0;

/// The file being resolved, to build located errors.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub file: &'a str,
    pub loc: &'a Locator,
}

impl Ctx<'_> {
    pub fn err(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.file, self.loc.line_of(field), field, message)
    }

    /// A number of magnitude at most [`MAX_MAGNITUDE`] (any sign).
    pub fn finite(&self, field: &str, v: f64) -> Result<f64, ConfigError> {
        if v.is_finite() && v.abs() <= MAX_MAGNITUDE {
            Ok(v)
        } else {
            Err(self.err(field, format!("must be a number between -{MAX_MAGNITUDE:e} and {MAX_MAGNITUDE:e}, got {v}")))
        }
    }

    /// A number in `[0, MAX_MAGNITUDE]`.
    pub fn non_negative(&self, field: &str, v: f64) -> Result<f64, ConfigError> {
        if v.is_finite() && (0.0..=MAX_MAGNITUDE).contains(&v) {
            Ok(v)
        } else {
            Err(self.err(field, format!("must be a number between 0 and {MAX_MAGNITUDE:e}, got {v}")))
        }
    }

    /// A number in `(0, MAX_MAGNITUDE]`.
    pub fn positive(&self, field: &str, v: f64) -> Result<f64, ConfigError> {
        if v.is_finite() && v > 0.0 && v <= MAX_MAGNITUDE {
            Ok(v)
        } else {
            Err(self.err(field, format!("must be a number > 0 and at most {MAX_MAGNITUDE:e}, got {v}")))
        }
    }

    /// A clock drift in parts per million, below [`MAX_DRIFT_PPM`].
    pub fn drift(&self, field: &str, v: f64) -> Result<f64, ConfigError> {
        if v.is_finite() && (0.0..=MAX_DRIFT_PPM).contains(&v) {
            Ok(v)
        } else {
            Err(self.err(field, format!("must be between 0 and {MAX_DRIFT_PPM} ppm, got {v}")))
        }
    }

    /// A probability in `[0, 1]`.
    pub fn probability(&self, field: &str, v: f64) -> Result<f64, ConfigError> {
        if (0.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(self.err(field, format!("must be a probability between 0 and 1, got {v}")))
        }
    }

    /// An optional number checked by `check`, or the default.
    pub fn or(
        &self,
        field: &str,
        v: Option<f64>,
        default: f64,
        check: fn(&Self, &str, f64) -> Result<f64, ConfigError>,
    ) -> Result<f64, ConfigError> {
        v.map_or(Ok(default), |v| check(self, field, v))
    }

    /// Checks a region name against the matrix.
    pub fn region(&self, field: &str, name: &str, matrix: &LatencyMatrix) -> Result<(), ConfigError> {
        if matrix.region_index(name).is_some() {
            Ok(())
        } else {
            Err(self.err(field, format!("unknown region `{name}` (regions: {})", matrix.regions.join(", "))))
        }
    }

    /// Checks a list of region names: known and without repeats.
    pub fn regions(&self, field: &str, names: &[String], matrix: &LatencyMatrix) -> Result<(), ConfigError> {
        if names.is_empty() {
            return Err(self.err(field, "must name at least one region"));
        }
        for (i, name) in names.iter().enumerate() {
            self.region(field, name, matrix)?;
            if names[..i].contains(name) {
                return Err(self.err(field, format!("region `{name}` is listed twice")));
            }
        }
        Ok(())
    }
}

pub fn cluster(ctx: Ctx<'_>, raw: &RawCluster, matrix: &LatencyMatrix) -> Result<Cluster, ConfigError> {
    ctx.regions("cluster.server_regions", &raw.server_regions, matrix)?;
    let shards = raw.shards.unwrap_or(1);
    if shards == 0 {
        return Err(ctx.err("cluster.shards", "must be at least 1"));
    }
    let replicas = raw.replicas_per_shard.unwrap_or(raw.server_regions.len() as u32);
    if replicas == 0 {
        return Err(ctx.err("cluster.replicas_per_shard", "must be at least 1"));
    }
    if u64::from(shards) * u64::from(replicas) > MAX_NODES {
        return Err(
            ctx.err("cluster.shards", format!("{shards} shards x {replicas} replicas exceed {MAX_NODES} nodes"))
        );
    }
    Ok(Cluster {
        preset: raw.preset.clone(),
        server_regions: raw.server_regions.clone(),
        shards,
        replicas_per_shard: replicas,
        leaders: match raw.leaders.unwrap_or(RawLeaders::Colocated) {
            RawLeaders::Colocated => LeaderPlacement::Colocated,
            RawLeaders::Spread => LeaderPlacement::Spread,
        },
    })
}

pub fn clients(
    ctx: Ctx<'_>,
    raw: &RawClients,
    cluster: &Cluster,
    matrix: &LatencyMatrix,
) -> Result<Clients, ConfigError> {
    let regions = raw.regions.clone().unwrap_or_else(|| cluster.server_regions.clone());
    ctx.regions("clients.regions", &regions, matrix)?;
    let per_region = raw.per_region.unwrap_or(1);
    if per_region == 0 {
        return Err(ctx.err("clients.per_region", "must be at least 1"));
    }
    if u64::from(per_region) * regions.len() as u64 > MAX_NODES {
        return Err(ctx.err("clients.per_region", format!("more than {MAX_NODES} clients")));
    }
    Ok(Clients {
        regions,
        per_region,
        mode: client_mode(ctx, raw)?,
        max_retries: raw.max_retries.unwrap_or(5),
        retry_backoff_ms: ctx.or("clients.retry_backoff_ms", raw.retry_backoff_ms, 5.0, Ctx::non_negative)?,
    })
}

fn client_mode(ctx: Ctx<'_>, raw: &RawClients) -> Result<ClientMode, ConfigError> {
    let open = raw.mode == Some(RawMode::Open);
    let misplaced = if open {
        raw.think_ms.map(|_| ("clients.think_ms", "closed")).or(raw.sessions.map(|_| ("clients.sessions", "closed")))
    } else {
        raw.rate_tps
            .map(|_| ("clients.rate_tps", "open"))
            .or(raw.max_outstanding.map(|_| ("clients.max_outstanding", "open")))
    };
    if let Some((field, mode)) = misplaced {
        return Err(ctx.err(field, format!("only applies to mode = \"{mode}\"")));
    }
    if !open {
        let think_ms = ctx.or("clients.think_ms", raw.think_ms, 0.0, Ctx::non_negative)?;
        let sessions = raw.sessions.unwrap_or(1);
        if !(1..=MAX_SESSIONS).contains(&sessions) {
            return Err(ctx.err("clients.sessions", format!("must be between 1 and {MAX_SESSIONS}")));
        }
        return Ok(ClientMode::Closed { think_ms, sessions });
    }
    let Some(rate) = raw.rate_tps else {
        return Err(ctx.err("clients.rate_tps", "required with mode = \"open\" (transactions per second per client)"));
    };
    let max_outstanding = raw.max_outstanding.unwrap_or(100);
    if max_outstanding == 0 {
        return Err(ctx.err("clients.max_outstanding", "must be at least 1"));
    }
    Ok(ClientMode::Open { rate_tps: ctx.positive("clients.rate_tps", rate)?, max_outstanding })
}

pub fn workload(ctx: Ctx<'_>, raw: Option<&WorkloadSpec>, shards: u32) -> Result<WorkloadSpec, ConfigError> {
    let spec = raw.cloned().unwrap_or_default();
    spec.check(shards).map_err(|e| ctx.err(&join("workload", e.field), e.message))?;
    Ok(spec)
}

pub fn clock(ctx: Ctx<'_>, raw: &RawClock, matrix: &LatencyMatrix) -> Result<Clock, ConfigError> {
    let by_node = offsets(ctx, "clock.offset_ms_by_node", raw.offset_ms_by_node.as_ref())?;
    let by_region = offsets(ctx, "clock.offset_ms_by_region", raw.offset_ms_by_region.as_ref())?;
    for region in by_region.keys() {
        ctx.region(&join("clock.offset_ms_by_region", region), region, matrix)?;
    }
    Ok(Clock {
        offset_ms_stddev: ctx.or("clock.offset_ms_stddev", raw.offset_ms_stddev, 0.0, Ctx::non_negative)?,
        drift_ppm: ctx.or("clock.drift_ppm", raw.drift_ppm, 0.0, Ctx::drift)?,
        epsilon_us: ctx.or("clock.epsilon_us", raw.epsilon_us, 100.0, Ctx::non_negative)?,
        offset_ms_by_node: by_node,
        offset_ms_by_region: by_region,
    })
}

fn offsets(
    ctx: Ctx<'_>,
    field: &str,
    raw: Option<&BTreeMap<String, f64>>,
) -> Result<BTreeMap<String, f64>, ConfigError> {
    let map = raw.cloned().unwrap_or_default();
    for (name, ms) in &map {
        ctx.finite(&join(field, name), *ms)?;
    }
    Ok(map)
}

pub fn network(ctx: Ctx<'_>, raw: &RawNetwork) -> Result<Network, ConfigError> {
    if let Some(local) = raw.local_rtt_ms {
        ctx.non_negative("network.local_rtt_ms", local)?;
    }
    Ok(Network {
        jitter_ms: ctx.or("network.jitter_ms", raw.jitter_ms, 0.0, Ctx::non_negative)?,
        loss: ctx.or("network.loss", raw.loss, 0.0, Ctx::probability)?,
        duplicate: ctx.or("network.duplicate", raw.duplicate, 0.0, Ctx::probability)?,
        reorder: raw.reorder.unwrap_or(false),
        rtt_ms: raw.rtt_ms.clone(),
        local_rtt_ms: raw.local_rtt_ms,
        bandwidth_gbps: ctx.or("network.bandwidth_gbps", raw.bandwidth_gbps, 0.0, Ctx::non_negative)?,
    })
}

pub fn cpu(ctx: Ctx<'_>, raw: &RawCpu) -> Result<Cpu, ConfigError> {
    let server_us_per_msg = ctx.or("cpu.server_us_per_msg", raw.server_us_per_msg, 19.0, Ctx::non_negative)?;
    let server_ns_per_byte = ctx.or("cpu.server_ns_per_byte", raw.server_ns_per_byte, 3.0, Ctx::non_negative)?;
    let server_ns_per_key = ctx.or("cpu.server_ns_per_key", raw.server_ns_per_key, 0.0, Ctx::non_negative)?;
    let server_ns_per_field = ctx.or("cpu.server_ns_per_field", raw.server_ns_per_field, 0.0, Ctx::non_negative)?;
    Ok(Cpu {
        server_us_per_msg,
        client_us_per_msg: ctx.or("cpu.client_us_per_msg", raw.client_us_per_msg, 13.0, Ctx::non_negative)?,
        service_us_per_msg: ctx.or(
            "cpu.service_us_per_msg",
            raw.service_us_per_msg,
            server_us_per_msg,
            Ctx::non_negative,
        )?,
        server_ns_per_byte,
        client_ns_per_byte: ctx.or("cpu.client_ns_per_byte", raw.client_ns_per_byte, 3.0, Ctx::non_negative)?,
        service_ns_per_byte: ctx.or(
            "cpu.service_ns_per_byte",
            raw.service_ns_per_byte,
            server_ns_per_byte,
            Ctx::non_negative,
        )?,
        server_ns_per_field,
        client_ns_per_field: ctx.or("cpu.client_ns_per_field", raw.client_ns_per_field, 0.0, Ctx::non_negative)?,
        service_ns_per_field: ctx.or(
            "cpu.service_ns_per_field",
            raw.service_ns_per_field,
            server_ns_per_field,
            Ctx::non_negative,
        )?,
        server_ns_per_key,
        client_ns_per_key: ctx.or("cpu.client_ns_per_key", raw.client_ns_per_key, 0.0, Ctx::non_negative)?,
        service_ns_per_key: ctx.or(
            "cpu.service_ns_per_key",
            raw.service_ns_per_key,
            server_ns_per_key,
            Ctx::non_negative,
        )?,
    })
}

pub fn disk(ctx: Ctx<'_>, raw: &RawDisk) -> Result<Disk, ConfigError> {
    Ok(Disk { fsync_ms: ctx.or("disk.fsync_ms", raw.fsync_ms, 0.1, Ctx::non_negative)? })
}

pub fn run(ctx: Ctx<'_>, raw: &RawRun) -> Result<Run, ConfigError> {
    let duration_s = ctx.or("run.duration_s", raw.duration_s, 10.0, Ctx::positive)?;
    if duration_s > MAX_DURATION_S {
        return Err(ctx.err("run.duration_s", format!("must be at most {MAX_DURATION_S} simulated seconds")));
    }
    let warmup_s = ctx.or("run.warmup_s", raw.warmup_s, duration_s / 10.0, Ctx::non_negative)?;
    if warmup_s >= duration_s {
        let field = if raw.warmup_s.is_some() { "run.warmup_s" } else { "run.duration_s" };
        return Err(ctx.err(field, format!("warmup_s ({warmup_s}) must be shorter than duration_s ({duration_s})")));
    }
    let drain_s = ctx.or("run.drain_s", raw.drain_s, 5.0, Ctx::non_negative)?;
    if drain_s > MAX_DURATION_S {
        return Err(ctx.err("run.drain_s", format!("must be at most {MAX_DURATION_S} seconds")));
    }
    Ok(Run { duration_s, warmup_s, drain_s, seed: raw.seed.unwrap_or(1) })
}

pub fn protocol(ctx: Ctx<'_>, raw: &RawProtocol) -> Result<Protocol, ConfigError> {
    if raw.name.trim().is_empty() {
        return Err(ctx.err("protocol.name", "must name a protocol"));
    }
    let mut params = Params::new();
    for (name, value) in raw.params.iter().flatten() {
        let field = join("protocol.params", name);
        params.set(name, param_value(ctx, &field, value)?);
    }
    Ok(Protocol { name: raw.name.clone(), params })
}

fn param_value(ctx: Ctx<'_>, field: &str, v: &toml::Value) -> Result<ParamValue, ConfigError> {
    match v {
        toml::Value::Boolean(b) => Ok(ParamValue::Bool(*b)),
        toml::Value::Integer(i) => Ok(ParamValue::Int(*i)),
        toml::Value::Float(x) => Ok(ParamValue::Float(ctx.finite(field, *x)?)),
        toml::Value::String(s) => Ok(ParamValue::Str(s.clone())),
        other => Err(ctx
            .err(field, format!("a parameter must be a boolean, integer, float or string, not {}", other.type_str()))),
    }
}
