//! What to draw: each `[[plots]]` table (or the default set) turned into a
//! [`Figure`] of panels holding plain numbers, from the results table and
//! the points' reports. Drawing them is `draw`'s business.

use crate::results::{Row, Table};
use meridian_experiment::{Axis, METRICS, PlotKind, PlotSpec, Point, value_text};
use serde_json::Value as Json;

/// Most lines (or bars) per panel: more would be unreadable.
pub const SERIES_MAX: usize = 12;
/// Most panels per figure (regions, types).
pub const PANELS_MAX: usize = 12;

/// One plot file: a title and its panels.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// File stem (`01-line-latency_p50_ms`).
    pub name: String,
    pub title: String,
    pub panels: Vec<Panel>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub data: PanelData,
}

#[derive(Clone, Debug, PartialEq)]
pub enum PanelData {
    /// Lines through points; `markers` marks each point.
    Lines { series: Vec<Series>, markers: bool },
    /// Groups of bars: one group per category, one bar per series.
    Bars { categories: Vec<String>, series: Vec<(String, Vec<Option<f64>>)> },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// What the figures are made from.
pub struct Input<'a> {
    pub axes: &'a [Axis],
    pub repeat: u64,
    pub table: &'a Table,
    /// Every point with its report, in index order.
    pub points: &'a [(Point, Json)],
}

/// The figures of `specs`, or of the default set when there are none.
pub fn figures(input: &Input<'_>, specs: &[PlotSpec]) -> Vec<Figure> {
    let specs = if specs.is_empty() { default_specs(input) } else { specs.to_vec() };
    specs
        .iter()
        .enumerate()
        .filter_map(|(i, spec)| {
            let mut fig = figure(input, spec)?;
            let what = spec.y.as_deref().unwrap_or("default").replace(".*", "-each").replace(['.', '/', ' '], "-");
            fig.name = format!("{:02}-{}-{}", i + 1, spec.kind.name(), what);
            if let Some(t) = &spec.title {
                fig.title = t.clone();
            }
            Some(fig)
        })
        .collect()
}

fn figure(input: &Input<'_>, spec: &PlotSpec) -> Option<Figure> {
    let fig = match spec.kind {
        PlotKind::Line => line_figure(input, spec),
        PlotKind::Bar => bar_figure(input, spec),
        PlotKind::Cdf => cdf_figure(input, spec),
        PlotKind::Timeline => timeline_figure(input),
    }?;
    (!fig.panels.is_empty()).then_some(fig)
}

/// The default set: against the first numeric swept field, latency,
/// throughput and aborts (and latency against throughput when it sets the
/// load); per point, latency by region, CDFs and the commit timeline.
fn default_specs(input: &Input<'_>) -> Vec<PlotSpec> {
    let spec = |kind, x: Option<&str>, y: &str| PlotSpec {
        kind,
        x: x.map(str::to_string),
        y: Some(y.to_string()),
        series: None,
        title: None,
        line: None,
    };
    let mut specs = Vec::new();
    if let Some(x) = numeric_axes(input).first().map(|a| a.path.as_str()) {
        if x.starts_with("clients.") {
            specs.push(spec(PlotKind::Line, Some("throughput_tps"), "latency_p50_ms"));
            specs.push(spec(PlotKind::Line, Some("throughput_tps"), "latency_p50_ms.region.*"));
        }
        for y in ["latency_p50_ms", "latency_p99_ms", "throughput_tps", "abort_rate_pct", "latency_p50_ms.region.*"] {
            specs.push(spec(PlotKind::Line, Some(x), y));
        }
    }
    specs.push(spec(PlotKind::Bar, None, "latency_p50_ms.region.*"));
    specs.push(spec(PlotKind::Cdf, None, "latency_ms"));
    specs.push(spec(PlotKind::Cdf, None, "latency_ms.region.*"));
    if cdf_keys(input, "latency_cdf_ms").len() > 1 {
        specs.push(spec(PlotKind::Cdf, None, "latency_ms.type.*"));
    }
    specs.push(spec(PlotKind::Timeline, None, "committed_per_s"));
    specs
}

/// Swept fields whose values are all numbers (the seed aside).
fn numeric_axes<'a>(input: &Input<'a>) -> Vec<&'a Axis> {
    input
        .axes
        .iter()
        .filter(|a| a.path != "run.seed" && a.values.iter().all(|v| v.is_integer() || v.is_float()))
        .collect()
}

