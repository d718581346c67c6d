//! Redis's string commands as a transaction procedure: one part per key,
//! anchored at that key, running the key's commands in order against the
//! value it read ([`KeyScript`]), so conditional writes (`SET NX`,
//! `SETNX`, `GETSET`, `GETDEL`, `APPEND`, `SETRANGE`, `INCR` that must fail
//! on a non-integer) run where the key lives, in one transaction, on every
//! protocol: one-shot protocols run anchored parts, interactive ones run the
//! rounds.
//!
//! A command's reply is a function of the value its key held before the
//! transaction and of the commands before it on that key ([`fold`]): the
//! transaction's results are the values each part read, and the gateway
//! re-runs [`fold`] on them to answer — the same function the servers ran,
//! so the answers are the transaction's. Commands on different keys never
//! depend on each other, so a MULTI's commands grouped per key keep Redis's
//! order semantics.
//!
//! Values: bytes are strings; a counter written by other clients
//! ([`Data::Int`]) is the string of its decimal digits; lists and rows are
//! other types (`WRONGTYPE`); the empty row marks a deleted key (absent).

use crate::ids::Key;
use crate::procedure::{Need, ReadMap, Step};
use crate::program::{Data, Value};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Largest string a command may build (Redis's `proto-max-bulk-len`).
pub const STRING_BYTES_MAX: usize = 512 << 20;

/// When a `SET` writes.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum SetIf {
    Always,
    /// `NX`: only if the key is absent.
    Absent,
    /// `XX`: only if it exists.
    Exists,
}

/// What a `SET` answers.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum SetReply {
    /// `OK`, or nil when the condition failed (`SET`).
    Ok,
    /// 1 if it wrote, else 0 (`SETNX`).
    Flag,
    /// The old value (`SET ... GET`, `GETSET`).
    Old,
}

/// One string command on one key.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum StrOp {
    Get,
    Set {
        value: Vec<u8>,
        only: SetIf,
        reply: SetReply,
    },
    GetDel,
    Del,
    Exists,
    Type,
    Append(Vec<u8>),
    Strlen,
    GetRange {
        start: i64,
        end: i64,
    },
    SetRange {
        offset: u64,
        value: Vec<u8>,
    },
    IncrBy(i64),
    /// The increment as the client wrote it (parsed when applied).
    IncrByFloat(Vec<u8>),
}

impl StrOp {
    fn writes(&self) -> bool {
        !matches!(self, StrOp::Get | StrOp::Exists | StrOp::Type | StrOp::Strlen | StrOp::GetRange { .. })
    }
}

/// What one command answered.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum StrReply {
    Ok,
    Nil,
    Bulk(Vec<u8>),
    Int(i64),
    Status(&'static str),
    Error(String),
}

/// One key's commands, in order.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct KeyScript {
    pub key: Key,
    pub ops: Vec<StrOp>,
}

/// A transaction of string commands: one part per key — or, under a
/// condition across keys (Redis's `WATCH`, `MSETNX`), one part that reads
/// the guarded keys and every scripted key and writes only if every guarded
/// key still holds the version it was watched at (and, for `MSETNX`, every
/// scripted key is absent).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct StringTxn {
    /// Distinct keys.
    pub scripts: Vec<KeyScript>,
    /// The first tag of the transaction's block; script `i` writes tag
    /// `tag + i * TAGS_PER_PART`.
    pub tag: u64,
    /// Keys and the version (write tag, 0 for never written) each must
    /// still hold for the transaction to write anything.
    pub guard: Vec<(Key, u64)>,
    /// Write only if every scripted key is absent (Redis's `MSETNX`).
    pub only_if_absent: bool,
    /// Under a guard: whether every key lives on one shard (the client
    /// knows the layout), so the one part is anchored at its first key and
    /// one-shot protocols can run it.
    pub one_shard: bool,
}

impl StringTxn {
    /// Whether a condition spans keys: then the transaction is one part
    /// reading every key.
    fn guarded(&self) -> bool {
        !self.guard.is_empty() || self.only_if_absent
    }

    pub fn parts(&self) -> u32 {
        if self.guarded() { 1 } else { self.scripts.len() as u32 }
    }

    pub fn anchor(&self, part: u32) -> Option<Key> {
        if !self.guarded() {
            return Some(self.scripts[part as usize].key);
        }
        let first = self.guard.first().map(|(k, _)| *k).or_else(|| self.scripts.first().map(|s| s.key));
        first.filter(|_| self.one_shard)
    }

