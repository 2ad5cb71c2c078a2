//! Flags and `FAILMODE_*` environment variables → a validated [`Config`].
//!
//! Every setting can come from either (the harness starts instances with environment
//! variables). A bad value is reported naming the setting, and the binary exits with 64.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::http::HeaderName;
use clap::Parser;

use crate::breaker::BreakerSettings;
use crate::policy::{Algorithm, Policy, Route};
use crate::store::SentinelSettings;

/// A setting that cannot be used, named as the user wrote it.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid {setting}: {message}")]
pub struct ConfigError {
    pub setting: String,
    pub message: String,
}

fn invalid(setting: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        setting: setting.into(),
        message: message.into(),
    }
}

/// How the instance learns how many instances share the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Discovery {
    /// Heartbeats in Redis while it is healthy; frozen at the last value while it is not.
    Redis,
    /// Always `--instance-count`.
    Static,
}

#[derive(Debug, Parser)]
#[command(
    name = "failmode-reference",
    version,
    about = "The reference rate limiter failmode measures: a Redis sliding window with a circuit \
             breaker and a local-share fallback, plus every policy to compare it with.",
    after_help = "Extra routes: --route 'PATH=POLICY[,name=N][,limit=N][,window=D][,algorithm=A]\
                  [,timeout=D][,retries=N][,breaker=on|off][,status=N]', repeatable, or \
                  FAILMODE_ROUTES separated by ';'. Default extra routes: \
                  /login=fail-closed,limit=5,window=60s,status=503 and /unlimited=none."
)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "FAILMODE_BIND", default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Port to listen on (0 picks a free one).
    #[arg(long, env = "FAILMODE_PORT", default_value_t = 8080)]
    port: u16,
    #[arg(
        long,
        env = "FAILMODE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    redis_url: String,
    /// Ask these Redis Sentinels (host:port, comma-separated) for the primary instead of
    /// connecting to --redis-url; they are asked again on every reconnect, so a failover is
    /// followed.
    #[arg(long, env = "FAILMODE_REDIS_SENTINELS", value_delimiter = ',')]
    redis_sentinels: Vec<String>,
    /// The name the sentinels monitor the primary under.
    #[arg(
        long,
        env = "FAILMODE_REDIS_SENTINEL_MASTER",
        default_value = "mymaster"
    )]
    redis_sentinel_master: String,
    /// This instance's id in the live set (default: derived from the port and pid).
    #[arg(long, env = "FAILMODE_INSTANCE_ID")]
    instance_id: Option<String>,
    /// Instances sharing the limit: the divisor until one is learnt, and always with
    /// --instance-discovery static.
    #[arg(long, env = "FAILMODE_INSTANCE_COUNT", default_value_t = 1)]
    instance_count: u32,
    /// This instance's place among them, from 0: which turn of the local share is its own
    /// until one is learnt (the live ids' order), and always with --instance-discovery static.
    #[arg(long, env = "FAILMODE_INSTANCE_RANK", default_value_t = 0)]
    instance_rank: u32,
    #[arg(
        long,
        env = "FAILMODE_INSTANCE_DISCOVERY",
        value_enum,
        default_value = "redis"
    )]
    instance_discovery: Discovery,
    #[arg(long, env = "FAILMODE_HEARTBEAT_INTERVAL", value_parser = humantime::parse_duration, default_value = "1s")]
    heartbeat_interval: Duration,
    /// The header naming the caller. Never the client address: behind a load balancer every
    /// caller would share one key.
    #[arg(long, env = "FAILMODE_CALLER_HEADER", default_value = "x-caller")]
    caller_header: String,
    #[arg(long, env = "FAILMODE_KEY_PREFIX", default_value = "rl")]
    key_prefix: String,

    /// The main route's path.
    #[arg(long, env = "FAILMODE_PATH", default_value = "/api")]
    path: String,
    /// The main route's failure policy.
    #[arg(
        long,
        env = "FAILMODE_POLICY",
        value_enum,
        default_value = "local-share"
    )]
    policy: Policy,
    #[arg(
        long,
        env = "FAILMODE_ALGORITHM",
        value_enum,
        default_value = "sliding-window"
    )]
    algorithm: Algorithm,
    /// Requests per window per caller on the main route.
    #[arg(long, env = "FAILMODE_LIMIT", default_value_t = 50)]
    limit: u32,
    #[arg(long, env = "FAILMODE_WINDOW", value_parser = humantime::parse_duration, default_value = "1s")]
    window: Duration,
    /// Store call timeout (default 20 ms; 50 ms for retry-then-deny).
    #[arg(long, env = "FAILMODE_STORE_TIMEOUT", value_parser = humantime::parse_duration)]
    store_timeout: Option<Duration>,
    /// Extra store attempts after a failure (default 0; 1 for retry-then-deny).
    #[arg(long, env = "FAILMODE_STORE_RETRIES")]
    store_retries: Option<u32>,
    /// Put the circuit breaker beside the store call (default on; off for timeout-only and
    /// retry-then-deny).
    #[arg(long, env = "FAILMODE_BREAKER", value_parser = parse_on_off)]
    breaker: Option<bool>,
    /// Status a fail-closed main route answers while the store is unavailable.
    #[arg(long, env = "FAILMODE_FAIL_STATUS", default_value_t = 500)]
    fail_status: u16,
    /// Extra routes (see below).
    #[arg(long = "route", env = "FAILMODE_ROUTES", value_delimiter = ';')]
    routes: Vec<String>,

    #[arg(long, env = "FAILMODE_BREAKER_FAILURES", default_value_t = 5)]
    breaker_failures: u32,
    #[arg(long, env = "FAILMODE_BREAKER_FAILURE_RATIO", default_value_t = 0.5)]
    breaker_failure_ratio: f64,
    #[arg(long, env = "FAILMODE_BREAKER_MIN_CALLS", default_value_t = 20)]
    breaker_min_calls: u32,
    #[arg(long, env = "FAILMODE_BREAKER_WINDOW", value_parser = humantime::parse_duration, default_value = "10s")]
    breaker_window: Duration,
    #[arg(long, env = "FAILMODE_BREAKER_COOLDOWN", value_parser = humantime::parse_duration, default_value = "1s")]
    breaker_cooldown: Duration,
    /// After an outage, the fleet rejoins the store with the first window that starts at least
    /// this long after the first instance back (default twice the longest reconnect backoff,
    /// 500ms; 0 holds only until the current window ends; at most 1m); meanwhile the instances
    /// back keep to their turns.
    #[arg(long, env = "FAILMODE_BREAKER_REJOIN_AFTER", value_parser = humantime::parse_duration)]
    breaker_rejoin_after: Option<Duration>,
    /// Timeout for (re)connecting to Redis, in the background.
    #[arg(long, env = "FAILMODE_CONNECT_TIMEOUT", value_parser = humantime::parse_duration, default_value = "1s")]
    connect_timeout: Duration,

    /// Callers each route keeps local state for (counters, turns, held refusals): the least
    /// recently used goes when a route's map is full (`failmode_callers_evicted_total`).
    #[arg(long, env = "FAILMODE_MAX_CALLERS", default_value_t = crate::callers::DEFAULT_MAX_CALLERS)]
    max_callers: std::num::NonZeroUsize,
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err(format!("expected on or off, got {s:?}")),
    }
}

