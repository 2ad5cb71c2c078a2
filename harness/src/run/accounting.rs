//! How a run's figures account for what the load did not do as planned: requests dropped
//! before they were sent.

use crate::metrics::Measured;
use crate::scenario::Scenario;

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
    use std::time::Duration;

    use super::*;
    use crate::load::{DropCause, Outcome, Recorder, Sample};
    use crate::metrics::{Collector, Shape};

    fn scenario() -> Scenario {
        let text = r#"
name = "accounting"
[policy]
limit = 50
window = "1s"
[load]
request_timeout = "2s"
[[tenants]]
name = "acme"
rate = 120
[[tenants]]
name = "globex"
rate = 20
[[targets]]
name = "reference"
[[phases]]
name = "steady"
start = "0s"
end = "10s"
[[phases]]
name = "fault"
start = "10s"
end = "20s"
"#;
        Scenario::parse(text, "accounting.toml").unwrap()
    }

    fn shape(s: &Scenario) -> Shape {
        Shape {
            targets: 1,
            tenants: s.tenants.len(),
            phases: s.phases.iter().map(|p| (p.start, p.end)).collect(),
            duration: s.duration,
            longest_request: s.request_timeout,
            request_timeout: s.request_timeout,
        }
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
