//! The Redis protocol gateway of a front-end node: RESP2 over TCP
//! (loopback by default), so `redis-cli` and `redis-benchmark` work
//! against Meridian.
//!
//! Commands: PING, ECHO, GET, SET, DEL, MGET, MSET, INCR, INCRBY, DECR,
//! DECRBY, MULTI/EXEC/DISCARD (the queued commands run as one Meridian
//! transaction), INFO, SELECT 0, QUIT, and CONFIG GET / COMMAND answered
//! with empty arrays (what redis-cli and redis-benchmark ask before they start). Every command
//! is one transaction program; an aborted one is retried, bounded, with
//! fresh write tags (it certainly did not commit). Keys map to Meridian
//! keys as the client library maps them.
//!
//! Differences from Redis, by design: a deleted key holds an empty string
//! (so `SET k ""` reads back as absent), and INCR on a non-numeric value
//! counts from 0 instead of failing. The parser bounds every length it is
//! given and answers malformed input with `-ERR Protocol error` before
//! closing; it must never panic or allocate what a length field claims
//! before checking it.

use crate::client::{bytes_value, fresh_tag, is_tombstone, key_of, tombstone};
use crate::node::Request;
use meridian_core::{Data, Op, OpResult, Outcome, Program, Value};
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

/// A RESP2 reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Reply {
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(s) => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
            Reply::Error(s) => out.extend_from_slice(format!("-{s}\r\n").as_bytes()),
            Reply::Int(i) => out.extend_from_slice(format!(":{i}\r\n").as_bytes()),
            Reply::Bulk(None) => out.extend_from_slice(b"$-1\r\n"),
            Reply::Bulk(Some(b)) => {
                out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Array(items) => {
                out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
                for item in items {
                    item.encode(out);
                }
            }
        }
    }

    fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    fn err(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }
}

/// A parsed command and the bytes it used, `None` when incomplete, or why
/// the input is malformed.
pub type Parsed = Result<Option<(Vec<Vec<u8>>, usize)>, String>;

/// Position of the first `\r\n` at or after `from`.
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?.windows(2).position(|w| w == b"\r\n").map(|i| from + i)
}

/// The decimal number on the line starting at `at` (after its type byte);
/// returns it and where the next line starts.
fn number_line(buf: &[u8], at: usize, limit: usize) -> Result<Option<(i64, usize)>, String> {
    let Some(end) = find_crlf(buf, at) else {
        return if buf.len() - at > 32 { Err("length line too long".into()) } else { Ok(None) };
    };
    let text = std::str::from_utf8(&buf[at..end]).map_err(|_| "non-ASCII length")?;
    let n: i64 = text.parse().map_err(|_| format!("invalid length `{text}`"))?;
    if n > limit as i64 {
        return Err(format!("length {n} exceeds {limit}"));
    }
    Ok(Some((n, end + 2)))
}

/// Parses one command at the start of `buf`: `Ok(Some((args, used)))`,
/// `Ok(None)` when more bytes are needed, an error for malformed input.
pub fn parse_command(buf: &[u8]) -> Parsed {
    match buf.first() {
        None => Ok(None),
        Some(b'*') => parse_array(buf),
        Some(_) => parse_inline(buf),
    }
}

fn parse_array(buf: &[u8]) -> Parsed {
    let Some((n, mut at)) = number_line(buf, 1, MAX_ARGS)? else { return Ok(None) };
    if n < 1 {
        return Err("expected a non-empty array of bulk strings".into());
    }
    let mut args = Vec::with_capacity((n as usize).min(64));
    for _ in 0..n {
        match buf.get(at) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(c) => return Err(format!("expected '$', got '{}'", char::from(*c).escape_default())),
        }
        let Some((len, start)) = number_line(buf, at + 1, MAX_BULK_BYTES)? else { return Ok(None) };
        if len < 0 {
            return Err("a command argument cannot be null".into());
        }
        let end = start + len as usize;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err("bulk string not terminated by CRLF".into());
        }
        args.push(buf[start..end].to_vec());
        at = end + 2;
    }
    Ok(Some((args, at)))
}

