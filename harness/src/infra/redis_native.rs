//! The commands that are faults inside a target's own redis-server, not on the wire: pausing
//! its clients, a noisy neighbour's key scans, and memory pressure that evicts keys. Spoken
//! to directly (not through the target's proxy), with the `redis` crate, on connections of
//! their own. When they happen is the fault player's (`run/timeline/`) to say.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::wait::sleep_until;

/// Filler keys live in their own database, so the limiter's keys in database 0 are untouched
/// by their creation and removal; Redis is single-threaded, so a scan there still blocks all.
const NEIGHBOUR_DB: i64 = 1;
/// Filler keys are written this many per `MSET`.
const FILL_BATCH: u64 = 1_000;
/// Eviction's filler keys: in database 0, beside the limiter's, which is what makes them
/// compete for memory.
const EVICTION_PREFIX: &str = "failmode:eviction-filler:";
/// A command of these faults that takes longer is a failure (a paused Redis answers nothing,
/// which is why `CLIENT PAUSE` carries its own end).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// A command of these faults that failed, named with the Redis it was sent to.
#[derive(Debug, thiserror::Error)]
#[error("{op} on redis-server {addr}: {detail}")]
pub struct RedisCommandError {
    op: String,
    addr: SocketAddr,
    detail: String,
}

impl RedisCommandError {
    /// A command that answered, but not as the fault needs.
    pub(super) fn detail(op: &str, addr: SocketAddr, detail: String) -> Self {
        Self {
            op: op.to_owned(),
            addr,
            detail,
        }
    }

    pub(super) fn new(op: &str, addr: SocketAddr, e: redis::RedisError) -> Self {
        Self {
            op: op.to_owned(),
            addr,
            detail: e.to_string(),
        }
    }
}

/// What `client-pause` holds back: `CLIENT PAUSE`'s mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseMode {
    #[default]
    All,
    Write,
}

/// A client of database `db` that does not announce itself with `CLIENT SETINFO`, which
/// Redis before 7.2 answers `-ERR`: the faults count Redis's error replies, and failmode's own
/// connections must not add to them.
pub(super) fn client(addr: SocketAddr, db: i64) -> Result<redis::Client, RedisCommandError> {
    let info = redis::IntoConnectionInfo::into_connection_info(format!("redis://{addr}/{db}"))
        .map_err(|e| RedisCommandError::new("connect", addr, e))?;
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    redis::Client::open(info.set_redis_settings(settings))
        .map_err(|e| RedisCommandError::new("connect", addr, e))
}

pub(super) async fn connect(
    addr: SocketAddr,
    db: i64,
) -> Result<MultiplexedConnection, RedisCommandError> {
    connect_waiting(addr, db, COMMAND_TIMEOUT).await
}

/// A connection whose replies may take `wait`.
pub(super) async fn connect_waiting(
    addr: SocketAddr,
    db: i64,
    wait: Duration,
) -> Result<MultiplexedConnection, RedisCommandError> {
    let client = client(addr, db)?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(COMMAND_TIMEOUT))
        .set_response_timeout(Some(wait));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| RedisCommandError::new("connect", addr, e))
}

pub(super) async fn run<T: redis::FromRedisValue>(
    conn: &mut MultiplexedConnection,
    addr: SocketAddr,
    cmd: &redis::Cmd,
    what: &str,
) -> Result<T, RedisCommandError> {
    cmd.query_async(conn)
        .await
        .map_err(|e| RedisCommandError::new(what, addr, e))
}

/// `CLIENT PAUSE` for `length`: Redis lifts it on its own timer, because while it holds every
/// command — `CLIENT UNPAUSE` from another connection included — waits (Redis 7.0).
pub async fn pause(
    addr: SocketAddr,
    length: Duration,
    mode: PauseMode,
) -> Result<(), RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let ms = length.as_millis().max(1) as u64;
    let mode = match mode {
        PauseMode::All => "ALL",
        PauseMode::Write => "WRITE",
    };
    let mut cmd = redis::cmd("CLIENT");
    cmd.arg("PAUSE").arg(ms).arg(mode);
    run::<()>(&mut conn, addr, &cmd, "CLIENT PAUSE").await
}

