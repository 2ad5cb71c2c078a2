//! What a person reads: the comparison as a terminal table and as Markdown for a CI page.

use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::{
    Certainty, CompareOptions, Comparison, Evidence, Metric, Row, Rule, RunRecovery, Side, Verdict,
};

#[derive(Tabled)]
pub(super) struct Cells {
    pub(super) target: String,
    pub(super) phase: String,
    pub(super) metric: &'static str,
    pub(super) baseline: String,
    pub(super) candidate: String,
    pub(super) change: String,
    pub(super) verdict: String,
    #[tabled(rename = "how sure")]
    pub(super) how_sure: String,
}

fn value_text(metric: Metric, v: Option<f64>) -> String {
    let Some(v) = v else {
        return "not measured".to_owned();
    };
    match metric {
        m if m.is_latency() => format!("{:.2} ms", v / 1000.0),
        m if m.is_share() => format!("{:.1} %", v * 100.0),
        Metric::Recovery if v.is_infinite() => "never".to_owned(),
        Metric::Recovery => format!("{v:.1} s"),
        _ => format!("{v:.2}"),
    }
}

/// `x` with `decimals` and a sign, never "-0.0": a change that rounds to nothing has no
/// direction.
fn signed(x: f64, decimals: usize) -> String {
    let scale = 10f64.powi(decimals as i32);
    // Adding 0.0 turns the -0.0 that rounding a small negative gives into 0.0.
    format!("{:+.*}", decimals, (x * scale).round() / scale + 0.0)
}

fn change_text(row: &Row) -> String {
    let (Some(b), Some(c)) = (row.baseline, row.candidate) else {
        return "—".to_owned();
    };
    let relative = |text: String| {
        if b > 0.0 {
            format!("{text} ({} %)", signed((c / b - 1.0) * 100.0, 1))
        } else {
            text
        }
    };
    match row.metric {
        m if m.is_latency() => relative(format!("{} ms", signed((c - b) / 1000.0, 2))),
        m if m.is_share() => format!("{} pp", signed((c - b) * 100.0, 1)),
        Metric::Recovery if b.is_infinite() && c.is_infinite() => "—".to_owned(),
        Metric::Recovery if c.is_infinite() => "recovered → never".to_owned(),
        Metric::Recovery if b.is_infinite() => "never → recovered".to_owned(),
        Metric::Recovery => format!("{} s", signed(c - b, 1)),
        _ => relative(signed(c - b, 2)),
    }
}

/// "12.0–14.1 %", or `None` when every run gave the same value.
fn range_text(metric: Metric, runs: &[f64]) -> Option<String> {
    let lo = runs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = (value_text(metric, Some(lo)), value_text(metric, Some(hi)));
    (lo != hi).then(|| format!("{lo} – {hi}"))
}

fn rule_short(rule: Rule) -> String {
    match rule {
        Rule::Points { pp } => format!("±{pp} pp"),
        Rule::Growth { relative, absolute } => {
            format!("±{:.0} % and ±{absolute}", relative * 100.0)
        }
    }
}

/// Why a row has no verdict, when a side did not measure it.
fn unmeasured_text(row: &Row) -> Option<String> {
    let side = match (row.baseline, row.candidate) {
        (None, Some(_)) => "the baseline",
        (Some(_), None) => "the candidate",
        _ => "either side",
    };
    match row.certainty {
        Certainty::NotMeasured if row.judged => Some(format!(
            "not measured in {side}: fails (a check on a value that was not measured fails)"
        )),
        Certainty::NotMeasured => Some(format!("not measured in {side}")),
        Certainty::NeitherMeasured => Some("measured on neither side: nothing to compare".into()),
        Certainty::NotComparable => {
            Some("judged against different limits on the two sides: not comparable, fails".into())
        }
        _ => None,
    }
}

fn runs_text(metric: Metric, baseline: &[Option<f64>], candidate: &[Option<f64>]) -> String {
    let (nb, nc) = (baseline.len(), candidate.len());
    if nb == 1 && nc == 1 {
        return "one run each".to_owned();
    }
    let mut text = format!("mean of {nb} vs {nc} runs");
    let measured = |runs: &[Option<f64>]| -> Vec<f64> { runs.iter().flatten().copied().collect() };
    let (mb, mc) = (measured(baseline), measured(candidate));
    let (rb, rc) = (range_text(metric, &mb), range_text(metric, &mc));
    if rb.is_some() || rc.is_some() {
        let single = |runs: &[f64]| value_text(metric, runs.first().copied());
        text += &format!(
            " (runs {} vs {})",
            rb.unwrap_or_else(|| single(&mb)),
            rc.unwrap_or_else(|| single(&mc))
        );
    }
    let missing = |runs: &[Option<f64>]| runs.iter().filter(|v| v.is_none()).count();
    let (xb, xc) = (missing(baseline), missing(candidate));
    if xb + xc > 0 {
        text += &format!(", not measured in {xb} vs {xc} runs");
    }
    text
}

