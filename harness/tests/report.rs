//! `report.html` and the plot files, from a synthetic results folder: structure, not looks
//! (for looks, render a real run with `renders_a_real_results_folder` and open it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::Path;

use failmode::metrics::Counts;
use failmode::report::html::{FAULT_FILL_RGB, ReportError, write_report};
use failmode::results::read::SERIES_HEADER;
use failmode::results::{
    LoadTotals, Percentiles, PhaseResult, RunResult, SCHEMA_VERSION, TargetResult, TenantResult,
};

const TARGETS: [&str; 2] = ["alpha-open", "beta-closed"];
const TENANTS: [(&str, u64); 2] = [("acme", 120), ("globex", 20)];
/// (name, start s, end s, faults)
const PHASES: [(&str, f64, f64, &[&str]); 3] = [
    ("steady", 0.0, 10.0, &[]),
    ("outage", 10.0, 20.0, &["down"]),
    ("recovery", 20.0, 30.0, &[]),
];

fn tenant(name: &str, offered: u64, admitted: u64, length_s: f64) -> TenantResult {
    let allowance = 50.0 * length_s;
    let entitled = (offered as f64).min(allowance);
    TenantResult {
        name: name.into(),
        counts: Counts {
            offered,
            admitted,
            limited: offered - admitted,
            ..Counts::default()
        },
        allowance,
        entitled,
        over_admission: ((admitted as f64 - allowance) / allowance).max(0.0),
        wrongful_denial: ((entitled - admitted as f64) / entitled).max(0.0),
        admitted_per_s: admitted as f64 / length_s,
        latency_us: Percentiles {
            p50: 500,
            p90: 800,
            p99: 2_000,
            p999: 20_000,
            max: 30_000,
        },
        service_time_us: Percentiles::default(),
    }
}

/// Two targets × three phases × two tenants; `fault_phase` names the phase with faults, if any.
fn run(fault_phase: Option<&str>) -> RunResult {
    let targets = TARGETS
        .iter()
        .map(|name| TargetResult {
            name: (*name).into(),
            description: format!("{name} under test"),
            instances: 4,
            command: Vec::new(),
            env: Default::default(),
            send_lag_us: Percentiles::default(),
            events: Vec::new(),
            phases: PHASES
                .iter()
                .map(|(phase, start_s, end_s, faults)| {
                    let length = end_s - start_s;
                    let tenants: Vec<TenantResult> = TENANTS
                        .iter()
                        .map(|(t, rate)| {
                            let offered = rate * length as u64;
                            tenant(t, offered, offered.min(50 * length as u64), length)
                        })
                        .collect();
                    let mut all = tenant(
                        "all",
                        tenants.iter().map(|t| t.counts.offered).sum(),
                        tenants.iter().map(|t| t.counts.admitted).sum(),
                        length,
                    );
                    all.allowance = 100.0 * length;
                    let faulty = fault_phase == Some(*phase);
                    PhaseResult {
                        name: (*phase).into(),
                        start_s: *start_s,
                        end_s: *end_s,
                        faults: if faulty {
                            faults.iter().map(|f| (*f).to_owned()).collect()
                        } else {
                            Vec::new()
                        },
                        faults_applied_at_s: faulty.then_some(*start_s),
                        faults_removed_at_s: faulty.then_some(*end_s),
                        fallbacks: None,
                        store_commands: Some(1_000),
                        store_amplification: Some(1.0),
                        tenants,
                        all,
                    }
                })
                .collect(),
        })
        .collect();
    RunResult {
        schema_version: SCHEMA_VERSION,
        scenario: "synthetic-outage".into(),
        description: "A synthetic run with <markup> & ampersands.".into(),
        seed: 7,
        duration_scale: 1.0,
        git_revision: Some("0123abcd".into()),
        started_at: "2026-01-02T03:04:05Z".into(),
        duration_s: 30.0,
        partial: false,
        limit: 50.0,
        window_s: 1.0,
        load: LoadTotals::default(),
        notes: vec!["note <b>one</b>".into()],
        targets,
    }
}

/// One row per second × target × tenant, and the `"all"` rows; the second target refuses
/// everything during the outage with 500s.
fn series() -> String {
    let mut csv = format!("{SERIES_HEADER}\n");
    for (ti, target) in TARGETS.iter().enumerate() {
        for second in 0..30u64 {
            let (phase, outage) = match second {
                0..10 => ("steady", false),
                10..20 => ("outage", true),
                _ => ("recovery", false),
            };
            let mut all = [0u64; 4];
            let (p50, p99) = if outage {
                (40_000, 90_000)
            } else {
                (500, 1_500)
            };
            for (name, rate) in TENANTS {
                let (admitted, limited, server_error) = if outage && ti == 1 {
                    (0, 0, rate)
                } else if outage {
                    (rate, 0, 0)
                } else {
                    (rate.min(50), rate.saturating_sub(50), 0)
                };
                for (sum, v) in all.iter_mut().zip([rate, admitted, limited, server_error]) {
                    *sum += v;
                }
                writeln!(
                    csv,
                    "{target},{name},{second},{phase},{rate},{admitted},{limited},0,{server_error},0,0,0,{p50},{p99},{p99}"
                )
                .unwrap();
            }
            let [offered, admitted, limited, server_error] = all;
            writeln!(
                csv,
                "{target},all,{second},{phase},{offered},{admitted},{limited},0,{server_error},0,0,0,{p50},{p99},{p99}"
            )
            .unwrap();
        }
    }
    csv
}

fn folder_with(run: &RunResult) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("run.json"),
        serde_json::to_string_pretty(run).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.path().join("series.csv"), series()).unwrap();
    dir
}

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
    assert_eq!(inline.len(), TARGETS.len() * 3);
    let files = plot_files(dir.path());
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
        "limit 50 req/s per tenant",
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

    let calm = folder_with(&run(None));
    let html = std::fs::read_to_string(write_report(calm.path()).unwrap()).unwrap();
    for svg in plot_files(calm.path()) {
        assert!(
            fault_rects(&svg).is_empty(),
            "a run without faults is shaded"
        );
    }
    assert!(!html.contains("class=\"fault\""));
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
