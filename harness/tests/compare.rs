//! `compare` and `baseline save` on synthetic result sets whose differences are known: a real
//! shift is "worse" with a CI above the threshold, noise alone is "same", a faster candidate is
//! "better", rates move by percentage points, both folder shapes and the baseline file load
//! alike, and nothing present on one side only is dropped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use failmode::compare::stats::{Bootstrap, ratio_of_medians};
use failmode::compare::{
    Certainty, CompareError, CompareOptions, Comparison, Evidence, Metric, PhaseSeconds, Repeat,
    Row, RunSet, Side, Verdict, compare, load_set, render_markdown, render_table, save_baseline,
};
use failmode::metrics::Counts;
use failmode::results::read::SERIES_HEADER;
use failmode::results::{
    LoadTotals, Percentiles, PhaseResult, RunResult, SCHEMA_VERSION, TargetResult, TenantResult,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SCENARIO: &str = "slow-redis";
const PHASES: [(&str, u64, u64); 3] = [("steady", 0, 10), ("fault", 10, 40), ("recovery", 40, 55)];

/// One phase's rates, as shares.
#[derive(Clone, Copy)]
struct Rates {
    limited: f64,
    errors: f64,
    over_admission: f64,
    wrongful_denial: f64,
}

const RATES: Rates = Rates {
    limited: 0.40,
    errors: 0.0,
    over_admission: 0.01,
    wrongful_denial: 0.0,
};

/// Per-second p99 of one phase: `level_us` × (1 ± 20 %), and one second in fifteen three
/// times slower (a pause): what a shared machine does to a steady target.
fn noisy_seconds(level_us: f64, n: u64, rng: &mut ChaCha8Rng) -> Vec<u64> {
    (0..n)
        .map(|_| {
            let spike = if rng.random_range(0..15) == 0 {
                3.0
            } else {
                1.0
            };
            (level_us * spike * (1.0 + rng.random_range(-0.2..0.2))) as u64
        })
        .collect()
}

fn tenant(name: &str, offered: u64, rates: Rates, latency_us: Percentiles) -> TenantResult {
    let share = |r: f64| (offered as f64 * r).round() as u64;
    let counts = Counts {
        offered,
        admitted: offered - share(rates.limited) - share(rates.errors),
        limited: share(rates.limited),
        server_error: share(rates.errors),
        ..Counts::default()
    };
    TenantResult {
        name: name.to_owned(),
        counts,
        allowance: offered as f64 / 2.0,
        entitled: offered as f64 / 2.0,
        over_admission: Some(rates.over_admission),
        over_admission_beyond_window: Some(0.0),
        wrongful_denial: Some(rates.wrongful_denial),
        admitted_per_s: counts.admitted as f64 / 10.0,
        latency_us: Some(latency_us),
        service_time_us: Some(latency_us),
    }
}

/// A phase whose summary agrees with its seconds: p99 their median, p99.9 their maximum.
fn phase(
    name: &str,
    start: u64,
    end: u64,
    p99s: &[u64],
    rates: Rates,
) -> (PhaseResult, PhaseSeconds) {
    let mut sorted = p99s.to_vec();
    sorted.sort_unstable();
    let p99 = sorted[sorted.len() / 2];
    let latency = Percentiles {
        p50: p99 / 4,
        p90: p99 / 2,
        p99,
        p999: *sorted.last().unwrap(),
        max: *sorted.last().unwrap(),
    };
    let offered = 145 * (end - start);
    let all = tenant("all", offered, rates, latency);
    let result = PhaseResult {
        name: name.to_owned(),
        start_s: start as f64,
        end_s: end as f64,
        faults: Vec::new(),
        faults_applied_at_s: None,
        faults_removed_at_s: None,
        fallbacks: None,
        store_commands: None,
        store_amplification: None,
        store_amplification_per_attempt: None,
        client_amplification: None,
        tenants: vec![tenant("acme", offered, rates, latency)],
        all,
    };
    let seconds = PhaseSeconds {
        target: String::new(),
        phase: name.to_owned(),
        p50_us: p99s.iter().map(|v| v / 4).collect(),
        p99_us: p99s.to_vec(),
        max_us: p99s.iter().map(|v| v + v / 5).collect(),
    };
    (result, seconds)
}

/// How one target behaves in a synthetic run: its p99 level during the fault (the other
/// phases sit at 1 ms) and its rates during the fault.
#[derive(Clone, Copy)]
struct Behaviour {
    fault_level_us: f64,
    fault_rates: Rates,
}

const STEADY: Behaviour = Behaviour {
    fault_level_us: 20_000.0,
    fault_rates: RATES,
};

fn repeat(scenario: &str, targets: &[(&str, Behaviour)], seed: u64) -> Repeat {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seconds = Vec::new();
    let targets = targets
        .iter()
        .map(|&(target, b)| {
            let phases = PHASES
                .iter()
                .map(|&(name, start, end)| {
                    let (level, rates) = if name == "fault" {
                        (b.fault_level_us, b.fault_rates)
                    } else {
                        (1_000.0, RATES)
                    };
                    let samples = noisy_seconds(level, end - start, &mut rng);
                    let (result, mut s) = phase(name, start, end, &samples, rates);
                    s.target = target.to_owned();
                    seconds.push(s);
                    result
                })
                .collect();
            TargetResult {
                name: target.to_owned(),
                description: String::new(),
                instances: 4,
                command: Vec::new(),
                env: Default::default(),
                refuses_with: 429,
                send_lag_us: None,
                events: Vec::new(),
                phases,
            }
        })
        .collect();
    let run = RunResult {
        schema_version: SCHEMA_VERSION,
        scenario: scenario.to_owned(),
        description: String::new(),
        seed,
        duration_scale: 1.0,
        git_revision: None,
        started_at: "2026-11-30T08:29:40Z".to_owned(),
        duration_s: 55.0,
        partial: false,
        limit: 50.0,
        window_s: 1.0,
        load: LoadTotals::default(),
        notes: Vec::new(),
        batches: Vec::new(),
        worker: None,
        targets,
    };
    Repeat { run, seconds }
}

/// `runs` repeats of the scenario, each with its own noise (seeds from `seed`).
fn set(targets: &[(&str, Behaviour)], runs: u64, seed: u64) -> RunSet {
    RunSet {
        scenario: SCENARIO.to_owned(),
        source: format!("synthetic {seed}"),
        repeats: (0..runs)
            .map(|r| repeat(SCENARIO, targets, seed * 100 + r))
            .collect(),
    }
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

fn slower(factor: f64) -> Behaviour {
    Behaviour {
        fault_level_us: STEADY.fault_level_us * factor,
        ..STEADY
    }
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
        table.contains("95 % CI of the per-second p99 median ratio"),
        "{table}"
    );
    assert!(table.contains("verdict: worse"), "{table}");
}

#[test]
fn noise_alone_is_the_same() {
    let targets = [("reference", STEADY), ("fail-open", slower(0.05))];
    let baseline = set(&targets, 3, 3);
    let candidate = set(&targets, 3, 4);
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

#[test]
fn one_busy_run_is_not_a_regression() {
    let baseline = set(&[("reference", STEADY)], 2, 5);
    let mut candidate = set(&[("reference", STEADY)], 2, 6);
    // The machine was busy for the whole of one candidate run: 50 % slower everywhere.
    candidate.repeats[1] = repeat(SCENARIO, &[("reference", slower(1.5))], 7);
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
    // independent, the same samples look like a clear regression.
    let pooled = |set: &RunSet| -> Vec<Vec<f64>> {
        let all = set.repeats.iter().flat_map(|r| &r.seconds);
        let fault = all.filter(|s| s.phase == "fault");
        vec![fault.flat_map(|s| &s.p99_us).map(|&v| v as f64).collect()]
    };
    let boot = Bootstrap {
        resamples: opts.resamples,
        confidence: opts.confidence,
        seed: opts.seed,
    };
    let naive = ratio_of_medians(&pooled(&baseline), &pooled(&candidate), &boot).unwrap();
    assert!(naive.low > 1.1, "{naive:?}");
}

#[test]
fn a_faster_candidate_is_better_and_swapping_the_sides_swaps_the_verdict() {
    let baseline = set(&[("retry-then-deny", slower(5.0))], 3, 8);
    let candidate = set(&[("retry-then-deny", STEADY)], 3, 9);
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
    let baseline = set(&[("reference", STEADY)], 3, 10);
    let candidate = set(&[("reference", STEADY)], 3, 11);
    let mut candidate = candidate;
    for r in &mut candidate.repeats {
        for s in &mut r.seconds {
            s.p99_us.iter_mut().for_each(|v| *v = *v * 3 / 2);
        }
    }
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
    let baseline = set(&[("fail-closed", STEADY)], 2, 12);
    let denying = Behaviour {
        fault_rates: Rates {
            wrongful_denial: 0.10,
            errors: 0.10,
            ..RATES
        },
        ..STEADY
    };
    let candidate = set(&[("fail-closed", denying)], 2, 13);
    let c = compare(&baseline, &candidate, &CompareOptions::default()).unwrap();
    let denial = row(&c, "fail-closed", "fault", Metric::WrongfulDenial);
    assert_eq!(denial.verdict, Verdict::Worse, "{denial:?}");
    assert!((denial.candidate - denial.baseline - 0.10).abs() < 1e-9);
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
    assert!(markdown.contains("+10.0 pp"), "{markdown}");
    assert!(markdown.contains("**worse**"), "{markdown}");
    assert!(markdown.contains("mean of 2 vs 2 runs"), "{markdown}");
}

/// Writes a repeat as a results folder: `run.json` and `series.csv` with per-tenant rows
/// (which compare ignores), the `all` rows, and one second in which nothing was answered.
fn write_folder(dir: &Path, r: &Repeat) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("run.json"),
        serde_json::to_string_pretty(&r.run).unwrap(),
    )
    .unwrap();
    let mut csv = format!("{SERIES_HEADER}\n");
    for s in &r.seconds {
        let (start, _) = PHASES
            .iter()
            .find(|p| p.0 == s.phase)
            .map(|p| (p.1, p.2))
            .unwrap();
        for (i, p99) in s.p99_us.iter().enumerate() {
            let second = start + i as u64;
            let (p50, max) = (s.p50_us[i], s.max_us[i]);
            for tenant in ["acme", "all"] {
                csv += &format!(
                    "{},{tenant},{second},{},145,87,58,0,0,0,0,0,{p50},{p99},{max},0,0\n",
                    s.target, s.phase
                );
            }
        }
        csv += &format!(
            "{},all,99,{},0,0,0,0,0,0,0,0,0,0,0,0,0\n",
            s.target, s.phase
        );
    }
    std::fs::write(dir.join("series.csv"), csv).unwrap();
}

