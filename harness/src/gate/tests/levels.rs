//! Warning levels, the generator-health and count metrics, and `gate.json`.

use super::{gates, run};
use crate::gate::metric::METRICS;
use crate::gate::{
    Actual, GateError, Level, Outcome, Verdict, evaluate, gate_json, junit_xml, markdown,
};
use crate::results::fixture;

const WARN_AND_FAIL: &str = r#"
    [[gates]]
    target = "fail-open"
    phase = "fault"
    metric = "over_admission"
    tenant = "acme"
    max = 0.1
    level = "warn"
    [[gates]]
    target = "fail-open"
    phase = "fault"
    metric = "wrongful_denial"
    max = 0.01
    [[gates]]
    target = "fail-open"
    metric = "send_lag_p99_ms"
    max = 1
"#;

#[test]
fn a_crossed_warn_gate_is_reported_but_never_fails_the_job() {
    let r = run();
    let checks = evaluate(&r, &[], &gates(WARN_AND_FAIL).unwrap()).unwrap();
    assert_eq!(checks[0].level, Level::Warn);
    assert!(
        !checks[0].passed,
        "fail-open lets acme through: {}",
        checks[0]
    );
    assert_eq!(checks[0].verdict(), Verdict::Warn);
    assert_eq!(
        checks.iter().map(|c| c.verdict()).collect::<Vec<_>>(),
        [Verdict::Warn, Verdict::Pass, Verdict::Pass]
    );
    assert_eq!(Outcome::of(&r, &checks), Outcome::Pass);
    assert_eq!(Outcome::of(&r, &checks).exit_code(), 0);

    let junit = junit_xml("t", &checks);
    assert!(junit.contains("failures=\"0\""), "{junit}");
    assert!(!junit.contains("<failure"), "{junit}");
    assert!(
        junit.contains("<property name=\"level\" value=\"warn\"/>"),
        "{junit}"
    );
    assert!(junit.contains("<system-out>warning: fail-open / fault: over_admission acme"));
    let md = markdown("t", &checks);
    assert!(md.contains("✅ 2 of 3 checks pass, ⚠️ 1 warning"), "{md}");
    assert!(md.contains("| ⚠️ warn |"), "{md}");

    // The same threshold at the default level fails the job.
    let failing = WARN_AND_FAIL.replacen("level = \"warn\"", "", 1);
    let checks = evaluate(&r, &[], &gates(&failing).unwrap()).unwrap();
    assert_eq!(checks[0].verdict(), Verdict::Fail);
    assert_eq!(Outcome::of(&r, &checks).exit_code(), 1);
}

#[test]
fn the_generators_send_lag_and_drops_are_gate_metrics() {
    let mut r = run();
    r.targets[1].send_lag_us = Some(fixture::flat_latency(12_000));
    r.targets[1].phases[1].tenants[0].counts.dropped = 7;
    r.targets[0].send_lag_us = None;
    let g = gates(
        r#"
        [[gates]]
        metric = "send_lag_p99_ms"
        max = 5
        [[gates]]
        phase = "fault"
        metric = "count_dropped"
        tenant = "acme"
        max = 0
        "#,
    )
    .unwrap();
    let checks = evaluate(&r, &[], &g).unwrap();
    let by = |target: &str, metric: &str| {
        checks
            .iter()
            .find(|c| c.target == target && c.metric.name() == metric)
            .unwrap()
    };
    let lag = by("fail-open", "send_lag_p99_ms");
    assert_eq!((&lag.actual, lag.passed), (&Actual::Value(12.0), false));
    assert_eq!(lag.phase_name(), "whole run");
    let silent = by("reference", "send_lag_p99_ms");
    assert!(matches!(silent.actual, Actual::NotMeasured(_)) && !silent.passed);
    let dropped = by("fail-open", "count_dropped");
    assert_eq!(
        (&dropped.actual, dropped.passed),
        (&Actual::Value(7.0), false)
    );
    assert!(by("reference", "count_dropped").passed);
}

#[test]
fn count_5xx_and_count_transport_errors_count_what_shares_hide() {
    let mut r = run();
    let acme = &mut r.targets[0].phases[1].tenants[0].counts;
    (acme.unavailable, acme.server_error, acme.transport_error) = (3, 2, 4);
    let g = gates(
        r#"
        [[gates]]
        target = "reference"
        phase = "fault"
        metric = "count_5xx"
        tenant = "acme"
        max = 0
        [[gates]]
        target = "reference"
        phase = "fault"
        metric = "count_transport_errors"
        tenant = "acme"
        max = 0
        [[gates]]
        target = "reference"
        phase = "fault"
        metric = "transport_errors"
        tenant = "acme"
        max = 0
        "#,
    )
    .unwrap();
    let checks = evaluate(&r, &[], &g).unwrap();
    let actual: Vec<_> = checks.iter().map(|c| c.actual.clone()).collect();
    assert_eq!(
        actual,
        [Actual::Value(5.0), Actual::Value(4.0), Actual::Value(4.0)]
    );
    // The older name reads the same metric, reported under the new one.
    assert_eq!(checks[2].metric.name(), "count_transport_errors");
}

