//! The faults that make a target's own Redis answer, with an error, as managed Redis does in
//! production: out of memory (`-OOM`), demoted to a replica after a failover (`-READONLY`),
//! held by another client's script (`-BUSY`), its script cache flushed (`-NOSCRIPT`). Each is
//! made by Redis itself with its own commands (no fake server, which would answer what we
//! think Redis answers); and the error replies Redis gave, by kind, from `INFO errorstats`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use tokio_util::sync::CancellationToken;

use super::redis_native::{
    MemorySettings, RedisCommandError, client, config_get, config_set, connect, info_field,
    restore_memory, run,
};
use crate::wait::sleep_until;

/// How long a role swap or a replica's first sync may take before the fault is a failure:
/// on loopback with a limiter's few keys either takes milliseconds.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);
/// `FAILOVER`'s own bound on the writes it pauses while the replica catches up.
const FAILOVER_TIMEOUT_MS: u64 = 5_000;
const POLL: Duration = Duration::from_millis(5);
/// Never-ending and writing nothing, so `SCRIPT KILL` can end it.
const ENDLESS_SCRIPT: &str = "while true do end";

/// Error replies by their code (`OOM`, `READONLY`, `BUSY`, `NOSCRIPT`, `ERR`…), as Redis
/// counts them since it started.
pub type ErrorCounts = BTreeMap<String, u64>;

/// `INFO errorstats`'s `errorstat_<CODE>:count=N` lines.
pub fn parse_errorstats(text: &str) -> ErrorCounts {
    text.lines()
        .filter_map(|line| {
            let (code, rest) = line.strip_prefix("errorstat_")?.split_once(':')?;
            let count = rest
                .split(',')
                .find_map(|kv| kv.strip_prefix("count="))?
                .trim()
                .parse()
                .ok()?;
            Some((code.to_owned(), count))
        })
        .collect()
}

/// `INFO commandstats`'s failed and rejected calls by command, under `cmd:<name>` keys beside
/// the error codes (so one reading holds both): which commands the errors answered.
pub fn parse_failed_commands(text: &str) -> ErrorCounts {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let failed: u64 = rest
                .split(',')
                .filter_map(|kv| {
                    kv.strip_prefix("rejected_calls=")
                        .or_else(|| kv.strip_prefix("failed_calls="))
                })
                .filter_map(|n| n.trim().parse::<u64>().ok())
                .sum();
            Some((format!("cmd:{name}"), failed))
        })
        .collect()
}

/// The error replies Redis has given since it started, by code, and the commands that got
/// them, by name.
pub async fn error_counts(addr: SocketAddr) -> Result<ErrorCounts, RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let mut cmd = redis::cmd("INFO");
    cmd.arg("errorstats").arg("commandstats");
    let text: String = run(&mut conn, addr, &cmd, "INFO errorstats commandstats").await?;
    let mut counts = parse_errorstats(&text);
    counts.extend(parse_failed_commands(&text));
    Ok(counts)
}

/// What Redis answered with errors between two readings, and to which commands, as
/// `-OOM 1204, -ERR 3 (to evalsha 1204, config|set 3)` (or "none").
pub fn errors_between(before: &ErrorCounts, after: &ErrorCounts) -> String {
    let grown = |commands: bool| -> Vec<String> {
        after
            .iter()
            .filter(|(key, _)| key.starts_with("cmd:") == commands)
            .filter_map(|(key, n)| {
                let n = n.saturating_sub(before.get(key).copied().unwrap_or(0));
                (n > 0).then(|| match key.strip_prefix("cmd:") {
                    Some(name) => format!("{name} {n}"),
                    None => format!("-{key} {n}"),
                })
            })
            .collect()
    };
    let (codes, commands) = (grown(false), grown(true));
    if codes.is_empty() {
        return "none".to_owned();
    }
    if commands.is_empty() {
        return codes.join(", ");
    }
    format!("{} (to {})", codes.join(", "), commands.join(", "))
}

/// `maxmemory` below what Redis uses (1 byte: 0 would mean no limit), under `noeviction`:
/// every command that may grow the data set is refused with `-OOM`, reads still work.
pub async fn exhaust_memory(addr: SocketAddr) -> Result<MemorySettings, RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let saved = MemorySettings {
        maxmemory: config_get(&mut conn, addr, "maxmemory").await?,
        policy: config_get(&mut conn, addr, "maxmemory-policy").await?,
        evicted_before: info_field(addr, "stats", "evicted_keys").await?,
    };
    config_set(&mut conn, addr, "maxmemory-policy", "noeviction").await?;
    config_set(&mut conn, addr, "maxmemory", "1").await?;
    Ok(saved)
}

/// Puts back what [`exhaust_memory`] changed.
pub async fn restore_memory_at(
    addr: SocketAddr,
    saved: &MemorySettings,
) -> Result<(), RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    restore_memory(&mut conn, addr, saved).await
}

