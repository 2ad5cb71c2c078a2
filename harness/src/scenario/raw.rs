//! The scenario file as written: `deny_unknown_fields` structs that serde fills from TOML.
//!
//! Value-level checks (a negative rate, a bad duration) happen while deserializing, so the TOML
//! error carries the key and line; cross-field checks happen in `super::validate`.

use std::time::Duration;

use serde::{Deserialize, Deserializer};
use toml::Spanned;

use crate::load::{Arrival, Client, Spread};

/// A humantime duration (`"250ms"`, `"30s"`, `"1m"`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct HumanDuration(pub(crate) Duration);

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::duration::deserialize(d).map(HumanDuration)
    }
}

/// A strictly positive number (a rate, a limit).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Positive(pub(crate) f64);

impl<'de> Deserialize<'de> for Positive {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if v.is_finite() && v > 0.0 {
            Ok(Positive(v))
        } else {
            Err(serde::de::Error::custom(format!(
                "must be a number greater than zero, got {v}"
            )))
        }
    }
}

/// Above this a tenant's rate is refused: one generator process sends a few tens of
/// thousands of requests a second (docs/load-engine.md), and even `--worker` splits of this
/// would need hundreds of machines. A rate below it that the machine cannot send still ends on
/// time, its backlog dropped and the run marked untrusted.
pub(crate) const MAX_RATE_PER_S: f64 = 10_000_000.0;

/// A tenant's rate: requests a second, above zero and at most [`MAX_RATE_PER_S`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rate(pub(crate) f64);

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Positive(v) = Positive::deserialize(d)?;
        if v <= MAX_RATE_PER_S {
            Ok(Rate(v))
        } else {
            Err(serde::de::Error::custom(format!(
                "{v} requests a second is more than failmode sends for one tenant, even split \
                 over machines: at most {MAX_RATE_PER_S} (one failmode process sends some tens \
                 of thousands a second; `--worker K/N` splits a load up to this over machines)"
            )))
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) description: String,
    #[serde(default)]
    pub(crate) seed: u64,
    pub(crate) policy: Spanned<RawPolicy>,
    #[serde(default)]
    pub(crate) load: RawLoad,
    #[serde(default)]
    pub(crate) tenants: Vec<Spanned<RawTenant>>,
    /// Many callers with skewed rates, beside the named tenants.
    #[serde(default)]
    pub(crate) populations: Vec<Spanned<RawPopulation>>,
    pub(crate) targets: Vec<Spanned<RawTarget>>,
    pub(crate) phases: Vec<Spanned<RawPhase>>,
    /// What each target's Redis is (`super::redis`).
    pub(crate) redis: Option<Spanned<RawRedis>>,
    /// Thresholds; enforced by `failmode gate`.
    #[serde(default)]
    pub(crate) gates: Vec<toml::Table>,
    /// Statements from elsewhere to test against the run; judged by `failmode outcomes`.
    #[serde(default)]
    pub(crate) claims: Vec<toml::Table>,
    /// Safety limits that stop the run early (`crate::abort`).
    #[serde(default)]
    pub(crate) abort: Vec<toml::Table>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPolicy {
    pub(crate) limit: Positive,
    pub(crate) window: HumanDuration,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLoad {
    pub(crate) request_timeout: Option<HumanDuration>,
    pub(crate) max_in_flight_per_target: Option<usize>,
    pub(crate) spread: Option<Spread>,
    pub(crate) arrival: Option<Arrival>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTenant {
    pub(crate) name: String,
    pub(crate) rate: Rate,
    pub(crate) caller: Option<String>,
    pub(crate) arrival: Option<Arrival>,
    pub(crate) spread: Option<Spread>,
    #[serde(default)]
    pub(crate) client: Client,
}

/// `[[populations]]`: `keys` callers sending `rate` requests a second together, key k (from 1)
/// in proportion to k^−`zipf`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPopulation {
    pub(crate) name: String,
    pub(crate) keys: u64,
    pub(crate) rate: Rate,
    #[serde(default = "default_zipf")]
    pub(crate) zipf: f64,
    /// How many of the busiest keys are tenants of their own.
    pub(crate) top: Option<usize>,
    /// The keys' common start; default: the name and `-`.
    pub(crate) caller_prefix: Option<String>,
    pub(crate) arrival: Option<Arrival>,
    pub(crate) spread: Option<Spread>,
    #[serde(default)]
    pub(crate) client: Client,
}

fn default_zipf() -> f64 {
    1.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTarget {
    /// A target found by name (the project's, the checkout's or a built-in).
    pub(crate) name: Option<String>,
    /// Or a manifest file, relative to the scenario file…
    pub(crate) manifest: Option<String>,
    /// …and which of its `[[variants]]` (needed when it declares more than one).
    pub(crate) variant: Option<String>,
    pub(crate) instances: Option<u32>,
    /// Connections in use to it at once, at most (`load::Connections::max`).
    pub(crate) max_connections: Option<usize>,
    /// Whether its connections are kept for the next request (true).
    pub(crate) keep_alive: Option<bool>,
    /// Idle connections kept per instance, at most (`load::KeepAlive::On`'s `max_idle`).
    pub(crate) max_idle_connections: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPhase {
    pub(crate) name: String,
    pub(crate) start: HumanDuration,
    pub(crate) end: HumanDuration,
    #[serde(default)]
    pub(crate) faults: Vec<crate::faults::Fault>,
}

/// `[redis]`, checked against the phases in `super::redis`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRedis {
    pub(crate) topology: RawTopologyName,
    pub(crate) replication_lag: Option<HumanDuration>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RawTopologyName {
    Single,
    Sentinel,
}
