//! One decision per request: the store when it answers in time, else the route's policy.
//!
//! This is seed 000's `allow()` built out: breaker, timeout, no retries unless the policy asks,
//! fallback counters by reason, summed in the log once a second (`crate::fallback`).

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::breaker::{Breaker, BreakerSettings, BreakerState, Permit};
use crate::callers::ByCaller;
use crate::decision::{Decision, Source};
use crate::fallback::{FallbackReason, Tally};
use crate::instances::LiveInstances;
use crate::local::{CaughtCallers, LocalCounters};
use crate::metrics::{Metrics, RouteLabel};
use crate::policy::{Policy, Route};
use crate::share;
use crate::store::{Store, StoreError, StoreVerdict};
use crate::turns::TurnWindows;

mod rejoin;

use rejoin::Hold;

/// Everything one instance decides with.
#[derive(Debug)]
pub struct Limiter {
    routes: Vec<(Route, RouteLabel)>,
    store: Option<Arc<Store>>,
    breaker: Mutex<Breaker>,
    breaker_settings: BreakerSettings,
    local: LocalCounters,
    caught: CaughtCallers,
    live: Arc<LiveInstances>,
    metrics: Arc<Metrics>,
    /// Shared with the heartbeat: the instance count is not relearnt while degraded.
    degraded: Arc<AtomicBool>,
    /// When the store last answered: where a fail-static outage begins.
    last_store_answer: Mutex<Instant>,
    /// Fallbacks since the log's last summary (`crate::fallback::Summary`).
    fallbacks: Tally,
    /// Per route: when turns were last taken ([`Self::uncounted`]), and the hold after the
    /// breaker closes ([`Self::hold_turns`]).
    turns: TurnWindows,
    /// Whether a call timed out or met a store-wide error reply since the store last answered.
    slow_or_refusing: AtomicBool,
}

impl Limiter {
    pub fn new(
        routes: Vec<Route>,
        store: Option<Arc<Store>>,
        breaker: BreakerSettings,
        live: Arc<LiveInstances>,
        metrics: Arc<Metrics>,
        max_callers: NonZeroUsize,
    ) -> Self {
        let now = Instant::now();
        let n = routes.len();
        let routes: Vec<(Route, RouteLabel)> = routes
            .into_iter()
            .map(|r| {
                let label = RouteLabel(r.name.as_str().into());
                (r, label)
            })
            .collect();
        let evicted = |map| {
            routes
                .iter()
                .map(|(_, l)| metrics.evicted(l, map))
                .collect()
        };
        Self {
            local: LocalCounters::new(ByCaller::new(evicted("counters"), max_callers), now),
            caught: CaughtCallers::new(ByCaller::new(evicted("refusals"), max_callers)),
            routes,
            store,
            breaker: Mutex::new(Breaker::new(breaker, now)),
            breaker_settings: breaker,
            live,
            metrics,
            degraded: Arc::new(AtomicBool::new(false)),
            last_store_answer: Mutex::new(now),
            turns: TurnWindows::new(n),
            slow_or_refusing: AtomicBool::new(false),
            fallbacks: Tally::new(n),
        }
    }

    pub fn routes(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter().map(|(r, _)| r)
    }

    /// The index of the route serving `path`.
    pub fn route_index(&self, path: &str) -> Option<usize> {
        self.routes.iter().position(|(r, _)| r.path == path)
    }

    pub fn route(&self, index: usize) -> &Route {
        &self.routes[index].0
    }

    pub fn breaker_state(&self) -> BreakerState {
        self.breaker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .state()
    }

    pub fn live_instances(&self) -> u32 {
        self.live.get()
    }

    /// The live instance count and this instance's rank among them, as last learnt.
    pub fn live_instances_and_rank(&self) -> (u32, u32) {
        self.live.with_rank()
    }

    /// Fallbacks by route and reason since the last call, for the log's summary.
    pub fn take_fallbacks(&self) -> Vec<[u64; FallbackReason::ALL.len()]> {
        self.fallbacks.take()
    }

    pub fn is_degraded(&self) -> bool {
        self.degraded.load(Ordering::Relaxed)
    }

