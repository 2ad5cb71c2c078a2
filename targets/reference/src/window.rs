//! The sliding-window counter of seed 000 as pure arithmetic.
//!
//! `scripts/sliding_window.lua` runs the same arithmetic inside Redis; this twin serves the
//! local fallback (so local share and the store agree on what "the limit" means) and lets the
//! maths be proven with a controllable clock instead of a live Redis `TIME`.

/// One caller's counters: the window last seen and the counts of it and the one before.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SlidingWindow {
    window: Option<i64>,
    current: u64,
    previous: u64,
}

/// The outcome of one check, with what the response headers need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub allowed: bool,
    /// Requests still admissible right now, after this one.
    pub remaining: u64,
    /// Seconds until the limiter would admit another request if no more arrive.
    pub retry_after_s: f64,
    /// Seconds until more than `remaining` would be admissible if no more arrive: draft 11's
    /// effective window `t` (a sliding estimate decays; it does not empty at the window's end).
    pub more_in_s: f64,
}

impl SlidingWindow {
    /// Decides one request at `now_s` (seconds on any clock that only moves forward).
    ///
    /// The estimate weights the previous window's count by how much of it still overlaps the
    /// trailing interval: `previous * (1 - pos) + current`, admitted while `estimate < limit`.
    ///
    /// Seed 000 admits while `estimate + 1 <= limit`, which never admits the limit itself to a
    /// caller above it: the previous window's weight is never quite zero before the window
    /// ends, so a saturating caller gets `limit − 1` a window (49 of 50). Below the limit the
    /// two rules agree; a window never holds more than `limit` either way.
    pub fn check(&mut self, now_s: f64, limit: f64, window_s: f64) -> Verdict {
        // A decision that reached the counter after one of the next window (threads take the
        // time before the lock) counts at that window's start rather than resetting it.
        let w = ((now_s / window_s).floor() as i64).max(self.window.unwrap_or(i64::MIN));
        let elapsed = (now_s - w as f64 * window_s).max(0.0);
        let pos = elapsed / window_s;
        match self.window {
            Some(seen) if seen == w => {}
            Some(seen) if seen == w - 1 => {
                self.previous = self.current;
                self.current = 0;
            }
            // Idle for two windows or more, or never seen.
            _ => {
                self.previous = 0;
                self.current = 0;
            }
        }
        self.window = Some(w);
        let estimate = self.previous as f64 * (1.0 - pos) + self.current as f64;
        let allowed = estimate < limit;
        if allowed {
            self.current += 1;
        }
        let estimate_after = self.previous as f64 * (1.0 - pos) + self.current as f64;
        let remaining = (limit - estimate_after).floor().max(0.0) as u64;
        let (previous, current) = (self.previous as f64, self.current as f64);
        let retry_after_s = if allowed {
            0.0
        } else {
            retry_after(previous, current, pos, limit, window_s)
        };
        Verdict {
            allowed,
            remaining,
            retry_after_s,
            more_in_s: more_in(previous, current, pos, (limit, remaining), window_s),
        }
    }
}

/// How long until `estimate < limit` holds again, assuming nothing else is admitted.
fn retry_after(previous: f64, current: f64, pos: f64, limit: f64, window_s: f64) -> f64 {
    if limit <= 0.0 {
        // A limit of nothing never admits; say "one window" rather than infinity.
        window_s
    } else if current < limit {
        // The previous window's weight must decay: need previous * (1 - p) < limit - current.
        let target_pos = 1.0 - (limit - current) / previous;
        ((target_pos - pos) * window_s).max(0.0)
    } else {
        // This window is full: wait for the next, then for its weight on this one to decay.
        let next_pos = (1.0 - limit / current).max(0.0);
        (1.0 - pos) * window_s + next_pos * window_s
    }
}

