//! failmode target: Kuadrant's limitador (the `limitador` crate) counting in Redis, in the
//! smallest axum server that uses it. One binary, two storages, chosen by `LIMITADOR_STORAGE`
//! as limitador-server's own subcommands name them:
//!
//! - `redis`: `AsyncRedisStorage`, every decision a read script and an update script on Redis;
//! - `redis_cached`: `CachedRedisStorage`, decisions from local counters that a background task
//!   flushes to Redis and refreshes from it.
//!
//! Every setting comes from env (see target.toml); a missing or invalid one stops the server at
//! start with exit code 64, one line per problem.
//!
//! GET /healthz answers 200 (the server listens only once Redis has answered a PING and the
//! storage is built). GET /api runs `check_rate_limited_and_update` keyed by the caller header:
//! missing or empty → 400; allowed → 200 "ok"; limited → 429 with Retry-After; an error from
//! the storage → 500, what limitador-server's own HTTP API answers (its Envoy gRPC service
//! answers UNAVAILABLE, which Envoy turns into its failure mode).

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use limitador::AsyncRateLimiter;
use limitador::limit::{Context, Expression, Limit, Namespace, Predicate};
use limitador::storage::AsyncCounterStorage;
use limitador::storage::redis::{AsyncRedisStorage, CachedRedisStorageBuilder};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tracing::{Level, info, warn};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// BSD's EX_USAGE, as every failmode target exits on a bad setting.
const EXIT_USAGE: u8 = 64;
/// All the target's limits live in one namespace; the caller is the limit's one variable.
const NAMESPACE: &str = "failmode";
const CALLER_VARIABLE: &str = "caller";

/// Which of limitador's Redis storages, with the settings each one takes.
#[derive(Debug)]
enum Store {
    /// `AsyncRedisStorage::new_with_conn_manager` on a redis-rs `ConnectionManager` built here:
    /// `AsyncRedisStorage::new(url)` (what limitador-server does) would use the manager's
    /// defaults, no response or connect timeout at all.
    Redis {
        response_timeout: Duration,
        connection_timeout: Duration,
        reconnect_retries: usize,
    },
    /// `CachedRedisStorageBuilder`: it builds its own `ConnectionManager`, with the connect
    /// timeout and reconnect retries derived from `response_timeout` (see `describe`).
    RedisCached {
        response_timeout: Duration,
        flushing_period: Duration,
        batch_size: usize,
        max_cached_counters: usize,
    },
}

#[derive(Debug)]
struct Settings {
    bind: String,
    port: u16,
    redis_url: String,
    instance_id: String,
    instance_count: u32,
    limit: u64,
    window_s: u64,
    caller_header: HeaderName,
    store: Store,
}

