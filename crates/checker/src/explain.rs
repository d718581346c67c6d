//! How transactions, keys and versions are named in explanations:
//! `T12` is the transaction completed by history line 12, `k7` is key 7,
//! `k7=5` a register version, `k7[..5]` the state of list `k7` ending in 5,
//! and `k7=nil` / `k7=[]` the initial state.

use crate::index::{Index, KeyKind, NONE, VersionId};
use crate::report::TxnRef;
use crate::txns::TxnId;

pub(crate) fn txn(ix: &Index<'_>, t: TxnId) -> String {
    format!("T{}", ix.txns[t as usize].index)
}

pub(crate) fn txn_ref(ix: &Index<'_>, t: TxnId) -> TxnRef {
    let x = &ix.txns[t as usize];
    TxnRef { index: x.index, process: x.process }
}

/// References to the given transactions, without repeats, in order.
pub(crate) fn refs(ix: &Index<'_>, ts: impl IntoIterator<Item = TxnId>) -> Vec<TxnRef> {
    let mut out: Vec<TxnRef> = Vec::new();
    for t in ts {
        let r = txn_ref(ix, t);
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

pub(crate) fn key(ix: &Index<'_>, k: u32) -> String {
    format!("k{}", ix.keys[k as usize])
}

pub(crate) fn version(ix: &Index<'_>, v: VersionId) -> String {
    if v == NONE {
        return "an unreadable value".into();
    }
    let k = ix.versions.key[v as usize];
    let list = ix.key_kind[k as usize] == KeyKind::List;
    match (ix.versions.value[v as usize], list) {
        (None, false) => format!("{}=nil", key(ix, k)),
        (None, true) => format!("{}=[]", key(ix, k)),
        (Some(x), false) => format!("{}={x}", key(ix, k)),
        (Some(x), true) => format!("{}[..{x}]", key(ix, k)),
    }
}

/// A write: `write k7=5` for registers, `append of 5 to k7` for lists.
pub(crate) fn write(ix: &Index<'_>, v: VersionId) -> String {
    let k = ix.versions.key[v as usize];
    match (ix.key_kind[k as usize], ix.versions.value[v as usize]) {
        (KeyKind::List, Some(x)) => format!("append of {x} to {}", key(ix, k)),
        _ => format!("write {}", version(ix, v)),
    }
}

/// Nanoseconds as milliseconds, for real-time explanations.
pub(crate) fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}
