//! Transactions as programs (DESIGN.md "Transactions").
//!
//! A [`Program`] is a list of per-key operations whose read and write sets are
//! known up front, so one-shot protocols (Tiga, SLOG, Calvin) can ship it
//! whole and interactive ones (2PL, OCC, K2, STARRY) can run it as reads,
//! then writes, then commit. Every operation touches one key and its written
//! value depends only on that key's value before it, so a program splits
//! into per-shard pieces that execute independently ([`Program::piece`]).
//!
//! Every written value carries a `tag` unique in the history (the client
//! draws it), so a checker can tell which transaction wrote what a read saw.

use crate::ids::{Key, ShardId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The payload of a stored value.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Data {
    /// A counter (MicroBench increments, YCSB-T fields, Redis INCR).
    Int(i64),
    /// A list of unique elements (the list-append workload).
    List(Arc<Vec<u64>>),
    /// Opaque bytes (Redis SET).
    Bytes(Arc<Vec<u8>>),
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

/// A transaction program.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, Default)]
pub struct Program {
    pub ops: Vec<Op>,
}

impl Program {
    pub fn new(ops: Vec<Op>) -> Program {
        Program { ops }
    }

    pub fn is_read_only(&self) -> bool {
        self.ops.iter().all(|op| !op.writes())
    }

    /// Distinct keys the program reads, sorted.
    pub fn read_set(&self) -> Vec<Key> {
        let mut keys: Vec<Key> = self.ops.iter().filter(|op| op.reads()).map(Op::key).collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Distinct keys the program writes, sorted.
    pub fn write_set(&self) -> Vec<Key> {
        let mut keys: Vec<Key> = self.ops.iter().filter(|op| op.writes()).map(Op::key).collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Distinct shards the program touches, sorted.
    pub fn shards(&self, shard_of: impl Fn(Key) -> ShardId) -> Vec<ShardId> {
        let mut shards: Vec<ShardId> = self.ops.iter().map(|op| shard_of(op.key())).collect();
        shards.sort_unstable();
        shards.dedup();
        shards
    }

    /// The piece of the program on one shard: its operations there, in
    /// program order, with their positions in the whole program.
    pub fn piece(&self, shard: ShardId, shard_of: impl Fn(Key) -> ShardId) -> Piece {
        let mut piece = Piece::default();
        for (i, op) in self.ops.iter().enumerate() {
            if shard_of(op.key()) == shard {
                piece.positions.push(i as u32);
                piece.ops.push(op.clone());
            }
        }
        piece
    }

    /// Runs the program against a reader of committed state, returning the
    /// per-op results and the final value of every written key (in first-
    /// write order). Operations see earlier writes of the same program.
    pub fn execute(&self, read: impl FnMut(Key) -> Option<Value>) -> Execution {
        execute_ops(&self.ops, read)
    }
}

/// The operations of a program on one shard.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, Default)]
pub struct Piece {
    /// Position of each op in the whole program.
    pub positions: Vec<u32>,
    pub ops: Vec<Op>,
}

impl Piece {
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub fn execute(&self, read: impl FnMut(Key) -> Option<Value>) -> Execution {
        execute_ops(&self.ops, read)
    }
}

/// The outcome of executing operations: one result per operation and the
/// writes to install.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, Default)]
pub struct Execution {
    pub results: Vec<OpResult>,
    pub writes: Vec<(Key, Value)>,
}

fn execute_ops(ops: &[Op], mut read: impl FnMut(Key) -> Option<Value>) -> Execution {
    let mut exec = Execution { results: Vec::with_capacity(ops.len()), writes: Vec::new() };
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
    debug_assert_eq!(exec.results.len(), ops.len());
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
