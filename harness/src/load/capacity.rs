//! How many requests a second this machine's generator sends, so a run that asks more can say
//! so before it starts (and suggest `--worker`) instead of dropping its backlog for minutes.
//!
//! Two sources, one cache (`capacity.json` in the user's cache folder, per failmode version,
//! build profile and CPU count):
//! - `just bench-loadgen` writes the highest rate its engine held on this machine (no drops,
//!   every tenant within 0.5 % of its rate, the median of its runs) with [`record_benchmark`]:
//!   the figure its table shows, and the one a run compares itself with while it is fresh;
//! - without one (an installed binary has no checkout to run a benchmark from), a run measures:
//!   the calibration offers far more than any machine sends (200,000 a second) for 400 ms to a
//!   loopback HTTP server in this process, which answers at once, and counts the answers: the
//!   engine's own ceiling, with a server as cheap as a target can be sharing the machine. Only
//!   the first large run on a machine pays the 400 ms.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http_body_util::Empty;
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{
    Arrival, Caller, Client, LoadError, LoadPlan, Outcome, Recorder, Role, Rotation, Sample, Share,
    Spread, TargetPlan, TenantPlan, try_run,
};
use crate::identity::CallerIdentity;

/// Below this a run's total rate needs no calibration: the engine holds 5,000 a second with
/// no drops on the project's 2-core machine (docs/bench-loadgen.md).
pub const CALIBRATE_ABOVE_PER_S: f64 = 5_000.0;

/// What the calibration offers: more than any one process sends.
const OFFERED_PER_S: f64 = 200_000.0;
const MEASURED_FOR: Duration = Duration::from_millis(400);

/// A cached figure older than this is measured again: the machine's load when it was taken
/// (a build beside it, say) should not speak for it for ever.
const CACHED_FOR: Duration = Duration::from_secs(7 * 24 * 3600);

/// A figure of this machine's generator, as cached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    pub requests_per_s: f64,
    /// failmode's version, build profile and the CPUs it saw: a figure of another build or
    /// machine is measured again.
    pub measured_by: String,
    /// When, in seconds since the Unix epoch.
    pub measured_at_s: u64,
    /// How: the calibration, or a benchmark's run (named with its revision).
    #[serde(default = "calibration")]
    pub how: String,
}

