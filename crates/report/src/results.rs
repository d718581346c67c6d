//! The results table of a sweep: one row per point with the swept values
//! and the figures of its report (CONTRACT.md "Sweeps"), written as
//! `results.csv` and `results.json`.
//!
//! Rows hold only what the point's file and seed determine: never wall
//! time, so the table is the same however many threads ran the sweep.

use meridian_experiment::Point;
use serde_json::{Map, Value as Json, json};

/// One row: `(column, value)` in column order.
pub type Row = Vec<(String, Json)>;

/// Every point's row and the union of their columns, in order of first
/// appearance.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub swept: Vec<String>,
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
}

impl Table {
    /// The table of `points` (with their reports), sorted by point index.
    pub fn new(swept: &[&str], points: &[(Point, Json)]) -> Table {
        let mut sorted: Vec<&(Point, Json)> = points.iter().collect();
        sorted.sort_by_key(|(p, _)| p.index);
        let mut rows: Vec<Row> = sorted.iter().map(|(p, report)| row(p, report)).collect();
        zero_unreported_counts(&mut rows);
        let mut columns: Vec<String> = Vec::new();
        for row in &rows {
            for (c, _) in row {
                if !columns.contains(c) {
                    columns.push(c.clone());
                }
            }
        }
        Table { swept: swept.iter().map(|s| s.to_string()).collect(), columns, rows }
    }

    /// A cell (`None` when the row has no such column).
    pub fn get<'a>(row: &'a Row, column: &str) -> Option<&'a Json> {
        row.iter().find(|(c, _)| c == column).map(|(_, v)| v)
    }

    /// `results.csv`: a header, then one line per row; empty cells where a
    /// row lacks a column.
    pub fn to_csv(&self) -> String {
        let mut out = self.columns.iter().map(|c| csv_field(c)).collect::<Vec<_>>().join(",");
        out.push('\n');
        for row in &self.rows {
            let cells: Vec<String> =
                self.columns.iter().map(|c| Table::get(row, c).map_or(String::new(), csv_cell)).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }

    /// `results.json`: the swept fields, the columns and the rows as
    /// objects.
    pub fn to_json(&self, file: &str) -> Json {
        let rows: Vec<Json> =
            self.rows.iter().map(|r| Json::Object(r.iter().cloned().collect::<Map<_, _>>())).collect();
        json!({ "file": file, "swept": self.swept, "columns": self.columns, "rows": rows })
    }
}

/// A protocol reports only the counters (and abort reasons) it counted:
/// where another point of the same protocol has one, this point's is 0.
fn zero_unreported_counts(rows: &mut [Row]) {
    let protocol = |row: &Row| Table::get(row, "protocol").cloned().unwrap_or(Json::Null);
    let mut seen: Vec<(Json, String)> = Vec::new();
    for row in rows.iter() {
        for (c, _) in row.iter().filter(|(c, _)| c.starts_with("counter.") || c.starts_with("aborts.")) {
            let key = (protocol(row), c.clone());
            if !seen.contains(&key) {
                seen.push(key);
            }
        }
    }
    for row in rows.iter_mut() {
        let p = protocol(row);
        for (_, c) in seen.iter().filter(|(sp, _)| *sp == p) {
            if Table::get(row, c).is_none() {
                let at = row.iter().position(|(k, _)| k == "simulated_s").unwrap_or(row.len());
                row.insert(at, (c.clone(), json!(0)));
            }
        }
    }
}

/// One point's row.
pub fn row(point: &Point, report: &Json) -> Row {
    let mut row: Row = vec![("point".into(), json!(point.index))];
    for (path, value) in &point.values {
        row.push((path.clone(), toml_to_json(value)));
    }
    let num = |path: &[&str]| path.iter().try_fold(report, |v, k| v.get(k)).cloned().unwrap_or(Json::Null);
    row.push(("seed".into(), num(&["seed"])));
    row.push(("protocol".into(), num(&["protocol"])));
    for name in ["throughput_tps", "offered_tps", "sent_tps"] {
        row.push((name.into(), num(&[name])));
    }
    for name in ["committed", "aborted", "unknown"] {
        row.push((name.into(), num(&["txns", name])));
    }
    row.extend(abort_rates(report));
    for q in ["p50", "p90", "p99"] {
        row.push((format!("latency_{q}_ms"), num(&["latency_ms", q])));
    }
    row.extend(latency_family(report, "latency_ms_by_region", "region"));
    row.extend(latency_family(report, "latency_ms_by_type", "type"));
    row.extend(named_counts(report, "aborts_by_reason", "aborts"));
    row.extend(named_counts(report, "counters", "counter"));
    row.extend(freshness(report));
    row.extend(observations(report));
    row.push(("simulated_s".into(), num(&["simulated_s"])));
    row.push(("events".into(), num(&["events"])));
    row.push(("check".into(), json!(verdict(report))));
    row
}

