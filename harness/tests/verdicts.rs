//! Verdicts proven against the oracle (`targets/oracle`), a target whose every answer is
//! scripted: a real scaled-down run of `tests/fixtures/oracle-verdicts.toml`, and every count,
//! tail latency, recovery time and gate verdict asserted against the value computed here, in
//! advance, from the run's schedule (the same seed) and each variant's script: exactly, but
//! for a request within a few milliseconds of a boundary of the oracle's clock (either side)
//! and a recovery within one second of its script (see each). Over-admission and wrongful
//! denial are checked against their definitions on the counts the run measured.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use failmode::compare::{self, Certainty, CompareOptions, Metric, Verdict};
use failmode::gate::recovery::Recovery;
use failmode::gate::{self, Actual};
use failmode::metrics::Counts;
use failmode::results::RunResult;
use failmode::results::read::read_series;
use failmode::scenario::Scenario;
use support::oracle::{self, NEAR_S};
use support::{failmode_in, fixture_path, tenant_in};

/// The runs of this file one at a time: each measures latency, and two at once on two cores
/// would measure each other.
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_run_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_RUN_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The oracle's base delay (targets/oracle/target.toml).
const DELAY: Duration = Duration::from_millis(5);
/// Targets run at a time (`--batch`): all eight at once, the debug harness beside them on 2
/// cores, put 30 ms spikes into seconds of 5 ms answers, and the recovery band is 2 × p90 +
/// 5 ms.
const BATCH: usize = 4;

/// What an oracle variant does at a time of its own clock (s since its t0).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Act {
    /// The limit, after `delay`.
    Limit(Duration),
    Open,
    Status(u16),
    Drop,
}

/// The scripts of the variants the fixture runs, as written in targets/oracle/target.toml.
fn script(target: &str, t: f64) -> Act {
    let within = |from: f64, to: f64| (from..to).contains(&t);
    match target {
        "oracle-exact" => Act::Limit(DELAY),
        "oracle-open-cut" if within(2.0, 4.0) => Act::Open,
        "oracle-500-cut" if within(2.0, 4.0) => Act::Status(500),
        "oracle-drop-cut" if within(2.0, 4.0) => Act::Drop,
        "oracle-slow-second" if within(3.0, 4.0) => Act::Limit(Duration::from_millis(400)),
        "oracle-slow-recovery" if within(2.0, 6.0) => Act::Status(500),
        "oracle-never-recovers" if t >= 2.0 => Act::Status(500),
        "oracle-relapse" if within(2.0, 4.0) || within(7.0, 8.0) => Act::Status(500),
        _ => Act::Limit(DELAY),
    }
}

/// The counts each target × phase × tenant must show, from the schedule and the script.
/// With each cell's count of arrivals within [`NEAR_S`] of a whole second of the oracle's clock:
/// those may land on either side of a script's or a window's boundary.
/// And whether any of the cell's requests met a slow answer (the slow second's 400 ms).
fn expected(scenario: &Scenario) -> BTreeMap<(String, String, String), (Counts, u64, bool)> {
    let mut out = BTreeMap::new();
    for (ti, target) in scenario.targets.iter().enumerate() {
        // Its index in its batch: each batch is a run of its own targets.
        let (arrivals, t0) = oracle::arrivals(scenario, ti % BATCH);
        for (ni, tenant) in scenario.tenants.iter().enumerate() {
            let mut admitted_in_window: BTreeMap<i64, u32> = BTreeMap::new();
            for &at in &arrivals[ni] {
                let clock = at - t0;
                // Every boundary of these scripts and of the 1 s windows is a whole second: the
                // seed must keep arrivals 1 ms clear of them (within NEAR_S, below, a request
                // may still count either side).
                let margin = (clock - clock.round()).abs();
                assert!(
                    margin > 0.001 || clock < 0.01,
                    "seed {}: {} arrival of {} at {at:.4} s is {:.2} ms from a whole second \
                     of the oracle's clock: choose another seed",
                    scenario.seed,
                    target.name,
                    tenant.name,
                    margin * 1000.0
                );
                let phase = scenario
                    .phases
                    .iter()
                    .find(|p| p.start.as_secs_f64() <= at && at < p.end.as_secs_f64())
                    .unwrap();
                let (c, near, slow) = out
                    .entry((target.name.clone(), phase.name.clone(), tenant.name.clone()))
                    .or_insert_with(|| (Counts::default(), 0, false));
                c.offered += 1;
                if margin < NEAR_S && clock >= 0.01 {
                    *near += 1;
                }
                match script(&target.name, clock) {
                    Act::Open => c.admitted += 1,
                    Act::Status(_) => c.server_error += 1,
                    Act::Drop => c.transport_error += 1,
                    Act::Limit(delay) => {
                        *slow |= delay > DELAY;
                        let used = admitted_in_window.entry(clock.floor() as i64).or_default();
                        if f64::from(*used) < scenario.limit {
                            *used += 1;
                            c.admitted += 1;
                        } else {
                            c.limited += 1;
                        }
                    }
                }
            }
        }
    }
    out
}