/// How long until the estimate falls to `limit − remaining − 1`, so that one more than
/// `remaining` fits, assuming nothing else is admitted: it decays by `previous` over the rest of
/// this window, then by `current` over the next (the same arithmetic as the Lua script).
fn more_in(
    previous: f64,
    current: f64,
    pos: f64,
    (limit, remaining): (f64, u64),
    window_s: f64,
) -> f64 {
    let estimate = previous * (1.0 - pos) + current;
    let to_fall = estimate - (limit - remaining as f64 - 1.0);
    let this_window = previous * (1.0 - pos);
    if to_fall <= 0.0 {
        0.0
    } else if to_fall <= this_window {
        to_fall / previous * window_s
    } else {
        let rest = to_fall - this_window;
        let reset = (1.0 - pos) * window_s;
        if rest <= current {
            reset + rest / current * window_s
        } else {
            // Two windows on, the estimate is nothing.
            reset + window_s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn admit_n(w: &mut SlidingWindow, at: f64, n: usize, limit: f64, window: f64) -> usize {
        (0..n)
            .filter(|_| w.check(at, limit, window).allowed)
            .count()
    }

    #[test]
    fn seed_000_worked_example_at_19_0_and_20_5_seconds() {
        // Limit 10 in a 10 s window. Window 0 saw 8 requests, window 1 has 5 so far.
        let mut w = SlidingWindow::default();
        assert_eq!(admit_n(&mut w, 5.0, 8, 10.0, 10.0), 8);
        assert_eq!(admit_n(&mut w, 15.0, 5, 10.0, 10.0), 5);

        // At 19.0 s we are 90 % through window 1: estimate = 8 × 0.1 + 5 = 5.8 < 10.
        let v = w.check(19.0, 10.0, 10.0);
        assert!(v.allowed);
        assert_eq!(w.current, 6);
        assert_eq!(v.remaining, 3, "10 - (0.8 + 6) = 3.2, floored");
        // A fourth fits once the estimate is 6: window 0's 0.8 has decayed, at 20.0 s.
        assert!((v.more_in_s - 1.0).abs() < 1e-9, "{v:?}");

        // At 20.5 s window 2 began: current (6) moves into previous, 5 % of the way in the
        // estimate is 6 × 0.95 = 5.7, so this request is admitted too.
        let v = w.check(20.5, 10.0, 10.0);
        assert!(v.allowed);
        assert_eq!((w.previous, w.current), (6, 1));
        assert_eq!(v.remaining, 3, "10 - (5.7 + 1) = 3.3, floored");
        // Not at the window's end: 6.7 must fall to 6, by window 1's 6 decaying 0.7 of it.
        assert!((v.more_in_s - 0.7 / 6.0 * 10.0).abs() < 1e-9, "{v:?}");
        // Four more fit (estimates 6.7, 7.7, 8.7, 9.7 < 10); a fifth would see 10.7.
        assert_eq!(admit_n(&mut w, 20.5, 5, 10.0, 10.0), 4);
    }

    #[test]
    fn a_late_decision_of_the_window_before_counts_in_the_next_one() {
        let mut w = SlidingWindow::default();
        assert_eq!(admit_n(&mut w, 1.5, 3, 3.0, 1.0), 3);
        // At 1.4 s, after the 1.5 s ones: window 1 is full, not reset.
        assert!(!w.check(1.4, 3.0, 1.0).allowed);
    }

    #[test]
    fn idle_for_two_windows_forgets_everything() {
        let mut w = SlidingWindow::default();
        assert_eq!(admit_n(&mut w, 0.5, 20, 10.0, 1.0), 10);
        assert_eq!(admit_n(&mut w, 2.5, 20, 10.0, 1.0), 10);
    }

    #[test]
    fn denial_says_when_the_next_request_would_fit() {
        let mut w = SlidingWindow::default();
        admit_n(&mut w, 0.0, 10, 10.0, 10.0);
        let v = w.check(4.0, 10.0, 10.0);
        assert!(!v.allowed);
        // Window 0 is full: wait 6 s for window 1, then until 10 × (1 - p) < 10: at once.
        assert!((v.retry_after_s - 6.0).abs() < 1e-9, "{v:?}");
        let mut probe = w;
        assert!(
            !probe
                .check(4.0 + v.retry_after_s - 0.01, 10.0, 10.0)
                .allowed
        );
        assert!(w.check(4.0 + v.retry_after_s + 1e-6, 10.0, 10.0).allowed);
    }

    #[test]
    fn a_caller_above_the_limit_is_admitted_the_limit_in_every_window() {
        // 120 a second, uniform, limit 50: seed 000's rule admits 49 a window.
        let mut w = SlidingWindow::default();
        let mut per_window = [0u32; 10];
        for i in 0..1200 {
            let t = f64::from(i) / 120.0;
            if w.check(t, 50.0, 1.0).allowed {
                per_window[t.floor() as usize] += 1;
            }
        }
        assert_eq!(per_window, [50; 10]);
    }

    fn arrivals() -> impl Strategy<Value = Vec<f64>> {
        prop::collection::vec(0.0f64..20.0, 1..400).prop_map(|mut v| {
            v.sort_by(f64::total_cmp);
            v
        })
    }

    fn per_window_counts(admitted: &[f64], window: f64) -> std::collections::HashMap<i64, u64> {
        let mut counts = std::collections::HashMap::new();
        for t in admitted {
            *counts.entry((t / window).floor() as i64).or_insert(0) += 1;
        }
        counts
    }

    proptest! {
        #[test]
        fn a_single_instance_never_admits_more_than_the_limit_in_any_window(
            times in arrivals(), limit in 1u32..40, window in prop::sample::select(vec![0.5, 1.0, 2.0, 10.0]),
        ) {
            let mut w = SlidingWindow::default();
            let admitted: Vec<f64> = times.iter().copied()
                .filter(|&t| w.check(t, f64::from(limit), window).allowed).collect();
            for (_, n) in per_window_counts(&admitted, window) {
                prop_assert!(n <= u64::from(limit));
            }
        }

        #[test]
        fn once_the_effective_window_has_passed_more_than_its_remaining_fits(
            times in arrivals(), limit in 1u32..20, window in prop::sample::select(vec![0.5, 1.0, 2.0]),
        ) {
            let mut w = SlidingWindow::default();
            for t in times {
                let v = w.check(t, f64::from(limit), window);
                let mut later = w;
                let after = later.check(t + v.more_in_s + 1e-6, f64::from(limit), window);
                // One more than `remaining` was available: this one, and `remaining` after it.
                prop_assert!(after.allowed && after.remaining >= v.remaining, "{v:?} then {after:?}");
            }
        }

        #[test]
        fn a_denied_request_is_admitted_once_retry_after_has_passed(
            times in arrivals(), limit in 1u32..20,
        ) {
            let mut w = SlidingWindow::default();
            for t in times {
                let v = w.check(t, f64::from(limit), 1.0);
                if !v.allowed {
                    let mut later = w;
                    prop_assert!(later.check(t + v.retry_after_s + 1e-6, f64::from(limit), 1.0).allowed);
                }
            }
        }
    }
}
