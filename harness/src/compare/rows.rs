//! One target × phase's rows, by the rule of the module header, and what each row's verdict
//! rests on. Each side is a list of runs' views of the phase ([`PhaseRun`]), so the rows do not
//! care which target or run a side came from.

use hdrhistogram::Histogram;
use serde::Serialize;

use super::set::PhaseRun;
use super::stats::{self, Bootstrap, RatioCi};
use super::{Certainty, CompareOptions, Metric, Row, Verdict};
use crate::gate;
use crate::gate::recovery::Recovery;

/// How a mean over runs is judged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// Beyond ± this many percentage points.
    Points { pp: f64 },
    /// Up by at least `relative` (0.10 = 10 %) and `absolute`; down by the same factor the
    /// other way and `absolute`.
    Growth { relative: f64, absolute: f64 },
}

/// One run's time to recover, as the gate's rule found it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum RunRecovery {
    Recovered { after_s: f64, relapses: u32 },
    Never,
    NotMeasured { why: String },
}

impl RunRecovery {
    /// Seconds, "never" as +∞; `None` when not measured.
    pub fn seconds(&self) -> Option<f64> {
        match self {
            RunRecovery::Recovered { after_s, .. } => Some(*after_s),
            RunRecovery::Never => Some(f64::INFINITY),
            RunRecovery::NotMeasured { .. } => None,
        }
    }
}

impl From<Result<Recovery, gate::NoBand>> for RunRecovery {
    fn from(r: Result<Recovery, gate::NoBand>) -> Self {
        match r {
            Ok(Recovery::Recovered { after_s, relapses }) => {
                RunRecovery::Recovered { after_s, relapses }
            }
            Ok(Recovery::Never) => RunRecovery::Never,
            Ok(r @ Recovery::NotMeasured { .. }) => RunRecovery::NotMeasured { why: r.to_string() },
            Err(why) => RunRecovery::NotMeasured {
                why: why.to_string(),
            },
        }
    }
}

impl std::fmt::Display for RunRecovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            &RunRecovery::Recovered { after_s, relapses } => {
                Recovery::Recovered { after_s, relapses }.fmt(f)
            }
            RunRecovery::Never => Recovery::Never.fmt(f),
            RunRecovery::NotMeasured { why } => write!(f, "not measured ({why})"),
        }
    }
}

/// What a row's verdict was decided on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    Latency {
        /// `None` when a side has no second with an answer in the phase.
        ci: Option<LatencyCi>,
        /// Seconds with an answer, over all runs.
        baseline_seconds: usize,
        candidate_seconds: usize,
    },
    /// A mean over runs: each run's value (`None`: not measured in that run).
    Runs {
        baseline_runs: Vec<Option<f64>>,
        candidate_runs: Vec<Option<f64>>,
        rule: Rule,
    },
    Recovery {
        baseline_runs: Vec<RunRecovery>,
        candidate_runs: Vec<RunRecovery>,
        threshold_s: f64,
    },
}

/// [`RatioCi`] in a form that serialises.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyCi {
    pub baseline_us: f64,
    pub candidate_us: f64,
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
}

impl From<RatioCi> for LatencyCi {
    fn from(c: RatioCi) -> Self {
        Self {
            baseline_us: c.baseline,
            candidate_us: c.candidate,
            ratio: c.ratio,
            low: c.low,
            high: c.high,
        }
    }
}

/// The phase's rows: latency, the means over runs, and recovery for a phase with faults.
pub(super) fn phase_rows(base: &[PhaseRun], cand: &[PhaseRun], opts: &CompareOptions) -> Vec<Row> {
    let mut rows = latency_rows(base, cand, opts);
    for metric in Metric::ALL {
        if let Some(rule) = metric.rule(opts) {
            rows.push(mean_row(metric, rule, base, cand));
        }
    }
    if base.iter().chain(cand).any(|r| !r.phase.faults.is_empty()) {
        rows.push(recovery_row(base, cand, opts));
    }
    // A target that refuses with 503 answers its 429s so.
    let refuses_with_503 = base
        .iter()
        .chain(cand)
        .any(|r| r.target.refuses_with == 503);
    for row in &mut rows {
        row.judged = match row.metric {
            Metric::Limited => false,
            Metric::Unavailable => !refuses_with_503,
            _ => true,
        };
    }
    rows
}

