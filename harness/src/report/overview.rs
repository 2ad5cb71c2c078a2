//! The top of `report.html`: every target at once. Per fault phase a trade-off map (each
//! target's over-admission against its wrongful denial, p99 in its label), then one timeline of
//! the heaviest tenant's admitted requests per second at every target, the fault windows
//! shaded. A reader sees who failed which way before reading any table.
//!
//! The map places a target by its worst tenant on each axis, as the summary table does: the
//! tenant a limiter over-admits and the one it wrongly refuses are seldom the same, and the
//! heaviest tenant alone would hide a light one refused. The timeline follows the tenant that
//! offered the most requests in the run, picked from the counts: the one a limiter that fails
//! open lets through above its limit.

use std::fmt::Write as _;

use super::plots::{self, MapAxes, MapPoint, PlotError, Scales, TradeOff};
use super::text::{esc, file_stem};
use crate::results::read::SeriesRow;
use crate::results::{RunResult, TenantResult};

/// How the map's axes and caption name the tenant each figure is of.
const WHOSE: &str = "worst tenant";

/// The overview's plots, drawn, with the file name each is saved as under `plots/`.
pub(super) struct Overview<'a> {
    pub(super) maps: Vec<(TradeOff<'a>, Drawn)>,
    /// The heaviest tenant and its timeline; `None` when the run has no tenant.
    pub(super) timeline: Option<(Heaviest, Drawn)>,
}

/// One plot: its file name under `plots/` and what drawing it gave.
pub(super) struct Drawn {
    pub(super) file: String,
    pub(super) svg: Result<String, PlotError>,
}

/// The tenant that offered the most requests in the run.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Heaviest {
    pub(super) name: String,
    pub(super) offered: u64,
    /// Every tenant's, for the caption's share.
    pub(super) of_all: u64,
}

/// The tenant with the most requests offered, every target and phase added up (the first in
/// the run's order on a tie); `None` when no tenant offered any.
pub(super) fn heaviest_tenant(run: &RunResult) -> Option<Heaviest> {
    let mut totals: Vec<(&str, u64)> = Vec::new();
    for tenant in run
        .targets
        .iter()
        .flat_map(|t| &t.phases)
        .flat_map(|p| &p.tenants)
    {
        match totals.iter_mut().find(|(n, _)| *n == tenant.name) {
            Some((_, sum)) => *sum += tenant.counts.offered,
            None => totals.push((&tenant.name, tenant.counts.offered)),
        }
    }
    let of_all = totals.iter().map(|(_, n)| n).sum();
    // max_by_key keeps the last of equals: reversed, the first.
    let (name, offered) = totals
        .into_iter()
        .rev()
        .max_by_key(|(_, n)| *n)
        .filter(|(_, n)| *n > 0)?;
    Some(Heaviest {
        name: name.to_owned(),
        offered,
        of_all,
    })
}

/// The highest figure of the tenants that measured it; `None` when none did.
fn worst(tenants: &[TenantResult], key: fn(&TenantResult) -> Option<f64>) -> Option<f64> {
    tenants.iter().filter_map(key).reduce(f64::max)
}

/// One map per phase with faults (every target runs the same phases: the first target's name
/// them), each target placed by its worst tenants in that phase.
pub(super) fn trade_offs(run: &RunResult) -> Vec<TradeOff<'_>> {
    let Some(first) = run.targets.first() else {
        return Vec::new();
    };
    first
        .phases
        .iter()
        .filter(|p| !p.faults.is_empty())
        .map(|phase| TradeOff {
            phase,
            whose: WHOSE,
            points: run
                .targets
                .iter()
                .enumerate()
                .map(|(index, t)| {
                    let own = t.phases.iter().find(|p| p.name == phase.name);
                    let figure = |key: fn(&TenantResult) -> Option<f64>| {
                        own.and_then(|p| worst(&p.tenants, key))
                    };
                    MapPoint {
                        target: t.name.clone(),
                        index,
                        over: figure(|n| n.over_admission),
                        denied: figure(|n| n.wrongful_denial),
                        p99_ms: own
                            .and_then(|p| p.all.latency_us)
                            .map(|l| l.p99 as f64 / 1000.0),
                    }
                })
                .collect(),
        })
        .collect()
}

