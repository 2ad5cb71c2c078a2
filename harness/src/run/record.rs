//! The record of a run: its results folder, the notes a reader needs (how it ran, what went
//! wrong), and `run.json` assembled from what the load, the timeline and the watch left;
//! then written, marked `latest` and drawn as `report.html`.

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::plan::in_flight_bound;
use super::progress::Say;
use super::start::start_shown;
use super::timeline::FAULT_REPORT;
use super::{RunError, RunOptions, Topology, accounting};
use crate::load::{LoadError, LoadSummary, Role};
use crate::metrics::Measured;
use crate::results::folder::RunFolder;
use crate::results::{self, Event, LoadTotals, PhaseFacts, RunResult, SCHEMA_VERSION, TargetFacts};
use crate::scenario::RedisTopology;
use crate::targets::TargetDef;

/// What the load, the timeline and the watch left, for the record.
#[derive(Debug)]
pub(super) struct Ran {
    pub(super) summary: LoadSummary,
    pub(super) load_error: Option<LoadError>,
    pub(super) interrupted: bool,
    /// Why the abort guard stopped the run, if it did.
    pub(super) aborted: Option<String>,
    pub(super) ran_for: Duration,
    /// Per target, its instances at the end (a `scale` may have changed them).
    pub(super) instance_counts: Vec<u32>,
    /// `[phase][target]`.
    pub(super) phase_facts: Vec<Vec<PhaseFacts>>,
    /// Per target.
    pub(super) events: Vec<Vec<Event>>,
    pub(super) names: Vec<String>,
    pub(super) measured: Measured,
}

/// `run.json` of this run as it starts, for its journal: what ran and how, no figures, and
/// only the notes on how it runs (those on its figures come when they are built).
pub(super) fn started(
    opts: &RunOptions,
    defs: &[TargetDef],
    revision: Option<String>,
    started_at: SystemTime,
    ran: &Ran,
) -> RunResult {
    RunResult {
        notes: setting_notes(opts),
        ..assemble(opts, defs, revision, started_at, ran)
    }
}

impl Ran {
    /// Nothing yet: what the journal starts from.
    pub(super) fn before_the_load(
        names: Vec<String>,
        instance_counts: Vec<u32>,
        shape: &crate::metrics::Shape,
    ) -> Self {
        Self {
            summary: LoadSummary::default(),
            load_error: None,
            interrupted: false,
            aborted: None,
            ran_for: Duration::ZERO,
            events: vec![Vec::new(); names.len()],
            phase_facts: Vec::new(),
            instance_counts,
            names,
            measured: Measured::empty(shape),
        }
    }
}

