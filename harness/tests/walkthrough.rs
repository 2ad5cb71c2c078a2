//! docs/your-limiter.md's walkthrough, as a user does it: the example service
//! (`examples/checkout-api`, express-rate-limit on Redis, keyed by client address, its limit in
//! its own config) copied to a directory outside failmode's repository, and the **installed**
//! binaries (`cargo install`, which `just test-slow` runs first) with Redis and Toxiproxy on
//! `PATH`. Every command runs in a mount namespace where failmode's checkout is an empty
//! folder, so the test fails if anything needs a path into it at run time.
//!
//! The steps: `init`, the manifest the walkthrough shows, `check`, a run of the scenario `init`
//! wrote at a fifth of its length, the gate, and a built-in scenario from a plain directory.
//! The numbers it checks are the ones the walkthrough explains, derived from the scenario's
//! tenants and the limit the manifest declares.
//!
//! Slow tier: `just test-slow`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use failmode::results::RunResult;
use failmode::scenario::Scenario;
use support::{output_text, tenant_in, workspace};

/// The walkthrough's text: the manifest the test writes is the one the page shows.
const WALKTHROUGH: &str = include_str!("../../docs/your-limiter.md");
const MANIFEST_MARK: &str = "<!-- walkthrough: checkout-api manifest -->";
const NAME: &str = "checkout-api";

/// The manifest block right after the mark in the walkthrough.
fn walkthrough_manifest() -> String {
    let after = WALKTHROUGH
        .split_once(MANIFEST_MARK)
        .unwrap_or_else(|| panic!("docs/your-limiter.md has no {MANIFEST_MARK}"))
        .1;
    let body = after
        .split_once("```toml\n")
        .expect("a ```toml block after the mark")
        .1;
    body.split_once("```")
        .expect("the block's end")
        .0
        .to_owned()
}

/// Where `just test-slow` installs the binaries (`cargo install --root`), unless
/// `FAILMODE_INSTALLED` names another root.
fn installed_bin() -> PathBuf {
    let root = std::env::var_os("FAILMODE_INSTALLED")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join(".tools/install"));
    let bin = root.join("bin");
    for program in ["failmode", "failmode-reference"] {
        assert!(
            bin.join(program).is_file(),
            "{} is not installed: run `just test-slow`, which installs failmode and \
             failmode-reference with `cargo install --root {}` before this test",
            bin.join(program).display(),
            root.display()
        );
    }
    bin
}

/// A program on the test's `PATH` (just's puts the tools folder first).
fn on_path(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH: run `just setup-core`"))
}

/// The user's machine: a `bin/` with the installed binaries, redis-server and
/// toxiproxy-server; a home; the example service's repository. All outside the checkout.
struct Machine {
    root: tempfile::TempDir,
    checkout: PathBuf,
}

impl Machine {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let checkout = workspace().canonicalize().unwrap();
        assert!(
            !root.path().canonicalize().unwrap().starts_with(&checkout),
            "{} is inside the repository",
            root.path().display()
        );
        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(root.path().join("home")).unwrap();
        let installed = installed_bin();
        for (program, from) in [
            ("failmode", installed.join("failmode")),
            ("failmode-reference", installed.join("failmode-reference")),
            ("redis-server", on_path("redis-server")),
            ("toxiproxy-server", on_path("toxiproxy-server")),
        ] {
            std::fs::copy(&from, bin.join(program)).unwrap();
        }
        copy_service(
            &workspace().join("examples/checkout-api"),
            &root.path().join(NAME),
        );
        Self { root, checkout }
    }

    fn service(&self) -> PathBuf {
        self.root.path().join(NAME)
    }

    /// `failmode ARGS` in `dir`, as the user runs it: only the machine's bin/ and the system's
    /// on PATH, a home of its own, and failmode's checkout hidden under an empty tmpfs.
    fn failmode(&self, dir: &Path, args: &[&str]) -> Output {
        let bin = self.root.path().join("bin");
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"mount -t tmpfs failmode-hidden "$1" && shift && exec "$@""#)
            .arg("sh")
            .arg(&self.checkout)
            .arg("failmode")
            .args(args)
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
            )
            .env("HOME", self.root.path().join("home"))
            .env("LANG", "C.UTF-8")
            .current_dir(dir)
            .output()
            .expect("unshare (util-linux) runs: the test hides the checkout in a mount namespace")
    }

    /// [`Machine::failmode`], which must exit with `code`; its stdout.
    fn expect(&self, dir: &Path, args: &[&str], code: i32) -> String {
        let output = self.failmode(dir, args);
        let (stdout, stderr) = output_text(&output);
        assert_eq!(
            output.status.code(),
            Some(code),
            "failmode {args:?} in {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
            dir.display()
        );
        stdout
    }
}

/// The example's files as its repository holds them: no node_modules, no results.
fn copy_service(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "node_modules" || name == "results" || name == "failmode" {
            continue;
        }
        assert!(entry.file_type().unwrap().is_file(), "{name:?}");
        std::fs::copy(entry.path(), to.join(&name)).unwrap();
    }
}

/// The `[limit]` the walkthrough's manifest declares: (requests, window in seconds).
fn declared(manifest: &str) -> (f64, f64) {
    let table: toml::Table = toml::from_str(manifest).unwrap();
    let limit = &table["limit"];
    let requests = limit["requests"].as_integer().unwrap() as f64;
    let window = humantime::parse_duration(limit["window"].as_str().unwrap()).unwrap();
    (requests, window.as_secs_f64())
}

