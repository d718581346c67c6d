//! The cluster file: which nodes exist, where they listen, which protocol
//! they run with which parameters, the WAN to emulate, clock offsets to
//! inject and where each node keeps its write-ahead log.
//!
//! The node set is the protocol's topology (replicas, its services and the
//! front-end nodes, named as the simulator names them); every node gets
//! addresses from `[listen]` unless a `[[nodes]]` entry gives its own.
//! Problems are [`ConfigError`]s naming file, line and field, as for
//! experiment files. This module must never open sockets or files other
//! than the cluster file itself.

use meridian_core::{
    ClusterSpec, LatencyMatrix, LeaderPlacement, NodeId, Params, ProtocolInfo, RegionId, Role, Topology,
};
use meridian_experiment::{ConfigError, Locator, syntax_error, typing_error};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most nodes a cluster file may describe (processes on one machine).
pub const MAX_NODES: usize = 256;
/// Largest WAN scale factor (a slowed-down WAN is for tests only).
pub const MAX_WAN_SCALE: f64 = 100.0;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    cluster: RawCluster,
    frontends: Option<RawFrontends>,
    network: Option<RawNetwork>,
    clock: Option<RawClock>,
    listen: Option<RawListen>,
    storage: Option<RawStorage>,
    security: Option<RawSecurity>,
    protocol: RawProtocol,
    #[serde(default)]
    nodes: Vec<RawNode>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    name: Option<String>,
    preset: Option<String>,
    server_regions: Vec<String>,
    shards: Option<u32>,
    replicas_per_shard: Option<u32>,
    leaders: Option<String>,
    seed: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFrontends {
    regions: Option<Vec<String>>,
    per_region: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    emulate_wan: Option<bool>,
    wan_scale: Option<f64>,
    jitter_ms: Option<f64>,
    rtt_ms: Option<BTreeMap<String, f64>>,
    local_rtt_ms: Option<f64>,
    queue_messages: Option<u32>,
    stale_ms: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawClock {
    epsilon_us: Option<f64>,
    offset_ms_by_node: Option<BTreeMap<String, f64>>,
    offset_ms_by_region: Option<BTreeMap<String, f64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawListen {
    host: Option<String>,
    base_port: Option<u16>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawStorage {
    data_dir: Option<String>,
    fsync: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSecurity {
    password: Option<String>,
    password_file: Option<String>,
    tls: Option<bool>,
    client_tls: Option<bool>,
    certs_dir: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProtocol {
    name: String,
    params: Option<BTreeMap<String, toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: String,
    region: Option<String>,
    peer: Option<String>,
    client: Option<String>,
    redis: Option<String>,
    metrics: Option<String>,
}

/// Where one node listens.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeAddrs {
    /// Node-to-node transport.
    pub peer: SocketAddr,
    /// Client API (front-end nodes only).
    pub client: Option<SocketAddr>,
    /// Redis protocol gateway (front-end nodes only).
    pub redis: Option<SocketAddr>,
    /// Prometheus `/metrics` and `/health`.
    pub metrics: SocketAddr,
}

/// The WAN the delay injector emulates.
#[derive(Clone, Debug, PartialEq)]
pub struct Wan {
    /// Multiplies every one-way delay of the matrix (0.01 shrinks a
    /// 100 ms round trip to 1 ms).
    pub scale: f64,
    /// Mean of the exponential extra one-way delay, before scaling.
    pub jitter_ms: f64,
}

/// Where the cluster's password comes from.
#[derive(Clone, PartialEq)]
pub enum PasswordSource {
    /// Written in the cluster file.
    Inline(String),
    /// The first line of this file, read when a node starts or a client
    /// connects (it may exist only on the machines that need it).
    File(PathBuf),
}

impl std::fmt::Debug for PasswordSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // Never printed, even in debug output.
            PasswordSource::Inline(_) => f.write_str("Inline(<redacted>)"),
            PasswordSource::File(p) => f.debug_tuple("File").field(p).finish(),
        }
    }
}

/// Who may connect: the file's `[security]`. Material (password file,
/// certificates) is read by `crate::security`, never here.
#[derive(Clone, Debug, PartialEq)]
pub struct Security {
    /// Clients of the Redis gateway and the client API must give it.
    pub password: Option<PasswordSource>,
    /// Peers talk mutual TLS, each certificate signed by the cluster's CA
    /// and naming its node.
    pub tls: bool,
    /// Front-ends serve the client API and the Redis gateway over TLS.
    pub client_tls: bool,
    /// `ca.pem`, and `<node>.pem` / `<node>.key` for each node.
    pub certs_dir: PathBuf,
    /// Lines of `password_file` and `certs_dir`, for errors found when
    /// their files are read.
    pub password_file_line: Option<usize>,
    pub certs_dir_line: Option<usize>,
}

impl Security {
    /// Whether any TLS material is needed.
    pub fn needs_certs(&self) -> bool {
        self.tls || self.client_tls
    }
}

/// A parsed, validated cluster file.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// The file it came from, for messages.
    pub file: String,
    pub name: String,
    pub protocol: String,
    pub params: Params,
    pub topology: Arc<Topology>,
    pub matrix: LatencyMatrix,
    /// `None`: no delay is injected.
    pub wan: Option<Wan>,
    pub epsilon_us: u64,
    /// Injected wall-clock offset of each node, by node index.
    pub offset_ns: Vec<i64>,
    /// Addresses of each node, by node index.
    pub addrs: Vec<NodeAddrs>,
    pub data_dir: PathBuf,
    pub fsync: bool,
    pub seed: u64,
    /// Bound of each node's outgoing queue per peer, in messages.
    pub queue_messages: usize,
    /// How long a message may wait in a queue past its due time (an
    /// outgoing queue, or a node's inbox) before it is dropped as stale.
    pub stale: std::time::Duration,
    pub security: Security,
}

