//! The outcomes of one run as a Markdown document: one table per fault, the claims with their
//! verdicts, and how each target was configured.

use std::fmt::Write;

use super::{FaultOutcome, FaultTable, Outcomes, Verdict, Worst};
use crate::gate::recovery::Recovery;
use crate::load::{Arrival, Spread};

/// Placeholders that differ per instance: they say nothing about a target's settings.
const PER_INSTANCE: [&str; 4] = ["{port}", "{instance_id}", "{instance_index}", "{redis_url}"];

fn pct(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x < 0.001 {
        "<0.1 %".into()
    } else {
        format!("{:.1} %", x * 100.0)
    }
}

/// A share column: blank when nothing went that way, so the eye finds what did.
fn share(x: f64) -> String {
    if x == 0.0 { String::new() } else { pct(x) }
}

fn worst(w: Option<&Worst>) -> String {
    match w {
        Some(w) if w.value > 0.0 => format!("{} ({})", pct(w.value), w.tenant),
        Some(_) => "0".into(),
        None => "–".into(),
    }
}

fn ms(x: Option<f64>) -> String {
    match x {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
        None => "n/m".into(),
    }
}

fn recovery(r: &Result<Recovery, String>) -> String {
    match r {
        Ok(Recovery::Recovered { after_s, relapses }) => match relapses {
            0 => format!("{after_s:.0} s"),
            n => format!(
                "{after_s:.0} s, {n} relapse{}",
                if *n == 1 { "" } else { "s" }
            ),
        },
        Ok(Recovery::Never) => "never".into(),
        Ok(Recovery::NotMeasured { at_least_s, .. }) if *at_least_s > 0.0 => {
            format!("≥ {at_least_s:.0} s (run ended)")
        }
        Ok(Recovery::NotMeasured { .. }) => "n/m".into(),
        Err(_) => "–".into(),
    }
}

/// `| target | 2xx | 429 | 503 | other 5xx | no answer |`, without the closing bar.
fn answers(o: &FaultOutcome) -> String {
    let a = &o.answers;
    format!(
        "| {} | {} | {} | {} | {} | {} |",
        o.target,
        share(a.ok),
        share(a.limited),
        share(a.unavailable),
        share(a.server_error),
        share(a.failed),
    )
}

fn row(out: &mut String, o: &FaultOutcome, with_after: bool) -> std::fmt::Result {
    write!(
        out,
        "{} {} | {} | {} |",
        answers(o),
        ms(o.p99_ms),
        worst(o.over_admission.as_ref()),
        worst(o.wrongful_denial.as_ref()),
    )?;
    if with_after {
        write!(
            out,
            " {} | {} |",
            worst(o.over_admission_after.as_ref()),
            worst(o.denial_after.as_ref())
        )?;
    }
    writeln!(out, " {} |", recovery(&o.recovery_s))
}

fn table(out: &mut String, t: &FaultTable) -> std::fmt::Result {
    writeln!(
        out,
        "\n## `{}` ({:.0}–{:.0} s): {}\n",
        t.phase,
        t.start_s,
        t.end_s,
        t.faults.join(", ")
    )?;
    let after = t.after.as_deref();
    write!(
        out,
        "| target | 2xx | 429 | 503 | other 5xx | no answer | p99 ms | over-admission | wrongful denial |"
    )?;
    if let Some(a) = after {
        write!(out, " over-admission in `{a}` | wrongful denial in `{a}` |")?;
    }
    writeln!(out, " recovery |")?;
    let columns = if after.is_some() { 12 } else { 10 };
    writeln!(out, "|{}", "---|".repeat(columns))?;
    for o in &t.rows {
        row(out, o, after.is_some())?;
    }
    Ok(())
}

