//! Sweeps (CONTRACT.md "Sweeps"): an experiment file with a `[sweep]`
//! table names lists of values for dotted fields of the file
//! (`"clients.rate_tps" = [100, 400]`, `protocol.name`,
//! `protocol.params.X`, `faults[0].at_s`), combined as a product (every
//! combination, the last list varying fastest) or zipped (in lockstep),
//! each combination run `repeat` times with seeds `run.seed`,
//! `run.seed + 1`, .... A point is the file with its fields replaced.
//!
//! A point is built by replacing the values in the parsed document and
//! parsing the result as an ordinary experiment file; its errors are placed
//! back in the original file: an error in a swept field at the `[sweep]`
//! line that lists it (with the point's value), any other at the field's own
//! line. Like `meridian sim --protocol`, a point whose `protocol.name` is
//! not the file's own drops the file's `[protocol.params]`.

use crate::diagnose::syntax_error;
use crate::error::ConfigError;
use crate::locate::{Locator, index, is_under, join};
use crate::plots::PlotSpec;
use crate::{Experiment, FILE_COMMENT_LINES_MAX};
use std::path::Path;
use toml::{Table, Value};

/// Most points one sweep may have (product of the list lengths times
/// `repeat`): a sweep is run on one machine or split by `--point`, and its
/// results table is held in memory.
pub const POINTS_MAX: usize = 10_000;
/// Most seeds per point.
pub const REPEAT_MAX: u64 = 1_000;

/// How the lists of a sweep combine.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SweepMode {
    /// Every combination, the list written last varying fastest.
    Product,
    /// The lists in lockstep (all of one length).
    Zip,
}

/// One swept field and its values, in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The dotted field (`clients.rate_tps`, `protocol.params.x`).
    pub path: String,
    pub values: Vec<Value>,
    /// Where the list is written: its path in the document and its line.
    locator_path: String,
    line: Option<usize>,
}

/// One run of a sweep: the fields it replaces and which repetition it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// 0-based, in the order of [`Sweep::points`].
    pub index: usize,
    /// `(field, value)` per axis, in the axes' order.
    pub values: Vec<(String, Value)>,
    /// 0-based repetition: the seed is the point's `run.seed` plus this.
    pub repeat: u64,
}

impl Point {
    /// A short label: the values (strings bare), and the repetition when
    /// there are several; `base` for a file without a sweep.
    pub fn label(&self, repeats: u64) -> String {
        let mut parts: Vec<String> = self.values.iter().map(|(_, v)| value_text(v)).collect();
        if repeats > 1 {
            parts.push(format!("#{}", self.repeat));
        }
        if parts.is_empty() { "base".to_string() } else { parts.join(" ") }
    }
}

/// A value as a reader writes it: strings without quotes.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An experiment file with its sweep and plots.
#[derive(Clone, Debug)]
pub struct Sweep {
    pub file: String,
    /// The file's leading comment block, for the report.
    pub description: String,
    pub axes: Vec<Axis>,
    pub mode: SweepMode,
    pub repeat: u64,
    /// The `[[plots]]` tables, in file order (empty: the default set).
    pub plots: Vec<PlotSpec>,
    /// The document without `[sweep]` and `[[plots]]`.
    base: Table,
    locations: Locator,
    /// The file's own `[protocol] name`, whose parameters the file gives.
    own_protocol: Option<String>,
}

