//! Nothing left behind, nothing runs away. Nothing a run started outlives the harness, however
//! the harness ends: killed with SIGKILL (an OOM kill, a cancelled CI job), or told to quit at
//! once by a second Ctrl-C. Every process the run started (Toxiproxy, a redis-server per
//! target, the instances and the instances' own children) is found from the process tree
//! before the end, and must be gone, by pid and by process group, within a second of it. And
//! a rate no machine can send still ends on time, its verdict untrusted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use failmode::results::RunResult;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use support::stub::{
    Proc, Running, descendants, start_long_stub_run, stub_workspace, survivors,
    wait_until_a_tenant_is_served,
};

/// How long after the harness's end its children may still be alive.
const GONE_WITHIN: Duration = Duration::from_secs(1);

/// The processes of a run, as found while it runs; whatever is still alive when this is
/// dropped (a failing test) is killed, so a failure leaves nothing behind either.
struct RunProcesses(Vec<Proc>);

impl RunProcesses {
    /// The harness's descendants once a tenant was served: the instances, their children, the
    /// redis-servers, Toxiproxy and their watchers.
    fn of(harness: &Running) -> Self {
        let found = descendants(harness.id() as i32);
        let names: Vec<&str> = found.iter().map(|p| p.name.as_str()).collect();
        for expected in ["redis-server", "toxiproxy-serve", "python3", "sleep"] {
            assert!(names.contains(&expected), "no {expected} among {names:?}");
        }
        Self(found)
    }

    fn pids(&self) -> Vec<i32> {
        self.0.iter().map(|p| p.pid).collect()
    }

    fn groups(&self) -> Vec<i32> {
        let mut groups: Vec<i32> = self.0.iter().map(|p| p.group).collect();
        groups.sort_unstable();
        groups.dedup();
        groups
    }