impl ClusterConfig {
    /// Reads a cluster file whose protocol is one of `protocols` (the
    /// runnable ones; the file's services come from its entry).
    pub fn load(path: &Path, protocols: &[ProtocolInfo]) -> Result<ClusterConfig, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(&file, None, "", format!("cannot read the file: {e}")))?;
        ClusterConfig::from_str(&text, &file, protocols)
    }

    pub fn from_str(text: &str, file: &str, protocols: &[ProtocolInfo]) -> Result<ClusterConfig, ConfigError> {
        let loc = Locator::new(text).map_err(|e| syntax_error(file, text, &e))?;
        let raw: RawFile = toml::from_str(text).map_err(|e| typing_error(file, &loc, &e))?;
        resolve(&Ctx { file, loc: &loc, protocols }, raw)
    }

    /// The node called `name`, or an error listing the names.
    pub fn node(&self, name: &str) -> Result<NodeId, String> {
        self.topology.node_by_name(name).ok_or_else(|| {
            let names: Vec<&str> = self.topology.nodes.iter().map(|n| n.name.as_str()).collect();
            format!("{}: no node `{name}` (nodes: {})", self.file, names.join(", "))
        })
    }

    /// Front-end nodes (coordinators with client API and Redis gateway).
    pub fn frontends(&self) -> &[NodeId] {
        self.topology.clients()
    }

    /// The write-ahead log directory of a node.
    pub fn wal_dir(&self, node: NodeId) -> PathBuf {
        self.node_dir(node).join("wal")
    }

    /// A node's own directory (log, pid file, WAL).
    pub fn node_dir(&self, node: NodeId) -> PathBuf {
        self.data_dir.join(self.topology.name(node))
    }

    /// A number identifying this cluster on the wire, so that a node never
    /// takes messages from another cluster's node on a reused port.
    pub fn cluster_id(&self) -> u64 {
        let mut text = format!("{}|{}", self.name, self.protocol);
        for n in &self.topology.nodes {
            text.push('|');
            text.push_str(&n.name);
        }
        meridian_core::ids::fnv1a(text.as_bytes())
    }

    /// One-way delay injected from `a` to `b` before jitter, in ns.
    pub fn one_way_ns(&self, a: NodeId, b: NodeId) -> u64 {
        let Some(wan) = &self.wan else { return 0 };
        let (ra, rb) = (self.topology.region_of(a).index(), self.topology.region_of(b).index());
        (self.matrix.one_way_ns(ra, rb) as f64 * wan.scale) as u64
    }
}

