//! Data commands as string operations on keys (`meridian_core::strings`):
//! each command becomes one or more `(key, StrOp)`, a command or a MULTI's
//! queue becomes one transaction with one part per key, and each command's
//! reply is assembled from its operations' replies, which the gateway
//! recomputes from the values the transaction read — the same function
//! the servers ran.

use super::resp::Reply;
use meridian_core::strings::{SetIf, SetReply, StrOp, StrReply, StringTxn};
use meridian_core::{Key, OpResult};

/// How a command's reply is made from its operations' replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// The single operation's reply.
    One,
    /// Every operation's reply (MGET).
    Array,
    /// The sum of their integers (DEL, EXISTS).
    Sum,
    /// `OK` (MSET).
    Ok,
}

/// A data command: its operations, in order, and its reply's shape.
#[derive(Clone, Debug)]
pub struct Planned {
    ops: Vec<(Vec<u8>, StrOp)>,
    shape: Shape,
}

impl Planned {
    fn one(key: &[u8], op: StrOp) -> Planned {
        Planned { ops: vec![(key.to_vec(), op)], shape: Shape::One }
    }

    fn each(keys: &[Vec<u8>], op: impl Fn() -> StrOp, shape: Shape) -> Planned {
        Planned { ops: keys.iter().map(|k| (k.clone(), op())).collect(), shape }
    }
}

fn not_an_integer() -> Reply {
    Reply::err("ERR value is not an integer or out of range")
}

fn int_arg(arg: &[u8]) -> Result<i64, Reply> {
    std::str::from_utf8(arg).ok().and_then(|s| s.parse().ok()).ok_or_else(not_an_integer)
}

/// SET's options: `NX | XX`, `GET`; expiry is refused (keys never expire).
fn set_options(options: &[Vec<u8>]) -> Result<(SetIf, SetReply), Reply> {
    let (mut only, mut reply) = (SetIf::Always, SetReply::Ok);
    for o in options {
        match String::from_utf8_lossy(o).to_ascii_uppercase().as_str() {
            "NX" if only != SetIf::Exists => only = SetIf::Absent,
            "XX" if only != SetIf::Absent => only = SetIf::Exists,
            "GET" => reply = SetReply::Old,
            "EX" | "PX" | "EXAT" | "PXAT" | "KEEPTTL" => {
                return Err(Reply::err(
                    "ERR expiry (EX, PX, EXAT, PXAT, KEEPTTL) is not supported: keys do not expire",
                ));
            }
            _ => return Err(Reply::err("ERR syntax error")),
        }
    }
    Ok((only, reply))
}

