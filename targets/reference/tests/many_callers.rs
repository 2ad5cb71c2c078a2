//! A million distinct caller keys while Redis is gone: the instance keeps state for at most
//! `--max-callers` of them a route (the least recently used go, counted at `/metrics`), its
//! memory stays bounded, and a caller that keeps sending keeps its count through the flood.
//! Alone in its test binary: it reads the process's resident memory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, SystemTime};

use failmode_reference::decision::Decision;
use failmode_reference::share::window_at;
use support::{Client, RedisServer, metric, reference};

const DISTINCT: usize = 1_000_000;
const CAP: usize = 10_000;
/// What the flood may add to the process's resident memory: measured 1.9 MB with the cap, and
/// 171 MB with a cap above the flood (a million callers held).
const GROWTH_BOUND_MB: f64 = 40.0;

fn resident_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kb / 1024.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_distinct_callers_in_an_outage_stay_within_the_cap_and_a_steady_caller_keeps_its_count()
 {
    let mut redis = RedisServer::start();
    let window = Duration::from_secs(3600);
    let cap = CAP.to_string();
    let flags = [
        "--limit",
        "50",
        "--window",
        "3600s",
        "--instance-discovery",
        "static",
        "--max-callers",
        &cap,
    ];
    let server = reference(&redis, &flags).await;
    redis.kill();
    let limiter = &server.app().limiter;
    let api = limiter.route_index("/api").unwrap();

    let before = resident_mb();
    let first_window = window_at(SystemTime::now(), window).0;
    let mut acme_admitted = 0;
    for i in 0..DISTINCT {
        let decision = limiter.decide(api, &format!("caller-{i}")).await;
        assert!(
            matches!(decision, Decision::Admitted { .. }),
            "a new caller has its whole turn: {decision:?}"
        );
        // acme sends throughout: the flood must not make it forget what it admitted.
        if i % 1000 == 0 {
            let acme = limiter.decide(api, "acme").await;
            acme_admitted += usize::from(matches!(acme, Decision::Admitted { .. }));
        }
    }
    let growth = resident_mb() - before;
    let windows = window_at(SystemTime::now(), window).0 - first_window + 1;

    assert!(
        growth < GROWTH_BOUND_MB,
        "resident memory grew {growth:.1} MB over {DISTINCT} callers"
    );
    assert!(
        limiter.tracked_callers() <= CAP,
        "{}",
        limiter.tracked_callers()
    );
    let text = Client::default().metrics(server.addr()).await;
    let evicted = metric(
        &text,
        r#"failmode_callers_evicted_total{route="api",map="counters"}"#,
    );
    assert_eq!(evicted as usize, DISTINCT + 1 - CAP, "{text}");
    // 1,000 requests, the limit 50 an hour on one instance: 50, unless the test crossed an
    // hour's edge, when the new window's turn adds up to 50 more.
    if windows == 1 {
        assert_eq!(acme_admitted, 50);
    } else {
        assert!(acme_admitted <= 100, "{acme_admitted}");
    }
}
