//! Whether a flood of distinct caller keys during an outage moves the latency of the callers
//! that keep sending: one instance with its caller maps capped (so the flood evicts all the
//! time), Redis hung, acme's p99 beside the same flood made of a thousand recurring keys
//! (same rate, same HTTP work, no eviction), one after the other in one run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::open_model::{self, Timing};
use crate::support::RedisServer;
use crate::{Instance, ms};

const CAP: &str = "10000";
const ACME_RATE: f64 = 200.0;
const FLOOD_RATE: f64 = 4000.0;

/// acme's latency from the send while a flood at [`FLOOD_RATE`] names `key(i)`.
async fn acme_beside(
    client: &reqwest::Client,
    base: &str,
    duration: Duration,
    key: impl Fn(u64) -> String,
) -> Histogram<u64> {
    let took = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap(),
    ));
    let get = |caller: String| {
        let request = client.get(format!("{base}/api")).header("x-caller", caller);
        async move { request.send().await.is_ok() }
    };
    let into = Arc::clone(&took);
    let acme = open_model::run(
        ACME_RATE,
        duration,
        |_| get("acme".to_owned()),
        move |_, timing: Timing, _| {
            into.lock()
                .unwrap()
                .saturating_record(timing.since_send_us());
        },
    );
    let flood = open_model::run(FLOOD_RATE, duration, |i| get(key(i)), |_, _, _| {});
    tokio::join!(acme, flood);
    took.lock().unwrap().clone()
}

/// Runs both floods against a capped instance on `redis`, hung, and prints them.
pub(crate) async fn run(redis: &RedisServer, secs: f64) {
    let instance = Instance::start(redis, &["--key-prefix", "flood", "--max-callers", CAP]);
    let base = instance.base.clone();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    instance.ready(&client, "").await;
    redis.hang();
    let duration = Duration::from_secs_f64(secs);
    // Open the breaker first, so both floods meet the same steady outage.
    acme_beside(&client, &base, Duration::from_millis(500), |i| {
        format!("warm-{i}")
    })
    .await;
    let recurring = acme_beside(&client, &base, duration, |i| format!("r-{}", i % 1000)).await;
    let distinct = acme_beside(&client, &base, duration, |i| format!("d-{i}")).await;
    redis.resume();
    let keys = (FLOOD_RATE * secs) as u64;
    println!(
        "\nA flood of callers during an outage (Redis hung; caps of {CAP} callers a map; acme at {ACME_RATE} a second beside {FLOOD_RATE} a second of other callers, {secs} s each)"
    );
    println!(
        "- acme's p50 / p99 from the send: {:.3} / {:.3} ms beside {keys} distinct keys (evicting), {:.3} / {:.3} ms beside 1000 recurring keys: p99 {:.2}x",
        ms(&distinct, 0.5),
        ms(&distinct, 0.99),
        ms(&recurring, 0.5),
        ms(&recurring, 0.99),
        ms(&distinct, 0.99) / ms(&recurring, 0.99).max(1e-3),
    );
}
