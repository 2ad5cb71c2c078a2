//! `failmode baseline save` and `failmode compare`: is a candidate worse than a baseline,
//! beyond the noise of the machine it ran on?
//!
//! # What is compared
//!
//! Each side is a [`RunSet`]: one or more runs (repeats) of one scenario, read by [`load_set`]
//! from a results folder (`run.json` + `series.csv`), a repeat folder (`run-1/`, `run-2/`, …,
//! each a results folder) or a baseline file (`results/baselines/<scenario>.json`, written by
//! [`save_baseline`]: every run's `run.json` and its per-second latency samples, so it stands
//! alone). For every target × phase on both sides there is one [`Row`] per [`Metric`]; a target
//! or a phase on one side only is listed in [`Comparison::one_sided`], never dropped. Runs of
//! different scenarios are an error.
//!
//! # The decision rule
//!
//! **Latency** (p50, p99, p99.9). The values shown are the phase's percentiles from `run.json`
//! (all tenants, median over the runs). The verdict rests on the phase's per-second samples of
//! all tenants together (the `all` rows of `series.csv`), pooled over the runs: the per-second
//! p50 for the p50 row, the per-second p99 for p99, and the per-second maximum for p99.9 (the
//! series keeps no per-second p99.9; a second's worst request is the nearest tail it has).
//! Seconds in which nothing was answered have no latency and are left out.
//!
//! The statistic is candidate median ÷ baseline median of those samples, with a percentile
//! bootstrap confidence interval (default 2,000 resamples, 95 %, ChaCha8 with a fixed seed: the
//! same inputs always give the same verdict). The median, because a few bad seconds (a pause,
//! a neighbour busy on a shared machine) move it little, and its bootstrap behaves at the 10 to
//! 100 seconds a phase has, where a bootstrap of a high quantile of so few values would only
//! reshuffle the top two or three. A ratio, because latency noise grows with latency and the
//! threshold is relative. Resampling is two-stage, runs with replacement and then seconds within
//! each drawn run ([`stats`]), so that with repeats the interval also carries run-to-run noise
//! (a machine busy for a whole run); with one run a side it only knows second-to-second noise,
//! and the output says so.
//!
//! - **worse**: the whole CI above `1 + rel_threshold` *and* the candidate's median more than
//!   `abs_floor_ms` above the baseline's;
//! - **better**: the whole CI below `1 ÷ (1 + rel_threshold)` (the same factor the other way, so
//!   that swapping the sides swaps the verdict) *and* the medians `abs_floor_ms` apart;
//! - **same** otherwise, [`Certainty::Inconclusive`] when the CI reaches a region that would have
//!   been a verdict (more repeats would tell), [`Certainty::NoSamples`] when a side has no
//!   per-second samples of the phase.
//!
//! **Rates** (429 %, 5xx % of the requests offered, over-admission, wrongful denial, each of all
//! tenants together): the mean over the runs, worse when the candidate's is higher by more than
//! `status_threshold_pp` (429, 5xx) or `admission_threshold_pp` (over-admission, wrongful
//! denial) percentage points, better when lower by as much. Higher is worse for all four.
//!
//! Exit code: 0 when no row is worse, 1 when one is ([`Comparison::exit_code`]).

mod render;
mod set;
pub mod stats;

use std::path::PathBuf;

use serde::Serialize;

use crate::results::read::ReadError;
use crate::results::{PhaseResult, RunResult};
pub use render::{render_markdown, render_table};
pub use set::{PhaseSeconds, Repeat, RunSet, load_set, save_baseline};
use stats::{Bootstrap, RatioCi};

/// Bumped on any change a reader of a baseline file would notice.
pub const BASELINE_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(
        "{path} is neither a results folder (run.json), a repeat folder (run-1/, run-2/, …) nor a baseline file"
    )]
    NotResults { path: PathBuf },
    #[error("{path} is not a failmode baseline file: {message}")]
    Baseline { path: PathBuf, message: String },
    #[error("{path} has baseline version {found}; this failmode reads version {BASELINE_VERSION}")]
    BaselineVersion { path: PathBuf, found: u64 },
    #[error("{path} holds runs of different scenarios: {first} and {other}")]
    MixedScenarios {
        path: PathBuf,
        first: String,
        other: String,
    },
    #[error(
        "cannot compare runs of different scenarios: the baseline ran {baseline}, the candidate {candidate}"
    )]
    ScenarioMismatch { baseline: String, candidate: String },
    #[error("scenario name {0:?} cannot name a baseline file")]
    BadScenarioName(String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid compare option: {0}")]
    Options(String),
}

