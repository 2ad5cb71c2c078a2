//! One run, end to end: resolve targets, build the world, play the timeline while the load
//! engine drives traffic, then tear everything down and write the results folder — also when
//! interrupted, with what was measured so far.

mod accounting;
pub mod progress;
mod snapshot;
pub mod world;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::faults::Fault;
use crate::faults::timeline::{Outcome, Player};
use crate::infra::process::{Exit, describe_status, exit_of, last_lines};
use crate::infra::toxiproxy::ToxiproxyError;
use crate::infra::{Infra, InfraError, install_hint, locate};
use crate::load::{self, LoadPlan, TargetPlan};
use crate::metrics::Collector;
use crate::results::folder::RunFolder;
use crate::results::{
    self, Event, LoadTotals, PhaseFacts, RunResult, SCHEMA_VERSION, TargetFacts, Worker,
};
use crate::scenario::{Scenario, ScenarioError};
use crate::targets::{self, ManifestError, TargetError, manifest};
use crate::wait::{sleep_until, until_stopped};
use progress::Say;
use world::World;

/// The kind of event a fault's own report is recorded as.
const FAULT_REPORT: &str = "fault-report";

/// How much of a dead child's log its event quotes: enough for gunicorn's or Node's last words.
const DEATH_LOG_LINES: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Infra(#[from] InfraError),
    // Transparent: its message names Toxiproxy and its address already, and the CLI prints
    // an error's sources after it.
    #[error(transparent)]
    Toxiproxy(#[from] ToxiproxyError),
    #[error("cannot write the results folder {path}: {source}")]
    Results {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the load generator failed")]
    Load(#[from] load::LoadError),
    #[error("interrupted before any load was sent; everything started was stopped (logs in {0})")]
    InterruptedBeforeLoad(PathBuf),
    #[error("cannot join the batches' results")]
    Join(#[from] results::batches::JoinError),
    #[error(transparent)]
    Deployment(#[from] crate::deployment::DeploymentError),
    #[error(
        "phase {phase:?}'s fault `{fault}` cannot be played on an attached deployment: only \
         faults through its Toxiproxy (down, hang, flap, toxics) and client-pause are; \
         the others stop, kill or restart failmode's own processes or write to the Redis"
    )]
    NotAttachable { phase: String, fault: String },
    #[error(transparent)]
    DockerNotBuilt(#[from] crate::infra::DockerNotBuilt),
    #[error(
        "--infra docker starts Redis and Toxiproxy in containers and --attach starts nothing: \
         they cannot be combined"
    )]
    InfraWithAttach,
    #[error(
        "phase {phase:?}'s fault `{fault}` cannot be played with --infra docker: it signals \
         failmode's own redis-server process, which is a container's there; run it with \
         --infra local"
    )]
    NotInContainers { phase: String, fault: String },
    #[cfg(feature = "docker")]
    #[error(transparent)]
    Containers(#[from] crate::infra::containers::ContainerError),
    #[error(
        "attached proxy {proxy:?} {problem}: run `failmode faults reset --attach {deployment}` \
         (or fix it) first"
    )]
    ProxyNotClean {
        proxy: String,
        problem: String,
        deployment: PathBuf,
    },
    #[error(
        "the start time {at} passed {late:.1?} ago (this machine's clock): give every worker \
         the same --start-at, far enough ahead for all of them to be ready"
    )]
    StartPassed { at: String, late: Duration },
}

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
    /// Attach to this deployment instead of starting one: its targets replace the
    /// scenario's.
    pub attach: Option<crate::deployment::Deployment>,
    /// What Redis and Toxiproxy run as when the run starts them (not attached).
    pub infra: Infra,
    /// One of several processes sending the load together (attached only): its share, the
    /// shared start, whether it plays the faults.
    pub worker: Option<Worker>,
}

/// `--start-at`: an RFC 3339 time (`2026-11-30T20:00:00Z`, fractions allowed) or seconds
/// since the Unix epoch (`1796068800`, as `date +%s` gives).
pub fn parse_start_at(text: &str) -> Result<SystemTime, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds)
            .map(|d| SystemTime::UNIX_EPOCH + d)
            .map_err(|_| format!("{text:?} is not a time: seconds since the epoch must be ≥ 0"));
    }
    humantime::parse_rfc3339_weak(text).map_err(|e| {
        format!(
            "{text:?} is not a time ({e}): give an RFC 3339 time such as 2026-11-30T20:00:00Z, \
             or seconds since the epoch"
        )
    })
}

/// How long until a worker's start time; or, passed, how long ago.
fn until_start(w: &Worker) -> Result<Duration, Duration> {
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(w.start_at_ms);
    at.duration_since(SystemTime::now())
        .map_err(|e| e.duration())
}

fn start_passed(w: &Worker, late: Duration) -> RunError {
    RunError::StartPassed {
        at: start_shown(w),
        late,
    }
}

fn start_shown(w: &Worker) -> String {
    humantime::format_rfc3339_millis(SystemTime::UNIX_EPOCH + Duration::from_millis(w.start_at_ms))
        .to_string()
}

