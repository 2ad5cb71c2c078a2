//! One target × tenant's stream as its sender holds it: the schedule, where its next request
//! goes (sticky or round robin, a worker's step included), and its client's own state.

use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::client::{Client, Throttle};
use super::keys::Drawer;
use super::schedule::Schedule;
use super::{Caller, LoadPlan, Role, Share, Spread};

/// Mixed into the run's seed for the clients' own draws (backoff jitter, throttling), so
/// they never share a stream with the arrival schedules.
const CLIENT_SEED_SALT: u64 = 0x636c_6965_6e74_7321;

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
    /// Stream `index` of `plan` (target-major target × tenant order), as this process sends
    /// it: a worker's share of the schedule, and its place in the round robin.
    pub(super) fn new(plan: &LoadPlan, index: usize) -> Self {
        let tenants = plan.tenants.len();
        // A fault player's streams send nothing: any share rotates them.
        let share = match plan.role {
            Role::Sender(share) => share,
            Role::FaultPlayer => Share::WHOLE,
        };
        let (target, tenant) = (index / tenants, index % tenants);
        let c = &plan.tenants[tenant];
        Self {
            target,
            tenant,
            schedule: Schedule::new(
                plan.seed,
                target,
                tenant,
                c.rate_per_s,
                c.arrival,
                plan.duration,
            )
            .role(plan.role),
            spread: c.spread,
            next_instance: tenant + share.index() as usize - 1,
            step: share.count() as usize,
            client: c.client,
            rng: {
                let mut rng = ChaCha8Rng::seed_from_u64(plan.seed ^ CLIENT_SEED_SALT);
                rng.set_stream(((target as u64) << 32) ^ tenant as u64);
                rng
            },
            throttle: match c.client {
                Client::AdaptiveThrottling { k, window } => {
                    Some(Arc::new(Mutex::new(Throttle::new(k, window))))
                }
                _ => None,
            },
            keys: match &c.caller {
                Caller::Key(_) => None,
                Caller::Drawn(keys) => Some(keys.drawer(plan.seed, tenant)),
            },
        }
    }

    /// The caller key of its arrival `index` (in the whole schedule; 0 for a tenant of one key).
    pub(super) fn key(&mut self, index: u64) -> usize {
        self.keys.as_mut().map_or(0, |d| d.key_of(index))
    }

    /// `n` of its arrivals were dropped unsent: the round-robin goes on where sending each
    /// would have left it, as it does in every worker.
    pub(super) fn skipped(&mut self, n: u64) {
        let steps = usize::try_from(n).unwrap_or(usize::MAX);
        self.next_instance = self
            .next_instance
            .wrapping_add(steps.wrapping_mul(self.step));
    }

    /// Sticky: tenant i always on the (i mod n)-th instance in rotation. Round robin: starting
    /// there, so tenants do not all begin on the first.
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

    /// Where its requests go from here, as [`Self::pick_instance`] will pick them: each
    /// instance with its share of them.
    pub(super) fn spread_over(&self, in_rotation: &[usize]) -> Vec<(usize, f64)> {
        spread_over(
            self.spread,
            self.tenant,
            self.next_instance,
            self.step,
            in_rotation,
        )
    }
}

/// The instances a stream's picks visit, each with its share: a sticky tenant's one, or every
/// instance its round robin reaches from `next` in steps of `step` (a worker's step skips
/// some when it shares a factor with their number), each as often as it is reached.
fn spread_over(
    spread: Spread,
    tenant: usize,
    next: usize,
    step: usize,
    in_rotation: &[usize],
) -> Vec<(usize, f64)> {
    let n = in_rotation.len();
    if n == 0 {
        return Vec::new();
    }
    match spread {
        Spread::Sticky => vec![(in_rotation[tenant % n], 1.0)],
        Spread::RoundRobin => {
            // n picks make a whole number of the round robin's cycles.
            let mut shares: Vec<(usize, f64)> = Vec::new();
            for j in 0..n {
                let instance = in_rotation[(next % n + j * (step % n)) % n];
                match shares.iter_mut().find(|(i, _)| *i == instance) {
                    Some((_, share)) => *share += 1.0 / n as f64,
                    None => shares.push((instance, 1.0 / n as f64)),
                }
            }
            shares
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_robin_spreads_over_the_instances_its_step_reaches_and_a_sticky_tenant_on_one() {
        let rr = |next, step, instances: &[usize]| {
            spread_over(Spread::RoundRobin, 0, next, step, instances)
        };
        assert_eq!(rr(0, 1, &[4, 5]), [(4, 0.5), (5, 0.5)]);
        // Two workers over two instances: each worker's picks all land on one.
        assert_eq!(rr(0, 2, &[4, 5]), [(4, 1.0)]);
        assert_eq!(rr(1, 2, &[4, 5]), [(5, 1.0)]);
        // Two workers over three instances reach all three.
        let three = rr(1, 2, &[4, 5, 6]);
        assert_eq!(three.len(), 3);
        assert!(three.iter().all(|&(_, s)| (s - 1.0 / 3.0).abs() < 1e-12));
        assert_eq!(
            spread_over(Spread::Sticky, 3, 0, 1, &[4, 5]),
            [(5, 1.0)],
            "tenant 3 of two instances"
        );
        assert!(rr(0, 1, &[]).is_empty());
    }
}
