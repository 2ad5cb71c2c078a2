//! Whether a results folder without a `run.json` belongs to a run still going or to one that
//! was killed: the running harness holds a lock on its journal's `lock` file, and the kernel
//! lets go of it when the process dies, however it dies.

use std::fs::File;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The journal's folder inside a results folder.
pub const JOURNAL: &str = "journal";

/// The state of a results folder without a `run.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfinished {
    /// Its run is still going.
    Running,
    /// Its run was killed: `failmode report` rebuilds it from the journal.
    Killed,
}

/// Locks the journal's lock file in `dir` (creating it when `create`), unless another process
/// holds it; `Ok(None)` then.
pub(super) fn lock(dir: &Path, create: bool) -> std::io::Result<Option<Flock<File>>> {
    // Read-only is enough for flock, and lets a reader probe a folder it cannot write to.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .truncate(false)
        .open(dir.join("lock"))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(locked) => Ok(Some(locked)),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, errno)) => Err(errno.into()),
    }
}

/// Whether `folder` is the folder of a run that has not written its `run.json` but has a
/// whole journal: one still going, or one that was killed. `None` for any other folder.
pub fn unfinished(folder: &Path) -> Option<Unfinished> {
    let dir = folder.join(JOURNAL);
    // The journal's run.json is written last when it starts: with it, the journal is whole.
    if folder.join("run.json").exists() || !dir.join("run.json").is_file() {
        return None;
    }
    Some(match lock(&dir, false) {
        Ok(None) => Unfinished::Running,
        // Unlocked; or no lock file to take, which no running harness would lack.
        Ok(Some(_)) | Err(_) => Unfinished::Killed,
    })
}
