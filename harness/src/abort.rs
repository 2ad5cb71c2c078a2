//! The abort guard: a safety limit for a run against a deployment failmode does not own (a
//! staging environment). `[[abort]]` tables, in the scenario or the deployment file, say when
//! to stop: a target's 5xx share above 50 % for 5 s, its p99 above 2 s for 10 s. The run then
//! removes every fault, stops the load and writes its results marked aborted, with the reason
//! (exit 4).
//!
//! A second is judged once every request scheduled in it has settled (sent, and answered or
//! timed out), over all tenants of the target together; a second nothing was scheduled in
//! breaks a streak, since it shows nothing crossed.

use std::num::NonZeroU32;

use serde::Deserialize;

use crate::metrics::Second;
use crate::names::{glob_matches, known, name_of};
use crate::thresholds::{naming_the_key, whole_seconds};

/// What a guard watches, per second of one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortMetric {
    /// 5xx answers ÷ requests scheduled in the second.
    Rate5xx,
    /// Refused, reset and timed-out requests ÷ requests scheduled in the second.
    RateTransportErrors,
    /// The second's p99 latency from the schedule, ms.
    P99Ms,
}

const METRICS: [(&str, AbortMetric); 3] = [
    ("rate_5xx", AbortMetric::Rate5xx),
    ("rate_transport_errors", AbortMetric::RateTransportErrors),
    ("p99_ms", AbortMetric::P99Ms),
];

impl AbortMetric {
    fn name(self) -> &'static str {
        name_of(&METRICS, &self)
    }

    /// Its value in `second`, or `None` when nothing was scheduled in it.
    fn of(self, second: &Second) -> Option<f64> {
        let c = &second.counts;
        let offered = c.offered as f64;
        (c.offered > 0).then(|| match self {
            Self::Rate5xx => c.errors_5xx() as f64 / offered,
            Self::RateTransportErrors => c.transport_error as f64 / offered,
            Self::P99Ms => second.p99_us as f64 / 1000.0,
        })
    }

    fn format(self, v: f64) -> String {
        match self {
            Self::Rate5xx | Self::RateTransportErrors => format!("{:.1} %", v * 100.0),
            Self::P99Ms => format!("{v:.0} ms"),
        }
    }
}

/// One safety limit.
#[derive(Debug, Clone, PartialEq)]
pub struct AbortRule {
    /// A target name or a glob (`*`, `?`).
    pub target: String,
    pub metric: AbortMetric,
    /// Crossed when the value is above this.
    pub max: f64,
    /// For this many seconds in a row.
    pub seconds: NonZeroU32,
}

impl std::fmt::Display for AbortRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} above {} for {} s",
            self.metric.name(),
            self.metric.format(self.max),
            self.seconds
        )
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    #[serde(default = "crate::thresholds::every_target")]
    target: String,
    metric: String,
    max: f64,
    #[serde(rename = "for")]
    for_: String,
}

/// Validates `[[abort]]` tables; the error names the table (1-based) and what is wrong.
pub fn parse_rules(tables: &[toml::Table]) -> Result<Vec<AbortRule>, String> {
    tables
        .iter()
        .enumerate()
        .map(|(i, table)| {
            let invalid = |message: String| format!("[[abort]] {}: {message}", i + 1);
            let raw: RawRule = table.clone().try_into().map_err(|e: toml::de::Error| {
                invalid(naming_the_key(table, &["max"], e.message()))
            })?;
            let metric = known(&METRICS, "metric", &raw.metric).map_err(invalid)?;
            if !raw.max.is_finite() || raw.max < 0.0 {
                return Err(invalid(format!(
                    "`max` = {}: must be a finite number, 0 or more",
                    raw.max
                )));
            }
            let seconds = whole_seconds("for", &raw.for_).map_err(invalid)?;
            Ok(AbortRule {
                target: raw.target,
                metric,
                max: raw.max,
                seconds,
            })
        })
        .collect()
}

/// A rule that guards no target of the run (its glob matches none): a safety limit that would
/// never fire, refused before anything starts.
pub fn unmatched(rules: &[AbortRule], targets: &[String]) -> Result<(), String> {
    match rules
        .iter()
        .find(|r| !targets.iter().any(|t| glob_matches(&r.target, t)))
    {
        Some(rule) => Err(format!(
            "abort guard `{rule}` names target {:?}, which matches no target of the run ({})",
            rule.target,
            targets.join(", ")
        )),
        None => Ok(()),
    }
}

/// The rules against the run's seconds: how long each has held on each target.
#[derive(Debug)]
pub struct Guard {
    rules: Vec<AbortRule>,
    targets: Vec<String>,
    /// `[rule][target]`: seconds in a row crossed so far (`None`: the rule does not apply).
    streaks: Vec<Vec<Option<u32>>>,
}

