//! `meridian experiment` (CONTRACT.md "Sweeps"): the same results whatever
//! `--jobs`, `--point` runs merged equal to a whole run, the HTML report
//! with every plot and a row per point, every shipped experiment file
//! valid, and one-line errors for bad sweep files. Runs are a few
//! simulated seconds each.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Two points: 2pl-paxos and tiga, 2 simulated seconds each.
const SWEEP: &str = include_str!("fixtures/sweep.toml");

/// A scratch directory per test, removed unless the test failed.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("meridian-experiment-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch directory");
        Scratch { dir }
    }

    fn write(&self, name: &str, text: &str) {
        fs::write(self.dir.join(name), text).expect("write a file");
    }

    fn read(&self, name: &str) -> String {
        fs::read_to_string(self.dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_meridian")).args(args).current_dir(&self.dir).output().expect("run meridian")
    }

    /// Runs and requires exit status 0.
    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "meridian {args:?}: {:?}\n{stderr}", out.status.code());
        assert!(!stderr.contains("panicked"), "{stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs and requires exit status 2 with one line on stderr.
    #[track_caller]
    fn one_line_error(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "meridian {args:?}:\n{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line expected:\n{stderr}");
        assert!(stderr.starts_with("meridian: "), "{stderr}");
        stderr.trim_end().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// The 1-based line of `text` containing `needle` (exactly one).
fn line_of(text: &str, needle: &str) -> usize {
    let found: Vec<usize> = text.lines().enumerate().filter(|(_, l)| l.contains(needle)).map(|(i, _)| i + 1).collect();
    assert_eq!(found.len(), 1, "`{needle}` once in:\n{text}");
    found[0]
}

#[test]
fn two_point_sweep_gives_identical_results_with_one_job_or_two() {
    let s = Scratch::new("jobs");
    s.write("sweep.toml", SWEEP);
    s.ok(&["experiment", "sweep.toml", "--out", "one", "--jobs", "1"]);
    s.ok(&["experiment", "sweep.toml", "--out", "two", "--jobs", "2"]);
    let csv = s.read("one/results.csv");
    assert_eq!(csv.lines().count(), 3, "a header and a row per point:\n{csv}");
    assert!(csv.starts_with("point,protocol.name,seed,protocol,throughput_tps,"), "{csv}");
    assert_eq!(csv, s.read("two/results.csv"));
    assert_eq!(s.read("one/results.json"), s.read("two/results.json"));
    for k in 0..2 {
        let report: serde_json::Value =
            serde_json::from_str(&s.read(&format!("one/points/point-000{k}.json"))).unwrap();
        assert_eq!(report["sweep_point"]["index"], k);
        assert_eq!(report["check"]["valid"], true, "{report}");
    }
}

#[test]
fn point_runs_merged_give_the_results_of_a_whole_run() {
    let s = Scratch::new("merge");
    s.write("sweep.toml", SWEEP);
    let listed = s.ok(&["experiment", "sweep.toml", "--points"]);
    assert_eq!(listed, "0\tprotocol.name=2pl-paxos seed=7\n1\tprotocol.name=tiga seed=7\n");
    s.ok(&["experiment", "sweep.toml", "--out", "whole", "--jobs", "2"]);
    s.ok(&["experiment", "sweep.toml", "--point", "1", "--out", "b"]);
    s.ok(&["experiment", "sweep.toml", "--point", "0", "--out", "a"]);
    assert!(!Path::new(&s.dir.join("a/results.csv")).exists(), "--point writes only the point");
    let missing = s.one_line_error(&["experiment", "sweep.toml", "--merge", "a", "--out", "m"]);
    assert!(missing.contains("point 1") && missing.contains("--point 1"), "{missing}");
    s.ok(&["experiment", "sweep.toml", "--merge", "a", "b", "--out", "merged"]);
    assert_eq!(s.read("merged/results.csv"), s.read("whole/results.csv"));
    assert_eq!(s.read("merged/results.json"), s.read("whole/results.json"));
    let bad = s.one_line_error(&["experiment", "sweep.toml", "--point", "2"]);
    assert!(bad.contains("--point 2") && bad.contains("2 points"), "{bad}");
}

#[test]
fn the_html_report_has_every_plot_inline_and_a_row_per_point() {
    let s = Scratch::new("html");
    s.write("sweep.toml", SWEEP);
    s.ok(&["experiment", "sweep.toml", "--out", "out"]);
    let html = s.read("out/report.html");
    let svgs: Vec<String> = fs::read_dir(s.dir.join("out/plots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".svg"))
        .collect();
    assert!(svgs.len() >= 4, "the default set: bars, CDFs and a timeline at least: {svgs:?}");
    for svg in &svgs {
        let stem = svg.trim_end_matches(".svg");
        assert!(s.dir.join(format!("out/plots/{stem}.png")).exists(), "{stem}.png");
        assert!(html.contains(&format!("<figure class=\"plot\" id=\"{stem}\">")), "{stem} not in the report");
    }
    assert_eq!(html.matches("<svg").count(), svgs.len(), "every plot inline, once");
    assert_eq!(html.matches("<tr class=\"point\"").count(), 2);
    assert!(html.contains("meridian experiment sweep.toml --out out"), "the reproducing command");
    assert!(html.contains("2 of 2 points' histories checked valid"), "the verdicts");
    assert!(html.contains("A two-point sweep for the tests"), "the description");
    assert!(!html.contains("<script") && !html.contains("src=\"http"), "self-contained");
}

#[test]
fn bad_sweep_files_get_one_line_errors_with_file_line_and_field() {
    let s = Scratch::new("bad");
    let cases: [(&str, &str, &str); 5] = [
        ("\"clients.rate_tpz\" = [1, 2]", "\"clients.rate_tpz\"", "rate_tpz"),
        ("\"clients.rate_tps\" = []", "\"clients.rate_tps\" = []", "sweep.\"clients.rate_tps\": an empty list"),
        ("mode = \"zip\"\n\"run.seed\" = [1, 2, 3]", "\"run.seed\"", "sweep.\"run.seed\": has 3 values"),
        ("mode = \"diagonal\"", "mode = \"diagonal\"", "sweep.mode"),
        ("\"clients.rate_tps\" = [10, -1]", "\"clients.rate_tps\"", "clients.rate_tps"),
    ];
    for (i, (extra, at, needle)) in cases.iter().enumerate() {
        let text = format!("{SWEEP}{extra}\n");
        let name = format!("bad{i}.toml");
        s.write(&name, &text);
        let err = s.one_line_error(&["experiment", &name, "--points"]);
        let line = line_of(&text, at);
        assert!(err.starts_with(&format!("meridian: {name}:{line}: ")), "{err}");
        assert!(err.contains(needle), "`{needle}` in {err}");
    }
}

#[test]
fn every_shipped_experiment_file_validates_at_every_point() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("experiments/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    let s = Scratch::new("shipped");
    for file in files {
        let listed = s.ok(&["experiment", file.to_str().unwrap(), "--points"]);
        assert!(listed.lines().count() >= 1, "{}", file.display());
    }
}

#[test]
fn demo_draws_the_comparison_and_writes_the_same_report() {
    let s = Scratch::new("demo");
    let out = s.ok(&["demo"]);
    assert!(out.contains("p50 latency by client region (ms)"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("tiga: one wide-area round trip")), "{out}");
    let page = out.lines().find_map(|l| l.strip_prefix("report with plots: ")).expect("the report's path");
    let html = fs::read_to_string(page).expect("the demo's report");
    assert!(html.contains("<tr class=\"point\"") && html.contains("<svg"), "a table and plots");
    assert!(html.contains("meridian demo"), "the reproducing command");
    let _ = fs::remove_dir_all(Path::new(page).parent().expect("a directory"));
}
