//! The two sides of a comparison: run sets read from results folders, repeat folders and
//! baseline files, and the baseline file itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{BASELINE_VERSION, CompareError, SideInfo};
use crate::metrics::{pack, unpack};
use crate::results::atomic;
use crate::results::hlog;
use crate::results::read::{ReadError, SERIES_HEADER, SeriesRow, parse_series, read_series};
use crate::results::{PhaseResult, RunResult, SCHEMA_VERSION, TargetResult};

/// One side of a comparison: the runs of one scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSet {
    pub scenario: String,
    /// Where it was read from, for the report.
    pub source: String,
    pub repeats: Vec<Repeat>,
}

/// Each second's latency histogram of one target, all tenants together, by second since the
/// run's start; a second in which nothing was answered has none.
pub type Seconds = BTreeMap<u64, Histogram<u64>>;

/// One run: its `run.json`, its `series.csv` (what recovery is judged on) and, per target, the
/// `all` intervals of its `seconds.hlog` (what latency is judged on).
#[derive(Debug, Clone, PartialEq)]
pub struct Repeat {
    pub run: RunResult,
    pub series: Vec<SeriesRow>,
    /// Target name → its seconds.
    pub seconds: BTreeMap<String, Seconds>,
}

/// `results/baselines/<scenario>.json`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselineFile {
    baseline_version: u32,
    scenario: String,
    /// The results folder it was saved from, as given.
    saved_from: String,
    repeats: Vec<SavedRepeat>,
}

/// One run in a baseline file: everything [`Repeat`] holds, in text.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedRepeat {
    run: RunResult,
    /// `series.csv`, line by line, header first.
    series_csv: Vec<String>,
    /// Target name → second → its histogram, base64 of HdrHistogram's V2 serialization (as
    /// `metrics::pack` writes it).
    seconds: BTreeMap<String, BTreeMap<u64, String>>,
}

impl Repeat {
    /// Reads one results folder: `run.json`, `series.csv` and the `all` intervals (tagged
    /// `target/all`, one a second) of `seconds.hlog`.
    pub fn read(folder: &Path) -> Result<Self, CompareError> {
        let run = RunResult::read(folder)?;
        let series = read_series(folder)?;
        let mut seconds: BTreeMap<String, Seconds> = run
            .targets
            .iter()
            .map(|t| (t.name.clone(), Seconds::new()))
            .collect();
        for i in hlog::read(&folder.join("seconds.hlog"))? {
            let Some((target, "all")) = i.tag.rsplit_once('/') else {
                continue;
            };
            if let Some(by_second) = seconds.get_mut(target)
                && !i.histogram.is_empty()
            {
                by_second.insert(i.start.as_secs(), i.histogram);
            }
        }
        Ok(Self {
            run,
            series,
            seconds,
        })
    }

    fn saved(&self) -> SavedRepeat {
        let b64 = base64::engine::general_purpose::STANDARD;
        SavedRepeat {
            run: self.run.clone(),
            series_csv: std::iter::once(SERIES_HEADER.to_owned())
                .chain(self.series.iter().map(SeriesRow::csv_line))
                .collect(),
            seconds: self
                .seconds
                .iter()
                .map(|(target, by_second)| {
                    let encoded = by_second
                        .iter()
                        .map(|(&s, h)| (s, b64.encode(pack(h))))
                        .collect();
                    (target.clone(), encoded)
                })
                .collect(),
        }
    }

    fn from_saved(path: &Path, saved: SavedRepeat) -> Result<Self, CompareError> {
        let bad = |message: String| CompareError::Baseline {
            path: path.to_owned(),
            message,
        };
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut seconds = BTreeMap::new();
        for (target, encoded) in saved.seconds {
            let mut by_second = Seconds::new();
            for (s, text) in encoded {
                let bytes = b64
                    .decode(&text)
                    .map_err(|e| bad(format!("{target}, second {s}: {e}")))?;
                let h = unpack(&bytes).map_err(|e| bad(format!("{target}, second {s}: {e}")))?;
                by_second.insert(s, h);
            }
            seconds.insert(target, by_second);
        }
        Ok(Self {
            series: parse_series(path, &saved.series_csv.join("\n"))?,
            run: saved.run,
            seconds,
        })
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
        repeats: file
            .repeats
            .into_iter()
            .map(|r| Repeat::from_saved(path, r))
            .collect::<Result<_, _>>()?,
    };
    check_set(path, &set)?;
    Ok(set)
}

/// Refuses a set that is not one whole scenario's runs: runs of several scenarios, no run, or
/// one worker's share (its over-admission and wrongful denial are not measured, and its
/// latency is that of part of the traffic).
fn check_set(path: &Path, set: &RunSet) -> Result<(), CompareError> {
    if let Some(other) = set.repeats.iter().find(|r| r.run.scenario != set.scenario) {
        return Err(CompareError::MixedScenarios {
            path: path.to_owned(),
            first: set.scenario.clone(),
            other: other.run.scenario.clone(),
        });
    }
    if let Some(worker) = set
        .repeats
        .iter()
        .find_map(|r| r.run.worker.filter(|w| w.is_share()))
    {
        let (index, count) = worker.written_share();
        return Err(CompareError::Worker {
            path: path.to_owned(),
            index,
            count,
        });
    }
    if set.repeats.is_empty() {
        return Err(not_results(path));
    }
    Ok(())
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
    check_set(path, &set)?;
    Ok(set)
}

/// Stores the run(s) at `results` (anything [`load_set`] reads) as
/// `<baselines_dir>/<scenario>.json`, replacing the scenario's previous baseline (baselines are
/// tracked in git, so the old one is in the history). Returns the file's path.
pub fn save_baseline(results: &Path, baselines_dir: &Path) -> Result<PathBuf, CompareError> {
    let set = load_set(results)?;
    // The name becomes a file name: no separators, no leading dot ("..").
    if !crate::names::is_plain_name(&set.scenario) || set.scenario.starts_with('.') {
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
        repeats: set.repeats.iter().map(Repeat::saved).collect(),
    };
    let json = serde_json::to_string_pretty(&file).map_err(|e| write_err(e.into()))?;
    std::fs::create_dir_all(baselines_dir).map_err(write_err)?;
    atomic::write(&path, json + "\n").map_err(write_err)?;
    Ok(path)
}

/// One run's target × phase: what a row reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct PhaseRun<'a> {
    pub(super) repeat: &'a Repeat,
    pub(super) target: &'a TargetResult,
    pub(super) phase: &'a PhaseResult,
}

impl<'a> PhaseRun<'a> {
    /// The histograms of the seconds that start within the phase, in second order (the rule
    /// `series.csv` files seconds under phases by).
    pub(super) fn seconds(&self) -> Vec<&'a Histogram<u64>> {
        let (start, end) = (self.phase.start_s, self.phase.end_s);
        self.repeat
            .seconds
            .get(&self.target.name)
            .into_iter()
            .flatten()
            .filter(|&(&s, _)| s as f64 >= start && (s as f64) < end)
            .map(|(_, h)| h)
            .collect()
    }
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

    /// Each run that has this target × phase.
    pub(super) fn runs_of(&self, target: &str, phase: &str) -> Vec<PhaseRun<'_>> {
        self.repeats
            .iter()
            .filter_map(|repeat| {
                let target = repeat.run.targets.iter().find(|t| t.name == target)?;
                let phase = target.phases.iter().find(|p| p.name == phase)?;
                Some(PhaseRun {
                    repeat,
                    target,
                    phase,
                })
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
