//! Outcomes: what each target of one run did under each of its faults (answers, tail latency,
//! over-admission, wrongful denial during and after, time to recover), and the scenario's
//! `[[claims]]` confirmed or refuted against the same run. `failmode outcomes` renders them as
//! one Markdown document; `docs/peers.md` is one.

pub mod claims;
mod markdown;

use std::path::Path;

pub use claims::{Claim, JudgedClaim, Verdict};
pub use markdown::render;

use crate::gate::recovery::Recovery;
use crate::gate::{self, GateError};
use crate::metrics::Counts;
use crate::results::read::{SeriesRow, read_series};
use crate::results::{PhaseResult, RunResult, TargetResult, TenantResult};
use crate::scenario::Scenario;

/// Shares of the requests offered during a phase, by what became of them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Answers {
    pub ok: f64,
    pub limited: f64,
    pub unavailable: f64,
    pub server_error: f64,
    /// Refused, reset or timed out, or never sent (the in-flight bound).
    pub failed: f64,
}

impl Answers {
    pub fn of(c: &Counts) -> Self {
        let share = |n: u64| {
            if c.offered == 0 {
                0.0
            } else {
                n as f64 / c.offered as f64
            }
        };
        Self {
            ok: share(c.admitted),
            limited: share(c.limited),
            unavailable: share(c.unavailable),
            server_error: share(c.server_error),
            failed: share(c.transport_error + c.dropped + c.throttled),
        }
    }
}

/// A ratio and the tenant it is worst for.
#[derive(Debug, Clone, PartialEq)]
pub struct Worst {
    pub value: f64,
    pub tenant: String,
}

impl Worst {
    /// The first tenant with the highest value; "every tenant" when they all share it. Tenants
    /// whose value was not measured are left out; `None` when none was.
    fn of(tenants: &[TenantResult], value: impl Fn(&TenantResult) -> Option<f64>) -> Option<Self> {
        let worst = tenants
            .iter()
            .filter_map(|t| {
                Some(Self {
                    value: value(t)?,
                    tenant: t.name.clone(),
                })
            })
            .reduce(|a, b| if b.value > a.value { b } else { a })?;
        if tenants.len() > 1 && tenants.iter().all(|t| value(t) == Some(worst.value)) {
            return Some(Self {
                value: worst.value,
                tenant: "every tenant".into(),
            });
        }
        Some(worst)
    }
}

/// One target under one fault.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultOutcome {
    pub target: String,
    pub answers: Answers,
    /// `None`: not measured (nothing reached the target).
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub over_admission: Option<Worst>,
    pub wrongful_denial: Option<Worst>,
    /// Over-admission in the fault-free phase right after: a fail-open target still not
    /// limiting because its client has not reconnected yet. Recovery time does not see it
    /// (it follows latency and wrongful denial), so it has its own column.
    pub over_admission_after: Option<Worst>,
    /// Wrongful denial in the fault-free phase right after: requests the store counted late
    /// (phantom hits) or a client still reconnecting.
    pub denial_after: Option<Worst>,
    /// `Err`: cannot be judged (no steady phase).
    pub recovery_s: Result<Recovery, String>,
    /// The target's own count of fallback decisions, where it exposes one.
    pub fallbacks: Option<f64>,
}

/// Every target under one phase with faults.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultTable {
    pub phase: String,
    pub faults: Vec<String>,
    pub start_s: f64,
    pub end_s: f64,
    /// The fault-free phase right after, if there is one.
    pub after: Option<String>,
    pub rows: Vec<FaultOutcome>,
}

/// A results folder read for its outcomes.
#[derive(Debug)]
pub struct Outcomes {
    pub folder: String,
    pub run: RunResult,
    pub scenario: Scenario,
    /// The first phase, when it has no fault: every target with a healthy Redis, the
    /// baseline the fault tables are read against.
    pub healthy: Option<FaultTable>,
    pub tables: Vec<FaultTable>,
    pub claims: Vec<JudgedClaim>,
}

