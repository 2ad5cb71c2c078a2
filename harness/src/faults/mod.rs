//! Faults: what a scenario can break, as it writes it, validates it and explains it. Only what
//! a fault is: the player that applies them is in `run/timeline/`, the clients that break the
//! wire and the Redis in `infra/`.

mod fault;

pub use fault::{Fault, PauseMode, explain};
// The old paths of what moved to `infra/`, kept for `main.rs` only until the CLI's move to
// `cli/` lands there; new code imports them from `infra`.
pub use crate::infra::{redis_native, toxiproxy};
