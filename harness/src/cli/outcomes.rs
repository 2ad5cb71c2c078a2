//! `failmode outcomes RESULTS`: the Markdown account of what each target did under each fault.

use std::path::PathBuf;

use crate::outcomes::{read, render};
use crate::results::atomic;

#[derive(Debug, clap::Args)]
pub struct OutcomesArgs {
    /// A results folder.
    results: PathBuf,
    /// Write the document here instead of to stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The command the document names for regenerating it (default: the two failmode commands).
    #[arg(long)]
    regenerate: Option<String>,
}

pub(super) fn outcomes(args: &OutcomesArgs) -> anyhow::Result<u8> {
    let outcomes = read(&args.results)?;
    let regenerate = args.regenerate.clone().unwrap_or_else(|| {
        format!(
            "failmode run {} && failmode outcomes results/latest{}",
            outcomes.run.scenario,
            args.out
                .as_ref()
                .map(|p| format!(" --out {}", p.display()))
                .unwrap_or_default()
        )
    });
    let markdown = render(&outcomes, &regenerate);
    match &args.out {
        Some(path) => {
            atomic::write(path, &markdown)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            println!("outcomes: {}", path.display());
        }
        None => print!("{markdown}"),
    }
    Ok(0)
}