    fn need_of(s: &KeyScript) -> Need {
        Need { key: s.key, write: s.ops.iter().any(StrOp::writes) }
    }

    /// The keys a guarded transaction reads, in the order it reads them:
    /// the guarded ones, then the other scripted ones.
    pub fn read_order(&self) -> Vec<Need> {
        let mut needs: Vec<Need> = Vec::with_capacity(self.guard.len() + self.scripts.len());
        for (key, _) in &self.guard {
            let write = self.scripts.iter().any(|s| s.key == *key && Self::need_of(s).write);
            if !needs.iter().any(|n| n.key == *key) {
                needs.push(Need { key: *key, write });
            }
        }
        for s in &self.scripts {
            if !needs.iter().any(|n| n.key == s.key) {
                needs.push(Self::need_of(s));
            }
        }
        needs
    }

    /// Whether every guarded key still holds its watched version (and,
    /// for `only_if_absent`, every scripted key is absent), given the value
    /// each key read.
    pub fn guard_holds<'v>(&self, mut value_of: impl FnMut(Key) -> Option<&'v Value>) -> bool {
        self.guard.iter().all(|(key, tag)| value_of(*key).map_or(0, |v| v.tag) == *tag)
            && (!self.only_if_absent || self.scripts.iter().all(|s| current(value_of(s.key)) == Cur::Absent))
    }

    /// Part `part`'s next step: read its key (or, guarded, every key),
    /// then write what the commands left on each key they changed.
    pub fn step(&self, part: u32, reads: &ReadMap) -> Step {
        let needs = if self.guarded() { self.read_order() } else { vec![Self::need_of(&self.scripts[part as usize])] };
        if needs.iter().any(|n| !reads.contains_key(&n.key)) {
            return Step::Read(needs);
        }
        let value_of = |k: Key| reads.get(&k).and_then(Option::as_ref);
        if !self.guard_holds(value_of) {
            return Step::Done(Vec::new());
        }
        let scripts: Vec<(usize, &KeyScript)> = if self.guarded() {
            self.scripts.iter().enumerate().collect()
        } else {
            vec![(part as usize, &self.scripts[part as usize])]
        };
        let writes = scripts
            .into_iter()
            .filter_map(|(i, s)| {
                let tag = self.tag + i as u64 * crate::procedure::TAGS_PER_PART;
                fold(value_of(s.key), &s.ops).0.map(|data| (s.key, Value { tag, data }))
            })
            .collect();
        Step::Done(writes)
    }

    pub fn footprint(&self, part: u32) -> Vec<Need> {
        if self.guarded() { self.read_order() } else { vec![Self::need_of(&self.scripts[part as usize])] }
    }

    /// How many tags the transaction may write.
    pub fn tags(&self) -> u64 {
        self.scripts.len().max(1) as u64 * crate::procedure::TAGS_PER_PART
    }

    pub fn is_read_only(&self) -> bool {
        self.scripts.iter().all(|s| !s.ops.iter().any(StrOp::writes))
    }
}

/// A key's value as the string commands see it.
#[derive(Clone, PartialEq, Eq, Debug)]
enum Cur {
    Absent,
    Str(Vec<u8>),
    /// Another type: its name for `TYPE`.
    Other(&'static str),
}

fn current(v: Option<&Value>) -> Cur {
    match v.map(|v| &v.data) {
        None => Cur::Absent,
        Some(Data::Row(r)) if r.is_empty() => Cur::Absent,
        Some(Data::Bytes(b)) => Cur::Str(b.to_vec()),
        Some(Data::Int(i)) => Cur::Str(i.to_string().into_bytes()),
        Some(Data::List(_)) => Cur::Other("list"),
        Some(Data::Row(_)) => Cur::Other("hash"),
    }
}

/// The value a deleted key holds.
pub fn deleted() -> Data {
    Data::Row(Arc::new(Vec::new()))
}

fn wrongtype() -> StrReply {
    StrReply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into())
}

fn too_large() -> StrReply {
    StrReply::Error("ERR string exceeds maximum allowed size (proto-max-bulk-len)".into())
}

