//! Per-instance counters: the instance's turns of the limit while the store is unavailable
//! (with what the store admitted through it in the same window, counted while it answers), and
//! the whole limit for `local-only` routes. One bounded map per route, keyed by caller
//! (`crate::callers`).

use std::time::{Duration, Instant};

use crate::bucket::TokenBucket;
use crate::callers::ByCaller;
use crate::policy::Algorithm;
use crate::window::{SlidingWindow, Verdict};

#[derive(Debug, Clone, Copy)]
enum Counter {
    Window(SlidingWindow),
    Bucket(TokenBucket),
    /// This instance's admissions in one window, for its budget (`crate::share`).
    Budget(Admissions),
}

/// What one instance admitted of a caller in window `window`: decided by the store, and by its
/// own turns while the store was away (which the store has not counted yet), and its turns of
/// the window before, which the store's sliding estimate weighs too.
#[derive(Debug, Clone, Copy, Default)]
struct Admissions {
    window: u64,
    by_store: u64,
    by_turns: u64,
    turns_before: u64,
}

/// Turns the store has not counted: in the current window and the one before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Uncounted {
    pub now: u64,
    pub before: u64,
    /// The window the carry was read in (that of `now`): the caller's counter may still be
    /// the window before's, whose turns are then `before`, or move on before they are counted.
    pub window: u64,
}

impl Uncounted {
    pub fn any(self) -> bool {
        self.now + self.before > 0
    }
}

#[derive(Debug)]
pub struct Entry {
    counter: Counter,
    last_used: Instant,
}

/// Local counters for every route; the same algorithm as the route uses in Redis.
#[derive(Debug)]
pub struct LocalCounters {
    origin: Instant,
    callers: ByCaller<Entry>,
}

impl LocalCounters {
    pub fn new(callers: ByCaller<Entry>, origin: Instant) -> Self {
        Self { origin, callers }
    }

    /// Decides one request of `caller` on route `route` against `limit` per `window` (a
    /// fraction is fine: 50 / 4 = 12.5).
    pub fn check(
        &self,
        route: usize,
        algorithm: Algorithm,
        caller: &str,
        limit: f64,
        window: Duration,
        now: Instant,
    ) -> Verdict {
        let now_s = now.saturating_duration_since(self.origin).as_secs_f64();
        let window_s = window.as_secs_f64();
        let make = || Entry {
            counter: match algorithm {
                Algorithm::SlidingWindow => Counter::Window(SlidingWindow::default()),
                Algorithm::TokenBucket => Counter::Bucket(TokenBucket::default()),
            },
            last_used: now,
        };
        self.callers.with((route, caller), make, |entry| {
            entry.last_used = now;
            match &mut entry.counter {
                Counter::Window(w) => w.check(now_s, limit, window_s),
                Counter::Bucket(b) => b.check(now_s, limit, window_s),
                // A route decides by one kind of counter; this one was the budget's before.
                Counter::Budget(_) => {
                    let mut w = SlidingWindow::default();
                    let verdict = w.check(now_s, limit, window_s);
                    entry.counter = Counter::Window(w);
                    verdict
                }
            }
        })
    }

    /// Applies `f` to the admissions of `caller` on `route` in window `window` (started from
    /// none in a new window).
    fn with_budget<R>(
        &self,
        (route, caller): (usize, &str),
        window: u64,
        now: Instant,
        f: impl FnOnce(&mut Admissions) -> R,
    ) -> R {
        let fresh = || Entry {
            counter: Counter::Budget(Admissions {
                window,
                ..Admissions::default()
            }),
            last_used: now,
        };
        self.callers.with((route, caller), fresh, |entry| {
            let mut a = match entry.counter {
                // A decision that reached the lock after one of the next window counts in that
                // one: resetting would drop what the next window has admitted.
                Counter::Budget(a) if a.window >= window => a,
                Counter::Budget(a) if a.window + 1 == window => Admissions {
                    window,
                    turns_before: a.by_turns,
                    ..Admissions::default()
                },
                _ => Admissions {
                    window,
                    ..Admissions::default()
                },
            };
            let out = f(&mut a);
            *entry = Entry {
                counter: Counter::Budget(a),
                last_used: now,
            };
            out
        })
    }

