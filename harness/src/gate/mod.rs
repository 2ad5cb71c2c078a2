//! Release gates: thresholds on outage behaviour, written in the scenario (`[[gates]]`) or a
//! gates file, checked against a results folder. A threshold naming a metric, target, phase or
//! tenant that the run does not have is an error, never a silent pass; a threshold on a value
//! the run did not measure (a cell nothing reached the target in, a recovery with too little
//! time after the fault) fails and says so.

mod metric;
mod output;
pub mod recovery;

use metric::METRICS;
pub use metric::Metric;

use std::fmt;
use std::path::Path;

use serde::Deserialize;

pub use output::{junit_xml, markdown, table};
use recovery::{Band, Recovery, SecondSample, second_sample};

use crate::results::read::{ReadError, SeriesRow, read_series};
use crate::results::{PhaseResult, RunResult, TargetResult, TenantResult};
use crate::scenario::Scenario;

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("gate {index}: {message}")]
    Invalid { index: usize, message: String },
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("cannot read gates from {path}: {message}")]
    File { path: String, message: String },
    #[error(
        "{path} holds a partial run (interrupted, or cut short by a harness error): its verdicts \
         would rest on part of the timeline; gate it anyway with --allow-partial"
    )]
    Partial { path: String },
    #[error(
        "{path} holds one worker's share of a run (--worker {index}/{count}): its \
         over-admission and wrongful denial are not measured, since the limiter's decisions \
         rest on every worker's traffic; merge the workers first (failmode merge)"
    )]
    Worker {
        path: String,
        index: u32,
        count: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    Max(f64),
    Min(f64),
}

impl Bound {
    fn admits(self, v: f64) -> bool {
        match self {
            Self::Max(max) => v <= max,
            Self::Min(min) => v >= min,
        }
    }
}

/// What a gate read from the run.
#[derive(Debug, Clone, PartialEq)]
pub enum Actual {
    Value(f64),
    /// Larger than any number: a target that never recovered. It satisfies a `min` and fails
    /// a `max`.
    Unbounded,
    /// The run did not measure it, and why: it fails whatever the bound, never passing on
    /// nothing.
    NotMeasured(String),
    /// Not measured, but known to be at least `value` (a recovery the run's end cut short):
    /// it satisfies a `min` it reaches, and fails every `max`.
    AtLeast {
        value: f64,
        why: String,
    },
}

impl Actual {
    pub fn passes(&self, bound: Bound) -> bool {
        match self {
            Self::Value(v) => bound.admits(*v),
            Self::Unbounded => matches!(bound, Bound::Min(_)),
            Self::NotMeasured(_) => false,
            Self::AtLeast { value, .. } => matches!(bound, Bound::Min(min) if *value >= min),
        }
    }

    /// The number, where there is one (`gate.json`, JUnit properties).
    pub fn value(&self) -> Option<f64> {
        match self {
            Self::Value(v) => Some(*v),
            _ => None,
        }
    }

    fn of(value: Option<f64>, why_not: &str) -> Self {
        value.map_or_else(|| Self::NotMeasured(why_not.to_owned()), Self::Value)
    }
}

impl From<Recovery> for Actual {
    fn from(r: Recovery) -> Self {
        match r {
            Recovery::Recovered { after_s, .. } => Self::Value(after_s),
            Recovery::Never => Self::Unbounded,
            Recovery::NotMeasured {
                seconds,
                needed,
                at_least_s,
            } => {
                let why = format!(
                    "{seconds} s after the fault to judge, {needed} s in a row in band needed"
                );
                if at_least_s > 0.0 {
                    Self::AtLeast {
                        value: at_least_s,
                        why: format!("{why}; at least {at_least_s:.1} s"),
                    }
                } else {
                    Self::NotMeasured(why)
                }
            }
        }
    }
}

/// One threshold as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// A target name or a glob (`*`, `?`).
    pub target: String,
    pub phase: String,
    pub metric: Metric,
    /// `None`: all tenants together.
    pub tenant: Option<String>,
    pub bound: Bound,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGate {
    #[serde(default = "every_target")]
    target: String,
    phase: String,
    metric: String,
    tenant: Option<String>,
    max: Option<f64>,
    min: Option<f64>,
}

fn every_target() -> String {
    "*".to_owned()
}

/// The first of a gate's keys whose value is not of its type (a string, or for the bounds a
/// number).
fn mistyped_key(table: &toml::Table) -> Option<&str> {
    table.iter().find_map(|(key, value)| {
        let fits = match key.as_str() {
            "target" | "phase" | "metric" | "tenant" => value.is_str(),
            "max" | "min" => value.is_integer() || value.is_float(),
            _ => true,
        };
        (!fits).then_some(key.as_str())
    })
}