struct Ctx<'a> {
    file: &'a str,
    loc: &'a Locator,
    protocols: &'a [ProtocolInfo],
}

impl Ctx<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.file, self.loc.line_of(field), field, message)
    }

    fn number(&self, field: &str, v: f64, lo: f64, hi: f64) -> Result<f64, ConfigError> {
        if v.is_finite() && (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(self.err(field, format!("must be a number between {lo} and {hi}, got {v}")))
        }
    }

    fn region(&self, field: &str, name: &str, matrix: &LatencyMatrix) -> Result<RegionId, ConfigError> {
        matrix
            .region_index(name)
            .map(|i| RegionId(i as u16))
            .ok_or_else(|| self.err(field, format!("unknown region `{name}` (regions: {})", matrix.regions.join(", "))))
    }
}

fn resolve(ctx: &Ctx<'_>, raw: RawFile) -> Result<ClusterConfig, ConfigError> {
    let frontends = raw.frontends.unwrap_or_default();
    let network = raw.network.unwrap_or_default();
    let mut known = raw.cluster.server_regions.clone();
    known.extend(frontends.regions.iter().flatten().cloned());
    let matrix = meridian_experiment::latency_matrix(
        ctx.file,
        ctx.loc,
        raw.cluster.preset.as_deref(),
        &known,
        network.rtt_ms.as_ref(),
        network.local_rtt_ms,
    )?;
    let spec = cluster_spec(ctx, &raw.cluster, &frontends, &matrix)?;
    let protocol = raw.protocol.name.trim().to_string();
    let params = meridian_experiment::protocol_params(ctx.file, ctx.loc, raw.protocol.params.as_ref())?;
    let topology = Arc::new(build_topology(ctx, &protocol, &params, &spec)?);
    if topology.nodes.len() > MAX_NODES {
        return Err(ctx.err("cluster", format!("{} nodes; at most {MAX_NODES}", topology.nodes.len())));
    }
    let clock = raw.clock.unwrap_or_default();
    let storage = raw.storage.unwrap_or_default();
    let addrs = addresses(ctx, raw.listen.unwrap_or_default(), &raw.nodes, &topology)?;
    let security = security(ctx, raw.security.unwrap_or_default())?;
    check_exposure(ctx, &addrs, &raw.nodes, &security)?;
    Ok(ClusterConfig {
        file: ctx.file.to_string(),
        name: raw.cluster.name.clone().unwrap_or_else(|| "meridian".into()),
        offset_ns: offsets(ctx, &clock, &topology)?,
        addrs,
        security,
        wan: wan(ctx, &network)?,
        epsilon_us: ctx.number("clock.epsilon_us", clock.epsilon_us.unwrap_or(100.0), 0.0, 1e9)? as u64,
        queue_messages: ctx.number(
            "network.queue_messages",
            f64::from(network.queue_messages.unwrap_or(65_536)),
            1.0,
            1e7,
        )? as usize,
        stale: std::time::Duration::from_secs_f64(
            ctx.number("network.stale_ms", network.stale_ms.unwrap_or(1000.0), 1.0, 3.6e6)? / 1e3,
        ),
        data_dir: PathBuf::from(storage.data_dir.unwrap_or_else(|| "meridian-data".into())),
        fsync: storage.fsync.unwrap_or(true),
        seed: raw.cluster.seed.unwrap_or(1),
        protocol,
        params,
        topology,
        matrix,
    })
}