    /// Decides one request of `caller` on `route` against `budget`, this instance's whole
    /// requests for window number `window` (`crate::share::budget`), counting what the store
    /// admitted through this instance in that window before it went away: the instances'
    /// budgets less their store admissions add up to what the window has left. Whether it is
    /// admitted, and what is left of the budget after it.
    pub fn check_budget(
        &self,
        route: usize,
        caller: &str,
        (window, budget): (u64, u64),
        now: Instant,
    ) -> (bool, u64) {
        self.with_budget((route, caller), window, now, |a| {
            let allowed = a.by_store + a.by_turns < budget;
            a.by_turns += u64::from(allowed);
            (allowed, budget.saturating_sub(a.by_store + a.by_turns))
        })
    }

    /// The store admitted `caller` on `route` through this instance in window `window`.
    pub fn admitted_by_store(&self, route: usize, caller: &str, window: u64, now: Instant) {
        self.with_budget((route, caller), window, now, |a| a.by_store += 1);
    }

    /// What `caller` was admitted on `route` by this instance's turns in window `window` and
    /// the one before, which the store has not counted.
    pub fn uncounted(&self, route: usize, caller: &str, window: u64) -> Uncounted {
        self.callers.peek((route, caller), |e| {
            uncounted_in(e.map(|e| e.counter), window)
        })
    }

    /// Up to `at_most` callers with turns on `route` in window `window` or the one before that
    /// the store has not counted.
    pub fn all_uncounted(
        &self,
        route: usize,
        window: u64,
        at_most: usize,
    ) -> Vec<(String, Uncounted)> {
        self.callers.find(route, at_most, |caller, e| {
            let u = uncounted_in(Some(e.counter), window);
            u.any().then(|| (caller.to_owned(), u))
        })
    }

    /// The store has counted `carried` of `caller`'s turns on `route`: they count as the
    /// store's now. Turns taken since the carry was read stay to be carried.
    pub fn counted_by_store(&self, route: usize, caller: &str, carried: Uncounted) {
        // Not a use of the caller: the decision that carried them was.
        self.callers.peek_mut((route, caller), |e| {
            if let Some(Entry {
                counter: Counter::Budget(a),
                ..
            }) = e
            {
                if a.window == carried.window {
                    let now = carried.now.min(a.by_turns);
                    a.by_turns -= now;
                    a.by_store += now;
                    a.turns_before = a.turns_before.saturating_sub(carried.before);
                } else if a.window + 1 == carried.window {
                    // Read while the counter was still the window before's: its turns went
                    // as `before`. Left there, every later call would carry them again.
                    let before = carried.before.min(a.by_turns);
                    a.by_turns -= before;
                    a.by_store += before;
                } else if a.window == carried.window + 1 {
                    // The counter moved on since the read: `now` is its window before's.
                    a.turns_before = a.turns_before.saturating_sub(carried.now);
                }
            }
        });
    }

    /// A count of `claimed` (turns of its window, marked counted before the store was asked,
    /// so that no other count could take them too) failed: they are turns to carry again.
    pub fn not_counted_after_all(&self, route: usize, caller: &str, claimed: Uncounted) {
        self.callers.peek_mut((route, caller), |e| {
            if let Some(Entry {
                counter: Counter::Budget(a),
                ..
            }) = e
            {
                if a.window == claimed.window {
                    let back = claimed.now.min(a.by_store);
                    a.by_store -= back;
                    a.by_turns += back;
                } else if a.window == claimed.window + 1 {
                    // The counter moved on since: they are its window before's.
                    a.turns_before += claimed.now;
                }
            }
        });
    }

    /// Forgets the callers of each route idle for longer than `idle(route)`, so memory follows
    /// the active callers.
    pub fn prune(&self, now: Instant, idle: impl Fn(usize) -> Duration) {
        for route in 0..self.callers.routes() {
            let idle = idle(route);
            self.callers
                .prune(route, |e| now.saturating_duration_since(e.last_used) > idle);
        }
    }

