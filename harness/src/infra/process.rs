//! One child process the harness owns: spawned in its own process group, its output appended
//! to a log file, the whole group killed when it is dropped (or by its watcher, `guard`, when
//! the harness dies), and readiness waits that fail fast (quoting the log) when the child dies
//! instead of answering.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use super::error::{InfraError, LogExcerpt, describe_status};
use super::guard::GroupGuard;
use super::programs::{missing_binary, resolve};

/// How many lines of a child's log an error quotes.
const LOG_TAIL_LINES: usize = 20;
/// How long `stop` waits for the kernel to reap a SIGKILLed group before giving up.
const KILL_REAP_TIMEOUT: Duration = Duration::from_secs(5);
/// Between two readiness probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(20);

/// A child process in its own process group, killed with its whole group on drop.
#[derive(Debug)]
pub struct ChildProcess {
    name: String,
    program: PathBuf,
    child: Child,
    /// Also the process group id: the child leads its own group.
    pid: i32,
    log_path: PathBuf,
    /// Where this start's output begins in the (appended) log, so errors quote only it.
    log_start: u64,
    /// Seen with `WNOWAIT`: the child is a zombie not yet reaped, so its pid, and with it
    /// the group id, cannot be reused and `killpg` still hits only our group.
    exit: Option<ExitStatus>,
    /// The child has been waited for and the group killed: nothing is left to signal, and
    /// the pid may belong to someone else by now.
    reaped: bool,
    /// Kills the group if the harness dies first; disarmed (taken) as soon as the child is
    /// reaped, since its group id may then be reused, or when this is dropped.
    guard: Option<GroupGuard>,
}