/// `CLIENT UNPAUSE`, in case the phase ended before Redis's own timer did.
pub async fn unpause(addr: SocketAddr) -> Result<(), RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let mut cmd = redis::cmd("CLIENT");
    cmd.arg("UNPAUSE");
    run::<()>(&mut conn, addr, &cmd, "CLIENT UNPAUSE").await
}

/// Writes `keys` small filler keys into the neighbour's database.
pub async fn fill_neighbour(addr: SocketAddr, keys: u64) -> Result<(), RedisCommandError> {
    let mut conn = connect(addr, NEIGHBOUR_DB).await?;
    let mut next = 0;
    while next < keys {
        let end = (next + FILL_BATCH).min(keys);
        let pairs: Vec<(String, u64)> = (next..end)
            .map(|i| (format!("failmode:neighbour:{i}"), i))
            .collect();
        let mut cmd = redis::cmd("MSET");
        cmd.arg(&pairs);
        run::<()>(&mut conn, addr, &cmd, "MSET (filling the neighbour's keys)").await?;
        next = end;
    }
    Ok(())
}

/// Drops the neighbour's database.
pub async fn clear_neighbour(addr: SocketAddr) -> Result<(), RedisCommandError> {
    let mut conn = connect(addr, NEIGHBOUR_DB).await?;
    let mut cmd = redis::cmd("FLUSHDB");
    cmd.arg("ASYNC");
    run::<()>(
        &mut conn,
        addr,
        &cmd,
        "FLUSHDB ASYNC (the neighbour's keys)",
    )
    .await
}

/// What the neighbour did, for the run's events.
#[derive(Debug, Clone, PartialEq)]
pub struct NeighbourReport {
    pub scans: usize,
    pub keys: u64,
    /// Each `KEYS` round trip, which is how long it held Redis (plus the loopback hop).
    pub p50: Duration,
    pub max: Duration,
    pub busy_share: f64,
}

impl std::fmt::Display for NeighbourReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "noisy neighbour: {} full scans (KEYS over {} keys), each holding Redis {:.1} ms \
             (p50), {:.1} ms at most: Redis busy with it {:.0} % of the phase",
            self.scans,
            self.keys,
            self.p50.as_secs_f64() * 1000.0,
            self.max.as_secs_f64() * 1000.0,
            self.busy_share * 100.0
        )
    }
}

/// Scans the whole neighbour database with `KEYS` (a pattern that matches nothing, so the
/// reply is empty and the cost is all Redis's), `pause` apart, until `until` or `cancel`.
pub async fn neighbour(
    addr: SocketAddr,
    keys: u64,
    pause: Duration,
    until: Instant,
    cancel: &CancellationToken,
) -> Result<NeighbourReport, RedisCommandError> {
    let mut conn = connect(addr, NEIGHBOUR_DB).await?;
    let started = Instant::now();
    let mut took: Vec<Duration> = Vec::new();
    let mut cmd = redis::cmd("KEYS");
    cmd.arg("failmode:nothing-matches:*");
    while Instant::now() < until && !cancel.is_cancelled() {
        let sent = Instant::now();
        run::<Vec<String>>(&mut conn, addr, &cmd, "KEYS (the neighbour's scan)").await?;
        took.push(sent.elapsed());
        if !pause.is_zero() && sleep_until(Instant::now() + pause, cancel).await {
            break;
        }
    }
    let busy: Duration = took.iter().sum();
    let elapsed = started.elapsed().max(Duration::from_millis(1));
    took.sort();
    Ok(NeighbourReport {
        scans: took.len(),
        keys,
        p50: took.get(took.len() / 2).copied().unwrap_or_default(),
        max: took.last().copied().unwrap_or_default(),
        busy_share: busy.as_secs_f64() / elapsed.as_secs_f64(),
    })
}

/// Redis's memory settings before eviction changed them, to put back.
#[derive(Debug, Clone, PartialEq)]
pub struct MemorySettings {
    pub maxmemory: String,
    pub policy: String,
    /// `INFO stats` evicted_keys when the pressure began.
    pub evicted_before: u64,
}

