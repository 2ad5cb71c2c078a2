//! Faults: what a scenario can break, the Toxiproxy client that breaks the wire, what breaks a
//! target's own Redis, and the player that applies a phase's faults to every target at once.

mod fault;
pub mod redis_native;
pub mod timeline;
pub mod toxic;
pub mod toxiproxy;

use std::net::SocketAddr;

pub use fault::{Fault, PauseMode, explain};

/// A fault that could not be applied or removed.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error(transparent)]
    Toxiproxy(#[from] toxiproxy::ToxiproxyError),
    #[error("{op} on redis-server {addr}: {detail}")]
    Redis {
        op: String,
        addr: SocketAddr,
        detail: String,
    },
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

impl FaultError {
    fn redis(op: &str, addr: SocketAddr, e: redis::RedisError) -> Self {
        Self::Redis {
            op: op.to_owned(),
            addr,
            detail: e.to_string(),
        }
    }
}
