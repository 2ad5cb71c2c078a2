//! `failmode baseline save RESULTS`: a results folder kept as the baseline `compare` reads.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use crate::compare::save_baseline;

#[derive(Debug, Subcommand)]
pub enum BaselineCommand {
    /// Store a results folder (one run or --repeat runs) as results/baselines/<scenario>.json.
    Save {
        results: PathBuf,
        /// Where baselines are kept.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

pub(super) fn baseline(command: &BaselineCommand, results_root: &Path) -> anyhow::Result<u8> {
    let BaselineCommand::Save { results, dir } = command;
    let dir = dir
        .clone()
        .unwrap_or_else(|| results_root.join("baselines"));
    let path = save_baseline(results, &dir)?;
    println!("saved {}", path.display());
    Ok(0)
}
