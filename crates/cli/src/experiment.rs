//! `meridian experiment FILE`: every point of a sweep file run in the
//! simulator on a pool of threads, then the results table, the plots and
//! the HTML report (crates/report). A point's run depends only on the file
//! and the point (its seed included), never on the thread that ran it or
//! how many there were; results are kept by point index.
//!
//! `--points` lists the points, `--point K` runs one into `DIR/points/`,
//! and `--merge DIR...` builds the outputs from point reports run anywhere.

use crate::registry;
use crate::runner::{RunOptions, check_shapes, run_experiment};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use meridian_experiment::{ClientMode, ConfigError, Experiment, Point, Sweep, value_text};
use serde_json::{Value as Json, json};
use std::io::IsTerminal;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Most worker threads, whatever `--jobs` asks: each holds one run's
/// state (its simulator and history) in memory.
pub const JOBS_MAX: usize = 256;

/// The report's key for the point it belongs to.
const POINT_KEY: &str = "sweep_point";

/// A loaded sweep whose every point validated, with its experiments.
pub struct Loaded {
    pub sweep: Sweep,
    pub experiments: Vec<Experiment>,
}

/// What went wrong: bad input (exit 2) or a failed run (exit 1).
#[derive(Debug)]
pub enum Failure {
    Input(String),
    Run(String),
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Failure {
        Failure::Input(e.to_string())
    }
}

/// Loads the file and checks every point as `meridian sim` would before
/// running it: the file, the protocol, its parameters, the workload's
/// shapes and the node names.
pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
    let sweep = Sweep::load(path)?;
    let experiments = sweep.validate()?;
    for exp in &experiments {
        check_point(exp)?;
    }
    Ok(Loaded { sweep, experiments })
}

fn check_point(exp: &Experiment) -> Result<(), ConfigError> {
    let name = exp.protocol.name.as_str();
    let Some(entry) = registry::entry(name) else {
        return Err(exp.error_at("protocol.name", registry::not_runnable(name)));
    };
    let topology = entry.info.topology(&exp.protocol.params, &exp.cluster_spec()).map_err(|e| {
        let param = e.split('`').nth(1).unwrap_or("");
        let field = format!("protocol.params.{param}");
        let field = if !param.is_empty() && exp.line_of(&field).is_some() { field } else { "protocol.params".into() };
        exp.error_at(&field, e)
    })?;
    check_shapes(exp, name, entry.info.shapes)?;
    exp.check_node_names(&topology)
}

/// `--points`: one line per point, `K<TAB>field=value ... seed=S`.
pub fn list_points(loaded: &Loaded) -> String {
    let mut out = String::new();
    for (point, exp) in loaded.sweep.points().zip(&loaded.experiments) {
        let values: Vec<String> = point.values.iter().map(|(p, v)| format!("{p}={}", value_text(v))).collect();
        let sep = if values.is_empty() { "" } else { " " };
        out.push_str(&format!("{}\t{}{sep}seed={}\n", point.index, values.join(" "), exp.run.seed));
    }
    out
}

/// The file a point's report goes to.
pub fn point_file(dir: &Path, index: usize) -> PathBuf {
    dir.join("points").join(format!("point-{index:04}.json"))
}

/// Runs the points `which` on `jobs` threads with one progress bar, writing
/// each report into `DIR/points/`; the reports in point order.
pub fn run_points(loaded: &Loaded, which: &[usize], jobs: usize, dir: &Path) -> Result<Vec<(Point, Json)>, Failure> {
    let points_dir = dir.join("points");
    std::fs::create_dir_all(&points_dir)
        .map_err(|e| Failure::Input(format!("{}: cannot create: {e}", points_dir.display())))?;
    let bar = progress_bar(loaded, which);
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<Json, Failure>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, JOBS_MAX) {
            scope.spawn(|| {
                while let Some(&k) = which.get(next.fetch_add(1, Ordering::SeqCst)) {
                    let result = run_point(loaded, k, &bar, dir);
                    let failed = result.is_err();
                    results.lock().expect("no panic holds the lock").push((k, result));
                    bar.set_message(format!("{}/{} points", done.fetch_add(1, Ordering::SeqCst) + 1, which.len()));
                    if failed {
                        next.store(which.len(), Ordering::SeqCst); // stop taking points
                    }
                }
            });
        }
    });
    bar.finish_and_clear();
    let mut results = results.into_inner().expect("threads joined");
    results.sort_by_key(|(k, _)| *k);
    let mut reports = Vec::with_capacity(results.len());
    for (k, r) in results {
        let point = loaded.sweep.point(k).expect("a listed point");
        reports.push((point, r?));
    }
    Ok(reports)
}