fn cluster_spec(
    ctx: &Ctx<'_>,
    raw: &RawCluster,
    frontends: &RawFrontends,
    matrix: &LatencyMatrix,
) -> Result<ClusterSpec, ConfigError> {
    if raw.server_regions.is_empty() {
        return Err(ctx.err("cluster.server_regions", "names no region"));
    }
    let server_regions = raw
        .server_regions
        .iter()
        .enumerate()
        .map(|(i, r)| ctx.region(&format!("cluster.server_regions[{i}]"), r, matrix))
        .collect::<Result<Vec<_>, _>>()?;
    let default_frontends = vec![raw.server_regions[0].clone()];
    let client_regions = frontends
        .regions
        .as_ref()
        .unwrap_or(&default_frontends)
        .iter()
        .enumerate()
        .map(|(i, r)| ctx.region(&format!("frontends.regions[{i}]"), r, matrix))
        .collect::<Result<Vec<_>, _>>()?;
    let leaders = match raw.leaders.as_deref().unwrap_or("colocated") {
        "colocated" => LeaderPlacement::Colocated,
        "spread" => LeaderPlacement::Spread,
        other => return Err(ctx.err("cluster.leaders", format!("`{other}`: expected \"colocated\" or \"spread\""))),
    };
    let count = |field: &str, v: Option<u32>, default: u32| -> Result<u32, ConfigError> {
        let v = v.unwrap_or(default);
        if (1..=64).contains(&v) { Ok(v) } else { Err(ctx.err(field, format!("must be between 1 and 64, got {v}"))) }
    };
    Ok(ClusterSpec {
        regions: matrix.regions.clone(),
        server_regions,
        shards: count("cluster.shards", raw.shards, 1)?,
        replicas_per_shard: count("cluster.replicas_per_shard", raw.replicas_per_shard, 3)?,
        leaders,
        client_regions,
        clients_per_region: count("frontends.per_region", frontends.per_region, 1)?,
    })
}

/// The protocol's topology: its services are part of the node set, found
/// through the protocol's entry so every protocol works without naming any
/// here.
fn build_topology(ctx: &Ctx<'_>, name: &str, params: &Params, spec: &ClusterSpec) -> Result<Topology, ConfigError> {
    let Some(info) = ctx.protocols.iter().find(|p| p.name == name) else {
        let runnable: Vec<&str> = ctx.protocols.iter().map(|p| p.name).collect();
        return Err(ctx
            .err("protocol.name", format!("`{name}` is not a runnable protocol (runnable: {})", runnable.join(", "))));
    };
    info.topology(params, spec).map_err(|why| {
        let param = why.split('`').nth(1).unwrap_or("");
        ctx.err(&format!("protocol.params.{param}"), why)
    })
}

fn wan(ctx: &Ctx<'_>, raw: &RawNetwork) -> Result<Option<Wan>, ConfigError> {
    let scale = ctx.number("network.wan_scale", raw.wan_scale.unwrap_or(1.0), 0.0, MAX_WAN_SCALE)?;
    let jitter_ms = ctx.number("network.jitter_ms", raw.jitter_ms.unwrap_or(0.0), 0.0, 10_000.0)?;
    Ok(raw.emulate_wan.unwrap_or(true).then_some(Wan { scale, jitter_ms }))
}

fn offsets(ctx: &Ctx<'_>, raw: &RawClock, topology: &Topology) -> Result<Vec<i64>, ConfigError> {
    let by_node = raw.offset_ms_by_node.clone().unwrap_or_default();
    let by_region = raw.offset_ms_by_region.clone().unwrap_or_default();
    for (name, ms) in &by_node {
        let field = format!("clock.offset_ms_by_node.{name}");
        if topology.node_by_name(name).is_none() {
            return Err(ctx.err(&field, format!("unknown node `{name}`")));
        }
        ctx.number(&field, *ms, -1e6, 1e6)?;
    }
    for (name, ms) in &by_region {
        let field = format!("clock.offset_ms_by_region.{name}");
        if topology.region_by_name(name).is_none() {
            return Err(ctx.err(&field, format!("unknown region `{name}`")));
        }
        ctx.number(&field, *ms, -1e6, 1e6)?;
    }
    Ok(topology
        .nodes
        .iter()
        .map(|n| {
            let region = &topology.regions[n.region.index()];
            let ms = by_node.get(&n.name).or_else(|| by_region.get(region)).copied().unwrap_or(0.0);
            (ms * 1e6).round() as i64
        })
        .collect())
}

