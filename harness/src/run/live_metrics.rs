//! `failmode run --metrics-listen ADDR`: the run as Prometheus text while it goes, next to the
//! service's own metrics in the user's Prometheus and Grafana (`deploy/grafana/`).
//!
//! Every figure is read from the collector at the scrape, never counted a second time on the
//! send path (a scrape holds the collector's lock only to sum counts and sort histograms into
//! buckets), and the counts are the very ones `run.json` is built from (its phases' cells,
//! summed), so the last scrape agrees with the results. The
//! endpoint is bound before anything starts (a port in use fails the run at once) and stays up
//! until the results are written, then `--metrics-linger` longer for a last scrape.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::metrics::{Buckets, Collector, Counts};
use crate::scenario::Scenario;

/// Where and how long to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveMetricsOptions {
    pub listen: SocketAddr,
    /// How long the endpoint stays up once the results are written.
    pub linger: Duration,
}

/// The latency buckets, seconds: from a loopback answer to the longest request timeout.
const BUCKETS_S: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// What a scrape reads: the run's shape, its collector once the load is planned, and where the
/// run is.
#[derive(Debug)]
pub struct LiveRun {
    scenario: String,
    /// The timeline this process plays: its phases and their faults.
    timeline: Scenario,
    view: OnceLock<(Vec<String>, Arc<Collector>)>,
    start: OnceLock<Instant>,
    load_done: AtomicBool,
    written: AtomicBool,
}

impl LiveRun {
    pub fn new(timeline: &Scenario) -> Self {
        Self {
            scenario: timeline.name.clone(),
            timeline: timeline.clone(),
            view: OnceLock::new(),
            start: OnceLock::new(),
            load_done: AtomicBool::new(false),
            written: AtomicBool::new(false),
        }
    }

    /// The targets, by name in the collector's order, and the collector.
    pub fn measuring(&self, names: Vec<String>, collector: Arc<Collector>) {
        let _ = self.view.set((names, collector));
    }

    pub fn started(&self, at: Instant) {
        let _ = self.start.set(at);
    }

    /// The load is over: every request is settled and counted.
    pub fn load_done(&self) {
        self.load_done.store(true, Ordering::Relaxed);
    }

    pub fn written(&self) {
        self.written.store(true, Ordering::Relaxed);
    }

    /// The Prometheus text of this instant.
    pub fn scrape(self: &Arc<Self>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape(self.clone())));
        let mut out = String::new();
        // Writing to a String cannot fail; an encoder error is a bug in a label, shown as text.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
            out = format!("# failmode: cannot encode the metrics: {e}\n");
        }
        out
    }
}

/// One scrape's collector (prometheus-client calls it with the encoder).
#[derive(Debug)]
struct Scrape(Arc<LiveRun>);

type Labels<'a> = Vec<(&'static str, &'a str)>;

