//! `failmode report RESULTS`: (re)draws a results folder's report.html and plots.

use std::path::PathBuf;

use crate::report::html::write_report;

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A results folder.
    results: PathBuf,
}

pub(super) fn report(args: &ReportArgs) -> anyhow::Result<u8> {
    let path = write_report(&args.results)?;
    println!("report: {}", path.display());
    Ok(0)
}