/// `SCRIPT FLUSH SYNC`: every script Redis had loaded is gone, so an `EVALSHA` is answered
/// `-NOSCRIPT` until its caller loads the script again.
pub async fn flush_scripts(addr: SocketAddr) -> Result<(), RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let mut cmd = redis::cmd("SCRIPT");
    cmd.arg("FLUSH").arg("SYNC");
    run(&mut conn, addr, &cmd, "SCRIPT FLUSH").await
}

/// The name of the setting after which a running script makes Redis answer `-BUSY`: Redis 7
/// calls it `busy-reply-threshold`, earlier versions `lua-time-limit` (7 keeps it as an alias).
const BUSY_SETTINGS: [&str; 2] = ["busy-reply-threshold", "lua-time-limit"];

/// Sets the busy threshold to `threshold` and returns the setting and value it replaced.
pub async fn lower_busy_threshold(
    addr: SocketAddr,
    threshold: Duration,
) -> Result<(String, String), RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let ms = threshold.as_millis().max(1).to_string();
    let mut last = None;
    for setting in BUSY_SETTINGS {
        match config_get(&mut conn, addr, setting).await {
            Ok(before) => {
                config_set(&mut conn, addr, setting, &ms).await?;
                return Ok((setting.to_owned(), before));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        RedisCommandError::detail("CONFIG GET", addr, "no busy threshold setting".into())
    }))
}

/// Puts the busy threshold back.
pub async fn restore_busy_threshold(
    addr: SocketAddr,
    (setting, value): &(String, String),
) -> Result<(), RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    config_set(&mut conn, addr, setting, value).await
}

/// What a busy Redis went through, for the run's events.
#[derive(Debug, Clone, PartialEq)]
pub struct BusyReport {
    /// From the script's start until `SCRIPT KILL` ended it.
    pub held: Duration,
    /// From the phase's start until other clients were answered `-BUSY`.
    pub busy_after: Duration,
}

impl std::fmt::Display for BusyReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "busy: a script held Redis for {:.1} s (other clients answered -BUSY from {:.0} ms \
             into the phase) until SCRIPT KILL ended it",
            self.held.as_secs_f64(),
            self.busy_after.as_secs_f64() * 1000.0
        )
    }
}

/// Runs a script that never ends on a connection of its own from `from` until `until` (or
/// `cancel`), then ends it with `SCRIPT KILL`. Returns once Redis answers other clients
/// again. The script is known to run (a `PING` is answered `-BUSY`) before this waits, so a
/// kill can never come before the script it is meant for.
pub async fn hold_with_script(
    addr: SocketAddr,
    from: Instant,
    until: Instant,
    cancel: &CancellationToken,
) -> Result<BusyReport, RedisCommandError> {
    let held_for = until.saturating_duration_since(Instant::now());
    let mut script_conn = connect_waiting(addr, held_for + SETTLE_TIMEOUT).await?;
    let started = Instant::now();
    let mut script = tokio::spawn(async move {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(ENDLESS_SCRIPT).arg(0);
        cmd.query_async::<()>(&mut script_conn).await
    });
    let mut probe = connect(addr, 0).await?;
    let busy_at = loop {
        if script.is_finished() {
            let ended = (&mut script).await;
            return Err(RedisCommandError::detail(
                "EVAL (the endless script)",
                addr,
                format!("ended before Redis was busy: {ended:?}"),
            ));
        }
        match redis::cmd("PING").query_async::<String>(&mut probe).await {
            Err(e) if e.code() == Some("BUSY") => break Instant::now(),
            Err(e) => return Err(RedisCommandError::new("PING (is Redis busy?)", addr, e)),
            Ok(_) if started.elapsed() > SETTLE_TIMEOUT => {
                return Err(RedisCommandError::detail(
                    "EVAL (the endless script)",
                    addr,
                    format!("Redis was not busy {SETTLE_TIMEOUT:?} after it was sent"),
                ));
            }
            Ok(_) => tokio::time::sleep(POLL).await,
        }
    };
    sleep_until(until, cancel).await;
    let killed_at = Instant::now();
    while !script.is_finished() {
        match redis::cmd("SCRIPT")
            .arg("KILL")
            .query_async::<()>(&mut probe)
            .await
        {
            // NOTBUSY: the kill landed between the script's end and its reply.
            Ok(()) => {}
            Err(e) if e.code() == Some("NOTBUSY") => {}
            Err(e) => return Err(RedisCommandError::new("SCRIPT KILL", addr, e)),
        }
        if killed_at.elapsed() > SETTLE_TIMEOUT {
            return Err(RedisCommandError::detail(
                "SCRIPT KILL",
                addr,
                format!("the script still ran {SETTLE_TIMEOUT:?} after the first kill"),
            ));
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(BusyReport {
        held: started.elapsed(),
        busy_after: busy_at.saturating_duration_since(from),
    })
}

/// A connection whose replies may take `wait` (the endless script's only reply comes when
/// it is killed).
async fn connect_waiting(
    addr: SocketAddr,
    wait: Duration,
) -> Result<MultiplexedConnection, RedisCommandError> {
    let client = client(addr, 0)?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(SETTLE_TIMEOUT))
        .set_response_timeout(Some(wait));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| RedisCommandError::new("connect", addr, e))
}