/// The requests in flight per target this process allows: a worker its share of the
/// scenario's bound, so N workers together hold what one process would.
fn in_flight_bound(scenario: &Scenario, worker: Option<Worker>) -> usize {
    match worker {
        Some(w) if w.share.count > 1 => scenario
            .max_in_flight_per_target
            .div_ceil(w.share.count as usize),
        _ => scenario.max_in_flight_per_target,
    }
}

/// A finished (or interrupted) run.
#[derive(Debug)]
pub struct RunOutcome {
    pub folder: RunFolder,
    pub result: RunResult,
}

fn required(program: &str, hint: &str) -> Result<(), InfraError> {
    match locate(program) {
        Some(_) => Ok(()),
        None => Err(InfraError::MissingBinary {
            program: program.to_owned(),
            hint: hint.to_owned(),
        }),
    }
}

/// The first fault of the scenario `allowed` refuses, as (phase, fault).
fn first_refused(
    scenario: &Scenario,
    allowed: impl Fn(&Fault) -> bool,
) -> Option<(String, String)> {
    scenario.phases.iter().find_map(|phase| {
        phase
            .faults
            .iter()
            .find(|f| !allowed(f))
            .map(|f| (phase.name.clone(), f.to_string()))
    })
}

/// Why `infra` refuses this run, checked before anything starts: a backend this binary lacks,
/// or in containers a fault that needs failmode's own redis-server process.
fn infra_refusal(infra: Infra, scenario: &Scenario) -> Option<RunError> {
    if let Err(e) = infra.check_built() {
        return Some(e.into());
    }
    if infra != Infra::Docker {
        return None;
    }
    first_refused(scenario, |f| !f.needs_redis_process())
        .map(|(phase, fault)| RunError::NotInContainers { phase, fault })
}

fn git_revision(root: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root)
        .output()
        .ok()?;
    let rev = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    if rev.is_empty() {
        return None;
    }
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .current_dir(root)
        .output()
        .is_ok_and(|o| !o.stdout.is_empty());
    Some(if dirty { format!("{rev}-dirty") } else { rev })
}

