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
//! - here: data commands (GET, SET, DEL, EXISTS, MGET, MSET, INCR, INCRBY,
//!   DECR, DECRBY, STRLEN, GETRANGE, SUBSTR, TYPE) as transaction
//!   programs, MULTI/EXEC/DISCARD (the queued commands run as one Meridian
//!   transaction), INFO and QUIT. An aborted transaction is retried,
//!   bounded, with fresh write tags (it certainly did not commit). Keys map
//!   to Meridian keys as the client library maps them.
//!
//! Differences from Redis, by design for now (docs/runtime.md has the
//! table): a deleted key holds an empty string (so `SET k ""` reads back as
//! absent), and INCR on a non-numeric value counts from 0 instead of
//! failing. The parser bounds every length it is given and answers
//! malformed input with `-ERR Protocol error` before closing; it must never
//! panic or allocate what a length field claims before checking it.

mod connection;
pub mod resp;
mod table;

use crate::client::{bytes_value, fresh_tag, is_tombstone, key_of, tombstone};
use crate::node::Request;
use connection::Connection;
use meridian_core::{Data, Op, OpResult, Outcome, Program, Value};
pub use resp::{Parsed, Proto, Reply, parse_command};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// Most arguments one command may have.
pub const MAX_ARGS: usize = 65_536;
/// Largest bulk string accepted.
pub const MAX_BULK_BYTES: usize = 16 << 20;
/// Longest inline command line.
pub const MAX_INLINE_BYTES: usize = 64 << 10;
/// Commands one MULTI may queue.
pub const MAX_QUEUED: usize = 4096;
/// Attempts of an aborted command before it fails.
pub const MAX_ATTEMPTS: u32 = 32;

/// How a command's reply is made from its operations' results.
#[derive(Clone, Debug)]
enum Shape {
    Get,
    Ok,
    /// DEL of `n` keys: each a read then a tombstone write.
    Del(usize),
    MGet,
    Incr(i64),
    /// EXISTS of `n` keys (each counted as often as it is named).
    Exists(usize),
    Strlen,
    /// GETRANGE's inclusive offsets, negative from the end.
    Range(i64, i64),
    Type,
}

/// A command as operations of a program.
#[derive(Clone, Debug)]
struct Planned {
    ops: Vec<Op>,
    shape: Shape,
}

/// Bytes a value reads as (`None`: absent).
fn value_bytes(v: Option<&Value>) -> Option<Vec<u8>> {
    let v = v.filter(|v| !is_tombstone(v))?;
    Some(match &v.data {
        Data::Bytes(b) => b.to_vec(),
        Data::Int(i) => i.to_string().into_bytes(),
        Data::List(l) => format!("{:?}", l.as_slice()).into_bytes(),
        Data::Row(r) => format!("{:?}", r.as_slice()).into_bytes(),
    })
}

fn first_bytes(results: &[OpResult]) -> Option<Vec<u8>> {
    value_bytes(results.first().and_then(Option::as_ref))
}

/// GETRANGE's slice: offsets inclusive, negative ones from the end,
/// clamped to the string; empty when the range is.
fn substring(bytes: &[u8], start: i64, end: i64) -> Vec<u8> {
    let len = bytes.len() as i64;
    if len == 0 {
        return Vec::new();
    }
    let from_end = |i: i64| if i < 0 { (len + i).max(0) } else { i };
    let (start, end) = (from_end(start), from_end(end).min(len - 1));
    if start > end || start >= len {
        return Vec::new();
    }
    bytes[start as usize..=end as usize].to_vec()
}

impl Planned {
    fn reply(&self, results: &[OpResult]) -> Reply {
        match self.shape {
            Shape::Get => Reply::Bulk(value_bytes(results.first().and_then(Option::as_ref))),
            Shape::Ok => Reply::ok(),
            Shape::Del(n) => {
                let existed = (0..n).filter(|i| value_bytes(results.get(2 * i).and_then(Option::as_ref)).is_some());
                Reply::Int(existed.count() as i64)
            }
            Shape::MGet => Reply::Array(results.iter().map(|r| Reply::Bulk(value_bytes(r.as_ref()))).collect()),
            Shape::Incr(delta) => {
                Reply::Int(Value::as_int(results.first().and_then(Option::as_ref)).wrapping_add(delta))
            }
            Shape::Exists(n) => Reply::Int(
                (0..n).filter(|i| value_bytes(results.get(*i).and_then(Option::as_ref)).is_some()).count() as i64,
            ),
            Shape::Strlen => Reply::Int(first_bytes(results).map_or(0, |b| b.len()) as i64),
            Shape::Range(start, end) => Reply::bulk(substring(&first_bytes(results).unwrap_or_default(), start, end)),
            Shape::Type => Reply::Simple(if first_bytes(results).is_some() { "string" } else { "none" }.into()),
        }
    }
}

