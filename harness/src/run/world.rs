//! The world one run builds, per target and isolated from the others: its own redis-server,
//! its own Toxiproxy proxy in front of it, and N instances whose `REDIS_URL` points at the
//! proxy. One Toxiproxy server serves every proxy.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;

use crate::faults::timeline::SharedRedis;
use crate::faults::toxiproxy::{Toxiproxy, ToxiproxyError};
use crate::infra::{RedisServer, ToxiproxyServer};
use crate::scenario::Scenario;
use crate::targets::{Fleet, FleetLaunch, TargetDef};

use super::RunError;

/// Requests each instance answers before the load starts, unmeasured, from a caller no tenant
/// uses: the first requests pay for JIT compilation, lazy imports and script loads, which a
/// long-running service never shows its callers (measured here: 15 of express-rate-limit's
/// first 145 requests timed out their 20 ms Redis budget without it).
const WARM_UP_REQUESTS: usize = 20;
const WARM_UP_CALLER: &str = "failmode-warm-up";

async fn warm_up(def: &TargetDef, fleet: &Fleet, http: &reqwest::Client) {
    join_all(fleet.running().into_iter().map(|i| async move {
        let url = format!("http://{}{}", i.addr, def.request_path);
        for _ in 0..WARM_UP_REQUESTS {
            // Not measured: whatever the answer, the next request is the point.
            let _ = http
                .get(&url)
                .header(def.caller_header.as_str(), WARM_UP_CALLER)
                .timeout(Duration::from_secs(2))
                .send()
                .await;
        }
    }))
    .await;
}

/// One target's slice of the world.
#[derive(Debug)]
pub struct TargetWorld {
    pub def: TargetDef,
    /// Shared with the fault player: `redis-restart` replaces its process.
    pub redis: SharedRedis,
    /// The proxy's name in Toxiproxy (the target's name).
    pub proxy: String,
    pub proxy_addr: SocketAddr,
    /// Its instances; `scale` and `kill-instance` change them.
    pub fleet: Arc<Fleet>,
}

/// Everything started for a run. Dropping it kills every child's process group; `stop` is
/// the orderly way.
#[derive(Debug)]
pub struct World {
    pub toxiproxy_server: ToxiproxyServer,
    pub toxiproxy: Toxiproxy,
    pub targets: Vec<TargetWorld>,
}

impl World {
    /// Starts Toxiproxy, then each target's Redis, proxy and instances.
    pub async fn start(
        scenario: &Scenario,
        defs: &[TargetDef],
        root: &Path,
        log_dir: &Path,
        mut on_progress: impl FnMut(&str),
    ) -> Result<Self, RunError> {
        on_progress("starting toxiproxy-server");
        let toxiproxy_server = ToxiproxyServer::start_seeded(log_dir, scenario.seed as i64).await?;
        let toxiproxy = Toxiproxy::new(toxiproxy_server.api_addr());
        let mut world = Self {
            toxiproxy_server,
            toxiproxy,
            targets: Vec::new(),
        };
        let http = reqwest::Client::new();
        for def in defs {
            let count = scenario
                .targets
                .iter()
                .find(|t| t.name == def.name)
                .and_then(|t| t.instances)
                .unwrap_or(def.default_instances);
            on_progress(&format!("starting {} ({count} instances)", def.name));
            let redis = RedisServer::start(&format!("redis-{}", def.name), log_dir).await?;
            // Port 0: Toxiproxy binds a free port itself and reports it, so nothing can take
            // it between a probe and the bind.
            let proxy = world
                .toxiproxy
                .create_proxy(
                    &def.name,
                    SocketAddr::from(([127, 0, 0, 1], 0)),
                    redis.addr(),
                )
                .await?;
            let proxy_addr = proxy.listen_addr().ok_or_else(|| {
                RunError::Toxiproxy(ToxiproxyError::Invalid {
                    op: format!("create proxy {}", def.name),
                    reason: format!("it listens on {:?}, not an address", proxy.listen),
                })
            })?;
            let launch = FleetLaunch {
                root: root.to_owned(),
                log_dir: log_dir.to_owned(),
                redis_url: format!("redis://{proxy_addr}"),
                limit: scenario.limit,
                window: scenario.window,
            };
            let (fleet, started) = Fleet::start(def, launch, count, &http).await;
            let fleet = Arc::new(fleet);
            // Kept even when an instance failed to start, so the world stops the others.
            world.targets.push(TargetWorld {
                def: def.clone(),
                redis: Arc::new(tokio::sync::Mutex::new(redis)),
                proxy: def.name.clone(),
                proxy_addr,
                fleet: Arc::clone(&fleet),
            });
            started?;
            warm_up(def, &fleet, &http).await;
        }
        Ok(world)
    }

    /// Removes every fault, then stops every instance and Redis server (all at once, each
    /// with its grace) and Toxiproxy last.
    pub async fn stop(mut self) {
        if let Err(e) = self.toxiproxy.reset().await {
            tracing::warn!(error = %e, "could not reset Toxiproxy");
        }
        // A run interrupted during a `stall` leaves Redis stopped, deaf to SIGTERM.
        for t in &self.targets {
            let _ = t.redis.lock().await.resume();
        }
        join_all(self.targets.iter_mut().map(|t| async move {
            t.fleet.stop().await;
            let _ = t.redis.lock().await.stop().await;
        }))
        .await;
        let _ = self.toxiproxy_server.stop().await;
    }
}
