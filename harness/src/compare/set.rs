//! The two sides of a comparison: run sets read from results folders, repeat folders and
//! baseline files, and the baseline file itself.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{BASELINE_VERSION, CompareError, SideInfo};
use crate::results::read::{ReadError, read_series};
use crate::results::{PhaseResult, RunResult, SCHEMA_VERSION};

/// One side of a comparison: the runs of one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSet {
    pub scenario: String,
    /// Where it was read from, for the report.
    #[serde(skip)]
    pub source: String,
    pub repeats: Vec<Repeat>,
}

/// One run: its `run.json` and its per-second latency per target × phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    pub run: RunResult,
    pub seconds: Vec<PhaseSeconds>,
}

/// The per-second latency of one target × phase in one run, all tenants together, µs, in
/// second order; seconds in which nothing was answered are left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseSeconds {
    pub target: String,
    pub phase: String,
    pub p50_us: Vec<u64>,
    pub p99_us: Vec<u64>,
    pub max_us: Vec<u64>,
}

/// `results/baselines/<scenario>.json`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselineFile {
    baseline_version: u32,
    scenario: String,
    /// The results folder it was saved from, as given.
    saved_from: String,
    repeats: Vec<Repeat>,
}

impl Repeat {
    /// Reads one results folder: `run.json` and the `all` rows of `series.csv`.
    pub fn read(folder: &Path) -> Result<Self, CompareError> {
        let run = RunResult::read(folder)?;
        let rows = read_series(folder)?;
        let mut seconds: Vec<PhaseSeconds> = run
            .targets
            .iter()
            .flat_map(|t| {
                t.phases.iter().map(|p| PhaseSeconds {
                    target: t.name.clone(),
                    phase: p.name.clone(),
                    ..PhaseSeconds::default()
                })
            })
            .collect();
        // A second with nothing answered has no latency (its percentiles are written as 0).
        for row in rows.iter().filter(|r| r.tenant == "all" && r.max_us > 0) {
            if let Some(s) = seconds
                .iter_mut()
                .find(|s| s.target == row.target && s.phase == row.phase)
            {
                s.p50_us.push(row.p50_us);
                s.p99_us.push(row.p99_us);
                s.max_us.push(row.max_us);
            }
        }
        Ok(Self { run, seconds })
    }
}

fn not_results(path: &Path) -> CompareError {
    CompareError::NotResults {
        path: path.to_owned(),
    }
}

/// `run-<n>` sub-folders of a repeat folder, in the order of n.
fn repeat_folders(folder: &Path) -> Result<Vec<PathBuf>, CompareError> {
    let entries = std::fs::read_dir(folder).map_err(|source| ReadError::Io {
        path: folder.to_owned(),
        source,
    })?;
    let mut runs: Vec<(u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let n = e.file_name().to_str()?.strip_prefix("run-")?.parse().ok()?;
            e.path().is_dir().then(|| (n, e.path()))
        })
        .collect();
    runs.sort();
    Ok(runs.into_iter().map(|(_, p)| p).collect())
}

fn read_baseline(path: &Path, text: &str) -> Result<RunSet, CompareError> {
    let bad = |message: String| CompareError::Baseline {
        path: path.to_owned(),
        message,
    };
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    let found = value["baseline_version"].as_u64().unwrap_or(0);
    if found != u64::from(BASELINE_VERSION) {
        return Err(CompareError::BaselineVersion {
            path: path.to_owned(),
            found,
        });
    }
    // Runs inside a baseline were written by some failmode: refuse a run.json schema this one
    // does not read, as RunResult::read does for a folder.
    for run in value["repeats"].as_array().into_iter().flatten() {
        let found = run["run"]["schema_version"].as_u64().unwrap_or(0);
        if found != u64::from(SCHEMA_VERSION) {
            return Err(ReadError::Version {
                path: path.to_owned(),
                found,
            }
            .into());
        }
    }
    let file: BaselineFile = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
    let set = RunSet {
        scenario: file.scenario,
        source: path.display().to_string(),
        repeats: file.repeats,
    };
    check_one_scenario(path, &set)?;
    Ok(set)
}

