//! What the harness's integration tests share: the workspace, the CLI runner, looking a tenant
//! up in a run, a synthetic results folder (run.json, series.csv) with two targets, one that
//! admits everything during the outage and one that answers 500, a proxied Redis
//! (`proxied`), a deployed fleet (`deployed`), the load engine driven directly (`engine`), a
//! scripted HTTP server (`scripted_server`), the oracle's clock (`oracle`), what the machine
//! was busy with around a run (`machine`), a shipped scenario run in-process (`shipped`), a
//! project whose target is a Python stub, with the processes a run started (`stub`), and
//! pages rendered by headless Chromium (`browser`).

// Each test crate that includes this uses part of it.
#![allow(dead_code)]

pub(crate) mod browser;
pub(crate) mod deployed;
pub(crate) mod engine;
pub(crate) mod machine;
pub(crate) mod oracle;
pub(crate) mod proxied;
pub(crate) mod scripted_server;
pub(crate) mod shipped;
pub(crate) mod stub;

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use failmode::metrics::Counts;
use failmode::results::fixture;
use failmode::results::read::{SERIES_HEADER, SeriesRow};
use failmode::results::{LoadTotals, Percentiles, RunResult, TenantResult};
use failmode::run::RunOptions;

/// A local run of `scenario` from the workspace at full length, built first, its results in
/// `out/run`: what the in-process runs share; each test changes what it needs.
pub(crate) fn run_options(scenario: failmode::scenario::Scenario, out: &Path) -> RunOptions {
    RunOptions {
        root: workspace(),
        results_root: out.to_owned(),
        scenario,
        duration_scale: 1.0,
        targets: None,
        out: Some(out.join("run")),
        build: true,
        topology: failmode::run::Topology::Local,
        worker: None,
        live_metrics: None,
    }
}

pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A file under `harness/tests/fixtures/`.
pub(crate) fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Runs the `failmode` binary built for the tests from the workspace, to its end.
pub(crate) fn failmode(args: &[&str]) -> std::process::Output {
    failmode_in(&workspace(), args)
}

/// Runs the `failmode` binary built for the tests in `dir`, to its end.
pub(crate) fn failmode_in(dir: &Path, args: &[&str]) -> std::process::Output {
    failmode_with_env(dir, &[], args)
}

/// [`failmode_in`] with variables added to its environment (its children inherit them).
pub(crate) fn failmode_with_env(
    dir: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_failmode"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap()
}

/// `failmode run SCENARIO --no-build [EXTRA…] --out FOLDER` from the workspace: a scenario
/// file run end to end with the release binaries the test recipe built first.
pub(crate) fn run_fixture(scenario: &Path, folder: &Path, extra: &[&str]) -> std::process::Output {
    run_fixture_with_env(&[], scenario, folder, extra)
}