#[test]
fn both_folder_shapes_and_a_saved_baseline_load_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = set(&[("reference", STEADY), ("fail-open", slower(0.05))], 3, 14);

    // One run: run.json + series.csv.
    let single = tmp.path().join("single");
    write_folder(&single, &runs.repeats[0]);
    let loaded = load_set(&single).unwrap();
    assert_eq!(loaded.scenario, SCENARIO);
    assert_eq!(loaded.repeats, runs.repeats[..1]);
    // Its run.json names the same folder.
    assert_eq!(
        load_set(&single.join("run.json")).unwrap().repeats,
        loaded.repeats
    );

    // A repeat folder: run-1/ … run-3/, read in order (run-10 would sort after run-9).
    let repeated = tmp.path().join("repeated");
    for (i, r) in runs.repeats.iter().enumerate() {
        write_folder(&repeated.join(format!("run-{}", i + 1)), r);
    }
    let loaded = load_set(&repeated).unwrap();
    assert_eq!(loaded.repeats, runs.repeats);

    // Saved, then loaded back from the baseline file alone.
    let baselines = tmp.path().join("results/baselines");
    let path = save_baseline(&repeated, &baselines).unwrap();
    assert_eq!(path, baselines.join("slow-redis.json"));
    let from_file = load_set(&path).unwrap();
    assert_eq!(from_file.scenario, SCENARIO);
    assert_eq!(from_file.repeats, runs.repeats);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"baseline_version\": 1"), "{}", &text[..200]);

    // Any shape compares with any other, and the same runs agree with themselves.
    let opts = CompareOptions::default();
    let a = compare(&from_file, &loaded, &opts).unwrap();
    assert!(a.rows.iter().all(|r| r.verdict == Verdict::Same));
    let b = compare(&from_file, &load_set(&single).unwrap(), &opts).unwrap();
    assert_eq!(b.candidate.runs, 1);
    assert!(
        b.notes.iter().any(|n| n.contains("one run on a side")),
        "{:?}",
        b.notes
    );
    // Seeded: the same inputs give the same comparison, CIs and all.
    assert_eq!(a, compare(&from_file, &loaded, &opts).unwrap());

    // A folder that is none of these is refused by name.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let err = load_set(&empty).unwrap_err();
    assert!(matches!(err, CompareError::NotResults { .. }), "{err}");
}

