//! After an outage: the hold on the turns once the store answers again, the window the fleet
//! agrees to rejoin the store in, and the turns counted in the store (reconciliation, carries).

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use super::Limiter;
use crate::decision::Decision;
use crate::fallback::FallbackReason;
use crate::local::Uncounted;
use crate::share;
use crate::store::{Store, StoreError};

/// Callers a route's reconciliation counts at once when the store answers again: it delays
/// the decision that found the store back by a round trip each.
const RECONCILE_AT_ONCE: usize = 256;

/// A hold the closing breaker started on a route: until the window this instance proposes
/// to the fleet, and at least until the window it closed in ends.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hold {
    route: usize,
    at_least: u64,
    /// The first window at least `rejoin_after` away, and how long until it starts.
    proposed: (u64, Duration),
}

impl Limiter {
    /// A turn taken in a hold is counted in the store at once, which answers again: at the
    /// rejoin window each instance's first decision would otherwise see only its own turns of
    /// the hold (its carry) and admit the others' again. Only this admission is counted (two
    /// held requests of one caller at once must not count each other's), and not while the
    /// store is slow or refusing, whose timeouts every held request would wait: such turns are
    /// carried with the caller's next decision by the store. `counted`: the store call that
    /// came back while the hold began counted this request already.
    pub(super) async fn by_held_turns(
        &self,
        store: &Store,
        index: usize,
        caller: &str,
        counted: bool,
    ) -> Decision {
        self.metrics
            .fallback(&self.routes[index].1, FallbackReason::Rejoining.label());
        self.fallbacks.add(index, FallbackReason::Rejoining);
        let decision = self.fallback(index, caller);
        if matches!(decision, Decision::Admitted { .. }) {
            let (w, _) = share::window_at(SystemTime::now(), self.routes[index].0.window);
            let this = Uncounted {
                now: 1,
                before: 0,
                window: w,
            };
            if counted {
                self.local.counted_by_store(index, caller, this);
            } else if store.is_connected() && !self.slow_or_refusing.load(Ordering::Relaxed) {
                self.count_held_turn(store, index, caller, this).await;
            }
        }
        decision
    }