#[derive(Debug, thiserror::Error)]
pub enum OutcomesError {
    #[error(transparent)]
    Read(#[from] crate::results::read::ReadError),
    #[error("cannot read the scenario of {folder}: {message}")]
    Scenario { folder: String, message: String },
    #[error("claim {index}: {message}")]
    Claim { index: usize, message: String },
    #[error("{0}")]
    Gate(#[from] GateError),
    #[error("the run has no phase with faults: nothing to tabulate")]
    NoFaults,
}

fn outcome(
    run: &RunResult,
    series: &[SeriesRow],
    target: &TargetResult,
    phase: &PhaseResult,
    after: Option<&PhaseResult>,
) -> FaultOutcome {
    FaultOutcome {
        target: target.name.clone(),
        answers: Answers::of(&phase.all.counts),
        p50_ms: phase.all.latency_us.map(|p| p.p50 as f64 / 1000.0),
        p99_ms: phase.all.latency_us.map(|p| p.p99 as f64 / 1000.0),
        over_admission: Worst::of(&phase.tenants, |t| t.over_admission),
        wrongful_denial: Worst::of(&phase.tenants, |t| t.wrongful_denial),
        over_admission_after: after.and_then(|a| Worst::of(&a.tenants, |t| t.over_admission)),
        denial_after: after.and_then(|a| Worst::of(&a.tenants, |t| t.wrongful_denial)),
        recovery_s: gate::recovery_time(run, target, phase, series).map_err(|e| e.to_string()),
        fallbacks: phase.fallbacks,
    }
}

/// One table per phase with faults, in timeline order, a row per target in run order.
pub fn tables(run: &RunResult, series: &[SeriesRow]) -> Vec<FaultTable> {
    let Some(first) = run.targets.first() else {
        return Vec::new();
    };
    first
        .phases
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.faults.is_empty())
        .map(|(i, p)| {
            let after = first
                .phases
                .get(i + 1)
                .filter(|next| next.faults.is_empty())
                .map(|next| next.name.clone());
            let rows = run
                .targets
                .iter()
                .filter_map(|t| {
                    let phase = t.phases.iter().find(|x| x.name == p.name)?;
                    let after_phase = after
                        .as_ref()
                        .and_then(|a| t.phases.iter().find(|x| &x.name == a));
                    Some(outcome(run, series, t, phase, after_phase))
                })
                .collect();
            FaultTable {
                phase: p.name.clone(),
                faults: p.faults.clone(),
                start_s: p.start_s,
                end_s: p.end_s,
                after,
                rows,
            }
        })
        .collect()
}

/// The first phase of the run, if no fault acts in it.
pub fn healthy(run: &RunResult, series: &[SeriesRow]) -> Option<FaultTable> {
    let first = run.targets.first()?.phases.first()?;
    if !first.faults.is_empty() {
        return None;
    }
    let rows = run
        .targets
        .iter()
        .filter_map(|t| {
            let phase = t.phases.first()?;
            Some(outcome(run, series, t, phase, None))
        })
        .collect();
    Some(FaultTable {
        phase: first.name.clone(),
        faults: Vec::new(),
        start_s: first.start_s,
        end_s: first.end_s,
        after: None,
        rows,
    })
}

/// Reads a results folder (`run.json`, `series.csv`, `scenario.toml`) into its outcomes.
pub fn read(folder: &Path) -> Result<Outcomes, OutcomesError> {
    let run = RunResult::read(folder)?;
    let series = read_series(folder)?;
    let path = folder.join("scenario.toml");
    let scenario_error = |message: String| OutcomesError::Scenario {
        folder: folder.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| scenario_error(format!("{}: {e}", path.display())))?;
    let scenario = Scenario::parse(&text, &path.display().to_string())
        .map_err(|e| scenario_error(e.to_string()))?;
    let healthy = healthy(&run, &series);
    let tables = tables(&run, &series);
    if tables.is_empty() {
        return Err(OutcomesError::NoFaults);
    }
    let claims = claims::parse(&scenario.claims)?;
    let claims = claims::judge(&run, &series, claims);
    Ok(Outcomes {
        folder: folder.display().to_string(),
        run,
        scenario,
        healthy,
        tables,
        claims,
    })
}
