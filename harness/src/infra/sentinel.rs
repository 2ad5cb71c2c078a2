//! A Redis Sentinel topology's own processes and commands: three sentinels
//! (`redis-server --sentinel`) watching one primary on loopback, a replica that announces the
//! address clients must use (a proxy's, not its own), and the failover itself. Which proxies
//! sit where is the run's (`run::replicated`) to say.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use super::InfraError;
use super::process::{ChildProcess, free_port, wait_for_tcp};
use super::redis_errors::{replica_of, until_replication};
use super::redis_native::{RedisCommandError, config_set, connect, run};

/// The name the sentinels monitor the primary under (`{sentinel_master}`).
pub const MASTER_NAME: &str = "failmode";
const SENTINELS: usize = 3;
/// Two of three: one sentinel alone never calls the primary down.
const QUORUM: usize = 2;
/// How long the primary must not answer before a sentinel calls it down: short, so a failover
/// fits a scenario's phase (the promotion follows within about a second of the quorum).
const DOWN_AFTER: Duration = Duration::from_millis(1_000);
/// The shortest failover phase a run accepts: the sentinels wait [`DOWN_AFTER`], then promoted
/// the replica 1.6–2.4 s after a kill on the project's 2-core machine; a phase shorter than
/// this would end before the promotion, bring the killed primary back empty and measure no
/// failover at all.
pub const MIN_FAILOVER_PHASE: Duration = Duration::from_secs(4);
/// Long: besides bounding one failover, a sentinel "fixes" a replica that replicates from
/// another address than the primary's known one (ours does, through the link proxy) once
/// twice this has passed without a change, which would take the link's lag away mid-run.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(3_600);
/// Told of the replica and of each other, the sentinels agree at once; left to find them, a
/// sentinel would learn of the replica from the primary's `INFO`, read every 10 s.
const WATCHING_TIMEOUT: Duration = Duration::from_secs(30);
const START_TIMEOUT: Duration = Duration::from_secs(10);
const START_ATTEMPTS: usize = 5;
const POLL: Duration = Duration::from_millis(100);

/// Three sentinels owned by the harness; each killed with its process group on drop.
#[derive(Debug)]
pub struct Sentinels {
    children: Vec<ChildProcess>,
    addrs: Vec<SocketAddr>,
    first_primary: SocketAddr,
}

impl Sentinels {
    /// Starts three sentinels monitoring the primary at `primary` (the address clients reach
    /// it by), each with its config file `<dir>/<name>-<i>.conf` (which a sentinel rewrites),
    /// told of the replica at `replica` and of each other: left to find them, a sentinel
    /// learns of a replica from the primary's `INFO`, read every 10 s.
    pub async fn start(
        name: &str,
        dir: &Path,
        primary: SocketAddr,
        replica: SocketAddr,
    ) -> Result<Self, InfraError> {
        let mut last = None;
        // Another process may take a probed port before a sentinel binds it: each names the
        // others' ports, so the three are tried again together, as a redis-server is alone.
        for _ in 0..START_ATTEMPTS {
            let addrs = (0..SENTINELS)
                .map(|_| free_port().map(|p| SocketAddr::from((Ipv4Addr::LOCALHOST, p))))
                .collect::<Result<Vec<_>, _>>()?;
            let mut sentinels = Self {
                children: Vec::new(),
                addrs: addrs.clone(),
                first_primary: primary,
            };
            for i in 0..SENTINELS {
                let child_name = format!("{name}-{i}");
                let path = dir.join(format!("{child_name}.conf"));
                let text = config(i, &addrs, primary, replica);
                std::fs::write(&path, text).map_err(|source| InfraError::Config {
                    name: child_name.clone(),
                    path: path.clone(),
                    source,
                })?;
                let log = dir.join(format!("{child_name}.log"));
                sentinels.children.push(ChildProcess::spawn(
                    &child_name,
                    "redis-server",
                    [path.as_os_str(), "--sentinel".as_ref()],
                    &[],
                    &log,
                )?);
            }
            let mut started = Ok(());
            for (child, &addr) in sentinels.children.iter_mut().zip(&addrs) {
                started = started.and(wait_for_tcp(addr, START_TIMEOUT, child).await);
            }
            match started {
                Ok(()) => return Ok(sentinels),
                Err(e @ InfraError::PortInUse { .. }) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| InfraError::NoFreePort(std::io::Error::other("no attempt"))))
    }

    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The three processes, for the run to notice one that dies.
    pub(crate) fn processes(&self) -> &[ChildProcess] {
        &self.children
    }

