//! The small transaction language of `meridian client txn`: statements
//! separated by `;` or new lines, run as one transaction.
//!
//! ```text
//! get alice; bob = "hello world"; counter += 5; counter -= 1; del old; append log 42
//! ```
//!
//! `get K` (or `read K`), `K = V` (or `put K V`, `set K V`), `K += N` /
//! `K -= N` (or `incr K [N]`), `del K`, `append K N` (a number appended to
//! the key's list). Keys and values are bare words (`[A-Za-z0-9_:./-]`) or
//! double-quoted strings with `\"` and `\\` escapes. Keys map to Meridian
//! keys as everywhere else ([`crate::client::key_of`]). Errors name the
//! statement and what was expected; this module must never panic on any
//! text.

use crate::client::{bytes_value, fresh_tag, key_of, tombstone};
use meridian_core::{Op, OpResult, Program};

/// Longest expression accepted.
pub const MAX_EXPR_BYTES: usize = 1 << 20;
/// Most statements in one transaction.
pub const MAX_STATEMENTS: usize = 10_000;

/// One statement, for rendering results.
#[derive(Clone, Debug, PartialEq)]
pub struct Statement {
    pub text: String,
    /// Operations it contributed to the program.
    pub ops: usize,
    pub reads: bool,
}

/// A parsed transaction.
#[derive(Clone, Debug)]
pub struct Parsed {
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

fn statement(toks: &[String]) -> Result<(Vec<Op>, bool), String> {
    let word = |i: usize| toks.get(i).map(String::as_str);
    let key = |i: usize| toks.get(i).map(|k| key_of(k.as_bytes())).ok_or("a key is missing");
    let verb = word(0).unwrap_or("").to_ascii_lowercase();
    let ops = match (verb.as_str(), toks.len()) {
        ("get" | "read", 2) => return Ok((vec![Op::Read { key: key(1)? }], true)),
        ("put" | "set", 3) => vec![Op::Write { key: key(1)?, value: bytes_value(fresh_tag(), toks[2].as_bytes()) }],
        ("del", 2) => vec![Op::Write { key: key(1)?, value: tombstone(fresh_tag()) }],
        ("incr", 2) => return Ok((vec![Op::Increment { key: key(1)?, delta: 1, tag: fresh_tag() }], true)),
        ("incr", 3) => {
            let delta = number(&toks[2], "incr")?;
            return Ok((vec![Op::Increment { key: key(1)?, delta, tag: fresh_tag() }], true));
        }
        ("append", 3) => {
            let element =
                toks[2].parse().map_err(|_| format!("append: `{}` is not a list element (a number)", toks[2]))?;
            vec![Op::Append { key: key(1)?, element }]
        }
        _ if word(1) == Some("=") && toks.len() == 3 => {
            vec![Op::Write { key: key(0)?, value: bytes_value(fresh_tag(), toks[2].as_bytes()) }]
        }
        _ if matches!(word(1), Some("+=") | Some("-=")) && toks.len() == 3 => {
            let n = number(&toks[2], "increment")?;
            let delta = if word(1) == Some("-=") { n.checked_neg().ok_or("increment out of range")? } else { n };
            return Ok((vec![Op::Increment { key: key(0)?, delta, tag: fresh_tag() }], true));
        }
        _ => {
            return Err(
                "expected `get K`, `K = V`, `put K V`, `K += N`, `K -= N`, `incr K [N]`, `del K` or `append K N`"
                    .into(),
            );
        }
    };
    Ok((ops, false))
}

/// Parses a transaction expression.
pub fn parse(text: &str) -> Result<Parsed, String> {
    if text.len() > MAX_EXPR_BYTES {
        return Err(format!("expression longer than {MAX_EXPR_BYTES} bytes"));
    }
    let mut ops = Vec::new();
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
        let (mut more, reads) = statement(&toks).map_err(|e| format!("statement {} `{stmt}`: {e}", i + 1))?;
        statements.push(Statement { text: stmt.to_string(), ops: more.len(), reads });
        ops.append(&mut more);
    }
    if statements.is_empty() {
        return Err("the transaction has no statement".into());
    }
    Ok(Parsed { program: Program::new(ops), statements })
}

/// One line per reading statement: `statement -> value`.
pub fn render_results(parsed: &Parsed, results: &[OpResult]) -> Vec<String> {
    let mut at = 0;
    let mut lines = Vec::new();
    for s in &parsed.statements {
        if s.reads {
            let v = results.get(at).and_then(Option::as_ref).filter(|v| !crate::client::is_tombstone(v));
            lines.push(format!("{} -> {}", s.text, v.map_or("(nil)".into(), crate::client::render)));
        }
        at += s.ops;
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_statement_form_parses() {
        let p = parse("get a; b = \"x y\"; c += 5; c -= 2; incr d; incr d 3; del e\nput f g; append l 7").unwrap();
        assert_eq!(p.statements.len(), 9);
        assert_eq!(p.program.ops.len(), 9);
        assert!(matches!(p.program.ops[3], Op::Increment { delta: -2, .. }));
        assert!(matches!(p.program.ops[8], Op::Append { element: 7, .. }));
        let reads: Vec<bool> = p.statements.iter().map(|s| s.reads).collect();
        assert_eq!(reads, vec![true, false, true, true, true, true, false, false, false]);
    }

    #[test]
    fn compact_operators_parse_too() {
        let p = parse("a=1;b+=2;c-=3").unwrap();
        assert!(matches!(p.program.ops[1], Op::Increment { delta: 2, .. }));
        assert!(matches!(p.program.ops[2], Op::Increment { delta: -3, .. }));
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
