//! Experiment files: parsing and validating the TOML format of CONTRACT.md
//! into an [`Experiment`] that the simulator (and the CLI) can run.
//!
//! Every problem is a [`ConfigError`] naming the file, the line and the
//! dotted field (`examples/x.toml:14: clock.offset_ms_stdev: unknown field,
//! expected one of offset_ms_stddev, ...`), never a panic. Parsing goes in
//! three steps: toml's spanned parse indexes the document (module `locate`),
//! serde types the file as written (`raw`), and resolution applies the
//! defaults and checks values and region names (`resolve`, `matrix`,
//! `faults`). Node names need the built topology and are checked by
//! [`Experiment::check_node_names`]; the protocol name and its parameters
//! are checked by the caller, with [`Experiment::error_at`] to place the
//! error.

mod diagnose;
mod error;
mod faults;
mod locate;
mod matrix;
mod model;
mod plots;
mod raw;
mod resolve;
mod sweep;

pub use diagnose::{syntax_error, typing_error};
pub use error::ConfigError;
pub use locate::Locator;
pub use matrix::DEFAULT_LOCAL_RTT_MS;
pub use meridian_workload::WorkloadSpec;
pub use model::{
    ClientMode, Clients, Clock, Cluster, Cpu, Disk, Fault, FaultKind, Network, PartitionTarget, Protocol, Run,
};
pub use plots::{METRICS, PlotKind, PlotSpec, is_metric};
pub use resolve::{MAX_DURATION_S, MAX_NODES};
pub use sweep::{Axis, POINTS_MAX, Point, REPEAT_MAX, Sweep, SweepMode, value_text};

use diagnose::unknown_node_message;
use locate::join;
use meridian_core::{ClusterSpec, LatencyMatrix, RegionId, Topology};
use raw::RawExperiment;
use resolve::Ctx;
use std::path::Path;

/// The embedded default experiment: examples/tiga-gcp.toml, shortened.
const DEMO: &str = include_str!("demo.toml");

/// Most lines of a file's opening comment kept as its description.
pub const FILE_COMMENT_LINES_MAX: usize = 40;

/// Name the embedded demo goes by in errors.
pub const DEMO_FILE: &str = "<embedded demo>";

/// A parsed, validated experiment. Fields hold the values in force, with
/// defaults applied; changing them afterwards bypasses validation.
#[derive(Clone, Debug)]
pub struct Experiment {
    /// The file it came from (as given), for error messages.
    pub file: String,
    pub cluster: Cluster,
    pub clients: Clients,
    pub workload: WorkloadSpec,
    pub clock: Clock,
    pub network: Network,
    pub cpu: Cpu,
    pub disk: Disk,
    pub faults: Vec<Fault>,
    pub run: Run,
    pub protocol: Protocol,
    matrix: LatencyMatrix,
    locations: Locator,
}

impl Experiment {
    /// Parses and validates an experiment; `file` names it in errors. A
    /// file with a `[sweep]` is validated at every point and gives its
    /// first point (`meridian experiment` runs them all).
    pub fn from_str(text: &str, file: &str) -> Result<Experiment, ConfigError> {
        let locations = Locator::new(text).map_err(|e| syntax_error(file, text, &e))?;
        if locations.kind_of("sweep").is_some() || locations.kind_of("plots").is_some() {
            let sweep = Sweep::from_str(text, file)?;
            let mut points = sweep.validate()?;
            return Ok(points.swap_remove(0));
        }
        Experiment::parse_one(text, file)
    }

    /// Parses one experiment (no sweep).
    fn parse_one(text: &str, file: &str) -> Result<Experiment, ConfigError> {
        let locations = Locator::new(text).map_err(|e| syntax_error(file, text, &e))?;
        check_section_shapes(file, &locations)?;
        let raw: RawExperiment = toml::from_str(text).map_err(|e| typing_error(file, &locations, &e))?;
        let ctx = Ctx { file, loc: &locations };
        let mut experiment = resolve_all(ctx, &raw)?;
        experiment.locations = locations;
        Ok(experiment)
    }

