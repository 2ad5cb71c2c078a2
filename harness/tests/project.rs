//! failmode as an installed tool in a user's own directory, outside failmode's repository:
//! the built `failmode` binary run from a temporary directory finds the built-in scenarios and
//! targets, prints a scenario, writes a project with `init` (and refuses to overwrite it), and
//! the project it wrote loads through the library.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use failmode::project::{Project, Source};
use support::{failmode_in, failmode_with_env, output_text, workspace};

/// A temporary directory that is not inside failmode's checkout.
fn outside() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let checkout = workspace().canonicalize().unwrap();
    assert!(
        !dir.path().canonicalize().unwrap().starts_with(&checkout),
        "{} is inside the repository",
        dir.path().display()
    );
    dir
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let output = failmode_in(dir, args);
    let (stdout, stderr) = output_text(&output);
    assert!(
        output.status.success(),
        "failmode {args:?}: {}\n{stdout}\n{stderr}",
        output.status
    );
    stdout
}

/// The line of `name` in a section of `failmode list`.
fn listed<'a>(list: &'a str, name: &str) -> Vec<&'a str> {
    list.lines()
        .filter(|l| l.split_whitespace().next() == Some(name))
        .collect()
}

#[test]
fn outside_the_repository_list_shows_the_built_in_scenarios_and_targets() {
    let dir = outside();
    let list = ok(dir.path(), &["list"]);
    assert!(list.contains("project: none"), "{list}");
    assert!(!list.contains("checkout:"), "{list}");
    for name in [
        "slow-redis",
        "redis-down",
        "baseline",
        "reference",
        "fail-open",
    ] {
        let lines = listed(&list, name);
        assert_eq!(lines.len(), 1, "{name}: {list}");
        assert!(lines[0].contains("built-in"), "{}", lines[0]);
    }
    // Peers need failmode's checkout: offered as templates only.
    assert!(listed(&list, "express-rate-limit").is_empty(), "{list}");
    assert!(list.contains("--template"), "{list}");
}

#[test]
fn scenario_show_prints_the_shipped_scenario_as_written() {
    let dir = outside();
    let shown = ok(dir.path(), &["scenario", "show", "slow-redis"]);
    let shipped = std::fs::read_to_string(workspace().join("scenarios/slow-redis.toml")).unwrap();
    assert_eq!(shown, shipped);
    let output = failmode_in(dir.path(), &["scenario", "show", "no-such-scenario"]);
    assert_eq!(output.status.code(), Some(2));
    let (_, stderr) = output_text(&output);
    assert!(
        stderr.contains("no-such-scenario") && stderr.contains("slow-redis"),
        "{stderr}"
    );
}

#[test]
fn init_writes_a_project_that_loads_refuses_to_overwrite_and_is_found_from_below() {
    let dir = outside();
    let root = dir.path().canonicalize().unwrap();
    let printed = ok(&root, &["init", "--name", "mine"]);
    let manifest = root.join("failmode/targets/mine/target.toml");
    let scenario = root.join("failmode/scenarios/mine.toml");
    for path in [&manifest, &scenario, &root.join("failmode/README.md")] {
        assert!(path.is_file(), "{} not written: {printed}", path.display());
    }
    assert!(printed.contains("failmode run mine"), "{printed}");

    let again = failmode_in(&root, &["init", "--name", "mine"]);
    assert_eq!(again.status.code(), Some(2));
    let (_, stderr) = output_text(&again);
    assert!(
        stderr.contains("refusing to overwrite") && stderr.contains("target.toml"),
        "{stderr}"
    );

    // Through the library, as a run reads it: the scenario, its gates, its three targets.
    let project = Project::find_from(&root.join("failmode/scenarios"));
    assert_eq!(project.root(), root);
    let s = project.find_scenario("mine").unwrap();
    assert_eq!(s.name, "mine");
    failmode::gate::parse_gates(&s.gates).unwrap();
    let defs = project.targets_for(&s).unwrap();
    let names: Vec<String> = s.targets.iter().map(|t| t.name.clone()).collect();
    let picked = failmode::targets::manifest::select(&defs, &names).unwrap();
    assert_eq!(picked.len(), 3);
    assert_eq!(picked[0].manifest, manifest);
    assert_eq!(picked[0].dir.as_deref(), Some(root.as_path()));

    // The binary finds the project from a folder below it, and from elsewhere with --project.
    let below = root.join("src/deep");
    std::fs::create_dir_all(&below).unwrap();
    let list = ok(&below, &["list"]);
    assert!(
        list.contains(&format!("project: {}", root.display())),
        "{list}"
    );
    let lines = listed(&list, "mine");
    assert_eq!(lines.len(), 2, "a scenario and a target: {list}");
    assert!(lines.iter().all(|l| l.contains("project")), "{lines:?}");
    let elsewhere = outside();
    let root_text = root.display().to_string();
    let list = ok(elsewhere.path(), &["list", "--project", &root_text]);
    assert_eq!(listed(&list, "mine").len(), 2, "{list}");
    assert_eq!(
        project.scenario("mine").map(|e| e.source),
        Some(Source::Project)
    );
}

#[test]
fn setup_check_says_exactly_how_to_get_what_is_missing() {
    let dir = outside();
    let (no_bin, cache) = (dir.path().join("no-bin"), dir.path().join("cache"));
    let output = failmode_with_env(
        dir.path(),
        &[
            ("PATH", &no_bin.to_string_lossy()),
            ("XDG_CACHE_HOME", &cache.to_string_lossy()),
            ("FAILMODE_TOOLS", &no_bin.to_string_lossy()),
        ],
        &["setup", "--check"],
    );
    let (stdout, stderr) = output_text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("redis-server is missing")
            && stdout.contains("apt-get install redis-server"),
        "{stdout}"
    );
    assert!(
        stdout.contains("toxiproxy-server is missing")
            && stdout.contains("github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0")
            && stdout.contains(&format!(
                "{}/failmode/bin/toxiproxy-server",
                dir.path().join("cache").display()
            )),
        "{stdout}"
    );
    assert!(stdout.contains("failmode setup"), "{stdout}");
}