fn calibration() -> String {
    format!(
        "a {} ms calibration: answers counted with {OFFERED_PER_S:.0} offered a second",
        MEASURED_FOR.as_millis()
    )
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Who measures: this build on this many CPUs.
fn this_build() -> String {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    format!(
        "failmode {} ({profile}) on {cpus} CPUs",
        env!("CARGO_PKG_VERSION")
    )
}

/// The cached figure in `cache_dir`, if this build measured it in the last week.
pub fn cached(cache_dir: &Path) -> Option<Capacity> {
    let text = std::fs::read_to_string(cache_file(cache_dir)).ok()?;
    serde_json::from_str::<Capacity>(&text).ok().filter(|c| {
        c.measured_by == this_build()
            && c.requests_per_s > 0.0
            && now_s().saturating_sub(c.measured_at_s) < CACHED_FOR.as_secs()
    })
}

fn cache_file(cache_dir: &Path) -> PathBuf {
    cache_dir.join("capacity.json")
}

/// The cached figure, else a new measurement, cached in `cache_dir` when there is one (a
/// cache that cannot be written only means measuring again next time).
pub async fn known_or_measured(cache_dir: Option<&Path>) -> Result<Capacity, LoadError> {
    if let Some(found) = cache_dir.and_then(cached) {
        return Ok(found);
    }
    let capacity = Capacity {
        requests_per_s: measure().await?,
        measured_by: this_build(),
        measured_at_s: now_s(),
        how: calibration(),
    };
    if let Some(dir) = cache_dir {
        let _ = write(dir, &capacity);
    }
    Ok(capacity)
}

fn write(cache_dir: &Path, capacity: &Capacity) -> std::io::Result<PathBuf> {
    let json = serde_json::to_string_pretty(capacity).map_err(std::io::Error::other)?;
    std::fs::create_dir_all(cache_dir)?;
    let file = cache_file(cache_dir);
    std::fs::write(&file, json + "\n")?;
    Ok(file)
}

/// Records a benchmark's ceiling as this build's capacity on this machine (`how` says which
/// benchmark run); returns the file written.
pub fn record_benchmark(
    cache_dir: &Path,
    requests_per_s: f64,
    how: String,
) -> std::io::Result<PathBuf> {
    write(
        cache_dir,
        &Capacity {
            requests_per_s,
            measured_by: this_build(),
            measured_at_s: now_s(),
            how,
        },
    )
}

/// Answers counted; nothing else kept.
#[derive(Default)]
struct Answered(AtomicU64);

impl Recorder for Answered {
    fn record_repeated(&self, sample: &Sample, n: u64) {
        if sample.outcome == Outcome::Admitted {
            self.0.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// Requests a second the engine got answered by a loopback server in this process.
pub async fn measure() -> Result<f64, LoadError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(LoadError::Start)?;
    let addr = listener.local_addr().map_err(LoadError::Start)?;
    let stop = CancellationToken::new();
    let server = tokio::spawn(serve(listener, stop.clone()));
    let streams = std::thread::available_parallelism().map_or(1, usize::from);
    let plan = LoadPlan {
        targets: vec![TargetPlan {
            name: "calibration".into(),
            instances: Rotation::new([addr]),
            path: "/".into(),
            caller: CallerIdentity::Header {
                header: "x-caller".into(),
            },
            connections: super::Connections::default(),
        }],
        // A stream per core, so the calibration splits over as many senders as a large run.
        tenants: (0..streams)
            .map(|i| TenantPlan {
                name: format!("calibration-{i}"),
                caller: Caller::Key(format!("calibration-{i}")),
                rate_per_s: OFFERED_PER_S / streams as f64,
                arrival: Arrival::Uniform,
                spread: Spread::RoundRobin,
                client: Client::None,
            })
            .collect(),
        duration: MEASURED_FOR,
        seed: 0,
        request_timeout: Duration::from_secs(1),
        max_in_flight_per_target: 1_000,
        role: Role::Sender(Share::WHOLE),
        senders: super::Senders::Auto,
    };
    let answered = Arc::new(Answered::default());
    let start = Instant::now() + Duration::from_millis(20);
    let result = try_run(plan, start, answered.clone(), CancellationToken::new()).await;
    stop.cancel();
    let _ = server.await;
    result?;
    match answered.0.load(Ordering::Relaxed) {
        // Not a capacity: the loopback server never answered.
        0 => Err(LoadError::Start(std::io::Error::other(
            "the calibration's loopback server answered nothing",
        ))),
        n => Ok(n as f64 / MEASURED_FOR.as_secs_f64()),
    }
}

/// HTTP/1.1, keep-alive, 200 with an empty body to anything, until `stop`.
pub(crate) async fn serve(listener: tokio::net::TcpListener, stop: CancellationToken) {
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let stop = stop.clone();
        tokio::spawn(async move {
            let answer = service_fn(|_request| async {
                Ok::<_, Infallible>(hyper::Response::new(Empty::<Bytes>::new()))
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), answer);
            tokio::select! {
                () = stop.cancelled() => {}
                _ = connection => {}
            }
        });
    }
}

/// What a run asking `offered` requests a second of this process should be told, if the
/// generator measured `capacity`: how far over it is, and how many workers would share it.
pub fn warning(offered_per_s: f64, capacity: &Capacity) -> Option<String> {
    let can = capacity.requests_per_s;
    if offered_per_s <= can {
        return None;
    }
    let workers = (offered_per_s / can).ceil();
    Some(format!(
        "this run asks {offered_per_s:.0} requests a second of this machine's load generator, \
         more than the {can:.0} it is known to send ({}, by {}): it may fall behind, drop what \
         it cannot send and be untrusted. Lower the rates, or split the load over \
         {workers:.0} or more machines with --worker K/N (docs/distributed.md)",
        capacity.measured_by, capacity.how
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(requests_per_s: f64) -> Capacity {
        Capacity {
            requests_per_s,
            measured_by: this_build(),
            measured_at_s: now_s(),
            how: calibration(),
        }
    }

    #[test]
    fn a_benchmarks_ceiling_is_the_capacity_runs_compare_with_and_says_where_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let how = "just bench-loadgen at abc1234".to_owned();
        let file = record_benchmark(dir.path(), 20_000.0, how.clone()).unwrap();
        assert_eq!(file, cache_file(dir.path()));
        let found = cached(dir.path()).unwrap();
        assert_eq!((found.requests_per_s, &found.how), (20_000.0, &how));
        let told = warning(30_000.0, &found).unwrap();
        assert!(
            told.contains("than the 20000 it") && told.contains(&how),
            "{told}"
        );
    }

    #[test]
    fn a_capacity_cached_before_it_said_how_reads_as_a_calibration() {
        let json = format!(
            r#"{{"requests_per_s": 9000.0, "measured_by": "{}", "measured_at_s": {}}}"#,
            this_build(),
            now_s()
        );
        let old: Capacity = serde_json::from_str(&json).unwrap();
        assert_eq!(old.how, calibration());
    }

    #[test]
    fn a_run_within_the_capacity_is_not_warned_and_one_above_is_told_how_many_workers() {
        assert_eq!(warning(30_000.0, &measured(30_000.0)), None);
        let told = warning(70_000.0, &measured(30_000.0)).unwrap();
        assert!(told.contains("asks 70000 requests a second"), "{told}");
        assert!(
            told.contains("more than the 30000 it is known to send"),
            "{told}"
        );
        assert!(
            told.contains("over 3 or more machines with --worker K/N"),
            "{told}"
        );
    }

    #[test]
    fn a_cached_figure_is_used_only_by_the_build_that_measured_it_within_a_week() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(cached(dir.path()), None);
        let other = Capacity {
            measured_by: "failmode 0.0.1 (release) on 64 CPUs".into(),
            ..measured(1_000.0)
        };
        let old = Capacity {
            measured_at_s: now_s() - CACHED_FOR.as_secs() - 1,
            ..measured(1_000.0)
        };
        for refused in [other, old] {
            let json = serde_json::to_string(&refused).unwrap();
            std::fs::write(cache_file(dir.path()), json).unwrap();
            assert_eq!(cached(dir.path()), None, "{refused:?}");
        }
        std::fs::write(
            cache_file(dir.path()),
            serde_json::to_string(&measured(1_000.0)).unwrap(),
        )
        .unwrap();
        assert_eq!(cached(dir.path()), Some(measured(1_000.0)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_calibration_measures_answers_and_caches_them_for_the_next_run() {
        let dir = tempfile::tempdir().unwrap();
        let first = known_or_measured(Some(dir.path())).await.unwrap();
        assert!(
            first.requests_per_s.is_finite() && first.requests_per_s > 0.0,
            "{first:?}"
        );
        // Never more than offered: answers are counted, not requests scheduled.
        assert!(first.requests_per_s <= OFFERED_PER_S, "{first:?}");
        assert_eq!(cached(dir.path()), Some(first.clone()));
        assert_eq!(known_or_measured(Some(dir.path())).await.unwrap(), first);
    }
}
