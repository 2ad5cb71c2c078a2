//! Real redis-server and toxiproxy-server processes on free loopback ports: the Toxiproxy
//! client's faults observed from a client's side, and the child-process guarantees the
//! harness relies on (group killed on drop, early exits reported with their log).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use failmode::infra::toxiproxy::{Stream, Toxic, ToxicKind, Toxiproxy, ToxiproxyError};
use failmode::infra::{ChildProcess, InfraError, RedisServer, free_port, wait_for_tcp};
use support::proxied::ProxiedRedis;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Every wait on the network is bounded by this unless the test says otherwise.
const BOUND: Duration = Duration::from_secs(5);

/// A redis-server, a toxiproxy-server and one proxy in front of the Redis.
async fn world() -> ProxiedRedis {
    ProxiedRedis::start("test", "redis").await
}

async fn connect(addr: SocketAddr) -> TcpStream {
    tokio::time::timeout(BOUND, TcpStream::connect(addr))
        .await
        .expect("connect within the bound")
        .expect("connect")
}

/// One PING on `stream`; how long the +PONG took.
async fn ping(stream: &mut TcpStream, within: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    let exchange = async {
        stream.write_all(b"PING\r\n").await?;
        let mut reply = [0u8; 7];
        stream.read_exact(&mut reply).await?;
        std::io::Result::Ok(reply)
    };
    match tokio::time::timeout(within, exchange).await {
        Ok(Ok(reply)) if &reply == b"+PONG\r\n" => Ok(started.elapsed()),
        Ok(Ok(reply)) => Err(format!(
            "unexpected reply {:?}",
            String::from_utf8_lossy(&reply)
        )),
        Ok(Err(e)) => Err(format!("connection failed: {e}")),
        Err(_) => Err(format!("no answer within {within:?}")),
    }
}

/// The fastest of a few PINGs: one slow scheduling hiccup must not fail a "fast" check.
async fn fastest_ping(stream: &mut TcpStream) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..3 {
        best = best.min(ping(stream, BOUND).await.unwrap());
    }
    best
}

#[tokio::test]
async fn latency_toxic_delays_each_ping_through_the_proxy_until_it_is_removed() {
    let w = world().await;
    let mut stream = connect(w.listen).await;
    assert!(fastest_ping(&mut stream).await < Duration::from_millis(20));

    let latency = Toxic::new(
        "slow",
        ToxicKind::Latency {
            latency_ms: 40,
            jitter_ms: 0,
        },
    );
    let added = w.api.add_toxic(&w.proxy, &latency).await.unwrap();
    assert_eq!(added, latency);
    assert_eq!(w.api.toxics(&w.proxy).await.unwrap(), vec![latency]);

    // The toxic applies to the connection opened before it was added.
    for _ in 0..3 {
        let took = ping(&mut stream, BOUND).await.unwrap();
        assert!(took >= Duration::from_millis(40), "PING took {took:?}");
    }

    w.api.remove_toxic(&w.proxy, "slow").await.unwrap();
    assert!(w.api.toxics(&w.proxy).await.unwrap().is_empty());
    assert!(fastest_ping(&mut stream).await < Duration::from_millis(20));
}

#[tokio::test]
async fn disabling_a_proxy_cuts_and_refuses_connections_and_enabling_restores_them() {
    let w = world().await;
    let mut open = connect(w.listen).await;
    ping(&mut open, BOUND).await.unwrap();

    let down = w.api.set_enabled(&w.proxy, false).await.unwrap();
    assert!(!down.enabled);
    assert!(!w.api.proxy(&w.proxy).await.unwrap().enabled);
    let cut = ping(&mut open, BOUND).await.unwrap_err();
    assert!(cut.contains("connection failed"), "{cut}");
    let refused = tokio::time::timeout(BOUND, TcpStream::connect(w.listen))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);

    let up = w.api.set_enabled(&w.proxy, true).await.unwrap();
    assert!(up.enabled);
    assert_eq!(
        up.listen_addr(),
        Some(w.listen),
        "same address after re-enabling"
    );
    let mut fresh = connect(w.listen).await;
    ping(&mut fresh, BOUND).await.unwrap();
}