/// The outcomes a request is counted under, as `outcome` label values.
fn outcomes(c: &Counts) -> [(&'static str, u64); 8] {
    [
        ("2xx", c.admitted),
        ("429", c.limited),
        ("503", c.unavailable),
        ("other_5xx", c.server_error),
        ("transport_error", c.transport_error),
        ("other_status", c.other_status),
        ("dropped", c.dropped),
        ("throttled", c.throttled),
    ]
}

impl prometheus_client::collector::Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let run = &self.0;
        let scenario = run.scenario.as_str();
        let elapsed = run.start.get().map(Instant::elapsed);
        let flag = |b: bool| i64::from(b);
        gauge(
            &mut encoder,
            "failmode_run_started",
            "1 once the load's clock started, with the scenario's name",
            &[(vec![("scenario", scenario)], flag(elapsed.is_some()))],
        )?;
        gauge(
            &mut encoder,
            "failmode_elapsed_seconds",
            "Seconds since the load's start (0 before it)",
            &[(vec![], elapsed.map_or(0.0, |e| e.as_secs_f64()))],
        )?;
        let done = run.load_done.load(Ordering::Relaxed);
        gauge(
            &mut encoder,
            "failmode_load_done",
            "1 once the load is over and every request is counted: the counts are final",
            &[(vec![], flag(done))],
        )?;
        gauge(
            &mut encoder,
            "failmode_results_written",
            "1 once the results folder is written",
            &[(vec![], flag(run.written.load(Ordering::Relaxed)))],
        )?;
        let current = elapsed
            .filter(|_| !done)
            .and_then(|e| run.timeline.phase_at(e));
        let phases = &run.timeline.phases;
        let phase_rows: Vec<_> = phases
            .iter()
            .enumerate()
            .map(|(p, phase)| {
                (
                    vec![("phase", phase.name.as_str())],
                    flag(current == Some(p)),
                )
            })
            .collect();
        gauge(
            &mut encoder,
            "failmode_phase_active",
            "1 for the phase the timeline is in",
            &phase_rows,
        )?;
        // Every fault of the timeline, 1 while its phase is on: Grafana draws these as
        // annotations. The faults are applied on every target at once.
        let texts: Vec<(usize, String)> = phases
            .iter()
            .enumerate()
            .flat_map(|(p, phase)| phase.faults.iter().map(move |f| (p, f.to_string())))
            .collect();
        let fault_rows: Vec<_> = texts
            .iter()
            .map(|(p, text)| {
                let labels = vec![
                    ("phase", phases[*p].name.as_str()),
                    ("fault", text.as_str()),
                ];
                (labels, flag(current == Some(*p)))
            })
            .collect();
        gauge(
            &mut encoder,
            "failmode_fault_active",
            "1 while the fault is in place (by the timeline: its phase is on)",
            &fault_rows,
        )?;

        let Some((names, collector)) = run.view.get() else {
            return Ok(());
        };
        let view = collector.scrape_view(&BUCKETS_S);
        let tenants: Vec<&str> = run
            .timeline
            .tenants
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        let mut requests = Vec::new();
        let mut latency = Vec::new();
        for (t, per_tenant) in view.cells.iter().enumerate() {
            for (n, (counts, buckets)) in per_tenant.iter().enumerate() {
                let labels = vec![("target", names[t].as_str()), ("tenant", tenants[n])];
                for (outcome, count) in outcomes(counts) {
                    let mut l = labels.clone();
                    l.push(("outcome", outcome));
                    requests.push((l, count));
                }
                latency.push((labels, buckets));
            }
        }
        let mut m = encoder.encode_descriptor(
            "failmode_requests",
            "Requests scheduled in the timeline's phases, by what became of them",
            None,
            MetricType::Counter,
        )?;
        for (labels, count) in &requests {
            m.encode_family(labels)?
                .encode_counter::<prometheus_client::encoding::NoLabelSet, u64, u64>(count, None)?;
        }
        histograms(
            &mut encoder,
            "failmode_latency_seconds",
            "Latency from the scheduled send (a dropped request counts as the request timeout)",
            &latency,
        )?;
        let lag: Vec<_> = view
            .send_lag
            .iter()
            .enumerate()
            .map(|(t, b)| (vec![("target", names[t].as_str())], b))
            .collect();
        histograms(
            &mut encoder,
            "failmode_send_lag_seconds",
            "The load generator's lateness: actual minus scheduled send",
            &lag,
        )?;
        let in_flight: Vec<_> = names
            .iter()
            .enumerate()
            .map(|(t, name)| {
                let n = collector.live(t).in_flight();
                (
                    vec![("target", name.as_str())],
                    i64::try_from(n).unwrap_or(i64::MAX),
                )
            })
            .collect();
        gauge(
            &mut encoder,
            "failmode_in_flight",
            "Requests sent and not yet answered",
            &in_flight,
        )
    }
}

fn gauge<V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels<'_>, V)],
) -> Result<(), std::fmt::Error> {
    let mut m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        m.encode_family(labels)?.encode_gauge(v)?;
    }
    Ok(())
}

fn histograms(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels<'_>, &Buckets)],
) -> Result<(), std::fmt::Error> {
    let mut m = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, b) in rows {
        m.encode_family(labels)?
            .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                b.sum_s, b.count, &b.buckets, None,
            )?;
    }
    Ok(())
}

/// Why the endpoint cannot serve.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} for --metrics-listen: {source}")]
pub struct ListenError {
    addr: SocketAddr,
    source: std::io::Error,
}

/// The endpoint, bound: `GET /metrics` (any path answers the same) until [`Endpoint::close`],
/// or until it is dropped (a run that failed midway).
#[derive(Debug)]
pub struct Endpoint {
    run: Arc<LiveRun>,
    linger: Duration,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    pub addr: SocketAddr,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Endpoint {
    pub async fn bind(opts: LiveMetricsOptions, run: Arc<LiveRun>) -> Result<Self, ListenError> {
        let listener = tokio::net::TcpListener::bind(opts.listen)
            .await
            .map_err(|source| ListenError {
                addr: opts.listen,
                source,
            })?;
        let addr = listener.local_addr().unwrap_or(opts.listen);
        let stop = CancellationToken::new();
        let serving = run.clone();
        let app = axum::Router::new().fallback(move || {
            let run = serving.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    run.scrape(),
                )
            }
        });
        let shutdown = stop.clone();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await;
        });
        Ok(Self {
            run,
            linger: opts.linger,
            stop,
            task: Some(task),
            addr,
        })
    }

    /// The results are written: serves `linger` longer (not after an interrupt), then stops.
    pub async fn close(mut self, interrupt: &CancellationToken) {
        self.run.written();
        tokio::select! {
            () = tokio::time::sleep(self.linger) => {}
            () = interrupt.cancelled() => {}
        }
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            // A scraper holding its connection open does not keep the run from ending.
            let _ = tokio::time::timeout(Duration::from_secs(1), task).await;
        }
    }
}
