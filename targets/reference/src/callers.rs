//! Per-route state keyed by caller, bounded: when a route's map is full the least recently
//! used caller goes (counted at `/metrics`), and callers idle past their route's horizon are
//! pruned from the cold end. What keeps an instance's memory flat when a million distinct keys
//! arrive during an outage, without forgetting the callers that are still sending.

use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard};

use lru::LruCache;
use prometheus_client::metrics::counter::Counter;

/// The default cap on callers a route keeps state for, per map: about 20 MB of state at
/// 200 bytes a caller, several times the distinct keys of a busy service's window.
pub const DEFAULT_MAX_CALLERS: NonZeroUsize = NonZeroUsize::new(100_000).expect("non-zero");

#[derive(Debug)]
struct RouteMap<V> {
    // Unbounded, with `ByCaller::cap` enforced by hand: `LruCache::new(cap)` would allocate
    // the whole cap up front, and evicts without saying so.
    map: Mutex<LruCache<String, V>>,
    evicted: Counter,
}

/// One bounded map per route, in the order of the routes.
#[derive(Debug)]
pub struct ByCaller<V> {
    routes: Vec<RouteMap<V>>,
    cap: NonZeroUsize,
}

impl<V> ByCaller<V> {
    /// A map per counter in `evicted` (one per route), each holding at most `cap` callers.
    pub fn new(evicted: Vec<Counter>, cap: NonZeroUsize) -> Self {
        Self {
            routes: evicted
                .into_iter()
                .map(|evicted| RouteMap {
                    map: Mutex::new(LruCache::unbounded()),
                    evicted,
                })
                .collect(),
            cap,
        }
    }

    /// `routes` maps at the default cap, their evictions counted nowhere.
    #[cfg(test)]
    pub fn unmetered(routes: usize) -> Self {
        Self::new(vec![Counter::default(); routes], DEFAULT_MAX_CALLERS)
    }

    fn lock(&self, route: usize) -> MutexGuard<'_, LruCache<String, V>> {
        self.routes[route]
            .map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Applies `f` to `caller`'s state on `route`, made by `make` if it has none (evicting the
    /// least recently used caller when the map is full); the caller becomes the most recent.
    pub fn with<R>(
        &self,
        (route, caller): (usize, &str),
        make: impl FnOnce() -> V,
        f: impl FnOnce(&mut V) -> R,
    ) -> R {
        let mut map = self.lock(route);
        if let Some(v) = map.get_mut(caller) {
            return f(v);
        }
        if map.len() >= self.cap.get() && map.pop_lru().is_some() {
            self.routes[route].evicted.inc();
        }
        f(map.get_or_insert_mut_ref(caller, make))
    }

    /// `f` of `caller`'s state on `route`, if any, without making it more recent.
    pub fn peek<R>(&self, (route, caller): (usize, &str), f: impl FnOnce(Option<&V>) -> R) -> R {
        f(self.lock(route).peek(caller))
    }

    /// `f` of `caller`'s state on `route`, if any, to change it without making it more recent.
    pub fn peek_mut<R>(
        &self,
        (route, caller): (usize, &str),
        f: impl FnOnce(Option<&mut V>) -> R,
    ) -> R {
        f(self.lock(route).peek_mut(caller))
    }

    /// Up to `at_most` of `f`'s answers over the callers of `route`, most recent first.
    pub fn find<T>(
        &self,
        route: usize,
        at_most: usize,
        mut f: impl FnMut(&str, &V) -> Option<T>,
    ) -> Vec<T> {
        self.lock(route)
            .iter()
            .filter_map(|(caller, v)| f(caller, v))
            .take(at_most)
            .collect()
    }

    /// Forgets the callers of `route` that `idle` says are, from the least recently used on:
    /// a caller used after an idle one is not idle, so the walk stops at the first that is not.
    pub fn prune(&self, route: usize, idle: impl Fn(&V) -> bool) {
        let mut map = self.lock(route);
        while map.peek_lru().is_some_and(|(_, v)| idle(v)) {
            map.pop_lru();
        }
    }

    pub fn routes(&self) -> usize {
        self.routes.len()
    }

    /// Callers held, over every route.
    pub fn len(&self) -> usize {
        (0..self.routes.len()).map(|r| self.lock(r).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(cap: usize) -> (ByCaller<u32>, Counter) {
        let evicted = Counter::default();
        let cap = NonZeroUsize::new(cap).unwrap_or(NonZeroUsize::MIN);
        (ByCaller::new(vec![evicted.clone()], cap), evicted)
    }

    #[test]
    fn a_full_map_evicts_the_least_recently_used_caller_and_counts_it() {
        let (m, evicted) = map(2);
        m.with((0, "acme"), || 1, |_| ());
        m.with((0, "globex"), || 2, |_| ());
        // acme sent again: globex is now the least recent.
        m.with((0, "acme"), || 0, |v| *v += 10);
        m.with((0, "initech"), || 3, |_| ());
        assert_eq!(evicted.get(), 1);
        assert_eq!(m.len(), 2);
        assert_eq!(m.peek((0, "acme"), |v| v.copied()), Some(11));
        assert_eq!(m.peek((0, "globex"), |v| v.copied()), None);
    }

    #[test]
    fn pruning_walks_from_the_cold_end_and_stops_at_the_first_caller_in_use() {
        let (m, evicted) = map(10);
        for (caller, at) in [("a", 1), ("b", 5), ("c", 2)] {
            m.with((0, caller), || at, |_| ());
        }
        // Idle below 3: a goes; b is not idle, so c, used after it, stays too.
        m.prune(0, |&at| at < 3);
        assert_eq!(m.len(), 2);
        assert_eq!(evicted.get(), 0, "pruning is not eviction");
        m.prune(0, |_| true);
        assert!(m.is_empty());
    }
}
