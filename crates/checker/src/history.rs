//! Histories in the CONTRACT's JSON-lines shape (Elle's, so independent
//! checkers can read them).
//!
//! ```json
//! {"index":0,"type":"invoke","process":3,"time":12000000,"value":[["append",7,41],["r",9,null]]}
//! {"index":1,"type":"ok","process":3,"time":98000000,"value":[["append",7,41],["r",9,[3,12,41]]]}
//! ```
//!
//! `type` is `invoke`, `ok` (committed), `fail` (certainly not committed) or
//! `info` (unknown). Micro-operations are `["r", key, value]`,
//! `["w", key, value]` and `["append", key, element]`; a read's value is
//! `null` on an invocation, and on a completion `null` (the initial state),
//! an integer (the tag of the register version read) or a list (a list
//! key's elements). Written values and appended elements are unique.

use serde_json::Value as Json;
use std::fmt;
use std::sync::Arc;

#[derive(Copy, Clone, PartialEq, Eq, Debug, Hash)]
pub enum OpType {
    Invoke,
    Ok,
    Fail,
    Info,
}

impl OpType {
    pub fn name(self) -> &'static str {
        match self {
            OpType::Invoke => "invoke",
            OpType::Ok => "ok",
            OpType::Fail => "fail",
            OpType::Info => "info",
        }
    }
}

/// What a read returned.
#[derive(Clone, PartialEq, Eq, Debug, Hash)]
pub enum ReadValue {
    /// `null`: not known yet (invocations) or the initial state (completions).
    Nil,
    /// The unique value (tag) of the register version read.
    Register(u64),
    /// The elements of a list key, in order.
    List(Vec<u64>),
}

/// A micro-operation.
#[derive(Clone, PartialEq, Eq, Debug, Hash)]
pub enum Mop {
    Read { key: u64, value: ReadValue },
    Write { key: u64, value: u64 },
    Append { key: u64, element: u64 },
}

impl Mop {
    pub fn key(&self) -> u64 {
        match self {
            Mop::Read { key, .. } | Mop::Write { key, .. } | Mop::Append { key, .. } => *key,
        }
    }
}

/// How fresh a transaction's reads must be (`"mode"`): the checker holds
/// each transaction to its own.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default, Hash)]
pub enum ReadMode {
    /// The model in full (`strict`, the default when absent).
    #[default]
    Strict,
    /// Serializable but possibly stale (`snapshot`): no real-time order
    /// into the transaction.
    Snapshot,
    /// Ordered after its own session's earlier transactions only
    /// (`process-ordered`).
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

/// A line's optional fields beyond Elle's (CONTRACT.md: readers that do
/// not know them ignore them).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct TxnMeta {
    /// `"txn_type"`: the transaction's type as its workload names it
    /// (`new-order`, `read-only`, ...).
    pub txn_type: Option<Arc<str>>,
    /// `"mode"`, written when not `strict`.
    pub mode: ReadMode,
    /// `"tags": [first, count]`: the block of values the transaction may
    /// write. A procedure's writes are only known from its results, so a
    /// transaction without an outcome (`info`) is named by this block when
    /// a later read sees one of its values.
    pub tags: Option<(u64, u64)>,
}

impl TxnMeta {
    pub fn is_default(&self) -> bool {
        self.txn_type.is_none() && self.mode == ReadMode::Strict && self.tags.is_none()
    }
}

/// One line of a history.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct HistoryOp {
    pub index: u64,
    pub kind: OpType,
    pub process: u64,
    /// Nanoseconds of true (simulated) time, or the client's monotonic clock
    /// in real runs.
    pub time_ns: u64,
    pub value: Vec<Mop>,
    pub meta: TxnMeta,
}

/// A bad history line: where and what.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

