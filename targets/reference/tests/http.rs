//! The HTTP contract: caller keys, the 429 and fail-closed answers, operations endpoints, and
//! the binary's handling of bad settings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;
use std::time::Duration;

use support::{Client, RedisServer, count, metric, reference, reference_at};

#[tokio::test]
async fn a_request_without_a_caller_key_gets_400_problem_json() {
    let redis = RedisServer::start();
    let server = reference(&redis, &[]).await;
    let answer = Client::default().get(server.addr(), "/api", None).await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.headers["content-type"], "application/problem+json");
    assert!(answer.body.contains("x-caller"), "{}", answer.body);
    assert!(
        answer
            .body
            .contains("never falls back to the client address")
    );
}

#[tokio::test]
async fn a_caller_key_over_256_bytes_gets_400_and_256_bytes_is_fine() {
    let redis = RedisServer::start();
    let server = reference(&redis, &[]).await;
    let client = Client::default();
    let long = "a".repeat(257);
    let answer = client.get(server.addr(), "/api", Some(&long)).await;
    assert_eq!(answer.status, 400);
    assert!(answer.body.contains("257 bytes"), "{}", answer.body);
    let answer = client.get(server.addr(), "/api", Some(&long[..256])).await;
    assert_eq!(answer.status, 200);
}

#[tokio::test]
async fn a_caller_key_that_is_there_but_not_visible_ascii_or_empty_is_named_as_such() {
    let redis = RedisServer::start();
    let server = reference(&redis, &[]).await;
    let client = Client::default();
    for (caller, title) in [
        ("café", "Caller key not visible ASCII"),
        ("", "Empty caller key"),
    ] {
        let answer = client.get(server.addr(), "/api", Some(caller)).await;
        assert_eq!(answer.status, 400);
        let body: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(body["title"], title, "{caller:?}");
        assert!(!answer.body.contains("Missing"), "{}", answer.body);
    }
}

