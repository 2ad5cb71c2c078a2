//! One run, end to end, told as chapters: the preflight resolves the targets and refuses what
//! cannot run; the world starts (or is attached to); the load engine drives traffic while the
//! timeline plays the faults and the children are watched; then everything is stopped and the
//! record written — also when interrupted, with what was measured so far. `--batch` runs this
//! a few targets at a time (`batches`).

mod abort_watch;
mod accounting;
mod batches;
mod children;
mod error;
mod journaling;
pub mod live_metrics;
mod plan;
mod preflight;
pub mod progress;
mod record;
pub mod repeat;
mod replicated;
mod snapshot;
mod start;
pub mod timeline;
mod topology;
pub mod world;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::metrics::Collector;
use crate::results::folder::RunFolder;
use crate::results::{RunResult, Worker};
use crate::scenario::Scenario;
use crate::targets;
use crate::targets::TargetDef;
use crate::{abort, load};
pub use batches::run_in_batches;
pub use error::RunError;
use progress::Say;
pub use record::git_revision;
pub use start::parse_start_at;
pub use topology::Topology;

/// What `failmode run` was asked.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The project's root ([`crate::project::Project::at`]): its targets, the checkout's
    /// and the built-ins are found from here.
    pub root: PathBuf,
    /// Where `<scenario>/<timestamp>/` and `latest` go.
    pub results_root: PathBuf,
    /// Already scaled and seeded as asked.
    pub scenario: Scenario,
    pub duration_scale: f64,
    /// Overrides the scenario's targets.
    pub targets: Option<Vec<String>>,
    /// Writes the results here instead of `<results_root>/<scenario>/<timestamp>`.
    pub out: Option<PathBuf>,
    /// Runs the manifests' build commands first.
    pub build: bool,
    /// Started here (how) or attached to.
    pub topology: Topology,
    /// One of several processes sending the load together (attached only): its share, the
    /// shared start, whether it plays the faults.
    pub worker: Option<Worker>,
    /// Serve the run's metrics as Prometheus text while it goes (`--metrics-listen`).
    pub live_metrics: Option<live_metrics::LiveMetricsOptions>,
}

impl RunOptions {
    /// Whether this process plays the faults: all but a worker told another one does.
    fn plays_faults(&self) -> bool {
        self.worker.is_none_or(|w| w.drives_faults)
    }
}

/// A finished (or interrupted) run.
#[derive(Debug)]
pub struct RunOutcome {
    pub folder: RunFolder,
    pub result: RunResult,
}

