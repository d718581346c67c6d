//! The `meridian` binary against its stable surface (CONTRACT.md): commands,
//! exit statuses, the report and history formats, and the one-line errors
//! for bad input. Every test runs the real binary on loopback-free, short
//! simulated experiments (a few simulated seconds, a handful of clients), in
//! its own scratch directory, with a time limit per command.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The base experiment: 2 shards x 3 replicas, 3 open-loop clients, list-append,
/// 3 simulated seconds (0.5 s warm-up) and a 3-second drain, seed 7.
const SMALL: &str = include_str!("fixtures/small.toml");

/// Longest any single command may take before the test fails: a guard
/// against a hang, not a measure of speed (the demo alone takes about 30 s
/// in a debug build, and much longer beside the other tests on 2 cores).
const TIMEOUT: Duration = Duration::from_secs(240);

/// Every protocol name of CONTRACT.md, in its order.
const CONTRACT_PROTOCOLS: [&str; 18] = [
    "2pl-paxos",
    "occ-paxos",
    "calvin",
    "tapir",
    "raft-occ",
    "tiga",
    "slog",
    "k2",
    "d2pl-ttc",
    "mvto-hlc",
    "starry",
    "ra-noc2",
    "ra-noc",
    "eiger-noc2",
    "eiger-port",
    "ramp-f",
    "ramp-s",
    "lora",
];

const CONSISTENCY_LEVELS: [&str; 5] =
    ["strict-serializable", "serializable", "read-atomic", "causal", "causal-no-convergence"];

// ---------------------------------------------------------------------------
// Helpers

/// What one run of the binary produced.
struct Run {
    args: Vec<String>,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Asserts the exit status, showing everything the command printed if it
    /// is not the one expected.
    #[track_caller]
    fn expect_code(&self, code: i32) -> &Run {
        assert_eq!(
            self.code,
            Some(code),
            "meridian {:?} exited with {:?}, expected {code}\n--- stdout\n{}\n--- stderr\n{}",
            self.args,
            self.code,
            self.stdout,
            self.stderr
        );
        assert!(!self.stderr.contains("panicked"), "meridian {:?} panicked:\n{}", self.args, self.stderr);
        self
    }

    /// The single line a failing command must print on stderr: exit status
    /// 2, nothing else on stderr, no panic, and a `meridian:` prefix.
    #[track_caller]
    fn one_line_error(&self) -> &str {
        self.expect_code(2);
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "meridian {:?}: expected one line on stderr, got:\n{}", self.args, self.stderr);
        assert!(
            lines[0].starts_with("meridian: "),
            "meridian {:?}: error without `meridian:` prefix: {}",
            self.args,
            lines[0]
        );
        lines[0]
    }
}

/// A scratch directory of its own for each test; commands run inside it, so
/// files are named relatively (and appear so in error messages). Removed at
/// the end unless the test failed.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("meridian-cli-contract-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        Scratch { dir }
    }

    /// Writes `text` to `name` in the scratch directory and returns `name`.
    fn write<'a>(&self, name: &'a str, text: &str) -> &'a str {
        let path = self.dir.join(name);
        fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        name
    }

    fn read(&self, name: &str) -> String {
        let path = self.dir.join(name);
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    }

    fn json(&self, name: &str) -> Value {
        let text = self.read(name);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} is not JSON ({e}):\n{text}"))
    }

    /// Runs `meridian ARGS` in the scratch directory.
    fn run(&self, args: &[&str]) -> Run {
        meridian_in(&self.dir, args)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Runs the binary with a time limit, reading its output as it goes.
fn meridian_in(dir: &Path, args: &[&str]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the meridian binary");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for meridian") {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("meridian {args:?} ran longer than {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Run {
        args: args.iter().map(|a| a.to_string()).collect(),
        code: status.code(),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// A fixture file of this crate's tests.
fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// `text` with the line `from` replaced by `to` (which may span lines);
/// `from` must be a whole line of `text`, exactly once.
#[track_caller]
fn edit(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.lines().filter(|l| *l == from).count(), 1, "`{from}` is not a line of the fixture exactly once");
    let mut out: String = text.lines().map(|l| if l == from { to } else { l }).collect::<Vec<_>>().join("\n");
    out.push('\n');
    out
}

/// The 1-based number of the one line of `text` containing `needle`.
#[track_caller]
fn line_of(text: &str, needle: &str) -> usize {
    let found: Vec<usize> = text.lines().enumerate().filter(|(_, l)| l.contains(needle)).map(|(i, _)| i + 1).collect();
    assert_eq!(found.len(), 1, "`{needle}` should be on exactly one line of:\n{text}");
    found[0]
}

/// The value at a dotted path of a JSON document (`txns.committed`).
#[track_caller]
fn at<'a>(doc: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(doc, |v, key| v.get(key).unwrap_or_else(|| panic!("no `{path}` (at `{key}`) in:\n{doc:#}")))
}

#[track_caller]
fn u64_at(doc: &Value, path: &str) -> u64 {
    at(doc, path).as_u64().unwrap_or_else(|| panic!("`{path}` is not a non-negative integer: {}", at(doc, path)))
}

#[track_caller]
fn f64_at(doc: &Value, path: &str) -> f64 {
    let v = at(doc, path).as_f64().unwrap_or_else(|| panic!("`{path}` is not a number: {}", at(doc, path)));
    assert!(v.is_finite(), "`{path}` is not finite: {v}");
    v
}

#[track_caller]
fn str_at<'a>(doc: &'a Value, path: &str) -> &'a str {
    at(doc, path).as_str().unwrap_or_else(|| panic!("`{path}` is not a string: {}", at(doc, path)))
}

/// A report's counter, 0 when the run never counted it.
fn counter(report: &Value, name: &str) -> u64 {
    at(report, "counters").get(name).map_or(0, |v| v.as_u64().unwrap_or_else(|| panic!("counter {name}: {v}")))
}

/// The report without the fields that measure wall-clock time.
fn deterministic_part(report: &Value) -> Value {
    let mut r = report.clone();
    let o = r.as_object_mut().expect("a report is a JSON object");
    assert!(o.remove("wall_s").is_some(), "the report has no wall_s");
    o.remove("events_per_wall_s");
    r
}