    /// Whether the instance decides without the store, for the heartbeat to read.
    pub fn degraded_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.degraded)
    }

    /// Marks the instance degraded from the start (the store was unreachable at start-up).
    pub fn start_degraded(&self) {
        self.degraded.store(true, Ordering::Relaxed);
        self.metrics.degraded(true);
    }

    /// Decides one request of `caller` on route `index`.
    pub async fn decide(&self, index: usize, caller: &str) -> Decision {
        let (route, label) = &self.routes[index];
        let decision = match (route.policy, &self.store) {
            (Policy::None, _) => Decision::Admitted {
                source: Source::Unlimited,
                remaining: None,
                more_in: Duration::ZERO,
            },
            (Policy::LocalOnly, _) | (_, None) => {
                self.local_decision(index, caller, f64::from(route.limit))
            }
            (_, Some(store)) => self.decide_with_store(store, index, caller).await,
        };
        self.metrics
            .decision(label, decision.outcome(), decision.source().label());
        decision
    }

    async fn decide_with_store(&self, store: &Store, index: usize, caller: &str) -> Decision {
        let (route, label) = &self.routes[index];
        if self.holding(index) {
            return self.by_held_turns(store, index, caller, false).await;
        }
        match self.ask_store(store, index, caller).await {
            // The call that closed the breaker started a hold: until the fleet's rejoin window
            // requests are decided by the turns, and so is it (the store counted it if it
            // allowed it).
            Ok(v) if self.holding(index) => {
                self.by_held_turns(store, index, caller, v.allowed).await
            }
            Ok(v) => self.store_decision(index, caller, v),
            Err(reason) => {
                self.metrics.fallback(label, reason.label());
                self.fallbacks.add(index, reason);
                // A script error is this call's: the store is there for the others.
                if reason != FallbackReason::Error {
                    self.enter_fallback(route, reason);
                }
                self.fallback(index, caller)
            }
        }
    }

    async fn ask_store(
        &self,
        store: &Store,
        index: usize,
        caller: &str,
    ) -> Result<StoreVerdict, FallbackReason> {
        let route = &self.routes[index].0;
        let (permit, made) = if route.breaker {
            let made = store.connections_made();
            let now = Instant::now();
            let mut breaker = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
            let before = breaker.state();
            let permit = breaker.permit_after(now, made);
            let after = breaker.state();
            drop(breaker);
            self.note_breaker(before, after);
            (permit, made)
        } else {
            (Permit::Call, 0)
        };
        if permit == Permit::Rejected {
            return Err(FallbackReason::BreakerOpen);
        }
        let mut last = FallbackReason::Error;
        let carry = self.uncounted(index, caller);
        let mut holds = Vec::new();
        for _attempt in 0..=route.store_retries {
            let started = Instant::now();
            let outcome = store
                .check(
                    (route.algorithm, caller, &route.name),
                    (route.limit, route.window),
                    carry,
                    route.store_timeout,
                )
                .await;
            let now = Instant::now();
            match &outcome {
                Ok(_) => self.slow_or_refusing.store(false, Ordering::Relaxed),
                Err(StoreError::Timeout(_) | StoreError::Refused(_)) => {
                    self.slow_or_refusing.store(true, Ordering::Relaxed);
                }
                Err(_) => {}
            }
            if route.breaker {
                let failed = outcome.as_ref().is_err_and(StoreError::is_store_failure);
                // Only a lost connection is news a reconnect brings: a store too slow for the
                // timeout or answering errors can be reconnected to and still fail, and the
                // calls that fail at once while a slow store's connection is replaced
                // ("not connected") say nothing new about it.
                let lost = matches!(outcome, Err(StoreError::Connection(_)))
                    && !self.slow_or_refusing.load(Ordering::Relaxed);
                holds.extend(self.record_breaker(now, permit, !failed, lost.then_some(made)));
            }
            self.metrics.store_call(match &outcome {
                Ok(_) => "ok",
                Err(e) => FallbackReason::of(e).label(),
            });
            match outcome {
                Ok(v) => {
                    self.metrics.store_latency(now - started);
                    if v.reloaded_script {
                        self.metrics.script_reloaded();
                        tracing::info!("store had lost its scripts (NOSCRIPT); reloaded them");
                    }
                    *self
                        .last_store_answer
                        .lock()
                        .unwrap_or_else(|e| e.into_inner()) = now;
                    if carry.any() {
                        self.local.counted_by_store(index, caller, carry);
                    }
                    // The call that closed the breaker reconciles, whichever call cleared the
                    // degraded flag (a route without a breaker, a slow call answered late).
                    let left = self.leave_fallback();
                    if !holds.is_empty() {
                        self.agree_on_rejoin(store, &holds).await;
                    }
                    if left || !holds.is_empty() {
                        self.reconcile(store).await;
                    }
                    return Ok(v);
                }
                Err(e) => {
                    last = FallbackReason::of(&e);
                    // The same call on the same key meets the same script error again.
                    if last == FallbackReason::Error {
                        break;
                    }
                }
            }
            // A probe is one call; a retry after it would be a second, unpermitted one.
            if permit == Permit::Probe {
                break;
            }
        }
        // A script error answered the probe: the store is back for every other call, and the
        // hold the close started is agreed and reconciled as after an answer.
        if !holds.is_empty() {
            self.agree_on_rejoin(store, &holds).await;
            self.reconcile(store).await;
        }
        Err(last)
    }

    /// `lost`: for a call that failed on a lost connection, the store's connections made when
    /// it started, so that a reconnect even during it lets the probe out at once.
    /// Returns the holds the breaker started if it closed ([`Self::hold_turns`]).
    fn record_breaker(
        &self,
        now: Instant,
        permit: Permit,
        ok: bool,
        lost: Option<u64>,
    ) -> Vec<Hold> {
        let mut breaker = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
        let before = breaker.state();
        let after = breaker.record_call(now, permit, ok, lost);
        // Under the lock: no request may see the breaker closed before the hold is in place.
        let holds = if after == BreakerState::Closed && before != BreakerState::Closed {
            self.hold_turns()
        } else {
            Vec::new()
        };
        drop(breaker);
        self.note_breaker(before, after);
        holds
    }

    fn note_breaker(&self, before: BreakerState, after: BreakerState) {
        let changed = std::mem::discriminant(&before) != std::mem::discriminant(&after);
        let name = match after {
            BreakerState::Closed => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen { .. } => "half_open",
        };
        self.metrics.breaker(after.as_gauge(), name, changed);
        // Every cool-down probes: at debug, or a slow Redis writes three lines a second.
        // `failmode_breaker_transitions_total` counts them.
        if changed {
            tracing::debug!(breaker = name, "circuit breaker changed state");
        }
    }

    fn store_decision(&self, index: usize, caller: &str, v: StoreVerdict) -> Decision {
        let route = &self.routes[index].0;
        if v.allowed && route.policy.takes_turns() {
            // Should the store go away in this window, this instance's turns are what is
            // left of its budget after these.
            let (w, _) = share::window_at(SystemTime::now(), route.window);
            self.local
                .admitted_by_store(index, caller, w, Instant::now());
        }
        if v.allowed {
            Decision::Admitted {
                source: Source::Store,
                remaining: Some(v.remaining),
                more_in: v.more_in,
            }
        } else {
            if self.routes[index].0.policy == Policy::FailStatic {
                self.caught.caught(index, caller, Instant::now());
            }
            Decision::Limited {
                source: Source::Store,
                retry_after: v.retry_after,
            }
        }
    }

    fn fallback(&self, index: usize, caller: &str) -> Decision {
        let route = &self.routes[index].0;
        match route.policy {
            Policy::FailOpen => Decision::Admitted {
                source: Source::FailOpen,
                remaining: None,
                more_in: Duration::ZERO,
            },
            Policy::FailClosed => Decision::Unavailable {
                status: route.fail_status,
                // 503 means "try later": say when the breaker will next look at the store.
                retry_after: (route.fail_status == 503).then_some(self.breaker_settings.cooldown),
            },
            Policy::RetryThenDeny => Decision::Limited {
                source: Source::DenyOnError,
                retry_after: route.window,
            },
            Policy::FailStatic if self.caught_before_outage(index, caller) => Decision::Limited {
                source: Source::Static,
                retry_after: route.window,
            },
            Policy::LocalShare
            | Policy::TimeoutOnly
            | Policy::FailStatic
            | Policy::LocalOnly
            | Policy::None => self.share_decision(index, caller),
        }
    }

    /// Whether the store refused `caller` within two windows of its last answer: such a
    /// decision is held for the whole outage (the policy does not change, as in "fail static").
    fn caught_before_outage(&self, index: usize, caller: &str) -> bool {
        let last = *self
            .last_store_answer
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let since = last
            .checked_sub(self.routes[index].0.window * 2)
            .unwrap_or(last);
        self.caught.caught_since(index, caller, since)
    }

    /// This instance's turn of the limit ([`share::budget`]): whole requests per window that,
    /// over the live instances, add up to the limit exactly.
    fn share_decision(&self, index: usize, caller: &str) -> Decision {
        let route = &self.routes[index].0;
        let (instances, rank) = self.live.with_rank();
        let (w, into) = share::window_at(SystemTime::now(), route.window);
        self.turns.taken(index, w);
        let budget = share::budget(route.limit, instances, rank, w);
        let (allowed, remaining) =
            self.local
                .check_budget(index, caller, (w, budget), Instant::now());
        let reset = route.window.saturating_sub(into);
        if allowed {
            Decision::Admitted {
                source: Source::Local,
                remaining: Some(remaining),
                // A budget is whole requests a window: the next comes with the next window.
                more_in: reset,
            }
        } else {
            // The start of this instance's next window with a budget: a share below one
            // request a window has turns, and a Retry-After before its turn would be refused.
            let next = share::next_turn(route.limit, instances, rank, w + 1).unwrap_or(w + 1);
            let windows_between = u32::try_from(next - (w + 1)).unwrap_or(u32::MAX);
            Decision::Limited {
                source: Source::Local,
                retry_after: reset + route.window.saturating_mul(windows_between),
            }
        }
    }

    fn local_decision(&self, index: usize, caller: &str, limit: f64) -> Decision {
        let route = &self.routes[index].0;
        let v = self.local.check(
            index,
            route.algorithm,
            caller,
            limit,
            route.window,
            Instant::now(),
        );
        if v.allowed {
            Decision::Admitted {
                source: Source::Local,
                remaining: Some(v.remaining),
                more_in: Duration::from_secs_f64(v.more_in_s),
            }
        } else {
            Decision::Limited {
                source: Source::Local,
                retry_after: Duration::from_secs_f64(v.retry_after_s),
            }
        }
    }

    fn enter_fallback(&self, route: &Route, reason: FallbackReason) {
        if !self.degraded.swap(true, Ordering::Relaxed) {
            self.metrics.degraded(true);
            // At debug: a flapping store would write a pair of lines a cool-down. The log's
            // summary (`crate::fallback`) says it once a second.
            tracing::debug!(
                reason = reason.label(),
                route = %route.name,
                policy = route.policy.name(),
                live_instances = self.live.get(),
                "entering fallback: deciding without the store"
            );
        }
    }

    /// Whether the instance was degraded until now.
    fn leave_fallback(&self) -> bool {
        let was = self.degraded.swap(false, Ordering::Relaxed);
        if was {
            self.metrics.degraded(false);
            tracing::debug!("leaving fallback: the store answers again");
        }
        was
    }

    /// Callers this instance holds state for (local counters and held refusals, every
    /// route): what grows with distinct caller keys until [`Self::prune`] forgets idle ones.
    pub fn tracked_callers(&self) -> usize {
        self.local.len() + self.caught.len()
    }

    /// Forgets callers idle for two of their route's windows (what a sliding window or a turn
    /// of the limit still weighs); run periodically.
    pub fn prune(&self, now: Instant) {
        let idle = |route: usize| self.routes[route].0.window * 2;
        self.local.prune(now, idle);
        // Held decisions must outlive an outage of any length: only forget them while healthy.
        if !self.degraded.load(Ordering::Relaxed) {
            self.caught.prune(now, idle);
        }
    }
}
