//! Who the caller is, and whose limit a target is judged against, proven against the oracle
//! (`targets/oracle`): one scaled-down run of `tests/fixtures/identity.toml`, whose targets are
//! fixture manifests (`tests/fixtures/targets/`) of the oracle keyed by source address or by
//! `X-Forwarded-For`, told callers the right way and by header (then every tenant connects from
//! 127.0.0.1 and shares one key), and of the oracle at a limit of its own, declared in its
//! manifest's `[limit]` or not. Every expected figure comes from the scenario's population and
//! the manifests, never from numbers written here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use failmode::identity::{CallerIdentity, tenant_address};
use failmode::limits::LimitSource;
use failmode::results::{RunResult, TenantResult};
use failmode::scenario::Scenario;
use failmode::targets::manifest;
use support::{fixture_path, schema_errors, tenant_in};

/// The phase every target is judged in: the fixture has one.
const PHASE: &str = "steady";

/// Targets run at a time (`--batch`): all six at once, the debug harness starting them beside
/// its own pacing on 2 cores once stalled the sender 50.9 ms at a p99 (CI), and three at once
/// 83–122 ms (CI, 2026-12-02); a run whose generator fell behind is rightly untrusted.
const BATCH: usize = 2;

fn run_identity_fixture() -> (Scenario, RunResult, tempfile::TempDir) {
    let path = fixture_path("identity.toml");
    let scenario = Scenario::load(&path).unwrap();
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("run");
    let run = support::run_fixture_trusted(&[], &path, &folder, &["--batch", &BATCH.to_string()]);
    let (stdout, stderr) = support::output_text(&run);
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        schema_errors(&folder).is_empty(),
        "{:?}",
        schema_errors(&folder)
    );
    let r = RunResult::read(&folder).unwrap();
    assert!(r.untrusted().is_empty(), "{:?}", r.untrusted());
    (scenario, r, out)
}

/// A correct limiter keyed on the right identity: nothing admitted beyond what the windows the
/// phase touches allow, and no tenant refused more than one window's worth of what it was
/// entitled to (the oracle's windows start a few ms after the run's).
fn assert_exact(run: &RunResult, target: &str, scenario: &Scenario) {
    let judged = run.limit_of(run.targets.iter().find(|t| t.name == target).unwrap());
    for tenant in &scenario.tenants {
        let t = tenant_in(run, target, PHASE, &tenant.name);
        let at = format!("{target} / {}", tenant.name);
        assert_eq!(t.over_admission_beyond_window, Some(0.0), "{at}: {t:?}");
        let shortfall = (t.entitled - t.counts.admitted as f64).max(0.0);
        assert!(shortfall <= judged.limit, "{at}: {t:?}");
        assert_eq!(
            t.counts.other_status, 0,
            "{at}: the oracle understood the caller"
        );
    }
}

/// Every tenant on one key of `limit` per window: together they are admitted the allowance of
/// one caller (give or take one window at the phase's ends), first come first served, so the
/// tenants' shortfall together is what they were entitled to beyond it.
fn assert_one_key(run: &RunResult, target: &str, scenario: &Scenario) {
    let all: &TenantResult = tenant_in(run, target, PHASE, "all");
    let phase = &scenario.phases[0];
    let length_s = phase.length().as_secs_f64();
    let one_key = scenario.allowance(phase.length());
    let slack = scenario.limit;
    let admitted = all.counts.admitted as f64;
    assert!(
        (admitted - one_key).abs() <= slack,
        "{target}: {admitted} admitted, one caller's allowance {one_key}"
    );
    let entitled: f64 = scenario
        .tenants
        .iter()
        .map(|t| (t.rate_per_s * length_s).min(one_key))
        .sum();
    assert!(entitled > one_key + slack, "the population exceeds one key");
    let predicted = |admitted: f64| (entitled - admitted) / entitled;
    let denial = all.wrongful_denial.unwrap();
    assert!(
        denial <= predicted(one_key - slack) + 1e-9 && denial >= predicted(one_key + slack) - 1e-9,
        "{target}: wrongful denial {denial}, predicted {} ± one window",
        predicted(one_key)
    );
    for tenant in &scenario.tenants {
        let t = tenant_in(run, target, PHASE, &tenant.name);
        assert_eq!(t.over_admission, Some(0.0), "{target} / {}", tenant.name);
    }
}

