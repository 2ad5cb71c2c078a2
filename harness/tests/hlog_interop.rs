//! The results' HdrHistogram interval logs as other tools read them: HdrHistogram's own Java
//! library (its `HistogramLogReader`, fetched from Maven Central by `just setup`) opens
//! `latency.hlog` and finds `run.json`'s counts and percentiles; a percentile is the value at
//! rank ⌈q × n⌉ for both (docs/results.md), which a reader rounding to the nearest rank does
//! not share on small cells.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use failmode::results::hlog::{self, Interval};
use failmode::results::{Percentiles, RunResult};
use hdrhistogram::Histogram;
use support::{fixture_path, run_fixture, workspace};

/// One interval as HdrHistogram's Java library read it.
#[derive(Debug)]
struct JavaInterval {
    tag: String,
    count: u64,
    max: u64,
    /// For p50, p90, p99, p99.9: the library's `getValueAtPercentile`, and the value at rank
    /// ⌈q × count⌉ (failmode's convention) found by walking the library's recorded values.
    at: [(u64, u64); 4],
}

fn hdrhistogram_jar() -> PathBuf {
    let jar = workspace().join(".tools/java/hdrhistogram/HdrHistogram-2.2.2.jar");
    assert!(
        jar.is_file(),
        "{} is missing: `just setup` (scripts/setup.sh hdrhistogram) fetches it",
        jar.display()
    );
    jar
}

/// Reads `log` with HdrHistogram's Java library (harness/tests/hlog/ReadHlog.java).
fn read_with_java(log: &Path) -> Vec<JavaInterval> {
    let out = Command::new("java")
        .arg("-cp")
        .arg(hdrhistogram_jar())
        .arg(workspace().join("harness/tests/hlog/ReadHlog.java"))
        .arg(log)
        .output()
        .expect("java runs (a JDK 17 or later; `just setup` installs Debian's)");
    let (stdout, stderr) = support::output_text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    stdout
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            let n = |i: usize| -> u64 { f[i].parse().unwrap() };
            JavaInterval {
                tag: f[0].to_owned(),
                count: n(1),
                max: n(2),
                at: [(n(3), n(4)), (n(5), n(6)), (n(7), n(8)), (n(9), n(10))],
            }
        })
        .collect()
}

fn ours(p: &Percentiles) -> [u64; 4] {
    [p.p50, p.p90, p.p99, p.p999]
}

#[test]
fn a_percentile_is_the_value_at_rank_ceil_q_times_n_for_failmode_and_the_java_library_alike() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("ranks.hlog");
    // 75 requests 1 ms apart, where 0.99 × 75 = 74.25: rank 75 by ⌈q × n⌉, 74 for a reader
    // that rounds to the nearest rank; and 100, where every rank is whole.
    let cell = |n: u64| {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for ms in 1..=n {
            h.record(ms * 1_000).unwrap();
        }
        Interval {
            tag: format!("t/cell-of-{n}/p"),
            start: Duration::ZERO,
            length: Duration::from_secs(1),
            histogram: h,
        }
    };
    let intervals = [cell(75), cell(100)];
    hlog::write(&log, &["ranks".to_owned()], &intervals).unwrap();
    let read = read_with_java(&log);
    assert_eq!(read.len(), 2);
    for (java, written) in read.iter().zip(&intervals) {
        let mine = Percentiles::of(&written.histogram).unwrap();
        assert_eq!((java.count, java.max), (written.histogram.len(), mine.max));
        let at_rank: Vec<u64> = java.at.iter().map(|&(_, r)| r).collect();
        assert_eq!(at_rank, ours(&mine), "{}: rank ⌈q × n⌉", java.tag);
        let library: Vec<u64> = java.at.iter().map(|&(l, _)| l).collect();
        assert_eq!(library, ours(&mine), "{}: getValueAtPercentile", java.tag);
    }
    // In ms, p50 p90 p99 p99.9 (each the highest value of its bucket, hence the `+ 1 µs`s
    // of HdrHistogram's precision folded away by the division).
    let ms = |j: &JavaInterval| j.at.map(|(_, r)| r / 1_000);
    assert_eq!(ms(&read[0]), [38, 68, 75, 75]);
    assert_eq!(ms(&read[1]), [50, 90, 99, 100]);
}

#[test]
fn a_runs_latency_log_read_by_hdrhistograms_java_library_gives_run_jsons_counts_and_percentiles() {
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("run");
    let run = run_fixture(&fixture_path("oracle-drops.toml"), &folder, &[]);
    assert!(run.status.success(), "{run:?}");
    let r = RunResult::read(&folder).unwrap();
    let read = read_with_java(&folder.join("latency.hlog"));
    let cells: usize = r
        .targets
        .iter()
        .map(|t| t.phases.len() * t.phases[0].tenants.len())
        .sum();
    assert_eq!(
        read.len(),
        cells,
        "one interval per target × tenant × phase"
    );
    let mut compared = 0;
    for java in &read {
        let [target, tenant, phase] = java.tag.split('/').collect::<Vec<_>>()[..] else {
            panic!("a tag of target/tenant/phase: {}", java.tag);
        };
        let cell = support::tenant_in(&r, target, phase, tenant);
        // One value per request offered and not refused by its own client: sent (from the
        // schedule) or dropped (the request timeout).
        assert_eq!(
            java.count,
            cell.counts.offered - cell.counts.throttled,
            "{}",
            java.tag
        );
        let Some(p) = cell.latency_us else {
            assert_eq!(java.count, 0, "{}", java.tag);
            continue;
        };
        assert_eq!(java.max, p.max, "{}", java.tag);
        for ((library, at_rank), mine) in java.at.iter().zip(ours(&p)) {
            assert_eq!(*at_rank, mine, "{}: rank ⌈q × n⌉", java.tag);
            assert_eq!(*library, mine, "{}: getValueAtPercentile", java.tag);
            compared += 1;
        }
    }
    assert!(compared > 0, "{read:?}");
}
