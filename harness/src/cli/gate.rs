//! `failmode gate RESULTS` (and `run --gate`): a results folder checked against its gates, the
//! verdict printed and written beside the results for CI.

use std::path::{Path, PathBuf};

use crate::gate::{
    Gate, Outcome, Verdict, gate_folder, gate_json, gates_from_file, junit_xml, markdown, table,
};
use crate::results::atomic;

#[derive(Debug, clap::Args)]
pub struct GateArgs {
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

pub(super) fn gate(args: &GateArgs) -> anyhow::Result<u8> {
    let gates = match &args.gates {
        Some(path) => Some(gates_from_file(path)?),
        None => None,
    };
    gate_and_write(&args.results, gates, args.allow_partial)
}

/// Checks a results folder, prints the table, writes JUnit XML, `gate.json` and a Markdown
/// summary beside the results (and appends the summary to `$GITHUB_STEP_SUMMARY` when CI sets it).
pub(super) fn gate_and_write(
    folder: &Path,
    gates: Option<Vec<Gate>>,
    allow_partial: bool,
) -> anyhow::Result<u8> {
    let (run, checks) = gate_folder(folder, gates, allow_partial)?;
    println!("\ngates of {}:", run.scenario);
    println!("{}", table(&checks));
    let markdown = markdown(&run.scenario, &checks);
    let write = |name: &str, text: &str| -> anyhow::Result<()> {
        let path = folder.join(name);
        atomic::write(&path, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
    };
    write("gate-junit.xml", &junit_xml(&run.scenario, &checks))?;
    write("gate.json", &gate_json(&run, &checks)?)?;
    write("gate-summary.md", &markdown)?;
    append_step_summary(&markdown)?;
    let count = |v: Verdict| checks.iter().filter(|c| c.verdict() == v).count();
    let (failed, warned) = (count(Verdict::Fail), count(Verdict::Warn));
    if failed + warned == 0 {
        println!("all {} checks pass", checks.len());
    } else if failed == 0 {
        println!("{} of {} checks pass", checks.len() - warned, checks.len());
    } else {
        println!("{failed} of {} checks fail", checks.len());
    }
    if warned > 0 {
        println!("{warned} warning(s): reported, not failing the job (level = \"warn\")");
    }
    let outcome = Outcome::of(&run, &checks);
    if outcome == Outcome::Untrusted {
        for why in run.untrusted() {
            println!("untrusted: {why}");
        }
        println!("the measurement cannot be trusted: no verdict (exit 3)");
    }
    Ok(outcome.exit_code())
}

/// Appends Markdown to the CI job's page when `$GITHUB_STEP_SUMMARY` names one.
pub(super) fn append_step_summary(markdown: &str) -> anyhow::Result<()> {
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