fn progress_bar(loaded: &Loaded, which: &[usize]) -> ProgressBar {
    let total_ms: u64 = which.iter().map(|&k| span_ms(&loaded.experiments[k])).sum();
    let bar = ProgressBar::with_draw_target(Some(total_ms), ProgressDrawTarget::hidden());
    if std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}: simulated {pos}/{len} ms [{bar:30}] {elapsed} (eta {eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(format!("0/{} points", which.len()));
    bar
}

/// A run's simulated span (duration and drain), ms.
fn span_ms(exp: &Experiment) -> u64 {
    (exp.run.duration_ns() + exp.run.drain_ns()) / 1_000_000
}

/// Runs point `k` and writes its report; panics are failures of the run.
fn run_point(loaded: &Loaded, k: usize, bar: &ProgressBar, dir: &Path) -> Result<Json, Failure> {
    let exp = &loaded.experiments[k];
    let point = loaded.sweep.point(k).expect("a listed point");
    let mut shown_ms = 0u64;
    let mut progress = |now_ns: u64, _end_ns: u64| {
        let now_ms = now_ns / 1_000_000;
        bar.inc(now_ms.saturating_sub(shown_ms));
        shown_ms = shown_ms.max(now_ms);
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        run_experiment(exp, RunOptions { record_history: true, progress: Some(&mut progress), ..Default::default() })
    }));
    bar.inc(span_ms(exp).saturating_sub(shown_ms));
    let out = match outcome {
        Err(panic) => {
            return Err(Failure::Run(format!(
                "point {k} ({}): the run panicked: {}",
                point.label(loaded.sweep.repeat),
                panic_text(&panic)
            )));
        }
        Ok(Err(e)) => return Err(Failure::Input(e.to_string())),
        Ok(Ok(out)) => out,
    };
    let mut report = out.report.to_json();
    report[POINT_KEY] = point_json(&loaded.sweep, &point);
    let text = serde_json::to_string_pretty(&report).expect("a report serializes");
    let path = point_file(dir, k);
    std::fs::write(&path, text).map_err(|e| Failure::Input(format!("{}: cannot write: {e}", path.display())))?;
    Ok(report)
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

/// What a point's report says about the point, to check it on `--merge`.
fn point_json(sweep: &Sweep, point: &Point) -> Json {
    let values: serde_json::Map<String, Json> =
        point.values.iter().map(|(p, v)| (p.clone(), meridian_report::results::toml_to_json(v))).collect();
    json!({ "file": sweep.file, "index": point.index, "values": values, "repeat": point.repeat })
}

/// `--merge`: every point's report from the directories (a point found in
/// several must be the same run), checked against the file's points.
pub fn merge(loaded: &Loaded, dirs: &[PathBuf]) -> Result<Vec<(Point, Json)>, Failure> {
    let mut reports = Vec::with_capacity(loaded.sweep.len());
    for point in loaded.sweep.points() {
        let mut found: Option<(PathBuf, Json)> = None;
        for dir in dirs {
            let path = point_file(dir, point.index);
            let Ok(text) = std::fs::read_to_string(&path) else { continue };
            let report: Json = serde_json::from_str(&text)
                .map_err(|e| Failure::Input(format!("{}: not a point report: {e}", path.display())))?;
            check_merged(&loaded.sweep, &point, &path, &report)?;
            if let Some((first, seen)) = &found {
                if trace(seen) != trace(&report) {
                    let msg = format!(
                        "{} and {} hold different runs of point {}",
                        first.display(),
                        path.display(),
                        point.index
                    );
                    return Err(Failure::Input(msg));
                }
            }
            found = Some((path, report));
        }
        let Some((_, report)) = found else {
            let wanted = point_file(Path::new("DIR"), point.index);
            let msg = format!(
                "--merge: no directory has point {} ({}); run it with --point {}",
                point.index,
                wanted.display(),
                point.index
            );
            return Err(Failure::Input(msg));
        };
        reports.push((point, report));
    }
    Ok(reports)
}

