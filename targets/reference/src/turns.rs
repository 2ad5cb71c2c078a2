//! Per route, when the instance last took turns of its local share, and the window from which
//! it decides by the store again after an outage: lock-free, read on every decision.

use std::sync::atomic::{AtomicU64, Ordering};

/// Wall-clock windows as [`crate::share::window_at`] numbers them, one slot per route.
#[derive(Debug)]
pub struct TurnWindows {
    /// 1 + the window of the last turn taken, 0 for none since.
    taken: Vec<AtomicU64>,
    /// The window from which the route decides by the store again, 0 for none.
    rejoin_at: Vec<AtomicU64>,
}

impl TurnWindows {
    pub fn new(routes: usize) -> Self {
        Self {
            taken: (0..routes).map(|_| AtomicU64::new(0)).collect(),
            rejoin_at: (0..routes).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// A turn was taken on `route` in window `w`. The latest window wins: a decision of the
    /// window before, late, must not hide it.
    pub fn taken(&self, route: usize, w: u64) {
        self.taken[route].fetch_max(w + 1, Ordering::Relaxed);
    }

    /// Whether turns were taken on `route` in window `w` or the one before: what the store may
    /// not have counted yet. Once they are older, the store's own counts cover them and the
    /// mark is cleared, so later decisions skip the lookup.
    pub fn taken_since_the_window_before(&self, route: usize, w: u64) -> bool {
        let marked = self.taken[route].load(Ordering::Relaxed);
        if marked == 0 {
            return false;
        }
        // marked − 1 is w or w − 1.
        if marked >= w {
            return true;
        }
        let _ = self.taken[route].compare_exchange(marked, 0, Ordering::Relaxed, Ordering::Relaxed);
        false
    }

    /// The store is back in window `w`: if `route` took turns in it or the window before
    /// (turns the store may not have counted), it keeps to them at least until `w` ends, and
    /// until the fleet's agreed window ([`Self::hold_until`]) once that is known. The instances
    /// of a fleet find the store again some milliseconds apart; in a window where some decide
    /// by the store beside others' turns, the store's count lacks those turns and admits the
    /// limit again beside them.
    pub fn hold_if_taken_since_the_window_before(&self, route: usize, w: u64) {
        // marked − 1 is the window of the last turn: w or w − 1.
        let marked = self.taken[route].load(Ordering::Relaxed);
        if marked != 0 && marked >= w {
            self.rejoin_at[route].fetch_max(w + 1, Ordering::Relaxed);
        }
    }

    /// `route` keeps to its turns until window `w` starts (the fleet's agreed window, which
    /// may only lengthen a hold).
    pub fn hold_until(&self, route: usize, w: u64) {
        self.rejoin_at[route].fetch_max(w, Ordering::Relaxed);
    }

    /// Whether `route` still keeps to its turns in window `w`.
    pub fn holding(&self, route: usize, w: u64) -> bool {
        let at = self.rejoin_at[route].load(Ordering::Relaxed);
        if at == 0 {
            return false;
        }
        if w < at {
            return true;
        }
        let _ = self.rejoin_at[route].compare_exchange(at, 0, Ordering::Relaxed, Ordering::Relaxed);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_with_turns_this_window_or_the_last_holds_to_them_for_the_rest_of_this_one() {
        let t = TurnWindows::new(2);
        t.taken(0, 7);
        t.hold_if_taken_since_the_window_before(0, 7);
        t.hold_if_taken_since_the_window_before(1, 7);
        assert!(t.holding(0, 7));
        assert!(!t.holding(1, 7), "no turns on route 1");
        assert!(!t.holding(0, 8), "the next window decides by the store");
        assert!(!t.holding(0, 7), "and the hold is over");
        // Turns of the window before hold the rest of this one, older turns nothing.
        t.hold_if_taken_since_the_window_before(0, 8);
        assert!(t.holding(0, 8));
        assert!(!t.holding(0, 9));
        t.hold_if_taken_since_the_window_before(0, 9);
        assert!(!t.holding(0, 9));
    }

    #[test]
    fn an_agreed_window_lengthens_a_hold_and_never_shortens_it() {
        let t = TurnWindows::new(1);
        t.taken(0, 7);
        t.hold_if_taken_since_the_window_before(0, 7);
        t.hold_until(0, 9);
        assert!(t.holding(0, 8), "held past the window of the turns");
        t.hold_until(0, 8);
        assert!(t.holding(0, 8));
        assert!(!t.holding(0, 9));
    }

    #[test]
    fn turns_count_as_uncounted_for_their_window_and_the_next_then_are_forgotten() {
        let t = TurnWindows::new(1);
        assert!(!t.taken_since_the_window_before(0, 7));
        t.taken(0, 7);
        t.taken(0, 6);
        assert!(t.taken_since_the_window_before(0, 7));
        assert!(t.taken_since_the_window_before(0, 8));
        assert!(!t.taken_since_the_window_before(0, 9));
        assert!(!t.taken_since_the_window_before(0, 8), "cleared");
    }
}
