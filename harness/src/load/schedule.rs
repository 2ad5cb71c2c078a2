//! Arrival schedules: when each request of one target × tenant is due, as offsets from the
//! run's start.
//!
//! A schedule is an iterator, generated as the run goes: a run of hours at 20,000 req/s holds
//! one generator per stream, never a list of its requests.
//!
//! Every target × tenant has its own random stream, so adding a tenant or a target does not
//! move anyone else's arrivals. The streams come from ChaCha8 (`rand_chacha`): the run's seed
//! is the key (expanded to 256 bits by `seed_from_u64`) and `(target, tenant)` selects one of
//! ChaCha's 2⁶⁴ independent streams with `set_stream`, which is what the cipher's stream
//! parameter is for; no hashing of indices is involved.
//!
//! - Uniform: `phase + i / rate` for i = 0, 1, 2…, with `phase` drawn once from the stream in
//!   [0, 1 / rate), so tenants of equal rate do not all fire at the same instant.
//! - Poisson: cumulative exponential gaps of mean 1 / rate (a Poisson process on [0, duration)).
//!
//! A worker's share ([`Share`]) keeps every N-th arrival of the whole schedule, counted by
//! index: the skipped arrivals are still drawn, so each worker's arrivals are exactly those
//! of one process running the whole schedule.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Poisson};

use super::{Arrival, Role, Share};

/// The arrival offsets of one target × tenant, in non-decreasing order, all below the run's
/// duration.
#[derive(Debug, Clone)]
pub struct Schedule {
    duration: Duration,
    kind: Kind,
    share: Share,
    /// The index of the next arrival of the whole schedule.
    arrival: u64,
}

#[derive(Debug, Clone)]
enum Kind {
    Uniform {
        rate_per_s: f64,
        phase_s: f64,
        next_index: u64,
    },
    Poisson {
        rate_per_s: f64,
        /// Boxed: ChaCha's state is ten times the other variant's size.
        rng: Box<ChaCha8Rng>,
        /// The next arrival, in seconds since the start.
        next_s: f64,
    },
    Done,
}

impl Schedule {
    /// The schedule of `target` × `tenant` for a run of `seed`. A rate that is zero, negative
    /// or not finite schedules nothing (the engine rejects such plans before this).
    pub fn new(
        seed: u64,
        target: usize,
        tenant: usize,
        rate_per_s: f64,
        arrival: Arrival,
        duration: Duration,
    ) -> Self {
        if !(rate_per_s.is_finite() && rate_per_s > 0.0) {
            return Self {
                duration,
                kind: Kind::Done,
                share: Share::WHOLE,
                arrival: 0,
            };
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream_id(target, tenant));
        let kind = match arrival {
            Arrival::Uniform => Kind::Uniform {
                rate_per_s,
                phase_s: rng.random::<f64>() / rate_per_s,
                next_index: 0,
            },
            Arrival::Poisson => {
                let first = exponential_gap_s(&mut rng, rate_per_s);
                Kind::Poisson {
                    rate_per_s,
                    rng: Box::new(rng),
                    next_s: first,
                }
            }
        };
        Self {
            duration,
            kind,
            share: Share::WHOLE,
            arrival: 0,
        }
    }

    /// Only the arrivals of this schedule `role` sends.
    pub fn role(mut self, role: Role) -> Self {
        match role {
            Role::FaultPlayer => self.kind = Kind::Done,
            Role::Sender(share) => self.share = share,
        }
        self
    }
}

/// Distinct for every (target, tenant) a plan can hold: both fit in 32 bits there.
fn stream_id(target: usize, tenant: usize) -> u64 {
    ((target as u64) << 32) ^ (tenant as u64)
}

/// One exponential gap by inversion, not `rand_distr`'s `Exp` (a ziggurat, other draws): a
/// seed's schedules stay what they have always been.
fn exponential_gap_s(rng: &mut ChaCha8Rng, rate_per_s: f64) -> f64 {
    // random() is in [0, 1), so 1 − u is in (0, 1] and its logarithm is finite.
    -(1.0 - rng.random::<f64>()).ln() / rate_per_s
}

