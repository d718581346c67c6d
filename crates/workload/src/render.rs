//! Programs and their results as history micro-operations (CONTRACT.md
//! "History"): `["r", k, v]`, `["w", k, v]` and `["append", k, e]`.
//!
//! An increment is rendered as a read of the version it saw followed by a
//! write of its own tag, so a checker can recover each key's version order
//! from read-modify-write chains.

use meridian_checker::{Mop, ReadValue};
use meridian_core::{Data, Op, OpResult, Program};

/// The micro-operations of an invocation: reads are not known yet (`null`).
pub fn invoke_mops(p: &Program) -> Vec<Mop> {
    render(p, |_| ReadValue::Nil)
}

/// The micro-operations of a completion, with what each read returned
/// (`results` holds one entry per program operation; missing entries read
/// as the initial state).
pub fn completion_mops(p: &Program, results: &[OpResult]) -> Vec<Mop> {
    render(p, |i| read_value(results.get(i).and_then(Option::as_ref)))
}

/// What a read returned: nothing (initial state), a list's elements, or
/// the tag of the register version.
fn read_value(v: Option<&meridian_core::Value>) -> ReadValue {
    match v {
        None => ReadValue::Nil,
        Some(v) => match &v.data {
            Data::List(elements) => ReadValue::List(elements.to_vec()),
            Data::Int(_) | Data::Bytes(_) => ReadValue::Register(v.tag),
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
    use meridian_checker::{HistoryOp, OpType};
    use meridian_core::{Key, Value};
    use std::sync::Arc;

    fn line(kind: OpType, value: Vec<Mop>) -> String {
        HistoryOp { index: 0, kind, process: 3, time_ns: 1, value }.to_line()
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
    fn missing_results_read_as_initial_state() {
        let p = Program::new(vec![Op::Read { key: Key(1) }]);
        assert_eq!(completion_mops(&p, &[]), invoke_mops(&p));
    }
}