/// `valid`, `INVALID` or `unchecked`: the history check, the final
/// database audit and the protocol's own declarations together.
pub fn verdict(report: &Json) -> &'static str {
    let audit_ok = report.get("audit").and_then(|a| a.get("valid")).and_then(Json::as_bool).unwrap_or(true);
    let declared_ok = report.get("violations").and_then(Json::as_array).is_none_or(|v| v.is_empty());
    match report.get("check").and_then(|c| c.get("valid")).and_then(Json::as_bool) {
        _ if !audit_ok || !declared_ok => "INVALID",
        Some(true) => "valid",
        Some(false) => "INVALID",
        None => "unchecked",
    }
}

fn abort_rates(report: &Json) -> Row {
    let count = |k: &str| report.get("txns").and_then(|t| t.get(k)).and_then(Json::as_u64).unwrap_or(0);
    let (committed, aborted, unknown) = (count("committed"), count("aborted"), count("unknown"));
    let attempts_aborted: u64 = report
        .get("aborts_by_reason")
        .and_then(Json::as_object)
        .map_or(0, |m| m.values().filter_map(Json::as_u64).sum());
    let pct = |part: u64, whole: u64| round3(100.0 * part as f64 / whole.max(1) as f64);
    vec![
        ("abort_rate_pct".into(), json!(pct(aborted, committed + aborted + unknown))),
        ("attempt_abort_rate_pct".into(), json!(pct(attempts_aborted, committed + unknown + attempts_aborted))),
    ]
}

/// `latency_pXX_ms.{family}.NAME` for every name of a report map of
/// percentiles.
fn latency_family(report: &Json, key: &str, family: &str) -> Row {
    let Some(map) = report.get(key).and_then(Json::as_object) else { return Vec::new() };
    let mut row = Row::new();
    for (name, p) in map {
        for q in ["p50", "p90", "p99"] {
            row.push((format!("latency_{q}_ms.{family}.{name}"), p.get(q).cloned().unwrap_or(Json::Null)));
        }
    }
    row
}

/// Below strict serializability, how fresh reads were: the share up to
/// date and the staleness percentiles (empty cells for protocols that
/// promise the newest version).
fn freshness(report: &Json) -> Row {
    let mut row: Row =
        vec![("up_to_date_reads_pct".into(), report.get("up_to_date_reads_pct").cloned().unwrap_or(Json::Null))];
    for q in ["p50", "p90", "p99"] {
        let v = report.get("staleness_ms").and_then(|s| s.get(q)).cloned().unwrap_or(Json::Null);
        row.push((format!("staleness_{q}_ms"), v));
    }
    row
}

/// `observation.NAME.{mean,p50,p99,max}` for every protocol-side
/// distribution (`Env::observe`): rounds per read, metadata bytes, waits.
fn observations(report: &Json) -> Row {
    let Some(map) = report.get("observations").and_then(Json::as_object) else { return Vec::new() };
    let mut row = Row::new();
    for (name, o) in map {
        for stat in ["mean", "p50", "p99", "max"] {
            row.push((format!("observation.{name}.{stat}"), o.get(stat).cloned().unwrap_or(Json::Null)));
        }
    }
    row
}

fn named_counts(report: &Json, key: &str, prefix: &str) -> Row {
    let Some(map) = report.get(key).and_then(Json::as_object) else { return Vec::new() };
    map.iter().map(|(k, v)| (format!("{prefix}.{k}"), v.clone())).collect()
}

