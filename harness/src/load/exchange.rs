//! One HTTP exchange on a pooled keep-alive connection (or, for a target without keep-alive, a
//! connection of its own, closed after the answer): send, drain the answer, and say what
//! became of it. A failure is an outcome here, never an error to propagate.
//!
//! Without keep-alive our side closes first, so each connection waits in TIME_WAIT on this
//! machine for a minute: on loopback Linux reuses those ports for a connect, but a bound
//! source address (a target told callers by it) or a remote deployment runs out of source
//! ports above a few hundred new connections a second, and the connects fail (counted as the
//! target's transport errors).
//!
//! The pool is a stack of idle HTTP/1 connections per instance on hyper's connection API,
//! not hyper-util's legacy client: on the project's 2-core machine the legacy client's pool
//! (a shared map keyed and hashed per request, a checkout racing a connect, a spawned task
//! per connection attempt) cost more client CPU per request than everything else a sender
//! thread does in user space. A connection is used by one request at a time and comes back
//! only after its answer is drained, so the connections of an instance never outnumber the
//! requests in flight to it, but for those warmed before the run. A connection idle for
//! [`IDLE_TIMEOUT`] is closed by us: a fault that slows the target fills the pool with the
//! connections its peak needed, and a server without an idle timeout of its own (the reference
//! has none) would keep them all, on both sides, for the rest of the run. A target's
//! `max_idle_connections` caps the pool besides, closing the least recently used as more come
//! back. A connection the server has closed stays in the pool, and counts against the cap,
//! until a checkout reaches it. A pool may be warmed before the run starts ([`super::warm`]);
//! a warmed connection is counted as opened by the first request that takes it.
//!
//! A request that finds no idle connection while [`MAX_CONNECTING`] others are connecting
//! waits for whichever comes first: a connection coming back, or its turn to connect; to a
//! target off this machine at most [`WAIT_FOR_A_TURN`], after which it connects anyway. Its
//! latencies count the wait, as they count a connect. (A pool's warm-up, a target without
//! keep-alive, and a request sent again on a new connection because its kept one had closed
//! connect without a turn.) Without the limit, at 40,000 req/s a burst after a stall of the VM
//! opened a connection per request, whose connects cost more than the requests, until the
//! in-flight bound was full (docs/load-engine.md).

use std::collections::VecDeque;
use std::error::Error as StdError;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroUsize;
use std::pin::pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{Notify, Semaphore};

use super::client::parse_retry_after;
use super::{Outcome, TransportError};

type Sender = SendRequest<Empty<Bytes>>;

/// How long a connection may sit idle in the pool before we close it. Below the 5 s after
/// which Node's HTTP server closes an idle connection, so that a kept connection is closed by
/// our side, not by the server's as a request is being written on it. failmode's own requests
/// to instances (`targets::loopback_client`) keep theirs no longer.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// Connections being opened to one pool at once; see the module's header, and the limits
/// measured against each other in docs/load-engine.md.
pub(crate) const MAX_CONNECTING: usize = 2;

/// How long a request to a target off this machine waits for a turn to connect (or a
/// connection back) before it connects anyway, beside the others (tokio's timer: 1–2 ms): there
/// a connect takes a round trip, and two at a time would queue requests through a latency fault
/// that needs hundreds more. On loopback, where connects cost the CPU the generator and the
/// target share, it waits however long: this wait there too brought back the drops at 40,000
/// req/s (docs/load-engine.md).
const WAIT_FOR_A_TURN: Duration = Duration::from_millis(1);

/// The most a request to `addr` waits for a turn to connect before it connects anyway:
/// [`WAIT_FOR_A_TURN`] off this machine; no bound on loopback (`None`: it waits for its turn,
/// within its request's timeout).
fn wait_for_a_turn(addr: SocketAddr) -> Option<Duration> {
    (!addr.ip().is_loopback()).then_some(WAIT_FOR_A_TURN)
}

