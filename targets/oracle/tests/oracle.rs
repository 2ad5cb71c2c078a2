//! The binary over real loopback HTTP: exact counts per window per caller, a scripted status,
//! a delay, a dropped connection, many delayed requests at once, and a bad script refused.
//!
//! Times are scheduled from the test's own start, taken just before the request that starts
//! the oracle's clock, and every answer carries the oracle's clock (`failmode-oracle-time-ms`),
//! so the checks say which segment a request fell in rather than assuming it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdout, Command};
use tokio::time::{Instant, sleep_until, timeout};

/// A `failmode-oracle` on a free loopback port (it binds port 0 and prints the address),
/// killed on Drop.
struct Oracle {
    addr: String,
    _child: Child,
    _stdout: BufReader<ChildStdout>,
}

impl Oracle {
    async fn start(limit: u32, window: &str, script: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_failmode-oracle"))
            .env_clear()
            .env("FAILMODE_PORT", "0")
            .env("FAILMODE_LIMIT", limit.to_string())
            .env("FAILMODE_WINDOW", window)
            .env("FAILMODE_ORACLE_SCRIPT", script)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the oracle binary starts");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        timeout(Duration::from_secs(10), stdout.read_line(&mut line))
            .await
            .expect("the oracle says where it listens within 10 s")
            .expect("its stdout reads");
        let addr = line
            .trim()
            .strip_prefix("failmode-oracle listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Self {
            addr,
            _child: child,
            _stdout: stdout,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/api", self.addr)
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// One `/api` answer: its status, the oracle's clock when it decided, how long it took.
#[derive(Debug)]
struct Answer {
    status: u16,
    oracle_ms: f64,
    took: Duration,
    retry_after: Option<String>,
    body: String,
}

async fn get(client: &reqwest::Client, url: &str, caller: &str) -> Answer {
    let sent = Instant::now();
    let response = client
        .get(url)
        .header("x-caller", caller)
        .send()
        .await
        .expect("an answer");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let oracle_ms = header("failmode-oracle-time-ms").map_or(f64::NAN, |v| v.parse().unwrap());
    let retry_after = header("retry-after");
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    Answer {
        status,
        oracle_ms,
        took: sent.elapsed(),
        retry_after,
        body,
    }
}

/// One request per caller named, all at once: (caller, answer) in the order named.
async fn burst(
    client: &reqwest::Client,
    url: &str,
    callers: impl IntoIterator<Item = String>,
) -> Vec<(String, Answer)> {
    let requests: Vec<_> = callers
        .into_iter()
        .map(|caller| {
            let (client, url) = (client.clone(), url.to_owned());
            tokio::spawn(async move {
                let answer = get(&client, &url, &caller).await;
                (caller, answer)
            })
        })
        .collect();
    let mut answers = Vec::new();
    for request in requests {
        answers.push(request.await.unwrap());
    }
    answers
}

fn times(caller: &str, n: usize) -> impl Iterator<Item = String> {
    std::iter::repeat_n(caller.to_owned(), n)
}

#[tokio::test]
async fn each_caller_gets_exactly_n_per_window() {
    let oracle = Oracle::start(3, "400ms", "").await;
    let (client, url) = (client(), oracle.url());
    let start = Instant::now();
    let first = get(&client, &url, "acme").await;
    assert_eq!((first.status, first.oracle_ms), (200, 0.0), "{first:?}");

    let mut answers = vec![("acme".to_owned(), first)];
    answers.extend(burst(&client, &url, times("acme", 6).chain(times("globex", 6))).await);
    // Mid-window 2 ([800, 1200) ms), whatever the first burst took.
    sleep_until(start + Duration::from_millis(1000)).await;
    answers.extend(burst(&client, &url, times("acme", 5)).await);

    // Per caller and 400 ms window, by the oracle's own clock: min(sent, 3) admitted.
    let window_of = |a: &Answer| (a.oracle_ms / 400.0) as u64;
    let mut windows: Vec<(&str, u64)> = answers
        .iter()
        .map(|(c, a)| (c.as_str(), window_of(a)))
        .collect();
    windows.sort();
    windows.dedup();
    assert!(windows.len() >= 3, "{windows:?}");
    for (caller, window) in windows {
        let here: Vec<&Answer> = answers
            .iter()
            .filter(|(c, a)| c == caller && window_of(a) == window)
            .map(|(_, a)| a)
            .collect();
        let admitted = here.iter().filter(|a| a.status == 200).count();
        assert_eq!(
            admitted,
            here.len().min(3),
            "{caller} window {window}: {here:?}"
        );
        assert!(here.iter().all(|a| a.status == 200 || a.status == 429));
        for refused in here.iter().filter(|a| a.status == 429) {
            assert_eq!(refused.retry_after.as_deref(), Some("1"), "{refused:?}");
        }
    }
}

#[tokio::test]
async fn segments_answer_their_status_delay_and_drop_then_the_script_moves_on() {
    let script = "0.3..0.6: status 503; 0.6..0.9: delay 300; 0.9..1.2: drop; 1.2..: open";
    let oracle = Oracle::start(1, "10s", script).await;
    let (client, url) = (client(), oracle.url());
    let start = Instant::now();
    let at = |ms: u64| sleep_until(start + Duration::from_millis(ms));

    assert_eq!(
        get(&client, &url, "acme").await.status,
        200,
        "t0: one admitted"
    );
    at(100).await;
    assert_eq!(
        get(&client, &url, "acme").await.status,
        429,
        "the limit of one"
    );

    at(450).await;
    let unavailable = get(&client, &url, "acme").await;
    assert!(
        (300.0..600.0).contains(&unavailable.oracle_ms),
        "{unavailable:?}"
    );
    assert_eq!(unavailable.status, 503);

    at(750).await;
    let slow = get(&client, &url, "acme").await;
    assert!((600.0..900.0).contains(&slow.oracle_ms), "{slow:?}");
    assert_eq!(slow.status, 429, "a delay alone keeps the default limit");
    assert!(slow.took >= Duration::from_millis(300), "{slow:?}");

    at(1050).await;
    // By hand on a socket: an HTTP client could hide a closed connection behind a retry.
    let mut socket = TcpStream::connect(&oracle.addr).await.unwrap();
    socket
        .write_all(b"GET /api HTTP/1.1\r\nhost: oracle\r\nx-caller: acme\r\n\r\n")
        .await
        .unwrap();
    let mut received = Vec::new();
    let read = timeout(Duration::from_secs(5), socket.read_to_end(&mut received))
        .await
        .expect("the oracle hangs up within 5 s");
    // End of stream, or a reset if the close raced our read: either way not a byte answered.
    assert!(
        received.is_empty(),
        "{read:?}: {}",
        String::from_utf8_lossy(&received)
    );

    at(1300).await;
    let open = get(&client, &url, "acme").await;
    assert!(open.oracle_ms >= 1200.0, "{open:?}");
    assert_eq!((open.status, open.body.as_str()), (200, "open\n"));

    let metrics = client
        .get(format!("http://{}/metrics", oracle.addr))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"failmode_oracle_requests_total{decision="dropped",status="none"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn delayed_requests_wait_side_by_side_not_in_turn() {
    const REQUESTS: usize = 500;
    let oracle = Oracle::start(1, "1s", "0..: open, delay 1000").await;
    let (client, url) = (client(), oracle.url());
    let start = Instant::now();
    let answers = burst(&client, &url, (0..REQUESTS).map(|i| format!("caller-{i}"))).await;
    let all = start.elapsed();
    assert!(answers.iter().all(|(_, a)| a.status == 200), "all open");
    assert!(
        answers
            .iter()
            .all(|(_, a)| a.took >= Duration::from_millis(1000)),
        "each held a second"
    );
    // In turn they would take 500 s; side by side, the one second and some overhead.
    assert!(
        all < Duration::from_secs(5),
        "{REQUESTS} delayed requests took {all:?}"
    );
}

#[tokio::test]
async fn healthz_does_not_start_the_clock() {
    let oracle = Oracle::start(1, "1s", "0..0.2: status 500").await;
    let client = client();
    let health = client
        .get(format!("http://{}/healthz", oracle.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let warm_up = get(&client, &oracle.url(), "failmode-warm-up").await;
    assert_eq!((warm_up.status, warm_up.body.as_str()), (200, "warm-up\n"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Had either started t0, this would fall after the 0..0.2 outage.
    let first = get(&client, &oracle.url(), "acme").await;
    assert_eq!((first.status, first.oracle_ms), (500, 0.0), "{first:?}");
}

#[tokio::test]
async fn a_bad_script_is_refused_naming_its_segment() {
    let output = Command::new(env!("CARGO_BIN_EXE_failmode-oracle"))
        .env_clear()
        .env("FAILMODE_PORT", "0")
        .env("FAILMODE_ORACLE_SCRIPT", "2..4: open; 4..6: stauts 500")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(r#"segment 2 ("4..6: stauts 500"): unknown action "stauts""#),
        "{stderr}"
    );
}