/// A TOML value as JSON (datetimes as strings).
pub fn toml_to_json(v: &toml::Value) -> Json {
    match v {
        toml::Value::String(s) => json!(s),
        toml::Value::Integer(i) => json!(i),
        toml::Value::Float(f) => json!(f),
        toml::Value::Boolean(b) => json!(b),
        toml::Value::Datetime(d) => json!(d.to_string()),
        toml::Value::Array(a) => Json::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Json::Object(t.iter().map(|(k, v)| (k.clone(), toml_to_json(v))).collect()),
    }
}

fn csv_cell(v: &Json) -> String {
    match v {
        Json::Null => String::new(),
        Json::String(s) => csv_field(s),
        other => csv_field(&other.to_string()),
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(index: usize, rate: i64) -> Point {
        Point { index, values: vec![("clients.rate_tps".into(), toml::Value::Integer(rate))], repeat: 0 }
    }

    fn report(p50: f64) -> Json {
        json!({
            "protocol": "tiga", "seed": 1, "throughput_tps": 10.0,
            "txns": {"committed": 90, "aborted": 10, "unknown": 0},
            "latency_ms": {"p50": p50, "p90": 2.0, "p99": 3.0},
            "latency_ms_by_region": {"finland": {"p50": 1.0, "p90": 2.0, "p99": 3.0}},
            "aborts_by_reason": {"conflict": 30},
            "counters": {"fast_path": 7},
            "check": {"valid": true}
        })
    }

    #[test]
    fn rows_follow_point_order_with_swept_columns_first() {
        let t = Table::new(&["clients.rate_tps"], &[(point(1, 20), report(5.0)), (point(0, 10), report(4.0))]);
        assert_eq!(&t.columns[..3], ["point", "clients.rate_tps", "seed"]);
        let csv = t.to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert!(lines[1].starts_with("0,10,1,tiga,"), "{csv}");
        assert_eq!(Table::get(&t.rows[0], "abort_rate_pct"), Some(&json!(10.0)));
        assert_eq!(Table::get(&t.rows[0], "attempt_abort_rate_pct"), Some(&json!(25.0)));
        assert_eq!(Table::get(&t.rows[1], "latency_p50_ms.region.finland"), Some(&json!(1.0)));
        assert_eq!(Table::get(&t.rows[1], "counter.fast_path"), Some(&json!(7)));
        assert_eq!(Table::get(&t.rows[1], "check"), Some(&json!("valid")));
    }

    #[test]
    fn a_counter_another_point_of_the_protocol_reports_is_zero() {
        let mut quiet = report(4.0);
        quiet["counters"] = json!({});
        let t = Table::new(&["clients.rate_tps"], &[(point(0, 10), report(5.0)), (point(1, 20), quiet)]);
        assert_eq!(Table::get(&t.rows[1], "counter.fast_path"), Some(&json!(0)));
    }

    #[test]
    fn freshness_and_observations_have_columns_of_their_own() {
        let mut weak = report(4.0);
        weak["up_to_date_reads_pct"] = json!(91.5);
        weak["staleness_ms"] = json!({"p50": 0.5, "p90": 1.5, "p99": 9.0});
        weak["observations"] =
            json!({"rounds_per_read": {"count": 4, "mean": 1.25, "p50": 1, "p90": 2, "p99": 2, "max": 2}});
        let t = Table::new(&["clients.rate_tps"], &[(point(0, 10), weak), (point(1, 20), report(5.0))]);
        assert_eq!(Table::get(&t.rows[0], "up_to_date_reads_pct"), Some(&json!(91.5)));
        assert_eq!(Table::get(&t.rows[0], "staleness_p99_ms"), Some(&json!(9.0)));
        assert_eq!(Table::get(&t.rows[0], "observation.rounds_per_read.mean"), Some(&json!(1.25)));
        assert_eq!(Table::get(&t.rows[0], "observation.rounds_per_read.max"), Some(&json!(2)));
        // A strictly serializable run has no freshness to report.
        assert_eq!(Table::get(&t.rows[1], "up_to_date_reads_pct"), Some(&Json::Null));
        // Plots may name them.
        for c in ["up_to_date_reads_pct", "staleness_p50_ms", "observation.rounds_per_read.mean"] {
            assert!(meridian_experiment::is_metric(c), "{c}");
        }
    }

    #[test]
    fn csv_quotes_what_needs_quoting() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
