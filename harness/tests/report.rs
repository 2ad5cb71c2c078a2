//! `report.html` and the plot files, from a synthetic results folder: structure, not looks
//! (for looks, render a real run with `renders_a_real_results_folder` and open it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use failmode::report::FAULT_FILL_RGB;
use failmode::report::html::{ReportError, write_report};
use support::{PHASES, TARGETS, folder_with, run};

/// Every `<svg>…</svg>` inlined in the page.
fn inline_svgs(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").expect("an unclosed <svg>") + start + 6;
        out.push(&rest[start..end]);
        rest = &rest[end..];
    }
    out
}

fn fault_fill() -> String {
    let (r, g, b) = FAULT_FILL_RGB;
    format!("#{r:02X}{g:02X}{b:02X}")
}

/// Shaded rectangles in one SVG, as (centre x ÷ width).
fn fault_rects(svg: &str) -> Vec<f64> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let width: f64 = doc
        .root_element()
        .attribute("width")
        .unwrap()
        .parse()
        .unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(fault_fill().as_str()))
        .map(|n| {
            let x: f64 = n.attribute("x").unwrap().parse().unwrap();
            let w: f64 = n.attribute("width").unwrap().parse().unwrap();
            (x + w / 2.0) / width
        })
        .collect()
}

/// The overview's plot files, in the page's order: each fault's map, then the timeline.
fn overview_files(folder: &Path, fault_phases: &[&str]) -> Vec<String> {
    fault_phases
        .iter()
        .map(|p| format!("tradeoff-{p}.svg"))
        .chain(["heaviest-tenant-admitted.svg".to_owned()])
        .map(|name| std::fs::read_to_string(folder.join("plots/overview").join(&name)).unwrap())
        .collect()
}

fn plot_files(folder: &Path) -> Vec<String> {
    TARGETS
        .iter()
        .flat_map(|t| ["latency", "admitted", "errors"].map(|k| format!("{t}-{k}.svg")))
        .map(|name| std::fs::read_to_string(folder.join("plots").join(&name)).unwrap())
        .collect()
}

#[test]
fn the_report_names_every_target_and_phase_and_is_self_contained() {
    let dir = folder_with(&run(Some("outage")));
    let path = write_report(dir.path()).unwrap();
    assert_eq!(path, dir.path().join("report.html"));
    let html = std::fs::read_to_string(&path).unwrap();

    for name in TARGETS.iter().chain(PHASES.iter().map(|p| &p.0)) {
        assert!(html.contains(name), "{name} is missing from the report");
    }
    for header in [
        "synthetic-outage",
        "0123abcd",
        "2026-01-02T03:04:05Z",
        ">7<",
    ] {
        assert!(html.contains(header), "{header} is missing from the header");
    }
    // Text from run.json is escaped, not interpreted.
    assert!(html.contains("note &lt;b&gt;one&lt;/b&gt;"));
    assert!(html.contains("with &lt;markup&gt; &amp; ampersands"));

    let without_xmlns = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(
        !without_xmlns.contains("http://"),
        "the report refers to the network"
    );
    assert!(
        !without_xmlns.contains("https://"),
        "the report refers to the network"
    );
    for tag in ["<script", "<link", "<img", "@import", "url("] {
        assert!(!html.contains(tag), "the report loads something: {tag}");
    }
}

#[test]
fn the_report_shows_how_each_target_was_started_so_its_client_settings_can_be_judged() {
    let mut run = run(Some("outage"));
    run.targets[0].command = vec!["node".into(), "server.mjs".into()];
    run.targets[0].env = [
        ("REDIS_COMMAND_TIMEOUT_MS".to_owned(), "20".to_owned()),
        ("PORT".to_owned(), "{port}".to_owned()),
    ]
    .into();
    let dir = folder_with(&run);
    let html = std::fs::read_to_string(write_report(dir.path()).unwrap()).unwrap();
    assert!(html.contains("REDIS_COMMAND_TIMEOUT_MS=20"), "{html}");
    assert!(html.contains("PORT={port}"));
    assert!(html.contains("node server.mjs"));
    assert_eq!(
        html.matches("Started with").count(),
        1,
        "only targets with settings say so"
    );
}

#[test]
fn every_plot_is_well_formed_svg_inline_and_on_disk() {
    let dir = folder_with(&run(Some("outage")));
    let html = std::fs::read_to_string(write_report(dir.path()).unwrap()).unwrap();

    let inline = inline_svgs(&html);
    // The overview's map of the one fault and its timeline, then three plots per target.
    assert_eq!(inline.len(), 2 + TARGETS.len() * 3);
    let mut files = overview_files(dir.path(), &["outage"]);
    files.extend(plot_files(dir.path()));
    for svg in inline
        .iter()
        .copied()
        .chain(files.iter().map(String::as_str))
    {
        let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}: {svg}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg");
    }
    // The inline plots are the files.
    for (a, b) in inline.iter().zip(&files) {
        assert_eq!(a.trim(), b.trim());
    }
    // Axes are labelled with units; series have legends.
    let all = files.concat();
    for label in [
        "time since start (s)",
        "latency (ms",
        "admitted (req/s)",
        "% of offered requests",
        "p50",
        "p99",
        "acme",
        "globex",
        "limit 50 req/s per caller",
        "429 limited",
        "5xx",
    ] {
        assert!(all.contains(label), "no {label:?} in the plots");
    }
}