/// Which series a row belongs to: the values of `series` (the given field,
/// or every swept field but `x`, the seed and, when `x` is a results
/// column, the first numeric swept field, which sets it).
fn series_fields(input: &Input<'_>, series: Option<&str>, x: Option<&str>) -> Vec<String> {
    if let Some(s) = series {
        return vec![s.to_string()];
    }
    let x_is_axis = x.is_some_and(|x| input.axes.iter().any(|a| a.path == x));
    let driver = if x.is_some() && !x_is_axis { numeric_axes(input).first().map(|a| a.path.clone()) } else { None };
    input
        .axes
        .iter()
        .map(|a| a.path.clone())
        .filter(|p| Some(p.as_str()) != x && p != "run.seed" && Some(p) != driver.as_ref())
        .collect()
}

fn series_label(row: &Row, fields: &[String]) -> String {
    if fields.iter().any(|f| f == "point") {
        return Table::get(row, "point").map(cell_text).unwrap_or_default();
    }
    let parts: Vec<String> =
        fields.iter().filter_map(|f| Table::get(row, f)).map(cell_text).filter(|t| !t.is_empty()).collect();
    if parts.is_empty() { "all".to_string() } else { parts.join(" ") }
}

/// A cell as a legend shows it; a swept table of parameters (RAMP-OPW's
/// `protocol.params = { one_phase_writes = true }`) as `name=value` pairs,
/// an empty one as nothing.
fn cell_text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Object(m) => m.iter().map(|(k, v)| format!("{k}={}", cell_text(v))).collect::<Vec<_>>().join(" "),
        other => other.to_string(),
    }
}

fn num(row: &Row, column: &str) -> Option<f64> {
    Table::get(row, column).and_then(Json::as_f64)
}

/// `y`, or with a trailing `.*` every column of that family: `(panel
/// title, column)`.
fn expand(table: &Table, y: &str) -> Vec<(String, String)> {
    match y.strip_suffix('*') {
        Some(prefix) => table
            .columns
            .iter()
            .filter_map(|c| c.strip_prefix(prefix).map(|name| (name.to_string(), c.clone())))
            .take(PANELS_MAX)
            .collect(),
        None => vec![(String::new(), y.to_string())],
    }
}

/// Rows grouped by series label, in order of first appearance.
fn groups<'a>(table: &'a Table, fields: &[String]) -> Vec<(String, Vec<&'a Row>)> {
    let mut out: Vec<(String, Vec<&Row>)> = Vec::new();
    for row in &table.rows {
        let label = series_label(row, fields);
        match out.iter_mut().find(|(l, _)| *l == label) {
            Some((_, rows)) => rows.push(row),
            None => out.push((label, vec![row])),
        }
    }
    out.truncate(SERIES_MAX);
    out
}

fn line_figure(input: &Input<'_>, spec: &PlotSpec) -> Option<Figure> {
    let x = spec.x.clone().or_else(|| numeric_axes(input).first().map(|a| a.path.clone()))?;
    let y = spec.y.clone().unwrap_or_else(|| "latency_p50_ms".into());
    if !input.table.rows.iter().all(|r| num(r, &x).is_some()) {
        return bar_figure(input, &PlotSpec { kind: PlotKind::Bar, x: Some(x), ..spec.clone() });
    }
    let fields = series_fields(input, spec.series.as_deref(), Some(&x));
    let x_is_axis = input.axes.iter().any(|a| a.path == x);
    let panels = expand(input.table, &y)
        .into_iter()
        .map(|(title, column)| {
            let series = groups(input.table, &fields)
                .into_iter()
                .map(|(label, rows)| Series { label, points: curve(input, &rows, &x, &column, &fields, x_is_axis) })
                .filter(|s| !s.points.is_empty())
                .collect();
            Panel {
                title,
                x_label: label_of(&x),
                y_label: label_of(&column),
                data: PanelData::Lines { series, markers: true },
            }
        })
        .collect();
    Some(Figure { name: String::new(), title: format!("{} vs {}", short_label(&y), short_label(&x)), panels })
}