impl Metric {
    /// How a metric decided on a mean over runs is judged; `None` for latency and recovery.
    fn rule(self, opts: &CompareOptions) -> Option<Rule> {
        match self {
            Metric::Limited | Metric::Unavailable | Metric::Errors5xx | Metric::TransportErrors => {
                Some(Rule::Points {
                    pp: opts.status_threshold_pp,
                })
            }
            Metric::OverAdmission | Metric::WrongfulDenial => Some(Rule::Points {
                pp: opts.admission_threshold_pp,
            }),
            Metric::ClientAmplification | Metric::StoreAmplification => Some(Rule::Growth {
                relative: opts.amplification_rel,
                absolute: opts.amplification_abs,
            }),
            Metric::P50 | Metric::P99 | Metric::P999 | Metric::Recovery => None,
        }
    }

    /// One run's value of a metric with a [`Metric::rule`]: a share (1.0 = 100 %) or a ratio;
    /// `None` when the run did not measure it (and for latency and recovery, which are not
    /// decided on a run's single value).
    fn run_value(self, r: &PhaseRun) -> Option<f64> {
        let all = &r.phase.all;
        let c = &all.counts;
        // A target that refuses with 503: those are its refusals, not errors.
        let refusals = if r.target.refuses_with == 503 {
            c.unavailable
        } else {
            0
        };
        match self {
            Metric::Limited => all.share_of_offered(c.limited),
            Metric::Unavailable => all.share_of_offered(c.unavailable),
            Metric::Errors5xx => all.share_of_offered(c.errors_5xx() - refusals),
            Metric::TransportErrors => all.share_of_offered(c.transport_error),
            Metric::OverAdmission => all.over_admission,
            Metric::WrongfulDenial => all.wrongful_denial,
            Metric::ClientAmplification => r.phase.client_amplification,
            Metric::StoreAmplification => r.phase.store_amplification,
            Metric::P50 | Metric::P99 | Metric::P999 | Metric::Recovery => None,
        }
    }
}

impl Rule {
    fn verdict(self, baseline: f64, candidate: f64) -> Verdict {
        let change = candidate - baseline;
        match self {
            Rule::Points { pp } if change * 100.0 > pp => Verdict::Worse,
            Rule::Points { pp } if -change * 100.0 > pp => Verdict::Better,
            Rule::Growth { relative, absolute }
                if candidate >= baseline * (1.0 + relative) && change >= absolute =>
            {
                Verdict::Worse
            }
            Rule::Growth { relative, absolute }
                if candidate <= baseline / (1.0 + relative) && -change >= absolute =>
            {
                Verdict::Better
            }
            _ => Verdict::Same,
        }
    }
}

/// `judge` on the two sides' values when both measured them; otherwise no verdict, and why.
fn decide(
    values: (Option<f64>, Option<f64>),
    judge: impl FnOnce(f64, f64) -> (Verdict, Certainty),
) -> (Verdict, Certainty) {
    match values {
        (Some(baseline), Some(candidate)) => judge(baseline, candidate),
        (None, None) => (Verdict::Same, Certainty::NeitherMeasured),
        _ => (Verdict::Same, Certainty::NotMeasured),
    }
}

/// A row before [`phase_rows`] names it and says whether it is judged (`judged` is its to set).
fn row(
    metric: Metric,
    (baseline, candidate): (Option<f64>, Option<f64>),
    (verdict, certainty): (Verdict, Certainty),
    evidence: Evidence,
) -> Row {
    Row {
        target: String::new(),
        phase: String::new(),
        metric,
        baseline,
        candidate,
        verdict,
        certainty,
        judged: true,
        evidence,
    }
}

/// Each run's seconds of the phase.
fn seconds<'a>(side: &[PhaseRun<'a>]) -> Vec<Vec<&'a Histogram<u64>>> {
    side.iter().map(PhaseRun::seconds).collect()
}