/// The idle connections to one instance, each with when it came back, most recently used at
/// the back: a warm few at the back stay in use, the front ages out ([`IDLE_TIMEOUT`]). With
/// a `source`, every connection is bound to that local address before it connects: one
/// tenant's pool, for a target that tells callers by their address. At most `max_idle` are
/// kept.
#[derive(Debug)]
pub(crate) struct Pool {
    addr: SocketAddr,
    source: Option<IpAddr>,
    max_idle: Option<NonZeroUsize>,
    idle: Mutex<VecDeque<Idle>>,
    /// Turns to connect, [`MAX_CONNECTING`] of them.
    connecting: Semaphore,
    /// Wakes a request waiting for a connection when one comes back.
    returned: Notify,
    /// The most a request waits for a turn to connect: [`wait_for_a_turn`].
    wait_for_a_turn: Option<Duration>,
}

/// An idle connection, with when it came back and whether a request has used it yet (a
/// warmed one has not).
#[derive(Debug)]
struct Idle {
    sender: Sender,
    since: Instant,
    used: bool,
}

/// Where a request's connection came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Opened for this request.
    Opened,
    /// Warmed before the run: from the pool, and counted as opened by this request, its first.
    Warmed,
    /// Used before, kept alive.
    Reused,
}

impl Origin {
    /// Counted with this request's sample as a connection it opened.
    fn counts_as_opened(self) -> bool {
        self != Self::Reused
    }

    /// Kept idle in the pool before this request, so the server may have closed it since.
    fn was_idle(self) -> bool {
        self != Self::Opened
    }
}

impl Pool {
    pub(crate) fn new(
        addr: SocketAddr,
        source: Option<IpAddr>,
        max_idle: Option<NonZeroUsize>,
    ) -> Self {
        Self {
            addr,
            source,
            max_idle,
            idle: Mutex::new(VecDeque::new()),
            connecting: Semaphore::new(MAX_CONNECTING),
            returned: Notify::new(),
            wait_for_a_turn: wait_for_a_turn(addr),
        }
    }

    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    pub(crate) fn max_idle(&self) -> Option<NonZeroUsize> {
        self.max_idle
    }

    fn take_idle(&self) -> Option<(Sender, Origin)> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(Idle {
            sender,
            since,
            used,
        }) = idle.pop_back()
        {
            if since.elapsed() > IDLE_TIMEOUT {
                // The youngest left is too old, so is every other (a pool whose traffic
                // stopped a while): none is reused.
                idle.clear();
                return None;
            }
            if !sender.is_closed() {
                return Some((sender, if used { Origin::Reused } else { Origin::Warmed }));
            }
        }
        None
    }

    /// Puts a drained connection back as the most recent, and closes (drops) the oldest ones
    /// that have been idle too long or are beyond the pool's cap.
    fn put_back(&self, sender: Sender) {
        self.put_back_at(sender, Instant::now());
    }

    fn put_back_at(&self, sender: Sender, now: Instant) {
        self.keep(Idle {
            sender,
            since: now,
            used: true,
        });
        self.returned.notify_one();
    }

    fn keep(&self, entry: Idle) {
        let now = entry.since;
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.push_back(entry);
        while idle
            .front()
            .is_some_and(|e| now.duration_since(e.since) > IDLE_TIMEOUT)
        {
            idle.pop_front();
        }
        while let Some(max) = self.max_idle
            && idle.len() > max.get()
        {
            idle.pop_front();
        }
    }

    /// When each idle connection came back, oldest first.
    #[cfg(test)]
    fn idle_since(&self) -> Vec<Instant> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.iter().map(|e| e.since).collect()
    }

    /// Opens `n` connections at once and keeps them idle, unused, each as soon as it is open:
    /// a caller that stops waiting keeps those opened so far. A connection that fails to open
    /// is left to the requests (they open their own, and count the failure).
    pub(crate) async fn warm(&self, n: usize) {
        let mut opening: FuturesUnordered<_> = (0..n).map(|_| self.connect()).collect();
        while let Some(opened) = opening.next().await {
            if let Ok(sender) = opened {
                self.keep(Idle {
                    sender,
                    since: Instant::now(),
                    used: false,
                });
            }
        }
    }

    async fn connect(&self) -> Result<Sender, TransportError> {
        let stream = match self.source {
            None => TcpStream::connect(self.addr).await,
            Some(source) => connect_from(source, self.addr).await,
        }
        .map_err(|e| classify(&e))?;
        // A request is one small segment: Nagle would hold it behind the previous one's ACK.
        stream.set_nodelay(true).map_err(|e| classify(&e))?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| classify(&e))?;
        // The connection's own task: it ends when the connection closes or the sender is
        // dropped, and its failure reaches the request through the sender.
        tokio::spawn(connection);
        Ok(sender)
    }

    /// An idle connection that is ready for a request, else a new one: opened at once while
    /// fewer than [`MAX_CONNECTING`] requests are connecting, else on the first of a connection
    /// coming back (taken instead), a turn to connect, or the end of the pool's wait for one.
    async fn checkout(&self) -> Result<(Sender, Origin), TransportError> {
        if let Some(idle) = self.ready_idle().await {
            return Ok(idle);
        }
        // A block of its own: a request that stops waiting leaves the queue for a turn before
        // it connects, so a turn freed meanwhile goes to one still waiting.
        let turn = {
            // Made once, so the request keeps its place in the queue for a turn however often
            // a connection comes back to be taken by another.
            let mut turn = pin!(self.connecting.acquire());
            let mut waited = pin!(async {
                match self.wait_for_a_turn {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => std::future::pending().await,
                }
            });
            loop {
                // A block of its own: the listener is dropped before the connect, so a
                // connection back meanwhile wakes a request still waiting, not this one.
                let next = {
                    // Listening first: a connection back in between is not missed.
                    let mut returned = pin!(self.returned.notified());
                    returned.as_mut().enable();
                    if let Some(idle) = self.ready_idle().await {
                        return Ok(idle);
                    }
                    tokio::select! {
                        biased;
                        () = &mut returned => None,
                        // Never closed: a turn always comes.
                        turn = &mut turn => Some(turn.ok()),
                        () = &mut waited => Some(None),
                    }
                };
                if let Some(turn) = next {
                    break turn;
                }
            }
        };
        let opened = self.connect().await;
        drop(turn);
        Ok((opened?, Origin::Opened))
    }

    /// An idle connection that is ready for a request.
    async fn ready_idle(&self) -> Option<(Sender, Origin)> {
        while let Some((mut sender, origin)) = self.take_idle() {
            // Ready at once unless the connection has just closed.
            if sender.ready().await.is_ok() {
                return Some((sender, origin));
            }
        }
        None
    }
}

