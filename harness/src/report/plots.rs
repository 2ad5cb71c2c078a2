//! The three plots of a report for one target, drawn as SVG strings with plotters: latency
//! over time, admitted requests per tenant against the limit, and 429 / 5xx rates.
//!
//! Every plot of a run shares its x axis and, per kind, its y axis, so targets placed one under
//! the other compare at a glance. Fault windows are shaded and phase names written above the
//! plot area; the legend sits in its own row under the x axis so it never hides a line.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::limits::LimitSource;
use crate::results::read::SeriesRow;
use crate::results::{PhaseResult, RunResult, TargetResult};

/// The fill of a fault window in every plot (and of fault phases' rows in the tables), so a
/// reader, or a tool, can tell a fault window from the rest.
pub const FAULT_FILL_RGB: (u8, u8, u8) = (0xFD, 0xE2, 0xDC);

/// Fits a 900 px column without scaling, so the text stays at its drawn size.
const WIDTH: u32 = 900;
const PLOT_HEIGHT: u32 = 300;
const TITLE_ROW: u32 = 48;
const LEGEND_ROW: u32 = 22;
const FONT: &str = "sans-serif";

/// What drawing into an SVG string can fail with.
pub(super) type PlotError = DrawingAreaErrorKind<std::io::Error>;

// Okabe–Ito colours: told apart by readers with colour-vision deficiencies too.
const BLUE: RGBColor = RGBColor(0, 114, 178);
const VERMILLION: RGBColor = RGBColor(213, 94, 0);
const ORANGE: RGBColor = RGBColor(230, 159, 0);
const GREEN: RGBColor = RGBColor(0, 158, 115);
const PURPLE: RGBColor = RGBColor(204, 121, 167);
const SKY: RGBColor = RGBColor(86, 180, 233);
const TENANT_COLOURS: [RGBColor; 6] = [BLUE, ORANGE, GREEN, PURPLE, SKY, VERMILLION];
const GRID: RGBColor = RGBColor(225, 225, 225);
const MUTED: RGBColor = RGBColor(110, 110, 110);
const FAULT_TEXT: RGBColor = RGBColor(165, 40, 20);

fn fault_fill() -> RGBColor {
    let (r, g, b) = FAULT_FILL_RGB;
    RGBColor(r, g, b)
}

/// A y axis. The chart is always linear over `map(value)`: a log axis is then the same chart
/// type as a linear one, and its ticks are ours (1-2-5), not plotters' powers of ten.
#[derive(Debug, Clone)]
struct YAxis {
    log: bool,
    /// Bounds in mapped units.
    lo: f64,
    hi: f64,
    /// Tick values in data units.
    ticks: Vec<f64>,
}

/// Smallest value a log axis shows: 1 µs in ms, the histograms' resolution.
const LOG_FLOOR: f64 = 0.001;

impl YAxis {
    /// 0 to a round number above `max`, a little below zero so a line at 0 stays visible
    /// instead of merging with the axis.
    fn linear(max: f64) -> Self {
        let max = if max > 0.0 { max } else { 1.0 };
        let step = nice_step(max / 5.0);
        let top = (max / step).ceil() * step;
        let ticks = (0..)
            .map(|i| f64::from(i) * step)
            .take_while(|v| *v <= top + step / 2.0)
            .collect();
        Self {
            log: false,
            lo: -top * 0.02,
            hi: top * 1.02,
            ticks,
        }
    }

    /// From the 1-2-5 value at or below `min` to the one at or above `max`, ticked 1-2-5.
    fn log(min: f64, max: f64) -> Self {
        let min = min.max(LOG_FLOOR);
        let candidates: Vec<f64> = (min.log10().floor() as i32 - 1..=max.log10().ceil() as i32 + 1)
            .flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
            .collect();
        let bottom = candidates
            .iter()
            .copied()
            .rev()
            .find(|v| *v <= min * 1.0001)
            .unwrap_or(min);
        let top = candidates
            .iter()
            .copied()
            .find(|v| *v >= max * 0.9999)
            .unwrap_or(max);
        let ticks = candidates
            .into_iter()
            .filter(|v| *v >= bottom && *v <= top)
            .collect();
        Self {
            log: true,
            lo: bottom.log10(),
            hi: top.log10(),
            ticks,
        }
    }

    fn map(&self, v: f64) -> f64 {
        if self.log {
            v.max(LOG_FLOOR).log10()
        } else {
            v
        }
    }

