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
//! Keys are byte strings. A name lives at [`Key::named`] (its hash, for
//! placement only): the value there is [`Data::Named`], one entry per name
//! that hashes to the key, so two names never share a value; scripts of
//! names that share a key run as one part. Entries: bytes are strings; a
//! counter ([`Data::Int`]) is the string of its decimal digits; lists and
//! rows are other types (`WRONGTYPE`); a deleted name has no entry.

use crate::ids::Key;
use crate::procedure::{Need, ReadMap, Step};
use crate::program::{Data, Named, OpResult, Value};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Largest string a command may build: Redis allows 512 MiB
/// (`proto-max-bulk-len`); Meridian 16 MiB, the gateway's largest
/// argument, so a value always fits one argument, one client frame and,
/// with [`TXN_GROWTH_BYTES_MAX`], one write-ahead log record.
pub const STRING_BYTES_MAX: usize = 16 << 20;

/// What `APPEND` and `SETRANGE` may build in one transaction, shared by its
/// keys: each of `n` scripts may grow its string to `1/n` of this (at most
/// [`STRING_BYTES_MAX`]). Deterministic, so every replica and the gateway
/// agree on which command failed.
pub const TXN_GROWTH_BYTES_MAX: usize = 64 << 20;

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
    /// One key of an `MSETNX`: set only if every key of its group — the
    /// command's keys — was absent just before the command; answers 1 or 0.
    SetIfAllAbsent {
        value: Vec<u8>,
        group: u32,
    },
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

/// One named key's commands, in order. `key` is where the name lives
/// ([`Key::named`]); distinct names may share it, and then the scripts of
/// that key are adjacent in their transaction and run as one part on the
/// key's [`Data::Named`] value, each on its own entry.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct KeyScript {
    pub key: Key,
    pub name: Vec<u8>,
    pub ops: Vec<StrOp>,
}

impl KeyScript {
    pub fn new(name: Vec<u8>, ops: Vec<StrOp>) -> KeyScript {
        KeyScript { key: Key::named(&name), name, ops }
    }
}

/// A transaction of string commands: one part per key — or, under a
/// condition across keys (Redis's `WATCH`, `MSETNX`), one part that reads
/// the guarded keys and every scripted key and writes only if every guarded
/// name still holds the version it was watched at (and, for `MSETNX`,
/// every scripted name is absent).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct StringTxn {
    /// Distinct names; scripts of one key adjacent ([`StringTxn::script`]
    /// keeps it so).
    pub scripts: Vec<KeyScript>,
    /// The first tag of the transaction's block; script `i` writes tag
    /// `tag + i * TAGS_PER_PART` (its entry's, and its key's when it is the
    /// first script of the key).
    pub tag: u64,
    /// Names and the version (the tag of the write that last changed the
    /// name, 0 for absent) each must still hold for the transaction to
    /// write anything.
    pub guard: Vec<(Vec<u8>, u64)>,
    /// How many `MSETNX` commands ([`StrOp::SetIfAllAbsent`] groups
    /// `0..groups`, in command order) the transaction holds: each depends
    /// on several keys, so the transaction reads them all in one part.
    pub groups: u32,
    /// Under a guard: whether every key lives on one shard (the client
    /// knows the layout), so the one part is anchored at its first key and
    /// one-shot protocols can run it.
    pub one_shard: bool,
}

impl StringTxn {
    pub fn new(tag: u64) -> StringTxn {
        StringTxn { scripts: Vec::new(), tag, guard: Vec::new(), groups: 0, one_shard: false }
    }

    /// The index of `name`'s script, added (next to its key's other names)
    /// if it has none yet.
    pub fn script(&mut self, name: &[u8]) -> usize {
        if let Some(i) = self.scripts.iter().position(|s| s.name == name) {
            return i;
        }
        let fresh = KeyScript::new(name.to_vec(), Vec::new());
        let at = match self.scripts.iter().rposition(|s| s.key == fresh.key) {
            Some(last) => last + 1,
            None => self.scripts.len(),
        };
        self.scripts.insert(at, fresh);
        at
    }