fn trace(report: &Json) -> Option<&str> {
    report.get("trace_hash").and_then(Json::as_str)
}

fn check_merged(sweep: &Sweep, point: &Point, path: &Path, report: &Json) -> Result<(), Failure> {
    let expected = point_json(sweep, point);
    let got = report.get(POINT_KEY);
    let same = |k: &str| got.and_then(|g| g.get(k)) == expected.get(k);
    if same("index") && same("values") && same("repeat") {
        return Ok(());
    }
    Err(Failure::Input(format!(
        "{}: a report of another point or file ({}), not of point {} of {}",
        path.display(),
        got.map(Json::to_string).unwrap_or_else(|| "no sweep_point".into()),
        point.index,
        sweep.file
    )))
}

/// The deployment of an experiment (the first point's), in words, for
/// the report.
pub fn deployment(exp: &Experiment) -> Vec<(String, String)> {
    let c = &exp.cluster;
    let clients = match &exp.clients.mode {
        ClientMode::Open { rate_tps, max_outstanding } => {
            format!("open loop, {rate_tps} txn/s each, at most {max_outstanding} outstanding")
        }
        ClientMode::Closed { think_ms, sessions } => {
            format!("closed loop, {sessions} session(s), {think_ms} ms think time")
        }
    };
    let params: Vec<String> = exp.protocol.params.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    vec![
        ("network".into(), c.preset.clone().unwrap_or_else(|| "explicit rtt_ms matrix".into())),
        (
            "servers".into(),
            format!(
                "{} shards x {} replicas in {} (leaders {})",
                c.shards,
                c.replicas_per_shard,
                c.server_regions.join(", "),
                format!("{:?}", c.leaders).to_lowercase()
            ),
        ),
        (
            "clients".into(),
            format!("{} per region in {}; {clients}", exp.clients.per_region, exp.clients.regions.join(", ")),
        ),
        ("workload".into(), exp.workload.kind.name().to_string()),
        (
            "run".into(),
            format!(
                "{} s simulated ({} s warm-up, {} s drain), seed {}",
                exp.run.duration_s, exp.run.warmup_s, exp.run.drain_s, exp.run.seed
            ),
        ),
        (
            "protocol".into(),
            if params.is_empty() {
                exp.protocol.name.clone()
            } else {
                format!("{} ({})", exp.protocol.name, params.join(", "))
            },
        ),
    ]
}

/// Writes results, plots and the page for `reports` into `dir`.
pub fn write_outputs(
    loaded: &Loaded,
    reports: &[(Point, Json)],
    dir: &Path,
    reproduce: String,
) -> Result<meridian_report::Written, Failure> {
    let outputs = meridian_report::Outputs {
        sweep: &loaded.sweep,
        points: reports,
        deployment: deployment(&loaded.experiments[0]),
        reproduce,
    };
    meridian_report::write(dir, &outputs).map_err(Failure::Input)
}

/// A few columns per point, for the terminal.
pub fn summary(reports: &[(Point, Json)], repeats: u64) -> String {
    let mut s = format!("{:>5}  {:<32} {:>10} {:>9} {:>9}  check\n", "point", "values", "txn/s", "p50 ms", "p99 ms");
    for (p, r) in reports {
        let f = |path: &[&str]| path.iter().try_fold(r, |v, k| v.get(k)).and_then(Json::as_f64).unwrap_or(f64::NAN);
        s.push_str(&format!(
            "{:>5}  {:<32} {:>10.1} {:>9.1} {:>9.1}  {}\n",
            p.index,
            p.label(repeats),
            f(&["throughput_tps"]),
            f(&["latency_ms", "p50"]),
            f(&["latency_ms", "p99"]),
            meridian_report::results::verdict(r)
        ));
    }
    s
}
