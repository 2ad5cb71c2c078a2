//! Per-instance counters: the local share while the store is unavailable, and the whole limit
//! for `local-only` routes. One map per route, keyed by caller.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::bucket::TokenBucket;
use crate::policy::Algorithm;
use crate::window::{SlidingWindow, Verdict};

#[derive(Debug, Clone, Copy)]
enum Counter {
    Window(SlidingWindow),
    Bucket(TokenBucket),
    /// Whole requests admitted in window `window` of the instance's budget (`crate::share`).
    Budget {
        window: u64,
        used: u64,
    },
}

#[derive(Debug)]
struct Entry {
    counter: Counter,
    last_used: Instant,
}

/// Local counters for every route; the same algorithm as the route uses in Redis.
#[derive(Debug)]
pub struct LocalCounters {
    origin: Instant,
    routes: Vec<Mutex<HashMap<String, Entry>>>,
}

impl LocalCounters {
    pub fn new(routes: usize, origin: Instant) -> Self {
        Self {
            origin,
            routes: (0..routes).map(|_| Mutex::new(HashMap::new())).collect(),
        }
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
        let mut map = self.routes[route].lock().unwrap_or_else(|e| e.into_inner());
        let entry = match map.get_mut(caller) {
            Some(entry) => entry,
            None => map.entry(caller.to_owned()).or_insert(Entry {
                counter: match algorithm {
                    Algorithm::SlidingWindow => Counter::Window(SlidingWindow::default()),
                    Algorithm::TokenBucket => Counter::Bucket(TokenBucket::default()),
                },
                last_used: now,
            }),
        };
        entry.last_used = now;
        match &mut entry.counter {
            Counter::Window(w) => w.check(now_s, limit, window_s),
            Counter::Bucket(b) => b.check(now_s, limit, window_s),
            // A route decides by one kind of counter; this one was the budget's before.
            Counter::Budget { .. } => {
                let mut w = SlidingWindow::default();
                let verdict = w.check(now_s, limit, window_s);
                entry.counter = Counter::Window(w);
                verdict
            }
        }
    }

    /// Decides one request of `caller` on `route` against `budget`, this instance's whole
    /// requests for window number `window` (`crate::share::budget`): whether it is admitted,
    /// and what is left of the budget after it.
    pub fn check_budget(
        &self,
        route: usize,
        caller: &str,
        (window, budget): (u64, u64),
        now: Instant,
    ) -> (bool, u64) {
        let mut map = self.routes[route].lock().unwrap_or_else(|e| e.into_inner());
        let fresh = Counter::Budget { window, used: 0 };
        let entry = match map.get_mut(caller) {
            Some(entry) => entry,
            None => map.entry(caller.to_owned()).or_insert(Entry {
                counter: fresh,
                last_used: now,
            }),
        };
        entry.last_used = now;
        let used = match entry.counter {
            Counter::Budget { window: seen, used } if seen == window => used,
            _ => 0,
        };
        let allowed = used < budget;
        let used = used + u64::from(allowed);
        entry.counter = Counter::Budget { window, used };
        (allowed, budget.saturating_sub(used))
    }

    /// What `caller` was admitted on `route` in window `window` by this instance's budget, if
    /// anything: what the store has not counted.
    pub fn budget_used(&self, route: usize, caller: &str, window: u64) -> u64 {
        let map = self.routes[route].lock().unwrap_or_else(|e| e.into_inner());
        match map.get(caller).map(|e| e.counter) {
            Some(Counter::Budget { window: w, used }) if w == window => used,
            _ => 0,
        }
    }

    /// Up to `at_most` callers with turns taken on `route` in window `window`, and how many.
    pub fn budgets_in(&self, route: usize, window: u64, at_most: usize) -> Vec<(String, u64)> {
        let map = self.routes[route].lock().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .filter_map(|(caller, e)| match e.counter {
                Counter::Budget { window: w, used } if w == window && used > 0 => {
                    Some((caller.clone(), used))
                }
                _ => None,
            })
            .take(at_most)
            .collect()
    }

    /// Forgets `caller`'s budget on `route`: the store has counted it.
    pub fn forget_budget(&self, route: usize, caller: &str) {
        let mut map = self.routes[route].lock().unwrap_or_else(|e| e.into_inner());
        if map
            .get(caller)
            .is_some_and(|e| matches!(e.counter, Counter::Budget { .. }))
        {
            map.remove(caller);
        }
    }

    /// Forgets callers idle for longer than `idle`, so memory follows the active callers.
    pub fn prune(&self, now: Instant, idle: Duration) {
        for route in &self.routes {
            route
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|_, e| now.saturating_duration_since(e.last_used) <= idle);
        }
    }

    pub fn len(&self) -> usize {
        callers(&self.routes)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Entries over every route's map.
fn callers<V>(routes: &[Mutex<HashMap<String, V>>]) -> usize {
    routes
        .iter()
        .map(|r| r.lock().unwrap_or_else(|e| e.into_inner()).len())
        .sum()
}

/// Callers the store refused recently, per route: what `fail-static` keeps enforcing.
#[derive(Debug)]
pub struct CaughtCallers {
    routes: Vec<Mutex<HashMap<String, Instant>>>,
}

impl CaughtCallers {
    pub fn new(routes: usize) -> Self {
        Self {
            routes: (0..routes).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    pub fn caught(&self, route: usize, caller: &str, now: Instant) {
        let mut map = self.routes[route].lock().unwrap_or_else(|e| e.into_inner());
        match map.get_mut(caller) {
            Some(at) => *at = now,
            None => {
                map.insert(caller.to_owned(), now);
            }
        }
    }

    /// Whether the store refused `caller` at or after `since`.
    pub fn caught_since(&self, route: usize, caller: &str, since: Instant) -> bool {
        self.routes[route]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(caller)
            .is_some_and(|&at| at >= since)
    }

    pub fn prune(&self, now: Instant, idle: Duration) {
        for route in &self.routes {
            route
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|_, at| now.saturating_duration_since(*at) <= idle);
        }
    }

    pub fn len(&self) -> usize {
        callers(&self.routes)
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
        let local = LocalCounters::new(1, t0);
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
    fn callers_are_counted_separately_and_pruned_when_idle() {
        let t0 = Instant::now();
        let local = LocalCounters::new(2, t0);
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
        local.prune(t0 + Duration::from_secs(5), Duration::from_secs(2));
        assert!(local.is_empty());
    }

    #[test]
    fn fail_static_remembers_callers_caught_since_an_instant() {
        let t0 = Instant::now();
        let caught = CaughtCallers::new(1);
        caught.caught(0, "acme", t0 + Duration::from_secs(1));
        assert!(caught.caught_since(0, "acme", t0));
        assert!(!caught.caught_since(0, "acme", t0 + Duration::from_secs(2)));
        assert!(!caught.caught_since(0, "globex", t0));
    }
}
