//! Two targets picked by name (`--baseline-target OLD --candidate-target NEW`): target OLD of
//! the baseline side against target NEW of the candidate side, phase by phase, by the same
//! rows and rule as two runs.
//!
//! What this is for: a release gate that runs the previous build and the candidate as two
//! targets of **one** run. A stored baseline comes from another runner on another day, and
//! that noise can exceed the regression; two targets of one run share the machine and the
//! fault timeline second by second. The sides may also be two runs (a target renamed between
//! releases, or one target picked out of many), a repeat folder (each run gives both targets)
//! or a baseline file (it keeps every target, so picking one is as good as from a folder).
//!
//! "The same run" is recognised by content, not by path: every run of one side equal to the
//! other's (`run.json` as read), so `results/latest`, the folder it points at and a baseline
//! saved from it are all the same run. In it, a target against itself is refused: it would
//! compare a measurement with itself. There is no control target for drift within one run:
//! every target saw the same machine at the same seconds, so the reference beside them has
//! nothing to correct; the drift check between two runs is the reference picked on both sides
//! (`--baseline-target reference`).

use serde::Serialize;

use super::{
    CompareError, CompareOptions, Comparison, RunSet, check_inputs, compare, limit_note, notes,
    ordered_union, target_rows, untrusted,
};

/// The targets asked for by name; either alone names the same target on the other side.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetPick {
    pub baseline: Option<String>,
    pub candidate: Option<String>,
}

/// Which target of each side a comparison's rows are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetPair {
    pub baseline: String,
    pub candidate: String,
    /// Both sides are the same run(s): the two targets ran side by side.
    pub same_run: bool,
}

impl TargetPair {
    /// What the rows' target column says: "OLD → NEW", or the name when it is one.
    pub fn label(&self) -> String {
        if self.baseline == self.candidate {
            self.baseline.clone()
        } else {
            format!("{} → {}", self.baseline, self.candidate)
        }
    }
}

impl TargetPick {
    pub fn is_empty(&self) -> bool {
        self.baseline.is_none() && self.candidate.is_none()
    }

    /// One results given for both sides: without a target picked, every target would be
    /// compared with itself.
    pub fn check_for_one_results(&self, set: &RunSet) -> Result<(), CompareError> {
        if self.is_empty() {
            return Err(CompareError::NoTargetsPicked {
                results: set.source.clone(),
                known: known(set),
            });
        }
        Ok(())
    }

    /// The names on each side, or why they cannot be compared.
    fn resolve(&self, baseline: &RunSet, candidate: &RunSet) -> Result<TargetPair, CompareError> {
        let either = self.baseline.as_ref().or(self.candidate.as_ref());
        let pick = |own: &Option<String>| own.as_ref().or(either).cloned().unwrap_or_default();
        let pair = TargetPair {
            baseline: pick(&self.baseline),
            candidate: pick(&self.candidate),
            same_run: same_run(baseline, candidate),
        };
        for (side, set, name) in [
            ("baseline", baseline, &pair.baseline),
            ("candidate", candidate, &pair.candidate),
        ] {
            if !set.targets().any(|t| t == name) {
                return Err(CompareError::UnknownTarget {
                    side,
                    results: set.source.clone(),
                    target: name.clone(),
                    known: known(set),
                });
            }
        }
        if pair.same_run && pair.baseline == pair.candidate {
            return Err(CompareError::SameTarget {
                results: baseline.source.clone(),
                target: pair.baseline,
                known: known(baseline),
            });
        }
        Ok(pair)
    }
}

/// The targets of a set, for an error that names what there is.
fn known(set: &RunSet) -> String {
    ordered_union(set.targets()).join(", ")
}

/// Whether both sides hold the same runs, in the same order: a run is known by its scenario,
/// seed, start time, revision and targets, not by its figures, which a baseline file written
/// from it and read back need not repeat to the last bit.
pub(super) fn same_run(a: &RunSet, b: &RunSet) -> bool {
    let identity = |r: &crate::results::RunResult| {
        (
            r.scenario.clone(),
            r.seed,
            r.started_at.clone(),
            r.git_revision.clone(),
            r.targets.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
        )
    };
    a.repeats.len() == b.repeats.len()
        && a.repeats
            .iter()
            .zip(&b.repeats)
            .all(|(x, y)| identity(&x.run) == identity(&y.run))
}