    /// Reads and parses an experiment file; an unreadable file is an error
    /// too.
    pub fn load(path: &Path) -> Result<Experiment, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(&file, None, "", format!("cannot read the file: {e}")))?;
        Experiment::from_str(&text, &file)
    }

    /// The embedded default: a three-region Tiga-like cluster (the
    /// `tiga-gcp` example shortened to a few simulated seconds).
    pub fn demo() -> Experiment {
        Experiment::from_str(DEMO, DEMO_FILE).expect("the embedded demo experiment is valid")
    }

    /// The text of the embedded demo.
    pub fn demo_text() -> &'static str {
        DEMO
    }

    /// The round-trip matrix; its regions are the cluster's regions.
    pub fn matrix(&self) -> &LatencyMatrix {
        &self.matrix
    }

    /// The shape to build the topology from, region names resolved to ids
    /// of [`Experiment::matrix`].
    pub fn cluster_spec(&self) -> ClusterSpec {
        let ids = |names: &[String]| -> Vec<RegionId> {
            names.iter().filter_map(|n| self.matrix.region_index(n)).map(|i| RegionId(i as u16)).collect()
        };
        ClusterSpec {
            regions: self.matrix.regions.clone(),
            server_regions: ids(&self.cluster.server_regions),
            shards: self.cluster.shards,
            replicas_per_shard: self.cluster.replicas_per_shard,
            leaders: self.cluster.leaders,
            client_regions: ids(&self.clients.regions),
            clients_per_region: self.clients.per_region,
        }
    }

    /// Overrides the protocol (CLI `--protocol`). Parameters written for a
    /// different protocol are dropped; they are kept when the name is the
    /// file's own.
    /// Open loop: the whole offered rate of `clients` clients (each at
    /// `rate_tps`); `None` for closed-loop clients.
    pub fn offered_tps(&self, clients: usize) -> Option<f64> {
        match self.clients.mode {
            ClientMode::Open { rate_tps, .. } => Some(rate_tps * clients as f64),
            ClientMode::Closed { .. } => None,
        }
    }

    pub fn set_protocol(&mut self, name: &str) {
        if self.protocol.name != name {
            self.protocol.name = name.to_string();
            self.protocol.params = meridian_core::Params::new();
        }
    }

    /// Overrides the seed (CLI `--seed`).
    pub fn set_seed(&mut self, seed: u64) {
        self.run.seed = seed;
    }

    /// Applies the CLI overrides that were given.
    pub fn apply_overrides(&mut self, protocol: Option<&str>, seed: Option<u64>) {
        if let Some(p) = protocol {
            self.set_protocol(p);
        }
        if let Some(s) = seed {
            self.set_seed(s);
        }
    }

    /// The line of a dotted field in the file (or of its nearest enclosing
    /// table that is written there).
    pub fn line_of(&self, field: &str) -> Option<usize> {
        self.locations.line_of(field)
    }

    /// An error about a field of this file, placed at its line: for checks
    /// the caller makes (unknown protocol, bad protocol parameter).
    pub fn error_at(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(&self.file, self.line_of(field), field, message)
    }

    /// Checks every node name the file mentions (faults, per-node clock
    /// offsets) against the built topology.
    pub fn check_node_names(&self, topology: &Topology) -> Result<(), ConfigError> {
        for (i, fault) in self.faults.iter().enumerate() {
            let field = match &fault.kind {
                FaultKind::Partition(PartitionTarget::Nodes(_)) => "nodes",
                FaultKind::Partition(PartitionTarget::Links(_)) => "links",
                FaultKind::Partition(PartitionTarget::OneWay(_)) => "one_way",
                _ => "node",
            };
            for name in fault.node_names() {
                self.check_node(topology, &format!("faults[{i}].{field}"), name)?;
            }
        }
        for name in self.clock.offset_ms_by_node.keys() {
            self.check_node(topology, &join("clock.offset_ms_by_node", name), name)?;
        }
        Ok(())
    }

    fn check_node(&self, topology: &Topology, field: &str, name: &str) -> Result<(), ConfigError> {
        if topology.node_by_name(name).is_some() {
            return Ok(());
        }
        Err(self.error_at(field, unknown_node_message(topology, name)))
    }
}

