//! A target's Redis as a Sentinel topology (`[redis] topology = "sentinel"`). Beside its
//! primary and the proxy clients reach it by: a replica behind a proxy of its own, the
//! replication link through a third proxy that delays it (on loopback a replica is never
//! behind, so a failover would lose nothing), and three sentinels that watch the primary
//! through its proxy and so hand out the proxies' addresses: clients that follow the
//! sentinels still go through Toxiproxy after a failover.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::RunError;
use crate::infra::RedisServer;
use crate::infra::sentinel::{self, MASTER_NAME, Sentinels};
use crate::infra::toxiproxy::{Toxic, ToxicKind, Toxiproxy};
use crate::targets::SentinelEndpoint;

/// What a Sentinel topology adds to a target's world; its processes die with it.
#[derive(Debug)]
pub struct Replicated {
    pub replica: RedisServer,
    pub sentinels: Arc<Sentinels>,
}

impl Replicated {
    /// `{sentinel_addrs}` and `{sentinel_master}` for the target's instances.
    pub fn endpoint(&self) -> SentinelEndpoint {
        SentinelEndpoint {
            sentinels: self.sentinels.addrs().to_vec(),
            master: MASTER_NAME.to_owned(),
        }
    }
}

/// The proxies' names in Toxiproxy, beside the target's own (`name`).
fn replica_proxy(name: &str) -> String {
    format!("{name}-replica")
}

fn link_proxy(name: &str) -> String {
    format!("{name}-replication")
}

/// Starts the replica, its proxy and the delayed link, syncs the replica, then the sentinels,
/// and waits until they all know the replica and each other: a failover before that would
/// find nothing to promote.
pub(super) async fn start(
    toxiproxy: &Toxiproxy,
    name: &str,
    primary: SocketAddr,
    primary_proxy: SocketAddr,
    replication_lag: Duration,
    log_dir: &Path,
) -> Result<Replicated, RunError> {
    let replica = RedisServer::start(&format!("redis-{name}-replica"), log_dir).await?;
    let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
    let replica_proxy = toxiproxy
        .create_proxy(&replica_proxy(name), any_port, replica.addr())
        .await?
        .listening()?;
    let link = link_proxy(name);
    let link_addr = toxiproxy
        .create_proxy(&link, any_port, primary)
        .await?
        .listening()?;
    let lag = u64::try_from(replication_lag.as_millis()).unwrap_or(u64::MAX);
    toxiproxy
        .add_toxic(
            &link,
            &Toxic::new(
                "replication-lag".to_owned(),
                ToxicKind::Latency {
                    latency_ms: lag,
                    jitter_ms: 0,
                },
            ),
        )
        .await?;
    let failed = |source| RunError::Sentinel {
        target: name.to_owned(),
        source,
    };
    sentinel::attach_replica(replica.addr(), replica_proxy, link_addr)
        .await
        .map_err(failed)?;
    let sentinels = Sentinels::start(
        &format!("sentinel-{name}"),
        log_dir,
        primary_proxy,
        replica_proxy,
    )
    .await?;
    sentinels
        .until_watching(replica_proxy)
        .await
        .map_err(failed)?;
    Ok(Replicated {
        replica,
        sentinels: Arc::new(sentinels),
    })
}