#[tokio::test]
async fn timeout_toxic_of_zero_hangs_ping_while_the_connection_stays_open() {
    let w = world().await;
    let mut stream = connect(w.listen).await;
    ping(&mut stream, BOUND).await.unwrap();

    let hang = Toxic::new("hang", ToxicKind::Timeout { timeout_ms: 0 });
    w.api.add_toxic(&w.proxy, &hang).await.unwrap();
    let silent = ping(&mut stream, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(silent.contains("no answer"), "{silent}");
    // Still open: nothing to read, and no end of stream either.
    let mut byte = [0u8; 1];
    match stream.try_read(&mut byte) {
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock),
        Ok(n) => panic!("the hung connection gave {n} bytes (0 = closed)"),
    }

    // Removing a timeout toxic closes the connections it held (Toxiproxy's cleanup);
    // new ones are answered.
    w.api.remove_toxic(&w.proxy, "hang").await.unwrap();
    let mut fresh = connect(w.listen).await;
    ping(&mut fresh, BOUND).await.unwrap();
}

#[tokio::test]
async fn reset_removes_every_toxic_and_enables_every_proxy() {
    let w = world().await;
    for toxic in [
        Toxic::new(
            "slow",
            ToxicKind::Latency {
                latency_ms: 40,
                jitter_ms: 10,
            },
        ),
        Toxic::new("thin", ToxicKind::Bandwidth { rate_kb: 1 }).with_stream(Stream::Upstream),
    ] {
        w.api.add_toxic(&w.proxy, &toxic).await.unwrap();
    }
    assert_eq!(w.api.toxics(&w.proxy).await.unwrap().len(), 2);
    w.api.set_enabled(&w.proxy, false).await.unwrap();

    w.api.reset().await.unwrap();
    let proxies = w.api.proxies().await.unwrap();
    assert_eq!(proxies.len(), 1);
    assert!(proxies[0].enabled);
    assert!(proxies[0].toxics.is_empty());
    let mut stream = connect(w.listen).await;
    assert!(fastest_ping(&mut stream).await < Duration::from_millis(20));
}

#[tokio::test]
async fn api_errors_are_returned_with_the_operation_and_the_apis_message() {
    let w = world().await;
    assert!(!w.api.version().await.unwrap().is_empty());
    let toxic = Toxic::new(
        "slow",
        ToxicKind::Latency {
            latency_ms: 40,
            jitter_ms: 0,
        },
    );

    let missing = w.api.add_toxic("no-such-proxy", &toxic).await.unwrap_err();
    assert_eq!(missing.status(), Some(404));
    let text = missing.to_string();
    assert!(text.contains("no-such-proxy"), "{text}");
    assert!(text.contains("\"slow\""), "{text}");
    assert!(text.contains("proxy not found"), "{text}");

    w.api.add_toxic(&w.proxy, &toxic).await.unwrap();
    let twice = w.api.add_toxic(&w.proxy, &toxic).await.unwrap_err();
    assert_eq!(twice.status(), Some(409), "{twice}");
    assert!(
        twice.to_string().contains("toxic already exists"),
        "{twice}"
    );

    let no_toxic = w.api.remove_toxic(&w.proxy, "nope").await.unwrap_err();
    assert_eq!(no_toxic.status(), Some(404), "{no_toxic}");
    let taken = w
        .api
        .create_proxy(&w.proxy, "127.0.0.1:0".parse().unwrap(), w.redis.addr())
        .await
        .unwrap_err();
    assert_eq!(taken.status(), Some(409), "{taken}");

    let bad = w
        .api
        .add_toxic(&w.proxy, &toxic.clone().with_toxicity(1.5))
        .await
        .unwrap_err();
    assert!(matches!(bad, ToxiproxyError::Invalid { .. }), "{bad}");

    w.api.delete_proxy(&w.proxy).await.unwrap();
    assert_eq!(w.api.proxy(&w.proxy).await.unwrap_err().status(), Some(404));
}

#[tokio::test]
async fn an_unreachable_api_is_a_transport_error_not_a_panic() {
    let closed = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
    let error = Toxiproxy::new(closed).reset().await.unwrap_err();
    assert!(matches!(error, ToxiproxyError::Transport { .. }), "{error}");
    assert!(error.to_string().contains(&closed.to_string()), "{error}");
}

