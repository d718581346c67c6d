//! Meridian's async client library: a connection to a front-end node's
//! client API that runs transaction programs and returns their outcomes.
//!
//! [`Client`] multiplexes any number of concurrent calls over one
//! connection; [`Connection`] is the low-level form the benchmark uses
//! (submit now, outcomes arrive on a channel). `get` and `put` take keys
//! as byte strings and run the Redis gateway's `GET` and `SET`
//! (`meridian_core::strings`), so the two see the same data; programs of
//! [`meridian_core::Op`]s name keys by number, a space apart from named keys. This module must never retry on its own: an
//! aborted outcome is the caller's to handle.

use crate::frame::{self, ClientFrame, ServerFrame};
use crate::security::{Credentials, Stream, WriteHalf};
use meridian_core::strings::{SetIf, SetReply, StrOp, StrReply, StringTxn};
use meridian_core::{Data, Outcome, Procedure, Program, Value};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

/// The sending half of a client connection.
#[derive(Clone)]
pub struct Connection {
    out: mpsc::UnboundedSender<ClientFrame>,
    /// Why the node refused the connection, if it did.
    refused: Arc<std::sync::OnceLock<String>>,
}

impl Connection {
    /// Connects; every answer `(id, outcome)` goes to `answers`, and the
    /// channel closes when the connection does.
    pub async fn open(addr: SocketAddr, answers: mpsc::UnboundedSender<(u64, Outcome)>) -> io::Result<Connection> {
        Connection::open_with(addr, &Credentials::default(), answers).await
    }

    /// Connects with the cluster's credentials: TLS when they hold a CA,
    /// then the password, refused (`PermissionDenied`, with the node's
    /// reason) when it is wrong.
    pub async fn open_with(
        addr: SocketAddr,
        creds: &Credentials,
        answers: mpsc::UnboundedSender<(u64, Outcome)>,
    ) -> io::Result<Connection> {
        let tcp = TcpStream::connect(addr).await?;
        let stream = Stream::connect(tcp, creds.tls.as_ref().map(|(c, n)| (c, n))).await?;
        let (r, w) = stream.into_split();
        let mut r = BufReader::new(r);
        let mut w = BufWriter::new(w);
        let mut buf = Vec::new();
        if let Some(password) = &creds.password {
            frame::write_value(&mut w, &ClientFrame::Auth { password: password.as_bytes().to_vec() }).await?;
            w.flush().await?;
            match frame::read_value::<_, ServerFrame>(&mut r, &mut buf).await? {
                Some(ServerFrame::Authenticated) => {}
                Some(ServerFrame::Refused { reason }) => {
                    return Err(io::Error::new(io::ErrorKind::PermissionDenied, reason));
                }
                _ => return Err(closed()),
            }
        }
        let (out, out_rx) = mpsc::unbounded_channel();
        tokio::spawn(write_requests(w, out_rx));
        let refused: Arc<std::sync::OnceLock<String>> = Arc::default();
        let why = Arc::clone(&refused);
        tokio::spawn(async move {
            loop {
                match frame::read_value(&mut r, &mut buf).await {
                    Ok(Some(ServerFrame::Response { id, outcome })) => {
                        if answers.send((id, outcome)).is_err() {
                            return;
                        }
                    }
                    Ok(Some(ServerFrame::Refused { reason })) => {
                        let _ = why.set(reason);
                        return;
                    }
                    Ok(Some(ServerFrame::Authenticated)) => {}
                    Ok(None) | Err(_) => return,
                }
            }
        });
        Ok(Connection { out, refused })
    }

    /// Why the node refused this connection (`NOAUTH ...` when it needs a
    /// password that was not given), once it has.
    pub fn refusal(&self) -> Option<&str> {
        self.refused.get().map(String::as_str)
    }

    /// Sends a request; false when the connection is gone.
    pub fn submit(&self, id: u64, program: Program) -> bool {
        self.out.send(ClientFrame::Request { id, program }).is_ok()
    }
}

