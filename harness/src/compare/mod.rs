//! `failmode baseline save` and `failmode compare`: is a candidate worse than a baseline,
//! beyond the noise of the machine it ran on?
//!
//! # What is compared
//!
//! Each side is a [`RunSet`]: one or more runs (repeats) of one scenario, read by [`load_set`]
//! from a results folder (`run.json`, `series.csv`, `seconds.hlog`), a repeat folder (`run-1/`,
//! `run-2/`, …, each a results folder) or a baseline file (`results/baselines/<scenario>.json`,
//! written by [`save_baseline`]: every run's `run.json`, its `series.csv` and each second's
//! latency histogram per target, so it stands alone). One worker's share of a run
//! (`--worker K/N`) is refused: merge the workers first. For every target × phase on both sides
//! there is one [`Row`] per [`Metric`] (recovery only for a phase with faults); a target or a
//! phase on one side only is listed in [`Comparison::one_sided`], never dropped. Runs of
//! different scenarios are an error.
//!
//! Or two targets picked by name, target OLD of the baseline against target NEW of the
//! candidate, the two sides possibly one run: [`compare_targets`] (`select`), for a release
//! gate that runs the previous build and the candidate side by side.
//!
//! # The decision rule
//!
//! **Latency** (p50, p99, p99.9) is judged on the phase's own percentiles: of all the phase's
//! requests, every tenant together. A side's value is the percentile of the phase's seconds
//! added up: each second's latency histogram of all tenants (the `target/all` intervals of
//! `seconds.hlog`, two significant figures), every run's seconds together. A second belongs to
//! the phase it starts in; a second in which nothing was answered has no histogram and is not
//! drawn. The statistic is candidate ÷ baseline, with a percentile bootstrap confidence interval
//! (default 2,000 resamples, 95 %, ChaCha8 with a fixed seed: the same inputs always give the
//! same verdict). A replicate draws as many runs as the side has, with replacement, then within
//! each drawn run as many seconds as it has, with replacement, adds the drawn seconds'
//! histograms and takes the percentile of the sum ([`stats`]). Drawing runs first makes a
//! machine busy for a whole run widen the interval instead of looking like a change; with one
//! run a side the interval only knows the noise between seconds, and the output says so.
//! Drawing whole seconds keeps together what a second's requests share (a pause, a breaker
//! opening), so the interval is as wide as the seconds differ.
//!
//! Why not the median of per-second percentiles, the rule before: it cannot see a tail confined
//! to a minority of seconds. A fault phase of 22 seconds at 5 ms and 8 seconds whose answers
//! take 1.5–2 s has a p99 of about 2 s, yet the median of its per-second p99s is still 5 ms. A
//! slow fallback or a slow recovery has exactly that shape.
//!
//! - **worse**: the whole CI above `1 + rel_threshold` *and* the candidate's percentile more
//!   than `abs_floor_ms` above the baseline's;
//! - **better**: the whole CI below `1 ÷ (1 + rel_threshold)` (the same factor the other way, so
//!   that swapping the sides swaps the verdict) *and* the percentiles `abs_floor_ms` apart;
//! - **same** otherwise, [`Certainty::Inconclusive`] when the CI reaches a region that would have
//!   been a verdict by more than the floor (more repeats would tell).
//!
//! **Shares of the requests offered**, all tenants together: 429 %, 503 %, 5xx %, transport
//! errors % (refused, reset, timed out), and over-admission and wrongful denial. The mean over
//! the runs; worse when the candidate's is higher by more than `status_threshold_pp` (1 point;
//! the first four) or `admission_threshold_pp` (2 points; the last two), better when lower by as
//! much. Higher is worse for all.
//!
//! **Amplification**: client (attempts sent per request offered: retrying clients) and store
//! (Redis commands per request offered). The mean over the runs; worse when the candidate's is
//! at least `amplification_rel` (10 %) *and* `amplification_abs` (0.1) higher, better when it is
//! at most the baseline's ÷ (1 + `amplification_rel`) and 0.1 lower.
//!
//! **Recovery**, for a phase with faults: each run's time to recover by the gate's rule
//! ([`crate::gate::recovery_time`]: from the fault's end until K seconds in a row are back in the
//! steady phase's band), the median over the runs that measured it, "never" counting as
//! unbounded. Worse when the candidate's grows by at least `recovery_threshold_s` (1 s) or turns
//! to never from a recovered baseline; better the other way.
//!
//! **Not measured.** A side may not have measured a value: no request of the cell reached the
//! target, no second of the phase was answered, no Redis command count (a store-less target),
//! too little time after the fault to tell a recovery, or no steady phase to learn its band
//! from. Such a row gets no verdict ("same") and [`Certainty::NotMeasured`], and on a judged
//! metric it fails the comparison: a check on a value that was not measured fails. Measured on
//! neither side, it is [`Certainty::NeitherMeasured`]: nothing to compare, no failure.
//!
//! **Judged** are all rows but the 429 % (more 429s is right when the baseline let traffic
//! through above the limit; over-admission and wrongful denial judge whether refusals went the
//! right way) and, for a target that refuses with 503 (NGINX's default), the 503 %: those are
//! its refusals, and its 5xx % counts the other 5xx only.
//!
//! Exit code ([`Comparison::exit_code`]): 3 when a side's measurement cannot be trusted
//! ([`RunResult::untrusted`]: the load generator dropped requests or fell behind; the reasons
//! are listed with the notes); otherwise 1 when a judged row is worse or not measured on one
//! side, 0 when none is. Input that cannot be compared (unreadable, a worker's share, an old
//! baseline file) is a [`CompareError`], exit 2.