/// Thresholds and the bootstrap's settings; [`Default`] gives the documented defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CompareOptions {
    /// Latency: the relative change the whole CI must clear (0.10 = 10 %).
    pub rel_threshold: f64,
    /// Latency: the change in ms the medians must also differ by.
    pub abs_floor_ms: f64,
    /// Latency: the CI's level (0.95 = 95 %).
    pub confidence: f64,
    pub resamples: usize,
    pub seed: u64,
    /// 429 % and 5xx %: percentage points.
    pub status_threshold_pp: f64,
    /// Over-admission and wrongful denial: percentage points.
    pub admission_threshold_pp: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            rel_threshold: 0.10,
            abs_floor_ms: 1.0,
            confidence: 0.95,
            resamples: 2_000,
            seed: 0xfa11_c0de,
            status_threshold_pp: 1.0,
            admission_threshold_pp: 2.0,
        }
    }
}

impl CompareOptions {
    pub fn validate(&self) -> Result<(), CompareError> {
        let bad = |what: &str| Err(CompareError::Options(what.to_owned()));
        let non_negative = |v: f64| v.is_finite() && v >= 0.0;
        if !non_negative(self.rel_threshold) {
            return bad("the relative threshold must be 0 or more");
        }
        if !non_negative(self.abs_floor_ms) {
            return bad("the absolute floor must be 0 ms or more");
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return bad("the confidence level must be between 0 and 1 (0.95 = 95 %)");
        }
        if self.resamples < 100 {
            return bad("at least 100 bootstrap resamples are needed");
        }
        if !non_negative(self.status_threshold_pp) || !non_negative(self.admission_threshold_pp) {
            return bad("rate thresholds must be 0 pp or more");
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    P50,
    P99,
    P999,
    Limited,
    Errors5xx,
    OverAdmission,
    WrongfulDenial,
}

impl Metric {
    pub const ALL: [Metric; 7] = [
        Metric::P50,
        Metric::P99,
        Metric::P999,
        Metric::Limited,
        Metric::Errors5xx,
        Metric::OverAdmission,
        Metric::WrongfulDenial,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Metric::P50 => "p50",
            Metric::P99 => "p99",
            Metric::P999 => "p99.9",
            Metric::Limited => "429 %",
            Metric::Errors5xx => "5xx %",
            Metric::OverAdmission => "over-admission",
            Metric::WrongfulDenial => "wrongful denial",
        }
    }

    pub fn is_latency(self) -> bool {
        matches!(self, Metric::P50 | Metric::P99 | Metric::P999)
    }

    /// The per-second samples a latency verdict rests on, and their name.
    fn samples(self, s: &PhaseSeconds) -> &[u64] {
        match self {
            Metric::P50 => &s.p50_us,
            Metric::P99 => &s.p99_us,
            _ => &s.max_us,
        }
    }

    fn sample_name(self) -> &'static str {
        match self {
            Metric::P50 => "per-second p50",
            Metric::P99 => "per-second p99",
            _ => "per-second max",
        }
    }

    /// One run's value: latency in µs, rates as a share (1.0 = 100 %).
    fn value(self, p: &PhaseResult) -> f64 {
        let a = &p.all;
        let share = |part: u64| {
            if a.counts.offered == 0 {
                0.0
            } else {
                part as f64 / a.counts.offered as f64
            }
        };
        match self {
            Metric::P50 => a.latency_us.map_or(0.0, |p| p.p50 as f64),
            Metric::P99 => a.latency_us.map_or(0.0, |p| p.p99 as f64),
            Metric::P999 => a.latency_us.map_or(0.0, |p| p.p999 as f64),
            Metric::Limited => share(a.counts.limited),
            Metric::Errors5xx => share(a.counts.errors_5xx()),
            Metric::OverAdmission => a.over_admission.unwrap_or(0.0),
            Metric::WrongfulDenial => a.wrongful_denial.unwrap_or(0.0),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Better,
    Same,
    Worse,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Same => "same",
            Verdict::Worse => "worse",
        }
    }
}

/// How sure a row's verdict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Certainty {
    /// A latency CI clear of the thresholds, or a rate (decided on its mean).
    Clear,
    /// "same", but the CI reaches a region that would have been worse or better: the noise
    /// is too wide to tell; more repeats would.
    Inconclusive,
    /// "same" by default: a side has no per-second latency samples of the phase.
    NoSamples,
}

/// What a row's verdict was decided on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    Latency {
        /// `None` when a side has no samples.
        ci: Option<LatencyCi>,
        baseline_seconds: usize,
        candidate_seconds: usize,
    },
    Rate {
        /// Each run's value, as a share.
        baseline_runs: Vec<f64>,
        candidate_runs: Vec<f64>,
        threshold_pp: f64,
    },
}

/// [`RatioCi`] in a form that serialises.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyCi {
    pub baseline_median_us: f64,
    pub candidate_median_us: f64,
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
}

