//! Who may connect: the cluster's password, its TLS material, and the
//! streams that carry either plain TCP or TLS.
//!
//! Peers authenticate each other with mutual TLS (rustls, `ring`): every
//! node holds a certificate signed by the cluster's CA that names the node
//! (a DNS subject-alternative name equal to its name). A node dialling a
//! peer checks that the peer's certificate names the node it dialled; a node
//! accepting one requires a certificate of the cluster's CA and checks that
//! it names the node the connection's first frame claims to be. Clients of
//! a front-end (the client API, the Redis gateway) give the cluster's
//! password, over TLS when `client_tls` is on; they need only the CA.
//!
//! `meridian cluster certs` makes the material: a CA and one certificate
//! and key per node ([`generate`]). This module reads files (the password
//! file, certificates) but never opens sockets of its own.

use crate::config::{ClusterConfig, PasswordSource};
use meridian_core::NodeId;
use meridian_experiment::ConfigError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// How long a TLS handshake may take before the connection is dropped (a
/// client that opens connections and never finishes them holds nothing
/// for longer).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest password accepted from a file or a client.
pub const MAX_PASSWORD_BYTES: usize = 4096;
/// The variable that gives clients the password (before the cluster file's).
pub const PASSWORD_ENV: &str = "MERIDIAN_PASSWORD";

/// The cluster's password. Compared in constant time, never printed.
#[derive(Clone)]
pub struct Password(Arc<[u8]>);

impl Password {
    pub fn new(bytes: &[u8]) -> Password {
        Password(Arc::from(bytes))
    }