impl HistoryOp {
    /// One JSON line, without the newline, fields in the CONTRACT's order.
    pub fn to_line(&self) -> String {
        use std::fmt::Write;
        let mut out = String::with_capacity(64 + 24 * self.value.len());
        let _ = write!(
            out,
            "{{\"index\":{},\"type\":\"{}\",\"process\":{},\"time\":{},\"value\":[",
            self.index,
            self.kind.name(),
            self.process,
            self.time_ns
        );
        for (i, m) in self.value.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = match m {
                Mop::Read { key, value: ReadValue::Nil } => write!(out, "[\"r\",{key},null]"),
                Mop::Read { key, value: ReadValue::Register(x) } => write!(out, "[\"r\",{key},{x}]"),
                Mop::Read { key, value: ReadValue::List(xs) } => {
                    let _ = write!(out, "[\"r\",{key},[");
                    for (j, x) in xs.iter().enumerate() {
                        let _ = if j > 0 { write!(out, ",{x}") } else { write!(out, "{x}") };
                    }
                    write!(out, "]]")
                }
                Mop::Write { key, value } => write!(out, "[\"w\",{key},{value}]"),
                Mop::Append { key, element } => write!(out, "[\"append\",{key},{element}]"),
            };
        }
        out.push(']');
        if let Some(t) = &self.meta.txn_type {
            let _ = write!(out, ",\"txn_type\":{}", Json::String(t.to_string()));
        }
        if self.meta.mode != ReadMode::Strict {
            let _ = write!(out, ",\"mode\":\"{}\"", self.meta.mode.name());
        }
        if let Some((first, count)) = self.meta.tags {
            let _ = write!(out, ",\"tags\":[{first},{count}]");
        }
        out.push('}');
        out
    }

    pub fn from_json(line: usize, v: &Json) -> Result<HistoryOp, ParseError> {
        let err = |message: String| ParseError { line, message };
        let obj = v.as_object().ok_or_else(|| err("an operation must be a JSON object".into()))?;
        let field = |name: &str| obj.get(name).ok_or_else(|| err(format!("missing field `{name}`")));
        let index = field("index")?.as_u64().ok_or_else(|| err("`index` must be a non-negative integer".into()))?;
        let kind = match field("type")?.as_str() {
            Some("invoke") => OpType::Invoke,
            Some("ok") => OpType::Ok,
            Some("fail") => OpType::Fail,
            Some("info") => OpType::Info,
            _ => return Err(err("`type` must be one of invoke, ok, fail, info".into())),
        };
        let process =
            field("process")?.as_u64().ok_or_else(|| err("`process` must be a non-negative integer".into()))?;
        let time_ns = match obj.get("time") {
            None | Some(Json::Null) => 0,
            Some(t) => t.as_u64().ok_or_else(|| err("`time` must be a non-negative integer (ns)".into()))?,
        };
        let mops =
            field("value")?.as_array().ok_or_else(|| err("`value` must be a list of micro-operations".into()))?;
        let mut value = Vec::with_capacity(mops.len());
        for (i, m) in mops.iter().enumerate() {
            value.push(parse_mop(m).map_err(|e| err(format!("micro-operation {i}: {e}")))?);
        }
        let meta = parse_meta(obj).map_err(err)?;
        Ok(HistoryOp { index, kind, process, time_ns, value, meta })
    }
}

fn parse_meta(obj: &serde_json::Map<String, Json>) -> Result<TxnMeta, String> {
    let mut meta = TxnMeta::default();
    if let Some(t) = obj.get("txn_type") {
        meta.txn_type = Some(t.as_str().ok_or("`txn_type` must be a string")?.into());
    }
    if let Some(m) = obj.get("mode") {
        let name = m.as_str().unwrap_or("");
        meta.mode = ReadMode::from_name(name).ok_or("`mode` must be one of strict, snapshot, process-ordered")?;
    }
    if let Some(t) = obj.get("tags") {
        let pair = t.as_array().filter(|a| a.len() == 2).and_then(|a| Some((a[0].as_u64()?, a[1].as_u64()?)));
        meta.tags = Some(pair.ok_or("`tags` must be [first, count], two non-negative integers")?);
    }
    Ok(meta)
}

