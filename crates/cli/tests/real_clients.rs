//! Clients nobody here wrote, with their defaults, against a real cluster's
//! Redis gateway: redis-py (RESP3 through `HELLO 3`), `redis-cli` and
//! `redis-benchmark`.
//!
//! `.ci/run` installs them (a virtual environment with redis-py, named by
//! `MERIDIAN_PYTHON`; Debian's redis-tools). Where one is missing the test
//! says so and fails under CI (`CI` set) — a check that cannot run there
//! must not pass silently.

mod support;

use std::path::PathBuf;
use std::process::Command;
use support::cluster::{Shape, TestCluster};

/// The tool at `path` if it runs, else `None` (and a failure under CI).
fn available(what: &str, mut probe: Command) -> bool {
    let ok = probe.output().is_ok_and(|o| o.status.success());
    if !ok {
        let msg = format!("{what} is not installed here (.ci/run installs it)");
        assert!(std::env::var_os("CI").is_none(), "{msg}");
        eprintln!("skipped: {msg}");
    }
    ok
}

fn python() -> String {
    std::env::var("MERIDIAN_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients").join(name)
}

/// Runs `cmd`, returning stdout; panics with its output if it fails.
fn run(mut cmd: Command) -> String {
    let out = cmd.output().expect("the client runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed:\n{stdout}\n{stderr}");
    stdout.into_owned()
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-p", &port.to_string()]).args(args);
    run(cmd).trim_end().to_string()
}

#[test]
fn redis_py_redis_cli_and_redis_benchmark_work_with_their_defaults() {
    let shape = Shape { protocol: "2pl-paxos", shards: 2, replicas: 3, wan_scale: None, params: Vec::new() };
    let cluster = TestCluster::start("real-clients", shape);
    let port = cluster.redis_addr().port();

    let mut probe = Command::new(python());
    probe.args(["-c", "import redis"]);
    if available("redis-py", probe) {
        let mut cmd = Command::new(python());
        cmd.arg(script("redis_py_defaults.py")).arg(port.to_string());
        let out = run(cmd);
        assert!(out.contains("redis-py: all checks passed"), "{out}");
    }

    let mut probe = Command::new("redis-cli");
    probe.arg("--version");
    if available("redis-cli", probe) {
        assert_eq!(redis_cli(port, &["PING"]), "PONG");
        assert_eq!(redis_cli(port, &["SET", "cli:k", "v"]), "OK");
        assert_eq!(redis_cli(port, &["GET", "cli:k"]), "v");
        assert_eq!(redis_cli(port, &["INCRBY", "cli:n", "5"]), "5");
        assert_eq!(redis_cli(port, &["EXISTS", "cli:k", "cli:nope"]), "1");
        // RESP3 from the command line, as `redis-cli -3` asks for it.
        assert_eq!(redis_cli(port, &["-3", "--no-raw", "GET", "cli:nope"]), "(nil)");
        let hello = redis_cli(port, &["HELLO", "3"]);
        assert!(hello.contains("proto") && hello.contains('3'), "{hello}");
        let err = redis_cli(port, &["NOSUCH"]);
        assert!(err.starts_with("ERR unknown command 'NOSUCH'"), "{err}");
    }

    let mut probe = Command::new("redis-benchmark");
    probe.arg("--version");
    if available("redis-benchmark", probe) {
        let mut cmd = Command::new("redis-benchmark");
        cmd.args(["-p", &port.to_string(), "-t", "set,get,incr", "-n", "300", "-c", "5", "-r", "1000", "-q"]);
        let out = run(cmd);
        for test in ["SET", "GET", "INCR"] {
            assert!(out.contains(&format!("{test}: ")) && out.contains("requests per second"), "{test} in {out}");
        }
        assert!(!out.to_ascii_lowercase().contains("error"), "{out}");
    }
}
