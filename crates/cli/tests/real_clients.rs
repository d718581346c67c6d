//! Clients nobody here wrote, with their defaults, against a real cluster's
//! Redis gateway: redis-py (RESP3 through `HELLO 3`), `redis-cli` and
//! `redis-benchmark`.
//!
//! `.ci/run` installs them (a virtual environment with redis-py, named by
//! `MERIDIAN_PYTHON`; Debian's redis-tools). Where one is missing the test
//! says so and fails under CI (`CI` set) — a check that cannot run there
//! must not pass silently.

mod support;

use std::process::Command;
use support::clients::{available, python, redis_py_available, script};
use support::cluster::{Shape, TestCluster};

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

/// Runs `redis-cli` with `script` on its stdin.
fn redis_cli_stdin(port: u16, script: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("redis-cli runs");
    child.stdin.take().expect("stdin").write_all(script.as_bytes()).expect("script written");
    let out = child.wait_with_output().expect("redis-cli finishes");
    assert!(out.status.success(), "redis-cli failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn redis_py_redis_cli_and_redis_benchmark_work_with_their_defaults() {
    let shape = Shape { protocol: "2pl-paxos", shards: 2, replicas: 3, wan_scale: None, params: Vec::new() };
    let cluster = TestCluster::start("real-clients", shape);
    let port = cluster.redis_addr().port();

    if redis_py_available() {
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
        assert_eq!(redis_cli(port, &["INCR", "cli:k"]), "ERR value is not an integer or out of range");
        // MULTI/EXEC from a script on stdin, one connection.
        let script = "MULTI\nINCR cli:m\nAPPEND cli:m x\nINCR cli:m\nGET cli:m\nEXEC\n";
        let out = redis_cli_stdin(port, script);
        let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines[..3], ["OK", "QUEUED", "QUEUED"], "{out}");
        assert_eq!(lines[5..], ["1", "2", "ERR value is not an integer or out of range", "1x"], "{out}");
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

/// The `redis` crate (redis-rs), with its defaults: strings and counters,
/// an atomic pipeline, Redis's errors, and its `transaction` helper
/// (WATCH check-and-set) from 8 threads losing no increment.
#[test]
fn the_redis_crate_runs_commands_transactions_and_watch_loops() {
    let shape = Shape { protocol: "tiga", shards: 2, replicas: 3, wan_scale: None, params: Vec::new() };
    let cluster = TestCluster::start("redis-rs", shape);
    let url = format!("redis://{}/", cluster.redis_addr());
    let client = redis::Client::open(url.as_str()).expect("a valid URL");
    let mut con = client.get_connection().expect("connect");

    let set: String = redis::cmd("SET").arg("rs:a").arg("1").query(&mut con).expect("SET");
    assert_eq!(set, "OK");
    let n: i64 = redis::cmd("INCRBY").arg("rs:a").arg(41).query(&mut con).expect("INCRBY");
    assert_eq!(n, 42);
    let got: Vec<Option<String>> = redis::cmd("MGET").arg("rs:a").arg("rs:missing").query(&mut con).expect("MGET");
    assert_eq!(got, vec![Some("42".to_string()), None]);
    let first: bool = redis::cmd("SETNX").arg("rs:nx").arg("x").query(&mut con).expect("SETNX");
    let second: bool = redis::cmd("SETNX").arg("rs:nx").arg("y").query(&mut con).expect("SETNX");
    assert_eq!((first, second), (true, false));

    let (from, to): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("DECRBY")
        .arg("rs:from")
        .arg(10)
        .cmd("INCRBY")
        .arg("rs:to")
        .arg(10)
        .query(&mut con)
        .expect("MULTI/EXEC");
    assert_eq!((from, to), (-10, 10));

    let err = redis::cmd("INCR").arg("rs:nx").query::<i64>(&mut con).expect_err("INCR on a string");
    assert!(err.to_string().contains("not an integer"), "{err}");

    let (threads, each) = (8, 10);
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let client = client.clone();
            std::thread::spawn(move || {
                let mut con = client.get_connection().expect("connect");
                for _ in 0..each {
                    let key = "rs:cas";
                    let _: () = redis::transaction(&mut con, &[key], |con, pipe| {
                        let now: Option<i64> = redis::cmd("GET").arg(key).query(con)?;
                        pipe.set(key, now.unwrap_or(0) + 1).ignore().query(con)
                    })
                    .expect("check-and-set");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a worker");
    }
    let total: i64 = redis::cmd("GET").arg("rs:cas").query(&mut con).expect("GET");
    assert_eq!(total, threads * each);
}
