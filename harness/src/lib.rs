//! failmode: a chaos and load-test harness for rate limiters.
//!
//! Dependencies point one way: `scenario` and `metrics` are leaves; `run` wires infrastructure,
//! targets, faults and load together; the CLI (`main.rs`) only parses and maps outcomes to exit
//! codes.

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
mod wait;
