//! Judging gates against a run: each gate's value read from the cell, phase or target it
//! names (or the worst window of a phase), and its verdict.

use super::cell::tenant_value;
use super::recovery::{self, Band, Recovery, SecondSample, second_sample};
use super::window::worst_window;
use super::{Actual, Check, Gate, GateError, Metric};
use crate::names::glob_matches;
use crate::results::read::SeriesRow;
use crate::results::{PhaseResult, RunResult, TargetResult};

/// The per-second samples of one target, all tenants together; the last second weighed by the
/// part of it the run covered.
fn seconds_of(run: &RunResult, target: &TargetResult, series: &[SeriesRow]) -> Vec<SecondSample> {
    // The target's own rule: a run may hold targets of different limits.
    let allowance_per_s = run.limit_of(target).per_s();
    let target = target.name.as_str();
    let mut seconds: Vec<u64> = series
        .iter()
        .filter(|r| r.target == target)
        .map(|r| r.second)
        .collect();
    seconds.sort_unstable();
    seconds.dedup();
    seconds
        .into_iter()
        .map(|second| {
            let rows = series
                .iter()
                .filter(|r| r.target == target && r.second == second);
            let p99 = rows
                .clone()
                .find(|r| r.tenant == "all")
                .map_or(0, |r| r.p99_us);
            let tenants: Vec<_> = rows
                .filter(|r| r.tenant != "all")
                .map(|r| (r.counts, allowance_per_s * run.keys_of(&r.tenant) as f64))
                .collect();
            let covered_s = (run.duration_s - second as f64).clamp(0.0, 1.0);
            second_sample(second as f64, covered_s, p99, &tenants)
        })
        .collect()
}

/// Why a run has no band to judge recovery against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoBand {
    /// The scenario has no phase to learn it from: a mistake in the scenario.
    #[error("recovery_s needs a phase named \"steady\" to learn the band from")]
    NoSteadyPhase,
    /// The phase is there but nothing was measured in it: the recovery is not measured.
    #[error("the steady phase had no traffic to learn the band from")]
    SilentSteady,
}

/// How long `target` took after `fault` to be back in its steady band, by the rule of
/// [`recovery`]; `Err` when the run has no band to judge it against.
pub fn recovery_time(
    run: &RunResult,
    target: &TargetResult,
    fault: &PhaseResult,
    series: &[SeriesRow],
) -> Result<Recovery, NoBand> {
    let steady = target
        .phases
        .iter()
        .find(|p| p.name == "steady")
        .ok_or(NoBand::NoSteadyPhase)?;
    let samples = seconds_of(run, target, series);
    let in_steady: Vec<SecondSample> = samples
        .iter()
        .copied()
        .filter(|s| s.at_s >= steady.start_s && s.at_s + 1.0 <= steady.end_s)
        .collect();
    let band = Band::from_steady(&in_steady).ok_or(NoBand::SilentSteady)?;
    // Several faults in one run: each one's recovery ends where the next fault begins.
    let next_fault = target
        .phases
        .iter()
        .filter(|p| p.start_s >= fault.end_s && !p.faults.is_empty())
        .map(|p| p.start_s)
        .reduce(f64::min);
    Ok(recovery::recovery(
        &samples,
        fault.end_s,
        next_fault,
        &band,
        // "Back" is judged over the target's own windows: a target with a declared limit
        // recovers over its windows, not the scenario's.
        recovery::seconds_needed(run.limit_of(target).window_s),
    ))
}

/// Checks every gate against a run; `series` is needed for `recovery_s` and windows.
pub fn evaluate(
    run: &RunResult,
    series: &[SeriesRow],
    gates: &[Gate],
) -> Result<Vec<Check>, GateError> {
    let mut checks = Vec::new();
    for (i, gate) in gates.iter().enumerate() {
        let invalid = |message: String| GateError::Invalid {
            index: i + 1,
            message,
        };
        let targets: Vec<&TargetResult> = run
            .targets
            .iter()
            .filter(|t| glob_matches(&gate.target, &t.name))
            .collect();
        if targets.is_empty() {
            return Err(invalid(format!(
                "target {:?} matches no target of the run ({})",
                gate.target,
                names(run.targets.iter().map(|t| t.name.as_str()))
            )));
        }
        for target in targets {
            let actual = match &gate.phase {
                None => run_value(gate.metric, target),
                Some(name) => {
                    let phase =
                        target
                            .phases
                            .iter()
                            .find(|p| &p.name == name)
                            .ok_or_else(|| {
                                invalid(format!(
                                    "phase {name:?} is not a phase of {} ({})",
                                    target.name,
                                    names(target.phases.iter().map(|p| p.name.as_str()))
                                ))
                            })?;
                    phase_value(run, series, gate, target, phase).map_err(invalid)?
                }
            };
            checks.push(Check {
                target: target.name.clone(),
                phase: gate.phase.clone(),
                metric: gate.metric,
                tenant: gate.tenant.clone(),
                bound: gate.bound,
                level: gate.level,
                window: gate.window,
                passed: actual.passes(gate.bound),
                actual,
            });
        }
    }
    Ok(checks)
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

/// A metric of the whole run, for one target.
fn run_value(metric: Metric, target: &TargetResult) -> Actual {
    match metric {
        Metric::SendLagP99Ms => Actual::of(
            target.send_lag_us.map(|l| l.p99 as f64 / 1000.0),
            "nothing was sent to this target",
        ),
        // Parsing lets only whole-run metrics leave out the phase.
        m => Actual::NotMeasured(format!("{} needs a phase", m.name())),
    }
}

/// A gate's value in one phase of one target; `Err`: the scenario cannot have it measured.
fn phase_value(
    run: &RunResult,
    series: &[SeriesRow],
    gate: &Gate,
    target: &TargetResult,
    phase: &PhaseResult,
) -> Result<Actual, String> {
    let tenant =
        match &gate.tenant {
            Some(name) => Some(phase.tenants.iter().find(|t| &t.name == name).ok_or_else(
                || {
                    format!(
                        "tenant {name:?} is not a tenant of the run ({})",
                        names(phase.tenants.iter().map(|t| t.name.as_str()))
                    )
                },
            )?),
            None => None,
        };
    if let Some(width) = gate.window {
        return Ok(worst_window(
            run,
            series,
            target,
            phase,
            gate.tenant.as_deref(),
            gate.metric,
            width,
            gate.bound,
        ));
    }
    Ok(match (gate.metric, tenant) {
        (Metric::RecoveryS, _) => match recovery_time(run, target, phase, series) {
            Ok(r) => Actual::from(r),
            Err(e @ NoBand::SilentSteady) => Actual::NotMeasured(e.to_string()),
            Err(e @ NoBand::NoSteadyPhase) => return Err(e.to_string()),
        },
        (Metric::StoreAmplification, _) => Actual::of(
            phase.store_amplification,
            "no Redis command count for this phase, or nothing was offered",
        ),
        (Metric::StoreAmplificationPerAttempt, _) => Actual::of(
            phase.store_amplification_per_attempt,
            "no Redis command count for this phase, or nothing was sent",
        ),
        (m, Some(tenant)) => tenant_value(m, tenant),
        (m, None) => tenant_value(m, &phase.all),
    })
}