/// Runs `sim` on `config` (already in the scratch dir), writing `stem.json`
/// and `stem.jsonl`; returns the parsed report and the history text.
fn sim(s: &Scratch, config: &str, stem: &str, extra: &[&str]) -> (Value, String) {
    let (report, history) = (format!("{stem}.json"), format!("{stem}.jsonl"));
    let mut args = vec!["sim", "--config", config, "--report", &report, "--history", &history];
    args.extend_from_slice(extra);
    s.run(&args).expect_code(0);
    (s.json(&report), s.read(&history))
}

/// The parsed output of `meridian protocols --json [--all]`.
fn protocols_json(all: bool) -> Vec<Value> {
    let s = Scratch::new(if all { "protocols-json-all" } else { "protocols-json" });
    let mut args = vec!["protocols", "--json"];
    if all {
        args.push("--all");
    }
    let run = s.run(&args);
    run.expect_code(0);
    let v: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("`meridian {args:?}` is not JSON ({e}):\n{}", run.stdout));
    v.as_array().unwrap_or_else(|| panic!("expected a JSON array, got {v}")).clone()
}

// ---------------------------------------------------------------------------
// meridian protocols

#[test]
fn protocols_lists_2pl_paxos_as_strict_serializable() {
    let s = Scratch::new("protocols-text");
    let run = s.run(&["protocols"]);
    run.expect_code(0);
    let row = run
        .stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some("2pl-paxos"))
        .unwrap_or_else(|| panic!("no 2pl-paxos row in:\n{}", run.stdout));
    assert_eq!(row.split_whitespace().nth(1), Some("strict-serializable"), "{row}");
    assert!(!run.stdout.contains("(planned)"), "planned protocols listed without --all:\n{}", run.stdout);
}

#[test]
fn protocols_json_has_name_consistency_and_status_for_each_protocol() {
    let list = protocols_json(false);
    assert!(!list.is_empty());
    for p in &list {
        let name = str_at(p, "name");
        assert!(CONTRACT_PROTOCOLS.contains(&name), "`{name}` is not a CONTRACT protocol name");
        assert!(CONSISTENCY_LEVELS.contains(&str_at(p, "consistency")), "{p}");
        assert_eq!(str_at(p, "status"), "implemented", "without --all only implemented protocols: {p}");
    }
    let twopl = list.iter().find(|p| p["name"] == "2pl-paxos").expect("2pl-paxos in protocols --json");
    assert_eq!(str_at(twopl, "consistency"), "strict-serializable");
    // README: 2pl-paxos's parameters are documented by `protocols --json`.
    let params: Vec<&str> = at(twopl, "params")
        .as_array()
        .expect("params is an array")
        .iter()
        .map(|d| {
            assert!(d.get("default").is_some() && d["doc"].is_string(), "undocumented parameter {d}");
            str_at(d, "name")
        })
        .collect();
    for documented in
        ["lock_at", "execute_timeout_ms", "prepare_retry_ms", "max_attempts", "heartbeat_ms", "election_timeout_ms"]
    {
        assert!(params.contains(&documented), "`{documented}` missing from {params:?}");
    }
}

#[test]
fn protocols_all_lists_every_contract_protocol_and_marks_the_planned_ones() {
    let implemented: BTreeSet<String> = protocols_json(false).iter().map(|p| str_at(p, "name").to_string()).collect();
    let all = protocols_json(true);
    let by_name: BTreeMap<&str, &Value> = all.iter().map(|p| (str_at(p, "name"), p)).collect();
    assert_eq!(by_name.len(), all.len(), "a protocol listed twice");

    let s = Scratch::new("protocols-all-text");
    let run = s.run(&["protocols", "--all"]);
    run.expect_code(0);
    for name in CONTRACT_PROTOCOLS {
        let p = by_name.get(name).unwrap_or_else(|| panic!("`{name}` missing from protocols --json --all"));
        let status = str_at(p, "status");
        let planned = match status {
            "implemented" => false,
            "planned" => true,
            other => panic!("{name}: unexpected status `{other}`"),
        };
        assert_eq!(!planned, implemented.contains(name), "{name} is {status} with --all but not so without");
        let row = run
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no `{name}` row in protocols --all:\n{}", run.stdout));
        assert_eq!(row.split_whitespace().nth(1), Some(str_at(p, "consistency")), "{row}");
        assert_eq!(row.contains("(planned)"), planned, "{row}");
    }
    // What each family promises follows from its name.
    for (name, level) in [
        ("2pl-paxos", "strict-serializable"),
        ("tiga", "strict-serializable"),
        ("ra-noc2", "read-atomic"),
        ("ra-noc", "read-atomic"),
        ("ramp-f", "read-atomic"),
        ("lora", "read-atomic"),
        ("eiger-noc2", "causal"),
        ("eiger-port", "causal-no-convergence"),
    ] {
        assert_eq!(str_at(by_name[name], "consistency"), level, "{name}");
    }
}

// ---------------------------------------------------------------------------
// meridian sim: report, history, overrides, determinism

#[test]
fn sim_writes_a_report_with_every_contract_field() {
    let s = Scratch::new("sim-report");
    s.write("small.toml", SMALL);
    let run = s.run(&["sim", "--config", "small.toml", "--report", "r.json", "--history", "h.jsonl"]);
    run.expect_code(0);
    assert!(run.stdout.contains("2pl-paxos on small.toml (seed 7)"), "summary:\n{}", run.stdout);
    assert!(run.stdout.contains("check (strict-serializable): valid"), "summary:\n{}", run.stdout);
    let r = s.json("r.json");

    assert_eq!(str_at(&r, "protocol"), "2pl-paxos");
    assert_eq!(str_at(&r, "consistency"), "strict-serializable");
    assert_eq!(u64_at(&r, "seed"), 7);
    let simulated = f64_at(&r, "simulated_s");
    assert!((3.0..=6.0 + 1e-9).contains(&simulated), "simulated_s {simulated} outside duration..duration+drain");
    assert!(f64_at(&r, "wall_s") >= 0.0);
    assert!(u64_at(&r, "events") > 0);

    let nodes: Vec<&str> =
        at(&r, "nodes").as_array().expect("nodes is an array").iter().map(|n| n.as_str().expect("a name")).collect();
    for shard in 0..2 {
        for replica in 0..3 {
            let name = format!("shard{shard}-replica{replica}");
            assert!(nodes.contains(&name.as_str()), "{name} not in {nodes:?}");
        }
    }
    for region in ["south-carolina", "finland", "hong-kong"] {
        let name = format!("client-{region}-0");
        assert!(nodes.contains(&name.as_str()), "{name} not in {nodes:?}");
    }

    let committed = u64_at(&r, "txns.committed");
    assert!(committed > 0, "nothing committed: {r:#}");
    u64_at(&r, "txns.aborted");
    u64_at(&r, "txns.unknown");
    assert!(f64_at(&r, "throughput_tps") > 0.0);

    let percentiles = |path: &str| {
        let (p50, p90, p99) = (
            f64_at(&r, &format!("{path}.p50")),
            f64_at(&r, &format!("{path}.p90")),
            f64_at(&r, &format!("{path}.p99")),
        );
        assert!(0.0 < p50 && p50 <= p90 && p90 <= p99, "{path}: p50 {p50}, p90 {p90}, p99 {p99}");
    };
    percentiles("latency_ms");
    let regions: BTreeSet<&str> =
        at(&r, "latency_ms_by_region").as_object().expect("an object").keys().map(String::as_str).collect();
    assert_eq!(regions, BTreeSet::from(["finland", "hong-kong", "south-carolina"]), "one entry per client region");
    for region in regions {
        percentiles(&format!("latency_ms_by_region.{region}"));
    }

    let counters = at(&r, "counters").as_object().expect("counters is an object");
    assert!(counters.values().all(Value::is_u64), "counters are counts: {counters:?}");

    assert_eq!(str_at(&r, "check.model"), "strict-serializable");
    assert_eq!(at(&r, "check.valid"), &Value::Bool(true), "{r:#}");
    assert_eq!(at(&r, "check.anomalies"), &Value::Array(vec![]));
}

