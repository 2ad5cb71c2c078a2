//! The trade-off map of one fault: every target as a labelled marker, over-admission across,
//! wrongful denial up, so the two ways a limiter fails under a fault read as one picture and
//! the best corner, (0, 0), is where a limiter wants to be.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axes::{Ticked, YAxis, tick_label};
use super::canvas::{PlotError, house_mesh};
use super::labels::{self, LABEL_PX, LABEL_ROW, Rect};
use super::style::{GREEN, LEGEND_ROW, MUTED, PALETTE, TITLE_ROW, WIDTH, bold_width, font};
use crate::results::PhaseResult;

/// Height of the chart area, axes included.
const MAP_HEIGHT: u32 = 380;
/// Smallest range of either axis, in %: a map whose targets all stay under 1 % should show
/// them near the best corner, not spread over an axis that magnifies noise.
const MIN_RANGE_PCT: f64 = 10.0;

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

pub(super) fn draw(map: &TradeOff<'_>, axes: &MapAxes) -> Result<String, PlotError> {
    let missing = map.not_measured();
    // The key's rows are known once the labels are placed; the rows under the chart add to
    // the picture's height, not take from the chart, so the markers and labels stay where
    // they are: the first pass counts the rows, the second draws with them.
    let draw_with = |key_rows: usize| -> Result<(String, usize), PlotError> {
        let mut svg = String::new();
        let needed = {
            let height = height_with(&missing, key_rows);
            let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
            let needed = draw_on(&root, map, axes, &missing, key_rows)?;
            root.present()?;
            needed
        };
        Ok((svg, needed))
    };
    let (svg, needed) = draw_with(0)?;
    if needed == 0 {
        return Ok(svg);
    }
    Ok(draw_with(needed)?.0)
}

fn height_with(missing: &[String], key_rows: usize) -> u32 {
    TITLE_ROW + MAP_HEIGHT + LEGEND_ROW * (u32::from(!missing.is_empty()) + key_rows as u32)
}

/// Draws the map with `key_rows` rows of key under it; returns the rows the key needed.
fn draw_on(
    root: &Root<'_>,
    map: &TradeOff<'_>,
    axes: &MapAxes,
    missing: &[String],
    key_rows: usize,
) -> Result<usize, PlotError> {
    root.fill(&WHITE)?;
    root.draw(&Text::new(
        title(map.phase),
        (12, 8),
        font(16.0).style(FontStyle::Bold).color(&BLACK),
    ))?;
    let (x, y) = (&axes.x, &axes.y);
    let pct = |v: &f64| format!("{} %", tick_label(*v));
    let under = u32::from(!missing.is_empty()) + key_rows as u32;
    let mut chart = ChartBuilder::on(root)
        .margin_top(TITLE_ROW)
        .margin_right(24)
        .margin_left(8)
        .margin_bottom(LEGEND_ROW * under)
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
    let drawn: Vec<(&MapPoint, (i32, i32))> = map
        .points
        .iter()
        .filter_map(|pt| Some((pt, to_px(pt.at()?))))
        .collect();
    let at: Vec<(i32, i32)> = drawn.iter().map(|(_, px)| *px).collect();
    let corner = best_corner(root, to_px((0.0, 0.0)))?;
    let rings = labels::rings(&at);
    for ((pt, _), &(px, r)) in drawn.iter().zip(&rings) {
        root.draw(&Circle::new(px, r, colour(pt).filled()))?;
        root.draw(&Circle::new(px, r, WHITE.stroke_width(1)))?;
    }
    let spots = labels::spots(&rings);
    // No label on a marker, on the best corner's ring or on its name.
    let mut taken = corner.to_vec();
    taken.extend(rings.iter().copied().map(labels::ring_box));
    // The biggest blocks first, while the room near their spots is free.
    let mut by_size: Vec<&labels::Spot> = spots.iter().collect();
    by_size.sort_by_key(|s| std::cmp::Reverse(s.members.len()));
    // Labels may reach over the right margin.
    let bounds = (left, top, right + 20, bottom);
    let mut unplaced = Vec::new();
    for spot in by_size {
        let members: Vec<&MapPoint> = spot.members.iter().map(|&i| drawn[i].0).collect();
        let lines: Vec<String> = members.iter().map(|pt| pt.label()).collect();
        match labels::place(labels::block_size(&lines), spot, bounds, &taken) {
            Some(placed) => {
                block(root, &members, spot, placed)?;
                taken.push(placed.rect);
            }
            None => unplaced.push(key_entry(&members)),
        }
    }
    let key = labels::key_rows(&unplaced, f64::from(WIDTH) - 100.0);
    let mut row_y = root.dim_in_pixel().1 as i32 - LEGEND_ROW as i32 * under as i32 + 10;
    let mut under_chart = |text: String| {
        let drawn = root.draw(&Text::new(
            text,
            (80, row_y),
            font(13.0)
                .color(&MUTED)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ));
        row_y += LEGEND_ROW as i32;
        drawn
    };
    for row in key.iter().take(key_rows) {
        under_chart(row.clone())?;
    }
    if !missing.is_empty() {
        under_chart(format!("not measured, not drawn: {}", missing.join(", ")))?;
    }
    Ok(key.len())
}

