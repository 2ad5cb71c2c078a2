//! `failmode faults reset|play`: faults on an attached deployment outside a run — removing
//! what a dead run left, or playing the timeline for workers that send only load.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use clap::Subcommand;

use super::run::{ScenarioArgs, ended, millis_since_epoch, run_options};
use crate::deployment::Deployment;
use crate::infra::redis_native::unpause;
use crate::infra::toxiproxy::Toxiproxy;
use crate::load::Role;
use crate::project::Project;
use crate::results::Worker;
use crate::run::progress::Say;
use crate::run::world::undo_on;
use crate::run::{Topology, parse_start_at, run};

#[derive(Debug, Subcommand)]
pub enum FaultsCommand {
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

pub(super) async fn faults(command: FaultsCommand, project: &Project) -> anyhow::Result<u8> {
    match command {
        FaultsCommand::Reset {
            attach,
            allow_remote,
        } => reset(&attach, allow_remote).await,
        FaultsCommand::Play {
            run,
            attach,
            allow_remote,
            start_at,
        } => play(run, &attach, allow_remote, start_at, project).await,
    }
}

async fn reset(attach: &Path, allow_remote: bool) -> anyhow::Result<u8> {
    let deployment = Deployment::read(attach, allow_remote)?;
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
    Ok(0)
}

async fn play(
    args: ScenarioArgs,
    attach: &Path,
    allow_remote: bool,
    start_at: SystemTime,
    project: &Project,
) -> anyhow::Result<u8> {
    let scenario = args.scenario(project)?;
    let deployment = Deployment::read(attach, allow_remote)?;
    let worker = Worker {
        role: Role::FaultPlayer,
        start_at_ms: millis_since_epoch(start_at),
        drives_faults: true,
    };
    let (options, interrupt) = run_options(
        project,
        scenario,
        args,
        Topology::Attached(deployment),
        Some(worker),
    );
    let outcome = match run(options, interrupt, &Say::new()).await {
        Ok(outcome) => outcome,
        Err(e) => return ended(e, "playing the faults failed"),
    };
    println!("\nresults: {}", outcome.folder.path.display());
    Ok(if outcome.result.partial { 130 } else { 0 })
}
