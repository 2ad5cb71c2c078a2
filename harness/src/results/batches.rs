//! Batches: a scenario's targets run a few at a time, one batch after another, each batch
//! through the whole timeline into `batch-K/`, then joined into one results folder that reads
//! as one run (`run.json`, `series.csv`, `scenario.toml`; each batch keeps its own `logs/` and
//! `latency.hlog`). Every target has its own Redis and proxy, so running at the same instant
//! adds nothing to the comparison but contention: on a small machine, a dozen interpreted
//! targets at once queue for CPU, and their latency becomes the machine's.

use std::path::{Path, PathBuf};

use super::RunResult;
use super::read::{ReadError, SERIES_HEADER};

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("batch {index} is a different run: {what} differs ({ours} vs {theirs})")]
    Mismatch {
        index: usize,
        what: &'static str,
        ours: String,
        theirs: String,
    },
    #[error("target {0} ran in two batches")]
    Duplicate(String),
    #[error("nothing to join")]
    Empty,
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Splits target names into batches of at most `size`, in order; `size` 0 means one batch.
pub fn split(names: &[String], size: usize) -> Vec<Vec<String>> {
    if size == 0 || names.is_empty() {
        return vec![names.to_vec()];
    }
    names.chunks(size).map(<[String]>::to_vec).collect()
}

/// Joins the results of batches of one scenario into one run: targets in batch order, load
/// totals summed, each note prefixed with its batch.
pub fn join(parts: Vec<RunResult>) -> Result<RunResult, JoinError> {
    let mut parts = parts.into_iter();
    let mut joined = parts.next().ok_or(JoinError::Empty)?;
    joined.batches = vec![joined.targets.iter().map(|t| t.name.clone()).collect()];
    joined.aborted = joined.aborted.take().map(|r| format!("batch 1: {r}"));
    joined.notes = joined
        .notes
        .iter()
        .map(|n| format!("batch 1: {n}"))
        .collect();
    for (i, part) in parts.enumerate() {
        let index = i + 2;
        let same = |what: &'static str, ours: String, theirs: String| {
            if ours == theirs {
                Ok(())
            } else {
                Err(JoinError::Mismatch {
                    index,
                    what,
                    ours,
                    theirs,
                })
            }
        };
        same("scenario", joined.scenario.clone(), part.scenario.clone())?;
        same("seed", joined.seed.to_string(), part.seed.to_string())?;
        same(
            "duration scale",
            joined.duration_scale.to_string(),
            part.duration_scale.to_string(),
        )?;
        same(
            "limit",
            format!("{}/{}s", joined.limit, joined.window_s),
            format!("{}/{}s", part.limit, part.window_s),
        )?;
        for t in &part.targets {
            if joined.targets.iter().any(|x| x.name == t.name) {
                return Err(JoinError::Duplicate(t.name.clone()));
            }
        }
        joined
            .batches
            .push(part.targets.iter().map(|t| t.name.clone()).collect());
        joined.duration_s = joined.duration_s.max(part.duration_s);
        joined.partial |= part.partial;
        // Batches run one after another: a later one is aborted only when none before was.
        if joined.aborted.is_none() {
            joined.aborted = part.aborted.map(|r| format!("batch {index}: {r}"));
        }
        joined.load.add(&part.load);
        joined
            .notes
            .extend(part.notes.iter().map(|n| format!("batch {index}: {n}")));
        joined.targets.extend(part.targets);
    }
    Ok(joined)
}

