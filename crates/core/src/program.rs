//! Transactions as programs (DESIGN.md "Transactions").
//!
//! A [`Program`] is a list of per-key operations whose read and write sets are
//! known up front, so one-shot protocols (Tiga, SLOG, Calvin) can ship it
//! whole and interactive ones (2PL, OCC, K2, STARRY) can run it as reads,
//! then writes, then commit. Every operation touches one key and its written
//! value depends only on that key's value before it, so a program splits
//! into per-shard pieces that execute independently ([`Program::piece`]).
//! That is the common, cheap case; a program may instead carry a
//! [`Procedure`] (reads in rounds, writes that depend on anything read), and
//! a [`ReadMode`] saying how fresh its reads must be.
//!
//! Every written value carries a `tag` unique in the history (the client
//! draws it), so a checker can tell which transaction wrote what a read saw.

use crate::ids::{Key, ShardId};
use crate::procedure::{self, Procedure};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The keys of one transaction at one shard ([`Program::declared_keys`]):
/// a few, held inline — replicas derive them for every transaction they
/// queue and every log entry they checkpoint.
pub type KeyList = smallvec::SmallVec<[Key; 4]>;

/// The payload of a stored value.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Data {
    /// A counter (MicroBench increments, YCSB-T fields, Redis INCR).
    Int(i64),
    /// A list of unique elements (the list-append workload).
    List(Arc<Vec<u64>>),
    /// Opaque bytes (Redis SET).
    Bytes(Arc<Vec<u8>>),
    /// A row of integers (TPC-C's tables); the empty row marks a deleted
    /// value (a TPC-C row, a Redis key: `strings::deleted`).
    Row(Arc<Vec<i64>>),
    /// The keys named by byte strings whose names share this key
    /// ([`Key::named`]): one entry per name present, sorted by name —
    /// almost always one. A name absent here is absent.
    Named(Arc<Vec<Named>>),
}

/// A named key's value inside [`Data::Named`]: the tag of the write that
/// last changed this name (a `WATCH` version), and what it holds (never
/// itself `Named`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Named {
    pub name: Vec<u8>,
    pub tag: u64,
    pub data: Data,
}

/// A stored value: the payload and the unique tag of the write that made it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Value {
    pub tag: u64,
    pub data: Data,
}

impl Value {
    pub fn int(tag: u64, v: i64) -> Value {
        Value { tag, data: Data::Int(v) }
    }

    pub fn row(tag: u64, fields: Vec<i64>) -> Value {
        Value { tag, data: Data::Row(Arc::new(fields)) }
    }

    /// The counter this value holds; absent values, lists and non-numeric
    /// bytes count as zero (Redis INCR on a missing key starts at 0).
    pub fn as_int(v: Option<&Value>) -> i64 {
        match v.map(|v| &v.data) {
            Some(Data::Int(i)) => *i,
            Some(Data::Bytes(b)) => std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()).unwrap_or(0),
            _ => 0,
        }
    }
}

/// One operation of a program.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Op {
    /// Read the key.
    Read { key: Key },
    /// Blind write of a value (its tag is the write's unique identity).
    Write { key: Key, value: Value },
    /// Read-modify-write: read the counter, write `old + delta` under `tag`.
    Increment { key: Key, delta: i64, tag: u64 },
    /// Append a unique element to the key's list.
    Append { key: Key, element: u64 },
}

impl Op {
    pub fn key(&self) -> Key {
        match self {
            Op::Read { key } | Op::Write { key, .. } | Op::Increment { key, .. } | Op::Append { key, .. } => *key,
        }
    }

    /// Whether the operation observes the key's previous value.
    pub fn reads(&self) -> bool {
        matches!(self, Op::Read { .. } | Op::Increment { .. })
    }

    /// Whether the operation installs a new version of the key.
    pub fn writes(&self) -> bool {
        !matches!(self, Op::Read { .. })
    }

    /// The value this operation writes given the key's value before it, or
    /// `None` for a read. Deterministic: every replica computes the same.
    pub fn apply(&self, before: Option<&Value>) -> Option<Value> {
        match self {
            Op::Read { .. } => None,
            Op::Write { value, .. } => Some(value.clone()),
            Op::Increment { delta, tag, .. } => {
                Some(Value { tag: *tag, data: Data::Int(Value::as_int(before).wrapping_add(*delta)) })
            }
            Op::Append { element, .. } => {
                let mut list = match before.map(|v| &v.data) {
                    Some(Data::List(l)) => Vec::clone(l),
                    _ => Vec::new(),
                };
                list.push(*element);
                Some(Value { tag: *element, data: Data::List(Arc::new(list)) })
            }
        }
    }
}

