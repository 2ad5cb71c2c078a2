//! `failmode outcomes`: the per-fault tables and the claims, from a synthetic results folder
//! in which `alpha-open` admits as usual during the outage and `beta-closed` answers 500.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use failmode::gate::recovery::Recovery;
use failmode::outcomes::{self, OutcomesError, Verdict};
use failmode::results::RunResult;
use support::{folder_with, run};

const SCENARIO: &str = include_str!("fixtures/outcomes.toml");

/// The synthetic run, with beta-closed refusing everything with 500 during the outage.
fn closed_run() -> RunResult {
    let mut run = run(Some("outage"));
    let beta = &mut run.targets[1];
    beta.env = [
        ("STORE_TIMEOUT_MS".to_owned(), "20".to_owned()),
        ("PORT".to_owned(), "{port}".to_owned()),
    ]
    .into();
    beta.command = vec!["node".into(), "beta.mjs".into()];
    let outage = beta.phases.iter_mut().find(|p| p.name == "outage").unwrap();
    for t in outage.tenants.iter_mut().chain([&mut outage.all]) {
        t.counts.server_error = t.counts.offered;
        t.counts.admitted = 0;
        t.counts.limited = 0;
        t.wrongful_denial = Some(1.0);
        t.admitted_per_s = 0.0;
    }
    run
}

fn folder(run: &RunResult, scenario: &str) -> tempfile::TempDir {
    let dir = folder_with(run);
    std::fs::write(dir.path().join("scenario.toml"), scenario).unwrap();
    dir
}

#[test]
fn each_fault_gets_a_table_with_a_row_per_target_and_the_phase_after_it() {
    let dir = folder(&closed_run(), SCENARIO);
    let o = outcomes::read(dir.path()).unwrap();
    assert_eq!(o.tables.len(), 1, "only the outage has faults");
    let t = &o.tables[0];
    assert_eq!(t.phase, "outage");
    assert_eq!(t.after.as_deref(), Some("recovery"));
    let names: Vec<&str> = t.rows.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(names, ["alpha-open", "beta-closed"]);

    let beta = &t.rows[1];
    assert_eq!(beta.answers.server_error, 1.0);
    assert_eq!(beta.answers.ok, 0.0);
    let denial = beta.wrongful_denial.as_ref().unwrap();
    assert_eq!(
        (denial.value, denial.tenant.as_str()),
        (1.0, "every tenant")
    );
    let alpha = &t.rows[0];
    assert!((alpha.answers.ok + alpha.answers.limited - 1.0).abs() < 1e-9);
    assert_eq!(alpha.wrongful_denial.as_ref().unwrap().value, 0.0);
    assert_eq!(
        beta.recovery_s,
        Ok(Recovery::Recovered {
            after_s: 0.0,
            relapses: 0
        }),
        "the series is in band at once"
    );
}

#[test]
fn a_target_still_admitting_everything_after_the_fault_shows_it_beside_its_recovery() {
    // alpha-open's client has not reconnected: it keeps letting acme through after the fault.
    let mut run = closed_run();
    let recovery = run.targets[0]
        .phases
        .iter_mut()
        .find(|p| p.name == "recovery")
        .unwrap();
    recovery
        .tenants
        .iter_mut()
        .find(|t| t.name == "acme")
        .unwrap()
        .over_admission = Some(1.4);
    let dir = folder(&run, SCENARIO);
    let o = outcomes::read(dir.path()).unwrap();
    let alpha = &o.tables[0].rows[0];
    let after = alpha.over_admission_after.as_ref().unwrap();
    assert_eq!((after.value, after.tenant.as_str()), (1.4, "acme"));
    let md = outcomes::render(&o, "just peers");
    assert!(
        md.contains("over-admission in `recovery` | wrongful denial in `recovery` |")
            && md.contains("| 140.0 % (acme) | 0 |"),
        "{md}"
    );
}

