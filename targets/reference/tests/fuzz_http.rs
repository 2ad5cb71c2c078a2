//! Fuzzed HTTP: arbitrary methods, paths, header names and values, caller keys and raw bytes
//! sent over TCP to a real instance on a real `redis-server`. Nothing panics (a hook counts
//! panics on every thread, the server's tasks included), nothing answers 5xx but the route
//! declared fail-closed while Redis is down, the instance answers `/healthz` afterwards, and
//! the per-caller state it holds is forgotten once the callers go idle.
//!
//! Raw TCP rather than an HTTP client: clients refuse to send most of what is fuzzed here.
//! `FAILMODE_FUZZ_CASES` sets the cases per property (`just fuzz` raises it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use failmode_reference::Server;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use support::{RedisServer, reference};
use tokio::runtime::Runtime;

/// The routes every fuzzed instance serves; `/login` is the one declared fail-closed.
const ROUTES: &[&str] = &[
    "--route",
    "/login=fail-closed,limit=5,window=60s,status=503",
    "--route",
    "/unlimited=none",
    "--route",
    "/open=fail-open",
    "--route",
    "/local=local-only",
    "--route",
    "/static=fail-static",
    "--route",
    "/deny=retry-then-deny",
];
const FAIL_CLOSED: &str = "/login";
const PATHS: &[&str] = &[
    "/api",
    "/login",
    "/unlimited",
    "/open",
    "/local",
    "/static",
    "/deny",
    "/healthz",
    "/metrics",
    "/",
    "/api/",
    "//api",
    "/api?x=1",
    "/api#f",
    "/%2e%2e/api",
    "*",
    "http://127.0.0.1/api",
];

fn cases(default: u32) -> u32 {
    std::env::var("FAILMODE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn runner(default: u32) -> TestRunner {
    TestRunner::new(Config {
        cases: cases(default),
        max_shrink_iters: 200,
        failure_persistence: None,
        ..Config::default()
    })
}

/// Panics on any thread since the hook went in: a handler's panic kills only its connection's
/// task, which the client would see as a closed connection, not as a failure.
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
}

#[derive(Debug, Clone)]
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, Vec<u8>)>,
    caller: Option<Vec<u8>>,
}

impl Request {
    fn bytes(&self) -> Vec<u8> {
        let mut out =
            format!("{} {} HTTP/1.1\r\nhost: fuzz\r\n", self.method, self.path).into_bytes();
        let caller = self
            .caller
            .iter()
            .map(|c| ("x-caller".to_owned(), c.clone()));
        for (name, value) in self.headers.iter().cloned().chain(caller) {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(&value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"connection: close\r\n\r\n");
        out
    }

    /// The route it names, as the instance matches it (the path without its query).
    fn route(&self) -> &str {
        self.path.split(['?', '#']).next().unwrap_or_default()
    }
}

/// A header value: visible ASCII, then anything but CR and LF (obs-text, controls, NUL).
fn header_value(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        7 => proptest::string::string_regex(&format!("[ -~]{{0,{max}}}"))
            .unwrap()
            .prop_map(String::into_bytes),
        1 => prop::collection::vec(any::<u8>().prop_filter("no CR or LF", |b| *b != b'\r' && *b != b'\n'), 0..max),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    let method = prop_oneof![
        prop::sample::select(vec![
            "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT"
        ])
        .prop_map(str::to_owned),
        "[!#$%&'*+.^_`|~0-9A-Za-z-]{1,16}",
    ];
    let path = prop_oneof![
        3 => prop::sample::select(PATHS.to_vec()).prop_map(str::to_owned),
        1 => "/[!-~]{0,60}",
        1 => prop::sample::select(PATHS.to_vec())
            .prop_flat_map(|p| "[?][!-~]{0,40}".prop_map(move |q| format!("{p}{q}"))),
    ];
    let name = prop_oneof![
        1 => prop::sample::select(vec![
            "x-caller",
            "X-Caller",
            "content-length",
            "transfer-encoding",
            "expect",
            "host",
            "x-forwarded-for",
            "accept",
            "content-type",
            "upgrade",
        ])
        .prop_map(str::to_owned),
        3 => "[!#$%&'*+.^_`|~0-9A-Za-z-]{1,30}",
    ];
    // Mostly keys the handler takes, so most cases reach the limiter rather than a 400.
    let caller = prop_oneof![
        6 => "[!-~]{1,64}".prop_map(|c| Some(c.into_bytes())),
        1 => Just(None),
        1 => header_value(300).prop_map(Some),
        1 => (250usize..4000).prop_map(|n| Some(vec![b'k'; n])),
    ];
    (
        method,
        path,
        prop::collection::vec((name, header_value(200)), 0..4),
        caller,
    )
        .prop_map(|(method, path, headers, caller)| Request {
            method,
            path,
            headers,
            caller,
        })
}

/// Sends `bytes` and returns the status line's code, or `None` when the instance closed the
/// connection without answering (as it may for bytes that are not HTTP). Blocking: the
/// instance runs on its runtime's worker threads.
fn send(addr: SocketAddr, bytes: &[u8], close_write: bool) -> Result<Option<u16>, String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    // The instance may answer and close before reading everything: a write error is its answer.
    let _ = stream.write_all(bytes);
    if close_write {
        let _ = stream.shutdown(Shutdown::Write);
    }
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(format!(
                    "no answer within 5 s; got {:?}",
                    String::from_utf8_lossy(&answer)
                ));
            }
            Err(_) => break,
        }
        if answer.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    if answer.is_empty() {
        return Ok(None);
    }
    let line = String::from_utf8_lossy(&answer);
    let status = line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {line:?}"))?;
    Ok(Some(status))
}