    /// Counts one held turn in the store. It is marked counted before the store is asked, so
    /// that a reconciliation scanning the callers meanwhile does not count it too, and carried
    /// again if the count fails. After a timeout or a store-wide refusal the rest of the hold
    /// counts nothing (its turns are carried), since every held request would wait as long.
    async fn count_held_turn(&self, store: &Store, index: usize, caller: &str, this: Uncounted) {
        self.local.counted_by_store(index, caller, this);
        let route = &self.routes[index].0;
        let outcome = store
            .count(
                (route.algorithm, caller, &route.name),
                (route.limit, route.window),
                this,
                route.store_timeout,
            )
            .await;
        if let Err(e) = outcome {
            self.local.not_counted_after_all(index, caller, this);
            if matches!(e, StoreError::Timeout(_) | StoreError::Refused(_)) {
                self.slow_or_refusing.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Counts `carry` of `caller` on route `index` in the store, and no longer as uncounted.
    async fn count_in_store(
        &self,
        store: &Store,
        index: usize,
        caller: &str,
        carry: Uncounted,
    ) -> Result<(), StoreError> {
        if !carry.any() {
            return Ok(());
        }
        let route = &self.routes[index].0;
        store
            .count(
                (route.algorithm, caller, &route.name),
                (route.limit, route.window),
                carry,
                route.store_timeout,
            )
            .await?;
        self.local.counted_by_store(index, caller, carry);
        Ok(())
    }

    /// Under the breaker's lock as it closes, before any request can see it closed: each route
    /// with a breaker that took turns in its current window or the one before keeps deciding
    /// by them until the first window that starts at least `rejoin_after` later
    /// ([`crate::turns::TurnWindows::hold_if_taken_since_the_window_before`]), which it then
    /// proposes to the fleet ([`Self::agree_on_rejoin`]).
    pub(super) fn hold_turns(&self) -> Vec<Hold> {
        let now = SystemTime::now();
        let after = self.breaker_settings.rejoin_after;
        let mut holds = Vec::new();
        for (index, (route, _)) in self.routes.iter().enumerate() {
            if route.breaker && route.policy.takes_turns() {
                let (w, _) = share::window_at(now, route.window);
                let proposed = share::first_window_after(now, after, route.window);
                if self
                    .turns
                    .hold_if_taken_since_the_window_before(index, w, proposed.0)
                {
                    holds.push(Hold {
                        route: index,
                        at_least: w + 1,
                        proposed,
                    });
                }
            }
        }
        holds
    }

    /// Agrees each hold the closing breaker started ([`Self::hold_turns`]) with the fleet in
    /// the store: the first instance back proposes its window, and each instance back before
    /// that window starts keeps to its turns until then (never later than its own proposal,
    /// which bounds a key written with another window length or a skewed clock). Instances find
    /// the store again up to a reconnect backoff apart; holding each only to the end of its own
    /// window let one that came back just before an edge decide by the store in the next window
    /// while another, not back yet, took its turns in it, which the store counted too late.
    /// Without an answer the hold stays this instance's own.
    pub(super) async fn agree_on_rejoin(&self, store: &Store, holds: &[Hold]) {
        for hold in holds {
            let route = &self.routes[hold.route].0;
            match store
                .rejoin_window(&route.name, hold.proposed, route.store_timeout)
                .await
            {
                Ok(agreed) => self
                    .turns
                    .hold_until(hold.route, agreed.min(hold.proposed.0).max(hold.at_least)),
                // Gone or slow again: the next route's call would wait as long.
                Err(_) => return,
            }
        }
    }

    /// Whether route `index` still decides by its turns after the store came back.
    pub(super) fn holding(&self, index: usize) -> bool {
        let (w, _) = share::window_at(SystemTime::now(), self.routes[index].0.window);
        self.turns.holding(index, w)
    }

    /// What this instance admitted of `caller` on route `index` by its own turns in the
    /// current window and the one before, which the store has not counted: the store counts
    /// it with the caller's first decision after an outage, so the first window back does not
    /// start empty (seed 000's burst after recovery) and its sliding estimate weighs the
    /// window before as it was. Only looked up while turns were taken in those two windows.
    pub(super) fn uncounted(&self, index: usize, caller: &str) -> Uncounted {
        let (w, _) = share::window_at(SystemTime::now(), self.routes[index].0.window);
        if self.turns.taken_since_the_window_before(index, w) {
            self.local.uncounted(index, caller, w)
        } else {
            Uncounted::default()
        }
    }

    /// Counts in the store what this instance admitted on its own in the current window and
    /// the one before, for every caller with turns taken in them (up to [`RECONCILE_AT_ONCE`] a route; the others
    /// with their next decision, [`Self::uncounted`]): the other instances are counting theirs
    /// too, so the window's first store decisions see every local admission, not only those
    /// of the instances that happened to decide for the caller first.
    pub(super) async fn reconcile(&self, store: &Store) {
        let mut counted = 0;
        for (index, (route, _)) in self.routes.iter().enumerate() {
            let (w, _) = share::window_at(SystemTime::now(), route.window);
            if !self.turns.taken_since_the_window_before(index, w) {
                continue;
            }
            for (caller, uncounted) in self.local.all_uncounted(index, w, RECONCILE_AT_ONCE) {
                if self
                    .count_in_store(store, index, &caller, uncounted)
                    .await
                    .is_err()
                {
                    // Gone again: what is left is counted with each caller's next decision.
                    return;
                }
                counted += uncounted.now + uncounted.before;
            }
        }
        if counted > 0 {
            tracing::debug!(
                counted,
                "counted in the store what was admitted locally this window"
            );
        }
    }
}
