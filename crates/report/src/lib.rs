//! What `meridian experiment` writes once its points have run: the
//! results table (`results.csv`, `results.json`), the plots (`plots/*.png`
//! and `plots/*.svg`, drawn with plotters and an embedded font) and one
//! self-contained `report.html`.
//!
//! Everything here is computed from the sweep file and the points' report
//! JSON, so the same outputs come from a whole run or from points run on
//! several machines and merged.

pub mod draw;
pub mod figures;
pub mod html;
pub mod results;

use meridian_experiment::{Point, Sweep, SweepMode, value_text};
use serde_json::Value as Json;
use std::path::Path;

pub use figures::Figure;
pub use results::Table;

/// One experiment's finished points and what the page says about them.
pub struct Outputs<'a> {
    pub sweep: &'a Sweep,
    /// Every point with its report, in index order.
    pub points: &'a [(Point, Json)],
    /// `(what, value)` lines describing the deployment.
    pub deployment: Vec<(String, String)>,
    /// The command that reproduces the outputs.
    pub reproduce: String,
}

/// What was written.
#[derive(Debug)]
pub struct Written {
    pub rows: usize,
    pub figures: Vec<String>,
}

/// Writes the results, the plots and the page into `dir`.
pub fn write(dir: &Path, out: &Outputs<'_>) -> Result<Written, String> {
    let table = Table::new(&out.sweep.paths(), out.points);
    let file = out.sweep.file.as_str();
    write_file(&dir.join("results.csv"), &table.to_csv())?;
    let json = serde_json::to_string_pretty(&table.to_json(file)).map_err(|e| e.to_string())?;
    write_file(&dir.join("results.json"), &json)?;
    let input = figures::Input { axes: &out.sweep.axes, repeat: out.sweep.repeat, table: &table, points: out.points };
    let figs = figures::figures(&input, &out.sweep.plots);
    let plots = dir.join("plots");
    std::fs::create_dir_all(&plots).map_err(|e| format!("{}: cannot create: {e}", plots.display()))?;
    let mut drawn = Vec::new();
    for fig in figs {
        let svg = draw::svg(&fig)?;
        write_file(&plots.join(format!("{}.svg", fig.name)), &svg)?;
        draw::png(&fig, &plots.join(format!("{}.png", fig.name)))?;
        drawn.push((fig, svg));
    }
    let sweep_lines = sweep_facts(out.sweep);
    let page = html::Page {
        file,
        description: &out.sweep.description,
        deployment: &out.deployment,
        sweep: &sweep_lines,
        reproduce: &out.reproduce,
        table: &table,
        figures: &drawn,
    };
    write_file(&dir.join("report.html"), &html::page(&page))?;
    Ok(Written { rows: table.rows.len(), figures: drawn.into_iter().map(|(f, _)| f.name).collect() })
}

/// The sweep in words: each swept field with its values, the mode, the
/// repetitions and the number of points.
pub fn sweep_facts(sweep: &Sweep) -> Vec<(String, String)> {
    let mut lines: Vec<(String, String)> = sweep
        .axes
        .iter()
        .map(|a| (a.path.clone(), a.values.iter().map(value_text).collect::<Vec<_>>().join(", ")))
        .collect();
    if sweep.axes.len() > 1 {
        let mode = match sweep.mode {
            SweepMode::Product => "product (every combination)",
            SweepMode::Zip => "zip (lists in lockstep)",
        };
        lines.push(("mode".into(), mode.into()));
    }
    if sweep.repeat > 1 {
        lines.push(("repeat".into(), format!("{} seeds per point", sweep.repeat)));
    }
    lines.push(("points".into(), sweep.len().to_string()));
    lines
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}