/// Draws the overview; what fails to draw is reported by the caller, naming the file.
pub(super) fn draw<'a>(run: &'a RunResult, rows: &[SeriesRow], scales: &Scales) -> Overview<'a> {
    let maps = trade_offs(run);
    let axes = MapAxes::of(&maps);
    let maps = maps
        .into_iter()
        .map(|map| {
            let drawn = Drawn {
                file: format!("tradeoff-{}.svg", file_stem(&map.phase.name)),
                svg: plots::trade_off(&map, &axes),
            };
            (map, drawn)
        })
        .collect();
    let timeline = heaviest_tenant(run).map(|heaviest| {
        let drawn = Drawn {
            file: "heaviest-tenant-admitted.svg".to_owned(),
            svg: plots::tenant_at_every_target(run, &heaviest.name, rows, scales),
        };
        (heaviest, drawn)
    });
    Overview { maps, timeline }
}

/// The overview section. Plots that failed to draw are left out: the caller has already
/// refused to write a report without them, naming the file.
pub(super) fn section(
    out: &mut String,
    run: &RunResult,
    overview: &Overview<'_>,
) -> std::fmt::Result {
    if run.targets.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "<section id=\"overview\">\n<h2>Every target at once</h2>"
    )?;
    if overview.maps.is_empty() {
        writeln!(
            out,
            "<p class=\"muted\">No phase of this run has faults: no trade-off map.</p>"
        )?;
    }
    let mut figure = |drawn: &Drawn, caption: String| match &drawn.svg {
        Ok(svg) => writeln!(
            out,
            "<figure>\n{svg}<figcaption>{caption}</figcaption></figure>"
        ),
        Err(_) => Ok(()),
    };
    for (map, drawn) in &overview.maps {
        figure(drawn, map_caption(map))?;
    }
    if let Some((heaviest, drawn)) = &overview.timeline {
        figure(drawn, timeline_caption(run, heaviest))?;
    }
    writeln!(out, "</section>")
}

fn map_caption(map: &TradeOff<'_>) -> String {
    let p = map.phase;
    let mut caption = format!(
        "{} ({:.0}–{:.0} s, {}): each target at its {WHOSE}'s over-admission (admitted above \
         the allowance) and its {WHOSE}'s wrongful denial (entitled requests refused), as in \
         the summary table; its label gives the phase's p99 latency, all tenants. The ring is \
         the best corner: nothing over, nothing refused wrongly.",
        esc(&p.name),
        p.start_s,
        p.end_s,
        esc(&p.faults.join(", "))
    );
    let missing = map.not_measured();
    if !missing.is_empty() {
        let _ = write!(
            caption,
            " <strong>Not measured</strong>, so not drawn (never at 0): {}.",
            esc(&missing.join(", "))
        );
    }
    caption
}