/// The validated configuration of one instance.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub redis_url: String,
    /// The sentinels that name the primary, in place of `redis_url`.
    pub sentinels: Option<SentinelSettings>,
    /// `None`: derived from the bound port and the pid once listening.
    pub instance_id: Option<String>,
    pub instance_count: u32,
    pub instance_rank: u32,
    pub discovery: Discovery,
    pub heartbeat_interval: Duration,
    pub caller_header: HeaderName,
    pub key_prefix: String,
    /// The main route first, then the extra ones; paths are unique.
    pub routes: Vec<Route>,
    pub breaker: BreakerSettings,
    pub connect_timeout: Duration,
    pub max_callers: std::num::NonZeroUsize,
}

/// Why the configuration could not be read.
#[derive(Debug)]
pub enum ParseOutcome {
    /// `--help` or `--version`: print it and exit 0.
    Display(clap::Error),
    Invalid(String),
}

impl Config {
    /// Parses flags (with the environment as fallback) into a checked configuration.
    pub fn parse_from<I, T>(args: I) -> Result<Self, ParseOutcome>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let args = Args::try_parse_from(args).map_err(|e| match e.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                ParseOutcome::Display(e)
            }
            _ => ParseOutcome::Invalid(e.to_string()),
        })?;
        Self::try_from(args).map_err(|e| ParseOutcome::Invalid(format!("error: {e}")))
    }
}