#[test]
fn a_series_without_all_tenant_rows_is_not_decided() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = set(&[("reference", STEADY)], 1, 15);
    write_folder(tmp.path(), &runs.repeats[0]);
    // An older series.csv: tenants' rows only.
    let csv = std::fs::read_to_string(tmp.path().join("series.csv")).unwrap();
    let tenants_only: String = csv
        .lines()
        .filter(|l| !l.contains(",all,"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(tmp.path().join("series.csv"), tenants_only).unwrap();
    let old = load_set(tmp.path()).unwrap();
    let c = compare(&old, &runs, &CompareOptions::default()).unwrap();
    let p99 = row(&c, "reference", "fault", Metric::P99);
    assert_eq!(
        (p99.verdict, p99.certainty),
        (Verdict::Same, Certainty::NoSamples)
    );
    assert!(render_table(&c).contains("not decided: the baseline has no per-second samples"));
}

#[test]
fn what_one_side_ran_alone_is_listed_not_dropped() {
    let baseline = set(&[("reference", STEADY), ("fail-open", STEADY)], 2, 16);
    let mut candidate = set(&[("reference", STEADY), ("local-only", STEADY)], 2, 17);
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
    // The phases both sides ran are compared as usual.
    assert_eq!(c.rows.len(), 2 * Metric::ALL.len());
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
}

#[test]
fn runs_of_different_scenarios_are_an_error() {
    let baseline = set(&[("reference", STEADY)], 1, 18);
    let mut candidate = set(&[("reference", STEADY)], 1, 19);
    candidate.scenario = "redis-down".to_owned();
    let err = compare(&baseline, &candidate, &CompareOptions::default()).unwrap_err();
    assert!(
        matches!(err, CompareError::ScenarioMismatch { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("slow-redis") && err.to_string().contains("redis-down"));

    // Within one repeat folder too.
    let tmp = tempfile::tempdir().unwrap();
    write_folder(&tmp.path().join("run-1"), &baseline.repeats[0]);
    write_folder(
        &tmp.path().join("run-2"),
        &repeat("redis-down", &[("reference", STEADY)], 20),
    );
    let err = load_set(tmp.path()).unwrap_err();
    assert!(matches!(err, CompareError::MixedScenarios { .. }), "{err}");
}

#[test]
fn options_out_of_range_are_refused() {
    let s = set(&[("reference", STEADY)], 1, 21);
    let bad = CompareOptions {
        confidence: 95.0,
        ..CompareOptions::default()
    };
    let err = compare(&s, &s, &bad).unwrap_err();
    assert!(matches!(err, CompareError::Options(_)), "{err}");
}