/// Compares target `pick.baseline` of the baseline with target `pick.candidate` of the
/// candidate (see the module header); with nothing picked, [`compare`]. Errs on a target a
/// side lacks, on one target against itself in one run, and as [`compare`] does.
pub fn compare_targets(
    baseline: &RunSet,
    candidate: &RunSet,
    pick: &TargetPick,
    opts: &CompareOptions,
) -> Result<Comparison, CompareError> {
    if pick.is_empty() {
        return compare(baseline, candidate, opts);
    }
    check_inputs(baseline, candidate, opts)?;
    let pair = pick.resolve(baseline, candidate)?;
    let (mut rows, mut one_sided) = (Vec::new(), Vec::new());
    target_rows(
        (baseline, candidate),
        (&pair.baseline, &pair.candidate),
        &pair.label(),
        opts,
        (&mut rows, &mut one_sided),
    );
    let (mut notes, untrusted) = if pair.same_run {
        (
            same_run_notes(baseline, &pair),
            same_run_untrusted(baseline),
        )
    } else {
        (notes(baseline, candidate), untrusted(baseline, candidate))
    };
    notes.extend(limit_note(
        baseline,
        &pair.baseline,
        candidate,
        &pair.candidate,
    ));
    Ok(Comparison {
        scenario: baseline.scenario.clone(),
        baseline: baseline.info(),
        candidate: candidate.info(),
        pair: Some(pair),
        options: *opts,
        rows,
        one_sided,
        notes,
        untrusted,
    })
}

/// The notes of two targets of one run: what sharing a run buys and what it does not.
fn same_run_notes(set: &RunSet, pair: &TargetPair) -> Vec<String> {
    let (b, c) = (&pair.baseline, &pair.candidate);
    let mut notes = vec![format!(
        "{b} and {c} ran side by side in the same run: the machine's drift and the fault \
         timeline were the same for both, second by second; the latency CIs still resample \
         each target's seconds on their own, not in pairs (a cautious interval)"
    )];
    for (i, r) in set.repeats.iter().enumerate() {
        let batch_of = |name: &str| {
            r.run
                .batches
                .iter()
                .position(|b| b.iter().any(|t| t == name))
        };
        if batch_of(b) != batch_of(c) {
            notes.push(format!(
                "run {}: {b} and {c} ran in different batches (--batch), one after the other: \
                 the machine's drift between the batches is part of the difference",
                i + 1
            ));
        }
        if r.run.partial {
            notes.push(format!(
                "run {} was interrupted: its figures cover what ran",
                i + 1
            ));
        }
    }
    notes
}

