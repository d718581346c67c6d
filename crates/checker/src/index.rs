//! Interns keys and versions and flattens every transaction's reads and
//! writes, so later passes work on dense integer ids.
//!
//! A *version* is one state of a key: its initial state (`nil`), a register
//! value, or, for a list key, the state ending with a given element. Values
//! and elements are unique per key, so each non-initial version has at most
//! one writer. Version `k` (for key id `k`) is key `k`'s initial state.

use crate::fxhash::FxMap;
use crate::history::{Mop, ReadValue};
use crate::txns::{Status, Txn, TxnId};

pub(crate) type KeyId = u32;
pub(crate) type VersionId = u32;
/// "No such id" for transaction and version ids.
pub(crate) const NONE: u32 = u32::MAX;

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum KeyKind {
    Register,
    List,
}

/// A read by a committed transaction.
#[derive(Copy, Clone, Debug)]
pub(crate) struct ReadRec {
    pub txn: TxnId,
    pub key: KeyId,
    /// Position of the micro-operation in the transaction.
    pub mop: u32,
    /// The version read: the register value, the list's last element, or
    /// the key's initial version. `NONE` when the value has the wrong shape.
    pub version: VersionId,
    /// The list elements read, as a range of `Index::elems`.
    pub elems_start: u32,
    pub elems_len: u32,
    /// Read before the transaction wrote the key itself.
    pub external: bool,
}

/// A write (or append) by any transaction.
#[derive(Copy, Clone, Debug)]
pub(crate) struct WriteRec {
    pub key: KeyId,
    pub mop: u32,
    pub version: VersionId,
    /// The transaction's last write to this key.
    pub last: bool,
}

pub(crate) struct Versions {
    pub key: Vec<KeyId>,
    /// `None` for initial versions.
    pub value: Vec<Option<u64>>,
    /// `NONE` when no transaction wrote it (initial versions, garbage).
    pub writer: Vec<TxnId>,
    /// Position of the writing micro-operation in its transaction.
    pub write_mop: Vec<u32>,
    /// Its writer wrote the same key again afterwards.
    pub intermediate: Vec<bool>,
    /// Some committed transaction read it (for lists: read a state containing it).
    pub observed: Vec<bool>,
}

impl Versions {
    fn push(&mut self, key: KeyId, value: Option<u64>) -> VersionId {
        let id = self.key.len() as VersionId;
        self.key.push(key);
        self.value.push(value);
        self.writer.push(NONE);
        self.write_mop.push(NONE);
        self.intermediate.push(false);
        self.observed.push(false);
        id
    }

    pub fn len(&self) -> usize {
        self.key.len()
    }
}

pub(crate) struct Index<'a> {
    pub txns: Vec<Txn<'a>>,
    key_ids: FxMap<u64, KeyId>,
    /// Key id -> the key as written in the history.
    pub keys: Vec<u64>,
    pub key_kind: Vec<KeyKind>,
    pub versions: Versions,
    pub reads: Vec<ReadRec>,
    /// Transaction `t`'s reads are `reads[read_off[t]..read_off[t + 1]]`.
    pub read_off: Vec<u32>,
    pub elems: Vec<VersionId>,
    pub writes: Vec<WriteRec>,
    pub write_off: Vec<u32>,
    /// Committed, or indeterminate with a write some committed transaction read.
    pub in_graph: Vec<bool>,
    pub warnings: Vec<String>,
}

/// Duplicate-write warnings beyond this many are only counted.
const MAX_DUPLICATE_WARNINGS: usize = 5;

