//! History recording and consistency checking.

pub mod history;

pub use history::{HistoryOp, Mop, OpType, ParseError, ReadValue, parse_jsonl, to_jsonl};
