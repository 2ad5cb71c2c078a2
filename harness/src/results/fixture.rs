//! Hand-built results for tests: a [`RunResult`] of any shape whose derived figures
//! (entitlement, over-admission, wrongful denial, the `all` row) follow the same definitions
//! as a real run's, so a test states only the counts and latencies it is about.
//!
//! Compiled for unit tests and, with the `test-support` feature, for the integration tests
//! (the harness's own dev-dependency turns it on): one builder, not one per test file.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use super::TenantResult;
use super::build::{Allowed, all_tenants_of, tenant_of};
use super::{LoadTotals, Percentiles, PhaseResult, RunResult, SCHEMA_VERSION, TargetResult};
use crate::metrics::Counts;

/// The limit and window of every fixture: seed 000's 50 a second.
pub const LIMIT: f64 = 50.0;

/// Percentiles with every quantile at `us` (a cell whose requests all took as long).
pub fn flat_latency(us: u64) -> Percentiles {
    Percentiles {
        p50: us,
        p90: us,
        p99: us,
        p999: us,
        max: us,
    }
}

/// A tenant of a phase `length_s` long at [`LIMIT`] a second: `offered` requests, `admitted`
/// of them answered 2xx and the rest 429, each taking `latency_us` (`None`: nothing reached
/// the target, as when `offered` is 0).
pub fn tenant(
    name: &str,
    offered: u64,
    admitted: u64,
    length_s: f64,
    latency_us: Option<u64>,
) -> TenantResult {
    let counts = Counts {
        offered,
        admitted,
        limited: offered - admitted,
        ..Counts::default()
    };
    tenant_with(name, counts, length_s, latency_us)
}

/// A tenant with any counts.
pub fn tenant_with(
    name: &str,
    counts: Counts,
    length_s: f64,
    latency_us: Option<u64>,
) -> TenantResult {
    let slack = crate::metrics::derived::window_slack(LIMIT, 1.0, length_s);
    let mut t = tenant_of(name, &counts, LIMIT * length_s, slack, length_s);
    t.latency_us = latency_us.filter(|_| t.measured()).map(flat_latency);
    t.service_time_us = t.latency_us;
    t
}

/// A phase from its tenants; the `all` row as a run computes it (its latency the worst
/// tenant's, which is what a test of a flat latency needs).
pub fn phase(
    name: &str,
    (start_s, end_s): (f64, f64),
    faults: &[&str],
    tenants: Vec<TenantResult>,
) -> PhaseResult {
    let length_s = end_s - start_s;
    let slack = crate::metrics::derived::window_slack(LIMIT, 1.0, length_s);
    let allowed = Allowed {
        allowance: crate::metrics::derived::allowance(LIMIT, 1.0, length_s),
        slack,
        length_s,
    };
    let mut all = all_tenants_of(&tenants, allowed);
    all.latency_us = tenants
        .iter()
        .filter_map(|t| t.latency_us)
        .max_by_key(|p| p.p99);
    all.service_time_us = all.latency_us;
    PhaseResult {
        name: name.into(),
        start_s,
        end_s,
        faults: faults.iter().map(|f| (*f).to_owned()).collect(),
        faults_applied_at_s: None,
        faults_removed_at_s: None,
        fallbacks: None,
        store_commands: None,
        store_amplification: None,
        store_amplification_per_attempt: None,
        client_amplification: all.counts.client_amplification(),
        new_connections_per_s: all.counts.new_connections_per_s(length_s),
        tenants,
        all,
    }
}

/// A target of four instances refusing with 429.
pub fn target(name: &str, phases: Vec<PhaseResult>) -> TargetResult {
    TargetResult {
        name: name.into(),
        description: String::new(),
        instances: 4,
        command: Vec::new(),
        env: BTreeMap::new(),
        refuses_with: 429,
        limit: None,
        caller: None,
        connections: crate::load::Connections::default(),
        send_lag_us: Some(flat_latency(100)),
        events: Vec::new(),
        phases,
    }
}

/// A whole run of scenario `scenario`, as long as its targets' last phase.
pub fn run(scenario: &str, targets: Vec<TargetResult>) -> RunResult {
    let duration_s = targets
        .iter()
        .flat_map(|t| t.phases.last())
        .map(|p| p.end_s)
        .fold(0.0, f64::max);
    let offered: u64 = targets
        .iter()
        .flat_map(|t| &t.phases)
        .map(|p| p.all.counts.offered)
        .sum();
    RunResult {
        schema_version: SCHEMA_VERSION,
        scenario: scenario.into(),
        description: String::new(),
        seed: 0,
        duration_scale: 1.0,
        git_revision: None,
        started_at: "2026-12-01T10:00:00Z".into(),
        duration_s,
        partial: false,
        aborted: None,
        untrusted_because: Vec::new(),
        limit: LIMIT,
        window_s: 1.0,
        tenants: Vec::new(),
        load: LoadTotals {
            scheduled: offered,
            sent: offered,
            ..LoadTotals::default()
        },
        notes: Vec::new(),
        batches: Vec::new(),
        worker: None,
        targets,
    }
}

/// `tests/fixtures/oracle-drops.toml` (one target, two tenants, three phases), parsed.
pub fn oracle_drops() -> crate::scenario::Scenario {
    crate::scenario::Scenario::parse(
        include_str!("../../tests/fixtures/oracle-drops.toml"),
        "oracle-drops.toml",
    )
    .unwrap()
}

/// A run of [`oracle_drops`] as it starts, in a results folder made under `dir`: its scenario,
/// its folder and its `run.json` with no figures yet (what a journal starts from).
pub fn started_run(
    dir: &std::path::Path,
) -> (
    crate::scenario::Scenario,
    super::folder::RunFolder,
    RunResult,
) {
    let folder = super::folder::RunFolder::create(dir.join("run")).unwrap();
    let started = run("oracle-drops", vec![target("oracle", Vec::new())]);
    (oracle_drops(), folder, started)
}