impl ChildProcess {
    /// Starts `program` (a path, or a name looked up with [`locate`]) in its own process
    /// group, appending its stdout and stderr to `log_path`.
    pub fn spawn<I, S>(
        name: &str,
        program: impl AsRef<Path>,
        args: I,
        envs: &[(String, String)],
        log_path: &Path,
    ) -> Result<Self, InfraError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::spawn_in(name, None, program, args, envs, log_path)
    }

    /// [`spawn`](Self::spawn) in the working directory `dir` (targets' relative paths, such
    /// as `node targets/node/…/server.js`, are relative to the workspace root).
    pub fn spawn_in<I, S>(
        name: &str,
        dir: Option<&Path>,
        program: impl AsRef<Path>,
        args: I,
        envs: &[(String, String)],
        log_path: &Path,
    ) -> Result<Self, InfraError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let program = resolve(program.as_ref())?;
        let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let log_error = |source| InfraError::Log {
            name: name.to_owned(),
            path: log_path.to_owned(),
            source,
        };
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .map_err(log_error)?;
        let log_start = log.seek(SeekFrom::End(0)).map_err(log_error)?;
        // Restarts append to the same log: a header tells them apart.
        let command_line = std::iter::once(program.as_os_str())
            .chain(args.iter().map(|a| a.as_os_str()))
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        writeln!(log, "--- failmode: starting {name}: {command_line}").map_err(log_error)?;
        let stderr = log.try_clone().map_err(log_error)?;

        let mut command = Command::new(&program);
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        let child = command
            .args(&args)
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(stderr))
            .process_group(0)
            .spawn()
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => missing_binary(&program.to_string_lossy()).into(),
                _ => InfraError::Spawn {
                    name: name.to_owned(),
                    program: program.clone(),
                    source,
                },
            })?;
        let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) else {
            // tokio reports no id only once the child has been reaped, which cannot have
            // happened yet; refuse rather than signal a pid we do not know.
            return Err(InfraError::Spawn {
                name: name.to_owned(),
                program,
                source: std::io::Error::other("the child has no pid"),
            });
        };
        let guard = GroupGuard::watch(pid.unsigned_abs()).map_err(|source| {
            // Unwatched, it would outlive a harness that dies: not started at all.
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            InfraError::Spawn {
                name: format!("the watcher of {name}"),
                program: "sh".into(),
                source,
            }
        })?;
        tracing::debug!(name, pid, log = %log_path.display(), "started {command_line}");
        Ok(Self {
            name: name.to_owned(),
            program,
            child,
            pid,
            log_path: log_path.to_owned(),
            log_start,
            exit: None,
            reaped: false,
            guard: Some(guard),
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last lines this start of the child wrote to its log.
    pub fn log_tail(&self) -> String {
        read_tail(&self.log_path, self.log_start, LOG_TAIL_LINES)
    }

    fn log_excerpt(&self) -> Box<LogExcerpt> {
        Box::new(LogExcerpt {
            path: self.log_path.clone(),
            tail: self.log_tail(),
        })
    }

    /// The child's exit status if it has exited, without blocking; `None` while it runs.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() && !self.reaped {
            match exit_of(self.pid()) {
                Exit::Running => {}
                Exit::Exited(status) => self.exit = Some(status),
                // ECHILD only if someone else reaped it, which `try_wait` still tells us about.
                Exit::Unknown => {
                    if let Ok(Some(status)) = self.child.try_wait() {
                        self.exit = Some(status);
                        self.reaped = true;
                        self.guard = None;
                    }
                }
            }
        }
        self.exit
    }

    /// Sends `signal` to the child's whole process group (SIGSTOP to hang it, SIGCONT to
    /// resume it).
    pub fn signal(&self, signal: Signal) -> Result<(), InfraError> {
        if self.reaped {
            return Err(self.signal_error(signal, Errno::ESRCH));
        }
        killpg(Pid::from_raw(self.pid), signal).map_err(|e| self.signal_error(signal, e))
    }

    fn signal_error(&self, signal: Signal, source: Errno) -> InfraError {
        InfraError::Signal {
            name: self.name.clone(),
            pgid: self.pid,
            signal,
            source,
        }
    }

    /// SIGTERM to the group, up to `grace` for the child to exit, then SIGKILL; reaps it.
    /// Returns how the child exited.
    pub async fn stop(&mut self, grace: Duration) -> Result<ExitStatus, InfraError> {
        if self.reaped
            && let Some(status) = self.exit
        {
            return Ok(status);
        }
        if self.try_exit().is_none() {
            // A stopped process keeps SIGTERM pending until it is continued.
            let _ = killpg(Pid::from_raw(self.pid), Signal::SIGTERM);
            let _ = killpg(Pid::from_raw(self.pid), Signal::SIGCONT);
            if let Ok(waited) = tokio::time::timeout(grace, self.child.wait()).await {
                // The group outlives its leader if the leader left children behind that
                // ignore SIGTERM. Pids are handed out in sequence, so the group id cannot
                // have been reused in the instant since the reap.
                let _ = killpg(Pid::from_raw(self.pid), Signal::SIGKILL);
                return self.reaped_with(waited);
            }
        }
        self.kill().await
    }

    /// SIGKILL to the whole group, no grace (a crash, an OOM kill), and reap.
    pub async fn kill(&mut self) -> Result<ExitStatus, InfraError> {
        if self.reaped
            && let Some(status) = self.exit
        {
            return Ok(status);
        }
        let _ = killpg(Pid::from_raw(self.pid), Signal::SIGKILL);
        match tokio::time::timeout(KILL_REAP_TIMEOUT, self.child.wait()).await {
            Ok(waited) => self.reaped_with(waited),
            Err(_) => Err(InfraError::Unkillable {
                name: self.name.clone(),
                pid: self.pid,
                waited: KILL_REAP_TIMEOUT,
            }),
        }
    }

    fn reaped_with(
        &mut self,
        waited: std::io::Result<ExitStatus>,
    ) -> Result<ExitStatus, InfraError> {
        let status = waited.map_err(|source| InfraError::Wait {
            name: self.name.clone(),
            pid: self.pid,
            source,
        })?;
        self.reaped = true;
        self.guard = None;
        self.exit = Some(status);
        tracing::debug!(name = %self.name, pid = self.pid, "exited with {}", describe_status(status));
        Ok(status)
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if !self.reaped {
            // Synchronous on purpose: drop may run while the runtime is shutting down.
            // Until tokio reaps the leader (its orphan queue does, after this), the group
            // id cannot be reused, so this reaches our group only.
            let _ = killpg(Pid::from_raw(self.pid), Signal::SIGKILL);
        }
    }
}

/// A port on 127.0.0.1 that was free a moment ago. Another process can take it before the
/// caller binds it: callers retry on a new port when that happens.
///
/// Not one of the last [`RECENT_PORTS`] this process handed out: the kernel may give a port
/// it just got back to the next caller, and two children started at once (tests run
/// concurrently) would then race for it; the loser's readiness probe could be answered by
/// the winner.
pub fn free_port() -> Result<u16, InfraError> {
    static RECENT: std::sync::Mutex<std::collections::VecDeque<u16>> =
        std::sync::Mutex::new(std::collections::VecDeque::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .map_err(InfraError::NoFreePort)?;
        let mut recent = RECENT.lock().unwrap_or_else(|e| e.into_inner());
        if !recent.contains(&port) {
            if recent.len() == RECENT_PORTS {
                recent.pop_front();
            }
            recent.push_back(port);
            return Ok(port);
        }
    }
}

