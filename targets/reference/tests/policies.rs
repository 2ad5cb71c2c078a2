//! Every policy's behaviour with Redis hung (SIGSTOP), killed (connections refused) and
//! restarted empty. One instance per policy, all against the same redis-server, the fault
//! applied to all at once, as failmode compares them.
//!
//! Each instance: limit 10 per 60 s, two instances assumed (static), so the local share is 5.
//! Before the fault acme spends its whole limit (10 admitted, 5 refused by the store).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use failmode_reference::Server;
use support::{
    Answer, Client, RedisServer, away_from_window_edge, count, eventually, metric, reference,
};

const POLICIES: [&str; 7] = [
    "local-share",
    "fail-open",
    "fail-closed",
    "retry-then-deny",
    "fail-static",
    "timeout-only",
    "local-only",
];

struct Fleet {
    servers: Vec<(&'static str, Server)>,
    client: Client,
}

impl Fleet {
    async fn start(redis: &RedisServer) -> Self {
        let mut servers = Vec::new();
        for policy in POLICIES {
            // Each policy counts in its own keys, as if it had a Redis of its own.
            let prefix = format!("rl-{policy}");
            let flags = [
                "--key-prefix",
                &prefix,
                "--policy",
                policy,
                "--limit",
                "10",
                "--window",
                "60s",
                "--instance-discovery",
                "static",
                "--instance-count",
                "2",
            ];
            servers.push((policy, reference(redis, &flags).await));
        }
        Self {
            servers,
            client: Client::default(),
        }
    }

    fn addr(&self, policy: &str) -> SocketAddr {
        self.servers
            .iter()
            .find(|(p, _)| *p == policy)
            .map(|(_, s)| s.addr())
            .expect("a policy of the fleet")
    }

    /// The same burst to every policy at once.
    async fn burst(&self, caller: &str, n: usize) -> Vec<(&'static str, Vec<Answer>)> {
        let tasks: Vec<_> = self
            .servers
            .iter()
            .map(|(policy, server)| {
                let client = self.client.clone();
                let (policy, addr, caller) = (*policy, server.addr(), caller.to_owned());
                tokio::spawn(async move { (policy, client.burst(addr, "/api", &caller, n).await) })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.expect("burst task"));
        }
        out
    }