impl Sweep {
    /// Parses a file with or without a sweep (without one it has a single
    /// point, the file itself).
    pub fn from_str(text: &str, file: &str) -> Result<Sweep, ConfigError> {
        let locations = Locator::new(text).map_err(|e| syntax_error(file, text, &e))?;
        let mut base: Table = toml::from_str(text).map_err(|e| syntax_error(file, text, &e))?;
        let at = |field: &str, message: &str| ConfigError::new(file, locations.line_of(field), field, message);
        let (axes, mode, repeat) = match base.remove("sweep") {
            None => (Vec::new(), SweepMode::Product, 1),
            Some(Value::Table(t)) => parse_sweep(file, &locations, &t)?,
            Some(_) => return Err(at("sweep", "must be a table, written [sweep]")),
        };
        let plots = match base.remove("plots") {
            None => Vec::new(),
            Some(Value::Array(items)) => crate::plots::parse_all(file, &locations, &items, &axes)?,
            Some(_) => return Err(at("plots", "must be an array of tables, each written [[plots]]")),
        };
        let own_protocol = base.get("protocol").and_then(|p| p.get("name")).and_then(Value::as_str).map(str::to_string);
        let sweep = Sweep {
            file: file.to_string(),
            description: leading_comments(text),
            axes,
            mode,
            repeat,
            plots,
            base,
            locations,
            own_protocol,
        };
        sweep.check_size()?;
        Ok(sweep)
    }

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Sweep, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(&file, None, "", format!("cannot read the file: {e}")))?;
        Sweep::from_str(&text, &file)
    }

    /// The number of points.
    pub fn len(&self) -> usize {
        self.combinations() * self.repeat as usize
    }

    /// Never true: a file without a sweep has one point.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The swept fields, in file order.
    pub fn paths(&self) -> Vec<&str> {
        self.axes.iter().map(|a| a.path.as_str()).collect()
    }

    /// Point `index` (`None` past the end).
    pub fn point(&self, index: usize) -> Option<Point> {
        if index >= self.len() {
            return None;
        }
        let repeat = (index % self.repeat as usize) as u64;
        let mut combination = index / self.repeat as usize;
        let mut picks = vec![0; self.axes.len()];
        match self.mode {
            SweepMode::Zip => picks.iter_mut().for_each(|p| *p = combination),
            SweepMode::Product => {
                for (pick, axis) in picks.iter_mut().zip(&self.axes).rev() {
                    *pick = combination % axis.values.len();
                    combination /= axis.values.len();
                }
            }
        }
        let values = self.axes.iter().zip(picks).map(|(a, i)| (a.path.clone(), a.values[i].clone())).collect();
        Some(Point { index, values, repeat })
    }

    /// Every point, in index order.
    pub fn points(&self) -> impl Iterator<Item = Point> + '_ {
        (0..self.len()).filter_map(|i| self.point(i))
    }

    /// The experiment of one point, validated as a file is.
    pub fn experiment(&self, point: &Point) -> Result<Experiment, ConfigError> {
        let mut doc = self.base.clone();
        let renamed = point.values.iter().any(|(path, v)| {
            path == "protocol.name" && v.as_str().is_some_and(|n| Some(n) != self.own_protocol.as_deref())
        });
        if renamed {
            if let Some(Value::Table(p)) = doc.get_mut("protocol") {
                p.remove("params");
            }
        }
        for (path, value) in &point.values {
            set_path(&mut doc, path, value.clone()).map_err(|m| self.swept_error(point, path, path, &m))?;
        }
        let text = toml::to_string(&doc).map_err(|e| self.swept_error(point, "sweep", "sweep", &e.to_string()))?;
        let mut exp = Experiment::parse_one(&text, &self.file).map_err(|e| self.place(point, e))?;
        exp.run.seed = exp.run.seed.saturating_add(point.repeat);
        let mut locations = self.locations.clone();
        for axis in &self.axes {
            locations = locations.with_moved(&axis.path, axis.line.unwrap_or(0));
        }
        for (i, fault) in exp.faults.iter_mut().enumerate() {
            fault.line = locations.line_of(&index("faults", i)).unwrap_or(0);
        }
        exp.locations = locations;
        Ok(exp)
    }

    /// Every point's experiment, or the first point's error.
    pub fn validate(&self) -> Result<Vec<Experiment>, ConfigError> {
        self.points().map(|p| self.experiment(&p)).collect()
    }

    /// The line of a field of the file (a swept one: its `[sweep]` line).
    pub fn line_of(&self, field: &str) -> Option<usize> {
        match self.axes.iter().find(|a| is_under(field, &a.path)) {
            Some(axis) => axis.line,
            None => self.locations.line_of(field),
        }
    }

    /// An error about the file itself (`--point` out of range and such).
    pub fn error_at(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(&self.file, self.line_of(field), field, message)
    }

    fn combinations(&self) -> usize {
        match self.mode {
            SweepMode::Zip => self.axes.first().map_or(1, |a| a.values.len()),
            SweepMode::Product => self.axes.iter().fold(1usize, |n, a| n.saturating_mul(a.values.len())),
        }
    }

    fn check_size(&self) -> Result<(), ConfigError> {
        if self.mode == SweepMode::Zip {
            if let Some(first) = self.axes.first() {
                if let Some(other) = self.axes.iter().find(|a| a.values.len() != first.values.len()) {
                    return Err(ConfigError::new(
                        &self.file,
                        other.line,
                        &other.locator_path,
                        format!(
                            "has {} values but {} has {}: in zip mode the lists run in lockstep and must be of one length",
                            other.values.len(),
                            first.locator_path,
                            first.values.len()
                        ),
                    ));
                }
            }
        }
        let points = self.combinations().saturating_mul(self.repeat as usize);
        if points > POINTS_MAX {
            return Err(self.error_at("sweep", format!("{points} points, more than {POINTS_MAX}: split the file")));
        }
        Ok(())
    }

    /// An error in a swept field of one point, at the `[sweep]` line.
    fn swept_error(&self, point: &Point, path: &str, field: &str, message: &str) -> ConfigError {
        let value = point.values.iter().find(|(p, _)| p == path).map(|(_, v)| v.to_string()).unwrap_or_default();
        ConfigError::new(
            &self.file,
            self.line_of(path),
            field,
            format!("{message} (sweep point {}: {path} = {value})", point.index),
        )
    }

    /// A point's parse error placed in the original file.
    fn place(&self, point: &Point, e: ConfigError) -> ConfigError {
        match point.values.iter().find(|(path, _)| is_under(&e.field, path)) {
            Some((path, _)) => self.swept_error(point, path, &e.field, &e.message),
            None => ConfigError { line: self.locations.line_of(&e.field), ..e },
        }
    }
}