fn addresses(
    ctx: &Ctx<'_>,
    listen: RawListen,
    overrides: &[RawNode],
    topology: &Topology,
) -> Result<Vec<NodeAddrs>, ConfigError> {
    let host = listen.host.unwrap_or_else(|| "127.0.0.1".into());
    let base = listen.base_port.unwrap_or(7400);
    let port = |i: usize, k: usize| -> Result<u16, ConfigError> {
        u16::try_from(usize::from(base) + 4 * i + k).map_err(|_| {
            ctx.err("listen.base_port", format!("{base} leaves no room for {} nodes", topology.nodes.len()))
        })
    };
    let addr = |field: &str, text: &str| -> Result<SocketAddr, ConfigError> {
        text.parse().map_err(|_| ctx.err(field, format!("`{text}` is not an address `ip:port`")))
    };
    let mut out = Vec::with_capacity(topology.nodes.len());
    for (i, node) in topology.nodes.iter().enumerate() {
        let frontend = matches!(node.role, Role::Client { .. });
        let at =
            |k: usize| -> Result<SocketAddr, ConfigError> { addr("listen.host", &format!("{host}:{}", port(i, k)?)) };
        out.push(NodeAddrs {
            peer: at(0)?,
            client: if frontend { Some(at(1)?) } else { None },
            redis: if frontend { Some(at(2)?) } else { None },
            metrics: at(3)?,
        });
    }
    for (j, raw) in overrides.iter().enumerate() {
        let Some(id) = topology.node_by_name(&raw.name) else {
            let names: Vec<&str> = topology.nodes.iter().map(|n| n.name.as_str()).collect();
            return Err(ctx.err(
                &format!("nodes[{j}].name"),
                format!("no node `{}` in this cluster (nodes: {})", raw.name, names.join(", ")),
            ));
        };
        if let Some(region) = &raw.region {
            let placed = topology.region_name(topology.region_of(id));
            if region != placed {
                return Err(ctx.err(
                    &format!("nodes[{j}].region"),
                    format!("`{}` is placed in `{placed}` by the cluster's shape, not `{region}`", raw.name),
                ));
            }
        }
        let a = &mut out[id.index()];
        let frontend = topology.is_client(id);
        if let Some(p) = &raw.peer {
            a.peer = addr(&format!("nodes[{j}].peer"), p)?;
        }
        if let Some(m) = &raw.metrics {
            a.metrics = addr(&format!("nodes[{j}].metrics"), m)?;
        }
        for (field, value, slot) in [("client", &raw.client, &mut a.client), ("redis", &raw.redis, &mut a.redis)] {
            if let Some(text) = value {
                if !frontend {
                    return Err(ctx.err(&format!("nodes[{j}].{field}"), "only front-end nodes serve clients"));
                }
                *slot = Some(addr(&format!("nodes[{j}].{field}"), text)?);
            }
        }
    }
    check_unique(ctx, &out, topology)?;
    Ok(out)
}

fn security(ctx: &Ctx<'_>, raw: RawSecurity) -> Result<Security, ConfigError> {
    let password = match (raw.password, raw.password_file) {
        (Some(_), Some(_)) => {
            return Err(ctx.err("security.password_file", "give password or password_file, not both"));
        }
        (Some(p), None) if p.is_empty() => return Err(ctx.err("security.password", "is empty")),
        (Some(p), None) => Some(PasswordSource::Inline(p)),
        (None, Some(f)) if f.is_empty() => return Err(ctx.err("security.password_file", "is empty")),
        (None, Some(f)) => Some(PasswordSource::File(PathBuf::from(f))),
        (None, None) => None,
    };
    let tls = raw.tls.unwrap_or(false);
    Ok(Security {
        password,
        tls,
        client_tls: raw.client_tls.unwrap_or(tls),
        certs_dir: PathBuf::from(raw.certs_dir.unwrap_or_else(|| "meridian-certs".into())),
        password_file_line: ctx.loc.line_of("security.password_file"),
        certs_dir_line: ctx.loc.line_of("security.certs_dir").or_else(|| ctx.loc.line_of("security.tls")),
    })
}

