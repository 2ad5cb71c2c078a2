//! failmode: a chaos and load-test harness for rate limiters.
//!
//! Dependencies point one way, downward: no module imports one that imports it back, and
//! inside a folder no file imports a sibling that imports it back. From the bottom:
//!
//! - leaves, importing nothing of the crate: `names`, `duration`, `identity`, `wait`, `exit`;
//! - `infra` (child processes, containers, the Toxiproxy client, the commands that break a
//!   Redis) and `load` (the open-model engine and its outcomes);
//! - `metrics` (over `load`'s outcomes), `limits`, and `faults` (what a fault is, in the
//!   vocabulary of `infra`'s toxics and pauses);
//! - `targets` (manifests, fleets), then `scenario` (which reads the manifests it names) and
//!   `deployment` (an `--attach` file);
//! - `results` and `project`, then `gate` and `report`, then `compare` and `outcomes`;
//! - `run` wires infrastructure, targets, faults and load together for one run;
//! - the CLI (`cli/`, `main.rs`) on top: it parses, calls the library and maps outcomes to
//!   exit codes.

pub mod abort;
pub mod cli;
pub mod compare;
pub mod deployment;
mod duration;
pub mod exit;
pub mod faults;
pub mod gate;
pub mod identity;
pub mod infra;
pub mod limits;
pub mod load;
pub mod metrics;
pub mod names;
pub mod outcomes;
pub mod project;
pub mod report;
pub mod results;
pub mod run;
pub mod scenario;
pub mod targets;
mod thresholds;
mod wait;