/// One series' points: rows that differ only in their seed are one point
/// (the medians); sorted by `x` when `x` is swept, else in point order.
fn curve(input: &Input<'_>, rows: &[&Row], x: &str, y: &str, series: &[String], sort: bool) -> Vec<(f64, f64)> {
    let key_fields: Vec<&str> = input
        .axes
        .iter()
        .map(|a| a.path.as_str())
        .filter(|p| !series.iter().any(|s| s == p) && *p != "run.seed")
        .collect();
    let mut keyed: Vec<(String, Vec<f64>, Vec<f64>)> = Vec::new();
    for row in rows {
        let (Some(xv), Some(yv)) = (num(row, x), num(row, y)) else { continue };
        let key: Vec<String> = key_fields.iter().filter_map(|f| Table::get(row, f)).map(cell_text).collect();
        let key = key.join("\u{1f}");
        match keyed.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, xs, ys)) => {
                xs.push(xv);
                ys.push(yv);
            }
            None => keyed.push((key, vec![xv], vec![yv])),
        }
    }
    let mut points: Vec<(f64, f64)> = keyed.into_iter().map(|(_, xs, ys)| (median(xs), median(ys))).collect();
    if sort {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    points
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A bar's value: the row and the category's index.
type CellFn = Box<dyn Fn(&Row, usize) -> Option<f64>>;

fn bar_figure(input: &Input<'_>, spec: &PlotSpec) -> Option<Figure> {
    let y = spec.y.clone().unwrap_or_else(|| "latency_p50_ms".into());
    let fields = match &spec.series {
        Some(s) => vec![s.clone()],
        None => series_fields(input, None, spec.x.as_deref()),
    };
    let (categories, cell) = bar_categories(input.table, spec.x.clone(), &y);
    let series: Vec<(String, Vec<Option<f64>>)> = groups(input.table, &fields)
        .into_iter()
        .map(|(label, rows)| {
            let values = (0..categories.len())
                .map(|i| {
                    let v: Vec<f64> = rows.iter().filter_map(|r| cell(r, i)).collect();
                    (!v.is_empty()).then(|| median(v))
                })
                .collect();
            (label, values)
        })
        .collect();
    if categories.is_empty() || series.is_empty() {
        return None;
    }
    let panel = Panel {
        title: String::new(),
        x_label: spec.x.as_deref().map(label_of).unwrap_or_default(),
        y_label: label_of(&y),
        data: PanelData::Bars { categories, series },
    };
    Some(Figure { name: String::new(), title: short_label(&y), panels: vec![panel] })
}

/// The groups of bars: the members of a `.*` family (regions, types), the
/// values of `x`, or `y` alone.
fn bar_categories(table: &Table, x: Option<String>, y: &str) -> (Vec<String>, CellFn) {
    let y_column = y.to_string();
    if y.ends_with(".*") {
        let members = expand(table, y);
        let names = members.iter().map(|(t, _)| t.clone()).collect();
        return (names, Box::new(move |row: &Row, i: usize| num(row, &members[i].1)));
    }
    let Some(x) = x else {
        return (vec![short_label(y)], Box::new(move |row: &Row, _| num(row, &y_column)));
    };
    let mut values: Vec<String> = Vec::new();
    for row in &table.rows {
        let v = Table::get(row, &x).map(cell_text).unwrap_or_default();
        if !values.contains(&v) {
            values.push(v);
        }
    }
    let keys = values.clone();
    let cell = move |row: &Row, i: usize| {
        let here = Table::get(row, &x).map(cell_text);
        if here.as_deref() == Some(keys[i].as_str()) { num(row, &y_column) } else { None }
    };
    (values, Box::new(cell))
}

/// The names under a report map (`latency_cdf_ms`: `all` and the types).
fn cdf_keys(input: &Input<'_>, key: &str) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for (_, report) in input.points {
        for k in report.get(key).and_then(Json::as_object).into_iter().flat_map(|m| m.keys()) {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    keys
}

/// The points drawn one line each: the first repetition of each, at most
/// [`SERIES_MAX`].
fn first_points<'a>(input: &Input<'a>) -> Vec<&'a (Point, Json)> {
    input.points.iter().filter(|(p, _)| p.repeat == 0).take(SERIES_MAX).collect()
}

fn cdf_figure(input: &Input<'_>, spec: &PlotSpec) -> Option<Figure> {
    let y = spec.y.clone().unwrap_or_else(|| "latency_ms".into());
    let (key, names): (&str, Vec<String>) = match y.as_str() {
        "latency_ms" => ("latency_cdf_ms", vec!["all".into()]),
        "latency_ms.type.*" => {
            ("latency_cdf_ms", cdf_keys(input, "latency_cdf_ms").into_iter().filter(|k| k != "all").collect())
        }
        "latency_ms.region.*" => ("latency_cdf_ms_by_region", cdf_keys(input, "latency_cdf_ms_by_region")),
        other => match (other.strip_prefix("latency_ms.type."), other.strip_prefix("latency_ms.region.")) {
            (Some(t), _) => ("latency_cdf_ms", vec![t.to_string()]),
            (_, Some(r)) => ("latency_cdf_ms_by_region", vec![r.to_string()]),
            _ => ("latency_cdf_ms", vec!["all".into()]),
        },
    };
    let repeats = input.repeat;
    let panels = names
        .iter()
        .take(PANELS_MAX)
        .map(|name| {
            let series = first_points(input)
                .into_iter()
                .filter_map(|(p, report)| {
                    let pts = report.get(key)?.get(name)?.as_array()?;
                    let points: Vec<(f64, f64)> = pts
                        .iter()
                        .filter_map(|xy| Some((xy.get(0)?.as_f64()?, xy.get(1)?.as_f64()?)))
                        .filter(|(_, q)| *q <= 0.999)
                        .collect();
                    (!points.is_empty()).then(|| Series { label: p.label(repeats), points })
                })
                .collect();
            let title = if name == "all" { String::new() } else { name.clone() };
            Panel {
                title,
                x_label: "latency (ms)".into(),
                y_label: "fraction of transactions".into(),
                data: PanelData::Lines { series, markers: false },
            }
        })
        .filter(|p| matches!(&p.data, PanelData::Lines { series, .. } if !series.is_empty()))
        .collect();
    let what = if key == "latency_cdf_ms_by_region" {
        " per region"
    } else if names.len() > 1 {
        " per type"
    } else {
        ""
    };
    Some(Figure { name: String::new(), title: format!("Latency CDF{what} (to the 99.9th percentile)"), panels })
}

