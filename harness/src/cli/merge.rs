//! `failmode merge FOLDER…`: the workers' results folders of one run joined into one.

use std::path::{Path, PathBuf};

use super::run::print_tables;
use crate::report::html::write_report;
use crate::results::merge::merge as merge_folders;

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The workers' results folders (and `faults play`'s, if one played the faults).
    #[arg(required = true)]
    folders: Vec<PathBuf>,
    /// Write the merged results here instead of results/<scenario>/<timestamp>-merged/.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub(super) fn merge(args: &MergeArgs, results_root: &Path) -> anyhow::Result<u8> {
    let (folder, result) = merge_folders(&args.folders, results_root, args.out.as_deref())?;
    // The report is a convenience: the merged results stand without it.
    if let Err(e) = write_report(&folder.path) {
        eprintln!("warning: no report.html: {e}");
    }
    print_tables(&result);
    println!("\nresults: {}", folder.path.display());
    Ok(0)
}
