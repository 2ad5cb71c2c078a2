//! Applying a phase's faults to every target's proxy (or Redis, or instances) at the same
//! moment, and removing them; and the faults that run beside the load for a whole phase
//! (flapping, a noisy neighbour, a memory-filling writer, an instance replaced after a kill).
//!
//! Each target's operations run in their own task, all started together, so targets are
//! compared side by side; the instant each target's faults actually changed is returned for
//! the record, with what the faults themselves report (e.g. keys evicted).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::inside::{remove_cut_off_syncs, sync_files};
use super::step::{Done, FaultError, Op, Partners, SavedByFault, Step, partner_name};
use crate::faults::Fault;
use crate::infra::RedisServer;
use crate::infra::redis::SharedRedis;
use crate::infra::redis_errors;
use crate::infra::redis_native;
use crate::infra::sentinel::Sentinels;
use crate::infra::toxiproxy::Toxiproxy;
use crate::scenario::Phase;
use crate::targets::{Fleet, FleetError};
use crate::wait::sleep_until;

/// How long before its phase a `readonly` fault's partner is started: a start and sync took
/// 70-300 ms; a phase sooner than this starts its own, so two never race for one name.
const PARTNER_LEAD: Duration = Duration::from_secs(1);

/// One target's result, or why it failed.
pub type Outcome = Result<Done, FaultError>;

fn toxic_name(phase: &str, index: usize) -> String {
    format!("failmode-{phase}-{index}")
}
/// Drives the faults of the timeline on a set of proxies and the redis-server behind each.
#[derive(Debug, Clone)]
pub struct Player {
    toxiproxy: Toxiproxy,
    proxies: Vec<String>,
    /// Per proxy, failmode's own redis-server process behind it, for the faults that signal
    /// it (`stall`, `redis-restart`).
    redis: Vec<Option<SharedRedis>>,
    /// Per proxy, the Redis behind it as the faults that are commands reach it: failmode's own
    /// process or container, or an attached deployment's (which takes only `CLIENT PAUSE`).
    redis_addrs: Vec<Option<SocketAddr>>,
    /// What the faults inside each Redis changed there, to put back at their end.
    saved: Arc<SavedByFault>,
    /// Per proxy, a redis-server started ahead for `readonly` to demote the target's under.
    partners: Arc<Partners>,
    /// Per proxy, the target's instances, for the faults in its topology.
    fleets: Vec<Option<Arc<Fleet>>>,
    /// Per proxy, its size before `scale`, to scale back to at its end.
    sizes_before: Arc<std::sync::Mutex<Vec<Option<usize>>>>,
    /// Per proxy, the sentinels of its Sentinel topology, for `failover`.
    sentinels: Vec<Option<Arc<Sentinels>>>,
}

/// The per-target outcomes of `tasks`, in target order (a task that panicked reports none).
async fn in_slot_order(mut tasks: JoinSet<(usize, Outcome)>) -> Vec<(usize, Outcome)> {
    let mut outcomes = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        if let Ok(outcome) = joined {
            outcomes.push(outcome);
        }
    }
    outcomes.sort_by_key(|(slot, _)| *slot);
    outcomes
}

impl Player {
    pub fn new(toxiproxy: Toxiproxy, proxies: Vec<String>) -> Self {
        let redis = vec![None; proxies.len()];
        Self {
            toxiproxy,
            redis_addrs: vec![None; proxies.len()],
            fleets: vec![None; proxies.len()],
            sentinels: vec![None; proxies.len()],
            sizes_before: Arc::new(std::sync::Mutex::new(vec![None; proxies.len()])),
            partners: Arc::new(std::sync::Mutex::new(
                (0..proxies.len()).map(|_| None).collect(),
            )),
            proxies,
            redis,
            saved: Arc::default(),
        }
    }

