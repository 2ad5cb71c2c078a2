//! How a run's streams (target × tenant schedules) are split over sender threads.
//!
//! One sender thread paces every stream up to [`SHARD_ABOVE_PER_S`]; above it the streams are
//! split over one thread per core, each with its own timer, runtime and connection pools, so
//! that one thread's wake-ups and HTTP work no longer bound the whole schedule. A stream is
//! never split: its arrivals, round robin and client state stay on one thread, so a run's
//! requests are the same whatever the number of senders. Below the threshold one thread is
//! cheaper: every sender wakes for its own due instants, and on a 2-core machine that shares
//! its cores with the targets, a wake-up costs more CPU than the exchange it sends. Measured
//! with `just bench-loadgen --senders N` (2026-12-05, `docs/load-engine.md`): one sender held
//! 20,000 req/s at 11.9–12.0 µs of CPU a request where two needed 19.0–20.4 µs, and at 40,000
//! it needed 10.0–10.1 µs where two needed 15.5–16.4; each of two senders wakes on its own
//! quantum for half the requests. The threshold was 10,000 while a request cost three times
//! as much (2026-12-01).

use std::num::NonZeroUsize;

/// Above this total rate (requests a second this process sends) [`Senders::Auto`] uses more
/// than one sender thread.
pub const SHARD_ABOVE_PER_S: f64 = 40_000.0;

/// How many sender threads share a run's schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Senders {
    /// One up to [`SHARD_ABOVE_PER_S`], else one per core, at most one per stream.
    #[default]
    Auto,
    /// This many, at most one per stream.
    Fixed(NonZeroUsize),
}

impl Senders {
    /// The sender threads for streams of these rates (requests a second, this process's).
    pub fn count(self, rates: &[f64]) -> usize {
        let wanted = match self {
            Self::Fixed(n) => n.get(),
            Self::Auto if rates.iter().sum::<f64>() > SHARD_ABOVE_PER_S => {
                std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
            }
            Self::Auto => 1,
        };
        wanted.clamp(1, rates.len().max(1))
    }
}

/// Splits streams of `rates` over `senders` threads, each thread's total as even as whole
/// streams allow: the largest stream first, each to the thread with the least so far (the
/// longest-processing-time rule, within 4/3 of the best split). Every stream is in exactly one
/// thread; a thread's streams are in their original order.
pub fn assign(rates: &[f64], senders: usize) -> Vec<Vec<usize>> {
    let senders = senders.clamp(1, rates.len().max(1));
    let mut order: Vec<usize> = (0..rates.len()).collect();
    order.sort_by(|&a, &b| rates[b].total_cmp(&rates[a]).then(a.cmp(&b)));
    let mut load = vec![0.0_f64; senders];
    let mut threads = vec![Vec::new(); senders];
    for i in order {
        let least = (0..senders)
            .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
            .unwrap_or(0);
        load[least] += rates[i];
        threads[least].push(i);
    }
    for streams in &mut threads {
        streams.sort_unstable();
    }
    threads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(n: usize) -> Senders {
        Senders::Fixed(NonZeroUsize::new(n).unwrap())
    }

    #[test]
    fn every_stream_goes_to_exactly_one_sender_and_the_totals_are_even() {
        let rates = [30_000.0, 10_000.0, 10_000.0, 5_000.0, 5_000.0, 100.0];
        let threads = assign(&rates, 2);
        let mut all: Vec<usize> = threads.concat();
        all.sort_unstable();
        assert_eq!(all, (0..rates.len()).collect::<Vec<_>>());
        let mut totals: Vec<f64> = threads
            .iter()
            .map(|t| t.iter().map(|&i| rates[i]).sum())
            .collect();
        totals.sort_by(f64::total_cmp);
        assert_eq!(totals, vec![30_000.0, 30_100.0], "the best split there is");
    }

    #[test]
    fn a_stream_is_never_split_so_there_are_never_more_senders_than_streams() {
        assert_eq!(assign(&[1.0, 2.0], 8).len(), 2);
        assert_eq!(fixed(8).count(&[1.0, 2.0]), 2);
        assert_eq!(assign(&[], 4), vec![Vec::<usize>::new()]);
    }

    #[test]
    fn auto_uses_one_sender_up_to_the_threshold_and_one_per_core_above() {
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        let half = SHARD_ABOVE_PER_S / 2.0;
        assert_eq!(Senders::Auto.count(&[half; 2]), 1);
        let above = [half + 1.0, half, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        assert_eq!(Senders::Auto.count(&above), cores.min(above.len()));
        assert_eq!(fixed(3).count(&[1.0; 5]), 3);
    }
}