/// Validates gates as written (`[[gates]]` tables).
pub fn parse_gates(tables: &[toml::Table]) -> Result<Vec<Gate>, GateError> {
    tables
        .iter()
        .enumerate()
        .map(|(i, table)| {
            let index = i + 1;
            let invalid = |message: String| GateError::Invalid { index, message };
            let raw: RawGate = table.clone().try_into().map_err(|e: toml::de::Error| {
                // Deserializing a table drops the key from a type error ("invalid type: string
                // \"x\", expected f64"): put back the key whose value is of the wrong type.
                match mistyped_key(table) {
                    Some(key) if e.message().starts_with("invalid type") => {
                        invalid(format!("`{key}`: {}", e.message()))
                    }
                    _ => invalid(e.message().to_owned()),
                }
            })?;
            let metric = METRICS
                .iter()
                .find(|(n, _)| *n == raw.metric)
                .map(|(_, m)| *m)
                .ok_or_else(|| {
                    invalid(format!(
                        "unknown metric {:?}; known: {}",
                        raw.metric,
                        METRICS.map(|(n, _)| n).join(", ")
                    ))
                })?;
            let bound = match (raw.max, raw.min) {
                (Some(max), None) => Bound::Max(max),
                (None, Some(min)) => Bound::Min(min),
                _ => return Err(invalid("needs exactly one of max or min".into())),
            };
            // No value passes a NaN bound and every value passes an infinite one: a typo
            // that would fail or pass every run.
            let (key, v) = match bound {
                Bound::Max(v) => ("max", v),
                Bound::Min(v) => ("min", v),
            };
            if !v.is_finite() {
                return Err(invalid(format!("`{key}` = {v}: must be a finite number")));
            }
            if raw.tenant.is_some() && !metric.per_tenant() {
                return Err(invalid(format!(
                    "{} is per target, not per tenant",
                    metric.name()
                )));
            }
            Ok(Gate {
                target: raw.target,
                phase: raw.phase,
                metric,
                tenant: raw.tenant,
                bound,
            })
        })
        .collect()
}

/// Gates from a file of `[[gates]]` tables.
pub fn gates_from_file(path: &Path) -> Result<Vec<Gate>, GateError> {
    let file_error = |message: String| GateError::File {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        gates: Vec<toml::Table>,
    }
    let file: File = toml::from_str(&text).map_err(|e| file_error(e.to_string()))?;
    parse_gates(&file.gates)
}

