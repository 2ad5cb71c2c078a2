//! After an outage: the hold on the turns once the store answers again, the window the fleet
//! agrees to rejoin the store in, and the turns counted in the store (reconciliation, carries).

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

/// How far ahead of the first instance back from an outage the fleet's rejoin window starts
/// ([`Limiter::agree_on_rejoin`]): twice the store connection's longest reconnect backoff, so
/// the instances that lost the store with it, each back within a backoff step, find the
/// agreement before that window begins.
const REJOIN_AFTER: Duration = Duration::from_millis(500);

impl Limiter {
    /// A turn taken in a hold is counted in the store at once, which answers again: at the
    /// rejoin window each instance's first decision would otherwise see only its own turns of
    /// the hold (its carry) and admit the others' again.
    pub(super) async fn by_held_turns(
        &self,
        store: &Store,
        index: usize,
        caller: &str,
    ) -> Decision {
        self.metrics
            .fallback(&self.routes[index].1, FallbackReason::Rejoining.label());
        self.fallbacks.add(index, FallbackReason::Rejoining);
        let decision = self.fallback(index, caller);
        if matches!(decision, Decision::Admitted { .. }) && store.is_connected() {
            let carry = self.uncounted(index, caller);
            // Not counted, it is carried with the caller's next decision by the store.
            let _ = self.count_in_store(store, index, caller, carry).await;
        }
        decision
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
    /// by them at least until this window ends
    /// ([`crate::turns::TurnWindows::hold_if_taken_since_the_window_before`]), and until the
    /// fleet's agreed window once [`Self::agree_on_rejoin`] has it.
    pub(super) fn hold_turns(&self) {
        let now = SystemTime::now();
        for (index, (route, _)) in self.routes.iter().enumerate() {
            if route.breaker && route.policy.takes_turns() {
                let (w, _) = share::window_at(now, route.window);
                self.turns.hold_if_taken_since_the_window_before(index, w);
            }
        }
    }

    /// Lengthens each hold the closing breaker started ([`Self::hold_turns`]) to the window the
    /// fleet agrees on in the store: the first instance back proposes the first window at least
    /// [`REJOIN_AFTER`] away, and each instance back before it starts keeps to its turns until
    /// then. Instances find the store again up to a reconnect backoff apart; holding each only
    /// to the end of its own window let one that came back just before an edge decide by the
    /// store in the next window while another, not back yet, took its turns in it, which the
    /// store counted too late. Without an answer the hold stays as it was.
    pub(super) async fn agree_on_rejoin(&self, store: &Store) {
        for (index, (route, _)) in self.routes.iter().enumerate() {
            if !self.holding(index) {
                continue;
            }
            let now = SystemTime::now();
            let proposed = share::first_window_after(now, REJOIN_AFTER, route.window);
            if let Ok(agreed) = store
                .rejoin_window(&route.name, proposed, route.store_timeout)
                .await
            {
                self.turns.hold_until(index, agreed);
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

    /// Counts in the store what this instance admitted on its own in the current window, for
    /// every caller with turns taken in it (up to [`RECONCILE_AT_ONCE`] a route; the others
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
