//! What the circuit breaker counts against the store, with error replies made by a real
//! redis-server: a reply every command would get (OOM, READONLY, BUSY) is the store failing; a
//! script error about one caller's key is not, and must not turn another route into refusals.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::{Client, RedisServer, eventually, metric, reference};

const FLAGS: [&str; 2] = ["--breaker-cooldown", "200ms"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_error_on_one_callers_key_leaves_the_breaker_closed_for_every_route() {
    let redis = RedisServer::start();
    let server = reference(&redis, &FLAGS).await;
    let addr = server.addr();
    // A key of the wrong type: every call for acme on /api is a WRONGTYPE script error.
    let _: i64 = redis::cmd("RPUSH")
        .arg("rl:{acme}:api")
        .arg("not a counter")
        .query(&mut redis.conn())
        .unwrap();
    let client = Client::default();
    let answers = client.burst(addr, "/api", "acme", 20).await;
    assert!(
        answers
            .iter()
            .all(|a| a.status == 200 && a.source == "local"),
        "acme is decided by its turn of the limit: {answers:?}"
    );
    let text = client.metrics(addr).await;
    assert_eq!(
        metric(
            &text,
            r#"failmode_fallback_total{route="api",reason="error"}"#
        ),
        20.0
    );
    assert_eq!(metric(&text, "failmode_breaker_state"), 0.0, "{text}");
    assert_eq!(metric(&text, "failmode_degraded"), 0.0, "{text}");
    for (path, caller) in [("/login", "globex"), ("/api", "globex")] {
        let answer = client.get(addr, path, Some(caller)).await;
        assert_eq!(
            (answer.status, answer.source.as_str()),
            (200, "store"),
            "{path} for {caller}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_wide_error_replies_open_the_breaker_and_it_closes_when_they_stop() {
    let redis = RedisServer::start();
    let primary = RedisServer::start();
    let server = reference(&redis, &FLAGS).await;
    let addr = server.addr();
    let client = Client::default();
    let mut refused = 0.0;
    for fault in [Fault::Oom, Fault::ReadOnly, Fault::Busy] {
        let undo = fault.apply(&redis, &primary);
        eventually(
            Duration::from_secs(5),
            &format!("{fault:?}: the breaker open"),
            || async {
                client.get(addr, "/api", Some("acme")).await;
                metric(&client.metrics(addr).await, "failmode_breaker_state") == 1.0
            },
        )
        .await;
        let text = client.metrics(addr).await;
        let now = metric(
            &text,
            r#"failmode_fallback_total{route="api",reason="refused"}"#,
        );
        assert!(
            now >= refused + 5.0,
            "{fault:?}: {now} refused after {refused}"
        );
        refused = now;
        let login = client.get(addr, "/login", Some("globex")).await;
        assert_eq!(login.status, 503, "{fault:?}: /login fails closed");
        undo.run();
        decided_by_store_again(&client, addr, &format!("{fault:?}")).await;
    }
}

async fn decided_by_store_again(client: &Client, addr: SocketAddr, what: &str) {
    eventually(
        Duration::from_secs(5),
        &format!("{what}: the store deciding again"),
        || async { client.get(addr, "/api", Some("acme")).await.source == "store" },
    )
    .await;
}

/// A store-wide error reply, made by redis-server itself.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// `maxmemory` below the memory in use, `noeviction`: writes get `-OOM`.
    Oom,
    /// A replica of another server: writes get `-READONLY`.
    ReadOnly,
    /// Another client's script past `busy-reply-threshold`: every command gets `-BUSY`.
    Busy,
}

/// What ends a fault, on a connection made before it: under BUSY a new connection's
/// handshake would be refused.
struct Undo(redis::Connection, Ending);

enum Ending {
    Config(&'static str, &'static str),
    Primary,
    KillScript(std::thread::JoinHandle<()>),
}

impl Fault {
    fn apply(self, redis: &RedisServer, primary: &RedisServer) -> Undo {
        let mut conn = redis.conn();
        let config = |conn: &mut redis::Connection, key: &str, value: &str| {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg(key)
                .arg(value)
                .query(conn)
                .unwrap();
        };
        match self {
            Self::Oom => {
                config(&mut conn, "maxmemory-policy", "noeviction");
                config(&mut conn, "maxmemory", "1");
                Undo(conn, Ending::Config("maxmemory", "0"))
            }
            Self::ReadOnly => {
                let port = primary.url().rsplit(':').next().unwrap().to_owned();
                let _: () = redis::cmd("REPLICAOF")
                    .arg("127.0.0.1")
                    .arg(port)
                    .query(&mut conn)
                    .unwrap();
                Undo(conn, Ending::Primary)
            }
            Self::Busy => {
                config(&mut conn, "busy-reply-threshold", "50");
                let mut script_conn = redis.conn();
                let script = std::thread::spawn(move || {
                    // Runs until SCRIPT KILL, which makes it return an error.
                    let _ = redis::cmd("EVAL")
                        .arg("while true do end")
                        .arg(0)
                        .query::<()>(&mut script_conn);
                });
                // Busy once the threshold has passed: a PING gets BUSY, not a wait.
                let busy = (0..100).any(|_| {
                    std::thread::sleep(Duration::from_millis(20));
                    redis::cmd("PING")
                        .query::<String>(&mut conn)
                        .is_err_and(|e| e.code() == Some("BUSY"))
                });
                assert!(busy, "redis-server never answered BUSY");
                Undo(conn, Ending::KillScript(script))
            }
        }
    }
}

impl Undo {
    fn run(self) {
        let Self(mut conn, ending) = self;
        match ending {
            Ending::Config(key, value) => {
                let _: () = redis::cmd("CONFIG")
                    .arg("SET")
                    .arg(key)
                    .arg(value)
                    .query(&mut conn)
                    .unwrap();
            }
            Ending::Primary => {
                let _: () = redis::cmd("REPLICAOF")
                    .arg("NO")
                    .arg("ONE")
                    .query(&mut conn)
                    .unwrap();
            }
            Ending::KillScript(script) => {
                let _: () = redis::cmd("SCRIPT").arg("KILL").query(&mut conn).unwrap();
                script.join().unwrap();
            }
        }
    }
}