/// A node reachable from the network must require the password of its
/// clients and authenticate its peers; only loopback may go without.
fn check_exposure(
    ctx: &Ctx<'_>,
    addrs: &[NodeAddrs],
    overrides: &[RawNode],
    security: &Security,
) -> Result<(), ConfigError> {
    let all = addrs.iter().flat_map(|a| [Some(a.peer), a.client, a.redis, Some(a.metrics)]).flatten();
    let Some(exposed) = all.into_iter().find(|a| !a.ip().is_loopback()) else { return Ok(()) };
    let missing = match (security.password.is_some(), security.tls) {
        (true, true) => return Ok(()),
        (false, true) => "a password (security.password or security.password_file)",
        (true, false) => "mutual TLS between peers (security.tls = true)",
        (false, false) => "[security] with a password and tls = true",
    };
    // Name the field the exposed address came from.
    let field = overrides
        .iter()
        .enumerate()
        .find_map(|(j, n)| {
            [("peer", &n.peer), ("client", &n.client), ("redis", &n.redis), ("metrics", &n.metrics)]
                .into_iter()
                .find(|(_, v)| v.as_deref().and_then(|t| t.parse::<SocketAddr>().ok()) == Some(exposed))
                .map(|(f, _)| format!("nodes[{j}].{f}"))
        })
        .unwrap_or_else(|| "listen.host".into());
    Err(ctx.err(
        &field,
        format!(
            "{} is not loopback: a cluster reachable from the network needs {missing} \
             (`meridian cluster certs` makes the certificates)",
            exposed.ip()
        ),
    ))
}

