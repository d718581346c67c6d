//! `meridian`: the command line of Meridian (CONTRACT.md "Commands").
//!
//! Exit status: 0 success; 1 a check found anomalies or a swarm seed failed;
//! 2 bad input (a one-line error naming the file, line and field).

use clap::{Parser, Subcommand};

use indicatif::{ProgressBar, ProgressStyle};
use meridian_checker::{Model, parse_jsonl, to_jsonl};
use meridian_cli::demo;
use meridian_cli::runner::{RunOptions, run_experiment};
use meridian_cli::swarm::{self, SwarmOptions};
use meridian_experiment::Experiment;
use meridian_protocols::registry;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

mod allocator;

#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

/// mimalloc's `mi_option_purge_delay` (its `mimalloc.h`, the v3 sources the `mimalloc`
/// crate builds): milliseconds before freed memory goes back to the OS; -1 keeps it.
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

unsafe extern "C" {
    fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// A simulation frees and reallocates the same memory all run long; returned to the OS
/// it comes back as fresh (transparent huge) pages the kernel must zero again: 12,000
/// page faults and 4-14 % of the CPU time of a 30-s `examples/tiga-gcp.toml` run
/// (docs/flat-cost.md), for 7 % less peak memory. Long-lived servers keep the default
/// and give memory back.
fn keep_freed_memory() {
    // SAFETY: plain calls into the allocator linked as the global one; both take and
    // return integers only and may be called at any time.
    unsafe {
        debug_assert!(mi_option_get(MI_OPTION_PURGE_DELAY) >= 0, "option 15 is not mimalloc's purge delay");
        mi_option_set(MI_OPTION_PURGE_DELAY, -1);
    }
}

#[derive(Parser)]
#[command(name = "meridian", version, about = "Geo-distributed transactions, one substrate, many commit protocols")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the protocols with the consistency level each promises.
    Protocols {
        #[arg(long)]
        json: bool,
        /// Also list the protocols not implemented yet.
        #[arg(long)]
        all: bool,
    },
    /// Run one experiment in the deterministic simulator.
    Sim {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        protocol: Option<String>,
        #[arg(long)]
        seed: Option<u64>,
        /// Write the report JSON here.
        #[arg(long)]
        report: Option<PathBuf>,
        /// Write the history (JSON lines) here.
        #[arg(long)]
        history: Option<PathBuf>,
        /// Skip recording and checking the history (for speed runs).
        #[arg(long)]
        no_check: bool,
        /// Log every simulated event to this file (slow; for debugging).
        #[arg(long)]
        event_log: Option<PathBuf>,
    },
    /// Check a history against a consistency model.
    Check {
        /// strict-serializable | serializable | read-atomic | causal
        #[arg(long)]
        model: String,
        file: PathBuf,
        #[arg(long)]
        report: Option<PathBuf>,
    },
    /// Many short runs with random fault profiles; every history checked.
    Swarm(SwarmOptions),
    /// Every finished protocol side by side on a simulated three-region cluster.
    Demo,
    /// A sweep of simulated runs: results, plots and an HTML report.
    Experiment {
        file: PathBuf,
        /// Where to write (default: results/<file stem>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Points run at once (default: the machine's cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// List the points and exit.
        #[arg(long, conflicts_with_all = ["point", "merge"])]
        points: bool,
        /// Run only point K into DIR/points/ (no results, plots or report).
        #[arg(long, value_name = "K", conflicts_with = "merge")]
        point: Option<usize>,
        /// Build the results, plots and report from points run into these directories.
        #[arg(long, value_name = "DIR", num_args = 1..)]
        merge: Vec<PathBuf>,
    },
    /// Run one node of a real cluster (in the foreground).
    Server {
        /// The cluster file.
        #[arg(long)]
        config: PathBuf,
        /// The node's name (`shard0-replica0`, `client-<region>-0`, ...).
        #[arg(long)]
        node: String,
    },
    /// Start, stop or inspect every node of a cluster file as local processes,
    /// or make its TLS certificates (`certs`).
    Cluster {
        #[arg(value_enum)]
        action: ClusterAction,
        #[arg(long)]
        config: PathBuf,
        /// certs: where to write them (default: the file's `security.certs_dir`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// certs: another name or address the front-ends' certificates carry
        /// (clients reaching them by a DNS name); repeatable.
        #[arg(long)]
        san: Vec<String>,
    },
    /// Run one transaction against a real cluster.
    Client {
        /// The cluster file.
        #[arg(long)]
        cluster: PathBuf,
        /// The front-end node to use (default: the first).
        #[arg(long)]
        node: Option<String>,
        #[command(subcommand)]
        op: ClientOp,
    },
    /// Run an experiment's workload against a real cluster (or etcd) and check it.
    Bench {
        /// The cluster file (for `--target meridian`).
        #[arg(long)]
        cluster: Option<PathBuf>,
        /// The experiment file: its workload, clients and run sections.
        #[arg(long)]
        config: PathBuf,
        /// meridian | etcd
        #[arg(long, default_value = "meridian")]
        target: String,
        /// etcd endpoints, comma separated (`http://127.0.0.1:2379,...`).
        #[arg(long, value_delimiter = ',')]
        endpoints: Vec<String>,
        #[arg(long)]
        seed: Option<u64>,
        #[arg(long)]
        report: Option<PathBuf>,
        #[arg(long)]
        history: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ClusterAction {
    /// Start every node not running; wait until each is healthy.
    Up,
    /// Stop every node.
    Down,
    /// One line per node.
    Status,
    /// Write a CA, one certificate and key per node and (when the file names
    /// a `password_file` that does not exist) a random password.
    Certs,
}

#[derive(Subcommand)]
enum ClientOp {
    /// Read a key.
    Get { key: String },
    /// Write a key.
    Put { key: String, value: String },
    /// A transaction in the expression language (`get a; b = 2; c += 1`), or `--file`.
    Txn {
        expr: Option<String>,
        #[arg(long)]
        file: Option<PathBuf>,
    },
}

/// A failure with its exit status.
struct Failure(u8, String);

fn bad(msg: impl Into<String>) -> Failure {
    Failure(2, msg.into())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Sim { .. } | Command::Swarm(_) | Command::Demo | Command::Experiment { .. }) {
        keep_freed_memory();
    }
    let result = match cli.command {
        Command::Protocols { json, all } => protocols(json, all),
        Command::Sim { config, protocol, seed, report, history, no_check, event_log } => {
            sim(&config, protocol.as_deref(), seed, report.as_deref(), history.as_deref(), no_check, event_log)
        }
        Command::Check { model, file, report } => check(&model, &file, report.as_deref()),
        Command::Swarm(opts) => run_swarm(opts),
        Command::Demo => run_demo(),
        Command::Experiment { file, out, jobs, points, point, merge } => {
            experiment(ExperimentArgs { file, out, jobs, points, point, merge })
        }
        Command::Server { config, node } => server(&config, &node),
        Command::Cluster { action, config, out, san } => cluster(action, &config, out.as_deref(), &san),
        Command::Client { cluster, node, op } => client(&cluster, node.as_deref(), op),
        Command::Bench { cluster, config, target, endpoints, seed, report, history } => {
            bench(BenchArgs { cluster, config, target, endpoints, seed, report, history })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(code, msg)) => {
            if !msg.is_empty() {
                eprintln!("meridian: {msg}");
            }
            ExitCode::from(code)
        }
    }
}

fn protocols(json: bool, all: bool) -> Result<(), Failure> {
    let list: Vec<_> = registry::protocols().iter().filter(|p| all || p.implemented).collect();
    if json {
        let items: Vec<serde_json::Value> = list
            .iter()
            .map(|p| {
                serde_json::json!({
                    "name": p.name,
                    "consistency": p.consistency.name(),
                    "status": status(p),
                    "summary": p.summary,
                    "params": p.params.iter().map(|d| serde_json::json!({"name": d.name, "default": d.default, "doc": d.doc})).collect::<Vec<_>>(),
                    "counters": (p.counters)().iter().map(|c| serde_json::json!({"name": c.name, "doc": c.doc})).collect::<Vec<_>>(),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&items).expect("json"));
        return Ok(());
    }
    for p in list {
        let status = if p.implemented { String::new() } else { format!("  ({})", status(p)) };
        println!("{:<12} {:<20} {}{}", p.name, p.consistency.name(), p.summary, status);
    }
    Ok(())
}

/// `implemented`, `planned`, or `not built` (implemented by a family crate
/// this build left out).
fn status(p: &meridian_core::ProtocolInfo) -> &'static str {
    match (p.implemented, registry::family_of(p.name)) {
        (true, _) => "implemented",
        (false, Some(_)) => "not built",
        (false, None) => "planned",
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), Failure> {
    std::fs::write(path, text).map_err(|e| bad(format!("{}: cannot write: {e}", path.display())))
}

/// A progress bar that appears only once a run has taken a couple of
/// seconds of wall time.
struct LazyBar {
    started: Instant,
    bar: Option<ProgressBar>,
}

impl LazyBar {
    fn new() -> LazyBar {
        LazyBar { started: Instant::now(), bar: None }
    }

    fn update(&mut self, now_ns: u64, end_ns: u64) {
        if self.bar.is_none() && self.started.elapsed() > Duration::from_secs(2) {
            let bar = ProgressBar::new(end_ns / 1_000_000);
            bar.set_style(
                ProgressStyle::with_template("{spinner} simulated {pos}/{len} ms [{bar:30}] {elapsed} (eta {eta})")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(now_ns / 1_000_000);
        }
    }

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

fn sim(
    config: &Path,
    protocol: Option<&str>,
    seed: Option<u64>,
    report_path: Option<&Path>,
    history_path: Option<&Path>,
    no_check: bool,
    event_log: Option<PathBuf>,
) -> Result<(), Failure> {
    if let Some(name) = protocol {
        check_protocol_flag(name)?;
    }
    let mut exp = Experiment::load(config).map_err(|e| bad(e.to_string()))?;
    exp.apply_overrides(protocol, seed);
    let mut bar = LazyBar::new();
    let mut progress = |now, end| bar.update(now, end);
    let opts = RunOptions { record_history: !no_check, extra_faults: None, progress: Some(&mut progress), event_log };
    let out = run_experiment(&exp, opts).map_err(|e| bad(e.to_string()))?;
    bar.finish();
    print!("{}", meridian_cli::summary(&out.report));
    if let Some(path) = report_path {
        write_file(path, &serde_json::to_string_pretty(&out.report.to_json()).expect("json"))?;
    }
    if let Some(path) = history_path {
        write_file(path, &to_jsonl(&out.history))?;
    }
    match out.report.check_valid() {
        Some(false) => Err(Failure(1, String::new())),
        _ => Ok(()),
    }
}

fn check(model: &str, file: &Path, report_path: Option<&Path>) -> Result<(), Failure> {
    let model = Model::from_name(model).ok_or_else(|| {
        let known: Vec<&str> = Model::ALL.iter().map(|m| m.name()).collect();
        bad(format!("--model: unknown model `{model}` ({})", known.join(", ")))
    })?;
    let text = std::fs::read_to_string(file).map_err(|e| bad(format!("{}: cannot read: {e}", file.display())))?;
    let ops = parse_jsonl(&text).map_err(|e| bad(format!("{}:{}: {}", file.display(), e.line, e.message)))?;
    // A history that breaks the format's rules (a completion without an
    // invocation, a value written twice) is bad input, not a verdict.
    meridian_checker::validate(&ops).map_err(|e| {
        let line = nth_nonblank_line(&text, e.position);
        bad(format!("{}:{line}: {}", file.display(), e.message))
    })?;
    let report = meridian_checker::check(&ops, model);
    print!("{}", report.summary());
    if let Some(path) = report_path {
        write_file(path, &serde_json::to_string_pretty(&report.to_json()).expect("json"))?;
    }
    if report.valid { Ok(()) } else { Err(Failure(1, String::new())) }
}

/// The 1-based line of the `n`-th (0-based) non-blank line.
fn nth_nonblank_line(text: &str, n: usize) -> usize {
    text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).nth(n).map_or(0, |(i, _)| i + 1)
}

fn run_swarm(opts: SwarmOptions) -> Result<(), Failure> {
    let base = swarm::base_experiment(&opts).map_err(|e| bad(e.to_string()))?;
    // A bad protocol or parameter fails every seed alike: say so once.
    if registry::entry(&opts.protocol).is_none() {
        return Err(bad(format!("--protocol: {}", registry::not_runnable(&opts.protocol))));
    }
    let started = Instant::now();
    let done = std::sync::atomic::AtomicU64::new(0);
    let report = |r: &swarm::SeedResult| {
        let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if let Some(why) = &r.failure {
            eprintln!("seed {} FAILED: {why}", r.seed);
        } else if n % 25 == 0 || n == opts.seeds {
            eprintln!("{n}/{} seeds done ({:.0} s)", opts.seeds, started.elapsed().as_secs_f64());
        }
    };
    let results = swarm::run_swarm(&base, &opts, &report);
    let failed: Vec<_> = results.iter().filter(|r| r.failure.is_some()).collect();
    let committed: u64 = results.iter().map(|r| r.committed).sum();
    let faults: usize = results.iter().map(|r| r.faults).sum();
    println!(
        "swarm {}: {} seeds from {}, {} faults injected, {} transactions committed, {} failed ({:.0} s)",
        opts.protocol,
        results.len(),
        opts.start,
        faults,
        committed,
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    for r in &failed {
        println!(
            "seed {}: {}\n  reproduce: {}",
            r.seed,
            r.failure.as_deref().unwrap_or(""),
            swarm::reproduce_command(&opts, r.seed)
        );
    }
    if failed.is_empty() { Ok(()) } else { Err(Failure(1, String::new())) }
}

/// `--protocol NAME` must name an implemented protocol.
fn check_protocol_flag(name: &str) -> Result<(), Failure> {
    match registry::entry(name) {
        Some(_) => Ok(()),
        None => Err(bad(format!("--protocol: {}", registry::not_runnable(name)))),
    }
}

fn run_demo() -> Result<(), Failure> {
    let reports = demo::run_demo(|name| eprintln!("running {name} ...")).map_err(|e| bad(e.to_string()))?;
    let exp = Experiment::demo();
    println!(
        "Meridian demo: {} shards x {} replicas in {} ({} latency preset), {} clients in {}, {} workload, {} s simulated",
        exp.cluster.shards,
        exp.cluster.replicas_per_shard,
        exp.cluster.server_regions.join(", "),
        exp.cluster.preset.as_deref().unwrap_or("explicit"),
        exp.clients.total(),
        exp.clients.regions.join(", "),
        exp.workload.kind.name(),
        exp.run.duration_s
    );
    print!("{}", demo::table(&reports));
    println!();
    print!("{}", demo::chart(&reports));
    println!();
    for r in &reports {
        println!("{}", demo::meaning(&r.protocol));
    }
    let dir = std::env::temp_dir().join(format!("meridian-demo-{}", std::process::id()));
    match demo::write_report(&reports, &dir) {
        Ok(page) => println!("\nreport with plots: {}", page.display()),
        Err(e) => eprintln!("meridian: the demo's report was not written: {e}"),
    }
    if reports.iter().any(|r| r.check_valid() == Some(false)) {
        return Err(Failure(1, "a protocol broke its consistency promise".into()));
    }
    Ok(())
}

struct ExperimentArgs {
    file: PathBuf,
    out: Option<PathBuf>,
    jobs: Option<usize>,
    points: bool,
    point: Option<usize>,
    merge: Vec<PathBuf>,
}

fn experiment(args: ExperimentArgs) -> Result<(), Failure> {
    use meridian_cli::experiment as x;
    let fail = |e: x::Failure| match e {
        x::Failure::Input(m) => bad(m),
        x::Failure::Run(m) => Failure(1, m),
    };
    let loaded = x::load(&args.file).map_err(|e| bad(e.to_string()))?;
    if args.points {
        print!("{}", x::list_points(&loaded));
        return Ok(());
    }
    let stem = args.file.file_stem().map_or("experiment".into(), |s| s.to_string_lossy().into_owned());
    let out = args.out.clone().unwrap_or_else(|| Path::new("results").join(stem));
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        return Err(bad("--jobs: must be at least 1"));
    }
    let started = Instant::now();
    let reports = match (args.point, args.merge.is_empty()) {
        (Some(k), _) => {
            if k >= loaded.sweep.len() {
                let msg = format!(
                    "--point {k}: the file has {} points (0 to {})",
                    loaded.sweep.len(),
                    loaded.sweep.len() - 1
                );
                return Err(bad(format!("{}: {msg}", loaded.sweep.file)));
            }
            let reports = x::run_points(&loaded, &[k], 1, &out).map_err(fail)?;
            print!("{}", x::summary(&reports, loaded.sweep.repeat));
            println!("point {k} written to {}", x::point_file(&out, k).display());
            return verdict(&reports);
        }
        (None, false) => x::merge(&loaded, &args.merge).map_err(fail)?,
        (None, true) => {
            let all: Vec<usize> = (0..loaded.sweep.len()).collect();
            x::run_points(&loaded, &all, jobs, &out).map_err(fail)?
        }
    };
    let reproduce = format!("meridian experiment {} --out {}", args.file.display(), out.display());
    std::fs::create_dir_all(&out).map_err(|e| bad(format!("{}: cannot create: {e}", out.display())))?;
    let written = x::write_outputs(&loaded, &reports, &out, reproduce).map_err(fail)?;
    print!("{}", x::summary(&reports, loaded.sweep.repeat));
    println!(
        "{} points in {:.1} s wall ({} jobs); {} plots; report: {}",
        written.rows,
        started.elapsed().as_secs_f64(),
        if args.merge.is_empty() { jobs } else { 0 },
        written.figures.len(),
        out.join("report.html").display()
    );
    verdict(&reports)
}

/// Exit 1 when any point's run broke its promise.
fn verdict(reports: &[(meridian_experiment::Point, serde_json::Value)]) -> Result<(), Failure> {
    let bad: Vec<String> = reports
        .iter()
        .filter(|(_, r)| meridian_report::results::verdict(r) == "INVALID")
        .map(|(p, _)| p.index.to_string())
        .collect();
    if bad.is_empty() { Ok(()) } else { Err(Failure(1, format!("points {} are INVALID", bad.join(", ")))) }
}

fn load_cluster(path: &Path) -> Result<meridian_runtime::ClusterConfig, Failure> {
    meridian_runtime::ClusterConfig::load(path, registry::runnable()).map_err(|e| bad(e.to_string()))
}

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MERIDIAN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).try_init();
}

fn server(config: &Path, node: &str) -> Result<(), Failure> {
    let cfg = load_cluster(config)?;
    let id = cfg.node(node).map_err(bad)?;
    meridian_runtime::security::node_security(&cfg, id).map_err(|e| bad(e.to_string()))?;
    init_logs();
    let entry = registry::entry(&cfg.protocol).expect("a loaded cluster file names a runnable protocol");
    (entry.serve)(cfg, node).map_err(|e| Failure(1, e))
}

fn cluster(action: ClusterAction, config: &Path, out: Option<&Path>, san: &[String]) -> Result<(), Failure> {
    use meridian_runtime::cluster as c;
    let cfg = load_cluster(config)?;
    let failed = |e: String| Failure(1, e);
    if !matches!(action, ClusterAction::Certs) && (out.is_some() || !san.is_empty()) {
        return Err(bad("--out and --san go with `cluster certs` only"));
    }
    match action {
        ClusterAction::Up => {
            // Every node's password and certificates, before any starts.
            for i in 0..cfg.topology.nodes.len() {
                let node = meridian_core::NodeId(i as u32);
                meridian_runtime::security::node_security(&cfg, node).map_err(|e| bad(e.to_string()))?;
            }
            let exe = std::env::current_exe().map_err(|e| failed(format!("cannot find the meridian binary: {e}")))?;
            c::up(&cfg, config, &exe).map_err(failed)
        }
        ClusterAction::Certs => {
            let dir = out.unwrap_or(&cfg.security.certs_dir);
            let issued = meridian_runtime::security::generate(&cfg, dir, san).map_err(failed)?;
            for path in &issued.written {
                println!("wrote {}", path.display());
            }
            if !issued.kept.is_empty() {
                println!("kept {} existing files (remove them to issue new ones)", issued.kept.len());
            }
            if !cfg.security.needs_certs() && out.is_none() {
                println!("note: {} has no `[security] tls = true`; its nodes will not use these", config.display());
            }
            Ok(())
        }
        ClusterAction::Down => c::down(&cfg).map_err(failed),
        ClusterAction::Status => match c::status(&cfg).map_err(failed)? {
            true => Ok(()),
            false => Err(Failure(1, String::new())),
        },
    }
}

fn client(cluster: &Path, node: Option<&str>, op: ClientOp) -> Result<(), Failure> {
    use meridian_core::Outcome;
    use meridian_runtime::{client as rc, expr};
    let cfg = load_cluster(cluster)?;
    let front = match node {
        Some(name) => cfg.node(name).map_err(bad)?,
        None => cfg.frontends()[0],
    };
    let Some(addr) = cfg.addrs[front.index()].client else {
        return Err(bad(format!("--node: {} is not a front-end node", cfg.topology.name(front))));
    };
    let parsed = match &op {
        ClientOp::Get { key } => expr::parse(&format!("get \"{}\"", escape(key))),
        ClientOp::Put { key, value } => expr::parse(&format!("put \"{}\" \"{}\"", escape(key), escape(value))),
        ClientOp::Txn { expr: Some(text), file: None } => expr::parse(text),
        ClientOp::Txn { expr: None, file: Some(path) } => {
            let text =
                std::fs::read_to_string(path).map_err(|e| bad(format!("{}: cannot read: {e}", path.display())))?;
            expr::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
        }
        ClientOp::Txn { .. } => return Err(bad("txn: give an expression or --file, not both")),
    }
    .map_err(|e| bad(format!("txn: {e}")))?;
    let rt =
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| Failure(1, e.to_string()))?;
    let creds = meridian_runtime::security::Credentials::for_frontend(&cfg, front).map_err(|e| bad(e.to_string()))?;
    let outcome = rt
        .block_on(async {
            let c = rc::Client::connect_with(addr, &creds).await?;
            c.run(parsed.program.clone()).await
        })
        .map_err(|e| Failure(1, format!("{} at {addr}: {e}", cfg.topology.name(front))))?;
    match outcome {
        Outcome::Committed { results } => {
            for line in expr::render_results(&parsed, &results) {
                println!("{line}");
            }
            println!("committed");
            Ok(())
        }
        Outcome::Aborted { reason } => Err(Failure(1, format!("aborted ({reason:?}); nothing was written"))),
        Outcome::Unknown => Err(Failure(1, "outcome unknown: the transaction may or may not have committed".into())),
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

struct BenchArgs {
    cluster: Option<PathBuf>,
    config: PathBuf,
    target: String,
    endpoints: Vec<String>,
    seed: Option<u64>,
    report: Option<PathBuf>,
    history: Option<PathBuf>,
}

fn bench(args: BenchArgs) -> Result<(), Failure> {
    use meridian_cli::real::{BenchError, Target, run_bench};
    let mut exp = Experiment::load(&args.config).map_err(|e| bad(e.to_string()))?;
    exp.apply_overrides(None, args.seed);
    let cluster;
    let endpoints: Vec<std::net::SocketAddr>;
    let target = match args.target.as_str() {
        "meridian" => {
            let path = args.cluster.as_deref().ok_or_else(|| bad("--cluster FILE is needed with --target meridian"))?;
            cluster = load_cluster(path)?;
            Target::Meridian(&cluster)
        }
        "etcd" => {
            if args.endpoints.is_empty() {
                return Err(bad("--endpoints is needed with --target etcd (e.g. http://127.0.0.1:2379)"));
            }
            endpoints = args
                .endpoints
                .iter()
                .map(|e| meridian_runtime::etcd::parse_endpoint(e))
                .collect::<Result<_, _>>()
                .map_err(|e| bad(format!("--endpoints: {e}")))?;
            Target::Etcd(&endpoints)
        }
        other => return Err(bad(format!("--target: `{other}` is not meridian or etcd"))),
    };
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos}/{len} s [{bar:30}] {elapsed}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let mut progress = |now_ns: u64, end_ns: u64| {
        bar.set_length(end_ns / 1_000_000_000);
        bar.set_position(now_ns / 1_000_000_000);
    };
    let out = run_bench(&exp, target, &mut progress).map_err(|e| match e {
        BenchError::Input(m) => bad(m),
        BenchError::Failed(m) => Failure(1, m),
    })?;
    bar.finish_and_clear();
    print!("{}", meridian_cli::summary(&out.report));
    if let Some(path) = &args.report {
        write_file(path, &serde_json::to_string_pretty(&out.report.to_json()).expect("json"))?;
    }
    if let Some(path) = &args.history {
        write_file(path, &to_jsonl(&out.history))?;
    }
    match out.report.check_valid() {
        Some(false) => Err(Failure(1, String::new())),
        _ => Ok(()),
    }
}