/// The declared limit in requests per second.
fn declared_rate(manifest: &str) -> f64 {
    let (requests, window_s) = declared(manifest);
    requests / window_s
}

fn declared_window_s(manifest: &str) -> f64 {
    declared(manifest).1
}

#[test]
#[ignore = "slow tier: `just test-slow` installs the binaries and runs it"]
fn the_walkthrough_runs_the_example_service_from_outside_the_repository_with_the_installed_binaries()
 {
    let machine = Machine::new();
    let service = machine.service();

    // 1. init writes the project, with the start command still to change.
    machine.expect(&service, &["init", "--name", NAME], 0);
    let manifest_path = service.join(format!("failmode/targets/{NAME}/target.toml"));
    let written = std::fs::read_to_string(&manifest_path).unwrap();
    assert!(written.contains("CHANGE ME"), "{written}");
    let scenario_path = service.join(format!("failmode/scenarios/{NAME}.toml"));
    assert!(scenario_path.is_file());

    // 2. The manifest as the walkthrough fills it in.
    let manifest = walkthrough_manifest();
    std::fs::write(&manifest_path, &manifest).unwrap();

    // 3. check: ready, listening, using its Redis, limiting per caller at its own limit.
    let check = machine.expect(&service, &["check", NAME], 0);
    for line in [
        "✔ ready: 2 instances",
        "✔ limits at its [limit]: caller A admitted ≈",
        "✔ limits per caller",
        "✔ refuses with 429",
        "✔ uses {redis_url}",
        "all 5 checks pass",
    ] {
        assert!(
            check.lines().any(|l| l.starts_with(line)),
            "no line {line:?}:\n{check}"
        );
    }
    let requests = declared_rate(&manifest) * declared_window_s(&manifest);
    assert!(check.contains(&format!("(expected {requests};")), "{check}");

    // 4. The scenario init wrote (the project's only one, so `run` needs no name), at a fifth
    // of its length: the table shows the service beside the reference and fail-open.
    let table = machine.expect(&service, &["run", "--duration-scale", "0.2"], 0);
    for target in [NAME, "reference", "fail-open"] {
        assert!(
            table.contains(target),
            "{target} not in the table:\n{table}"
        );
    }
    let run = RunResult::read(&service.join("results/latest")).unwrap();
    assert!(
        !run.partial && run.untrusted().is_empty(),
        "{:?}",
        run.notes
    );
    let scenario = Scenario::load(&scenario_path).unwrap();
    let limit_per_s = declared_rate(&manifest);

    for tenant in &scenario.tenants {
        let rate = tenant.rate_per_s;
        // Healthy Redis: held to the service's own limit, nobody under it refused.
        for phase in ["steady", "between"] {
            let cell = tenant_in(&run, NAME, phase, &tenant.name);
            let phase_s = run.targets[0]
                .phases
                .iter()
                .find(|p| p.name == phase)
                .map(|p| p.end_s - p.start_s)
                .unwrap();
            assert!(
                (cell.allowance - limit_per_s * phase_s).abs() < 1e-6,
                "{phase}/{}: allowance {} is not the declared limit's {}",
                tenant.name,
                cell.allowance,
                limit_per_s * phase_s
            );
            let beyond = cell.over_admission_beyond_window.unwrap();
            assert!(beyond <= 0.05, "{phase}/{}: {beyond}", tenant.name);
            if rate < limit_per_s {
                let denied = cell.wrongful_denial.unwrap();
                assert!(denied <= 0.01, "{phase}/{}: {denied}", tenant.name);
            }
        }
        // Redis cut: passOnStoreError lets every request through, so a caller over the limit
        // gets rate / limit − 1 above it, and one under it is never refused.
        let cut = tenant_in(&run, NAME, "cut", &tenant.name);
        let admitted_share = cut.counts.admitted as f64 / cut.counts.offered as f64;
        assert!(
            admitted_share >= 0.97,
            "cut/{}: admitted {admitted_share}",
            tenant.name
        );
        let expected = (rate / limit_per_s - 1.0).max(0.0);
        let over = cut.over_admission.unwrap();
        assert!(
            (over - expected).abs() <= 0.05 * expected.max(1.0),
            "cut/{}: over-admission {over}, expected {expected} (rate {rate}, limit {limit_per_s}/s)",
            tenant.name
        );
    }

    // 5. The gate: the service fails what the reference promises during the cut (the heavy
    // caller held to its limit) and, waiting on a slow Redis, the slow phase's p99.
    let gate = machine.expect(&service, &["gate", "results/latest"], 1);
    let failed = |phase: &str, metric: &str| {
        gate.lines().any(|l| {
            let cells: Vec<&str> = l.split('│').map(str::trim).collect();
            cells.len() > 6
                && cells[1] == NAME
                && cells[2] == phase
                && cells[3].starts_with(metric)
                && cells[6] == "FAIL"
        })
    };
    assert!(failed("cut", "over_admission_beyond_window"), "{gate}");
    assert!(failed("slow", "p99_ms"), "{gate}");

    // 6. A built-in scenario from a directory with no project at all.
    let plain = machine.root.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let table = machine.expect(
        &plain,
        &[
            "run",
            "slow-redis",
            "--targets",
            "reference",
            "--duration-scale",
            "0.2",
        ],
        0,
    );
    assert!(table.contains("reference"), "{table}");
    assert!(plain.join("results/latest/run.json").is_file());
}
