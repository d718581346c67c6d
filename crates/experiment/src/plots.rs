//! `[[plots]]` tables of a sweep file: which plots `meridian experiment`
//! draws (without any, it draws a default set), and the names of the
//! results' columns a plot may use.
//!
//! ```toml
//! [[plots]]
//! kind = "line"                      # line | bar | cdf | timeline
//! x = "clients.rate_tps"             # a swept field or a results column
//! y = "latency_p50_ms.region.*"      # a results column; `.*` draws one panel per region or type
//! series = "protocol.name"           # a swept field: one line (or bar) per value
//! title = "Median latency per region"
//! ```

use crate::error::ConfigError;
use crate::locate::{Locator, index, join};
use crate::sweep::Axis;
use toml::Value;

/// Most `[[plots]]` tables in one file.
pub const PLOTS_MAX: usize = 64;

/// What a plot draws.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PlotKind {
    /// `y` against `x`, one line per series value.
    Line,
    /// `y` per series value, grouped by region or type for `.*` columns.
    Bar,
    /// Latency CDFs, one curve per point (or series value).
    Cdf,
    /// Commits per second over the run, one line per point.
    Timeline,
}

impl PlotKind {
    pub fn name(self) -> &'static str {
        match self {
            PlotKind::Line => "line",
            PlotKind::Bar => "bar",
            PlotKind::Cdf => "cdf",
            PlotKind::Timeline => "timeline",
        }
    }
}

/// One `[[plots]]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct PlotSpec {
    pub kind: PlotKind,
    /// Line plots: a swept field or a column (default: the first swept
    /// field with numbers).
    pub x: Option<String>,
    /// A column, possibly ending in `.*` (default by kind:
    /// `latency_p50_ms`, or `latency_ms` for CDFs).
    pub y: Option<String>,
    /// A swept field (default: every swept field other than `x`).
    pub series: Option<String>,
    pub title: Option<String>,
    /// 1-based line of the table in the file.
    pub line: Option<usize>,
}

/// The columns of every results row, besides the swept fields: their names
/// and units. Per region, type, counter and abort reason, a column has a
/// suffix: `latency_p50_ms.region.NAME`, `latency_p50_ms.type.NAME`,
/// `counter.NAME`, `aborts.REASON`, `observation.NAME.STAT` (STAT one of
/// mean, p50, p99, max).
pub const METRICS: &[(&str, &str)] = &[
    ("point", "the point's index"),
    ("seed", "the run's seed"),
    ("protocol", "the protocol"),
    ("throughput_tps", "committed transactions per second after warm-up (txn/s)"),
    ("offered_tps", "open loop: the rate the clients were asked for (txn/s)"),
    ("sent_tps", "transactions started per second (txn/s)"),
    ("committed", "transactions committed"),
    ("aborted", "transactions aborted after their retries"),
    ("unknown", "transactions with an unknown outcome"),
    ("abort_rate_pct", "aborted / all transactions (%)"),
    ("attempt_abort_rate_pct", "aborted attempts (retried or not) / attempts (%)"),
    ("latency_p50_ms", "median latency (ms)"),
    ("latency_p90_ms", "90th percentile latency (ms)"),
    ("latency_p99_ms", "99th percentile latency (ms)"),
    ("up_to_date_reads_pct", "reads that saw the newest committed version (%)"),
    ("staleness_p50_ms", "median staleness of stale reads (ms)"),
    ("staleness_p90_ms", "90th percentile staleness of stale reads (ms)"),
    ("staleness_p99_ms", "99th percentile staleness of stale reads (ms)"),
    ("simulated_s", "simulated seconds"),
    ("events", "simulated events"),
    ("check", "the history check's verdict: valid, INVALID, or unchecked"),
];

/// Column families with a name after them.
const FAMILIES: [&str; 11] = [
    "latency_p50_ms.region.",
    "latency_p90_ms.region.",
    "latency_p99_ms.region.",
    "latency_p50_ms.type.",
    "latency_p90_ms.type.",
    "latency_p99_ms.type.",
    "counter.",
    "aborts.",
    "observation.",
    "latency_ms.type.",
    "latency_ms.region.",
];

/// Whether `name` is a results column (or, with `.*`, a family of them).
/// `latency_ms` (with `.type.T` or `.region.R`) names a CDF.
pub fn is_metric(name: &str) -> bool {
    name == "latency_ms"
        || METRICS.iter().any(|(m, _)| *m == name)
        || FAMILIES.iter().any(|f| name.strip_prefix(f).is_some_and(|rest| !rest.is_empty()))
}

/// Every `[[plots]]` table.
pub fn parse_all(file: &str, loc: &Locator, items: &[Value], axes: &[Axis]) -> Result<Vec<PlotSpec>, ConfigError> {
    if items.len() > PLOTS_MAX {
        return Err(ConfigError::new(file, loc.line_of("plots"), "plots", format!("more than {PLOTS_MAX} plots")));
    }
    items.iter().enumerate().map(|(i, item)| parse_one(file, loc, &index("plots", i), item, axes)).collect()
}

fn parse_one(file: &str, loc: &Locator, path: &str, item: &Value, axes: &[Axis]) -> Result<PlotSpec, ConfigError> {
    let at = |field: &str, message: String| ConfigError::new(file, loc.line_of(field), field, message);
    let Value::Table(table) = item else {
        return Err(at(path, "must be a table, written [[plots]]".into()));
    };
    let mut spec =
        PlotSpec { kind: PlotKind::Line, x: None, y: None, series: None, title: None, line: loc.line_of(path) };
    for (key, value) in table {
        let field = join(path, key);
        let Value::String(text) = value else {
            return Err(at(&field, format!("must be a string, got {value}")));
        };
        match key.as_str() {
            "kind" => {
                spec.kind = kind(text).ok_or_else(|| {
                    at(&field, format!("unknown kind `{text}`, expected one of line, bar, cdf, timeline"))
                })?
            }
            "x" => spec.x = Some(text.clone()),
            "y" => spec.y = Some(text.clone()),
            "series" => spec.series = Some(text.clone()),
            "title" => spec.title = Some(text.clone()),
            other => {
                return Err(at(&field, format!("unknown field `{other}`, expected one of kind, x, y, series, title")));
            }
        }
    }
    let swept = |name: &str| axes.iter().any(|a| a.path == name);
    if let Some(x) = &spec.x {
        if !swept(x) && !is_metric(x) {
            return Err(at(&join(path, "x"), format!("`{x}` is neither a swept field nor a results column")));
        }
    }
    if let Some(y) = &spec.y {
        let family = y.strip_suffix(".*").map(|f| format!("{f}.x"));
        if !is_metric(family.as_deref().unwrap_or(y)) {
            return Err(at(
                &join(path, "y"),
                format!("`{y}` is not a results column (docs/experiments.md lists them)"),
            ));
        }
    }
    if let Some(series) = &spec.series {
        if !swept(series) && series != "point" {
            return Err(at(&join(path, "series"), format!("`{series}` is not a swept field (or `point`)")));
        }
    }
    Ok(spec)
}

fn kind(name: &str) -> Option<PlotKind> {
    [PlotKind::Line, PlotKind::Bar, PlotKind::Cdf, PlotKind::Timeline].into_iter().find(|k| k.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_and_families() {
        assert!(is_metric("throughput_tps"));
        assert!(is_metric("latency_p50_ms.region.finland"));
        assert!(is_metric("counter.fast_path"));
        assert!(!is_metric("counter."));
        assert!(!is_metric("latency_p55_ms"));
    }
}
