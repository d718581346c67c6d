//! `report.html`: one self-contained page per experiment — its
//! description, deployment and sweep, the command that reproduces it, every
//! plot inline (SVG), the results table and the check verdicts. No script,
//! no external file.

use crate::figures::Figure;
use crate::results::{Row, Table};
use serde_json::Value as Json;
use std::fmt::Write;

/// What the page says besides the table and the plots.
pub struct Page<'a> {
    pub file: &'a str,
    pub description: &'a str,
    /// `(what, value)` lines: the deployment of the first point.
    pub deployment: &'a [(String, String)],
    /// `(what, value)` lines: the swept fields, mode, repeat, points.
    pub sweep: &'a [(String, String)],
    pub reproduce: &'a str,
    pub table: &'a Table,
    /// Each figure with its SVG text.
    pub figures: &'a [(Figure, String)],
}

const STYLE: &str = "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:2em auto;max-width:1720px;color:#222;padding:0 1em}\
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}\
pre,code{background:#f4f4f4;padding:.2em .4em;border-radius:3px}pre{padding:.7em;white-space:pre-wrap}\
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:.25em .5em;text-align:right}\
th{background:#eee}td.text,th.text{text-align:left}.valid{color:#1a7f37}.invalid{color:#c00;font-weight:bold}\
figure{margin:1.2em 0}figure svg{max-width:100%;height:auto}figcaption{font-size:.9em;color:#555}\
dl.facts{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dl.facts dt{font-weight:bold}dl.facts dd{margin:0}";

/// The whole page.
pub fn page(p: &Page<'_>) -> String {
    let mut s = String::new();
    let title = format!("Meridian experiment: {}", p.file);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n",
        esc(&title)
    );
    let _ = writeln!(s, "<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>", esc(&title));
    if !p.description.is_empty() {
        let _ = writeln!(s, "<pre class=\"description\">{}</pre>", esc(p.description));
    }
    let _ = writeln!(s, "<p>Reproduce: <code class=\"reproduce\">{}</code></p>", esc(p.reproduce));
    facts(&mut s, "Deployment", p.deployment);
    facts(&mut s, "Sweep", p.sweep);
    verdicts(&mut s, p.table);
    let _ = writeln!(s, "<h2>Plots</h2>");
    for (fig, svg) in p.figures {
        let _ = writeln!(
            s,
            "<figure class=\"plot\" id=\"{}\">\n{}\n<figcaption>{} (<a href=\"plots/{}.png\">PNG</a>, <a href=\"plots/{}.svg\">SVG</a>)</figcaption>\n</figure>",
            esc(&fig.name),
            strip_xml_prolog(svg),
            esc(&fig.title),
            esc(&fig.name),
            esc(&fig.name)
        );
    }
    results(&mut s, p.table);
    let _ = writeln!(
        s,
        "<p>Every column of every point: <a href=\"results.csv\">results.csv</a>, <a href=\"results.json\">results.json</a>; each point's report: <code>points/</code>.</p>"
    );
    s.push_str("</body>\n</html>\n");
    s
}

fn facts(s: &mut String, heading: &str, lines: &[(String, String)]) {
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(s, "<h2>{}</h2>\n<dl class=\"facts\">", esc(heading));
    for (k, v) in lines {
        let _ = writeln!(s, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    s.push_str("</dl>\n");
}

fn verdicts(s: &mut String, table: &Table) {
    let verdict = |r: &Row| Table::get(r, "check").and_then(Json::as_str).unwrap_or("unchecked").to_string();
    let valid = table.rows.iter().filter(|r| verdict(r) == "valid").count();
    let bad: Vec<&Row> = table.rows.iter().filter(|r| verdict(r) == "INVALID").collect();
    let _ = writeln!(s, "<h2>Checks</h2>");
    let _ = writeln!(
        s,
        "<p class=\"verdicts\">{valid} of {} points' histories checked valid at the protocol's promised level{}.</p>",
        table.rows.len(),
        if bad.is_empty() { "" } else { "; <span class=\"invalid\">some are not</span>" }
    );
    if !bad.is_empty() {
        s.push_str("<ul>\n");
        for r in bad {
            let point = Table::get(r, "point").map(Json::to_string).unwrap_or_default();
            let _ = writeln!(
                s,
                "<li class=\"invalid\">point {} is INVALID (points/point-{point:0>4}.json)</li>",
                esc(&point)
            );
        }
        s.push_str("</ul>\n");
    }
}

/// The columns the page shows (results.csv has them all).
fn shown_columns(table: &Table) -> Vec<String> {
    let mut cols: Vec<String> = vec!["point".into()];
    cols.extend(table.swept.iter().cloned());
    for c in ["seed", "protocol", "throughput_tps", "latency_p50_ms", "latency_p90_ms", "latency_p99_ms"] {
        cols.push(c.into());
    }
    cols.extend(table.columns.iter().filter(|c| c.starts_with("latency_p50_ms.region.")).cloned());
    cols.extend(["abort_rate_pct".to_string(), "check".to_string()]);
    cols.dedup();
    cols.into_iter().filter(|c| table.columns.contains(c)).collect()
}

fn results(s: &mut String, table: &Table) {
    let cols = shown_columns(table);
    let _ = writeln!(s, "<h2>Results</h2>\n<table class=\"results\">\n<thead><tr>");
    for c in &cols {
        let _ = write!(s, "<th class=\"text\">{}</th>", esc(&c.replace("latency_p50_ms.region.", "p50 ms ")));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for row in &table.rows {
        let point = Table::get(row, "point").map(Json::to_string).unwrap_or_default();
        let _ = write!(s, "<tr class=\"point\" id=\"point-{}\">", esc(&point));
        for c in &cols {
            let v = Table::get(row, c).cloned().unwrap_or(Json::Null);
            let class = match v.as_str() {
                Some("valid") => " class=\"text valid\"",
                Some("INVALID") => " class=\"text invalid\"",
                Some(_) => " class=\"text\"",
                None => "",
            };
            let text = match v {
                Json::Null => String::new(),
                Json::String(t) => t,
                other => other.to_string(),
            };
            let _ = write!(s, "<td{class}>{}</td>", esc(&text));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n");
}

/// An SVG document without its `<?xml ...?>` line, to inline it.
fn strip_xml_prolog(svg: &str) -> &str {
    match svg.trim_start().strip_prefix("<?xml") {
        Some(rest) => rest.split_once("?>").map_or(svg, |(_, body)| body.trim_start()),
        None => svg,
    }
}

/// Escapes text for HTML.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_strips_the_prolog() {
        assert_eq!(esc("<a & 'b'>"), "&lt;a &amp; &#39;b&#39;&gt;");
        assert_eq!(strip_xml_prolog("<?xml version=\"1.0\"?>\n<svg/>"), "<svg/>");
        assert_eq!(strip_xml_prolog("<svg/>"), "<svg/>");
    }
}