/// What one operation returned: the value it read (reads and increments) or
/// nothing (blind writes and appends).
pub type OpResult = Option<Value>;

/// How fresh a transaction's reads must be; the checker holds each
/// transaction to its own mode.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub enum ReadMode {
    /// The protocol's promise in full (strict serializability: real-time
    /// order included).
    #[default]
    Strict,
    /// Serializable but possibly stale: no real-time order (SLOG's and
    /// K2's snapshot reads).
    Snapshot,
    /// Ordered after what the same session did before, not after other
    /// sessions' completed transactions (STARRY's POS read-only
    /// transactions).
    ProcessOrdered,
}

impl ReadMode {
    pub fn name(self) -> &'static str {
        match self {
            ReadMode::Strict => "strict",
            ReadMode::Snapshot => "snapshot",
            ReadMode::ProcessOrdered => "process-ordered",
        }
    }

    pub fn from_name(name: &str) -> Option<ReadMode> {
        [ReadMode::Strict, ReadMode::Snapshot, ReadMode::ProcessOrdered].into_iter().find(|m| m.name() == name)
    }
}

/// A transaction program: per-key operations, or a procedure (then `ops`
/// is empty).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, Default)]
pub struct Program {
    pub ops: Vec<Op>,
    pub procedure: Option<Arc<Procedure>>,
    pub mode: ReadMode,
}

impl Program {
    pub fn new(ops: Vec<Op>) -> Program {
        Program { ops, procedure: None, mode: ReadMode::Strict }
    }

    /// A program running `procedure`.
    pub fn procedure(procedure: Procedure) -> Program {
        Program { ops: Vec::new(), procedure: Some(Arc::new(procedure)), mode: ReadMode::Strict }
    }

    pub fn with_mode(mut self, mode: ReadMode) -> Program {
        self.mode = mode;
        self
    }

