//! What an operator alerts on, in Prometheus text at `/metrics`: decisions by route, outcome
//! and source, fallbacks by reason, the breaker's state, store latency, live instances.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A route name as a label value, cheap to clone on the request path.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct RouteLabel(pub Arc<str>);

impl EncodeLabelValue for RouteLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&&*self.0, encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    route: RouteLabel,
    outcome: &'static str,
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FallbackLabels {
    route: RouteLabel,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MapLabels {
    route: RouteLabel,
    map: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransitionLabels {
    to: &'static str,
}

/// Every metric of one instance.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    fallbacks: Family<FallbackLabels, Counter>,
    breaker_state: Gauge,
    breaker_transitions: Family<TransitionLabels, Counter>,
    store_calls: Family<CallLabels, Counter>,
    store_latency: Histogram,
    script_reloads: Counter,
    live_instances: Gauge,
    degraded: Gauge,
    evicted: Family<MapLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("failmode");
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "decisions",
            "Decisions by route, outcome (admitted, limited, unavailable) and source (store, local, fail_open, fail_closed, deny_on_error, static, unlimited)",
            decisions.clone(),
        );
        let fallbacks = Family::<FallbackLabels, Counter>::default();
        registry.register(
            "fallback",
            "Decisions taken without the store, by reason (timeout, connection, breaker_open, refused: a store-wide error reply such as OOM or READONLY, error: a script error on this call)",
            fallbacks.clone(),
        );
        let breaker_state = Gauge::default();
        registry.register(
            "breaker_state",
            "Circuit breaker state: 0 closed, 1 open, 2 half-open",
            breaker_state.clone(),
        );
        let breaker_transitions = Family::<TransitionLabels, Counter>::default();
        registry.register(
            "breaker_transitions",
            "Circuit breaker transitions by the state entered",
            breaker_transitions.clone(),
        );
        let store_calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "store_calls",
            "Store calls by result (ok, timeout, connection, refused, error); retries count once each",
            store_calls.clone(),
        );
        // 50 µs to ~0.4 s: a healthy loopback call sits at the bottom, a timeout near 20–50 ms.
        let store_latency = Histogram::new(exponential_buckets(0.000_05, 2.0, 14));
        registry.register(
            "store_latency_seconds",
            "Latency of store calls that returned an answer",
            store_latency.clone(),
        );
        let script_reloads = Counter::default();
        registry.register(
            "store_script_reloads",
            "Scripts loaded again after NOSCRIPT (Redis restarted or flushed its scripts)",
            script_reloads.clone(),
        );
        let live_instances = Gauge::default();
        registry.register(
            "live_instances",
            "Instances sharing the limit: learnt from Redis, frozen while it is unreachable",
            live_instances.clone(),
        );
        let degraded = Gauge::default();
        registry.register(
            "degraded",
            "1 while decisions are taken without the store",
            degraded.clone(),
        );
        let evicted = Family::<MapLabels, Counter>::default();
        registry.register(
            "callers_evicted",
            "Callers forgotten because their route's map was full (--max-callers), least recently used first, by map (counters: local counters and turns; refusals: fail-static's held refusals)",
            evicted.clone(),
        );
        Self {
            registry,
            evicted,
            decisions,
            fallbacks,
            breaker_state,
            breaker_transitions,
            store_calls,
            store_latency,
            script_reloads,
            live_instances,
            degraded,
        }
    }

    pub fn decision(&self, route: &RouteLabel, outcome: &'static str, source: &'static str) {
        self.decisions
            .get_or_create(&DecisionLabels {
                route: route.clone(),
                outcome,
                source,
            })
            .inc();
    }

    pub fn fallback(&self, route: &RouteLabel, reason: &'static str) {
        self.fallbacks
            .get_or_create(&FallbackLabels {
                route: route.clone(),
                reason,
            })
            .inc();
    }

    pub fn breaker(&self, state: i64, name: &'static str, changed: bool) {
        self.breaker_state.set(state);
        if changed {
            self.breaker_transitions
                .get_or_create(&TransitionLabels { to: name })
                .inc();
        }
    }

    pub fn store_call(&self, result: &'static str) {
        self.store_calls.get_or_create(&CallLabels { result }).inc();
    }

    pub fn store_latency(&self, d: Duration) {
        self.store_latency.observe(d.as_secs_f64());
    }

    pub fn script_reloaded(&self) {
        self.script_reloads.inc();
    }

    pub fn live_instances(&self, n: u32) {
        self.live_instances.set(i64::from(n));
    }

    /// The counter of callers evicted from `route`'s `map`, for the map to increment.
    pub fn evicted(&self, route: &RouteLabel, map: &'static str) -> Counter {
        self.evicted
            .get_or_create(&MapLabels {
                route: route.clone(),
                map,
            })
            .clone()
    }

    pub fn degraded(&self, on: bool) {
        self.degraded.set(i64::from(on));
    }

    /// The exposition, in the OpenMetrics text format Prometheus scrapes.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names_route_outcome_source_and_reason() {
        let m = Metrics::new();
        let api = RouteLabel("api".into());
        m.decision(&api, "limited", "store");
        m.fallback(&api, "breaker_open");
        m.fallback(&api, "breaker_open");
        m.breaker(1, "open", true);
        let text = m.encode();
        assert!(text.contains(
            r#"failmode_decisions_total{route="api",outcome="limited",source="store"} 1"#
        ));
        assert!(text.contains(r#"failmode_fallback_total{route="api",reason="breaker_open"} 2"#));
        assert!(text.contains("failmode_breaker_state 1"));
        assert!(text.contains(r#"failmode_breaker_transitions_total{to="open"} 1"#));
    }
}