#[tokio::test]
async fn redis_info_answers_a_section_times_out_when_hung_and_restart_keeps_the_port() {
    let dir = tempfile::tempdir().unwrap();
    let mut redis = RedisServer::start("redis-info", dir.path()).await.unwrap();
    let mut stream = connect(redis.addr()).await;
    ping(&mut stream, BOUND).await.unwrap();
    let stats = redis.info("commandstats").await.unwrap();
    assert!(stats.contains("cmdstat_ping:calls="), "{stats}");

    redis.hang().unwrap();
    let started = Instant::now();
    let hung = redis.info("commandstats").await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(hung.to_string().contains("INFO commandstats"), "{hung}");
    redis.resume().unwrap();
    redis.info("server").await.unwrap();

    let (port, pid) = (redis.port(), redis.pid());
    redis.restart().await.unwrap();
    assert_eq!(redis.port(), port);
    assert_ne!(redis.pid(), pid);
    let stats = redis.info("commandstats").await.unwrap();
    // A fresh server: only the readiness INFO (asking its process id) so far.
    assert!(stats.contains("cmdstat_info:calls=1,"), "{stats}");
    assert!(!stats.contains("cmdstat_ping"), "{stats}");
    redis.stop().await.unwrap();
}

/// Live (not zombie) processes in process group `pgid`, as (pid, command name).
fn group_members(pgid: u32) -> Vec<(u32, String)> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...; comm may hold spaces, so split after the ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_owned();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if rest.first() != Some(&"Z") && rest.get(2) == Some(&pgid.to_string().as_str()) {
            members.push((pid, comm));
        }
    }
    members
}

fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

/// Polls `condition` every 10 ms until it holds or `bound` passes; whether it held.
async fn eventually(bound: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn log_in(dir: &Path, name: &str) -> std::path::PathBuf {
    dir.join(format!("{name}.log"))
}

#[tokio::test]
async fn dropping_a_child_process_kills_its_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let child = ChildProcess::spawn(
        "sleepers",
        "sh",
        ["-c", "sleep 300 & sleep 300; true"],
        &[],
        &log_in(dir.path(), "sleepers"),
    )
    .unwrap();
    let pgid = child.pid();
    let mut sleepers = Vec::new();
    assert!(
        eventually(BOUND, || {
            sleepers = group_members(pgid)
                .into_iter()
                .filter(|(_, comm)| comm == "sleep")
                .map(|(pid, _)| pid)
                .collect();
            sleepers.len() == 2
        })
        .await,
        "two sleeps in group {pgid}: {:?}",
        group_members(pgid)
    );

    drop(child);
    assert!(
        eventually(BOUND, || sleepers.iter().all(|pid| !is_alive(*pid))).await,
        "still alive after drop: {:?}",
        group_members(pgid)
    );
}

#[tokio::test]
async fn stop_kills_a_child_that_ignores_sigterm_once_the_grace_is_over() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = ChildProcess::spawn(
        "stubborn",
        // The log's header repeats the command line, so the word waited for is built at run
        // time: finding it means the handler is in place.
        "perl",
        [
            "-e",
            "$SIG{TERM} = 'IGNORE'; $| = 1; print 'TERM ign' . \"ored\\n\"; sleep 300",
        ],
        &[],
        &log_in(dir.path(), "stubborn"),
    )
    .unwrap();
    let log = child.log_path().to_owned();
    assert!(
        eventually(BOUND, || std::fs::read_to_string(&log)
            .is_ok_and(|l| l.contains("TERM ignored")))
        .await
    );
    assert_eq!(child.try_exit(), None);
    let started = Instant::now();
    let status = child.stop(Duration::from_millis(200)).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "{status}");
    assert_eq!(child.try_exit(), Some(status));
}

#[tokio::test]
async fn a_missing_binary_is_reported_with_how_to_install_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(dir.path(), "missing");
    let error = ChildProcess::spawn(
        "toxiproxy-server",
        "/nonexistent/bin/toxiproxy-server",
        ["-port", "1"],
        &[],
        &log,
    )
    .unwrap_err();
    let InfraError::MissingBinary { program, hint } = &error else {
        panic!("not MissingBinary: {error}");
    };
    assert_eq!(program, "/nonexistent/bin/toxiproxy-server");
    assert!(hint.contains("just setup"), "{hint}");
    assert!(
        hint.contains("github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0"),
        "{hint}"
    );

    let error =
        ChildProcess::spawn("ghost", "failmode-no-such-tool", [""; 0], &[], &log).unwrap_err();
    assert!(matches!(error, InfraError::MissingBinary { .. }), "{error}");
    assert!(
        error.to_string().contains("failmode-no-such-tool"),
        "{error}"
    );
}