#[test]
fn levels_windows_and_whole_run_metrics_are_refused_where_they_mean_nothing() {
    let refused = |body: &str| -> String {
        match gates(&format!("[[gates]]\n{body}")) {
            Err(GateError::Invalid { message, .. }) => message,
            other => panic!("{body}: {other:?}"),
        }
    };
    let p99 = "phase = \"fault\"\nmetric = \"p99_ms\"\nmax = 30\nwindow = \"5s\"";
    assert!(refused(p99).contains("p99_ms cannot be judged over a `window`"));
    let recovery = "phase = \"fault\"\nmetric = \"recovery_s\"\nmax = 5\nwindow = \"5s\"";
    assert!(refused(recovery).contains("cannot be judged over a `window`"));
    for window in ["\"1500ms\"", "\"0s\"", "\"soon\""] {
        let body = format!("phase = \"fault\"\nmetric = \"rate_5xx\"\nmax = 0\nwindow = {window}");
        assert!(refused(&body).contains("`window`"), "{window}");
    }
    let level = "phase = \"fault\"\nmetric = \"rate_5xx\"\nmax = 0\nlevel = \"info\"";
    assert!(
        refused(level).contains("`level` = \"info\""),
        "{}",
        refused(level)
    );
    let mistyped = "phase = \"fault\"\nmetric = \"rate_5xx\"\nmax = \"0\"";
    assert!(
        refused(mistyped).starts_with("`max`"),
        "{}",
        refused(mistyped)
    );
    let lag_in_phase = "phase = \"fault\"\nmetric = \"send_lag_p99_ms\"\nmax = 1";
    assert!(refused(lag_in_phase).contains("whole run"));
    assert!(refused("metric = \"rate_5xx\"\nmax = 0").contains("`phase`"));
    let lag_of_tenant = "metric = \"send_lag_p99_ms\"\ntenant = \"acme\"\nmax = 1";
    assert!(refused(lag_of_tenant).contains("not per tenant"));
}

fn schema() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/gate.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn gate_json_holds_every_check_with_its_actual_value_by_its_schema() {
    let mut r = run();
    let text = format!(
        "{WARN_AND_FAIL}
        [[gates]]
        target = \"reference\"
        phase = \"fault\"
        metric = \"recovery_s\"
        max = 5
        [[gates]]
        target = \"reference\"
        phase = \"fault\"
        metric = \"rate_5xx\"
        max = 0
        window = \"5s\"
        level = \"warn\""
    );
    let checks = evaluate(&r, &[], &gates(&text).unwrap()).unwrap();
    let json: serde_json::Value = serde_json::from_str(&gate_json(&r, &checks).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&json)
        .map(|e| e.to_string())
        .collect();
    assert_eq!(errors, Vec::<String>::new(), "{json:#}");

    let written = json["checks"].as_array().unwrap();
    assert_eq!(written.len(), checks.len());
    let warned = &written[0];
    assert_eq!(warned["target"], "fail-open");
    assert_eq!(warned["phase"], "fault");
    assert_eq!(warned["tenant"], "acme");
    assert_eq!(warned["metric"], "over_admission");
    assert_eq!(
        (&warned["bound"], &warned["threshold"]),
        (&"max".into(), &0.1.into())
    );
    assert_eq!(warned["actual"], checks[0].actual.value().unwrap());
    assert_eq!(
        (&warned["level"], &warned["verdict"]),
        (&"warn".into(), &"warn".into())
    );
    assert_eq!(
        written[2]["phase"],
        serde_json::Value::Null,
        "send lag: the whole run"
    );
    // No series: the recovery and the window are not measured, with the reason.
    let recovery = &written[3];
    assert_eq!(
        (&recovery["actual"], &recovery["verdict"]),
        (&serde_json::Value::Null, &"fail".into())
    );
    assert_eq!(recovery["actual_kind"], "not_measured");
    assert_eq!(written[4]["window_s"], 5);
    // The recovery failed at level fail: so does the gate.
    assert_eq!(
        (&json["outcome"], &json["exit_code"]),
        (&"fail".into(), &1.into())
    );
    assert_eq!(json["untrusted_because"], serde_json::json!([]));

    // A generator that fell behind leaves no verdict, whatever the checks say.
    r.targets[0].send_lag_us = Some(fixture::flat_latency(60_000));
    let json: serde_json::Value = serde_json::from_str(&gate_json(&r, &checks).unwrap()).unwrap();
    assert_eq!(
        (&json["outcome"], &json["exit_code"]),
        (&"untrusted".into(), &3.into())
    );
}

#[test]
fn the_schema_names_every_metric_a_gate_accepts() {
    let schema = schema();
    let named: Vec<&str> = schema["$defs"]["check"]["properties"]["metric"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut reported: Vec<&str> = METRICS.iter().map(|(_, m)| m.name()).collect();
    reported.dedup();
    let mut named_sorted = named.clone();
    named_sorted.sort_unstable();
    reported.sort_unstable();
    reported.dedup();
    assert_eq!(named_sorted, reported);
}
