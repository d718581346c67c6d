//! `meridian cluster up|down|status`: every node of a cluster file as a
//! local process, with a pid file and a log per node under the data
//! directory (`<data_dir>/<node>/pid`, `<data_dir>/<node>/node.log`).
//!
//! `up` starts the nodes not already running and waits until each answers
//! `/health`; `down` sends SIGTERM (the node writes what is queued for its
//! log and exits), then SIGKILL to whatever is still there after a grace
//! period; `status` reports each node's process and health. This module
//! only ever signals processes whose pid file it wrote and whose command
//! line is still `meridian server` for that node.

use crate::config::ClusterConfig;
use meridian_core::{NodeId, Role};
use std::fs;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long `up` waits for every node to answer `/health`.
const HEALTH_WAIT: Duration = Duration::from_secs(20);
/// How long `down` waits after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

fn pid_file(cfg: &ClusterConfig, node: NodeId) -> PathBuf {
    cfg.node_dir(node).join("pid")
}

/// The log a node started by `cluster up` writes.
pub fn log_file(cfg: &ClusterConfig, node: NodeId) -> PathBuf {
    cfg.node_dir(node).join("node.log")
}

fn nodes(cfg: &ClusterConfig) -> impl Iterator<Item = NodeId> + '_ {
    (0..cfg.topology.nodes.len() as u32).map(NodeId)
}

/// The pid in a node's pid file if that process is still this node's
/// server.
fn running_pid(cfg: &ClusterConfig, node: NodeId) -> Option<i32> {
    let pid: i32 = fs::read_to_string(pid_file(cfg, node)).ok()?.trim().parse().ok()?;
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let name = cfg.topology.name(node).as_bytes();
    let ours = args.contains(&b"server".as_slice()) && args.contains(&name);
    ours.then_some(pid)
}

/// The CPU time (user and system, ns) each node's local process has used
/// so far, by node; `None` for a node with no process of this cluster on
/// this machine.
pub fn node_cpu_ns(cfg: &ClusterConfig) -> Vec<Option<u64>> {
    (0..cfg.topology.nodes.len()).map(|i| running_pid(cfg, NodeId(i as u32)).and_then(process_cpu_ns)).collect()
}

/// `/proc/<pid>/stat`'s utime + stime, in ns.
fn process_cpu_ns(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which may hold spaces or parens:
    // the state is field 3, utime and stime are fields 14 and 15.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(ticks * 1_000_000_000 / per_s)
}

/// Starts one node's server detached from the terminal, logging to its log file.
pub fn spawn_node(cfg: &ClusterConfig, config: &Path, exe: &Path, node: NodeId) -> io::Result<u32> {
    let dir = cfg.node_dir(node);
    fs::create_dir_all(&dir)?;
    let log = fs::OpenOptions::new().create(true).append(true).open(log_file(cfg, node))?;
    let mut cmd = Command::new(exe);
    cmd.arg("server")
        .arg("--config")
        .arg(config)
        .arg("--node")
        .arg(cfg.topology.name(node))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; it detaches the node from the
    // terminal's process group so that Ctrl-C on `cluster up` spares it.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    fs::write(pid_file(cfg, node), format!("{}\n", child.id()))?;
    Ok(child.id())
}

/// Asks a node's `/health`; true when it answers 200.
fn healthy(rt: &tokio::runtime::Runtime, cfg: &ClusterConfig, node: NodeId) -> bool {
    let addr = cfg.addrs[node.index()].metrics;
    rt.block_on(async {
        let probe = tokio::time::timeout(Duration::from_secs(1), crate::http::get(addr, "/health"));
        matches!(probe.await, Ok(Ok((200, _))))
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())
}

/// `cluster up`: starts every node not running, waits for their health.
pub fn up(cfg: &ClusterConfig, config: &Path, exe: &Path) -> Result<(), String> {
    let config = config.canonicalize().map_err(|e| format!("{}: {e}", config.display()))?;
    for node in nodes(cfg) {
        let name = cfg.topology.name(node);
        if let Some(pid) = running_pid(cfg, node) {
            println!("{name:<24} already running (pid {pid})");
            continue;
        }
        let pid = spawn_node(cfg, &config, exe, node).map_err(|e| format!("cannot start {name}: {e}"))?;
        println!("{name:<24} started (pid {pid}), log {}", log_file(cfg, node).display());
    }
    let rt = runtime()?;
    let deadline = Instant::now() + HEALTH_WAIT;
    let mut waiting: Vec<NodeId> = nodes(cfg).collect();
    while !waiting.is_empty() && Instant::now() < deadline {
        waiting.retain(|n| !healthy(&rt, cfg, *n));
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(n) = waiting.first() {
        return Err(format!(
            "{} did not become healthy within {} s; see {}",
            cfg.topology.name(*n),
            HEALTH_WAIT.as_secs(),
            log_file(cfg, *n).display()
        ));
    }
    println!("cluster {}: {} nodes up ({})", cfg.name, cfg.topology.nodes.len(), cfg.protocol);
    for fe in cfg.frontends() {
        let a = &cfg.addrs[fe.index()];
        println!(
            "front-end {}: client {} redis {} metrics http://{}/metrics",
            cfg.topology.name(*fe),
            a.client.map_or("-".into(), |x| x.to_string()),
            a.redis.map_or("-".into(), |x| x.to_string()),
            a.metrics
        );
    }
    Ok(())
}

/// `cluster down`: SIGTERM, a grace period, then SIGKILL.
pub fn down(cfg: &ClusterConfig) -> Result<(), String> {
    let mut stopping = Vec::new();
    for node in nodes(cfg) {
        if let Some(pid) = running_pid(cfg, node) {
            // SAFETY: signalling a pid verified to be this node's server.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            stopping.push((node, pid));
        }
    }
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline && stopping.iter().any(|(n, _)| running_pid(cfg, *n).is_some()) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for (node, pid) in &stopping {
        if running_pid(cfg, *node).is_some() {
            // SAFETY: as above; it ignored SIGTERM for the whole grace period.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
            println!("{:<24} killed (pid {pid})", cfg.topology.name(*node));
        } else {
            println!("{:<24} stopped", cfg.topology.name(*node));
        }
        let _ = fs::remove_file(pid_file(cfg, *node));
    }
    println!("cluster {}: {} nodes stopped", cfg.name, stopping.len());
    Ok(())
}

/// `cluster status`: one line per node; true when every node is healthy.
pub fn status(cfg: &ClusterConfig) -> Result<bool, String> {
    let rt = runtime()?;
    let mut all = true;
    println!("{:<24} {:<16} {:<10} {:>8}  {:<22} state", "node", "region", "role", "pid", "peer");
    for node in nodes(cfg) {
        let info = cfg.topology.node(node);
        let role = match info.role {
            Role::Replica { .. } => "replica",
            Role::Service { .. } => "service",
            Role::Client { .. } => "front-end",
        };
        let pid = running_pid(cfg, node);
        let state = match (pid, healthy(&rt, cfg, node)) {
            (_, true) => "healthy",
            (Some(_), false) => "unresponsive",
            (None, false) => "down",
        };
        all &= state == "healthy";
        println!(
            "{:<24} {:<16} {:<10} {:>8}  {:<22} {state}",
            info.name,
            cfg.topology.region_name(info.region),
            role,
            pid.map_or("-".into(), |p| p.to_string()),
            cfg.addrs[node.index()].peer.to_string()
        );
    }
    Ok(all)
}
