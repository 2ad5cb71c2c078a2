//! The files that hold what a run measured, read back: a results folder's (for `failmode
//! merge`) or a run's journal (for `failmode report` after the run was killed). Histograms
//! and per-second series are placed by the tags and names they carry; a phase cell's counts
//! come from `run.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::metrics::{Measured, pack};
use crate::results::RunResult;
use crate::results::hlog::{self, HlogError, Interval};
use crate::results::read::{ReadError, parse_series};
use crate::scenario::Scenario;

#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Hlog(#[from] HlogError),
    #[error("{path}: {message}")]
    Content { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    Scenario {
        path: PathBuf,
        source: crate::scenario::ScenarioError,
    },
}

/// The scenario `run` ran: the folder's `scenario.toml` as given, with the run's seed and
/// duration scale.
pub fn read_scenario(dir: &Path, run: &RunResult) -> Result<Scenario, FilesError> {
    let path = dir.join("scenario.toml");
    let source = std::fs::read_to_string(&path).map_err(|source| ReadError::Io {
        path: path.clone(),
        source,
    })?;
    let mut scenario = Scenario::parse(&source, &path.display().to_string())
        .map_err(|source| FilesError::Scenario { path, source })?;
    scenario.seed = run.seed;
    Ok(scenario.scaled(run.duration_scale))
}

/// How the per-second files were written: whole, or appended to as the run went (the last
/// line may then be cut short by a kill, and is left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Whole,
    Appended,
}

/// The index of every tag a folder's logs can hold, by what they cover.
#[derive(Debug, Default)]
pub(crate) struct Tags {
    pub(crate) cells: BTreeMap<String, (usize, usize, usize)>,
    pub(crate) slots: BTreeMap<String, (usize, usize)>,
    pub(crate) targets: BTreeMap<String, usize>,
}

impl Tags {
    pub(crate) fn of(targets: &[&str], scenario: &Scenario) -> Self {
        let mut tags = Self::default();
        for (t, &target) in targets.iter().enumerate() {
            tags.targets.insert(target.to_owned(), t);
            for (n, slot) in slot_names(scenario).enumerate() {
                tags.slots.insert(format!("{target}/{slot}"), (t, n));
            }
            for (n, tenant) in scenario.tenants.iter().enumerate() {
                for (p, phase) in scenario.phases.iter().enumerate() {
                    tags.cells.insert(
                        format!("{target}/{}/{}", tenant.name, phase.name),
                        (t, n, p),
                    );
                }
            }
        }
        tags
    }
}

/// The tenants' names, then `all`: the per-second slots.
pub(crate) fn slot_names(scenario: &Scenario) -> impl Iterator<Item = &str> {
    scenario
        .tenants
        .iter()
        .map(|t| t.name.as_str())
        .chain(["all"])
}

/// What the folder `dir` holds of `run`: its cells' counts (from `run.json`), its histograms
/// (`latency.hlog`, `service_time.hlog`, `seconds.hlog`, `send_lag.hlog`) and its series
/// (`series.csv`).
pub fn read_measured(
    dir: &Path,
    run: &RunResult,
    scenario: &Scenario,
    written: Written,
) -> Result<Measured, FilesError> {
    let mut measured = Measured::empty(&scenario.measurement_shape(run.targets.len()));
    let names: Vec<&str> = run.targets.iter().map(|t| t.name.as_str()).collect();
    let tags = Tags::of(&names, scenario);
    let content = |file: &str, message: String| FilesError::Content {
        path: dir.join(file),
        message,
    };
    for (t, target) in run.targets.iter().enumerate() {
        for phase in &target.phases {
            let p = scenario
                .phases
                .iter()
                .position(|x| x.name == phase.name)
                .ok_or_else(|| {
                    content(
                        "run.json",
                        format!("a phase {:?} not in the scenario", phase.name),
                    )
                })?;
            for (n, tenant) in phase.tenants.iter().enumerate() {
                if let Some(cell) = measured.cells[t].get_mut(n) {
                    cell[p].counts = tenant.counts;
                }
            }
        }
    }
    let unknown = |file: &str, i: &Interval| content(file, format!("an unknown tag {:?}", i.tag));
    for (file, service) in [("latency.hlog", false), ("service_time.hlog", true)] {
        for i in hlog::read(&dir.join(file))? {
            let &(t, n, p) = tags.cells.get(&i.tag).ok_or_else(|| unknown(file, &i))?;
            let cell = &mut measured.cells[t][n][p];
            if service {
                cell.service_time = i.histogram;
            } else {
                cell.latency = i.histogram;
            }
        }
    }
    let seconds = dir.join("seconds.hlog");
    let seconds = match written {
        Written::Whole => hlog::read(&seconds)?,
        Written::Appended => hlog::read_complete_lines(&seconds)?,
    };
    for i in seconds {
        let &(t, n) = tags
            .slots
            .get(&i.tag)
            .ok_or_else(|| unknown("seconds.hlog", &i))?;
        measured.second_latency[t][n].insert(i.start.as_secs() as usize, pack(&i.histogram));
    }
    for i in hlog::read(&dir.join("send_lag.hlog"))? {
        let &t = tags
            .targets
            .get(&i.tag)
            .ok_or_else(|| unknown("send_lag.hlog", &i))?;
        measured.send_lag[t] = i.histogram;
    }
    let path = dir.join("series.csv");
    let mut text = std::fs::read_to_string(&path).map_err(|source| ReadError::Io {
        path: path.clone(),
        source,
    })?;
    if written == Written::Appended {
        text.truncate(text.rfind('\n').map_or(0, |i| i + 1));
    }
    for row in parse_series(&path, &text)? {
        let &(t, n) = tags
            .slots
            .get(&format!("{}/{}", row.target, row.tenant))
            .ok_or_else(|| {
                content(
                    "series.csv",
                    format!("an unknown target/tenant {}/{}", row.target, row.tenant),
                )
            })?;
        if let Some(second) = measured.seconds[t][n].get_mut(row.second as usize) {
            second.counts = row.counts;
            (second.p50_us, second.p99_us, second.max_us) = (row.p50_us, row.p99_us, row.max_us);
        }
    }
    Ok(measured)
}
