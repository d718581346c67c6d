//! The small transaction language of `meridian client txn`: statements
//! separated by `;` or new lines, run as one transaction.
//!
//! ```text
//! get alice; bob = "hello world"; counter += 5; counter -= 1; del old; append log 42
//! ```
//!
//! `get K` (or `read K`), `K = V` (or `put K V`, `set K V`), `K += N` /
//! `K -= N` (or `incr K [N]`), `del K`, `append K V` (bytes appended to
//! the string). Keys and values are bare words (`[A-Za-z0-9_:./-]`) or
//! double-quoted strings with `\"` and `\\` escapes. Each statement is
//! the Redis gateway's command of that name (`GET`, `SET`, `INCRBY`,
//! `DEL`, `APPEND`) on the same named keys, run as one transaction of
//! string commands (`meridian_core::strings`), so the two see the same data
//! with the same semantics. Errors name the statement and what was
//! expected; this module must never panic on any text.

use crate::client::fresh_tag;
use meridian_core::strings::{SetIf, SetReply, StrOp, StrReply, StringTxn};
use meridian_core::{OpResult, Procedure, Program};

/// Longest expression accepted.
pub const MAX_EXPR_BYTES: usize = 1 << 20;
/// Most statements in one transaction.
pub const MAX_STATEMENTS: usize = 10_000;

/// One statement, for rendering results.
#[derive(Clone, Debug, PartialEq)]
pub struct Statement {
    pub text: String,
    /// Its command's (script, position) in the transaction.
    pub slot: (usize, usize),
    /// Whether its reply is shown (reads, increments).
    pub reads: bool,
}

/// A parsed transaction.
#[derive(Clone, Debug)]
pub struct Parsed {
    pub txn: StringTxn,
    pub program: Program,
    pub statements: Vec<Statement>,
}

fn tokens(stmt: &str) -> Result<Vec<String>, String> {
    let chars: Vec<char> = stmt.chars().collect();
    let operator_at = |i: usize| match (chars.get(i), chars.get(i + 1)) {
        (Some('='), _) => Some(1),
        (Some('+' | '-'), Some('=')) => Some(2),
        _ => None,
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if let Some(len) = operator_at(i) {
            out.push(chars[i..i + len].iter().collect());
            i += len;
        } else if c == '"' {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err("unterminated string".into()),
                    Some('"') => break,
                    Some('\\') => {
                        i += 1;
                        s.push(*chars.get(i).ok_or("unterminated string")?);
                    }
                    Some(c) => s.push(*c),
                }
                i += 1;
            }
            i += 1;
            out.push(s);
        } else {
            let mut s = String::new();
            while let Some(&c) = chars.get(i) {
                if c.is_whitespace() || c == '"' || operator_at(i).is_some() {
                    break;
                }
                if !(c.is_ascii_alphanumeric() || "_:./-+".contains(c)) {
                    return Err(format!("unexpected character `{c}`"));
                }
                s.push(c);
                i += 1;
            }
            out.push(s);
        }
    }
    Ok(out)
}

fn number(text: &str, what: &str) -> Result<i64, String> {
    text.parse().map_err(|_| format!("{what}: `{text}` is not an integer"))
}

/// A statement as (key, command, whether its reply is shown).
fn statement(toks: &[String]) -> Result<(&str, StrOp, bool), String> {
    let word = |i: usize| toks.get(i).map(String::as_str);
    let key = |i: usize| word(i).ok_or("a key is missing");
    let set = |v: &str| StrOp::Set { value: v.as_bytes().to_vec(), only: SetIf::Always, reply: SetReply::Ok };
    let verb = word(0).unwrap_or("").to_ascii_lowercase();
    Ok(match (verb.as_str(), toks.len()) {
        ("get" | "read", 2) => (key(1)?, StrOp::Get, true),
        ("put" | "set", 3) => (key(1)?, set(&toks[2]), false),
        ("del", 2) => (key(1)?, StrOp::Del, false),
        ("incr", 2) => (key(1)?, StrOp::IncrBy(1), true),
        ("incr", 3) => (key(1)?, StrOp::IncrBy(number(&toks[2], "incr")?), true),
        ("append", 3) => (key(1)?, StrOp::Append(toks[2].as_bytes().to_vec()), false),
        _ if word(1) == Some("=") && toks.len() == 3 => (key(0)?, set(&toks[2]), false),
        _ if matches!(word(1), Some("+=") | Some("-=")) && toks.len() == 3 => {
            let n = number(&toks[2], "increment")?;
            let delta = if word(1) == Some("-=") { n.checked_neg().ok_or("increment out of range")? } else { n };
            (key(0)?, StrOp::IncrBy(delta), true)
        }
        _ => {
            return Err(
                "expected `get K`, `K = V`, `put K V`, `K += N`, `K -= N`, `incr K [N]`, `del K` or `append K V`"
                    .into(),
            );
        }
    })
}