impl Guard {
    pub fn new(rules: Vec<AbortRule>, targets: Vec<String>) -> Self {
        let streaks = rules
            .iter()
            .map(|r| {
                targets
                    .iter()
                    .map(|t| glob_matches(&r.target, t).then_some(0))
                    .collect()
            })
            .collect();
        Self {
            rules,
            targets,
            streaks,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Judges one settled second (`at_s`, since the start), `per_target` in the run's target
    /// order; the reason to abort once a rule has held for its seconds on a target.
    pub fn judge(&mut self, at_s: u64, per_target: &[Second]) -> Option<String> {
        for (rule, streaks) in self.rules.iter().zip(&mut self.streaks) {
            for ((streak, second), name) in streaks.iter_mut().zip(per_target).zip(&self.targets) {
                let Some(held) = streak else { continue };
                match rule.metric.of(second) {
                    Some(v) if v > rule.max => {
                        *held += 1;
                        if *held >= rule.seconds.get() {
                            return Some(format!(
                                "{name}: {rule} (at {at_s} s: {})",
                                rule.metric.format(v)
                            ));
                        }
                    }
                    _ => *held = 0,
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Counts;

    fn rules(text: &str) -> Result<Vec<AbortRule>, String> {
        #[derive(Deserialize)]
        struct F {
            abort: Vec<toml::Table>,
        }
        parse_rules(&toml::from_str::<F>(text).unwrap().abort)
    }

    fn second(offered: u64, errors_5xx: u64, p99_ms: u64) -> Second {
        Second {
            counts: Counts {
                offered,
                admitted: offered - errors_5xx,
                server_error: errors_5xx,
                ..Counts::default()
            },
            p99_us: p99_ms * 1000,
            ..Second::default()
        }
    }

    #[test]
    fn a_share_above_its_max_for_its_seconds_in_a_row_aborts_naming_target_rule_and_value() {
        let r =
            rules("[[abort]]\ntarget = \"svc-*\"\nmetric = \"rate_5xx\"\nmax = 0.5\nfor = \"3s\"")
                .unwrap();
        let mut guard = Guard::new(r, vec!["svc-a".into(), "other".into()]);
        let bad = second(100, 60, 10);
        let fine = second(100, 10, 10);
        // `other` is not guarded: its 5xx never count.
        assert_eq!(guard.judge(0, &[bad, bad]), None);
        assert_eq!(guard.judge(1, &[bad, bad]), None);
        // A second below the max starts the count again.
        assert_eq!(guard.judge(2, &[fine, bad]), None);
        assert_eq!(guard.judge(3, &[bad, fine]), None);
        assert_eq!(guard.judge(4, &[bad, fine]), None);
        let reason = guard.judge(5, &[bad, fine]).unwrap();
        assert_eq!(
            reason,
            "svc-a: rate_5xx above 50.0 % for 3 s (at 5 s: 60.0 %)"
        );
        // Exactly at the max is not above it.
        let mut guard = Guard::new(
            rules("[[abort]]\nmetric = \"rate_5xx\"\nmax = 0.6\nfor = \"1s\"").unwrap(),
            vec!["svc-a".into()],
        );
        assert_eq!(guard.judge(0, &[bad]), None);
    }

    #[test]
    fn a_second_nothing_was_scheduled_in_breaks_a_streak() {
        let r = rules("[[abort]]\nmetric = \"p99_ms\"\nmax = 2000\nfor = \"2s\"").unwrap();
        let mut guard = Guard::new(r, vec!["svc".into()]);
        let slow = second(10, 0, 2500);
        assert_eq!(guard.judge(0, &[slow]), None);
        assert_eq!(guard.judge(1, &[Second::default()]), None);
        assert_eq!(guard.judge(2, &[slow]), None);
        assert!(
            guard
                .judge(3, &[slow])
                .unwrap()
                .contains("p99_ms above 2000 ms for 2 s")
        );
    }

    #[test]
    fn a_rule_that_makes_no_sense_or_guards_nothing_is_refused_naming_it() {
        let refused = |body: &str| rules(&format!("[[abort]]\n{body}")).unwrap_err();
        assert!(refused("metric = \"p50_ms\"\nmax = 1\nfor = \"5s\"").contains("unknown metric"));
        assert!(refused("metric = \"p99_ms\"\nmax = -1\nfor = \"5s\"").contains("`max`"));
        assert!(refused("metric = \"p99_ms\"\nmax = 1\nfor = \"500ms\"").contains("`for`"));
        assert!(
            refused("metric = \"p99_ms\"\nmax = \"1\"\nfor = \"1s\"")
                .starts_with("[[abort]] 1: `max`")
        );
        assert!(refused("metric = \"p99_ms\"\nmax = 1").contains("for"));
        assert!(refused("metric = \"p99_ms\"\nmax = 1\nfor = \"1s\"\nwhen = 1").contains("when"));
        let r = rules(
            "[[abort]]\ntarget = \"staging\"\nmetric = \"rate_5xx\"\nmax = 0.5\nfor = \"5s\"",
        )
        .unwrap();
        let err = unmatched(&r, &["svc".into()]).unwrap_err();
        assert!(
            err.contains("\"staging\", which matches no target of the run (svc)"),
            "{err}"
        );
        assert_eq!(unmatched(&r, &["staging".into()]), Ok(()));
    }
}
