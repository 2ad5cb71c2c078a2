//! What comparing a baseline with a candidate can fail with: inputs that are not results,
//! baselines of another version, runs that cannot be compared, targets that cannot be picked.

use std::path::PathBuf;

use super::BASELINE_VERSION;
use crate::results::read::ReadError;

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Hlog(#[from] crate::results::hlog::HlogError),
    #[error(
        "{path} is neither a results folder (run.json), a repeat folder (run-1/, run-2/, …) nor a baseline file"
    )]
    NotResults { path: PathBuf },
    #[error("{path} is not a failmode baseline file: {message}")]
    Baseline { path: PathBuf, message: String },
    #[error(
        "{path} has baseline version {found}; this failmode reads version {BASELINE_VERSION}, \
         which keeps each second's latency histogram: save the baseline again \
         (failmode baseline save RESULTS) from a results folder"
    )]
    BaselineVersion { path: PathBuf, found: u64 },
    #[error(
        "{path} holds one worker's share of a run (--worker {index}/{count}): its latency and \
         counts are part of the traffic, and its over-admission and wrongful denial are not \
         measured; merge the workers first (failmode merge)"
    )]
    Worker {
        path: PathBuf,
        index: u32,
        count: u32,
    },
    #[error("{path} holds runs of different scenarios: {first} and {other}")]
    MixedScenarios {
        path: PathBuf,
        first: String,
        other: String,
    },
    #[error(
        "cannot compare runs of different scenarios: the baseline ran {baseline}, the candidate {candidate}"
    )]
    ScenarioMismatch { baseline: String, candidate: String },
    #[error("scenario name {0:?} cannot name a baseline file")]
    BadScenarioName(String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the {side} ({results}) has no target {target:?}; it has: {known}")]
    UnknownTarget {
        side: &'static str,
        results: String,
        target: String,
        known: String,
    },
    #[error(
        "{results} is one run on both sides: target {target:?} against itself compares a \
         measurement with itself; name two of its targets, --baseline-target OLD \
         --candidate-target NEW (it has: {known})"
    )]
    SameTarget {
        results: String,
        target: String,
        known: String,
    },
    #[error(
        "one results given ({results}): name the two of its targets to compare, \
         --baseline-target OLD --candidate-target NEW (it has: {known})"
    )]
    NoTargetsPicked { results: String, known: String },
    #[error("cannot draw the plots of the compare page: {0}")]
    Plot(String),
    #[error("invalid compare option: {0}")]
    Options(String),
}