    /// Whether `given` is the password, in time that depends only on the
    /// lengths.
    pub fn matches(&self, given: &[u8]) -> bool {
        let mine = &self.0;
        let mut diff = u8::from(mine.len() != given.len());
        for (i, b) in given.iter().enumerate() {
            diff |= b ^ mine.get(i % mine.len().max(1)).copied().unwrap_or(0);
        }
        diff == 0
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// An error about the `[security]` section, at the field's line.
fn field_error(cfg: &ClusterConfig, field: &str, message: impl Into<String>) -> ConfigError {
    let line = match field {
        "security.password_file" => cfg.security.password_file_line,
        _ => cfg.security.certs_dir_line,
    };
    ConfigError::new(&cfg.file, line, field, message)
}

/// The cluster's password, if it has one (the password file is read now).
pub fn password(cfg: &ClusterConfig) -> Result<Option<Password>, ConfigError> {
    match &cfg.security.password {
        None => Ok(None),
        Some(PasswordSource::Inline(p)) => Ok(Some(Password::new(p.as_bytes()))),
        Some(PasswordSource::File(path)) => {
            read_password_file(path).map(Some).map_err(|e| field_error(cfg, "security.password_file", e))
        }
    }
}

fn read_password_file(path: &Path) -> Result<Password, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let line = text.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() || line.len() > MAX_PASSWORD_BYTES {
        return Err(format!(
            "{}: the first line must hold the password (1 to {MAX_PASSWORD_BYTES} bytes)",
            path.display()
        ));
    }
    Ok(Password::new(line))
}

/// The password a client gives: `MERIDIAN_PASSWORD` when set, else the
/// cluster file's.
pub fn client_password(cfg: &ClusterConfig) -> Result<Option<Password>, ConfigError> {
    match std::env::var_os(PASSWORD_ENV) {
        Some(p) if !p.is_empty() => Ok(Some(Password::new(p.as_encoded_bytes()))),
        _ => password(cfg),
    }
}

/// Where the material of a cluster lives.
pub fn ca_file(dir: &Path) -> PathBuf {
    dir.join("ca.pem")
}
pub fn cert_file(dir: &Path, node: &str) -> PathBuf {
    dir.join(format!("{node}.pem"))
}
pub fn key_file(dir: &Path, node: &str) -> PathBuf {
    dir.join(format!("{node}.key"))
}
fn ca_key_file(dir: &Path) -> PathBuf {
    dir.join("ca.key")
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not a PEM certificate: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: holds no certificate", path.display()));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| format!("{}: not a PEM private key: {e}", path.display()))
}

fn roots(cfg: &ClusterConfig) -> Result<Arc<rustls::RootCertStore>, ConfigError> {
    let err = |e: String| field_error(cfg, "security.certs_dir", e);
    let path = ca_file(&cfg.security.certs_dir);
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certs(&path).map_err(err)? {
        roots.add(cert).map_err(|e| err(format!("{}: not a usable CA certificate: {e}", path.display())))?;
    }
    Ok(Arc::new(roots))
}

/// A node's name as the name its certificate carries.
fn server_name(node: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(node.to_string()).map_err(|e| format!("node name `{node}` is not a DNS name: {e}"))
}

/// What a node needs to accept and open connections.
#[derive(Clone)]
pub struct NodeSecurity {
    /// Peers: mutual TLS (both sides present certificates of the CA).
    pub peers: Option<PeerTls>,
    /// Front-ends: the password and TLS of their clients.
    pub clients: Access,
}

/// Mutual TLS between peers.
#[derive(Clone)]
pub struct PeerTls {
    pub acceptor: TlsAcceptor,
    pub connector: TlsConnector,
    /// The name each node's certificate must carry, by node index.
    pub names: Arc<[ServerName<'static>]>,
}

/// What a front-end requires of its clients.
#[derive(Clone, Default)]
pub struct Access {
    pub password: Option<Password>,
    pub tls: Option<TlsAcceptor>,
}

/// Reads node `me`'s material as its file says: errors name the field.
pub fn node_security(cfg: &ClusterConfig, me: NodeId) -> Result<NodeSecurity, ConfigError> {
    let sec = &cfg.security;
    let password = password(cfg)?;
    if !sec.needs_certs() {
        return Ok(NodeSecurity { peers: None, clients: Access { password, tls: None } });
    }
    let err = |e: String| field_error(cfg, "security.certs_dir", e);
    let name = cfg.topology.name(me);
    let chain = read_certs(&cert_file(&sec.certs_dir, name)).map_err(err)?;
    let key = read_key(&key_file(&sec.certs_dir, name)).map_err(err)?;
    let roots = roots(cfg)?;
    let mismatch = |e: rustls::Error| err(format!("{name}'s certificate and key: {e}"));
    let peers = if sec.tls {
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
            .build()
            .map_err(|e| err(format!("the CA: {e}")))?;
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(mismatch)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(mismatch)?;
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(mismatch)?
            .with_root_certificates(roots.clone())
            .with_client_auth_cert(chain.clone(), key.clone_key())
            .map_err(mismatch)?;
        let names = cfg.topology.nodes.iter().map(|n| server_name(&n.name)).collect::<Result<Vec<_>, _>>();
        Some(PeerTls {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
            names: names.map_err(err)?.into(),
        })
    } else {
        None
    };
    let tls = if sec.client_tls && cfg.topology.is_client(me) {
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(mismatch)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(mismatch)?;
        Some(TlsAcceptor::from(Arc::new(server)))
    } else {
        None
    };
    Ok(NodeSecurity { peers, clients: Access { password, tls } })
}

/// What a client gives a front-end.
#[derive(Clone, Default)]
pub struct Credentials {
    pub password: Option<Password>,
    /// TLS, with the name the front-end's certificate must carry.
    pub tls: Option<(TlsConnector, ServerName<'static>)>,
}

impl Credentials {
    /// For a client of front-end `node` of the cluster: the password
    /// ([`client_password`]) and, with `client_tls`, the CA.
    pub fn for_frontend(cfg: &ClusterConfig, node: NodeId) -> Result<Credentials, ConfigError> {
        let password = client_password(cfg)?;
        if !cfg.security.client_tls {
            return Ok(Credentials { password, tls: None });
        }
        let roots = roots(cfg)?;
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| field_error(cfg, "security.certs_dir", e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = server_name(cfg.topology.name(node)).map_err(|e| field_error(cfg, "security.certs_dir", e))?;
        Ok(Credentials { password, tls: Some((TlsConnector::from(Arc::new(client)), name)) })
    }
}

/// Whether a certificate names `node` (its DNS subject-alternative name).
pub fn names_node(cert: &CertificateDer<'_>, node: &ServerName<'_>) -> bool {
    match rustls::server::ParsedCertificate::try_from(cert) {
        Ok(parsed) => rustls::client::verify_server_name(&parsed, node).is_ok(),
        Err(_) => false,
    }
}

/// A connection in plain TCP or in TLS (either side).
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

/// Each half of a split [`Stream`].
pub type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
pub type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

impl Stream {
    /// The first certificate the other side presented (TLS only).
    pub fn peer_certificate(&self) -> Option<&CertificateDer<'static>> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(s) => s.get_ref().1.peer_certificates()?.first(),
        }
    }

