//! `report.html`: one self-contained page per results folder, and its plots as SVG files.
//!
//! The page works offline and attached to a CI job: no scripts, no external stylesheets or
//! fonts, the plots inlined as SVG. It is written from `run.json` and `series.csv` alone, so
//! any results folder, old or copied from elsewhere, can be reported again. It opens with the
//! overview of every target (`overview.rs`); `compare --html` writes a page of the same look.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::overview::{self, Overview};
use super::plots::{self, FAULT_FILL_RGB, PlotError, Scales};
use super::text::{esc, file_stem};
use super::{ms, rate, worst};
use crate::results::atomic;
use crate::results::read::{ReadError, SeriesRow, read_series};
use crate::results::{PhaseResult, RunResult, TargetResult};

/// What the report of a results folder can fail with; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// `run.json` or `series.csv` is missing or unreadable (the message names which).
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot draw {path}: {message}")]
    Plot { path: PathBuf, message: String },
}

/// The plots of one target, as SVG documents.
struct TargetPlots {
    latency: String,
    admitted: String,
    errors: String,
}

/// Writes `report.html`, `plots/<target>-{latency,admitted,errors}.svg` and the overview's
/// `plots/overview/{tradeoff-<phase>,heaviest-tenant-admitted}.svg` into the results folder
/// `folder` from its `run.json` and `series.csv`; returns the path of `report.html`. In file
/// names, characters of a target's name other than ASCII letters, digits, `.`, `-` and `_`
/// become `_`.
pub fn write_report(folder: &Path) -> Result<PathBuf, ReportError> {
    let run = RunResult::read(folder)?;
    let rows = read_series(folder)?;
    let scales = Scales::of(&run, &rows);

    let plots_dir = folder.join("plots");
    let overview_dir = plots_dir.join("overview");
    std::fs::create_dir_all(&overview_dir).map_err(|source| ReportError::Write {
        path: overview_dir.clone(),
        source,
    })?;
    let overview = overview::draw(&run, &rows, &scales);
    save_overview(&overview, &overview_dir)?;
    let mut all_plots = Vec::with_capacity(run.targets.len());
    for target in &run.targets {
        let target_rows: Vec<&SeriesRow> =
            rows.iter().filter(|r| r.target == target.name).collect();
        let stem = file_stem(&target.name);
        let save = |kind: &str, drawn: Result<String, PlotError>| {
            let path = plots_dir.join(format!("{stem}-{kind}.svg"));
            let svg = drawn.map_err(|e| ReportError::Plot {
                path: path.clone(),
                message: e.to_string(),
            })?;
            write_file(&path, &svg)?;
            Ok::<_, ReportError>(svg)
        };
        all_plots.push(TargetPlots {
            latency: save("latency", plots::latency(target, &target_rows, &scales))?,
            admitted: save(
                "admitted",
                plots::admitted(&run, target, &target_rows, &scales),
            )?,
            errors: save("errors", plots::errors(target, &target_rows, &scales))?,
        });
    }

    let mut html = String::new();
    // Writing into a String cannot fail.
    let _ = page(&mut html, &run, &overview, &all_plots);
    let path = folder.join("report.html");
    write_file(&path, &html)?;
    Ok(path)
}

/// Saves the overview's plots, or names the first that failed to draw.
fn save_overview(overview: &Overview<'_>, dir: &Path) -> Result<(), ReportError> {
    let drawn = overview
        .maps
        .iter()
        .map(|(_, d)| d)
        .chain(overview.timeline.iter().map(|(_, d)| d));
    for d in drawn {
        let path = dir.join(&d.file);
        let svg = d.svg.as_ref().map_err(|e| ReportError::Plot {
            path: path.clone(),
            message: e.to_string(),
        })?;
        write_file(&path, svg)?;
    }
    Ok(())
}

fn write_file(path: &Path, contents: &str) -> Result<(), ReportError> {
    atomic::write(path, contents).map_err(|source| ReportError::Write {
        path: path.to_owned(),
        source,
    })
}

