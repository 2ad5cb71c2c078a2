//! A fleet of reference instances through an outage of their shared Redis: the live count
//! learnt and frozen, the turns that add up to the limit, the reconciliation when the store is
//! back, and the window the fleet rejoins the store in.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use failmode_reference::breaker::BreakerState;

use support::{Answer, Client, RedisServer, count, eventually, metric, reference};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_instance_count_is_learnt_from_redis_and_frozen_while_it_is_down() {
    let mut redis = RedisServer::start();
    let flags = ["--heartbeat-interval", "100ms"];
    let a = reference(&redis, &flags).await;
    let b = reference(&redis, &flags).await;
    let c = reference(&redis, &flags).await;
    let live = |s: &failmode_reference::Server| s.app().limiter.live_instances();
    let ranks = |servers: &[&failmode_reference::Server]| {
        let mut r: Vec<u32> = servers
            .iter()
            .map(|s| s.app().limiter.live_instances_and_rank().1)
            .collect();
        r.sort_unstable();
        r
    };
    eventually(Duration::from_secs(3), "three live instances", || {
        let all = [live(&a), live(&b), live(&c)];
        async move { all == [3, 3, 3] }
    })
    .await;
    // Each its own turn of the local share.
    eventually(Duration::from_secs(3), "ranks 0, 1, 2", || {
        let r = ranks(&[&a, &b, &c]);
        async move { r == [0, 1, 2] }
    })
    .await;

    // One leaves cleanly: the others see two.
    c.shutdown().await.unwrap();
    eventually(Duration::from_secs(3), "two live instances", || {
        let all = [live(&a), live(&b)];
        async move { all == [2, 2] }
    })
    .await;
    eventually(Duration::from_secs(3), "ranks 0, 1", || {
        let r = ranks(&[&a, &b]);
        async move { r == [0, 1] }
    })
    .await;

    // Redis goes away: the divisor stays where it was, however long the outage.
    redis.kill();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!([live(&a), live(&b)], [2, 2]);

    // A new instance that never reached Redis uses its configured count.
    let d = reference(&redis, &["--instance-count", "4"]).await;
    assert_eq!(live(&d), 4);
    let health = Client::default().get(d.addr(), "/healthz", None).await;
    assert_eq!(health.status, 200, "healthz never touches Redis");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_outage_a_lower_live_count_is_believed_only_once_consecutive_heartbeats_confirm_it()
 {
    let mut redis = RedisServer::start();
    // Three intervals, the confirmation, well above the reconnect backoff's 250 ms: every
    // instance is back within them however the backoffs fall.
    let flags = ["--heartbeat-interval", "300ms"];
    let fleet = ranked_fleet(&redis, 3, &flags).await;
    // Back empty: each instance's first heartbeat finds fewer instances than there are.
    redis.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    redis.restart();
    let mut least = u32::MAX;
    let mut conn = redis.conn();
    let deadline = std::time::Instant::now() + Duration::from_millis(2500);
    while std::time::Instant::now() < deadline {
        least = fleet
            .iter()
            .map(|s| s.app().limiter.live_instances())
            .fold(least, u32::min);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let in_set: u32 = redis::cmd("ZCARD")
        .arg("rl:instances")
        .query(&mut conn)
        .unwrap();
    assert_eq!(in_set, 3, "every instance heartbeats again");
    assert_eq!(
        least, 3,
        "a count learnt before the others' heartbeats were back"
    );
}

/// `n` instances on `redis`, once each has learnt the count and a rank of its own.
async fn ranked_fleet(
    redis: &RedisServer,
    n: u32,
    flags: &[&str],
) -> Vec<failmode_reference::Server> {
    let mut fleet = Vec::new();
    for _ in 0..n {
        fleet.push(reference(redis, flags).await);
    }
    eventually(Duration::from_secs(3), "the count and a rank each", || {
        let mut r: Vec<(u32, u32)> = fleet
            .iter()
            .map(|s| s.app().limiter.live_instances_and_rank())
            .collect();
        r.sort_unstable();
        let want: Vec<(u32, u32)> = (0..n).map(|k| (n, k)).collect();
        async move { r == want }
    })
    .await;
    fleet
}

/// Waits, within `within` for each instance, until a request of a caller of its own has
/// been the probe that found the store back and closed the breaker.
async fn each_finds_the_store_again(
    client: &Client,
    fleet: &[failmode_reference::Server],
    within: Duration,
) {
    for s in fleet {
        eventually(within, "the breaker closed again", || {
            let client = client.clone();
            let addr = s.addr();
            async move {
                client.get(addr, "/api", Some("probe")).await;
                s.app().limiter.breaker_state() == BreakerState::Closed
            }
        })
        .await;
    }
}

/// Waits for the start of a wall-clock window of `window`, as the instances number them.
async fn start_of_a_window(window: Duration) {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let into = Duration::from_nanos((since.as_nanos() % window.as_nanos()) as u64);
    tokio::time::sleep(window - into + Duration::from_millis(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_an_outage_the_instances_turns_add_up_to_the_limit_in_every_window_even_below_one_each()
{
    let mut redis = RedisServer::start();
    // 3 a window on 4 instances: a share of 0.75 each, which a share of fractions never admits.
    let window = Duration::from_secs(1);
    let flags = [
        "--heartbeat-interval",
        "100ms",
        "--limit",
        "3",
        "--window",
        "1s",
    ];
    let fleet = ranked_fleet(&redis, 4, &flags).await;
    redis.kill();

    let client = Client::default();
    for w in 0..3 {
        start_of_a_window(window).await;
        let mut admitted = Vec::new();
        for s in &fleet {
            let mut answers = Vec::new();
            for _ in 0..3 {
                answers.push(client.get(s.addr(), "/api", Some("acme")).await);
            }
            assert!(
                answers.iter().all(|a| a.source == "local"),
                "window {w}: {answers:?}"
            );
            admitted.push(count(&answers, 200));
        }
        assert_eq!(
            admitted.iter().sum::<usize>(),
            3,
            "window {w}: admitted per instance {admitted:?}"
        );
        assert!(admitted.iter().all(|&n| n <= 1), "{admitted:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_outage_the_store_counts_what_the_instances_admitted_on_their_own_in_that_window()
{
    let mut redis = RedisServer::start();
    let window = Duration::from_secs(10);
    let flags = [
        "--heartbeat-interval",
        "100ms",
        "--limit",
        "10",
        "--window",
        "10s",
    ];
    let fleet = ranked_fleet(&redis, 2, &flags).await;
    let client = Client::default();
    let (started, local) = turns_from_a_windows_start(&mut redis, &client, &fleet, window, 8).await;
    assert_eq!(count(&local, 200), 10, "5 turns each");

    // Back, empty: seed 000's reference would start this window from nothing and admit the
    // limit again.
    redis.restart();
    each_finds_the_store_again(&client, &fleet, Duration::from_secs(5)).await;
    // Counted when the store came back, before acme's own next decision.
    let counted: Option<u64> = redis::cmd("HGET")
        .arg("rl:{acme}:api")
        .arg("c")
        .query(&mut redis.conn())
        .unwrap();
    assert_eq!(
        counted,
        Some(10),
        "acme's turns, counted by each instance's reconciliation"
    );
    // The rest of the window is decided by the turns, which are spent (the next test follows
    // the fleet into the next window, decided by the store).
    let again = acme_to_each(&client, &fleet, 8).await;
    assert!(
        started.elapsed() < window - Duration::from_millis(500),
        "the window ended before the check ({:?}): inconclusive, run again",
        started.elapsed()
    );
    assert!(again.iter().all(|a| a.source == "local"), "{again:?}");
    assert_eq!(count(&again, 200), 0, "the turns were spent: {again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_back_from_an_outage_keeps_to_its_turns_until_the_window_ends_then_decides_by_the_store()
 {
    let mut redis = RedisServer::start();
    let window = Duration::from_secs(6);
    let flags = [
        "--heartbeat-interval",
        "100ms",
        "--limit",
        "8",
        "--window",
        "6s",
        // Past the window's end: only a reconnect lets the probe out in time.
        "--breaker-cooldown",
        "10s",
        // A loaded machine must not time the probe out (and open the breaker for 10 s).
        "--store-timeout",
        "500ms",
        // Shorter than the 300 ms before the edge the checks below allow: the fleet rejoins
        // with the next window.
        "--breaker-rejoin-after",
        "100ms",
    ];
    let fleet = ranked_fleet(&redis, 2, &flags).await;
    let client = Client::default();
    // Five calls failed on the lost connection open each instance's breaker.
    let (started, turns) = turns_from_a_windows_start(&mut redis, &client, &fleet, window, 6).await;
    assert_eq!(count(&turns, 200), 8, "4 turns each");

    redis.restart();
    // The reconnect lets the probe out at once, not a cool-down later.
    each_finds_the_store_again(&client, &fleet, Duration::from_secs(1)).await;
    let held = acme_to_each(&client, &fleet, 3).await;
    assert!(
        started.elapsed() < window - Duration::from_millis(300),
        "the window ended before the check ({:?}): inconclusive, run again",
        started.elapsed()
    );
    assert!(held.iter().all(|a| a.source == "local"), "{held:?}");
    assert_eq!(count(&held, 200), 0, "the turns were spent: {held:?}");
    for s in &fleet {
        let rejoining = metric(
            &client.metrics(s.addr()).await,
            r#"failmode_fallback_total{route="api",reason="rejoining"}"#,
        );
        assert!(rejoining >= 3.0, "{rejoining}");
    }

    start_of_a_window(window).await;
    let next = acme_to_each(&client, &fleet, 4).await;
    assert!(next.iter().all(|a| a.source == "store"), "{next:?}");
    // The window before holds the 8 turns, which the sliding estimate weighs: a store that
    // had not counted them would admit 8 again at once.
    assert!(count(&next, 200) <= 1, "{next:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_back_from_an_outage_in_different_windows_rejoin_the_store_in_the_window_the_first_proposed()
 {
    let mut redis = RedisServer::start();
    let window = Duration::from_secs(4);
    let flags = [
        "--heartbeat-interval",
        "100ms",
        "--limit",
        "8",
        "--window",
        "4s",
        // Only a reconnect lets the probe out in time.
        "--breaker-cooldown",
        "10s",
        "--store-timeout",
        "500ms",
        // Longer than a window, so that the agreed window differs both from the least a hold
        // lasts (the rest of the window it began in) and from a later instance's own proposal;
        // and room for a loaded machine (1.4 s either way).
        "--breaker-rejoin-after",
        "6s",
    ];
    let fleet = ranked_fleet(&redis, 2, &flags).await;
    let (first, second) = (&fleet[0..1], &fleet[1..2]);
    let client = Client::default();
    turns_from_a_windows_start(&mut redis, &client, &fleet, window, 6).await;
    let w = window_now(window);
    redis.restart();
    into_the_window(window, Duration::from_millis(2_600)).await;
    each_finds_the_store_again(&client, first, Duration::from_secs(1)).await;
    assert_eq!(
        window_now(window),
        w,
        "the edge passed first: inconclusive, run again"
    );
    let agreed: Option<u64> = redis::cmd("GET")
        .arg("rl:rejoin:api")
        .query(&mut redis.conn())
        .unwrap();
    assert_eq!(agreed, Some(w + 3), "the first instance back proposes");

    // The second is back late in the next window: it would hold at least through this window
    // and by its own proposal through the one after the agreed one. It keeps to its turns
    // until the agreed window, and no longer.
    start_of_a_window(window).await;
    into_the_window(window, Duration::from_millis(2_600)).await;
    each_finds_the_store_again(&client, second, Duration::from_secs(1)).await;
    for v in [w + 1, w + 2] {
        if v == w + 2 {
            start_of_a_window(window).await;
        }
        let held = acme_to_each(&client, &fleet, 6).await;
        assert_eq!(window_now(window), v, "inconclusive, run again");
        assert!(held.iter().all(|a| a.source == "local"), "{held:?}");
        assert_eq!(
            count(&held, 200),
            8,
            "window {v}'s turns, the limit: {held:?}"
        );
    }

    start_of_a_window(window).await;
    let next = acme_to_each(&client, &fleet, 4).await;
    assert!(next.iter().all(|a| a.source == "store"), "{next:?}");
    // The turns of the hold were counted as they were taken.
    assert!(count(&next, 200) <= 1, "{next:?}");
}

/// From the start of a window, Redis killed: `n` requests of acme to each instance, all decided
/// by the instances' turns. Returns when the window started, and the answers.
async fn turns_from_a_windows_start(
    redis: &mut RedisServer,
    client: &Client,
    fleet: &[failmode_reference::Server],
    window: Duration,
    n: usize,
) -> (std::time::Instant, Vec<Answer>) {
    start_of_a_window(window).await;
    let started = std::time::Instant::now();
    redis.kill();
    let answers = acme_to_each(client, fleet, n).await;
    assert!(answers.iter().all(|a| a.source == "local"), "{answers:?}");
    (started, answers)
}

/// `n` requests of acme to each instance of `fleet` in turn, the answers in order.
async fn acme_to_each(
    client: &Client,
    fleet: &[failmode_reference::Server],
    n: usize,
) -> Vec<Answer> {
    let mut answers = Vec::new();
    for s in fleet {
        answers.extend(client.burst(s.addr(), "/api", "acme", n).await);
    }
    answers
}

/// The wall-clock window the instances are in, numbered as they number them.
fn window_now(window: Duration) -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    (since.as_nanos() / window.as_nanos()) as u64
}

/// Waits until `into` the current window (at once if that is past).
async fn into_the_window(window: Duration, into: Duration) {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let now = Duration::from_nanos((since.as_nanos() % window.as_nanos()) as u64);
    tokio::time::sleep(into.saturating_sub(now)).await;
}
