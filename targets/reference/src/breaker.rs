//! The circuit breaker beside the store call: an explicit state machine.
//!
//! Every method takes `now`, so the transitions are proven with a controllable clock rather
//! than sleeps. It opens on consecutive failures or on a failure ratio over a rolling window,
//! stays open for a cool-down, then lets exactly one probe through (half-open).

use std::time::{Duration, Instant};

/// Thresholds, all configurable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerSettings {
    pub consecutive_failures: u32,
    pub failure_ratio: f64,
    /// The ratio is only judged over at least this many calls in the rolling window.
    pub min_calls: u32,
    pub window: Duration,
    pub cooldown: Duration,
    /// After an outage, how far ahead of the first instance back the fleet rejoins the store:
    /// it holds to its turns until the first window that starts at least this much later.
    /// Longer than the spread of the instances' reconnects.
    pub rejoin_after: Duration,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        Self {
            consecutive_failures: 5,
            failure_ratio: 0.5,
            min_calls: 20,
            window: Duration::from_secs(10),
            cooldown: Duration::from_secs(1),
            // Twice the longest reconnect backoff: the instances that lost the store together
            // are each back within a backoff step of its return.
            rejoin_after: crate::store::RECONNECT_BACKOFF_MAX * 2,
        }
    }
}

/// Where the breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open {
        until: Instant,
    },
    /// One probe is out; it started at `since`.
    HalfOpen {
        since: Instant,
    },
}

impl BreakerState {
    /// 0 closed, 1 open, 2 half-open: the value of the `breaker_state` gauge.
    pub fn as_gauge(self) -> i64 {
        match self {
            Self::Closed => 0,
            Self::Open { .. } => 1,
            Self::HalfOpen { .. } => 2,
        }
    }
}

/// What the caller may do with the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permit {
    /// Call the store as usual.
    Call,
    /// Call the store as the half-open probe; its outcome decides the state.
    Probe,
    /// Do not call the store: go to the fallback.
    Rejected,
}

const BUCKETS: usize = 10;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    index: u64,
    calls: u32,
    failures: u32,
}

/// Calls and failures over the last `window`, in ten buckets.
#[derive(Debug, Clone)]
struct Rolling {
    origin: Instant,
    bucket_len: Duration,
    buckets: [Bucket; BUCKETS],
}

impl Rolling {
    fn new(origin: Instant, window: Duration) -> Self {
        Self {
            origin,
            bucket_len: (window / BUCKETS as u32).max(Duration::from_millis(1)),
            buckets: [Bucket::default(); BUCKETS],
        }
    }

    fn index(&self, now: Instant) -> u64 {
        (now.saturating_duration_since(self.origin).as_nanos() / self.bucket_len.as_nanos()) as u64
    }

    fn record(&mut self, now: Instant, failed: bool) {
        let index = self.index(now);
        let bucket = &mut self.buckets[(index % BUCKETS as u64) as usize];
        if bucket.index != index {
            *bucket = Bucket {
                index,
                ..Bucket::default()
            };
        }
        bucket.calls += 1;
        bucket.failures += u32::from(failed);
    }

    fn totals(&self, now: Instant) -> (u32, u32) {
        let index = self.index(now);
        self.buckets
            .iter()
            .filter(|b| b.calls > 0 && b.index + BUCKETS as u64 > index)
            .fold((0, 0), |(c, f), b| (c + b.calls, f + b.failures))
    }

    fn clear(&mut self) {
        self.buckets = [Bucket::default(); BUCKETS];
    }
}

/// The breaker itself. Not thread-safe on its own: the limiter keeps it behind a mutex.
#[derive(Debug, Clone)]
pub struct Breaker {
    settings: BreakerSettings,
    state: BreakerState,
    consecutive: u32,
    rolling: Rolling,
    /// The store's connections made when the breaker opened on a lost connection, while this
    /// outage's early probe is unspent: a connection made since is news ([`Self::permit_after`]).
    reconnect_after: Option<u64>,
    early_spent: bool,
}

impl Breaker {
    pub fn new(settings: BreakerSettings, now: Instant) -> Self {
        Self {
            settings,
            state: BreakerState::Closed,
            consecutive: 0,
            rolling: Rolling::new(now, settings.window),
            reconnect_after: None,
            early_spent: false,
        }
    }

    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// Asks whether a request may call the store now.
    pub fn permit(&mut self, now: Instant) -> Permit {
        match self.state {
            BreakerState::Closed => Permit::Call,
            BreakerState::Open { until } if now >= until => {
                self.state = BreakerState::HalfOpen { since: now };
                Permit::Probe
            }
            BreakerState::Open { .. } => Permit::Rejected,
            // A probe whose outcome never came back (its request was cancelled) must not wedge
            // the breaker half-open: after a cool-down another probe goes out.
            BreakerState::HalfOpen { since } if now >= since + self.settings.cooldown => {
                self.state = BreakerState::HalfOpen { since: now };
                Permit::Probe
            }
            BreakerState::HalfOpen { .. } => Permit::Rejected,
        }
    }