/// [`run_fixture`] with variables added to the run's environment (its targets inherit them).
pub(crate) fn run_fixture_with_env(
    env: &[(&str, &str)],
    scenario: &Path,
    folder: &Path,
    extra: &[&str],
) -> std::process::Output {
    fixture_command(scenario, folder, extra)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// Attempts at a run whose verdicts a test needs. A stall of the test machine (measured on CI:
/// the whole VM still for over 100 ms, every target's p99 at 100–540 ms in one second) makes
/// the generator send late, and the run rightly says its figures cannot be trusted (exit 3
/// under `--gate`): that is the machine, not what the test is about. A generator that falls
/// behind in every attempt still fails the test.
pub(crate) const ATTEMPTS_FOR_A_TRUSTED_RUN: usize = 3;

/// [`run_fixture_with_env`] again, into a clean `folder`, while its `run.json` says the run
/// cannot be trusted, at most [`ATTEMPTS_FOR_A_TRUSTED_RUN`] times; the last attempt's
/// output, whatever it says.
pub(crate) fn run_fixture_trusted(
    env: &[(&str, &str)],
    scenario: &Path,
    folder: &Path,
    extra: &[&str],
) -> std::process::Output {
    for attempt in 1.. {
        if folder.exists() {
            std::fs::remove_dir_all(folder).unwrap();
        }
        let output = run_fixture_with_env(env, scenario, folder, extra);
        // A run that wrote no run.json is returned as it is: the test's own checks say why.
        let untrusted = RunResult::read(folder)
            .map(|r| r.untrusted())
            .unwrap_or_default();
        if untrusted.is_empty() || attempt == ATTEMPTS_FOR_A_TRUSTED_RUN {
            return output;
        }
        say_running_again(attempt, &scenario.display().to_string(), &untrusted);
    }
    unreachable!("the loop returns at its last attempt")
}

/// [`run_fixture_trusted`] for a run in-process: `attempt` (a run into a folder of its own)
/// again while the result `of` it says it cannot be trusted.
pub(crate) async fn until_trusted<T>(
    what: &str,
    mut attempt: impl AsyncFnMut() -> T,
    of: impl Fn(&T) -> &RunResult,
) -> T {
    for n in 1.. {
        let done = attempt().await;
        let untrusted = of(&done).untrusted();
        if untrusted.is_empty() || n == ATTEMPTS_FOR_A_TRUSTED_RUN {
            return done;
        }
        say_running_again(n, what, &untrusted);
    }
    unreachable!("the loop returns at its last attempt")
}

/// The file every repeated run is also logged to, if set (`just test` sets it and prints the
/// file after `cargo test`): `cargo test` shows stderr only for a failing test, and a pass that
/// needed a second attempt says something about the machine.
const RUN_AGAIN_LOG: &str = "FAILMODE_RUN_AGAIN_LOG";

fn say_running_again(attempt: usize, what: &str, untrusted: &[String]) {
    let line = format!(
        "attempt {attempt} of {ATTEMPTS_FOR_A_TRUSTED_RUN} at {what}: not trusted ({}); running \
         it again",
        untrusted.join("; ")
    );
    eprintln!("{line}");
    let Some(path) = std::env::var_os(RUN_AGAIN_LOG) else {
        return;
    };
    // One write of one line in append mode: the lines of tests running at once do not mix.
    let logged = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut log| log.write_all(format!("{line}\n").as_bytes()));
    if let Err(e) = logged {
        eprintln!("{}: {e}", path.display());
    }
}

/// The command [`run_fixture`] runs, for a test that starts it and watches it while it goes.
pub(crate) fn fixture_command(
    scenario: &Path,
    folder: &Path,
    extra: &[&str],
) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_failmode"));
    command
        .arg("run")
        .arg(scenario)
        .arg("--no-build")
        .args(extra)
        .arg("--out")
        .arg(folder)
        .current_dir(workspace());
    command
}

/// A command's stdout and stderr, as text.
pub(crate) fn output_text(output: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// What is wrong with a results folder's `run.json` by `harness/schema/run.schema.json`.
pub(crate) fn schema_errors(folder: &Path) -> Vec<String> {
    file_schema_errors(folder, "run")
}

/// What is wrong with a results folder's `NAME.json` by `harness/schema/NAME.schema.json`.
pub(crate) fn file_schema_errors(folder: &Path, name: &str) -> Vec<String> {
    let read = |path: PathBuf| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    };
    let schema = read(workspace().join(format!("harness/schema/{name}.schema.json")));
    let written = read(folder.join(format!("{name}.json")));
    let validator = jsonschema::validator_for(&schema).unwrap();
    validator
        .iter_errors(&written)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

/// One tenant of one phase of one target of a run; `"all"`: every tenant together.
pub(crate) fn tenant_in<'a>(
    run: &'a RunResult,
    target: &str,
    phase: &str,
    tenant: &str,
) -> &'a TenantResult {
    run.targets
        .iter()
        .find(|t| t.name == target)
        .and_then(|t| t.phases.iter().find(|p| p.name == phase))
        .and_then(|p| {
            if tenant == "all" {
                Some(&p.all)
            } else {
                p.tenants.iter().find(|t| t.name == tenant)
            }
        })
        .unwrap_or_else(|| panic!("{target}/{phase}/{tenant} missing"))
}

pub(crate) const TARGETS: [&str; 2] = ["alpha-open", "beta-closed"];
pub(crate) const TENANTS: [(&str, u64); 2] = [("acme", 120), ("globex", 20)];
/// (name, start s, end s, faults)
pub(crate) const PHASES: [(&str, f64, f64, &[&str]); 3] = [
    ("steady", 0.0, 10.0, &[]),
    ("outage", 10.0, 20.0, &["down"]),
    ("recovery", 20.0, 30.0, &[]),
];

/// The latency of every synthetic cell, µs.
const LATENCY: Percentiles = Percentiles {
    p50: 500,
    p90: 800,
    p99: 2_000,
    p999: 20_000,
    max: 30_000,
};