    /// Whether the program does nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.procedure.is_none()
    }

    pub fn is_read_only(&self) -> bool {
        self.ops.iter().all(|op| !op.writes()) && self.procedure.as_ref().is_none_or(|p| p.is_read_only())
    }

    /// Whether one-shot protocols can run it: per-key operations, or a
    /// procedure whose every part runs where its anchor lives.
    pub fn is_one_shot(&self) -> bool {
        self.procedure.as_ref().is_none_or(|p| p.is_anchored())
    }

    /// Distinct keys the program's operations read, sorted (a procedure's
    /// are not known up front).
    pub fn read_set(&self) -> Vec<Key> {
        let mut keys: Vec<Key> = self.ops.iter().filter(|op| op.reads()).map(Op::key).collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Distinct keys the program's operations write, sorted.
    pub fn write_set(&self) -> Vec<Key> {
        let mut keys: Vec<Key> = self.ops.iter().filter(|op| op.writes()).map(Op::key).collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Distinct shards the program touches, sorted: its operations' and
    /// its procedure parts' anchors (an unanchored part's shards are
    /// discovered as it runs, and are not included).
    pub fn shards(&self, shard_of: impl Fn(Key) -> ShardId) -> Vec<ShardId> {
        let mut shards: Vec<ShardId> = self.ops.iter().map(|op| shard_of(op.key())).collect();
        if let Some(p) = &self.procedure {
            shards.extend((0..p.parts()).filter_map(|part| p.anchor(part)).map(&shard_of));
        }
        shards.sort_unstable();
        shards.dedup();
        shards
    }

    /// The keys the program declares on `shard` (operations' keys, and the
    /// footprints of procedure parts anchored there), as (reads, writes),
    /// each sorted and distinct; a key both read and written is a write.
    pub fn declared_keys(&self, shard: ShardId, shard_of: impl Fn(Key) -> ShardId) -> (KeyList, KeyList) {
        let mut reads = KeyList::new();
        let mut writes = KeyList::new();
        for op in self.ops.iter().filter(|op| shard_of(op.key()) == shard) {
            if op.writes() { writes.push(op.key()) } else { reads.push(op.key()) }
        }
        if let Some(p) = &self.procedure {
            for part in self.parts_on(shard, &shard_of) {
                for need in p.footprint(part).unwrap_or_default() {
                    debug_assert_eq!(shard_of(need.key), shard, "a part's footprint stays on its anchor's shard");
                    if need.write { writes.push(need.key) } else { reads.push(need.key) }
                }
            }
        }
        writes.sort_unstable();
        writes.dedup();
        reads.sort_unstable();
        reads.dedup();
        reads.retain(|k| writes.binary_search(k).is_err());
        (reads, writes)
    }

    /// The positions in the program of its operations on `shard`, in order
    /// (a piece's `positions`, without building the piece).
    pub fn positions_on<'a>(
        &'a self,
        shard: ShardId,
        shard_of: impl Fn(Key) -> ShardId + 'a,
    ) -> impl Iterator<Item = usize> + 'a {
        self.ops.iter().enumerate().filter(move |(_, op)| shard_of(op.key()) == shard).map(|(i, _)| i)
    }

    /// The procedure's parts anchored on `shard`, in order (a piece's
    /// `parts`; none without a procedure).
    pub fn parts_on<'a>(
        &'a self,
        shard: ShardId,
        shard_of: impl Fn(Key) -> ShardId + 'a,
    ) -> impl Iterator<Item = u32> + 'a {
        let p = self.procedure.as_deref();
        (0..p.map_or(0, |p| p.parts()))
            .filter(move |part| p.and_then(|p| p.anchor(*part)).is_some_and(|a| shard_of(a) == shard))
    }

    /// The piece of the program on one shard: its operations there, in
    /// program order, with their positions in the whole program, and the
    /// procedure's parts anchored there.
    pub fn piece(&self, shard: ShardId, shard_of: impl Fn(Key) -> ShardId) -> Piece {
        let mut piece = Piece::default();
        for (i, op) in self.ops.iter().enumerate() {
            if shard_of(op.key()) == shard {
                piece.positions.push(i as u32);
                piece.ops.push(op.clone());
            }
        }
        if let Some(p) = &self.procedure {
            piece.parts = self.parts_on(shard, &shard_of).collect();
            if !piece.parts.is_empty() {
                piece.procedure = Some(Arc::clone(p));
            }
        }
        piece
    }

    /// Runs the program's piece on `shard` against a reader: what
    /// `self.piece(shard, shard_of).execute(read)` returns, without building
    /// the piece (a copy of its operations), which replicas that execute
    /// every entry of their log would build and drop once per entry.
    pub fn execute_piece(
        &self,
        shard: ShardId,
        shard_of: impl Fn(Key) -> ShardId,
        read: impl FnMut(Key) -> Option<Value>,
    ) -> Execution {
        let ops = self.ops.iter().filter(|op| shard_of(op.key()) == shard);
        let anchored: Vec<u32> = self.parts_on(shard, &shard_of).collect();
        let procedure = self.procedure.as_deref().filter(|_| !anchored.is_empty()).map(|p| (p, &anchored[..]));
        execute_piece_of(ops, procedure, read)
    }

    /// Runs the program against a reader of committed state, returning the
    /// per-op results and the final value of every written key (in first-
    /// write order). Operations see earlier writes of the same program. A
    /// procedure's results follow its operations' (see
    /// [`crate::procedure`]).
    pub fn execute(&self, mut read: impl FnMut(Key) -> Option<Value>) -> Execution {
        let mut exec = execute_ops(self.ops.iter(), &mut read);
        if let Some(p) = &self.procedure {
            let (results, writes) = procedure::execute(p, read);
            exec.results.extend(results);
            exec.writes.extend(writes);
        }
        exec
    }
}

/// The operations of a program on one shard, and the parts of its
/// procedure anchored there.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, Default)]
pub struct Piece {
    /// Position of each op in the whole program.
    pub positions: Vec<u32>,
    pub ops: Vec<Op>,
    /// The procedure's parts on this shard, in order.
    pub parts: Vec<u32>,
    pub procedure: Option<Arc<Procedure>>,
}

impl Piece {
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.parts.is_empty()
    }

    /// Runs the piece: its operations, then its parts (every part reads the
    /// state before the piece's writes). The results are the operations',
    /// then each part's reads in order; the writes are withheld when a part
    /// rolls back.
    pub fn execute(&self, read: impl FnMut(Key) -> Option<Value>) -> Execution {
        let procedure = self.procedure.as_ref().map(|p| (&**p, &self.parts[..]));
        execute_piece_of(self.ops.iter(), procedure, read)
    }
}

/// Runs a piece given as its operations and its procedure's parts (see
/// [`Piece::execute`]).
fn execute_piece_of<'a>(
    ops: impl Iterator<Item = &'a Op> + Clone,
    procedure: Option<(&Procedure, &[u32])>,
    mut read: impl FnMut(Key) -> Option<Value>,
) -> Execution {
    let mut exec = execute_ops(ops, &mut read);
    if let Some((p, parts)) = procedure {
        let mut memo = procedure::ReadMap::new();
        let mut writes = Vec::new();
        let mut rolled_back = false;
        for part in parts {
            let run = procedure::run_part(p, *part, &mut memo, &mut read);
            exec.results.extend(run.reads.into_iter().map(|(_, v)| v));
            rolled_back |= run.rolled_back;
            writes.extend(run.writes);
        }
        if !rolled_back {
            exec.writes.extend(writes);
        }
    }
    exec
}