    /// Read and write halves; plain TCP splits without a lock.
    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Plain(s) => {
                let (r, w) = s.into_split();
                (Box::new(r), Box::new(w))
            }
            Stream::Tls(s) => {
                let (r, w) = tokio::io::split(*s);
                (Box::new(r), Box::new(w))
            }
        }
    }

    /// The server side of a connection: TLS when `acceptor` is given, the
    /// handshake bounded by [`HANDSHAKE_TIMEOUT`].
    pub async fn accept(tcp: TcpStream, acceptor: Option<&TlsAcceptor>) -> io::Result<Stream> {
        let _ = tcp.set_nodelay(true);
        let Some(acceptor) = acceptor else { return Ok(Stream::Plain(tcp)) };
        let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        Ok(Stream::Tls(Box::new(tls.into())))
    }

    /// The client side: TLS when `tls` is given, checking that the
    /// server's certificate names `name`.
    pub async fn connect(tcp: TcpStream, tls: Option<(&TlsConnector, &ServerName<'static>)>) -> io::Result<Stream> {
        tcp.set_nodelay(true)?;
        let Some((connector, name)) = tls else { return Ok(Stream::Plain(tcp)) };
        let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(name.clone(), tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        Ok(Stream::Tls(Box::new(tls.into())))
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// What `meridian cluster certs` wrote or kept.
pub struct Issued {
    pub written: Vec<PathBuf>,
    pub kept: Vec<PathBuf>,
}

/// Writes the material a cluster needs into `dir`: a CA (`ca.pem`,
/// `ca.key`, reused when both exist so that certificates can be added to a
/// running cluster) and `<node>.pem` / `<node>.key` for every node that has
/// none yet. Each certificate names its node; a front-end's also names the
/// addresses clients reach it at (`extra_names`: more names or addresses
/// for them, e.g. a DNS name in front of `0.0.0.0`). When the file names a
/// `password_file` that does not exist, a random password is written there.
pub fn generate(cfg: &ClusterConfig, dir: &Path, extra_names: &[String]) -> Result<Issued, String> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let mut issued = Issued { written: Vec::new(), kept: Vec::new() };
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = rcgen::DistinguishedName::new();
    ca_params.distinguished_name.push(DnType::CommonName, format!("Meridian cluster CA ({})", cfg.name));
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    set_validity(&mut ca_params);
    let (ca_pem, ca_key) = (ca_file(dir), ca_key_file(dir));
    let ca_keypair = if ca_pem.exists() && ca_key.exists() {
        let text = std::fs::read_to_string(&ca_key).map_err(|e| format!("cannot read {}: {e}", ca_key.display()))?;
        issued.kept.push(ca_pem.clone());
        KeyPair::from_pem(&text).map_err(|e| format!("{}: {e}", ca_key.display()))?
    } else {
        let key = KeyPair::generate().map_err(|e| format!("cannot make a key: {e}"))?;
        let cert = ca_params.self_signed(&key).map_err(|e| format!("cannot make the CA: {e}"))?;
        write_private(&ca_key, key.serialize_pem().as_bytes())?;
        write_file(&ca_pem, cert.pem().as_bytes())?;
        issued.written.extend([ca_pem, ca_key]);
        key
    };
    let issuer = Issuer::new(ca_params, ca_keypair);
    for (i, node) in cfg.topology.nodes.iter().enumerate() {
        let (cert_path, key_path) = (cert_file(dir, &node.name), key_file(dir, &node.name));
        if cert_path.exists() && key_path.exists() {
            issued.kept.push(cert_path);
            continue;
        }
        let mut names = vec![node.name.clone()];
        let addrs = &cfg.addrs[i];
        if cfg.topology.is_client(NodeId(i as u32)) {
            for ip in [addrs.client, addrs.redis].into_iter().flatten().map(|a| a.ip()) {
                if !ip.is_unspecified() && !names.contains(&ip.to_string()) {
                    names.push(ip.to_string());
                }
                if ip.is_loopback() && !names.iter().any(|n| n == "localhost") {
                    names.push("localhost".into());
                }
            }
            names.extend(extra_names.iter().cloned());
        }
        let mut params =
            CertificateParams::new(names).map_err(|e| format!("{}: cannot name its certificate: {e}", node.name))?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, node.name.clone());
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        // One certificate serves both ends of a peer link.
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        set_validity(&mut params);
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(|e| format!("cannot make a key: {e}"))?;
        let cert =
            params.signed_by(&key, &issuer).map_err(|e| format!("cannot sign {}'s certificate: {e}", node.name))?;
        write_private(&key_path, key.serialize_pem().as_bytes())?;
        write_file(&cert_path, cert.pem().as_bytes())?;
        issued.written.extend([cert_path, key_path]);
    }
    if let Some(PasswordSource::File(path)) = &cfg.security.password {
        if path.exists() {
            issued.kept.push(path.clone());
        } else {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            write_private(path, format!("{}\n", random_password()?).as_bytes())?;
            issued.written.push(path.clone());
        }
    }
    Ok(issued)
}

/// From the start of last year for ten years (a test cluster's lifetime;
/// a longer-lived one renews its certificates with its own CA).
fn set_validity(params: &mut rcgen::CertificateParams) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let year = 1970 + (now / 31_556_952) as i32;
    params.not_before = rcgen::date_time_ymd(year - 1, 1, 1);
    params.not_after = rcgen::date_time_ymd(year + 10, 1, 1);
}

/// 32 random bytes as hex, from the kernel.
fn random_password() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into the buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != bytes.len() as isize {
        return Err("cannot draw random bytes for the password".into());
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A file only its owner may read (keys, passwords).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    f.write_all(bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_compare_whole() {
        let p = Password::new(b"s3cret");
        assert!(p.matches(b"s3cret"));
        for wrong in [&b""[..], b"s3cre", b"s3cret!", b"S3cret", b"s3cres"] {
            assert!(!p.matches(wrong), "{wrong:?}");
        }
        assert_eq!(format!("{p:?}"), "Password(<redacted>)");
    }

    /// A two-shard cluster file whose material lives in `dir`.
    fn secured(dir: &Path) -> ClusterConfig {
        let text = format!(
            "[cluster]\npreset = \"tiga-gcp\"\nserver_regions = [\"south-carolina\", \"finland\", \"brazil\"]\n\
             shards = 1\nreplicas_per_shard = 3\n[protocol]\nname = \"p\"\n\
             [security]\npassword_file = {:?}\ntls = true\ncerts_dir = {:?}\n",
            dir.join("pw").display().to_string(),
            dir.display().to_string()
        );
        let protocols = [meridian_core::ProtocolInfo {
            implemented: true,
            ..meridian_core::ProtocolInfo::planned("p", meridian_core::Consistency::StrictSerializable, "")
        }];
        ClusterConfig::from_str(&text, "c.toml", &protocols).unwrap()
    }

    #[test]
    fn generated_certificates_name_their_nodes_and_load() {
        let dir = std::env::temp_dir().join(format!("meridian-certs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cfg = secured(&dir);
        let Err(e) = node_security(&cfg, NodeId(0)) else { panic!("no material yet") };
        assert!(e.to_string().contains("cannot read"), "{e}");
        let issued = generate(&cfg, &dir, &["db.example.com".into()]).unwrap();
        assert_eq!(issued.written.len(), 2 + 2 * cfg.topology.nodes.len() + 1, "CA, every node, the password");
        let pw = password(&cfg).unwrap().expect("a password was written");
        assert_eq!(pw.as_bytes().len(), 64);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(key_file(&dir, "shard0-replica0")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "keys are private");
        for (i, node) in cfg.topology.nodes.iter().enumerate() {
            let s = node_security(&cfg, NodeId(i as u32)).unwrap();
            assert!(s.peers.is_some());
            assert_eq!(s.clients.tls.is_some(), cfg.topology.is_client(NodeId(i as u32)));
            let cert = &read_certs(&cert_file(&dir, &node.name)).unwrap()[0];
            assert!(names_node(cert, &server_name(&node.name).unwrap()));
            assert!(ca_signed(&cfg, cert, &node.name));
            let other = &cfg.topology.nodes[(i + 1) % cfg.topology.nodes.len()].name;
            assert!(!names_node(cert, &server_name(other).unwrap()), "{} names {other}", node.name);
        }
        let fe = cfg.frontends()[0];
        let cert = &read_certs(&cert_file(&dir, cfg.topology.name(fe))).unwrap()[0];
        for name in ["127.0.0.1", "localhost", "db.example.com"] {
            assert!(names_node(cert, &ServerName::try_from(name).unwrap()), "the front-end's certificate names {name}");
        }
        // Again: everything is kept, nothing rewritten.
        let again = generate(&cfg, &dir, &[]).unwrap();
        assert!(again.written.is_empty());
        assert!(password(&cfg).unwrap().unwrap().matches(pw.as_bytes()));
        // A new node's certificate comes from the same CA.
        std::fs::remove_file(cert_file(&dir, "shard0-replica1")).unwrap();
        let third = generate(&cfg, &dir, &[]).unwrap();
        assert_eq!(third.written, vec![cert_file(&dir, "shard0-replica1"), key_file(&dir, "shard0-replica1")]);
        let cert = &read_certs(&cert_file(&dir, "shard0-replica1")).unwrap()[0];
        assert!(ca_signed(&cfg, cert, "shard0-replica1"), "a reissued certificate chains to the first CA");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Whether `cert` chains to the cluster's CA as a server named `name`.
    fn ca_signed(cfg: &ClusterConfig, cert: &CertificateDer<'_>, name: &str) -> bool {
        use rustls::client::danger::ServerCertVerifier;
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots(cfg).unwrap(), provider())
            .build()
            .unwrap();
        let now = rustls::pki_types::UnixTime::now();
        verifier.verify_server_cert(cert, &[], &server_name(name).unwrap(), &[], now).is_ok()
    }

    #[test]
    fn a_password_file_gives_its_first_line() {
        let dir = std::env::temp_dir().join(format!("meridian-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("pw");
        std::fs::write(&f, "hunter2\r\nignored\n").unwrap();
        assert!(read_password_file(&f).unwrap().matches(b"hunter2"));
        std::fs::write(&f, "\nx\n").unwrap();
        assert!(read_password_file(&f).is_err(), "an empty first line is no password");
        assert!(read_password_file(&dir.join("missing")).unwrap_err().contains("cannot read"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
