//! One target × tenant's stream as its sender holds it: the schedule, where its next request
//! goes (sticky or round robin, a worker's step included), and its client's own state.

use std::sync::{Arc, Mutex};

use rand_chacha::ChaCha8Rng;

use super::Spread;
use super::client::{Client, Throttle};
use super::keys::Drawer;
use super::schedule::Schedule;

/// One target × tenant: its schedule and where its next request goes.
#[derive(Debug)]
pub(super) struct Stream {
    pub(super) target: usize,
    pub(super) tenant: usize,
    pub(super) schedule: Schedule,
    pub(super) spread: Spread,
    pub(super) next_instance: usize,
    /// Arrivals of the whole schedule between two of this stream's: the round robin moves
    /// on by as many, so a worker's request goes to the instance it would go to in one
    /// process running the whole schedule.
    pub(super) step: usize,
    pub(super) client: Client,
    /// The client's own draws: throttling refusals, and a seed per request for its backoff.
    pub(super) rng: ChaCha8Rng,
    /// Shared with the stream's requests in flight, which count the accepts.
    pub(super) throttle: Option<Arc<Mutex<Throttle>>>,
    /// A tenant of drawn caller keys: the draws.
    pub(super) keys: Option<Drawer>,
}

impl Stream {
    /// The caller key of the arrival the schedule last produced (0 for a tenant of one key).
    pub(super) fn key(&mut self) -> usize {
        let arrival = self.schedule.last_index();
        self.keys.as_mut().map_or(0, |d| d.key_of(arrival))
    }

    /// Sticky: tenant i always on the (i mod n)-th instance in rotation. Round robin: starting
    /// there, so tenants do not all begin on the first.
    /// `n` of its arrivals were dropped unsent: the round-robin goes on where sending each
    /// would have left it, as it does in every worker.
    pub(super) fn skipped(&mut self, n: u64) {
        let steps = usize::try_from(n).unwrap_or(usize::MAX);
        self.next_instance = self
            .next_instance
            .wrapping_add(steps.wrapping_mul(self.step));
    }

    pub(super) fn pick_instance(&mut self, in_rotation: &[usize]) -> usize {
        let n = in_rotation.len();
        match self.spread {
            Spread::Sticky => in_rotation[self.tenant % n],
            Spread::RoundRobin => {
                let i = self.next_instance % n;
                self.next_instance = i + self.step;
                in_rotation[i]
            }
        }
    }
}