#[test]
fn tenants_told_by_address_header_or_forwarded_for_and_targets_judged_by_their_own_limit() {
    let (scenario, r, _out) = run_identity_fixture();

    // run.json: each tenant's address, distinct, never failmode's own, the same as any worker
    // computes from the scenario.
    assert_eq!(r.tenants.len(), scenario.tenants.len());
    for (i, (recorded, tenant)) in r.tenants.iter().zip(&scenario.tenants).enumerate() {
        assert_eq!(recorded.name, tenant.name);
        assert_eq!(recorded.caller, tenant.caller.to_string());
        assert_eq!(Some(recorded.address), tenant_address(i));
    }
    let caller_of = |name: &str| {
        r.targets
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .caller
            .clone()
    };
    assert_eq!(
        caller_of("oracle-by-address"),
        Some(CallerIdentity::SourceAddress)
    );
    assert_eq!(
        caller_of("oracle-by-xff"),
        Some(CallerIdentity::XForwardedFor)
    );

    // (a) and (b): keyed on the identity failmode sends, exact; keyed on one failmode does not
    // send, every tenant one caller.
    for target in ["oracle-by-address", "oracle-by-xff"] {
        assert_exact(&r, target, &scenario);
    }
    for target in [
        "oracle-by-address-told-by-header",
        "oracle-by-xff-told-by-header",
    ] {
        assert_one_key(&r, target, &scenario);
    }

    // (c) A limit of its own: judged against the manifest's, exact; undeclared, judged against
    // the scenario's, the tenants above it over-admitted by what the arithmetic says.
    let fixtures = fixture_path("targets");
    let own = manifest::read(&fixtures.join("oracle-own-limit.toml")).unwrap()[0]
        .limit
        .expect("the fixture declares [limit]");
    let target = |name: &str| r.targets.iter().find(|t| t.name == name).unwrap();
    let declared = r.limit_of(target("oracle-own-limit"));
    assert_eq!(declared, own.judged());
    assert_eq!(declared.source, LimitSource::Manifest);
    assert_ne!(
        declared.limit, scenario.limit,
        "the fixture differs from the scenario"
    );
    assert_exact(&r, "oracle-own-limit", &scenario);

    let undeclared_def =
        &manifest::read(&fixtures.join("oracle-own-limit-undeclared.toml")).unwrap()[0];
    assert_eq!(undeclared_def.limit, None);
    let enforced_per_s: f64 = undeclared_def.env["FAILMODE_LIMIT"].parse().unwrap();
    let undeclared = r.limit_of(target("oracle-own-limit-undeclared"));
    assert_eq!(undeclared.source, LimitSource::Scenario);
    assert_eq!(undeclared.limit, scenario.limit);
    let phase = &scenario.phases[0];
    let length_s = phase.length().as_secs_f64();
    let allowance = scenario.allowance(phase.length());
    for tenant in &scenario.tenants {
        let t = tenant_in(&r, "oracle-own-limit-undeclared", PHASE, &tenant.name);
        // It admits up to its own limit a second: beyond the scenario's allowance by that much.
        let admitted = (tenant.rate_per_s * length_s).min(enforced_per_s * length_s);
        let predicted = (admitted - allowance).max(0.0) / allowance;
        let window = enforced_per_s / allowance;
        let got = t.over_admission.unwrap();
        assert!(
            (got - predicted).abs() <= window + 1e-9,
            "{}: over-admission {got}, predicted {predicted} ± one window",
            tenant.name
        );
        // The same requests, judged against the limit it enforces: none over.
        let same = tenant_in(&r, "oracle-own-limit", PHASE, &tenant.name);
        assert_eq!(
            same.over_admission_beyond_window,
            Some(0.0),
            "{}",
            tenant.name
        );
    }
    let heavy = scenario
        .tenants
        .iter()
        .any(|t| t.rate_per_s * length_s > allowance + enforced_per_s);
    assert!(
        heavy,
        "a tenant above the scenario's limit shows the difference"
    );
}
