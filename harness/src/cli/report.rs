//! `failmode report RESULTS`: (re)draws a results folder's report.html and plots; for the
//! folder of a run that was killed before it wrote its results, first rebuilds a partial
//! `run.json` from the run's journal.

use std::path::PathBuf;

use crate::report::html::write_report;
use crate::results::journal;

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A results folder (also one whose run was killed: its journal becomes a partial
    /// run.json).
    results: PathBuf,
}

pub(super) fn report(args: &ReportArgs) -> anyhow::Result<u8> {
    if journal::unfinished(&args.results).is_some() {
        let run = journal::rebuild(&args.results)?;
        println!(
            "rebuilt a partial run.json from the journal: {:.1} s of {} ran before the run was \
             killed",
            run.duration_s, run.scenario
        );
    }
    let path = write_report(&args.results)?;
    println!("report: {}", path.display());
    Ok(0)
}
