//! A release gate in one run: the previous build of a limiter and the candidate as two targets
//! of one scaled-down run (`tests/fixtures/release-gate.toml`, the two builds one manifest's
//! variants), the reference beside them, and `failmode compare RESULTS --baseline-target
//! mine-old --candidate-target mine-new` deciding between them. The candidate differs only in
//! its Redis timeout: 250 ms instead of 20 ms, so while Redis answers 40 ms late it waits for
//! Redis on every request where the old build gives up after 20 ms and decides locally.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use failmode::compare::{
    Certainty, CompareOptions, Comparison, Metric, TargetPick, Verdict, compare_targets, load_set,
};
use failmode::results::RunResult;
use support::{failmode_in, fixture_path, output_text, workspace};

fn compare_cli(results: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let results = results.to_string_lossy();
    let mut all = vec!["compare", results.as_ref()];
    all.extend_from_slice(args);
    let output = failmode_in(&workspace(), &all);
    let (stdout, stderr) = output_text(&output);
    (output.status.code(), stdout, stderr)
}

fn compare_pair(results: &Path, baseline: &str, candidate: &str) -> Comparison {
    let set = load_set(results).unwrap();
    let pick = TargetPick {
        baseline: Some(baseline.into()),
        candidate: Some(candidate.into()),
    };
    compare_targets(&set, &set, &pick, &CompareOptions::default()).unwrap()
}

fn slow_row(c: &Comparison, metric: Metric) -> (Verdict, Certainty) {
    let row = c
        .rows
        .iter()
        .find(|r| r.phase == "slow" && r.metric == metric)
        .unwrap();
    // The whole row goes to stderr, shown when an assertion on it fails.
    eprintln!("slow {metric:?}: {row:?}");
    (row.verdict, row.certainty)
}

#[test]
fn a_candidate_that_waits_for_a_slow_redis_is_worse_than_the_previous_build_in_the_same_run() {
    let out = tempfile::tempdir().unwrap();
    let results = out.path().join("run");
    let run = failmode_in(
        &workspace(),
        &[
            "run",
            &fixture_path("release-gate.toml").to_string_lossy(),
            "--no-build",
            "--out",
            &results.to_string_lossy(),
        ],
    );
    assert!(run.status.success(), "{:?}", output_text(&run));
    let untrusted = RunResult::read(&results).unwrap().untrusted();
    assert!(untrusted.is_empty(), "{untrusted:?}");

    // The CLI: worse (exit 1), saying what is compared, the same in Markdown.
    let markdown = out.path().join("compare.md");
    let (code, stdout, stderr) = compare_cli(
        &results,
        &[
            "--baseline-target",
            "mine-old",
            "--candidate-target",
            "mine-new",
            "--markdown",
            &markdown.to_string_lossy(),
        ],
    );
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let heading = format!(
        "release-gate: mine-old → mine-new, same run, {}",
        results.display()
    );
    assert!(stdout.starts_with(&heading), "{stdout}");
    let markdown = std::fs::read_to_string(&markdown).unwrap();
    assert!(markdown.contains(&heading), "{markdown}");
    assert!(
        markdown.contains("| mine-old → mine-new | slow "),
        "{markdown}"
    );

    // Which rows: the slow phase's latency, clearly. The old build's answers there are local
    // decisions but for those that paid its 20 ms timeout; every one of the new build's waited
    // for Redis's 40 ms.
    let c = compare_pair(&results, "mine-old", "mine-new");
    for metric in [Metric::P50, Metric::P99] {
        assert_eq!(
            slow_row(&c, metric),
            (Verdict::Worse, Certainty::Clear),
            "{metric:?}"
        );
    }

    // Two identical configurations side by side (the reference is the old build's policy and
    // timeout): the slow phase's latency is not worse. Only that phase is asserted: the
    // steady and recovery phases' p99 are a few milliseconds, and one run of each target differs
    // there by about as much (docs/compare.md, noise between single runs). Nor p99.9: over a
    // few hundred requests it is the slowest one or two, which one scheduler hiccup decides.
    let c = compare_pair(&results, "reference", "mine-old");
    for metric in [Metric::P50, Metric::P99] {
        assert_ne!(slow_row(&c, metric).0, Verdict::Worse, "{metric:?}");
    }

    // Refused, exit 2, naming what the run has: a target it lacks, and a target against itself.
    let (code, _, stderr) = compare_cli(&results, &["--candidate-target", "mine-next"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("no target \"mine-next\"; it has: mine-old, mine-new, reference"),
        "{stderr}"
    );
    let (code, _, stderr) = compare_cli(&results, &["--baseline-target", "mine-old"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("against itself"), "{stderr}");
}