/// Connects to `addr` from `source` (any port): the target sees the connection come from it.
async fn connect_from(source: IpAddr, addr: SocketAddr) -> io::Result<TcpStream> {
    let socket = match source {
        IpAddr::V4(_) => TcpSocket::new_v4()?,
        IpAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.bind(SocketAddr::new(source, 0))?;
    socket.connect(addr).await
}

/// How one exchange goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Exchange {
    /// For the whole exchange, connecting included.
    pub(crate) timeout: Duration,
    /// Whether the connection goes back to the pool for the next request, or is closed.
    pub(crate) keep_alive: bool,
}

/// Sends `request` and reads its whole body (dropping the bytes as they arrive), counting in
/// `opened` the connections it opens. With the outcome, the answer's `Retry-After` if it had
/// one.
pub(crate) async fn exchange(
    pool: &Pool,
    request: Request<Empty<Bytes>>,
    how: Exchange,
    opened: &mut u32,
) -> (Outcome, Option<Duration>) {
    match tokio::time::timeout(how.timeout, send(pool, request, how.keep_alive, opened)).await {
        Ok(Ok((status, retry_after))) => (Outcome::from_status(status), retry_after),
        Ok(Err(kind)) => (Outcome::Transport(kind), None),
        Err(_elapsed) => (Outcome::Transport(TransportError::Timeout), None),
    }
}

async fn send(
    pool: &Pool,
    request: Request<Empty<Bytes>>,
    keep_alive: bool,
    opened: &mut u32,
) -> Result<(u16, Option<Duration>), TransportError> {
    let (mut sender, origin) = if keep_alive {
        pool.checkout().await?
    } else {
        (pool.connect().await?, Origin::Opened)
    };
    if origin.counts_as_opened() {
        *opened += 1;
    }
    let response = match sender.try_send_request(request).await {
        Ok(response) => response,
        Err(mut e) => match e.take_message() {
            // A kept-alive connection the server had closed before our request was written:
            // as any keep-alive client, send it on a new connection. The server never saw
            // it, so this is not a retry.
            Some(request) if origin.was_idle() => {
                // A warmed connection was counted as this request's: it carried nothing, so
                // the count goes to the new one, once it is open.
                if origin == Origin::Warmed {
                    *opened -= 1;
                }
                sender = pool.connect().await?;
                *opened += 1;
                sender
                    .send_request(request)
                    .await
                    .map_err(|e| classify(&e))?
            }
            _ => return Err(classify(e.error())),
        },
    };
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(hyper::header::RETRY_AFTER)
        .and_then(|v| parse_retry_after(v.as_bytes()));
    let mut body = response.into_body();
    while let Some(frame) = body.frame().await {
        frame.map_err(|e| classify(&e))?;
    }
    // Without keep-alive the connection closes as its sender is dropped here.
    if keep_alive {
        pool.put_back(sender);
    }
    Ok((status, retry_after))
}

