//! The axes of the plots: the time axis, the y axes (linear, or log with 1-2-5 ticks), the
//! ticked ranges plotters draws them on, and the scales every target's plots of one report
//! share.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;

use crate::results::RunResult;
use crate::results::read::SeriesRow;

/// A y axis. The chart is always linear over `map(value)`: a log axis is then the same chart
/// type as a linear one, and its ticks are ours (1-2-5), not plotters' powers of ten.
#[derive(Debug, Clone)]
pub(super) struct YAxis {
    pub(super) log: bool,
    /// Bounds in mapped units.
    pub(super) lo: f64,
    pub(super) hi: f64,
    /// Tick values in data units.
    pub(super) ticks: Vec<f64>,
}

/// Smallest value a log axis shows: 1 µs in ms, the histograms' resolution.
const LOG_FLOOR: f64 = 0.001;

impl YAxis {
    /// 0 to a round number above `max`, a little below zero so a line at 0 stays visible
    /// instead of merging with the axis.
    pub(super) fn linear(max: f64) -> Self {
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

    /// A latency axis in ms over `values_ms` (zeros and below are not latencies: ignored).
    /// A slow store spreads latency over decades (0.5 ms served, 100 ms retried): on a
    /// linear axis the fast ones would be a flat line at zero, so a spread beyond 20× is log.
    pub(super) fn latency(values_ms: impl IntoIterator<Item = f64>) -> Self {
        let (min, max) = values_ms
            .into_iter()
            .filter(|v| *v > 0.0)
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            });
        if max > 0.0 && max / min > 20.0 {
            Self::log(min, max)
        } else {
            Self::linear(max)
        }
    }

    pub(super) fn map(&self, v: f64) -> f64 {
        if self.log {
            v.max(LOG_FLOOR).log10()
        } else {
            v
        }
    }

    pub(super) fn unmap(&self, v: f64) -> f64 {
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
pub(super) fn tick_label(v: f64) -> String {
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
pub(super) struct Ticked {
    pub(super) range: Range<f64>,
    pub(super) ticks: Vec<f64>,
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

/// A time axis in seconds from 0, ticked every round number of seconds (at most 12 ticks).
#[derive(Debug, Clone)]
pub(super) struct XAxis {
    pub(super) end: f64,
    pub(super) ticks: Vec<f64>,
    /// What the seconds count from, as the axis says it.
    pub(super) desc: &'static str,
}

impl XAxis {
    pub(super) fn seconds(end: f64, desc: &'static str) -> Self {
        let end = end.max(1.0);
        let step = [
            1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
        ]
        .into_iter()
        .find(|s| end / s <= 12.0)
        .unwrap_or(3600.0);
        let ticks = (0..)
            .map(|i| f64::from(i) * step)
            .take_while(|v| *v <= end)
            .collect();
        Self { end, ticks, desc }
    }
}

/// The axes every target's plots share in one report.
#[derive(Debug, Clone)]
pub(in crate::report) struct Scales {
    pub(super) x: XAxis,
    pub(super) latency: YAxis,
    pub(super) admitted: YAxis,
    pub(super) errors: YAxis,
}

impl Scales {
    pub(in crate::report) fn of(run: &RunResult, rows: &[SeriesRow]) -> Self {
        let last_second = rows
            .iter()
            .map(|r| r.second as f64 + 1.0)
            .fold(0.0, f64::max);
        let x = XAxis::seconds(run.duration_s.max(last_second), "time since start (s)");
        let latency = YAxis::latency(
            rows.iter()
                .filter(|r| r.tenant == "all" && r.counts.offered > 0)
                .flat_map(|r| [r.p50_us, r.p99_us])
                .map(|us| us as f64 / 1000.0),
        );

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
            x,
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
    fn tick_labels_are_short() {
        assert_eq!(tick_label(0.2), "0.2");
        assert_eq!(tick_label(100.0), "100");
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(10f64.powf(-1.0)), "0.1");
    }
}
