//! Children die with the harness, however it dies. Each process group the harness starts (an
//! instance, a Redis, Toxiproxy, a build) gets a watcher: a small `sh` in a group of its own,
//! blocked reading a pipe whose only writer is the harness. When the harness is gone — SIGKILL,
//! an OOM kill, a cancelled CI job, a second Ctrl-C's immediate exit — the kernel closes the
//! pipe, the read returns end-of-file and the watcher SIGKILLs the whole group. When the
//! harness stops a group itself it disarms the watcher with one line, and the watcher exits.
//!
//! Why a watcher and not a parent-death signal: `PR_SET_PDEATHSIG` has to be set between fork
//! and exec (`unsafe` code of our own) and fires when the spawning *thread* ends, and tokio's
//! blocking threads come and go; a pipe closes only when the process holding it is gone. Why
//! outside the group: a group stopped by SIGSTOP (a hung Redis) would stop its watcher too.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::process::Stdio;

use tokio::process::{Child, Command};

/// Ignores the signals a terminal or a stop sends (it dies by SIGKILL, or by its own exit); a
/// line read means "disarmed", end-of-file means the harness died.
const WATCHER: &str = "trap '' HUP INT QUIT TERM; read _ || kill -KILL -\"$1\"";

/// The watcher of one process group; dropping it disarms the watcher.
#[derive(Debug)]
pub struct GroupGuard {
    /// Kept so tokio reaps the watcher once it exits.
    _watcher: Child,
    /// The harness's end of the watcher's stdin.
    pipe: Option<OwnedFd>,
}

impl GroupGuard {
    /// Starts the watcher of process group `pgid`. Must be called inside a tokio runtime.
    pub fn watch(pgid: u32) -> std::io::Result<Self> {
        let mut watcher = Command::new("sh")
            .args(["-c", WATCHER, "failmode-guard", &pgid.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let pipe = watcher
            .stdin
            .take()
            .map(|stdin| stdin.into_owned_fd())
            .transpose()?;
        Ok(Self {
            _watcher: watcher,
            pipe,
        })
    }

    /// Tells the watcher its group needs no watching any more: it exits.
    fn disarm(&mut self) {
        if let Some(pipe) = self.pipe.take() {
            let _ = std::fs::File::from(pipe).write_all(b"\n");
        }
    }
}

impl Drop for GroupGuard {
    /// Only its owner drops a guard, after it has stopped the group (or is about to kill it):
    /// the watcher has nothing left to do. Synchronous on purpose, as drops run during a
    /// runtime's shutdown too; a pipe's first line never blocks.
    fn drop(&mut self) {
        self.disarm();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A process in a group of its own that would outlive the test by far.
    fn sleeper_group() -> tokio::process::Child {
        Command::new("sleep")
            .arg("60")
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    }

    #[tokio::test]
    async fn a_group_whose_harness_end_closes_without_a_word_is_killed() {
        let mut group = sleeper_group();
        let mut guard = GroupGuard::watch(group.id().unwrap()).unwrap();
        // What the kernel does when the harness dies: its end closes, nothing written.
        drop(guard.pipe.take());
        let status = tokio::time::timeout(Duration::from_secs(5), group.wait())
            .await
            .expect("the watcher kills the group once the harness's end is closed")
            .unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
    }

    #[tokio::test]
    async fn a_disarmed_watcher_exits_and_leaves_the_group_to_its_owner() {
        let mut group = sleeper_group();
        let mut guard = GroupGuard::watch(group.id().unwrap()).unwrap();
        guard.disarm();
        let watcher = tokio::time::timeout(Duration::from_secs(5), guard._watcher.wait())
            .await
            .expect("a disarmed watcher exits")
            .unwrap();
        assert!(watcher.success());
        assert!(group.try_wait().unwrap().is_none(), "it killed nothing");
    }
}
