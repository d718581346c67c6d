//! Pairs each invocation with its completion into one transaction record.
//!
//! The checker reasons about transactions, not lines. A process has at most
//! one outstanding operation, so the completion of an invocation is the next
//! `ok`/`fail`/`info` line on the same process. Malformed histories are
//! handled leniently (and noted in warnings) so that `check` never fails:
//! an invocation superseded by another on the same process, or never
//! completed, is indeterminate (`info`); a completion without an invocation
//! is kept with an unknown (zero) invocation time, which only removes
//! real-time constraints.

use crate::fxhash::FxMap;
use crate::history::{HistoryOp, Mop, OpType, ReadMode};

/// Dense transaction number, in order of the line that ends the transaction.
pub(crate) type TxnId = u32;

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Status {
    /// Committed.
    Ok,
    /// Certainly not committed.
    Fail,
    /// May or may not have committed.
    Info,
}

#[derive(Clone, Debug)]
pub(crate) struct Txn<'a> {
    /// `index` of the completion line (of the invocation if never completed).
    pub index: u64,
    pub process: u64,
    pub status: Status,
    pub invoke_ns: u64,
    /// Completion time; for transactions that never completed, the invocation time.
    pub complete_ns: u64,
    /// The micro-operations with their results (completion) or as invoked.
    pub mops: &'a [Mop],
    /// How fresh its reads must be (strict unless its lines say).
    pub mode: ReadMode,
}

pub(crate) struct Pairing<'a> {
    pub txns: Vec<Txn<'a>>,
    pub warnings: Vec<String>,
}

/// Pairs invocations with completions; transactions come out in the order of
/// the line that ends them (completion, or invocation if it never completed).
pub(crate) fn pair(ops: &[HistoryOp]) -> Pairing<'_> {
    let mut open: FxMap<u64, usize> = FxMap::default();
    let mut anchored: Vec<(usize, Txn<'_>)> = Vec::with_capacity(ops.len() / 2 + 1);
    let mut warnings = Vec::new();
    for (pos, op) in ops.iter().enumerate() {
        if op.kind == OpType::Invoke {
            if let Some(prev) = open.insert(op.process, pos) {
                warnings.push(format!(
                    "process {} invoked operation {} while operation {} was still open; \
                     treating {} as indeterminate",
                    op.process, op.index, ops[prev].index, ops[prev].index
                ));
                anchored.push((prev, incomplete(&ops[prev])));
            }
            continue;
        }
        match open.remove(&op.process) {
            Some(inv) => anchored.push((pos, completed(&ops[inv], op))),
            None => {
                warnings.push(format!(
                    "operation {} completes nothing: process {} had no open invocation",
                    op.index, op.process
                ));
                anchored.push((pos, orphan(op)));
            }
        }
    }
    anchored.extend(open.into_values().map(|inv| (inv, incomplete(&ops[inv]))));
    anchored.sort_by_key(|(pos, _)| *pos);
    Pairing { txns: anchored.into_iter().map(|(_, t)| t).collect(), warnings }
}

fn status_of(kind: OpType) -> Status {
    match kind {
        OpType::Ok => Status::Ok,
        OpType::Fail => Status::Fail,
        OpType::Info | OpType::Invoke => Status::Info,
    }
}

fn completed<'a>(inv: &'a HistoryOp, done: &'a HistoryOp) -> Txn<'a> {
    let status = status_of(done.kind);
    // Failed and indeterminate completions may omit their value; the
    // invocation still says what they tried to write.
    let mops = if status == Status::Ok || !done.value.is_empty() { &done.value[..] } else { &inv.value[..] };
    Txn {
        index: done.index,
        process: done.process,
        status,
        invoke_ns: inv.time_ns,
        complete_ns: done.time_ns.max(inv.time_ns),
        mops,
        mode: if inv.meta.mode != ReadMode::Strict { inv.meta.mode } else { done.meta.mode },
    }
}

fn incomplete(inv: &HistoryOp) -> Txn<'_> {
    Txn {
        index: inv.index,
        process: inv.process,
        status: Status::Info,
        invoke_ns: inv.time_ns,
        complete_ns: inv.time_ns,
        mops: &inv.value,
        mode: inv.meta.mode,
    }
}

fn orphan(done: &HistoryOp) -> Txn<'_> {
    Txn {
        index: done.index,
        process: done.process,
        status: status_of(done.kind),
        invoke_ns: 0,
        complete_ns: done.time_ns,
        mops: &done.value,
        mode: done.meta.mode,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::parse_jsonl;

    #[test]
    fn pairs_by_process_and_orders_by_completion() {
        let ops = parse_jsonl(
            r#"{"index":0,"type":"invoke","process":1,"time":10,"value":[["w",1,1]]}
{"index":1,"type":"invoke","process":2,"time":20,"value":[["r",1,null]]}
{"index":2,"type":"ok","process":2,"time":30,"value":[["r",1,1]]}
{"index":3,"type":"fail","process":1,"time":40,"value":[["w",1,1]]}"#,
        )
        .unwrap();
        let p = pair(&ops);
        assert!(p.warnings.is_empty());
        assert_eq!(p.txns.len(), 2);
        assert_eq!((p.txns[0].index, p.txns[0].status), (2, Status::Ok));
        assert_eq!((p.txns[0].invoke_ns, p.txns[0].complete_ns), (20, 30));
        assert_eq!((p.txns[1].index, p.txns[1].status), (3, Status::Fail));
    }

    #[test]
    fn open_and_orphan_operations_are_kept_with_warnings() {
        let ops = parse_jsonl(
            r#"{"index":0,"type":"invoke","process":1,"time":10,"value":[["w",1,1]]}
{"index":1,"type":"invoke","process":1,"time":20,"value":[["w",1,2]]}
{"index":2,"type":"ok","process":3,"time":30,"value":[["w",1,3]]}"#,
        )
        .unwrap();
        let p = pair(&ops);
        assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
        let summary: Vec<_> = p.txns.iter().map(|t| (t.index, t.status)).collect();
        assert_eq!(summary, [(0, Status::Info), (1, Status::Info), (2, Status::Ok)]);
        assert_eq!(p.txns[2].invoke_ns, 0);
    }
}