/// Far more than a run starts at once, far fewer than the kernel's ephemeral range.
const RECENT_PORTS: usize = 4096;

/// Waits until `addr` accepts a TCP connection, failing fast if `child` exits first.
pub async fn wait_for_tcp(
    addr: SocketAddr,
    timeout: Duration,
    child: &mut ChildProcess,
) -> Result<(), InfraError> {
    wait_until(
        child,
        addr,
        "accepting connections",
        timeout,
        || async move { tokio::net::TcpStream::connect(addr).await.is_ok() },
    )
    .await
}

/// Calls `probe` until it answers true, up to `timeout`; fails fast, quoting the child's log,
/// if the child exits first. A child that failed to bind its port gives `PortInUse`, so the
/// caller can retry on another one.
pub(crate) async fn wait_until<F, Fut>(
    child: &mut ChildProcess,
    addr: SocketAddr,
    what: &'static str,
    timeout: Duration,
    mut probe: F,
) -> Result<(), InfraError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_exit() {
            let tail = child.log_tail();
            if tail.to_ascii_lowercase().contains("address already in use") {
                return Err(InfraError::PortInUse {
                    name: child.name.clone(),
                    addr,
                    log: child.log_path.clone(),
                });
            }
            return Err(InfraError::ExitedEarly {
                name: child.name.clone(),
                addr,
                what,
                status,
                log: child.log_excerpt(),
            });
        }
        // A probe that hangs must not outlive the deadline.
        if let Ok(true) = tokio::time::timeout_at(deadline, probe()).await {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(InfraError::NotReady {
                name: child.name.clone(),
                addr,
                what,
                waited: started.elapsed(),
                log: child.log_excerpt(),
            });
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

/// What became of a child of this process, as far as the kernel still knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Running,
    Exited(ExitStatus),
    /// Not (or no longer) a child we can wait for: reaped already, or never ours.
    Unknown,
}

/// Whether the child `pid` has exited and how, without reaping it (a zombie has exited), so
/// that a watcher holding only the pid can ask while the owner still reaps it later. The
/// kernel's wait status, not /proc, so a failure to read /proc cannot pass for a death.
pub fn exit_of(pid: u32) -> Exit {
    let Ok(raw) = i32::try_from(pid) else {
        return Exit::Unknown;
    };
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(Pid::from_raw(raw)), flags) {
        Ok(WaitStatus::Exited(_, code)) => Exit::Exited(ExitStatus::from_raw(code << 8)),
        Ok(WaitStatus::Signaled(_, signal, core)) => {
            let core = if core { 0x80 } else { 0 };
            Exit::Exited(ExitStatus::from_raw(signal as i32 | core))
        }
        // Still running, stopped (a stalled Redis) or continued.
        Ok(_) => Exit::Running,
        Err(_) => Exit::Unknown,
    }
}

/// The last `lines` lines of a log file, for a message that must show why a child died.
pub fn last_lines(path: &Path, lines: usize) -> String {
    read_tail(path, 0, lines)
}

/// The last `lines` lines of `path` from byte `from` on; reads at most the last 64 KiB.
fn read_tail(path: &Path, from: u64, lines: usize) -> String {
    const MAX_BYTES: u64 = 64 * 1024;
    let read = || -> std::io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(from.max(len.saturating_sub(MAX_BYTES))))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            let tail = all[all.len().saturating_sub(lines)..].join("\n");
            if tail.trim().is_empty() {
                "(the log is empty)".to_owned()
            } else {
                tail
            }
        }
        Err(e) => format!("(cannot read the log: {e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_tail_keeps_only_the_last_lines_written_since_the_start_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        std::fs::write(&path, "old run\n").unwrap();
        let start = std::fs::metadata(&path).unwrap().len();
        let body: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        let tail = read_tail(&path, start, 3);
        assert_eq!(tail, "line 28\nline 29\nline 30");
        assert!(!read_tail(&path, start, 100).contains("old run"));
    }

    #[test]
    fn describe_status_names_codes_and_signals() {
        assert_eq!(describe_status(ExitStatus::from_raw(1 << 8)), "status 1");
        assert_eq!(
            describe_status(ExitStatus::from_raw(9)),
            "signal 9 (SIGKILL)"
        );
    }
}
