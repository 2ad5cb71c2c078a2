//! `compare --html FILE`: the comparison as a self-contained page of the report's look. Per
//! target × phase, one plot of the baseline's and the candidate's p99 per second of the phase,
//! the phase's rows under it; the verdict and notes above, the rule below.
//!
//! A second's p99 on a side is that of the second's requests of every run of the side added up
//! (each run's second of the phase at the same offset from the phase's start): the same
//! histograms, added the same way, that the rows' latency is judged on, so a line reads as the
//! phase's p99 row spread over its seconds.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::render::{Cells, cells, heading, note_lines, rule_text, runs, summary};
use super::{CompareError, Comparison, Row, RunSet, Verdict, stats};
use crate::report::html::{foot, head};
use crate::report::text::esc;
use crate::report::{SecondsP99, SidesPlot, p99_sides};
use crate::results::PhaseResult;

/// The rows of one target × phase, in the comparison's order, with their cells.
struct Group<'c> {
    target: &'c str,
    phase: &'c str,
    rows: Vec<(&'c Row, Cells)>,
}

fn groups(c: &Comparison) -> Vec<Group<'_>> {
    let mut out: Vec<Group<'_>> = Vec::new();
    for (row, cells) in c.rows.iter().zip(cells(c, false)) {
        match out.last_mut() {
            Some(g) if g.target == row.target && g.phase == row.phase => g.rows.push((row, cells)),
            _ => out.push(Group {
                target: &row.target,
                phase: &row.phase,
                rows: vec![(row, cells)],
            }),
        }
    }
    out
}

/// One side's p99 per second of a target's phase, by second since the phase began, and the
/// phase's length (the longest of the side's runs).
fn p99_per_second(set: &RunSet, target: &str, phase: &str) -> (SecondsP99, f64) {
    let mut by_offset: BTreeMap<u64, Vec<&Histogram<u64>>> = BTreeMap::new();
    let mut length_s = 0.0f64;
    for run in set.runs_of(target, phase) {
        let (start, end) = (run.phase.start_s, run.phase.end_s);
        length_s = length_s.max(end - start);
        let seconds = run.repeat.seconds.get(target).into_iter().flatten();
        for (&s, h) in seconds.filter(|&(&s, _)| s as f64 >= start && (s as f64) < end) {
            let offset = (s as f64 - start).floor() as u64;
            by_offset.entry(offset).or_default().push(h);
        }
    }
    let points = by_offset
        .into_iter()
        .map(|(offset, hs)| {
            let p99_us = stats::percentiles(&[hs], &[0.99]).and_then(|q| q.first().copied());
            (offset, p99_us.map(|us| us / 1000.0))
        })
        .collect();
    (points, length_s)
}

/// The names the two sides know the rows' target by: the picked pair's, or the row's own.
fn side_targets<'c>(c: &'c Comparison, label: &'c str) -> (&'c str, &'c str) {
    match &c.pair {
        Some(p) => (&p.baseline, &p.candidate),
        None => (label, label),
    }
}

/// The plot of each group that has one (a group whose phase no run of either side has cannot),
/// with the group's index.
fn plots<'s>(
    c: &Comparison,
    groups: &[Group<'_>],
    (baseline, candidate): (&'s RunSet, &'s RunSet),
) -> Vec<(usize, SidesPlot<'s>)> {
    groups
        .iter()
        .enumerate()
        .filter_map(|(i, g)| {
            let (b_target, c_target) = side_targets(c, g.target);
            let phase: &PhaseResult = baseline
                .runs_of(b_target, g.phase)
                .first()
                .or(candidate.runs_of(c_target, g.phase).first())
                .map(|r| r.phase)?;
            let (b_points, b_length) = p99_per_second(baseline, b_target, g.phase);
            let (c_points, c_length) = p99_per_second(candidate, c_target, g.phase);
            let label = |side: &str, target: &str, n: usize| {
                if c.pair.is_some() {
                    format!("{side} p99: {target} ({})", runs(n))
                } else {
                    format!("{side} p99 ({})", runs(n))
                }
            };
            Some((
                i,
                SidesPlot {
                    title: format!("{} / {}: p99 per second, both sides", g.target, g.phase),
                    phase,
                    length_s: b_length.max(c_length),
                    sides: [
                        (
                            label("baseline", b_target, baseline.repeats.len()),
                            b_points,
                        ),
                        (
                            label("candidate", c_target, candidate.repeats.len()),
                            c_points,
                        ),
                    ],
                },
            ))
        })
        .collect()
}