/// `INFO replication` as `field:value` pairs.
async fn replication(addr: SocketAddr) -> Result<BTreeMap<String, String>, RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let mut cmd = redis::cmd("INFO");
    cmd.arg("replication");
    let text: String = run(&mut conn, addr, &cmd, "INFO replication").await?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect())
}

/// Polls `addr`'s `INFO replication` until `settled` holds, within [`SETTLE_TIMEOUT`].
async fn until_replication(
    addr: SocketAddr,
    what: &str,
    settled: impl Fn(&BTreeMap<String, String>) -> bool,
) -> Result<(), RedisCommandError> {
    let started = Instant::now();
    loop {
        let info = replication(addr).await?;
        if settled(&info) {
            return Ok(());
        }
        if started.elapsed() > SETTLE_TIMEOUT {
            return Err(RedisCommandError::detail(
                what,
                addr,
                format!("not done after {SETTLE_TIMEOUT:?}: INFO replication {info:?}"),
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

fn is(info: &BTreeMap<String, String>, field: &str, value: &str) -> bool {
    info.get(field).is_some_and(|v| v == value)
}

/// Demotes the Redis at `primary` to a replica of the empty server at `partner`, losing
/// nothing: `partner` first becomes `primary`'s replica and syncs, then `FAILOVER` swaps their
/// roles (writes paused on `primary` until `partner` has every one). `primary` then answers
/// `-READONLY` to every write, as the old primary does to a client still pinned to it after a
/// failover.
pub async fn demote(primary: SocketAddr, partner: SocketAddr) -> Result<(), RedisCommandError> {
    for addr in [primary, partner] {
        // A first sync starts at once, not after the default 5 s wait for other replicas.
        let mut conn = connect(addr, 0).await?;
        config_set(&mut conn, addr, "repl-diskless-sync-delay", "0").await?;
    }
    let mut conn = connect(partner, 0).await?;
    let mut cmd = redis::cmd("REPLICAOF");
    cmd.arg(primary.ip().to_string()).arg(primary.port());
    run::<()>(&mut conn, partner, &cmd, "REPLICAOF (the partner)").await?;
    until_replication(partner, "the partner's first sync", |i| {
        is(i, "master_link_status", "up")
    })
    .await?;
    swap(primary, partner).await
}

/// Makes `primary` the primary again and `partner` its replica (which the caller then stops),
/// with the counts `primary` held as a replica.
pub async fn promote_back(
    primary: SocketAddr,
    partner: SocketAddr,
) -> Result<(), RedisCommandError> {
    swap(partner, primary).await
}

/// `FAILOVER TO replica` on `from`, and waits until the roles have swapped and `from` is in
/// sync as the new replica.
async fn swap(from: SocketAddr, to: SocketAddr) -> Result<(), RedisCommandError> {
    let mut conn = connect(from, 0).await?;
    let mut cmd = redis::cmd("FAILOVER");
    cmd.arg("TO")
        .arg(to.ip().to_string())
        .arg(to.port())
        .arg("TIMEOUT")
        .arg(FAILOVER_TIMEOUT_MS);
    // The replica must be known to `from` as connected and online first.
    until_replication(from, "the replica online before FAILOVER", |i| {
        i.get("slave0").is_some_and(|s| s.contains("state=online"))
    })
    .await?;
    run::<()>(&mut conn, from, &cmd, "FAILOVER").await?;
    until_replication(from, "FAILOVER (the old primary a replica)", |i| {
        is(i, "role", "slave")
            && is(i, "master_link_status", "up")
            && is(i, "master_failover_state", "no-failover")
    })
    .await?;
    until_replication(to, "FAILOVER (the replica promoted)", |i| {
        is(i, "role", "master")
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errorstats_are_read_by_code_and_differences_named() {
        let before =
            parse_errorstats("# Errorstats\r\nerrorstat_ERR:count=2\r\nerrorstat_OOM:count=5\r\n");
        assert_eq!(before.get("OOM"), Some(&5));
        let after = parse_errorstats(
            "# Errorstats\r\nerrorstat_ERR:count=2\r\nerrorstat_OOM:count=12\r\n\
             errorstat_NOSCRIPT:count=1\r\n",
        );
        assert_eq!(errors_between(&before, &after), "-NOSCRIPT 1, -OOM 7");
        assert_eq!(errors_between(&after, &after), "none");
        assert!(parse_errorstats("").is_empty());
        let mut later = after.clone();
        later.extend(parse_failed_commands(
            "cmdstat_evalsha:calls=9,usec=1,usec_per_call=0.1,rejected_calls=0,failed_calls=7\r\n\
             cmdstat_set:calls=1,usec=1,usec_per_call=1.0,rejected_calls=1,failed_calls=0\r\n\
             cmdstat_get:calls=4,usec=1,usec_per_call=0.2,rejected_calls=0,failed_calls=0\r\n",
        ));
        assert_eq!(
            errors_between(&before, &later),
            "-NOSCRIPT 1, -OOM 7 (to evalsha 7, set 1)"
        );
    }
}
