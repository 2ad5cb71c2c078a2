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
    MemorySettings, RedisCommandError, config_get, config_set, connect, connect_waiting,
    memory_settings, run,
};
use crate::wait::sleep_until;

/// How long a role swap or a replica's first sync may take before the fault is a failure:
/// on loopback with a limiter's few keys either takes milliseconds.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Redis's own bound on the pause of writes while the partner catches up (lifted sooner).
const SWAP_PAUSE_MS: u64 = 5_000;
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

/// The oldest Redis these faults can read and make error replies on: `INFO errorstats` and
/// `failed_calls`, `CLIENT PAUSE WRITE` and `SCRIPT FLUSH SYNC` came in 6.2. An older one
/// would report "none" whatever it answered.
const OLDEST_REDIS: (u32, u32) = (6, 2);

/// `INFO server`'s `redis_version`, as (major, minor), if it can be read.
pub fn redis_version(server_info: &str) -> Option<(u32, u32)> {
    let version = server_info
        .lines()
        .find_map(|l| l.trim().strip_prefix("redis_version:"))?;
    let mut parts = version.split('.').map(str::parse::<u32>);
    Some((parts.next()?.ok()?, parts.next()?.ok()?))
}

/// The error replies Redis has given since it started, by code, and the commands that got
/// them, by name. Refused, naming the version, on a Redis older than 6.2.
pub async fn error_counts(addr: SocketAddr) -> Result<ErrorCounts, RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let mut cmd = redis::cmd("INFO");
    cmd.arg("server");
    let server: String = run(&mut conn, addr, &cmd, "INFO server").await?;
    match redis_version(&server) {
        Some(v) if v >= OLDEST_REDIS => {}
        found => {
            let found = found.map_or("an unknown version".to_owned(), |(a, b)| format!("{a}.{b}"));
            return Err(RedisCommandError::detail(
                "INFO server",
                addr,
                format!(
                    "Redis {found}: this fault needs Redis {}.{} or later (INFO errorstats, \
                     CLIENT PAUSE WRITE, SCRIPT FLUSH SYNC)",
                    OLDEST_REDIS.0, OLDEST_REDIS.1
                ),
            ));
        }
    }
    // Two sections, two calls: `INFO` takes several only from Redis 7.0.
    let mut cmd = redis::cmd("INFO");
    cmd.arg("errorstats");
    let errors: String = run(&mut conn, addr, &cmd, "INFO errorstats").await?;
    let mut cmd = redis::cmd("INFO");
    cmd.arg("commandstats");
    let commands: String = run(&mut conn, addr, &cmd, "INFO commandstats").await?;
    let mut counts = parse_errorstats(&errors);
    counts.extend(parse_failed_commands(&commands));
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
    let saved = memory_settings(&mut conn, addr).await?;
    config_set(&mut conn, addr, "maxmemory-policy", "noeviction").await?;
    config_set(&mut conn, addr, "maxmemory", "1").await?;
    Ok(saved)
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
             into the phase) until SCRIPT KILL ended it; Redis's count below includes \
             failmode's own: one -BUSY to its PING, one -ERR to the killed EVAL",
            self.held.as_secs_f64(),
            self.busy_after.as_secs_f64() * 1000.0
        )
    }
}

/// Runs a script that never ends on a connection of its own from `from` until `until` (or
/// `cancel`), then ends it with `SCRIPT KILL`. Returns once Redis answers other clients
/// again. The script is known to run (a `PING` is answered `-BUSY`) before this waits, so a
/// kill can never come before the script it is meant for; and whatever fails after the script
/// was sent, it is killed before this returns, so it cannot outlive the fault.
pub async fn hold_with_script(
    addr: SocketAddr,
    from: Instant,
    until: Instant,
    cancel: &CancellationToken,
) -> Result<BusyReport, RedisCommandError> {
    let held_for = until.saturating_duration_since(Instant::now());
    // Its only reply comes when the script is killed.
    let mut script_conn = connect_waiting(addr, 0, held_for + SETTLE_TIMEOUT).await?;
    let mut probe = connect_waiting(addr, 0, SETTLE_TIMEOUT).await?;
    let started = Instant::now();
    let script = tokio::spawn(async move {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(ENDLESS_SCRIPT).arg(0);
        cmd.query_async::<()>(&mut script_conn).await
    });
    let held = async {
        let busy_at = until_busy(addr, &mut probe, &script, started).await?;
        sleep_until(until, cancel).await;
        Ok(busy_at)
    }
    .await;
    let killed = kill_script(addr, &mut probe, script).await;
    let busy_at = held?;
    killed?;
    Ok(BusyReport {
        held: started.elapsed(),
        busy_after: busy_at.saturating_duration_since(from),
    })
}