/// The checkout's revision at `root`, `-dirty` when tracked files differ from it (the binary
/// may then hold changes no commit has); `None` outside a git checkout.
pub fn git_revision(root: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
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

/// The results folder, created before anything starts: `--out`, or
/// `<results_root>/<scenario>/<timestamp>`.
pub(super) fn create_folder(
    opts: &RunOptions,
    started_at: SystemTime,
) -> Result<RunFolder, RunError> {
    let scenario = &opts.scenario;
    // Workers (and a fault player) on one machine may start in the same second: each its own
    // folder.
    let path = opts.out.clone().unwrap_or_else(|| match opts.worker {
        Some(w) => {
            let who = match w.role {
                Role::FaultPlayer => "faults".to_owned(),
                Role::Sender(share) => {
                    format!("worker-{}-of-{}", share.index(), share.count())
                }
            };
            opts.results_root
                .join(&scenario.name)
                .join(format!("{}-{who}", results::folder::timestamp(started_at)))
        }
        None => RunFolder::default_path(&opts.results_root, &scenario.name, started_at),
    });
    RunFolder::create(path.clone()).map_err(|source| RunError::Results { path, source })
}

/// `run.json` of this run.
pub(super) fn assemble(
    opts: &RunOptions,
    defs: &[TargetDef],
    revision: Option<String>,
    started_at: SystemTime,
    ran: &Ran,
) -> RunResult {
    let scenario = &opts.scenario;
    let facts = target_facts(opts, defs, ran);
    let mut notes = setting_notes(opts);
    notes.extend(trouble_notes(opts, ran));
    let mut targets = results::build::build_targets(scenario, &ran.measured, &facts, ran.ran_for);
    notes.extend(results::trust::judge_figures(&mut targets, opts.worker));
    RunResult {
        schema_version: SCHEMA_VERSION,
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        seed: scenario.seed,
        duration_scale: opts.duration_scale,
        git_revision: revision,
        started_at: match &opts.worker {
            Some(w) => start_shown(w),
            None => humantime::format_rfc3339_seconds(started_at).to_string(),
        },
        duration_s: ran
            .ran_for
            .as_secs_f64()
            .min(scenario.duration.as_secs_f64()),
        partial: ran.interrupted || ran.load_error.is_some(),
        aborted: ran.aborted.clone(),
        untrusted_because: Vec::new(),
        limit: scenario.limit,
        window_s: scenario.window.as_secs_f64(),
        tenants: results::TenantIdentity::of(
            scenario
                .tenants
                .iter()
                .map(|t| (t.name.as_str(), t.caller.to_string(), t.caller.keys())),
        ),
        load: LoadTotals {
            scheduled: ran.summary.scheduled,
            sent: ran.summary.sent,
            dropped: ran.summary.dropped,
            dropped_by_cause: ran.summary.dropped_by_cause,
            cancelled: ran.summary.cancelled,
            abandoned: ran.summary.abandoned,
            retries: ran.summary.retries,
            throttled: ran.summary.throttled,
            senders: ran.summary.senders,
        },
        notes,
        batches: Vec::new(),
        worker: opts.worker,
        targets,
    }
    .with_trust_recorded()
}

/// What each target was and met, beside what was measured.
fn target_facts(opts: &RunOptions, defs: &[TargetDef], ran: &Ran) -> Vec<TargetFacts> {
    let attached = opts.topology.attached().is_some();
    defs.iter()
        .zip(&ran.instance_counts)
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
                def.env_as_run(opts.scenario.redis != RedisTopology::Single)
            },
            refuses_with: def.refuses_with,
            limit: def.judged_limit(opts.scenario.limit, opts.scenario.window),
            caller: Some(def.caller.clone()),
            events: ran.events[t].clone(),
            phases: ran
                .phase_facts
                .iter()
                .map(|per_target| per_target[t].clone())
                .collect(),
        })
        .collect()
}

/// How the run ran, when that is not the plain local way: attached, in containers, a worker.
fn setting_notes(opts: &RunOptions) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(deployment) = opts.topology.attached() {
        notes.push(format!(
            "attached to the deployment in {}: nothing was started, its targets' settings are \
             its own",
            deployment.path.display()
        ));
    } else if matches!(opts.topology, Topology::Docker) {
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
        notes.push(match w.role {
            Role::FaultPlayer => "worker 0: this process sent no load, it played the fault \
                                  timeline; `failmode merge` puts it together with the workers' \
                                  folders"
                .to_owned(),
            Role::Sender(share) => format!(
                "worker {share}: this process sent arrival i of every schedule when i mod {} = \
                 {}; {}; `failmode merge` puts the {} workers' folders together",
                share.count(),
                share.index() - 1,
                if w.drives_faults {
                    "it played the faults"
                } else {
                    "another process played the faults"
                },
                share.count()
            ),
        });
    }
    notes
}

