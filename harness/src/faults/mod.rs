//! Faults: what a scenario can break, as it writes it, validates it and explains it. Only what
//! a fault is: the player that applies them is in `run/timeline/`, the clients that break the
//! wire and the Redis in `infra/`.

mod explain;
mod fault;

pub use explain::explain;
pub use fault::{FailoverHow, Fault, PauseMode};
