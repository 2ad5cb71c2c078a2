//! The trade-off map of one fault: every target as a labelled marker, over-admission across,
//! wrongful denial up, so the two ways a limiter fails under a fault read as one picture and
//! the best corner, (0, 0), is where a limiter wants to be.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axes::{Ticked, YAxis, tick_label};
use super::canvas::{PlotError, house_mesh};
use super::style::{GREEN, LEGEND_ROW, MUTED, PALETTE, TITLE_ROW, WIDTH, font, text_width};
use crate::results::PhaseResult;

/// Height of the chart area, axes included.
const MAP_HEIGHT: u32 = 380;
/// Smallest range of either axis, in %: a map whose targets all stay under 1 % should show
/// them near the best corner, not spread over an axis that magnifies noise.
const MIN_RANGE_PCT: f64 = 10.0;
const LABEL_PX: f64 = 13.0;
const LABEL_ROW: i32 = 17;

/// One target on a map: its worst tenant's figures of the phase (shares, 1.0 = 100 %; `None`
/// when not measured) and the phase's p99 in ms.
#[derive(Debug, Clone)]
pub(in crate::report) struct MapPoint {
    pub(in crate::report) target: String,
    /// Its place among the run's targets: its colour in every overview plot.
    pub(in crate::report) index: usize,
    pub(in crate::report) over: Option<f64>,
    pub(in crate::report) denied: Option<f64>,
    pub(in crate::report) p99_ms: Option<f64>,
}

impl MapPoint {
    /// Where it is drawn, in %: only when both figures were measured (a figure not measured
    /// drawn at 0 would sit in the best corner).
    fn at(&self) -> Option<(f64, f64)> {
        Some((self.over? * 100.0, self.denied? * 100.0))
    }

    fn label(&self) -> String {
        match self.p99_ms {
            Some(ms) => format!("{} · p99 {ms:.1} ms", self.target),
            None => format!("{} · p99 n/m", self.target),
        }
    }
}

/// The map of one fault phase.
#[derive(Debug, Clone)]
pub(in crate::report) struct TradeOff<'a> {
    pub(in crate::report) phase: &'a PhaseResult,
    /// What "worst" means on the axes, as they say it ("worst tenant").
    pub(in crate::report) whose: &'static str,
    pub(in crate::report) points: Vec<MapPoint>,
}

impl TradeOff<'_> {
    /// Targets not drawn, with what was not measured.
    pub(in crate::report) fn not_measured(&self) -> Vec<String> {
        self.points
            .iter()
            .filter(|p| p.at().is_none())
            .map(|p| {
                let what = match (p.over, p.denied) {
                    (None, None) => "neither figure",
                    (None, _) => "over-admission",
                    _ => "wrongful denial",
                };
                format!("{} ({what})", p.target)
            })
            .collect()
    }
}

/// The axes every map of a run shares, so the faults' maps compare at a glance.
#[derive(Debug, Clone)]
pub(in crate::report) struct MapAxes {
    x: YAxis,
    y: YAxis,
}

impl MapAxes {
    pub(in crate::report) fn of(maps: &[TradeOff<'_>]) -> Self {
        let drawn = || maps.iter().flat_map(|m| &m.points).filter_map(MapPoint::at);
        let x_max = drawn().map(|(x, _)| x).fold(MIN_RANGE_PCT, f64::max);
        let y_max = drawn().map(|(_, y)| y).fold(MIN_RANGE_PCT, f64::max);
        // Room below and left of 0, so the best corner's ring and a label on the 0 row fit
        // inside the chart.
        let roomy = |max: f64| {
            let mut axis = YAxis::linear(max);
            axis.lo = -(axis.hi - axis.lo) * 0.06;
            axis
        };
        Self {
            x: roomy(x_max),
            y: roomy(y_max),
        }
    }
}

type Root<'b> = DrawingArea<SVGBackend<'b>, plotters::coord::Shift>;

/// A label's box in px: left, top, right, bottom.
type Rect = (i32, i32, i32, i32);

fn overlaps(a: Rect, b: Rect) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

pub(super) fn draw(map: &TradeOff<'_>, axes: &MapAxes) -> Result<String, PlotError> {
    let missing = map.not_measured();
    let note_rows = u32::from(!missing.is_empty());
    let height = TITLE_ROW + MAP_HEIGHT + LEGEND_ROW * note_rows;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        draw_on(&root, map, axes, &missing, height)?;
        root.present()?;
    }
    Ok(svg)
}