mod error;
mod options;
mod page;
mod render;
mod rows;
mod select;
mod set;
pub mod stats;
mod verdict;

use serde::Serialize;

use crate::limits::TargetLimit;
use crate::results::RunResult;
pub use error::CompareError;
pub use options::CompareOptions;
pub use page::render_html;
pub use render::{render_markdown, render_table};
pub use rows::{Evidence, LatencyCi, Rule, RunRecovery};
pub use select::{TargetPair, TargetPick, compare_targets};
pub use set::{Repeat, RunSet, Seconds, load_set, save_baseline};
pub use verdict::{Certainty, Metric, Verdict};

/// Bumped on any change a reader of a baseline file would notice. 2: each second's latency
/// histogram and the runs' `series.csv` instead of per-second percentiles.
pub const BASELINE_VERSION: u32 = 2;

/// One target × phase × metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub target: String,
    pub phase: String,
    pub metric: Metric,
    /// Latency in µs (the phase's percentile, all runs' seconds added), shares as a share
    /// (1.0 = 100 %) and amplification as a ratio (means over runs), recovery in seconds
    /// (median over runs, +∞ for never); `None` when the side did not measure it.
    pub baseline: Option<f64>,
    pub candidate: Option<f64>,
    pub verdict: Verdict,
    pub certainty: Certainty,
    /// Whether the row counts in the overall verdict and the exit code (see the module header).
    pub judged: bool,
    pub evidence: Evidence,
}

impl Row {
    /// A judged row that a side did not measure: a failed check.
    pub fn fails_unmeasured(&self) -> bool {
        self.judged
            && matches!(
                self.certainty,
                Certainty::NotMeasured | Certainty::NotComparable
            )
    }
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
    /// Set when two targets were picked by name (`--baseline-target`, `--candidate-target`):
    /// the rows are then those two targets', labelled "OLD → NEW".
    pub pair: Option<TargetPair>,
    pub options: CompareOptions,
    pub rows: Vec<Row>,
    pub one_sided: Vec<OneSided>,
    /// What the reader should know to trust the verdicts: one run a side, partial runs, …
    pub notes: Vec<String>,
    /// Why a side's measurement cannot be trusted ("baseline run 2: …"), listed with the notes;
    /// any makes the exit code 3.
    pub untrusted: Vec<String>,
}

impl Comparison {
    /// The overall verdict, on the judged rows: worse if any is worse; better if some is
    /// better and none worse; else same.
    pub fn verdict(&self) -> Verdict {
        let any = |v| self.rows.iter().any(|r| r.judged && r.verdict == v);
        if any(Verdict::Worse) {
            Verdict::Worse
        } else if any(Verdict::Better) {
            Verdict::Better
        } else {
            Verdict::Same
        }
    }

    /// Judged rows that a side did not measure.
    pub fn not_measured(&self) -> usize {
        self.rows.iter().filter(|r| r.fails_unmeasured()).count()
    }

    /// Targets and phases the baseline ran and the candidate did not (a candidate cut short,
    /// a target lost): nothing of them was measured, so they fail like a row not measured.
    pub fn missing_from_candidate(&self) -> usize {
        self.one_sided
            .iter()
            .filter(|o| o.side == Side::Baseline)
            .count()
    }

