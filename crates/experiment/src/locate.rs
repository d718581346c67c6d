//! Where things are in an experiment file: a map between byte spans, dotted
//! field paths (`cluster.shards`, `faults[2].node`, `network.rtt_ms.a-b`)
//! and 1-based line numbers, built from toml's spanned parse.
//!
//! Serde errors carry a span; [`Locator::path_at`] names the field it
//! belongs to. Checks made after typing know the field; [`Locator::line_of`]
//! finds its line (or its nearest enclosing table's).

use std::ops::Range;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// One key or array element of the document.
#[derive(Clone, Debug)]
struct Entry {
    path: String,
    key_span: Option<Range<usize>>,
    value_span: Range<usize>,
    /// TOML type of the value (`table`, `array`, `string`, ...).
    kind: &'static str,
}

/// Spans, paths and lines of one document.
#[derive(Clone, Debug, Default)]
pub struct Locator {
    entries: Vec<Entry>,
    /// Byte offset where each line starts.
    line_starts: Vec<usize>,
    /// Fields placed elsewhere than where the document writes them: a
    /// sweep point's swept fields are at their `[sweep]` line.
    moved: Vec<(String, usize)>,
}

/// `parent.key`, quoting keys that are not bare TOML keys.
pub fn join(parent: &str, key: &str) -> String {
    let bare = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let key = if bare { key.to_string() } else { format!("{key:?}") };
    if parent.is_empty() { key } else { format!("{parent}.{key}") }
}

/// `parent[index]`.
pub fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

impl Locator {
    /// Indexes a document that parses; `None` when it does not.
    pub fn new(text: &str) -> Result<Locator, toml::de::Error> {
        let root = DeTable::parse(text)?;
        let mut loc = Locator { entries: Vec::new(), line_starts: line_starts(text), moved: Vec::new() };
        loc.add_table("", root.get_ref());
        Ok(loc)
    }

    /// A locator that only knows lines (for files that do not parse).
    pub fn lines_only(text: &str) -> Locator {
        Locator { entries: Vec::new(), line_starts: line_starts(text), moved: Vec::new() }
    }

    fn add_table(&mut self, path: &str, table: &DeTable<'_>) {
        for (key, value) in table.iter() {
            let path = join(path, key.get_ref());
            self.entries.push(Entry {
                path: path.clone(),
                key_span: Some(key.span()),
                value_span: value.span(),
                kind: value.get_ref().type_str(),
            });
            self.add_value(&path, value);
        }
    }

    fn add_value(&mut self, path: &str, value: &Spanned<DeValue<'_>>) {
        match value.get_ref() {
            DeValue::Table(t) => self.add_table(path, t),
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let path = index(path, i);
                    self.entries.push(Entry {
                        path: path.clone(),
                        key_span: None,
                        value_span: item.span(),
                        kind: item.get_ref().type_str(),
                    });
                    self.add_value(&path, item);
                }
            }
            _ => {}
        }
    }

    /// The TOML type of a field's value, when the field is written.
    pub fn kind_of(&self, path: &str) -> Option<&'static str> {
        self.entries.iter().find(|e| e.path == path).map(|e| e.kind)
    }

    /// 1-based line of a byte offset.
    pub fn line_at(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&start| start <= offset)
    }

    /// The dotted path of the field a span belongs to: the deepest entry
    /// whose key or value span is exactly this span (the first element of
    /// an array of tables shares its header with the array), else the
    /// tightest one containing it; the document root (`""`) when none does.
    pub fn path_at(&self, span: &Range<usize>) -> String {
        let exact = self.entries.iter().rev().find(|e| e.key_span.as_ref() == Some(span) || e.value_span == *span);
        if let Some(e) = exact {
            return e.path.clone();
        }
        if span.is_empty() {
            return String::new();
        }
        self.entries
            .iter()
            .flat_map(|e| e.key_span.iter().chain([&e.value_span]).map(move |s| (s, e)))
            .filter(|(s, _)| s.start <= span.start && span.end <= s.end)
            .min_by_key(|(s, _)| s.end - s.start)
            .map(|(_, e)| e.path.clone())
            .unwrap_or_default()
    }

    /// The byte offset where a field's key (or an element's value) starts.
    pub fn offset_of(&self, path: &str) -> Option<usize> {
        let e = self.entries.iter().find(|e| e.path == path)?;
        Some(e.key_span.as_ref().unwrap_or(&e.value_span).start)
    }

    /// This locator with `field` (and everything under it) placed at
    /// `line`.
    pub fn with_moved(mut self, field: &str, line: usize) -> Locator {
        self.moved.push((field.to_string(), line));
        self
    }

    /// The line of a field, or of its nearest enclosing table or element
    /// that is written in the file.
    pub fn line_of(&self, path: &str) -> Option<usize> {
        if let Some((_, line)) = self.moved.iter().find(|(moved, _)| is_under(path, moved)) {
            return Some(*line);
        }
        let mut path = path;
        loop {
            if let Some(e) = self.entries.iter().find(|e| e.path == path) {
                let span = e.key_span.as_ref().unwrap_or(&e.value_span);
                return Some(self.line_at(span.start));
            }
            path = parent(path)?;
        }
    }
}