impl Iterator for Schedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        loop {
            let offset = self.next_of_all()?;
            let i = self.arrival;
            self.arrival += 1;
            if self.share.takes(i) {
                return Some(offset);
            }
        }
    }
}

impl Schedule {
    /// The index in the whole schedule (every worker's arrivals counted) of the arrival
    /// [`Iterator::next`] last produced: what a drawn caller key is drawn for.
    pub fn last_index(&self) -> u64 {
        self.arrival.saturating_sub(1)
    }

    /// Passes over every arrival of this share due before `until` without producing them, and
    /// returns how many there were: the backlog of a generator that fell too far behind, and
    /// the arrivals a cancelled run never sent, counted in time independent of the rate.
    ///
    /// Uniform arrivals are skipped by index arithmetic, exactly. Poisson arrivals are skipped
    /// by drawing how many fall in the gap (a Poisson count) and where the next one falls
    /// after it (the process is memoryless): the same distribution as drawing them one by one,
    /// not the same draws, so a worker that skipped mid-run no longer splits the schedule
    /// exactly as the others do (a run that dropped its backlog is untrusted anyway), and a
    /// cancelled run's count of the requests it never sent is a draw, not the exact count.
    pub fn skip_until(&mut self, until: Duration) -> u64 {
        let until_s = until.min(self.duration).as_secs_f64();
        let whole = match &mut self.kind {
            Kind::Done => return 0,
            Kind::Uniform {
                rate_per_s,
                phase_s,
                next_index,
            } => {
                let at = |i: u64| *phase_s + i as f64 / *rate_per_s;
                // The estimate, then corrected against the rounding of `at` itself.
                let mut end = ((until_s - *phase_s) * *rate_per_s).ceil().max(0.0) as u64;
                end = end.max(*next_index);
                while at(end) < until_s {
                    end += 1;
                }
                while end > *next_index && at(end - 1) >= until_s {
                    end -= 1;
                }
                let skipped = end - *next_index;
                *next_index = end;
                skipped
            }
            Kind::Poisson {
                rate_per_s,
                rng,
                next_s,
            } => {
                if *next_s >= until_s {
                    0
                } else {
                    let mean = *rate_per_s * (until_s - *next_s);
                    // Beyond what Poisson::new takes (~10¹⁹, unreachable under the rate cap)
                    // the mean itself is as good a count.
                    let more = Poisson::new(mean).map_or(mean, |p| p.sample(rng.as_mut()));
                    *next_s = until_s + exponential_gap_s(rng, *rate_per_s);
                    1 + more as u64
                }
            }
        };
        let first = self.arrival;
        self.arrival += whole;
        if until >= self.duration {
            self.kind = Kind::Done;
        }
        self.share.count_in(first, self.arrival)
    }