fn not_an_integer() -> Reply {
    Reply::err("ERR value is not an integer or out of range")
}

fn int_arg(arg: &[u8]) -> Result<i64, Reply> {
    std::str::from_utf8(arg).ok().and_then(|s| s.parse().ok()).ok_or_else(not_an_integer)
}

/// A data command (its name upper-case, its arity checked) as a plan,
/// or the error to answer.
fn plan(name: &str, args: &[Vec<u8>]) -> Result<Planned, Reply> {
    let read = |k: &Vec<u8>| Op::Read { key: key_of(k) };
    let incr = |k: &Vec<u8>, delta: i64| Op::Increment { key: key_of(k), delta, tag: fresh_tag() };
    let planned = match name {
        "GET" => Planned { ops: vec![read(&args[0])], shape: Shape::Get },
        "SET" if args.len() > 2 => {
            return Err(Reply::err("ERR SET options (NX, XX, GET, EX, PX, KEEPTTL) are not supported yet"));
        }
        "SET" => Planned {
            ops: vec![Op::Write { key: key_of(&args[0]), value: bytes_value(fresh_tag(), &args[1]) }],
            shape: Shape::Ok,
        },
        "DEL" => Planned {
            ops: args
                .iter()
                .flat_map(|k| [read(k), Op::Write { key: key_of(k), value: tombstone(fresh_tag()) }])
                .collect(),
            shape: Shape::Del(args.len()),
        },
        "EXISTS" => Planned { ops: args.iter().map(read).collect(), shape: Shape::Exists(args.len()) },
        "MGET" => Planned { ops: args.iter().map(read).collect(), shape: Shape::MGet },
        "MSET" if args.len() % 2 != 0 => return Err(table::wrong_args("mset")),
        "MSET" => Planned {
            ops: args
                .chunks(2)
                .map(|kv| Op::Write { key: key_of(&kv[0]), value: bytes_value(fresh_tag(), &kv[1]) })
                .collect(),
            shape: Shape::Ok,
        },
        "INCR" => Planned { ops: vec![incr(&args[0], 1)], shape: Shape::Incr(1) },
        "DECR" => Planned { ops: vec![incr(&args[0], -1)], shape: Shape::Incr(-1) },
        "INCRBY" | "DECRBY" => {
            let by = int_arg(&args[1])?;
            let delta = if name == "DECRBY" { by.checked_neg().ok_or_else(not_an_integer)? } else { by };
            Planned { ops: vec![incr(&args[0], delta)], shape: Shape::Incr(delta) }
        }
        "STRLEN" => Planned { ops: vec![read(&args[0])], shape: Shape::Strlen },
        "GETRANGE" | "SUBSTR" => {
            let (start, end) = (int_arg(&args[1])?, int_arg(&args[2])?);
            Planned { ops: vec![read(&args[0])], shape: Shape::Range(start, end) }
        }
        "TYPE" => Planned { ops: vec![read(&args[0])], shape: Shape::Type },
        // A connection command inside MULTI (Redis would run it at EXEC).
        _ => return Err(Reply::err(format!("ERR {name} cannot be queued in MULTI by Meridian's gateway"))),
    };
    Ok(planned)
}

/// The same operations with fresh write tags, for a retry.
fn retag(ops: &[Op]) -> Vec<Op> {
    ops.iter()
        .map(|op| match op {
            Op::Write { key, value } => {
                Op::Write { key: *key, value: Value { tag: fresh_tag(), data: value.data.clone() } }
            }
            Op::Increment { key, delta, .. } => Op::Increment { key: *key, delta: *delta, tag: fresh_tag() },
            other => other.clone(),
        })
        .collect()
}

/// One connection's state.
struct Gateway {
    requests: mpsc::Sender<Request>,
    node: String,
    conn: Connection,
    /// Commands queued since MULTI, and whether one was refused.
    multi: Option<(Vec<Planned>, bool)>,
}

/// What the connection does after a command.
enum Next {
    Continue,
    Close,
}

