//! `failmode-reference`: the rate limiter seed 000 recommends, built properly, and the policies
//! that go wrong in the field as switches of the same binary. It shares no code with the
//! harness that measures it: HTTP is their only contract.

pub mod breaker;
pub mod bucket;
pub mod callers;
pub mod config;
pub mod decision;
pub mod fallback;
mod headers;
pub mod http;
pub mod instances;
pub mod limiter;
pub mod local;
pub mod metrics;
pub mod policy;
pub mod share;
pub mod store;
pub mod turns;
pub mod window;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use config::{Config, Discovery};
use fallback::{Line, Summary};
use http::App;
use instances::LiveInstances;
use limiter::Limiter;
use metrics::Metrics;
use store::{Source, Store};

/// Unacknowledged data older than this closes the store connection (see `Server::start`).
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(5);

/// How long start-up waits for Redis before saying it starts degraded.
const STARTUP_GRACE: Duration = Duration::from_millis(500);

/// A running instance: its listener, its state and its background tasks.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    app: Arc<App>,
    store: Option<Arc<Store>>,
    instance_id: String,
    stop: oneshot::Sender<()>,
    serving: JoinHandle<std::io::Result<()>>,
    background: Vec<JoinHandle<()>>,
}

impl Server {
    /// Binds the configured address and starts serving. An unreachable Redis is not an error:
    /// the instance starts degraded, says so, and keeps reconnecting.
    pub async fn start(config: Config) -> std::io::Result<Self> {
        let listener = TcpListener::bind(config.listen).await.map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", config.listen))
        })?;
        let addr = listener.local_addr()?;
        let instance_id = config
            .instance_id
            .clone()
            .unwrap_or_else(|| format!("{}-{}", addr.port(), std::process::id()));
        let metrics = Arc::new(Metrics::new());
        let live = Arc::new(LiveInstances::new(
            config.instance_count,
            config.instance_rank,
        ));
        metrics.live_instances(live.get());

        let needs_store = config.routes.iter().any(|r| r.policy.uses_store());
        let store = needs_store.then(|| {
            // The URL was validated when the configuration was parsed. TCP_USER_TIMEOUT closes
            // a connection whose peer vanished without a reset (a black hole: no error would
            // ever come otherwise), while a Redis that is alive but stalled, whose kernel
            // still acknowledges, keeps its connection: its calls time out, as they should.
            let tcp = redis::io::tcp::TcpSettings::default()
                .set_nodelay(true)
                .set_user_timeout(TCP_USER_TIMEOUT);
            let source = match &config.sentinels {
                Some(sentinels) => Source::sentinels(sentinels, tcp),
                None => redis::IntoConnectionInfo::into_connection_info(config.redis_url.as_str())
                    .map(|info| info.set_tcp_settings(tcp))
                    .and_then(redis::Client::open)
                    .map(Source::Direct),
            }
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e));
            source.map(|s| Arc::new(Store::start(s, config.connect_timeout, &config.key_prefix)))
        });
        let store = store.transpose()?;

        let limiter = Limiter::new(
            config.routes.clone(),
            store.clone(),
            config.breaker,
            Arc::clone(&live),
            Arc::clone(&metrics),
            config.max_callers,
        );
        let mut background = Vec::new();
        if let (Some(store), Discovery::Redis) = (&store, config.discovery) {
            background.push(instances::spawn_heartbeat(
                Arc::clone(store),
                live,
                Arc::clone(&metrics),
                instance_id.clone(),
                config.heartbeat_interval,
                limiter.degraded_flag(),
            ));
        }
        if let Some(store) = &store {
            let deadline = Instant::now() + STARTUP_GRACE;
            while !store.is_connected() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            if !store.is_connected() {
                tracing::warn!(
                    redis = %store::redacted_url(&config.redis_url),
                    "store unreachable at start-up: starting degraded, deciding locally until it answers"
                );
                limiter.start_degraded();
            }
        }
        let app = Arc::new(App {
            limiter,
            metrics,
            caller_header: config.caller_header.clone(),
            instance_id: instance_id.clone(),
        });
        background.push(spawn_summary(Arc::clone(&app)));
        let pruning = Arc::clone(&app);
        background.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(10));
            loop {
                tick.tick().await;
                pruning.limiter.prune(Instant::now());
            }
        }));

        let (stop, stopped) = oneshot::channel::<()>();
        let router = http::router(Arc::clone(&app));
        let serving = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
        });
        for route in app.limiter.routes() {
            tracing::info!(
                path = %route.path,
                policy = route.policy.name(),
                limit = route.limit,
                window = ?route.window,
                store_timeout = ?route.store_timeout,
                retries = route.store_retries,
                breaker = route.breaker,
                "route"
            );
        }
        tracing::info!(%addr, instance = %instance_id, "listening");
        Ok(Self {
            addr,
            app,
            store,
            instance_id,
            stop,
            serving,
            background,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Stops accepting, finishes the requests in flight and leaves the live set.
    pub async fn shutdown(self) -> std::io::Result<()> {
        let _ = self.stop.send(());
        let served = self
            .serving
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        for task in &self.background {
            task.abort();
        }
        if let Some(store) = &self.store
            && let Err(e) = store
                .leave(&self.instance_id, Duration::from_millis(200))
                .await
        {
            tracing::debug!(error = %e, "could not leave the live set; it will expire");
        }
        served
    }
}

/// Writes the log's summary of decisions taken without the store, once a second.
fn spawn_summary(app: Arc<App>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut summary = Summary::default();
        let limiter = &app.limiter;
        let routes: Vec<&str> = limiter.routes().map(|r| r.name.as_str()).collect();
        loop {
            tick.tick().await;
            let counts = limiter.take_fallbacks();
            match summary.second(&counts, &routes, limiter.is_degraded()) {
                Some(Line::Degraded { fallbacks, total }) => tracing::warn!(
                    decisions = total,
                    %fallbacks,
                    live_instances = limiter.live_instances(),
                    "deciding without the store"
                ),
                Some(Line::CallErrors { fallbacks, total }) => tracing::warn!(
                    decisions = total,
                    %fallbacks,
                    "the store answered some calls with an error; those fell back"
                ),
                Some(Line::Recovered { seconds, decisions }) => tracing::info!(
                    seconds_with_fallbacks = seconds,
                    decisions_without_store = decisions,
                    "the store answers again"
                ),
                None => {}
            }
        }
    })
}
