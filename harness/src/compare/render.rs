//! What a person reads: the comparison as a terminal table and as Markdown for a CI page.

use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::{Certainty, CompareOptions, Comparison, Evidence, Metric, Row, Side, Verdict};

#[derive(Tabled)]
struct Cells {
    target: String,
    phase: String,
    metric: &'static str,
    baseline: String,
    candidate: String,
    change: String,
    verdict: String,
    #[tabled(rename = "how sure")]
    how_sure: String,
}

fn value_text(metric: Metric, v: f64) -> String {
    if metric.is_latency() {
        format!("{:.2} ms", v / 1000.0)
    } else {
        format!("{:.1} %", v * 100.0)
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
    let (b, c) = (row.baseline, row.candidate);
    if !row.metric.is_latency() {
        return format!("{} pp", signed((c - b) * 100.0, 1));
    }
    let ms = format!("{} ms", signed((c - b) / 1000.0, 2));
    if b > 0.0 {
        format!("{ms} ({} %)", signed((c / b - 1.0) * 100.0, 1))
    } else {
        ms
    }
}

/// "12.0–14.1 %", or `None` when every run gave the same value.
fn range_text(runs: &[f64]) -> Option<String> {
    let lo = runs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = (format!("{:.1}", lo * 100.0), format!("{:.1}", hi * 100.0));
    (lo != hi).then(|| format!("{lo}–{hi} %"))
}

fn how_sure_text(row: &Row, opts: &CompareOptions) -> String {
    match &row.evidence {
        Evidence::Latency {
            ci: Some(ci),
            baseline_seconds,
            candidate_seconds,
        } => {
            let head = format!(
                "{:.0} % CI of the {} median ratio {:.2}–{:.2} (×{:.2}; {} vs {} s)",
                opts.confidence * 100.0,
                row.metric.sample_name(),
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
            ..
        } => {
            let side = if *baseline_seconds == 0 {
                "baseline"
            } else {
                "candidate"
            };
            format!("not decided: the {side} has no per-second samples of this phase")
        }
        Evidence::Rate {
            baseline_runs,
            candidate_runs,
            threshold_pp,
        } => {
            let (nb, nc) = (baseline_runs.len(), candidate_runs.len());
            if nb == 1 && nc == 1 {
                return format!("one run each, ±{threshold_pp} pp");
            }
            let mut text = format!("mean of {nb} vs {nc} runs, ±{threshold_pp} pp");
            let (rb, rc) = (range_text(baseline_runs), range_text(candidate_runs));
            if rb.is_some() || rc.is_some() {
                let single =
                    |runs: &[f64]| format!("{:.1} %", runs.first().copied().unwrap_or(0.0) * 100.0);
                text += &format!(
                    " (runs {} vs {})",
                    rb.unwrap_or_else(|| single(baseline_runs)),
                    rc.unwrap_or_else(|| single(candidate_runs))
                );
            }
            text
        }
    }
}

fn cells(c: &Comparison, markdown: bool) -> Vec<Cells> {
    c.rows
        .iter()
        .map(|r| {
            let verdict = r.verdict.label();
            Cells {
                target: r.target.clone(),
                phase: r.phase.clone(),
                metric: r.metric.label(),
                baseline: value_text(r.metric, r.baseline),
                candidate: value_text(r.metric, r.candidate),
                change: change_text(r),
                verdict: if markdown && r.verdict != Verdict::Same {
                    format!("**{verdict}**")
                } else {
                    verdict.to_owned()
                },
                how_sure: how_sure_text(r, &c.options),
            }
        })
        .collect()
}

/// "worse: 2 of 63 rows worse, 1 better, 60 same (3 inconclusive)".
fn summary(c: &Comparison) -> String {
    let count = |f: &dyn Fn(&Row) -> bool| c.rows.iter().filter(|r| f(r)).count();
    let mut s = format!(
        "{}: {} of {} rows worse, {} better, {} same",
        c.verdict().label(),
        count(&|r| r.verdict == Verdict::Worse),
        c.rows.len(),
        count(&|r| r.verdict == Verdict::Better),
        count(&|r| r.verdict == Verdict::Same),
    );
    let unsure = count(&|r| r.certainty == Certainty::Inconclusive);
    let undecided = count(&|r| r.certainty == Certainty::NoSamples);
    if unsure > 0 {
        s += &format!(", {unsure} of them inconclusive");
    }
    if undecided > 0 {
        s += &format!(", {undecided} not decided for want of samples");
    }
    s
}

fn one_sided_lines(c: &Comparison) -> Vec<String> {
    c.one_sided
        .iter()
        .map(|o| {
            let side = match o.side {
                Side::Baseline => "only in the baseline",
                Side::Candidate => "only in the candidate",
            };
            match &o.phase {
                Some(p) => format!("{} / {p}: {side}", o.target),
                None => format!("{} (every phase): {side}", o.target),
            }
        })
        .collect()
}

fn rule_text(o: &CompareOptions) -> String {
    format!(
        "latency: decided on the per-second p50 / p99 / max of all tenants, pooled over runs; \
         worse or better only when the whole {:.0} % bootstrap CI ({} resamples, runs then \
         seconds) of the ratio of medians is beyond ×{:.2} (or ×{:.2}) and the medians differ \
         by more than {} ms. Rates: mean over runs, worse or better beyond ±{} pp (429 %, 5xx %) \
         or ±{} pp (over-admission, wrongful denial); higher is worse.",
        o.confidence * 100.0,
        o.resamples,
        1.0 + o.rel_threshold,
        1.0 / (1.0 + o.rel_threshold),
        o.abs_floor_ms,
        o.status_threshold_pp,
        o.admission_threshold_pp,
    )
}

fn heading(c: &Comparison) -> String {
    let runs = |n: usize| {
        if n == 1 {
            "1 run".into()
        } else {
            format!("{n} runs")
        }
    };
    format!(
        "{}: baseline {} ({}) → candidate {} ({})",
        c.scenario,
        c.baseline.source,
        runs(c.baseline.runs),
        c.candidate.source,
        runs(c.candidate.runs)
    )
}

/// The terminal report: heading, one row per target × phase × metric, what only one side ran,
/// notes, the rule, and the overall verdict last, where the eye lands.
pub fn render_table(c: &Comparison) -> String {
    let mut out = heading(c) + "\n";
    out += &Table::new(cells(c, false))
        .with(Style::rounded())
        .to_string();
    out += "\n";
    for line in one_sided_lines(c).iter().chain(&c.notes) {
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
    for line in one_sided_lines(c).iter().chain(&c.notes) {
        out += &format!("- {line}\n");
    }
    out += &format!("\n_{}_\n", rule_text(&c.options));
    out
}
