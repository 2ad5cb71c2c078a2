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
    /// (turns the store may not have counted), it keeps to them until window `until` starts
    /// (at least until `w` ends); returns whether it does. The instances of a fleet find the
    /// store again some milliseconds apart; in a window where some decide by the store beside
    /// others' turns, the store's count lacks those turns and admits the limit again beside
    /// them.
    pub fn hold_if_taken_since_the_window_before(&self, route: usize, w: u64, until: u64) -> bool {
        // marked − 1 is the window of the last turn: w or w − 1.
        let marked = self.taken[route].load(Ordering::Relaxed);
        let held = marked != 0 && marked >= w;
        if held {
            self.rejoin_at[route].store(until.max(w + 1), Ordering::Relaxed);
        }
        held
    }

    /// `route` keeps to its turns until window `until` starts: the fleet's agreed window,
    /// which may be earlier than this instance's own proposal.
    pub fn hold_until(&self, route: usize, until: u64) {
        self.rejoin_at[route].store(until, Ordering::Relaxed);
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
    fn a_route_with_turns_this_window_or_the_last_holds_to_them_until_the_window_given() {
        let t = TurnWindows::new(2);
        t.taken(0, 7);
        assert!(t.hold_if_taken_since_the_window_before(0, 7, 8));
        assert!(!t.hold_if_taken_since_the_window_before(1, 7, 8));
        assert!(t.holding(0, 7));
        assert!(!t.holding(1, 7), "no turns on route 1");
        assert!(!t.holding(0, 8), "the next window decides by the store");
        assert!(!t.holding(0, 7), "and the hold is over");
        // Turns of the window before hold too, older turns nothing.
        assert!(t.hold_if_taken_since_the_window_before(0, 8, 10));
        assert!(t.holding(0, 9));
        assert!(!t.holding(0, 10));
        assert!(!t.hold_if_taken_since_the_window_before(0, 9, 10));
        assert!(!t.holding(0, 9));
    }

    #[test]
    fn a_hold_lasts_at_least_the_rest_of_its_window_and_the_agreement_may_shorten_it() {
        let t = TurnWindows::new(1);
        t.taken(0, 7);
        assert!(t.hold_if_taken_since_the_window_before(0, 7, 3));
        assert!(
            t.holding(0, 7),
            "a window already begun: the rest of this one"
        );
        assert!(t.hold_if_taken_since_the_window_before(0, 7, 10));
        t.hold_until(0, 9);
        assert!(t.holding(0, 8));
        assert!(
            !t.holding(0, 9),
            "the fleet's window, earlier than this one's own"
        );
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