    fn unmap(&self, v: f64) -> f64 {
        if self.log { 10f64.powf(v) } else { v }
    }
}

/// 1, 2 or 5 × 10ⁿ, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let decade = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * decade)
}

/// A tick label: as few digits as the value needs (0.05, 2, 100).
fn tick_label(v: f64) -> String {
    let rounded = (v * 1000.0).round() / 1000.0;
    if rounded == 0.0 {
        "0".into()
    } else {
        format!("{rounded}")
    }
}

/// A linear f64 axis ticked where we say. plotters' own `with_key_points` wrapper loses the
/// label formatting of `f64` ranges, so the mesh could not be drawn with it.
#[derive(Debug, Clone)]
struct Ticked {
    range: Range<f64>,
    ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type ValueType = f64;
    // Labels come from our formatters; this only satisfies the mesh's bounds.
    type FormatOption = DefaultFormatting;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        if span <= 0.0 {
            return (limit.0 + limit.1) / 2;
        }
        let share = (v - self.range.start) / span;
        limit.0 + (f64::from(limit.1 - limit.0) * share).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Bold points only: no light grid lines between our ticks.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// The axes every target's plots share in one report.
#[derive(Debug, Clone)]
pub(super) struct Scales {
    x_end: f64,
    x_ticks: Vec<f64>,
    latency: YAxis,
    admitted: YAxis,
    errors: YAxis,
}

impl Scales {
    pub(super) fn of(run: &RunResult, rows: &[SeriesRow]) -> Self {
        let last_second = rows
            .iter()
            .map(|r| r.second as f64 + 1.0)
            .fold(0.0, f64::max);
        let x_end = run.duration_s.max(last_second).max(1.0);
        let step = [
            1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
        ]
        .into_iter()
        .find(|s| x_end / s <= 12.0)
        .unwrap_or(3600.0);
        let x_ticks = (0..)
            .map(|i| f64::from(i) * step)
            .take_while(|v| *v <= x_end)
            .collect();

        let latencies_ms: Vec<f64> = rows
            .iter()
            .filter(|r| r.tenant == "all" && r.counts.offered > 0)
            .flat_map(|r| [r.p50_us, r.p99_us])
            .filter(|us| *us > 0)
            .map(|us| us as f64 / 1000.0)
            .collect();
        let min = latencies_ms.iter().copied().fold(f64::INFINITY, f64::min);
        let max = latencies_ms.iter().copied().fold(0.0, f64::max);
        // A slow store spreads latency over decades (0.5 ms served, 100 ms retried): on a
        // linear axis the fast targets would be a flat line at zero.
        let latency = if max > 0.0 && max / min > 20.0 {
            YAxis::log(min, max)
        } else {
            YAxis::linear(max)
        };

        // The highest limit line of any target, so every plot shares one scale.
        let limit_per_s = run
            .targets
            .iter()
            .map(|t| run.limit_of(t).per_s())
            .fold(0.0, f64::max);
        let admitted_max = rows
            .iter()
            .filter(|r| r.tenant != "all")
            .map(|r| r.counts.admitted as f64)
            .fold(limit_per_s, f64::max);

        Self {
            x_end,
            x_ticks,
            latency,
            admitted: YAxis::linear(admitted_max),
            errors: YAxis {
                log: false,
                lo: -2.0,
                hi: 102.0,
                ticks: vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0],
            },
        }
    }
}

/// One line of a plot, cut where there is no data, so a gap is not drawn as a slope.
struct Line {
    label: String,
    colour: RGBColor,
    dashed: bool,
    /// px. Lines drawn earlier are wider, so lines on the same values (every tenant refused,
    /// at 0) show as nested bands instead of the last one hiding the others.
    width: u32,
    segments: Vec<Vec<(f64, f64)>>,
}

impl Line {
    /// Points at the middle of each second (second s covers [s, s + 1)); `None` is a gap.
    fn from_seconds(
        label: impl Into<String>,
        colour: RGBColor,
        points: impl IntoIterator<Item = (u64, Option<f64>)>,
    ) -> Self {
        let mut segments: Vec<Vec<(f64, f64)>> = Vec::new();
        let mut last: Option<u64> = None;
        for (second, value) in points {
            let Some(value) = value else {
                last = None;
                continue;
            };
            let x = second as f64 + 0.5;
            match (segments.last_mut(), last) {
                (Some(seg), Some(prev)) if second == prev + 1 => seg.push((x, value)),
                _ => segments.push(vec![(x, value)]),
            }
            last = Some(second);
        }
        Self {
            label: label.into(),
            colour,
            dashed: false,
            width: 2,
            segments,
        }
    }
}

