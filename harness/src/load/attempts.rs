//! One request and the retries its client sends after it: each attempt to the instance a
//! balancer would pick, waits and rotation changes between them, none past the run's end.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;
use tokio_util::sync::CancellationToken;

use super::client::{Client, Throttle};
use super::exchange::{self, Exchange};
use super::in_flight::Sent;
use super::members::Members;
use super::prepared::Prepared;
use super::{Outcome, Rotation, Spread};

/// What a retrying client's request needs beyond one attempt: its backoff jitter, and the run's
/// cancellation (no retry starts once it fires). Only such a request clones the token, whose
/// clone and drop take a lock.
pub(super) struct Retrying {
    pub(super) rng: ChaCha8Rng,
    pub(super) cancel: CancellationToken,
}

/// One request and the retries its client sends after it.
pub(super) struct Attempts {
    pub(super) prepared: Arc<Prepared>,
    /// The target's members when the request was sent, read again for a retry if the
    /// rotation has changed since (`version`).
    pub(super) members: Arc<Members>,
    pub(super) rotation: Rotation,
    pub(super) version: u64,
    pub(super) target: usize,
    pub(super) tenant: usize,
    /// Which of the tenant's caller keys the request names (its retries too: same caller).
    pub(super) key: usize,
    pub(super) first_instance: usize,
    pub(super) spread: Spread,
    pub(super) client: Client,
    /// Present when the client retries.
    pub(super) retrying: Option<Retrying>,
    pub(super) throttle: Option<Arc<Mutex<Throttle>>>,
    /// Whether its connections are kept for the next request.
    pub(super) keep_alive: bool,
    pub(super) start: Instant,
    pub(super) end: Instant,
    pub(super) timeout: Duration,
}

impl Attempts {
    /// Sends until the client is done: the last outcome. `sent` counts the attempts as they
    /// leave (the one awaiting its answer included) and the connections they open, so a
    /// request abandoned mid-way knows how many it sent.
    pub(super) async fn run(mut self, sent: &mut Sent) -> Outcome {
        loop {
            let instance = self.instance(sent.attempts);
            let host = &self.members.hosts[instance];
            let request = self
                .prepared
                .request(self.target, host, self.tenant, self.key);
            sent.attempts += 1;
            let (outcome, retry_after) = exchange::exchange(
                self.members.pool(instance, self.tenant),
                request,
                Exchange {
                    timeout: self.timeout,
                    keep_alive: self.keep_alive,
                },
                &mut sent.new_connections,
            )
            .await;
            if let Some(throttle) = &self.throttle {
                let now = Instant::now().saturating_duration_since(self.start);
                throttle
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .answered(now, outcome == Outcome::Admitted);
            }
            let Some(retrying) = self.retrying.as_mut() else {
                return outcome;
            };
            let rng = &mut retrying.rng;
            let Some(wait) = self
                .client
                .next_wait(sent.attempts, outcome, retry_after, rng)
            else {
                return outcome;
            };
            // Past the run's end (or once it is cancelled) the run is over for the clients
            // too: bounded in time.
            let Some(at) = Instant::now().checked_add(wait).filter(|at| *at < self.end) else {
                return outcome;
            };
            if !wait.is_zero() {
                tokio::time::sleep_until(at.into()).await;
            }
            if self
                .retrying
                .as_ref()
                .is_some_and(|r| r.cancel.is_cancelled())
            {
                return outcome;
            }
            if self.rotation.version() != self.version {
                self.version = self.rotation.version();
                self.members = Arc::new(self.members.reread(&self.rotation));
            }
        }
    }

    /// Where attempt `sent` (0 for the first) goes: the first where the request was sent;
    /// a retry to the next instance in rotation (round robin), or to the same one while it is
    /// in rotation (sticky), as a balancer would.
    fn instance(&self, sent: u32) -> usize {
        let ring = &self.members.in_rotation;
        let at = ring.iter().position(|&i| i == self.first_instance);
        match (self.spread, at) {
            (Spread::Sticky, Some(_)) => self.first_instance,
            (Spread::Sticky, None) => ring[self.tenant % ring.len()],
            (Spread::RoundRobin, at) => ring[(at.unwrap_or(0) + sent as usize) % ring.len()],
        }
    }
}
