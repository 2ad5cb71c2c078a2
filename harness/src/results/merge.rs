//! `failmode merge`: the results folders of workers that sent one scenario's load together
//! (`failmode run --worker K/N`, same seed, same start) made into one results folder, exactly:
//! counts summed, HdrHistograms added, the per-second series added second by second. What
//! describes the shared targets rather than one worker's share (when the faults were applied,
//! the targets' fallback counters, the commands their Redis ran) comes from the process that
//! played the fault timeline. `gate`, `compare`, `outcomes` and `report` read the merged folder
//! as any other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::build::build_targets;
use super::folder::{RunFolder, timestamp};
use super::hlog::{self, HlogError};
use super::read::{ReadError, read_series};
use super::{LoadTotals, PhaseFacts, RunResult, SCHEMA_VERSION, TargetFacts, Worker};
use crate::metrics::{Measured, MeasuredError, Shape, pack};
use crate::scenario::{Scenario, ScenarioError};

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge: name the workers' results folders")]
    Nothing,
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Hlog(#[from] HlogError),
    #[error("{path}: {source}")]
    Scenario {
        path: PathBuf,
        source: ScenarioError,
    },
    #[error(
        "{0} is not a worker's results (its run.json has no `worker`): merge takes the folders \
         of `failmode run --worker K/N` (or `failmode faults play`)"
    )]
    NotAWorker(PathBuf),
    #[error(
        "{path} is not from the same run as {first}: its {what} differs ({found} vs {expected})"
    )]
    Mismatch {
        path: PathBuf,
        first: PathBuf,
        what: &'static str,
        expected: String,
        found: String,
    },
    #[error("{0}")]
    Shares(String),
    #[error(
        "{0} is a run that stopped early (partial): its share of the rest of the timeline is \
         missing, and the others' counts there cannot be cut to match; run the workers again"
    )]
    Partial(PathBuf),
    #[error(
        "{0} already holds a results folder (or is one of the folders merged): merge writes a \
         new one; give another --out"
    )]
    OutExists(PathBuf),
    #[error("{path}: {message}")]
    Content { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    Measured {
        path: PathBuf,
        source: MeasuredError,
    },
    #[error("cannot write the merged results folder {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One worker's folder, read back into what its run measured.
#[derive(Debug)]
struct Part {
    path: PathBuf,
    run: RunResult,
    worker: Worker,
    scenario: Scenario,
    measured: Measured,
}

fn shape_of(run: &RunResult, scenario: &Scenario) -> Shape {
    scenario.measurement_shape(run.targets.len())
}

/// The index of every tag a folder's logs can hold, by what they cover.
#[derive(Debug, Default)]
struct Tags {
    cells: BTreeMap<String, (usize, usize, usize)>,
    slots: BTreeMap<String, (usize, usize)>,
    targets: BTreeMap<String, usize>,
}

impl Tags {
    fn of(run: &RunResult, scenario: &Scenario) -> Self {
        let mut tags = Self::default();
        for (t, target) in run.targets.iter().enumerate() {
            tags.targets.insert(target.name.clone(), t);
            let slots = scenario
                .tenants
                .iter()
                .map(|x| x.name.as_str())
                .chain(["all"]);
            for (n, slot) in slots.enumerate() {
                tags.slots.insert(format!("{}/{slot}", target.name), (t, n));
            }
            for (n, tenant) in scenario.tenants.iter().enumerate() {
                for (p, phase) in scenario.phases.iter().enumerate() {
                    tags.cells.insert(
                        format!("{}/{}/{}", target.name, tenant.name, phase.name),
                        (t, n, p),
                    );
                }
            }
        }
        tags
    }
}

fn read_part(path: &Path) -> Result<Part, MergeError> {
    let run = RunResult::read(path)?;
    let worker = run
        .worker
        .ok_or_else(|| MergeError::NotAWorker(path.to_owned()))?;
    let scenario_path = path.join("scenario.toml");
    let source = std::fs::read_to_string(&scenario_path).map_err(|source| {
        MergeError::Read(ReadError::Io {
            path: scenario_path.clone(),
            source,
        })
    })?;
    let mut scenario =
        Scenario::parse(&source, &scenario_path.display().to_string()).map_err(|source| {
            MergeError::Scenario {
                path: scenario_path.clone(),
                source,
            }
        })?;
    scenario.seed = run.seed;
    let scenario = scenario.scaled(run.duration_scale);
    let mut measured = Measured::empty(&shape_of(&run, &scenario));
    let tags = Tags::of(&run, &scenario);
    let content = |message: String| MergeError::Content {
        path: path.to_owned(),
        message,
    };

    for (t, target) in run.targets.iter().enumerate() {
        for phase in &target.phases {
            let p = scenario
                .phases
                .iter()
                .position(|x| x.name == phase.name)
                .ok_or_else(|| content(format!("run.json names a phase {:?}", phase.name)))?;
            for (n, tenant) in phase.tenants.iter().enumerate() {
                if let Some(cell) = measured.cells[t].get_mut(n) {
                    cell[p].counts = tenant.counts;
                }
            }
        }
    }
    for (file, service) in [("latency.hlog", false), ("service_time.hlog", true)] {
        for i in hlog::read(&path.join(file))? {
            let &(t, n, p) = tags
                .cells
                .get(&i.tag)
                .ok_or_else(|| content(format!("{file} has an unknown tag {:?}", i.tag)))?;
            let cell = &mut measured.cells[t][n][p];
            if service {
                cell.service_time = i.histogram;
            } else {
                cell.latency = i.histogram;
            }
        }
    }
    for i in hlog::read(&path.join("seconds.hlog"))? {
        let &(t, n) = tags
            .slots
            .get(&i.tag)
            .ok_or_else(|| content(format!("seconds.hlog has an unknown tag {:?}", i.tag)))?;
        measured.second_latency[t][n].insert(i.start.as_secs() as usize, pack(&i.histogram));
    }
    for i in hlog::read(&path.join("send_lag.hlog"))? {
        let &t = tags
            .targets
            .get(&i.tag)
            .ok_or_else(|| content(format!("send_lag.hlog has an unknown tag {:?}", i.tag)))?;
        measured.send_lag[t] = i.histogram;
    }
    for row in read_series(path)? {
        let &(t, n) = tags
            .slots
            .get(&format!("{}/{}", row.target, row.tenant))
            .ok_or_else(|| {
                content(format!(
                    "series.csv has an unknown target/tenant {}/{}",
                    row.target, row.tenant
                ))
            })?;
        if let Some(second) = measured.seconds[t][n].get_mut(row.second as usize) {
            second.counts = row.counts;
        }
    }
    Ok(Part {
        path: path.to_owned(),
        run,
        worker,
        scenario,
        measured,
    })
}

/// The parts are one run's: same scenario, seed, scale, targets, start and worker count.
fn check_same_run(parts: &[Part]) -> Result<(), MergeError> {
    let first = &parts[0];
    let names = |p: &Part| {
        p.run
            .targets
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>()
            .join(",")
    };
    // Each target's rule and caller identity: workers attached with different deployment
    // files would sum counts judged by different rules.
    let rules = |p: &Part| {
        p.run
            .targets
            .iter()
            .map(|t| {
                let limit = p.run.limit_of(t);
                let caller = t
                    .caller
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                format!("{}: {} by {caller}", t.name, limit.describe())
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    for part in &parts[1..] {
        let checks: [(&'static str, String, String); 6] = [
            (
                "scenario",
                first.scenario.source.clone(),
                part.scenario.source.clone(),
            ),
            (
                "seed",
                first.run.seed.to_string(),
                part.run.seed.to_string(),
            ),
            (
                "duration scale",
                first.run.duration_scale.to_string(),
                part.run.duration_scale.to_string(),
            ),
            ("targets", names(first), names(part)),
            (
                "targets' limits and caller identities",
                rules(first),
                rules(part),
            ),
            (
                "start time (ms since the epoch)",
                first.worker.start_at_ms.to_string(),
                part.worker.start_at_ms.to_string(),
            ),
        ];
        for (what, expected, found) in checks {
            if expected != found {
                let (expected, found) = if what == "scenario" {
                    ("its scenario.toml".to_owned(), "another".to_owned())
                } else {
                    (expected, found)
                };
                return Err(MergeError::Mismatch {
                    path: part.path.clone(),
                    first: first.path.clone(),
                    what,
                    expected,
                    found,
                });
            }
        }
    }
    Ok(())
}

/// Every share 1..=N exactly once, at most one faults-only process, and one process that
/// played the faults (unless the scenario has none). Returns the index of that process.
fn check_shares(parts: &[Part]) -> Result<Option<usize>, MergeError> {
    let load: Vec<&Part> = parts.iter().filter(|p| p.worker.share.index > 0).collect();
    let Some(count) = load.first().map(|p| p.worker.share.count) else {
        return Err(MergeError::Shares(
            "no worker sent load: name the folders of `failmode run --worker K/N`".into(),
        ));
    };
    let mut seen = BTreeSet::new();
    for p in &load {
        if p.worker.share.count != count {
            return Err(MergeError::Shares(format!(
                "{} was worker {} but {} was worker {}: not the same split",
                load[0].path.display(),
                load[0].worker.share,
                p.path.display(),
                p.worker.share
            )));
        }
        if !seen.insert(p.worker.share.index) {
            return Err(MergeError::Shares(format!(
                "worker {} appears twice (again in {})",
                p.worker.share,
                p.path.display()
            )));
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|k| !seen.contains(k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Shares(format!(
            "the results of worker {} are missing: without them the load is not the scenario's",
            missing.join(", ")
        )));
    }
    if parts.iter().filter(|p| p.worker.share.index == 0).count() > 1 {
        return Err(MergeError::Shares(
            "two faults-only folders: one process plays the faults".into(),
        ));
    }
    let drivers: Vec<usize> = (0..parts.len())
        .filter(|&i| parts[i].worker.drives_faults)
        .collect();
    let has_faults = parts[0]
        .scenario
        .phases
        .iter()
        .any(|p| !p.faults.is_empty());
    match drivers.as_slice() {
        [one] => Ok(Some(*one)),
        [] if !has_faults => Ok(None),
        [] => Err(MergeError::Shares(
            "no folder played the fault timeline: add the folder of the worker (or of \
             `failmode faults play`) that did"
                .into(),
        )),
        _ => Err(MergeError::Shares(format!(
            "{} folders played the fault timeline ({}): one process must",
            drivers.len(),
            drivers
                .iter()
                .map(|&i| parts[i].path.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The same folder, however it is written (`./w1`, `w1/`, an absolute path).
fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn worker_name(w: &Worker) -> String {
    if w.share.index == 0 {
        "the faults-only process".to_owned()
    } else {
        format!("worker {}", w.share)
    }
}

/// Reads the workers' `folders` and writes their merged results to `out` (default
/// `<results_root>/<scenario>/<now>-merged/`, then marked latest).
pub fn merge(
    folders: &[PathBuf],
    results_root: &Path,
    out: Option<&Path>,
) -> Result<(RunFolder, RunResult), MergeError> {
    if folders.is_empty() {
        return Err(MergeError::Nothing);
    }
    if let Some(out) = out
        && (out.join("run.json").exists() || folders.iter().any(|f| same_folder(f, out)))
    {
        return Err(MergeError::OutExists(out.to_owned()));
    }
    let parts: Vec<Part> = folders
        .iter()
        .map(|f| read_part(f))
        .collect::<Result<_, _>>()?;
    // A cut run's phases stop at its own end, the others' do not: their sum would describe
    // neither.
    if let Some(cut) = parts.iter().find(|p| p.run.partial) {
        return Err(MergeError::Partial(cut.path.clone()));
    }
    check_same_run(&parts)?;
    let driver = check_shares(&parts)?;
    let first = &parts[0];
    let scenario = &first.scenario;

    let mut measured = Measured::empty(&shape_of(&first.run, scenario));
    let mut load = LoadTotals::default();
    for part in &parts {
        measured
            .add(&part.measured)
            .map_err(|source| MergeError::Measured {
                path: part.path.clone(),
                source,
            })?;
        load.add(&part.run.load);
    }

    // The facts of the shared targets: from the process that played the faults (or the
    // first worker, when there were none); the others' troubles kept as events, named.
    let facts_from = &parts[driver.unwrap_or(0)];
    let facts: Vec<TargetFacts> = facts_from
        .run
        .targets
        .iter()
        .enumerate()
        .map(|(t, target)| {
            let mut events = target.events.clone();
            for part in parts.iter().filter(|p| !std::ptr::eq(*p, facts_from)) {
                events.extend(part.run.targets[t].events.iter().map(|e| super::Event {
                    detail: format!("{} ({})", e.detail, worker_name(&part.worker)),
                    ..e.clone()
                }));
            }
            events.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
            TargetFacts {
                name: target.name.clone(),
                description: target.description.clone(),
                instances: target.instances,
                command: target.command.clone(),
                env: target.env.clone(),
                refuses_with: target.refuses_with,
                limit: facts_from.run.limit_of(target),
                caller: target.caller.clone(),
                events,
                phases: scenario
                    .phases
                    .iter()
                    .map(|phase| {
                        target
                            .phases
                            .iter()
                            .find(|p| p.name == phase.name)
                            .map(|p| PhaseFacts {
                                faults_applied_at_s: p.faults_applied_at_s,
                                faults_removed_at_s: p.faults_removed_at_s,
                                fallbacks: p.fallbacks,
                                store_commands: p.store_commands,
                            })
                            .unwrap_or_default()
                    })
                    .collect(),
            }
        })
        .collect();

    // Every part ran to its end (partial ones are refused above): the whole timeline.
    let targets = build_targets(scenario, &measured, &facts, scenario.duration);

    let mut notes = vec![format!(
        "merged from {} folders ({}): {}",
        parts.len(),
        parts
            .iter()
            .map(|p| format!("{} in {}", worker_name(&p.worker), p.path.display()))
            .collect::<Vec<_>>()
            .join(", "),
        match driver {
            Some(d) => format!(
                "the faults were played by {}, whose fault times, counters and Redis commands \
                 these are",
                worker_name(&parts[d].worker)
            ),
            None => "the scenario has no faults".to_owned(),
        }
    )];
    // Said once when every worker said it (the attachment); otherwise per worker. What the
    // merged figures say again (a broken target, a late generator) is said of them below.
    let mut seen = BTreeSet::new();
    for part in &parts {
        let recomputed: Vec<String> = super::trust::broken_before_any_fault(&part.run.targets)
            .into_iter()
            .chain(super::trust::machine_saturated(&part.run.targets))
            .collect();
        for note in part.run.notes.iter().filter(|n| !recomputed.contains(n)) {
            let everyone = parts.iter().all(|p| p.run.notes.contains(note));
            let line = if everyone {
                note.clone()
            } else {
                format!("{}: {note}", worker_name(&part.worker))
            };
            if !note.starts_with("worker ") && seen.insert(line.clone()) {
                notes.push(line);
            }
        }
    }
    notes.extend(super::trust::broken_before_any_fault(&targets));
    notes.extend(super::trust::machine_saturated(&targets));

    let start = SystemTime::UNIX_EPOCH + Duration::from_millis(first.worker.start_at_ms);
    let result = RunResult {
        schema_version: SCHEMA_VERSION,
        scenario: first.run.scenario.clone(),
        description: first.run.description.clone(),
        seed: first.run.seed,
        duration_scale: first.run.duration_scale,
        git_revision: first.run.git_revision.clone(),
        started_at: humantime::format_rfc3339_millis(start).to_string(),
        duration_s: scenario.duration.as_secs_f64(),
        partial: false,
        limit: first.run.limit,
        window_s: first.run.window_s,
        tenants: first.run.tenants.clone(),
        load,
        notes,
        batches: Vec::new(),
        worker: None,
        targets,
    };
    // Not `<scenario>/<timestamp>` alone: a worker on this machine may have written that
    // folder in the same second.
    let path = out.map(Path::to_owned).unwrap_or_else(|| {
        results_root
            .join(&result.scenario)
            .join(format!("{}-merged", timestamp(SystemTime::now())))
    });
    let folder = RunFolder::create(
        results_root,
        &result.scenario,
        SystemTime::now(),
        Some(&path),
    )
    .map_err(|source| MergeError::Write {
        path: results_root.to_owned(),
        source,
    })?;
    let write_error = |source| MergeError::Write {
        path: folder.path.clone(),
        source,
    };
    folder
        .write(&result, scenario, &measured)
        .map_err(write_error)?;
    // The workers' logs stay in their folders.
    let _ = std::fs::remove_dir(folder.logs());
    if out.is_none() {
        folder.mark_latest(results_root).map_err(write_error)?;
    }
    Ok((folder, result))
}
