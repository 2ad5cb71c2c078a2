//! What a run's Redis and Toxiproxy run as: child processes the harness starts (redis-server,
//! toxiproxy-server; the target instances too), each in its own process group, logging to a
//! file the caller names and killed with its whole group when dropped, or by its watcher
//! (`guard`) when the harness dies without dropping it; or, with the cargo
//! feature `docker` and `--infra docker`, containers at the pinned images (`containers`,
//! `images`). And the clients that speak to them: Toxiproxy's HTTP API (`toxiproxy`) and
//! the commands that are faults inside a Redis (`redis_native`, and `redis_errors` for those
//! that make it answer with errors), and the sentinels of a Sentinel topology (`sentinel`). Nothing here knows what a
//! scenario or a fault is: the layers above say what to break, this says how.

pub mod backend;
#[cfg(feature = "docker")]
pub mod containers;
mod error;
pub mod guard;
pub mod images;
pub mod process;
pub mod programs;
pub mod redis;
pub mod redis_errors;
pub mod redis_native;
pub mod sentinel;
pub mod sockets;
pub mod toxiproxy;
pub mod toxiproxy_server;

pub use backend::{DockerNotBuilt, Infra};
pub use error::{InfraError, LogExcerpt, describe_status};
pub use process::{ChildProcess, free_port, wait_for_tcp};
pub use programs::{
    checkout_above, install_hint, is_checkout, is_executable, locate, tools_bin, workspace_root,
};
pub use redis::RedisServer;
pub use toxiproxy_server::ToxiproxyServer;