fn css() -> String {
    let (r, g, b) = FAULT_FILL_RGB;
    format!(
        "body{{font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;\
max-width:940px;margin:24px auto;padding:0 12px;color:#1a1a1a;line-height:1.4}}
h1{{font-size:24px;margin:0 0 4px}}
h2{{font-size:20px;margin:36px 0 4px;padding-top:14px;border-top:1px solid #ddd}}
h3{{font-size:16px;margin:20px 0 4px}}
p{{margin:4px 0}}
.meta{{display:grid;grid-template-columns:max-content 1fr;gap:1px 14px;font-size:14px;margin:10px 0}}
.meta dt{{color:#555}} .meta dd{{margin:0}}
.partial{{background:#fff3cd;border:1px solid #e0c36b;padding:8px 12px;border-radius:4px}}
table{{border-collapse:collapse;font-size:12.5px;margin:6px 0 14px}}
th,td{{padding:3px 5px;border-bottom:1px solid #e4e4e4;text-align:right;white-space:nowrap}}
th{{background:#f4f4f4;font-weight:600;vertical-align:bottom;white-space:normal}}
table.fit{{width:100%;font-size:12px}}
td.w{{white-space:normal}}
tr.worse td{{background:#fbe3e3}} tr.better td{{background:#e3f4ea}}
.l{{text-align:left}}
tr.fault td.f{{background:#{r:02X}{g:02X}{b:02X}}}
td.t{{vertical-align:top;font-weight:600;background:#fff}}
nav a{{margin-right:12px}}
figure{{margin:10px 0 18px}}
figure svg{{max-width:100%;height:auto;display:block}}
figcaption{{font-size:13px;color:#444;margin-top:2px}}
.muted{{color:#666;font-size:13px}}
"
    )
}

/// The page's head, up to and including `<body>`: the one look of every page failmode writes.
pub(crate) fn head(out: &mut String, title: &str) -> std::fmt::Result {
    writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<title>{}</title>\n<style>\n{}</style>\n</head>\n<body>",
        esc(title),
        css()
    )
}

/// The last line of every page: what wrote it and from what.
pub(crate) fn foot(out: &mut String, from: &str) -> std::fmt::Result {
    writeln!(
        out,
        "<p class=\"muted\">Written by failmode {} from {from}.</p>\n</body>\n</html>",
        env!("CARGO_PKG_VERSION")
    )
}

fn page(
    out: &mut String,
    run: &RunResult,
    overview: &Overview<'_>,
    plots: &[TargetPlots],
) -> std::fmt::Result {
    head(
        out,
        &format!("failmode: {} ({})", run.scenario, run.started_at),
    )?;
    title(out, run)?;
    overview::section(out, run, overview)?;
    header(out, run)?;
    phases_table(out, run)?;
    summary_table(out, run)?;
    admitted_table(out, run)?;
    for (target, plots) in run.targets.iter().zip(plots) {
        target_section(out, target, plots)?;
    }
    foot(out, "run.json and series.csv")
}

/// The scenario, what it does, and whether the run was cut short: what the overview is of.
fn title(out: &mut String, run: &RunResult) -> std::fmt::Result {
    writeln!(out, "<h1>failmode: {}</h1>", esc(&run.scenario))?;
    writeln!(out, "<p>{}</p>", esc(&run.description))?;
    if run.partial {
        writeln!(
            out,
            "<p class=\"partial\"><strong>Partial run:</strong> it was interrupted; the figures \
cover what ran.</p>"
        )?;
    }
    Ok(())
}

/// How the run was made: seed, revision, duration, limit, requests, notes.
fn header(out: &mut String, run: &RunResult) -> std::fmt::Result {
    writeln!(out, "<h2>The run</h2>\n<dl class=\"meta\">")?;
    let mut item = |name: &str, value: String| writeln!(out, "<dt>{name}</dt><dd>{value}</dd>");
    item("seed", run.seed.to_string())?;
    item(
        "git revision",
        run.git_revision.as_deref().map_or_else(
            || "unknown".to_owned(),
            |r| format!("<code>{}</code>", esc(r)),
        ),
    )?;
    item("started at", esc(&run.started_at))?;
    let scale = if run.duration_scale == 1.0 {
        String::new()
    } else {
        format!(" (duration scale {})", run.duration_scale)
    };
    item("duration", format!("{:.1} s{scale}", run.duration_s))?;
    item("limit", esc(&crate::report::limits_line(run)))?;
    let l = &run.load;
    item(
        "requests",
        format!(
            "{} scheduled, {} sent, {} dropped (in-flight bound), {} cancelled, {} refused by \
             the clients' own throttling; {} retries sent besides",
            l.scheduled, l.sent, l.dropped, l.cancelled, l.throttled, l.retries
        ),
    )?;
    item("partial", if run.partial { "yes" } else { "no" }.to_owned())?;
    writeln!(out, "</dl>")?;
    if !run.notes.is_empty() {
        writeln!(out, "<h3>Notes</h3>\n<ul>")?;
        for note in &run.notes {
            writeln!(out, "<li>{}</li>", esc(note))?;
        }
        writeln!(out, "</ul>")?;
    }
    if run.targets.len() > 1 {
        write!(out, "<nav>Targets: ")?;
        for t in &run.targets {
            write!(
                out,
                "<a href=\"#target-{}\">{}</a>",
                file_stem(&t.name),
                esc(&t.name)
            )?;
        }
        writeln!(out, "</nav>")?;
    }
    Ok(())
}

/// The timeline: every target runs the same phases, so the first target's stand for all.
fn phases_table(out: &mut String, run: &RunResult) -> std::fmt::Result {
    let Some(first) = run.targets.first() else {
        return writeln!(out, "<p>This run has no targets.</p>");
    };
    writeln!(
        out,
        "<h3>Phases</h3>\n<table>\n<tr><th class=\"l\">phase</th><th>from (s)</th><th>to (s)</th>\
<th class=\"l\">faults</th></tr>"
    )?;
    for p in &first.phases {
        let faults = if p.faults.is_empty() {
            "none".to_owned()
        } else {
            esc(&p.faults.join(", "))
        };
        writeln!(
            out,
            "<tr{}><td class=\"l f\">{}</td><td class=\"f\">{:.1}</td><td class=\"f\">{:.1}</td>\
<td class=\"l f\">{faults}</td></tr>",
            fault_class(p),
            esc(&p.name),
            p.start_s,
            p.end_s
        )?;
    }
    writeln!(out, "</table>")
}

fn fault_class(p: &PhaseResult) -> &'static str {
    if p.faults.is_empty() {
        ""
    } else {
        " class=\"fault\""
    }
}

/// A table row of one phase, with the target's name spanning its phases on the first.
fn open_row(out: &mut String, t: &TargetResult, index: usize, p: &PhaseResult) -> std::fmt::Result {
    write!(out, "<tr{}>", fault_class(p))?;
    if index == 0 {
        write!(
            out,
            "<td class=\"l t\" rowspan=\"{}\">{}</td>",
            t.phases.len(),
            esc(&t.name)
        )?;
    }
    Ok(())
}

fn summary_table(out: &mut String, run: &RunResult) -> std::fmt::Result {
    if run.targets.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "<h3>Summary per target and phase</h3>\n<p class=\"muted\">Latency from the scheduled \
send, all tenants. Worst tenant: the highest over-admission (admitted above the limit) and \
wrongful denial (entitled traffic refused). Attempts / offered: the client amplification \
(retries add, the clients' own throttling removes). Redis cmds / offered: the store \
amplification.</p>\n<table class=\"fit\">\n<tr><th class=\"l\">target</th>\
<th class=\"l\">phase</th><th>p50 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>admitted/s</th><th>429</th>\
<th>5xx</th><th>transport errors</th><th>over-admission (worst)</th>\
<th>wrongful denial (worst)</th><th>attempts / offered</th><th>Redis cmds / offered</th></tr>"
    )?;
    for t in &run.targets {
        for (i, p) in t.phases.iter().enumerate() {
            let a = &p.all;
            open_row(out, t, i, p)?;
            let times = |x: Option<f64>| x.map_or_else(|| "-".to_owned(), |x| format!("{x:.2}"));
            writeln!(
                out,
                "<td class=\"l f\">{}</td><td class=\"f\">{}</td><td class=\"f\">{}</td>\
<td class=\"f\">{}</td><td class=\"f\">{:.1}</td><td class=\"f\">{}</td><td class=\"f\">{}</td>\
<td class=\"f\">{}</td><td class=\"f w\">{}</td><td class=\"f w\">{}</td><td class=\"f\">{}</td>\
<td class=\"f\">{}</td></tr>",
                esc(&p.name),
                ms(a.latency_us, |p| p.p50),
                ms(a.latency_us, |p| p.p99),
                ms(a.latency_us, |p| p.p999),
                a.admitted_per_s,
                rate(a, a.counts.limited),
                rate(a, a.counts.errors_5xx()),
                a.counts.transport_error,
                esc(&worst(&p.tenants, |t| t.over_admission)),
                esc(&worst(&p.tenants, |t| t.wrongful_denial)),
                times(p.client_amplification),
                times(p.store_amplification)
            )?;
        }
    }
    writeln!(out, "</table>")
}

/// Admitted requests per second per tenant and phase: the question the run answers, as a
/// table to read numbers from.
fn admitted_table(out: &mut String, run: &RunResult) -> std::fmt::Result {
    let Some(first) = run.targets.first().and_then(|t| t.phases.first()) else {
        return Ok(());
    };
    let tenants: Vec<&str> = first.tenants.iter().map(|t| t.name.as_str()).collect();
    write!(
        out,
        "<h3>Admitted requests per second, per tenant</h3>\n<p class=\"muted\">Limit: {} per \
caller key (a population's rest: per key of it).</p>\n<table class=\"fit\">\n<tr>\
<th class=\"l\">target</th><th class=\"l\">phase</th>",
        limit_rate(run)
    )?;
    for tenant in &tenants {
        write!(out, "<th>{}</th>", esc(tenant))?;
    }
    writeln!(out, "</tr>")?;
    for t in &run.targets {
        for (i, p) in t.phases.iter().enumerate() {
            open_row(out, t, i, p)?;
            write!(out, "<td class=\"l f\">{}</td>", esc(&p.name))?;
            for tenant in &tenants {
                match p.tenants.iter().find(|x| x.name == *tenant) {
                    Some(x) => write!(out, "<td class=\"f\">{:.1}</td>", x.admitted_per_s)?,
                    None => write!(out, "<td class=\"f\">-</td>")?,
                }
            }
            writeln!(out, "</tr>")?;
        }
    }
    writeln!(out, "</table>")
}

/// The limit per second each target was judged against: one figure when they share it.
fn limit_rate(run: &RunResult) -> String {
    let rate = |per_s: f64| {
        if per_s > 0.0 {
            format!("{per_s:.1}/s")
        } else {
            "-".into()
        }
    };
    if !crate::report::own_limits(run) {
        return rate(run.limit_of_run().per_s());
    }
    run.targets
        .iter()
        .map(|t| format!("{} {}", esc(&t.name), rate(run.limit_of(t).per_s())))
        .collect::<Vec<_>>()
        .join(", ")
}

fn target_section(out: &mut String, t: &TargetResult, plots: &TargetPlots) -> std::fmt::Result {
    writeln!(
        out,
        "<section id=\"target-{}\">\n<h2>{}</h2>",
        file_stem(&t.name),
        esc(&t.name)
    )?;
    if !t.description.is_empty() {
        writeln!(out, "<p>{}</p>", esc(&t.description))?;
    }
    writeln!(
        out,
        "<p class=\"muted\">{} instance{}; load generator send lag p99 {} ms.</p>",
        t.instances,
        if t.instances == 1 { "" } else { "s" },
        ms(t.send_lag_us, |p| p.p99)
    )?;
    if !t.command.is_empty() || !t.env.is_empty() {
        // The exact client settings a reader needs to judge the comparison.
        let env: Vec<String> = t.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        writeln!(
            out,
            "<details><summary>Started with</summary><pre>{}\n{}</pre></details>",
            esc(&env.join("\n")),
            esc(&t.command.join(" "))
        )?;
    }
    if !t.events.is_empty() {
        writeln!(out, "<p>Events:</p>\n<ul>")?;
        for e in &t.events {
            writeln!(
                out,
                "<li>at {:.1} s: <strong>{}</strong> {}</li>",
                e.at_s,
                esc(&e.kind),
                esc(&e.detail)
            )?;
        }
        writeln!(out, "</ul>")?;
    }
    let windows: Vec<String> = t
        .phases
        .iter()
        .filter(|p| !p.faults.is_empty())
        .map(|p| {
            format!(
                "{} {:.0}–{:.0} s: {}",
                esc(&p.name),
                p.start_s,
                p.end_s,
                esc(&p.faults.join(", "))
            )
        })
        .collect();
    if !windows.is_empty() {
        writeln!(
            out,
            "<p class=\"muted\">Shaded in the plots: {}.</p>",
            windows.join("; ")
        )?;
    }
    for svg in [&plots.latency, &plots.admitted, &plots.errors] {
        writeln!(out, "<figure>\n{svg}</figure>")?;
    }
    writeln!(out, "</section>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixture;

    #[test]
    fn the_summary_table_fits_the_page_column_without_a_horizontal_scroller() {
        let css = css();
        assert!(
            !css.contains("overflow-x"),
            "a scroller hides the last columns"
        );
        assert!(css.contains("table.fit{width:100%"), "{css}");
        assert!(css.contains("td.w{white-space:normal}"), "{css}");
        let phase = fixture::phase(
            "steady",
            (0.0, 10.0),
            &[],
            vec![fixture::tenant("initech", 100, 50, 10.0, Some(1_000))],
        );
        let run = fixture::run("fits", vec![fixture::target("a", vec![phase])]);
        let mut out = String::new();
        summary_table(&mut out, &run).unwrap();
        assert!(out.contains("<table class=\"fit\">"), "{out}");
        // The worst-tenant cells ("100.0 % initech (n/m: …)") are the ones that may wrap.
        assert_eq!(out.matches("class=\"f w\"").count(), 2, "{out}");
    }
}
