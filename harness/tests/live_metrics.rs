//! `failmode run --metrics-listen`: scraped while a scaled-down run goes, its last scrape agrees
//! with `run.json`, every metric the Grafana dashboard queries is in a live scrape, and a port
//! in use is refused before anything starts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

use failmode::results::RunResult;
use support::{fixture_path, workspace};

/// One count of a cell's.
type Count = fn(&failmode::metrics::Counts) -> u64;

/// One sample of a scrape: its metric name and labels, and its value.
type Sample = (String, BTreeMap<String, String>, f64);

/// The samples of Prometheus text. Hand-written: this test reads the few lines it needs, and
/// label values here hold no escaped quotes.
fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split("\",")
                .filter(|kv| !kv.is_empty())
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k.to_owned(), v.trim_matches('"').to_owned()))
                })
                .collect();
            Some((name.to_owned(), labels, value.parse().ok()?))
        })
        .collect()
}

/// The value of `name` with these labels (and maybe more), if the scrape has it.
fn value(s: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    s.iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
        })
        .map(|(_, _, v)| *v)
}

/// `GET /metrics`, or `None` when nothing answers.
fn scrape(addr: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET /metrics HTTP/1.0\r\nHost: failmode\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200").then(|| body.to_owned())
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// Every `failmode_…` metric name the dashboard's queries and annotations use.
fn dashboard_metrics() -> Vec<String> {
    let path = workspace().join("deploy/grafana/failmode.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut exprs = Vec::new();
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("expr" | "definition", serde_json::Value::String(s)) => {
                            out.push(s.clone())
                        }
                        _ => walk(v, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(&dashboard, &mut exprs);
    let mut names: Vec<String> = exprs
        .iter()
        .flat_map(|e| {
            e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("failmode_"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn a_run_scraped_as_it_goes_ends_with_run_jsons_counts_and_every_dashboard_metric() {
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("run");
    let addr = free_port();
    let port = addr.port().to_string();
    let extra = ["--metrics-listen", &port, "--metrics-linger", "3s"];
    let mut child = support::fixture_command(&fixture_path("oracle-drops.toml"), &folder, &extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut scrapes: Vec<Vec<Sample>> = Vec::new();
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the run did not end");
        if let Some(text) = scrape(addr) {
            let s = samples(&text);
            let written = value(&s, "failmode_results_written", &[]) == Some(1.0);
            scrapes.push(s);
            if written {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(scrapes.len() > 10, "{} scrapes", scrapes.len());

    // While the load went: the fault phase on, its fault active, requests in flight or done.
    let during: Vec<&Vec<Sample>> = scrapes
        .iter()
        .filter(|s| value(s, "failmode_load_done", &[]) == Some(0.0))
        .filter(|s| value(s, "failmode_phase_active", &[("phase", "fault")]) == Some(1.0))
        .collect();
    assert!(!during.is_empty(), "no scrape in the fault phase");
    assert!(during.iter().all(|s| {
        value(s, "failmode_fault_active", &[("phase", "fault")]) == Some(1.0)
            && value(s, "failmode_phase_active", &[("phase", "steady")]) == Some(0.0)
    }));
    let live_names: Vec<&str> = during[0].iter().map(|(n, _, _)| n.as_str()).collect();
    for metric in dashboard_metrics() {
        assert!(
            live_names.contains(&metric.as_str()),
            "the dashboard queries {metric}, not in a live scrape: {live_names:?}"
        );
    }

    // The last scrape, the results written, agrees with run.json count for count.
    let last = scrapes.last().unwrap();
    assert_eq!(value(last, "failmode_results_written", &[]), Some(1.0));
    assert_eq!(value(last, "failmode_load_done", &[]), Some(1.0));
    let r = RunResult::read(&folder).unwrap();
    let mut compared = 0;
    for target in &r.targets {
        let t = target.name.as_str();
        assert_eq!(
            value(last, "failmode_in_flight", &[("target", t)]),
            Some(0.0)
        );
        for tenant in r.tenants.iter().map(|t| t.name.as_str()) {
            let cells: Vec<_> = target
                .phases
                .iter()
                .map(|p| p.tenants.iter().find(|c| c.name == tenant).unwrap())
                .collect();
            let sum = |f: Count| -> f64 { cells.iter().map(|c| f(&c.counts)).sum::<u64>() as f64 };
            let by_outcome: [(&str, Count); 8] = [
                ("2xx", |c| c.admitted),
                ("429", |c| c.limited),
                ("503", |c| c.unavailable),
                ("other_5xx", |c| c.server_error),
                ("transport_error", |c| c.transport_error),
                ("other_status", |c| c.other_status),
                ("dropped", |c| c.dropped),
                ("throttled", |c| c.throttled),
            ];
            for (outcome, count) in by_outcome {
                let labels = [("target", t), ("tenant", tenant), ("outcome", outcome)];
                assert_eq!(
                    value(last, "failmode_requests_total", &labels),
                    Some(sum(count)),
                    "{t} {tenant} {outcome}"
                );
                compared += 1;
            }
            // One latency per request offered and not refused by its own client.
            let labels = [("target", t), ("tenant", tenant)];
            assert_eq!(
                value(last, "failmode_latency_seconds_count", &labels),
                Some(sum(|c| c.offered - c.throttled))
            );
            let inf = [("target", t), ("tenant", tenant), ("le", "+Inf")];
            assert_eq!(
                value(last, "failmode_latency_seconds_bucket", &inf),
                Some(sum(|c| c.offered - c.throttled))
            );
        }
    }
    assert!(compared > 0);
    // Drops happened (the fixture's in-flight bound), and the scrape saw them.
    assert!(r.load.dropped > 0);
}

#[test]
fn a_metrics_port_in_use_is_refused_before_anything_starts() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("run");
    let run = support::run_fixture(
        &fixture_path("oracle-drops.toml"),
        &folder,
        &["--metrics-listen", &addr.to_string()],
    );
    let (stdout, stderr) = support::output_text(&run);
    assert_eq!(run.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {addr} for --metrics-listen")),
        "{stderr}"
    );
    assert!(!folder.exists(), "nothing written");
}
