//! Who may connect to a cluster: a file that binds anything but loopback
//! is refused without a password and mutual TLS between peers; a secured
//! cluster (run here on loopback with its `[security]` on) serves only
//! clients that give its password, over TLS, through the Redis gateway,
//! the client API, `meridian client` and `meridian bench`; and a node
//! without the cluster's credentials — a certificate of another CA, or the
//! genuine certificate of another node — cannot join: its peers refuse it
//! and the cluster goes on committing.

mod support;

use meridian_runtime::security::{Credentials, Password};
use meridian_runtime::{Client, frame};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::cluster::{Shape, TestCluster};
use support::resp::{R, Resp, bulk};

fn meridian(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_meridian"));
    cmd.args(args).env_remove("MERIDIAN_PASSWORD");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run meridian");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

fn write_temp(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("meridian-security-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

fn assert_refused(args: &[&str], expect: &str) {
    let (code, out, err) = meridian(args, &[]);
    assert_eq!(code, 2, "{args:?}: {out}{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(expect), "{args:?}: `{err}` lacks `{expect}`");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.contains("started"), "nothing may start: {out}");
}

#[test]
fn a_non_loopback_cluster_file_without_credentials_is_refused() {
    let good = std::fs::read_to_string(example("cluster-local.toml")).unwrap();
    let line_of = |prefix: &str| good.lines().position(|l| l.starts_with(prefix)).unwrap() + 1;

    // Every server bound to all interfaces, no [security].
    let open = write_temp("open.toml", &good.replace("host = \"127.0.0.1\"", "host = \"0.0.0.0\""));
    let file = open.display().to_string();
    let expect = format!(
        "{file}:{}: listen.host: 0.0.0.0 is not loopback: a cluster reachable from the network needs [security] with \
         a password and tls = true",
        line_of("host = ")
    );
    assert_refused(&["cluster", "up", "--config", &file], &expect);
    assert_refused(&["server", "--config", &file, "--node", "shard0-replica0"], &expect);

    // One node's peer address elsewhere (a documentation address: nothing
    // is ever sent there), a password but no TLS.
    let one = good.replacen("peer = \"127.0.0.1:7400\"", "peer = \"192.0.2.10:7400\"", 1)
        + "\n[security]\npassword = \"correct horse battery staple\"\n";
    let one = write_temp("one.toml", &one);
    let file = one.display().to_string();
    let expect = format!(
        "{file}:{}: nodes[0].peer: 192.0.2.10 is not loopback: a cluster reachable from the network needs mutual \
         TLS between peers (security.tls = true)",
        line_of("peer = \"127.0.0.1:7400\"")
    );
    assert_refused(&["cluster", "up", "--config", &file], &expect);

    // TLS but no password.
    let tls_only = good.replace("host = \"127.0.0.1\"", "host = \"0.0.0.0\"") + "\n[security]\ntls = true\n";
    let tls_only = write_temp("tls-only.toml", &tls_only);
    assert_refused(&["cluster", "up", "--config", &tls_only.display().to_string()], "needs a password");

    // Everything named but the material is missing: refused before any
    // node starts, naming the field.
    let missing =
        format!("{good}\n[security]\npassword = \"pw\"\ntls = true\ncerts_dir = \"/nonexistent/meridian-certs\"\n");
    let missing = write_temp("missing.toml", &missing);
    let file = missing.display().to_string();
    let line = missing_line(&missing, "certs_dir = ");
    assert_refused(
        &["cluster", "up", "--config", &file],
        &format!("{file}:{line}: security.certs_dir: cannot read /nonexistent/meridian-certs/"),
    );
    let both = format!("{good}\n[security]\npassword = \"pw\"\npassword_file = \"pw.txt\"\n");
    let both = write_temp("both.toml", &both);
    assert_refused(
        &["cluster", "status", "--config", &both.display().to_string()],
        "security.password_file: give password or password_file, not both",
    );
    for f in [open, one, tls_only, missing, both] {
        let _ = std::fs::remove_file(f);
    }
}

fn missing_line(path: &Path, prefix: &str) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().position(|l| l.starts_with(prefix)).unwrap() + 1
}

fn ok() -> R {
    R::Simple("OK".into())
}

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A RESP connection over TLS that trusts the cluster's CA and checks
/// that the front-end's certificate is valid for the address dialled (as
/// redis-py does by default).
fn tls_connect(addr: SocketAddr, ca: &Path) -> Resp<TlsStream> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("the CA file") {
        roots.add(cert.expect("a PEM certificate")).expect("a CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::from(addr.ip());
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(addr).expect("connect to the gateway");
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    Resp::over(rustls::StreamOwned::new(conn, tcp))
}

fn is_error(r: &R, prefix: &str) -> bool {
    matches!(r, R::Error(e) if e.starts_with(prefix))
}

/// What a plain-TCP client reads from a TLS port after sending `bytes`:
/// never a reply, at most a TLS alert before the node closes.
fn plain_tcp_answer(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let _ = s.write_all(bytes);
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    got
}

const NOAUTH: &str = "NOAUTH Authentication required.";

#[test]
fn a_secured_cluster_commits_only_for_clients_with_the_password() {
    let shape = Shape { protocol: "2pl-paxos", shards: 2, replicas: 3, wan_scale: None, params: Vec::new() };
    let cluster = TestCluster::start_secured("secured", shape);
    let (addr, ca, password) = (cluster.redis_addr(), cluster.certs_dir().join("ca.pem"), cluster.password());

    // Over TLS, without the password: nothing runs.
    let mut stranger = tls_connect(addr, &ca);
    for cmd in [&["PING"][..], &["GET", "k"], &["SET", "k", "stolen"], &["MULTI"], &["NOSUCHCOMMAND"]] {
        assert_eq!(stranger.call(cmd), R::Error(NOAUTH.into()), "{cmd:?}");
    }
    assert!(is_error(&stranger.call(&["HELLO", "3"]), "NOAUTH HELLO must be called"));
    assert!(is_error(&stranger.call(&["AUTH", "guess"]), "WRONGPASS"));
    assert!(is_error(&stranger.call(&["AUTH", "default", "guess"]), "WRONGPASS"));
    assert!(is_error(&stranger.call(&["HELLO", "3", "AUTH", "default", "guess"]), "WRONGPASS"));
    assert_eq!(stranger.call(&["SET", "k", "stolen"]), R::Error(NOAUTH.into()), "a wrong password unlocks nothing");

    // In plain TCP the gateway answers no command at all.
    let answer = plain_tcp_answer(addr, b"*1\r\n$4\r\nPING\r\n");
    assert!(!answer.starts_with(b"+") && !answer.starts_with(b"-"), "a RESP answer over plain TCP: {answer:?}");

    // With the password: HELLO 3 AUTH as redis-py sends it, then data.
    let mut c = tls_connect(addr, &ca);
    let hello = c.call(&["HELLO", "3", "AUTH", "default", &password]);
    assert!(matches!(hello, R::Map(_)), "{hello:?}");
    assert_eq!(c.call(&["GET", "k"]), R::Null, "the stranger wrote nothing");
    assert_eq!(c.call(&["SET", "k", "v1"]), ok());
    assert_eq!(c.call(&["INCRBY", "n", "5"]), R::Int(5));
    assert_eq!(c.call(&["MULTI"]), ok());
    assert_eq!(c.call(&["INCR", "n"]), R::Simple("QUEUED".into()));
    assert_eq!(c.call(&["GET", "k"]), R::Simple("QUEUED".into()));
    assert_eq!(c.call(&["EXEC"]), R::Array(vec![R::Int(6), bulk("v1")]));
    // RESET forgets the password, as in Redis.
    assert_eq!(c.call(&["RESET"]), R::Simple("RESET".into()));
    assert_eq!(c.call(&["GET", "k"]), R::Error(NOAUTH.into()));
    assert_eq!(c.call(&["AUTH", &password]), ok(), "a bare password is the default user's");
    assert_eq!(c.call(&["GET", "k"]), bulk("v1"));
    assert_eq!(stranger.call(&["GET", "k"]), R::Error(NOAUTH.into()));

    // The client API: the same password, over TLS.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let front = cluster.cfg.frontends()[0];
    let creds = Credentials::for_frontend(&cluster.cfg, front).expect("credentials from the cluster file");
    let api = cluster.client_addr();
    rt.block_on(async {
        let no_password = Credentials { password: None, ..creds.clone() };
        let c = Client::connect_with(api, &no_password).await.expect("TLS connects without a password");
        let e = c.get(b"k").await.expect_err("a request without the password is refused");
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        assert!(e.to_string().contains(NOAUTH), "{e}");
        let wrong = Credentials { password: Some(Password::new(b"guess")), ..creds.clone() };
        let e = Client::connect_with(api, &wrong).await.err().expect("a wrong password is refused");
        assert!(e.to_string().starts_with("WRONGPASS"), "{e}");
        let e = Client::connect(api).await.expect("TCP connects").get(b"k").await.expect_err("plain TCP");
        assert!(!e.to_string().contains("committed"), "{e}");
        let c = Client::connect_with(api, &creds).await.expect("the password is accepted");
        assert_eq!(c.get(b"k").await.unwrap().expect("committed"), Some(b"v1".to_vec()));
    });

    // `meridian client` takes the password from the cluster file, or
    // from MERIDIAN_PASSWORD.
    let file = cluster.file.display().to_string();
    let (code, out, err) = meridian(&["client", "--cluster", &file, "get", "k"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("v1") && out.contains("committed"), "{out}");
    let (code, _, err) = meridian(&["client", "--cluster", &file, "get", "k"], &[("MERIDIAN_PASSWORD", "guess")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("WRONGPASS"), "{err}");
    let (code, out, err) =
        meridian(&["client", "--cluster", &file, "txn", "n += 1"], &[("MERIDIAN_PASSWORD", &password)]);
    assert_eq!(code, 0, "{out}{err}");

    // `meridian bench` connects its clients the same way.
    let exp = write_temp(
        "bench.toml",
        "[cluster]\npreset = \"tiga-gcp\"\nserver_regions = [\"south-carolina\", \"finland\", \"brazil\"]\n\
         shards = 2\nreplicas_per_shard = 3\n\n[clients]\nregions = [\"south-carolina\"]\nper_region = 4\n\
         mode = \"closed\"\n\n[workload]\nkind = \"microbench\"\nkeys_per_shard = 1000\n\n\
         [run]\nduration_s = 1.0\nwarmup_s = 0.2\ndrain_s = 2.0\nseed = 1\n\n[protocol]\nname = \"2pl-paxos\"\n",
    );
    let (code, out, err) = meridian(&["bench", "--cluster", &file, "--config", &exp.display().to_string()], &[]);
    let _ = std::fs::remove_file(&exp);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("valid"), "{out}");
}

/// Lines of `label`'s log after its first `skip` bytes that refuse a peer.
fn refusals(cluster: &TestCluster, label: &str, skip: usize) -> Vec<String> {
    let log = cluster.full_log(label);
    log.get(skip.min(log.len())..)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("refused a peer"))
        .map(str::to_string)
        .collect()
}

/// Waits until `label`'s log (past `skip` bytes) has a refusal containing
/// `needle`.
fn wait_for_refusal(cluster: &TestCluster, label: &str, skip: usize, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(line) = refusals(cluster, label, skip).into_iter().find(|l| l.contains(needle)) {
            return line;
        }
        assert!(Instant::now() < deadline, "{label} refused no peer with `{needle}`; log:\n{}", cluster.log(label));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `count` INCRs through the gateway, each committed.
fn incr(c: &mut Resp<TlsStream>, key: &str, count: usize) -> i64 {
    let mut last = 0;
    for _ in 0..count {
        match c.call(&["INCR", key]) {
            R::Int(n) => last = n,
            other => panic!("INCR: {other:?}"),
        }
    }
    last
}

#[test]
fn a_peer_without_the_clusters_credentials_cannot_join() {
    let shape = Shape { protocol: "2pl-paxos", shards: 1, replicas: 3, wan_scale: None, params: Vec::new() };
    let mut cluster = TestCluster::start_secured("impostor", shape);
    let (ca, password) = (cluster.certs_dir().join("ca.pem"), cluster.password());
    let mut c = tls_connect(cluster.redis_addr(), &ca);
    assert_eq!(c.call(&["AUTH", &password]), ok());
    assert_eq!(incr(&mut c, "count", 5), 5);
    let (leader, victim) = ("shard0-replica0", "shard0-replica2");
    let before = cluster.full_log(leader).len();

    // A plain-TCP peer with a well-formed first frame: no handshake, no
    // entry.
    let hello = frame::to_frame(&frame::Hello { cluster: cluster.cfg.cluster_id(), from: 2 });
    let answer = plain_tcp_answer(cluster.addr_of(leader).peer, &hello);
    assert!(answer.len() < 64, "a plain peer was answered: {answer:?}");
    wait_for_refusal(&cluster, leader, before, "TLS handshake failed");

    // A node with a certificate of another CA, in the place of a follower.
    cluster.kill(victim);
    let other_certs = cluster.dir.join("other-certs");
    let text = std::fs::read_to_string(&cluster.file).unwrap();
    let certs = cluster.certs_dir().display().to_string();
    let other = cluster.dir.join("other.toml");
    std::fs::write(&other, text.replace(&certs, &other_certs.display().to_string())).unwrap();
    let (code, out, err) = meridian(&["cluster", "certs", "--config", &other.display().to_string()], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let before = cluster.full_log(leader).len();
    cluster.start_process("impostor-ca", &other, victim);
    // The leader cannot reach it (its certificate is not the CA's) ...
    let line = wait_for_refusal(&cluster, leader, before, "TLS handshake failed");
    assert!(line.contains("certificate"), "{line}");
    // ... and it cannot reach the cluster (nor take the cluster's).
    wait_for_refusal(&cluster, "impostor-ca", 0, "TLS handshake failed");
    assert_eq!(incr(&mut c, "count", 20), 25, "the cluster commits without the follower");
    cluster.kill("impostor-ca");

    // A node with the genuine certificate of another node, claiming to be
    // the follower: the CA signed it, but it does not name the follower.
    let stolen = cluster.dir.join("stolen-certs");
    std::fs::create_dir_all(&stolen).unwrap();
    for entry in std::fs::read_dir(cluster.certs_dir()).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, stolen.join(path.file_name().unwrap())).unwrap();
    }
    for ext in ["pem", "key"] {
        std::fs::copy(cluster.certs_dir().join(format!("{leader}.{ext}")), stolen.join(format!("{victim}.{ext}")))
            .unwrap();
    }
    let thief = cluster.dir.join("thief.toml");
    std::fs::write(
        &thief,
        text.replace(&format!("certs_dir = {certs:?}"), &format!("certs_dir = {:?}", stolen.display().to_string())),
    )
    .unwrap();
    let (replica1, before) = ("shard0-replica1", cluster.full_log("shard0-replica1").len());
    let leader_before = cluster.full_log(leader).len();
    cluster.start_process("impostor-name", &thief, victim);
    // Its elections reach the others, who refuse a certificate that names
    // another node ...
    let claim = format!("does not name {victim}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !refusals(&cluster, replica1, before)
        .iter()
        .chain(&refusals(&cluster, leader, leader_before))
        .any(|l| l.contains(&claim))
    {
        assert!(Instant::now() < deadline, "nobody refused the stolen certificate; log:\n{}", cluster.log(replica1));
        std::thread::sleep(Duration::from_millis(100));
    }
    // ... and the leader's link to the follower refuses its certificate.
    wait_for_refusal(&cluster, leader, leader_before, "TLS handshake failed");
    assert_eq!(incr(&mut c, "count", 20), 45, "the cluster commits while the impostor runs");
    cluster.kill("impostor-name");

    // The genuine follower rejoins.
    cluster.restart(victim);
    assert!(cluster.healthy_within(victim, Duration::from_secs(20)), "{}", cluster.log(victim));
    assert_eq!(incr(&mut c, "count", 5), 50);
    assert!(refusals(&cluster, victim, 0).is_empty(), "the genuine follower was refused: {}", cluster.log(victim));
}
