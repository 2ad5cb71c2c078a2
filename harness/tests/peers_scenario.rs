//! The whole `peers` scenario as `just peers` runs it — every target, four at a time, through
//! the slow, hung, stalled and cut Redis — `peers-failover` as `just peers-failover` runs it
//! (a Sentinel failover) and `peers-errors` as `just peers-errors` runs it (Redis answering
//! -OOM, -READONLY, -BUSY and -NOSCRIPT), scaled down (a fifth, a half) to fit in CI, then
//! `failmode outcomes` on its results. `peers` runs in `just test`; `peers-errors` and
//! `peers-failover` are ignored there and run in `just test-slow`, CI's slow tier. Proves the
//! full comparisons run end to end on this machine, that every target is healthy before the
//! faults, and that the statements from the seeds and the libraries' sources about what each
//! does with its store failing hold at this scale too. Needs `just setup` (the peer targets'
//! packages and builds).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use failmode::outcomes::{self, Verdict};
use failmode::scenario::Scenario;
use support::{failmode, workspace};

/// `peers` at a fifth of its timeline: 6 s per fault, 3 s after each. Shorter faults leave the
/// claims' 1 % bars to the few requests that race the fault being applied.
const PEERS_SCALE: &str = "0.2";

/// `peers-errors` at half: 10 s per fault. Its faults take longer to be in place than a toxic
/// (`busy`: 44-93 ms until the first `-BUSY`), and at a fifth (4 s phases) the requests before
/// that were 1.6-18 % of Envoy's `busy` phase, refuted its claims' 1 % bars; its 2 s healthy
/// phase also let a start-up's few 500s pass for a broken target (fastify-rate-limit 5.9 %).
const PEERS_ERRORS_SCALE: &str = "0.5";

/// One whole run at a time: two at once would measure the machine.
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How long a run waits for the cores to be quiet (the test binary before it may leave
/// children exiting), as `tests/peers.rs` waits.
const QUIET_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

#[test]
fn the_peers_scenario_runs_every_target_through_every_fault_and_confirms_the_seeds_outage_claims() {
    every_target_through_every_fault("peers", PEERS_SCALE, &["slow", "hung", "stalled", "fault"]);
}

/// In `just test-slow` (about 8 minutes; the failover test below says the two together). It
/// failed three runs in a row here before target manifests had `[warm_up]` (2026-12-03): on
/// express-rate-limit's and flask-limiter's healthy phase (9.2-13.8 % 500s with Redis healthy)
/// and, at a fifth, on Envoy's claims. With the warm-up it passed both times it ran here on
/// 2026-12-04 (486 s the first time).
#[test]
#[ignore = "slow tier: `just test-slow` runs it"]
fn the_peers_errors_scenario_runs_every_target_through_every_error_reply_and_confirms_its_claims() {
    every_target_through_every_fault(
        "peers-errors",
        PEERS_ERRORS_SCALE,
        &["oom", "readonly", "busy", "fault"],
    );
}

/// `peers-failover` at a fifth: the primary killed 2 s in, 4 s of fault (the sentinels promote
/// the replica about 2.3 s after the kill), 3 s after it. In `just test-slow` (about 3.5
/// minutes). Its first run here (2026-12-03, before `[warm_up]`) was short of CPU from the first
/// batch on and had three targets err in the 2 s healthy phase; with the warm-up it passed both
/// times it ran here on 2026-12-04 (202 s the first time). The two together took 735 s the
/// second time and 688 s in a fresh clone's `.ci/run`.
#[test]
#[ignore = "slow tier: `just test-slow` runs it"]
fn the_peers_failover_scenario_runs_every_target_through_a_sentinel_failover_and_confirms_its_claims()
 {
    every_target_through_every_fault("peers-failover", PEERS_SCALE, &["fault"]);
}

#[test]
fn peers_errors_and_peers_failover_run_the_peers_targets_in_the_same_order_so_the_same_batches() {
    let names = |s: &Scenario| s.targets.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&shipped("peers-errors")), names(&shipped("peers")));
    assert_eq!(names(&shipped("peers-failover")), names(&shipped("peers")));
}