/// The three latency rows, from one bootstrap of the phase's seconds.
fn latency_rows(base: &[PhaseRun], cand: &[PhaseRun], opts: &CompareOptions) -> Vec<Row> {
    let metrics = Metric::ALL.into_iter().filter(|m| m.is_latency());
    let quantiles: Vec<f64> = metrics.clone().filter_map(Metric::quantile).collect();
    let (b, c) = (seconds(base), seconds(cand));
    let boot = Bootstrap {
        resamples: opts.resamples,
        confidence: opts.confidence,
        seed: opts.seed,
    };
    let cis = stats::ratio_of_percentiles(&b, &c, &quantiles, &boot);
    // Without an interval, each side's own percentiles, where it has seconds.
    let (b_alone, c_alone) = (
        stats::percentiles(&b, &quantiles),
        stats::percentiles(&c, &quantiles),
    );
    let count = |s: &[Vec<&Histogram<u64>>]| s.iter().map(Vec::len).sum();
    metrics
        .enumerate()
        .map(|(k, metric)| {
            let ci = cis.as_ref().map(|cis| cis[k]);
            let values = (
                b_alone.as_ref().map(|v| v[k]),
                c_alone.as_ref().map(|v| v[k]),
            );
            // Both sides measured but no interval: only a baseline percentile of 0 µs.
            let decided = decide(values, |_, _| {
                ci.map_or((Verdict::Same, Certainty::Inconclusive), |ci| {
                    latency_verdict(&ci, opts)
                })
            });
            let evidence = Evidence::Latency {
                ci: ci.map(LatencyCi::from),
                baseline_seconds: count(&b),
                candidate_seconds: count(&c),
            };
            row(metric, values, decided, evidence)
        })
        .collect()
}

/// The rule of the module header, on one interval.
fn latency_verdict(ci: &RatioCi, opts: &CompareOptions) -> (Verdict, Certainty) {
    let up = 1.0 + opts.rel_threshold;
    let down = 1.0 / up;
    let floor_us = opts.abs_floor_ms * 1000.0;
    let base = ci.baseline;
    let diff_us = ci.candidate - base;
    if ci.low > up && diff_us > floor_us {
        return (Verdict::Worse, Certainty::Clear);
    }
    if ci.high < down && -diff_us > floor_us {
        return (Verdict::Better, Certainty::Clear);
    }
    // Could the truth be a verdict? Only if the CI reaches past a threshold by more than the
    // floor, measured on the baseline's percentile.
    let could_be_worse = ci.high > up && (ci.high - 1.0) * base > floor_us;
    let could_be_better = ci.low < down && (1.0 - ci.low) * base > floor_us;
    let certainty = if could_be_worse || could_be_better {
        Certainty::Inconclusive
    } else {
        Certainty::Clear
    };
    (Verdict::Same, certainty)
}

/// The mean over the runs; `None` when any run did not measure it: a repeat that measured
/// nothing must not let the others speak for it.
fn mean(runs: &[Option<f64>]) -> Option<f64> {
    let measured: Vec<f64> = runs.iter().copied().collect::<Option<_>>()?;
    (!measured.is_empty()).then(|| measured.iter().sum::<f64>() / measured.len() as f64)
}

fn mean_row(metric: Metric, rule: Rule, base: &[PhaseRun], cand: &[PhaseRun]) -> Row {
    let runs = |side: &[PhaseRun]| -> Vec<Option<f64>> {
        side.iter().map(|r| metric.run_value(r)).collect()
    };
    let (b, c) = (runs(base), runs(cand));
    let values = (mean(&b), mean(&c));
    let decided = decide(values, |b, c| (rule.verdict(b, c), Certainty::Clear));
    let evidence = Evidence::Runs {
        baseline_runs: b,
        candidate_runs: c,
        rule,
    };
    row(metric, values, decided, evidence)
}

