//! Gates against hand-built runs: each metric read, every mistake refused, recovery from the
//! series, and (in `levels` and `window`) warnings, gate.json and worst windows.

mod levels;
mod window;

use super::cell::tenant_value;
use super::*;
use crate::metrics::Counts;
use crate::results::read::SeriesRow;
use crate::results::{PhaseResult, TargetResult, fixture};
use crate::scenario::Scenario;

/// acme at 120/s and globex at 20/s against 50/s; acme's requests take 20 ms, globex's 1 ms.
pub(super) fn phase(name: &str, start_s: f64, end_s: f64, acme_admitted: u64) -> PhaseResult {
    let len = end_s - start_s;
    let tenants = vec![
        fixture::tenant(
            "acme",
            (120.0 * len) as u64,
            acme_admitted,
            len,
            Some(20_000),
        ),
        fixture::tenant(
            "globex",
            (20.0 * len) as u64,
            (20.0 * len) as u64,
            len,
            Some(1_000),
        ),
    ];
    let mut p = fixture::phase(name, (start_s, end_s), &[], tenants);
    p.store_commands = Some(300);
    p.store_amplification = Some(1.5);
    p.store_amplification_per_attempt = Some(1.5);
    p
}

pub(super) fn run() -> RunResult {
    let target = |name: &str, acme_fault: u64| -> TargetResult {
        fixture::target(
            name,
            vec![
                phase("steady", 0.0, 10.0, 500),
                phase("fault", 10.0, 40.0, acme_fault),
                phase("recovery", 40.0, 55.0, 750),
            ],
        )
    };
    fixture::run(
        "t",
        vec![target("reference", 1500), target("fail-open", 3600)],
    )
}

