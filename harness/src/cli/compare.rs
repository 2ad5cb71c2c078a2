//! `failmode compare BASELINE [CANDIDATE]`: the thresholds as flags, the comparison printed,
//! written as Markdown or as a page with plots when asked, and its verdict as the exit code.

use std::path::PathBuf;

use super::gate::append_step_summary;
use crate::compare::{
    CompareOptions, TargetPick, compare_targets, load_set, render_html, render_markdown,
    render_table,
};
use crate::results::atomic;

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
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
    /// Also write the comparison here as a self-contained HTML page: per target and phase, a
    /// plot of both sides' p99 per second, with that phase's rows under it.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

pub(super) fn compare(args: CompareArgs) -> anyhow::Result<u8> {
    let options = CompareOptions {
        rel_threshold: args.threshold / 100.0,
        abs_floor_ms: args.floor_ms,
        confidence: args.confidence / 100.0,
        resamples: args.resamples,
        status_threshold_pp: args.rate_pp,
        admission_threshold_pp: args.admission_pp,
        ..CompareOptions::default()
    };
    let pick = TargetPick {
        baseline: args.baseline_target,
        candidate: args.candidate_target,
    };
    let baseline = load_set(&args.baseline)?;
    let candidate = match &args.candidate {
        Some(path) => load_set(path)?,
        None => {
            pick.check_for_one_results(&baseline)?;
            baseline.clone()
        }
    };
    let comparison = compare_targets(&baseline, &candidate, &pick, &options)?;
    println!("{}", render_table(&comparison));
    let markdown = render_markdown(&comparison);
    if let Some(path) = &args.markdown {
        atomic::write(path, &markdown)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &args.html {
        let page = render_html(&comparison, &baseline, &candidate)?;
        atomic::write(path, &page)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    append_step_summary(&markdown)?;
    Ok(comparison.exit_code())
}
