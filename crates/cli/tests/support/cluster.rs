//! A real Meridian cluster of `meridian server` processes on loopback for
//! tests: free ports, a cluster file in a temporary directory, processes
//! killed (SIGKILL) and waited for when the guard drops, even when the test
//! fails.

#![allow(dead_code)]

use meridian_runtime::ClusterConfig;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Knobs that make failover quick at the test's scale (and checkpoints
/// frequent, so that the run restarts a node from a snapshot), applied to
/// each protocol that documents them.
const FAST_FAILOVER: &[(&str, &str)] = &[
    ("heartbeat_ms", "20"),
    ("election_timeout_ms", "200"),
    ("execute_timeout_ms", "800"),
    ("prepare_retry_ms", "300"),
    ("decide_retry_ms", "300"),
    ("decision_timeout_ms", "4000"),
    ("in_doubt_ms", "500"),
    ("termination_tick_ms", "100"),
    ("lock_lease_ms", "3000"),
    ("leader_timeout_ms", "400"),
    ("retry_ms", "500"),
    ("default_owd_ms", "5"),
    ("probe_interval_ms", "100"),
    ("checkpoint_entries", "64"),
    ("checkpoint_every_slots", "64"),
];

/// [`FAST_FAILOVER`] as `[protocol.params]` lines for `protocol`.
pub fn fast_failover(protocol: &str) -> Vec<String> {
    let docs = meridian_protocols::registry::find(protocol).expect("registered").params;
    FAST_FAILOVER
        .iter()
        .filter(|(name, _)| docs.iter().any(|d| d.name == *name))
        .map(|(name, value)| format!("{name} = {value}"))
        .collect()
}

/// How the test cluster is shaped.
pub struct Shape<'a> {
    pub protocol: &'a str,
    pub shards: u32,
    pub replicas: u32,
    /// `None`: no WAN emulation.
    pub wan_scale: Option<f64>,
    /// `[protocol.params]` lines (`name = value`).
    pub params: Vec<String>,
}

/// Ports nobody listens on right now.
///
/// Chosen below Linux's ephemeral range (32768-60999): a port the kernel
/// hands out for `:0` can be taken by any outgoing connection between the
/// choice and the server's listen, and was (a peer port "already in use"
/// while other test binaries ran). Each test process walks its own stretch
/// of 20000-31999 (from its pid) and keeps the ports it can bind.
fn free_ports(n: usize) -> Vec<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(2_654_435_761) % SPAN;
    let mut ports = Vec::with_capacity(n);
    while ports.len() < n {
        let i = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(i < SPAN, "no free loopback port left in {LOW}-{}", LOW + SPAN - 1);
        let port = (LOW + (start + i) % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            ports.push(port);
        }
    }
    ports
}

pub struct TestCluster {
    pub dir: PathBuf,
    pub file: PathBuf,
    pub cfg: ClusterConfig,
    children: Vec<(String, Option<Child>)>,
}