    /// Starts, in the background, the partner a `readonly` in `phases` demotes each
    /// target's own Redis under, and attaches it as a replica (synced, its sync files
    /// deleted), so that the fault begins with the swap of roles alone: starting and syncing
    /// a partner inside the phase put the fault in place 70-130 ms into it, and up to 0.3 s
    /// on a busy machine, answered by a healthy Redis meanwhile. Not when the first such
    /// phase starts within [`PARTNER_LEAD`]: its fault starts its own, as one does that finds
    /// its partner not ready; one never used is stopped with the player.
    pub fn start_partners(&self, phases: &[Phase]) {
        let first = phases
            .iter()
            .find(|p| p.faults.iter().any(|f| matches!(f, Fault::Readonly {})));
        if first.is_none_or(|p| p.start < PARTNER_LEAD) {
            return;
        }
        for (slot, server) in self.redis.iter().enumerate() {
            let Some(server) = server.clone() else {
                continue;
            };
            let partners = Arc::clone(&self.partners);
            tokio::spawn(async move {
                let (name, dir, primary) = {
                    let redis = server.lock().await;
                    (
                        redis.name().to_owned(),
                        redis.dir().to_owned(),
                        redis.addr(),
                    )
                };
                // Not held while the partner starts: the run may be ending.
                drop(server);
                // A failed start or sync is the fault's to meet and report, when it starts its
                // own partner.
                let Ok(mut partner) = RedisServer::start(&partner_name(&name), &dir).await else {
                    return;
                };
                let attached = redis_errors::attach_partner(primary, partner.addr()).await;
                // Stopped before its files go: it may have been mid-transfer.
                let cut_off = if attached.is_err() {
                    let pid = partner.pid();
                    let _ = partner.stop().await;
                    Some(pid)
                } else {
                    None
                };
                sync_files(&name, &dir)
                    .iter()
                    .for_each(|f| drop(std::fs::remove_file(f)));
                if let Some(pid) = cut_off {
                    remove_cut_off_syncs(&dir, &[pid]);
                } else if let Ok(attached) = attached {
                    let mut slots = partners.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(free @ None) = slots.get_mut(slot) {
                        *free = Some((partner, attached));
                    }
                }
            });
        }
    }

    /// The address of the partner started ahead for proxy `slot`'s `readonly`, once it is
    /// attached and waiting for the fault to take it: the event a test of that hand-over awaits
    /// (the replica is online on the primary a little before its starter records it).
    #[cfg(any(test, feature = "test-support"))]
    pub fn partner_ready(&self, slot: usize) -> Option<SocketAddr> {
        let slots = self.partners.lock().unwrap_or_else(|e| e.into_inner());
        slots.get(slot)?.as_ref().map(|(partner, _)| partner.addr())
    }

    /// Each target's instances, in the same order, for the faults in its topology.
    pub fn with_fleets(mut self, fleets: Vec<Option<Arc<Fleet>>>) -> Self {
        self.fleets = fleets;
        self
    }

    /// The sentinels of each proxy's Sentinel topology, in the same order.
    pub fn with_sentinels(mut self, sentinels: Vec<Option<Arc<Sentinels>>>) -> Self {
        self.sentinels = sentinels;
        self
    }

    /// The redis-server behind each proxy, in the same order, for the faults inside Redis;
    /// their addresses too (which [`Player::with_redis_addrs`] may then replace).
    pub async fn with_redis(mut self, servers: Vec<Option<SharedRedis>>) -> Self {
        let mut addrs = Vec::with_capacity(servers.len());
        for server in &servers {
            addrs.push(match server {
                Some(server) => Some(server.lock().await.addr()),
                None => None,
            });
        }
        self.redis_addrs = addrs;
        self.redis = servers;
        self
    }

    /// Each target's Redis by address only (a container's, an attached deployment's): the
    /// faults that are commands reach it; those that need failmode's own process do not.
    pub fn with_redis_addrs(mut self, addrs: Vec<Option<SocketAddr>>) -> Self {
        self.redis_addrs = addrs;
        self
    }

