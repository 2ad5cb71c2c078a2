//! Decisions a second through one Redis at a p99 of at most 1 ms: the reference over HTTP
//! beside the floor, the same sliding-window script by EVALSHA from a plain client (no HTTP,
//! no breaker, no local counting), and beside the same server's `/unlimited` (HTTP and this
//! client, no decision), at the same open-model rates, one after the other in one run. A step
//! counts only if it had no errors and the generator kept to its schedule.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::open_model::{self, Timing};

/// The p99 a step must stay within.
const P99_BOUND_MS: f64 = 1.0;
/// How far behind its schedule the generator may fall (at a p99) for a step to count: paced by
/// a thread of its own, and late mostly by the hand-over to the task that sends, one that keeps
/// up is 0.1–1.6 ms late at a p99 (measured up to 20,000 a second; 1.8 ms at 30,000); one
/// that cannot keep up is hundreds late.
const LAG_BOUND_MS: f64 = 2.0;
const CALLERS: u64 = 100;
/// Runs of each step; the median p99 and lag are reported, errors summed.
const REPEATS: usize = 3;

/// One rate, one side.
#[derive(Debug)]
struct Step {
    rate: f64,
    p99_ms: f64,
    lag_p99_ms: f64,
    errors: u64,
}

impl Step {
    fn counts(&self) -> bool {
        self.errors == 0 && self.p99_ms <= P99_BOUND_MS && self.lag_p99_ms <= LAG_BOUND_MS
    }
}

/// The run with the median p99, with the median lag and every run's errors.
fn median(mut runs: Vec<Step>) -> Step {
    let errors = runs.iter().map(|s| s.errors).sum();
    let mut lags: Vec<f64> = runs.iter().map(|s| s.lag_p99_ms).collect();
    lags.sort_by(f64::total_cmp);
    runs.sort_by(|a, b| a.p99_ms.total_cmp(&b.p99_ms));
    let mid = runs.swap_remove(runs.len() / 2);
    Step {
        errors,
        lag_p99_ms: lags[lags.len() / 2],
        ..mid
    }
}

/// `rate` calls a second for `duration`, caller `i % CALLERS`; `call` is one decision.
async fn step<F, Fut>(rate: f64, duration: Duration, call: F) -> Step
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = bool> + Send + 'static,
{
    let histogram = || Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let seen = Arc::new(Mutex::new((histogram(), histogram(), 0u64)));
    let into = Arc::clone(&seen);
    let record = move |_, timing: Timing, ok: bool| {
        let mut seen = into.lock().unwrap();
        seen.0.saturating_record(timing.since_send_us());
        seen.1.saturating_record(timing.lag_us());
        seen.2 += u64::from(!ok);
    };
    open_model::run(rate, duration, |i| call(i % CALLERS), record).await;
    let (took, lag, errors) = &*seen.lock().unwrap();
    Step {
        rate,
        p99_ms: took.value_at_quantile(0.99) as f64 / 1e3,
        lag_p99_ms: lag.value_at_quantile(0.99) as f64 / 1e3,
        errors: *errors,
    }
}

/// One call of a side of the comparison.
type Call = std::pin::Pin<Box<dyn Future<Output = bool> + Send>>;

/// A GET of `path` on the reference: `/api` (limit far above the rate: every decision is a
/// store round trip) or `/unlimited` (the same server and client, no decision).
fn http(client: &reqwest::Client, base: &str, path: &str) -> impl Fn(u64) -> Call {
    let (client, url) = (client.clone(), format!("{base}{path}"));
    move |caller| {
        let request = client
            .get(&url)
            .header("x-caller", format!("caller-{caller}"));
        Box::pin(async move {
            match request.send().await {
                Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                Err(_) => false,
            }
        })
    }
}

/// The floor: the reference's script by EVALSHA on one multiplexed connection.
async fn floor(redis_url: &str) -> impl Fn(u64) -> Call {
    let client = redis::Client::open(redis_url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(include_str!("../../scripts/sliding_window.lua"))
        .query_async(&mut conn)
        .await
        .unwrap();
    move |caller| {
        let mut conn = conn.clone();
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&sha)
            .arg(1)
            .arg(format!("floor:{{caller-{caller}}}:api"))
            .arg(1_000_000_000)
            .arg(1000)
            .arg(0)
            .arg(0)
            .arg(0);
        Box::pin(async move { cmd.query_async::<Vec<i64>>(&mut conn).await.is_ok() })
    }
}

/// Steps up through `rates`, each side at each, and prints the table and the ceilings.
pub(crate) async fn run(
    client: &reqwest::Client,
    base: &str,
    redis_url: &str,
    rates: &[f64],
    secs: f64,
) {
    let duration = Duration::from_secs_f64(secs);
    let floor = floor(redis_url).await;
    let unlimited = http(client, base, "/unlimited");
    let reference = http(client, base, "/api");
    println!(
        "\nThroughput through one Redis (the median of {REPEATS} runs of {secs} s a step; a step counts with no errors, p99 <= {P99_BOUND_MS} ms and the generator <= {LAG_BOUND_MS} ms behind at p99; p99 from the send, lag in brackets)"
    );
    println!(
        "| decisions/s | floor: EVALSHA p99 ms | HTTP, no decision p99 ms | reference p99 ms |"
    );
    println!("|---:|---:|---:|---:|");
    let mut ceilings = [0.0f64; 3];
    let mut holding = [true; 3];
    for &rate in rates {
        let mut runs: [Vec<Step>; 3] = Default::default();
        // Interleaved repeats: a burst of noise on this shared machine lands on one run of
        // each side, and the median drops it.
        for _ in 0..REPEATS {
            runs[0].push(step(rate, duration, &floor).await);
            runs[1].push(step(rate, duration, &unlimited).await);
            runs[2].push(step(rate, duration, &reference).await);
        }
        let steps = runs.map(median);
        let cells: Vec<String> = steps
            .iter()
            .map(|s| {
                let errors = if s.errors > 0 {
                    format!(", {} errors", s.errors)
                } else {
                    String::new()
                };
                format!("{:.3} ({:.1}{errors})", s.p99_ms, s.lag_p99_ms)
            })
            .collect();
        println!("| {rate:.0} | {} |", cells.join(" | "));
        // A ceiling is the highest rate below which every step counted: a lucky step above a
        // failed one is noise, not capacity.
        for ((ceiling, held), s) in ceilings.iter_mut().zip(&mut holding).zip(&steps) {
            *held &= s.counts();
            if *held {
                *ceiling = s.rate;
            }
        }
    }
    let [floor, unlimited, reference] = ceilings;
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    println!(
        "- decisions/s at p99 <= {P99_BOUND_MS} ms: reference {reference:.0}; floor (EVALSHA from a plain client) {floor:.0}: {:.2}x the floor; the same server without a decision {unlimited:.0}: {:.2}x that. Target >= 15000: {}",
        ratio(reference, floor),
        ratio(reference, unlimited),
        super::verdict(reference >= 15_000.0)
    );
}
