//! Anomalies visible without any graph: reads of values nobody wrote
//! (garbage), of aborted writes (G1a), of intermediate writes (G1b), lists
//! with repeated elements, and transactions inconsistent with themselves
//! (internal).

use crate::explain;
use crate::fxhash::FxMap;
use crate::history::{Mop, ReadValue};
use crate::index::{Index, KeyKind, NONE, ReadRec};
use crate::model::AnomalyKind;
use crate::report::Findings;
use crate::txns::{Status, TxnId};

pub(crate) fn check(ix: &Index<'_>, f: &mut Findings) {
    for t in ix.oks() {
        for r in ix.reads_of(t) {
            read_anomalies(ix, r, f);
        }
        internal(ix, t, f);
    }
}

fn read_anomalies(ix: &Index<'_>, r: &ReadRec, f: &mut Findings) {
    if r.version == NONE {
        f.add(AnomalyKind::GarbageRead, || {
            let kind = match ix.key_kind[r.key as usize] {
                KeyKind::List => "a list",
                KeyKind::Register => "a register",
            };
            (
                explain::refs(ix, [r.txn]),
                format!(
                    "{} read {} as a value of the wrong shape: it is {kind} key",
                    explain::txn(ix, r.txn),
                    explain::key(ix, r.key)
                ),
            )
        });
        return;
    }
    let seen = ix.seen_versions(r);
    if let Some(&g) = seen.iter().find(|&&v| ix.versions.writer[v as usize] == NONE) {
        f.add(AnomalyKind::GarbageRead, || {
            (
                explain::refs(ix, [r.txn]),
                format!(
                    "{} read {}, but no transaction made the {}",
                    explain::txn(ix, r.txn),
                    explain::version(ix, r.version),
                    explain::write(ix, g)
                ),
            )
        });
    }
    for &v in seen {
        let w = ix.versions.writer[v as usize];
        if w != NONE && ix.status(w) == Status::Fail {
            f.add(AnomalyKind::G1a, || {
                (
                    explain::refs(ix, [r.txn, w]),
                    format!(
                        "{} read {}, which includes the {} by {}, a transaction that failed \
                         (aborted read)",
                        explain::txn(ix, r.txn),
                        explain::version(ix, r.version),
                        explain::write(ix, v),
                        explain::txn(ix, w)
                    ),
                )
            });
        }
    }
    let w = ix.versions.writer[r.version as usize];
    if w != NONE && w != r.txn && ix.versions.intermediate[r.version as usize] {
        f.add(AnomalyKind::G1b, || {
            (
                explain::refs(ix, [r.txn, w]),
                format!(
                    "{} read {}, an intermediate state: {} wrote {} again before it finished \
                     (intermediate read)",
                    explain::txn(ix, r.txn),
                    explain::version(ix, r.version),
                    explain::txn(ix, w),
                    explain::key(ix, r.key)
                ),
            )
        });
    }
    if seen.len() > 1 && has_duplicates(seen) {
        f.add(AnomalyKind::DuplicateElements, || {
            (
                explain::refs(ix, [r.txn]),
                format!(
                    "{} read {} with some element twice, though every append is unique",
                    explain::txn(ix, r.txn),
                    explain::key(ix, r.key)
                ),
            )
        });
    }
}

fn has_duplicates(vs: &[u32]) -> bool {
    let mut sorted = vs.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).any(|w| w[0] == w[1])
}

/// What a transaction knows a key holds, from its own earlier operations.
enum Expect {
    /// A register value (`None`: initial) it read or wrote.
    Register(Option<u64>),
    /// The whole list, from an earlier read (plus its own appends since).
    Exactly(Vec<u64>),
    /// The list ends with the transaction's own appends.
    EndsWith(Vec<u64>),
}

