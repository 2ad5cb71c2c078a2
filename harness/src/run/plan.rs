//! What the load engine is handed: one plan for the targets of the world, with this process's
//! share of the schedule and of the in-flight bound; and the line that announces it.

use super::RunOptions;
use super::world::World;
use crate::load::{self, LoadPlan, Role, TargetPlan};
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
    }
}

/// The requests in flight per target this process allows: a worker its share of the
/// scenario's bound, so N workers together hold what one process would.
pub(super) fn in_flight_bound(scenario: &Scenario, worker: Option<Worker>) -> usize {
    match worker.map(|w| w.role) {
        Some(Role::Sender(share)) if share.count() > 1 => scenario
            .max_in_flight_per_target
            .div_ceil(share.count() as usize),
        _ => scenario.max_in_flight_per_target,
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