impl From<RatioCi> for LatencyCi {
    fn from(c: RatioCi) -> Self {
        Self {
            baseline_median_us: c.baseline_median,
            candidate_median_us: c.candidate_median,
            ratio: c.ratio,
            low: c.low,
            high: c.high,
        }
    }
}

/// One target × phase × metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub target: String,
    pub phase: String,
    pub metric: Metric,
    /// Latency in µs (median over runs), rates as a share (mean over runs).
    pub baseline: f64,
    pub candidate: f64,
    pub verdict: Verdict,
    pub certainty: Certainty,
    pub evidence: Evidence,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    Baseline,
    Candidate,
}

/// A target (`phase: None`) or a target's phase that only one side ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OneSided {
    pub target: String,
    pub phase: Option<String>,
    pub side: Side,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SideInfo {
    pub source: String,
    pub runs: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub scenario: String,
    pub baseline: SideInfo,
    pub candidate: SideInfo,
    pub options: CompareOptions,
    pub rows: Vec<Row>,
    pub one_sided: Vec<OneSided>,
    /// What the reader should know to trust the verdicts: one run a side, partial runs, …
    pub notes: Vec<String>,
}

impl Comparison {
    /// Worse if any row is worse; better if some row is better and none worse; else same.
    /// The overall verdict. 429 % rows are shown but not judged: more 429s is right when the
    /// baseline let traffic through above the limit, and over-admission and wrongful denial
    /// already judge whether refusals went the right way.
    pub fn verdict(&self) -> Verdict {
        let any = |v| {
            self.rows
                .iter()
                .any(|r| r.verdict == v && r.metric != Metric::Limited)
        };
        if any(Verdict::Worse) {
            Verdict::Worse
        } else if any(Verdict::Better) {
            Verdict::Better
        } else {
            Verdict::Same
        }
    }

    /// 0: no row worse; 1: some row worse. A verdict, not an error (those are exit 2).
    pub fn exit_code(&self) -> u8 {
        u8::from(self.verdict() == Verdict::Worse)
    }
}

/// Names in first-seen order, each once.
fn ordered_union<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

type PhaseRuns<'a> = [(&'a PhaseResult, Option<&'a PhaseSeconds>)];

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

fn latency_row(metric: Metric, base: &PhaseRuns, cand: &PhaseRuns, opts: &CompareOptions) -> Row {
    let summary = |side: &PhaseRuns| {
        let mut v: Vec<f64> = side.iter().map(|(p, _)| metric.value(p)).collect();
        stats::median(&mut v).unwrap_or(0.0)
    };
    let samples = |side: &PhaseRuns| -> Vec<Vec<f64>> {
        side.iter()
            .filter_map(|(_, s)| *s)
            .map(|s| metric.samples(s).iter().map(|&us| us as f64).collect())
            .collect()
    };
    let (b, c) = (samples(base), samples(cand));
    let boot = Bootstrap {
        resamples: opts.resamples,
        confidence: opts.confidence,
        seed: opts.seed,
    };
    let ci = stats::ratio_of_medians(&b, &c, &boot);
    let (verdict, certainty) = match &ci {
        Some(ci) => latency_verdict(ci, opts),
        None => (Verdict::Same, Certainty::NoSamples),
    };
    Row {
        target: String::new(),
        phase: String::new(),
        metric,
        baseline: summary(base),
        candidate: summary(cand),
        verdict,
        certainty,
        evidence: Evidence::Latency {
            ci: ci.map(LatencyCi::from),
            baseline_seconds: b.iter().map(Vec::len).sum(),
            candidate_seconds: c.iter().map(Vec::len).sum(),
        },
    }
}

/// The rule of the module header, on one interval.
fn latency_verdict(ci: &RatioCi, opts: &CompareOptions) -> (Verdict, Certainty) {
    let up = 1.0 + opts.rel_threshold;
    let down = 1.0 / up;
    let floor_us = opts.abs_floor_ms * 1000.0;
    let base = ci.baseline_median;
    let diff_us = ci.candidate_median - base;
    if ci.low > up && diff_us > floor_us {
        return (Verdict::Worse, Certainty::Clear);
    }
    if ci.high < down && -diff_us > floor_us {
        return (Verdict::Better, Certainty::Clear);
    }
    // Could the truth be a verdict? Only if the CI reaches past a threshold by more than the
    // floor, measured on the baseline's median.
    let could_be_worse = ci.high > up && (ci.high - 1.0) * base > floor_us;
    let could_be_better = ci.low < down && (1.0 - ci.low) * base > floor_us;
    let certainty = if could_be_worse || could_be_better {
        Certainty::Inconclusive
    } else {
        Certainty::Clear
    };
    (Verdict::Same, certainty)
}