/// Runs a scenario. `interrupt` (Ctrl-C) stops it early; the results so far are still written.
pub async fn run(
    opts: RunOptions,
    interrupt: CancellationToken,
    say: &Say,
) -> Result<RunOutcome, RunError> {
    let scenario = opts.scenario;
    // Read before anything runs: the tree as it was built, not as it is edited meanwhile.
    let revision = git_revision(&opts.root);
    let all = crate::project::Project::at(&opts.root).targets_for(&scenario)?;
    let names: Vec<String> = match &opts.attach {
        Some(deployment) => deployment.targets.iter().map(|t| t.name.clone()).collect(),
        None => opts
            .targets
            .clone()
            .unwrap_or_else(|| scenario.targets.iter().map(|t| t.name.clone()).collect()),
    };
    let mut defs = manifest::select(&all, &names)?;
    if let Some(deployment) = &opts.attach {
        // What the deployment file says of a target (its limit, its caller identity) wins.
        for (def, attached) in defs.iter_mut().zip(&deployment.targets) {
            *def = attached.over(def);
        }
    }
    let plays_faults = opts.worker.is_none_or(|w| w.drives_faults);
    if let Some(w) = &opts.worker {
        // Before attaching too: a late worker must not touch the deployment at all.
        until_start(w).map_err(|late| start_passed(w, late))?;
    }
    if let Some(deployment) = &opts.attach {
        if opts.infra != Infra::Local {
            return Err(RunError::InfraWithAttach);
        }
        // Refused before anything is sent: a fault the deployment cannot take.
        if let Some((phase, fault)) = first_refused(&scenario, Fault::attachable) {
            return Err(RunError::NotAttachable { phase, fault });
        }
        say.line("attached: failmode starts nothing; it will touch only this:");
        for line in deployment.describe() {
            say.line(&format!("  {line}"));
        }
        if plays_faults {
            say.line(&format!(
                "if this run dies before it ends, remove what it left with: failmode faults \
                 reset --attach {}",
                deployment.path.display()
            ));
        } else {
            say.line(
                "this worker plays no faults: it leaves the proxies as the process playing them \
                 has them, whenever it stops",
            );
        }
    } else if opts.infra == Infra::Local {
        required("redis-server", &install_hint("redis-server"))?;
        required("toxiproxy-server", &install_hint("toxiproxy-server"))?;
    } else if let Some(refusal) = infra_refusal(opts.infra, &scenario) {
        return Err(refusal);
    }

    let started_at = SystemTime::now();
    // Workers (and a fault player) on one machine may start in the same second: each its own
    // folder.
    let out = opts.out.clone().or_else(|| {
        opts.worker.map(|w| {
            let who = match w.share.index {
                0 => "faults".to_owned(),
                k => format!("worker-{k}-of-{}", w.share.count),
            };
            opts.results_root
                .join(&scenario.name)
                .join(format!("{}-{who}", results::folder::timestamp(started_at)))
        })
    });
    let folder = RunFolder::create(
        &opts.results_root,
        &scenario.name,
        started_at,
        out.as_deref(),
    )
    .map_err(|source| RunError::Results {
        path: opts.results_root.clone(),
        source,
    })?;
    if opts.build && opts.attach.is_none() {
        say.line("building targets");
        targets::build(&defs, &opts.root).await?;
    }
    let logs = folder.logs();
    let started = tokio::select! {
        _ = interrupt.cancelled() => None,
        w = async {
            match &opts.attach {
                Some(deployment) => World::attach(deployment, &defs, plays_faults).await,
                None => start_world(opts.infra, &scenario, &defs, &opts.root, &logs, say).await,
            }
        } => Some(w),
    };
    let Some(world) = started else {
        return Err(RunError::InterruptedBeforeLoad(logs));
    };
    let world = world?;

    let plan = LoadPlan {
        targets: world
            .targets
            .iter()
            .map(|t| TargetPlan {
                name: t.def.name.clone(),
                instances: t.rotation.clone(),
                path: t.def.request_path.clone(),
                caller: t.def.caller.clone(),
            })
            .collect(),
        tenants: scenario.tenants.clone(),
        duration: scenario.duration,
        seed: scenario.seed,
        request_timeout: scenario.request_timeout,
        max_in_flight_per_target: in_flight_bound(&scenario, opts.worker),
        share: opts.worker.map_or(load::Share::WHOLE, |w| w.share),
    };
    let collector = Arc::new(Collector::new(
        scenario.measurement_shape(plan.targets.len()),
    ));
    let names: Vec<String> = plan.targets.iter().map(|t| t.name.clone()).collect();
    let events: Mutex<Vec<Vec<Event>>> = Mutex::new(vec![Vec::new(); names.len()]);
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap_or_default();

    let own_limits: String = defs
        .iter()
        .filter_map(|d| {
            let own = d.limit?;
            Some(format!(
                "; {} at its own {}/{:?}",
                d.name, own.requests, own.window
            ))
        })
        .collect();
    say.line(&format!(
        "running {} for {:.0} s: {} at limit {}/{:?}{own_limits}",
        scenario.name,
        scenario.duration.as_secs_f64(),
        names.join(", "),
        scenario.limit,
        scenario.window
    ));
    let start = match &opts.worker {
        None => Instant::now() + Duration::from_millis(100),
        Some(w) => {
            let wait = match until_start(w) {
                Ok(wait) => wait,
                Err(late) => {
                    world.stop().await;
                    return Err(start_passed(w, late));
                }
            };
            let shown = start_shown(w);
            say.line(&format!(
                "{}: starting with the others at {shown}, in {:.1} s",
                match w.share.index {
                    0 => "faults only".to_owned(),
                    _ => format!("worker {}", w.share),
                },
                wait.as_secs_f64()
            ));
            let start = Instant::now() + wait;
            let interrupted = tokio::select! {
                _ = interrupt.cancelled() => true,
                () = tokio::time::sleep_until((start - Duration::from_millis(50).min(wait)).into()) => false,
            };
            if interrupted {
                world.stop().await;
                return Err(RunError::InterruptedBeforeLoad(logs));
            }
            start
        }
    };
    // A worker that does not play the faults still reads the counters at every boundary.
    let timeline = match &opts.worker {
        Some(w) if !w.drives_faults => {
            let mut quiet = scenario.clone();
            for phase in &mut quiet.phases {
                phase.faults.clear();
            }
            quiet
        }
        _ => scenario.clone(),
    };
    let done = CancellationToken::new();
    // The timeline stops on an interrupt, and also when the load generator fails.
    let stop_timeline = interrupt.child_token();
    let recorder: Arc<dyn load::Recorder> = collector.clone();
    let (summary, phase_facts, (), ()) = tokio::join!(
        async {
            let summary = load::try_run(plan, start, recorder, interrupt.clone()).await;
            if summary.is_err() {
                stop_timeline.cancel();
            }
            done.cancel();
            summary
        },
        play_timeline(&world, &timeline, start, &stop_timeline, &http, &events),
        watch_children(&world, start, &done, &events),
        progress::show(say, &scenario, &names, &collector, start, done.clone()),
    );
    let elapsed = start.elapsed();
    let ran_for = accounting::load_ran_for(summary.as_ref().ok(), elapsed);
    let instance_counts: Vec<u32> = world
        .targets
        .iter()
        .map(|t| {
            t.fleet
                .as_ref()
                .map_or(t.rotation.len() as u32, |f| f.configured())
        })
        .collect();
    world.stop().await;
    let (summary, load_error) = match summary {
        Ok(summary) => (summary, None),
        Err(e) => (load::LoadSummary::default(), Some(e)),
    };
    let partial = interrupt.is_cancelled() || load_error.is_some();

    let measured = collector.snapshot();
    let events = events.into_inner().unwrap_or_else(|e| e.into_inner());
    let attached = opts.attach.is_some();
    let facts: Vec<TargetFacts> = defs
        .iter()
        .zip(&instance_counts)
        .enumerate()
        .map(|(t, (def, &instances))| TargetFacts {
            name: def.name.clone(),
            description: def.description.clone(),
            instances,
            // Attached: not started by failmode, so not with the manifest's settings.
            command: if attached {
                Vec::new()
            } else {
                def.command.clone()
            },
            env: if attached {
                Default::default()
            } else {
                def.env.clone()
            },
            refuses_with: def.refuses_with,
            limit: def.judged_limit(scenario.limit, scenario.window),
            caller: Some(def.caller.clone()),
            events: events[t].clone(),
            phases: phase_facts
                .iter()
                .map(|per_target| per_target[t].clone())
                .collect(),
        })
        .collect();
    let mut notes = Vec::new();
    if let Some(deployment) = &opts.attach {
        notes.push(format!(
            "attached to the deployment in {}: nothing was started, its targets' settings are \
             its own",
            deployment.path.display()
        ));
    } else if opts.infra == Infra::Docker {
        use crate::infra::images::{REDIS_IMAGE, REDIS_TAG, TOXIPROXY_IMAGE, TOXIPROXY_TAG};
        // Docker's port forwarding is on every Redis call: a reader comparing with a local run
        // must know.
        notes.push(format!(
            "Redis and Toxiproxy ran as containers ({REDIS_IMAGE}:{REDIS_TAG}, \
             {TOXIPROXY_IMAGE}:{TOXIPROXY_TAG}) reached through Docker's published ports; the \
             instances ran as child processes"
        ));
    }
    if let Some(w) = &opts.worker {
        notes.push(match w.share.index {
            0 => "worker 0: this process sent no load, it played the fault timeline; \
                  `failmode merge` puts it together with the workers' folders"
                .to_owned(),
            k => format!(
                "worker {}: this process sent arrival i of every schedule when i mod {} = {}; \
                 {}; `failmode merge` puts the {} workers' folders together",
                w.share,
                w.share.count,
                k - 1,
                if w.drives_faults {
                    "it played the faults"
                } else {
                    "another process played the faults"
                },
                w.share.count
            ),
        });
    }
    if let Some(e) = &load_error {
        notes.push(format!("the load generator failed: {e}"));
    }
    if interrupt.is_cancelled() {
        notes.push(format!(
            "interrupted after {:.1} s of {:.1} s: the figures cover what ran{}",
            ran_for.as_secs_f64(),
            scenario.duration.as_secs_f64(),
            match summary.abandoned {
                0 => String::new(),
                n => format!(
                    "; {n} requests still unanswered when it stopped are counted as transport \
                     errors (abandoned), their latency up to then"
                ),
            }
        ));
    }
    for (t, target_events) in events.iter().enumerate() {
        // A fault's own report (the Redis it replaced, the keys it got evicted) is what was
        // asked for: it stays in the target's events, not among the run's notes of trouble.
        for e in target_events.iter().filter(|e| e.kind != FAULT_REPORT) {
            notes.push(format!(
                "{} at {:.1} s: {} ({})",
                names[t], e.at_s, e.kind, e.detail
            ));
        }
    }
    if summary.dropped_by_cause.in_flight_bound > 0 {
        notes.push(format!(
            "{} requests were not sent: the in-flight bound ({} per target{}) was reached",
            summary.dropped_by_cause.in_flight_bound,
            in_flight_bound(&scenario, opts.worker),
            match opts.worker {
                Some(w) if w.share.count > 1 => format!(
                    " in this worker: the scenario's {} shared among {} workers",
                    scenario.max_in_flight_per_target, w.share.count
                ),
                _ => String::new(),
            }
        ));
    }
    notes.extend(accounting::dropped_in_cells(&scenario, &names, &measured));
    let mut targets = results::build_targets(&scenario, &measured, &facts, ran_for);
    if opts.worker.is_some_and(|w| w.is_share()) {
        notes.push(results::withhold_for_worker(&mut targets));
    }
    notes.extend(results::broken_before_any_fault(&targets));
    notes.extend(results::machine_saturated(&targets));
    let result = RunResult {
        schema_version: SCHEMA_VERSION,
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        seed: scenario.seed,
        duration_scale: opts.duration_scale,
        git_revision: revision,
        started_at: match &opts.worker {
            Some(w) => humantime::format_rfc3339_millis(
                SystemTime::UNIX_EPOCH + Duration::from_millis(w.start_at_ms),
            )
            .to_string(),
            None => humantime::format_rfc3339_seconds(started_at).to_string(),
        },
        duration_s: ran_for.as_secs_f64().min(scenario.duration.as_secs_f64()),
        partial,
        limit: scenario.limit,
        window_s: scenario.window.as_secs_f64(),
        tenants: results::TenantIdentity::of(
            scenario
                .tenants
                .iter()
                .map(|t| (t.name.as_str(), t.caller.as_str())),
        ),
        load: LoadTotals {
            scheduled: summary.scheduled,
            sent: summary.sent,
            dropped: summary.dropped,
            dropped_by_cause: summary.dropped_by_cause,
            cancelled: summary.cancelled,
            abandoned: summary.abandoned,
            retries: summary.retries,
            throttled: summary.throttled,
        },
        notes,
        batches: Vec::new(),
        worker: opts.worker,
        targets,
    };
    let write_error = |source| RunError::Results {
        path: folder.path.clone(),
        source,
    };
    folder
        .write(&result, &scenario, &measured)
        .map_err(write_error)?;
    if opts.out.is_none() {
        folder
            .mark_latest(&opts.results_root)
            .map_err(write_error)?;
    }
    // The report is a convenience: a failure to draw it is said, never fatal to the run.
    if let Err(e) = crate::report::html::write_report(&folder.path) {
        say.line(&format!("warning: no report.html: {e}"));
    }
    if let Some(e) = load_error {
        return Err(RunError::Load(e));
    }
    Ok(RunOutcome { folder, result })
}

