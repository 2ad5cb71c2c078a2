//! Targets: manifests, building them, and starting, probing and stopping their instances.

pub mod fleet;
pub mod manifest;
pub mod warm_up;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::infra::guard::GroupGuard;
use crate::infra::{ChildProcess, InfraError, free_port};
pub use fleet::{Fleet, FleetError, FleetLaunch};
pub use manifest::{ManifestError, SentinelEndpoint, TargetDef};

/// The client of failmode's own requests to instances (readiness, warm-up, metrics reads):
/// loopback only, never through a proxy the environment names (`HTTP_PROXY`), as the load's.
/// Its idle connections close as the load's do: with reqwest's 90 s the warm-up's stayed open
/// on both sides well into every run (the soak counted them as fds that later vanished), and
/// a peer that closes idle connections sooner (Node, at 5 s) could close one under the next
/// request.
pub fn loopback_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .pool_idle_timeout(crate::load::IDLE_TIMEOUT)
        .build()
        .unwrap_or_default()
}

/// How many times a start is retried on a fresh port when the probed one was taken meanwhile.
const PORT_ATTEMPTS: usize = 3;

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("building target {target} failed ({command}): {detail}")]
    Build {
        target: String,
        command: String,
        detail: String,
    },
    // Not a `source`: the message quotes it already, and the CLI prints an error's sources
    // after it (the hint on how to get a missing program would be said twice).
    #[error("target {target}: {error}")]
    Infra { target: String, error: InfraError },
    #[error(
        "target {target} instance {index} did not become ready at http://{addr}{path} within {timeout:?} ({}); see {log}:\n{tail}",
        probe.describe(*addr, listening)
    )]
    NotReady {
        target: String,
        index: usize,
        addr: SocketAddr,
        path: String,
        timeout: Duration,
        /// What the last readiness probe saw.
        probe: ReadyProbe,
        /// Where the instance's process group listens instead (Linux; empty elsewhere).
        listening: Vec<SocketAddr>,
        log: PathBuf,
        tail: String,
    },
    #[error(
        "target {target} instance {index} exited ({status}) before it was ready; see {log}:\n{tail}"
    )]
    Exited {
        target: String,
        index: usize,
        status: String,
        log: PathBuf,
        tail: String,
    },
}

/// Runs each distinct build command of `defs` once, from the target's own directory (the root
/// of the project or checkout its manifest was found in), else from `root`.
pub async fn build(defs: &[TargetDef], root: &Path) -> Result<(), TargetError> {
    let mut done: Vec<(&Vec<String>, &Path)> = Vec::new();
    for def in defs {
        let Some(command) = &def.build else { continue };
        let dir = def.dir.as_deref().unwrap_or(root);
        if done.contains(&(command, dir)) {
            continue;
        }
        done.push((command, dir));
        let text = command.join(" ");
        tracing::info!(target = %def.name, "building: {text}");
        let failed = |e: std::io::Error| TargetError::Build {
            target: def.name.clone(),
            command: text.clone(),
            detail: e.to_string(),
        };
        // In a process group of its own, stopped with everything it started (npm's node, a
        // compiler) if the build is abandoned: Ctrl-C, or a check or run dropped mid-build.
        let child = tokio::process::Command::new(&command[0])
            .args(&command[1..])
            .current_dir(dir)
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(failed)?;
        let mut group = BuildGroup {
            pid: child.id(),
            _guard: None,
        };
        // The guard after the group is ours to kill: a watcher that fails to start still
        // leaves a group that dies with this build.
        group._guard = child
            .id()
            .map(GroupGuard::watch)
            .transpose()
            .map_err(failed)?;
        let output = child.wait_with_output().await.map_err(failed)?;
        group.done();
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
            return Err(TargetError::Build {
                target: def.name.clone(),
                command: text,
                detail: format!(
                    "{}\n{}",
                    output.status,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ),
            });
        }
    }
    Ok(())
}

/// A build's process group, killed when dropped before the build ended, or by its watcher if
/// the harness dies mid-build.
struct BuildGroup {
    pid: Option<u32>,
    _guard: Option<GroupGuard>,
}

impl BuildGroup {
    fn done(mut self) {
        self.pid = None;
    }
}

impl Drop for BuildGroup {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
            // The leader is not reaped yet (its future was dropped), so the group id is ours.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// What the last readiness probe of an instance that never became ready saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadyProbe {
    /// Nothing accepted a connection on its `{port}`.
    Refused,
    /// A connection, but no answer within the probe's timeout.
    Silent,
    /// An answer other than 2xx.
    Status(u16),
    /// Something else went wrong (the HTTP client's words).
    Failed(String),
}

impl ReadyProbe {
    fn of(result: &Result<reqwest::Response, reqwest::Error>) -> Self {
        match result {
            Ok(r) => Self::Status(r.status().as_u16()),
            Err(e) if e.is_connect() => Self::Refused,
            Err(e) if e.is_timeout() => Self::Silent,
            Err(e) => Self::Failed(e.to_string()),
        }
    }