fn positive(setting: &str, d: Duration) -> Result<Duration, ConfigError> {
    if d.is_zero() {
        Err(invalid(setting, "must be greater than zero"))
    } else {
        Ok(d)
    }
}

/// A hold longer than a minute would decide by turns long after the store is back.
fn at_most(setting: &str, d: Duration, most: Duration) -> Result<Duration, ConfigError> {
    if d > most {
        Err(invalid(
            setting,
            format!("must be at most {}", humantime::format_duration(most)),
        ))
    } else {
        Ok(d)
    }
}

fn fail_status(setting: &str, status: u16) -> Result<u16, ConfigError> {
    if (500..=599).contains(&status) {
        Ok(status)
    } else {
        Err(invalid(
            setting,
            format!(
                "{status} is not a 5xx status; a refusal for the caller's own excess is a 429, not a fail-closed answer"
            ),
        ))
    }
}

impl TryFrom<Args> for Config {
    type Error = ConfigError;

    fn try_from(a: Args) -> Result<Self, ConfigError> {
        redis::Client::open(a.redis_url.as_str())
            .map_err(|e| invalid("--redis-url / FAILMODE_REDIS_URL", e.to_string()))?;
        if a.instance_count == 0 {
            return Err(invalid(
                "--instance-count / FAILMODE_INSTANCE_COUNT",
                "must be at least 1",
            ));
        }
        let caller_header = HeaderName::try_from(a.caller_header.as_str()).map_err(|_| {
            invalid(
                "--caller-header / FAILMODE_CALLER_HEADER",
                format!("{:?} is not a valid header name", a.caller_header),
            )
        })?;
        if a.key_prefix.is_empty() || a.key_prefix.contains(['{', '}']) {
            return Err(invalid(
                "--key-prefix / FAILMODE_KEY_PREFIX",
                "must be non-empty and free of braces (they are the caller's hash tag)",
            ));
        }
        if !(a.breaker_failure_ratio > 0.0 && a.breaker_failure_ratio <= 1.0) {
            return Err(invalid(
                "--breaker-failure-ratio / FAILMODE_BREAKER_FAILURE_RATIO",
                "must be in (0, 1]",
            ));
        }
        if a.breaker_failures == 0 {
            return Err(invalid(
                "--breaker-failures / FAILMODE_BREAKER_FAILURES",
                "must be at least 1",
            ));
        }
        let breaker = BreakerSettings {
            consecutive_failures: a.breaker_failures,
            failure_ratio: a.breaker_failure_ratio,
            min_calls: a.breaker_min_calls,
            window: positive(
                "--breaker-window / FAILMODE_BREAKER_WINDOW",
                a.breaker_window,
            )?,
            cooldown: positive(
                "--breaker-cooldown / FAILMODE_BREAKER_COOLDOWN",
                a.breaker_cooldown,
            )?,
            rejoin_after: at_most(
                "--breaker-rejoin-after / FAILMODE_BREAKER_REJOIN_AFTER",
                a.breaker_rejoin_after
                    .unwrap_or(BreakerSettings::default().rejoin_after),
                Duration::from_secs(60),
            )?,
        };

        let main = main_route(&a)?;
        // An instance without a store (local-only) gets no default route that needs one.
        let defaults: &[&str] = if main.policy.uses_store() {
            &[
                "/login=fail-closed,limit=5,window=60s,status=503",
                "/unlimited=none",
            ]
        } else {
            &["/unlimited=none"]
        };
        let mut routes = vec![main];
        for (text, default) in defaults
            .iter()
            .map(|t| ((*t).to_owned(), true))
            .chain(a.routes.iter().map(|r| (r.clone(), false)))
        {
            let route = parse_route(&text)?;
            if let Some(other) = routes
                .iter()
                .find(|r| r.name == route.name && r.path != route.path && !default)
            {
                return Err(invalid(
                    "--route / FAILMODE_ROUTES",
                    format!(
                        "name {:?} is also {}'s: two routes would share one counter",
                        route.name, other.path
                    ),
                ));
            }
            match routes.iter().position(|r| r.path == route.path) {
                // A default never displaces a configured route; a configured one replaces a default.
                Some(_) if default => {}
                Some(0) => {
                    return Err(invalid(
                        "--route / FAILMODE_ROUTES",
                        format!("{} is the main route's path (--path)", route.path),
                    ));
                }
                Some(i) => routes[i] = route,
                None => routes.push(route),
            }
        }

        Ok(Self {
            listen: SocketAddr::new(a.bind, a.port),
            instance_id: a.instance_id.clone().filter(|id| !id.is_empty()),
            redis_url: a.redis_url,
            sentinels: SentinelSettings::parse(&a.redis_sentinels, &a.redis_sentinel_master)
                .map_err(|e| invalid("--redis-sentinels / FAILMODE_REDIS_SENTINELS", e))?,
            instance_count: a.instance_count,
            instance_rank: a.instance_rank,
            discovery: a.instance_discovery,
            heartbeat_interval: positive(
                "--heartbeat-interval / FAILMODE_HEARTBEAT_INTERVAL",
                a.heartbeat_interval,
            )?,
            caller_header,
            key_prefix: a.key_prefix,
            routes,
            breaker,
            connect_timeout: positive(
                "--connect-timeout / FAILMODE_CONNECT_TIMEOUT",
                a.connect_timeout,
            )?,
            max_callers: a.max_callers,
        })
    }
}