/// The `[sweep]` table: its lists (nested tables flattened into dotted
/// paths) in file order, the mode and the repetitions.
fn parse_sweep(file: &str, loc: &Locator, table: &Table) -> Result<(Vec<Axis>, SweepMode, u64), ConfigError> {
    let at = |field: &str, message: String| ConfigError::new(file, loc.line_of(field), field, message);
    let mut mode = SweepMode::Product;
    let mut repeat = 1;
    let mut axes = Vec::new();
    for (key, value) in table {
        let field = join("sweep", key);
        match (key.as_str(), value) {
            ("mode", Value::String(s)) if s == "product" => mode = SweepMode::Product,
            ("mode", Value::String(s)) if s == "zip" => mode = SweepMode::Zip,
            ("mode", other) => return Err(at(&field, format!("must be \"product\" or \"zip\", got {other}"))),
            ("repeat", Value::Integer(n)) if (1..=REPEAT_MAX as i64).contains(n) => repeat = *n as u64,
            ("repeat", other) => {
                return Err(at(&field, format!("must be an integer from 1 to {REPEAT_MAX}, got {other}")));
            }
            _ => collect_axes(file, loc, "", "sweep", key, value, &mut axes)?,
        }
    }
    axes.sort_by_key(|a: &(usize, Axis)| a.0);
    let axes: Vec<Axis> = axes.into_iter().map(|(_, a)| a).collect();
    for (i, a) in axes.iter().enumerate() {
        if let Some(b) = axes[..i].iter().find(|b| is_under(&a.path, &b.path) || is_under(&b.path, &a.path)) {
            return Err(at(&a.locator_path, format!("sweeps {} again (also swept as {})", a.path, b.locator_path)));
        }
    }
    Ok((axes, mode, repeat))
}