/// The baseline: each target with a healthy Redis.
fn healthy(out: &mut String, t: &FaultTable) -> std::fmt::Result {
    writeln!(
        out,
        "\n## `{}` ({:.0}–{:.0} s): Redis healthy\n",
        t.phase, t.start_s, t.end_s
    )?;
    writeln!(
        out,
        "| target | 2xx | 429 | 503 | other 5xx | no answer | p50 ms | p99 ms | over-admission | wrongful denial |"
    )?;
    writeln!(out, "|{}", "---|".repeat(10))?;
    for o in &t.rows {
        writeln!(
            out,
            "{} {} | {} | {} | {} |",
            answers(o),
            ms(o.p50_ms),
            ms(o.p99_ms),
            worst(o.over_admission.as_ref()),
            worst(o.wrongful_denial.as_ref()),
        )?;
    }
    Ok(())
}

/// The whole document. `regenerate` is the command a reader runs to produce it again.
pub fn render(o: &Outcomes, regenerate: &str) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = document(&mut out, o, regenerate);
    out
}

fn document(out: &mut String, o: &Outcomes, regenerate: &str) -> std::fmt::Result {
    heading(out, o, regenerate)?;
    setup(out, o)?;
    how_to_read(out, o)?;
    let run = &o.run;
    if !run.notes.is_empty() {
        writeln!(out, "\n**Notes from the run:**\n")?;
        for note in &run.notes {
            writeln!(out, "- {note}")?;
        }
    }
    if let Some(h) = &o.healthy {
        healthy(out, h)?;
    }
    for t in &o.tables {
        table(out, t)?;
    }
    if !o.claims.is_empty() {
        claims(out, o)?;
    }
    targets(out, run)
}

/// The title, the scenario's description, and where the document comes from.
fn heading(out: &mut String, o: &Outcomes, regenerate: &str) -> std::fmt::Result {
    let run = &o.run;
    writeln!(out, "# Outcomes of `{}`\n", run.scenario)?;
    if !run.description.is_empty() {
        writeln!(out, "{}\n", run.description)?;
    }
    writeln!(
        out,
        "Generated by `failmode outcomes` from one run, not written by hand: started {}, seed {}, \
         duration scale {}, git {}{}. Regenerate with `{regenerate}`.\n",
        run.started_at,
        run.seed,
        run.duration_scale,
        run.git_revision.as_deref().unwrap_or("unknown"),
        if run.partial {
            " — **the run was interrupted: figures cover what ran**"
        } else {
            ""
        }
    )?;
    Ok(())
}

/// How the targets ran: their limits, instances, Redis and the load.
fn setup(out: &mut String, o: &Outcomes) -> std::fmt::Result {
    let (run, s) = (&o.run, &o.scenario);
    let tenants: Vec<String> = s
        .tenants
        .iter()
        .map(|t| {
            format!(
                "{} {}/s{}",
                t.name,
                t.rate_per_s,
                match t.arrival {
                    Arrival::Poisson => " (Poisson)",
                    Arrival::Uniform => "",
                }
            )
        })
        .collect();
    let sticky = s.tenants.iter().any(|t| t.spread == Spread::Sticky);
    let limits = if crate::report::own_limits(run) {
        format!(
            "Each target is judged against the limit it enforces ({}). Every target",
            crate::report::limits_line(run)
        )
    } else {
        format!(
            "Every target is configured with the same limit, {} requests per {} per caller, and",
            s.limit,
            humantime::format_duration(s.window)
        )
    };
    writeln!(
        out,
        "{limits} runs {} instances behind an even balancer{}, each target with its own \
         Redis behind its own Toxiproxy proxy. {} Load is open-model (requests are sent on \
         schedule, whatever the answers): {}.\n",
        instances(run),
        if sticky { " (some tenants pinned)" } else { "" },
        together(run),
        tenants.join(", ")
    )?;
    Ok(())
}