fn parse_mop(m: &Json) -> Result<Mop, String> {
    let parts = m.as_array().ok_or("must be a list [f, key, value]")?;
    if parts.len() != 3 {
        return Err(format!("must have 3 elements, has {}", parts.len()));
    }
    let key = parts[1].as_u64().ok_or("key must be a non-negative integer")?;
    match parts[0].as_str() {
        Some("r") => {
            let value = match &parts[2] {
                Json::Null => ReadValue::Nil,
                Json::Array(xs) => ReadValue::List(
                    xs.iter()
                        .map(|x| x.as_u64().ok_or("list elements must be non-negative integers"))
                        .collect::<Result<_, _>>()?,
                ),
                x => ReadValue::Register(x.as_u64().ok_or("a read value must be null, an integer or a list")?),
            };
            Ok(Mop::Read { key, value })
        }
        Some("w") => Ok(Mop::Write { key, value: parts[2].as_u64().ok_or("a written value must be an integer")? }),
        Some("append") => {
            Ok(Mop::Append { key, element: parts[2].as_u64().ok_or("an appended element must be an integer")? })
        }
        _ => Err("function must be \"r\", \"w\" or \"append\"".into()),
    }
}

/// Parses a JSON-lines history; blank lines are skipped. Errors name the
/// 1-based line.
pub fn parse_jsonl(text: &str) -> Result<Vec<HistoryOp>, ParseError> {
    let mut ops = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Json =
            serde_json::from_str(line).map_err(|e| ParseError { line: i + 1, message: format!("not JSON: {e}") })?;
        ops.push(HistoryOp::from_json(i + 1, &v)?);
    }
    Ok(ops)
}

/// Renders a history as JSON lines (each followed by a newline).
pub fn to_jsonl(ops: &[HistoryOp]) -> String {
    let mut out = String::new();
    for op in ops {
        out.push_str(&op.to_line());
        out.push('\n');
    }
    out
}

/// A history that parses but breaks the CONTRACT's rules.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WellFormedError {
    /// Position of the offending operation in the history (0-based).
    pub position: usize,
    /// Its `index` field.
    pub index: u64,
    pub message: String,
}

impl fmt::Display for WellFormedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "operation {} (entry {}): {}", self.index, self.position + 1, self.message)
    }
}

impl std::error::Error for WellFormedError {}

