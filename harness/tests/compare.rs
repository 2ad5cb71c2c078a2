//! `compare` and `baseline save` on synthetic runs whose differences are known. Every run is
//! made up request by request (a fate and a latency for each request the scenario
//! `tests/fixtures/compare-slow-redis.toml` schedules), recorded by the harness's own collector
//! and written by its own results-folder writer: compare reads `run.json`, `series.csv` and
//! `seconds.hlog` as a run leaves them. A real shift is "worse" with a CI above the threshold,
//! a slow tail in a minority of seconds too, noise alone is "same", a faster candidate is
//! "better", shares move by percentage points, amplification and recovery by their own
//! thresholds, a value one side did not measure fails, both folder shapes and the baseline
//! file load alike, and nothing present on one side only is dropped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::time::Duration;

use failmode::compare::stats::{Bootstrap, ratio_of_percentiles};
use failmode::compare::{
    Certainty, CompareError, CompareOptions, Comparison, Evidence, Metric, Row, RunSet, Side,
    Verdict, compare, load_set, render_html, render_markdown, render_table, save_baseline,
};
use failmode::load::{Outcome, Recorder, Role, Sample, Share, TransportError};
use failmode::metrics::Collector;
use failmode::results::build::build_targets;
use failmode::results::folder::RunFolder;
use failmode::results::hlog;
use failmode::results::read::read_series;
use failmode::results::{PhaseFacts, RunResult, TargetFacts, Worker, fixture};
use failmode::scenario::Scenario;
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SCENARIO: &str = "slow-redis";

fn scenario() -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compare-slow-redis.toml");
    Scenario::load(&path).unwrap()
}

/// How one synthetic target answers. Latency levels are each second's: a second's requests
/// take 40–100 % of it, and the level itself wanders ±20 % from second to second.
#[derive(Clone, Copy)]
struct Behaviour {
    /// Steady and recovery phases, µs.
    calm_us: f64,
    /// The fault phase, µs.
    fault_us: f64,
    /// The last seconds of the fault phase, in which 2xx answers take 1.5–2 s.
    slow_fault_s: u64,
    /// The first seconds of the recovery phase still at the fault's level.
    slow_recovery_s: u64,
    /// In the fault phase, shares of the requests within the limit answered 503, answered
    /// 500, or refused at connect.
    fault_503: f64,
    fault_500: f64,
    fault_refused: f64,
    /// In the fault phase, attempts per request (retrying clients).
    fault_attempts: u32,
    /// In the fault phase, Redis commands per request offered (1 elsewhere).
    fault_store: f64,
    /// In the fault phase, every request is refused by the client itself: nothing reaches
    /// the target.
    fault_unreached: bool,
}

const STEADY: Behaviour = Behaviour {
    calm_us: 1_000.0,
    fault_us: 20_000.0,
    slow_fault_s: 0,
    slow_recovery_s: 0,
    fault_503: 0.0,
    fault_500: 0.0,
    fault_refused: 0.0,
    fault_attempts: 1,
    fault_store: 1.0,
    fault_unreached: false,
};

fn slower(factor: f64) -> Behaviour {
    Behaviour {
        fault_us: STEADY.fault_us * factor,
        ..STEADY
    }
}

/// Where the `k`th request of a tenant in a phase falls in [0, 1): evenly spread whatever the
/// tenant's rate (a low-discrepancy sequence), so that a share of a phase's requests is that
/// share of every tenant's.
fn spread(k: u64) -> f64 {
    (k as f64 * 0.618_033_988_749_895).fract()
}

/// What became of request `i` of a tenant's `rate` in the `into`th second of a phase, and how
/// long it took.
fn fate(
    b: &Behaviour,
    (phase, into, slow): (&str, u64, bool),
    (i, rate): (u64, u64),
    level_us: f64,
    rng: &mut ChaCha8Rng,
) -> (Outcome, u32, f64) {
    let fault = phase == "fault";
    if fault && b.fault_unreached {
        return (Outcome::Throttled, 0, 0.0);
    }
    let attempts = if fault { b.fault_attempts } else { 1 };
    let quick = level_us * rng.random_range(0.4..1.0);
    // The limiter admits 50 a second; above that, 429.
    let within = rate.min(fixture::LIMIT as u64);
    if i >= within {
        return (Outcome::Limited, attempts, quick);
    }
    let u = spread(into * rate + i);
    let outcome = if !fault {
        Outcome::Admitted
    } else if u < b.fault_503 {
        Outcome::Unavailable
    } else if u < b.fault_503 + b.fault_500 {
        Outcome::ServerError
    } else if u < b.fault_503 + b.fault_500 + b.fault_refused {
        Outcome::Transport(TransportError::Refused)
    } else {
        Outcome::Admitted
    };
    let latency = if slow && outcome == Outcome::Admitted {
        rng.random_range(1_500_000.0..2_000_000.0)
    } else {
        quick
    };
    (outcome, attempts, latency)
}

