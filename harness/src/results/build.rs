//! From a run's measurements to its results: each cell's figures judged against its phase's
//! allowance, all tenants together, and every target's phases cut where the run stopped.

use crate::metrics::derived;
use crate::metrics::{Cell, Counts, Measured};
use crate::scenario::Scenario;

use super::{
    Event, Percentiles, PhaseFacts, PhaseResult, RunResult, TargetFacts, TargetResult, TenantResult,
};

impl TargetFacts {
    /// The facts `run` recorded of `target` (its `run.json`'s), with `events` in place of its
    /// own: for results built again from recorded ones (a merge, a journal).
    pub fn recorded(
        run: &RunResult,
        target: &TargetResult,
        scenario: &Scenario,
        events: Vec<Event>,
    ) -> Self {
        Self {
            name: target.name.clone(),
            description: target.description.clone(),
            instances: target.instances,
            command: target.command.clone(),
            env: target.env.clone(),
            refuses_with: target.refuses_with,
            limit: run.limit_of(target),
            caller: target.caller.clone(),
            events,
            phases: recorded_phase_facts(target, scenario),
        }
    }
}

/// A target's facts for every phase of the scenario, by name (none for a phase it lacks).
fn recorded_phase_facts(target: &TargetResult, scenario: &Scenario) -> Vec<PhaseFacts> {
    scenario
        .phases
        .iter()
        .map(|phase| {
            target
                .phases
                .iter()
                .find(|p| p.name == phase.name)
                .map(|p| PhaseFacts {
                    faults_applied_at_s: p.faults_applied_at_s,
                    faults_removed_at_s: p.faults_removed_at_s,
                    fallbacks: p.fallbacks,
                    store_commands: p.store_commands,
                })
                .unwrap_or_default()
        })
        .collect()
}

/// What a cell's allowance is judged against: the allowance of its phase, and the slack one
/// window's limit gives a correct limiter whose windows do not line up with the phase.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Allowed {
    /// One caller's.
    pub(crate) allowance: f64,
    /// One caller's.
    pub(crate) slack: f64,
    pub(crate) length_s: f64,
}

impl Allowed {
    /// For a tenant of `keys` caller keys (a population's rest): each key's allowance and
    /// slack, together.
    pub(crate) fn of(self, keys: u64) -> Self {
        let keys = keys as f64;
        Self {
            allowance: self.allowance * keys,
            slack: self.slack * keys,
            length_s: self.length_s,
        }
    }
}

/// A cell's derived figures from its counts, by the definitions of [`derived`]; its latency
/// is left unmeasured for the caller to fill.
pub(crate) fn tenant_of(
    name: &str,
    c: &Counts,
    allowance: f64,
    slack: f64,
    length_s: f64,
) -> TenantResult {
    let entitled = derived::entitled(c.asked(), allowance);
    let measured = c.sent() > 0;
    TenantResult {
        name: name.to_owned(),
        counts: *c,
        allowance,
        entitled,
        over_admission: measured.then(|| derived::over_admission(c.admitted, allowance)),
        over_admission_beyond_window: measured
            .then(|| derived::over_admission_beyond(c.admitted, allowance, slack)),
        wrongful_denial: (measured && entitled > 0.0)
            .then(|| derived::wrongful_denial(c.admitted, entitled)),
        admitted_per_s: if length_s > 0.0 {
            c.admitted as f64 / length_s
        } else {
            0.0
        },
        latency_us: None,
        service_time_us: None,
    }
}

fn tenant_result(name: &str, cell: &Cell, allowed: Allowed) -> TenantResult {
    let mut t = tenant_of(
        name,
        &cell.counts,
        allowed.allowance,
        allowed.slack,
        allowed.length_s,
    );
    if t.measured() {
        t.latency_us = Percentiles::of(&cell.latency);
        t.service_time_us = Percentiles::of(&cell.service_time);
    }
    t
}

