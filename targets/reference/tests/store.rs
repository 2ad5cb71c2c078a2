//! The reference limiter against a real redis-server: atomicity, keys, script recovery and
//! restarts (a fleet through an outage: `fleet.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use support::{Client, RedisServer, away_from_window_edge, count, eventually, metric, reference};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_instances_and_concurrent_callers_never_admit_more_than_the_limit() {
    let redis = RedisServer::start();
    let mut instances = Vec::new();
    for _ in 0..4 {
        instances.push(
            reference(
                &redis,
                &["--limit", "50", "--window", "60s", "--store-timeout", "2s"],
            )
            .await,
        );
    }
    let addrs: Vec<_> = instances.iter().map(|s| s.addr()).collect();
    away_from_window_edge(&redis, 60.0, 10.0).await;

    let client = Client::default();
    let callers = ["acme", "globex", "initech", "umbrella", "hooli"];
    let mut tasks = Vec::new();
    for caller in callers {
        for i in 0..200 {
            let client = client.clone();
            let addr = addrs[i % addrs.len()];
            tasks.push(tokio::spawn(async move {
                (caller, client.get(addr, "/api", Some(caller)).await)
            }));
        }
    }
    let mut admitted = std::collections::HashMap::new();
    for task in tasks {
        let (caller, answer) = task.await.expect("request task");
        assert_eq!(answer.source, "store", "{answer:?}");
        *admitted.entry(caller).or_insert(0) += usize::from(answer.status == 200);
    }
    // Exactly the limit: more would be a race, fewer a lost update.
    for caller in callers {
        assert_eq!(admitted[caller], 50, "{caller}: {admitted:?}");
    }
}

#[tokio::test]
async fn keys_are_hash_tagged_per_caller_and_expire_after_two_windows() {
    let redis = RedisServer::start();
    let server = reference(&redis, &["--window", "3s"]).await;
    let client = Client::default();
    client.get(server.addr(), "/api", Some("acme")).await;
    let mut conn = redis.conn();
    let ttl: i64 = redis::cmd("PTTL")
        .arg("rl:{acme}:api")
        .query(&mut conn)
        .unwrap();
    assert!(
        (5_000..=6_000).contains(&ttl),
        "TTL {ttl} ms, expected two windows"
    );
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg("rl:{acme}:api")
        .query(&mut conn)
        .unwrap();
    assert_eq!(fields.len(), 3, "{fields:?}");
}

#[tokio::test]
async fn a_caller_key_with_braces_keeps_a_hash_tag_of_its_own() {
    let redis = RedisServer::start();
    let server = reference(&redis, &[]).await;
    let client = Client::default();
    for caller in ["a}b", "a", "{a}", "a%7Db"] {
        let answer = client.get(server.addr(), "/api", Some(caller)).await;
        assert_eq!((answer.status, answer.source.as_str()), (200, "store"));
    }
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("rl:{*")
        .query(&mut redis.conn())
        .unwrap();
    keys.sort();
    // Unencoded, "a}b" would be "rl:{a}b}:api": tagged "a", in caller a's slot. Callers
    // without braces keep the keys they always had.
    assert_eq!(
        keys,
        [
            "rl:{a%7Db}:api",
            "rl:{a}:api",
            "rl:{a\u{ff5d}b}:api",
            "rl:{\u{ff5b}a\u{ff5d}}:api"
        ]
    );
}

#[tokio::test]
async fn the_token_bucket_enforces_its_capacity_and_sizes_its_ttl_to_a_full_refill() {
    let redis = RedisServer::start();
    let server = reference(
        &redis,
        &[
            "--algorithm",
            "token-bucket",
            "--limit",
            "10",
            "--window",
            "20s",
        ],
    )
    .await;
    let client = Client::default();
    let answers = client.burst(server.addr(), "/api", "acme", 15).await;
    assert_eq!(count(&answers, 200), 10);
    assert_eq!(count(&answers, 429), 5);
    let retry: u64 = answers[14].headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(retry, 2, "one token every 2 s");
    let ttl: i64 = redis::cmd("PTTL")
        .arg("rl:{acme}:api")
        .query(&mut redis.conn())
        .unwrap();
    assert!((19_000..=20_000).contains(&ttl), "TTL {ttl} ms");
}

#[tokio::test]
async fn a_noscript_after_the_script_cache_is_flushed_reloads_and_continues() {
    let redis = RedisServer::start();
    let server = reference(&redis, &["--limit", "100", "--window", "60s"]).await;
    let client = Client::default();
    assert_eq!(
        client.get(server.addr(), "/api", Some("acme")).await.source,
        "store"
    );

    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut redis.conn())
        .unwrap();
    let answer = client.get(server.addr(), "/api", Some("acme")).await;
    assert_eq!((answer.status, answer.source.as_str()), (200, "store"));
    let metrics = client.metrics(server.addr()).await;
    assert_eq!(metric(&metrics, "failmode_store_script_reloads_total"), 1.0);
    assert_eq!(
        metric(
            &metrics,
            r#"failmode_fallback_total{route="api",reason="error"}"#
        ),
        0.0
    );
}

#[tokio::test]
async fn after_a_restart_empty_the_instance_reconnects_and_counts_from_zero() {
    let mut redis = RedisServer::start();
    let server = reference(&redis, &["--limit", "5", "--window", "60s"]).await;
    let client = Client::default();
    let answers = client.burst(server.addr(), "/api", "acme", 8).await;
    assert_eq!(count(&answers, 200), 5);

    redis.restart();
    eventually(
        Duration::from_secs(5),
        "decisions from the store again",
        || {
            let client = client.clone();
            let addr = server.addr();
            async move { client.get(addr, "/api", Some("probe")).await.source == "store" }
        },
    )
    .await;
    // The counters were lost with the restart: acme gets a whole new limit (over-admission).
    let answers = client.burst(server.addr(), "/api", "acme", 8).await;
    assert_eq!(count(&answers, 200), 5, "{answers:?}");
    assert!(answers.iter().all(|a| a.source == "store"));
}