/// A transaction's reads must agree with its own earlier reads and writes
/// (Elle's internal consistency); reporting the first disagreement.
fn internal(ix: &Index<'_>, t: TxnId, f: &mut Findings) {
    let mops = ix.txns[t as usize].mops;
    let mut state: FxMap<u64, Expect> = FxMap::default();
    for (i, m) in mops.iter().enumerate() {
        let problem = match m {
            Mop::Write { key, value } => {
                state.insert(*key, Expect::Register(Some(*value)));
                None
            }
            Mop::Append { key, element } => {
                match state.get_mut(key) {
                    Some(Expect::Exactly(v) | Expect::EndsWith(v)) => v.push(*element),
                    _ => {
                        state.insert(*key, Expect::EndsWith(vec![*element]));
                    }
                }
                None
            }
            Mop::Read { key, value } => {
                let list_key = ix.key_kind[ix.key_id(*key) as usize] == KeyKind::List;
                read_problem(&mut state, *key, list_key, value).or_else(|| future_read(mops, i, *key, value))
            }
        };
        if let Some(why) = problem {
            f.add(AnomalyKind::Internal, || {
                let who = explain::txn(ix, t);
                (explain::refs(ix, [t]), format!("{who} {why}"))
            });
            return;
        }
    }
}

/// Checks a read against what the transaction already knows, then
/// remembers what it read.
fn read_problem(state: &mut FxMap<u64, Expect>, key: u64, list_key: bool, value: &ReadValue) -> Option<String> {
    let problem = match (state.get(&key), list_key) {
        (Some(Expect::Register(want)), false) => {
            let got = register(value)?;
            (got != *want)
                .then(|| format!("read k{key}={} after its own operations left k{key}={}", show(got), show(*want)))
        }
        (Some(Expect::Exactly(want)), true) => {
            let got = list(value)?;
            (got != want.as_slice())
                .then(|| format!("read k{key}={got:?} after its own operations left k{key}={want:?}"))
        }
        (Some(Expect::EndsWith(tail)), true) => {
            let got = list(value)?;
            (!got.ends_with(tail))
                .then(|| format!("read k{key}={got:?}, which does not end with its own appends {tail:?}"))
        }
        // Nothing known yet, or a value of the wrong shape (a garbage read).
        _ => None,
    };
    if problem.is_none() {
        if list_key {
            if let Some(xs) = list(value) {
                state.insert(key, Expect::Exactly(xs.to_vec()));
            }
        } else if let Some(x) = register(value) {
            state.entry(key).or_insert(Expect::Register(x));
        }
    }
    problem
}

/// A register read's value (`Some(None)`: initial); `None` if it is a list.
fn register(value: &ReadValue) -> Option<Option<u64>> {
    match value {
        ReadValue::Nil => Some(None),
        ReadValue::Register(x) => Some(Some(*x)),
        ReadValue::List(_) => None,
    }
}

/// A list read's elements (nil: empty); `None` if it is a register value.
fn list(value: &ReadValue) -> Option<&[u64]> {
    match value {
        ReadValue::Nil => Some(&[]),
        ReadValue::List(xs) => Some(xs),
        ReadValue::Register(_) => None,
    }
}

fn show(v: Option<u64>) -> String {
    v.map_or("nil".into(), |x| x.to_string())
}