#[test]
fn claims_are_confirmed_refuted_or_left_untested_never_assumed() {
    let claims = r#"
[[claims]]
source = "vendor A"
says = "alpha keeps serving"
checks = [{ target = "alpha-open", phase = "outage", metric = "rate_2xx", min = 0.4 }]

[[claims]]
source = "vendor B"
says = "every target keeps serving"
checks = [{ target = "*", phase = "outage", metric = "rate_2xx", min = 0.4 }]

[[claims]]
source = "article C"
says = "several targets keep serving"
at_least = 1
checks = [{ target = "*", phase = "outage", metric = "rate_2xx", min = 0.4 }]

[[claims]]
source = "article D"
says = "gamma answers 500"
checks = [{ target = "gamma", phase = "outage", metric = "rate_5xx", min = 0.99 }]
"#;
    let dir = folder(&closed_run(), &format!("{SCENARIO}{claims}"));
    let o = outcomes::read(dir.path()).unwrap();
    let verdicts: Vec<&Verdict> = o.claims.iter().map(|c| &c.verdict).collect();
    assert_eq!(verdicts[0], &Verdict::Confirmed);
    assert_eq!(verdicts[1], &Verdict::Refuted, "beta-closed served nothing");
    assert_eq!(o.claims[1].checks.len(), 2, "the glob matched both targets");
    assert_eq!(verdicts[2], &Verdict::Confirmed, "one of two is enough");
    match verdicts[3] {
        Verdict::NotTested(why) => assert!(why.contains("gamma"), "{why}"),
        v => panic!("a claim about a target that did not run was judged: {v:?}"),
    }
}

#[test]
fn a_claim_that_nothing_could_refute_is_refused() {
    for (claim, expected) in [
        (
            "[[claims]]\nsource = \"x\"\nsays = \"y\"\nchecks = []\n",
            "no checks",
        ),
        (
            "[[claims]]\nsource = \"x\"\nsays = \"y\"\nat_least = 0\nchecks = [{ phase = \"outage\", metric = \"rate_2xx\", min = 0.5 }]\n",
            "at_least = 0",
        ),
        (
            "[[claims]]\nsource = \"x\"\nsays = \"y\"\nchecks = [{ phase = \"outage\", metric = \"rate_2xxx\", min = 0.5 }]\n",
            "rate_2xxx",
        ),
    ] {
        let dir = folder(&closed_run(), &format!("{SCENARIO}{claim}"));
        let err = outcomes::read(dir.path()).unwrap_err();
        assert!(
            matches!(err, OutcomesError::Claim { index: 1, .. }),
            "{err}"
        );
        assert!(err.to_string().contains(expected), "{err}");
    }
}

#[test]
fn the_document_has_the_tables_the_verdicts_and_each_targets_settings() {
    let claims = r#"
[[claims]]
source = "article C"
says = "beta answers 500"
checks = [{ target = "beta-closed", phase = "outage", metric = "rate_5xx", min = 0.99 }]
"#;
    let dir = folder(&closed_run(), &format!("{SCENARIO}{claims}"));
    let o = outcomes::read(dir.path()).unwrap();
    let md = outcomes::render(&o, "just peers");
    for needle in [
        "# Outcomes of `synthetic-outage`",
        "Regenerate with `just peers`",
        "## `steady` (0–10 s): Redis healthy",
        "## `outage` (10–20 s): down",
        "wrongful denial in `recovery`",
        "| beta-closed |  |  |  | 100.0 % |  |",
        "100.0 % (every tenant)",
        "article C says: \"beta answers 500\" — **confirmed**",
        "`STORE_TIMEOUT_MS=20`",
        "started as `node beta.mjs`",
        "acme 120/s, globex 20/s",
        "- note <b>one</b>",
    ] {
        assert!(md.contains(needle), "{needle:?} missing from:\n{md}");
    }
    assert!(
        !md.contains("PORT={port}"),
        "per-instance values are not settings"
    );
}

#[test]
fn a_run_without_faults_or_without_its_scenario_is_named_as_such() {
    let dir = folder(&run(None), SCENARIO);
    assert!(matches!(
        outcomes::read(dir.path()),
        Err(OutcomesError::NoFaults)
    ));
    let dir = folder_with(&closed_run());
    let err = outcomes::read(dir.path()).unwrap_err();
    assert!(err.to_string().contains("scenario.toml"), "{err}");
}
