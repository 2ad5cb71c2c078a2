//! What the load engine is handed: one plan for the targets of the world, with this process's
//! share of the schedule and of the in-flight bound; the warning when that is more than this
//! machine's generator sends; and the line that announces it.

use std::num::NonZeroUsize;

use super::RunOptions;
use super::progress::Say;
use super::world::World;
use crate::load::{self, LoadPlan, Role, TargetPlan, capacity};
use crate::results::Worker;
use crate::scenario::Scenario;
use crate::targets::TargetDef;

/// The load plan for the targets `world` runs.
pub(super) fn load_plan(opts: &RunOptions, world: &World) -> LoadPlan {
    let scenario = &opts.scenario;
    LoadPlan {
        targets: world
            .targets
            .iter()
            .map(|t| TargetPlan {
                name: t.def.name.clone(),
                instances: t.rotation.clone(),
                path: t.def.request_path.clone(),
                caller: t.def.caller.clone(),
                connections: connections(scenario, &t.def.name, opts.worker),
            })
            .collect(),
        tenants: scenario.tenants.clone(),
        duration: scenario.duration,
        seed: scenario.seed,
        request_timeout: scenario.request_timeout,
        max_in_flight_per_target: in_flight_bound(scenario, opts.worker),
        role: opts
            .worker
            .map_or(Role::Sender(load::Share::WHOLE), |w| w.role),
        senders: load::Senders::Auto,
    }
}

/// The requests in flight per target this process allows: a worker its share of the
/// scenario's bound, so N workers together hold what one process would.
pub(super) fn in_flight_bound(scenario: &Scenario, worker: Option<Worker>) -> usize {
    worker_share(scenario.max_in_flight_per_target, worker)
}

/// How this process's requests to `target` use connections: a worker gets its exact share of
/// the cap (never above the scenario's in-flight bound, which validation holds to), so the
/// workers together hold it, but at least one connection each (a cap below the number of
/// workers is exceeded, docs/distributed.md). Keep-alive and its idle cap are each worker's
/// own, as each client machine's pool is.
fn connections(scenario: &Scenario, target: &str, worker: Option<Worker>) -> load::Connections {
    let mut connections = scenario.connections_of(target);
    connections.max = connections.max.map(|max| match worker.map(|w| w.role) {
        Some(Role::Sender(share)) => exact_share(max, share),
        _ => max,
    });
    connections
}

/// Worker `share.index()` of `share.count()`'s part of `bound`: the parts differ by one at
/// most and add up to it, none below one.
fn exact_share(bound: NonZeroUsize, share: load::Share) -> NonZeroUsize {
    let (n, k) = (share.count() as usize, share.index() as usize);
    let part = bound.get() / n + usize::from(k <= bound.get() % n);
    NonZeroUsize::new(part).unwrap_or(NonZeroUsize::MIN)
}

/// A worker's share of a bound (rounded up, so N workers never hold less than one process).
fn worker_share(bound: usize, worker: Option<Worker>) -> usize {
    match worker.map(|w| w.role) {
        Some(Role::Sender(share)) if share.count() > 1 => bound.div_ceil(share.count() as usize),
        _ => bound,
    }
}

/// The requests a second this process offers to `targets` targets: every tenant's rate to
/// each of them, its share of that as a worker.
fn offered_per_s(opts: &RunOptions, targets: usize) -> f64 {
    let per_target: f64 = opts.scenario.tenants.iter().map(|t| t.rate_per_s).sum();
    let share = match opts.worker.map(|w| w.role) {
        None => 1.0,
        Some(Role::Sender(share)) => 1.0 / f64::from(share.count()),
        Some(Role::FaultPlayer) => 0.0,
    };
    per_target * targets as f64 * share
}

/// Says, before anything starts, when the run asks more of the load generator than this
/// machine's measured capacity (`load::capacity`; measured only for runs above 5,000 requests
/// a second, and cached). A calibration that fails only costs the warning.
pub(super) async fn warn_beyond_capacity(opts: &RunOptions, targets: usize, say: &Say) {
    let offered = offered_per_s(opts, targets);
    if offered <= capacity::CALIBRATE_ABOVE_PER_S {
        return;
    }
    let cache = crate::infra::programs::cache_dir();
    match capacity::known_or_measured(cache.as_deref()).await {
        Ok(measured) => {
            if let Some(warning) = capacity::warning(offered, &measured) {
                say.line(&format!("warning: {warning}"));
            }
        }
        Err(e) => tracing::warn!("could not measure the load generator's capacity: {e}"),
    }
}

/// "running <scenario> for <n> s: <targets> at limit …", with each target's own limit.
pub(super) fn announce(scenario: &Scenario, defs: &[TargetDef], names: &[String]) -> String {
    let own_limits: String = defs
        .iter()
        .filter_map(|d| {
            let own = d.limit?;
            Some(format!(
                "; {} at its own {}/{:?}",
                d.name, own.requests, own.window
            ))
        })
        .collect();
    format!(
        "running {} for {:.0} s: {} at limit {}/{:?}{own_limits}",
        scenario.name,
        scenario.duration.as_secs_f64(),
        names.join(", "),
        scenario.limit,
        scenario.window
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_exact_shares_of_a_connection_cap_add_up_to_it_none_below_one() {
        for (cap, workers) in [(9, 4), (5, 5), (100, 3), (1, 1)] {
            let parts: Vec<usize> = (1..=workers)
                .map(|k| {
                    let share = load::Share::new(k, workers).unwrap();
                    exact_share(NonZeroUsize::new(cap).unwrap(), share).get()
                })
                .collect();
            assert_eq!(
                parts.iter().sum::<usize>(),
                cap,
                "{cap} over {workers}: {parts:?}"
            );
            assert!(parts.iter().max().unwrap() - parts.iter().min().unwrap() <= 1);
        }
        let one = NonZeroUsize::MIN;
        let share = load::Share::new(4, 4).unwrap();
        assert_eq!(
            exact_share(one, share),
            one,
            "a cap below the workers: one each"
        );
    }
}