impl<'a> Index<'a> {
    pub fn build(txns: Vec<Txn<'a>>, mut warnings: Vec<String>) -> Index<'a> {
        let (key_ids, keys, key_kind) = intern_keys(&txns);
        let mut b = Builder {
            key_ids,
            by_value: FxMap::default(),
            versions: Versions {
                key: Vec::new(),
                value: Vec::new(),
                writer: Vec::new(),
                write_mop: Vec::new(),
                intermediate: Vec::new(),
                observed: Vec::new(),
            },
            duplicates: 0,
            warnings: &mut warnings,
        };
        for k in 0..keys.len() {
            b.versions.push(k as KeyId, None);
        }
        let (writes, write_off) = b.writes(&txns);
        let (reads, read_off, elems) = b.reads(&txns, &key_kind);
        if b.duplicates > MAX_DUPLICATE_WARNINGS {
            let more = b.duplicates - MAX_DUPLICATE_WARNINGS;
            b.warnings.push(format!("... and {more} more values written more than once"));
        }
        let versions = b.versions;
        let key_ids = b.key_ids;
        let in_graph = graph_membership(&txns, &writes, &write_off, &versions);
        Index { txns, key_ids, keys, key_kind, versions, reads, read_off, elems, writes, write_off, in_graph, warnings }
    }

    pub fn reads_of(&self, t: TxnId) -> &[ReadRec] {
        &self.reads[self.read_off[t as usize] as usize..self.read_off[t as usize + 1] as usize]
    }

    pub fn writes_of(&self, t: TxnId) -> &[WriteRec] {
        &self.writes[self.write_off[t as usize] as usize..self.write_off[t as usize + 1] as usize]
    }

    pub fn elems_of(&self, r: &ReadRec) -> &[VersionId] {
        &self.elems[r.elems_start as usize..(r.elems_start + r.elems_len) as usize]
    }

    /// The writes a read shows the effects of: every element of a list
    /// read, or the register value (nothing for an initial state).
    pub fn seen_versions<'s>(&'s self, r: &'s ReadRec) -> &'s [VersionId] {
        if self.key_kind[r.key as usize] == KeyKind::List {
            self.elems_of(r)
        } else if r.version == NONE || self.is_nil(r.version) {
            &[]
        } else {
            std::slice::from_ref(&r.version)
        }
    }

    /// The id of a key as written in the history (every key in it is interned).
    pub fn key_id(&self, key: u64) -> KeyId {
        self.key_ids.get(&key).copied().unwrap_or(NONE)
    }

    pub fn is_nil(&self, v: VersionId) -> bool {
        (v as usize) < self.keys.len()
    }

    pub fn nil(&self, key: KeyId) -> VersionId {
        key
    }

    pub fn status(&self, t: TxnId) -> Status {
        self.txns[t as usize].status
    }

    /// The writer of `v` if it is in the dependency graph.
    pub fn graph_writer(&self, v: VersionId) -> Option<TxnId> {
        let w = self.versions.writer[v as usize];
        (w != NONE && self.in_graph[w as usize]).then_some(w)
    }

    pub fn txn_count(&self) -> usize {
        self.txns.len()
    }

    /// Committed transactions in history order.
    pub fn oks(&self) -> impl Iterator<Item = TxnId> + '_ {
        (0..self.txns.len() as TxnId).filter(|&t| self.status(t) == Status::Ok)
    }
}

type KeyInterning = (FxMap<u64, KeyId>, Vec<u64>, Vec<KeyKind>);

/// Key ids in order of first appearance; a key is a list if anything
/// appends to it or reads a list from it.
fn intern_keys(txns: &[Txn<'_>]) -> KeyInterning {
    let mut ids: FxMap<u64, KeyId> = FxMap::default();
    let mut keys = Vec::new();
    let mut kinds = Vec::new();
    for t in txns {
        for m in t.mops {
            let k = m.key();
            let id = *ids.entry(k).or_insert_with(|| {
                keys.push(k);
                kinds.push(KeyKind::Register);
                keys.len() as KeyId - 1
            });
            let listy = matches!(m, Mop::Append { .. } | Mop::Read { value: ReadValue::List(_), .. });
            if listy {
                kinds[id as usize] = KeyKind::List;
            }
        }
    }
    (ids, keys, kinds)
}

struct Builder<'w> {
    key_ids: FxMap<u64, KeyId>,
    by_value: FxMap<(KeyId, u64), VersionId>,
    versions: Versions,
    duplicates: usize,
    warnings: &'w mut Vec<String>,
}

type ReadTables = (Vec<ReadRec>, Vec<u32>, Vec<VersionId>);

