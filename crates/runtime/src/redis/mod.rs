//! The Redis protocol gateway of a front-end node: RESP2 and RESP3 over
//! TCP (loopback by default), so client libraries with their defaults
//! (redis-py 8 opens with `HELLO 3`), `redis-cli` and `redis-benchmark`
//! work against Meridian.
//!
//! - `resp.rs`: framing — the parser and replies in either protocol;
//! - `table.rs`: the commands known, their arity and key positions (what
//!   `COMMAND` reports), checked before any command runs, with Redis's own
//!   errors for unknown names and wrong argument counts;
//! - `connection.rs`: commands that touch only the connection (`HELLO`,
//!   `AUTH`, `CLIENT`, `SELECT`, `PING`, `ECHO`, `RESET`, `COMMAND`,
//!   `CONFIG`);
//! - `data.rs`: data commands (GET, SET with NX/XX/GET, SETNX, GETSET,
//!   GETDEL, DEL, EXISTS, MGET, MSET, MSETNX, APPEND, STRLEN, GETRANGE, SUBSTR,
//!   SETRANGE, INCR, INCRBY, DECR, DECRBY, INCRBYFLOAT, TYPE) as string
//!   operations on keys (`meridian_core::strings`);
//! - here: the connection loop, MULTI/EXEC/DISCARD, WATCH/UNWATCH, INFO
//!   and QUIT. A data
//!   command, or a MULTI's whole queue, runs as one transaction with one
//!   part per key; an aborted one is retried, bounded, with fresh write tags
//!   (it certainly did not commit). Keys map to Meridian keys as the client
//!   library maps them.
//!
//! WATCH reads each key's version; EXEC's transaction then carries them as
//! a guard (one part reading every key, anchored when they all live on one
//! shard) and writes nothing if any changed. Differences from Redis
//! (docs/runtime.md has the table): no expiry, and a one-shot protocol
//! refuses a watched EXEC or an MSETNX spanning shards. MSETNX is the same
//! kind of condition across keys (every key it sets must be absent at its
//! turn in the transaction), so a transaction holding one is one part
//! too. The parser bounds every length it is given
//! and answers malformed input with `-ERR Protocol error` before closing; it
//! must never panic or allocate what a length field claims before checking
//! it.
//!
//! With the cluster's password set, a connection runs nothing but `AUTH`,
//! `HELLO`, `QUIT` and `RESET` until it gives it (`-NOAUTH`, as Redis with
//! `requirepass`); with `client_tls`, connections are TLS.

mod connection;
mod data;
pub mod resp;
mod table;

use crate::client::fresh_tag;
use crate::node::Request;
use crate::security::{Access, Stream};
use connection::Connection;
use data::{Batch, Planned, plan};
use meridian_core::strings::{self, StrOp, StringTxn};
use meridian_core::{AbortReason, Key, OpResult, Outcome, Procedure, Program, Topology};
pub use resp::{Parsed, Proto, Reply, parse_command};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// Most arguments one command may have.
pub const MAX_ARGS: usize = 65_536;
/// Largest bulk string accepted.
pub const MAX_BULK_BYTES: usize = 16 << 20;
/// Longest inline command line.
pub const MAX_INLINE_BYTES: usize = 64 << 10;
/// Largest command, all its arguments together; a MULTI's queue likewise
/// (so one transaction's input, and with `strings::TXN_GROWTH_BYTES_MAX`
/// what it writes, fits the write-ahead log's records and peers' frames).
pub const MAX_COMMAND_BYTES: usize = 64 << 20;
/// Commands one MULTI may queue.
pub const MAX_QUEUED: usize = 4096;
/// Attempts of an aborted command before it fails.
pub const MAX_ATTEMPTS: u32 = 32;

/// One connection's state.
struct Gateway {
    requests: mpsc::Sender<Request>,
    node: String,
    topology: Arc<Topology>,
    conn: Connection,
    /// Keys under WATCH and the version each held when watched.
    watched: Vec<(Vec<u8>, u64)>,
    /// Commands queued since MULTI, and whether one was refused.
    multi: Option<(Vec<Planned>, bool)>,
    /// Bytes of the arguments queued in the open MULTI.
    queued_bytes: usize,
}

