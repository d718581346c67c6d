//! The real-cluster commands on bad input: a one-line error naming the
//! file, line and field (or the flag), exit status 2, no panic; and the
//! shipped cluster file is valid.

use std::path::{Path, PathBuf};
use std::process::Command;

fn meridian(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_meridian")).args(args).output().expect("run meridian");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

/// A file of the test's own, removed when the test ends.
struct TempFile(PathBuf);

impl std::ops::Deref for TempFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn write_temp(name: &str, text: &str) -> TempFile {
    let path = std::env::temp_dir().join(format!("meridian-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    TempFile(path)
}

fn assert_bad_input(args: &[&str], expect: &str) {
    let (code, _, err) = meridian(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(expect), "{args:?}: `{err}` lacks `{expect}`");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_cluster_files_name_file_line_and_field() {
    let good = std::fs::read_to_string(example("cluster-local.toml")).unwrap();
    let bad = write_temp("shards.toml", &good.replace("shards = 3", "shards = 0"));
    let file = bad.display().to_string();
    let line = good.lines().position(|l| l.starts_with("shards = ")).unwrap() + 1;
    for cmd in [vec!["cluster", "status", "--config", &file], vec!["server", "--config", &file, "--node", "x"]] {
        assert_bad_input(&cmd, &format!("{file}:{line}: cluster.shards: must be between 1 and 64"));
    }
    let typo = write_temp("typo.toml", &good.replace("wan_scale", "wan_scael"));
    let typo = typo.display().to_string();
    assert_bad_input(&["cluster", "up", "--config", &typo], "network.wan_scael: unknown field");
    let proto = write_temp("proto.toml", &good.replace("name = \"2pl-paxos\"", "name = \"paxos-2pl\""));
    assert_bad_input(&["cluster", "status", "--config", &proto.display().to_string()], "protocol.name:");
}

#[test]
fn bad_flags_and_expressions_are_bad_input() {
    let good = example("cluster-local.toml").display().to_string();
    assert_bad_input(&["server", "--config", &good, "--node", "shard9-replica0"], "no node `shard9-replica0`");
    assert_bad_input(&["client", "--cluster", &good, "txn", "frob x"], "statement 1 `frob x`");
    assert_bad_input(&["client", "--cluster", &good, "--node", "shard0-replica0", "get", "k"], "not a front-end");
    let bench = example("bench-local.toml").display().to_string();
    assert_bad_input(&["bench", "--config", &bench], "--cluster FILE is needed");
    assert_bad_input(&["bench", "--config", &bench, "--target", "etcd", "--endpoints", "nowhere"], "--endpoints");
    assert_bad_input(&["cluster", "status", "--config", "/nonexistent/cluster.toml"], "cannot read the file");
}