fn how_sure_text(row: &Row, opts: &CompareOptions) -> String {
    let detail = match &row.evidence {
        Evidence::Latency {
            ci: Some(ci),
            baseline_seconds,
            candidate_seconds,
        } => {
            let head = format!(
                "{:.0} % CI of the phase's {} ratio {:.2}–{:.2} (×{:.2}; {} vs {} s)",
                opts.confidence * 100.0,
                row.metric.label(),
                ci.low,
                ci.high,
                ci.ratio,
                baseline_seconds,
                candidate_seconds,
            );
            match row.certainty {
                Certainty::Inconclusive => format!("{head}: inconclusive, more repeats would tell"),
                _ => head,
            }
        }
        Evidence::Latency {
            ci: None,
            baseline_seconds,
            candidate_seconds,
        } => format!("no second answered: {baseline_seconds} vs {candidate_seconds} s"),
        Evidence::Runs {
            baseline_runs,
            candidate_runs,
            rule,
        } => format!(
            "{}, {}",
            runs_text(row.metric, baseline_runs, candidate_runs),
            rule_short(*rule)
        ),
        Evidence::Recovery {
            baseline_runs,
            candidate_runs,
            threshold_s,
        } => {
            let list = |runs: &[RunRecovery]| {
                runs.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            format!(
                "runs {} vs {}, ±{threshold_s} s",
                list(baseline_runs),
                list(candidate_runs)
            )
        }
    };
    let detail = match unmeasured_text(row) {
        Some(why) => format!("{why}; {detail}"),
        None => detail,
    };
    if row.judged {
        detail
    } else {
        format!("{detail}; shown, not judged")
    }
}

pub(super) fn cells(c: &Comparison, markdown: bool) -> Vec<Cells> {
    c.rows
        .iter()
        .map(|r| {
            let verdict = match r.certainty {
                Certainty::NotMeasured | Certainty::NeitherMeasured | Certainty::NotComparable => {
                    "no verdict"
                }
                _ => r.verdict.label(),
            };
            Cells {
                target: r.target.clone(),
                phase: r.phase.clone(),
                metric: r.metric.label(),
                baseline: value_text(r.metric, r.baseline),
                candidate: value_text(r.metric, r.candidate),
                change: change_text(r),
                verdict: if markdown && (r.verdict != Verdict::Same || r.fails_unmeasured()) {
                    format!("**{verdict}**")
                } else {
                    verdict.to_owned()
                },
                how_sure: how_sure_text(r, &c.options),
            }
        })
        .collect()
}

/// "worse: 2 of 60 judged rows worse, 1 better, 57 same (3 inconclusive), …".
pub(super) fn summary(c: &Comparison) -> String {
    let judged: Vec<&Row> = c.rows.iter().filter(|r| r.judged).collect();
    let count = |f: &dyn Fn(&Row) -> bool| judged.iter().filter(|r| f(r)).count();
    let measured = |r: &Row| {
        !matches!(
            r.certainty,
            Certainty::NotMeasured | Certainty::NeitherMeasured | Certainty::NotComparable
        )
    };
    let head = if !c.untrusted.is_empty() {
        "untrusted: the measurement cannot be trusted, no verdict (exit 3)"
    } else if c.verdict() != Verdict::Worse && c.not_measured() > 0 {
        "fails"
    } else {
        c.verdict().label()
    };
    let mut s = format!(
        "{head}: {} of {} judged rows worse, {} better, {} same",
        count(&|r| r.verdict == Verdict::Worse),
        judged.len(),
        count(&|r| r.verdict == Verdict::Better),
        count(&|r| r.verdict == Verdict::Same && measured(r)),
    );
    let unsure = count(&|r| r.certainty == Certainty::Inconclusive);
    if unsure > 0 {
        s += &format!(" ({unsure} inconclusive)");
    }
    let not_measured = c.not_measured();
    if not_measured > 0 {
        s += &format!(
            ", {not_measured} not measured on one side (a check on a value that was not \
             measured fails)"
        );
    }
    let neither = count(&|r| r.certainty == Certainty::NeitherMeasured);
    if neither > 0 {
        s += &format!(", {neither} measured on neither side (nothing to compare)");
    }
    s
}

/// The notes, the untrusted runs first: one line each.
pub(super) fn note_lines(c: &Comparison) -> Vec<String> {
    let untrusted = c.untrusted.iter().map(|why| format!("untrusted: {why}"));
    untrusted
        .chain(one_sided_lines(c))
        .chain(c.notes.iter().cloned())
        .collect()
}

fn one_sided_lines(c: &Comparison) -> Vec<String> {
    c.one_sided
        .iter()
        .map(|o| {
            let side = match o.side {
                Side::Baseline => {
                    "only in the baseline: not measured in the candidate, a failed check"
                }
                Side::Candidate => "only in the candidate",
            };
            match &o.phase {
                Some(p) => format!("{} / {p}: {side}", o.target),
                None => format!("{} (every phase): {side}", o.target),
            }
        })
        .collect()
}

pub(super) fn rule_text(o: &CompareOptions) -> String {
    format!(
        "latency: the phase's own p50 / p99 / p99.9 (all requests, all tenants; its seconds' \
         histograms added); worse or better only when the whole {:.0} % bootstrap CI ({} \
         resamples, runs then seconds) of the candidate ÷ baseline ratio is beyond ×{:.2} (or \
         ×{:.2}) and the percentiles differ by more than {} ms. Shares: mean over runs, worse or \
         better beyond ±{} pp (429 %, 503 %, 5xx %, transport errors) or ±{} pp \
         (over-admission, wrongful denial). Amplification: mean over runs, ±{:.0} % and ±{}. \
         Recovery: median over runs, ±{} s, never is worse than any time. 429 % (and 503 % of a \
         target refusing with 503) is shown, not judged; a judged value one side did not \
         measure fails.",
        o.confidence * 100.0,
        o.resamples,
        1.0 + o.rel_threshold,
        1.0 / (1.0 + o.rel_threshold),
        o.abs_floor_ms,
        o.status_threshold_pp,
        o.admission_threshold_pp,
        o.amplification_rel * 100.0,
        o.amplification_abs,
        o.recovery_threshold_s,
    )
}

/// "1 run", "3 runs".
pub(super) fn runs(n: usize) -> String {
    if n == 1 {
        "1 run".into()
    } else {
        format!("{n} runs")
    }
}

/// What is compared with what: the two sources, and the two targets when they were picked.
pub(super) fn heading(c: &Comparison) -> String {
    let (b, k) = (&c.baseline, &c.candidate);
    match &c.pair {
        Some(p) if p.same_run => format!(
            "{}: {} → {}, same run, {} ({})",
            c.scenario,
            p.baseline,
            p.candidate,
            b.source,
            runs(b.runs)
        ),
        Some(p) => format!(
            "{}: baseline {} of {} ({}) → candidate {} of {} ({})",
            c.scenario,
            p.baseline,
            b.source,
            runs(b.runs),
            p.candidate,
            k.source,
            runs(k.runs)
        ),
        None => format!(
            "{}: baseline {} ({}) → candidate {} ({})",
            c.scenario,
            b.source,
            runs(b.runs),
            k.source,
            runs(k.runs)
        ),
    }
}

/// The terminal report: heading, one row per target × phase × metric, what only one side ran,
/// notes, the rule, and the overall verdict last, where the eye lands.
pub fn render_table(c: &Comparison) -> String {
    let mut out = heading(c) + "\n";
    out += &Table::new(cells(c, false))
        .with(Style::rounded())
        .to_string();
    out += "\n";
    for line in note_lines(c) {
        out += &format!("note: {line}\n");
    }
    out += &format!("rule: {}\n", rule_text(&c.options));
    out += &format!("verdict: {}\n", summary(c));
    out
}

/// The same for a CI page (GitHub's job summary and the like).
pub fn render_markdown(c: &Comparison) -> String {
    let mut out = format!(
        "## failmode compare: {}\n\n**{}**\n\n",
        heading(c),
        summary(c)
    );
    out += &Table::new(cells(c, true))
        .with(Style::markdown())
        .to_string();
    out += "\n\n";
    for line in note_lines(c) {
        out += &format!("- {line}\n");
    }
    out += &format!("\n_{}_\n", rule_text(&c.options));
    out
}