#[test]
fn sim_writes_the_history_as_contract_json_lines() {
    let s = Scratch::new("sim-history");
    s.write("small.toml", SMALL);
    let (report, history) = sim(&s, "small.toml", "run", &[]);
    let end_ns = (f64_at(&report, "simulated_s") * 1e9).round() as u64 + 1_000_000;

    let mut open: BTreeMap<u64, Vec<Value>> = BTreeMap::new(); // process -> invoked value
    let mut written: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut last_time = 0;
    let (mut oks, mut lines) = (0, 0);
    for (i, line) in history.lines().enumerate() {
        lines += 1;
        let op: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: not JSON ({e}): {line}", i + 1));
        let fields: BTreeSet<&str> = op.as_object().expect("an object").keys().map(String::as_str).collect();
        let elle = BTreeSet::from(["index", "type", "process", "time", "value"]);
        assert!(elle.is_subset(&fields), "line {}: Elle's fields: {line}", i + 1);
        let extras: BTreeSet<&str> = fields.difference(&elle).copied().collect();
        assert!(extras.is_subset(&BTreeSet::from(["txn_type", "mode", "tags"])), "line {}: {line}", i + 1);
        assert!(op.get("txn_type").is_some_and(Value::is_string), "every transaction has a type: {line}");
        assert_eq!(u64_at(&op, "index"), i as u64, "indices count the lines from 0: {line}");
        let time = u64_at(&op, "time");
        assert!(time >= last_time && time <= end_ns, "time out of order or past the run: {line}");
        last_time = time;
        let process = u64_at(&op, "process");
        let kind = str_at(&op, "type");
        let mops = at(&op, "value").as_array().expect("value is a list").clone();
        assert!(!mops.is_empty(), "an empty transaction: {line}");
        for m in &mops {
            let m = m.as_array().unwrap_or_else(|| panic!("micro-op is not a list: {line}"));
            assert_eq!(m.len(), 3, "micro-op is not [f, key, value]: {line}");
            assert!(m[1].is_u64(), "key is not an integer: {line}");
            let f = m[0].as_str().expect("f is a string");
            match (f, kind) {
                ("append" | "w", _) => assert!(m[2].is_u64(), "written value is not an integer: {line}"),
                ("r", "invoke") => assert!(m[2].is_null(), "an invocation's read has a value: {line}"),
                ("r", _) => assert!(
                    m[2].is_null() || m[2].is_u64() || m[2].as_array().is_some_and(|xs| xs.iter().all(Value::is_u64)),
                    "bad read value: {line}"
                ),
                _ => panic!("unknown micro-op `{f}`: {line}"),
            }
            if kind == "invoke" && f != "r" {
                let key_value = (m[1].as_u64().unwrap(), m[2].as_u64().unwrap());
                assert!(written.insert(key_value), "value written twice: {line}");
            }
        }
        match kind {
            "invoke" => assert!(open.insert(process, mops).is_none(), "process {process} invoked twice: {line}"),
            "ok" | "fail" | "info" => {
                let invoked = open.remove(&process).unwrap_or_else(|| panic!("completion without invoke: {line}"));
                assert_eq!(invoked.len(), mops.len(), "completion does not match its invocation: {line}");
                if kind == "ok" {
                    oks += 1;
                }
            }
            other => panic!("unknown type `{other}`: {line}"),
        }
    }
    assert!(lines > 0 && history.ends_with('\n'), "empty or unterminated history");
    assert!(!written.is_empty(), "the workload never wrote");
    assert_eq!(oks, u64_at(&report, "txns.committed"), "one `ok` line per committed transaction");
}

#[test]
fn sim_protocol_and_seed_flags_override_the_file() {
    let s = Scratch::new("sim-overrides");
    // A file naming another protocol (and parameters only it would take) and seed 7.
    let other = edit(SMALL, "name = \"2pl-paxos\"", "name = \"tiga\"\n[protocol.params]\nheadroom_delta_ms = 1.0");
    s.write("tiga.toml", &other);
    let run = s.run(&["sim", "--config", "tiga.toml", "--protocol", "2pl-paxos", "--seed", "11", "--report", "r.json"]);
    run.expect_code(0);
    assert!(run.stdout.contains("(seed 11)"), "summary:\n{}", run.stdout);
    let r = s.json("r.json");
    assert_eq!(str_at(&r, "protocol"), "2pl-paxos");
    assert_eq!(u64_at(&r, "seed"), 11);

    s.write("small.toml", SMALL);
    let (file_seed, _) = sim(&s, "small.toml", "file-seed", &[]);
    let (flag_seed, _) = sim(&s, "small.toml", "flag-seed", &["--seed", "11"]);
    assert_eq!(u64_at(&file_seed, "seed"), 7);
    assert_eq!(u64_at(&flag_seed, "seed"), 11);
    assert_ne!(str_at(&file_seed, "trace_hash"), str_at(&flag_seed, "trace_hash"));
    // The seed was the only thing the flag changed: same as the file with seed 11.
    s.write("seed11.toml", &edit(SMALL, "seed = 7", "seed = 11"));
    let (file11, _) = sim(&s, "seed11.toml", "file11", &[]);
    assert_eq!(str_at(&file11, "trace_hash"), str_at(&flag_seed, "trace_hash"));
}