/// The outcome of executing operations: one result per operation and the
/// writes to install.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, Default)]
pub struct Execution {
    pub results: Vec<OpResult>,
    pub writes: Vec<(Key, Value)>,
}

fn execute_ops<'a>(ops: impl Iterator<Item = &'a Op> + Clone, mut read: impl FnMut(Key) -> Option<Value>) -> Execution {
    // At most one write per operation: sized once, never grown.
    let n = ops.clone().count();
    let mut exec = Execution { results: Vec::with_capacity(n), writes: Vec::with_capacity(n) };
    for op in ops {
        let key = op.key();
        let before = match exec.writes.iter().find(|(k, _)| *k == key) {
            Some((_, v)) => Some(v.clone()),
            None if op.reads() || matches!(op, Op::Append { .. }) => read(key),
            None => None,
        };
        exec.results.push(if op.reads() { before.clone() } else { None });
        if let Some(after) = op.apply(before.as_ref()) {
            match exec.writes.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = after,
                None => exec.writes.push((key, after)),
            }
        }
    }
    exec
}

/// Why a transaction was aborted (for counters and the human summary).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum AbortReason {
    /// Lost a conflict (wounded, validation failed, ...).
    Conflict,
    /// A participant did not answer in time, or its leader changed.
    Timeout,
    /// The system refused it (overload, bad request).
    Rejected,
    /// The transaction itself rolled back (TPC-C's unused item): never
    /// retried.
    Rollback,
}

impl AbortReason {
    pub fn name(self) -> &'static str {
        match self {
            AbortReason::Conflict => "conflict",
            AbortReason::Timeout => "timeout",
            AbortReason::Rejected => "rejected",
            AbortReason::Rollback => "rollback",
        }
    }
}

/// What a protocol reports for a client request.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Outcome {
    /// Committed; one result per program operation.
    Committed { results: Vec<OpResult> },
    /// Certainly not committed.
    Aborted { reason: AbortReason },
    /// The coordinator gave up without knowing.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn store() -> BTreeMap<Key, Value> {
        let mut s = BTreeMap::new();
        s.insert(Key(1), Value::int(10, 5));
        s
    }

    #[test]
    fn increment_reads_then_writes_old_plus_delta() {
        let s = store();
        let p = Program::new(vec![Op::Increment { key: Key(1), delta: 2, tag: 77 }]);
        let e = p.execute(|k| s.get(&k).cloned());
        assert_eq!(e.results, vec![Some(Value::int(10, 5))]);
        assert_eq!(e.writes, vec![(Key(1), Value::int(77, 7))]);
    }

    #[test]
    fn later_ops_see_earlier_writes_of_the_same_program() {
        let s = store();
        let p = Program::new(vec![
            Op::Increment { key: Key(1), delta: 1, tag: 20 },
            Op::Read { key: Key(1) },
            Op::Append { key: Key(2), element: 30 },
            Op::Append { key: Key(2), element: 31 },
            Op::Read { key: Key(2) },
        ]);
        let e = p.execute(|k| s.get(&k).cloned());
        assert_eq!(e.results[1], Some(Value::int(20, 6)));
        let list = e.results[4].clone().expect("list read");
        assert_eq!(list.data, Data::List(Arc::new(vec![30, 31])));
        assert_eq!(e.writes.len(), 2, "one final write per key");
    }

    #[test]
    fn pieces_partition_the_program_by_shard() {
        let p = Program::new(vec![Op::Read { key: Key(0) }, Op::Read { key: Key(1) }, Op::Read { key: Key(2) }]);
        let shard_of = |k: Key| ShardId((k.0 % 2) as u32);
        let even = p.piece(ShardId(0), shard_of);
        let odd = p.piece(ShardId(1), shard_of);
        assert_eq!(even.positions, vec![0, 2]);
        assert_eq!(odd.positions, vec![1]);
        assert_eq!(p.positions_on(ShardId(0), shard_of).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(p.parts_on(ShardId(0), shard_of).count(), 0, "no procedure, no parts");
        assert_eq!(p.shards(shard_of), vec![ShardId(0), ShardId(1)]);
        assert!(p.is_read_only());
        assert!(p.write_set().is_empty());
    }

    #[test]
    fn blind_write_does_not_read() {
        let p = Program::new(vec![Op::Write { key: Key(1), value: Value::int(9, 1) }]);
        let e = p.execute(|_| panic!("a blind write must not read"));
        assert_eq!(e.results, vec![None]);
        assert_eq!(p.read_set(), vec![]);
        assert_eq!(p.write_set(), vec![Key(1)]);
    }
}