/// The page of comparison `c` of `baseline` with `candidate` (the sets it was made from).
pub fn render_html(
    c: &Comparison,
    baseline: &RunSet,
    candidate: &RunSet,
) -> Result<String, CompareError> {
    let groups = groups(c);
    let (owners, plots): (Vec<usize>, Vec<SidesPlot<'_>>) =
        plots(c, &groups, (baseline, candidate)).into_iter().unzip();
    let svgs = p99_sides(&plots).map_err(|e| CompareError::Plot(e.to_string()))?;
    let drawn: Vec<Option<(&SidesPlot<'_>, &String)>> = (0..groups.len())
        .map(|i| {
            let k = owners.iter().position(|o| *o == i)?;
            Some((plots.get(k)?, svgs.get(k)?))
        })
        .collect();
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = page(&mut out, c, &groups, &drawn);
    Ok(out)
}

fn page(
    out: &mut String,
    c: &Comparison,
    groups: &[Group<'_>],
    drawn: &[Option<(&SidesPlot<'_>, &String)>],
) -> std::fmt::Result {
    head(out, &format!("failmode compare: {}", c.scenario))?;
    writeln!(out, "<h1>failmode compare: {}</h1>", esc(&c.scenario))?;
    writeln!(out, "<p>{}</p>", esc(&heading(c)))?;
    writeln!(out, "<p><strong>{}</strong></p>", esc(&summary(c)))?;
    let notes = note_lines(c);
    if !notes.is_empty() {
        writeln!(out, "<ul>")?;
        for note in notes {
            writeln!(out, "<li>{}</li>", esc(&note))?;
        }
        writeln!(out, "</ul>")?;
    }
    let mut last_target = None;
    for (g, drawn) in groups.iter().zip(drawn) {
        if last_target != Some(g.target) {
            if last_target.is_some() {
                writeln!(out, "</section>")?;
            }
            writeln!(out, "<section>\n<h2>{}</h2>", esc(g.target))?;
            last_target = Some(g.target);
        }
        writeln!(out, "<h3>{}</h3>", esc(g.phase))?;
        if let Some((plot, svg)) = drawn {
            writeln!(out, "<figure>\n{svg}</figure>")?;
            if !plot.phase.faults.is_empty() {
                writeln!(
                    out,
                    "<p class=\"muted\">Faults in this phase (shaded): {}.</p>",
                    esc(&plot.phase.faults.join(", "))
                )?;
            }
        }
        rows_table(out, g)?;
    }
    if last_target.is_some() {
        writeln!(out, "</section>")?;
    }
    writeln!(
        out,
        "<p class=\"muted\">{}</p>",
        esc(&rule_text(&c.options))
    )?;
    foot(out, "the two sides' run.json, series.csv and seconds.hlog")
}

fn rows_table(out: &mut String, g: &Group<'_>) -> std::fmt::Result {
    writeln!(
        out,
        "<table class=\"fit\">\n<tr><th class=\"l wide\">metric</th><th class=\"wide\">baseline\
</th><th class=\"wide\">candidate</th><th class=\"wide\">change</th><th class=\"name\">verdict\
</th><th class=\"l\">how sure</th></tr>"
    )?;
    for (row, cells) in &g.rows {
        let class = match row.verdict {
            _ if row.fails_unmeasured() => " class=\"worse\"",
            Verdict::Worse if row.judged => " class=\"worse\"",
            Verdict::Better if row.judged => " class=\"better\"",
            _ => "",
        };
        writeln!(
            out,
            "<tr{class}><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
<td class=\"l w\">{}</td></tr>",
            esc(cells.metric),
            esc(&cells.baseline),
            esc(&cells.candidate),
            esc(&cells.change),
            esc(&cells.verdict),
            esc(&cells.how_sure)
        )?;
    }
    writeln!(out, "</table>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{CompareOptions, Repeat, Seconds, compare};
    use crate::results::{RunResult, fixture};

    /// A second whose requests all took `us`, `n` of them.
    fn second(us: u64, n: u64) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 60_000_000, 2).unwrap();
        h.record_n(us, n).unwrap();
        h
    }

    /// Two targets × a steady and a faulty phase of 5 s each; every second answered in `us`.
    fn set(us: u64, runs: usize) -> RunSet {
        let phases = || {
            vec![
                fixture::phase(
                    "steady",
                    (0.0, 5.0),
                    &[],
                    vec![fixture::tenant("t", 100, 100, 5.0, Some(us))],
                ),
                fixture::phase(
                    "cut",
                    (5.0, 10.0),
                    &["redis-down"],
                    vec![fixture::tenant("t", 100, 100, 5.0, Some(us))],
                ),
            ]
        };
        let run: RunResult = fixture::run(
            "page",
            vec![
                fixture::target("one", phases()),
                fixture::target("two", phases()),
            ],
        );
        let seconds: Seconds = (0..10).map(|s| (s, second(us, 20))).collect();
        RunSet {
            scenario: "page".into(),
            source: "memory".into(),
            repeats: (0..runs)
                .map(|_| Repeat {
                    run: run.clone(),
                    series: Vec::new(),
                    seconds: [
                        ("one".to_owned(), seconds.clone()),
                        ("two".to_owned(), seconds.clone()),
                    ]
                    .into(),
                })
                .collect(),
        }
    }

    #[test]
    fn the_page_has_one_plot_per_target_and_phase_with_both_sides_p99() {
        let (baseline, candidate) = (set(1_000, 1), set(3_000, 2));
        let opts = CompareOptions {
            resamples: 100,
            ..CompareOptions::default()
        };
        let c = compare(&baseline, &candidate, &opts).unwrap();
        let page = render_html(&c, &baseline, &candidate).unwrap();
        assert_eq!(
            page.matches("<svg").count(),
            2 * 2,
            "two targets × two phases"
        );
        for title in ["one / steady", "one / cut", "two / steady", "two / cut"] {
            assert!(
                page.contains(&format!("{title}: p99 per second")),
                "no {title}"
            );
        }
        assert_eq!(page.matches("baseline p99 (1 run)").count(), 4);
        assert_eq!(page.matches("candidate p99 (2 runs)").count(), 4);
        assert!(!page.contains("<script"));
    }

    #[test]
    fn a_seconds_p99_is_of_every_runs_requests_in_it_by_second_since_the_phase_began() {
        let mut runs = set(1_000, 2);
        // The second run's first second of the cut (second 5) is slow for all of its requests:
        // half of that second's requests over both runs.
        if let Some(s) = runs.repeats[1].seconds.get_mut("one") {
            s.insert(5, second(9_000, 20));
        }
        let (points, length_s) = p99_per_second(&runs, "one", "cut");
        assert_eq!(length_s, 5.0);
        assert_eq!(points.len(), 5);
        let (offset, p99_ms) = points[0];
        assert_eq!(offset, 0);
        assert!((p99_ms.unwrap() - 9.0).abs() < 0.1, "{p99_ms:?}");
        assert!((points[1].1.unwrap() - 1.0).abs() < 0.02, "{:?}", points[1]);
    }
}
