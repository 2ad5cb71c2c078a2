//! failmode: a chaos and load-test harness for rate limiters.
//!
//! Dependencies point one way: `scenario` and `metrics` are leaves; `run` wires infrastructure,
//! targets, faults and load together; the CLI (`main.rs`) only parses and maps outcomes to exit
//! codes.

pub mod faults;
pub mod infra;
pub mod load;