/// Worse when the candidate's recovery is at least `threshold_s` longer, "never" (+∞) from a
/// recovered baseline included (∞ − x is ∞); better the other way; never on both sides
/// (∞ − ∞ is NaN) is the same.
fn recovery_verdict(baseline_s: f64, candidate_s: f64, threshold_s: f64) -> Verdict {
    if candidate_s - baseline_s >= threshold_s {
        Verdict::Worse
    } else if baseline_s - candidate_s >= threshold_s {
        Verdict::Better
    } else {
        Verdict::Same
    }
}

fn recovery_row(base: &[PhaseRun], cand: &[PhaseRun], opts: &CompareOptions) -> Row {
    let runs = |side: &[PhaseRun]| -> Vec<RunRecovery> {
        side.iter()
            .map(|r| {
                let series = &r.repeat.series;
                gate::recovery_time(&r.repeat.run, r.target, r.phase, series).into()
            })
            .collect()
    };
    let (b, c) = (runs(base), runs(cand));
    // Every run must have been judged: one not measured makes the side not measured.
    let median = |runs: &[RunRecovery]| {
        let mut seconds: Vec<f64> = runs
            .iter()
            .map(RunRecovery::seconds)
            .collect::<Option<_>>()?;
        stats::median(&mut seconds)
    };
    let values = (median(&b), median(&c));
    let threshold_s = opts.recovery_threshold_s;
    let decided = decide(values, |b, c| {
        (recovery_verdict(b, c, threshold_s), Certainty::Clear)
    });
    let evidence = Evidence::Recovery {
        baseline_runs: b,
        candidate_runs: c,
        threshold_s,
    };
    row(Metric::Recovery, values, decided, evidence)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use super::*;
    use crate::compare::{Comparison, Repeat, RunSet, compare};
    use crate::results::fixture;

    /// A run of one target with one phase, "fault", in which each tenant is offered `offered`
    /// requests and every one reaching the limiter is admitted; no second's histogram.
    fn run_set(offered: &[u64], store_commands: Option<u64>) -> RunSet {
        let tenants = offered
            .iter()
            .enumerate()
            .map(|(i, &n)| fixture::tenant(&format!("t{i}"), n, n.min(500), 10.0, Some(1_000)))
            .collect();
        let mut phase = fixture::phase("fault", (0.0, 10.0), &["down"], tenants);
        phase.store_commands = store_commands;
        phase.store_amplification =
            store_commands.map(|c| c as f64 / phase.all.counts.offered as f64);
        let run = fixture::run("t", vec![fixture::target("reference", vec![phase])]);
        RunSet {
            scenario: "t".into(),
            source: "fixture".into(),
            repeats: vec![Repeat {
                run,
                series: Vec::new(),
                seconds: BTreeMap::new(),
            }],
        }
    }

    fn row(c: &Comparison, metric: Metric) -> &Row {
        c.rows.iter().find(|r| r.metric == metric).unwrap()
    }

    #[test]
    fn shares_move_by_points_and_amplification_by_ten_percent_and_a_tenth() {
        let points = Rule::Points { pp: 1.0 };
        assert_eq!(points.verdict(0.0, 0.02), Verdict::Worse);
        assert_eq!(points.verdict(0.02, 0.0), Verdict::Better);
        assert_eq!(points.verdict(0.0, 0.005), Verdict::Same);
        let growth = Rule::Growth {
            relative: 0.1,
            absolute: 0.1,
        };
        assert_eq!(growth.verdict(1.0, 1.1), Verdict::Worse);
        assert_eq!(growth.verdict(1.0, 1.05), Verdict::Same, "under 10 %");
        assert_eq!(
            growth.verdict(0.5, 0.56),
            Verdict::Same,
            "12 %, but under 0.1"
        );
        assert_eq!(growth.verdict(2.0, 1.0), Verdict::Better);
    }

    #[test]
    fn never_recovering_from_a_recovered_baseline_is_worse_and_a_second_longer_too() {
        let never = f64::INFINITY;
        assert_eq!(recovery_verdict(2.0, never, 1.0), Verdict::Worse);
        assert_eq!(recovery_verdict(never, 2.0, 1.0), Verdict::Better);
        assert_eq!(recovery_verdict(never, never, 1.0), Verdict::Same);
        assert_eq!(recovery_verdict(2.0, 3.0, 1.0), Verdict::Worse);
        assert_eq!(recovery_verdict(2.0, 2.9, 1.0), Verdict::Same);
        assert_eq!(recovery_verdict(3.0, 2.0, 1.0), Verdict::Better);
    }

    #[test]
    fn a_value_one_side_did_not_measure_has_no_verdict_and_fails_the_comparison() {
        let opts = CompareOptions::default();
        let measured = run_set(&[1_200, 200], Some(1_400));
        // Nothing reached the target in the candidate's phase: no share, no over-admission.
        let silent = run_set(&[0, 0], Some(0));
        let c = compare(&measured, &silent, &opts).unwrap();
        let errors = row(&c, Metric::Errors5xx);
        assert_eq!((errors.baseline, errors.candidate), (Some(0.0), None));
        assert_eq!(
            (errors.verdict, errors.certainty),
            (Verdict::Same, Certainty::NotMeasured)
        );
        assert!(errors.fails_unmeasured());
        // 429 % is shown, not judged: not measured there fails nothing by itself.
        assert!(!row(&c, Metric::Limited).fails_unmeasured());
        assert_eq!(c.exit_code(), 1);

        // The same runs on both sides: every row the same, those measured on neither side
        // (latency without seconds, recovery without a steady phase) fail nothing.
        let c = compare(&measured, &measured, &opts).unwrap();
        assert_eq!(c.exit_code(), 0, "{:?}", c.rows);
        let p99 = row(&c, Metric::P99);
        assert_eq!(p99.certainty, Certainty::NeitherMeasured);
        assert_eq!(
            row(&c, Metric::Recovery).certainty,
            Certainty::NeitherMeasured
        );
        assert_eq!(row(&c, Metric::Errors5xx).certainty, Certainty::Clear);

        // A store-less target (no Redis command count) on both sides: nothing to compare.
        let storeless = run_set(&[1_200, 200], None);
        let c = compare(&storeless, &storeless, &opts).unwrap();
        let store = row(&c, Metric::StoreAmplification);
        assert_eq!(store.certainty, Certainty::NeitherMeasured);
        assert_eq!(c.exit_code(), 0);
    }

    #[test]
    fn a_target_refusing_with_503_is_not_judged_on_its_refusals() {
        let opts = CompareOptions::default();
        let base = run_set(&[1_200, 200], Some(1_400));
        let mut cand = base.clone();
        // Twice the baseline's refusals, all of them 503: NGINX's limit_req.
        for target in &mut cand.repeats[0].run.targets {
            target.refuses_with = 503;
            let phase = &mut target.phases[0];
            let counts = &mut phase.all.counts;
            counts.unavailable = counts.admitted / 2;
            counts.admitted -= counts.unavailable;
        }
        let c = compare(&base, &cand, &opts).unwrap();
        let refusals = row(&c, Metric::Unavailable);
        assert_eq!(refusals.verdict, Verdict::Worse);
        assert!(!refusals.judged);
        assert_eq!(row(&c, Metric::Errors5xx).verdict, Verdict::Same);
        // The same 503s from a target that refuses with 429 are errors.
        for target in &mut cand.repeats[0].run.targets {
            target.refuses_with = 429;
        }
        let c = compare(&base, &cand, &opts).unwrap();
        assert!(row(&c, Metric::Unavailable).judged);
        assert_eq!(row(&c, Metric::Errors5xx).verdict, Verdict::Worse);
        assert_eq!(c.exit_code(), 1);
    }

    #[test]
    fn an_untrusted_side_exits_3_with_its_reasons() {
        let opts = CompareOptions::default();
        let base = run_set(&[1_200, 200], Some(1_400));
        let mut cand = base.clone();
        cand.repeats[0].run.load.dropped = 100;
        let c = compare(&base, &cand, &opts).unwrap();
        assert_eq!(c.exit_code(), 3);
        assert_eq!(c.untrusted.len(), 1, "{:?}", c.untrusted);
        assert!(
            c.untrusted[0].starts_with("candidate run 1: the load generator dropped 100"),
            "{:?}",
            c.untrusted
        );
    }
}