    /// In words, for an instance expected at `addr` whose process group listens on
    /// `listening`.
    pub fn describe(&self, addr: SocketAddr, listening: &[SocketAddr]) -> String {
        let elsewhere: Vec<String> = listening
            .iter()
            .filter(|a| a.port() != addr.port())
            .map(ToString::to_string)
            .collect();
        match self {
            Self::Refused if elsewhere.is_empty() => {
                format!("nothing listens on port {}", addr.port())
            }
            Self::Refused => format!(
                "nothing listens on port {}; the process listens on {}",
                addr.port(),
                elsewhere.join(", ")
            ),
            Self::Silent => "it accepts connections but did not answer".to_owned(),
            Self::Status(code) => format!("the last probe was answered {code}"),
            Self::Failed(why) => format!("the last probe failed: {why}"),
        }
    }
}

/// What an instance is started with.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    /// Where a target without a directory of its own ([`TargetDef::dir`]) starts.
    pub root: &'a Path,
    pub log_dir: &'a Path,
    pub redis_url: &'a str,
    pub sentinel: Option<&'a manifest::SentinelEndpoint>,
    pub instance_count: u32,
    pub limit: f64,
    pub window: Duration,
}

/// One running instance of a target.
#[derive(Debug)]
pub struct Instance {
    pub index: usize,
    pub addr: SocketAddr,
    pub process: ChildProcess,
}

/// Starts instance `index` of `def` and waits for its readiness path to answer 2xx.
pub async fn start_instance(
    def: &TargetDef,
    index: usize,
    launch: &Launch<'_>,
    http: &reqwest::Client,
) -> Result<Instance, TargetError> {
    let infra = |error| TargetError::Infra {
        target: def.name.clone(),
        error,
    };
    let mut last = None;
    for _ in 0..PORT_ATTEMPTS {
        let port = free_port().map_err(infra)?;
        let slot = manifest::InstanceSlot {
            target: &def.name,
            index,
            count: launch.instance_count,
            port,
            redis_url: launch.redis_url,
            sentinel: launch.sentinel,
            limit: launch.limit,
            window: launch.window,
        };
        let values = slot.values();
        let command: Vec<String> = def
            .command
            .iter()
            .map(|c| manifest::expand(c, &values))
            .collect();
        let dir = def.dir.as_deref().unwrap_or(launch.root);
        let program = if command[0].contains('/') && Path::new(&command[0]).is_relative() {
            dir.join(&command[0])
        } else {
            PathBuf::from(&command[0])
        };
        let env: Vec<(String, String)> = def.env_for(&slot).into_iter().collect();
        let log = launch.log_dir.join(format!("{}-{index}.log", def.name));
        let name = format!("{} instance {index}", def.name);
        let process = ChildProcess::spawn_in(&name, Some(dir), &program, &command[1..], &env, &log)
            .map_err(infra)?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut instance = Instance {
            index,
            addr,
            process,
        };
        match wait_ready(def, &mut instance, http).await {
            Ok(()) => return Ok(instance),
            // Someone took the port between the probe and the bind: try another.
            Err(e @ TargetError::Exited { .. })
                if instance.process.log_tail().contains("in use") =>
            {
                last = Some(e);
            }
            Err(e) => {
                let _ = instance.process.stop(Duration::from_secs(1)).await;
                return Err(e);
            }
        }
    }
    Err(last.unwrap_or_else(|| TargetError::Build {
        target: def.name.clone(),
        command: String::new(),
        detail: "no free port".into(),
    }))
}

async fn wait_ready(
    def: &TargetDef,
    instance: &mut Instance,
    http: &reqwest::Client,
) -> Result<(), TargetError> {
    let url = format!("http://{}{}", instance.addr, def.ready_path);
    let deadline = Instant::now() + def.ready_timeout;
    loop {
        if let Some(status) = instance.process.try_exit() {
            return Err(TargetError::Exited {
                target: def.name.clone(),
                index: instance.index,
                status: status.to_string(),
                log: instance.process.log_path().to_owned(),
                tail: instance.process.log_tail(),
            });
        }
        let probe = http
            .get(&url)
            .timeout(Duration::from_millis(500))
            .send()
            .await;
        if probe.as_ref().is_ok_and(|r| r.status().is_success()) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(TargetError::NotReady {
                target: def.name.clone(),
                index: instance.index,
                addr: instance.addr,
                path: def.ready_path.clone(),
                timeout: def.ready_timeout,
                probe: ReadyProbe::of(&probe),
                listening: crate::infra::sockets::listening_addrs(instance.process.pid()),
                log: instance.process.log_path().to_owned(),
                tail: instance.process.log_tail(),
            });
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Sums a counter over one instance's Prometheus/OpenMetrics text (every label set).
pub fn sum_counter(exposition: &str, name: &str) -> f64 {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_is_summed_over_its_label_sets_only() {
        let text = "# TYPE failmode_fallback counter\n\
                    failmode_fallback_total{route=\"api\",reason=\"timeout\"} 5\n\
                    failmode_fallback_total{route=\"api\",reason=\"breaker_open\"} 12\n\
                    failmode_fallback_total_other 100\n\
                    failmode_fallback_created 1.7e9\n";
        assert_eq!(sum_counter(text, "failmode_fallback_total"), 17.0);
    }
}