#[tokio::test]
async fn wait_for_tcp_reports_a_child_that_exits_early_by_name_with_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = ChildProcess::spawn(
        "fake-server",
        "sh",
        // The line number is computed, so the quoted text can only come from the child's
        // output, not from the command line the log's header repeats.
        [
            "-c",
            "echo \"FATAL: bad config line $((1 + 2))\" >&2; exit 3",
        ],
        &[],
        &log_in(dir.path(), "fake-server"),
    )
    .unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
    let started = Instant::now();
    let error = wait_for_tcp(addr, Duration::from_secs(10), &mut child)
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "failed fast");
    let InfraError::ExitedEarly { status, .. } = &error else {
        panic!("not ExitedEarly: {error}");
    };
    assert_eq!(status.code(), Some(3));
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "fake-server exited with status 3 before accepting connections on {addr}"
        )),
        "{text}"
    );
    assert!(text.contains("FATAL: bad config line 3"), "{text}");
    assert!(text.contains("fake-server.log"), "{text}");
}

#[tokio::test]
async fn a_child_that_could_not_bind_its_port_is_reported_as_port_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = ChildProcess::spawn(
        "fake-redis",
        "sh",
        ["-c", "echo 'bind: Address already in use' >&2; exit 1"],
        &[],
        &log_in(dir.path(), "fake-redis"),
    )
    .unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port().unwrap()));
    let error = wait_for_tcp(addr, BOUND, &mut child).await.unwrap_err();
    assert!(matches!(error, InfraError::PortInUse { .. }), "{error}");
    assert!(
        error
            .to_string()
            .starts_with(&format!("port {addr} is in use")),
        "{error}"
    );
}

#[tokio::test]
async fn wait_for_tcp_returns_once_the_child_listens() {
    let dir = tempfile::tempdir().unwrap();
    let redis = RedisServer::start("redis-listen", dir.path())
        .await
        .unwrap();
    // The server is up: a second "child" that sleeps stands in for a process still running.
    let mut child = ChildProcess::spawn(
        "waiter",
        "sleep",
        ["30"],
        &[],
        &log_in(dir.path(), "waiter"),
    )
    .unwrap();
    wait_for_tcp(redis.addr(), BOUND, &mut child).await.unwrap();
    child.stop(Duration::from_secs(1)).await.unwrap();
}

#[tokio::test]
async fn a_stall_stops_redis_itself_with_connections_open_and_queued_commands_run_when_it_ends() {
    let w = world().await;
    let redis_addr = w.redis.addr();
    let redis = std::sync::Arc::new(tokio::sync::Mutex::new(w.redis));
    let player = failmode::run::timeline::Player::new(w.api.clone(), vec![w.proxy.clone()])
        .with_redis(vec![Some(redis.clone())])
        .await;
    let stall = [failmode::faults::Fault::Stall {}];
    let mut stream = connect(w.listen).await;
    ping(&mut stream, BOUND).await.unwrap();

    assert!(player.apply("stalled", &stall, &[], BOUND).await[0].is_ok());
    // Nothing answers, through the proxy or directly, yet the connection stays open.
    let err = ping(&mut stream, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(err.contains("no answer"), "{err}");
    let mut direct = connect(redis_addr).await;
    direct.write_all(b"INCR phantom\r\n").await.unwrap();
    assert!(
        redis.lock().await.info("server").await.is_err(),
        "Redis is stopped"
    );

    assert!(player.remove("stalled", &stall, &[]).await[0].is_ok());
    // The PING the client gave up on, and the INCR sent during the stall, both ran: a
    // count the caller never saw answered (a phantom hit).
    let mut pong = [0u8; 7];
    tokio::time::timeout(BOUND, stream.read_exact(&mut pong))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
    let mut one = [0u8; 4];
    tokio::time::timeout(BOUND, direct.read_exact(&mut one))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&one, b":1\r\n");
    fastest_ping(&mut stream).await;
}