/// One run of `targets`, recorded request by request and written to `dir` as a run writes
/// its results folder.
fn write_run(dir: &Path, targets: &[(&str, Behaviour)], seed: u64) {
    let scenario = scenario();
    let collector = Collector::new(scenario.measurement_shape(targets.len()));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for (t, (_, b)) in targets.iter().enumerate() {
        for second in 0..scenario.duration.as_secs() {
            let at = Duration::from_secs(second);
            let phase = &scenario.phases[scenario.phase_at(at).unwrap()];
            let into = (at - phase.start).as_secs();
            let left = (phase.end - at).as_secs();
            let (level, slow) = match phase.name.as_str() {
                "fault" => (b.fault_us, left <= b.slow_fault_s),
                "recovery" if into < b.slow_recovery_s => (b.fault_us, false),
                _ => (b.calm_us, false),
            };
            let level = level * rng.random_range(0.8..1.2);
            for (n, tenant) in scenario.tenants.iter().enumerate() {
                let rate = tenant.rate_per_s as u64;
                for i in 0..rate {
                    let (outcome, attempts, latency_us) =
                        fate(b, (&phase.name, into, slow), (i, rate), level, &mut rng);
                    let latency = Duration::from_micros(latency_us as u64);
                    collector.record(&Sample {
                        target: t,
                        tenant: n,
                        instance: 0,
                        scheduled: at + Duration::from_secs_f64(i as f64 / rate as f64),
                        send_lag: Duration::from_micros(100),
                        latency,
                        service_time: latency,
                        outcome,
                        attempts,
                        new_connections: 0,
                    });
                }
            }
        }
    }
    let measured = collector.snapshot();
    let offered_per_s: f64 = scenario.tenants.iter().map(|t| t.rate_per_s).sum();
    let facts: Vec<TargetFacts> = targets
        .iter()
        .map(|(name, b)| TargetFacts {
            name: (*name).to_owned(),
            description: String::new(),
            instances: 4,
            command: Vec::new(),
            env: Default::default(),
            refuses_with: 429,
            limit: failmode::limits::TargetLimit::scenario(scenario.limit, scenario.window),
            caller: None,
            events: Vec::new(),
            phases: scenario
                .phases
                .iter()
                .map(|p| {
                    let fault = !p.faults.is_empty();
                    let per_request = if fault { b.fault_store } else { 1.0 };
                    let offered = offered_per_s * p.length().as_secs_f64();
                    PhaseFacts {
                        faults_applied_at_s: fault.then_some(p.start.as_secs_f64()),
                        faults_removed_at_s: fault.then_some(p.end.as_secs_f64()),
                        fallbacks: None,
                        store_commands: Some((offered * per_request) as u64),
                    }
                })
                .collect(),
        })
        .collect();
    let results = build_targets(&scenario, &measured, &facts, scenario.duration);
    let mut run = fixture::run(&scenario.name, results);
    run.seed = seed;
    std::fs::create_dir_all(dir).unwrap();
    let folder = RunFolder {
        path: dir.to_owned(),
    };
    folder.write(&run, &scenario, &measured).unwrap();
}

/// Changes a results folder's `run.json`.
fn edit_run(dir: &Path, edit: impl FnOnce(&mut RunResult)) {
    let mut run = RunResult::read(dir).unwrap();
    edit(&mut run);
    let json = serde_json::to_string_pretty(&run).unwrap();
    std::fs::write(dir.join("run.json"), json).unwrap();
}

/// `runs` runs written as a repeat folder (`run-1/` …, seeds from `seed`), read back.
fn set(targets: &[(&str, Behaviour)], runs: u64, seed: u64) -> RunSet {
    let tmp = tempfile::tempdir().unwrap();
    for r in 0..runs {
        let dir = tmp.path().join(format!("run-{}", r + 1));
        write_run(&dir, targets, seed * 100 + r);
    }
    load_set(tmp.path()).unwrap()
}

fn row<'a>(c: &'a Comparison, target: &str, phase: &str, metric: Metric) -> &'a Row {
    c.rows
        .iter()
        .find(|r| r.target == target && r.phase == phase && r.metric == metric)
        .unwrap_or_else(|| panic!("no row {target} / {phase} / {}", metric.label()))
}

fn ci(r: &Row) -> (f64, f64) {
    match &r.evidence {
        Evidence::Latency { ci: Some(ci), .. } => (ci.low, ci.high),
        other => panic!("no CI: {other:?}"),
    }
}

fn verdict(c: &Comparison, target: &str, phase: &str, metric: Metric) -> (Verdict, Certainty) {
    let r = row(c, target, phase, metric);
    (r.verdict, r.certainty)
}

