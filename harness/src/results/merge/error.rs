//! What merging workers' results folders can fail with: folders that are not one run's whole
//! shares, content that does not add up, a merged folder that cannot be written.

use std::path::PathBuf;

use crate::metrics::MeasuredError;
use crate::results::read::ReadError;

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge: name the workers' results folders")]
    Nothing,
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Files(#[from] crate::results::measured_files::FilesError),
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
