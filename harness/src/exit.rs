//! The exit codes of every command, written once: `failmode --help` prints this table, and
//! docs/verdicts.md repeats it (the README sums it up in a line). Later features add their
//! codes here.

pub const CODES: &str = "\
Exit status (every command):
  0    done; every check passed
  1    a check failed, including a check on a value that was not measured
  2    unusable input or a harness failure (gate on a partial run without --allow-partial,
       gate or compare on one worker's folder)
  3    a verdict (gate, compare, run --gate) on a measurement that cannot be trusted: the load
       generator dropped requests or fell behind beyond its thresholds (checks still printed)
  4    run stopped by its abort guard ([[abort]] in the scenario or deployment file): every
       fault removed, the load stopped, the results written marked aborted with the reason
  130  interrupted; what was measured is written, marked partial";
