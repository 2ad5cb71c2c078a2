//! `--infra docker` (cargo feature `docker`): a run's Redis and Toxiproxy as containers instead
//! of child processes, through testcontainers. One Toxiproxy container, and one Redis container
//! per target, on a Docker network of the run's own, where Toxiproxy reaches each Redis at its
//! address. Every port is published on this machine's loopback only, at a port Docker picks:
//! Toxiproxy's API, one proxy listener per target (what the instances, child processes as
//! ever, connect to), and each Redis (for `INFO` and the faults inside Redis). Redis is
//! testcontainers-modules' Redis module; the modules have no Toxiproxy (0.15), so it is a
//! generic image. Both at the tags [`super::images`] pins, never the modules' defaults.
//!
//! [`Containers`] owns them all: [`Containers::remove`] is the orderly end, and dropping it
//! (an error, an interrupted start) removes them too. Each container's output goes to a log
//! file named as the child process's would be.

use std::fs::File;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use testcontainers::bollard::models::{HostConfig, PortBinding};
use testcontainers::core::logs::LogFrame;
use testcontainers::core::{ContainerPort, IntoContainerPort};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt, TestcontainersError};
use testcontainers_modules::redis::{REDIS_PORT, Redis};

use super::images::{REDIS_IMAGE, REDIS_TAG, TOXIPROXY_IMAGE, TOXIPROXY_TAG};
use super::toxiproxy::Toxiproxy;

const TOXIPROXY_API_PORT: u16 = 8474;
/// Inside the Toxiproxy container, target `i`'s proxy listens on this port + `i`: the ports
/// must be known when the container is created, to be published.
const FIRST_PROXY_PORT: u16 = 20_000;
/// The image's entrypoint answers its API within a second; a first pull happens before this.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// Where the host side of every published port is bound.
const LOOPBACK: &str = "127.0.0.1";
/// Label on every container and its value the run's network, so what a killed run left can be
/// found: `docker ps --filter label=failmode.run`.
const RUN_LABEL: &str = "failmode.run";

#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error(
        "cannot start the {what} container ({image}); --infra docker needs a Docker daemon on \
         this machine (`docker info` must answer)"
    )]
    Start {
        what: String,
        image: String,
        source: Box<TestcontainersError>,
    },
    #[error("cannot read where the {what} container {detail}")]
    Inspect {
        what: String,
        detail: String,
        source: Box<TestcontainersError>,
    },
    #[error(
        "the Docker daemon publishes ports on {host}, not on this machine: --infra docker \
         publishes on this machine's loopback only, so it needs a local daemon"
    )]
    RemoteDaemon { host: String },
    #[error(
        "Toxiproxy's container did not answer GET /version on {api} within {waited:?}; see {log}"
    )]
    NotReady {
        api: SocketAddr,
        waited: Duration,
        log: PathBuf,
    },
    #[error("cannot open the log file {path}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no proxy port was published for target {0} (the Toxiproxy container has fewer)")]
    NoListener(usize),
}

/// One target's Redis container.
#[derive(Debug)]
struct RedisContainer {
    container: ContainerAsync<Redis>,
    /// Its port published on loopback.
    addr: SocketAddr,
}

/// Where one target's proxy listens: inside the Toxiproxy container, and on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    /// What the proxy is created with (Toxiproxy's `listen`).
    pub inside: SocketAddr,
    /// What the instances connect to.
    pub host: SocketAddr,
}

/// A started Redis, as the world uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartedRedis {
    /// On loopback: `INFO` and the faults inside Redis.
    pub addr: SocketAddr,
    /// On the run's network: the proxy's upstream.
    pub upstream: SocketAddr,
}

/// The run's containers; removed when dropped.
#[derive(Debug)]
pub struct Containers {
    network: String,
    log_dir: PathBuf,
    toxiproxy: ContainerAsync<GenericImage>,
    api: SocketAddr,
    listeners: Vec<Listener>,
    redis: Vec<RedisContainer>,
}