fn parse_inline(buf: &[u8]) -> Parsed {
    let Some(end) = buf.iter().position(|&b| b == b'\n') else {
        return if buf.len() > MAX_INLINE_BYTES { Err("inline command too long".into()) } else { Ok(None) };
    };
    let line = &buf[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let args: Vec<Vec<u8>> =
        line.split(|b| b.is_ascii_whitespace()).filter(|a| !a.is_empty()).map(<[u8]>::to_vec).collect();
    if args.len() > MAX_ARGS {
        return Err("too many arguments".into());
    }
    Ok(Some((args, end + 1)))
}

/// How a command's reply is made from its operations' results.
#[derive(Clone, Debug)]
enum Shape {
    Get,
    Ok,
    /// DEL of `n` keys: each a read then a tombstone write.
    Del(usize),
    MGet,
    Incr(i64),
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
        }
    }
}

fn int_arg(arg: &[u8]) -> Result<i64, Reply> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Reply::err("ERR value is not an integer or out of range"))
}

fn wrong_args(name: &str) -> Reply {
    Reply::err(format!("ERR wrong number of arguments for '{}' command", name.to_ascii_lowercase()))
}

/// A data command as a plan, or the error to answer.
fn plan(name: &str, args: &[Vec<u8>]) -> Result<Planned, Reply> {
    let arity_ok = match name {
        "GET" | "INCR" | "DECR" => args.len() == 1,
        "SET" | "INCRBY" | "DECRBY" => args.len() == 2,
        "DEL" | "MGET" => !args.is_empty(),
        "MSET" => !args.is_empty() && args.len() % 2 == 0,
        _ => return Err(Reply::err(format!("ERR unknown command '{}'", name.to_ascii_lowercase()))),
    };
    if !arity_ok {
        return Err(wrong_args(name));
    }
    let read = |k: &Vec<u8>| Op::Read { key: key_of(k) };
    let incr = |k: &Vec<u8>, delta: i64| Op::Increment { key: key_of(k), delta, tag: fresh_tag() };
    let planned = match name {
        "GET" => Planned { ops: vec![read(&args[0])], shape: Shape::Get },
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
        "MGET" => Planned { ops: args.iter().map(read).collect(), shape: Shape::MGet },
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
            let delta = if name == "DECRBY" { by.checked_neg().ok_or_else(|| int_arg(b"x").unwrap_err())? } else { by };
            Planned { ops: vec![incr(&args[0], delta)], shape: Shape::Incr(delta) }
        }
        _ => unreachable!("arity checked the names"),
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
            "# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nmeridian_node:{}\r\nmeridian_version:{}\r\n",
            self.node,
            env!("CARGO_PKG_VERSION")
        );
        Reply::Bulk(Some(text.into_bytes()))
    }

    async fn command(&mut self, args: Vec<Vec<u8>>) -> (Reply, Next) {
        let Some((first, rest)) = args.split_first() else { return (Reply::err("ERR empty command"), Next::Continue) };
        let name = String::from_utf8_lossy(first).to_ascii_uppercase();
        let reply = match name.as_str() {
            "QUIT" => return (Reply::ok(), Next::Close),
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
            _ if self.multi.is_some() => self.queue(&name, rest),
            "PING" if rest.is_empty() => Reply::Simple("PONG".into()),
            "PING" | "ECHO" if rest.len() == 1 => Reply::Bulk(Some(rest[0].clone())),
            "INFO" => self.info(),
            "SELECT" if rest.len() == 1 && rest[0] == b"0" => Reply::ok(),
            "SELECT" => Reply::err("ERR DB index is out of range"),
            "CONFIG" | "COMMAND" => Reply::Array(Vec::new()),
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
        let gateway = Gateway { requests: requests.clone(), node: node.clone(), multi: None };
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
                    reply.encode(&mut out);
                    if let Next::Close = next {
                        stream.write_all(&out).await?;
                        return stream.shutdown().await;
                    }
                }
                Ok(None) => break,
                Err(why) => {
                    Reply::err(format!("ERR Protocol error: {why}")).encode(&mut out);
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
            .encode(&mut out);
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
        assert!(matches!(plan("MSET", &[b"a".to_vec()]), Err(Reply::Error(_))));
        assert!(matches!(plan("NOPE", &[]), Err(Reply::Error(_))));
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