/// `[[run]]` where `[run]` is meant (or `[faults]` for `[[faults]]`):
/// caught before serde, which would read an array as a struct's fields in
/// order and report something baffling.
fn check_section_shapes(file: &str, loc: &Locator) -> Result<(), ConfigError> {
    const TABLES: [&str; 9] = ["cluster", "clients", "workload", "clock", "network", "cpu", "disk", "run", "protocol"];
    for name in TABLES {
        if loc.kind_of(name).is_some_and(|k| k != "table") {
            return Err(ConfigError::new(
                file,
                loc.line_of(name),
                name,
                format!("must be a table, written [{name}] (not [[{name}]] or a value)"),
            ));
        }
    }
    if loc.kind_of("faults").is_some_and(|k| k != "array") {
        return Err(ConfigError::new(
            file,
            loc.line_of("faults"),
            "faults",
            "must be an array of tables, each written [[faults]]",
        ));
    }
    Ok(())
}

fn resolve_all(ctx: Ctx<'_>, raw: &RawExperiment) -> Result<Experiment, ConfigError> {
    let no_clients = raw::RawClients::default();
    let raw_clients = raw.clients.as_ref().unwrap_or(&no_clients);
    let no_network = raw::RawNetwork::default();
    let raw_network = raw.network.as_ref().unwrap_or(&no_network);
    let matrix = matrix::build(ctx, &raw.cluster, raw_clients, raw_network)?;
    let cluster = resolve::cluster(ctx, &raw.cluster, &matrix)?;
    let clients = resolve::clients(ctx, raw_clients, &cluster, &matrix)?;
    let workload = resolve::workload(ctx, raw.workload.as_ref(), cluster.shards)?;
    let clock = resolve::clock(ctx, raw.clock.as_ref().unwrap_or(&Default::default()), &matrix)?;
    let network = resolve::network(ctx, raw_network)?;
    let cpu = resolve::cpu(ctx, raw.cpu.as_ref().unwrap_or(&Default::default()))?;
    let disk = resolve::disk(ctx, raw.disk.as_ref().unwrap_or(&Default::default()))?;
    let run = resolve::run(ctx, raw.run.as_ref().unwrap_or(&Default::default()))?;
    let faults = faults::resolve(ctx, &raw.faults, &run, &matrix)?;
    let protocol = resolve::protocol(ctx, &raw.protocol)?;
    Ok(Experiment {
        file: ctx.file.to_string(),
        cluster,
        clients,
        workload,
        clock,
        network,
        cpu,
        disk,
        faults,
        run,
        protocol,
        matrix,
        locations: Locator::default(),
    })
}

/// The `[cluster] preset` / `[network] rtt_ms` / `local_rtt_ms` trio as other
/// file formats spell it (the runtime's cluster file): the latency matrix,
/// or an error placed at the field. `known` lists the region names the file
/// uses elsewhere, which disambiguate hyphenated pair keys.
pub fn latency_matrix(
    file: &str,
    loc: &Locator,
    preset: Option<&str>,
    known: &[String],
    rtt_ms: Option<&std::collections::BTreeMap<String, f64>>,
    local_rtt_ms: Option<f64>,
) -> Result<LatencyMatrix, ConfigError> {
    let cluster = raw::RawCluster {
        preset: preset.map(str::to_string),
        server_regions: known.to_vec(),
        shards: None,
        replicas_per_shard: None,
        leaders: None,
    };
    let network = raw::RawNetwork { rtt_ms: rtt_ms.cloned(), local_rtt_ms, ..Default::default() };
    matrix::build(Ctx { file, loc }, &cluster, &raw::RawClients::default(), &network)
}

/// `[protocol.params]` as other file formats spell it: each value typed as
/// the experiment file types it, errors placed at `protocol.params.NAME`.
pub fn protocol_params(
    file: &str,
    loc: &Locator,
    params: Option<&std::collections::BTreeMap<String, toml::Value>>,
) -> Result<meridian_core::Params, ConfigError> {
    let raw = raw::RawProtocol { name: "-".into(), params: params.cloned() };
    resolve::protocol(Ctx { file, loc }, &raw).map(|p| p.params)
}