/// Reads every setting, collecting one line per problem instead of stopping at the first, so a
/// broken manifest is fixed in one go.
fn read_settings() -> Result<Settings, Vec<String>> {
    let mut problems = Vec::new();
    let mut get = |name: &str| -> Option<String> {
        match std::env::var(name) {
            Ok(v) if !v.trim().is_empty() => Some(v.trim().to_owned()),
            Ok(_) | Err(std::env::VarError::NotPresent) => {
                problems.push(format!("{name} is missing"));
                None
            }
            Err(std::env::VarError::NotUnicode(_)) => {
                problems.push(format!("{name} is not UTF-8"));
                None
            }
        }
    };
    let bind = get("FAILMODE_BIND");
    let port = get("FAILMODE_PORT");
    let redis_url = get("FAILMODE_REDIS_URL");
    let instance_id = get("FAILMODE_INSTANCE_ID");
    let instance_count = get("FAILMODE_INSTANCE_COUNT");
    let limit = get("FAILMODE_LIMIT");
    let window_ms = get("FAILMODE_WINDOW_MS");
    let caller_header = get("FAILMODE_CALLER_HEADER");
    let storage = get("LIMITADOR_STORAGE");
    // Only the chosen storage's settings are asked for: each variant sets its own.
    let store_env: Vec<(&str, Option<String>)> = match storage.as_deref() {
        Some("redis") => [
            "LIMITADOR_REDIS_RESPONSE_TIMEOUT_MS",
            "LIMITADOR_REDIS_CONNECTION_TIMEOUT_MS",
            "LIMITADOR_REDIS_RECONNECT_RETRIES",
        ]
        .into_iter()
        .map(|n| (n, get(n)))
        .collect(),
        Some("redis_cached") => [
            "LIMITADOR_CACHE_RESPONSE_TIMEOUT_MS",
            "LIMITADOR_CACHE_FLUSHING_PERIOD_MS",
            "LIMITADOR_CACHE_BATCH_SIZE",
            "LIMITADOR_CACHE_MAX_CACHED_COUNTERS",
        ]
        .into_iter()
        .map(|n| (n, get(n)))
        .collect(),
        _ => Vec::new(),
    };

    let mut whole = |name: &str, v: &Option<String>, min: u64| -> u64 {
        let Some(v) = v else { return 0 };
        match v.parse::<u64>() {
            Ok(n) if n >= min => n,
            _ => {
                problems.push(format!("{name}={v:?}: want a whole number >= {min}"));
                0
            }
        }
    };
    let port_n = whole("FAILMODE_PORT", &port, 1);
    let instance_count = whole("FAILMODE_INSTANCE_COUNT", &instance_count, 1);
    let limit = whole("FAILMODE_LIMIT", &limit, 1);
    let window_ms = whole("FAILMODE_WINDOW_MS", &window_ms, 1);
    let mut store_values = HashMap::new();
    for (name, v) in &store_env {
        // Retries may be 0 (one connection attempt); every other setting is at least 1.
        let min = u64::from(!name.ends_with("_RETRIES"));
        store_values.insert(*name, whole(name, v, min));
    }

    // 127.0.0.1 as failmode starts it; 0.0.0.0 only in a container image.
    if let Some(b) = &bind
        && b != "127.0.0.1"
        && b != "0.0.0.0"
    {
        problems.push(format!(
            "FAILMODE_BIND={b:?}: must be 127.0.0.1 (or 0.0.0.0 inside a container image)"
        ));
    }
    if port.is_some() && port_n > 65535 {
        problems.push(format!("FAILMODE_PORT={port_n}: want a port number"));
    }
    if let Some(url) = &redis_url
        && let Err(e) = redis::Client::open(url.as_str())
    {
        problems.push(format!("FAILMODE_REDIS_URL={url:?}: {e}"));
    }
    // limitador's Limit::new takes its window in whole seconds.
    if window_ms != 0 && (window_ms < 1000 || window_ms % 1000 != 0) {
        problems.push(format!(
            "FAILMODE_WINDOW_MS={window_ms}: limitador counts per window of whole seconds \
             (Limit::new takes seconds); want a multiple of 1000, at least 1000"
        ));
    }
    let header_name = caller_header.as_deref().and_then(|h| {
        HeaderName::try_from(h)
            .map_err(|e| problems.push(format!("FAILMODE_CALLER_HEADER={h:?}: {e}")))
            .ok()
    });
    if let Some(s) = &storage
        && s != "redis"
        && s != "redis_cached"
    {
        problems.push(format!(
            "LIMITADOR_STORAGE={s:?}: want redis (AsyncRedisStorage) or redis_cached \
             (CachedRedisStorage)"
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }

    let ms = |name: &str| Duration::from_millis(store_values[name]);
    let count = |name: &str| usize::try_from(store_values[name]).unwrap_or(usize::MAX);
    let store = match storage.as_deref() {
        Some("redis") => Store::Redis {
            response_timeout: ms("LIMITADOR_REDIS_RESPONSE_TIMEOUT_MS"),
            connection_timeout: ms("LIMITADOR_REDIS_CONNECTION_TIMEOUT_MS"),
            reconnect_retries: count("LIMITADOR_REDIS_RECONNECT_RETRIES"),
        },
        _ => Store::RedisCached {
            response_timeout: ms("LIMITADOR_CACHE_RESPONSE_TIMEOUT_MS"),
            flushing_period: ms("LIMITADOR_CACHE_FLUSHING_PERIOD_MS"),
            batch_size: count("LIMITADOR_CACHE_BATCH_SIZE"),
            max_cached_counters: count("LIMITADOR_CACHE_MAX_CACHED_COUNTERS"),
        },
    };
    // Every Option below is Some: a None pushed a problem and returned above.
    Ok(Settings {
        bind: bind.unwrap_or_default(),
        port: u16::try_from(port_n).unwrap_or_default(),
        redis_url: redis_url.unwrap_or_default(),
        instance_id: instance_id.unwrap_or_default(),
        instance_count: u32::try_from(instance_count).unwrap_or(u32::MAX),
        limit,
        window_s: window_ms / 1000,
        caller_header: header_name.unwrap_or(header::HOST),
        store,
    })
}

/// The storage's settings as the startup line prints them, the derived ones included.
fn describe(store: &Store) -> serde_json::Value {
    match store {
        Store::Redis {
            response_timeout,
            connection_timeout,
            reconnect_retries,
        } => serde_json::json!({
            "storage": "AsyncRedisStorage (new_with_conn_manager)",
            "response_timeout_ms": response_timeout.as_millis(),
            "connection_timeout_ms": connection_timeout.as_millis(),
            "reconnect_retries": reconnect_retries,
            "reconnect_delays": "redis-rs 0.27 ConnectionManager defaults: 1-2 s before the \
                first retry, 60-120 s before each later one",
            "command_retries": 0,
        }),
        Store::RedisCached {
            response_timeout,
            flushing_period,
            batch_size,
            max_cached_counters,
        } => serde_json::json!({
            "storage": "CachedRedisStorage (CachedRedisStorageBuilder)",
            "response_timeout_ms": response_timeout.as_millis(),
            // Fixed by limitador's new_with_options, not settable: 3 x response timeout + 50 ms
            // to connect, 1 reconnect retry.
            "connection_timeout_ms": (*response_timeout * 3 + Duration::from_millis(50)).as_millis(),
            "reconnect_retries": 1,
            "flushing_period_ms": flushing_period.as_millis(),
            "batch_size": batch_size,
            "max_cached_counters": max_cached_counters,
            "requests_touch_redis": false,
        }),
    }
}

/// Waits until Redis answers a PING, on a connection of its own with the same 1 s budget to
/// connect and to answer, so a Redis that is not up yet delays the start instead of failing it.
async fn wait_for_redis(url: &str) {
    let Ok(client) = redis::Client::open(url) else {
        return;
    };
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Duration::from_secs(1))
        .set_response_timeout(Duration::from_secs(1));
    for attempt in 1.. {
        let answer = async {
            let mut conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            redis::cmd("PING").query_async::<String>(&mut conn).await
        }
        .await;
        match answer {
            Ok(_) => {
                info!("redis: PING answered (attempt {attempt})");
                return;
            }
            Err(e) => warn!("redis: PING failed (attempt {attempt}): {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn build_storage(
    url: &str,
    store: &Store,
) -> Result<Box<dyn AsyncCounterStorage>, redis::RedisError> {
    Ok(match store {
        Store::Redis {
            response_timeout,
            connection_timeout,
            reconnect_retries,
        } => {
            let config = ConnectionManagerConfig::new()
                .set_response_timeout(*response_timeout)
                .set_connection_timeout(*connection_timeout)
                .set_number_of_retries(*reconnect_retries);
            let manager =
                ConnectionManager::new_with_config(redis::Client::open(url)?, config).await?;
            Box::new(AsyncRedisStorage::new_with_conn_manager(manager).await?)
        }
        Store::RedisCached {
            response_timeout,
            flushing_period,
            batch_size,
            max_cached_counters,
        } => Box::new(
            CachedRedisStorageBuilder::new(url)
                .response_timeout(*response_timeout)
                .flushing_period(*flushing_period)
                .batch_size(*batch_size)
                .max_cached_counters(*max_cached_counters)
                .build()
                .await?,
        ),
    })
}

struct App {
    limiter: AsyncRateLimiter,
    namespace: Namespace,
    caller_header: HeaderName,
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn api(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let caller = headers
        .get(&app.caller_header)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty());
    let Some(caller) = caller else {
        let body = format!("missing {} header\n", app.caller_header);
        return (StatusCode::BAD_REQUEST, body).into_response();
    };
    let values = HashMap::from([(CALLER_VARIABLE.to_owned(), caller.to_owned())]);
    let decision = {
        let ctx: Context = values.into();
        app.limiter
            .check_rate_limited_and_update(&app.namespace, &ctx, 1)
            .await
    };
    let mut result = match decision {
        Ok(r) => r,
        Err(e) => {
            warn!("store error: {e}");
            return (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error\n").into_response();
        }
    };
    // The window's end for the one counter that applies, rounded up: a Retry-After of 0 would
    // invite the caller straight back into the same window.
    let retry_after = result
        .counters
        .iter()
        .filter_map(|c| c.expires_in())
        .max()
        .map_or(1, |d| d.as_millis().div_ceil(1000).max(1));
    let mut response = if result.limited {
        let mut r = (StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n").into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(retry_after as u64));
        r
    } else {
        "ok".into_response()
    };
    // limitador's own X-RateLimit-Limit/-Remaining/-Reset, as limitador-server sends them.
    for (name, value) in result.response_header() {
        if let (Ok(n), Ok(v)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            response.headers_mut().insert(n, v);
        }
    }
    response
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = term => info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => info!("SIGINT: shutting down"),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    // limitador logs through tracing: at WARN it says when its cached storage loses and finds
    // Redis ("Partition to Redis detected!"), without a line for every flush (INFO).
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stdout))
        .with(
            Targets::new()
                .with_target("limitador", Level::WARN)
                .with_default(Level::INFO),
        )
        .init();

    let s = match read_settings() {
        Ok(s) => s,
        Err(problems) => {
            for p in problems {
                eprintln!("invalid setting: {p}");
            }
            return ExitCode::from(EXIT_USAGE);
        }
    };

    // A bare identifier; were it refused, the limit would count every caller together.
    let caller = match Expression::parse(CALLER_VARIABLE) {
        Ok(caller) => caller,
        Err(e) => {
            eprintln!("limitador refused the variable {CALLER_VARIABLE:?}: {e:?}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let limit = Limit::new(
        NAMESPACE,
        s.limit,
        s.window_s,
        Vec::<Predicate>::new(),
        [caller],
    );
    let started = serde_json::json!({
        "target": match s.store { Store::Redis { .. } => "limitador", Store::RedisCached { .. } => "limitador-cached" },
        "instance": s.instance_id,
        "instance_count": s.instance_count,
        "versions": env!("FAILMODE_LOCKED_VERSIONS"),
        "limit": format!("{} per {} s per {}", s.limit, s.window_s, s.caller_header),
        "on_store_error": "500",
        "store": describe(&s.store),
    });
    info!("started {started}");

    wait_for_redis(&s.redis_url).await;
    let storage = loop {
        match build_storage(&s.redis_url, &s.store).await {
            Ok(storage) => break storage,
            Err(e) => {
                warn!("building the storage failed: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let limiter = AsyncRateLimiter::new_with_storage(storage);
    limiter.add_limit(limit);
    let app = Arc::new(App {
        limiter,
        namespace: NAMESPACE.into(),
        caller_header: s.caller_header.clone(),
    });
    let router = Router::new()
        .route("/healthz", get(healthz))
        .route("/api", get(api))
        .with_state(app);

    let addr = format!("{}:{}", s.bind, s.port);
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            warn!("listen {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    info!("ready: listening on http://{addr}");
    if let Err(e) = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown_signal())
        .await
    {
        warn!("serve: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