    /// The primary they were started watching.
    pub fn first_primary(&self) -> SocketAddr {
        self.first_primary
    }

    /// Until every sentinel knows the replica at `replica` and the other sentinels: before
    /// that, a failover could find no replica to promote or no quorum.
    pub async fn until_watching(&self, replica: SocketAddr) -> Result<(), RedisCommandError> {
        let started = Instant::now();
        loop {
            let mut ready = true;
            for &addr in &self.addrs {
                let master: Vec<String> = sentinel(addr, "MASTER").await?;
                let replicas = replicas(&sentinel::<Vec<Vec<String>>>(addr, "REPLICAS").await?);
                ready &= field(&pairs(&master), "num-other-sentinels")
                    == Some(SENTINELS as u64 - 1)
                    && replicas.contains(&replica);
            }
            if ready {
                return Ok(());
            }
            if started.elapsed() > WATCHING_TIMEOUT {
                return Err(RedisCommandError::detail(
                    "SENTINEL MASTER",
                    self.addrs[0],
                    format!(
                        "after {WATCHING_TIMEOUT:?} the sentinels do not all know the replica \
                         {replica} and each other"
                    ),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// `SENTINEL FAILOVER`: a failover now, without waiting for the primary to be down.
    pub async fn failover(&self) -> Result<(), RedisCommandError> {
        sentinel(self.addrs[0], "FAILOVER").await
    }

    /// The primary's address as the sentinels hand it out now: the first sentinel's word, as a
    /// client asks them in order (ioredis, redis-rs, go-redis). The leader of a failover may
    /// know a second or two before the first one hears of it; the time a client sees is this.
    pub async fn primary(&self) -> Result<SocketAddr, RedisCommandError> {
        let addr = self.addrs[0];
        let (host, port): (String, u16) = sentinel(addr, "GET-MASTER-ADDR-BY-NAME").await?;
        format!("{host}:{port}").parse().map_err(|e| {
            RedisCommandError::detail(
                "SENTINEL GET-MASTER-ADDR-BY-NAME",
                addr,
                format!("{host}:{port}: {e}"),
            )
        })
    }

    /// Until the sentinels hand out another primary than `was`, within `timeout`: the new one.
    pub async fn until_promoted(
        &self,
        was: SocketAddr,
        timeout: Duration,
    ) -> Result<SocketAddr, RedisCommandError> {
        let started = Instant::now();
        loop {
            let now = self.primary().await?;
            if now != was {
                return Ok(now);
            }
            if started.elapsed() > timeout {
                return Err(RedisCommandError::detail(
                    "SENTINEL GET-MASTER-ADDR-BY-NAME",
                    self.addrs[0],
                    format!("still {was} after {timeout:?}: no failover"),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Sentinel `i`'s run id, 40 hex digits as Redis's own: given, so each can be told the
/// others' beforehand.
fn sentinel_id(i: usize) -> String {
    format!("{:040x}", i + 1)
}

/// Sentinel `i`'s (of those at `all`) configuration: it and the servers it finds announce
/// loopback addresses as given, never resolved; it knows the replica and the other sentinels
/// from the start.
fn config(i: usize, all: &[SocketAddr], primary: SocketAddr, replica: SocketAddr) -> String {
    let own_port = all[i].port();
    let mut text = format!(
        "port {own_port}\nbind 127.0.0.1\nprotected-mode no\n\
         sentinel myid {id}\n\
         sentinel resolve-hostnames no\n\
         sentinel announce-ip 127.0.0.1\nsentinel announce-port {own_port}\n\
         sentinel monitor {MASTER_NAME} {ip} {port} {QUORUM}\n\
         sentinel down-after-milliseconds {MASTER_NAME} {down}\n\
         sentinel failover-timeout {MASTER_NAME} {failover}\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n\
         sentinel known-replica {MASTER_NAME} {replica_ip} {replica_port}\n",
        id = sentinel_id(i),
        ip = primary.ip(),
        port = primary.port(),
        down = DOWN_AFTER.as_millis(),
        failover = FAILOVER_TIMEOUT.as_millis(),
        replica_ip = replica.ip(),
        replica_port = replica.port(),
    );
    for (j, other) in all.iter().enumerate().filter(|(j, _)| *j != i) {
        text.push_str(&format!(
            "sentinel known-sentinel {MASTER_NAME} {} {} {}\n",
            other.ip(),
            other.port(),
            sentinel_id(j)
        ));
    }
    text
}

/// Makes the empty server at `replica` a replica of the primary reached at `upstream`,
/// announcing itself as `announce` (where clients reach it), and waits for its first sync.
pub async fn attach_replica(
    replica: SocketAddr,
    announce: SocketAddr,
    upstream: SocketAddr,
) -> Result<(), RedisCommandError> {
    let mut conn = connect(replica, 0).await?;
    let announced = [
        ("replica-announce-ip", announce.ip().to_string()),
        ("replica-announce-port", announce.port().to_string()),
    ];
    for (key, value) in announced {
        config_set(&mut conn, replica, key, &value).await?;
    }
    replica_of(replica, Some(upstream)).await?;
    until_replication(replica, "the replica's first sync", |i| {
        i.get("master_link_status").is_some_and(|s| s == "up")
    })
    .await
}

/// `SENTINEL <what> failmode` asked of the sentinel at `addr`.
async fn sentinel<T: redis::FromRedisValue>(
    addr: SocketAddr,
    what: &str,
) -> Result<T, RedisCommandError> {
    let mut conn = connect(addr, 0).await?;
    let mut cmd = redis::cmd("SENTINEL");
    cmd.arg(what).arg(MASTER_NAME);
    run(&mut conn, addr, &cmd, &format!("SENTINEL {what}")).await
}

/// The replicas of a `SENTINEL REPLICAS` reply, by the address they announce.
fn replicas(each: &[Vec<String>]) -> Vec<SocketAddr> {
    each.iter()
        .filter_map(|flat| {
            let m = pairs(flat);
            format!("{}:{}", m.get("ip")?, m.get("port")?).parse().ok()
        })
        .collect()
}

/// A flat list of field, value (a sentinel's reply about an instance) as a map.
fn pairs(flat: &[String]) -> BTreeMap<String, String> {
    flat.chunks_exact(2)
        .map(|kv| (kv[0].clone(), kv[1].clone()))
        .collect()
}

fn field(map: &BTreeMap<String, String>, key: &str) -> Option<u64> {
    map.get(key)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_monitors_the_primary_by_the_address_given_and_knows_the_replica_and_the_others() {
        let all: Vec<SocketAddr> = ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]
            .map(|a| a.parse().unwrap())
            .to_vec();
        let text = config(
            1,
            &all,
            "127.0.0.1:6001".parse().unwrap(),
            "127.0.0.1:6002".parse().unwrap(),
        );
        assert!(text.contains("port 7002\n"), "{text}");
        assert!(text.contains("sentinel announce-port 7002\n"), "{text}");
        assert!(text.contains(&format!("sentinel myid {}\n", sentinel_id(1))));
        assert!(
            text.contains("sentinel monitor failmode 127.0.0.1 6001 2\n"),
            "{text}"
        );
        assert!(
            text.contains("known-replica failmode 127.0.0.1 6002\n"),
            "{text}"
        );
        assert!(text.contains(&format!(
            "known-sentinel failmode 127.0.0.1 7001 {}\n",
            sentinel_id(0)
        )));
        assert!(
            !text.contains("known-sentinel failmode 127.0.0.1 7002"),
            "{text}"
        );
        assert!(text.contains("down-after-milliseconds failmode 1000\n"));
        assert_eq!(sentinel_id(2).len(), 40);
    }

    #[test]
    fn a_sentinel_reply_of_fields_and_values_reads_as_a_map() {
        let flat: Vec<String> = [
            "ip",
            "127.0.0.1",
            "port",
            "6002",
            "num-other-sentinels",
            "2",
        ]
        .map(String::from)
        .to_vec();
        let m = pairs(&flat);
        assert_eq!(m["port"], "6002");
        assert_eq!(field(&m, "num-other-sentinels"), Some(2));
    }
}