/// One `[sweep]` entry: a list is an axis, a table holds more entries
/// (`[sweep.clients]` or unquoted dotted keys); anything else is an error.
fn collect_axes(
    file: &str,
    loc: &Locator,
    prefix: &str,
    locator_prefix: &str,
    key: &str,
    value: &Value,
    axes: &mut Vec<(usize, Axis)>,
) -> Result<(), ConfigError> {
    let path = if prefix.is_empty() { key.to_string() } else { format!("{prefix}.{key}") };
    let locator_path = join(locator_prefix, key);
    let at = |message: String| ConfigError::new(file, loc.line_of(&locator_path), &locator_path, message);
    match value {
        Value::Array(values) if values.is_empty() => {
            Err(at("an empty list sweeps nothing: give at least one value".into()))
        }
        Value::Array(values) => {
            parse_path(&path).map_err(at)?;
            let offset = loc.offset_of(&locator_path).unwrap_or(usize::MAX);
            let line = loc.line_of(&locator_path);
            axes.push((offset, Axis { path, values: values.clone(), locator_path, line }));
            Ok(())
        }
        Value::Table(inner) => {
            for (k, v) in inner {
                collect_axes(file, loc, &path, &locator_path, k, v, axes)?;
            }
            Ok(())
        }
        other => Err(at(format!("must be a list of values to sweep, e.g. [{other}]"))),
    }
}

/// One step of a dotted path.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// `a.b[2].c` as steps; keys are bare TOML keys.
fn parse_path(path: &str) -> Result<Vec<Step>, String> {
    let bad = || format!("`{path}` is not a field path (dotted keys, `[i]` for an array element)");
    let mut steps = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        let bare = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !bare {
            return Err(bad());
        }
        steps.push(Step::Key(key.to_string()));
        while !rest.is_empty() {
            let (n, after) = rest.split_once(']').ok_or_else(bad)?;
            steps.push(Step::Index(n.parse().map_err(|_| bad())?));
            rest = after.strip_prefix('[').unwrap_or(after);
            if !after.is_empty() && !after.starts_with('[') {
                return Err(bad());
            }
        }
    }
    Ok(steps)
}

/// Replaces (or adds) the field at `path` in `doc`.
fn set_path(doc: &mut Table, path: &str, value: Value) -> Result<(), String> {
    let steps = parse_path(path)?;
    let mut root = Value::Table(std::mem::take(doc));
    let result = set_steps(&mut root, &steps, value);
    if let Value::Table(t) = root {
        *doc = t;
    }
    result
}

fn set_steps(node: &mut Value, steps: &[Step], value: Value) -> Result<(), String> {
    let Some((step, rest)) = steps.split_first() else {
        *node = value;
        return Ok(());
    };
    let next = match (node, step) {
        (Value::Table(t), Step::Key(k)) if rest.is_empty() => {
            t.insert(k.clone(), value);
            return Ok(());
        }
        (Value::Table(t), Step::Key(k)) => t.entry(k.clone()).or_insert_with(|| Value::Table(Table::new())),
        (Value::Array(items), Step::Index(i)) => {
            let len = items.len();
            items.get_mut(*i).ok_or_else(|| format!("there is no element [{i}]: the file has {len}"))?
        }
        (_, Step::Key(k)) => return Err(format!("`{k}` is inside a value that is not a table")),
        (_, Step::Index(i)) => return Err(format!("[{i}] indexes a value that is not an array")),
    };
    set_steps(next, rest, value)
}

