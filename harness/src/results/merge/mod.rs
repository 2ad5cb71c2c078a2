//! `failmode merge`: the results folders of workers that sent one scenario's load together
//! (`failmode run --worker K/N`, same seed, same start) made into one results folder, exactly:
//! counts summed, HdrHistograms added, the per-second series added second by second. What
//! describes the shared targets rather than one worker's share (when the faults were applied,
//! the targets' fallback counters, the commands their Redis ran) comes from the process that
//! played the fault timeline. `gate`, `compare`, `outcomes` and `report` read the merged folder
//! as any other.

mod checks;
mod error;
mod part;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::build::build_targets;
use super::folder::{RunFolder, timestamp};
use super::{LoadTotals, RunResult, SCHEMA_VERSION, TargetFacts, Worker};
use crate::load::Role;
use crate::metrics::Measured;
use crate::scenario::Scenario;
use checks::{check_same_run, check_shares};
pub use error::MergeError;
use part::{Part, read_part, shape_of};

/// The same folder, however it is written (`./w1`, `w1/`, an absolute path).
fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn worker_name(w: &Worker) -> String {
    match w.role {
        Role::FaultPlayer => "the faults-only process".to_owned(),
        Role::Sender(share) => format!("worker {share}"),
    }
}

/// Reads the workers' `folders` and writes their merged results to `out` (default
/// `<results_root>/<scenario>/<now>-merged/`, then marked latest).
pub fn merge(
    folders: &[PathBuf],
    results_root: &Path,
    out: Option<&Path>,
) -> Result<(RunFolder, RunResult), MergeError> {
    let parts = read_parts(folders, out)?;
    let driver = check_shares(&parts)?;
    let first = &parts[0];
    let scenario = &first.scenario;
    let (measured, load) = add_up(&parts, scenario)?;
    let facts = shared_facts(&parts, driver.unwrap_or(0), scenario);
    // Every part ran to its end (partial ones are refused above): the whole timeline.
    let targets = build_targets(scenario, &measured, &facts, scenario.duration);
    let notes = notes(&parts, driver, &targets);
    let result = merged_run(first, scenario, load, notes, targets);
    let folder = write(&result, scenario, &measured, results_root, out)?;
    Ok((folder, result))
}

/// The parts to merge, refused unless they are whole shares of one run and `out` is a new
/// folder.
fn read_parts(folders: &[PathBuf], out: Option<&Path>) -> Result<Vec<Part>, MergeError> {
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
    Ok(parts)
}

/// The parts' measurements and load totals, added.
fn add_up(parts: &[Part], scenario: &Scenario) -> Result<(Measured, LoadTotals), MergeError> {
    let mut measured = Measured::empty(&shape_of(&parts[0].run, scenario));
    let mut load = LoadTotals::default();
    for part in parts {
        measured
            .add(&part.measured)
            .map_err(|source| MergeError::Measured {
                path: part.path.clone(),
                source,
            })?;
        load.add(&part.run.load);
    }
    Ok((measured, load))
}

/// The facts of the shared targets: from the process that played the faults (`driver`, or
/// the first worker, when there were none); the others' troubles kept as events, named.
fn shared_facts(parts: &[Part], driver: usize, scenario: &Scenario) -> Vec<TargetFacts> {
    let facts_from = &parts[driver];
    facts_from
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
            TargetFacts::recorded(&facts_from.run, target, scenario, events)
        })
        .collect()
}

/// The merged run's notes: where it came from, the parts' own notes, and what the merged
/// figures say of `targets`.
fn notes(parts: &[Part], driver: Option<usize>, targets: &[super::TargetResult]) -> Vec<String> {
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
    for part in parts {
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
    notes.extend(super::trust::broken_before_any_fault(targets));
    notes.extend(super::trust::machine_saturated(targets));
    notes
}

/// The merged `run.json`: the run's settings as the first part has them, started when the
/// workers were told to start.
fn merged_run(
    first: &Part,
    scenario: &Scenario,
    load: LoadTotals,
    notes: Vec<String>,
    targets: Vec<super::TargetResult>,
) -> RunResult {
    let start = SystemTime::UNIX_EPOCH + Duration::from_millis(first.worker.start_at_ms);
    RunResult {
        schema_version: SCHEMA_VERSION,
        scenario: first.run.scenario.clone(),
        description: first.run.description.clone(),
        seed: first.run.seed,
        duration_scale: first.run.duration_scale,
        git_revision: first.run.git_revision.clone(),
        started_at: humantime::format_rfc3339_millis(start).to_string(),
        duration_s: scenario.duration.as_secs_f64(),
        partial: false,
        aborted: None,
        untrusted_because: Vec::new(),
        limit: first.run.limit,
        window_s: first.run.window_s,
        tenants: first.run.tenants.clone(),
        load,
        notes,
        batches: Vec::new(),
        worker: None,
        targets,
    }
    .with_trust_recorded()
}

/// Writes the merged results folder: `out`, or a new one under `results_root`, then marked
/// latest.
fn write(
    result: &RunResult,
    scenario: &Scenario,
    measured: &Measured,
    results_root: &Path,
    out: Option<&Path>,
) -> Result<RunFolder, MergeError> {
    // Not `<scenario>/<timestamp>` alone: a worker on this machine may have written that
    // folder in the same second.
    let path = out.map(Path::to_owned).unwrap_or_else(|| {
        results_root
            .join(&result.scenario)
            .join(format!("{}-merged", timestamp(SystemTime::now())))
    });
    let folder =
        RunFolder::create(path.clone()).map_err(|source| MergeError::Write { path, source })?;
    let write_error = |source| MergeError::Write {
        path: folder.path.clone(),
        source,
    };
    folder
        .write(result, scenario, measured)
        .map_err(write_error)?;
    // The workers' logs stay in their folders.
    let _ = std::fs::remove_dir(folder.logs());
    if out.is_none() {
        folder.mark_latest(results_root).map_err(write_error)?;
    }
    Ok(folder)
}
