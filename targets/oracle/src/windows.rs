//! Fixed windows aligned to t0: window k of length W is [k·W, (k+1)·W), and a caller is
//! admitted while fewer than N of its requests were admitted in the window the request falls
//! in. Exact by construction: no sliding estimate, no rounding, no clock but the one passed in.
//!
//! Counts are kept per caller and per window length, so a script that switches from
//! `limit 10/1s` to `limit 20/1s` mid-window keeps counting the same window (the second limit
//! sees what the first admitted), while a switch to another length starts that length's own
//! windows. Only admitted requests count: refused ones take nothing from the window.

use std::collections::HashMap;
use std::time::Duration;

use crate::script::Limit;

/// One caller's count in one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Count {
    window: Duration,
    index: u128,
    admitted: u32,
}

impl Count {
    fn ends_at(&self) -> Duration {
        window_end(self.window, self.index)
    }
}

/// Where window `index` of length `window` ends, as time since t0.
fn window_end(window: Duration, index: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let nanos = window.as_nanos().saturating_mul(index + 1);
    // Past u64 seconds only after ~585 billion years of one run.
    let secs = u64::try_from(nanos / NANOS_PER_SEC).unwrap_or(u64::MAX);
    let subsec = u32::try_from(nanos % NANOS_PER_SEC).unwrap_or(0);
    Duration::new(secs, subsec)
}

/// The counts of every caller seen.
#[derive(Debug, Default)]
pub struct FixedWindows {
    /// A caller's counts in windows that have not ended yet (ended ones are pruned on its
    /// next request): at most one per window length the script uses.
    callers: HashMap<String, Vec<Count>>,
}

impl FixedWindows {
    /// Admits `caller`'s request at `t` under `limit`, or says how long until its window ends.
    /// Callers must pass non-decreasing times: a count is pruned once its window has ended.
    pub fn admit(&mut self, t: Duration, caller: &str, limit: Limit) -> Result<(), Duration> {
        let index = t.as_nanos() / limit.window.as_nanos();
        let counts = match self.callers.get_mut(caller) {
            Some(counts) => counts,
            None => self.callers.entry(caller.to_owned()).or_default(),
        };
        counts.retain(|c| c.ends_at() > t);
        let count = match counts.iter_mut().find(|c| c.window == limit.window) {
            Some(count) => count,
            None => {
                counts.push(Count {
                    window: limit.window,
                    index,
                    admitted: 0,
                });
                // Just pushed: the last element is there.
                let last = counts.len() - 1;
                &mut counts[last]
            }
        };
        if count.admitted < limit.admits {
            count.admitted += 1;
            Ok(())
        } else {
            Err(count.ends_at() - t)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn limit(admits: u32, window_ms: u64) -> Limit {
        Limit {
            admits,
            window: ms(window_ms),
        }
    }

    /// Admitted requests out of one request per millisecond from `from_ms` to `to_ms`.
    fn admitted(
        windows: &mut FixedWindows,
        caller: &str,
        from_ms: u64,
        to_ms: u64,
        l: Limit,
    ) -> usize {
        (from_ms..to_ms)
            .filter(|&t| windows.admit(ms(t), caller, l).is_ok())
            .count()
    }

    #[test]
    fn exactly_n_per_window_per_caller() {
        let mut w = FixedWindows::default();
        let l = limit(10, 1000);
        assert_eq!(admitted(&mut w, "a", 0, 1000, l), 10);
        assert_eq!(admitted(&mut w, "a", 1000, 3000, l), 20);
        assert_eq!(
            admitted(&mut w, "b", 500, 1500, l),
            20,
            "10 in [0,1), 10 in [1,2)"
        );
    }

    #[test]
    fn windows_are_aligned_to_t0_and_half_open() {
        let mut w = FixedWindows::default();
        let l = limit(1, 1000);
        assert!(w.admit(ms(999), "a", l).is_ok());
        assert_eq!(
            w.admit(Duration::from_nanos(999_999_999), "a", l),
            Err(Duration::from_nanos(1))
        );
        assert!(
            w.admit(ms(1000), "a", l).is_ok(),
            "window 1 starts at 1 s exactly"
        );
    }

    #[test]
    fn a_refusal_says_how_long_until_the_window_ends() {
        let mut w = FixedWindows::default();
        let l = limit(1, 500);
        assert!(w.admit(ms(1200), "a", l).is_ok());
        assert_eq!(w.admit(ms(1300), "a", l), Err(ms(200)));
    }

    #[test]
    fn refusals_take_nothing_from_the_window() {
        let mut w = FixedWindows::default();
        let l = limit(2, 1000);
        assert_eq!(admitted(&mut w, "a", 0, 900, l), 2);
        assert!(
            w.admit(ms(950), "a", limit(3, 1000)).is_ok(),
            "two admitted, not 900"
        );
    }

    #[test]
    fn a_new_limit_of_the_same_window_length_keeps_counting_the_window() {
        let mut w = FixedWindows::default();
        assert_eq!(admitted(&mut w, "a", 0, 500, limit(10, 1000)), 10);
        assert_eq!(admitted(&mut w, "a", 500, 1000, limit(15, 1000)), 5);
    }

    #[test]
    fn another_window_length_counts_its_own_windows() {
        let mut w = FixedWindows::default();
        assert_eq!(admitted(&mut w, "a", 0, 500, limit(10, 1000)), 10);
        assert_eq!(admitted(&mut w, "a", 500, 700, limit(2, 100)), 4);
        assert_eq!(
            admitted(&mut w, "a", 700, 1000, limit(10, 1000)),
            0,
            "still window 0's ten"
        );
    }

    #[test]
    fn a_limit_of_zero_refuses_everything() {
        let mut w = FixedWindows::default();
        assert_eq!(admitted(&mut w, "a", 0, 3000, limit(0, 1000)), 0);
    }

    #[test]
    fn ended_windows_are_pruned() {
        let mut w = FixedWindows::default();
        for k in 0..100 {
            w.admit(ms(k * 1000), "a", limit(1, 1000)).unwrap();
        }
        assert_eq!(w.callers["a"].len(), 1);
    }
}
