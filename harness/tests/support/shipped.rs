//! A shipped scenario run by the harness in-process, scaled, on the targets named, one run at
//! a time in a test binary (each target has its own Redis: several runs at once would measure
//! the machine); and the reports its faults left.

use failmode::results::RunResult;
use failmode::results::read::{SeriesRow, read_series};
use failmode::run::progress::Say;
use failmode::run::{RunOptions, run};
use failmode::scenario::Scenario;
use tokio_util::sync::CancellationToken;

use super::{run_options, workspace};

/// Held by each run of real targets in a test binary: two at once on 2 cores starve both (a
/// CI run of run.rs's seed-000 test beside its batches test: send lag p99 48 ms, fail-closed
/// past its 20 ms budget with Redis healthy).
pub(crate) static ONE_RUN_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `scenarios/<name>.toml` at `scale` on `targets`: its result, whole, and its series.
pub(crate) async fn run_at(
    name: &str,
    targets: &[&str],
    scale: f64,
) -> (RunResult, Vec<SeriesRow>) {
    let _alone = ONE_RUN_AT_A_TIME.lock().await;
    let scenario = Scenario::load(&workspace().join(format!("scenarios/{name}.toml"))).unwrap();
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("run");
    let outcome = run(
        RunOptions {
            duration_scale: scale,
            targets: Some(targets.iter().map(|t| (*t).to_owned()).collect()),
            ..run_options(scenario.scaled(scale), out.path())
        },
        CancellationToken::new(),
        &Say::default(),
    )
    .await
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(!outcome.result.partial);
    (outcome.result, read_series(&folder).unwrap())
}

/// What `target`'s faults reported (`fault-report` events), in order.
pub(crate) fn reports<'a>(r: &'a RunResult, target: &str) -> Vec<&'a str> {
    let t = r.targets.iter().find(|t| t.name == target).unwrap();
    t.events
        .iter()
        .filter(|e| e.kind == "fault-report")
        .map(|e| e.detail.as_str())
        .collect()
}
