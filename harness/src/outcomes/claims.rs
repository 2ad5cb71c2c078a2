//! Claims: statements made elsewhere (an article, a vendor's docs) that a scenario tests. Each
//! is written as gate-style checks (`[[claims]]` in the scenario); the run confirms it when
//! every check holds (or `at_least` of them, for claims about "several" of something), and
//! refutes it otherwise. A check about a target the run did not include leaves the claim
//! untested, never confirmed.

use serde::Deserialize;

use super::OutcomesError;
use crate::gate::{self, Check, Gate};
use crate::results::RunResult;
use crate::results::read::SeriesRow;

/// One statement and the checks that decide it.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// Where it was said ("seed 004", a URL).
    pub source: String,
    pub says: String,
    pub checks: Vec<Gate>,
    /// How many of the checks must hold; `None`: all.
    pub at_least: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Confirmed,
    Refuted,
    /// Why it could not be judged on this run (e.g. a target it names did not run).
    NotTested(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct JudgedClaim {
    pub claim: Claim,
    pub verdict: Verdict,
    /// Every check on every target it matched, with the run's values.
    pub checks: Vec<Check>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClaim {
    source: String,
    says: String,
    checks: Vec<toml::Table>,
    at_least: Option<usize>,
}

/// Validates `[[claims]]` tables as written.
pub fn parse(tables: &[toml::Table]) -> Result<Vec<Claim>, OutcomesError> {
    tables
        .iter()
        .enumerate()
        .map(|(i, table)| {
            let invalid = |message: String| OutcomesError::Claim {
                index: i + 1,
                message,
            };
            let raw: RawClaim = table
                .clone()
                .try_into()
                .map_err(|e: toml::de::Error| invalid(e.message().to_owned()))?;
            if raw.checks.is_empty() {
                return Err(invalid("has no checks: nothing could confirm it".into()));
            }
            if raw.at_least == Some(0) {
                return Err(invalid(
                    "at_least = 0 would confirm it whatever happens".into(),
                ));
            }
            let checks = gate::parse_gates(&raw.checks).map_err(|e| invalid(e.to_string()))?;
            Ok(Claim {
                source: raw.source,
                says: raw.says,
                checks,
                at_least: raw.at_least,
            })
        })
        .collect()
}

/// Judges each claim on one run.
pub fn judge(run: &RunResult, series: &[SeriesRow], claims: Vec<Claim>) -> Vec<JudgedClaim> {
    claims
        .into_iter()
        .map(|claim| match gate::evaluate(run, series, &claim.checks) {
            Ok(checks) => {
                let holding = checks.iter().filter(|c| c.passed).count();
                let needed = claim.at_least.unwrap_or(checks.len());
                JudgedClaim {
                    verdict: if holding >= needed {
                        Verdict::Confirmed
                    } else {
                        Verdict::Refuted
                    },
                    claim,
                    checks,
                }
            }
            Err(e) => JudgedClaim {
                verdict: Verdict::NotTested(e.to_string()),
                claim,
                checks: Vec::new(),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    #[test]
    fn the_shipped_claims_parse_and_name_phases_and_targets_their_scenario_runs() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let mut with_claims = Vec::new();
        for name in crate::scenario::list(&dir) {
            let s = Scenario::find(&name, &dir).unwrap();
            let claims = parse(&s.claims).unwrap_or_else(|e| panic!("{name}: {e}"));
            for check in claims.iter().flat_map(|c| &c.checks) {
                assert!(
                    s.phases
                        .iter()
                        .any(|p| Some(&p.name) == check.phase.as_ref()),
                    "{name}: {check:?}"
                );
                assert!(
                    s.targets.iter().any(|t| t.name == check.target),
                    "{name}: a claim about a target the scenario does not run: {check:?}"
                );
            }
            if !claims.is_empty() {
                with_claims.push(name);
            }
        }
        assert_eq!(with_claims, ["peers", "peers-errors", "peers-failover"]);
    }
}