    pub fn len(&self) -> usize {
        self.callers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The turns of a budget counter the store has not counted, as of window `window`.
fn uncounted_in(counter: Option<Counter>, window: u64) -> Uncounted {
    match counter {
        Some(Counter::Budget(a)) if a.window == window => Uncounted {
            now: a.by_turns,
            before: a.turns_before,
            window,
        },
        // Its last window is now the one before.
        Some(Counter::Budget(a)) if a.window + 1 == window => Uncounted {
            now: 0,
            before: a.by_turns,
            window,
        },
        _ => Uncounted::default(),
    }
}

/// Callers the store refused recently, per route: what `fail-static` keeps enforcing.
#[derive(Debug)]
pub struct CaughtCallers {
    callers: ByCaller<Instant>,
}

impl CaughtCallers {
    pub fn new(callers: ByCaller<Instant>) -> Self {
        Self { callers }
    }

    pub fn caught(&self, route: usize, caller: &str, now: Instant) {
        self.callers.with((route, caller), || now, |at| *at = now);
    }

    /// Whether the store refused `caller` at or after `since`.
    pub fn caught_since(&self, route: usize, caller: &str, since: Instant) -> bool {
        self.callers
            .peek((route, caller), |at| at.is_some_and(|&at| at >= since))
    }

    pub fn prune(&self, now: Instant, idle: impl Fn(usize) -> Duration) {
        for route in 0..self.callers.routes() {
            let idle = idle(route);
            self.callers
                .prune(route, |at| now.saturating_duration_since(*at) > idle);
        }
    }

    pub fn len(&self) -> usize {
        self.callers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_share_of_a_quarter_admits_a_quarter() {
        let t0 = Instant::now();
        let local = LocalCounters::new(ByCaller::unmetered(1), t0);
        let second = Duration::from_secs(1);
        let admitted = (0..120)
            .filter(|i| {
                let at = t0 + Duration::from_millis(i * 1000 / 120);
                local
                    .check(0, Algorithm::TokenBucket, "acme", 12.5, second, at)
                    .allowed
            })
            .count();
        // A full bucket of 12.5 plus the refill over the second.
        assert!((24..=26).contains(&admitted), "{admitted}");
    }

    #[test]
    fn a_budget_counts_what_the_store_admitted_in_its_window_and_carries_only_its_own_turns() {
        let t0 = Instant::now();
        let local = LocalCounters::new(ByCaller::unmetered(1), t0);
        for _ in 0..5 {
            local.admitted_by_store(0, "acme", 7, t0);
        }
        // The store went away: 13 this window, 5 of them taken already.
        let admitted = (0..20)
            .filter(|_| local.check_budget(0, "acme", (7, 13), t0).0)
            .count();
        assert_eq!(admitted, 8);
        let eight = Uncounted {
            now: 8,
            before: 0,
            window: 7,
        };
        assert_eq!(
            local.uncounted(0, "acme", 7),
            eight,
            "what the store has not counted"
        );
        assert!(!local.check_budget(0, "acme", (7, 13), t0).0, "13 in all");
        // In the next window they are the window before's, and a new budget begins.
        let before_only = local.uncounted(0, "acme", 8);
        assert_eq!(
            before_only,
            Uncounted {
                now: 0,
                before: 8,
                window: 8
            }
        );
        assert!(local.check_budget(0, "acme", (8, 13), t0).0);
        assert_eq!(
            local.uncounted(0, "acme", 8),
            Uncounted {
                now: 1,
                before: 8,
                window: 8
            }
        );
        // Counted by the store: nothing is left to carry, and the budget still counts them;
        // a turn taken after the carry was read stays to be carried.
        let carried = local.uncounted(0, "acme", 8);
        assert!(local.check_budget(0, "acme", (8, 13), t0).0);
        local.counted_by_store(0, "acme", carried);
        let one = Uncounted {
            now: 1,
            before: 0,
            window: 8,
        };
        assert_eq!(local.uncounted(0, "acme", 8), one);
        local.counted_by_store(0, "acme", one);
        assert!(!local.uncounted(0, "acme", 8).any());
        let admitted = (0..20)
            .filter(|_| local.check_budget(0, "acme", (8, 13), t0).0)
            .count();
        assert_eq!(admitted, 11);
    }

    #[test]
    fn a_turn_claimed_for_a_count_that_failed_is_carried_again_in_its_window_or_the_next() {
        let t0 = Instant::now();
        let local = LocalCounters::new(ByCaller::unmetered(1), t0);
        assert!(local.check_budget(0, "acme", (8, 13), t0).0);
        let one = local.uncounted(0, "acme", 8);
        assert_eq!((one.now, one.before), (1, 0));
        local.counted_by_store(0, "acme", one);
        assert!(!local.uncounted(0, "acme", 8).any(), "claimed");
        local.not_counted_after_all(0, "acme", one);
        assert_eq!(local.uncounted(0, "acme", 8), one);
        // Claimed in window 8, failed once the counter is window 9's: the window before's.
        local.counted_by_store(0, "acme", one);
        assert!(local.check_budget(0, "acme", (9, 13), t0).0);
        local.not_counted_after_all(0, "acme", one);
        let u = local.uncounted(0, "acme", 9);
        assert_eq!((u.now, u.before), (1, 1));
    }

    #[test]
    fn turns_carried_as_the_window_befores_while_the_counter_is_still_its_are_carried_once() {
        let t0 = Instant::now();
        let local = LocalCounters::new(ByCaller::unmetered(1), t0);
        for _ in 0..3 {
            assert!(local.check_budget(0, "acme", (7, 13), t0).0);
        }
        // Window 8 begins with a store decision that refuses (the counter stays window 7's).
        let carried = local.uncounted(0, "acme", 8);
        assert_eq!((carried.now, carried.before), (0, 3));
        local.counted_by_store(0, "acme", carried);
        assert!(!local.uncounted(0, "acme", 8).any());
        // Read in window 7, counted once the counter moved on to window 8.
        for _ in 0..2 {
            assert!(local.check_budget(0, "acme", (8, 13), t0).0);
        }
        let in_8 = local.uncounted(0, "acme", 8);
        assert!(local.check_budget(0, "acme", (9, 13), t0).0);
        local.counted_by_store(0, "acme", in_8);
        assert_eq!(
            local.uncounted(0, "acme", 9),
            Uncounted {
                now: 1,
                before: 0,
                window: 9
            }
        );
    }

    #[test]
    fn a_late_decision_of_the_window_before_never_resets_the_next_ones_count() {
        let t0 = Instant::now();
        let local = LocalCounters::new(ByCaller::unmetered(1), t0);
        assert!(local.check_budget(0, "acme", (8, 2), t0).0);
        assert!(local.check_budget(0, "acme", (8, 2), t0).0);
        // Late, for window 7: counted against window 8's two, already taken.
        assert!(!local.check_budget(0, "acme", (7, 2), t0).0);
        assert!(!local.check_budget(0, "acme", (8, 2), t0).0);
    }

    #[test]
    fn callers_are_counted_separately_and_pruned_when_idle() {
        let t0 = Instant::now();
        let local = LocalCounters::new(ByCaller::unmetered(2), t0);
        let w = Duration::from_secs(1);
        assert!(
            local
                .check(0, Algorithm::SlidingWindow, "a", 1.0, w, t0)
                .allowed
        );
        assert!(
            !local
                .check(0, Algorithm::SlidingWindow, "a", 1.0, w, t0)
                .allowed
        );
        assert!(
            local
                .check(0, Algorithm::SlidingWindow, "b", 1.0, w, t0)
                .allowed
        );
        assert!(
            local
                .check(1, Algorithm::SlidingWindow, "a", 1.0, w, t0)
                .allowed
        );
        assert_eq!(local.len(), 3);
        local.prune(t0 + Duration::from_secs(5), |_| Duration::from_secs(2));
        assert!(local.is_empty());
    }

    #[test]
    fn fail_static_remembers_callers_caught_since_an_instant() {
        let t0 = Instant::now();
        let caught = CaughtCallers::new(ByCaller::unmetered(1));
        caught.caught(0, "acme", t0 + Duration::from_secs(1));
        assert!(caught.caught_since(0, "acme", t0));
        assert!(!caught.caught_since(0, "acme", t0 + Duration::from_secs(2)));
        assert!(!caught.caught_since(0, "globex", t0));
    }
}
