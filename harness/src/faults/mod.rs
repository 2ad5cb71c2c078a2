//! Faults: what a scenario can break, and the player that applies a phase's faults to every
//! target at once.

mod fault;
pub mod timeline;

pub use fault::{Fault, PauseMode, explain};
// The old paths of what moved to `infra/`, kept for `main.rs` only until the CLI's move to
// `cli/` lands there; new code imports them from `infra`.
pub use crate::infra::{redis_native, toxiproxy};

/// A fault that could not be applied or removed.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error(transparent)]
    Toxiproxy(#[from] toxiproxy::ToxiproxyError),
    #[error(transparent)]
    Redis(#[from] redis_native::RedisCommandError),
    #[error(transparent)]
    Infra(#[from] crate::infra::InfraError),
    #[error("{0}: no redis-server is known for this target")]
    NoRedis(String),
    /// Boxed: a target's start failure carries its log's tail.
    #[error(transparent)]
    Fleet(Box<crate::targets::FleetError>),
    #[error("{0}: no instances are known for this target")]
    NoFleet(String),
    #[error("{0}: the task applying it panicked")]
    Panicked(String),
}

impl From<crate::targets::FleetError> for FaultError {
    fn from(e: crate::targets::FleetError) -> Self {
        Self::Fleet(Box::new(e))
    }
}
