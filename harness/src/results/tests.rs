//! Unit tests of what `run.json` holds: derived figures, amplification, notes, trust.

use super::*;

use crate::results::build::build_targets;
use crate::results::fixture;
use crate::results::trust::{broken_before_any_fault, machine_saturated, short_of_cpu_and_erring};

fn target(name: &str, steady: Counts) -> TargetResult {
    let outage = Counts {
        offered: 100,
        server_error: 100,
        ..Counts::default()
    };
    let phase = |name: &str, faults: &[&str], counts| {
        fixture::phase(
            name,
            (0.0, 1.0),
            faults,
            vec![fixture::tenant_with("acme", counts, 1.0, Some(1_000))],
        )
    };
    fixture::target(
        name,
        vec![
            phase("steady", &[], steady),
            phase("fault", &["down"], outage),
        ],
    )
}

#[test]
fn store_amplification_is_per_request_offered_and_per_attempt_beside_it() {
    use crate::load::{Outcome, Sample};
    use crate::metrics::Collector;
    use std::time::Duration;

    let scenario = fixture::oracle_drops();
    let collector = Collector::new(scenario.measurement_shape(1));
    // A retry storm in the fault: 100 requests offered, each sent 3 times.
    for i in 0..100u64 {
        crate::load::Recorder::record(
            &collector,
            &Sample {
                target: 0,
                tenant: 0,
                instance: 0,
                scheduled: Duration::from_millis(2_000 + i * 10),
                send_lag: Duration::ZERO,
                latency: Duration::from_millis(1),
                service_time: Duration::from_millis(1),
                outcome: Outcome::ServerError,
                attempts: 3,
                new_connections: 1,
            },
        );
    }
    let mut phases = vec![PhaseFacts::default(); scenario.phases.len()];
    phases[1].store_commands = Some(900);
    let facts = [TargetFacts {
        name: "t".into(),
        description: String::new(),
        instances: 1,
        command: Vec::new(),
        env: BTreeMap::new(),
        refuses_with: 429,
        limit: crate::limits::TargetLimit::scenario(scenario.limit, scenario.window),
        caller: None,
        events: Vec::new(),
        phases,
    }];
    let targets = build_targets(&scenario, &collector.snapshot(), &facts, scenario.duration);
    let fault = &targets[0].phases[1];
    assert_eq!(
        fault.store_amplification,
        Some(9.0),
        "900 commands / 100 offered"
    );
    assert_eq!(
        fault.store_amplification_per_attempt,
        Some(3.0),
        "900 commands / 300 attempts"
    );
}

#[test]
fn a_run_whose_generator_dropped_requests_or_fell_behind_is_untrusted_but_not_for_a_connection_cap()
{
    let mut run = fixture::run("t", vec![target("a", Counts::default())]);
    run.load.scheduled = 10_000;
    assert!(run.untrusted().is_empty());
    run.load.dropped = 10;
    assert!(run.untrusted().is_empty(), "0.1 % is within the bound");
    run.load.dropped = 11;
    let why = run.untrusted();
    assert!(why[0].contains("dropped 11 of 10000"), "{why:?}");
    // Drops at a target's connection cap are the scenario's client, not the generator's.
    run.load.dropped = 500;
    run.load.dropped_by_cause.connection_cap = 480;
    let why = run.untrusted();
    assert!(why[0].contains("dropped 20 of 10000"), "{why:?}");
    run.load.dropped_by_cause.connection_cap = 500;
    assert!(run.untrusted().is_empty());
    run.load.dropped = 0;
    run.targets[0].send_lag_us = Some(fixture::flat_latency(60_000));
    let why = run.untrusted();
    assert!(why[0].contains("fell behind on a"), "{why:?}");
}

#[test]
fn dropped_requests_by_cause_add_up_across_parts_and_their_total_is_dropped() {
    use crate::load::{DropCause, DroppedByCause};
    let part = |causes: &[DropCause]| {
        let mut by_cause = DroppedByCause::default();
        for &cause in causes {
            by_cause.count(cause, 1);
        }
        LoadTotals {
            dropped: by_cause.total(),
            dropped_by_cause: by_cause,
            abandoned: 1,
            ..LoadTotals::default()
        }
    };
    let mut whole = part(&[DropCause::InFlightBound, DropCause::InFlightBound]);
    whole.add(&part(&[DropCause::Backlog, DropCause::InFlightBound]));
    whole.add(&part(&[DropCause::ConnectionCap]));
    assert_eq!(
        whole.dropped_by_cause,
        DroppedByCause {
            in_flight_bound: 3,
            backlog: 1,
            connection_cap: 1,
        }
    );
    assert_eq!(whole.dropped, 5);
    assert_eq!(whole.dropped, whole.dropped_by_cause.total());
    assert_eq!(whole.abandoned, 3);
}