/// The gates of the scenario a results folder was run with (its `scenario.toml`).
pub fn gates_of_run(folder: &Path) -> Result<Vec<Gate>, GateError> {
    let path = folder.join("scenario.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| GateError::File {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let scenario =
        Scenario::parse(&text, &path.display().to_string()).map_err(|e| GateError::File {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    parse_gates(&scenario.gates)
}

/// Matches `*` (any run) and `?` (one character). Hand-written: glob crates match paths, and
/// target names are plain words.
fn glob_matches(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

/// One gate on one target: the verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub target: String,
    pub phase: String,
    pub metric: Metric,
    pub tenant: Option<String>,
    pub bound: Bound,
    pub actual: Actual,
    pub passed: bool,
}

impl Check {
    pub fn threshold(&self) -> String {
        match self.bound {
            Bound::Max(v) => format!("≤ {}", self.metric.format(v)),
            Bound::Min(v) => format!("≥ {}", self.metric.format(v)),
        }
    }

    pub fn actual_text(&self) -> String {
        match &self.actual {
            Actual::Value(v) => self.metric.format(*v),
            Actual::Unbounded => "never".into(),
            Actual::NotMeasured(why) | Actual::AtLeast { why, .. } => {
                format!("not measured: {why}")
            }
        }
    }

    pub fn subject(&self) -> String {
        match &self.tenant {
            Some(t) => format!("{} {t}", self.metric.name()),
            None => self.metric.name().to_owned(),
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} / {}: {} {} (actual {})",
            self.target,
            self.phase,
            self.subject(),
            self.threshold(),
            self.actual_text()
        )
    }
}

/// Why a cell's figures are not measured.
const NOTHING_SENT: &str = "no request of this cell reached the target (no traffic, or every \
                            request dropped or throttled)";

fn tenant_value(metric: Metric, t: &TenantResult) -> Actual {
    let ms = |p: Option<crate::results::Percentiles>,
              q: fn(&crate::results::Percentiles) -> u64| {
        Actual::of(p.map(|p| q(&p) as f64 / 1000.0), NOTHING_SENT)
    };
    let c = &t.counts;
    match metric {
        Metric::P50Ms => ms(t.latency_us, |p| p.p50),
        Metric::P99Ms => ms(t.latency_us, |p| p.p99),
        Metric::P999Ms => ms(t.latency_us, |p| p.p999),
        Metric::Rate2xx => Actual::of(t.share_of_offered(c.admitted), NOTHING_SENT),
        Metric::Rate429 => Actual::of(t.share_of_offered(c.limited), NOTHING_SENT),
        Metric::Rate503 => Actual::of(t.share_of_offered(c.unavailable), NOTHING_SENT),
        Metric::Rate5xx => Actual::of(t.share_of_offered(c.errors_5xx()), NOTHING_SENT),
        Metric::TransportErrors => Actual::of(
            t.measured().then_some(c.transport_error as f64),
            NOTHING_SENT,
        ),
        Metric::OverAdmission => Actual::of(t.over_admission, NOTHING_SENT),
        Metric::OverAdmissionBeyondWindow => {
            Actual::of(t.over_admission_beyond_window, NOTHING_SENT)
        }
        Metric::WrongfulDenial => Actual::of(
            t.wrongful_denial,
            if t.measured() {
                "nothing was entitled: every request was refused by the client itself"
            } else {
                NOTHING_SENT
            },
        ),
        Metric::ClientAmplification => {
            Actual::of(c.client_amplification(), "no request was offered")
        }
        Metric::RecoveryS | Metric::StoreAmplification | Metric::StoreAmplificationPerAttempt => {
            Actual::NotMeasured(format!("{} is per target", metric.name()))
        }
    }
}

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

/// Checks every gate against a run; `series` is needed for `recovery_s`.
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
                run.targets
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        for target in targets {
            let phase = target
                .phases
                .iter()
                .find(|p| p.name == gate.phase)
                .ok_or_else(|| {
                    invalid(format!(
                        "phase {:?} is not a phase of {} ({})",
                        gate.phase,
                        target.name,
                        target
                            .phases
                            .iter()
                            .map(|p| p.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?;
            let actual = match (gate.metric, &gate.tenant) {
                (Metric::RecoveryS, _) => match recovery_time(run, target, phase, series) {
                    Ok(r) => Actual::from(r),
                    Err(e @ NoBand::SilentSteady) => Actual::NotMeasured(e.to_string()),
                    Err(e @ NoBand::NoSteadyPhase) => return Err(invalid(e.to_string())),
                },
                (Metric::StoreAmplification, _) => Actual::of(
                    phase.store_amplification,
                    "no Redis command count for this phase, or nothing was offered",
                ),
                (Metric::StoreAmplificationPerAttempt, _) => Actual::of(
                    phase.store_amplification_per_attempt,
                    "no Redis command count for this phase, or nothing was sent",
                ),
                (m, Some(name)) => {
                    let tenant =
                        phase
                            .tenants
                            .iter()
                            .find(|t| &t.name == name)
                            .ok_or_else(|| {
                                invalid(format!(
                                    "tenant {name:?} is not a tenant of the run ({})",
                                    phase
                                        .tenants
                                        .iter()
                                        .map(|t| t.name.as_str())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ))
                            })?;
                    tenant_value(m, tenant)
                }
                (m, None) => tenant_value(m, &phase.all),
            };
            checks.push(Check {
                target: target.name.clone(),
                phase: phase.name.clone(),
                metric: gate.metric,
                tenant: gate.tenant.clone(),
                bound: gate.bound,
                passed: actual.passes(gate.bound),
                actual,
            });
        }
    }
    Ok(checks)
}

/// Refuses a run whose verdicts would rest on part of the traffic: one worker's share always,
/// an interrupted run unless `allow_partial`.
pub fn refuse_incomplete(
    folder: &Path,
    run: &RunResult,
    allow_partial: bool,
) -> Result<(), GateError> {
    let path = folder.display().to_string();
    if let Some(worker) = run.worker.filter(|w| w.is_share()) {
        let (index, count) = worker.written_share();
        return Err(GateError::Worker { path, index, count });
    }
    if run.partial && !allow_partial {
        return Err(GateError::Partial { path });
    }
    Ok(())
}

/// Reads a results folder and checks `gates` (or, if `None`, the gates of its scenario).
pub fn gate_folder(
    folder: &Path,
    gates: Option<Vec<Gate>>,
    allow_partial: bool,
) -> Result<(RunResult, Vec<Check>), GateError> {
    let run = RunResult::read(folder)?;
    refuse_incomplete(folder, &run, allow_partial)?;
    let gates = match gates {
        Some(g) => g,
        None => gates_of_run(folder)?,
    };
    if gates.is_empty() {
        return Err(GateError::File {
            path: folder.join("scenario.toml").display().to_string(),
            message: "the scenario has no [[gates]] and no --gates file was given".into(),
        });
    }
    let series = if gates.iter().any(|g| g.metric == Metric::RecoveryS) {
        read_series(folder)?
    } else {
        Vec::new()
    };
    let checks = evaluate(&run, &series, &gates)?;
    Ok((run, checks))
}

#[cfg(test)]
mod tests;