#[test]
fn a_known_shift_is_worse_with_a_ci_above_the_threshold() {
    let baseline = set(&[("reference", STEADY)], 3, 1);
    // The same target 1.5× slower during the fault, with fresh noise.
    let candidate = set(&[("reference", slower(1.5))], 3, 2);
    let c = compare(&baseline, &candidate, &CompareOptions::default()).unwrap();

    let p99 = row(&c, "reference", "fault", Metric::P99);
    assert_eq!(p99.verdict, Verdict::Worse, "{p99:?}");
    assert_eq!(p99.certainty, Certainty::Clear);
    let (low, high) = ci(p99);
    assert!(low > 1.1 && low < 1.5 && high > 1.5, "CI {low}–{high}");
    // Only the fault moved: the other phases' latency is the same.
    assert_eq!(
        row(&c, "reference", "steady", Metric::P99).verdict,
        Verdict::Same
    );
    assert_eq!(
        row(&c, "reference", "recovery", Metric::P50).verdict,
        Verdict::Same
    );
    assert_eq!(c.verdict(), Verdict::Worse);
    assert_eq!(c.exit_code(), 1);

    let table = render_table(&c);
    assert!(
        table.contains("95 % CI of the phase's p99 ratio"),
        "{table}"
    );
    assert!(table.contains("verdict: worse"), "{table}");
}

#[test]
fn a_slow_tail_in_a_minority_of_seconds_is_worse_on_p99() {
    // The case: every second of the baseline's fault at 5 ms; the candidate's fault
    // 22 seconds at 5 ms and 8 in which its 2xx answers take 1.5-2 s (a slow fallback).
    let fast = Behaviour {
        fault_us: 5_000.0,
        ..STEADY
    };
    let tail = Behaviour {
        slow_fault_s: 8,
        ..fast
    };
    let baseline = set(&[("reference", fast)], 1, 3);
    let candidate = set(&[("reference", tail)], 1, 4);
    let c = compare(&baseline, &candidate, &CompareOptions::default()).unwrap();

    let p99 = row(&c, "reference", "fault", Metric::P99);
    assert_eq!(
        (p99.verdict, p99.certainty),
        (Verdict::Worse, Certainty::Clear),
        "{p99:?}"
    );
    let (low, _) = ci(p99);
    assert!(low > 1.1, "CI low {low}");
    assert!(p99.candidate.unwrap() > 1_500_000.0, "{p99:?}");
    assert_eq!(
        verdict(&c, "reference", "fault", Metric::P999).0,
        Verdict::Worse
    );
    assert_eq!(
        verdict(&c, "reference", "fault", Metric::P50).0,
        Verdict::Same
    );
    assert_eq!(c.exit_code(), 1);

    // What the rule before saw: the median of the per-second p99s barely moved.
    let tmp = tempfile::tempdir().unwrap();
    write_run(tmp.path(), &[("reference", tail)], 4);
    let mut p99s: Vec<u64> = read_series(tmp.path())
        .unwrap()
        .into_iter()
        .filter(|r| r.tenant == "all" && r.phase == "fault")
        .map(|r| r.p99_us)
        .collect();
    p99s.sort_unstable();
    assert!(p99s[p99s.len() / 2] < 6_000, "{p99s:?}");
}

#[test]
fn two_identical_runs_are_the_same_on_every_row() {
    let targets = [("reference", STEADY), ("fail-open", slower(0.05))];
    let baseline = set(&targets, 1, 5);
    let candidate = set(&targets, 1, 5);
    let c = compare(&baseline, &candidate, &CompareOptions::default()).unwrap();
    for r in &c.rows {
        assert_eq!(r.verdict, Verdict::Same, "{r:?}");
        assert_eq!(r.baseline, r.candidate, "{r:?}");
        assert!(
            matches!(r.certainty, Certainty::Clear | Certainty::Inconclusive),
            "{r:?}"
        );
    }
    // Latency, eight shares and amplifications per phase, and recovery for the fault.
    assert_eq!(c.rows.len(), 2 * (3 * 11 + 1));
    assert_eq!(c.exit_code(), 0);
}

#[test]
fn noise_alone_is_the_same() {
    let targets = [("reference", STEADY), ("fail-open", slower(0.05))];
    let baseline = set(&targets, 3, 6);
    let candidate = set(&targets, 3, 7);
    let c = compare(&baseline, &candidate, &CompareOptions::default()).unwrap();
    for r in &c.rows {
        assert_eq!(r.verdict, Verdict::Same, "{r:?}");
    }
    // The interval holds 1 and is narrow enough to have told a 1.5× shift (the first test).
    let (low, high) = ci(row(&c, "reference", "fault", Metric::P99));
    assert!(
        low < 1.0 && high > 1.0 && low > 0.85 && high < 1.15,
        "CI {low}–{high}"
    );
    assert_eq!(c.exit_code(), 0);
}

