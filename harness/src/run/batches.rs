//! Runs in batches (`--batch N`): the targets a few at a time, each batch through the whole
//! timeline into `batch-K/` of one results folder, then joined there. A batch whose target
//! erred with Redis healthy while the machine was short of CPU runs once more.

use std::time::SystemTime;

use tokio_util::sync::CancellationToken;

use super::progress::Say;
use super::{RunError, RunOptions, RunOutcome, record, run};
use crate::abort;
use crate::names::glob_matches;
use crate::results::{self, folder::RunFolder, trust};
use crate::scenario::Scenario;

/// Runs the targets `size` at a time, one batch after another, each through the whole
/// timeline into `batch-K/` of one results folder, then joins them there (see
/// [`results::batches`]). An interruption or an error still joins the batches that ran.
pub async fn run_in_batches(
    opts: RunOptions,
    size: usize,
    interrupt: CancellationToken,
    say: &Say,
) -> Result<RunOutcome, RunError> {
    let names: Vec<String> = opts.targets.clone().unwrap_or_else(|| {
        opts.scenario
            .targets
            .iter()
            .map(|t| t.name.clone())
            .collect()
    });
    let batches = results::batches::split(&names, size);
    if batches.len() < 2 {
        return run(opts, interrupt, say).await;
    }
    // Each safety limit must guard a target of the run; each batch is guarded by those that
    // guard one of its own.
    abort::unmatched(&opts.scenario.abort, &names).map_err(RunError::Abort)?;
    let path = opts.out.clone().unwrap_or_else(|| {
        RunFolder::default_path(&opts.results_root, &opts.scenario.name, SystemTime::now())
    });
    let folder =
        RunFolder::create(path.clone()).map_err(|source| RunError::Results { path, source })?;
    let mut ran = Vec::new();
    let mut reruns = Vec::new();
    let mut failure = None;
    for (k, batch) in batches.iter().enumerate() {
        say.line(&format!(
            "batch {} of {}: {}",
            k + 1,
            batches.len(),
            batch.join(", ")
        ));
        let out = folder.path.join(format!("batch-{}", k + 1));
        let batch_opts = RunOptions {
            targets: Some(batch.clone()),
            out: Some(out.clone()),
            scenario: guarding(&opts.scenario, batch),
            ..opts.clone()
        };
        let mut outcome = run(batch_opts.clone(), interrupt.clone(), say).await;
        // Once a batch: a second machine hiccup in a row is reported as it is. Not after a
        // Ctrl-C, and not when the first run cannot be put aside.
        if let Ok(o) = &outcome
            && !o.result.partial
            && !interrupt.is_cancelled()
            && let Some(why) = trust::short_of_cpu_and_erring(&o.result.targets)
        {
            let aside = folder.path.join(format!("batch-{}-short-of-cpu", k + 1));
            if std::fs::rename(&out, &aside).is_ok() {
                let kept = aside.file_name().unwrap_or_default().to_string_lossy();
                let again = run(batch_opts, interrupt.clone(), say).await;
                // A second run that failed or was cut short leaves the first one standing.
                let note = match &again {
                    Ok(o) if !o.result.partial => {
                        outcome = again;
                        format!(
                            "batch {}: ran twice, as in its first run (kept in {kept}/) {why}",
                            k + 1
                        )
                    }
                    _ => {
                        let _ = std::fs::remove_dir_all(&out);
                        std::fs::rename(&aside, &out).map_err(|source| RunError::Results {
                            path: out.clone(),
                            source,
                        })?;
                        format!(
                            "batch {}: {why}; run again, it did not finish, so its first run \
                             stands",
                            k + 1
                        )
                    }
                };
                say.line(&note);
                reruns.push(note);
            }
        }
        match outcome {
            Ok(o) => {
                ran.push(o.folder.path);
                if o.result.partial {
                    break;
                }
            }
            // Ctrl-C between batches: what ran is joined below, the rest named as not run.
            Err(RunError::InterruptedBeforeLoad(_)) if !ran.is_empty() => break,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if ran.is_empty() {
        return Err(failure.unwrap_or(RunError::InterruptedBeforeLoad(folder.logs())));
    }
    let not_run: Vec<String> = batches[ran.len()..].concat();
    let result = results::batches::write_joined(&folder.path, &ran, &not_run, &reruns)?;
    // Each batch has its own logs/; the joined folder's stays empty.
    let _ = std::fs::remove_dir(folder.logs());
    if let Some(e) = failure {
        return Err(e);
    }
    record::publish(&folder, &opts, say)?;
    Ok(RunOutcome { folder, result })
}

/// `scenario` with only the safety limits that guard a target of `batch`.
fn guarding(scenario: &Scenario, batch: &[String]) -> Scenario {
    let mut scenario = scenario.clone();
    scenario
        .abort
        .retain(|rule| batch.iter().any(|t| glob_matches(&rule.target, t)));
    scenario
}