/// The comment lines that open a file, without their `#`.
fn leading_comments(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .take_while(|l| l.trim_start().starts_with('#'))
        .take(FILE_COMMENT_LINES_MAX)
        .map(|l| l.trim_start().trim_start_matches('#').strip_prefix(' ').unwrap_or_else(|| l.trim_start_matches('#')))
        .collect();
    lines.join("\n").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "# A sweep.\n# Two lines.\n[cluster]\npreset = \"tiga-gcp\"\nserver_regions = [\"south-carolina\", \"finland\", \"brazil\"]\nshards = 2\n\n[clients]\nmode = \"open\"\nrate_tps = 10\n\n[run]\nduration_s = 2.0\nseed = 5\n\n[protocol]\nname = \"tiga\"\n[protocol.params]\nheadroom_delta_ms = 3.0\n";

    fn sweep(extra: &str) -> Result<Sweep, ConfigError> {
        Sweep::from_str(&format!("{BASE}{extra}"), "s.toml")
    }

    #[test]
    fn product_varies_the_last_list_fastest_and_repeats_seeds() {
        let s =
            sweep("[sweep]\n\"protocol.name\" = [\"2pl-paxos\", \"tiga\"]\nclients.rate_tps = [1, 2, 3]\nrepeat = 2\n")
                .unwrap();
        assert_eq!(s.paths(), ["protocol.name", "clients.rate_tps"]);
        assert_eq!(s.len(), 12);
        let p = s.point(7).unwrap();
        assert_eq!(p.values[0].1.as_str(), Some("tiga"));
        assert_eq!(p.values[1].1.as_integer(), Some(1));
        assert_eq!(p.repeat, 1);
        let e = s.experiment(&p).unwrap();
        assert_eq!(e.run.seed, 6);
        assert_eq!(e.protocol.params.iter().count(), 1, "tiga is the file's own protocol: its params stay");
        let e = s.experiment(&s.point(0).unwrap()).unwrap();
        assert_eq!((e.protocol.name.as_str(), e.protocol.params.iter().count(), e.run.seed), ("2pl-paxos", 0, 5));
        assert_eq!(s.description, "A sweep.\nTwo lines.");
    }

    #[test]
    fn zip_runs_lists_in_lockstep_and_refuses_unequal_lengths() {
        let s = sweep("[sweep]\nmode = \"zip\"\n\"clients.rate_tps\" = [1, 2]\n\"run.seed\" = [8, 9]\n").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.experiment(&s.point(1).unwrap()).unwrap().run.seed, 9);
        let e = sweep("[sweep]\nmode = \"zip\"\n\"clients.rate_tps\" = [1, 2]\n\"run.seed\" = [8]\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(23), "sweep.\"run.seed\""), "{e}");
    }

    #[test]
    fn bad_sweeps_are_placed_at_their_line() {
        let e = sweep("[sweep]\n\"clients.rate_tps\" = []\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(21), "sweep.\"clients.rate_tps\""), "{e}");
        let s = sweep("[sweep]\n\"clients.rate_tps\" = [1, -4]\n").unwrap();
        let e = s.validate().unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(21), "clients.rate_tps"), "{e}");
        assert!(e.message.contains("sweep point 1"), "{e}");
        let e = sweep("[sweep]\nmode = \"cross\"\n").unwrap_err();
        assert_eq!(e.field, "sweep.mode");
        let e = sweep("[sweep]\n\"clients.rate_tps\" = 4\n").unwrap_err();
        assert!(e.message.contains("list"), "{e}");
    }

    #[test]
    fn unknown_swept_fields_are_named_at_the_sweep_line() {
        let s = sweep("[sweep]\n\"clients.rate_tpz\" = [1]\n");
        // Unknown fields are found when the point is parsed.
        let e = match s {
            Ok(s) => s.validate().unwrap_err(),
            Err(e) => e,
        };
        assert_eq!(e.line, Some(21), "{e}");
        assert!(e.field.contains("rate_tpz"), "{e}");
    }

    #[test]
    fn paths_parse_keys_and_indexes() {
        assert_eq!(
            parse_path("faults[0].at_s").unwrap(),
            [Step::Key("faults".into()), Step::Index(0), Step::Key("at_s".into())]
        );
        assert!(parse_path("a..b").is_err());
        assert!(parse_path("a[x]").is_err());
        let mut t: Table = toml::from_str("[a]\nb = [{c = 1}]\n").unwrap();
        set_path(&mut t, "a.b[0].c", Value::Integer(2)).unwrap();
        assert_eq!(t["a"]["b"][0]["c"].as_integer(), Some(2));
        assert!(set_path(&mut t, "a.b[3].c", Value::Integer(2)).is_err());
    }
}
