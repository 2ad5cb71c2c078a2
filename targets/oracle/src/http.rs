//! The HTTP face: `/api` (any method) answers as the script says, `/healthz` and `/metrics`
//! answer at once and never start the clock.
//!
//! Each connection is served by its own task, beside a [`Notify`] its requests can fire to
//! hang up: `drop` must close the connection without a byte of answer, which a handler
//! returning a response cannot do, so the task stops serving and drops the socket instead.
//! Delays are `tokio::time::sleep`s inside the request's future: thousands of delayed
//! requests are thousands of timers, not threads.

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use crate::config::{Cold, Key};
use crate::decide::{Answer, Oracle};
use crate::metrics::{self, Counters};

/// The scripted route.
pub const API_PATH: &str = "/api";

/// The oracle's clock when it decided, in milliseconds since t0, on every `/api` answer.
static TIME_HEADER: HeaderName = HeaderName::from_static("failmode-oracle-time-ms");

/// Where a proxy names the client: the first address is the original caller's.
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// How long to wait after the listener fails to accept (out of file descriptors, say) before
/// trying again: long enough not to spin, short enough to lose nothing in a test.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// What every request shares.
#[derive(Debug)]
pub struct App {
    pub oracle: Oracle,
    pub counters: Counters,
    /// What a caller's counts are kept under.
    pub key: Key,
    pub caller_header: HeaderName,
    pub warm_up_caller: Option<String>,
    /// How slow its first warm-up answers are, and how many it has answered.
    pub cold: Cold,
    pub warm_ups: AtomicU64,
    /// What a `limit` answers over the limit (429 unless `FAILMODE_ORACLE_REFUSE_STATUS`).
    pub refuse_status: StatusCode,
}

/// Accepts connections forever, each served by its own task.
pub async fn serve(listener: TcpListener, app: Arc<App>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                tokio::spawn(connection(stream, peer.ip(), Arc::clone(&app)));
            }
            Err(e) => {
                eprintln!("failmode-oracle: accept failed: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// Serves one connection until the client closes it or a request hangs up.
async fn connection(stream: TcpStream, peer: IpAddr, app: Arc<App>) {
    // Answers are small and waited for: do not hold them back for Nagle.
    let _ = stream.set_nodelay(true);
    let hang_up = Arc::new(Notify::new());
    let service = {
        let hang_up = Arc::clone(&hang_up);
        service_fn(move |request| handle(Arc::clone(&app), Arc::clone(&hang_up), peer, request))
    };
    let serving = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        // Its errors are the client's doing (a reset, a malformed request): nothing to answer.
        _ = serving => {}
        // Dropping `serving` drops the socket: the client reads end-of-stream, no status line.
        () = hang_up.notified() => {}
    }
}

async fn handle(
    app: Arc<App>,
    hang_up: Arc<Notify>,
    peer: IpAddr,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let response = match request.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/metrics" => {
            let mut r = text(StatusCode::OK, app.counters.encode());
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        API_PATH => api(&app, &hang_up, peer, &request).await,
        other => text(
            StatusCode::NOT_FOUND,
            format!("{other} is not a route of the oracle; try {API_PATH}\n"),
        ),
    };
    Ok(response)
}

/// Who sent a request, by the configured [`Key`].
struct Caller<'a> {
    /// Whom its counts are kept under (unless `global`).
    key: String,
    /// The caller header's value, whatever the key: failmode names its warm-up caller there
    /// when it tells callers by header, also to an oracle keyed otherwise.
    header: Option<&'a str>,
    /// Every caller's counts are one.
    global: bool,
}

impl Caller<'_> {
    /// Whether this is `warm_up`: by its key (`127.0.0.1`, failmode's own address, when failmode
    /// tells callers by address) or by its caller header (when failmode tells them by header).
    fn is(&self, warm_up: &str) -> bool {
        self.key == warm_up || self.header == Some(warm_up)
    }
}

/// The caller a request is counted as, by the configured [`Key`], or what it failed to name
/// its caller in (a 400).
fn caller_of<'a>(
    app: &App,
    peer: IpAddr,
    request: &'a Request<Incoming>,
) -> Result<Caller<'a>, String> {
    let header = |name: &HeaderName| -> Option<&'a str> {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
    };
    let named = header(&app.caller_header);
    let caller = |key: String, global: bool| Caller {
        key,
        header: named,
        global,
    };
    match app.key {
        Key::Header => match named {
            Some(name) => Ok(caller(name.to_owned(), false)),
            None => Err(format!("{} header", app.caller_header)),
        },
        Key::SourceAddress => Ok(caller(peer.to_string(), false)),
        // As a server that trusts its proxy (express's `trust proxy`): the first address the
        // proxy names, else the connection's own.
        Key::XForwardedFor => {
            let first = header(&X_FORWARDED_FOR)
                .and_then(|v| v.split(',').next())
                .map(str::trim)
                .filter(|v| !v.is_empty());
            Ok(caller(
                first.map_or_else(|| peer.to_string(), str::to_owned),
                false,
            ))
        }
        Key::Global => Ok(caller(String::new(), true)),
    }
}

async fn api(
    app: &App,
    hang_up: &Notify,
    peer: IpAddr,
    request: &Request<Incoming>,
) -> Response<Full<Bytes>> {
    let caller = match caller_of(app, peer, request) {
        Ok(caller) => caller,
        Err(what) => {
            app.counters.count(metrics::BAD_REQUEST, Some(400));
            return text(
                StatusCode::BAD_REQUEST,
                format!("requests must name their caller in a non-empty, visible-ASCII {what}\n"),
            );
        }
    };
    if app.warm_up_caller.as_deref().is_some_and(|w| caller.is(w)) {
        if app.warm_ups.fetch_add(1, Ordering::Relaxed) < app.cold.warm_ups {
            tokio::time::sleep(app.cold.delay).await;
        }
        app.counters.count(metrics::WARM_UP, Some(200));
        return text(StatusCode::OK, "warm-up\n");
    }
    // One name for every caller's counts.
    let key = if caller.global {
        "*"
    } else {
        caller.key.as_str()
    };
    let decision = app.oracle.decide(key, Instant::now);
    let status = match decision.answer {
        Answer::Limited { .. } => Some(app.refuse_status.as_u16()),
        other => other.status(),
    };
    app.counters.count(decision.answer.label(), status);
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    let mut response = match decision.answer {
        Answer::Admitted | Answer::Open => {
            text(StatusCode::OK, format!("{}\n", decision.answer.label()))
        }
        Answer::Limited { retry_after } => {
            let mut r = text(app.refuse_status, "limited\n");
            r.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(whole_seconds(retry_after)),
            );
            r
        }
        Answer::Status(code) => {
            // The script admits 200..=599 only, all valid codes.
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            text(status, format!("scripted status {code}\n"))
        }
        Answer::Drop => {
            hang_up.notify_one();
            // The connection's task drops this future with the socket.
            return std::future::pending().await;
        }
    };
    let millis = decision.t.as_secs_f64() * 1000.0;
    if let Ok(value) = HeaderValue::from_str(&format!("{millis:.3}")) {
        response.headers_mut().insert(&TIME_HEADER, value);
    }
    response
}

/// `Retry-After` takes whole seconds: round up, so a client that obeys it lands in the next
/// window, never in the one that refused it.
fn whole_seconds(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(1)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1001)), 2);
    }
}
