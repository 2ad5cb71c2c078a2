//! The world one run builds, per target and isolated from the others: its own redis-server,
//! its own Toxiproxy proxy in front of it, and N instances whose `REDIS_URL` points at the
//! proxy. One Toxiproxy server serves every proxy. Redis and Toxiproxy are child processes,
//! or containers (`--infra docker`, `infra::containers`); the instances are child
//! processes either way. Or, attached (`--attach`), a deployment that already runs: nothing
//! started, and at the end only what the run itself did is undone.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;

use super::progress::Say;
use super::replicated::{self, Replicated};
use super::{RunError, RunOptions, Topology};
use crate::deployment::Deployment;
use crate::faults::Fault;
use crate::infra::redis::SharedRedis;
use crate::infra::toxiproxy::Toxiproxy;
use crate::infra::{RedisServer, ToxiproxyServer};
use crate::load::Rotation;
use crate::results::Event;
use crate::scenario::{RedisTopology, Scenario};
use crate::targets::warm_up::{WarmedUp, warm_up};
use crate::targets::{self, Fleet, FleetLaunch, TargetDef};

/// One target's slice of the world.
#[derive(Debug)]
pub struct TargetWorld {
    pub def: TargetDef,
    /// failmode's own redis-server, shared with the fault player (`redis-restart` replaces
    /// its process); none when attached.
    pub redis: Option<SharedRedis>,
    /// Where `INFO` and the faults inside Redis go: the own server, or the deployment's
    /// Redis admin URL.
    pub redis_addr: Option<SocketAddr>,
    /// The proxy's name in Toxiproxy.
    pub proxy: String,
    /// Its instances as failmode started them (`scale` and `kill-instance` change them);
    /// none when attached.
    pub fleet: Option<Arc<Fleet>>,
    /// What the load generator's balancer follows.
    pub rotation: Rotation,
    /// The replica and sentinels of a Sentinel topology (`[redis] topology = "sentinel"`).
    pub replicated: Option<Replicated>,
    /// How its instances' warm-up went; none when attached (a deployment that runs is warm).
    pub warmed: Option<WarmedUp>,
}

impl TargetWorld {
    /// A warm-up that did not settle, as an event at the load's start.
    pub fn warm_up_events(&self) -> Vec<Event> {
        self.warmed
            .as_ref()
            .and_then(WarmedUp::trouble)
            .map(|trouble| Event {
                at_s: 0.0,
                kind: "warm-up".into(),
                detail: format!(
                    "{trouble}; the load started then, so its first phase may measure a \
                     service still warming up"
                ),
            })
            .into_iter()
            .collect()
    }

    /// The instances running now, keyed by something that changes when a process is
    /// replaced (its pid; its index when attached).
    pub fn instances(&self) -> Vec<(u32, SocketAddr)> {
        match &self.fleet {
            Some(fleet) => fleet.running().iter().map(|i| (i.pid, i.addr)).collect(),
            None => self
                .rotation
                .members()
                .iter()
                .enumerate()
                .map(|(i, m)| (i as u32, m.addr))
                .collect(),
        }
    }
}

/// Everything started for a run (or attached to). Dropping it kills every child's process
/// group; `stop` is the orderly way.
#[derive(Debug)]
pub struct World {
    /// None when attached or in containers.
    pub toxiproxy_server: Option<ToxiproxyServer>,
    /// The Redis and Toxiproxy containers (`--infra docker`); removed when dropped.
    #[cfg(feature = "docker")]
    pub containers: Option<crate::infra::containers::Containers>,
    pub toxiproxy: Toxiproxy,
    pub targets: Vec<TargetWorld>,
    /// This run applies the faults, so it removes them at its end. An attached worker that
    /// does not (`--worker K/N` with K > 1, or `--no-faults`) must leave the faults the
    /// process that plays them has in place, whenever it stops.
    pub plays_faults: bool,
    /// Its timeline pauses the deployment's Redis (`client-pause`): stopped early, the run
    /// lifts the pause rather than leave it to Redis's timer. Only attached runs need it.
    pub pauses_redis: bool,
}

/// What starting each target's instances takes from the run.
struct Launch<'a> {
    scenario: &'a Scenario,
    root: &'a Path,
    log_dir: &'a Path,
    http: reqwest::Client,
}