/// Joins `batch_folders` into `folder`: `run.json`, `series.csv` (the batches' rows, whose
/// seconds all count from their own batch's start, so they line up on the timeline) and the
/// first batch's `scenario.toml`. `not_run` names the targets of batches that never ran (an
/// interruption, an error): the joined run is then partial and says so. `notes` are the
/// run's own (a batch that ran twice), beside each batch's.
pub fn write_joined(
    folder: &Path,
    batch_folders: &[PathBuf],
    not_run: &[String],
    notes: &[String],
) -> Result<RunResult, JoinError> {
    let parts = batch_folders
        .iter()
        .map(|f| RunResult::read(f))
        .collect::<Result<Vec<_>, _>>()?;
    let mut joined = join(parts)?.with_trust_recorded();
    joined.notes.extend_from_slice(notes);
    if !not_run.is_empty() {
        joined.partial = true;
        joined.notes.push(format!(
            "not run (the run stopped first): {}",
            not_run.join(", ")
        ));
    }
    let write = |name: &str, text: String| {
        let path = folder.join(name);
        super::atomic::write(&path, text).map_err(|source| JoinError::Write { path, source })
    };
    let read = |path: PathBuf| {
        std::fs::read_to_string(&path).map_err(|source| ReadError::Io { path, source })
    };
    let mut series = format!("{SERIES_HEADER}\n");
    for f in batch_folders {
        let text = read(f.join("series.csv"))?;
        for line in text.lines().skip(1).filter(|l| !l.is_empty()) {
            series.push_str(line);
            series.push('\n');
        }
    }
    let json = serde_json::to_string_pretty(&joined).map_err(|e| JoinError::Write {
        path: folder.join("run.json"),
        source: std::io::Error::other(e),
    })?;
    write("series.csv", series)?;
    if let Some(first) = batch_folders.first() {
        write("scenario.toml", read(first.join("scenario.toml"))?)?;
    }
    // Last, as in every results folder: one with a run.json is whole.
    write("run.json", json + "\n")?;
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixture;

    fn part(targets: &[&str], notes: &[&str]) -> RunResult {
        let mut run = fixture::run(
            "peers",
            targets
                .iter()
                .map(|name| fixture::target(name, Vec::new()))
                .collect(),
        );
        run.notes = notes.iter().map(|n| (*n).to_owned()).collect();
        run.duration_s = 145.0;
        run.load.scheduled = 100;
        run.load.sent = 100;
        run
    }

    #[test]
    fn targets_split_into_batches_in_order() {
        let names: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        assert_eq!(
            split(&names, 2),
            [vec!["a", "b"], vec!["c", "d"], vec!["e"]]
        );
        assert_eq!(split(&names, 0), std::slice::from_ref(&names));
        assert_eq!(split(&names, 9), [names]);
    }

    #[test]
    fn batches_join_into_one_run_that_remembers_them() {
        let joined = join(vec![
            part(&["a", "b"], &["slow machine"]),
            part(&["c"], &["c broke"]),
        ])
        .unwrap();
        let names: Vec<&str> = joined.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(joined.batches, [vec!["a", "b"], vec!["c"]]);
        assert_eq!(joined.load.scheduled, 200);
        assert_eq!(joined.notes, ["batch 1: slow machine", "batch 2: c broke"]);
    }

    #[test]
    fn a_batch_its_abort_guard_stopped_makes_the_joined_run_aborted_naming_the_batch() {
        let mut aborted = part(&["c"], &[]);
        (aborted.partial, aborted.aborted) = (true, Some("c: rate_5xx above 50.0 %".into()));
        let joined = join(vec![part(&["a", "b"], &[]), aborted]).unwrap();
        assert!(joined.partial);
        assert_eq!(
            joined.aborted.as_deref(),
            Some("batch 2: c: rate_5xx above 50.0 %")
        );
        let joined = join(vec![part(&["a"], &[]), part(&["c"], &[])]).unwrap();
        assert_eq!(joined.aborted, None);
    }

    #[test]
    fn batches_of_different_runs_or_repeated_targets_do_not_join() {
        let mut other = part(&["c"], &[]);
        other.seed = 2;
        let err = join(vec![part(&["a"], &[]), other]).unwrap_err();
        assert!(err.to_string().contains("seed"), "{err}");
        let err = join(vec![part(&["a"], &[]), part(&["a"], &[])]).unwrap_err();
        assert!(
            matches!(err, JoinError::Duplicate(ref t) if t == "a"),
            "{err}"
        );
        assert!(matches!(join(Vec::new()), Err(JoinError::Empty)));
    }
}
