//! Drawing [`Figure`]s with plotters, as SVG (text) and PNG (files), with
//! the embedded DejaVu Sans: no system fonts, no C libraries.

use crate::figures::{Figure, Panel, PanelData, Series};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::OnceLock;

/// DejaVu Sans (assets/fonts/LICENSE-DejaVu.txt).
static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

/// One panel's size in pixels, and the figure title's height.
const PANEL_W: u32 = 560;
const PANEL_H: u32 = 400;
const TITLE_H: u32 = 44;
/// A figure of one panel is wider, for its title and legend.
const SINGLE_W: u32 = 760;

/// Colors that stay apart for the first dozen series (Tableau 10, then two).
const COLORS: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 0),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// Registers the embedded font once.
fn ensure_font() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
            .map_err(|_| "the embedded font is invalid".to_string())
    })
    .clone()
}

/// The figure's size: panels in a grid of up to three columns.
pub fn size(fig: &Figure) -> (u32, u32) {
    let n = fig.panels.len().max(1) as u32;
    let cols = n.min(if n == 4 { 2 } else { 3 });
    let rows = n.div_ceil(cols);
    let width = if cols == 1 { SINGLE_W } else { cols * PANEL_W };
    (width, rows * PANEL_H + TITLE_H)
}

/// The figure as an SVG document.
pub fn svg(fig: &Figure) -> Result<String, String> {
    ensure_font()?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size(fig)).into_drawing_area();
        draw(&root, fig)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// The figure as a PNG file.
pub fn png(fig: &Figure, path: &Path) -> Result<(), String> {
    ensure_font()?;
    let root = BitMapBackend::new(path, size(fig)).into_drawing_area();
    draw(&root, fig)?;
    root.present().map_err(|e| format!("{}: {e}", path.display()))
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, fig: &Figure) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let body = root.titled(&fig.title, (FAMILY, 22)).map_err(|e| e.to_string())?;
    let n = fig.panels.len().max(1);
    let (w, _) = size(fig);
    let cols = if w == SINGLE_W { 1 } else { (w / PANEL_W) as usize };
    let areas = body.split_evenly((n.div_ceil(cols), cols));
    for (panel, area) in fig.panels.iter().zip(areas.iter()) {
        match &panel.data {
            PanelData::Lines { series, markers } => lines(area, panel, series, *markers)?,
            PanelData::Bars { categories, series } => bars(area, panel, categories, series)?,
        }
    }
    Ok(())
}

/// A range around `values` with a margin; from zero when all are
/// non-negative and `from_zero`.
fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> std::ops::Range<f64> {
    let (lo, hi) = values.filter(|v| v.is_finite()).fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi || (lo == 0.0 && hi == 0.0) {
        return 0.0..1.0;
    }
    let lo = if from_zero && lo >= 0.0 { 0.0 } else { lo };
    let pad = ((hi - lo) * 0.05).max(hi.abs() * 0.05).max(1e-3);
    (if lo == 0.0 { 0.0 } else { lo - pad })..(hi + pad)
}

/// A tick label: at most two decimals, no trailing zeros.
fn tick(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.to_string() }
}

fn lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    series: &[Series],
    markers: bool,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let xs = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)), false);
    let ys = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)), true);
    // Room above the data for the legend (one row per series, at most 12
    // are drawn), so that it covers no curve.
    let ys = ys.start..ys.end + (ys.end - ys.start) * 0.12 * series.len().min(12) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FAMILY, 17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(xs, ys)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .x_desc(&panel.x_label)
        .y_desc(&panel.y_label)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(&s.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3)));
        if markers {
            chart.draw_series(s.points.iter().map(|p| Circle::new(*p, 4, c.filled()))).map_err(err)?;
        }
    }
    // One unnamed series needs no legend.
    let named = series.len() > 1 || series.iter().any(|s| s.label != "all");
    if named {
        chart
            .configure_series_labels()
            .label_font((FAMILY, 13))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

/// Grouped bars: category `i` centred on `x = i`, its bars side by side.
fn bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    categories: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let n = categories.len();
    let ys = range(series.iter().flat_map(|(_, v)| v.iter().flatten().copied()), true);
    let y_top = ys.end * 1.12; // room for the legend
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FAMILY, 17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_top)
        .map_err(err)?;
    let names = categories.to_vec();
    let label = move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            names.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n.max(1))
        .x_label_formatter(&label)
        .y_label_formatter(&|v| tick(*v))
        .x_desc(&panel.x_label)
        .y_desc(&panel.y_label)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    let k = series.len().max(1) as f64;
    let width = 0.8 / k;
    for (j, (name, values)) in series.iter().enumerate() {
        let c = color(j);
        let rects = values.iter().enumerate().filter_map(|(i, v)| {
            let left = i as f64 - 0.4 + j as f64 * width;
            v.map(|v| Rectangle::new([(left, 0.0), (left + width * 0.92, v)], c.filled()))
        });
        chart
            .draw_series(rects)
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .label_font((FAMILY, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    Ok(())
}
