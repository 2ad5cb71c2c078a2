//! Each instance's whole-request budget per window while the store is away: instance k of n
//! gets `b_k(w) = ⌊((w+1)·L + k) / n⌋ − ⌊(w·L + k) / n⌋` of the limit L in window w.
//!
//! By Hermite's identity (Σ_k ⌊(m + k) / n⌋ = m for any integer m), the n budgets add up to
//! exactly L in every window, and each instance's averages L ÷ n over n windows: no request is
//! lost to rounding (12 + 12 + 12 + 12 = 48 of 50 with a share of 12.5 each), and a share below
//! one request (a limit of 3 on 4 instances) still admits 3 a window between them, the
//! instances taking turns. Windows are numbered on the wall clock, which the instances of one
//! fleet share to within their clocks' skew; the rank k comes with the live count.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Instance `rank`'s budget of `limit` in window `w` when `instances` share it. A rank of n or
/// more counts as rank mod n: an instance that joined during an outage, with a stale count,
/// shares an old instance's turns (and the fleet admits more than the limit, as it must when
/// no one can count the newcomers).
pub fn budget(limit: u32, instances: u32, rank: u32, w: u64) -> u64 {
    let n = u128::from(instances.max(1));
    let (limit, k, w) = (u128::from(limit), u128::from(rank) % n, u128::from(w));
    let upto = |w: u128| (w * limit + k) / n;
    // Below u64: each window's budget is at most the limit.
    (upto(w + 1) - upto(w)) as u64
}

/// The window `at` falls in, counted from the epoch, and how far into it `at` is.
pub fn window_at(at: SystemTime, window: Duration) -> (u64, Duration) {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let length = window.as_nanos().max(1);
    let nanos = since.as_nanos();
    let w = nanos / length;
    let into = nanos - w * length;
    (
        u64::try_from(w).unwrap_or(u64::MAX),
        Duration::from_nanos(u64::try_from(into).unwrap_or(0)),
    )
}

/// The first window that starts `at_least` after `now` or later, and how long from `now` until
/// it starts.
pub fn first_window_after(
    now: SystemTime,
    at_least: Duration,
    window: Duration,
) -> (u64, Duration) {
    let (later, into) = window_at(now.checked_add(at_least).unwrap_or(now), window);
    let (w, into_now) = window_at(now, window);
    let first = if into.is_zero() { later } else { later + 1 };
    let windows = u32::try_from(first - w).unwrap_or(u32::MAX);
    (
        first,
        window.saturating_mul(windows).saturating_sub(into_now),
    )
}

/// The first window from `w` on in which `rank` has a budget, if it has one within `instances`
/// windows (it always has, for a limit of at least 1).
pub fn next_turn(limit: u32, instances: u32, rank: u32, w: u64) -> Option<u64> {
    (w..w + u64::from(instances.max(1))).find(|&v| budget(limit, instances, rank, v) > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn four_instances_share_fifty_as_two_thirteens_and_two_twelves_every_window() {
        for w in 0..8 {
            let mut b: Vec<u64> = (0..4).map(|k| budget(50, 4, k, w)).collect();
            assert_eq!(b.iter().sum::<u64>(), 50, "window {w}");
            b.sort_unstable();
            assert_eq!(b, [12, 12, 13, 13], "window {w}");
        }
        // Each instance's own average is 12.5.
        let four: u64 = (0..4).map(|w| budget(50, 4, 1, w)).sum();
        assert_eq!(four, 50);
    }

    #[test]
    fn a_share_below_one_request_takes_turns_and_still_admits_the_limit() {
        // 3 on 4 instances: 3 of the 4 admit one each window, in turn.
        for w in 0..12 {
            let b: Vec<u64> = (0..4).map(|k| budget(3, 4, k, w)).collect();
            assert_eq!(b.iter().sum::<u64>(), 3, "window {w}: {b:?}");
            assert!(b.iter().all(|&x| x <= 1), "{b:?}");
        }
        for k in 0..4 {
            let turns: u64 = (0..4).map(|w| budget(3, 4, k, w)).sum();
            assert_eq!(turns, 3, "instance {k} over 4 windows");
            assert!(next_turn(3, 4, k, 0).is_some());
        }
        // 5 a minute on 8 pods.
        let total: u64 = (0..8).map(|k| budget(5, 8, k, 1_000)).sum();
        assert_eq!(total, 5);
    }

    #[test]
    fn a_rank_beyond_the_count_shares_an_old_instances_turns() {
        for w in 0..5 {
            assert_eq!(budget(50, 4, 5, w), budget(50, 4, 1, w));
        }
    }

    #[test]
    fn the_first_window_far_enough_ahead_is_this_ones_next_or_the_one_after() {
        let second = Duration::from_secs(1);
        let half = Duration::from_millis(500);
        let at = |ms| UNIX_EPOCH + Duration::from_millis(ms);
        assert_eq!(
            first_window_after(at(10_200), half, second),
            (11, Duration::from_millis(800))
        );
        assert_eq!(
            first_window_after(at(10_700), half, second),
            (12, Duration::from_millis(1_300))
        );
        // On an edge exactly: that window.
        assert_eq!(first_window_after(at(10_500), half, second), (11, half));
        // Windows shorter than the wait: as many as it takes.
        assert_eq!(
            first_window_after(at(10_010), half, Duration::from_millis(100)),
            (106, Duration::from_millis(590))
        );
    }

    #[test]
    fn windows_are_counted_from_the_epoch() {
        let at = UNIX_EPOCH + Duration::from_millis(10_250);
        assert_eq!(
            window_at(at, Duration::from_secs(1)),
            (10, Duration::from_millis(250))
        );
        assert_eq!(
            window_at(at, Duration::from_millis(500)),
            (20, Duration::from_millis(250))
        );
    }

    proptest! {
        #[test]
        fn the_budgets_add_up_to_the_limit_in_every_window(
            limit in 1u32..100_000,
            instances in 1u32..64,
            w in 0u64..(u64::MAX / 200_000),
        ) {
            let total: u64 = (0..instances).map(|k| budget(limit, instances, k, w)).sum();
            prop_assert_eq!(total, u64::from(limit));
            // And none is more than one above another.
            let b: Vec<u64> = (0..instances).map(|k| budget(limit, instances, k, w)).collect();
            let (lo, hi) = (b.iter().min().unwrap(), b.iter().max().unwrap());
            prop_assert!(hi - lo <= 1);
        }
    }
}
