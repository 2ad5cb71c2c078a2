//! Release gates: thresholds on outage behaviour, written in the scenario (`[[gates]]`) or a
//! gates file, checked against a results folder. A threshold naming a metric, target, phase or
//! tenant that the run does not have is an error, never a silent pass; a threshold on a value
//! the run did not measure (a cell nothing reached the target in, a recovery with too little
//! time after the fault) fails and says so. A gate of `level = "warn"` is judged and reported
//! the same way but never fails the job; one with a `window` judges the phase's worst window.

mod cell;
mod evaluate;
mod metric;
mod output;
mod parse;
pub mod recovery;
mod window;

use std::fmt;
use std::num::NonZeroU32;
use std::path::Path;

use serde::Serialize;

pub use evaluate::{NoBand, evaluate, recovery_time};
pub use metric::Metric;
pub use output::{gate_json, junit_xml, markdown, table};
pub use parse::{gates_from_file, gates_of_run, parse_gates};
use recovery::Recovery;

use crate::results::RunResult;
use crate::results::read::{ReadError, read_series};

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("gate {index}: {message}")]
    Invalid { index: usize, message: String },
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("cannot read gates from {path}: {message}")]
    File { path: String, message: String },
    #[error(
        "{path} holds a partial run ({why}): its verdicts would rest on part of the timeline; \
         gate it anyway with --allow-partial"
    )]
    Partial { path: String, why: String },
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

/// What a crossed threshold does to the job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// It fails the gate (exit 1).
    #[default]
    Fail,
    /// It is reported as a warning and never fails the job.
    Warn,
}

/// One threshold as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// A target name or a glob (`*`, `?`).
    pub target: String,
    /// `None` only for a metric of the whole run (the generator's send lag).
    pub phase: Option<String>,
    pub metric: Metric,
    /// `None`: all tenants together.
    pub tenant: Option<String>,
    pub bound: Bound,
    pub level: Level,
    /// Judge the phase's worst window of this many seconds instead of the whole phase.
    pub window: Option<NonZeroU32>,
}

/// A check's verdict, its level taken into account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    /// Crossed, at `level = "warn"`: reported, never failing the job.
    Warn,
    Fail,
}

/// One gate on one target: the verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub target: String,
    /// `None`: the whole run.
    pub phase: Option<String>,
    pub metric: Metric,
    pub tenant: Option<String>,
    pub bound: Bound,
    pub level: Level,
    pub window: Option<NonZeroU32>,
    pub actual: Actual,
    /// Whether the actual value meets the threshold, whatever the level.
    pub passed: bool,
}

impl Check {
    pub fn verdict(&self) -> Verdict {
        match (self.passed, self.level) {
            (true, _) => Verdict::Pass,
            (false, Level::Warn) => Verdict::Warn,
            (false, Level::Fail) => Verdict::Fail,
        }
    }

    /// The phase it judged, or "whole run".
    pub fn phase_name(&self) -> &str {
        self.phase.as_deref().unwrap_or("whole run")
    }

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
        let mut subject = self.metric.name().to_owned();
        if let Some(t) = &self.tenant {
            subject = format!("{subject} {t}");
        }
        if let Some(w) = self.window {
            subject = format!("{subject}, worst {w} s");
        }
        subject
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} / {}: {} {} (actual {})",
            self.target,
            self.phase_name(),
            self.subject(),
            self.threshold(),
            self.actual_text()
        )
    }
}

/// What a gate's checks come to for the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// No check at level `fail` failed (warnings may have been raised).
    Pass,
    Fail,
    /// The measurement cannot be trusted (the generator dropped or fell behind): no verdict,
    /// whatever the checks say.
    Untrusted,
}

impl Outcome {
    pub fn of(run: &RunResult, checks: &[Check]) -> Self {
        if !run.untrusted().is_empty() {
            Self::Untrusted
        } else if checks.iter().any(|c| c.verdict() == Verdict::Fail) {
            Self::Fail
        } else {
            Self::Pass
        }
    }

    /// Its exit code, from the one table of `docs/verdicts.md`.
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Pass => 0,
            Self::Fail => 1,
            Self::Untrusted => 3,
        }
    }
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
        let why = match &run.aborted {
            Some(reason) => format!("aborted by its abort guard: {reason}"),
            None => "interrupted, or cut short by a harness error".to_owned(),
        };
        return Err(GateError::Partial { path, why });
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
    let series = if gates
        .iter()
        .any(|g| g.metric == Metric::RecoveryS || g.window.is_some())
    {
        read_series(folder)?
    } else {
        Vec::new()
    };
    let checks = evaluate(&run, &series, &gates)?;
    Ok((run, checks))
}

#[cfg(test)]
mod tests;