fn share(part: f64, of: f64) -> f64 {
    part / of
}

#[test]
fn every_figure_and_gate_verdict_of_a_run_against_scripted_targets_is_the_one_computed_in_advance()
{
    let _alone = one_run_at_a_time();
    let scenario = Scenario::load(&fixture_path("oracle-verdicts.toml")).unwrap();
    let expected = expected(&scenario);
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("run");
    let run = support::run_fixture_trusted(
        &[],
        &fixture_path("oracle-verdicts.toml"),
        &folder,
        &["--gate", "--batch", &BATCH.to_string()],
    );
    let said =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "some gates fail: {said}");
    let r = RunResult::read(&folder).unwrap();
    assert!(r.untrusted().is_empty(), "{:?}", r.untrusted());

    // Counts, over-admission and wrongful denial, per target × phase × tenant.
    for ((target, phase, tenant), (want, near, _)) in &expected {
        let got = tenant_in(&r, target, phase, tenant);
        let at = format!("{target} / {phase} / {tenant}");
        let fields = |c: &Counts| [c.admitted, c.limited, c.server_error, c.transport_error];
        // Every request is counted; each of the few near a boundary may count either side.
        assert_eq!(got.counts.offered, want.offered, "{at}: offered");
        assert_eq!(
            fields(&got.counts).iter().sum::<u64>(),
            want.offered,
            "{at}: {:?}",
            got.counts
        );
        for (g, w) in fields(&got.counts).iter().zip(fields(want)) {
            assert!(
                g.abs_diff(w) <= *near,
                "{at}: admitted, 429, 500, transport {:?}, expected {:?} with {near} near a \
                 boundary",
                fields(&got.counts),
                fields(want)
            );
        }
        // limit ÷ window × length; a limiter right in every window may fill the ⌈length⌉ + 1
        // windows the phase touches.
        let length_s = r.targets[0]
            .phases
            .iter()
            .find(|p| &p.name == phase)
            .map(|p| p.end_s - p.start_s)
            .unwrap();
        let allowance = scenario.limit * length_s;
        assert_eq!(got.allowance, allowance, "{at}");
        let most = scenario.limit * (length_s.ceil() + 1.0);
        // The figures from the counts the run measured, by their definitions.
        let entitled = (got.counts.offered as f64).min(allowance);
        let over = (got.counts.admitted as f64 - allowance).max(0.0) / allowance;
        let beyond = (got.counts.admitted as f64 - most).max(0.0) / allowance;
        let denial = (entitled - got.counts.admitted as f64).max(0.0) / entitled;
        assert!(
            (got.over_admission.unwrap() - over).abs() < 1e-12,
            "{at}: {got:?}"
        );
        assert!(
            (got.over_admission_beyond_window.unwrap() - beyond).abs() < 1e-12,
            "{at}: {got:?}"
        );
        assert!(
            (got.wrongful_denial.unwrap() - denial).abs() < 1e-12,
            "{at}: {got:?}"
        );
    }
    // Cells with no traffic: the tenant at 0.1/s in the phases it sent nothing in.
    let mut empty = 0;
    for target in &r.targets {
        for phase in &target.phases {
            for t in &phase.tenants {
                let key = (target.name.clone(), phase.name.clone(), t.name.clone());
                if expected.contains_key(&key) {
                    continue;
                }
                empty += 1;
                assert_eq!(t.counts.offered, 0);
                assert_eq!(
                    (t.latency_us, t.over_admission, t.wrongful_denial),
                    (None, None, None),
                    "{key:?}: not measured"
                );
            }
        }
    }
    assert!(empty > 0, "the fixture has cells without traffic");

    // The phase's figures that follow from them: fail-open over-admission, fail-closed denial.
    let acme_open = tenant_in(&r, "oracle-open-cut", "fault", "acme");
    assert_eq!(acme_open.over_admission, Some(share(40.0 - 20.0, 20.0)));
    assert_eq!(acme_open.over_admission_beyond_window, Some(0.5));
    for target in ["oracle-500-cut", "oracle-drop-cut"] {
        let globex = tenant_in(&r, target, "fault", "globex");
        assert_eq!(globex.wrongful_denial, Some(1.0), "{target}");
    }

    // Latency from the schedule: 5 ms answers everywhere but the slow second, whose 400 ms
    // are the phase's tail although only half its seconds had them.
    let p99_ms = |target: &str, phase: &str| {
        tenant_in(&r, target, phase, "all").latency_us.unwrap().p99 as f64 / 1000.0
    };
    for target in ["oracle-exact", "oracle-open-cut", "oracle-500-cut"] {
        let p99 = p99_ms(target, "fault");
        assert!((5.0..30.0).contains(&p99), "{target}: p99 {p99} ms");
    }
    let slow = p99_ms("oracle-slow-second", "fault");
    assert!((400.0..450.0).contains(&slow), "slow second: p99 {slow} ms");
    let p50 = tenant_in(&r, "oracle-slow-second", "steady", "all")
        .latency_us
        .unwrap()
        .p50 as f64
        / 1000.0;
    assert!((5.0..30.0).contains(&p50), "steady: p50 {p50} ms");

    // Recovery: the rule of K = 3 seconds in a row in band, on the real series.
    let series = read_series(&folder).unwrap();
    let recovery = |target: &str| {
        let t = r.targets.iter().find(|t| t.name == target).unwrap();
        let fault = t.phases.iter().find(|p| p.name == "fault").unwrap();
        gate::recovery_time(&r, t, fault, &series).unwrap()
    };
    // The band is the steady phase's p99 (2 × p90 + 5 ms) over two seconds of 5 ms answers,
    // measured by the debug harness on 2 cores: with all eight targets at once, one second in
    // a few runs spiked past it (seen here: a relapse of oracle-exact, oracle-slow-second back
    // 1 s late), hence `--batch`. Each verdict is held to its script within one such second:
    // at once is within 1 s with at most one relapse, 2 s is 2–3 s, one relapse is one or two.
    let recovered = |target: &str,
                     after: std::ops::RangeInclusive<f64>,
                     relapses: std::ops::RangeInclusive<u32>| {
        match recovery(target) {
            Recovery::Recovered {
                after_s,
                relapses: r,
            } if after.contains(&after_s) && relapses.contains(&r) => {}
            other => {
                panic!("{target}: {other:?}, expected after {after:?} s, relapses {relapses:?}")
            }
        }
    };
    for target in [
        "oracle-exact",
        "oracle-open-cut",
        "oracle-500-cut",
        "oracle-slow-second",
    ] {
        recovered(target, 0.0..=1.0, 0..=0);
    }
    // After a cut that closed every connection, the client reconnects each one, and those
    // first seconds' latency is the (debug) harness's as much as the target's: runs here saw
    // it back at once, after 1 s, with a relapse, or in band only from the third second (too
    // late to be measured in the 5 s left). It comes back within 3 s.
    match recovery("oracle-drop-cut") {
        Recovery::Recovered { after_s, .. } => assert!(after_s <= 3.0, "drop-cut: {after_s}"),
        Recovery::NotMeasured { at_least_s, .. } => {
            assert!(at_least_s <= 3.0, "drop-cut: {at_least_s}");
        }
        Recovery::Never => panic!("drop-cut never came back"),
    }
    recovered("oracle-slow-recovery", 2.0..=3.0, 0..=0);
    assert_eq!(recovery("oracle-never-recovers"), Recovery::Never);
    recovered("oracle-relapse", 0.0..=1.0, 1..=1);

    // Every gate's verdict on every target.
    let (_, checks) = gate::gate_folder(&folder, None, false).unwrap();
    let failed = |target: &str| -> Vec<String> {
        checks
            .iter()
            .filter(|c| c.target == target && !c.passed)
            .map(|c| c.subject())
            .collect()
    };
    let initech_in_fault = |target: &str| {
        expected.contains_key(&(target.to_owned(), "fault".to_owned(), "initech".to_owned()))
    };
    let with_initech = |target: &str, mut failures: Vec<&str>| -> Vec<String> {
        if !initech_in_fault(target) {
            failures.push("p99_ms initech");
        }
        failures.into_iter().map(str::to_owned).collect()
    };
    assert_eq!(failed("oracle-exact"), with_initech("oracle-exact", vec![]));
    assert_eq!(
        failed("oracle-open-cut"),
        with_initech("oracle-open-cut", vec!["over_admission_beyond_window acme"])
    );
    for target in ["oracle-500-cut", "oracle-slow-recovery", "oracle-relapse"] {
        assert_eq!(
            failed(target),
            with_initech(target, vec!["rate_5xx", "wrongful_denial globex"]),
            "{target}"
        );
    }
    // Its recovery may come too late to measure in the run (above): that gate may fail too.
    let drop_cut: Vec<String> = failed("oracle-drop-cut")
        .into_iter()
        .filter(|f| f != "recovery_s")
        .collect();
    assert_eq!(
        drop_cut,
        with_initech("oracle-drop-cut", vec!["wrongful_denial globex"])
    );
    // initech's few requests in the fault: its p99 is the slow second's if one met it (either
    // way when one is near the slow second's bounds).
    let (initech_slow, initech_near) = expected
        .get(&(
            "oracle-slow-second".to_owned(),
            "fault".to_owned(),
            "initech".to_owned(),
        ))
        .map_or((false, false), |(_, near, slow)| (*slow, *near > 0));
    let slow_second = |with_initech_slow: bool| {
        let mut failures = vec!["p99_ms"];
        if with_initech_slow {
            failures.push("p99_ms initech");
        }
        with_initech("oracle-slow-second", failures)
    };
    let got = failed("oracle-slow-second");
    assert!(
        got == slow_second(initech_slow) || (initech_near && got == slow_second(!initech_slow)),
        "{got:?}"
    );
    assert_eq!(
        failed("oracle-never-recovers"),
        with_initech(
            "oracle-never-recovers",
            vec!["rate_5xx", "wrongful_denial globex", "recovery_s"]
        )
    );
    let initech = checks
        .iter()
        .find(|c| c.tenant.as_deref() == Some("initech") && !initech_in_fault(&c.target))
        .expect("a target whose initech sent nothing in the fault");
    assert!(
        matches!(initech.actual, Actual::NotMeasured(_)),
        "{initech}"
    );
    assert!(said.contains("not measured"), "{said}");
}

