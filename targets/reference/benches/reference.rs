//! `just bench-reference`: what the reference limiter costs, measured side by side in one run
//! against the release binary and a real redis-server, reported as ratios.
//!
//! 1. Healthy: `/api` (local share, sliding window in Redis) and `/unlimited` (same server, no
//!    decision) interleaved at 2,000 req/s in total. Target: the decision adds <= 0.3 ms at p99.
//! 2. Redis hung (SIGSTOP): `/timeout-only` (no breaker: every request waits for the timeout)
//!    and `/api` (breaker open after five timeouts) interleaved at the same rate. Targets: p99
//!    of the former <= timeout + 3 ms; median of the latter within 2x the healthy median.
//!
//! 3. Exactness (`reference/exactness.rs`): a caller at 120 a second over four instances,
//!    limit 50: admitted a second with Redis healthy (target >= 49.75), hung (50.0 +/- 0.5
//!    once the breakers are open), and in the first second after it answers again (<= 55).
//! 4. A flood of callers during an outage (`reference/flood.rs`): acme's p99 beside 4,000 a
//!    second of distinct keys evicting from capped maps, and beside as many recurring keys.
//! 5. Throughput through one Redis (`reference/throughput.rs`): decisions a second at a p99 of
//!    at most 1 ms, beside the floor (the same script by EVALSHA from a plain client). Target:
//!    at least 15,000.
//!
//! Flags: `--seconds N` (phases 1–4) and `--rate R` (phases 1–2), `--throughput-rates
//! 2500,5000,…`, `--step-seconds N` (phase 5), `--exactness-only`, `--flood-only`, `--throughput-only`.
//!
//! Latency is taken from the actual send (the server's cost) and, separately, from the
//! scheduled send (what a caller of an open-model client sees, including this generator's
//! own lateness).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "reference/exactness.rs"]
mod exactness;
#[path = "reference/flood.rs"]
mod flood;
#[path = "reference/open_model.rs"]
mod open_model;
#[path = "../tests/support/mod.rs"]
mod support;
#[path = "reference/throughput.rs"]
mod throughput;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use open_model::Timing;
use support::RedisServer;

const STORE_TIMEOUT_MS: f64 = 20.0;

#[derive(Debug)]
struct Route {
    from_send: Histogram<u64>,
    from_schedule: Histogram<u64>,
    statuses: BTreeMap<u16, u64>,
    errors: u64,
}

impl Route {
    fn new() -> Self {
        Self {
            from_send: Histogram::new_with_bounds(1, 60_000_000, 3).unwrap(),
            from_schedule: Histogram::new_with_bounds(1, 60_000_000, 3).unwrap(),
            statuses: BTreeMap::new(),
            errors: 0,
        }
    }
}

type Results = BTreeMap<&'static str, Route>;

