//! Tag blocks: writes of transactions without an outcome, named by the
//! block of values they may have written.
//!
//! A procedure's writes are only known from its results, so a transaction
//! that failed or never heard its outcome lists none; its lines carry
//! `"tags": [first, count]` instead. When a committed read observes a value
//! nobody listed as written and the value falls in such a transaction's
//! block, the transaction is taken to have written it: an indeterminate
//! (`info`) transaction whose write was observed, or, for a `fail`, an
//! aborted write that was read (G1a). A value in a committed transaction's
//! block that it did not list stays a garbage read.

use crate::fxhash::FxMap;
use crate::history::{HistoryOp, Mop, OpType, ReadValue};
use std::collections::HashSet;

/// The history with observed writes of outcome-less transactions added to
/// their last line, or `None` when there is nothing to add.
pub(crate) fn attribute(ops: &[HistoryOp]) -> Option<Vec<HistoryOp>> {
    if ops.iter().all(|op| op.meta.tags.is_none()) {
        return None;
    }
    let blocks = outcome_less_blocks(ops);
    if blocks.is_empty() {
        return None;
    }
    let written: HashSet<(u64, u64)> = ops
        .iter()
        .flat_map(|op| &op.value)
        .filter_map(|m| match *m {
            Mop::Write { key, value } => Some((key, value)),
            Mop::Append { key, element } => Some((key, element)),
            Mop::Read { .. } => None,
        })
        .collect();
    let owner = |value: u64| {
        let i = blocks.partition_point(|b| b.first <= value);
        (i > 0 && value < blocks[i - 1].first + blocks[i - 1].count).then(|| blocks[i - 1].line)
    };
    let mut added: FxMap<usize, Vec<Mop>> = FxMap::default();
    for op in ops.iter().filter(|op| op.kind == OpType::Ok) {
        for m in &op.value {
            let Mop::Read { key, value } = m else { continue };
            let seen: Vec<(u64, bool)> = match value {
                ReadValue::Nil => Vec::new(),
                ReadValue::Register(x) => vec![(*x, false)],
                ReadValue::List(xs) => xs.iter().map(|x| (*x, true)).collect(),
            };
            for (x, list) in seen {
                if written.contains(&(*key, x)) {
                    continue;
                }
                let Some(line) = owner(x) else { continue };
                let mop = if list { Mop::Append { key: *key, element: x } } else { Mop::Write { key: *key, value: x } };
                let mops = added.entry(line).or_default();
                if !mops.contains(&mop) {
                    mops.push(mop);
                }
            }
        }
    }
    if added.is_empty() {
        return None;
    }
    let mut out = ops.to_vec();
    for (line, mops) in added {
        out[line].value.extend(mops);
    }
    Some(out)
}

/// A block and the line that ends its transaction.
struct Block {
    first: u64,
    count: u64,
    line: usize,
}

/// The tag blocks of transactions that did not commit (failed, without an
/// outcome, or never completed), sorted by first tag.
fn outcome_less_blocks(ops: &[HistoryOp]) -> Vec<Block> {
    let mut open: FxMap<u64, usize> = FxMap::default();
    let mut blocks = Vec::new();
    let mut push = |inv: &HistoryOp, done: Option<&HistoryOp>, line: usize| {
        let tags = inv.meta.tags.or(done.and_then(|d| d.meta.tags));
        if let Some((first, count)) = tags.filter(|(_, c)| *c > 0) {
            blocks.push(Block { first, count, line });
        }
    };
    for (pos, op) in ops.iter().enumerate() {
        if op.kind == OpType::Invoke {
            if let Some(prev) = open.insert(op.process, pos) {
                push(&ops[prev], None, prev);
            }
            continue;
        }
        let Some(inv) = open.remove(&op.process) else { continue };
        if op.kind != OpType::Ok {
            push(&ops[inv], Some(op), pos);
        }
    }
    for inv in open.into_values() {
        push(&ops[inv], None, inv);
    }
    blocks.sort_unstable_by_key(|b| b.first);
    blocks
}

#[cfg(test)]
mod tests {
    use crate::check;
    use crate::history::parse_jsonl;
    use crate::model::{AnomalyKind, Model};

    /// A procedure with the block [100, 110) writes key 5; its outcome is
    /// `outcome`; a later committed read sees 103.
    fn read_of_a_block_value(outcome: &str, read: u64) -> String {
        format!(
            r#"{{"index":0,"type":"invoke","process":1,"time":1,"value":[],"tags":[100,10]}}
{{"index":1,"type":"{outcome}","process":1,"time":2,"value":[],"tags":[100,10]}}
{{"index":2,"type":"invoke","process":2,"time":3,"value":[["r",5,null]]}}
{{"index":3,"type":"ok","process":2,"time":4,"value":[["r",5,{read}]]}}"#
        )
    }

    #[test]
    fn a_value_from_an_outcome_less_procedures_block_is_its_write() {
        let h = parse_jsonl(&read_of_a_block_value("info", 103)).unwrap();
        let r = check(&h, Model::StrictSerializable);
        assert!(r.valid, "{}", r.summary());
    }

    #[test]
    fn a_value_from_a_failed_procedures_block_is_an_aborted_read() {
        let h = parse_jsonl(&read_of_a_block_value("fail", 103)).unwrap();
        let r = check(&h, Model::StrictSerializable);
        assert!(r.has(AnomalyKind::G1a), "{}", r.summary());
    }

    #[test]
    fn values_outside_blocks_and_in_committed_blocks_stay_garbage() {
        let outside = parse_jsonl(&read_of_a_block_value("info", 110)).unwrap();
        assert_eq!(check(&outside, Model::StrictSerializable).kinds(), [AnomalyKind::GarbageRead]);
        let committed = read_of_a_block_value("ok", 103);
        let r = check(&parse_jsonl(&committed).unwrap(), Model::StrictSerializable);
        assert_eq!(r.kinds(), [AnomalyKind::GarbageRead], "{}", r.summary());
    }
}
