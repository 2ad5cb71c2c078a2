//! The limit a target's figures are judged against: the one its manifest declares the service
//! enforces (`[limit]`), or else the scenario's `[policy]`. A target's allowance, entitlement,
//! over-admission (also beyond the window slack), wrongful denial and recovery band all come
//! from it, so a run can compare targets that enforce different limits.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::metrics::derived;

/// Where a target's limit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitSource {
    /// The scenario's `[policy]`: failmode passes it to the target (`{limit}`, `{window_ms}`).
    Scenario,
    /// The target's manifest: the service reads its limit from its own configuration.
    Manifest,
    /// The deployment file a run attached with: the deployed service's own limit.
    Deployment,
}

/// Requests per caller per window, and where that rule came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TargetLimit {
    /// Requests per caller per window.
    pub limit: f64,
    pub window_s: f64,
    pub source: LimitSource,
}

impl TargetLimit {
    /// The scenario's rule.
    pub fn scenario(limit: f64, window: Duration) -> Self {
        Self {
            limit,
            window_s: window.as_secs_f64(),
            source: LimitSource::Scenario,
        }
    }

    /// Requests per caller per second (0 for a window of 0, which no valid input has).
    pub fn per_s(&self) -> f64 {
        if self.window_s > 0.0 {
            self.limit / self.window_s
        } else {
            0.0
        }
    }

    /// One caller's allowance over `length_s`: limit ÷ window × length.
    pub fn allowance(&self, length_s: f64) -> f64 {
        derived::allowance(self.limit, self.window_s, length_s)
    }

    /// What a limiter right in every window may admit beyond the allowance over `length_s`.
    pub fn window_slack(&self, length_s: f64) -> f64 {
        derived::window_slack(self.limit, self.window_s, length_s)
    }

    /// As the table and report show it: `40 per 1 s (the manifest's)`.
    pub fn describe(&self) -> String {
        let whose = match self.source {
            LimitSource::Scenario => "the scenario's",
            LimitSource::Manifest => "its manifest's",
            LimitSource::Deployment => "its deployment file's",
        };
        format!("{} per {} s ({whose})", self.limit, self.window_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_gives_its_allowance_and_slack() {
        let own = TargetLimit {
            limit: 40.0,
            window_s: 2.0,
            source: LimitSource::Manifest,
        };
        assert_eq!(own.per_s(), 20.0);
        assert_eq!(own.allowance(3.0), 60.0);
        assert_eq!(own.window_slack(4.0), derived::window_slack(40.0, 2.0, 4.0));
        assert_eq!(own.describe(), "40 per 2 s (its manifest's)");
        let scenario = TargetLimit::scenario(50.0, Duration::from_secs(1));
        assert_eq!(scenario.source, LimitSource::Scenario);
        assert_eq!(
            serde_json::to_string(&scenario).unwrap(),
            r#"{"limit":50.0,"window_s":1.0,"source":"scenario"}"#
        );
    }
}
