//! What a run can fail with, each refusal or failure named once: the CLI prints the message
//! and its sources, and maps the error to an exit code (`exit.rs`).

use std::path::PathBuf;
use std::time::Duration;

use crate::infra::InfraError;
use crate::infra::toxiproxy::ToxiproxyError;
use crate::load;
use crate::results;
use crate::scenario::ScenarioError;
use crate::targets::{ManifestError, TargetError};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// Boxed: a target's start failure carries its log's tail, which every `Result` of the
    /// run's chapters would otherwise carry the size of.
    #[error(transparent)]
    Target(Box<TargetError>),
    #[error(transparent)]
    Infra(#[from] InfraError),
    // Transparent: its message names Toxiproxy and its address already, and the CLI prints
    // an error's sources after it.
    #[error(transparent)]
    Toxiproxy(#[from] ToxiproxyError),
    #[error(
        "[redis] topology = \"sentinel\" starts failmode's own redis-servers and sentinels: \
         not with --infra docker, and not attached (a deployment's sentinels are its own)"
    )]
    SentinelNotLocal,
    #[error(
        "phase {phase:?} fails the primary over in {length_s:.1} s{}: the sentinels need at \
         least {min_s} s to call it down and promote its replica; lengthen the phase{}",
        .scale.map(|s| format!(" at --duration-scale {s}")).unwrap_or_default(),
        if .scale.is_some() { " or run at a larger --duration-scale" } else { "" }
    )]
    FailoverTooShort {
        phase: String,
        length_s: f64,
        min_s: u64,
        /// The run's `--duration-scale`, when it shortened the phase.
        scale: Option<f64>,
    },
    #[error("{target}'s Sentinel topology did not come up: {source}")]
    Sentinel {
        target: String,
        source: crate::infra::redis_native::RedisCommandError,
    },
    // Its source is not repeated here: the CLI prints an error's sources after it.
    #[error("cannot write the results folder {path}")]
    Results {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the load generator failed")]
    Load(#[from] load::LoadError),
    /// A plan the load generator would refuse, found before anything starts.
    #[error(transparent)]
    Unsendable(load::LoadError),
    #[error("interrupted before any load was sent; everything started was stopped (logs in {0})")]
    InterruptedBeforeLoad(PathBuf),
    #[error("cannot join the batches' results")]
    Join(#[from] results::batches::JoinError),
    #[error(transparent)]
    Deployment(#[from] crate::deployment::DeploymentError),
    #[error(transparent)]
    MetricsListen(#[from] super::live_metrics::ListenError),
    #[error("{0}")]
    Abort(String),
    #[error(
        "phase {phase:?}'s fault `{fault}` cannot be played on an attached deployment: only \
         faults through its Toxiproxy (down, hang, flap, toxics) and client-pause are; \
         the others stop, kill or restart failmode's own processes or write to the Redis"
    )]
    NotAttachable { phase: String, fault: String },
    #[error(transparent)]
    DockerNotBuilt(#[from] crate::infra::DockerNotBuilt),
    #[error(
        "phase {phase:?}'s fault `{fault}` cannot be played with --infra docker: it signals \
         failmode's own redis-server process, which is a container's there; run it with \
         --infra local"
    )]
    NotInContainers { phase: String, fault: String },
    #[cfg(feature = "docker")]
    #[error(transparent)]
    Containers(#[from] crate::infra::containers::ContainerError),
    #[error(
        "attached proxy {proxy:?} {problem}: run `failmode faults reset --attach {deployment}` \
         (or fix it) first"
    )]
    ProxyNotClean {
        proxy: String,
        problem: String,
        deployment: PathBuf,
    },
    #[error(
        "the start time {at} passed {late:.1?} ago (this machine's clock): give every worker \
         the same --start-at, far enough ahead for all of them to be ready"
    )]
    StartPassed { at: String, late: Duration },
}

impl From<TargetError> for RunError {
    fn from(e: TargetError) -> Self {
        Self::Target(Box::new(e))
    }
}