/// Runs a scenario. `interrupt` (Ctrl-C) stops it early; the results so far are still written.
pub async fn run(
    opts: RunOptions,
    interrupt: CancellationToken,
    say: &Say,
) -> Result<RunOutcome, RunError> {
    // Read before anything runs: the tree as it was built, not as it is edited meanwhile.
    let revision = git_revision(&opts.root);
    let defs = preflight::resolve(&opts)?;
    let guard = abort_guard(&opts, &defs)?;
    // Before `refuse` checks a worker's --start-at: the calibration takes its 400 ms first.
    plan::warn_beyond_capacity(&opts, defs.len(), say).await;
    preflight::refuse(&opts, say)?;

    let timeline = timeline::for_this_process(&opts.scenario, opts.worker);
    // Bound first: a port in use fails the run before anything starts.
    let live = match opts.live_metrics {
        Some(o) => {
            let view = Arc::new(live_metrics::LiveRun::new(&timeline));
            let endpoint = live_metrics::Endpoint::bind(o, view.clone()).await?;
            say.line(&format!("metrics: http://{}/metrics", endpoint.addr));
            Some((view, endpoint))
        }
        None => None,
    };
    let view = live.as_ref().map(|(view, _)| view.clone());

    let started_at = SystemTime::now();
    let folder = record::create_folder(&opts, started_at)?;
    if opts.build && opts.topology.attached().is_none() {
        say.line("building targets");
        targets::build(&defs, &opts.root).await?;
    }
    let logs = folder.logs();
    let world = world::start_or_attach(&opts, &defs, &logs, &interrupt, say).await?;

    let plan = plan::load_plan(&opts, &world);
    let scenario = &opts.scenario;
    let collector = Arc::new(Collector::new(
        scenario.measurement_shape(plan.targets.len()),
    ));
    let names: Vec<String> = plan.targets.iter().map(|t| t.name.clone()).collect();
    if let Some(view) = &view {
        view.measuring(names.clone(), collector.clone());
    }
    // A target still warming up when the load starts is the run's first event.
    let events = Mutex::new(
        world
            .targets
            .iter()
            .map(world::TargetWorld::warm_up_events)
            .collect::<Vec<_>>(),
    );
    let http = targets::loopback_client();
    say.line(&plan::announce(scenario, &defs, &names));
    let started = record::started(
        &opts,
        &defs,
        revision.clone(),
        started_at,
        &record::Ran::before_the_load(
            names.clone(),
            world.instance_counts(),
            &scenario.measurement_shape(names.len()),
        ),
    );
    let mut journal = journaling::Journaling::start(&folder, &started, scenario, say);
    let start = match start::instant(opts.worker.as_ref(), &interrupt, &logs, say).await {
        Ok(start) => start,
        Err(e) => {
            world.stop().await;
            journal.remove(say);
            return Err(e);
        }
    };
    if let Some(view) = &view {
        view.started(start);
    }

    let done = CancellationToken::new();
    // The load and the timeline stop on an interrupt or an abort; the timeline also when the
    // load generator fails.
    let stop_run = interrupt.child_token();
    let stop_timeline = stop_run.child_token();
    let recorder: Arc<dyn load::Recorder> = collector.clone();
    let (summary, phase_facts, (), (), (), aborted) = tokio::join!(
        async {
            let summary = load::try_run(plan, start, recorder, stop_run.clone()).await;
            if summary.is_err() {
                stop_timeline.cancel();
            }
            if let Some(view) = &view {
                view.load_done();
            }
            done.cancel();
            summary
        },
        timeline::play(&world, &timeline, start, &stop_timeline, &http, &events),
        children::watch(&world, start, &done, &events),
        progress::show(say, scenario, &names, &collector, start, done.clone()),
        journal.keep(&collector, &events, start, &done, say),
        abort_watch::watch(guard, &collector, names.len(), start, &stop_run, &done, say),
    );
    let elapsed = start.elapsed();
    let ran_for = accounting::load_ran_for(summary.as_ref().ok(), elapsed);
    let instance_counts = world.instance_counts();
    world.stop().await;

    let (summary, load_error) = match summary {
        Ok(summary) => (summary, None),
        Err(e) => (load::LoadSummary::default(), Some(e)),
    };
    let measured = journal.finish(&collector, &events, ran_for, say).await;
    let ran = record::Ran {
        summary,
        load_error,
        interrupted: stop_run.is_cancelled(),
        aborted,
        ran_for,
        instance_counts,
        phase_facts,
        events: events.into_inner().unwrap_or_else(|e| e.into_inner()),
        names,
        measured,
    };
    let result = record::assemble(&opts, &defs, revision, started_at, &ran);
    record::write(&folder, &result, &opts, &ran.measured)?;
    // The folder holds everything the journal did: gone before anything else can fail.
    journal.remove(say);
    record::publish(&folder, &opts, say)?;
    if let Some((_, endpoint)) = live {
        endpoint.close(&interrupt).await;
    }
    if let Some(e) = ran.load_error {
        return Err(RunError::Load(e));
    }
    Ok(RunOutcome { folder, result })
}

/// The run's safety limits, the scenario's and the deployment's: each must guard a target of
/// the run, or it is refused before anything starts.
fn abort_guard(opts: &RunOptions, defs: &[TargetDef]) -> Result<abort::Guard, RunError> {
    let rules: Vec<abort::AbortRule> = opts
        .scenario
        .abort
        .iter()
        .chain(opts.topology.attached().map_or(&[][..], |d| &d.abort[..]))
        .cloned()
        .collect();
    let names: Vec<String> = defs.iter().map(|d| d.name.clone()).collect();
    abort::unmatched(&rules, &names).map_err(RunError::Abort)?;
    Ok(abort::Guard::new(rules, names))
}

/// Seconds from `start` to `at`, as events and facts record them.
fn since(start: Instant, at: Instant) -> f64 {
    at.saturating_duration_since(start).as_secs_f64()
}
