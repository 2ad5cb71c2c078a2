//! Real servers for integration tests: a `redis-server` on a free loopback port (no
//! persistence, killed on Drop, its log printed if the test fails) and reference instances.

#![allow(dead_code, unreachable_pub)]

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use failmode_reference::Server;
use failmode_reference::config::{Config, ParseOutcome};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A `redis-server` child process owned by one test.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl RedisServer {
    pub fn start() -> Self {
        // Another process can take the port between probing and binding: try a few.
        for _ in 0..5 {
            let mut server = Self {
                port: free_port(),
                dir: tempfile::tempdir().expect("a temp dir"),
                child: None,
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("redis-server did not start on any of 5 free ports; is it installed (just setup)?");
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// Starts redis-server on this port, empty; false if it did not answer.
    fn spawn(&mut self) -> bool {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("a log file");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::from(log.try_clone().expect("log handle")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("redis-server on PATH (run `just setup`)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.ping() {
                return true;
            }
            if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn ping(&self) -> bool {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_ok()
    }

    /// A blocking connection for test set-up and inspection.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .expect("a connection to the test redis")
    }

    fn signal(&self, signal: Signal) {
        if let Some(child) = &self.child {
            kill(Pid::from_raw(child.id() as i32), signal).expect("signal redis-server");
        }
    }

    /// SIGSTOP: connections stay open, nothing is answered (a hung Redis).
    pub fn hang(&self) {
        self.signal(Signal::SIGSTOP);
    }

    pub fn resume(&self) {
        self.signal(Signal::SIGCONT);
    }

    /// SIGKILL: connections reset, new ones refused.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts again, empty, on the same port: counters and loaded scripts are gone.
    pub fn restart(&mut self) {
        self.kill();
        assert!(
            self.spawn(),
            "redis-server did not restart on port {}",
            self.port
        );
    }

    /// Redis's clock, in seconds.
    pub fn time(&self) -> f64 {
        let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut self.conn()).expect("TIME");
        s as f64 + us as f64 / 1e6
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Ok(log) = std::fs::read_to_string(self.log_path())
        {
            eprintln!("--- redis-server log (port {}) ---\n{log}", self.port);
        }
        self.kill();
    }
}

/// Starts a reference instance on a free port with these flags.
pub async fn reference(redis: &RedisServer, flags: &[&str]) -> Server {
    reference_at(&redis.url(), flags).await
}

pub async fn reference_at(redis_url: &str, flags: &[&str]) -> Server {
    let args = [
        "failmode-reference",
        "--port",
        "0",
        "--redis-url",
        redis_url,
    ]
    .into_iter()
    .chain(flags.iter().copied());
    let config = match Config::parse_from(args) {
        Ok(c) => c,
        Err(ParseOutcome::Invalid(m)) => panic!("bad test flags: {m}"),
        Err(ParseOutcome::Display(e)) => panic!("bad test flags: {e}"),
    };
    Server::start(config).await.expect("the reference starts")
}

/// One response, reduced to what the tests look at.
#[derive(Clone)]
pub struct Answer {
    pub status: u16,
    pub source: String,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status, self.source)
    }
}

#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
}

impl Default for Client {
    fn default() -> Self {
        Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .expect("an HTTP client"),
        }
    }
}

impl Client {
    pub async fn get(&self, addr: SocketAddr, path: &str, caller: Option<&str>) -> Answer {
        let mut req = self.http.get(format!("http://{addr}{path}"));
        if let Some(caller) = caller {
            req = req.header("x-caller", caller);
        }
        let resp = req.send().await.expect("the reference answers");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let source = headers
            .get("failmode-source")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = resp.text().await.expect("a body");
        Answer {
            status,
            source,
            headers,
            body,
        }
    }

    /// Sends `n` requests one after another and returns their answers.
    pub async fn burst(&self, addr: SocketAddr, path: &str, caller: &str, n: usize) -> Vec<Answer> {
        let mut answers = Vec::with_capacity(n);
        for _ in 0..n {
            answers.push(self.get(addr, path, Some(caller)).await);
        }
        answers
    }

    pub async fn metrics(&self, addr: SocketAddr) -> String {
        self.get(addr, "/metrics", None).await.body
    }
}

/// The value of one sample in a Prometheus exposition (0 when absent).
pub fn metric(text: &str, sample: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(sample)
                .and_then(|rest| rest.trim().parse().ok())
        })
        .unwrap_or(0.0)
}

pub fn count(answers: &[Answer], status: u16) -> usize {
    answers.iter().filter(|a| a.status == status).count()
}

/// Waits until `cond` holds, polling; panics with `what` after `within`.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if cond().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out after {within:?} waiting for {what}");
}

/// Sleeps until Redis's clock is at least `margin` seconds away from the end of its current
/// `window`, so a burst lands in one window.
pub async fn away_from_window_edge(redis: &RedisServer, window_s: f64, margin_s: f64) {
    let now = redis.time();
    let into = now % window_s;
    if window_s - into < margin_s {
        tokio::time::sleep(Duration::from_secs_f64(window_s - into + 0.05)).await;
    }
}