/// Each run's seconds of the fault phase (10-40 s) of a target.
fn fault_seconds<'a>(set: &'a RunSet, target: &str) -> Vec<Vec<&'a Histogram<u64>>> {
    set.repeats
        .iter()
        .map(|r| r.seconds[target].range(10..40).map(|(_, h)| h).collect())
        .collect()
}

#[test]
fn one_busy_run_is_not_a_regression() {
    let baseline = set(&[("reference", STEADY)], 2, 8);
    // The machine was busy for the whole of one candidate run: 50 % slower everywhere.
    let busy = Behaviour {
        calm_us: STEADY.calm_us * 1.5,
        ..slower(1.5)
    };
    let tmp = tempfile::tempdir().unwrap();
    write_run(&tmp.path().join("run-1"), &[("reference", STEADY)], 9);
    write_run(&tmp.path().join("run-2"), &[("reference", busy)], 10);
    let candidate = load_set(tmp.path()).unwrap();
    let opts = CompareOptions::default();
    let c = compare(&baseline, &candidate, &opts).unwrap();
    let p99 = row(&c, "reference", "fault", Metric::P99);
    assert_eq!(
        (p99.verdict, p99.certainty),
        (Verdict::Same, Certainty::Inconclusive),
        "{p99:?}"
    );
    assert_eq!(c.exit_code(), 0);

    // Why seconds are resampled within runs drawn first: pooled as if every second were
    // independent, the same seconds look like a clear regression.
    fn pooled(set: &RunSet) -> Vec<Vec<&Histogram<u64>>> {
        vec![fault_seconds(set, "reference").concat()]
    }
    let boot = Bootstrap {
        resamples: opts.resamples,
        confidence: opts.confidence,
        seed: opts.seed,
    };
    let naive = ratio_of_percentiles(&pooled(&baseline), &pooled(&candidate), &[0.99], &boot);
    let naive = naive.unwrap()[0];
    assert!(naive.low > 1.1, "{naive:?}");
}

#[test]
fn a_faster_candidate_is_better_and_swapping_the_sides_swaps_the_verdict() {
    let baseline = set(&[("retry-then-deny", slower(5.0))], 3, 11);
    let candidate = set(&[("retry-then-deny", STEADY)], 3, 12);
    let opts = CompareOptions::default();
    let c = compare(&baseline, &candidate, &opts).unwrap();
    let p99 = row(&c, "retry-then-deny", "fault", Metric::P99);
    assert_eq!(p99.verdict, Verdict::Better, "{p99:?}");
    let (_, high) = ci(p99);
    assert!(high < 1.0 / 1.1, "CI high {high}");
    assert_eq!(c.verdict(), Verdict::Better);
    assert_eq!(c.exit_code(), 0);

    let swapped = compare(&candidate, &baseline, &opts).unwrap();
    assert_eq!(
        row(&swapped, "retry-then-deny", "fault", Metric::P99).verdict,
        Verdict::Worse
    );
}

#[test]
fn a_shift_under_the_absolute_floor_is_the_same() {
    // 1 ms steady latency, candidate 1.5×: a real change, but 0.5 ms is under the 1 ms floor.
    let baseline = set(&[("reference", STEADY)], 3, 13);
    let calm_slower = Behaviour {
        calm_us: STEADY.calm_us * 1.5,
        ..STEADY
    };
    let candidate = set(&[("reference", calm_slower)], 3, 14);
    let opts = CompareOptions::default();
    let c = compare(&baseline, &candidate, &opts).unwrap();
    assert_eq!(
        row(&c, "reference", "steady", Metric::P99).verdict,
        Verdict::Same
    );
    let strict = CompareOptions {
        abs_floor_ms: 0.1,
        ..opts
    };
    let c = compare(&baseline, &candidate, &strict).unwrap();
    assert_eq!(
        row(&c, "reference", "steady", Metric::P99).verdict,
        Verdict::Worse
    );
}

#[test]
fn wrongful_denial_up_ten_points_is_worse() {
    let baseline = set(&[("fail-closed", STEADY)], 2, 15);
    // A tenth of the requests within the limit answered 500 during the fault.
    let denying = Behaviour {
        fault_500: 0.10,
        ..STEADY
    };
    let candidate = set(&[("fail-closed", denying)], 2, 16);
    let c = compare(&baseline, &candidate, &CompareOptions::default()).unwrap();
    let denial = row(&c, "fail-closed", "fault", Metric::WrongfulDenial);
    assert_eq!(denial.verdict, Verdict::Worse, "{denial:?}");
    let change = denial.candidate.unwrap() - denial.baseline.unwrap();
    assert!((change - 0.10).abs() < 0.003, "{denial:?}");
    assert_eq!(
        row(&c, "fail-closed", "fault", Metric::Errors5xx).verdict,
        Verdict::Worse
    );
    assert_eq!(
        row(&c, "fail-closed", "fault", Metric::OverAdmission).verdict,
        Verdict::Same
    );
    assert_eq!(
        row(&c, "fail-closed", "steady", Metric::WrongfulDenial).verdict,
        Verdict::Same
    );
    assert_eq!(c.exit_code(), 1);
    let markdown = render_markdown(&c);
    assert!(markdown.contains("| target"), "{markdown}");
    assert!(
        markdown.contains(&format!("+{:.1} pp", change * 100.0)),
        "{markdown}"
    );
    assert!(markdown.contains("**worse**"), "{markdown}");
    assert!(markdown.contains("mean of 2 vs 2 runs"), "{markdown}");
}