/// Runs the targets `size` at a time, one batch after another, each through the whole
/// timeline into `batch-K/` of one results folder, then joins them there (see
/// [`results::batches`]). An interruption or an error still joins the batches that ran.
pub async fn run_in_batches(
    opts: RunOptions,
    size: usize,
    interrupt: CancellationToken,
    say: &Say,
) -> Result<RunOutcome, RunError> {
    let names: Vec<String> = opts.targets.clone().unwrap_or_else(|| {
        opts.scenario
            .targets
            .iter()
            .map(|t| t.name.clone())
            .collect()
    });
    let batches = results::batches::split(&names, size);
    if batches.len() < 2 {
        return run(opts, interrupt, say).await;
    }
    let folder = RunFolder::create(
        &opts.results_root,
        &opts.scenario.name,
        SystemTime::now(),
        opts.out.as_deref(),
    )
    .map_err(|source| RunError::Results {
        path: opts.results_root.clone(),
        source,
    })?;
    let mut ran = Vec::new();
    let mut failure = None;
    for (k, batch) in batches.iter().enumerate() {
        say.line(&format!(
            "batch {} of {}: {}",
            k + 1,
            batches.len(),
            batch.join(", ")
        ));
        let outcome = run(
            RunOptions {
                targets: Some(batch.clone()),
                out: Some(folder.path.join(format!("batch-{}", k + 1))),
                ..opts.clone()
            },
            interrupt.clone(),
            say,
        )
        .await;
        match outcome {
            Ok(o) => {
                ran.push(o.folder.path);
                if o.result.partial {
                    break;
                }
            }
            // Ctrl-C between batches: what ran is joined below, the rest named as not run.
            Err(RunError::InterruptedBeforeLoad(_)) if !ran.is_empty() => break,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if ran.is_empty() {
        return Err(failure.unwrap_or(RunError::InterruptedBeforeLoad(folder.logs())));
    }
    let not_run: Vec<String> = batches[ran.len()..].concat();
    let result = results::batches::write_joined(&folder.path, &ran, &not_run)?;
    // Each batch has its own logs/; the joined folder's stays empty.
    let _ = std::fs::remove_dir(folder.logs());
    if let Some(e) = failure {
        return Err(e);
    }
    if opts.out.is_none() {
        folder
            .mark_latest(&opts.results_root)
            .map_err(|source| RunError::Results {
                path: folder.path.clone(),
                source,
            })?;
    }
    if let Err(e) = crate::report::html::write_report(&folder.path) {
        say.line(&format!("warning: no report.html: {e}"));
    }
    Ok(RunOutcome { folder, result })
}

/// Starts the world on `infra`, which [`infra_refusal`] accepted.
async fn start_world(
    infra: Infra,
    scenario: &Scenario,
    defs: &[targets::TargetDef],
    root: &Path,
    logs: &Path,
    say: &Say,
) -> Result<World, RunError> {
    match infra {
        Infra::Local => World::start(scenario, defs, root, logs, |m| say.line(m)).await,
        #[cfg(feature = "docker")]
        Infra::Docker => {
            World::start_in_containers(scenario, defs, root, logs, |m| say.line(m)).await
        }
        #[cfg(not(feature = "docker"))]
        Infra::Docker => Err(crate::infra::DockerNotBuilt.into()),
    }
}

fn since(start: Instant, at: Instant) -> f64 {
    at.saturating_duration_since(start).as_secs_f64()
}

/// Plays the timeline: at every phase boundary, at its scheduled instant, removes the faults
/// of the phases ending there, applies those of the phases starting there (on every target
/// at once), then reads the targets' counters once, so one reading ends a phase and starts
/// the next. Returns `[phase][target]` facts.
async fn play_timeline(
    world: &World,
    scenario: &Scenario,
    start: Instant,
    stop: &CancellationToken,
    http: &reqwest::Client,
    events: &Mutex<Vec<Vec<Event>>>,
) -> Vec<Vec<PhaseFacts>> {
    let player = Player::new(
        world.toxiproxy.clone(),
        world.targets.iter().map(|t| t.proxy.clone()).collect(),
    )
    .with_redis(world.targets.iter().map(|t| t.redis.clone()).collect())
    .await
    .with_redis_addrs(world.targets.iter().map(|t| t.redis_addr).collect())
    .with_fleets(world.targets.iter().map(|t| t.fleet.clone()).collect());
    let n = world.targets.len();
    let mut facts = vec![vec![PhaseFacts::default(); n]; scenario.phases.len()];
    // Commands the faults sent to each Redis themselves, per phase, left out of the target's.
    let mut fault_commands = vec![vec![0u64; n]; scenario.phases.len()];
    let note = |target: usize, kind: &str, detail: String, at: Instant| {
        events.lock().unwrap_or_else(|e| e.into_inner())[target].push(Event {
            at_s: since(start, at),
            kind: kind.to_owned(),
            detail,
        });
    };
    let mut boundaries: Vec<Duration> = scenario
        .phases
        .iter()
        .flat_map(|p| [p.start, p.end])
        .collect();
    boundaries.sort();
    boundaries.dedup();
    let mut readings: Vec<Option<snapshot::Reading>> = vec![None; scenario.phases.len()];
    let stop_ongoing = stop.child_token();
    // Per phase, what runs beside the load for its whole length.
    let mut ongoing: Vec<tokio::task::JoinSet<Vec<(usize, Outcome)>>> = scenario
        .phases
        .iter()
        .map(|_| tokio::task::JoinSet::new())
        .collect();
    'timeline: for at in boundaries {
        if sleep_until(start + at, stop).await {
            break;
        }
        // A `down` (or `scale`) in the phase ending here and in the one starting here stays
        // in place across the boundary.
        let starting: Vec<&Fault> = scenario
            .phases
            .iter()
            .filter(|p| p.start == at)
            .flat_map(|p| &p.faults)
            .collect();
        let staying: Vec<Fault> = scenario
            .phases
            .iter()
            .filter(|p| p.end == at)
            .flat_map(|p| &p.faults)
            .filter(|f| f.spans_adjacent_phases() && starting.contains(f))
            .cloned()
            .collect();
        // Instances stopped or started at this boundary take their counters with them or
        // take seconds to be ready: the counters are read before anything changes.
        let topology = scenario
            .phases
            .iter()
            .filter(|p| p.start == at || p.end == at)
            .any(|p| p.faults.iter().any(Fault::changes_topology));
        let mut early = if topology {
            Some(snapshot::take(world, http).await)
        } else {
            None
        };
        for (p, phase) in scenario
            .phases
            .iter()
            .enumerate()
            .filter(|(_, p)| p.end == at)
        {
            // What ran for the whole phase ends on its own at this instant.
            while let Some(joined) = ongoing[p].join_next().await {
                for (t, outcome) in joined.unwrap_or_default() {
                    settle(
                        outcome,
                        "fault-failed",
                        &mut fault_commands[p][t],
                        &|k, d, a| note(t, k, d, a),
                    );
                }
            }
            // Stopping or starting instances can take seconds: an interrupt does not wait.
            let Some(removed) =
                until_stopped(player.remove(&phase.name, &phase.faults, &staying), stop).await
            else {
                break 'timeline;
            };
            for (t, outcome) in removed.into_iter().enumerate() {
                let done_at = settle(
                    outcome,
                    "fault-not-removed",
                    &mut fault_commands[p][t],
                    &|k, d, a| note(t, k, d, a),
                );
                if let Some(at) = done_at.filter(|_| !phase.faults.is_empty()) {
                    facts[p][t].faults_removed_at_s = Some(since(start, at));
                }
            }
        }
        // Faults land at the boundary, and the counters are read right after: except before
        // a fault that silences Redis (stopped, paused, restarted), so they are read first.
        let silenced = scenario
            .phases
            .iter()
            .any(|p| p.start == at && p.faults.iter().any(Fault::silences_redis));
        if silenced && early.is_none() {
            early = Some(snapshot::take(world, http).await);
        }
        for (p, phase) in scenario
            .phases
            .iter()
            .enumerate()
            .filter(|(_, p)| p.start == at)
        {
            let apply = player.apply(
                &phase.name,
                &phase.faults,
                &staying,
                phase.end - phase.start,
            );
            let Some(applied) = until_stopped(apply, stop).await else {
                break 'timeline;
            };
            for (t, outcome) in applied.into_iter().enumerate() {
                let done_at = settle(
                    outcome,
                    "fault-not-applied",
                    &mut fault_commands[p][t],
                    &|k, d, a| note(t, k, d, a),
                );
                if let Some(at) = done_at.filter(|_| !phase.faults.is_empty()) {
                    facts[p][t].faults_applied_at_s = Some(since(start, at));
                    // A slow change (instances that take long to be ready) can outlast its
                    // phase: what the next phase measures is then not what it says.
                    if at > start + phase.end {
                        note(
                            t,
                            "fault-late",
                            format!(
                                "{}'s faults were in place only at {:.1} s, after the phase ended \
                                 at {:.1} s",
                                phase.name,
                                since(start, at),
                                phase.end.as_secs_f64()
                            ),
                            at,
                        );
                    }
                }
            }
            for fault in phase.faults.iter().filter(|f| f.is_ongoing()) {
                let (player, cancel, fault) = (player.clone(), stop_ongoing.clone(), fault.clone());
                let (from, until) = (start + phase.start, start + phase.end);
                ongoing[p].spawn(async move { player.ongoing(&fault, from, until, &cancel).await });
            }
        }
        let reading = match early {
            Some(reading) => reading,
            None => snapshot::take(world, http).await,
        };
        for (p, phase) in scenario.phases.iter().enumerate() {
            if phase.end == at
                && let Some(before) = &readings[p]
            {
                // A Redis restarted in the phase counted from zero again: its reading at the
                // end is all the phase's (the one before was taken just before the kill).
                let restarted = phase
                    .faults
                    .iter()
                    .any(|f| matches!(f, Fault::RedisRestart { .. }));
                for (t, f) in facts[p].iter_mut().enumerate() {
                    f.fallbacks = snapshot::fallbacks_between(
                        before.fallbacks[t].as_deref(),
                        reading.fallbacks[t].as_deref(),
                    );
                    f.store_commands = reading.store_commands[t]
                        .zip(before.store_commands[t])
                        .map(|(a, b)| if restarted { a } else { a.saturating_sub(b) })
                        .map(|c| c.saturating_sub(fault_commands[p][t]));
                }
            }
            if phase.start == at {
                readings[p] = Some(reading.clone());
            }
        }
    }
    stop_ongoing.cancel();
    for mut set in ongoing {
        while set.join_next().await.is_some() {}
    }
    facts
}

/// Records one target's fault outcome: its own commands counted, its reports noted as
/// events, a failure noted as `failed`. Returns when it was done, if it was.
fn settle(
    outcome: Outcome,
    failed: &str,
    commands: &mut u64,
    note: &dyn Fn(&str, String, Instant),
) -> Option<Instant> {
    match outcome {
        Ok(done) => {
            let at = done.at.unwrap_or_else(Instant::now);
            *commands += done.commands;
            for report in done.reports {
                note(FAULT_REPORT, report, at);
            }
            Some(at)
        }
        Err(e) => {
            note(failed, e.to_string(), Instant::now());
            None
        }
    }
}

/// How a child that is no longer running ended, or `None` while it runs.
fn death_of(pid: u32) -> Option<String> {
    match exit_of(pid) {
        Exit::Running => None,
        Exit::Exited(status) => Some(format!("exited with {}", describe_status(status))),
        // Reaped already (tokio may collect a child it owns): dead only if no such process.
        Exit::Unknown => {
            let gone = i32::try_from(pid).map_or(true, |raw| {
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None)
                    == Err(nix::errno::Errno::ESRCH)
            });
            gone.then(|| "is gone".to_owned())
        }
    }
}