#[test]
fn only_phases_with_faults_are_shaded() {
    let dir = folder_with(&run(Some("outage")));
    write_report(dir.path()).unwrap();
    for svg in plot_files(dir.path()) {
        let shaded = fault_rects(&svg);
        assert_eq!(shaded.len(), 1, "one fault phase, one shaded window");
        // The outage is the middle third of the run, so of the plot area too.
        assert!(
            (0.4..0.65).contains(&shaded[0]),
            "the window is not over the outage: centre at {:.2} of the width",
            shaded[0]
        );
    }

    let overview = overview_files(dir.path(), &["outage"]);
    assert!(
        fault_rects(&overview[0]).is_empty(),
        "the map is of the fault alone"
    );
    assert_eq!(
        fault_rects(&overview[1]).len(),
        1,
        "the timeline shades the fault"
    );

    let calm = folder_with(&run(None));
    let html = std::fs::read_to_string(write_report(calm.path()).unwrap()).unwrap();
    assert!(html.contains("No phase of this run has faults: no trade-off map."));
    for svg in plot_files(calm.path())
        .into_iter()
        .chain(overview_files(calm.path(), &[]))
    {
        assert!(
            fault_rects(&svg).is_empty(),
            "a run without faults is shaded"
        );
    }
    assert!(!html.contains("class=\"fault\""));
}

#[test]
fn the_report_opens_with_every_target_on_one_map_and_one_timeline() {
    let dir = folder_with(&run(Some("outage")));
    let html = std::fs::read_to_string(write_report(dir.path()).unwrap()).unwrap();
    let at = |text: &str| {
        html.find(text)
            .unwrap_or_else(|| panic!("no {text:?} in the report"))
    };
    assert!(at("id=\"overview\"") < at("<h2>The run</h2>"));
    assert!(at("id=\"overview\"") < at("Summary per target and phase"));
    let overview = overview_files(dir.path(), &["outage"]);
    for target in TARGETS {
        assert!(
            overview[0].contains(&format!("{target} · p99")),
            "{target} not on the map"
        );
        assert!(overview[1].contains(target), "{target} not on the timeline");
    }
    // The fixture's heaviest tenant by offered requests (120/s against 20/s).
    assert!(overview[1].contains("acme: admitted requests per second, every target"));
}

#[test]
fn a_missing_series_csv_is_named() {
    let dir = folder_with(&run(Some("outage")));
    std::fs::remove_file(dir.path().join("series.csv")).unwrap();
    let err = write_report(dir.path()).unwrap_err();
    assert!(matches!(err, ReportError::Read(_)), "{err:?}");
    assert!(err.to_string().contains("series.csv"), "{err}");
    assert!(!dir.path().join("report.html").exists());
}

#[test]
fn a_missing_run_json_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let err = write_report(dir.path()).unwrap_err();
    assert!(err.to_string().contains("run.json"), "{err}");
}

/// The names of a crowded run: the peers' real names, long ones among them.
const CROWD: [&str; 24] = [
    "reference",
    "express-rate-limit",
    "express-rate-limit-pass",
    "flask-limiter",
    "flask-limiter-swallow",
    "flask-limiter-fallback",
    "rate-limiter-flexible",
    "rate-limiter-flexible-insurance",
    "rate-limiter-flexible-node-redis",
    "fastify-rate-limit",
    "fastify-rate-limit-skip",
    "envoy-ratelimit",
    "envoy-ratelimit-deny",
    "envoy-ratelimit-local-cache",
    "go-redis-rate",
    "nginx-limit-req",
    "nginx-limit-req-share",
    "limitador",
    "limitador-cached",
    "traefik-ratelimit",
    "spring-cloud-gateway",
    "fail-open",
    "fail-closed",
    "retry-then-deny",
];

/// [`CROWD`] under the outage, at its worst tenant: twenty in the best corner (more names
/// than the chart's height holds, so they go to the key under the map), two refusing
/// everything, the rest spread over the map.
fn crowded_run() -> failmode::results::RunResult {
    let two = run(Some("outage"));
    let mut crowd = two.clone();
    crowd.targets = CROWD
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut t = two.targets[i % 2].clone();
            t.name = (*name).to_owned();
            let outage = t.phases.iter_mut().find(|p| p.name == "outage").unwrap();
            let (over, denied) = match i {
                0..20 => (0.0, 0.0),
                20..22 => (0.0, 1.0),
                _ => (0.1 * i as f64, 0.02 * (i % 5) as f64),
            };
            for tenant in &mut outage.tenants {
                tenant.over_admission = Some(over);
                tenant.wrongful_denial = Some(denied);
            }
            t
        })
        .collect();
    crowd
}

#[test]
fn the_report_reads_at_1400_px_with_nothing_cut_scrolled_or_covered_even_with_two_dozen_targets() {
    for run in [run(Some("outage")), crowded_run()] {
        let dir = folder_with(&run);
        let html = std::fs::read_to_string(write_report(dir.path()).unwrap()).unwrap();
        let titles = support::browser::assert_reads_at_window_width(&html);
        // The map, the heaviest tenant's timeline, then three plots per target.
        assert_eq!(titles.len(), 2 + 3 * run.targets.len(), "{titles:?}");
        assert!(titles[0].starts_with("outage"), "{titles:?}");
        if run.targets.len() == CROWD.len() {
            assert!(
                html.contains("at 0.0 %, 0.0 %: "),
                "the twenty in the best corner are listed in the key under the map"
            );
        }
        for target in &run.targets {
            assert!(
                html.contains(&format!("{} · p99", target.name)),
                "{} is labelled neither on the map nor in its key",
                target.name
            );
        }
    }
}
