//! What the reference admits of a caller above the limit, on four instances behind an even
//! balancer: with Redis healthy (the exact steady rate), while Redis hangs (the instances'
//! turns of the limit, which add up to it), and in the first second after it answers again
//! (what the instances admitted on their own is counted, so the window does not start empty).
//! Seconds are the instances' windows: wall-clock seconds from the epoch.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::Instance;
use crate::open_model;
use crate::support::RedisServer;

const LIMIT: u32 = 50;
const INSTANCES: usize = 4;
/// The caller's rate: above the limit, so every window is contested.
const RATE: f64 = 120.0;

/// When each admission was answered (seconds from the epoch), and how many answers were
/// neither 200 nor 429.
#[derive(Debug, Default)]
struct Seconds {
    admitted: Vec<f64>,
    other: u64,
}

impl Seconds {
    /// Admissions by wall-clock second.
    fn by_second(&self) -> BTreeMap<u64, u32> {
        let mut out = BTreeMap::new();
        for t in &self.admitted {
            *out.entry(*t as u64).or_insert(0) += 1;
        }
        out
    }

    /// Admissions within `span` of `from`.
    fn within(&self, from: f64, span: f64) -> usize {
        self.admitted
            .iter()
            .filter(|&&t| t >= from && t < from + span)
            .count()
    }
}

fn epoch_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// acme at [`RATE`] for `duration`, round robin over `bases`.
async fn acme(client: &reqwest::Client, bases: &[String], duration: Duration) -> Seconds {
    let seconds = Arc::new(Mutex::new(Seconds::default()));
    let call = |i: u64| {
        let request = client
            .get(format!("{}/api", bases[i as usize % bases.len()]))
            .header("x-caller", "acme");
        async move { request.send().await.map(|r| r.status().as_u16()).ok() }
    };
    let into = Arc::clone(&seconds);
    let record = move |_, _, status: Option<u16>| {
        // When the instance decided, to within the answer's loopback latency.
        let at = epoch_seconds();
        let mut s = into.lock().unwrap();
        match status {
            Some(200) => s.admitted.push(at),
            Some(429) => {}
            _ => s.other += 1,
        }
    };
    open_model::run(RATE, duration, call, record).await;
    Arc::try_unwrap(seconds).unwrap().into_inner().unwrap()
}

/// The whole seconds of a phase: its first and last are cut by its edges.
fn whole(s: &Seconds) -> Vec<u32> {
    let by_second = s.by_second();
    let n = by_second.len();
    by_second
        .values()
        .copied()
        .skip(1)
        .take(n.saturating_sub(2))
        .collect()
}

fn mean(v: &[u32]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        f64::from(v.iter().sum::<u32>()) / v.len() as f64
    }
}

/// Runs the three phases against four instances on `redis` and prints them.
pub(crate) async fn run(redis: &RedisServer, secs: f64) {
    let limit = LIMIT.to_string();
    let flags = [
        "--limit",
        &limit,
        "--window",
        "1s",
        "--key-prefix",
        "exact",
        "--heartbeat-interval",
        "200ms",
    ];
    let instances: Vec<Instance> = (0..INSTANCES)
        .map(|_| Instance::start(redis, &flags))
        .collect();
    let bases: Vec<String> = instances.iter().map(|i| i.base.clone()).collect();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    // Every instance up and counting four.
    for instance in &instances {
        instance
            .ready(&client, &format!("\"live_instances\":{INSTANCES}"))
            .await;
    }
    let duration = Duration::from_secs_f64(secs);
    let healthy = acme(&client, &bases, duration).await;
    redis.hang();
    let hung = acme(&client, &bases, duration).await;
    redis.resume();
    let resumed = epoch_seconds();
    let after = acme(&client, &bases, Duration::from_secs(3)).await;

    let limit = f64::from(LIMIT);
    println!(
        "\nExactness: acme at {RATE} a second over {INSTANCES} instances round robin, limit {LIMIT} a second ({secs} s a phase; whole seconds only)"
    );
    let (h, d) = (whole(&healthy), whole(&hung));
    println!(
        "- healthy: {:.2} a second ({h:?}), wrongful denial {:.2} %; target >= 49.75: {}",
        mean(&h),
        100.0 * (limit - mean(&h)).max(0.0) / limit,
        super::verdict(mean(&h) >= 49.75)
    );
    // The first whole second of the hang includes the breakers' five timeouts each.
    let steady: Vec<u32> = d.iter().copied().skip(1).collect();
    println!(
        "- Redis hung (SIGSTOP), after the breakers opened: {:.2} a second ({d:?}); target 50.0 +/- 0.5: {}",
        mean(&steady),
        super::verdict((mean(&steady) - limit).abs() <= 0.5)
    );
    let first = after.within(resumed, 1.0);
    println!(
        "- the first second after Redis answers again: {first} (then {:?} by wall-clock second); target <= {:.0}: {}",
        whole(&after),
        limit * 1.1,
        super::verdict(first as f64 <= limit * 1.1)
    );
    let other = healthy.other + hung.other + after.other;
    if other > 0 {
        println!("- {other} answers were neither 200 nor 429: these numbers are suspect");
    }
}
