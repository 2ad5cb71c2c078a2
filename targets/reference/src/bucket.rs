//! The token bucket of seed 004 as pure arithmetic.
//!
//! `scripts/token_bucket.lua` computes the same refill inside Redis; this twin serves the local
//! fallback for token-bucket routes and is proven here with a controllable clock.

/// A bucket of `capacity` tokens refilled at `capacity / window` per second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TokenBucket {
    /// `None` until the first request: a new caller starts with a full bucket.
    state: Option<(f64, f64)>,
}

pub use crate::window::Verdict;

impl TokenBucket {
    /// Decides one request at `now_s`; `capacity` is the limit per `window_s`.
    pub fn check(&mut self, now_s: f64, capacity: f64, window_s: f64) -> Verdict {
        let rate = capacity / window_s;
        let tokens = match self.state {
            // A clock that stepped back refills nothing rather than draining the bucket.
            Some((tokens, at)) => (tokens + (now_s - at).max(0.0) * rate).min(capacity),
            None => capacity,
        };
        let allowed = tokens >= 1.0;
        let tokens = if allowed { tokens - 1.0 } else { tokens };
        self.state = Some((tokens, now_s));
        let remaining = tokens.floor().max(0.0);
        Verdict {
            allowed,
            remaining: remaining as u64,
            retry_after_s: if allowed { 0.0 } else { (1.0 - tokens) / rate },
            // The next whole token: a bucket refills steadily, not all at once.
            more_in_s: (remaining + 1.0 - tokens) / rate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_new_caller_gets_a_full_burst_then_the_refill_rate() {
        let mut b = TokenBucket::default();
        let burst = (0..20).filter(|_| b.check(0.0, 10.0, 1.0).allowed).count();
        assert_eq!(burst, 10);
        let v = b.check(0.0, 10.0, 1.0);
        assert!(!v.allowed);
        assert!(
            (v.retry_after_s - 0.1).abs() < 1e-9,
            "one token every 100 ms"
        );
        assert!(b.check(0.1, 10.0, 1.0).allowed);
        assert!(!b.check(0.1, 10.0, 1.0).allowed);
    }

    #[test]
    fn refill_never_exceeds_capacity() {
        let mut b = TokenBucket::default();
        b.check(0.0, 5.0, 1.0);
        let burst = (0..20).filter(|_| b.check(100.0, 5.0, 1.0).allowed).count();
        assert_eq!(burst, 5);
    }

    proptest! {
        #[test]
        fn admissions_over_any_interval_stay_within_burst_plus_refill(
            mut times in prop::collection::vec(0.0f64..10.0, 1..300),
            capacity in 1u32..30, window in prop::sample::select(vec![0.5, 1.0, 5.0]),
        ) {
            times.sort_by(f64::total_cmp);
            let capacity = f64::from(capacity);
            let mut b = TokenBucket::default();
            let admitted: Vec<f64> = times.into_iter().filter(|&t| b.check(t, capacity, window).allowed).collect();
            for (i, start) in admitted.iter().enumerate() {
                for (j, end) in admitted.iter().enumerate().skip(i) {
                    let bound = capacity + (end - start) * capacity / window;
                    prop_assert!((j - i + 1) as f64 <= bound + 1e-9);
                }
            }
        }
    }
}