/// Whether a transaction runs under the connection's WATCH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Condition {
    None,
    Watched,
}

/// What the connection does after a command.
enum Next {
    Continue,
    Close,
}

impl Gateway {
    /// Runs commands as one transaction (under the connection's WATCH, if
    /// `watch`), retrying aborts with fresh write tags (an aborted attempt
    /// certainly did not commit): each command's reply, `None` when a
    /// watched key had changed, or the error to answer for all of them.
    async fn run(&self, commands: &[Planned], condition: Condition) -> Result<Option<Vec<Reply>>, Reply> {
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(u64::from(attempt.min(10)))).await;
            }
            let mut batch = Batch::new(commands, fresh_tag());
            if condition == Condition::Watched && !self.watched.is_empty() {
                batch.guard(&self.watched);
            }
            // A condition across keys (WATCH, MSETNX) is one part reading
            // them all: anchored, so one-shot protocols run it, when they
            // live on one shard.
            let one = self.one_shard(&batch);
            batch.txn.one_shard = one;
            let program = Program::procedure(Procedure::Strings(batch.txn.clone()));
            if let Some(results) = self.submit(program).await? {
                return Ok(batch.replies(&results));
            }
        }
        Err(Reply::err(format!("ERR transaction aborted {MAX_ATTEMPTS} times")))
    }

    /// Whether every key the batch touches lives on one shard.
    fn one_shard(&self, batch: &Batch) -> bool {
        let shards: std::collections::BTreeSet<_> = batch.keys().map(|k| self.topology.shard_of(k)).collect();
        shards.len() == 1
    }

    /// One attempt: the results, `None` when it aborted, or the error.
    async fn submit(&self, program: Program) -> Result<Option<Vec<OpResult>>, Reply> {
        let (reply, outcome) = oneshot::channel();
        if self.requests.send(Request { program, reply }).await.is_err() {
            return Err(Reply::err("ERR the node is shutting down"));
        }
        match outcome.await {
            Ok(Outcome::Committed { results }) => Ok(Some(results)),
            Ok(Outcome::Aborted { reason: AbortReason::Rejected }) => Err(Reply::err(
                "ERR the cluster's protocol cannot run this transaction: a one-shot protocol runs WATCH and MSETNX \
                 only when every key lives on one shard",
            )),
            Ok(Outcome::Aborted { .. }) => Ok(None),
            Ok(Outcome::Unknown) => Err(Reply::err("ERR transaction outcome unknown")),
            Err(_) => Err(Reply::err("ERR the node is shutting down")),
        }
    }

    async fn execute(&self, planned: Planned) -> Reply {
        match self.run(std::slice::from_ref(&planned), Condition::None).await {
            Ok(Some(mut replies)) => replies.pop().unwrap_or(Reply::Bulk(None)),
            Ok(None) => unreachable!("only a guarded transaction answers nothing"),
            Err(e) => e,
        }
    }

    async fn exec(&mut self) -> Reply {
        let Some((queued, refused)) = self.multi.take() else { return Reply::err("ERR EXEC without MULTI") };
        let watched = !self.watched.is_empty();
        let reply = if refused {
            Reply::err("EXECABORT Transaction discarded because of previous errors.")
        } else if queued.is_empty() && !watched {
            Reply::Array(Vec::new())
        } else {
            match self.run(&queued, Condition::Watched).await {
                Ok(Some(replies)) => Reply::Array(replies),
                Ok(None) => Reply::NullArray,
                Err(e) => e,
            }
        };
        self.watched.clear(); // EXEC unwatches every key, whatever happened
        reply
    }

    /// `WATCH key...`: the version each key holds now, read in one
    /// transaction; EXEC runs only if they all still hold it.
    async fn watch(&mut self, keys: &[Vec<u8>]) -> Reply {
        if self.watched.len() + keys.len() > MAX_QUEUED {
            return Reply::err(format!("ERR at most {MAX_QUEUED} watched keys"));
        }
        let mut txn = StringTxn::new(fresh_tag());
        for k in keys {
            txn.push(k, StrOp::Exists);
        }
        for _ in 0..MAX_ATTEMPTS {
            match self.submit(Program::procedure(Procedure::Strings(txn.clone()))).await {
                Ok(Some(results)) => {
                    // One result per part: the value of each key, in key order.
                    let mut held = txn.scripts.iter().map(|s| s.key).collect::<Vec<Key>>();
                    held.dedup();
                    for s in &txn.scripts {
                        let at = held.iter().position(|k| *k == s.key).expect("a part per key");
                        let version =
                            strings::entry(results.get(at).and_then(Option::as_ref), &s.name).map_or(0, |v| v.tag);
                        if !self.watched.iter().any(|(n, _)| *n == s.name) {
                            self.watched.push((s.name.clone(), version));
                        }
                    }
                    return Reply::ok();
                }
                Ok(None) => continue,
                Err(e) => return e,
            }
        }
        Reply::err(format!("ERR transaction aborted {MAX_ATTEMPTS} times"))
    }

    fn info(&self) -> Reply {
        let text = format!(
            "# Server\r\nredis_version:{}\r\nredis_mode:standalone\r\nmeridian_node:{}\r\nmeridian_version:{}\r\n",
            connection::REDIS_VERSION,
            self.node,
            env!("CARGO_PKG_VERSION")
        );
        Reply::bulk(text)
    }

    async fn command(&mut self, args: Vec<Vec<u8>>) -> (Reply, Next) {
        let Some((first, rest)) = args.split_first() else { return (Reply::err("ERR empty command"), Next::Continue) };
        let given = String::from_utf8_lossy(first);
        // Before the password nothing else runs, not even a lookup: an
        // outsider learns nothing but that a password is needed.
        if !self.conn.authenticated() && !connection::allowed_before_auth(&given) {
            return (Reply::err(connection::NOAUTH), Next::Continue);
        }
        let spec = match table::check(&given, rest) {
            Ok(spec) => spec,
            Err(e) => {
                if let Some((_, refused)) = self.multi.as_mut() {
                    *refused = true; // Redis discards a MULTI after such an error
                }
                return (e, Next::Continue);
            }
        };
        let name = spec.name.to_ascii_uppercase();
        let reply = match name.as_str() {
            "QUIT" => return (Reply::ok(), Next::Close),
            "RESET" => {
                self.multi = None;
                self.watched.clear();
                self.conn.reset();
                Reply::Simple("RESET".into())
            }
            "MULTI" if self.multi.is_some() => Reply::err("ERR MULTI calls can not be nested"),
            "MULTI" => {
                self.multi = Some((Vec::new(), false));
                self.queued_bytes = 0;
                Reply::ok()
            }
            "EXEC" => self.exec().await,
            "DISCARD" => match self.multi.take() {
                Some(_) => {
                    self.watched.clear();
                    Reply::ok()
                }
                None => Reply::err("ERR DISCARD without MULTI"),
            },
            "WATCH" if self.multi.is_some() => Reply::err("ERR WATCH inside MULTI is not allowed"),
            "WATCH" => self.watch(rest).await,
            "UNWATCH" => {
                self.watched.clear();
                Reply::ok()
            }
            "HELLO" | "AUTH" if self.multi.is_some() => {
                Reply::err(format!("ERR Command not allowed inside a transaction: {}", spec.name))
            }
            _ if self.multi.is_some() => self.queue(&name, rest),
            "HELLO" => self.conn.hello(rest),
            "AUTH" => self.conn.auth(rest),
            "CLIENT" => self.conn.client(rest, false),
            "PING" => connection::ping(rest),
            "ECHO" => Reply::bulk(rest[0].clone()),
            "SELECT" => connection::select(rest),
            "COMMAND" => connection::command(rest),
            "CONFIG" => connection::config(rest),
            "INFO" => self.info(),
            _ => match plan(&name, rest) {
                Ok(p) => self.execute(p).await,
                Err(e) => e,
            },
        };
        (reply, Next::Continue)
    }

    fn queue(&mut self, name: &str, args: &[Vec<u8>]) -> Reply {
        let (queued, refused) = self.multi.as_mut().expect("queueing inside MULTI");
        if queued.len() >= MAX_QUEUED {
            *refused = true;
            return Reply::err(format!("ERR at most {MAX_QUEUED} commands in one MULTI"));
        }
        self.queued_bytes += args.iter().map(Vec::len).sum::<usize>();
        if self.queued_bytes > MAX_COMMAND_BYTES {
            *refused = true;
            return Reply::err(format!("ERR a MULTI's commands may hold at most {MAX_COMMAND_BYTES} bytes"));
        }
        match plan(name, args) {
            Ok(p) => {
                queued.push(p);
                Reply::Simple("QUEUED".into())
            }
            Err(e) => {
                *refused = true;
                e
            }
        }
    }
}