#[test]
fn sim_same_seed_gives_identical_history_and_report() {
    let s = Scratch::new("sim-determinism");
    s.write("small.toml", SMALL);
    sim(&s, "small.toml", "a", &[]);
    sim(&s, "small.toml", "b", &[]);
    assert!(
        s.read("a.jsonl").as_bytes() == s.read("b.jsonl").as_bytes(),
        "the same seed gave different histories (see {})",
        s.dir.display()
    );
    let (a, b) = (s.json("a.json"), s.json("b.json"));
    assert_eq!(deterministic_part(&a), deterministic_part(&b), "reports differ beyond wall_s and events_per_wall_s");
    let hash = str_at(&a, "trace_hash");
    assert!(!hash.is_empty() && hash.chars().all(|c| c.is_ascii_hexdigit()), "trace_hash `{hash}`");

    let (c, _) = sim(&s, "small.toml", "c", &["--seed", "8"]);
    assert_ne!(str_at(&c, "trace_hash"), hash, "seeds 7 and 8 gave the same trace");
    assert_ne!(s.read("c.jsonl"), s.read("a.jsonl"), "seeds 7 and 8 gave the same history");
}

#[test]
fn sim_accepts_every_parameter_documented_by_protocols_json() {
    let list = protocols_json(false);
    let twopl = list.iter().find(|p| p["name"] == "2pl-paxos").expect("2pl-paxos listed");
    let mut params = String::from("name = \"2pl-paxos\"\n[protocol.params]");
    for d in at(twopl, "params").as_array().expect("params") {
        // `default` is written as it would be in TOML.
        let default = match &d["default"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        params.push_str(&format!("\n{} = {default}", str_at(d, "name")));
    }
    let s = Scratch::new("sim-documented-params");
    s.write("params.toml", &edit(SMALL, "name = \"2pl-paxos\"", &params));
    s.run(&["sim", "--config", "params.toml"]).expect_code(0);
}

// ---------------------------------------------------------------------------
// meridian check

#[test]
fn check_accepts_the_history_of_a_simulated_run() {
    let s = Scratch::new("check-sim-history");
    s.write("small.toml", SMALL);
    sim(&s, "small.toml", "run", &[]);
    let run = s.run(&["check", "--model", "strict-serializable", "run.jsonl", "--report", "check.json"]);
    run.expect_code(0);
    assert!(run.stdout.starts_with("strict-serializable: valid"), "{}", run.stdout);
    let c = s.json("check.json");
    assert_eq!(str_at(&c, "model"), "strict-serializable");
    assert_eq!(at(&c, "valid"), &Value::Bool(true));
    assert_eq!(at(&c, "anomalies"), &Value::Array(vec![]));
}

#[test]
fn check_names_a_lost_update_and_its_transactions() {
    let s = Scratch::new("check-lost-update");
    // Two transactions read k1 = [] and each append to it; both commit.
    s.write("lost.jsonl", &fixture("lost-update.jsonl"));
    let run = s.run(&["check", "--model", "strict-serializable", "lost.jsonl", "--report", "check.json"]);
    run.expect_code(1);
    assert!(run.stdout.contains("G-single"), "anomaly not named:\n{}", run.stdout);
    assert!(run.stdout.contains("T2") && run.stdout.contains("T3"), "transactions not named:\n{}", run.stdout);

    let c = s.json("check.json");
    assert_eq!(str_at(&c, "model"), "strict-serializable");
    assert_eq!(at(&c, "valid"), &Value::Bool(false));
    let anomalies = at(&c, "anomalies").as_array().expect("anomalies is an array");
    assert_eq!(anomalies.len(), 1, "{c:#}");
    assert_eq!(str_at(&anomalies[0], "kind"), "G-single");
    let txns: BTreeSet<u64> =
        at(&anomalies[0], "txns").as_array().expect("txns").iter().map(|t| u64_at(t, "index")).collect();
    assert_eq!(txns, BTreeSet::from([2, 3]), "the two committing lines: {c:#}");
}

#[test]
fn check_names_write_skew_in_register_form_only_under_serializable_models() {
    let s = Scratch::new("check-write-skew");
    // Each transaction reads both keys' initial state and writes one of them.
    s.write("skew.jsonl", &fixture("write-skew.jsonl"));
    for model in ["serializable", "strict-serializable"] {
        let run = s.run(&["check", "--model", model, "skew.jsonl"]);
        run.expect_code(1);
        assert!(run.stdout.contains("G2"), "{model}: anomaly not named:\n{}", run.stdout);
        assert!(run.stdout.contains("T2") && run.stdout.contains("T3"), "{model}:\n{}", run.stdout);
    }
    // Read atomicity allows write skew.
    let run = s.run(&["check", "--model", "read-atomic", "skew.jsonl", "--report", "ra.json"]);
    run.expect_code(0);
    assert_eq!(at(&s.json("ra.json"), "valid"), &Value::Bool(true));
}

#[test]
fn check_rejects_an_unknown_model() {
    let s = Scratch::new("check-bad-model");
    s.write("lost.jsonl", &fixture("lost-update.jsonl"));
    let run = s.run(&["check", "--model", "linearizable-ish", "lost.jsonl"]);
    let line = run.one_line_error();
    assert!(line.contains("linearizable-ish") && line.contains("--model"), "{line}");
    assert!(CONSISTENCY_LEVELS.iter().all(|m| line.contains(m)), "the known models are not listed: {line}");
}

#[test]
fn check_rejects_a_missing_file_naming_it() {
    let s = Scratch::new("check-missing");
    let run = s.run(&["check", "--model", "serializable", "no-such-history.jsonl"]);
    let line = run.one_line_error();
    assert!(line.starts_with("meridian: no-such-history.jsonl: "), "{line}");
}

#[test]
fn check_rejects_malformed_lines_naming_file_and_line() {
    let s = Scratch::new("check-malformed");
    let good = r#"{"index":0,"type":"invoke","process":1,"time":0,"value":[["w",1,5]]}"#;
    s.write("truncated.jsonl", &format!("{good}\n{{\"index\":1,\"type\":\"ok\",\n"));
    let line = s.run(&["check", "--model", "serializable", "truncated.jsonl"]).one_line_error().to_string();
    assert!(line.starts_with("meridian: truncated.jsonl:2: "), "{line}");

    // Valid JSON, but not an operation of the CONTRACT (after a blank line).
    let bad_type = r#"{"index":1,"type":"done","process":1,"time":5,"value":[["w",1,5]]}"#;
    s.write("bad-type.jsonl", &format!("{good}\n\n{bad_type}\n"));
    let line = s.run(&["check", "--model", "serializable", "bad-type.jsonl"]).one_line_error().to_string();
    assert!(line.starts_with("meridian: bad-type.jsonl:3: ") && line.contains("type"), "{line}");

    let bad_mop = r#"{"index":1,"type":"ok","process":1,"time":5,"value":[["increment",1,5]]}"#;
    s.write("bad-mop.jsonl", &format!("{good}\n{bad_mop}\n"));
    let line = s.run(&["check", "--model", "serializable", "bad-mop.jsonl"]).one_line_error().to_string();
    assert!(line.starts_with("meridian: bad-mop.jsonl:2: "), "{line}");
}

#[test]

fn check_rejects_histories_that_break_the_contract_rules() {
    let s = Scratch::new("check-ill-formed");
    // CONTRACT: "Written values and appended elements are unique per history."
    s.write(
        "dup.jsonl",
        concat!(
            r#"{"index":0,"type":"invoke","process":1,"time":1,"value":[["w",1,5]]}"#,
            "\n",
            r#"{"index":1,"type":"ok","process":1,"time":2,"value":[["w",1,5]]}"#,
            "\n",
            r#"{"index":2,"type":"invoke","process":2,"time":3,"value":[["w",1,5]]}"#,
            "\n",
            r#"{"index":3,"type":"ok","process":2,"time":4,"value":[["w",1,5]]}"#,
            "\n",
        ),
    );
    let line = s.run(&["check", "--model", "serializable", "dup.jsonl"]).one_line_error().to_string();
    assert!(line.starts_with("meridian: dup.jsonl:3: "), "{line}");
    // A completion that completes nothing.
    s.write("orphan.jsonl", "{\"index\":5,\"type\":\"ok\",\"process\":1,\"time\":1,\"value\":[[\"w\",1,5]]}\n");
    let line = s.run(&["check", "--model", "serializable", "orphan.jsonl"]).one_line_error().to_string();
    assert!(line.starts_with("meridian: orphan.jsonl:1: "), "{line}");
}

// ---------------------------------------------------------------------------
// meridian sim: bad input

/// Runs `sim` on `text` saved as `bad.toml`; it must fail with exit 2 and one
/// line `meridian: bad.toml:LINE: FIELD: ...` (LINE: the line of `at`, when
/// given; FIELD when given), mentioning every needle. Returns the line.
#[track_caller]
fn bad_config(test: &str, text: &str, at_line: Option<&str>, field: Option<&str>, needles: &[&str]) -> String {
    let s = Scratch::new(test);
    s.write("bad.toml", text);
    let run = s.run(&["sim", "--config", "bad.toml", "--report", "r.json", "--history", "h.jsonl"]);
    let line = run.one_line_error().to_string();
    assert!(run.stdout.is_empty(), "a failed run printed:\n{}", run.stdout);
    assert!(!s.dir.join("r.json").exists() && !s.dir.join("h.jsonl").exists(), "a failed run wrote its outputs");
    let mut prefix = String::from("meridian: bad.toml:");
    if let Some(needle) = at_line {
        prefix.push_str(&format!("{}:", line_of(text, needle)));
    }
    if let Some(field) = field {
        prefix.push_str(&format!(" {field}:"));
    }
    assert!(line.starts_with(&prefix), "expected `{prefix} ...`, got: {line}");
    for needle in needles {
        assert!(line.contains(needle), "`{needle}` not in: {line}");
    }
    line
}

#[test]
fn sim_rejects_a_toml_syntax_error_with_file_and_line() {
    let text = edit(SMALL, "shards = 2", "shards = = 2");
    bad_config("bad-syntax", &text, Some("shards = = 2"), None, &[]);
}

#[test]
fn sim_rejects_an_unknown_field_naming_it_and_suggesting_the_right_one() {
    let text = edit(SMALL, "per_region = 1", "per_region = 1\nper_regoin = 2");
    bad_config("bad-unknown-field", &text, Some("per_regoin"), Some("clients.per_regoin"), &["per_region"]);
}

#[test]
fn sim_rejects_a_value_of_the_wrong_type() {
    let text = edit(SMALL, "shards = 2", "shards = \"two\"");
    bad_config("bad-type", &text, Some("shards = "), Some("cluster.shards"), &["two"]);
}

#[test]
fn sim_rejects_an_unknown_region() {
    let text = edit(
        SMALL,
        r#"regions = ["south-carolina", "finland", "hong-kong"]"#,
        r#"regions = ["south-carolina", "finland", "atlantis"]"#,
    );
    bad_config("bad-region", &text, Some("atlantis"), Some("clients.regions"), &["atlantis"]);
}

#[test]
fn sim_rejects_an_unknown_preset() {
    let text = edit(SMALL, r#"preset = "tiga-gcp""#, r#"preset = "mars-gcp""#);
    bad_config("bad-preset", &text, Some("mars-gcp"), Some("cluster.preset"), &["mars-gcp"]);
}

#[test]
fn sim_rejects_an_unknown_node_in_a_fault() {
    let text = format!("{SMALL}\n[[faults]]\nat_s = 1.0\nkind = \"crash\"\nnode = \"shard9-replica0\"\n");
    bad_config("bad-fault-node", &text, Some("shard9-replica0"), Some("faults[0].node"), &["shard9-replica0"]);
}

#[test]
fn sim_rejects_an_unknown_protocol_in_the_file() {
    let text = edit(SMALL, r#"name = "2pl-paxos""#, r#"name = "nope""#);
    bad_config("bad-protocol-file", &text, Some(r#"name = "nope""#), Some("protocol.name"), &["nope", "2pl-paxos"]);
}

#[test]
fn sim_rejects_an_unknown_protocol_flag() {
    let s = Scratch::new("bad-protocol-flag");
    s.write("small.toml", SMALL);
    let run = s.run(&["sim", "--config", "small.toml", "--protocol", "nope"]);
    let line = run.one_line_error();
    assert!(line.contains("--protocol") && line.contains("nope"), "{line}");
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

#[test]
fn sim_rejects_an_unknown_protocol_parameter() {
    let text = edit(
        SMALL,
        r#"name = "2pl-paxos""#,
        "name = \"2pl-paxos\"\n[protocol.params]\nheartbeat_ms = 50\nbogus_ms = 3",
    );
    bad_config("bad-param", &text, None, None, &["protocol.params", "bogus_ms", "heartbeat_ms"]);
}

#[test]
fn sim_rejects_a_negative_protocol_parameter() {
    let text = edit(
        SMALL,
        r#"name = "2pl-paxos""#,
        "name = \"2pl-paxos\"\n[protocol.params]\nheartbeat_ms = 50\nexecute_timeout_ms = -5",
    );
    bad_config("bad-negative-param", &text, None, None, &["protocol.params", "execute_timeout_ms", "-5"]);
}

#[test]

fn sim_places_protocol_parameter_errors_at_the_parameter() {
    let unknown = edit(
        SMALL,
        r#"name = "2pl-paxos""#,
        "name = \"2pl-paxos\"\n[protocol.params]\nheartbeat_ms = 50\nbogus_ms = 3",
    );
    bad_config("bad-param-place", &unknown, Some("bogus_ms"), Some("protocol.params.bogus_ms"), &[]);
    let negative = edit(
        SMALL,
        r#"name = "2pl-paxos""#,
        "name = \"2pl-paxos\"\n[protocol.params]\nheartbeat_ms = 50\nexecute_timeout_ms = -5",
    );
    bad_config(
        "bad-negative-param-place",
        &negative,
        Some("execute_timeout_ms"),
        Some("protocol.params.execute_timeout_ms"),
        &[],
    );
}

#[test]
fn sim_rejects_a_negative_field_value() {
    let text = edit(SMALL, "warmup_s = 0.5", "warmup_s = -0.5");
    bad_config("bad-negative-field", &text, Some("warmup_s"), Some("run.warmup_s"), &["-0.5"]);
}

#[test]
fn sim_rejects_a_missing_config_file_naming_it() {
    let s = Scratch::new("bad-missing-config");
    let line = s.run(&["sim", "--config", "no-such-file.toml"]).one_line_error().to_string();
    assert!(line.starts_with("meridian: no-such-file.toml: "), "{line}");
}

/// Runs each `(name, text)` experiment; each must either run (exit 0) or be
/// rejected with a one-line error naming `bad.toml`, never panic. Reports
/// every case that did otherwise.
fn assert_no_panics(test: &str, cases: &[(&str, String)]) {
    let s = Scratch::new(test);
    let mut failures = Vec::new();
    for (name, text) in cases {
        s.write("bad.toml", text);
        let run = s.run(&["sim", "--config", "bad.toml"]);
        let ok = match run.code {
            Some(0) => !run.stderr.contains("panicked"),
            Some(2) => {
                let lines: Vec<&str> = run.stderr.lines().collect();
                lines.len() == 1 && lines[0].starts_with("meridian: bad.toml:")
            }
            _ => false,
        };
        if !ok {
            let first = run.stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
            failures.push(format!("{name}: exit {:?}: {first}", run.code));
        }
    }
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]

fn sim_survives_huge_values_in_the_file() {
    let section = |s: &str| format!("{SMALL}\n{s}\n");
    assert_no_panics(
        "huge-file-values",
        &[
            ("network.jitter_ms = 1e300", section("[network]\njitter_ms = 1e300")),
            ("disk.fsync_ms = 1e300", section("[disk]\nfsync_ms = 1e300")),
            ("cpu.server_us_per_msg = 1e300", section("[cpu]\nserver_us_per_msg = 1e300")),
            ("clock.offset_ms_stddev = 1e300", section("[clock]\noffset_ms_stddev = 1e300")),
        ],
    );
}

#[test]

fn sim_survives_extreme_protocol_parameters() {
    let param =
        |p: &str| edit(SMALL, r#"name = "2pl-paxos""#, &format!("name = \"2pl-paxos\"\n[protocol.params]\n{p}"));
    let cases: Vec<(&str, String)> = [
        "heartbeat_ms = 1e-9",
        "termination_tick_ms = 1e-9",
        "election_timeout_ms = 1e300",
        "retry_backoff_ms = 1e300",
        "coordinator_tick_ms = 1e300",
    ]
    .into_iter()
    .map(|p| (p, param(p)))
    .collect();
    assert_no_panics("extreme-params", &cases);
}

// ---------------------------------------------------------------------------
// meridian swarm

/// The summary line of a swarm run.
#[track_caller]
fn swarm_summary(run: &Run) -> &str {
    run.stdout
        .lines()
        .find(|l| l.starts_with("swarm "))
        .unwrap_or_else(|| panic!("no summary line in:\n{}\n--- stderr\n{}", run.stdout, run.stderr))
}

#[test]
fn swarm_runs_the_seeds_and_prints_a_summary() {
    let s = Scratch::new("swarm");
    let run = s.run(&["swarm", "--protocol", "2pl-paxos", "--seeds", "3"]);
    run.expect_code(0);
    let summary = swarm_summary(&run);
    assert!(summary.contains("2pl-paxos") && summary.contains("3 seeds"), "{summary}");
    assert!(summary.contains("0 failed"), "{summary}");
    assert!(!run.stdout.contains("reproduce:"), "a clean swarm printed a failing seed:\n{}", run.stdout);
}

#[test]
fn swarm_summary_mentions_the_start_seed() {
    let s = Scratch::new("swarm-start");
    let run = s.run(&["swarm", "--protocol", "2pl-paxos", "--seeds", "2", "--start", "4242"]);
    run.expect_code(0);
    let summary = swarm_summary(&run);
    assert!(summary.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == "4242"), "{summary}");
    assert!(summary.contains("2 seeds"), "{summary}");
}

#[test]
fn swarm_with_a_config_file_runs_it() {
    let s = Scratch::new("swarm-config");
    s.write("small.toml", SMALL);
    let run = s.run(&["swarm", "--protocol", "2pl-paxos", "--seeds", "2", "--config", "small.toml"]);
    run.expect_code(0);
    assert!(swarm_summary(&run).contains("0 failed"), "{}", run.stdout);
}

#[test]
fn swarm_rejects_an_unknown_protocol() {
    let s = Scratch::new("swarm-bad-protocol");
    let run = s.run(&["swarm", "--protocol", "nope", "--seeds", "3"]);
    let line = run.one_line_error();
    assert!(line.contains("nope") && line.contains("--protocol"), "{line}");
}

#[test]
fn swarm_rejects_a_bad_config_file_with_file_line_and_field() {
    let s = Scratch::new("swarm-bad-config");
    let text = edit(SMALL, "shards = 2", "shards = \"two\"");
    s.write("bad.toml", &text);
    let run = s.run(&["swarm", "--protocol", "2pl-paxos", "--seeds", "2", "--config", "bad.toml"]);
    let line = run.one_line_error();
    let prefix = format!("meridian: bad.toml:{}: cluster.shards:", line_of(&text, "shards = "));
    assert!(line.starts_with(&prefix), "expected `{prefix} ...`, got: {line}");
}

#[test]
fn swarm_refuses_once_a_workload_the_protocol_cannot_run() {
    // SMALL's list-append has read-write transactions; RAMP runs read-only
    // and write-only ones. Every seed would fail alike: one error, status 2.
    let s = Scratch::new("swarm-bad-shapes");
    s.write("small.toml", SMALL);
    let run = s.run(&["swarm", "--protocol", "ramp-f", "--seeds", "3", "--config", "small.toml"]);
    let line = run.one_line_error();
    assert!(line.contains("small.toml:") && line.contains("workload.kind") && line.contains("ramp-f"), "{line}");
}

// ---------------------------------------------------------------------------
// meridian demo

#[test]
fn demo_prints_a_table_with_2pl_paxos_valid() {
    let s = Scratch::new("demo");
    let run = s.run(&["demo"]);
    run.expect_code(0);
    let row = run
        .stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some("2pl-paxos"))
        .unwrap_or_else(|| panic!("no 2pl-paxos row in:\n{}", run.stdout));
    assert!(row.contains("strict-serializable"), "{row}");
    assert_eq!(row.split_whitespace().last(), Some("valid"), "{row}");
    assert!(!run.stdout.contains("INVALID"), "{}", run.stdout);
}

// ---------------------------------------------------------------------------
// Faults

#[test]
fn crashing_the_initial_leader_changes_leaders_and_stays_valid() {
    let s = Scratch::new("fault-leader-crash");
    let six = edit(SMALL, "duration_s = 3.0", "duration_s = 6.0");
    // leaders = "colocated": shard0-replica0 leads shard 0 from the start.
    let crash = format!("{six}\n[[faults]]\nat_s = 1.0\nkind = \"crash\"\nnode = \"shard0-replica0\"\n");
    s.write("calm.toml", &six);
    s.write("crash.toml", &crash);
    let (calm, _) = sim(&s, "calm.toml", "calm", &[]);
    let (crashed, _) = sim(&s, "crash.toml", "crash", &[]);
    for (name, r) in [("calm", &calm), ("crash", &crashed)] {
        assert_eq!(at(r, "check.valid"), &Value::Bool(true), "{name}: {r:#}");
        assert!(u64_at(r, "txns.committed") > 0, "{name}: nothing committed");
    }
    let changes = |r: &Value| (counter(r, "paxos_leader_changes"), counter(r, "leader_takeovers"));
    let (calm_changes, crash_changes) = (changes(&calm), changes(&crashed));
    assert!(
        crash_changes.0 > calm_changes.0 || crash_changes.1 > calm_changes.1,
        "no extra leader change after the crash: (paxos_leader_changes, leader_takeovers) {calm_changes:?} without, \
         {crash_changes:?} with the fault\ncounters: {}",
        at(&crashed, "counters")
    );
}

/// A protocol that runs only read-only and write-only transactions (the
/// NOC-NOC family, as the registry describes the planned ones) is refused a
/// workload of read-write transactions, with the usual one-line error at the
/// workload's kind; RAMP's YCSB is what it runs, and what demo and swarm
/// give it.
#[test]
fn a_workload_a_protocol_cannot_run_is_refused_at_the_workload_kind() {
    let cluster = "[cluster]\npreset = \"tiga-gcp\"\nserver_regions = [\"south-carolina\"]\nshards = 1\nreplicas_per_shard = 1\n[protocol]\nname = \"2pl-paxos\"\n";
    let text = format!("[workload]\nkind = \"ycsb-t\"\n{cluster}");
    let exp = meridian_experiment::Experiment::from_str(&text, "shapes.toml").expect("parses");
    let ramp = meridian_protocols::registry::find("ramp-f").expect("registered");
    let err = meridian_cli::runner::check_shapes(&exp, "ramp-f", ramp.shapes).unwrap_err().to_string();
    assert!(err.starts_with("shapes.toml:2: workload.kind:"), "{err}");
    assert!(err.contains("only read-only and write-only"), "{err}");
    let chosen = meridian_workload::workload_for(ramp.shapes, &exp.workload);
    assert_eq!(chosen.kind, meridian_workload::WorkloadKind::RampYcsb);
    let tiga = meridian_protocols::registry::find("tiga").expect("registered");
    let tpcc = meridian_experiment::Experiment::from_str(&format!("[workload]\nkind = \"tpcc\"\n{cluster}"), "t.toml")
        .expect("parses");
    assert!(meridian_cli::runner::check_shapes(&tpcc, "tiga", tiga.shapes).is_ok(), "TPC-C's parts are anchored");
}

/// The cost model's per-byte CPU and bandwidth reach the simulator: the
/// same run with every byte costing CPU and wire time commits later.
#[test]
fn per_byte_cpu_and_bandwidth_costs_lengthen_a_run() {
    let s = Scratch::new("per-byte-costs");
    s.write("small.toml", SMALL);
    let costly = format!(
        "{SMALL}\n[cpu]\nserver_ns_per_byte = 200.0\nclient_ns_per_byte = 200.0\n\n[network]\nbandwidth_gbps = 0.0001\n"
    );
    s.write("costly.toml", &costly);
    let (base, _) = sim(&s, "small.toml", "base", &[]);
    let (slow, _) = sim(&s, "costly.toml", "slow", &[]);
    let (fast_p50, slow_p50) = (f64_at(&base, "latency_ms.p50"), f64_at(&slow, "latency_ms.p50"));
    // Some tens of bytes per message at 80 µs per byte on the wire (and
    // 0.2 µs at each end), over several message delays.
    assert!(slow_p50 > fast_p50 + 10.0, "p50 {fast_p50} ms without per-byte costs, {slow_p50} ms with");
    // Slower, not broken: at this bandwidth an attempt may outlast its
    // decision timeout now and then, but nearly everything commits.
    let (committed, unknown) = (u64_at(&slow, "txns.committed"), u64_at(&slow, "txns.unknown"));
    assert!(committed > 0 && unknown * 100 <= committed, "{committed} committed, {unknown} unknown");
}

/// A per-key CPU cost is refused, at the field, for a protocol that
/// charges none (2pl-paxos): its keys would be free beside its rivals'.
#[test]
fn a_per_key_cost_is_refused_for_a_protocol_that_charges_no_keys() {
    let s = Scratch::new("per-key-refused");
    s.write("keys.toml", &format!("{SMALL}\n[cpu]\nclient_ns_per_key = 800.0\n"));
    let run = s.run(&["sim", "--config", "keys.toml", "--protocol", "2pl-paxos"]);
    let line = run.one_line_error();
    assert!(line.contains("keys.toml:") && line.contains("cpu.client_ns_per_key:"), "{line}");
    assert!(line.contains("`2pl-paxos` does not charge per key"), "{line}");
}

/// Two schedules that once panicked a 2pl-paxos leader. Seed 770004: two
/// lock leases ran out in the same tick, and releasing the first one's
/// locks let an older waiter wound the second before its turn to expire
/// ("expired transactions are active"). Seed 770589: a prepare proposed by
/// a leader already deposed was chosen later, beside a conflicting one the
/// next leader had prepared ("prepared transactions never conflict"); every
/// replica now voids such a record when it applies it.
#[test]
fn schedules_that_once_panicked_a_2pl_paxos_leader_run_clean() {
    for seed in ["770004", "770589"] {
        let s = Scratch::new(&format!("swarm-{seed}"));
        let run = s.run(&["swarm", "--protocol", "2pl-paxos", "--seeds", "1", "--start", seed]);
        assert_eq!(run.code, Some(0), "seed {seed}: {}{}", run.stdout, run.stderr);
        assert!(swarm_summary(&run).contains("0 failed"), "seed {seed}: {}", run.stdout);
    }
}

/// A schedule that once lost a committed 2pl-paxos write. Seed 4330616: a
/// leader cut off by a partition proposed a prepare whose appends were
/// computed from lists it had read; the next leader committed another
/// append to those lists; the first regained the lead, its phase 1 adopted
/// the old proposal, and the stale lists overwrote the committed append
/// (a G-single cycle and a real-time violation). A prepare record now
/// carries the version of every key it read, written ones included, and
/// every replica voids it where those have changed.
#[test]
fn a_schedule_that_once_lost_a_committed_2pl_paxos_write_runs_clean() {
    let s = Scratch::new("swarm-4330616");
    let run = s.run(&["swarm", "--protocol", "2pl-paxos", "--seeds", "1", "--start", "4330616"]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(swarm_summary(&run).contains("0 failed"), "{}", run.stdout);
}

/// Schedules that once broke SLOG (docs/slog.md): a passive participant of
/// a multi-home transaction released its locks early (seeds 1012, 1079:
/// real-time violations); a transaction relying on a remaster stood before
/// a multi-home one spanning it, and each waited for the other (2069); a
/// passive participant of a single-home transaction waiting behind a
/// multi-home one released early (6285). Every participant now waits for
/// every read, and a remaster records the orderer's batches its home had
/// reached.
#[test]
fn schedules_that_once_broke_slog_run_clean() {
    // 90188: a new leader of the orderer's region inserted the LockOnlyTxns
    // of a batch it placed on taking over before those lost with its
    // predecessor's open batch (docs/slog.md, "Swarms").
    for seed in ["1012", "1079", "2069", "6285", "90188"] {
        let s = Scratch::new(&format!("swarm-slog-{seed}"));
        let run = s.run(&["swarm", "--protocol", "slog", "--seeds", "1", "--start", seed]);
        assert_eq!(run.code, Some(0), "seed {seed}: {}{}", run.stdout, run.stderr);
        assert!(swarm_summary(&run).contains("0 failed"), "seed {seed}: {}", run.stdout);
    }
    // 42018: an SLOG-HA leader cut off from its region's group once re-sent
    // its pair batches the group never chose (docs/slog.md, "Recovery").
    // 95130: a leader's phase 1 chose a batch its deposed predecessor had
    // cut from a history the next leader replaced; its LockOnlyTxns stood
    // before earlier ones of the orderer's order, and every region stalled.
    for (file, seed) in [("slog-ha-remastering.toml", "42018"), ("slog-truncation.toml", "95130")] {
        let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(file);
        let config = config.to_str().expect("a UTF-8 path");
        let s = Scratch::new(&format!("swarm-slog-{seed}"));
        let run = s.run(&["swarm", "--protocol", "slog", "--seeds", "1", "--start", seed, "--config", config]);
        assert_eq!(run.code, Some(0), "seed {seed}: {}{}", run.stdout, run.stderr);
        assert!(swarm_summary(&run).contains("0 failed"), "seed {seed}: {}", run.stdout);
    }
}

/// TPC-C under faults once broke Tiga's strict serializability in three
/// ways, each fixed (docs/tiga.md, "Recovery beyond the paper"): a follower
/// admitted a same-view resubmission at a later timestamp than its agreed
/// one, and a view change moved the transaction past successors that had
/// read it (seed 262); step ④ (1) put a transaction one shard lacked below
/// entries that shard had committed without it (seeds 125, 212, 391, 403,
/// 540); and the per-key hash left out New-Orders that declare the stock
/// guard as read, so a Stock-Level fast-committed on a follower that lacked
/// one the leader's execution had read (seed 349). Seed 1220: a leader that
/// fetched a transaction from another's announcement, its followers never
/// having received it, was lost; the transaction's successors at the other
/// shard had committed, and step ④ placed it after them (a fetching leader
/// now passes the transaction on to its followers).
#[test]
fn tpcc_schedules_that_once_broke_tiga_recovery_run_clean() {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tpcc.toml");
    let config = config.to_str().expect("a UTF-8 path").to_string();
    for seed in ["125", "212", "262", "349", "391", "403", "540", "1220"] {
        let s = Scratch::new(&format!("tiga-tpcc-{seed}"));
        let run = s.run(&["swarm", "--protocol", "tiga", "--seeds", "1", "--start", seed, "--config", &config]);
        assert_eq!(run.code, Some(0), "seed {seed}: {}{}", run.stdout, run.stderr);
        assert!(swarm_summary(&run).contains("0 failed"), "seed {seed}: {}", run.stdout);
    }
}