#[test]
fn requests_the_generator_dropped_count_as_waiting_the_timeout_and_make_the_verdict_untrusted() {
    let _alone = one_run_at_a_time();
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("run");
    let run = support::run_fixture(&fixture_path("oracle-drops.toml"), &folder, &[]);
    assert!(run.status.success(), "{run:?}");
    let r = RunResult::read(&folder).unwrap();
    let fault = tenant_in(&r, "oracle-slow-second", "fault", "all");
    // In the slow second eight of acme's requests and one of globex's would be in flight at
    // once; four may be: the rest are dropped, and answered nothing.
    assert!(fault.counts.dropped > 0, "{fault:?}");
    assert_eq!(r.load.dropped, fault.counts.dropped);
    assert_eq!(r.load.dropped_by_cause.in_flight_bound, r.load.dropped);
    // Without the rule the phase's p99 would be the 400 ms of what was answered.
    let p99 = fault.latency_us.unwrap().p99;
    assert!(
        p99 >= 1_000_000,
        "p99 {p99} µs: drops count as the 1 s timeout"
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("oracle-slow-second") && n.contains("fault")),
        "a note names the cells with drops: {:?}",
        r.notes
    );
    // A measurement with drops is not a verdict: gate says so and exits 3.
    let gated = failmode_in(&support::workspace(), &["gate", &folder.to_string_lossy()]);
    let said = String::from_utf8_lossy(&gated.stdout);
    assert_eq!(gated.status.code(), Some(3), "{said}");
    assert!(
        said.contains("untrusted: the load generator dropped"),
        "{said}"
    );
}

