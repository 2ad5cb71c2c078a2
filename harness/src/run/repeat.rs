//! `run --repeat N`: one scenario run N times into `run-1/` … `run-N/` of one results folder,
//! which `compare` reads as one set, so that it decides on distributions rather than on one
//! noisy run. Also where a run is split into batches (`--batch`), one repeat at a time.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::SystemTime;

use tokio_util::sync::CancellationToken;

use super::progress::Say;
use super::{RunError, RunOptions, RunOutcome, run, run_in_batches};
use crate::results::folder::RunFolder;

/// What the repeats left: the last run, and the folder holding all of them.
#[derive(Debug)]
pub struct Repeated {
    /// The last run that took place: the N-th, or the one interrupted.
    pub last: RunOutcome,
    /// The folder holding `run-1/` … `run-N/`; `None` for a single run, whose folder is
    /// `last`'s.
    pub folder: Option<PathBuf>,
}

/// Runs `opts` `count` times (`size` targets at a time when `batch` says so), stopping after
/// a run that was interrupted. With more than one run, `results/latest` points at the folder
/// of all of them rather than at the last run's.
pub async fn run_repeated(
    opts: RunOptions,
    count: NonZeroU32,
    batch: Option<usize>,
    interrupt: CancellationToken,
    say: &Say,
) -> Result<Repeated, RunError> {
    if count.get() == 1 {
        let last = run_once(opts, batch, interrupt, say).await?;
        return Ok(Repeated { last, folder: None });
    }
    let folder = opts.out.clone().unwrap_or_else(|| {
        RunFolder::default_path(&opts.results_root, &opts.scenario.name, SystemTime::now())
    });
    let mut k = 1;
    let last = loop {
        say.line(&format!("repeat {k} of {count}"));
        let once = RunOptions {
            out: Some(folder.join(format!("run-{k}"))),
            // Building once is enough.
            build: opts.build && k == 1,
            ..opts.clone()
        };
        let outcome = run_once(once, batch, interrupt.clone(), say).await?;
        if outcome.result.partial || k == count.get() {
            break outcome;
        }
        k += 1;
    };
    if opts.out.is_none() {
        // The same link a single run makes, to the folder of all the repeats.
        RunFolder {
            path: folder.clone(),
        }
        .mark_latest(&opts.results_root)
        .map_err(|source| RunError::Results {
            path: folder.clone(),
            source,
        })?;
    }
    Ok(Repeated {
        last,
        folder: Some(folder),
    })
}

async fn run_once(
    opts: RunOptions,
    batch: Option<usize>,
    interrupt: CancellationToken,
    say: &Say,
) -> Result<RunOutcome, RunError> {
    match batch {
        Some(size) => run_in_batches(opts, size, interrupt, say).await,
        None => run(opts, interrupt, say).await,
    }
}
