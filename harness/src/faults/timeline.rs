//! Applying a phase's faults to every target's proxy (or Redis) at the same moment, and
//! removing them.
//!
//! Each proxy's operations run in their own task, all started together, so targets are
//! compared side by side; the instant each proxy actually changed is returned for the record.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::Fault;
use super::toxiproxy::{Stream, Toxic, ToxicKind, Toxiproxy, ToxiproxyError};

/// One proxy's result: when its last operation completed, or why it failed.
pub type ProxyOutcome = Result<Instant, ToxiproxyError>;

fn toxic_name(phase: &str, index: usize) -> String {
    format!("failmode-{phase}-{index}")
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Apply,
    Remove,
}

/// Drives the faults of the timeline on a set of proxies (and, for `stall`, on the Redis
/// server behind each).
#[derive(Debug, Clone)]
pub struct Player {
    toxiproxy: Toxiproxy,
    proxies: Vec<String>,
    /// Per proxy, the process group of the redis-server behind it.
    redis_groups: Vec<Option<i32>>,
}

/// Stops or resumes a redis-server's process group (it leads its own: see `infra::process`).
fn signal_redis(group: Option<i32>, signal: Signal) -> Result<(), ToxiproxyError> {
    let op = format!("{signal} to redis-server");
    let group = group.ok_or_else(|| ToxiproxyError::Invalid {
        op: op.clone(),
        reason: "no redis-server process is known for this target".into(),
    })?;
    killpg(Pid::from_raw(group), signal).map_err(|e| ToxiproxyError::Invalid {
        op: format!("{op} (process group {group})"),
        reason: e.to_string(),
    })
}

impl Player {
    pub fn new(toxiproxy: Toxiproxy, proxies: Vec<String>) -> Self {
        let redis_groups = vec![None; proxies.len()];
        Self {
            toxiproxy,
            proxies,
            redis_groups,
        }
    }

    /// The redis-server behind each proxy, in the same order, for `stall`.
    pub fn with_redis_groups(mut self, groups: Vec<Option<i32>>) -> Self {
        self.redis_groups = groups;
        self
    }

    /// Applies `faults` to every proxy at once; the outcomes are in `proxies` order.
    /// `flap` faults are not applied here: [`Player::flap`] drives them for the phase.
    pub async fn apply(&self, phase: &str, faults: &[Fault]) -> Vec<ProxyOutcome> {
        self.each(phase, faults, Op::Apply).await
    }

    /// Removes what [`Player::apply`] added and re-enables the proxies.
    pub async fn remove(&self, phase: &str, faults: &[Fault]) -> Vec<ProxyOutcome> {
        self.each(phase, faults, Op::Remove).await
    }

    async fn each(&self, phase: &str, faults: &[Fault], op: Op) -> Vec<ProxyOutcome> {
        let mut tasks = JoinSet::new();
        for (slot, proxy) in self.proxies.iter().enumerate() {
            let (client, proxy, phase, faults) = (
                self.toxiproxy.clone(),
                proxy.clone(),
                phase.to_owned(),
                faults.to_vec(),
            );
            let redis = self.redis_groups.get(slot).copied().flatten();
            tasks.spawn(async move {
                let mut outcome = Ok(());
                for (i, fault) in faults.iter().enumerate() {
                    let step = match (fault, op) {
                        (Fault::Down {}, Op::Apply) => {
                            client.set_enabled(&proxy, false).await.map(drop)
                        }
                        (Fault::Down {} | Fault::Flap { .. }, Op::Remove) => {
                            client.set_enabled(&proxy, true).await.map(drop)
                        }
                        (Fault::Flap { .. }, Op::Apply) => Ok(()),
                        (Fault::Stall {}, Op::Apply) => signal_redis(redis, Signal::SIGSTOP),
                        (Fault::Stall {}, Op::Remove) => signal_redis(redis, Signal::SIGCONT),
                        (Fault::Toxic(kind), Op::Apply) => client
                            .add_toxic(&proxy, &Toxic::new(toxic_name(&phase, i), *kind))
                            .await
                            .map(drop),
                        (Fault::Toxic(_), Op::Remove) => {
                            client.remove_toxic(&proxy, &toxic_name(&phase, i)).await
                        }
                        (Fault::Hang {}, Op::Apply) => {
                            let hold = ToxicKind::Timeout { timeout_ms: 0 };
                            let up = Toxic::new(format!("{}-up", toxic_name(&phase, i)), hold)
                                .with_stream(Stream::Upstream);
                            let down = Toxic::new(format!("{}-down", toxic_name(&phase, i)), hold);
                            match client.add_toxic(&proxy, &up).await {
                                Ok(_) => client.add_toxic(&proxy, &down).await.map(drop),
                                Err(e) => Err(e),
                            }
                        }
                        (Fault::Hang {}, Op::Remove) => {
                            let name = toxic_name(&phase, i);
                            let up = client.remove_toxic(&proxy, &format!("{name}-up")).await;
                            let down = client.remove_toxic(&proxy, &format!("{name}-down")).await;
                            up.and(down)
                        }
                    };
                    if let Err(e) = step {
                        outcome = Err(e);
                    }
                }
                (slot, outcome.map(|()| Instant::now()))
            });
        }
        let mut outcomes: Vec<Option<ProxyOutcome>> = self.proxies.iter().map(|_| None).collect();
        while let Some(joined) = tasks.join_next().await {
            if let Ok((slot, outcome)) = joined {
                outcomes[slot] = Some(outcome);
            }
        }
        outcomes
            .into_iter()
            .zip(&self.proxies)
            .map(|(o, proxy)| {
                o.unwrap_or_else(|| {
                    Err(ToxiproxyError::Invalid {
                        op: format!("apply faults to {proxy}"),
                        reason: "the task applying them panicked".into(),
                    })
                })
            })
            .collect()
    }

    /// Cuts every proxy for `down` at the start of each `period` from `from` (the phase's
    /// start, not when this task got going) until `until` or `cancel`.
    pub async fn flap(
        &self,
        from: Instant,
        period: Duration,
        down: Duration,
        until: Instant,
        cancel: &CancellationToken,
    ) {
        let mut cycle_start = from;
        while cycle_start < until && !cancel.is_cancelled() {
            self.set_all(false).await;
            let up_at = (cycle_start + down).min(until);
            if sleep_until(up_at, cancel).await {
                self.set_all(true).await;
                return;
            }
            self.set_all(true).await;
            cycle_start += period.max(Duration::from_millis(1));
            if sleep_until(cycle_start.min(until), cancel).await {
                return;
            }
        }
    }

    async fn set_all(&self, enabled: bool) {
        let mut tasks = JoinSet::new();
        for proxy in &self.proxies {
            let (client, proxy) = (self.toxiproxy.clone(), proxy.clone());
            tasks.spawn(async move {
                if let Err(e) = client.set_enabled(&proxy, enabled).await {
                    tracing::warn!(error = %e, "flap: could not switch the proxy");
                }
            });
        }
        while tasks.join_next().await.is_some() {}
    }
}

/// Sleeps until `at`; true if cancelled first.
pub async fn sleep_until(at: Instant, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => true,
        _ = tokio::time::sleep_until(at.into()) => false,
    }
}