/// Checks the rules the checker relies on: each completion follows an
/// invocation on the same process, a process has one operation open at a
/// time, written values and appended elements are unique per key, and each
/// key is used either as a register (`w`, integer reads) or as a list
/// (`append`, list reads). [`crate::check`] tolerates violations (and warns);
/// a command that must reject bad input calls this first.
pub fn validate(ops: &[HistoryOp]) -> Result<(), WellFormedError> {
    use std::collections::{HashMap, HashSet};
    let mut open: HashMap<u64, u64> = HashMap::new();
    let mut written: HashSet<(u64, u64)> = HashSet::new();
    // key -> (is a list, index of the operation that showed it)
    let mut shape: HashMap<u64, (bool, u64)> = HashMap::new();
    for (position, op) in ops.iter().enumerate() {
        let fail = |message: String| WellFormedError { position, index: op.index, message };
        if op.kind == OpType::Invoke {
            if let Some(prev) = open.insert(op.process, op.index) {
                return Err(fail(format!(
                    "process {} invoked again while operation {prev} was still open",
                    op.process
                )));
            }
        } else if open.remove(&op.process).is_none() {
            return Err(fail(format!(
                "a completion ({}) with no open invocation on process {}",
                op.kind.name(),
                op.process
            )));
        }
        for m in &op.value {
            let (list, written_value) = match m {
                Mop::Write { value, .. } => (Some(false), Some(*value)),
                Mop::Append { element, .. } => (Some(true), Some(*element)),
                Mop::Read { value: ReadValue::List(_), .. } => (Some(true), None),
                Mop::Read { value: ReadValue::Register(_), .. } => (Some(false), None),
                Mop::Read { value: ReadValue::Nil, .. } => (None, None),
            };
            let key = m.key();
            if let (Some(v), OpType::Invoke) = (written_value, op.kind) {
                if !written.insert((key, v)) {
                    return Err(fail(format!("value {v} is written to key {key} more than once")));
                }
            }
            if let Some(list) = list {
                let (was, at) = *shape.entry(key).or_insert((list, op.index));
                if was != list {
                    let (now, then) = if list { ("list", "register") } else { ("register", "list") };
                    return Err(fail(format!("key {key} is used as a {now} here but as a {then} by operation {at}")));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_example_round_trips() {
        let text = r#"{"index":0,"type":"invoke","process":3,"time":12000000,"value":[["append",7,41],["r",9,null]]}
{"index":1,"type":"ok","process":3,"time":98000000,"value":[["append",7,41],["r",9,[3,12,41]]]}
"#;
        let ops = parse_jsonl(text).unwrap();
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[1].value[1], Mop::Read { key: 9, value: ReadValue::List(vec![3, 12, 41]) });
        assert_eq!(to_jsonl(&ops), text);
    }

    #[test]
    fn validate_accepts_the_contract_example_and_names_broken_rules() {
        let good = parse_jsonl(
            r#"{"index":0,"type":"invoke","process":3,"time":1,"value":[["append",7,41],["r",9,null]]}
{"index":1,"type":"ok","process":3,"time":2,"value":[["append",7,41],["r",9,[3,12,41]]]}"#,
        )
        .unwrap();
        assert_eq!(validate(&good), Ok(()));
        let cases = [
            (r#"{"index":5,"type":"ok","process":1,"value":[]}"#, "no open invocation"),
            (
                r#"{"index":0,"type":"invoke","process":1,"value":[]}
{"index":1,"type":"invoke","process":1,"value":[]}"#,
                "still open",
            ),
            (
                r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,5]]}
{"index":1,"type":"invoke","process":2,"value":[["w",1,5]]}"#,
                "more than once",
            ),
            (r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,5],["append",1,6]]}"#, "used as a list"),
        ];
        for (text, want) in cases {
            let err = validate(&parse_jsonl(text).unwrap()).unwrap_err();
            assert!(err.to_string().contains(want), "{err}");
        }
    }

    #[test]
    fn extra_fields_round_trip_and_plain_lines_stay_plain() {
        let text = r#"{"index":0,"type":"invoke","process":3,"time":1,"value":[],"txn_type":"new-order","mode":"snapshot","tags":[4096,512]}
{"index":1,"type":"ok","process":3,"time":2,"value":[["r",9,null]]}
"#;
        let ops = parse_jsonl(text).unwrap();
        assert_eq!(ops[0].meta.txn_type.as_deref(), Some("new-order"));
        assert_eq!(ops[0].meta.mode, ReadMode::Snapshot);
        assert_eq!(ops[0].meta.tags, Some((4096, 512)));
        assert!(ops[1].meta.is_default());
        assert_eq!(to_jsonl(&ops), text);
        let bad = parse_jsonl(r#"{"index":0,"type":"invoke","process":1,"value":[],"mode":"fresh"}"#).unwrap_err();
        assert!(bad.message.contains("`mode`"), "{bad}");
    }

    #[test]
    fn bad_lines_are_named() {
        let err = parse_jsonl("\n{\"index\":0}").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("`type`"), "{err}");
        let err = parse_jsonl(r#"{"index":0,"type":"ok","process":1,"value":[["x",1,2]]}"#).unwrap_err();
        assert!(err.message.contains("micro-operation 0"), "{err}");
    }
}