pub(super) async fn config_get(
    conn: &mut MultiplexedConnection,
    addr: SocketAddr,
    key: &str,
) -> Result<String, RedisCommandError> {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg(key);
    let pairs: Vec<String> = run(conn, addr, &cmd, "CONFIG GET").await?;
    pairs.get(1).cloned().ok_or_else(|| RedisCommandError {
        op: format!("CONFIG GET {key}"),
        addr,
        detail: "no value in the reply".into(),
    })
}

pub(super) async fn config_set(
    conn: &mut MultiplexedConnection,
    addr: SocketAddr,
    key: &str,
    value: &str,
) -> Result<(), RedisCommandError> {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("SET").arg(key).arg(value);
    run(conn, addr, &cmd, &format!("CONFIG SET {key} {value}")).await
}

/// A field of `INFO <section>`.
pub async fn info_field(
    addr: SocketAddr,
    section: &str,
    field: &str,
) -> Result<u64, RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let mut cmd = redis::cmd("INFO");
    cmd.arg(section);
    let text: String = run(&mut conn, addr, &cmd, "INFO").await?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| RedisCommandError {
            op: format!("INFO {section}"),
            addr,
            detail: format!("no {field} in the reply"),
        })
}

/// Redis's memory settings now, to put back with [`release_memory`].
pub(super) async fn memory_settings(
    conn: &mut MultiplexedConnection,
    addr: SocketAddr,
) -> Result<MemorySettings, RedisCommandError> {
    Ok(MemorySettings {
        maxmemory: config_get(conn, addr, "maxmemory").await?,
        policy: config_get(conn, addr, "maxmemory-policy").await?,
        evicted_before: info_field(addr, "stats", "evicted_keys").await?,
    })
}

/// Caps Redis's memory at what it uses now plus `headroom` bytes, under `policy`.
pub async fn squeeze_memory(
    addr: SocketAddr,
    policy: &str,
    headroom: u64,
) -> Result<MemorySettings, RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let saved = memory_settings(&mut conn, addr).await?;
    let used = info_field(addr, "memory", "used_memory").await?;
    config_set(&mut conn, addr, "maxmemory-policy", policy).await?;
    config_set(&mut conn, addr, "maxmemory", &(used + headroom).to_string()).await?;
    Ok(saved)
}

/// Puts the memory settings back, drops the filler, and says how many keys were evicted.
pub async fn release_memory(
    addr: SocketAddr,
    saved: &MemorySettings,
) -> Result<u64, RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    config_set(&mut conn, addr, "maxmemory", &saved.maxmemory).await?;
    config_set(&mut conn, addr, "maxmemory-policy", &saved.policy).await?;
    let evicted = info_field(addr, "stats", "evicted_keys").await?;
    let filler: Vec<String> = {
        let mut cmd = redis::cmd("KEYS");
        cmd.arg(format!("{EVICTION_PREFIX}*"));
        run(&mut conn, addr, &cmd, "KEYS (the eviction filler)").await?
    };
    if !filler.is_empty() {
        let mut cmd = redis::cmd("UNLINK");
        cmd.arg(&filler);
        run::<()>(&mut conn, addr, &cmd, "UNLINK (the eviction filler)").await?;
    }
    Ok(evicted.saturating_sub(saved.evicted_before))
}

/// Writes `value_bytes` values at `rate` a second into database 0 until `until` or `cancel`,
/// each under a new key: under the memory cap, every write evicts.
pub async fn fill_memory(
    addr: SocketAddr,
    rate: u32,
    value_bytes: usize,
    until: Instant,
    cancel: &CancellationToken,
) -> Result<u64, RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let value = vec![b'x'; value_bytes];
    let every = Duration::from_secs_f64(1.0 / f64::from(rate.max(1)));
    let mut next = Instant::now();
    let mut written = 0u64;
    while next < until && !cancel.is_cancelled() {
        let key = format!("{EVICTION_PREFIX}{written}");
        conn.set::<_, _, ()>(&key, &value[..])
            .await
            .map_err(|e| RedisCommandError::new("SET (the eviction filler)", addr, e))?;
        written += 1;
        next += every;
        if sleep_until(next, cancel).await {
            break;
        }
    }
    Ok(written)
}
