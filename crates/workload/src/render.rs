//! Programs and their results as history micro-operations (CONTRACT.md
//! "History"): `["r", k, v]`, `["w", k, v]` and `["append", k, e]`.
//!
//! An increment is rendered as a read of the version it saw followed by a
//! write of its own tag, so a checker can recover each key's version order
//! from read-modify-write chains.
//!
//! A procedure's operations are only known once it ran: its invocation
//! lists none, and its completion lists what the replay of its results
//! recovers (every read, then every write). Its tag block goes in the
//! line's `tags` field, so that a value it wrote without an outcome being
//! known is still attributed to it.

use meridian_checker::{Mop, ReadMode, ReadValue, TxnMeta};
use meridian_core::{Data, Op, OpResult, Program, procedure};
use std::sync::Arc;

/// The micro-operations of an invocation: reads are not known yet (`null`).
pub fn invoke_mops(p: &Program) -> Vec<Mop> {
    render(p, |_| ReadValue::Nil)
}

/// The micro-operations of a completion, with what each read returned
/// (`results` holds one entry per program operation, then the procedure's
/// reads; missing entries read as the initial state).
pub fn completion_mops(p: &Program, results: &[OpResult]) -> Vec<Mop> {
    let mut mops = render(p, |i| read_value(results.get(i).and_then(Option::as_ref)));
    if let Some(proc) = &p.procedure {
        let rest = results.get(p.ops.len()..).unwrap_or_default();
        let replay = procedure::replay(proc, rest);
        debug_assert!(replay.is_some(), "a procedure's results replay it");
        for part in replay.map(|r| r.parts).unwrap_or_default() {
            for (key, value) in &part.reads {
                mops.push(Mop::Read { key: key.0, value: read_value(value.as_ref()) });
            }
            for (key, value) in &part.writes {
                mops.push(Mop::Write { key: key.0, value: value.tag });
            }
        }
    }
    mops
}

/// Whether a committed procedure rolled itself back (it then wrote
/// nothing, and is recorded as failed).
pub fn rolled_back(p: &Program, results: &[OpResult]) -> bool {
    p.procedure.as_ref().is_some_and(|proc| {
        let rest = results.get(p.ops.len()..).unwrap_or_default();
        procedure::replay(proc, rest).is_some_and(|r| r.rolled_back())
    })
}

/// The history line's extra fields for a transaction of type `label`.
pub fn txn_meta(p: &Program, label: &Arc<str>) -> TxnMeta {
    let mode = match p.mode {
        meridian_core::ReadMode::Strict => ReadMode::Strict,
        meridian_core::ReadMode::Snapshot => ReadMode::Snapshot,
        meridian_core::ReadMode::ProcessOrdered => ReadMode::ProcessOrdered,
    };
    TxnMeta { txn_type: Some(Arc::clone(label)), mode, tags: p.procedure.as_ref().map(|proc| proc.tag_block()) }
}

/// What a read returned: nothing (initial state), a list's elements, or
/// the tag of the register version.
fn read_value(v: Option<&meridian_core::Value>) -> ReadValue {
    match v {
        None => ReadValue::Nil,
        Some(v) => match &v.data {
            Data::List(elements) => ReadValue::List(elements.to_vec()),
            Data::Int(_) | Data::Bytes(_) | Data::Row(_) | Data::Named(_) => ReadValue::Register(v.tag),
        },
    }
}

fn render(p: &Program, read: impl Fn(usize) -> ReadValue) -> Vec<Mop> {
    let mut mops = Vec::with_capacity(p.ops.len() + 1);
    for (i, op) in p.ops.iter().enumerate() {
        let key = op.key().0;
        match op {
            Op::Read { .. } => mops.push(Mop::Read { key, value: read(i) }),
            Op::Increment { tag, .. } => {
                mops.push(Mop::Read { key, value: read(i) });
                mops.push(Mop::Write { key, value: *tag });
            }
            Op::Write { value, .. } => mops.push(Mop::Write { key, value: value.tag }),
            Op::Append { element, .. } => mops.push(Mop::Append { key, element: *element }),
        }
    }
    mops
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_checker::{HistoryOp, OpType, TxnMeta};
    use meridian_core::{Key, Value};
    use std::sync::Arc;

    fn line(kind: OpType, value: Vec<Mop>) -> String {
        HistoryOp { index: 0, kind, process: 3, time_ns: 1, value, meta: TxnMeta::default() }.to_line()
    }

    #[test]
    fn list_append_renders_like_the_contract_example() {
        let p = Program::new(vec![Op::Append { key: Key(7), element: 41 }, Op::Read { key: Key(9) }]);
        let invoke = line(OpType::Invoke, invoke_mops(&p));
        assert!(invoke.ends_with(r#""value":[["append",7,41],["r",9,null]]}"#), "{invoke}");
        let list = Value { tag: 41, data: Data::List(Arc::new(vec![3, 12, 41])) };
        let ok = line(OpType::Ok, completion_mops(&p, &[None, Some(list)]));
        assert!(ok.ends_with(r#""value":[["append",7,41],["r",9,[3,12,41]]]}"#), "{ok}");
    }

    #[test]
    fn increments_read_then_write_their_tag() {
        let p = Program::new(vec![
            Op::Increment { key: Key(4), delta: 1, tag: 77 },
            Op::Read { key: Key(5) },
            Op::Write { key: Key(6), value: Value::int(88, 1) },
        ]);
        assert_eq!(
            invoke_mops(&p),
            vec![
                Mop::Read { key: 4, value: ReadValue::Nil },
                Mop::Write { key: 4, value: 77 },
                Mop::Read { key: 5, value: ReadValue::Nil },
                Mop::Write { key: 6, value: 88 },
            ]
        );
        let done = completion_mops(&p, &[Some(Value::int(12, 5)), None, None]);
        let text = line(OpType::Ok, done);
        assert!(text.ends_with(r#""value":[["r",4,12],["w",4,77],["r",5,null],["w",6,88]]}"#), "{text}");
    }

    #[test]
    fn a_procedure_renders_what_its_replay_executed() {
        use meridian_core::procedure::{Procedure, Transfer};
        let p = Program::procedure(Procedure::Transfer(Transfer { from: Key(1), to: Key(2), amount: Key(3), tag: 50 }));
        assert!(invoke_mops(&p).is_empty(), "a procedure's operations are unknown when invoked");
        let results = vec![Some(Value::int(7, 10)), None, Some(Value::int(9, 4))];
        let text = line(OpType::Ok, completion_mops(&p, &results));
        assert!(text.ends_with(r#""value":[["r",1,7],["r",2,null],["r",3,9],["w",1,50],["w",2,51]]}"#), "{text}");
        assert_eq!(txn_meta(&p, &Arc::from("transfer")).tags, Some((50, 256)));
        assert!(!rolled_back(&p, &results));
    }

    #[test]
    fn missing_results_read_as_initial_state() {
        let p = Program::new(vec![Op::Read { key: Key(1) }]);
        assert_eq!(completion_mops(&p, &[]), invoke_mops(&p));
    }
}
