//! One worker's results folder read back into what its run measured: its `run.json`, its
//! scenario, and its histograms and series placed by the tags of its logs.

use std::path::{Path, PathBuf};

use super::error::MergeError;
use crate::metrics::{Measured, Shape};
use crate::results::measured_files::{Written, read_measured, read_scenario};
use crate::results::{RunResult, Worker};
use crate::scenario::Scenario;

/// One worker's folder, read back into what its run measured.
#[derive(Debug)]
pub(super) struct Part {
    pub(super) path: PathBuf,
    pub(super) run: RunResult,
    pub(super) worker: Worker,
    pub(super) scenario: Scenario,
    pub(super) measured: Measured,
}

pub(super) fn shape_of(run: &RunResult, scenario: &Scenario) -> Shape {
    scenario.measurement_shape(run.targets.len())
}

pub(super) fn read_part(path: &Path) -> Result<Part, MergeError> {
    let run = RunResult::read(path)?;
    let worker = run
        .worker
        .ok_or_else(|| MergeError::NotAWorker(path.to_owned()))?;
    let scenario = read_scenario(path, &run)?;
    let measured = read_measured(path, &run, &scenario, Written::Whole)?;
    Ok(Part {
        path: path.to_owned(),
        run,
        worker,
        scenario,
        measured,
    })
}