struct Plot<'a> {
    title: String,
    y_desc: String,
    y: &'a YAxis,
    lines: Vec<Line>,
}

/// The target's rows of one tenant (or `"all"`), by second.
fn tenant_rows<'r>(rows: &[&'r SeriesRow], tenant: &str) -> Vec<&'r SeriesRow> {
    let mut out: Vec<&SeriesRow> = rows
        .iter()
        .copied()
        .filter(|r| r.tenant == tenant)
        .collect();
    out.sort_by_key(|r| r.second);
    out
}

/// Latency p50 and p99 per second over all tenants, in ms.
pub(super) fn latency(
    target: &TargetResult,
    rows: &[&SeriesRow],
    scales: &Scales,
) -> Result<String, PlotError> {
    let all = tenant_rows(rows, "all");
    // A second with nothing sent has no latency: a gap, not a zero.
    let series = |pick: fn(&SeriesRow) -> u64| {
        all.iter()
            .map(move |r| {
                let us = pick(r);
                (
                    r.second,
                    (r.counts.offered > 0 && us > 0).then(|| us as f64 / 1000.0),
                )
            })
            .collect::<Vec<_>>()
    };
    let scale = if scales.latency.log {
        "ms, log scale"
    } else {
        "ms"
    };
    draw(
        Plot {
            title: format!(
                "{}: latency from the scheduled send, per second",
                target.name
            ),
            y_desc: format!("latency ({scale})"),
            y: &scales.latency,
            lines: vec![
                Line::from_seconds("p50", BLUE, series(|r| r.p50_us)),
                Line::from_seconds("p99", VERMILLION, series(|r| r.p99_us)),
            ],
        },
        &target.phases,
        scales,
    )
}

/// Admitted requests per second for each tenant, with the per-tenant limit.
pub(super) fn admitted(
    run: &RunResult,
    target: &TargetResult,
    rows: &[&SeriesRow],
    scales: &Scales,
) -> Result<String, PlotError> {
    let mut tenants: Vec<String> = target
        .phases
        .first()
        .map(|p| p.tenants.iter().map(|t| t.name.clone()).collect())
        .unwrap_or_default();
    // Tenants the series knows and run.json does not (a run cut before its first phase).
    for r in rows {
        if r.tenant != "all" && !tenants.contains(&r.tenant) {
            tenants.push(r.tenant.clone());
        }
    }
    let mut lines: Vec<Line> = tenants
        .iter()
        .zip(TENANT_COLOURS.iter().cycle())
        .map(|(tenant, colour)| {
            let points = tenant_rows(rows, tenant)
                .into_iter()
                .map(|r| (r.second, Some(r.counts.admitted as f64)));
            Line::from_seconds(tenant.as_str(), *colour, points)
        })
        .collect();
    let judged = run.limit_of(target);
    let limit = judged.per_s();
    if limit > 0.0 {
        let whose = match judged.source {
            LimitSource::Scenario => "",
            LimitSource::Manifest => ", its manifest's",
            LimitSource::Deployment => ", its deployment file's",
        };
        lines.push(Line {
            label: format!("limit {} req/s per tenant{whose}", tick_label(limit)),
            colour: RGBColor(60, 60, 60),
            dashed: true,
            width: 2,
            segments: vec![vec![(0.0, limit), (scales.x_end, limit)]],
        });
    }
    draw(
        Plot {
            title: format!("{}: admitted requests per second, per tenant", target.name),
            y_desc: "admitted (req/s)".into(),
            y: &scales.admitted,
            lines,
        },
        &target.phases,
        scales,
    )
}

/// 429 and 5xx answers (and transport errors, where there are any) as % of offered.
pub(super) fn errors(
    target: &TargetResult,
    rows: &[&SeriesRow],
    scales: &Scales,
) -> Result<String, PlotError> {
    let all = tenant_rows(rows, "all");
    let share = |pick: fn(&SeriesRow) -> u64| {
        all.iter()
            .map(move |r| {
                let offered = r.counts.offered;
                (
                    r.second,
                    (offered > 0).then(|| pick(r) as f64 * 100.0 / offered as f64),
                )
            })
            .collect::<Vec<_>>()
    };
    let mut lines = vec![
        Line::from_seconds("429 limited", BLUE, share(|r| r.counts.limited)),
        Line::from_seconds("5xx", VERMILLION, share(|r| r.counts.errors_5xx())),
    ];
    if all.iter().any(|r| r.counts.transport_error > 0) {
        lines.push(Line::from_seconds(
            "transport errors",
            PURPLE,
            share(|r| r.counts.transport_error),
        ));
    }
    draw(
        Plot {
            title: format!("{}: 429 and 5xx answers, per second", target.name),
            y_desc: "% of offered requests".into(),
            y: &scales.errors,
            lines,
        },
        &target.phases,
        scales,
    )
}