fn temp_dir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let dir = std::env::temp_dir().join(format!("meridian-test-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

impl TestCluster {
    /// Writes the cluster file and starts every node; waits until each
    /// answers `/health`.
    pub fn start(tag: &str, shape: Shape<'_>) -> TestCluster {
        TestCluster::start_as(tag, shape, false)
    }

    /// The same with `[security]` on, as a cluster reachable from the
    /// network must run (still on loopback): a password file, mutual TLS
    /// between peers and TLS for clients, the material made by `meridian
    /// cluster certs` in `dir/certs`.
    pub fn start_secured(tag: &str, shape: Shape<'_>) -> TestCluster {
        TestCluster::start_as(tag, shape, true)
    }

    fn start_as(tag: &str, shape: Shape<'_>, secured: bool) -> TestCluster {
        let dir = temp_dir(tag);
        let security = |dir: &Path| -> String {
            if !secured {
                return String::new();
            }
            let certs = dir.join("certs").display().to_string();
            format!(
                "\n[security]\npassword_file = {:?}\ntls = true\ncerts_dir = {certs:?}\n",
                format!("{certs}/password")
            )
        };
        // Names first, from a cluster file without addresses.
        let text = cluster_text(&shape, &dir, &[]) + &security(&dir);
        let probe = ClusterConfig::from_str(&text, "probe.toml", meridian_cli::registry::runnable())
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = probe.topology.nodes.iter().map(|n| n.name.clone()).collect();
        let ports = free_ports(4 * names.len());
        let nodes: Vec<(String, bool, &[u16])> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                (n.clone(), probe.topology.is_client(meridian_core::NodeId(i as u32)), &ports[4 * i..4 * i + 4])
            })
            .collect();
        let text = cluster_text(&shape, &dir, &nodes) + &security(&dir);
        let file = dir.join("cluster.toml");
        std::fs::write(&file, &text).expect("write the cluster file");
        if secured {
            let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
                .args(["cluster", "certs", "--config"])
                .arg(&file)
                .output()
                .expect("run meridian cluster certs");
            assert!(out.status.success(), "cluster certs: {}", String::from_utf8_lossy(&out.stderr));
        }
        let cfg = ClusterConfig::load(&file, meridian_cli::registry::runnable()).unwrap_or_else(|e| panic!("{e}"));
        let mut cluster = TestCluster { dir, file, cfg, children: Vec::new() };
        for name in names {
            let child = cluster.spawn(&name);
            cluster.children.push((name, Some(child)));
        }
        cluster.wait_healthy(Duration::from_secs(20));
        cluster
    }

    fn spawn(&self, name: &str) -> Child {
        self.spawn_from(name, &self.file, name)
    }

    /// Starts `meridian server --config file --node node`, logging to
    /// `dir/<label>.log`.
    fn spawn_from(&self, label: &str, file: &Path, node: &str) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{label}.log")))
            .expect("node log");
        Command::new(env!("CARGO_BIN_EXE_meridian"))
            .args(["server", "--config"])
            .arg(file)
            .args(["--node", node])
            .env("MERIDIAN_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start a meridian server")
    }

    fn index(&self, name: &str) -> usize {
        self.children.iter().position(|(n, _)| n == name).unwrap_or_else(|| panic!("no node {name}"))
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self, name: &str) {
        let i = self.index(name);
        if let Some(mut child) = self.children[i].1.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a killed node again (it recovers from its write-ahead log).
    pub fn restart(&mut self, name: &str) {
        let i = self.index(name);
        assert!(self.children[i].1.is_none(), "{name} is running");
        let child = self.spawn(name);
        self.children[i].1 = Some(child);
    }

    /// Starts another process as node `node` of cluster file `file` (an
    /// impostor, a node of another cluster), known as `label` to
    /// [`TestCluster::kill`] and [`TestCluster::log`], killed with the
    /// cluster.
    pub fn start_process(&mut self, label: &str, file: &Path, node: &str) {
        let child = self.spawn_from(label, file, node);
        self.children.push((label.to_string(), Some(child)));
    }

    /// The password of a [`TestCluster::start_secured`] cluster.
    pub fn password(&self) -> String {
        let text = std::fs::read_to_string(self.certs_dir().join("password")).expect("the password file");
        text.trim_end().to_string()
    }

    pub fn certs_dir(&self) -> PathBuf {
        self.dir.join("certs")
    }

    /// The whole log of a process.
    pub fn full_log(&self, label: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{label}.log"))).unwrap_or_default()
    }

    pub fn addr_of(&self, name: &str) -> &meridian_runtime::config::NodeAddrs {
        let id = self.cfg.node(name).expect("node");
        &self.cfg.addrs[id.index()]
    }

    pub fn frontend(&self) -> String {
        self.cfg.topology.name(self.cfg.frontends()[0]).to_string()
    }

    pub fn client_addr(&self) -> SocketAddr {
        self.addr_of(&self.frontend()).client.expect("front-end")
    }

    pub fn redis_addr(&self) -> SocketAddr {
        self.addr_of(&self.frontend()).redis.expect("front-end")
    }

    pub fn healthy(&self, name: &str) -> bool {
        let addr = self.addr_of(name).metrics;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let probe = tokio::time::timeout(Duration::from_millis(500), meridian_runtime::http::get(addr, "/health"));
            matches!(probe.await, Ok(Ok((200, _))))
        })
    }

    /// Whether `name` answers its health check within `within` (a busy
    /// node may miss one probe; a stopped one misses them all).
    pub fn healthy_within(&self, name: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.healthy(name) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn wait_healthy(&self, within: Duration) {
        let deadline = Instant::now() + within;
        for (name, _) in &self.children {
            while !self.healthy(name) {
                assert!(Instant::now() < deadline, "{name} not healthy; log:\n{}", self.log(name));
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn log(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            if let Some(mut c) = child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn cluster_text(shape: &Shape<'_>, dir: &Path, nodes: &[(String, bool, &[u16])]) -> String {
    let mut t = format!(
        "[cluster]\nname = \"test\"\npreset = \"tiga-gcp\"\nserver_regions = [\"south-carolina\", \"finland\", \"brazil\"]\n\
         shards = {}\nreplicas_per_shard = {}\n\n[frontends]\nregions = [\"south-carolina\"]\n\n",
        shape.shards, shape.replicas
    );
    match shape.wan_scale {
        Some(s) => t.push_str(&format!("[network]\nemulate_wan = true\nwan_scale = {s}\n\n")),
        None => t.push_str("[network]\nemulate_wan = false\n\n"),
    }
    t.push_str(&format!("[storage]\ndata_dir = {:?}\nfsync = true\n\n", dir.join("data").display().to_string()));
    t.push_str(&format!("[protocol]\nname = {:?}\n\n[protocol.params]\n", shape.protocol));
    for p in &shape.params {
        t.push_str(p);
        t.push('\n');
    }
    for (name, frontend, ports) in nodes {
        t.push_str(&format!(
            "\n[[nodes]]\nname = {name:?}\npeer = \"127.0.0.1:{}\"\nmetrics = \"127.0.0.1:{}\"\n",
            ports[0], ports[3]
        ));
        if *frontend {
            t.push_str(&format!("client = \"127.0.0.1:{}\"\nredis = \"127.0.0.1:{}\"\n", ports[1], ports[2]));
        }
    }
    t
}