impl Launch<'_> {
    /// The target's instance count: the scenario's, or its manifest's default.
    fn instances(&self, def: &TargetDef) -> u32 {
        self.scenario
            .targets
            .iter()
            .find(|t| t.name == def.name)
            .and_then(|t| t.instances)
            .unwrap_or(def.default_instances)
    }
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
            toxiproxy_server: Some(toxiproxy_server),
            plays_faults: true,
            pauses_redis: false,
            #[cfg(feature = "docker")]
            containers: None,
            toxiproxy,
            targets: Vec::new(),
        };
        let launch = Launch {
            scenario,
            root,
            log_dir,
            http: targets::loopback_client(),
        };
        for def in defs {
            on_progress(&format!(
                "starting {} ({} instances)",
                def.name,
                launch.instances(def)
            ));
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
            let proxy_addr = proxy.listening()?;
            let redis_addr = redis.addr();
            let replicated = match scenario.redis {
                RedisTopology::Single => None,
                RedisTopology::Sentinel { replication_lag } => {
                    on_progress(&format!(
                        "starting {}'s replica and sentinels (replication {} behind)",
                        def.name,
                        humantime::format_duration(replication_lag)
                    ));
                    Some(
                        replicated::start(
                            &world.toxiproxy,
                            &def.name,
                            redis_addr,
                            proxy_addr,
                            replication_lag,
                            log_dir,
                        )
                        .await?,
                    )
                }
            };
            let redis = Arc::new(tokio::sync::Mutex::new(redis));
            world
                .add_target(
                    def,
                    &launch,
                    proxy_addr,
                    (Some(redis), redis_addr),
                    replicated,
                )
                .await?;
        }
        world.warm_up(&launch.http, &mut on_progress).await;
        Ok(world)
    }

    /// Warms every target's instances up, all targets together after the last has started (a
    /// target warmed before the next started would wait, warm, for the others, and the next
    /// would warm beside their start-up), and says how the targets that warm until settled
    /// did.
    async fn warm_up(&mut self, http: &reqwest::Client, on_progress: &mut impl FnMut(&str)) {
        for t in &self.targets {
            if let Some(line) = t.def.warm_up.announce(&t.def.name) {
                on_progress(&line);
            }
        }
        let warmed = join_all(self.targets.iter().map(|t| async move {
            let fleet = t.fleet.as_ref()?;
            let instances: Vec<_> = fleet.running().iter().map(|i| (i.index, i.addr)).collect();
            Some(warm_up(t.def.warm_up, t.def.warm_up_aim(), &instances, http).await)
        }))
        .await;
        for (t, warmed) in self.targets.iter_mut().zip(warmed) {
            if let Some(line) = warmed.as_ref().and_then(|w| w.summary(&t.def.name)) {
                on_progress(&line);
            }
            t.warmed = warmed;
        }
    }

    /// As [`start`](Self::start), with Redis and Toxiproxy in containers: one Toxiproxy
    /// container, then per target a Redis container, a proxy in front of it listening on a
    /// port published on loopback, and the instances pointed at that port.
    #[cfg(feature = "docker")]
    pub async fn start_in_containers(
        scenario: &Scenario,
        defs: &[TargetDef],
        root: &Path,
        log_dir: &Path,
        mut on_progress: impl FnMut(&str),
    ) -> Result<Self, RunError> {
        use crate::infra::containers::Containers;
        use crate::infra::images::{REDIS_IMAGE, REDIS_TAG, TOXIPROXY_IMAGE, TOXIPROXY_TAG};

        on_progress(&format!(
            "starting the Toxiproxy container ({TOXIPROXY_IMAGE}:{TOXIPROXY_TAG})"
        ));
        // The world takes the containers once every target started; until then an error
        // drops the world first (its instances) and the containers after.
        let mut containers = Containers::start(defs.len(), scenario.seed as i64, log_dir).await?;
        let mut world = Self {
            plays_faults: true,
            pauses_redis: false,
            toxiproxy_server: None,
            containers: None,
            toxiproxy: Toxiproxy::new(containers.api_addr()),
            targets: Vec::new(),
        };
        let launch = Launch {
            scenario,
            root,
            log_dir,
            http: targets::loopback_client(),
        };
        for (index, def) in defs.iter().enumerate() {
            on_progress(&format!(
                "starting {} (a {REDIS_IMAGE}:{REDIS_TAG} container, {} instances)",
                def.name,
                launch.instances(def)
            ));
            let listener = containers.listener(index)?;
            let redis = containers
                .start_redis(&format!("redis-{}", def.name))
                .await?;
            world
                .toxiproxy
                .create_proxy(&def.name, listener.inside, redis.upstream)
                .await?;
            world
                .add_target(def, &launch, listener.host, (None, redis.addr), None)
                .await?;
        }
        world.warm_up(&launch.http, &mut on_progress).await;
        world.containers = Some(containers);
        Ok(world)
    }

    /// Starts `def`'s instances with `REDIS_URL` the proxy at `proxy_addr` (and the
    /// sentinels of a Sentinel topology), and adds the target to the world even when an
    /// instance failed to start, so the world stops the others.
    async fn add_target(
        &mut self,
        def: &TargetDef,
        launch: &Launch<'_>,
        proxy_addr: SocketAddr,
        (redis, redis_addr): (Option<SharedRedis>, SocketAddr),
        replicated: Option<Replicated>,
    ) -> Result<(), RunError> {
        let fleet_launch = FleetLaunch {
            root: launch.root.to_owned(),
            log_dir: launch.log_dir.to_owned(),
            redis_url: format!("redis://{proxy_addr}"),
            sentinel: replicated.as_ref().map(Replicated::endpoint),
            limit: launch.scenario.limit,
            window: launch.scenario.window,
        };
        let count = launch.instances(def);
        let (fleet, started) = Fleet::start(def, fleet_launch, count, &launch.http).await;
        let fleet = Arc::new(fleet);
        self.targets.push(TargetWorld {
            def: def.clone(),
            redis_addr: Some(redis_addr),
            redis,
            proxy: def.name.clone(),
            rotation: fleet.rotation(),
            fleet: Some(Arc::clone(&fleet)),
            replicated,
            warmed: None,
        });
        started?;
        Ok(())
    }

    /// Attaches to a deployment that already runs: its Toxiproxy must answer and know every
    /// proxy named, and each target must be a known manifest. A run that `plays_faults` also
    /// needs each proxy clean; one that does not leaves them as they are.
    pub async fn attach(
        deployment: &Deployment,
        defs: &[TargetDef],
        plays_faults: bool,
    ) -> Result<Self, RunError> {
        let toxiproxy = Toxiproxy::new(deployment.toxiproxy);
        let mut targets = Vec::new();
        for (t, def) in deployment.targets.iter().zip(defs) {
            // Checked before any traffic: a proxy that is not there is a typo, and one a dead
            // run left broken would be "restored" to broken at this run's end.
            let proxy = toxiproxy.proxy(&t.proxy).await?;
            let left: Vec<&str> = proxy
                .toxics
                .iter()
                .map(|x| x.name.as_str())
                .filter(|n| n.starts_with("failmode-"))
                .collect();
            let problem = if !proxy.enabled {
                Some("is disabled".to_owned())
            } else if !left.is_empty() {
                Some(format!(
                    "has toxics a failmode run left: {}",
                    left.join(", ")
                ))
            } else {
                None
            };
            if let Some(problem) = problem.filter(|_| plays_faults) {
                return Err(RunError::ProxyNotClean {
                    proxy: t.proxy.clone(),
                    problem,
                    deployment: deployment.path.clone(),
                });
            }
            targets.push(TargetWorld {
                def: def.clone(),
                redis: None,
                redis_addr: t.redis_admin,
                proxy: t.proxy.clone(),
                fleet: None,
                rotation: Rotation::new(t.instances.iter().copied()),
                replicated: None,
                warmed: None,
            });
        }
        Ok(Self {
            plays_faults,
            pauses_redis: false,
            toxiproxy_server: None,
            #[cfg(feature = "docker")]
            containers: None,
            toxiproxy,
            targets,
        })
    }

    /// Whether failmode started this world's Redis and Toxiproxy (as processes or containers).
    fn started(&self) -> bool {
        #[cfg(feature = "docker")]
        if self.containers.is_some() {
            return true;
        }
        self.toxiproxy_server.is_some()
    }

    /// Per target, its instances as configured now (a `scale` may have changed them).
    pub fn instance_counts(&self) -> Vec<u32> {
        self.targets
            .iter()
            .map(|t| {
                t.fleet
                    .as_ref()
                    .map_or(t.rotation.len() as u32, |f| f.configured())
            })
            .collect()
    }

    /// Removes every fault, then stops every instance and Redis server (all at once, each
    /// with its grace) and Toxiproxy last; containers are removed after the instances.
    /// Attached, it removes only what a run does: its toxics (named `failmode-*`) and a
    /// disabled proxy, on the deployment's proxies.
    pub async fn stop(mut self) {
        if !self.started() {
            if self.plays_faults {
                let proxies: Vec<String> = self.targets.iter().map(|t| t.proxy.clone()).collect();
                if let Err(e) = undo_on(&self.toxiproxy, &proxies).await {
                    tracing::warn!(error = %e, "could not undo the run's faults on the deployment");
                }
                // A `client-pause` ends on Redis's own timer; a run stopped early (an abort,
                // Ctrl-C) lifts it now.
                let paused = self.targets.iter().filter(|_| self.pauses_redis);
                for addr in paused.filter_map(|t| t.redis_addr) {
                    if let Err(e) = crate::infra::redis_native::unpause(addr).await {
                        tracing::warn!(error = %e, %addr, "could not send CLIENT UNPAUSE");
                    }
                }
            }
            return;
        }
        if let Err(e) = self.toxiproxy.reset().await {
            tracing::warn!(error = %e, "could not reset Toxiproxy");
        }
        // A run interrupted during a `stall` leaves Redis stopped, deaf to SIGTERM.
        for t in &self.targets {
            if let Some(redis) = &t.redis {
                let _ = redis.lock().await.resume();
            }
        }
        join_all(self.targets.iter_mut().map(|t| async move {
            if let Some(fleet) = &t.fleet {
                fleet.stop().await;
            }
            if let Some(redis) = &t.redis {
                let _ = redis.lock().await.stop().await;
            }
        }))
        .await;
        if let Some(server) = self.toxiproxy_server.as_mut() {
            let _ = server.stop().await;
        }
        #[cfg(feature = "docker")]
        if let Some(containers) = self.containers.take() {
            containers.remove().await;
        }
    }
}