fn check_unique(ctx: &Ctx<'_>, addrs: &[NodeAddrs], topology: &Topology) -> Result<(), ConfigError> {
    let mut seen: BTreeMap<SocketAddr, &str> = BTreeMap::new();
    for (i, a) in addrs.iter().enumerate() {
        let name = topology.nodes[i].name.as_str();
        for addr in [Some(a.peer), a.client, a.redis, Some(a.metrics)].into_iter().flatten() {
            if let Some(other) = seen.insert(addr, name) {
                let j = topology.node_by_name(other).map_or(0, |n| n.index());
                return Err(ctx.err("nodes", format!("address {addr} is used twice ({other} and {name}; node {j})")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[cluster]
preset = "tiga-gcp"
server_regions = ["south-carolina", "finland", "brazil"]
shards = 2
replicas_per_shard = 3

[frontends]
regions = ["south-carolina", "hong-kong"]

[listen]
base_port = 9000

[protocol]
name = "2pl-paxos"
[protocol.params]
election_timeout_ms = 300

[[nodes]]
name = "shard1-replica2"
region = "brazil"
peer = "127.0.0.1:9999"
"#;

    /// A stand-in for the 2pl-paxos entry: its name and one parameter.
    const PROTOCOLS: [ProtocolInfo; 1] = [ProtocolInfo {
        implemented: true,
        params: &[meridian_core::ParamDoc { name: "election_timeout_ms", default: "1000", doc: "" }],
        ..ProtocolInfo::planned("2pl-paxos", meridian_core::Consistency::StrictSerializable, "")
    }];

    #[test]
    fn nodes_get_default_addresses_unless_overridden() {
        let c = ClusterConfig::from_str(GOOD, "c.toml", &PROTOCOLS).unwrap();
        assert_eq!(c.topology.nodes.len(), 6 + 2);
        let s0 = c.node("shard0-replica0").unwrap();
        assert_eq!(c.addrs[s0.index()].peer.to_string(), "127.0.0.1:9000");
        assert_eq!(c.addrs[s0.index()].client, None);
        let s12 = c.node("shard1-replica2").unwrap();
        assert_eq!(c.addrs[s12.index()].peer.to_string(), "127.0.0.1:9999");
        let fe = c.frontends()[1];
        assert_eq!(c.topology.name(fe), "client-hong-kong-0");
        assert!(c.addrs[fe.index()].redis.is_some());
        let (sc, fi) = (c.node("shard0-replica0").unwrap(), c.node("shard0-replica1").unwrap());
        assert_eq!(c.one_way_ns(sc, fi), 57_000_000);
    }

    fn error(text: &str) -> String {
        ClusterConfig::from_str(text, "c.toml", &PROTOCOLS).unwrap_err().to_string()
    }

    #[test]
    fn bad_files_name_the_line_and_field() {
        let e = error(&GOOD.replace("shards = 2", "shards = 0"));
        assert!(e.starts_with("c.toml:5: cluster.shards: must be between 1 and 64"), "{e}");
        let e = error(&GOOD.replace("region = \"brazil\"", "region = \"finland\""));
        assert!(e.starts_with("c.toml:21: nodes[0].region:"), "{e}");
        let e = error(&GOOD.replace("election_timeout_ms", "election_timeout_s"));
        assert!(e.contains("protocol.params.election_timeout_s: unknown parameter"), "{e}");
        let e = error(&GOOD.replace("base_port = 9000", "base_prt = 9000"));
        assert!(e.starts_with("c.toml:12: listen.base_prt: unknown field"), "{e}");
        let e = error(&GOOD.replace("\"2pl-paxos\"", "\"nope\""));
        assert!(e.contains("protocol.name: `nope` is not a runnable protocol"), "{e}");
        let e = error("[cluster\n");
        assert!(e.starts_with("c.toml:1:"), "{e}");
        let e = error(&GOOD.replace("9999", "9000"));
        assert!(e.contains("used twice"), "{e}");
    }

    #[test]
    fn a_node_reachable_from_the_network_needs_a_password_and_peer_tls() {
        let open = GOOD.replace("base_port = 9000", "host = \"0.0.0.0\"\nbase_port = 9000");
        let e = error(&open);
        assert!(e.starts_with("c.toml:12: listen.host: 0.0.0.0 is not loopback"), "{e}");
        assert!(e.contains("needs [security] with a password and tls = true"), "{e}");
        let e = error(&format!("{open}\n[security]\npassword = \"pw\"\n"));
        assert!(e.contains("needs mutual TLS between peers"), "{e}");
        let e = error(&format!("{open}\n[security]\ntls = true\n"));
        assert!(e.contains("needs a password"), "{e}");
        let e = error(&GOOD.replace("127.0.0.1:9999", "[2001:db8::1]:9999"));
        assert!(e.starts_with("c.toml:22: nodes[0].peer: 2001:db8::1 is not loopback"), "{e}");
        let secured = format!("{open}\n[security]\npassword_file = \"pw.txt\"\ntls = true\n");
        let c = ClusterConfig::from_str(&secured, "c.toml", &PROTOCOLS).unwrap();
        assert_eq!(c.security.password, Some(PasswordSource::File("pw.txt".into())));
        assert!(c.security.tls && c.security.client_tls, "clients get TLS with the peers unless told otherwise");
        assert_eq!(c.security.certs_dir, PathBuf::from("meridian-certs"));
        let c = ClusterConfig::from_str(&format!("{secured}client_tls = false\n"), "c.toml", &PROTOCOLS).unwrap();
        assert!(c.security.tls && !c.security.client_tls);
        // Loopback needs nothing, and may have a password all the same.
        let c = ClusterConfig::from_str(GOOD, "c.toml", &PROTOCOLS).unwrap();
        assert_eq!(c.security.password, None);
        assert!(!c.security.needs_certs());
        let c = ClusterConfig::from_str(&format!("{GOOD}\n[security]\npassword = \"pw\"\n"), "c.toml", &PROTOCOLS);
        assert!(format!("{:?}", c.unwrap().security).contains("<redacted>"), "the password is never printed");
        let e = error(&format!("{GOOD}\n[security]\npassword = \"\"\n"));
        assert!(e.contains("security.password: is empty"), "{e}");
        let e = error(&format!("{GOOD}\n[security]\npasword = \"x\"\n"));
        assert!(e.contains("security.pasword: unknown field"), "{e}");
    }
}
