//! The faults inside a target's own Redis, on a real redis-server (behind a real Toxiproxy, as
//! in a run), each observed from a client's side: it really happened, and removing it put
//! Redis back as it was.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use failmode::faults::{Fault, PauseMode};
use failmode::infra::ToxiproxyServer;
use failmode::infra::redis::SharedRedis;
use failmode::run::timeline::Player;
use failmode::scenario::Phase;
use redis::aio::MultiplexedConnection;
use std::sync::Arc;
use support::proxied::ProxiedRedis;
use tokio_util::sync::CancellationToken;

struct World {
    _dir: tempfile::TempDir,
    _toxiproxy: ToxiproxyServer,
    redis: SharedRedis,
    player: Player,
    addr: std::net::SocketAddr,
}

async fn world() -> World {
    let w = ProxiedRedis::start("faults", "t").await;
    let addr = w.redis.addr();
    let redis: SharedRedis = Arc::new(tokio::sync::Mutex::new(w.redis));
    let player = Player::new(w.api, vec![w.proxy])
        .with_redis(vec![Some(redis.clone())])
        .await;
    World {
        _dir: w.dir,
        _toxiproxy: w.toxiproxy,
        redis,
        player,
        addr,
    }
}

/// Applies `faults` for a phase `length` long, and fails the test if they were not.
async fn applied(
    w: &World,
    phase: &str,
    faults: &[Fault],
    length: Duration,
) -> failmode::run::timeline::Done {
    let mut outcomes = w.player.apply(phase, faults, &[], length).await;
    outcomes
        .remove(0)
        .unwrap_or_else(|e| panic!("{faults:?} not applied: {e}"))
}

/// A connection that waits as long as Redis makes it (the crate's own reply timeout is off):
/// the waits are what these tests measure, each bounded where it is measured.
async fn conn(addr: std::net::SocketAddr, db: i64) -> MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    redis::Client::open(format!("redis://{addr}/{db}"))
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

async fn query<T: redis::FromRedisValue>(c: &mut MultiplexedConnection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(c).await.unwrap()
}

/// How long one command takes on a fresh connection (a paused Redis holds it).
async fn timed(addr: std::net::SocketAddr, args: &[&str]) -> Duration {
    timed_on(&mut conn(addr, 0).await, args).await
}

/// How long one command takes on `c`, opened before the fault: a paused Redis holds a new
/// connection's own handshake too.
async fn timed_on(c: &mut MultiplexedConnection, args: &[&str]) -> Duration {
    let sent = Instant::now();
    let _: redis::Value = tokio::time::timeout(Duration::from_secs(10), query(c, args))
        .await
        .expect("answered within 10 s");
    sent.elapsed()
}

#[tokio::test]
async fn redis_restart_kills_the_server_and_starts_an_empty_one_on_the_same_port() {
    let w = world().await;
    let mut c = conn(w.addr, 0).await;
    let _: () = query(&mut c, &["SET", "acme", "7"]).await;
    let sha: String = query(&mut c, &["SCRIPT", "LOAD", "return 1"]).await;
    let before = w.redis.lock().await.pid();

    let faults = [Fault::RedisRestart {
        down: Duration::from_millis(300),
    }];
    let done = applied(&w, "p", &faults, Duration::from_secs(1)).await;
    let after = w.redis.lock().await.pid();
    assert_ne!(before, after, "a new process");
    assert!(
        done.reports[0].contains(&format!("pid {before}")),
        "{done:?}"
    );

    let mut c = conn(w.addr, 0).await;
    let size: u64 = query(&mut c, &["DBSIZE"]).await;
    let scripts: Vec<u8> = query(&mut c, &["SCRIPT", "EXISTS", &sha]).await;
    assert_eq!((size, scripts), (0, vec![0]), "keys and scripts are gone");
    // Nothing to undo: the server answers, as before the fault.
    assert!(w.player.remove("p", &faults, &[]).await[0].is_ok());
    let pong: String = query(&mut c, &["PING"]).await;
    assert_eq!(pong, "PONG");
}