fn timeline_figure(input: &Input<'_>) -> Option<Figure> {
    let repeats = input.repeat;
    let series: Vec<Series> = first_points(input)
        .into_iter()
        .filter_map(|(p, report)| {
            let per_s = report.get("committed_per_s")?.as_array()?;
            let points = per_s.iter().enumerate().filter_map(|(s, n)| Some((s as f64, n.as_f64()?))).collect();
            Some(Series { label: p.label(repeats), points })
        })
        .collect();
    let panel = Panel {
        title: String::new(),
        x_label: "simulated time (s)".into(),
        y_label: "transactions committed per second".into(),
        data: PanelData::Lines { series, markers: false },
    };
    Some(Figure { name: String::new(), title: "Commits per second over the run".into(), panels: vec![panel] })
}

/// An axis label with its unit: a results column's description, or a
/// swept field with the unit its name ends in.
pub fn label_of(column: &str) -> String {
    let family = column.split(".region.").next().unwrap_or(column).split(".type.").next().unwrap_or(column);
    if let Some((_, doc)) = METRICS.iter().find(|(m, _)| *m == family) {
        return doc.to_string();
    }
    if let Some(name) = column.strip_prefix("counter.") {
        return format!("{name} (count)");
    }
    if let Some(reason) = column.strip_prefix("aborts.") {
        return format!("aborted attempts: {reason}");
    }
    let unit = [("_ms", "ms"), ("_us", "µs"), ("_s", "s"), ("_tps", "txn/s"), ("_pct", "%"), ("_ppm", "ppm")]
        .iter()
        .find(|(suffix, _)| column.contains(&format!("{suffix}_")) || column.ends_with(suffix))
        .map(|(_, u)| format!(" ({u})"))
        .unwrap_or_default();
    format!("{column}{unit}")
}

/// A short name for titles: `p50 latency per region`, `throughput`.
pub fn short_label(column: &str) -> String {
    const SHORT: [(&str, &str); 11] = [
        ("throughput_tps", "throughput"),
        ("offered_tps", "offered load"),
        ("sent_tps", "sent rate"),
        ("latency_p50_ms", "p50 latency"),
        ("latency_p90_ms", "p90 latency"),
        ("latency_p99_ms", "p99 latency"),
        ("latency_ms", "latency"),
        ("abort_rate_pct", "abort rate"),
        ("attempt_abort_rate_pct", "attempt abort rate"),
        ("committed_per_s", "commits per second"),
        ("check", "check"),
    ];
    let (base, suffix) = match (column.split_once(".region."), column.split_once(".type.")) {
        (Some((b, "*")), _) => (b, " per region".to_string()),
        (Some((b, r)), _) => (b, format!(" in {r}")),
        (_, Some((b, "*"))) => (b, " per type".to_string()),
        (_, Some((b, t))) => (b, format!(" of {t}")),
        _ => (column, String::new()),
    };
    let base = SHORT.iter().find(|(c, _)| *c == base).map_or_else(
        || base.strip_prefix("counter.").or(base.strip_prefix("aborts.")).unwrap_or(base).to_string(),
        |(_, s)| s.to_string(),
    );
    format!("{base}{suffix}")
}

/// The point values as written, for tables and captions.
pub fn point_values(p: &Point) -> Vec<String> {
    p.values.iter().map(|(_, v)| value_text(v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_swept_parameter_table_labels_its_series_by_name_and_value() {
        let fields = ["protocol.name".to_string(), "protocol.params".to_string()];
        let plain: Row = vec![("protocol.name".into(), json!("ramp-f")), ("protocol.params".into(), json!({}))];
        let opw: Row = vec![
            ("protocol.name".into(), json!("ramp-f")),
            ("protocol.params".into(), json!({"one_phase_writes": true})),
        ];
        assert_eq!(series_label(&plain, &fields), "ramp-f");
        assert_eq!(series_label(&opw, &fields), "ramp-f one_phase_writes=true");
    }
}