/// All tenants together: counts summed, the ratios over the totals of the tenants whose
/// figures were measured (total excess ÷ total allowance, total shortfall ÷ total
/// entitlement); the latency is left for the caller to fill. `allowed` is one caller's: a
/// tenant of many keys has as many times its slack as its allowance is times one caller's.
pub(crate) fn all_tenants_of(tenants: &[TenantResult], allowed: Allowed) -> TenantResult {
    let Allowed {
        allowance: one,
        slack,
        length_s,
    } = allowed;
    let slack_of = |t: &TenantResult| {
        if one > 0.0 {
            slack * (t.allowance / one).round()
        } else {
            slack
        }
    };
    let mut counts = Counts::default();
    for t in tenants {
        counts.merge(&t.counts);
    }
    let allowance: f64 = tenants.iter().map(|t| t.allowance).sum();
    let mut all = tenant_of("all", &counts, allowance, slack, length_s);
    all.entitled = tenants.iter().map(|t| t.entitled).sum();
    let measured: Vec<&TenantResult> = tenants.iter().filter(|t| t.measured()).collect();
    let sum = |f: &dyn Fn(&TenantResult) -> f64| measured.iter().map(|t| f(t)).sum::<f64>();
    let measured_allowance = sum(&|t| t.allowance);
    let measured_entitled = sum(&|t| t.entitled);
    let excess = sum(&|t| (t.counts.admitted as f64 - t.allowance).max(0.0));
    let excess_beyond = sum(&|t| (t.counts.admitted as f64 - t.allowance - slack_of(t)).max(0.0));
    let shortfall = sum(&|t| (t.entitled - t.counts.admitted as f64).max(0.0));
    let over = |excess: f64| (measured_allowance > 0.0).then(|| excess / measured_allowance);
    all.over_admission = over(excess);
    all.over_admission_beyond_window = over(excess_beyond);
    all.wrongful_denial = (measured_entitled > 0.0).then(|| shortfall / measured_entitled);
    all
}

/// [`all_tenants_of`], with the latency of the cells' histograms added exactly.
fn all_tenants(cells: &[Cell], tenants: &[TenantResult], allowed: Allowed) -> TenantResult {
    let mut all = all_tenants_of(tenants, allowed);
    if all.measured() {
        let mut merged = cells[0].clone();
        for cell in &cells[1..] {
            // Same bounds everywhere, so adding cannot fail.
            let _ = merged.latency.add(&cell.latency);
            let _ = merged.service_time.add(&cell.service_time);
        }
        all.latency_us = Percentiles::of(&merged.latency);
        all.service_time_us = Percentiles::of(&merged.service_time);
    }
    all
}

/// Puts the measurements and the runner's facts together. A run that stopped after `ran_for`
/// reports only the phases it reached, the last one cut at `ran_for`: its allowance and rates
/// cover the time that actually ran.
pub fn build_targets(
    scenario: &Scenario,
    measured: &Measured,
    facts: &[TargetFacts],
    ran_for: std::time::Duration,
) -> Vec<TargetResult> {
    facts
        .iter()
        .enumerate()
        .map(|(t, f)| TargetResult {
            name: f.name.clone(),
            description: f.description.clone(),
            instances: f.instances,
            command: f.command.clone(),
            env: f.env.clone(),
            refuses_with: f.refuses_with,
            limit: Some(f.limit),
            caller: f.caller.clone(),
            connections: scenario.connections_of(&f.name),
            send_lag_us: Percentiles::of(&measured.send_lag[t]),
            events: f.events.clone(),
            phases: scenario
                .phases
                .iter()
                .enumerate()
                .filter(|(_, phase)| phase.start < ran_for)
                .map(|(p, phase)| {
                    let end = phase.end.min(ran_for);
                    let length = end - phase.start;
                    let length_s = length.as_secs_f64();
                    // The target's own rule: a run may hold targets of different limits.
                    let allowed = Allowed {
                        allowance: f.limit.allowance(length_s),
                        slack: f.limit.window_slack(length_s),
                        length_s,
                    };
                    let cells: Vec<Cell> = measured.cells[t]
                        .iter()
                        .map(|per_phase| per_phase[p].clone())
                        .collect();
                    let tenants: Vec<TenantResult> = scenario
                        .tenants
                        .iter()
                        .zip(&cells)
                        .map(|(tenant, cell)| {
                            tenant_result(&tenant.name, cell, allowed.of(tenant.caller.keys()))
                        })
                        .collect();
                    let all = all_tenants(&cells, &tenants, allowed);
                    let pf = f.phases.get(p).cloned().unwrap_or_default();
                    PhaseResult {
                        name: phase.name.clone(),
                        start_s: phase.start.as_secs_f64(),
                        end_s: end.as_secs_f64(),
                        faults: phase.faults.iter().map(ToString::to_string).collect(),
                        faults_applied_at_s: pf.faults_applied_at_s,
                        faults_removed_at_s: pf.faults_removed_at_s,
                        fallbacks: pf.fallbacks,
                        store_commands: pf.store_commands,
                        store_amplification: pf.store_commands.and_then(|commands| {
                            let offered = all.counts.offered;
                            (all.measured()).then(|| commands as f64 / offered as f64)
                        }),
                        store_amplification_per_attempt: pf.store_commands.and_then(|commands| {
                            let sent = all.counts.attempts();
                            (sent > 0).then(|| commands as f64 / sent as f64)
                        }),
                        client_amplification: all.counts.client_amplification(),
                        new_connections_per_s: all.counts.new_connections_per_s(length_s),
                        tenants,
                        all,
                    }
                })
                .collect(),
        })
        .collect()
}