/// The phase and, when they fit the width, its faults (the caption always names them).
fn title(p: &PhaseResult) -> String {
    let what = "over-admission against wrongful denial, every target";
    let long = format!("{} ({}): {what}", p.name, p.faults.join(", "));
    if bold_width(&long, 16.0) <= f64::from(WIDTH) - 24.0 {
        long
    } else {
        format!("{}: {what}", p.name)
    }
}

fn colour(pt: &MapPoint) -> RGBColor {
    PALETTE[pt.index % PALETTE.len()]
}

/// A spot's entry in the key, for a block that found no room beside it: where, then who, one
/// part per name (the key breaks its rows between them).
fn key_entry(members: &[&MapPoint]) -> Vec<String> {
    let (x, y) = members[0].at().unwrap_or_default();
    let mut parts: Vec<String> = members.iter().map(|pt| pt.label()).collect();
    parts[0] = format!("at {x:.1} %, {y:.1} %: {}", parts[0]);
    parts
}

/// A ring around (0, 0) and its name above it; returns the boxes of both, which labels avoid.
fn best_corner(root: &Root<'_>, (x, y): (i32, i32)) -> Result<[Rect; 2], PlotError> {
    const RING: i32 = 16;
    root.draw(&Circle::new((x, y), RING, GREEN.stroke_width(2)))?;
    let text = "best corner";
    root.draw(&Text::new(
        text,
        (x + 14, y - 20),
        font(13.0)
            .style(FontStyle::Bold)
            .color(&GREEN)
            .pos(Pos::new(HPos::Left, VPos::Bottom)),
    ))?;
    let w = bold_width(text, LABEL_PX) as i32;
    Ok([
        labels::ring_box(((x, y), RING)),
        (x + 14, y - 20 - LABEL_ROW, x + 14 + w, y - 20),
    ])
}

/// A spot's labels in their box, one line each (with a square of its marker's colour when
/// there are several), and a line to the spot when the box had to move off its row.
fn block(
    root: &Root<'_>,
    members: &[&MapPoint],
    spot: &labels::Spot,
    placed: labels::Placed,
) -> Result<(), PlotError> {
    let rect = placed.rect;
    let (x, y) = spot.at;
    if placed.moved {
        let right_of = rect.0 > x;
        let end = if right_of { rect.0 - 2 } else { rect.2 + 2 };
        let half = LABEL_ROW / 2;
        let ey = y.clamp(rect.1 + half, rect.3 - half);
        let line = match members {
            [one] => colour(one),
            _ => MUTED,
        };
        root.draw(&PathElement::new(
            vec![(x, y), (end, ey)],
            line.mix(0.8).stroke_width(1),
        ))?;
    }
    let several = members.len() > 1;
    for (i, pt) in members.iter().enumerate() {
        let cy = rect.1 + LABEL_ROW * i as i32 + LABEL_ROW / 2;
        let mut tx = rect.0;
        if several {
            root.draw(&Rectangle::new(
                [(tx, cy - 4), (tx + 8, cy + 4)],
                colour(pt).filled(),
            ))?;
            tx += labels::SWATCH_PX;
        }
        root.draw(&Text::new(
            pt.label(),
            (tx, cy),
            font(LABEL_PX)
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(())
}