    /// Waits up to [`GONE_WITHIN`] from `since` for every one of them to be gone; the ones
    /// still running then.
    fn left_after(&self, since: Instant) -> Vec<Proc> {
        loop {
            let left = survivors(&self.pids(), &self.groups());
            if left.is_empty() || since.elapsed() > GONE_WITHIN {
                return left;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for RunProcesses {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for group in self.groups() {
                let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
            }
        }
    }
}

/// The results folder of the one run in `ws`, once its journal holds a second in which a
/// request was offered.
fn folder_once_a_second_is_journaled(ws: &Path) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // results/<the scenario's name>/<the run's timestamp>
        let folders: Vec<PathBuf> = std::fs::read_dir(ws.join("results"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|scenario| std::fs::read_dir(scenario.path()).ok())
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        for folder in folders {
            let series = std::fs::read_to_string(folder.join("journal/series.csv"));
            // A row (not the header) whose `offered`, the fifth field, is not 0.
            if series.is_ok_and(|t| {
                t.lines()
                    .skip(1)
                    .any(|l| l.split(',').nth(4).is_some_and(|o| o != "0"))
            }) {
                return folder;
            }
        }
        assert!(Instant::now() < deadline, "no second was journaled");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigkill_mid_run_leaves_no_process_running_and_a_journal_report_rebuilds_into_a_partial_run() {
    let ws = stub_workspace("serve");
    let mut harness = start_long_stub_run(ws.path());
    wait_until_a_tenant_is_served(ws.path());
    let run = RunProcesses::of(&harness);
    let folder = folder_once_a_second_is_journaled(ws.path());
    kill(Pid::from_raw(harness.id() as i32), Signal::SIGKILL).unwrap();
    harness.wait().unwrap();
    let left = run.left_after(Instant::now());
    assert!(left.is_empty(), "still running: {left:?}");

    // Killed before it wrote its results: gate says how to get them back, report does.
    let folder_arg = folder.to_str().unwrap();
    let gate = support::failmode_in(ws.path(), &["gate", folder_arg]);
    let (_, stderr) = support::output_text(&gate);
    assert!(stderr.contains("failmode report"), "{stderr}");
    let report = support::failmode_in(ws.path(), &["report", folder_arg]);
    let (stdout, stderr) = support::output_text(&report);
    assert!(report.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("rebuilt a partial run.json"), "{stdout}");
    let rebuilt = RunResult::read(&folder).unwrap();
    assert!(rebuilt.partial);
    assert!(rebuilt.duration_s > 0.0 && rebuilt.duration_s < 30.0);
    let steady = &rebuilt.targets[0].phases[0].all;
    assert!(steady.counts.admitted > 0, "{steady:?}");
    assert!(steady.latency_us.is_some());
    assert!(folder.join("report.html").is_file() && folder.join("seconds.hlog").is_file());
    // A verdict on a run that did not finish is refused, as on any partial run.
    let gate = support::failmode_in(ws.path(), &["gate", folder_arg]);
    let (_, stderr) = support::output_text(&gate);
    assert_eq!(gate.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--allow-partial"), "{stderr}");
}

#[test]
fn a_second_ctrl_c_quits_at_once_and_leaves_no_process_of_the_run_running() {
    let ws = stub_workspace("serve");
    let mut harness = start_long_stub_run(ws.path());
    wait_until_a_tenant_is_served(ws.path());
    let run = RunProcesses::of(&harness);
    let pid = Pid::from_raw(harness.id() as i32);
    kill(pid, Signal::SIGINT).unwrap();
    // The second only once the first is being handled: two at once would arrive as one.
    let stderr = BufReader::new(harness.stderr.take().unwrap());
    let mut lines = stderr.lines().map_while(Result::ok);
    assert!(
        lines.any(|l| l.contains("again to quit at once")),
        "the first Ctrl-C was not answered"
    );
    kill(pid, Signal::SIGINT).unwrap();
    let status = harness.wait().unwrap();
    let quit = Instant::now();
    assert_eq!(status.code(), Some(130));
    // It quit at once, leaving its children to their watchers: no cleanup, no results.
    assert!(
        lines.any(|l| l.contains("again: quitting at once")),
        "the second Ctrl-C was not the one that quit"
    );
    assert!(!ws.path().join("results/latest/run.json").exists());
    let left = run.left_after(quit);
    assert!(left.is_empty(), "still running: {left:?}");
}

#[test]
fn a_rate_no_machine_can_send_still_ends_on_time_and_its_verdict_is_untrusted() {
    let path = support::fixture_path("absurd-rate.toml");
    let scenario = failmode::scenario::Scenario::load(&path).unwrap();
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("run");
    // The user's cache, where the generator's measured capacity is kept: the test's own.
    let cache = tempfile::tempdir().unwrap();
    let mut harness = std::process::Command::new(env!("CARGO_BIN_EXE_failmode"))
        .args([
            "run",
            &path.to_string_lossy(),
            "--no-build",
            "--gate",
            "--out",
        ])
        .arg(&folder)
        .current_dir(support::workspace())
        .env("XDG_CACHE_HOME", cache.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map(Running)
        .unwrap();
    let mut lines = BufReader::new(harness.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok);
    let before: Vec<String> = lines
        .by_ref()
        .take_while(|l| !l.starts_with("running test-absurd-rate for"))
        .collect();
    let load_started = Instant::now();
    // Warned before the start, with the way out.
    let warning = before
        .iter()
        .find(|l| l.starts_with("warning: this run asks 2000000 requests a second"))
        .unwrap_or_else(|| panic!("no capacity warning before the start: {before:?}"));
    assert!(warning.contains("--worker K/N"), "{warning}");
    assert!(cache.path().join("failmode/capacity.json").is_file());
    let rest: Vec<String> = lines.collect();
    let status = harness.wait().unwrap();
    let took = load_started.elapsed();

    // The timeline, the second an arrival may still leave after it, the request timeout, then
    // the results written and gated: some seconds for that in a debug build on a busy machine,
    // where visiting the 16 million arrivals one by one would take minutes.
    let bound = scenario.duration
        + Duration::from_secs(1)
        + scenario.request_timeout
        + Duration::from_secs(8);
    assert!(
        took < bound,
        "ended {took:?} after the load started:\n{}",
        rest.join("\n")
    );
    assert_eq!(status.code(), Some(3), "{}", rest.join("\n"));
    let run = RunResult::read(&folder).unwrap();
    assert!(!run.partial);
    assert!(run.load.dropped > 0, "{:?}", run.load);
    assert!(
        run.untrusted_because
            .iter()
            .any(|why| why.contains("dropped")),
        "{:?}",
        run.untrusted_because
    );
    assert!(
        support::schema_errors(&folder).is_empty(),
        "{:?}",
        support::schema_errors(&folder)
    );
}