fn rate_row(metric: Metric, base: &PhaseRuns, cand: &PhaseRuns, opts: &CompareOptions) -> Row {
    let runs =
        |side: &PhaseRuns| -> Vec<f64> { side.iter().map(|(p, _)| metric.value(p)).collect() };
    let (b, c) = (runs(base), runs(cand));
    let threshold_pp = match metric {
        Metric::OverAdmission | Metric::WrongfulDenial => opts.admission_threshold_pp,
        _ => opts.status_threshold_pp,
    };
    let (mb, mc) = (mean(&b), mean(&c));
    let change_pp = (mc - mb) * 100.0;
    let verdict = if change_pp > threshold_pp {
        Verdict::Worse
    } else if -change_pp > threshold_pp {
        Verdict::Better
    } else {
        Verdict::Same
    };
    Row {
        target: String::new(),
        phase: String::new(),
        metric,
        baseline: mb,
        candidate: mc,
        verdict,
        certainty: Certainty::Clear,
        evidence: Evidence::Rate {
            baseline_runs: b,
            candidate_runs: c,
            threshold_pp,
        },
    }
}

/// What the reader should know besides the rows.
fn notes(baseline: &RunSet, candidate: &RunSet) -> Vec<String> {
    let mut notes = Vec::new();
    if baseline.repeats.len() == 1 || candidate.repeats.len() == 1 {
        notes.push(
            "one run on a side: its latency CIs measure the noise between seconds of that run, \
             not between runs (a machine busy for a whole run looks like a change); \
             `failmode run --repeat N` gives verdicts that hold across runs"
                .to_owned(),
        );
    }
    for (name, set) in [("baseline", baseline), ("candidate", candidate)] {
        for (i, r) in set.repeats.iter().enumerate() {
            if r.run.partial {
                notes.push(format!(
                    "{name} run {} was interrupted: its figures cover what ran",
                    i + 1
                ));
            }
        }
    }
    let differs = |key: fn(&RunResult) -> f64| {
        let first = baseline.repeats.first().map(|r| key(&r.run));
        candidate.repeats.iter().any(|r| Some(key(&r.run)) != first)
    };
    if differs(|r| r.duration_scale) {
        notes.push("the sides ran with different --duration-scale: phases differ in length".into());
    }
    if differs(|r| r.limit) || differs(|r| r.window_s) {
        notes.push("the sides ran with different limits: rates compare different rules".into());
    }
    notes
}

/// Compares the candidate with the baseline by the rule of the module header. Errs on runs of
/// different scenarios and on invalid options.
pub fn compare(
    baseline: &RunSet,
    candidate: &RunSet,
    opts: &CompareOptions,
) -> Result<Comparison, CompareError> {
    opts.validate()?;
    if baseline.scenario != candidate.scenario {
        return Err(CompareError::ScenarioMismatch {
            baseline: baseline.scenario.clone(),
            candidate: candidate.scenario.clone(),
        });
    }
    let mut rows = Vec::new();
    let mut one_sided = Vec::new();
    let (b_targets, c_targets): (Vec<&str>, Vec<&str>) = (
        ordered_union(baseline.targets()),
        ordered_union(candidate.targets()),
    );
    for target in ordered_union(b_targets.iter().chain(&c_targets).copied()) {
        let side = match (b_targets.contains(&target), c_targets.contains(&target)) {
            (true, true) => None,
            (true, false) => Some(Side::Baseline),
            _ => Some(Side::Candidate),
        };
        if let Some(side) = side {
            one_sided.push(OneSided {
                target: target.to_owned(),
                phase: None,
                side,
            });
            continue;
        }
        let b_phases = ordered_union(baseline.phases(target));
        let c_phases = ordered_union(candidate.phases(target));
        for phase in ordered_union(b_phases.iter().chain(&c_phases).copied()) {
            let (base, cand) = (
                baseline.runs_of(target, phase),
                candidate.runs_of(target, phase),
            );
            if base.is_empty() || cand.is_empty() {
                one_sided.push(OneSided {
                    target: target.to_owned(),
                    phase: Some(phase.to_owned()),
                    side: if base.is_empty() {
                        Side::Candidate
                    } else {
                        Side::Baseline
                    },
                });
                continue;
            }
            for metric in Metric::ALL {
                let mut row = if metric.is_latency() {
                    latency_row(metric, &base, &cand, opts)
                } else {
                    rate_row(metric, &base, &cand, opts)
                };
                row.target = target.to_owned();
                row.phase = phase.to_owned();
                rows.push(row);
            }
        }
    }
    Ok(Comparison {
        scenario: baseline.scenario.clone(),
        baseline: baseline.info(),
        candidate: candidate.info(),
        options: *opts,
        rows,
        one_sided,
        notes: notes(baseline, candidate),
    })
}