/// Waits until another client is answered `-BUSY`: the script runs and Redis says so.
async fn until_busy(
    addr: SocketAddr,
    probe: &mut MultiplexedConnection,
    script: &tokio::task::JoinHandle<redis::RedisResult<()>>,
    started: Instant,
) -> Result<Instant, RedisCommandError> {
    loop {
        if script.is_finished() {
            return Err(RedisCommandError::detail(
                "EVAL (the endless script)",
                addr,
                "it ended before Redis was busy".into(),
            ));
        }
        match redis::cmd("PING").query_async::<String>(probe).await {
            Err(e) if e.code() == Some("BUSY") => return Ok(Instant::now()),
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
    }
}

/// `SCRIPT KILL` until the script's own connection has its reply, which must be the kill's.
async fn kill_script(
    addr: SocketAddr,
    probe: &mut MultiplexedConnection,
    script: tokio::task::JoinHandle<redis::RedisResult<()>>,
) -> Result<(), RedisCommandError> {
    let first = Instant::now();
    let mut killed = false;
    while !script.is_finished() {
        if first.elapsed() > SETTLE_TIMEOUT {
            script.abort();
            return Err(RedisCommandError::detail(
                "SCRIPT KILL",
                addr,
                format!("the script still ran {SETTLE_TIMEOUT:?} after the first kill"),
            ));
        }
        // Once a kill is answered OK, its reply is on its way to the script's connection: a
        // second kill would only be answered NOTBUSY.
        if !killed {
            match redis::cmd("SCRIPT")
                .arg("KILL")
                .query_async::<()>(probe)
                .await
            {
                Ok(()) => killed = true,
                // Not running yet (or any more): look again.
                Err(e) if e.code() == Some("NOTBUSY") => {}
                Err(e) => return Err(RedisCommandError::new("SCRIPT KILL", addr, e)),
            }
        }
        tokio::time::sleep(POLL).await;
    }
    match script.await {
        // Redis's reply to a killed script: "ERR … Script killed by user with SCRIPT KILL".
        Ok(Err(e)) if e.to_string().contains("killed") => Ok(()),
        ended => Err(RedisCommandError::detail(
            "EVAL (the endless script)",
            addr,
            format!("ended otherwise than by SCRIPT KILL: {ended:?}"),
        )),
    }
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
pub(super) async fn until_replication(
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

/// A replication offset of `INFO replication` (0 if absent).
fn offset(info: &BTreeMap<String, String>, field: &str) -> u64 {
    info.get(field).and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn is(info: &BTreeMap<String, String>, field: &str, value: &str) -> bool {
    info.get(field).is_some_and(|v| v == value)
}

/// What [`demote`] changed on the primary, to put back, and how long it held writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Demoted {
    sync_to_socket: String,
    pub writes_paused: Duration,
}

/// `partner`, an empty server, made the replica of the Redis at `primary` and synced: the
/// first half of [`demote`], which may run well before the fault (a sync takes 50-300 ms).
/// What it changed on `primary` is in the [`Attached`] to demote with.
pub async fn attach_partner(
    primary: SocketAddr,
    partner: SocketAddr,
) -> Result<Attached, RedisCommandError> {
    let mut conn = connect(primary, 0).await?;
    let sync_to_socket = config_get(&mut conn, primary, "repl-diskless-sync").await?;
    // The partner's first sync through a file (this server's own, deleted when it next
    // starts): after a sync through the socket, Redis streams the writes since only from the
    // replica's first acknowledgement, sent once a second, so the phase would begin with up
    // to a second of healthy Redis (measured: 1.0 s); after one through a file, at once.
    config_set(&mut conn, primary, "repl-diskless-sync", "no").await?;
    replica_of(partner, Some(primary)).await?;
    // Online on the primary's side, not only loaded: after a sync through the socket the
    // primary streams the writes since only from the replica's first acknowledgement (sent
    // once a second), which must not fall inside the pause of the swap.
    // By its port: another partner may be attached too (one started ahead, late).
    let port = format!("port={},", partner.port());
    until_replication(primary, "the partner's first sync", |i| {
        i.iter()
            .any(|(k, s)| k.starts_with("slave") && s.contains(&port) && s.contains("state=online"))
    })
    .await?;
    // And loaded on the partner's: the primary counts it online once the file is sent, while
    // the partner may still be receiving it into its temporary file. Until it has loaded it,
    // its link is down, and `in_sync` would take it as out of sync: stopped mid-transfer, it
    // left that file behind. (`master_sync_in_progress` is only a safeguard.)
    until_replication(partner, "the partner's first sync loaded", |i| {
        is(i, "master_link_status", "up") && is(i, "master_sync_in_progress", "0")
    })
    .await?;
    Ok(Attached { sync_to_socket })
}

/// A partner attached by [`attach_partner`]: the primary's setting it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Attached {
    sync_to_socket: String,
}

/// Demotes the Redis at `primary` to a replica of the empty server at `partner`, losing
/// nothing: `partner` first becomes `primary`'s replica and syncs ([`attach_partner`]); then
/// [`swap_roles`].
pub async fn demote(
    primary: SocketAddr,
    partner: SocketAddr,
) -> Result<Demoted, RedisCommandError> {
    let attached = attach_partner(primary, partner).await?;
    swap_roles(primary, partner, attached).await
}

/// Whether `partner`, attached by [`attach_partner`] some time ago, still replicates `primary`
/// as it is now: its link up and the same replication history. A `redis-restart` since (an
/// empty server, a new history, offsets from zero) or a link lost in a long `stall` leave it
/// holding what it had: promoted, it would hand the target old counts.
pub async fn in_sync(primary: SocketAddr, partner: SocketAddr) -> Result<bool, RedisCommandError> {
    let (ours, theirs) = (replication(primary).await?, replication(partner).await?);
    Ok(is(&theirs, "master_link_status", "up")
        && ours.contains_key("master_replid")
        && ours.get("master_replid") == theirs.get("master_replid"))
}

/// With `primary`'s writes paused, its attached `partner` catches up to the last one, is
/// promoted, and `primary` becomes its replica (a partial resync: they share the history).
/// `primary` then answers `-READONLY` to every write, as the old primary does to a client
/// still pinned to it after a failover. Redis's own `FAILOVER` does the same, but waits for
/// the replica's once-a-second acknowledgement with writes paused: up to a second of a hung
/// Redis before the fault.
pub async fn swap_roles(
    primary: SocketAddr,
    partner: SocketAddr,
    attached: Attached,
) -> Result<Demoted, RedisCommandError> {
    let mut conn = connect(primary, 0).await?;
    let written = offset(&replication(primary).await?, "master_repl_offset");
    until_replication(partner, "the partner streaming the writes", |i| {
        offset(i, "slave_repl_offset") >= written
    })
    .await?;
    let paused = Instant::now();
    let mut cmd = redis::cmd("CLIENT");
    cmd.arg("PAUSE").arg(SWAP_PAUSE_MS).arg("WRITE");
    run::<()>(&mut conn, primary, &cmd, "CLIENT PAUSE WRITE").await?;
    let swapped = async {
        let last = offset(&replication(primary).await?, "master_repl_offset");
        until_replication(
            partner,
            "the partner caught up with the paused writes",
            |i| offset(i, "slave_repl_offset") >= last,
        )
        .await?;
        replica_of(partner, None).await?;
        replica_of(primary, Some(partner)).await
    }
    .await;
    let mut cmd = redis::cmd("CLIENT");
    cmd.arg("UNPAUSE");
    let unpaused = run::<()>(&mut conn, primary, &cmd, "CLIENT UNPAUSE").await;
    let writes_paused = paused.elapsed();
    swapped?;
    unpaused?;
    until_replication(primary, "the demoted primary in sync", |i| {
        is(i, "role", "slave") && is(i, "master_link_status", "up")
    })
    .await?;
    Ok(Demoted {
        sync_to_socket: attached.sync_to_socket,
        writes_paused,
    })
}

/// Makes `primary` a primary again, with every count: as a synced replica of a partner no
/// client wrote to, it holds them all. The caller then stops the partner. Also what undoes a
/// demotion that failed half way.
pub async fn promote_back(
    primary: SocketAddr,
    demoted: Option<&Demoted>,
) -> Result<(), RedisCommandError> {
    replica_of(primary, None).await?;
    if let Some(demoted) = demoted {
        let mut conn = connect(primary, 0).await?;
        config_set(
            &mut conn,
            primary,
            "repl-diskless-sync",
            &demoted.sync_to_socket,
        )
        .await?;
    }
    Ok(())
}

/// `REPLICAOF` the Redis at `master`, or `REPLICAOF NO ONE`.
pub(super) async fn replica_of(
    addr: SocketAddr,
    master: Option<SocketAddr>,
) -> Result<(), RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let mut cmd = redis::cmd("REPLICAOF");
    match master {
        Some(m) => cmd.arg(m.ip().to_string()).arg(m.port()),
        None => cmd.arg("NO").arg("ONE"),
    };
    run::<()>(&mut conn, addr, &cmd, "REPLICAOF").await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redis_version_is_read_from_info_server() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n";
        assert_eq!(redis_version(info), Some((7, 0)));
        assert!(redis_version("redis_version:6.0.16\r\n").unwrap() < OLDEST_REDIS);
        assert!(redis_version("redis_version:6.2.0\r\n").unwrap() >= OLDEST_REDIS);
        assert_eq!(redis_version("# Server\r\n"), None);
        assert_eq!(redis_version("redis_version:seven\r\n"), None);
    }

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