/// The shipped scenario `name`.
fn shipped(name: &str) -> Scenario {
    Scenario::load(&workspace().join(format!("scenarios/{name}.toml"))).unwrap()
}

/// Runs scenario `name` on every target as its `just` recipe does, at `scale`, and checks its
/// outcomes:
/// a table per fault phase in `faults`, a row per target, every claim confirmed.
fn every_target_through_every_fault(name: &str, scale: &str, faults: &[&str]) {
    let _alone = ONE_RUN_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let machine = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(support::machine::Around::quiet(QUIET_WAIT));
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join(name);
    let folder_arg = folder.to_str().unwrap();
    let ran = failmode(&[
        "run",
        name,
        "--batch",
        "4",
        "--duration-scale",
        scale,
        "--out",
        folder_arg,
    ]);
    let said = String::from_utf8_lossy(&ran.stderr);
    assert!(
        ran.status.success(),
        "failmode run {name}: {} ({})\n{said}",
        ran.status,
        machine.said()
    );

    let table = folder.join(format!("{name}.md"));
    let regenerate = format!("just {name}");
    let written = failmode(&[
        "outcomes",
        folder_arg,
        "--out",
        table.to_str().unwrap(),
        "--regenerate",
        &regenerate,
    ]);
    assert!(
        written.status.success(),
        "failmode outcomes: {}",
        String::from_utf8_lossy(&written.stderr)
    );

    let scenario = shipped(name);
    let o = outcomes::read(&folder).unwrap();
    let ran_names: Vec<&str> = o.run.targets.iter().map(|t| t.name.as_str()).collect();
    let expected: Vec<&str> = scenario.targets.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(ran_names, expected, "every target of the scenario ran");
    assert!(
        !o.run.partial && o.run.batches.iter().all(|b| b.len() <= 4),
        "{:?}",
        o.run.batches
    );
    // Healthy first: a target erring before any fault, or dying, would make its row moot. A
    // batch may note that it was short of CPU, or that it ran twice because a target erred
    // while it was (the second run's own notes then stand); nothing else is expected.
    assert!(
        o.run.notes.iter().all(|n| {
            let note = n
                .split_once(": ")
                .filter(|(batch, _)| batch.starts_with("batch "));
            let rest = note.map_or(n.as_str(), |(_, rest)| rest);
            rest.starts_with("the load generator sent late") || rest.starts_with("ran twice")
        }),
        "{:?} ({})\n{said}",
        o.run.notes,
        machine.said()
    );
    assert_eq!(
        o.tables
            .iter()
            .map(|t| t.phase.as_str())
            .collect::<Vec<_>>(),
        faults,
        "one table per fault"
    );
    for table in &o.tables {
        assert_eq!(
            table.rows.len(),
            expected.len(),
            "{}: a row per target",
            table.phase
        );
    }

    // Every statement holds on a scaled-down timeline too: what happens with the store gone
    // does not depend on how long it is gone, a phantom hit lasts one window, and ioredis's
    // reconnect delay after a 6 s cut is still 0.35 s or more (50 × 2^6 ms after 3.15 s).
    assert_eq!(
        o.claims.len(),
        scenario.claims.len(),
        "every claim of {name}.toml is judged"
    );
    for claim in &o.claims {
        assert_eq!(
            claim.verdict,
            Verdict::Confirmed,
            "{}: {:#?} ({})",
            claim.claim.says,
            claim.checks,
            machine.said()
        );
    }

    let markdown = std::fs::read_to_string(&table).unwrap();
    for name in &expected {
        assert!(
            markdown.contains(&format!("| {name} |")),
            "{name} in the table"
        );
    }
    assert!(
        markdown.contains(&regenerate),
        "the command that regenerates it"
    );
}