    /// Asks whether a request may call the store now, the store having made `connections`
    /// connections so far. One made since the breaker opened on a lost connection means a
    /// connect and a script load have just succeeded, which is what the cool-down waits to
    /// find out: the request probes at once, once an outage. Instances that lost the store
    /// together find it again within milliseconds (their reconnect backoffs run nearly in
    /// step), not a cool-down apart.
    pub fn permit_after(&mut self, now: Instant, connections: u64) -> Permit {
        if let BreakerState::Open { until } = self.state
            && until > now
            && self.reconnect_after.is_some_and(|made| connections > made)
        {
            self.state = BreakerState::Open { until: now };
            self.early_spent = true;
        }
        self.permit(now)
    }

    /// [`Self::record`], with `lost`: for a call that failed on a lost connection (and on
    /// nothing slower since the store last answered), the store's connections made when it
    /// started. A store that takes a connection and its scripts but drops the calls after
    /// would otherwise be probed as fast as it can be reconnected: a failed early probe
    /// waits the cool-down, while a failed probe of the cool-down keeps the early one.
    pub fn record_call(
        &mut self,
        now: Instant,
        permit: Permit,
        ok: bool,
        lost: Option<u64>,
    ) -> BreakerState {
        let before = self.state;
        let after = self.record(now, permit, ok);
        if matches!(after, BreakerState::Open { .. }) && after != before {
            if before == BreakerState::Closed {
                self.early_spent = false;
            }
            self.reconnect_after = lost.filter(|_| !self.early_spent);
        }
        after
    }

    /// Records the outcome of a call made under `permit`. Returns the new state.
    pub fn record(&mut self, now: Instant, permit: Permit, succeeded: bool) -> BreakerState {
        match (self.state, permit) {
            (BreakerState::HalfOpen { .. }, Permit::Probe) => {
                if succeeded {
                    self.close();
                } else {
                    self.trip(now);
                }
            }
            (BreakerState::Closed, Permit::Call) => {
                self.rolling.record(now, !succeeded);
                if succeeded {
                    self.consecutive = 0;
                } else {
                    self.consecutive += 1;
                    if self.should_trip(now) {
                        self.trip(now);
                    }
                }
            }
            // Late outcomes of calls that started in another state say nothing about now.
            _ => {}
        }
        self.state
    }

    fn should_trip(&self, now: Instant) -> bool {
        if self.consecutive >= self.settings.consecutive_failures {
            return true;
        }
        let (calls, failures) = self.rolling.totals(now);
        calls >= self.settings.min_calls
            && f64::from(failures) >= self.settings.failure_ratio * f64::from(calls)
    }

    fn trip(&mut self, now: Instant) {
        self.state = BreakerState::Open {
            until: now + self.settings.cooldown,
        };
        self.consecutive = 0;
        self.rolling.clear();
    }

