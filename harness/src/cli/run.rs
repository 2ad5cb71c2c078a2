//! `failmode run`: its flags checked against each other, the run (or its repeats) started, its
//! tables printed and, with `--gate`, its gates checked. Also the scenario flags `faults play`
//! shares and the terminal tables `merge` prints.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use super::gate::gate_and_write;
use super::signals::watch_signals;
use crate::deployment::Deployment;
use crate::infra::Infra;
use crate::load::{Role, Share};
use crate::project::Project;
use crate::report;
use crate::results::{RunResult, Worker};
use crate::run::live_metrics::LiveMetricsOptions;
use crate::run::progress::Say;
use crate::run::repeat::run_repeated;
use crate::run::{RunError, RunOptions, Topology, parse_start_at};
use crate::scenario::Scenario;

/// The scenario as a run plays it: which, its seed, its time scale, where its results go.
#[derive(Debug, clap::Args)]
pub struct ScenarioArgs {
    /// A scenario name (`failmode list`: the project's, the checkout's or a built-in one, e.g.
    /// slow-redis) or a path to a TOML file. Left out: the project's own scenario, when it
    /// has exactly one (as `failmode init` writes).
    scenario: Option<String>,
    /// Seed for arrival schedules and Toxiproxy's randomness (default: the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Multiply every time on the timeline by this (0.1 turns a 55 s run into 5.5 s).
    #[arg(long, default_value_t = 1.0)]
    pub(super) duration_scale: f64,
    /// Write the results here instead of results/<scenario>/<timestamp>/.
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
}

impl ScenarioArgs {
    /// The scenario found, seeded and scaled as asked.
    pub(super) fn scenario(&self, project: &Project) -> anyhow::Result<Scenario> {
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

/// How several processes share one run: `--worker K/N --start-at TIME`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
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

#[derive(Debug, clap::Args)]
pub struct RunArgs {
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
    /// Serve the run's metrics as Prometheus text at http://ADDR/metrics while it goes (until
    /// its results are written): a port, on 127.0.0.1, or HOST:PORT.
    #[arg(long, value_name = "[HOST:]PORT", value_parser = parse_listen)]
    metrics_listen: Option<SocketAddr>,
    /// With --metrics-listen: keep serving this long after the results are written, for a
    /// scraper's last look at the final counts (e.g. "15s").
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse)]
    metrics_linger: Option<Duration>,
}

/// `--metrics-listen`: a bare port listens on loopback; `HOST:PORT` where it says (a name is
/// resolved, its first address taken).
fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    use std::net::ToSocketAddrs;
    text.to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| {
            format!("{text:?} is neither a port nor HOST:PORT (e.g. 9464 or localhost:9464)")
        })
}

impl RunArgs {
    fn live_metrics(&self) -> anyhow::Result<Option<LiveMetricsOptions>> {
        if self.metrics_listen.is_some() && (self.batch.is_some() || self.repeat > 1) {
            // Each batch and repeat is a run of its own, whose counters would start again at
            // zero under the same names: a dashboard would show nonsense.
            anyhow::bail!(
                "--metrics-listen cannot be combined with --batch or --repeat yet: each batch \
                 or repeat is a run of its own, and its counters would start again from zero"
            );
        }
        match (self.metrics_listen, self.metrics_linger) {
            (None, Some(_)) => anyhow::bail!("--metrics-linger only applies with --metrics-listen"),
            (None, None) => Ok(None),
            (Some(listen), linger) => Ok(Some(LiveMetricsOptions {
                listen,
                linger: linger.unwrap_or_default(),
            })),
        }
    }
}