/// Starts the world (or attaches to it) for `defs`, unless interrupted first.
pub(super) async fn start_or_attach(
    opts: &RunOptions,
    defs: &[TargetDef],
    logs: &Path,
    interrupt: &CancellationToken,
    say: &Say,
) -> Result<World, RunError> {
    let started = tokio::select! {
        _ = interrupt.cancelled() => None,
        w = async {
            match &opts.topology {
                Topology::Attached(deployment) => {
                    World::attach(deployment, defs, opts.plays_faults()).await.map(|mut w| {
                        w.pauses_redis = opts.scenario.phases.iter().any(|p| {
                            p.faults.iter().any(|f| matches!(f, Fault::ClientPause { .. }))
                        });
                        w
                    })
                }
                Topology::Local => {
                    World::start(&opts.scenario, defs, &opts.root, logs, |m| say.line(m)).await
                }
                #[cfg(feature = "docker")]
                Topology::Docker => {
                    World::start_in_containers(&opts.scenario, defs, &opts.root, logs, |m| {
                        say.line(m)
                    })
                    .await
                }
                #[cfg(not(feature = "docker"))]
                Topology::Docker => Err(crate::infra::DockerNotBuilt.into()),
            }
        } => Some(w),
    };
    started.unwrap_or_else(|| Err(RunError::InterruptedBeforeLoad(logs.to_owned())))
}

/// What a run may have left on `proxies` of a deployment's Toxiproxy, undone: its toxics
/// (named `failmode-*`) removed and the proxies enabled. Others' toxics stay. Returns what it
/// did, one line per change.
pub async fn undo_on(toxiproxy: &Toxiproxy, proxies: &[String]) -> Result<Vec<String>, RunError> {
    let mut done = Vec::new();
    for name in proxies {
        let proxy = toxiproxy.proxy(name).await?;
        for toxic in proxy
            .toxics
            .iter()
            .filter(|t| t.name.starts_with("failmode-"))
        {
            toxiproxy.remove_toxic(name, &toxic.name).await?;
            done.push(format!("{name}: toxic {} removed", toxic.name));
        }
        if !proxy.enabled {
            toxiproxy.set_enabled(name, true).await?;
            done.push(format!("{name}: enabled again"));
        }
    }
    Ok(done)
}