fn check_one_scenario(path: &Path, set: &RunSet) -> Result<(), CompareError> {
    match set.repeats.iter().find(|r| r.run.scenario != set.scenario) {
        Some(other) => Err(CompareError::MixedScenarios {
            path: path.to_owned(),
            first: set.scenario.clone(),
            other: other.run.scenario.clone(),
        }),
        None if set.repeats.is_empty() => Err(not_results(path)),
        None => Ok(()),
    }
}

/// Reads one side: a baseline file, a results folder (or its `run.json`), or a repeat folder.
pub fn load_set(path: &Path) -> Result<RunSet, CompareError> {
    if path.is_file() {
        // A run.json stands for its folder; any other file must be a baseline.
        if path.file_name() == Some("run.json".as_ref()) {
            let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
            return load_set(folder.unwrap_or(Path::new(".")));
        }
        let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
            path: path.to_owned(),
            source,
        })?;
        return read_baseline(path, &text);
    }
    let folders = if path.join("run.json").is_file() {
        vec![path.to_owned()]
    } else if path.is_dir() {
        repeat_folders(path)?
    } else {
        return Err(not_results(path));
    };
    let repeats = folders
        .iter()
        .map(|f| Repeat::read(f))
        .collect::<Result<Vec<_>, _>>()?;
    let set = RunSet {
        scenario: repeats
            .first()
            .map(|r| r.run.scenario.clone())
            .unwrap_or_default(),
        source: path.display().to_string(),
        repeats,
    };
    check_one_scenario(path, &set)?;
    Ok(set)
}

/// Stores the run(s) at `results` (anything [`load_set`] reads) as
/// `<baselines_dir>/<scenario>.json`, replacing the scenario's previous baseline (baselines are
/// tracked in git, so the old one is in the history). Returns the file's path.
pub fn save_baseline(results: &Path, baselines_dir: &Path) -> Result<PathBuf, CompareError> {
    let set = load_set(results)?;
    // The name becomes a file name: no separators, no leading dot ("..").
    if !crate::scenario::is_plain_name(&set.scenario) || set.scenario.starts_with('.') {
        return Err(CompareError::BadScenarioName(set.scenario));
    }
    let path = baselines_dir.join(format!("{}.json", set.scenario));
    let write_err = |source| CompareError::Write {
        path: path.clone(),
        source,
    };
    let file = BaselineFile {
        baseline_version: BASELINE_VERSION,
        scenario: set.scenario.clone(),
        saved_from: results.display().to_string(),
        repeats: set.repeats,
    };
    let json = serde_json::to_string_pretty(&file).map_err(|e| write_err(e.into()))?;
    std::fs::create_dir_all(baselines_dir).map_err(write_err)?;
    // Written beside and renamed, so an interrupted save never leaves half a baseline.
    let partial = baselines_dir.join(format!(".{}.json.partial", set.scenario));
    std::fs::write(&partial, json + "\n").map_err(write_err)?;
    std::fs::rename(&partial, &path).map_err(write_err)?;
    Ok(path)
}

impl RunSet {
    pub(super) fn targets(&self) -> impl Iterator<Item = &str> {
        self.repeats
            .iter()
            .flat_map(|r| r.run.targets.iter().map(|t| t.name.as_str()))
    }

    pub(super) fn phases<'a>(&'a self, target: &'a str) -> impl Iterator<Item = &'a str> {
        self.repeats
            .iter()
            .flat_map(move |r| r.run.targets.iter().filter(move |t| t.name == target))
            .flat_map(|t| t.phases.iter().map(|p| p.name.as_str()))
    }

    /// Each run that has this target × phase: its summary and its per-second samples.
    pub(super) fn runs_of(
        &self,
        target: &str,
        phase: &str,
    ) -> Vec<(&PhaseResult, Option<&PhaseSeconds>)> {
        self.repeats
            .iter()
            .filter_map(|r| {
                let t = r.run.targets.iter().find(|t| t.name == target)?;
                let p = t.phases.iter().find(|p| p.name == phase)?;
                let s = r
                    .seconds
                    .iter()
                    .find(|s| s.target == target && s.phase == phase);
                Some((p, s))
            })
            .collect()
    }

    pub(super) fn info(&self) -> SideInfo {
        SideInfo {
            source: self.source.clone(),
            runs: self.repeats.len(),
        }
    }
}
