//! How a run's figures account for what the load did not do as planned: requests dropped
//! before they were sent, and a run cut short.

use std::time::Duration;

use crate::load::LoadSummary;
use crate::metrics::Measured;
use crate::scenario::Scenario;

/// How much of the timeline the load covered: all of it that had elapsed, or for an
/// interrupted run, up to the moment it stopped sending. The grace its requests in flight
/// were given after that sent nothing: counting it would give the cut phase an allowance for
/// time that was not run, understating over-admission.
pub(super) fn load_ran_for(summary: Option<&LoadSummary>, elapsed: Duration) -> Duration {
    summary
        .and_then(|s| s.stopped_sending_at)
        .map_or(elapsed, |stopped| stopped.min(elapsed))
}

/// A note naming every target × tenant × phase cell with dropped requests and how many, and
/// how their latency counts them; `None` when nothing was dropped.
pub(super) fn dropped_in_cells(
    scenario: &Scenario,
    targets: &[String],
    measured: &Measured,
) -> Option<String> {
    let mut cells = Vec::new();
    for (t, target) in targets.iter().enumerate() {
        for (n, tenant) in scenario.tenants.iter().enumerate() {
            for (p, phase) in scenario.phases.iter().enumerate() {
                let dropped = measured.cells[t][n][p].counts.dropped;
                if dropped > 0 {
                    cells.push(format!(
                        "{target} × {} × {}: {dropped}",
                        tenant.name, phase.name
                    ));
                }
            }
        }
    }
    (!cells.is_empty()).then(|| {
        format!(
            "requests dropped (not sent) in {}; their latency counts each drop as a request that \
             waited the request timeout, {} s",
            cells.join(", "),
            scenario.request_timeout.as_secs_f64()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{DropCause, Outcome, Recorder, Sample};
    use crate::metrics::{Collector, Shape};
    use crate::results::TargetFacts;
    use crate::results::build::build_targets;

    fn scenario() -> Scenario {
        let text = include_str!("../../tests/fixtures/two-phases.toml");
        Scenario::parse(text, "accounting.toml").unwrap()
    }

    fn shape(s: &Scenario) -> Shape {
        s.measurement_shape(1)
    }

    fn facts(s: &Scenario) -> Vec<TargetFacts> {
        vec![TargetFacts {
            name: "reference".into(),
            description: String::new(),
            instances: 1,
            command: Vec::new(),
            env: Default::default(),
            refuses_with: 429,
            limit: crate::limits::TargetLimit::scenario(s.limit, s.window),
            caller: None,
            events: Vec::new(),
            phases: vec![Default::default(); s.phases.len()],
        }]
    }

    #[test]
    fn the_allowance_of_a_cut_phase_covers_only_the_time_the_load_was_sent() {
        let s = scenario();
        // Interrupted 4 s into the fault phase; the requests in flight then had their grace,
        // and the run read its clock 250 ms later.
        let summary = LoadSummary {
            stopped_sending_at: Some(Duration::from_secs(14)),
            ..LoadSummary::default()
        };
        let elapsed = Duration::from_millis(14_250);
        let ran_for = load_ran_for(Some(&summary), elapsed);
        assert_eq!(ran_for, Duration::from_secs(14));
        let targets = build_targets(&s, &Measured::empty(&shape(&s)), &facts(&s), ran_for);
        let fault = &targets[0].phases[1];
        assert_eq!(fault.end_s, 14.0);
        // 50/s over the 4 s sent, not the 4.25 s that had elapsed.
        assert_eq!(fault.tenants[0].allowance, 200.0);
        assert_eq!(targets[0].phases[0].tenants[0].allowance, 500.0, "uncut");

        // A run that sent its whole schedule covers whatever elapsed (build_targets cuts
        // at the timeline's end); so does one whose generator failed (no summary).
        assert_eq!(
            load_ran_for(Some(&LoadSummary::default()), Duration::from_secs(21)),
            Duration::from_secs(21)
        );
        assert_eq!(load_ran_for(None, elapsed), elapsed);
    }

    #[test]
    fn the_drops_note_names_each_cell_with_drops_and_the_latency_they_count_with() {
        let s = scenario();
        let collector = Collector::new(shape(&s));
        let dropped = |tenant, at_s| Sample {
            target: 0,
            tenant,
            instance: 0,
            scheduled: Duration::from_secs(at_s),
            send_lag: Duration::ZERO,
            latency: Duration::ZERO,
            service_time: Duration::ZERO,
            outcome: Outcome::Dropped(DropCause::InFlightBound),
            attempts: 0,
            new_connections: 0,
        };
        let targets = ["reference".to_owned()];
        assert_eq!(dropped_in_cells(&s, &targets, &collector.snapshot()), None);
        for _ in 0..330 {
            collector.record(&dropped(0, 12));
        }
        collector.record(&dropped(1, 3));
        let note = dropped_in_cells(&s, &targets, &collector.snapshot()).unwrap();
        assert_eq!(
            note,
            "requests dropped (not sent) in reference × acme × fault: 330, reference × globex × \
             steady: 1; their latency counts each drop as a request that waited the request \
             timeout, 2 s"
        );
    }
}