pub(crate) fn tenant(name: &str, offered: u64, admitted: u64, length_s: f64) -> TenantResult {
    let mut t = fixture::tenant(name, offered, admitted, length_s, None);
    t.latency_us = Some(LATENCY);
    t
}

/// Two targets × three phases × two tenants; `fault_phase` names the phase with faults, if any.
pub(crate) fn run(fault_phase: Option<&str>) -> RunResult {
    let targets = TARGETS
        .iter()
        .map(|name| {
            let phases = PHASES
                .iter()
                .map(|(phase, start_s, end_s, faults)| {
                    let length = end_s - start_s;
                    let tenants: Vec<TenantResult> = TENANTS
                        .iter()
                        .map(|(t, rate)| {
                            let offered = rate * length as u64;
                            tenant(t, offered, offered.min(50 * length as u64), length)
                        })
                        .collect();
                    let faulty = fault_phase == Some(*phase);
                    let faults: &[&str] = if faulty { faults } else { &[] };
                    let mut p = fixture::phase(phase, (*start_s, *end_s), faults, tenants);
                    p.faults_applied_at_s = faulty.then_some(*start_s);
                    p.faults_removed_at_s = faulty.then_some(*end_s);
                    p.store_commands = Some(1_000);
                    p.store_amplification = Some(1.0);
                    p.store_amplification_per_attempt = Some(1.0);
                    p
                })
                .collect();
            let mut t = fixture::target(name, phases);
            t.description = format!("{name} under test");
            t
        })
        .collect();
    let mut run = fixture::run("synthetic-outage", targets);
    run.description = "A synthetic run with <markup> & ampersands.".into();
    run.seed = 7;
    run.git_revision = Some("0123abcd".into());
    run.started_at = "2026-01-02T03:04:05Z".into();
    run.load = LoadTotals::default();
    run.notes = vec!["note <b>one</b>".into()];
    run
}

/// One row per second × target × tenant, and the `"all"` rows; every second target (the
/// second of [`TARGETS`]) refuses everything during the outage with 500s.
pub(crate) fn series_of(targets: &[&str]) -> String {
    let mut csv = format!("{SERIES_HEADER}\n");
    for (ti, target) in targets.iter().enumerate() {
        for second in 0..30u64 {
            let (phase, outage) = match second {
                0..10 => ("steady", false),
                10..20 => ("outage", true),
                _ => ("recovery", false),
            };
            let mut all = [0u64; 4];
            let (p50, p99) = if outage {
                (40_000, 90_000)
            } else {
                (500, 1_500)
            };
            for (name, rate) in TENANTS {
                let (admitted, limited, server_error) = if outage && ti % 2 == 1 {
                    (0, 0, rate)
                } else if outage {
                    (rate, 0, 0)
                } else {
                    (rate.min(50), rate.saturating_sub(50), 0)
                };
                for (sum, v) in all.iter_mut().zip([rate, admitted, limited, server_error]) {
                    *sum += v;
                }
                let line = series_line(
                    target,
                    name,
                    (second, phase),
                    [rate, admitted, limited, server_error],
                    (p50, p99),
                );
                writeln!(csv, "{line}").unwrap();
            }
            let line = series_line(target, "all", (second, phase), all, (p50, p99));
            writeln!(csv, "{line}").unwrap();
        }
    }
    csv
}

/// One `series.csv` line, as the harness writes it: `[offered, admitted, limited, 5xx]`, the
/// p99 as the second's max too.
fn series_line(
    target: &str,
    tenant: &str,
    (second, phase): (u64, &str),
    [offered, admitted, limited, server_error]: [u64; 4],
    (p50_us, p99_us): (u64, u64),
) -> String {
    SeriesRow {
        target: target.to_owned(),
        tenant: tenant.to_owned(),
        second,
        phase: phase.to_owned(),
        counts: Counts {
            offered,
            admitted,
            limited,
            server_error,
            ..Counts::default()
        },
        p50_us,
        p99_us,
        max_us: p99_us,
    }
    .csv_line()
}

pub(crate) fn folder_with(run: &RunResult) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("run.json"),
        serde_json::to_string_pretty(run).unwrap(),
    )
    .unwrap();
    let targets: Vec<&str> = run.targets.iter().map(|t| t.name.as_str()).collect();
    std::fs::write(dir.path().join("series.csv"), series_of(&targets)).unwrap();
    dir
}