#[test]
fn errors_amplification_and_a_slower_recovery_are_worse_on_their_rows() {
    let unavailable = Behaviour {
        fault_503: 0.05,
        ..STEADY
    };
    let refused = Behaviour {
        fault_refused: 0.05,
        ..STEADY
    };
    let retried = Behaviour {
        fault_attempts: 2,
        ..STEADY
    };
    let chatty = Behaviour {
        fault_store: 3.0,
        ..STEADY
    };
    let slow_to_recover = Behaviour {
        slow_recovery_s: 5,
        ..STEADY
    };
    let never = Behaviour {
        slow_recovery_s: 15,
        ..STEADY
    };
    let names = [
        "unavailable",
        "refused",
        "retried",
        "chatty",
        "slow-to-recover",
        "never",
    ];
    let baseline = set(&names.map(|n| (n, STEADY)), 1, 17);
    let changed = [
        unavailable,
        refused,
        retried,
        chatty,
        slow_to_recover,
        never,
    ];
    let candidate = set(
        &std::array::from_fn::<_, 6, _>(|i| (names[i], changed[i])),
        1,
        17,
    );
    let c = compare(&baseline, &candidate, &CompareOptions::default()).unwrap();
    let worse = (Verdict::Worse, Certainty::Clear);
    assert_eq!(
        verdict(&c, "unavailable", "fault", Metric::Unavailable),
        worse
    );
    assert_eq!(
        verdict(&c, "unavailable", "fault", Metric::Errors5xx),
        worse
    );
    assert_eq!(
        verdict(&c, "refused", "fault", Metric::TransportErrors),
        worse
    );
    assert_eq!(
        verdict(&c, "retried", "fault", Metric::ClientAmplification),
        worse
    );
    assert_eq!(
        verdict(&c, "chatty", "fault", Metric::StoreAmplification),
        worse
    );
    let slow = row(&c, "slow-to-recover", "fault", Metric::Recovery);
    assert_eq!((slow.verdict, slow.certainty), worse, "{slow:?}");
    assert_eq!((slow.baseline, slow.candidate), (Some(0.0), Some(5.0)));
    let gone = row(&c, "never", "fault", Metric::Recovery);
    assert_eq!((gone.verdict, gone.certainty), worse, "{gone:?}");
    assert_eq!(gone.candidate, Some(f64::INFINITY));
    // Each change shows on its own rows: the others' are the same (the same seed each side).
    for target in ["unavailable", "refused", "retried", "chatty"] {
        assert_eq!(
            verdict(&c, target, "fault", Metric::Recovery).0,
            Verdict::Same
        );
    }
    assert_eq!(
        verdict(&c, "chatty", "fault", Metric::ClientAmplification).0,
        Verdict::Same
    );
    // Recovery is a row of the phase with faults only.
    assert!(
        !c.rows
            .iter()
            .any(|r| r.metric == Metric::Recovery && r.phase != "fault")
    );
    let table = render_table(&c);
    assert!(table.contains("recovered → never"), "{table}");
    assert!(table.contains("+5.0 s"), "{table}");
}

#[test]
fn a_cell_nothing_reached_is_not_measured_and_fails() {
    let baseline = set(&[("reference", STEADY)], 1, 18);
    // The candidate's clients refused every request of the fault themselves.
    let unreached = Behaviour {
        fault_unreached: true,
        ..STEADY
    };
    let candidate = set(&[("reference", unreached)], 1, 19);
    let c = compare(&baseline, &candidate, &CompareOptions::default()).unwrap();
    for metric in [
        Metric::P99,
        Metric::Errors5xx,
        Metric::TransportErrors,
        Metric::OverAdmission,
        Metric::WrongfulDenial,
    ] {
        let r = row(&c, "reference", "fault", metric);
        assert_eq!(
            (r.verdict, r.certainty),
            (Verdict::Same, Certainty::NotMeasured),
            "{r:?}"
        );
        assert!(r.baseline.is_some() && r.candidate.is_none(), "{r:?}");
    }
    assert_eq!(
        c.exit_code(),
        1,
        "a check on a value that was not measured fails"
    );
    let table = render_table(&c);
    assert!(
        table.contains("not measured in the candidate: fails"),
        "{table}"
    );
    assert!(table.contains("verdict: fails"), "{table}");
}