async fn write_requests(mut w: BufWriter<WriteHalf>, mut rx: mpsc::UnboundedReceiver<ClientFrame>) -> io::Result<()> {
    while let Some(first) = rx.recv().await {
        frame::write_value(&mut w, &first).await?;
        while let Ok(more) = rx.try_recv() {
            frame::write_value(&mut w, &more).await?;
        }
        w.flush().await?;
    }
    Ok(())
}

type Waiters = Arc<Mutex<HashMap<u64, oneshot::Sender<Outcome>>>>;

/// A client of one front-end node; cheap to clone, calls may overlap.
#[derive(Clone)]
pub struct Client {
    conn: Connection,
    waiters: Waiters,
    next_id: Arc<std::sync::atomic::AtomicU64>,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> io::Result<Client> {
        Client::connect_with(addr, &Credentials::default()).await
    }

    /// Connects with the cluster's credentials (see
    /// [`Credentials::for_frontend`]).
    pub async fn connect_with(addr: SocketAddr, creds: &Credentials) -> io::Result<Client> {
        let (tx, mut rx) = mpsc::unbounded_channel::<(u64, Outcome)>();
        let conn = Connection::open_with(addr, creds, tx).await?;
        let waiters: Waiters = Arc::default();
        let w = waiters.clone();
        tokio::spawn(async move {
            while let Some((id, outcome)) = rx.recv().await {
                if let Some(waiter) = w.lock().expect("waiters lock").remove(&id) {
                    let _ = waiter.send(outcome);
                }
            }
            // Connection closed: pending callers see an error.
            w.lock().expect("waiters lock").clear();
        });
        Ok(Client { conn, waiters, next_id: Arc::default() })
    }

    /// Runs one transaction program and returns its outcome.
    pub async fn run(&self, program: Program) -> io::Result<Outcome> {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().expect("waiters lock").insert(id, tx);
        if !self.conn.submit(id, program) {
            self.waiters.lock().expect("waiters lock").remove(&id);
            return Err(self.closed());
        }
        rx.await.map_err(|_| self.closed())
    }

    fn closed(&self) -> io::Error {
        match self.conn.refusal() {
            Some(why) => io::Error::new(io::ErrorKind::PermissionDenied, why.to_string()),
            None => closed(),
        }
    }

    /// Reads one named key (Redis's `GET`): `None` when absent.
    pub async fn get(&self, key: &[u8]) -> io::Result<Result<Option<Vec<u8>>, Outcome>> {
        let mut txn = StringTxn::new(fresh_tag());
        txn.push(key, StrOp::Get);
        Ok(match self.run(Program::procedure(Procedure::Strings(txn.clone()))).await? {
            Outcome::Committed { results } => match txn.replies(&results).and_then(|mut r| r[0].pop()) {
                Some(StrReply::Bulk(b)) => Ok(Some(b)),
                _ => Ok(None),
            },
            other => Err(other),
        })
    }

    /// Writes one named key (Redis's `SET`).
    pub async fn put(&self, key: &[u8], value: &[u8]) -> io::Result<Outcome> {
        let mut txn = StringTxn::new(fresh_tag());
        txn.push(key, StrOp::Set { value: value.to_vec(), only: SetIf::Always, reply: SetReply::Ok });
        self.run(Program::procedure(Procedure::Strings(txn))).await
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "the front-end node closed the connection")
}

/// A value as text for people: integers in decimal, bytes as UTF-8 (lossy),
/// lists as `[a, b]`.
pub fn render(v: &Value) -> String {
    match &v.data {
        Data::Int(i) => i.to_string(),
        Data::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Data::List(l) => format!("{:?}", l.as_slice()),
        Data::Row(r) => format!("{:?}", r.as_slice()),
        Data::Named(entries) => {
            let shown: Vec<String> = entries
                .iter()
                .map(|e| {
                    format!(
                        "{}: {}",
                        String::from_utf8_lossy(&e.name),
                        render(&Value { tag: e.tag, data: e.data.clone() })
                    )
                })
                .collect();
            format!("{{{}}}", shown.join(", "))
        }
    }
}

/// A write tag unique with overwhelming probability: clock and process
/// mixed with a counter (values written by clients need unique tags only
/// so that histories can tell writes apart).
pub fn fresh_tag() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut x = now ^ (u64::from(std::process::id()) << 40) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^ (x >> 29)
}
