use super::*;
use crate::metrics::Counts;
use crate::results::{Percentiles, PhaseResult, TargetResult, TenantResult};

fn tenant(name: &str, offered: u64, admitted: u64, allowance: f64, p99_us: u64) -> TenantResult {
    let entitled = (offered as f64).min(allowance);
    TenantResult {
        name: name.into(),
        counts: Counts {
            offered,
            admitted,
            limited: offered - admitted,
            ..Counts::default()
        },
        allowance,
        entitled,
        over_admission: crate::metrics::derived::over_admission(admitted, allowance),
        wrongful_denial: crate::metrics::derived::wrongful_denial(admitted, entitled),
        admitted_per_s: 0.0,
        latency_us: Percentiles {
            p99: p99_us,
            ..Percentiles::default()
        },
        service_time_us: Percentiles::default(),
    }
}

fn phase(name: &str, start_s: f64, end_s: f64, acme_admitted: u64) -> PhaseResult {
    let len = end_s - start_s;
    let tenants = vec![
        tenant(
            "acme",
            (120.0 * len) as u64,
            acme_admitted,
            50.0 * len,
            20_000,
        ),
        tenant(
            "globex",
            (20.0 * len) as u64,
            (20.0 * len) as u64,
            50.0 * len,
            1_000,
        ),
    ];
    PhaseResult {
        name: name.into(),
        start_s,
        end_s,
        faults: vec![],
        faults_applied_at_s: None,
        faults_removed_at_s: None,
        fallbacks: None,
        store_commands: Some(300),
        store_amplification: Some(1.5),
        client_amplification: None,
        all: tenant("all", 0, 0, 0.0, 20_000),
        tenants,
    }
}

fn run() -> RunResult {
    let target = |name: &str, acme_fault: u64| TargetResult {
        name: name.into(),
        description: String::new(),
        instances: 4,
        command: Vec::new(),
        env: Default::default(),
        refuses_with: 429,
        send_lag_us: Percentiles::default(),
        events: vec![],
        phases: vec![
            phase("steady", 0.0, 10.0, 500),
            phase("fault", 10.0, 40.0, acme_fault),
            phase("recovery", 40.0, 55.0, 750),
        ],
    };
    RunResult {
        schema_version: 1,
        scenario: "t".into(),
        description: String::new(),
        seed: 0,
        duration_scale: 1.0,
        git_revision: None,
        started_at: String::new(),
        duration_s: 55.0,
        partial: false,
        limit: 50.0,
        window_s: 1.0,
        load: Default::default(),
        notes: vec![],
        batches: Vec::new(),
        worker: None,
        targets: vec![target("reference", 1500), target("fail-open", 3600)],
    }
}

fn gates(text: &str) -> Result<Vec<Gate>, GateError> {
    #[derive(serde::Deserialize)]
    struct F {
        gates: Vec<toml::Table>,
    }
    parse_gates(&toml::from_str::<F>(text).unwrap().gates)
}

#[test]
fn max_and_min_gates_pass_and_fail_per_matching_target() {
    let g = gates(
        r#"
        [[gates]]
        phase = "fault"
        metric = "over_admission"
        tenant = "acme"
        max = 0.1
        [[gates]]
        target = "ref*"
        phase = "fault"
        metric = "store_amplification"
        min = 2.0
        "#,
    )
    .unwrap();
    let checks = evaluate(&run(), &[], &g).unwrap();
    assert_eq!(checks.len(), 3, "the glob * matched both targets, ref* one");
    assert!(checks[0].passed, "{}", checks[0]);
    assert!(
        !checks[1].passed,
        "fail-open lets acme through: {}",
        checks[1]
    );
    assert_eq!(checks[1].actual_text(), "140.0 %");
    assert!(!checks[2].passed, "1.5 < min 2.0");
}

#[test]
fn every_latency_and_rate_metric_reads_its_value() {
    let r = run();
    let fault = &r.targets[0].phases[1];
    let acme = &fault.tenants[0];
    assert_eq!(tenant_value(Metric::P99Ms, acme), Some(20.0));
    assert!((tenant_value(Metric::Rate429, acme).unwrap() - 2100.0 / 3600.0).abs() < 1e-12);
    assert_eq!(tenant_value(Metric::Rate5xx, acme), Some(0.0));
    assert_eq!(tenant_value(Metric::TransportErrors, acme), Some(0.0));
    assert_eq!(tenant_value(Metric::WrongfulDenial, acme), Some(0.0));
    assert_eq!(tenant_value(Metric::ClientAmplification, acme), Some(1.0));
}

#[test]
fn client_amplification_is_attempts_sent_per_request_offered() {
    let mut r = run();
    let acme = &mut r.targets[0].phases[1].tenants[0];
    // 3,600 offered, 600 refused by the client itself, 2,000 retries sent.
    acme.counts.throttled = 600;
    acme.counts.retries = 2_000;
    let g = gates(
        r#"
        [[gates]]
        target = "reference"
        phase = "fault"
        metric = "client_amplification"
        tenant = "acme"
        max = 1.2
        "#,
    )
    .unwrap();
    let checks = evaluate(&r, &[], &g).unwrap();
    assert!(!checks[0].passed, "{}", checks[0]);
    assert_eq!(checks[0].actual_text(), format!("{:.2}", 5_000.0 / 3_600.0));
}

