//! The plots of a report, drawn as SVG strings with plotters: per target, latency over time,
//! admitted requests per tenant against the limit, and 429 / 5xx rates; for the overview, one
//! tenant's admitted requests at every target and each fault's trade-off map; for `compare`,
//! both sides' p99 per second of a phase.
//!
//! Every plot of a run shares its x axis and, per kind, its y axis, so targets placed one under
//! the other compare at a glance. Fault windows are shaded and phase names written above the
//! plot area; the legend sits in its own row under the x axis so it never hides a line.

mod axes;
mod canvas;
mod labels;
mod series;
mod sides;
mod style;
mod tradeoff;

use crate::limits::LimitSource;
use crate::results::read::SeriesRow;
use crate::results::{RunResult, TargetResult};
use axes::tick_label;
use canvas::draw;
use plotters::style::RGBColor;
use series::{Line, Plot};
use style::{BLUE, PALETTE, PURPLE, VERMILLION};

pub(super) use axes::Scales;
pub(crate) use canvas::PlotError;
pub(crate) use sides::{SecondsP99, SidesPlot, p99_sides};
pub use style::FAULT_FILL_RGB;
pub(super) use tradeoff::{MapAxes, MapPoint, TradeOff};

/// The trade-off map of one fault phase, on the axes all the run's maps share.
pub(super) fn trade_off(map: &TradeOff<'_>, axes: &MapAxes) -> Result<String, PlotError> {
    tradeoff::draw(map, axes)
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
        &scales.x,
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
        .zip(PALETTE.iter().cycle())
        .map(|(tenant, colour)| {
            let points = tenant_rows(rows, tenant)
                .into_iter()
                .map(|r| (r.second, Some(r.counts.admitted as f64)));
            // A population's rest: the limit line is each of its keys', not the whole's.
            let label = match run.keys_of(tenant) {
                1 => tenant.clone(),
                keys => format!("{tenant} ({keys} keys)"),
            };
            Line::from_seconds(&label, *colour, points)
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
            label: format!("limit {} req/s per caller{whose}", tick_label(limit)),
            colour: RGBColor(60, 60, 60),
            dashed: true,
            width: 2,
            segments: vec![vec![(0.0, limit), (scales.x.end, limit)]],
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
        &scales.x,
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
        &scales.x,
    )
}

/// Admitted requests per second of one tenant at every target, each target in its colour of
/// the overview, with the limit that tenant was held to (one line per limit the targets were
/// judged against).
pub(super) fn tenant_at_every_target(
    run: &RunResult,
    tenant: &str,
    rows: &[SeriesRow],
    scales: &Scales,
) -> Result<String, PlotError> {
    let mut lines: Vec<Line> = run
        .targets
        .iter()
        .zip(PALETTE.iter().cycle())
        .map(|(t, colour)| {
            let own: Vec<&SeriesRow> = rows.iter().filter(|r| r.target == t.name).collect();
            let points = tenant_rows(&own, tenant)
                .into_iter()
                .map(|r| (r.second, Some(r.counts.admitted as f64)));
            Line::from_seconds(&t.name, *colour, points)
        })
        .collect();
    // A population's rest is held to each key's limit: together, that times its keys.
    let keys = run.keys_of(tenant);
    let mut limits: Vec<(f64, Vec<&str>)> = Vec::new();
    for t in &run.targets {
        let limit = run.limit_of(t).per_s() * keys as f64;
        if limit <= 0.0 {
            continue;
        }
        match limits.iter_mut().find(|(l, _)| (l - limit).abs() < 1e-9) {
            Some((_, whose)) => whose.push(&t.name),
            None => limits.push((limit, vec![&t.name])),
        }
    }
    let several = limits.len() > 1;
    let keys_text = if keys > 1 {
        format!(" for its {keys} keys")
    } else {
        String::new()
    };
    for (limit, whose) in &limits {
        let whose = if several {
            format!(" ({})", whose.join(", "))
        } else {
            String::new()
        };
        lines.push(Line {
            label: format!("limit {} req/s{keys_text}{whose}", tick_label(*limit)),
            colour: RGBColor(60, 60, 60),
            dashed: true,
            width: 2,
            segments: vec![vec![(0.0, *limit), (scales.x.end, *limit)]],
        });
    }
    let highest = lines
        .iter()
        .flat_map(|l| l.segments.iter().flatten())
        .map(|(_, y)| *y)
        .fold(0.0, f64::max);
    // The shared scale, unless a population's limit line would leave it.
    let own_axis;
    let y = if scales
        .admitted
        .ticks
        .last()
        .is_some_and(|top| *top >= highest)
    {
        &scales.admitted
    } else {
        own_axis = axes::YAxis::linear(highest);
        &own_axis
    };
    let phases = run.targets.first().map_or(&[][..], |t| t.phases.as_slice());
    draw(
        Plot {
            title: format!("{tenant}: admitted requests per second, every target"),
            y_desc: "admitted (req/s)".into(),
            y,
            lines,
        },
        phases,
        &scales.x,
    )
}
