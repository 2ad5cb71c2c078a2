//! The `failmode` command line: parse, call the library, map the outcome to an exit code by
//! the one table every command follows, `failmode::exit::CODES`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use clap::{Parser, Subcommand};
use failmode::cli::check::CheckArgs;
use failmode::cli::init::InitArgs;
use failmode::cli::scenario::ScenarioCommand;
use failmode::cli::setup::SetupArgs;
use failmode::deployment::Deployment;
use failmode::faults::redis_native::unpause;
use failmode::faults::toxiproxy::Toxiproxy;
use failmode::infra::Infra;
use failmode::load::Share;
use failmode::project::Project;
use failmode::results::folder::timestamp;
use failmode::results::{RunResult, Worker};
use failmode::run::progress::Say;
use failmode::run::world::undo_on;
use failmode::run::{RunError, RunOptions, parse_start_at, run, run_in_batches};
use failmode::scenario::Scenario;
use failmode::{cli, compare, gate, report};
use tokio_util::sync::CancellationToken;

/// Chaos and load-test harness for rate limiters: what does your limiter do when Redis is slow
/// or gone?
#[derive(Debug, Parser)]
#[command(name = "failmode", version, after_help = failmode::exit::CODES)]
struct Cli {
    /// The project to use: the directory holding its failmode/ folder. Default: the nearest
    /// such directory from here upward, else failmode's checkout when run inside it, else here.
    #[arg(long, global = true, value_name = "DIR")]
    project: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the scenarios and the targets, and where each comes from (project, checkout,
    /// built-in).
    List,
    /// Scenarios: `failmode scenario show NAME` prints one to copy and edit.
    #[command(subcommand)]
    Scenario(ScenarioCommand),
    /// Write a small, commented project into this directory (or --project DIR): a target
    /// manifest for your service, a scenario running it beside the reference and fail-open
    /// through a slow and a cut Redis, with gates for CI. Overwrites nothing.
    Init(InitArgs),
    /// Install what every run needs and is missing: redis-server (Debian's package) and
    /// toxiproxy-server (go install, into ~/.cache/failmode/bin).
    Setup(SetupArgs),
    /// Check a target before any chaos: start it briefly with a healthy Redis (its build
    /// step, its instances, limit 10 per 1 s unless told) and say what is wrong, each with the
    /// fix: not ready, not listening on {port}, not limiting at {limit}, tenants limited
    /// together, an undeclared refusal status, not using {redis_url}. Exit 0 all good, 1 the
    /// target misbehaves, 2 bad input.
    Check(CheckArgs),
    /// Run a scenario: every target side by side, the fault timeline applied to all at once.
    Run(RunArgs),
    /// Check a results folder against the gates of its scenario (or --gates FILE):
    /// exit 0 all pass, 1 any fails, 2 unusable input.
    Gate(GateArgs),
    /// (Re)write report.html and plots/*.svg of a results folder from run.json and series.csv.
    Report {
        /// A results folder.
        results: PathBuf,
    },
    /// What each target did under each fault of a run (one Markdown table per fault) and the
    /// scenario's [[claims]] confirmed or refuted; to stdout, or --out FILE.
    Outcomes(OutcomesArgs),
    /// Baselines for `compare`.
    #[command(subcommand)]
    Baseline(BaselineCommand),
    /// Compare a candidate with a baseline, per target × phase, deciding latency on the phase's
    /// percentiles with a bootstrap over its seconds: exit 0 nothing worse, 1 something worse
    /// or not measured, 3 a side's measurement cannot be trusted. Or two targets of one run:
    /// `compare RESULTS --baseline-target OLD --candidate-target NEW`.
    Compare(CompareArgs),
    /// Faults on an attached deployment.
    #[command(subcommand)]
    Faults(FaultsCommand),
    /// Merge the results folders of workers that sent one run's load together (`run --worker
    /// K/N`) into one results folder: counts summed, histograms added, series aligned.
    Merge {
        /// The workers' results folders (and `faults play`'s, if one played the faults).
        #[arg(required = true)]
        folders: Vec<PathBuf>,
        /// Write the merged results here instead of results/<scenario>/<timestamp>-merged/.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// How several processes share one run: `--worker K/N --start-at TIME`.
#[derive(Debug, clap::Args)]
struct WorkerArgs {
    /// Send only this share of every tenant's schedule: arrival i when i mod N = K - 1 (the
    /// same seed gives every worker the same split). Needs --attach and --start-at. Worker 1
    /// plays the faults unless --no-faults.
    #[arg(long, value_name = "K/N")]
    worker: Option<Share>,
    /// When every worker starts its timeline: an RFC 3339 time (2026-11-30T20:00:00Z) or
    /// seconds since the Unix epoch. The same for all workers, far enough ahead for each to
    /// be attached and ready.
    #[arg(long, value_name = "TIME", value_parser = parse_start_at)]
    start_at: Option<SystemTime>,
    /// This worker does not play the faults (another process does: worker 1, or `failmode
    /// faults play`).
    #[arg(long)]
    no_faults: bool,
}

#[derive(Debug, Subcommand)]
enum FaultsCommand {
    /// Remove what a run that died left on an attached deployment: its toxics (named
    /// failmode-*) on the named proxies, a proxy it disabled, a CLIENT PAUSE on a Redis admin.
    Reset {
        /// The deployment file the run was attached with.
        #[arg(long, value_name = "DEPLOYMENT.toml")]
        attach: PathBuf,
        /// Allow non-loopback addresses in the deployment file.
        #[arg(long)]
        allow_remote: bool,
    },
    /// Play a scenario's fault timeline on an attached deployment without sending load, from a
    /// shared start time: the fault driver for workers that all run with --no-faults. Writes a
    /// results folder for `failmode merge`.
    Play {
        #[command(flatten)]
        run: ScenarioArgs,
        /// The deployment file the workers attach with.
        #[arg(long, value_name = "DEPLOYMENT.toml")]
        attach: PathBuf,
        /// Allow non-loopback addresses in the deployment file.
        #[arg(long)]
        allow_remote: bool,
        /// When the workers start (as their --start-at).
        #[arg(long, value_name = "TIME", value_parser = parse_start_at)]
        start_at: SystemTime,
    },
}

#[derive(Debug, Subcommand)]
enum BaselineCommand {
    /// Store a results folder (one run or --repeat runs) as results/baselines/<scenario>.json.
    Save {
        results: PathBuf,
        /// Where baselines are kept.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
struct CompareArgs {
    /// A baseline file, or a results folder (one run or run-1/ … run-N/).
    baseline: PathBuf,
    /// The same, for the candidate; omitted: the baseline's results, whose two targets
    /// --baseline-target and --candidate-target pick.
    candidate: Option<PathBuf>,
    /// Compare this target of the baseline (alone: with the same name in the candidate).
    #[arg(long, value_name = "TARGET")]
    baseline_target: Option<String>,
    /// Against this target of the candidate (alone: with the same name in the baseline).
    #[arg(long, value_name = "TARGET")]
    candidate_target: Option<String>,
    /// Latency: worse only if the whole interval of the ratio is above 1 + this (percent).
    #[arg(long, default_value_t = 10.0)]
    threshold: f64,
    /// Latency: and the difference is more than this many milliseconds.
    #[arg(long, default_value_t = 1.0)]
    floor_ms: f64,
    /// Confidence of the bootstrap interval, percent.
    #[arg(long, default_value_t = 95.0)]
    confidence: f64,
    #[arg(long, default_value_t = 2000)]
    resamples: usize,
    /// 429 %, 503 %, 5xx % and transport errors %: a change of more than this many points.
    #[arg(long, default_value_t = 1.0)]
    rate_pp: f64,
    /// Over-admission and wrongful denial: a change of more than this many percentage points.
    #[arg(long, default_value_t = 2.0)]
    admission_pp: f64,
    /// Also write the comparison as Markdown here (and to $GITHUB_STEP_SUMMARY when set).
    #[arg(long)]
    markdown: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct OutcomesArgs {
    /// A results folder.
    results: PathBuf,
    /// Write the document here instead of to stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The command the document names for regenerating it (default: the two failmode commands).
    #[arg(long)]
    regenerate: Option<String>,
}

#[derive(Debug, clap::Args)]
struct GateArgs {
    /// A results folder (results/latest, results/slow-redis/<timestamp>, …).
    results: PathBuf,
    /// A TOML file of [[gates]] to use instead of the scenario's.
    #[arg(long)]
    gates: Option<PathBuf>,
    /// Gate an interrupted (partial) run too: its verdicts rest on the part of the timeline
    /// that ran. Without it, gating a partial run exits 2.
    #[arg(long)]
    allow_partial: bool,
}

/// The scenario as a run plays it: which, its seed, its time scale, where its results go.
#[derive(Debug, clap::Args)]
struct ScenarioArgs {
    /// A scenario name (`failmode list`: the project's, the checkout's or a built-in one, e.g.
    /// slow-redis) or a path to a TOML file. Left out: the project's own scenario, when it
    /// has exactly one (as `failmode init` writes).
    scenario: Option<String>,
    /// Seed for arrival schedules and Toxiproxy's randomness (default: the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Multiply every time on the timeline by this (0.1 turns a 55 s run into 5.5 s).
    #[arg(long, default_value_t = 1.0)]
    duration_scale: f64,
    /// Write the results here instead of results/<scenario>/<timestamp>/.
    #[arg(long)]
    out: Option<PathBuf>,
}

impl ScenarioArgs {
    /// The scenario found, seeded and scaled as asked.
    fn scenario(&self, project: &Project) -> anyhow::Result<Scenario> {
        if !(self.duration_scale.is_finite() && self.duration_scale > 0.0) {
            anyhow::bail!("--duration-scale must be a number greater than zero");
        }
        let name = match &self.scenario {
            Some(name) => name.clone(),
            None => project.only_scenario()?,
        };
        let mut scenario = project.find_scenario(&name)?;
        if let Some(seed) = self.seed {
            scenario.seed = seed;
        }
        Ok(scenario.scaled(self.duration_scale))
    }
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    #[command(flatten)]
    run: ScenarioArgs,
    /// Run these targets instead of the scenario's (comma-separated).
    #[arg(long, value_delimiter = ',')]
    targets: Option<Vec<String>>,
    /// Skip the targets' build commands (they must already be built).
    #[arg(long)]
    no_build: bool,
    /// Then check the scenario's gates (exit 1 if any fails; with --repeat, the last run's).
    #[arg(long)]
    gate: bool,
    /// Run the scenario N times into run-1/ … run-N/ of one results folder, for `compare` to
    /// decide on distributions rather than one noisy run.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Run the targets N at a time, one batch after another through the whole timeline, into
    /// batch-1/ … of one results folder that reads as one run: on a small machine, many
    /// targets at once queue for CPU and their latency becomes the machine's.
    #[arg(long)]
    batch: Option<usize>,
    /// Start nothing: send the load and the faults to the deployment this file describes
    /// (its instances, its Toxiproxy and proxies, optionally a Redis admin URL per target).
    #[arg(long, value_name = "DEPLOYMENT.toml")]
    attach: Option<PathBuf>,
    /// With --attach: allow addresses that are not this machine's loopback.
    #[arg(long)]
    allow_remote: bool,
    /// What Redis and Toxiproxy run as: `local` child processes, or `docker` containers (needs
    /// a Docker daemon on this machine and a failmode built with `--features docker`).
    #[arg(long, default_value_t = Infra::Local, value_name = "local|docker")]
    infra: Infra,
    #[command(flatten)]
    workers: WorkerArgs,
}

fn exit_code(code: u8) -> ExitCode {
    ExitCode::from(code)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FAILMODE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return exit_code(2);
        }
    };
    match runtime.block_on(dispatch(cli.project, cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit_code(2)
        }
    }
}

async fn dispatch(explicit: Option<PathBuf>, command: Command) -> anyhow::Result<ExitCode> {
    let project = Project::resolve(explicit.as_deref())?;
    let root = project.root().to_owned();
    let results_root = project.results_dir();
    match command {
        Command::List => {
            print!("{}", cli::list::render(&project)?);
            Ok(exit_code(0))
        }
        Command::Scenario(command) => {
            print!("{}", cli::scenario::render(&project, &command)?);
            Ok(exit_code(0))
        }
        Command::Init(args) => {
            let dir = match explicit {
                Some(dir) => dir,
                None => std::env::current_dir()?,
            };
            let written = cli::init::init(&dir, &project, &args)?;
            print!("{}", cli::init::report(&written, &dir));
            Ok(exit_code(0))
        }
        Command::Check(args) => {
            let verdict = cli::check::check(&project, &args).await?;
            Ok(exit_code(verdict.exit_code()))
        }
        Command::Setup(args) => {
            let complete = cli::setup::setup(&args)?;
            Ok(exit_code(u8::from(!complete)))
        }
        Command::Report { results } => {
            let path = report::html::write_report(&results)?;
            println!("report: {}", path.display());
            Ok(exit_code(0))
        }
        Command::Outcomes(args) => {
            let outcomes = failmode::outcomes::read(&args.results)?;
            let regenerate = args.regenerate.unwrap_or_else(|| {
                format!(
                    "failmode run {} && failmode outcomes results/latest{}",
                    outcomes.run.scenario,
                    args.out
                        .as_ref()
                        .map(|p| format!(" --out {}", p.display()))
                        .unwrap_or_default()
                )
            });
            let markdown = failmode::outcomes::render(&outcomes, &regenerate);
            match &args.out {
                Some(path) => {
                    std::fs::write(path, &markdown)
                        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
                    println!("outcomes: {}", path.display());
                }
                None => print!("{markdown}"),
            }
            Ok(exit_code(0))
        }
        Command::Baseline(BaselineCommand::Save { results, dir }) => {
            let dir = dir.unwrap_or_else(|| results_root.join("baselines"));
            let path = compare::save_baseline(&results, &dir)?;
            println!("saved {}", path.display());
            Ok(exit_code(0))
        }
        Command::Compare(args) => {
            let options = compare::CompareOptions {
                rel_threshold: args.threshold / 100.0,
                abs_floor_ms: args.floor_ms,
                confidence: args.confidence / 100.0,
                resamples: args.resamples,
                status_threshold_pp: args.rate_pp,
                admission_threshold_pp: args.admission_pp,
                ..compare::CompareOptions::default()
            };
            let pick = compare::TargetPick {
                baseline: args.baseline_target,
                candidate: args.candidate_target,
            };
            let baseline = compare::load_set(&args.baseline)?;
            let candidate = match &args.candidate {
                Some(path) => compare::load_set(path)?,
                None => {
                    pick.check_for_one_results(&baseline)?;
                    baseline.clone()
                }
            };
            let comparison = compare::compare_targets(&baseline, &candidate, &pick, &options)?;
            println!("{}", compare::render_table(&comparison));
            let markdown = compare::render_markdown(&comparison);
            if let Some(path) = &args.markdown {
                std::fs::write(path, &markdown)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            }
            append_step_summary(&markdown)?;
            Ok(exit_code(comparison.exit_code()))
        }
        Command::Faults(FaultsCommand::Reset {
            attach,
            allow_remote,
        }) => {
            let deployment = Deployment::read(&attach, allow_remote)?;
            let toxiproxy = Toxiproxy::new(deployment.toxiproxy);
            let proxies: Vec<String> = deployment.targets.iter().map(|t| t.proxy.clone()).collect();
            let mut done = undo_on(&toxiproxy, &proxies).await?;
            for t in &deployment.targets {
                if let Some(addr) = t.redis_admin {
                    unpause(addr).await?;
                    done.push(format!("{}: CLIENT UNPAUSE sent to Redis {addr}", t.name));
                }
            }
            if done.is_empty() {
                println!("nothing to remove: no failmode fault was left on the deployment");
            }
            for line in done {
                println!("{line}");
            }
            Ok(exit_code(0))
        }
        Command::Merge { folders, out } => {
            let (folder, result) =
                failmode::results::merge::merge(&folders, &results_root, out.as_deref())?;
            if let Err(e) = report::html::write_report(&folder.path) {
                eprintln!("warning: no report.html: {e}");
            }
            print_tables(&result);
            println!("\nresults: {}", folder.path.display());
            Ok(exit_code(0))
        }
        Command::Faults(FaultsCommand::Play {
            run: args,
            attach,
            allow_remote,
            start_at,
        }) => {
            let scenario = args.scenario(&project)?;
            let deployment = Deployment::read(&attach, allow_remote)?;
            let interrupt = CancellationToken::new();
            tokio::spawn(watch_signals(interrupt.clone()));
            let options = RunOptions {
                results_root: results_root.clone(),
                root: root.clone(),
                scenario,
                duration_scale: args.duration_scale,
                targets: None,
                out: args.out,
                build: false,
                attach: Some(deployment),
                infra: Infra::Local,
                worker: Some(Worker {
                    share: Share { index: 0, count: 0 },
                    start_at_ms: millis_since_epoch(start_at),
                    drives_faults: true,
                }),
            };
            let outcome = match run(options, interrupt, &Say::new()).await {
                Ok(outcome) => outcome,
                Err(e @ RunError::InterruptedBeforeLoad(_)) => {
                    eprintln!("{e}");
                    return Ok(exit_code(130));
                }
                Err(e) => return Err(anyhow::Error::new(e).context("playing the faults failed")),
            };
            println!("\nresults: {}", outcome.folder.path.display());
            Ok(exit_code(if outcome.result.partial { 130 } else { 0 }))
        }
        Command::Gate(args) => {
            let gates = match &args.gates {
                Some(path) => Some(gate::gates_from_file(path)?),
                None => None,
            };
            gate(&args.results, gates, args.allow_partial)
        }
        Command::Run(args) => {
            let scenario = args.run.scenario(&project)?;
            if args.repeat == 0 {
                anyhow::bail!("--repeat must be at least 1");
            }
            if args.batch == Some(0) {
                anyhow::bail!("--batch must be at least 1");
            }
            // Before anything else is read: a binary that cannot start the asked backend.
            args.infra.check_built()?;
            if args.attach.is_some() && args.infra != Infra::Local {
                anyhow::bail!(RunError::InfraWithAttach);
            }
            let attach = match &args.attach {
                Some(path) => {
                    if args.batch.is_some() || args.targets.is_some() {
                        anyhow::bail!(
                            "--attach names the targets in its file: it cannot be combined with \
                             --batch or --targets"
                        );
                    }
                    Some(Deployment::read(path, args.allow_remote)?)
                }
                None if args.allow_remote => {
                    anyhow::bail!("--allow-remote only applies with --attach")
                }
                None => None,
            };
            let worker = worker_of(&args)?;
            if args.batch.is_some() && args.repeat > 1 {
                anyhow::bail!(
                    "--batch and --repeat cannot be combined yet: run the batches once per repeat"
                );
            }
            let interrupt = CancellationToken::new();
            tokio::spawn(watch_signals(interrupt.clone()));
            let say = Say::new();
            // Repeats go to run-1/, run-2/, … of one folder, which `compare` reads as one set.
            let repeat_folder = (args.repeat > 1).then(|| {
                args.run.out.clone().unwrap_or_else(|| {
                    results_root
                        .join(&scenario.name)
                        .join(timestamp(std::time::SystemTime::now()))
                })
            });
            let mut last = None;
            for k in 1..=args.repeat {
                if args.repeat > 1 {
                    say.line(&format!("repeat {k} of {}", args.repeat));
                }
                let options = RunOptions {
                    results_root: results_root.clone(),
                    root: root.clone(),
                    scenario: scenario.clone(),
                    duration_scale: args.run.duration_scale,
                    targets: args.targets.clone(),
                    out: match &repeat_folder {
                        Some(folder) => Some(folder.join(format!("run-{k}"))),
                        None => args.run.out.clone(),
                    },
                    // Building once is enough.
                    build: !args.no_build && k == 1,
                    attach: attach.clone(),
                    infra: args.infra,
                    worker,
                };
                let outcome = match args.batch {
                    Some(size) => run_in_batches(options, size, interrupt.clone(), &say).await,
                    None => run(options, interrupt.clone(), &say).await,
                };
                let outcome = match outcome {
                    Ok(outcome) => outcome,
                    Err(e @ RunError::InterruptedBeforeLoad(_)) => {
                        eprintln!("{e}");
                        return Ok(exit_code(130));
                    }
                    Err(e) => return Err(anyhow::Error::new(e).context("the run failed")),
                };
                let partial = outcome.result.partial;
                last = Some(outcome);
                if partial {
                    break;
                }
            }
            let Some(outcome) = last else {
                anyhow::bail!("no run took place");
            };
            if let Some(folder) = &repeat_folder
                && args.run.out.is_none()
            {
                let latest = results_root.join("latest");
                let _ = std::fs::remove_file(&latest);
                let relative = folder.strip_prefix(&results_root).unwrap_or(folder);
                std::os::unix::fs::symlink(relative, &latest)?;
            }
            let r = &outcome.result;
            print_tables(r);
            match &repeat_folder {
                Some(folder) => println!(
                    "\nresults ({} repeats; the table is the last): {}",
                    args.repeat,
                    folder.display()
                ),
                None => println!("\nresults: {}", outcome.folder.path.display()),
            }
            if r.partial {
                return Ok(exit_code(130));
            }
            if args.gate {
                return gate(&outcome.folder.path, None, false);
            }
            Ok(exit_code(0))
        }
    }
}

/// The terminal's account of a run: its tables and notes.
fn print_tables(r: &RunResult) {
    println!("\n{} — {}", r.scenario, r.description);
    println!("{}", report::summary_table(r));
    println!("\n{}", report::admitted_table(r));
    if report::clients_acted(r) {
        println!("\n{}", report::amplification_table(r));
    }
    for note in &r.notes {
        println!("note: {note}");
    }
}

/// `--worker`, `--start-at`, `--no-faults` checked against the rest of `run`'s flags.
fn worker_of(args: &RunArgs) -> anyhow::Result<Option<Worker>> {
    let w = &args.workers;
    let Some(share) = w.worker else {
        if w.start_at.is_some() || w.no_faults {
            anyhow::bail!("--start-at and --no-faults only apply with --worker K/N");
        }
        return Ok(None);
    };
    if args.attach.is_none() {
        anyhow::bail!(
            "--worker needs --attach: workers share one deployment; each starting its own Redis \
             and limiter would measure N small runs, not one"
        );
    }
    if args.repeat > 1 {
        anyhow::bail!("--worker and --repeat cannot be combined: repeat the whole set of workers");
    }
    let Some(start_at) = w.start_at else {
        anyhow::bail!("--worker needs --start-at TIME, the same for every worker");
    };
    Ok(Some(Worker {
        share,
        start_at_ms: millis_since_epoch(start_at),
        drives_faults: share.index == 1 && !w.no_faults,
    }))
}

fn millis_since_epoch(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// SIGINT, SIGTERM (a cancelled CI job) and SIGHUP (a closed terminal) all stop the run
/// cleanly: load stopped, faults removed, children stopped, results written. A second signal
/// means "now": exit at once, without that cleanup.
async fn watch_signals(interrupt: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        let _ = tokio::signal::ctrl_c().await;
        interrupt.cancel();
        return;
    };
    let mut first = true;
    loop {
        let name = tokio::select! {
            _ = tokio::signal::ctrl_c() => "interrupted",
            _ = term.recv() => "terminated",
            _ = hup.recv() => "hung up",
        };
        if first {
            eprintln!(
                "\n{name}: stopping the load, removing faults, stopping every child, writing what was measured (again to quit at once)"
            );
            interrupt.cancel();
            first = false;
        } else {
            eprintln!(
                "{name} again: quitting at once; children may be left running (see the run's logs/)"
            );
            std::process::exit(130);
        }
    }
}

/// Checks a results folder, prints the table, writes JUnit XML and a Markdown summary beside
/// the results (and appends the summary to `$GITHUB_STEP_SUMMARY` when CI sets it).
fn gate(
    folder: &std::path::Path,
    gates: Option<Vec<gate::Gate>>,
    allow_partial: bool,
) -> anyhow::Result<ExitCode> {
    let (run, checks) = gate::gate_folder(folder, gates, allow_partial)?;
    println!("\ngates of {}:", run.scenario);
    println!("{}", gate::table(&checks));
    let markdown = gate::markdown(&run.scenario, &checks);
    let write = |name: &str, text: &str| -> anyhow::Result<()> {
        let path = folder.join(name);
        std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
    };
    write("gate-junit.xml", &gate::junit_xml(&run.scenario, &checks))?;
    write("gate-summary.md", &markdown)?;
    append_step_summary(&markdown)?;
    let failed = checks.iter().filter(|c| !c.passed).count();
    if failed == 0 {
        println!("all {} checks pass", checks.len());
    } else {
        println!("{failed} of {} checks fail", checks.len());
    }
    let untrusted = run.untrusted();
    if !untrusted.is_empty() {
        for why in &untrusted {
            println!("untrusted: {why}");
        }
        println!("the measurement cannot be trusted: no verdict (exit 3)");
        return Ok(exit_code(3));
    }
    Ok(exit_code(u8::from(failed > 0)))
}

/// Appends Markdown to the CI job's page when `$GITHUB_STEP_SUMMARY` names one.
fn append_step_summary(markdown: &str) -> anyhow::Result<()> {
    if let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY") {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&summary)
            .map_err(|e| anyhow::anyhow!("cannot append to $GITHUB_STEP_SUMMARY: {e}"))?;
        writeln!(file, "{markdown}")?;
    }
    Ok(())
}