/// Writes a repeat set's runs again as folders, for the shapes `load_set` reads.
fn write_repeats(dir: &Path, targets: &[(&str, Behaviour)], runs: u64, seed: u64) {
    for r in 0..runs {
        write_run(&dir.join(format!("run-{}", r + 1)), targets, seed * 100 + r);
    }
}

#[test]
fn both_folder_shapes_and_a_saved_baseline_load_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let targets = [("reference", STEADY), ("fail-open", slower(0.05))];
    let repeated = tmp.path().join("repeated");
    write_repeats(&repeated, &targets, 3, 20);

    // One run: its folder, or its run.json.
    let single = repeated.join("run-1");
    let loaded = load_set(&single).unwrap();
    assert_eq!(loaded.scenario, SCENARIO);
    assert_eq!(loaded.repeats.len(), 1);
    // Every second of the run has its histogram, of every answered request.
    let seconds = &loaded.repeats[0].seconds["reference"];
    assert_eq!(seconds.len(), 55);
    assert_eq!(seconds[&12].len(), 145);
    assert_eq!(
        load_set(&single.join("run.json")).unwrap().repeats,
        loaded.repeats
    );

    // A repeat folder: run-1/ … run-3/, read in order (run-10 would sort after run-9).
    let folders = load_set(&repeated).unwrap();
    assert_eq!(folders.repeats.len(), 3);
    assert_eq!(folders.repeats[..1], loaded.repeats[..]);

    // Saved, then loaded back from the baseline file alone: the same runs, histograms and
    // series, and the same comparison with any candidate.
    let baselines = tmp.path().join("results/baselines");
    let path = save_baseline(&repeated, &baselines).unwrap();
    assert_eq!(path, baselines.join("slow-redis.json"));
    let from_file = load_set(&path).unwrap();
    assert_eq!(from_file.scenario, SCENARIO);
    assert_eq!(from_file.repeats, folders.repeats);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"baseline_version\": 2"), "{}", &text[..200]);

    let opts = CompareOptions::default();
    let candidate = set(&[("reference", slower(1.5)), ("fail-open", STEADY)], 3, 21);
    let from_folders = compare(&folders, &candidate, &opts).unwrap();
    let from_baseline = compare(&from_file, &candidate, &opts).unwrap();
    assert_eq!(from_baseline.rows, from_folders.rows);
    assert_eq!(
        row(&from_baseline, "reference", "fault", Metric::P99).verdict,
        Verdict::Worse
    );

    // Any shape compares with any other, and the same runs agree with themselves.
    let a = compare(&from_file, &folders, &opts).unwrap();
    assert!(a.rows.iter().all(|r| r.verdict == Verdict::Same));
    let b = compare(&from_file, &loaded, &opts).unwrap();
    assert_eq!(b.candidate.runs, 1);
    assert!(
        b.notes.iter().any(|n| n.contains("one run on a side")),
        "{:?}",
        b.notes
    );
    // Seeded: the same inputs give the same comparison, CIs and all.
    assert_eq!(a, compare(&from_file, &folders, &opts).unwrap());

    // A folder that is none of these is refused by name.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let err = load_set(&empty).unwrap_err();
    assert!(matches!(err, CompareError::NotResults { .. }), "{err}");
}