/// A list read containing an element the transaction appends only later.
fn future_read(mops: &[Mop], at: usize, key: u64, value: &ReadValue) -> Option<String> {
    let ReadValue::List(xs) = value else {
        return None;
    };
    mops[at + 1..].iter().find_map(|m| match m {
        Mop::Append { key: k, element } if *k == key && xs.contains(element) => {
            Some(format!("read element {element} of k{key} before appending it itself"))
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use crate::model::{AnomalyKind, Model};
    use crate::{check, history::parse_jsonl};

    fn kinds(text: &str, model: Model) -> Vec<AnomalyKind> {
        check(&parse_jsonl(text).unwrap(), model).kinds()
    }

    #[test]
    fn reading_an_aborted_write_is_g1a() {
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,5]]}
{"index":1,"type":"fail","process":1,"value":[["w",1,5]]}
{"index":2,"type":"invoke","process":2,"value":[["r",1,null]]}
{"index":3,"type":"ok","process":2,"value":[["r",1,5]]}"#;
        for m in Model::ALL {
            assert_eq!(kinds(h, m), [AnomalyKind::G1a], "{m}");
        }
    }

    #[test]
    fn reading_an_aborted_append_anywhere_in_a_list_is_g1a() {
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["append",1,5]]}
{"index":1,"type":"fail","process":1,"value":[["append",1,5]]}
{"index":2,"type":"invoke","process":2,"value":[["append",1,6]]}
{"index":3,"type":"ok","process":2,"value":[["append",1,6]]}
{"index":4,"type":"invoke","process":2,"value":[["r",1,null]]}
{"index":5,"type":"ok","process":2,"value":[["r",1,[5,6]]]}"#;
        assert!(kinds(h, Model::Serializable).contains(&AnomalyKind::G1a));
    }

    #[test]
    fn reading_an_overwritten_value_of_another_txn_is_g1b() {
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,5],["w",1,6]]}
{"index":1,"type":"ok","process":1,"value":[["w",1,5],["w",1,6]]}
{"index":2,"type":"invoke","process":2,"value":[["r",1,null]]}
{"index":3,"type":"ok","process":2,"value":[["r",1,5]]}"#;
        assert_eq!(kinds(h, Model::Causal), [AnomalyKind::G1b]);
        // Reading the final write is fine.
        let ok = h.replace(r#"["r",1,5]"#, r#"["r",1,6]"#);
        assert!(kinds(&ok, Model::Causal).is_empty());
    }

    #[test]
    fn values_nobody_wrote_are_garbage() {
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["r",1,null],["r",2,null]]}
{"index":1,"type":"ok","process":1,"value":[["r",1,77],["r",2,[1,2]]]}"#;
        let r = check(&parse_jsonl(h).unwrap(), Model::ReadAtomic);
        assert_eq!(r.count(AnomalyKind::GarbageRead), 2);
    }

    #[test]
    fn repeated_list_elements_are_duplicates() {
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["append",1,5]]}
{"index":1,"type":"ok","process":1,"value":[["append",1,5]]}
{"index":2,"type":"invoke","process":2,"value":[["r",1,null]]}
{"index":3,"type":"ok","process":2,"value":[["r",1,[5,5]]]}"#;
        assert!(kinds(h, Model::Serializable).contains(&AnomalyKind::DuplicateElements));
    }

    #[test]
    fn a_txn_must_see_its_own_writes() {
        let reg = r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,5],["r",1,null]]}
{"index":1,"type":"ok","process":1,"value":[["w",1,5],["r",1,null]]}"#;
        assert_eq!(kinds(reg, Model::ReadAtomic), [AnomalyKind::Internal]);
        let list = r#"{"index":0,"type":"invoke","process":1,"value":[["append",1,5],["r",1,null]]}
{"index":1,"type":"ok","process":1,"value":[["append",1,5],["r",1,[3]]]}"#;
        assert!(kinds(list, Model::Causal).contains(&AnomalyKind::Internal));
        let good = r#"{"index":0,"type":"invoke","process":1,"value":[["r",1,null],["append",1,5],["r",1,null],["w",2,1],["r",2,null]]}
{"index":1,"type":"ok","process":1,"value":[["r",1,[]],["append",1,5],["r",1,[5]],["w",2,1],["r",2,1]]}"#;
        assert!(kinds(good, Model::StrictSerializable).is_empty());
    }

    #[test]
    fn repeated_reads_must_agree_and_future_reads_are_internal() {
        let rereads = r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,5]]}
{"index":1,"type":"ok","process":1,"value":[["w",1,5]]}
{"index":2,"type":"invoke","process":2,"value":[["r",1,null],["r",1,null]]}
{"index":3,"type":"ok","process":2,"value":[["r",1,null],["r",1,5]]}"#;
        assert!(kinds(rereads, Model::Causal).contains(&AnomalyKind::Internal));
        let future = r#"{"index":0,"type":"invoke","process":1,"value":[["r",1,null],["append",1,5]]}
{"index":1,"type":"ok","process":1,"value":[["r",1,[5]],["append",1,5]]}"#;
        assert!(kinds(future, Model::Serializable).contains(&AnomalyKind::Internal));
    }
}