#[tokio::test]
async fn client_pause_holds_every_command_for_the_phase_and_write_mode_only_writes() {
    let w = world().await;
    let mut open = conn(w.addr, 0).await;
    let all = [Fault::ClientPause {
        mode: PauseMode::All,
    }];
    applied(&w, "p", &all, Duration::from_millis(800)).await;
    let held = timed_on(&mut open, &["GET", "acme"]).await;
    assert!(held >= Duration::from_millis(600), "a read waits: {held:?}");
    assert!(w.player.remove("p", &all, &[]).await[0].is_ok());
    let free = timed(w.addr, &["GET", "acme"]).await;
    assert!(
        free < Duration::from_millis(100),
        "answered at once: {free:?}"
    );

    let write = [Fault::ClientPause {
        mode: PauseMode::Write,
    }];
    applied(&w, "q", &write, Duration::from_secs(30)).await;
    let read = timed(w.addr, &["GET", "acme"]).await;
    assert!(read < Duration::from_millis(100), "reads pass: {read:?}");
    let (written, removed) = tokio::join!(timed(w.addr, &["SET", "acme", "1"]), async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        w.player.remove("q", &write, &[]).await
    });
    assert!(removed[0].is_ok(), "{removed:?}");
    assert!(
        written >= Duration::from_millis(400) && written < Duration::from_secs(5),
        "the write waited for the removal, not Redis's 30 s timer: {written:?}"
    );
}

