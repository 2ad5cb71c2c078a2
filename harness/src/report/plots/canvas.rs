//! Drawing a plot into an SVG string: the title, the chart with its shaded fault windows and
//! phase names, the lines, and the legend in its own rows under the x axis.

use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axes::{Ticked, XAxis, YAxis, tick_label};
use super::series::{Line, Plot};
use super::style::{
    FAULT_TEXT, FONT, GRID, LEGEND_ROW, MUTED, PLOT_HEIGHT, TITLE_ROW, WIDTH, fault_fill, font,
    text_width,
};
use crate::results::PhaseResult;

/// What drawing into an SVG string can fail with.
pub(crate) type PlotError = DrawingAreaErrorKind<std::io::Error>;

type Root<'b> = DrawingArea<SVGBackend<'b>, Shift>;
pub(super) type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<Ticked, Ticked>>;

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

pub(super) fn draw(
    mut plot: Plot<'_>,
    phases: &[PhaseResult],
    x: &XAxis,
) -> Result<String, PlotError> {
    let solid = plot.lines.iter().filter(|l| !l.dashed).count();
    for (i, line) in plot.lines.iter_mut().filter(|l| !l.dashed).enumerate() {
        line.width = 2 + (solid - 1 - i).min(3) as u32;
    }
    let (legend, legend_rows) = legend_layout(&plot.lines);
    let height = PLOT_HEIGHT + TITLE_ROW + LEGEND_ROW * legend_rows.max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        draw_on(&root, &plot, phases, x, &legend, height)?;
        root.present()?;
    }
    Ok(svg)
}

fn draw_on(
    root: &Root<'_>,
    plot: &Plot<'_>,
    phases: &[PhaseResult],
    x: &XAxis,
    legend: &[(u32, i32)],
    height: u32,
) -> Result<(), PlotError> {
    root.fill(&WHITE)?;
    root.draw(&Text::new(
        plot.title.clone(),
        (12, 8),
        font(16.0).style(FontStyle::Bold).color(&BLACK),
    ))?;
    let legend_rows = legend.iter().map(|(row, _)| row + 1).max().unwrap_or(1);
    let mut chart = chart(root, plot.y, x, legend_rows)?;
    // Shading first, so grid and lines are drawn over it.
    shade_fault_windows(&mut chart, plot.y, phases, x)?;
    mesh(&mut chart, plot, x)?;
    phase_boundaries(&mut chart, plot.y, phases)?;
    phase_names(root, &chart, plot.y, phases, x)?;
    lines(&mut chart, plot)?;
    legend_entries(root, plot, legend, legend_rows, height)?;
    if plot.lines.iter().all(|l| l.segments.is_empty()) {
        no_data_note(root, &chart, plot.y, x)?;
    }
    Ok(())
}

/// The chart area between the title row and the legend rows, on the shared axes.
fn chart<'a, 'b>(
    root: &'a Root<'b>,
    y: &YAxis,
    x: &XAxis,
    legend_rows: u32,
) -> Result<Chart<'a, 'b>, PlotError> {
    ChartBuilder::on(root)
        .margin_top(TITLE_ROW)
        .margin_right(24)
        .margin_left(8)
        .margin_bottom(LEGEND_ROW * legend_rows)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(
            Ticked {
                range: 0.0..x.end,
                ticks: x.ticks.clone(),
            },
            Ticked {
                range: y.lo..y.hi,
                ticks: y.ticks.iter().map(|v| y.map(*v)).collect(),
            },
        )
}

fn shade_fault_windows(
    chart: &mut Chart<'_, '_>,
    y: &YAxis,
    phases: &[PhaseResult],
    x: &XAxis,
) -> Result<(), PlotError> {
    let shade = fault_fill().filled();
    for p in phases.iter().filter(|p| !p.faults.is_empty()) {
        chart.draw_series(std::iter::once(Rectangle::new(
            [(p.start_s, y.lo), (p.end_s.min(x.end), y.hi)],
            shade,
        )))?;
    }
    Ok(())
}

/// Every plot's grid, axes and label fonts, for the caller to add its descriptions and tick
/// labels to.
pub(super) fn house_mesh<'a, 'c, 'b>(
    chart: &'c mut Chart<'a, 'b>,
) -> MeshStyle<'a, 'c, Ticked, Ticked, SVGBackend<'b>> {
    let mut mesh = chart.configure_mesh();
    mesh.light_line_style(TRANSPARENT)
        .bold_line_style(GRID.stroke_width(1))
        .axis_style(MUTED.stroke_width(1))
        .label_style(font(13.0).color(&BLACK))
        .axis_desc_style(font(14.0).color(&BLACK));
    mesh
}

/// Grid, axes, tick labels and axis descriptions.
fn mesh(chart: &mut Chart<'_, '_>, plot: &Plot<'_>, x: &XAxis) -> Result<(), PlotError> {
    let y = plot.y;
    let y_label = |v: &f64| tick_label(y.unmap(*v));
    let x_label = |v: &f64| tick_label(*v);
    house_mesh(chart)
        .x_desc(x.desc)
        .y_desc(plot.y_desc.as_str())
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .draw()
}

fn phase_boundaries(
    chart: &mut Chart<'_, '_>,
    y: &YAxis,
    phases: &[PhaseResult],
) -> Result<(), PlotError> {
    let boundary = MUTED.mix(0.7).stroke_width(1);
    for p in phases.iter().filter(|p| p.start_s > 0.0) {
        chart.draw_series(std::iter::once(DashedPathElement::new(
            vec![(p.start_s, y.lo), (p.start_s, y.hi)],
            4,
            4,
            boundary,
        )))?;
    }
    Ok(())
}

/// Each phase's name centred over it (fault phases in red, with what they do when there is
/// room); a name that does not fit its phase is left out rather than overlapping the next.
fn phase_names(
    root: &Root<'_>,
    chart: &Chart<'_, '_>,
    y: &YAxis,
    phases: &[PhaseResult],
    x: &XAxis,
) -> Result<(), PlotError> {
    let (_, plot_top) = chart.backend_coord(&(0.0, y.hi));
    for p in phases {
        let (x0, _) = chart.backend_coord(&(p.start_s, y.hi));
        let (x1, _) = chart.backend_coord(&(p.end_s.min(x.end), y.hi));
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
    Ok(())
}

fn lines(chart: &mut Chart<'_, '_>, plot: &Plot<'_>) -> Result<(), PlotError> {
    let y = plot.y;
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
    Ok(())
}

fn legend_entries(
    root: &Root<'_>,
    plot: &Plot<'_>,
    legend: &[(u32, i32)],
    legend_rows: u32,
    height: u32,
) -> Result<(), PlotError> {
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
    Ok(())
}

/// Said in the middle of the plot area, so an empty plot is not read as a target at zero.
fn no_data_note(
    root: &Root<'_>,
    chart: &Chart<'_, '_>,
    y: &YAxis,
    x: &XAxis,
) -> Result<(), PlotError> {
    let (plot_left, plot_top) = chart.backend_coord(&(0.0, y.hi));
    let (right, bottom) = chart.backend_coord(&(x.end, y.lo));
    root.draw(&Text::new(
        "no per-second data for this target",
        ((plot_left + right) / 2, (plot_top + bottom) / 2),
        (FONT, 15)
            .into_font()
            .color(&MUTED)
            .pos(Pos::new(HPos::Center, VPos::Center)),
    ))
}