/// A data command (its name upper-case, its arity checked by the table)
/// as a plan, or the error to answer.
pub fn plan(name: &str, args: &[Vec<u8>]) -> Result<Planned, Reply> {
    let value = |i: usize| args[i].clone();
    let planned = match name {
        "GET" => Planned::one(&args[0], StrOp::Get),
        "SET" => {
            let (only, reply) = set_options(&args[2..])?;
            Planned::one(&args[0], StrOp::Set { value: value(1), only, reply })
        }
        "SETNX" => Planned::one(&args[0], StrOp::Set { value: value(1), only: SetIf::Absent, reply: SetReply::Flag }),
        "GETSET" => Planned::one(&args[0], StrOp::Set { value: value(1), only: SetIf::Always, reply: SetReply::Old }),
        "GETDEL" => Planned::one(&args[0], StrOp::GetDel),
        "DEL" => Planned::each(args, || StrOp::Del, Shape::Sum),
        "EXISTS" => Planned::each(args, || StrOp::Exists, Shape::Sum),
        "MGET" => Planned::each(args, || StrOp::Get, Shape::Array),
        "MSET" | "MSETNX" if args.len() % 2 != 0 => {
            return Err(super::table::wrong_args(&name.to_ascii_lowercase()));
        }
        "MSET" => Planned {
            ops: args
                .chunks(2)
                .map(|kv| {
                    (kv[0].clone(), StrOp::Set { value: kv[1].clone(), only: SetIf::Always, reply: SetReply::Ok })
                })
                .collect(),
            shape: Shape::Ok,
        },
        // The group is numbered when the command joins its transaction.
        "MSETNX" => Planned {
            ops: args
                .chunks(2)
                .map(|kv| (kv[0].clone(), StrOp::SetIfAllAbsent { value: kv[1].clone(), group: 0 }))
                .collect(),
            shape: Shape::One,
        },
        "APPEND" => Planned::one(&args[0], StrOp::Append(value(1))),
        "STRLEN" => Planned::one(&args[0], StrOp::Strlen),
        "GETRANGE" | "SUBSTR" => {
            let (start, end) = (int_arg(&args[1])?, int_arg(&args[2])?);
            Planned::one(&args[0], StrOp::GetRange { start, end })
        }
        "SETRANGE" => {
            let offset = int_arg(&args[1])?;
            let offset = u64::try_from(offset).map_err(|_| Reply::err("ERR offset is out of range"))?;
            Planned::one(&args[0], StrOp::SetRange { offset, value: value(2) })
        }
        "INCR" => Planned::one(&args[0], StrOp::IncrBy(1)),
        "DECR" => Planned::one(&args[0], StrOp::IncrBy(-1)),
        "INCRBY" => Planned::one(&args[0], StrOp::IncrBy(int_arg(&args[1])?)),
        "DECRBY" => {
            let by = int_arg(&args[1])?.checked_neg().ok_or_else(|| Reply::err("ERR decrement would overflow"))?;
            Planned::one(&args[0], StrOp::IncrBy(by))
        }
        "INCRBYFLOAT" => Planned::one(&args[0], StrOp::IncrByFloat(value(1))),
        "TYPE" => Planned::one(&args[0], StrOp::Type),
        // A connection command inside MULTI (Redis would run it at EXEC).
        _ => return Err(Reply::err(format!("ERR {name} cannot be queued in MULTI by Meridian's gateway"))),
    };
    Ok(planned)
}

/// Commands run as one transaction: its per-key scripts and where each
/// command's operations went.
#[derive(Debug)]
pub struct Batch {
    pub txn: StringTxn,
    /// Per command: its shape and each operation's (script, position).
    slots: Vec<(Shape, Vec<(usize, usize)>)>,
}

impl Batch {
    /// `commands` in order; operations on one key keep their order.
    pub fn new(commands: &[Planned], tag: u64) -> Batch {
        let mut txn = StringTxn::new(tag);
        let slots = commands.iter().map(|c| (c.shape, Self::push(&mut txn, c))).collect();
        Batch { txn, slots }
    }

    /// Adds one command's operations; an `MSETNX` gets the next group.
    fn push(txn: &mut StringTxn, c: &Planned) -> Vec<(usize, usize)> {
        let group = txn.groups;
        let mut grouped = false;
        let at = c
            .ops
            .iter()
            .map(|(name, op)| match op {
                StrOp::SetIfAllAbsent { value, .. } => {
                    grouped = true;
                    txn.push(name, StrOp::SetIfAllAbsent { value: value.clone(), group })
                }
                _ => txn.push(name, op.clone()),
            })
            .collect();
        txn.groups += u32::from(grouped);
        at
    }

    /// Makes the transaction write only if every `(name, version)` of
    /// `watched` still holds (Redis's WATCH).
    pub fn guard(&mut self, watched: &[(Vec<u8>, u64)]) {
        self.txn.guard = watched.to_vec();
    }

