//! One fault applied to or removed from one target, by what it acts on: the target's proxy,
//! its redis-server process, its instances, or commands sent to its Redis (those that change
//! its settings or role for a phase are in `inside`); what a step reports, what it keeps to
//! put back, and what it can fail with.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::faults::{FailoverHow, Fault};
use crate::infra::InfraError;
use crate::infra::RedisServer;
use crate::infra::redis::SharedRedis;
use crate::infra::redis_errors::{Attached, Demoted, ErrorCounts};
use crate::infra::redis_native::{self, MemorySettings, RedisCommandError};
use crate::infra::sentinel::Sentinels;
use crate::infra::toxiproxy::{Stream, Toxic, ToxicKind, Toxiproxy, ToxiproxyError};
use crate::targets::{Fleet, FleetError};

/// A fault that could not be applied or removed.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error(transparent)]
    Toxiproxy(#[from] ToxiproxyError),
    #[error(transparent)]
    Redis(#[from] RedisCommandError),
    #[error(transparent)]
    Infra(#[from] InfraError),
    #[error("{0}: no redis-server is known for this target")]
    NoRedis(String),
    /// Boxed: a target's start failure carries its log's tail.
    #[error(transparent)]
    Fleet(Box<FleetError>),
    #[error("{0}: no instances are known for this target")]
    NoFleet(String),
    #[error("{0}: this target's Redis has no sentinels ([redis] topology = \"sentinel\")")]
    NoSentinels(String),
    /// A fault whose undoing failed too: the target's Redis may be left changed.
    #[error("{0}")]
    Undo(String),
    #[error("{0}: the task applying it panicked")]
    Panicked(String),
}

impl From<FleetError> for FaultError {
    fn from(e: FleetError) -> Self {
        Self::Fleet(Box::new(e))
    }
}

/// One target's faults changed: when the last operation completed, and what the faults
/// report (e.g. how many keys an eviction removed), with the Redis commands they sent
/// themselves (so the target's store amplification leaves them out).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Done {
    pub at: Option<Instant>,
    pub reports: Vec<String>,
    pub commands: u64,
}

/// What a fault inside a Redis changed there, to put back at its end, and the error replies
/// Redis had given when it began (so its end can say how many the fault caused).
#[derive(Debug)]
pub(super) struct Saved {
    pub(super) errors: ErrorCounts,
    pub(super) undo: Undo,
}

/// What putting a fault inside a Redis back takes.
#[derive(Debug)]
pub(super) enum Undo {
    Nothing,
    /// `maxmemory` and its policy as they were.
    Memory(MemorySettings),
    /// The busy threshold's setting and its value before.
    Threshold((String, String)),
    /// The partner server the target's Redis was demoted under, to stop, what the demotion
    /// changed, and the partner's sync file, to delete.
    Partner(Box<(RedisServer, Demoted, std::path::PathBuf)>),
}

/// Per target (slot) and fault (its toxic name), what its step saved.
pub(super) type SavedByFault = std::sync::Mutex<HashMap<(usize, String), Saved>>;

/// Per target, a partner redis-server started and attached as a replica ahead for `readonly`
/// (taken by the fault).
pub(super) type Partners = std::sync::Mutex<Vec<Option<(RedisServer, Attached)>>>;

/// The partner redis-server of the target's Redis `name`, started ahead.
pub(super) fn partner_name(name: &str) -> String {
    format!("{name}-partner")
}

/// The partner a `readonly` fault starts itself when none was ready: named apart, so that it
/// never shares a log or a sync file with one started ahead and still on its way.
pub(super) fn own_partner_name(name: &str) -> String {
    format!("{name}-partner-own")
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Op {
    Apply,
    Remove,
}

/// One fault's step on one target.
pub(super) struct Step<'a> {
    pub(super) client: &'a Toxiproxy,
    pub(super) proxy: &'a str,
    pub(super) redis: Option<&'a SharedRedis>,
    pub(super) redis_addr: Option<SocketAddr>,
    pub(super) fleet: Option<&'a Arc<Fleet>>,
    pub(super) sentinels: Option<&'a Arc<Sentinels>>,
    pub(super) sizes_before: &'a std::sync::Mutex<Vec<Option<usize>>>,
    pub(super) saved: &'a SavedByFault,
    pub(super) partners: &'a Partners,
    pub(super) slot: usize,
    pub(super) name: String,
    pub(super) length: Duration,
}

impl Step<'_> {
    pub(super) fn redis(&self, fault: &Fault) -> Result<&SharedRedis, FaultError> {
        self.redis
            .ok_or_else(|| FaultError::NoRedis(fault.to_string()))
    }

    pub(super) fn redis_addr(&self, fault: &Fault) -> Result<SocketAddr, FaultError> {
        self.redis_addr
            .ok_or_else(|| FaultError::NoRedis(fault.to_string()))
    }

    fn fleet(&self, fault: &Fault) -> Result<&Arc<Fleet>, FaultError> {
        self.fleet
            .ok_or_else(|| FaultError::NoFleet(fault.to_string()))
    }

    /// Applies or removes `fault`: each family's steps side by side, by what they act on.
    pub(super) async fn run(
        &self,
        fault: &Fault,
        op: Op,
        done: &mut Done,
    ) -> Result<(), FaultError> {
        match fault {
            Fault::Down {} | Fault::Flap { .. } | Fault::Toxic(_) | Fault::Hang {} => {
                self.on_proxy(fault, op).await
            }
            Fault::Stall {} | Fault::RedisRestart { .. } => {
                self.on_redis_process(fault, op, done).await
            }
            Fault::Failover { how } => self.failover(*how, op, done).await,
            Fault::Scale { .. } | Fault::KillInstance { .. } => {
                self.on_fleet(fault, op, done).await
            }
            Fault::ClientPause { .. } | Fault::NoisyNeighbour { .. } => {
                self.by_command(fault, op, done).await
            }
            Fault::Eviction { .. }
            | Fault::Oom {}
            | Fault::Readonly {}
            | Fault::Busy { .. }
            | Fault::ScriptFlush {} => self.inside_redis(fault, op, done).await,
        }
    }

    /// The faults on the Toxiproxy proxy: disabled, or toxics added and removed.
    async fn on_proxy(&self, fault: &Fault, op: Op) -> Result<(), FaultError> {
        let (client, proxy, name) = (self.client, self.proxy, self.name.as_str());
        match (fault, op) {
            (Fault::Down {}, Op::Apply) => client.set_enabled(proxy, false).await.map(drop)?,
            (Fault::Down {} | Fault::Flap { .. }, Op::Remove) => {
                client.set_enabled(proxy, true).await.map(drop)?;
            }
            (Fault::Flap { .. }, Op::Apply) => {}
            (Fault::Toxic(kind), Op::Apply) => {
                client
                    .add_toxic(proxy, &Toxic::new(name.to_owned(), *kind))
                    .await?;
            }
            (Fault::Toxic(_), Op::Remove) => client.remove_toxic(proxy, name).await?,
            (Fault::Hang {}, Op::Apply) => {
                let hold = ToxicKind::Timeout { timeout_ms: 0 };
                let up = Toxic::new(format!("{name}-up"), hold).with_stream(Stream::Upstream);
                client.add_toxic(proxy, &up).await?;
                client
                    .add_toxic(proxy, &Toxic::new(format!("{name}-down"), hold))
                    .await?;
            }
            (Fault::Hang {}, Op::Remove) => {
                let up = client.remove_toxic(proxy, &format!("{name}-up")).await;
                let down = client.remove_toxic(proxy, &format!("{name}-down")).await;
                up.and(down)?;
            }
            // `run` routes every other fault to its own family: one here is a routing mistake.
            _ => unreachable!("{fault} is not routed here by Step::run"),
        }
        Ok(())
    }

    /// The faults on failmode's own redis-server process: stopped, or killed and started again.
    async fn on_redis_process(
        &self,
        fault: &Fault,
        op: Op,
        done: &mut Done,
    ) -> Result<(), FaultError> {
        match (fault, op) {
            (Fault::Stall {}, op) => {
                let redis = self.redis(fault)?.lock().await;
                match op {
                    Op::Apply => redis.hang()?,
                    Op::Remove => redis.resume()?,
                }
            }
            (Fault::RedisRestart { down }, Op::Apply) => {
                let mut redis = self.redis(fault)?.lock().await;
                let before = redis.pid();
                // On Redis's own clock (`TIME` reads the same system clock), so a reader can
                // tell where in the limiter's window the counts were lost.
                let killed = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                let started = Instant::now();
                redis.crash_and_restart(*down).await?;
                done.reports.push(format!(
                    "redis-server killed (pid {before}) at unix time {:.3} and started again \
                     empty (pid {}), answering {} ms later",
                    killed.as_secs_f64(),
                    redis.pid(),
                    started.elapsed().as_millis()
                ));
            }
            (Fault::RedisRestart { .. }, Op::Remove) => {}
            // `run` routes every other fault to its own family: one here is a routing mistake.
            _ => unreachable!("{fault} is not routed here by Step::run"),
        }
        Ok(())
    }

    /// A Sentinel topology's primary replaced: killed, or failed over by the sentinels (their
    /// promotion is awaited beside the load: `Player::ongoing`). A killed primary is started
    /// again, empty, at the phase's end.
    async fn failover(&self, how: FailoverHow, op: Op, done: &mut Done) -> Result<(), FaultError> {
        let fault = Fault::Failover { how };
        let sentinels = self
            .sentinels
            .ok_or_else(|| FaultError::NoSentinels(fault.to_string()))?;
        match (how, op) {
            (FailoverHow::Kill, Op::Apply) => {
                let mut redis = self.redis(&fault)?.lock().await;
                let pid = redis.pid();
                redis.kill().await?;
                done.reports.push(format!(
                    "primary killed (SIGKILL, pid {pid}): the sentinels call it down after a \
                     second without an answer"
                ));
            }
            (FailoverHow::Sentinel, Op::Apply) => {
                sentinels.failover().await?;
                done.reports.push("SENTINEL FAILOVER sent".to_owned());
            }
            (FailoverHow::Kill, Op::Remove) => {
                let mut redis = self.redis(&fault)?.lock().await;
                // A kill that failed left the primary running: nothing to start.
                if !redis.is_killed() {
                    return Ok(());
                }
                redis.start_again().await?;
                done.reports.push(format!(
                    "the old primary started again, empty (pid {}): the sentinels make it a \
                     replica of the new one",
                    redis.pid()
                ));
            }
            (FailoverHow::Sentinel, Op::Remove) => {}
        }
        Ok(())
    }

    /// The faults on the target's instances: scaled, or one killed and replaced.
    async fn on_fleet(&self, fault: &Fault, op: Op, done: &mut Done) -> Result<(), FaultError> {
        match (fault, op) {
            (Fault::Scale { to, instance_count }, Op::Apply) => {
                let fleet = self.fleet(fault)?;
                self.sizes_before.lock().unwrap_or_else(|e| e.into_inner())[self.slot] =
                    Some(fleet.size());
                let report = fleet
                    .scale_to(*to as usize, instance_count.unwrap_or(*to))
                    .await
                    .map_err(FleetError::from)?;
                done.reports.push(report);
            }
            (Fault::Scale { .. }, Op::Remove) => {
                let fleet = self.fleet(fault)?;
                let before =
                    self.sizes_before.lock().unwrap_or_else(|e| e.into_inner())[self.slot].take();
                if let Some(size) = before {
                    let report = fleet
                        .scale_to(size, fleet.configured())
                        .await
                        .map_err(FleetError::from)?;
                    done.reports.push(report);
                }
            }
            (Fault::KillInstance { instance, .. }, Op::Apply) => {
                done.reports.push(self.fleet(fault)?.kill(*instance).await?);
            }
            // Not replaced during the phase (no `restart`, or a later one): replaced now.
            (Fault::KillInstance { instance, .. }, Op::Remove) => {
                let replaced = self
                    .fleet(fault)?
                    .replace(*instance)
                    .await
                    .map_err(FleetError::from)?;
                done.reports.extend(replaced);
            }
            // `run` routes every other fault to its own family: one here is a routing mistake.
            _ => unreachable!("{fault} is not routed here by Step::run"),
        }
        Ok(())
    }

    /// The faults that are commands sent to the Redis and change nothing to put back: pauses,
    /// a noisy neighbour.
    async fn by_command(&self, fault: &Fault, op: Op, done: &mut Done) -> Result<(), FaultError> {
        match (fault, op) {
            (Fault::ClientPause { mode }, Op::Apply) => {
                let addr = self.redis_addr(fault)?;
                redis_native::pause(addr, self.length, *mode).await?;
                done.commands += 1;
            }
            (Fault::ClientPause { .. }, Op::Remove) => {
                redis_native::unpause(self.redis_addr(fault)?).await?;
                done.commands += 1;
            }
            (Fault::NoisyNeighbour { keys, .. }, Op::Apply) => {
                redis_native::fill_neighbour(self.redis_addr(fault)?, *keys).await?;
                done.commands += keys.div_ceil(1_000);
            }
            (Fault::NoisyNeighbour { .. }, Op::Remove) => {
                redis_native::clear_neighbour(self.redis_addr(fault)?).await?;
                done.commands += 1;
            }
            // `run` routes every other fault to its own family: one here is a routing mistake.
            _ => unreachable!("{fault} is not routed here by Step::run"),
        }
        Ok(())
    }
}