/// Walks the error's causes: hyper wraps the socket's io::Error, whose kind says the most.
pub(crate) fn classify(error: &(dyn StdError + 'static)) -> TransportError {
    let mut found = TransportError::Other;
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            match io.kind() {
                io::ErrorKind::ConnectionRefused => return TransportError::Refused,
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof => return TransportError::Reset,
                io::ErrorKind::TimedOut => return TransportError::Timeout,
                _ => {}
            }
        }
        if let Some(hyper) = e.downcast_ref::<hyper::Error>() {
            // The peer closed the connection before the answer was complete: an orderly
            // close (FIN) mid-exchange, which a client sees as a reset connection.
            if hyper.is_incomplete_message() || hyper.is_closed() || hyper.is_canceled() {
                found = TransportError::Reset;
            }
        }
        cause = e.source();
    }
    found
}

#[cfg(test)]
mod tests {
    use tokio_util::sync::CancellationToken;

    use super::*;

    /// A pool of connections to a loopback server that answers every request, until the
    /// token is cancelled.
    async fn served_pool(max_idle: Option<NonZeroUsize>) -> (Pool, CancellationToken) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let pool = Pool::new(listener.local_addr().unwrap(), None, max_idle);
        let stop = CancellationToken::new();
        tokio::spawn(super::super::capacity::serve(listener, stop.clone()));
        (pool, stop)
    }

    #[tokio::test]
    async fn a_connection_idle_longer_than_the_timeout_is_closed_and_the_recent_ones_kept() {
        let (pool, stop) = served_pool(None).await;
        let now = Instant::now();
        let long_ago = now - IDLE_TIMEOUT - Duration::from_millis(1);
        let just_now = now - IDLE_TIMEOUT + Duration::from_millis(500);

        pool.put_back_at(pool.connect().await.unwrap(), long_ago);
        pool.put_back_at(pool.connect().await.unwrap(), just_now);
        assert_eq!(
            pool.idle_since(),
            [long_ago, just_now],
            "when just_now came back, long_ago had been idle only 0.5 s"
        );
        pool.put_back_at(pool.connect().await.unwrap(), now);
        assert_eq!(
            pool.idle_since(),
            [just_now, now],
            "the one idle too long is closed"
        );

        // The most recent is reused first.
        let (sender, origin) = pool.checkout().await.unwrap();
        assert!(origin == Origin::Reused && !sender.is_closed());
        assert_eq!(pool.idle_since(), [just_now]);
        stop.cancel();
    }

    #[tokio::test]
    async fn a_warmed_connection_counts_as_opened_by_its_first_request_only() {
        let (pool, stop) = served_pool(None).await;
        pool.warm(2).await;
        assert_eq!(pool.idle_since().len(), 2);

        let (first, origin) = pool.checkout().await.unwrap();
        assert_eq!(origin, Origin::Warmed);
        assert!(origin.counts_as_opened() && origin.was_idle());
        pool.put_back(first);
        // The one just used comes back first; then the other warmed one, still unused.
        assert_eq!(pool.checkout().await.unwrap().1, Origin::Reused);
        assert_eq!(pool.checkout().await.unwrap().1, Origin::Warmed);
        assert_eq!(pool.checkout().await.unwrap().1, Origin::Opened);
        stop.cancel();
    }

    /// Every turn to connect taken, as by connects in progress.
    fn every_turn_taken(pool: &Pool) -> tokio::sync::SemaphorePermit<'_> {
        let turns = u32::try_from(MAX_CONNECTING).unwrap();
        pool.connecting.try_acquire_many(turns).unwrap()
    }

    /// A checkout and what happens beside it, `beside` polled first each time; a checkout that
    /// never returns fails the test instead of hanging it.
    async fn checkout_beside(
        pool: &Pool,
        beside: impl Future<Output = ()>,
    ) -> Result<(Sender, Origin), TransportError> {
        let both = async { tokio::join!(beside, pool.checkout()).1 };
        tokio::time::timeout(Duration::from_secs(10), both)
            .await
            .expect("the checkout returned")
    }

    #[tokio::test]
    async fn a_request_beyond_the_connects_in_progress_takes_the_first_connection_back() {
        let (pool, stop) = served_pool(None).await;
        let in_use = pool.connect().await.unwrap();
        let turns = every_turn_taken(&pool);
        // The checkout waits; then the connection in use comes back.
        let back = async {
            tokio::task::yield_now().await;
            pool.put_back(in_use);
        };
        let (_, origin) = checkout_beside(&pool, back).await.unwrap();
        assert_eq!(origin, Origin::Reused, "it opened none");
        drop(turns);
        stop.cancel();
    }

    #[tokio::test]
    async fn a_request_waiting_for_a_turn_to_connect_connects_when_one_ends() {
        let (pool, stop) = served_pool(None).await;
        let turns = every_turn_taken(&pool);
        let ended = async {
            tokio::task::yield_now().await;
            drop(turns);
        };
        let (_, origin) = checkout_beside(&pool, ended).await.unwrap();
        assert_eq!(origin, Origin::Opened);
        assert_eq!(
            pool.connecting.available_permits(),
            MAX_CONNECTING,
            "its turn ended with the connect"
        );
        stop.cancel();
    }

    #[test]
    fn only_a_request_to_a_target_off_this_machine_stops_waiting_for_a_turn() {
        for on_loopback in ["127.0.0.1:80", "127.0.0.2:80", "[::1]:80"] {
            assert_eq!(wait_for_a_turn(on_loopback.parse().unwrap()), None);
        }
        for off in ["10.0.0.7:80", "[2001:db8::1]:80"] {
            assert_eq!(wait_for_a_turn(off.parse().unwrap()), Some(WAIT_FOR_A_TURN));
        }
    }

    #[tokio::test]
    async fn a_request_to_a_target_off_this_machine_whose_turn_does_not_come_connects_anyway() {
        let (mut pool, stop) = served_pool(None).await;
        // The loopback server stands for a distant one.
        pool.wait_for_a_turn = Some(WAIT_FOR_A_TURN);
        // Connects that never end, and no connection coming back.
        let turns = every_turn_taken(&pool);
        let (_, origin) = checkout_beside(&pool, async {}).await.unwrap();
        assert_eq!(origin, Origin::Opened);
        assert_eq!(pool.connecting.available_permits(), 0, "beside the others");
        drop(turns);
        stop.cancel();
    }

    #[tokio::test]
    async fn a_pool_whose_most_recent_connection_is_too_old_reuses_none() {
        let (pool, stop) = served_pool(None).await;
        let long_ago = Instant::now() - IDLE_TIMEOUT - Duration::from_millis(1);
        pool.put_back_at(pool.connect().await.unwrap(), long_ago);
        let (_, origin) = pool.checkout().await.unwrap();
        assert_eq!(
            origin,
            Origin::Opened,
            "a connection idle past the timeout is not reused"
        );
        assert!(pool.idle_since().is_empty());
        stop.cancel();
    }

    #[tokio::test]
    async fn a_connection_back_to_a_full_pool_closes_the_least_recently_used() {
        let (pool, stop) = served_pool(NonZeroUsize::new(2)).await;
        let now = Instant::now();
        let at = |ms| now - Duration::from_millis(ms);
        // Three requests in flight at once, as in a peak: three connections.
        let opened = [
            pool.connect().await.unwrap(),
            pool.connect().await.unwrap(),
            pool.connect().await.unwrap(),
        ];
        for (sender, ms) in opened.into_iter().zip([30, 20, 10]) {
            pool.put_back_at(sender, at(ms));
        }
        assert_eq!(
            pool.idle_since(),
            [at(20), at(10)],
            "two kept, the one back first closed"
        );
        stop.cancel();
    }
}