    /// 3: a side cannot be trusted; 1: a judged row is worse or not measured on one side, or
    /// the candidate lacks what the baseline ran; 0: neither. A verdict, not an error (those
    /// are exit 2).
    pub fn exit_code(&self) -> u8 {
        if !self.untrusted.is_empty() {
            3
        } else if self.verdict() == Verdict::Worse
            || self.not_measured() > 0
            || self.missing_from_candidate() > 0
        {
            1
        } else {
            0
        }
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

/// The limits two compared targets were judged against, when they differ.
fn different_limits(
    baseline: &RunSet,
    b_target: &str,
    candidate: &RunSet,
    c_target: &str,
) -> Option<(TargetLimit, TargetLimit)> {
    let limit_of = |set: &RunSet, target: &str| {
        set.repeats.first().and_then(|r| {
            let t = r.run.targets.iter().find(|t| t.name == target)?;
            Some(r.run.limit_of(t))
        })
    };
    let (b, c) = (
        limit_of(baseline, b_target)?,
        limit_of(candidate, c_target)?,
    );
    ((b.limit, b.window_s) != (c.limit, c.window_s)).then_some((b, c))
}

/// A note when the two compared targets were judged against different limits (their
/// over-admission and wrongful denial rows then get no verdict and fail).
pub(super) fn limit_note(
    baseline: &RunSet,
    b_target: &str,
    candidate: &RunSet,
    c_target: &str,
) -> Option<String> {
    let (b, c) = different_limits(baseline, b_target, candidate, c_target)?;
    let names = if b_target == c_target {
        b_target.to_owned()
    } else {
        format!("{b_target} → {c_target}")
    };
    Some(format!(
        "{names} was judged against {} on the baseline side and {} on the candidate's: its \
         over-admission and wrongful denial answer different rules, so those rows are not \
         comparable and fail",
        b.describe(),
        c.describe()
    ))
}

/// Why each run of either side cannot be trusted, naming the run.
fn untrusted(baseline: &RunSet, candidate: &RunSet) -> Vec<String> {
    let mut why = Vec::new();
    for (name, set) in [("baseline", baseline), ("candidate", candidate)] {
        for (i, r) in set.repeats.iter().enumerate() {
            for reason in r.run.untrusted() {
                why.push(format!("{name} run {}: {reason}", i + 1));
            }
        }
    }
    why
}

/// Refuses invalid options and runs of different scenarios.
fn check_inputs(
    baseline: &RunSet,
    candidate: &RunSet,
    opts: &CompareOptions,
) -> Result<(), CompareError> {
    opts.validate()?;
    if baseline.scenario != candidate.scenario {
        return Err(CompareError::ScenarioMismatch {
            baseline: baseline.scenario.clone(),
            candidate: candidate.scenario.clone(),
        });
    }
    Ok(())
}

/// The rows of target `names.0` of the baseline against target `names.1` of the candidate,
/// phase by phase matched by name, labelled `label`; a phase one side lacks goes to
/// `one_sided`.
fn target_rows(
    (baseline, candidate): (&RunSet, &RunSet),
    (b_target, c_target): (&str, &str),
    label: &str,
    opts: &CompareOptions,
    (rows, one_sided): (&mut Vec<Row>, &mut Vec<OneSided>),
) {
    let b_phases = ordered_union(baseline.phases(b_target));
    let c_phases = ordered_union(candidate.phases(c_target));
    for phase in ordered_union(b_phases.iter().chain(&c_phases).copied()) {
        let (base, cand) = (
            baseline.runs_of(b_target, phase),
            candidate.runs_of(c_target, phase),
        );
        if base.is_empty() || cand.is_empty() {
            one_sided.push(OneSided {
                target: label.to_owned(),
                phase: Some(phase.to_owned()),
                side: if base.is_empty() {
                    Side::Candidate
                } else {
                    Side::Baseline
                },
            });
            continue;
        }
        let limits_differ = different_limits(baseline, b_target, candidate, c_target).is_some();
        for mut row in rows::phase_rows(&base, &cand, opts) {
            row.target = label.to_owned();
            row.phase = phase.to_owned();
            if limits_differ && matches!(row.metric, Metric::OverAdmission | Metric::WrongfulDenial)
            {
                row.verdict = Verdict::Same;
                row.certainty = Certainty::NotComparable;
            }
            rows.push(row);
        }
    }
}

/// Compares the candidate with the baseline by the rule of the module header, every target
/// with the one of the same name. Errs on runs of different scenarios and on invalid options.
/// [`compare_targets`] compares two targets picked by name instead.
pub fn compare(
    baseline: &RunSet,
    candidate: &RunSet,
    opts: &CompareOptions,
) -> Result<Comparison, CompareError> {
    check_inputs(baseline, candidate, opts)?;
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
        target_rows(
            (baseline, candidate),
            (target, target),
            target,
            opts,
            (&mut rows, &mut one_sided),
        );
    }
    Ok(Comparison {
        scenario: baseline.scenario.clone(),
        baseline: baseline.info(),
        candidate: candidate.info(),
        pair: None,
        options: *opts,
        rows,
        one_sided,
        notes: notes(baseline, candidate)
            .into_iter()
            .chain(
                ordered_union(baseline.targets())
                    .into_iter()
                    .filter_map(|t| limit_note(baseline, t, candidate, t)),
            )
            .collect(),
        untrusted: untrusted(baseline, candidate),
    })
}
