//! Faults: what a scenario can break, the Toxiproxy client that breaks it, and the player that
//! applies a phase's faults to every target at once.

mod fault;
pub mod timeline;
pub mod toxic;
pub mod toxiproxy;

pub use fault::Fault;