#[tokio::test]
async fn a_window_below_a_second_is_advertised_at_its_rate_over_a_whole_second() {
    let redis = RedisServer::start();
    let server = reference(&redis, &["--limit", "50", "--window", "500ms"]).await;
    let answer = Client::default()
        .get(server.addr(), "/api", Some("acme"))
        .await;
    assert_eq!(answer.headers["ratelimit-policy"], r#""api";q=100;w=1"#);
}

#[tokio::test]
async fn the_caller_header_is_configurable() {
    let redis = RedisServer::start();
    let server = reference(&redis, &["--caller-header", "x-api-key"]).await;
    let answer = Client::default()
        .get(server.addr(), "/api", Some("acme"))
        .await;
    assert_eq!(answer.status, 400, "x-caller is no longer the key");
    assert!(answer.body.contains("x-api-key"));
}

#[tokio::test]
async fn a_limited_request_gets_429_with_ratelimit_fields_and_a_problem_body() {
    let redis = RedisServer::start();
    let server = reference(&redis, &["--limit", "3", "--window", "10s"]).await;
    let answers = Client::default()
        .burst(server.addr(), "/api", "acme", 4)
        .await;
    assert_eq!(count(&answers, 200), 3);
    let ok = &answers[0];
    assert_eq!(ok.headers["ratelimit-policy"], r#""api";q=3;w=10"#);
    // After one request (estimate 1, none the window before) one more than the 2 left fits
    // only once that request's weight has decayed: over the next window, not at this one's end.
    let t: u64 = ok.headers["ratelimit"]
        .to_str()
        .unwrap()
        .strip_prefix(r#""api";r=2;t="#)
        .and_then(|t| t.parse().ok())
        .expect("r=2 and a t");
    assert!((11..=20).contains(&t), "{t}");

    let limited = &answers[3];
    assert_eq!(limited.status, 429);
    assert_eq!(limited.headers["content-type"], "application/problem+json");
    assert_eq!(limited.headers["ratelimit-policy"], r#""api";q=3;w=10"#);
    let retry: u64 = limited.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    // Window full at c = 3: the rest of this 10 s window (the next one's estimate, 3 × (1 −
    // pos), is below 3 as soon as it begins).
    assert!((1..=10).contains(&retry), "{retry}");
    assert_eq!(
        limited.headers["ratelimit"].to_str().unwrap(),
        format!(r#""api";r=0;t={retry}"#)
    );
    let body: serde_json::Value = serde_json::from_str(&limited.body).unwrap();
    assert_eq!(
        body["type"],
        "https://iana.org/assignments/http-problem-types#quota-exceeded"
    );
    assert_eq!(body["violated-policies"], serde_json::json!(["api"]));
    assert_eq!(body["policy"], "api");
    assert_eq!(body["failure_policy"], "local-share");
    assert_eq!(body["retry_after_seconds"], retry);
}

#[tokio::test]
async fn a_route_that_fails_closed_on_purpose_answers_503_with_retry_after_never_500() {
    let mut redis = RedisServer::start();
    let server = reference(&redis, &["--breaker-cooldown", "2s"]).await;
    let client = Client::default();
    assert_eq!(
        client
            .get(server.addr(), "/login", Some("acme"))
            .await
            .status,
        200
    );
    redis.kill();
    let answers = client.burst(server.addr(), "/login", "acme", 8).await;
    assert_eq!(count(&answers, 503), 8, "{answers:?}");
    assert_eq!(
        answers[7].headers["retry-after"], "2",
        "the breaker's cool-down"
    );
    // The main route, local share, keeps serving meanwhile.
    assert_eq!(
        client.get(server.addr(), "/api", Some("acme")).await.status,
        200
    );
}

#[tokio::test]
async fn fail_closed_answers_the_configured_status() {
    let mut redis = RedisServer::start();
    let server = reference(&redis, &["--policy", "fail-closed", "--fail-status", "503"]).await;
    redis.kill();
    let answer = Client::default()
        .get(server.addr(), "/api", Some("acme"))
        .await;
    assert_eq!(answer.status, 503);
    assert!(answer.headers.contains_key("retry-after"));
}

#[tokio::test]
async fn healthz_and_metrics_answer_while_redis_is_hung() {
    let redis = RedisServer::start();
    let server = reference(&redis, &[]).await;
    let client = Client::default();
    client.get(server.addr(), "/api", Some("acme")).await;
    redis.hang();
    let started = std::time::Instant::now();
    let health = client.get(server.addr(), "/healthz", None).await;
    assert_eq!(health.status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "healthz must not wait on Redis"
    );
    for _ in 0..6 {
        client.get(server.addr(), "/api", Some("acme")).await;
    }
    let metrics = client.metrics(server.addr()).await;
    assert_eq!(
        metric(
            &metrics,
            r#"failmode_fallback_total{route="api",reason="timeout"}"#
        ),
        5.0
    );
    assert_eq!(
        metric(
            &metrics,
            r#"failmode_fallback_total{route="api",reason="breaker_open"}"#
        ),
        1.0
    );
    assert_eq!(metric(&metrics, "failmode_breaker_state"), 1.0);
    assert!(metric(&metrics, "failmode_store_latency_seconds_count") >= 1.0);
    assert!(
        metrics
            .contains(r#"failmode_decisions_total{route="api",outcome="admitted",source="local"}"#)
    );
    redis.resume();
}

#[tokio::test]
async fn an_unreachable_redis_at_start_up_is_not_fatal() {
    // Nothing listens on port 1.
    let server = reference_at(
        "redis://127.0.0.1:1",
        &["--instance-count", "2", "--limit", "4"],
    )
    .await;
    let client = Client::default();
    assert_eq!(
        client.get(server.addr(), "/healthz", None).await.status,
        200
    );
    let answers = client.burst(server.addr(), "/api", "acme", 4).await;
    assert_eq!(
        count(&answers, 200),
        2,
        "limit 4 over 2 configured instances"
    );
    assert!(answers.iter().all(|a| a.source == "local"));
    assert_eq!(
        metric(&client.metrics(server.addr()).await, "failmode_degraded"),
        1.0
    );
}

#[tokio::test]
async fn an_unknown_path_is_404_problem_json_and_unlimited_never_limits() {
    let redis = RedisServer::start();
    let server = reference(&redis, &["--limit", "1"]).await;
    let client = Client::default();
    let answer = client.get(server.addr(), "/nope", Some("acme")).await;
    assert_eq!(answer.status, 404);
    assert_eq!(answer.headers["content-type"], "application/problem+json");
    let answers = client.burst(server.addr(), "/unlimited", "acme", 5).await;
    assert_eq!(count(&answers, 200), 5);
}

fn binary() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_failmode-reference"));
    // The test's own environment must not leak settings in.
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("FAILMODE_")) {
        cmd.env_remove(key);
    }
    cmd
}

#[test]
fn a_bad_setting_exits_64_naming_it() {
    for (flag, value, env) in [
        ("--limit", "zero", "FAILMODE_LIMIT"),
        ("--window", "0ms", "FAILMODE_WINDOW"),
        ("--policy", "maybe", "FAILMODE_POLICY"),
        ("--redis-url", "ftp://x", "FAILMODE_REDIS_URL"),
    ] {
        let out = binary().args([flag, value]).output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{flag} {value}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(flag), "{flag}: {stderr}");

        // The same value from the environment is refused the same way.
        let out = binary().env(env, value).output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{env}={value}");
    }
    let out = binary()
        .env("FAILMODE_ROUTES", "/x=fail-open,colour=red")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("colour"));
}

#[test]
fn help_exits_0() {
    let out = binary().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("FAILMODE_POLICY"));
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = binary().args(["--port", &port]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{stderr}"
    );
}

/// The process's own flag, not the host's setting: a host that gives huge pages to every
/// process ("always") gives none to it either.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_process_runs_with_transparent_huge_pages_off() {
    fn thp_enabled(status: &str) -> Option<String> {
        std::fs::read_to_string(status)
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("THP_enabled:"))
            .map(|v| v.trim().to_owned())
    }
    // The flag passes from parent to child, so a child's 0 proves nothing if this process has
    // it off already, or on a kernel without huge pages or too old (before 5.0) to say.
    if thp_enabled("/proc/self/status").as_deref() != Some("1") {
        eprintln!("skipped: this process does not run with THP_enabled 1, so a 0 proves nothing");
        return;
    }
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let redis_url = format!("redis://{}", closed.local_addr().unwrap());
    drop(closed);
    let child = binary()
        .args(["--port", "0", "--redis-url", &redis_url])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KilledOnDrop(child);
    let status = format!("/proc/{}/status", child.0.id());
    support::eventually(
        Duration::from_secs(10),
        "THP_enabled: 0 in its status",
        || {
            let exited = child.0.try_wait().unwrap();
            assert!(
                exited.is_none(),
                "the reference exited at start: {exited:?}"
            );
            std::future::ready(thp_enabled(&status).as_deref() == Some("0"))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_logged_once_a_second_and_its_end_once_without_the_redis_password() {
    let mut redis = RedisServer::start();
    let require_password = |redis: &RedisServer| {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("requirepass")
            .arg("s3cret")
            .query(&mut redis.conn())
            .unwrap();
    };
    require_password(&redis);
    let port = redis.url().rsplit(':').next().unwrap().to_owned();
    let log = tempfile::NamedTempFile::new().unwrap();
    let child = binary()
        .args(["--port", "0", "--breaker-cooldown", "200ms"])
        .args([
            "--redis-url",
            &format!("redis://default:s3cret@127.0.0.1:{port}"),
        ])
        .env("FAILMODE_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let child = KilledOnDrop(child);
    let read_log = || std::fs::read_to_string(log.path()).unwrap();
    let mut addr = None;
    support::eventually(Duration::from_secs(10), "the listening line", || {
        addr = read_log()
            .lines()
            .find(|l| l.contains("listening"))
            .and_then(|l| l.split("addr=").nth(1))
            .and_then(|a| a.split_whitespace().next())
            .and_then(|a| a.parse::<std::net::SocketAddr>().ok());
        std::future::ready(addr.is_some())
    })
    .await;
    let addr = addr.unwrap();
    let client = Client::default();
    assert_eq!(client.get(addr, "/api", Some("acme")).await.source, "store");

    redis.kill();
    let outage = std::time::Instant::now();
    while outage.elapsed() < Duration::from_millis(2500) {
        client.get(addr, "/api", Some("acme")).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    redis.restart();
    require_password(&redis);
    support::eventually(
        Duration::from_secs(10),
        "the store deciding again",
        || async { client.get(addr, "/api", Some("acme")).await.source == "store" },
    )
    .await;
    let seconds = outage.elapsed().as_secs_f64();
    support::eventually(Duration::from_secs(5), "the line saying so", || {
        std::future::ready(read_log().contains("the store answers again"))
    })
    .await;
    drop(child);

    let text = read_log();
    let summaries = text.matches("deciding without the store").count();
    // One a second of the outage (a second cut in two by the ticks counts twice at most).
    assert!(
        (2..=seconds.ceil() as usize + 1).contains(&summaries),
        "{summaries} summaries over {seconds:.1} s:\n{text}"
    );
    assert_eq!(text.matches("the store answers again").count(), 1, "{text}");
    assert!(!text.contains("entering fallback"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

/// A child process killed and reaped however the test ends.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