impl Gateway {
    /// Runs a program, retrying aborts; the results or the error to answer.
    async fn run(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, Reply> {
        let mut ops = ops;
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                ops = retag(&ops);
                tokio::time::sleep(std::time::Duration::from_millis(u64::from(attempt.min(10)))).await;
            }
            let (reply, outcome) = oneshot::channel();
            let request = Request { program: Program::new(ops.clone()), reply };
            if self.requests.send(request).await.is_err() {
                return Err(Reply::err("ERR the node is shutting down"));
            }
            match outcome.await {
                Ok(Outcome::Committed { results }) => return Ok(results),
                Ok(Outcome::Aborted { .. }) => continue,
                Ok(Outcome::Unknown) => return Err(Reply::err("ERR transaction outcome unknown")),
                Err(_) => return Err(Reply::err("ERR the node is shutting down")),
            }
        }
        Err(Reply::err(format!("ERR transaction aborted {MAX_ATTEMPTS} times")))
    }

    async fn execute(&self, planned: Planned) -> Reply {
        match self.run(planned.ops.clone()).await {
            Ok(results) => planned.reply(&results),
            Err(e) => e,
        }
    }

    async fn exec(&mut self) -> Reply {
        let Some((queued, refused)) = self.multi.take() else { return Reply::err("ERR EXEC without MULTI") };
        if refused {
            return Reply::err("EXECABORT Transaction discarded because of previous errors.");
        }
        if queued.is_empty() {
            return Reply::Array(Vec::new());
        }
        let ops: Vec<Op> = queued.iter().flat_map(|p| p.ops.iter().cloned()).collect();
        match self.run(ops).await {
            Ok(results) => {
                let mut at = 0;
                let replies = queued
                    .iter()
                    .map(|p| {
                        let r = p.reply(results.get(at..at + p.ops.len()).unwrap_or(&[]));
                        at += p.ops.len();
                        r
                    })
                    .collect();
                Reply::Array(replies)
            }
            Err(e) => e,
        }
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
                self.conn.reset();
                Reply::Simple("RESET".into())
            }
            "MULTI" if self.multi.is_some() => Reply::err("ERR MULTI calls can not be nested"),
            "MULTI" => {
                self.multi = Some((Vec::new(), false));
                Reply::ok()
            }
            "EXEC" => self.exec().await,
            "DISCARD" => match self.multi.take() {
                Some(_) => Reply::ok(),
                None => Reply::err("ERR DISCARD without MULTI"),
            },
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

/// Accepts Redis clients and serves each connection.
pub async fn serve(listener: TcpListener, requests: mpsc::Sender<Request>, node: String) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        let conn = Connection::new(Some(peer));
        let gateway = Gateway { requests: requests.clone(), node: node.clone(), conn, multi: None };
        tokio::spawn(async move {
            if let Err(e) = connection(stream, gateway).await {
                tracing::debug!(%peer, error = %e, "redis connection closed");
            }
        });
    }
}

async fn connection(mut stream: TcpStream, mut gateway: Gateway) -> std::io::Result<()> {
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
    fn replies_encode_as_resp() {
        let mut out = Vec::new();
        Reply::Array(vec![Reply::Int(3), Reply::Bulk(None), Reply::Bulk(Some(b"x".to_vec())), Reply::ok()])
            .encode(Proto::Resp2, &mut out);
        assert_eq!(out, b"*4\r\n:3\r\n$-1\r\n$1\r\nx\r\n+OK\r\n");
    }

    #[test]
    fn commands_become_programs_with_replies() {
        let p = plan("DEL", &[b"a".to_vec(), b"b".to_vec()]).unwrap();
        assert_eq!(p.ops.len(), 4);
        let present = Some(bytes_value(1, b"v"));
        assert_eq!(p.reply(&[present, None, None, None]), Reply::Int(1));
        let p = plan("INCRBY", &[b"a".to_vec(), b"5".to_vec()]).unwrap();
        assert_eq!(p.reply(&[Some(Value::int(1, 2))]), Reply::Int(7));
        assert!(matches!(plan("INCRBY", &[b"a".to_vec(), b"x".to_vec()]), Err(Reply::Error(_))));
        assert!(matches!(plan("MSET", &[b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]), Err(Reply::Error(_))));
        assert!(matches!(plan("PING", &[]), Err(Reply::Error(_))), "not a data command");
        let p = plan("EXISTS", &[b"a".to_vec(), b"a".to_vec(), b"b".to_vec()]).unwrap();
        let a = Some(bytes_value(1, b"v"));
        assert_eq!(p.reply(&[a.clone(), a.clone(), None]), Reply::Int(2), "counted as often as named");
        let p = plan("STRLEN", &[b"a".to_vec()]).unwrap();
        assert_eq!(p.reply(&[Some(bytes_value(1, b"hello"))]), Reply::Int(5));
        assert_eq!(p.reply(&[None]), Reply::Int(0));
        let p = plan("TYPE", &[b"a".to_vec()]).unwrap();
        assert_eq!((p.reply(&[a]), p.reply(&[None])), (Reply::Simple("string".into()), Reply::Simple("none".into())));
    }

    #[test]
    fn getrange_takes_inclusive_offsets_negative_from_the_end() {
        // Redis's documented examples on "This is a string".
        let s = b"This is a string";
        assert_eq!(substring(s, 0, 3), b"This");
        assert_eq!(substring(s, -3, -1), b"ing");
        assert_eq!(substring(s, 0, -1), s.to_vec());
        assert_eq!(substring(s, 10, 100), b"string");
        assert_eq!(substring(s, 5, 2), b"");
        assert_eq!(substring(s, 100, 200), b"");
        assert_eq!(substring(b"", 0, -1), b"");
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