pub(super) fn gates(text: &str) -> Result<Vec<Gate>, GateError> {
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
    let value = |m| tenant_value(m, acme).value();
    assert_eq!(value(Metric::P99Ms), Some(20.0));
    assert!((value(Metric::Rate429).unwrap() - 2100.0 / 3600.0).abs() < 1e-12);
    assert_eq!(value(Metric::Rate5xx), Some(0.0));
    assert_eq!(value(Metric::TransportErrors), Some(0.0));
    assert_eq!(value(Metric::WrongfulDenial), Some(0.0));
    assert_eq!(value(Metric::ClientAmplification), Some(1.0));
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
fn a_bound_of_the_wrong_type_or_not_finite_is_refused_naming_its_key() {
    for (text, expect) in [
        ("max = \"30\"", "gate 1: `max`: invalid type: string"),
        ("min = true", "gate 1: `min`: invalid type: boolean"),
        ("max = nan", "gate 1: `max` = NaN: must be a finite number"),
        (
            "min = -inf",
            "gate 1: `min` = -inf: must be a finite number",
        ),
    ] {
        let text = format!("[[gates]]\nphase = \"fault\"\nmetric = \"p99_ms\"\n{text}");
        let e = gates(&text).unwrap_err().to_string();
        assert!(e.starts_with(expect), "{e}");
    }
    let e = gates("[[gates]]\nphase = 1\nmetric = \"p99_ms\"\nmax = 1")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("gate 1: `phase`: invalid type: integer"),
        "{e}"
    );
    // An unknown key beside a mistyped one is not blamed on the mistyped one.
    let e = gates("[[gates]]\nbogus = 1\nphase = \"fault\"\nmetric = 2\nmax = 1")
        .unwrap_err()
        .to_string();
    assert!(!e.contains("`metric`: unknown"), "{e}");
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

/// One second of one target × tenant in `series.csv`: `offered` requests, `admitted` of them
/// 2xx and the rest 429, the second's p99 `p99_us`.
pub(super) fn second_row(
    target: &str,
    tenant: &str,
    second: u64,
    (offered, admitted): (u64, u64),
    p99_us: u64,
) -> SeriesRow {
    SeriesRow {
        target: target.into(),
        tenant: tenant.into(),
        second,
        phase: String::new(),
        counts: Counts {
            offered,
            admitted,
            limited: offered - admitted,
            ..Counts::default()
        },
        p50_us: 0,
        p99_us,
        max_us: 0,
    }
}

/// acme's and all tenants' rows of the reference over `seconds`, each from `second`.
pub(super) fn reference_seconds(
    seconds: std::ops::Range<u64>,
    second: impl Fn(u64) -> ((u64, u64), u64),
) -> Vec<SeriesRow> {
    seconds
        .flat_map(|s| {
            let (counts, p99_us) = second(s);
            ["acme", "all"].map(|tenant| second_row("reference", tenant, s, counts, p99_us))
        })
        .collect()
}

#[test]
fn recovery_is_measured_from_the_series_and_never_passes_when_never() {
    let r = run();
    let row = |target: &str, tenant: &str, second: u64, offered: u64, admitted: u64, p99_us| {
        second_row(target, tenant, second, (offered, admitted), p99_us)
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
    assert_eq!(checks[0].actual, Actual::Value(3.0));
    assert!(checks[0].passed);
    assert_eq!(checks[1].actual, Actual::Unbounded);
    assert_eq!(checks[1].actual_text(), "never");
    assert!(!checks[1].passed);

    // "At least 1 s" of errors after the fault: a target that never recovered holds it more
    // than any other; one back at once does not.
    let at_least = gates(
        r#"[[gates]]
        phase = "fault"
        metric = "recovery_s"
        min = 1"#,
    )
    .unwrap();
    let checks = evaluate(&r, &series, &at_least).unwrap();
    assert!(checks[0].passed, "3 s ≥ 1 s: {}", checks[0]);
    assert!(checks[1].passed, "never is unbounded: {}", checks[1]);
}

#[test]
fn a_recovery_with_too_little_time_after_the_fault_is_not_measured_and_fails_either_bound() {
    let mut r = run();
    // The run ends 2 s after the fault: fewer than the 3 s in band recovery needs.
    for t in &mut r.targets {
        t.phases[2].end_s = 42.0;
    }
    r.duration_s = 42.0;
    let series = reference_seconds(0..42, |_| ((120, 50), 1_000));
    for bound in ["max = 5", "min = 0"] {
        let g = gates(&format!(
            "[[gates]]\ntarget = \"reference\"\nphase = \"fault\"\nmetric = \"recovery_s\"\n{bound}"
        ))
        .unwrap();
        let check = &evaluate(&r, &series, &g).unwrap()[0];
        assert!(!check.passed, "{check}");
        assert!(
            check.actual_text().starts_with("not measured"),
            "{}",
            check.actual_text()
        );
    }
}

#[test]
fn a_gate_on_a_cell_nothing_reached_the_target_in_fails_as_not_measured() {
    let mut r = run();
    // initech sent nothing in the fault phase (0.1/s, a 0.5 s phase): every max gate on it
    // would pass on nothing.
    let fault = &mut r.targets[0].phases[1];
    fault
        .tenants
        .push(fixture::tenant("initech", 0, 0, 30.0, None));
    // hooli's requests were all dropped by the generator.
    let dropped = Counts {
        offered: 40,
        dropped: 40,
        ..Counts::default()
    };
    fault
        .tenants
        .push(fixture::tenant_with("hooli", dropped, 30.0, None));
    for tenant in ["initech", "hooli"] {
        for (metric, bound) in [
            ("p99_ms", "max = 30"),
            ("rate_5xx", "max = 0"),
            ("wrongful_denial", "max = 0.01"),
            ("over_admission", "max = 0.1"),
            ("transport_errors", "max = 0"),
            ("rate_2xx", "min = 0"),
        ] {
            let g = gates(&format!(
                "[[gates]]\ntarget = \"reference\"\nphase = \"fault\"\nmetric = \"{metric}\"\ntenant = \"{tenant}\"\n{bound}"
            ))
            .unwrap();
            let check = &evaluate(&r, &[], &g).unwrap()[0];
            assert!(!check.passed, "{tenant} {metric}: {check}");
            assert!(
                matches!(check.actual, Actual::NotMeasured(_)),
                "{tenant} {metric}: {check}"
            );
            assert!(check.to_string().contains("not measured"), "{check}");
        }
    }
}

#[test]
fn store_amplification_gates_read_per_request_offered_and_per_attempt_apart() {
    let mut r = run();
    // A retry storm: 4,200 offered, 3 attempts each, 12,600 Redis commands: 3 per request
    // offered, 1 per attempt.
    let fault = &mut r.targets[0].phases[1];
    fault.store_amplification = Some(3.0);
    fault.store_amplification_per_attempt = Some(1.0);
    let g = gates(
        r#"[[gates]]
        target = "reference"
        phase = "fault"
        metric = "store_amplification"
        max = 1.5
        [[gates]]
        target = "reference"
        phase = "fault"
        metric = "store_amplification_per_attempt"
        max = 1.5"#,
    )
    .unwrap();
    let checks = evaluate(&r, &[], &g).unwrap();
    assert!(!checks[0].passed, "{}", checks[0]);
    assert!(checks[1].passed, "{}", checks[1]);
}

#[test]
fn over_admission_beyond_the_window_ignores_one_windows_slack() {
    let mut r = run();
    // The reference admits 1,530 of acme's requests in a 30 s phase at 50/s: 2 % over the
    // allowance, within one window's 50 of slack.
    r.targets[0].phases[1].tenants[0] = fixture::tenant("acme", 3600, 1530, 30.0, Some(20_000));
    let g = gates(
        r#"[[gates]]
        phase = "fault"
        metric = "over_admission_beyond_window"
        tenant = "acme"
        max = 0"#,
    )
    .unwrap();
    let checks = evaluate(&r, &[], &g).unwrap();
    assert!(checks[0].passed, "{}", checks[0]);
    assert!(!checks[1].passed, "fail-open: {}", checks[1]);
    assert_eq!(
        checks[1].actual,
        Actual::Value((3600.0 - 1500.0 - 50.0) / 1500.0)
    );
}

#[test]
fn a_partial_run_is_gated_only_when_allowed_and_a_workers_share_never() {
    let folder = std::path::Path::new("results/x");
    let mut r = run();
    assert!(refuse_incomplete(folder, &r, false).is_ok());
    r.partial = true;
    let e = refuse_incomplete(folder, &r, false).unwrap_err();
    assert!(e.to_string().contains("--allow-partial"), "{e}");
    assert!(refuse_incomplete(folder, &r, true).is_ok());
    r.partial = false;
    r.worker = Some(crate::results::Worker {
        role: crate::load::Role::Sender(crate::load::Share::new(2, 2).unwrap()),
        start_at_ms: 0,
        drives_faults: false,
    });
    let e = refuse_incomplete(folder, &r, true).unwrap_err();
    assert!(e.to_string().contains("merge the workers first"), "{e}");
    // One worker of one sent the whole traffic: a whole run.
    r.worker = Some(crate::results::Worker {
        role: crate::load::Role::Sender(crate::load::Share::WHOLE),
        start_at_ms: 0,
        drives_faults: true,
    });
    assert!(refuse_incomplete(folder, &r, false).is_ok());
}

#[test]
fn the_shipped_scenarios_gates_parse_and_name_only_known_phases_and_tenants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut gated = Vec::new();
    for name in crate::scenario::list(&dir) {
        let s = Scenario::find(&name, &dir).unwrap();
        let gates = parse_gates(&s.gates).unwrap_or_else(|e| panic!("{name}: {e}"));
        for g in &gates {
            assert!(
                s.phases.iter().any(|p| Some(&p.name) == g.phase.as_ref()),
                "{name}: {g:?}"
            );
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

#[test]
fn a_recovery_the_runs_end_cut_short_satisfies_a_minimum_it_reached_and_fails_every_maximum() {
    let cut_short = Actual::from(Recovery::NotMeasured {
        seconds: 8,
        needed: 3,
        at_least_s: 6.0,
    });
    assert!(cut_short.passes(Bound::Min(1.0)), "known to be ≥ 6 s");
    assert!(
        !cut_short.passes(Bound::Min(7.0)),
        "6 s proves nothing of 7"
    );
    assert!(
        !cut_short.passes(Bound::Max(10.0)),
        "not measured fails a max"
    );
    assert_eq!(cut_short.value(), None);
    let nothing = Actual::from(Recovery::NotMeasured {
        seconds: 2,
        needed: 3,
        at_least_s: 0.0,
    });
    assert!(!nothing.passes(Bound::Min(0.0)) && !nothing.passes(Bound::Max(5.0)));
    assert!(Actual::Unbounded.passes(Bound::Min(1e9)));
    assert!(!Actual::Unbounded.passes(Bound::Max(1e9)));
}

#[test]
fn the_last_second_of_a_run_that_ends_mid_second_is_judged_against_its_length() {
    let mut r = run();
    // The run ends at 54.5 s: its last second offers half a second of acme, and the limiter
    // admits half a second's allowance. Judged against a whole second's it would look like
    // 50 % wrongful denial, a relapse out of the band.
    for t in &mut r.targets {
        t.phases[2].end_s = 54.5;
    }
    r.duration_s = 54.5;
    let series = reference_seconds(0..55, |second| {
        let counts = if second == 54 { (60, 25) } else { (120, 50) };
        let p99_us = if (10..40).contains(&second) {
            30_000
        } else {
            1_000
        };
        (counts, p99_us)
    });
    let reference = &r.targets[0];
    let recovered = recovery_time(&r, reference, &reference.phases[1], &series).unwrap();
    assert_eq!(
        recovered,
        Recovery::Recovered {
            after_s: 0.0,
            relapses: 0
        }
    );
}

#[test]
fn a_recovery_gate_on_a_run_whose_steady_phase_was_silent_fails_as_not_measured() {
    let r = run();
    // Traffic only from the fault on: there is no band to judge the recovery against.
    let series = reference_seconds(10..55, |_| ((120, 50), 1_000));
    let g = gates(
        r#"[[gates]]
        target = "reference"
        phase = "fault"
        metric = "recovery_s"
        max = 5"#,
    )
    .unwrap();
    let check = &evaluate(&r, &series, &g).unwrap()[0];
    assert!(!check.passed, "{check}");
    assert_eq!(
        check.actual,
        Actual::NotMeasured("the steady phase had no traffic to learn the band from".into())
    );
}