pub(super) async fn run(args: RunArgs, project: &Project) -> anyhow::Result<u8> {
    let scenario = args.run.scenario(project)?;
    let Some(repeat) = NonZeroU32::new(args.repeat) else {
        anyhow::bail!("--repeat must be at least 1");
    };
    if args.batch == Some(0) {
        anyhow::bail!("--batch must be at least 1");
    }
    let topology = topology_of(&args)?;
    let worker = worker_of(&args)?;
    if args.batch.is_some() && args.repeat > 1 {
        anyhow::bail!(
            "--batch and --repeat cannot be combined yet: run the batches once per repeat"
        );
    }
    let live_metrics = args.live_metrics()?;
    let (options, interrupt) = run_options(project, scenario, args.run, topology, worker);
    let options = RunOptions {
        targets: args.targets,
        build: !args.no_build,
        live_metrics,
        ..options
    };
    let repeated = match run_repeated(options, repeat, args.batch, interrupt, &Say::new()).await {
        Ok(repeated) => repeated,
        Err(e) => return ended(e, "the run failed"),
    };
    let outcome = &repeated.last;
    print_tables(&outcome.result);
    match &repeated.folder {
        Some(folder) => println!(
            "\nresults ({} repeats; the table is the last): {}",
            args.repeat,
            folder.display()
        ),
        None => println!("\nresults: {}", outcome.folder.path.display()),
    }
    if let Some(reason) = &outcome.result.aborted {
        eprintln!("aborted by the abort guard: {reason} (exit 4)");
        return Ok(4);
    }
    if outcome.result.partial {
        return Ok(130);
    }
    if args.gate {
        return gate_and_write(&outcome.folder.path, None, false);
    }
    Ok(0)
}

/// The options of a run of `scenario` in `project` as `args` ask, on `topology` (neither
/// other targets nor a build: `run` sets its own), and the token that a signal, watched from
/// now on, cancels.
pub(super) fn run_options(
    project: &Project,
    scenario: Scenario,
    args: ScenarioArgs,
    topology: Topology,
    worker: Option<Worker>,
) -> (RunOptions, CancellationToken) {
    let interrupt = CancellationToken::new();
    tokio::spawn(watch_signals(interrupt.clone()));
    let options = RunOptions {
        results_root: project.results_dir(),
        root: project.root().to_owned(),
        scenario,
        duration_scale: args.duration_scale,
        targets: None,
        out: args.out,
        build: false,
        topology,
        worker,
        live_metrics: None,
    };
    (options, interrupt)
}

/// A run's error as the command ends on it: interrupted before any load, exit 130 with what
/// was stopped said plainly; anything else an error under `context`.
pub(super) fn ended(e: RunError, context: &'static str) -> anyhow::Result<u8> {
    match e {
        RunError::InterruptedBeforeLoad(_) => {
            eprintln!("{e}");
            Ok(130)
        }
        e => Err(anyhow::Error::new(e).context(context)),
    }
}

/// The terminal's account of a run: its tables and notes.
pub(super) fn print_tables(r: &RunResult) {
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

/// `--attach` and `--infra` as the one topology they name, refused here when they name two:
/// `--attach` is also checked against the flags that name targets themselves.
fn topology_of(args: &RunArgs) -> anyhow::Result<Topology> {
    let Some(path) = &args.attach else {
        if args.allow_remote {
            anyhow::bail!("--allow-remote only applies with --attach");
        }
        // Before the run reads anything: a binary that cannot start the asked backend.
        args.infra.check_built()?;
        return Ok(args.infra.into());
    };
    if args.infra != Infra::Local {
        anyhow::bail!(
            "--attach and --infra {} cannot be combined: --attach starts nothing, --infra \
             says what to start Redis and Toxiproxy as",
            args.infra
        );
    }
    if args.batch.is_some() || args.targets.is_some() {
        anyhow::bail!(
            "--attach names the targets in its file: it cannot be combined with --batch or \
             --targets"
        );
    }
    Ok(Topology::Attached(Deployment::read(
        path,
        args.allow_remote,
    )?))
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
        role: Role::Sender(share),
        start_at_ms: millis_since_epoch(start_at),
        drives_faults: share.index() == 1 && !w.no_faults,
    }))
}

pub(super) fn millis_since_epoch(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
