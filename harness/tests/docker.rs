//! `--infra docker` end to end: a scaled-down run whose Redis and Toxiproxy are containers at
//! the pinned images, with the instances child processes as ever. Traffic is admitted to the
//! limit while Redis is healthy, a cut (`down`) and a slow Redis (`latency`) show in the
//! results, each container logs where a child would, and nothing of the run is left in Docker.
//!
//! It needs a Docker daemon, so it is `#[ignore]`d: `just test` runs scripts/docker-tests.sh,
//! which runs it with `--ignored` only where `docker info` answers and otherwise prints that
//! it was skipped and why. Run by hand, it fails (never passes) without a daemon.

#![cfg(feature = "docker")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;

use failmode::run::progress::Say;
use failmode::run::{RunOptions, run};
use failmode::scenario::Scenario;
use support::tenant_in;
use tokio_util::sync::CancellationToken;

/// Under the targets' 20 ms Redis budget, so every decision waits for it rather than falling
/// back: the slow phase's median latency must include it.
const LATENCY_MS: u64 = 8;

const SCENARIO: &str = include_str!("fixtures/docker.toml");

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `docker` ({e}): this test needs Docker"));
    assert!(
        out.status.success(),
        "`docker {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What Docker still holds of this process's runs: containers labelled with one of its
/// networks, and the networks.
fn left_in_docker() -> Vec<String> {
    let ours = format!("failmode-{}-", std::process::id());
    let containers = docker(&[
        "ps",
        "--all",
        "--filter",
        "label=failmode.run",
        "--format",
        "{{.ID}} {{.Label \"failmode.run\"}}",
    ]);
    let networks = docker(&["network", "ls", "--format", "{{.Name}}"]);
    containers
        .lines()
        .chain(networks.lines())
        .filter(|l| l.contains(&ours))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Docker daemon: scripts/docker-tests.sh runs it with --ignored where `docker info` answers"]
async fn a_run_in_containers_admits_to_the_limit_and_shows_the_cut_and_the_slow_redis() {
    docker(&["info", "--format", "{{.ServerVersion}}"]);
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("run");
    let outcome = run(
        RunOptions {
            topology: failmode::run::Topology::Docker,
            ..support::run_options(
                Scenario::parse(
                    &SCENARIO.replace("LATENCY_MS", &LATENCY_MS.to_string()),
                    "docker-world.toml",
                )
                .unwrap(),
                out.path(),
            )
        },
        CancellationToken::new(),
        &Say::default(),
    )
    .await
    .unwrap();
    let r = &outcome.result;
    assert!(!r.partial);
    // The run says where it ran; a busy machine may add that it was short of CPU.
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("Redis and Toxiproxy ran as containers (redis:7.0.15")),
        "{:?}",
        r.notes
    );
    assert!(
        r.notes
            .iter()
            .all(|n| n.starts_with("Redis and Toxiproxy ran as containers")
                || n.starts_with("the load generator sent late")),
        "{:?}",
        r.notes
    );

    for target in ["fail-closed", "reference"] {
        // Healthy, through the containers: acme held to the limit (the 3 s phase overlaps
        // four windows), globex served in full.
        let acme = tenant_in(r, target, "steady", "acme");
        assert!(
            acme.counts.admitted as f64 <= acme.allowance + r.limit,
            "{target} steady acme {acme:?}"
        );
        assert!(acme.admitted_per_s > 40.0, "{target} steady acme {acme:?}");
        let globex = tenant_in(r, target, "steady", "globex");
        assert!(
            globex.wrongful_denial.unwrap() < 0.05,
            "{target} {globex:?}"
        );

        // Slowed: every decision waits for Redis's late reply.
        let steady = tenant_in(r, target, "steady", "all");
        let slow = tenant_in(r, target, "slow", "all");
        assert!(
            slow.latency_us.unwrap().p50 >= LATENCY_MS * 1_000
                && steady.latency_us.unwrap().p50 < LATENCY_MS * 1_000,
            "{target}: p50 {} µs steady, {} µs slow",
            steady.latency_us.unwrap().p50,
            slow.latency_us.unwrap().p50
        );
        assert!(
            tenant_in(r, target, "recovery", "globex")
                .wrongful_denial
                .unwrap()
                < 0.05,
            "{target} recovers"
        );
    }
    // Cut: fail-closed refuses everyone with 500, the reference decides locally.
    let globex = tenant_in(r, "fail-closed", "cut", "globex");
    assert_eq!(globex.counts.admitted, 0, "{globex:?}");
    assert!(globex.counts.server_error > 0, "{globex:?}");
    let reference = r.targets.iter().find(|t| t.name == "reference").unwrap();
    let cut = reference.phases.iter().find(|p| p.name == "cut").unwrap();
    assert!(cut.fallbacks.unwrap() > 0.0, "{cut:?}");
    // INFO through the Redis container's published port.
    assert!(reference.phases[0].store_commands.unwrap() > 100);

    for log in [
        "toxiproxy-server.log",
        "redis-reference.log",
        "reference-0.log",
    ] {
        let path = folder.join("logs").join(log);
        assert!(path.is_file(), "{} missing", path.display());
    }
    let redis_log = std::fs::read_to_string(folder.join("logs/redis-fail-closed.log")).unwrap();
    assert!(
        redis_log.contains("Ready to accept connections"),
        "{redis_log}"
    );
    assert_eq!(left_in_docker(), Vec::<String>::new());
}
