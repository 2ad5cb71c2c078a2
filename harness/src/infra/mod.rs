//! Child processes the harness starts: redis-server, toxiproxy-server, target instances.
//! Each runs in its own process group, logs to a file the caller names, and is killed with
//! its whole group when dropped. And the container images a run in containers would start,
//! pinned (`images`).

pub mod images;
pub mod process;
pub mod redis;
pub mod toxiproxy_server;

pub use process::{
    ChildProcess, InfraError, LogExcerpt, free_port, locate, wait_for_tcp, workspace_root,
};
pub use redis::RedisServer;
pub use toxiproxy_server::ToxiproxyServer;