#[test]
fn a_threshold_on_what_the_run_does_not_have_is_an_error_not_a_pass() {
    for (text, expect) in [
        (
            r#"[[gates]]
            target = "envoy"
            phase = "fault"
            metric = "p99_ms"
            max = 30"#,
            "matches no target",
        ),
        (
            r#"[[gates]]
            phase = "outage"
            metric = "p99_ms"
            max = 30"#,
            "is not a phase",
        ),
        (
            r#"[[gates]]
            phase = "fault"
            metric = "p99_ms"
            tenant = "hooli"
            max = 30"#,
            "is not a tenant",
        ),
    ] {
        let e = evaluate(&run(), &[], &gates(text).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains(expect), "{e}");
    }
    for (text, expect) in [
        (
            r#"[[gates]]
            phase = "fault"
            metric = "p98_ms"
            max = 30"#,
            "unknown metric",
        ),
        (
            r#"[[gates]]
            phase = "fault"
            metric = "p99_ms"
            max = 30
            min = 1"#,
            "exactly one of max or min",
        ),
        (
            r#"[[gates]]
            phase = "fault"
            metric = "recovery_s"
            tenant = "acme"
            max = 5"#,
            "per target",
        ),
        (
            r#"[[gates]]
            phase = "fault"
            metric = "p99_ms"
            maximum = 30"#,
            "maximum",
        ),
    ] {
        let e = gates(text).unwrap_err().to_string();
        assert!(e.contains(expect), "{e}");
    }
}

#[test]
fn globs_match_whole_names() {
    assert!(glob_matches("*", "fail-open"));
    assert!(glob_matches("fail-*", "fail-open"));
    assert!(glob_matches("fail-?pen", "fail-open"));
    assert!(!glob_matches("fail", "fail-open"));
    assert!(!glob_matches("*-closed", "fail-open"));
}

#[test]
fn junit_has_one_testcase_per_check_and_escapes() {
    let g = gates(
        r#"[[gates]]
        phase = "fault"
        metric = "over_admission"
        tenant = "acme"
        max = 0.1"#,
    )
    .unwrap();
    let checks = evaluate(&run(), &[], &g).unwrap();
    let xml = junit_xml("slow<redis>", &checks);
    assert_eq!(xml.matches("<testcase ").count(), 2);
    assert_eq!(xml.matches("<failure ").count(), 1);
    assert!(xml.contains("slow&lt;redis&gt;"));
    assert!(xml.contains("failures=\"1\""));
    let md = markdown("slow-redis", &checks);
    assert!(
        md.contains("1 of 2 checks fail") && md.contains("| fail-open | fault |"),
        "{md}"
    );
}

#[test]
fn recovery_is_measured_from_the_series_and_never_passes_when_never() {
    let r = run();
    let row =
        |target: &str, tenant: &str, second: u64, offered: u64, admitted: u64, p99_us: u64| {
            SeriesRow {
                target: target.into(),
                tenant: tenant.into(),
                second,
                phase: String::new(),
                counts: Counts {
                    offered,
                    admitted,
                    ..Counts::default()
                },
                p50_us: 0,
                p99_us,
                max_us: 0,
            }
        };
    let mut series = Vec::new();
    for second in 0..55 {
        // The reference is back in band 3 s after the fault ends; fail-open never is.
        let slow = (10..43).contains(&second);
        for (target, p99) in [
            ("reference", if slow { 25_000 } else { 1_000 }),
            ("fail-open", if second >= 10 { 25_000 } else { 1_000 }),
        ] {
            series.push(row(target, "acme", second, 120, 50, 0));
            series.push(row(target, "all", second, 120, 50, p99));
        }
    }
    let g = gates(
        r#"[[gates]]
        phase = "fault"
        metric = "recovery_s"
        max = 5"#,
    )
    .unwrap();
    let checks = evaluate(&r, &series, &g).unwrap();
    assert_eq!(checks[0].actual, Some(3.0));
    assert!(checks[0].passed);
    assert_eq!(checks[1].actual, None);
    assert_eq!(checks[1].actual_text(), "never");
    assert!(!checks[1].passed);
}

#[test]
fn the_shipped_scenarios_gates_parse_and_name_only_known_phases_and_tenants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut gated = Vec::new();
    for name in crate::scenario::list(&dir) {
        let s = Scenario::find(&name, &dir).unwrap();
        let gates = parse_gates(&s.gates).unwrap_or_else(|e| panic!("{name}: {e}"));
        for g in &gates {
            assert!(s.phases.iter().any(|p| p.name == g.phase), "{name}: {g:?}");
            if let Some(t) = &g.tenant {
                assert!(s.tenants.iter().any(|x| &x.name == t), "{name}: {g:?}");
            }
        }
        if !gates.is_empty() {
            gated.push(name);
        }
    }
    assert_eq!(gated, ["hung-redis", "redis-down", "slow-redis"]);
}
