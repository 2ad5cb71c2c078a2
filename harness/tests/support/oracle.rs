//! The oracle's clock as the verdict tests model it (targets/oracle/target.toml): where each
//! arrival of a scenario lands on it, so that what the oracle answers can be computed in
//! advance.

use failmode::load::schedule::Schedule;
use failmode::scenario::Scenario;

/// The oracle's lead: its t0 is the first request it sees, less this.
pub(crate) const LEAD_S: f64 = 0.003;
/// How far an arrival's place on the oracle's clock may be from the model's. The model takes
/// every request's send lag to equal the first one's, which set the oracle's t0; the first pays
/// for its connection in the (debug) harness, and runs here put a few requests a run up to a
/// few milliseconds across a boundary (a 429 counted before a cut that the model put in it).
pub(crate) const NEAR_S: f64 = 0.005;

/// Every tenant's arrivals (s since the run's start) to the target of index `target` in its
/// run, and the oracle's t0 on that clock: the first arrival of any tenant, less the lead.
pub(crate) fn arrivals(scenario: &Scenario, target: usize) -> (Vec<Vec<f64>>, f64) {
    let arrivals: Vec<Vec<f64>> = scenario
        .tenants
        .iter()
        .enumerate()
        .map(|(ni, t)| {
            Schedule::new(
                scenario.seed,
                target,
                ni,
                t.rate_per_s,
                t.arrival,
                scenario.duration,
            )
            .map(|d| d.as_secs_f64())
            .collect()
        })
        .collect();
    let t0 = arrivals
        .iter()
        .filter_map(|a| a.first().copied())
        .fold(f64::INFINITY, f64::min)
        - LEAD_S;
    (arrivals, t0)
}