/// Whether `path` is `field` or a field inside it (`a.b[1]`, `a.b.c`).
pub fn is_under(path: &str, field: &str) -> bool {
    path.strip_prefix(field).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// The path one level up: `a.b[2].c` → `a.b[2]` → `a.b` → `a` → none.
fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    if path.ends_with(']') {
        return path.rfind('[').map(|i| &path[..i]);
    }
    Some(match path.rfind('.') {
        Some(i) => &path[..i],
        None => "",
    })
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect()
}

/// A best guess at the field a syntax error is in, from the text alone:
/// the table header in force at that line and the key written on it.
pub fn guess_field(text: &str, line: usize) -> String {
    let mut table = String::new();
    let mut arrays: Vec<(String, usize)> = Vec::new();
    for (i, raw) in text.lines().enumerate().take(line) {
        let l = raw.trim();
        let is_error_line = i + 1 == line;
        if let Some(name) = header_name(l) {
            table = if l.starts_with("[[") {
                let n = count_array_table(&mut arrays, &name);
                index(&name, n)
            } else {
                name
            };
            if is_error_line {
                return table;
            }
        } else if is_error_line {
            if let Some((key, _)) = l.split_once('=') {
                let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
                if !key.is_empty() && !key.starts_with('#') {
                    return join(&table, key);
                }
            }
        }
    }
    table
}

fn header_name(line: &str) -> Option<String> {
    let rest = line.strip_prefix('[')?;
    let rest = rest.strip_prefix('[').unwrap_or(rest);
    let name = rest.split(']').next().unwrap_or(rest);
    Some(name.trim().to_string())
}

fn count_array_table(arrays: &mut Vec<(String, usize)>, name: &str) -> usize {
    match arrays.iter_mut().find(|(n, _)| n == name) {
        Some((_, count)) => {
            *count += 1;
            *count - 1
        }
        None => {
            arrays.push((name.to_string(), 1));
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "[cluster]\nshards = 3\n\n[network]\nrtt_ms = { \"a-b\" = 1.0, \"x y\" = 2 }\n\n[[faults]]\nat_s = 1\n[[faults]]\nat_s = 2\nnode = \"n\"\n";

    #[test]
    fn paths_and_lines_round_trip() {
        let loc = Locator::new(DOC).unwrap();
        assert_eq!(loc.line_of("cluster.shards"), Some(2));
        assert_eq!(loc.line_of("network.rtt_ms.a-b"), Some(5));
        assert_eq!(loc.line_of("network.rtt_ms.\"x y\""), Some(5));
        assert_eq!(loc.line_of("faults[1]"), Some(9));
        assert_eq!(loc.line_of("faults[1].node"), Some(11));
        assert_eq!(loc.line_of("faults[1].by_ms"), Some(9), "falls back to the element");
        assert_eq!(loc.line_of("clock.drift_ppm"), None);
        let at = DOC.find("\"n\"").unwrap();
        assert_eq!(loc.path_at(&(at..at + 3)), "faults[1].node");
        let key = DOC.find("shards").unwrap();
        assert_eq!(loc.path_at(&(key..key + 6)), "cluster.shards");
        assert_eq!(loc.path_at(&(0..0)), "");
    }

    #[test]
    fn syntax_errors_get_a_guessed_field() {
        let text = "[cluster]\nshards = \n[[faults]]\nat_s = 1\n[[faults]]\nkind = crash\n";
        assert_eq!(guess_field(text, 2), "cluster.shards");
        assert_eq!(guess_field(text, 6), "faults[1].kind");
        assert_eq!(guess_field(text, 5), "faults[1]");
        assert_eq!(guess_field("[clock\n", 1), "clock");
    }

    #[test]
    fn parents_climb_one_level() {
        assert_eq!(parent("a.b[2].c"), Some("a.b[2]"));
        assert_eq!(parent("a.b[2]"), Some("a.b"));
        assert_eq!(parent("a"), Some(""));
        assert_eq!(parent(""), None);
    }
}
