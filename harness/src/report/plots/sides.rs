//! The plots of `compare --html`: per target × phase, the baseline's and the candidate's p99
//! per second of the phase on one plot, every plot of the page on one latency axis.

use super::axes::{XAxis, YAxis};
use super::canvas::{PlotError, draw};
use super::series::{Line, Plot};
use super::style::{BLUE, VERMILLION};
use crate::results::PhaseResult;

/// One side's p99 per second: (second since the phase began, p99 in ms, or `None` when the
/// second had no answer to measure: a gap, not a zero).
pub(crate) type SecondsP99 = Vec<(u64, Option<f64>)>;

/// One plot of a comparison.
#[derive(Debug, Clone)]
pub(crate) struct SidesPlot<'a> {
    pub(crate) title: String,
    /// The phase as a side ran it: its name and faults head the plot, and a fault phase is
    /// shaded.
    pub(crate) phase: &'a PhaseResult,
    /// The longer of the two sides' phase, s.
    pub(crate) length_s: f64,
    /// The baseline's, then the candidate's, each with its legend.
    pub(crate) sides: [(String, SecondsP99); 2],
}

/// The plots, on one latency axis over all of them, so a slow phase reads as slow beside the
/// others.
pub(crate) fn p99_sides(plots: &[SidesPlot<'_>]) -> Result<Vec<String>, PlotError> {
    let y = YAxis::latency(
        plots
            .iter()
            .flat_map(|p| &p.sides)
            .flat_map(|(_, points)| points.iter().filter_map(|(_, v)| *v)),
    );
    let scale = if y.log { "ms, log scale" } else { "ms" };
    plots
        .iter()
        .map(|p| {
            let x = XAxis::seconds(p.length_s, "time since the phase began (s)");
            // The phase moved to 0, so its shading and name span the plot.
            let mut phase = p.phase.clone();
            phase.start_s = 0.0;
            phase.end_s = p.length_s;
            let lines = p
                .sides
                .iter()
                .zip([BLUE, VERMILLION])
                .map(|((label, points), colour)| {
                    Line::from_seconds(label.as_str(), colour, points.iter().copied())
                })
                .collect();
            draw(
                Plot {
                    title: p.title.clone(),
                    y_desc: format!("p99 latency ({scale})"),
                    y: &y,
                    lines,
                },
                std::slice::from_ref(&phase),
                &x,
            )
        })
        .collect()
}