impl Builder<'_> {
    fn key(&self, k: u64) -> KeyId {
        // Every key was interned from these same transactions.
        self.key_ids.get(&k).copied().unwrap_or(NONE)
    }

    fn version(&mut self, key: KeyId, value: u64) -> VersionId {
        if let Some(&v) = self.by_value.get(&(key, value)) {
            return v;
        }
        let v = self.versions.push(key, Some(value));
        self.by_value.insert((key, value), v);
        v
    }

    fn writes(&mut self, txns: &[Txn<'_>]) -> (Vec<WriteRec>, Vec<u32>) {
        let mut writes = Vec::new();
        let mut off = Vec::with_capacity(txns.len() + 1);
        let mut last_write: FxMap<KeyId, usize> = FxMap::default();
        for (t, txn) in txns.iter().enumerate() {
            off.push(writes.len() as u32);
            last_write.clear();
            for (i, m) in txn.mops.iter().enumerate() {
                let (k, value) = match *m {
                    Mop::Write { key, value } => (key, value),
                    Mop::Append { key, element } => (key, element),
                    Mop::Read { .. } => continue,
                };
                let key = self.key(k);
                let v = self.version(key, value);
                if self.versions.writer[v as usize] == NONE {
                    self.versions.writer[v as usize] = t as TxnId;
                    self.versions.write_mop[v as usize] = i as u32;
                } else {
                    self.duplicate(k, value, txn.index);
                }
                if let Some(prev) = last_write.insert(key, writes.len()) {
                    let p: &mut WriteRec = &mut writes[prev];
                    p.last = false;
                    if self.versions.writer[p.version as usize] == t as TxnId {
                        self.versions.intermediate[p.version as usize] = true;
                    }
                }
                writes.push(WriteRec { key, mop: i as u32, version: v, last: true });
            }
        }
        off.push(writes.len() as u32);
        (writes, off)
    }

    fn duplicate(&mut self, key: u64, value: u64, index: u64) {
        self.duplicates += 1;
        if self.duplicates <= MAX_DUPLICATE_WARNINGS {
            self.warnings.push(format!(
                "value {value} of key {key} is written more than once (again by operation \
                 {index}); reads of it are attributed to its first writer"
            ));
        }
    }

    fn reads(&mut self, txns: &[Txn<'_>], kinds: &[KeyKind]) -> ReadTables {
        let mut reads = Vec::new();
        let mut elems = Vec::new();
        let mut off = Vec::with_capacity(txns.len() + 1);
        let mut written: FxMap<KeyId, ()> = FxMap::default();
        for (t, txn) in txns.iter().enumerate() {
            off.push(reads.len() as u32);
            // Only committed transactions' reads are known to have happened.
            if txn.status != Status::Ok {
                continue;
            }
            written.clear();
            for (i, m) in txn.mops.iter().enumerate() {
                let (k, value) = match m {
                    Mop::Read { key, value } => (*key, value),
                    Mop::Write { key, .. } | Mop::Append { key, .. } => {
                        written.insert(self.key(*key), ());
                        continue;
                    }
                };
                let key = self.key(k);
                let elems_start = elems.len() as u32;
                let version = self.read_version(key, kinds[key as usize], value, &mut elems);
                reads.push(ReadRec {
                    txn: t as TxnId,
                    key,
                    mop: i as u32,
                    version,
                    elems_start,
                    elems_len: elems.len() as u32 - elems_start,
                    external: !written.contains_key(&key),
                });
            }
        }
        off.push(reads.len() as u32);
        (reads, off, elems)
    }

    /// The version a read value denotes, marking what it shows as observed.
    fn read_version(&mut self, key: KeyId, kind: KeyKind, value: &ReadValue, elems: &mut Vec<VersionId>) -> VersionId {
        match (kind, value) {
            (_, ReadValue::Nil) => key,
            (KeyKind::Register, ReadValue::Register(x)) => {
                let v = self.version(key, *x);
                self.versions.observed[v as usize] = true;
                v
            }
            (KeyKind::List, ReadValue::List(xs)) => {
                for &x in xs {
                    let v = self.version(key, x);
                    self.versions.observed[v as usize] = true;
                    elems.push(v);
                }
                xs.last().map_or(key, |&x| self.version(key, x))
            }
            _ => NONE,
        }
    }
}

/// Committed transactions, and indeterminate ones whose writes a committed
/// transaction read (Elle's rule: only then do we know they took effect).
fn graph_membership(txns: &[Txn<'_>], writes: &[WriteRec], off: &[u32], versions: &Versions) -> Vec<bool> {
    (0..txns.len())
        .map(|t| match txns[t].status {
            Status::Ok => true,
            Status::Fail => false,
            Status::Info => {
                writes[off[t] as usize..off[t + 1] as usize].iter().any(|w| versions.observed[w.version as usize])
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::parse_jsonl;
    use crate::txns::pair;

    #[test]
    fn interns_versions_reads_and_writes() {
        let ops = parse_jsonl(
            r#"{"index":0,"type":"invoke","process":1,"time":1,"value":[["append",5,1],["append",5,2],["r",5,null]]}
{"index":1,"type":"ok","process":1,"time":2,"value":[["append",5,1],["append",5,2],["r",5,[1,2]]]}
{"index":2,"type":"invoke","process":2,"time":3,"value":[["r",9,null],["w",9,7]]}
{"index":3,"type":"info","process":2,"time":4,"value":[["r",9,null],["w",9,7]]}
{"index":4,"type":"invoke","process":3,"time":5,"value":[["r",9,null],["r",5,null]]}
{"index":5,"type":"ok","process":3,"time":6,"value":[["r",9,7],["r",5,[1]]]}"#,
        )
        .unwrap();
        let p = pair(&ops);
        let ix = Index::build(p.txns, p.warnings);
        assert_eq!(ix.keys, [5, 9]);
        assert_eq!(ix.key_kind, [KeyKind::List, KeyKind::Register]);
        // Element 1 was overwritten by the same transaction: intermediate.
        let v1 = ix.writes_of(0)[0].version;
        assert!(ix.versions.intermediate[v1 as usize]);
        assert!(!ix.writes_of(0)[0].last && ix.writes_of(0)[1].last);
        let r = ix.reads_of(0)[0];
        assert!(!r.external);
        assert_eq!(ix.elems_of(&r).len(), 2);
        // The indeterminate writer of 9=7 was observed, so it is in the graph.
        assert!(ix.in_graph[1]);
        assert!(ix.reads_of(1).is_empty(), "an info transaction's reads are unknown");
        assert_eq!(ix.reads_of(2)[0].version, ix.writes_of(1)[0].version);
        assert!(ix.reads_of(2)[0].external);
        assert!(ix.is_nil(ix.nil(1)) && !ix.is_nil(v1));
    }
}
