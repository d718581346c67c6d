//! RESP framing: the parser (RESP2 arrays of bulk strings and inline
//! commands, every length bounded before anything is allocated) and
//! replies, encoded in RESP2 or RESP3 as the connection negotiated with
//! `HELLO`.

use super::{MAX_ARGS, MAX_BULK_BYTES, MAX_COMMAND_BYTES, MAX_INLINE_BYTES};

/// The protocol a connection speaks: RESP2 until `HELLO 3`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Proto {
    Resp2,
    Resp3,
}

impl Proto {
    pub fn number(self) -> i64 {
        match self {
            Proto::Resp2 => 2,
            Proto::Resp3 => 3,
        }
    }
}

/// A reply. RESP3's types are written as their RESP2 equivalents to a
/// RESP2 connection, as Redis does: `Null` as a null bulk string, a null
/// array as `*-1`, a map as a flat array of keys and values.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    /// `None`: the null reply (a missing key).
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
    /// The null array of RESP2 (an EXEC whose WATCH failed); null in RESP3.
    NullArray,
    Map(Vec<(Reply, Reply)>),
}

impl Reply {
    pub fn encode(&self, proto: Proto, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(s) => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
            Reply::Error(s) => out.extend_from_slice(format!("-{s}\r\n").as_bytes()),
            Reply::Int(i) => out.extend_from_slice(format!(":{i}\r\n").as_bytes()),
            Reply::Bulk(None) | Reply::NullArray if proto == Proto::Resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Bulk(None) => out.extend_from_slice(b"$-1\r\n"),
            Reply::NullArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Bulk(Some(b)) => {
                out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Array(items) => {
                out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Map(pairs) => {
                let header = match proto {
                    Proto::Resp2 => format!("*{}\r\n", 2 * pairs.len()),
                    Proto::Resp3 => format!("%{}\r\n", pairs.len()),
                };
                out.extend_from_slice(header.as_bytes());
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
        }
    }

    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    pub fn err(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }

    pub fn bulk(bytes: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(Some(bytes.into()))
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
    let mut total: usize = 0;
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
        total += len as usize;
        if total > MAX_COMMAND_BYTES {
            return Err(format!("a command's arguments exceed {MAX_COMMAND_BYTES} bytes"));
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