    /// Adds `op` to `name`'s script: its (script, position).
    pub fn push(&mut self, name: &[u8], op: StrOp) -> (usize, usize) {
        let s = self.script(name);
        self.scripts[s].ops.push(op);
        (s, self.scripts[s].ops.len() - 1)
    }

    /// Whether a condition spans keys: then the transaction is one part
    /// reading every key.
    fn guarded(&self) -> bool {
        !self.guard.is_empty() || self.groups > 0
    }

    /// The scripts of each key, in order: runs of adjacent equal keys.
    fn runs(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let mut start = 0;
        std::iter::from_fn(move || {
            let first = self.scripts.get(start)?;
            let len = self.scripts[start..].iter().take_while(|s| s.key == first.key).count();
            start += len;
            Some(start - len..start)
        })
    }

    fn run(&self, part: u32) -> std::ops::Range<usize> {
        self.runs().nth(part as usize).expect("a part of the transaction")
    }

    pub fn parts(&self) -> u32 {
        if self.guarded() { 1 } else { self.runs().count() as u32 }
    }

    pub fn anchor(&self, part: u32) -> Option<Key> {
        if !self.guarded() {
            return Some(self.scripts[self.run(part).start].key);
        }
        let first = self.guard.first().map(|(n, _)| Key::named(n)).or_else(|| self.scripts.first().map(|s| s.key));
        first.filter(|_| self.one_shard)
    }

    fn need_of(&self, run: std::ops::Range<usize>) -> Need {
        let key = self.scripts[run.start].key;
        Need { key, write: self.scripts[run].iter().any(|s| s.ops.iter().any(StrOp::writes)) }
    }

    /// The keys a guarded transaction reads, in the order it reads them:
    /// the guarded ones, then the other scripted ones.
    pub fn read_order(&self) -> Vec<Need> {
        let mut needs: Vec<Need> = Vec::with_capacity(self.guard.len() + self.scripts.len());
        let scripted: Vec<Need> = self.runs().map(|r| self.need_of(r)).collect();
        for key in self.guard.iter().map(|(n, _)| Key::named(n)) {
            if !needs.iter().any(|n| n.key == key) {
                let write = scripted.iter().any(|n| n.key == key && n.write);
                needs.push(Need { key, write });
            }
        }
        for n in scripted {
            if !needs.iter().any(|m| m.key == n.key) {
                needs.push(n);
            }
        }
        needs
    }

