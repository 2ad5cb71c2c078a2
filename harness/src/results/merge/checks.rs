//! Whether the folders to merge are one run's shares: the same scenario, seed, scale, targets
//! and start, every share once, and one process that played the faults.

use std::collections::BTreeSet;

use super::error::MergeError;
use super::part::Part;
use crate::load::{Role, Share};

/// The parts are one run's: same scenario, seed, scale, targets, start and worker count.
pub(super) fn check_same_run(parts: &[Part]) -> Result<(), MergeError> {
    let first = &parts[0];
    let names = |p: &Part| {
        p.run
            .targets
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>()
            .join(",")
    };
    // Each target's rule and caller identity: workers attached with different deployment
    // files would sum counts judged by different rules.
    let rules = |p: &Part| {
        p.run
            .targets
            .iter()
            .map(|t| {
                let limit = p.run.limit_of(t);
                let caller = t
                    .caller
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                format!("{}: {} by {caller}", t.name, limit.describe())
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    for part in &parts[1..] {
        let checks: [(&'static str, String, String); 6] = [
            (
                "scenario",
                first.scenario.source.clone(),
                part.scenario.source.clone(),
            ),
            (
                "seed",
                first.run.seed.to_string(),
                part.run.seed.to_string(),
            ),
            (
                "duration scale",
                first.run.duration_scale.to_string(),
                part.run.duration_scale.to_string(),
            ),
            ("targets", names(first), names(part)),
            (
                "targets' limits and caller identities",
                rules(first),
                rules(part),
            ),
            (
                "start time (ms since the epoch)",
                first.worker.start_at_ms.to_string(),
                part.worker.start_at_ms.to_string(),
            ),
        ];
        for (what, expected, found) in checks {
            if expected != found {
                let (expected, found) = if what == "scenario" {
                    ("its scenario.toml".to_owned(), "another".to_owned())
                } else {
                    (expected, found)
                };
                return Err(MergeError::Mismatch {
                    path: part.path.clone(),
                    first: first.path.clone(),
                    what,
                    expected,
                    found,
                });
            }
        }
    }
    Ok(())
}

/// Every share 1..=N exactly once, at most one faults-only process, and one process that
/// played the faults (unless the scenario has none). Returns the index of that process.
pub(super) fn check_shares(parts: &[Part]) -> Result<Option<usize>, MergeError> {
    let load: Vec<(&Part, Share)> = parts
        .iter()
        .filter_map(|p| match p.worker.role {
            Role::Sender(share) => Some((p, share)),
            Role::FaultPlayer => None,
        })
        .collect();
    let Some(count) = load.first().map(|(_, share)| share.count()) else {
        return Err(MergeError::Shares(
            "no worker sent load: name the folders of `failmode run --worker K/N`".into(),
        ));
    };
    let mut seen = BTreeSet::new();
    for &(p, share) in &load {
        if share.count() != count {
            return Err(MergeError::Shares(format!(
                "{} was worker {} but {} was worker {share}: not the same split",
                load[0].0.path.display(),
                load[0].1,
                p.path.display(),
            )));
        }
        if !seen.insert(share.index()) {
            return Err(MergeError::Shares(format!(
                "worker {share} appears twice (again in {})",
                p.path.display()
            )));
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|k| !seen.contains(k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Shares(format!(
            "the results of worker {} are missing: without them the load is not the scenario's",
            missing.join(", ")
        )));
    }
    if parts
        .iter()
        .filter(|p| p.worker.role == Role::FaultPlayer)
        .count()
        > 1
    {
        return Err(MergeError::Shares(
            "two faults-only folders: one process plays the faults".into(),
        ));
    }
    let drivers: Vec<usize> = (0..parts.len())
        .filter(|&i| parts[i].worker.drives_faults)
        .collect();
    let has_faults = parts[0]
        .scenario
        .phases
        .iter()
        .any(|p| !p.faults.is_empty());
    match drivers.as_slice() {
        [one] => Ok(Some(*one)),
        [] if !has_faults => Ok(None),
        [] => Err(MergeError::Shares(
            "no folder played the fault timeline: add the folder of the worker (or of \
             `failmode faults play`) that did"
                .into(),
        )),
        _ => Err(MergeError::Shares(format!(
            "{} folders played the fault timeline ({}): one process must",
            drivers.len(),
            drivers
                .iter()
                .map(|&i| parts[i].path.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}