#[test]
fn a_late_load_generator_is_reported_as_a_saturated_machine() {
    let quiet = Counts::default();
    let mut targets = vec![target("a", quiet), target("b", quiet)];
    targets[0].send_lag_us = Some(fixture::flat_latency(200));
    assert_eq!(machine_saturated(&targets), None);
    targets[1].send_lag_us = Some(fixture::flat_latency(10_800));
    let note = machine_saturated(&targets).unwrap();
    assert!(note.contains("10.8 ms, b"), "{note}");
}

#[test]
fn a_target_erring_before_any_fault_is_named_and_errors_under_the_fault_are_not() {
    let healthy = Counts {
        offered: 1000,
        admitted: 995,
        server_error: 5,
        ..Counts::default()
    };
    let broken = Counts {
        offered: 1000,
        server_error: 1000,
        ..Counts::default()
    };
    let short_and_cold = Counts {
        offered: 290,
        admitted: 287,
        server_error: 3,
        ..Counts::default()
    };
    let notes = broken_before_any_fault(&[
        target("healthy", healthy),
        target("broken", broken),
        target("short", short_and_cold),
    ]);
    assert_eq!(notes.len(), 1, "3 errors of 290 are noise: {notes:?}");
    assert!(notes[0].starts_with("broken answered 100.0 %"), "{notes:?}");
    assert!(notes[0].contains("(steady)"), "{notes:?}");
}

#[test]
fn a_batch_is_worth_running_again_only_when_a_target_erred_before_any_fault_while_the_generator_was_late()
 {
    let erring = Counts {
        offered: 290,
        admitted: 250,
        server_error: 40,
        ..Counts::default()
    };
    let healthy = Counts {
        offered: 290,
        admitted: 290,
        ..Counts::default()
    };
    let mut targets = vec![target("erring", erring), target("healthy", healthy)];
    targets[1].send_lag_us = Some(fixture::flat_latency(1_000));
    assert_eq!(
        short_of_cpu_and_erring(&targets),
        None,
        "on time: the target is broken"
    );
    targets[1].send_lag_us = Some(fixture::flat_latency(70_700));
    let why = short_of_cpu_and_erring(&targets).unwrap();
    assert_eq!(
        why,
        "erring erred before any fault while the load generator sent late (send lag p99 70.7 ms, healthy)"
    );
    targets[0] = target("erring", healthy);
    assert_eq!(short_of_cpu_and_erring(&targets), None, "late, none erring");
}

#[test]
fn a_503_before_any_fault_is_a_refusal_from_a_target_that_refuses_with_503_and_an_error_otherwise()
{
    let refusing = Counts {
        offered: 1000,
        admitted: 500,
        unavailable: 500,
        ..Counts::default()
    };
    let mut nginx = target("nginx", refusing);
    nginx.refuses_with = 503;
    let notes = broken_before_any_fault(&[nginx, target("other", refusing)]);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].starts_with("other answered 50.0 %"), "{notes:?}");
}

#[test]
fn a_worker_is_written_as_it_always_was_and_a_share_that_is_not_k_of_n_is_refused() {
    use crate::load::{Role, Share};
    let player = Worker {
        role: Role::FaultPlayer,
        start_at_ms: 7,
        drives_faults: true,
    };
    let written = serde_json::to_value(player).unwrap();
    assert_eq!(
        written,
        serde_json::json!({"index": 0, "count": 0, "start_at_ms": 7, "drives_faults": true})
    );
    assert_eq!(serde_json::from_value::<Worker>(written).unwrap(), player);
    let second = Worker {
        role: Role::Sender(Share::new(2, 3).unwrap()),
        start_at_ms: 7,
        drives_faults: false,
    };
    let written = serde_json::to_value(second).unwrap();
    assert_eq!(
        (written["index"].clone(), written["count"].clone()),
        (2.into(), 3.into())
    );
    assert_eq!(serde_json::from_value::<Worker>(written).unwrap(), second);
    let nonsense =
        serde_json::json!({"index": 3, "count": 2, "start_at_ms": 7, "drives_faults": false});
    let e = serde_json::from_value::<Worker>(nonsense).unwrap_err();
    assert!(e.to_string().contains("3/2"), "{e}");
}
