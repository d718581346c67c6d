//! Turning toml's errors into located [`ConfigError`]s with plain-words
//! messages: the field from the error's span, Rust type names replaced by
//! TOML ones, and a "did you mean" for misspelt fields and node names.

use crate::error::ConfigError;
use crate::locate::{Locator, guess_field, join};
use meridian_core::Topology;

/// A document that is not valid TOML.
pub fn syntax_error(file: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    let lines = Locator::lines_only(text);
    let line = e.span().map(|s| lines.line_at(s.start));
    let field = line.map(|l| guess_field(text, l)).unwrap_or_default();
    ConfigError::new(file, line, field, format!("invalid TOML: {}", e.message()))
}

/// A document that is TOML but not an experiment: unknown or missing
/// fields, values of the wrong type.
pub fn typing_error(file: &str, loc: &Locator, e: &toml::de::Error) -> ConfigError {
    let span = e.span();
    let mut line = span.as_ref().map(|s| loc.line_at(s.start));
    let mut field = span.as_ref().map(|s| loc.path_at(s)).unwrap_or_default();
    let raw = e.message();
    let message = if let Some(name) = quoted_after(raw, "missing field ") {
        field = join(&field, name);
        if field.contains(['.', '[']) {
            "required field is missing".to_string()
        } else {
            line = None;
            format!("required section [{name}] is missing")
        }
    } else if let Some(name) = quoted_after(raw, "unknown field ") {
        unknown_field_message(&field, name, raw)
    } else {
        humanize(raw)
    };
    ConfigError::new(file, line, field, message)
}

/// The text between the first pair of backticks after `prefix`, when the
/// message starts with it.
fn quoted_after<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(prefix)?.strip_prefix('`')?;
    rest.split('`').next()
}

fn unknown_field_message(path: &str, name: &str, raw: &str) -> String {
    let what = if path.contains(['.', '[']) { "unknown field" } else { "unknown section" };
    let expected: Vec<String> = raw
        .split_once(", expected ")
        .map(|(_, list)| {
            list.trim_start_matches("one of ")
                .split(", ")
                .flat_map(|s| s.split(" or "))
                .map(|s| s.trim().trim_matches('`').to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if expected.is_empty() {
        return format!("{what}; this table takes no fields");
    }
    let hint =
        closest(name, expected.iter().map(String::as_str)).map(|c| format!(" (did you mean {c}?)")).unwrap_or_default();
    format!("{what}, expected one of {}{hint}", expected.join(", "))
}

/// Rust's names for types, in the words of a TOML file.
fn humanize(message: &str) -> String {
    const WORDS: &[(&str, &str)] = &[
        ("expected f64", "expected a number"),
        ("expected u64", "expected a non-negative integer"),
        ("expected u32", "expected a non-negative integer"),
        ("expected i64", "expected an integer"),
        ("expected a sequence", "expected an array"),
        ("expected a map", "expected a table"),
        ("expected a boolean", "expected true or false"),
        ("invalid type: sequence", "invalid type: array"),
        ("invalid type: map", "invalid type: table"),
    ];
    let mut out = message.to_string();
    for (rust, toml) in WORDS {
        out = out.replace(rust, toml);
    }
    if let Some(i) = out.find("expected struct ") {
        out.replace_range(i.., "expected a table");
    }
    out
}

/// The candidate closest to `name` by edit distance, if close enough to
/// be a likely typo.
pub fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(2);
    candidates.map(|c| (edit_distance(name, c), c)).filter(|(d, _)| *d <= limit).min_by_key(|(d, _)| *d).map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// "unknown node `x`", with the closest real name and a few examples.
pub fn unknown_node_message(topology: &Topology, name: &str) -> String {
    let names = || topology.nodes.iter().map(|n| n.name.as_str());
    let hint = closest(name, names()).map(|c| format!("did you mean {c}? ")).unwrap_or_default();
    let first_client = topology.clients().first().map(|&c| topology.name(c));
    let mut examples: Vec<&str> = names().take(3).collect();
    examples.extend(first_client);
    format!(
        "unknown node `{name}` ({hint}nodes are named like {}, ...; {} in all)",
        examples.join(", "),
        topology.nodes.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_finds_typos_only() {
        let fields = ["offset_ms_stddev", "drift_ppm", "epsilon_us"];
        assert_eq!(closest("offset_ms_stdev", fields.iter().copied()), Some("offset_ms_stddev"));
        assert_eq!(closest("banana", fields.iter().copied()), None);
    }

    #[test]
    fn rust_type_names_become_toml_words() {
        assert_eq!(
            humanize("invalid type: string \"x\", expected f64"),
            "invalid type: string \"x\", expected a number"
        );
        assert_eq!(
            humanize("invalid type: integer `3`, expected struct RawRun"),
            "invalid type: integer `3`, expected a table"
        );
    }
}