fn answers_without_5xx(
    addr: SocketAddr,
    request: &Request,
    fail_closed_may_refuse: bool,
) -> Result<(), TestCaseError> {
    let status = send(addr, &request.bytes(), false).map_err(TestCaseError::fail)?;
    let allowed_5xx = fail_closed_may_refuse && request.route() == FAIL_CLOSED;
    if let Some(status) = status {
        prop_assert!(
            status < 500 || allowed_5xx,
            "{status} to {:?}",
            String::from_utf8_lossy(&request.bytes())
        );
    }
    Ok(())
}

fn still_healthy(server: &Server) {
    let status = send(
        server.addr(),
        b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        false,
    )
    .unwrap();
    assert_eq!(status, Some(200));
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        0,
        "a panic on some thread (see above)"
    );
}

/// One instance per property, started on its own multi-threaded runtime: its tasks run on the
/// runtime's workers while the test thread sends blocking requests.
fn instance(redis: &RedisServer) -> (Runtime, Server) {
    count_panics();
    let rt = Runtime::new().unwrap();
    let server = rt.block_on(reference(redis, ROUTES));
    (rt, server)
}

#[test]
fn fuzzed_requests_never_panic_or_answer_5xx_with_redis_up() {
    let redis = RedisServer::start();
    // The instance serves from this runtime's worker threads for as long as it lives.
    let (_rt, server) = instance(&redis);
    runner(64)
        .run(&request(), |r| {
            answers_without_5xx(server.addr(), &r, false)
        })
        .unwrap();
    still_healthy(&server);
}

#[test]
fn fuzzed_requests_answer_5xx_only_on_the_fail_closed_route_with_redis_down() {
    let mut redis = RedisServer::start();
    // The instance serves from this runtime's worker threads for as long as it lives.
    let (_rt, server) = instance(&redis);
    redis.kill();
    runner(32)
        .run(&request(), |r| answers_without_5xx(server.addr(), &r, true))
        .unwrap();
    still_healthy(&server);
}

#[test]
fn arbitrary_bytes_never_panic_and_get_a_4xx_or_a_closed_connection() {
    let redis = RedisServer::start();
    // The instance serves from this runtime's worker threads for as long as it lives.
    let (_rt, server) = instance(&redis);
    let bytes = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..2000),
        request()
            .prop_flat_map(|r| {
                let b = r.bytes();
                let n = b.len();
                (Just(b), 0..n, any::<u8>())
            })
            .prop_map(|(mut b, at, byte)| {
                b[at] = byte;
                b
            }),
    ];
    runner(64)
        .run(&bytes, |b| {
            let status = send(server.addr(), &b, true).map_err(TestCaseError::fail)?;
            prop_assert!(
                status.is_none_or(|s| s < 500),
                "{status:?} to {:?}",
                String::from_utf8_lossy(&b)
            );
            Ok(())
        })
        .unwrap();
    still_healthy(&server);
}

#[test]
fn per_caller_state_grows_with_distinct_keys_and_is_forgotten_once_they_go_idle() {
    let redis = RedisServer::start();
    // The instance serves from this runtime's worker threads for as long as it lives.
    let (_rt, server) = instance(&redis);
    let limiter = &server.app().limiter;
    let before = limiter.tracked_callers();
    let n = cases(200) as usize;
    for i in 0..n {
        let caller = format!("caller-{i}-{}", "k".repeat(200));
        let req = format!(
            "GET /local HTTP/1.1\r\nhost: x\r\nx-caller: {caller}\r\nconnection: close\r\n\r\n"
        );
        let status = send(server.addr(), req.as_bytes(), false).unwrap();
        assert_eq!(status, Some(200));
    }
    // Below the cap (`--max-callers`, `tests/many_callers.rs`): one entry each, held until
    // idle.
    assert_eq!(limiter.tracked_callers(), before + n);
    // Idle for twice their route's window: the periodic prune forgets them.
    limiter.prune(Instant::now() + Duration::from_secs(121));
    assert_eq!(limiter.tracked_callers(), 0);
}