#[tokio::test]
async fn a_noisy_neighbour_scans_its_own_keyspace_and_holds_up_everyone_else() {
    let w = world().await;
    let fault = Fault::NoisyNeighbour {
        keys: 200_000,
        pause: Duration::ZERO,
    };
    let faults = [fault.clone()];
    applied(&w, "p", &faults, Duration::from_secs(2)).await;
    let mut neighbour_db = conn(w.addr, 1).await;
    let filled: u64 = query(&mut neighbour_db, &["DBSIZE"]).await;
    assert_eq!(filled, 200_000);
    let mut own_db = conn(w.addr, 0).await;
    let own: u64 = query(&mut own_db, &["DBSIZE"]).await;
    assert_eq!(own, 0, "the limiter's database is left alone");

    let (from, until) = (Instant::now(), Instant::now() + Duration::from_millis(1500));
    let cancel = CancellationToken::new();
    let probe = async {
        // Another client's PINGs, as a limiter's calls, while the neighbour scans.
        let mut worst = Duration::ZERO;
        while Instant::now() < until {
            worst = worst.max(timed(w.addr, &["PING"]).await);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        worst
    };
    let (outcomes, worst) = tokio::join!(w.player.ongoing(&fault, from, until, &cancel), probe);
    let done = outcomes[0].1.as_ref().unwrap();
    assert!(done.commands > 5, "it scanned again and again: {done:?}");
    assert!(
        done.reports[0].contains("KEYS over 200000 keys"),
        "{done:?}"
    );
    assert!(
        worst >= Duration::from_millis(5),
        "a PING queued behind a scan: {worst:?}"
    );

    assert!(w.player.remove("p", &faults, &[]).await[0].is_ok());
    let left: u64 = query(&mut neighbour_db, &["DBSIZE"]).await;
    assert_eq!(left, 0, "its keys are dropped at the end");
}

#[tokio::test]
async fn eviction_drops_the_limiters_keys_without_an_error_and_is_put_back() {
    let w = world().await;
    let fault = Fault::Eviction {
        policy: "allkeys-lru".into(),
        rate: 200,
        value_bytes: 64 * 1024,
        headroom_bytes: 1024 * 1024,
    };
    let faults = [fault.clone()];
    let mut c = conn(w.addr, 0).await;
    applied(&w, "p", &faults, Duration::from_secs(3)).await;

    let (from, until) = (Instant::now(), Instant::now() + Duration::from_secs(2));
    let cancel = CancellationToken::new();
    let limiter = async {
        // A fixed-window counter as a limiter keeps it: one INCR a request, 100 a second. An
        // evicted counter starts again from 1, and nothing tells the caller.
        let mut c = conn(w.addr, 0).await;
        let (mut sent, mut last) = (0i64, 0i64);
        while Instant::now() < until {
            last = query(&mut c, &["INCR", "limiter:acme"]).await;
            sent += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (sent, last)
    };
    let (outcomes, (sent, last)) =
        tokio::join!(w.player.ongoing(&fault, from, until, &cancel), limiter);
    assert!(
        outcomes[0].1.as_ref().unwrap().commands > 100,
        "{outcomes:?}"
    );
    assert!(
        last < sent,
        "the counter was evicted and started again ({last} after {sent} increments)"
    );

    let removed = w.player.remove("p", &faults, &[]).await;
    let done = removed[0].as_ref().unwrap();
    assert!(
        done.reports[0].starts_with("eviction: ") && !done.reports[0].starts_with("eviction: 0 "),
        "{done:?}"
    );
    let maxmemory: Vec<String> = query(&mut c, &["CONFIG", "GET", "maxmemory"]).await;
    let policy: Vec<String> = query(&mut c, &["CONFIG", "GET", "maxmemory-policy"]).await;
    assert_eq!(
        (maxmemory[1].as_str(), policy[1].as_str()),
        ("0", "noeviction")
    );
    let filler: Vec<String> = query(&mut c, &["KEYS", "failmode:eviction-filler:*"]).await;
    assert!(filler.is_empty(), "the filler is dropped");
}

/// The error code Redis answers `args` with, on `c`.
async fn refused_with(c: &mut MultiplexedConnection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let answer: Result<redis::Value, _> = cmd.query_async(c).await;
    let e = answer.expect_err("refused");
    e.code().unwrap_or_default().to_owned()
}

/// What a fault's removal reported about Redis's error replies.
fn error_report(done: &failmode::run::timeline::Done) -> &str {
    done.reports
        .iter()
        .find(|r| r.contains("error replies"))
        .map(String::as_str)
        .unwrap_or_else(|| panic!("no error-reply report: {done:?}"))
}

#[tokio::test]
async fn oom_refuses_every_write_with_oom_serves_reads_and_is_put_back() {
    let w = world().await;
    let mut c = conn(w.addr, 0).await;
    let _: () = query(&mut c, &["SET", "acme", "7"]).await;
    let faults = [Fault::Oom {}];
    applied(&w, "p", &faults, Duration::from_secs(5)).await;
    assert_eq!(refused_with(&mut c, &["INCR", "acme"]).await, "OOM");
    // A limiter's script is refused at its first write.
    let script = "return redis.call('INCR', KEYS[1])";
    assert_eq!(
        refused_with(&mut c, &["EVAL", script, "1", "acme"]).await,
        "OOM"
    );
    let read: String = query(&mut c, &["GET", "acme"]).await;
    assert_eq!(read, "7", "reads still answer, and nothing was written");

    let removed = w.player.remove("p", &faults, &[]).await;
    let done = removed[0].as_ref().unwrap();
    assert!(
        error_report(done).contains("-OOM 2 (to eval 1, incr 2)"),
        "the two refusals, and only those: {done:?}"
    );
    let maxmemory: Vec<String> = query(&mut c, &["CONFIG", "GET", "maxmemory"]).await;
    assert_eq!(maxmemory[1], "0");
    let n: i64 = query(&mut c, &["INCR", "acme"]).await;
    assert_eq!(n, 8, "writes pass again");
}

#[tokio::test]
async fn readonly_demotes_redis_to_a_replica_keeping_every_count_and_promotes_it_back() {
    let w = world().await;
    demoted_and_promoted_back(&w).await;
}

#[tokio::test]
async fn readonly_swaps_roles_with_the_partner_attached_when_the_timeline_starts() {
    let w = world().await;
    let phase = Phase {
        name: "p".into(),
        start: Duration::from_secs(2),
        end: Duration::from_secs(3),
        faults: vec![Fault::Readonly {}],
    };
    w.player.start_partners(&[phase]);
    // The partner attached and handed to the player: the event the fault then starts from.
    let started = Instant::now();
    let attached = loop {
        if let Some(partner) = w.player.partner_ready(0) {
            break partner;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no partner attached within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let partner = demoted_and_promoted_back(&w).await;
    assert_eq!(
        partner.port(),
        attached.port(),
        "the fault used the partner attached ahead"
    );
}

/// Applies `readonly` on `w` and removes it, checking what a client sees and that nothing is
/// left; returns the partner's address.
async fn demoted_and_promoted_back(w: &World) -> std::net::SocketAddr {
    let mut c = conn(w.addr, 0).await;
    for _ in 0..41 {
        let _: i64 = query(&mut c, &["INCR", "acme"]).await;
    }
    let faults = [Fault::Readonly {}];
    let done = applied(w, "p", &faults, Duration::from_secs(5)).await;
    assert!(
        done.reports[0].contains("a replica of a partner"),
        "{done:?}"
    );
    let partner: std::net::SocketAddr = done.reports[0]
        .split("a partner at ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("the partner's address: {done:?}"));
    // The same connection, opened before: what a client pinned to the old primary sees.
    let role: Vec<redis::Value> = query(&mut c, &["ROLE"]).await;
    assert_eq!(role[0], redis::Value::BulkString(b"slave".to_vec()));
    assert_eq!(refused_with(&mut c, &["INCR", "acme"]).await, "READONLY");
    let count: i64 = query(&mut c, &["GET", "acme"]).await;
    assert_eq!(count, 41, "the count survived the swap");

    let removed = w.player.remove("p", &faults, &[]).await;
    let done = removed[0].as_ref().unwrap();
    assert!(
        error_report(done).contains("-READONLY 1 (to incr 1)"),
        "the one refused write, and nothing else: {done:?}"
    );
    assert!(
        tokio::net::TcpStream::connect(partner).await.is_err(),
        "the partner is stopped"
    );
    let rdb: Vec<_> = std::fs::read_dir(w.redis.lock().await.dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".rdb"))
        .collect();
    assert!(rdb.is_empty(), "the sync left no RDB file behind: {rdb:?}");
    let n: i64 = query(&mut c, &["INCR", "acme"]).await;
    assert_eq!(n, 42, "the primary again, with every count");
    let role: Vec<redis::Value> = query(&mut c, &["ROLE"]).await;
    assert_eq!(role[0], redis::Value::BulkString(b"master".to_vec()));
    partner
}

#[tokio::test]
async fn busy_answers_every_other_client_busy_until_script_kill_ends_it() {
    let w = world().await;
    let mut c = conn(w.addr, 0).await;
    let fault = Fault::Busy {
        threshold: Duration::from_millis(10),
    };
    let faults = [fault.clone()];
    applied(&w, "p", &faults, Duration::from_secs(2)).await;
    let (from, until) = (Instant::now(), Instant::now() + Duration::from_secs(3));
    let cancel = CancellationToken::new();
    let probe = async {
        // Another client's commands while the script runs: once Redis is busy, each answered
        // -BUSY, none held.
        let mut c = conn(w.addr, 0).await;
        let mut first = redis::cmd("GET");
        first.arg("acme");
        while first.query_async::<redis::Value>(&mut c).await.is_ok() {
            assert!(Instant::now() < until, "Redis never answered -BUSY");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut codes = Vec::new();
        for _ in 0..5 {
            let sent = Instant::now();
            codes.push(refused_with(&mut c, &["GET", "acme"]).await);
            assert!(
                sent.elapsed() < Duration::from_millis(200),
                "answered at once"
            );
        }
        codes
    };
    let (outcomes, codes) = tokio::join!(w.player.ongoing(&fault, from, until, &cancel), probe);
    assert_eq!(codes, ["BUSY"; 5]);
    let done = outcomes[0].1.as_ref().unwrap();
    assert!(done.reports[0].contains("SCRIPT KILL"), "{done:?}");
    let pong: String = query(&mut c, &["PING"]).await;
    assert_eq!(pong, "PONG", "free once the phase ended");

    let removed = w.player.remove("p", &faults, &[]).await;
    let done = removed[0].as_ref().unwrap();
    assert!(error_report(done).contains("-BUSY "), "{done:?}");
    let threshold: Vec<String> = query(&mut c, &["CONFIG", "GET", "busy-reply-threshold"]).await;
    assert_eq!(threshold[1], "5000", "Redis's default put back");
}

#[tokio::test]
async fn script_flush_drops_the_loaded_scripts_so_evalsha_answers_noscript() {
    let w = world().await;
    let mut c = conn(w.addr, 0).await;
    let sha: String = query(&mut c, &["SCRIPT", "LOAD", "return 1"]).await;
    let faults = [Fault::ScriptFlush {}];
    applied(&w, "p", &faults, Duration::from_secs(1)).await;
    assert_eq!(
        refused_with(&mut c, &["EVALSHA", &sha, "0"]).await,
        "NOSCRIPT"
    );
    let removed = w.player.remove("p", &faults, &[]).await;
    let done = removed[0].as_ref().unwrap();
    assert!(
        error_report(done).contains("-NOSCRIPT 1 (to evalsha 1)"),
        "{done:?}"
    );
}