    fn close(&mut self) {
        self.state = BreakerState::Closed;
        self.consecutive = 0;
        self.rolling.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn breaker(now: Instant) -> Breaker {
        Breaker::new(BreakerSettings::default(), now)
    }

    fn fail(b: &mut Breaker, now: Instant) -> BreakerState {
        let permit = b.permit(now);
        b.record(now, permit, false)
    }

    fn succeed(b: &mut Breaker, now: Instant) -> BreakerState {
        let permit = b.permit(now);
        b.record(now, permit, true)
    }

    #[test]
    fn opens_after_the_configured_consecutive_failures() {
        let t0 = Instant::now();
        let mut b = breaker(t0);
        for _ in 0..4 {
            assert_eq!(fail(&mut b, t0), BreakerState::Closed);
        }
        assert_eq!(
            fail(&mut b, t0),
            BreakerState::Open {
                until: t0 + Duration::from_secs(1)
            }
        );
        assert_eq!(b.permit(t0 + 999 * MS), Permit::Rejected);
    }

    #[test]
    fn a_success_resets_the_consecutive_count() {
        let t0 = Instant::now();
        let mut b = breaker(t0);
        for _ in 0..4 {
            fail(&mut b, t0);
        }
        succeed(&mut b, t0);
        for _ in 0..4 {
            assert_eq!(fail(&mut b, t0), BreakerState::Closed);
        }
    }

    #[test]
    fn opens_on_the_failure_ratio_over_the_rolling_window() {
        let t0 = Instant::now();
        let mut b = breaker(t0);
        // Alternating never makes five in a row, but 50 % of 20 calls trips it.
        for i in 0..19 {
            let state = if i % 2 == 0 {
                fail(&mut b, t0 + i * MS)
            } else {
                succeed(&mut b, t0 + i * MS)
            };
            assert_eq!(state, BreakerState::Closed, "call {i}");
        }
        assert!(matches!(
            succeed(&mut b, t0 + 19 * MS),
            BreakerState::Closed
        ));
        assert!(matches!(
            fail(&mut b, t0 + 20 * MS),
            BreakerState::Open { .. }
        ));
    }

    #[test]
    fn failures_older_than_the_window_are_forgotten() {
        let t0 = Instant::now();
        let mut b = breaker(t0);
        for i in 0..10 {
            fail(&mut b, t0 + i * MS);
            succeed(&mut b, t0 + i * MS);
        }
        let later = t0 + Duration::from_secs(11);
        for i in 0..19 {
            succeed(&mut b, later + i * MS);
        }
        assert_eq!(fail(&mut b, later + 20 * MS), BreakerState::Closed);
    }

    #[test]
    fn after_the_cooldown_exactly_one_probe_goes_out() {
        let t0 = Instant::now();
        let mut b = breaker(t0);
        for _ in 0..5 {
            fail(&mut b, t0);
        }
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(b.permit(t1), Permit::Probe);
        assert_eq!(b.state(), BreakerState::HalfOpen { since: t1 });
        assert_eq!(b.permit(t1 + MS), Permit::Rejected);
        assert_eq!(b.permit(t1 + 500 * MS), Permit::Rejected);
    }

    #[test]
    fn a_successful_probe_closes_and_a_failed_one_reopens() {
        let t0 = Instant::now();
        let mut b = breaker(t0);
        for _ in 0..5 {
            fail(&mut b, t0);
        }
        let t1 = t0 + Duration::from_secs(1);
        let probe = b.permit(t1);
        assert_eq!(
            b.record(t1 + 20 * MS, probe, false),
            BreakerState::Open {
                until: t1 + 20 * MS + Duration::from_secs(1)
            }
        );
        let t2 = t1 + 20 * MS + Duration::from_secs(1);
        let probe = b.permit(t2);
        assert_eq!(probe, Permit::Probe);
        assert_eq!(b.record(t2, probe, true), BreakerState::Closed);
        assert_eq!(b.permit(t2), Permit::Call);
    }

    #[test]
    fn a_lost_probe_does_not_wedge_the_breaker_half_open() {
        let t0 = Instant::now();
        let mut b = breaker(t0);
        for _ in 0..5 {
            fail(&mut b, t0);
        }
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(b.permit(t1), Permit::Probe);
        // The probe's outcome never arrives.
        assert_eq!(b.permit(t1 + Duration::from_secs(1)), Permit::Probe);
    }

    fn lose(b: &mut Breaker, now: Instant, connections: u64) -> BreakerState {
        let permit = b.permit_after(now, connections);
        b.record_call(now, permit, false, Some(connections))
    }

    #[test]
    fn a_new_connection_lets_the_probe_out_before_the_cooldown_ends_once_an_outage() {
        let t0 = Instant::now();
        let mut b = breaker(t0);
        for _ in 0..5 {
            lose(&mut b, t0, 1);
        }
        let t1 = t0 + 200 * MS;
        assert_eq!(b.permit_after(t1, 1), Permit::Rejected, "no new connection");
        let probe = b.permit_after(t1, 2);
        assert_eq!(probe, Permit::Probe);
        // Half-open already: the probe is out, and a reconnect sends no second one.
        assert_eq!(b.permit_after(t1 + MS, 3), Permit::Rejected);
        // The early probe failed on its lost connection: the next waits the cool-down.
        b.record_call(t1, probe, false, Some(2));
        assert_eq!(b.permit_after(t1 + MS, 4), Permit::Rejected);
        let t2 = t1 + Duration::from_secs(1);
        let probe = b.permit_after(t2, 4);
        assert_eq!(probe, Permit::Probe);
        assert_eq!(b.record_call(t2, probe, true, None), BreakerState::Closed);
        // A new outage has an early probe of its own.
        for _ in 0..5 {
            lose(&mut b, t2, 4);
        }
        assert_eq!(b.permit_after(t2 + MS, 5), Permit::Probe);
    }

    #[test]
    fn a_breaker_opened_on_anything_but_a_lost_connection_waits_the_cooldown() {
        let t0 = Instant::now();
        let mut b = breaker(t0);
        for _ in 0..5 {
            let permit = b.permit_after(t0, 1);
            b.record_call(t0, permit, false, None);
        }
        assert_eq!(b.permit_after(t0 + 200 * MS, 2), Permit::Rejected);
    }

    #[test]
    fn a_failed_probe_of_the_cooldown_keeps_the_early_one() {
        let t0 = Instant::now();
        let mut b = breaker(t0);
        for _ in 0..5 {
            lose(&mut b, t0, 1);
        }
        let t1 = t0 + Duration::from_secs(1);
        assert!(matches!(lose(&mut b, t1, 1), BreakerState::Open { .. }));
        assert_eq!(b.permit_after(t1 + MS, 2), Permit::Probe);
    }

    #[test]
    fn late_outcomes_of_calls_from_before_the_trip_are_ignored() {
        let t0 = Instant::now();
        let mut b = breaker(t0);
        let early = b.permit(t0);
        for _ in 0..5 {
            fail(&mut b, t0);
        }
        let open = b.state();
        assert_eq!(b.record(t0 + MS, early, true), open);
    }
}