fn main_route(a: &Args) -> Result<Route, ConfigError> {
    check_path("--path / FAILMODE_PATH", &a.path)?;
    if a.limit == 0 {
        return Err(invalid("--limit / FAILMODE_LIMIT", "must be at least 1"));
    }
    let window = positive("--window / FAILMODE_WINDOW", a.window)?;
    let mut route = Route::new(&a.path, a.policy, a.limit, window);
    route.algorithm = a.algorithm;
    if let Some(t) = a.store_timeout {
        route.store_timeout = positive("--store-timeout / FAILMODE_STORE_TIMEOUT", t)?;
    }
    if let Some(r) = a.store_retries {
        route.store_retries = r;
    }
    if let Some(b) = a.breaker {
        route.breaker = b;
    }
    route.fail_status = fail_status("--fail-status / FAILMODE_FAIL_STATUS", a.fail_status)?;
    Ok(route)
}

fn check_path(setting: &str, path: &str) -> Result<(), ConfigError> {
    if !path.starts_with('/') || path.len() < 2 || matches!(path, "/healthz" | "/metrics") {
        return Err(invalid(
            setting,
            format!("{path:?} must start with '/' and not be /, /healthz or /metrics"),
        ));
    }
    Ok(())
}

/// `PATH=POLICY[,key=value]…`
fn parse_route(spec: &str) -> Result<Route, ConfigError> {
    let setting = |key: &str| format!("--route / FAILMODE_ROUTES ({spec:?}) {key}");
    let (path, rest) = spec
        .split_once('=')
        .ok_or_else(|| invalid(setting("syntax"), "expected PATH=POLICY[,key=value]…"))?;
    let path = path.trim();
    check_path(&setting("path"), path)?;
    let mut parts = rest.split(',').map(str::trim);
    let policy_text = parts.next().unwrap_or_default();
    let policy = <Policy as clap::ValueEnum>::from_str(policy_text, true)
        .map_err(|_| invalid(setting("policy"), format!("unknown policy {policy_text:?}")))?;
    let mut route = Route::new(path, policy, 50, Duration::from_secs(1));
    for part in parts.filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| invalid(setting(part), "expected key=value"))?;
        let duration = || {
            humantime::parse_duration(value)
                .map_err(|e| invalid(setting(key), e.to_string()))
                .and_then(|d| positive(&setting(key), d))
        };
        let number = || {
            value
                .parse::<u32>()
                .map_err(|e| invalid(setting(key), e.to_string()))
        };
        match key {
            "name" if !value.is_empty() => route.name = value.to_owned(),
            "limit" => {
                route.limit = number()?;
                if route.limit == 0 {
                    return Err(invalid(setting(key), "must be at least 1"));
                }
            }
            "window" => route.window = duration()?,
            "algorithm" => {
                route.algorithm = <Algorithm as clap::ValueEnum>::from_str(value, true)
                    .map_err(|_| invalid(setting(key), format!("unknown algorithm {value:?}")))?;
            }
            "timeout" => route.store_timeout = duration()?,
            "retries" => route.store_retries = number()?,
            "breaker" => {
                route.breaker = parse_on_off(value).map_err(|e| invalid(setting(key), e))?
            }
            "status" => {
                let status = value
                    .parse::<u16>()
                    .map_err(|e| invalid(setting(key), e.to_string()))?;
                route.fail_status = fail_status(&setting(key), status)?;
            }
            _ => return Err(invalid(setting(key), "unknown key")),
        }
    }
    Ok(route)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, String> {
        Config::parse_from(std::iter::once("failmode-reference").chain(args.iter().copied()))
            .map_err(|e| match e {
                ParseOutcome::Invalid(m) => m,
                ParseOutcome::Display(e) => e.to_string(),
            })
    }

    #[test]
    fn defaults_follow_seed_000() {
        let c = parse(&[]).expect("defaults parse");
        let main = &c.routes[0];
        assert_eq!(main.path, "/api");
        assert_eq!(main.policy, Policy::LocalShare);
        assert_eq!(main.store_timeout, Duration::from_millis(20));
        assert_eq!(main.store_retries, 0);
        assert!(main.breaker);
        assert_eq!((main.limit, main.window), (50, Duration::from_secs(1)));
        let login = c.routes.iter().find(|r| r.path == "/login").expect("login");
        assert_eq!((login.policy, login.fail_status), (Policy::FailClosed, 503));
        assert_eq!(c.caller_header, "x-caller");
    }

    #[test]
    fn retry_then_deny_defaults_to_seed_002s_timeout_and_one_retry() {
        let c = parse(&["--policy", "retry-then-deny"]).expect("parse");
        let r = &c.routes[0];
        assert_eq!(
            (r.store_timeout, r.store_retries, r.breaker),
            (Duration::from_millis(50), 1, false)
        );
    }

    #[test]
    fn a_route_spec_sets_every_key() {
        let c = parse(&[
            "--route",
            "/search=timeout-only,name=search,limit=7,window=2s,algorithm=token-bucket,timeout=5ms,retries=2,breaker=on,status=503",
        ])
        .expect("parse");
        let r = c
            .routes
            .iter()
            .find(|r| r.path == "/search")
            .expect("route");
        assert_eq!(r.name, "search");
        assert_eq!(r.policy, Policy::TimeoutOnly);
        assert_eq!(r.algorithm, Algorithm::TokenBucket);
        assert_eq!((r.limit, r.window), (7, Duration::from_secs(2)));
        assert_eq!(
            (r.store_timeout, r.store_retries, r.breaker, r.fail_status),
            (Duration::from_millis(5), 2, true, 503)
        );
    }

    #[test]
    fn a_local_only_instance_has_no_route_that_needs_the_store() {
        let c = parse(&["--policy", "local-only"]).expect("parse");
        assert!(
            c.routes.iter().all(|r| !r.policy.uses_store()),
            "{:?}",
            c.routes
        );
    }

    #[test]
    fn a_configured_route_replaces_a_default_one() {
        let c = parse(&["--route", "/login=fail-closed,status=500"]).expect("parse");
        let logins: Vec<_> = c.routes.iter().filter(|r| r.path == "/login").collect();
        assert_eq!(logins.len(), 1);
        assert_eq!(logins[0].fail_status, 500);
    }

    #[test]
    fn bad_values_name_the_setting() {
        for (args, names) in [
            (vec!["--limit", "0"], "--limit"),
            (vec!["--limit", "lots"], "--limit"),
            (vec!["--window", "0s"], "--window"),
            (vec!["--policy", "yolo"], "--policy"),
            (vec!["--fail-status", "429"], "--fail-status"),
            (vec!["--redis-url", "http://x"], "--redis-url"),
            (vec!["--caller-header", "bad header"], "--caller-header"),
            (
                vec!["--breaker-failure-ratio", "1.5"],
                "--breaker-failure-ratio",
            ),
            (vec!["--route", "/x=fail-open,colour=red"], "colour"),
            (vec!["--route", "/x=sometimes"], "policy"),
            (vec!["--route", "/api=fail-open"], "main route"),
            (
                vec!["--route", "/other=fail-open,name=api"],
                "share one counter",
            ),
        ] {
            let err = parse(&args).expect_err(&format!("{args:?} must be refused"));
            assert!(err.contains(names), "{args:?}: {err}");
        }
    }
}