/// Rough width of `text` in px at `size`: plotters cannot measure text without a font
/// library, and an over-estimate only drops a label that would have fitted.
fn text_width(text: &str, px: f64) -> f64 {
    text.chars().count() as f64 * px * 0.6
}

/// A font of `px` pixels as drawn: plotters writes the SVG font-size as the size asked ÷ 1.24.
fn font(px: f64) -> FontDesc<'static> {
    (FONT, px * 1.24).into_font()
}

/// Legend entries laid out left to right, wrapping to new rows: (row, x) per entry.
fn legend_layout(lines: &[Line]) -> (Vec<(u32, i32)>, u32) {
    let mut out = Vec::with_capacity(lines.len());
    let (mut row, mut x) = (0u32, 80.0);
    for line in lines {
        let w = 34.0 + text_width(&line.label, 13.0) + 24.0;
        if x + w > f64::from(WIDTH) - 10.0 && x > 80.0 {
            row += 1;
            x = 80.0;
        }
        out.push((row, x as i32));
        x += w;
    }
    let rows = if lines.is_empty() { 0 } else { row + 1 };
    (out, rows)
}

fn draw(mut plot: Plot<'_>, phases: &[PhaseResult], scales: &Scales) -> Result<String, PlotError> {
    let solid = plot.lines.iter().filter(|l| !l.dashed).count();
    for (i, line) in plot.lines.iter_mut().filter(|l| !l.dashed).enumerate() {
        line.width = 2 + (solid - 1 - i).min(3) as u32;
    }
    let (legend, legend_rows) = legend_layout(&plot.lines);
    let height = PLOT_HEIGHT + TITLE_ROW + LEGEND_ROW * legend_rows.max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        draw_on(&root, &plot, phases, scales, &legend, height)?;
        root.present()?;
    }
    Ok(svg)
}

