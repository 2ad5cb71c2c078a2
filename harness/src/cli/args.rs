//! The command line as clap parses it: the global flags and the list of subcommands, each
//! subcommand's own flags living in its module beside what it does.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::baseline::BaselineCommand;
use super::check::CheckArgs;
use super::compare::CompareArgs;
use super::faults::FaultsCommand;
use super::gate::GateArgs;
use super::init::InitArgs;
use super::merge::MergeArgs;
use super::outcomes::OutcomesArgs;
use super::report::ReportArgs;
use super::run::RunArgs;
use super::scenario::ScenarioCommand;
use super::setup::SetupArgs;

/// Chaos and load-test harness for rate limiters: what does your limiter do when Redis is slow
/// or gone?
#[derive(Debug, Parser)]
#[command(name = "failmode", version, after_help = crate::exit::CODES)]
pub struct Cli {
    /// The project to use: the directory holding its failmode/ folder. Default: the nearest
    /// such directory from here upward, else failmode's checkout when run inside it, else here.
    #[arg(long, global = true, value_name = "DIR")]
    pub project: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
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
    Report(ReportArgs),
    /// What each target did under each fault of a run (one Markdown table per fault) and the
    /// scenario's [[claims]] confirmed or refuted; to stdout, or --out FILE.
    Outcomes(OutcomesArgs),
    /// Baselines for `compare`.
    #[command(subcommand)]
    Baseline(BaselineCommand),
    /// Compare a candidate with a baseline, per target × phase, deciding latency on the phase's
    /// percentiles with a bootstrap over its seconds: exit 0 nothing worse, 1 something worse,
    /// not measured or not comparable, 3 a side's measurement cannot be trusted. Or two targets
    /// of one run: `compare RESULTS --baseline-target OLD --candidate-target NEW`.
    Compare(CompareArgs),
    /// Faults on an attached deployment.
    #[command(subcommand)]
    Faults(FaultsCommand),
    /// Merge the results folders of workers that sent one run's load together (`run --worker
    /// K/N`) into one results folder: counts summed, histograms added, series aligned.
    Merge(MergeArgs),
}