    /// Whether every guarded name still holds its watched version, given
    /// the value each key read.
    pub fn guard_holds<'v>(&self, mut value_of: impl FnMut(Key) -> Option<&'v Value>) -> bool {
        self.guard.iter().all(|(name, tag)| entry(value_of(Key::named(name)), name).map_or(0, |v| v.tag) == *tag)
    }

    /// Whether each `MSETNX` group sets its keys: every one of them absent
    /// just before the command, given the earlier commands (earlier groups
    /// decided first — on every key they come in command order).
    fn decide<'v>(&self, value_of: impl Fn(Key) -> Option<&'v Value>) -> Vec<bool> {
        let max = self.grow_max();
        let mut decided: Vec<bool> = Vec::with_capacity(self.groups as usize);
        for g in 0..self.groups {
            let absent = self.scripts.iter().all(|s| {
                let Some(at) =
                    s.ops.iter().position(|op| matches!(op, StrOp::SetIfAllAbsent { group, .. } if *group == g))
                else {
                    return true;
                };
                let before = entry(value_of(s.key), &s.name);
                fold_state(before.as_ref(), &s.ops[..at], max, &decided) == Cur::Absent
            });
            decided.push(absent);
        }
        decided
    }

    /// Part `part`'s next step: read its key (or, guarded, every key),
    /// then write what the commands left on each key they changed.
    pub fn step(&self, part: u32, reads: &ReadMap) -> Step {
        let needs = self.footprint(part);
        if needs.iter().any(|n| !reads.contains_key(&n.key)) {
            return Step::Read(needs);
        }
        let value_of = |k: Key| reads.get(&k).and_then(Option::as_ref);
        if !self.guard_holds(value_of) {
            return Step::Done(Vec::new());
        }
        let runs: Vec<std::ops::Range<usize>> =
            if self.guarded() { self.runs().collect() } else { vec![self.run(part)] };
        let decided = self.decide(value_of);
        let writes = runs
            .into_iter()
            .filter_map(|run| {
                let key = self.scripts[run.start].key;
                self.write_run(run, value_of(key), &decided).map(|v| (key, v))
            })
            .collect();
        Step::Done(writes)
    }

    /// The value one key's scripts leave on it, if they change it.
    fn write_run(&self, run: std::ops::Range<usize>, before: Option<&Value>, decided: &[bool]) -> Option<Value> {
        let tag_of = |i: usize| self.tag + i as u64 * crate::procedure::TAGS_PER_PART;
        let mut bucket: Option<Value> = None;
        for i in run.clone() {
            let s = &self.scripts[i];
            if let Some(data) = fold_in(entry(before, &s.name).as_ref(), &s.ops, self.grow_max(), decided).0 {
                let base = bucket.as_ref().or(before);
                bucket = Some(Value { tag: tag_of(run.start), data: with_entry(base, &s.name, tag_of(i), data) });
            }
        }
        bucket
    }

    pub fn footprint(&self, part: u32) -> Vec<Need> {
        if self.guarded() { self.read_order() } else { vec![self.need_of(self.run(part))] }
    }

    /// Each script's replies, given the values the transaction read (one
    /// per part in part order; a guarded one's in its read order), or
    /// `None` when a watched name had changed and nothing ran.
    pub fn replies(&self, results: &[OpResult]) -> Option<Vec<Vec<StrReply>>> {
        let keys: Vec<Key> = if self.guarded() {
            self.read_order().iter().map(|n| n.key).collect()
        } else {
            self.runs().map(|r| self.scripts[r.start].key).collect()
        };
        let read: BTreeMap<Key, Option<&Value>> = keys.iter().zip(results).map(|(k, v)| (*k, v.as_ref())).collect();
        let value_of = |k: Key| read.get(&k).copied().flatten();
        if !self.guard_holds(value_of) {
            return None;
        }
        let (max, decided) = (self.grow_max(), self.decide(value_of));
        let replies = |s: &KeyScript| fold_in(entry(value_of(s.key), &s.name).as_ref(), &s.ops, max, &decided).1;
        Some(self.scripts.iter().map(replies).collect())
    }

    /// How long `APPEND` and `SETRANGE` may make each string.
    fn grow_max(&self) -> usize {
        (TXN_GROWTH_BYTES_MAX / self.scripts.len().max(1)).min(STRING_BYTES_MAX)
    }

    /// How many tags the transaction may write.
    pub fn tags(&self) -> u64 {
        self.scripts.len().max(1) as u64 * crate::procedure::TAGS_PER_PART
    }

    pub fn is_read_only(&self) -> bool {
        self.scripts.iter().all(|s| !s.ops.iter().any(StrOp::writes))
    }
}

/// `name`'s value in what its key holds: its entry's data under the tag
/// that last changed it, or `None` when absent. A key of the named space
/// holds nothing but [`Data::Named`]; anything else there reads as absent.
pub fn entry(held: Option<&Value>, name: &[u8]) -> Option<Value> {
    match held.map(|v| &v.data) {
        Some(Data::Named(entries)) => entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| Value { tag: entries[i].tag, data: entries[i].data.clone() }),
        _ => None,
    }
}