/// Notices any child (instance or Redis) that dies mid-run; the run goes on.
async fn watch_children(
    world: &World,
    start: Instant,
    done: &CancellationToken,
    events: &Mutex<Vec<Vec<Event>>>,
) {
    let mut reported: Vec<u32> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = done.cancelled() => return,
            _ = tick.tick() => {}
        }
        for (t, target) in world.targets.iter().enumerate() {
            // Judged with the instance list held: `scale` and `kill-instance` take an
            // instance off it before they stop it, so what they end is not a death.
            // An attached deployment's processes are not failmode's children.
            let mut children: Vec<(u32, String, PathBuf, Option<String>)> = target
                .fleet
                .as_ref()
                .map(|fleet| {
                    fleet.inspect(|instances| {
                        instances
                            .iter()
                            .map(|i| {
                                let pid = i.process.pid();
                                let how =
                                    (!reported.contains(&pid)).then(|| death_of(pid)).flatten();
                                (
                                    pid,
                                    format!("instance {}", i.index),
                                    i.process.log_path().to_owned(),
                                    how,
                                )
                            })
                            .collect()
                    })
                })
                .unwrap_or_default();
            // Judged under its lock: a `redis-restart` replaces the process while holding it,
            // and the one it killed is not a death. Skipped for a tick while it does.
            if let Some(Ok(redis)) = target.redis.as_ref().map(|r| r.try_lock()) {
                let pid = redis.pid();
                let how = (!reported.contains(&pid)).then(|| death_of(pid)).flatten();
                children.push((pid, "redis-server".into(), redis.log_path().to_owned(), how));
            }
            if let (0, Some(server)) = (t, &world.toxiproxy_server) {
                let pid = server.pid();
                let how = (!reported.contains(&pid)).then(|| death_of(pid)).flatten();
                children.push((
                    pid,
                    "toxiproxy-server (every target's faults and proxies)".into(),
                    server.log_path().to_owned(),
                    how,
                ));
            }
            for (pid, what, log, how) in children {
                let Some(how) = how else { continue };
                reported.push(pid);
                let detail = format!(
                    "{what} (pid {pid}) {how}; its log, {}, ends:\n{}",
                    log.display(),
                    last_lines(&log, DEATH_LOG_LINES)
                );
                tracing::warn!(target = %target.def.name, "{detail}");
                events.lock().unwrap_or_else(|e| e.into_inner())[t].push(Event {
                    at_s: since(start, Instant::now()),
                    kind: "child-exited".to_owned(),
                    detail,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_time_is_rfc_3339_or_seconds_since_the_epoch_and_nonsense_is_named() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_068_800);
        assert_eq!(parse_start_at("2026-11-30T20:00:00Z"), Ok(at));
        assert_eq!(parse_start_at("1796068800"), Ok(at));
        assert_eq!(
            parse_start_at("2026-11-30T20:00:00.250Z"),
            Ok(at + Duration::from_millis(250))
        );
        let e = parse_start_at("tomorrow").unwrap_err();
        assert!(
            e.contains("\"tomorrow\"") && e.contains(":00Z, or seconds"),
            "{e}"
        );
        assert!(parse_start_at("-5").is_err());
    }

    #[test]
    fn a_missing_program_is_named_with_how_to_get_it() {
        let e = required("failmode-no-such-program", "run `just setup`").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("failmode-no-such-program") && text.contains("just setup"),
            "{text}"
        );
        assert!(required("sh", "").is_ok());
    }

    #[tokio::test]
    async fn a_child_that_exits_is_named_dead_with_its_status_and_a_running_one_is_not() {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "read _; exit 3"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        assert_eq!(death_of(pid), None);
        drop(child.stdin.take());
        // Not reaped: the watcher must see the zombie's status, as it does a child's.
        tokio::time::timeout(Duration::from_secs(5), async {
            while death_of(pid).is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("sh exits once its stdin closes");
        assert_eq!(death_of(pid).as_deref(), Some("exited with status 3"));
        child.wait().await.unwrap();
        assert_eq!(death_of(pid).as_deref(), Some("is gone"));
        assert_eq!(death_of(u32::MAX).as_deref(), Some("is gone"));
    }

    fn scenario(faults: &str) -> Scenario {
        let text = format!(
            r#"
name = "infra-check"
[policy]
limit = 50
window = "1s"
[[tenants]]
name = "acme"
rate = 10
[[targets]]
name = "reference"
[[phases]]
name = "steady"
start = "0s"
end = "1s"
[[phases]]
name = "fault"
start = "1s"
end = "2s"
faults = [{faults}]
"#
        );
        Scenario::parse(&text, "infra-check.toml").unwrap()
    }

    #[test]
    fn in_containers_only_the_faults_on_failmodes_own_redis_process_are_refused() {
        let playable = scenario(
            r#"{ type = "down" }, { type = "hang" }, { type = "flap", period = "1s", down = "200ms" },
               { type = "latency", latency_ms = 5 }, { type = "client-pause" },
               { type = "noisy-neighbour" }, { type = "eviction" }, { type = "scale", to = 2 },
               { type = "kill-instance" }"#,
        );
        assert!(infra_refusal(Infra::Local, &playable).is_none());
        for fault in [r#"{ type = "stall" }"#, r#"{ type = "redis-restart" }"#] {
            let refused = scenario(&format!(r#"{{ type = "down" }}, {fault}"#));
            assert!(infra_refusal(Infra::Local, &refused).is_none());
            match infra_refusal(Infra::Docker, &refused) {
                Some(RunError::NotInContainers { phase, fault }) if cfg!(feature = "docker") => {
                    assert_eq!(phase, "fault");
                    assert!(
                        fault.starts_with("stall") || fault.starts_with("redis-restart"),
                        "{fault}"
                    );
                }
                Some(RunError::DockerNotBuilt(_)) if cfg!(not(feature = "docker")) => {}
                other => panic!("{fault}: {other:?}"),
            }
        }
        match infra_refusal(Infra::Docker, &playable) {
            None if cfg!(feature = "docker") => {}
            Some(RunError::DockerNotBuilt(_)) if cfg!(not(feature = "docker")) => {}
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_fault_docker_cannot_play_is_refused_before_anything_is_started_or_written() {
        let out = tempfile::tempdir().unwrap();
        let opts = RunOptions {
            root: crate::infra::workspace_root(),
            results_root: out.path().to_owned(),
            scenario: scenario(r#"{ type = "stall" }"#),
            duration_scale: 1.0,
            targets: None,
            out: None,
            build: false,
            attach: None,
            infra: Infra::Docker,
            worker: None,
        };
        let error = run(opts, CancellationToken::new(), &Say::default())
            .await
            .unwrap_err();
        let text = error.to_string();
        if cfg!(feature = "docker") {
            assert!(
                text.contains("stall") && text.contains("--infra local"),
                "{text}"
            );
        } else {
            assert!(text.contains(crate::infra::backend::DOCKER_BUILD), "{text}");
        }
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
    }
}