#[test]
fn a_baseline_of_an_older_version_is_refused_with_its_version() {
    let tmp = tempfile::tempdir().unwrap();
    write_run(&tmp.path().join("run-1"), &[("reference", STEADY)], 22);
    let path = save_baseline(tmp.path(), &tmp.path().join("baselines")).unwrap();
    // A version 1 file: per-second percentiles, no histograms.
    let mut old: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    old["baseline_version"] = 1.into();
    std::fs::write(&path, old.to_string()).unwrap();
    let err = load_set(&path).unwrap_err();
    assert!(
        matches!(err, CompareError::BaselineVersion { found: 1, .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(message.contains("baseline version 1"), "{message}");
    assert!(message.contains("save the baseline again"), "{message}");
}

#[test]
fn a_seconds_log_without_all_tenant_intervals_is_not_measured() {
    let tmp = tempfile::tempdir().unwrap();
    write_run(tmp.path(), &[("reference", STEADY)], 23);
    let full = load_set(tmp.path()).unwrap();
    // A seconds.hlog with the tenants' intervals only: no second of all tenants together.
    let log = tmp.path().join("seconds.hlog");
    let tenants_only: Vec<hlog::Interval> = hlog::read(&log)
        .unwrap()
        .into_iter()
        .filter(|i| !i.tag.ends_with("/all"))
        .collect();
    hlog::write(&log, &[], &tenants_only).unwrap();
    let old = load_set(tmp.path()).unwrap();
    let c = compare(&old, &full, &CompareOptions::default()).unwrap();
    let p99 = row(&c, "reference", "fault", Metric::P99);
    assert_eq!(
        (p99.verdict, p99.certainty, p99.baseline),
        (Verdict::Same, Certainty::NotMeasured, None)
    );
    assert!(render_table(&c).contains("not measured in the baseline: fails"));
    assert_eq!(c.exit_code(), 1);
}

#[test]
fn a_workers_share_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    write_run(tmp.path(), &[("reference", STEADY)], 24);
    edit_run(tmp.path(), |run| {
        run.worker = Some(Worker {
            role: Role::Sender(Share::new(1, 2).unwrap()),
            start_at_ms: 0,
            drives_faults: true,
        });
    });
    let err = load_set(tmp.path()).unwrap_err();
    assert!(
        matches!(
            err,
            CompareError::Worker {
                index: 1,
                count: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("merge the workers first"), "{err}");
    let err = save_baseline(tmp.path(), &tmp.path().join("baselines")).unwrap_err();
    assert!(matches!(err, CompareError::Worker { .. }), "{err}");
}

#[test]
fn an_untrusted_side_exits_3_and_says_why() {
    let baseline = set(&[("reference", STEADY)], 1, 25);
    let tmp = tempfile::tempdir().unwrap();
    write_run(tmp.path(), &[("reference", STEADY)], 26);
    edit_run(tmp.path(), |run| {
        run.load.dropped = run.load.scheduled / 100
    });
    let candidate = load_set(tmp.path()).unwrap();
    let c = compare(&baseline, &candidate, &CompareOptions::default()).unwrap();
    assert_eq!(c.exit_code(), 3);
    let table = render_table(&c);
    assert!(
        table.contains("untrusted: candidate run 1: the load generator dropped"),
        "{table}"
    );
    assert!(table.contains("no verdict (exit 3)"), "{table}");
}

#[test]
fn what_one_side_ran_alone_is_listed_not_dropped_and_what_the_candidate_lacks_fails() {
    let baseline = set(&[("reference", STEADY), ("fail-open", STEADY)], 2, 27);
    let mut candidate = set(&[("reference", STEADY), ("local-only", STEADY)], 2, 28);
    // The candidate's runs were cut before the recovery phase.
    for r in &mut candidate.repeats {
        r.run.partial = true;
        for t in &mut r.run.targets {
            t.phases.retain(|p| p.name != "recovery");
        }
    }
    let c = compare(&baseline, &candidate, &CompareOptions::default()).unwrap();
    let listed: Vec<(&str, Option<&str>, Side)> = c
        .one_sided
        .iter()
        .map(|o| (o.target.as_str(), o.phase.as_deref(), o.side))
        .collect();
    assert_eq!(
        listed,
        [
            ("reference", Some("recovery"), Side::Baseline),
            ("fail-open", None, Side::Baseline),
            ("local-only", None, Side::Candidate),
        ]
    );
    // The phases both sides ran are compared as usual: steady, and the fault with recovery.
    assert_eq!(c.rows.len(), 11 + 12);
    let table = render_table(&c);
    assert!(
        table.contains("fail-open (every phase): only in the baseline"),
        "{table}"
    );
    assert!(
        table.contains("local-only (every phase): only in the candidate"),
        "{table}"
    );
    assert!(
        table.contains("reference / recovery: only in the baseline"),
        "{table}"
    );
    assert!(table.contains("candidate run 1 was interrupted"), "{table}");
    // Nothing was measured of what the baseline ran alone: it fails, never passes on nothing.
    assert_eq!(c.missing_from_candidate(), 2);
    assert_eq!(c.exit_code(), 1);
    // A target only the candidate ran is new, not missing.
    let grown = set(&[("reference", STEADY), ("fail-open", STEADY)], 2, 28);
    let c = compare(
        &set(&[("reference", STEADY)], 2, 27),
        &grown,
        &CompareOptions::default(),
    )
    .unwrap();
    assert_eq!((c.missing_from_candidate(), c.exit_code()), (0, 0));
}

#[test]
fn runs_of_different_scenarios_are_an_error() {
    let baseline = set(&[("reference", STEADY)], 1, 29);
    let mut candidate = baseline.clone();
    candidate.scenario = "redis-down".to_owned();
    let err = compare(&baseline, &candidate, &CompareOptions::default()).unwrap_err();
    assert!(
        matches!(err, CompareError::ScenarioMismatch { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("slow-redis") && err.to_string().contains("redis-down"));

    // Within one repeat folder too.
    let tmp = tempfile::tempdir().unwrap();
    write_repeats(tmp.path(), &[("reference", STEADY)], 2, 30);
    edit_run(&tmp.path().join("run-2"), |run| {
        run.scenario = "redis-down".into();
    });
    let err = load_set(tmp.path()).unwrap_err();
    assert!(matches!(err, CompareError::MixedScenarios { .. }), "{err}");
}

#[test]
fn options_out_of_range_are_refused() {
    let s = set(&[("reference", STEADY)], 1, 31);
    let bad = CompareOptions {
        confidence: 95.0,
        ..CompareOptions::default()
    };
    let err = compare(&s, &s, &bad).unwrap_err();
    assert!(matches!(err, CompareError::Options(_)), "{err}");
}

#[test]
#[ignore = "a measurement: cargo test --release -p failmode --test compare -- --ignored --nocapture"]
fn the_cost_of_a_realistic_comparison() {
    let names = [
        "reference",
        "fail-open",
        "fail-closed",
        "retry-then-deny",
        "fail-static",
        "timeout-only",
        "local-only",
    ];
    let started = std::time::Instant::now();
    let baseline = set(&names.map(|n| (n, STEADY)), 3, 32);
    let candidate = set(&names.map(|n| (n, slower(1.2))), 3, 33);
    let written = started.elapsed();
    let started = std::time::Instant::now();
    let c = compare(&baseline, &candidate, &CompareOptions::default()).unwrap();
    println!(
        "7 targets × 3 phases, 3 runs a side: written and read in {written:.1?}, compared in {:.2?} ({} rows)",
        started.elapsed(),
        c.rows.len()
    );
}

/// The data lines of an SVG plot in `colour`: (mean y in px, number of points), the legend's
/// two-point strokes left out. SVG y grows downwards: a higher line has a smaller mean.
fn lines_of(svg: &str, colour: &str) -> Vec<(f64, usize)> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(colour))
        .map(|n| {
            let ys: Vec<f64> = n
                .attribute("points")
                .unwrap()
                .split_whitespace()
                .map(|p| p.split_once(',').unwrap().1.parse().unwrap())
                .collect();
            (ys.iter().sum::<f64>() / ys.len() as f64, ys.len())
        })
        .filter(|(_, n)| *n > 2)
        .collect()
}

#[test]
fn the_html_page_plots_both_sides_p99_per_second_for_every_target_and_phase() {
    let baseline = set(&[("reference", STEADY), ("fail-open", STEADY)], 1, 8);
    let candidate = set(&[("reference", slower(3.0)), ("fail-open", STEADY)], 1, 9);
    let opts = CompareOptions {
        resamples: 200,
        ..CompareOptions::default()
    };
    let c = compare(&baseline, &candidate, &opts).unwrap();
    let page = render_html(&c, &baseline, &candidate).unwrap();

    let svgs: Vec<&str> = page
        .split("<svg")
        .skip(1)
        .map(|rest| &rest[..rest.find("</svg>").unwrap()])
        .collect();
    assert_eq!(svgs.len(), 2 * 3, "one plot per target × phase");
    for target in ["reference", "fail-open"] {
        for phase in ["steady", "fault", "recovery"] {
            let title = format!("{target} / {phase}: p99 per second");
            assert_eq!(page.matches(&title).count(), 1, "{title}");
        }
    }
    // Both sides on each plot: the baseline in blue, the candidate in vermillion.
    let fault = svgs
        .iter()
        .map(|s| format!("<svg{s}</svg>"))
        .find(|s| s.contains("reference / fault"))
        .unwrap();
    let (base, cand) = (lines_of(&fault, "#0072B2"), lines_of(&fault, "#D55E00"));
    assert!(!base.is_empty() && !cand.is_empty(), "{fault}");
    // Three times slower in the fault: the candidate's line runs above the baseline's.
    assert!(
        cand[0].0 < base[0].0,
        "candidate {cand:?}, baseline {base:?}"
    );
    assert!(page.contains("baseline p99 (1 run)") && page.contains("candidate p99 (1 run)"));
    for tag in ["<script", "<link", "<img", "@import"] {
        assert!(!page.contains(tag), "the page loads something: {tag}");
    }
}

#[test]
fn the_html_page_reads_at_1400_px_with_nothing_cut_scrolled_or_covered() {
    let targets = [
        ("rate-limiter-flexible-node-redis", STEADY),
        ("envoy-ratelimit-local-cache", STEADY),
    ];
    let baseline = set(&targets, 1, 8);
    let candidate = set(
        &[
            ("rate-limiter-flexible-node-redis", slower(3.0)),
            ("envoy-ratelimit-local-cache", STEADY),
        ],
        1,
        9,
    );
    let opts = CompareOptions {
        resamples: 200,
        ..CompareOptions::default()
    };
    let c = compare(&baseline, &candidate, &opts).unwrap();
    let page = render_html(&c, &baseline, &candidate).unwrap();
    let titles = support::browser::assert_reads_at_window_width(&page);
    assert_eq!(
        titles.len(),
        2 * 3,
        "one plot per target × phase: {titles:?}"
    );
    assert!(
        titles.contains(
            &"rate-limiter-flexible-node-redis / fault: p99 per second, both sides".to_owned()
        ),
        "{titles:?}"
    );
}