/// What the key holds after `name`'s entry becomes `data` under `tag` (or
/// goes, when `data` is [`deleted`]).
pub fn with_entry(held: Option<&Value>, name: &[u8], tag: u64, data: Data) -> Data {
    let mut entries = match held.map(|v| &v.data) {
        Some(Data::Named(entries)) => Vec::clone(entries),
        _ => Vec::new(),
    };
    let at = entries.binary_search_by(|e| e.name.as_slice().cmp(name));
    let gone = matches!(&data, Data::Row(r) if r.is_empty());
    debug_assert!(!matches!(data, Data::Named(_)), "an entry is never itself named");
    match (at, gone) {
        (Ok(i), true) => {
            entries.remove(i);
        }
        (Ok(i), false) => entries[i] = Named { name: name.to_vec(), tag, data },
        (Err(_), true) => {}
        (Err(i), false) => entries.insert(i, Named { name: name.to_vec(), tag, data }),
    }
    Data::Named(Arc::new(entries))
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
        Some(Data::Named(_)) => Cur::Other("hash"),
    }
}

/// What [`fold`] leaves for a deleted name: its entry goes ([`with_entry`]).
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
    fold_in(before, ops, STRING_BYTES_MAX, &[])
}

/// [`fold`] with strings that may grow to `max_bytes` at most, and
/// `decided[g]` saying whether `MSETNX` group `g` sets its keys.
pub fn fold_in(
    before: Option<&Value>,
    ops: &[StrOp],
    max_bytes: usize,
    decided: &[bool],
) -> (Option<Data>, Vec<StrReply>) {
    let mut cur = current(before);
    let mut changed = false;
    let mut replies = Vec::with_capacity(ops.len());
    for op in ops {
        let (reply, next) = apply(&cur, op, max_bytes, decided);
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

/// The key's value after `ops`.
fn fold_state(before: Option<&Value>, ops: &[StrOp], max_bytes: usize, decided: &[bool]) -> Cur {
    ops.iter().fold(current(before), |cur, op| apply(&cur, op, max_bytes, decided).1.unwrap_or(cur))
}

/// One command: its reply and the key's new value, if it changed it.
fn apply(cur: &Cur, op: &StrOp, max_bytes: usize, decided: &[bool]) -> (StrReply, Option<Cur>) {
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
        StrOp::SetIfAllAbsent { value, group } => {
            let set = decided.get(*group as usize).copied().unwrap_or(false);
            (StrReply::Int(i64::from(set)), set.then(|| Cur::Str(value.clone())))
        }
        StrOp::Type => (
            StrReply::Status(match cur {
                Cur::Absent => "none",
                Cur::Str(_) => "string",
                Cur::Other(t) => t,
            }),
            None,
        ),
        StrOp::Append(more) => {
            if bytes.len() + more.len() > max_bytes {
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
            let end = offset.saturating_add(value.len());
            if end > bytes.len() && end > max_bytes {
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
    fn strings_grow_within_the_transaction_s_budget() {
        let big = "x".repeat(1000);
        let grow = [StrOp::Append(b"yz".to_vec())];
        assert_eq!(fold_in(s(&big).as_ref(), &grow, 1002, &[]).1, vec![StrReply::Int(1002)]);
        assert_eq!(fold_in(s(&big).as_ref(), &grow, 1001, &[]), (None, vec![too_large()]));
        let inside = [StrOp::SetRange { offset: 10, value: b"ab".to_vec() }];
        assert_eq!(fold_in(s(&big).as_ref(), &inside, 100, &[]).1, vec![StrReply::Int(1000)], "no growth");
        let past = [StrOp::SetRange { offset: 999, value: b"ab".to_vec() }];
        assert_eq!(fold_in(s(&big).as_ref(), &past, 1000, &[]), (None, vec![too_large()]));
        // The budget is shared by a transaction's keys.
        let one = txn_of(&[("a", StrOp::Get)], 1);
        let many = txn_of(&(0..64).map(|_| ("a", StrOp::Get)).collect::<Vec<_>>(), 1);
        let names: Vec<String> = (0..64).map(|i| format!("k{i}")).collect();
        let wide = txn_of(&names.iter().map(|n| (n.as_str(), StrOp::Get)).collect::<Vec<_>>(), 1);
        assert_eq!((one.grow_max(), many.grow_max()), (STRING_BYTES_MAX, STRING_BYTES_MAX));
        assert_eq!(wide.grow_max(), TXN_GROWTH_BYTES_MAX / 64);
    }

    #[test]
    fn incrbyfloat_answers_plain_decimals() {
        let (w, r) = fold(s("10.50").as_ref(), &[StrOp::IncrByFloat(b"0.1".to_vec())]);
        assert_eq!((written(w), r), (Some(b"10.6".to_vec()), vec![bulk("10.6")]));
        assert_eq!(fold(s("5.0e3").as_ref(), &[StrOp::IncrByFloat(b"2.0e2".to_vec())]).1, vec![bulk("5200")]);
        assert!(matches!(&fold(s("x").as_ref(), &[StrOp::IncrByFloat(b"1".to_vec())]).1[0], StrReply::Error(_)));
        assert!(matches!(&fold(None, &[StrOp::IncrByFloat(b"inf".to_vec())]).1[0], StrReply::Error(_)));
    }

    fn k(name: &str) -> Key {
        Key::named(name.as_bytes())
    }

    /// What a key holds when `name` alone is there, set to `text` by `tag`.
    fn held(name: &str, tag: u64, text: &str) -> Option<Value> {
        let data = with_entry(None, name.as_bytes(), tag, Data::Bytes(Arc::new(text.as_bytes().to_vec())));
        Some(Value { tag, data })
    }

    fn txn_of(scripts: &[(&str, StrOp)], tag: u64) -> StringTxn {
        let mut txn = StringTxn::new(tag);
        for (name, op) in scripts {
            txn.push(name.as_bytes(), op.clone());
        }
        txn
    }

    fn set_always(v: &str) -> StrOp {
        set(v, SetIf::Always, SetReply::Ok)
    }

    #[test]
    fn a_part_reads_its_key_then_writes_what_its_commands_left() {
        let txn = txn_of(&[("a", StrOp::IncrBy(2)), ("b", StrOp::Get)], 100);
        assert_eq!((txn.parts(), txn.anchor(1)), (2, Some(k("b"))));
        assert_eq!(txn.step(0, &ReadMap::new()), Step::Read(vec![Need::write(k("a"))]));
        assert_eq!(txn.footprint(1), vec![Need::read(k("b"))]);
        let mut reads = ReadMap::new();
        reads.insert(k("a"), held("a", 7, "40"));
        let Step::Done(w) = txn.step(0, &reads) else { panic!("done after its read") };
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].0, w[0].1.tag), (k("a"), 100));
        let after = entry(Some(&w[0].1), b"a").expect("a is there");
        assert_eq!((after.tag, after.data), (100, Data::Bytes(Arc::new(b"42".to_vec()))));
        reads.insert(k("b"), None);
        assert_eq!(txn.step(1, &reads), Step::Done(Vec::new()), "a read-only part writes nothing");
        assert!(!txn.is_read_only());
    }

    #[test]
    fn names_whose_hashes_collide_keep_their_own_values_and_versions() {
        // One 64-bit FNV-1a hash (found by a cycle search), so one key.
        let (x, y) = ("k10a5707cdf7dfdc@", "k1d0bda4a88ca5d7i");
        assert_eq!(crate::ids::fnv1a(x.as_bytes()), crate::ids::fnv1a(y.as_bytes()));
        assert_eq!(k(x), k(y));
        let txn = txn_of(&[(x, set_always("1")), ("other", StrOp::Get), (y, StrOp::IncrBy(5))], 100);
        let names: Vec<&[u8]> = txn.scripts.iter().map(|s| s.name.as_slice()).collect();
        assert_eq!(names, [x.as_bytes(), y.as_bytes(), b"other"], "a key's names adjacent");
        assert_eq!(txn.parts(), 2, "one part per key, not per name");
        let mut reads = ReadMap::new();
        reads.insert(k(x), held(y, 3, "10"));
        let Step::Done(w) = txn.step(0, &reads) else { panic!("done") };
        assert_eq!(w.len(), 1, "one write of the key");
        let (x, y) = (entry(Some(&w[0].1), x.as_bytes()).unwrap(), entry(Some(&w[0].1), y.as_bytes()).unwrap());
        assert_eq!((x.tag, y.tag), (100, 100 + crate::procedure::TAGS_PER_PART), "each name its own version");
        assert_eq!((x.data, y.data), (Data::Bytes(Arc::new(b"1".to_vec())), Data::Bytes(Arc::new(b"15".to_vec()))));
        assert_eq!(entry(Some(&w[0].1), b"z"), None, "a third name is absent");
        let replies = txn.replies(&[held("k1d0bda4a88ca5d7i", 3, "10"), None]).expect("no guard");
        assert_eq!(replies, vec![vec![StrReply::Ok], vec![StrReply::Int(15)], vec![StrReply::Nil]]);
        // Deleting one name leaves the other.
        let del = with_entry(Some(&w[0].1), b"k10a5707cdf7dfdc@", 300, deleted());
        let del = Value { tag: 300, data: del };
        assert_eq!(entry(Some(&del), b"k10a5707cdf7dfdc@"), None);
        assert_eq!(entry(Some(&del), b"k1d0bda4a88ca5d7i").map(|v| v.tag), Some(y.tag));
    }

    #[test]
    fn push_keeps_the_scripts_of_one_key_adjacent() {
        let mut txn = StringTxn::new(1);
        txn.push(b"a", StrOp::Get);
        txn.push(b"b", StrOp::Get);
        // A name that shares a's key goes right after a.
        let fresh = KeyScript { key: k("a"), name: b"a2".to_vec(), ops: Vec::new() };
        txn.scripts.insert(1, fresh);
        assert_eq!(txn.push(b"a2", StrOp::Exists), (1, 0), "found, not added again");
        assert_eq!(txn.parts(), 2);
        assert_eq!(txn.anchor(1), Some(k("b")));
    }

    #[test]
    fn a_guarded_transaction_writes_only_if_every_watched_key_kept_its_version() {
        let mut txn = txn_of(&[("a", StrOp::IncrBy(1)), ("c", set_always("x"))], 500);
        txn.guard = vec![(b"b".to_vec(), 7), (b"a".to_vec(), 9)];
        assert_eq!((txn.parts(), txn.anchor(0)), (1, None), "one part, unanchored across shards");
        let order = txn.read_order();
        assert_eq!(order, vec![Need::read(k("b")), Need::write(k("a")), Need::write(k("c"))]);
        assert_eq!(txn.step(0, &ReadMap::new()), Step::Read(order));
        let mut reads = ReadMap::new();
        reads.insert(k("b"), held("b", 7, "w"));
        reads.insert(k("a"), held("a", 9, "1"));
        reads.insert(k("c"), None);
        let Step::Done(w) = txn.step(0, &reads) else { panic!("done") };
        assert_eq!(w.iter().map(|(k, v)| (*k, v.tag)).collect::<Vec<_>>(), vec![(k("a"), 500), (k("c"), 756)]);
        reads.insert(k("b"), held("b", 8, "changed"));
        assert_eq!(txn.step(0, &reads), Step::Done(Vec::new()), "a watched key changed: nothing is written");
        // Another name's write to the watched name's key is no change.
        let other =
            Value { tag: 9, data: with_entry(reads[&k("b")].as_ref(), b"b", 7, Data::Bytes(Arc::new(b"w".to_vec()))) };
        let other =
            Value { tag: 12, data: with_entry(Some(&other), b"b-neighbour", 12, Data::Bytes(Arc::new(b"n".to_vec()))) };
        reads.insert(k("b"), Some(other));
        assert!(matches!(txn.step(0, &reads), Step::Done(w) if w.len() == 2), "b kept its version");
        let anchored = StringTxn { one_shard: true, ..txn };
        assert_eq!(anchored.anchor(0), Some(k("b")));
    }

    #[test]
    fn msetnx_writes_every_key_or_none_of_them() {
        let nx = |v: &str| StrOp::SetIfAllAbsent { value: v.as_bytes().to_vec(), group: 0 };
        let mut txn = txn_of(&[("a", nx("a")), ("b", nx("b"))], 10);
        txn.groups = 1;
        assert_eq!((txn.parts(), txn.anchor(0)), (1, None));
        let mut reads = ReadMap::new();
        reads.insert(k("a"), None);
        reads.insert(k("b"), None);
        let Step::Done(w) = txn.step(0, &reads) else { panic!("done") };
        assert_eq!(w.len(), 2, "both absent: both written");
        reads.insert(k("b"), held("b", 2, "taken"));
        assert_eq!(txn.step(0, &reads), Step::Done(Vec::new()), "one exists: nothing written");
        let replies = txn.replies(&[None, held("b", 2, "taken")]).expect("no watch");
        assert_eq!(replies, vec![vec![StrReply::Int(0)], vec![StrReply::Int(0)]]);
        let gone = Value { tag: 3, data: with_entry(held("b", 2, "taken").as_ref(), b"b", 3, deleted()) };
        reads.insert(k("b"), Some(gone));
        assert!(matches!(txn.step(0, &reads), Step::Done(w) if w.len() == 2), "a deleted key is absent");
    }

    #[test]
    fn msetnx_inside_a_transaction_sees_the_commands_before_it() {
        // MULTI; SET a 1; MSETNX a 2 b 3; DEL a; MSETNX a 4 b 5; MSETNX c 6 c 7; GET b; EXEC
        let nx = |v: &str, group: u32| StrOp::SetIfAllAbsent { value: v.as_bytes().to_vec(), group };
        let mut txn = StringTxn::new(1);
        txn.push(b"a", set_always("1"));
        txn.push(b"a", nx("2", 0));
        txn.push(b"b", nx("3", 0));
        txn.push(b"a", StrOp::Del);
        txn.push(b"a", nx("4", 1));
        txn.push(b"b", nx("5", 1));
        txn.push(b"c", nx("6", 2));
        txn.push(b"c", nx("7", 2));
        txn.push(b"b", StrOp::Get);
        txn.groups = 3;
        let replies = txn.replies(&[None, None, None]).expect("no watch");
        assert_eq!(replies[0], [StrReply::Ok, StrReply::Int(0), StrReply::Int(1), StrReply::Int(1)], "a");
        assert_eq!(replies[1], [StrReply::Int(0), StrReply::Int(1), bulk("5")], "b: the first MSETNX set nothing");
        assert_eq!(replies[2], [StrReply::Int(1), StrReply::Int(1)], "c named twice: the last value wins");
        let mut reads = ReadMap::new();
        for key in ["a", "b", "c"] {
            reads.insert(k(key), None);
        }
        let Step::Done(w) = txn.step(0, &reads) else { panic!("done") };
        let value = |key: &str| {
            let (_, v) = w.iter().find(|(kk, _)| *kk == k(key)).expect("written");
            entry(Some(v), key.as_bytes()).map(|e| e.data)
        };
        let bytes = |t: &str| Some(Data::Bytes(Arc::new(t.as_bytes().to_vec())));
        assert_eq!((value("a"), value("b"), value("c")), (bytes("4"), bytes("5"), bytes("7")));
    }
}