fn timeline_caption(run: &RunResult, heaviest: &Heaviest) -> String {
    let share = heaviest.offered as f64 * 100.0 / heaviest.of_all.max(1) as f64;
    let windows: Vec<String> = run
        .targets
        .first()
        .into_iter()
        .flat_map(|t| &t.phases)
        .filter(|p| !p.faults.is_empty())
        .map(|p| format!("{} {:.0}–{:.0} s", esc(&p.name), p.start_s, p.end_s))
        .collect();
    let shaded = if windows.is_empty() {
        String::new()
    } else {
        format!(" Shaded: {}.", windows.join("; "))
    };
    format!(
        "{} offered the most requests of the run ({} of {}, {share:.0} %, every target and \
         phase): its admitted requests per second at every target, against the limit it was \
         held to.{shaded}",
        esc(&heaviest.name),
        heaviest.offered,
        heaviest.of_all
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Counts;
    use crate::results::fixture;

    /// The markers of a map: its filled circles, as (cx, cy, fill).
    fn markers(svg: &str) -> Vec<(String, String, String)> {
        let doc = roxmltree::Document::parse(svg).unwrap();
        doc.descendants()
            .filter(|n| n.has_tag_name("circle") && n.attribute("fill") != Some("none"))
            .map(|n| {
                let a = |k| n.attribute(k).unwrap().to_owned();
                (a("cx"), a("cy"), a("fill"))
            })
            .collect()
    }

    /// The ring around the best corner, (0, 0): its centre.
    fn best_corner(svg: &str) -> (String, String) {
        let doc = roxmltree::Document::parse(svg).unwrap();
        let ring = doc
            .descendants()
            .find(|n| n.has_tag_name("circle") && n.attribute("fill") == Some("none"))
            .unwrap();
        let a = |k| ring.attribute(k).unwrap().to_owned();
        (a("cx"), a("cy"))
    }

    fn draw_map(run: &RunResult) -> String {
        let maps = trade_offs(run);
        plots::trade_off(&maps[0], &MapAxes::of(&maps)).unwrap()
    }

    /// A steady phase, then a cut of 10 s in which `light` offers 20/s (all admitted) and `bulk`
    /// 120/s, of which each target admits its `bulk_admitted`.
    fn faulty_run(targets: &[(&str, u64)]) -> RunResult {
        let targets = targets
            .iter()
            .map(|(name, bulk_admitted)| {
                let tenants = vec![
                    fixture::tenant("light", 200, 200, 10.0, Some(1_000)),
                    fixture::tenant("bulk", 1_200, *bulk_admitted, 10.0, Some(1_000)),
                ];
                let steady = fixture::phase(
                    "steady",
                    (0.0, 10.0),
                    &[],
                    vec![
                        fixture::tenant("light", 200, 200, 10.0, Some(1_000)),
                        fixture::tenant("bulk", 1_200, 500, 10.0, Some(1_000)),
                    ],
                );
                let cut = fixture::phase("cut", (10.0, 20.0), &["redis-down"], tenants);
                fixture::target(name, vec![steady, cut])
            })
            .collect();
        fixture::run("overview", targets)
    }

    #[test]
    fn the_heaviest_tenant_is_the_one_that_offered_most_whatever_its_name() {
        let run = faulty_run(&[("a", 500), ("b", 1_200)]);
        let heaviest = heaviest_tenant(&run).unwrap();
        assert_eq!(heaviest.name, "bulk");
        assert_eq!(heaviest.offered, 4 * 1_200);
        assert_eq!(heaviest.of_all, 4 * 1_400);
    }

    #[test]
    fn no_tenant_offered_anything_no_heaviest_tenant() {
        let phase = fixture::phase(
            "steady",
            (0.0, 10.0),
            &[],
            vec![fixture::tenant("quiet", 0, 0, 10.0, None)],
        );
        let run = fixture::run("quiet", vec![fixture::target("a", vec![phase])]);
        assert_eq!(heaviest_tenant(&run), None);
    }

    #[test]
    fn one_map_per_fault_phase_and_each_target_at_its_worst_tenants() {
        let run = faulty_run(&[("open", 1_200), ("closed", 0)]);
        let maps = trade_offs(&run);
        assert_eq!(maps.len(), 1, "one phase has faults");
        assert_eq!(maps[0].phase.name, "cut");
        let open = &maps[0].points[0];
        // bulk admitted 120/s against 50/s: 140 % over; nothing entitled refused.
        assert!((open.over.unwrap() - 1.4).abs() < 0.05, "{:?}", open.over);
        assert_eq!(open.denied, Some(0.0));
        let closed = &maps[0].points[1];
        assert_eq!(closed.over, Some(0.0));
        assert!(
            (closed.denied.unwrap() - 1.0).abs() < 1e-9,
            "light is refused whole"
        );
        assert_eq!(open.p99_ms, Some(1.0));
    }

    #[test]
    fn a_target_nothing_reached_is_not_measured_rather_than_at_zero() {
        let mut run = faulty_run(&[("open", 1_200), ("gone", 0)]);
        let cut = &mut run.targets[1].phases[1];
        cut.tenants = vec![
            fixture::tenant("light", 0, 0, 10.0, None),
            fixture::tenant("bulk", 0, 0, 10.0, None),
        ];
        let maps = trade_offs(&run);
        let gone = &maps[0].points[1];
        assert_eq!((gone.over, gone.denied), (None, None));
        assert_eq!(
            maps[0].not_measured(),
            vec!["gone (neither figure)".to_owned()]
        );
    }

    #[test]
    fn the_map_draws_one_labelled_marker_per_measured_target() {
        let run = faulty_run(&[("open", 1_200), ("closed", 0), ("held", 500)]);
        let svg = draw_map(&run);
        let markers = markers(&svg);
        assert_eq!(markers.len(), 3, "{markers:?}");
        let colours: std::collections::BTreeSet<&str> =
            markers.iter().map(|m| m.2.as_str()).collect();
        assert_eq!(colours.len(), 3, "each target its own colour");
        for label in [
            "open · p99 1.0 ms",
            "closed · p99 1.0 ms",
            "held · p99 1.0 ms",
        ] {
            assert!(svg.contains(label), "no label {label:?}");
        }
        assert!(svg.contains("best corner"));
    }

    #[test]
    fn a_target_not_measured_has_no_marker_least_of_all_in_the_best_corner() {
        let mut run = faulty_run(&[("open", 1_200), ("gone", 0)]);
        run.targets[1].phases[1].tenants = vec![
            fixture::tenant("light", 0, 0, 10.0, None),
            fixture::tenant("bulk", 0, 0, 10.0, None),
        ];
        let svg = draw_map(&run);
        let markers = markers(&svg);
        assert_eq!(markers.len(), 1, "only open is drawn: {markers:?}");
        let (cx, cy) = best_corner(&svg);
        assert!(
            !markers.iter().any(|m| m.0 == cx && m.1 == cy),
            "a marker sits at (0, 0)"
        );
        assert!(!svg.contains("gone · p99"), "gone is labelled as if drawn");
        assert!(svg.contains("not measured, not drawn: gone (neither figure)"));
    }

    #[test]
    fn the_timeline_follows_the_heaviest_tenant_at_every_target_with_the_fault_shaded() {
        let run = faulty_run(&[("open", 1_200), ("closed", 0)]);
        let mut rows = Vec::new();
        for t in ["open", "closed"] {
            for second in 0..20u64 {
                for (tenant, admitted) in [("light", 20), ("bulk", 50 + second)] {
                    rows.push(SeriesRow {
                        target: t.to_owned(),
                        tenant: tenant.to_owned(),
                        second,
                        phase: String::new(),
                        counts: Counts {
                            offered: 120,
                            admitted,
                            ..Counts::default()
                        },
                        p50_us: 1_000,
                        p99_us: 1_000,
                        max_us: 1_000,
                    });
                }
            }
        }
        let overview = draw(&run, &rows, &Scales::of(&run, &rows));
        let (heaviest, timeline) = overview.timeline.as_ref().unwrap();
        assert_eq!(heaviest.name, "bulk");
        let svg = timeline.svg.as_ref().unwrap();
        assert!(svg.contains("bulk: admitted requests per second, every target"));
        for target in ["open", "closed", "limit 50 req/s"] {
            assert!(svg.contains(target), "no {target:?} in the legend");
        }
        let (r, g, b) = plots::FAULT_FILL_RGB;
        let shade = format!("fill=\"#{r:02X}{g:02X}{b:02X}\"");
        assert_eq!(
            svg.matches(&shade).count(),
            1,
            "one fault phase, one window"
        );
        assert_eq!(overview.maps.len(), 1);
        assert_eq!(overview.maps[0].1.file, "tradeoff-cut.svg");
    }
}