/// What each column of the tables means.
fn how_to_read(out: &mut String, o: &Outcomes) -> std::fmt::Result {
    let (run, s) = (&o.run, &o.scenario);
    writeln!(
        out,
        "How to read the tables: the answer columns are shares of the requests scheduled in the \
         phase (\"no answer\": refused, reset, timed out after {}, or never sent); p99 is \
         measured from the scheduled send, so queueing counts; over-admission is admitted \
         above the limit ÷ the limit, and wrongful denial is entitled requests not admitted ÷ \
         entitled, both for the worst tenant; over-admission and wrongful denial in the phase \
         after the fault show late effects (a client still reconnecting, which a fail-open \
         target spends admitting everything; counts applied late); recovery is the seconds \
         from the fault's end to the first {} in a row with p99 and wrongful \
         denial back in the steady phase's band (before the next fault), with later \
         excursions counted as relapses; \"never\" when the span ended out of band, \"≥ N s \
         (run ended)\" when it ended in band too soon to tell, n/m when too little of it \
         followed the fault: a target still admitting everything shows \
         in the over-admission after the fault, not in its recovery.",
        humantime::format_duration(s.request_timeout),
        recovery_span(run)
    )?;
    Ok(())
}

/// Each claim's verdict and the checks behind it.
fn claims(out: &mut String, o: &Outcomes) -> std::fmt::Result {
    writeln!(out, "\n## Claims tested\n")?;
    for c in &o.claims {
        let verdict = match &c.verdict {
            Verdict::Confirmed => "**confirmed**".to_owned(),
            Verdict::Refuted => "**refuted**".to_owned(),
            Verdict::NotTested(why) => format!("**not tested**: {why}"),
        };
        let needed = match c.claim.at_least {
            Some(n) => format!(" (needs {n} of its {} checks to hold)", c.checks.len()),
            None => String::new(),
        };
        writeln!(
            out,
            "- {} says: \"{}\" — {verdict}{needed}.",
            c.claim.source, c.claim.says
        )?;
        for check in &c.checks {
            writeln!(
                out,
                "  - {} {}: {} {} — actual {} ({})",
                check.target,
                check.phase_name(),
                check.subject(),
                check.threshold(),
                check.actual_text(),
                if check.passed {
                    "holds"
                } else {
                    "does not hold"
                }
            )?;
        }
    }
    Ok(())
}

/// What each target was: its description, command and settings.
fn targets(out: &mut String, run: &crate::results::RunResult) -> std::fmt::Result {
    writeln!(out, "\n## The targets\n")?;
    for t in &run.targets {
        writeln!(out, "- **{}**: {}", t.name, t.description)?;
        let settings: Vec<String> = t
            .env
            .iter()
            .filter(|(_, v)| !PER_INSTANCE.iter().any(|p| v.contains(p)))
            .map(|(k, v)| format!("`{k}={v}`"))
            .collect();
        if !t.command.is_empty() {
            writeln!(out, "  - started as `{}`", t.command.join(" "))?;
        }
        if !settings.is_empty() {
            writeln!(out, "  - settings: {}", settings.join(", "))?;
        }
    }
    Ok(())
}

/// How the targets shared the machine and the timeline.
fn together(run: &crate::results::RunResult) -> String {
    if run.batches.len() < 2 {
        return "The faults hit every target's proxy at the same moment.".into();
    }
    let batches: Vec<String> = run.batches.iter().map(|b| b.join(", ")).collect();
    format!(
        "The targets ran in {} batches, one after another through the same timeline, so that \
         they did not queue for the machine's CPU ({}); within a batch, the faults hit every \
         target's proxy at the same moment.",
        run.batches.len(),
        batches.join("; then ")
    )
}

fn instances(run: &crate::results::RunResult) -> String {
    let mut counts: Vec<u32> = run.targets.iter().map(|t| t.instances).collect();
    counts.sort_unstable();
    counts.dedup();
    match counts.as_slice() {
        [n] => n.to_string(),
        _ => "several".into(),
    }
}

/// How long a target must stay back in band to have recovered, in words: one figure when every
/// target's limit has the same window, else the rule.
fn recovery_span(run: &crate::results::RunResult) -> String {
    let mut spans: Vec<usize> = run
        .targets
        .iter()
        .map(|t| crate::gate::recovery::seconds_needed(run.limit_of(t).window_s))
        .collect();
    spans.sort_unstable();
    spans.dedup();
    match spans.as_slice() {
        [one] => format!("{one} seconds"),
        _ => "max(3 s, two windows of the target's limit)".to_owned(),
    }
}
