//! Worst-window gates (`window = "5s"`): a phase judged by its worst rolling window of whole
//! seconds, not its average, so five seconds of 5xx in a long phase still fail a gate.
//!
//! A window's figures are the phase's, computed the same way from the window's counts: the
//! counts of `series.csv`'s seconds summed, then the results' own definitions
//! ([`tenant_of`], [`all_tenants_of`]) with the allowance and slack of a phase one window
//! long. Only seconds wholly inside the phase count, and windows slide a second at a time. A
//! window nothing was due in is passed over; one whose requests were due but none reached the
//! target makes the whole gate not measured.

use std::num::NonZeroU32;

use super::cell::tenant_value;
use super::{Actual, Bound, Metric};
use crate::metrics::Counts;
use crate::results::build::{Allowed, all_tenants_of, tenant_of};
use crate::results::read::SeriesRow;
use crate::results::{PhaseResult, RunResult, TargetResult, TenantResult};

/// The worst value of `metric` over every window of `width` seconds in `phase`: the highest
/// for a `max`, the lowest for a `min`.
#[allow(clippy::too_many_arguments)] // One call site; a struct would only rename them.
pub(super) fn worst_window(
    run: &RunResult,
    series: &[SeriesRow],
    target: &TargetResult,
    phase: &PhaseResult,
    tenant: Option<&str>,
    metric: Metric,
    width: NonZeroU32,
    bound: Bound,
) -> Actual {
    let width = u64::from(width.get());
    // A hair under a whole second counts as that second (phases scaled by --duration-scale).
    let first = (phase.start_s - 1e-9).ceil().max(0.0) as u64;
    let end = (phase.end_s + 1e-9).floor().max(0.0) as u64;
    let whole = end.saturating_sub(first);
    if whole < width {
        return Actual::NotMeasured(format!(
            "the phase has {whole} whole seconds, fewer than the {width} s window"
        ));
    }
    let limit = run.limit_of(target);
    let allowed = Allowed {
        allowance: limit.allowance(width as f64),
        slack: limit.window_slack(width as f64),
        length_s: width as f64,
    };
    // Each tenant's counts second by second, from `first`.
    let per_second: Vec<(&str, Vec<Counts>)> = phase
        .tenants
        .iter()
        .map(|t| {
            let mut seconds = vec![Counts::default(); whole as usize];
            for row in series
                .iter()
                .filter(|r| r.target == target.name && r.tenant == t.name)
                .filter(|r| (first..end).contains(&r.second))
            {
                seconds[(row.second - first) as usize].merge(&row.counts);
            }
            (t.name.as_str(), seconds)
        })
        .collect();
    let window_of = |start: usize| -> Vec<TenantResult> {
        per_second
            .iter()
            .map(|(name, seconds)| {
                let mut c = Counts::default();
                for s in &seconds[start..start + width as usize] {
                    c.merge(s);
                }
                let a = allowed.of(run.keys_of(name));
                tenant_of(name, &c, a.allowance, a.slack, a.length_s)
            })
            .collect()
    };
    let mut values = Vec::new();
    for start in 0..=(whole - width) as usize {
        let tenants = window_of(start);
        let cell = match tenant {
            Some(name) => tenants.into_iter().find(|t| t.name == name),
            None => Some(all_tenants_of(&tenants, allowed)),
        };
        let Some(cell) = cell else { continue };
        match tenant_value(metric, &cell) {
            Actual::Value(v) => values.push(v),
            // Requests were due but none reached the target (all dropped or throttled): the
            // window cannot be judged, and it may be the worst; never passed over.
            Actual::NotMeasured(why) if cell.counts.offered > 0 => {
                let from = first + start as u64;
                return Actual::NotMeasured(format!("the window {from}–{} s: {why}", from + width));
            }
            // Nothing was due in the window: nothing to judge.
            _ => {}
        }
    }
    let worst = match bound {
        Bound::Max(_) => values.iter().copied().reduce(f64::max),
        Bound::Min(_) => values.iter().copied().reduce(f64::min),
    };
    worst.map_or_else(
        || {
            Actual::NotMeasured(format!(
                "no request was due in any {width} s window of the phase"
            ))
        },
        Actual::Value,
    )
}