impl Containers {
    /// Starts the Toxiproxy container, with a proxy port published for each of `targets`
    /// targets, its toxics choosing their victims from `seed`; ready when its API answers.
    pub async fn start(targets: usize, seed: i64, log_dir: &Path) -> Result<Self, ContainerError> {
        let network = network_name();
        let image = format!("{TOXIPROXY_IMAGE}:{TOXIPROXY_TAG}");
        let start_error = |source| ContainerError::Start {
            what: "Toxiproxy".into(),
            image: image.clone(),
            source,
        };
        let proxy_ports: Vec<u16> = (0..targets)
            .map(|i| FIRST_PROXY_PORT.saturating_add(i as u16))
            .collect();
        let ports: Vec<ContainerPort> = std::iter::once(TOXIPROXY_API_PORT)
            .chain(proxy_ports.iter().copied())
            .map(IntoContainerPort::tcp)
            .collect();
        let log = log_dir.join("toxiproxy-server.log");
        let mut generic = GenericImage::new(TOXIPROXY_IMAGE, TOXIPROXY_TAG);
        for port in &ports {
            generic = generic.with_exposed_port(*port);
        }
        let seed = seed.to_string();
        let container = generic
            .with_cmd([
                "-host",
                "0.0.0.0",
                "-port",
                &TOXIPROXY_API_PORT.to_string(),
                "-seed",
                &seed,
            ])
            .with_network(network.as_str())
            .with_label(RUN_LABEL, network.as_str())
            .with_host_config_modifier(loopback_only(ports))
            .with_log_consumer(log_to(&log)?)
            .start()
            .await
            .map_err(|e| start_error(Box::new(e)))?;
        ensure_local(&container).await?;
        let api = host_addr(&container, "Toxiproxy", TOXIPROXY_API_PORT).await?;
        let mut listeners = Vec::with_capacity(targets);
        for port in proxy_ports {
            listeners.push(Listener {
                inside: SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)),
                host: host_addr(&container, "Toxiproxy", port).await?,
            });
        }
        let containers = Self {
            network,
            log_dir: log_dir.to_owned(),
            toxiproxy: container,
            api,
            listeners,
            redis: Vec::new(),
        };
        containers.wait_ready(&log).await?;
        Ok(containers)
    }

    /// Until Toxiproxy's API answers through its published port (which Docker's proxy accepts
    /// connections on before Toxiproxy listens, so a connection alone proves nothing).
    async fn wait_ready(&self, log: &Path) -> Result<(), ContainerError> {
        let client = Toxiproxy::new(self.api);
        let started = Instant::now();
        while started.elapsed() < READY_TIMEOUT {
            if client.version().await.is_ok() {
                return Ok(());
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
        Err(ContainerError::NotReady {
            api: self.api,
            waited: READY_TIMEOUT,
            log: log.to_owned(),
        })
    }

    /// Toxiproxy's API on loopback.
    pub fn api_addr(&self) -> SocketAddr {
        self.api
    }

    /// Where target `index`'s proxy is to listen.
    pub fn listener(&self, index: usize) -> Result<Listener, ContainerError> {
        self.listeners
            .get(index)
            .copied()
            .ok_or(ContainerError::NoListener(index))
    }

    /// Starts an empty Redis without persistence, logging to `<log dir>/<name>.log`; ready
    /// when it says it accepts connections.
    pub async fn start_redis(&mut self, name: &str) -> Result<StartedRedis, ContainerError> {
        let what = format!("Redis ({name})");
        let log = self.log_dir.join(format!("{name}.log"));
        let container = Redis::default()
            .with_name(REDIS_IMAGE)
            .with_tag(REDIS_TAG)
            .with_cmd([
                "redis-server",
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
            ])
            .with_network(self.network.as_str())
            .with_label(RUN_LABEL, self.network.as_str())
            .with_mapped_port(0, REDIS_PORT.tcp())
            .with_host_config_modifier(loopback_only(vec![REDIS_PORT.tcp()]))
            .with_log_consumer(log_to(&log)?)
            .start()
            .await
            .map_err(|e| ContainerError::Start {
                what: what.clone(),
                image: format!("{REDIS_IMAGE}:{REDIS_TAG}"),
                source: Box::new(e),
            })?;
        let addr = host_addr(&container, &what, REDIS_PORT).await?;
        let ip =
            container
                .get_bridge_ip_address()
                .await
                .map_err(|source| ContainerError::Inspect {
                    what: what.clone(),
                    detail: format!("is on the network {}", self.network),
                    source: Box::new(source),
                })?;
        let started = StartedRedis {
            addr,
            upstream: SocketAddr::new(ip, REDIS_PORT),
        };
        self.redis.push(RedisContainer { container, addr });
        Ok(started)
    }

    /// Removes every container (Redis first, Toxiproxy last), and the network with the last.
    pub async fn remove(self) {
        for redis in self.redis {
            if let Err(e) = redis.container.rm().await {
                tracing::warn!(error = %e, redis = %redis.addr, "could not remove a Redis container");
            }
        }
        if let Err(e) = self.toxiproxy.rm().await {
            tracing::warn!(error = %e, "could not remove the Toxiproxy container");
        }
    }
}

/// A network name no other run uses at the same time: this process's id and start time, and a
/// count for the runs (batches, repeats) of one process.
fn network_name() -> String {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    format!("failmode-{}-{nanos}-{run}", std::process::id())
}

/// Publishes `ports` on this machine's loopback only, each at a port Docker picks, and nothing
/// else: testcontainers' default publishes every exposed port on all interfaces.
fn loopback_only(ports: Vec<ContainerPort>) -> impl Fn(&mut HostConfig) + Send + Sync + 'static {
    move |host: &mut HostConfig| {
        host.publish_all_ports = Some(false);
        host.port_bindings = Some(
            ports
                .iter()
                .map(|port| {
                    let binding = PortBinding {
                        host_ip: Some(LOOPBACK.to_owned()),
                        // Empty, as `docker run -p 127.0.0.1::PORT` sends it: any free port.
                        host_port: Some(String::new()),
                    };
                    (port.to_string(), Some(vec![binding]))
                })
                .collect(),
        );
    }
}