/// Sends `rate` req/s for `duration`, cycling over `paths` (open model).
async fn load(
    client: &reqwest::Client,
    base: &str,
    paths: &[&'static str],
    rate: f64,
    duration: Duration,
) -> Results {
    let results: Arc<Mutex<Results>> = Arc::new(Mutex::new(
        paths.iter().map(|p| (*p, Route::new())).collect(),
    ));
    let path_of = |i: u64| paths[i as usize % paths.len()];
    let call = |i: u64| {
        let request = client
            .get(format!("{base}{}", path_of(i)))
            .header("x-caller", format!("caller-{}", i % 100));
        async move {
            let resp = request.send().await.ok()?;
            let status = resp.status().as_u16();
            resp.bytes().await.ok().map(|_| status)
        }
    };
    let paths: Arc<[&'static str]> = paths.into();
    let into = Arc::clone(&results);
    let record = move |i: u64, timing: Timing, status: Option<u16>| {
        let mut results = into.lock().unwrap();
        let route = results.get_mut(paths[i as usize % paths.len()]).unwrap();
        match status {
            Some(s) => *route.statuses.entry(s).or_insert(0) += 1,
            None => route.errors += 1,
        }
        route.from_send.saturating_record(timing.since_send_us());
        route
            .from_schedule
            .saturating_record(timing.since_schedule_us());
    };
    open_model::run(rate, duration, call, record).await;
    Arc::try_unwrap(results).unwrap().into_inner().unwrap()
}

pub(crate) fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

fn print_phase(title: &str, results: &Results) {
    println!("\n{title}");
    println!(
        "| route | requests | statuses | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | p99 from schedule ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (path, r) in results {
        let statuses: Vec<String> = r
            .statuses
            .iter()
            .map(|(s, n)| format!("{s}x{n}"))
            .chain((r.errors > 0).then(|| format!("errors x{}", r.errors)))
            .collect();
        println!(
            "| {path} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            r.from_send.len(),
            statuses.join(" "),
            ms(&r.from_send, 0.5),
            ms(&r.from_send, 0.9),
            ms(&r.from_send, 0.99),
            ms(&r.from_send, 0.999),
            r.from_send.max() as f64 / 1000.0,
            ms(&r.from_schedule, 0.99),
        );
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "meets the target"
    } else {
        "MISSES the target"
    }
}

/// A release instance on a free loopback port, killed on drop.
struct Instance {
    child: Child,
    base: String,
}

impl Instance {
    fn start(redis: &RedisServer, flags: &[&str]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_failmode-reference"))
            .args(["--port", &port.to_string(), "--redis-url", &redis.url()])
            .args(flags)
            .env("FAILMODE_LOG", "error")
            .stdout(Stdio::null())
            .spawn()
            .expect("the release binary");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Waits until `/healthz` answers with `expected` in its body ("" for any answer).
    async fn ready(&self, client: &reqwest::Client, expected: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let body = match client.get(format!("{}/healthz", self.base)).send().await {
                Ok(r) => r.text().await.ok(),
                Err(_) => None,
            };
            if body.is_some_and(|b| b.contains(expected)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not answer /healthz with {expected:?}",
                self.base
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let seconds: f64 = arg("--seconds", 10.0);
    let rate: f64 = arg("--rate", 2000.0);
    let step_secs: f64 = arg("--step-seconds", 3.0);
    let rates: Vec<f64> = arg(
        "--throughput-rates",
        "2500,5000,7500,10000,12500,15000,20000,25000,30000".to_owned(),
    )
    .split(',')
    .filter_map(|r| r.trim().parse().ok())
    .collect();
    let redis = RedisServer::start();
    // Far above the offered rate: every decision is a full store round trip, admitted.
    let instance = Instance::start(
        &redis,
        &[
            "--limit",
            "1000000000",
            "--window",
            "1s",
            "--route",
            "/timeout-only=timeout-only,limit=1000000000,window=1s",
        ],
    );
    let base = instance.base.clone();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        instance.ready(&client, "").await;
        if std::env::args().any(|a| a == "--exactness-only") {
            exactness::run(&redis, seconds).await;
            return;
        }
        if std::env::args().any(|a| a == "--flood-only") {
            flood::run(&redis, seconds).await;
            return;
        }
        if std::env::args().any(|a| a == "--throughput-only") {
            throughput::run(&client, &base, &redis.url(), &rates, step_secs).await;
            return;
        }
        let duration = Duration::from_secs_f64(seconds);
        println!("failmode-reference benchmark: {rate} req/s in total, {seconds} s per phase, release build, loopback");

        load(&client, &base, &["/api", "/unlimited"], rate, Duration::from_secs(2)).await;
        let healthy = load(&client, &base, &["/api", "/unlimited"], rate, duration).await;
        print_phase("Healthy Redis", &healthy);

        redis.hang();
        // Let the breaker on /api open before measuring the steady hung state.
        load(&client, &base, &["/api"], 200.0, Duration::from_millis(200)).await;
        let hung = load(&client, &base, &["/api", "/timeout-only"], rate, duration).await;
        redis.resume();
        print_phase("Redis hung (SIGSTOP)", &hung);

        let api = &healthy["/api"].from_send;
        let unlimited = &healthy["/unlimited"].from_send;
        let added_p99 = ms(api, 0.99) - ms(unlimited, 0.99);
        let timeout_p99 = ms(&hung["/timeout-only"].from_send, 0.99);
        let open_median = ms(&hung["/api"].from_send, 0.5);
        let healthy_median = ms(api, 0.5);
        println!("\nRatios (one run, same server, same client)");
        println!(
            "- healthy decision p99 / no-limit p99: {:.2}x ({:.3} ms vs {:.3} ms): adds {:.3} ms at p99, target <= 0.3 ms: {}",
            ms(api, 0.99) / ms(unlimited, 0.99),
            ms(api, 0.99),
            ms(unlimited, 0.99),
            added_p99,
            verdict(added_p99 <= 0.3)
        );
        println!(
            "- hung Redis, breaker closed (timeout-only) p99: {:.3} ms = timeout + {:.3} ms, target <= timeout + 3 ms: {}",
            timeout_p99,
            timeout_p99 - STORE_TIMEOUT_MS,
            verdict(timeout_p99 <= STORE_TIMEOUT_MS + 3.0)
        );
        println!(
            "- hung Redis, breaker open median / healthy median: {:.2}x ({:.3} ms vs {:.3} ms), target <= 2x: {}",
            open_median / healthy_median,
            open_median,
            healthy_median,
            verdict(open_median <= 2.0 * healthy_median)
        );

        exactness::run(&redis, seconds).await;
        flood::run(&redis, seconds).await;
        throughput::run(&client, &base, &redis.url(), &rates, step_secs).await;
    });
}