/// Accepts Redis clients and serves each connection, requiring what
/// `access` says (password, TLS).
pub async fn serve(
    listener: TcpListener,
    requests: mpsc::Sender<Request>,
    node: String,
    topology: Arc<Topology>,
    access: Access,
) {
    let access = Arc::new(access);
    loop {
        let Ok((stream, peer)) = listener.accept().await else { continue };
        let conn = Connection::new(Some(peer), access.password.clone());
        let gateway = Gateway {
            requests: requests.clone(),
            node: node.clone(),
            topology: Arc::clone(&topology),
            conn,
            watched: Vec::new(),
            multi: None,
            queued_bytes: 0,
        };
        let access = Arc::clone(&access);
        tokio::spawn(async move {
            let stream = match Stream::accept(stream, access.tls.as_ref()).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "redis TLS handshake failed");
                    return;
                }
            };
            if let Err(e) = connection(stream, gateway).await {
                tracing::debug!(%peer, error = %e, "redis connection closed");
            }
        });
    }
}

async fn connection<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, mut gateway: Gateway) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut out: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut chunk = vec![0u8; 16 << 10];
    loop {
        // Answer every complete command buffered (pipelining), then write.
        loop {
            match parse_command(&buf) {
                Ok(Some((args, used))) => {
                    buf.drain(..used);
                    if args.is_empty() {
                        continue; // a blank inline line
                    }
                    let (reply, next) = gateway.command(args).await;
                    reply.encode(gateway.conn.proto, &mut out);
                    if let Next::Close = next {
                        stream.write_all(&out).await?;
                        return stream.shutdown().await;
                    }
                }
                Ok(None) => break,
                Err(why) => {
                    Reply::err(format!("ERR Protocol error: {why}")).encode(gateway.conn.proto, &mut out);
                    stream.write_all(&out).await?;
                    return stream.shutdown().await;
                }
            }
        }
        if !out.is_empty() {
            stream.write_all(&out).await?;
            // TLS may hold part of a record until flushed.
            stream.flush().await?;
            out.clear();
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A gateway whose password is `s3cret`, and the requests it sends to
    /// the node.
    fn locked_gateway() -> (Gateway, mpsc::Receiver<Request>) {
        let (requests, rx) = mpsc::channel(8);
        let topology = Arc::new(Topology::build(&meridian_core::ClusterSpec::one_region(1, 1), &[]));
        let conn = Connection::new(None, Some(crate::security::Password::new(b"s3cret")));
        let gateway =
            Gateway { requests, node: "n".into(), topology, conn, watched: Vec::new(), multi: None, queued_bytes: 0 };
        (gateway, rx)
    }

    fn args(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn before_the_password_nothing_reaches_the_cluster() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (mut g, mut rx) = locked_gateway();
            let noauth = Reply::err(connection::NOAUTH);
            for cmd in [&["GET", "k"][..], &["set", "k", "v"], &["MULTI"], &["PING"], &["INFO"], &["nosuch", "x"], &["WATCH", "k"]] {
                assert_eq!(g.command(args(cmd)).await.0, noauth, "{cmd:?}");
            }
            assert!(g.multi.is_none() && g.watched.is_empty());
            assert!(matches!(g.command(args(&["AUTH", "nope"])).await.0, Reply::Error(e) if e.starts_with("WRONGPASS")));
            assert_eq!(g.command(args(&["GET", "k"])).await.0, noauth);
            assert!(rx.try_recv().is_err(), "no request reached the node");
            assert!(matches!(g.command(args(&["QUIT"])).await, (_, Next::Close)), "QUIT needs no password");
            assert_eq!(g.command(args(&["RESET"])).await.0, Reply::Simple("RESET".into()));
            assert_eq!(g.command(args(&["AUTH", "default", "s3cret"])).await.0, Reply::ok());
            assert_eq!(g.command(args(&["PING"])).await.0, Reply::Simple("PONG".into()));
            assert_eq!(g.command(args(&["MULTI"])).await.0, Reply::ok());
            assert!(matches!(g.command(args(&["AUTH", "s3cret"])).await.0, Reply::Error(e) if e.contains("not allowed inside a transaction")));
            assert_eq!(g.command(args(&["DISCARD"])).await.0, Reply::ok());
            assert_eq!(g.command(args(&["RESET"])).await.0, Reply::Simple("RESET".into()));
            assert_eq!(g.command(args(&["PING"])).await.0, noauth, "RESET locks the connection again");
        });
    }

    fn parse(s: &[u8]) -> Parsed {
        parse_command(s)
    }

    #[test]
    fn arrays_and_inline_commands_parse() {
        let (args, used) = parse(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nrest").unwrap().unwrap();
        assert_eq!(args, vec![b"GET".to_vec(), b"k".to_vec()]);
        assert_eq!(used, 20);
        let (args, _) = parse(b"SET a  b\r\n").unwrap().unwrap();
        assert_eq!(args, vec![b"SET".to_vec(), b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(parse(b"*2\r\n$3\r\nGET\r\n").unwrap(), None, "incomplete");
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert!(parse(b"*x\r\n").is_err());
        assert!(parse(b"*1\r\n:3\r\n").is_err());
        assert!(parse(b"*1\r\n$3\r\nabcd\r\n").is_err(), "length mismatch");
        assert!(parse(b"*99999999999\r\n").is_err(), "too many arguments");
        assert!(parse(b"*1\r\n$999999999999\r\n").is_err(), "bulk too large");
        assert!(parse(b"*0\r\n").is_err());
        assert!(parse(b"*1\r\n$-1\r\n").is_err());
    }

    #[test]
    fn a_command_larger_than_its_bound_is_refused_before_it_is_buffered() {
        let arg = |len: usize| [format!("${len}\r\n").into_bytes(), vec![b'v'; len], b"\r\n".to_vec()].concat();
        let mut whole = b"*5\r\n".to_vec();
        for _ in 0..4 {
            whole.extend(arg(MAX_BULK_BYTES));
        }
        // The fifth argument's length line alone is enough to refuse it.
        whole.extend(b"$1\r\n");
        assert!(matches!(parse(&whole), Err(e) if e.contains("exceed")), "over {MAX_COMMAND_BYTES} bytes");
        whole.truncate(whole.len() - 4);
        whole[1] = b'4';
        assert!(matches!(parse(&whole), Ok(Some((args, _))) if args.len() == 4), "exactly at the bound");
    }

    #[test]
    fn replies_encode_as_resp() {
        let mut out = Vec::new();
        Reply::Array(vec![Reply::Int(3), Reply::Bulk(None), Reply::Bulk(Some(b"x".to_vec())), Reply::ok()])
            .encode(Proto::Resp2, &mut out);
        assert_eq!(out, b"*4\r\n:3\r\n$-1\r\n$1\r\nx\r\n+OK\r\n");
    }

    proptest! {
        #[test]
        fn the_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(Some((_, used))) = parse(&bytes) {
                prop_assert!(used <= bytes.len());
            }
        }

        #[test]
        fn resp_framing_noise_never_panics(
            parts in proptest::collection::vec(prop_oneof![
                Just(b"*".to_vec()), Just(b"$".to_vec()), Just(b"\r\n".to_vec()), Just(b"-1".to_vec()),
                Just(b"3".to_vec()), Just(b"GET".to_vec()), Just(b"99999999999999999999".to_vec()),
            ], 0..24)
        ) {
            let bytes: Vec<u8> = parts.concat();
            let _ = parse(&bytes);
        }
    }
}