/// Parses a transaction expression.
pub fn parse(text: &str) -> Result<Parsed, String> {
    if text.len() > MAX_EXPR_BYTES {
        return Err(format!("expression longer than {MAX_EXPR_BYTES} bytes"));
    }
    let mut txn = StringTxn::new(fresh_tag());
    let mut statements = Vec::new();
    for (i, stmt) in text.split([';', '\n']).enumerate() {
        let stmt = stmt.trim();
        if stmt.is_empty() || stmt.starts_with('#') {
            continue;
        }
        if statements.len() >= MAX_STATEMENTS {
            return Err(format!("more than {MAX_STATEMENTS} statements"));
        }
        let toks = tokens(stmt).map_err(|e| format!("statement {} `{stmt}`: {e}", i + 1))?;
        let (key, op, reads) = statement(&toks).map_err(|e| format!("statement {} `{stmt}`: {e}", i + 1))?;
        let slot = txn.push(key.as_bytes(), op);
        statements.push(Statement { text: stmt.to_string(), slot, reads });
    }
    if statements.is_empty() {
        return Err("the transaction has no statement".into());
    }
    let program = Program::procedure(Procedure::Strings(txn.clone()));
    Ok(Parsed { txn, program, statements })
}

/// One line per statement with something to say — a read's value, an
/// increment's result, any command's error: `statement -> reply`.
pub fn render_results(parsed: &Parsed, results: &[OpResult]) -> Vec<String> {
    let Some(replies) = parsed.txn.replies(results) else { return Vec::new() };
    let mut lines = Vec::new();
    for s in &parsed.statements {
        let shown = match &replies[s.slot.0][s.slot.1] {
            StrReply::Error(e) => Some(e.clone()),
            _ if !s.reads => None,
            StrReply::Nil => Some("(nil)".into()),
            StrReply::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
            StrReply::Int(n) => Some(n.to_string()),
            StrReply::Ok => Some("OK".into()),
            StrReply::Status(st) => Some((*st).to_string()),
        };
        if let Some(text) = shown {
            lines.push(format!("{} -> {text}", s.text));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ops(p: &Parsed) -> Vec<StrOp> {
        p.statements.iter().map(|s| p.txn.scripts[s.slot.0].ops[s.slot.1].clone()).collect()
    }

    #[test]
    fn every_statement_form_parses() {
        let p = parse("get a; b = \"x y\"; c += 5; c -= 2; incr d; incr d 3; del e\nput f g; append l 7").unwrap();
        assert_eq!(p.statements.len(), 9);
        let ops = ops(&p);
        assert_eq!(ops[3], StrOp::IncrBy(-2));
        assert_eq!(ops[8], StrOp::Append(b"7".to_vec()));
        assert_eq!(p.txn.scripts.len(), 7, "one script per key, its commands in order");
        let reads: Vec<bool> = p.statements.iter().map(|s| s.reads).collect();
        assert_eq!(reads, vec![true, false, true, true, true, true, false, false, false]);
    }

    #[test]
    fn compact_operators_parse_too() {
        let p = parse("a=1;b+=2;c-=3").unwrap();
        assert_eq!(ops(&p)[1..], [StrOp::IncrBy(2), StrOp::IncrBy(-3)]);
    }

    #[test]
    fn results_render_as_the_gateway_answers() {
        let p = parse("get a; a = 5; a += 2; get a; incr b; b = x; incr b").unwrap();
        // Two parts (a, b), each read as absent.
        let lines = render_results(&p, &[None, None]);
        assert_eq!(
            lines,
            [
                "get a -> (nil)",
                "a += 2 -> 7",
                "get a -> 7",
                "incr b -> 1",
                "incr b -> ERR value is not an integer or out of range"
            ]
        );
    }

    #[test]
    fn errors_name_the_statement() {
        let e = parse("get a; frob b").unwrap_err();
        assert!(e.starts_with("statement 2 `frob b`: expected"), "{e}");
        assert!(parse("a += x").unwrap_err().contains("not an integer"));
        assert!(parse("a = \"open").unwrap_err().contains("unterminated"));
        assert!(parse(" ; ").is_err());
    }

    proptest! {
        #[test]
        fn parsing_never_panics(text in ".{0,80}") {
            let _ = parse(&text);
        }
    }
}