    /// Every key the transaction touches.
    pub fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.txn.guard.iter().map(|(n, _)| Key::named(n)).chain(self.txn.scripts.iter().map(|s| s.key))
    }

    /// Each command's reply from the values the transaction read (one per
    /// part in part order; a guarded one's in its read order), or `None`
    /// when a watched key had changed and nothing ran.
    pub fn replies(&self, results: &[OpResult]) -> Option<Vec<Reply>> {
        let per_script = self.txn.replies(results)?;
        let replies = self
            .slots
            .iter()
            .map(|(shape, at)| {
                let mut replies = at.iter().map(|(s, i)| reply(&per_script[*s][*i]));
                match shape {
                    Shape::One => replies.next().unwrap_or(Reply::Bulk(None)),
                    Shape::Array => Reply::Array(replies.collect()),
                    Shape::Sum => Reply::Int(replies.map(|r| if let Reply::Int(n) = r { n } else { 0 }).sum()),
                    Shape::Ok => Reply::ok(),
                }
            })
            .collect();
        Some(replies)
    }
}

fn reply(r: &StrReply) -> Reply {
    match r {
        StrReply::Ok => Reply::ok(),
        StrReply::Nil => Reply::Bulk(None),
        StrReply::Bulk(b) => Reply::bulk(b.clone()),
        StrReply::Int(n) => Reply::Int(*n),
        StrReply::Status(s) => Reply::Simple((*s).into()),
        StrReply::Error(e) => Reply::err(e.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::strings::with_entry;
    use meridian_core::{Data, Value};
    use std::sync::Arc;

    /// What a key holds when `name` alone is there, set to `text` by `tag`.
    fn held(name: &str, tag: u64, text: &str) -> Option<Value> {
        let data = with_entry(None, name.as_bytes(), tag, Data::Bytes(Arc::new(text.as_bytes().to_vec())));
        Some(Value { tag, data })
    }

    fn a(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_command_s_operations_group_by_key_and_replies_keep_command_order() {
        let cmds = vec![
            plan("SET", &a(&["x", "1"])).unwrap(),
            plan("INCRBY", &a(&["x", "4"])).unwrap(),
            plan("MGET", &a(&["x", "y"])).unwrap(),
            plan("DEL", &a(&["y", "z"])).unwrap(),
            plan("EXISTS", &a(&["x", "x", "z"])).unwrap(),
        ];
        let batch = Batch::new(&cmds, 7);
        assert_eq!(batch.txn.scripts.len(), 3, "x, y and z once each");
        let results = vec![None, held("y", 1, "old"), None];
        assert_eq!(
            batch.replies(&results).expect("no guard"),
            vec![
                Reply::ok(),
                Reply::Int(5),
                Reply::Array(vec![Reply::bulk("5"), Reply::bulk("old")]),
                Reply::Int(1),
                Reply::Int(2),
            ]
        );
    }

    #[test]
    fn a_watched_key_that_changed_makes_the_batch_answer_nothing() {
        let cmds = vec![plan("INCR", &a(&["n"])).unwrap()];
        let mut batch = Batch::new(&cmds, 7);
        batch.guard(&[(b"w".to_vec(), 5)]);
        // Read order: the watched key, then n.
        let same = vec![held("w", 5, "x"), held("n", 2, "41")];
        assert_eq!(batch.replies(&same), Some(vec![Reply::Int(42)]));
        let changed = vec![held("w", 6, "y"), held("n", 2, "41")];
        assert_eq!(batch.replies(&changed), None);
    }

    #[test]
    fn set_options_and_argument_errors_are_redis_s() {
        assert!(plan("SET", &a(&["k", "v", "NX", "GET"])).is_ok());
        assert_eq!(plan("SET", &a(&["k", "v", "NX", "XX"])).unwrap_err(), Reply::err("ERR syntax error"));
        assert!(matches!(plan("SET", &a(&["k", "v", "EX", "10"])), Err(Reply::Error(e)) if e.contains("expire")));
        assert_eq!(plan("INCRBY", &a(&["k", "x"])).unwrap_err(), not_an_integer());
        assert_eq!(plan("SETRANGE", &a(&["k", "-1", "v"])).unwrap_err(), Reply::err("ERR offset is out of range"));
        assert!(plan("MSET", &a(&["a", "1", "b"])).is_err());
        assert!(plan("PING", &[]).is_err(), "not a data command");
    }
}