/// Runs `oracle-compare.toml` with the oracle's script set to `script`, into `folder`.
fn run_compare_side(folder: &std::path::Path, script: &str) {
    let run = support::run_fixture_trusted(
        &[("FAILMODE_ORACLE_SCRIPT", script)],
        &fixture_path("oracle-compare.toml"),
        folder,
        &[],
    );
    assert!(run.status.success(), "{script}: {run:?}");
}

#[test]
fn compare_finds_a_tail_in_three_seconds_of_ten_and_a_slower_recovery_and_nothing_between_equal_runs()
 {
    let _alone = one_run_at_a_time();
    let out = tempfile::tempdir().unwrap();
    let (base, again, cand) = (
        out.path().join("base"),
        out.path().join("again"),
        out.path().join("cand"),
    );
    run_compare_side(&base, "");
    run_compare_side(&again, "");
    // 400 ms answers from 6 to 9 s (three of the fault's ten seconds), and 500s for the first
    // four seconds after the fault ends at 13 s. Four, not two: on CI a 2 s candidate was
    // once judged the same as its baseline (the rows' values were not shown then; a baseline
    // with a second or two out of its p99 band after the fault's removal would do it), so the
    // difference is now well above any such noise, and a failing row shows its values.
    run_compare_side(&cand, "6..9: delay 400; 13..17: status 500");

    // One run a side on a shared 2-core machine: identical runs' p99 differ by a few ms
    // (measured here: 12.4 vs 8.8 ms in a 2 s steady phase, 10.9 vs 7.8 ms in recovery, with
    // another run beside them), which the default 1 ms floor calls a change. The floor here is
    // above that noise and far below the 400 ms tail the test is about; the default stays 1 ms
    // (docs/compare.md: repeats, or --floor-ms, on a noisy machine).
    let options = CompareOptions {
        abs_floor_ms: 10.0,
        ..CompareOptions::default()
    };
    let verdicts = |a: &std::path::Path, b: &std::path::Path| {
        let c = compare::compare(
            &compare::load_set(a).unwrap(),
            &compare::load_set(b).unwrap(),
            &options,
        )
        .unwrap();
        (c.exit_code(), c.rows)
    };

    let (code, rows) = verdicts(&base, &again);
    for r in &rows {
        assert_eq!(r.verdict, Verdict::Same, "{r:?}");
    }
    assert_eq!(code, 0);

    let (code, rows) = verdicts(&base, &cand);
    // A failure shows the row's values and evidence, so a flaky run explains itself.
    let row = |phase: &str, metric: Metric| {
        let r = rows
            .iter()
            .find(|r| r.phase == phase && r.metric == metric)
            .unwrap();
        ((r.verdict, r.certainty), format!("{r:?}"))
    };
    let (p99, why) = row("fault", Metric::P99);
    assert_eq!(
        p99,
        (Verdict::Worse, Certainty::Clear),
        "the phase's p99 is the 400 ms of three seconds in ten: {why}"
    );
    let (p50, why) = row("fault", Metric::P50);
    assert_eq!(p50.0, Verdict::Same, "most answers are fast: {why}");
    let (recovery, why) = row("fault", Metric::Recovery);
    assert_eq!(recovery.0, Verdict::Worse, "0 s → 4 s: {why}");
    let (errors, why) = row("recovery", Metric::Errors5xx);
    assert_eq!(errors.0, Verdict::Worse, "{why}");
    for metric in [Metric::P50, Metric::P99, Metric::Errors5xx] {
        let (steady, why) = row("steady", metric);
        assert_eq!(steady.0, Verdict::Same, "{why}");
    }
    assert_eq!(code, 1);

    // The CLI says the same, by the exit-code table, and writes the page when asked.
    let page = out.path().join("compare.html");
    let cli = failmode_in(
        &support::workspace(),
        &[
            "compare",
            &base.to_string_lossy(),
            &cand.to_string_lossy(),
            "--floor-ms",
            "10",
            "--html",
            &page.to_string_lossy(),
        ],
    );
    assert_eq!(cli.status.code(), Some(1), "{cli:?}");
    let page = std::fs::read_to_string(&page).unwrap();
    for phase in ["steady", "fault", "recovery"] {
        let title = format!("oracle-scripted / {phase}: p99 per second");
        assert_eq!(page.matches(&title).count(), 1, "{title}");
    }
}
