//! Clients nobody here wrote, for tests that drive them against a cluster:
//! whether one is installed (a failure under CI, where `.ci/run` installs
//! them), the Python with redis-py, and the scripts in `tests/clients`.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// Whether `probe` runs successfully; if not, says so, and fails under CI
/// (`CI` set) — a check that cannot run there must not pass silently.
pub fn available(what: &str, mut probe: Command) -> bool {
    let ok = probe.output().is_ok_and(|o| o.status.success());
    if !ok {
        let msg = format!("{what} is not installed here (.ci/run installs it)");
        assert!(std::env::var_os("CI").is_none(), "{msg}");
        eprintln!("skipped: {msg}");
    }
    ok
}

/// The Python with redis-py (`MERIDIAN_PYTHON`, else `python3`).
pub fn python() -> String {
    std::env::var("MERIDIAN_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Whether redis-py can be imported (see [`available`]).
pub fn redis_py_available() -> bool {
    let mut probe = Command::new(python());
    probe.args(["-c", "import redis"]);
    available("redis-py", probe)
}

/// A script in `crates/cli/tests/clients`.
pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients").join(name)
}