fn draw_on(
    root: &Root<'_>,
    map: &TradeOff<'_>,
    axes: &MapAxes,
    missing: &[String],
    height: u32,
) -> Result<(), PlotError> {
    root.fill(&WHITE)?;
    let p = map.phase;
    root.draw(&Text::new(
        format!(
            "{} ({}): over-admission against wrongful denial, every target",
            p.name,
            p.faults.join(", ")
        ),
        (12, 8),
        font(16.0).style(FontStyle::Bold).color(&BLACK),
    ))?;
    let (x, y) = (&axes.x, &axes.y);
    let pct = |v: &f64| format!("{} %", tick_label(*v));
    let mut chart = ChartBuilder::on(root)
        .margin_top(TITLE_ROW)
        .margin_right(24)
        .margin_left(8)
        .margin_bottom(LEGEND_ROW * u32::from(!missing.is_empty()))
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(
            Ticked {
                range: x.lo..x.hi,
                ticks: x.ticks.clone(),
            },
            Ticked {
                range: y.lo..y.hi,
                ticks: y.ticks.clone(),
            },
        )?;
    house_mesh(&mut chart)
        .x_desc(format!(
            "over-admission, {} (% above its allowance)",
            map.whose
        ))
        .y_desc(format!(
            "wrongful denial, {} (% of entitled refused)",
            map.whose
        ))
        .x_label_formatter(&pct)
        .y_label_formatter(&pct)
        .draw()?;

    let to_px = |(vx, vy): (f64, f64)| chart.backend_coord(&(vx, vy));
    let (left, top) = to_px((x.lo, y.hi));
    let (right, bottom) = to_px((x.hi, y.lo));
    let mut taken = vec![best_corner(root, to_px((0.0, 0.0)))?];
    let drawn: Vec<(&MapPoint, (i32, i32))> = map
        .points
        .iter()
        .filter_map(|pt| Some((pt, to_px(pt.at()?))))
        .collect();
    // A marker with others drawn over it is larger, so targets on one spot show as nested
    // rings instead of the last one hiding the others.
    for (i, (pt, px)) in drawn.iter().enumerate() {
        let over_it = drawn[i + 1..]
            .iter()
            .filter(|(_, q)| (q.0 - px.0).abs() <= 8 && (q.1 - px.1).abs() <= 8)
            .count();
        let r = 6 + 3 * over_it.min(3) as i32;
        let colour = PALETTE[pt.index % PALETTE.len()];
        root.draw(&Circle::new(*px, r, colour.filled()))?;
        root.draw(&Circle::new(*px, r, WHITE.stroke_width(1)))?;
    }
    for (pt, px) in &drawn {
        let colour = PALETTE[pt.index % PALETTE.len()];
        // Labels may reach into the title row's lower half and over the right margin.
        let bounds = (left, top - TITLE_ROW as i32 / 3, right + 20, bottom);
        let rect = place_label(&pt.label(), *px, bounds, &taken);
        label(root, &pt.label(), *px, rect, colour)?;
        taken.push(rect);
    }
    if !missing.is_empty() {
        root.draw(&Text::new(
            format!("not measured, not drawn: {}", missing.join(", ")),
            (80, height as i32 - LEGEND_ROW as i32 + 10),
            font(13.0)
                .color(&MUTED)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(())
}

/// A ring around (0, 0) and its name above it; returns the name's box, which labels avoid.
fn best_corner(root: &Root<'_>, (x, y): (i32, i32)) -> Result<Rect, PlotError> {
    root.draw(&Circle::new((x, y), 16, GREEN.stroke_width(2)))?;
    let text = "best corner";
    root.draw(&Text::new(
        text,
        (x + 14, y - 20),
        font(13.0)
            .style(FontStyle::Bold)
            .color(&GREEN)
            .pos(Pos::new(HPos::Left, VPos::Bottom)),
    ))?;
    let w = text_width(text, LABEL_PX) as i32;
    Ok((x + 14, y - 20 - LABEL_ROW, x + 14 + w, y - 20))
}

/// The first box, right of the marker (left of it near the right edge), then a row lower,
/// higher, two rows lower…, that overlaps no label placed before it and stays in the chart.
fn place_label(text: &str, (x, y): (i32, i32), chart: Rect, taken: &[Rect]) -> Rect {
    let w = text_width(text, LABEL_PX) as i32;
    let left_of = x + 14 + w > chart.2;
    let x0 = if left_of { x - 14 - w } else { x + 14 };
    let candidate = |dy: i32| {
        let cy = y + dy;
        (x0, cy - LABEL_ROW / 2, x0 + w, cy + LABEL_ROW / 2)
    };
    (0..12)
        .map(|k| {
            let step = (k + 1) / 2 * LABEL_ROW;
            if k % 2 == 1 { step } else { -step }
        })
        .map(candidate)
        .find(|r| r.1 >= chart.1 && r.3 <= chart.3 && !taken.iter().any(|t| overlaps(*r, *t)))
        .unwrap_or_else(|| candidate(0))
}

/// The label in its box, with a line to its marker when it had to move off the marker's row.
fn label(
    root: &Root<'_>,
    text: &str,
    (x, y): (i32, i32),
    rect: Rect,
    colour: RGBColor,
) -> Result<(), PlotError> {
    let cy = (rect.1 + rect.3) / 2;
    let right_of = rect.0 > x;
    if cy != y {
        let end = if right_of { rect.0 - 2 } else { rect.2 + 2 };
        root.draw(&PathElement::new(
            vec![(x, y), (end, cy)],
            colour.mix(0.8).stroke_width(1),
        ))?;
    }
    root.draw(&Text::new(
        text.to_owned(),
        (rect.0, cy),
        font(LABEL_PX)
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_moves_off_a_label_already_on_its_row() {
        let chart = (0, 0, 900, 400);
        let first = place_label("alpha · p99 1.0 ms", (100, 200), chart, &[]);
        let second = place_label("beta · p99 1.0 ms", (100, 200), chart, &[first]);
        assert_eq!(
            first.1 + first.3,
            400,
            "the first stays on its marker's row"
        );
        assert!(!overlaps(first, second));
    }

    #[test]
    fn a_label_near_the_right_edge_goes_left_of_its_marker() {
        let rect = place_label("gamma · p99 1.0 ms", (880, 200), (0, 0, 900, 400), &[]);
        assert!(rect.2 < 880);
    }
}
