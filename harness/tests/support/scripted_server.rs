//! A scripted HTTP server on loopback that a load test cannot tell from a target: each
//! request's answer is chosen by the test from its caller header (a status, a status after a
//! delay, a `Retry-After`, a closed socket, silence), and every request it read is logged, as
//! is when it accepted each connection.
//!
//! Written on raw tokio sockets rather than hyper's server: the tests need exact control of
//! failures (close the socket mid-exchange, never answer), which a real HTTP server exists to
//! prevent.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the server does with one request.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Action {
    Answer {
        status: u16,
        after: Duration,
    },
    /// Answer at once with `Retry-After: retry_after_s`.
    Told {
        status: u16,
        retry_after_s: u64,
    },
    /// Close the connection without answering.
    Close,
    /// Keep the connection open and never answer.
    Silent,
}

pub(crate) fn answer(status: u16) -> Action {
    Action::Answer {
        status,
        after: Duration::ZERO,
    }
}

/// Every request the server read: the caller header's value, when it arrived, and which
/// connection it came on (numbered as they were accepted).
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) caller: String,
    pub(crate) at: Instant,
    pub(crate) connection: u64,
}

pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    received: watch::Receiver<usize>,
    accepted: Arc<Mutex<Vec<Instant>>>,
}

impl Server {
    pub(crate) async fn start(act: impl Fn(&str) -> Action + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (count_tx, received) = watch::channel(0);
        let count_tx = Arc::new(count_tx);
        let act = Arc::new(act);
        let log = Arc::clone(&seen);
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let counted = Arc::clone(&accepted);
        tokio::spawn(async move {
            for connection in 0.. {
                let (socket, _) = listener.accept().await.unwrap();
                counted.lock().unwrap().push(Instant::now());
                let (act, log, count_tx) =
                    (Arc::clone(&act), Arc::clone(&log), Arc::clone(&count_tx));
                tokio::spawn(async move {
                    serve(socket, connection, &*act, &log, &count_tx).await;
                });
            }
        });
        Self {
            addr,
            seen,
            received,
            accepted,
        }
    }

    /// The connections it accepted, whether a request came on them or not.
    pub(crate) fn accepted(&self) -> usize {
        self.accepted.lock().unwrap().len()
    }

    /// The connections it accepted before `instant`.
    pub(crate) fn accepted_before(&self, instant: Instant) -> usize {
        let accepted = self.accepted.lock().unwrap();
        accepted.iter().filter(|&&at| at < instant).count()
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub(crate) fn count_of(&self, caller: &str) -> usize {
        self.seen().iter().filter(|s| s.caller == caller).count()
    }

    /// The connections its requests came on.
    pub(crate) fn connections(&self) -> usize {
        let mut ids: Vec<u64> = self.seen().iter().map(|s| s.connection).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }

    pub(crate) async fn wait_for_requests(&mut self, n: usize) {
        self.received.wait_for(|&got| got >= n).await.unwrap();
    }
}

/// HTTP/1.1 keep-alive, one request at a time (the client does not pipeline), GET only.
async fn serve(
    mut socket: TcpStream,
    connection: u64,
    act: &(dyn Fn(&str) -> Action + Send + Sync),
    log: &Mutex<Vec<Seen>>,
    count: &watch::Sender<usize>,
) {
    let mut buf = Vec::with_capacity(1024);
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 1024];
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        buf.drain(..head_end);
        let caller = head
            .lines()
            .find_map(|l| l.strip_prefix("x-caller: "))
            .unwrap_or("")
            .to_owned();
        let action = act(&caller);
        log.lock().unwrap().push(Seen {
            caller,
            at: Instant::now(),
            connection,
        });
        count.send_modify(|n| *n += 1);
        match action {
            Action::Answer { status, after } => {
                tokio::time::sleep(after).await;
                let response = format!("HTTP/1.1 {status} X\r\ncontent-length: 2\r\n\r\nok");
                if socket.write_all(response.as_bytes()).await.is_err() {
                    return;
                }
            }
            Action::Told {
                status,
                retry_after_s,
            } => {
                let response = format!(
                    "HTTP/1.1 {status} X\r\nretry-after: {retry_after_s}\r\ncontent-length: 2\r\n\r\nok"
                );
                if socket.write_all(response.as_bytes()).await.is_err() {
                    return;
                }
            }
            Action::Close => return,
            Action::Silent => std::future::pending::<()>().await,
        }
    }
}
