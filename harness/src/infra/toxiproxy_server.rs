//! The `toxiproxy-server` child process (Shopify's Toxiproxy): its API on a free loopback
//! port, ready when `GET /version` answers. Proxies and toxics are driven through
//! [`crate::infra::toxiproxy`].

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use super::InfraError;
use super::process::{ChildProcess, free_port, wait_until};
use super::programs::{locate, missing_binary};

const PROGRAM: &str = "toxiproxy-server";
const NAME: &str = "toxiproxy-server";
const START_ATTEMPTS: usize = 5;
const READY_TIMEOUT: Duration = Duration::from_secs(10);
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A `toxiproxy-server` owned by the harness; killed (with its process group) on drop.
#[derive(Debug)]
pub struct ToxiproxyServer {
    api: SocketAddr,
    child: ChildProcess,
}

impl ToxiproxyServer {
    /// Starts toxiproxy-server with its API on a free loopback port, logging to
    /// `<log_dir>/toxiproxy-server.log`.
    pub async fn start(log_dir: &Path) -> Result<Self, InfraError> {
        Self::start_with(log_dir, None).await
    }

    /// As [`start`](Self::start), with toxics whose `toxicity` is below 1 choosing their
    /// victim connections from `seed`, so a run can be repeated.
    pub async fn start_seeded(log_dir: &Path, seed: i64) -> Result<Self, InfraError> {
        Self::start_with(log_dir, Some(seed)).await
    }

    async fn start_with(log_dir: &Path, seed: Option<i64>) -> Result<Self, InfraError> {
        let Some(program) = locate(PROGRAM) else {
            return Err(missing_binary(PROGRAM).into());
        };
        let log = log_dir.join(format!("{NAME}.log"));
        let client = probe_client()?;
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            let api = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()?));
            let mut args = vec![
                "-host".to_owned(),
                api.ip().to_string(),
                "-port".to_owned(),
                api.port().to_string(),
            ];
            if let Some(seed) = seed {
                args.extend(["-seed".to_owned(), seed.to_string()]);
            }
            let mut child = ChildProcess::spawn(NAME, &program, &args, &[], &log)?;
            let url = format!("http://{api}/version");
            let ready = wait_until(
                &mut child,
                api,
                "answering GET /version",
                READY_TIMEOUT,
                || {
                    let request = client.get(&url).send();
                    async move { request.await.is_ok_and(|r| r.status().is_success()) }
                },
            )
            .await;
            match ready {
                Ok(()) => return Ok(Self { api, child }),
                Err(e @ InfraError::PortInUse { .. }) => {
                    tracing::debug!("{e}; retrying on another port");
                    last_error = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            InfraError::NoFreePort(std::io::Error::other("no start attempt was made"))
        }))
    }

    /// Where the HTTP API listens; give it to [`crate::infra::toxiproxy::Toxiproxy::new`].
    pub fn api_addr(&self) -> SocketAddr {
        self.api
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    pub fn log_path(&self) -> &Path {
        self.child.log_path()
    }

    /// SIGTERM (SIGKILL after a grace period) and reap. Every proxy goes with it.
    pub async fn stop(&mut self) -> Result<(), InfraError> {
        self.child.stop(STOP_GRACE).await.map(drop)
    }
}

fn probe_client() -> Result<reqwest::Client, InfraError> {
    reqwest::Client::builder()
        // Loopback only: an HTTP_PROXY in the environment must not capture the probe.
        .no_proxy()
        .timeout(PROBE_TIMEOUT)
        .build()
        .map_err(|e| InfraError::HttpClient(e.to_string()))
}