/// An integer as Redis accepts one: its canonical decimal form only (no
/// sign but `-`, no leading zeros or spaces), in range.
fn parse_int(bytes: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(bytes).ok()?;
    let n: i64 = s.parse().ok()?;
    (n.to_string() == s).then_some(n)
}

fn parse_float(bytes: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(bytes).ok()?;
    if s.is_empty() || s.trim() != s {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| !f.is_nan())
}

/// Redis's `INCRBYFLOAT` result: plain decimal, no exponent, no trailing
/// zeros.
fn format_float(f: f64) -> Vec<u8> {
    let mut s = format!("{f:.17}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    // Shortest form that reads back the same, when it is shorter.
    let short = f.to_string();
    if !short.contains('e') && short.len() < s.len() && short.parse::<f64>().ok() == Some(f) {
        s = short;
    }
    s.into_bytes()
}

/// GETRANGE's slice: offsets inclusive, negative ones from the end.
pub fn substring(bytes: &[u8], start: i64, end: i64) -> Vec<u8> {
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

/// Runs one key's commands in order on the value it held: what to write
/// (`None`: unchanged) and each command's reply.
pub fn fold(before: Option<&Value>, ops: &[StrOp]) -> (Option<Data>, Vec<StrReply>) {
    let mut cur = current(before);
    let mut changed = false;
    let mut replies = Vec::with_capacity(ops.len());
    for op in ops {
        let (reply, next) = apply(&cur, op);
        if let Some(next) = next {
            cur = next;
            changed = true;
        }
        replies.push(reply);
    }
    let write = changed.then(|| match cur {
        Cur::Absent => deleted(),
        Cur::Str(b) => Data::Bytes(Arc::new(b)),
        Cur::Other(_) => unreachable!("string commands only write strings or delete"),
    });
    (write, replies)
}

/// One command: its reply and the key's new value, if it changed it.
fn apply(cur: &Cur, op: &StrOp) -> (StrReply, Option<Cur>) {
    let as_bulk = |c: &Cur| match c {
        Cur::Str(b) => StrReply::Bulk(b.clone()),
        _ => StrReply::Nil,
    };
    let string_only = matches!(
        op,
        StrOp::Get
            | StrOp::GetDel
            | StrOp::Append(_)
            | StrOp::Strlen
            | StrOp::GetRange { .. }
            | StrOp::SetRange { .. }
            | StrOp::IncrBy(_)
            | StrOp::IncrByFloat(_)
            | StrOp::Set { reply: SetReply::Old, .. }
    );
    if string_only && matches!(cur, Cur::Other(_)) {
        return (wrongtype(), None);
    }
    let bytes = match cur {
        Cur::Str(b) => b.as_slice(),
        _ => &[],
    };
    match op {
        StrOp::Get => (as_bulk(cur), None),
        StrOp::Set { value, only, reply } => {
            let allowed = match only {
                SetIf::Always => true,
                SetIf::Absent => *cur == Cur::Absent,
                SetIf::Exists => *cur != Cur::Absent,
            };
            let answer = match (reply, allowed) {
                (SetReply::Ok, true) => StrReply::Ok,
                (SetReply::Ok, false) => StrReply::Nil,
                (SetReply::Flag, wrote) => StrReply::Int(i64::from(wrote)),
                (SetReply::Old, _) => as_bulk(cur),
            };
            (answer, allowed.then(|| Cur::Str(value.clone())))
        }
        StrOp::GetDel => match cur {
            Cur::Absent => (StrReply::Nil, None),
            _ => (as_bulk(cur), Some(Cur::Absent)),
        },
        StrOp::Del => match cur {
            Cur::Absent => (StrReply::Int(0), None),
            _ => (StrReply::Int(1), Some(Cur::Absent)),
        },
        StrOp::Exists => (StrReply::Int(i64::from(*cur != Cur::Absent)), None),
        StrOp::Type => (
            StrReply::Status(match cur {
                Cur::Absent => "none",
                Cur::Str(_) => "string",
                Cur::Other(t) => t,
            }),
            None,
        ),
        StrOp::Append(more) => {
            if bytes.len() + more.len() > STRING_BYTES_MAX {
                return (too_large(), None);
            }
            let joined = [bytes, more.as_slice()].concat();
            (StrReply::Int(joined.len() as i64), Some(Cur::Str(joined)))
        }
        StrOp::Strlen => (StrReply::Int(bytes.len() as i64), None),
        StrOp::GetRange { start, end } => (StrReply::Bulk(substring(bytes, *start, *end)), None),
        StrOp::SetRange { offset, value } => {
            let offset = *offset as usize;
            if value.is_empty() {
                return (StrReply::Int(bytes.len() as i64), None); // creates nothing
            }
            if offset.saturating_add(value.len()) > STRING_BYTES_MAX {
                return (too_large(), None);
            }
            let mut b = bytes.to_vec();
            if b.len() < offset + value.len() {
                b.resize(offset + value.len(), 0);
            }
            b[offset..offset + value.len()].copy_from_slice(value);
            (StrReply::Int(b.len() as i64), Some(Cur::Str(b)))
        }
        StrOp::IncrBy(delta) => {
            let Some(n) = (if *cur == Cur::Absent { Some(0) } else { parse_int(bytes) }) else {
                return (StrReply::Error("ERR value is not an integer or out of range".into()), None);
            };
            let Some(sum) = n.checked_add(*delta) else {
                return (StrReply::Error("ERR increment or decrement would overflow".into()), None);
            };
            (StrReply::Int(sum), Some(Cur::Str(sum.to_string().into_bytes())))
        }
        StrOp::IncrByFloat(by) => {
            let Some(by) = parse_float(by) else {
                return (StrReply::Error("ERR value is not a valid float".into()), None);
            };
            let Some(n) = (if *cur == Cur::Absent { Some(0.0) } else { parse_float(bytes) }) else {
                return (StrReply::Error("ERR value is not a valid float".into()), None);
            };
            let sum = n + by;
            if !sum.is_finite() {
                return (StrReply::Error("ERR increment would produce NaN or Infinity".into()), None);
            }
            let text = format_float(sum);
            (StrReply::Bulk(text.clone()), Some(Cur::Str(text)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(b: &str) -> Option<Value> {
        Some(Value { tag: 1, data: Data::Bytes(Arc::new(b.as_bytes().to_vec())) })
    }

    fn set(v: &str, only: SetIf, reply: SetReply) -> StrOp {
        StrOp::Set { value: v.as_bytes().to_vec(), only, reply }
    }

    fn bulk(v: &str) -> StrReply {
        StrReply::Bulk(v.as_bytes().to_vec())
    }

    fn written(d: Option<Data>) -> Option<Vec<u8>> {
        match d {
            Some(Data::Bytes(b)) => Some(b.to_vec()),
            Some(Data::Row(r)) if r.is_empty() => Some(b"<deleted>".to_vec()),
            _ => None,
        }
    }

    #[test]
    fn set_writes_under_its_condition_and_answers_as_redis() {
        let (w, r) = fold(None, &[set("a", SetIf::Absent, SetReply::Flag), set("b", SetIf::Absent, SetReply::Flag)]);
        assert_eq!((written(w), r), (Some(b"a".to_vec()), vec![StrReply::Int(1), StrReply::Int(0)]));
        let (w, r) = fold(None, &[set("a", SetIf::Exists, SetReply::Ok)]);
        assert_eq!((w, r), (None, vec![StrReply::Nil]), "XX on a missing key writes nothing");
        let (w, r) = fold(s("old").as_ref(), &[set("new", SetIf::Always, SetReply::Old), StrOp::Get]);
        assert_eq!((written(w), r), (Some(b"new".to_vec()), vec![bulk("old"), bulk("new")]));
    }

    #[test]
    fn a_deleted_key_is_absent_and_an_empty_string_is_not() {
        let (w, r) = fold(s("v").as_ref(), &[StrOp::Del, StrOp::Get, StrOp::Exists]);
        assert_eq!(r, vec![StrReply::Int(1), StrReply::Nil, StrReply::Int(0)]);
        let gone = Value { tag: 2, data: w.expect("a tombstone is written") };
        assert_eq!(
            fold(Some(&gone), &[StrOp::Exists, StrOp::Type]).1,
            vec![StrReply::Int(0), StrReply::Status("none")]
        );
        let (_, r) = fold(s("").as_ref(), &[StrOp::Exists, StrOp::Get, StrOp::Strlen]);
        assert_eq!(r, vec![StrReply::Int(1), bulk(""), StrReply::Int(0)]);
    }

    #[test]
    fn incr_fails_on_a_non_integer_and_on_overflow_without_writing() {
        let (w, r) = fold(s("abc").as_ref(), &[StrOp::IncrBy(1)]);
        assert_eq!((w, r), (None, vec![StrReply::Error("ERR value is not an integer or out of range".into())]));
        for not_canonical in ["+1", "007", " 1", "1 ", ""] {
            assert!(matches!(fold(s(not_canonical).as_ref(), &[StrOp::IncrBy(1)]).1[0], StrReply::Error(_)));
        }
        let (w, r) = fold(s(&i64::MAX.to_string()).as_ref(), &[StrOp::IncrBy(1)]);
        assert_eq!((w, r), (None, vec![StrReply::Error("ERR increment or decrement would overflow".into())]));
        let (w, r) = fold(None, &[StrOp::IncrBy(5), StrOp::IncrBy(-7)]);
        assert_eq!((written(w), r), (Some(b"-2".to_vec()), vec![StrReply::Int(5), StrReply::Int(-2)]));
        let counter = Value::int(3, 41);
        assert_eq!(fold(Some(&counter), &[StrOp::IncrBy(1)]).1, vec![StrReply::Int(42)], "a counter is its digits");
    }

    #[test]
    fn string_commands_on_another_type_are_wrongtype_and_del_works_on_any() {
        let list = Value { tag: 1, data: Data::List(Arc::new(vec![1])) };
        for op in [StrOp::Get, StrOp::IncrBy(1), StrOp::Append(b"x".to_vec()), StrOp::Strlen] {
            assert!(matches!(&fold(Some(&list), &[op]).1[0], StrReply::Error(e) if e.starts_with("WRONGTYPE")));
        }
        assert_eq!(fold(Some(&list), &[StrOp::Type]).1, vec![StrReply::Status("list")]);
        let (_, r) = fold(Some(&list), &[set("v", SetIf::Always, SetReply::Ok), StrOp::Get]);
        assert_eq!(r, vec![StrReply::Ok, bulk("v")], "SET replaces any type");
        assert_eq!(fold(Some(&list), &[StrOp::Del]).1, vec![StrReply::Int(1)]);
    }

    #[test]
    fn append_setrange_and_getrange_follow_redis_s_examples() {
        let (w, r) = fold(None, &[StrOp::Append(b"Hello".to_vec()), StrOp::Append(b" World".to_vec())]);
        assert_eq!((written(w), r), (Some(b"Hello World".to_vec()), vec![StrReply::Int(5), StrReply::Int(11)]));
        let (w, r) = fold(s("Hello World").as_ref(), &[StrOp::SetRange { offset: 6, value: b"Redis".to_vec() }]);
        assert_eq!((written(w), r), (Some(b"Hello Redis".to_vec()), vec![StrReply::Int(11)]));
        let (w, _) = fold(None, &[StrOp::SetRange { offset: 6, value: b"Redis".to_vec() }]);
        assert_eq!(written(w), Some(b"\0\0\0\0\0\0Redis".to_vec()), "zero-padded");
        assert_eq!(fold(None, &[StrOp::SetRange { offset: 3, value: Vec::new() }]), (None, vec![StrReply::Int(0)]));
        let text = s("This is a string");
        let r = fold(text.as_ref(), &[StrOp::GetRange { start: 0, end: 3 }, StrOp::GetRange { start: -3, end: -1 }]).1;
        assert_eq!(r, vec![bulk("This"), bulk("ing")]);
        assert_eq!(substring(b"This is a string", 10, 100), b"string");
        assert_eq!(substring(b"abc", 5, 2), b"");
    }

    #[test]
    fn incrbyfloat_answers_plain_decimals() {
        let (w, r) = fold(s("10.50").as_ref(), &[StrOp::IncrByFloat(b"0.1".to_vec())]);
        assert_eq!((written(w), r), (Some(b"10.6".to_vec()), vec![bulk("10.6")]));
        assert_eq!(fold(s("5.0e3").as_ref(), &[StrOp::IncrByFloat(b"2.0e2".to_vec())]).1, vec![bulk("5200")]);
        assert!(matches!(&fold(s("x").as_ref(), &[StrOp::IncrByFloat(b"1".to_vec())]).1[0], StrReply::Error(_)));
        assert!(matches!(&fold(None, &[StrOp::IncrByFloat(b"inf".to_vec())]).1[0], StrReply::Error(_)));
    }

    #[test]
    fn a_part_reads_its_key_then_writes_what_its_commands_left() {
        let txn = StringTxn {
            scripts: vec![
                KeyScript { key: Key(1), ops: vec![StrOp::IncrBy(2)] },
                KeyScript { key: Key(2), ops: vec![StrOp::Get] },
            ],
            tag: 100,
            guard: Vec::new(),
            only_if_absent: false,
            one_shard: false,
        };
        assert_eq!((txn.parts(), txn.anchor(1)), (2, Some(Key(2))));
        assert_eq!(txn.step(0, &ReadMap::new()), Step::Read(vec![Need::write(Key(1))]));
        assert_eq!(txn.footprint(1), vec![Need::read(Key(2))]);
        let mut reads = ReadMap::new();
        reads.insert(Key(1), s("40"));
        let Step::Done(w) = txn.step(0, &reads) else { panic!("done after its read") };
        assert_eq!(w, vec![(Key(1), Value { tag: 100, data: Data::Bytes(Arc::new(b"42".to_vec())) })]);
        reads.insert(Key(2), None);
        assert_eq!(txn.step(1, &reads), Step::Done(Vec::new()), "a read-only part writes nothing");
        assert!(!txn.is_read_only());
    }

    #[test]
    fn a_guarded_transaction_writes_only_if_every_watched_key_kept_its_version() {
        let txn = StringTxn {
            scripts: vec![
                KeyScript { key: Key(1), ops: vec![StrOp::IncrBy(1)] },
                KeyScript {
                    key: Key(3),
                    ops: vec![StrOp::Set { value: b"x".to_vec(), only: SetIf::Always, reply: SetReply::Ok }],
                },
            ],
            tag: 500,
            guard: vec![(Key(2), 7), (Key(1), 9)],
            only_if_absent: false,
            one_shard: false,
        };
        assert_eq!((txn.parts(), txn.anchor(0)), (1, None), "one part, unanchored across shards");
        let order = txn.read_order();
        assert_eq!(order, vec![Need::read(Key(2)), Need::write(Key(1)), Need::write(Key(3))]);
        assert_eq!(txn.step(0, &ReadMap::new()), Step::Read(order));
        let version = |tag: u64, v: &str| Some(Value { tag, data: Data::Bytes(Arc::new(v.as_bytes().to_vec())) });
        let mut reads = ReadMap::new();
        reads.insert(Key(2), version(7, "w"));
        reads.insert(Key(1), version(9, "1"));
        reads.insert(Key(3), None);
        let Step::Done(w) = txn.step(0, &reads) else { panic!("done") };
        assert_eq!(w.iter().map(|(k, v)| (*k, v.tag)).collect::<Vec<_>>(), vec![(Key(1), 500), (Key(3), 756)]);
        reads.insert(Key(2), version(8, "changed"));
        assert_eq!(txn.step(0, &reads), Step::Done(Vec::new()), "a watched key changed: nothing is written");
        let anchored = StringTxn { one_shard: true, ..txn };
        assert_eq!(anchored.anchor(0), Some(Key(2)));
    }

    #[test]
    fn msetnx_writes_every_key_or_none_of_them() {
        let set = |v: &str| StrOp::Set { value: v.as_bytes().to_vec(), only: SetIf::Always, reply: SetReply::Ok };
        let txn = StringTxn {
            scripts: vec![
                KeyScript { key: Key(1), ops: vec![set("a")] },
                KeyScript { key: Key(2), ops: vec![set("b")] },
            ],
            tag: 10,
            guard: Vec::new(),
            only_if_absent: true,
            one_shard: false,
        };
        assert_eq!((txn.parts(), txn.anchor(0)), (1, None));
        let mut reads = ReadMap::new();
        reads.insert(Key(1), None);
        reads.insert(Key(2), None);
        let Step::Done(w) = txn.step(0, &reads) else { panic!("done") };
        assert_eq!(w.len(), 2, "both absent: both written");
        reads.insert(Key(2), s("taken"));
        assert_eq!(txn.step(0, &reads), Step::Done(Vec::new()), "one exists: nothing written");
        let deleted_key = Some(Value { tag: 3, data: deleted() });
        reads.insert(Key(2), deleted_key);
        assert!(matches!(txn.step(0, &reads), Step::Done(w) if w.len() == 2), "a deleted key is absent");
    }
}