/// What went wrong or was not done as planned.
fn trouble_notes(opts: &RunOptions, ran: &Ran) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(e) = &ran.load_error {
        notes.push(format!("the load generator failed: {e}"));
    }
    if let Some(reason) = &ran.aborted {
        notes.push(format!(
            "aborted by the abort guard after {:.1} s of {:.1} s ({reason}): every fault \
             removed and the load stopped; the figures cover what ran",
            ran.ran_for.as_secs_f64(),
            opts.scenario.duration.as_secs_f64(),
        ));
    } else if ran.interrupted {
        notes.push(format!(
            "interrupted after {:.1} s of {:.1} s: the figures cover what ran{}",
            ran.ran_for.as_secs_f64(),
            opts.scenario.duration.as_secs_f64(),
            match ran.summary.abandoned {
                0 => String::new(),
                n => format!(
                    "; {n} requests still unanswered when it stopped are counted as transport \
                     errors (abandoned), their latency up to then"
                ),
            }
        ));
    }
    for (t, target_events) in ran.events.iter().enumerate() {
        // A fault's own report (the Redis it replaced, the keys it got evicted) is what was
        // asked for: it stays in the target's events, not among the run's notes of trouble.
        for e in target_events.iter().filter(|e| e.kind != FAULT_REPORT) {
            notes.push(format!(
                "{} at {:.1} s: {} ({})",
                ran.names[t], e.at_s, e.kind, e.detail
            ));
        }
    }
    if ran.summary.dropped_by_cause.in_flight_bound > 0 {
        notes.push(format!(
            "{} requests were not sent: the in-flight bound ({} per target{}) was reached",
            ran.summary.dropped_by_cause.in_flight_bound,
            in_flight_bound(&opts.scenario, opts.worker),
            match opts.worker.map(|w| w.role) {
                Some(Role::Sender(share)) if share.count() > 1 => format!(
                    " in this worker: the scenario's {} shared among {} workers",
                    opts.scenario.max_in_flight_per_target,
                    share.count()
                ),
                _ => String::new(),
            }
        ));
    }
    if ran.summary.dropped_by_cause.connection_cap > 0 {
        let capped: Vec<String> = ran
            .names
            .iter()
            .filter_map(|name| {
                let max = opts.scenario.connections_of(name).max?;
                Some(format!("{name} {max}"))
            })
            .collect();
        notes.push(format!(
            "{} requests were not sent: a target's max_connections ({}{}) was reached; they \
             count as waiting the request timeout, and not against the run's trust (the cap is \
             the scenario's client)",
            ran.summary.dropped_by_cause.connection_cap,
            capped.join(", "),
            match opts.worker.map(|w| w.role) {
                Some(Role::Sender(share)) if share.count() > 1 => {
                    format!("; shared among {} workers", share.count())
                }
                _ => String::new(),
            }
        ));
    }
    if ran.summary.dropped_by_cause.backlog > 0 {
        notes.push(format!(
            "{} requests were not sent: the load generator fell more than a second behind its \
             schedule (or was still behind at the end), and dropped that backlog; the run asks \
             more than this machine sends (lower the rates, run fewer targets at once, or split \
             the load with --worker K/N)",
            ran.summary.dropped_by_cause.backlog
        ));
    }
    notes.extend(accounting::dropped_in_cells(
        &opts.scenario,
        &ran.names,
        &ran.measured,
    ));
    notes
}

/// Writes the folder (see [`publish`] for what follows).
pub(super) fn write(
    folder: &RunFolder,
    result: &RunResult,
    opts: &RunOptions,
    measured: &Measured,
) -> Result<(), RunError> {
    folder
        .write(result, &opts.scenario, measured)
        .map_err(|source| RunError::Results {
            path: folder.path.clone(),
            source,
        })
}

/// Marks the folder `latest` (unless it was put where `--out` said) and draws its report.
pub(super) fn publish(folder: &RunFolder, opts: &RunOptions, say: &Say) -> Result<(), RunError> {
    if opts.out.is_none() {
        folder
            .mark_latest(&opts.results_root)
            .map_err(|source| RunError::Results {
                path: folder.path.clone(),
                source,
            })?;
    }
    // The report is a convenience: a failure to draw it is said, never fatal to the run.
    if let Err(e) = crate::report::html::write_report(&folder.path) {
        say.line(&format!("warning: no report.html: {e}"));
    }
    Ok(())
}