/// Appends a container's output to `path`, as a child process's is.
fn log_to(path: &Path) -> Result<impl Fn(&LogFrame) + Send + Sync + 'static, ContainerError> {
    let file = File::options()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| ContainerError::Log {
            path: path.to_owned(),
            source,
        })?;
    let file = Mutex::new(file);
    Ok(move |frame: &LogFrame| {
        let (LogFrame::StdOut(bytes) | LogFrame::StdErr(bytes)) = frame;
        if let Ok(mut file) = file.lock() {
            // A log line lost is not worth failing a run for.
            let _ = file.write_all(bytes);
        }
    })
}

/// `port` of `container` as published on loopback.
async fn host_addr<I: testcontainers::Image>(
    container: &ContainerAsync<I>,
    what: &str,
    port: u16,
) -> Result<SocketAddr, ContainerError> {
    let host_port =
        container
            .get_host_port_ipv4(port)
            .await
            .map_err(|source| ContainerError::Inspect {
                what: what.to_owned(),
                detail: format!("publishes port {port}"),
                source: Box::new(source),
            })?;
    Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, host_port)))
}

/// Refuses a daemon whose published ports are not on this machine (a remote `DOCKER_HOST`,
/// or failmode itself in a container): the instances could not reach the proxies.
async fn ensure_local<I: testcontainers::Image>(
    container: &ContainerAsync<I>,
) -> Result<(), ContainerError> {
    let host = container
        .get_host()
        .await
        .map_err(|e| ContainerError::Inspect {
            what: "Toxiproxy".into(),
            detail: "publishes its ports (the Docker host)".into(),
            source: Box::new(e),
        })?
        .to_string();
    if is_local(&host) {
        Ok(())
    } else {
        Err(ContainerError::RemoteDaemon { host })
    }
}

fn is_local(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_published_on_loopback_only_and_nothing_else() {
        let mut host = HostConfig {
            publish_all_ports: Some(true),
            ..HostConfig::default()
        };
        loopback_only(vec![8474.tcp(), 20_000.tcp()])(&mut host);
        assert_eq!(host.publish_all_ports, Some(false));
        let bindings = host.port_bindings.unwrap();
        assert_eq!(bindings.len(), 2);
        for port in ["8474/tcp", "20000/tcp"] {
            let binding = &bindings[port].as_ref().unwrap()[..];
            assert_eq!(binding.len(), 1, "{port}");
            assert_eq!(binding[0].host_ip.as_deref(), Some("127.0.0.1"), "{port}");
            assert_eq!(binding[0].host_port.as_deref(), Some(""), "{port}");
        }
    }

    #[test]
    fn only_a_daemon_publishing_on_this_machine_is_local() {
        for local in ["localhost", "127.0.0.1", "[::1]", "::1"] {
            assert!(is_local(local), "{local}");
        }
        for remote in ["172.17.0.1", "docker.example.com", "10.0.0.5"] {
            assert!(!is_local(remote), "{remote}");
        }
    }

    #[test]
    fn two_runs_never_share_a_network() {
        assert_ne!(network_name(), network_name());
    }

    #[test]
    fn a_container_log_is_appended_to_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redis-x.log");
        std::fs::write(&path, "before\n").unwrap();
        let log = log_to(&path).unwrap();
        log(&LogFrame::StdOut("ready\n".into()));
        log(&LogFrame::StdErr("warning\n".into()));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "before\nready\nwarning\n"
        );
    }
}