/// Why a run cannot be trusted, once per run (both sides are the same runs).
fn same_run_untrusted(set: &RunSet) -> Vec<String> {
    let mut why = Vec::new();
    for (i, r) in set.repeats.iter().enumerate() {
        for reason in r.run.untrusted() {
            why.push(format!("run {}: {reason}", i + 1));
        }
    }
    why
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use super::*;
    use crate::compare::{Metric, Repeat, Verdict};
    use crate::results::fixture;

    /// One phase, "slow", 10 s of 400 requests all admitted, in which the target sent Redis
    /// `store_commands` commands.
    fn target(name: &str, store_commands: u64) -> crate::results::TargetResult {
        let tenants = vec![fixture::tenant("acme", 400, 400, 10.0, Some(1_000))];
        let mut phase = fixture::phase("slow", (0.0, 10.0), &[], tenants);
        phase.store_commands = Some(store_commands);
        phase.store_amplification = Some(store_commands as f64 / 400.0);
        fixture::target(name, vec![phase])
    }

    /// `runs` runs in which "old" sends one Redis command a request and "new" three, beside
    /// "reference".
    fn set(runs: usize) -> RunSet {
        let repeats = (0..runs)
            .map(|i| {
                let mut run = fixture::run(
                    "gate",
                    vec![
                        target("old", 400),
                        target("new", 1_200),
                        target("reference", 400),
                    ],
                );
                run.started_at = format!("2026-12-01T10:0{i}:00Z");
                Repeat {
                    run,
                    series: Vec::new(),
                    seconds: BTreeMap::new(),
                }
            })
            .collect();
        RunSet {
            scenario: "gate".into(),
            source: "results/latest".into(),
            repeats,
        }
    }

    fn pick(baseline: Option<&str>, candidate: Option<&str>) -> TargetPick {
        TargetPick {
            baseline: baseline.map(Into::into),
            candidate: candidate.map(Into::into),
        }
    }

    #[test]
    fn two_targets_of_one_run_are_compared_in_every_repeat_as_two_runs_would_be() {
        let runs = set(2);
        let opts = CompareOptions::default();
        let c =
            compare_targets(&runs, &runs.clone(), &pick(Some("old"), Some("new")), &opts).unwrap();
        let pair = c.pair.as_ref().unwrap();
        assert!(pair.same_run);
        assert!(c.rows.iter().all(|r| r.target == "old → new"));
        let store = c
            .rows
            .iter()
            .find(|r| r.metric == Metric::StoreAmplification)
            .unwrap();
        assert_eq!((store.baseline, store.candidate), (Some(1.0), Some(3.0)));
        assert_eq!(store.verdict, Verdict::Worse);
        // Both repeats on each side: the evidence is a mean of two runs each.
        assert!(matches!(
            &store.evidence,
            crate::compare::Evidence::Runs { baseline_runs, candidate_runs, .. }
                if baseline_runs.len() == 2 && candidate_runs.len() == 2
        ));
        assert_eq!(c.exit_code(), 1);
        // The note says what sharing a run buys; the one about runs on a side does not apply.
        assert!(
            c.notes[0].contains("side by side in the same run"),
            "{:?}",
            c.notes
        );
        assert!(!c.notes.iter().any(|n| n.contains("one run on a side")));

        // Swapped, the verdict swaps; the reference against "old" finds nothing.
        let back = compare_targets(&runs, &runs, &pick(Some("new"), Some("old")), &opts).unwrap();
        assert_eq!(back.exit_code(), 0);
        let same = compare_targets(&runs, &runs, &pick(Some("reference"), Some("old")), &opts);
        assert!(
            same.unwrap()
                .rows
                .iter()
                .all(|r| r.verdict == Verdict::Same)
        );
    }

    #[test]
    fn a_missing_target_or_one_target_against_itself_in_one_run_is_refused_naming_the_targets() {
        let runs = set(1);
        let opts = CompareOptions::default();
        let err = compare_targets(&runs, &runs, &pick(Some("old"), Some("nope")), &opts);
        let err = err.unwrap_err();
        assert!(matches!(
            err,
            CompareError::UnknownTarget {
                side: "candidate",
                ..
            }
        ));
        assert!(
            err.to_string().contains("it has: old, new, reference"),
            "{err}"
        );

        // Either flag alone names the same target on the other side: in one run, itself.
        for lone in [pick(Some("old"), None), pick(None, Some("old"))] {
            let err = compare_targets(&runs, &runs, &lone, &opts).unwrap_err();
            assert!(matches!(err, CompareError::SameTarget { .. }), "{err}");
        }
        assert!(matches!(
            pick(None, None).check_for_one_results(&runs),
            Err(CompareError::NoTargetsPicked { .. })
        ));

        // Two runs: a target against itself is the drift check, and allowed.
        let mut other = set(1);
        other.repeats[0].run.started_at = "2026-12-02T10:00:00Z".into();
        let c = compare_targets(&runs, &other, &pick(Some("reference"), None), &opts).unwrap();
        assert_eq!(c.pair.as_ref().map(|p| p.same_run), Some(false));
        assert!(c.rows.iter().all(|r| r.target == "reference"));
        assert!(c.notes.iter().any(|n| n.contains("one run on a side")));
    }

    #[test]
    fn two_targets_run_in_different_batches_are_said_not_to_be_side_by_side() {
        let mut runs = set(1);
        runs.repeats[0].run.batches = vec![vec!["old".into()], vec!["new".into()]];
        let c = compare_targets(
            &runs,
            &runs,
            &pick(Some("old"), Some("new")),
            &CompareOptions::default(),
        )
        .unwrap();
        assert!(
            c.notes.iter().any(|n| n.contains("different batches")),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn targets_judged_against_different_limits_get_no_admission_verdict_and_fail() {
        let mut runs = set(1);
        let new = &mut runs.repeats[0].run.targets[1];
        assert_eq!(new.name, "new");
        new.limit = Some(crate::limits::TargetLimit {
            limit: 7.0,
            window_s: 2.0,
            source: crate::limits::LimitSource::Manifest,
        });
        let opts = CompareOptions::default();
        let c =
            compare_targets(&runs, &runs.clone(), &pick(Some("old"), Some("new")), &opts).unwrap();
        let admission: Vec<_> = c
            .rows
            .iter()
            .filter(|r| matches!(r.metric, Metric::OverAdmission | Metric::WrongfulDenial))
            .collect();
        assert!(!admission.is_empty());
        for row in admission {
            assert_eq!(row.certainty, crate::compare::Certainty::NotComparable);
            assert!(!row.judged || row.fails_unmeasured(), "{row:?}");
        }
        assert!(c.not_measured() > 0);
        assert!(
            c.notes
                .iter()
                .any(|n| n.starts_with("old → new was judged against")),
            "{:?}",
            c.notes
        );
    }
}