    /// Applies `faults` (of a phase `length` long) to every target at once, but for those in
    /// `in_place` (still applied from the phase before); the outcomes are in `proxies` order.
    /// What runs for the whole phase starts with [`Player::ongoing`].
    pub async fn apply(
        &self,
        phase: &str,
        faults: &[Fault],
        in_place: &[Fault],
        length: Duration,
    ) -> Vec<Outcome> {
        self.each(phase, faults, in_place, Op::Apply, length).await
    }

    /// Removes what [`Player::apply`] did and re-enables the proxies, but for the faults in
    /// `staying` (the next phase keeps them).
    pub async fn remove(&self, phase: &str, faults: &[Fault], staying: &[Fault]) -> Vec<Outcome> {
        self.each(phase, faults, staying, Op::Remove, Duration::ZERO)
            .await
    }

    async fn each(
        &self,
        phase: &str,
        faults: &[Fault],
        skip: &[Fault],
        op: Op,
        length: Duration,
    ) -> Vec<Outcome> {
        let mut tasks = JoinSet::new();
        for slot in 0..self.proxies.len() {
            let (player, phase, faults) = (self.clone(), phase.to_owned(), faults.to_vec());
            let skip = skip.to_vec();
            tasks.spawn(async move {
                let mut done = Done::default();
                let mut outcome = Ok(());
                // Skipped by position, so a toxic keeps the name its index gives it; removed
                // in the reverse order, so two faults on the same setting put back the first
                // one's value last.
                let mut order: Vec<(usize, &Fault)> = faults
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| !skip.contains(f))
                    .collect();
                if matches!(op, Op::Remove) {
                    order.reverse();
                }
                for (i, fault) in order {
                    let step = Step {
                        client: &player.toxiproxy,
                        proxy: &player.proxies[slot],
                        redis: player.redis.get(slot).and_then(Option::as_ref),
                        redis_addr: player.redis_addrs.get(slot).copied().flatten(),
                        fleet: player.fleets.get(slot).and_then(Option::as_ref),
                        sentinels: player.sentinels.get(slot).and_then(Option::as_ref),
                        sizes_before: &player.sizes_before,
                        saved: &player.saved,
                        partners: &player.partners,
                        slot,
                        name: toxic_name(&phase, i),
                        length,
                    };
                    if let Err(e) = step.run(fault, op, &mut done).await {
                        outcome = Err(e);
                    }
                }
                done.at = Some(Instant::now());
                (slot, outcome.map(|()| done))
            });
        }
        let mut outcomes: Vec<Option<Outcome>> = self.proxies.iter().map(|_| None).collect();
        while let Some(joined) = tasks.join_next().await {
            if let Ok((slot, outcome)) = joined {
                outcomes[slot] = Some(outcome);
            }
        }
        outcomes
            .into_iter()
            .zip(&self.proxies)
            .map(|(o, proxy)| {
                o.unwrap_or_else(|| Err(FaultError::Panicked(format!("faults on {proxy}"))))
            })
            .collect()
    }

    /// Runs what `fault` does for the whole phase, from `from` until `until` (or `cancel`):
    /// the flapping of every proxy, a noisy neighbour or a memory-filling writer on every
    /// Redis. Returns, per target that has anything to report, what it did.
    pub async fn ongoing(
        &self,
        fault: &Fault,
        from: Instant,
        until: Instant,
        cancel: &CancellationToken,
    ) -> Vec<(usize, Outcome)> {
        if let Fault::Flap { period, down } = *fault {
            self.flap(from, period, down, until, cancel).await;
            return Vec::new();
        }
        if let Fault::Failover { .. } = fault {
            return self.promotions(from, until, cancel).await;
        }
        if let Fault::KillInstance {
            instance,
            restart: Some(after),
        } = *fault
        {
            return self
                .replace_killed(instance, from + after, until, cancel)
                .await;
        }
        let mut tasks = JoinSet::new();
        for (slot, addr) in self.redis_addrs.iter().enumerate() {
            let Some(addr) = addr else { continue };
            let (fault, addr, cancel) = (fault.clone(), *addr, cancel.clone());
            tasks.spawn(async move {
                let mut done = Done::default();
                let outcome = match fault {
                    Fault::NoisyNeighbour { keys, pause } => {
                        redis_native::neighbour(addr, keys, pause, until, &cancel)
                            .await
                            .map(|report| {
                                done.commands = report.scans as u64;
                                done.reports.push(report.to_string());
                            })
                    }
                    Fault::Eviction {
                        rate, value_bytes, ..
                    } => redis_native::fill_memory(addr, rate, value_bytes, until, &cancel)
                        .await
                        .map(|written| {
                            done.commands = written;
                            done.reports.push(format!(
                                "eviction: {written} filler values of {} KiB written",
                                value_bytes / 1024
                            ));
                        }),
                    Fault::Busy { .. } => {
                        redis_errors::hold_with_script(addr, from, until, &cancel)
                            .await
                            .map(|report| {
                                // EVAL and SCRIPT KILL; the PINGs until Redis was busy
                                // are left out (a few, failmode's own).
                                done.commands = 2;
                                done.reports.push(report.to_string());
                            })
                    }
                    _ => Ok(()),
                };
                done.at = Some(Instant::now());
                (slot, outcome.map(|()| done).map_err(FaultError::from))
            });
        }
        in_slot_order(tasks).await
    }

    /// Waits, on every target with sentinels, until they hand out another primary than the
    /// first, and says how long after `from` (the failover's start) that was; a failover with
    /// no promotion by `until` is a failure.
    async fn promotions(
        &self,
        from: Instant,
        until: Instant,
        cancel: &CancellationToken,
    ) -> Vec<(usize, Outcome)> {
        let mut tasks = JoinSet::new();
        for (slot, sentinels) in self.sentinels.iter().enumerate() {
            let Some(sentinels) = sentinels.clone() else {
                continue;
            };
            let cancel = cancel.clone();
            tasks.spawn(async move {
                let was = sentinels.first_primary();
                let within = until.saturating_duration_since(Instant::now());
                let promoted = tokio::select! {
                    promoted = sentinels.until_promoted(was, within) => promoted,
                    () = cancel.cancelled() => return (slot, Ok(Done::default())),
                };
                let outcome = promoted
                    .map(|now| {
                        let at = Instant::now();
                        Done {
                            at: Some(at),
                            reports: vec![format!(
                                "the sentinels handed out {now} in place of {was} {} ms after \
                                 the failover began",
                                at.duration_since(from).as_millis()
                            )],
                            commands: 0,
                        }
                    })
                    .map_err(FaultError::from);
                (slot, outcome)
            });
        }
        in_slot_order(tasks).await
    }

    /// Starts an instance in place of the killed one on every target at `at`, unless the
    /// phase ends (or the run stops) first.
    async fn replace_killed(
        &self,
        killed: usize,
        at: Instant,
        until: Instant,
        cancel: &CancellationToken,
    ) -> Vec<(usize, Outcome)> {
        if at >= until || sleep_until(at, cancel).await {
            return Vec::new();
        }
        let mut tasks = JoinSet::new();
        for (slot, fleet) in self.fleets.iter().enumerate() {
            let Some(fleet) = fleet.clone() else { continue };
            let cancel = cancel.clone();
            tasks.spawn(async move {
                // An interrupt does not wait for the new instance to be ready.
                let replaced = tokio::select! {
                    replaced = fleet.replace(killed) => replaced,
                    () = cancel.cancelled() => Ok(None),
                };
                let outcome = replaced
                    .map(|report| Done {
                        at: Some(Instant::now()),
                        reports: report.into_iter().collect(),
                        commands: 0,
                    })
                    .map_err(|e| FaultError::from(FleetError::from(e)));
                (slot, outcome)
            });
        }
        in_slot_order(tasks).await
    }

    /// Cuts every proxy for `down` at the start of each `period` from `from` (the phase's
    /// start, not when this task got going) until `until` or `cancel`.
    async fn flap(
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