    async fn metrics(&self, policy: &str) -> String {
        self.client.metrics(self.addr(policy)).await
    }
}

fn sources(answers: &[Answer]) -> Vec<&str> {
    let mut s: Vec<&str> = answers.iter().map(|a| a.source.as_str()).collect();
    s.dedup();
    s
}

/// Acme spends its limit while Redis is healthy; fail-static learns that acme is over.
async fn healthy_phase(redis: &RedisServer, fleet: &Fleet) {
    away_from_window_edge(redis, 60.0, 15.0).await;
    for (policy, answers) in fleet.burst("acme", 15).await {
        assert_eq!(
            count(&answers, 200),
            10,
            "{policy} while healthy: {answers:?}"
        );
        assert_eq!(count(&answers, 429), 5, "{policy} while healthy");
        let expected = if policy == "local-only" {
            "local"
        } else {
            "store"
        };
        assert_eq!(sources(&answers), [expected], "{policy} while healthy");
    }
}

/// What each policy must do while the store is unavailable (hung or refusing).
async fn assert_outage_behaviour(fleet: &Fleet, reason: &str) {
    let acme = fleet.burst("acme", 12).await;
    let globex = fleet.burst("globex", 3).await;
    // A caller not seen this window, over the limit: its turn only.
    let initech = fleet.burst("initech", 12).await;
    for (((policy, acme), (_, globex)), (_, initech)) in acme.iter().zip(&globex).zip(&initech) {
        let ctx = format!("{policy} with Redis {reason}");
        match *policy {
            "local-share" | "timeout-only" => {
                // Its turn is limit / 2 a window, and the store admitted acme its whole limit
                // through this instance in this window already: nothing is left of it.
                assert_eq!(count(acme, 200), 0, "{ctx}: acme's turn is spent");
                assert_eq!(count(acme, 429), 12, "{ctx}");
                assert_eq!(count(initech, 200), 5, "{ctx}: limit / 2 locally");
                assert_eq!(count(globex, 200), 3, "{ctx}: globex is not refused");
                assert_eq!(sources(acme), ["local"], "{ctx}");
            }
            "fail-open" => {
                assert_eq!(count(acme, 200), 12, "{ctx}: everything admitted");
                assert_eq!(sources(acme), ["fail_open"], "{ctx}");
                assert_eq!(count(globex, 200), 3, "{ctx}");
            }
            "fail-closed" => {
                assert_eq!(count(acme, 500), 12, "{ctx}: everything refused with 500");
                assert_eq!(count(globex, 500), 3, "{ctx}: globex refused too");
                assert!(
                    acme[0].body.contains("fails closed"),
                    "{ctx}: {}",
                    acme[0].body
                );
                assert_eq!(acme[0].headers["content-type"], "application/problem+json");
            }
            "retry-then-deny" => {
                assert_eq!(count(acme, 429), 12, "{ctx}: denied with 429");
                assert_eq!(count(globex, 429), 3, "{ctx}: globex denied too");
                assert_eq!(sources(globex), ["deny_on_error"], "{ctx}");
            }
            "fail-static" => {
                assert_eq!(count(acme, 429), 12, "{ctx}: acme stays refused");
                assert_eq!(sources(acme), ["static"], "{ctx}");
                assert_eq!(count(globex, 200), 3, "{ctx}: globex gets the local share");
                assert_eq!(sources(globex), ["local"], "{ctx}");
            }
            "local-only" => {
                assert_eq!(count(acme, 200), 0, "{ctx}: acme's local limit was spent");
                assert_eq!(count(globex, 200), 3, "{ctx}");
                assert_eq!(sources(acme), ["local"], "{ctx}");
            }
            other => panic!("no expectation for {other}"),
        }
    }

    // How each got there: the breaker spares local share the timeouts; timeout-only pays one
    // per request; retry-then-deny pays two; local-only never calls.
    let calls = |text: &str| -> f64 {
        ["timeout", "connection", "error"]
            .iter()
            .map(|r| {
                metric(
                    text,
                    &format!(r#"failmode_store_calls_total{{result="{r}"}}"#),
                )
            })
            .sum()
    };
    let local_share = fleet.metrics("local-share").await;
    // Five failures open the breaker; after that only the half-open probes reach the store.
    let probes = metric(
        &local_share,
        r#"failmode_breaker_transitions_total{to="half_open"}"#,
    );
    assert_eq!(
        calls(&local_share),
        5.0 + probes,
        "local share stops calling once the breaker opens"
    );
    assert_eq!(metric(&local_share, "failmode_breaker_state"), 1.0, "open");
    assert_eq!(
        metric(
            &local_share,
            r#"failmode_fallback_total{route="api",reason="breaker_open"}"#
        ),
        27.0 - calls(&local_share),
        "every other decision skipped the store"
    );
    // 12 + 3 + 12 decisions, each a call: no breaker.
    assert_eq!(calls(&fleet.metrics("timeout-only").await), 27.0);
    // Each with its retry.
    assert_eq!(calls(&fleet.metrics("retry-then-deny").await), 54.0);
    assert_eq!(calls(&fleet.metrics("local-only").await), 0.0);
    assert_eq!(metric(&local_share, "failmode_degraded"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_hung_each_policy_falls_back_as_designed() {
    let redis = RedisServer::start();
    let fleet = Fleet::start(&redis).await;
    healthy_phase(&redis, &fleet).await;
    redis.hang();
    assert_outage_behaviour(&fleet, "hung").await;
    let timeouts = metric(
        &fleet.metrics("timeout-only").await,
        r#"failmode_fallback_total{route="api",reason="timeout"}"#,
    );
    assert_eq!(
        timeouts, 27.0,
        "a hung Redis is a timeout, every time without a breaker"
    );
    redis.resume();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_killed_each_policy_falls_back_as_designed() {
    let mut redis = RedisServer::start();
    let fleet = Fleet::start(&redis).await;
    healthy_phase(&redis, &fleet).await;
    redis.kill();
    assert_outage_behaviour(&fleet, "killed").await;
    let refused = metric(
        &fleet.metrics("timeout-only").await,
        r#"failmode_fallback_total{route="api",reason="connection"}"#,
    );
    assert_eq!(
        refused, 27.0,
        "a dead Redis fails fast, as a connection error"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_restarted_empty_every_store_policy_recovers_and_over_admits_once() {
    let mut redis = RedisServer::start();
    let fleet = Fleet::start(&redis).await;
    healthy_phase(&redis, &fleet).await;
    redis.restart();
    // Each instance notices the reset on its next call and reconnects in the background.
    for (policy, server) in &fleet.servers {
        if *policy == "local-only" {
            continue;
        }
        let (client, addr) = (fleet.client.clone(), server.addr());
        eventually(
            Duration::from_secs(10),
            &format!("{policy} back on the store"),
            || {
                let client = client.clone();
                async move { client.get(addr, "/api", Some("probe")).await.source == "store" }
            },
        )
        .await;
    }
    for (policy, answers) in fleet.burst("acme", 12).await {
        if policy == "local-only" {
            assert_eq!(count(&answers, 200), 0, "local-only kept its own counters");
            continue;
        }
        // Counters were lost: acme's spent limit is granted again, 10 more in the same window.
        assert_eq!(
            count(&answers, 200),
            10,
            "{policy} after the restart: {answers:?}"
        );
        assert_eq!(sources(&answers), ["store"], "{policy}");
    }
}