fn draw_on(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    plot: &Plot<'_>,
    phases: &[PhaseResult],
    scales: &Scales,
    legend: &[(u32, i32)],
    height: u32,
) -> Result<(), PlotError> {
    let y = plot.y;
    root.fill(&WHITE)?;
    root.draw(&Text::new(
        plot.title.clone(),
        (12, 8),
        font(16.0).style(FontStyle::Bold).color(&BLACK),
    ))?;

    let legend_rows = legend.iter().map(|(row, _)| row + 1).max().unwrap_or(1);
    let mut chart = ChartBuilder::on(root)
        .margin_top(TITLE_ROW)
        .margin_right(24)
        .margin_left(8)
        .margin_bottom(LEGEND_ROW * legend_rows)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(
            Ticked {
                range: 0.0..scales.x_end,
                ticks: scales.x_ticks.clone(),
            },
            Ticked {
                range: y.lo..y.hi,
                ticks: y.ticks.iter().map(|v| y.map(*v)).collect(),
            },
        )?;

    // Shading first, so grid and lines are drawn over it.
    let shade = fault_fill().filled();
    for p in phases.iter().filter(|p| !p.faults.is_empty()) {
        chart.draw_series(std::iter::once(Rectangle::new(
            [(p.start_s, y.lo), (p.end_s.min(scales.x_end), y.hi)],
            shade,
        )))?;
    }

    let y_label = |v: &f64| tick_label(y.unmap(*v));
    let x_label = |v: &f64| tick_label(*v);
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID.stroke_width(1))
        .axis_style(MUTED.stroke_width(1))
        .label_style(font(13.0).color(&BLACK))
        .axis_desc_style(font(14.0).color(&BLACK))
        .x_desc("time since start (s)")
        .y_desc(plot.y_desc.as_str())
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .draw()?;

    // Phase boundaries, then each phase's name centred over it (fault phases in red, with
    // what they do when there is room).
    let boundary = MUTED.mix(0.7).stroke_width(1);
    for p in phases.iter().filter(|p| p.start_s > 0.0) {
        chart.draw_series(std::iter::once(DashedPathElement::new(
            vec![(p.start_s, y.lo), (p.start_s, y.hi)],
            4,
            4,
            boundary,
        )))?;
    }
    let (plot_left, plot_top) = chart.backend_coord(&(0.0, y.hi));
    for p in phases {
        let (x0, _) = chart.backend_coord(&(p.start_s, y.hi));
        let (x1, _) = chart.backend_coord(&(p.end_s.min(scales.x_end), y.hi));
        let room = f64::from((x1 - x0).max(0)) - 6.0;
        let faulty = !p.faults.is_empty();
        let long = format!("{}: {}", p.name, p.faults.join(", "));
        let label = if faulty && text_width(&long, 13.0) <= room {
            long
        } else {
            p.name.clone()
        };
        if text_width(&label, 13.0) > room {
            continue;
        }
        let colour = if faulty { FAULT_TEXT } else { MUTED };
        let mut style = font(13.0).color(&colour);
        if faulty {
            style = font(13.0).style(FontStyle::Bold).color(&colour);
        }
        root.draw(&Text::new(
            label,
            ((x0 + x1) / 2, plot_top - 5),
            style.pos(Pos::new(HPos::Center, VPos::Bottom)),
        ))?;
    }

    // Reference lines (dashed) last: their gaps let a data line running along one show
    // through, where a data line drawn over them would hide them.
    let ordered = plot
        .lines
        .iter()
        .filter(|l| !l.dashed)
        .chain(plot.lines.iter().filter(|l| l.dashed));
    for line in ordered {
        let style = line.colour.stroke_width(line.width);
        for seg in &line.segments {
            let mapped = seg.iter().map(|(sx, sy)| (*sx, y.map(*sy)));
            if line.dashed {
                chart.draw_series(DashedLineSeries::new(mapped, 8, 5, style))?;
            } else {
                chart.draw_series(LineSeries::new(mapped, style))?;
            }
        }
    }

    for (line, (row, x)) in plot.lines.iter().zip(legend) {
        let style = line.colour.stroke_width(line.width);
        let ly = height as i32 - (LEGEND_ROW * (legend_rows - row)) as i32 + 10;
        if line.dashed {
            root.draw(&DashedPathElement::new(
                vec![(*x, ly), (*x + 28, ly)],
                6,
                4,
                style,
            ))?;
        } else {
            root.draw(&PathElement::new(vec![(*x, ly), (*x + 28, ly)], style))?;
        }
        root.draw(&Text::new(
            line.label.clone(),
            (*x + 34, ly),
            font(13.0)
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }

    if plot.lines.iter().all(|l| l.segments.is_empty()) {
        let (right, bottom) = chart.backend_coord(&(scales.x_end, y.lo));
        root.draw(&Text::new(
            "no per-second data for this target",
            ((plot_left + right) / 2, (plot_top + bottom) / 2),
            (FONT, 15)
                .into_font()
                .color(&MUTED)
                .pos(Pos::new(HPos::Center, VPos::Center)),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axis_covers_the_data_with_1_2_5_ticks() {
        let y = YAxis::log(0.3, 104.0);
        let want = [0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0];
        assert_eq!(y.ticks.len(), want.len());
        for (got, want) in y.ticks.iter().zip(want) {
            assert!((got - want).abs() < 1e-9, "{got} != {want}");
        }
        assert!((y.lo - 0.2f64.log10()).abs() < 1e-9 && (y.hi - 200f64.log10()).abs() < 1e-9);
    }

    #[test]
    fn linear_axis_ends_on_a_round_number() {
        let y = YAxis::linear(120.0);
        assert_eq!(y.ticks, vec![0.0, 50.0, 100.0, 150.0]);
        assert!(y.hi >= 150.0 && y.lo < 0.0);
    }

    #[test]
    fn gaps_split_a_line() {
        let line = Line::from_seconds(
            "x",
            BLUE,
            [
                (0, Some(1.0)),
                (1, Some(2.0)),
                (2, None),
                (3, Some(3.0)),
                (5, Some(4.0)),
            ],
        );
        assert_eq!(line.segments.len(), 3);
        assert_eq!(line.segments[0], vec![(0.5, 1.0), (1.5, 2.0)]);
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick_label(0.2), "0.2");
        assert_eq!(tick_label(100.0), "100");
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(10f64.powf(-1.0)), "0.1");
    }
}
