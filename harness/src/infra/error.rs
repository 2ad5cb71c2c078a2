//! What can go wrong starting, probing or stopping the processes a run's infrastructure runs
//! as, and the log excerpt its errors quote.

use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::Signal;

impl From<super::programs::Missing> for InfraError {
    fn from(m: super::programs::Missing) -> Self {
        Self::MissingBinary {
            program: m.program,
            hint: m.hint,
        }
    }
}

/// Everything that can go wrong starting, probing or stopping infrastructure processes.
#[derive(Debug, thiserror::Error)]
pub enum InfraError {
    #[error(
        "{program} not found on PATH or in failmode's tools folders ($FAILMODE_TOOLS/bin, the \
         checkout's .tools/bin, ~/.cache/failmode/bin or $XDG_CACHE_HOME/failmode/bin); {hint}"
    )]
    MissingBinary { program: String, hint: String },

    #[error("cannot start {name} ({program}): {source}")]
    Spawn {
        name: String,
        program: PathBuf,
        source: std::io::Error,
    },

    #[error("cannot open the log file {path} for {name}: {source}")]
    Log {
        name: String,
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("cannot write the configuration file {path} for {name}: {source}")]
    Config {
        name: String,
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("no free loopback port: {0}")]
    NoFreePort(std::io::Error),

    #[error("port {addr} is in use: {name} could not bind it; see {log}")]
    PortInUse {
        name: String,
        addr: SocketAddr,
        log: PathBuf,
    },

    #[error(
        "{name} exited with {} before {what} on {addr}; see {log}",
        describe_status(*.status)
    )]
    ExitedEarly {
        name: String,
        addr: SocketAddr,
        /// What readiness means for this process, e.g. "answering PING".
        what: &'static str,
        status: ExitStatus,
        log: Box<LogExcerpt>,
    },

    #[error("{name} was not {what} on {addr} after {waited:?}; see {log}")]
    NotReady {
        name: String,
        addr: SocketAddr,
        what: &'static str,
        waited: Duration,
        log: Box<LogExcerpt>,
    },

    #[error("cannot send {signal} to {name} (process group {pgid}): {source}")]
    Signal {
        name: String,
        pgid: i32,
        signal: Signal,
        source: Errno,
    },

    #[error("waiting for {name} (pid {pid}) to exit failed: {source}")]
    Wait {
        name: String,
        pid: i32,
        source: std::io::Error,
    },

    #[error("{name} (pid {pid}) did not exit within {waited:?} of SIGKILL")]
    Unkillable {
        name: String,
        pid: i32,
        waited: Duration,
    },

    #[error("cannot build an HTTP client: {0}")]
    HttpClient(String),

    #[error("{command} on {name} at {addr} failed: {detail}")]
    Command {
        name: String,
        addr: SocketAddr,
        command: String,
        detail: String,
    },
}

/// A child's log file and its last lines, quoted in errors so the cause is on screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogExcerpt {
    pub path: PathBuf,
    pub tail: String,
}

impl std::fmt::Display for LogExcerpt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:\n{}", self.path.display(), self.tail)
    }
}

/// "status 1", or "signal 9 (SIGKILL)".
pub fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("status {code}"),
        (None, Some(signal)) => match Signal::try_from(signal) {
            Ok(named) => format!("signal {signal} ({named})"),
            Err(_) => format!("signal {signal}"),
        },
        (None, None) => status.to_string(),
    }
}