    /// The next arrival of the whole schedule, whoever's share it is.
    fn next_of_all(&mut self) -> Option<Duration> {
        let offset_s = match &mut self.kind {
            Kind::Done => return None,
            Kind::Uniform {
                rate_per_s,
                phase_s,
                next_index,
            } => {
                // From the index, not by adding periods: no rounding error builds up.
                let at = *phase_s + *next_index as f64 / *rate_per_s;
                *next_index += 1;
                at
            }
            Kind::Poisson {
                rate_per_s,
                rng,
                next_s,
            } => {
                let at = *next_s;
                *next_s += exponential_gap_s(rng, *rate_per_s);
                at
            }
        };
        // try_from fails only past ~10¹¹ years, which is past any duration as well.
        match Duration::try_from_secs_f64(offset_s) {
            Ok(offset) if offset < self.duration => Some(offset),
            _ => {
                self.kind = Kind::Done;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn skipping_poisson_arrivals_draws_the_count_of_the_gap_and_resumes_after_it() {
        let rate = 2_000_000.0;
        let duration = Duration::from_secs(30);
        let until = Duration::from_secs(10);
        let mut schedule = Schedule::new(7, 0, 0, rate, Arrival::Poisson, duration);
        let started = std::time::Instant::now();
        let skipped = schedule.skip_until(until) as f64;
        // Twenty million arrivals, passed over at once: one by one takes many seconds here.
        assert!(started.elapsed() < Duration::from_secs(1));
        let mean = rate * until.as_secs_f64();
        assert!(
            (skipped - mean).abs() < 6.0 * mean.sqrt(),
            "{skipped} skipped, mean {mean}"
        );
        let next = schedule.next().unwrap();
        assert!(next >= until);
        // Past the end: the rest, and nothing after.
        let rest = schedule.skip_until(duration * 2) as f64;
        let mean = rate * (duration - next).as_secs_f64();
        assert!(
            (rest - mean).abs() < 6.0 * mean.sqrt(),
            "{rest} skipped, mean {mean}"
        );
        assert_eq!(schedule.next(), None);
    }

    fn offsets(seed: u64, rate: f64, arrival: Arrival, duration: Duration) -> Vec<Duration> {
        Schedule::new(seed, 0, 0, rate, arrival, duration).collect()
    }

    fn arrival() -> impl Strategy<Value = Arrival> {
        prop_oneof![Just(Arrival::Uniform), Just(Arrival::Poisson)]
    }

    proptest! {
        #[test]
        fn skipping_uniform_arrivals_counts_exactly_those_a_share_would_have_sent_and_goes_on_after(
            seed: u64,
            rate in 0.5f64..200_000.0,
            until_ms in 0u64..3_000,
            count in 1u32..4,
            index in 0u32..4,
        ) {
            let share = Share::new(index % count + 1, count).unwrap();
            let duration = Duration::from_secs(2);
            let until = Duration::from_millis(until_ms);
            let make = || {
                Schedule::new(seed, 0, 1, rate, Arrival::Uniform, duration)
                    .role(Role::Sender(share))
            };
            let all: Vec<Duration> = make().collect();
            let mut skipping = make();
            let skipped = skipping.skip_until(until);
            let before = all.iter().filter(|&&o| o < until).count();
            prop_assert_eq!(skipped, before as u64);
            let rest: Vec<Duration> = skipping.collect();
            prop_assert_eq!(&rest[..], &all[before..]);
        }

        #[test]
        fn uniform_count_over_the_run_is_rate_times_duration_within_one(
            seed: u64,
            rate in 0.01f64..50_000.0,
            duration_ms in 1u64..20_000,
        ) {
            let duration = Duration::from_millis(duration_ms);
            let count = Schedule::new(seed, 1, 2, rate, Arrival::Uniform, duration).count() as f64;
            let expected = (rate * duration.as_secs_f64()).floor();
            prop_assert!((count - expected).abs() <= 1.0, "{count} arrivals, expected {expected}");
        }

        #[test]
        fn offsets_never_decrease_and_stay_below_the_duration(
            seed: u64,
            rate in 0.01f64..20_000.0,
            arrival in arrival(),
            duration_ms in 1u64..5_000,
        ) {
            let duration = Duration::from_millis(duration_ms);
            let all = offsets(seed, rate, arrival, duration);
            prop_assert!(all.windows(2).all(|w| w[0] <= w[1]));
            prop_assert!(all.iter().all(|&o| o < duration));
        }

        #[test]
        fn poisson_count_over_a_long_run_is_within_six_sigma_of_rate_times_duration(
            seed: u64,
            rate in 10.0f64..5_000.0,
            tenant in 0usize..1_000,
        ) {
            // λT ≥ 20,000 arrivals: the count is Poisson(λT), so six standard deviations
            // bound it with a false alarm once in ~10⁹ cases.
            let duration = Duration::from_secs_f64(20_000.0 / rate);
            let count = Schedule::new(seed, 0, tenant, rate, Arrival::Poisson, duration).count();
            let mean = rate * duration.as_secs_f64();
            prop_assert!(
                (count as f64 - mean).abs() <= 6.0 * mean.sqrt(),
                "{count} arrivals, expected {mean:.0} ± {:.0}", 6.0 * mean.sqrt()
            );
        }

        #[test]
        fn the_same_seed_gives_the_same_schedule(
            seed: u64,
            rate in 1.0f64..10_000.0,
            arrival in arrival(),
        ) {
            let duration = Duration::from_secs(1);
            prop_assert_eq!(offsets(seed, rate, arrival, duration), offsets(seed, rate, arrival, duration));
        }

        #[test]
        fn a_different_seed_gives_a_different_schedule(
            seed: u64,
            other: u64,
            rate in 1.0f64..10_000.0,
            arrival in arrival(),
        ) {
            prop_assume!(seed != other);
            let duration = Duration::from_secs(2);
            prop_assert_ne!(offsets(seed, rate, arrival, duration), offsets(other, rate, arrival, duration));
        }
    }

    proptest! {
        #[test]
        fn the_shares_of_n_workers_are_the_whole_schedule_each_arrival_once(
            seed: u64,
            rate in 1.0f64..5_000.0,
            arrival in arrival(),
            count in 1u32..6,
        ) {
            let duration = Duration::from_millis(1_500);
            let whole = offsets(seed, rate, arrival, duration);
            let shares: Vec<Vec<Duration>> = (1..=count)
                .map(|index| {
                    Schedule::new(seed, 0, 0, rate, arrival, duration)
                        .role(Role::Sender(Share::new(index, count).unwrap()))
                        .collect()
                })
                .collect();
            // Arrival i is worker (i mod N) + 1's, at the same offset as in the whole.
            for (i, offset) in whole.iter().enumerate() {
                let k = i % count as usize;
                prop_assert_eq!(shares[k][i / count as usize], *offset);
            }
            prop_assert_eq!(shares.iter().map(Vec::len).sum::<usize>(), whole.len());
        }
    }

    #[test]
    fn a_fault_player_sends_nothing() {
        let none: Vec<Duration> =
            Schedule::new(1, 0, 0, 100.0, Arrival::Poisson, Duration::from_secs(1))
                .role(Role::FaultPlayer)
                .collect();
        assert!(none.is_empty());
    }

    #[test]
    fn worker_k_of_n_parses_and_nonsense_is_refused() {
        assert_eq!("2/3".parse::<Share>(), Ok(Share::new(2, 3).unwrap()));
        for bad in ["0/3", "4/3", "3", "a/b", "1/0", ""] {
            assert!(bad.parse::<Share>().is_err(), "{bad}");
        }
    }

    #[test]
    fn each_target_and_tenant_has_its_own_stream() {
        let duration = Duration::from_secs(1);
        let of = |target, tenant| -> Vec<Duration> {
            Schedule::new(7, target, tenant, 100.0, Arrival::Poisson, duration).collect()
        };
        assert_ne!(of(0, 0), of(0, 1));
        assert_ne!(of(0, 0), of(1, 0));
        assert_ne!(of(0, 1), of(1, 0));
    }

    #[test]
    fn uniform_arrivals_are_exactly_one_period_apart() {
        let all = offsets(3, 1_000.0, Arrival::Uniform, Duration::from_secs(1));
        let period = Duration::from_millis(1);
        for w in all.windows(2) {
            let gap = w[1] - w[0];
            assert!(
                gap.abs_diff(period) <= Duration::from_nanos(1),
                "gap {gap:?}"
            );
        }
    }

    #[test]
    fn a_zero_or_invalid_rate_schedules_nothing() {
        // Typed: with the `docker` feature, the `time` crate adds a second `PartialEq` for
        // `Duration`, and an untyped `vec![]` no longer infers.
        let nothing: Vec<Duration> = Vec::new();
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(
                offsets(1, rate, Arrival::Poisson, Duration::from_secs(1)),
                nothing
            );
            assert_eq!(
                offsets(1, rate, Arrival::Uniform, Duration::from_secs(1)),
                nothing
            );
        }
    }
}
